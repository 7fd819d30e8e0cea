// Ops whose output is made from attributes, positions and indices rather than copied from an
// input: range, one_hot, eye_like (reads only its input's shape), constant_of_shape. Values
// computed in double are converted to the dtype as Tensor::SetFromDouble does, which the loop
// IR's casts match.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::kHuge;
using ops::Less;
using ops::OutShape;

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

}  // namespace

void RegisterGenerateOps(OpRegistry& r) {
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
}

}  // namespace kiln
