// The ONNX op table: one converter per ONNX op type, from the node's inputs and attributes
// to kiln calls. Adding an ONNX op is one function here and one table line. Attribute
// defaults are ONNX's; semantics that kiln's op already shares with ONNX (Reshape's 0/-1,
// Slice's clamping, Gemm) are passed through, not re-implemented.
//
// Opsets: each table line says the oldest default-domain opset its converter implements; the
// converter branches on ctx.opset() where the op changed since (attributes that became inputs,
// legacy broadcasting before opset 7, Softmax's 2-D coercion before 13). Older opsets are
// refused by the importer, never converted with the newer meaning.
#include <algorithm>
#include <cmath>
#include <map>

#include "api/onnx/op_table.h"
#include "ir/dynamic.h"
#include "ir/op.h"
#include "onnx/defs/schema.h"

namespace kiln::onnx_import {

// --- TypeCache -----------------------------------------------------------------------------

Type TypeCache::TypeOf(const Expr& root) {
  // Iterative post-order that stops at known nodes, so each node is inferred once per import
  // and deep graphs do not recurse on the C++ stack.
  std::vector<std::pair<const Expr*, bool>> stack{{&root, false}};
  while (!stack.empty()) {
    auto [ep, expanded] = stack.back();
    stack.pop_back();
    const Expr& e = *ep;
    if (types_.count(e.get())) continue;
    std::vector<const Expr*> operands;
    if (const CallNode* c = AsCall(e))
      for (const Expr& a : c->args) operands.push_back(&a);
    else if (const TupleNode* t = AsTuple(e))
      for (const Expr& f : t->fields) operands.push_back(&f);
    else if (const TupleGetItemNode* g = AsTupleGetItem(e))
      operands.push_back(&g->tuple);
    if (!expanded) {
      stack.push_back({ep, true});
      for (const Expr* o : operands)
        if (!types_.count(o->get())) stack.push_back({o, false});
      continue;
    }
    Type t;
    if (AsVar(e)) {
      t = e->type;
    } else if (const ConstantNode* k = AsConstant(e)) {
      t = TypeOfTensor(k->value);
    } else if (const CallNode* c = AsCall(e)) {
      KILN_CHECK(c->op, "the importer only makes op calls");
      std::vector<Type> args;
      for (const Expr& a : c->args) args.push_back(types_.at(a.get()));
      try {
        t = InferOpType(c->op->name, args, c->attrs);
      } catch (const Error& err) {
        throw Error(err.code(), StrCat("node '", e->name, "': ", err.what()));
      }
    } else if (const TupleNode* tu = AsTuple(e)) {
      std::vector<Type> fields;
      for (const Expr& f : tu->fields) fields.push_back(types_.at(f.get()));
      t = TupleType(std::move(fields));
    } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
      const TupleTypeNode* tt = AsTuple(types_.at(g->tuple.get()));
      KILN_CHECK(tt && g->index < static_cast<int>(tt->fields.size()));
      t = tt->fields[g->index];
    }
    KILN_CHECK(t, "no type for an imported node");
    types_[e.get()] = t;
    typed_.push_back(e);
  }
  return types_.at(root.get());
}

// --- NodeContext ---------------------------------------------------------------------------

NodeContext::NodeContext(const onnx::NodeProto& node, std::vector<Expr> inputs, std::string name,
                         int64_t opset, TypeCache* types)
    : node_(node),
      inputs_(std::move(inputs)),
      name_(std::move(name)),
      opset_(opset),
      types_(types) {}

std::string NodeContext::Where() const {
  return StrCat("'", name_, "' (", op_type(), ", opset ", opset_, ")");
}

void NodeContext::Unsupported(const std::string& what) const {
  Throw(ErrorCode::kUnsupported, "ONNX node ", Where(), ": ", what);
}

void NodeContext::Invalid(const std::string& what) const {
  Throw(ErrorCode::kInvalidArgument, "ONNX node ", Where(), ": ", what);
}

Expr NodeContext::In(int i) const {
  Expr e = OptIn(i);
  if (!e) Invalid(StrCat("input ", i, " is required"));
  return e;
}

Expr NodeContext::OptIn(int i) const {
  return i < num_inputs() ? inputs_[i] : nullptr;
}

std::vector<int64_t> NodeContext::ConstInts(int i, const char* what) const {
  const ConstantNode* c = AsConstant(In(i));
  if (!c) Unsupported(StrCat(what, " (input ", i, ") must be a constant"));
  const Tensor& t = c->value;
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    Invalid(StrCat(what, " (input ", i, ") must be int64 or int32, not ", DTypeName(t.dtype())));
  if (t.ndim() > 1) Invalid(StrCat(what, " (input ", i, ") must be 1-D, not ", t.TypeString()));
  std::vector<int64_t> v(t.numel());
  for (int64_t k = 0; k < t.numel(); ++k)
    v[k] = t.dtype() == DType::kInt64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
  return v;
}

std::optional<double> NodeContext::ConstScalar(int i) const {
  const ConstantNode* c = AsConstant(OptIn(i));
  if (!c) return std::nullopt;
  if (c->value.numel() != 1) Invalid(StrCat("input ", i, " must be a scalar"));
  return c->value.GetAsDouble(0);
}

const onnx::AttributeProto* NodeContext::FindAttr(const std::string& name,
                                                  onnx::AttributeProto_AttributeType type) const {
  for (const onnx::AttributeProto& a : node_.attribute()) {
    if (a.name() != name) continue;
    if (a.type() != type)
      Invalid(StrCat("attribute '", name, "' is ",
                     onnx::AttributeProto_AttributeType_Name(a.type()), ", expected ",
                     onnx::AttributeProto_AttributeType_Name(type)));
    return &a;
  }
  return nullptr;
}

bool NodeContext::HasAttr(const std::string& name) const {
  return std::any_of(node_.attribute().begin(), node_.attribute().end(),
                     [&](const onnx::AttributeProto& a) { return a.name() == name; });
}

int64_t NodeContext::Int(const std::string& name, std::optional<int64_t> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::INT)) return a->i();
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

double NodeContext::Float(const std::string& name, std::optional<double> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::FLOAT)) return a->f();
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

std::string NodeContext::String(const std::string& name, std::optional<std::string> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::STRING)) return a->s();
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

std::vector<int64_t> NodeContext::Ints(const std::string& name,
                                       std::optional<std::vector<int64_t>> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::INTS))
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

std::vector<double> NodeContext::Floats(const std::string& name,
                                        std::optional<std::vector<double>> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::FLOATS))
    return std::vector<double>(a->floats().begin(), a->floats().end());
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

std::vector<std::string> NodeContext::Strings(const std::string& name,
                                              std::optional<std::vector<std::string>> def) const {
  if (const auto* a = FindAttr(name, onnx::AttributeProto::STRINGS))
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  if (!def) Invalid(StrCat("attribute '", name, "' is required"));
  return *def;
}

// Value computations fold as they are imported (ir/dynamic.h's FoldValueCall): a Shape of a
// tensor whose shape the model fixes, and small all-constant calls over it, become constants,
// so the shape-taking ops they feed import as static ops with known result ranks.
Expr NodeContext::Call(const std::string& op, std::vector<Expr> args, const Attrs& attrs) const {
  // A dynamic variant whose values are already constants is its static op.
  const OpDef* def = &OpRegistry::Global().Get(op);
  Attrs all = attrs;
  try {
    if (StaticForm(*def, args, all)) def = &OpRegistry::Global().Get(def->static_op);
  } catch (const Error& e) {
    Invalid(e.what());
  }
  Expr call = MakeCall(def, std::move(args), all, name_);
  const CallNode* c = AsCall(call);
  if (!c->op->fold_from_types &&
      !std::all_of(c->args.begin(), c->args.end(), [](const Expr& a) { return AsConstant(a); }))
    return call;
  std::vector<Type> arg_types;
  for (const Expr& a : c->args) arg_types.push_back(types_->TypeOf(a));
  Type result = c->op->fold_from_types ? nullptr : types_->TypeOf(call);
  Expr folded = FoldValueCall(*c, arg_types, result);
  return folded ? folded : call;
}

Expr NodeContext::CallWithValues(
    const std::string& op, std::vector<Expr> data_args, Attrs attrs,
    const std::vector<std::pair<std::string, int>>& value_inputs) const {
  const OpDef& st = OpRegistry::Global().Get(op);
  auto kind_of = [&](const std::string& attr) {
    for (const AttrSpec& a : st.attrs)
      if (a.name == attr) return a.kind;
    Throw(ErrorCode::kInternal, "op '", op, "' has no attribute '", attr, "'");
  };
  // Constant inputs become attributes now; the others stay as arguments.
  std::map<std::string, Expr> computed;
  for (const auto& [attr, i] : value_inputs) {
    Expr in = OptIn(i);
    if (!in) continue;
    if (const ConstantNode* k = AsConstant(in)) {
      try {
        attrs.Set(attr, AttrFromTensor(k->value, kind_of(attr), StrCat(attr, " (input ", i, ")")));
      } catch (const Error& e) {
        Invalid(e.what());
      }
    } else {
      computed[attr] = in;
    }
  }
  if (computed.empty()) return Call(op, std::move(data_args), attrs);

  const OpDef* dyn = OpRegistry::Global().Find("dyn." + op);
  if (!dyn) {
    for (const auto& [attr, index] : value_inputs)
      if (computed.count(attr))
        Unsupported(StrCat(attr, " (input ", index, ") must be a constant"));
  }
  // dyn.<op>: every value attribute is an argument, in the variant's order; those not computed
  // are constants of their attribute value (given, else the op's default).
  std::vector<Expr> args = std::move(data_args);
  Attrs rest;
  for (const auto& [name, value] : attrs.values())
    if (std::find(dyn->value_attrs.begin(), dyn->value_attrs.end(), name) == dyn->value_attrs.end())
      rest.Set(name, value);
  for (const std::string& name : dyn->value_attrs) {
    if (auto it = computed.find(name); it != computed.end()) {
      args.push_back(it->second);
      continue;
    }
    const AttrValue* v = attrs.Find(name);
    if (!v) {
      auto spec = std::find_if(st.attrs.begin(), st.attrs.end(),
                               [&](const AttrSpec& a) { return a.name == name; });
      if (!spec->default_value) Invalid(StrCat("the ", name, " input is required"));
      v = &*spec->default_value;
    }
    args.push_back(MakeConstant(TensorFromAttr(*v)));
  }
  return Call(dyn->name, std::move(args), rest);
}

Expr NodeContext::Scalar(double value, DType dtype) const {
  Tensor t = Tensor::Empty(dtype, {});
  t.SetFromDouble(0, value);
  return MakeConstant(t);
}

DType NodeContext::DTypeOf(const Expr& e) const {
  const TensorTypeNode* t = AsTensor(types_->TypeOf(e));
  if (!t) Invalid("an input is not a tensor");
  return t->dtype;
}

int NodeContext::RankOf(const Expr& e) const {
  return static_cast<int>(ShapeOf(e).size());
}

Shape NodeContext::ShapeOf(const Expr& e) const {
  const TensorTypeNode* t = AsTensor(types_->TypeOf(e));
  if (!t) Invalid("an input is not a tensor");
  return t->shape;
}

// --- Converters ----------------------------------------------------------------------------

namespace {

using Outs = std::vector<Expr>;

template <const char* kOp>
Outs Unary(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0)})};
}

// Before opset 7 the binary ops broadcast only when `broadcast` is set, and then only B onto
// A: B's dims line up with A's from `axis`, or with A's trailing dims when there is no axis
// (numpy's rule). Unsqueezing B's missing trailing dims leaves the rest to kiln's numpy
// broadcasting. Without `broadcast` the shapes must match, where broadcasting is the identity.
Expr LegacyBroadcastB(const NodeContext& c, const Expr& a, const Expr& b) {
  if (c.opset() >= 7 || c.Int("broadcast", 0) == 0 || !c.HasAttr("axis")) return b;
  const int rank_a = c.RankOf(a), rank_b = c.RankOf(b);
  int64_t axis = c.Int("axis");
  if (axis < 0) axis += rank_a;
  if (axis < 0 || axis + rank_b > rank_a)
    c.Invalid(StrCat("axis ", c.Int("axis"), " does not place B (rank ", rank_b,
                     ") inside A (rank ", rank_a, ")"));
  std::vector<int64_t> trailing;
  for (int64_t k = rank_b; k < rank_a - axis; ++k) trailing.push_back(k);
  if (trailing.empty()) return b;
  return c.Call("unsqueeze", {b}, {{"axes", trailing}});
}

template <const char* kOp>
Outs Binary(const NodeContext& c) {
  Expr a = c.In(0);
  return {c.Call(kOp, {a, LegacyBroadcastB(c, a, c.In(1))})};
}

// Min/Max/Sum: a left fold of a binary kiln op over one or more inputs.
template <const char* kOp>
Outs Fold(const NodeContext& c) {
  Expr acc = c.In(0);
  for (int i = 1; i < c.num_inputs(); ++i) acc = c.Call(kOp, {acc, c.In(i)});
  return {acc};
}

#define KILN_OP_NAME(var, text) constexpr char var[] = text;
KILN_OP_NAME(kNeg, "neg")
KILN_OP_NAME(kAbs, "abs")
KILN_OP_NAME(kSqrt, "sqrt")
KILN_OP_NAME(kExp, "exp")
KILN_OP_NAME(kLog, "log")
KILN_OP_NAME(kErf, "erf")
KILN_OP_NAME(kTanh, "tanh")
KILN_OP_NAME(kSigmoid, "sigmoid")
KILN_OP_NAME(kRelu, "relu")
KILN_OP_NAME(kReciprocal, "reciprocal")
KILN_OP_NAME(kFloor, "floor")
KILN_OP_NAME(kCeil, "ceil")
KILN_OP_NAME(kRound, "round")
KILN_OP_NAME(kSign, "sign")
KILN_OP_NAME(kSin, "sin")
KILN_OP_NAME(kCos, "cos")
KILN_OP_NAME(kNot, "not")
KILN_OP_NAME(kAdd, "add")
KILN_OP_NAME(kSub, "sub")
KILN_OP_NAME(kMul, "mul")
KILN_OP_NAME(kDiv, "div")
KILN_OP_NAME(kMatmul, "matmul")
KILN_OP_NAME(kEqual, "equal")
KILN_OP_NAME(kLess, "less")
KILN_OP_NAME(kLessEqual, "less_equal")
KILN_OP_NAME(kGreater, "greater")
KILN_OP_NAME(kGreaterEqual, "greater_equal")
KILN_OP_NAME(kAnd, "and")
KILN_OP_NAME(kOr, "or")
KILN_OP_NAME(kXor, "xor")
KILN_OP_NAME(kMaximum, "maximum")
KILN_OP_NAME(kMinimum, "minimum")
KILN_OP_NAME(kSum, "sum")
KILN_OP_NAME(kMean, "mean")
KILN_OP_NAME(kMax, "max")
KILN_OP_NAME(kMin, "min")
KILN_OP_NAME(kProd, "prod")
KILN_OP_NAME(kL2, "l2")
KILN_OP_NAME(kArgmax, "argmax")
KILN_OP_NAME(kArgmin, "argmin")
KILN_OP_NAME(kSoftmax, "softmax")
KILN_OP_NAME(kLogSoftmax, "log_softmax")
#undef KILN_OP_NAME

Outs Identity(const NodeContext& c) {
  return {c.In(0)};
}

Outs Where(const NodeContext& c) {
  return {c.Call("where", {c.In(0), c.In(1), c.In(2)})};
}

Outs Mean(const NodeContext& c) {
  Outs sum = Fold<kAdd>(c);
  if (c.num_inputs() == 1) return sum;
  return {c.Call("div", {sum[0], c.Scalar(c.num_inputs(), c.DTypeOf(sum[0]))})};
}

// ONNX lets the exponent have another dtype; kiln's pow takes one dtype, the base's.
Outs Pow(const NodeContext& c) {
  Expr base = c.In(0), exponent = LegacyBroadcastB(c, base, c.In(1));
  DType dt = c.DTypeOf(base);
  if (c.DTypeOf(exponent) != dt) exponent = c.Call("cast", {exponent}, {{"dtype", dt}});
  return {c.Call("pow", {base, exponent})};
}

Outs Mod(const NodeContext& c) {
  return {c.Call("mod", {c.In(0), c.In(1)}, {{"fmod", c.Int("fmod", 0)}})};
}

Outs BitShift(const NodeContext& c) {
  const std::string direction = c.String("direction");
  if (direction != "LEFT" && direction != "RIGHT")
    c.Invalid(StrCat("direction \"", direction, "\" must be LEFT or RIGHT"));
  return {c.Call(direction == "LEFT" ? "shift_left" : "shift_right", {c.In(0), c.In(1)})};
}

// Constant bounds become clip's attributes (one fused elementwise op); computed ones compose.
// Before opset 11 the bounds are optional float attributes.
Outs Clip(const NodeContext& c) {
  Expr x = c.In(0);
  if (c.opset() < 11) {
    Attrs a;
    if (c.HasAttr("min")) a.Set("min", c.Float("min"));
    if (c.HasAttr("max")) a.Set("max", c.Float("max"));
    return {c.Call("clip", {x}, a)};
  }
  std::optional<double> lo = c.ConstScalar(1), hi = c.ConstScalar(2);
  bool lo_computed = c.OptIn(1) && !lo, hi_computed = c.OptIn(2) && !hi;
  if (!lo_computed && !hi_computed) {
    Attrs a;
    if (lo) a.Set("min", *lo);
    if (hi) a.Set("max", *hi);
    return {c.Call("clip", {x}, a)};
  }
  if (c.OptIn(1)) x = c.Call("maximum", {x, c.In(1)});
  if (c.OptIn(2)) x = c.Call("minimum", {x, c.In(2)});
  return {x};
}

// Before opset 13 (Softmax-1/11, LogSoftmax-1/11) x is coerced to 2-D at `axis` (default 1),
// [d0*...*d(axis-1), d(axis)*...*dn], and normalized over the second dim: jointly over every
// axis from `axis` on. Composed from keepdims reductions over those axes, which needs no
// reshape and so no static dims; with axis = rank there is nothing to reduce (each element
// alone: softmax 1, log_softmax 0), which noop_with_empty_axes gives.
template <const char* kOp>
Outs Softmax(const NodeContext& c) {
  Expr x = c.In(0);
  if (c.opset() >= 13) return {c.Call(kOp, {x}, {{"axis", c.Int("axis", -1)}})};
  const int rank = c.RankOf(x);
  int64_t axis = c.Int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    c.Invalid(StrCat("axis ", c.Int("axis", 1), " is out of range for rank ", rank));
  if (axis == rank - 1) return {c.Call(kOp, {x}, {{"axis", int64_t{-1}}})};
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  Attrs reduce{{"axes", axes}, {"keepdims", true}, {"noop_with_empty_axes", true}};
  Expr shifted = c.Call("sub", {x, c.Call("max", {x}, reduce)});
  Expr e = c.Call("exp", {shifted});
  Expr sum = c.Call("sum", {e}, reduce);
  if (std::string(kOp) == "log_softmax") return {c.Call("sub", {shifted, c.Call("log", {sum})})};
  return {c.Call("div", {e, sum})};
}

Outs Gemm(const NodeContext& c) {
  std::vector<Expr> args{c.In(0), c.In(1)};
  if (c.OptIn(2)) args.push_back(c.In(2));
  return {c.Call("gemm", args,
                 {{"alpha", c.Float("alpha", 1.0)},
                  {"beta", c.Float("beta", 1.0)},
                  {"transA", c.Int("transA", 0) != 0},
                  {"transB", c.Int("transB", 0) != 0}})};
}

// The shape is an attribute before opset 5; allowzero exists from 14 (default 0 before).
Outs Reshape(const NodeContext& c) {
  Attrs a{{"allowzero", c.Int("allowzero", 0) != 0}};
  if (c.opset() < 5) {
    a.Set("shape", c.Ints("shape"));
    return {c.Call("reshape", {c.In(0)}, a)};
  }
  c.In(1);  // required
  return {c.CallWithValues("reshape", {c.In(0)}, a, {{"shape", 1}})};
}

Outs Transpose(const NodeContext& c) {
  return {c.Call("transpose", {c.In(0)}, {{"perm", c.Ints("perm", std::vector<int64_t>{})}})};
}

Outs Flatten(const NodeContext& c) {
  return {c.Call("flatten", {c.In(0)}, {{"axis", c.Int("axis", 1)}})};
}

// Squeeze/Unsqueeze take their axes as an attribute before opset 13, an input from 13 on.
Outs Squeeze(const NodeContext& c) {
  if (c.opset() < 13)
    return {c.Call("squeeze", {c.In(0)}, {{"axes", c.Ints("axes", std::vector<int64_t>{})}})};
  return {c.CallWithValues("squeeze", {c.In(0)}, {}, {{"axes", 1}})};
}

Outs Unsqueeze(const NodeContext& c) {
  if (c.opset() < 13) return {c.Call("unsqueeze", {c.In(0)}, {{"axes", c.Ints("axes")}})};
  c.In(1);  // required
  return {c.CallWithValues("unsqueeze", {c.In(0)}, {}, {{"axes", 1}})};
}

Outs Expand(const NodeContext& c) {
  c.In(1);  // required
  return {c.CallWithValues("expand", {c.In(0)}, {}, {{"shape", 1}})};
}

Outs Concat(const NodeContext& c) {
  std::vector<Expr> args;
  for (int i = 0; i < c.num_inputs(); ++i) args.push_back(c.In(i));
  // Concat-1's axis is optional with default 1; required from opset 4 on.
  int64_t axis = c.opset() < 4 ? c.Int("axis", 1) : c.Int("axis");
  return {c.Call("concat", args, {{"axis", axis}})};
}

// kiln's split returns a tuple; each ONNX output is one field. The sizes are an input from
// opset 13 on, the `split` attribute in opsets 2-12, and either in opset 1; without them the
// parts are equal, one per output.
Outs Split(const NodeContext& c) {
  Attrs a{{"axis", c.Int("axis", 0)}};
  std::vector<std::pair<std::string, int>> values;
  if ((c.opset() >= 13 || c.opset() == 1) && c.OptIn(1))
    values.push_back({"split", 1});
  else if (c.opset() < 13 && c.HasAttr("split"))
    a.Set("split", c.Ints("split"));
  else
    a.Set("num_outputs", int64_t{c.num_outputs()});
  Expr parts = c.CallWithValues("split", {c.In(0)}, a, values);
  Outs outs;
  for (int i = 0; i < c.num_outputs(); ++i) outs.push_back(MakeTupleGetItem(parts, i));
  return outs;
}

// Before opset 10 starts, ends and axes are attributes, and there are no steps.
Outs Slice(const NodeContext& c) {
  if (c.opset() < 10) {
    Attrs a{{"starts", c.Ints("starts")}, {"ends", c.Ints("ends")}};
    if (c.HasAttr("axes")) a.Set("axes", c.Ints("axes"));
    return {c.Call("slice", {c.In(0)}, a)};
  }
  c.In(1);  // starts and ends are required
  c.In(2);
  return {c.CallWithValues("slice", {c.In(0)}, {},
                           {{"starts", 1}, {"ends", 2}, {"axes", 3}, {"steps", 4}})};
}

Outs Gather(const NodeContext& c) {
  return {c.Call("gather", {c.In(0), c.In(1)}, {{"axis", c.Int("axis", 0)}})};
}

// Cast-1 names the target type as a string ("FLOAT"); from opset 6 on it is the enum value.
Outs Cast(const NodeContext& c) {
  int64_t to = 0;
  if (c.opset() < 6) {
    const std::string name = c.String("to");
    onnx::TensorProto::DataType parsed;
    if (!onnx::TensorProto::DataType_Parse(name, &parsed))
      c.Invalid(StrCat("'to' names no ONNX data type: \"", name, "\""));
    to = parsed;
  } else {
    to = c.Int("to");
  }
  std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(to));
  if (!dt) c.Unsupported(StrCat("cast to ", OnnxTypeName(static_cast<int32_t>(to))));
  return {c.Call("cast", {c.In(0)}, {{"dtype", *dt}})};
}

// Inference only: the output is the input.
// From opset 7 to 11 the runtime decides the mode (ratio is an attribute); before 7, is_test
// (default 0) selects it in the model, and training mode would drop values.
Outs Dropout(const NodeContext& c) {
  if (c.opset() < 7 && c.Int("is_test", 0) == 0)
    c.Unsupported("is_test = 0 (training mode) is not supported");
  if (c.OptIn(2)) {
    std::optional<double> training = c.ConstScalar(2);
    if (!training || *training != 0) c.Unsupported("training_mode must be a constant false");
  }
  if (!c.OutputRequested(1)) return {c.In(0)};
  // Nothing is dropped: the mask is all true (bool from opset 10; before, the input's dtype),
  // of the input's shape: known at import, else once the model is specialized.
  Expr x = c.In(0);
  Expr one = c.Scalar(1, c.opset() >= 10 ? DType::kBool : c.DTypeOf(x));
  return {x, c.Call("dyn.expand", {one, c.Call("shape", {x})})};
}

template <const char* kOp>
Outs Reduce(const NodeContext& c) {
  Attrs a{{"axes", c.Ints("axes", std::vector<int64_t>{})},
          {"keepdims", c.Int("keepdims", 1) != 0},
          {"noop_with_empty_axes", c.Int("noop_with_empty_axes", 0) != 0}};
  // ReduceSum takes its axes as an input from opset 13 on (the others from opset 18).
  if (c.op_type() == "ReduceSum" && c.opset() >= 13)
    return {c.CallWithValues(kOp, {c.In(0)}, a, {{"axes", 1}})};
  return {c.Call(kOp, {c.In(0)}, a)};
}

template <const char* kOp>
Outs ArgReduce(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0)},
                 {{"axis", c.Int("axis", 0)},
                  {"keepdims", c.Int("keepdims", 1) != 0},
                  {"select_last_index", c.Int("select_last_index", 0) != 0}})};
}

// The optional Mean and InvStdDev outputs are recomputed from x (kiln's layer_norm returns Y
// only); they are built only when the model uses them.
Outs LayerNormalization(const NodeContext& c) {
  Expr x = c.In(0);
  int64_t axis = c.Int("axis", -1);
  double eps = c.Float("epsilon", 1e-5);
  std::vector<Expr> args{x, c.In(1)};
  if (c.OptIn(2)) args.push_back(c.In(2));
  Outs outs{c.Call("layer_norm", args, {{"axis", axis}, {"epsilon", eps}})};
  if (c.OutputRequested(1) || c.OutputRequested(2)) {
    int rank = c.RankOf(x);
    if (axis < -rank || axis >= rank)
      c.Invalid(StrCat("axis ", axis, " is out of range for rank ", rank));
    std::vector<int64_t> axes;
    for (int64_t a = axis < 0 ? axis + rank : axis; a < rank; ++a) axes.push_back(a);
    Attrs reduce{{"axes", axes}, {"keepdims", true}};
    Expr mean = c.Call("mean", {x}, reduce);
    Expr d = c.Call("sub", {x, mean});
    Expr var = c.Call("mean", {c.Call("mul", {d, d})}, reduce);
    outs.push_back(mean);
    outs.push_back(c.Call("rsqrt", {c.Call("add", {var, c.Scalar(eps, c.DTypeOf(x))})}));
  }
  return outs;
}

// Before opset 9, spatial = 0 (per-activation statistics, shaped like one sample) is a
// different computation; before opset 7, is_test = 0 (the default) normalizes with the batch's
// own statistics.
Outs BatchNormalization(const NodeContext& c) {
  if (c.Int("training_mode", 0) != 0) c.Unsupported("training_mode is not supported");
  if (c.opset() < 9 && c.Int("spatial", 1) == 0) c.Unsupported("spatial = 0 is not supported");
  if (c.opset() < 7 && c.Int("is_test", 0) == 0)
    c.Unsupported("is_test = 0 (training mode) is not supported");
  for (int i = 1; i < c.num_outputs(); ++i)
    if (c.OutputRequested(i)) c.Unsupported("the running statistics outputs are not supported");
  return {c.Call("batch_norm", {c.In(0), c.In(1), c.In(2), c.In(3), c.In(4)},
                 {{"epsilon", c.Float("epsilon", 1e-5)}})};
}

// Shape-15 adds start and end; before, they are the whole shape (the defaults).
Outs Shape(const NodeContext& c) {
  Attrs a;
  if (c.HasAttr("start")) a.Set("start", c.Int("start"));
  if (c.HasAttr("end")) a.Set("end", c.Int("end"));
  return {c.Call("shape", {c.In(0)}, a)};
}

Outs Size(const NodeContext& c) {
  return {c.Call("size", {c.In(0)})};
}

Outs Range(const NodeContext& c) {
  for (int i = 0; i < 3; ++i) c.In(i);  // all required
  return {c.CallWithValues("range", {}, {{"dtype", c.DTypeOf(c.In(0))}},
                           {{"start", 0}, {"limit", 1}, {"delta", 2}})};
}

// The converters of this file, by ONNX op type, with the oldest opset each implements. An op
// whose every version means the same is listed from opset 1 (the checker rejects it before
// it exists); the others say so at their converter.
const std::map<std::string, OpConverter>& CoreTable() {
  static const std::map<std::string, OpConverter> table = {
      {"Abs", {Unary<kAbs>, 1}},
      {"Add", {Binary<kAdd>, 1}},
      {"And", {Binary<kAnd>, 1}},
      {"ArgMax", {ArgReduce<kArgmax>, 1}},
      {"ArgMin", {ArgReduce<kArgmin>, 1}},
      {"BatchNormalization", {BatchNormalization, 1}},
      {"Cast", {Cast, 1}},
      {"Ceil", {Unary<kCeil>, 1}},
      {"Clip", {Clip, 1}},
      {"Concat", {Concat, 1}},
      {"Cos", {Unary<kCos>, 7}},
      {"Div", {Binary<kDiv>, 1}},
      {"Dropout", {Dropout, 1}},
      {"Equal", {Binary<kEqual>, 1}},
      {"Erf", {Unary<kErf>, 9}},
      {"Exp", {Unary<kExp>, 1}},
      {"Expand", {Expand, 8}},
      {"Flatten", {Flatten, 1}},
      {"Floor", {Unary<kFloor>, 1}},
      {"Gather", {Gather, 1}},
      {"Gemm", {Gemm, 1}},
      {"Greater", {Binary<kGreater>, 1}},
      {"GreaterOrEqual", {Binary<kGreaterEqual>, 12}},
      {"Identity", {Identity, 1}},
      {"LayerNormalization", {LayerNormalization, 17}},
      {"Less", {Binary<kLess>, 1}},
      {"LessOrEqual", {Binary<kLessEqual>, 12}},
      {"Log", {Unary<kLog>, 1}},
      {"LogSoftmax", {Softmax<kLogSoftmax>, 1}},
      {"MatMul", {Binary<kMatmul>, 1}},
      {"Max", {Fold<kMaximum>, 1}},
      {"Mean", {Mean, 1}},
      {"Min", {Fold<kMinimum>, 1}},
      {"Mod", {Mod, 10}},
      {"BitShift", {BitShift, 11}},
      {"Mul", {Binary<kMul>, 1}},
      {"Neg", {Unary<kNeg>, 1}},
      {"Not", {Unary<kNot>, 1}},
      {"Or", {Binary<kOr>, 1}},
      {"Pow", {Pow, 1}},
      {"Range", {Range, 11}},
      {"Shape", {Shape, 1}},
      {"Size", {Size, 1}},
      {"Reciprocal", {Unary<kReciprocal>, 1}},
      {"ReduceL2", {Reduce<kL2>, 1}},
      {"ReduceMax", {Reduce<kMax>, 1}},
      {"ReduceMean", {Reduce<kMean>, 1}},
      {"ReduceMin", {Reduce<kMin>, 1}},
      {"ReduceProd", {Reduce<kProd>, 1}},
      {"ReduceSum", {Reduce<kSum>, 1}},
      {"Relu", {Unary<kRelu>, 1}},
      {"Reshape", {Reshape, 1}},
      {"Round", {Unary<kRound>, 11}},
      {"Sigmoid", {Unary<kSigmoid>, 1}},
      {"Sign", {Unary<kSign>, 9}},
      {"Sin", {Unary<kSin>, 7}},
      {"Slice", {Slice, 1}},
      {"Softmax", {Softmax<kSoftmax>, 1}},
      {"Split", {Split, 1}},
      {"Sqrt", {Unary<kSqrt>, 1}},
      {"Squeeze", {Squeeze, 1}},
      {"Sub", {Binary<kSub>, 1}},
      {"Sum", {Fold<kAdd>, 1}},
      {"Tanh", {Unary<kTanh>, 1}},
      {"Transpose", {Transpose, 1}},
      {"Unsqueeze", {Unsqueeze, 1}},
      {"Where", {Where, 9}},
      {"Xor", {Binary<kXor>, 1}},
  };
  return table;
}

// The oldest opset of each family converter (converter_families.def) that has been checked
// against ONNX's changelog; those files are opset-agnostic, so the knowledge lives here. An
// op not listed gets SameSchemaSince(). Pad-1 calls its pads `paddings`; PRelu before 7
// broadcasts its slope per channel (converted so); Tile-1 takes `tiles` and `axis` inputs.
// ConvTranspose-1's output_shape splits the total padding as ConvTranspose-11 does.
const std::map<std::string, int64_t>& FamilyOldestOpsets() {
  static const std::map<std::string, int64_t> oldest = {
      {"Acos", 7},
      {"Acosh", 9},
      {"Asin", 7},
      {"Asinh", 9},
      {"Atan", 7},
      {"Atanh", 9},
      {"AveragePool", 1},
      {"Celu", 12},
      {"Compress", 9},
      {"Conv", 1},
      {"ConvTranspose", 1},
      {"Cosh", 9},
      {"DFT", 17},
      {"DepthToSpace", 1},       // mode since 11, defaulting to DCR, DepthToSpace-1's layout
      {"DequantizeLinear", 10},  // 13 only added per-axis scales; 10 is per-tensor
      {"Elu", 1},
      {"GlobalAveragePool", 1},
      {"GlobalMaxPool", 1},
      {"GridSample", 16},
      {"HardSigmoid", 1},
      {"HardSwish", 14},
      {"InstanceNormalization", 1},  // opset 1's consumed_inputs is a no-op hint
      {"IsInf", 10},
      {"IsNaN", 9},
      {"LRN", 1},
      {"LeakyRelu", 1},
      {"MaxPool", 1},    // storage_order (8), ceil_mode and dilations (10) default as before
      {"MaxUnpool", 9},  // 11 only reworded the pads
      {"MeanVarianceNormalization", 9},
      {"MelWeightMatrix", 17},
      {"OneHot", 9},  // the converter branches for OneHot-9's negative indices
      {"PRelu", 6},
      {"Pad", 2},              // value/pads attributes before 11: the converter branches
      {"QuantizeLinear", 10},  // as DequantizeLinear
      {"ReduceL1", 1},
      {"ReduceLogSum", 1},
      {"ReduceLogSumExp", 1},
      {"ReduceSumSquare", 1},
      {"Resize", 10},    // the converter branches on opset < 11 (Resize-10: scales only)
      {"RoiAlign", 10},  // the converter uses output_half_pixel before 16 (no mode attribute)
      {"NonMaxSuppression", 10},
      {"NonZero", 9},
      {"STFT", 17},
      {"Scatter", 9},  // ScatterElements without reduction
      {"Selu", 1},
      {"Sinh", 9},
      {"Softplus", 1},
      {"Softsign", 1},
      {"SpaceToDepth", 1},
      {"Tan", 7},
      {"TfIdfVectorizer", 9},
      {"ThresholdedRelu", 10},
      {"Tile", 6},
      {"TopK", 1},  // k is an attribute before opset 10: the converter branches
      {"Trilu", 14},
      {"Unique", 11},
      {"Upsample", 7},  // the converter branches on opset < 9 (scales attribute)
  };
  return oldest;
}

// The first opset whose schema of `op` is the one in force at opset 13: the opsets from there
// to 13 define the op identically, so a converter written for opset 13 is right for them
// (ConvTranspose-11, GatherElements-11). 13 when ONNX has no such op at 13.
int64_t SameSchemaSince(const std::string& op) {
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, 13, "");
  return schema ? schema->SinceVersion() : 13;
}

// Every family's converters (converter_families.def), sorted by op type: ConverterNames() relies
// on the map's order. An op type in two families is a bug, caught on first use.
const std::map<std::string, OpConverter>& Table() {
  static const std::map<std::string, OpConverter> table = [] {
    std::map<std::string, OpConverter> all = CoreTable();
    auto add = [&all](const std::map<std::string, Converter>& family) {
      for (const auto& [op, fn] : family) {
        auto it = FamilyOldestOpsets().find(op);
        OpConverter entry{fn, it == FamilyOldestOpsets().end() ? SameSchemaSince(op) : it->second};
        KILN_CHECK(all.emplace(op, entry).second, "ONNX op '", op, "' has two converters");
      }
    };
#define KILN_ONNX_FAMILY(F) add(F##Converters());
#include "api/onnx/converter_families.def"
#undef KILN_ONNX_FAMILY
    return all;
  }();
  return table;
}

}  // namespace

OpConverter FindConverter(const std::string& op_type) {
  auto it = Table().find(op_type);
  return it == Table().end() ? OpConverter{} : it->second;
}

std::vector<std::string> ConverterNames() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : Table()) names.push_back(name);
  return names;
}

}  // namespace kiln::onnx_import
