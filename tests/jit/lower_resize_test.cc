// Lowering of resize: each case compiled and compared with the reference kernel on random data,
// over every mode, coordinate transform and nearest rounding, size-1 inputs and outputs (which
// take the out_width == 1 branches), odd sizes, a larger image, f64/f16/integer dtypes,
// tf_crop_and_resize's extrapolation, exclude_outside, and ranks 1 and 3 with every dim resized.
//
// Shape-generic kernels (every dim > 1 symbolic) are compiled where the relation allows: scales
// of 1 or whole numbers, or sizes; there the geometry (scale, out_width) is computed at run time
// from the symbolic extents. Both sides compute the coordinates and weights with the same
// float64 formulas, so only the summation's rounding can differ: 1e-5 suffices, and f16 results
// are compared at f16 precision.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

using Ints = std::vector<int64_t>;
using Doubles = std::vector<double>;

AttrValue Str(const char* s) {
  return std::string(s);
}

std::string AttrsText(const Attrs& attrs) {
  std::string s;
  for (const auto& [name, value] : attrs.values())
    s += StrCat(" ", name, "=", AttrValueToString(value));
  return s;
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

}  // namespace
}  // namespace kiln
