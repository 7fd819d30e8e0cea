// FlattenBuffers: golden tests on printed loop IR, run through the pass manager, and kernels
// compiled before and after.
#include <gtest/gtest.h>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;
using test::RunF32Kernel;
using test::RunLoopPass;

Expr I(int64_t v) {
  return IntImm(v);
}

std::string Flattened(const PrimFunc& f) {
  return Print(RunLoopPass("FlattenBuffers", f));
}

Stmt Loop(const Var& v, Expr extent, Stmt body) {
  return For(v, I(0), std::move(extent), ForKind::kSerial, std::move(body));
}

TEST(FlattenBuffers, RowMajor) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(16)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(16)});
  PrimFunc f = MakePrimFunc(
      {a, out}, {n},
      Loop(i, n, Loop(j, I(16), Store(out, {i, j}, Mul(Load(a, {i, j}), FloatImm(2.0))))));
  PrimFunc g = RunLoopPass("FlattenBuffers", f);
  EXPECT_EQ(Print(g),
            "func @f(%a: f32[n, 16] strides [16, 1], %out: f32[n, 16] strides [16, 1]; n: i64) {\n"
            "  for i in [0, n) {\n"
            "    for j in [0, 16) {\n"
            "      out[i * 16 + j] = a[i * 16 + j] * 2.0f\n"
            "    }\n"
            "  }\n"
            "}\n");
  // The signature names the buffers the body uses, and the input is left as it was.
  const StoreNode* store = AsStore(AsFor(AsFor(g->body)->body)->body);
  EXPECT_EQ(store->buffer, g->buffer_params[1]);
  EXPECT_EQ(AsLoad(AsBinary(store->value)->a)->buffer, g->buffer_params[0]);
  EXPECT_TRUE(f->buffer_params[0]->strides.empty());
}

TEST(FlattenBuffers, SymbolicShapesAndLocals) {
  Var n = MakeVar("n"), m = MakeVar("m"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kInt32, {n, m, I(4)});
  Buffer out = MakeBuffer("out", DType::kInt32, {n, m});
  Buffer t = MakeBuffer("t", DType::kInt32, {I(2), I(4)}, BufferNode::Scope::kLocal);
  Stmt body = Loop(i, n,
                   Loop(j, m,
                        Seq({Alloc(t), Loop(k, I(4), Store(t, {I(1), k}, Load(a, {i, j, k}))),
                             Store(out, {i, j}, Load(t, {I(1), I(3)})), Free(t)})));
  EXPECT_EQ(Flattened(MakePrimFunc({a, out}, {n, m}, body)),
            "func @f(%a: i32[n, m, 4] strides [m * 4, 4, 1], %out: i32[n, m] strides [m, 1]; n: "
            "i64, m: i64) {\n"
            "  for i in [0, n) {\n"
            "    for j in [0, m) {\n"
            "      alloc t: i32[2, 4] strides [4, 1] local\n"
            "      for k in [0, 4) {\n"
            "        t[4 + k] = a[i * (m * 4) + j * 4 + k]\n"
            "      }\n"
            "      out[i * m + j] = t[7]\n"
            "      free t\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// Explicit strides are used as they are, and such a buffer is kept; rank 0 and rank 1 have
// nothing to flatten (a rank-1 index is scaled by the stride by every reader).
TEST(FlattenBuffers, ExplicitStridesAndLowRanks) {
  Var i = MakeVar("i"), j = MakeVar("j");
  Buffer w =
      MakeBuffer("w", DType::kFloat32, {I(4), I(8)}, BufferNode::Scope::kGlobal, {I(16), I(2)});
  Buffer v = MakeBuffer("v", DType::kFloat32, {I(4)}, BufferNode::Scope::kGlobal, {I(3)});
  Buffer s = MakeBuffer("s", DType::kFloat32, {});
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(4)});
  PrimFunc f = MakePrimFunc(
      {w, v, s, out}, {},
      Loop(i, I(4),
           Loop(j, I(8), Store(out, {i}, Add(Add(Load(w, {i, j}), Load(v, {i})), Load(s, {}))))));
  PrimFunc g = RunLoopPass("FlattenBuffers", f);
  EXPECT_EQ(Print(g),
            "func @f(%w: f32[4, 8] strides [16, 2], %v: f32[4] strides [3], %s: f32[], %out: "
            "f32[4]) {\n"
            "  for i in [0, 4) {\n"
            "    for j in [0, 8) {\n"
            "      out[i] = w[i * 16 + j * 2] + v[i] + s[]\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(g->buffer_params, f->buffer_params);
}

// Vector indices stay ramps where they can: contiguous rows, strided columns; other vectors are
// scaled lane by lane.
TEST(FlattenBuffers, VectorIndices) {
  Var i = MakeVar("i"), j = MakeVar("j");
  Buffer a = MakeBuffer("a", DType::kFloat32, {I(8), I(16)});
  Buffer idx = MakeBuffer("idx", DType::kInt64, {I(4)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(8), I(16)});
  Expr col = Load(a, {Ramp(i, 1, 4), Broadcast(j, 4)});
  Expr gathered = Load(a, {Load(idx, {Ramp(I(0), 1, 4)}), Broadcast(j, 4)});
  PrimFunc f = MakePrimFunc(
      {a, idx, out}, {},
      Loop(i, I(2), Loop(j, I(4), Store(out, {i, Ramp(Mul(j, I(4)), 1, 4)}, Add(col, gathered)))));
  EXPECT_EQ(Flattened(f),
            "func @f(%a: f32[8, 16] strides [16, 1], %idx: i64[4], %out: f32[8, 16] strides [16, "
            "1]) {\n"
            "  for i in [0, 2) {\n"
            "    for j in [0, 4) {\n"
            "      out[ramp(i * 16 + j * 4, 1, 4)] = a[ramp(j + i * 16, 16, 4)] + a[idx[ramp(0, 1, "
            "4)] * broadcast(16, 4) + broadcast(j, 4)]\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// Schedule-block regions stay per dim (the shape is kept); a flat kernel is left alone.
TEST(FlattenBuffers, BlocksAndAlreadyFlat) {
  Var i = MakeVar("i"), vi = MakeVar("vi");
  Buffer a = MakeBuffer("a", DType::kFloat32, {I(2), I(3)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(2), I(3)});
  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = "copy";
  block->iter_vars = {{vi, I(3)}};
  block->is_reduce = {false};
  block->bindings = {i};
  block->reads = {{a, {I(1), vi}, {I(1), I(1)}}};
  block->writes = {{out, {I(0), vi}, {I(1), I(1)}}};
  block->body = Store(out, {I(0), vi}, Load(a, {I(1), vi}));
  PrimFunc f = MakePrimFunc({a, out}, {}, Loop(i, I(3), Stmt(block)));
  PrimFunc g = RunLoopPass("FlattenBuffers", f);
  EXPECT_EQ(Print(g),
            "func @f(%a: f32[2, 3] strides [3, 1], %out: f32[2, 3] strides [3, 1]) {\n"
            "  for i in [0, 3) {\n"
            "    block copy(vi in [0, 3) = i) {\n"
            "      reads a[1, vi]\n"
            "      writes out[0, vi]\n"
            "      out[vi] = a[3 + vi]\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(RunLoopPass("FlattenBuffers", g), g);
}

TEST(FlattenBuffers, CompiledResultsAgree) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(3), I(2)});
  Buffer w =
      MakeBuffer("w", DType::kFloat32, {I(2), I(3)}, BufferNode::Scope::kGlobal, {I(1), I(2)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(2)});
  Buffer t = MakeBuffer("t", DType::kFloat32, {I(2), I(3)}, BufferNode::Scope::kLocal);
  // out[i, k] = sum_j a[i, j, k] * w[k, j] (w is the transpose of a 3 x 2 row-major array),
  // through a local 2 x 3 buffer.
  Stmt body = Loop(
      i, n,
      Seq({Alloc(t),
           Loop(j, I(3), Loop(k, I(2), Store(t, {k, j}, Mul(Load(a, {i, j, k}), Load(w, {k, j}))))),
           Loop(k, I(2),
                Store(out, {i, k},
                      Add(Add(Load(t, {k, I(0)}), Load(t, {k, I(1)})), Load(t, {k, I(2)})))),
           Free(t)}));
  PrimFunc f = MakePrimFunc({a, w, out}, {n}, body);
  PrimFunc g = RunLoopPass("FlattenBuffers", f);
  std::vector<float> x = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  std::vector<float> wt = {1, 10, 2, 20, 3, 30};  // w[k, j] = wt[k + 2 * j]
  auto run = [&](const PrimFunc& kernel) {
    return RunF32Kernel(kernel, {x.data(), wt.data()}, 4, {2});
  };
  std::vector<float> before = run(f);
  EXPECT_EQ(run(g), before);
  EXPECT_EQ(run(RunLoopPass("LoopSimplify", g)), before);
  EXPECT_EQ(before, (std::vector<float>{22, 280, -22, -280}));
}

}  // namespace
}  // namespace kiln::loop
