#!/usr/bin/env bash
# Runs the device tests on a machine with an NVIDIA GPU: the conformance suite (cpu and cuda),
# the CUDA device's own tests and the CPU device's, and every op test's kernels as CUDA C on the
# GPU (ctest jit@cuda-run/*, whose jit_lower_*_test binaries the build must have), from an
# existing build.
#   scripts/gpu_check.sh [build dir, default build-cuda]
# The test binaries link kiln and GoogleTest statically and load libcuda.so.1 at run time, so a
# build dir copied from a machine without a GPU works. Prints the GPU list, each binary's brief
# results and every skip reason. Exits non-zero when a test fails, and also when nvidia-smi
# lists a GPU but the CUDA tests skipped for want of one (a check that checked nothing).
set -uo pipefail
cd "$(dirname "$0")/.."

build="${1:-build-cuda}"
tests=(devices_device_conformance_test devices_cuda_device_test devices_cpu_device_test)

echo "== nvidia-smi -L"
gpu_listed=0
if nvidia-smi -L; then
  gpu_listed=1
else
  echo "(no GPU listed: the CUDA tests will skip)"
fi

status=0
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for t in "${tests[@]}"; do
  bin="$build/tests/$t"
  echo
  echo "== $t"
  if [ ! -x "$bin" ]; then
    echo "FAIL: $bin is missing (build it with: cmake --build $build --target ${tests[*]})"
    status=1
    continue
  fi
  # Brief output still prints each skip with its reason, and each failure in full.
  timeout 600 "$bin" --gtest_brief=1 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $t exited with $rc"
    status=1
  fi
  if [ "$gpu_listed" -eq 1 ] &&
    grep -qE "no CUDA device cuda\(0\)|reports no device cuda\(0\)" "$log"; then
    echo "FAIL: nvidia-smi lists a GPU, but $t found no CUDA device (see the skip reasons above)"
    status=1
  fi
done

# The op sweep's kernels as CUDA C on the GPU, against the reference kernels (jit@cuda-run/*:
# the cross-CPU selection of tests/CMakeLists.txt with KILN_TEST_CUDA_RUN=1).
echo
echo "== ctest -R jit@cuda-run/"
if ! ctest --test-dir "$build" -R "^jit@cuda-run/" --output-on-failure --timeout 600 | tee "$log"; then
  echo "FAIL: the CUDA kernels of the op sweep"
  status=1
fi
if [ "$gpu_listed" -eq 1 ] && grep -q "Skipped" "$log"; then
  echo "FAIL: nvidia-smi lists a GPU, but CUDA kernel tests skipped (see the reasons above)"
  status=1
fi

echo
if [ "$status" -eq 0 ]; then echo "gpu_check: all passed"; else echo "gpu_check: FAILED"; fi
exit "$status"
