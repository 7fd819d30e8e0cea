// Visitors and mutators for the loop IR. Both recurse by default into every operand
// (expressions inside statements too); override only the node kinds a pass changes. Mutators
// return the original node when nothing below it changed. Only code generators use a strict
// dispatch that fails on a node kind they do not handle.
#pragma once

#include "ir/loop/loop.h"

namespace kiln::loop {

class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void VisitExpr(const Expr& e);
  virtual void VisitStmt(const Stmt& s);

 protected:
#define KILN_LOOP_EXPR(N) virtual void Visit##N(const N##Node* node, const Expr& self);
#define KILN_LOOP_STMT(N) virtual void Visit##N(const N##Node* node, const Stmt& self);
#include "ir/loop/loop_nodes.def"
  // Buffers are visited through their shape and stride expressions.
  virtual void VisitBuffer(const Buffer& b);
};

class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual Expr MutateExpr(const Expr& e);
  virtual Stmt MutateStmt(const Stmt& s);

 protected:
#define KILN_LOOP_EXPR(N) virtual Expr Mutate##N(const N##Node* node, const Expr& self);
#define KILN_LOOP_STMT(N) virtual Stmt Mutate##N(const N##Node* node, const Stmt& self);
#include "ir/loop/loop_nodes.def"
  // Buffers are kept as they are by default (their identity matters); a pass that rewrites
  // buffers (flattening) overrides this and keeps a map from old to new.
  virtual Buffer MutateBuffer(const Buffer& b) {
    return b;
  }
  // Returns the mutated vector and whether any element changed.
  std::vector<Expr> MutateExprs(const std::vector<Expr>& es, bool* changed);
};

// `s` (or `e`) with every use of `var` replaced by `value`; binders are kept (see Mutator).
// A buffer whose shape or strides use `var` is re-made once per call, so that every reference
// to one buffer still names one object. Rebuilt nodes fold, so `i * 16` with i = 0 becomes 0.
Stmt Substitute(const Stmt& s, const Var& var, const Expr& value);
Expr Substitute(const Expr& e, const Var& var, const Expr& value);

// Rebuilds `f` with a new body (and the same everything else).
PrimFunc WithBody(const PrimFunc& f, Stmt body);

}  // namespace kiln::loop
