"""The ONNX backend test suite through kiln's JIT path (issue 7).

    /usr/bin/python3 tests/onnx/conformance.py --kiln build/api/kiln \
        [--expected tests/onnx/expected_pass.txt] [--update] [--data DIR]

Runs `kiln test-onnx` over the four folders Debian's libonnx-testdata installs (node,
pytorch-converted, pytorch-operator, simple), leaving out the cases that are out of scope
(training-only ops, strings, optionals, maps: see Classify; sequences of tensors are in
scope), and prints per folder the
in-scope count, how many passed, and the out-of-scope counts by category; then how many of
the passing cases ran no compiled kernel (their outputs folded at specialization by the
reference kernels, or copied from inputs), and which.

The committed list of cases expected to pass only grows: this exits 1 if any case on it fails
(or crashes the process), and names the newly passing cases to add. `--update` adds them.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

import onnx

FOLDERS = ["node", "pytorch-converted", "pytorch-operator", "simple"]

# Ops that exist only for training (ai.onnx.preview.training, or a gradient), whose cases are
# out of scope.
TRAINING_OPS = {"Adagrad", "Adam", "Momentum", "Gradient"}
STRING_OPS = {"StringNormalizer", "RegexFullMatch", "StringConcat", "StringSplit"}
OPTIONAL_OPS = {"Optional", "OptionalGetElement", "OptionalHasElement"}


def _value_kinds(type_proto, kinds):
    """Adds 'strings', 'optionals' or 'maps' for what a TypeProto holds (a sequence of tensors
    is in scope: it adds what its elements hold)."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        if type_proto.tensor_type.elem_type == onnx.TensorProto.STRING:
            kinds.add("strings")
    elif which == "sequence_type":
        _value_kinds(type_proto.sequence_type.elem_type, kinds)
    elif which == "optional_type":
        kinds.add("optionals")
        _value_kinds(type_proto.optional_type.elem_type, kinds)
    elif which == "map_type":
        kinds.add("maps")


def _graph_kinds(graph, kinds):
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        _value_kinds(v.type, kinds)
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.STRING:
            kinds.add("strings")
    for node in graph.node:
        if node.domain == "ai.onnx.preview.training" or node.op_type in TRAINING_OPS:
            kinds.add("training")
        if node.op_type in STRING_OPS:
            kinds.add("strings")
        if node.op_type in OPTIONAL_OPS:
            kinds.add("optionals")
        for a in node.attribute:
            if a.name == "to" and a.i == onnx.TensorProto.STRING and node.op_type == "Cast":
                kinds.add("strings")
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == onnx.TensorProto.STRING:
                kinds.add("strings")
            if a.type == onnx.AttributeProto.GRAPH:
                _graph_kinds(a.g, kinds)
            for g in a.graphs:
                _graph_kinds(g, kinds)
        if node.op_type in ("BatchNormalization", "Dropout"):
            for a in node.attribute:
                if a.name == "training_mode" and a.i == 1:
                    kinds.add("training")
            if node.op_type == "Dropout" and len(node.input) >= 3 and node.input[2]:
                kinds.add("training")  # training_mode given as an input


def Classify(case_dir):
    """The out-of-scope category of a case ('training', 'strings', 'optionals', 'maps'),
    or None when it is in scope. A model that cannot be read is in scope (kiln must fail it
    with a reason, not crash)."""
    try:
        model = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    except Exception:  # a broken model is kiln's to reject
        return None
    kinds = set()
    for opset in model.opset_import:
        if opset.domain == "ai.onnx.preview.training":
            kinds.add("training")
    _graph_kinds(model.graph, kinds)
    for category in ("training", "strings", "optionals", "maps"):
        if category in kinds:
            return category
    return None


# `kiln test-onnx` marks a passing case whose outputs no compiled kernel computed.
NO_KERNEL_NOTE = "(no compiled kernel ran)"


def RunKiln(kiln, case_dirs):
    """{case dir: (passed, reason, ran_kernel)}. Cases run in chunks; a chunk whose process dies
    is rerun one case at a time, so a crash is pinned on its case (and reported as a failure)."""
    results = {}

    def run(dirs):
        p = subprocess.run([kiln, "test-onnx"] + dirs, capture_output=True, text=True)
        by_name = {}
        for line in p.stdout.splitlines():
            if line.startswith("PASS "):
                name, _, note = line[5:].strip().partition(" ")
                by_name[name] = (True, "", note != NO_KERNEL_NOTE)
            elif line.startswith("FAIL "):
                name, _, reason = line[5:].partition(": ")
                by_name[name.strip()] = (False, reason, False)
        return p.returncode, by_name

    chunk = 64
    for i in range(0, len(case_dirs), chunk):
        dirs = case_dirs[i:i + chunk]
        rc, by_name = run(dirs)
        if rc < 0 or any(os.path.basename(d) not in by_name for d in dirs):
            for d in dirs:
                rc1, one = run([d])
                name = os.path.basename(d)
                if rc1 < 0 or name not in one:
                    results[d] = (False, "CRASH: kiln died with signal %d" % -rc1 if rc1 < 0
                                  else "no result line (exit %d)" % rc1, False)
                else:
                    results[d] = one[name]
        else:
            for d in dirs:
                results[d] = by_name[os.path.basename(d)]
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--expected", default=os.path.join(os.path.dirname(__file__),
                                                       "expected_pass.txt"))
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data")
    ap.add_argument("--update", action="store_true", help="add newly passing cases to the list")
    args = ap.parse_args()

    expected = set()
    if os.path.exists(args.expected):
        with open(args.expected) as f:
            expected = {l.strip() for l in f if l.strip() and not l.startswith("#")}

    passed, failed, crashed = set(), {}, []
    no_kernel = []  # passing cases that ran no compiled kernel
    total_in, total_pass = 0, 0
    reasons = collections.Counter()
    for folder in FOLDERS:
        root = os.path.join(args.data, folder)
        if not os.path.isdir(root):
            print("%s: missing (%s)" % (folder, root))
            continue
        cases = sorted(os.path.join(root, d) for d in os.listdir(root)
                       if os.path.isfile(os.path.join(root, d, "model.onnx")))
        out_of_scope = collections.Counter()
        in_scope = []
        for c in cases:
            category = Classify(c)
            if category:
                out_of_scope[category] += 1
            else:
                in_scope.append(c)
        results = RunKiln(args.kiln, in_scope)
        n_pass = 0
        for c, (ok, reason, ran_kernel) in results.items():
            name = "%s/%s" % (folder, os.path.basename(c))
            if ok:
                passed.add(name)
                n_pass += 1
                if not ran_kernel:
                    no_kernel.append(name)
            else:
                failed[name] = reason
                # Grouped without the node and file names that make each reason unique.
                key = re.sub(r"node '[^']*'", "node", reason.split(": ")[-1])
                reasons[key[:110]] += 1
                if reason.startswith("CRASH"):
                    crashed.append(name)
        total_in += len(in_scope)
        total_pass += n_pass
        oos = ", ".join("%s %d" % kv for kv in sorted(out_of_scope.items())) or "none"
        print("%-18s in scope %4d  passed %4d (%5.1f%%)  out of scope: %s" % (
            folder, len(in_scope), n_pass, 100.0 * n_pass / max(1, len(in_scope)), oos))
    print("%-18s in scope %4d  passed %4d (%5.1f%%)" % (
        "all", total_in, total_pass, 100.0 * total_pass / max(1, total_in)))
    # Passing, but not through the JIT: the honest JIT figure is the difference.
    print("of the %d passing, %d ran no compiled kernel (outputs folded at specialization or "
          "copied from inputs)%s" % (total_pass, len(no_kernel), ":" if no_kernel else ""))
    for name in sorted(no_kernel):
        print("  %s" % name)
    print("%-18s in scope %4d  passed %4d (%5.1f%%) with compiled kernels" % (
        "through the JIT", total_in, total_pass - len(no_kernel),
        100.0 * (total_pass - len(no_kernel)) / max(1, total_in)))
    print("most common failure reasons:")
    for reason, n in reasons.most_common(10):
        print("  %4d  %s" % (n, reason))

    status = 0
    regressed = sorted(e for e in expected if e not in passed)
    if regressed:
        status = 1
        print("FAIL: %d cases on %s no longer pass:" % (len(regressed), args.expected))
        for r in regressed:
            print("  %s: %s" % (r, failed.get(r, "not run (missing or out of scope)")))
    if crashed:
        status = 1
        print("FAIL: cases crashed kiln: %s" % ", ".join(crashed))
    new = sorted(passed - expected)
    if new:
        if args.update:
            with open(args.expected, "w") as f:
                f.write("# ONNX backend cases that pass through kiln's JIT path; this list only "
                        "grows.\n# Regenerate: /usr/bin/python3 tests/onnx/conformance.py "
                        "--kiln build/api/kiln --update\n")
                for name in sorted(expected | passed):
                    f.write(name + "\n")
            print("added %d newly passing cases to %s" % (len(new), args.expected))
        else:
            print("%d newly passing cases are not on the list (add them with --update): %s" % (
                len(new), " ".join(new[:20]) + (" ..." if len(new) > 20 else "")))
    return status


if __name__ == "__main__":
    sys.exit(main())
