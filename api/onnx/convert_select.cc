// ONNX converters of the element-picking ops that kiln implements in ir/ops/select.cc and
// ir/ops/transform.cc: GatherElements, GatherND, ScatterElements, ScatterND, Trilu, Hardmax,
// CumSum, Tile, DepthToSpace, SpaceToDepth. Inputs that kiln's ops take as attributes (Tile's
// repeats, which set the output shape; CumSum's axis, which picks the kernel's loops) must be
// constants at import; a computed one is refused as unsupported, naming the input. Trilu's k
// becomes the attribute when constant and stays an input if not.
//
// Opsets: the oldest opset each converter serves is listed in op_table.cc's FamilyOldestOpsets
// (or is the op's schema in force at 13). DepthToSpace before 11 has no `mode` and means DCR,
// the default here; ScatterElements/ScatterND gained `reduction` at 16, defaulting to none.
#include <cmath>

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

// kiln needs the axis at import: it picks the loops of the kernel.
Outs CumSum(const NodeContext& c) {
  std::vector<int64_t> axis = c.ConstInts(1, "axis");
  if (axis.size() != 1) c.Invalid("axis (input 1) must hold one integer");
  return {c.Call("cumsum", {c.In(0)},
                 {{"axis", axis[0]},
                  {"exclusive", c.Int("exclusive", 0) != 0},
                  {"reverse", c.Int("reverse", 0) != 0}})};
}

Outs Tile(const NodeContext& c) {
  return {c.Call("tile", {c.In(0)}, {{"repeats", c.ConstInts(1, "repeats")}})};
}

Outs DepthToSpace(const NodeContext& c) {
  return {c.Call("depth_to_space", {c.In(0)},
                 {{"blocksize", c.Int("blocksize")}, {"mode", c.String("mode", "DCR")}})};
}

Outs SpaceToDepth(const NodeContext& c) {
  return {c.Call("space_to_depth", {c.In(0)}, {{"blocksize", c.Int("blocksize")}})};
}

}  // namespace

const std::map<std::string, Converter>& SelectConverters() {
  static const std::map<std::string, Converter> table = {
      {"CumSum", CumSum},
      {"DepthToSpace", DepthToSpace},
      {"GatherElements", GatherElements},
      {"GatherND", GatherND},
      {"Hardmax", Hardmax},
      {"ScatterElements", ScatterElements},
      {"ScatterND", ScatterND},
      {"SpaceToDepth", SpaceToDepth},
      {"Tile", Tile},
      {"Trilu", Trilu},
  };
  return table;
}

}  // namespace kiln::onnx_import
