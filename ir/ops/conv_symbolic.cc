// Convolutions over symbolic spatial extents: the lowerings of conv (NCHW) and conv_nhwc when the
// input's height or width is a symbol, as in a model's shape-generic kernels (the engine's
// generic tier) for images of any size. The concrete-shape lowerings (conv.cc's GEMM and
// depthwise forms, conv_layout.cc) plan phase splits and boxes from the sizes; here the input is
// zero-padded into a copy whose extents are expressions of the symbols, and each output is a
// plain reduction over (channels, taps) of that copy, which TileLoops blocks as it blocks a
// concrete conv_nhwc (conv_layout.cc takes SymbolicWindow and PaddedForWindow for its own
// symbolic case). SAME's pads are expressions of the extent (SymbolicPads), so any auto_pad
// works over any size.
#include <algorithm>
#include <string>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {

using loop::Expr;

namespace {

// `padded` (x padded with zeros along `axes`, its reads clamped into x) materialized as `name`.
// An axis of x of extent 0 has nothing to read, and an index clamped to 0 on it would still
// reach past x by the dims inside it: the result is all zeros then, x unread (decided at run
// time for a symbolic extent, once per kernel call).
LTensor MaterializePadded(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                          const LTensor& padded, const std::string& name) {
  const Expr fill = lower::Const(0, x.dtype);
  Expr empty;
  for (int a : axes) {
    int64_t v = -1;
    if (loop::IsConstInt(x.shape[a], &v)) {
      if (v == 0)
        return LTensor{x.dtype, padded.shape, [fill](const std::vector<Expr>&) { return fill; }};
    } else {
      empty = Or(empty, loop::MakeBinary(loop::BinaryOp::kEQ, x.shape[a], I64(0)));
    }
  }
  return empty ? ctx.MaterializeUnless(padded, name, empty, fill) : ctx.Materialize(padded, name);
}

}  // namespace

LTensor PaddedForWindow(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                        const std::vector<PadExprs>& pads) {
  auto zero = [](const Expr& e) {
    int64_t v = -1;
    return loop::IsConstInt(e, &v) && v == 0;
  };
  if (std::all_of(pads.begin(), pads.end(),
                  [&](const PadExprs& p) { return zero(p.begin) && zero(p.end); }))
    return x;
  std::vector<Expr> shape = x.shape;
  for (size_t i = 0; i < pads.size(); ++i)
    shape[axes[i]] = loop::Add(x.shape[axes[i]], loop::Add(pads[i].begin, pads[i].end));
  auto at = [x, axes, pads](const std::vector<Expr>& idx) {
    std::vector<Expr> xi = idx;
    Expr inside;
    for (size_t i = 0; i < pads.size(); ++i) {
      const int a = axes[i];
      Expr pos = loop::Sub(idx[a], pads[i].begin);
      inside = And(inside, InRange(pos, I64(0), x.shape[a]));
      xi[a] = loop::Max(I64(0), loop::Min(pos, loop::Sub(x.shape[a], I64(1))));
    }
    return loop::Select(inside, x.at(xi), lower::Const(0, x.dtype));
  };
  return MaterializePadded(ctx, x, axes, LTensor{x.dtype, shape, at}, "conv_padded");
}

Expr GroupInputChannel(const Expr& m, const Expr& c, const LTensor& w, int64_t group) {
  if (group == 1) return c;
  return loop::Add(loop::Mul(loop::FloorDiv(m, loop::FloorDiv(w.shape[0], I64(group))), w.shape[1]),
                   c);
}

bool HasSymbolicSpatial(const LTensor& x, const std::vector<int>& spatial_axes) {
  int64_t v = 0;
  for (int a : spatial_axes)
    if (!loop::IsConstInt(x.shape[a], &v)) return true;
  return false;
}

std::vector<WindowDim> SymbolicWindow(const std::vector<int64_t>& kernel, const Attrs& attrs) {
  // Strides, dilations and (but for SAME) pads do not depend on the extent: any extent large
  // enough for the window gives them.
  std::string error;
  std::vector<WindowDim> dims =
      ComputeWindow(std::vector<int64_t>(kernel.size(), int64_t{1} << 30), kernel, attrs, &error);
  KILN_CHECK(error.empty(), error);
  const std::string& auto_pad = attrs.GetString("auto_pad");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (WindowDim& d : dims) {
    d.in = d.out = 0;                       // symbolic: the shapes hold them
    if (same) d.pad_begin = d.pad_end = 0;  // SymbolicPads has them
  }
  return dims;
}

std::vector<PadExprs> SymbolicPads(const std::vector<WindowDim>& dims, const std::vector<Expr>& in,
                                   const Attrs& attrs) {
  const std::string& auto_pad = attrs.GetString("auto_pad");
  std::vector<PadExprs> pads;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDim& d = dims[i];
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
      pads.push_back({I64(d.pad_begin), I64(d.pad_end)});
      continue;
    }
    const int64_t ek = (d.kernel - 1) * d.dilation + 1;
    Expr out = loop::FloorDiv(loop::Add(in[i], I64(d.stride - 1)), I64(d.stride));
    Expr total = loop::Max(
        I64(0),
        loop::Sub(loop::Add(loop::Mul(loop::Sub(out, I64(1)), I64(d.stride)), I64(ek)), in[i]));
    Expr small = loop::FloorDiv(total, I64(2));
    Expr begin = auto_pad == "SAME_UPPER" ? small : loop::Sub(total, small);
    pads.push_back({begin, loop::Sub(total, begin)});
  }
  return pads;
}

namespace {

bool IsZero(const Expr& e) {
  int64_t v = -1;
  return loop::IsConstInt(e, &v) && v == 0;
}

// sum over `red` of x * w in `acc`, plus the bias of output channel m, as t.
Expr ConvSum(Expr xv, Expr wv, std::vector<loop::IterVar> red, const std::optional<LTensor>& bias,
             const Expr& m, DType t, DType acc) {
  if (acc != t) {
    xv = loop::Cast(acc, xv);
    wv = loop::Cast(acc, wv);
  }
  Expr sum = loop::Reduce(loop::ReduceKind::kSum, loop::Mul(xv, wv), std::move(red));
  if (bias) sum = loop::Add(sum, loop::Cast(acc, bias->at({m})));
  return loop::Cast(t, sum);
}

// The 2-D conv as a product over whole padded rows. The padded input is copied split by
// stride phase, xs[n, c, ph, pw, r, q] = padded[n, c, r * sh + ph, q * sw + pw], each phase a
// plane of Wq = ceil(Wp / sw) columns and one spare row; output (oh, ow) at tap (kh, kw) reads
// plane ((kh * dh) % sh, (kw * dw) % sw) at row oh + (kh * dh) // sh, column ow + (kw * dw) //
// sw. The product runs over Wq columns per output row (Wq - OW of them thrown away), so its
// rows and columns are one run of OH * Wq pixels in both the planes and a wide result:
// CollapseLoops makes them one pixel loop, and TileLoops blocks output channels over it as it
// blocks a 1x1 conv. Without this, the symbolic rows (10 to 80 pixels in a detection net's
// deep layers) ran in column tails, mostly scalar, and the blocks shared weights rather than
// input loads: the generic 3x3 convs took 4-20x their specialized time. A column past the last
// reads into the next row (or the spare one), which only thrown-away columns do.
LTensor WideConv2d(LowerContext& ctx, const LTensor& x, const LTensor& w,
                   const std::optional<LTensor>& bias, const std::vector<WindowDim>& dims,
                   const std::vector<PadExprs>& pads, const std::vector<int64_t>& kernel,
                   int64_t group, DType acc, const std::vector<Expr>& out_shape) {
  const DType t = x.dtype;
  const int64_t sh = dims[0].stride, sw = dims[1].stride;
  const Expr hp = loop::Add(x.shape[2], loop::Add(pads[0].begin, pads[0].end));
  const Expr wp = loop::Add(x.shape[3], loop::Add(pads[1].begin, pads[1].end));
  const Expr hq = loop::FloorDiv(loop::Add(hp, I64(sh - 1)), I64(sh));
  const Expr wq = loop::FloorDiv(loop::Add(wp, I64(sw - 1)), I64(sw));
  const std::vector<Expr> split_shape = {
      x.shape[0], x.shape[1], I64(sh), I64(sw), loop::Add(hq, I64(1)), wq};
  auto split_at = [x, pads, sh, sw](const std::vector<Expr>& idx) {
    const Expr row = loop::Sub(loop::Add(loop::Mul(idx[4], I64(sh)), idx[2]), pads[0].begin);
    const Expr col = loop::Sub(loop::Add(loop::Mul(idx[5], I64(sw)), idx[3]), pads[1].begin);
    const Expr inside = And(InRange(row, I64(0), x.shape[2]), InRange(col, I64(0), x.shape[3]));
    auto clamp = [](const Expr& e, const Expr& n) {
      return loop::Max(I64(0), loop::Min(e, loop::Sub(n, I64(1))));
    };
    return loop::Select(inside,
                        x.at({idx[0], idx[1], clamp(row, x.shape[2]), clamp(col, x.shape[3])}),
                        lower::Const(0, x.dtype));
  };
  const LTensor xs =
      MaterializePadded(ctx, x, {2, 3}, LTensor{t, split_shape, split_at}, "conv_phases");
  auto wide_at = [&ctx, xs, w, bias, dims, kernel, group, t, acc](const std::vector<Expr>& idx) {
    const Expr& m = idx[1];
    loop::Var c = ctx.NewVar("kc");
    std::vector<Expr> xi = {idx[0], GroupInputChannel(m, c, w, group), nullptr, nullptr, nullptr,
                            nullptr};
    std::vector<Expr> wi = {m, c};
    std::vector<loop::IterVar> red = {{c, w.shape[1]}};
    for (int i = 0; i < 2; ++i) {
      loop::Var k = ctx.NewVar("kt");
      const Expr at = loop::Mul(k, I64(dims[i].dilation));
      const int64_t s = dims[i].stride;
      xi[2 + i] = s == 1 ? I64(0) : loop::FloorMod(at, I64(s));
      xi[4 + i] = loop::Add(idx[2 + i], s == 1 ? at : loop::FloorDiv(at, I64(s)));
      wi.push_back(k);
      red.push_back({k, I64(kernel[i])});
    }
    return ConvSum(xs.at(xi), w.at(wi), std::move(red), bias, m, t, acc);
  };
  const LTensor wide = ctx.Materialize(
      LTensor{t, {out_shape[0], out_shape[1], out_shape[2], wq}, wide_at}, "conv_wide");
  return LTensor{t, out_shape, [wide](const std::vector<Expr>& idx) { return wide.at(idx); }};
}

}  // namespace

std::vector<LTensor> LowerConvSymbolic(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types,
                                       const std::vector<int64_t>& kernel) {
  const LTensor& x = in[0];
  const LTensor& w = in[1];
  const int r = x.ndim() - 2;
  const std::vector<WindowDim> dims = SymbolicWindow(kernel, attrs);
  std::vector<int> axes;
  std::vector<Expr> extents;
  for (int i = 0; i < r; ++i) {
    axes.push_back(2 + i);
    extents.push_back(x.shape[2 + i]);
  }
  const std::vector<PadExprs> pads = SymbolicPads(dims, extents, attrs);
  const int64_t group = attrs.GetInt("group");
  const DType t = x.dtype;
  // f32 sums in f32, as conv's GEMM form does; the other float dtypes in f64, as conv.
  const DType acc = t == DType::kFloat32 ? t : DType::kFloat64;
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];
  // A 1x1 stride-1 conv without pads is already one run of pixels per channel.
  const bool pointwise =
      r == 2 && kernel[0] == 1 && kernel[1] == 1 && dims[0].stride == 1 && dims[1].stride == 1 &&
      std::all_of(pads.begin(), pads.end(),
                  [](const PadExprs& p) { return IsZero(p.begin) && IsZero(p.end); });
  if (r == 2 && !pointwise)
    return {WideConv2d(ctx, x, w, bias, dims, pads, kernel, group, acc,
                       ctx.ShapeExpr(AsTensor(out_types[0])->shape))};
  const LTensor p = PaddedForWindow(ctx, x, axes, pads);
  auto at = [&ctx, p, w, bias, dims, kernel, group, t, acc](const std::vector<Expr>& idx) {
    const Expr& m = idx[1];
    const Expr cg = w.shape[1];
    loop::Var c = ctx.NewVar("kc");
    std::vector<Expr> xi = {idx[0], GroupInputChannel(m, c, w, group)}, wi = {m, c};
    std::vector<loop::IterVar> red = {{c, cg}};
    for (size_t i = 0; i < dims.size(); ++i) {
      loop::Var k = ctx.NewVar("kt");
      xi.push_back(loop::Add(loop::Mul(idx[2 + i], I64(dims[i].stride)),
                             loop::Mul(k, I64(dims[i].dilation))));
      wi.push_back(k);
      red.push_back({k, I64(kernel[i])});  // taps innermost: a tap row is a run of the input row
    }
    return ConvSum(p.at(xi), w.at(wi), std::move(red), bias, m, t, acc);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace kiln::ops
