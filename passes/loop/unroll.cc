// UnrollLoops: replaces small loops by copies of their body, one per iteration.
//
//   before:  for i in [0, n) {                   after:  for i in [0, n) {
//              for j in [0, 3) {                           out[i, 0] = a[i, 0] * 2.0f
//                out[i, j] = a[i, j] * 2.0f                out[i, 1] = a[i, 1] * 2.0f
//              }                                           out[i, 2] = a[i, 2] * 2.0f
//            }                                           }
//
// Which loops (the extent must be a constant in both cases):
//  - loops of kind `unrolled`, whatever their extent and body: the kind is an explicit request;
//  - serial loops that are innermost (no loop and no Alloc in their body) with an extent of at
//    most the config key `unroll.max_extent` (default 4; 0 or less unrolls only `unrolled`
//    loops). A body with an Alloc is left alone because each copy would allocate again.
//  - serial loops of that extent, not innermost, whose variable is divided or taken modulo a
//    constant in the body (v // 2, v % 2) and whose body has no Alloc and no loop other than
//    `unrolled` ones and those of the same kind: each copy folds the division to a constant,
//    where the loop would compute it per iteration. A strided conv's taps (ky, kx in [0, 3),
//    read from its phase-split input at phase ky % 2, row ky // 2) around TileLoops' register
//    tile are such loops.
// Copy k is the body with the loop variable replaced by `min + k`; the loop.h helpers fold the
// constants that result. The copies share the body's binders (a let or an inner loop variable
// appears once per copy, in sibling scopes, which Verify allows) and its buffers.
//
// A function pass, not a statement pass: "innermost" must be judged on the loop as written. The
// statement adaptor is post-order, so it would show an outer loop after its inner loop was
// unrolled, looking innermost, and a nest of small loops would unroll completely (4 x 4 x 4 =
// 64 copies). This pass decides on the way down and unrolls on the way up.
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {

namespace {

using loop::Expr;
using loop::Stmt;

constexpr const char* kMaxExtentKey = "unroll.max_extent";

// Whether `v` appears in an operand of a // or % by a constant somewhere in `s`.
class DividesVar : public loop::Visitor {
 public:
  explicit DividesVar(const loop::VarNode* v) : v_(v) {}
  bool found = false;

 protected:
  void VisitBinary(const loop::BinaryNode* n, const Expr& self) override {
    if ((n->op == loop::BinaryOp::kFloorDiv || n->op == loop::BinaryOp::kFloorMod) &&
        loop::IsConstInt(n->b) && loop::Mentions(n->a, v_))
      found = true;
    loop::Visitor::VisitBinary(n, self);
  }

 private:
  const loop::VarNode* v_;
};

// Whether every loop in `s` unrolls (of kind `unrolled`, small and innermost, or a small loop
// whose variable is divided: the nest of taps unrolls as a whole), and `s` allocates nothing.
bool OnlyUnrollableLoops(const Stmt& s, int64_t max_extent);

bool DividedSmallLoop(const loop::ForNode* n, int64_t max_extent) {
  int64_t extent;
  if (n->for_kind != loop::ForKind::kSerial || !loop::IsConstInt(n->extent, &extent) ||
      extent > max_extent || !OnlyUnrollableLoops(n->body, max_extent))
    return false;
  DividesVar d(n->var.get());
  d.VisitStmt(n->body);
  return d.found;
}

bool OnlyUnrollableLoops(const Stmt& s, int64_t max_extent) {
  class Check : public loop::Visitor {
   public:
    explicit Check(int64_t m) : max_extent_(m) {}
    bool ok = true;

   protected:
    void VisitAlloc(const loop::AllocNode*, const Stmt&) override { ok = false; }
    void VisitFor(const loop::ForNode* n, const Stmt& self) override {
      int64_t extent;
      const bool small_innermost =
          n->for_kind == loop::ForKind::kSerial && loop::IsConstInt(n->extent, &extent) &&
          extent <= max_extent_ &&
          !loop::ContainsStmtKind(n->body, {loop::StmtKind::kFor, loop::StmtKind::kAlloc});
      if (n->for_kind != loop::ForKind::kUnrolled && !small_innermost &&
          !DividedSmallLoop(n, max_extent_)) {
        ok = false;
        return;
      }
      loop::Visitor::VisitFor(n, self);
    }

   private:
    int64_t max_extent_;
  };
  Check c(max_extent);
  c.VisitStmt(s);
  return c.ok;
}

class Unroller : public loop::Mutator {
 public:
  explicit Unroller(int64_t max_extent) : max_extent_(max_extent) {}

 protected:
  Stmt MutateFor(const loop::ForNode* n, const Stmt& self) override {
    bool small_innermost =
        n->for_kind == loop::ForKind::kSerial &&
        !loop::ContainsStmtKind(n->body, {loop::StmtKind::kFor, loop::StmtKind::kAlloc});
    const bool divided = max_extent_ > 0 && DividedSmallLoop(n, max_extent_);
    Stmt rebuilt = loop::Mutator::MutateFor(n, self);
    const loop::ForNode* f = loop::AsFor(rebuilt);
    int64_t extent;
    if (!loop::IsConstInt(f->extent, &extent)) return rebuilt;
    bool unroll = f->for_kind == loop::ForKind::kUnrolled ||
                  ((small_innermost || divided) && extent <= max_extent_);
    if (!unroll) return rebuilt;
    std::vector<Stmt> copies;
    for (int64_t k = 0; k < extent; ++k) {
      copies.push_back(loop::Substitute(f->body, f->var, loop::Add(f->min, loop::IntImm(k))));
    }
    return loop::Seq(std::move(copies));  // empty when the loop never runs
  }

 private:
  const int64_t max_extent_;
};

loop::PrimFunc UnrollLoops(const loop::PrimFunc& f, const PassContext& ctx) {
  Unroller unroller(ctx.GetConfigInt(kMaxExtentKey));
  return loop::WithBody(f, unroller.MutateStmt(f->body));
}

}  // namespace

void RegisterUnrollLoopsPass(PassRegistry& r) {
  RegisterPassConfig(kMaxExtentKey, AttrKind::kInt, int64_t{4},
                     "UnrollLoops unrolls innermost serial loops with a constant extent up to "
                     "this (0 or less: only loops of kind `unrolled`)");
  r.Register(PassRegistration{
      .name = "UnrollLoops",
      .opt_level = 2,
      .required = {},
      .options = {},
      .doc = "replace unrolled loops and small innermost serial loops by copies of their body",
      .create =
          [](const Attrs& o) {
            return CreateLoopFuncPass(PassInfo{"UnrollLoops", 2, {}}, UnrollLoops, o);
          },
  });
}

}  // namespace kiln
