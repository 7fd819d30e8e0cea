// ONNX converters of the element-picking ops that kiln implements in ir/ops/select.cc and
// ir/ops/transform.cc: GatherElements, GatherND, ScatterElements (and the older Scatter),
// ScatterND, Trilu, Hardmax, CumSum, Tile, DepthToSpace, SpaceToDepth, OneHot, TopK, Einsum,
// EyeLike, ConstantOfShape, ReverseSequence. Inputs that kiln's ops take as attributes (Tile's
// repeats, which set the output shape; CumSum's axis, which picks the kernel's loops) must be
// constants at import; a computed one is refused as unsupported, naming the input. Trilu's k
// becomes the attribute when constant and stays an input if not.
//
// Opsets: the oldest opset each converter serves is listed in op_table.cc's FamilyOldestOpsets
// (or is the op's schema in force at 13). DepthToSpace before 11 has no `mode` and means DCR,
// the default here; ScatterElements/ScatterND gained `reduction` at 16, defaulting to none.
// OneHot and TopK branch on the opset (below); Scatter exists in opsets 9 and 10 only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

Outs GatherElements(const NodeContext& c) {
  return {c.Call("gather_elements", {c.In(0), c.In(1)}, {{"axis", c.Int("axis", 0)}})};
}

// k is an optional scalar input (default 0): a constant one becomes kiln's attribute, a
// computed one stays an input (the output shape does not depend on it).
Outs Trilu(const NodeContext& c) {
  Attrs attrs{{"upper", c.Int("upper", 1) != 0}};
  if (!c.OptIn(1)) return {c.Call("trilu", {c.In(0)}, attrs)};
  std::optional<double> v = c.ConstScalar(1);
  if (!v) return {c.Call("trilu", {c.In(0), c.In(1)}, attrs)};
  if (*v != std::trunc(*v)) c.Invalid("k (input 1) must be an integer");
  attrs.Set("k", static_cast<int64_t>(*v));
  return {c.Call("trilu", {c.In(0)}, attrs)};
}

// reduction (from opset 16) is none, add or mul; opset 18's max/min are not converted (kiln
// reads up to opset 17).
std::string Reduction(const NodeContext& c) {
  std::string r = c.String("reduction", "none");
  if (r != "none" && r != "add" && r != "mul")
    c.Unsupported(StrCat("reduction '", r, "' (kiln has none, add, mul)"));
  return r;
}

Outs ScatterElements(const NodeContext& c) {
  return {c.Call("scatter_elements", {c.In(0), c.In(1), c.In(2)},
                 {{"axis", c.Int("axis", 0)}, {"reduction", Reduction(c)}})};
}

Outs ScatterND(const NodeContext& c) {
  return {c.Call("scatter_nd", {c.In(0), c.In(1), c.In(2)}, {{"reduction", Reduction(c)}})};
}

Outs GatherND(const NodeContext& c) {
  return {c.Call("gather_nd", {c.In(0), c.In(1)}, {{"batch_dims", c.Int("batch_dims", 0)}})};
}

// Opset 13's Hardmax: along one axis (earlier opsets coerce to 2-D, a different meaning).
Outs Hardmax(const NodeContext& c) {
  return {c.Call("hardmax", {c.In(0)}, {{"axis", c.Int("axis", -1)}})};
}

// The axis picks the kernel's loops: a computed one is resolved at specialization.
Outs CumSum(const NodeContext& c) {
  c.In(1);  // required
  return {c.CallWithValues(
      "cumsum", {c.In(0)},
      {{"exclusive", c.Int("exclusive", 0) != 0}, {"reverse", c.Int("reverse", 0) != 0}},
      {{"axis", 1}})};
}

Outs Tile(const NodeContext& c) {
  c.In(1);  // required
  return {c.CallWithValues("tile", {c.In(0)}, {}, {{"repeats", 1}})};
}

Outs DepthToSpace(const NodeContext& c) {
  return {c.Call("depth_to_space", {c.In(0)},
                 {{"blocksize", c.Int("blocksize")}, {"mode", c.String("mode", "DCR")}})};
}

Outs SpaceToDepth(const NodeContext& c) {
  return {c.Call("space_to_depth", {c.In(0)}, {{"blocksize", c.Int("blocksize")}})};
}

// Scatter (opsets 9 and 10; deprecated in 11) is ScatterElements without `reduction`.
Outs Scatter(const NodeContext& c) {
  return {c.Call("scatter_elements", {c.In(0), c.In(1), c.In(2)}, {{"axis", c.Int("axis", 0)}})};
}

// depth is an input (one element, possibly a float: it truncates). OneHot-9 and -10 give all
// off for a negative index, where 11 counts it from depth: there the indices are cast to i64
// (as one_hot itself casts them) and negative ones replaced by INT64_MIN, which stays outside
// [-depth, depth) for any depth.
Outs OneHot(const NodeContext& c) {
  Expr indices = c.In(0);
  c.In(1);  // required
  if (c.opset() < 11) {
    Expr k = c.Call("cast", {indices}, {{"dtype", DType::kInt64}});
    Expr negative = c.Call("less", {k, c.Scalar(0, DType::kInt64)});
    indices = c.Call(
        "where",
        {negative,
         c.Scalar(static_cast<double>(std::numeric_limits<int64_t>::min()), DType::kInt64), k});
  }
  return {c.CallWithValues("one_hot", {indices, c.In(2)}, {{"axis", c.Int("axis", -1)}},
                           {{"depth", 1}})};
}

// k is an attribute in TopK-1 and an input (one i64 element) from 10; largest and sorted came
// in 11, with the defaults (1) that 1 and 10 meant. kiln's topk returns (values, indices).
Outs TopK(const NodeContext& c) {
  Attrs attrs{{"axis", c.Int("axis", -1)},
              {"largest", c.Int("largest", 1) != 0},
              {"sorted", c.Int("sorted", 1) != 0}};
  Expr result;
  if (c.opset() < 10) {
    attrs.Set("k", c.Int("k"));
    result = c.Call("topk", {c.In(0)}, attrs);
  } else {
    c.In(1);  // required
    result = c.CallWithValues("topk", {c.In(0)}, attrs, {{"k", 1}});
  }
  Outs outs;
  for (int i = 0; i < std::min(c.num_outputs(), 2); ++i)
    outs.push_back(MakeTupleGetItem(result, i));
  return outs;
}

Outs Einsum(const NodeContext& c) {
  std::vector<Expr> args;
  for (int i = 0; i < c.num_inputs(); ++i) args.push_back(c.In(i));
  return {c.Call("einsum", args, {{"equation", c.String("equation")}})};
}

// dtype (an ONNX data type) defaults to the input's.
Outs EyeLike(const NodeContext& c) {
  DType dtype = c.DTypeOf(c.In(0));
  if (c.HasAttr("dtype")) {
    const int32_t onnx_type = static_cast<int32_t>(c.Int("dtype"));
    std::optional<DType> d = DTypeFromOnnx(onnx_type);
    if (!d) c.Unsupported(StrCat("dtype ", OnnxTypeName(onnx_type)));
    dtype = *d;
  }
  return {c.Call("eye_like", {c.In(0)}, {{"k", c.Int("k", 0)}, {"dtype", dtype}})};
}

// `value` is a one-element tensor attribute whose dtype is the output's (absent: f32 0). kiln
// carries the value as a double, so an i64 value that a double cannot hold exactly is refused.
Outs ConstantOfShape(const NodeContext& c) {
  Attrs attrs{{"value", 0.0}, {"dtype", DType::kFloat32}};
  for (const onnx::AttributeProto& a : c.node().attribute()) {
    if (a.name() != "value") continue;
    if (a.type() != onnx::AttributeProto::TENSOR) c.Invalid("attribute 'value' must be a tensor");
    Tensor v = TensorFromProto(a.t(), "", "attribute 'value'");
    if (v.numel() != 1)
      c.Invalid(StrCat("attribute 'value' must hold one element, got ", v.TypeString()));
    const double x = v.GetAsDouble(0);
    if (v.dtype() == DType::kInt64 &&
        (x >= 0x1p63 || static_cast<int64_t>(x) != v.data<int64_t>()[0]))
      c.Unsupported(StrCat("value ", v.data<int64_t>()[0], " (kiln holds values as doubles)"));
    attrs = {{"value", x}, {"dtype", v.dtype()}};
  }
  c.In(0);  // required
  return {c.CallWithValues("constant_of_shape", {}, attrs, {{"shape", 0}})};
}

Outs ReverseSequence(const NodeContext& c) {
  return {c.Call("reverse_sequence", {c.In(0), c.In(1)},
                 {{"batch_axis", c.Int("batch_axis", 1)}, {"time_axis", c.Int("time_axis", 0)}})};
}

}  // namespace

const std::map<std::string, Converter>& SelectConverters() {
  static const std::map<std::string, Converter> table = {
      {"ConstantOfShape", ConstantOfShape},
      {"CumSum", CumSum},
      {"DepthToSpace", DepthToSpace},
      {"Einsum", Einsum},
      {"EyeLike", EyeLike},
      {"GatherElements", GatherElements},
      {"GatherND", GatherND},
      {"Hardmax", Hardmax},
      {"OneHot", OneHot},
      {"ReverseSequence", ReverseSequence},
      {"Scatter", Scatter},
      {"ScatterElements", ScatterElements},
      {"ScatterND", ScatterND},
      {"SpaceToDepth", SpaceToDepth},
      {"Tile", Tile},
      {"TopK", TopK},
      {"Trilu", Trilu},
  };
  return table;
}

}  // namespace kiln::onnx_import
