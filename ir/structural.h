// Structural equality and hashing of graph IR: "the same program", regardless of which node
// objects and variables spell it.
//
// Two expressions are equal when there is a one-to-one map between their nodes that pairs the
// roots, pairs operands position by position, and pairs nodes that agree on everything local:
// kind, op, attributes (==), tuple index, constant dtype/shape/bytes, types (TypeEqual, except
// that type holes only have to correspond one to one), a function's return-type annotation and
// attributes. Variables are paired by position (function parameters in order, free variables
// where first met), never by name; source names are ignored.
//
// Sharing is significant: because the map is one-to-one, `add(%c, %c)` with one shared node is
// not equal to `add(const1, const2)` with two equal but distinct nodes. A rewrite that merges or
// duplicates nodes (CSE, for instance) therefore changes the structure, and the printer keeps
// shared nodes shared across a text round trip.
//
// A Function node's own `type` is not compared: it follows from its parameter annotations and
// its body, which are. Both functions work iteratively, so a graph of any depth is fine.
#pragma once

#include <cstddef>

#include "ir/expr.h"

namespace kiln {

// compare_types=false ignores the inferred `type` of every non-Var node (to compare graphs
// before and after inference); Var annotations and return types are always compared.
bool StructuralEqual(const Expr& a, const Expr& b, bool compare_types = true);
// Same function names, and each pair of functions equal. Functions are compared separately,
// so sharing a node between two functions of one module is not significant.
bool StructuralEqual(const IRModule& a, const IRModule& b, bool compare_types = true);

// Consistent with StructuralEqual under either compare_types: equal implies equal hashes. It
// hashes op names, not addresses, so it is stable across processes of one build.
size_t StructuralHash(const Expr& e);
size_t StructuralHash(const IRModule& m);

}  // namespace kiln
