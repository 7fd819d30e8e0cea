// ONNX converters of the ops whose output sizes depend on values (ir/ops/data_dependent.cc):
// NonZero, Compress, Unique, NonMaxSuppression. A model holding one runs in segments
// (engine/segments.h).
//
// Opsets (op_table.cc's FamilyOldestOpsets): NonZero 9, Compress 9 (negative axes from 11 only
// widen it), Unique 11, NonMaxSuppression 10 (11 changed nothing the converter reads).
#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

// ONNX's optional axis attribute as kiln's: [] when absent, else [axis].
std::vector<int64_t> OptionalAxis(const NodeContext& c) {
  if (!c.HasAttr("axis")) return {};
  return {c.Int("axis")};
}

Outs NonZero(const NodeContext& c) {
  return {c.Call("nonzero", {c.In(0)})};
}

Outs Compress(const NodeContext& c) {
  return {c.Call("compress", {c.In(0), c.In(1)}, {{"axis", OptionalAxis(c)}})};
}

// Up to four outputs, in the op's order: values, indices, inverse_indices, counts.
Outs Unique(const NodeContext& c) {
  Expr result =
      c.Call("unique", {c.In(0)}, {{"sorted", c.Int("sorted", 1) != 0}, {"axis", OptionalAxis(c)}});
  Outs outs;
  for (int i = 0; i < std::min(c.num_outputs(), 4); ++i)
    outs.push_back(MakeTupleGetItem(result, i));
  return outs;
}

// Omitted inputs before a given one take ONNX's defaults (no boxes, IoU threshold 0); an
// omitted score_threshold stays absent (no score filter).
Outs NonMaxSuppression(const NodeContext& c) {
  std::vector<Expr> args = {c.In(0), c.In(1)};
  Expr max_out = c.OptIn(2), iou = c.OptIn(3), score = c.OptIn(4);
  if (max_out || iou || score) args.push_back(max_out ? max_out : c.Scalar(0, DType::kInt64));
  if (iou || score) args.push_back(iou ? iou : c.Scalar(0, DType::kFloat32));
  if (score) args.push_back(score);
  return {
      c.Call("non_max_suppression", args, {{"center_point_box", c.Int("center_point_box", 0)}})};
}

}  // namespace

const std::map<std::string, Converter>& DataDependentConverters() {
  static const std::map<std::string, Converter> table = {
      {"Compress", Compress},
      {"NonMaxSuppression", NonMaxSuppression},
      {"NonZero", NonZero},
      {"Unique", Unique},
  };
  return table;
}

}  // namespace kiln::onnx_import
