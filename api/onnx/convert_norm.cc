// ONNX converters of the normalizations and quantization ops (ir/ops/norm.cc, quantize.cc):
// InstanceNormalization, LRN, MeanVarianceNormalization, QuantizeLinear, DequantizeLinear,
// Shrink, and DynamicQuantizeLinear, which is composed of kiln ops as ONNX's function body
// defines it. The kiln ops share ONNX's attribute names, defaults and semantics.
#include <string>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

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

}  // namespace

const std::map<std::string, Converter>& NormConverters() {
  static const std::map<std::string, Converter> table = {
      {"DequantizeLinear", DequantizeLinear},
      {"DynamicQuantizeLinear", DynamicQuantizeLinear},
      {"InstanceNormalization", InstanceNormalization},
      {"LRN", LRN},
      {"MeanVarianceNormalization", MeanVarianceNormalization},
      {"QuantizeLinear", QuantizeLinear},
      {"Shrink", Shrink},
  };
  return table;
}

}  // namespace kiln::onnx_import
