// The reference interpreter: runs a Function on concrete tensors by calling each op's
// reference kernel in dataflow order. It is the slow path and the oracle that every generated
// kernel is checked against.
#pragma once

#include <vector>

#include "ir/expr.h"

namespace kiln {

// Runs `fn` on `inputs` (one per parameter). Symbols in the parameter types are bound from the
// inputs' shapes and the function is re-inferred with concrete types first, so every shape
// error is reported before any kernel runs. Returns the result's tensors (a tuple result is
// flattened in order). Errors name the input or node at fault.
std::vector<Tensor> Interpret(const Function& fn, const std::vector<Tensor>& inputs);

}  // namespace kiln
