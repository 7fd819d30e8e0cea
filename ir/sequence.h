// Sequences of tensors (ONNX SequenceConstruct, SequenceAt, SplitToSequence, ...): how kiln
// types them before specialization and resolves them at it.
//
// A sequence is a `List[Tensor[...]]` (the built-in List ADT, ir/type.h) made and read by the
// ops in ir/ops/sequence.cc:
//   seq.construct(t...)   seq.empty{dtype}   seq.length(s)   seq.concat(s){axis, new_axis}
//   seq.split(x){axis, keepdims}   (pieces of size 1)
//   seq.at(s){position}              (dyn.seq.at(s, position) until the position is known)
//   seq.insert(s, t){position}       (dyn.seq.insert(s, t, position); none: at the back)
//   seq.erase(s){position}           (dyn.seq.erase(s, position); none: the last)
//   seq.split_sizes(x){axis, split}  (dyn.seq.split_sizes(x, split))
//   seq.split_chunk(x){axis, chunk}  (dyn.seq.split_chunk(x, chunk): pieces of that size)
// Positions and split sizes are value arguments (ir/dynamic.h): a graph input that reaches one
// is a value input, specialized on by value like a shape.
//
// Before specialization a sequence's type says only what every element shares: the dtype, the
// rank and each dim all elements agree on (others are unknown dims). An empty sequence's
// element is a tensor whose shape is the Shape variable `_` (no element yet): the first
// element inserted decides it. Elements of different ranks are a type error (kiln cannot type
// what SequenceAt returns from such a list before specialization).
//
// At specialization (ResolveDynamic) the length of every sequence is known, since it follows
// from shapes and value inputs: each sequence becomes a Tuple of its elements, SequenceAt the
// element itself, SequenceLength a constant, SplitToSequence slices, ConcatFromSequence a
// concat. What is compiled holds no sequence ops. A dyn.loop that carries a sequence (ONNX Loop,
// and SequenceMap, imported as a loop over its input's length) therefore always unrolls there.
// A sequence's length as a value (a trip count) reads only what decides the length, never the
// elements' data (PushValueSources, ir/dynamic.h), so elements never become value inputs.
#pragma once

#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/op.h"

namespace kiln {

// Whether `op` is one of the sequence ops above (seq.* or dyn.seq.*).
bool IsSequenceOp(const OpDef* op);

// `List[element]`.
Type SequenceType(Type element);
// The element type of `List[Tensor[...]]`, or nullptr when `t` is not a sequence of tensors.
const TensorTypeNode* SequenceElement(const Type& t);
// The element type of an empty sequence of `dtype`, and whether `t` is one.
Type NoElementYet(DType dtype);
bool IsNoElementYet(const TensorTypeNode& t);
// The element type of a sequence holding elements of types `a` and `b` (either may be
// NoElementYet): the dims they share, unknown dims elsewhere. "" on success, else why they
// cannot share a sequence (`*out` is then unchanged).
std::string JoinElements(const TensorTypeNode& a, const TensorTypeNode& b, Type* out);

// The static sequence op call `call` (named `e` in messages), its arguments `args` resolved and
// typed `arg_types`, as what it stands for at specialization: a Tuple of the sequence's
// elements, the element itself, a constant or slices/concat calls (not yet typed). A sequence
// argument must be a Tuple by then. Errors: a dyn.seq.* whose value argument is not a constant
// (kUnsupported), a position out of range or a concat of an empty sequence (kInvalidArgument),
// naming the node.
Expr ResolveSequenceCall(const Expr& e, const OpDef& op, const std::vector<Expr>& args,
                         const std::vector<Type>& arg_types, const Attrs& attrs);

}  // namespace kiln
