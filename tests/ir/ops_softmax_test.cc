#include <gmock/gmock.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::MakeTensor;
using test::RunOne;
using test::TensorsNear;
using ::testing::HasSubstr;

Attrs Axis(int64_t a) {
  return {{"axis", a}};
}

// softmax or log_softmax along `axis` of a rank-3 tensor, straight from the definition, in
// double and without the max shift (the test inputs are small enough not to overflow).
Tensor Naive(const Tensor& x, int axis, bool log) {
  std::vector<int64_t> s = x.shape();
  Tensor y = Tensor::Empty(DType::kFloat64, s);
  auto at = [&](int64_t i, int64_t j, int64_t k) { return (i * s[1] + j) * s[2] + k; };
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      for (int64_t k = 0; k < s[2]; ++k) {
        int64_t pos[3] = {i, j, k};
        double denom = 0;
        for (int64_t t = 0; t < s[axis]; ++t) {
          int64_t p[3] = {i, j, k};
          p[axis] = t;
          denom += std::exp(x.GetAsDouble(at(p[0], p[1], p[2])));
        }
        double v = x.GetAsDouble(at(pos[0], pos[1], pos[2]));
        y.SetFromDouble(at(i, j, k), log ? v - std::log(denom) : std::exp(v) / denom);
      }
  return y;
}

Tensor ToF32(const Tensor& t) {
  Tensor out = Tensor::Empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.SetFromDouble(i, t.GetAsDouble(i));
  return out;
}

// ---- type relations ----

TEST(Softmax, KeepsTheType) {
  EXPECT_EQ(Infer("softmax", {F32({2, 10})}), "f32[2, 10]");
  EXPECT_EQ(Infer("log_softmax", {F32({2, 3, 4})}, Axis(1)), "f32[2, 3, 4]");
  EXPECT_EQ(Infer("softmax", {TensorType({7}, DType::kFloat16)}, Axis(-1)), "f16[7]");
  EXPECT_EQ(Infer("softmax", {F32({})}), "f32[]");
  EXPECT_EQ(OpRegistry::Global().Get("softmax").pattern, OpPattern::kReduction);
  EXPECT_EQ(OpRegistry::Global().Get("log_softmax").pattern, OpPattern::kReduction);
}

TEST(Softmax, SymbolicShapes) {
  EXPECT_EQ(Infer("softmax", {F32({Dim::Symbol("batch"), 10})}), "f32[batch, 10]");
  EXPECT_EQ(Infer("log_softmax", {F32({Dim::Symbol("batch"), Dim::Symbol("seq") * 2})}, Axis(0)),
            "f32[batch, seq * 2]");
}

TEST(Softmax, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("softmax", {TensorType({2, 3}, DType::kInt32)});
              }),
              HasSubstr("softmax: expects a float tensor, got i32[2, 3]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("log_softmax", {F32({2, 3})}, Axis(2));
              }),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("softmax", {F32({2, 3})}, Axis(-3));
              }),
              HasSubstr("axis -3 is out of range for rank 2"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("softmax", {F32({2})}, {{"axes", int64_t{0}}});
              }),
              HasSubstr("op 'softmax' has no attribute 'axes'"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("softmax", {F32({2})}, {{"axis", std::string("x")}});
              }),
              HasSubstr("attribute 'axis' must be int"));
}

// ---- reference kernels ----

TEST(SoftmaxKernel, HandComputed) {
  // e^0, e^1, e^2 over their sum 1 + e + e^2 = 11.107337...
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  Tensor x = MakeTensor<float>({1, 3}, {0, 1, 2});
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {x}),
                          MakeTensor<float>({1, 3}, {float(1 / z), float(std::exp(1.0) / z),
                                                     float(std::exp(2.0) / z)})));
  EXPECT_TRUE(TensorsNear(RunOne("log_softmax", {x}),
                          MakeTensor<float>({1, 3}, {float(-std::log(z)), float(1 - std::log(z)),
                                                     float(2 - std::log(z))})));
  // Along axis 0, each column of two equal values splits evenly.
  Tensor y = MakeTensor<float>({2, 3}, {5, -1, 0, 5, -1, 0});
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {y}, Axis(0)),
                          MakeTensor<float>({2, 3}, {.5f, .5f, .5f, .5f, .5f, .5f})));
}

TEST(SoftmaxKernel, SizeOneAxisAndScalar) {
  Tensor x = MakeTensor<float>({3, 1}, {-7, 0, 100});
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {x}), MakeTensor<float>({3, 1}, {1, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("log_softmax", {x}), MakeTensor<float>({3, 1}, {0, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {Tensor::Scalar<float>(3)}), Tensor::Scalar<float>(1)));
  EXPECT_EQ(RunOne("softmax", {Tensor::Empty(DType::kFloat32, {0, 4})}).numel(), 0);
  EXPECT_EQ(RunOne("softmax", {Tensor::Empty(DType::kFloat32, {4, 0})}).numel(), 0);
}

// An empty tensor whose other dims are huge (2^40 x 2^40, which a tensor with elements could
// never have) has no rows: the kernels return at once, where the dims after an empty first
// one once multiplied out past int64, and an empty middle axis ran 2^80 empty rows.
TEST(SoftmaxKernel, EmptyWithHugeDimsHasNoRows) {
  const int64_t huge = int64_t{1} << 40;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0, huge, huge}, {huge, 0, huge}}) {
    for (int64_t axis : {0, 1, 2}) {
      for (const char* op : {"softmax", "log_softmax", "hardmax"}) {
        Tensor y = RunOne(op, {Tensor::Empty(DType::kFloat32, shape)}, Axis(axis));
        EXPECT_EQ(y.shape(), shape) << op << " axis " << axis;
        EXPECT_EQ(y.numel(), 0);
      }
    }
  }
}

TEST(SoftmaxKernel, StableForLargeInputs) {
  // exp(1000) overflows float and double: the shift by the row max is what keeps it finite.
  Tensor x = MakeTensor<float>({2}, {1000, 1001});
  double e = std::exp(-1.0);
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {x}),
                          MakeTensor<float>({2}, {float(e / (1 + e)), float(1 / (1 + e))})));
  EXPECT_TRUE(
      TensorsNear(RunOne("log_softmax", {x}),
                  MakeTensor<float>({2}, {float(-1 - std::log1p(e)), float(-std::log1p(e))})));
  Tensor y = MakeTensor<float>({2}, {-1000, 0});
  Tensor ly = RunOne("log_softmax", {y});
  EXPECT_NEAR(ly.GetAsDouble(0), -1000, 1e-3);
  EXPECT_EQ(ly.GetAsDouble(1), 0);
}

TEST(SoftmaxKernel, NaNRowIsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = MakeTensor<float>({2, 2}, {1, nan, 1, 1});
  Tensor y = RunOne("softmax", {x});
  EXPECT_TRUE(std::isnan(y.GetAsDouble(0)));
  EXPECT_TRUE(std::isnan(y.GetAsDouble(1)));
  EXPECT_EQ(y.GetAsDouble(2), 0.5);
  EXPECT_EQ(y.GetAsDouble(3), 0.5);
}

TEST(SoftmaxKernel, RandomAgainstDoubleDefinition) {
  Tensor x = test::RandomTensor(DType::kFloat32, {3, 4, 5}, 11, -4.0, 4.0);
  for (int axis = -3; axis < 3; ++axis) {
    int a = axis < 0 ? axis + 3 : axis;
    for (bool log : {false, true}) {
      Tensor got = RunOne(log ? "log_softmax" : "softmax", {x}, Axis(axis));
      EXPECT_TRUE(TensorsNear(got, ToF32(Naive(x, a, log)), 1e-6, 1e-5))
          << (log ? "log_softmax" : "softmax") << " axis " << axis;
    }
  }
  // Rows sum to one.
  Tensor p = RunOne("softmax", {x}, Axis(1));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) {
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j) sum += p.GetAsDouble((i * 4 + j) * 5 + k);
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
}

TEST(SoftmaxKernel, HalfAndDoublePrecision) {
  Tensor x64 = test::RandomTensor(DType::kFloat64, {2, 3, 7}, 5, -3.0, 3.0);
  EXPECT_TRUE(TensorsNear(RunOne("softmax", {x64}), Naive(x64, 2, false), 1e-14, 1e-12));
  EXPECT_TRUE(
      TensorsNear(RunOne("log_softmax", {x64}, Axis(0)), Naive(x64, 0, true), 1e-14, 1e-12));
  Tensor h = Tensor::Empty(DType::kFloat16, {2, 3, 7});
  for (int64_t i = 0; i < h.numel(); ++i) h.SetFromDouble(i, x64.GetAsDouble(i));
  Tensor hy = RunOne("softmax", {h});
  ASSERT_EQ(hy.dtype(), DType::kFloat16);
  Tensor want = Naive(h, 2, false);
  for (int64_t i = 0; i < hy.numel(); ++i)
    EXPECT_NEAR(hy.GetAsDouble(i), want.GetAsDouble(i), 1e-3) << i;
}

}  // namespace
}  // namespace kiln
