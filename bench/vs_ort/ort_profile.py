"""ONNX Runtime's own per-node times for one model, to set beside `kiln run --stats`. Not a test.

    /usr/bin/python3 bench/vs_ort/ort_profile.py --ort-src ../shared/tools/ort-bench \
        --ort-lib build/ort --model build/vs_ort/dynamic_conv.onnx --input x=1,3,224,224 \
        [--threads 1] [--opt all] [--seconds 2]

Builds a copy of the ORT runner (ort_cbench.c from --ort-src, with ORT's session profiling
switched on through the C API's EnableProfiling when ORT_PROFILE is set) into a temporary
folder, runs the model, and prints each node's median kernel time from ORT's profile, with the
node's op. Profiling adds its own cost (on the small CNN: p50 89 -> 150 us); compare per-node
times, not the total, and run `build.sh` for --ort-lib first.
"""
import argparse
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

# The runner creates its session options here; profiling is switched on right after.
ANCHOR = "  ORT_CHECK(g_ort->SetIntraOpNumThreads(so, a.threads));\n"
PATCH = (ANCHOR +
         "  if (getenv(\"ORT_PROFILE\")) {\n"
         "    typedef OrtStatus *(*EnableProfilingFn)(OrtSessionOptions *, const char *);\n"
         "    ORT_CHECK(((EnableProfilingFn)g_ort->EnableProfiling)(so, getenv(\"ORT_PROFILE\")));\n"
         "  }\n")


def Build(src_dir, lib_dir, out_dir):
    src = open(os.path.join(src_dir, "ort_cbench.c")).read()
    if ANCHOR not in src:
        sys.exit("ort_profile: ort_cbench.c no longer has the line this patches after")
    open(os.path.join(out_dir, "ort_cbench.c"), "w").write(src.replace(ANCHOR, PATCH, 1))
    shutil.copy(os.path.join(src_dir, "ort_c_api_min.h"), out_dir)
    libs = sorted(glob.glob(os.path.join(
        lib_dir, "npm/node_modules/onnxruntime-node/bin/napi-v*/linux/x64/libonnxruntime.so.1")))
    if not libs:
        sys.exit("ort_profile: no libonnxruntime.so.1 under %s (run build.sh first)" % lib_dir)
    lib = os.path.dirname(libs[-1])
    exe = os.path.join(out_dir, "ort_profile")
    subprocess.run(["gcc", "-O2", "-std=gnu11", os.path.join(out_dir, "ort_cbench.c"), "-o", exe,
                    "-L" + lib, "-l:libonnxruntime.so.1", "-Wl,-rpath," + lib, "-lm"], check=True)
    return exe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-src", required=True, help="the folder holding ort_cbench.c")
    ap.add_argument("--ort-lib", required=True, help="the folder build.sh installed ORT into")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", action="append", default=[], help="NAME=d0,d1,...")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--opt", default="all")
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Build(a.ort_src, a.ort_lib, tmp)
        cmd = [exe, "--model", a.model, "--threads", str(a.threads), "--opt", a.opt,
               "--min-sec", str(a.seconds)]
        for i in a.input:
            cmd += ["--input", i]
        env = dict(os.environ, ORT_PROFILE=os.path.join(tmp, "profile"))
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        p50 = json.loads(out.strip().splitlines()[-1])["p50_us"]
        events = json.load(open(glob.glob(os.path.join(tmp, "profile*.json"))[0]))
    times = collections.OrderedDict()
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            key = (e["name"][:-len("_kernel_time")], e.get("args", {}).get("op_name", "?"))
            times.setdefault(key, []).append(e["dur"])
    print("ORT %s, %d thread(s), p50 with profiling %.1f us" % (a.opt, a.threads, p50))
    total = 0.0
    for (node, op), d in times.items():
        d.sort()
        total += d[len(d) // 2]
        print("  %-36s %-20s %8.1f us" % (node[:36], op, d[len(d) // 2]))
    print("  %-57s %8.1f us" % ("sum of the medians", total))


if __name__ == "__main__":
    main()
