"""How `kiln test-onnx` compares outputs (api/cli/kiln.cc, Compare) and what it prints.

    /usr/bin/python3 tests/onnx/test_onnx_compare.py --kiln build/api/kiln [--keep DIR]

Builds small ONNX case folders (model.onnx, test_data_set_0/input_*.pb, output_0.pb) whose
expected output is wrong in one precise way, runs `kiln test-onnx` on each, and checks the
whole result line (the failure message names the output, the element, got and expected), the
exit status, and that `N passed, M failed` is the last line. The must-fail cases are those a
loose comparison lets through: an infinity matched by a finite value or by the other infinity,
64-bit integers compared through double, integers compared with the float tolerances.

Prints one line per check and a closing `N passed, M failed`; exits 1 on any failure. Needs
Debian's python3-onnx and numpy (so /usr/bin/python3, not another interpreter on PATH).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

ONNX_TYPES = {
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.int64): onnx.TensorProto.INT64,
    np.dtype(np.uint64): onnx.TensorProto.UINT64,
    np.dtype(np.bool_): onnx.TensorProto.BOOL,
}


def WriteTensor(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())


def MakeCase(root, name, op, inputs, expected, constants=None):
    """A case folder `root/name`: one `op` node over graph inputs x0, x1, ... (the arrays of
    `inputs`, also its test data) and initializers c0, c1, ... (`constants`), with output y,
    shaped as `expected` (the output_0.pb written, however wrong) and of the element type the
    op computes, the inputs' (kiln refuses a model that declares another)."""
    constants = constants or []
    dir_ = os.path.join(root, name)
    os.makedirs(os.path.join(dir_, "test_data_set_0"), exist_ok=True)
    in_names = ["x%d" % i for i in range(len(inputs))]
    const_names = ["c%d" % i for i in range(len(constants))]
    graph = helper.make_graph(
        [helper.make_node(op, in_names + const_names, ["y"])], name,
        [helper.make_tensor_value_info(n, ONNX_TYPES[a.dtype], a.shape)
         for n, a in zip(in_names, inputs)],
        [helper.make_tensor_value_info("y", ONNX_TYPES[(inputs + constants)[0].dtype],
                                       expected.shape)],
        [numpy_helper.from_array(a, n) for n, a in zip(const_names, constants)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(dir_, "model.onnx"))
    for i, a in enumerate(inputs):
        WriteTensor(os.path.join(dir_, "test_data_set_0", "input_%d.pb" % i), a)
    WriteTensor(os.path.join(dir_, "test_data_set_0", "output_0.pb"), expected)
    return dir_


def F32(*values):
    return np.array(values, dtype=np.float32)


def QuietNaNWithPayload(payload):
    return np.array([0x7FC00000 | payload], dtype=np.uint32).view(np.float32)


# (name, op, inputs, expected output, extra kiln flags, the result line after `PASS `/`FAIL `).
# Failures read `NAME: test_data_set_0: output 'y': ...`; `NAME` stands for the case name.
FAIL_PREFIX = "FAIL NAME: test_data_set_0: output 'y': "
CASES = [
    # Floats: an expected infinity is matched only by the same infinity.
    ("inf_got_finite_large", "Add", [F32(1e38, 2), F32(0, 0)], F32(np.inf, 2), [],
     FAIL_PREFIX + "element 0: got 9.99999968e+37, expected inf"),
    ("inf_got_negative_inf", "Add", [F32(1, -np.inf), F32(0, 0)], F32(1, np.inf), [],
     FAIL_PREFIX + "element 1: got -inf, expected inf"),
    ("f16_inf_got_max_finite", "Add",
     [np.array([65504], dtype=np.float16), np.array([0], dtype=np.float16)],
     np.array([np.inf], dtype=np.float16), ["--rtol", "1", "--atol", "1"],
     FAIL_PREFIX + "element 0: got 65504, expected inf"),
    # An expected NaN is matched only by a NaN, and a NaN matches nothing else.
    ("nan_got_number", "Add", [F32(1, 2), F32(0, 0)], F32(1, np.nan), [],
     FAIL_PREFIX + "element 1: got 2, expected nan"),
    ("number_got_nan", "Add", [F32(np.nan, 2), F32(0, 0)], F32(1, 2), ["--atol", "1e30"],
     FAIL_PREFIX + "element 0: got nan, expected 1"),
    # Integers and bools exactly: no tolerance, and 64-bit values not through double (2^60 + 1
    # and 2^60 are one double).
    ("int64_off_by_one_at_2_60", "Add",
     [np.array([2**60, 5], dtype=np.int64), np.array([1, 1], dtype=np.int64)],
     np.array([2**60, 6], dtype=np.int64), [],
     FAIL_PREFIX + "element 0: got 1152921504606846977, expected 1152921504606846976"),
    ("uint64_off_by_one_at_2_63", "Add",
     [np.array([2**63], dtype=np.uint64), np.array([1], dtype=np.uint64)],
     np.array([2**63 + 2], dtype=np.uint64), [],
     FAIL_PREFIX + "element 0: got 9223372036854775809, expected 9223372036854775810"),
    ("int32_off_by_one_within_atol", "Add",
     [np.array([5, -3], dtype=np.int32), np.array([1, 0], dtype=np.int32)],
     np.array([6, -4], dtype=np.int32), ["--atol", "10", "--rtol", "1"],
     FAIL_PREFIX + "element 1: got -3, expected -4"),
    ("bool_differs", "Not", [np.array([True, False, True])], np.array([False, False, False]),
     ["--atol", "10"], FAIL_PREFIX + "element 1: got true, expected false"),
    # A dtype or shape that differs fails before any value is compared.
    ("dtype_differs", "Add", [np.array([1], dtype=np.int64), np.array([1], dtype=np.int64)],
     np.array([2], dtype=np.int32), [], None),
    ("shape_differs", "Add", [F32(1, 2), F32(0, 0)], F32(1, 2).reshape(1, 2), [], None),
    ("f64_beyond_rtol", "Add",
     [np.array([1.0], dtype=np.float64), np.array([0.0], dtype=np.float64)],
     np.array([1.0 + 2e-9], dtype=np.float64), ["--rtol", "1e-9", "--atol", "0"],
     FAIL_PREFIX + "element 0: got 1, expected 1.0000000019999999"),
    # What must match.
    ("inf_matches_inf", "Add", [F32(np.inf, -np.inf, 1), F32(0, 0, 0)], F32(np.inf, -np.inf, 1),
     [], "PASS NAME"),
    ("nan_matches_any_nan", "Add", [F32(np.nan, 1), F32(0, 0)],
     np.concatenate([QuietNaNWithPayload(0x1234), F32(1)]), [], "PASS NAME"),
    ("floats_within_tolerance", "Add", [F32(1000, 0, -2), F32(0, 0, 0)],
     F32(1000.9, 9e-6, -2.0019), ["--rtol", "1e-3", "--atol", "1e-5"], "PASS NAME"),
    ("int64_equal_at_2_60", "Add",
     [np.array([2**60], dtype=np.int64), np.array([1], dtype=np.int64)],
     np.array([2**60 + 1], dtype=np.int64), [], "PASS NAME"),
    ("bool_equal", "Not", [np.array([True, False])], np.array([False, True]), [], "PASS NAME"),
]
# The dtype and shape messages, written out (the case tables above hold only element ones).
MISMATCH_LINES = {
    "dtype_differs": FAIL_PREFIX + "got i64[1], expected i32[1]",
    "shape_differs": FAIL_PREFIX + "got f32[2], expected f32[1, 2]",
}


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def Check(self, name, ok, detail):
        if ok:
            self.passed += 1
            print("ok   %s" % name)
        else:
            self.failed += 1
            print("FAIL %s: %s" % (name, detail))


def RunKiln(kiln, args):
    p = subprocess.run([kiln, "test-onnx"] + args, capture_output=True, text=True)
    return p.returncode, p.stdout.splitlines(), p.stderr


def CheckOneCase(checker, kiln, root, case):
    name, op, inputs, expected, flags, line = case
    line = (line or MISMATCH_LINES[name]).replace("NAME", name)
    dir_ = MakeCase(root, name, op, inputs, expected)
    rc, out, err = RunKiln(kiln, flags + [dir_])
    must_pass = line.startswith("PASS ")
    # The whole output: a pass also counts the passes that ran no compiled kernel (none here:
    # the inputs are the test data, so the op runs as a kernel), and the last line is the total.
    want = ([line, "0 of 1 passing cases ran no compiled kernel (outputs folded or copied)",
             "1 passed, 0 failed"] if must_pass else [line, "0 passed, 1 failed"])
    ok = out == want and rc == (0 if must_pass else 1)
    checker.Check(name, ok, "want exit %d and:\n%s\ngot exit %d and:\n%s%s" % (
        0 if must_pass else 1, "\n".join(want), rc, "\n".join(out), err))


def CheckNoKernelNote(checker, kiln, root):
    """A case whose output comes from no compiled kernel says so, and the summary counts it."""
    add = MakeCase(root, "note_add", "Add", [F32(1, 2), F32(3, 4)], F32(4, 6))
    copy = MakeCase(root, "note_identity", "Identity", [F32(1, 2)], F32(1, 2))
    # Both operands are constants: the engine folds the sum at specialization.
    folded = MakeCase(root, "note_folded", "Add", [], F32(4, 6), constants=[F32(1, 2), F32(3, 4)])
    wrong = MakeCase(root, "note_wrong", "Identity", [F32(1, 2)], F32(1, 3))
    rc, out, err = RunKiln(kiln, [add, copy, folded, wrong])
    want = [
        "PASS note_add",
        "PASS note_identity (no compiled kernel ran)",
        "PASS note_folded (no compiled kernel ran)",
        "FAIL note_wrong: test_data_set_0: output 'y': element 1: got 2, expected 3",
        "2 of 3 passing cases ran no compiled kernel (outputs folded or copied)",
        "3 passed, 1 failed",
    ]
    checker.Check("no_compiled_kernel_note", rc == 1 and out == want,
                  "want exit 1 and:\n%s\ngot exit %d and:\n%s%s" % (
                      "\n".join(want), rc, "\n".join(out), err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--keep", help="build the cases here (kept) instead of a temporary folder")
    args = ap.parse_args()
    checker = Checker()
    with tempfile.TemporaryDirectory(prefix="kiln_compare_") as tmp:
        root = args.keep or tmp
        for case in CASES:
            CheckOneCase(checker, args.kiln, root, case)
        CheckNoKernelNote(checker, args.kiln, root)
    print("%d passed, %d failed" % (checker.passed, checker.failed))
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main())
