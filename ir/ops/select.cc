// Ops that pick or assemble parts of tensors: concat, split, slice, gather, gather_elements,
// gather_nd, scatter_elements, scatter_nd, trilu, hardmax, cumsum, range, one_hot, topk,
// einsum, eye_like, constant_of_shape, reverse_sequence. Kernels that only move elements copy
// raw bytes, so every dtype works unchanged.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>

#include "ir/loop/loop.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

// Slice indices at least this large (exporters write INT64_MAX) are past the end of any dim:
// no tensor with a dim that large could be allocated. Also bounds sums of sizes.
constexpr int64_t kHuge = int64_t{1} << 62;

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
  auto [outer, len, inner] = ops::SplitAtAxis(y.shape(), axis);
  int64_t out_row = len * inner;
  int64_t col = 0;  // where the current input starts within an output row
  for (const Tensor& x : in) {
    int64_t row = x.shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) ops::CopyElements(x, o * row, y, o * out_row + col, row);
    col += row;
  }
}

// --- split ---

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
    ctx.AssertAtMost(Dim(0), last, StrCat("the last part of axis ", axis, " split in ", n));
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
  auto [outer, len, inner] = ops::SplitAtAxis(x.shape(), axis);
  int64_t in_row = len * inner;
  int64_t col = 0;
  for (Tensor& y : out) {
    int64_t row = y.shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) ops::CopyElements(x, o * in_row + col, y, o * row, row);
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

// ONNX clamping of one slice index on a dim `d`, written once for every D with Dim's
// arithmetic (Dim itself in the type relation and the kernel, LoopDim in the lowering), so the
// three cannot disagree. Negative indices count from the end. With step > 0, starts and ends
// both clamp to [0, d].
template <typename D>
D ClampForPositiveStep(const D& d, int64_t v) {
  if (v >= kHuge) return d;
  if (v == 0) return D(0);
  if (v > 0) return Min(D(v), d);
  if (v <= -kHuge) return D(0);
  return Max(d + D(v), D(0));
}

// With step < 0, starts clamp to [0, d - 1].
template <typename D>
D ClampStartForNegativeStep(const D& d, int64_t v) {
  if (v >= kHuge) return d - D(1);
  if (v >= 0) return Min(D(v), d - D(1));
  // The last element: exact for d >= 1, and for d == 0 the slice is empty either way.
  if (v == -1) return d - D(1);
  // The upper clamp matters only for d == 0, where it keeps the slice empty.
  return Min(v <= -kHuge ? D(0) : Max(d + D(v), D(0)), d - D(1));
}

// The first element a slice of one axis reads.
template <typename D>
D SliceStart(const D& d, int64_t start, int64_t step) {
  return step > 0 ? ClampForPositiveStep(d, start) : ClampStartForNegativeStep(d, start);
}

// ONNX Slice on a dim `d` that may be symbolic. The same code serves the kernel (constant d),
// so the type relation and the kernel cannot disagree. Starts/ends are clamped to [0, d]
// (step > 0) or start to [0, d-1] and end to [-1, d-1] (step < 0).
SliceAxis ClampSlice(const Dim& d, int64_t start, int64_t end, int64_t step) {
  Dim s = SliceStart(d, start, step);
  if (step > 0) {
    Dim e = ClampForPositiveStep(d, end);
    Dim extent = e - s;
    // Provably non-negative in these cases, which keeps `x[0:n]` free of a max(.., 0).
    if (!(extent.is_const() || s == Dim(0) || e == d)) extent = Max(extent, 0);
    if (extent.is_const() && extent.value() < 0) extent = 0;
    return {s, CeilDiv(extent, std::min(step, kHuge))};
  }
  // Ends clamp to [-1, d - 1]; they need no upper clamp below, as d + v <= d - 1 for v <= -1.
  auto clamp_end = [&](int64_t v) -> Dim {
    if (v >= kHuge) return d - 1;
    if (v >= 0) return Min(v, d - 1);
    if (v <= -kHuge) return -1;
    return Max(d + v, -1);
  };
  Dim e = clamp_end(end);
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
  ops::CopyByIndex(x, out[0], [&](const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (int a = 0; a < x.ndim(); ++a) src += (start[a] + idx[a] * step[a]) * strides[a];
    return src;
  });
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
  auto [outer, dim, inner] = ops::SplitAtAxis(data.shape(), axis);
  int64_t n = indices.numel();
  for (int64_t j = 0; j < n; ++j) {
    int64_t k =
        indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
    int64_t wrapped = k < 0 ? k + dim : k;
    if (wrapped < 0 || wrapped >= dim)
      Throw(ErrorCode::kInvalidArgument, "gather: index ", k, " is out of range for axis ", axis,
            " of size ", dim, " in ", IntsToString(data.shape()));
    for (int64_t o = 0; o < outer; ++o) {
      ops::CopyElements(data, (o * dim + wrapped) * inner, out[0], (o * n + j) * inner, inner);
    }
  }
}

// --- gather_elements ---

// Element j of an i32/i64 index tensor.
int64_t IndexAt(const Tensor& indices, int64_t j) {
  return indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
}

void RequireIndexDType(const TypeRelContext& ctx, DType t) {
  if (t != DType::kInt32 && t != DType::kInt64)
    ctx.Fail(StrCat("indices must be i32 or i64, got ", DTypeName(t)));
}

// The dims of `small` other than `axis` must fit in those of `big` (constants) or equal them
// (symbolic), as ONNX's GatherElements/ScatterElements require.
void CheckFitsOffAxis(TypeRelContext& ctx, const TensorTypeNode& small, const std::string& sname,
                      const TensorTypeNode& big, const std::string& bname, int axis);

// ONNX GatherElements: out has the indices' shape; out[idx] = data[idx with idx[axis] replaced
// by indices[idx]]. ONNX lets the indices be smaller than the data on the other axes; with
// symbolic dims that cannot be decided, so two dims that are not both constant must be equal.
Type GatherElementsRel(TypeRelContext& ctx) {
  const TensorTypeNode& data = ctx.tensor(0);
  const TensorTypeNode& indices = ctx.tensor(1);
  RequireIndexDType(ctx, indices.dtype);
  if (data.ndim() == 0) ctx.Fail("cannot gather from a scalar (rank 0)");
  if (indices.ndim() != data.ndim())
    ctx.Fail(StrCat("indices ", ShapeToString(indices.shape), " must have the rank of data ",
                    ShapeToString(data.shape)));
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), data.ndim());
  CheckFitsOffAxis(ctx, indices, "indices", data, "data", axis);
  return TensorType(indices.shape, data.dtype);
}

void CheckFitsOffAxis(TypeRelContext& ctx, const TensorTypeNode& small, const std::string& sname,
                      const TensorTypeNode& big, const std::string& bname, int axis) {
  for (int d = 0; d < big.ndim(); ++d) {
    if (d == axis) continue;
    const Dim &ds = small.shape[d], &db = big.shape[d];
    if (ds.is_const() && db.is_const()) {
      if (ds.value() > db.value())
        ctx.Fail(StrCat("dim ", d, " of ", sname, " ", ShapeToString(small.shape),
                        " is larger than that of ", bname, " ", ShapeToString(big.shape)));
    } else {
      ctx.AssertEqual(ds, db,
                      StrCat("dim ", d, " of ", sname, " ", ShapeToString(small.shape), " and ",
                             bname, " ", ShapeToString(big.shape)));
    }
  }
}

void GatherElementsKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                          std::vector<Tensor>& out) {
  const Tensor& data = in[0];
  const Tensor& indices = in[1];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  int64_t dim = data.shape()[axis];
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < out[0].numel(); ++j) {
    int64_t k = IndexAt(indices, j);
    int64_t wrapped = k < 0 ? k + dim : k;
    if (wrapped < 0 || wrapped >= dim)
      Throw(ErrorCode::kInvalidArgument, "gather_elements: index ", k, " is out of range for axis ",
            axis, " of size ", dim, " in ", IntsToString(data.shape()));
    ops::Unravel(j, out[0].shape(), idx);
    idx[axis] = wrapped;
    ops::CopyElements(data, ops::Ravel(idx, data.shape()), out[0], j, 1);
  }
}

// --- scatter_elements ---

// How scatters combine an update with the element it lands on. kNone: the update replaces it;
// when several updates land on one element, the last one in row-major order of the indices
// wins (ONNX leaves that case undefined).
enum class ScatterReduction { kNone, kAdd, kMul };

ScatterReduction ReadReduction(const Attrs& attrs) {
  const std::string& r = attrs.GetString("reduction");
  return r == "add"   ? ScatterReduction::kAdd
         : r == "mul" ? ScatterReduction::kMul
                      : ScatterReduction::kNone;
}

std::string CheckReduction(const AttrValue& v) {
  const std::string& r = std::get<std::string>(v);
  return r == "none" || r == "add" || r == "mul"
             ? ""
             : StrCat("must be none, add or mul, got '", r, "'");
}

// Checks the dtypes common to the scatters: updates like data, integer indices, and a
// reduction that the dtype supports.
void CheckScatterDTypes(TypeRelContext& ctx, const TensorTypeNode& data,
                        const TensorTypeNode& indices, const TensorTypeNode& updates) {
  RequireIndexDType(ctx, indices.dtype);
  if (updates.dtype != data.dtype)
    ctx.Fail(StrCat("updates have dtype ", DTypeName(updates.dtype), " but data has ",
                    DTypeName(data.dtype)));
  if (ReadReduction(ctx.attrs()) != ScatterReduction::kNone)
    ops::RequireDType(ctx, data.dtype, ops::DTypeClass::kNumeric,
                      StrCat("data of a ", ctx.attrs().GetString("reduction"), " reduction"));
}

Type ScatterElementsRel(TypeRelContext& ctx) {
  const TensorTypeNode& data = ctx.tensor(0);
  const TensorTypeNode& indices = ctx.tensor(1);
  const TensorTypeNode& updates = ctx.tensor(2);
  CheckScatterDTypes(ctx, data, indices, updates);
  if (data.ndim() == 0) ctx.Fail("cannot scatter into a scalar (rank 0)");
  if (indices.ndim() != data.ndim())
    ctx.Fail(StrCat("indices ", ShapeToString(indices.shape), " must have the rank of data ",
                    ShapeToString(data.shape)));
  if (updates.ndim() != indices.ndim())
    ctx.Fail(StrCat("updates ", ShapeToString(updates.shape), " must have the shape of indices ",
                    ShapeToString(indices.shape)));
  for (int d = 0; d < indices.ndim(); ++d)
    ctx.AssertEqual(updates.shape[d], indices.shape[d],
                    StrCat("updates ", ShapeToString(updates.shape),
                           " must have the shape of indices ", ShapeToString(indices.shape)));
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), data.ndim());
  CheckFitsOffAxis(ctx, indices, "indices", data, "data", axis);
  return ctx.arg(0);
}

// dst[p] = combine(dst[p], src[q]) in the reduction's arithmetic (ComputeT, as the lowering).
void CombineElement(ScatterReduction r, const Tensor& src, int64_t q, Tensor& dst, int64_t p) {
  if (r == ScatterReduction::kNone) return ops::CopyElements(src, q, dst, p, 1);
  DispatchDType(dst.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = ops::ComputeT<T>;
      T* o = dst.data<T>();
      C a = static_cast<C>(o[p]), b = static_cast<C>(src.data<T>()[q]);
      o[p] = static_cast<T>(r == ScatterReduction::kAdd ? static_cast<C>(a + b)
                                                        : static_cast<C>(a * b));
    }
  });
}

void ScatterElementsKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                           std::vector<Tensor>& out) {
  const Tensor& data = in[0];
  const Tensor& indices = in[1];
  const Tensor& updates = in[2];
  ScatterReduction r = ReadReduction(attrs);
  int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  int64_t dim = data.shape()[axis];
  ops::CopyElements(data, 0, out[0], 0, data.numel());
  std::vector<int64_t> idx;
  for (int64_t q = 0; q < indices.numel(); ++q) {
    int64_t k = IndexAt(indices, q);
    int64_t wrapped = k < 0 ? k + dim : k;
    if (wrapped < 0 || wrapped >= dim)
      Throw(ErrorCode::kInvalidArgument, "scatter_elements: index ", k,
            " is out of range for axis ", axis, " of size ", dim, " in ",
            IntsToString(data.shape()));
    ops::Unravel(q, indices.shape(), idx);
    idx[axis] = wrapped;
    CombineElement(r, updates, q, out[0], ops::Ravel(idx, data.shape()));
  }
}

// --- gather_nd, scatter_nd ---

// The last dim of the indices of gather_nd/scatter_nd: how many leading data dims an index
// tuple addresses. It sets the output rank, so it must be a constant.
int64_t IndexTupleLength(TypeRelContext& ctx, const TensorTypeNode& indices) {
  if (indices.ndim() == 0) ctx.Fail("indices must have rank 1 or more, got a scalar");
  const Dim& m = indices.shape.back();
  if (!m.is_const())
    ctx.Fail(
        StrCat("the last dim of indices ", ShapeToString(indices.shape), " must be a constant"));
  return m.value();
}

// The data offset of the index tuple at `tuple` (m integers from indices, starting at element
// `first`), each wrapped against dims[from + t]; throws naming `op` when one is out of range.
// Returns the row-major number of the addressed element among dims[from, from + m).
int64_t TupleOffset(const char* op, const Tensor& indices, int64_t first, int64_t m,
                    const std::vector<int64_t>& dims, int from) {
  int64_t off = 0;
  for (int64_t t = 0; t < m; ++t) {
    int64_t dim = dims[from + t];
    int64_t k = IndexAt(indices, first + t);
    int64_t wrapped = k < 0 ? k + dim : k;
    if (wrapped < 0 || wrapped >= dim)
      Throw(ErrorCode::kInvalidArgument, op, ": index ", k, " is out of range for axis ", from + t,
            " of size ", dim, " in ", IntsToString(dims));
    off = off * dim + wrapped;
  }
  return off;
}

Type GatherNdRel(TypeRelContext& ctx) {
  const TensorTypeNode& data = ctx.tensor(0);
  const TensorTypeNode& indices = ctx.tensor(1);
  RequireIndexDType(ctx, indices.dtype);
  int64_t m = IndexTupleLength(ctx, indices);
  int64_t b = ctx.attrs().GetInt("batch_dims");
  if (b >= std::min(indices.ndim(), data.ndim()))
    ctx.Fail(StrCat("batch_dims ", b, " must be less than the ranks of data ",
                    ShapeToString(data.shape), " and indices ", ShapeToString(indices.shape)));
  if (m < 1 || b + m > data.ndim())
    ctx.Fail(StrCat("index tuples of length ", m, " (the last dim of indices ",
                    ShapeToString(indices.shape), ") must be 1 to rank - batch_dims of data ",
                    ShapeToString(data.shape)));
  for (int64_t d = 0; d < b; ++d)
    ctx.AssertEqual(indices.shape[d], data.shape[d],
                    StrCat("batch dim ", d, " of indices ", ShapeToString(indices.shape),
                           " and data ", ShapeToString(data.shape)));
  Shape out(indices.shape.begin(), indices.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + m, data.shape.end());
  return TensorType(std::move(out), data.dtype);
}

void GatherNdKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& data = in[0];
  const Tensor& indices = in[1];
  const int b = static_cast<int>(attrs.GetInt("batch_dims"));
  const int64_t m = indices.shape().back();
  // Per batch: `tuples` index tuples, each picking a slice of `slice` elements out of `per`.
  int64_t batches = 1, slice = 1;
  for (int d = 0; d < b; ++d) batches *= data.shape()[d];
  for (int d = b + static_cast<int>(m); d < data.ndim(); ++d) slice *= data.shape()[d];
  int64_t per = batches == 0 ? 0 : data.numel() / batches;
  int64_t tuples = batches == 0 ? 0 : indices.numel() / m / batches;
  for (int64_t g = 0; g < batches; ++g) {
    for (int64_t j = 0; j < tuples; ++j) {
      int64_t row = g * tuples + j;
      int64_t off = TupleOffset("gather_nd", indices, row * m, m, data.shape(), b);
      ops::CopyElements(data, g * per + off * slice, out[0], row * slice, slice);
    }
  }
}

Type ScatterNdRel(TypeRelContext& ctx) {
  const TensorTypeNode& data = ctx.tensor(0);
  const TensorTypeNode& indices = ctx.tensor(1);
  const TensorTypeNode& updates = ctx.tensor(2);
  CheckScatterDTypes(ctx, data, indices, updates);
  int64_t m = IndexTupleLength(ctx, indices);
  if (m < 1 || m > data.ndim())
    ctx.Fail(StrCat("index tuples of length ", m, " (the last dim of indices ",
                    ShapeToString(indices.shape), ") must be 1 to the rank of data ",
                    ShapeToString(data.shape)));
  Shape want(indices.shape.begin(), indices.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + m, data.shape.end());
  std::string what = StrCat("updates ", ShapeToString(updates.shape), " must have shape ",
                            ShapeToString(want), " (indices[:-1] + data[m:])");
  if (updates.ndim() != static_cast<int>(want.size())) ctx.Fail(what);
  for (size_t d = 0; d < want.size(); ++d) ctx.AssertEqual(updates.shape[d], want[d], what);
  return ctx.arg(0);
}

void ScatterNdKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& data = in[0];
  const Tensor& indices = in[1];
  const Tensor& updates = in[2];
  ScatterReduction r = ReadReduction(attrs);
  const int64_t m = indices.shape().back();
  int64_t slice = 1;
  for (int d = static_cast<int>(m); d < data.ndim(); ++d) slice *= data.shape()[d];
  ops::CopyElements(data, 0, out[0], 0, data.numel());
  int64_t n = indices.numel() / m;
  for (int64_t j = 0; j < n; ++j) {
    int64_t off = TupleOffset("scatter_nd", indices, j * m, m, data.shape(), 0);
    for (int64_t e = 0; e < slice; ++e)
      CombineElement(r, updates, j * slice + e, out[0], off * slice + e);
  }
}

// --- trilu ---

Type TriluRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() < 2) ctx.Fail(StrCat("input ", ShapeToString(x.shape), " must have rank 2 or more"));
  if (ctx.num_args() == 2) {
    // k computed at run time (ONNX passes k as an input; a constant one becomes the attribute).
    const TensorTypeNode& k = ctx.tensor(1);
    if (k.dtype != DType::kInt32 && k.dtype != DType::kInt64)
      ctx.Fail(StrCat("k (input 1) must be i32 or i64, got ", DTypeName(k.dtype)));
    for (const Dim& d : k.shape) {
      if (!(d.is_const() && d.value() == 1))
        ctx.Fail(StrCat("k (input 1) must hold one element, got ", ShapeToString(k.shape)));
    }
    if (ctx.attrs().GetInt("k") != 0)
      ctx.Fail("give k either as the attribute or as input 1, not both");
  }
  return ctx.arg(0);
}

// Whether trilu keeps element (row i, column j): on or above diagonal k (upper), or on or
// below it (lower). Diagonal k holds the elements with j - i == k.
bool TriluKeeps(bool upper, int64_t k, int64_t i, int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

void TriluKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  bool upper = attrs.GetBool("upper");
  int64_t k = in.size() == 2 ? IndexAt(in[1], 0) : attrs.GetInt("k");
  int r = x.ndim();
  int64_t rows = x.shape()[r - 2], cols = x.shape()[r - 1];
  size_t es = static_cast<size_t>(DTypeSize(x.dtype()));
  for (int64_t e = 0; e < y.numel(); ++e) {
    int64_t i = (e / cols) % rows, j = e % cols;
    if (TriluKeeps(upper, k, i, j)) {
      ops::CopyElements(x, e, y, e, 1);
    } else {
      // All-zero bytes are zero (or false) in every dtype.
      std::memset(static_cast<char*>(y.raw_data()) + e * es, 0, es);
    }
  }
}

// --- hardmax ---

Type HardmaxRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kFloat);
  if (x.ndim() == 0) ctx.Fail("input must have rank 1 or more, got a scalar");
  ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  return ctx.arg(0);
}

// 1 at the first maximum along the axis, 0 elsewhere. NaNs are never the maximum; a row of
// NaNs only is all 0 (the lowering computes the same: the max over non-NaN values, then the
// first element equal to it).
void HardmaxKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  auto [outer, len, inner] = ops::SplitAtAxis(x.shape(), axis);
  for (int64_t e = 0; e < out[0].numel(); ++e) out[0].SetFromDouble(e, 0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = -1;
      double best_v = 0;
      for (int64_t k = 0; k < len; ++k) {
        double v = x.GetAsDouble((o * len + k) * inner + i);
        if (std::isnan(v)) continue;
        if (best < 0 || v > best_v) best = k, best_v = v;
      }
      if (best >= 0) out[0].SetFromDouble((o * len + best) * inner + i, 1);
    }
  }
}

// --- cumsum ---

Type CumsumRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kNumeric);
  if (x.ndim() == 0) ctx.Fail("input must have rank 1 or more, got a scalar");
  ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  return ctx.arg(0);
}

// Running sums along the axis, in ComputeT (f32 for the 16-bit floats) and in the order of the
// axis (or its reverse); exclusive sums leave out the element itself.
void CumsumKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  bool exclusive = attrs.GetBool("exclusive"), reverse = attrs.GetBool("reverse");
  auto [outer, len, inner] = ops::SplitAtAxis(x.shape(), axis);
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = ops::ComputeT<T>;
      const T* src = x.data<T>();
      T* dst = out[0].data<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          C acc = C(0);
          for (int64_t n = 0; n < len; ++n) {
            int64_t k = reverse ? len - 1 - n : n;
            int64_t e = (o * len + k) * inner + i;
            C v = static_cast<C>(src[e]);
            if (exclusive) {
              dst[e] = static_cast<T>(acc);
              acc = static_cast<C>(acc + v);
            } else {
              acc = static_cast<C>(acc + v);
              dst[e] = static_cast<T>(acc);
            }
          }
        }
      }
    }
  });
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

// --- one_hot ---

// An index of any numeric dtype as an integer. Floats convert as kiln's cast does (truncated
// toward zero, saturated, NaN -> 0), which is what the lowering's loop::Cast computes; i64 is
// read exactly (a double would round indices past 2^53).
int64_t IntegerValue(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[i];
  double v = t.GetAsDouble(i);
  if (std::isnan(v)) return 0;
  if (v <= -0x1p63) return std::numeric_limits<int64_t>::min();
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

std::string CheckPositive(const AttrValue& v) {
  return std::get<int64_t>(v) < 1 ? "must be positive" : "";
}

std::string CheckNonNegative(const AttrValue& v) {
  return std::get<int64_t>(v) < 0 ? "must not be negative" : "";
}

Type OneHotRel(TypeRelContext& ctx) {
  const TensorTypeNode& indices = ctx.tensor(0);
  const TensorTypeNode& values = ctx.tensor(1);
  ops::RequireDType(ctx, indices.dtype, ops::DTypeClass::kNumeric, "indices");
  std::string what =
      StrCat("values ", ShapeToString(values.shape), " must hold two elements, [off, on]");
  if (values.ndim() != 1) ctx.Fail(what);
  ctx.AssertEqual(values.shape[0], 2, what);
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), indices.ndim() + 1);
  Shape out = indices.shape;
  out.insert(out.begin() + axis, Dim(ctx.attrs().GetInt("depth")));
  return TensorType(std::move(out), values.dtype);
}

// out[.., d, ..] (d on `axis`) is on where the index at the other coordinates names class d:
// a negative index counts from depth, and one outside [-depth, depth) names none.
void OneHotKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& indices = in[0];
  const Tensor& values = in[1];
  Tensor& y = out[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), y.ndim());
  const int64_t depth = attrs.GetInt("depth");
  auto [outer, len, inner] = ops::SplitAtAxis(y.shape(), axis);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t k = IntegerValue(indices, o * inner + i);
      if (k < 0) k += depth;  // no overflow: depth > 0
      for (int64_t d = 0; d < len; ++d)
        ops::CopyElements(values, k == d ? 1 : 0, y, (o * len + d) * inner + i, 1);
    }
  }
}

// --- topk ---

Type TopKRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kNumeric);
  if (x.ndim() == 0) ctx.Fail("input must have rank 1 or more, got a scalar");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  int64_t k = ctx.attrs().GetInt("k");
  // With a symbolic axis the check waits for specialization, which binds the shapes and
  // runs this relation again.
  const Dim& n = x.shape[axis];
  if (n.is_const() && k > n.value())
    ctx.Fail(
        StrCat("k = ", k, " is larger than axis ", axis, " of input ", ShapeToString(x.shape)));
  ctx.AssertAtMost(Dim(k), n, StrCat("k (at most the length of axis ", axis, ")"));
  Shape out = x.shape;
  out[axis] = k;
  return TupleType({TensorType(out, x.dtype), TensorType(out, DType::kInt64)});
}

// TopK's order: u before v when it is larger (largest) or smaller. NaN counts as larger than
// every number (as PyTorch's topk has it), so the order is a strict weak order, and elements
// equal in it go by index (ONNX: the lower index first).
template <typename C>
bool TopKBefore(C u, C v, bool largest) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool nu = std::isnan(u), nv = std::isnan(v);
    if (nu || nv) return largest ? nu && !nv : !nu && nv;
  }
  return largest ? u > v : u < v;
}

// A stable sort of each line by TopKBefore; its first k elements and their positions. The
// output is always sorted, which `sorted = false` allows.
void TopKKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const int64_t k = attrs.GetInt("k");
  const bool largest = attrs.GetBool("largest");
  auto [outer, len, inner] = ops::SplitAtAxis(x.shape(), axis);
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = ops::ComputeT<T>;
      const T* src = x.data<T>();
      T* values = out[0].data<T>();
      int64_t* indices = out[1].data<int64_t>();
      std::vector<int64_t> order(len);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t p) { return static_cast<C>(src[(o * len + p) * inner + i]); };
          for (int64_t p = 0; p < len; ++p) order[p] = p;
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return TopKBefore<C>(at(a), at(b), largest);
          });
          for (int64_t j = 0; j < k; ++j) {
            int64_t e = (o * k + j) * inner + i;
            values[e] = src[(o * len + order[j]) * inner + i];
            indices[e] = order[j];
          }
        }
      }
    }
  });
}

// --- einsum ---

// An einsum equation resolved against the ranks of its operands. Each subscript letter is a
// label, and so is each dim that an ellipsis stands for; operand and output dims are lists of
// labels. The same parse serves the relation, the reference kernel and the lowering.
struct EinsumSpec {
  // Labels [0, ellipsis_dims) are the dims ellipses stand for, aligned from the right across
  // operands and broadcast as NumPy does; label ellipsis_dims + c is the letter letters[c].
  int ellipsis_dims = 0;
  std::string letters;
  std::vector<std::vector<int>> operands;
  std::vector<int> output;
  std::vector<int> reduced;  // the labels not in the output, summed over
  int num_labels() const { return ellipsis_dims + static_cast<int>(letters.size()); }
  bool IsEllipsis(int label) const { return label < ellipsis_dims; }
  std::string LabelName(int label) const {
    return IsEllipsis(label) ? StrCat("ellipsis dim ", label)
                             : StrCat("letter '", letters.substr(label - ellipsis_dims, 1), "'");
  }
};

// One term of an equation: its letters, and where among them its ellipsis is (-1: none).
struct EinsumTerm {
  std::string letters;
  int ellipsis_at = -1;
};

// Parses `equation` for operands of `ranks`: explicit (`ij,jk->ik`) or implicit output (the
// letters that occur once, alphabetically, after the ellipsis dims), spaces ignored. `fail`
// reports an error, naming the equation, and does not return.
template <typename FailFn>
EinsumSpec ParseEinsum(const std::string& equation, const std::vector<int>& ranks,
                       FailFn fail_with) {
  auto fail = [&](const std::string& m) { fail_with(StrCat("equation \"", equation, "\": ", m)); };
  std::string eq;
  for (char ch : equation)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  auto parse_term = [&](const std::string& text, const std::string& what) {
    EinsumTerm t;
    for (size_t i = 0; i < text.size();) {
      if (std::isalpha(static_cast<unsigned char>(text[i]))) {
        t.letters += text[i++];
      } else if (text.compare(i, 3, "...") == 0) {
        if (t.ellipsis_at >= 0) fail(StrCat(what, " has two ellipses"));
        t.ellipsis_at = static_cast<int>(t.letters.size());
        i += 3;
      } else {
        fail(StrCat(what, " has '", text.substr(i, 1),
                    "', which is neither a letter nor part of '...'"));
      }
    }
    return t;
  };
  std::vector<std::string> parts(1);
  for (char ch : lhs) {
    if (ch == ',')
      parts.emplace_back();
    else
      parts.back() += ch;
  }
  if (parts.size() != ranks.size())
    fail(StrCat("has ", parts.size(), " operand term", parts.size() == 1 ? "" : "s",
                " but the op has ", ranks.size(), " input", ranks.size() == 1 ? "" : "s"));
  EinsumSpec s;
  std::vector<EinsumTerm> terms;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string what = StrCat("operand ", i, " \"", parts[i], "\"");
    terms.push_back(parse_term(parts[i], what));
    const int n = static_cast<int>(terms[i].letters.size());
    const bool ellipsis = terms[i].ellipsis_at >= 0;
    if (ellipsis ? n > ranks[i] : n != ranks[i])
      fail(StrCat(what, " has ", n, " subscript", n == 1 ? "" : "s", " but input ", i, " has rank ",
                  ranks[i]));
    if (ellipsis) s.ellipsis_dims = std::max(s.ellipsis_dims, ranks[i] - n);
  }
  // Letters become labels in order of first occurrence; the ellipsis labels come first.
  std::map<char, int> count;
  auto label_of = [&](char ch) {
    size_t p = s.letters.find(ch);
    if (p == std::string::npos) {
      p = s.letters.size();
      s.letters += ch;
    }
    return s.ellipsis_dims + static_cast<int>(p);
  };
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const EinsumTerm& t = terms[i];
    std::vector<int>& labels = s.operands.emplace_back();
    const int n = static_cast<int>(t.letters.size());
    for (int j = 0; j <= n; ++j) {
      if (j == t.ellipsis_at) {
        any_ellipsis = true;
        for (int e = s.ellipsis_dims - (ranks[i] - n); e < s.ellipsis_dims; ++e)
          labels.push_back(e);
      }
      if (j < n) {
        labels.push_back(label_of(t.letters[j]));
        ++count[t.letters[j]];
      }
    }
  }
  std::vector<bool> in_output(s.num_labels(), false);
  auto add_output = [&](int label) {
    s.output.push_back(label);
    in_output[label] = true;
  };
  if (explicit_output) {
    EinsumTerm t = parse_term(rhs, StrCat("the output \"", rhs, "\""));
    const int n = static_cast<int>(t.letters.size());
    if (t.ellipsis_at < 0 && s.ellipsis_dims > 0)
      fail(StrCat("the operands' ellipses stand for ", s.ellipsis_dims,
                  " dims, so the output needs '...' too"));
    for (int j = 0; j <= n; ++j) {
      if (j == t.ellipsis_at)
        for (int e = 0; e < s.ellipsis_dims; ++e) add_output(e);
      if (j == n) break;
      const char ch = t.letters[j];
      if (!count.count(ch))
        fail(StrCat("output letter '", std::string(1, ch), "' is in no operand"));
      const int label = label_of(ch);
      if (in_output[label])
        fail(StrCat("letter '", std::string(1, ch), "' appears twice in the output"));
      add_output(label);
    }
  } else {
    if (any_ellipsis)
      for (int e = 0; e < s.ellipsis_dims; ++e) add_output(e);
    for (const auto& [ch, n] : count)  // std::map: alphabetical (ASCII) order
      if (n == 1) add_output(label_of(ch));
  }
  for (int l = 0; l < s.num_labels(); ++l)
    if (!in_output[l]) s.reduced.push_back(l);
  return s;
}

Type EinsumRel(TypeRelContext& ctx) {
  const std::string& equation = ctx.attrs().GetString("equation");
  std::vector<int> ranks;
  const TensorTypeNode& first = ctx.tensor(0);
  ops::RequireDType(ctx, first.dtype, ops::DTypeClass::kNumeric);
  for (int i = 0; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    if (t.dtype != first.dtype)
      ctx.Fail(StrCat("input ", i, " has dtype ", DTypeName(t.dtype), " but input 0 has ",
                      DTypeName(first.dtype)));
    ranks.push_back(t.ndim());
  }
  EinsumSpec s = ParseEinsum(equation, ranks, [&](const std::string& m) { ctx.Fail(m); });
  // The size of each label: a letter's dims must agree; ellipsis dims broadcast.
  std::vector<std::optional<Dim>> size(s.num_labels());
  std::vector<int> first_operand(s.num_labels(), -1);
  for (int i = 0; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    for (int d = 0; d < t.ndim(); ++d) {
      const int l = s.operands[i][d];
      if (!size[l]) {
        size[l] = t.shape[d];
        first_operand[l] = i;
      } else if (s.IsEllipsis(l)) {
        size[l] = ctx.BroadcastDim(
            *size[l], t.shape[d],
            StrCat("equation \"", equation, "\": the dims under '...' do not broadcast"));
      } else {
        const TensorTypeNode& f = ctx.tensor(first_operand[l]);
        ctx.AssertEqual(
            *size[l], t.shape[d],
            StrCat("equation \"", equation, "\": ", s.LabelName(l),
                   " has different sizes in input ", first_operand[l], " ", ShapeToString(f.shape),
                   " and input ", i, " ", ShapeToString(t.shape)));
      }
    }
  }
  Shape out;
  for (int l : s.output) out.push_back(*size[l]);
  return TensorType(std::move(out), first.dtype);
}

// The accumulator of a sum of products over T: double for floats, wrapping 64-bit for
// integers (as matmul's reference).
template <typename T>
using EinsumAcc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

// For every output element, the sum over the reduced labels of the product of the operands,
// each read at the labels' values (a dim of size 1 under an ellipsis broadcasts).
template <typename T>
void EinsumTyped(const EinsumSpec& s, const std::vector<Tensor>& in,
                 const std::vector<int64_t>& size, Tensor& y) {
  using Acc = EinsumAcc<T>;
  auto to_acc = [](T v) -> Acc {
    if constexpr (std::is_integral_v<T>)
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    else
      return static_cast<double>(static_cast<ops::ComputeT<T>>(v));
  };
  const int labels = s.num_labels();
  // stride[i][l]: how far operand i's offset moves per step of label l (a label repeated in
  // one operand, a diagonal, adds up its dims' strides; a broadcast dim moves nothing).
  std::vector<std::vector<int64_t>> stride(in.size(), std::vector<int64_t>(labels, 0));
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> st = in[i].strides();
    for (int d = 0; d < in[i].ndim(); ++d)
      if (in[i].shape()[d] != 1) stride[i][s.operands[i][d]] += st[d];
  }
  std::vector<int64_t> out_sizes, red_sizes;
  for (int l : s.output) out_sizes.push_back(size[l]);
  int64_t reductions = 1;
  for (int l : s.reduced) {
    red_sizes.push_back(size[l]);
    reductions *= size[l];
  }
  std::vector<int64_t> value(labels, 0), out_idx, red_idx;
  T* dst = y.data<T>();
  for (int64_t e = 0; e < y.numel(); ++e) {
    ops::Unravel(e, out_sizes, out_idx);
    for (size_t j = 0; j < s.output.size(); ++j) value[s.output[j]] = out_idx[j];
    Acc acc{0};
    for (int64_t r = 0; r < reductions; ++r) {
      ops::Unravel(r, red_sizes, red_idx);
      for (size_t j = 0; j < s.reduced.size(); ++j) value[s.reduced[j]] = red_idx[j];
      Acc product{1};
      for (size_t i = 0; i < in.size(); ++i) {
        int64_t off = 0;
        for (int l = 0; l < labels; ++l) off += value[l] * stride[i][l];
        product *= to_acc(in[i].data<T>()[off]);
      }
      acc += product;
    }
    if constexpr (std::is_integral_v<T>)
      dst[e] = static_cast<T>(static_cast<int64_t>(acc));
    else if constexpr (ops::kIsHalf<T>)
      dst[e] = T(static_cast<float>(acc));
    else
      dst[e] = static_cast<T>(acc);
  }
}

// The concrete size of each label (the relation has checked that they agree or broadcast).
std::vector<int64_t> EinsumSizes(const EinsumSpec& s,
                                 const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> size(s.num_labels(), 1);
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const int l = s.operands[i][d];
      if (shapes[i][d] != 1) size[l] = shapes[i][d];
    }
  return size;
}

std::vector<int> TensorRanks(const std::vector<Tensor>& in) {
  std::vector<int> ranks;
  for (const Tensor& t : in) ranks.push_back(t.ndim());
  return ranks;
}

void EinsumKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  EinsumSpec s =
      ParseEinsum(attrs.GetString("equation"), TensorRanks(in),
                  [](const std::string& m) { Throw(ErrorCode::kInvalidArgument, "einsum: ", m); });
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  std::vector<int64_t> size = EinsumSizes(s, shapes);
  DispatchDType(out[0].dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) EinsumTyped<T>(s, in, size, out[0]);
  });
}

// --- eye_like ---

Type EyeLikeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() != 2) ctx.Fail(StrCat("input ", ShapeToString(x.shape), " must be 2-D"));
  return TensorType(x.shape, ctx.attrs().GetDType("dtype"));
}

// 1 on diagonal k (the elements with column - row == k), 0 elsewhere.
void EyeLikeKernel(const std::vector<Tensor>&, const Attrs& attrs, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  const int64_t k = attrs.GetInt("k");
  const int64_t cols = y.shape()[1];
  for (int64_t e = 0; e < y.numel(); ++e) y.SetFromDouble(e, e % cols - e / cols == k ? 1 : 0);
}

// --- constant_of_shape ---

Type ConstantOfShapeRel(TypeRelContext& ctx) {
  const std::vector<int64_t>& shape = ctx.attrs().GetInts("shape");
  const DType dtype = ctx.attrs().GetDType("dtype");
  const double value = ctx.attrs().GetFloat("value");
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > kHuge / d)
      ctx.Fail(StrCat("shape ", IntsToString(shape), " has too many elements"));
    numel *= d;
  }
  if (IsInteger(dtype) && (std::trunc(value) != value || !FitsInteger(dtype, value)))
    ctx.Fail(StrCat("value ", FormatDouble(value), " is not representable in ", DTypeName(dtype)));
  return TensorType(ShapeFromInts(shape), dtype);
}

void ConstantOfShapeKernel(const std::vector<Tensor>&, const Attrs& attrs,
                           std::vector<Tensor>& out) {
  const double value = attrs.GetFloat("value");
  for (int64_t e = 0; e < out[0].numel(); ++e) out[0].SetFromDouble(e, value);
}

// --- reverse_sequence ---

Type ReverseSequenceRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& lens = ctx.tensor(1);
  if (x.ndim() < 2) ctx.Fail(StrCat("input ", ShapeToString(x.shape), " must have rank 2 or more"));
  int batch = ctx.NormalizeAxis(ctx.attrs().GetInt("batch_axis"), x.ndim(), "batch_axis");
  int time = ctx.NormalizeAxis(ctx.attrs().GetInt("time_axis"), x.ndim(), "time_axis");
  if (batch == time) ctx.Fail(StrCat("batch_axis and time_axis are both axis ", batch));
  if (lens.dtype != DType::kInt32 && lens.dtype != DType::kInt64)
    ctx.Fail(StrCat("sequence_lens must be i32 or i64, got ", DTypeName(lens.dtype)));
  std::string what = StrCat("sequence_lens ", ShapeToString(lens.shape),
                            " must hold one length per batch entry (axis ", batch, " of input ",
                            ShapeToString(x.shape), ")");
  if (lens.ndim() != 1) ctx.Fail(what);
  ctx.AssertEqual(lens.shape[0], x.shape[batch], what);
  return ctx.arg(0);
}

// The first len elements along the time axis reversed, per batch entry, with len clamped into
// [0, time steps] (the lowering clamps alike, so the two agree on any length).
void ReverseSequenceKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                           std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const Tensor& lens = in[1];
  const int batch = ops::WrapAxis(attrs.GetInt("batch_axis"), x.ndim());
  const int time = ops::WrapAxis(attrs.GetInt("time_axis"), x.ndim());
  const int64_t steps = x.shape()[time];
  std::vector<int64_t> strides = x.strides();
  ops::CopyByIndex(x, out[0], [&](const std::vector<int64_t>& idx) {
    int64_t len = std::clamp<int64_t>(IndexAt(lens, idx[batch]), 0, steps);
    int64_t t = idx[time] < len ? len - 1 - idx[time] : idx[time];
    int64_t src = 0;
    for (int a = 0; a < x.ndim(); ++a) src += (a == time ? t : idx[a]) * strides[a];
    return src;
  });
}

// ---- Lowering ----

std::vector<loop::Expr> OutShape(LowerContext& ctx, const Type& t) {
  return ctx.ShapeExpr(AsTensor(t)->shape);
}

loop::Expr Less(const loop::Expr& a, const loop::Expr& b) {
  return loop::MakeBinary(loop::BinaryOp::kLT, a, b);
}

loop::Expr IsZero(const loop::Expr& extent) {
  return loop::MakeBinary(loop::BinaryOp::kEQ, extent, loop::IntImm(0));
}

// Whether two extents are certainly equal: equal constants, or the same expression.
bool SameExtent(const loop::Expr& a, const loop::Expr& b) {
  int64_t x, y;
  if (loop::IsConstInt(a, &x) && loop::IsConstInt(b, &y)) return x == y;
  return loop::StructuralEqual(a, b);
}

// The index of a read from a tensor that may be empty at run time (a symbolic extent that is
// 0): then no index is in range, so every dim reads 0 -- the first element, for which every
// buffer has storage even when empty (Tensor::Empty allocates at least 64 bytes). Zeroing only
// the other dims would not do: with inner dims, an index 0 on the empty axis still reaches up
// to their size past the start. Costs a select per dim, so only symbolic extents get it.
std::vector<loop::Expr> FirstElementIfEmpty(const loop::Expr& extent, std::vector<loop::Expr> idx) {
  if (loop::IsConstInt(extent)) return idx;
  loop::Expr empty = IsZero(extent);
  for (loop::Expr& i : idx) i = loop::Select(empty, loop::IntImm(0), i);
  return idx;
}

// concat: the output index along `axis` picks the part whose range holds it, as a chain of
// selects. Every arm of a select is evaluated (vector code loads all lanes of every arm), so
// each part is read at its own index clamped into its range: the untaken arms read in bounds.
std::vector<LTensor> LowerConcat(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), static_cast<int>(shape.size()));
  // Parts of constant extent 0 hold nothing and are never read.
  std::vector<LTensor> parts;
  std::vector<loop::Expr> begins;
  loop::Expr end = loop::IntImm(0);
  for (const LTensor& t : in) {
    int64_t c;
    if (loop::IsConstInt(t.shape[axis], &c) && c == 0) continue;
    parts.push_back(t);
    begins.push_back(end);
    end = loop::Add(end, t.shape[axis]);
  }
  // When every part is empty along the axis, so is the output, which is then never read.
  if (parts.empty()) return {LTensor{in[0].dtype, shape, in[0].at}};
  auto at = [parts, begins, axis](const std::vector<loop::Expr>& idx) {
    const size_t n = parts.size();
    loop::Expr value;
    for (size_t j = n; j-- > 0;) {
      const loop::Expr& extent = parts[j].shape[axis];
      loop::Expr local = loop::Sub(idx[axis], begins[j]);
      // Above its range only when a later part is taken; below only when an earlier one is.
      if (j + 1 < n) local = loop::Min(local, loop::Sub(extent, loop::IntImm(1)));
      if (j > 0) local = loop::Max(local, loop::IntImm(0));
      std::vector<loop::Expr> part_idx = idx;
      part_idx[axis] = local;
      loop::Expr v = parts[j].at(FirstElementIfEmpty(extent, std::move(part_idx)));
      value = value ? loop::Select(Less(idx[axis], begins[j + 1]), v, value) : v;
    }
    return value;
  };
  return {LTensor{in[0].dtype, shape, at}};
}

// split: output j reads the input shifted by the sizes of the outputs before it.
std::vector<LTensor> LowerSplit(LowerContext& ctx, const std::vector<LTensor>& in,
                                const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  std::vector<LTensor> outs;
  loop::Expr begin = loop::IntImm(0);
  for (const Type& t : out_types) {
    std::vector<loop::Expr> shape = OutShape(ctx, t);
    outs.push_back(LTensor{x.dtype, shape, [x, axis, begin](const std::vector<loop::Expr>& idx) {
                             std::vector<loop::Expr> in_idx = idx;
                             in_idx[axis] = loop::Add(idx[axis], begin);
                             return x.at(in_idx);
                           }});
    begin = loop::Add(begin, shape[axis]);
  }
  return outs;
}

// A dim as a loop expression, with the arithmetic SliceStart needs, so the lowering computes
// slice starts with the code the type relation and the reference kernel use.
struct LoopDim {
  loop::Expr e;
  explicit LoopDim(int64_t v) : e(loop::IntImm(v)) {}
  explicit LoopDim(loop::Expr x) : e(std::move(x)) {}
  friend LoopDim operator+(const LoopDim& a, const LoopDim& b) {
    return LoopDim(loop::Add(a.e, b.e));
  }
  friend LoopDim operator-(const LoopDim& a, const LoopDim& b) {
    return LoopDim(loop::Sub(a.e, b.e));
  }
  friend LoopDim Min(const LoopDim& a, const LoopDim& b) { return LoopDim(loop::Min(a.e, b.e)); }
  friend LoopDim Max(const LoopDim& a, const LoopDim& b) { return LoopDim(loop::Max(a.e, b.e)); }
};

// slice: output index i of a sliced axis reads start + i * step.
std::vector<LTensor> LowerSlice(LowerContext& ctx, const std::vector<LTensor>& in,
                                const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  SliceSpec s = ReadSlice(attrs, x.ndim(), [](const std::string& m) {
    Throw(ErrorCode::kInvalidArgument, "slice: ", m);
  });
  std::vector<loop::Expr> start(x.ndim(), loop::IntImm(0));
  std::vector<int64_t> step(x.ndim(), 1);
  for (size_t i = 0; i < s.axes.size(); ++i) {
    int a = s.axes[i];
    start[a] = SliceStart(LoopDim(x.shape[a]), s.starts[i], s.steps[i]).e;
    step[a] = s.steps[i];
  }
  return {LTensor{x.dtype, OutShape(ctx, out_types[0]),
                  [x, start, step](const std::vector<loop::Expr>& idx) {
                    std::vector<loop::Expr> in_idx(idx.size());
                    for (size_t a = 0; a < idx.size(); ++a)
                      in_idx[a] = loop::Add(start[a], loop::Mul(idx[a], loop::IntImm(step[a])));
                    return x.at(in_idx);
                  }}};
}

// gather: reads the index, wraps a negative one, then reads the data. The reference kernel
// rejects an index outside [-dim, dim); a compiled kernel cannot throw, so it clamps the
// wrapped index into [0, dim - 1] and reads that element instead of reading out of bounds.
// With dim == 0 every index is out of range and there is no element to clamp to: a constant
// 0 gives zeros without reading, a symbolic one reads the first element (FirstElementIfEmpty).
std::vector<LTensor> LowerGather(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor data = in[0], indices = in[1];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  const int rank = indices.ndim();
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  int64_t c;
  if (loop::IsConstInt(data.shape[axis], &c) && c == 0) {
    loop::Expr zero = loop::MakeConst(0, data.dtype);
    return {LTensor{data.dtype, shape, [zero](const std::vector<loop::Expr>&) { return zero; }}};
  }
  auto at = [data, indices, axis, rank](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> i_idx(idx.begin() + axis, idx.begin() + axis + rank);
    loop::Expr k = loop::Cast(DType::kInt64, indices.at(i_idx));
    const loop::Expr& dim = data.shape[axis];
    loop::Expr wrapped = loop::Select(Less(k, loop::IntImm(0)), loop::Add(k, dim), k);
    loop::Expr safe =
        loop::Max(loop::Min(wrapped, loop::Sub(dim, loop::IntImm(1))), loop::IntImm(0));
    std::vector<loop::Expr> d_idx(idx.begin(), idx.begin() + axis);
    d_idx.push_back(safe);
    d_idx.insert(d_idx.end(), idx.begin() + axis + rank, idx.end());
    return data.at(FirstElementIfEmpty(dim, std::move(d_idx)));
  };
  return {LTensor{data.dtype, shape, at}};
}

// The wrapped index k (negative ones count from the end) clamped into [0, dim - 1]: compiled
// kernels cannot throw on an index out of range, so they read the nearest element instead.
loop::Expr ClampedIndex(const loop::Expr& k, const loop::Expr& dim) {
  loop::Expr wrapped = loop::Select(Less(k, loop::IntImm(0)), loop::Add(k, dim), k);
  return loop::Max(loop::Min(wrapped, loop::Sub(dim, loop::IntImm(1))), loop::IntImm(0));
}

// gather_elements: as gather (out-of-range indices read the clamped element; an empty axis
// gives zeros or, when symbolic, the first element), with the index read at the output index.
std::vector<LTensor> LowerGatherElements(LowerContext& ctx, const std::vector<LTensor>& in,
                                         const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor data = in[0], indices = in[1];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  int64_t c;
  if (loop::IsConstInt(data.shape[axis], &c) && c == 0) {
    loop::Expr zero = loop::MakeConst(0, data.dtype);
    return {LTensor{data.dtype, shape, [zero](const std::vector<loop::Expr>&) { return zero; }}};
  }
  auto at = [data, indices, axis](const std::vector<loop::Expr>& idx) {
    loop::Expr k = loop::Cast(DType::kInt64, indices.at(idx));
    std::vector<loop::Expr> d_idx = idx;
    d_idx[axis] = ClampedIndex(k, data.shape[axis]);
    return data.at(FirstElementIfEmpty(data.shape[axis], std::move(d_idx)));
  };
  return {LTensor{data.dtype, shape, at}};
}

// The scatters are lowered in gather form, as loop IR has no scattered stores: output element
// p reduces over every update q whose index names p, combine(data[p], reduce(updates[q])).
// kNone reduces the position of the last such update (a max) and reads it. Work is
// numel(data) * (updates per slice), quadratic where a scatter loop would be linear, but every
// access is in bounds by construction: an index outside [-dim, dim) names no element, so a
// compiled kernel drops its update (the reference kernel rejects it). The ops are kOpaque, so
// FuseOps keeps them alone.
struct ScatterSource {
  loop::Expr match;                 // whether the update at the reduce variables names p
  std::vector<loop::Expr> upd_idx;  // where that update is read
  std::vector<loop::IterVar> axes;  // the reduce variables
  loop::Expr position;              // a row-major number of the update among those reduced
};

// Combines data with the updates that name each of its elements. `source` describes, for an
// output index p, the updates reduced into it (fresh reduce variables on every call). Callers
// handle a constant empty set of updates themselves (the output is then the data).
LTensor LowerScatterGatherForm(
    LowerContext& ctx, const LTensor& data, const LTensor& updates, ScatterReduction r,
    const std::vector<loop::Expr>& shape,
    const std::function<ScatterSource(const std::vector<loop::Expr>&)>& source) {
  if (r == ScatterReduction::kNone) {
    // The number of the last update naming p, or -1.
    LTensor last = ctx.Materialize(
        LTensor{DType::kInt64, shape,
                [source](const std::vector<loop::Expr>& p) {
                  ScatterSource s = source(p);
                  return loop::Reduce(loop::ReduceKind::kMax,
                                      loop::Select(s.match, s.position, loop::IntImm(-1)), s.axes);
                }},
        "scatter_last");
    return LTensor{data.dtype, shape,
                   [data, updates, last, source](const std::vector<loop::Expr>& p) {
                     loop::Expr j = last.at(p);
                     // Both arms are evaluated: with no update (j = -1), read update 0, which
                     // exists whenever any update does; with none at all j is -1 everywhere and
                     // the clamped read still lands on the first element of a buffer (which
                     // every buffer has, empty or not).
                     ScatterSource s = source(p);
                     // Unravel the position into the reduce variables, row-major.
                     loop::Expr rest = loop::Max(j, loop::IntImm(0));
                     std::vector<loop::Expr> vals(s.axes.size());
                     for (size_t a = s.axes.size(); a-- > 0;) {
                       const loop::Expr& ext = s.axes[a].extent;
                       loop::Expr safe_ext = loop::Max(ext, loop::IntImm(1));
                       vals[a] = a == 0 ? loop::Min(rest, loop::Sub(safe_ext, loop::IntImm(1)))
                                        : loop::FloorMod(rest, safe_ext);
                       rest = loop::FloorDiv(rest, safe_ext);
                     }
                     loop::Expr count = loop::IntImm(1);
                     for (const loop::IterVar& a : s.axes) count = loop::Mul(count, a.extent);
                     std::vector<loop::Expr> u_idx = s.upd_idx;
                     for (loop::Expr& e : u_idx)
                       for (size_t a = 0; a < s.axes.size(); ++a)
                         e = loop::Substitute(e, s.axes[a].var, vals[a]);
                     u_idx = FirstElementIfEmpty(count, std::move(u_idx));
                     return loop::Select(Less(j, loop::IntImm(0)), data.at(p), updates.at(u_idx));
                   }};
  }
  loop::ReduceKind kind =
      r == ScatterReduction::kAdd ? loop::ReduceKind::kSum : loop::ReduceKind::kProd;
  loop::Expr identity = loop::MakeConst(r == ScatterReduction::kAdd ? 0 : 1, data.dtype);
  LTensor combined = ctx.Materialize(
      LTensor{data.dtype, shape,
              [data, updates, source, kind, identity, r](const std::vector<loop::Expr>& p) {
                ScatterSource s = source(p);
                loop::Expr red = loop::Reduce(
                    kind, loop::Select(s.match, updates.at(s.upd_idx), identity), s.axes);
                return r == ScatterReduction::kAdd ? loop::Add(data.at(p), red)
                                                   : loop::Mul(data.at(p), red);
              }},
      "scatter");
  return combined;
}

// scatter_elements: the updates that can name p lie in the slice of the indices through p
// along `axis`; off the axis, indices may be smaller than data (then p beyond them is named by
// none, and the slice read is clamped in).
std::vector<LTensor> LowerScatterElements(LowerContext& ctx, const std::vector<LTensor>& in,
                                          const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor data = in[0], indices = in[1], updates = in[2];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), data.ndim());
  const ScatterReduction r = ReadReduction(attrs);
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  // No updates at all: the output is the data.
  for (const loop::Expr& e : indices.shape) {
    int64_t c;
    if (loop::IsConstInt(e, &c) && c == 0) return {LTensor{data.dtype, shape, data.at}};
  }
  auto source = [&ctx, data, indices, axis](const std::vector<loop::Expr>& p) {
    loop::Var j = ctx.NewVar("j");
    ScatterSource s;
    std::vector<loop::Expr> q = p;
    loop::Expr inside = loop::BoolImm(true);
    for (int d = 0; d < data.ndim(); ++d) {
      if (d == axis) continue;
      if (SameExtent(indices.shape[d], data.shape[d])) continue;
      inside = loop::MakeBinary(loop::BinaryOp::kAnd, inside, Less(p[d], indices.shape[d]));
      q[d] = loop::Min(p[d], loop::Sub(indices.shape[d], loop::IntImm(1)));
    }
    q[axis] = j;
    loop::Expr k = loop::Cast(DType::kInt64, indices.at(q));
    const loop::Expr& dim = data.shape[axis];
    loop::Expr wrapped = loop::Select(Less(k, loop::IntImm(0)), loop::Add(k, dim), k);
    s.match = loop::MakeBinary(loop::BinaryOp::kAnd, inside,
                               loop::MakeBinary(loop::BinaryOp::kEQ, wrapped, p[axis]));
    s.upd_idx = q;
    s.axes = {loop::IterVar{j, indices.shape[axis]}};
    s.position = j;
    return s;
  };
  return {LowerScatterGatherForm(ctx, data, updates, r, shape, source)};
}

// scatter_nd: the updates that can name p are all of them (one per index tuple); update b
// names p when its tuple, wrapped, equals p's first m coordinates.
std::vector<LTensor> LowerScatterNd(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor data = in[0], indices = in[1], updates = in[2];
  const ScatterReduction r = ReadReduction(attrs);
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  const int q = indices.ndim();
  int64_t m = 0;
  KILN_CHECK(loop::IsConstInt(indices.shape[q - 1], &m), "scatter_nd: symbolic tuple length");
  for (int d = 0; d + 1 < q; ++d) {
    int64_t c;
    if (loop::IsConstInt(indices.shape[d], &c) && c == 0)
      return {LTensor{data.dtype, shape, data.at}};
  }
  auto source = [&ctx, data, indices, q, m](const std::vector<loop::Expr>& p) {
    ScatterSource s;
    std::vector<loop::Expr> batch;
    for (int d = 0; d + 1 < q; ++d) {
      loop::Var v = ctx.NewVar("b");
      s.axes.push_back(loop::IterVar{v, indices.shape[d]});
      batch.push_back(v);
    }
    // 1-D indices hold one tuple: reduce over a unit axis, so every source is a reduction.
    if (s.axes.empty()) s.axes.push_back(loop::IterVar{ctx.NewVar("b"), loop::IntImm(1)});
    s.position = loop::IntImm(0);
    for (size_t d = 0; d < batch.size(); ++d)
      s.position = loop::Add(loop::Mul(s.position, indices.shape[d]), batch[d]);
    s.match = loop::BoolImm(true);
    for (int64_t t = 0; t < m; ++t) {
      std::vector<loop::Expr> i_idx = batch;
      i_idx.push_back(loop::IntImm(t));
      loop::Expr k = loop::Cast(DType::kInt64, indices.at(i_idx));
      const loop::Expr& dim = data.shape[t];
      loop::Expr wrapped = loop::Select(Less(k, loop::IntImm(0)), loop::Add(k, dim), k);
      s.match = loop::MakeBinary(loop::BinaryOp::kAnd, s.match,
                                 loop::MakeBinary(loop::BinaryOp::kEQ, wrapped, p[t]));
    }
    s.upd_idx = batch;
    s.upd_idx.insert(s.upd_idx.end(), p.begin() + m, p.end());
    return s;
  };
  return {LowerScatterGatherForm(ctx, data, updates, r, shape, source)};
}

// gather_nd: each index of the tuple is read, wrapped and clamped into its dim (as gather: a
// compiled kernel reads the nearest element for an index out of range; a constant empty dim
// gives zeros, a symbolic one reads the first element).
std::vector<LTensor> LowerGatherNd(LowerContext& ctx, const std::vector<LTensor>& in,
                                   const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor data = in[0], indices = in[1];
  const int b = static_cast<int>(attrs.GetInt("batch_dims"));
  const int q = indices.ndim();
  int64_t m = 0;
  KILN_CHECK(loop::IsConstInt(indices.shape[q - 1], &m), "gather_nd: symbolic tuple length");
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  for (int64_t t = 0; t < m; ++t) {
    int64_t c;
    if (loop::IsConstInt(data.shape[b + t], &c) && c == 0) {
      loop::Expr zero = loop::MakeConst(0, data.dtype);
      return {LTensor{data.dtype, shape, [zero](const std::vector<loop::Expr>&) { return zero; }}};
    }
  }
  auto at = [data, indices, b, q, m](const std::vector<loop::Expr>& o) {
    std::vector<loop::Expr> d_idx(o.begin(), o.begin() + b);
    for (int64_t t = 0; t < m; ++t) {
      std::vector<loop::Expr> i_idx(o.begin(), o.begin() + (q - 1));
      i_idx.push_back(loop::IntImm(t));
      d_idx.push_back(
          ClampedIndex(loop::Cast(DType::kInt64, indices.at(i_idx)), data.shape[b + t]));
    }
    d_idx.insert(d_idx.end(), o.begin() + (q - 1), o.end());
    for (int64_t t = 0; t < m; ++t) d_idx = FirstElementIfEmpty(data.shape[b + t], d_idx);
    return data.at(d_idx);
  };
  return {LTensor{data.dtype, shape, at}};
}

// trilu: a select between the element and zero on the last two indices.
std::vector<LTensor> LowerTrilu(LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
                                const std::vector<Type>&) {
  const LTensor x = in[0];
  const bool upper = attrs.GetBool("upper");
  loop::Expr k = loop::IntImm(attrs.GetInt("k"));
  if (in.size() == 2) {
    // One element, at index 0 of every dim.
    k = loop::Cast(DType::kInt64, in[1].at(std::vector<loop::Expr>(in[1].ndim(), loop::IntImm(0))));
  }
  auto at = [x, upper, k](const std::vector<loop::Expr>& idx) {
    const size_t r = idx.size();
    loop::Expr diag = loop::Sub(idx[r - 1], idx[r - 2]);  // j - i
    // Dropped: j - i < k (upper) or j - i > k (lower).
    loop::Expr drop = upper ? Less(diag, k) : Less(k, diag);
    return loop::Select(drop, loop::MakeConst(0, x.dtype), x.at(idx));
  };
  return {lower::Map(x, x.dtype, at)};
}

// hardmax: the row max over non-NaN values (NaN reads as -inf), then the first position equal
// to it (len when none is: a row of NaNs), both materialized per row; an element is 1 where its
// position is that one. The 16-bit floats compare in f32, where they are exact.
std::vector<LTensor> LowerHardmax(LowerContext& ctx, const std::vector<LTensor>& in,
                                  const Attrs& attrs, const std::vector<Type>&) {
  const LTensor x = in[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const DType ct = x.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  LTensor xc = lower::Map(
      x, ct, [x, ct](const std::vector<loop::Expr>& idx) { return loop::Cast(ct, x.at(idx)); });
  loop::Expr neg_inf = loop::FloatImm(-std::numeric_limits<double>::infinity(), ct);
  LTensor row_max = ctx.Materialize(
      lower::ReduceAxes(ctx, xc, {axis}, /*keepdims=*/false, loop::ReduceKind::kMax,
                        [neg_inf](const loop::Expr& v) {
                          loop::Expr is_nan = loop::MakeBinary(loop::BinaryOp::kNE, v, v);
                          return loop::Select(is_nan, neg_inf, v);
                        }),
      "hardmax_max");
  const loop::Expr len = x.shape[axis];
  LTensor first = ctx.Materialize(
      LTensor{DType::kInt64, row_max.shape,
              [&ctx, xc, row_max, axis, len](const std::vector<loop::Expr>& row) {
                loop::Var k = ctx.NewVar("k");
                std::vector<loop::Expr> idx = row;
                idx.insert(idx.begin() + axis, k);
                loop::Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, xc.at(idx), row_max.at(row));
                return loop::Reduce(loop::ReduceKind::kMin, loop::Select(hit, k, len),
                                    {loop::IterVar{k, len}});
              }},
      "hardmax_first");
  auto at = [x, first, axis](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> row = idx;
    row.erase(row.begin() + axis);
    return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, idx[axis], first.at(row)),
                        loop::MakeConst(1, x.dtype), loop::MakeConst(0, x.dtype));
  };
  return {lower::Map(x, x.dtype, at)};
}

// cumsum: element i sums the elements j of its line with j <= i (j < i exclusive; j >= i or
// j > i reversed), as a masked sum over the whole line: O(len^2) per line, where a scan would
// be linear, but a plain reduction. The 16-bit floats sum in f32, as the reference does.
std::vector<LTensor> LowerCumsum(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>&) {
  const LTensor x = in[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const bool exclusive = attrs.GetBool("exclusive"), reverse = attrs.GetBool("reverse");
  const bool half = x.dtype == DType::kFloat16 || x.dtype == DType::kBFloat16;
  const DType ct = half ? DType::kFloat32 : x.dtype;
  auto at = [&ctx, x, axis, exclusive, reverse, ct](const std::vector<loop::Expr>& idx) {
    loop::Var j = ctx.NewVar("j");
    std::vector<loop::Expr> src = idx;
    src[axis] = j;
    const loop::Expr& i = idx[axis];
    loop::BinaryOp cmp = reverse ? (exclusive ? loop::BinaryOp::kGT : loop::BinaryOp::kGE)
                                 : (exclusive ? loop::BinaryOp::kLT : loop::BinaryOp::kLE);
    loop::Expr term = loop::Select(loop::MakeBinary(cmp, j, i), loop::Cast(ct, x.at(src)),
                                   loop::MakeConst(0, ct));
    return loop::Cast(
        x.dtype, loop::Reduce(loop::ReduceKind::kSum, term, {loop::IterVar{j, x.shape[axis]}}));
  };
  return {lower::Map(x, x.dtype, at)};
}

// range: start + i * delta in double, converted to the dtype as Tensor::SetFromDouble does
// (float -> int saturates, f64 -> f16/bf16 goes through f32), which the loop IR's Cast matches.
std::vector<LTensor> LowerRange(LowerContext& ctx, const std::vector<LTensor>&, const Attrs& attrs,
                                const std::vector<Type>& out_types) {
  const double start = attrs.GetFloat("start");
  const double delta = attrs.GetFloat("delta");
  const DType dtype = attrs.GetDType("dtype");
  auto at = [start, delta, dtype](const std::vector<loop::Expr>& idx) {
    loop::Expr i = loop::Cast(DType::kFloat64, idx[0]);
    loop::Expr v = loop::Add(loop::FloatImm(start, DType::kFloat64),
                             loop::Mul(i, loop::FloatImm(delta, DType::kFloat64)));
    return loop::Cast(dtype, v);
  };
  return {LTensor{dtype, OutShape(ctx, out_types[0]), at}};
}

// one_hot: class d is on where the index (cast to i64, wrapped once when negative) equals d;
// an index outside [-depth, depth) equals no class.
std::vector<LTensor> LowerOneHot(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor indices = in[0], values = in[1];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), indices.ndim() + 1);
  const loop::Expr depth = loop::IntImm(attrs.GetInt("depth"));
  auto at = [indices, values, axis, depth](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> i_idx = idx;
    i_idx.erase(i_idx.begin() + axis);
    loop::Expr k = loop::Cast(DType::kInt64, indices.at(i_idx));
    loop::Expr wrapped = loop::Select(Less(k, loop::IntImm(0)), loop::Add(k, depth), k);
    return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, wrapped, idx[axis]),
                        values.at({loop::IntImm(1)}), values.at({loop::IntImm(0)}));
  };
  return {LTensor{values.dtype, OutShape(ctx, out_types[0]), at}};
}

// topk, without a sort in loop IR: each element's rank in its line (how many elements come
// before it in TopK's order, ties by index) is a count over the line, and output j is the
// element whose rank is j, found by a second reduction over the line. O(len^2) per line,
// where a sort would be O(len log len); both reductions are materialized. The 16-bit floats
// compare in f32, where they are exact.
std::vector<LTensor> LowerTopK(LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const bool largest = attrs.GetBool("largest");
  const bool is_float = IsFloat(x.dtype);
  const DType ct =
      x.dtype == DType::kFloat16 || x.dtype == DType::kBFloat16 ? DType::kFloat32 : x.dtype;
  const loop::Expr len = x.shape[axis];
  // TopKBefore in loop IR: NaN (u != u) is larger than every number.
  auto before = [largest, is_float](const loop::Expr& u, const loop::Expr& v) {
    loop::Expr cmp = loop::MakeBinary(largest ? loop::BinaryOp::kGT : loop::BinaryOp::kLT, u, v);
    if (!is_float) return cmp;
    loop::Expr nu = loop::MakeBinary(loop::BinaryOp::kNE, u, u);
    loop::Expr nv = loop::MakeBinary(loop::BinaryOp::kNE, v, v);
    loop::Expr nan_first = largest ? loop::MakeBinary(loop::BinaryOp::kAnd, nu, loop::Not(nv))
                                   : loop::MakeBinary(loop::BinaryOp::kAnd, loop::Not(nu), nv);
    return loop::MakeBinary(loop::BinaryOp::kOr, nan_first, cmp);
  };
  LTensor rank = ctx.Materialize(
      LTensor{DType::kInt64, x.shape,
              [&ctx, x, axis, ct, len, before](const std::vector<loop::Expr>& idx) {
                loop::Var j = ctx.NewVar("j");
                std::vector<loop::Expr> other = idx;
                other[axis] = j;
                loop::Expr u = loop::Cast(ct, x.at(other)), v = loop::Cast(ct, x.at(idx));
                loop::Expr tie_first = loop::MakeBinary(
                    loop::BinaryOp::kAnd, loop::Not(before(v, u)), Less(j, idx[axis]));
                loop::Expr ahead = loop::MakeBinary(loop::BinaryOp::kOr, before(u, v), tie_first);
                return loop::Reduce(loop::ReduceKind::kSum,
                                    loop::Select(ahead, loop::IntImm(1), loop::IntImm(0)),
                                    {loop::IterVar{j, len}});
              }},
      "topk_rank");
  // Ranks are a permutation of [0, len), so exactly one element of the line has rank j < k:
  // the sum picks its position, and the values are read there (in bounds by construction).
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  LTensor index = ctx.Materialize(
      LTensor{DType::kInt64, shape,
              [&ctx, rank, axis, len](const std::vector<loop::Expr>& o) {
                loop::Var i = ctx.NewVar("i");
                std::vector<loop::Expr> src = o;
                src[axis] = i;
                loop::Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, rank.at(src), o[axis]);
                return loop::Reduce(loop::ReduceKind::kSum, loop::Select(hit, i, loop::IntImm(0)),
                                    {loop::IterVar{i, len}});
              }},
      "topk_index");
  LTensor values{x.dtype, shape, [x, index, axis, len](const std::vector<loop::Expr>& o) {
                   std::vector<loop::Expr> src = o;
                   src[axis] = index.at(o);
                   return x.at(FirstElementIfEmpty(len, std::move(src)));
                 }};
  return {values, index};
}

// The index into an operand's dim of extent `extent` under an ellipsis, for the label value
// `v` of broadcast extent `full`: a dim of 1 broadcasts (reads 0).
loop::Expr EllipsisIndex(const loop::Expr& extent, const loop::Expr& full, const loop::Expr& v) {
  int64_t c;
  if (loop::IsConstInt(extent, &c)) return c == 1 ? loop::IntImm(0) : v;
  if (SameExtent(extent, full)) return v;
  return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, extent, loop::IntImm(1)),
                      loop::IntImm(0), v);
}

// einsum: one reduction over the labels not in the output, of the product of the operands
// read at the labels' values; no reduction when every label is in the output (a transpose, a
// diagonal, an outer product). Accumulates as matmul does: i64 for integers (wrapping, as the
// reference), f64 for f64, f32 for the other floats.
std::vector<LTensor> LowerEinsum(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  std::vector<int> ranks;
  for (const LTensor& t : in) ranks.push_back(t.ndim());
  const EinsumSpec s = ParseEinsum(attrs.GetString("equation"), ranks, [](const std::string& m) {
    Throw(ErrorCode::kInvalidArgument, "einsum: ", m);
  });
  // Each label's extent: an output label's is its output dim (for the dims under an ellipsis,
  // the broadcast the relation computed); a summed letter's, its dim in any operand that has it
  // (they agree). The parse puts every ellipsis dim in the output.
  const std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  std::vector<loop::Expr> extent(s.num_labels());
  for (size_t j = 0; j < s.output.size(); ++j) extent[s.output[j]] = shape[j];
  for (size_t i = 0; i < in.size(); ++i)
    for (int d = 0; d < in[i].ndim(); ++d)
      if (!extent[s.operands[i][d]]) extent[s.operands[i][d]] = in[i].shape[d];
  const DType dtype = in[0].dtype;
  const DType acc = !IsFloat(dtype)            ? DType::kInt64
                    : dtype == DType::kFloat64 ? DType::kFloat64
                                               : DType::kFloat32;
  auto at = [&ctx, s, in, extent, dtype, acc](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> value(s.num_labels());
    for (size_t j = 0; j < s.output.size(); ++j) value[s.output[j]] = idx[j];
    std::vector<loop::IterVar> axes;
    for (int l : s.reduced) {
      loop::Var v = ctx.NewVar("r");
      value[l] = v;
      axes.push_back(loop::IterVar{v, extent[l]});
    }
    loop::Expr product;
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<loop::Expr> op_idx;
      for (int d = 0; d < in[i].ndim(); ++d) {
        const int l = s.operands[i][d];
        op_idx.push_back(s.IsEllipsis(l) ? EllipsisIndex(in[i].shape[d], extent[l], value[l])
                                         : value[l]);
      }
      loop::Expr term = loop::Cast(acc, in[i].at(op_idx));
      product = product ? loop::Mul(product, term) : term;
    }
    if (!axes.empty()) product = loop::Reduce(loop::ReduceKind::kSum, product, axes);
    return loop::Cast(dtype, product);
  };
  return {LTensor{dtype, shape, at}};
}

// eye_like: 1 where column - row == k.
std::vector<LTensor> LowerEyeLike(LowerContext& ctx, const std::vector<LTensor>&,
                                  const Attrs& attrs, const std::vector<Type>& out_types) {
  const DType dtype = attrs.GetDType("dtype");
  const loop::Expr k = loop::IntImm(attrs.GetInt("k"));
  auto at = [dtype, k](const std::vector<loop::Expr>& idx) {
    loop::Expr on = loop::MakeBinary(loop::BinaryOp::kEQ, loop::Sub(idx[1], idx[0]), k);
    return loop::Select(on, loop::MakeConst(1, dtype), loop::MakeConst(0, dtype));
  };
  return {LTensor{dtype, OutShape(ctx, out_types[0]), at}};
}

// constant_of_shape: the value converted as Tensor::SetFromDouble does (the loop IR's casts
// match it, as for range); bool is value != 0.
std::vector<LTensor> LowerConstantOfShape(LowerContext& ctx, const std::vector<LTensor>&,
                                          const Attrs& attrs, const std::vector<Type>& out_types) {
  const DType dtype = attrs.GetDType("dtype");
  const double value = attrs.GetFloat("value");
  const loop::Expr v = dtype == DType::kBool
                           ? loop::BoolImm(value != 0)
                           : loop::Cast(dtype, loop::FloatImm(value, DType::kFloat64));
  return {LTensor{dtype, OutShape(ctx, out_types[0]),
                  [v](const std::vector<loop::Expr>&) { return v; }}};
}

// reverse_sequence: time step t of batch entry b reads step len - 1 - t when t < len, with
// len clamped into [0, steps] as the reference does, so every read is in bounds.
std::vector<LTensor> LowerReverseSequence(LowerContext&, const std::vector<LTensor>& in,
                                          const Attrs& attrs, const std::vector<Type>&) {
  const LTensor x = in[0], lens = in[1];
  const int batch = ops::WrapAxis(attrs.GetInt("batch_axis"), x.ndim());
  const int time = ops::WrapAxis(attrs.GetInt("time_axis"), x.ndim());
  auto at = [x, lens, batch, time](const std::vector<loop::Expr>& idx) {
    const loop::Expr& steps = x.shape[time];
    loop::Expr len = loop::Cast(DType::kInt64, lens.at({idx[batch]}));
    len = loop::Max(loop::Min(len, steps), loop::IntImm(0));
    const loop::Expr& t = idx[time];
    std::vector<loop::Expr> src = idx;
    src[time] = loop::Select(Less(t, len), loop::Sub(loop::Sub(len, loop::IntImm(1)), t), t);
    return x.at(src);
  };
  return {lower::Map(x, x.dtype, at)};
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
      .lower = LowerConcat,
  });
  r.Register(OpDef{
      .name = "split",
      .doc = "Splits along `axis` into parts of the sizes in `split`, or `num_outputs` parts of "
             "ceil(dim / num_outputs) with a smaller last one. Returns a tuple.",
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
                {"split", AttrKind::kInts, AttrValue{V{}}, ops::CheckNonNegativeInts()},
                {"num_outputs", AttrKind::kInt, AttrValue{int64_t{0}},
                 [](const AttrValue& v) {
                   return std::get<int64_t>(v) < 0 ? std::string("must not be negative") : "";
                 }}},
      .pattern = OpPattern::kInjective,
      .type_rel = SplitRel,
      .ref_kernel = SplitKernel,
      .lower = LowerSplit,
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
      .lower = LowerSlice,
  });
  r.Register(OpDef{
      .name = "gather",
      .doc = "ONNX Gather: data[:axis] + indices.shape + data[axis+1:]; negative indices wrap. "
             "An index outside [-dim, dim) is an error (the reference kernel throws); compiled "
             "kernels, which cannot throw, read the element at the index clamped into "
             "[0, dim - 1] (an unspecified value when the axis is empty).",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = GatherRel,
      .ref_kernel = GatherKernel,
      .lower = LowerGather,
  });
  r.Register(OpDef{
      .name = "gather_elements",
      .doc = "ONNX GatherElements: out has the indices' shape; out[idx] = data[idx with "
             "idx[axis] = indices[idx]]; negative indices wrap. Other dims of indices may be "
             "smaller than data's when both are constant, else must equal them. An index "
             "outside [-dim, dim) is an error in the reference kernel; compiled kernels read "
             "the element at the index clamped into [0, dim - 1] (as gather).",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = GatherElementsRel,
      .ref_kernel = GatherElementsKernel,
      .lower = LowerGatherElements,
  });
  r.Register(OpDef{
      .name = "scatter_elements",
      .doc = "ONNX ScatterElements: a copy of data where, for each element q of indices, the "
             "element at q with q[axis] = indices[q] is replaced by (reduction none), added to "
             "(add) or multiplied by (mul) updates[q]; negative indices wrap. With none, the "
             "last of several updates to one element (row-major) wins. An index outside "
             "[-dim, dim) is an error in the reference kernel; compiled kernels drop its "
             "update. Compiled in gather form: O(numel(data) * indices along axis).",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
                {"reduction", AttrKind::kString, AttrValue{std::string("none")}, CheckReduction}},
      .pattern = OpPattern::kOpaque,
      .type_rel = ScatterElementsRel,
      .ref_kernel = ScatterElementsKernel,
      .lower = LowerScatterElements,
  });
  r.Register(OpDef{
      .name = "gather_nd",
      .doc = "ONNX GatherND: the last dim m of indices (a constant) holds index tuples into "
             "data's dims batch_dims .. batch_dims + m; out = indices[:-1] + "
             "data[batch_dims + m:]. The first batch_dims dims of data and indices pair up. "
             "Negative indices wrap; one outside [-dim, dim) is an error in the reference "
             "kernel, and compiled kernels read the element at it clamped (as gather).",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"batch_dims", AttrKind::kInt, AttrValue{int64_t{0}},
                 [](const AttrValue& v) {
                   return std::get<int64_t>(v) < 0 ? std::string("must not be negative") : "";
                 }}},
      .pattern = OpPattern::kInjective,
      .type_rel = GatherNdRel,
      .ref_kernel = GatherNdKernel,
      .lower = LowerGatherNd,
  });
  r.Register(OpDef{
      .name = "scatter_nd",
      .doc = "ONNX ScatterND: a copy of data where, for each index tuple of indices (its last "
             "dim m, a constant), the slice data[tuple] is replaced by (reduction none), added "
             "to (add) or multiplied by (mul) the matching slice of updates (shape "
             "indices[:-1] + data[m:]); negative indices wrap; with none the last of several "
             "updates to one element wins. An index outside [-dim, dim) is an error in the "
             "reference kernel; compiled kernels drop its update. Compiled in gather form: "
             "O(numel(data) * number of tuples).",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {{"reduction", AttrKind::kString, AttrValue{std::string("none")}, CheckReduction}},
      .pattern = OpPattern::kOpaque,
      .type_rel = ScatterNdRel,
      .ref_kernel = ScatterNdKernel,
      .lower = LowerScatterNd,
  });
  r.Register(OpDef{
      .name = "trilu",
      .doc = "ONNX Trilu on the last two axes: keeps the elements on and above diagonal `k` "
             "(upper) or on and below it (lower), zeroes the rest. Diagonal k holds the "
             "elements with column - row == k. k is the attribute, or the optional second "
             "input (one i32/i64 element) when it is computed at run time.",
      .min_inputs = 1,
      .max_inputs = 2,
      .attrs = {{"upper", AttrKind::kBool, AttrValue{true}},
                {"k", AttrKind::kInt, AttrValue{int64_t{0}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = TriluRel,
      .ref_kernel = TriluKernel,
      .lower = LowerTrilu,
  });
  r.Register(OpDef{
      .name = "hardmax",
      .doc = "ONNX Hardmax (opset 13): 1 at the first maximum along `axis`, 0 elsewhere. NaNs "
             "are never the maximum; a row of NaNs only is all 0.",
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{-1}}}},
      .pattern = OpPattern::kReduction,
      .type_rel = HardmaxRel,
      .ref_kernel = HardmaxKernel,
      .lower = LowerHardmax,
  });
  r.Register(OpDef{
      .name = "cumsum",
      .doc = "ONNX CumSum with a constant axis: running sums along `axis`; `exclusive` leaves "
             "out the element itself, `reverse` sums from the end. The 16-bit floats sum in "
             "f32. Compiled as a masked sum per element: O(len^2) per line.",
      .attrs = {{"axis", AttrKind::kInt, std::nullopt},
                {"exclusive", AttrKind::kBool, AttrValue{false}},
                {"reverse", AttrKind::kBool, AttrValue{false}}},
      .pattern = OpPattern::kOpaque,
      .type_rel = CumsumRel,
      .ref_kernel = CumsumKernel,
      .lower = LowerCumsum,
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
      .lower = LowerRange,
  });
  r.Register(OpDef{
      .name = "one_hot",
      .doc = "ONNX OneHot: inputs indices (any numeric dtype; floats are cast to i64 as kiln's "
             "cast does) and values [off, on]; the output has a new axis `axis` of size `depth` "
             "and the dtype of values, on where the index names that class. Negative indices "
             "count from depth; one outside [-depth, depth) gives all off.",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"depth", AttrKind::kInt, std::nullopt, CheckPositive},
                {"axis", AttrKind::kInt, AttrValue{int64_t{-1}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = OneHotRel,
      .ref_kernel = OneHotKernel,
      .lower = LowerOneHot,
  });
  r.Register(OpDef{
      .name = "topk",
      .doc = "ONNX TopK: the k largest (or smallest) elements along `axis` and their positions "
             "(i64), as a tuple, in order; equal elements by position, NaN larger than every "
             "number. Always sorted (`sorted` = false allows any order). Compiled without a "
             "sort: O(len^2) per line.",
      .attrs = {{"k", AttrKind::kInt, std::nullopt, CheckNonNegative},
                {"axis", AttrKind::kInt, AttrValue{int64_t{-1}}},
                {"largest", AttrKind::kBool, AttrValue{true}},
                {"sorted", AttrKind::kBool, AttrValue{true}}},
      .pattern = OpPattern::kOpaque,
      .type_rel = TopKRel,
      .ref_kernel = TopKKernel,
      .lower = LowerTopK,
  });
  r.Register(OpDef{
      .name = "einsum",
      .doc = "ONNX Einsum: `equation` names each operand's dims by letters (`...` for "
             "broadcast leading dims) and the output's after `->` (implicit: the letters that "
             "occur once, alphabetically); letters missing from the output are summed over. "
             "Integers accumulate in wrapping i64; compiled f32/f16/bf16 accumulate in f32.",
      .min_inputs = 1,
      .max_inputs = -1,
      .attrs = {{"equation", AttrKind::kString, std::nullopt}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = EinsumRel,
      .ref_kernel = EinsumKernel,
      .lower = LowerEinsum,
  });
  r.Register(OpDef{
      .name = "eye_like",
      .doc = "ONNX EyeLike: a matrix of the input's (2-D) shape and of `dtype`, 1 on diagonal "
             "k (column - row == k) and 0 elsewhere; the input's values are not read. dtype "
             "is required (the ONNX converter passes the input's when the node has none).",
      .attrs = {{"k", AttrKind::kInt, AttrValue{int64_t{0}}},
                {"dtype", AttrKind::kDType, std::nullopt}},
      .pattern = OpPattern::kInjective,
      .type_rel = EyeLikeRel,
      .ref_kernel = EyeLikeKernel,
      .lower = LowerEyeLike,
  });
  r.Register(OpDef{
      .name = "constant_of_shape",
      .doc = "ONNX ConstantOfShape: a tensor of `shape` and `dtype` filled with `value`, which "
             "integer dtypes need whole and in range.",
      .min_inputs = 0,
      .max_inputs = 0,
      .attrs = {{"shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()},
                {"value", AttrKind::kFloat, AttrValue{0.0}},
                {"dtype", AttrKind::kDType, AttrValue{DType::kFloat32}}},
      .pattern = OpPattern::kInjective,
      .type_rel = ConstantOfShapeRel,
      .ref_kernel = ConstantOfShapeKernel,
      .lower = LowerConstantOfShape,
  });
  r.Register(OpDef{
      .name = "reverse_sequence",
      .doc = "ONNX ReverseSequence: for each entry b along `batch_axis`, the first "
             "sequence_lens[b] elements along `time_axis` in reverse order, the rest as they "
             "are. Lengths are clamped into [0, steps].",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"batch_axis", AttrKind::kInt, AttrValue{int64_t{1}}},
                {"time_axis", AttrKind::kInt, AttrValue{int64_t{0}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = ReverseSequenceRel,
      .ref_kernel = ReverseSequenceKernel,
      .lower = LowerReverseSequence,
  });
}

}  // namespace kiln
