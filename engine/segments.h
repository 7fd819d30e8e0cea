// Segments: how a model runs whose graph holds an op with data-dependent result sizes
// (OpDef::data_dependent_shape: nonzero, compress, unique, non_max_suppression).
//
// No executable can be specialized for the whole graph, since shapes past the op are known
// only once it ran. Model::Create cuts the graph at its first such call D (operands before
// users):
//   head  the model's inputs -> the values D and the rest read (one tuple): a Model of its own,
//         compiled and cached per input shapes as any model is; absent when they read only
//         model inputs and constants;
//   D     run on the host by its reference kernel, on the head's values;
//   rest  (the model inputs it reads, the head's values, D's outputs) -> the model's outputs: a
//         Model of its own, specialized on the shapes D produced. It is cut again at its own
//         first data-dependent call, so a chain of them runs as a chain of segments.
// A run is then head, D, rest (Engine::Run). Everything not downstream of D is in the head, so
// the compiled segments hold every kernel they can.
//
// Immutable once built; shared by the models that hold it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/op.h"

namespace kiln {

class Model;

struct Segments {
  // Where a value that D or the rest reads comes from.
  struct Source {
    enum class Kind { kInput, kHead, kConstant, kOp } kind = Kind::kInput;
    int index = 0;    // the model input, the head output or D's output
    Tensor constant;  // kConstant
  };
  std::shared_ptr<const Model> head;  // null when no head value is needed
  const OpDef* op = nullptr;
  Attrs attrs;
  std::string node;  // D, described for messages: `nonzero 'NonZero_0'`
  std::vector<Source> op_args;
  std::shared_ptr<const Model> rest;
  std::vector<Source> rest_args;  // one per parameter of the rest
};

// The segments of `graph` (typed, as Model::Create infers it) cut at its first call of a
// data-dependent op, or null when it has none. The segment models are named `<name>.head` and
// `<name>.rest`. Errors as Model::Create's.
std::shared_ptr<const Segments> SplitAtDataDependentOp(const Function& graph,
                                                       const std::string& name);

}  // namespace kiln
