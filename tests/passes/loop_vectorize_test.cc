// VectorizeLoops: golden text for each path (explicit ramps with a tail, the kVectorized
// fallback, loops left alone), and the kernels compiled before and after agreeing bit for bit
// on random data, with extents that are not multiples of the width and extent 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/loop_test_util.h"
#include "common/test_util.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::Var;
using test::BodyText;
using test::ErrorMessage;
using ::testing::HasSubstr;

Expr I(int64_t v) {
  return loop::IntImm(v);
}
Expr F(double v) {
  return loop::FloatImm(v);
}
Buffer Buf(const std::string& name, std::vector<Expr> shape, DType t = DType::kFloat32) {
  return loop::MakeBuffer(name, t, std::move(shape));
}
Stmt Loop(const Var& v, const Expr& extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return loop::For(v, I(0), extent, kind, std::move(body));
}

// (A named constant rather than a literal: GCC 12 warns falsely about assigning a literal to a
// std::string in an inlined function.)
const std::string kName = "k";

loop::PrimFunc Func(std::vector<Buffer> buffers, int num_inputs, std::vector<Var> scalars,
                    Stmt body) {
  loop::PrimFunc f = test::MakePrimFunc(std::move(buffers), std::move(scalars), std::move(body),
                                        kName, num_inputs);
  loop::Verify(f);
  return f;
}

// Runs VectorizeLoops through the pass manager; the result must verify.
loop::PrimFunc Vectorize(const loop::PrimFunc& f, int64_t width = 8) {
  return test::RunLoopPass("VectorizeLoops", f, {{"vectorize.width", width}});
}

// Seeds and value range fixed per file: the cases were written against this data.
void ExpectSameResults(const loop::PrimFunc& before, const loop::PrimFunc& after,
                       const std::vector<std::vector<int64_t>>& scalar_sets = {{}}) {
  test::ExpectSameResults(before, after, {17, -4, 4}, scalar_sets);
}

// ---- the explicit path ----

TEST(VectorizeLoops, SymbolicExtentGetsVectorLoopAndTail) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {n}), b = Buf("b", {I(1)}), out = Buf("out", {n});
  auto f = Func(
      {a, b, out}, 2, {n},
      Loop(i, n,
           loop::Store(out, {i},
                       loop::Max(loop::Add(loop::Load(a, {i}), loop::Load(b, {I(0)})), F(0)))));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, n // 8) {
  out[ramp(i_vec * 8, 1, 8)] = max(a[ramp(i_vec * 8, 1, 8)] + broadcast(b[0], 8), broadcast(0.0f, 8))
}
for i in [n // 8 * 8, n // 8 * 8 + n % 8) {
  out[i] = max(a[i] + b[0], 0.0f)
}
)");
  ExpectSameResults(f, g, {{1}, {7}, {8}, {9}, {16}, {1001}});
}

// An extent that may be negative (a difference) is clamped at 0 before the split: a loop of
// extent -3 runs no iterations, where floor division alone would leave a tail of 5 iterations
// that write before the buffer (found through conv's phase-split fill loops).
TEST(VectorizeLoops, NegativeExtentRunsNoIterations) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {I(16)}), out = Buf("out", {I(16)});
  auto f = Func({a, out}, 1, {n},
                loop::For(i, I(8), loop::Sub(n, I(8)), ForKind::kSerial,
                          loop::Store(out, {i}, loop::Add(loop::Load(a, {i}), F(1)))));
  auto g = Vectorize(f);
  EXPECT_THAT(BodyText(g), HasSubstr("max(n - 8, 0) // 8"));
  ExpectSameResults(f, g, {{0}, {5}, {8}, {9}, {16}});
}

TEST(VectorizeLoops, ConstantExtentSplitsIntoMainAndTail) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer a = Buf("a", {I(3), I(21)}), c = Buf("c", {I(21)}), out = Buf("out", {I(3), I(21)});
  auto f = Func({a, c, out}, 2, {},
                Loop(i, I(3),
                     Loop(j, I(21),
                          loop::Store(out, {i, j},
                                      loop::Add(loop::Mul(loop::Load(a, {i, j}), F(2)),
                                                loop::Load(c, {j}))))));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i in [0, 3) {
  for j_vec in [0, 2) {
    out[i, ramp(j_vec * 8, 1, 8)] = a[i, ramp(j_vec * 8, 1, 8)] * broadcast(2.0f, 8) + c[ramp(j_vec * 8, 1, 8)]
  }
  out[i, ramp(13, 1, 8)] = a[i, ramp(13, 1, 8)] * broadcast(2.0f, 8) + c[ramp(13, 1, 8)]
}
)");
  ExpectSameResults(f, g);
}

// A constant tail fills the widest vector that fits, then the next: 23 = 2 x 8 + 4 + 2 + 1,
// where the body reads what it stores (an accumulation), so no lane may run twice.
TEST(VectorizeLoops, ConstantTailsFillNarrowerVectors) {
  Var i = loop::MakeVar("i");
  Buffer a = Buf("a", {I(23)}), out = Buf("out", {I(23)});
  auto f = Func(
      {a, out}, 1, {},
      Loop(i, I(23), loop::Store(out, {i}, loop::Add(loop::Load(out, {i}), loop::Load(a, {i})))));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, 2) {
  out[ramp(i_vec * 8, 1, 8)] = out[ramp(i_vec * 8, 1, 8)] + a[ramp(i_vec * 8, 1, 8)]
}
out[ramp(16, 1, 4)] = out[ramp(16, 1, 4)] + a[ramp(16, 1, 4)]
out[ramp(20, 1, 2)] = out[ramp(20, 1, 2)] + a[ramp(20, 1, 2)]
out[22] = out[22] + a[22]
)");
  ExpectSameResults(f, g);
}

// A body that reads nothing it stores may run a lane twice: a tail that narrower vectors would
// take in pieces is one whole vector ending at the loop's end (23 = 2 x 8 + one vector at 15,
// its first lane computed again). A tail of one piece (a power of two: 20 = 2 x 8 + 4) keeps
// its narrower vector, and an extent below the width (5 = 4 + 1) has no whole vector to repeat.
TEST(VectorizeLoops, IdempotentTailIsOneOverlappingVector) {
  Var i = loop::MakeVar("i");
  auto func = [&](int64_t n) {
    Buffer a = Buf("a", {I(n)}), out = Buf("out", {I(n)});
    return Func({a, out}, 1, {},
                Loop(i, I(n), loop::Store(out, {i}, loop::Add(loop::Load(a, {i}), F(1)))));
  };
  auto f23 = func(23), g23 = Vectorize(f23);
  EXPECT_EQ(BodyText(g23), R"(for i_vec in [0, 2) {
  out[ramp(i_vec * 8, 1, 8)] = a[ramp(i_vec * 8, 1, 8)] + broadcast(1.0f, 8)
}
out[ramp(15, 1, 8)] = a[ramp(15, 1, 8)] + broadcast(1.0f, 8)
)");
  ExpectSameResults(f23, g23);
  auto f20 = func(20), g20 = Vectorize(f20);
  EXPECT_THAT(BodyText(g20), HasSubstr("out[ramp(16, 1, 4)] = a[ramp(16, 1, 4)]"));
  ExpectSameResults(f20, g20);
  auto f5 = func(5), g5 = Vectorize(f5);
  EXPECT_EQ(BodyText(g5), R"(out[ramp(0, 1, 4)] = a[ramp(0, 1, 4)] + broadcast(1.0f, 4)
out[4] = a[4] + 1.0f
)");
  ExpectSameResults(f5, g5);
  for (int64_t n : {9, 15, 31, 1001}) {
    auto f = func(n), g = Vectorize(f);
    ExpectSameResults(f, g);
  }
}

// One vector iteration is emitted without a loop; a one-iteration tail too.
TEST(VectorizeLoops, ExactAndShortExtentsMakeNoTripCountOneLoops) {
  Var i = loop::MakeVar("i");
  Buffer a = Buf("a", {I(8)}), out = Buf("out", {I(8)});
  auto f =
      Func({a, out}, 1, {},
           Loop(i, I(8), loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::Load(a, {i})))));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), "out[ramp(0, 1, 8)] = a[ramp(0, 1, 8)] * a[ramp(0, 1, 8)]\n");
  ExpectSameResults(f, g);

  // 5 < 8 elements: four lanes, then the last element on its own.
  Buffer a5 = Buf("a", {I(5)}), out5 = Buf("out", {I(5)});
  auto f5 = Func({a5, out5}, 1, {},
                 Loop(i, I(5), loop::Store(out5, {i}, loop::Sub(loop::Load(a5, {i}), F(1)))));
  auto g5 = Vectorize(f5);
  EXPECT_EQ(BodyText(g5), R"(out[ramp(0, 1, 4)] = a[ramp(0, 1, 4)] - broadcast(1.0f, 4)
out[4] = a[4] - 1.0f
)");
  ExpectSameResults(f5, g5);
}

// A loop that does not start at 0: the ramps start at its start, the tail after the vectors.
TEST(VectorizeLoops, NonZeroStart) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {n}), out = Buf("out", {n});
  auto f = Func({a, out}, 1, {n},
                loop::For(i, I(3), loop::Sub(n, I(3)), ForKind::kSerial,
                          loop::Store(out, {i}, loop::Load(a, {loop::Sub(i, I(3))}))));
  auto g = Vectorize(f);
  // n - 3 may be negative: the split clamps it (NegativeExtentRunsNoIterations).
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, max(n - 3, 0) // 8) {
  out[ramp(3 + i_vec * 8, 1, 8)] = a[ramp(3 + i_vec * 8 - 3, 1, 8)]
}
for i in [3 + max(n - 3, 0) // 8 * 8, 3 + max(n - 3, 0) // 8 * 8 + max(n - 3, 0) % 8) {
  out[i] = a[i - 3]
}
)");
  ExpectSameResults(f, g, {{3}, {4}, {11}, {12}, {100}});
}

// The loop variable used as a value (cast to float), index arithmetic folded into the ramp, a
// select with a vector condition, and an intrinsic call.
TEST(VectorizeLoops, LoopVariableAsValueSelectAndCalls) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {loop::Add(n, I(2))}), out = Buf("out", {n});
  Expr x = loop::Load(a, {loop::Add(i, I(2))});
  Expr value =
      loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, x, F(0)),
                   loop::Call(loop::Intrinsic::kSqrt, {x}), loop::Cast(DType::kFloat32, i));
  auto f = Func({a, out}, 1, {n}, Loop(i, n, loop::Store(out, {i}, value)));
  auto g = Vectorize(f, 4);
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, n // 4) {
  out[ramp(i_vec * 4, 1, 4)] = select(a[ramp(i_vec * 4 + 2, 1, 4)] > broadcast(0.0f, 4), sqrt(a[ramp(i_vec * 4 + 2, 1, 4)]), f32(ramp(i_vec * 4, 1, 4)))
}
for i in [n // 4 * 4, n // 4 * 4 + n % 4) {
  out[i] = select(a[i + 2] > 0.0f, sqrt(a[i + 2]), f32(i))
}
)");
  ExpectSameResults(f, g, {{1}, {3}, {4}, {37}});
}

// A parallel loop hands out vector iterations; its tail runs serially after it.
TEST(VectorizeLoops, ParallelLoopKeepsItsKind) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {n}, DType::kInt32), out = Buf("out", {n}, DType::kInt32);
  Expr three = loop::IntImm(3, DType::kInt32);
  auto f = Func(
      {a, out}, 1, {n},
      Loop(i, n, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), three)), ForKind::kParallel));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, n // 8) parallel {
  out[ramp(i_vec * 8, 1, 8)] = a[ramp(i_vec * 8, 1, 8)] * broadcast(3i32, 8)
}
for i in [n // 8 * 8, n // 8 * 8 + n % 8) {
  out[i] = a[i] * 3i32
}
)");
  ExpectSameResults(f, g, {{1}, {15}, {100000}});
}

// A let of a value that does not depend on the loop stays scalar inside the vector body; f64
// data takes the same path.
TEST(VectorizeLoops, InvariantLetStaysScalar) {
  Var i = loop::MakeVar("i"), s = loop::MakeVar("s", DType::kFloat64);
  Buffer a = Buf("a", {I(12)}, DType::kFloat64), b = Buf("b", {I(1)}, DType::kFloat64),
         out = Buf("out", {I(12)}, DType::kFloat64);
  Stmt body = loop::LetStmt(s, loop::Mul(loop::Load(b, {I(0)}), loop::FloatImm(2, DType::kFloat64)),
                            loop::Store(out, {i}, loop::Add(loop::Load(a, {i}), s)));
  auto f = Func({a, b, out}, 2, {}, Loop(i, I(12), body));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(let s = b[0] * 2.0f64 {
  out[ramp(0, 1, 8)] = a[ramp(0, 1, 8)] + broadcast(s, 8)
}
let s = b[0] * 2.0f64;
out[ramp(8, 1, 4)] = a[ramp(8, 1, 4)] + broadcast(s, 4)
)");
  ExpectSameResults(f, g);
}

// Types with their own memory forms (f16 lives as i16, bool as i8) and a cast between lanes.
TEST(VectorizeLoops, HalfAndBoolLanes) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer h = Buf("h", {n}, DType::kFloat16), flags = Buf("flags", {n}, DType::kBool),
         out = Buf("out", {n}, DType::kFloat16);
  Expr x = loop::Cast(DType::kFloat32, loop::Load(h, {i}));
  Expr value = loop::Select(loop::Load(flags, {i}),
                            loop::Cast(DType::kFloat16, loop::Mul(x, F(0.5))), loop::Load(h, {i}));
  auto f = Func({h, flags, out}, 2, {n}, Loop(i, n, loop::Store(out, {i}, value)));
  auto g = Vectorize(f);
  EXPECT_THAT(
      BodyText(g),
      HasSubstr(
          "out[ramp(i_vec * 8, 1, 8)] = select(flags[ramp(i_vec * 8, 1, 8)], "
          "f16(f32(h[ramp(i_vec * 8, 1, 8)]) * broadcast(0.5f, 8)), h[ramp(i_vec * 8, 1, 8)])"));
  ExpectSameResults(f, g, {{1}, {9}, {64}});

  Buffer positive = Buf("positive", {n}, DType::kBool);
  auto cmp =
      Func({h, positive}, 1, {n},
           Loop(i, n, loop::Store(positive, {i}, loop::MakeBinary(loop::BinaryOp::kGT, x, F(0)))));
  auto gc = Vectorize(cmp);
  EXPECT_THAT(
      BodyText(gc),
      HasSubstr(
          "positive[ramp(i_vec * 8, 1, 8)] = f32(h[ramp(i_vec * 8, 1, 8)]) > broadcast(0.0f, 8)"));
  ExpectSameResults(cmp, gc, {{3}, {17}});
}

// Loads 2 to 4 elements apart stay on the explicit path (the code generator loads the span and
// picks the lanes); the last lane of each reads its buffer's last element, so a load past the
// span would read out of bounds. A store with a stride, or a load 5 apart, falls back.
TEST(VectorizeLoops, StridedLoadsTakeTheExplicitPath) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {loop::Mul(n, I(2))}), c = Buf("c", {loop::Mul(n, I(3))}),
         d = Buf("d", {loop::Mul(n, I(4))}), out = Buf("out", {n});
  Expr i2 = loop::Mul(i, I(2));
  Expr value = loop::Add(loop::Mul(loop::Load(a, {i2}), loop::Load(a, {loop::Add(i2, I(1))})),
                         loop::Add(loop::Load(c, {loop::Add(loop::Mul(i, I(3)), I(2))}),
                                   loop::Load(d, {loop::Add(loop::Mul(i, I(4)), I(3))})));
  auto f = Func({a, c, d, out}, 3, {n}, Loop(i, n, loop::Store(out, {i}, value)));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i_vec in [0, n // 8) {
  out[ramp(i_vec * 8, 1, 8)] = a[ramp(i_vec * 8 * 2, 2, 8)] * a[ramp(i_vec * 8 * 2 + 1, 2, 8)] + (c[ramp(i_vec * 8 * 3 + 2, 3, 8)] + d[ramp(i_vec * 8 * 4 + 3, 4, 8)])
}
for i in [n // 8 * 8, n // 8 * 8 + n % 8) {
  out[i] = a[i * 2] * a[i * 2 + 1] + (c[i * 3 + 2] + d[i * 4 + 3])
}
)");
  ExpectSameResults(f, g, {{1}, {8}, {16}, {19}});

  Buffer e = Buf("e", {loop::Mul(n, I(5))}), wide = Buf("wide", {loop::Mul(n, I(2))});
  auto five = Func({e, out}, 1, {n},
                   Loop(i, n, loop::Store(out, {i}, loop::Load(e, {loop::Mul(i, I(5))}))));
  EXPECT_THAT(BodyText(Vectorize(five)), HasSubstr("vectorized"));
  auto scatter = Func({a, wide}, 1, {n}, Loop(i, n, loop::Store(wide, {i2}, loop::Load(a, {i}))));
  EXPECT_THAT(BodyText(Vectorize(scatter)), HasSubstr("vectorized"));
}

// A row-split read (CollapseLoops): x[(p // 16) * 18 + p % 16] is contiguous over 8 lanes that
// start at a multiple of 8, so p // 16 stays scalar and p % 16 becomes a ramp. Starting at 4,
// or with rows of 12, lanes could straddle two rows: the fallback.
TEST(VectorizeLoops, RowSplitReadsTakeTheExplicitPath) {
  Var p = loop::MakeVar("p");
  for (int64_t row : {16, 12}) {
    for (int64_t start : {0, 4}) {
      Buffer x = Buf("x", {I(4 * (row + 2))}), out = Buf("out", {I(4 * row)});
      Expr at =
          loop::Add(loop::Mul(loop::FloorDiv(p, I(row)), I(row + 2)), loop::FloorMod(p, I(row)));
      auto f = Func({x, out}, 1, {},
                    loop::For(p, I(start), I(4 * row - start), ForKind::kSerial,
                              loop::Store(out, {p}, loop::Load(x, {at}))));
      auto g = Vectorize(f);
      if (row == 16 && start == 0) {
        EXPECT_EQ(BodyText(g), R"(for p_vec in [0, 8) {
  out[ramp(p_vec * 8, 1, 8)] = x[ramp(p_vec * 8 // 16 * 18 + p_vec * 8 % 16, 1, 8)]
}
)");
      } else {
        EXPECT_THAT(BodyText(g), HasSubstr("vectorized")) << row << " " << start;
      }
      ExpectSameResults(f, g);
    }
  }
}

// ---- the kVectorized fallback ----

// A transposed read is not contiguous along the loop: LLVM decides how to vectorize it.
TEST(VectorizeLoops, StridedAccessFallsBackToVectorizedKind) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer a = Buf("a", {I(19), I(6)}), out = Buf("out", {I(6), I(19)});
  auto f = Func({a, out}, 1, {},
                Loop(i, I(6), Loop(j, I(19), loop::Store(out, {i, j}, loop::Load(a, {j, i})))));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i in [0, 6) {
  for j in [0, 19) vectorized {
    out[i, j] = a[j, i]
  }
}
)");
  ExpectSameResults(f, g);
}

TEST(VectorizeLoops, IfAndVariantLetFallBack) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), t = loop::MakeVar("t");
  Buffer a = Buf("a", {n}), out = Buf("out", {n});
  Stmt with_if =
      loop::IfThenElse(loop::MakeBinary(loop::BinaryOp::kLT, i, I(5)),
                       loop::Store(out, {i}, loop::Load(a, {i})), loop::Store(out, {i}, F(1)));
  auto f = Func({a, out}, 1, {n}, Loop(i, n, with_if));
  auto g = Vectorize(f);
  EXPECT_EQ(BodyText(g), R"(for i in [0, n) vectorized {
  if (i < 5) {
    out[i] = a[i]
  } else {
    out[i] = 1.0f
  }
}
)");
  ExpectSameResults(f, g, {{1}, {13}});

  Stmt with_let = loop::LetStmt(t, i, loop::Store(out, {i}, loop::Load(a, {t})));
  auto f2 = Func({a, out}, 1, {n}, Loop(i, n, with_let));
  EXPECT_EQ(BodyText(Vectorize(f2)), R"(for i in [0, n) vectorized {
  let t = i;
  out[i] = a[t]
}
)");
}

// ---- loops left alone ----

TEST(VectorizeLoops, DependentIterationsAreLeftAlone) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Buffer x = Buf("x", {n, I(16)}), out = Buf("out", {n});
  Buffer acc = loop::MakeBuffer("acc", DType::kFloat32, {I(1)}, loop::BufferNode::Scope::kLocal);
  // A reduction: every iteration of k updates acc[0].
  Stmt reduce = loop::Seq(
      {loop::Alloc(acc), loop::Store(acc, {I(0)}, F(0)),
       Loop(k, I(16),
            loop::Store(acc, {I(0)}, loop::Add(loop::Load(acc, {I(0)}), loop::Load(x, {i, k})))),
       loop::Store(out, {i}, loop::Load(acc, {I(0)})), loop::Free(acc)});
  auto f = Func({x, out}, 1, {n}, Loop(i, n, reduce));
  EXPECT_EQ(loop::Print(Vectorize(f)), loop::Print(f));

  // A stencil that reads what the next iteration writes.
  Buffer t = Buf("t", {loop::Add(n, I(1))});
  auto g =
      Func({t}, 0, {n},
           Loop(i, n, loop::Store(t, {i}, loop::Add(loop::Load(t, {loop::Add(i, I(1))}), F(1)))));
  EXPECT_EQ(loop::Print(Vectorize(g)), loop::Print(g));

  // Extent 1 and vector code already there.
  Buffer o = Buf("o", {I(8)});
  auto h = Func(
      {o}, 0, {},
      loop::Seq({Loop(i, I(1), loop::Store(o, {i}, F(1))),
                 Loop(k, I(1), loop::Store(o, {loop::Ramp(k, 1, 8)}, loop::Broadcast(F(2), 8)))}));
  EXPECT_EQ(loop::Print(Vectorize(h)), loop::Print(h));
}

// Stores of one buffer at several index lists are independent across iterations when some dim
// separates them: one index `i + r` there for all, up to constant offsets at least the extent
// apart (a Winograd transform's 36 values per tile, flattened by CollapseLoops). Offsets closer
// than that would let two iterations write one element, and the loop is left alone.
TEST(VectorizeLoops, StoresSeparatedByARowOrAnOffsetAreIndependent) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(10)}), rows = Buf("rows", {I(3), I(10)}), flat = Buf("flat", {I(40)});
  Expr ai = loop::Load(a, {i});
  auto f = Func(
      {a, rows}, 1, {},
      Loop(i, I(10),
           loop::Seq({loop::Store(rows, {I(0), i}, ai),
                      loop::Store(rows, {I(1), i}, loop::Mul(ai, F(2))),
                      loop::Store(rows, {I(2), i}, loop::Add(loop::Load(rows, {I(0), i}), ai))})));
  auto g = Vectorize(f);
  EXPECT_THAT(BodyText(g),
              HasSubstr("rows[2, ramp(0, 1, 8)] = rows[0, ramp(0, 1, 8)] + a[ramp(0, 1, 8)]"));
  ExpectSameResults(f, g);

  Expr aj = loop::Load(a, {j});
  auto h = Func({a, flat}, 1, {},
                Loop(j, I(10),
                     loop::Seq({loop::Store(flat, {j}, aj),
                                loop::Store(flat, {loop::Add(j, I(10))}, loop::Mul(aj, F(2))),
                                loop::Store(flat, {loop::Add(I(30), j)},
                                            loop::Add(loop::Load(flat, {j}), aj))})));
  auto hv = Vectorize(h);
  EXPECT_THAT(BodyText(hv),
              HasSubstr("flat[ramp(10, 1, 8)] = a[ramp(0, 1, 8)] * broadcast(2.0f, 8)"));
  ExpectSameResults(h, hv);

  // Offsets 4 apart over 10 iterations: iteration 0's second store and iteration 4's first
  // write flat[4].
  Expr ak = loop::Load(a, {k});
  auto close = Func(
      {a, flat}, 1, {},
      Loop(k, I(10),
           loop::Seq({loop::Store(flat, {k}, ak), loop::Store(flat, {loop::Add(k, I(4))}, F(1))})));
  EXPECT_EQ(loop::Print(Vectorize(close)), loop::Print(close));
}

// ---- configuration ----

TEST(VectorizeLoops, WidthComesFromTheConfig) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", {n}), out = Buf("out", {n});
  auto f = Func({a, out}, 1, {n}, Loop(i, n, loop::Store(out, {i}, loop::Load(a, {i}))));
  EXPECT_THAT(loop::Print(Vectorize(f, 16)),
              HasSubstr("out[ramp(i_vec * 16, 1, 16)] = a[ramp(i_vec * 16, 1, 16)]"));
  EXPECT_EQ(loop::Print(Vectorize(f, 1)), loop::Print(f));
  EXPECT_EQ(loop::Print(Vectorize(f, 0)), loop::Print(f));
  EXPECT_THAT(ErrorMessage([&] { Vectorize(f, 65); }),
              HasSubstr("vectorize.width must be in [0, 64], got 65"));
}

TEST(VectorizeLoops, ConfigKeyIsRegistered) {
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("vectorize.width", int64_t{8}));
}

}  // namespace
}  // namespace kiln
