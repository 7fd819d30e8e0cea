// The element-wise and tuple-wise gathers and their scatters: gather_elements,
// scatter_elements, gather_nd, scatter_nd (ONNX's GatherElements, ScatterElements, GatherND,
// ScatterND). gather itself is in select.cc. Gathers only move elements, copying raw bytes, so
// every dtype works unchanged; the scatters' add and mul reductions take the numeric dtypes.
#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/loop/loop_visitor.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::FirstElementIfEmpty;
using ops::IndexAt;
using ops::Less;
using ops::OutShape;
using ops::SameExtent;

// --- gather_elements ---

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

}  // namespace

void RegisterGatherScatterOps(OpRegistry& r) {
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
}

}  // namespace kiln
