#!/usr/bin/env bash
# Runs the device tests on a machine with an NVIDIA GPU: the conformance suite (cpu and cuda),
# the CUDA device's own tests and the CPU device's, every op test's kernels as CUDA C on the GPU
# (the jit@cuda-run/* selection: tests/CMakeLists.txt writes it to tests/cuda_run_sweep.txt),
# and the GPU benchmarks (bench/kiln_cuda_bench), from an existing build or a packed one.
#   scripts/gpu_check.sh [build dir, default build-cuda]
#   scripts/gpu_check.sh --packed DIR   (DIR/kiln-gpu.tar.xz from scripts/gpu_pack.sh: the
#                                        binaries and the shared libraries they need)
# The binaries load libcuda.so.1 and NVRTC at run time, so a build made on a machine without a
# GPU works; a packed one also runs where LLVM and oneTBB are not installed. Prints the GPU list,
# each binary's brief results and every skip reason; with $OUT set, also writes the logs there.
# Exits non-zero when a test fails, and also when nvidia-smi lists a GPU but the CUDA tests
# skipped for want of one (a check that checked nothing).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--packed" ]; then
  build=/tmp/kiln-gpu
  rm -rf "$build" && mkdir -p "$build"
  tar -C "$build" -xJf "$2/kiln-gpu.tar.xz" || exit 1
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  build="${1:-build-cuda}"
fi
# The toolkit's NVRTC, where the loader's path lacks it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  if ls "$d"/libnvrtc.so.* >/dev/null 2>&1; then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
    break
  fi
done
logs="${OUT:-$(mktemp -d)}"

echo "== nvidia-smi -L"
gpu_listed=0
if nvidia-smi -L; then
  gpu_listed=1
else
  echo "(no GPU listed: the CUDA tests will skip)"
fi

status=0
# Fails the check when a GPU is listed but the log in $1 says the tests found none.
check_not_skipped() {
  if [ "$gpu_listed" -eq 1 ] &&
    grep -qE "no CUDA device cuda\(0\)|reports no device cuda\(0\)|libcuda.so.1 not found|NVRTC not found" "$1"; then
    echo "FAIL: nvidia-smi lists a GPU, but $2 found no CUDA device or NVRTC (see the skip reasons)"
    status=1
  fi
}

# engine_device_test and api_c_api_device_test: only the tests on the GPU (their others emulate
# a device on the host, which needs a C++ compiler the device machine may not have; CI runs them).
for t in devices_device_conformance_test devices_cuda_device_test devices_cpu_device_test \
  engine_device_test api_c_api_device_test; do
  bin="$build/tests/$t"
  filter='*'
  [ "$t" = engine_device_test ] && filter='EngineOnCudaDevice.*'
  [ "$t" = api_c_api_device_test ] && filter='CApiOnCudaDevice.*'
  echo
  echo "== $t"
  if [ ! -x "$bin" ]; then
    echo "FAIL: $bin is missing (build it with: cmake --build $build --target $t)"
    status=1
    continue
  fi
  # Brief output still prints each skip with its reason, and each failure in full.
  timeout 600 "$bin" --gtest_brief=1 --gtest_filter="$filter" >"$logs/$t.log" 2>&1
  rc=$?
  cat "$logs/$t.log"
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $t exited with $rc"
    status=1
  fi
  check_not_skipped "$logs/$t.log" "$t"
done

# The op sweep's kernels as CUDA C on the GPU, against the reference kernels, one process per
# test binary, several at once (each spends most of its time in NVRTC, on the CPU).
echo
echo "== the op sweep on the GPU (KILN_TEST_CUDA_RUN=1)"
sweep="$build/tests/cuda_run_sweep.txt"
if [ ! -f "$sweep" ]; then
  echo "FAIL: $sweep is missing (configure the build again)"
  status=1
else
  parts="$(mktemp -d)"
  export build parts
  # shellcheck disable=SC2016
  xargs -a "$sweep" -P "$(nproc)" -I{} bash -c '
    entry="$1"; bin="${entry%%=*}"; filter="${entry#*=}"
    KILN_TEST_CUDA_RUN=1 timeout 600 "$build/tests/$bin" --gtest_filter="$filter" \
      --gtest_brief=1 >"$parts/$bin.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then verdict=passed; elif [ $rc -eq 77 ]; then verdict=skipped; else verdict="FAILED ($rc)"; fi
    { echo "== $bin: $verdict"; cat "$parts/$bin.out"; } >"$parts/$bin.log"' _ {}
  cat "$parts"/*.log >"$logs/sweep.log"
  rm -rf "$parts"
  cat "$logs/sweep.log"
  if grep -q "^== .*: FAILED" "$logs/sweep.log"; then
    echo "FAIL: the CUDA kernels of the op sweep"
    status=1
  fi
  if [ "$gpu_listed" -eq 1 ] && grep -q "^== .*: skipped" "$logs/sweep.log"; then
    echo "FAIL: nvidia-smi lists a GPU, but CUDA kernel tests skipped (see the reasons above)"
    status=1
  fi
fi

echo
echo "== kiln_cuda_bench"
if [ -x "$build/bench/kiln_cuda_bench" ]; then
  timeout 300 "$build/bench/kiln_cuda_bench" --benchmark_min_time=0.2 2>&1 | tee "$logs/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  check_not_skipped "$logs/bench.log" kiln_cuda_bench
else
  echo "(not built: $build/bench/kiln_cuda_bench)"
fi

echo
if [ "$status" -eq 0 ]; then echo "gpu_check: all passed"; else echo "gpu_check: FAILED"; fi
exit "$status"
