// Ops that pick or assemble parts of tensors: concat, split, slice, gather, range.
// Kernels copy raw elements, so every dtype works unchanged.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

void CopyElements(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;  // empty tensors may have no buffer
  size_t es = static_cast<size_t>(DTypeSize(src.dtype()));
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_off * es,
              static_cast<const char*>(src.raw_data()) + src_off * es, n * es);
}

// Slice indices at least this large (exporters write INT64_MAX) are past the end of any dim:
// no tensor with a dim that large could be allocated. Also bounds sums of sizes.
constexpr int64_t kHuge = int64_t{1} << 62;

int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// --- concat ---

Type ConcatRel(TypeRelContext& ctx) {
  const TensorTypeNode& first = ctx.tensor(0);
  if (first.ndim() == 0) ctx.Fail("cannot concatenate scalars (rank 0)");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), first.ndim());
  Shape out = first.shape;
  for (int i = 1; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    if (t.dtype != first.dtype)
      ctx.Fail(StrCat("input ", i, " has dtype ", DTypeName(t.dtype), " but input 0 has ",
                      DTypeName(first.dtype)));
    if (t.ndim() != first.ndim())
      ctx.Fail(StrCat("input ", i, " ", ShapeToString(t.shape), " has rank ", t.ndim(),
                      " but input 0 ", ShapeToString(first.shape), " has rank ", first.ndim()));
    for (int d = 0; d < t.ndim(); ++d) {
      if (d == axis) continue;
      ctx.AssertEqual(first.shape[d], t.shape[d],
                      StrCat("dim ", d, " differs between input 0 ", ShapeToString(first.shape),
                             " and input ", i, " ", ShapeToString(t.shape)));
    }
    out[axis] = out[axis] + t.shape[axis];
  }
  return TensorType(std::move(out), first.dtype);
}

void ConcatKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), y.ndim());
  int64_t outer = Product(y.shape(), 0, axis);
  int64_t inner = Product(y.shape(), axis + 1, y.shape().size());
  int64_t out_row = y.shape()[axis] * inner;
  int64_t col = 0;  // where the current input starts within an output row
  for (const Tensor& x : in) {
    int64_t row = x.shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) CopyElements(x, o * row, y, o * out_row + col, row);
    col += row;
  }
}

// --- split ---

std::string CheckNonNegativeInts(const AttrValue& v) {
  for (int64_t d : std::get<std::vector<int64_t>>(v)) {
    if (d < 0) return StrCat("must not be negative, got ", d);
  }
  return "";
}

Type SplitRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() == 0) ctx.Fail("cannot split a scalar (rank 0)");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  const std::vector<int64_t>& split = ctx.attrs().GetInts("split");
  int64_t n = ctx.attrs().GetInt("num_outputs");
  const Dim& d = x.shape[axis];
  std::vector<Dim> sizes;
  if (!split.empty()) {
    if (n != 0 && n != static_cast<int64_t>(split.size()))
      ctx.Fail(StrCat("split ", IntsToString(split), " has ", split.size(),
                      " parts but num_outputs is ", n));
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s >= kHuge - sum) ctx.Fail(StrCat("split ", IntsToString(split), " sums past any dim"));
      sum += s;
      sizes.push_back(s);
    }
    ctx.AssertEqual(d, sum,
                    StrCat("split ", IntsToString(split), " must sum to axis ", axis, " of ",
                           ShapeToString(x.shape)));
  } else {
    if (n == 0) ctx.Fail("give either `split` (the part sizes) or `num_outputs`");
    // ONNX: parts of ceil(d / n), the last one takes what is left.
    Dim chunk = FloorDiv(d + (n - 1), n);
    Dim last = d - chunk * (n - 1);
    if (last.is_const() && last.value() < 0)
      ctx.Fail(StrCat("cannot split axis ", axis, " of ", ShapeToString(x.shape), " into ", n,
                      " parts of ", chunk.ToString()));
    sizes.assign(n - 1, chunk);
    sizes.push_back(last);
  }
  std::vector<Type> fields;
  for (const Dim& s : sizes) {
    Shape shape = x.shape;
    shape[axis] = s;
    fields.push_back(TensorType(std::move(shape), x.dtype));
  }
  return TupleType(std::move(fields));
}

void SplitKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  int64_t outer = Product(x.shape(), 0, axis);
  int64_t inner = Product(x.shape(), axis + 1, x.shape().size());
  int64_t in_row = x.shape()[axis] * inner;
  int64_t col = 0;
  for (Tensor& y : out) {
    int64_t row = y.shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) CopyElements(x, o * in_row + col, y, o * row, row);
    col += row;
  }
}

// --- slice ---

// One axis of a slice after ONNX clamping: elements start, start + step, ... (len of them).
struct SliceAxis {
  Dim start;
  Dim len;
};

// ceil(x / b) for x >= 0 and b > 0.
Dim CeilDiv(const Dim& x, int64_t b) {
  return FloorDiv(x + (b - 1), b);
}

// ONNX Slice on a dim `d` that may be symbolic. The same code serves the kernel (constant d),
// so the type relation and the kernel cannot disagree. Negative indices count from the end;
// starts/ends are clamped to [0, d] (step > 0) or start to [0, d-1] and end to [-1, d-1]
// (step < 0).
SliceAxis ClampSlice(const Dim& d, int64_t start, int64_t end, int64_t step) {
  if (step > 0) {
    auto clamp = [&](int64_t v) -> Dim {
      if (v >= kHuge) return d;
      if (v == 0) return 0;
      if (v > 0) return Min(v, d);
      if (v <= -kHuge) return 0;
      return Max(d + v, 0);
    };
    Dim s = clamp(start), e = clamp(end);
    Dim extent = e - s;
    // Provably non-negative in these cases, which keeps `x[0:n]` free of a max(.., 0).
    if (!(extent.is_const() || s == Dim(0) || e == d)) extent = Max(extent, 0);
    if (extent.is_const() && extent.value() < 0) extent = 0;
    return {s, CeilDiv(extent, std::min(step, kHuge))};
  }
  // Starts clamp to [0, d - 1] and ends to [-1, d - 1]; the end needs no upper clamp below,
  // as d + v <= d - 1 for v <= -1.
  auto clamp_start = [&](int64_t v) -> Dim {
    if (v >= kHuge) return d - 1;
    if (v >= 0) return Min(v, d - 1);
    // The last element: exact for d >= 1, and for d == 0 the slice is empty either way.
    if (v == -1) return d - 1;
    // The upper clamp matters only for d == 0, where it keeps the slice empty.
    return Min(v <= -kHuge ? Dim(0) : Max(d + v, 0), d - 1);
  };
  auto clamp_end = [&](int64_t v) -> Dim {
    if (v >= kHuge) return d - 1;
    if (v >= 0) return Min(v, d - 1);
    if (v <= -kHuge) return -1;
    return Max(d + v, -1);
  };
  Dim s = clamp_start(start), e = clamp_end(end);
  Dim extent = s - e;
  if (!(extent.is_const() || e == Dim(-1) || s == d - 1)) extent = Max(extent, 0);
  if (extent.is_const() && extent.value() < 0) extent = 0;
  int64_t stride = step == std::numeric_limits<int64_t>::min() ? kHuge : std::min(-step, kHuge);
  return {s, CeilDiv(extent, stride)};
}

// The normalized per-axis slice parameters: one entry per sliced axis.
struct SliceSpec {
  std::vector<int> axes;
  std::vector<int64_t> starts, ends, steps;
};

// Validates the attributes against `rank`; `fail` reports an error and does not return.
template <typename FailFn>
SliceSpec ReadSlice(const Attrs& attrs, int rank, FailFn fail) {
  SliceSpec s;
  s.starts = attrs.GetInts("starts");
  s.ends = attrs.GetInts("ends");
  const std::vector<int64_t>& axes = attrs.GetInts("axes");
  s.steps = attrs.GetInts("steps");
  size_t n = s.starts.size();
  if (s.ends.size() != n)
    fail(StrCat("starts ", IntsToString(s.starts), " and ends ", IntsToString(s.ends),
                " differ in length"));
  if (!axes.empty() && axes.size() != n)
    fail(StrCat("axes ", IntsToString(axes), " and starts ", IntsToString(s.starts),
                " differ in length"));
  if (!s.steps.empty() && s.steps.size() != n)
    fail(StrCat("steps ", IntsToString(s.steps), " and starts ", IntsToString(s.starts),
                " differ in length"));
  if (s.steps.empty()) s.steps.assign(n, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (a < -rank || a >= rank) fail(StrCat("axis ", a, " is out of range for rank ", rank));
    int axis = ops::WrapAxis(a, rank);
    if (seen[axis]) fail(StrCat("axis ", a, " appears twice in axes ", IntsToString(axes)));
    seen[axis] = true;
    s.axes.push_back(axis);
    if (s.steps[i] == 0) fail(StrCat("steps ", IntsToString(s.steps), ": a step of 0"));
  }
  return s;
}

Type SliceRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  SliceSpec s = ReadSlice(ctx.attrs(), x.ndim(), [&](const std::string& m) {
    ctx.Fail(StrCat("input ", ShapeToString(x.shape), ": ", m));
  });
  Shape out = x.shape;
  for (size_t i = 0; i < s.axes.size(); ++i) {
    out[s.axes[i]] = ClampSlice(x.shape[s.axes[i]], s.starts[i], s.ends[i], s.steps[i]).len;
  }
  return TensorType(std::move(out), x.dtype);
}

void SliceKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  SliceSpec s = ReadSlice(attrs, x.ndim(), [](const std::string& m) {
    Throw(ErrorCode::kInvalidArgument, "slice: ", m);
  });
  // Unsliced axes read from 0 with step 1.
  std::vector<int64_t> start(x.ndim(), 0), step(x.ndim(), 1);
  for (size_t i = 0; i < s.axes.size(); ++i) {
    int a = s.axes[i];
    start[a] = ClampSlice(x.shape()[a], s.starts[i], s.ends[i], s.steps[i]).start.value();
    step[a] = s.steps[i];
  }
  std::vector<int64_t> strides = x.strides();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    ops::Unravel(i, out[0].shape(), idx);
    int64_t src = 0;
    for (int a = 0; a < x.ndim(); ++a) src += (start[a] + idx[a] * step[a]) * strides[a];
    CopyElements(x, src, out[0], i, 1);
  }
}

// --- gather ---

Type GatherRel(TypeRelContext& ctx) {
  const TensorTypeNode& data = ctx.tensor(0);
  const TensorTypeNode& indices = ctx.tensor(1);
  if (indices.dtype != DType::kInt32 && indices.dtype != DType::kInt64)
    ctx.Fail(StrCat("indices must be i32 or i64, got ", DTypeName(indices.dtype)));
  if (data.ndim() == 0) ctx.Fail("cannot gather from a scalar (rank 0)");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), data.ndim());
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  return TensorType(std::move(out), data.dtype);
}

void GatherKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& data = in[0];
  const Tensor& indices = in[1];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  int64_t outer = Product(data.shape(), 0, axis);
  int64_t dim = data.shape()[axis];
  int64_t inner = Product(data.shape(), axis + 1, data.shape().size());
  int64_t n = indices.numel();
  for (int64_t j = 0; j < n; ++j) {
    int64_t k =
        indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
    int64_t wrapped = k < 0 ? k + dim : k;
    if (wrapped < 0 || wrapped >= dim)
      Throw(ErrorCode::kInvalidArgument, "gather: index ", k, " is out of range for axis ", axis,
            " of size ", dim, " in ", IntsToString(data.shape()));
    for (int64_t o = 0; o < outer; ++o) {
      CopyElements(data, (o * dim + wrapped) * inner, out[0], (o * n + j) * inner, inner);
    }
  }
}

// --- range ---

std::string CheckNonZero(const AttrValue& v) {
  return std::get<double>(v) == 0.0 ? "must not be zero" : "";
}

bool FitsInteger(DType t, double v) {
  return DispatchDType(t, [&]<typename T>() -> bool {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Bounded by kHuge too: INT64_MAX is not exactly a double.
      return v >= static_cast<double>(std::numeric_limits<T>::min()) &&
             v <= static_cast<double>(std::numeric_limits<T>::max()) &&
             std::fabs(v) < static_cast<double>(kHuge);
    } else {
      return true;
    }
  });
}

// The ONNX element count max(ceil((limit - start) / delta), 0); nullopt if not representable.
std::optional<int64_t> RangeLength(double start, double limit, double delta) {
  double n = std::ceil((limit - start) / delta);
  if (!std::isfinite(n) || n >= static_cast<double>(kHuge)) return std::nullopt;
  return n < 0 ? 0 : static_cast<int64_t>(n);
}

Type RangeRel(TypeRelContext& ctx) {
  double start = ctx.attrs().GetFloat("start");
  double limit = ctx.attrs().GetFloat("limit");
  double delta = ctx.attrs().GetFloat("delta");
  DType dtype = ctx.attrs().GetDType("dtype");
  ops::RequireDType(ctx, dtype, ops::DTypeClass::kNumeric, "dtype");
  std::string what = StrCat("range(", FormatDouble(start), ", ", FormatDouble(limit), ", ",
                            FormatDouble(delta), ")");
  std::optional<int64_t> n = RangeLength(start, limit, delta);
  if (!n) ctx.Fail(StrCat(what, " has no representable length"));
  if (IsInteger(dtype) && *n > 0) {
    // Values are computed in double and converted, so they must be whole and fit the dtype;
    // the sequence is monotonic, so checking its ends covers every value.
    double last = start + static_cast<double>(*n - 1) * delta;
    for (double v : {start, delta}) {
      if (std::trunc(v) != v)
        ctx.Fail(StrCat(what, ": ", FormatDouble(v), " is not a whole number, as ",
                        DTypeName(dtype), " needs"));
    }
    for (double v : {start, last}) {
      if (!FitsInteger(dtype, v))
        ctx.Fail(StrCat(what, ": ", FormatDouble(v), " does not fit in ", DTypeName(dtype)));
    }
  }
  return TensorType({*n}, dtype);
}

void RangeKernel(const std::vector<Tensor>&, const Attrs& attrs, std::vector<Tensor>& out) {
  double start = attrs.GetFloat("start");
  double delta = attrs.GetFloat("delta");
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    out[0].SetFromDouble(i, start + static_cast<double>(i) * delta);
  }
}

}  // namespace

void RegisterSelectOps(OpRegistry& r) {
  using V = std::vector<int64_t>;
  r.Register(OpDef{
      .name = "concat",
      .doc = "Joins tensors along `axis`; the other dims must match.",
      .min_inputs = 1,
      .max_inputs = -1,
      .attrs = {{"axis", AttrKind::kInt, std::nullopt}},
      .pattern = OpPattern::kInjective,
      .type_rel = ConcatRel,
      .ref_kernel = ConcatKernel,
  });
  r.Register(OpDef{
      .name = "split",
      .doc = "Splits along `axis` into parts of the sizes in `split`, or `num_outputs` parts of "
             "ceil(dim / num_outputs) with a smaller last one. Returns a tuple.",
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
                {"split", AttrKind::kInts, AttrValue{V{}}, CheckNonNegativeInts},
                {"num_outputs", AttrKind::kInt, AttrValue{int64_t{0}},
                 [](const AttrValue& v) {
                   return std::get<int64_t>(v) < 0 ? std::string("must not be negative") : "";
                 }}},
      .pattern = OpPattern::kInjective,
      .type_rel = SplitRel,
      .ref_kernel = SplitKernel,
  });
  r.Register(OpDef{
      .name = "slice",
      .doc = "ONNX Slice: negative indices count from the end, out-of-range ones are clamped.",
      .attrs = {{"starts", AttrKind::kInts, std::nullopt},
                {"ends", AttrKind::kInts, std::nullopt},
                {"axes", AttrKind::kInts, AttrValue{V{}}},
                {"steps", AttrKind::kInts, AttrValue{V{}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = SliceRel,
      .ref_kernel = SliceKernel,
  });
  r.Register(OpDef{
      .name = "gather",
      .doc = "ONNX Gather: data[:axis] + indices.shape + data[axis+1:]; negative indices wrap.",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = GatherRel,
      .ref_kernel = GatherKernel,
  });
  r.Register(OpDef{
      .name = "range",
      .doc = "start, start + delta, ... up to (excluding) limit.",
      .min_inputs = 0,
      .max_inputs = 0,
      .attrs = {{"start", AttrKind::kFloat, std::nullopt},
                {"limit", AttrKind::kFloat, std::nullopt},
                {"delta", AttrKind::kFloat, std::nullopt, CheckNonZero},
                {"dtype", AttrKind::kDType, AttrValue{DType::kFloat32}}},
      .pattern = OpPattern::kInjective,
      .type_rel = RangeRel,
      .ref_kernel = RangeKernel,
  });
}

}  // namespace kiln
