// Ops that pick or assemble parts of tensors: concat, split, slice, gather, trilu,
// reverse_sequence. Kernels that only move elements copy raw bytes, so every dtype works
// unchanged. The other gathers and the scatters are in gather_scatter.cc.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::FirstElementIfEmpty;
using ops::IndexAt;
using ops::kHuge;
using ops::Less;
using ops::OutShape;

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
