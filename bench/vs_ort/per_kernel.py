"""kiln's per-kernel times beside ONNX Runtime's per-node times, measured in alternation. Not a test.

    /usr/bin/python3 bench/vs_ort/per_kernel.py --kiln build/api/kiln \
        --ort-src ../shared/tools/ort-bench --ort-lib build/ort \
        --model build/vs_ort/dynamic_conv.onnx --input x=1,3,224,224 [--threads 1] [--rounds 4]

Why: on shared machines a process's speed drifts by a third for minutes at a time, so one run of
each engine compares two different machines. Here the two alternate, round by round
(ort_profile.py for ORT, `kiln run --stats` for kiln), and each kernel or node keeps its fastest
round; both sides then come from the same fast spells. kiln's fused kernels and ORT's nodes do
not map one to one (kiln fuses more), so both lists are printed in execution order, with their
sums and the ratio of the sums. ORT's profiling adds a few microseconds per node.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def OrtRound(a):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "ort_profile.py"), "--ort-src", a.ort_src,
         "--ort-lib", a.ort_lib, "--model", a.model, "--input", a.input, "--threads",
         str(a.threads), "--seconds", str(a.seconds)] + (["--opt", a.opt] if a.opt else []),
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("per_kernel: ort_profile.py failed:\n" + out.stdout + out.stderr)
    nodes = []
    for line in out.stdout.splitlines():
        fields = line.split()
        if (line.startswith("  ") and len(fields) >= 4 and fields[-1] == "us" and
                not line.strip().startswith("sum of")):
            nodes.append(("%s (%s)" % (fields[0], fields[1]), float(fields[-2])))
    return nodes


def KilnRound(a):
    shape = a.input.replace(",", "x")
    out = subprocess.run(
        [a.kiln, "run", a.model, "--shape", shape, "--iters", str(a.iters), "--threads",
         str(a.threads), "--policy", "eager", "--stats"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("per_kernel: kiln run failed:\n" + out.stdout + out.stderr)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            stats = json.loads(line)
            # Kernels that did not run (a generic tier's, compiled but unused) are left out.
            return [(k["kernel"], k["total_ms"] / k["calls"] * 1000) for k in stats["kernels"]
                    if k["calls"]]
    sys.exit("per_kernel: kiln run printed no stats line")


def Keep(best, rows):
    if best is None:
        return list(rows)
    if [n for n, _ in best] == [n for n, _ in rows]:
        return [(n, min(x, y)) for (n, x), (_, y) in zip(best, rows)]
    # ORT's profile leaves out a node now and then; its node names are unique, so rounds merge
    # by name (kiln's kernel names repeat: its lists must match position by position).
    names = [n for n, _ in best] + [n for n, _ in rows]
    if len(set(n for n, _ in best)) != len(best) or len(set(n for n, _ in rows)) != len(rows):
        sys.exit("per_kernel: the kernel list changed between rounds")
    merged = dict(best)
    for n, us in rows:
        merged[n] = min(merged.get(n, us), us)
    return [(n, merged[n]) for n in dict.fromkeys(names)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kiln", required=True)
    p.add_argument("--ort-src", required=True)
    p.add_argument("--ort-lib", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True, help="NAME=d0,d1,... (one input)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=float, default=1.0, help="ORT's time per round")
    p.add_argument("--iters", type=int, default=300, help="kiln's runs per round")
    p.add_argument("--opt", default="", help="ORT's optimization level (ort_profile's default)")
    a = p.parse_args()
    ort, kiln = None, None
    for r in range(a.rounds):
        # Alternate which engine goes first, so neither always gets the start of a spell.
        if r % 2 == 0:
            ort, kiln = Keep(ort, OrtRound(a)), Keep(kiln, KilnRound(a))
        else:
            kiln, ort = Keep(kiln, KilnRound(a)), Keep(ort, OrtRound(a))
    print("%s, %s, %d thread(s), fastest of %d alternating rounds" %
          (os.path.basename(a.model), a.input, a.threads, a.rounds))
    print("ONNX Runtime nodes:")
    for n, us in ort:
        print("  %-52s %9.1f us" % (n[:52], us))
    print("kiln kernels:")
    for n, us in kiln:
        print("  %-52s %9.1f us" % (n[:52], us))
    ort_sum, kiln_sum = sum(us for _, us in ort), sum(us for _, us in kiln)
    print("sums: ORT %.1f us, kiln %.1f us, kiln/ORT %.2f" % (ort_sum, kiln_sum, kiln_sum / ort_sum))


if __name__ == "__main__":
    main()
