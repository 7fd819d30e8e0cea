// Segments: how a model runs whose graph holds an op with data-dependent result sizes
// (OpDef::data_dependent_shape: nonzero, compress, unique, non_max_suppression), a loop that
// must run as a loop (RunsAsLoop below), or a dynamic op whose values come from data
// (ValueArgsFromData: an If on data).
//
// No executable can be specialized for the whole graph, since shapes past the op are known
// only once it ran. Model::Create cuts the graph at its first such call D (operands before
// users):
//   head  the model's inputs -> the values D reads, and those of the nodes they are computed
//         from that the rest reads too (one tuple): a Model of its own, compiled and cached per
//         input shapes as any model is; absent when D reads only model inputs and constants
//         (and D has no bounded form, which the head computes);
//   D     run on the host by its reference kernel, on the head's values; an op with a
//         bounded form (OpDef::bounded_op: nonzero, compress, unique, non_max_suppression) runs
//         compiled in the head instead, and the host only keeps the first `count` entries of
//         each upper-bound result (Segments::trim_dims); a loop runs its body,
//         a model of its own (`<name>.<node>.body`), once per iteration through the engine,
//         and stacks the scan outputs;
//   rest  (the model inputs it reads, the head's values, D's outputs) -> the model's outputs: a
//         Model of its own, specialized on the shapes D produced. It is cut again at its own
//         first data-dependent call, so a chain of them runs as a chain of segments.
// A run is then head, D, rest (Engine::Run). The rest computes everything the head does not,
// so the compiled segments hold every kernel they can. A dynamic op's values from data
// (ValueArgsFromData) cut with no step between: the head computes them, the rest specializes on
// them.
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
  // The data-dependent op, or dyn.loop; null for values from data, whose rest
  // receives the value arguments from the head (ValueArgsFromData).
  const OpDef* op = nullptr;
  // dyn.loop's body (iteration, condition, carried..., captured...) -> (condition, carried...,
  // scans...); op_args are then the call's arguments after the body function.
  std::shared_ptr<const Model> loop_body;
  Attrs attrs;
  std::string node;  // D, described for messages: `nonzero 'NonZero_0'`
  std::vector<Source> op_args;
  // Non-empty: D ran in the head as its compiled bounded form (OpDef::bounded_op); op_args are
  // that form's results (one per output of D) and, last, the count. Output i of D is result i's
  // first `count` entries along trim_dims[i] (a copy on the host, no reference kernel), or
  // result i itself where trim_dims[i] is -1 (an output whose size the values do not decide:
  // unique's inverse indices).
  std::vector<int> trim_dims;
  std::shared_ptr<const Model> rest;
  std::vector<Source> rest_args;  // one per parameter of the rest
};

// Whether the dyn.loop call `call` runs as a loop (each iteration a run of its body) rather
// than unrolling at specialization: its trip count is not a constant (an input, a sequence
// length: one body executable serves every count), or a constant past kMaxUnrolledIterations (a
// Loop without one), its body's condition reads a carried or captured value that is not a
// constant (the unroller could not fold it: a while loop over data), or its body must run in
// segments itself (it holds a data-dependent op, such a loop, or values from data). What is
// left to unroll at specialization: a constant trip count with a condition from value inputs.
bool RunsAsLoop(const CallNode& call);

// The value arguments of the dynamic op call `call` (dyn.branch's condition, dyn.topk's k, a
// dyn.loop's trip count: ir/dynamic.h) when one is computed from data: it reads, through ops
// other than shape-like ones, a model input that is not a small constant-shape tensor (so it
// cannot be a value input: at most kMaxValueInputElements elements); empty otherwise. The model
// is then cut at them: the head computes them, and the rest receives them as value inputs,
// specialized on their values (a branch on data to the taken branch: the other one is never
// computed).
std::vector<Expr> ValueArgsFromData(const CallNode& call);

// The segments of `graph` (typed, as Model::Create infers it) cut at its first call of a
// data-dependent op or of a loop that runs as one, or null when it has none. The segment models are
// named `<name>.head` and
// `<name>.rest`. Errors as Model::Create's.
std::shared_ptr<const Segments> SplitAtDataDependentOp(const Function& graph,
                                                       const std::string& name);

}  // namespace kiln
