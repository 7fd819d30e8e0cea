// Lowering of quantize_linear, dequantize_linear and shrink: each op compiled, concretely and
// shape-generic, and compared with its reference kernel on random data. The kernels do the
// reference's own f32 (shrink: f64) operations, so the results must match exactly.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::MakeTensor;
using test::RandomTensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// x's shape, the axis, and whether the scale is per axis (else a scalar).
struct QuantCase {
  std::vector<int64_t> shape;
  int64_t axis;
  bool per_axis;
};

std::vector<QuantCase> QuantCases() {
  return {
      {{1}, 0, false},   {{7}, 0, true}, {{13, 5}, 0, true},      {{13, 5}, -1, false},
      {{0, 3}, 1, true}, {{}, 1, false}, {{2, 3, 5, 7}, 2, true}, {{33, 129}, 1, true},
  };
}

std::vector<int64_t> ParamShape(const QuantCase& c) {
  if (!c.per_axis) return {};
  int axis = static_cast<int>(c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis);
  return {c.shape[axis]};
}

TEST(LowerQuantize, QuantizeLinear) {
  for (DType x_type : {DType::kFloat32, DType::kInt32}) {
    for (DType q : {DType::kUInt8, DType::kInt8}) {
      uint64_t seed = 1;
      for (const QuantCase& c : QuantCases()) {
        // A range wide enough that some elements saturate.
        Tensor x = RandomTensor(x_type, c.shape, seed++, -400, 400);
        Tensor scale = RandomTensor(DType::kFloat32, ParamShape(c), seed++, 0.5, 3);
        Tensor zp = q == DType::kUInt8 ? RandomTensor(q, ParamShape(c), seed++, 0, 255)
                                       : RandomTensor(q, ParamShape(c), seed++, -128, 127);
        Attrs attrs{{"axis", c.axis}};
        SCOPED_TRACE(
            StrCat("quantize_linear ", x.TypeString(), " ", zp.TypeString(), " axis ", c.axis));
        EXPECT_TRUE(CompiledMatchesReference("quantize_linear", {x, scale, zp}, attrs, 0, 0));
      }
    }
  }
  // Without a zero point: u8.
  Tensor x = RandomTensor(DType::kFloat32, {13, 5}, 7, -100, 400);
  EXPECT_TRUE(CompiledMatchesReference(
      "quantize_linear", {x, RandomTensor(DType::kFloat32, {5}, 8, 0.5, 3)}, {}, 0, 0));
  EXPECT_TRUE(
      CompiledMatchesReference("quantize_linear", {x, MakeTensor<float>({}, {1.5f})}, {}, 0, 0));
}

// Quotients exactly halfway round to even; NaN gives 0 and infinities saturate; a scale of 0
// gives infinities (or NaN for 0 / 0).
TEST(LowerQuantize, QuantizeLinearTiesAndSpecials) {
  Tensor x = MakeTensor<float>({12}, {0.125f, 0.375f, 0.625f, -0.125f, -0.375f, -0.625f, 31.875f,
                                      -32.125f, kNaN, kInf, -kInf, 0});
  Tensor quarter = MakeTensor<float>({}, {0.25f});  // x / 0.25 = 0.5, 1.5, 2.5, ...
  EXPECT_TRUE(CompiledMatchesReference("quantize_linear", {x, quarter, MakeTensor<int8_t>({}, {3})},
                                       {}, 0, 0));
  EXPECT_TRUE(CompiledMatchesReference("quantize_linear", {x, quarter}, {}, 0, 0));
  EXPECT_TRUE(
      CompiledMatchesReference("quantize_linear", {x, MakeTensor<float>({1}, {0})}, {}, 0, 0));
}

TEST(LowerQuantize, DequantizeLinear) {
  for (DType q : {DType::kUInt8, DType::kInt8, DType::kInt32}) {
    uint64_t seed = 1;
    double lo = q == DType::kUInt8 ? 0 : q == DType::kInt8 ? -128 : -2e9;
    double hi = q == DType::kUInt8 ? 255 : q == DType::kInt8 ? 127 : 2e9;
    const std::vector<QuantCase> cases = QuantCases();
    for (size_t i = 0; i < cases.size(); ++i) {
      const QuantCase& c = cases[i];
      Tensor x = RandomTensor(q, c.shape, seed++, lo, hi);
      Tensor scale = RandomTensor(DType::kFloat32, ParamShape(c), seed++, 0.01, 3);
      Attrs attrs{{"axis", c.axis}};
      SCOPED_TRACE(StrCat("dequantize_linear ", x.TypeString(), " axis ", c.axis));
      // The zero point is optional; alternate.
      if ((i + static_cast<size_t>(q == DType::kInt8)) % 2) {
        EXPECT_TRUE(CompiledMatchesReference("dequantize_linear", {x, scale}, attrs, 0, 0));
      } else {
        Tensor zp = RandomTensor(q, ParamShape(c), seed, lo, hi);
        EXPECT_TRUE(CompiledMatchesReference("dequantize_linear", {x, scale, zp}, attrs, 0, 0));
      }
    }
  }
}

TEST(LowerQuantize, Shrink) {
  // One attribute set per shape, so each dtype meets the defaults, a bias that saturates u8,
  // and fractional bounds.
  struct Case {
    std::vector<int64_t> shape;
    Attrs attrs;
  };
  std::vector<Case> cases = {{{1}, {}},
                             {{13, 5}, {{"lambd", 30.5}, {"bias", 7.25}}},
                             {{}, {{"lambd", 0.0}, {"bias", 0.1}}},
                             {{33, 129}, {{"lambd", 10.0}, {"bias", -200.0}}}};
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64}) {
    uint64_t seed = 1;
    double lo = t == DType::kUInt8 ? 0 : -100, hi = 100;
    for (const Case& c : cases) {
      Tensor x = RandomTensor(t, c.shape, seed++, lo, hi);
      SCOPED_TRACE(StrCat("shrink ", x.TypeString()));
      EXPECT_TRUE(CompiledMatchesReference("shrink", {x}, c.attrs, 0, 0));
    }
  }
  // NaN and the bounds themselves.
  Tensor x = MakeTensor<float>({5}, {kNaN, 0.5f, -0.5f, kInf, -kInf});
  EXPECT_TRUE(CompiledMatchesReference("shrink", {x}, {}, 0, 0));
}

}  // namespace
}  // namespace kiln
