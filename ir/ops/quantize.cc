// Elementwise value maps from ONNX's quantization and thresholding ops: quantize_linear
// (QuantizeLinear), dequantize_linear (DequantizeLinear) and shrink (Shrink).
//
// quantize_linear and dequantize_linear take their scale and zero point as tensors (ONNX
// models often feed them as graph inputs), either per tensor (a scalar, or 1-D of size 1) or
// per axis (1-D [C], C = x.shape[axis]). The references compute exactly what the lowerings do,
// in the same f32 operations, so the kernels match them bit for bit: quantization rounds, and a
// quotient that lands on the other side of a .5 would give a different integer.
#include <cmath>
#include <limits>
#include <optional>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

// ---- scale and zero point ----

// Per-tensor when the scale is a scalar or 1-D of constant size 1; the type relation and the
// lowering decide it by this rule alike.
bool IsPerTensor(const Shape& scale) {
  return scale.empty() || (scale[0].is_const() && scale[0].value() == 1);
}

// Checks the scale (argument 1) and the optional zero point (argument 2) of a (de)quantization
// of x (argument 0); names are ONNX's (`y_scale`, `x_zero_point`).
void CheckScaleAndZeroPoint(TypeRelContext& ctx, const char* scale_name, const char* zp_name) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& scale = ctx.tensor(1);
  if (scale.dtype != DType::kFloat32)
    ctx.Fail(StrCat(scale_name, " must be f32, got ", TypeToString(ctx.arg(1))));
  if (scale.ndim() > 1)
    ctx.Fail(StrCat(scale_name, " must be a scalar or 1-D, got ", TypeToString(ctx.arg(1))));
  if (!IsPerTensor(scale.shape)) {
    // The axis only matters per axis: ONNX ignores it for a per-tensor scale.
    if (x.ndim() == 0)
      ctx.Fail(StrCat(scale_name, " ", ShapeToString(scale.shape),
                      " is per axis, but x is a scalar (a scalar scale is per tensor)"));
    int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
    ctx.AssertEqual(scale.shape[0], x.shape[axis],
                    StrCat(scale_name, " ", ShapeToString(scale.shape),
                           " must be [C] with C = ", x.shape[axis].ToString(), ", dim ", axis,
                           " (axis) of x ", ShapeToString(x.shape), ", or a scalar"));
  }
  if (ctx.num_args() < 3) return;
  const TensorTypeNode& zp = ctx.tensor(2);
  std::string mismatch = StrCat(zp_name, " ", ShapeToString(zp.shape), " must have the shape of ",
                                scale_name, " ", ShapeToString(scale.shape));
  if (zp.ndim() != scale.ndim()) ctx.Fail(mismatch);
  for (int d = 0; d < zp.ndim(); ++d) ctx.AssertEqual(zp.shape[d], scale.shape[d], mismatch);
}

// For each element of x, the index of its scale and zero point.
class ParamIndex {
 public:
  ParamIndex(const Tensor& x, const Tensor& scale, const Attrs& attrs) {
    if (scale.ndim() == 0 || scale.shape()[0] == 1) return;  // IsPerTensor
    split_ = ops::SplitAtAxis(x.shape(), ops::WrapAxis(attrs.GetInt("axis"), x.ndim()));
  }
  int64_t operator()(int64_t i) const { return (i / split_.inner) % split_.len; }

 private:
  ops::AxisSplit split_;  // per tensor: len 1, so every element reads index 0
};

// The scale or zero point element for x's output index `idx`, by the same rule.
loop::Expr ParamAt(const LTensor& p, const std::vector<loop::Expr>& idx, int axis) {
  int64_t n = 0;
  if (p.ndim() == 0) return p.at({});
  if (loop::IsConstInt(p.shape[0], &n) && n == 1) return p.at({loop::IntImm(0)});
  return p.at({idx[axis]});
}

// ---- quantize_linear ----
//
// y = saturate(round_half_even(x / y_scale) + y_zero_point), in f32: x (f32, or i32 converted
// to f32) is divided by the scale in f32, rounded half to even, the zero point added in f32
// (exact for the integers that survive saturation), and the result clamped to the output
// dtype's range: the zero point's dtype (u8 or i8), u8 without one. A NaN quotient gives 0, as
// a cast does.

// Half away from zero is std::round; this wants half to even, and std::nearbyint would depend
// on the thread's rounding mode. Exact for every float (floats are exact in double).
double RoundHalfEven(double x) {
  double r = std::floor(x);
  double frac = x - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return std::copysign(r, x);
}

Type QuantizeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kInt32)
    ctx.Fail(StrCat("x must be f32 or i32, got ", TypeToString(ctx.arg(0))));
  CheckScaleAndZeroPoint(ctx, "y_scale", "y_zero_point");
  DType out = DType::kUInt8;
  if (ctx.num_args() > 2) {
    out = ctx.tensor(2).dtype;
    if (out != DType::kUInt8 && out != DType::kInt8)
      ctx.Fail(StrCat("y_zero_point must be u8 or i8, got ", TypeToString(ctx.arg(2))));
  }
  return TensorType(x.shape, out);
}

void QuantizeKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &scale = in[1];
  ParamIndex param(x, scale, attrs);
  const float* s = scale.data<float>();
  DispatchDType(out[0].dtype(), [&]<typename Q>() {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t>) {
      const Q* zp = in.size() > 2 ? in[2].data<Q>() : nullptr;
      const float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
      Q* y = out[0].data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t p = param(i);
        float v = x.dtype() == DType::kInt32 ? static_cast<float>(x.data<int32_t>()[i])
                                             : x.data<float>()[i];
        float r = static_cast<float>(RoundHalfEven(v / s[p]));
        if (zp) r += static_cast<float>(zp[p]);
        y[i] = std::isnan(r) ? Q{0} : static_cast<Q>(std::min(std::max(r, lo), hi));
      }
    } else {
      KILN_CHECK(false, "quantize_linear to ", DTypeName(out[0].dtype()), " passed the relation");
    }
  });
}

std::vector<LTensor> LowerQuantize(const std::vector<LTensor>& in, const Attrs& attrs,
                                   const std::vector<Type>& out_types) {
  const LTensor x = in[0], scale = in[1];
  std::optional<LTensor> zp;
  if (in.size() > 2) zp = in[2];
  const DType q = AsTensor(out_types.at(0))->dtype, f32 = DType::kFloat32;
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const double lo = static_cast<double>(loop::IntDTypeMin(q)),
               hi = static_cast<double>(loop::IntDTypeMax(q));
  return {
      lower::Map(x, q, [x, scale, zp, q, f32, axis, lo, hi](const std::vector<loop::Expr>& idx) {
        loop::Expr v = loop::Div(loop::Cast(f32, x.at(idx)), ParamAt(scale, idx, axis));
        loop::Expr r = loop::Call(loop::Intrinsic::kRoundEven, {v});
        if (zp) r = loop::Add(r, loop::Cast(f32, ParamAt(*zp, idx, axis)));
        // The loop IR's min and max propagate NaN, which the cast then makes 0.
        r = loop::Min(loop::Max(r, lower::Const(lo, f32)), lower::Const(hi, f32));
        return loop::Cast(q, r);
      })};
}

// ---- dequantize_linear ----
//
// y = (x - x_zero_point) * x_scale: the difference is exact in i64, converted to f32 (exact for
// 8-bit x; rounded to nearest for i32), then multiplied by the scale in f32.

Type DequantizeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.dtype != DType::kUInt8 && x.dtype != DType::kInt8 && x.dtype != DType::kInt32)
    ctx.Fail(StrCat("x must be u8, i8 or i32, got ", TypeToString(ctx.arg(0))));
  CheckScaleAndZeroPoint(ctx, "x_scale", "x_zero_point");
  if (ctx.num_args() > 2 && ctx.tensor(2).dtype != x.dtype)
    ctx.Fail(StrCat("x_zero_point ", TypeToString(ctx.arg(2)), " must have the dtype of x ",
                    TypeToString(ctx.arg(0))));
  return TensorType(x.shape, DType::kFloat32);
}

void DequantizeKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &scale = in[1];
  ParamIndex param(x, scale, attrs);
  const float* s = scale.data<float>();
  float* y = out[0].data<float>();
  DispatchDType(x.dtype(), [&]<typename Q>() {
    if constexpr (std::is_same_v<Q, uint8_t> || std::is_same_v<Q, int8_t> ||
                  std::is_same_v<Q, int32_t>) {
      const Q* xq = x.data<Q>();
      const Q* zp = in.size() > 2 ? in[2].data<Q>() : nullptr;
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t p = param(i);
        int64_t d = static_cast<int64_t>(xq[i]) - (zp ? static_cast<int64_t>(zp[p]) : 0);
        y[i] = static_cast<float>(d) * s[p];
      }
    } else {
      KILN_CHECK(false, "dequantize_linear of ", DTypeName(x.dtype()), " passed the relation");
    }
  });
}

std::vector<LTensor> LowerDequantize(const std::vector<LTensor>& in, const Attrs& attrs) {
  const LTensor x = in[0], scale = in[1];
  std::optional<LTensor> zp;
  if (in.size() > 2) zp = in[2];
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  const DType f32 = DType::kFloat32, i64 = DType::kInt64;
  return {lower::Map(x, f32, [x, scale, zp, axis, f32, i64](const std::vector<loop::Expr>& idx) {
    loop::Expr d = loop::Cast(i64, x.at(idx));
    if (zp) d = loop::Sub(d, loop::Cast(i64, ParamAt(*zp, idx, axis)));
    return loop::Mul(loop::Cast(f32, d), ParamAt(scale, idx, axis));
  })};
}

// ---- shrink ----
//
// y = x - bias if x > lambd, x + bias if x < -lambd, else 0 (ONNX Shrink), on every numeric
// dtype. The comparisons and the arithmetic are in double (exact comparisons against the
// attributes, whatever x's dtype), and the result is converted to x's dtype as `cast` does:
// through f32 for the half floats; integers truncate toward zero and saturate.

Type ShrinkRel(TypeRelContext& ctx) {
  ops::RequireDType(ctx, ctx.tensor(0).dtype, ops::DTypeClass::kNumeric, "x");
  return ctx.arg(0);
}

double ShrinkValue(double x, double lambd, double bias) {
  return x > lambd ? x - bias : x < -lambd ? x + bias : 0.0;
}

void ShrinkKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  double lambd = attrs.GetFloat("lambd"), bias = attrs.GetFloat("bias");
  for (int64_t i = 0; i < in[0].numel(); ++i)
    out[0].SetFromDouble(i, ShrinkValue(in[0].GetAsDouble(i), lambd, bias));
}

LTensor LowerShrink(const LTensor& x, const Attrs& attrs) {
  const double lambd = attrs.GetFloat("lambd"), bias = attrs.GetFloat("bias");
  const DType t = x.dtype, f64 = DType::kFloat64;
  // SetFromDouble's path to the half floats (f64 -> f32 -> f16) rounds twice; so does this.
  const DType via = t == DType::kFloat16 || t == DType::kBFloat16 ? DType::kFloat32 : t;
  return lower::Map(x, t, [x, lambd, bias, t, f64, via](const std::vector<loop::Expr>& idx) {
    loop::Expr v = loop::Cast(f64, x.at(idx));
    auto cmp = [](loop::BinaryOp op, const loop::Expr& a, double b) {
      return loop::MakeBinary(op, a, lower::Const(b, DType::kFloat64));
    };
    loop::Expr r =
        loop::Select(cmp(loop::BinaryOp::kGT, v, lambd), loop::Sub(v, lower::Const(bias, f64)),
                     loop::Select(cmp(loop::BinaryOp::kLT, v, -lambd),
                                  loop::Add(v, lower::Const(bias, f64)), lower::Const(0, f64)));
    return loop::Cast(t, loop::Cast(via, r));
  });
}

std::string NotNaN(const AttrValue& v) {
  return std::isnan(std::get<double>(v)) ? "must not be NaN" : "";
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "quantize_linear",
      .doc = "saturate(round_half_even(x / y_scale) + y_zero_point) in f32; x f32 or i32; the "
             "result has the zero point's dtype (u8 or i8), u8 without one; scale and zero point "
             "per tensor or per `axis`",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = {AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{1}}}},
      // Each element reads its own scale and zero point: broadcast-like.
      .pattern = OpPattern::kBroadcast,
      .type_rel = QuantizeRel,
      .ref_kernel = QuantizeKernel,
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>& out_types) { return LowerQuantize(in, attrs, out_types); },
  });
  r.Register(OpDef{
      .name = "dequantize_linear",
      .doc = "(x - x_zero_point) * x_scale as f32; x u8, i8 or i32; scale and zero point per "
             "tensor or per `axis`",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = {AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{1}}}},
      .pattern = OpPattern::kBroadcast,
      .type_rel = DequantizeRel,
      .ref_kernel = DequantizeKernel,
      .lower = [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerDequantize(in, attrs); },
  });
  r.Register(OpDef{
      .name = "shrink",
      .doc = "x - bias if x > lambd, x + bias if x < -lambd, else 0; numeric dtypes",
      .attrs = {AttrSpec{"lambd", AttrKind::kFloat, AttrValue{0.5}, NotNaN},
                AttrSpec{"bias", AttrKind::kFloat, AttrValue{0.0}, NotNaN}},
      .pattern = OpPattern::kElementwise,
      .type_rel = ShrinkRel,
      .ref_kernel = ShrinkKernel,
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) { return std::vector<LTensor>{LowerShrink(in[0], attrs)}; },
  });
}

}  // namespace kiln
