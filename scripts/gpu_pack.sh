#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into one archive that can travel to a GPU machine where
# kiln's build dependencies are not installed: the device tests, the op sweep's test binaries
# (stripped), bench/kiln_cuda_bench, and every shared library they load apart from glibc's (LLVM,
# oneTBB and theirs; CUDA's are loaded from that machine at run time).
#   scripts/gpu_pack.sh [build dir, default build] [out dir, default .gpupack]
# then, on the GPU machine, from the repo root: scripts/gpu_check.sh --packed .gpupack
# The archive is xz with a large window: the test binaries share most of their code, so ~20 of
# them take ~10 MB, and libLLVM ~26 MB (the device tool carries at most 64 MiB with the repo).
set -euo pipefail
cd "$(dirname "$0")/.."

build="${1:-build}"
out="${2:-.gpupack}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/bench" "$stage/lib" "$out"

bins=()
for t in devices_device_conformance_test devices_cuda_device_test devices_cpu_device_test \
  engine_device_test api_c_api_device_test \
  $(cut -d= -f1 "$build/tests/cuda_run_sweep.txt" | sort -u); do
  bins+=("$build/tests/$t")
done
cp "${bins[@]}" "$build/tests/cuda_run_sweep.txt" "$stage/tests/"
[ -x "$build/bench/kiln_cuda_bench" ] && cp "$build/bench/kiln_cuda_bench" "$stage/bench/"
strip "$stage"/tests/*_test "$stage"/bench/* 2>/dev/null || true

# Each library a binary loads, less glibc's own and the loader (present wherever they run).
ldd "${bins[@]}" "$build/bench/kiln_cuda_bench" 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

tar -C "$stage" -cf - tests bench lib | xz -T2 -9 -c >"$out/kiln-gpu.tar.xz"
ls -la "$out/kiln-gpu.tar.xz"
echo "packed $(ls "$stage/tests" | wc -l) test files, $(ls "$stage/lib" | wc -l) libraries into $out"
