// The reference interpreter: runs a Function on concrete tensors by calling each op's
// reference kernel in dataflow order. It is the slow path and the oracle that every generated
// kernel is checked against.
#pragma once

#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln {

// Runs `fn` on `inputs` (one per parameter). Symbols in the parameter types are bound from the
// inputs' shapes and the function is re-inferred with concrete types first, so every shape
// error is reported before any kernel runs. Returns the result's tensors (a tuple result is
// flattened in order). Errors name the input or node at fault.
std::vector<Tensor> Interpret(const Function& fn, const std::vector<Tensor>& inputs);
// Runs `entry` of `module`, whose functions it may call (recursion included: each call of a
// module function runs that function inferred for the call's argument types) and whose ADTs it
// may build and match. The inputs and results are tensors; ADT values live inside.
std::vector<Tensor> Interpret(const IRModule& module, const std::vector<Tensor>& inputs,
                              const std::string& entry = "main");

}  // namespace kiln
