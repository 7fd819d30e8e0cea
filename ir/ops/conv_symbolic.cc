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
  return ctx.Materialize(LTensor{x.dtype, shape, at}, "conv_padded");
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
  const LTensor p = PaddedForWindow(ctx, x, axes, SymbolicPads(dims, extents, attrs));
  const int64_t group = attrs.GetInt("group");
  const DType t = x.dtype;
  // f32 sums in f32, as conv's GEMM form does; the other float dtypes in f64, as conv.
  const DType acc = t == DType::kFloat32 ? t : DType::kFloat64;
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];
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
    Expr xv = p.at(xi), wv = w.at(wi);
    if (acc != t) {
      xv = loop::Cast(acc, xv);
      wv = loop::Cast(acc, wv);
    }
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, loop::Mul(xv, wv), std::move(red));
    if (bias) sum = loop::Add(sum, loop::Cast(acc, bias->at({m})));
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace kiln::ops
