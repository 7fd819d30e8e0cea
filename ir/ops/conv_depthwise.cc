// Depthwise conv read in place (ir/ops/conv_gemm.h): one input channel per output channel, so
// there is no reduction over channels to block, and the GEMM form's padded, phase-split copy of
// the input and its stored product are most of the traffic of a kernel that is bound by memory.
#include <functional>
#include <tuple>
#include <utility>

#include "ir/dim.h"
#include "ir/error.h"
#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {
namespace {

using loop::Expr;
using loop::Stmt;

Expr I64(int64_t v) {
  return loop::IntImm(v);
}

// Both forms below sum every tap of an output as one expression: at most this many terms.
constexpr int64_t kMaxTaps = 64;

// A depthwise conv (one input channel per output channel) of f32 with constant channel counts,
// x and w plain reads, and at most kMaxTaps taps: what both forms below handle.
bool PlainDepthwise(LowerContext& ctx, const std::vector<LTensor>& in, int64_t group,
                    const std::vector<WindowDim>& dims) {
  std::optional<ConvChannels> ch = ConstF32Channels(in[0], in[1]);
  int64_t taps = 1;
  for (const WindowDim& d : dims) taps *= d.kernel;
  return ch && !dims.empty() && group >= 2 && group == ch->c && ch->m == ch->c && ch->cg == 1 &&
         taps <= kMaxTaps && IsIdentityRead(ctx, in[0]) && IsIdentityRead(ctx, in[1]);
}

// Every combination of kernel indices of the first `count` dims, as constants, the last dim
// fastest (the weight's row-major order).
std::vector<std::vector<Expr>> TapIndices(const std::vector<WindowDim>& dims, size_t count) {
  std::vector<std::vector<Expr>> taps = {{}};
  for (size_t d = 0; d < count; ++d) {
    std::vector<std::vector<Expr>> next;
    for (const std::vector<Expr>& prefix : taps)
      for (int64_t k = 0; k < dims[d].kernel; ++k) {
        next.push_back(prefix);
        next.back().push_back(I64(k));
      }
    taps = std::move(next);
  }
  return taps;
}

// The outputs [lo, hi) along `g` whose tap kv reads inside the input (not the padding).
std::pair<int64_t, int64_t> TapColumns(const WindowDim& g, int64_t kv) {
  const int64_t shift = kv * g.dilation - g.pad_begin;  // input = o * stride + shift
  return {std::max<int64_t>(0, FloorDivInt(-shift + g.stride - 1, g.stride)),
          std::min<int64_t>(g.out, FloorDivInt(g.in - 1 - shift, g.stride) + 1)};
}

// The outputs [lo, hi) along `g` all of whose taps read inside the input.
std::pair<int64_t, int64_t> InteriorColumns(const WindowDim& g) {
  int64_t lo_all = 0, hi_all = g.out;
  for (int64_t kv = 0; kv < g.kernel; ++kv) {
    const auto [lo, hi] = TapColumns(g, kv);
    lo_all = std::max(lo_all, lo);
    hi_all = std::min(hi_all, hi);
  }
  return {lo_all, hi_all};
}

// x[n, c, ..., i] with g's padding along the last dim as zero columns: a kernel-local buffer
// of width pad_begin + in + pad_end, filled row by row (the lowering fuses the fill into the
// consumer's loop over channels, so one channel's copy lives at a time, in L1). Each row's
// fill also prefetches the next channel's row into L2: the taps leave the memory idle while
// the copy alone cannot hide its misses (256 channels of 6 x 160 streamed from L3: 0.91 ->
// 0.89 ms; the same at stride 2 down the rows, 6 -> 3: 0.61 -> 0.57).
LTensor PadColumns(LowerContext& ctx, const LTensor& x, const WindowDim& g) {
  const DType t = x.dtype;
  const size_t rank = x.shape.size();
  std::vector<Expr> shape = x.shape;
  shape.back() = I64(g.pad_begin + g.in + g.pad_end);
  return ctx.MaterializeFill(t, shape, "conv_dw_pad", [&](const loop::Buffer& buf) {
    std::vector<Expr> row;  // [n, c, ...], the index of one row
    std::vector<loop::Var> vars;
    for (size_t d = 0; d + 1 < rank; ++d) {
      vars.push_back(ctx.NewVar("i"));
      row.push_back(vars.back());
    }
    auto columns = [&](int64_t from, int64_t count, const std::function<Expr(const Expr&)>& value) {
      loop::Var col = ctx.NewVar("j");
      std::vector<Expr> idx = row;
      idx.push_back(col);
      return loop::For(col, I64(from), I64(count), loop::ForKind::kSerial,
                       loop::Store(buf, idx, value(col)));
    };
    const auto zero = [&](const Expr&) { return lower::Const(0, t); };
    std::vector<Stmt> fill;
    if (g.pad_begin > 0) fill.push_back(columns(0, g.pad_begin, zero));
    fill.push_back(columns(g.pad_begin, g.in, [&](const Expr& col) {
      std::vector<Expr> idx = row;
      idx.push_back(loop::Sub(col, I64(g.pad_begin)));
      return x.at(idx);
    }));
    if (g.pad_end > 0) fill.push_back(columns(g.pad_begin + g.in, g.pad_end, zero));
    const int64_t line = 64 / static_cast<int64_t>(DTypeSize(t));  // elements per cache line
    loop::Var l = ctx.NewVar("l");
    std::vector<Expr> next = row;
    next[1] = loop::Min(loop::Add(row[1], I64(1)), loop::Sub(x.shape[1], I64(1)));
    next.push_back(loop::Mul(l, I64(line)));
    fill.push_back(loop::For(l, I64(0), I64((g.in + line - 1) / line), loop::ForKind::kSerial,
                             loop::Prefetch(x.at(next))));
    Stmt nest = loop::Seq(std::move(fill));
    for (size_t d = vars.size(); d-- > 0;)
      nest = loop::For(vars[d], I64(0), shape[d], loop::ForKind::kSerial, nest);
    return nest;
  });
}

}  // namespace

std::optional<std::vector<LTensor>> LowerDepthwiseConv(LowerContext& ctx,
                                                       const std::vector<LTensor>& in,
                                                       int64_t group,
                                                       const std::vector<WindowDim>& in_dims,
                                                       const std::vector<Expr>& out_shape) {
  const LTensor& w = in[1];
  const DType t = in[0].dtype;
  if (!PlainDepthwise(ctx, in, group, in_dims)) return std::nullopt;
  // Strided rows of at least kMinStridedRow outputs, stride-1 rows of at least kMinRow. A
  // strided conv's GEMM form copies its input into stride phases, which costs more than the
  // scalar tails of short rows here (MobileNet-like, 1 thread, us: 64 channels 112 -> 56 595 ->
  // 205, 96 channels 56 -> 28 163 -> 128, 240 channels 28 -> 14 89 -> 89, 672 channels 14 -> 7
  // 95 -> 90); so does LowerDepthwisePlanes' per-channel copy (96 channels 56 -> 28: 64 here,
  // 82 there). Short stride-1 rows go to LowerDepthwisePlanes, which vectorizes across the rows
  // of a padded copy of each channel (240 channels at 28 x 28: 95 there, 196 here; 480 at
  // 14 x 14: 53 there, 145 here) and loses where rows are long (72 channels at 56 x 56: 135
  // there, 115 here).
  constexpr int64_t kMinRow = 48;
  // Strided rows shorter than 16 (an AVX-512 vector) go to LowerDepthwisePlanes too, which
  // computes them at stride 1 and keeps every stride-th output: four times the products for a
  // stride of 2, in whole vectors across a plane that sits in L1, where row by row took three
  // partial vectors of strided loads per tap (672 channels 14 -> 7: 99 -> 61 us; 240 channels
  // 28 -> 14: 83 -> 77).
  constexpr int64_t kMinStridedRow = 16;
  const size_t r = in_dims.size(), last = r - 1;
  if (in_dims[last].stride < 2 && in_dims[last].out < kMinRow) return std::nullopt;
  if (in_dims[last].stride > 1 && in_dims[last].out < kMinStridedRow) return std::nullopt;
  // Rows whose taps reach the padding in more than kMaxInPlaceBorder columns read a copy of
  // each channel with that padding as zero columns (see PadColumns), so every column of a row
  // is a sum in registers. Read in place, the border columns accumulate tap by tap in memory: a
  // chain of store-to-load forwards per column, as long as the rest of a 5-wide row (256
  // channels of 6 x 160, 5 x 5 taps, 1 thread: 1.30 -> 0.89 ms). With one border column each
  // side (3 x 3) the copy costs more than it saves (64 channels of 24 x 160: 0.35 -> 0.48 ms),
  // and so it does for strided rows (512 channels 3 x 160 -> 3 x 80, 5 x 5: 0.49 -> 0.54).
  constexpr int64_t kMaxInPlaceBorder = 2;
  LTensor x = in[0];
  std::vector<WindowDim> dims = in_dims;
  {
    const auto [lo_all, hi_all] = InteriorColumns(dims[last]);
    const int64_t border = lo_all + dims[last].out - hi_all;
    if (dims[last].stride == 1 && border > kMaxInPlaceBorder) {
      x = PadColumns(ctx, x, dims[last]);
      dims[last].in += dims[last].pad_begin + dims[last].pad_end;
      dims[last].pad_begin = dims[last].pad_end = 0;
    }
  }
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];

  // out[n, c, o_1, ..., o_r]. Where every tap of an output is inside x (rows whose outer taps
  // all are, and along the last dim the columns [lo_all, hi_all) every tap's column is in),
  // one loop sums the taps in registers and stores once. Elsewhere the taps accumulate one by
  // one into the row (which stays in L1), a tap that reads padding (zero) skipped: along the
  // outer dims by a check per row, along the last dim by each tap's own constant range
  // [lo_k, hi_k) of outputs whose input column is inside x. Every loop walks x with a
  // constant stride (every other element at stride 2), which VectorizeLoops turns into whole
  // vectors.
  const WindowDim& lw = dims[last];
  std::vector<int64_t> lo(lw.kernel), hi(lw.kernel);
  for (int64_t kv = 0; kv < lw.kernel; ++kv) std::tie(lo[kv], hi[kv]) = TapColumns(lw, kv);
  const auto [lo_all, hi_all] = InteriorColumns(lw);
  LTensor out = ctx.MaterializeFill(t, out_shape, "conv_dw", [&](const loop::Buffer& buf) {
    loop::Var n = ctx.NewVar("n"), c = ctx.NewVar("c");
    std::vector<loop::Var> o(r);
    for (size_t d = 0; d < r; ++d) o[d] = ctx.NewVar("o");
    auto out_index = [&](const Expr& col) {
      std::vector<Expr> idx = {n, c};
      for (size_t d = 0; d < last; ++d) idx.push_back(o[d]);
      idx.push_back(col);
      return idx;
    };
    auto input_at = [&](size_t d, const Expr& od, const Expr& kd) {
      const WindowDim& g = dims[d];
      return loop::Add(loop::Mul(od, I64(g.stride)),
                       loop::Sub(loop::Mul(kd, I64(g.dilation)), I64(g.pad_begin)));
    };
    const Expr bias_value = bias ? bias->at({c}) : lower::Const(0, t);
    // w * x for outer taps `k` and last-dim tap kv at output column `col`.
    auto term = [&](const std::vector<Expr>& k, int64_t kv, const Expr& col) {
      std::vector<Expr> xi = {n, c}, wi = {c, I64(0)};
      for (size_t d = 0; d < last; ++d) {
        xi.push_back(input_at(d, o[d], k[d]));
        wi.push_back(k[d]);
      }
      xi.push_back(loop::Add(loop::Mul(col, I64(lw.stride)), I64(kv * lw.dilation - lw.pad_begin)));
      wi.push_back(I64(kv));
      return loop::Mul(w.at(wi), x.at(xi));
    };
    auto fill = [&](int64_t from, int64_t to, const std::function<Expr(const Expr&)>& value) {
      loop::Var col = ctx.NewVar("o");
      return loop::For(col, I64(from), I64(to - from), loop::ForKind::kSerial,
                       loop::Store(buf, out_index(col), value(col)));
    };
    // Tap by tap over the columns [from, to) of the row, each tap within its range; the outer
    // taps of dim d are [kfrom[d], kfrom[d] + kcount[d]), each checked per row when `guarded`.
    auto tap_by_tap = [&](const std::vector<std::pair<int64_t, int64_t>>& spans, bool guarded,
                          const std::vector<int64_t>& kfrom, const std::vector<int64_t>& kcount) {
      std::vector<Expr> k;
      std::vector<loop::Var> kvars;
      for (size_t d = 0; d < last; ++d) {
        kvars.push_back(ctx.NewVar("k"));
        k.push_back(kvars.back());
      }
      std::vector<Stmt> taps;
      for (int64_t kv = 0; kv < lw.kernel; ++kv)
        for (auto [from, to] : spans) {
          const int64_t a = std::max(from, lo[kv]), b = std::min(to, hi[kv]);
          if (a < b)
            taps.push_back(fill(a, b, [&](const Expr& col) {
              std::vector<Expr> at = out_index(col);
              return loop::Add(loop::Load(buf, at), term(k, kv, col));
            }));
        }
      Stmt body = loop::Seq(std::move(taps));
      for (size_t d = last; d-- > 0;) {
        if (guarded) {
          Expr row_at = input_at(d, o[d], k[d]);
          Expr inside = loop::MakeBinary(
              loop::BinaryOp::kAnd, loop::MakeBinary(loop::BinaryOp::kGE, row_at, I64(0)),
              loop::MakeBinary(loop::BinaryOp::kLT, row_at, I64(dims[d].in)));
          body = loop::IfThenElse(inside, body);
        }
        body = loop::For(kvars[d], I64(kfrom[d]), I64(kcount[d]), loop::ForKind::kSerial, body);
      }
      return body;
    };
    auto init = [&](int64_t from, int64_t to) {
      return fill(from, to, [&](const Expr&) { return bias_value; });
    };
    std::vector<int64_t> all_from(last, 0), all_count(last);
    for (size_t d = 0; d < last; ++d) all_count[d] = dims[d].kernel;
    // A row whose outer taps [kfrom, kfrom + kcount) are all inside x (and the others all
    // outside): the interior columns in registers, every tap a term of one sum (a Reduce over
    // the outer taps would keep its accumulator in memory per column, and VectorizeLoops would
    // leave the loop scalar); the border columns tap by tap.
    auto whole_row = [&](const std::vector<int64_t>& kfrom, const std::vector<int64_t>& kcount) {
      Stmt interior = fill(lo_all, hi_all, [&](const Expr& col) {
        Expr sum = bias_value;
        for (const std::vector<Expr>& k : TapIndices(dims, last)) {
          bool used = true;
          for (size_t d = 0; d < last; ++d) {
            int64_t kd = 0;
            used =
                used && loop::IsConstInt(k[d], &kd) && kd >= kfrom[d] && kd < kfrom[d] + kcount[d];
          }
          if (!used) continue;
          for (int64_t kv = 0; kv < lw.kernel; ++kv) sum = loop::Add(sum, term(k, kv, col));
        }
        return sum;
      });
      std::vector<std::pair<int64_t, int64_t>> border = {{0, lo_all}, {hi_all, lw.out}};
      return loop::Seq({init(0, lo_all), init(hi_all, lw.out),
                        tap_by_tap(border, false, kfrom, kcount), interior});
    };
    Stmt nest;
    // 2-D with few rows that read padding (a 5 x 5 window over 6 rows: 4 of them): each such
    // row on its own, over the rows of taps it reads, in registers as the others; checked tap
    // by tap, the 6 x 160 rows of 256 channels took 1.26 ms where ONNX Runtime takes 1.07.
    constexpr int64_t kMaxBorderRows = 8;
    const WindowDim& g0 = dims[0];
    auto row_taps = [&](int64_t row) {  // [first, end) of the taps of `row` inside x
      int64_t first = 0, end = 0;
      for (int64_t ky = 0; ky < g0.kernel; ++ky) {
        const int64_t at = row * g0.stride + ky * g0.dilation - g0.pad_begin;
        if (at < 0) first = ky + 1;
        if (at < g0.in) end = ky + 1;
      }
      return std::pair<int64_t, int64_t>{first, std::max(first, end)};
    };
    int64_t full_from = g0.out, full_to = g0.out;  // the rows all of whose taps are inside
    for (int64_t row = 0; row < g0.out; ++row) {
      auto [first, end] = row_taps(row);
      if (first == 0 && end == g0.kernel) {
        if (full_from == g0.out) full_from = row;
        full_to = row + 1;
      }
    }
    const int64_t border_rows = g0.out - (full_to - std::min(full_from, full_to));
    if (lo_all < hi_all && r == 2 && border_rows <= kMaxBorderRows) {
      std::vector<Stmt> rows;
      const loop::Var row_var = o[0];
      for (int64_t row = 0; row < g0.out; ++row) {
        if (row >= full_from && row < full_to) {
          if (row == full_from) {
            o[0] = row_var;
            rows.push_back(loop::For(row_var, I64(full_from), I64(full_to - full_from),
                                     loop::ForKind::kSerial, whole_row(all_from, all_count)));
          }
          continue;
        }
        auto [first, end] = row_taps(row);
        o[0] = ctx.NewVar("o");  // a loop of one trip, so the row stays a variable for the index
        Stmt body = end > first ? whole_row({first}, {end - first}) : init(0, lw.out);
        rows.push_back(loop::For(o[0], I64(row), I64(1), loop::ForKind::kSerial, body));
      }
      o[0] = row_var;
      nest = loop::Seq(std::move(rows));
    } else {
      // A row some outer tap of which reads padding: tap by tap, checked.
      Stmt checked =
          loop::Seq({init(0, lw.out), tap_by_tap({{0, lw.out}}, true, all_from, all_count)});
      Stmt row = checked;
      if (lo_all < hi_all) {
        Stmt whole = whole_row(all_from, all_count);
        Expr all_inside;
        for (size_t d = 0; d < last; ++d) {
          const WindowDim& g = dims[d];
          Expr first = input_at(d, o[d], I64(0)), end = input_at(d, o[d], I64(g.kernel - 1));
          Expr in_d = loop::MakeBinary(loop::BinaryOp::kAnd,
                                       loop::MakeBinary(loop::BinaryOp::kGE, first, I64(0)),
                                       loop::MakeBinary(loop::BinaryOp::kLT, end, I64(g.in)));
          all_inside = all_inside ? loop::MakeBinary(loop::BinaryOp::kAnd, all_inside, in_d) : in_d;
        }
        row = all_inside ? loop::IfThenElse(all_inside, whole, checked) : whole;
      }
      nest = row;
      for (size_t d = last; d-- > 0;)
        nest = loop::For(o[d], I64(0), I64(dims[d].out), loop::ForKind::kSerial, nest);
    }
    nest = loop::For(c, I64(0), x.shape[1], loop::ForKind::kSerial, nest);
    return loop::For(n, I64(0), x.shape[0], loop::ForKind::kSerial, nest);
  });
  return std::vector<LTensor>{out};
}

std::optional<std::vector<LTensor>> LowerDepthwisePlanes(LowerContext& ctx,
                                                         const std::vector<LTensor>& in,
                                                         int64_t group,
                                                         const std::vector<WindowDim>& dims,
                                                         const std::vector<Expr>& out_shape) {
  const LTensor& x = in[0];
  const LTensor& w = in[1];
  const DType t = x.dtype;
  if (!PlainDepthwise(ctx, in, group, dims)) return std::nullopt;
  const std::vector<std::vector<Expr>> taps = TapIndices(dims, dims.size());
  // The conv at stride 1 over the span the strided outputs cover; output o_d is its
  // o_d * stride_d.
  std::vector<WindowDim> dense = dims;
  for (WindowDim& d : dense) {
    d.out = (d.out - 1) * d.stride + 1;
    d.stride = 1;
  }
  const PhaseSplit split = SplitPhases(ctx, x, dense, 0);
  // The products along the plane's padded rows: columns j = sum o_d * q_stride[d], the
  // Q_d - out_d past each row computed and dropped, so one loop runs whole vectors across rows
  // (a 14 x 14 output with a 3 x 3 kernel is 14 rows of 16 columns: 14 vectors of 16 per tap,
  // where row by row took 14 rows of 8 + 4 + 2 lanes).
  const int64_t columns = dense[0].out * split.q_stride[0];
  LTensor rows = ctx.Materialize(
      LTensor{t,
              {x.shape[0], x.shape[1], I64(columns)},
              [w, split, taps](const std::vector<Expr>& idx) {
                Expr sum;
                for (const std::vector<Expr>& k : taps) {
                  std::vector<Expr> wi = {idx[1], I64(0)};
                  wi.insert(wi.end(), k.begin(), k.end());
                  Expr term = loop::Mul(w.at(wi), split.ReadInChannel(idx[0], idx[1], k, idx[2]));
                  sum = sum ? loop::Add(sum, term) : term;
                }
                return sum;
              }},
      "conv_dw_rows");
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];
  return std::vector<LTensor>{
      LTensor{t, out_shape, [rows, split, bias, dims](const std::vector<Expr>& idx) {
                Expr j = I64(0);
                for (size_t d = 0; d < dims.size(); ++d)
                  j = loop::Add(j, loop::Mul(idx[2 + d], I64(dims[d].stride * split.q_stride[d])));
                Expr v = rows.at({idx[0], idx[1], j});
                return bias ? loop::Add(v, bias->at({idx[1]})) : v;
              }}};
}

}  // namespace kiln::ops
