"""kiln beside ONNX Runtime on the same machine in the same run (issue 13). Not a test.

    bash ../shared/tools/ort-bench/build.sh build/ort                   # once
    /usr/bin/python3 bench/vs_ort/make_models.py build/vs_ort           # once
    /usr/bin/python3 bench/vs_ort/compare.py --kiln build/api/kiln --ort build/ort/ort_cbench \
        --models build/vs_ort [--threads 1,2] [--only mlp,chain] [--seconds 1.0] [--rounds 2]

For each model, shape and thread count: ORT's p50 latency through its C API at its `all` and
`basic` optimization levels (the better one counts: `all` is sometimes slower), and kiln's p50
from `kiln run` (compile excluded: a warm-up runs first), both with random inputs. Prints one
table: model, shape, threads, ORT p50, kiln p50, kiln/ORT (below 1 is kiln faster). A model
kiln cannot load or run gets its error in the kiln column. Absolute times depend on the machine
and its load; the ratio is the figure to read. Each row measures both engines `--rounds` times,
alternating (both of ORT's levels and two kiln runs in the first round, ORT's better level
after), and keeps each one's best p50: on a shared machine a slow spell (seen here: a
2-thread kiln run at 1.3 ms in one minute and 0.76 ms in the next) then hits neither engine
alone.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys

# model -> [{input: shape}]: the shapes of issue 13's table, plus the rest of the model set.
ROWS = {
    "mlp": [{"x": [1, 784]}, {"x": [32, 784]}, {"x": [256, 784]}],
    "encoder": [{"x": [1, 16, 256]}, {"x": [1, 128, 256]}, {"x": [8, 128, 256]}],
    "chain": [{"x": [1, 128, 768], "r": [1, 128, 768]}, {"x": [8, 512, 768], "r": [8, 512, 768]}],
    "small_cnn": [{"x": [1, 3, 32, 32]}, {"x": [32, 3, 32, 32]}],
    "pool_cnn": [{"x": [1, 3, 224, 224]}],
    "mobilenet_like": [{"x": [1, 3, 224, 224]}],
    "dynamic_conv": [{"x": [1, 3, 224, 224]}, {"x": [1, 3, 320, 240]}],
    "seg_head": [{"x": [1, 3, 320, 320]}],
    "resnet_like": [{"x": [1, 3, 224, 224]}],
    # ocr_models.py: a text detector, recognizer and direction classifier, as exported.
    "ocr_det": [{"x": [1, 3, 320, 320]}, {"x": [1, 3, 640, 480]}],
    "ocr_rec": [{"x": [1, 3, 48, 320]}, {"x": [6, 3, 48, 320]}],
    "ocr_cls": [{"x": [1, 3, 48, 192]}, {"x": [6, 3, 48, 192]}],
}


def Run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return None, lines[-1] if lines else "exit %d" % p.returncode
    return p.stdout, None


def OrtP50(ort, model, shapes, threads, seconds, levels=("all", "basic")):
    """The better p50 of ORT's `levels`, and that level."""
    best, best_level, errors = None, None, []
    for level in levels:
        cmd = [ort, "--model", model, "--threads", str(threads), "--opt", level,
               "--min-sec", str(seconds), "--runs", "10", "--warmup", "5"]
        for name, shape in shapes.items():
            cmd += ["--input", "%s=%s" % (name, ",".join(map(str, shape)))]
        out, err = Run(cmd, 600)
        if err:
            errors.append("%s: %s" % (level, err))
            continue
        p50 = json.loads(out.strip().splitlines()[-1])["p50_us"]
        if best is None or p50 < best:
            best, best_level = p50, level
    return best, best_level, "; ".join(errors)


def KilnP50(kiln, model, shapes, threads, seconds):
    # eager: the shape is compiled before the timed runs, and nothing compiles beside them.
    args = [kiln, "run", model, "--threads", str(threads), "--policy", "eager"]
    for name, shape in shapes.items():
        args += ["--shape", "%s=%s" % (name, "x".join(map(str, shape)))]

    def p50(iters, warmup):
        out, err = Run(args + ["--iters", str(iters), "--warmup", str(warmup)], 900)
        if err:
            return None, err
        m = re.search(r"p50 ([0-9.]+) ms", out)
        return (float(m.group(1)) * 1000.0, None) if m else (None, "no p50 in kiln's output")

    first, err = p50(3, 1)  # compiles, and says how long one run takes
    if err:
        return None, err
    iters = int(min(5000, max(10, seconds * 1e6 / max(first, 0.1))))
    return p50(iters, max(2, iters // 10))


def Cpu():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        name = re.search(r"model name\s*:\s*(.*)", text).group(1)
        fam = re.search(r"cpu family\s*:\s*(\d+)", text).group(1)
        flags = re.search(r"flags\s*:\s*(.*)", text).group(1).split()
        return "%s (family %s, %s, %d cores)" % (
            name, fam, "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2",
            os.cpu_count())
    except (OSError, AttributeError):
        return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--ort", required=True)
    ap.add_argument("--models", required=True, help="the folder make_models.py wrote")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="alternating measurements per engine")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    print("kiln vs ONNX Runtime on %s" % Cpu())
    header = "%-15s %-22s %3s %12s %12s %9s" % ("model", "shape", "thr", "ORT p50 us",
                                               "kiln p50 us", "kiln/ORT")
    print(header)
    print("-" * len(header))
    for model, rows in ROWS.items():
        if only and model not in only:
            continue
        path = os.path.join(args.models, model + ".onnx")
        for shapes in rows:
            shape = "x".join(map(str, next(iter(shapes.values()))))
            for threads in map(int, args.threads.split(",")):
                ort = kiln = None
                ort_err = kiln_err = ""
                # Round one measures both of ORT's levels and kiln twice; later rounds measure
                # ORT's better level only, in alternating order: each engine gets as many
                # chances at the machine's fast spells (a slow spell runs 1.5x slower here).
                levels = ("all", "basic")
                for r in range(max(1, args.rounds)):
                    for engine in ("ort", "kiln") if r % 2 == 0 else ("kiln", "ort"):
                        if engine == "ort":
                            o, level, ort_err = OrtP50(args.ort, path, shapes, threads,
                                                       args.seconds, levels)
                            ort = min(ort, o) if ort and o else ort or o
                            if r == 0 and level:
                                levels = (level,)
                            continue
                        for _ in range(2 if r == 0 else 1):
                            k, kiln_err = KilnP50(args.kiln, path, shapes, threads, args.seconds)
                            kiln = min(kiln, k) if kiln and k else kiln or k
                ratio = "%9.2f" % (kiln / ort) if ort and kiln else "%9s" % "-"
                print("%-15s %-22s %3d %12s %12s %s" % (
                    model, shape, threads, "%.1f" % ort if ort else "error",
                    "%.1f" % kiln if kiln else "error", ratio), flush=True)
                for who, err in (("ORT", ort_err), ("kiln", kiln_err)):
                    if err and not (who == "ORT" and ort):
                        print("    %s: %s" % (who, err[:200]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
