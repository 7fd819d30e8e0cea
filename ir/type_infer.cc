#include "ir/type_infer.h"

#include <unordered_map>

#include "ir/error.h"
#include "ir/visitor.h"

namespace kiln {

std::string DescribeNode(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kCall: {
      const CallNode* c = AsCall(e);
      std::string what = c->op ? c->op->name : std::string("call");
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
  }
  return "node";
}

namespace {

// Holds the type of every node as it becomes known, and solves the constraints between them.
class Solver {
 public:
  Solver(std::vector<DimConstraint>* constraints, InferStats* stats)
      : constraints_(constraints), stats_(stats) {}

  Function Run(const Function& fn) {
    Expr root = fn;
    std::vector<Expr> order;
    Collect(root, order);
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
      Type t = Resolve(SlotOf(e));
      if (!IsComplete(t))
        Throw(ErrorCode::kTypeError, "cannot infer the type of ", DescribeNode(e), " (got ",
              TypeToString(t), "); annotate the parameters it depends on");
    }
    return std::static_pointer_cast<const FunctionNode>(Rebuild(order, root));
  }

 private:
  // All nodes, operands before users; a nested function's body before the function node.
  void Collect(const Expr& root, std::vector<Expr>& order) {
    const FunctionNode* f = AsFunction(root);
    for (const Expr& e : PostOrder(f->body)) {
      if (e->kind == ExprKind::kFunction) {
        Collect(e, order);
      } else {
        order.push_back(e);
      }
    }
    for (const Var& p : f->params) order.push_back(p);
    order.push_back(root);
  }

  Type& SlotOf(const Expr& e) {
    auto it = slots_.find(e.get());
    if (it != slots_.end()) return it->second;
    Type t;
    if (e->kind == ExprKind::kVar) {
      t = IsComplete(e->type) ? e->type : IncompleteType();
    } else if (const ConstantNode* c = AsConstant(e)) {
      t = TypeOfTensor(c->value);
    } else {
      t = IncompleteType();
    }
    return slots_[e.get()] = t;
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

  Type Resolve(const Type& t) {
    switch (t->kind) {
      case TypeKind::kTensor:
        return t;
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

  void Unify(const Type& a0, const Type& b0, const Expr& at, const char* what) {
    Type a = Resolve(a0), b = Resolve(b0);
    if (a->kind == TypeKind::kIncomplete || b->kind == TypeKind::kIncomplete) {
      if (TypeEqual(a, b)) return;
      if (a->kind == TypeKind::kIncomplete) {
        holes_[static_cast<const IncompleteTypeNode*>(a.get())->id] = b;
      } else {
        holes_[static_cast<const IncompleteTypeNode*>(b.get())->id] = a;
      }
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
        if (x->dtype != y->dtype || x->shape.size() != y->shape.size()) fail();
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
          out = same_type ? e : WithType(e, t);
          break;
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

  std::vector<DimConstraint>* constraints_;
  InferStats* stats_;
  std::unordered_map<const ExprNode*, Type> slots_;
  std::unordered_map<int64_t, Type> holes_;
  std::vector<Expr> pending_;
};

Type SubstituteType(const Type& t, const std::map<std::string, int64_t>& values) {
  if (!t) return t;
  auto fn = [&](const std::string& s) -> std::optional<Dim> {
    auto it = values.find(s);
    if (it == values.end()) return std::nullopt;
    return Dim(it->second);
  };
  switch (t->kind) {
    case TypeKind::kTensor: {
      Shape s;
      for (const Dim& d : AsTensor(t)->shape) s.push_back(d.Substitute(fn));
      return TensorType(std::move(s), AsTensor(t)->dtype);
    }
    case TypeKind::kTuple: {
      std::vector<Type> f;
      for (const Type& x : AsTuple(t)->fields) f.push_back(SubstituteType(x, values));
      return TupleType(std::move(f));
    }
    case TypeKind::kFunc: {
      std::vector<Type> p;
      for (const Type& x : AsFunc(t)->params) p.push_back(SubstituteType(x, values));
      return FuncType(std::move(p), SubstituteType(AsFunc(t)->ret, values));
    }
    case TypeKind::kIncomplete:
      return t;
  }
  return t;
}

// Rewrites variables' annotations with symbols bound to values.
class SymbolBinder : public ExprMutator {
 public:
  explicit SymbolBinder(const std::map<std::string, int64_t>& values) : values_(values) {}

 protected:
  Expr MutateVar(const VarNode* v, const Expr& self) override {
    Type t = SubstituteType(v->type, values_);
    if (TypeEqual(t, v->type)) return self;
    return MakeVar(v->name, t);
  }
  Expr MutateFunction(const FunctionNode* f, const Expr& self) override {
    Expr out = ExprMutator::MutateFunction(f, self);
    Type ret = SubstituteType(f->ret_type, values_);
    if (TypeEqual(ret, f->ret_type)) return out;
    auto n = std::make_shared<FunctionNode>(*AsFunction(out));
    n->ret_type = ret;
    return n;
  }

 private:
  const std::map<std::string, int64_t>& values_;
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
  for (const auto& [name, fn] : module.functions()) {
    try {
      out = out.With(name, InferTypes(fn));
    } catch (const Error& e) {
      throw Error(e.code(), StrCat("@", name, ": ", e.what()));
    }
  }
  return out;
}

std::map<std::string, int64_t> BindInputShapes(const Function& fn,
                                               const std::vector<Type>& arg_types) {
  if (arg_types.size() != fn->params.size())
    Throw(ErrorCode::kInvalidArgument, "expected ", fn->params.size(), " inputs, got ",
          arg_types.size());
  std::map<std::string, int64_t> values;
  std::map<std::string, std::string> bound_by;  // symbol -> the input that bound it
  for (size_t i = 0; i < arg_types.size(); ++i) {
    const Var& p = fn->params[i];
    const TensorTypeNode* want = AsTensor(p->type);
    const TensorTypeNode* got = AsTensor(arg_types[i]);
    std::string who = StrCat("input '", p->name, "'");
    if (!want || !got || !IsConstShape(got->shape)) {
      if (TypeEqual(p->type, arg_types[i])) continue;
      Throw(ErrorCode::kInvalidArgument, who, ": expected ", TypeToString(p->type), ", given ",
            TypeToString(arg_types[i]));
    }
    auto mismatch = [&](const std::string& why) {
      Throw(ErrorCode::kInvalidArgument, who, ": expected ", TypeToString(p->type), ", given ",
            TypeToString(arg_types[i]), why.empty() ? "" : " (" + why + ")");
    };
    if (want->dtype != got->dtype) mismatch("dtype differs");
    if (want->shape.size() != got->shape.size()) mismatch("rank differs");
    for (size_t d = 0; d < want->shape.size(); ++d) {
      const Dim& w = want->shape[d];
      int64_t g = got->shape[d].value();
      if (!w.is_symbol()) continue;
      auto [it, inserted] = values.emplace(w.name(), g);
      if (inserted) {
        bound_by[w.name()] = p->name;
      } else if (it->second != g) {
        mismatch(StrCat("dim ", d, " is ", w.name(), ", which input '", bound_by[w.name()],
                        "' bound to ", it->second));
      }
    }
  }
  // Constant dims and dims that are expressions over symbols are checked once all symbols are
  // bound.
  for (size_t i = 0; i < arg_types.size(); ++i) {
    const TensorTypeNode* want = AsTensor(fn->params[i]->type);
    const TensorTypeNode* got = AsTensor(arg_types[i]);
    if (!want || !got) continue;
    for (size_t d = 0; d < want->shape.size(); ++d) {
      auto v = want->shape[d].TryEval(values);
      if (!v || *v != got->shape[d].value())
        Throw(ErrorCode::kInvalidArgument, "input '", fn->params[i]->name, "': expected ",
              TypeToString(fn->params[i]->type), ", given ", TypeToString(arg_types[i]), " (dim ",
              d, " must be ", want->shape[d].ToString(), v ? StrCat(" = ", *v) : std::string(),
              ")");
    }
  }
  return values;
}

void CheckConstraints(const std::vector<DimConstraint>& constraints,
                      const std::map<std::string, int64_t>& values) {
  for (const DimConstraint& c : constraints) {
    auto a = c.a.TryEval(values);
    auto b = c.b.TryEval(values);
    if (!a || !b) continue;  // not decidable with these symbols; re-inference checks it
    using Kind = DimConstraint::Kind;
    bool ok = c.kind == Kind::kEqual    ? *a == *b
              : c.kind == Kind::kAtMost ? *a <= *b
                                        : (*a == *b || *a == 1 || *b == 1);
    if (!ok)
      Throw(ErrorCode::kTypeError, c.where, ": ", c.a.ToString(), " = ", *a,
            c.kind == Kind::kAtMost ? " is more than " : " and ", c.b.ToString(), " = ", *b,
            c.kind == Kind::kEqual    ? " (they must be equal)"
            : c.kind == Kind::kAtMost ? ""
                                      : " (they do not broadcast)");
  }
}

Function BindSymbols(const Function& fn, const std::map<std::string, int64_t>& values,
                     const std::vector<DimConstraint>& constraints) {
  CheckConstraints(constraints, values);
  SymbolBinder binder(values);
  Expr bound = binder.Mutate(fn);
  return InferTypes(std::static_pointer_cast<const FunctionNode>(bound));
}

}  // namespace kiln
