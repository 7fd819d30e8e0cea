#!/usr/bin/env bash
# kiln as another project uses it: `cmake --install` into a fresh prefix, then a C program
# built out of tree against that prefix, once with pkg-config and once with find_package(kiln),
# run on an ONNX MLP; its numbers checked against NumPy. Also: libkiln.so's SONAME carries the
# C API's major version and it exports kiln_* symbols only.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
# Prints one line per failed check; exits non-zero on any.
set -u
BUILD=$1
SRC=$2
WORK=$3
CHECKS_NAME=install_test
# shellcheck source=tests/c_api/checks.sh
source "$(dirname "$0")/checks.sh"

rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"
if ! out=$(cmake --install "$BUILD" --prefix "$PREFIX" 2>&1); then
  echo "install_test: cmake --install failed:"$'\n'"$out" >&2
  exit 1
fi
for f in include/kiln.h lib/pkgconfig/kiln.pc lib/cmake/kiln/kilnConfig.cmake bin/kiln; do
  [ -e "$PREFIX/$f" ] || fail "the install has no $f"
done
LIB=$(ls "$PREFIX"/lib/libkiln.so.*.*.* 2>/dev/null | head -1)
[ -n "$LIB" ] || {
  echo "install_test: no libkiln.so.X.Y.Z in $PREFIX/lib" >&2
  exit 1
}

# The SONAME: libkiln.so.<KILN_VERSION_MAJOR of kiln.h>.
major=$(sed -n 's/^#define KILN_VERSION_MAJOR \([0-9]*\)$/\1/p' "$SRC/api/capi/kiln.h")
soname=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libkiln.so.$major" ] || fail "SONAME is '$soname', expected libkiln.so.$major"
# Exported (defined, global or weak): kiln_* and nothing else, no C++ symbols and none of the
# libraries linked inside. The linker may keep localized symbols in .dynsym as LOCAL.
exported=$(readelf --dyn-syms -W "$LIB" | awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && NF >= 8 { print $8 }')
others=$(grep -v '^kiln_' <<<"$exported" || true)
[ -z "$others" ] || fail "libkiln.so exports symbols other than kiln_*: $(head -5 <<<"$others")"
grep -q '^kiln_engine_run$' <<<"$exported" || fail "libkiln.so does not export kiln_engine_run"

# The model and NumPy's answer for run_mlp.c's input.
/usr/bin/python3 "$SRC/scripts/make_mlp_onnx.py" "$WORK/mlp.onnx" || exit 1
/usr/bin/python3 - "$WORK/mlp.onnx" 3 >"$WORK/want.txt" <<'PY' || exit 1
import sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
batch = int(sys.argv[2])
x = np.sin(0.01 * np.arange(batch * 64, dtype=np.float64)).astype(np.float32).astype(np.float64)
x = x.reshape(batch, 64)
h = np.maximum(x @ w["fc1.w"] + w["fc1.b"], 0)
logits = h @ w["fc2.w"] + w["fc2.b"]
e = np.exp(logits - logits.max(axis=1, keepdims=True))
for v in (e / e.sum(axis=1, keepdims=True)).ravel():
    print(v)
PY

# check_run NAME BINARY: runs it on the MLP and compares its numbers with NumPy's.
check_run() {
  local name=$1 bin=$2
  if ! LD_LIBRARY_PATH="$PREFIX/lib" "$bin" "$WORK/mlp.onnx" 3 >"$WORK/$name.txt" 2>"$WORK/$name.err"; then
    fail "$name: the program failed: $(cat "$WORK/$name.err")"
    return
  fi
  check_output "$name" "$WORK/$name.txt"
}

# check_output NAME FILE: FILE's numbers (one a line) against NumPy's.
check_output() {
  local name=$1
  if ! /usr/bin/python3 - "$2" "$WORK/want.txt" <<'PY'; then
import sys
got = [float(v) for v in open(sys.argv[1]).read().split()]
want = [float(v) for v in open(sys.argv[2]).read().split()]
assert len(got) == len(want) == 30, (len(got), len(want))
bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-5 + 1e-4 * abs(w)]
assert not bad, bad[:5]
PY
    fail "$name: its output differs from NumPy's (see above)"
  fi
}

# pkg-config, from a directory outside the tree, with the C compiler alone.
cp "$SRC/api/examples/run_mlp.c" "$WORK/"
if flags=$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs kiln); then
  # shellcheck disable=SC2086
  if cc -std=c99 -Wall -Wextra -pedantic-errors -o "$WORK/run_mlp" "$WORK/run_mlp.c" $flags -lm \
    2>"$WORK/cc.err"; then
    check_run pkg-config "$WORK/run_mlp"
  else
    fail "cc with pkg-config's flags ($flags): $(cat "$WORK/cc.err")"
  fi
else
  fail "pkg-config --cflags --libs kiln failed"
fi

# find_package(kiln) from a CMake project of its own.
mkdir -p "$WORK/cmake_project"
cat >"$WORK/cmake_project/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(uses_kiln C)
find_package(kiln 0 REQUIRED)
add_executable(run_mlp run_mlp.c)
target_link_libraries(run_mlp PRIVATE kiln::kiln m)
CM
cp "$SRC/api/examples/run_mlp.c" "$WORK/cmake_project/"
if cmake -S "$WORK/cmake_project" -B "$WORK/cmake_build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  >"$WORK/cmake.log" 2>&1 && cmake --build "$WORK/cmake_build" >>"$WORK/cmake.log" 2>&1; then
  check_run find_package "$WORK/cmake_build/run_mlp"
else
  fail "find_package(kiln) project: $(tail -20 "$WORK/cmake.log")"
fi

# The installed Python package, from outside the tree (only the prefix on PYTHONPATH), loads
# the prefix's libkiln.so and prints the same numbers.
cat >"$WORK/run_mlp.py" <<'PY'
import sys
import numpy as np
import kiln
assert kiln.__file__.startswith(sys.argv[2]), kiln.__file__
model = kiln.Model.from_onnx(sys.argv[1])
batch = 3
x = np.sin(0.01 * np.arange(batch * 64, dtype=np.float64)).astype(np.float32).reshape(batch, 64)
for v in kiln.Engine(threads=1).run(model, {"x": x})[model.outputs[0].name].ravel():
    print(float(v))
PY
pydir="$PREFIX/lib/python3/dist-packages"
if (cd "$WORK" && env -u KILN_LIBRARY PYTHONPATH="$pydir" /usr/bin/python3 run_mlp.py   "$WORK/mlp.onnx" "$pydir" >"$WORK/python.txt" 2>"$WORK/python.err"); then
  check_output python "$WORK/python.txt"
else
  fail "python: the installed package failed: $(cat "$WORK/python.err")"
fi

# The installed tool runs.
"$PREFIX/bin/kiln" types "$WORK/mlp.onnx" >/dev/null 2>&1 || fail "the installed kiln tool fails"

finish
