#include "ir/type_infer.h"

#include <functional>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/visitor.h"

namespace kiln {

std::string DescribeNode(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kCall: {
      const CallNode* c = AsCall(e);
      std::string what = c->op                  ? c->op->name
                         : AsGlobalVar(c->fn)   ? "call of @" + c->fn->name
                         : AsConstructor(c->fn) ? c->fn->name
                                                : std::string("call");
      return e->name.empty() ? what : StrCat(what, " '", e->name, "'");
    }
    case ExprKind::kVar:
      return "%" + e->name;
    case ExprKind::kConstant:
      return e->name.empty() ? "constant" : StrCat("constant '", e->name, "'");
    case ExprKind::kTuple:
      return e->name.empty() ? "tuple" : StrCat("tuple '", e->name, "'");
    case ExprKind::kTupleGetItem:
      return StrCat("tuple item .", AsTupleGetItem(e)->index,
                    e->name.empty() ? "" : " '" + e->name + "'");
    case ExprKind::kFunction:
      return e->name.empty() ? "function" : StrCat("function '", e->name, "'");
    case ExprKind::kGlobalVar:
      return "@" + e->name;
    case ExprKind::kConstructor:
      return "constructor " + e->name;
    case ExprKind::kMatch:
      return e->name.empty() ? "match" : StrCat("match '", e->name, "'");
  }
  return "node";
}

namespace {

// The instantiations of module functions checked during one inference, shared by the solvers
// of the caller and of every instance it checks.
struct InstanceCache {
  std::map<std::string, Type> ret;    // "@f<subst>" -> the instance's return type
  std::set<std::string> in_progress;  // instances being checked (a recursive call meets one)
  size_t checked = 0;                 // instances inferred so far
};
constexpr size_t kMaxInstanceNesting = 64;
constexpr size_t kMaxInstanceKey = 8192;
constexpr size_t kMaxInstances = 1000;  // per inference: each is a body inferred once more

std::string SubstToString(const TypeSubst& subst) {
  std::string s;
  for (const auto& [name, arg] : subst)
    s += StrCat(s.empty() ? "" : ", ", name, " = ", TypeArgToString(arg));
  return s;
}

bool HasDimSymbols(const Type& t) {
  if (const TensorTypeNode* x = AsTensor(t)) {
    for (const Dim& d : x->shape)
      if (!d.is_const()) return true;
    return false;
  }
  if (const TupleTypeNode* x = AsTuple(t)) {
    for (const Type& f : x->fields)
      if (HasDimSymbols(f)) return true;
    return false;
  }
  if (const TypeCallNode* x = AsTypeCall(t)) {
    for (const Type& a : x->args)
      if (HasDimSymbols(a)) return true;
    return false;
  }
  return AsFunc(t) != nullptr;  // not worth a walk: left to the relation
}

// Type parameters stand only where their kinds allow in `f`'s signature.
void CheckSignatureKinds(const FunctionNode* f) {
  for (const Var& p : f->params) CheckKinds(p->type, f->type_params, "parameter %" + p->name);
  CheckKinds(f->ret_type, f->type_params, "the return type");
}

// Holds the type of every node as it becomes known, and solves the constraints between them.
class Solver {
 public:
  Solver(std::vector<DimConstraint>* constraints, InferStats* stats,
         const IRModule* module = nullptr, InstanceCache* cache = nullptr)
      : constraints_(constraints), stats_(stats), module_(module), cache_(cache) {
    if (!cache_) {
      own_cache_ = std::make_unique<InstanceCache>();
      cache_ = own_cache_.get();
    }
  }

  Function Run(const Function& fn) {
    if (!fn->type_params.empty())
      Throw(ErrorCode::kTypeError, "a polymorphic function (", fn->type_params.size(),
            " type parameters) is checked where it is called: infer the module that calls it");
    CheckSignatureKinds(fn.get());
    Expr root = fn;
    std::vector<Expr> order;
    Collect(root, order);
    CheckCallees(order);
    for (const Expr& e : order) AddConstraints(e);
    // Return annotations are checked after the relations ran, so a mismatch is reported
    // against the annotation rather than the op that produced the value; any hole they fill
    // lets the relations run again.
    SolveRelations(/*final=*/false);
    for (const Expr& e : order) {
      const FunctionNode* f = AsFunction(e);
      if (f && f->ret_type) Unify(f->ret_type, SlotOf(f->body), e, "the declared return type");
    }
    SolveRelations(/*final=*/true);
    for (const Expr& e : order) {
      // A module function or constructor used as a callee has the callee's generic type.
      if (e->kind == ExprKind::kGlobalVar || e->kind == ExprKind::kConstructor) continue;
      Type t = Resolve(SlotOf(e));
      if (!IsComplete(t))
        Throw(ErrorCode::kTypeError, "cannot infer the type of ", DescribeNode(e), " (got ",
              TypeToString(t), "); annotate the parameters it depends on");
    }
    return std::static_pointer_cast<const FunctionNode>(Rebuild(order, root));
  }

 private:
  // All nodes, operands before users; a nested function's body before the function node, a
  // match's pattern variables and clause bodies before the match.
  void Collect(const Expr& root, std::vector<Expr>& order) {
    const FunctionNode* f = AsFunction(root);
    CollectBody(f->body, order);
    for (const Var& p : f->params) order.push_back(p);
    order.push_back(root);
  }
  void CollectBody(const Expr& body, std::vector<Expr>& order) {
    for (const Expr& e : PostOrder(body)) {
      if (e->kind != ExprKind::kVar && !collected_.insert(e.get()).second) continue;
      if (e->kind == ExprKind::kFunction) {
        Collect(e, order);
        continue;
      }
      if (const MatchNode* m = AsMatch(e)) {
        for (const MatchClause& c : m->clauses) {
          std::vector<Var> vars;
          PatternVars(c.pattern, &vars);
          order.insert(order.end(), vars.begin(), vars.end());
          CollectBody(c.body, order);
        }
      }
      order.push_back(e);
    }
  }

  Type& SlotOf(const Expr& e) {
    auto it = slots_.find(e.get());
    if (it != slots_.end()) return it->second;
    Type t;
    if (e->kind == ExprKind::kVar) {
      t = IsComplete(e->type) ? e->type : IncompleteType();
    } else if (const ConstantNode* c = AsConstant(e)) {
      t = TypeOfTensor(c->value);
    } else if (e->kind == ExprKind::kGlobalVar) {
      t = DeclaredType(e);
    } else if (const ConstructorNode* k = AsConstructor(e)) {
      std::vector<Type> holes = FreshArgs(*k->adt);
      t = FuncType(k->adt->FieldTypes(k->tag, holes), TypeCall(k->adt->name, holes));
    } else {
      t = IncompleteType();
    }
    return slots_[e.get()] = t;
  }

  static std::vector<Type> FreshArgs(const AdtDef& adt) {
    std::vector<Type> holes;
    for (size_t i = 0; i < adt.type_params.size(); ++i) holes.push_back(IncompleteType());
    return holes;
  }

  // The module function `g` refers to; errors name the node that refers to it.
  Function Callee(const Expr& g, const Expr& at) {
    if (!module_)
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": @", g->name,
            " is a module function, and there is no module to look it up in");
    if (!module_->Contains(g->name))
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": the module has no function @", g->name);
    return module_->Lookup(g->name);
  }

  // Module functions and constructors are only called, never passed as values: a polymorphic
  // one has no single type to pass, and an instance is made per call.
  static void CheckCallees(const std::vector<Expr>& order) {
    std::unordered_set<const ExprNode*> callees;
    for (const Expr& e : order)
      if (const CallNode* c = AsCall(e); c && c->fn) callees.insert(c->fn.get());
    for (const Expr& e : order) {
      if ((e->kind == ExprKind::kGlobalVar || e->kind == ExprKind::kConstructor) &&
          !callees.count(e.get()))
        Throw(ErrorCode::kTypeError, DescribeNode(e),
              " is used as a value; module functions and constructors can only be called");
    }
  }

  // A module function's type as its annotations declare it (holes where they are missing).
  Type DeclaredType(const Expr& g) {
    Function f = Callee(g, g);
    std::vector<Type> params;
    for (const Var& p : f->params) params.push_back(p->type ? p->type : IncompleteType());
    return PolyFuncType(f->type_params, std::move(params),
                        f->ret_type ? f->ret_type : IncompleteType(), f->type_constraints);
  }

  void AddConstraints(const Expr& e) {
    Type& slot = SlotOf(e);
    switch (e->kind) {
      case ExprKind::kVar:
      case ExprKind::kConstant:
        break;
      case ExprKind::kCall: {
        const CallNode* c = AsCall(e);
        if (c->op) {
          pending_.push_back(e);
        } else if (AsGlobalVar(c->fn)) {
          // Parameters whose annotations bind nothing type their arguments at once (so `Nil`
          // passed for a `List[f32[2]]` gets its element type); the rest wait for the
          // argument types in the call's relation.
          Function callee = Callee(c->fn, e);
          for (size_t i = 0; i < callee->params.size() && i < c->args.size(); ++i) {
            const Type& want = callee->params[i]->type;
            if (want && IsComplete(want) && !HasTypeParams(want) && !HasDimSymbols(want))
              Unify(want, SlotOf(c->args[i]), e,
                    StrCat("argument ", i, " (for %", callee->params[i]->name, " of @", c->fn->name,
                           ")"));
          }
          pending_.push_back(e);
        } else if (const ConstructorNode* k = AsConstructor(c->fn)) {
          std::vector<Type> holes = FreshArgs(*k->adt);
          std::vector<Type> fields = k->adt->FieldTypes(k->tag, holes);
          if (fields.size() != c->args.size())
            Throw(ErrorCode::kTypeError, DescribeNode(e), ": constructor ", k->name, " of ",
                  k->adt->name, " takes ", fields.size(), " fields, got ", c->args.size());
          for (size_t i = 0; i < fields.size(); ++i) {
            try {
              Unify(fields[i], SlotOf(c->args[i]), e, "");
            } catch (const Error& err) {
              if (err.code() != ErrorCode::kTypeError) throw;
              // The whole field types say more than the innermost parts that differ.
              Throw(ErrorCode::kTypeError, DescribeNode(e), ": field ", i, " of constructor ",
                    k->name, " differs: expected ", TypeToString(Resolve(fields[i])), ", got ",
                    TypeToString(Resolve(SlotOf(c->args[i]))));
            }
          }
          Unify(slot, TypeCall(k->adt->name, holes), e, "the constructed value's type");
        } else {
          std::vector<Type> params;
          for (const Expr& a : c->args) params.push_back(SlotOf(a));
          Unify(SlotOf(c->fn), FuncType(params, slot), e, "the callee's type");
        }
        break;
      }
      case ExprKind::kTuple: {
        std::vector<Type> fields;
        for (const Expr& f : AsTuple(e)->fields) fields.push_back(SlotOf(f));
        Unify(slot, TupleType(fields), e, "the tuple's type");
        break;
      }
      case ExprKind::kTupleGetItem:
        pending_.push_back(e);
        break;
      case ExprKind::kFunction: {
        const FunctionNode* f = AsFunction(e);
        std::vector<Type> params;
        for (const Var& p : f->params) params.push_back(SlotOf(p));
        Unify(slot, FuncType(params, SlotOf(f->body)), e, "the function's type");
        break;
      }
      case ExprKind::kGlobalVar:
      case ExprKind::kConstructor:
        break;
      case ExprKind::kMatch: {
        const MatchNode* m = AsMatch(e);
        for (const MatchClause& c : m->clauses) {
          TypePattern(c.pattern, SlotOf(m->data), e);
          Unify(slot, SlotOf(c.body), e, "a clause's value type");
        }
        break;
      }
    }
  }

  // The data matched against `p` has type `t`: the pattern's variables get its parts' types.
  void TypePattern(const Pattern& p, const Type& t, const Expr& at) {
    switch (p->kind) {
      case PatternKind::kWildcard:
        return;
      case PatternKind::kVar:
        Unify(t, SlotOf(p->var), at, StrCat("the type of pattern variable %", p->var->name));
        return;
      case PatternKind::kConstructor: {
        std::vector<Type> holes = FreshArgs(*p->adt);
        const std::string& ctor = p->adt->constructors[p->tag].name;
        Unify(TypeCall(p->adt->name, holes), t, at, StrCat("the data of pattern ", ctor));
        std::vector<Type> fields = p->adt->FieldTypes(p->tag, holes);
        for (size_t i = 0; i < fields.size() && i < p->fields.size(); ++i)
          TypePattern(p->fields[i], fields[i], at);
        return;
      }
      case PatternKind::kTuple: {
        std::vector<Type> holes;
        for (size_t i = 0; i < p->fields.size(); ++i) holes.push_back(IncompleteType());
        Unify(TupleType(holes), t, at, "the data of a tuple pattern");
        for (size_t i = 0; i < holes.size(); ++i) TypePattern(p->fields[i], holes[i], at);
        return;
      }
    }
  }

  void SolveRelations(bool final) {
    while (!pending_.empty()) {
      if (stats_) ++stats_->rounds;
      bool progress = false;
      std::vector<Expr> still;
      for (const Expr& e : pending_) {
        if (TryRelation(e)) {
          progress = true;
        } else {
          still.push_back(e);
        }
      }
      pending_ = std::move(still);
      if (!progress) break;
    }
    if (final && !pending_.empty()) {
      const Expr& e = pending_.front();
      Throw(ErrorCode::kTypeError, "cannot infer the type of ", DescribeNode(e),
            ": the types of its inputs are unknown; annotate the parameters they depend on");
    }
  }

  // Runs the relation of `e` if its inputs are known; returns whether it ran.
  bool TryRelation(const Expr& e) {
    if (stats_) ++stats_->relation_runs;
    if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
      Type t = Resolve(SlotOf(g->tuple));
      if (t->kind == TypeKind::kIncomplete) return false;
      const TupleTypeNode* tt = AsTuple(t);
      if (!tt)
        Throw(ErrorCode::kTypeError, DescribeNode(e), ": indexing a value of type ",
              TypeToString(t), ", which is not a tuple");
      if (g->index >= static_cast<int>(tt->fields.size()))
        Throw(ErrorCode::kTypeError, DescribeNode(e), ": index ", g->index, " is out of range for ",
              TypeToString(t));
      Unify(SlotOf(e), tt->fields[g->index], e, "the tuple field's type");
      return true;
    }
    const CallNode* c = AsCall(e);
    std::vector<Type> args;
    for (const Expr& a : c->args) {
      args.push_back(Resolve(SlotOf(a)));
      if (!IsComplete(args.back())) return false;
    }
    if (!c->op) return GlobalCall(e, args);
    Type result;
    std::string who = DescribeNode(e);
    try {
      TypeRelContext ctx(args, c->attrs, who, constraints_);
      result = c->op->type_rel(ctx);
    } catch (const Error& err) {
      if (err.code() != ErrorCode::kTypeError) throw;
      Throw(ErrorCode::kTypeError, who, ": ", err.what());
    }
    KILN_CHECK(result != nullptr, "the type relation of ", c->op->name, " returned no type");
    Unify(SlotOf(e), result, e, "the op's result type");
    return true;
  }

  // A call of a module function whose argument types are known: instantiates the callee's type
  // parameters from the explicit type arguments and the argument types, checks its
  // constraints, and infers its body for that instantiation (once per instantiation).
  bool GlobalCall(const Expr& e, const std::vector<Type>& args) {
    const CallNode* c = AsCall(e);
    const std::string who = DescribeNode(e);
    Function callee = Callee(c->fn, e);
    const std::string& name = c->fn->name;
    TypeSubst subst = InstantiateCall(callee, name, args, c->type_args, who, constraints_);
    Type ret = InstanceReturn(name, callee, subst, e);
    Unify(SlotOf(e), ret, e, StrCat("the return type of @", name));
    if (callee->type_params.empty())
      Unify(SlotOf(c->fn), FuncType(args, ret), e, StrCat("the type of @", name));
    return true;
  }

  // The return type of `callee` instantiated with `subst`, its body inferred for that
  // instantiation the first time it is met.
  Type InstanceReturn(const std::string& name, const Function& callee, const TypeSubst& subst,
                      const Expr& at) {
    const std::string key = StrCat("@", name, "<", SubstToString(subst), ">");
    // Types that grow at each recursive call grow exponentially in print: stop early.
    if (key.size() > kMaxInstanceKey)
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": instantiating @", name,
            " at types too large to check (", key.size(), " characters written out)");
    auto it = cache_->ret.find(key);
    if (it != cache_->ret.end()) return it->second;
    if (cache_->in_progress.count(key)) {
      if (!callee->ret_type)
        Throw(ErrorCode::kTypeError, DescribeNode(at), ": a recursive call of @", name, " needs @",
              name, "'s return type annotated");
      return SubstituteTypeParams(callee->ret_type, subst);
    }
    if (cache_->in_progress.size() >= kMaxInstanceNesting)
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": instantiating @", name, " nests more than ",
            kMaxInstanceNesting, " instances deep (does it call itself at ever larger types?)");
    if (++cache_->checked > kMaxInstances)
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": instantiating @", name, ": more than ",
            kMaxInstances, " instances of module functions in one inference");
    cache_->in_progress.insert(key);
    Function typed;
    try {
      Solver inner(constraints_, nullptr, module_, cache_);
      typed = inner.Run(Instantiate(callee, subst));
    } catch (const Error& err) {
      cache_->in_progress.erase(key);
      throw Error(err.code(),
                  StrCat(DescribeNode(at), ": in @", name,
                         subst.empty() ? "" : " with " + SubstToString(subst), ": ", err.what()));
    }
    cache_->in_progress.erase(key);
    return cache_->ret[key] = typed->body->type;
  }

  Type Resolve(const Type& t) {
    switch (t->kind) {
      case TypeKind::kTensor:
      case TypeKind::kTypeVar:
        return t;
      case TypeKind::kTypeCall: {
        std::vector<Type> a;
        for (const Type& x : AsTypeCall(t)->args) a.push_back(Resolve(x));
        return TypeCall(AsTypeCall(t)->adt, std::move(a));
      }
      case TypeKind::kIncomplete: {
        auto it = holes_.find(static_cast<const IncompleteTypeNode*>(t.get())->id);
        if (it == holes_.end()) return t;
        Type r = Resolve(it->second);
        it->second = r;  // path compression
        return r;
      }
      case TypeKind::kTuple: {
        std::vector<Type> f;
        for (const Type& x : AsTuple(t)->fields) f.push_back(Resolve(x));
        return TupleType(std::move(f));
      }
      case TypeKind::kFunc: {
        std::vector<Type> p;
        for (const Type& x : AsFunc(t)->params) p.push_back(Resolve(x));
        return FuncType(std::move(p), Resolve(AsFunc(t)->ret));
      }
    }
    return t;
  }

  // Whether hole `id` occurs in `t` (resolved).
  static bool Occurs(int64_t id, const Type& t) {
    switch (t->kind) {
      case TypeKind::kIncomplete:
        return static_cast<const IncompleteTypeNode*>(t.get())->id == id;
      case TypeKind::kTuple:
        for (const Type& f : AsTuple(t)->fields)
          if (Occurs(id, f)) return true;
        return false;
      case TypeKind::kFunc:
        for (const Type& p : AsFunc(t)->params)
          if (Occurs(id, p)) return true;
        return Occurs(id, AsFunc(t)->ret);
      case TypeKind::kTypeCall:
        for (const Type& a : AsTypeCall(t)->args)
          if (Occurs(id, a)) return true;
        return false;
      default:
        return false;
    }
  }

  void Unify(const Type& a0, const Type& b0, const Expr& at, const std::string& what) {
    Type a = Resolve(a0), b = Resolve(b0);
    if (a->kind == TypeKind::kIncomplete || b->kind == TypeKind::kIncomplete) {
      if (TypeEqual(a, b)) return;
      const Type& hole = a->kind == TypeKind::kIncomplete ? a : b;
      const Type& other = a->kind == TypeKind::kIncomplete ? b : a;
      const int64_t id = static_cast<const IncompleteTypeNode*>(hole.get())->id;
      // A hole bound to a type containing itself would be infinite (`Cons(%l, %l)`).
      if (Occurs(id, other))
        Throw(ErrorCode::kTypeError, DescribeNode(at), ": ", what,
              " would be an infinite type (it contains itself: ", TypeToString(other), ")");
      holes_[id] = other;
      return;
    }
    auto fail = [&] {
      Throw(ErrorCode::kTypeError, DescribeNode(at), ": ", what, " differs: expected ",
            TypeToString(a), ", got ", TypeToString(b));
    };
    if (a->kind != b->kind) fail();
    switch (a->kind) {
      case TypeKind::kTensor: {
        const TensorTypeNode* x = AsTensor(a);
        const TensorTypeNode* y = AsTensor(b);
        if (x->dtype != y->dtype || x->shape.size() != y->shape.size() ||
            !TypeEqual(x->shape_var, y->shape_var) || !TypeEqual(x->dtype_var, y->dtype_var))
          fail();
        for (size_t i = 0; i < x->shape.size(); ++i) {
          if (x->shape[i] == y->shape[i]) continue;
          if ((x->shape[i] - y->shape[i]).is_const()) fail();
          if (constraints_)
            constraints_->push_back({DimConstraint::Kind::kEqual, x->shape[i], y->shape[i],
                                     StrCat(DescribeNode(at), ", dim ", i, " of ", what)});
        }
        return;
      }
      case TypeKind::kTuple: {
        const auto& x = AsTuple(a)->fields;
        const auto& y = AsTuple(b)->fields;
        if (x.size() != y.size()) fail();
        for (size_t i = 0; i < x.size(); ++i) Unify(x[i], y[i], at, what);
        return;
      }
      case TypeKind::kFunc: {
        const FuncTypeNode* x = AsFunc(a);
        const FuncTypeNode* y = AsFunc(b);
        if (x->params.size() != y->params.size()) fail();
        for (size_t i = 0; i < x->params.size(); ++i) Unify(x->params[i], y->params[i], at, what);
        Unify(x->ret, y->ret, at, what);
        return;
      }
      case TypeKind::kIncomplete:
        return;
      case TypeKind::kTypeVar:
        if (!TypeEqual(a, b)) fail();
        return;
      case TypeKind::kTypeCall: {
        const TypeCallNode* x = AsTypeCall(a);
        const TypeCallNode* y = AsTypeCall(b);
        if (x->adt != y->adt || x->args.size() != y->args.size()) fail();
        for (size_t i = 0; i < x->args.size(); ++i) Unify(x->args[i], y->args[i], at, what);
        return;
      }
    }
  }

  // Rebuilds every node with its resolved type. A node whose operands and type are unchanged
  // is returned as itself, so inferring an already typed graph returns it unchanged.
  Expr Rebuild(const std::vector<Expr>& order, const Expr& root) {
    std::unordered_map<const ExprNode*, Expr> done;
    auto get = [&](const Expr& e) { return done.at(e.get()); };
    for (const Expr& e : order) {
      if (done.count(e.get())) continue;
      Type t = Resolve(SlotOf(e));
      bool same_type = TypeEqual(t, e->type);
      Expr out;
      switch (e->kind) {
        case ExprKind::kVar:
        case ExprKind::kConstant:
        case ExprKind::kGlobalVar:
        case ExprKind::kConstructor:
          out = same_type ? e : WithType(e, t);
          break;
        case ExprKind::kMatch: {
          const MatchNode* m = AsMatch(e);
          auto n = std::make_shared<MatchNode>(*m);
          bool changed = !same_type;
          n->data = get(m->data);
          changed |= n->data != m->data;
          for (MatchClause& c : n->clauses) {
            c.pattern = RebuildPattern(c.pattern, get, &changed);
            Expr body = get(c.body);
            changed |= body != c.body;
            c.body = body;
          }
          n->type = t;
          out = changed ? Expr(n) : e;
          break;
        }
        case ExprKind::kCall: {
          const CallNode* c = AsCall(e);
          auto n = std::make_shared<CallNode>(*c);
          bool changed = !same_type;
          if (c->fn) {
            n->fn = get(c->fn);
            changed |= n->fn != c->fn;
          }
          for (Expr& a : n->args) {
            Expr na = get(a);
            changed |= na != a;
            a = na;
          }
          n->type = t;
          out = changed ? Expr(n) : e;
          break;
        }
        case ExprKind::kTuple: {
          auto n = std::make_shared<TupleNode>(*AsTuple(e));
          bool changed = !same_type;
          for (Expr& f : n->fields) {
            Expr nf = get(f);
            changed |= nf != f;
            f = nf;
          }
          n->type = t;
          out = changed ? Expr(n) : e;
          break;
        }
        case ExprKind::kTupleGetItem: {
          auto n = std::make_shared<TupleGetItemNode>(*AsTupleGetItem(e));
          n->tuple = get(n->tuple);
          n->type = t;
          out = (!same_type || n->tuple != AsTupleGetItem(e)->tuple) ? Expr(n) : e;
          break;
        }
        case ExprKind::kFunction: {
          const FunctionNode* f = AsFunction(e);
          auto n = std::make_shared<FunctionNode>(*f);
          bool changed = !same_type;
          for (Var& p : n->params) {
            Var np = std::static_pointer_cast<const VarNode>(get(p));
            changed |= np != p;
            p = np;
          }
          n->body = get(f->body);
          changed |= n->body != f->body;
          n->type = t;
          out = changed ? Expr(n) : e;
          break;
        }
      }
      done[e.get()] = out;
    }
    return done.at(root.get());
  }

  template <typename Get>
  static Pattern RebuildPattern(const Pattern& p, const Get& get, bool* changed) {
    if (p->kind == PatternKind::kWildcard) return p;
    auto n = std::make_shared<PatternNode>(*p);
    if (p->kind == PatternKind::kVar) {
      n->var = std::static_pointer_cast<const VarNode>(get(p->var));
      *changed |= n->var != p->var;
    }
    for (Pattern& f : n->fields) f = RebuildPattern(f, get, changed);
    return n;
  }

  std::vector<DimConstraint>* constraints_;
  InferStats* stats_;
  const IRModule* module_;
  InstanceCache* cache_;
  std::unique_ptr<InstanceCache> own_cache_;
  std::unordered_set<const ExprNode*> collected_;
  std::unordered_map<const ExprNode*, Type> slots_;
  std::unordered_map<int64_t, Type> holes_;
  std::vector<Expr> pending_;
};

}  // namespace

Function InferTypes(const Function& fn, std::vector<DimConstraint>* constraints,
                    InferStats* stats) {
  if (!fn) Throw(ErrorCode::kInvalidArgument, "InferTypes: the function is null");
  Solver solver(constraints, stats);
  return solver.Run(fn);
}

IRModule InferTypes(const IRModule& module) {
  IRModule out = module;
  InstanceCache cache;
  for (const auto& [name, fn] : module.functions()) {
    try {
      if (!fn->type_params.empty()) {
        CheckSignatureKinds(fn.get());  // the body: at each instantiation
        continue;
      }
      Solver solver(nullptr, nullptr, &module, &cache);
      out = out.With(name, solver.Run(fn));
    } catch (const Error& e) {
      throw Error(e.code(), StrCat("@", name, ": ", e.what()));
    }
  }
  return out;
}

Function InferTypes(const IRModule& module, const Function& fn,
                    std::vector<DimConstraint>* constraints) {
  if (!fn) Throw(ErrorCode::kInvalidArgument, "InferTypes: the function is null");
  Solver solver(constraints, nullptr, &module);
  return solver.Run(fn);
}

}  // namespace kiln
