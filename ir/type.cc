#include "ir/type.h"

#include <atomic>

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
      return x->dtype == y->dtype && x->shape == y->shape;
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
      return true;
    }
    case TypeKind::kIncomplete:
      return static_cast<const IncompleteTypeNode*>(a.get())->id ==
             static_cast<const IncompleteTypeNode*>(b.get())->id;
  }
  return false;
}

size_t TypeHash(const Type& t) {
  if (!t) return 0x9e37;
  size_t h = static_cast<size_t>(t->kind) * 0x100000001b3ull;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  switch (t->kind) {
    case TypeKind::kTensor:
      mix(static_cast<size_t>(AsTensor(t)->dtype));
      mix(HashShape(AsTensor(t)->shape));
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
  }
  return h;
}

std::string TypeToString(const Type& t) {
  if (!t) return "?";
  switch (t->kind) {
    case TypeKind::kTensor: {
      const TensorTypeNode* tt = AsTensor(t);
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
      std::string s = "fn(";
      for (size_t i = 0; i < f->params.size(); ++i) {
        if (i) s += ", ";
        s += TypeToString(f->params[i]);
      }
      return s + ") -> " + TypeToString(f->ret);
    }
    case TypeKind::kIncomplete:
      return "?";
  }
  return "?";
}

}  // namespace kiln
