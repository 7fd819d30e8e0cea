// Constants a graph pass derives from a model's constant (weights re-laid out for a kernel:
// PackConstantWeights' panels, ChannelsLastConvs' HWIO weights), shared across the model's
// specializations.
#pragma once

#include <functional>
#include <string>

#include "ir/expr.h"

namespace kiln {

// The constant `make` computes from the constant node `src`, tagged `variant` (what was derived:
// "panel64", "hwio"). Every specialization of a model shares the model's constant nodes, so the
// derived copy is shared too: made once and kept as long as some graph holds it (a weak entry
// per source node and variant), rather than one more copy of the weights per input shape. An
// entry is only reused while its source is alive, so a freed node's address reused by another
// constant does not hit. Thread-safe.
Expr DerivedConstant(const Expr& src, const std::string& variant,
                     const std::function<Tensor()>& make);

}  // namespace kiln
