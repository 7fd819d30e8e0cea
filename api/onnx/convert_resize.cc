// ONNX converters of the resize family (ir/ops/resize.cc): Resize and Upsample, both to kiln's
// resize, whose attributes are Resize's; GridSample to grid_sample; RoiAlign to roi_align.
//
// Resize and Upsample. roi, scales and sizes are inputs in ONNX and attributes in kiln:
// NodeContext::CallWithValues makes a constant input the attribute and anything else a dynamic
// call (dyn.resize) that specialization resolves once the values are known.
//
// Opsets: Resize-10 (X, scales) has no coordinate or rounding attributes; it resizes with
// asymmetric coordinates and, for nearest, ONNX Runtime's rounding (kiln's nearest_mode
// "simple"). Resize-11 and 13 take (X, roi, scales, sizes), where an empty tensor stands for
// an absent input (11 requires roi and scales). Upsample is Resize-10 for scales >= 1 with
// linear or nearest: scales is an attribute in Upsample-7 and an input from Upsample-9.
#include <string>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;
using ValueInputs = std::vector<std::pair<std::string, int>>;

// The coordinates and rounding of Resize-10 and Upsample.
Attrs LegacyAttrs(const NodeContext& c) {
  const std::string mode = c.String("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    c.Invalid(StrCat("mode \"", mode, "\" must be nearest or linear"));
  return {{"mode", mode},
          {"coordinate_transformation_mode", std::string("asymmetric")},
          {"nearest_mode", std::string("simple")}};
}

// Appends {attr, input} unless the input is omitted or a constant empty tensor (which ONNX uses
// for "not given", e.g. Resize-11's scales next to sizes).
void AddValueInput(const NodeContext& c, const std::string& attr, int input, ValueInputs* out) {
  Expr e = c.OptIn(input);
  if (!e) return;
  if (const ConstantNode* k = AsConstant(e); k && k->value.numel() == 0) return;
  out->push_back({attr, input});
}

Outs Resize(const NodeContext& c) {
  Expr x = c.In(0);
  ValueInputs values;
  if (c.opset() < 11) {
    AddValueInput(c, "scales", 1, &values);
    return {c.CallWithValues("resize", {x}, LegacyAttrs(c), values)};
  }
  const std::string coord = c.String("coordinate_transformation_mode", "half_pixel");
  Attrs a = {{"mode", c.String("mode", "nearest")},
             {"coordinate_transformation_mode", coord},
             {"nearest_mode", c.String("nearest_mode", "round_prefer_floor")},
             {"cubic_coeff_a", c.Float("cubic_coeff_a", -0.75)},
             {"exclude_outside", c.Int("exclude_outside", 0) != 0},
             {"extrapolation_value", c.Float("extrapolation_value", 0.0)}};
  // Only tf_crop_and_resize reads roi; models pass one (often a placeholder) regardless.
  if (coord == "tf_crop_and_resize") AddValueInput(c, "roi", 1, &values);
  AddValueInput(c, "scales", 2, &values);
  AddValueInput(c, "sizes", 3, &values);
  return {c.CallWithValues("resize", {x}, a, values)};
}

Outs Upsample(const NodeContext& c) {
  Expr x = c.In(0);
  Attrs a = LegacyAttrs(c);
  if (c.opset() >= 9) {
    ValueInputs values;
    AddValueInput(c, "scales", 1, &values);
    return {c.CallWithValues("resize", {x}, a, values)};
  }
  // Upsample-7: scales is a float list attribute.
  const onnx::AttributeProto* scales = nullptr;
  for (const onnx::AttributeProto& attr : c.node().attribute())
    if (attr.name() == "scales") scales = &attr;
  if (!scales || scales->type() != onnx::AttributeProto::FLOATS)
    c.Invalid("attribute 'scales' (a list of floats) is required");
  a.Set("scales", std::vector<double>(scales->floats().begin(), scales->floats().end()));
  return {c.Call("resize", {x}, a)};
}

// GridSample-16 (the first): the attributes map one to one; X and Grid stay inputs. Opset 20
// renames the modes linear and cubic and allows N-D; kiln imports opsets up to 17.
Outs GridSample(const NodeContext& c) {
  Attrs a = {{"mode", c.String("mode", "bilinear")},
             {"padding_mode", c.String("padding_mode", "zeros")},
             {"align_corners", c.Int("align_corners", 0) != 0}};
  return {c.Call("grid_sample", {c.In(0), c.In(1)}, a)};
}

// RoiAlign-10 and 16: X, rois and batch_indices stay inputs. Opset 16 added
// coordinate_transformation_mode (default half_pixel); RoiAlign-10 has none and samples as
// output_half_pixel does.
Outs RoiAlign(const NodeContext& c) {
  const std::string coord = c.opset() >= 16
                                ? c.String("coordinate_transformation_mode", "half_pixel")
                                : std::string("output_half_pixel");
  Attrs a = {{"coordinate_transformation_mode", coord},
             {"mode", c.String("mode", "avg")},
             {"output_height", c.Int("output_height", 1)},
             {"output_width", c.Int("output_width", 1)},
             {"sampling_ratio", c.Int("sampling_ratio", 0)},
             {"spatial_scale", c.Float("spatial_scale", 1.0)}};
  return {c.Call("roi_align", {c.In(0), c.In(1), c.In(2)}, a)};
}

}  // namespace

const std::map<std::string, Converter>& ResizeConverters() {
  static const std::map<std::string, Converter> table = {
      {"GridSample", GridSample},
      {"Resize", Resize},
      {"RoiAlign", RoiAlign},
      {"Upsample", Upsample},
  };
  return table;
}

}  // namespace kiln::onnx_import
