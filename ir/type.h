// The types of graph values: tensors, tuples, functions, and holes that inference fills; type
// parameters of polymorphic functions, and instances of algebraic data types (ADTs).
// Types are immutable and shared; compare them with TypeEqual, never by pointer.
//
// Type parameters have kinds that say where they may stand: a `Type` parameter for a whole
// type, a `Shape` parameter for a tensor's whole shape (`Tensor[s, f32]`), a `BaseType`
// parameter for a tensor's dtype (`Tensor[(n, 3), d]`), a `ShapeVar` parameter for one dim (a
// dim symbol of that name). A polymorphic function's parameters are instantiated afresh at
// each call (ir/type_infer.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"

namespace kiln {

enum class TypeKind { kTensor, kTuple, kFunc, kIncomplete, kTypeVar, kTypeCall };

// The kind of a type parameter: what it may stand for.
enum class ParamKind { kType, kShape, kBaseType, kShapeVar };
const char* ParamKindName(ParamKind k);  // "Type", "Shape", "BaseType", "ShapeVar"
bool ParseParamKind(const std::string& s, ParamKind* out);

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
  // Only in polymorphic signatures: a type parameter (kind Shape) standing for the whole shape,
  // `shape` then empty; one (kind BaseType) standing for the dtype, `dtype` then meaningless.
  // Op relations never see these: a polymorphic body is checked once instantiated.
  Type shape_var;
  Type dtype_var;
  int ndim() const { return static_cast<int>(shape.size()); }
};

struct TupleTypeNode : TypeNode {
  explicit TupleTypeNode(std::vector<Type> f) : TypeNode(TypeKind::kTuple), fields(std::move(f)) {}
  std::vector<Type> fields;
};

// `result = op(args...)`, a type relation that must hold wherever a polymorphic function is
// called: the op's type relation applied to the instantiated `args` gives the instantiated
// `result` (`where t3 = add(t1, t2)`).
struct TypeConstraint {
  std::string op;
  std::vector<Type> args;
  Type result;
};

struct FuncTypeNode : TypeNode {
  FuncTypeNode(std::vector<Type> p, Type r)
      : TypeNode(TypeKind::kFunc), params(std::move(p)), ret(std::move(r)) {}
  std::vector<Type> params;
  Type ret;
  std::vector<Type> type_params;  // TypeVars; empty for a monomorphic function
  std::vector<TypeConstraint> constraints;
};

// A type parameter, by name within the signature that declares it.
struct TypeVarNode : TypeNode {
  TypeVarNode(std::string n, ParamKind k)
      : TypeNode(TypeKind::kTypeVar), name(std::move(n)), param_kind(k) {}
  std::string name;
  ParamKind param_kind;
};

// An instance of the ADT named `adt` (its handle): `List[i32[]]`. ADTs are nominal: two with
// the same constructors but different names are different types.
struct TypeCallNode : TypeNode {
  TypeCallNode(std::string a, std::vector<Type> as)
      : TypeNode(TypeKind::kTypeCall), adt(std::move(a)), args(std::move(as)) {}
  std::string adt;
  std::vector<Type> args;
};

// An algebraic data type: its type parameters (kind Type) and its constructors, whose fields
// may use the parameters and instances of ADTs, itself included (recursion through the name).
// A constructor's tag is its index.
struct AdtConstructor {
  std::string name;
  std::vector<Type> fields;
};
struct AdtDef {
  std::string name;
  std::vector<Type> type_params;
  std::vector<AdtConstructor> constructors;
  // The field types of constructor `tag` with the parameters instantiated as `args`.
  std::vector<Type> FieldTypes(int tag, const std::vector<Type>& args) const;
  int Find(const std::string& constructor) const;  // the tag, or -1
};
using Adt = std::shared_ptr<const AdtDef>;
// The built-in `List[a] { Cons(a, List[a]), Nil }`, known to every module.
const Adt& ListAdt();

// A hole; `id` is unique within the process and only used to tell holes apart.
struct IncompleteTypeNode : TypeNode {
  explicit IncompleteTypeNode(int64_t i) : TypeNode(TypeKind::kIncomplete), id(i) {}
  int64_t id;
};

Type TensorType(Shape shape, DType dtype);
Type TupleType(std::vector<Type> fields);
Type FuncType(std::vector<Type> params, Type ret);
Type IncompleteType();
Type TypeVar(const std::string& name, ParamKind kind = ParamKind::kType);
// A tensor of a Shape parameter's shape and a BaseType parameter's dtype (either may be null:
// `shape` or `dtype` then applies).
Type TensorTypeOf(Type shape_var, Type dtype_var, Shape shape = {}, DType dtype = DType::kFloat32);
Type TypeCall(const std::string& adt, std::vector<Type> args);
Type PolyFuncType(std::vector<Type> type_params, std::vector<Type> params, Type ret,
                  std::vector<TypeConstraint> constraints = {});

// nullptr when `t` is null or not of that kind.
const TensorTypeNode* AsTensor(const Type& t);
const TupleTypeNode* AsTuple(const Type& t);
const FuncTypeNode* AsFunc(const Type& t);
const TypeVarNode* AsTypeVar(const Type& t);
const TypeCallNode* AsTypeCall(const Type& t);

// What a type parameter is bound to at one instantiation: a type, a shape, a dtype or a dim,
// by the parameter's kind.
struct TypeArg {
  ParamKind kind = ParamKind::kType;
  Type type;
  Shape shape;
  DType dtype = DType::kFloat32;
  Dim dim;
};
bool TypeArgEqual(const TypeArg& a, const TypeArg& b);
std::string TypeArgToString(const TypeArg& a);  // `f32[2]`, `(10, 10)`, `i64`, `n + 1`
using TypeSubst = std::map<std::string, TypeArg>;
// `t` with every type parameter named in `subst` replaced, dims included (a ShapeVar, or any
// dim symbol bound there). Parameters not in `subst` stay.
Type SubstituteTypeParams(const Type& t, const TypeSubst& subst);
Dim SubstituteTypeParams(const Dim& d, const TypeSubst& subst);
TypeArg SubstituteTypeParams(const TypeArg& a, const TypeSubst& subst);
// Whether `t` mentions a type parameter (other than as a dim symbol).
bool HasTypeParams(const Type& t);
// Throws kTypeError naming `where` when a type parameter stands where its kind does not allow
// (`Tensor[t, f32]` with `t : Type`), or a dim symbol names a parameter that is not a
// ShapeVar. `params` are the TypeVars in scope.
void CheckKinds(const Type& t, const std::vector<Type>& params, const std::string& where);
// A type with no holes anywhere inside (a null type is incomplete).
bool IsComplete(const Type& t);
bool TypeEqual(const Type& a, const Type& b);  // structural; null equals only null
size_t TypeHash(const Type& t);
// `f32[batch, 10]`, `(f32[2], i64[])`, `fn(f32[2]) -> f32[2]`, `?` for a hole or null.
std::string TypeToString(const Type& t);

}  // namespace kiln
