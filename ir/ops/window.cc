// The window geometry and lowering helpers shared by conv.cc, pool.cc and nn.cc (window.h).
#include "ir/ops/window.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::ops {
namespace {

using loop::Expr;

// Whether every window of `d` lies inside the input, so no position needs a bounds check.
bool NeverPadded(const WindowDim& d) {
  return d.pad_begin == 0 && WindowSpan(d) <= d.in;
}

std::string CheckAutoPad(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "NOTSET" || s == "SAME_UPPER" || s == "SAME_LOWER" || s == "VALID") return "";
  return StrCat("must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"", s, "\"");
}

}  // namespace

int64_t WindowSpan(const WindowDim& d) {
  return (d.out - 1) * d.stride + (d.kernel - 1) * d.dilation + 1;
}

bool WindowsApart(const std::vector<WindowDim>& dims) {
  for (const WindowDim& d : dims)
    if ((d.kernel - 1) * d.dilation + 1 > d.stride || d.pad_begin != 0 || WindowSpan(d) > d.in)
      return false;
  return true;
}

bool WindowsReadInPlace(const std::vector<WindowDim>& dims) {
  return !dims.empty() && dims.back().out >= 4 && WindowsApart(dims);
}

std::string JoinInts(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += StrCat(i ? ", " : "", v[i]);
  return s + "]";
}

std::vector<int64_t> PerDim(const Attrs& attrs, const char* attr, size_t n, int64_t def,
                            std::string* error) {
  std::vector<int64_t> v = attrs.GetInts(attr);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n && error->empty())
    *error = StrCat(attr, " ", JoinInts(v), " must have ", n, " values (one per spatial dim)");
  v.resize(n, def);
  return v;
}

std::vector<int64_t> Pads(const Attrs& attrs, size_t n, std::string* error) {
  std::vector<int64_t> pads = attrs.GetInts("pads");
  if (pads.empty()) pads.assign(2 * n, 0);
  if (pads.size() != 2 * n && error->empty())
    *error = StrCat("pads ", JoinInts(pads), " must have ", 2 * n,
                    " values (the begin pads of every spatial dim, then the end pads)");
  pads.resize(2 * n, 0);
  return pads;
}

void CheckPadsAgainstAutoPad(const std::vector<int64_t>& pads, const std::string& auto_pad,
                             std::string* error) {
  if (auto_pad != "NOTSET" && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p; }) &&
      error->empty())
    *error = StrCat("explicit pads ", JoinInts(pads), " conflict with auto_pad ", auto_pad);
}

std::vector<WindowDim> BaseWindowDims(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& kernel,
                                      const std::vector<int64_t>& strides,
                                      const std::vector<int64_t>& dilations) {
  std::vector<WindowDim> dims(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    dims[i].in = in[i];
    dims[i].kernel = kernel[i];
    dims[i].stride = strides[i];
    dims[i].dilation = dilations[i];
  }
  return dims;
}

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
  CheckPadsAgainstAutoPad(pads, auto_pad, error);
  std::vector<WindowDim> dims = BaseWindowDims(in, kernel, strides, dilations);
  for (size_t i = 0; i < n; ++i) {
    WindowDim& d = dims[i];
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

std::vector<int64_t> SpatialShape(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

std::vector<AttrSpec> WindowAttrs() {
  const AttrValue none = std::vector<int64_t>{};
  return {{"strides", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"pads", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"dilations", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
          {"auto_pad", AttrKind::kString, AttrValue(std::string("NOTSET")), CheckAutoPad}};
}

void RequireFloat(TypeRelContext& ctx, const TensorTypeNode& t, const char* what) {
  if (!IsFloat(t.dtype))
    ctx.Fail(StrCat(what, " must be a float tensor (f32, f16, bf16, f64), got ",
                    TypeToString(TensorType(t.shape, t.dtype))));
}

void CheckWindowRank(TypeRelContext& ctx, const TensorTypeNode& x) {
  if (x.ndim() < 3 || x.ndim() > 5)
    ctx.Fail(StrCat("input must be [N, C, *spatial] with 1 to 3 spatial dims, got ",
                    ShapeToString(x.shape)));
}

std::vector<int64_t> ConstSpatial(TypeRelContext& ctx, const TensorTypeNode& x) {
  CheckWindowRank(ctx, x);
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

Shape WindowOutShapeOf(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& c,
                       const std::vector<int64_t>& kernel) {
  CheckWindowRank(ctx, x);
  const size_t n = static_cast<size_t>(x.ndim() - 2);
  if (kernel.size() != n)
    ctx.Fail(StrCat("kernel_shape ", JoinInts(kernel), " must have ", n,
                    " values (one per spatial dim of ", ShapeToString(x.shape), ")"));
  if (IsConstShape(x.shape))
    return WindowOutShape(x.shape[0], c, WindowOrFail(ctx, ConstSpatial(ctx, x), kernel));
  // The attributes are checked as for constant dims, with a stand-in size for each symbolic one
  // large enough that no window overhangs it; the sizes come from the formulas below.
  std::vector<int64_t> stand_in;
  for (size_t i = 0; i < n; ++i) {
    const Dim& d = x.shape[2 + i];
    stand_in.push_back(d.is_const() ? d.value() : int64_t{1} << 30);
  }
  std::vector<WindowDim> dims = WindowOrFail(ctx, stand_in, kernel);
  const std::string& auto_pad = ctx.attrs().GetString("auto_pad");
  const bool ceil_mode = ctx.attrs().Has("ceil_mode") && ctx.attrs().GetBool("ceil_mode");
  Shape out = {x.shape[0], c};
  for (size_t i = 0; i < n; ++i) {
    const Dim& in = x.shape[2 + i];
    const WindowDim& d = dims[i];
    if (in.is_const()) {
      out.push_back(d.out);
      continue;
    }
    const int64_t ek = (d.kernel - 1) * d.dilation + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out.push_back(FloorDiv(in + Dim(d.stride - 1), Dim(d.stride)));
      continue;
    }
    // pad_begin and pad_end do not depend on the size outside SAME (VALID: 0). A window must
    // fit, as ComputeWindow requires of constant sizes: checked when a run binds the size (a
    // shape-generic conv reads whole padded rows, and past them with no window that fits).
    ctx.AssertAtMost(
        Dim(ek), in + Dim(d.pad_begin + d.pad_end),
        StrCat("spatial dim ", i, ": the effective kernel ", ek, " (at most the padded input)"));
    const Dim span = in + Dim(d.pad_begin + d.pad_end - ek);
    if (!ceil_mode) {
      out.push_back(FloorDiv(span, Dim(d.stride)) + Dim(1));
      continue;
    }
    // ceil, less a last window that would start in the end padding: the window must start
    // before in + pad_begin. One Min equals ComputeWindow's one decrement when the end pad is
    // below the effective kernel (the ceil then overshoots that bound by at most one).
    if (d.pad_end >= ek)
      ctx.Fail(StrCat("ceil_mode with an end pad (", d.pad_end,
                      ") not below the effective kernel (", ek,
                      ") needs constant spatial dims, got ", ShapeToString(x.shape)));
    out.push_back(Min(FloorDiv(span + Dim(d.stride - 1), Dim(d.stride)) + Dim(1),
                      FloorDiv(in + Dim(d.pad_begin + d.stride - 1), Dim(d.stride))));
  }
  return out;
}

Shape WindowOutShape(const Dim& n, const Dim& c, const std::vector<WindowDim>& dims) {
  Shape out = {n, c};
  for (const WindowDim& d : dims) out.push_back(d.out);
  return out;
}

std::vector<WindowDim> PadTo3(std::vector<WindowDim> dims) {
  while (dims.size() < kMaxSpatial) dims.insert(dims.begin(), WindowDim{});
  return dims;
}

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

Expr InRange(const Expr& i, const Expr& lo, const Expr& hi) {
  return And(loop::MakeBinary(loop::BinaryOp::kGE, i, lo),
             loop::MakeBinary(loop::BinaryOp::kLT, i, hi));
}

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

int64_t TapCount(const std::vector<WindowDim>& dims) {
  int64_t taps = 1;
  for (const WindowDim& d : dims) taps *= d.kernel;
  return taps;
}

Expr TapPosition(const WindowDim& d, const Expr& o, const Expr& k) {
  return TapPosition(d, I64(d.pad_begin), o, k);
}

Expr TapPosition(const WindowDim& d, const Expr& pad_begin, const Expr& o, const Expr& k) {
  return loop::Add(loop::Sub(loop::Mul(o, I64(d.stride)), pad_begin),
                   loop::Mul(k, I64(d.dilation)));
}

Expr Counted(const WindowDim& d, const Expr& o, int64_t k, bool include_pad) {
  return Counted(PadExprs{I64(d.pad_begin), I64(d.pad_end)}, I64(d.in), TapPosition(d, o, I64(k)),
                 include_pad);
}

Expr Counted(const PadExprs& pads, const Expr& in, const Expr& pos, bool include_pad) {
  return include_pad ? InRange(pos, loop::Sub(I64(0), pads.begin), loop::Add(in, pads.end))
                     : InRange(pos, I64(0), in);
}

int64_t LowestInt(DType t) {
  int64_t v = 0;
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) v = static_cast<int64_t>(std::numeric_limits<T>::lowest());
  });
  return v;
}

WindowTaps Taps(LowerContext& ctx, const std::vector<WindowDim>& dims,
                const std::vector<Expr>& out_idx) {
  WindowTaps t;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDim& d = dims[i];
    loop::Var k = ctx.NewVar(StrCat("k", i));
    t.axes.push_back({k, I64(d.kernel)});
    Expr pos = TapPosition(d, out_idx[2 + i], k);
    if (NeverPadded(d)) {
      t.index.push_back(pos);
      continue;
    }
    t.inside = And(t.inside, InRange(pos, I64(0), I64(d.in)));
    t.index.push_back(loop::Max(I64(0), loop::Min(pos, I64(d.in - 1))));
  }
  return t;
}

}  // namespace kiln::ops
