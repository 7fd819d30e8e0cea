// RemoveTrivialLoops: golden tests on printed loop IR, run through the pass manager, and a kernel
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

std::string Removed(const PrimFunc& f) {
  return Print(RunLoopPass("RemoveTrivialLoops", f));
}

TEST(RemoveTrivialLoops, ExtentOneBecomesItsBodyAndExtentZeroGoes) {
  Var i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kFloat32, {I(16)});
  Buffer b = MakeBuffer("b", DType::kFloat32, {I(1), I(16)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(16)});
  Stmt body = Seq({
      For(i, I(0), I(1), ForKind::kSerial,
          For(j, I(0), I(16), ForKind::kSerial,
              Store(out, {Add(Mul(i, I(16)), j)}, Add(Load(a, {j}), Load(b, {i, j}))))),
      For(k, I(0), I(0), ForKind::kSerial, Store(out, {k}, FloatImm(0.0))),
  });
  EXPECT_EQ(Removed(MakePrimFunc({a, b, out}, {}, body)),
            "func @f(%a: f32[16], %b: f32[1, 16], %out: f32[16]) {\n"
            "  for j in [0, 16) {\n"
            "    out[j] = a[j] + b[0, j]\n"
            "  }\n"
            "}\n");
}

// Nested trivial loops collapse from the inside out; `min` replaces the variable.
TEST(RemoveTrivialLoops, NestedAndNonZeroMin) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer out = MakeBuffer("out", DType::kInt64, {n, I(8)});
  Stmt body =
      For(i, I(3), I(1), ForKind::kSerial,
          For(j, Sub(n, I(1)), I(1), ForKind::kParallel,
              For(k, I(0), I(8), ForKind::kVectorized, Store(out, {j, k}, Add(Mul(i, k), j)))));
  EXPECT_EQ(Removed(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: i64[n, 8]; n: i64) {\n"
            "  for k in [0, 8) vectorized {\n"
            "    out[n - 1, k] = 3 * k + (n - 1)\n"
            "  }\n"
            "}\n");
}

// Extents that are not constants are left alone unless their constants bound them by 0.
TEST(RemoveTrivialLoops, SymbolicExtents) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k"), l = MakeVar("l");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  Stmt body = Seq({
      For(i, I(0), n, ForKind::kSerial, Store(out, {i}, i)),
      // Must not fire: `n - n` is 0, but seeing that is LoopSimplify's job; `max(n, 1)` has no
      // upper bound.
      For(j, I(0), Sub(n, n), ForKind::kSerial, Store(out, {j}, j)),
      For(l, I(0), Max(n, I(1)), ForKind::kSerial, Store(out, {l}, l)),
      For(k, I(0), Min(n, I(0)), ForKind::kSerial, Store(out, {k}, k)),
      For(k, I(0), Add(Min(n, I(2)), I(-3)), ForKind::kSerial, Store(out, {k}, k)),
      For(k, I(0), I(-2), ForKind::kSerial, Store(out, {k}, k)),
  });
  EXPECT_EQ(Removed(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: i64[n]; n: i64) {\n"
            "  for i in [0, n) {\n"
            "    out[i] = i\n"
            "  }\n"
            "  for j in [0, n - n) {\n"
            "    out[j] = j\n"
            "  }\n"
            "  for l in [0, max(n, 1)) {\n"
            "    out[l] = l\n"
            "  }\n"
            "}\n");
}

// A loop left with nothing to run goes too, up to the whole kernel body.
TEST(RemoveTrivialLoops, LoopsLeftEmptyGo) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  Stmt body =
      For(i, I(0), n, ForKind::kParallel, For(j, I(0), I(0), ForKind::kSerial, Store(out, {i}, j)));
  EXPECT_EQ(Removed(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: i64[n]; n: i64) {\n"
            "}\n");
}

// A GPU-bound loop of extent 1 is the launch configuration too: it stays.
TEST(RemoveTrivialLoops, GpuBindingsStay) {
  Var i = MakeVar("i"), j = MakeVar("j");
  Buffer out = MakeBuffer("out", DType::kInt64, {I(1), I(1)});
  Stmt body = For(i, I(0), I(1), ForKind::kGpuBlockX,
                  For(j, I(0), I(1), ForKind::kGpuThreadX, Store(out, {i, j}, Add(i, j))));
  PrimFunc f = MakePrimFunc({out}, {}, body);
  EXPECT_EQ(RunLoopPass("RemoveTrivialLoops", f), f);
}

// Allocations, lets, branches and block bindings in the body see `min`, buffer shapes too.
TEST(RemoveTrivialLoops, BodyWithLocalsLetsAndBlocks) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), x = MakeVar("x"), v = MakeVar("v");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  Buffer t = MakeBuffer("t", DType::kInt64, {Add(i, I(4))}, BufferNode::Scope::kLocal);
  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = "copy";
  block->iter_vars = {{v, n}};
  block->is_reduce = {false};
  block->bindings = {Add(i, j)};
  block->writes = {{out, {v}, {I(1)}}};
  block->body = Store(out, {v}, Load(t, {I(0)}));
  Stmt body = For(i, I(2), I(1), ForKind::kSerial,
                  Seq({Alloc(t), LetStmt(x, Mul(i, I(10)), Store(t, {I(0)}, x)),
                       For(j, I(0), Sub(n, i), ForKind::kSerial,
                           IfThenElse(MakeBinary(BinaryOp::kLT, j, i), Stmt(block))),
                       Free(t)}));
  EXPECT_EQ(Removed(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: i64[n]; n: i64) {\n"
            "  alloc t: i64[6] local\n"
            "  let x = 20 {\n"
            "    t[0] = x\n"
            "  }\n"
            "  for j in [0, n - 2) {\n"
            "    if (j < 2) {\n"
            "      block copy(v in [0, n) = 2 + j) {\n"
            "        writes out[v]\n"
            "        out[v] = t[0]\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "  free t\n"
            "}\n");
}

TEST(RemoveTrivialLoops, NothingToDoKeepsTheKernel) {
  Var n = MakeVar("n"), i = MakeVar("i");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  PrimFunc f = MakePrimFunc({out}, {n}, For(i, I(0), n, ForKind::kSerial, Store(out, {i}, i)));
  EXPECT_EQ(RunLoopPass("RemoveTrivialLoops", f), f);
}

TEST(RemoveTrivialLoops, CompiledResultsAgree) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(3)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(3)});
  Stmt body = For(i, I(0), n, ForKind::kSerial,
                  For(j, I(1), I(1), ForKind::kSerial,
                      Seq({For(k, I(0), I(3), ForKind::kSerial,
                               Store(out, {i, k}, Mul(Load(a, {i, Sub(I(2), k)}), FloatImm(2.0)))),
                           For(k, I(0), I(0), ForKind::kSerial, Store(out, {i, j}, FloatImm(9.0))),
                           Store(out, {i, j}, Load(a, {i, j}))})));
  PrimFunc f = MakePrimFunc({a, out}, {n}, body);
  PrimFunc g = RunLoopPass("RemoveTrivialLoops", f);
  ASSERT_NE(Print(g), Print(f));
  std::vector<float> in = {1, 2, 3, -4, -5, -6, 0.5f, 0.25f, 0.125f};
  auto run = [&](const PrimFunc& kernel) {
    return RunF32Kernel(kernel, {in.data()}, in.size(), {3});
  };
  std::vector<float> before = run(f);
  EXPECT_EQ(run(g), before);
  EXPECT_EQ(before, (std::vector<float>{6, 2, 2, -12, -5, -8, 0.25f, 0.25f, 1}));
}

}  // namespace
}  // namespace kiln::loop
