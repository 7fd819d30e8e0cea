// ONNX converters of the normalizations and quantization ops (ir/ops/norm.cc, quantize.cc):
// InstanceNormalization, LRN, MeanVarianceNormalization, QuantizeLinear, DequantizeLinear,
// Shrink, and DynamicQuantizeLinear, which is composed of kiln ops as ONNX's function body
// defines it. The kiln ops share ONNX's attribute names, defaults and semantics. The integer
// and quantized products (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) are
// composed of cast, sub, matmul, conv, mul, div and round; see their section.
#include <algorithm>
#include <string>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;
using Ints = std::vector<int64_t>;

// Opset 1's consumed_inputs is a legacy optimization hint with no effect on the result.
Outs InstanceNormalization(const NodeContext& c) {
  return {c.Call("instance_norm", {c.In(0), c.In(1), c.In(2)},
                 {{"epsilon", c.Float("epsilon", 1e-5)}})};
}

Outs LRN(const NodeContext& c) {
  return {c.Call("lrn", {c.In(0)},
                 {{"size", c.Int("size")},
                  {"alpha", c.Float("alpha", 1e-4)},
                  {"beta", c.Float("beta", 0.75)},
                  {"bias", c.Float("bias", 1.0)}})};
}

Outs MeanVarianceNormalization(const NodeContext& c) {
  return {c.Call("mean_variance_normalization", {c.In(0)},
                 {{"axes", c.Ints("axes", std::vector<int64_t>{0, 2, 3})}})};
}

// The scale and zero point are tensors to kiln too, so graph inputs need no constant folding.
// Opset 10 has no axis attribute and a per-tensor scale only, for which axis is ignored.
Outs QuantizeOrDequantize(const NodeContext& c, const char* op) {
  Outs args{c.In(0), c.In(1)};
  if (Expr zp = c.OptIn(2)) args.push_back(zp);
  return {c.Call(op, args, {{"axis", c.Int("axis", 1)}})};
}

Outs QuantizeLinear(const NodeContext& c) {
  return QuantizeOrDequantize(c, "quantize_linear");
}

Outs DequantizeLinear(const NodeContext& c) {
  return QuantizeOrDequantize(c, "dequantize_linear");
}

// ONNX's function body, op for op: the range [min(x), max(x)] widened to include 0,
//   scale = (max - min) / 255,  zero_point = cast<u8>(round(clip(0 - min / scale, 0, 255))),
//   y = quantize_linear(x, scale, zero_point).
// All f32; an x of zeros only gives scale 0 and a NaN zero point, as ONNX's definition does.
Outs DynamicQuantizeLinear(const NodeContext& c) {
  Expr x = c.In(0);
  if (c.DTypeOf(x) != DType::kFloat32)
    c.Invalid(StrCat("x must be f32, not ", DTypeName(c.DTypeOf(x))));
  const DType f32 = DType::kFloat32;
  Expr q_min = c.Scalar(0, f32), q_max = c.Scalar(255, f32);
  Attrs whole{{"keepdims", false}};  // empty axes: over every dim, to a scalar
  Expr lo = c.Call("minimum", {c.Call("min", {x}, whole), q_min});
  Expr hi = c.Call("maximum", {c.Call("max", {x}, whole), q_min});
  Expr scale = c.Call("div", {c.Call("sub", {hi, lo}), q_max});
  Expr zp_fp = c.Call("sub", {q_min, c.Call("div", {lo, scale})});
  Expr zp_clipped = c.Call("clip", {zp_fp}, {{"min", 0.0}, {"max", 255.0}});
  Expr zp = c.Call("cast", {c.Call("round", {zp_clipped})}, {{"dtype", DType::kUInt8}});
  return {c.Call("quantize_linear", {x, scale, zp}), scale, zp};
}

Outs Shrink(const NodeContext& c) {
  return {c.Call("shrink", {c.In(0)},
                 {{"lambd", c.Float("lambd", 0.5)}, {"bias", c.Float("bias", 0.0)}})};
}

// ---- integer and quantized matmul and conv ----
//
// Each operand is centered exactly, cast(x) - cast(zero_point) (8-bit values, so no rounding),
// and multiplied by kiln's matmul or conv:
//   matmul in i32: kiln accumulates integers in wrapping i64 and truncates to i32, which is
//     the wrap-around of 32-bit accumulation that ONNX allows ("may overflow only in 32 bits");
//   conv in f64: kiln's conv takes floats only; the products of 9-bit differences are below
//     2^16, so every partial sum over up to 2^37 taps is an integer below 2^53 and the f64 sum
//     is exact; padded positions contribute 0, which is ONNX's padding with the zero point.
// The QLinear ops then requantize as ONNX's reference implementation does, in its precisions:
//   y = saturate(round_half_even(acc * (a_scale * b_scale / y_scale) + y_zero_point))
// with the factor in f32 (NumPy's f32 arrays) and the rest in f64 (NumPy promotes the i32
// accumulator times an f32 array to f64); the final cast saturates. quantize_linear divides by
// a scale in f32, which rounds differently, so it is not reused.

bool IsQuantDType(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// Input i, an 8-bit quantized tensor.
Expr QuantIn(const NodeContext& c, int i, const char* name) {
  Expr x = c.In(i);
  DType t = c.DTypeOf(x);
  if (!IsQuantDType(t))
    c.Invalid(StrCat(name, " (input ", i, ") must be u8 or i8, not ", DTypeName(t)));
  return x;
}

// Input i, the zero point of `x`, with x's dtype; nullptr when optional and absent.
Expr ZeroPointIn(const NodeContext& c, int i, const char* name, const Expr& x, const char* x_name,
                 bool optional = false) {
  Expr zp = optional ? c.OptIn(i) : c.In(i);
  if (!zp) return zp;
  DType t = c.DTypeOf(zp), xt = c.DTypeOf(x);
  if (t != xt)
    c.Invalid(StrCat(name, " (input ", i, ") must have the dtype of ", x_name, " (", DTypeName(xt),
                     "), not ", DTypeName(t)));
  return zp;
}

Expr ScaleIn(const NodeContext& c, int i, const char* name) {
  Expr s = c.In(i);
  DType t = c.DTypeOf(s);
  if (t != DType::kFloat32)
    c.Invalid(StrCat(name, " (input ", i, ") must be f32, not ", DTypeName(t)));
  return s;
}

// A one-element shape ([], [1], [1, 1]...): a per-tensor scale or zero point.
bool IsSingle(const Shape& s) {
  for (const Dim& d : s)
    if (d != Dim(1)) return false;
  return true;
}

// A per-tensor parameter as a scalar, so it broadcasts against any rank without adding dims
// (a [1] would turn the scalar product of two vectors into [1]).
Expr AsScalar(const NodeContext& c, const Expr& p) {
  return c.RankOf(p) == 0 ? p : c.Call("reshape", {p}, {{"shape", Ints{}}});
}

Expr PerTensorIn(const NodeContext& c, const Expr& p, const char* name) {
  Shape s = c.ShapeOf(p);
  if (!IsSingle(s))
    c.Invalid(StrCat(name, " ", ShapeToString(s), " must be a scalar (per tensor)"));
  return AsScalar(c, p);
}

// Equal, or not known to differ: a symbolic dim is checked by the broadcast that uses it.
bool MayEqual(const Dim& a, const Dim& b) {
  return a == b || !a.is_const() || !b.is_const();
}

// A scale or zero point of matmul operand x (`x_name`, shape `xs`) as a tensor that broadcasts
// against x and against the product: per tensor -> a scalar; per row of a: [M] -> [M, 1], or
// [..., M, 1] as given; per column of b: [N], or [..., 1, N] as given. A 1-D operand has no
// rows or columns, so its parameters are per tensor.
Expr MatmulParam(const NodeContext& c, const Expr& p, const char* name, const Shape& xs,
                 const char* x_name, bool per_row) {
  Shape ps = c.ShapeOf(p);
  if (IsSingle(ps)) return AsScalar(c, p);
  const int r = static_cast<int>(xs.size()), pr = static_cast<int>(ps.size());
  const int follows = per_row ? r - 2 : r - 1, single = per_row ? r - 1 : r - 2;
  if (r >= 2 && pr == 1 && MayEqual(ps[0], xs[follows]))
    return per_row ? c.Call("reshape", {p}, {{"shape", Ints{-1, 1}}}) : p;
  bool full = r >= 2 && pr == r;
  for (int d = 0; full && d < r; ++d)
    full = d == single ? ps[d] == Dim(1) : ps[d] == Dim(1) || MayEqual(ps[d], xs[d]);
  if (full) return p;
  c.Invalid(StrCat(name, " ", ShapeToString(ps), " must be a scalar (per tensor) or per ",
                   per_row ? "row" : "column", " of ", x_name, " ", ShapeToString(xs), ": ",
                   per_row ? "[M] or [..., M, 1]" : "[N] or [..., 1, N]"));
}

// A scale or zero point of a conv weight w (shape `ws`): per tensor -> a scalar; per output
// channel: [M] -> [M, 1, ..., 1] of rank `rank`, which broadcasts along dim 0 of w (rank
// w.ndim) or dim 1 of the output (rank w.ndim - 1).
Expr ConvWeightParam(const NodeContext& c, const Expr& p, const char* name, const Shape& ws,
                     int rank) {
  Shape ps = c.ShapeOf(p);
  if (IsSingle(ps)) return AsScalar(c, p);
  if (ps.size() != 1 || ws.empty() || !MayEqual(ps[0], ws[0]))
    c.Invalid(StrCat(name, " ", ShapeToString(ps),
                     " must be a scalar (per tensor) or [M], M the output channels of w ",
                     ShapeToString(ws)));
  Ints shape(rank, 1);
  shape[0] = -1;
  return c.Call("reshape", {p}, {{"shape", shape}});
}

// cast(x, t) - cast(zp, t); zp may be null (0), else already shaped to broadcast against x.
Expr Centered(const NodeContext& c, const Expr& x, const Expr& zp, DType t) {
  Expr v = c.Call("cast", {x}, {{"dtype", t}});
  if (!zp) return v;
  return c.Call("sub", {v, c.Call("cast", {zp}, {{"dtype", t}})});
}

// saturate(round_half_even(acc * factor + y_zero_point)) in the reference's precisions (see
// above); factor is f32, y_zp a scalar whose dtype is the result's.
Expr Requantize(const NodeContext& c, const Expr& acc, const Expr& factor, const Expr& y_zp) {
  const DType f64 = DType::kFloat64;
  auto f = [&](const Expr& e) { return c.Call("cast", {e}, {{"dtype", f64}}); };
  Expr v = c.Call("add", {c.Call("mul", {f(acc), f(factor)}), f(y_zp)});
  return c.Call("cast", {c.Call("round", {v})}, {{"dtype", c.DTypeOf(y_zp)}});
}

Outs MatMulInteger(const NodeContext& c) {
  Expr a = QuantIn(c, 0, "A"), b = QuantIn(c, 1, "B");
  Expr a_zp = ZeroPointIn(c, 2, "a_zero_point", a, "A", true);
  Expr b_zp = ZeroPointIn(c, 3, "b_zero_point", b, "B", true);
  Shape sa = c.ShapeOf(a), sb = c.ShapeOf(b);
  if (a_zp) a_zp = MatmulParam(c, a_zp, "a_zero_point", sa, "A", true);
  if (b_zp) b_zp = MatmulParam(c, b_zp, "b_zero_point", sb, "B", false);
  const DType i32 = DType::kInt32;
  return {c.Call("matmul", {Centered(c, a, a_zp, i32), Centered(c, b, b_zp, i32)})};
}

Outs QLinearMatMul(const NodeContext& c) {
  Expr a = QuantIn(c, 0, "a"), b = QuantIn(c, 3, "b");
  Expr a_scale = ScaleIn(c, 1, "a_scale"), b_scale = ScaleIn(c, 4, "b_scale");
  Expr y_scale = ScaleIn(c, 6, "y_scale");
  Expr a_zp = ZeroPointIn(c, 2, "a_zero_point", a, "a");
  Expr b_zp = ZeroPointIn(c, 5, "b_zero_point", b, "b");
  Expr y_zp = QuantIn(c, 7, "y_zero_point");
  auto same_shape = [&](const Expr& scale, const Expr& zp, const char* s, const char* z) {
    if (c.ShapeOf(scale) != c.ShapeOf(zp))
      c.Invalid(StrCat(z, " ", ShapeToString(c.ShapeOf(zp)), " must have the shape of ", s, " ",
                       ShapeToString(c.ShapeOf(scale))));
  };
  same_shape(a_scale, a_zp, "a_scale", "a_zero_point");
  same_shape(b_scale, b_zp, "b_scale", "b_zero_point");
  Shape sa = c.ShapeOf(a), sb = c.ShapeOf(b);
  const DType i32 = DType::kInt32;
  Expr ca = Centered(c, a, MatmulParam(c, a_zp, "a_zero_point", sa, "a", true), i32);
  Expr cb = Centered(c, b, MatmulParam(c, b_zp, "b_zero_point", sb, "b", false), i32);
  // matmul drops the M of a 1-D a and the N of a 1-D b from the product; a per-row or
  // per-column factor would then broadcast along the wrong dim. The product is kept 2-D
  // ([1, K] x [K, 1]) and the added dims are squeezed after requantizing.
  Ints squeeze;
  if (sa.size() == 1) {
    ca = c.Call("reshape", {ca}, {{"shape", Ints{1, -1}}});
    squeeze.push_back(-2);
  }
  if (sb.size() == 1) {
    cb = c.Call("reshape", {cb}, {{"shape", Ints{-1, 1}}});
    squeeze.push_back(-1);
  }
  Expr factor = c.Call("div", {c.Call("mul", {MatmulParam(c, a_scale, "a_scale", sa, "a", true),
                                              MatmulParam(c, b_scale, "b_scale", sb, "b", false)}),
                               PerTensorIn(c, y_scale, "y_scale")});
  Expr y = Requantize(c, c.Call("matmul", {ca, cb}), factor, PerTensorIn(c, y_zp, "y_zero_point"));
  if (!squeeze.empty()) y = c.Call("squeeze", {y}, {{"axes", squeeze}});
  return {y};
}

// Conv's attributes, with ONNX's defaults (empty lists: kiln's own, which are ONNX's).
Attrs ConvAttrs(const NodeContext& c) {
  return {{"strides", c.Ints("strides", Ints{})},
          {"pads", c.Ints("pads", Ints{})},
          {"dilations", c.Ints("dilations", Ints{})},
          {"auto_pad", c.String("auto_pad", "NOTSET")},
          {"group", c.Int("group", 1)},
          {"kernel_shape", c.Ints("kernel_shape", Ints{})}};
}

// The exact f64 conv of the centered x and w (see above), plus the i32 bias B at input
// `bias_input` when present.
Expr CenteredConv(const NodeContext& c, const Expr& x, const Expr& x_zp, const Expr& w,
                  const Expr& w_zp, int bias_input) {
  const DType f64 = DType::kFloat64;
  Shape ws = c.ShapeOf(w);
  Expr xzp = x_zp ? PerTensorIn(c, x_zp, "x_zero_point") : x_zp;
  Expr wzp =
      w_zp ? ConvWeightParam(c, w_zp, "w_zero_point", ws, static_cast<int>(ws.size())) : w_zp;
  Outs args = {Centered(c, x, xzp, f64), Centered(c, w, wzp, f64)};
  if (Expr bias = bias_input >= 0 ? c.OptIn(bias_input) : nullptr) {
    if (c.DTypeOf(bias) != DType::kInt32)
      c.Invalid(StrCat("B (input ", bias_input, ") must be i32, not ", DTypeName(c.DTypeOf(bias))));
    args.push_back(c.Call("cast", {bias}, {{"dtype", f64}}));
  }
  return c.Call("conv", args, ConvAttrs(c));
}

Outs ConvInteger(const NodeContext& c) {
  Expr x = QuantIn(c, 0, "x"), w = QuantIn(c, 1, "w");
  Expr x_zp = ZeroPointIn(c, 2, "x_zero_point", x, "x", true);
  Expr w_zp = ZeroPointIn(c, 3, "w_zero_point", w, "w", true);
  // The exact integer sum converts to i32 exactly (saturating where 32 bits overflow).
  return {c.Call("cast", {CenteredConv(c, x, x_zp, w, w_zp, -1)}, {{"dtype", DType::kInt32}})};
}

Outs QLinearConv(const NodeContext& c) {
  Expr x = QuantIn(c, 0, "x"), w = QuantIn(c, 3, "w");
  Expr x_scale = PerTensorIn(c, ScaleIn(c, 1, "x_scale"), "x_scale");
  Expr w_scale = ScaleIn(c, 4, "w_scale");
  Expr y_scale = PerTensorIn(c, ScaleIn(c, 6, "y_scale"), "y_scale");
  Expr x_zp = ZeroPointIn(c, 2, "x_zero_point", x, "x");
  Expr w_zp = ZeroPointIn(c, 5, "w_zero_point", w, "w");
  Expr y_zp = QuantIn(c, 7, "y_zero_point");
  y_zp = PerTensorIn(c, y_zp, "y_zero_point");
  if (c.ShapeOf(w_scale) != c.ShapeOf(w_zp))
    c.Invalid(StrCat("w_zero_point ", ShapeToString(c.ShapeOf(w_zp)),
                     " must have the shape of w_scale ", ShapeToString(c.ShapeOf(w_scale))));
  Shape ws = c.ShapeOf(w);
  // A per-channel factor [M, 1, ..., 1] broadcasts along the output's channel dim (dim 1).
  Expr w_factor =
      ConvWeightParam(c, w_scale, "w_scale", ws, std::max(1, static_cast<int>(ws.size()) - 1));
  Expr factor = c.Call("div", {c.Call("mul", {x_scale, w_factor}), y_scale});
  return {Requantize(c, CenteredConv(c, x, x_zp, w, w_zp, 8), factor, y_zp)};
}

}  // namespace

const std::map<std::string, Converter>& NormConverters() {
  static const std::map<std::string, Converter> table = {
      {"ConvInteger", ConvInteger},
      {"DequantizeLinear", DequantizeLinear},
      {"DynamicQuantizeLinear", DynamicQuantizeLinear},
      {"InstanceNormalization", InstanceNormalization},
      {"LRN", LRN},
      {"MatMulInteger", MatMulInteger},
      {"MeanVarianceNormalization", MeanVarianceNormalization},
      {"QLinearConv", QLinearConv},
      {"QLinearMatMul", QLinearMatMul},
      {"QuantizeLinear", QuantizeLinear},
      {"Shrink", Shrink},
  };
  return table;
}

}  // namespace kiln::onnx_import
