#include "ir/visitor.h"

#include <functional>

#include "ir/error.h"

namespace kiln {

void ExprVisitor::Visit(const Expr& e) {
  if (!e || !visited_.insert(e.get()).second) return;
  switch (e->kind) {
#define KILN_EXPR_NODE(N)                              \
  case ExprKind::k##N:                                 \
    Visit##N(static_cast<const N##Node*>(e.get()), e); \
    break;
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
  }
}

void ExprVisitor::VisitVar(const VarNode*, const Expr&) {}
void ExprVisitor::VisitConstant(const ConstantNode*, const Expr&) {}
void ExprVisitor::VisitCall(const CallNode* n, const Expr&) {
  if (n->fn) Visit(n->fn);
  for (const Expr& a : n->args) Visit(a);
}
void ExprVisitor::VisitTuple(const TupleNode* n, const Expr&) {
  for (const Expr& f : n->fields) Visit(f);
}
void ExprVisitor::VisitTupleGetItem(const TupleGetItemNode* n, const Expr&) {
  Visit(n->tuple);
}
void ExprVisitor::VisitFunction(const FunctionNode* n, const Expr&) {
  for (const Var& p : n->params) Visit(p);
  Visit(n->body);
}

void ExprVisitor::VisitGlobalVar(const GlobalVarNode*, const Expr&) {}
void ExprVisitor::VisitConstructor(const ConstructorNode*, const Expr&) {}
void ExprVisitor::VisitMatch(const MatchNode* n, const Expr&) {
  Visit(n->data);
  for (const MatchClause& c : n->clauses) {
    std::vector<Var> vars;
    PatternVars(c.pattern, &vars);
    for (const Var& v : vars) Visit(v);
    Visit(c.body);
  }
}

namespace {

// The operands the default Mutate##N methods mutate, last first (so that a stack pops them in
// order). A function's body is left to MutateFunction: nesting depth is small.
void PushOperands(const Expr& e, std::vector<std::pair<Expr, bool>>& stack) {
  auto push = [&](const Expr& c) {
    if (c) stack.push_back({c, false});
  };
  if (const CallNode* c = AsCall(e)) {
    for (size_t i = c->args.size(); i-- > 0;) push(c->args[i]);
    push(c->fn);
  } else if (const TupleNode* t = AsTuple(e)) {
    for (size_t i = t->fields.size(); i-- > 0;) push(t->fields[i]);
  } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
    push(g->tuple);
  } else if (const MatchNode* m = AsMatch(e)) {
    push(m->data);  // clause bodies are left to MutateMatch, like function bodies
  }
}

// `p` with its variables mapped through `mutate` (which may only map them to variables).
Pattern MutatePattern(const Pattern& p, const std::function<Expr(const Expr&)>& mutate,
                      bool* changed) {
  switch (p->kind) {
    case PatternKind::kWildcard:
      return p;
    case PatternKind::kVar: {
      Expr nv = mutate(p->var);
      KILN_CHECK(AsVar(nv) != nullptr, "a pattern variable was rewritten to a ",
                 ExprKindName(nv->kind));
      if (nv == p->var) return p;
      *changed = true;
      return VarPattern(std::static_pointer_cast<const VarNode>(nv));
    }
    case PatternKind::kConstructor:
    case PatternKind::kTuple: {
      bool any = false;
      std::vector<Pattern> fields;
      for (const Pattern& f : p->fields) fields.push_back(MutatePattern(f, mutate, &any));
      if (!any) return p;
      *changed = true;
      auto n = std::make_shared<PatternNode>(*p);
      n->fields = std::move(fields);
      return n;
    }
  }
  return p;
}

}  // namespace

Expr ExprMutator::Mutate(const Expr& e) {
  if (!e) return e;
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second;
  // Operands are mutated first from an explicit stack, so that when Mutate##N asks for its
  // operands they are already in the memo: a long chain costs heap, not C++ stack.
  std::vector<std::pair<Expr, bool>> stack{{e, false}};
  while (!stack.empty()) {
    auto [n, operands_done] = stack.back();
    stack.pop_back();
    if (memo_.count(n.get())) continue;
    if (!operands_done) {
      stack.push_back({n, true});
      PushOperands(n, stack);
      continue;
    }
    Expr out;
    switch (n->kind) {
#define KILN_EXPR_NODE(N)                                     \
  case ExprKind::k##N:                                        \
    out = Mutate##N(static_cast<const N##Node*>(n.get()), n); \
    break;
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
    }
    memo_[n.get()] = out;
  }
  return memo_.at(e.get());
}

Expr ExprMutator::MutateVar(const VarNode*, const Expr& self) {
  return self;
}
Expr ExprMutator::MutateConstant(const ConstantNode*, const Expr& self) {
  return self;
}

Expr ExprMutator::MutateCall(const CallNode* n, const Expr& self) {
  bool changed = false;
  Expr fn = n->fn ? Mutate(n->fn) : nullptr;
  changed |= fn != n->fn;
  std::vector<Expr> args;
  args.reserve(n->args.size());
  for (const Expr& a : n->args) {
    args.push_back(Mutate(a));
    changed |= args.back() != a;
  }
  if (!changed) return self;
  auto c = std::make_shared<CallNode>(*n);
  c->fn = std::move(fn);
  c->args = std::move(args);
  c->type = nullptr;
  return c;
}

Expr ExprMutator::MutateTuple(const TupleNode* n, const Expr& self) {
  bool changed = false;
  std::vector<Expr> fields;
  for (const Expr& f : n->fields) {
    fields.push_back(Mutate(f));
    changed |= fields.back() != f;
  }
  if (!changed) return self;
  auto t = std::make_shared<TupleNode>(*n);
  t->fields = std::move(fields);
  t->type = nullptr;
  return t;
}

Expr ExprMutator::MutateTupleGetItem(const TupleGetItemNode* n, const Expr& self) {
  Expr t = Mutate(n->tuple);
  if (t == n->tuple) return self;
  auto g = std::make_shared<TupleGetItemNode>(*n);
  g->tuple = std::move(t);
  g->type = nullptr;
  return g;
}

Expr ExprMutator::MutateGlobalVar(const GlobalVarNode*, const Expr& self) {
  return self;
}
Expr ExprMutator::MutateConstructor(const ConstructorNode*, const Expr& self) {
  return self;
}

Expr ExprMutator::MutateMatch(const MatchNode* n, const Expr& self) {
  Expr data = Mutate(n->data);
  bool changed = data != n->data;
  std::vector<MatchClause> clauses;
  for (const MatchClause& c : n->clauses) {
    Pattern p = MutatePattern(
        c.pattern, [this](const Expr& v) { return Mutate(v); }, &changed);
    Expr body = Mutate(c.body);
    changed |= body != c.body;
    clauses.push_back({std::move(p), std::move(body)});
  }
  if (!changed) return self;
  auto m = std::make_shared<MatchNode>(*n);
  m->data = std::move(data);
  m->clauses = std::move(clauses);
  m->type = nullptr;
  return m;
}

Expr ExprMutator::MutateFunction(const FunctionNode* n, const Expr& self) {
  bool changed = false;
  std::vector<Var> params;
  for (const Var& p : n->params) {
    Expr np = Mutate(p);
    const VarNode* v = AsVar(np);
    // A mutator may only map a parameter to another variable.
    KILN_CHECK(v != nullptr, "a function parameter was rewritten to a ", ExprKindName(np->kind));
    params.push_back(std::static_pointer_cast<const VarNode>(np));
    changed |= np != p;
  }
  Expr body = Mutate(n->body);
  changed |= body != n->body;
  if (!changed) return self;
  auto f = std::make_shared<FunctionNode>(*n);
  f->params = std::move(params);
  f->body = std::move(body);
  f->type = nullptr;
  return f;
}

}  // namespace kiln
