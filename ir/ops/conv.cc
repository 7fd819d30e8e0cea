// Convolutions on NCHW tensors: conv and conv_transpose, with the semantics of ONNX Conv and
// ConvTranspose. The window geometry (per spatial dim: in, kernel, stride, dilation, pads, out)
// and the lowering helpers they share with the pools are in window.h, where the windowed ops'
// output sizes and padding rules are spelled out; conv's f32 fast path, a GEMM over the
// phase-split input, is in conv_gemm.h. conv_transpose's geometry differs from conv's; see its
// section.
//
// Float dtypes only (f32, f16, bf16, f64). The reference kernels accumulate in double; the
// lowerings accumulate in f64 too (a loop::Reduce per output element, like matmul's), so the
// generated kernels match the reference up to rounding order.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {

std::vector<int64_t> ConvKernel(TypeRelContext& ctx, const TensorTypeNode& x,
                                const TensorTypeNode& w, const char* layout, int first) {
  if (w.ndim() != x.ndim())
    ctx.Fail(StrCat("weight ", ShapeToString(w.shape), " must have the input's rank ", x.ndim(),
                    " (", layout, ")"));
  std::vector<int64_t> kernel;
  for (int i = first; i < first + x.ndim() - 2; ++i) {
    if (!w.shape[i].is_const())
      ctx.Fail(StrCat("kernel dims of the weight must be constants, got ", ShapeToString(w.shape)));
    kernel.push_back(w.shape[i].value());
  }
  const std::vector<int64_t>& ks = ctx.attrs().GetInts("kernel_shape");
  if (!ks.empty() && ks != kernel)
    ctx.Fail(StrCat("kernel_shape ", JoinInts(ks), " does not match the weight ",
                    ShapeToString(w.shape)));
  return kernel;
}

void CheckBias(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& m,
               const std::string& what) {
  if (ctx.num_args() != 3) return;
  const TensorTypeNode& b = ctx.tensor(2);
  if (b.dtype != x.dtype || b.ndim() != 1)
    ctx.Fail(StrCat("bias must be a 1-D ", DTypeName(x.dtype), " tensor [M], got ",
                    TypeToString(TensorType(b.shape, b.dtype))));
  ctx.AssertEqual(b.shape[0], m, StrCat("bias ", ShapeToString(b.shape), " must have ", what));
}

void CheckWeightDtype(TypeRelContext& ctx, const TensorTypeNode& x, const TensorTypeNode& w) {
  if (w.dtype != x.dtype)
    ctx.Fail(StrCat("weight dtype ", DTypeName(w.dtype), " differs from the input's ",
                    DTypeName(x.dtype)));
}

namespace {

using loop::Expr;

// ---- conv ----

Type ConvRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& w = ctx.tensor(1);
  RequireFloat(ctx, x, "input");
  CheckWeightDtype(ctx, x, w);
  CheckWindowRank(ctx, x);
  std::vector<int64_t> kernel = ConvKernel(ctx, x, w, "[M, C/group, *kernel]", 2);
  const int64_t group = ctx.attrs().GetInt("group");
  const Dim& m = w.shape[0];
  ctx.AssertEqual(w.shape[1] * Dim(group), x.shape[1],
                  StrCat("input channels ", ShapeToString(x.shape), " must be group (", group,
                         ") x the weight's dim 1 ", ShapeToString(w.shape)));
  if (m.is_const() && m.value() % group != 0)
    ctx.Fail(StrCat("output channels ", m.value(), " are not divisible by group ", group));
  ctx.AssertEqual(Mod(m, Dim(group)), Dim(0), StrCat("output channels modulo group ", group));
  CheckBias(ctx, x, m, StrCat("the weight's M ", ShapeToString(w.shape)));
  return TensorType(WindowOutShapeOf(ctx, x, m, kernel), x.dtype);
}

template <typename T>
void ConvKernelRef(const std::vector<Tensor>& in, const Attrs& attrs, Tensor& out) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  std::string error;
  const std::vector<WindowDim> d =
      PadTo3(ComputeWindow(SpatialShape(x.shape()), SpatialShape(w.shape()), attrs, &error));
  const int64_t n = x.shape()[0], c = x.shape()[1], m = w.shape()[0], cg = w.shape()[1];
  const int64_t mg = m / attrs.GetInt("group");
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = in.size() == 3 ? in[2].data<T>() : nullptr;
  T* yp = out.data<T>();
  const int64_t in_plane = d[0].in * d[1].in * d[2].in;
  const int64_t k_plane = d[0].kernel * d[1].kernel * d[2].kernel;
  int64_t o = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t mo = 0; mo < m; ++mo) {
      const int64_t c0 = (mo / mg) * cg;  // the group's first input channel
      for (int64_t o0 = 0; o0 < d[0].out; ++o0) {
        for (int64_t o1 = 0; o1 < d[1].out; ++o1) {
          for (int64_t o2 = 0; o2 < d[2].out; ++o2) {
            double acc = bp ? ToDouble(bp[mo]) : 0.0;
            for (int64_t ci = 0; ci < cg; ++ci) {
              const T* xc = xp + (b * c + c0 + ci) * in_plane;
              const T* wc = wp + (mo * cg + ci) * k_plane;
              for (int64_t k0 = 0; k0 < d[0].kernel; ++k0) {
                const int64_t i0 = o0 * d[0].stride - d[0].pad_begin + k0 * d[0].dilation;
                if (i0 < 0 || i0 >= d[0].in) continue;
                for (int64_t k1 = 0; k1 < d[1].kernel; ++k1) {
                  const int64_t i1 = o1 * d[1].stride - d[1].pad_begin + k1 * d[1].dilation;
                  if (i1 < 0 || i1 >= d[1].in) continue;
                  for (int64_t k2 = 0; k2 < d[2].kernel; ++k2) {
                    const int64_t i2 = o2 * d[2].stride - d[2].pad_begin + k2 * d[2].dilation;
                    if (i2 < 0 || i2 >= d[2].in) continue;
                    acc += ToDouble(xc[(i0 * d[1].in + i1) * d[2].in + i2]) *
                           ToDouble(wc[(k0 * d[1].kernel + k1) * d[2].kernel + k2]);
                  }
                }
              }
            }
            yp[o++] = FromDouble<T>(acc);
          }
        }
      }
    }
  }
}

std::vector<LTensor> LowerConv(LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], w = in[1];
  const bool has_bias = in.size() == 3;
  const LTensor b = has_bias ? in[2] : LTensor{};
  std::vector<int64_t> kernel;
  for (int i = 2; i < w.ndim(); ++i) {
    int64_t v = 0;
    KILN_CHECK(loop::IsConstInt(w.shape[i], &v), "conv with a symbolic kernel extent");
    kernel.push_back(v);
  }
  std::vector<int> spatial_axes;
  for (int i = 2; i < x.ndim(); ++i) spatial_axes.push_back(i);
  if (HasSymbolicSpatial(x, spatial_axes))
    return LowerConvSymbolic(ctx, in, attrs, out_types, kernel);
  const std::vector<WindowDim> dims = LoweredWindow(x, kernel, attrs);
  const int64_t group = attrs.GetInt("group");
  // f32: depthwise read in place, else as a GEMM that TileLoops blocks and packs
  // (ir/ops/conv_gemm.h).
  const std::vector<Expr> out_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  if (std::optional<std::vector<LTensor>> dw =
          ops::LowerDepthwiseConv(ctx, in, group, dims, out_shape))
    return *dw;
  if (std::optional<std::vector<LTensor>> dw =
          ops::LowerDepthwisePlanes(ctx, in, group, dims, out_shape))
    return *dw;
  if (std::optional<std::vector<LTensor>> gemm =
          ops::LowerConvAsGemm(ctx, in, group, dims, out_shape))
    return *gemm;
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, w, b, has_bias, dims, group, t, acc](const std::vector<Expr>& idx) {
    const Expr& m = idx[1];
    const Expr cg = w.shape[1];
    loop::Var c = ctx.NewVar("c");
    Expr xc = GroupInputChannel(m, c, w, group);
    WindowTaps taps = Taps(ctx, dims, idx);
    std::vector<Expr> xi = {idx[0], xc};
    std::vector<Expr> wi = {m, c};
    for (size_t i = 0; i < dims.size(); ++i) {
      xi.push_back(taps.index[i]);
      wi.push_back(taps.axes[i].var);
    }
    Expr prod = loop::Mul(loop::Cast(acc, x.at(xi)), loop::Cast(acc, w.at(wi)));
    if (taps.inside) prod = loop::Select(taps.inside, prod, lower::Const(0, acc));
    std::vector<loop::IterVar> axes = {{c, cg}};
    axes.insert(axes.end(), taps.axes.begin(), taps.axes.end());
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, prod, axes);
    if (has_bias) sum = loop::Add(sum, loop::Cast(acc, b.at({m})));
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// ---- conv_transpose ----
//
// ONNX ConvTranspose, conv's gradient with respect to its input: x[N, C, *spatial],
// w[C, M/group, *kernel], optional bias[M]. Per spatial dim, input position i scatters into the
// "full" output positions i * stride + k * dilation (k a kernel tap), a range of
//   full = stride * (in - 1) + output_padding + ek
// positions, which the output crops by pad_begin at the start and pad_end at the end:
//   out = full - pad_begin - pad_end.
// The pads are the attribute's (NOTSET) or 0 (VALID), unless output_shape is given or auto_pad
// is SAME_UPPER/SAME_LOWER (then out = in * stride): then they follow from out, as ONNX says:
// total = full - out, split with the extra one at the end for SAME_UPPER, at the start
// otherwise. total may be negative (an output_shape past `full`): the halves round down, as
// ONNX's reference (Python) does, and a negative pad adds positions that get only the bias.
//
// The reference kernel scatters; the lowering gathers: output o of a dim is full position
// q = o + pad_begin, and tap k reads input (q - k * dilation) / stride when that divides
// exactly and lies in [0, in). Both accumulate in double.

// [N, M, *out] for conv_transpose over x = [N, C, *spatial]. A symbolic spatial size gives
// an output size that is an expression of it: in * stride + (output_padding + ek - stride -
// pad_begin - pad_end) without auto_pad (the full size less the pads), in * stride with SAME,
// and output_shape's value where it is given. The attributes are checked as for constant
// sizes, with a stand-in for each symbolic one; specialization binds the rest, where the
// constant path checks that the size is positive.
Shape TransposeOutShape(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& m,
                        const std::vector<int64_t>& kernel) {
  const size_t n = static_cast<size_t>(x.ndim() - 2);
  constexpr int64_t kStandIn = int64_t{1} << 20;
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < n; ++i) {
    const Dim& d = x.shape[2 + i];
    spatial.push_back(d.is_const() ? d.value() : kStandIn);
  }
  std::string error;
  std::vector<WindowDim> dims = ComputeTransposeWindow(spatial, kernel, ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  const bool given = !ctx.attrs().GetInts("output_shape").empty();
  Shape out = {x.shape[0], m};
  for (size_t i = 0; i < n; ++i) {
    const Dim& in = x.shape[2 + i];
    const WindowDim& d = dims[i];
    // out = stride * in + c for every form but output_shape's, c found from the stand-in.
    out.push_back(in.is_const() || given ? Dim(d.out)
                                         : in * Dim(d.stride) + Dim(d.out - d.stride * kStandIn));
  }
  return out;
}

Type ConvTransposeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& w = ctx.tensor(1);
  RequireFloat(ctx, x, "input");
  CheckWeightDtype(ctx, x, w);
  CheckWindowRank(ctx, x);
  std::vector<int64_t> kernel = ConvKernel(ctx, x, w, "[C, M/group, *kernel]", 2);
  const int64_t group = ctx.attrs().GetInt("group");
  ctx.AssertEqual(
      w.shape[0], x.shape[1],
      StrCat("input channels ", ShapeToString(x.shape), " must equal the weight's dim 0 ",
             ShapeToString(w.shape), " ([C, M/group, *kernel])"));
  for (const Dim& c : {x.shape[1], w.shape[0]}) {
    if (c.is_const() && c.value() % group != 0)
      ctx.Fail(StrCat("input channels ", c.value(), " are not divisible by group ", group));
    ctx.AssertEqual(Mod(c, Dim(group)), Dim(0), StrCat("input channels modulo group ", group));
  }
  const Dim m = w.shape[1] * Dim(group);
  CheckBias(ctx, x, m,
            StrCat("the output channels M = group (", group, ") x the weight's dim 1 ",
                   ShapeToString(w.shape)));
  return TensorType(TransposeOutShape(ctx, x, m, kernel), x.dtype);
}

template <typename T>
void ConvTransposeKernelRef(const std::vector<Tensor>& in, const Attrs& attrs, Tensor& out) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  std::string error;
  const std::vector<WindowDim> d = PadTo3(
      ComputeTransposeWindow(SpatialShape(x.shape()), SpatialShape(w.shape()), attrs, &error));
  const int64_t group = attrs.GetInt("group");
  const int64_t n = x.shape()[0], c = x.shape()[1], mg = w.shape()[1];
  const int64_t cg = c / group, m = mg * group;
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = in.size() == 3 ? in[2].data<T>() : nullptr;
  const int64_t in_plane = d[0].in * d[1].in * d[2].in;
  const int64_t k_plane = d[0].kernel * d[1].kernel * d[2].kernel;
  const int64_t out_plane = d[0].out * d[1].out * d[2].out;
  std::vector<double> acc(n * m * out_plane, 0.0);
  // Output position of input i, tap k in dim j, or -1 when it is cropped away.
  auto pos = [&d](int j, int64_t i, int64_t k) {
    const int64_t p = i * d[j].stride + k * d[j].dilation - d[j].pad_begin;
    return p >= 0 && p < d[j].out ? p : -1;
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ci = 0; ci < c; ++ci) {
      const int64_t g = ci / cg;
      const T* xc = xp + (b * c + ci) * in_plane;
      for (int64_t mj = 0; mj < mg; ++mj) {
        const T* wc = wp + (ci * mg + mj) * k_plane;
        double* yc = acc.data() + (b * m + g * mg + mj) * out_plane;
        for (int64_t i0 = 0; i0 < d[0].in; ++i0) {
          for (int64_t i1 = 0; i1 < d[1].in; ++i1) {
            for (int64_t i2 = 0; i2 < d[2].in; ++i2) {
              const double xv = ToDouble(xc[(i0 * d[1].in + i1) * d[2].in + i2]);
              for (int64_t k0 = 0; k0 < d[0].kernel; ++k0) {
                const int64_t p0 = pos(0, i0, k0);
                if (p0 < 0) continue;
                for (int64_t k1 = 0; k1 < d[1].kernel; ++k1) {
                  const int64_t p1 = pos(1, i1, k1);
                  if (p1 < 0) continue;
                  for (int64_t k2 = 0; k2 < d[2].kernel; ++k2) {
                    const int64_t p2 = pos(2, i2, k2);
                    if (p2 < 0) continue;
                    yc[(p0 * d[1].out + p1) * d[2].out + p2] +=
                        xv * ToDouble(wc[(k0 * d[1].kernel + k1) * d[2].kernel + k2]);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  T* yp = out.data<T>();
  for (int64_t o = 0; o < n * m * out_plane; ++o)
    yp[o] = FromDouble<T>(acc[o] + (bp ? ToDouble(bp[(o / out_plane) % m]) : 0.0));
}

std::vector<LTensor> LowerConvTranspose(LowerContext& ctx, const std::vector<LTensor>& in,
                                        const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], w = in[1];
  const bool has_bias = in.size() == 3;
  const LTensor b = has_bias ? in[2] : LTensor{};
  // Over a symbolic image size (the generic tier's kernels) the input extents are expressions;
  // the pads are the same for every size (SAME's total is output_padding + the effective kernel
  // - stride) but for a given output_shape, whose pads follow from the size: there the leading
  // pad is an expression of the extent, as ComputeTransposeWindow computes it.
  std::vector<int64_t> spatial, kernel;
  std::vector<Expr> extent;
  bool symbolic = false;
  for (int i = 2; i < x.ndim(); ++i) {
    int64_t s = 0, k = 0;
    KILN_CHECK(loop::IsConstInt(w.shape[i], &k), "conv_transpose with a symbolic kernel extent");
    if (!loop::IsConstInt(x.shape[i], &s)) {
      symbolic = true;
      s = int64_t{1} << 20;  // a stand-in: any size gives the same pads
    }
    spatial.push_back(s);
    kernel.push_back(k);
    extent.push_back(x.shape[i]);
  }
  std::string error;
  const std::vector<WindowDim> dims = ComputeTransposeWindow(spatial, kernel, attrs, &error);
  KILN_CHECK(error.empty(), error);
  const std::vector<int64_t>& output_shape = attrs.GetInts("output_shape");
  const std::vector<int64_t> output_padding =
      PerDim(attrs, "output_padding", dims.size(), 0, &error);
  std::vector<Expr> pad_begin;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDim& d = dims[i];
    if (!symbolic || output_shape.empty()) {
      pad_begin.push_back(I64(d.pad_begin));
      continue;
    }
    // total = stride * (in - 1) + output_padding + effective kernel - out; the begin pad is
    // floor(total / 2) for SAME_UPPER, else the rest.
    const int64_t ek = (d.kernel - 1) * d.dilation + 1;
    const Expr total = loop::Add(loop::Mul(I64(d.stride), loop::Sub(extent[i], I64(1))),
                                 I64(output_padding[i] + ek - output_shape[i]));
    const Expr half = loop::FloorDiv(total, I64(2));
    pad_begin.push_back(attrs.GetString("auto_pad") == "SAME_UPPER" ? half
                                                                    : loop::Sub(total, half));
  }
  const int64_t group = attrs.GetInt("group");
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, w, b, has_bias, dims, extent, pad_begin, group, t,
             acc](const std::vector<Expr>& idx) {
    const Expr& m = idx[1];
    const Expr mg = w.shape[1];
    Expr cg = w.shape[0];
    loop::Var c = ctx.NewVar("c");
    // Output channel m is channel m % mg of group g = m / mg, which reads input channels
    // [g * cg, (g + 1) * cg).
    Expr xc = c, wm = m;
    if (group > 1) {
      cg = loop::FloorDiv(cg, I64(group));
      xc = loop::Add(loop::Mul(loop::FloorDiv(m, mg), cg), c);
      wm = loop::FloorMod(m, mg);
    }
    std::vector<Expr> xi = {idx[0], xc};
    std::vector<Expr> wi = {xc, wm};
    std::vector<loop::IterVar> axes = {{c, cg}};
    Expr valid;
    for (size_t i = 0; i < dims.size(); ++i) {
      const WindowDim& d = dims[i];
      loop::Var k = ctx.NewVar(StrCat("k", i));
      axes.push_back({k, I64(d.kernel)});
      wi.push_back(k);
      Expr q = loop::Sub(loop::Add(idx[2 + i], pad_begin[i]), loop::Mul(k, I64(d.dilation)));
      Expr src = q;
      if (d.stride > 1) {
        valid = And(
            valid, loop::MakeBinary(loop::BinaryOp::kEQ, loop::FloorMod(q, I64(d.stride)), I64(0)));
        src = loop::FloorDiv(q, I64(d.stride));
      }
      valid = And(valid, InRange(src, I64(0), extent[i]));
      xi.push_back(loop::Max(I64(0), loop::Min(src, loop::Sub(extent[i], I64(1)))));
    }
    Expr prod = loop::Mul(loop::Cast(acc, x.at(xi)), loop::Cast(acc, w.at(wi)));
    prod = loop::Select(valid, prod, lower::Const(0, acc));
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, prod, axes);
    if (has_bias) sum = loop::Add(sum, loop::Cast(acc, b.at({m})));
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace

std::vector<WindowDim> ComputeTransposeWindow(const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& kernel,
                                              const Attrs& attrs, std::string* error) {
  const size_t n = in.size();
  std::vector<int64_t> strides = PerDim(attrs, "strides", n, 1, error);
  std::vector<int64_t> dilations = PerDim(attrs, "dilations", n, 1, error);
  std::vector<int64_t> output_padding = PerDim(attrs, "output_padding", n, 0, error);
  std::vector<int64_t> pads = Pads(attrs, n, error);
  const std::vector<int64_t>& output_shape = attrs.GetInts("output_shape");
  const bool has_output_shape = !output_shape.empty();
  if (has_output_shape && output_shape.size() != n && error->empty())
    *error = StrCat("output_shape ", JoinInts(output_shape), " must have ", n,
                    " values (one per spatial dim)");
  const std::string& auto_pad = attrs.GetString("auto_pad");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  CheckPadsAgainstAutoPad(pads, auto_pad, error);
  std::vector<WindowDim> dims = BaseWindowDims(in, kernel, strides, dilations);
  for (size_t i = 0; i < n; ++i) {
    WindowDim& d = dims[i];
    if (d.stride < 1 || d.dilation < 1 || d.kernel < 1 || d.in < 1) {
      if (error->empty())
        *error = StrCat("spatial dim ", i, ": input ", d.in, ", kernel ", d.kernel, ", stride ",
                        d.stride, " and dilation ", d.dilation, " must be positive");
      d.in = std::max<int64_t>(d.in, 1);
      d.stride = std::max<int64_t>(d.stride, 1);
      d.dilation = std::max<int64_t>(d.dilation, 1);
      d.kernel = std::max<int64_t>(d.kernel, 1);
    }
    const int64_t ek = (d.kernel - 1) * d.dilation + 1;
    const int64_t full = d.stride * (d.in - 1) + output_padding[i] + ek;
    if ((has_output_shape && output_shape.size() == n) || same) {
      d.out = has_output_shape ? output_shape[i] : d.in * d.stride;
      const int64_t total = full - d.out;
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
      d.pad_begin = auto_pad == "SAME_UPPER" ? half : total - half;
      d.pad_end = total - d.pad_begin;
    } else {
      if (auto_pad == "NOTSET") {
        d.pad_begin = pads[i];
        d.pad_end = pads[n + i];
      }
      d.out = full - d.pad_begin - d.pad_end;
    }
    if (d.out < 1) {
      if (error->empty())
        *error =
            StrCat("spatial dim ", i, ": the output size ", d.out, " is not positive (full size ",
                   full, ", pads ", d.pad_begin, ", ", d.pad_end, ")");
      d.out = 1;
    }
  }
  return dims;
}

void ConvReference(const std::vector<Tensor>& in, const Attrs& attrs, Tensor& out) {
  DispatchFloat(in[0].dtype(), [&]<typename T>() { ConvKernelRef<T>(in, attrs, out); });
}

}  // namespace kiln::ops

namespace kiln {

void RegisterConvOps(OpRegistry& r) {
  std::vector<AttrSpec> conv_attrs = ops::WindowAttrs();
  conv_attrs.push_back(
      {"group", AttrKind::kInt, AttrValue(int64_t{1}), [](const AttrValue& v) -> std::string {
         int64_t g = std::get<int64_t>(v);
         return g >= 1 ? "" : StrCat("must be at least 1, got ", g);
       }});
  conv_attrs.push_back({"kernel_shape", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                        ops::CheckNonNegativeInts()});
  r.Register(OpDef{
      .name = "conv",
      .doc = "ONNX Conv: x[N, C, *spatial] (1-3 spatial dims), w[M, C/group, *kernel], "
             "optional bias[M]",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = conv_attrs,
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::ConvRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { ops::ConvReference(in, attrs, out[0]); },
      .lower = ops::LowerConv,
  });

  std::vector<AttrSpec> transpose_attrs = conv_attrs;
  transpose_attrs.push_back({"output_padding", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                             ops::CheckNonNegativeInts()});
  transpose_attrs.push_back({"output_shape", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                             ops::CheckNonNegativeInts()});
  r.Register(OpDef{
      .name = "conv_transpose",
      .doc = "ONNX ConvTranspose: x[N, C, *spatial] (1-3 spatial dims), w[C, M/group, *kernel], "
             "optional bias[M]; output_shape (spatial dims) overrides pads",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = transpose_attrs,
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::ConvTransposeRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            ops::DispatchFloat(in[0].dtype(), [&]<typename T>() {
              ops::ConvTransposeKernelRef<T>(in, attrs, out[0]);
            });
          },
      .lower = ops::LowerConvTranspose,
  });
}

}  // namespace kiln
