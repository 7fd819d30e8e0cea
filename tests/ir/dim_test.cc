#include "ir/dim.h"

#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/dim_program.h"
#include "ir/error.h"

namespace kiln {
namespace {

Dim S(const char* n) {
  return Dim::Symbol(n);
}

TEST(Dim, ConstantsFold) {
  EXPECT_EQ((Dim(3) + Dim(4)).value(), 7);
  EXPECT_EQ((Dim(3) * Dim(4)).value(), 12);
  EXPECT_EQ(FloorDiv(Dim(7), Dim(2)).value(), 3);
  EXPECT_EQ(FloorDiv(Dim(-7), Dim(2)).value(), -4);
  EXPECT_EQ(Mod(Dim(-7), Dim(3)).value(), 2);
  EXPECT_EQ(Min(Dim(3), Dim(5)).value(), 3);
  EXPECT_EQ(Max(Dim(3), Dim(5)).value(), 5);
}

TEST(Dim, IdentitiesSimplify) {
  Dim n = S("n");
  EXPECT_EQ(n + 0, n);
  EXPECT_EQ(n * 1, n);
  EXPECT_EQ((n * 0).value(), 0);
  EXPECT_EQ(FloorDiv(n * 2, 2), n);
  EXPECT_EQ(n - n, Dim(0));
  EXPECT_EQ(FloorDiv(n, 1), n);
  EXPECT_EQ(Mod(n * 4, 2), Dim(0));
  EXPECT_EQ(FloorDiv(n, n), Dim(1));
}

TEST(Dim, LikeTermsCollectAndOrderIsCanonical) {
  Dim a = S("a"), b = S("b");
  EXPECT_EQ(a + b, b + a);
  EXPECT_EQ(a * b, b * a);
  EXPECT_EQ(a + b - a, b);
  EXPECT_EQ(a * 2 + a * 3, a * 5);
  EXPECT_EQ((a + 1) * (a + 1), a * a + a * 2 + 1);
  EXPECT_EQ(((a + 1) * (a + 1)).ToString(), "a * a + a * 2 + 1");
  EXPECT_EQ((a * b + 3 - b * a).value(), 3);
  EXPECT_EQ((a + b).hash(), (b + a).hash());
}

TEST(Dim, FloorDivSplitsDivisibleTerms) {
  Dim n = S("n");
  EXPECT_EQ(FloorDiv(n * 4 + 3, 2), n * 2 + 1);
  EXPECT_EQ(FloorDiv(n * 4 + 2, 4), n);  // 2 // 4 == 0
  EXPECT_EQ(FloorDiv(n * 2 + 1, 4).ToString(), "(n * 2 + 1) // 4");
  EXPECT_EQ(FloorDiv(n * 6, 4), FloorDiv(n * 3, 2));
  EXPECT_EQ(Mod(n * 4 + 5, 4), Dim(1));
  EXPECT_EQ(Mod(n + 5, 3).ToString(), "(n + 2) % 3");
}

// Nested floor divisions by positive constants are one: (x // b) // c == x // (b * c), checked
// against integer arithmetic over a range of x, negative ones included.
TEST(Dim, NestedFloorDivsMerge) {
  Dim h = S("h");
  EXPECT_EQ(FloorDiv(FloorDiv(h - 1, 2), 2).ToString(), "(h - 1) // 4");
  EXPECT_EQ(FloorDiv(FloorDiv(h, 3), 2), FloorDiv(h, 6));
  Dim nested = FloorDiv(FloorDiv(h * 5 + 1, 3), 4);
  for (int64_t v = -50; v <= 50; ++v) {
    int64_t x = v * 5 + 1, q = x / 3 - (x % 3 < 0 ? 1 : 0);
    int64_t want = q / 4 - (q % 4 < 0 ? 1 : 0);
    EXPECT_EQ(nested.TryEval({{"h", v}}), want) << "h = " << v;
  }
  // A floor division by a negative constant stays as it is.
  EXPECT_EQ(FloorDiv(FloorDiv(h, -2), 3).ToString(), "(h // (-2)) // 3");
}

TEST(Dim, MinMax) {
  Dim n = S("n"), m = S("m");
  EXPECT_EQ(Min(n, n + 1), n);
  EXPECT_EQ(Max(n, n + 1), n + 1);
  EXPECT_EQ(Min(n, m), Min(m, n));
  EXPECT_EQ(Max(n, m).ToString(), "max(m, n)");
}

// A nest of one of min or max is its operand set: any nesting and order is one form, repeats
// go, and an operand another bounds by a constant goes. So a recurrence over symbolic dims
// (an LSTM's state, step after step) stays as long as its distinct operands.
TEST(Dim, MinMaxNestsAreFlatSets) {
  Dim n = Dim::Symbol("n"), m = Dim::Symbol("m"), k = Dim::Symbol("k");
  EXPECT_EQ(Max(n, Max(m, n)), Max(n, m));
  EXPECT_EQ(Max(Max(n, m), Max(m, k)), Max(k, Max(m, n)));
  EXPECT_EQ(Min(Min(k, n), m), Min(n, Min(m, k)));
  EXPECT_EQ(Max(n, Max(m, n + 2)), Max(m, n + 2));
  EXPECT_EQ(Min(n + 2, Min(m, n)), Min(m, n));
  EXPECT_EQ(Max(n, Min(n, m)).ToString(), "max(n, min(m, n))");  // no absorption across kinds
  EXPECT_EQ(Max(Max(n, m), Max(n, m + 1)), Max(n, m + 1));
  Dim state = Min(n, Dim(3));
  for (int t = 0; t < 1000; ++t)
    state = Max(state, Max(Min(n, Dim(3)), Min(m, Dim(6)) - Min(m, Dim(3))));
  EXPECT_LT(state.ToString().size(), 64u) << state.ToString();
  EXPECT_EQ(state.TryEval({{"n", 2}, {"m", 10}}), 3);
}

TEST(Dim, PrintsReadably) {
  Dim seq = S("seq"), batch = S("batch");
  EXPECT_EQ((seq * 2).ToString(), "seq * 2");
  EXPECT_EQ((batch * seq).ToString(), "batch * seq");
  EXPECT_EQ((seq - 1).ToString(), "seq - 1");
  EXPECT_EQ((Dim(1) - seq).ToString(), "-seq + 1");
  EXPECT_EQ((FloorDiv(seq, 2) * 3).ToString(), "(seq // 2) * 3");
  EXPECT_EQ(Dim(-4).ToString(), "-4");
}

TEST(Dim, EvalAndSubstitute) {
  Dim n = S("n"), m = S("m");
  Dim e = FloorDiv(n * m + 3, 2) + Mod(n, 3) + Max(n, m);
  auto v = e.TryEval({{"n", 5}, {"m", 7}});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (5 * 7 + 3) / 2 + 5 % 3 + 7);
  EXPECT_FALSE(e.TryEval({{"n", 5}}).has_value());
  Dim sub = e.Substitute([](const std::string& s) -> std::optional<Dim> {
    if (s == "n") return Dim(5);
    return std::nullopt;
  });
  EXPECT_EQ(sub, FloorDiv(m * 5 + 3, 2) + 2 + Max(m, Dim(5)));
  std::set<std::string> syms;
  e.CollectSymbols(&syms);
  EXPECT_EQ(syms, (std::set<std::string>{"m", "n"}));
}

TEST(Dim, DivisionByZeroAndOverflowAreErrors) {
  Dim n = S("n");
  EXPECT_THROW(FloorDiv(n, 0), Error);
  EXPECT_THROW(Mod(Dim(3), Dim(0)), Error);
  EXPECT_THROW(Dim(INT64_MAX) * Dim(2), Error);
  EXPECT_FALSE(FloorDiv(n, S("m")).TryEval({{"n", 1}, {"m", 0}}).has_value());
}

// DimProgram computes every dim as TryEval does: constants, sums with negative coefficients,
// products of symbols, nested floordiv / mod / min / max (a conv's output size over a padded
// input, a pool's ceil mode), over bindings with negatives and zeros; and fails where TryEval
// would (a division by zero, an overflow).
TEST(Dim, ProgramComputesWhatTryEvalDoes) {
  const Dim h = S("h"), w = S("w"), n = S("n");
  const std::vector<Dim> dims = {
      Dim(7),
      h,
      h * w * 3 - n + 2,
      FloorDiv(h + 2 - 3, 2) + 1,
      Mod(h * 5 + 3, 4) * FloorDiv(w - 1, 3),
      Min(h, w * 2) + Max(n - 4, Dim(1)),
      FloorDiv(FloorDiv(h + 1, 2) + 1, 2) * Max(FloorDiv(w + 3, 4), Min(n, h)),
      FloorDiv(h, w) + Mod(n, w),
  };
  const DimProgram program(dims);
  ASSERT_EQ(program.size(), dims.size());
  EXPECT_EQ(program.symbols().size(), 3u);
  std::vector<int64_t> out(dims.size());
  for (int64_t hv : {-7, 0, 1, 17, 224})
    for (int64_t wv : {-3, 0, 1, 5, 61})
      for (int64_t nv : {-1, 0, 2, 9}) {
        std::map<std::string, int64_t> binding = {{"h", hv}, {"w", wv}, {"n", nv}};
        std::vector<int64_t> values;
        for (const std::string& name : program.symbols()) values.push_back(binding.at(name));
        const bool ok = program.Eval(values.data(), out.data());
        bool all = true;
        for (size_t i = 0; i < dims.size(); ++i) {
          std::optional<int64_t> want = dims[i].TryEval(binding);
          all = all && want.has_value();
          if (ok && want) {
            EXPECT_EQ(out[i], *want) << dims[i].ToString() << " at h " << hv;
          }
        }
        EXPECT_EQ(ok, all) << "h " << hv << " w " << wv << " n " << nv;
      }
  // Overflow: as TryEval, a failure rather than a wrapped value.
  const DimProgram big({h * w});
  const int64_t huge[] = {INT64_MAX / 2, 3};
  int64_t v = 0;
  EXPECT_FALSE(big.Eval(huge, &v));
  EXPECT_FALSE((h * w).TryEval({{"h", INT64_MAX / 2}, {"w", 3}}).has_value());
  // Slots given in advance keep their numbers, unused ones included; new symbols follow.
  const DimProgram preset({w * 2, n + h}, {"h", "unused", "w"});
  EXPECT_EQ(preset.symbols(), (std::vector<std::string>{"h", "unused", "w", "n"}));
  const int64_t slots[] = {5, 99, 7, 11};
  int64_t two[2] = {0, 0};
  ASSERT_TRUE(preset.Eval(slots, two));
  EXPECT_EQ(two[0], 14);
  EXPECT_EQ(two[1], 16);
  // No dims: nothing to compute, and nothing read.
  EXPECT_TRUE(DimProgram(std::vector<Dim>{}).Eval(nullptr, nullptr));
}

TEST(Dim, ShapeHelpers) {
  Shape s{S("batch"), Dim(10)};
  EXPECT_EQ(ShapeToString(s), "[batch, 10]");
  EXPECT_FALSE(IsConstShape(s));
  EXPECT_EQ(ShapeNumel(s), S("batch") * 10);
  EXPECT_EQ(ConstShape(ShapeFromInts({2, 3})), (std::vector<int64_t>{2, 3}));
}

}  // namespace
}  // namespace kiln
