// Structural equality and hashing of the loop IR.
//
// Two programs are equal when they have the same tree of nodes with equal local fields (kind,
// dtype, lanes, operator, immediate bits, loop kind, ...) and their variables and buffers
// correspond:
//  - A binder (function scalar parameter, loop variable, let, reduction axis, block iter_var)
//    pairs its variable with the other side's binder at the same position, for the binder's
//    scope. A use then must name the paired variable on both sides, so shadowing is respected.
//  - Buffer parameters pair by position and an Alloc pairs its buffer with the other side's
//    Alloc, if their declarations (dtype, scope, shape, strides) are equal.
//  - Anything unpaired is free and must be the very same object on both sides.
// Names are ignored (of variables, buffers and the function itself: two kernels that differ only
// in their names can share code), except a schedule block's name, which schedules refer to.
// Float immediates compare by bits, so NaN equals itself and 0.0 differs from -0.0.
//
// The hash numbers binders in the order the traversal meets them, which equal programs share;
// free objects hash by address, so a hash is stable only within one process.
//
// Both walk recursively: loop nests and index expressions are shallow.
#include <cstring>
#include <unordered_map>

#include "ir/loop/loop_text.h"

namespace kiln::loop {

namespace {

size_t Mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

uint64_t Bits(double v) {
  uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// A map whose entries can be rolled back to a mark, for bindings that end with their scope.
template <typename K, typename V>
class ScopedMap {
 public:
  const V* Find(K k) const {
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : &it->second;
  }
  void Set(K k, V v) {
    auto it = map_.find(k);
    undo_.push_back({k, it != map_.end(), it != map_.end() ? it->second : V{}});
    map_[k] = v;
  }
  size_t Mark() const { return undo_.size(); }
  void Restore(size_t mark) {
    while (undo_.size() > mark) {
      Undo& u = undo_.back();
      if (u.had) {
        map_[u.key] = u.old;
      } else {
        map_.erase(u.key);
      }
      undo_.pop_back();
    }
  }

 private:
  struct Undo {
    K key;
    bool had;
    V old;
  };
  std::unordered_map<K, V> map_;
  std::vector<Undo> undo_;
};

class Comparer {
 public:
  bool Eq(const Expr& a, const Expr& b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind || a->dtype != b->dtype || a->lanes != b->lanes) return false;
    switch (a->kind) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return Eq##N(static_cast<const N##Node*>(a.get()), static_cast<const N##Node*>(b.get()));
#include "ir/loop/loop_nodes.def"
    }
    return false;
  }

  bool Eq(const Stmt& a, const Stmt& b) {
    if (!a || !b) return a == b;
    if (a->kind != b->kind) return false;
    switch (a->kind) {
#define KILN_LOOP_STMT(N) \
  case StmtKind::k##N:    \
    return Eq##N(static_cast<const N##Node*>(a.get()), static_cast<const N##Node*>(b.get()));
#include "ir/loop/loop_nodes.def"
    }
    return false;
  }

  bool Eq(const PrimFunc& f, const PrimFunc& g) {
    if (!f || !g) return f == g;
    if (f->num_inputs != g->num_inputs || !(f->attrs == g->attrs) ||
        f->scalar_params.size() != g->scalar_params.size() ||
        f->buffer_params.size() != g->buffer_params.size())
      return false;
    // Scalars first: buffer shapes refer to them.
    for (size_t i = 0; i < f->scalar_params.size(); ++i)
      if (!BindVar(f->scalar_params[i], g->scalar_params[i])) return false;
    for (size_t i = 0; i < f->buffer_params.size(); ++i)
      if (!BindBuffer(f->buffer_params[i], g->buffer_params[i])) return false;
    return Eq(f->body, g->body);
  }

 private:
  bool Exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!Eq(a[i], b[i])) return false;
    return true;
  }

  bool BindVar(const Var& a, const Var& b) {
    if (!a || !b) return a == b;
    if (a->dtype != b->dtype || a->lanes != b->lanes) return false;
    a_to_b_.Set(a.get(), b.get());
    b_to_a_.Set(b.get(), a.get());
    return true;
  }

  // The extents are in the enclosing scope; the variables are bound for the caller's scope.
  bool BindAxes(const std::vector<IterVar>& a, const std::vector<IterVar>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!Eq(a[i].extent, b[i].extent)) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!BindVar(a[i].var, b[i].var)) return false;
    return true;
  }

  bool BindBuffer(const Buffer& a, const Buffer& b) {
    if (!a || !b) return a == b;
    if (a->dtype != b->dtype || a->scope != b->scope || !Exprs(a->shape, b->shape) ||
        !Exprs(a->strides, b->strides))
      return false;
    buf_a_to_b_[a.get()] = b.get();
    buf_b_to_a_[b.get()] = a.get();
    return true;
  }

  bool SameBuffer(const Buffer& a, const Buffer& b) {
    if (!a || !b) return a == b;
    auto x = buf_a_to_b_.find(a.get());
    auto y = buf_b_to_a_.find(b.get());
    if (x == buf_a_to_b_.end() || y == buf_b_to_a_.end())
      return x == buf_a_to_b_.end() && y == buf_b_to_a_.end() && a == b;
    return x->second == b.get() && y->second == a.get();
  }

  bool Regions(const std::vector<BufferRegion>& a, const std::vector<BufferRegion>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameBuffer(a[i].buffer, b[i].buffer) || !Exprs(a[i].min, b[i].min) ||
          !Exprs(a[i].extent, b[i].extent))
        return false;
    }
    return true;
  }

  // ---- expressions ----
  bool EqIntImm(const IntImmNode* a, const IntImmNode* b) {
    return a->value == b->value;
  }
  bool EqFloatImm(const FloatImmNode* a, const FloatImmNode* b) {
    return Bits(a->value) == Bits(b->value);
  }
  bool EqVar(const VarNode* a, const VarNode* b) {
    const VarNode* const* x = a_to_b_.Find(a);
    const VarNode* const* y = b_to_a_.Find(b);
    if (!x || !y) return !x && !y && a == b;
    return *x == b && *y == a;
  }
  bool EqBinary(const BinaryNode* a, const BinaryNode* b) {
    return a->op == b->op && Eq(a->a, b->a) && Eq(a->b, b->b);
  }
  bool EqNot(const NotNode* a, const NotNode* b) {
    return Eq(a->a, b->a);
  }
  bool EqSelect(const SelectNode* a, const SelectNode* b) {
    return Eq(a->cond, b->cond) && Eq(a->true_value, b->true_value) &&
           Eq(a->false_value, b->false_value);
  }
  bool EqCast(const CastNode* a, const CastNode* b) {
    return Eq(a->value, b->value);
  }
  bool EqLoad(const LoadNode* a, const LoadNode* b) {
    return SameBuffer(a->buffer, b->buffer) && Exprs(a->indices, b->indices);
  }
  bool EqCall(const CallNode* a, const CallNode* b) {
    return a->fn == b->fn && Exprs(a->args, b->args);
  }
  bool EqRamp(const RampNode* a, const RampNode* b) {
    return a->stride == b->stride && Eq(a->base, b->base);
  }
  bool EqBroadcast(const BroadcastNode* a, const BroadcastNode* b) {
    return Eq(a->value, b->value);
  }
  bool EqReduce(const ReduceNode* a, const ReduceNode* b) {
    if (a->combiner != b->combiner) return false;
    Scope scope(this);
    return BindAxes(a->axes, b->axes) && Eq(a->source, b->source);
  }

  // ---- statements ----
  bool EqLetStmt(const LetStmtNode* a, const LetStmtNode* b) {
    if (!Eq(a->value, b->value)) return false;
    Scope scope(this);
    return BindVar(a->var, b->var) && Eq(a->body, b->body);
  }
  bool EqStore(const StoreNode* a, const StoreNode* b) {
    return SameBuffer(a->buffer, b->buffer) && Exprs(a->indices, b->indices) &&
           Eq(a->value, b->value);
  }
  // The pairing made here lasts past the statement: the buffer is used by its siblings.
  bool EqAlloc(const AllocNode* a, const AllocNode* b) {
    return BindBuffer(a->buffer, b->buffer);
  }
  bool EqFree(const FreeNode* a, const FreeNode* b) {
    return SameBuffer(a->buffer, b->buffer);
  }
  bool EqIfThenElse(const IfThenElseNode* a, const IfThenElseNode* b) {
    return Eq(a->cond, b->cond) && Eq(a->then_case, b->then_case) && Eq(a->else_case, b->else_case);
  }
  bool EqFor(const ForNode* a, const ForNode* b) {
    if (a->for_kind != b->for_kind || !Eq(a->min, b->min) || !Eq(a->extent, b->extent))
      return false;
    Scope scope(this);
    return BindVar(a->var, b->var) && Eq(a->body, b->body);
  }
  bool EqEvaluate(const EvaluateNode* a, const EvaluateNode* b) {
    return Eq(a->value, b->value);
  }
  bool EqPrefetch(const PrefetchNode* a, const PrefetchNode* b) {
    return Eq(a->target, b->target);
  }
  bool EqScheduleBlock(const ScheduleBlockNode* a, const ScheduleBlockNode* b) {
    // Bindings are expressions of the surrounding loops, so they are compared before the
    // block's own iter_vars are bound.
    if (a->name != b->name || a->is_reduce != b->is_reduce || !Exprs(a->bindings, b->bindings))
      return false;
    Scope scope(this);
    return BindAxes(a->iter_vars, b->iter_vars) && Regions(a->reads, b->reads) &&
           Regions(a->writes, b->writes) && Eq(a->init, b->init) && Eq(a->body, b->body);
  }
  bool EqSeq(const SeqNode* a, const SeqNode* b) {
    if (a->stmts.size() != b->stmts.size()) return false;
    for (size_t i = 0; i < a->stmts.size(); ++i)
      if (!Eq(a->stmts[i], b->stmts[i])) return false;
    return true;
  }

  // Ends the variable bindings made after its construction.
  class Scope {
   public:
    explicit Scope(Comparer* c) : c_(c), a_(c->a_to_b_.Mark()), b_(c->b_to_a_.Mark()) {}
    ~Scope() {
      c_->a_to_b_.Restore(a_);
      c_->b_to_a_.Restore(b_);
    }

   private:
    Comparer* c_;
    size_t a_, b_;
  };

  ScopedMap<const VarNode*, const VarNode*> a_to_b_, b_to_a_;
  std::unordered_map<const BufferNode*, const BufferNode*> buf_a_to_b_, buf_b_to_a_;
};

// Mixes a pre-order walk of the program into one running value, so children are hashed in a
// fixed order and a binder is numbered before the uses in its scope are reached.
class Hasher {
 public:
  size_t Hash(const PrimFunc& f) {
    if (!f) return 0xf011;
    Add(static_cast<size_t>(f->num_inputs));
    Add(f->attrs.Hash());
    Add(f->scalar_params.size());
    for (const Var& v : f->scalar_params) BindVar(v);
    Add(f->buffer_params.size());
    for (const Buffer& b : f->buffer_params) BindBuffer(b);
    S(f->body);
    return h_;
  }

 private:
  void Add(size_t v) { h_ = Mix(h_, v); }

  void E(const Expr& e) {
    if (!e) return Add(0x2011);
    Add(static_cast<size_t>(e->kind));
    Add(static_cast<size_t>(e->dtype));
    Add(static_cast<size_t>(e->lanes));
    switch (e->kind) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return Hash##N(static_cast<const N##Node*>(e.get()));
#include "ir/loop/loop_nodes.def"
    }
  }

  void S(const Stmt& s) {
    if (!s) return Add(0x5011);
    Add(0x57 + static_cast<size_t>(s->kind));
    switch (s->kind) {
#define KILN_LOOP_STMT(N) \
  case StmtKind::k##N:    \
    return Hash##N(static_cast<const N##Node*>(s.get()));
#include "ir/loop/loop_nodes.def"
    }
  }

  void Exprs(const std::vector<Expr>& es) {
    Add(es.size());
    for (const Expr& e : es) E(e);
  }

  // A binder contributes its type; its uses contribute the binder's number.
  void BindVar(const Var& v) {
    if (!v) return Add(0x2012);
    Add(static_cast<size_t>(v->dtype));
    Add(static_cast<size_t>(v->lanes));
    vars_.Set(v.get(), next_var_++);
  }
  void BindAxes(const std::vector<IterVar>& axes) {
    Add(axes.size());
    for (const IterVar& iv : axes) E(iv.extent);
    for (const IterVar& iv : axes) BindVar(iv.var);
  }
  void BindBuffer(const Buffer& b) {
    if (!b) return Add(0xb011);
    Add(static_cast<size_t>(b->dtype));
    Add(static_cast<size_t>(b->scope));
    Exprs(b->shape);
    Exprs(b->strides);
    buffers_[b.get()] = next_buffer_++;
  }
  void BufferUse(const Buffer& b) {
    if (!b) return Add(0xb011);
    auto it = buffers_.find(b.get());
    if (it == buffers_.end()) return Add(Mix(0xfb, std::hash<const void*>()(b.get())));
    Add(Mix(0xbb, it->second));
  }
  void Regions(const std::vector<BufferRegion>& rs) {
    Add(rs.size());
    for (const BufferRegion& r : rs) {
      BufferUse(r.buffer);
      Exprs(r.min);
      Exprs(r.extent);
    }
  }

  // ---- expressions ----
  void HashIntImm(const IntImmNode* n) {
    Add(static_cast<size_t>(n->value));
  }
  void HashFloatImm(const FloatImmNode* n) {
    Add(static_cast<size_t>(Bits(n->value)));
  }
  void HashVar(const VarNode* n) {
    const size_t* k = vars_.Find(n);
    Add(k ? Mix(0xbf, *k) : Mix(0xff, std::hash<const void*>()(n)));
  }
  void HashBinary(const BinaryNode* n) {
    Add(static_cast<size_t>(n->op));
    E(n->a);
    E(n->b);
  }
  void HashNot(const NotNode* n) {
    E(n->a);
  }
  void HashSelect(const SelectNode* n) {
    E(n->cond);
    E(n->true_value);
    E(n->false_value);
  }
  void HashCast(const CastNode* n) {
    E(n->value);
  }
  void HashLoad(const LoadNode* n) {
    BufferUse(n->buffer);
    Exprs(n->indices);
  }
  void HashCall(const CallNode* n) {
    Add(static_cast<size_t>(n->fn));
    Exprs(n->args);
  }
  void HashRamp(const RampNode* n) {
    Add(static_cast<size_t>(n->stride));
    E(n->base);
  }
  void HashBroadcast(const BroadcastNode* n) {
    E(n->value);
  }
  void HashReduce(const ReduceNode* n) {
    Add(static_cast<size_t>(n->combiner));
    size_t mark = vars_.Mark();
    BindAxes(n->axes);
    E(n->source);
    vars_.Restore(mark);
  }

  // ---- statements ----
  void HashLetStmt(const LetStmtNode* n) {
    E(n->value);
    size_t mark = vars_.Mark();
    BindVar(n->var);
    S(n->body);
    vars_.Restore(mark);
  }
  void HashStore(const StoreNode* n) {
    BufferUse(n->buffer);
    Exprs(n->indices);
    E(n->value);
  }
  void HashAlloc(const AllocNode* n) {
    BindBuffer(n->buffer);
  }
  void HashFree(const FreeNode* n) {
    BufferUse(n->buffer);
  }
  void HashIfThenElse(const IfThenElseNode* n) {
    E(n->cond);
    S(n->then_case);
    S(n->else_case);
  }
  void HashFor(const ForNode* n) {
    Add(static_cast<size_t>(n->for_kind));
    E(n->min);
    E(n->extent);
    size_t mark = vars_.Mark();
    BindVar(n->var);
    S(n->body);
    vars_.Restore(mark);
  }
  void HashEvaluate(const EvaluateNode* n) {
    E(n->value);
  }
  void HashPrefetch(const PrefetchNode* n) {
    E(n->target);
  }
  void HashScheduleBlock(const ScheduleBlockNode* n) {
    Add(std::hash<std::string>()(n->name));
    Add(n->is_reduce.size());
    for (bool r : n->is_reduce) Add(r);
    Exprs(n->bindings);
    size_t mark = vars_.Mark();
    BindAxes(n->iter_vars);
    Regions(n->reads);
    Regions(n->writes);
    S(n->init);
    S(n->body);
    vars_.Restore(mark);
  }
  void HashSeq(const SeqNode* n) {
    Add(n->stmts.size());
    for (const Stmt& s : n->stmts) S(s);
  }

  size_t h_ = 0xf0;
  ScopedMap<const VarNode*, size_t> vars_;
  size_t next_var_ = 0;
  std::unordered_map<const BufferNode*, size_t> buffers_;
  size_t next_buffer_ = 0;
};

}  // namespace

bool StructuralEqual(const Expr& a, const Expr& b) {
  return Comparer().Eq(a, b);
}
bool StructuralEqual(const Stmt& a, const Stmt& b) {
  return Comparer().Eq(a, b);
}
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b) {
  return Comparer().Eq(a, b);
}
size_t StructuralHash(const PrimFunc& f) {
  return Hasher().Hash(f);
}

}  // namespace kiln::loop
