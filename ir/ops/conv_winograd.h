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

// Whether Winograd's form serves a conv of `channels` -> `m` channels over `images` images (a
// symbolic batch counts as one) with constant window `dims`: a 3x3 window, stride and dilation
// 1, and the tile counts and U sizes that make it pay. Outputs need not be multiples of 4 (the
// last tiles are computed whole and cropped). `filter_transformed`: U comes precomputed (no
// per-run transform to repay).
bool WinogradFits(int64_t channels, int64_t m, int64_t images, const std::vector<WindowDim>& dims,
                  bool filter_transformed);
// The same for any image size (a shape-generic kernel; `dims` from SymbolicWindow): only with U
// precomputed and small enough that rows of few tiles lose little, since the size is not known.
bool WinogradFitsAnySize(int64_t channels, int64_t m, const std::vector<WindowDim>& dims,
                         bool filter_transformed);
// The padded input extent Winograd's form reads along a dim of `out` outputs: whole tiles,
// 4 ceil(out / 4) + 2 (the padded copy's extra rows and columns are zeros).
int64_t WinogradInputSpan(int64_t out);
loop::Expr WinogradInputSpan(const loop::Expr& out);

// U[6 xi + nu, c, m] = (G w[., ., c, m] G^T)[xi, nu] for w [3, 3, C, M] f32 (summed in f64).
Tensor WinogradFilter(const Tensor& w);
// w [3, 3, C, M] back from U [36, C, M] (conv_nhwc's reference kernel with winograd_filter),
// through a left inverse of G: exact but for a few roundings of U's magnitude.
Tensor WinogradFilterInverse(const Tensor& u);

// The output (out_shape, NHWC; constant or symbolic extents) materialized, where WinogradFits
// or WinogradFitsAnySize holds (the caller checks, f32 only), with p the input padded so that
// output (oy, ox) reads p's rows oy .. oy + 2 and columns ox .. ox + 2, and p's extents at least
// WinogradInputSpan of the outputs'; w the [3, 3, C, M] weights, or U [36, C, M] when
// `filter_transformed`; `channels` C, `m` M.
LTensor LowerWinogradNhwc(LowerContext& ctx, const LTensor& p, const LTensor& w,
                          bool filter_transformed, const std::optional<LTensor>& bias,
                          int64_t channels, int64_t m, const std::vector<loop::Expr>& out_shape);
// w [3, 3, C, M] materialized from U [36, C, M]: the direct form's weights where Winograd's
// does not apply to a conv whose filter was transformed.
LTensor LowerWinogradFilterInverse(LowerContext& ctx, const LTensor& u);

}  // namespace kiln::ops
