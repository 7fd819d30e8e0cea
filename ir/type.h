// The types of graph values: tensors, tuples, functions, and holes that inference fills.
// Types are immutable and shared; compare them with TypeEqual, never by pointer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"

namespace kiln {

enum class TypeKind { kTensor, kTuple, kFunc, kIncomplete };

struct TypeNode {
  explicit TypeNode(TypeKind k) : kind(k) {}
  virtual ~TypeNode() = default;
  const TypeKind kind;
};
using Type = std::shared_ptr<const TypeNode>;

struct TensorTypeNode : TypeNode {
  TensorTypeNode(Shape s, DType d) : TypeNode(TypeKind::kTensor), shape(std::move(s)), dtype(d) {}
  Shape shape;
  DType dtype;
  int ndim() const { return static_cast<int>(shape.size()); }
};

struct TupleTypeNode : TypeNode {
  explicit TupleTypeNode(std::vector<Type> f) : TypeNode(TypeKind::kTuple), fields(std::move(f)) {}
  std::vector<Type> fields;
};

struct FuncTypeNode : TypeNode {
  FuncTypeNode(std::vector<Type> p, Type r)
      : TypeNode(TypeKind::kFunc), params(std::move(p)), ret(std::move(r)) {}
  std::vector<Type> params;
  Type ret;
};

// A hole; `id` is unique within the process and only used to tell holes apart.
struct IncompleteTypeNode : TypeNode {
  explicit IncompleteTypeNode(int64_t i) : TypeNode(TypeKind::kIncomplete), id(i) {}
  int64_t id;
};

Type TensorType(Shape shape, DType dtype);
Type TupleType(std::vector<Type> fields);
Type FuncType(std::vector<Type> params, Type ret);
Type IncompleteType();

// nullptr when `t` is null or not of that kind.
const TensorTypeNode* AsTensor(const Type& t);
const TupleTypeNode* AsTuple(const Type& t);
const FuncTypeNode* AsFunc(const Type& t);

// A type with no holes anywhere inside (a null type is incomplete).
bool IsComplete(const Type& t);
bool TypeEqual(const Type& a, const Type& b);  // structural; null equals only null
size_t TypeHash(const Type& t);
// `f32[batch, 10]`, `(f32[2], i64[])`, `fn(f32[2]) -> f32[2]`, `?` for a hole or null.
std::string TypeToString(const Type& t);

}  // namespace kiln
