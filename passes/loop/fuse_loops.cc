// FuseLoops: neighbouring loops over the same rows become one loop, and a kernel-local buffer
// that only that loop uses shrinks to the one row an iteration needs.
//
//   before:  alloc t: f32[128, 768]               after:  for i in [0, 128) {
//            for i in [0, 128) {                            alloc t: f32[1, 768]
//              for k in [0, 768) {                          for k in [0, 768) {
//                t[i, k] = f(x[i, k])                         t[0, k] = f(x[i, k])
//              }                                            }
//            }                                              alloc acc: f64[1]
//            for i2 in [0, 128) {                           ... acc += t[0, k] ...
//              alloc acc: f64[1]                            mean[i] = acc[0] / 768
//              ... acc += t[i2, k] ...                      for k in [0, 768) {
//              mean[i2] = acc[0] / 768                        out[i, k] = t[0, k] - mean[i]
//            }                                              }
//            for i3 in [0, 128) {                           free t
//              for k in [0, 768) {                        }
//                out[i3, k] = t[i3, k] - mean[i3]
//              }
//            }
//            free t
//
// Why: a normalization or a softmax lowers to several passes over its rows (a producer
// computed once, a max or mean, a sum, the output), each a loop over the rows. Run one after
// the other, each pass streams the whole tensor through the caches, and each parallel loop
// costs a fork and join; fused, a row is computed, reduced and written while it sits in L1,
// and one parallel loop hands out whole rows.
//
// A function pass, top down: fusing two loops puts their inner loops next to each other, and
// those may fuse in turn (the batch loops of a [batch, seq, d] layer norm, then its seq loops);
// a buffer moved into a loop may then shrink along the next loop's row too.
//
// Fusing. Two serial loops that follow each other in a block, with the same min and extent,
// become one (the second's variable renamed to the first's), when every buffer that one of them
// stores to and the other accesses is accessed, by every load and store in both, at an index
// list whose dimension d is the loop's own variable, the same d throughout: iteration i of
// either then touches only row i of that buffer, so running the second's iteration i right
// after the first's computes the same values. Buffers allocated inside either body are private
// to it. Repeated left to right, so a run of loops becomes one. Two loops that only reduce (no
// store moves with the loop variable) fuse across the statements between them where those can
// move above or below the pair (Fuser::Between): a layer norm's sums over one row.
//
// Shrinking. A buffer allocated and freed in a block, and accessed only inside one serial loop
// of that block, at index lists whose dimension d is that loop's variable (one d for all), is
// allocated inside the loop instead, with extent 1 along d and index 0 there. Each iteration
// writes its row before it reads it (the fusing rule, or the loop's own order), so one row of
// storage serves them all; a row small enough lives on the stack.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Access;
using loop::Buffer;
using loop::BufferNode;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::VarNode;

// The flat element count of one row along dimension 0 of `b` (its stride there), when every
// other dimension's elements lie inside it: nullopt for symbolic shapes or strides.
std::optional<int64_t> RowSize(const BufferNode& b) {
  if (b.shape.size() < 2) return std::nullopt;
  int64_t row = 1, reach = 0;
  for (size_t d = b.shape.size(); d-- > 1;) {
    int64_t n = 0, stride = row;
    if (!loop::IsConstInt(b.shape[d], &n) || n < 1) return std::nullopt;
    if (!b.strides.empty() && (!loop::IsConstInt(b.strides[d], &stride) || stride < 0))
      return std::nullopt;
    reach += (n - 1) * stride;
    row = b.strides.empty() ? row * n : row;
  }
  int64_t s0 = row;
  if (!b.strides.empty() && !loop::IsConstInt(b.strides[0], &s0)) return std::nullopt;
  if (reach >= s0) return std::nullopt;
  return s0;
}

// Whether the single flat index `e` into `b` stays in row `v` of dimension 0: it is
// `row_size * v + r` with every value of r, given `ranges`, in [0, row_size). CollapseLoops and
// TileLoops write a GEMM's reads of an im2col buffer this way: `cols[n * 36864 + kk * 64 + j]`.
bool FlatRowAccess(const BufferNode& b, const Expr& e, const loop::Var& v,
                   const loop::VarIntervals& ranges) {
  std::optional<int64_t> row = RowSize(b);
  if (!row || loop::AffineCoefficient(e, v.get()) != *row) return false;
  std::optional<loop::Interval> r =
      loop::IntervalOf(loop::Substitute(e, v, loop::IntImm(0)), ranges);
  return r && r->min >= 0 && r->max < *row;
}

// The dimension that is exactly `v` in every index list of `lists` (or, for dimension 0, each
// list that is one flat index keeps to row v: FlatRowAccess), if one is.
std::optional<size_t> RowDim(const BufferNode& b,
                             const std::vector<const std::vector<Expr>*>& lists,
                             const std::vector<loop::Var>& vars, const loop::VarIntervals& ranges) {
  if (lists.empty()) return std::nullopt;
  const size_t rank = b.shape.size();
  for (size_t d = 0; d < rank; ++d) {
    bool all = true;
    for (size_t k = 0; k < lists.size() && all; ++k) {
      const std::vector<Expr>& idx = *lists[k];
      if (idx.size() == rank)
        all = idx[d].get() == static_cast<const loop::ExprNode*>(vars[k].get());
      else
        all = d == 0 && idx.size() == 1 && FlatRowAccess(b, idx[0], vars[k], ranges);
    }
    if (all) return d;
  }
  return std::nullopt;
}

std::vector<Access> Accesses(const Stmt& s) {
  loop::AccessScanner scan;
  scan.VisitStmt(s);
  return scan.accesses;
}

// The fusing rule of the file comment for serial loops `a` then `b`.
bool CanFuse(const loop::ForNode* a, const loop::ForNode* b) {
  if (a->for_kind != ForKind::kSerial || b->for_kind != ForKind::kSerial) return false;
  if (!loop::StructuralEqual(a->min, b->min) || !loop::StructuralEqual(a->extent, b->extent))
    return false;
  std::vector<Access> in_a = Accesses(a->body), in_b = Accesses(b->body);
  // The values of the variables bound inside either body, for flat indices (RowDim).
  loop::VarIntervals ranges = loop::LoopIntervals(b->body, loop::LoopIntervals(a->body));
  std::set<const BufferNode*> stored_a, stored_b, seen_a, seen_b;
  for (const Access& x : in_a) (x.store ? stored_a : seen_a).insert(x.buffer);
  for (const Access& x : in_b) (x.store ? stored_b : seen_b).insert(x.buffer);
  seen_a.insert(stored_a.begin(), stored_a.end());
  seen_b.insert(stored_b.begin(), stored_b.end());
  for (const BufferNode* buf : seen_a) {
    if (!seen_b.count(buf) || (!stored_a.count(buf) && !stored_b.count(buf))) continue;
    std::vector<const std::vector<Expr>*> lists;
    std::vector<loop::Var> vars;
    for (const Access& x : in_a)
      if (x.buffer == buf) lists.push_back(x.indices), vars.push_back(a->var);
    for (const Access& x : in_b)
      if (x.buffer == buf) lists.push_back(x.indices), vars.push_back(b->var);
    if (!RowDim(*buf, lists, vars, ranges)) return false;
  }
  return true;
}

// The buffers a statement reads and writes (allocating or freeing one counts as a write).
class Effects : public loop::AccessScanner {
 public:
  explicit Effects(const Stmt& s) {
    VisitStmt(s);
    for (const Access& x : accesses) (x.store ? writes : reads).insert(x.buffer);
  }
  std::set<const BufferNode*> reads, writes;

 protected:
  void VisitAlloc(const loop::AllocNode* n, const Stmt& self) override {
    writes.insert(n->buffer.get());
    loop::AccessScanner::VisitAlloc(n, self);
  }
  void VisitFree(const loop::FreeNode* n, const Stmt& self) override {
    writes.insert(n->buffer.get());
    loop::AccessScanner::VisitFree(n, self);
  }
};

bool Meet(const std::set<const BufferNode*>& x, const std::set<const BufferNode*>& y) {
  for (const BufferNode* b : x)
    if (y.count(b)) return true;
  return false;
}

// Whether loop `f` only reduces: no store inside it moves with its variable. Loops with
// statements between them fuse only then: an elementwise loop that stores a row keeps its own
// loop, which VectorizeLoops turns into vectors whole (a reduction fused into it kept the
// SiLU of a SiLU -> LayerNorm chain scalar: 48 -> 113 us).
bool OnlyReduces(const loop::ForNode* f) {
  for (const Access& x : Accesses(f->body))
    if (x.store)
      for (const Expr& i : *x.indices)
        if (loop::Mentions(i, f->var.get())) return false;
  return true;
}

// Whether two statements may run in either order: neither writes what the other touches.
bool Commute(const Effects& s, const Effects& t) {
  return !Meet(s.writes, t.reads) && !Meet(s.writes, t.writes) && !Meet(t.writes, s.reads);
}

// Replaces one buffer by its one-row version: `from` becomes `to`, index d becomes 0 (in a flat
// index into dimension 0's rows, the row variable `v` becomes 0).
class Shrink : public loop::Mutator {
 public:
  Shrink(const BufferNode* from, Buffer to, size_t d, loop::Var v)
      : from_(from), to_(std::move(to)), d_(d), v_(std::move(v)) {}

 protected:
  Expr MutateLoad(const loop::LoadNode* n, const Expr& self) override {
    if (n->buffer.get() != from_) return loop::Mutator::MutateLoad(n, self);
    return loop::Load(to_, Row(n->indices));
  }
  Stmt MutateStore(const loop::StoreNode* n, const Stmt& self) override {
    if (n->buffer.get() != from_) return loop::Mutator::MutateStore(n, self);
    return loop::Store(to_, Row(n->indices), MutateExpr(n->value));
  }

 private:
  std::vector<Expr> Row(const std::vector<Expr>& idx) {
    if (idx.size() == 1 && to_->shape.size() > 1)
      return {loop::Substitute(MutateExpr(idx[0]), v_, loop::IntImm(0))};
    std::vector<Expr> out;
    for (size_t k = 0; k < idx.size(); ++k)
      out.push_back(k == d_ ? loop::IntImm(0) : MutateExpr(idx[k]));
    return out;
  }
  const BufferNode* from_;
  Buffer to_;
  size_t d_;
  loop::Var v_;
};

// Loads of a one-element buffer replaced by a value.
class ForwardValue : public loop::Mutator {
 public:
  ForwardValue(const BufferNode* buffer, Expr value) : buffer_(buffer), value_(std::move(value)) {}

 protected:
  Expr MutateLoad(const loop::LoadNode* n, const Expr& self) override {
    if (n->buffer.get() == buffer_) return value_;
    return loop::Mutator::MutateLoad(n, self);
  }

 private:
  const BufferNode* buffer_;
  Expr value_;
};

// The buffers a statement frees.
class FreeScanner : public loop::Visitor {
 public:
  std::vector<const BufferNode*> freed;

 protected:
  void VisitFree(const loop::FreeNode* n, const Stmt& self) override {
    freed.push_back(n->buffer.get());
    loop::Visitor::VisitFree(n, self);
  }
};

// Counts the nodes of an expression tree, up to a bound (a DAG shared many times over would
// take exponential time to walk in full).
class NodeCount : public loop::Visitor {
 public:
  explicit NodeCount(int bound) : bound_(bound) {}
  void VisitExpr(const Expr& e) override {
    if (count > bound_) return;
    ++count;
    loop::Visitor::VisitExpr(e);
  }
  int count = 0;

 private:
  int bound_;
};

// `body` (a loop's body that a one-element buffer was shrunk into) with that buffer's value
// forwarded to its loads, where it is only a name for a value: a block of stores whose first
// access of `b` stores `e` (free of `b`) and whose later accesses of it are loads in the values
// and indices of stores that follow, none of which writes or frees a buffer `e` reads (up to
// the last read), and `e` small where it is read more than once. Then the loads read `e` (LLVM
// computes it once), and the buffer goes: x * sigmoid(x) over a fused x (swish's two reads of
// one value) kept a local store and load in every iteration, which VectorizeLoops does not
// vectorize (it leaves loops holding an alloc scalar), so the exp was a scalar call per
// element.
std::optional<Stmt> ForwardOneElement(const Stmt& body, const BufferNode* b) {
  const loop::SeqNode* seq = loop::AsSeq(body);
  if (!seq) return std::nullopt;
  std::optional<size_t> at;
  Expr value;
  std::set<const BufferNode*> reads;  // the buffers `value` loads
  for (size_t k = 0; k < seq->stmts.size(); ++k) {
    const std::vector<Access> acc = Accesses(seq->stmts[k]);
    const bool uses =
        std::any_of(acc.begin(), acc.end(), [&](const Access& x) { return x.buffer == b; });
    const loop::StoreNode* st = loop::AsStore(seq->stmts[k]);
    if (!at) {
      if (!uses) continue;
      if (!st || st->buffer.get() != b) return std::nullopt;
      const Stmt eval = loop::Evaluate(st->value);  // the accesses point into it
      for (const Access& x : Accesses(eval)) {
        if (x.buffer == b) return std::nullopt;
        reads.insert(x.buffer);
      }
      at = k;
      value = st->value;
      continue;
    }
    // After the store: a statement that reads b is a store, and whatever a statement writes
    // or frees (up to the last that reads b) is not read by the value.
    if (uses && (!st || st->buffer.get() == b)) return std::nullopt;
    FreeScanner frees;  // a freed buffer's storage may be reused
    frees.VisitStmt(seq->stmts[k]);
    bool clobbers = std::any_of(frees.freed.begin(), frees.freed.end(),
                                [&](const BufferNode* f) { return reads.count(f) > 0; });
    for (const Access& x : acc) clobbers = clobbers || (x.store && reads.count(x.buffer));
    if (clobbers)  // harmless only past the last statement that reads b
      for (size_t m = k; m < seq->stmts.size(); ++m)
        for (const Access& y : Accesses(seq->stmts[m]))
          if (y.buffer == b) return std::nullopt;
  }
  if (!at) return std::nullopt;
  // A value read more than once is copied into each read: only small ones, or a chain of
  // such buffers (a lowering's shared values, kept in locals so that they are computed once)
  // would grow exponentially.
  constexpr int kMaxCopiedNodes = 24;
  int loads = 0;
  for (size_t k = *at + 1; k < seq->stmts.size(); ++k)
    for (const Access& x : Accesses(seq->stmts[k])) loads += x.buffer == b ? 1 : 0;
  NodeCount size(kMaxCopiedNodes);
  size.VisitExpr(value);
  if (loads > 1 && size.count > kMaxCopiedNodes) return std::nullopt;
  ForwardValue forward(b, value);
  std::vector<Stmt> out;
  for (size_t k = 0; k < seq->stmts.size(); ++k)
    if (k != *at) out.push_back(k > *at ? forward.MutateStmt(seq->stmts[k]) : seq->stmts[k]);
  return loop::Seq(std::move(out));
}

class Fuser {
 public:
  Stmt Run(const Stmt& s) {
    if (!s) return s;
    if (const loop::SeqNode* seq = loop::AsSeq(s)) return RunSeq(seq->stmts);
    if (const loop::ForNode* f = loop::AsFor(s))
      return loop::For(f->var, f->min, f->extent, f->for_kind, Run(f->body));
    if (const loop::LetStmtNode* l = loop::AsLetStmt(s))
      return loop::LetStmt(l->var, l->value, Run(l->body));
    if (const loop::IfThenElseNode* i = loop::AsIfThenElse(s))
      return loop::IfThenElse(i->cond, Run(i->then_case),
                              i->else_case ? Run(i->else_case) : nullptr);
    return s;
  }

 private:
  Stmt RunSeq(const std::vector<Stmt>& in) {
    // Fuse neighbours, left to right; statements between two loops that would fuse move out
    // of the way where they can (see Between).
    std::vector<Stmt> stmts;
    for (const Stmt& s : in) {
      const loop::ForNode* b = loop::AsFor(s);
      size_t at = stmts.size();
      while (b && at > 0 && !loop::AsFor(stmts[at - 1])) --at;
      const loop::ForNode* a = b && at > 0 ? loop::AsFor(stmts[at - 1]) : nullptr;
      std::optional<std::pair<std::vector<Stmt>, std::vector<Stmt>>> moved;
      if (a && CanFuse(a, b) && (at == stmts.size() || (OnlyReduces(a) && OnlyReduces(b))))
        moved = Between(stmts[at - 1], s,
                        {stmts.begin() + static_cast<std::ptrdiff_t>(at), stmts.end()});
      if (moved) {
        Stmt body_b = loop::Substitute(b->body, b->var, a->var);
        Stmt fused =
            loop::For(a->var, a->min, a->extent, a->for_kind, loop::Seq({a->body, body_b}));
        stmts.resize(at - 1);
        stmts.insert(stmts.end(), moved->first.begin(), moved->first.end());
        stmts.push_back(fused);
        stmts.insert(stmts.end(), moved->second.begin(), moved->second.end());
      } else {
        stmts.push_back(s);
      }
    }
    ShrinkBuffers(stmts);
    for (Stmt& s : stmts) s = Run(s);
    return loop::Seq(std::move(stmts));
  }

  // The statements between loops `a` and `b` that fuse, split into those that go before the
  // fused loop and those after it, or nullopt where some cannot move. One goes before where it
  // commutes with `a` and with each statement already sent after (it then overtakes them),
  // else after where it commutes with `b`. A layer norm's two variance sums (S1 and S2 over
  // the same row, loops of their own around `shift = S1 / n; free S1's accumulator; alloc S2's
  // accumulator; zero it`) then run as one pass over the row, with LLVM interleaving the two
  // sums (llvm_emit_stmt.cc): the SiLU -> LayerNorm chain at 1 x 128 x 768, 1 thread, 48.0 ->
  // 44.6 us, at 8 x 512 x 768 1758 -> 1641 us (min of 3 alternating runs); the encoder's
  // layer norm (rows of 256) 15.4 -> 9.2 us.
  static std::optional<std::pair<std::vector<Stmt>, std::vector<Stmt>>> Between(
      const Stmt& a, const Stmt& b, const std::vector<Stmt>& middle) {
    std::pair<std::vector<Stmt>, std::vector<Stmt>> out;
    if (middle.empty()) return out;
    const Effects ea(a), eb(b);
    std::vector<Effects> after;
    for (const Stmt& m : middle) {
      Effects em(m);
      bool up = Commute(em, ea);
      for (const Effects& d : after) up = up && Commute(d, em);
      if (up) {
        out.first.push_back(m);
      } else if (Commute(em, eb)) {
        out.second.push_back(m);
        after.push_back(std::move(em));
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  // The shrinking rule of the file comment, for the Alloc/Free pairs of this block.
  void ShrinkBuffers(std::vector<Stmt>& stmts) {
    for (size_t a = 0; a < stmts.size(); ++a) {
      const loop::AllocNode* alloc = loop::AsAlloc(stmts[a]);
      if (!alloc) continue;
      const Buffer& buf = alloc->buffer;
      size_t free_at = stmts.size(), user = stmts.size();
      bool ok = true;
      for (size_t k = a + 1; k < stmts.size() && ok; ++k) {
        if (const loop::FreeNode* f = loop::AsFree(stmts[k]); f && f->buffer == buf) {
          free_at = k;
          break;
        }
        bool uses = false;
        for (const Access& x : Accesses(stmts[k])) uses = uses || x.buffer == buf.get();
        if (!uses) continue;
        ok = user == stmts.size();  // a second statement uses it: stays
        user = k;
      }
      if (!ok || free_at == stmts.size() || user == stmts.size()) continue;
      const loop::ForNode* loop = loop::AsFor(stmts[user]);
      if (!loop || loop->for_kind != ForKind::kSerial) continue;
      std::vector<const std::vector<Expr>*> lists;
      std::vector<Access> uses = Accesses(loop->body);
      for (const Access& x : uses)
        if (x.buffer == buf.get()) lists.push_back(x.indices);
      std::optional<size_t> d = RowDim(*buf, lists, std::vector<loop::Var>(lists.size(), loop->var),
                                       loop::LoopIntervals(loop->body));
      if (!d || *d >= buf->shape.size()) continue;
      // A strided buffer keeps its strides: one row of it is as long as one row was.
      std::vector<Expr> shape = buf->shape;
      shape[*d] = loop::IntImm(1);
      Buffer row =
          loop::MakeBuffer(buf->name, buf->dtype, shape, BufferNode::Scope::kLocal, buf->strides);
      Shrink shrink(buf.get(), row, *d, loop->var);
      Stmt body = shrink.MutateStmt(loop->body);
      // f16 and bf16 values are computed in f32 and rounded where they are stored: a forwarded
      // value would skip that rounding.
      const bool rounds = buf->dtype == DType::kFloat16 || buf->dtype == DType::kBFloat16;
      const bool one_element = !rounds && buf->strides.empty() &&
                               std::all_of(shape.begin(), shape.end(), [](const Expr& e) {
                                 int64_t n = 0;
                                 return loop::IsConstInt(e, &n) && n == 1;
                               });
      std::optional<Stmt> forwarded;
      if (one_element) forwarded = ForwardOneElement(body, row.get());
      stmts[user] =
          loop::For(loop->var, loop->min, loop->extent, loop->for_kind,
                    forwarded ? *forwarded : loop::Seq({loop::Alloc(row), body, loop::Free(row)}));
      stmts[free_at] = loop::Seq({});
      stmts[a] = loop::Seq({});
    }
    std::vector<Stmt> kept;
    for (Stmt& s : stmts)
      if (const loop::SeqNode* seq = loop::AsSeq(s); !seq || !seq->stmts.empty()) kept.push_back(s);
    stmts = std::move(kept);
  }
};

}  // namespace

void RegisterFuseLoopsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "FuseLoops",
      .opt_level = 2,
      .required = {},
      .options = {},
      .doc = "fuse neighbouring loops over the same rows and shrink local buffers to one row",
      .create =
          [](const Attrs& o) {
            return CreateLoopFuncPass(
                PassInfo{"FuseLoops", 2, {}},
                [](const loop::PrimFunc& f, const PassContext&) {
                  Fuser fuser;
                  return loop::WithBody(f, fuser.Run(f->body));
                },
                o);
          },
  });
}

}  // namespace kiln
