// Lowering of the nn ops (conv, conv_transpose, max_pool, max_pool_with_indices, max_unpool,
// avg_pool, global pools, pad): each compiled and compared with its reference kernel on random
// data, over size-1, odd and larger shapes, groups, dilations, strides, explicit and automatic
// pads, ceil_mode, output_padding and output_shape, integer max_pool, both storage orders of
// the indices, and unpooling of real and of colliding, out-of-plane indices.
//
// The windowed ops need constant spatial dims, so their shape-generic case makes only the batch
// symbolic (SymbolicBatchMatchesReference); global pools and constant-mode pad are also
// compiled with every dim symbolic. Both sides accumulate in f64, so only the summation order
// can differ: 1e-5 suffices for f32 and f64, and f16 results are compared at f16 precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/lower_to_loops.h"

namespace kiln {
namespace {

using test::AttrsText;

using test::CompiledMatchesReference;
using test::RandomTensor;
using test::SymbolicBatchMatchesReference;
using test::SymbolicDimsMatchReference;
using test::SymbolicImageMatchesReference;
using test::TensorsNear;

using Ints = std::vector<int64_t>;

struct ConvCase {
  Ints x, w;
  bool bias;
  Attrs attrs;
};

std::vector<ConvCase> ConvCases() {
  return {
      {{1, 1, 1}, {1, 1, 1}, false, {}},  // size 1
      {{1, 1, 1, 1}, {1, 1, 1, 1}, true, {}},
      {{2, 3, 7}, {5, 3, 3}, true, {{"pads", Ints{1, 2}}}},
      {{1, 4, 9}, {6, 2, 2}, false, {{"group", int64_t{2}}, {"strides", Ints{3}}}},
      {{2, 3, 7, 5}, {4, 3, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 11, 13},
       {3, 2, 3, 2},
       false,
       {{"strides", Ints{2, 3}}, {"dilations", Ints{2, 1}}, {"pads", Ints{0, 1, 2, 1}}}},
      {{1, 6, 8, 8},
       {6, 1, 3, 3},
       true,
       {{"group", int64_t{6}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {{1, 4, 9, 6},
       {4, 2, 2, 3},
       false,
       {{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 2, 6, 7},
       {2, 2, 3, 3},
       false,
       {{"auto_pad", std::string("VALID")}, {"strides", Ints{2, 2}}}},
      {{2, 2, 5, 4, 3}, {3, 2, 3, 2, 1}, true, {{"pads", Ints{1, 0, 0, 1, 1, 0}}}},
      {{1, 16, 32, 32}, {32, 16, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},  // larger
      // Short rows (9 pixels of 11 columns): im2col, with a tail of rows and of columns.
      {{3, 8, 10, 9}, {21, 8, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},
      // More padding than the input's positions per stride phase: whole rows of the
      // phase-split input are padding (their fill loops once had negative extents).
      {{2, 4, 6, 1},
       {2, 4, 3, 2},
       false,
       {{"strides", Ints{1, 4}}, {"pads", Ints{1, 9, 1, 0}}, {"dilations", Ints{1, 3}}}},
      {{1, 3, 1},
       {2, 3, 2},
       true,
       {{"strides", Ints{3}}, {"pads", Ints{4, 0}}, {"dilations", Ints{2}}}},
      // Output rows of 16 or 32 pixels: the padded input is read through row // W and row % W
      // (row-split reads), with groups, a stride (5 x 16 out of 9 x 32), a dilation, an odd
      // number of rows, and in 3-D.
      {{2, 6, 5, 16}, {9, 2, 3, 3}, true, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}},
      // Groups of 16 and 4 output channels (E stored per group, its row blocks within one
      // group), odd sizes and a stride.
      {{1, 64, 13, 11}, {64, 16, 3, 3}, true, {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 32, 9, 10},
       {32, 4, 3, 3},
       false,
       {{"group", int64_t{8}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 3, 9, 32}, {8, 3, 3, 3}, true, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 7, 20}, {4, 2, 3, 3}, false, {{"dilations", Ints{2, 2}}}},
      {{1, 2, 3, 4, 16}, {3, 2, 2, 3, 3}, true, {{"pads", Ints{0, 1, 1, 0, 1, 1}}}},
      {{1, 5, 3, 48}, {7, 5, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}}},
      // Depthwise, strided along rows of 16 or more outputs or stride 1 along 48 or more: read
      // in place, tap by tap where a tap reads padding (first and last rows and columns, more
      // padding than the kernel spans, dilation), all taps in one sum elsewhere; in 1-D, 2-D
      // and 3-D, and stride 1 (50). The first (8 strided outputs a row) goes through planes.
      {{1, 4, 9, 15},
       {4, 1, 3, 3},
       true,
       {{"group", int64_t{4}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 3, 5, 50}, {3, 1, 3, 3}, false, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 3, 7, 97},
       {3, 1, 3, 3},
       true,
       {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 4, 6, 120},
       {4, 1, 3, 5},
       false,
       {{"group", int64_t{4}},
        {"strides", Ints{1, 2}},
        {"dilations", Ints{2, 1}},
        {"pads", Ints{2, 0, 1, 3}}}},
      {{1, 2, 3, 150},
       {2, 1, 1, 3},
       true,
       {{"group", int64_t{2}}, {"strides", Ints{1, 3}}, {"pads", Ints{0, 4, 0, 5}}}},
      // 5 x 5 over 6 rows: 4 rows read padding, each summed over its own rows of taps; then
      // 12 such rows (dilated), past the rows handled one by one, checked tap by tap.
      {{2, 5, 6, 64}, {5, 1, 5, 5}, true, {{"group", int64_t{5}}, {"pads", Ints{2, 2, 2, 2}}}},
      {{1, 3, 20, 60},
       {3, 1, 5, 5},
       false,
       {{"group", int64_t{3}}, {"dilations", Ints{3, 1}}, {"pads", Ints{6, 2, 6, 2}}}},
      {{1, 2, 101},
       {2, 1, 3},
       true,
       {{"group", int64_t{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}},
      {{1, 2, 3, 4, 100},
       {2, 1, 2, 3, 3},
       false,
       {{"group", int64_t{2}}, {"strides", Ints{1, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 1}}}},
      // Depthwise, stride 1 along rows of 48 or more, over 3 or more columns whose taps read
      // padding: each channel's rows copied with the padding as zero columns, and every column
      // summed in registers; in 1-D, 2-D (more padding than the kernel spans on one side, a
      // dilation along the rows) and 3-D.
      {{1, 3, 60}, {3, 1, 7}, false, {{"group", int64_t{3}}, {"pads", Ints{3, 4}}}},
      {{1, 2, 4, 64}, {2, 1, 3, 5}, true, {{"group", int64_t{2}}, {"pads", Ints{1, 6, 1, 0}}}},
      {{2, 2, 5, 70},
       {2, 1, 3, 3},
       false,
       {{"group", int64_t{2}}, {"dilations", Ints{1, 3}}, {"pads", Ints{1, 3, 1, 3}}}},
      {{1, 2, 2, 3, 50},
       {2, 1, 1, 3, 5},
       true,
       {{"group", int64_t{2}}, {"pads", Ints{0, 1, 2, 0, 1, 2}}}},
      // Depthwise, stride 1, rows shorter than 48: each channel through its own padded plane,
      // the taps summed across the plane's padded rows (LowerDepthwisePlanes): 28 x 28 and
      // 14 x 14 as in MobileNets, odd sizes, size 1, asymmetric padding beyond the kernel, a
      // dilation, a channel multiplier of 1 with 1-D and 3-D planes, and no padding at all.
      {{1, 5, 28, 28}, {5, 1, 3, 3}, true, {{"group", int64_t{5}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 3, 14, 14}, {3, 1, 3, 3}, false, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 4, 1, 1}, {4, 1, 3, 3}, true, {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 3, 7, 9},
       {3, 1, 5, 3},
       true,
       {{"group", int64_t{3}}, {"pads", Ints{3, 0, 1, 4}}, {"dilations", Ints{1, 2}}}},
      {{1, 6, 13}, {6, 1, 3}, false, {{"group", int64_t{6}}, {"pads", Ints{2, 1}}}},
      {{1, 2, 3, 5, 7},
       {2, 1, 3, 3, 3},
       true,
       {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1, 1, 1}}}},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, false, {{"group", int64_t{3}}}},
      {{1, 2, 5, 5}, {2, 1, 1, 1}, true, {{"group", int64_t{2}}}},
      // Depthwise, strided, rows shorter than 16: computed at stride 1 over the plane, every
      // stride-th output kept: 14 -> 7 and 28 -> 14 as in MobileNets, odd sizes, a stride along
      // one dim only, stride 3 with a dilation, 1-D, and a window past the input's end.
      {{1, 4, 14, 14},
       {4, 1, 3, 3},
       true,
       {{"group", int64_t{4}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 3, 28, 28},
       {3, 1, 3, 3},
       false,
       {{"group", int64_t{3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 3, 9, 11},
       {3, 1, 3, 2},
       true,
       {{"group", int64_t{3}}, {"strides", Ints{1, 2}}, {"pads", Ints{0, 1, 2, 0}}}},
      {{1, 2, 13, 10},
       {2, 1, 3, 3},
       false,
       {{"group", int64_t{2}}, {"strides", Ints{3, 3}}, {"dilations", Ints{2, 1}}}},
      {{1, 5, 9},
       {5, 1, 3},
       true,
       {{"group", int64_t{5}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}},
      {{1, 2, 5, 5},
       {2, 1, 3, 3},
       true,
       {{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 4, 4}}}},
  };
}

TEST(LowerConv, MatchesReference) {
  uint64_t seed = 1;
  for (const ConvCase& c : ConvCases()) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      std::vector<Tensor> in = {RandomTensor(t, c.x, seed++), RandomTensor(t, c.w, seed++)};
      if (c.bias) in.push_back(RandomTensor(t, {c.w[0]}, seed++));
      EXPECT_TRUE(CompiledMatchesReference("conv", in, c.attrs, 1e-5, 1e-5, false))
          << DTypeName(t) << AttrsText(c.attrs);
    }
  }
}

TEST(LowerConv, Float16) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat16, {1, 3, 6, 5}, 3),
                            RandomTensor(DType::kFloat16, {2, 3, 3, 3}, 4),
                            RandomTensor(DType::kFloat16, {2}, 5)};
  EXPECT_TRUE(
      CompiledMatchesReference("conv", in, {{"pads", Ints{1, 1, 1, 1}}}, 1e-2, 1e-2, false));
}

TEST(LowerConv, SymbolicBatch) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {3, 4, 6, 5}, 7),
                            RandomTensor(DType::kFloat32, {6, 2, 3, 3}, 8),
                            RandomTensor(DType::kFloat32, {6}, 9)};
  EXPECT_TRUE(SymbolicBatchMatchesReference(
      "conv", in, {{"group", int64_t{2}}, {"pads", Ints{1, 0, 1, 2}}, {"strides", Ints{2, 1}}}));
  // Depthwise and strided: read in place, the batch loop symbolic.
  std::vector<Tensor> dw = {RandomTensor(DType::kFloat32, {2, 3, 5, 33}, 10),
                            RandomTensor(DType::kFloat32, {3, 1, 3, 3}, 11),
                            RandomTensor(DType::kFloat32, {3}, 12)};
  EXPECT_TRUE(SymbolicBatchMatchesReference(
      "conv", dw, {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}));
  // Depthwise with short stride-1 rows: channel by channel through padded planes.
  std::vector<Tensor> planes = {RandomTensor(DType::kFloat32, {3, 4, 9, 11}, 13),
                                RandomTensor(DType::kFloat32, {4, 1, 3, 3}, 14),
                                RandomTensor(DType::kFloat32, {4}, 15)};
  EXPECT_TRUE(SymbolicBatchMatchesReference("conv", planes,
                                            {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}));
  // Depthwise 5 x 5 along rows of 50: read through a zero-padded copy of each channel.
  std::vector<Tensor> padded = {RandomTensor(DType::kFloat32, {2, 3, 6, 50}, 16),
                                RandomTensor(DType::kFloat32, {3, 1, 5, 5}, 17)};
  EXPECT_TRUE(SymbolicBatchMatchesReference("conv", padded,
                                            {{"group", int64_t{3}}, {"pads", Ints{2, 2, 2, 2}}}));
}

// Which depthwise convs read a zero-padded copy of each channel (conv_dw_pad): rows of stride 1
// with more than two columns whose taps read padding (5 x 5, "same" pads), where the in-place
// form would accumulate those columns tap by tap in memory. Not 3 x 3 (one such column each
// side, where the copy costs more than it saves), nor strided rows, nor unpadded ones.
TEST(LowerConv, DepthwiseCopiesAPaddedRowOnlyWhereManyColumnsReadPadding) {
  auto lowered = [](const Ints& x, const Ints& w, const Attrs& attrs) {
    std::vector<Tensor> in = {RandomTensor(DType::kFloat32, x, 1),
                              RandomTensor(DType::kFloat32, w, 2)};
    return loop::Print(LowerToLoops(test::SingleOpFunction("conv", in, attrs, false), "k").func);
  };
  const Attrs same5 = {{"group", int64_t{4}}, {"pads", Ints{2, 2, 2, 2}}};
  EXPECT_NE(lowered({1, 4, 6, 64}, {4, 1, 5, 5}, same5).find("conv_dw_pad"), std::string::npos);
  EXPECT_EQ(
      lowered({1, 4, 6, 64}, {4, 1, 3, 3}, {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}})
          .find("conv_dw_pad"),
      std::string::npos);
  Attrs strided = same5;
  strided.Set("strides", Ints{1, 2});
  EXPECT_EQ(lowered({1, 4, 6, 64}, {4, 1, 5, 5}, strided).find("conv_dw_pad"), std::string::npos);
  EXPECT_EQ(lowered({1, 4, 6, 64}, {4, 1, 5, 5}, {{"group", int64_t{4}}}).find("conv_dw_pad"),
            std::string::npos);
  // Still read in place (conv_dw), not through the GEMM form or the planes.
  EXPECT_NE(lowered({1, 4, 6, 64}, {4, 1, 5, 5}, same5).find("conv_dw"), std::string::npos);
}

// Any image size (the generic tier): batch and spatial dims symbolic, 1-D to 3-D, groups,
// strides, dilations and asymmetric pads, f32 and f64; odd and size-1 images.
TEST(LowerConv, SymbolicImageSize) {
  struct C {
    Ints x, w;
    Attrs attrs;
  };
  const std::vector<C> cases = {
      {{2, 3, 17, 23}, {8, 3, 3, 3}, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
      {{1, 4, 9, 11}, {6, 2, 3, 3}, {{"group", int64_t{2}}, {"pads", Ints{1, 0, 2, 1}}}},
      {{1, 4, 7, 6}, {4, 1, 3, 3}, {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 1, 1}, {5, 2, 1, 1}, {}},
      {{3, 5, 13}, {7, 5, 3}, {{"dilations", Ints{2}}, {"pads", Ints{2, 2}}}},
      {{1, 2, 5, 6, 4}, {3, 2, 3, 3, 3}, {{"pads", Ints{1, 1, 1, 1, 1, 1}}}},
      {{1, 3, 12, 10}, {4, 3, 2, 2}, {{"auto_pad", std::string("VALID")}, {"strides", Ints{2, 2}}}},
      // SAME's pads, expressions of the size: an odd total at either end, dilated, 1-D.
      {{1, 3, 11, 10},
       {4, 3, 3, 2},
       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 3}}}},
      {{2, 2, 7, 9},
       {3, 2, 2, 3},
       {{"auto_pad", std::string("SAME_LOWER")}, {"dilations", Ints{2, 1}}}},
      {{1, 2, 13}, {3, 2, 4}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{3}}}},
  };
  uint64_t seed = 500;
  for (const C& c : cases) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      std::vector<Tensor> in = {RandomTensor(t, c.x, seed++), RandomTensor(t, c.w, seed++),
                                RandomTensor(t, {c.w[0]}, seed++)};
      EXPECT_TRUE(SymbolicImageMatchesReference("conv", in, c.attrs)) << AttrsText(c.attrs);
      in.pop_back();
      EXPECT_TRUE(SymbolicImageMatchesReference("conv", in, c.attrs)) << AttrsText(c.attrs);
    }
  }
}

// The weight is [C, M/group, *kernel]. conv_transpose's reference scatters and its lowering
// gathers, so they share only the geometry.
std::vector<ConvCase> ConvTransposeCases() {
  return {
      {{1, 1, 1}, {1, 1, 1}, false, {}},  // size 1
      {{1, 1, 1, 1}, {1, 1, 1, 1}, true, {}},
      {{2, 3, 7}, {3, 2, 3}, true, {{"pads", Ints{1, 2}}}},
      {{1, 4, 5}, {4, 3, 2}, false, {{"group", int64_t{2}}, {"strides", Ints{3}}}},
      {{2, 3, 5, 4}, {3, 4, 3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 5, 6},
       {2, 3, 3, 2},
       false,
       {{"strides", Ints{2, 3}},
        {"dilations", Ints{2, 1}},
        {"pads", Ints{0, 1, 2, 1}},
        {"output_padding", Ints{1, 2}}}},
      {{1, 6, 4, 4},
       {6, 1, 3, 3},
       true,
       {{"group", int64_t{6}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {{1, 4, 5, 3},
       {4, 2, 2, 3},
       false,
       {{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 2, 3, 4},
       {2, 2, 3, 3},
       false,
       {{"auto_pad", std::string("VALID")}, {"strides", Ints{2, 2}}}},
      // output_shape past the full size: negative pads, positions that get only the bias.
      {{1, 2, 3, 3}, {2, 1, 3, 3}, true, {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}}},
      {{1, 2, 4, 4},
       {2, 2, 3, 3},
       false,
       {{"strides", Ints{2, 2}},
        {"output_shape", Ints{8, 6}},
        {"auto_pad", std::string("SAME_LOWER")}}},
      {{2, 2, 3, 4, 2},
       {2, 3, 3, 2, 1},
       true,
       {{"pads", Ints{1, 0, 0, 1, 1, 0}}, {"strides", Ints{2, 1, 2}}}},
      {{1, 16, 16, 16}, {16, 8, 4, 4}, true, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}},
  };
}

TEST(LowerConvTranspose, MatchesReference) {
  uint64_t seed = 400;
  for (const ConvCase& c : ConvTransposeCases()) {
    const int64_t m = c.w[1] * (c.attrs.Has("group") ? c.attrs.GetInt("group") : 1);
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      std::vector<Tensor> in = {RandomTensor(t, c.x, seed++), RandomTensor(t, c.w, seed++)};
      if (c.bias) in.push_back(RandomTensor(t, {m}, seed++));
      EXPECT_TRUE(CompiledMatchesReference("conv_transpose", in, c.attrs, 1e-5, 1e-5, false))
          << DTypeName(t) << AttrsText(c.attrs);
    }
  }
}

TEST(LowerConvTranspose, Float16) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat16, {1, 3, 4, 5}, 3),
                            RandomTensor(DType::kFloat16, {3, 2, 3, 3}, 4),
                            RandomTensor(DType::kFloat16, {2}, 5)};
  EXPECT_TRUE(CompiledMatchesReference("conv_transpose", in,
                                       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, 1e-2,
                                       1e-2, false));
}

// Any image size (the generic tier): every case, SAME's pads the same at every size, and
// output_shape's leading pads expressions of the size (negative ones too, where output_shape is
// past the full size).
TEST(LowerConvTranspose, SymbolicImageSize) {
  uint64_t seed = 450;
  std::vector<ConvCase> cases = ConvTransposeCases();
  // output_shape below the full size (positive pads, odd totals both ways), with SAME_UPPER
  // and with output_padding.
  cases.push_back({{1, 3, 5, 4},
                   {3, 2, 3, 3},
                   true,
                   {{"strides", Ints{2, 2}},
                    {"output_shape", Ints{10, 8}},
                    {"auto_pad", std::string("SAME_UPPER")}}});
  cases.push_back(
      {{1, 2, 6, 5},
       {2, 2, 3, 3},
       false,
       {{"strides", Ints{2, 2}}, {"output_padding", Ints{1, 0}}, {"output_shape", Ints{12, 9}}}});
  for (const ConvCase& c : cases) {
    const int64_t m = c.w[1] * (c.attrs.Has("group") ? c.attrs.GetInt("group") : 1);
    std::vector<Tensor> in = {RandomTensor(DType::kFloat32, c.x, seed++),
                              RandomTensor(DType::kFloat32, c.w, seed++)};
    if (c.bias) in.push_back(RandomTensor(DType::kFloat32, {m}, seed++));
    EXPECT_TRUE(SymbolicImageMatchesReference("conv_transpose", in, c.attrs)) << AttrsText(c.attrs);
  }
}

TEST(LowerConvTranspose, SymbolicBatch) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {3, 4, 5, 4}, 7),
                            RandomTensor(DType::kFloat32, {4, 3, 3, 3}, 8),
                            RandomTensor(DType::kFloat32, {6}, 9)};
  EXPECT_TRUE(SymbolicBatchMatchesReference("conv_transpose", in,
                                            {{"group", int64_t{2}},
                                             {"pads", Ints{1, 0, 1, 2}},
                                             {"strides", Ints{2, 1}},
                                             {"output_padding", Ints{1, 0}}}));
}

struct PoolCase {
  Ints x;
  Attrs attrs;
};

std::vector<PoolCase> PoolCases() {
  return {
      {{1, 1, 1}, {{"kernel_shape", Ints{1}}}},
      {{2, 3, 7}, {{"kernel_shape", Ints{3}}, {"pads", Ints{1, 1}}}},
      {{1, 2, 9}, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"ceil_mode", true}}},
      {{1, 1, 5},
       {{"kernel_shape", Ints{2}},
        {"strides", Ints{2}},
        {"pads", Ints{1, 1}},
        {"ceil_mode", true}}},
      {{2, 3, 7, 5},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 8, 8},
       {{"kernel_shape", Ints{3, 2}},
        {"auto_pad", std::string("SAME_UPPER")},
        {"strides", Ints{2, 3}}}},
      {{1, 2, 7, 6}, {{"kernel_shape", Ints{2, 3}}, {"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 2, 9, 9},
       {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 3}}, {"pads", Ints{1, 0, 1, 2}}}},
      {{1, 1, 6, 7},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"ceil_mode", true},
        {"pads", Ints{1, 1, 0, 1}}}},
      {{2, 2, 5, 4, 3}, {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{1, 2, 1}}}},
      {{2, 16, 31, 33}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}}},  // larger
      // Windows that neither overlap nor pad, rows of 16 or more outputs: taps read in place.
      {{2, 3, 9, 35}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 64}, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}}},
      {{1, 3, 6, 50}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{3, 3}}}},
      {{1, 1, 5, 52},
       {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{3, 3}}, {"dilations", Ints{2, 2}}}},
      {{1, 1, 4, 33}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", true}}},
      // Padding wider than the input (see ConvCases).
      {{1, 4, 1},
       {{"kernel_shape", Ints{3}},
        {"strides", Ints{3}},
        {"dilations", Ints{4}},
        {"pads", Ints{10, 0}}}},
      {{1, 4, 1}, {{"kernel_shape", Ints{6}}, {"strides", Ints{3}}, {"pads", Ints{7, 0}}}},
  };
}

TEST(LowerPool, MatchesReference) {
  uint64_t seed = 100;
  for (const PoolCase& c : PoolCases()) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      Tensor x = RandomTensor(t, c.x, seed++);
      EXPECT_TRUE(CompiledMatchesReference("max_pool", {x}, c.attrs, 0, 0, false))
          << DTypeName(t) << AttrsText(c.attrs);
      for (bool include_pad : {false, true}) {
        Attrs a = c.attrs;
        a.Set("count_include_pad", include_pad);
        EXPECT_TRUE(CompiledMatchesReference("avg_pool", {x}, a, 1e-5, 1e-5, false))
            << DTypeName(t) << AttrsText(a);
      }
    }
  }
}

// Integer max_pool compares in its own dtype; windows reaching into the padding check that it
// never wins, even over the lowest value.
TEST(LowerPool, IntegerMax) {
  uint64_t seed = 150;
  for (const PoolCase& c : PoolCases()) {
    for (DType t : {DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
      const double lo = t == DType::kUInt8 ? 0 : -128, hi = t == DType::kUInt8 ? 255 : 127;
      Tensor x = RandomTensor(t, c.x, seed++, lo, hi);
      EXPECT_TRUE(CompiledMatchesReference("max_pool", {x}, c.attrs, 0, 0, false))
          << DTypeName(t) << AttrsText(c.attrs);
    }
  }
  Tensor x = RandomTensor(DType::kInt16, {3, 2, 7, 6}, 12, -1000, 1000);
  EXPECT_TRUE(SymbolicBatchMatchesReference(
      "max_pool", {x}, {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 1, 1, 0}}}));
}

// Any image size (the generic tier): every dim but the channels symbolic, every case (ceil_mode,
// dilations, SAME's pads as expressions of the size, 1-D and 3-D, pads wider than the input),
// float and integer max exact, means both ways of counting; a window of more than
// kMaxSpelledTaps taps (a reduction, not spelled out).
TEST(LowerPool, SymbolicImageSize) {
  uint64_t seed = 170;
  std::vector<PoolCase> cases = PoolCases();
  cases.push_back({{1, 2, 9, 8}, {{"kernel_shape", Ints{6, 5}}, {"pads", Ints{1, 1, 2, 1}}}});
  for (const PoolCase& c : cases) {
    for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32}) {
      Tensor x = RandomTensor(t, c.x, seed++, -100, 100);
      EXPECT_TRUE(SymbolicImageMatchesReference("max_pool", {x}, c.attrs, 0))
          << DTypeName(t) << AttrsText(c.attrs);
      if (t == DType::kInt32) continue;
      for (bool include_pad : {false, true}) {
        Attrs a = c.attrs;
        a.Set("count_include_pad", include_pad);
        EXPECT_TRUE(SymbolicImageMatchesReference("avg_pool", {x}, a))
            << DTypeName(t) << AttrsText(a);
      }
    }
  }
}

TEST(LowerPool, SymbolicBatch) {
  Tensor x = RandomTensor(DType::kFloat32, {3, 2, 7, 6}, 11);
  Attrs a = {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 1, 1, 0}}, {"strides", Ints{2, 2}}};
  EXPECT_TRUE(SymbolicBatchMatchesReference("max_pool", {x}, a, 0));
  a.Set("storage_order", int64_t{1});
  EXPECT_TRUE(SymbolicBatchMatchesReference("max_pool_with_indices", {x}, a, 0));
  a = {{"kernel_shape", Ints{3, 2}},
       {"pads", Ints{1, 1, 1, 0}},
       {"strides", Ints{2, 2}},
       {"count_include_pad", true}};
  EXPECT_TRUE(SymbolicBatchMatchesReference("avg_pool", {x}, a));
}

// max_pool_with_indices over every pool case: row major with a float and an integer dtype,
// column major (which differs only with 2 or more spatial dims) with one of them in turn; the
// values and indices exactly. Float data is continuous, so ties are rare; the integer data (few
// values) has many, which checks that the first max in scan order wins.
TEST(LowerMaxPoolWithIndices, MatchesReference) {
  uint64_t seed = 500;
  int n = 0;
  for (const PoolCase& c : PoolCases()) {
    std::vector<std::pair<int64_t, DType>> runs = {{0, DType::kFloat32}, {0, DType::kInt8}};
    if (c.x.size() > 3) runs.push_back({1, n++ % 2 ? DType::kInt32 : DType::kFloat64});
    for (const auto& [order, t] : runs) {
      Attrs a = c.attrs;
      a.Set("storage_order", order);
      Tensor x = IsFloat(t) ? RandomTensor(t, c.x, seed++) : RandomTensor(t, c.x, seed++, -3, 3);
      EXPECT_TRUE(CompiledMatchesReference("max_pool_with_indices", {x}, a, 0, 0, false))
          << DTypeName(t) << AttrsText(a);
    }
  }
}

// Any image size (the generic tier): every pool case, both storage orders, a float and an
// integer dtype (few values, so ties are common and the first in scan order must win), and NaN
// and -inf maxima and windows wholly in the padding; values and indices exactly.
TEST(LowerMaxPoolWithIndices, SymbolicImageSize) {
  uint64_t seed = 520;
  std::vector<PoolCase> cases = PoolCases();
  cases.push_back({{1, 2, 9, 8}, {{"kernel_shape", Ints{6, 5}}, {"pads", Ints{1, 1, 2, 1}}}});
  for (const PoolCase& c : cases) {
    for (int64_t order : {0, 1}) {
      if (order == 1 && c.x.size() < 4) continue;  // one spatial dim: the same indices
      Attrs a = c.attrs;
      a.Set("storage_order", order);
      for (DType t : {DType::kFloat32, DType::kInt32}) {
        Tensor x = IsFloat(t) ? RandomTensor(t, c.x, seed++) : RandomTensor(t, c.x, seed++, -3, 3);
        EXPECT_TRUE(SymbolicImageMatchesReference("max_pool_with_indices", {x}, a, 0))
            << DTypeName(t) << AttrsText(a);
      }
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = RandomTensor(DType::kFloat32, {2, 3, 7, 6}, 31);
  for (int64_t i : {0, 5, 6, 40, 41, 100, 200, 201}) x.SetFromDouble(i, i % 2 ? nan : -inf);
  EXPECT_TRUE(SymbolicImageMatchesReference("max_pool_with_indices", {x},
                                            {{"kernel_shape", Ints{3, 2}},
                                             {"pads", Ints{1, 0, 1, 1}},
                                             {"strides", Ints{1, 2}},
                                             {"storage_order", int64_t{1}}},
                                            0));
  Tensor one = RandomTensor(DType::kFloat32, {1, 1, 1}, 32);
  EXPECT_TRUE(SymbolicImageMatchesReference(
      "max_pool_with_indices", {one},
      {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 1}}}, 0));
}

// NaN wins its window (the first NaN), -inf can be the max, f16 compares exactly, and a window
// wholly in the padding gives -inf and index -1.
TEST(LowerMaxPoolWithIndices, SpecialValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = RandomTensor(DType::kFloat32, {2, 3, 7, 6}, 21);
  for (int64_t i : {0, 5, 6, 40, 41, 100, 200, 201}) x.SetFromDouble(i, i % 2 ? nan : -inf);
  for (int64_t order : {0, 1}) {
    Attrs a = {{"kernel_shape", Ints{3, 2}},
               {"pads", Ints{1, 0, 1, 1}},
               {"strides", Ints{1, 2}},
               {"storage_order", order}};
    EXPECT_TRUE(CompiledMatchesReference("max_pool_with_indices", {x}, a, 0, 0, false));
  }
  Tensor all_low = Tensor::Empty(DType::kFloat64, {1, 2, 4});
  for (int64_t i = 0; i < all_low.numel(); ++i) all_low.SetFromDouble(i, -inf);
  EXPECT_TRUE(CompiledMatchesReference("max_pool_with_indices", {all_low},
                                       {{"kernel_shape", Ints{2}}}, 0, 0, false));
  Tensor h = RandomTensor(DType::kFloat16, {1, 3, 9, 5}, 23);
  EXPECT_TRUE(CompiledMatchesReference(
      "max_pool_with_indices", {h}, {{"kernel_shape", Ints{2, 3}}, {"storage_order", int64_t{1}}},
      0, 0, false));
  Tensor one = RandomTensor(DType::kFloat32, {1, 1, 1}, 24);
  EXPECT_TRUE(CompiledMatchesReference(
      "max_pool_with_indices", {one},
      {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 1}}}, 0, 0, false));
}

// max_unpool: x and its indices from max_pool_with_indices of a random tensor (as in a model),
// then random indices that collide and stray out of their plane, over size 1, odd sizes,
// pads, output_shape, 1-3 spatial dims and a larger case; float and integer data. Some pool
// geometries do not invert exactly (their scatter is smaller than the pooled input), which
// exercises the dropped indices too.
struct UnpoolCase {
  Ints src;      // the shape max_pool_with_indices pools
  Attrs pool;    // its attributes
  Attrs unpool;  // max_unpool's
};

const Attrs kK2S2 = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};

std::vector<UnpoolCase> UnpoolCases() {
  const Attrs& k2s2 = kK2S2;
  return {
      {{1, 1, 1}, {{"kernel_shape", Ints{1}}}, {{"kernel_shape", Ints{1}}}},  // size 1
      {{2, 3, 7},
       {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}},
       {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}}},
      {{1, 2, 4, 6}, k2s2, k2s2},  // the maxes back where they were
      // The 4x6 scatter at the start of a 5x7 output.
      {{1, 2, 4, 6},
       k2s2,
       {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"output_shape", Ints{1, 2, 5, 7}}}},
      // Pooling floors 5x7 to 2x3, whose scatter is 4x6: the indices count 35-element planes
      // and the scatter's hold 24, so some drop out of their plane.
      {{1, 2, 5, 7}, k2s2, k2s2},
      {{2, 1, 6, 5},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{1, 2, 4, 6, 3},
       {{"kernel_shape", Ints{2, 3, 1}}, {"strides", Ints{2, 3, 1}}},
       {{"kernel_shape", Ints{2, 3, 1}}, {"strides", Ints{2, 3, 1}}}},
      {{2, 8, 32, 32}, k2s2, k2s2},  // larger: 256 positions searched for each of 16384
  };
}

TEST(LowerMaxUnpool, MatchesReference) {
  const Attrs& k2s2 = kK2S2;
  uint64_t seed = 600;
  for (const UnpoolCase& c : UnpoolCases()) {
    for (DType t : {DType::kFloat32, DType::kInt32}) {
      std::vector<Tensor> pooled = RunOpReference(
          "max_pool_with_indices", {RandomTensor(t, c.src, seed++, -100, 100)}, c.pool);
      EXPECT_TRUE(CompiledMatchesReference("max_unpool", pooled, c.unpool, 0, 0, false))
          << DTypeName(t) << AttrsText(c.unpool);
      if (t != DType::kFloat32) continue;
      // Random indices over a range a bit wider than the whole output: collisions, misses,
      // negatives and other planes' positions.
      const int64_t out_numel = RunOpReference("max_unpool", pooled, c.unpool)[0].numel();
      Tensor random_idx = RandomTensor(DType::kInt64, pooled[1].shape(), seed++, -2,
                                       static_cast<double>(out_numel + 2));
      EXPECT_TRUE(
          CompiledMatchesReference("max_unpool", {pooled[0], random_idx}, c.unpool, 0, 0, false))
          << DTypeName(t) << AttrsText(c.unpool) << " (random indices)";
    }
  }
  std::vector<Tensor> pooled = RunOpReference(
      "max_pool_with_indices", {RandomTensor(DType::kFloat64, {3, 2, 6, 5}, seed++)}, k2s2);
  Attrs shaped = k2s2;
  shaped.Set("output_shape", Ints{3, 2, 7, 6});
  EXPECT_TRUE(SymbolicBatchMatchesReference("max_unpool", pooled, shaped, 0, 2));
}

// Any image size (the generic tier): x's and the indices' dims symbolic but the channels, every
// case (output_shape's padding past the scatter too, 1-3 spatial dims), the indices max pool's
// and random ones (collisions, misses, other planes').
TEST(LowerMaxUnpool, SymbolicImageSize) {
  uint64_t seed = 650;
  auto symbolic = [](size_t i, size_t d) { return i < 2 && d != 1; };
  for (const UnpoolCase& c : UnpoolCases()) {
    std::vector<Tensor> pooled = RunOpReference(
        "max_pool_with_indices", {RandomTensor(DType::kFloat32, c.src, seed++, -100, 100)}, c.pool);
    EXPECT_TRUE(
        SymbolicDimsMatchReference("max_unpool", pooled, c.unpool, 0, symbolic, "symbolic image"))
        << AttrsText(c.unpool);
    const int64_t out_numel = RunOpReference("max_unpool", pooled, c.unpool)[0].numel();
    Tensor random_idx = RandomTensor(DType::kInt64, pooled[1].shape(), seed++, -2,
                                     static_cast<double>(out_numel + 2));
    EXPECT_TRUE(SymbolicDimsMatchReference("max_unpool", {pooled[0], random_idx}, c.unpool, 0,
                                           symbolic, "symbolic image"))
        << AttrsText(c.unpool) << " (random indices)";
  }
}

TEST(LowerGlobalPool, MatchesReference) {
  uint64_t seed = 200;
  for (const Ints& shape :
       std::vector<Ints>{{1, 1, 1},
                         {2, 3, 7},
                         {1, 5, 3, 3},
                         {2, 3, 4, 5, 6},
                         {1, 64, 33, 17},
                         // Planes of 16 or more: partial sums per lane (8 x 8, and 7 x 7 with
                         // one element left over, 3 planes of 16, 5 x 3 x 2 = 30 in 3-D).
                         {3, 5, 8, 8},
                         {1, 9, 7, 7},
                         {2, 3, 16},
                         {2, 3, 5, 3, 2}}) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      Tensor x = RandomTensor(t, shape, seed++);
      for (const char* op : {"global_avg_pool", "global_max_pool"})
        EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, 1e-5, 1e-5, true)) << op;
    }
  }
}

TEST(LowerPad, MatchesReference) {
  struct PadCase {
    Ints x;
    Ints pads;
  };
  std::vector<PadCase> cases = {
      {{1}, {0, 0}},
      {{5}, {2, 3}},
      {{3, 1}, {1, 0, 2, 0}},  // a size-1 axis padded in constant mode only (see below)
      {{7, 5}, {2, 1, 3, 4}},
      {{7, 5}, {-2, 1, 0, -1}},  // cropping
      {{2, 3, 4, 5}, {0, 0, 1, 2, 0, 0, 2, 1}},
      {{67, 129}, {3, 5, 1, 2}},
  };
  uint64_t seed = 300;
  for (const PadCase& c : cases) {
    for (DType t : {DType::kFloat32, DType::kInt32}) {
      Tensor x = RandomTensor(t, c.x, seed++, -5, 5);
      for (const char* mode : {"constant", "edge", "reflect"}) {
        Attrs a = {{"pads", c.pads}, {"mode", std::string(mode)}, {"value", 2.5}};
        // reflect needs pads below the axis size.
        bool fits = true;
        for (size_t i = 0; i < c.x.size(); ++i)
          fits = fits && std::max(c.pads[i], c.pads[c.x.size() + i]) < std::max<int64_t>(c.x[i], 1);
        if (std::string(mode) == "reflect" && !fits) continue;
        // Symbolic dims accept only non-negative constant-mode pads.
        const bool symbolic =
            std::string(mode) == "constant" &&
            std::all_of(c.pads.begin(), c.pads.end(), [](int64_t p) { return p >= 0; });
        EXPECT_TRUE(CompiledMatchesReference("pad", {x}, a, 0, 0, symbolic))
            << DTypeName(t) << AttrsText(a);
      }
    }
  }
}

TEST(LowerPad, EmptyInput) {
  Tensor x = RandomTensor(DType::kFloat32, {0, 3}, 1);
  EXPECT_TRUE(CompiledMatchesReference("pad", {x}, {{"pads", Ints{1, 0, 1, 1}}, {"value", 3.0}}, 0,
                                       0, false));
  // Shape-generic, the extent is 0 only at run time: the box's nest runs zero times, and the
  // border nests fill the whole result.
  const Attrs attrs = {{"pads", Ints{1, 0, 1, 1}}, {"value", 3.0}};
  Var v = MakeVar("x", TensorType({Dim::Symbol("n"), 3}, DType::kFloat32));
  Function generic = InferTypes(
      MakeFunction({v}, MakeCall("pad", {v}, attrs), nullptr, Attrs{{"primitive", true}}));
  std::vector<Tensor> got = test::RunCompiled(generic, {x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(test::TensorsNear(got[0], RunOpReference("pad", {x}, attrs)[0], 0, 0));
}

}  // namespace
}  // namespace kiln
