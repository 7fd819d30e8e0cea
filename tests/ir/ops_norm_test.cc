#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

// ---- layer_norm: type relation ----

TEST(LayerNorm, Shapes) {
  EXPECT_EQ(Infer("layer_norm", {F32({2, 3, 4}), F32({4})}), "f32[2, 3, 4]");
  EXPECT_EQ(Infer("layer_norm", {F32({2, 3, 4}), F32({4}), F32({4})}), "f32[2, 3, 4]");
  EXPECT_EQ(Infer("layer_norm", {F32({2, 3, 4}), F32({3, 4}), F32({1, 4})}, {{"axis", int64_t{1}}}),
            "f32[2, 3, 4]");
  EXPECT_EQ(Infer("layer_norm", {F32({2, 3, 4}), F32({1}), F32({})}, {{"axis", int64_t{-2}}}),
            "f32[2, 3, 4]");
  EXPECT_EQ(Infer("layer_norm", {F32({5}), F32({5})}, {{"axis", int64_t{0}}}), "f32[5]");
  Type h = TensorType({2, 8}, DType::kFloat16);
  EXPECT_EQ(Infer("layer_norm", {h, TensorType({8}, DType::kFloat16)}), "f16[2, 8]");
  EXPECT_EQ(OpRegistry::Global().Get("layer_norm").pattern, OpPattern::kReduction);
}

TEST(LayerNorm, SymbolicShapes) {
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("layer_norm", {F32({S("batch"), S("seq"), 64}), F32({64}), F32({64})}, {}, &cs),
            "f32[batch, seq, 64]");
  EXPECT_TRUE(cs.empty());
  EXPECT_EQ(Infer("layer_norm", {F32({S("batch"), S("hidden")}), F32({S("hidden")})}, {}, &cs),
            "f32[batch, hidden]");
  EXPECT_TRUE(cs.empty());
  // Undecidable until `hidden` is bound: recorded as a constraint.
  EXPECT_EQ(Infer("layer_norm", {F32({S("batch"), S("hidden")}), F32({64})}, {}, &cs),
            "f32[batch, hidden]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].kind, DimConstraint::Kind::kEqual);
}

TEST(LayerNorm, MismatchNamesBothShapes) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 4}), F32({5})});
              }),
              AllOf(HasSubstr("layer_norm: scale [5] does not broadcast to x[1:] = [4]"),
                    HasSubstr("of x [2, 4]"), HasSubstr("5 != 4")));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 4}), F32({4}), F32({2, 4})});
              }),
              HasSubstr("bias [2, 4] does not broadcast to x[1:] = [4] of x [2, 4]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3, 4}), F32({2, 4})}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("scale [2, 4] does not broadcast to x[1:] = [3, 4] of x [2, 3, 4]"));
}

TEST(LayerNorm, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {TensorType({2}, DType::kInt32), F32({2})});
              }),
              HasSubstr("x must be a float tensor, got i32[2]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2}), TensorType({2}, DType::kFloat16)});
              }),
              HasSubstr("scale f16[2] must have the dtype of x f32[2]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({}), F32({})});
              }),
              HasSubstr("x must have rank >= 1, got f32[]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3}), F32({3})}, {{"axis", int64_t{2}}});
              }),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3})});
              }),
              HasSubstr("expects 2 to 3 inputs, got 1"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3}), F32({3})}, {{"epsilon", -1.0}});
              }),
              HasSubstr("attribute 'epsilon' = -1.0: must be finite and non-negative"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3}), F32({3})}, {{"eps", 1e-3}});
              }),
              HasSubstr("op 'layer_norm' has no attribute 'eps'"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("layer_norm", {F32({2, 3}), F32({3})}, {{"axis", 1.0}});
              }),
              HasSubstr("attribute 'axis' must be int"));
}

// ---- layer_norm: reference kernel ----

TEST(LayerNormKernel, HandComputed) {
  // Row [1, 2, 3]: mean 2, variance 2/3, so the normalized row is [-a, 0, a], a = sqrt(1.5).
  float a = static_cast<float>(std::sqrt(1.5));
  Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 10, 10, 10});
  Tensor scale = MakeTensor<float>({3}, {2, 1, 1});
  Tensor bias = MakeTensor<float>({3}, {0, 0, 1});
  EXPECT_TRUE(TensorsNear(RunOne("layer_norm", {x, scale, bias}, {{"epsilon", 1e-30}}),
                          MakeTensor<float>({2, 3}, {-2 * a, 0, a + 1, 0, 0, 1})));
  EXPECT_TRUE(
      TensorsNear(RunOne("layer_norm", {x, MakeTensor<float>({1}, {1})}, {{"epsilon", 1e-30}}),
                  MakeTensor<float>({2, 3}, {-a, 0, a, 0, 0, 0})));
  // A constant row with the default epsilon: 0 / sqrt(1e-5) = 0, no division by zero.
  EXPECT_TRUE(TensorsNear(
      RunOne("layer_norm", {MakeTensor<float>({1, 2}, {4, 4}), MakeTensor<float>({2}, {1, 1})}),
      MakeTensor<float>({1, 2}, {0, 0})));
}

TEST(LayerNormKernel, SizeOneAndEmpty) {
  // A single element normalizes to 0, so the output is the bias.
  EXPECT_TRUE(TensorsNear(
      RunOne("layer_norm", {MakeTensor<float>({3, 1}, {5, -2, 7}), MakeTensor<float>({1}, {3}),
                            MakeTensor<float>({1}, {0.5f})}),
      MakeTensor<float>({3, 1}, {0.5f, 0.5f, 0.5f})));
  EXPECT_EQ(RunOne("layer_norm",
                   {Tensor::Empty(DType::kFloat32, {0, 4}), MakeTensor<float>({4}, {1, 1, 1, 1})})
                .numel(),
            0);
  EXPECT_EQ(RunOne("layer_norm",
                   {Tensor::Empty(DType::kFloat32, {3, 0}), Tensor::Empty(DType::kFloat32, {0})})
                .numel(),
            0);
}

// layer_norm over dims [axis, rank) straight from the definition, in double.
Tensor NaiveLayerNorm(const Tensor& x, int axis, const Tensor& scale, const Tensor* bias,
                      double eps) {
  int64_t n = 1;
  for (int i = axis; i < x.ndim(); ++i) n *= x.shape()[i];
  int64_t rows = x.numel() / n;
  Tensor y = Tensor::Empty(DType::kFloat64, x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < n; ++k) sum += x.GetAsDouble(r * n + k);
    double mean = sum / n;
    for (int64_t k = 0; k < n; ++k) sq += std::pow(x.GetAsDouble(r * n + k) - mean, 2);
    double sd = std::sqrt(sq / n + eps);
    for (int64_t k = 0; k < n; ++k) {
      // Parameters here have the full tail shape, so they index by k directly.
      double b = bias ? bias->GetAsDouble(k) : 0;
      y.SetFromDouble(r * n + k, (x.GetAsDouble(r * n + k) - mean) / sd * scale.GetAsDouble(k) + b);
    }
  }
  return y;
}

Tensor ToDType(const Tensor& t, DType d) {
  Tensor out = Tensor::Empty(d, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.SetFromDouble(i, t.GetAsDouble(i));
  return out;
}

TEST(LayerNormKernel, RandomAgainstDoubleDefinition) {
  Tensor x = test::RandomTensor(DType::kFloat32, {3, 5, 7}, 21, -3.0, 5.0);
  for (int axis : {-1, 1, 0, -2}) {
    int a = axis < 0 ? axis + 3 : axis;
    std::vector<int64_t> tail(x.shape().begin() + a, x.shape().end());
    Tensor scale = test::RandomTensor(DType::kFloat32, tail, 22 + a, 0.5, 1.5);
    Tensor bias = test::RandomTensor(DType::kFloat32, tail, 33 + a);
    Attrs attrs = {{"axis", int64_t{axis}}, {"epsilon", 1e-3}};
    EXPECT_TRUE(TensorsNear(RunOne("layer_norm", {x, scale, bias}, attrs),
                            ToDType(NaiveLayerNorm(x, a, scale, &bias, 1e-3), DType::kFloat32),
                            1e-5, 1e-5))
        << "axis " << axis;
    EXPECT_TRUE(TensorsNear(RunOne("layer_norm", {x, scale}, attrs),
                            ToDType(NaiveLayerNorm(x, a, scale, nullptr, 1e-3), DType::kFloat32),
                            1e-5, 1e-5))
        << "axis " << axis << " without bias";
  }
}

TEST(LayerNormKernel, BroadcastParameterEqualsExpanded) {
  Tensor x = test::RandomTensor(DType::kFloat32, {2, 3, 4}, 3);
  Tensor scale_row = test::RandomTensor(DType::kFloat32, {1, 4}, 4);
  Tensor scale_full = Tensor::Empty(DType::kFloat32, {3, 4});
  for (int64_t i = 0; i < 12; ++i) scale_full.SetFromDouble(i, scale_row.GetAsDouble(i % 4));
  Attrs attrs = {{"axis", int64_t{1}}};
  EXPECT_TRUE(TensorsNear(RunOne("layer_norm", {x, scale_row}, attrs),
                          RunOne("layer_norm", {x, scale_full}, attrs), 0, 0));
}

TEST(LayerNormKernel, HalfPrecision) {
  Tensor x = test::RandomTensor(DType::kBFloat16, {4, 9}, 8, -2.0, 2.0);
  Tensor scale = test::RandomTensor(DType::kBFloat16, {9}, 9, 0.5, 1.5);
  Tensor y = RunOne("layer_norm", {x, scale});
  ASSERT_EQ(y.dtype(), DType::kBFloat16);
  // bf16 keeps 8 significant bits: compare with a relative 1/128.
  EXPECT_TRUE(TensorsNear(y, ToDType(NaiveLayerNorm(x, 1, scale, nullptr, 1e-5), DType::kBFloat16),
                          1e-2, 1.0 / 128));
}

// ---- batch_norm ----

TEST(BatchNorm, Shapes) {
  Type c = F32({3});
  EXPECT_EQ(Infer("batch_norm", {F32({2, 3, 4, 4}), c, c, c, c}), "f32[2, 3, 4, 4]");
  EXPECT_EQ(Infer("batch_norm", {F32({5, 3}), c, c, c, c}), "f32[5, 3]");
  Type cs = F32({S("c")});
  EXPECT_EQ(Infer("batch_norm", {F32({S("batch"), S("c"), S("h"), S("w")}), cs, cs, cs, cs}),
            "f32[batch, c, h, w]");
  EXPECT_EQ(Infer("batch_norm", {F32({S("batch"), 3, 7}), c, c, c, c}), "f32[batch, 3, 7]");
  EXPECT_EQ(OpRegistry::Global().Get("batch_norm").pattern, OpPattern::kBroadcast);
}

TEST(BatchNorm, Errors) {
  Type c = F32({3});
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), c, c, F32({4}), c});
              }),
              AllOf(HasSubstr("batch_norm: mean [4] must be [C] with C = 3, dim 1 of x [2, 3]"),
                    HasSubstr("4 != 3")));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), F32({1, 3}), c, c, c});
              }),
              HasSubstr("scale [1, 3] must be [C] with C = 3"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({3}), c, c, c, c});
              }),
              HasSubstr("x must be [N, C, ...] with rank >= 2, got f32[3]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {TensorType({2, 3}, DType::kInt8), c, c, c, c});
              }),
              HasSubstr("x must be a float tensor, got i8[2, 3]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), c, c, c, TensorType({3}, DType::kFloat64)});
              }),
              HasSubstr("var f64[3] must have the dtype of x f32[2, 3]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), c, c, c});
              }),
              HasSubstr("expects 5 inputs, got 4"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), c, c, c, c}, {{"momentum", 0.9}});
              }),
              HasSubstr("op 'batch_norm' has no attribute 'momentum'"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("batch_norm", {F32({2, 3}), c, c, c, c}, {{"epsilon", std::string("a")}});
              }),
              HasSubstr("attribute 'epsilon' must be float"));
}

TEST(BatchNormKernel, HandComputed) {
  // x [1, 2, 2]: channel 0 holds {3, 5}, channel 1 holds {2, 3}.
  Tensor x = MakeTensor<float>({1, 2, 2}, {3, 5, 2, 3});
  Tensor scale = MakeTensor<float>({2}, {1, 2});
  Tensor bias = MakeTensor<float>({2}, {0, 1});
  Tensor mean = MakeTensor<float>({2}, {1, 2});
  Tensor var = MakeTensor<float>({2}, {4, 0.25f});
  // ch0: (x - 1) / 2;  ch1: (x - 2) / 0.5 * 2 + 1.
  EXPECT_TRUE(TensorsNear(RunOne("batch_norm", {x, scale, bias, mean, var}, {{"epsilon", 0.0}}),
                          MakeTensor<float>({1, 2, 2}, {1, 2, 1, 5})));
  // Rank 2 and a single channel.
  EXPECT_TRUE(TensorsNear(RunOne("batch_norm",
                                 {MakeTensor<float>({3, 1}, {1, 2, 3}), MakeTensor<float>({1}, {1}),
                                  MakeTensor<float>({1}, {0}), MakeTensor<float>({1}, {2}),
                                  MakeTensor<float>({1}, {0})},
                                 {{"epsilon", 1.0}}),
                          MakeTensor<float>({3, 1}, {-1, 0, 1})));
  EXPECT_EQ(
      RunOne("batch_norm", {Tensor::Empty(DType::kFloat32, {0, 2, 3}), scale, bias, mean, var})
          .numel(),
      0);
}

TEST(BatchNormKernel, RandomAgainstDoubleDefinition) {
  const int64_t n = 2, c = 3, h = 5, w = 7;
  Tensor x = test::RandomTensor(DType::kFloat32, {n, c, h, w}, 1, -3.0, 3.0);
  Tensor scale = test::RandomTensor(DType::kFloat32, {c}, 2);
  Tensor bias = test::RandomTensor(DType::kFloat32, {c}, 3);
  Tensor mean = test::RandomTensor(DType::kFloat32, {c}, 4);
  Tensor var = test::RandomTensor(DType::kFloat32, {c}, 5, 0.1, 2.0);
  Tensor want = Tensor::Empty(DType::kFloat32, x.shape());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t i = 0; i < h * w; ++i) {
        int64_t at = (in * c + ic) * h * w + i;
        want.SetFromDouble(at, (x.GetAsDouble(at) - mean.GetAsDouble(ic)) /
                                       std::sqrt(var.GetAsDouble(ic) + 1e-5) *
                                       scale.GetAsDouble(ic) +
                                   bias.GetAsDouble(ic));
      }
  EXPECT_TRUE(TensorsNear(RunOne("batch_norm", {x, scale, bias, mean, var}), want, 1e-5, 1e-5));
}

// ---- instance_norm ----

TEST(InstanceNorm, Shapes) {
  Type c = F32({3});
  EXPECT_EQ(Infer("instance_norm", {F32({2, 3, 4, 5}), c, c}), "f32[2, 3, 4, 5]");
  EXPECT_EQ(Infer("instance_norm", {F32({2, 3, 7}), c, c}), "f32[2, 3, 7]");
  Type h = TensorType({1, 2, 3}, DType::kFloat16), hc = TensorType({2}, DType::kFloat16);
  EXPECT_EQ(Infer("instance_norm", {h, hc, hc}), "f16[1, 2, 3]");
  std::vector<DimConstraint> cs;
  Type sc = F32({S("c")});
  EXPECT_EQ(Infer("instance_norm", {F32({S("n"), S("c"), S("h"), S("w")}), sc, sc}, {}, &cs),
            "f32[n, c, h, w]");
  EXPECT_TRUE(cs.empty());
  EXPECT_EQ(Infer("instance_norm", {F32({S("n"), S("c"), 9}), c, c}, {}, &cs), "f32[n, c, 9]");
  EXPECT_EQ(cs.size(), 2u);  // c == 3, once per parameter
  EXPECT_EQ(OpRegistry::Global().Get("instance_norm").pattern, OpPattern::kReduction);
}

TEST(InstanceNorm, Errors) {
  Type c = F32({3});
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3}), c, c}),
              HasSubstr("x must be [N, C, D1, ...] with rank >= 3, got f32[2, 3]"));
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3, 4}), F32({4}), c}),
              AllOf(HasSubstr("instance_norm: scale [4] must be [C] with C = 3, dim 1 of x "
                              "[2, 3, 4]"),
                    HasSubstr("4 != 3")));
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3, 4}), c, F32({1, 3})}),
              HasSubstr("bias [1, 3] must be [C] with C = 3"));
  EXPECT_THAT(InferError("instance_norm", {TensorType({2, 3, 4}, DType::kInt32), c, c}),
              HasSubstr("x must be a float tensor, got i32[2, 3, 4]"));
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3, 4}), c, TensorType({3}, DType::kFloat64)}),
              HasSubstr("bias f64[3] must have the dtype of x f32[2, 3, 4]"));
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3, 4}), c}), HasSubstr("expects 3 inputs"));
  EXPECT_THAT(InferError("instance_norm", {F32({2, 3, 4}), c, c}, {{"epsilon", -1e-3}}),
              HasSubstr("attribute 'epsilon' = -0.001: must be finite and non-negative"));
}

TEST(InstanceNormKernel, HandComputed) {
  // x [2, 2, 2]: each (n, c) row is normalized on its own. Rows [1, 3], [0, 2] and [-1, 1]
  // have variance 1 and normalize to [-1, 1]; the constant row [5, 5] normalizes to 0.
  Tensor x = MakeTensor<float>({2, 2, 2}, {1, 3, 5, 5, 0, 2, -1, 1});
  Tensor scale = MakeTensor<float>({2}, {2, 3});
  Tensor bias = MakeTensor<float>({2}, {0, 1});
  EXPECT_TRUE(TensorsNear(RunOne("instance_norm", {x, scale, bias}, {{"epsilon", 1e-30}}),
                          MakeTensor<float>({2, 2, 2}, {-2, 2, 1, 1, -2, 2, -2, 4})));
  // Epsilon enters as sqrt(var + epsilon): var 1 and epsilon 3 halve the normalized values.
  EXPECT_TRUE(TensorsNear(RunOne("instance_norm", {x, scale, bias}, {{"epsilon", 3.0}}),
                          MakeTensor<float>({2, 2, 2}, {-1, 1, 1, 1, -1, 1, -0.5f, 2.5f})));
}

// instance_norm from its definition: per (n, c) mean and variance of the spatial block.
Tensor NaiveInstanceNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, double eps) {
  int64_t n = x.shape()[0], c = x.shape()[1], block = x.numel() / std::max<int64_t>(n * c, 1);
  Tensor y = Tensor::Empty(DType::kFloat64, x.shape());
  for (int64_t r = 0; r < n * c; ++r) {
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < block; ++k) sum += x.GetAsDouble(r * block + k);
    double mean = sum / block;
    for (int64_t k = 0; k < block; ++k) sq += std::pow(x.GetAsDouble(r * block + k) - mean, 2);
    double sd = std::sqrt(sq / block + eps);
    for (int64_t k = 0; k < block; ++k)
      y.SetFromDouble(r * block + k,
                      (x.GetAsDouble(r * block + k) - mean) / sd * scale.GetAsDouble(r % c) +
                          bias.GetAsDouble(r % c));
  }
  return y;
}

TEST(InstanceNormKernel, RandomAgainstDoubleDefinition) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{2, 3, 5, 7}, {1, 1, 1}, {3, 4, 11}, {1, 2, 3, 2, 2}}) {
    Tensor x = test::RandomTensor(DType::kFloat32, shape, 5, -3.0, 5.0);
    Tensor scale = test::RandomTensor(DType::kFloat32, {shape[1]}, 6, 0.5, 1.5);
    Tensor bias = test::RandomTensor(DType::kFloat32, {shape[1]}, 7);
    EXPECT_TRUE(TensorsNear(RunOne("instance_norm", {x, scale, bias}, {{"epsilon", 1e-3}}),
                            ToDType(NaiveInstanceNorm(x, scale, bias, 1e-3), DType::kFloat32), 1e-5,
                            1e-5))
        << x.TypeString();
  }
}

// ---- group_norm ----

TEST(GroupNorm, ShapesAndErrors) {
  Type c = F32({6});
  Attrs two{{"num_groups", int64_t{2}}};
  EXPECT_EQ(Infer("group_norm", {F32({2, 6, 4, 5}), c, c}, two), "f32[2, 6, 4, 5]");
  EXPECT_EQ(Infer("group_norm", {F32({S("n"), 6, S("l")}), c, c}, two), "f32[n, 6, l]");
  EXPECT_THAT(InferError("group_norm", {F32({2, 6, 4}), c, c}, {{"num_groups", int64_t{4}}}),
              HasSubstr("num_groups 4 does not divide the 6 channels of x [2, 6, 4]"));
  // A symbolic channel count is checked when it is bound.
  EXPECT_EQ(Infer("group_norm", {F32({2, S("c"), 4}), F32({S("c")}), F32({S("c")})}, two),
            "f32[2, c, 4]");
  EXPECT_THAT(InferError("group_norm", {F32({2, 6, 4}), c, c}, {{"num_groups", int64_t{0}}}),
              HasSubstr("'num_groups' = 0: must be at least 1"));
  EXPECT_THAT(InferError("group_norm", {F32({2, 6, 4}), c, c}), HasSubstr("'num_groups'"));
  EXPECT_THAT(InferError("group_norm", {F32({2, 6, 4}), F32({3}), c}, two),
              HasSubstr("scale [3] must be [C] with C = 6"));
}

TEST(GroupNormKernel, HandComputedAndItsTwoLimits) {
  // x [1, 4, 1], two groups: channels {0, 1} hold [1, 3], channels {2, 3} hold [5, 5].
  Tensor x = MakeTensor<float>({1, 4, 1}, {1, 3, 5, 5});
  Tensor scale = MakeTensor<float>({4}, {1, 2, 3, 4});
  Tensor bias = MakeTensor<float>({4}, {0, 0, 1, 1});
  EXPECT_TRUE(TensorsNear(
      RunOne("group_norm", {x, scale, bias}, {{"num_groups", int64_t{2}}, {"epsilon", 1e-30}}),
      MakeTensor<float>({1, 4, 1}, {-1, 2, 1, 1})));
  // One group per channel is instance_norm.
  Tensor r = test::RandomTensor(DType::kFloat32, {2, 3, 5}, 8, -2, 3);
  Tensor sc = test::RandomTensor(DType::kFloat32, {3}, 9),
         bi = test::RandomTensor(DType::kFloat32, {3}, 10);
  EXPECT_TRUE(TensorsNear(RunOne("group_norm", {r, sc, bi}, {{"num_groups", int64_t{3}}}),
                          RunOne("instance_norm", {r, sc, bi}), 1e-6, 1e-6));
  // One group is a layer norm over everything but the batch, then the per-channel affine map.
  Tensor ones = MakeTensor<float>({3}, {1, 1, 1}), zeros = MakeTensor<float>({3}, {0, 0, 0});
  Tensor ln = RunOne("layer_norm", {r, MakeTensor<float>({1}, {1}), MakeTensor<float>({1}, {0})},
                     {{"axis", int64_t{1}}});
  EXPECT_TRUE(TensorsNear(RunOne("group_norm", {r, ones, zeros}, {{"num_groups", int64_t{1}}}), ln,
                          1e-5, 1e-5));
}

// ---- mean_variance_normalization ----

TEST(Mvn, Shapes) {
  EXPECT_EQ(Infer("mean_variance_normalization", {F32({2, 3, 4, 5})}), "f32[2, 3, 4, 5]");
  EXPECT_EQ(
      Infer("mean_variance_normalization", {F32({2, 3})}, {{"axes", std::vector<int64_t>{-1}}}),
      "f32[2, 3]");
  EXPECT_EQ(Infer("mean_variance_normalization", {F32({7})}, {{"axes", std::vector<int64_t>{}}}),
            "f32[7]");
  EXPECT_EQ(Infer("mean_variance_normalization", {F32({S("n"), 3, S("h"), S("w")})}),
            "f32[n, 3, h, w]");
  EXPECT_EQ(Infer("mean_variance_normalization", {TensorType({1, 2, 3, 4}, DType::kBFloat16)}),
            "bf16[1, 2, 3, 4]");
}

TEST(Mvn, Errors) {
  // The default axes [0, 2, 3] need rank 4.
  EXPECT_THAT(InferError("mean_variance_normalization", {F32({2, 3, 4})}),
              HasSubstr("axes: axis 3 is out of range for rank 3"));
  EXPECT_THAT(InferError("mean_variance_normalization", {F32({2, 3})},
                         {{"axes", std::vector<int64_t>{1, -1}}}),
              HasSubstr("axes: repeated axis in [1, -1]"));
  EXPECT_THAT(InferError("mean_variance_normalization", {TensorType({2, 3, 4, 5}, DType::kInt8)}),
              HasSubstr("x must be a float tensor, got i8[2, 3, 4, 5]"));
}

TEST(MvnKernel, HandComputed) {
  // Over axis 1: [1, 3] -> [-1, 1] (mean 2, std 1); [2, 2] -> 0 (0 / 1e-9).
  Tensor x = MakeTensor<float>({2, 2}, {1, 3, 2, 2});
  EXPECT_TRUE(
      TensorsNear(RunOne("mean_variance_normalization", {x}, {{"axes", std::vector<int64_t>{1}}}),
                  MakeTensor<float>({2, 2}, {-1, 1, 0, 0}), 1e-6, 1e-6));
  // Over axis 0: columns [1, 2] and [3, 2], each -> [-1, 1] and [1, -1] (std 0.5).
  EXPECT_TRUE(
      TensorsNear(RunOne("mean_variance_normalization", {x}, {{"axes", std::vector<int64_t>{0}}}),
                  MakeTensor<float>({2, 2}, {-1, 1, 1, -1}), 1e-6, 1e-6));
  // The 1e-9 is added to the standard deviation: a spread of 2e-9 around the mean gives
  // 1e-9 / (1e-9 + 1e-9) = 0.5, where 1e-9 under the sqrt would give about 0.0316.
  Tensor tiny = MakeTensor<double>({2}, {1e-9, -1e-9});
  EXPECT_TRUE(TensorsNear(
      RunOne("mean_variance_normalization", {tiny}, {{"axes", std::vector<int64_t>{0}}}),
      MakeTensor<double>({2}, {0.5, -0.5}), 1e-12, 1e-12));
}

// ONNX's formula, with the one-pass variance mean(x^2) - mean(x)^2, over the reduced axes.
Tensor NaiveMvn(const Tensor& x, const std::vector<bool>& reduced) {
  const std::vector<int64_t>& shape = x.shape();
  auto key = [&](int64_t i) {
    int64_t k = 0, rest = i;
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) k = k * shape[d] + idx[d];
    return k;
  };
  std::map<int64_t, std::pair<double, double>> sums;  // group -> (sum x, sum x^2)
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.GetAsDouble(i);
    sums[key(i)].first += v;
    sums[key(i)].second += v * v;
    ++counts[key(i)];
  }
  Tensor y = Tensor::Empty(DType::kFloat64, shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double n = static_cast<double>(counts[key(i)]);
    double mean = sums[key(i)].first / n, var = sums[key(i)].second / n - mean * mean;
    y.SetFromDouble(i, (x.GetAsDouble(i) - mean) / (std::sqrt(var) + 1e-9));
  }
  return y;
}

TEST(MvnKernel, RandomAgainstOnnxFormula) {
  Tensor x = test::RandomTensor(DType::kFloat32, {3, 4, 5, 2}, 11, -2.0, 3.0);
  struct Case {
    std::vector<int64_t> axes;
    std::vector<bool> reduced;
  };
  for (const Case& c : std::vector<Case>{{{0, 2, 3}, {true, false, true, true}},
                                         {{1}, {false, true, false, false}},
                                         {{-1, 0}, {true, false, false, true}},
                                         {{}, {true, true, true, true}}}) {
    Attrs attrs{{"axes", c.axes}};
    if (c.axes == std::vector<int64_t>{0, 2, 3}) attrs = {};  // the default
    EXPECT_TRUE(TensorsNear(RunOne("mean_variance_normalization", {x}, attrs),
                            ToDType(NaiveMvn(x, c.reduced), DType::kFloat32), 1e-5, 1e-5))
        << IntsToString(c.axes);
  }
}

// ---- lrn ----

TEST(Lrn, Shapes) {
  EXPECT_EQ(Infer("lrn", {F32({2, 3, 4, 5})}, {{"size", int64_t{3}}}), "f32[2, 3, 4, 5]");
  EXPECT_EQ(Infer("lrn", {F32({2, 3})}, {{"size", int64_t{2}}}), "f32[2, 3]");
  EXPECT_EQ(Infer("lrn", {F32({S("n"), S("c"), 7})}, {{"size", int64_t{5}}}), "f32[n, c, 7]");
  EXPECT_EQ(OpRegistry::Global().Get("lrn").pattern, OpPattern::kOutputFusable);
}

TEST(Lrn, Errors) {
  EXPECT_THAT(InferError("lrn", {F32({2, 3, 4})}),
              HasSubstr("op 'lrn': required attribute 'size' is missing"));
  EXPECT_THAT(InferError("lrn", {F32({2, 3, 4})}, {{"size", int64_t{0}}}),
              HasSubstr("attribute 'size' = 0: must be at least 1"));
  EXPECT_THAT(InferError("lrn", {F32({3})}, {{"size", int64_t{1}}}),
              HasSubstr("x must be [N, C, ...] with rank >= 2, got f32[3]"));
  EXPECT_THAT(InferError("lrn", {TensorType({1, 3}, DType::kInt32)}, {{"size", int64_t{1}}}),
              HasSubstr("x must be a float tensor, got i32[1, 3]"));
}

TEST(LrnKernel, HandComputed) {
  // One pixel, channels [1, 2, 3, 4]; size 2: the window of c is [c, c + 1].
  // square sums [5, 13, 25, 16]; bias 1, alpha 2 (alpha / size = 1), beta 1: y = x / (1 + s).
  Tensor x = MakeTensor<float>({1, 4}, {1, 2, 3, 4});
  Attrs attrs{{"size", int64_t{2}}, {"alpha", 2.0}, {"beta", 1.0}, {"bias", 1.0}};
  EXPECT_TRUE(TensorsNear(RunOne("lrn", {x}, attrs),
                          MakeTensor<float>({1, 4}, {1.f / 6, 2.f / 14, 3.f / 26, 4.f / 17})));
  // size 3: window [c - 1, c + 1]; sums [5, 14, 29, 25]; beta 0.5 takes the square root.
  attrs = {{"size", int64_t{3}}, {"alpha", 3.0}, {"beta", 0.5}, {"bias", 0.0}};
  EXPECT_TRUE(TensorsNear(RunOne("lrn", {x}, attrs),
                          MakeTensor<float>({1, 4}, {static_cast<float>(1 / std::sqrt(5.0)),
                                                     static_cast<float>(2 / std::sqrt(14.0)),
                                                     static_cast<float>(3 / std::sqrt(29.0)),
                                                     static_cast<float>(4 / std::sqrt(25.0))})));
}

// LRN as ONNX's reference writes it: the window [c - floor((size - 1) / 2),
// c + ceil((size - 1) / 2)] clipped to the channels, on [N, C, H, W].
Tensor NaiveLrn(const Tensor& x, int64_t size, double alpha, double beta, double bias) {
  int64_t n = x.shape()[0], c = x.shape()[1], hw = x.numel() / (n * c);
  Tensor y = Tensor::Empty(DType::kFloat64, x.shape());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t p = 0; p < hw; ++p) {
        double sum = 0;
        int64_t lo = ic - static_cast<int64_t>(std::floor((size - 1) / 2.0));
        int64_t hi = ic + static_cast<int64_t>(std::ceil((size - 1) / 2.0));
        for (int64_t j = lo; j <= hi; ++j)
          if (j >= 0 && j < c) sum += std::pow(x.GetAsDouble((in * c + j) * hw + p), 2);
        int64_t at = (in * c + ic) * hw + p;
        y.SetFromDouble(at, x.GetAsDouble(at) / std::pow(bias + alpha / size * sum, beta));
      }
  return y;
}

TEST(LrnKernel, RandomAgainstDefinition) {
  Tensor x = test::RandomTensor(DType::kFloat32, {2, 6, 3, 5}, 17, -4.0, 4.0);
  for (int64_t size : {1, 2, 3, 4, 5, 13}) {
    Attrs attrs{{"size", size}, {"alpha", 0.1}, {"beta", 0.6}, {"bias", 1.5}};
    EXPECT_TRUE(TensorsNear(RunOne("lrn", {x}, attrs),
                            ToDType(NaiveLrn(x, size, 0.1, 0.6, 1.5), DType::kFloat32), 1e-6, 1e-6))
        << "size " << size;
  }
}

}  // namespace
}  // namespace kiln
