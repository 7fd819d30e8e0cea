// Neural-network ops on NCHW tensors: conv, conv_transpose, max_pool, max_pool_with_indices,
// max_unpool, avg_pool, global_max_pool, global_avg_pool and pad. Semantics follow ONNX (Conv,
// ConvTranspose, MaxPool with its Indices output, MaxUnpool, AveragePool, Global*Pool, Pad).
// conv_transpose's and max_unpool's geometries differ from the others; see their sections.
//
// Windowed ops (conv and the pools) take x[N, C, *spatial] with 1 to 3 spatial dims. Their
// output spatial size is fixed by the input's spatial size, so the spatial dims must be
// constants; the batch (and channels) may be symbolic. Per spatial dim, with the effective
// kernel ek = (k - 1) * dilation + 1:
//   NOTSET:      out = floor((in + pad_begin + pad_end - ek) / stride) + 1   (ceil with ceil_mode,
//                dropping a last window that would start in the end padding, as PyTorch and
//                ONNX's reference do)
//   VALID:       pads 0, out = floor((in - ek) / stride) + 1
//   SAME_UPPER:  out = ceil(in / stride), total pad = max(0, (out - 1) * stride + ek - in),
//                split with the extra one at the end; SAME_LOWER puts it at the beginning.
// An input position that falls in the padding contributes nothing: a zero to conv's sum, no
// candidate to max_pool's max, and to avg_pool's divisor only with count_include_pad (which
// counts positions inside [-pad_begin, in + pad_end), so ceil_mode's overhang is not counted).
//
// Float dtypes only (f32, f16, bf16, f64) for the windowed ops and global pools, except that
// max_pool, max_pool_with_indices and max_unpool also take the integer dtypes (compared exactly,
// in their own type; max_unpool only moves elements). The reference
// kernels accumulate in double; the lowerings accumulate in f64 too (a loop::Reduce per output
// element, like matmul's), so the generated kernels match the reference up to rounding order.
// pad accepts every dtype.
//
// Lowering never loads out of bounds: every arm of a select is evaluated (vector code loads all
// lanes), so a padded position reads the input at its index clamped into range and the select
// then discards the value.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/loop/loop_visitor.h"
#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using loop::Expr;

// ---- window geometry, shared by the relations, kernels and lowerings ----

// One spatial dim of a windowed op, all sizes concrete (declared beside the phase split that
// conv's and the pools' lowerings share).
using ops::WindowDim;

std::string JoinInts(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += StrCat(i ? ", " : "", v[i]);
  return s + "]";
}

// `attr` as a list of `n` values, `def` each when empty; a wrong length is an error message.
std::vector<int64_t> PerDim(const Attrs& attrs, const char* attr, size_t n, int64_t def,
                            std::string* error) {
  std::vector<int64_t> v = attrs.GetInts(attr);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n && error->empty())
    *error = StrCat(attr, " ", JoinInts(v), " must have ", n, " values (one per spatial dim)");
  v.resize(n, def);
  return v;
}

// The `pads` attribute: the begin pads of the n spatial dims, then their end pads (all 0 when
// not given).
std::vector<int64_t> Pads(const Attrs& attrs, size_t n, std::string* error) {
  std::vector<int64_t> pads = attrs.GetInts("pads");
  if (pads.empty()) pads.assign(2 * n, 0);
  if (pads.size() != 2 * n && error->empty())
    *error = StrCat("pads ", JoinInts(pads), " must have ", 2 * n,
                    " values (the begin pads of every spatial dim, then the end pads)");
  pads.resize(2 * n, 0);
  return pads;
}

// The geometry of every spatial dim, from the input's spatial sizes and the kernel sizes.
// Attributes read: strides, pads, dilations (when the op has it), auto_pad, ceil_mode (when the
// op has it). Sets `*error` (and returns what it could) when the attributes do not fit.
std::vector<WindowDim> ComputeWindow(const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& kernel, const Attrs& attrs,
                                     std::string* error) {
  const size_t n = in.size();
  std::vector<int64_t> strides = PerDim(attrs, "strides", n, 1, error);
  std::vector<int64_t> dilations =
      attrs.Has("dilations") ? PerDim(attrs, "dilations", n, 1, error) : std::vector<int64_t>(n, 1);
  std::vector<int64_t> pads = Pads(attrs, n, error);
  const std::string& auto_pad = attrs.GetString("auto_pad");
  const bool ceil_mode = attrs.Has("ceil_mode") && attrs.GetBool("ceil_mode");
  if (auto_pad != "NOTSET" && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p; }) &&
      error->empty())
    *error = StrCat("explicit pads ", JoinInts(pads), " conflict with auto_pad ", auto_pad);
  std::vector<WindowDim> dims(n);
  for (size_t i = 0; i < n; ++i) {
    WindowDim& d = dims[i];
    d.in = in[i];
    d.kernel = kernel[i];
    d.stride = strides[i];
    d.dilation = dilations[i];
    if (d.stride < 1 || d.dilation < 1 || d.kernel < 1) {
      if (error->empty())
        *error = StrCat("spatial dim ", i, ": kernel ", d.kernel, ", stride ", d.stride,
                        " and dilation ", d.dilation, " must be positive");
      d.stride = std::max<int64_t>(d.stride, 1);
      d.dilation = std::max<int64_t>(d.dilation, 1);
      d.kernel = std::max<int64_t>(d.kernel, 1);
    }
    const int64_t ek = (d.kernel - 1) * d.dilation + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      d.out = (d.in + d.stride - 1) / d.stride;
      const int64_t total = std::max<int64_t>(0, (d.out - 1) * d.stride + ek - d.in);
      const int64_t small = total / 2;
      d.pad_begin = auto_pad == "SAME_UPPER" ? small : total - small;
      d.pad_end = total - d.pad_begin;
      continue;
    }
    if (auto_pad == "NOTSET") {
      d.pad_begin = pads[i];
      d.pad_end = pads[n + i];
    }
    const int64_t span = d.in + d.pad_begin + d.pad_end - ek;
    if (span < 0) {
      if (error->empty())
        *error = StrCat("spatial dim ", i, ": the effective kernel ", ek,
                        " is larger than the padded input ", d.in + d.pad_begin + d.pad_end);
      d.out = 0;
      continue;
    }
    d.out = (ceil_mode ? (span + d.stride - 1) / d.stride : span / d.stride) + 1;
    // A ceil_mode window must start inside the input or the begin padding.
    if (ceil_mode && (d.out - 1) * d.stride >= d.in + d.pad_begin) --d.out;
  }
  return dims;
}

// Whether every window of `d` lies inside the input, so no position needs a bounds check.
bool NeverPadded(const WindowDim& d) {
  return d.pad_begin == 0 && (d.out - 1) * d.stride + (d.kernel - 1) * d.dilation < d.in;
}

std::vector<int64_t> SpatialShape(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

std::string CheckAutoPad(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "NOTSET" || s == "SAME_UPPER" || s == "SAME_LOWER" || s == "VALID") return "";
  return StrCat("must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"", s, "\"");
}

// The schema shared by the windowed ops.
std::vector<AttrSpec> WindowAttrs() {
  const AttrValue none = std::vector<int64_t>{};
  return {{"strides", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"pads", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"dilations", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"auto_pad", AttrKind::kString, AttrValue(std::string("NOTSET")), CheckAutoPad}};
}

// The type relation pieces of the windowed ops.

void RequireFloat(TypeRelContext& ctx, const TensorTypeNode& t, const char* what) {
  if (!IsFloat(t.dtype))
    ctx.Fail(StrCat(what, " must be a float tensor (f32, f16, bf16, f64), got ",
                    TypeToString(TensorType(t.shape, t.dtype))));
}

// Checks x is [N, C, *spatial] with 1-3 constant spatial dims, and returns the spatial sizes.
std::vector<int64_t> ConstSpatial(TypeRelContext& ctx, const TensorTypeNode& x) {
  if (x.ndim() < 3 || x.ndim() > 5)
    ctx.Fail(StrCat("input must be [N, C, *spatial] with 1 to 3 spatial dims, got ",
                    ShapeToString(x.shape)));
  std::vector<int64_t> spatial;
  for (int i = 2; i < x.ndim(); ++i) {
    if (!x.shape[i].is_const())
      ctx.Fail(StrCat("spatial dims must be constants (the output size depends on them), got ",
                      ShapeToString(x.shape)));
    spatial.push_back(x.shape[i].value());
  }
  return spatial;
}

std::vector<WindowDim> WindowOrFail(TypeRelContext& ctx, const std::vector<int64_t>& spatial,
                                    const std::vector<int64_t>& kernel) {
  std::string error;
  std::vector<WindowDim> dims = ComputeWindow(spatial, kernel, ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  return dims;
}

Shape WindowOutShape(const Dim& n, const Dim& c, const std::vector<WindowDim>& dims) {
  Shape out = {n, c};
  for (const WindowDim& d : dims) out.push_back(d.out);
  return out;
}

// Reference kernels see up to 3 spatial dims; missing ones are size-1 dims of a size-1 kernel.
constexpr int kMaxSpatial = 3;
std::vector<WindowDim> PadTo3(std::vector<WindowDim> dims) {
  while (dims.size() < kMaxSpatial) dims.insert(dims.begin(), WindowDim{});
  return dims;
}

// Calls fn.template operator()<T>() for the float dtypes the windowed relations allow.
template <typename Fn>
void DispatchFloat(DType t, Fn&& fn) {
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || ops::kIsHalf<T>) {
      fn.template operator()<T>();
    } else {
      KILN_CHECK(false, "dtype ", DTypeName(t), " passed the type relation");
    }
  });
}

template <typename T>
double ToDouble(T v) {
  return static_cast<double>(static_cast<ops::ComputeT<T>>(v));
}
template <typename T>
T FromDouble(double v) {
  if constexpr (ops::kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// ---- conv ----

// `layout` names the weight's dims for the messages: conv's "[M, C/group, *kernel]".
std::vector<int64_t> ConvKernel(TypeRelContext& ctx, const TensorTypeNode& x,
                                const TensorTypeNode& w,
                                const char* layout = "[M, C/group, *kernel]") {
  if (w.ndim() != x.ndim())
    ctx.Fail(StrCat("weight ", ShapeToString(w.shape), " must have the input's rank ", x.ndim(),
                    " (", layout, ")"));
  std::vector<int64_t> kernel;
  for (int i = 2; i < w.ndim(); ++i) {
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

// The optional bias (argument 2) of conv and conv_transpose: [m] of the input's dtype. `what`
// says where m comes from, for the message.
void CheckBias(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& m,
               const std::string& what) {
  if (ctx.num_args() != 3) return;
  const TensorTypeNode& b = ctx.tensor(2);
  if (b.dtype != x.dtype || b.ndim() != 1)
    ctx.Fail(StrCat("bias must be a 1-D ", DTypeName(x.dtype), " tensor [M], got ",
                    TypeToString(TensorType(b.shape, b.dtype))));
  ctx.AssertEqual(b.shape[0], m, StrCat("bias ", ShapeToString(b.shape), " must have ", what));
}

Type ConvRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& w = ctx.tensor(1);
  RequireFloat(ctx, x, "input");
  if (w.dtype != x.dtype)
    ctx.Fail(StrCat("weight dtype ", DTypeName(w.dtype), " differs from the input's ",
                    DTypeName(x.dtype)));
  std::vector<int64_t> spatial = ConstSpatial(ctx, x);
  std::vector<int64_t> kernel = ConvKernel(ctx, x, w);
  const int64_t group = ctx.attrs().GetInt("group");
  const Dim& m = w.shape[0];
  ctx.AssertEqual(w.shape[1] * Dim(group), x.shape[1],
                  StrCat("input channels ", ShapeToString(x.shape), " must be group (", group,
                         ") x the weight's dim 1 ", ShapeToString(w.shape)));
  if (m.is_const() && m.value() % group != 0)
    ctx.Fail(StrCat("output channels ", m.value(), " are not divisible by group ", group));
  CheckBias(ctx, x, m, StrCat("the weight's M ", ShapeToString(w.shape)));
  return TensorType(WindowOutShape(x.shape[0], m, WindowOrFail(ctx, spatial, kernel)), x.dtype);
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

// ---- lowering helpers ----

Expr I64(int64_t v) {
  return loop::IntImm(v);
}

Expr And(const Expr& a, const Expr& b) {
  if (!a) return b;
  return loop::MakeBinary(loop::BinaryOp::kAnd, a, b);
}

Expr Or(const Expr& a, const Expr& b) {
  if (!a) return b;
  return loop::MakeBinary(loop::BinaryOp::kOr, a, b);
}

Expr InRange(const Expr& i, const Expr& lo, const Expr& hi) {  // lo <= i < hi
  return And(loop::MakeBinary(loop::BinaryOp::kGE, i, lo),
             loop::MakeBinary(loop::BinaryOp::kLT, i, hi));
}

// The window geometry of a lowering, from the (by then constant) spatial extents.
std::vector<WindowDim> LoweredWindow(const LTensor& x, const std::vector<int64_t>& kernel,
                                     const Attrs& attrs) {
  std::vector<int64_t> spatial;
  for (int i = 2; i < x.ndim(); ++i) {
    int64_t v = 0;
    KILN_CHECK(loop::IsConstInt(x.shape[i], &v), "windowed op with a symbolic spatial extent");
    spatial.push_back(v);
  }
  std::string error;
  std::vector<WindowDim> dims = ComputeWindow(spatial, kernel, attrs, &error);
  KILN_CHECK(error.empty(), error);
  return dims;
}

// The input positions one output element's window reads: per spatial dim, the index (clamped
// in range, so it may always be loaded) and whether it is really inside the input (null when
// it always is).
struct WindowTaps {
  std::vector<Expr> index;
  Expr inside;
  std::vector<loop::IterVar> axes;  // the kernel's reduction axes
};

WindowTaps Taps(LowerContext& ctx, const std::vector<WindowDim>& dims,
                const std::vector<Expr>& out_idx) {
  WindowTaps t;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDim& d = dims[i];
    loop::Var k = ctx.NewVar(StrCat("k", i));
    t.axes.push_back({k, I64(d.kernel)});
    Expr pos = loop::Add(loop::Sub(loop::Mul(out_idx[2 + i], I64(d.stride)), I64(d.pad_begin)),
                         loop::Mul(k, I64(d.dilation)));
    if (NeverPadded(d)) {
      t.index.push_back(pos);
      continue;
    }
    t.inside = And(t.inside, InRange(pos, I64(0), I64(d.in)));
    t.index.push_back(loop::Max(I64(0), loop::Min(pos, I64(d.in - 1))));
  }
  return t;
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
  const std::vector<WindowDim> dims = LoweredWindow(x, kernel, attrs);
  const int64_t group = attrs.GetInt("group");
  // f32: as a GEMM that TileLoops blocks and packs (ir/ops/conv_gemm.h).
  if (std::optional<std::vector<LTensor>> gemm =
          ops::LowerConvAsGemm(ctx, in, group, dims, ctx.ShapeExpr(AsTensor(out_types[0])->shape)))
    return *gemm;
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, w, b, has_bias, dims, group, t, acc](const std::vector<Expr>& idx) {
    const Expr& m = idx[1];
    const Expr cg = w.shape[1];
    loop::Var c = ctx.NewVar("c");
    // The group of output channel m reads input channels [g * cg, (g + 1) * cg).
    Expr xc = c;
    if (group > 1)
      xc = loop::Add(loop::Mul(loop::FloorDiv(m, loop::FloorDiv(w.shape[0], I64(group))), cg), c);
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
  if (auto_pad != "NOTSET" && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p; }) &&
      error->empty())
    *error = StrCat("explicit pads ", JoinInts(pads), " conflict with auto_pad ", auto_pad);
  std::vector<WindowDim> dims(n);
  for (size_t i = 0; i < n; ++i) {
    WindowDim& d = dims[i];
    d.in = in[i];
    d.kernel = kernel[i];
    d.stride = strides[i];
    d.dilation = dilations[i];
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

Type ConvTransposeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& w = ctx.tensor(1);
  RequireFloat(ctx, x, "input");
  if (w.dtype != x.dtype)
    ctx.Fail(StrCat("weight dtype ", DTypeName(w.dtype), " differs from the input's ",
                    DTypeName(x.dtype)));
  std::vector<int64_t> spatial = ConstSpatial(ctx, x);
  std::vector<int64_t> kernel = ConvKernel(ctx, x, w, "[C, M/group, *kernel]");
  const int64_t group = ctx.attrs().GetInt("group");
  ctx.AssertEqual(
      w.shape[0], x.shape[1],
      StrCat("input channels ", ShapeToString(x.shape), " must equal the weight's dim 0 ",
             ShapeToString(w.shape), " ([C, M/group, *kernel])"));
  for (const Dim& c : {x.shape[1], w.shape[0]}) {
    if (c.is_const() && c.value() % group != 0)
      ctx.Fail(StrCat("input channels ", c.value(), " are not divisible by group ", group));
  }
  const Dim m = w.shape[1] * Dim(group);
  CheckBias(ctx, x, m,
            StrCat("the output channels M = group (", group, ") x the weight's dim 1 ",
                   ShapeToString(w.shape)));
  std::string error;
  std::vector<WindowDim> dims = ComputeTransposeWindow(spatial, kernel, ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  return TensorType(WindowOutShape(x.shape[0], m, dims), x.dtype);
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
  std::vector<int64_t> spatial, kernel;
  for (int i = 2; i < x.ndim(); ++i) {
    int64_t s = 0, k = 0;
    KILN_CHECK(loop::IsConstInt(x.shape[i], &s) && loop::IsConstInt(w.shape[i], &k),
               "conv_transpose with a symbolic spatial or kernel extent");
    spatial.push_back(s);
    kernel.push_back(k);
  }
  std::string error;
  const std::vector<WindowDim> dims = ComputeTransposeWindow(spatial, kernel, attrs, &error);
  KILN_CHECK(error.empty(), error);
  const int64_t group = attrs.GetInt("group");
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, w, b, has_bias, dims, group, t, acc](const std::vector<Expr>& idx) {
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
      Expr q = loop::Sub(loop::Add(idx[2 + i], I64(d.pad_begin)), loop::Mul(k, I64(d.dilation)));
      Expr src = q;
      if (d.stride > 1) {
        valid = And(
            valid, loop::MakeBinary(loop::BinaryOp::kEQ, loop::FloorMod(q, I64(d.stride)), I64(0)));
        src = loop::FloorDiv(q, I64(d.stride));
      }
      valid = And(valid, InRange(src, I64(0), I64(d.in)));
      xi.push_back(loop::Max(I64(0), loop::Min(src, I64(d.in - 1))));
    }
    Expr prod = loop::Mul(loop::Cast(acc, x.at(xi)), loop::Cast(acc, w.at(wi)));
    prod = loop::Select(valid, prod, lower::Const(0, acc));
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, prod, axes);
    if (has_bias) sum = loop::Add(sum, loop::Cast(acc, b.at({m})));
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// ---- max_pool / max_pool_with_indices / avg_pool ----
//
// max_pool_with_indices is max_pool with ONNX MaxPool's second output, Indices (i64, the shape
// of the values): where in the input each max was taken, as a flat index over the whole input
// that ignores the padding. With storage_order 0 (row major) that is
//   ((n * C + c) * D1 + i1) * D2 + i2 ...
// and with storage_order 1 the plane offset (n * C + c) * D1 * D2 ... plus the position within
// the plane in column-major order, i1 + i2 * D1 + i3 * D1 * D2 (as ONNX's reference and ONNX
// Runtime compute it; the batch and channel stay row major). The max of a window is its first
// occurrence in the window's scan order (the kernel's dims outermost first, as the values are
// visited); a NaN is the max of its window (the values output propagates it), so the first
// NaN wins. A window that lies wholly in the padding (possible only with dilations or large
// pads) has value -inf (the lowest integer) and index -1.

// max_pool when `is_max` (which also takes integers: a max needs no rounding), else avg_pool;
// `with_indices` (max_pool_with_indices) adds the i64 indices as a second tuple field.
Type PoolRel(bool is_max, TypeRelContext& ctx, bool with_indices = false) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (!is_max)
    RequireFloat(ctx, x, "input");
  else if (!IsFloat(x.dtype) && !IsInteger(x.dtype))
    ctx.Fail(StrCat("input must be a float or integer tensor, got ",
                    TypeToString(TensorType(x.shape, x.dtype))));
  std::vector<int64_t> spatial = ConstSpatial(ctx, x);
  const std::vector<int64_t>& kernel = ctx.attrs().GetInts("kernel_shape");
  if (kernel.size() != spatial.size())
    ctx.Fail(StrCat("kernel_shape ", JoinInts(kernel), " must have ", spatial.size(),
                    " values (one per spatial dim of ", ShapeToString(x.shape), ")"));
  Shape out = WindowOutShape(x.shape[0], x.shape[1], WindowOrFail(ctx, spatial, kernel));
  if (!with_indices) return TensorType(std::move(out), x.dtype);
  return TupleType({TensorType(out, x.dtype), TensorType(out, DType::kInt64)});
}

// max_pool when `is_max`, else avg_pool; with `indices`, max_pool_with_indices, which also
// writes there where each max was taken. Integers (max_pool only) are compared in T, exactly;
// floats accumulate in double.
template <typename T>
void PoolKernelRef(bool is_max, const Tensor& x, const Attrs& attrs, Tensor& out,
                   Tensor* indices = nullptr) {
  std::string error;
  const std::vector<WindowDim> d =
      PadTo3(ComputeWindow(SpatialShape(x.shape()), attrs.GetInts("kernel_shape"), attrs, &error));
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t in_plane = d[0].in * d[1].in * d[2].in;
  const T* xp = x.data<T>();
  T* yp = out.data<T>();
  int64_t* ip = indices ? indices->data<int64_t>() : nullptr;
  const bool column_major = indices && attrs.GetInt("storage_order") == 1;
  constexpr bool kIntegral = std::is_integral_v<T>;
  using Acc = std::conditional_t<kIntegral, T, double>;
  // The max of nothing (a window wholly in the padding): -inf, or the lowest integer.
  constexpr Acc kMaxIdentity =
      kIntegral ? std::numeric_limits<Acc>::lowest() : -std::numeric_limits<Acc>::infinity();
  // Whether position i of dim j counts toward avg_pool's divisor.
  auto counted = [&](int j, int64_t i) {
    return include_pad ? i >= -d[j].pad_begin && i < d[j].in + d[j].pad_end : i >= 0 && i < d[j].in;
  };
  int64_t o = 0;
  for (int64_t p = 0; p < planes; ++p) {
    const T* xc = xp + p * in_plane;
    for (int64_t o0 = 0; o0 < d[0].out; ++o0) {
      for (int64_t o1 = 0; o1 < d[1].out; ++o1) {
        for (int64_t o2 = 0; o2 < d[2].out; ++o2) {
          Acc acc = is_max ? kMaxIdentity : Acc(0);
          int64_t count = 0;
          int64_t best = -1;  // max: the max's row-major position in the plane; -1 none yet
          for (int64_t k0 = 0; k0 < d[0].kernel; ++k0) {
            const int64_t i0 = o0 * d[0].stride - d[0].pad_begin + k0 * d[0].dilation;
            for (int64_t k1 = 0; k1 < d[1].kernel; ++k1) {
              const int64_t i1 = o1 * d[1].stride - d[1].pad_begin + k1 * d[1].dilation;
              for (int64_t k2 = 0; k2 < d[2].kernel; ++k2) {
                const int64_t i2 = o2 * d[2].stride - d[2].pad_begin + k2 * d[2].dilation;
                if (counted(0, i0) && counted(1, i1) && counted(2, i2)) ++count;
                if (i0 < 0 || i0 >= d[0].in || i1 < 0 || i1 >= d[1].in || i2 < 0 || i2 >= d[2].in)
                  continue;
                const int64_t pos = (i0 * d[1].in + i1) * d[2].in + i2;
                const T& e = xc[pos];
                // The first element taken, then only a strictly larger one: the first max in
                // scan order wins.
                if constexpr (kIntegral) {
                  if (best < 0 || e > acc) {
                    acc = e;
                    best = pos;
                  }
                } else {
                  const double v = ToDouble(e);
                  if (!is_max) {
                    acc += v;
                  } else if (best < 0 || (!std::isnan(acc) && (std::isnan(v) || v > acc))) {
                    acc = v;  // NaN propagates, as reduce max does, and then stays
                    best = pos;
                  }
                }
              }
            }
          }
          if (ip) {
            int64_t flat = best;
            if (best >= 0 && column_major) {
              const int64_t i2 = best % d[2].in, i1 = best / d[2].in % d[1].in;
              const int64_t i0 = best / (d[1].in * d[2].in);
              flat = (i2 * d[1].in + i1) * d[0].in + i0;
            }
            ip[o] = best < 0 ? -1 : p * in_plane + flat;
          }
          // A window wholly in the padding: max of nothing is -inf; avg is 0 / 0.
          if constexpr (kIntegral)
            yp[o++] = acc;
          else
            yp[o++] = FromDouble<T>(is_max ? acc : acc / static_cast<double>(count));
        }
      }
    }
  }
}

int64_t LowestInt(DType t) {
  int64_t v = 0;
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) v = static_cast<int64_t>(std::numeric_limits<T>::lowest());
  });
  return v;
}

// Whether window position `pos` (of output index o, tap k along dim d) counts toward avg_pool's
// divisor.
Expr Counted(const WindowDim& d, const Expr& o, int64_t k, bool include_pad) {
  Expr pos =
      loop::Add(loop::Sub(loop::Mul(o, I64(d.stride)), I64(d.pad_begin)), I64(k * d.dilation));
  return include_pad ? InRange(pos, I64(-d.pad_begin), I64(d.in + d.pad_end))
                     : InRange(pos, I64(0), I64(d.in));
}

// Float pools of at most this many taps read the phase-split input (ops::SplitPhases, -inf or
// 0 around x) with every tap spelled out: each tap of a row of outputs is then a unit-stride
// shift, so the output loop is elementwise and vectorizes with contiguous loads, where a
// reduction of a few taps per output (with a clamped index and a select per tap) stays
// scalar. A 3x3/1 max pool at 64x56x56 went from 666 to 117 us (Zen 5). Windows that do not
// overlap (2x2/2) read each input element once anyway, and there the copy into phases costs
// more than it saves (the small CNN's first pool: 53 -> 208 us), so they keep the reduction.
constexpr int64_t kMaxSpelledTaps = 25;

std::optional<LTensor> LowerPoolOverPhases(bool is_max, bool include_pad, LowerContext& ctx,
                                           const LTensor& x, const std::vector<WindowDim>& dims,
                                           const std::vector<Expr>& out_shape) {
  const DType t = x.dtype;
  int64_t taps = 1;
  bool overlap = false;
  for (const WindowDim& d : dims) {
    taps *= d.kernel;
    overlap = overlap || (d.kernel - 1) * d.dilation + 1 > d.stride;
  }
  if (!IsFloat(t) || taps > kMaxSpelledTaps || !overlap) return std::nullopt;
  const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  ops::PhaseSplit split = ops::SplitPhases(ctx, x, dims, fill);
  // max in the input's compute type (exact); the sum in f64, as the reference.
  const DType c = is_max ? (t == DType::kFloat64 ? t : DType::kFloat32) : DType::kFloat64;
  auto at = [split, dims, taps, is_max, include_pad, t, c](const std::vector<Expr>& idx) {
    Expr j = split.Column(idx);
    Expr acc, count;
    for (int64_t flat = 0; flat < taps; ++flat) {
      std::vector<Expr> k(dims.size());
      std::vector<int64_t> kv(dims.size());
      int64_t rest = flat;
      for (size_t d = dims.size(); d-- > 0;) {
        kv[d] = rest % dims[d].kernel;
        k[d] = I64(kv[d]);
        rest /= dims[d].kernel;
      }
      Expr v = loop::Cast(c, split.Read(idx[0], idx[1], k, j));
      acc = !acc ? v : is_max ? loop::Max(acc, v) : loop::Add(acc, v);
      if (is_max) continue;
      Expr counted;
      for (size_t d = 0; d < dims.size(); ++d)
        counted = And(counted, Counted(dims[d], idx[2 + d], kv[d], include_pad));
      Expr one = counted ? loop::Select(counted, lower::Const(1, c), lower::Const(0, c))
                         : lower::Const(1, c);
      count = count ? loop::Add(count, one) : one;
    }
    return loop::Cast(t, is_max ? acc : loop::Div(acc, count));
  };
  return LTensor{t, out_shape, at};
}

std::vector<LTensor> LowerPool(bool is_max, LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const std::vector<WindowDim> dims = LoweredWindow(x, attrs.GetInts("kernel_shape"), attrs);
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const DType t = x.dtype;
  if (std::optional<LTensor> p = LowerPoolOverPhases(is_max, include_pad, ctx, x, dims,
                                                     ctx.ShapeExpr(AsTensor(out_types[0])->shape)))
    return {*p};
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, dims, is_max, include_pad, t, acc](const std::vector<Expr>& idx) {
    WindowTaps taps = Taps(ctx, dims, idx);
    std::vector<Expr> xi = {idx[0], idx[1]};
    xi.insert(xi.end(), taps.index.begin(), taps.index.end());
    if (is_max && IsInteger(t)) {  // exact in t; the identity of max is t's lowest value
      Expr v = x.at(xi);
      if (taps.inside) v = loop::Select(taps.inside, v, loop::IntImm(LowestInt(t), t));
      return loop::Reduce(loop::ReduceKind::kMax, v, taps.axes);
    }
    if (is_max) {
      // A max is exact in any type that holds the values: f32 for f32, f16 and bf16 (half the
      // width of f64, twice the lanes).
      const DType m = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
      Expr v = loop::Cast(m, x.at(xi));
      if (taps.inside)
        v = loop::Select(taps.inside, v, lower::Const(-std::numeric_limits<double>::infinity(), m));
      return loop::Cast(t, loop::Reduce(loop::ReduceKind::kMax, v, taps.axes));
    }
    Expr v = loop::Cast(acc, x.at(xi));
    if (taps.inside) v = loop::Select(taps.inside, v, lower::Const(0, acc));
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, v, taps.axes);
    // The divisor: the window positions that count, summed over a second set of kernel axes.
    Expr counted;
    std::vector<loop::IterVar> count_axes;
    for (size_t i = 0; i < dims.size(); ++i) {
      const WindowDim& d = dims[i];
      loop::Var k = ctx.NewVar(StrCat("n", i));
      count_axes.push_back({k, I64(d.kernel)});
      Expr pos = loop::Add(loop::Sub(loop::Mul(idx[2 + i], I64(d.stride)), I64(d.pad_begin)),
                           loop::Mul(k, I64(d.dilation)));
      counted = include_pad ? And(counted, InRange(pos, I64(-d.pad_begin), I64(d.in + d.pad_end)))
                            : And(counted, InRange(pos, I64(0), I64(d.in)));
    }
    Expr count =
        loop::Reduce(loop::ReduceKind::kSum,
                     loop::Select(counted, lower::Const(1, acc), lower::Const(0, acc)), count_axes);
    return loop::Cast(t, loop::Div(sum, count));
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// max_pool_with_indices in two passes, as argmax lowers (reduce.cc), because loop::Reduce
// combines values and carries no position: max_pool's values, materialized; then per window
// the smallest row-major position in the plane that holds the max (a NaN, where the max is
// NaN), which is the first in scan order because the scan visits positions in increasing
// row-major order. Padded positions never hit. The position is materialized too, since the
// index reads it several times (column-major reordering, the empty-window test).
std::vector<LTensor> LowerMaxPoolWithIndices(LowerContext& ctx, const std::vector<LTensor>& in,
                                             const Attrs& attrs,
                                             const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const std::vector<WindowDim> dims = LoweredWindow(x, attrs.GetInts("kernel_shape"), attrs);
  const bool column_major = attrs.GetInt("storage_order") == 1;
  const bool is_float = IsFloat(x.dtype);
  const LTensor values = ctx.Materialize(
      LowerPool(/*is_max=*/true, ctx, in, attrs, {out_types[0]}).at(0), "max_pool_value");
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();  // min's identity: no hit
  int64_t in_plane = 1;
  for (const WindowDim& d : dims) in_plane *= d.in;
  const LTensor first =
      ctx.Materialize(LTensor{DType::kInt64, values.shape,
                              [&ctx, x, values, dims, is_float](const std::vector<Expr>& idx) {
                                WindowTaps taps = Taps(ctx, dims, idx);
                                std::vector<Expr> xi = {idx[0], idx[1]};
                                xi.insert(xi.end(), taps.index.begin(), taps.index.end());
                                Expr v = x.at(xi), best = values.at(idx);
                                if (is_float) {  // f64 holds every float dtype exactly
                                  v = loop::Cast(DType::kFloat64, v);
                                  best = loop::Cast(DType::kFloat64, best);
                                }
                                Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, v, best);
                                if (is_float)
                                  hit = Or(hit, loop::MakeBinary(loop::BinaryOp::kNE, v, v));
                                if (taps.inside) hit = And(taps.inside, hit);
                                Expr pos = I64(0);
                                for (size_t i = 0; i < dims.size(); ++i)
                                  pos = loop::Add(loop::Mul(pos, I64(dims[i].in)), taps.index[i]);
                                return loop::Reduce(loop::ReduceKind::kMin,
                                                    loop::Select(hit, pos, I64(kNone)), taps.axes);
                              }},
                      "max_pool_first");
  LTensor indices{DType::kInt64, values.shape,
                  [x, first, dims, column_major, in_plane](const std::vector<Expr>& idx) {
                    const Expr r = first.at(idx);
                    // Clamped so that the arithmetic of an empty window (r = kNone) cannot
                    // overflow; the select discards it.
                    const Expr p = loop::Min(r, I64(in_plane - 1));
                    Expr flat = p;
                    if (column_major && dims.size() > 1) {
                      std::vector<Expr> pos(dims.size());
                      Expr rest = p;
                      for (size_t i = dims.size(); i-- > 0;) {
                        pos[i] = loop::FloorMod(rest, I64(dims[i].in));
                        rest = loop::FloorDiv(rest, I64(dims[i].in));
                      }
                      flat = pos.back();
                      for (size_t i = dims.size() - 1; i-- > 0;)
                        flat = loop::Add(loop::Mul(flat, I64(dims[i].in)), pos[i]);
                    }
                    const Expr plane = loop::Add(loop::Mul(idx[0], x.shape[1]), idx[1]);
                    return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, r, I64(kNone)),
                                        I64(-1), loop::Add(loop::Mul(plane, I64(in_plane)), flat));
                  }};
  return {values, indices};
}

// ---- max_unpool ----
//
// ONNX MaxUnpool, the partial inverse of max_pool_with_indices: x[N, C, *spatial] and
// indices (i64, x's shape) scatter x into zeros of the "scatter shape" [N, C, *s], where per
// spatial dim
//   s = (in - 1) * stride + kernel - pad_begin - pad_end
// (the input size of the max_pool that x could come from), as scatter.flat[indices[i]] =
// x.flat[i]. The output is the scatter itself, or, with output_shape (the whole output shape,
// N and C included, as ONNX's output_shape input), zeros of that shape holding the scatter at
// its start: out[n, c, o...] = scatter[n, c, o...] where every o < s, else 0. output_shape's
// spatial dims may not be smaller than s, and with it the pads are ignored (s uses none), as the
// ONNX spec says. This follows ONNX's reference implementation and backend tests, in which the
// indices index the scatter shape; ONNX Runtime and PyTorch instead index output_shape
// directly. The two agree when output_shape is the scatter shape.
//
// An index is a flat index over the whole scatter, as MaxPool's Indices are over its input.
// MaxPool's index for an element of plane (n, c) always lies in plane (n, c), and kiln relies
// on it: an index outside its element's own plane, [(n * C + c) * P, (n * C + c + 1) * P) for
// the scatter's plane size P, is dropped (ONNX leaves such input undefined). When several
// elements of a plane name the same position, the last in row-major order wins, as ONNX's
// reference and ONNX Runtime, which write in order, have it.
//
// Loop IR has no scattered stores, so the lowering gathers: each scatter element searches its
// plane of `indices` for the last position naming it (a max reduction), materialized, then
// reads x there. That is scatter_numel * in_plane comparisons, quadratic in the plane size,
// where a scatter would be linear; the windows that could cover a position are not enough to
// search, since nothing guarantees that an index lies in its element's window.

struct UnpoolGeometry {
  std::vector<int64_t> scatter;  // the scatter shape's spatial dims
  std::vector<int64_t> out;      // the output's: output_shape's, else the scatter's
};

// The spatial dims of max_unpool's scatter and output for the input's spatial dims `in`; sets
// `*error` when the attributes do not fit.
UnpoolGeometry UnpoolSpatial(const std::vector<int64_t>& in, const Attrs& attrs,
                             std::string* error) {
  const size_t n = in.size();
  UnpoolGeometry g{std::vector<int64_t>(n, 1), std::vector<int64_t>(n, 1)};
  const std::vector<int64_t>& kernel = attrs.GetInts("kernel_shape");
  if (kernel.size() != n) {
    *error = StrCat("kernel_shape ", JoinInts(kernel), " must have ", n,
                    " values (one per spatial dim)");
    return g;
  }
  std::vector<int64_t> strides = PerDim(attrs, "strides", n, 1, error);
  std::vector<int64_t> pads = Pads(attrs, n, error);
  const std::vector<int64_t>& output_shape = attrs.GetInts("output_shape");
  const bool given = output_shape.size() == n + 2;  // the relation checks the length
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || in[i] < 1) {
      if (error->empty())
        *error = StrCat("spatial dim ", i, ": input ", in[i], ", kernel ", kernel[i],
                        " and stride ", strides[i], " must be positive");
      continue;
    }
    const int64_t pb = given ? 0 : pads[i], pe = given ? 0 : pads[n + i];
    g.scatter[i] = (in[i] - 1) * strides[i] + kernel[i] - pb - pe;
    if (g.scatter[i] < 1) {
      if (error->empty())
        *error =
            StrCat("spatial dim ", i, ": the output size (", in[i], " - 1) * ", strides[i], " + ",
                   kernel[i], " - ", pb, " - ", pe, " = ", g.scatter[i], " is not positive");
      g.scatter[i] = 1;
      continue;
    }
    g.out[i] = given ? output_shape[2 + i] : g.scatter[i];
    if (g.out[i] < g.scatter[i] && error->empty())
      *error = StrCat("output_shape ", JoinInts(output_shape), ": spatial dim ", i,
                      " is smaller than the unpooled size (", in[i], " - 1) * ", strides[i], " + ",
                      kernel[i], " = ", g.scatter[i]);
  }
  return g;
}

Type MaxUnpoolRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& ind = ctx.tensor(1);
  if (!IsFloat(x.dtype) && !IsInteger(x.dtype))
    ctx.Fail(StrCat("input must be a float or integer tensor, got ",
                    TypeToString(TensorType(x.shape, x.dtype))));
  std::vector<int64_t> spatial = ConstSpatial(ctx, x);
  const std::string want = StrCat("x's shape ", ShapeToString(x.shape));
  if (ind.dtype != DType::kInt64 || ind.ndim() != x.ndim())
    ctx.Fail(StrCat("indices must be an i64 tensor of ", want, ", got ",
                    TypeToString(TensorType(ind.shape, ind.dtype))));
  for (int i = 0; i < x.ndim(); ++i)
    ctx.AssertEqual(ind.shape[i], x.shape[i],
                    StrCat("indices ", ShapeToString(ind.shape), " must have ", want));
  const std::vector<int64_t>& output_shape = ctx.attrs().GetInts("output_shape");
  if (!output_shape.empty()) {
    if (static_cast<int>(output_shape.size()) != x.ndim())
      ctx.Fail(StrCat("output_shape ", JoinInts(output_shape), " must have ", x.ndim(),
                      " values (the whole output shape, like ", want, ")"));
    for (int i = 0; i < 2; ++i)
      ctx.AssertEqual(Dim(output_shape[i]), x.shape[i],
                      StrCat("output_shape ", JoinInts(output_shape),
                             " must keep the batch and channels of ", want));
  }
  std::string error;
  const UnpoolGeometry g = UnpoolSpatial(spatial, ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  Shape out = {x.shape[0], x.shape[1]};
  for (int64_t d : g.out) out.push_back(d);
  return TensorType(std::move(out), x.dtype);
}

// The scatter, in order (the last write wins), straight into the output: a scatter position is
// the output position with the same coordinates. Zero bits are zero in every dtype it takes.
void MaxUnpoolKernelRef(const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int64_t* ind = in[1].data<int64_t>();
  Tensor& y = out[0];
  if (y.numel() == 0) return;  // an empty tensor may have no buffer
  std::memset(y.raw_data(), 0, static_cast<size_t>(y.numel() * DTypeSize(y.dtype())));
  std::string error;
  const UnpoolGeometry g = UnpoolSpatial(SpatialShape(x.shape()), attrs, &error);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t in_plane = 1, scatter_plane = 1, out_plane = 1;
  for (size_t i = 0; i < g.out.size(); ++i) {
    in_plane *= x.shape()[2 + i];
    scatter_plane *= g.scatter[i];
    out_plane *= g.out[i];
  }
  std::vector<int64_t> pos;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t j = 0; j < in_plane; ++j) {
      const int64_t target = ind[p * in_plane + j] - p * scatter_plane;
      if (target < 0 || target >= scatter_plane) continue;  // outside its plane: dropped
      ops::Unravel(target, g.scatter, pos);
      ops::CopyElements(x, p * in_plane + j, y, p * out_plane + ops::Ravel(pos, g.out), 1);
    }
  }
}

std::vector<LTensor> LowerMaxUnpool(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], ind = in[1];
  std::vector<int64_t> in_sp;
  for (int i = 2; i < x.ndim(); ++i) {
    int64_t v = 0;
    KILN_CHECK(loop::IsConstInt(x.shape[i], &v), "max_unpool with a symbolic spatial extent");
    in_sp.push_back(v);
  }
  std::string error;
  const UnpoolGeometry g = UnpoolSpatial(in_sp, attrs, &error);
  KILN_CHECK(error.empty(), error);
  const std::vector<int64_t> sc = g.scatter;
  int64_t scatter_plane = 1;
  for (int64_t d : sc) scatter_plane *= d;
  std::vector<Expr> scatter_shape = {x.shape[0], x.shape[1]};
  for (int64_t d : sc) scatter_shape.push_back(I64(d));
  // The last row-major position in the plane of `indices` that names each scatter position,
  // or -1 when none does.
  const LTensor source = ctx.Materialize(
      LTensor{DType::kInt64, scatter_shape,
              [&ctx, x, ind, in_sp, sc, scatter_plane](const std::vector<Expr>& idx) {
                const Expr plane = loop::Add(loop::Mul(idx[0], x.shape[1]), idx[1]);
                Expr target = loop::Mul(plane, I64(scatter_plane));
                Expr within = I64(0);
                for (size_t i = 0; i < sc.size(); ++i)
                  within = loop::Add(loop::Mul(within, I64(sc[i])), idx[2 + i]);
                target = loop::Add(target, within);
                std::vector<Expr> ii = {idx[0], idx[1]};
                std::vector<loop::IterVar> axes;
                Expr pos = I64(0);
                for (size_t i = 0; i < in_sp.size(); ++i) {
                  loop::Var j = ctx.NewVar(StrCat("j", i));
                  axes.push_back({j, I64(in_sp[i])});
                  ii.push_back(j);
                  pos = loop::Add(loop::Mul(pos, I64(in_sp[i])), j);
                }
                Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, ind.at(ii), target);
                return loop::Reduce(loop::ReduceKind::kMax, loop::Select(hit, pos, I64(-1)), axes);
              }},
      "max_unpool_source");
  const std::vector<int64_t> out_sp = g.out;
  auto at = [x, source, in_sp, sc, out_sp](const std::vector<Expr>& idx) {
    // Output positions past the scatter shape (only with output_shape) are zeros; they read
    // the source at a clamped position, which the select discards.
    Expr inside;
    std::vector<Expr> si = {idx[0], idx[1]};
    for (size_t i = 0; i < sc.size(); ++i) {
      if (out_sp[i] == sc[i]) {
        si.push_back(idx[2 + i]);
        continue;
      }
      inside = And(inside, loop::MakeBinary(loop::BinaryOp::kLT, idx[2 + i], I64(sc[i])));
      si.push_back(loop::Min(idx[2 + i], I64(sc[i] - 1)));
    }
    const Expr s = source.at(si);
    // x at the source position (clamped in range for a miss, whose value the select discards).
    Expr rest = loop::Max(s, I64(0));
    std::vector<Expr> xi(x.ndim());
    xi[0] = idx[0];
    xi[1] = idx[1];
    for (size_t i = in_sp.size(); i-- > 0;) {
      xi[2 + i] = i == 0 ? rest : loop::FloorMod(rest, I64(in_sp[i]));
      rest = loop::FloorDiv(rest, I64(in_sp[i]));
    }
    const Expr found = And(inside, loop::MakeBinary(loop::BinaryOp::kGE, s, I64(0)));
    return loop::Select(found, x.at(xi), lower::Const(0, x.dtype));
  };
  return {LTensor{x.dtype, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// ---- global_max_pool / global_avg_pool ----

Type GlobalPoolRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  RequireFloat(ctx, x, "input");
  if (x.ndim() < 3)
    ctx.Fail(StrCat("input must be [N, C, *spatial] with at least one spatial dim, got ",
                    ShapeToString(x.shape)));
  Shape out = {x.shape[0], x.shape[1]};
  out.resize(x.ndim(), Dim(1));
  return TensorType(std::move(out), x.dtype);
}

template <typename T>
void GlobalPoolKernelRef(bool is_max, const Tensor& x, Tensor& out) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t len = 1;
  for (int64_t d : SpatialShape(x.shape())) len *= d;
  const T* xp = x.data<T>();
  T* yp = out.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < len; ++i) {
      const double v = ToDouble(xp[p * len + i]);
      if (!is_max)
        acc += v;
      else if (std::isnan(v) || v > acc)
        acc = std::isnan(acc) ? acc : v;
    }
    yp[p] = FromDouble<T>(is_max ? acc : acc / static_cast<double>(len));
  }
}

std::vector<LTensor> LowerGlobalPool(bool is_max, LowerContext& ctx,
                                     const std::vector<LTensor>& in) {
  const LTensor& x = in[0];
  std::vector<int> axes;
  Expr count = I64(1);
  for (int i = 2; i < x.ndim(); ++i) {
    axes.push_back(i);
    count = loop::Mul(count, x.shape[i]);
  }
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  LTensor r = lower::ReduceAxes(ctx, x, axes, /*keepdims=*/true,
                                is_max ? loop::ReduceKind::kMax : loop::ReduceKind::kSum,
                                [acc](const Expr& e) { return loop::Cast(acc, e); });
  return {lower::Map(r, t, [r, t, is_max, count, acc](const std::vector<Expr>& idx) {
    Expr v = r.at(idx);
    return loop::Cast(t, is_max ? v : loop::Div(v, loop::Cast(acc, count)));
  })};
}

// ---- pad ----
//
// out[o] = x[o - pad_begin] where that is inside x; elsewhere `value` (constant), the nearest
// edge element (edge) or the mirror image without repeating the edge (reflect). Negative pads
// crop. reflect needs pads of at most in - 1, so one reflection reaches every padded position.

std::string CheckPadMode(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "constant" || s == "reflect" || s == "edge") return "";
  return StrCat("must be constant, reflect or edge, got \"", s, "\"");
}

Type PadRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& pads = ctx.attrs().GetInts("pads");
  const int rank = x.ndim();
  if (static_cast<int>(pads.size()) != 2 * rank)
    ctx.Fail(StrCat("pads ", JoinInts(pads), " must have ", 2 * rank,
                    " values (the begin pads of every axis, then the end pads) for ",
                    ShapeToString(x.shape)));
  const std::string& mode = ctx.attrs().GetString("mode");
  Shape out;
  for (int i = 0; i < rank; ++i) {
    const int64_t pb = pads[i], pe = pads[rank + i];
    const Dim& d = x.shape[i];
    if (!d.is_const()) {
      if (pb < 0 || pe < 0 || (mode != "constant" && (pb || pe)))
        ctx.Fail(StrCat("axis ", i, " of ", ShapeToString(x.shape),
                        " is symbolic: it can only get non-negative constant-mode pads, got ", pb,
                        ", ", pe, " in mode ", mode));
      out.push_back(d + Dim(pb + pe));
      continue;
    }
    const int64_t n = d.value() + pb + pe;
    if (n < 0)
      ctx.Fail(StrCat("pads ", pb, ", ", pe, " crop axis ", i, " of ", ShapeToString(x.shape),
                      " below size 0"));
    if (mode == "edge" && d.value() == 0 && (pb > 0 || pe > 0))
      ctx.Fail(StrCat("edge mode cannot pad the empty axis ", i, " of ", ShapeToString(x.shape)));
    if (mode == "reflect" && (pb > 0 || pe > 0) && (pb >= d.value() || pe >= d.value()))
      ctx.Fail(StrCat("reflect mode pads ", pb, ", ", pe, " of axis ", i, " of ",
                      ShapeToString(x.shape), " must be smaller than its size"));
    out.push_back(n);
  }
  return TensorType(std::move(out), x.dtype);
}

// The input index that output index `o` of an axis of size `n` reads, or -1 for `value`.
int64_t PadSource(int64_t o, int64_t pb, int64_t n, const std::string& mode) {
  const int64_t i = o - pb;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect
}

void PadKernelRef(const Tensor& x, const Attrs& attrs, Tensor& out) {
  const std::vector<int64_t>& pads = attrs.GetInts("pads");
  const std::string& mode = attrs.GetString("mode");
  const double value = attrs.GetFloat("value");
  std::vector<int64_t> idx, src(x.ndim());
  for (int64_t o = 0; o < out.numel(); ++o) {
    ops::Unravel(o, out.shape(), idx);
    bool inside = true;
    for (int i = 0; i < x.ndim(); ++i) {
      src[i] = PadSource(idx[i], pads[i], x.shape()[i], mode);
      inside = inside && src[i] >= 0;
    }
    if (inside)
      ops::CopyElements(x, ops::Ravel(src, x.shape()), out, o, 1);
    else
      out.SetFromDouble(o, value);
  }
}

std::vector<LTensor> LowerPad(LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                              const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const std::vector<int64_t> pads = attrs.GetInts("pads");
  const std::string mode = attrs.GetString("mode");
  const Expr value = lower::Const(attrs.GetFloat("value"), x.dtype);
  std::vector<Expr> shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  // An empty input (only constant mode may pad one) has nothing to load: all `value`.
  bool empty = false;
  Expr maybe_empty;  // a symbolic extent is 0 at run time
  for (const Expr& e : x.shape) {
    int64_t v = 0;
    if (loop::IsConstInt(e, &v))
      empty = empty || v == 0;
    else
      maybe_empty = Or(maybe_empty, loop::MakeBinary(loop::BinaryOp::kEQ, e, I64(0)));
  }
  if (empty) return {LTensor{x.dtype, shape, [value](const std::vector<Expr>&) { return value; }}};
  auto at = [x, pads, mode, value, maybe_empty](const std::vector<Expr>& idx) {
    const int rank = x.ndim();
    std::vector<Expr> src(rank);
    Expr inside;
    for (int a = 0; a < rank; ++a) {
      const int64_t pb = pads[a], pe = pads[rank + a];
      Expr i = loop::Sub(idx[a], I64(pb));
      if (pb <= 0 && pe <= 0) {  // only cropped: always inside
        src[a] = i;
        continue;
      }
      const Expr last = loop::Sub(x.shape[a], I64(1));
      if (mode == "constant") {
        inside = And(inside, InRange(i, I64(0), x.shape[a]));
        src[a] = loop::Max(I64(0), loop::Min(i, last));
      } else if (mode == "edge") {
        src[a] = loop::Max(I64(0), loop::Min(i, last));
      } else {  // reflect: |i|, mirrored at the last element
        Expr r =
            loop::Select(loop::MakeBinary(loop::BinaryOp::kLT, i, I64(0)), loop::Sub(I64(0), i), i);
        src[a] = loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, r, last),
                              loop::Sub(loop::Mul(I64(2), last), r), r);
      }
    }
    // With an extent 0 at run time every position is `value`, but the load still runs: read
    // the first element, for which every buffer has storage (see select.cc's concat).
    if (maybe_empty) {
      for (Expr& s : src) s = loop::Select(maybe_empty, I64(0), s);
      inside = And(inside, loop::Not(maybe_empty));
    }
    Expr v = x.at(src);
    return inside ? loop::Select(inside, v, value) : v;
  };
  return {LTensor{x.dtype, shape, at}};
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  std::vector<AttrSpec> conv_attrs = WindowAttrs();
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
      .type_rel = ConvRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            DispatchFloat(in[0].dtype(),
                          [&]<typename T>() { ConvKernelRef<T>(in, attrs, out[0]); });
          },
      .lower = LowerConv,
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
      .type_rel = ConvTransposeRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            DispatchFloat(in[0].dtype(),
                          [&]<typename T>() { ConvTransposeKernelRef<T>(in, attrs, out[0]); });
          },
      .lower = LowerConvTranspose,
  });

  for (bool is_max : {true, false}) {
    std::vector<AttrSpec> attrs = WindowAttrs();
    attrs.push_back({"kernel_shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()});
    attrs.push_back({"ceil_mode", AttrKind::kBool, AttrValue(false)});
    if (!is_max) attrs.push_back({"count_include_pad", AttrKind::kBool, AttrValue(false)});
    r.Register(OpDef{
        .name = is_max ? "max_pool" : "avg_pool",
        .doc = is_max ? "ONNX MaxPool (values only): the max over each window, padding ignored; "
                        "floats and integers"
                      : "ONNX AveragePool: the mean over each window; padding counts toward the "
                        "divisor only with count_include_pad",
        .attrs = attrs,
        .pattern = OpPattern::kOutputFusable,
        .type_rel = [is_max](TypeRelContext& ctx) { return PoolRel(is_max, ctx); },
        .ref_kernel =
            [is_max](const std::vector<Tensor>& in, const Attrs& a, std::vector<Tensor>& out) {
              DispatchDType(in[0].dtype(), [&]<typename T>() {
                if constexpr (std::is_same_v<T, bool>) {
                  KILN_CHECK(false, "dtype bool passed the type relation");
                } else {
                  PoolKernelRef<T>(is_max, in[0], a, out[0]);
                }
              });
            },
        .lower =
            [is_max](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& a,
                     const std::vector<Type>& out_types) {
              return LowerPool(is_max, ctx, in, a, out_types);
            },
    });
    if (is_max) {
      attrs.push_back({"storage_order", AttrKind::kInt, AttrValue(int64_t{0}),
                       [](const AttrValue& v) -> std::string {
                         const int64_t o = std::get<int64_t>(v);
                         return o == 0 || o == 1
                                    ? ""
                                    : StrCat("must be 0 (row major) or 1 (column major), got ", o);
                       }});
      r.Register(OpDef{
          .name = "max_pool_with_indices",
          .doc = "ONNX MaxPool with its Indices output: a tuple of max_pool's values and, as i64, "
                 "the flat index over the whole input of each max (the first in the window; "
                 "a NaN if any), storage_order 0 row major or 1 column major within the plane; "
                 "-1 for a window wholly in the padding",
          .attrs = attrs,
          .pattern = OpPattern::kOpaque,
          .type_rel = [](TypeRelContext& ctx) { return PoolRel(true, ctx, true); },
          .ref_kernel =
              [](const std::vector<Tensor>& in, const Attrs& a, std::vector<Tensor>& out) {
                DispatchDType(in[0].dtype(), [&]<typename T>() {
                  if constexpr (std::is_same_v<T, bool>) {
                    KILN_CHECK(false, "dtype bool passed the type relation");
                  } else {
                    PoolKernelRef<T>(true, in[0], a, out[0], &out[1]);
                  }
                });
              },
          .lower = LowerMaxPoolWithIndices,
      });
    }
    r.Register(OpDef{
        .name = is_max ? "global_max_pool" : "global_avg_pool",
        .doc = is_max ? "ONNX GlobalMaxPool: [N, C, *spatial] -> [N, C, 1, ...], the max of each "
                        "channel"
                      : "ONNX GlobalAveragePool: [N, C, *spatial] -> [N, C, 1, ...], the mean "
                        "of each channel",
        .attrs = {},
        .pattern = OpPattern::kReduction,
        .type_rel = GlobalPoolRel,
        .ref_kernel =
            [is_max](const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
              DispatchFloat(in[0].dtype(),
                            [&]<typename T>() { GlobalPoolKernelRef<T>(is_max, in[0], out[0]); });
            },
        .lower = [is_max](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
                          const std::vector<Type>&) { return LowerGlobalPool(is_max, ctx, in); },
    });
  }

  const AttrValue none = std::vector<int64_t>{};
  r.Register(OpDef{
      .name = "max_unpool",
      .doc = "ONNX MaxUnpool: x[N, C, *spatial] (1-3 spatial dims) and i64 indices of x's shape "
             "(max_pool_with_indices' row-major ones) scatter x into zeros of spatial dims "
             "(in - 1) * stride + kernel - pads (the last write wins; an index outside its "
             "element's (n, c) plane is dropped); output_shape (the whole shape, pads then "
             "ignored) zero-extends that at the end, as ONNX's reference does. Compiled as a "
             "search: quadratic in the plane size",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"kernel_shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()},
                {"strides", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
                {"pads", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
                {"output_shape", AttrKind::kInts, none, ops::CheckNonNegativeInts()}},
      .pattern = OpPattern::kOpaque,
      .type_rel = MaxUnpoolRel,
      .ref_kernel = MaxUnpoolKernelRef,
      .lower = LowerMaxUnpool,
  });

  r.Register(OpDef{
      .name = "pad",
      .doc = "ONNX Pad: pads = [begin of each axis..., end of each axis...] (negative crops); "
             "mode constant (with value), reflect or edge",
      .attrs = {{"pads", AttrKind::kInts, std::nullopt},
                {"mode", AttrKind::kString, AttrValue(std::string("constant")), CheckPadMode},
                {"value", AttrKind::kFloat, AttrValue(0.0)}},
      .pattern = OpPattern::kInjective,
      .type_rel = PadRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { PadKernelRef(in[0], attrs, out[0]); },
      .lower = LowerPad,
  });
}

}  // namespace kiln
