#include "ir/interpreter.h"

#include <unordered_map>

#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

// A runtime value: a tensor, a tuple of values, a function, or an ADT value (`adt` set: the
// constructor `tag` and its fields).
struct Value {
  Tensor tensor;
  std::vector<Value> fields;
  const FunctionNode* fn = nullptr;
  bool is_tuple = false;
  const AdtDef* adt = nullptr;
  int tag = 0;
  std::string global;  // a module function referred to as a value
};

// The values of the nodes of one scope (a function body or a clause body); a clause body sees
// its enclosing scopes' values.
struct Env {
  const Env* parent = nullptr;
  std::unordered_map<const ExprNode*, Value> values;
  const Value* Find(const ExprNode* e) const {
    for (const Env* s = this; s; s = s->parent) {
      auto it = s->values.find(e);
      if (it != s->values.end()) return &it->second;
    }
    return nullptr;
  }
};

bool IsConcreteType(const Type& t) {
  if (const TupleTypeNode* tup = AsTuple(t)) {
    for (const Type& f : tup->fields)
      if (!IsConcreteType(f)) return false;
    return true;
  }
  const TensorTypeNode* tt = AsTensor(t);
  return tt && IsConstShape(tt->shape);
}

Tensor AllocateFor(const Type& t, const Expr& node) {
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt || !IsConstShape(tt->shape))
    Throw(ErrorCode::kInternal, DescribeNode(node), ": result type ", TypeToString(t),
          " is not a concrete tensor type");
  return Tensor::Empty(tt->dtype, ConstShape(tt->shape));
}

// Runs functions whose types are concrete (inferred after binding every symbol); `module`,
// when set, holds the functions that calls of GlobalVars run.
class Machine {
 public:
  explicit Machine(const IRModule* module) : module_(module) {}

  Value Call(const FunctionNode* fn, const std::vector<Value>& args) {
    Env env;
    for (size_t i = 0; i < fn->params.size(); ++i) env.values[fn->params[i].get()] = args[i];
    return Eval(fn->body, env);
  }

 private:
  // A module function run for concrete argument types: instantiated and inferred once per
  // distinct argument types.
  Value CallGlobal(const CallNode* c, const Expr& at, const std::vector<Value>& args) {
    if (!module_ || !module_->Contains(c->fn->name))
      Throw(ErrorCode::kInvalidArgument, DescribeNode(at), ": no module function @", c->fn->name);
    std::vector<Type> types;
    std::string key = c->fn->name;
    for (const Expr& a : c->args) {
      types.push_back(a->type);
      key += '|';
      key += TypeToString(a->type);
    }
    for (const TypeArg& t : c->type_args) {
      key += '<';
      key += TypeArgToString(t);
    }
    auto it = instances_.find(key);
    if (it == instances_.end()) {
      Function callee = module_->Lookup(c->fn->name);
      TypeSubst subst = InstantiateCall(callee, c->fn->name, types, c->type_args, DescribeNode(at));
      it = instances_.emplace(key, InferTypes(*module_, Instantiate(callee, subst))).first;
    }
    return Call(it->second.get(), args);
  }

  // Binds `p`'s variables in `env` if `v` matches it.
  static bool MatchPattern(const Pattern& p, const Value& v, Env& env) {
    switch (p->kind) {
      case PatternKind::kWildcard:
        return true;
      case PatternKind::kVar:
        env.values[p->var.get()] = v;
        return true;
      case PatternKind::kConstructor:
        if (!v.adt || v.tag != p->tag || v.fields.size() != p->fields.size()) return false;
        break;
      case PatternKind::kTuple:
        if (!v.is_tuple || v.fields.size() != p->fields.size()) return false;
        break;
    }
    for (size_t i = 0; i < p->fields.size(); ++i)
      if (!MatchPattern(p->fields[i], v.fields[i], env)) return false;
    return true;
  }

  // Every scope entered (a call's body, a chosen clause) nests a C++ frame: bounded.
  Value Eval(const Expr& root, Env& env) {
    if (++depth_ > kMaxDepth)
      Throw(ErrorCode::kInvalidArgument, DescribeNode(root), ": calls and matches nest more than ",
            kMaxDepth, " deep");
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    for (const Expr& e : PostOrder(root)) {
      if (env.Find(e.get())) continue;
      auto get = [&](const Expr& x) -> const Value& {
        const Value* found = env.Find(x.get());
        if (!found)
          Throw(ErrorCode::kInvalidArgument, DescribeNode(x), " is used but not defined here");
        return *found;
      };
      Value v;
      switch (e->kind) {
        case ExprKind::kGlobalVar:
          v.global = e->name;
          break;
        case ExprKind::kConstructor:
          break;  // a callee: the call builds the value
        case ExprKind::kMatch: {
          const MatchNode* m = AsMatch(e);
          const Value& data = get(m->data);
          bool matched = false;
          for (const MatchClause& c : m->clauses) {
            Env inner;
            inner.parent = &env;
            if (!MatchPattern(c.pattern, data, inner)) continue;
            v = Eval(c.body, inner);
            matched = true;
            break;
          }
          if (!matched)
            Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": no clause matches the value");
          break;
        }
        case ExprKind::kVar:
          get(e);
          break;  // throws: a free variable has no value
        case ExprKind::kConstant:
          v.tensor = AsConstant(e)->value;
          break;
        case ExprKind::kTuple:
          v.is_tuple = true;
          for (const Expr& f : AsTuple(e)->fields) v.fields.push_back(get(f));
          break;
        case ExprKind::kTupleGetItem:
          v = get(AsTupleGetItem(e)->tuple).fields.at(AsTupleGetItem(e)->index);
          break;
        case ExprKind::kFunction:
          v.fn = AsFunction(e);
          break;
        case ExprKind::kCall: {
          const CallNode* c = AsCall(e);
          std::vector<Value> args_v;
          for (const Expr& a : c->args) args_v.push_back(get(a));
          if (const ConstructorNode* k = AsConstructor(c->fn)) {
            v.adt = k->adt.get();
            v.tag = k->tag;
            v.fields = std::move(args_v);
            break;
          }
          if (AsGlobalVar(c->fn)) {
            v = CallGlobal(c, e, args_v);
            break;
          }
          if (!c->op) {
            const Value& callee = get(c->fn);
            if (!callee.fn)
              Throw(ErrorCode::kUnsupported, DescribeNode(e),
                    ": the callee is not a function value");
            v = Call(callee.fn, args_v);
            break;
          }
          std::vector<Tensor> in;
          for (size_t i = 0; i < args_v.size(); ++i) {
            if (args_v[i].is_tuple || args_v[i].fn || args_v[i].adt || !args_v[i].tensor.defined())
              Throw(ErrorCode::kTypeError, DescribeNode(e), ": input ", i, " is not a tensor");
            in.push_back(args_v[i].tensor);
          }
          std::vector<Tensor> out;
          // Past an op whose result size depends on values (nonzero), types hold dims that only
          // the values decide: the type comes from the argument values' types then, and the
          // data-dependent op itself allocates the outputs it sizes.
          Type type = e->type;
          if (!IsConcreteType(type)) {
            std::vector<Type> arg_types;
            for (const Tensor& t : in) arg_types.push_back(TypeOfTensor(t));
            type = InferOpType(c->op->name, arg_types, c->attrs);
          }
          auto alloc = [&](const Type& t) {
            const TensorTypeNode* tt = AsTensor(t);
            return tt && c->op->data_dependent_shape && !IsConstShape(tt->shape)
                       ? Tensor()
                       : AllocateFor(t, e);
          };
          const TupleTypeNode* tup = AsTuple(type);
          if (tup) {
            for (const Type& f : tup->fields) out.push_back(alloc(f));
          } else {
            out.push_back(alloc(type));
          }
          if (!c->op->ref_kernel)
            Throw(ErrorCode::kUnsupported, DescribeNode(e), ": op has no reference kernel");
          try {
            c->op->ref_kernel(in, c->attrs, out);
          } catch (const Error& err) {
            throw Error(err.code(), StrCat(DescribeNode(e), ": ", err.what()));
          }
          if (tup) {
            v.is_tuple = true;
            for (Tensor& t : out) {
              Value f;
              f.tensor = std::move(t);
              v.fields.push_back(std::move(f));
            }
          } else {
            v.tensor = std::move(out[0]);
          }
          break;
        }
      }
      env.values[e.get()] = std::move(v);
    }
    return *env.Find(root.get());
  }

  static constexpr int kMaxDepth = 1000;  // each level is a few C++ frames
  const IRModule* module_;
  int depth_ = 0;
  std::unordered_map<std::string, Function> instances_;
};

void Flatten(const Value& v, std::vector<Tensor>& out) {
  if (v.adt || v.fn || !v.global.empty())
    Throw(ErrorCode::kUnsupported,
          "the result holds an ADT value or a function; results are tensors");
  if (v.is_tuple) {
    for (const Value& f : v.fields) Flatten(f, out);
  } else {
    out.push_back(v.tensor);
  }
}

std::vector<Tensor> Run(const Function& fn, const std::vector<Tensor>& inputs,
                        const IRModule* module) {
  std::vector<Type> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) Throw(ErrorCode::kInvalidArgument, "input ", i, " has no value");
    types.push_back(TypeOfTensor(inputs[i]));
  }
  std::map<std::string, int64_t> symbols = BindInputShapes(fn, types);
  Function concrete = BindSymbols(fn, symbols, {}, module);
  // Shapes computed from shapes, and ops given them as values: resolved as the engine does.
  if (HasDynamicOps(concrete)) concrete = ResolveDynamic(concrete, inputs);
  std::vector<Value> args;
  for (const Tensor& t : inputs) {
    Value v;
    v.tensor = t;
    args.push_back(std::move(v));
  }
  std::vector<Tensor> out;
  Machine machine(module);
  Flatten(machine.Call(concrete.get(), args), out);
  return out;
}

}  // namespace

std::vector<Tensor> Interpret(const Function& fn, const std::vector<Tensor>& inputs) {
  return Run(fn, inputs, nullptr);
}

std::vector<Tensor> Interpret(const IRModule& module, const std::vector<Tensor>& inputs,
                              const std::string& entry) {
  return Run(module.Lookup(entry), inputs, &module);
}

}  // namespace kiln
