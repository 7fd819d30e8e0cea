// Type relations and reference kernels of the broadcasting binary ops and `where`
// (ir/ops/binary.cc).
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
using test::F32;
using test::Floats;
using test::Infer;
using test::MakeTensor;
using test::RandomTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kInff = std::numeric_limits<float>::infinity();

const std::vector<std::string> kArithmetic = {"add", "sub",     "mul",     "div",
                                              "pow", "maximum", "minimum", "mod"};
const std::vector<std::string> kComparisons = {"equal",      "not_equal", "less",
                                               "less_equal", "greater",   "greater_equal"};
const std::vector<std::string> kLogic = {"and", "or", "xor"};

Tensor I32(const std::vector<int32_t>& v) {
  return MakeTensor<int32_t>({static_cast<int64_t>(v.size())}, v);
}
Tensor Bools(const std::vector<int64_t>& shape, const std::vector<bool>& v) {
  Tensor t = Tensor::Empty(DType::kBool, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

// ---------------------------------------------------------------------------------------------
// Registration and type relations.

TEST(BinaryOps, AllRegisteredAsBroadcast) {
  std::vector<std::string> names = kArithmetic;
  names.insert(names.end(), kComparisons.begin(), kComparisons.end());
  names.insert(names.end(), kLogic.begin(), kLogic.end());
  for (const std::string& n : names) {
    const OpDef* op = OpRegistry::Global().Find(n);
    ASSERT_NE(op, nullptr) << n;
    EXPECT_EQ(op->pattern, OpPattern::kBroadcast) << n;
    EXPECT_EQ(op->min_inputs, 2) << n;
    EXPECT_EQ(op->max_inputs, 2) << n;
  }
  const OpDef& where = OpRegistry::Global().Get("where");
  EXPECT_EQ(where.pattern, OpPattern::kBroadcast);
  EXPECT_EQ(where.min_inputs, 3);
  EXPECT_EQ(where.max_inputs, 3);
}

TEST(BinaryOps, BroadcastsConcreteShapes) {
  for (const std::string& n : kArithmetic) {
    EXPECT_EQ(Infer(n, {F32({2, 3}), F32({2, 3})}), "f32[2, 3]") << n;
    EXPECT_EQ(Infer(n, {F32({2, 1}), F32({1, 3})}), "f32[2, 3]") << n;
    EXPECT_EQ(Infer(n, {F32({4, 1, 5}), F32({3, 1})}), "f32[4, 3, 5]") << n;
    EXPECT_EQ(Infer(n, {F32({}), F32({2, 3})}), "f32[2, 3]") << n;
    EXPECT_EQ(Infer(n, {F32({0, 3}), F32({1, 3})}), "f32[0, 3]") << n;
  }
  for (const std::string& n : kComparisons)
    EXPECT_EQ(Infer(n, {F32({2, 1}), F32({3})}), "bool[2, 3]") << n;
  for (const std::string& n : kLogic) {
    EXPECT_EQ(Infer(n, {TensorType({2, 1}, DType::kBool), TensorType({3}, DType::kBool)}),
              "bool[2, 3]")
        << n;
  }
}

TEST(BinaryOps, BroadcastsSymbolicShapes) {
  Dim batch = S("batch"), seq = S("seq");
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("add", {F32({batch, 1}), F32({1, 10})}, {}, &constraints), "f32[batch, 10]");
  EXPECT_EQ(Infer("mul", {F32({batch, 3}), F32({3})}, {}, &constraints), "f32[batch, 3]");
  EXPECT_EQ(Infer("less", {F32({batch, seq * 2}), F32({seq * 2})}, {}, &constraints),
            "bool[batch, seq * 2]");
  EXPECT_TRUE(constraints.empty());
  // Undecidable until bound: the result assumes a valid binding and a constraint is recorded.
  EXPECT_EQ(Infer("sub", {F32({batch}), F32({seq})}, {}, &constraints), "f32[max(batch, seq)]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_EQ(constraints[0].kind, DimConstraint::Kind::kBroadcast);
  constraints.clear();
  EXPECT_EQ(Infer("sub", {F32({batch, 4}), F32({seq, 4})}, {}, &constraints),
            "f32[max(batch, seq), 4]");
  EXPECT_EQ(constraints.size(), 1u);
}

TEST(BinaryOps, IncompatibleShapesNameBothShapes) {
  for (const std::string& n : kArithmetic) {
    std::string msg = ErrorMessage([&] { InferOpType(n, {F32({2, 3}), F32({4})}); });
    EXPECT_THAT(msg, HasSubstr(n + ": cannot broadcast [2, 3] and [4]")) << n;
  }
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("equal", {F32({S("batch"), 3}), F32({2})});
              }),
              HasSubstr("cannot broadcast [batch, 3] and [2]: 3 vs 2"));
}

TEST(BinaryOps, DTypeMismatchNamesBothDTypes) {
  std::string msg = ErrorMessage([] {
    InferOpType("add", {F32({S("batch")}), TensorType({S("batch")}, DType::kInt32)});
  });
  EXPECT_THAT(msg, HasSubstr("add: input dtypes differ: f32 vs i32"));
  EXPECT_THAT(msg, HasSubstr("f32[batch] and i32[batch]"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("less", {TensorType({2}, DType::kFloat16), F32({2})});
              }),
              HasSubstr("f16 vs f32"));
}

TEST(BinaryOps, RejectsDTypesOutsideTheirClass) {
  Type b = TensorType({2}, DType::kBool);
  for (const std::string& n : kArithmetic)
    EXPECT_THAT(ErrorMessage([&] {
                  InferOpType(n, {b, b});
                }),
                HasSubstr(n + ": input must be a numeric (non-bool) dtype, got bool"))
        << n;
  for (const std::string& n : kLogic)
    EXPECT_THAT(ErrorMessage([&] {
                  InferOpType(n, {F32({2}), F32({2})});
                }),
                HasSubstr(n + ": input must be bool, got f32"))
        << n;
  // Comparisons accept every dtype, bool and u8 included.
  EXPECT_EQ(Infer("equal", {b, b}), "bool[2]");
  EXPECT_EQ(Infer("less", {TensorType({2}, DType::kUInt8), TensorType({2}, DType::kUInt8)}),
            "bool[2]");
  EXPECT_EQ(Infer("add", {TensorType({2}, DType::kUInt8), TensorType({2}, DType::kUInt8)}),
            "u8[2]");
}

TEST(BinaryOps, InputCountAndAttributes) {
  Type t = F32({2});
  EXPECT_THAT(ErrorMessage([&] { InferOpType("add", {t}); }),
              HasSubstr("add: expects 2 inputs, got 1"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("where", {t, t});
              }),
              HasSubstr("where: expects 3 inputs, got 2"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("add", {t, t}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("op 'add' has no attribute 'axis'"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("mod", {t, t}, {{"fmod", 1.5}});
              }),
              HasSubstr("attribute 'fmod' must be int, got float"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("mod", {t, t}, {{"fmod", int64_t{2}}});
              }),
              HasSubstr("attribute 'fmod' = 2: must be 0 or 1"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("mod", {t, t}, {{"fmode", int64_t{1}}});
              }),
              HasSubstr("no attribute 'fmode' (known: fmod)"));
}

TEST(Where, TypeRelation) {
  Type cond = TensorType({S("batch"), 1}, DType::kBool);
  EXPECT_EQ(Infer("where", {cond, F32({1, 4}), F32({4})}), "f32[batch, 4]");
  EXPECT_EQ(Infer("where", {TensorType({}, DType::kBool), TensorType({3}, DType::kInt64),
                            TensorType({2, 1}, DType::kInt64)}),
            "i64[2, 3]");
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("where", {F32({2}), F32({2}), F32({2})});
              }),
              HasSubstr("where: condition must be bool, got f32"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("where", {cond, F32({4}), TensorType({4}, DType::kInt32)});
              }),
              HasSubstr("x and y dtypes differ: f32 vs i32"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("where", {cond, F32({4}), F32({3})});
              }),
              HasSubstr("cannot broadcast [batch, 4] and [3]"));
}

// ---------------------------------------------------------------------------------------------
// Reference kernels against hand-computed values.

TEST(BinaryKernels, ArithmeticWithBroadcasting) {
  Tensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = Floats({3}, {10, 20, 30});
  EXPECT_TRUE(TensorsNear(RunOne("add", {a, row}), Floats({2, 3}, {11, 22, 33, 14, 25, 36})));
  EXPECT_TRUE(TensorsNear(RunOne("sub", {row, a}), Floats({2, 3}, {9, 18, 27, 6, 15, 24})));
  EXPECT_TRUE(TensorsNear(RunOne("mul", {a, Floats({2, 1}, {2, -1})}),
                          Floats({2, 3}, {2, 4, 6, -4, -5, -6})));
  EXPECT_TRUE(TensorsNear(RunOne("div", {a, Floats({}, {4})}),
                          Floats({2, 3}, {0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f})));
  // An outer product shape: [2, 1] x [1, 3].
  EXPECT_TRUE(TensorsNear(RunOne("add", {Floats({2, 1}, {0, 100}), Floats({1, 3}, {1, 2, 3})}),
                          Floats({2, 3}, {1, 2, 3, 101, 102, 103})));
  // Size 1 against size 1, and an odd size.
  EXPECT_TRUE(TensorsNear(RunOne("mul", {Floats({1}, {3}), Floats({1}, {-2})}), Floats({1}, {-6})));
  EXPECT_TRUE(TensorsNear(RunOne("sub", {Floats({5}, {5, 4, 3, 2, 1}), Floats({1}, {1})}),
                          Floats({5}, {4, 3, 2, 1, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("div", {Floats({3}, {1, -1, 0}), Floats({3}, {0, 0, 0})}),
                          Floats({3}, {kInff, -kInff, kNaNf})));
}

TEST(BinaryKernels, SizeZeroBroadcast) {
  Tensor out = RunOne("add", {Tensor::Empty(DType::kFloat32, {0, 3}), Floats({1, 3}, {1, 2, 3})});
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{0, 3}));
  Tensor cmp =
      RunOne("less", {Tensor::Empty(DType::kInt32, {2, 0}), Tensor::Empty(DType::kInt32, {1})});
  EXPECT_EQ(cmp.shape(), (std::vector<int64_t>{2, 0}));
}

TEST(BinaryKernels, IntegerArithmeticWraps) {
  int32_t max = std::numeric_limits<int32_t>::max(), min = std::numeric_limits<int32_t>::min();
  EXPECT_TRUE(TensorsNear(RunOne("add", {I32({max, -5}), I32({1, 3})}), I32({min, -2})));
  EXPECT_TRUE(TensorsNear(RunOne("sub", {I32({min, 5}), I32({1, 7})}), I32({max, -2})));
  EXPECT_TRUE(TensorsNear(RunOne("mul", {I32({65536, -3}), I32({65536, 7})}), I32({0, -21})));
  EXPECT_TRUE(TensorsNear(
      RunOne("add", {MakeTensor<uint8_t>({2}, {250, 1}), MakeTensor<uint8_t>({2}, {10, 2})}),
      MakeTensor<uint8_t>({2}, {4, 3})));
  int64_t max64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(RunOne("add", {MakeTensor<int64_t>({1}, {max64}), MakeTensor<int64_t>({1}, {1})})
                .data<int64_t>()[0],
            std::numeric_limits<int64_t>::min());
}

TEST(BinaryKernels, IntegerDivisionTruncatesAndDivisionByZeroIsZero) {
  int32_t min = std::numeric_limits<int32_t>::min();
  EXPECT_TRUE(TensorsNear(
      RunOne("div", {I32({7, -7, 7, -7, 5, 0, min, min}), I32({2, 2, -2, -2, 0, 0, -1, 1})}),
      I32({3, -3, -3, 3, 0, 0, min, min})));
  int64_t min64 = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(TensorsNear(RunOne("div", {MakeTensor<int64_t>({3}, {min64, 9, 9}),
                                         MakeTensor<int64_t>({3}, {-1, 0, 4})}),
                          MakeTensor<int64_t>({3}, {min64, 0, 2})));
  EXPECT_TRUE(TensorsNear(
      RunOne("div", {MakeTensor<uint8_t>({2}, {200, 7}), MakeTensor<uint8_t>({2}, {3, 0})}),
      MakeTensor<uint8_t>({2}, {66, 0})));
}

TEST(BinaryKernels, Pow) {
  EXPECT_TRUE(
      TensorsNear(RunOne("pow", {Floats({4}, {2, 4, 9, -2}), Floats({4}, {3, 0.5f, -0.5f, 2})}),
                  Floats({4}, {8, 2, 1.0f / 3, 4})));
  EXPECT_TRUE(TensorsNear(RunOne("pow", {Floats({1}, {-8}), Floats({1}, {1.0f / 3})}),
                          Floats({1}, {kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("pow", {I32({2, 3, -2, 2, 1, -1, -1, 0, 0, 7}),
                                         I32({10, 0, 3, -1, -5, -3, -4, 0, -2, 1})}),
                          I32({1024, 1, -8, 0, 1, -1, 1, 1, 0, 7})));
  EXPECT_TRUE(TensorsNear(RunOne("pow", {I32({2}), I32({31})}),
                          I32({std::numeric_limits<int32_t>::min()})));
}

TEST(BinaryKernels, MaximumMinimumPropagateNaN) {
  Tensor a = Floats({4}, {1, 5, kNaNf, -kInff});
  Tensor b = Floats({4}, {3, 2, 0, kNaNf});
  EXPECT_TRUE(TensorsNear(RunOne("maximum", {a, b}), Floats({4}, {3, 5, kNaNf, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("minimum", {a, b}), Floats({4}, {1, 2, kNaNf, kNaNf})));
  EXPECT_TRUE(TensorsNear(
      RunOne("maximum", {MakeTensor<int8_t>({2, 1}, {-128, 5}), MakeTensor<int8_t>({2}, {0, 9})}),
      MakeTensor<int8_t>({2, 2}, {0, 9, 5, 9})));
  EXPECT_TRUE(TensorsNear(
      RunOne("minimum", {MakeTensor<int8_t>({2, 1}, {-128, 5}), MakeTensor<int8_t>({2}, {0, 9})}),
      MakeTensor<int8_t>({2, 2}, {-128, -128, 0, 5})));
}

TEST(BinaryKernels, Mod) {
  Tensor a = I32({5, -5, 5, -5, 3, 0, 7, std::numeric_limits<int32_t>::min()});
  Tensor b = I32({3, 3, -3, -3, 0, 4, 7, -1});
  // fmod=0 (default): the sign of the divisor, as Python.
  EXPECT_TRUE(TensorsNear(RunOne("mod", {a, b}), I32({2, 1, -1, -2, 0, 0, 0, 0})));
  // fmod=1: the sign of the dividend, as C.
  EXPECT_TRUE(
      TensorsNear(RunOne("mod", {a, b}, {{"fmod", int64_t{1}}}), I32({2, -2, 2, -2, 0, 0, 0, 0})));
  Tensor fa = Floats({4}, {5.5f, -5.5f, 5.5f, 1});
  Tensor fb = Floats({4}, {2, 2, -2, 0});
  EXPECT_TRUE(TensorsNear(RunOne("mod", {fa, fb}), Floats({4}, {1.5f, 0.5f, -0.5f, kNaNf})));
  EXPECT_TRUE(TensorsNear(RunOne("mod", {fa, fb}, {{"fmod", int64_t{1}}}),
                          Floats({4}, {1.5f, -1.5f, 1.5f, kNaNf})));
  EXPECT_TRUE(TensorsNear(
      RunOne("mod", {MakeTensor<uint8_t>({3}, {200, 7, 9}), MakeTensor<uint8_t>({1}, {7})}),
      MakeTensor<uint8_t>({3}, {4, 0, 2})));
}

TEST(BinaryKernels, Comparisons) {
  Tensor a = Floats({4}, {1, 2, 3, kNaNf});
  Tensor b = Floats({4}, {2, 2, 2, kNaNf});
  EXPECT_TRUE(TensorsNear(RunOne("equal", {a, b}), Bools({4}, {0, 1, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("not_equal", {a, b}), Bools({4}, {1, 0, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("less", {a, b}), Bools({4}, {1, 0, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("less_equal", {a, b}), Bools({4}, {1, 1, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("greater", {a, b}), Bools({4}, {0, 0, 1, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("greater_equal", {a, b}), Bools({4}, {0, 1, 1, 0})));
  // Broadcast against a scalar, and integer and bool inputs.
  EXPECT_TRUE(TensorsNear(
      RunOne("greater", {MakeTensor<int64_t>({2, 2}, {-1, 0, 1, 2}), MakeTensor<int64_t>({}, {0})}),
      Bools({2, 2}, {0, 0, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("less", {Bools({2}, {0, 1}), Bools({2, 1}, {0, 1})}),
                          Bools({2, 2}, {0, 0, 1, 0})));
  int64_t big = int64_t{1} << 60;
  EXPECT_TRUE(TensorsNear(
      RunOne("equal", {MakeTensor<int64_t>({1}, {big}), MakeTensor<int64_t>({1}, {big + 1})}),
      Bools({1}, {0})));
}

TEST(BinaryKernels, Logic) {
  Tensor a = Bools({2, 1}, {0, 1});
  Tensor b = Bools({2}, {0, 1});
  EXPECT_TRUE(TensorsNear(RunOne("and", {a, b}), Bools({2, 2}, {0, 0, 0, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("or", {a, b}), Bools({2, 2}, {0, 1, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("xor", {a, b}), Bools({2, 2}, {0, 1, 1, 0})));
}

TEST(BinaryKernels, HalfPrecision) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    Tensor a = Tensor::Empty(dt, {3}), b = Tensor::Empty(dt, {3}), want = Tensor::Empty(dt, {3});
    const double av[] = {1.5, -2, 0.25}, bv[] = {2, 3, 0.5}, sums[] = {3.5, 1, 0.75};
    for (int i = 0; i < 3; ++i) {
      a.SetFromDouble(i, av[i]);
      b.SetFromDouble(i, bv[i]);
      want.SetFromDouble(i, sums[i]);
    }
    EXPECT_TRUE(TensorsNear(RunOne("add", {a, b}), want, 0, 0)) << DTypeName(dt);
    EXPECT_TRUE(TensorsNear(RunOne("less", {a, b}), Bools({3}, {1, 1, 1}))) << DTypeName(dt);
  }
}

TEST(Where, Kernel) {
  Tensor cond = Bools({2, 1}, {1, 0});
  Tensor x = Floats({1, 3}, {1, 2, 3});
  Tensor y = Floats({}, {-1});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("where", {cond, x, y})[0], Floats({2, 3}, {1, 2, 3, -1, -1, -1})));
  Tensor c3 = Bools({3}, {1, 0, 1});
  Tensor xi = MakeTensor<int64_t>({2, 1}, {int64_t{1} << 60, 7});
  Tensor yi = MakeTensor<int64_t>({3}, {-1, -2, -3});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("where", {c3, xi, yi})[0],
                  MakeTensor<int64_t>({2, 3}, {int64_t{1} << 60, -2, int64_t{1} << 60, 7, -2, 7})));
  EXPECT_TRUE(
      TensorsNear(RunOpReference("where", {Bools({1}, {1}), Bools({1}, {0}), Bools({1}, {1})})[0],
                  Bools({1}, {0})));
}

// ---------------------------------------------------------------------------------------------
// Random inputs against a straightforward nested-loop computation.

// out[i][j][k] = fn(a[i][0][k], b[j][0]) for a: [I, 1, K], b: [J, 1] -> [I, J, K].
Tensor ExpectedBroadcast(const Tensor& a, const Tensor& b, DType out_dtype,
                         const std::function<double(double, double)>& fn) {
  int64_t I = a.shape()[0], K = a.shape()[2], J = b.shape()[0];
  Tensor out = Tensor::Empty(out_dtype, {I, J, K});
  for (int64_t i = 0; i < I; ++i)
    for (int64_t j = 0; j < J; ++j)
      for (int64_t k = 0; k < K; ++k)
        out.SetFromDouble((i * J + j) * K + k, fn(a.GetAsDouble(i * K + k), b.GetAsDouble(j)));
  return out;
}

TEST(BinaryKernels, RandomFloatsAgainstLoops) {
  const std::map<std::string, std::function<double(double, double)>> ops = {
      {"add", [](double x, double y) { return x + y; }},
      {"sub", [](double x, double y) { return x - y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"div", [](double x, double y) { return x / y; }},
      {"pow", [](double x, double y) { return std::exp(y * std::log(x)); }},
      {"maximum", [](double x, double y) { return x > y ? x : y; }},
      {"minimum", [](double x, double y) { return x < y ? x : y; }},
      {"mod", [](double x, double y) { return x - y * std::floor(x / y); }},
  };
  uint64_t seed = 3;
  for (const auto& [name, fn] : ops) {
    for (auto [I, J, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 4, 5}, {2, 7, 1}}) {
      // Positive operands keep pow real and mod away from zero divisors.
      Tensor a = RandomTensor(DType::kFloat32, {I, 1, K}, seed++, 0.5, 4);
      Tensor b = RandomTensor(DType::kFloat32, {J, 1}, seed++, 0.5, 4);
      EXPECT_TRUE(TensorsNear(RunOne(name, {a, b}), ExpectedBroadcast(a, b, DType::kFloat32, fn),
                              1e-5, 1e-5))
          << name << " " << I << "x" << J << "x" << K;
    }
  }
}

TEST(BinaryKernels, RandomIntegersAndComparisonsAgainstLoops) {
  auto python_mod = [](double x, double y) {
    if (y == 0) return 0.0;
    double r = std::fmod(x, y);
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
  };
  const std::map<std::string, std::function<double(double, double)>> int_ops = {
      {"add", [](double x, double y) { return x + y; }},
      {"mul", [](double x, double y) { return x * y; }},
      {"div", [](double x, double y) { return y == 0 ? 0 : std::trunc(x / y); }},
      {"mod", python_mod},
  };
  const std::map<std::string, std::function<double(double, double)>> cmp_ops = {
      {"equal", [](double x, double y) { return x == y; }},
      {"less", [](double x, double y) { return x < y; }},
      {"greater_equal", [](double x, double y) { return x >= y; }},
  };
  Tensor a = RandomTensor(DType::kInt32, {3, 1, 5}, 11, -20, 20);
  Tensor b = RandomTensor(DType::kInt32, {4, 1}, 12, -5, 5);
  for (const auto& [name, fn] : int_ops)
    EXPECT_TRUE(TensorsNear(RunOne(name, {a, b}), ExpectedBroadcast(a, b, DType::kInt32, fn), 0, 0))
        << name;
  for (const auto& [name, fn] : cmp_ops)
    EXPECT_TRUE(TensorsNear(RunOne(name, {a, b}), ExpectedBroadcast(a, b, DType::kBool, fn), 0, 0))
        << name;
}

TEST(Where, RandomAgainstLoops) {
  Tensor cond = RandomTensor(DType::kBool, {3, 1, 5}, 21);
  Tensor x = RandomTensor(DType::kFloat32, {4, 1}, 22);
  Tensor y = RandomTensor(DType::kFloat32, {5}, 23);
  Tensor out = RunOpReference("where", {cond, x, y})[0];
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{3, 4, 5}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 5; ++k) {
        double want = cond.GetAsDouble(i * 5 + k) != 0 ? x.GetAsDouble(j) : y.GetAsDouble(k);
        EXPECT_EQ(out.GetAsDouble((i * 4 + j) * 5 + k), want);
      }
}

TEST(BinaryKernels, PRelu) {
  Tensor x = test::Floats({2, 3}, {-1, 2, -3, 4, -5, std::nanf("")});
  Tensor slope = test::Floats({3}, {0.1f, 0.2f, 0.3f});
  EXPECT_TRUE(test::TensorsNear(RunOpReference("prelu", {x, slope}).at(0),
                                test::Floats({2, 3}, {-0.1f, 2, -0.9f, 4, -1, std::nanf("")})));
  EXPECT_TRUE(test::TensorsNear(
      RunOpReference("prelu",
                     {test::MakeTensor<int8_t>({2}, {-100, 5}), test::MakeTensor<int8_t>({}, {3})})
          .at(0),
      test::MakeTensor<int8_t>({2}, {static_cast<int8_t>(-300), 5})));  // wraps
  EXPECT_THAT(
      test::InferError("prelu", {TensorType({2}, DType::kUInt8), TensorType({2}, DType::kUInt8)}),
      ::testing::HasSubstr("must be a float or signed integer dtype"));
}

TEST(BinaryKernels, ShiftsOfUnsignedIntegers) {
  Tensor a = MakeTensor<uint32_t>({5}, {1, 0x80000001u, 7, 7, 0xffffffffu});
  Tensor b = MakeTensor<uint32_t>({5}, {3, 1, 0, 32, 31});
  Tensor left = RunOne("shift_left", {a, b});
  Tensor right = RunOne("shift_right", {a, b});
  EXPECT_TRUE(TensorsNear(left, MakeTensor<uint32_t>({5}, {8, 2, 7, 0, 0x80000000u}), 0, 0));
  EXPECT_TRUE(TensorsNear(right, MakeTensor<uint32_t>({5}, {0, 0x40000000u, 7, 0, 1}), 0, 0));
  // Only unsigned integers shift.
  EXPECT_THAT(
      ErrorMessage([] {
        InferOpType("shift_left", {TensorType({2}, DType::kInt32), TensorType({2}, DType::kInt32)});
      }),
      HasSubstr("must be an unsigned integer dtype"));
}

}  // namespace
}  // namespace kiln
