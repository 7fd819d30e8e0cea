// RemoveTrivialLoops: loops that run once become their body, loops that never run disappear.
//
//   before:  for i in [0, 1) {                after:  for j in [0, 16) {
//              for j in [0, 16) {                       out[j] = a[j] + b[0, j]
//                out[i * 16 + j] = a[j] + b[i, j]      }
//              }
//            }
//            for k in [0, 0) { out[k] = 0.0f }
//
// A statement pass: whether a loop is trivial depends on the loop alone (its extent), and the
// rewrite replaces that one statement. The adaptor is post-order, so nested trivial loops
// collapse from the inside out in one run.
//
// Rules:
//  - extent 1 (a constant): the body, with the loop variable replaced by `min` everywhere, buffer
//    shapes included. The loop.h helpers fold what becomes constant (`i * 16` with i = 0 is 0);
//    LoopSimplify canonicalizes the rest. Loops bound to a GPU block or thread index are kept:
//    for them the loop is also the launch configuration a GPU code generator reads.
//  - extent provably <= 0: removed, whatever its kind. "Provably" means from the extent
//    expression alone: a constant, or min/max/+ of expressions with constant upper bounds
//    (`min(n, 0)`). Anything that needs the range of a variable is left alone: the pass has no
//    context.
//  - a loop whose body is empty (every loop in it was removed) is removed too.
// A removed statement becomes an empty Seq rather than null, because it may be the body of a
// loop, a let or a branch, where null is not allowed; Seq() flattens it away inside a block.
#include "ir/loop/loop_visitor.h"
#include "passes/loop_pass.h"

namespace kiln {

namespace {

using loop::Expr;
using loop::Stmt;

// An upper bound of integer expression `e` that its constants alone give.
bool ConstUpperBound(const Expr& e, int64_t* ub) {
  if (loop::IsConstInt(e, ub)) return true;
  const loop::BinaryNode* b = loop::AsBinary(e);
  if (!b) return false;
  int64_t x, y;
  bool has_x = ConstUpperBound(b->a, &x), has_y = ConstUpperBound(b->b, &y);
  switch (b->op) {
    case loop::BinaryOp::kMin:  // bounded by either side
      if (!has_x && !has_y) return false;
      *ub = has_x && has_y ? std::min(x, y) : has_x ? x : y;
      return true;
    case loop::BinaryOp::kMax:
      if (!has_x || !has_y) return false;
      *ub = std::max(x, y);
      return true;
    case loop::BinaryOp::kAdd:
      return has_x && has_y && !__builtin_add_overflow(x, y, ub);
    default:
      return false;
  }
}

bool IsGpuBinding(loop::ForKind k) {
  switch (k) {
    case loop::ForKind::kGpuBlockX:
    case loop::ForKind::kGpuBlockY:
    case loop::ForKind::kGpuBlockZ:
    case loop::ForKind::kGpuThreadX:
    case loop::ForKind::kGpuThreadY:
    case loop::ForKind::kGpuThreadZ:
      return true;
    default:
      return false;
  }
}

bool IsEmpty(const Stmt& s) {
  const loop::SeqNode* seq = loop::AsSeq(s);
  return seq && seq->stmts.empty();
}

Stmt RemoveTrivialLoop(const Stmt& s) {
  const loop::ForNode* f = loop::AsFor(s);
  if (!f) return s;
  int64_t bound;
  if (IsEmpty(f->body) || (ConstUpperBound(f->extent, &bound) && bound <= 0)) return loop::Seq({});
  if (loop::IsConstInt(f->extent, &bound) && bound == 1 && !IsGpuBinding(f->for_kind))
    return loop::Substitute(f->body, f->var, f->min);
  return s;
}

}  // namespace

void RegisterRemoveTrivialLoopsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "RemoveTrivialLoops",
      .opt_level = 0,
      .required = {},
      .options = {},
      .doc = "replace loops of extent 1 by their body and remove loops that never run",
      .create =
          [](const Attrs& o) {
            return CreateLoopStmtPass(
                PassInfo{"RemoveTrivialLoops", 0, {}},
                [](const Stmt& s, const PassContext&) { return RemoveTrivialLoop(s); }, o);
          },
  });
}

}  // namespace kiln
