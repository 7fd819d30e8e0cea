// FuseLoops: golden tests on printed loop IR, and kernels compiled before and after the pass
// compared bit for bit.
#include <gtest/gtest.h>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/loop_pass.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;
using test::RunLoopPass;

Expr I(int64_t v) {
  return IntImm(v);
}

Buffer F32(const std::string& name, std::vector<Expr> shape) {
  return MakeBuffer(name, DType::kFloat32, std::move(shape));
}

Buffer Local(const std::string& name, std::vector<Expr> shape) {
  return MakeBuffer(name, DType::kFloat32, std::move(shape), BufferNode::Scope::kLocal);
}

Stmt Loop(const Var& v, const Expr& extent, Stmt body) {
  return For(v, I(0), extent, ForKind::kSerial, std::move(body));
}

// The loops in printed IR.
int CountLoops(const Stmt& s) {
  std::string text = Print(s);
  int n = 0;
  for (size_t at = text.find("for "); at != std::string::npos; at = text.find("for ", at + 1)) ++n;
  return n;
}

PrimFunc Fused(const PrimFunc& f) {
  return RunLoopPass("FuseLoops", f);
}

void ExpectSameResults(const PrimFunc& before, const PrimFunc& after) {
  test::ExpectSameResults(before, after, {31, -2, 2});
}

// The layer-norm shape: a computed row, its mean, the output. t is used only inside the fused
// loop, so it becomes one row; mean too.
PrimFunc RowPasses(const Expr& rows, const Expr& cols, std::vector<Var> scalars = {}) {
  Var i = MakeVar("i"), k = MakeVar("k"), i2 = MakeVar("i2"), k2 = MakeVar("k2"),
      i3 = MakeVar("i3"), k3 = MakeVar("k3");
  Buffer x = F32("x", {rows, cols}), out = F32("out", {rows, cols});
  Buffer t = Local("t", {rows, cols}), mean = Local("mean", {rows}), acc = Local("acc", {I(1)});
  Stmt body = Seq({
      Alloc(t),
      Alloc(mean),
      Loop(i, rows, Loop(k, cols, Store(t, {i, k}, Mul(Load(x, {i, k}), FloatImm(2))))),
      Loop(i2, rows,
           Seq({Alloc(acc), Store(acc, {I(0)}, FloatImm(0)),
                Loop(k2, cols, Store(acc, {I(0)}, Add(Load(acc, {I(0)}), Load(t, {i2, k2})))),
                Store(mean, {i2}, Load(acc, {I(0)})), Free(acc)})),
      Loop(i3, rows,
           Loop(k3, cols, Store(out, {i3, k3}, Sub(Load(t, {i3, k3}), Load(mean, {i3}))))),
      Free(mean),
      Free(t),
  });
  return MakePrimFunc({x, out}, std::move(scalars), body);
}

TEST(FuseLoops, RowPassesFuseAndTheirBuffersShrinkToOneRow) {
  PrimFunc f = RowPasses(I(5), I(7));
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(for i in [0, 5) {
  alloc mean: f32[1] local
  alloc t: f32[1, 7] local
  for k in [0, 7) {
    t[0, k] = x[i, k] * 2.0f
  }
  alloc acc: f32[1] local
  acc[0] = 0.0f
  for k2 in [0, 7) {
    acc[0] = acc[0] + t[0, k2]
  }
  mean[0] = acc[0]
  free acc
  for k3 in [0, 7) {
    out[i, k3] = t[0, k3] - mean[0]
  }
  free t
  free mean
}
)");
  ExpectSameResults(f, g);
}

// Symbolic extents fuse when they are the same expression.
TEST(FuseLoops, SymbolicRows) {
  Var n = MakeVar("n");
  PrimFunc f = RowPasses(n, I(3), {n});
  PrimFunc g = Fused(f);
  EXPECT_EQ(CountLoops(g->body), 4) << Print(g->body);
  test::ExpectSameResults(f, g, {32, -2, 2}, {{1}, {6}});
}

// [batch, seq, d]: the batch loops fuse, then the seq loops inside them, then (elementwise,
// row by row) the innermost ones; the buffer shrinks along each, down to one element, which
// then is only a name for the value stored (see OneElementBuffersForwardTheirValue).
TEST(FuseLoops, NestedRowsFuseLevelByLevel) {
  Var b = MakeVar("b"), s = MakeVar("s"), k = MakeVar("k"), b2 = MakeVar("b2"), s2 = MakeVar("s2"),
      k2 = MakeVar("k2");
  Buffer x = F32("x", {I(2), I(3), I(4)}), out = F32("out", {I(2), I(3), I(4)});
  Buffer t = Local("t", {I(2), I(3), I(4)});
  Stmt body = Seq({
      Alloc(t),
      Loop(b, I(2), Loop(s, I(3), Loop(k, I(4), Store(t, {b, s, k}, Load(x, {b, s, k}))))),
      Loop(b2, I(2),
           Loop(s2, I(3),
                Loop(k2, I(4), Store(out, {b2, s2, k2}, Add(Load(t, {b2, s2, k2}), FloatImm(1)))))),
      Free(t),
  });
  PrimFunc f = MakePrimFunc({x, out}, {}, body);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(for b in [0, 2) {
  for s in [0, 3) {
    for k in [0, 4) {
      out[b, s, k] = x[b, s, k] + 1.0f
    }
  }
}
)");
  ExpectSameResults(f, g);
}

// t = f(x) elementwise, then out = t * g(t) (swish over a fused value): fused, t shrinks to one
// element that is stored and then read twice, so its loads become the value and the buffer
// goes (VectorizeLoops vectorizes no loop holding an alloc). Where the loop between writes what
// the value reads, or t is read before it is stored, or read in a loop inside, t stays.
TEST(FuseLoops, OneElementBuffersForwardTheirValue) {
  Buffer x = F32("x", {I(9)}), out = F32("out", {I(9)}), t = Local("t", {I(9)});
  auto pair = [&](const std::function<Stmt(const Var&)>& second) {
    Var i = MakeVar("i"), i2 = MakeVar("i2");
    return MakePrimFunc({x, out}, {},
                        Seq({Alloc(t), Loop(i, I(9), Store(t, {i}, Mul(Load(x, {i}), FloatImm(3)))),
                             Loop(i2, I(9), second(i2)), Free(t)}));
  };
  auto swish = [&](const Var& i) {
    Expr v = Load(t, {i});
    return Store(
        out, {i},
        Mul(v, Div(FloatImm(1), Add(FloatImm(1), Call(Intrinsic::kExp, {Mul(v, FloatImm(-1))})))));
  };
  PrimFunc f = pair(swish);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(for i in [0, 9) {
  out[i] = x[i] * 3.0f * (1.0f / (1.0f + exp(x[i] * 3.0f * -1.0f)))
}
)");
  ExpectSameResults(f, g);

  // What the value reads (u) written between the store of t and its read: t keeps the old u.
  Buffer u = Local("u", {I(9)});
  Var i5 = MakeVar("i5"), i6 = MakeVar("i6"), i7 = MakeVar("i7");
  PrimFunc clobber = MakePrimFunc(
      {x, out}, {},
      Seq({Alloc(u), Alloc(t), Loop(i5, I(9), Store(u, {i5}, Load(x, {i5}))),
           Loop(i6, I(9), Store(t, {i6}, Mul(Load(u, {i6}), FloatImm(3)))),
           Loop(i7, I(9), Seq({Store(u, {i7}, FloatImm(0)), Store(out, {i7}, Load(t, {i7}))})),
           Free(t), Free(u)}));
  PrimFunc kept = Fused(clobber);
  EXPECT_NE(Print(kept->body).find("alloc t: f32[1] local"), std::string::npos)
      << Print(kept->body);
  ExpectSameResults(clobber, kept);

  // The value reads an accumulator freed before t is read (its storage may hold another
  // buffer by then): t stays.
  Buffer acc = Local("acc", {I(1)});
  Var i8 = MakeVar("i8"), i9 = MakeVar("i9");
  PrimFunc freed =
      MakePrimFunc({x, out}, {},
                   Seq({Alloc(t),
                        Loop(i8, I(9),
                             Seq({Alloc(acc), Store(acc, {I(0)}, Mul(Load(x, {i8}), FloatImm(2))),
                                  Store(t, {i8}, Add(Load(acc, {I(0)}), FloatImm(1))), Free(acc)})),
                        Loop(i9, I(9), Store(out, {i9}, Load(t, {i9}))), Free(t)}));
  PrimFunc freed_fused = Fused(freed);
  EXPECT_NE(Print(freed_fused->body).find("alloc t: f32[1] local"), std::string::npos)
      << Print(freed_fused->body);
  ExpectSameResults(freed, freed_fused);

  // A chain of values each read twice by the next (a lowering's shared subexpressions):
  // copied only while small, so the kernel stays linear in the chain's length.
  {
    constexpr int kChain = 14;
    std::vector<Buffer> ts;
    std::vector<Stmt> nest;
    for (int k = 0; k < kChain; ++k) {
      std::string name = "c";  // not "c" + ...: GCC 12's -Wrestrict misfires on it
      name += std::to_string(k);
      ts.push_back(Local(name, {I(9)}));
    }
    for (const Buffer& c : ts) nest.push_back(Alloc(c));
    for (int k = 0; k < kChain; ++k) {
      Var v = MakeVar("v");
      Expr prev = k ? Load(ts[k - 1], {v}) : Load(x, {v});
      nest.push_back(Loop(v, I(9), Store(ts[k], {v}, Add(prev, Mul(prev, FloatImm(0.5))))));
    }
    Var v = MakeVar("v");
    nest.push_back(Loop(v, I(9), Store(out, {v}, Load(ts.back(), {v}))));
    for (const Buffer& c : ts) nest.push_back(Free(c));
    PrimFunc chain = MakePrimFunc({x, out}, {}, Seq(nest));
    PrimFunc chain_fused = Fused(chain);
    EXPECT_LT(Print(chain_fused->body).size(), 20000u);
    ExpectSameResults(chain, chain_fused);
  }

  // An f16 value is computed in f32 and rounded where it is stored: t16 stays.
  Buffer x16 = MakeBuffer("x16", DType::kFloat16, {I(9)}),
         out16 = MakeBuffer("out16", DType::kFloat16, {I(9)});
  Buffer t16 = MakeBuffer("t16", DType::kFloat16, {I(9)}, BufferNode::Scope::kLocal);
  Var i10 = MakeVar("i10"), i11 = MakeVar("i11");
  PrimFunc half = MakePrimFunc(
      {x16, out16}, {},
      Seq({Alloc(t16), Loop(i10, I(9), Store(t16, {i10}, Mul(Load(x16, {i10}), Load(x16, {i10})))),
           Loop(i11, I(9), Store(out16, {i11}, Add(Load(t16, {i11}), Load(t16, {i11})))),
           Free(t16)}));
  EXPECT_NE(Print(Fused(half)->body).find("alloc t16: f16[1] local"), std::string::npos)
      << Print(Fused(half)->body);

  // Read in a loop inside the body: the value would be computed once per inner iteration.
  Var k4 = MakeVar("k4");
  PrimFunc nested = pair([&](const Var& i) {
    return Loop(k4, I(4), Store(out, {i}, Add(Load(out, {i}), Load(t, {i}))));
  });
  PrimFunc nested_fused = Fused(nested);
  EXPECT_NE(Print(nested_fused->body).find("alloc t: f32[1] local"), std::string::npos)
      << Print(nested_fused->body);
  ExpectSameResults(nested, nested_fused);
}

// Each of these would change what the second loop reads, or cannot be one loop.
TEST(FuseLoops, LoopsThatMustStayApart) {
  Buffer out = F32("out", {I(6), I(6)});
  auto two_loops = [out](std::function<Stmt(const Var&, const Buffer&)> second,
                         Expr second_extent = I(6), ForKind first_kind = ForKind::kSerial) {
    Var i = MakeVar("i"), k = MakeVar("k"), i2 = MakeVar("i2");
    Buffer x = F32("x", {I(6), I(6)});
    Buffer t = Local("t", {I(6), I(6)});
    Stmt body = Seq({
        Alloc(t),
        For(i, I(0), I(6), first_kind, Loop(k, I(6), Store(t, {i, k}, Load(x, {i, k})))),
        For(i2, I(0), second_extent, ForKind::kSerial, second(i2, t)),
        Free(t),
    });
    return MakePrimFunc({x, out}, {}, body);
  };
  struct Case {
    const char* why;
    PrimFunc f;
  };
  std::vector<Case> cases = {
      {"reads the next row", two_loops([&](const Var& i2, const Buffer& t) {
         Var k = MakeVar("k2");
         return Loop(k, I(5), Store(out, {i2, k}, Load(t, {Min(Add(i2, I(1)), I(5)), k})));
       })},
      {"reads a column (another dimension is the row)",
       two_loops([&](const Var& i2, const Buffer& t) {
         Var k = MakeVar("k2");
         return Loop(k, I(6), Store(out, {i2, k}, Load(t, {k, i2})));
       })},
      {"another extent", two_loops(
                             [&](const Var& i2, const Buffer& t) {
                               Var k = MakeVar("k2");
                               return Loop(k, I(6), Store(out, {i2, k}, Load(t, {i2, k})));
                             },
                             I(5))},
      {"a parallel first loop", two_loops(
                                    [&](const Var& i2, const Buffer& t) {
                                      Var k = MakeVar("k2");
                                      return Loop(k, I(6), Store(out, {i2, k}, Load(t, {i2, k})));
                                    },
                                    I(6), ForKind::kParallel)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    PrimFunc g = Fused(c.f);
    EXPECT_EQ(Print(g->body), Print(c.f->body));
  }
}

// Two sums over one row (a layer norm's S1 and S2), each a loop with its accumulator's set-up
// before it and its result after: the statements between the loops move out of the way (the
// first sum's result below the fused loop, the second's set-up above it) and the sums share one
// pass. A loop that stores along its variable (an elementwise row) keeps its own loop, and a
// statement that the second loop reads but that needs the first's result holds both in place.
PrimFunc TwoSums(bool second_reads_first) {
  Var k = MakeVar("k"), k2 = MakeVar("k2");
  Buffer x = F32("x", {I(9)}), out = F32("out", {I(2)});
  Buffer s1 = Local("s1", {I(1)}), s2 = Local("s2", {I(1)});
  Expr second = second_reads_first ? Mul(Load(x, {k2}), Load(out, {I(0)})) : Load(x, {k2});
  Stmt body = Seq({
      Alloc(s1),
      Store(s1, {I(0)}, FloatImm(0)),
      Loop(k, I(9), Store(s1, {I(0)}, Add(Load(s1, {I(0)}), Load(x, {k})))),
      Store(out, {I(0)}, Load(s1, {I(0)})),
      Free(s1),
      Alloc(s2),
      Store(s2, {I(0)}, FloatImm(0)),
      Loop(k2, I(9), Store(s2, {I(0)}, Add(Load(s2, {I(0)}), Mul(second, Load(x, {k2}))))),
      Store(out, {I(1)}, Load(s2, {I(0)})),
      Free(s2),
  });
  return MakePrimFunc({x, out}, {}, body);
}

TEST(FuseLoops, SumsOverOneRowShareAPass) {
  PrimFunc f = TwoSums(false);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(alloc s1: f32[1] local
s1[0] = 0.0f
alloc s2: f32[1] local
s2[0] = 0.0f
for k in [0, 9) {
  s1[0] = s1[0] + x[k]
  s2[0] = s2[0] + x[k] * x[k]
}
out[0] = s1[0]
free s1
out[1] = s2[0]
free s2
)");
  ExpectSameResults(f, g);

  // The second sum reads out[0], which is written from the first sum between them.
  PrimFunc dependent = TwoSums(true);
  EXPECT_EQ(Print(Fused(dependent)->body), Print(dependent->body));

  // A row stored along the loop, then a sum of it: the two stay apart.
  Var k = MakeVar("k"), k2 = MakeVar("k2");
  Buffer x = F32("x", {I(9)}), t = Local("t", {I(9)}), out = F32("out", {I(1)});
  Buffer s = Local("s", {I(1)});
  Stmt body = Seq({
      Alloc(t),
      Loop(k, I(9), Store(t, {k}, Mul(Load(x, {k}), FloatImm(2)))),
      Alloc(s),
      Store(s, {I(0)}, FloatImm(0)),
      Loop(k2, I(9), Store(s, {I(0)}, Add(Load(s, {I(0)}), Load(t, {k2})))),
      Store(out, {I(0)}, Load(s, {I(0)})),
      Free(s),
      Free(t),
  });
  PrimFunc row = MakePrimFunc({x, out}, {}, body);
  EXPECT_EQ(Print(Fused(row)->body), Print(row->body));
}

// A buffer that a later statement reads keeps its rows, though the loops fuse.
TEST(FuseLoops, ABufferUsedLaterKeepsItsRows) {
  Var i = MakeVar("i"), i2 = MakeVar("i2"), j = MakeVar("j");
  Buffer x = F32("x", {I(4)}), out = F32("out", {I(4)}), total = F32("total", {I(1)});
  Buffer t = Local("t", {I(4)});
  Stmt body = Seq({
      Alloc(t),
      Loop(i, I(4), Store(t, {i}, Mul(Load(x, {i}), FloatImm(3)))),
      Loop(i2, I(4), Store(out, {i2}, Add(Load(t, {i2}), FloatImm(1)))),
      Store(total, {I(0)}, FloatImm(0)),
      Loop(j, I(4), Store(total, {I(0)}, Add(Load(total, {I(0)}), Load(t, {j})))),
      Free(t),
  });
  PrimFunc f = MakePrimFunc({x, out, total}, {}, body, "f", 1);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(alloc t: f32[4] local
for i in [0, 4) {
  t[i] = x[i] * 3.0f
  out[i] = t[i] + 1.0f
}
total[0] = 0.0f
for j in [0, 4) {
  total[0] = total[0] + t[j]
}
free t
)");
  ExpectSameResults(f, g);
}

// The im2col shape: a per-image buffer written with one index per dimension, then read by a
// tiled GEMM through one flat index (`cols[n * 12 + kb * 4 + k]`, rows of 3 x 4 elements): the
// flat reads keep to row n, so the loops fuse and cols shrinks to one image.
PrimFunc FlatReads(int64_t read_shift) {
  Var n = MakeVar("n"), kk = MakeVar("kk"), j = MakeVar("j"), n2 = MakeVar("n2"),
      kb = MakeVar("kb"), k = MakeVar("k");
  Buffer x = F32("x", {I(5), I(3), I(4)}), out = F32("out", {I(5), I(1)});
  Buffer cols = MakeBuffer("cols", DType::kFloat32, {I(5), I(3), I(4)}, BufferNode::Scope::kLocal,
                           {I(12), I(4), I(1)});
  Stmt body = Seq({
      Alloc(cols),
      Loop(n, I(5),
           Loop(kk, I(3),
                Loop(j, I(4), Store(cols, {n, kk, j}, Mul(Load(x, {n, kk, j}), FloatImm(2)))))),
      Loop(n2, I(5),
           Seq({Store(out, {n2, I(0)}, FloatImm(0)),
                Loop(kb, I(3),
                     For(k, Mul(kb, I(4)), I(4), ForKind::kSerial,
                         Store(out, {n2, I(0)},
                               Add(Load(out, {n2, I(0)}),
                                   Load(cols, {Add(Mul(n2, I(12)),
                                                   Min(Add(k, I(read_shift)), I(11)))})))))})),
      Free(cols),
  });
  return MakePrimFunc({x, out}, {}, body);
}

TEST(FuseLoops, FlatReadsOfOneRowFuseAndShrink) {
  PrimFunc f = FlatReads(0);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), R"(for n in [0, 5) {
  alloc cols: f32[1, 3, 4] strides [12, 4, 1] local
  for kk in [0, 3) {
    for j in [0, 4) {
      cols[0, kk, j] = x[n, kk, j] * 2.0f
    }
  }
  out[n, 0] = 0.0f
  for kb in [0, 3) {
    for k in [kb * 4, kb * 4 + 4) {
      out[n, 0] = out[n, 0] + cols[min(k, 11)]
    }
  }
  free cols
}
)");
  ExpectSameResults(f, g);
}

// Read at k - 1, the first read of row n is the last element of row n - 1 (the interval of
// min(k - 1, 11) is [-1, 10]): the loops stay apart. At k + 1 the min keeps the reads in
// [1, 11], inside row n, so those fuse (5 loops where there were 6).
TEST(FuseLoops, FlatReadsOutsideTheirRowStayApart) {
  PrimFunc f = FlatReads(-1);
  PrimFunc g = Fused(f);
  EXPECT_EQ(Print(g->body), Print(f->body));
  PrimFunc shifted = FlatReads(1);
  PrimFunc clamped = Fused(shifted);
  EXPECT_EQ(CountLoops(shifted->body), 6);
  EXPECT_EQ(CountLoops(clamped->body), 5);
  ExpectSameResults(shifted, clamped);
}

}  // namespace
}  // namespace kiln::loop
