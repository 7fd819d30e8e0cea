// conv (NCHW) over symbolic image sizes (ir/ops/conv_symbolic.cc), the engine's generic tier
// for images of any size: compiled through the loop pipeline and compared with the reference on
// random data, over one-pixel, odd and larger images, output channels around the vector widths,
// strides (equal and not), dilations, asymmetric and automatic pads, groups and depthwise, with
// and without bias, f32 and f64; and which form the lowering takes (the stride-phase planes and
// the wide product, or the plain one for a pointwise conv).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/guarded_run.h"
#include "common/kernel_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/lower_to_loops.h"

namespace kiln {
namespace {

using test::AttrsText;
using test::RandomTensor;
using test::SymbolicImageMatchesReference;
using ::testing::HasSubstr;
using ::testing::Not;

using Ints = std::vector<int64_t>;

struct Case {
  Ints x;  // [N, C, H, W]
  Ints w;  // [M, C / group, KH, KW]
  bool bias;
  Attrs attrs;
};

std::vector<Case> Cases() {
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const Attrs s2 = {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}};
  return {
      // A detection net's shapes: the stem (3 channels, stride 2), 3x3 heads, deep small maps.
      {{1, 3, 31, 30}, {16, 3, 3, 3}, true, s2},
      {{1, 24, 20, 20}, {24, 24, 3, 3}, false, pad1},
      {{1, 16, 10, 10}, {24, 16, 3, 3}, true, pad1},
      {{2, 8, 17, 13}, {48, 8, 3, 3}, true, pad1},
      // Output channels off the vector width, one channel, one pixel, a one-pixel image.
      {{1, 5, 9, 7}, {67, 5, 3, 3}, true, pad1},
      {{1, 7, 5, 6}, {1, 7, 3, 3}, true, pad1},
      {{1, 4, 1, 1}, {16, 4, 3, 3}, true, pad1},
      {{1, 3, 3, 3}, {5, 3, 3, 3}, false, {}},
      {{1, 3, 4, 5}, {24, 3, 2, 2}, false, {}},
      // Pointwise (the plain form), 1x1 stride 2, 1x1 with pads.
      {{1, 12, 7, 9}, {32, 12, 1, 1}, true, {}},
      {{1, 12, 7, 9}, {16, 12, 1, 1}, false, {{"strides", Ints{2, 2}}}},
      {{1, 6, 5, 4}, {8, 6, 1, 1}, true, {{"pads", Ints{1, 0, 0, 2}}}},
      // Strides that differ, a window past the input's end, dilation, 5x5 and 5x3 windows.
      {{1, 4, 9, 11}, {16, 4, 3, 2}, true, {{"strides", Ints{1, 3}}, {"pads", Ints{0, 1, 2, 0}}}},
      {{1, 2, 5, 5}, {16, 2, 3, 3}, true, {{"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 4, 4}}}},
      {{1, 3, 13, 10},
       {32, 3, 3, 3},
       true,
       {{"dilations", Ints{2, 1}}, {"pads", Ints{2, 0, 1, 3}}}},
      {{1, 8, 10, 11},
       {16, 8, 3, 3},
       true,
       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}},
      {{1, 8, 10, 11}, {32, 8, 5, 3}, false, {{"auto_pad", std::string("SAME_LOWER")}}},
      // Groups: two, and depthwise 3x3 and 5x5 stride 2 (the inverted residual blocks').
      {{1, 8, 9, 10}, {12, 4, 3, 3}, true, {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 24, 15, 16}, {24, 1, 3, 3}, true, {{"group", int64_t{24}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 20, 17, 19},
       {20, 1, 5, 5},
       false,
       {{"group", int64_t{20}}, {"pads", Ints{2, 2, 2, 2}}, {"strides", Ints{2, 2}}}},
  };
}

std::string ShapeText(const Ints& s) {
  std::string out;
  // (Appended in two steps: GCC 12 warns falsely (-Wrestrict) about `"x" + to_string(d)`.)
  for (int64_t d : s) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

std::vector<Tensor> Inputs(DType t, const Case& c, uint64_t* seed) {
  std::vector<Tensor> in = {RandomTensor(t, c.x, (*seed)++), RandomTensor(t, c.w, (*seed)++)};
  if (c.bias) in.push_back(RandomTensor(t, {c.w[0]}, (*seed)++));
  return in;
}

TEST(LowerConvSymbolic, MatchesReference) {
  uint64_t seed = 900;
  for (const Case& c : Cases())
    for (DType t : {DType::kFloat32, DType::kFloat64})
      EXPECT_TRUE(SymbolicImageMatchesReference("conv", Inputs(t, c, &seed), c.attrs, 1e-5))
          << DTypeName(t) << " x " << ShapeText(c.x) << " w " << ShapeText(c.w)
          << AttrsText(c.attrs);
}

// Larger images: several 64-pixel column tiles per row block, rows of every length mod 16.
TEST(LowerConvSymbolic, LargerImages) {
  uint64_t seed = 950;
  for (const Case& c : std::vector<Case>{
           {{1, 16, 67, 45}, {24, 16, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},
           {{1, 3, 96, 81},
            {16, 3, 3, 3},
            true,
            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
       })
    EXPECT_TRUE(
        SymbolicImageMatchesReference("conv", Inputs(DType::kFloat32, c, &seed), c.attrs, 1e-4))
        << ShapeText(c.x) << AttrsText(c.attrs);
}

// An image of height or width 0 (its symbol bound to 0 at run time) with pads that leave the
// window room (fewer are refused: the kernel would be larger than the padded input): the
// padded copy is all zeros, the output the bias alone, and the input is never read. Run on
// guarded memory, where a read past the input's one element of storage faults: clamped to the
// empty axis, the copy read up to a row of the dims inside it past the end. A 1-D conv takes
// the plain padded copy, a 2-D one the stride-phase planes.
TEST(LowerConvSymbolic, EmptyImageReadsNothing) {
  const Attrs pad2 = {{"pads", Ints{2, 2, 2, 2}}};
  uint64_t seed = 970;
  for (const Case& c : std::vector<Case>{
           {{1, 8, 0, 37}, {16, 8, 3, 3}, true, pad2},
           {{1, 8, 37, 0}, {16, 8, 3, 3}, true, pad2},
           {{2, 3, 0, 41},
            {16, 3, 3, 3},
            false,
            {{"pads", Ints{2, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
           {{1, 4, 0}, {8, 4, 3}, true, {{"pads", Ints{2, 1}}}},
           {{1, 4, 0}, {8, 4, 3}, true, {{"pads", Ints{2, 2}}}},
       }) {
    const std::vector<Tensor> in = Inputs(DType::kFloat32, c, &seed);
    const Function fn = test::SymbolicDimsFunction(
        "conv", in, c.attrs, [](size_t i, size_t d) { return test::SymbolicImageDim(i, d, 1); });
    EXPECT_TRUE(test::GuardedMatchesReference("conv", fn, in, c.attrs, 1e-5, 1e-5))
        << ShapeText(c.x) << AttrsText(c.attrs);
  }
}

// The lowered kernel (before the loop passes) of conv over a symbolic image.
std::string Lowered(const Case& c) {
  uint64_t seed = 1;
  std::vector<Tensor> in = Inputs(DType::kFloat32, c, &seed);
  Function fn = test::SymbolicDimsFunction(
      "conv", in, c.attrs, [](size_t i, size_t d) { return test::SymbolicImageDim(i, d, 1); });
  return loop::Print(LowerToLoops(fn, "k").func);
}

TEST(LowerConvSymbolic, WindowedConvsRunOverWholePaddedRows) {
  const std::string conv3 =
      Lowered({{1, 8, 9, 9}, {16, 8, 3, 3}, false, {{"pads", Ints{1, 1, 1, 1}}}});
  EXPECT_THAT(conv3, HasSubstr("conv_phases"));
  EXPECT_THAT(conv3, HasSubstr("conv_wide"));
  const std::string pointwise = Lowered({{1, 8, 9, 9}, {16, 8, 1, 1}, false, {}});
  EXPECT_THAT(pointwise, Not(HasSubstr("conv_wide")));
  EXPECT_THAT(pointwise, Not(HasSubstr("conv_phases")));
}

}  // namespace
}  // namespace kiln
