// The lowerings of the elementwise unary ops (ir/ops/unary.cc): every op compiled, concretely
// and shape-generic, and compared with its reference kernel on random data, odd sizes, size 1,
// empty tensors and a large tensor, for every dtype family it accepts; then the special values
// (NaN, infinities, signed zeros, the most negative integers) where the semantics are easiest
// to get wrong.
//
// Tolerances. The reference computes every float function in double and rounds once; the
// kernels compute f32 in f32 and f16/bf16 in f32. Exact ops (neg, abs, relu, floor, ceil,
// round, sign, not, cast, clip) must match exactly (atol 0, rtol 0). Transcendental ones may
// differ by an ulp or two: rtol 1e-5 for f32, one unit of the format for f16 (2e-3) and bf16
// (1.6e-2), and 1e-12 for f64 (the same libm functions, but rsqrt and sigmoid round twice).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Size 1 (rank 0 and rank 1), odd sizes, an empty tensor and a large one (67591 elements).
const std::vector<std::vector<int64_t>> kShapes = {{}, {1}, {7}, {13, 5}, {0, 3}, {257, 263}};

const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                    DType::kBFloat16};
const std::vector<DType> kSigned = {DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64};

struct Tolerance {
  double atol, rtol;
};

Tolerance Exact() {
  return {0, 0};
}

// Transcendental functions: about an ulp of the dtype.
Tolerance Approx(DType t) {
  switch (t) {
    case DType::kFloat16:
      return {2e-3, 2e-3};
    case DType::kBFloat16:
      return {1.6e-2, 1.6e-2};
    case DType::kFloat64:
      return {1e-12, 1e-12};
    default:
      return {1e-6, 1e-5};
  }
}

// Random values in [lo, hi] of the dtype; integer ranges are clamped to the dtype's own.
Tensor Random(DType t, const std::vector<int64_t>& shape, double lo, double hi, uint64_t seed) {
  if (t == DType::kInt8) lo = std::max(lo, -128.0), hi = std::min(hi, 127.0);
  if (t == DType::kInt16) lo = std::max(lo, -32768.0), hi = std::min(hi, 32767.0);
  if (t == DType::kUInt8) lo = std::max(lo, 0.0), hi = std::min(hi, 255.0);
  return RandomTensor(t, shape, seed, lo, hi);
}

// `op` on every shape in kShapes, random values in [lo, hi].
void CheckAllShapes(const std::string& op, DType t, double lo, double hi, Tolerance tol,
                    const Attrs& attrs = {}) {
  uint64_t seed = 1;
  for (const std::vector<int64_t>& shape : kShapes) {
    Tensor x = Random(t, shape, lo, hi, seed++);
    EXPECT_TRUE(CompiledMatchesReference(op, {x}, attrs, tol.atol, tol.rtol))
        << DTypeName(t) << " " << x.TypeString();
  }
}

struct FloatOpCase {
  const char* op;
  double lo, hi;  // the input range: the function's interesting part of its domain
  bool exact;
};

TEST(LowerUnaryTest, FloatFunctionsMatchReference) {
  const FloatOpCase cases[] = {
      {"neg", -10, 10, true},         {"abs", -10, 10, true},   {"exp", -10, 10, false},
      {"log", 0.001, 100, false},     {"sqrt", 0, 100, false},  {"rsqrt", 0.001, 100, false},
      {"reciprocal", -10, 10, false}, {"tanh", -5, 5, false},   {"sigmoid", -20, 20, false},
      {"relu", -10, 10, true},        {"erf", -3, 3, false},    {"sin", -10, 10, false},
      {"cos", -10, 10, false},        {"floor", -10, 10, true}, {"ceil", -10, 10, true},
      {"round", -10, 10, true},       {"sign", -10, 10, true},  {"asin", -1, 1, false},
      {"acos", -1, 1, false},         {"atan", -10, 10, false},
  };
  for (const FloatOpCase& c : cases) {
    for (DType t : kFloats) {
      SCOPED_TRACE(c.op);
      CheckAllShapes(c.op, t, c.lo, c.hi, c.exact ? Exact() : Approx(t));
    }
  }
}

TEST(LowerUnaryTest, GeluBothFormsMatchReference) {
  for (const char* form : {"none", "tanh"}) {
    for (DType t : kFloats) {
      SCOPED_TRACE(form);
      CheckAllShapes("gelu", t, -6, 6, Approx(t), Attrs{{"approximate", std::string(form)}});
    }
  }
}

TEST(LowerUnaryTest, IntegerOpsMatchReference) {
  // The whole range of each dtype's random values, so i8's -128 (whose negation wraps) occurs.
  for (const char* op : {"neg", "abs", "relu", "sign"}) {
    for (DType t : kSigned) {
      SCOPED_TRACE(op);
      CheckAllShapes(op, t, -1e12, 1e12, Exact());
    }
  }
  CheckAllShapes("sign", DType::kUInt8, 0, 255, Exact());
}

TEST(LowerUnaryTest, NotMatchesReference) {
  CheckAllShapes("not", DType::kBool, 0, 1, Exact());
}

// Values that each float function must treat as the reference does, repeated to fill odd
// sizes; f32 and f64 (f16/bf16 only differ in where results round).
std::vector<double> SpecialValues() {
  return {kNaN, kInf, -kInf, 0.0,    -0.0, 1.0,   -1.0, 0.5,   -0.5, 1.5,        -1.5,
          2.5,  -2.5, 1e-30, -1e-30, 88.0, -88.0, 1e30, -1e30, 3.14, 0.49999997, -0.49999997};
}

Tensor FromValues(DType t, const std::vector<double>& values, const std::vector<int64_t>& shape) {
  Tensor x = Tensor::Empty(t, shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.SetFromDouble(i, values[i % values.size()]);
  return x;
}

TEST(LowerUnaryTest, FloatSpecialValuesMatchReference) {
  const char* exact[] = {"neg", "abs", "relu", "floor", "ceil", "round", "sign"};
  const char* approx[] = {"exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid",
                          "erf", "sin", "cos",  "asin",  "acos",       "atan"};
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16}) {
    std::vector<std::vector<int64_t>> shapes = {{1}, {22}, {7, 9}, {0}};
    if (t == DType::kFloat32) shapes.push_back({301, 223});
    for (const std::vector<int64_t>& shape : shapes) {
      Tensor x = FromValues(t, SpecialValues(), shape);
      for (const char* op : exact)
        EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, 0, 0)) << DTypeName(t);
      Tolerance tol = Approx(t);
      for (const char* op : approx)
        EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, tol.atol, tol.rtol)) << DTypeName(t);
      for (const char* form : {"none", "tanh"})
        EXPECT_TRUE(CompiledMatchesReference("gelu", {x}, {{"approximate", std::string(form)}},
                                             tol.atol, tol.rtol))
            << DTypeName(t) << " " << form;
    }
  }
}

// Negating a negative zero gives +0 and NaN stays NaN; TensorsNear does not tell -0 from +0,
// so compare signs directly.
TEST(LowerUnaryTest, NegAndReluKeepSignedZeros) {
  Tensor x = test::Floats({4}, {0.0f, -0.0f, 1.0f, -1.0f});
  Tensor neg = test::RunCompiled(test::SingleOpFunction("neg", {x}, {}, false), {x}).at(0);
  EXPECT_TRUE(std::signbit(neg.data<float>()[0]));
  EXPECT_FALSE(std::signbit(neg.data<float>()[1]));
  Tensor relu = test::RunCompiled(test::SingleOpFunction("relu", {x}, {}, false), {x}).at(0);
  EXPECT_TRUE(std::signbit(relu.data<float>()[1]));  // the reference's `x < 0 ? 0 : x`
  EXPECT_EQ(relu.data<float>()[3], 0.0f);
}

TEST(LowerUnaryTest, IntegerExtremesWrapLikeReference) {
  // MIN, MIN + 1, -1, 0, 1, MAX for each signed dtype: neg and abs of MIN wrap to MIN.
  for (DType t : kSigned) {
    double min = -std::ldexp(1.0, DTypeSize(t) * 8 - 1);
    Tensor x = Tensor::Empty(t, {6});
    DispatchDType(t, [&]<typename T>() {
      if constexpr (std::is_integral_v<T>) {
        T* p = x.data<T>();
        p[0] = std::numeric_limits<T>::min();
        p[1] = static_cast<T>(std::numeric_limits<T>::min() + 1);
        p[2] = T(-1), p[3] = T(0), p[4] = T(1);
        p[5] = std::numeric_limits<T>::max();
      }
    });
    for (const char* op : {"neg", "abs", "relu", "sign"}) {
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, 0, 0)) << op << " " << DTypeName(t);
    }
    Tensor neg = test::RunCompiled(test::SingleOpFunction("neg", {x}, {}, false), {x}).at(0);
    EXPECT_EQ(neg.GetAsDouble(0), min) << DTypeName(t);
  }
}

// Values that exercise truncation, saturation, NaN -> 0, wrapping narrowing, int64 -> f32
// rounding and nonzero -> true.
Tensor CastInput(DType from, const std::vector<int64_t>& shape, uint64_t seed) {
  if (!IsFloat(from)) return Random(from, shape, -3e18, 3e18, seed);  // clamped per dtype
  Tensor x = Random(from, shape, -300.75, 300.75, seed);              // beyond i8 and u8 both ways
  if (x.numel() > 2) x.SetFromDouble(1, kNaN), x.SetFromDouble(2, 1e10);
  return x;
}

const std::vector<DType> kAllDTypes = {
    DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
    DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kUInt8,   DType::kBool};

// Every pair of dtypes on size 1, an odd 2-D shape and a large one (each compile costs ~20 ms,
// so the other shapes are left to CastShapesMatchReference).
TEST(LowerCastTest, EveryDTypePairMatchesReference) {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      uint64_t seed = 1;
      for (const std::vector<int64_t>& shape :
           std::vector<std::vector<int64_t>>{{1}, {13, 5}, {257, 263}}) {
        Tensor x = CastInput(from, shape, seed++);
        EXPECT_TRUE(CompiledMatchesReference("cast", {x}, {{"dtype", to}}, 0, 0))
            << DTypeName(from) << " -> " << DTypeName(to) << " " << x.TypeString();
      }
    }
  }
}

TEST(LowerCastTest, CastShapesMatchReference) {
  const std::pair<DType, DType> pairs[] = {
      {DType::kFloat32, DType::kInt32}, {DType::kInt64, DType::kFloat16},
      {DType::kFloat16, DType::kUInt8}, {DType::kBool, DType::kFloat32},
      {DType::kInt32, DType::kInt8},    {DType::kFloat64, DType::kBFloat16},
      {DType::kFloat32, DType::kBool}};
  for (auto [from, to] : pairs) {
    uint64_t seed = 1;
    for (const std::vector<int64_t>& shape : kShapes) {
      Tensor x = CastInput(from, shape, seed++);
      EXPECT_TRUE(CompiledMatchesReference("cast", {x}, {{"dtype", to}}, 0, 0))
          << DTypeName(from) << " -> " << DTypeName(to) << " " << x.TypeString();
    }
  }
}

TEST(LowerClipTest, MatchesReference) {
  const std::vector<Attrs> bounds = {
      {},                               // no bounds: the identity
      {{"min", -0.5}, {"max", 0.5}},    // both
      {{"min", 0.1}},                   // lower only, not representable exactly
      {{"max", -0.3}},                  // upper only
      {{"min", 0.2}, {"max", 0.8}},     // integers: no integer inside
      {{"min", -1e10}, {"max", 1e10}},  // beyond every integer dtype but i64
  };
  for (const Attrs& a : bounds) {
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16})
      CheckAllShapes("clip", t, -1, 1, Exact(), a);
    for (DType t : {DType::kInt8, DType::kInt32, DType::kInt64, DType::kUInt8})
      CheckAllShapes("clip", t, -200, 200, Exact(), a);
  }
  // NaN passes through a float clip.
  Tensor x = FromValues(DType::kFloat32, SpecialValues(), {22});
  EXPECT_TRUE(CompiledMatchesReference("clip", {x}, {{"min", -1.0}, {"max", 2.0}}, 0, 0));
}

// ---- activations, trigonometric/hyperbolic functions, isnan/isinf ----
//
// These are composed in the loop IR from exp, log, sqrt, tanh, sin and cos (expm1 and log1p
// by Kahan's and Goldberg's forms), so f32 results may round a few times: 4 ulp (rtol 5e-7
// each) for f32 and f64; f16/bf16 are computed in f32 and rounded once, as the others.
Tolerance Composed(DType t) {
  switch (t) {
    case DType::kFloat32:
      return {1e-6, 2e-6};
    case DType::kFloat64:
      return {1e-14, 1e-14};
    default:
      return Approx(t);
  }
}

TEST(LowerUnaryTest, ActivationsAndHyperbolicMatchReference) {
  const FloatOpCase cases[] = {
      {"leaky_relu", -10, 10, false},    {"elu", -10, 10, false},      {"selu", -10, 10, false},
      {"celu", -10, 10, false},          {"softplus", -30, 30, false}, {"softsign", -10, 10, false},
      {"hard_sigmoid", -5, 5, false},    {"hard_swish", -5, 5, false}, {"mish", -20, 20, false},
      {"thresholded_relu", -3, 3, true}, {"tan", -1.5, 1.5, false},    {"sinh", -10, 10, false},
      {"cosh", -10, 10, false},          {"asinh", -100, 100, false},  {"acosh", 1, 100, false},
      {"atanh", -0.999, 0.999, false},
  };
  for (const FloatOpCase& c : cases) {
    for (DType t : kFloats) {
      SCOPED_TRACE(c.op);
      CheckAllShapes(c.op, t, c.lo, c.hi, c.exact ? Exact() : Composed(t));
    }
  }
  // Near 0, where the textbook forms cancel.
  for (const char* op : {"elu", "selu", "sinh", "asinh", "atanh", "acosh"}) {
    SCOPED_TRACE(op);
    double lo = std::string(op) == "acosh" ? 1 : -1e-3;
    double hi = std::string(op) == "acosh" ? 1.001 : 1e-3;
    for (DType t : {DType::kFloat32, DType::kFloat64}) CheckAllShapes(op, t, lo, hi, Composed(t));
  }
}

TEST(LowerUnaryTest, ActivationAttributesMatchReference) {
  const std::pair<const char*, Attrs> cases[] = {
      {"leaky_relu", {{"alpha", 0.3}}},
      {"elu", {{"alpha", 2.5}}},
      {"selu", {{"alpha", 2.0}, {"gamma", 3.0}}},
      {"celu", {{"alpha", 0.5}}},
      {"hard_sigmoid", {{"alpha", 0.4}, {"beta", 0.1}}},
      {"thresholded_relu", {{"alpha", -0.5}}},
  };
  for (const auto& [op, attrs] : cases) {
    for (DType t : kFloats) {
      SCOPED_TRACE(op);
      CheckAllShapes(op, t, -5, 5, Composed(t), attrs);
    }
  }
}

TEST(LowerUnaryTest, ComposedFunctionsSpecialValues) {
  // The special values plus large arguments where sinh/cosh overflow only in the last octave
  // and asinh/acosh switch to log(2x).
  std::vector<double> v = SpecialValues();
  for (double d : {89.0, -89.0, 700.0, 710.0, -710.0, 1e10, -1e10, 0.999, -0.999, 1.0001})
    v.push_back(d);
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    Tensor x = FromValues(t, v, {static_cast<int64_t>(v.size())});
    Tolerance tol = Composed(t);
    for (const char* op :
         {"leaky_relu", "elu", "selu", "celu", "softplus", "softsign", "hard_sigmoid", "hard_swish",
          "mish", "thresholded_relu", "tan", "sinh", "cosh", "asinh", "acosh", "atanh"})
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, tol.atol, tol.rtol))
          << op << " " << DTypeName(t);
    for (const char* op : {"isnan", "isinf"})
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, 0, 0)) << op << " " << DTypeName(t);
  }
}

TEST(LowerUnaryTest, IsNaNIsInfMatchReference) {
  const Attrs flags[] = {{},
                         {{"detect_negative", false}},
                         {{"detect_positive", false}},
                         {{"detect_positive", false}, {"detect_negative", false}}};
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (const std::vector<int64_t>& shape : kShapes) {
      Tensor x = FromValues(t, SpecialValues(), shape);
      EXPECT_TRUE(CompiledMatchesReference("isnan", {x}, {}, 0, 0)) << DTypeName(t);
      for (const Attrs& a : flags)
        EXPECT_TRUE(CompiledMatchesReference("isinf", {x}, a, 0, 0)) << DTypeName(t);
    }
  }
}

}  // namespace
}  // namespace kiln
