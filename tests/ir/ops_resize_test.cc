// The resize family. resize: its type relation (scales and sizes, symbolic dims), the errors
// with their messages, and the reference kernel against hand-computed examples and ONNX's
// published ones for every mode, coordinate transform and nearest rounding. grid_sample: the
// same for every mode, padding mode and align_corners.
#include <gmock/gmock.h>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::F32;
using test::Floats;
using test::I64;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

Attrs Scales(Doubles s, Attrs more = {}) {
  more.Set("scales", std::move(s));
  return more;
}
Attrs Sizes(Ints s, Attrs more = {}) {
  more.Set("sizes", std::move(s));
  return more;
}
AttrValue Str(const char* s) {
  return std::string(s);
}

// 1 .. 16 as a [1, 1, 4, 4] image, ONNX's example input.
Tensor Image4x4() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  return Floats({1, 1, 4, 4}, v);
}

// ---- type relation ----

TEST(Resize, Shapes) {
  // out = floor(in * scale), computed in double: 4 * 0.6 = 2.4 -> 2; 5 * 0.5 -> 2.
  EXPECT_EQ(Infer("resize", {F32({1, 3, 4, 5})}, Scales({1, 1, 0.6, 0.5})), "f32[1, 3, 2, 2]");
  EXPECT_EQ(Infer("resize", {F32({1, 3, 4, 5})}, Scales({1, 1, 2, 3})), "f32[1, 3, 8, 15]");
  EXPECT_EQ(Infer("resize", {F32({2, 3, 4})}, Sizes({1, 7, 9})), "f32[1, 7, 9]");
  EXPECT_EQ(Infer("resize", {F32({7})}, Scales({0.1})), "f32[0]");
  EXPECT_EQ(Infer("resize", {TensorType({2, 2}, DType::kInt32)}, Scales({2, 1})), "i32[4, 2]");
  EXPECT_EQ(Infer("resize", {TensorType({2, 2}, DType::kFloat16)},
                  Scales({2, 2}, {{"mode", Str("cubic")}})),
            "f16[4, 4]");
}

TEST(Resize, SymbolicDims) {
  // A scale of 1 keeps the dim; a whole-number scale multiplies it; sizes replace it.
  EXPECT_EQ(Infer("resize", {F32({S("n"), 3, 4, 4})}, Scales({1, 1, 2, 2})), "f32[n, 3, 8, 8]");
  EXPECT_EQ(Infer("resize", {F32({1, 3, S("h"), S("w")})}, Scales({1, 1, 2, 3})),
            "f32[1, 3, h * 2, w * 3]");
  EXPECT_EQ(Infer("resize", {F32({S("n"), 3, S("h"), 4})}, Sizes({2, 3, 5, 6})), "f32[2, 3, 5, 6]");
  EXPECT_THAT(InferError("resize", {F32({1, S("h")})}, Scales({1, 1.5})),
              HasSubstr("dim 1 of x [1, h] is symbolic, so its scale 1.5 must be 1 or a whole "
                        "number"));
}

TEST(Resize, Errors) {
  Type x = F32({1, 1, 4, 4});
  EXPECT_THAT(InferError("resize", {x}), HasSubstr("neither scales nor sizes is given"));
  EXPECT_THAT(InferError("resize", {x}, Sizes({1, 1, 2, 2}, Scales({1, 1, 2, 2}))),
              HasSubstr("scales and sizes are both given; give exactly one"));
  EXPECT_THAT(InferError("resize", {x}, Scales({2, 2})),
              HasSubstr("scales [2.0, 2.0] must have one value per dim of x [1, 1, 4, 4] (4)"));
  EXPECT_THAT(InferError("resize", {x}, Sizes({1, 1, 2})),
              HasSubstr("sizes [1, 1, 2] must have one value per dim of x [1, 1, 4, 4] (4)"));
  EXPECT_THAT(InferError("resize", {x}, Scales({1, 1, 0, 2})),
              HasSubstr("must be positive and finite, got 0.0"));
  EXPECT_THAT(InferError("resize", {x}, Sizes({1, 1, -2, 2})), HasSubstr("must not be negative"));
  EXPECT_THAT(InferError("resize", {x}, Scales({1, 1, 2, 2}, {{"mode", Str("bilinear")}})),
              HasSubstr("must be one of nearest, linear, cubic, got \"bilinear\""));
  EXPECT_THAT(InferError("resize", {x},
                         Scales({1, 1, 2, 2}, {{"coordinate_transformation_mode", Str("edge")}})),
              HasSubstr("must be one of half_pixel, pytorch_half_pixel"));
  EXPECT_THAT(InferError("resize", {x}, Scales({1, 1, 2, 2}, {{"nearest_mode", Str("round")}})),
              HasSubstr("must be one of round_prefer_floor"));
  EXPECT_THAT(InferError("resize", {TensorType({1, 4}, DType::kInt32)},
                         Scales({1, 2}, {{"mode", Str("linear")}})),
              HasSubstr("mode linear needs a float input (f32, f16, bf16, f64), got i32[1, 4]"));
  EXPECT_THAT(
      InferError("resize", {x},
                 Sizes({1, 1, 2, 2}, {{"coordinate_transformation_mode", Str("tf_crop_and_resize")},
                                      {"roi", Doubles{0, 0, 1, 1}}})),
      HasSubstr("tf_crop_and_resize needs a roi of 8 values (the starts of every dim, then the "
                "ends), got 4"));
  EXPECT_THAT(InferError("resize", {F32({1, 0})}, Sizes({1, 3})),
              HasSubstr("dim 1 of x [1, 0] is empty and cannot be resized to size 3"));
}

// ---- reference kernel ----

TEST(Resize, NearestExamples) {
  // ONNX's upsample example: half_pixel with scales 2 and 3, round_prefer_floor.
  Tensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsNear(RunOne("resize", {x}, Scales({1, 1, 2, 3})),
                          Floats({1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4})));
  // Downsampling [1, 1, 2, 4] by 0.6: rows x = (0 + 0.5) / 0.6 - 0.5 = 0.33 -> 0; columns
  // 0.33 -> 0 and 2.0 -> 2.
  Tensor y = Floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {y}, Scales({1, 1, 0.6f, 0.6f})), Floats({1, 1, 1, 2}, {1, 3})));
  // Asymmetric upsampling by 2 puts x on the halves 0, 0.5, 1, 1.5, ...: each rounding.
  Tensor v = Floats({4}, {10, 20, 30, 40});
  auto nearest = [&](const char* rounding) {
    return RunOne("resize", {v},
                  Sizes({8}, {{"coordinate_transformation_mode", Str("asymmetric")},
                              {"nearest_mode", Str(rounding)}}));
  };
  EXPECT_TRUE(
      TensorsNear(nearest("round_prefer_floor"), Floats({8}, {10, 10, 20, 20, 30, 30, 40, 40})));
  EXPECT_TRUE(
      TensorsNear(nearest("round_prefer_ceil"), Floats({8}, {10, 20, 20, 30, 30, 40, 40, 40})));
  EXPECT_TRUE(TensorsNear(nearest("floor"), Floats({8}, {10, 10, 20, 20, 30, 30, 40, 40})));
  EXPECT_TRUE(TensorsNear(nearest("ceil"), Floats({8}, {10, 20, 20, 30, 30, 40, 40, 40})));
  // simple (Resize-10): floor when upsampling, ceil when downsampling: 4 -> 2 by 0.6 reads
  // x = 0 and 1.67 -> 2.
  EXPECT_TRUE(TensorsNear(nearest("simple"), Floats({8}, {10, 10, 20, 20, 30, 30, 40, 40})));
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {v},
                         Scales({0.6}, {{"coordinate_transformation_mode", Str("asymmetric")},
                                        {"nearest_mode", Str("simple")}})),
                  Floats({2}, {10, 30})));
  // tf_half_pixel_for_nn (ONNX's Resize-11 case): x = (o + 0.5) / scale, rounded.
  EXPECT_TRUE(TensorsNear(RunOne("resize", {Image4x4()},
                                 Sizes({1, 1, 3, 2}, {{"coordinate_transformation_mode",
                                                       Str("tf_half_pixel_for_nn")}})),
                          Floats({1, 1, 3, 2}, {6, 8, 10, 12, 14, 16})));
  // Integers move unchanged.
  Tensor i = MakeTensor<int64_t>({3}, {int64_t{1} << 60, -7, 5});
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {i}, Scales({2})),
                  MakeTensor<int64_t>({6}, {int64_t{1} << 60, int64_t{1} << 60, -7, -7, 5, 5})));
}

TEST(Resize, LinearExamples) {
  // Upsampling [[1, 2], [3, 4]] by 2 (half_pixel): x = -0.25, 0.25, 0.75, 1.25 per dim, weights
  // 0.75/0.25 between the clamped neighbours.
  Tensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  Attrs linear = {{"mode", Str("linear")}};
  EXPECT_TRUE(TensorsNear(RunOne("resize", {x}, Scales({1, 1, 2, 2}, linear)),
                          Floats({1, 1, 4, 4}, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75,
                                                3.25, 3.5, 3, 3.25, 3.75, 4})));
  // ONNX's downsampling examples: half_pixel, and align_corners, which divides by the
  // unrounded out_width - 1 = 4 * 0.6 - 1.
  Tensor y = Floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(TensorsNear(RunOne("resize", {y}, Scales({1, 1, 0.6f, 0.6f}, linear)),
                          Floats({1, 1, 1, 2}, {2.6666665f, 4.3333335f})));
  Attrs corners = {{"mode", Str("linear")},
                   {"coordinate_transformation_mode", Str("align_corners")}};
  EXPECT_TRUE(TensorsNear(RunOne("resize", {y}, Scales({1, 1, 0.6f, 0.6f}, corners)),
                          Floats({1, 1, 1, 2}, {1, 3.142857f})));
  // pytorch_half_pixel maps a length-1 output to -0.5 (ONNX's example).
  EXPECT_TRUE(TensorsNear(
      RunOne("resize", {Image4x4()},
             Sizes({1, 1, 3, 1}, {{"mode", Str("linear")},
                                  {"coordinate_transformation_mode", Str("pytorch_half_pixel")}})),
      Floats({1, 1, 3, 1}, {1.6666666f, 7, 12.333333f})));
  // Every dim with a scale other than 1 is interpolated (values from ONNX's reference).
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(std::pow(i, 1.5));
  EXPECT_TRUE(TensorsNear(
      RunOne("resize", {Floats({2, 3, 2}, v)}, Scales({1.5f, 0.7f, 2}, linear)),
      Floats({3, 2, 4}, {0.60609156f, 0.92936254f, 1.5759045f, 1.8991755f, 6.1530099f, 6.8755398f,
                         8.3206005f,  9.0431299f,  8.5012093f, 9.1554718f, 10.463998f, 11.118261f,
                         17.281578f,  18.228592f,  20.122618f, 21.069632f, 16.396326f, 17.381582f,
                         19.352093f,  20.337347f,  28.410149f, 29.581644f, 31.924637f, 33.096134f}),
      1e-5, 1e-6));
}

TEST(Resize, CubicExamples) {
  // ONNX's examples on the 4x4 image scaled by 0.8: A = -0.75, then A = -0.5 with
  // exclude_outside.
  Attrs cubic = {{"mode", Str("cubic")}};
  EXPECT_TRUE(TensorsNear(
      RunOne("resize", {Image4x4()}, Scales({1, 1, 0.8f, 0.8f}, cubic)),
      Floats({1, 1, 3, 3}, {1.47119141f, 2.78125f, 4.08251953f, 6.71142578f, 8.02148438f,
                            9.32275391f, 11.91650391f, 13.2265625f, 14.52783203f})));
  Attrs excl = {{"mode", Str("cubic")}, {"cubic_coeff_a", -0.5}, {"exclude_outside", true}};
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {Image4x4()}, Scales({1, 1, 0.8f, 0.8f}, excl)),
                  Floats({1, 1, 3, 3}, {1.36812675f, 2.6695014f, 4.0133367f, 6.57362535f, 7.875f,
                                        9.2188353f, 11.94896657f, 13.25034122f, 14.59417476f})));
  // 1-D, asymmetric, upsampled 5 -> 8 (values from ONNX's reference): x = 0 reads only
  // element 0, x = 0.625 blends elements -1 (clamped to 0) .. 2.
  Attrs asym = {{"mode", Str("cubic")}, {"coordinate_transformation_mode", Str("asymmetric")}};
  EXPECT_TRUE(TensorsNear(RunOne("resize", {Floats({5}, {3, -1, 4, 1, 5})}, Sizes({8}, asym)),
                          Floats({8}, {3, -0.10791015625f, -0.18359375f, 3.65185546875f, 2.59375f,
                                       1.20263671875f, 3.98828125f, 5.439453125f})));
}

TEST(Resize, TfCropAndResize) {
  // ONNX's example: roi [0.4, 0.6] .. [1.2, 1.7] on the 4x4 image, 3x3 out; coordinates past
  // the input give extrapolation_value.
  Attrs crop = {{"mode", Str("linear")},
                {"coordinate_transformation_mode", Str("tf_crop_and_resize")},
                {"roi", Doubles{0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}},
                {"extrapolation_value", 10.0}};
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {Image4x4()}, Sizes({1, 1, 3, 3}, crop)),
                  Floats({1, 1, 3, 3}, {7.6000004f, 10, 10, 12.400001f, 10, 10, 10, 10, 10})));
  // Nearest on integers: the extrapolation value is stored as the dtype holds it.
  Attrs nearest = crop;
  nearest.Set("mode", Str("nearest"));
  nearest.Set("extrapolation_value", -1.0);
  nearest.Set("roi", Doubles{0.5, 1.5});
  EXPECT_TRUE(
      TensorsNear(RunOne("resize", {MakeTensor<int32_t>({3}, {4, 5, 6})}, Sizes({3}, nearest)),
                  MakeTensor<int32_t>({3}, {5, 6, -1})));
}

// ---- grid_sample ----

Attrs Gs(const char* mode, const char* padding = "zeros", bool align_corners = false) {
  return {{"mode", Str(mode)}, {"padding_mode", Str(padding)}, {"align_corners", align_corners}};
}

TEST(GridSample, Shapes) {
  EXPECT_EQ(Infer("grid_sample", {F32({2, 3, 5, 7}), F32({2, 4, 6, 2})}), "f32[2, 3, 4, 6]");
  // The output has x's dtype; the grid may be another float.
  EXPECT_EQ(
      Infer("grid_sample",
            {TensorType({1, 2, 3, 3}, DType::kFloat16), TensorType({1, 1, 9, 2}, DType::kFloat64)},
            Gs("bicubic")),
      "f16[1, 2, 1, 9]");
  // nearest only moves elements: any dtype.
  EXPECT_EQ(Infer("grid_sample", {TensorType({1, 1, 2, 2}, DType::kInt32), F32({1, 3, 3, 2})},
                  Gs("nearest")),
            "i32[1, 1, 3, 3]");
}

TEST(GridSample, SymbolicDims) {
  EXPECT_EQ(Infer("grid_sample",
                  {F32({S("n"), S("c"), S("h"), S("w")}), F32({S("n"), S("ho"), S("wo"), 2})}),
            "f32[n, c, ho, wo]");
  // A symbolic batch dim against a constant one is a constraint, and the output takes the
  // constant.
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("grid_sample", {F32({S("n"), 3, 4, 4}), F32({2, 5, 5, 2})}, {}, &constraints),
            "f32[2, 3, 5, 5]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_THAT(constraints[0].ToString(),
              HasSubstr("the batch dim of x [n, 3, 4, 4] and grid [2, 5, 5, 2]: n == 2"));
}

TEST(GridSample, Errors) {
  Type x = F32({1, 1, 4, 4}), grid = F32({1, 2, 2, 2});
  EXPECT_THAT(InferError("grid_sample", {F32({1, 4, 4}), grid}),
              HasSubstr("x must have rank 4 [N, C, H, W], got f32[1, 4, 4]"));
  EXPECT_THAT(InferError("grid_sample", {x, F32({1, 2, 2})}),
              HasSubstr("grid must have rank 4 [N, Hout, Wout, 2], got f32[1, 2, 2]"));
  EXPECT_THAT(InferError("grid_sample", {x, F32({1, 2, 2, 3})}),
              HasSubstr("the last dim of grid [1, 2, 2, 3] must be 2"));
  EXPECT_THAT(InferError("grid_sample", {x, F32({1, 2, 2, S("k")})}),
              HasSubstr("the last dim of grid [1, 2, 2, k] must be 2"));
  EXPECT_THAT(InferError("grid_sample", {x, TensorType({1, 2, 2, 2}, DType::kInt64)}),
              HasSubstr("grid must be a float tensor (f32, f16, bf16, f64), got i64[1, 2, 2, 2]"));
  EXPECT_THAT(InferError("grid_sample", {TensorType({1, 1, 4, 4}, DType::kInt8), grid}),
              HasSubstr("mode bilinear needs a float x (f32, f16, bf16, f64), got i8[1, 1, 4, 4]"));
  EXPECT_THAT(InferError("grid_sample", {F32({2, 1, 4, 4}), F32({3, 2, 2, 2})}),
              HasSubstr("the batch dim of x [2, 1, 4, 4] and grid [3, 2, 2, 2]"));
  EXPECT_THAT(InferError("grid_sample", {F32({1, 1, 0, 4}), grid}),
              HasSubstr("dim 2 of x [1, 1, 0, 4] is empty: there is nothing to sample"));
  EXPECT_THAT(InferError("grid_sample", {x, grid}, Gs("linear")),
              HasSubstr("must be one of bilinear, nearest, bicubic, got \"linear\""));
  EXPECT_THAT(InferError("grid_sample", {x, grid}, Gs("nearest", "edge")),
              HasSubstr("must be one of zeros, border, reflection, got \"edge\""));
}

// ONNX's examples: x [[0, 1], [2, 3], [4, 5]] (H 3, W 2).
Tensor Gs3x2() {
  return Floats({1, 1, 3, 2}, {0, 1, 2, 3, 4, 5});
}

TEST(GridSample, OnnxModeExamples) {
  Tensor grid = Floats({1, 2, 4, 2}, {-1, -1, -0.5f, -0.5f, -0.2f, -0.2f, 0, 0,  //
                                      0, 0, -0.2f, -0.2f, 0.5f, 0.5f, 1, 1});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bilinear")),
                          Floats({1, 1, 2, 4}, {0, 0.5f, 1.7f, 2.5f, 2.5f, 1.7f, 4.5f, 1.25f})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bilinear", "zeros", true)),
                          Floats({1, 1, 2, 4}, {0, 1.25f, 2, 2.5f, 2.5f, 2, 3.75f, 5})));
  // nearest rounds half to even: (0, 0) is x = 0.5 -> 0, y = 1; (1, 1) is x = 1.5 -> 2, outside.
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("nearest")),
                          Floats({1, 1, 2, 4}, {0, 0, 2, 2, 2, 2, 5, 0})));
  // ONNX publishes these to 4 decimals.
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bicubic")),
                          Floats({1, 1, 2, 4}, {-0.1406f, 0.3828f, 1.7556f, 2.9688f, 2.9688f,
                                                1.7556f, 5.1445f, 1.3906f}),
                          1e-4, 0));
}

TEST(GridSample, OnnxPaddingExamples) {
  // Points far outside: reflection folds (-10, -10), i.e. x = -9.5, y = -14, back to
  // x = 0.5, y = 1: (2 + 3) / 2.
  Tensor grid = Floats({1, 2, 4, 2}, {-10, -10, -5, -5, -0.2f, -0.2f, 10, 10,  //
                                      10, 10, -0.2f, -0.2f, 5, 5, 10, 10});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bilinear", "zeros")),
                          Floats({1, 1, 2, 4}, {0, 0, 1.7f, 0, 0, 1.7f, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bilinear", "border")),
                          Floats({1, 1, 2, 4}, {0, 0, 1.7f, 5, 5, 1.7f, 5, 5})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {Gs3x2(), grid}, Gs("bilinear", "reflection")),
                          Floats({1, 1, 2, 4}, {2.5f, 0, 1.7f, 2.5f, 2.5f, 1.7f, 5, 2.5f})));
}

// A single row [1, 2, 4, 8]: with H = 1 and y = 0 every mode reads only row 0 with weight 1, so
// each output is the 1-D interpolation at x, where (align_corners 0) x = 2 * gx + 1.5 and the
// padding range is [-0.5, 3.5].
Tensor GsRow() {
  return Floats({1, 1, 1, 4}, {1, 2, 4, 8});
}
Tensor RowGrid(const std::vector<float>& gx) {
  std::vector<float> g;
  for (float v : gx) g.insert(g.end(), {v, 0});
  return Floats({1, 1, static_cast<int64_t>(gx.size()), 2}, g);
}
Tensor Row(const std::vector<float>& v) {
  return Floats({1, 1, 1, static_cast<int64_t>(v.size())}, v);
}

TEST(GridSample, NearestPadding) {
  // x = -1, 0.5 (-> 0), 1.5 (-> 2), 4, 5.5 (-> 6).
  Tensor grid = RowGrid({-1.25f, -0.5f, 0, 1.25f, 2});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("nearest", "zeros")),
                          Row({0, 1, 4, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("nearest", "border")),
                          Row({1, 1, 4, 8, 8})));
  // Reflection about -0.5 and 3.5: -1 -> 0, 4 -> 3, 6 -> 1.
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("nearest", "reflection")),
                          Row({1, 1, 4, 8, 2})));
  // Integers move unchanged; zeros padding gives 0.
  Tensor ints = MakeTensor<int64_t>({1, 1, 1, 4}, {int64_t{1} << 60, -7, 5, 9});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {ints, grid}, Gs("nearest")),
                          MakeTensor<int64_t>({1, 1, 1, 5}, {0, int64_t{1} << 60, 5, 0, 0})));
}

TEST(GridSample, BilinearPadding) {
  // x = -1 (tap -1 weighs 1), -0.5 (half of tap -1, half of 0), 3.5, and, reflected,
  // 6.7 -> 0.3 and -5.1 -> 2.9 (after one crossing of the whole range 4: from 3.5 down by 0.6).
  Tensor grid = RowGrid({-1.25f, -1, 1, 2.6f, -3.3f});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bilinear", "zeros")),
                          Row({0, 0.5f, 4, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bilinear", "border")),
                          Row({1, 1, 8, 8, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bilinear", "reflection")),
                          Row({1, 1, 8, 0.7f * 1 + 0.3f * 2, 0.1f * 4 + 0.9f * 8})));
  // align_corners: x = 1.5 * (gx + 1), the range [0, 3]. 3.75 reflects to 2.25, -0.75 to 0.75;
  // border clamps them to 3 and 0; zeros blends them with the 0 past the edge; 1.65 is inside.
  Tensor corners = RowGrid({1.5f, -1.5f, 0.1f});
  EXPECT_TRUE(
      TensorsNear(RunOne("grid_sample", {GsRow(), corners}, Gs("bilinear", "reflection", true)),
                  Row({0.75f * 4 + 0.25f * 8, 0.25f * 1 + 0.75f * 2, 0.35f * 2 + 0.65f * 4})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), corners}, Gs("bilinear", "border", true)),
                          Row({8, 1, 0.35f * 2 + 0.65f * 4})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), corners}, Gs("bilinear", "zeros", true)),
                          Row({0.25f * 8, 0.25f * 1, 0.35f * 2 + 0.65f * 4})));
}

TEST(GridSample, BicubicPadding) {
  // x = -0.5: taps -2 .. 1 with fraction 0.5, whose Keys weights (A = -0.75) are
  // -0.09375, 0.59375, 0.59375, -0.09375. zeros reads 0 at -2 and -1; border reads x[0] there;
  // reflection reads x[1] and x[0]. x = -1.5 reads taps -3 .. 0 under zeros (only x[0], by the
  // last weight); it is outside [-0.5, 3.5], so border clamps the coordinate to 0 first (ONNX's
  // reference; PyTorch would not), reading only x[0] with weight 1.
  Tensor grid = RowGrid({-1, -1.5f});
  const float w0 = -0.09375f, w1 = 0.59375f;
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bicubic", "zeros")),
                          Row({w1 * 1 + w0 * 2, w0 * 1})));
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bicubic", "border")),
                          Row({(w0 + w1 + w1) * 1 + w0 * 2, 1})));
  // Reflected, -1.5 becomes 0.5: taps -1 .. 2 read x[0], x[0], x[1], x[2].
  EXPECT_TRUE(
      TensorsNear(RunOne("grid_sample", {GsRow(), grid}, Gs("bicubic", "reflection")),
                  Row({w0 * 2 + w1 * 1 + w1 * 1 + w0 * 2, (w0 + w1) * 1 + w1 * 2 + w0 * 4})));
  // align_corners on a 1x1 input: the padding range is the single point 0, where every tap
  // reflects to (and every coordinate is) 0; the weights sum to 1.
  Tensor one = Floats({1, 1, 1, 1}, {3.5f});
  Tensor points = Floats({1, 1, 3, 2}, {-1.3f, 0.2f, 0.9f, 1.3f, 0, 0});
  EXPECT_TRUE(TensorsNear(RunOne("grid_sample", {one, points}, Gs("bicubic", "reflection", true)),
                          Floats({1, 1, 1, 3}, {3.5f, 3.5f, 3.5f})));
}

TEST(GridSample, BatchesAndChannels) {
  // Each batch reads its own grid, each channel its own plane: x = 0.5 averages the row, x = 1
  // reads element 1.
  Tensor x = Floats({2, 2, 1, 2}, {1, 2, 10, 20, 3, 5, 30, 50});
  Tensor grid = Floats({2, 1, 1, 2}, {0, 0, 0.5f, 0});
  EXPECT_TRUE(
      TensorsNear(RunOne("grid_sample", {x, grid}), Floats({2, 2, 1, 1}, {1.5f, 15, 5, 50})));
  // An f64 grid computes the coordinates in double; the same points give the same values.
  Tensor grid64 = MakeTensor<double>({2, 1, 1, 2}, {0, 0, 0.5, 0});
  EXPECT_TRUE(
      TensorsNear(RunOne("grid_sample", {x, grid64}), Floats({2, 2, 1, 1}, {1.5f, 15, 5, 50})));
}

// ---- roi_align ----

Attrs Roi(const char* coord, const char* mode, int64_t sampling_ratio, Attrs more = {}) {
  more.Set("coordinate_transformation_mode", Str(coord));
  more.Set("mode", Str(mode));
  more.Set("sampling_ratio", sampling_ratio);
  return more;
}

// Region r of `rois` (x1, y1, x2, y2) of image 0 of Image4x4, pooled to one bin.
Tensor RoiOne(const std::vector<float>& roi, const Attrs& attrs) {
  return RunOne("roi_align", {Image4x4(), Floats({1, 4}, roi), MakeTensor<int64_t>({1}, {0})},
                attrs);
}

TEST(RoiAlign, Shapes) {
  EXPECT_EQ(Infer("roi_align", {F32({2, 3, 10, 10}), F32({5, 4}), I64({5})},
                  {{"output_height", int64_t{2}}, {"output_width", int64_t{3}}}),
            "f32[5, 3, 2, 3]");
  EXPECT_EQ(Infer("roi_align", {F32({S("n"), 3, S("h"), S("w")}), F32({S("r"), 4}), I64({S("r")})}),
            "f32[r, 3, 1, 1]");
  EXPECT_EQ(
      Infer("roi_align", {TensorType({1, 2, 4, 4}, DType::kFloat16),
                          TensorType({3, 4}, DType::kFloat16), TensorType({3}, DType::kInt32)}),
      "f16[3, 2, 1, 1]");
}

TEST(RoiAlign, Errors) {
  const Type x = F32({1, 1, 4, 4}), rois = F32({2, 4}), batch = I64({2});
  EXPECT_THAT(InferError("roi_align", {F32({1, 4, 4}), rois, batch}),
              HasSubstr("x must have rank 4 [N, C, H, W], got f32[1, 4, 4]"));
  EXPECT_THAT(InferError("roi_align", {x, F32({2, 5}), batch}),
              HasSubstr("rois must be [num_rois, 4] (x1, y1, x2, y2), got f32[2, 5]"));
  EXPECT_THAT(InferError("roi_align", {x, TensorType({2, 4}, DType::kFloat64), batch}),
              HasSubstr("rois f64[2, 4] must have the dtype of x f32[1, 1, 4, 4]"));
  EXPECT_THAT(InferError("roi_align", {x, rois, F32({2})}),
              HasSubstr("batch_indices must be a 1-D integer tensor [num_rois], got f32[2]"));
  EXPECT_THAT(InferError("roi_align", {x, rois, I64({3})}),
              HasSubstr("the region count of rois [2, 4] and batch_indices [3]"));
  EXPECT_THAT(InferError("roi_align", {F32({1, 1, 0, 4}), rois, batch}),
              HasSubstr("dim 2 of x [1, 1, 0, 4] is empty"));
  EXPECT_THAT(InferError("roi_align", {TensorType({1, 1, 4, 4}, DType::kInt32), rois, batch}),
              HasSubstr("a float dtype (f32, f16, bf16, f64)"));
  EXPECT_THAT(InferError("roi_align", {x, rois, batch}, {{"mode", Str("sum")}}),
              HasSubstr("must be one of avg, max, got \"sum\""));
  EXPECT_THAT(InferError("roi_align", {x, rois, batch}, {{"output_width", int64_t{0}}}),
              HasSubstr("must be at least 1, got 0"));
  EXPECT_THAT(InferError("roi_align", {x, rois, batch}, {{"sampling_ratio", int64_t{-1}}}),
              HasSubstr("must not be negative, got -1"));
  EXPECT_THAT(test::ErrorMessage([] {
                RunOne("roi_align",
                       {Image4x4(), Floats({1, 4}, {0, 0, 1, 1}), MakeTensor<int64_t>({1}, {1})});
              }),
              HasSubstr("batch_indices[0] = 1 is outside [0, 1)"));
}

TEST(RoiAlign, HandComputed) {
  // Image4x4 is x[h, w] = 4 h + w + 1, which bilinear sampling reproduces inside the image.
  // Region (0, 0)-(2, 2), 2 x 2 samples at 0.5 and 1.5: their mean is x at (1, 1) = 6.
  EXPECT_TRUE(TensorsNear(RoiOne({0, 0, 2, 2}, Roi("output_half_pixel", "avg", 2)),
                          Floats({1, 1, 1, 1}, {6})));
  // half_pixel shifts the region by -0.5: (0.5, 0.5)-(2.5, 2.5) samples the same points.
  EXPECT_TRUE(TensorsNear(RoiOne({0.5, 0.5, 2.5, 2.5}, Roi("half_pixel", "avg", 2)),
                          Floats({1, 1, 1, 1}, {6})));
  // max: the largest weighted tap; at sample (1.5, 1.5) each tap weighs 1/4, and 11 / 4 wins.
  EXPECT_TRUE(TensorsNear(RoiOne({0, 0, 2, 2}, Roi("output_half_pixel", "max", 2)),
                          Floats({1, 1, 1, 1}, {2.75})));
  // Adaptive grid: a 3-wide region in one bin takes ceil(3 / 1) = 3 samples per axis, at 0.5,
  // 1.5, 2.5, whose mean is x at (1.5, 1.5) = 8.5.
  EXPECT_TRUE(TensorsNear(RoiOne({0, 0, 3, 3}, Roi("output_half_pixel", "avg", 0)),
                          Floats({1, 1, 1, 1}, {8.5})));
  // A sample at x = -5 (< -1) reads 0; one at (4, 4) (= H, W) is clamped to x[3, 3] = 16.
  EXPECT_TRUE(TensorsNear(RoiOne({-6, 0, -4, 2}, Roi("output_half_pixel", "avg", 1)),
                          Floats({1, 1, 1, 1}, {0})));
  EXPECT_TRUE(TensorsNear(RoiOne({3, 3, 5, 5}, Roi("output_half_pixel", "max", 1)),
                          Floats({1, 1, 1, 1}, {16})));
  // output_half_pixel makes an empty region 1 x 1 (one sample at 0.5, 0.5: 3.5); half_pixel
  // leaves it empty, with no samples: 0.
  EXPECT_TRUE(TensorsNear(RoiOne({0, 0, 0, 0}, Roi("output_half_pixel", "avg", 0)),
                          Floats({1, 1, 1, 1}, {3.5})));
  EXPECT_TRUE(
      TensorsNear(RoiOne({1, 1, 1, 1}, Roi("half_pixel", "max", 0)), Floats({1, 1, 1, 1}, {0})));
  // Two bins across a 2-wide region with spatial_scale 0.5 (the region (0, 0)-(4, 2) in the
  // caller's coordinates): one sample per bin at x = 0.5 and 1.5, y = 1.
  EXPECT_TRUE(
      TensorsNear(RoiOne({0, 0, 4, 4}, Roi("output_half_pixel", "avg", 1,
                                           {{"output_width", int64_t{2}}, {"spatial_scale", 0.5}})),
                  Floats({1, 1, 1, 2}, {4 * 1.0 + 0.5 + 1, 4 * 1.0 + 1.5 + 1})));
}

}  // namespace
}  // namespace kiln
