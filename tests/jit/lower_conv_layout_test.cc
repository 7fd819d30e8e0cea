// conv_nhwc (ir/ops/conv_layout.cc): compiled and compared with its reference kernel (conv's,
// on permuted copies) on random data, both input layouts, over size-1, odd and larger shapes,
// output channel counts around the vector widths (1, 5, 16, 24, 32, 48, 67), strides,
// dilations, asymmetric and automatic pads, and f32 / f64 / f16; and the type relation's
// errors, each naming what is at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/guarded_run.h"
#include "common/kernel_test_util.h"
#include "ir/loop/loop_text.h"
#include "ir/ops/conv_winograd.h"
#include "passes/lower_to_loops.h"

namespace kiln {
namespace {

using test::AttrsText;
using test::CompiledMatchesReference;
using test::RandomTensor;
using test::SymbolicBatchMatchesReference;
using test::SymbolicImageMatchesReference;

using Ints = std::vector<int64_t>;

struct Case {
  Ints x;  // in the layout input_nhwc says
  Ints w;  // [KH, KW, C, M]
  bool nhwc;
  bool bias;
  Attrs attrs;
};

std::vector<Case> Cases() {
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const Attrs s2 = {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}};
  return {
      // The shapes of a small vision net, both layouts, strided and not.
      {{1, 28, 28, 32}, {3, 3, 32, 32}, true, true, pad1},
      {{1, 3, 30, 30}, {3, 3, 3, 16}, false, true, s2},
      {{1, 29, 31, 16}, {3, 3, 16, 32}, true, true, s2},
      {{2, 14, 14, 32}, {3, 3, 32, 64}, true, false, pad1},
      {{1, 16, 15, 15}, {3, 3, 16, 48}, false, true, pad1},
      // Output channels off the vector width, one channel, one pixel.
      {{1, 9, 7, 5}, {3, 3, 5, 67}, true, true, pad1},
      {{1, 5, 6, 7}, {3, 3, 7, 1}, true, true, pad1},
      {{1, 4, 5, 3}, {2, 2, 3, 24}, true, false, {}},
      {{1, 1, 1, 4}, {3, 3, 4, 16}, true, true, pad1},
      {{1, 1, 1, 1}, {1, 1, 1, 5}, true, true, {}},
      // 1x1, stride 2 without padding, a window past the input's end, dilation, one stride.
      {{1, 7, 9, 12}, {1, 1, 12, 32}, true, true, {}},
      {{1, 12, 7, 9}, {1, 1, 12, 16}, false, false, {{"strides", Ints{2, 2}}}},
      {{1, 5, 5, 2},
       {3, 3, 2, 16},
       true,
       true,
       {{"strides", Ints{2, 2}}, {"pads", Ints{0, 0, 4, 4}}}},
      {{1, 13, 10, 3},
       {3, 3, 3, 32},
       true,
       true,
       {{"dilations", Ints{2, 1}}, {"pads", Ints{2, 0, 1, 3}}}},
      {{1, 4, 9, 11},
       {3, 2, 4, 16},
       false,
       true,
       {{"strides", Ints{1, 3}}, {"pads", Ints{0, 1, 2, 0}}}},
      {{1, 10, 11, 8},
       {3, 3, 8, 16},
       true,
       true,
       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}},
      {{1, 8, 10, 11}, {5, 3, 8, 32}, false, false, {{"auto_pad", std::string("SAME_LOWER")}}},
  };
}

std::vector<Tensor> Inputs(DType t, const Case& c, uint64_t* seed) {
  Attrs attrs = c.attrs;
  std::vector<Tensor> in = {RandomTensor(t, c.x, (*seed)++), RandomTensor(t, c.w, (*seed)++)};
  if (c.bias) in.push_back(RandomTensor(t, {c.w[3]}, (*seed)++));
  return in;
}

Attrs WithLayout(const Case& c) {
  Attrs attrs = c.attrs;
  attrs.Set("input_nhwc", c.nhwc);
  return attrs;
}

// conv_nhwc on `in` lowered to loop IR (before the loop passes), as text: which buffers its form
// materializes (conv_cols, conv_wino_m, ...).
std::string LoweredText(const std::vector<Tensor>& in, const Attrs& attrs) {
  return loop::Print(LowerToLoops(test::SingleOpFunction("conv_nhwc", in, attrs, false), "k").func);
}

TEST(LowerConvNhwc, MatchesReference) {
  uint64_t seed = 1;
  for (const Case& c : Cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      const Attrs attrs = WithLayout(c);
      EXPECT_TRUE(
          CompiledMatchesReference("conv_nhwc", Inputs(t, c, &seed), attrs, 1e-5, 1e-5, false))
          << DTypeName(t) << AttrsText(attrs);
    }
  }
}

// Larger than the caches' first level, 64 channels: TileLoops' blocks and their tails.
TEST(LowerConvNhwc, Larger) {
  uint64_t seed = 100;
  const Case big = {{1, 56, 56, 32}, {3, 3, 32, 64}, true, true, {{"pads", Ints{1, 1, 1, 1}}}};
  EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", Inputs(DType::kFloat32, big, &seed),
                                       WithLayout(big), 1e-4, 1e-4, false));
  const Case strided = {{1, 32, 57, 57},
                        {3, 3, 32, 32},
                        false,
                        true,
                        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}};
  EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", Inputs(DType::kFloat32, strided, &seed),
                                       WithLayout(strided), 1e-4, 1e-4, false));
}

// The batch symbolic (the spatial dims and channels must be constants), both layouts.
TEST(LowerConvNhwc, SymbolicBatch) {
  uint64_t seed = 300;
  for (const Case& c : {Case{{3, 9, 7, 5}, {3, 3, 5, 24}, true, true, {{"pads", Ints{1, 1, 1, 1}}}},
                        Case{{2, 4, 9, 11},
                             {3, 3, 4, 16},
                             false,
                             false,
                             {{"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 2, 0}}}}})
    EXPECT_TRUE(SymbolicBatchMatchesReference("conv_nhwc", Inputs(DType::kFloat32, c, &seed),
                                              WithLayout(c)));
}

// A case of a dtype, with what the im2col tests expect or give: whether the kernel copies the
// taps (conv_cols), and the panel width of a packed weight.
struct TypedCase {
  Case c;
  DType t;
  int64_t panel = 0;  // w_panel (PackedWeight)
  bool cols = false;  // whether the kernel copies the taps (Im2colForLongReductions)
};

// A reduction longer than 2048 (KH x KW x C) runs as a matrix product over the output pixels of
// an im2col copy (conv_cols): strided, dilated, 1x1, NCHW input, a batch of two, output channels
// off the vector width. Where the copy would pass 8 MiB, for f64, or for a symbolic batch, the
// direct form serves.
TEST(LowerConvNhwc, Im2colForLongReductions) {
  uint64_t seed = 900;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const DType f32 = DType::kFloat32;
  for (const TypedCase& k :
       {TypedCase{{{1, 7, 7, 240}, {3, 3, 240, 48}, true, true, pad1}, f32, 0, true},
        TypedCase{{{1, 9, 11, 232},
                   {3, 3, 232, 17},
                   true,
                   false,
                   {{"pads", Ints{1, 0, 2, 1}}, {"strides", Ints{2, 2}}}},
                  f32,
                  0,
                  true},
        TypedCase{{{1, 232, 6, 5}, {3, 3, 232, 16}, false, true, pad1}, f32, 0, true},
        TypedCase{{{1, 3, 5, 2100}, {1, 1, 2100, 24}, true, true, {}}, f32, 0, true},
        TypedCase{{{2, 5, 4, 240}, {3, 3, 240, 1}, true, true, pad1}, f32, 0, true},
        TypedCase{{{1, 8, 8, 240},
                   {3, 3, 240, 16},
                   true,
                   true,
                   {{"dilations", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}},
                  f32,
                  0,
                  true},
        TypedCase{{{1, 40, 40, 240}, {3, 3, 240, 16}, true, true, pad1}, f32, 0, false},
        TypedCase{
            {{1, 5, 6, 240}, {3, 3, 240, 16}, true, true, pad1}, DType::kFloat64, 0, false}}) {
    const Attrs attrs = WithLayout(k.c);
    const std::vector<Tensor> in = Inputs(k.t, k.c, &seed);
    const std::string ir = LoweredText(in, attrs);
    EXPECT_EQ(ir.find("conv_cols") != std::string::npos, k.cols)
        << IntsToString(k.c.x) << AttrsText(attrs);
    // Sums of up to 2160 products of values in [-1, 1].
    EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", in, attrs, 2e-4, 1e-5, false))
        << IntsToString(k.c.x) << " " << IntsToString(k.c.w) << AttrsText(attrs);
  }
  const Case batch = {{3, 5, 6, 240}, {3, 3, 240, 16}, true, true, pad1};
  EXPECT_TRUE(SymbolicBatchMatchesReference("conv_nhwc", Inputs(f32, batch, &seed),
                                            WithLayout(batch), 2e-4));
}

// w_panel (as PackConstantWeights passes a constant weight the im2col form reads): w given as
// the [KH * KW * C, M] matrix in panels of T columns. The im2col form reads the panels in place
// (the kernel copies no panel of w); output channels that fill the last panel or not (T = 48
// for 40 and 100 channels, 16 for 17), strided, NCHW input; where the im2col form does not
// apply (a short reduction, f64) the direct form reads w through the panels.
TEST(LowerConvNhwc, PackedWeight) {
  uint64_t seed = 950;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const DType f32 = DType::kFloat32;
  for (const TypedCase& k :
       {TypedCase{{{1, 7, 7, 240}, {3, 3, 240, 100}, true, true, pad1}, f32, 48},
        TypedCase{{{1, 7, 7, 240}, {3, 3, 240, 48}, true, false, pad1}, f32, 48},
        TypedCase{{{2, 9, 11, 232},
                   {3, 3, 232, 17},
                   true,
                   true,
                   {{"pads", Ints{1, 0, 2, 1}}, {"strides", Ints{2, 2}}}},
                  f32,
                  16},
        TypedCase{{{1, 232, 6, 5}, {3, 3, 232, 40}, false, true, pad1}, f32, 48},
        TypedCase{{{1, 9, 7, 5}, {3, 3, 5, 67}, true, true, pad1}, f32, 16},
        TypedCase{{{1, 5, 6, 240}, {3, 3, 240, 20}, true, true, pad1}, DType::kFloat64, 16}}) {
    Attrs attrs = WithLayout(k.c);
    attrs.Set("w_panel", k.panel);
    attrs.Set("m", k.c.w[3]);
    attrs.Set("kernel_shape", Ints{k.c.w[0], k.c.w[1]});
    std::vector<Tensor> in = Inputs(k.t, k.c, &seed);
    in[1] = test::PackPanels(in[1].Reshaped({k.c.w[0] * k.c.w[1] * k.c.w[2], k.c.w[3]}), k.panel);
    const std::string ir = LoweredText(in, attrs);
    const bool cols = k.t == f32 && k.c.w[2] > 200;
    EXPECT_EQ(ir.find("conv_cols") != std::string::npos, cols) << IntsToString(k.c.x);
    if (cols) {
      // Through the loop pipeline for a 512-bit target: TileLoops reads the panels in place.
      auto ctx = std::make_shared<PassContext>();
      ctx->SetConfig("target.vector_bits", int64_t{512});
      PassContextScope scope(ctx);
      EXPECT_THAT(
          loop::Print(LowerKernel(test::SingleOpFunction("conv_nhwc", in, attrs, false), "k").func),
          ::testing::Not(::testing::HasSubstr("_panel:")))
          << IntsToString(k.c.x);
    }
    EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", in, attrs, 2e-4, 1e-5, false))
        << IntsToString(k.c.x) << " " << IntsToString(k.c.w) << AttrsText(attrs);
  }
}

// Any image size (the generic tier): batch, height and width symbolic, every case, both
// layouts, f32 and f64; SAME's pads are expressions of the size.
TEST(LowerConvNhwc, SymbolicImageSize) {
  uint64_t seed = 400;
  for (const Case& c : Cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      const Attrs attrs = WithLayout(c);
      EXPECT_TRUE(SymbolicImageMatchesReference("conv_nhwc", Inputs(t, c, &seed), attrs, 1e-5,
                                                c.nhwc ? 3 : 1))
          << DTypeName(t) << AttrsText(attrs);
    }
  }
}

// An image of height or width 0 with pads that leave the window room, channels-last and not,
// its size symbolic (bound to 0 at run time) and constant: the padded copy is all zeros, the
// output the bias alone, and the input is never read. Run on guarded memory, where a read past
// the input's one element of storage faults (clamped to the empty axis, the copy's reads
// reached up to a row of the dims inside it past the end).
TEST(LowerConvNhwc, EmptyImageReadsNothing) {
  const Attrs pad2 = {{"pads", Ints{2, 2, 2, 2}}};
  uint64_t seed = 420;
  for (const Case& c : std::vector<Case>{
           {{1, 0, 37, 16}, {3, 3, 16, 32}, true, true, pad2},
           {{1, 37, 0, 16}, {3, 3, 16, 32}, true, true, pad2},
           {{2, 0, 19, 3}, {3, 3, 3, 16}, true, false, pad2},
           {{1, 8, 0, 37}, {3, 3, 8, 16}, false, true, pad2},
       }) {
    const Attrs attrs = WithLayout(c);
    const std::vector<Tensor> in = Inputs(DType::kFloat32, c, &seed);
    for (bool symbolic : {true, false}) {
      const size_t channel_axis = c.nhwc ? 3 : 1;
      const Function fn =
          symbolic ? test::SymbolicDimsFunction("conv_nhwc", in, attrs,
                                                [channel_axis](size_t i, size_t d) {
                                                  return test::SymbolicImageDim(i, d, channel_axis);
                                                })
                   : test::SingleOpFunction("conv_nhwc", in, attrs, false);
      EXPECT_TRUE(test::GuardedMatchesReference("conv_nhwc", fn, in, attrs, 1e-5, 1e-5))
          << (symbolic ? "symbolic " : "") << AttrsText(attrs);
    }
  }
}

// Winograd's form (winograd=true, as WinogradConvs sets it): the lowered kernel has its batched
// product (conv_wino_m), and the result matches the reference within what its transforms
// round (about 2e-5 of the outputs' magnitude, sqrt(C) for inputs and weights in [-1, 1]),
// over 8 x 8 tiles (the fewest it takes), odd channel counts, one-sided pads, no padding, a
// batch of two (32 tiles each), a larger image, and outputs that are not multiples of 4. Where it
// does not apply or would not pay, or the image size is symbolic, the direct form serves, exactly
// as without the attribute.
TEST(LowerConvNhwc, Winograd) {
  uint64_t seed = 500;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const std::vector<Case> cases = {
      {{1, 32, 32, 16}, {3, 3, 16, 16}, true, true, pad1},
      {{1, 32, 32, 17}, {3, 3, 17, 19}, true, true, pad1},
      {{1, 32, 33, 24}, {3, 3, 24, 33}, true, false, {{"pads", Ints{0, 1, 2, 0}}}},
      {{2, 18, 34, 16}, {3, 3, 16, 48}, true, true, {}},
      {{1, 56, 56, 64}, {3, 3, 64, 128}, true, true, pad1},
      // Outputs that are not multiples of 4 (29 x 37; 23 x 29, one-sided pads): whole tiles
      // over a zero-extended padded copy, cropped.
      {{1, 29, 37, 16}, {3, 3, 16, 24}, true, true, pad1},
      {{2, 23, 30, 17}, {3, 3, 17, 19}, true, false, {{"pads", Ints{0, 1, 2, 0}}}},
  };
  for (const Case& c : cases) {
    Attrs attrs = WithLayout(c);
    attrs.Set("winograd", true);
    std::vector<Tensor> in = Inputs(DType::kFloat32, c, &seed);
    EXPECT_THAT(LoweredText(in, attrs), ::testing::HasSubstr("conv_wino_m"))
        << IntsToString(c.x) << AttrsText(attrs);
    const double atol = 4e-5 * std::sqrt(static_cast<double>(c.w[2]));
    EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", in, attrs, atol, 1e-5, false))
        << IntsToString(c.x) << " " << IntsToString(c.w) << AttrsText(attrs);
  }
  // Where the direct form serves: outputs of 5 x 6 (two tiles a row: too few), 16 x 16 (16 tiles:
  // too few to repay transforming the weights), 64 x 16 with 1.1 MiB of transformed weights (four
  // tiles a row: too few to repay streaming them), 96 -> 96 channels (transformed weights past
  // L2); then a symbolic image size.
  for (const Case& c : {Case{{1, 5, 6, 16}, {3, 3, 16, 16}, true, true, pad1},
                        Case{{1, 16, 16, 16}, {3, 3, 16, 16}, true, true, pad1},
                        Case{{1, 64, 16, 64}, {3, 3, 64, 128}, true, true, pad1},
                        Case{{1, 32, 32, 96}, {3, 3, 96, 96}, true, true, pad1}}) {
    Attrs attrs = WithLayout(c);
    attrs.Set("winograd", true);
    std::vector<Tensor> in = Inputs(DType::kFloat32, c, &seed);
    EXPECT_THAT(LoweredText(in, attrs), ::testing::Not(::testing::HasSubstr("conv_wino")))
        << IntsToString(c.x);
    // (Sums of up to 864 terms: the direct form's own rounding.)
    EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", in, attrs, 5e-5, 1e-5, false))
        << IntsToString(c.x);
  }
  const Case square = {{1, 32, 32, 16}, {3, 3, 16, 16}, true, true, pad1};
  Attrs attrs = WithLayout(square);
  attrs.Set("winograd", true);
  EXPECT_TRUE(SymbolicImageMatchesReference("conv_nhwc", Inputs(DType::kFloat32, square, &seed),
                                            attrs, 1e-5, 3));
}

// The filter transform WinogradConvs applies to constant weights: U = G w G^T and back through
// G's left inverse gives w again (within f32 roundings of U's magnitude), on random weights of
// odd channel counts, a single pair, and 64 x 128.
TEST(WinogradFilter, InverseGivesTheWeightsBack) {
  uint64_t seed = 700;
  for (const Ints& shape : {Ints{3, 3, 1, 1}, Ints{3, 3, 17, 19}, Ints{3, 3, 64, 128}}) {
    Tensor w = RandomTensor(DType::kFloat32, shape, seed++);
    Tensor u = ops::WinogradFilter(w);
    EXPECT_EQ(u.shape(), (Ints{36, shape[2], shape[3]}));
    EXPECT_TRUE(test::TensorsNear(ops::WinogradFilterInverse(u), w, 2e-6, 1e-6))
        << IntsToString(shape);
  }
}

// A case with winograd_filter (as WinogradConvs passes a constant weight): its attributes, and
// its inputs with the weight given as U.
struct Given {
  Case c;
  bool winograd_form;  // whether the kernel takes Winograd's form
  Attrs attrs() const {
    Attrs a = WithLayout(c);
    a.Set("winograd", true);
    a.Set("winograd_filter", true);
    return a;
  }
  std::vector<Tensor> Inputs(uint64_t* seed) const {
    std::vector<Tensor> in = ::kiln::Inputs(DType::kFloat32, c, seed);
    in[1] = ops::WinogradFilter(in[1]);
    return in;
  }
};

// winograd_filter (as WinogradConvs passes a constant weight): w is given as U [36, C, M]. The
// kernel reads it (no conv_wino_u nest) and matches the reference (which takes w back from U),
// including 16 x 16 at batch 1 (16 tiles: too few to repay a transform in the kernel, fine
// with U given), 17 x 23 and 3 x 13 (partial tiles), 96 -> 96 channels (U past L2, fine
// given); where Winograd's form does not apply (outputs of 5 x 6 and 7 x 9: two and three tiles a
// row) the
// kernel takes w back from U (conv_wino_w) and runs the direct form.
TEST(LowerConvNhwc, WinogradFilterGiven) {
  uint64_t seed = 600;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  for (const Given& g : {Given{{{1, 32, 32, 17}, {3, 3, 17, 19}, true, true, pad1}, true},
                         Given{{{1, 16, 16, 32}, {3, 3, 32, 64}, true, true, pad1}, true},
                         Given{{{2, 18, 34, 16}, {3, 3, 16, 48}, true, false, {}}, true},
                         Given{{{1, 17, 23, 16}, {3, 3, 16, 32}, true, true, pad1}, true},
                         Given{{{1, 3, 13, 16}, {3, 3, 16, 16}, true, false, pad1}, true},
                         Given{{{1, 16, 16, 96}, {3, 3, 96, 96}, true, true, pad1}, true},
                         Given{{{1, 29, 37, 96}, {3, 3, 96, 96}, true, false, pad1}, true},
                         Given{{{1, 28, 28, 96}, {3, 3, 96, 96}, true, true, pad1}, true},
                         Given{{{1, 5, 6, 16}, {3, 3, 16, 16}, true, true, pad1}, false},
                         Given{{{1, 7, 9, 128}, {3, 3, 128, 128}, true, true, pad1}, false}}) {
    const Attrs attrs = g.attrs();
    const std::vector<Tensor> in = g.Inputs(&seed);
    const std::string ir = LoweredText(in, attrs);
    if (g.winograd_form) {
      EXPECT_THAT(ir, ::testing::HasSubstr("conv_wino_m")) << IntsToString(g.c.x);
      EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("conv_wino_u"))) << IntsToString(g.c.x);
    } else {
      EXPECT_THAT(ir, ::testing::HasSubstr("conv_wino_w")) << IntsToString(g.c.x);
      EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("conv_wino_m"))) << IntsToString(g.c.x);
    }
    const double atol = 5e-5 * std::sqrt(static_cast<double>(g.c.w[2]));
    EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", in, attrs, atol, 1e-5, false))
        << IntsToString(g.c.x) << " " << IntsToString(g.c.w);
  }
}

// Rows of tiles in groups (the cases above check the values): with U past 1 MiB (96 -> 96
// channels) and fewer than 16 tiles a row, the transformed tiles conv_wino_v [N, groups, 36,
// tiles a group, C] hold the fewest rows that divide the tile rows and make 16 tiles; with U
// smaller (64 -> 64, 576 KiB), or 16 tiles a row, one row a group.
TEST(LowerConvNhwc, WinogradGroupsRowsOfFewTiles) {
  uint64_t seed = 650;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const std::vector<std::pair<Given, std::string>> cases = {
      {{{{1, 16, 16, 96}, {3, 3, 96, 96}, true, true, pad1}, true}, "f32[1, 1, 36, 16, 96]"},
      {{{{1, 29, 37, 96}, {3, 3, 96, 96}, true, true, pad1}, true}, "f32[1, 4, 36, 20, 96]"},
      {{{{1, 28, 28, 96}, {3, 3, 96, 96}, true, true, pad1}, true}, "f32[1, 1, 36, 49, 96]"},
      {{{{1, 16, 64, 96}, {3, 3, 96, 96}, true, true, pad1}, true}, "f32[1, 4, 36, 16, 96]"},
      {{{{1, 28, 28, 64}, {3, 3, 64, 64}, true, true, pad1}, true}, "f32[1, 7, 36, 7, 64]"}};
  for (const auto& [g, v_type] : cases) {
    const std::vector<Tensor> in = g.Inputs(&seed);
    EXPECT_THAT(LoweredText(in, g.attrs()), ::testing::HasSubstr("conv_wino_v: " + v_type))
        << IntsToString(g.c.x) << " " << IntsToString(g.c.w);
  }
}

// winograd_filter over any image size (the generic tier's kernel, U of 16 -> 32 channels, 72 KiB):
// the kernel takes Winograd's form, and one compiled kernel per case matches the reference at
// image sizes from one pixel to 33 x 35, partial tiles, one-sided and SAME pads. With U of
// 64 -> 128 channels (1.1 MiB) the direct form serves any size (through conv_wino_w).
TEST(LowerConvNhwc, WinogradFilterGivenAnyImageSize) {
  uint64_t seed = 800;
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  const Attrs one_sided = {{"pads", Ints{0, 1, 2, 0}}};
  const Attrs same = {{"auto_pad", std::string("SAME_UPPER")}};
  for (const Given& g : {Given{{{1, 17, 23, 16}, {3, 3, 16, 32}, true, true, pad1}, true},
                         Given{{{2, 33, 35, 16}, {3, 3, 16, 32}, true, false, one_sided}, true},
                         Given{{{1, 6, 9, 16}, {3, 3, 16, 32}, true, true, same}, true},
                         Given{{{1, 1, 1, 16}, {3, 3, 16, 32}, true, true, pad1}, true},
                         Given{{{1, 12, 13, 64}, {3, 3, 64, 128}, true, true, pad1}, false}}) {
    const Attrs attrs = g.attrs();
    const std::vector<Tensor> in = g.Inputs(&seed);
    const std::string ir = loop::Print(
        LowerToLoops(test::SymbolicDimsFunction(
                         "conv_nhwc", in, attrs,
                         [](size_t i, size_t d) { return test::SymbolicImageDim(i, d, 3); }),
                     "k")
            .func);
    EXPECT_EQ(ir.find("conv_wino_m") != std::string::npos, g.winograd_form)
        << IntsToString(g.c.x) << AttrsText(attrs);
    const double tol = 5e-5 * std::sqrt(static_cast<double>(g.c.w[2]));
    EXPECT_TRUE(SymbolicImageMatchesReference("conv_nhwc", in, attrs, tol, 3))
        << IntsToString(g.c.x) << " " << IntsToString(g.c.w) << AttrsText(attrs);
  }
}

TEST(LowerConvNhwc, Float16) {
  uint64_t seed = 200;
  const Case c = {{1, 6, 5, 3}, {3, 3, 3, 16}, true, true, {{"pads", Ints{1, 1, 1, 1}}}};
  EXPECT_TRUE(CompiledMatchesReference("conv_nhwc", Inputs(DType::kFloat16, c, &seed),
                                       WithLayout(c), 1e-2, 1e-2, false));
}

// The type relation: the output shape, then each misuse named.
std::string TypeError(const std::vector<Type>& args, const Attrs& attrs) {
  std::vector<Expr> params;
  for (size_t i = 0; i < args.size(); ++i) params.push_back(MakeVar(StrCat("a", i), args[i]));
  try {
    InferTypes(MakeFunction({}, MakeCall("conv_nhwc", params, attrs)));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The output type of conv_nhwc on operands of these types.
std::string OutType(const std::vector<Type>& args, const Attrs& attrs) {
  std::vector<Expr> params;
  for (size_t i = 0; i < args.size(); ++i) params.push_back(MakeVar(StrCat("a", i), args[i]));
  return TypeToString(
      InferTypes(MakeFunction({}, MakeCall("conv_nhwc", params, attrs)))->body->type);
}

TEST(ConvNhwcType, OutputShapeAndErrors) {
  const DType f = DType::kFloat32;
  Expr call = MakeCall(
      "conv_nhwc",
      {MakeVar("x", TensorType({2, 9, 11, 3}, f)), MakeVar("w", TensorType({3, 3, 3, 8}, f))},
      {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  Function fn = InferTypes(MakeFunction({}, call));
  EXPECT_EQ(TypeToString(fn->body->type), "f32[2, 5, 6, 8]");
  Expr nchw = MakeCall(
      "conv_nhwc",
      {MakeVar("x", TensorType({1, 3, 9, 11}, f)), MakeVar("w", TensorType({3, 3, 3, 8}, f))},
      {{"input_nhwc", false}});
  EXPECT_EQ(TypeToString(InferTypes(MakeFunction({}, nchw))->body->type), "f32[1, 7, 9, 8]");

  EXPECT_NE(
      TypeError({TensorType({1, 9, 11}, f), TensorType({3, 3, 3, 8}, f)}, {}).find("must be 4-D"),
      std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 9, 11, 4}, f), TensorType({3, 3, 3, 8}, f)}, {})
                .find("input channels"),
            std::string::npos);
  EXPECT_NE(
      TypeError({TensorType({1, 9, 11, 3}, f), TensorType({3, 3, 3, 8}, f), TensorType({7}, f)}, {})
          .find("bias"),
      std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 9, 11, 3}, f), TensorType({3, 3, 3, 8}, DType::kFloat64)}, {})
                .find("weight dtype"),
            std::string::npos);
  EXPECT_NE(
      TypeError({TensorType({1, 2, 2, 3}, f), TensorType({3, 3, 3, 8}, f)}, {}).find("kernel"),
      std::string::npos);
  // Symbolic channels: the lowering needs them, so the type says so first. Symbolic spatial
  // dims with SAME pads are fine: ceil(in / stride) each.
  EXPECT_NE(
      TypeError({TensorType({1, 9, 11, Dim::Symbol("c")}, f), TensorType({3, 3, 3, 8}, f)}, {})
          .find("input channels must be a constant"),
      std::string::npos);
  // A transformed filter must be [36, C, M] of the input's channels, and a 3x3 kernel's.
  const Attrs given = {{"winograd_filter", true}};
  EXPECT_EQ(OutType({TensorType({1, 8, 8, 16}, f), TensorType({36, 16, 24}, f)}, given),
            "f32[1, 6, 6, 24]");
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 16}, f), TensorType({3, 3, 16, 24}, f)}, given)
                .find("winograd_filter weight must be [36, C, M]"),
            std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 16}, f), TensorType({36, 15, 24}, f)}, given)
                .find("input channels"),
            std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 16}, f), TensorType({36, 16, 24}, f)},
                      {{"winograd_filter", true}, {"kernel_shape", Ints{5, 5}}})
                .find("kernel_shape"),
            std::string::npos);
  // A packed weight [ceil(M / T), KH * KW * C, T] with kernel_shape and m.
  const Attrs packed = {{"w_panel", int64_t{16}}, {"m", int64_t{20}}, {"kernel_shape", Ints{3, 3}}};
  EXPECT_EQ(OutType({TensorType({1, 8, 8, 4}, f), TensorType({2, 36, 16}, f)}, packed),
            "f32[1, 6, 6, 20]");
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 4}, f), TensorType({2, 35, 16}, f)}, packed)
                .find("inner dimensions differ"),
            std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 4}, f), TensorType({3, 36, 16}, f)}, packed)
                .find("packed B [3, 36, 16] is not [2, K, 16]"),
            std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 4}, f), TensorType({2, 36, 16}, f)},
                      {{"w_panel", int64_t{16}}, {"m", int64_t{20}}})
                .find("a 2-D kernel_shape"),
            std::string::npos);
  EXPECT_NE(TypeError({TensorType({1, 8, 8, 4}, f), TensorType({2, 36, 16}, f)},
                      {{"w_panel", int64_t{16}}, {"kernel_shape", Ints{3, 3}}})
                .find("m >= 1"),
            std::string::npos);
  EXPECT_NE(
      TypeError({TensorType({1, 8, 8, 4}, f), TensorType({2, 36, 16}, f), TensorType({16}, f)},
                packed)
          .find("bias"),
      std::string::npos);
  Expr same = MakeCall("conv_nhwc",
                       {MakeVar("x", TensorType({1, Dim::Symbol("h"), 11, 3}, f)),
                        MakeVar("w", TensorType({3, 3, 3, 8}, f))},
                       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}});
  EXPECT_EQ(TypeToString(InferTypes(MakeFunction({}, same))->body->type),
            "f32[1, (h + 1) // 2, 6, 8]");
}

}  // namespace
}  // namespace kiln
