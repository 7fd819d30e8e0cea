#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job (`run`) or every test (`test`).
# Safe to re-run: installs nothing when all is present, and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-run}"
packages=(cmake g++ ninja-build ccache libgtest-dev libgmock-dev libbenchmark-dev
  libeigen3-dev libtbb-dev llvm-19-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libonnx-testdata python3-onnx python3-numpy python3-pytest pkgconf
  libcpp-httplib-dev nlohmann-json3-dev curl clang-19 libclang-rt-19-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# ccache keys on absolute paths unless told the tree's root: with it, a fresh clone in another
# folder (as CI makes) reuses what an earlier build of the same sources compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"

build="${KILN_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${KILN_CMAKE_ARGS:-}
fi
cmake --build "$build" -- -j2

# The ONNX importer reads untrusted files, so its tests also run under AddressSanitizer and
# UndefinedBehaviorSanitizer. Only the importer and ir/ are built in that configuration (no
# LLVM, no engine), which keeps it to a few minutes on two cores.
asan_tests() {
  local asan="${KILN_ASAN_BUILD_DIR:-build-asan}"
  if [ ! -f "$asan/build.ninja" ]; then
    cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_ASAN=ON >/dev/null
  fi
  local targets
  targets=$(ninja -C "$asan" -t targets all |
    grep -oE '^(onnx_import_[a-z0-9_]+_test|fuzz_replay_[a-z0-9_]+)' | sort -u || true)
  if [ -z "$targets" ]; then
    echo "kiln: no ONNX importer tests to run under AddressSanitizer (none in tests/onnx_import/)"
    return 0
  fi
  # shellcheck disable=SC2086
  cmake --build "$asan" --target $targets -- -j2
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir "$asan" --output-on-failure -j2 -R '^(onnx_import|fuzz)/'
}

# The engine is shared by any number of run threads and its background compile pool, so its
# concurrency tests (many threads, random shapes, the tiered policy's publishing, single
# flight, runs mixed with new shapes, evictions and the engine's destruction), the C API's
# (runs from two threads, per-thread errors, asynchronous runs on streams and their
# cancellation) and `kiln serve`'s batching of requests from many threads also run under
# ThreadSanitizer. Only their targets are built in that configuration.
# oneTBB is not instrumented: reports through its handoffs are suppressed (scripts/tsan.supp).
tsan_tests() {
  local tsan="${KILN_TSAN_BUILD_DIR:-build-tsan}"
  if [ ! -f "$tsan/build.ninja" ]; then
    cmake -S . -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_TSAN=ON >/dev/null
  fi
  cmake --build "$tsan" --target engine_tiers_test engine_concurrency_test \
    engine_bounds_test api_c_api_threads_test api_c_api_async_test serve_model_runner_test -- -j2
  TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=1 history_size=7" \
    ctest --test-dir "$tsan" --output-on-failure -j2 \
    -R '^(engine/Engine(Tiers|Concurrency)\.|engine/EngineBounds\.(Stress|BoundSmaller)|api/CApi(Threads|Async)\.|serve/ModelRunner\.)'
}

# Every parser of untrusted bytes is fuzzed with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer (fuzz/: the ONNX importer, the tensor .pb reader, the text IR
# parser), and so is the C API (sequences of its calls chosen by the bytes, engine runs
# included), built with clang in its own folder. A target's extra libFuzzer flags are in
# fuzz/<target>.options (capi_seq: no leak check per input, as its engine, shared by all
# inputs, keeps what it compiles). Here each target runs briefly from its seed corpus
# (KILN_FUZZ_SECONDS, default 30), so a change that breaks what the corpus reaches shows in
# CI; scripts/fuzz.sh runs the long campaigns. A finding fails the job, and libFuzzer prints
# the input that caused it (keep it as a regression test).
fuzz_tests() {
  local fuzz="${KILN_FUZZ_BUILD_DIR:-build-fuzz}"
  if [ ! -f "$fuzz/build.ninja" ]; then
    CC=clang-19 CXX=clang++-19 cmake -S . -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DKILN_FUZZ=ON >/dev/null
  fi
  cmake --build "$fuzz" --target onnx_import_fuzz tensor_pb_fuzz text_ir_fuzz capi_seq_fuzz -- -j2
  local seconds="${KILN_FUZZ_SECONDS:-30}" name work
  for name in onnx_import tensor_pb text_ir capi_seq; do
    work=$(mktemp -d)  # new inputs go here, not into the committed seeds
    echo "kiln: fuzzing $name for ${seconds}s"
    local status=0
    # shellcheck disable=SC2046
    "$fuzz/fuzz/${name}_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
      $(cat "fuzz/$name.options" 2>/dev/null) -artifact_prefix="$work/" -print_final_stats=1 \
      "$work" "fuzz/corpus/$name" \
      $([ -d "fuzz/findings/$name" ] && echo "fuzz/findings/$name") \
      >"$work/log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$work/log" || true
    if [ "$status" -ne 0 ]; then
      tail -n 80 "$work/log" >&2
      echo "kiln: fuzz target $name found a failure (exit $status); its input is in $work" >&2
      return 1
    fi
    rm -rf "$work"
  done
}

# The main job: the kiln CLI on a small ONNX MLP with a symbolic batch, generated once by
# scripts/make_mlp_onnx.py (Debian's python3-onnx; /usr/bin/python3, which has it).
main_job() {
  local model="$build/models/mlp.onnx"
  if [ ! -f "$model" ]; then
    mkdir -p "$build/models"
    /usr/bin/python3 scripts/make_mlp_onnx.py "$model"
  fi
  "$build/api/kiln" types "$model"
  "$build/api/kiln" run "$model" --shape x=3x64 --iters 100 --warmup 10
}

case "$mode" in
  run) main_job ;;
  test)
    ctest --test-dir "$build" --output-on-failure -j2
    asan_tests
    tsan_tests
    fuzz_tests
    ;;
  *) echo "usage: $0 run|test" >&2; exit 2 ;;
esac
