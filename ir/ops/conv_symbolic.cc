// Convolutions over symbolic spatial extents: the lowerings of conv (NCHW) and conv_nhwc when the
// input's height or width is a symbol, as in a model's shape-generic kernels (the engine's
// generic tier) for images of any size. The concrete-shape lowerings (conv.cc's GEMM and
// depthwise forms, conv_layout.cc) plan phase splits and boxes from the sizes; here the input is
// zero-padded into a copy whose extents are expressions of the symbols, and each output is a
// plain reduction over (channels, taps) of that copy, which TileLoops blocks as it blocks a
// concrete conv_nhwc (conv_layout.cc takes SymbolicWindow and PaddedForWindow for its own
// symbolic case). Only auto_pad NOTSET and VALID: SAME's pads follow from the extent, and
// those convs keep needing constant spatial dims.
#include <string>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {

using loop::Expr;

LTensor PaddedForWindow(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                        const std::vector<WindowDim>& dims) {
  bool padded = false;
  for (const WindowDim& d : dims) padded = padded || d.pad_begin > 0 || d.pad_end > 0;
  if (!padded) return x;
  std::vector<Expr> shape = x.shape;
  for (size_t i = 0; i < dims.size(); ++i)
    shape[axes[i]] = loop::Add(x.shape[axes[i]], I64(dims[i].pad_begin + dims[i].pad_end));
  auto at = [x, axes, dims](const std::vector<Expr>& idx) {
    std::vector<Expr> xi = idx;
    Expr inside;
    for (size_t i = 0; i < dims.size(); ++i) {
      const int a = axes[i];
      Expr pos = loop::Sub(idx[a], I64(dims[i].pad_begin));
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
  const std::string& auto_pad = attrs.GetString("auto_pad");
  KILN_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID", "auto_pad ", auto_pad,
             " over a symbolic spatial extent (its pads depend on the extent)");
  // NOTSET and VALID pads, strides and dilations do not depend on the extent: any extent large
  // enough for the window gives them.
  std::string error;
  std::vector<WindowDim> dims =
      ComputeWindow(std::vector<int64_t>(kernel.size(), int64_t{1} << 30), kernel, attrs, &error);
  KILN_CHECK(error.empty(), error);
  for (WindowDim& d : dims) d.in = d.out = 0;  // symbolic: the shapes hold them
  return dims;
}

std::vector<LTensor> LowerConvSymbolic(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types,
                                       const std::vector<int64_t>& kernel) {
  const LTensor& x = in[0];
  const LTensor& w = in[1];
  const int r = x.ndim() - 2;
  const std::vector<WindowDim> dims = SymbolicWindow(kernel, attrs);
  std::vector<int> axes;
  for (int i = 0; i < r; ++i) axes.push_back(2 + i);
  const LTensor p = PaddedForWindow(ctx, x, axes, dims);
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
