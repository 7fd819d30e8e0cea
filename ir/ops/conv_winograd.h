// conv_nhwc's 3x3 stride-1 convs of f32 by Winograd's F(4x4, 3x3) (ir/ops/conv_winograd.cc):
// the lowering, where it applies, and the filter transform U = G w G^T that WinogradConvs
// (passes/graph/winograd.cc) computes once for constant weights.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/lower_api.h"
#include "ir/ops/conv_gemm.h"
#include "ir/tensor.h"

namespace kiln::ops {

// The transformed filter's first dim: one 6x6 tile per (input, output) channel pair.
inline constexpr int64_t kWinogradTileElems = 36;

// Whether LowerWinogradNhwc takes Winograd's form for a conv of `channels` -> `m` channels
// over `images` images (a symbolic batch counts as one) with window `dims` (3x3, stride and
// dilation 1 assumed checked): outputs multiples of 4, and the tile counts and U sizes there
// that make it pay. `filter_transformed`: U comes precomputed (no per-run transform to repay).
bool WinogradFits(int64_t channels, int64_t m, int64_t images, const std::vector<WindowDim>& dims,
                  bool filter_transformed);

// U[6 xi + nu, c, m] = (G w[., ., c, m] G^T)[xi, nu] for w [3, 3, C, M] f32 (summed in f64).
Tensor WinogradFilter(const Tensor& w);
// w [3, 3, C, M] back from U [36, C, M] (conv_nhwc's reference kernel with winograd_filter),
// through a left inverse of G: exact but for a few roundings of U's magnitude.
Tensor WinogradFilterInverse(const Tensor& u);

// The output (out_shape, NHWC) materialized, with p the input padded so that output (oy, ox)
// reads p's rows oy .. oy + 2 and columns ox .. ox + 2; w the [3, 3, C, M] weights, or U
// [36, C, M] when `filter_transformed`; `channels` C. nullopt where WinogradFits does not hold
// (or the dtype and window are not F(4x4, 3x3)'s).
std::optional<LTensor> LowerWinogradNhwc(LowerContext& ctx, const LTensor& p, const LTensor& w,
                                         bool filter_transformed,
                                         const std::optional<LTensor>& bias,
                                         const std::vector<WindowDim>& dims, int64_t channels,
                                         const std::vector<loop::Expr>& out_shape);
// w [3, 3, C, M] materialized from U [36, C, M]: the direct form's weights where Winograd's
// does not apply to a conv whose filter was transformed.
LTensor LowerWinogradFilterInverse(LowerContext& ctx, const LTensor& u);

}  // namespace kiln::ops
