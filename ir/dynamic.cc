#include "ir/dynamic.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/sequence.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

// Element i of an integer (or bool) tensor, exactly: GetAsDouble would round int64 values past
// 2^53, and slice ends are often INT64_MAX.
int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt64:
      return t.data<int64_t>()[i];
    case DType::kInt32:
      return t.data<int32_t>()[i];
    case DType::kInt16:
      return t.data<int16_t>()[i];
    case DType::kInt8:
      return t.data<int8_t>()[i];
    case DType::kUInt8:
      return t.data<uint8_t>()[i];
    case DType::kUInt16:
      return t.data<uint16_t>()[i];
    case DType::kUInt32:
      return t.data<uint32_t>()[i];
    case DType::kUInt64: {
      // Past int64's range only as "as far as it goes" (a slice end), so it saturates.
      const uint64_t u = t.data<uint64_t>()[i];
      return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
    }
    case DType::kBool:
      return t.data<bool>()[i] ? 1 : 0;
    default: {
      // A float tensor where an int is wanted: truncated, saturating (casting a double outside
      // int64's range is undefined), NaN as 0.
      const double d = t.GetAsDouble(i);
      if (std::isnan(d)) return 0;
      if (d >= 0x1p63) return INT64_MAX;
      if (d <= -0x1p63) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
}

bool IsIntegerLike(DType d) {
  return IsInteger(d) || d == DType::kBool;
}

// Bounds what the fold of a value computation may allocate: value chains are tiny (a shape, a
// few scalars); a constant subgraph computing a large tensor is FoldConstant's to decide.
constexpr int64_t kMaxFoldElements = 1 << 16;

// The static form of dyn.branch (ONNX If): one of its two arguments.
constexpr char kBranchOp[] = "branch";

bool IsDynamicOp(const OpDef* op) {
  return op && !op->static_op.empty();
}

// The body of a dyn.loop instantiated with `args` for its parameters: a fresh copy of every node
// that depends on them (the rest is shared), not yet typed.
Expr Instantiate(const FunctionNode& f, const std::vector<Expr>& args) {
  std::unordered_map<const ExprNode*, Expr> copy;
  for (size_t i = 0; i < f.params.size(); ++i) copy[f.params[i].get()] = args.at(i);
  auto at = [&](const Expr& e) { return copy.count(e.get()) ? copy.at(e.get()) : e; };
  // The copies of `operands`; *changed when one differs.
  auto remap = [&](const std::vector<Expr>& operands, bool* changed) {
    std::vector<Expr> now;
    for (const Expr& x : operands) {
      now.push_back(at(x));
      *changed = *changed || now.back() != x;
    }
    return now;
  };
  for (const Expr& e : PostOrder(f.body)) {
    if (copy.count(e.get())) continue;
    Expr now = e;
    bool changed = false;
    if (const CallNode* c = AsCall(e)) {
      std::vector<Expr> a = remap(c->args, &changed);
      if (changed)
        now = c->op ? MakeCall(c->op, a, c->attrs, e->name) : MakeFnCall(c->fn, a, e->name);
    } else if (const TupleNode* t = AsTuple(e)) {
      std::vector<Expr> fields = remap(t->fields, &changed);
      if (changed) now = MakeTuple(fields);
    } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
      if (at(g->tuple) != g->tuple) now = MakeTupleGetItem(at(g->tuple), g->index);
    }
    copy[e.get()] = now;
  }
  return at(f.body);
}

const TensorTypeNode* ConcreteTensor(const Type& t) {
  const TensorTypeNode* tt = AsTensor(t);
  return tt && IsConstShape(tt->shape) ? tt : nullptr;
}

// Whether every tensor of type `t` is concrete, holding at most kMaxFoldElements in all.
bool SmallConcrete(const Type& t, int64_t* total) {
  if (const TupleTypeNode* tup = AsTuple(t)) {
    for (const Type& f : tup->fields)
      if (!SmallConcrete(f, total)) return false;
    return true;
  }
  const TensorTypeNode* tt = ConcreteTensor(t);
  if (!tt) return false;
  int64_t n = 1;
  for (int64_t d : ConstShape(tt->shape)) {
    if (d != 0 && n > kMaxFoldElements / d) return false;
    n *= d;
  }
  *total += n;
  return *total <= kMaxFoldElements;
}

bool HasUnknownDims(const Type& t) {
  if (const TupleTypeNode* tup = AsTuple(t))
    return std::any_of(tup->fields.begin(), tup->fields.end(), HasUnknownDims);
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt) return false;
  for (const Dim& d : tt->shape) {
    std::set<std::string> symbols;
    d.CollectSymbols(&symbols);
    for (const std::string& s : symbols)
      if (TypeRelContext::IsUnknownDim(Dim::Symbol(s))) return true;
  }
  return false;
}

}  // namespace

AttrValue AttrFromTensor(const Tensor& t, AttrKind kind, const std::string& what) {
  auto need_one = [&] {
    if (t.numel() != 1)
      Throw(ErrorCode::kInvalidArgument, what, ": expected one value, got a tensor ",
            t.TypeString());
  };
  switch (kind) {
    case AttrKind::kInts: {
      if (t.ndim() > 1)
        Throw(ErrorCode::kInvalidArgument, what, ": expected a 1-D tensor, got ", t.TypeString());
      if (!IsIntegerLike(t.dtype()))
        Throw(ErrorCode::kInvalidArgument, what, ": expected integers, got ", t.TypeString());
      std::vector<int64_t> v(t.numel());
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = IntAt(t, i);
      return v;
    }
    case AttrKind::kInt:
      need_one();
      return IntAt(t, 0);
    case AttrKind::kFloats: {
      if (t.ndim() > 1)
        Throw(ErrorCode::kInvalidArgument, what, ": expected a 1-D tensor, got ", t.TypeString());
      std::vector<double> v(t.numel());
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetAsDouble(i);
      return v;
    }
    case AttrKind::kFloat:
      need_one();
      return t.GetAsDouble(0);
    case AttrKind::kBool:
      need_one();
      return t.GetAsDouble(0) != 0;
    default:
      Throw(ErrorCode::kInvalidArgument, what, ": a ", AttrKindName(kind),
            " attribute cannot come from a tensor");
  }
}

Tensor TensorFromAttr(const AttrValue& v) {
  switch (KindOf(v)) {
    case AttrKind::kInts: {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      return Tensor::FromVector<int64_t>({static_cast<int64_t>(xs.size())}, xs);
    }
    case AttrKind::kInt:
      return Tensor::Scalar<int64_t>(std::get<int64_t>(v));
    case AttrKind::kFloats: {
      const auto& xs = std::get<std::vector<double>>(v);
      return Tensor::FromVector<double>({static_cast<int64_t>(xs.size())}, xs);
    }
    case AttrKind::kFloat:
      return Tensor::Scalar<double>(std::get<double>(v));
    case AttrKind::kBool:
      return Tensor::Scalar<bool>(std::get<bool>(v));
    default:
      Throw(ErrorCode::kInternal, "a ", AttrKindName(KindOf(v)),
            " attribute has no tensor form: ", AttrValueToString(v));
  }
}

bool HasDynamicOps(const Function& fn) {
  for (const Expr& e : PostOrder(fn->body)) {
    const CallNode* c = AsCall(e);
    if (c && c->op && (IsDynamicOp(c->op) || IsSequenceOp(c->op) || c->op->fold_from_types))
      return true;
    if (AsFunction(e) && HasDynamicOps(std::static_pointer_cast<const FunctionNode>(e)))
      return true;
  }
  return false;
}

namespace {

// What decides the length of sequence `s` (ir/sequence.h), pushed on `stack`: a split's sizes,
// not the elements' values (the sequence's own structure is followed, not its data).
void PushLengthSources(Expr s, std::vector<Expr>& stack) {
  for (;;) {
    const CallNode* c = AsCall(s);
    if (!c || !IsSequenceOp(c->op)) {  // a branch, a loop: everything it reads
      stack.push_back(s);
      return;
    }
    const std::string& n = c->op->name;
    if (n == "seq.insert" || n == "dyn.seq.insert" || n == "seq.erase" || n == "dyn.seq.erase") {
      s = c->args.at(0);  // one more or one less, wherever
      continue;
    }
    // construct and empty: fixed by the graph; a split: its sizes where they are values (else
    // the split tensor's shape: a type).
    if (IsDynamicOp(c->op))
      for (size_t i = FirstValueArg(*c); i < c->args.size(); ++i) stack.push_back(c->args[i]);
    return;
  }
}

}  // namespace

void PushValueSources(const Expr& e, std::vector<Expr>& stack) {
  if (const CallNode* c = AsCall(e)) {
    if (c->op && c->op->fold_from_types) return;
    if (c->op && c->op->name == "seq.length") {
      PushLengthSources(c->args.at(0), stack);
      return;
    }
    for (const Expr& a : c->args)
      if (!AsFunction(a)) stack.push_back(a);
  } else if (const TupleNode* t = AsTuple(e)) {
    for (const Expr& f : t->fields) stack.push_back(f);
  } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
    stack.push_back(g->tuple);
  }
}

std::vector<int> ValueInputs(const Function& fn) {
  std::unordered_map<const ExprNode*, int> param_index;
  for (size_t i = 0; i < fn->params.size(); ++i) param_index[fn->params[i].get()] = i;
  // Walk back from every value argument of a dynamic op; ops read from types stop the walk.
  std::vector<Expr> stack;
  for (const Expr& e : PostOrder(fn->body)) {
    const CallNode* c = AsCall(e);
    if (!c || !IsDynamicOp(c->op)) continue;
    for (size_t i = FirstValueArg(*c); i < c->args.size(); ++i) stack.push_back(c->args[i]);
  }
  std::unordered_set<const ExprNode*> seen;
  std::set<int> found;
  while (!stack.empty()) {
    Expr e = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(e.get()).second) continue;
    if (e->kind != ExprKind::kVar) {
      PushValueSources(e, stack);
    } else if (auto it = param_index.find(e.get()); it != param_index.end()) {
      found.insert(it->second);
    }
  }
  return {found.begin(), found.end()};
}

Expr FoldValueCall(const CallNode& call, const std::vector<Type>& arg_types,
                   const Type& result_type) {
  const OpDef* op = call.op;
  if (!op || IsDynamicOp(op)) return nullptr;
  if (op->fold_from_types) {
    for (const Type& t : arg_types)
      if (!ConcreteTensor(t)) return nullptr;
    return MakeConstant(op->fold_from_types(arg_types, call.attrs), call.name);
  }
  if (!op->ref_kernel || !result_type) return nullptr;
  std::vector<Tensor> in;
  for (const Expr& a : call.args) {
    const ConstantNode* k = AsConstant(a);
    if (!k) return nullptr;
    in.push_back(k->value);
  }
  int64_t total = 0;
  if (!SmallConcrete(result_type, &total)) return nullptr;
  std::vector<Tensor> results;
  try {
    results = RunOpReference(op->name, in, call.attrs);
  } catch (const Error&) {
    return nullptr;  // left as a call: it fails at run time with the kernel's message
  }
  if (!AsTuple(result_type)) return MakeConstant(std::move(results.at(0)), call.name);
  auto tuple = std::make_shared<TupleNode>();
  for (Tensor& r : results) tuple->fields.push_back(MakeConstant(std::move(r)));
  tuple->name = call.name;
  return tuple;
}

Expr StackIterations(const std::vector<Expr>& parts, int64_t axis, const std::string& name) {
  std::vector<Expr> rows;
  for (const Expr& p : parts)
    rows.push_back(MakeCall("unsqueeze", {p}, Attrs{{"axes", std::vector<int64_t>{axis}}}, name));
  return MakeCall("concat", std::move(rows), Attrs{{"axis", axis}}, name);
}

size_t FirstValueArg(const CallNode& call) {
  if (call.op && call.op->name == kDynLoopOp) return call.args.size() - 2;
  return call.op ? static_cast<size_t>(call.op->num_data_args) : call.args.size();
}

bool StaticForm(const OpDef& op, std::vector<Expr>& args, Attrs& attrs) {
  if (!IsDynamicOp(&op)) return false;
  for (size_t i = op.num_data_args; i < args.size(); ++i)
    if (!AsConstant(args[i])) return false;
  const OpDef& st = OpRegistry::Global().Get(op.static_op);
  for (size_t i = op.num_data_args; i < args.size(); ++i) {
    const std::string& name = op.value_attrs.at(i - op.num_data_args);
    auto spec = std::find_if(st.attrs.begin(), st.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    KILN_CHECK(spec != st.attrs.end(), op.name, ": ", st.name, " has no attribute '", name, "'");
    attrs.Set(name, AttrFromTensor(AsConstant(args[i])->value, spec->kind,
                                   StrCat("attribute '", name, "'")));
  }
  args.resize(op.num_data_args);
  return true;
}

Function ResolveDynamic(const Function& fn, const std::vector<Tensor>& inputs) {
  KILN_CHECK(inputs.size() == fn->params.size(), "ResolveDynamic: ", inputs.size(), " inputs for ",
             fn->params.size(), " parameters");
  std::vector<int> value_inputs = ValueInputs(fn);
  std::unordered_map<const ExprNode*, Expr> value_of;  // value inputs -> their constants
  for (int i : value_inputs) {
    KILN_CHECK(inputs[i].defined(), "ResolveDynamic: value input ", i, " has no value");
    value_of[fn->params[i].get()] = MakeConstant(inputs[i], fn->params[i]->name);
  }

  // One walk in post order, typing each rebuilt node as it goes (producers come first, so a
  // chain shape -> gather -> concat -> dyn.reshape -> shape -> ... resolves in one walk).
  std::unordered_map<const ExprNode*, Expr> out;
  std::unordered_map<const ExprNode*, Type> type_of;  // of rebuilt nodes; null: unknown
  auto type = [&](const Expr& e) -> Type {
    auto it = type_of.find(e.get());
    return it == type_of.end() ? e->type : it->second;
  };
  // A resolved node maps to itself too, so that new nodes built on resolved ones (an unrolled
  // iteration, a sequence's slices) resolve without copying what they are built on. The maps
  // are keyed by address, so every node resolved is kept alive until the end: a node built
  // during the walk and dropped (a sequence's Tuple, once rebuilt) must not have its address
  // reused by a later node, which would then look resolved.
  std::vector<Expr> alive;
  auto remember = [&](const Expr& old, Expr now, Type t) {
    alive.push_back(old);
    type_of[now.get()] = std::move(t);
    out[now.get()] = now;
    out[old.get()] = std::move(now);
  };

  // Resolves every node under `root` not resolved yet; dyn.loop unrolls into new nodes, which
  // resolve in turn.
  std::function<void(const Expr&)> resolve;
  auto unroll = [&](const Expr& e, const std::vector<Expr>& args) -> Expr {
    const CallNode* c = AsCall(e);
    const FunctionNode* body = AsFunction(c->args.at(0));
    const int64_t carried = c->attrs.GetInt("num_carried"), scans = c->attrs.GetInt("num_scans");
    auto value = [&](size_t i, AttrKind kind, const char* what) -> AttrValue {
      const ConstantNode* k = AsConstant(args.at(i));
      if (!k)
        Throw(ErrorCode::kUnsupported, DescribeNode(e), ": its ", what,
              " is computed from input data, not from shapes or shape inputs, so kiln cannot "
              "unroll it at specialization");
      return AttrFromTensor(k->value, kind, StrCat(DescribeNode(e), ": ", what));
    };
    const int64_t trips = std::get<int64_t>(value(args.size() - 2, AttrKind::kInt, "trip count"));
    bool go = std::get<bool>(value(args.size() - 1, AttrKind::kBool, "condition"));
    if (trips > kMaxUnrolledIterations)
      Throw(ErrorCode::kUnsupported, DescribeNode(e), ": its trip count ", trips,
            " is more than the ", kMaxUnrolledIterations, " iterations kiln unrolls");
    KILN_CHECK(body, DescribeNode(e), ": the body is not a function");
    std::vector<Expr> state(c->args.begin() + 1, c->args.begin() + 1 + carried);
    std::vector<Expr> captured(c->args.begin() + 1 + carried, c->args.end() - 2);
    std::vector<std::vector<Expr>> parts(scans);
    const Expr yes = MakeConstant(Tensor::Scalar<bool>(true), StrCat(e->name, ":cond"));
    for (int64_t t = 0; t < trips && go; ++t) {
      std::vector<Expr> in = {MakeConstant(Tensor::Scalar<int64_t>(t), StrCat(e->name, ":iter")),
                              yes};
      in.insert(in.end(), state.begin(), state.end());
      in.insert(in.end(), captured.begin(), captured.end());
      Expr iteration = Instantiate(*body, in);
      resolve(iteration);
      const TupleNode* r = AsTuple(out.at(iteration.get()));
      const ConstantNode* k = r ? AsConstant(r->fields.at(0)) : nullptr;
      if (!k)
        Throw(ErrorCode::kUnsupported, DescribeNode(e),
              ": its body's condition is computed from input data, so kiln cannot unroll it at "
              "specialization");
      go = std::get<bool>(AttrFromTensor(k->value, AttrKind::kBool,
                                         StrCat(DescribeNode(e), ": the body's condition")));
      for (int64_t i = 0; i < carried; ++i) state[i] = MakeTupleGetItem(iteration, 1 + i);
      for (int64_t i = 0; i < scans; ++i)
        parts[i].push_back(MakeTupleGetItem(iteration, 1 + carried + i));
    }
    std::vector<Expr> results = state;
    const std::vector<int64_t> reverse = c->attrs.GetInts("scan_reverse");
    for (int64_t i = 0; i < scans; ++i) {
      if (parts[i].empty())
        Throw(ErrorCode::kUnsupported, DescribeNode(e),
              ": it runs no iteration, and its scan output ", i,
              " would be empty with a shape kiln cannot tell");
      if (i < static_cast<int64_t>(reverse.size()) && reverse[i])
        std::reverse(parts[i].begin(), parts[i].end());
      results.push_back(StackIterations(parts[i], 0, e->name));
    }
    return MakeTuple(results);
  };
  resolve = [&](const Expr& root) {
    for (const Expr& e : PostOrder(root)) {
      if (out.count(e.get())) continue;
      auto arg = [&](const Expr& a) -> const Expr& { return out.at(a.get()); };
      switch (e->kind) {
        case ExprKind::kVar: {
          auto it = value_of.find(e.get());
          Expr now = it != value_of.end() ? it->second : e;
          remember(e, now, it != value_of.end() ? TypeOfTensor(AsConstant(now)->value) : e->type);
          break;
        }
        case ExprKind::kConstant:
          remember(e, e, TypeOfTensor(AsConstant(e)->value));
          break;
        case ExprKind::kFunction:
          remember(e, e, e->type);  // nested functions (fused groups) hold no dynamic ops here
          break;
        case ExprKind::kGlobalVar:
        case ExprKind::kConstructor:
        case ExprKind::kMatch:
          Throw(ErrorCode::kUnsupported, DescribeNode(e),
                ": dynamic ops are resolved in graphs without module calls, ADTs or matches");
        case ExprKind::kTuple: {
          std::vector<Expr> fields;
          std::vector<Type> types;
          for (const Expr& f : AsTuple(e)->fields) {
            fields.push_back(arg(f));
            types.push_back(type(fields.back()));
          }
          bool known = std::all_of(types.begin(), types.end(), [](const Type& t) { return !!t; });
          auto now = std::make_shared<TupleNode>();
          now->fields = std::move(fields);
          now->name = e->name;
          remember(e, now, known ? TupleType(types) : nullptr);
          break;
        }
        case ExprKind::kTupleGetItem: {
          const TupleGetItemNode* g = AsTupleGetItem(e);
          const Expr& tuple = arg(g->tuple);
          if (const TupleNode* t = AsTuple(tuple)) {  // a folded multi-output op
            const Expr& field = t->fields.at(g->index);
            remember(e, field, type(field));
            break;
          }
          const TupleTypeNode* tt = AsTuple(type(tuple));
          remember(e, MakeTupleGetItem(tuple, g->index),
                   tt && g->index < static_cast<int>(tt->fields.size()) ? tt->fields[g->index]
                                                                        : nullptr);
          break;
        }
        case ExprKind::kCall: {
          const CallNode* c = AsCall(e);
          std::vector<Expr> args;
          std::vector<Type> arg_types;
          for (const Expr& a : c->args) {
            args.push_back(arg(a));
            arg_types.push_back(type(args.back()));
          }
          if (!c->op) {
            Expr now = MakeFnCall(c->fn, std::move(args), e->name);
            remember(e, now, nullptr);
            break;
          }
          const OpDef* op = c->op;
          Attrs attrs = c->attrs;
          if (op->name == kDynLoopOp) {  // the unrolled iterations, resolved
            Expr unrolled = unroll(e, args);
            resolve(unrolled);
            const Expr& now = out.at(unrolled.get());
            remember(e, now, type(now));
            break;
          }
          bool types_known =
              std::all_of(arg_types.begin(), arg_types.end(), [](const Type& t) { return !!t; });

          // dyn.<op> whose value arguments are constants: the static op with those values.
          if (IsDynamicOp(op)) {
            try {
              if (StaticForm(*op, args, attrs)) {
                op = &OpRegistry::Global().Get(op->static_op);
                arg_types.resize(args.size());
              }
            } catch (const Error& err) {
              throw Error(err.code(), StrCat(DescribeNode(e), ": ", err.what()));
            }
          }

          // A sequence op: what it stands for now that every sequence is a Tuple (ir/sequence.h).
          if (IsSequenceOp(op)) {
            Expr now = ResolveSequenceCall(e, *op, args, arg_types, attrs);
            resolve(now);
            const Expr& r = out.at(now.get());
            remember(e, r, type(r));
            break;
          }

          // An If whose condition is now known is the taken value itself: nothing of it runs
          // (the other branch is no longer referenced from the body).
          if (op->name == kBranchOp) {
            const Expr& taken = args.at(attrs.GetBool("taken") ? 0 : 1);
            remember(e, taken, type(taken));
            break;
          }
          Expr now;
          try {
            now = MakeCall(op, args, attrs, e->name);
          } catch (const Error& err) {
            throw Error(err.code(), StrCat(DescribeNode(e), ": ", err.what()));
          }
          Type t;
          if (types_known) {
            try {
              t = InferOpType(op->name, arg_types, AsCall(now)->attrs);
            } catch (const Error& err) {
              throw Error(err.code(), StrCat(DescribeNode(e), ": ", err.what()));
            }
          }
          if (Expr folded = FoldValueCall(*AsCall(now), arg_types, t)) now = folded;
          remember(e, now, t);
          break;
        }
      }
    }
  };
  resolve(fn->body);

  Expr body = out.at(fn->body.get());
  for (const Expr& e : PostOrder(body)) {
    const CallNode* c = AsCall(e);
    if (!c || !IsDynamicOp(c->op)) continue;
    const size_t first = FirstValueArg(*c);
    for (size_t i = first; i < c->args.size(); ++i) {
      if (AsConstant(c->args[i])) continue;
      Throw(ErrorCode::kUnsupported, DescribeNode(e), ": its ", c->op->value_attrs.at(i - first),
            " (argument ", i,
            ") is computed from input data, not from shapes or shape inputs, so its result's "
            "shape is only known after the run (kiln specializes on input shapes and shape "
            "inputs' values)");
    }
  }
  // A return annotation with unknown dims is dropped: the resolved body's type replaces it.
  Type ret = fn->ret_type;
  if (ret && HasUnknownDims(ret)) ret = nullptr;
  return InferTypes(MakeFunction(fn->params, body, ret, fn->attrs));
}

}  // namespace kiln
