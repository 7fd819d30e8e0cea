// Ops that compute each element from the whole line through it along one axis: hardmax,
// cumsum, topk. Loop IR has no scan or sort, so their lowerings are reductions over the line:
// per line for hardmax, per element for cumsum and topk (O(len^2) per line).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::FirstElementIfEmpty;
using ops::Less;
using ops::OutShape;

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

// --- topk ---

std::string CheckNonNegative(const AttrValue& v) {
  return std::get<int64_t>(v) < 0 ? "must not be negative" : "";
}

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

}  // namespace

void RegisterAlongAxisOps(OpRegistry& r) {
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
}

}  // namespace kiln
