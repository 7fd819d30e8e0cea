// The loop analyses that passes share: value intervals of index expressions and of the loop
// variables of a nest.
#include "passes/loop/loop_analysis.h"

#include <gtest/gtest.h>

#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"

#include <functional>
#include <random>

namespace kiln::loop {
namespace {

Expr I(int64_t v) {
  return IntImm(v);
}

::testing::AssertionResult Is(const std::optional<Interval>& r, int64_t min, int64_t max) {
  if (!r) return ::testing::AssertionFailure() << "no interval";
  if (r->min != min || r->max != max)
    return ::testing::AssertionFailure() << "[" << r->min << ", " << r->max << "]";
  return ::testing::AssertionSuccess();
}

TEST(IntervalOf, Arithmetic) {
  Var a = MakeVar("a"), b = MakeVar("b");
  VarIntervals vars = {{a.get(), {-3, 5}}, {b.get(), {2, 4}}};
  EXPECT_TRUE(Is(IntervalOf(Add(a, b), vars), -1, 9));
  EXPECT_TRUE(Is(IntervalOf(Sub(a, b), vars), -7, 3));
  EXPECT_TRUE(Is(IntervalOf(Mul(a, b), vars), -12, 20));
  EXPECT_TRUE(Is(IntervalOf(Mul(a, I(-2)), vars), -10, 6));
  EXPECT_TRUE(Is(IntervalOf(FloorDiv(a, I(2)), vars), -2, 2));  // -3 // 2 = -2
  EXPECT_TRUE(Is(IntervalOf(Min(a, b), vars), -3, 4));
  EXPECT_TRUE(Is(IntervalOf(Max(a, b), vars), 2, 5));
  // Modulo: within one period the order is kept; across one, every remainder.
  EXPECT_TRUE(Is(IntervalOf(FloorMod(b, I(8)), vars), 2, 4));
  EXPECT_TRUE(Is(IntervalOf(FloorMod(a, I(4)), vars), 0, 3));
  EXPECT_TRUE(Is(IntervalOf(FloorMod(Add(b, I(4)), I(8)), vars), 0, 7));  // 6, 7, 0
}

TEST(IntervalOf, UnknownsAndOverflowGiveNothing) {
  Var a = MakeVar("a"), free_var = MakeVar("n");
  VarIntervals vars = {{a.get(), {0, 7}}};
  EXPECT_FALSE(IntervalOf(Add(a, free_var), vars));
  EXPECT_FALSE(IntervalOf(FloorDiv(a, a), vars));  // a variable divisor
  EXPECT_FALSE(IntervalOf(FloorMod(a, I(-4)), vars));
  EXPECT_FALSE(IntervalOf(Mul(Add(a, I(INT64_MAX - 3)), I(2)), vars));
  Buffer x = MakeBuffer("x", DType::kInt64, {I(8)});
  EXPECT_FALSE(IntervalOf(Add(a, Load(x, {a})), vars));
}

// Random expressions over random intervals: every value the expression takes at points of
// the box lies inside its interval.
TEST(IntervalOf, ContainsEveryValue) {
  std::mt19937 rng(7);
  Var a = MakeVar("a"), b = MakeVar("b");
  std::uniform_int_distribution<int> pick(0, 6), small(-9, 9), divisor(1, 6);
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || pick(rng) == 0) {
      switch (pick(rng) % 3) {
        case 0:
          return a;
        case 1:
          return b;
        default:
          return I(small(rng));
      }
    }
    Expr x = gen(depth - 1);
    switch (pick(rng)) {
      case 0:
        return Add(x, gen(depth - 1));
      case 1:
        return Sub(x, gen(depth - 1));
      case 2:
        return Mul(x, gen(depth - 1));
      case 3:
        return FloorDiv(x, I(divisor(rng)));
      case 4:
        return FloorMod(x, I(divisor(rng)));
      case 5:
        return Min(x, gen(depth - 1));
      default:
        return Max(x, gen(depth - 1));
    }
  };
  for (int trial = 0; trial < 300; ++trial) {
    int64_t a0 = small(rng), b0 = small(rng);
    Interval ra{a0, a0 + pick(rng)}, rb{b0, b0 + pick(rng)};
    Expr e = gen(4);
    std::optional<Interval> r = IntervalOf(e, {{a.get(), ra}, {b.get(), rb}});
    ASSERT_TRUE(r) << Print(e);
    for (int64_t va = ra.min; va <= ra.max; ++va)
      for (int64_t vb = rb.min; vb <= rb.max; ++vb) {
        int64_t v = 0;
        Expr at = Substitute(Substitute(e, a, I(va)), b, I(vb));
        ASSERT_TRUE(IsConstInt(at, &v)) << Print(at);
        ASSERT_GE(v, r->min) << Print(e) << " at a=" << va << " b=" << vb;
        ASSERT_LE(v, r->max) << Print(e) << " at a=" << va << " b=" << vb;
      }
  }
}

// A nest's variables: an inner loop's min is an expression of the outer variable, and a
// variable bound by two sibling loops gets the union of their ranges.
TEST(LoopIntervals, NestsAndSiblings) {
  Var kb = MakeVar("kb"), k = MakeVar("k"), t = MakeVar("t"), s = MakeVar("s");
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(64)});
  Stmt body = Seq({
      For(kb, I(1), I(4), ForKind::kSerial,
          For(k, Mul(kb, I(8)), I(8), ForKind::kSerial, Store(out, {k}, FloatImm(0)))),
      For(k, I(0), I(3), ForKind::kSerial, Store(out, {k}, FloatImm(0))),
      LetStmt(t, Add(k, I(2)), Store(out, {t}, FloatImm(1))),
      For(s, I(0), I(0), ForKind::kSerial, Store(out, {s}, FloatImm(0))),
  });
  VarIntervals v = LoopIntervals(body);
  EXPECT_TRUE(Is(v.count(kb.get()) ? std::optional<Interval>(v.at(kb.get())) : std::nullopt, 1, 4));
  EXPECT_TRUE(Is(v.count(k.get()) ? std::optional<Interval>(v.at(k.get())) : std::nullopt, 0, 39));
  EXPECT_TRUE(Is(v.count(t.get()) ? std::optional<Interval>(v.at(t.get())) : std::nullopt, 2, 41));
  EXPECT_EQ(v.count(s.get()), 0u);  // runs no iteration
}

}  // namespace
}  // namespace kiln::loop
