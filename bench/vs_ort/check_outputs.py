"""kiln's outputs beside ONNX Runtime's on the side-by-side model set, one random input per row of
compare.py's table. Not a test (CI has no ONNX Runtime); run it after a kernel or pass change,
before timing it.

    /usr/bin/python3 bench/vs_ort/check_outputs.py --kiln build/api/kiln \
        --ort build/ort/ort_cbench --models build/vs_ort [--only ocr_rec,mlp] [--rtol 1e-3]

For each row: a standard-normal input (seeded), ONNX Runtime's outputs (`all` level, dumped by
ort_cbench), written as an ONNX backend test case (model.onnx, test_data_set_0/*.pb) that
`kiln test-onnx` then runs, comparing kiln's outputs within the tolerances. Prints one line per
row: PASS, or kiln test-onnx's report.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import numpy_helper

from compare import ROWS


def OrtOutputs(ort, model, shapes, inputs, case_dir):
    """ONNX Runtime's outputs for `inputs`, in the order it reports them."""
    cmd = [ort, "--model", model, "--runs", "1", "--min-sec", "0", "--warmup", "0",
           "--dump-outputs", case_dir, "--verbose"]
    for name, shape in shapes.items():
        path = os.path.join(case_dir, name + ".in.bin")
        inputs[name].tofile(path)
        cmd += ["--input", "%s=%s" % (name, ",".join(map(str, shape))),
                "--input-file", "%s=%s" % (name, path)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("ort_cbench: " + (p.stderr or p.stdout).strip()[-300:])
    outs = []
    for m in re.finditer(r"wrote output (\S+) float\[([0-9,]*)\] -> (\S+)", p.stderr):
        shape = [int(d) for d in m.group(2).split(",") if d]
        outs.append((m.group(1), np.fromfile(m.group(3), dtype=np.float32).reshape(shape)))
    if not outs:
        raise RuntimeError("ort_cbench dumped no float outputs")
    return outs


def CheckRow(args, model, shapes, seed):
    rng = np.random.default_rng(seed)
    inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    case = tempfile.mkdtemp(prefix="kiln_check_")
    try:
        shutil.copy(model, os.path.join(case, "model.onnx"))
        data = os.path.join(case, "test_data_set_0")
        os.makedirs(data)
        for i, (name, value) in enumerate(inputs.items()):
            with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())
        for i, (name, value) in enumerate(OrtOutputs(args.ort, model, shapes, inputs, case)):
            with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(value, name).SerializeToString())
        p = subprocess.run([args.kiln, "test-onnx", "--rtol", str(args.rtol), "--atol",
                            str(args.atol), case], capture_output=True, text=True)
        text = (p.stdout + p.stderr).strip()
        return "PASS" if p.returncode == 0 else "FAIL " + text[-600:]
    finally:
        shutil.rmtree(case, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--ort", required=True)
    ap.add_argument("--models", required=True, help="the folder make_models.py wrote")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    failed = 0
    for model, rows in ROWS.items():
        if only and model not in only:
            continue
        for i, shapes in enumerate(rows):
            shape = "x".join(map(str, next(iter(shapes.values()))))
            try:
                verdict = CheckRow(args, os.path.join(args.models, model + ".onnx"), shapes, i)
            except RuntimeError as e:
                verdict = "ERROR %s" % e
            failed += not verdict.startswith("PASS")
            print("%-15s %-22s %s" % (model, shape, verdict), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
