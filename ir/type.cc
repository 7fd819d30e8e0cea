#include "ir/type.h"

#include <atomic>
#include <set>

#include "ir/error.h"

namespace kiln {

Type TensorType(Shape shape, DType dtype) {
  return std::make_shared<const TensorTypeNode>(std::move(shape), dtype);
}
Type TupleType(std::vector<Type> fields) {
  return std::make_shared<const TupleTypeNode>(std::move(fields));
}
Type FuncType(std::vector<Type> params, Type ret) {
  return std::make_shared<const FuncTypeNode>(std::move(params), std::move(ret));
}
Type IncompleteType() {
  static std::atomic<int64_t> next{0};
  return std::make_shared<const IncompleteTypeNode>(next.fetch_add(1));
}

const char* ParamKindName(ParamKind k) {
  switch (k) {
    case ParamKind::kType:
      return "Type";
    case ParamKind::kShape:
      return "Shape";
    case ParamKind::kBaseType:
      return "BaseType";
    case ParamKind::kShapeVar:
      return "ShapeVar";
  }
  return "?";
}

bool ParseParamKind(const std::string& s, ParamKind* out) {
  for (ParamKind k :
       {ParamKind::kType, ParamKind::kShape, ParamKind::kBaseType, ParamKind::kShapeVar}) {
    if (s == ParamKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

Type TypeVar(const std::string& name, ParamKind kind) {
  return std::make_shared<const TypeVarNode>(name, kind);
}

Type TensorTypeOf(Type shape_var, Type dtype_var, Shape shape, DType dtype) {
  auto t = std::make_shared<TensorTypeNode>(shape_var ? Shape{} : std::move(shape), dtype);
  t->shape_var = std::move(shape_var);
  t->dtype_var = std::move(dtype_var);
  return t;
}

Type TypeCall(const std::string& adt, std::vector<Type> args) {
  return std::make_shared<const TypeCallNode>(adt, std::move(args));
}

Type PolyFuncType(std::vector<Type> type_params, std::vector<Type> params, Type ret,
                  std::vector<TypeConstraint> constraints) {
  auto f = std::make_shared<FuncTypeNode>(std::move(params), std::move(ret));
  f->type_params = std::move(type_params);
  f->constraints = std::move(constraints);
  return f;
}

const TypeVarNode* AsTypeVar(const Type& t) {
  return t && t->kind == TypeKind::kTypeVar ? static_cast<const TypeVarNode*>(t.get()) : nullptr;
}
const TypeCallNode* AsTypeCall(const Type& t) {
  return t && t->kind == TypeKind::kTypeCall ? static_cast<const TypeCallNode*>(t.get()) : nullptr;
}

const TensorTypeNode* AsTensor(const Type& t) {
  return t && t->kind == TypeKind::kTensor ? static_cast<const TensorTypeNode*>(t.get()) : nullptr;
}
const TupleTypeNode* AsTuple(const Type& t) {
  return t && t->kind == TypeKind::kTuple ? static_cast<const TupleTypeNode*>(t.get()) : nullptr;
}
const FuncTypeNode* AsFunc(const Type& t) {
  return t && t->kind == TypeKind::kFunc ? static_cast<const FuncTypeNode*>(t.get()) : nullptr;
}

bool IsComplete(const Type& t) {
  if (!t) return false;
  switch (t->kind) {
    case TypeKind::kTensor:
      return true;
    case TypeKind::kTuple:
      for (const Type& f : AsTuple(t)->fields)
        if (!IsComplete(f)) return false;
      return true;
    case TypeKind::kFunc: {
      const FuncTypeNode* f = AsFunc(t);
      for (const Type& p : f->params)
        if (!IsComplete(p)) return false;
      return IsComplete(f->ret);
    }
    case TypeKind::kIncomplete:
      return false;
    case TypeKind::kTypeVar:
      return true;  // rigid: stands for one type throughout its signature
    case TypeKind::kTypeCall:
      for (const Type& a : AsTypeCall(t)->args)
        if (!IsComplete(a)) return false;
      return true;
  }
  return false;
}

bool TypeEqual(const Type& a, const Type& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* x = AsTensor(a);
      const TensorTypeNode* y = AsTensor(b);
      return (x->dtype_var ? TypeEqual(x->dtype_var, y->dtype_var)
                           : !y->dtype_var && x->dtype == y->dtype) &&
             TypeEqual(x->shape_var, y->shape_var) && x->shape == y->shape;
    }
    case TypeKind::kTuple: {
      const auto& x = AsTuple(a)->fields;
      const auto& y = AsTuple(b)->fields;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!TypeEqual(x[i], y[i])) return false;
      return true;
    }
    case TypeKind::kFunc: {
      const FuncTypeNode* x = AsFunc(a);
      const FuncTypeNode* y = AsFunc(b);
      if (x->params.size() != y->params.size() || !TypeEqual(x->ret, y->ret)) return false;
      for (size_t i = 0; i < x->params.size(); ++i)
        if (!TypeEqual(x->params[i], y->params[i])) return false;
      if (x->type_params.size() != y->type_params.size() ||
          x->constraints.size() != y->constraints.size())
        return false;
      for (size_t i = 0; i < x->type_params.size(); ++i)
        if (!TypeEqual(x->type_params[i], y->type_params[i])) return false;
      for (size_t i = 0; i < x->constraints.size(); ++i) {
        const TypeConstraint& p = x->constraints[i];
        const TypeConstraint& q = y->constraints[i];
        if (p.op != q.op || p.args.size() != q.args.size() || !TypeEqual(p.result, q.result))
          return false;
        for (size_t j = 0; j < p.args.size(); ++j)
          if (!TypeEqual(p.args[j], q.args[j])) return false;
      }
      return true;
    }
    case TypeKind::kIncomplete:
      return static_cast<const IncompleteTypeNode*>(a.get())->id ==
             static_cast<const IncompleteTypeNode*>(b.get())->id;
    case TypeKind::kTypeVar:
      return AsTypeVar(a)->name == AsTypeVar(b)->name &&
             AsTypeVar(a)->param_kind == AsTypeVar(b)->param_kind;
    case TypeKind::kTypeCall: {
      const TypeCallNode* x = AsTypeCall(a);
      const TypeCallNode* y = AsTypeCall(b);
      if (x->adt != y->adt || x->args.size() != y->args.size()) return false;
      for (size_t i = 0; i < x->args.size(); ++i)
        if (!TypeEqual(x->args[i], y->args[i])) return false;
      return true;
    }
  }
  return false;
}

size_t TypeHash(const Type& t) {
  if (!t) return 0x9e37;
  size_t h = static_cast<size_t>(t->kind) * 0x100000001b3ull;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  switch (t->kind) {
    case TypeKind::kTensor:
      mix(AsTensor(t)->dtype_var ? TypeHash(AsTensor(t)->dtype_var)
                                 : static_cast<size_t>(AsTensor(t)->dtype));
      mix(HashShape(AsTensor(t)->shape));
      if (AsTensor(t)->shape_var) mix(TypeHash(AsTensor(t)->shape_var));
      break;
    case TypeKind::kTuple:
      for (const Type& f : AsTuple(t)->fields) mix(TypeHash(f));
      break;
    case TypeKind::kFunc:
      for (const Type& p : AsFunc(t)->params) mix(TypeHash(p));
      mix(TypeHash(AsFunc(t)->ret));
      break;
    case TypeKind::kIncomplete:
      mix(static_cast<size_t>(static_cast<const IncompleteTypeNode*>(t.get())->id));
      break;
    case TypeKind::kTypeVar:
      mix(std::hash<std::string>()(AsTypeVar(t)->name));
      break;
    case TypeKind::kTypeCall:
      mix(std::hash<std::string>()(AsTypeCall(t)->adt));
      for (const Type& a : AsTypeCall(t)->args) mix(TypeHash(a));
      break;
  }
  return h;
}

std::string TypeToString(const Type& t) {
  if (!t) return "?";
  switch (t->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* tt = AsTensor(t);
      if (tt->shape_var || tt->dtype_var) {
        std::string shape = "(";
        for (size_t i = 0; i < tt->shape.size(); ++i)
          shape += (i ? ", " : "") + tt->shape[i].ToString();
        shape += tt->shape.size() == 1 ? ",)" : ")";
        return "Tensor[" + (tt->shape_var ? TypeToString(tt->shape_var) : shape) + ", " +
               (tt->dtype_var ? TypeToString(tt->dtype_var) : std::string(DTypeName(tt->dtype))) +
               "]";
      }
      return std::string(DTypeName(tt->dtype)) + ShapeToString(tt->shape);
    }
    case TypeKind::kTuple: {
      const auto& f = AsTuple(t)->fields;
      std::string s = "(";
      for (size_t i = 0; i < f.size(); ++i) {
        if (i) s += ", ";
        s += TypeToString(f[i]);
      }
      if (f.size() == 1) s += ",";
      return s + ")";
    }
    case TypeKind::kFunc: {
      const FuncTypeNode* f = AsFunc(t);
      std::string s = "fn";
      for (size_t i = 0; i < f->type_params.size(); ++i) {
        const TypeVarNode* v = AsTypeVar(f->type_params[i]);
        s += (i ? ", " : "<") + (v ? v->name + " : " + ParamKindName(v->param_kind) : "?");
      }
      if (!f->type_params.empty()) s += ">";
      s += "(";
      for (size_t i = 0; i < f->params.size(); ++i) {
        if (i) s += ", ";
        s += TypeToString(f->params[i]);
      }
      return s + ") -> " + TypeToString(f->ret);
    }
    case TypeKind::kIncomplete:
      return "?";
    case TypeKind::kTypeVar:
      return AsTypeVar(t)->name;
    case TypeKind::kTypeCall: {
      const TypeCallNode* c = AsTypeCall(t);
      std::string s = c->adt;
      for (size_t i = 0; i < c->args.size(); ++i) s += (i ? ", " : "[") + TypeToString(c->args[i]);
      return c->args.empty() ? s : s + "]";
    }
  }
  return "?";
}

bool TypeArgEqual(const TypeArg& a, const TypeArg& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case ParamKind::kType:
      return TypeEqual(a.type, b.type);
    case ParamKind::kShape:
      return a.shape == b.shape;
    case ParamKind::kBaseType:
      return a.dtype == b.dtype;
    case ParamKind::kShapeVar:
      return a.dim == b.dim;
  }
  return false;
}

std::string TypeArgToString(const TypeArg& a) {
  switch (a.kind) {
    case ParamKind::kType:
      return TypeToString(a.type);
    case ParamKind::kShape: {
      std::string s = "(";
      for (size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + a.shape[i].ToString();
      return s + (a.shape.size() == 1 ? ",)" : ")");
    }
    case ParamKind::kBaseType:
      return std::string(DTypeName(a.dtype));
    case ParamKind::kShapeVar:
      return a.dim.ToString();
  }
  return "?";
}

namespace {

Dim SubstituteDim(const Dim& d, const TypeSubst& subst) {
  return SubstituteTypeParams(d, subst);
}

const TypeArg* Bound(const Type& var, const TypeSubst& subst, ParamKind kind) {
  const TypeVarNode* v = AsTypeVar(var);
  if (!v) return nullptr;
  auto it = subst.find(v->name);
  return it != subst.end() && it->second.kind == kind ? &it->second : nullptr;
}

}  // namespace

Dim SubstituteTypeParams(const Dim& d, const TypeSubst& subst) {
  return d.Substitute([&](const std::string& name) -> std::optional<Dim> {
    auto it = subst.find(name);
    if (it == subst.end() || it->second.kind != ParamKind::kShapeVar) return std::nullopt;
    return it->second.dim;
  });
}

TypeArg SubstituteTypeParams(const TypeArg& a, const TypeSubst& subst) {
  TypeArg out = a;
  out.type = SubstituteTypeParams(a.type, subst);
  for (Dim& d : out.shape) d = SubstituteTypeParams(d, subst);
  out.dim = SubstituteTypeParams(a.dim, subst);
  return out;
}

Type SubstituteTypeParams(const Type& t, const TypeSubst& subst) {
  if (!t || subst.empty()) return t;
  switch (t->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* x = AsTensor(t);
      Type shape_var = x->shape_var, dtype_var = x->dtype_var;
      Shape shape;
      DType dtype = x->dtype;
      if (const TypeArg* a = Bound(shape_var, subst, ParamKind::kShape)) {
        shape = a->shape;
        shape_var = nullptr;
      }
      for (const Dim& d : x->shape) shape.push_back(SubstituteDim(d, subst));
      if (const TypeArg* a = Bound(dtype_var, subst, ParamKind::kBaseType)) {
        dtype = a->dtype;
        dtype_var = nullptr;
      }
      if (!shape_var && !dtype_var) return TensorType(std::move(shape), dtype);
      return TensorTypeOf(shape_var, dtype_var, std::move(shape), dtype);
    }
    case TypeKind::kTuple: {
      std::vector<Type> f;
      for (const Type& x : AsTuple(t)->fields) f.push_back(SubstituteTypeParams(x, subst));
      return TupleType(std::move(f));
    }
    case TypeKind::kFunc: {
      const FuncTypeNode* f = AsFunc(t);
      // The function's own parameters shadow the substitution.
      TypeSubst inner = subst;
      for (const Type& p : f->type_params) inner.erase(AsTypeVar(p)->name);
      std::vector<Type> ps;
      for (const Type& x : f->params) ps.push_back(SubstituteTypeParams(x, inner));
      std::vector<TypeConstraint> cs = f->constraints;
      for (TypeConstraint& c : cs) {
        for (Type& a : c.args) a = SubstituteTypeParams(a, inner);
        c.result = SubstituteTypeParams(c.result, inner);
      }
      return PolyFuncType(f->type_params, std::move(ps), SubstituteTypeParams(f->ret, inner),
                          std::move(cs));
    }
    case TypeKind::kIncomplete:
      return t;
    case TypeKind::kTypeVar: {
      const TypeArg* a = Bound(t, subst, ParamKind::kType);
      return a ? a->type : t;
    }
    case TypeKind::kTypeCall: {
      std::vector<Type> args;
      for (const Type& a : AsTypeCall(t)->args) args.push_back(SubstituteTypeParams(a, subst));
      return TypeCall(AsTypeCall(t)->adt, std::move(args));
    }
  }
  return t;
}

bool HasTypeParams(const Type& t) {
  if (!t) return false;
  switch (t->kind) {
    case TypeKind::kTensor:
      return AsTensor(t)->shape_var || AsTensor(t)->dtype_var;
    case TypeKind::kTuple:
      for (const Type& f : AsTuple(t)->fields)
        if (HasTypeParams(f)) return true;
      return false;
    case TypeKind::kFunc:
      if (!AsFunc(t)->type_params.empty() || HasTypeParams(AsFunc(t)->ret)) return true;
      for (const Type& p : AsFunc(t)->params)
        if (HasTypeParams(p)) return true;
      return false;
    case TypeKind::kIncomplete:
      return false;
    case TypeKind::kTypeVar:
      return true;
    case TypeKind::kTypeCall:
      for (const Type& a : AsTypeCall(t)->args)
        if (HasTypeParams(a)) return true;
      return false;
  }
  return false;
}

void CheckKinds(const Type& t, const std::vector<Type>& params, const std::string& where) {
  if (!t) return;
  auto declared = [&](const TypeVarNode* v) -> const TypeVarNode* {
    for (const Type& p : params)
      if (AsTypeVar(p) && AsTypeVar(p)->name == v->name) return AsTypeVar(p);
    return nullptr;
  };
  // A variable at a place wanting `want`: its declared kind must be that.
  auto check = [&](const Type& var, ParamKind want, const char* place) {
    const TypeVarNode* v = AsTypeVar(var);
    if (!v) Throw(ErrorCode::kTypeError, where, ": ", place, " is ", TypeToString(var));
    const TypeVarNode* d = declared(v);
    if (!d) Throw(ErrorCode::kTypeError, where, ": type parameter '", v->name, "' is not declared");
    if (d->param_kind != want)
      Throw(ErrorCode::kTypeError, where, ": kind error: '", v->name, "' has kind ",
            ParamKindName(d->param_kind), ", but ", place, " needs kind ", ParamKindName(want));
  };
  switch (t->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* x = AsTensor(t);
      if (x->shape_var) check(x->shape_var, ParamKind::kShape, "a tensor's shape");
      if (x->dtype_var) check(x->dtype_var, ParamKind::kBaseType, "a tensor's dtype");
      std::set<std::string> symbols;
      for (const Dim& d : x->shape) d.CollectSymbols(&symbols);
      for (const std::string& s : symbols) {
        for (const Type& p : params) {
          const TypeVarNode* v = AsTypeVar(p);
          if (v && v->name == s && v->param_kind != ParamKind::kShapeVar)
            Throw(ErrorCode::kTypeError, where, ": kind error: '", s, "' has kind ",
                  ParamKindName(v->param_kind), ", but a dim needs kind ShapeVar");
        }
      }
      return;
    }
    case TypeKind::kTuple:
      for (const Type& f : AsTuple(t)->fields) CheckKinds(f, params, where);
      return;
    case TypeKind::kFunc: {
      std::vector<Type> inner = params;
      inner.insert(inner.end(), AsFunc(t)->type_params.begin(), AsFunc(t)->type_params.end());
      for (const Type& p : AsFunc(t)->params) CheckKinds(p, inner, where);
      CheckKinds(AsFunc(t)->ret, inner, where);
      return;
    }
    case TypeKind::kIncomplete:
      return;
    case TypeKind::kTypeVar:
      check(t, ParamKind::kType, "a type");
      return;
    case TypeKind::kTypeCall:
      for (const Type& a : AsTypeCall(t)->args) CheckKinds(a, params, where);
      return;
  }
}

std::vector<Type> AdtDef::FieldTypes(int tag, const std::vector<Type>& args) const {
  TypeSubst subst;
  for (size_t i = 0; i < type_params.size() && i < args.size(); ++i)
    subst[AsTypeVar(type_params[i])->name] = TypeArg{ParamKind::kType, args[i], {}, {}, {}};
  std::vector<Type> out;
  for (const Type& f : constructors.at(tag).fields) out.push_back(SubstituteTypeParams(f, subst));
  return out;
}

int AdtDef::Find(const std::string& constructor) const {
  for (size_t i = 0; i < constructors.size(); ++i)
    if (constructors[i].name == constructor) return static_cast<int>(i);
  return -1;
}

const Adt& ListAdt() {
  static const Adt list = [] {
    auto d = std::make_shared<AdtDef>();
    d->name = "List";
    Type a = TypeVar("a");
    d->type_params = {a};
    d->constructors = {{"Cons", {a, TypeCall("List", {a})}}, {"Nil", {}}};
    return Adt(d);
  }();
  return list;
}

}  // namespace kiln
