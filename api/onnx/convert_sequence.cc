// ONNX converters of the sequence ops (opset 11 on): sequences of tensors as kiln's
// List[Tensor] ops (ir/sequence.h), resolved to tuples of their elements at specialization.
// Positions and split sizes may be constants or computed from shapes and shape inputs
// (CallWithValues: a graph input there is a value input).
#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

Outs SequenceConstruct(const NodeContext& c) {
  std::vector<Expr> elements;
  for (int i = 0; i < c.num_inputs(); ++i) elements.push_back(c.In(i));
  if (elements.empty()) c.Invalid("it needs at least one input");
  return {c.Call("seq.construct", std::move(elements))};
}

Outs SequenceEmpty(const NodeContext& c) {
  const int64_t onnx_dtype = c.Int("dtype", 1);  // ONNX's default: float
  std::optional<DType> dtype = DTypeFromOnnx(static_cast<int32_t>(onnx_dtype));
  if (!dtype)
    c.Unsupported(
        StrCat("a sequence of ", OnnxTypeName(static_cast<int32_t>(onnx_dtype)), " tensors"));
  return {c.Call("seq.empty", {}, {{"dtype", *dtype}})};
}

Outs SequenceLength(const NodeContext& c) {
  return {c.Call("seq.length", {c.In(0)})};
}

Outs SequenceAt(const NodeContext& c) {
  c.In(1);  // required
  return {c.CallWithValues("seq.at", {c.In(0)}, {}, {{"position", 1}})};
}

Outs SequenceInsert(const NodeContext& c) {
  return {c.CallWithValues("seq.insert", {c.In(0), c.In(1)}, {}, {{"position", 2}})};
}

Outs SequenceErase(const NodeContext& c) {
  return {c.CallWithValues("seq.erase", {c.In(0)}, {}, {{"position", 1}})};
}

// Without `split`, pieces of size 1 (keepdims decides whether they keep the axis); a scalar
// split is the size of every piece but a smaller last one; a vector gives each piece's size.
Outs SplitToSequence(const NodeContext& c) {
  const int64_t axis = c.Int("axis", 0);
  Expr split = c.OptIn(1);
  if (!split)
    return {c.Call("seq.split", {c.In(0)}, {{"axis", axis}, {"keepdims", c.Int("keepdims", 1)}})};
  if (c.RankOf(split) == 0)
    return {c.CallWithValues("seq.split_chunk", {c.In(0)}, {{"axis", axis}}, {{"chunk", 1}})};
  return {c.CallWithValues("seq.split_sizes", {c.In(0)}, {{"axis", axis}}, {{"split", 1}})};
}

Outs ConcatFromSequence(const NodeContext& c) {
  return {c.Call("seq.concat", {c.In(0)},
                 {{"axis", c.Int("axis")}, {"new_axis", c.Int("new_axis", 0)}})};
}

}  // namespace

const std::map<std::string, Converter>& SequenceConverters() {
  static const std::map<std::string, Converter> table = {
      {"ConcatFromSequence", ConcatFromSequence}, {"SequenceAt", SequenceAt},
      {"SequenceConstruct", SequenceConstruct},   {"SequenceEmpty", SequenceEmpty},
      {"SequenceErase", SequenceErase},           {"SequenceInsert", SequenceInsert},
      {"SequenceLength", SequenceLength},         {"SplitToSequence", SplitToSequence},
  };
  return table;
}

}  // namespace kiln::onnx_import
