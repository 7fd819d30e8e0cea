#include "ir/interpreter.h"

#include <unordered_map>

#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

// A runtime value: a tensor, a tuple of values, or a function.
struct Value {
  Tensor tensor;
  std::vector<Value> fields;
  const FunctionNode* fn = nullptr;
  bool is_tuple = false;
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

// Evaluates a function whose types are concrete (inferred after binding every symbol).
Value Call(const FunctionNode* fn, const std::vector<Value>& args) {
  std::unordered_map<const ExprNode*, Value> env;
  for (size_t i = 0; i < fn->params.size(); ++i) env[fn->params[i].get()] = args[i];
  for (const Expr& e : PostOrder(fn->body)) {
    if (env.count(e.get())) continue;
    auto get = [&](const Expr& x) -> const Value& {
      auto it = env.find(x.get());
      if (it == env.end())
        Throw(ErrorCode::kInvalidArgument, DescribeNode(x), " is used but not defined here");
      return it->second;
    };
    Value v;
    switch (e->kind) {
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
        if (!c->op) {
          const Value& callee = get(c->fn);
          KILN_CHECK(callee.fn != nullptr, DescribeNode(e), ": callee is not a function");
          v = Call(callee.fn, args_v);
          break;
        }
        std::vector<Tensor> in;
        for (size_t i = 0; i < args_v.size(); ++i) {
          if (args_v[i].is_tuple || args_v[i].fn)
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
          return tt && c->op->data_dependent_shape && !IsConstShape(tt->shape) ? Tensor()
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
          for (Tensor& t : out) v.fields.push_back(Value{std::move(t), {}, nullptr, false});
        } else {
          v.tensor = std::move(out[0]);
        }
        break;
      }
    }
    env[e.get()] = std::move(v);
  }
  return env.at(fn->body.get());
}

void Flatten(const Value& v, std::vector<Tensor>& out) {
  if (v.is_tuple) {
    for (const Value& f : v.fields) Flatten(f, out);
  } else {
    out.push_back(v.tensor);
  }
}

}  // namespace

std::vector<Tensor> Interpret(const Function& fn, const std::vector<Tensor>& inputs) {
  std::vector<Type> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) Throw(ErrorCode::kInvalidArgument, "input ", i, " has no value");
    types.push_back(TypeOfTensor(inputs[i]));
  }
  std::map<std::string, int64_t> symbols = BindInputShapes(fn, types);
  Function concrete = BindSymbols(fn, symbols);
  // Shapes computed from shapes, and ops given them as values: resolved as the engine does.
  if (HasDynamicOps(concrete)) concrete = ResolveDynamic(concrete, inputs);
  std::vector<Value> args;
  for (const Tensor& t : inputs) args.push_back(Value{t, {}, nullptr, false});
  std::vector<Tensor> out;
  Flatten(Call(concrete.get(), args), out);
  return out;
}

}  // namespace kiln
