// conv lowered as a matrix product that TileLoops turns into a register-blocked, packed GEMM
// (the fast path of conv's lowering in ir/ops/conv.cc; the direct loop nest stays the fallback).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/lower_api.h"

namespace kiln::ops {

// Whether t.at(idx) is exactly a load of a buffer of t's shape at idx (maybe under casts to
// t's dtype): then t may be read at any flat offset by putting it in the last index.
bool IsIdentityRead(LowerContext& ctx, const LTensor& t);
// `t` read at flat offset `flat` within the block that starts at its first `lead.size()`
// indices: the lead indices, zeros, and the offset as the last index (IsIdentityRead holds).
loop::Expr FlatRead(const LTensor& t, std::vector<loop::Expr> lead, const loop::Expr& flat);

// A conv's channel counts when x is f32 and they are constants: x's C, w's M and C/group.
struct ConvChannels {
  int64_t c = 0, m = 0, cg = 0;
};
std::optional<ConvChannels> ConstF32Channels(const LTensor& x, const LTensor& w);

// One spatial dim of a windowed op (conv, conv_transpose, the pools), all sizes concrete: the
// geometry ComputeWindow (ir/ops/window.h) computes and the phase split below reads.
struct WindowDim {
  int64_t in = 1;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
  int64_t out = 1;
};

// The input of a windowed op (conv, the pools) padded with `fill` and split into stride
// phases, as P below: P[n, c, phase, q_1, ..., q_r] holds x at q_d * stride_d + phase_d -
// pad_begin_d per dim (fill outside x), planes of Q_d = out_d + (kernel_d - 1) * dilation_d /
// stride_d, with the rows past the plane that the last columns' taps read. Then the tap
// (k_1, ..., k_r) of every output is a unit-stride shift of the output's column j = sum o_d *
// q_stride[d]. x itself serves as P (no copy) for a 1x1 window, stride 1, no padding.
struct PhaseSplit {
  LTensor p;
  std::vector<WindowDim> dims;
  std::vector<int64_t> q_stride;  // flat distance between neighbours along dim d of a plane
  int64_t plane_extent = 1;       // elements per (n, channel, phase) block of P
  int64_t phases = 1;             // prod of the strides
  bool direct = false;            // p is x itself (a 1x1 window, stride 1, no padding)

  // The element of P that tap `taps` (one kernel index per spatial dim) of column `j` reads.
  loop::Expr Read(const loop::Expr& n, const loop::Expr& channel,
                  const std::vector<loop::Expr>& taps, const loop::Expr& j) const;
  // The same element, indexed as P[n, channel, 0, ..., flat offset within the channel]: an
  // access whose dim 1 is the channel, as FuseLoops needs to fuse loops over channels.
  loop::Expr ReadInChannel(const loop::Expr& n, const loop::Expr& channel,
                           const std::vector<loop::Expr>& taps, const loop::Expr& j) const;
  // The column j of an output index [n, c, o_1, ..., o_r].
  loop::Expr Column(const std::vector<loop::Expr>& out_idx) const;

 private:
  // Tap `taps`'s stride phase (its block within a channel) and its offset from column j.
  void TapPlace(const std::vector<loop::Expr>& taps, loop::Expr* phase, loop::Expr* offset) const;
};
PhaseSplit SplitPhases(LowerContext& ctx, const LTensor& x, const std::vector<WindowDim>& dims,
                       double fill);

// conv(x, w[, bias]) with `group` groups as
//
//   E[n, m, j] = sum over kk in [0, C/group * prod(kernel)) of
//                w[m, kk] * P[n, group_of(m) * C/group + c(kk), phase(kk), j + offset(kk)]
//   out[n, m, o_1, ..., o_r] = E[n, m, o_1 * Q_2 * ... * Q_r + ... + o_r] + bias[m]
//
// where P is the input, zero-padded and split into stride phases (P[.., p, q] holds the padded
// input at q * stride + p per dim), laid out in planes of Q_1 x ... x Q_r with
// Q_d = out_d + (kernel_d - 1) * dilation_d / stride_d. In P every tap of every output is a
// unit-stride shift of j, so E is a matmul whose second operand is read along its rows: j is
// the columns (the output positions, with Q_d - out_d columns per row of dim d computed and
// dropped), m the rows, kk the reduction. A 1x1 conv with stride 1 and no padding reads x
// itself as P, and its columns are the output pixels: E is not materialized, the output is the
// reduction itself, so fused consumers (bias, activation, residual) apply as TileLoops stores
// each tile (CollapseLoops first makes the pixel loops one column loop). So does a conv whose
// short rows would make the dropped columns a fifth or more of E (8 x 8 outputs of a 3x3
// kernel): its taps are copied into cols[n, kk, pixel] (im2col) and E reads cols as a 1x1 conv
// reads x. Accumulates in f32.
//
// nullopt (the caller lowers conv directly) for other than f32, symbolic channel counts, or
// operands that are not plain reads and would need copying anyway.
std::optional<std::vector<LTensor>> LowerConvAsGemm(LowerContext& ctx,
                                                    const std::vector<LTensor>& in, int64_t group,
                                                    const std::vector<WindowDim>& dims,
                                                    const std::vector<loop::Expr>& out_shape);

// A depthwise conv (group = C = M, one input channel per output channel) read in place, row by
// row of the output, padding taps skipped (ir/ops/conv_depthwise.cc): no copy of the input and
// no stored product, which are most of the GEMM form's traffic when each output sums only the
// kernel's taps. For strided rows of 16 or more outputs and stride-1 rows of 48 or more;
// nullopt (the caller tries LowerDepthwisePlanes, then LowerConvAsGemm) for other convs, dtypes
// other than f32, symbolic channel counts, more than 64 taps, or operands that are not plain
// reads (a fused producer would run once per tap).
std::optional<std::vector<LTensor>> LowerDepthwiseConv(LowerContext& ctx,
                                                       const std::vector<LTensor>& in,
                                                       int64_t group,
                                                       const std::vector<WindowDim>& dims,
                                                       const std::vector<loop::Expr>& out_shape);

// A depthwise conv channel by channel through its own padded plane (ir/ops/conv_depthwise.cc):
// the plane, each output's taps summed along the plane's padded rows (columns past a row's end
// computed and dropped, as in the GEMM form) at stride 1 (a strided conv keeps every stride-th
// one), and the output, all indexed by (n, c), so FuseLoops makes them one loop over the
// channels and the plane and the products shrink to one channel's, in L1. For the convs
// LowerDepthwiseConv leaves (short rows); nullopt under the same conditions as that otherwise.
std::optional<std::vector<LTensor>> LowerDepthwisePlanes(LowerContext& ctx,
                                                         const std::vector<LTensor>& in,
                                                         int64_t group,
                                                         const std::vector<WindowDim>& dims,
                                                         const std::vector<loop::Expr>& out_shape);

// Whether conv_nhwc (ir/ops/conv_layout.cc) takes its im2col form for `batch` images of `pixels`
// output pixels each and a reduction of `k_total` = KH * KW * C: f32, a reduction past 2048,
// and the copy of the taps within 8 MiB. PackConstantWeights packs the weights of those convs.
bool ConvNhwcIm2colFits(DType t, int64_t batch, int64_t pixels, int64_t k_total);

}  // namespace kiln::ops
