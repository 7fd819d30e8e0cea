// How many operands refer to each node of a function: what a graph pass checks before it
// rewrites a node into its only user (folding a product's scale into its weights is only a
// saving where nothing else reads the product).
#pragma once

#include <unordered_map>

#include "ir/visitor.h"

namespace kiln {

// The references to each node, nested function bodies included, plus one for the result of
// the function. Visit the function first.
class UseCounter : public ExprVisitor {
 public:
  std::unordered_map<const ExprNode*, int> counts;

  bool UsedOnce(const Expr& e) const {
    auto it = counts.find(e.get());
    return it != counts.end() && it->second == 1;
  }

 protected:
  void VisitCall(const CallNode* n, const Expr& self) override {
    if (n->fn) ++counts[n->fn.get()];
    for (const Expr& a : n->args) ++counts[a.get()];
    ExprVisitor::VisitCall(n, self);
  }
  void VisitTuple(const TupleNode* n, const Expr& self) override {
    for (const Expr& f : n->fields) ++counts[f.get()];
    ExprVisitor::VisitTuple(n, self);
  }
  void VisitTupleGetItem(const TupleGetItemNode* n, const Expr& self) override {
    ++counts[n->tuple.get()];
    ExprVisitor::VisitTupleGetItem(n, self);
  }
  void VisitFunction(const FunctionNode* n, const Expr& self) override {
    ++counts[n->body.get()];
    ExprVisitor::VisitFunction(n, self);
  }
};

}  // namespace kiln
