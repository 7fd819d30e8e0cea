// The resize op: its type relation (scales and sizes, symbolic dims), the errors with their
// messages, and the reference kernel against hand-computed examples and ONNX's published ones
// for every mode, coordinate transform and nearest rounding.
#include <gmock/gmock.h>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::F32;
using test::Floats;
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

}  // namespace
}  // namespace kiln
