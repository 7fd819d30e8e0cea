// Sequence ops (ONNX sequences as List[Tensor[...]]): their types before specialization. What
// they become at specialization, and the element typing rules: ir/sequence.h. They have no
// reference kernel and no lowering: nothing compiled or folded ever holds one.
#include <algorithm>

#include "ir/dynamic.h"
#include "ir/ops/op_util.h"
#include "ir/sequence.h"

namespace kiln {

namespace {

using V = std::vector<int64_t>;

// The element type of sequence argument `i`.
const TensorTypeNode& Elem(const TypeRelContext& ctx, int i) {
  const TensorTypeNode* el = SequenceElement(ctx.arg(i));
  if (!el)
    ctx.Fail(StrCat("argument ", i, " must be a sequence of tensors (List[Tensor[...]]), got ",
                    TypeToString(ctx.arg(i))));
  return *el;
}

// The element type of a non-empty sequence argument `i`, as the tensor it reads.
Type ReadElement(const TypeRelContext& ctx, int i, const char* what) {
  const TensorTypeNode& el = Elem(ctx, i);
  if (IsNoElementYet(el))
    ctx.Fail(StrCat(what, " a sequence that holds no element (", TypeToString(ctx.arg(i)), ")"));
  return TensorType(el.shape, el.dtype);
}

Type Join(const TypeRelContext& ctx, const TensorTypeNode& a, const TensorTypeNode& b) {
  Type out;
  std::string why = JoinElements(a, b, &out);
  if (!why.empty()) ctx.Fail(why);
  return out;
}

// A position or split value argument `i`, where present: an integer tensor of rank 0 or 1.
void CheckValueArg(const TypeRelContext& ctx, int i, const char* what) {
  if (i >= ctx.num_args()) return;
  const TensorTypeNode& t = ctx.tensor(i);
  if (!IsInteger(t.dtype) || t.ndim() > 1)
    ctx.Fail(StrCat("the ", what, " (argument ", i, ") must be an integer scalar or vector, got ",
                    TypeToString(ctx.arg(i))));
}

Type ConstructRel(TypeRelContext& ctx) {
  Type el = TensorType(ctx.tensor(0).shape, ctx.tensor(0).dtype);
  for (int i = 1; i < ctx.num_args(); ++i) el = Join(ctx, *AsTensor(el), ctx.tensor(i));
  return SequenceType(el);
}

Type AtRel(TypeRelContext& ctx) {
  CheckValueArg(ctx, 1, "position");
  return ReadElement(ctx, 0, "reading from");
}

Type InsertRel(TypeRelContext& ctx) {
  CheckValueArg(ctx, 2, "position");
  return SequenceType(Join(ctx, Elem(ctx, 0), ctx.tensor(1)));
}

Type EraseRel(TypeRelContext& ctx) {
  CheckValueArg(ctx, 1, "position");
  Elem(ctx, 0);
  return ctx.arg(0);
}

// Pieces along `axis`: one element, of size 1 there (or without it where keepdims is 0) for
// seq.split, of a size known only from the values otherwise.
Type SplitRel(TypeRelContext& ctx, bool unit_pieces) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() == 0) ctx.Fail("cannot split a scalar (rank 0)");
  if (!unit_pieces) CheckValueArg(ctx, 1, "split");
  const int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  Shape s = x.shape;
  if (!unit_pieces) {
    s[axis] = TypeRelContext::UnknownDim();
  } else if (ctx.attrs().GetInt("keepdims") == 0) {
    s.erase(s.begin() + axis);
  } else {
    s[axis] = Dim(1);
  }
  return SequenceType(TensorType(std::move(s), x.dtype));
}

Type ConcatRel(TypeRelContext& ctx) {
  Type el = ReadElement(ctx, 0, "concatenating");
  const TensorTypeNode& t = *AsTensor(el);
  const bool stack = ctx.attrs().GetInt("new_axis") != 0;
  Shape s = t.shape;
  const int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), t.ndim() + (stack ? 1 : 0));
  if (stack) {
    s.insert(s.begin() + axis, TypeRelContext::UnknownDim());
  } else {
    s[axis] = TypeRelContext::UnknownDim();
  }
  return TensorType(std::move(s), t.dtype);
}

// The op `def` and its dynamic variant `dyn.<name>`, which takes the attributes `value_attrs`
// as its last arguments (the first `min_values` of them required).
void RegisterWithVariant(OpRegistry& r, OpDef def, std::vector<std::string> value_attrs,
                         int min_values) {
  OpDef dyn = def;
  dyn.name = StrCat("dyn.", def.name);
  dyn.doc = StrCat(def.name, " whose ", value_attrs.front(),
                   " arrives as a tensor argument; resolved at specialization");
  dyn.attrs.clear();
  for (const AttrSpec& a : def.attrs)
    if (std::find(value_attrs.begin(), value_attrs.end(), a.name) == value_attrs.end())
      dyn.attrs.push_back(a);
  dyn.num_data_args = def.min_inputs;
  dyn.min_inputs = def.min_inputs + min_values;
  dyn.max_inputs = def.min_inputs + static_cast<int>(value_attrs.size());
  dyn.static_op = def.name;
  dyn.value_attrs = std::move(value_attrs);
  r.Register(std::move(dyn));
  r.Register(std::move(def));
}

OpDef SequenceOp(std::string name, std::string doc, int min_inputs, int max_inputs,
                 std::vector<AttrSpec> attrs, TypeRelFn rel) {
  OpDef d;
  d.name = std::move(name);
  d.doc = std::move(doc);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.attrs = std::move(attrs);
  d.pattern = OpPattern::kOpaque;
  d.type_rel = std::move(rel);
  return d;
}

}  // namespace

void RegisterSequenceOps(OpRegistry& r) {
  const AttrSpec position{"position", AttrKind::kInts, AttrValue{V{}}};
  r.Register(SequenceOp("seq.construct", "a sequence of the given tensors (ONNX SequenceConstruct)",
                        1, -1, {}, ConstructRel));
  r.Register(SequenceOp("seq.empty", "an empty sequence of `dtype` tensors (ONNX SequenceEmpty)", 0,
                        0, {{"dtype", AttrKind::kDType, AttrValue{DType::kFloat32}}},
                        [](TypeRelContext& ctx) {
                          return SequenceType(NoElementYet(ctx.attrs().GetDType("dtype")));
                        }));
  r.Register(SequenceOp("seq.length", "the number of elements (ONNX SequenceLength)", 1, 1, {},
                        [](TypeRelContext& ctx) {
                          Elem(ctx, 0);
                          return TensorType({}, DType::kInt64);
                        }));
  r.Register(SequenceOp(
      "seq.concat",
      "the elements joined along `axis`, or stacked along a new one where "
      "new_axis is 1 (ONNX ConcatFromSequence)",
      1, 1,
      {{"axis", AttrKind::kInt, std::nullopt}, {"new_axis", AttrKind::kInt, AttrValue{int64_t{0}}}},
      ConcatRel));
  r.Register(SequenceOp(
      "seq.split",
      "pieces of size 1 along `axis`, without it where keepdims is 0 (ONNX SplitToSequence "
      "without a split)",
      1, 1,
      {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
       {"keepdims", AttrKind::kInt, AttrValue{int64_t{1}}}},
      [](TypeRelContext& ctx) { return SplitRel(ctx, true); }));

  RegisterWithVariant(r,
                      SequenceOp("seq.at", "the element at `position` (negative from the end)", 1,
                                 1, {{"position", AttrKind::kInts, std::nullopt}}, AtRel),
                      {"position"}, 1);
  RegisterWithVariant(r,
                      SequenceOp("seq.insert",
                                 "the sequence with the tensor inserted before `position` (at the "
                                 "back where none is given)",
                                 2, 2, {position}, InsertRel),
                      {"position"}, 0);
  RegisterWithVariant(r,
                      SequenceOp("seq.erase",
                                 "the sequence without the element at `position` (the last "
                                 "where none is given)",
                                 1, 1, {position}, EraseRel),
                      {"position"}, 0);
  auto split = [](TypeRelContext& ctx) { return SplitRel(ctx, false); };
  RegisterWithVariant(
      r,
      SequenceOp("seq.split_sizes", "pieces of the sizes `split` along `axis`", 1, 1,
                 {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
                  {"split", AttrKind::kInts, std::nullopt}},
                 split),
      {"split"}, 1);
  RegisterWithVariant(r,
                      SequenceOp("seq.split_chunk",
                                 "pieces of size `chunk` along `axis`, the last one smaller", 1, 1,
                                 {{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
                                  {"chunk", AttrKind::kInt, std::nullopt}},
                                 split),
                      {"chunk"}, 1);
}

}  // namespace kiln
