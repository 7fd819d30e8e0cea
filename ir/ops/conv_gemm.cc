// conv as a GEMM over a phase-split padded input (ir/ops/conv_gemm.h).
#include "ir/ops/conv_gemm.h"

#include <functional>

#include "ir/error.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {
namespace {

using loop::Expr;

Expr I64(int64_t v) {
  return loop::IntImm(v);
}

}  // namespace

std::optional<ConvChannels> ConstF32Channels(const LTensor& x, const LTensor& w) {
  ConvChannels ch;
  if (x.dtype != DType::kFloat32 || !loop::IsConstInt(x.shape[1], &ch.c) ||
      !loop::IsConstInt(w.shape[0], &ch.m) || !loop::IsConstInt(w.shape[1], &ch.cg))
    return std::nullopt;
  return ch;
}

bool IsIdentityRead(LowerContext& ctx, const LTensor& t) {
  std::vector<Expr> idx;
  for (size_t i = 0; i < t.shape.size(); ++i) idx.push_back(ctx.NewVar("v"));
  Expr e = t.at(idx);
  if (e->kind == loop::ExprKind::kCast && e->dtype == t.dtype) e = loop::AsCast(e)->value;
  const loop::LoadNode* load = loop::AsLoad(e);
  if (!load || load->buffer->dtype != t.dtype || !load->buffer->strides.empty() ||
      load->indices.size() != idx.size() || load->buffer->shape.size() != idx.size())
    return false;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (load->indices[i].get() != idx[i].get()) return false;
    int64_t a = 0, b = 0;
    bool ca = loop::IsConstInt(load->buffer->shape[i], &a), cb = loop::IsConstInt(t.shape[i], &b);
    if (ca != cb || (ca && a != b) || (!ca && load->buffer->shape[i].get() != t.shape[i].get()))
      return false;
  }
  return true;
}

Expr FlatRead(const LTensor& t, std::vector<Expr> lead, const Expr& flat) {
  while (lead.size() + 1 < t.shape.size()) lead.push_back(I64(0));
  lead.push_back(flat);
  return t.at(lead);
}

PhaseSplit SplitPhases(LowerContext& ctx, const LTensor& x, const std::vector<WindowDim>& dims,
                       double fill) {
  const DType t = x.dtype;
  const size_t r = dims.size();

  // The geometry of P: phases per dim (the stride), plane extents Q_d, and the largest tap
  // offset along each dim.
  std::vector<int64_t> q(r), max_off(r);
  int64_t phases = 1;
  bool direct = true;  // x itself is P: a 1x1 kernel, stride 1, no padding
  for (size_t d = 0; d < r; ++d) {
    const WindowDim& c = dims[d];
    max_off[d] = (c.kernel - 1) * c.dilation / c.stride;
    q[d] = c.out + max_off[d];
    phases *= c.stride;
    direct = direct && c.kernel == 1 && c.stride == 1 && c.pad_begin == 0 && c.out == c.in;
  }
  // q_stride[d]: the flat distance between neighbours along dim d in a plane of P.
  std::vector<int64_t> q_stride(r, 1);
  for (size_t d = r - 1; d-- > 0;) q_stride[d] = q_stride[d + 1] * q[d + 1];
  int64_t plane = q_stride[0] * q[0];

  LTensor p;
  int64_t plane_extent = plane;  // elements per (n, channel, phase) block of P
  direct = direct && IsIdentityRead(ctx, x);
  if (direct) {
    p = x;
  } else {
    // P[n, ch, phase, q_1, ..., q_r], with one more (zero) row along q_1 when r > 1: the taps
    // of the last, dropped columns of the last row read up to sum_{d>0} max_off[d] *
    // q_stride[d] < q_stride[0] elements past the plane.
    bool tail_row = false;
    for (size_t d = 1; d < r; ++d) tail_row = tail_row || max_off[d] > 0;
    std::vector<Expr> p_shape = {x.shape[0], x.shape[1], I64(phases)};
    for (size_t d = 0; d < r; ++d) p_shape.push_back(I64(q[d] + (d == 0 && tail_row ? 1 : 0)));
    plane_extent = (q[0] + (tail_row ? 1 : 0)) * q_stride[0];
    // One pass that writes every element of P once: per phase p_d, the q_d whose input
    // position q_d * stride + p_d - pad_begin falls inside form a range [lo_d, hi_d) that
    // depends only on p_d. A row (all dims but the last) outside those ranges is zeros; a row
    // inside is zeros, the input copied (contiguously for stride 1), zeros.
    p = ctx.MaterializeFill(t, p_shape, "conv_input", [&](const loop::Buffer& buf) {
      loop::Var n = ctx.NewVar("n"), ch = ctx.NewVar("ch");
      std::vector<loop::Var> pv(r), qv(r);
      std::vector<Expr> lo(r), hi(r);
      Expr phase = I64(0);
      for (size_t d = 0; d < r; ++d) {
        const WindowDim& c = dims[d];
        pv[d] = ctx.NewVar("ph");
        qv[d] = ctx.NewVar("q");
        phase = loop::Add(loop::Mul(phase, I64(c.stride)), pv[d]);
        // p < stride, so neither numerator is negative. Both ends are clamped into [0, q]: with
        // more padding than a row holds positions (pad_begin >= q * stride), no q is inside and
        // the row is all fill; unclamped, its fill loops would get negative extents.
        lo[d] = loop::Min(
            I64(q[d]),
            loop::FloorDiv(loop::Sub(I64(c.pad_begin + c.stride - 1), pv[d]), I64(c.stride)));
        hi[d] = loop::Max(
            lo[d],
            loop::Min(I64(q[d]),
                      loop::FloorDiv(loop::Sub(I64(c.in + c.pad_begin + c.stride - 1), pv[d]),
                                     I64(c.stride))));
      }
      auto index = [&](const Expr& last) {
        std::vector<Expr> pi = {n, ch, phase};
        for (size_t d = 0; d + 1 < r; ++d) pi.push_back(qv[d]);
        pi.push_back(last);
        return pi;
      };
      auto run = [&](const Expr& from, const Expr& to, bool copy) {
        loop::Var v = ctx.NewVar("q");
        Expr value = lower::Const(fill, t);
        if (copy) {
          std::vector<Expr> xi = {n, ch};
          for (size_t d = 0; d < r; ++d) {
            Expr qd = d + 1 < r ? Expr(qv[d]) : Expr(v);
            xi.push_back(loop::Add(loop::Mul(qd, I64(dims[d].stride)),
                                   loop::Sub(pv[d], I64(dims[d].pad_begin))));
          }
          value = x.at(xi);
        }
        return loop::For(v, from, loop::Sub(to, from), loop::ForKind::kSerial,
                         loop::Store(buf, index(v), value));
      };
      const size_t last = r - 1;
      loop::Stmt inside_row =
          loop::Seq({run(I64(0), lo[last], false), run(lo[last], hi[last], true),
                     run(hi[last], I64(q[last]), false)});
      Expr row_inside;
      for (size_t d = 0; d < last; ++d) {
        Expr in_d = loop::MakeBinary(loop::BinaryOp::kAnd,
                                     loop::MakeBinary(loop::BinaryOp::kGE, qv[d], lo[d]),
                                     loop::MakeBinary(loop::BinaryOp::kLT, qv[d], hi[d]));
        row_inside = row_inside ? loop::MakeBinary(loop::BinaryOp::kAnd, row_inside, in_d) : in_d;
      }
      loop::Stmt row =
          row_inside ? loop::IfThenElse(row_inside, inside_row, run(I64(0), I64(q[last]), false))
                     : inside_row;
      for (size_t d = last; d-- > 0;)
        row = loop::For(qv[d], I64(0), p_shape[3 + d], loop::ForKind::kSerial, row);
      for (size_t d = r; d-- > 0;)
        row = loop::For(pv[d], I64(0), I64(dims[d].stride), loop::ForKind::kSerial, row);
      row = loop::For(ch, I64(0), x.shape[1], loop::ForKind::kSerial, row);
      return loop::For(n, I64(0), x.shape[0], loop::ForKind::kSerial, row);
    });
  }

  return PhaseSplit{p, dims, q_stride, plane_extent, phases, direct};
}

void PhaseSplit::TapPlace(const std::vector<Expr>& taps, Expr* phase, Expr* offset) const {
  *phase = I64(0);
  *offset = I64(0);
  for (size_t d = 0; d < dims.size(); ++d) {
    const WindowDim& c = dims[d];
    Expr shift = loop::Mul(taps[d], I64(c.dilation));
    *phase = loop::Add(loop::Mul(*phase, I64(c.stride)), loop::FloorMod(shift, I64(c.stride)));
    *offset = loop::Add(*offset, loop::Mul(loop::FloorDiv(shift, I64(c.stride)), I64(q_stride[d])));
  }
}

Expr PhaseSplit::Read(const Expr& n, const Expr& channel, const std::vector<Expr>& taps,
                      const Expr& j) const {
  Expr phase, offset;
  TapPlace(taps, &phase, &offset);
  // P's block (n, channel, phase) starts at flat offset (channel * phases + phase) * extent;
  // x as P (no copy) has one phase.
  Expr block = loop::Add(loop::Mul(channel, I64(phases)), phase);
  return FlatRead(p, {n}, loop::Add(loop::Mul(block, I64(plane_extent)), loop::Add(j, offset)));
}

Expr PhaseSplit::ReadInChannel(const Expr& n, const Expr& channel, const std::vector<Expr>& taps,
                               const Expr& j) const {
  Expr phase, offset;
  TapPlace(taps, &phase, &offset);
  return FlatRead(p, {n, channel},
                  loop::Add(loop::Mul(phase, I64(plane_extent)), loop::Add(j, offset)));
}

Expr PhaseSplit::Column(const std::vector<Expr>& out_idx) const {
  Expr j = I64(0);
  for (size_t d = 0; d < dims.size(); ++d)
    j = loop::Add(j, loop::Mul(out_idx[2 + d], I64(q_stride[d])));
  return j;
}

std::optional<std::vector<LTensor>> LowerConvAsGemm(LowerContext& ctx,
                                                    const std::vector<LTensor>& in, int64_t group,
                                                    const std::vector<WindowDim>& dims,
                                                    const std::vector<Expr>& out_shape) {
  const LTensor& x = in[0];
  const LTensor& w = in[1];
  const DType t = x.dtype;
  std::optional<ConvChannels> ch = ConstF32Channels(x, w);
  if (!ch || group < 1 || ch->m % group != 0 || !IsIdentityRead(ctx, w)) return std::nullopt;
  const int64_t m_count = ch->m, cg = ch->cg;
  const size_t r = dims.size();
  int64_t kernel_size = 1;
  for (const WindowDim& c : dims) kernel_size *= c.kernel;
  PhaseSplit split = SplitPhases(ctx, x, dims, 0);
  const std::vector<int64_t>& q_stride = split.q_stride;

  // E[n, m, j]: the output positions of one (n, m) as columns j = sum o_d * q_stride[d].
  const int64_t columns = dims[0].out * q_stride[0];
  const int64_t m_per_group = m_count / group;
  const int64_t k_total = cg * kernel_size;
  int64_t pixels = 1;
  for (const WindowDim& c : dims) pixels *= c.out;
  // The channel of P and the tap (k_1, ..., k_r), in the weight's row-major order, that
  // reduction step kk of output channel m reads.
  // The channel of P that output channel m reads as its group's channel c.
  auto group_channel = [m_per_group, cg, group](const Expr& m, const Expr& c) {
    return group > 1 ? loop::Add(loop::Mul(loop::FloorDiv(m, I64(m_per_group)), I64(cg)), c) : c;
  };
  auto channel_of = [group_channel, kernel_size](const Expr& m, const Expr& kk) {
    return group_channel(m, loop::FloorDiv(kk, I64(kernel_size)));
  };
  auto taps_of = [dims, r](const Expr& kk) {
    std::vector<Expr> taps(r);
    int64_t tap_radix = 1;
    for (size_t d = r; d-- > 0;) {
      taps[d] = loop::FloorMod(loop::FloorDiv(kk, I64(tap_radix)), I64(dims[d].kernel));
      tap_radix *= dims[d].kernel;
    }
    return taps;
  };
  // Where a row of the output is short, the columns Q_d - out_d past each row are a large share
  // of E (a fifth or more: 2 of 10 at 8 x 8): then the columns are copied once, tap by tap, into
  // cols[n, kk, pixel] (im2col) and E is a plain matmul over the pixels, which TileLoops blocks
  // like a 1x1 conv's, consumers fused into its tiles (small CNN, 3x3 conv 64 -> 128 at 8 x 8:
  // 52 -> 43 us at batch 1, 1.69 -> 1.50 ms at batch 32 with 4.7 MB of cols). At 16 x 16 (2 of
  // 18) the copy cost what the columns saved, so a 3x3 conv keeps E on rows of more than 10
  // pixels. cols is bounded by kIm2colBytes, past which E serves.
  constexpr int64_t kIm2colBytes = 8 << 20;
  int64_t batch = 0;
  const bool im2col = !split.direct && group == 1 && (columns - pixels) * 5 >= pixels &&
                      loop::IsConstInt(x.shape[0], &batch) &&
                      batch * k_total * pixels * 4 <= kIm2colBytes;
  LTensor wv = w;
  std::function<Expr(const Expr& n, const Expr& m, const Expr& kk, const Expr& j)> read =
      [split, channel_of, taps_of](const Expr& n, const Expr& m, const Expr& kk, const Expr& j) {
        return split.Read(n, channel_of(m, kk), taps_of(kk), j);
      };
  if (im2col) {
    std::vector<Expr> cols_shape = {x.shape[0], I64(k_total)};
    for (const WindowDim& c : dims) cols_shape.push_back(I64(c.out));
    auto fill = [split, channel_of, taps_of](const std::vector<Expr>& idx) {
      return split.Read(idx[0], channel_of(I64(0), idx[1]), taps_of(idx[1]), split.Column(idx));
    };
    LTensor cols = ctx.Materialize(LTensor{t, cols_shape, fill}, "conv_cols");
    read = [cols, pixels](const Expr& n, const Expr&, const Expr& kk, const Expr& j) {
      return FlatRead(cols, {n}, loop::Add(loop::Mul(kk, I64(pixels)), j));
    };
  }
  // The reduction as a nest over the channel and each tap, where P is read in place (its taps
  // are shifts of rows, strided convs' within their phase): then P's offset is affine in the
  // channel, where one step kk per (channel, tap) would need kk // 9, kk // 3 % 3 and kk % 3
  // per step, as many integer instructions as the 16 FMAs of a 4 x 64 tile (small CNN, 3x3
  // conv 3 -> 32 at 32 x 32, batch 32: 360 -> 265 us). A strided conv's phase (ky % 2, ...)
  // and row (ky // 2) fold to constants once UnrollLoops unrolls the tap loops around the
  // register tile (3x3 stride-2 conv 32 -> 32 at 112 x 112: 353 -> 303 us, with TileLoops
  // streaming the 1.7 MB of P once). im2col's columns are one step kk (cols[n, kk, pixel]).
  const bool tap_nest = !im2col;
  // E at idx = {n, m, j}; `group`, where given, is m's group (m // (M / G)) as an expression of
  // its own.
  auto gemm = [&ctx, wv, read, k_total, tap_nest, split, dims, cg, group_channel](
                  const std::vector<Expr>& idx, const Expr& group) {
    if (!tap_nest) {
      loop::Var kk = ctx.NewVar("kk");
      Expr wval = FlatRead(wv, {idx[1]}, kk);
      return loop::Reduce(loop::ReduceKind::kSum, loop::Mul(wval, read(idx[0], idx[1], kk, idx[2])),
                          {{kk, I64(k_total)}});
    }
    std::vector<loop::IterVar> axes;
    loop::Var c = ctx.NewVar("kc");
    axes.push_back({c, I64(cg)});
    Expr kk = c;
    std::vector<Expr> taps;
    for (const WindowDim& d : dims) {
      loop::Var t = ctx.NewVar("kt");
      axes.push_back({t, I64(d.kernel)});
      taps.push_back(t);
      kk = loop::Add(loop::Mul(kk, I64(d.kernel)), t);
    }
    Expr channel = group ? loop::Add(loop::Mul(group, I64(cg)), c) : group_channel(idx[1], c);
    Expr wval = FlatRead(wv, {idx[1]}, kk);
    return loop::Reduce(loop::ReduceKind::kSum,
                        loop::Mul(wval, split.Read(idx[0], channel, taps, idx[2])),
                        std::move(axes));
  };
  // Output rows of a multiple of 16 pixels: E is not stored either. The product is written per
  // output pixel, reading P at its padded column, and CollapseLoops makes the pixels one column
  // loop that reads P through row // W and row % W (a row-split read, whole vectors within a
  // row): no columns past the rows are computed and the consumers fuse into the tiles (small
  // CNN, 3x3 conv 32 -> 64 at 16 x 16, batch 32: 1.42 -> 1.24 ms with the tap nest below).
  const bool row_split = r >= 2 && dims[r - 1].out % 16 == 0;
  // E itself where its columns are the output pixels (x or cols read in place), else E stored
  // once.
  std::function<Expr(const std::vector<Expr>&)> e = [gemm](const std::vector<Expr>& idx) {
    return gemm(idx, nullptr);
  };
  if (group > 1) {
    // Grouped: E as [N, G, M / G, columns], so a block of rows (output channels) lies within one
    // group and every row of it reads the same vectors of P (over M it read P at m // (M / G),
    // a load per row and FMA; a 3x3 conv 64 -> 64 in 4 groups at 56 x 56, 1 thread: 1.69 x
    // ONNX Runtime's time).
    LTensor grouped{t,
                    {x.shape[0], I64(group), I64(m_per_group), I64(columns)},
                    [gemm, m_per_group](const std::vector<Expr>& idx) {
                      return gemm(
                          {idx[0], loop::Add(loop::Mul(idx[1], I64(m_per_group)), idx[2]), idx[3]},
                          idx[1]);
                    }};
    auto g = ctx.Materialize(grouped, "conv_gemm").at;
    e = [g, m_per_group](const std::vector<Expr>& idx) {
      return g({idx[0], loop::FloorDiv(idx[1], I64(m_per_group)),
                loop::FloorMod(idx[1], I64(m_per_group)), idx[2]});
    };
  } else if (!split.direct && !im2col && !row_split) {
    e = ctx.Materialize(LTensor{t, {x.shape[0], I64(m_count), I64(columns)}, e}, "conv_gemm").at;
  }
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];
  // The column of an output index: in E's padded rows, or among the pixels.
  std::vector<int64_t> col_stride = q_stride;
  if (im2col)
    for (size_t d = r; d-- > 0;)
      col_stride[d] = d + 1 < r ? col_stride[d + 1] * dims[d + 1].out : 1;
  auto out = [e, bias, col_stride](const std::vector<Expr>& idx) {
    Expr j = I64(0);
    for (size_t d = 0; d < col_stride.size(); ++d)
      j = loop::Add(j, loop::Mul(idx[2 + d], I64(col_stride[d])));
    Expr v = e({idx[0], idx[1], j});
    if (bias) v = loop::Add(v, bias->at({idx[1]}));
    return v;
  };
  return std::vector<LTensor>{LTensor{t, out_shape, out}};
}

}  // namespace kiln::ops
