// Shapes that are values: how kiln runs graphs whose shapes are computed (Shape -> Gather ->
// Concat -> Reshape) or given as inputs (a Reshape whose target shape is a graph input).
//
// The mechanism is "fold after specialization":
// - `shape` and `size` (ir/ops/dynamic.cc) are ordinary ops whose value depends on their
//   argument's type alone (OpDef::fold_from_types).
// - An op whose attributes arrive as tensors (reshape's shape, slice's starts, resize's scales)
//   is imported as its dynamic variant, `dyn.<op>` (OpDef::static_op): the values are trailing
//   arguments, and its result has unknown dims (TypeRelContext::UnknownDim) where they decide.
// - The graph inputs whose values reach such an argument are the model's *value inputs*
//   (ValueInputs). The engine's shape key includes their values as well as every input's shape:
//   a value input is specialized on like a shape.
// - When a run binds the shapes, ResolveDynamic replaces each value input by a constant holding
//   its value, folds `shape`/`size` from the now concrete types, folds the small constant
//   subgraphs that compute values from them, and rewrites each `dyn.<op>` whose value
//   arguments became constants into `<op>` with those values as attributes. What is left is a
//   static graph: the shape computation costs nothing at run time.
// - ONNX If imports as one `dyn.branch(then_value, else_value, cond)` per output (a constant
//   condition picks its branch at import): once the condition is a constant, ResolveDynamic
//   replaces the call by the taken value, so the other branch is not computed at all. Both
//   branches are still typed at specialization.
// A value that depends on input *data* (a Range over a computed tensor that is not a value
// input) cannot be resolved: ResolveDynamic names the node and the argument. Ops whose output
// size depends on data (nonzero, unique) are not resolved here: a model holding one runs in
// segments (engine/segments.h).
#pragma once

#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln {

// A tensor's value as an attribute of `kind`: ints (a 0-D or 1-D integer tensor), int (one
// integer element), floats, float (one element; integers convert), bool (one element).
// Errors (kInvalidArgument) start with `what`.
AttrValue AttrFromTensor(const Tensor& t, AttrKind kind, const std::string& what);
// The tensor that AttrFromTensor reads back as `v`: ints -> i64[n], int -> i64[], floats ->
// f64[n], float -> f64[], bool -> bool[].
Tensor TensorFromAttr(const AttrValue& v);

// Whether `fn` has a dynamic op or an op folded from types (so specialization must resolve it).
bool HasDynamicOps(const Function& fn);
// The indices of `fn`'s parameters whose values reach a value argument of a dynamic op (through
// any ops but `shape`-like ones, which read only types). Sorted.
std::vector<int> ValueInputs(const Function& fn);

// Pushes on `stack` the nodes whose values the value of `e` is computed from: a call's
// arguments (not a function argument), a tuple's fields, an indexed tuple; none for a
// shape-like op (OpDef::fold_from_types: it reads types), and for seq.length only what decides
// the sequence's length (a split's sizes: ir/sequence.h), not its elements. The walk of
// ValueInputs, and of the engine's search for values computed from data.
void PushValueSources(const Expr& e, std::vector<Expr>& stack);

// The fold of one call in a value computation: a `shape`-like op (OpDef::fold_from_types) whose
// argument types are concrete, or a call whose arguments are all constants and whose result
// type is concrete and small (at most 65536 elements), evaluated with the reference kernel.
// Returns the Constant (a Tuple of Constants for a multi-output op) named as the call, or
// nullptr when the call does not fold (including when its kernel throws: the run then reports
// it). `arg_types` and `result_type` may hold nulls for unknown types.
Expr FoldValueCall(const CallNode& call, const std::vector<Type>& arg_types,
                   const Type& result_type);

// When `op` is a dynamic variant whose value arguments (in `args`) are all constants: sets their
// values as attributes in `attrs`, drops them from `args` and returns true; the call is then one
// of `op.static_op`. Otherwise changes nothing and returns false. A value of the wrong kind is
// kInvalidArgument naming the attribute.
bool StaticForm(const OpDef& op, std::vector<Expr>& args, Attrs& attrs);

// ONNX Loop whose trip count or condition is known only at specialization or at run time (the
// engine runs most of them as loops, each iteration a run of the body: engine/segments.h):
//   dyn.loop(body, carried..., captured..., trip_count, cond), num_carried=N, num_scans=K
// where body is a function (iteration: i64[], cond: bool[], the N carried values, the captured
// outer values) -> (cond, N carried values, K scan values). Its value arguments are the last
// two. ResolveDynamic unrolls it once trip_count and cond are constants: iteration t is the
// body instantiated with t and the previous iteration's values, for as long as its condition
// (which must then fold to a constant) holds; scan outputs stack the iterations' values along a
// new axis 0 (last iteration first where the ints attribute scan_reverse says so). The result is a
// tuple of the N final values and the K stacked ones.
inline constexpr char kDynLoopOp[] = "dyn.loop";
// The most iterations a Loop or Scan unrolls to (at import or at specialization): each is a copy
// of the body, compiled; past this it runs as a loop (engine/segments.h) rather than being
// compiled for minutes (opset 8's batched Scan, which only unrolls, is refused past it).
inline constexpr int64_t kMaxUnrolledIterations = 4096;

// The per-iteration values `parts` of one scan output stacked along a new dim at `axis` (in
// [0, rank]): unsqueeze each, concat; the calls named `name`. Loop and Scan unrolling's stack.
Expr StackIterations(const std::vector<Expr>& parts, int64_t axis, const std::string& name);

// The index of a dynamic call's first value argument.
size_t FirstValueArg(const CallNode& call);

// The most elements a value input may have: its values are part of the shape key.
constexpr int64_t kMaxValueInputElements = 4096;

// `fn`, typed with concrete parameter types (after BindSymbols), with every dynamic op resolved
// to its static op as described above. `inputs` holds one tensor per parameter (only the value
// inputs' are read; the others may be undefined). Returns a typed function. Errors: a dynamic
// op whose value argument is not computable from shapes and value inputs (kUnsupported, naming
// the node and the attribute), a value that the static op rejects (its relation's kTypeError or
// the attribute's kInvalidArgument, naming the node).
Function ResolveDynamic(const Function& fn, const std::vector<Tensor>& inputs);

}  // namespace kiln
