#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job (`run`) or every test (`test`).
# Safe to re-run: installs nothing when all is present, and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-run}"
packages=(cmake g++ ninja-build ccache libgtest-dev libgmock-dev libbenchmark-dev
  libeigen3-dev libtbb-dev llvm-19-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libonnx-testdata python3-onnx python3-numpy)
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

build="${KILN_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${KILN_CMAKE_ARGS:-}
fi
cmake --build "$build" -- -j2

case "$mode" in
  run) "$build/api/kiln-demo" ;;
  test) ctest --test-dir "$build" --output-on-failure -j2 ;;
  *) echo "usage: $0 run|test" >&2; exit 2 ;;
esac
