// Visitors and mutators over the graph IR. Both recurse by default and visit each shared node
// once; override only the node kinds a pass cares about.
#pragma once

#include <unordered_map>
#include <unordered_set>

#include "ir/expr.h"

namespace kiln {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;
  // Visits `e` and everything below it; a node reached twice is visited once.
  void Visit(const Expr& e);

 protected:
#define KILN_EXPR_NODE(N) virtual void Visit##N(const N##Node* node, const Expr& self);
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE

 private:
  std::unordered_set<const ExprNode*> visited_;
};

class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  // Returns the rewritten `e`. A node none of whose operands changed comes back as itself,
  // so an untouched graph is returned pointer-identical. Rebuilt nodes keep their name and
  // lose their inferred type (re-run InferTypes). Operands of calls, tuples and tuple items
  // are mutated (from an explicit stack, so deep graphs cost heap, not C++ stack) before
  // their user's Mutate##N runs, even if that override then ignores them.
  Expr Mutate(const Expr& e);

 protected:
#define KILN_EXPR_NODE(N) virtual Expr Mutate##N(const N##Node* node, const Expr& self);
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE

  std::unordered_map<const ExprNode*, Expr> memo_;
};

}  // namespace kiln
