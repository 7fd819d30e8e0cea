// Lowering of the resize family. resize: each case compiled and compared with the reference kernel
// on random data, over every mode, coordinate transform and nearest rounding, size-1 inputs and
// outputs (which take the out_width == 1 branches), odd sizes, a larger image, f64/f16/integer
// dtypes, tf_crop_and_resize's extrapolation, exclude_outside, and ranks 1 and 3 with every dim
// resized.
//
// Shape-generic kernels (every dim > 1 symbolic) are compiled where the relation allows: scales
// of 1 or whole numbers, or sizes; there the geometry (scale, out_width) is computed at run time
// from the symbolic extents. Both sides compute the coordinates and weights with the same
// float64 formulas, so only the summation's rounding can differ: 1e-5 suffices, and f16 results
// are compared at f16 precision.
//
// grid_sample: every mode, padding mode and align_corners on random grids spanning [-1.3, 1.3]
// (so that points and taps fall outside x and every padding path runs), size-1 inputs and
// outputs, odd sizes, a larger case, an f64 grid (float64 coordinates), f16 and integer x, and
// shape-generic kernels. The coordinates are float32 on both sides, but the compiled kernel may
// contract a multiply-add into one rounding (fp_contract), which moves a coordinate by an ulp:
// the interpolation is continuous, so results differ by about that much (1e-4 on values in
// [-4, 4]), and a nearest tie it could flip has probability ~1e-7 per point.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::AttrsText;

using test::CompiledMatchesReference;
using test::RandomTensor;
using test::RunCompiled;
using test::TensorsNear;

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

AttrValue Str(const char* s) {
  return std::string(s);
}

struct Case {
  Ints x;
  Attrs attrs;
  bool symbolic;  // also compile shape-generic (the relation allows symbolic dims)
};

void ExpectMatches(const std::vector<Case>& cases, DType t, uint64_t seed, double tol = 1e-5) {
  for (const Case& c : cases) {
    Tensor x = RandomTensor(t, c.x, seed++, -4, 4);
    EXPECT_TRUE(CompiledMatchesReference("resize", {x}, c.attrs, tol, tol, c.symbolic))
        << DTypeName(t) << " " << IntsToString(c.x) << AttrsText(c.attrs);
  }
}

const char* const kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                               "tf_half_pixel_for_nn"};

TEST(LowerResize, LinearAndCubicEveryCoordinate) {
  std::vector<Case> cases;
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : kCoords) {
      // Up in one dim, down in the other (odd sizes), by scales.
      cases.push_back({{2, 3, 5, 7},
                       {{"mode", Str(mode)},
                        {"coordinate_transformation_mode", Str(coord)},
                        {"scales", Doubles{1, 1, 1.6, 0.7}}},
                       false});
    }
  }
  ExpectMatches(cases, DType::kFloat32, 1);
}

TEST(LowerResize, NearestEveryRounding) {
  std::vector<Case> cases;
  for (const char* rounding :
       {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"})
    for (const char* coord : {"half_pixel", "asymmetric", "align_corners"})
      cases.push_back({{1, 2, 6, 5},
                       {{"coordinate_transformation_mode", Str(coord)},
                        {"nearest_mode", Str(rounding)},
                        {"sizes", Ints{1, 2, 12, 3}}},
                       false});
  ExpectMatches(cases, DType::kFloat32, 20);
}

TEST(LowerResize, SizeOne) {
  std::vector<Case> cases = {
      // A length-1 input read by every tap (clamped).
      {{1}, {{"mode", Str("linear")}, {"sizes", Ints{3}}}, false},
      {{1, 1}, {{"mode", Str("cubic")}, {"scales", Doubles{4, 1}}}, false},
      // Length-1 outputs: pytorch_half_pixel's -0.5 and align_corners' 0.
      {{5, 3},
       {{"mode", Str("linear")},
        {"coordinate_transformation_mode", Str("pytorch_half_pixel")},
        {"sizes", Ints{1, 1}}},
       false},
      {{5, 3},
       {{"mode", Str("cubic")},
        {"coordinate_transformation_mode", Str("align_corners")},
        {"sizes", Ints{1, 2}}},
       false},
      {{4, 1}, {{"sizes", Ints{1, 1}}}, false},
  };
  ExpectMatches(cases, DType::kFloat32, 40);
}

TEST(LowerResize, ExcludeOutsideAndCoeff) {
  std::vector<Case> cases;
  for (const char* mode : {"linear", "cubic"})
    cases.push_back({{1, 1, 6, 9},
                     {{"mode", Str(mode)},
                      {"exclude_outside", true},
                      {"cubic_coeff_a", -0.5},
                      {"scales", Doubles{1, 1, 1.5, 0.8}}},
                     false});
  ExpectMatches(cases, DType::kFloat32, 50);
}

TEST(LowerResize, TfCropAndResize) {
  // The roi of dim 1 crops with scale 1, so that dim is not an identity; coordinates past the
  // input give extrapolation_value.
  std::vector<Case> cases;
  for (const char* mode : {"nearest", "linear", "cubic"})
    cases.push_back({{2, 5, 6},
                     {{"mode", Str(mode)},
                      {"coordinate_transformation_mode", Str("tf_crop_and_resize")},
                      {"roi", Doubles{0, 0.2, -0.3, 1, 0.9, 1.4}},
                      {"extrapolation_value", 2.5},
                      {"sizes", Ints{2, 5, 9}}},
                     true});
  ExpectMatches(cases, DType::kFloat32, 60);
  ExpectMatches(cases, DType::kFloat64, 70);
}

TEST(LowerResize, Dtypes) {
  // Nearest moves integers (and bools) unchanged; extrapolation_value is stored as the dtype
  // holds it (-300 saturates in i8).
  Attrs nearest = {{"sizes", Ints{3, 7}}};
  Attrs crop = {{"coordinate_transformation_mode", Str("tf_crop_and_resize")},
                {"roi", Doubles{0.1, -0.5, 0.9, 1.2}},
                {"extrapolation_value", -300.0},
                {"sizes", Ints{3, 7}}};
  for (DType t : {DType::kInt32, DType::kInt64, DType::kInt8, DType::kBool}) {
    Tensor x = RandomTensor(t, {2, 4}, 80, -100, 100);
    EXPECT_TRUE(CompiledMatchesReference("resize", {x}, nearest, 0, 0)) << DTypeName(t);
    EXPECT_TRUE(CompiledMatchesReference("resize", {x}, crop, 0, 0)) << DTypeName(t);
  }
  Tensor h = RandomTensor(DType::kFloat16, {1, 2, 5, 4}, 81);
  EXPECT_TRUE(CompiledMatchesReference("resize", {h},
                                       {{"mode", Str("cubic")}, {"scales", Doubles{1, 1, 2, 0.75}}},
                                       1e-2, 1e-2, false));
}

TEST(LowerResize, RanksAndSymbolicDims) {
  std::vector<Case> cases = {
      // Every dim resized: rank 1 and rank 3 (multilinear, multicubic).
      {{7}, {{"mode", Str("cubic")}, {"scales", Doubles{1.7}}}, false},
      {{3, 4, 5}, {{"mode", Str("linear")}, {"scales", Doubles{1.5, 0.7, 2.2}}}, false},
      {{3, 4, 5}, {{"mode", Str("cubic")}, {"sizes", Ints{2, 7, 5}}}, true},
      // Whole-number scales and sizes on symbolic dims: scale and out_width at run time.
      {{2, 3, 4, 5}, {{"mode", Str("linear")}, {"scales", Doubles{1, 1, 2, 3}}}, true},
      {{2, 3, 4, 5},
       {{"mode", Str("linear")},
        {"coordinate_transformation_mode", Str("align_corners")},
        {"sizes", Ints{2, 3, 9, 3}}},
       true},
      {{2, 3, 4, 5},
       {{"coordinate_transformation_mode", Str("pytorch_half_pixel")},
        {"nearest_mode", Str("simple")},
        {"sizes", Ints{1, 1, 3, 11}}},
       true},
  };
  ExpectMatches(cases, DType::kFloat32, 90);
}

TEST(LowerResize, Larger) {
  // 3 x 20 x 30 -> 3 x 37 x 45 (about 5000 outputs), bicubic, and bilinear downsampling.
  ExpectMatches(
      {{{1, 3, 20, 30}, {{"mode", Str("cubic")}, {"sizes", Ints{1, 3, 37, 45}}}, true},
       {{1, 3, 20, 30}, {{"mode", Str("linear")}, {"scales", Doubles{1, 1, 0.45, 0.3}}}, false}},
      DType::kFloat32, 100);
}

// ---- grid_sample ----

struct GsCase {
  Ints x, grid;
};

Attrs Gs(const char* mode, const char* padding, bool align_corners) {
  return {{"mode", Str(mode)}, {"padding_mode", Str(padding)}, {"align_corners", align_corners}};
}

// grid_sample compiled shape-generic: every dim above 1 symbolic (equal sizes sharing a
// symbol), except the grid's last, which the relation needs to be the constant 2.
::testing::AssertionResult SymbolicGridSampleMatches(const Tensor& x, const Tensor& grid,
                                                     const Attrs& attrs, double tol) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (const Tensor* t : {&x, &grid}) {
    Shape shape;
    for (size_t d = 0; d < t->shape().size(); ++d) {
      const int64_t n = t->shape()[d];
      const bool point = t == &grid && d == 3;
      shape.push_back(!point && n > 1 ? Dim::Symbol(StrCat("d", n)) : Dim(n));
    }
    params.push_back(MakeVar(StrCat("x", params.size()), TensorType(shape, t->dtype())));
    args.push_back(params.back());
  }
  Function fn = InferTypes(MakeFunction(params, MakeCall("grid_sample", args, attrs), nullptr,
                                        Attrs{{"primitive", true}}));
  std::vector<Tensor> got = RunCompiled(fn, {x, grid}, "k_grid_sample");
  return TensorsNear(got.at(0), test::RunOne("grid_sample", {x, grid}, attrs), tol, tol);
}

// Compiles each case concretely (and shape-generic with `symbolic`) on random x in [-4, 4] and
// a random grid in [-1.3, 1.3].
void ExpectGridSampleMatches(const std::vector<GsCase>& cases, const Attrs& attrs, DType xt,
                             DType gt, uint64_t seed, bool symbolic, double tol = 1e-4) {
  for (const GsCase& c : cases) {
    Tensor x = RandomTensor(xt, c.x, seed++, -4, 4);
    Tensor grid = RandomTensor(gt, c.grid, seed++, -1.3, 1.3);
    const std::string what = StrCat(DTypeName(xt), IntsToString(c.x), " grid ", DTypeName(gt),
                                    IntsToString(c.grid), AttrsText(attrs));
    EXPECT_TRUE(CompiledMatchesReference("grid_sample", {x, grid}, attrs, tol, tol, false)) << what;
    if (symbolic) {
      EXPECT_TRUE(SymbolicGridSampleMatches(x, grid, attrs, tol)) << "symbolic " << what;
    }
  }
}

TEST(LowerGridSample, EveryModeAndPadding) {
  // Odd sizes, two batches and channels, a grid denser along W and sparser along H than x.
  // align_corners changes the padding range, which only reflection's index math reads beyond
  // the coordinate formula all modes share: both values for reflection and for bicubic (SizeOne
  // covers the rest). Shape-generic too for reflection with align_corners.
  const std::vector<GsCase> cases = {{{2, 3, 5, 7}, {2, 4, 9, 2}}};
  uint64_t seed = 200;
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        const bool reflection = std::string(padding) == "reflection";
        if (align && !reflection && std::string(mode) != "bicubic") continue;
        const bool symbolic = align && reflection;
        ExpectGridSampleMatches(cases, Gs(mode, padding, align), DType::kFloat32, DType::kFloat32,
                                seed, symbolic);
        seed += 2;
      }
}

TEST(LowerGridSample, SizeOne) {
  uint64_t seed = 300;
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    // A 1x1 input, where align_corners' padding range is the single point 0.
    for (const char* padding : {"zeros", "border", "reflection"})
      ExpectGridSampleMatches({{{1, 1, 1, 1}, {1, 3, 2, 2}}}, Gs(mode, padding, true),
                              DType::kFloat32, DType::kFloat32, seed++, false);
    // A one-pixel-high row (reflected about [-0.5, 0.5]), and one output point per batch.
    ExpectGridSampleMatches({{{1, 2, 1, 5}, {1, 2, 3, 2}}}, Gs(mode, "reflection", false),
                            DType::kFloat32, DType::kFloat32, seed++, false);
    ExpectGridSampleMatches({{{3, 1, 4, 3}, {3, 1, 1, 2}}}, Gs(mode, "zeros", false),
                            DType::kFloat32, DType::kFloat32, seed++, false);
  }
}

TEST(LowerGridSample, Dtypes) {
  const std::vector<GsCase> cases = {{{1, 2, 6, 5}, {1, 3, 7, 2}}};
  // An f64 grid: float64 coordinates on both sides, and with f64 x, f64 throughout.
  ExpectGridSampleMatches(cases, Gs("bicubic", "reflection", false), DType::kFloat32,
                          DType::kFloat64, 400, true);
  ExpectGridSampleMatches(cases, Gs("bilinear", "border", true), DType::kFloat64, DType::kFloat64,
                          402, false, 1e-9);
  // f16 x and grid, compared at f16 precision.
  ExpectGridSampleMatches(cases, Gs("bilinear", "zeros", false), DType::kFloat16, DType::kFloat16,
                          404, false, 1e-2);
  // nearest moves integers and bools exactly (zeros padding stores 0).
  ExpectGridSampleMatches(cases, Gs("nearest", "zeros", false), DType::kInt32, DType::kFloat32, 406,
                          true, 0);
  ExpectGridSampleMatches(cases, Gs("nearest", "reflection", true), DType::kInt8, DType::kFloat32,
                          408, false, 0);
  ExpectGridSampleMatches(cases, Gs("nearest", "zeros", true), DType::kBool, DType::kFloat32, 410,
                          false, 0);
}

TEST(LowerGridSample, Larger) {
  // 4 channels of 20 x 30 sampled at 25 x 30 points: 3000 outputs.
  const std::vector<GsCase> cases = {{{1, 4, 20, 30}, {1, 25, 30, 2}}};
  ExpectGridSampleMatches(cases, Gs("bicubic", "reflection", false), DType::kFloat32,
                          DType::kFloat32, 500, true);
  ExpectGridSampleMatches(cases, Gs("bilinear", "zeros", true), DType::kFloat32, DType::kFloat32,
                          502, false);
}

// ---- roi_align ----

// Random regions within an H x W image (each corner in [0, size], x2 >= x1 - 0.5 so some
// half_pixel regions are inverted and sample nothing), a few partly outside it (by up to 1.5
// pixel, so the adaptive grid stays within the lowering's cap), and random batch indices.
std::vector<Tensor> RoiInputs(DType t, const std::vector<int64_t>& x_shape, int64_t n_rois,
                              uint64_t seed) {
  const double h = static_cast<double>(x_shape[2]), w = static_cast<double>(x_shape[3]);
  Tensor x = RandomTensor(t, x_shape, seed, -4, 4);
  Tensor u = RandomTensor(DType::kFloat64, {n_rois, 4}, seed + 1, 0, 1);
  Tensor rois = Tensor::Empty(t, {n_rois, 4});
  for (int64_t r = 0; r < n_rois; ++r) {
    const double x1 = u.GetAsDouble(r * 4) * w, y1 = u.GetAsDouble(r * 4 + 1) * h;
    const double shift = r % 3 == 2 ? -1.5 : 0;
    rois.SetFromDouble(r * 4, x1 + shift);
    rois.SetFromDouble(r * 4 + 1, y1);
    rois.SetFromDouble(r * 4 + 2, x1 + shift - 0.5 + u.GetAsDouble(r * 4 + 2) * (w - x1 + 0.5));
    rois.SetFromDouble(r * 4 + 3, y1 - 0.5 + u.GetAsDouble(r * 4 + 3) * (h - y1 + 0.5));
  }
  Tensor batch =
      RandomTensor(DType::kInt64, {n_rois}, seed + 2, 0, static_cast<double>(x_shape[0] - 1));
  return {x, rois, batch};
}

// roi_align compiled shape-generic: x's dims and the region count symbolic (rois' 4 stays).
::testing::AssertionResult SymbolicRoiAlignMatches(const std::vector<Tensor>& in,
                                                   const Attrs& attrs, double tol) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < in.size(); ++i) {
    Shape shape;
    for (size_t d = 0; d < in[i].shape().size(); ++d) {
      const int64_t n = in[i].shape()[d];
      shape.push_back(!(i == 1 && d == 1) && n > 1 ? Dim::Symbol(StrCat("d", n)) : Dim(n));
    }
    params.push_back(MakeVar(StrCat("x", i), TensorType(shape, in[i].dtype())));
    args.push_back(params.back());
  }
  Function fn = InferTypes(MakeFunction(params, MakeCall("roi_align", args, attrs), nullptr,
                                        Attrs{{"primitive", true}}));
  std::vector<Tensor> got = RunCompiled(fn, in, "k_roi_align");
  return TensorsNear(got.at(0), test::RunOne("roi_align", in, attrs), tol, tol);
}

struct RoiCase {
  std::vector<int64_t> x;
  int64_t n_rois, out_h, out_w;
};

TEST(LowerRoiAlign, EveryModeAndGrid) {
  const std::vector<RoiCase> cases = {
      {{1, 1, 1, 1}, 1, 1, 1},  // size 1
      {{2, 3, 7, 6}, 5, 3, 2},  // odd sizes, two images
  };
  uint64_t seed = 600;
  for (const RoiCase& c : cases) {
    for (const char* coord : {"half_pixel", "output_half_pixel"}) {
      for (const char* mode : {"avg", "max"}) {
        for (int64_t ratio : {0, 2}) {
          const std::vector<Tensor> in = RoiInputs(DType::kFloat32, c.x, c.n_rois, seed += 3);
          Attrs attrs{{"coordinate_transformation_mode", std::string(coord)},
                      {"mode", std::string(mode)},
                      {"output_height", c.out_h},
                      {"output_width", c.out_w},
                      {"sampling_ratio", ratio},
                      {"spatial_scale", 1.0}};
          SCOPED_TRACE(StrCat("roi_align x", IntsToString(c.x), AttrsText(attrs)));
          EXPECT_TRUE(CompiledMatchesReference("roi_align", in, attrs, 1e-5, 1e-5, false));
          if (c.n_rois > 1 && ratio == 0) {
            EXPECT_TRUE(SymbolicRoiAlignMatches(in, attrs, 1e-5));
          }
        }
      }
    }
  }
}

TEST(LowerRoiAlign, DtypesAndLarger) {
  // f64 and f16, and spatial_scale 0.5 on regions given at twice x's size.
  std::vector<Tensor> in = RoiInputs(DType::kFloat64, {1, 2, 5, 9}, 4, 700);
  Attrs attrs{{"output_height", int64_t{2}}, {"output_width", int64_t{3}}};
  EXPECT_TRUE(CompiledMatchesReference("roi_align", in, attrs, 1e-12, 1e-12, false));
  in = RoiInputs(DType::kFloat16, {1, 2, 5, 9}, 4, 710);
  EXPECT_TRUE(CompiledMatchesReference("roi_align", in, attrs, 1e-2, 1e-2, false));
  in = RoiInputs(DType::kFloat32, {1, 2, 6, 8}, 4, 720);
  for (int64_t k = 0; k < in[1].numel(); ++k) in[1].SetFromDouble(k, 2 * in[1].GetAsDouble(k));
  attrs.Set("spatial_scale", 0.5);
  attrs.Set("mode", std::string("max"));
  EXPECT_TRUE(CompiledMatchesReference("roi_align", in, attrs, 1e-5, 1e-5, false));
  // 6 regions of 4 channels pooled 7 x 7 from 16 x 20: 1176 outputs, adaptive grids up to 3 x 3.
  in = RoiInputs(DType::kFloat32, {2, 4, 16, 20}, 6, 730);
  attrs = {{"output_height", int64_t{7}}, {"output_width", int64_t{7}}};
  EXPECT_TRUE(CompiledMatchesReference("roi_align", in, attrs, 1e-5, 1e-5, false));
}

}  // namespace
}  // namespace kiln
