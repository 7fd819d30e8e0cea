// The ONNX op table: one converter per ONNX op type, from the node's inputs and attributes
// to kiln calls. Adding an ONNX op is one function here and one table line. Attribute
// defaults are ONNX's (opsets 13-17); semantics that kiln's op already shares with ONNX
// (Reshape's 0/-1, Slice's clamping, Gemm) are passed through, not re-implemented.
#include <algorithm>
#include <cmath>
#include <map>

#include "api/onnx/op_table.h"
#include "ir/op.h"

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

Expr NodeContext::Call(const std::string& op, std::vector<Expr> args, const Attrs& attrs) const {
  return MakeCall(op, std::move(args), attrs, name_);
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
  const TensorTypeNode* t = AsTensor(types_->TypeOf(e));
  if (!t) Invalid("an input is not a tensor");
  return t->ndim();
}

// --- Converters ----------------------------------------------------------------------------

namespace {

using Outs = std::vector<Expr>;

template <const char* kOp>
Outs Unary(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0)})};
}

template <const char* kOp>
Outs Binary(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0), c.In(1)})};
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
  Expr base = c.In(0), exponent = c.In(1);
  DType dt = c.DTypeOf(base);
  if (c.DTypeOf(exponent) != dt) exponent = c.Call("cast", {exponent}, {{"dtype", dt}});
  return {c.Call("pow", {base, exponent})};
}

Outs Mod(const NodeContext& c) {
  return {c.Call("mod", {c.In(0), c.In(1)}, {{"fmod", c.Int("fmod", 0)}})};
}

// x < 0 ? alpha * x : x
Outs LeakyRelu(const NodeContext& c) {
  Expr x = c.In(0);
  DType dt = c.DTypeOf(x);
  Expr neg = c.Call("less", {x, c.Scalar(0, dt)});
  return {c.Call("where", {neg, c.Call("mul", {x, c.Scalar(c.Float("alpha", 0.01), dt)}), x})};
}

// x < 0 ? alpha * (exp(x) - 1) : x
Outs Elu(const NodeContext& c) {
  Expr x = c.In(0);
  DType dt = c.DTypeOf(x);
  Expr neg = c.Call("less", {x, c.Scalar(0, dt)});
  Expr em1 = c.Call("sub", {c.Call("exp", {x}), c.Scalar(1, dt)});
  return {c.Call("where", {neg, c.Call("mul", {em1, c.Scalar(c.Float("alpha", 1.0), dt)}), x})};
}

// clip(alpha * x + beta, 0, 1)
Outs HardSigmoid(const NodeContext& c) {
  Expr x = c.In(0);
  DType dt = c.DTypeOf(x);
  Expr lin = c.Call("add", {c.Call("mul", {x, c.Scalar(c.Float("alpha", 0.2), dt)}),
                            c.Scalar(c.Float("beta", 0.5), dt)});
  return {c.Call("clip", {lin}, {{"min", 0.0}, {"max", 1.0}})};
}

// log(exp(x) + 1)
Outs Softplus(const NodeContext& c) {
  Expr x = c.In(0);
  return {c.Call("log", {c.Call("add", {c.Call("exp", {x}), c.Scalar(1, c.DTypeOf(x))})})};
}

// Constant bounds become clip's attributes (one fused elementwise op); computed ones compose.
Outs Clip(const NodeContext& c) {
  Expr x = c.In(0);
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

template <const char* kOp>
Outs Softmax(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0)}, {{"axis", c.Int("axis", -1)}})};
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

Outs Reshape(const NodeContext& c) {
  return {c.Call("reshape", {c.In(0)},
                 {{"shape", c.ConstInts(1, "shape")}, {"allowzero", c.Int("allowzero", 0) != 0}})};
}

Outs Transpose(const NodeContext& c) {
  return {c.Call("transpose", {c.In(0)}, {{"perm", c.Ints("perm", std::vector<int64_t>{})}})};
}

Outs Flatten(const NodeContext& c) {
  return {c.Call("flatten", {c.In(0)}, {{"axis", c.Int("axis", 1)}})};
}

Outs Squeeze(const NodeContext& c) {
  std::vector<int64_t> axes;
  if (c.OptIn(1)) axes = c.ConstInts(1, "axes");
  return {c.Call("squeeze", {c.In(0)}, {{"axes", axes}})};
}

Outs Unsqueeze(const NodeContext& c) {
  return {c.Call("unsqueeze", {c.In(0)}, {{"axes", c.ConstInts(1, "axes")}})};
}

Outs Expand(const NodeContext& c) {
  return {c.Call("expand", {c.In(0)}, {{"shape", c.ConstInts(1, "shape")}})};
}

Outs Concat(const NodeContext& c) {
  std::vector<Expr> args;
  for (int i = 0; i < c.num_inputs(); ++i) args.push_back(c.In(i));
  return {c.Call("concat", args, {{"axis", c.Int("axis")}})};
}

// kiln's split returns a tuple; each ONNX output is one field.
Outs Split(const NodeContext& c) {
  Attrs a{{"axis", c.Int("axis", 0)}};
  if (c.OptIn(1))
    a.Set("split", c.ConstInts(1, "split"));
  else
    a.Set("num_outputs", int64_t{c.num_outputs()});
  Expr parts = c.Call("split", {c.In(0)}, a);
  Outs outs;
  for (int i = 0; i < c.num_outputs(); ++i) outs.push_back(MakeTupleGetItem(parts, i));
  return outs;
}

Outs Slice(const NodeContext& c) {
  Attrs a{{"starts", c.ConstInts(1, "starts")}, {"ends", c.ConstInts(2, "ends")}};
  if (c.OptIn(3)) a.Set("axes", c.ConstInts(3, "axes"));
  if (c.OptIn(4)) a.Set("steps", c.ConstInts(4, "steps"));
  return {c.Call("slice", {c.In(0)}, a)};
}

Outs Gather(const NodeContext& c) {
  return {c.Call("gather", {c.In(0), c.In(1)}, {{"axis", c.Int("axis", 0)}})};
}

Outs Cast(const NodeContext& c) {
  int64_t to = c.Int("to");
  std::optional<DType> dt = DTypeFromOnnx(static_cast<int32_t>(to));
  if (!dt) c.Unsupported(StrCat("cast to ", OnnxTypeName(static_cast<int32_t>(to))));
  return {c.Call("cast", {c.In(0)}, {{"dtype", *dt}})};
}

// Inference only: the output is the input; the mask output would need training semantics.
Outs Dropout(const NodeContext& c) {
  if (c.OptIn(2)) {
    std::optional<double> training = c.ConstScalar(2);
    if (!training || *training != 0) c.Unsupported("training_mode must be a constant false");
  }
  if (c.OutputRequested(1)) c.Unsupported("the mask output is not supported");
  return {c.In(0)};
}

template <const char* kOp>
Outs Reduce(const NodeContext& c) {
  std::vector<int64_t> axes = c.Ints("axes", std::vector<int64_t>{});
  // ReduceSum takes its axes as an input from opset 13 on (the others from opset 18).
  if (c.op_type() == "ReduceSum" && c.OptIn(1)) axes = c.ConstInts(1, "axes");
  return {c.Call(kOp, {c.In(0)},
                 {{"axes", axes},
                  {"keepdims", c.Int("keepdims", 1) != 0},
                  {"noop_with_empty_axes", c.Int("noop_with_empty_axes", 0) != 0}})};
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

Outs BatchNormalization(const NodeContext& c) {
  if (c.Int("training_mode", 0) != 0) c.Unsupported("training_mode is not supported");
  for (int i = 1; i < c.num_outputs(); ++i)
    if (c.OutputRequested(i)) c.Unsupported("the running statistics outputs are not supported");
  return {c.Call("batch_norm", {c.In(0), c.In(1), c.In(2), c.In(3), c.In(4)},
                 {{"epsilon", c.Float("epsilon", 1e-5)}})};
}

Outs Range(const NodeContext& c) {
  std::optional<double> start = c.ConstScalar(0), limit = c.ConstScalar(1),
                        delta = c.ConstScalar(2);
  if (!start || !limit || !delta) c.Unsupported("start, limit and delta must be constants");
  return {c.Call(
      "range", {},
      {{"start", *start}, {"limit", *limit}, {"delta", *delta}, {"dtype", c.DTypeOf(c.In(0))}})};
}

// Sorted by ONNX op type; ConverterNames() relies on the map's order.
const std::map<std::string, Converter>& Table() {
  static const std::map<std::string, Converter> table = {
      {"Abs", Unary<kAbs>},
      {"Add", Binary<kAdd>},
      {"And", Binary<kAnd>},
      {"ArgMax", ArgReduce<kArgmax>},
      {"ArgMin", ArgReduce<kArgmin>},
      {"BatchNormalization", BatchNormalization},
      {"Cast", Cast},
      {"Ceil", Unary<kCeil>},
      {"Clip", Clip},
      {"Concat", Concat},
      {"Cos", Unary<kCos>},
      {"Div", Binary<kDiv>},
      {"Dropout", Dropout},
      {"Elu", Elu},
      {"Equal", Binary<kEqual>},
      {"Erf", Unary<kErf>},
      {"Exp", Unary<kExp>},
      {"Expand", Expand},
      {"Flatten", Flatten},
      {"Floor", Unary<kFloor>},
      {"Gather", Gather},
      {"Gemm", Gemm},
      {"Greater", Binary<kGreater>},
      {"GreaterOrEqual", Binary<kGreaterEqual>},
      {"HardSigmoid", HardSigmoid},
      {"Identity", Identity},
      {"LayerNormalization", LayerNormalization},
      {"LeakyRelu", LeakyRelu},
      {"Less", Binary<kLess>},
      {"LessOrEqual", Binary<kLessEqual>},
      {"Log", Unary<kLog>},
      {"LogSoftmax", Softmax<kLogSoftmax>},
      {"MatMul", Binary<kMatmul>},
      {"Max", Fold<kMaximum>},
      {"Mean", Mean},
      {"Min", Fold<kMinimum>},
      {"Mod", Mod},
      {"Mul", Binary<kMul>},
      {"Neg", Unary<kNeg>},
      {"Not", Unary<kNot>},
      {"Or", Binary<kOr>},
      {"Pow", Pow},
      {"Range", Range},
      {"Reciprocal", Unary<kReciprocal>},
      {"ReduceL2", Reduce<kL2>},
      {"ReduceMax", Reduce<kMax>},
      {"ReduceMean", Reduce<kMean>},
      {"ReduceMin", Reduce<kMin>},
      {"ReduceProd", Reduce<kProd>},
      {"ReduceSum", Reduce<kSum>},
      {"Relu", Unary<kRelu>},
      {"Reshape", Reshape},
      {"Round", Unary<kRound>},
      {"Sigmoid", Unary<kSigmoid>},
      {"Sign", Unary<kSign>},
      {"Sin", Unary<kSin>},
      {"Slice", Slice},
      {"Softmax", Softmax<kSoftmax>},
      {"Softplus", Softplus},
      {"Split", Split},
      {"Sqrt", Unary<kSqrt>},
      {"Squeeze", Squeeze},
      {"Sub", Binary<kSub>},
      {"Sum", Fold<kAdd>},
      {"Tanh", Unary<kTanh>},
      {"Transpose", Transpose},
      {"Unsqueeze", Unsqueeze},
      {"Where", Where},
      {"Xor", Binary<kXor>},
  };
  return table;
}

}  // namespace

Converter FindConverter(const std::string& op_type) {
  auto it = Table().find(op_type);
  return it == Table().end() ? nullptr : it->second;
}

std::vector<std::string> ConverterNames() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : Table()) names.push_back(name);
  return names;
}

}  // namespace kiln::onnx_import
