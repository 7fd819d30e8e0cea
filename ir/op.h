// The operator registry. An operator is declared once, in one file under ir/ops/: its name,
// attribute schema, type relation, pattern kind (for fusion) and reference kernel.
//
// Threading: the built-in ops are registered on the first call to OpRegistry::Global(); after
// that the registry may be read from any thread. Register() takes a lock, and OpDefs are never
// moved or freed, so `const OpDef*` handles stay valid for the life of the process.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/lower_api.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace kiln {

// How an op composes with its neighbours in FuseOps. Ordered: a lower kind fuses more freely.
enum class OpPattern {
  kElementwise,    // out[i] = f(in[i]) on same-shaped tensors
  kBroadcast,      // elementwise after broadcasting the inputs
  kInjective,      // each output element reads one input element (reshape, transpose, slice)
  kReduction,      // reduces over some axes
  kOutputFusable,  // matmul/gemm: an elementwise epilogue can be fused into its output
  kOpaque,         // never fused
};
const char* OpPatternName(OpPattern p);

// A constraint on symbolic dims that a relation could not decide: it holds for some bindings
// of the symbols only, so it is checked when the shapes are bound.
struct DimConstraint {
  // a == b;  a == b or a == 1 or b == 1;  a <= b
  enum class Kind { kEqual, kBroadcast, kAtMost };
  Kind kind;
  Dim a, b;
  std::string where;  // the node and op, e.g. "add 'res1', dim 1 of the output"
  std::string ToString() const;
};

// What a type relation sees. Relations are written forward (argument types -> result type);
// the solver only calls a relation once all its argument types are complete.
class TypeRelContext {
 public:
  TypeRelContext(const std::vector<Type>& args, const class Attrs& attrs, std::string where,
                 std::vector<DimConstraint>* constraints)
      : args_(args), attrs_(attrs), where_(std::move(where)), constraints_(constraints) {}

  int num_args() const { return static_cast<int>(args_.size()); }
  const Type& arg(int i) const { return args_[i]; }
  // Argument i as a tensor type; a tuple there is a type error naming the argument.
  const TensorTypeNode& tensor(int i) const;
  const class Attrs& attrs() const { return attrs_; }

  // Unifies two dims that must be equal: equal -> fine; provably different -> type error
  // with `what` in the message; undecidable (symbolic) -> a recorded constraint.
  void AssertEqual(const Dim& a, const Dim& b, const std::string& what);
  // The NumPy broadcast of two dims. Symbolic cases give max(a, b) (exact whenever the
  // broadcast is valid) and record a constraint.
  Dim BroadcastDim(const Dim& a, const Dim& b, const std::string& what);
  // A dim that must not exceed another (a count within a length, a length of at least 1):
  // provably larger -> a type error with `what` in the message; undecidable (symbolic) -> a
  // recorded constraint. Relations check decidable cases with messages of their own first;
  // this keeps the symbolic case from going unchecked where a shape-generic executable, which
  // binds shapes without inferring types again, would otherwise run with it.
  void AssertAtMost(const Dim& a, const Dim& b, const std::string& what);
  // NumPy broadcast of two shapes.
  Shape BroadcastShapes(const Shape& a, const Shape& b);
  // Normalizes an axis in [-rank, rank) to [0, rank); out of range is a type error.
  int NormalizeAxis(int64_t axis, int rank, const std::string& what = "axis") const;

  // Throws a kTypeError; the solver prefixes the op and node name.
  [[noreturn]] void Fail(const std::string& message) const;

  // A dim that is known only once values are (a dynamic op's result): a symbol named
  // `_v<N>`, unique within the process, that no input binds. Specialization resolves the
  // dynamic op to its static form (ir/dynamic.h), whose relation gives the dim's value.
  static Dim UnknownDim();
  static bool IsUnknownDim(const Dim& d);

 private:
  const std::vector<Type>& args_;
  const class Attrs& attrs_;
  std::string where_;
  std::vector<DimConstraint>* constraints_;
};

// Returns the result type (a TensorType, or a TupleType for multi-output ops).
using TypeRelFn = std::function<Type(TypeRelContext&)>;
// `outputs` are allocated by the caller from the inferred result type (one per tuple field,
// or one); the kernel fills them. Inputs are never written.
using RefKernelFn = std::function<void(const std::vector<Tensor>& inputs, const Attrs& attrs,
                                       std::vector<Tensor>& outputs)>;

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;  // nullopt: the attribute is required
  // Optional extra validation: returns an error message, or "" when the value is fine.
  std::function<std::string(const AttrValue&)> check = nullptr;
};

struct OpDef {
  std::string name;
  std::string doc;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  std::vector<AttrSpec> attrs;
  OpPattern pattern = OpPattern::kOpaque;
  TypeRelFn type_rel;
  RefKernelFn ref_kernel;
  // How the op becomes loop IR (ir/lower_api.h); null for ops that cannot be compiled yet.
  LowerFn lower = nullptr;
  // For an op that, with these attributes, places its one tensor operand in a box of a larger
  // result and fills the rest with a constant (a constant pad that crops nothing): true. FuseOps
  // lets such a call end an anchor's group, whose result is then stored straight into the box
  // (its lowering sets LTensor::box), where a pad of its own would copy it.
  std::function<bool(const Attrs&)> boxes_operand = nullptr;

  // Ops whose result depends on the argument types alone (shape, size): the value, computed
  // from concrete argument types without reading any argument. Folded as soon as the types
  // are concrete, so these cost nothing at run time (ir/dynamic.h).
  std::function<Tensor(const std::vector<Type>& arg_types, const Attrs& attrs)> fold_from_types =
      nullptr;

  // A dynamic variant (`dyn.reshape`) of the static op `static_op`: its first `num_data_args`
  // arguments are the static op's, and the ones after them carry, in order, the values of the
  // static op's attributes `value_attrs` (trailing ones may be absent: the static op's default
  // applies). Its result type has unknown dims where the values decide them. Specialization
  // rewrites it to the static op once those arguments are constants (ir/dynamic.h); it has no
  // reference kernel or lowering of its own.
  std::string static_op = {};
  std::vector<std::string> value_attrs = {};
  int num_data_args = 0;

  // Ops whose result dims depend on argument values (nonzero, unique: ir/ops/data_dependent.cc).
  // The type relation leaves those dims unknown (TypeRelContext::UnknownDim); the reference
  // kernel allocates each output whose type is not concrete (it arrives undefined). They have
  // no lowering: a model holding one runs in segments (engine/segments.h).
  bool data_dependent_shape = false;
  // For such an op whose outputs each have at most one value-decided dim, all sized by one
  // count: a compiled op (ir/ops/bounded.cc) that computes the same outputs with those dims at
  // their upper bounds (zeros past the count) and then the count, as a tuple (nonzero_bounded,
  // unique_bounded). The segment before the cut computes it, and the host keeps the first
  // `count` entries of each output along its dim; empty: the host runs the reference kernel.
  std::string bounded_op = {};
};

class OpRegistry {
 public:
  // The process-wide registry, with every built-in op registered.
  static OpRegistry& Global();

  // Registers an op; a second registration of the same name is kInvalidArgument.
  const OpDef* Register(OpDef def);
  const OpDef* Find(const std::string& name) const;  // nullptr when unknown
  const OpDef& Get(const std::string& name) const;   // kNotFound naming the op
  std::vector<std::string> Names() const;            // sorted

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Checks `given` against the op's schema and returns it with defaults filled in. An unknown
// attribute, a missing required one, or one of the wrong kind is kInvalidArgument naming the
// op and the attribute. Ints convert to floats, an int list to a float list, and an empty
// list to whichever list kind the schema declares.
Attrs NormalizeAttrs(const OpDef& op, const Attrs& given);

// Runs an op's type relation on concrete or symbolic argument types, outside a graph.
// Throws kTypeError as `op: message`.
Type InferOpType(const std::string& op, const std::vector<Type>& arg_types, const Attrs& attrs = {},
                 std::vector<DimConstraint>* constraints = nullptr);
// Runs an op's reference kernel: infers the output types from the inputs, allocates the
// outputs and fills them. Attributes are normalized first.
std::vector<Tensor> RunOpReference(const std::string& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs = {});

Type TypeOfTensor(const Tensor& t);

}  // namespace kiln
