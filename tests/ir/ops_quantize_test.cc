// quantize_linear, dequantize_linear and shrink: type relations, errors, and the reference
// kernels against hand-computed values (ONNX's own examples among them).
#include <gmock/gmock.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::F32;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Type T(std::vector<int64_t> shape, DType t) {
  return TensorType(ShapeFromInts(shape), t);
}

// ---- quantize_linear ----

TEST(QuantizeLinear, Types) {
  EXPECT_EQ(Infer("quantize_linear", {F32({6}), F32({})}), "u8[6]");
  EXPECT_EQ(Infer("quantize_linear", {F32({6}), F32({}), T({}, DType::kUInt8)}), "u8[6]");
  EXPECT_EQ(Infer("quantize_linear", {F32({2, 3}), F32({1}), T({1}, DType::kInt8)}), "i8[2, 3]");
  EXPECT_EQ(Infer("quantize_linear", {T({4}, DType::kInt32), F32({})}), "u8[4]");
  // Per axis: the default axis 1, or another; a per-tensor scale ignores the axis, even one out
  // of range (ONNX's rank-1 examples keep the default axis 1).
  EXPECT_EQ(Infer("quantize_linear", {F32({1, 3, 3, 2}), F32({3}), T({3}, DType::kUInt8)}),
            "u8[1, 3, 3, 2]");
  EXPECT_EQ(Infer("quantize_linear", {F32({4, 5}), F32({4})}, {{"axis", int64_t{-2}}}), "u8[4, 5]");
  EXPECT_EQ(Infer("quantize_linear", {F32({}), F32({})}, {{"axis", int64_t{7}}}), "u8[]");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("quantize_linear", {F32({S("n"), S("c")}), F32({S("c")}), T({3}, DType::kInt8)},
                  {}, &cs),
            "i8[n, c]");
  EXPECT_EQ(cs.size(), 1u);  // the zero point's 3 against c
  EXPECT_EQ(OpRegistry::Global().Get("quantize_linear").pattern, OpPattern::kBroadcast);
}

TEST(QuantizeLinear, Errors) {
  EXPECT_THAT(InferError("quantize_linear", {T({2}, DType::kFloat16), F32({})}),
              HasSubstr("quantize_linear: x must be f32 or i32, got f16[2]"));
  EXPECT_THAT(InferError("quantize_linear", {F32({2}), T({}, DType::kFloat64)}),
              HasSubstr("y_scale must be f32, got f64[]"));
  EXPECT_THAT(InferError("quantize_linear", {F32({2, 2}), F32({2, 2})}),
              HasSubstr("y_scale must be a scalar or 1-D, got f32[2, 2]"));
  EXPECT_THAT(InferError("quantize_linear", {F32({2, 3}), F32({2})}),
              AllOf(HasSubstr("y_scale [2] must be [C] with C = 3, dim 1 (axis) of x [2, 3], or a "
                              "scalar"),
                    HasSubstr("2 != 3")));
  EXPECT_THAT(InferError("quantize_linear", {F32({3}), F32({3})}),
              HasSubstr("axis 1 is out of range for rank 1"));
  EXPECT_THAT(InferError("quantize_linear", {F32({}), F32({3})}, {{"axis", int64_t{0}}}),
              HasSubstr("y_scale [3] is per axis, but x is a scalar"));
  EXPECT_THAT(InferError("quantize_linear", {F32({2, 3}), F32({3}), T({}, DType::kUInt8)}),
              HasSubstr("y_zero_point [] must have the shape of y_scale [3]"));
  EXPECT_THAT(
      InferError("quantize_linear", {F32({2, 3}), F32({3}), T({2}, DType::kUInt8)}),
      AllOf(HasSubstr("y_zero_point [2] must have the shape of y_scale [3]"), HasSubstr("2 != 3")));
  EXPECT_THAT(InferError("quantize_linear", {F32({2}), F32({}), T({}, DType::kInt32)}),
              HasSubstr("y_zero_point must be u8 or i8, got i32[]"));
  EXPECT_THAT(InferError("quantize_linear", {F32({2})}), HasSubstr("expects 2 to 3 inputs, got 1"));
}

TEST(QuantizeLinearKernel, OnnxExamples) {
  // ONNX's test_quantizelinear: 3 / 2 = 1.5 rounds to 2; 1000 and -1000 saturate.
  Tensor x = MakeTensor<float>({6}, {0, 2, 3, 1000, -254, -1000});
  EXPECT_TRUE(TensorsNear(
      RunOne("quantize_linear", {x, MakeTensor<float>({}, {2}), MakeTensor<uint8_t>({}, {128})}),
      MakeTensor<uint8_t>({6}, {128, 129, 130, 255, 1, 0}), 0, 0));
  // test_quantizelinear_axis: per-channel scale and zero point along axis 1.
  Tensor xa = MakeTensor<float>({1, 3, 3, 2}, {-162, 10, -100, 232, -20, -50,  //
                                               -76, 0, 0, 252, 32, -44,        //
                                               245, -485, -960, -270, -375, -470});
  EXPECT_TRUE(TensorsNear(RunOne("quantize_linear", {xa, MakeTensor<float>({3}, {2, 4, 5}),
                                                     MakeTensor<uint8_t>({3}, {84, 24, 196})}),
                          MakeTensor<uint8_t>({1, 3, 3, 2}, {3, 89, 34, 200, 74, 59,  //
                                                             5, 24, 24, 87, 32, 13,   //
                                                             245, 99, 4, 142, 121, 102}),
                          0, 0));
}

TEST(QuantizeLinearKernel, RoundingAndSaturation) {
  // Halves round to even, negative ones too; NaN gives 0; infinities saturate.
  Tensor x =
      MakeTensor<float>({10}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4999f, kNaN, kInf, -kInf});
  Tensor one = MakeTensor<float>({}, {1});
  EXPECT_TRUE(TensorsNear(RunOne("quantize_linear", {x, one, MakeTensor<int8_t>({}, {0})}),
                          MakeTensor<int8_t>({10}, {0, 2, 2, 0, -2, -2, 2, 0, 127, -128}), 0, 0));
  // Without a zero point: u8 with zero point 0, so negatives saturate to 0.
  EXPECT_TRUE(TensorsNear(RunOne("quantize_linear", {x, one}),
                          MakeTensor<uint8_t>({10}, {0, 2, 2, 0, 0, 0, 2, 0, 255, 0}), 0, 0));
  // i8 range ends and a zero point that pushes past them.
  Tensor y = MakeTensor<float>({4}, {-129, -128, 127, 128});
  EXPECT_TRUE(TensorsNear(RunOne("quantize_linear", {y, one, MakeTensor<int8_t>({}, {0})}),
                          MakeTensor<int8_t>({4}, {-128, -128, 127, 127}), 0, 0));
  EXPECT_TRUE(TensorsNear(RunOne("quantize_linear", {y, one, MakeTensor<int8_t>({}, {-3})}),
                          MakeTensor<int8_t>({4}, {-128, -128, 124, 125}), 0, 0));
  // i32 input; the quotient is taken in f32: 7 / 2 = 3.5 rounds to 4, 5 / 2 = 2.5 to 2.
  EXPECT_TRUE(TensorsNear(
      RunOne("quantize_linear", {MakeTensor<int32_t>({3}, {7, 5, -300}),
                                 MakeTensor<float>({1}, {2}), MakeTensor<uint8_t>({1}, {10})}),
      MakeTensor<uint8_t>({3}, {14, 12, 0}), 0, 0));
}

TEST(QuantizeLinearKernel, PerAxisOtherAxes) {
  // x [2, 3] along axis 0 (scales per row) and axis -1 (per column).
  Tensor x = MakeTensor<float>({2, 3}, {10, 20, 30, 40, 50, 60});
  EXPECT_TRUE(TensorsNear(
      RunOne("quantize_linear", {x, MakeTensor<float>({2}, {10, 20})}, {{"axis", int64_t{0}}}),
      MakeTensor<uint8_t>({2, 3}, {1, 2, 3, 2, 2, 3}), 0, 0));
  EXPECT_TRUE(TensorsNear(
      RunOne("quantize_linear",
             {x, MakeTensor<float>({3}, {10, 20, 30}), MakeTensor<int8_t>({3}, {-1, 0, 1})},
             {{"axis", int64_t{-1}}}),
      MakeTensor<int8_t>({2, 3}, {0, 1, 2, 3, 2, 3}), 0, 0));
}

// ---- dequantize_linear ----

TEST(DequantizeLinear, Types) {
  EXPECT_EQ(Infer("dequantize_linear", {T({4}, DType::kUInt8), F32({}), T({}, DType::kUInt8)}),
            "f32[4]");
  EXPECT_EQ(Infer("dequantize_linear", {T({2, 3}, DType::kInt8), F32({3}), T({3}, DType::kInt8)}),
            "f32[2, 3]");
  EXPECT_EQ(Infer("dequantize_linear", {T({5}, DType::kInt32), F32({})}), "f32[5]");
  EXPECT_EQ(Infer("dequantize_linear", {TensorType({S("n"), 3}, DType::kUInt8), F32({3})}),
            "f32[n, 3]");
}

TEST(DequantizeLinear, Errors) {
  EXPECT_THAT(InferError("dequantize_linear", {F32({4}), F32({})}),
              HasSubstr("dequantize_linear: x must be u8, i8 or i32, got f32[4]"));
  EXPECT_THAT(
      InferError("dequantize_linear", {T({4}, DType::kUInt8), F32({}), T({}, DType::kInt8)}),
      HasSubstr("x_zero_point i8[] must have the dtype of x u8[4]"));
  EXPECT_THAT(InferError("dequantize_linear", {T({4, 2}, DType::kInt8), F32({4})}),
              HasSubstr("x_scale [4] must be [C] with C = 2, dim 1 (axis) of x [4, 2]"));
  EXPECT_THAT(InferError("dequantize_linear", {T({4}, DType::kInt8), T({}, DType::kFloat16)}),
              HasSubstr("x_scale must be f32, got f16[]"));
  EXPECT_THAT(
      InferError("dequantize_linear", {T({4, 2}, DType::kInt8), F32({2}), T({1}, DType::kInt8)}),
      HasSubstr("x_zero_point [1] must have the shape of x_scale [2]"));
}

TEST(DequantizeLinearKernel, HandComputed) {
  // ONNX's test_dequantizelinear: (x - 128) * 2.
  EXPECT_TRUE(TensorsNear(
      RunOne("dequantize_linear", {MakeTensor<uint8_t>({4}, {0, 3, 128, 255}),
                                   MakeTensor<float>({}, {2}), MakeTensor<uint8_t>({}, {128})}),
      MakeTensor<float>({4}, {-256, -250, 0, 254}), 0, 0));
  // i8 per axis 1, and i32 without a zero point, whose difference is exact before the scale.
  EXPECT_TRUE(
      TensorsNear(RunOne("dequantize_linear",
                         {MakeTensor<int8_t>({2, 2}, {-128, 127, 0, -1}),
                          MakeTensor<float>({2}, {0.5f, 4}), MakeTensor<int8_t>({2}, {127, -128})}),
                  MakeTensor<float>({2, 2}, {-127.5f, 1020, -63.5f, 508}), 0, 0));
  EXPECT_TRUE(TensorsNear(
      RunOne("dequantize_linear", {MakeTensor<int32_t>({3}, {-2147483647 - 1, 0, 12345}),
                                   MakeTensor<float>({}, {0.25f})}),
      MakeTensor<float>({3}, {-536870912.f, 0, 3086.25f}), 0, 0));
}

// ---- shrink ----

TEST(Shrink, Types) {
  EXPECT_EQ(Infer("shrink", {F32({2, 3})}), "f32[2, 3]");
  EXPECT_EQ(Infer("shrink", {T({4}, DType::kUInt8)}), "u8[4]");
  EXPECT_EQ(Infer("shrink", {TensorType({S("n")}, DType::kFloat16)}), "f16[n]");
  EXPECT_EQ(OpRegistry::Global().Get("shrink").pattern, OpPattern::kElementwise);
}

TEST(Shrink, Errors) {
  EXPECT_THAT(InferError("shrink", {T({2}, DType::kBool)}), HasSubstr("x must be"));
  EXPECT_THAT(InferError("shrink", {F32({2})}, {{"lambd", std::nan("")}}),
              AllOf(HasSubstr("attribute 'lambd'"), HasSubstr("must not be NaN")));
}

TEST(ShrinkKernel, HandComputed) {
  Tensor x = MakeTensor<float>({5}, {-2, -1, 0, 1, 2});
  // ONNX's test_shrink_soft (lambd 1.5, bias 1.5) and test_shrink_hard (lambd 1.5, bias 0).
  EXPECT_TRUE(TensorsNear(RunOne("shrink", {x}, {{"lambd", 1.5}, {"bias", 1.5}}),
                          MakeTensor<float>({5}, {-0.5f, 0, 0, 0, 0.5f}), 0, 0));
  EXPECT_TRUE(TensorsNear(RunOne("shrink", {x}, {{"lambd", 1.5}}),
                          MakeTensor<float>({5}, {-2, 0, 0, 0, 2}), 0, 0));
  // The defaults: lambd 0.5, bias 0; the bounds themselves map to 0.
  EXPECT_TRUE(TensorsNear(RunOne("shrink", {MakeTensor<float>({4}, {-0.5f, 0.5f, 0.6f, kNaN})}),
                          MakeTensor<float>({4}, {0, 0, 0.6f, 0}), 0, 0));
  // Integers: computed in double and truncated; an unsigned result saturates at 0.
  EXPECT_TRUE(TensorsNear(RunOne("shrink", {MakeTensor<int8_t>({5}, {-128, -3, 0, 3, 127})},
                                 {{"lambd", 2.0}, {"bias", 1.5}}),
                          MakeTensor<int8_t>({5}, {-126, -1, 0, 1, 125}), 0, 0));
  EXPECT_TRUE(TensorsNear(
      RunOne("shrink", {MakeTensor<uint8_t>({3}, {1, 5, 255})}, {{"lambd", 0.0}, {"bias", 3.0}}),
      MakeTensor<uint8_t>({3}, {0, 2, 252}), 0, 0));
}

}  // namespace
}  // namespace kiln
