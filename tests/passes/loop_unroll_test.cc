// UnrollLoops: golden tests on printed loop IR, run through the pass manager, and a kernel
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

std::string Unrolled(const PrimFunc& f, int64_t max_extent = 4) {
  return Print(RunLoopPass("UnrollLoops", f, {{"unroll.max_extent", max_extent}}));
}

TEST(UnrollLoops, SmallInnermostSerialLoop) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(3)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(3)});
  Stmt body = For(i, I(0), n, ForKind::kSerial,
                  For(j, I(0), I(3), ForKind::kSerial,
                      Store(out, {i, j}, Mul(Load(a, {i, j}), FloatImm(2.0)))));
  EXPECT_EQ(Unrolled(MakePrimFunc({a, out}, {n}, body)),
            "func @f(%a: f32[n, 3], %out: f32[n, 3]; n: i64) {\n"
            "  for i in [0, n) {\n"
            "    out[i, 0] = a[i, 0] * 2.0f\n"
            "    out[i, 1] = a[i, 1] * 2.0f\n"
            "    out[i, 2] = a[i, 2] * 2.0f\n"
            "  }\n"
            "}\n");
}

// Innermost is judged on the nest as written: unrolling the inner loop does not make the outer
// one innermost.
TEST(UnrollLoops, OnlyTheInnermostOfANest) {
  Var i = MakeVar("i"), j = MakeVar("j");
  Buffer out = MakeBuffer("out", DType::kInt64, {I(2), I(2)});
  Stmt body = For(i, I(0), I(2), ForKind::kSerial,
                  For(j, I(0), I(2), ForKind::kSerial, Store(out, {i, j}, Add(Mul(i, I(2)), j))));
  EXPECT_EQ(Unrolled(MakePrimFunc({out}, {}, body)),
            "func @f(%out: i64[2, 2]) {\n"
            "  for i in [0, 2) {\n"
            "    out[i, 0] = i * 2\n"
            "    out[i, 1] = i * 2 + 1\n"
            "  }\n"
            "}\n");
}

// A small loop whose variable is divided or taken modulo a constant unrolls though it holds
// loops, when every loop inside unrolls too (a strided conv's taps around a register tile): its
// divisions fold to constants. The same nest with the variable only in affine indices keeps the
// outer loop, and so does one holding a loop that stays.
TEST(UnrollLoops, DividedTapLoopsUnrollWithTheirBody) {
  Var ky = MakeVar("ky"), kx = MakeVar("kx"), r = MakeVar("r"), j = MakeVar("j");
  Buffer p = MakeBuffer("p", DType::kFloat32, {I(4), I(16)});
  Buffer acc = MakeBuffer("acc", DType::kFloat32, {I(2)});
  // acc[r] += p[ky % 2 * 2 + kx % 2, ky // 2 * 4 + kx // 2 + r]
  auto tap = [&](const Expr& y, const Expr& x, const Expr& row) {
    return Store(acc, {row},
                 Add(Load(acc, {row}),
                     Load(p, {Add(Mul(FloorMod(y, I(2)), I(2)), FloorMod(x, I(2))),
                              Add(Add(Mul(FloorDiv(y, I(2)), I(4)), FloorDiv(x, I(2))), row)})));
  };
  Stmt nest = For(ky, I(0), I(3), ForKind::kSerial,
                  For(kx, I(0), I(2), ForKind::kSerial,
                      For(r, I(0), I(2), ForKind::kUnrolled, tap(ky, kx, r))));
  std::string out = Unrolled(MakePrimFunc({p, acc}, {}, nest));
  EXPECT_EQ(out.find("for"), std::string::npos) << out;
  EXPECT_NE(out.find("acc[1] = acc[1] + p[3, 1]"), std::string::npos) << out;  // ky 1, kx 1
  EXPECT_NE(out.find("acc[0] = acc[0] + p[0, 4]"), std::string::npos) << out;  // ky 2, kx 0

  // Affine only: the inner loop unrolls (innermost), the outer stays.
  Stmt affine = For(ky, I(0), I(3), ForKind::kSerial,
                    For(kx, I(0), I(2), ForKind::kSerial, Store(acc, {kx}, Load(p, {ky, kx}))));
  std::string kept = Unrolled(MakePrimFunc({p, acc}, {}, affine));
  EXPECT_NE(kept.find("for ky in [0, 3)"), std::string::npos) << kept;
  EXPECT_EQ(kept.find("for kx"), std::string::npos) << kept;

  // A loop inside that does not unroll (symbolic extent) keeps the divided loop too.
  Var n = MakeVar("n");
  Stmt long_inner =
      For(ky, I(0), I(3), ForKind::kSerial, For(j, I(0), n, ForKind::kSerial, tap(ky, I(0), I(0))));
  std::string stays = Unrolled(MakePrimFunc({p, acc}, {n}, long_inner));
  EXPECT_NE(stays.find("for ky in [0, 3)"), std::string::npos) << stays;
}

// `unroll.max_extent` bounds serial loops; a larger one unrolls more, 0 none.
TEST(UnrollLoops, MaxExtentConfig) {
  Var j = MakeVar("j");
  Buffer out = MakeBuffer("out", DType::kInt64, {I(5)});
  PrimFunc f = MakePrimFunc({out}, {}, For(j, I(0), I(5), ForKind::kSerial, Store(out, {j}, j)));
  EXPECT_EQ(RunLoopPass("UnrollLoops", f), f);  // default 4
  EXPECT_EQ(RunLoopPass("UnrollLoops", f, {{"unroll.max_extent", int64_t{0}}}), f);
  EXPECT_EQ(Unrolled(f, 5),
            "func @f(%out: i64[5]) {\n"
            "  out[0] = 0\n"
            "  out[1] = 1\n"
            "  out[2] = 2\n"
            "  out[3] = 3\n"
            "  out[4] = 4\n"
            "}\n");
  bool registered = false;
  for (const PassConfigInfo& c : ListPassConfigs())
    if (c.key == "unroll.max_extent")
      registered = c.kind == AttrKind::kInt && c.default_value == AttrValue(int64_t{4});
  EXPECT_TRUE(registered);
}

// `unrolled` loops are unrolled whatever they contain and however long they are; a symbolic
// extent cannot be, and stays (the code generator still asks LLVM to unroll it).
TEST(UnrollLoops, UnrolledKind) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer out = MakeBuffer("out", DType::kInt64, {I(2), n});
  Buffer t = MakeBuffer("t", DType::kInt64, {I(1)}, BufferNode::Scope::kLocal);
  Stmt body = Seq({
      For(i, I(0), I(2), ForKind::kUnrolled,
          Seq({Alloc(t), Store(t, {I(0)}, Mul(i, I(100))),
               For(j, I(0), n, ForKind::kSerial, Store(out, {i, j}, Add(Load(t, {I(0)}), j))),
               Free(t)})),
      For(k, I(0), n, ForKind::kUnrolled, Store(out, {I(0), k}, k)),
  });
  EXPECT_EQ(Unrolled(MakePrimFunc({out}, {n}, body), 0),
            "func @f(%out: i64[2, n]; n: i64) {\n"
            "  alloc t: i64[1] local\n"
            "  t[0] = 0\n"
            "  for j in [0, n) {\n"
            "    out[0, j] = t[0] + j\n"
            "  }\n"
            "  free t\n"
            "  alloc t: i64[1] local\n"
            "  t[0] = 100\n"
            "  for j in [0, n) {\n"
            "    out[1, j] = t[0] + j\n"
            "  }\n"
            "  free t\n"
            "  for k in [0, n) unrolled {\n"
            "    out[0, k] = k\n"
            "  }\n"
            "}\n");
}

// Must not fire: parallel and vectorized loops, symbolic extents, bodies that allocate.
TEST(UnrollLoops, LoopsThatStay) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k"), l = MakeVar("l");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  Buffer t = MakeBuffer("t", DType::kInt64, {I(1)}, BufferNode::Scope::kLocal);
  PrimFunc f = MakePrimFunc(
      {out}, {n},
      Seq({For(i, I(0), I(2), ForKind::kParallel, Store(out, {i}, i)),
           For(j, I(0), I(4), ForKind::kVectorized, Store(out, {j}, j)),
           For(k, I(0), n, ForKind::kSerial, Store(out, {k}, k)),
           For(l, I(0), I(2), ForKind::kSerial,
               Seq({Alloc(t), Store(t, {I(0)}, l), Store(out, {l}, Load(t, {I(0)})), Free(t)}))}));
  EXPECT_EQ(RunLoopPass("UnrollLoops", f), f);
}

// Copies start at `min`; lets in the body appear once per copy, in sibling scopes; a loop that
// never runs unrolls to nothing.
TEST(UnrollLoops, SymbolicMinLetsAndEmptyLoops) {
  Var n = MakeVar("n"), j = MakeVar("j"), x = MakeVar("x"), k = MakeVar("k");
  Buffer out = MakeBuffer("out", DType::kInt64, {Add(n, I(2))});
  Stmt body = Seq({
      For(j, n, I(2), ForKind::kSerial, LetStmt(x, Mul(j, I(3)), Store(out, {j}, x))),
      For(k, I(0), I(0), ForKind::kUnrolled, Store(out, {k}, k)),
  });
  EXPECT_EQ(Unrolled(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: i64[n + 2]; n: i64) {\n"
            "  let x = n * 3 {\n"
            "    out[n] = x\n"
            "  }\n"
            "  let x = (n + 1) * 3;\n"
            "  out[n + 1] = x\n"
            "}\n");
}

TEST(UnrollLoops, CompiledResultsAgree) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(4)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(4)});
  Buffer acc = MakeBuffer("acc", DType::kFloat32, {I(1)}, BufferNode::Scope::kLocal);
  Stmt body = For(
      i, I(0), n, ForKind::kSerial,
      Seq({Alloc(acc), Store(acc, {I(0)}, FloatImm(0.0)),
           For(k, I(0), I(4), ForKind::kSerial,
               Store(acc, {I(0)}, Add(Load(acc, {I(0)}), Load(a, {i, k})))),
           For(j, I(0), I(2), ForKind::kUnrolled,
               For(k, I(0), I(2), ForKind::kSerial,
                   Store(out, {i, Add(Mul(j, I(2)), k)},
                         Sub(Load(a, {i, Sub(I(3), Add(Mul(j, I(2)), k))}), Load(acc, {I(0)}))))),
           Free(acc)}));
  PrimFunc f = MakePrimFunc({a, out}, {n}, body);
  PrimFunc g = RunLoopPass("UnrollLoops", f);
  ASSERT_NE(Print(g), Print(f));
  std::vector<float> in = {1, 2, 3, 4, -1, 0.5f, 0.25f, 8};
  auto run = [&](const PrimFunc& kernel) {
    return RunF32Kernel(kernel, {in.data()}, in.size(), {2});
  };
  std::vector<float> before = run(f);
  EXPECT_EQ(run(g), before);
  EXPECT_EQ(before, (std::vector<float>{-6, -7, -8, -9, 0.25f, -7.5f, -7.25f, -8.75f}));
}

}  // namespace
}  // namespace kiln::loop
