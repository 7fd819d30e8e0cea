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
IRModule InferTypes(const IRModule& module);

// The binding of every symbol in `fn`'s parameter types, read from concrete argument types.
// Errors (kInvalidArgument) name the input and the expected and given types: wrong count,
// rank or dtype, a constant dim that differs, and a symbol bound to two values by two inputs.
std::map<std::string, int64_t> BindInputShapes(const Function& fn,
                                               const std::vector<Type>& arg_types);

// Replaces symbols by values in the parameter annotations and re-infers, giving concrete
// types throughout. `constraints` from the symbolic inference are checked first, so a
// violated one is reported as such (kTypeError naming the node).
Function BindSymbols(const Function& fn, const std::map<std::string, int64_t>& values,
                     const std::vector<DimConstraint>& constraints = {});

// Throws kTypeError for the first constraint that `values` violates.
void CheckConstraints(const std::vector<DimConstraint>& constraints,
                      const std::map<std::string, int64_t>& values);

// "matmul 'fc1'", "matmul", "tuple", "%x": how messages name a node.
std::string DescribeNode(const Expr& e);

}  // namespace kiln
