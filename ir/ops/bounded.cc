// The bounded forms of the data-dependent ops (ir/ops/data_dependent.cc, OpDef::bounded_op):
// each computes its op's results into buffers sized by the upper bound of the dims the values
// decide (every element, every slice, every box of every class), zeros past the count, and
// returns the count last. A model cut at a data-dependent op computes the bounded form in its
// compiled head; the host only keeps the first `count` entries of each result
// (engine/segments.h). Each lowers to one serial loop nest: the running count is where the
// next result goes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "ir/ops/data_dependent.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using loop::Expr;

// ---- helpers for the serial kernels ----

using loop::BinaryOp;
using loop::Stmt;

Expr Cmp(BinaryOp op, const Expr& a, const Expr& b) {
  return loop::MakeBinary(op, a, b);
}

// A kernel-local scalar (a running count, the best index so far), allocated around the
// statements that use it (WithLocals).
struct Local {
  loop::Buffer buf;
  explicit Local(const std::string& name, DType t = DType::kInt64)
      : buf(loop::MakeBuffer(name, t, {loop::IntImm(1)}, loop::BufferNode::Scope::kLocal)) {}
  Expr get() const { return loop::Load(buf, {loop::IntImm(0)}); }
  Stmt set(Expr v) const { return loop::Store(buf, {loop::IntImm(0)}, std::move(v)); }
};

Stmt WithLocals(const std::vector<const Local*>& locals, Stmt body) {
  std::vector<Stmt> seq;
  for (const Local* l : locals) seq.push_back(loop::Alloc(l->buf));
  seq.push_back(std::move(body));
  for (const Local* l : locals) seq.push_back(loop::Free(l->buf));
  return loop::Seq(std::move(seq));
}

// for (v = begin; v < end; ++v) body(v), serially.
Stmt Range(LowerContext& ctx, const Expr& begin, const Expr& end,
           const std::function<Stmt(const Expr&)>& body) {
  loop::Var v = ctx.NewVar("i");
  return loop::For(v, begin, loop::Sub(end, begin), loop::ForKind::kSerial, body(v));
}

// An i64 bound to `value` once, for statements that change what `value` reads.
Stmt Let(LowerContext& ctx, const Expr& value, const std::function<Stmt(const Expr&)>& body) {
  loop::Var v = ctx.NewVar("let");
  return loop::LetStmt(v, value, body(v));
}

Expr AsI64(const Expr& b) {
  return loop::Cast(DType::kInt64, b);
}

// 1 where `v` is not zero (NaN included), else 0, as an i64.
Expr NonZero(const Expr& v) {
  return loop::Cast(DType::kInt64,
                    loop::MakeBinary(loop::BinaryOp::kNE, v, lower::Const(0, v->dtype)));
}

Type NonZeroBoundedRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  return TupleType({TensorType({Dim(std::max(1, x.ndim())), ShapeNumel(x.shape)}, DType::kInt64),
                    TensorType({}, DType::kInt64)});
}

// `exact` placed at the start of `dim` of the zeroed `bounded` (whose other dims are the same):
// a bounded result from the exact one.
void PlaceLeading(const Tensor& exact, int dim, Tensor& bounded) {
  std::memset(bounded.raw_data(), 0, bounded.nbytes());
  ops::AxisSplit e = ops::SplitAtAxis(exact.shape(), dim);
  const int64_t len = bounded.shape()[dim];
  for (int64_t o = 0; o < e.outer; ++o)
    ops::CopyElements(exact, o * e.len * e.inner, bounded, o * len * e.inner, e.len * e.inner);
}

// As PlaceLeading, and the count: the exact result's length along `dim`.
void PlaceExact(const Tensor& exact, int dim, Tensor& bounded, Tensor& count) {
  PlaceLeading(exact, dim, bounded);
  count = Tensor::Scalar<int64_t>(exact.shape()[dim]);
}

void NonZeroBoundedKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                          std::vector<Tensor>& out) {
  std::vector<Tensor> exact(1);
  ops::NonZeroKernel(in, attrs, exact);
  PlaceExact(exact[0], 1, out[0], out[1]);
}

// The index buffer [rank, n] and, after it, the count: one buffer, one pass over x. Branch
// free (a data-dependent branch mispredicts on half the elements of random data): every
// element writes its indices at column `hits`, which only a nonzero one moves past; hits <=
// the element's position, so the writes stay in the buffer. Then the columns past the count
// are zeroed.
std::vector<LTensor> LowerNonZeroBounded(LowerContext& ctx, const std::vector<LTensor>& in,
                                         const Attrs&, const std::vector<Type>&) {
  const LTensor x = in[0];
  const int64_t rank = std::max(1, x.ndim());
  Expr n = loop::IntImm(1);
  for (const Expr& d : x.shape) n = loop::Mul(n, d);
  const Expr count_at = loop::Mul(loop::IntImm(rank), n);
  LTensor nz = ctx.MaterializeFill(
      DType::kInt64, {loop::Add(count_at, loop::IntImm(1))}, "nonzero", [&](const loop::Buffer& b) {
        const Local hits("nonzero_hits");
        const Expr k = hits.get();
        std::vector<loop::Var> v;
        std::vector<Expr> idx;
        for (int d = 0; d < x.ndim(); ++d) {
          v.push_back(ctx.NewVar("i"));
          idx.push_back(v.back());
        }
        std::vector<loop::Stmt> record;
        for (int64_t d = 0; d < rank; ++d)
          record.push_back(loop::Store(b, {loop::Add(loop::Mul(loop::IntImm(d), n), k)},
                                       x.ndim() ? Expr(idx[d]) : loop::IntImm(0)));
        record.push_back(hits.set(loop::Add(k, NonZero(x.at(idx)))));
        loop::Stmt nest = loop::Seq(std::move(record));
        for (int d = x.ndim(); d-- > 0;)
          nest = loop::For(v[d], loop::IntImm(0), x.shape[d], loop::ForKind::kSerial, nest);
        loop::Var row = ctx.NewVar("d"), z = ctx.NewVar("z");
        loop::Stmt tail = loop::For(
            row, loop::IntImm(0), loop::IntImm(rank), loop::ForKind::kSerial,
            loop::For(z, k, loop::Sub(n, k), loop::ForKind::kSerial,
                      loop::Store(b, {loop::Add(loop::Mul(row, n), z)}, loop::IntImm(0))));
        return WithLocals({&hits}, loop::Seq({hits.set(loop::IntImm(0)), nest, tail,
                                              loop::Store(b, {count_at}, k)}));
      });
  LTensor indices{DType::kInt64, {loop::IntImm(rank), n}, [nz, n](const std::vector<Expr>& i) {
                    return nz.at({loop::Add(loop::Mul(i[0], n), i[1])});
                  }};
  LTensor count{
      DType::kInt64, {}, [nz, count_at](const std::vector<Expr>&) { return nz.at({count_at}); }};
  return {indices, count};
}

// compress's result with the selected dim at the slices' count (the axis' length, or every
// element when flattened), and the count.
Type CompressBoundedRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& cond = ctx.tensor(1);
  ops::RequireDType(ctx, cond.dtype, ops::DTypeClass::kBool, "condition");
  if (cond.ndim() != 1) ctx.Fail(StrCat("condition must have rank 1, got ", cond.ndim()));
  std::optional<int> axis = ops::CompressAxis(ctx, x.ndim());
  Shape y = axis ? x.shape : Shape{ShapeNumel(x.shape)};
  const Dim& len = y[axis.value_or(0)];
  if (cond.shape[0].is_const() && len.is_const() && cond.shape[0].value() > len.value())
    ctx.Fail(StrCat("condition has ", cond.shape[0].value(), " elements, more than the ",
                    len.value(), " ", axis ? "slices" : "elements of the input",
                    " it selects from"));
  ctx.AssertAtMost(cond.shape[0], len,
                   StrCat("the condition's length (at most the ",
                          axis ? "slices" : "elements of the input", " it selects from)"));
  return TupleType({TensorType(y, x.dtype), TensorType({}, DType::kInt64)});
}

void CompressBoundedKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                           std::vector<Tensor>& out) {
  std::vector<Tensor> exact(1);
  ops::CompressKernel(in, attrs, exact);
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  int axis = 0;
  if (!a.empty()) axis = static_cast<int>(a[0] < 0 ? a[0] + in[0].ndim() : a[0]);
  PlaceExact(exact[0], axis, out[0], out[1]);
}

// For each slice i (in order), y[outer, count, inner] = x[outer, i, inner], and the count
// moves past it only if the condition holds (branch free, as nonzero_bounded: count <= i);
// flattened, the elements of x in row-major order, selected by the condition at their flat
// index. Then the entries past the count are zeroed. A condition longer than the slices is a
// type error (CompressBoundedRel); a symbolic one reads at most as many as there are.
std::vector<LTensor> LowerCompressBounded(LowerContext& ctx, const std::vector<LTensor>& in,
                                          const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], cond = in[1];
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  const bool flat = a.empty();
  const int axis = flat ? 0 : ops::WrapAxis(a[0], x.ndim());
  const std::vector<Expr> y_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  const Expr len = loop::Min(cond.shape[0], y_shape[axis]);
  LTensor count = ctx.MaterializeFill(
      DType::kInt64, {loop::IntImm(1)}, "compress_count", [&](const loop::Buffer& b) {
        loop::Var i = ctx.NewVar("i");
        const Expr c = loop::Load(b, {loop::IntImm(0)});
        return loop::Seq(
            {loop::Store(b, {loop::IntImm(0)}, loop::IntImm(0)),
             loop::For(i, loop::IntImm(0), len, loop::ForKind::kSerial,
                       loop::Store(b, {loop::IntImm(0)}, loop::Add(c, NonZero(cond.at({i})))))});
      });
  LTensor y = ctx.MaterializeFill(x.dtype, y_shape, "compress", [&](const loop::Buffer& b) {
    const Local hits("compress_hits");
    const Expr k = hits.get();
    std::vector<loop::Var> v;
    std::vector<Expr> xi;
    for (int d = 0; d < x.ndim(); ++d) {
      v.push_back(ctx.NewVar("i"));
      xi.push_back(v.back());
    }
    loop::Stmt nest;
    if (flat) {
      // The flat index of x's element, row-major; past the condition, nothing is selected.
      Expr f = loop::IntImm(0);
      for (int d = 0; d < x.ndim(); ++d) f = loop::Add(loop::Mul(f, x.shape[d]), xi[d]);
      nest = loop::IfThenElse(loop::MakeBinary(loop::BinaryOp::kLT, f, len),
                              loop::Seq({loop::Store(b, {k}, x.at(xi)),
                                         hits.set(loop::Add(k, NonZero(cond.at({f}))))}));
      for (int d = x.ndim(); d-- > 0;)
        nest = loop::For(v[d], loop::IntImm(0), x.shape[d], loop::ForKind::kSerial, nest);
    } else {
      // The slice loop outermost: the count moves once per slice.
      std::vector<Expr> yi = xi;
      yi[axis] = k;
      loop::Stmt copy = loop::Store(b, yi, x.at(xi));
      for (int d = x.ndim(); d-- > 0;)
        if (d != axis)
          copy = loop::For(v[d], loop::IntImm(0), x.shape[d], loop::ForKind::kSerial, copy);
      nest = loop::For(v[axis], loop::IntImm(0), len, loop::ForKind::kSerial,
                       loop::Seq({copy, hits.set(loop::Add(k, NonZero(cond.at({xi[axis]}))))}));
    }
    // Zeros past the count: along the axis from k (every other dim whole).
    std::vector<loop::Var> zv;
    std::vector<Expr> zi;
    for (size_t d = 0; d < y_shape.size(); ++d) {
      zv.push_back(ctx.NewVar("z"));
      zi.push_back(zv.back());
    }
    loop::Stmt zero = loop::Store(b, zi, lower::Const(0, x.dtype));
    for (size_t d = y_shape.size(); d-- > 0;) {
      const bool along = static_cast<int>(d) == axis;
      zero = loop::For(zv[d], along ? k : loop::IntImm(0),
                       along ? loop::Sub(y_shape[d], k) : y_shape[d], loop::ForKind::kSerial, zero);
    }
    return WithLocals({&hits}, loop::Seq({hits.set(loop::IntImm(0)), nest, zero}));
  });
  LTensor n{
      DType::kInt64, {}, [count](const std::vector<Expr>&) { return count.at({loop::IntImm(0)}); }};
  return {y, n};
}

// Sorts the indices in b[perm + k], k in [0, n), stably: a bottom-up merge sort whose passes of
// doubling width merge neighbouring runs into b[tmp + k] (the left run's index first on ties)
// and copy them back; 64 passes cover any length. compare(p, q) returns statements that set
// cmp below 0 when index p sorts before index q. Branch free within a merge: both heads are
// read (clamped into the pair's range) and the take moves one of them.
Stmt MergeSort(LowerContext& ctx, const loop::Buffer& b, const Expr& perm, const Expr& tmp,
               const Expr& n, const Local& cmp,
               const std::function<Stmt(const Expr& p, const Expr& q)>& compare) {
  const Local width("sort_width"), left("sort_left"), right("sort_right");
  const Expr zero = loop::IntImm(0), one = loop::IntImm(1);
  auto get = [&](const Expr& base, const Expr& k) { return loop::Load(b, {loop::Add(base, k)}); };
  const Expr w = width.get(), two_w = loop::Mul(w, loop::IntImm(2));
  Stmt pass = Range(
      ctx, zero, loop::FloorDiv(loop::Sub(loop::Add(n, two_w), one), two_w), [&](const Expr& q) {
        const Expr lo = loop::Mul(q, two_w), mid = loop::Min(loop::Add(lo, w), n),
                   hi = loop::Min(loop::Add(lo, two_w), n);
        const Expr l = get(perm, loop::Min(left.get(), loop::Sub(hi, one)));
        const Expr r = get(perm, loop::Min(right.get(), loop::Sub(hi, one)));
        Stmt merge = Range(ctx, lo, hi, [&](const Expr& t) {
          Expr take_right = Cmp(BinaryOp::kAnd, Cmp(BinaryOp::kLT, right.get(), hi),
                                Cmp(BinaryOp::kOr, Cmp(BinaryOp::kGE, left.get(), mid),
                                    Cmp(BinaryOp::kLT, cmp.get(), zero)));
          return loop::Seq({compare(r, l), Let(ctx, AsI64(take_right), [&](const Expr& tr) {
                              return loop::Seq(
                                  {loop::Store(b, {loop::Add(tmp, t)},
                                               loop::Select(Cmp(BinaryOp::kNE, tr, zero), r, l)),
                                   left.set(loop::Add(left.get(), loop::Sub(one, tr))),
                                   right.set(loop::Add(right.get(), tr))});
                            })});
        });
        return loop::Seq({left.set(lo), right.set(mid), merge});
      });
  Stmt copy_back = Range(ctx, zero, n, [&](const Expr& k) {
    return loop::Store(b, {loop::Add(perm, k)}, get(tmp, k));
  });
  return WithLocals({&width, &left, &right},
                    loop::Seq({width.set(one), Range(ctx, zero, loop::IntImm(64), [&](const Expr&) {
                                 return loop::IfThenElse(
                                     Cmp(BinaryOp::kLT, w, n),
                                     loop::Seq({pass, copy_back, width.set(two_w)}));
                               })}));
}

// ---- unique_bounded ----

// unique's results with room for every slice (every element, flattened): values with the
// selected dim at its full length, first-occurrence indices, inverse indices, counts, and the
// number of distinct slices.
Type UniqueBoundedRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  std::optional<int> axis = ops::CompressAxis(ctx, x.ndim());
  Shape y = axis ? x.shape : Shape{ShapeNumel(x.shape)};
  const Type index = TensorType({y[axis.value_or(0)]}, DType::kInt64);
  return TupleType({TensorType(y, x.dtype), index, index, index, TensorType({}, DType::kInt64)});
}

void UniqueBoundedKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                         std::vector<Tensor>& out) {
  std::vector<Tensor> exact(4);
  ops::UniqueKernel(in, attrs, exact);
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  PlaceLeading(exact[0], a.empty() ? 0 : ops::WrapAxis(a[0], in[0].ndim()), out[0]);
  for (int i = 1; i < 4; ++i) PlaceLeading(exact[i], 0, out[i]);
  out[4] = Tensor::Scalar<int64_t>(exact[1].numel());
}

// The row-major indices of flat offset `f` within dims [begin, end) of `shape`.
std::vector<Expr> Unflatten(const std::vector<Expr>& shape, size_t begin, size_t end,
                            const Expr& f) {
  std::vector<Expr> idx(end - begin);
  Expr stride = loop::IntImm(1);
  for (size_t d = end; d-- > begin;) {
    Expr q = loop::FloorDiv(f, stride);
    idx[d - begin] = d == begin ? q : loop::FloorMod(q, shape[d]);
    stride = loop::Mul(stride, shape[d]);
  }
  return idx;
}

// x seen as [outer, len, inner] around unique's axis (flattened: [1, numel, 1]).
struct Slices {
  LTensor x;
  std::optional<int> axis;
  Expr outer = loop::IntImm(1), len = loop::IntImm(1), inner = loop::IntImm(1);

  Slices(const LTensor& t, std::optional<int> a) : x(t), axis(a) {
    for (int d = 0; d < x.ndim(); ++d) {
      Expr& part = !axis ? len : d < *axis ? outer : d == *axis ? len : inner;
      part = loop::Mul(part, x.shape[d]);
    }
  }
  // x's element `i` of slice `k` in block `o`.
  Expr At(const Expr& o, const Expr& k, const Expr& i) const {
    const size_t r = x.shape.size();
    if (!axis) return x.at(Unflatten(x.shape, 0, r, k));
    std::vector<Expr> idx = Unflatten(x.shape, 0, static_cast<size_t>(*axis), o);
    idx.push_back(k);
    for (const Expr& e : Unflatten(x.shape, static_cast<size_t>(*axis) + 1, r, i)) idx.push_back(e);
    return x.at(idx);
  }
};

// Whether u comes before v in unique's order (ascending; NaN after every number, equal to NaN),
// half floats compared as f32 and bools as integers, as the reference compares them.
Expr Before(Expr u, Expr v) {
  if (u->dtype == DType::kFloat16 || u->dtype == DType::kBFloat16 || u->dtype == DType::kBool) {
    const DType t = u->dtype == DType::kBool ? DType::kInt32 : DType::kFloat32;
    u = loop::Cast(t, u);
    v = loop::Cast(t, v);
  }
  Expr lt = Cmp(BinaryOp::kLT, u, v);
  if (!IsFloat(u->dtype)) return lt;
  return Cmp(BinaryOp::kOr, lt,
             Cmp(BinaryOp::kAnd, Cmp(BinaryOp::kEQ, u, u), Cmp(BinaryOp::kNE, v, v)));
}

// cmp := -1, 0 or 1 as slice p sorts before, with or after slice q (lexicographically).
Stmt CompareSlices(LowerContext& ctx, const Slices& s, const Local& cmp, const Expr& p,
                   const Expr& q) {
  loop::Var o = ctx.NewVar("o"), i = ctx.NewVar("e");
  Expr u = s.At(o, p, i), v = s.At(o, q, i);
  Expr c = loop::Sub(AsI64(Before(v, u)), AsI64(Before(u, v)));
  Stmt step = cmp.set(loop::Select(Cmp(BinaryOp::kNE, cmp.get(), loop::IntImm(0)), cmp.get(), c));
  return loop::Seq(
      {cmp.set(loop::IntImm(0)),
       loop::For(o, loop::IntImm(0), s.outer, loop::ForKind::kSerial,
                 loop::For(i, loop::IntImm(0), s.inner, loop::ForKind::kSerial, step))});
}

// One i64 state buffer of n = the slice count per part (UniqueParts), then the count:
//   kPerm   the slices in sorted order (MergeSort; kTmp its scratch)
//   kFirst  per run of equal slices (in sorted order): its first occurrence
//   kRunCount, kRunOf: per run its size, per slice its run
//   kRank   per run: its place in the output (the run itself when sorted, else the order of
//           first occurrences)
//   kIndices, kInverse, kCounts: the results, zeros past the count.
enum UniquePart {
  kPerm,
  kTmp,
  kFirst,
  kRunCount,
  kRunOf,
  kRank,
  kIndices,
  kInverse,
  kCounts,
  kUniqueParts
};

std::vector<LTensor> LowerUniqueBounded(LowerContext& ctx, const std::vector<LTensor>& in,
                                        const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  std::optional<int> axis;
  if (!a.empty()) axis = ops::WrapAxis(a[0], x.ndim());
  const bool sorted = attrs.GetBool("sorted");
  const Slices s(x, axis);
  const Expr n = s.len;
  const Expr count_at = loop::Mul(loop::IntImm(kUniqueParts), n);
  LTensor state = ctx.MaterializeFill(
      DType::kInt64, {loop::Add(count_at, loop::IntImm(1))}, "unique", [&](const loop::Buffer& b) {
        auto at = [&](UniquePart part, const Expr& e) {
          return loop::Add(loop::Mul(loop::IntImm(part), n), e);
        };
        auto get = [&](UniquePart part, const Expr& e) { return loop::Load(b, {at(part, e)}); };
        auto put = [&](UniquePart part, const Expr& e, const Expr& v) {
          return loop::Store(b, {at(part, e)}, v);
        };
        const Local cmp("unique_cmp"), runs("unique_runs"), pos("unique_pos");
        const Expr zero = loop::IntImm(0), one = loop::IntImm(1);
        std::vector<Stmt> body;
        body.push_back(Range(ctx, zero, n, [&](const Expr& k) { return put(kPerm, k, k); }));
        // Sorted stably, each run of equal slices starts at its first occurrence.
        body.push_back(MergeSort(
            ctx, b, at(kPerm, zero), at(kTmp, zero), n, cmp,
            [&](const Expr& p, const Expr& q) { return CompareSlices(ctx, s, cmp, p, q); }));
        // Runs of equal slices in sorted order.
        const Expr run = loop::Sub(runs.get(), one);
        body.push_back(runs.set(zero));
        body.push_back(Range(ctx, zero, n, [&](const Expr& k) {
          const Expr slice = get(kPerm, k);
          Stmt start = loop::Seq({put(kFirst, runs.get(), slice), put(kRunCount, runs.get(), zero),
                                  runs.set(loop::Add(runs.get(), one))});
          return loop::Seq(
              {CompareSlices(ctx, s, cmp, get(kPerm, loop::Max(loop::Sub(k, one), zero)), slice),
               loop::IfThenElse(Cmp(BinaryOp::kOr, Cmp(BinaryOp::kEQ, k, zero),
                                    Cmp(BinaryOp::kNE, cmp.get(), zero)),
                                start),
               put(kRunCount, run, loop::Add(get(kRunCount, run), one)), put(kRunOf, slice, run)});
        }));
        const Expr u = runs.get();
        if (sorted) {
          body.push_back(Range(ctx, zero, u, [&](const Expr& j) { return put(kRank, j, j); }));
        } else {
          // In order of first occurrence: mark each run's first slice (kTmp is free now), then
          // number the marked slices in index order.
          body.push_back(Range(ctx, zero, n, [&](const Expr& k) { return put(kTmp, k, zero); }));
          body.push_back(
              Range(ctx, zero, u, [&](const Expr& j) { return put(kTmp, get(kFirst, j), one); }));
          body.push_back(pos.set(zero));
          body.push_back(Range(ctx, zero, n, [&](const Expr& k) {
            return loop::IfThenElse(Cmp(BinaryOp::kNE, get(kTmp, k), zero),
                                    loop::Seq({put(kRank, get(kRunOf, k), pos.get()),
                                               pos.set(loop::Add(pos.get(), one))}));
          }));
        }
        body.push_back(Range(ctx, zero, u, [&](const Expr& j) {
          return loop::Seq({put(kIndices, get(kRank, j), get(kFirst, j)),
                            put(kCounts, get(kRank, j), get(kRunCount, j))});
        }));
        body.push_back(Range(ctx, u, n, [&](const Expr& j) {
          return loop::Seq({put(kIndices, j, zero), put(kCounts, j, zero)});
        }));
        body.push_back(Range(ctx, zero, n, [&](const Expr& k) {
          return put(kInverse, k, get(kRank, get(kRunOf, k)));
        }));
        body.push_back(loop::Store(b, {count_at}, u));
        return WithLocals({&cmp, &runs, &pos}, loop::Seq(std::move(body)));
      });
  auto part = [state, n](UniquePart p) {
    return LTensor{DType::kInt64, {n}, [state, n, p](const std::vector<Expr>& i) {
                     return state.at({loop::Add(loop::Mul(loop::IntImm(p), n), i[0])});
                   }};
  };
  const Expr count = state.at({count_at});
  // values[.., j, ..]: slice indices[j] of x, zeros past the count (indices[j] is 0 there, so
  // the read stays in bounds).
  const LTensor indices = part(kIndices);
  const std::vector<Expr> y_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  LTensor values{x.dtype, y_shape, [x, s, axis, indices, count](const std::vector<Expr>& i) {
                   const Expr j = i[axis.value_or(0)];
                   Expr v;
                   if (!axis) {
                     v = s.At(loop::IntImm(0), indices.at({j}), loop::IntImm(0));
                   } else {
                     std::vector<Expr> xi = i;
                     xi[*axis] = indices.at({j});
                     v = x.at(xi);
                   }
                   return loop::Select(Cmp(BinaryOp::kLT, j, count), v, lower::Const(0, x.dtype));
                 }};
  return {values, indices, part(kInverse), part(kCounts),
          LTensor{DType::kInt64, {}, [count](const std::vector<Expr>&) { return count; }}};
}

// ---- non_max_suppression_bounded ----

// non_max_suppression's rows with room for every box of every class (batches * classes *
// boxes), zeros past the count, and the count.
Type NmsBoundedRel(TypeRelContext& ctx) {
  ops::NmsRel(ctx);
  const Shape& s = ctx.tensor(1).shape;
  return TupleType(
      {TensorType({s[0] * s[1] * s[2], Dim(3)}, DType::kInt64), TensorType({}, DType::kInt64)});
}

void NmsBoundedKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  std::vector<Tensor> exact(1);
  ops::NmsKernel(in, attrs, exact);
  PlaceExact(exact[0], 0, out[0], out[1]);
}

// A box as f64 corners, min before max on each axis (as the reference reads it).
struct BoxExpr {
  Expr y0, x0, y1, x1;
};

BoxExpr ReadBoxExpr(const LTensor& boxes, const Expr& batch, const Expr& box, bool center) {
  Expr v[4];
  for (int i = 0; i < 4; ++i)
    v[i] = loop::Cast(DType::kFloat64, boxes.at({batch, box, loop::IntImm(i)}));
  if (center) {  // [x_center, y_center, width, height]
    const Expr half = loop::FloatImm(0.5, DType::kFloat64);
    const Expr hh = loop::Mul(v[3], half), hw = loop::Mul(v[2], half);
    return {loop::Sub(v[1], hh), loop::Sub(v[0], hw), loop::Add(v[1], hh), loop::Add(v[0], hw)};
  }
  return {loop::Min(v[0], v[2]), loop::Min(v[1], v[3]), loop::Max(v[0], v[2]),
          loop::Max(v[1], v[3])};
}

// Whether a and b overlap by more than `threshold` (intersection over union); boxes of no area
// overlap nothing.
Expr OverlapsExpr(const BoxExpr& a, const BoxExpr& b, const Expr& threshold) {
  const Expr f0 = loop::FloatImm(0, DType::kFloat64);
  auto positive = [&](const Expr& e) { return Cmp(BinaryOp::kGT, e, f0); };
  const Expr area_a = loop::Mul(loop::Sub(a.y1, a.y0), loop::Sub(a.x1, a.x0));
  const Expr area_b = loop::Mul(loop::Sub(b.y1, b.y0), loop::Sub(b.x1, b.x0));
  const Expr h = loop::Sub(loop::Min(a.y1, b.y1), loop::Max(a.y0, b.y0));
  const Expr w = loop::Sub(loop::Min(a.x1, b.x1), loop::Max(a.x0, b.x0));
  const Expr inter = loop::Mul(h, w), uni = loop::Sub(loop::Add(area_a, area_b), inter);
  Expr all = Cmp(BinaryOp::kGT, loop::Div(inter, uni), threshold);
  for (const Expr& e : {area_a, area_b, h, w, uni}) all = Cmp(BinaryOp::kAnd, positive(e), all);
  return all;
}

// Per batch and class, as the reference: the candidates (above score_threshold, if given) in
// order of score, best first (ties by index; a NaN score as -inf), each kept unless it
// overlaps a box kept before it in this class by more than iou_threshold, until
// max_output_boxes_per_class are kept. The order comes from a binary heap of the candidates,
// built in O(boxes) and popped only as far as the kept boxes need (10000 boxes, 100 kept: a
// full merge sort first cost 2.4 ms, ONNX Runtime's heap 0.16 ms). State: the rows [batches *
// classes * boxes, 3], the count, then the heap (boxes).
std::vector<LTensor> LowerNmsBounded(LowerContext& ctx, const std::vector<LTensor>& in,
                                     const Attrs& attrs, const std::vector<Type>&) {
  const LTensor boxes = in[0], scores = in[1];
  const bool center = attrs.GetInt("center_point_box") == 1;
  const Expr batches = scores.shape[0], classes = scores.shape[1], n = scores.shape[2];
  const Expr rows = loop::Mul(loop::Mul(batches, classes), n);
  const Expr count_at = loop::Mul(rows, loop::IntImm(3));
  const Expr heap_at = loop::Add(count_at, loop::IntImm(1));
  const DType f64 = DType::kFloat64;
  auto scalar = [&](size_t i) {
    return in[i].ndim() == 0 ? in[i].at({}) : in[i].at({loop::IntImm(0)});
  };
  // Boxes kept per class: max_output_boxes_per_class clamped into [0, boxes] (absent: 0; a
  // float count truncated, NaN as 0).
  Expr limit = loop::IntImm(0);
  if (in.size() > 2) {
    const Expr m = scalar(2);
    if (IsFloat(m->dtype)) {
      const Expr v = loop::Cast(f64, m);
      limit = loop::Select(Cmp(BinaryOp::kGT, v, loop::FloatImm(0, f64)),
                           loop::Cast(DType::kInt64, loop::Min(v, loop::Cast(f64, n))),
                           loop::IntImm(0));
    } else if (IsUnsignedInteger(m->dtype)) {
      limit = loop::Cast(DType::kInt64, loop::Min(m, loop::Cast(m->dtype, n)));
    } else {
      limit = loop::Min(loop::Max(loop::Cast(DType::kInt64, m), loop::IntImm(0)), n);
    }
  }
  const Expr iou = in.size() > 3 ? loop::Cast(f64, scalar(3)) : loop::FloatImm(0, f64);
  LTensor state = ctx.MaterializeFill(
      DType::kInt64, {loop::Add(heap_at, n)}, "nms", [&](const loop::Buffer& b) {
        const Local count("nms_count"), start("nms_class_start"), size("nms_heap_size"),
            depth("nms_heap_depth"), pos("nms_heap_pos"), sifting("nms_sifting"),
            suppressed("nms_suppressed");
        const Expr zero = loop::IntImm(0), one = loop::IntImm(1);
        auto per_class = [&](const Expr& bt, const Expr& c) {
          auto score = [&](const Expr& i) { return loop::Cast(f64, scores.at({bt, c, i})); };
          auto ranked = [&](const Expr& i) {
            const Expr sc = score(i);
            return loop::Select(Cmp(BinaryOp::kNE, sc, sc),
                                loop::FloatImm(-std::numeric_limits<double>::infinity(), f64), sc);
          };
          // p pops before q: the higher score, or the lower index on equal scores.
          auto before = [&](const Expr& p, const Expr& q) {
            const Expr sp = ranked(p), sq = ranked(q);
            return Cmp(BinaryOp::kOr, Cmp(BinaryOp::kGT, sp, sq),
                       Cmp(BinaryOp::kAnd, Cmp(BinaryOp::kEQ, sp, sq), Cmp(BinaryOp::kLT, p, q)));
          };
          auto heap = [&](const Expr& k) { return loop::Load(b, {loop::Add(heap_at, k)}); };
          auto set_heap = [&](const Expr& k, const Expr& v) {
            return loop::Store(b, {loop::Add(heap_at, k)}, v);
          };
          // Moves the entry at `from` down until neither child pops before it, at most `levels`
          // levels (the heap's depth below `from`).
          auto sift_down = [&](const Expr& from, const Expr& levels) {
            Stmt level = Let(
                ctx, loop::Add(loop::Mul(pos.get(), loop::IntImm(2)), one), [&](const Expr& child) {
                  const Expr last = loop::Sub(size.get(), one);
                  const Expr other = loop::Add(child, one);
                  Expr pick = loop::Select(
                      Cmp(BinaryOp::kAnd, Cmp(BinaryOp::kLT, other, size.get()),
                          before(heap(loop::Min(other, last)), heap(loop::Min(child, last)))),
                      other, child);
                  return loop::IfThenElse(
                      Cmp(BinaryOp::kGE, child, size.get()), sifting.set(zero),
                      Let(ctx, pick, [&](const Expr& c2) {
                        return loop::IfThenElse(
                            before(heap(c2), heap(pos.get())),
                            Let(ctx, heap(pos.get()),
                                [&](const Expr& moved) {
                                  return loop::Seq({set_heap(pos.get(), heap(c2)),
                                                    set_heap(c2, moved), pos.set(c2)});
                                }),
                            sifting.set(zero));
                      }));
                });
            return loop::Seq({pos.set(from), sifting.set(one),
                              Range(ctx, zero, loop::Max(levels, zero), [&](const Expr&) {
                                return loop::IfThenElse(Cmp(BinaryOp::kNE, sifting.get(), zero),
                                                        level);
                              })});
          };
          // The candidates, compacted branch free (each writes at `size`, which only a
          // candidate moves past), then heapified bottom up.
          Stmt gather = Range(ctx, zero, n, [&](const Expr& i) {
            Expr pass = loop::BoolImm(true);  // NaN scores never pass a threshold
            if (in.size() > 4) pass = Cmp(BinaryOp::kGT, score(i), loop::Cast(f64, scalar(4)));
            return loop::Seq(
                {set_heap(size.get(), i), size.set(loop::Add(size.get(), AsI64(pass)))});
          });
          // depth: the heap's levels (bits of its size); then level by level, the lowest inner
          // one first, each node sifts at most the levels below it.
          auto pow2 = [](const Expr& e) { return Cmp(BinaryOp::kShl, loop::IntImm(1), e); };
          Stmt measure =
              loop::Seq({depth.set(zero), Range(ctx, zero, loop::IntImm(63), [&](const Expr& k) {
                           return depth.set(loop::Add(
                               depth.get(), AsI64(Cmp(BinaryOp::kLE, pow2(k), size.get()))));
                         })});
          const Expr half = loop::FloorDiv(size.get(), loop::IntImm(2));
          Stmt heapify = Range(ctx, zero, loop::Sub(depth.get(), one), [&](const Expr& t) {
            return Let(
                ctx, loop::Sub(loop::Sub(depth.get(), loop::IntImm(2)), t), [&](const Expr& level) {
                  const Expr first = loop::Sub(pow2(level), one);
                  const Expr end = loop::Min(loop::Sub(pow2(loop::Add(level, one)), one), half);
                  return Range(ctx, first, end, [&](const Expr& k) {
                    return sift_down(k, loop::Sub(loop::Sub(depth.get(), one), level));
                  });
                });
          });
          Stmt scan = Range(ctx, zero, n, [&](const Expr&) {
            Expr wanted = Cmp(BinaryOp::kAnd, Cmp(BinaryOp::kGT, size.get(), zero),
                              Cmp(BinaryOp::kLT, loop::Sub(count.get(), start.get()), limit));
            return loop::IfThenElse(
                wanted, Let(ctx, heap(zero), [&](const Expr& i) {
                  const BoxExpr box = ReadBoxExpr(boxes, bt, i, center);
                  Stmt check = Range(ctx, start.get(), count.get(), [&](const Expr& k) {
                    const Expr kept =
                        loop::Load(b, {loop::Add(loop::Mul(k, loop::IntImm(3)), loop::IntImm(2))});
                    return suppressed.set(loop::Max(
                        suppressed.get(),
                        AsI64(OverlapsExpr(ReadBoxExpr(boxes, bt, kept, center), box, iou))));
                  });
                  const Expr row = loop::Mul(count.get(), loop::IntImm(3));
                  Stmt keep = loop::Seq({loop::Store(b, {row}, bt),
                                         loop::Store(b, {loop::Add(row, one)}, c),
                                         loop::Store(b, {loop::Add(row, loop::IntImm(2))}, i),
                                         count.set(loop::Add(count.get(), one))});
                  return loop::Seq(
                      {set_heap(zero, heap(loop::Sub(size.get(), one))),
                       size.set(loop::Sub(size.get(), one)),
                       sift_down(zero, loop::Sub(depth.get(), one)), suppressed.set(zero), check,
                       loop::IfThenElse(Cmp(BinaryOp::kEQ, suppressed.get(), zero), keep)});
                }));
          });
          return loop::Seq(
              {start.set(count.get()), size.set(zero), gather, measure, heapify, scan});
        };
        Stmt all = loop::IfThenElse(
            Cmp(BinaryOp::kGT, limit, zero), Range(ctx, zero, batches, [&](const Expr& bt) {
              return Range(ctx, zero, classes, [&](const Expr& c) { return per_class(bt, c); });
            }));
        Stmt tail = Range(ctx, loop::Mul(count.get(), loop::IntImm(3)), count_at,
                          [&](const Expr& z) { return loop::Store(b, {z}, zero); });
        return WithLocals(
            {&count, &start, &size, &depth, &pos, &sifting, &suppressed},
            loop::Seq({count.set(zero), all, tail, loop::Store(b, {count_at}, count.get())}));
      });
  LTensor selected{DType::kInt64, {rows, loop::IntImm(3)}, [state](const std::vector<Expr>& i) {
                     return state.at({loop::Add(loop::Mul(i[0], loop::IntImm(3)), i[1])});
                   }};
  return {selected, LTensor{DType::kInt64, {}, [state, count_at](const std::vector<Expr>&) {
                              return state.at({count_at});
                            }}};
}
}  // namespace

void RegisterBoundedOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "nonzero_bounded",
      .doc = "nonzero with room for every element: (i64[rank, numel(x)] holding nonzero's "
             "result in its first `count` columns and zeros after, count: i64[]). Compiled; "
             "a model cut at nonzero computes it in its head and trims on the host.",
      .attrs = {},
      .pattern = OpPattern::kOpaque,
      .type_rel = NonZeroBoundedRel,
      .ref_kernel = NonZeroBoundedKernel,
      .lower = LowerNonZeroBounded,
  });
  r.Register(OpDef{
      .name = "compress_bounded",
      .doc = "compress with room for every slice (every element, flattened): (the result with "
             "the selected dim as long as the slices, its first `count` entries compress's and "
             "zeros after, count: i64[]). Compiled; a model cut at compress computes it in its "
             "head and trims on the host.",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"axis", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}, ops::CheckAtMostOne}},
      .pattern = OpPattern::kOpaque,
      .type_rel = CompressBoundedRel,
      .ref_kernel = CompressBoundedKernel,
      .lower = LowerCompressBounded,
  });
  r.Register(OpDef{
      .name = "unique_bounded",
      .doc = "unique with room for every slice (every element, flattened): (values with the "
             "selected dim at its full length, indices, inverse indices, counts: their first "
             "`count` entries unique's and zeros after (the inverse indices whole), count: "
             "i64[]). Compiled (a stable merge sort of the slices); a model cut at unique "
             "computes it in its head and trims on the host.",
      .attrs = {{"sorted", AttrKind::kBool, AttrValue{true}},
                {"axis", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}, ops::CheckAtMostOne}},
      .pattern = OpPattern::kOpaque,
      .type_rel = UniqueBoundedRel,
      .ref_kernel = UniqueBoundedKernel,
      .lower = LowerUniqueBounded,
  });
  r.Register(OpDef{
      .name = "non_max_suppression_bounded",
      .doc = "non_max_suppression with room for every box of every class: (i64[batches * "
             "classes * boxes, 3] holding its rows first and zeros after, count: i64[]). "
             "Compiled (a stable merge sort by score, then the greedy scan); a model cut at "
             "non_max_suppression computes it in its head and trims on the host.",
      .min_inputs = 2,
      .max_inputs = 5,
      .attrs = {{"center_point_box", AttrKind::kInt, AttrValue{int64_t{0}},
                 ops::CheckCenterPointBox}},
      .pattern = OpPattern::kOpaque,
      .type_rel = NmsBoundedRel,
      .ref_kernel = NmsBoundedKernel,
      .lower = LowerNmsBounded,
  });
}

}  // namespace kiln
