// Instantiating polymorphic functions and binding dim symbols (ir/type_infer.h): a call's
// type arguments and parameter types matched against its arguments (InstantiateCall), type
// parameters substituted into a function (Instantiate), and a function's dim symbols bound to
// the sizes of concrete inputs (BindInputShapes, CheckConstraints, BindSymbols). The inference
// itself is ir/type_infer.cc.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"

namespace kiln {

namespace {

// Binds the type parameters (and dim symbols) of parameter type `want` from the argument
// type `got`; dims that are expressions are checked once everything is bound.
void MatchParam(const Type& want, const Type& got, TypeSubst& subst,
                std::vector<std::pair<Dim, Dim>>& deferred,
                const std::function<void(const std::string&)>& fail) {
  auto bind = [&](const std::string& name, const TypeArg& a) {
    auto [it, fresh] = subst.emplace(name, a);
    if (!fresh && !TypeArgEqual(it->second, a))
      fail(StrCat("'", name, "' is ", TypeArgToString(it->second), " already"));
  };
  switch (want->kind) {
    case TypeKind::kTypeVar:
      bind(AsTypeVar(want)->name, TypeArg{ParamKind::kType, got, {}, {}, {}});
      return;
    case TypeKind::kTensor: {
      const TensorTypeNode* w = AsTensor(want);
      const TensorTypeNode* g = AsTensor(got);
      if (!g) fail("not a tensor");
      if (w->dtype_var) {
        bind(AsTypeVar(w->dtype_var)->name,
             TypeArg{ParamKind::kBaseType, nullptr, {}, g->dtype, {}});
      } else if (w->dtype != g->dtype) {
        fail("dtype differs");
      }
      if (w->shape_var) {
        bind(AsTypeVar(w->shape_var)->name, TypeArg{ParamKind::kShape, nullptr, g->shape, {}, {}});
        return;
      }
      if (w->shape.size() != g->shape.size()) fail("rank differs");
      for (size_t i = 0; i < w->shape.size(); ++i) {
        if (w->shape[i].is_symbol()) {
          bind(w->shape[i].name(), TypeArg{ParamKind::kShapeVar, nullptr, {}, {}, g->shape[i]});
        } else {
          deferred.push_back({w->shape[i], g->shape[i]});
        }
      }
      return;
    }
    case TypeKind::kTuple: {
      const TupleTypeNode* g = AsTuple(got);
      const auto& wf = AsTuple(want)->fields;
      if (!g || g->fields.size() != wf.size()) fail("not a tuple of that size");
      for (size_t i = 0; i < wf.size(); ++i) MatchParam(wf[i], g->fields[i], subst, deferred, fail);
      return;
    }
    case TypeKind::kTypeCall: {
      const TypeCallNode* w = AsTypeCall(want);
      const TypeCallNode* g = AsTypeCall(got);
      if (!g || g->adt != w->adt || g->args.size() != w->args.size()) fail("");
      for (size_t i = 0; i < w->args.size(); ++i)
        MatchParam(w->args[i], g->args[i], subst, deferred, fail);
      return;
    }
    case TypeKind::kFunc: {
      const FuncTypeNode* w = AsFunc(want);
      const FuncTypeNode* g = AsFunc(got);
      if (!g || g->params.size() != w->params.size()) fail("");
      for (size_t i = 0; i < w->params.size(); ++i)
        MatchParam(w->params[i], g->params[i], subst, deferred, fail);
      MatchParam(w->ret, g->ret, subst, deferred, fail);
      return;
    }
    case TypeKind::kIncomplete:
      return;
  }
}

// Rewrites variables' annotations, return types and calls' type arguments with `subst`
// applied; nothing else changes.
class TypeParamBinder : public ExprMutator {
 public:
  explicit TypeParamBinder(const TypeSubst& subst) : subst_(subst) {}

 protected:
  Expr MutateVar(const VarNode* v, const Expr& self) override {
    Type t = SubstituteTypeParams(v->type, subst_);
    if (TypeEqual(t, v->type)) return self;
    return MakeVar(v->name, t);
  }
  Expr MutateCall(const CallNode* c, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(c, self);
    if (c->type_args.empty()) return out;
    auto n = std::make_shared<CallNode>(*AsCall(out));
    for (TypeArg& a : n->type_args) a = SubstituteTypeParams(a, subst_);
    n->type = nullptr;
    return n;
  }
  Expr MutateFunction(const FunctionNode* f, const Expr& self) override {
    Expr out = ExprMutator::MutateFunction(f, self);
    Type ret = SubstituteTypeParams(f->ret_type, subst_);
    if (TypeEqual(ret, f->ret_type)) return out;
    auto n = std::make_shared<FunctionNode>(*AsFunction(out));
    n->ret_type = ret;
    return n;
  }

 private:
  const TypeSubst& subst_;
};

TypeSubst SymbolValues(const std::map<std::string, int64_t>& values) {
  TypeSubst subst;
  for (const auto& [name, v] : values)
    subst[name] = TypeArg{ParamKind::kShapeVar, nullptr, {}, {}, Dim(v)};
  return subst;
}

}  // namespace

TypeSubst InstantiateCall(const Function& callee, const std::string& name,
                          const std::vector<Type>& args, const std::vector<TypeArg>& type_args,
                          const std::string& who, std::vector<DimConstraint>* constraints) {
  if (args.size() != callee->params.size())
    Throw(ErrorCode::kTypeError, who, ": @", name, " takes ", callee->params.size(),
          " arguments, got ", args.size());
  if (type_args.size() > callee->type_params.size())
    Throw(ErrorCode::kTypeError, who, ": ", type_args.size(), " type arguments given; @", name,
          " has ", callee->type_params.size(), " type parameters");
  TypeSubst subst;
  for (size_t i = 0; i < type_args.size(); ++i) {
    const TypeVarNode* p = AsTypeVar(callee->type_params[i]);
    if (type_args[i].kind != p->param_kind)
      Throw(ErrorCode::kTypeError, who, ": kind error: type argument ", i, " (",
            TypeArgToString(type_args[i]), ") is a ", ParamKindName(type_args[i].kind), ", but '",
            p->name, "' of @", name, " has kind ", ParamKindName(p->param_kind));
    subst[p->name] = type_args[i];
  }
  std::vector<std::pair<Dim, Dim>> deferred;  // (callee's dim expression, the argument's dim)
  for (size_t i = 0; i < args.size(); ++i) {
    const Var& p = callee->params[i];
    if (!p->type || !IsComplete(p->type))
      Throw(ErrorCode::kTypeError, who, ": parameter %", p->name, " of @", name,
            " has no complete type annotation; annotate it to call the function");
    auto fail = [&](const std::string& why) {
      Throw(ErrorCode::kTypeError, who, ": argument ", i, " (for %", p->name, " of @", name,
            "): expected ", TypeToString(SubstituteTypeParams(p->type, subst)), ", got ",
            TypeToString(args[i]), why.empty() ? "" : " (" + why + ")");
    };
    MatchParam(p->type, args[i], subst, deferred, fail);
  }
  for (const auto& [want, got] : deferred) {
    std::set<std::string> symbols;
    want.CollectSymbols(&symbols);
    for (const std::string& s : symbols)
      if (!subst.count(s))
        Throw(ErrorCode::kTypeError, who, ": cannot bind dim symbol '", s, "' of @", name,
              " from the arguments: it stands only inside ", want.ToString());
  }
  for (const Type& t : callee->type_params) {
    const TypeVarNode* v = AsTypeVar(t);
    if (!subst.count(v->name))
      Throw(ErrorCode::kTypeError, who, ": cannot infer type parameter '", v->name, "' of @", name,
            " from the arguments; give it explicitly (@", name, "<...>)");
  }
  for (const auto& [want, got] : deferred) {
    const Dim w = SubstituteTypeParams(want, subst);
    if (w == got) continue;
    if ((w - got).is_const())
      Throw(ErrorCode::kTypeError, who, ": a dim of @", name, "'s parameters is ", want.ToString(),
            " = ", w.ToString(), " here, but the argument's is ", got.ToString());
    if (constraints)
      constraints->push_back({DimConstraint::Kind::kEqual, w, got,
                              StrCat(who, ", dim ", want.ToString(), " of @", name)});
  }
  for (const TypeConstraint& k : callee->type_constraints) {
    std::vector<Type> ks;
    std::string text = StrCat(TypeToString(k.result), " = ", k.op, "(");
    for (size_t i = 0; i < k.args.size(); ++i) {
      ks.push_back(SubstituteTypeParams(k.args[i], subst));
      text += StrCat(i ? ", " : "", TypeToString(k.args[i]));
    }
    text += ")";
    Type want = SubstituteTypeParams(k.result, subst);
    Type got;
    try {
      got = InferOpType(k.op, ks);
    } catch (const Error& err) {
      Throw(ErrorCode::kTypeError, who, ": constraint ", text, " of @", name,
            " does not hold: ", err.what());
    }
    if (!TypeEqual(got, want))
      Throw(ErrorCode::kTypeError, who, ": constraint ", text, " of @", name,
            " does not hold: ", k.op, " gives ", TypeToString(got), ", not ", TypeToString(want));
  }
  return subst;
}

Function Instantiate(const Function& fn, const TypeSubst& subst) {
  TypeParamBinder binder(subst);
  Expr bound = binder.Mutate(fn);
  auto n = std::make_shared<FunctionNode>(*AsFunction(bound));
  n->type_params.clear();
  n->type_constraints.clear();
  n->ret_type = SubstituteTypeParams(fn->ret_type, subst);
  n->type = nullptr;
  return n;
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
                     const std::vector<DimConstraint>& constraints, const IRModule* module) {
  CheckConstraints(constraints, values);
  const TypeSubst subst = SymbolValues(values);
  TypeParamBinder binder(subst);
  Function bound = std::static_pointer_cast<const FunctionNode>(binder.Mutate(fn));
  return module ? InferTypes(*module, bound) : InferTypes(bound);
}

}  // namespace kiln
