// col2im_nhwc (ir/ops/col2im.cc): compiled and compared with its reference kernel on random data
// over size-1, odd and larger shapes, channel counts around the vector widths, overlapping and
// gapped taps (kernel larger or smaller than the stride), begin pads, dilation and output sizes
// that crop or extend; f32 and f64; and its reference against conv_transpose's on the same
// values (col2im of x @ w as [C, KH * KW * M]).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/kernel_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::AttrsText;
using test::CompiledMatchesReference;
using test::RandomTensor;

using Ints = std::vector<int64_t>;

struct Case {
  Ints cols;  // [N, H, W, KH, KW, M]
  Ints strides, pads, dilations, out;
};

std::vector<Case> Cases() {
  return {
      {{1, 1, 1, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, {1, 1}},
      {{1, 5, 4, 3, 3, 16}, {2, 2}, {1, 1}, {1, 1}, {9, 7}},      // 3x3 stride 2 pad 1
      {{2, 6, 7, 4, 4, 17}, {2, 2}, {1, 1}, {1, 1}, {12, 14}},    // 4x4 stride 2 pad 1
      {{1, 3, 5, 2, 3, 5}, {3, 2}, {0, 2}, {2, 1}, {8, 9}},       // gaps, dilation, crop
      {{1, 4, 4, 3, 3, 33}, {1, 1}, {0, 0}, {1, 1}, {6, 6}},      // stride 1, full output
      {{1, 4, 3, 3, 2, 8}, {2, 3}, {2, 0}, {1, 2}, {9, 12}},      // extends past the taps
      {{1, 20, 20, 3, 3, 64}, {2, 2}, {1, 1}, {1, 1}, {40, 40}},  // larger than L1
  };
}

Attrs AttrsOf(const Case& c) {
  return {{"strides", c.strides},
          {"pads", c.pads},
          {"dilations", c.dilations},
          {"output_shape", c.out}};
}

TEST(LowerCol2Im, MatchesReference) {
  uint64_t seed = 1;
  for (const Case& c : Cases())
    for (DType t : {DType::kFloat32, DType::kFloat64})
      EXPECT_TRUE(CompiledMatchesReference("col2im_nhwc", {RandomTensor(t, c.cols, seed++)},
                                           AttrsOf(c), 1e-5, 1e-5, false))
          << DTypeName(t) << AttrsText(AttrsOf(c));
}

// conv_transpose(x, w) == transpose(col2im_nhwc(x_nhwc @ w'), NCHW), w' = w as [C, KH*KW*M].
TEST(Col2ImNhwc, IsConvTransposesScatter) {
  const int64_t n = 2, c = 3, h = 4, w = 5, m = 6, kh = 3, kw = 4;
  Tensor x = RandomTensor(DType::kFloat32, {n, c, h, w}, 11);
  Tensor wt = RandomTensor(DType::kFloat32, {c, m, kh, kw}, 12);
  const Attrs ct = {{"kernel_shape", Ints{kh, kw}},
                    {"strides", Ints{2, 3}},
                    {"pads", Ints{1, 2, 0, 1}},
                    {"output_padding", Ints{1, 0}}};
  Tensor want = RunOpReference("conv_transpose", {x, wt}, ct)[0];
  // cols[n, iy, ix, ky, kx, j] = sum_c x[n, c, iy, ix] * w[c, j, ky, kx]
  Tensor cols = Tensor::Empty(DType::kFloat32, {n, h, w, kh, kw, m});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < w; ++ix)
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < kw; ++kx)
            for (int64_t j = 0; j < m; ++j) {
              double s = 0;
              for (int64_t ci = 0; ci < c; ++ci)
                s += double(x.data<float>()[((b * c + ci) * h + iy) * w + ix]) *
                     wt.data<float>()[((ci * m + j) * kh + ky) * kw + kx];
              cols.data<float>()[((((b * h + iy) * w + ix) * kh + ky) * kw + kx) * m + j] =
                  float(s);
            }
  const std::vector<int64_t>& ys = want.shape();
  Tensor got = RunOpReference("col2im_nhwc", {cols},
                              {{"strides", Ints{2, 3}},
                               {"pads", Ints{1, 2}},
                               {"dilations", Ints{1, 1}},
                               {"output_shape", Ints{ys[2], ys[3]}}})[0];
  EXPECT_TRUE(test::TensorsNear(PermuteAxes(got, {0, 3, 1, 2}), want, 1e-5, 1e-5));
}

TEST(Col2ImNhwc, TypeErrors) {
  Tensor five = RandomTensor(DType::kFloat32, {1, 2, 2, 2, 2}, 1);
  Attrs ok = {{"strides", Ints{1, 1}},
              {"pads", Ints{0, 0}},
              {"dilations", Ints{1, 1}},
              {"output_shape", Ints{3, 3}}};
  EXPECT_THROW(InferOpType("col2im_nhwc", {TypeOfTensor(five)}, ok), Error);
  Tensor six = RandomTensor(DType::kFloat32, {1, 2, 2, 2, 2, 3}, 1);
  Attrs bad = ok;
  bad.Set("strides", Ints{0, 1});
  EXPECT_THROW(InferOpType("col2im_nhwc", {TypeOfTensor(six)}, bad), Error);
  bad = ok;
  bad.Set("output_shape", Ints{3});
  EXPECT_THROW(InferOpType("col2im_nhwc", {TypeOfTensor(six)}, bad), Error);
}

}  // namespace
}  // namespace kiln
