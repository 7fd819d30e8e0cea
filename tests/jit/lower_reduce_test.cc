// Lowering of the reductions (sum, mean, max, min, prod, l2, argmax, argmin): each op compiled,
// concretely and shape-generic, and compared with its reference kernel on random data.
//
// Tolerances: integer results and argmax/argmin indices must be exact. Float sum, mean, prod and
// l2 accumulate in f64 in the reference's order and max/min are exact, so float results are
// normally bit-identical; the check allows 1e-6 relative (plus 1e-6 absolute for sums that
// cancel to near zero) so that a later reassociating loop pass does not break it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::AttrsText;

using test::CompiledMatchesReference;
using test::MakeTensor;
using test::RandomTensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Attrs Axes(std::vector<int64_t> axes, bool keepdims = true) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

// One input shape and the reduction's attributes.
struct Case {
  std::vector<int64_t> shape;
  Attrs attrs;
};

// Sizes 1, odd, size-0 reduced and kept axes, rank 0, several axis sets (negative, all,
// noop_with_empty_axes) and large ones.
std::vector<Case> ReduceCases() {
  return {
      {{1}, {}},
      {{7}, Axes({0})},
      {{13, 5}, Axes({1})},
      {{13, 5}, Axes({-2}, false)},
      {{13, 5}, Axes({}, false)},
      {{13, 5}, {{"noop_with_empty_axes", true}}},
      {{3, 4, 5}, Axes({0, 2})},
      {{3, 4, 5}, Axes({-1, 0}, false)},
      {{2, 1, 3}, Axes({1})},
      {{0, 5}, Axes({0})},            // reduces an empty axis: the identity (mean: NaN)
      {{4, 0, 3}, Axes({1}, false)},  // likewise, between kept axes
      {{0, 5}, Axes({1})},            // empty output
      {{}, {}},                       // rank 0
      {{257, 1031}, Axes({1})},
      {{257, 1031}, Axes({0}, false)},
      {{1 << 16}, Axes({}, false)},
  };
}

// Fewer shapes for the dtypes beyond the main f32 / f16 / i32 ones.
std::vector<Case> ShortReduceCases() {
  return {
      {{1}, {}},           {{13, 5}, Axes({1})},     {{3, 4, 5}, Axes({-1, 0}, false)},
      {{0, 5}, Axes({0})}, {{257, 1031}, Axes({1})},
  };
}

bool IsMainDType(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kInt32;
}

// Random data in a range that exercises the op: integer sums wrap in i8/u8 at the large sizes,
// products stay away from underflow where they can, and integer products wrap.
Tensor DataFor(const std::string& op, DType t, const std::vector<int64_t>& shape, uint64_t seed) {
  bool is_float = IsFloat(t);
  if (op == "prod")
    return is_float ? RandomTensor(t, shape, seed, 0.5, 1.5) : RandomTensor(t, shape, seed, 0, 3);
  if (is_float) return RandomTensor(t, shape, seed, -1, 1);
  if (t == DType::kUInt8) return RandomTensor(t, shape, seed, 0, 200);
  return RandomTensor(t, shape, seed, -100, 100);
}

void CheckReduceOp(const std::string& op, const std::vector<DType>& dtypes) {
  for (DType t : dtypes) {
    std::vector<Case> cases = IsMainDType(t) ? ReduceCases() : ShortReduceCases();
    uint64_t seed = 1;
    for (const Case& c : cases) {
      Tensor x = DataFor(op, t, c.shape, seed++);
      SCOPED_TRACE(StrCat(op, " ", x.TypeString(), " ", AttrsText(c.attrs)));
      double tol = IsFloat(t) ? 1e-6 : 0;
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, c.attrs, tol, tol));
    }
  }
}

const std::vector<DType> kAllDTypes = {DType::kFloat32, DType::kFloat16,  DType::kInt32,
                                       DType::kFloat64, DType::kBFloat16, DType::kInt8,
                                       DType::kUInt8,   DType::kInt64};
const std::vector<DType> kFloatDTypes = {DType::kFloat32, DType::kFloat16, DType::kFloat64,
                                         DType::kBFloat16};

TEST(LowerReduce, Sum) {
  CheckReduceOp("sum", kAllDTypes);
}
TEST(LowerReduce, Mean) {
  CheckReduceOp("mean", kFloatDTypes);
}
TEST(LowerReduce, Max) {
  CheckReduceOp("max", kAllDTypes);
}
TEST(LowerReduce, Min) {
  CheckReduceOp("min", kAllDTypes);
}
TEST(LowerReduce, Prod) {
  CheckReduceOp("prod", kAllDTypes);
}
TEST(LowerReduce, L2) {
  CheckReduceOp("l2", kFloatDTypes);
}

// Integer sum and prod wrap in the element width, as the reference's truncated 64-bit
// accumulator does.
TEST(LowerReduce, IntegerSumAndProdWrap) {
  Tensor i8 = MakeTensor<int8_t>({2, 3}, {100, 100, 100, -128, -1, 2});
  EXPECT_TRUE(CompiledMatchesReference("sum", {i8}, Axes({1}), 0, 0));
  EXPECT_TRUE(CompiledMatchesReference("prod", {i8}, Axes({1}), 0, 0));
  Tensor u8 = MakeTensor<uint8_t>({4}, {200, 100, 7, 255});
  EXPECT_TRUE(CompiledMatchesReference("sum", {u8}, {}, 0, 0));
  EXPECT_TRUE(CompiledMatchesReference("prod", {u8}, {}, 0, 0));
  Tensor i64 = MakeTensor<int64_t>({3}, {std::numeric_limits<int64_t>::max(), 2, 3});
  EXPECT_TRUE(CompiledMatchesReference("sum", {i64}, {}, 0, 0));
  EXPECT_TRUE(CompiledMatchesReference("prod", {i64}, {}, 0, 0));
}

// max/min propagate NaN; sums and products carry NaN and infinities through.
TEST(LowerReduce, NaNAndInfinity) {
  Tensor x =
      MakeTensor<float>({4, 3}, {1, kNaN, 3, -kInf, -kInf, -kInf, kInf, 2, -kInf, kNaN, 5, -1});
  for (const char* op : {"sum", "mean", "max", "min", "prod", "l2"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(CompiledMatchesReference(op, {x}, Axes({1}), 0, 0));
    EXPECT_TRUE(CompiledMatchesReference(op, {x}, Axes({0}, false), 0, 0));
  }
}

// ---- argmax / argmin ----

Attrs ArgAttrs(int64_t axis, bool keepdims = true, bool last = false) {
  return {{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", last}};
}

std::vector<Case> ArgCases() {
  return {
      {{1}, ArgAttrs(0)},
      {{7}, ArgAttrs(0, false)},
      {{13, 5}, ArgAttrs(1)},
      {{13, 5}, ArgAttrs(0, false)},
      {{13, 5}, ArgAttrs(-1, false, true)},
      {{3, 4, 5}, ArgAttrs(1)},
      {{3, 4, 5}, ArgAttrs(-3, false, true)},
      {{0, 5}, ArgAttrs(1)},  // empty output; the reduced axis is not empty
      {{4, 0, 3}, ArgAttrs(2, false)},
      {{}, ArgAttrs(0)},  // rank 0: index 0
      {{257, 1031}, ArgAttrs(1)},
      {{257, 1031}, ArgAttrs(0, false, true)},
      {{1 << 16}, ArgAttrs(0)},
  };
}

void CheckArgOp(const std::string& op) {
  for (DType t : kAllDTypes) {
    uint64_t seed = 100;
    for (const Case& c : ArgCases()) {
      if (!IsMainDType(t) && c.shape.size() > 1 && c.shape[0] == 3)
        continue;  // shorter for the rest
      // Integers in a small range, so rows hold ties and first/last occurrence matters.
      Tensor x = IsFloat(t) ? RandomTensor(t, c.shape, seed++, -1, 1)
                            : RandomTensor(t, c.shape, seed++, 0, 9);
      SCOPED_TRACE(StrCat(op, " ", x.TypeString(), " ", AttrsText(c.attrs)));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, c.attrs, 0, 0));
    }
  }
}

TEST(LowerReduce, ArgMax) {
  CheckArgOp("argmax");
}
TEST(LowerReduce, ArgMin) {
  CheckArgOp("argmin");
}

// Ties pick the first index, or the last with select_last_index; -0 and +0 tie.
TEST(LowerReduce, ArgTies) {
  Tensor x = MakeTensor<float>({3, 4}, {2, 5, 5, 1, -0.0f, 0.0f, -3, -3, 7, 7, 7, 7});
  for (const char* op : {"argmax", "argmin"}) {
    for (bool last : {false, true}) {
      SCOPED_TRACE(StrCat(op, " last=", last));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, ArgAttrs(1, true, last), 0, 0));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, ArgAttrs(0, false, last), 0, 0));
    }
  }
}

// NaN counts as the extreme for both: the first NaN wins (the last with select_last_index), and
// infinities are ordinary values.
TEST(LowerReduce, ArgNaN) {
  Tensor x = MakeTensor<float>({5, 4}, {1,     kNaN,  3,     kNaN,    // two NaNs
                                        kNaN,  2,     kInf,  -kInf,   // NaN first
                                        -kInf, -kInf, -kInf, -kInf,   // all -inf
                                        kInf,  1,     kInf,  0,       // tied infinities
                                        4,     3,     2,     kNaN});  // NaN last
  for (const char* op : {"argmax", "argmin"}) {
    for (bool last : {false, true}) {
      SCOPED_TRACE(StrCat(op, " last=", last));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, ArgAttrs(1, true, last), 0, 0));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, ArgAttrs(0, false, last), 0, 0));
    }
  }
  // The same in f16, whose values the kernel compares in f32 registers.
  Tensor h = Tensor::Empty(DType::kFloat16, {5, 4});
  for (int64_t i = 0; i < x.numel(); ++i) h.SetFromDouble(i, x.GetAsDouble(i));
  EXPECT_TRUE(CompiledMatchesReference("argmax", {h}, ArgAttrs(1), 0, 0));
  EXPECT_TRUE(CompiledMatchesReference("argmin", {h}, ArgAttrs(1, true, true), 0, 0));
}

// log_sum needs positive sums; log_sum_exp is max-shifted, so large values must not overflow.
TEST(LowerReduce, LogSumSumSquareL1) {
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    for (const Case& c : ShortReduceCases()) {
      SCOPED_TRACE(StrCat(DTypeName(t), AttrsText(c.attrs)));
      Tensor pos = RandomTensor(t, c.shape, seed++, 0.1, 2);
      EXPECT_TRUE(CompiledMatchesReference("log_sum", {pos}, c.attrs, 1e-6, 1e-6));
      Tensor x = RandomTensor(t, c.shape, seed++, -1, 1);
      for (const char* op : {"sum_square", "l1"})
        EXPECT_TRUE(CompiledMatchesReference(op, {x}, c.attrs, 1e-6, 1e-6)) << op;
    }
  }
  CheckReduceOp("sum_square", kAllDTypes);
  CheckReduceOp("l1", kAllDTypes);
}

TEST(LowerReduce, LogSumExp) {
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    for (const Case& c : ReduceCases()) {
      SCOPED_TRACE(StrCat(DTypeName(t), AttrsText(c.attrs)));
      double hi = t == DType::kFloat16 ? 1000 : 500;  // exp(500) overflows f32 unshifted
      Tensor x = RandomTensor(t, c.shape, seed++, -hi, hi);
      EXPECT_TRUE(CompiledMatchesReference("log_sum_exp", {x}, c.attrs, 1e-6, 1e-6));
    }
  }
  // Rows with NaN, +inf, all -inf.
  Tensor x = MakeTensor<float>({4, 3}, {1, kNaN, 2, 1, kInf, 2, -kInf, -kInf, -kInf, 0, -kInf, 1});
  for (bool keepdims : {true, false})
    EXPECT_TRUE(CompiledMatchesReference("log_sum_exp", {x}, Axes({1}, keepdims), 0, 0));
  Tensor big = MakeTensor<float>({2}, {1000, 1000});
  Tensor want = RunOpReference("log_sum_exp", {big}, {}).at(0);
  EXPECT_NEAR(want.GetAsDouble(0), 1000 + std::log(2.0), 1e-3);
}

}  // namespace
}  // namespace kiln
