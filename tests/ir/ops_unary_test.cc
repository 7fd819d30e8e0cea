// Type relations and reference kernels of the elementwise unary ops (ir/ops/unary.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::Floats;
using test::Infer;
using test::MakeTensor;
using test::RandomTensor;
using test::RunOne;
using test::TensorsNear;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kInff = std::numeric_limits<float>::infinity();

const std::vector<std::string> kFloatOnly = {
    "exp", "log", "sqrt",  "rsqrt", "reciprocal", "tanh", "sigmoid", "gelu", "erf",
    "sin", "cos", "floor", "ceil",  "round",      "asin", "acos",    "atan"};
const std::vector<std::string> kSignedOrFloat = {"neg", "abs", "relu"};

// A 1-D f32 tensor of `v`.
Tensor Floats(const std::vector<float>& v) {
  return Floats({static_cast<int64_t>(v.size())}, v);
}

// ---------------------------------------------------------------------------------------------
// Registration and type relations.

TEST(UnaryOps, AllRegisteredAsElementwise) {
  std::vector<std::string> names = kFloatOnly;
  names.insert(names.end(), kSignedOrFloat.begin(), kSignedOrFloat.end());
  for (const char* n : {"sign", "not", "cast", "clip"}) names.push_back(n);
  for (const std::string& n : names) {
    const OpDef* op = OpRegistry::Global().Find(n);
    ASSERT_NE(op, nullptr) << n;
    EXPECT_EQ(op->pattern, OpPattern::kElementwise) << n;
    EXPECT_EQ(op->min_inputs, 1) << n;
    EXPECT_EQ(op->max_inputs, 1) << n;
  }
}

TEST(UnaryOps, TypeKeepsShapeAndDType) {
  Dim batch = Dim::Symbol("batch");
  for (const std::string& n : kFloatOnly) {
    EXPECT_EQ(Infer(n, {TensorType({batch, 784}, DType::kFloat32)}), "f32[batch, 784]") << n;
    EXPECT_EQ(Infer(n, {TensorType({2, 3}, DType::kFloat16)}), "f16[2, 3]") << n;
    EXPECT_EQ(Infer(n, {TensorType({}, DType::kFloat64)}), "f64[]") << n;
    EXPECT_EQ(Infer(n, {TensorType({batch * 2, 0}, DType::kBFloat16)}), "bf16[batch * 2, 0]") << n;
  }
  for (const std::string& n : kSignedOrFloat) {
    EXPECT_EQ(Infer(n, {TensorType({batch, 3}, DType::kInt8)}), "i8[batch, 3]") << n;
    EXPECT_EQ(Infer(n, {TensorType({batch, 3}, DType::kInt64)}), "i64[batch, 3]") << n;
    EXPECT_EQ(Infer(n, {TensorType({batch}, DType::kFloat32)}), "f32[batch]") << n;
  }
  EXPECT_EQ(Infer("sign", {TensorType({batch}, DType::kUInt8)}), "u8[batch]");
  EXPECT_EQ(Infer("not", {TensorType({batch, 2}, DType::kBool)}), "bool[batch, 2]");
  EXPECT_EQ(Infer("clip", {TensorType({batch}, DType::kInt32)}, {{"min", 0.0}}), "i32[batch]");
}

TEST(UnaryOps, RejectsDTypesOutsideTheirClass) {
  for (const std::string& n : kFloatOnly) {
    std::string msg =
        ErrorMessage([&] { InferOpType(n, {TensorType({Dim::Symbol("batch")}, DType::kInt32)}); });
    EXPECT_THAT(msg, HasSubstr(n + ": input must be a float dtype")) << n;
    EXPECT_THAT(msg, HasSubstr("got i32")) << n;
  }
  for (const std::string& n : kSignedOrFloat) {
    EXPECT_THAT(ErrorMessage([&] { InferOpType(n, {TensorType({2}, DType::kUInt8)}); }),
                HasSubstr("must be a float or signed integer dtype, got u8"))
        << n;
    EXPECT_THAT(ErrorMessage([&] { InferOpType(n, {TensorType({2}, DType::kBool)}); }),
                HasSubstr("got bool"))
        << n;
  }
  EXPECT_THAT(ErrorMessage([] { InferOpType("sign", {TensorType({2}, DType::kBool)}); }),
              HasSubstr("sign: input must be a numeric (non-bool) dtype, got bool"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("not", {TensorType({2}, DType::kFloat32)}); }),
              HasSubstr("not: input must be bool, got f32"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("clip", {TensorType({2}, DType::kBool)}); }),
              HasSubstr("clip: input must be a numeric (non-bool) dtype, got bool"));
}

TEST(UnaryOps, InputCountAndTupleInputAreTypeErrors) {
  Type t = TensorType({2}, DType::kFloat32);
  EXPECT_THAT(ErrorMessage([&] { InferOpType("exp", {}); }),
              HasSubstr("exp: expects 1 inputs, got 0"));
  EXPECT_THAT(ErrorMessage([&] { InferOpType("neg", {t, t}); }), HasSubstr("got 2"));
  EXPECT_THAT(ErrorMessage([&] { InferOpType("exp", {TupleType({t})}); }),
              HasSubstr("argument 0 must be a tensor"));
}

TEST(UnaryOps, BadAttributesNameTheAttribute) {
  Type t = TensorType({2}, DType::kFloat32);
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("exp", {t}, {{"alpha", 1.0}});
              }),
              HasSubstr("has no attribute 'alpha'"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("gelu", {t}, {{"approximate", int64_t{1}}});
              }),
              HasSubstr("attribute 'approximate' must be string, got int"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("gelu", {t}, {{"approximate", std::string("fast")}});
              }),
              HasSubstr("'approximate' = \"fast\": must be \"none\" or \"tanh\""));
  EXPECT_THAT(ErrorMessage([&] { InferOpType("cast", {t}); }),
              HasSubstr("required attribute 'dtype' is missing"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("cast", {t}, {{"dtype", std::string("i32")}});
              }),
              HasSubstr("attribute 'dtype' must be dtype, got string"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("clip", {t}, {{"min", std::string("0")}});
              }),
              HasSubstr("attribute 'min' must be float"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("clip", {t}, {{"max", kNaN}});
              }),
              HasSubstr("'max' = nan: must not be NaN"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("clip", {t}, {{"min", 3.0}, {"max", 1.0}});
              }),
              HasSubstr("clip: min 3.0 is greater than max 1.0"));
}

// ---------------------------------------------------------------------------------------------
// Reference kernels against hand-computed values.

TEST(UnaryKernels, ExpLogSqrt) {
  EXPECT_TRUE(TensorsNear(RunOne("exp", {Floats({-2, -0.5, 0, 0.5, 2})}),
                          Floats({0.13533528f, 0.60653066f, 1, 1.64872127f, 7.3890561f})));
  EXPECT_TRUE(TensorsNear(RunOne("log", {Floats({1, 2.718281828f, 0.5f, 0, -1})}),
                          Floats({0, 1, -0.69314718f, -kInff, kNaNf})));
  EXPECT_TRUE(
      TensorsNear(RunOne("sqrt", {Floats({0, 1, 4, 2.25f, -1})}), Floats({0, 1, 2, 1.5f, kNaNf})));
  EXPECT_TRUE(
      TensorsNear(RunOne("rsqrt", {Floats({1, 4, 0.25f, 0})}), Floats({1, 0.5f, 2, kInff})));
  EXPECT_TRUE(TensorsNear(RunOne("reciprocal", {Floats({2, -4, 0.5f, 0})}),
                          Floats({0.5f, -0.25f, 2, kInff})));
}

TEST(UnaryKernels, Activations) {
  EXPECT_TRUE(TensorsNear(RunOne("tanh", {Floats({0, 1, -1, 20})}),
                          Floats({0, 0.76159416f, -0.76159416f, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("sigmoid", {Floats({0, 1, -1, 100, -100})}),
                          Floats({0.5f, 0.73105858f, 0.26894142f, 1, 0})));
  Tensor relu = RunOne("relu", {Floats({-1, 0, 2.5f, kNaNf, -kInff})});
  EXPECT_TRUE(TensorsNear(relu, Floats({0, 0, 2.5f, kNaNf, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("relu", {MakeTensor<int32_t>({3}, {-3, 0, 7})}),
                          MakeTensor<int32_t>({3}, {0, 0, 7})));
  EXPECT_TRUE(TensorsNear(RunOne("gelu", {Floats({-1, 0, 1, 2})}),
                          Floats({-0.15865525f, 0, 0.84134475f, 1.95449974f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("gelu", {Floats({-1, 0, 1, 2})}, {{"approximate", std::string("none")}}),
                  Floats({-0.15865525f, 0, 0.84134475f, 1.95449974f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("gelu", {Floats({-1, 0, 1, 2})}, {{"approximate", std::string("tanh")}}),
                  Floats({-0.15880801f, 0, 0.84119199f, 1.95459769f})));
  EXPECT_TRUE(TensorsNear(RunOne("erf", {Floats({0, 0.5f, 1, -1})}),
                          Floats({0, 0.52049988f, 0.84270079f, -0.84270079f})));
}

TEST(UnaryKernels, Trigonometry) {
  const float pi = 3.14159265f;
  EXPECT_TRUE(TensorsNear(RunOne("sin", {Floats({0, pi / 2, pi, -pi / 6})}),
                          Floats({0, 1, 0, -0.5f}), 1e-6));
  EXPECT_TRUE(TensorsNear(RunOne("cos", {Floats({0, pi / 2, pi, pi / 3})}),
                          Floats({1, 0, -1, 0.5f}), 1e-6));
  EXPECT_TRUE(
      TensorsNear(RunOne("asin", {Floats({0, 1, -0.5f})}), Floats({0, pi / 2, -pi / 6}), 1e-6));
  EXPECT_TRUE(
      TensorsNear(RunOne("acos", {Floats({1, 0, 0.5f})}), Floats({0, pi / 2, pi / 3}), 1e-6));
  EXPECT_TRUE(
      TensorsNear(RunOne("atan", {Floats({0, 1, -1})}), Floats({0, pi / 4, -pi / 4}), 1e-6));
  // Outside [-1, 1], asin and acos are NaN, as in C.
  Tensor out = RunOne("asin", {Floats({2})});
  EXPECT_TRUE(std::isnan(out.data<float>()[0]));
}

TEST(UnaryKernels, FloorCeilRoundHalfToEven) {
  EXPECT_TRUE(TensorsNear(RunOne("floor", {Floats({-1.5f, -0.5f, 0.5f, 1.5f, 2})}),
                          Floats({-2, -1, 0, 1, 2})));
  EXPECT_TRUE(TensorsNear(RunOne("ceil", {Floats({-1.5f, -0.5f, 0.5f, 1.5f, 2})}),
                          Floats({-1, 0, 1, 2, 2})));
  Tensor r = RunOne(
      "round", {Floats({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f, -2.6f, 0.4f, kInff, kNaNf})});
  EXPECT_TRUE(TensorsNear(r, Floats({-2, -2, 0, 0, 2, 2, 3, -3, 0, kInff, kNaNf})));
  EXPECT_TRUE(std::signbit(r.data<float>()[2])) << "round(-0.5) is -0.0";
  // Past 2^52 every double is an integer: round leaves it alone.
  double big = 4503599627370497.0;  // 2^52 + 1
  EXPECT_EQ(RunOne("round", {MakeTensor<double>({1}, {big})}).data<double>()[0], big);
}

TEST(UnaryKernels, NegAbsSignWrapLikeNumPy) {
  EXPECT_TRUE(TensorsNear(RunOne("neg", {Floats({1, -2.5f, 0})}), Floats({-1, 2.5f, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("neg", {MakeTensor<int8_t>({3}, {1, -128, 127})}),
                          MakeTensor<int8_t>({3}, {-1, -128, -127})));
  int64_t min64 = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(TensorsNear(RunOne("neg", {MakeTensor<int64_t>({2}, {min64, 5})}),
                          MakeTensor<int64_t>({2}, {min64, -5})));
  EXPECT_TRUE(
      TensorsNear(RunOne("abs", {Floats({-3, 0, 2.5f, -kInff})}), Floats({3, 0, 2.5f, kInff})));
  EXPECT_TRUE(TensorsNear(RunOne("abs", {MakeTensor<int8_t>({3}, {-5, 5, -128})}),
                          MakeTensor<int8_t>({3}, {5, 5, -128})));
  EXPECT_TRUE(
      TensorsNear(RunOne("sign", {Floats({-3, 0, 2.5f, kNaNf})}), Floats({-1, 0, 1, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("sign", {MakeTensor<int16_t>({3}, {-5, 0, 9})}),
                          MakeTensor<int16_t>({3}, {-1, 0, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("sign", {MakeTensor<uint8_t>({3}, {0, 3, 255})}),
                          MakeTensor<uint8_t>({3}, {0, 1, 1})));
}

TEST(UnaryKernels, Not) {
  EXPECT_TRUE(TensorsNear(RunOne("not", {MakeTensor<bool>({2, 2}, {true, false, false, true})}),
                          MakeTensor<bool>({2, 2}, {false, true, true, false})));
}

TEST(UnaryKernels, HalfAndDoublePrecision) {
  Tensor h = Tensor::Empty(DType::kFloat16, {3});
  Tensor b = Tensor::Empty(DType::kBFloat16, {3});
  Tensor eh = Tensor::Empty(DType::kFloat16, {3});
  Tensor eb = Tensor::Empty(DType::kBFloat16, {3});
  for (int i = 0; i < 3; ++i) {
    h.SetFromDouble(i, i);
    b.SetFromDouble(i, i);
    eh.SetFromDouble(i, std::exp(i));
    eb.SetFromDouble(i, std::exp(i));
  }
  EXPECT_TRUE(TensorsNear(RunOne("exp", {h}), eh, 0, 0));  // both round exp(x) to nearest
  EXPECT_TRUE(TensorsNear(RunOne("exp", {b}), eb, 0, 0));
  Tensor d = RunOne("sqrt", {MakeTensor<double>({1}, {2.0})});
  EXPECT_EQ(d.data<double>()[0], std::sqrt(2.0));
}

TEST(UnaryKernels, SizeZeroAndScalar) {
  Tensor empty = RunOne("exp", {Tensor::Empty(DType::kFloat32, {0, 3})});
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(
      RunOne("cast", {Tensor::Empty(DType::kInt64, {2, 0})}, {{"dtype", DType::kBool}}).shape(),
      (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(TensorsNear(RunOne("neg", {Tensor::Scalar<float>(2)}), Tensor::Scalar<float>(-2)));
}

// Every float op on random data of odd sizes and size 1, against the C library in double.
TEST(UnaryKernels, RandomAgainstStraightforwardMath) {
  const std::map<std::string, std::function<double(double)>> expected = {
      {"neg", [](double x) { return -x; }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"reciprocal", [](double x) { return 1 / x; }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return std::exp(x) / (1 + std::exp(x)); }},
      {"relu", [](double x) { return std::max(x, 0.0); }},
      {"gelu", [](double x) { return x * 0.5 * std::erfc(-x / std::sqrt(2.0)); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"atan", [](double x) { return std::atan(x); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"ceil", [](double x) { return std::ceil(x); }},
      {"round", [](double x) { return std::nearbyint(x); }},  // default mode: half to even
      {"sign", [](double x) { return x > 0   ? 1.0
                                     : x < 0 ? -1.0
                                             : 0.0; }},
  };
  uint64_t seed = 1;
  for (const auto& [name, fn] : expected) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {7}, {3, 5}, {2, 3, 1}}) {
      bool positive = name == "log" || name == "sqrt" || name == "rsqrt";
      Tensor x = RandomTensor(DType::kFloat32, shape, seed++, positive ? 0.01 : -4, 4);
      Tensor want = Tensor::Empty(DType::kFloat32, shape);
      for (int64_t i = 0; i < x.numel(); ++i) want.SetFromDouble(i, fn(x.GetAsDouble(i)));
      EXPECT_TRUE(TensorsNear(RunOne(name, {x}), want, 1e-6, 1e-6)) << name;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// cast

TEST(Cast, TypeRelation) {
  Dim batch = Dim::Symbol("batch");
  EXPECT_EQ(Infer("cast", {TensorType({batch, 3}, DType::kFloat32)}, {{"dtype", DType::kInt64}}),
            "i64[batch, 3]");
  EXPECT_EQ(Infer("cast", {TensorType({}, DType::kBool)}, {{"dtype", DType::kFloat16}}), "f16[]");
}

TEST(Cast, FloatToIntTruncatesTowardZeroAndSaturates) {
  Tensor x = Floats({-2.7f, -0.5f, 0.5f, 2.7f, kNaNf, 1e10f, -1e10f, kInff});
  int32_t hi = std::numeric_limits<int32_t>::max(), lo = std::numeric_limits<int32_t>::min();
  EXPECT_TRUE(TensorsNear(RunOne("cast", {x}, {{"dtype", DType::kInt32}}),
                          MakeTensor<int32_t>({8}, {-2, 0, 0, 2, 0, hi, lo, hi})));
  EXPECT_TRUE(
      TensorsNear(RunOne("cast", {Floats({-1.5f, 0.9f, 254.9f, 300})}, {{"dtype", DType::kUInt8}}),
                  MakeTensor<uint8_t>({4}, {0, 0, 254, 255})));
  EXPECT_TRUE(TensorsNear(
      RunOne("cast", {MakeTensor<double>({2}, {1e19, -1e19})}, {{"dtype", DType::kInt64}}),
      MakeTensor<int64_t>(
          {2}, {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})));
}

TEST(Cast, BoolConversions) {
  EXPECT_TRUE(
      TensorsNear(RunOne("cast", {Floats({0, -0.0f, 0.1f, kNaNf, -3})}, {{"dtype", DType::kBool}}),
                  MakeTensor<bool>({5}, {false, false, true, true, true})));
  EXPECT_TRUE(TensorsNear(RunOne("cast", {MakeTensor<int64_t>({3}, {0, int64_t{1} << 40, -1})},
                                 {{"dtype", DType::kBool}}),
                          MakeTensor<bool>({3}, {false, true, true})));
  EXPECT_TRUE(TensorsNear(
      RunOne("cast", {MakeTensor<bool>({2}, {true, false})}, {{"dtype", DType::kFloat32}}),
      Floats({1, 0})));
  EXPECT_TRUE(TensorsNear(
      RunOne("cast", {MakeTensor<bool>({2}, {true, false})}, {{"dtype", DType::kInt64}}),
      MakeTensor<int64_t>({2}, {1, 0})));
}

TEST(Cast, IntegersKeepTheirValues) {
  int64_t big = (int64_t{1} << 53) + 1;  // not representable in double
  EXPECT_EQ(RunOne("cast", {MakeTensor<int64_t>({1}, {big})}, {{"dtype", DType::kInt64}})
                .data<int64_t>()[0],
            big);
  EXPECT_EQ(RunOne("cast", {MakeTensor<int32_t>({1}, {-7})}, {{"dtype", DType::kInt64}})
                .data<int64_t>()[0],
            -7);
  // Narrowing integer casts wrap modulo 2^n.
  EXPECT_TRUE(
      TensorsNear(RunOne("cast", {MakeTensor<int64_t>({3}, {(int64_t{1} << 32) + 5, 300, -1})},
                         {{"dtype", DType::kInt32}}),
                  MakeTensor<int32_t>({3}, {5, 300, -1})));
  EXPECT_TRUE(TensorsNear(
      RunOne("cast", {MakeTensor<int64_t>({3}, {300, -1, 128})}, {{"dtype", DType::kUInt8}}),
      MakeTensor<uint8_t>({3}, {44, 255, 128})));
  EXPECT_TRUE(TensorsNear(
      RunOne("cast", {MakeTensor<int64_t>({2}, {big, 3})}, {{"dtype", DType::kFloat64}}),
      MakeTensor<double>({2}, {9007199254740992.0, 3})));
}

TEST(Cast, FloatToFloat) {
  Tensor h = RunOne("cast", {Floats({1.0f / 3, 65504, 1e6f})}, {{"dtype", DType::kFloat16}});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(h.GetAsDouble(0), 0.333251953125);
  EXPECT_EQ(h.GetAsDouble(1), 65504);
  EXPECT_EQ(h.GetAsDouble(2), kInf);
  Tensor back = RunOne("cast", {h}, {{"dtype", DType::kFloat32}});
  EXPECT_EQ(back.data<float>()[0], 0.333251953125f);
  EXPECT_EQ(RunOne("cast", {MakeTensor<double>({1}, {0.1})}, {{"dtype", DType::kFloat32}})
                .data<float>()[0],
            0.1f);
}

// Small whole numbers survive every dtype-to-dtype conversion (bool: as nonzero).
TEST(Cast, EveryPairOfDTypes) {
  const DType all[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                       DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64,
                       DType::kUInt8,   DType::kBool};
  for (DType from : all) {
    Tensor x = Tensor::Empty(from, {5});
    for (int i = 0; i < 5; ++i) x.SetFromDouble(i, from == DType::kBool ? i % 2 : i * 3);
    for (DType to : all) {
      Tensor y = RunOne("cast", {x}, {{"dtype", to}});
      ASSERT_EQ(y.dtype(), to);
      for (int i = 0; i < 5; ++i) {
        double v = x.GetAsDouble(i);
        EXPECT_EQ(y.GetAsDouble(i), to == DType::kBool ? (v != 0) : v)
            << DTypeName(from) << " -> " << DTypeName(to) << " [" << i << "]";
      }
    }
  }
}

TEST(Cast, RandomFloatToInt) {
  Tensor x = RandomTensor(DType::kFloat32, {3, 7}, 42, -1000, 1000);
  Tensor y = RunOne("cast", {x}, {{"dtype", DType::kInt32}});
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(y.data<int32_t>()[i], static_cast<int32_t>(std::trunc(x.data<float>()[i])));
}

// ---------------------------------------------------------------------------------------------
// clip

TEST(Clip, Floats) {
  EXPECT_TRUE(TensorsNear(RunOne("clip", {Floats({-kInff, -1, 3, 7, kNaNf})}),
                          Floats({-kInff, -1, 3, 7, kNaNf})));  // defaults: no bounds
  EXPECT_TRUE(
      TensorsNear(RunOne("clip", {Floats({-1, 0, 3, 7, kNaNf})}, {{"min", 0.0}, {"max", 6.0}}),
                  Floats({0, 0, 3, 6, kNaNf})));
  EXPECT_TRUE(
      TensorsNear(RunOne("clip", {Floats({-1, 3, 7})}, {{"max", int64_t{2}}}), Floats({-1, 2, 2})));
  EXPECT_TRUE(
      TensorsNear(RunOne("clip", {Floats({-1, 3})}, {{"min", 2.0}, {"max", 2.0}}), Floats({2, 2})));
}

TEST(Clip, IntegersUseTheIntegersInsideTheRange) {
  EXPECT_TRUE(TensorsNear(
      RunOne("clip", {MakeTensor<int32_t>({5}, {-5, -1, 0, 2, 9})}, {{"min", -1.5}, {"max", 2.5}}),
      MakeTensor<int32_t>({5}, {-1, -1, 0, 2, 2})));
  EXPECT_TRUE(TensorsNear(
      RunOne("clip", {MakeTensor<uint8_t>({3}, {0, 100, 255})}, {{"min", -5.0}, {"max", 1000.0}}),
      MakeTensor<uint8_t>({3}, {0, 100, 255})));
  int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(RunOne("clip", {MakeTensor<int64_t>({1}, {big})}).data<int64_t>()[0], big);
}

TEST(Clip, RandomAgainstMinMax) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1}, {9}, {4, 3}}) {
    Tensor x = RandomTensor(DType::kFloat32, shape, 7, -3, 3);
    Tensor want = Tensor::Empty(DType::kFloat32, shape);
    for (int64_t i = 0; i < x.numel(); ++i)
      want.SetFromDouble(i, std::min(1.25, std::max(-0.5, x.GetAsDouble(i))));
    EXPECT_TRUE(TensorsNear(RunOne("clip", {x}, {{"min", -0.5}, {"max", 1.25}}), want, 0, 0));
  }
}

// ---------------------------------------------------------------------------------------------
// Activations with parameters, tan and the hyperbolic functions, isnan/isinf.

const std::vector<std::string> kComposed = {
    "leaky_relu", "elu",          "selu",       "celu",  "softplus",
    "softsign",   "hard_sigmoid", "hard_swish", "mish",  "thresholded_relu",
    "tan",        "sinh",         "cosh",       "asinh", "acosh",
    "atanh"};

TEST(UnaryOps, ComposedFunctionsAreFloatOnlyElementwise) {
  for (const std::string& n : kComposed) {
    const OpDef* op = OpRegistry::Global().Find(n);
    ASSERT_NE(op, nullptr) << n;
    EXPECT_EQ(op->pattern, OpPattern::kElementwise) << n;
    EXPECT_EQ(Infer(n, {TensorType({Dim::Symbol("n"), 3}, DType::kFloat16)}), "f16[n, 3]") << n;
    EXPECT_THAT(test::InferError(n, {TensorType({2}, DType::kInt32)}),
                HasSubstr("input must be a float dtype (f32, f16, bf16, f64), got i32"))
        << n;
  }
  for (const char* n : {"isnan", "isinf"}) {
    EXPECT_EQ(Infer(n, {TensorType({2, 3}, DType::kFloat64)}), "bool[2, 3]") << n;
    EXPECT_THAT(test::InferError(n, {TensorType({2}, DType::kInt8)}),
                HasSubstr("input must be a float dtype (f32, f16, bf16, f64), got i8"));
  }
}

TEST(UnaryOps, ComposedFunctionAttributes) {
  Type t = TensorType({2}, DType::kFloat32);
  EXPECT_THAT(test::InferError("celu", {t}, {{"alpha", 0.0}}), HasSubstr("must not be 0"));
  EXPECT_THAT(test::InferError("elu", {t}, {{"alpha", kNaN}}), HasSubstr("must not be NaN"));
  EXPECT_THAT(test::InferError("softplus", {t}, {{"alpha", 1.0}}),
              HasSubstr("has no attribute 'alpha'"));
  EXPECT_THAT(test::InferError("isinf", {t}, {{"detect_positive", 1.5}}),
              HasSubstr("attribute 'detect_positive' must be bool"));
}

TEST(UnaryKernels, ParameterizedActivations) {
  Tensor x = Floats({-2, -0.5f, 0, 0.5f, 3, kNaNf});
  EXPECT_TRUE(TensorsNear(RunOne("leaky_relu", {x}), Floats({-0.02f, -0.005f, 0, 0.5f, 3, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("leaky_relu", {x}, {{"alpha", 0.5}}),
                          Floats({-1, -0.25f, 0, 0.5f, 3, kNaNf})));
  EXPECT_TRUE(
      TensorsNear(RunOne("elu", {x}), Floats({-0.86466472f, -0.39346934f, 0, 0.5f, 3, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("selu", {x}), Floats({-1.52016647f, -0.69175819f, 0, 0.52535051f,
                                                       3.15210307f, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("celu", {x}, {{"alpha", 2.0}}),
                          Floats({-1.26424112f, -0.44239843f, 0, 0.5f, 3, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("softplus", {Floats({-2, 0, 3, 1000, -1000})}),
                          Floats({0.12692801f, 0.69314718f, 3.04858735f, 1000, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("softsign", {x}),
                          Floats({-0.66666667f, -0.33333333f, 0, 0.33333333f, 0.75f, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("hard_sigmoid", {x}), Floats({0.1f, 0.4f, 0.5f, 0.6f, 1, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("hard_swish", {x}),
                          Floats({-0.33333333f, -0.20833333f, 0, 0.29166667f, 3, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("mish", {x}), Floats({-0.25250148f, -0.22074377f, 0, 0.37524521f,
                                                       2.98653500f, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("thresholded_relu", {x}), Floats({0, 0, 0, 0, 3, 0})));
}

TEST(UnaryKernels, TanAndHyperbolic) {
  EXPECT_TRUE(
      TensorsNear(RunOne("tan", {Floats({0, 0.5f, -1})}), Floats({0, 0.54630249f, -1.55740772f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("sinh", {Floats({0, 1, -2})}), Floats({0, 1.17520119f, -3.62686041f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("cosh", {Floats({0, 1, -2})}), Floats({1, 1.54308063f, 3.76219569f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("asinh", {Floats({0, 1, -2})}), Floats({0, 0.88137359f, -1.44363548f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("acosh", {Floats({1, 2, 0.5f})}), Floats({0, 1.31695790f, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("atanh", {Floats({0, 0.5f, 1, -1, 2})}),
                          Floats({0, 0.54930614f, kInff, -kInff, kNaNf})));
}

TEST(UnaryKernels, IsNaNIsInf) {
  Tensor x = Floats({1, kNaNf, kInff, -kInff, 0});
  EXPECT_TRUE(
      TensorsNear(RunOne("isnan", {x}), MakeTensor<bool>({5}, {false, true, false, false, false})));
  EXPECT_TRUE(
      TensorsNear(RunOne("isinf", {x}), MakeTensor<bool>({5}, {false, false, true, true, false})));
  EXPECT_TRUE(TensorsNear(RunOne("isinf", {x}, {{"detect_negative", false}}),
                          MakeTensor<bool>({5}, {false, false, true, false, false})));
  EXPECT_TRUE(TensorsNear(RunOne("isinf", {x}, {{"detect_positive", false}}),
                          MakeTensor<bool>({5}, {false, false, false, true, false})));
}

}  // namespace
}  // namespace kiln
