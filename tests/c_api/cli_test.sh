#!/usr/bin/env bash
# The `kiln` tool run as a user would: types, run (an If and a Loop on value inputs too), passes,
# test-onnx (passing, failing and broken cases) and bad usage.
# Usage: cli_test.sh KILN_BINARY ONNX_NODE_DIR WORK_DIR
# Prints one line per failed check; exits non-zero on any.
set -u
KILN=$1
NODE=$2
WORK=$3
CHECKS_NAME=cli_test
# shellcheck source=tests/c_api/checks.sh
source "$(dirname "$0")/checks.sh"

# expect_output DESCRIPTION EXPECTED_RC PATTERN... -- COMMAND...: runs COMMAND, checks its exit
# status and that its stdout+stderr contains every PATTERN (fixed strings).
expect_output() {
  local what=$1 want_rc=$2
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do
    patterns+=("$1")
    shift
  done
  shift
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ]; then
    fail "$what: exit status $rc, expected $want_rc; output:"$'\n'"$out"
    return
  fi
  for p in "${patterns[@]}"; do
    if ! grep -qF -- "$p" <<<"$out"; then
      fail "$what: no '$p' in the output:"$'\n'"$out"
    fi
  done
}

rm -rf "$WORK"
mkdir -p "$WORK"

# A small MLP with a symbolic batch: x: f32[batch, 4] -> probs: f32[batch, 3]; and a broken
# copy of a real case whose expected output is wrong.
/usr/bin/python3 - "$WORK" "$NODE" <<'EOF' || fail "python3 (onnx) could not write the test models"
import os, shutil, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

work, node = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "b")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
     helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
     helper.make_node("Relu", ["hb"], ["r"], name="act"),
     helper.make_node("Softmax", ["r"], ["probs"], name="softmax", axis=-1)],
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
    initializer=[w, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save(model, os.path.join(work, "mlp.onnx"))
x = numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "x")
with open(os.path.join(work, "x.pb"), "wb") as f:
    f.write(x.SerializeToString())

def save_tensor(name, array):
    with open(os.path.join(work, name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(array, name.rstrip("0123456789")).SerializeToString())

# If on a scalar sample rate (then x * 2, else x + 1), and a Loop whose trip count is an input
# (y = x^(m+1), the powers stacked): both become plain graphs at specialization.
then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                           [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["n"])],
                           [numpy_helper.from_array(np.array(2, np.float32), "two")])
else_g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["e"])], "else", [],
                           [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["n"])],
                           [numpy_helper.from_array(np.array(1, np.float32), "one")])
graph = helper.make_graph(
    [helper.make_node("Equal", ["sr", "rate"], ["c"]),
     helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
    "if_sr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
    [numpy_helper.from_array(np.array(16000, np.int64), "rate")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]),
          os.path.join(work, "if_sr.onnx"))
body = helper.make_graph(
    [helper.make_node("Identity", ["c_in"], ["c_out"]),
     helper.make_node("Mul", ["y_in", "x"], ["y_out"]),
     helper.make_node("Identity", ["y_out"], ["s"])], "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("y_in", TensorProto.FLOAT, ["n"])],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("y_out", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("s", TensorProto.FLOAT, ["n"])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["m", "", "x"], ["y", "scan"], body=body)], "pow_loop",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("m", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("scan", TensorProto.FLOAT, ["k", "n"])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]),
          os.path.join(work, "loop.onnx"))
# A while loop over data (no trip count; doubles x until its sum passes `limit`), and NonZero
# selecting the positive elements: both run in segments (engine/segments.h).
body = helper.make_graph(
    [helper.make_node("Add", ["v_in", "v_in"], ["v_out"]),
     helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
     helper.make_node("Less", ["s", "limit"], ["c_out"]),
     helper.make_node("Identity", ["s"], ["sums"])], "body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["n"])],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("sums", TensorProto.FLOAT, [])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["", "", "x"], ["y", "sums"], body=body)], "while_loop",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("limit", TensorProto.FLOAT, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"]),
     helper.make_tensor_value_info("sums", TensorProto.FLOAT, ["k"])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(work, "while.onnx"))
graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
     helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
     helper.make_node("GatherND", ["r", "idx"], ["y"])], "select",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["k"])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(work, "select.onnx"))
save_tensor("limit100", np.array(100, np.float32))
save_tensor("x4", np.arange(4, dtype=np.float32))
save_tensor("x2", np.array([2, 3], np.float32))
save_tensor("sr16000", np.array(16000, np.int64))
save_tensor("sr8000", np.array(8000, np.int64))
save_tensor("m3", np.array(3, np.int64))

# test_relu with a wrong expected output.
wrong = os.path.join(work, "test_relu_wrong")
shutil.copytree(os.path.join(node, "test_relu"), wrong)
out_pb = os.path.join(wrong, "test_data_set_0", "output_0.pb")
t = onnx.TensorProto()
with open(out_pb, "rb") as f:
    t.ParseFromString(f.read())
a = numpy_helper.to_array(t).copy()
a.flat[0] += 1.0
with open(out_pb, "wb") as f:
    f.write(numpy_helper.from_array(a, t.name).SerializeToString())
EOF

# A case whose model file is truncated, and one with no test data.
mkdir -p "$WORK/test_truncated" "$WORK/test_no_data"
cp -r "$NODE/test_relu/test_data_set_0" "$WORK/test_truncated/"
head -c 20 "$NODE/test_relu/model.onnx" >"$WORK/test_truncated/model.onnx"
cp "$NODE/test_relu/model.onnx" "$WORK/test_no_data/"

MLP=$WORK/mlp.onnx

expect_output "types" 0 "inputs:" "x: f32[batch, 4]" "outputs:" "probs: f32[batch, 3]" \
  -- "$KILN" types "$MLP"

expect_output "run --shape" 0 "probs: f32[3, 3] = [" "compile + first run:" "p50" "p90" "p99" \
  -- "$KILN" run "$MLP" --shape x=3x4 --iters 5 --warmup 1

expect_output "run --input" 0 "probs: f32[2, 3] = [" \
  -- "$KILN" run "$MLP" --input "x=$WORK/x.pb" --iters 2 --threads 1 --opt-level 1

expect_output "run with profiling and IR" 0 "// IR after FuseOps" "pass timing" "InferType" \
  '"hits":' '"kernels":[{' -- "$KILN" run "$MLP" --shape x=1x4 --print-ir after=FuseOps \
  --time-passes --stats --disable-pass FoldConstant --iters 3

expect_output "run --print-ir after=all" 0 "// IR after InferType" "def @main" \
  -- "$KILN" run "$MLP" --shape x=2x4 --print-ir after=all --iters 1

expect_output "run --versus" 0 "versus tile.i=2 tile.j=16, alternating: p50" "p50 ratio" \
  '"kernels":[{' "versus stats: {" -- "$KILN" run "$MLP" --shape x=8x4 --iters 4 --stats \
  --versus "tile.i=2 tile.j=16"
expect_output "run --versus with a bad assignment" 2 "--versus wants KEY=VALUE, got 'tile.i'" \
  -- "$KILN" run "$MLP" --shape x=8x4 --versus "tile.i"
expect_output "run --versus with an unknown key" 2 "no.such.key" \
  -- "$KILN" run "$MLP" --shape x=8x4 --versus "no.such.key=1"

# A model's first run compiles its shape as eager does (the generic tier builds meanwhile).
expect_output "run --policy tiered --explain" 0 '"reason":"first run of model' '"tier":"specialized"' \
  "explain after the timed runs:" '"cached":true' \
  -- "$KILN" run "$MLP" --shape x=3x4 --iters 2 --policy tiered --explain
expect_output "run --policy with a bad name" 2 "unknown compile policy 'lazy'" \
  -- "$KILN" run "$MLP" --shape x=3x4 --policy lazy

# kiln bench: shapes in order through one tiered engine, the shape log, a warm start from it.
mkdir -p -m 700 "$WORK/bench_cache"
expect_output "bench tiered" 0 "policy tiered" "x=1x4" "x=7x4" "x=2x4" "first/spec" \
  "kernel compiles" -- "$KILN" bench "$MLP" --shapes "x=1x4;x=7x4;x=2x4" --iters 5 \
  --cache-dir "$WORK/bench_cache" --record "$WORK/shapes.txt"
expect_output "bench --record wrote the shapes" 0 "x=7x4" -- cat "$WORK/shapes.txt"
expect_output "bench --warm from the disk cache" 0 "kernel compiles 0," "warm start" \
  -- "$KILN" bench "$MLP" --shapes "x=1x4;x=7x4" --iters 3 --cache-dir "$WORK/bench_cache" \
  --warm "$WORK/shapes.txt"
expect_output "bench --compile-nice out of range" 2 "nice 20 is not 0 to 19" \
  -- "$KILN" bench "$MLP" --shapes "x=5x4" --compile-nice 20
expect_output "bench --json" 0 '{"shapes":[{"shape":"x=5x4","first_ms":' '"kernel_compiles":' \
  -- "$KILN" bench "$MLP" --shapes "x=5x4" --iters 2 --policy eager --json
# --trace: every run a span; a shape runs once, --iters times, waits for the background
# compiles and runs --iters times again (so 2 x 5 runs); with --json the message is on stderr.
"$KILN" bench "$MLP" --shapes "x=1x4;x=7x4" --iters 2 --json --trace "$WORK/bench_trace.json" \
  >"$WORK/bench_trace_stdout.json" 2>/dev/null
expect_output "bench --trace: a run span per run, stdout JSON" 0 "ok" -- /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
runs = [e for e in t["traceEvents"] if e["ph"] == "X" and e.get("cat") == "run"]
assert len(runs) == 10, len(runs)
assert len(json.load(open(sys.argv[2]))["shapes"]) == 2
print("ok")' "$WORK/bench_trace.json" "$WORK/bench_trace_stdout.json"
expect_output "bench --config" 0 "x=5x4" -- "$KILN" bench "$MLP" --shapes "x=5x4" --iters 2 \
  --config vectorize.width=4 --config winograd.any_image_size=0
expect_output "bench --config without a value" 2 "--config wants KEY=VALUE, got 'vectorize.width'" \
  -- "$KILN" bench "$MLP" --shapes "x=5x4" --config vectorize.width
expect_output "bench --config out of range" 1 "vectorize.width must be in [0, 64], got 100" \
  -- "$KILN" bench "$MLP" --shapes "x=5x4" --iters 2 --policy eager --config vectorize.width=100
expect_output "bench without --shapes" 2 "--shapes is required" -- "$KILN" bench "$MLP"
expect_output "bench with an unknown input" 2 "the model has no input 'y'" \
  -- "$KILN" bench "$MLP" --shapes "y=1x4"
echo "x=1x4" > "$WORK/bad_shapes.txt"
expect_output "bench --warm with a bad log" 1 "line 1" "run count" \
  -- "$KILN" bench "$MLP" --shapes "x=1x4" --warm "$WORK/bad_shapes.txt"

mkdir -p -m 700 "$WORK/cache"
expect_output "run --cache-dir" 0 "probs: f32[4, 3]" \
  -- "$KILN" run "$MLP" --shape x=4x4 --cache-dir "$WORK/cache" --iters 1

expect_output "run without --shape" 2 "input 'x'" "symbolic dim 'batch'" "--shape x=" \
  -- "$KILN" run "$MLP"

expect_output "run with a wrong rank" 2 "--shape x: the input has rank 2" \
  -- "$KILN" run "$MLP" --shape x=3x4x5

expect_output "If on a value input, then branch" 0 "y: f32[4] = [0, 2, 4, 6]" \
  '"kernel":"fused_mul"' -- "$KILN" run "$WORK/if_sr.onnx" --input "x=$WORK/x4.pb" \
  --input "sr=$WORK/sr16000.pb" --iters 1 --stats
expect_output "If on a value input, else branch" 0 "y: f32[4] = [1, 2, 3, 4]" \
  '"kernel":"fused_add"' -- "$KILN" run "$WORK/if_sr.onnx" --input "x=$WORK/x4.pb" \
  --input "sr=$WORK/sr8000.pb" --iters 1 --stats
expect_output "Loop with a trip count input" 0 "y: f32[2] = [16, 81]" \
  "scan: f32[3, 2] = [4, 9, 8, 27, 16, 81]" -- "$KILN" run "$WORK/loop.onnx" \
  --input "x=$WORK/x2.pb" --input "m=$WORK/m3.pb" --iters 1

expect_output "while Loop over data" 0 "y: f32[2] = [64, 96]" \
  "sums: f32[5] = [10, 20, 40, 80, 160]" '"shape_key":"while_loop.' \
  -- "$KILN" run "$WORK/while.onnx" --input "x=$WORK/x2.pb" --input "limit=$WORK/limit100.pb" \
  --iters 1 --stats
expect_output "types with a size only values decide" 0 "y: f32[?]" "known only when the model runs" \
  -- "$KILN" types "$WORK/select.onnx"
expect_output "NonZero in segments" 0 "y: f32[3] = [1, 2, 3]" '"shape_key":"select.rest(' \
  -- "$KILN" run "$WORK/select.onnx" --input "x=$WORK/x4.pb" --iters 2 --stats

# kiln compile: a file per kernel, for the CPU (LLVM IR) and for CUDA (CUDA C, PTX by NVRTC).
expect_output "compile --emit llvm" 0 "$WORK/kernels_ll/" ".ll" "kernel file(s) written" \
  -- "$KILN" compile "$MLP" --shape x=3x4 --emit llvm "$WORK/kernels_ll"
if ! grep -q "define" "$WORK"/kernels_ll/*.ll; then fail "compile --emit llvm: no LLVM function"; fi
expect_output "compile --emit cuda" 0 "$WORK/kernels_cu/" ".cu" \
  -- "$KILN" compile "$MLP" --shape x=3x4 --target "cuda -arch=sm_90" --emit cuda "$WORK/kernels_cu"
if ! grep -q "__global__" "$WORK"/kernels_cu/*.cu; then fail "compile --emit cuda: no kernel"; fi
out=$("$KILN" compile "$MLP" --shape x=3x4 --target "cuda -arch=sm_80" --emit ptx \
  "$WORK/kernels_ptx" 2>&1)
rc=$?
if grep -qF "NVRTC not found" <<<"$out"; then
  echo "cli_test: compile --emit ptx not checked: $out"
elif [ "$rc" != 0 ] || ! grep -q "^\.target sm_80" "$WORK"/kernels_ptx/*.ptx; then
  fail "compile --emit ptx: exit status $rc, output:"$'\n'"$out"
elif command -v ptxas >/dev/null 2>&1; then
  for f in "$WORK"/kernels_ptx/*.ptx; do
    ptxas -arch=sm_80 "$f" -o "$f.cubin" || fail "compile --emit ptx: ptxas rejects $f"
  done
fi
expect_output "compile --emit asm" 0 "$WORK/kernels_s/" ".s" \
  -- "$KILN" compile "$MLP" --shape x=3x4 --target "llvm -mcpu=x86-64-v3" --emit asm "$WORK/kernels_s"
# x86-64-v3 has AVX: its instructions are VEX-encoded (vmovss, vaddps, ...), SSE's are not.
if ! grep -qE "^\s+v(mov|add|mul|fmadd|max)" "$WORK"/kernels_s/*.s; then
  fail "compile --emit asm: no AVX instruction for x86-64-v3"
fi
expect_output "compile with a format of another target" 1 "llvm target emits llvm, asm, not 'ptx'" \
  -- "$KILN" compile "$MLP" --shape x=3x4 --emit ptx "$WORK/kernels_bad"
expect_output "compile without --emit" 2 "needs --emit" \
  -- "$KILN" compile "$MLP" --shape x=3x4 "$WORK/kernels_bad"
expect_output "compile without a shape for a symbolic dim" 2 "--shape x=" \
  -- "$KILN" compile "$MLP" --emit llvm "$WORK/kernels_bad"
# Without a CUDA driver (CI's machines) the engine says so when it is made; with one, it runs.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  expect_output "run --target cuda" 0 "p50" \
    -- "$KILN" run "$MLP" --shape x=3x4 --target cuda --iters 3
else
  expect_output "run --target cuda" 1 "there is no cuda(0)" \
    -- "$KILN" run "$MLP" --shape x=3x4 --target "cuda -arch=sm_90"
fi

expect_output "run on a missing file" 1 "/nonexistent.onnx" \
  -- "$KILN" run /nonexistent.onnx

expect_output "passes" 0 "opt_level" "FuseOps" "FoldConstant" "InferType" -- "$KILN" passes

expect_output "test-onnx on real cases" 0 "PASS test_add" "PASS test_relu" "2 passed, 0 failed" \
  -- "$KILN" test-onnx "$NODE/test_add" "$NODE/test_relu"
out=$("$KILN" test-onnx "$NODE/test_add" "$NODE/test_relu" 2>&1)
if [ "$(tail -n 1 <<<"$out")" != "2 passed, 0 failed" ]; then
  fail "test-onnx: the last line is not '2 passed, 0 failed':"$'\n'"$out"
fi

expect_output "test-onnx on broken cases" 1 "PASS test_relu" \
  "FAIL test_relu_wrong: test_data_set_0: output 'y': element 0" \
  "FAIL test_truncated: cannot load" "FAIL test_no_data: no test_data_set_* directory" \
  "FAIL does_not_exist: not a directory" "1 passed, 4 failed" \
  -- "$KILN" test-onnx --rtol 1e-3 --atol 1e-5 "$NODE/test_relu" "$WORK/test_relu_wrong" \
  "$WORK/test_truncated" "$WORK/test_no_data" "$WORK/does_not_exist"

expect_output "run --trace" 0 "trace: " "bytes written to $WORK/trace.json" \
  -- "$KILN" run "$MLP" --shape x=3x4 --iters 2 --trace "$WORK/trace.json"
expect_output "the trace is Chrome trace JSON" 0 "ok" -- /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
cats = {e.get("cat") for e in t["traceEvents"] if e["ph"] == "X"}
assert {"run", "compile", "pass", "kernel"} <= cats, cats
print("ok")' "$WORK/trace.json"
expect_output "run --trace to a folder that does not exist" 1 "--trace: cannot write" \
  -- "$KILN" run "$MLP" --shape x=3x4 --iters 1 --trace "$WORK/no/such/dir/t.json"
expect_output "run --pipeline" 0 "probs: f32[3, 3] = [" "// IR after FoldConstant" \
  -- "$KILN" run "$MLP" --shape x=3x4 --iters 1 --pipeline "InferType,FoldConstant" \
  --print-ir after=FoldConstant
expect_output "run --pipeline with an unknown pass" 2 "NoSuchPass" \
  -- "$KILN" run "$MLP" --shape x=3x4 --pipeline "InferType,NoSuchPass"
expect_output "cache ls" 0 "fused_" "llvm" "fn(f32[4, 4]" "entries," "bytes in $WORK/cache" \
  -- "$KILN" cache ls --cache-dir "$WORK/cache"
expect_output "cache ls --json" 0 '"status":"ok"' '"kernel":"fused_' '"signature":"fn(' \
  -- "$KILN" cache ls --cache-dir "$WORK/cache" --json
expect_output "cache clear" 0 "removed " "entries from $WORK/cache" \
  -- "$KILN" cache clear --cache-dir "$WORK/cache"
expect_output "cache ls after clear" 0 "0 entries, 0 bytes" \
  -- "$KILN" cache ls --cache-dir "$WORK/cache"
expect_output "cache ls of no cache" 1 "there is no cache directory '$WORK/no-cache'" \
  -- "$KILN" cache ls --cache-dir "$WORK/no-cache"
expect_output "cache without --cache-dir" 2 "needs --cache-dir" -- "$KILN" cache ls
expect_output "--version" 0 "kiln 0." "C API" "libkiln.so." -- "$KILN" --version

expect_output "no command" 2 "usage:" -- "$KILN"
expect_output "unknown command" 2 "unknown command 'frobnicate'" "usage:" -- "$KILN" frobnicate
expect_output "run with no model" 2 "no MODEL given" -- "$KILN" run
expect_output "unknown flag" 2 "unknown option '--bogus'" -- "$KILN" run "$MLP" --bogus
expect_output "bad number" 2 "--iters: 'many' is not a number" -- "$KILN" run "$MLP" --iters many
expect_output "bad --shape" 2 "--shape wants NAME=VALUE" -- "$KILN" run "$MLP" --shape 3x4
expect_output "bad --print-ir" 2 "--print-ir wants after=PASS" \
  -- "$KILN" run "$MLP" --print-ir before=all
expect_output "unknown pass" 2 "unknown pass 'NoSuchPass'" \
  -- "$KILN" run "$MLP" --disable-pass NoSuchPass
expect_output "test-onnx with no dirs" 2 "no CASE_DIR" -- "$KILN" test-onnx --rtol 1e-2
expect_output "types with no model" 2 "exactly one MODEL" -- "$KILN" types

finish
