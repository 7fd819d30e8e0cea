#!/usr/bin/env python3
"""Runs a build's tests on an emulated x86-64 CPU, for checking another kind of host than the
one at hand (an AVX2-only host from an AVX-512 one, say).

    /usr/bin/python3 scripts/emulated_cpu_check.py [--build build] [--cpu EPYC-Rome] [-j 2]
                                                   [-R REGEX]

Every ctest of the build (as `ctest --show-only=json-v1` lists them, with their environment,
working directory and SKIP_RETURN_CODE) runs under QEMU user-mode emulation
(`qemu-x86_64 -cpu CPU`, Debian's qemu-user), so the CPUID the tests see, and the host CPU
that LLVM detects and compiles kernels for, is the emulated one. Script tests that run the
`kiln` tool get a wrapper that runs it emulated too. EPYC-Rome (Zen 2, AVX2, no AVX-512) is
the default. The emulator is ~10x slower than the machine: -R narrows the set.

Prints each failing test's output, then `N passed, M failed, K skipped`; exits 1 on a
failure.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile


def Tests(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["tests"]


def Properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cpu", default="EPYC-Rome")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("-R", default="", help="only the tests whose name matches")
    args = ap.parse_args()
    qemu = shutil.which("qemu-x86_64")
    if not qemu:
        sys.exit("emulated_cpu_check: qemu-x86_64 not found (apt-get install qemu-user)")
    prefix = [qemu, "-cpu", args.cpu]

    tmp = tempfile.mkdtemp(prefix="kiln-emulated-")
    wrapped = {}  # a tool that script tests run -> a wrapper that runs it emulated

    def Wrap(path):
        if path not in wrapped:
            w = os.path.join(tmp, "%d-%s" % (len(wrapped), os.path.basename(path)))
            with open(w, "w") as f:
                f.write('#!/bin/sh\nexec %s "%s" "$@"\n' % (" ".join(prefix), path))
            os.chmod(w, stat.S_IRWXU)
            wrapped[path] = w
        return wrapped[path]

    def Run(test):
        cmd = list(test["command"])
        props = Properties(test)
        if os.path.basename(cmd[0]).startswith("python"):
            # Emulating the interpreter would not reach the programs it starts: wrap those.
            cmd = [Wrap(a) if i > 0 and cmd[i - 1] == "--kiln" else a for i, a in enumerate(cmd)]
        else:
            cmd = prefix + cmd
        env = dict(os.environ)
        for kv in props.get("ENVIRONMENT", []):
            k, _, v = kv.partition("=")
            env[k] = v
        p = subprocess.run(cmd, env=env, cwd=props.get("WORKING_DIRECTORY"),
                           capture_output=True, text=True, timeout=3600)
        output = p.stdout + p.stderr
        if p.returncode == props.get("SKIP_RETURN_CODE", -1):
            return "skipped", output
        if p.returncode == 0 and any(re.search(r, output)
                                     for r in props.get("SKIP_REGULAR_EXPRESSION", [])):
            return "skipped", output
        return ("passed" if p.returncode == 0 else "failed"), output

    tests = [t for t in Tests(args.build) if re.search(args.R, t["name"])]
    print("emulated_cpu_check: %d tests under %s -cpu %s" % (len(tests), qemu, args.cpu),
          flush=True)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        futures = {pool.submit(Run, t): t["name"] for t in tests}
        for fut in concurrent.futures.as_completed(futures):
            name = futures[fut]
            try:
                result, output = fut.result()
            except subprocess.TimeoutExpired:
                result, output = "failed", "timed out"
            counts[result] += 1
            if result == "failed":
                print("FAIL %s\n%s" % (name, output[-4000:]), flush=True)
            elif result == "skipped" and name.startswith("jit@"):
                why = [l for l in output.splitlines() if l.startswith("kiln: CPU model")]
                print("SKIP %s: %s" % (name, why[-1] if why else ""), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (counts["passed"], counts["failed"],
                                                counts["skipped"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
