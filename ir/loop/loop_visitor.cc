// Default recursion for the loop IR's visitor and mutator.
//
// What "every operand" means here, for both classes:
//  - Binding occurrences (a For's or LetStmt's variable, a reduction axis's or iter_var's
//    variable) are not visited: VisitVar / MutateVar see uses only, so a pass that substitutes
//    a variable cannot turn a binder into an expression. Their extents are visited.
//  - Buffers are reached at every reference (Load, Store, Alloc, Free, block regions); the
//    visitor then walks the shape and stride expressions, the mutator calls MutateBuffer.
//  - The IR is a tree in practice, but a node shared between two places is visited (and
//    mutated) once per place: nothing is memoized, so results cannot go stale between calls.
//
// Rebuilt nodes go through the construction helpers of loop.h, so their dtype and lanes follow
// the new operands and constant operands fold: substituting a loop variable by its start leaves
// folded index math behind. A helper's type check is the mutator's, too: a rewrite that makes an
// ill-typed node throws where it happens instead of reaching a code generator.
#include "ir/loop/loop_visitor.h"

#include <unordered_map>

#include "ir/error.h"

namespace kiln::loop {

// ---- Visitor ----

void Visitor::VisitExpr(const Expr& e) {
  if (!e) return;
  switch (e->kind) {
#define KILN_LOOP_EXPR(N)                              \
  case ExprKind::k##N:                                 \
    Visit##N(static_cast<const N##Node*>(e.get()), e); \
    break;
#include "ir/loop/loop_nodes.def"
  }
}

void Visitor::VisitStmt(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
#define KILN_LOOP_STMT(N)                              \
  case StmtKind::k##N:                                 \
    Visit##N(static_cast<const N##Node*>(s.get()), s); \
    break;
#include "ir/loop/loop_nodes.def"
  }
}

void Visitor::VisitBuffer(const Buffer& b) {
  if (!b) return;
  for (const Expr& e : b->shape) VisitExpr(e);
  for (const Expr& e : b->strides) VisitExpr(e);
}

void Visitor::VisitIntImm(const IntImmNode*, const Expr&) {}
void Visitor::VisitFloatImm(const FloatImmNode*, const Expr&) {}
void Visitor::VisitVar(const VarNode*, const Expr&) {}
void Visitor::VisitBinary(const BinaryNode* n, const Expr&) {
  VisitExpr(n->a);
  VisitExpr(n->b);
}
void Visitor::VisitNot(const NotNode* n, const Expr&) {
  VisitExpr(n->a);
}
void Visitor::VisitSelect(const SelectNode* n, const Expr&) {
  VisitExpr(n->cond);
  VisitExpr(n->true_value);
  VisitExpr(n->false_value);
}
void Visitor::VisitCast(const CastNode* n, const Expr&) {
  VisitExpr(n->value);
}
void Visitor::VisitLoad(const LoadNode* n, const Expr&) {
  VisitBuffer(n->buffer);
  for (const Expr& i : n->indices) VisitExpr(i);
}
void Visitor::VisitCall(const CallNode* n, const Expr&) {
  for (const Expr& a : n->args) VisitExpr(a);
}
void Visitor::VisitRamp(const RampNode* n, const Expr&) {
  VisitExpr(n->base);
}
void Visitor::VisitBroadcast(const BroadcastNode* n, const Expr&) {
  VisitExpr(n->value);
}
void Visitor::VisitReduce(const ReduceNode* n, const Expr&) {
  for (const IterVar& axis : n->axes) VisitExpr(axis.extent);
  VisitExpr(n->source);
}

void Visitor::VisitLetStmt(const LetStmtNode* n, const Stmt&) {
  VisitExpr(n->value);
  VisitStmt(n->body);
}
void Visitor::VisitStore(const StoreNode* n, const Stmt&) {
  VisitBuffer(n->buffer);
  for (const Expr& i : n->indices) VisitExpr(i);
  VisitExpr(n->value);
}
void Visitor::VisitAlloc(const AllocNode* n, const Stmt&) {
  VisitBuffer(n->buffer);
}
void Visitor::VisitFree(const FreeNode* n, const Stmt&) {
  VisitBuffer(n->buffer);
}
void Visitor::VisitIfThenElse(const IfThenElseNode* n, const Stmt&) {
  VisitExpr(n->cond);
  VisitStmt(n->then_case);
  VisitStmt(n->else_case);
}
void Visitor::VisitFor(const ForNode* n, const Stmt&) {
  VisitExpr(n->min);
  VisitExpr(n->extent);
  VisitStmt(n->body);
}
void Visitor::VisitEvaluate(const EvaluateNode* n, const Stmt&) {
  VisitExpr(n->value);
}
void Visitor::VisitPrefetch(const PrefetchNode* n, const Stmt&) {
  VisitExpr(n->target);
}
void Visitor::VisitScheduleBlock(const ScheduleBlockNode* n, const Stmt&) {
  for (const IterVar& iv : n->iter_vars) VisitExpr(iv.extent);
  for (const Expr& b : n->bindings) VisitExpr(b);
  for (const std::vector<BufferRegion>* regions : {&n->reads, &n->writes}) {
    for (const BufferRegion& r : *regions) {
      VisitBuffer(r.buffer);
      for (const Expr& e : r.min) VisitExpr(e);
      for (const Expr& e : r.extent) VisitExpr(e);
    }
  }
  VisitStmt(n->init);
  VisitStmt(n->body);
}
void Visitor::VisitSeq(const SeqNode* n, const Stmt&) {
  for (const Stmt& s : n->stmts) VisitStmt(s);
}

// ---- Mutator ----

Expr Mutator::MutateExpr(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return Mutate##N(static_cast<const N##Node*>(e.get()), e);
#include "ir/loop/loop_nodes.def"
  }
  return e;
}

Stmt Mutator::MutateStmt(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
#define KILN_LOOP_STMT(N) \
  case StmtKind::k##N:    \
    return Mutate##N(static_cast<const N##Node*>(s.get()), s);
#include "ir/loop/loop_nodes.def"
  }
  return s;
}

// Sets *changed when an element changed and never clears it, so several calls can share one
// flag that the caller initialized to false.
std::vector<Expr> Mutator::MutateExprs(const std::vector<Expr>& es, bool* changed) {
  std::vector<Expr> out;
  out.reserve(es.size());
  for (const Expr& e : es) {
    out.push_back(MutateExpr(e));
    if (out.back() != e) *changed = true;
  }
  return out;
}

namespace {

// Mutates the extents of `axes` (not their variables: see the file comment).
std::vector<IterVar> MutateExtents(Mutator& m, const std::vector<IterVar>& axes, bool* changed) {
  std::vector<IterVar> out = axes;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].extent = m.MutateExpr(axes[i].extent);
    if (out[i].extent != axes[i].extent) *changed = true;
  }
  return out;
}

}  // namespace

Expr Mutator::MutateIntImm(const IntImmNode*, const Expr& self) {
  return self;
}
Expr Mutator::MutateFloatImm(const FloatImmNode*, const Expr& self) {
  return self;
}
Expr Mutator::MutateVar(const VarNode*, const Expr& self) {
  return self;
}

Expr Mutator::MutateBinary(const BinaryNode* n, const Expr& self) {
  Expr a = MutateExpr(n->a);
  Expr b = MutateExpr(n->b);
  if (a == n->a && b == n->b) return self;
  return MakeBinary(n->op, std::move(a), std::move(b));
}

Expr Mutator::MutateNot(const NotNode* n, const Expr& self) {
  Expr a = MutateExpr(n->a);
  if (a == n->a) return self;
  return Not(std::move(a));
}

Expr Mutator::MutateSelect(const SelectNode* n, const Expr& self) {
  Expr c = MutateExpr(n->cond);
  Expr t = MutateExpr(n->true_value);
  Expr f = MutateExpr(n->false_value);
  if (c == n->cond && t == n->true_value && f == n->false_value) return self;
  return Select(std::move(c), std::move(t), std::move(f));
}

Expr Mutator::MutateCast(const CastNode* n, const Expr& self) {
  Expr v = MutateExpr(n->value);
  if (v == n->value) return self;
  return Cast(n->dtype, std::move(v));
}

Expr Mutator::MutateLoad(const LoadNode* n, const Expr& self) {
  bool changed = false;
  Buffer b = MutateBuffer(n->buffer);
  std::vector<Expr> idx = MutateExprs(n->indices, &changed);
  if (!changed && b == n->buffer) return self;
  return Load(std::move(b), std::move(idx));
}

Expr Mutator::MutateCall(const CallNode* n, const Expr& self) {
  bool changed = false;
  std::vector<Expr> args = MutateExprs(n->args, &changed);
  if (!changed) return self;
  return Call(n->fn, std::move(args));
}

Expr Mutator::MutateRamp(const RampNode* n, const Expr& self) {
  Expr base = MutateExpr(n->base);
  if (base == n->base) return self;
  return Ramp(std::move(base), n->stride, n->lanes);
}

Expr Mutator::MutateBroadcast(const BroadcastNode* n, const Expr& self) {
  Expr v = MutateExpr(n->value);
  if (v == n->value) return self;
  return Broadcast(std::move(v), n->lanes);
}

Expr Mutator::MutateReduce(const ReduceNode* n, const Expr& self) {
  bool changed = false;
  std::vector<IterVar> axes = MutateExtents(*this, n->axes, &changed);
  Expr source = MutateExpr(n->source);
  if (!changed && source == n->source) return self;
  return Reduce(n->combiner, std::move(source), std::move(axes));
}

Stmt Mutator::MutateLetStmt(const LetStmtNode* n, const Stmt& self) {
  Expr value = MutateExpr(n->value);
  Stmt body = MutateStmt(n->body);
  if (value == n->value && body == n->body) return self;
  return LetStmt(n->var, std::move(value), std::move(body));
}

Stmt Mutator::MutateStore(const StoreNode* n, const Stmt& self) {
  bool changed = false;
  Buffer b = MutateBuffer(n->buffer);
  std::vector<Expr> idx = MutateExprs(n->indices, &changed);
  Expr value = MutateExpr(n->value);
  if (!changed && b == n->buffer && value == n->value) return self;
  return Store(std::move(b), std::move(idx), std::move(value));
}

Stmt Mutator::MutateAlloc(const AllocNode* n, const Stmt& self) {
  Buffer b = MutateBuffer(n->buffer);
  if (b == n->buffer) return self;
  return Alloc(std::move(b));
}

Stmt Mutator::MutateFree(const FreeNode* n, const Stmt& self) {
  Buffer b = MutateBuffer(n->buffer);
  if (b == n->buffer) return self;
  return Free(std::move(b));
}

Stmt Mutator::MutateIfThenElse(const IfThenElseNode* n, const Stmt& self) {
  Expr cond = MutateExpr(n->cond);
  Stmt then_case = MutateStmt(n->then_case);
  Stmt else_case = MutateStmt(n->else_case);
  if (cond == n->cond && then_case == n->then_case && else_case == n->else_case) return self;
  return IfThenElse(std::move(cond), std::move(then_case), std::move(else_case));
}

Stmt Mutator::MutateFor(const ForNode* n, const Stmt& self) {
  Expr min = MutateExpr(n->min);
  Expr extent = MutateExpr(n->extent);
  Stmt body = MutateStmt(n->body);
  if (min == n->min && extent == n->extent && body == n->body) return self;
  return For(n->var, std::move(min), std::move(extent), n->for_kind, std::move(body));
}

Stmt Mutator::MutateEvaluate(const EvaluateNode* n, const Stmt& self) {
  Expr v = MutateExpr(n->value);
  if (v == n->value) return self;
  return Evaluate(std::move(v));
}

Stmt Mutator::MutatePrefetch(const PrefetchNode* n, const Stmt& self) {
  Expr t = MutateExpr(n->target);
  if (t == n->target) return self;
  return Prefetch(std::move(t));
}

Stmt Mutator::MutateScheduleBlock(const ScheduleBlockNode* n, const Stmt& self) {
  bool changed = false;
  std::vector<IterVar> iter_vars = MutateExtents(*this, n->iter_vars, &changed);
  std::vector<Expr> bindings = MutateExprs(n->bindings, &changed);
  auto mutate_regions = [&](const std::vector<BufferRegion>& regions) {
    std::vector<BufferRegion> out;
    out.reserve(regions.size());
    for (const BufferRegion& r : regions) {
      BufferRegion m{MutateBuffer(r.buffer), MutateExprs(r.min, &changed),
                     MutateExprs(r.extent, &changed)};
      if (m.buffer != r.buffer) changed = true;
      out.push_back(std::move(m));
    }
    return out;
  };
  std::vector<BufferRegion> reads = mutate_regions(n->reads);
  std::vector<BufferRegion> writes = mutate_regions(n->writes);
  Stmt init = MutateStmt(n->init);
  Stmt body = MutateStmt(n->body);
  if (!changed && init == n->init && body == n->body) return self;
  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = n->name;
  block->iter_vars = std::move(iter_vars);
  block->is_reduce = n->is_reduce;
  block->bindings = std::move(bindings);
  block->reads = std::move(reads);
  block->writes = std::move(writes);
  block->init = std::move(init);
  block->body = std::move(body);
  return block;
}

// A statement mutated to null is dropped: that is how a pass deletes one. Seq() also flattens
// a statement that became a Seq into its parent.
Stmt Mutator::MutateSeq(const SeqNode* n, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> stmts;
  stmts.reserve(n->stmts.size());
  for (const Stmt& s : n->stmts) {
    stmts.push_back(MutateStmt(s));
    if (stmts.back() != s) changed = true;
  }
  if (!changed) return self;
  return Seq(std::move(stmts));
}

namespace {

class SubstituteVar : public Mutator {
 public:
  SubstituteVar(const VarNode* var, Expr value) : var_(var), value_(std::move(value)) {}

 protected:
  Expr MutateVar(const VarNode* v, const Expr& self) override { return v == var_ ? value_ : self; }
  Buffer MutateBuffer(const Buffer& b) override {
    auto it = remade_.find(b.get());
    if (it != remade_.end()) return it->second;
    bool changed = false;
    std::vector<Expr> shape = MutateExprs(b->shape, &changed);
    std::vector<Expr> strides = MutateExprs(b->strides, &changed);
    Buffer out =
        changed ? MakeBuffer(b->name, b->dtype, std::move(shape), b->scope, std::move(strides)) : b;
    remade_.emplace(b.get(), out);
    return out;
  }

 private:
  const VarNode* var_;
  Expr value_;
  // Old buffer -> its copy (or itself): one object per buffer in the result.
  std::unordered_map<const BufferNode*, Buffer> remade_;
};

}  // namespace

Stmt Substitute(const Stmt& s, const Var& var, const Expr& value) {
  return SubstituteVar(var.get(), value).MutateStmt(s);
}

Expr Substitute(const Expr& e, const Var& var, const Expr& value) {
  return SubstituteVar(var.get(), value).MutateExpr(e);
}

PrimFunc WithBody(const PrimFunc& f, Stmt body) {
  KILN_CHECK(f != nullptr, "WithBody of a null function");
  if (body == f->body) return f;
  auto out = std::make_shared<PrimFuncNode>(*f);
  out->body = std::move(body);
  return out;
}

}  // namespace kiln::loop
