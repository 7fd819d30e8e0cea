// LowerToLoops: one primitive (fused) graph function -> one loop-IR kernel.
//
//   before:  %f = fn(%p0: f32[n, 16], %p1: f32[16]) attrs{primitive=true} {
//              relu(add(%p0, %p1))
//            }
//   after:   func @k(%p0: f32[n, 16], %p1: f32[16], %out0: f32[n, 16]; n: i64) {
//              for i0 in [0, n) { for i1 in [0, 16) { out0[i0, i1] = max(p0[i0, i1] + p1[i1], 0.0f)
//              } }
//            }
//
// Each op lowers through its OpDef::lower (ir/lower_api.h); elementwise and injective ops
// inline into their consumers, and reductions are either inlined into a same-shaped
// elementwise epilogue (a matmul and its bias and activation) or materialized into a local
// buffer when consumers read them at other indices. Reduce nodes are left for
// LowerReductions.
#pragma once

#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/loop/loop.h"

namespace kiln {

struct LoweredKernel {
  loop::PrimFunc func;
  // buffer_params: [group parameters..., captured constants..., outputs...].
  int num_params = 0;                // the group function's parameters
  std::vector<Tensor> constants;     // bound to buffer_params[num_params, num_params + size)
  std::vector<std::string> symbols;  // the symbol each scalar parameter carries, in order
};

// `fn` must be typed (InferType). Shapes may be symbolic: each symbol becomes a scalar
// parameter. Throws kUnsupported naming the op when an op has no lowering.
LoweredKernel LowerToLoops(const Function& fn, const std::string& name);

// Replaces each loop::Reduce in a stored value by an accumulator: a local scalar buffer set to
// the combiner's identity, updated over the reduction axes, then read by the store.
loop::PrimFunc LowerReductions(const loop::PrimFunc& f);

}  // namespace kiln
