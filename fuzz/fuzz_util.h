// What the fuzz targets share: a run of a typed graph on small inputs through the reference
// interpreter, when everything the graph's types say it computes is small.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace kiln::fuzz {

// Every symbolic dim is bound to this when a graph is run.
inline constexpr int64_t kSymbolValue = 2;

// Whether the tensors `fn` takes and computes (every typed value of its body) total at most
// `limit` bytes with each symbol bound to kSymbolValue; false where a value has no type or a dim
// cannot be evaluated.
bool SmallEnoughToRun(const Function& fn, uint64_t limit);

// Inputs for `fn`'s parameters: each symbolic dim kSymbolValue, values small and varied (the
// same for the same graph, so a finding reproduces). Empty with `ok` false where a parameter
// is not a tensor of a known dtype.
std::vector<Tensor> SmallInputs(const Function& fn, bool* ok);

// Runs `fn` on SmallInputs when SmallEnoughToRun allows. kiln::Error is the expected way for
// a run to fail; anything else escapes, and libFuzzer reports it.
void RunIfSmall(const Function& fn);

}  // namespace kiln::fuzz
