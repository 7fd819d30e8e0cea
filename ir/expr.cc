#include "ir/expr.h"

#include <unordered_set>

#include "ir/error.h"

namespace kiln {

const char* ExprKindName(ExprKind k) {
  switch (k) {
#define KILN_EXPR_NODE(N) \
  case ExprKind::k##N:    \
    return #N;
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
  }
  return "?";
}

namespace {
// The operands waiting to be released by the outermost ReleaseOperands on this thread.
thread_local std::vector<Expr>* tl_pending_release = nullptr;
}  // namespace

void ReleaseOperands(std::vector<Expr>& operands) {
  if (tl_pending_release) {
    for (Expr& e : operands)
      if (e) tl_pending_release->push_back(std::move(e));
    return;
  }
  std::vector<Expr> pending;
  for (Expr& e : operands)
    if (e) pending.push_back(std::move(e));
  tl_pending_release = &pending;
  while (!pending.empty()) {
    Expr e = std::move(pending.back());
    pending.pop_back();
    e.reset();  // a node destroyed here queues its operands instead of recursing
  }
  tl_pending_release = nullptr;
}

Var MakeVar(const std::string& name, Type type) {
  auto n = std::make_shared<VarNode>();
  n->name = name;
  n->type = std::move(type);
  return n;
}

Expr MakeConstant(Tensor value, const std::string& name) {
  if (!value.defined()) Throw(ErrorCode::kInvalidArgument, "constant '", name, "' has no value");
  auto n = std::make_shared<ConstantNode>();
  n->type = TypeOfTensor(value);
  n->value = std::move(value);
  n->name = name;
  return n;
}

Expr MakeCall(const std::string& op, std::vector<Expr> args, const Attrs& attrs,
              const std::string& name) {
  return MakeCall(&OpRegistry::Global().Get(op), std::move(args), attrs, name);
}

Expr MakeCall(const OpDef* op, std::vector<Expr> args, const Attrs& attrs,
              const std::string& name) {
  KILN_CHECK(op != nullptr);
  std::string who = name.empty() ? op->name : StrCat(op->name, " '", name, "'");
  int n = static_cast<int>(args.size());
  if (n < op->min_inputs || (op->max_inputs >= 0 && n > op->max_inputs)) {
    std::string want = op->max_inputs == op->min_inputs ? std::to_string(op->min_inputs)
                       : op->max_inputs < 0             ? StrCat(op->min_inputs, " or more")
                                            : StrCat(op->min_inputs, " to ", op->max_inputs);
    Throw(ErrorCode::kInvalidArgument, who, ": expects ", want, " inputs, got ", n);
  }
  for (int i = 0; i < n; ++i)
    if (!args[i]) Throw(ErrorCode::kInvalidArgument, who, ": input ", i, " is null");
  auto c = std::make_shared<CallNode>();
  c->op = op;
  c->args = std::move(args);
  try {
    c->attrs = NormalizeAttrs(*op, attrs);
  } catch (const Error& e) {
    if (name.empty()) throw;
    throw Error(e.code(), StrCat("node '", name, "': ", e.what()));
  }
  c->name = name;
  return c;
}

Expr MakeFnCall(Expr fn, std::vector<Expr> args, const std::string& name) {
  if (!fn) Throw(ErrorCode::kInvalidArgument, "call '", name, "': callee is null");
  auto c = std::make_shared<CallNode>();
  c->fn = std::move(fn);
  c->args = std::move(args);
  c->name = name;
  return c;
}

Expr MakeTuple(std::vector<Expr> fields) {
  auto t = std::make_shared<TupleNode>();
  t->fields = std::move(fields);
  return t;
}

Expr MakeTupleGetItem(Expr tuple, int index) {
  if (index < 0) Throw(ErrorCode::kInvalidArgument, "tuple index ", index, " is negative");
  auto t = std::make_shared<TupleGetItemNode>();
  t->tuple = std::move(tuple);
  t->index = index;
  return t;
}

Function MakeFunction(std::vector<Var> params, Expr body, Type ret_type, Attrs attrs) {
  auto f = std::make_shared<FunctionNode>();
  f->params = std::move(params);
  f->body = std::move(body);
  f->ret_type = std::move(ret_type);
  f->attrs = std::move(attrs);
  return f;
}

Function MakePolyFunction(std::vector<Type> type_params, std::vector<Var> params, Expr body,
                          Type ret_type, std::vector<TypeConstraint> constraints) {
  for (const Type& t : type_params)
    if (!AsTypeVar(t))
      Throw(ErrorCode::kInvalidArgument, "a function's type parameter is ", TypeToString(t),
            ", not a type variable");
  auto f = std::make_shared<FunctionNode>();
  f->type_params = std::move(type_params);
  f->params = std::move(params);
  f->body = std::move(body);
  f->ret_type = std::move(ret_type);
  f->type_constraints = std::move(constraints);
  return f;
}

Expr MakeGlobalVar(const std::string& name) {
  auto g = std::make_shared<GlobalVarNode>();
  g->name = name;
  return g;
}

Expr MakeConstructor(const Adt& adt, const std::string& constructor) {
  if (!adt) Throw(ErrorCode::kInvalidArgument, "constructor '", constructor, "': no ADT given");
  const int tag = adt->Find(constructor);
  if (tag < 0)
    Throw(ErrorCode::kNotFound, "ADT ", adt->name, " has no constructor '", constructor, "'");
  auto c = std::make_shared<ConstructorNode>();
  c->adt = adt;
  c->tag = tag;
  c->name = constructor;
  return c;
}

Expr MakeMatch(Expr data, std::vector<MatchClause> clauses) {
  if (!data) Throw(ErrorCode::kInvalidArgument, "match: the data is null");
  if (clauses.empty()) Throw(ErrorCode::kInvalidArgument, "match: no clauses");
  for (const MatchClause& c : clauses)
    if (!c.pattern || !c.body)
      Throw(ErrorCode::kInvalidArgument, "match: a clause has no pattern or no body");
  auto m = std::make_shared<MatchNode>();
  m->data = std::move(data);
  m->clauses = std::move(clauses);
  return m;
}

Pattern WildcardPattern() {
  return std::make_shared<const PatternNode>();
}
Pattern VarPattern(Var v) {
  auto p = std::make_shared<PatternNode>();
  p->kind = PatternKind::kVar;
  p->var = std::move(v);
  return p;
}
Pattern ConstructorPattern(Adt adt, int tag, std::vector<Pattern> fields) {
  if (!adt || tag < 0 || tag >= static_cast<int>(adt->constructors.size()))
    Throw(ErrorCode::kInvalidArgument, "constructor pattern: no such constructor");
  const size_t want = adt->constructors[tag].fields.size();
  if (fields.size() != want)
    Throw(ErrorCode::kTypeError, "pattern ", adt->constructors[tag].name, ": ", fields.size(),
          " field patterns for a constructor of ", want, " fields");
  auto p = std::make_shared<PatternNode>();
  p->kind = PatternKind::kConstructor;
  p->adt = std::move(adt);
  p->tag = tag;
  p->fields = std::move(fields);
  return p;
}
Pattern TuplePattern(std::vector<Pattern> fields) {
  auto p = std::make_shared<PatternNode>();
  p->kind = PatternKind::kTuple;
  p->fields = std::move(fields);
  return p;
}
void PatternVars(const Pattern& p, std::vector<Var>* out) {
  if (p->kind == PatternKind::kVar) out->push_back(p->var);
  for (const Pattern& f : p->fields) PatternVars(f, out);
}

Expr WithType(const Expr& e, Type type) {
  switch (e->kind) {
#define KILN_EXPR_NODE(N)                                                      \
  case ExprKind::k##N: {                                                       \
    auto n = std::make_shared<N##Node>(*static_cast<const N##Node*>(e.get())); \
    n->type = std::move(type);                                                 \
    return n;                                                                  \
  }
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
  }
  return e;
}

Function IRModule::Lookup(const std::string& name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) Throw(ErrorCode::kNotFound, "module has no function '@", name, "'");
  return it->second;
}

IRModule IRModule::With(const std::string& name, Function fn) const {
  IRModule m = *this;
  m.functions_[name] = std::move(fn);
  return m;
}

IRModule IRModule::WithPrimFunc(const std::string& name, loop::PrimFunc f) const {
  IRModule m = *this;
  m.prim_funcs_[name] = std::move(f);
  return m;
}

IRModule IRModule::WithAdt(Adt adt) const {
  if (!adt) Throw(ErrorCode::kInvalidArgument, "WithAdt: the ADT is null");
  if (adt->name == ListAdt()->name)
    Throw(ErrorCode::kInvalidArgument, "ADT ", adt->name, " is built in and cannot be redefined");
  for (const AdtConstructor& c : adt->constructors)
    for (const Type& f : c.fields)
      if (!IsComplete(f))
        Throw(ErrorCode::kInvalidArgument, "ADT ", adt->name, ": constructor ", c.name,
              " has a field of incomplete type ", TypeToString(f));
  IRModule m = *this;
  m.adts_[adt->name] = std::move(adt);
  return m;
}

Adt IRModule::FindAdt(const std::string& name) const {
  if (name == ListAdt()->name) return ListAdt();
  auto it = adts_.find(name);
  return it == adts_.end() ? nullptr : it->second;
}

IRModule IRModule::Without(const std::string& name) const {
  IRModule m = *this;
  m.functions_.erase(name);
  return m;
}

namespace {
void PushOperands(const Expr& e, std::vector<const Expr*>& out) {
  switch (e->kind) {
    case ExprKind::kCall: {
      const CallNode* c = AsCall(e);
      if (c->fn) out.push_back(&c->fn);
      for (const Expr& a : c->args) out.push_back(&a);
      break;
    }
    case ExprKind::kTuple:
      for (const Expr& f : AsTuple(e)->fields) out.push_back(&f);
      break;
    case ExprKind::kTupleGetItem:
      out.push_back(&AsTupleGetItem(e)->tuple);
      break;
    case ExprKind::kMatch:
      out.push_back(&AsMatch(e)->data);  // clause bodies are scopes of their own
      break;
    default:
      break;
  }
}
}  // namespace

std::vector<Expr> PostOrder(const Expr& root) {
  std::vector<Expr> order;
  std::unordered_set<const ExprNode*> done;
  struct Frame {
    Expr e;
    std::vector<const Expr*> ops;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  auto push = [&](const Expr& e) {
    Frame f{e, {}, 0};
    PushOperands(e, f.ops);
    stack.push_back(std::move(f));
  };
  if (!root) return order;
  push(root);
  done.insert(root.get());
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next < top.ops.size()) {
      const Expr& child = *top.ops[top.next++];
      if (child && done.insert(child.get()).second) push(child);
      continue;
    }
    order.push_back(std::move(top.e));
    stack.pop_back();
  }
  return order;
}

}  // namespace kiln
