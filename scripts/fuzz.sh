#!/usr/bin/env bash
# A fuzzing campaign: each libFuzzer target of fuzz/ for a while (default 10 minutes), starting
# from its seed corpus and findings, growing a working corpus under build-fuzz/corpus/<target>
# (kept between campaigns, not committed). Prints each target's executions and coverage. A
# finding stops that target; libFuzzer writes the input to build-fuzz/findings/, and it belongs
# in fuzz/findings/<target>/ once fixed (a regression test in every build: tests/CMakeLists.txt).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]  (targets: onnx_import tensor_pb text_ir capi_seq)
#
# A target's extra libFuzzer flags, if any, are in fuzz/<target>.options.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(onnx_import tensor_pb text_ir capi_seq)

fuzz="${KILN_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$fuzz/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKILN_FUZZ=ON >/dev/null
fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake --build "$fuzz" --target "${targets[@]/%/_fuzz}" -- -j2
mkdir -p "$fuzz/findings"
status=0
for name in "${targets[@]}"; do
  corpus="$fuzz/corpus/$name"
  mkdir -p "$corpus"
  log="$fuzz/findings/$name.log"
  echo "kiln: fuzzing $name for ${seconds}s (log: $log)"
  rc=0
  # shellcheck disable=SC2046
  "$fuzz/fuzz/${name}_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 \
    $(cat "fuzz/$name.options" 2>/dev/null) \
    -artifact_prefix="$fuzz/findings/$name-" -print_final_stats=1 "$corpus" \
    "fuzz/corpus/$name" $([ -d "fuzz/findings/$name" ] && echo "fuzz/findings/$name") \
    >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+ +DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
    "$log" || true
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -n 5
    status=1
  fi
done
exit "$status"
