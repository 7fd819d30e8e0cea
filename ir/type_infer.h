// Type inference for the graph IR (SPEC.md §1).
//
// One relation per op call plus unification constraints (tuples, tuple fields, function
// values, annotations), solved to a fixpoint: a relation runs once all its argument types are
// known, and relations that were not ready are re-run whenever a unification made some type
// more precise. Symbolic input shapes give symbolic output shapes; dim constraints that only
// the symbols' values can decide are returned, and checked when the shapes are bound.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln {

struct InferStats {
  int relation_runs = 0;  // every call of a relation, including ones that were not ready
  int rounds = 0;         // sweeps over the pending relations until the fixpoint
};

// Returns `fn` rebuilt with every node's `type` set (nested functions too). Throws kTypeError:
// a failed relation names the op, the node's source name and the shapes
// (`matmul 'fc1': inner dimensions differ: [batch, 784] x [512, 1024]`); a fixpoint with
// holes names the node whose type is unknown.
Function InferTypes(const Function& fn, std::vector<DimConstraint>* constraints = nullptr,
                    InferStats* stats = nullptr);
// Every monomorphic function of `module` inferred with InferTypes(module, fn). A polymorphic
// function's body is checked at each instantiation its callers make, and kept untyped.
IRModule InferTypes(const IRModule& module);
// `fn` inferred within `module`: a call of a module function (GlobalVar) is checked against
// the callee's parameter annotations, a polymorphic callee instantiated afresh for each call
// (type arguments given in the call, the rest read from the argument types, dim symbols in the
// callee's annotations bound like ShapeVars), its constraints checked and its body inferred for
// that instantiation; constructor calls and matches are typed against the ADTs. Errors name
// the call, constructor or pattern at fault. A recursive call needs the callee's return type
// annotated.
Function InferTypes(const IRModule& module, const Function& fn,
                    std::vector<DimConstraint>* constraints = nullptr);
// How module function `callee` (called as @`name`) is instantiated for a call with argument
// types `args` (complete) and explicit `type_args`: those, then what the parameter annotations
// bind from the argument types (dim symbols included, as ShapeVars); the callee's `where`
// constraints are checked. kTypeError prefixed by `who` for a kind, count or type mismatch or
// a parameter nothing binds. Dim equalities only symbol values decide go to `constraints`.
TypeSubst InstantiateCall(const Function& callee, const std::string& name,
                          const std::vector<Type>& args, const std::vector<TypeArg>& type_args,
                          const std::string& who,
                          std::vector<DimConstraint>* constraints = nullptr);
// `fn`'s type parameters replaced by `subst` in its annotations: a monomorphic function whose
// body is untyped (new parameter variables; the body rebuilt on them).
Function Instantiate(const Function& fn, const TypeSubst& subst);

// The binding of every symbol in `fn`'s parameter types, read from concrete argument types.
// Errors (kInvalidArgument) name the input and the expected and given types: wrong count,
// rank or dtype, a constant dim that differs, and a symbol bound to two values by two inputs.
std::map<std::string, int64_t> BindInputShapes(const Function& fn,
                                               const std::vector<Type>& arg_types);

// Replaces symbols by values in the parameter annotations and re-infers, giving concrete
// types throughout. `constraints` from the symbolic inference are checked first, so a
// violated one is reported as such (kTypeError naming the node).
// `module`, when given, resolves the calls of its functions.
Function BindSymbols(const Function& fn, const std::map<std::string, int64_t>& values,
                     const std::vector<DimConstraint>& constraints = {},
                     const IRModule* module = nullptr);

// Throws kTypeError for the first constraint that `values` violates.
void CheckConstraints(const std::vector<DimConstraint>& constraints,
                      const std::map<std::string, int64_t>& values);

// "matmul 'fc1'", "matmul", "tuple", "%x": how messages name a node.
std::string DescribeNode(const Expr& e);

}  // namespace kiln
