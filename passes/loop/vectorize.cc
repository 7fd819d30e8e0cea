// VectorizeLoops: the innermost loop over the contiguous (last) dimension becomes vector code.
//
//   before:  for i in [0, n) {
//              out[i] = max(a[i] + b[0], 0.0f)
//            }
//   after:   for i_vec in [0, n // 8) {
//              out[ramp(i_vec * 8, 1, 8)] =
//                  max(a[ramp(i_vec * 8, 1, 8)] + broadcast(b[0], 8), broadcast(0.0f, 8))
//            }
//            for i in [n // 8 * 8, n // 8 * 8 + n % 8) {
//              out[i] = max(a[i] + b[0], 0.0f)
//            }
//
// A statement pass: whether a loop can be vectorized, and how, depends only on the loop and its
// body (innermost loops have no loops inside them), and the rewrite replaces that one statement.
//
// Which loops, and which path they take. Only serial and parallel loops whose body holds no loop
// (the innermost ones) are considered, and only when their iterations are independent: every
// buffer the body stores to is accessed (loaded and stored) at one and the same index list, and
// that list holds an index `c * i + r` with c != 0 and r free of i, so two iterations never
// touch one element of it (more generally: in some dim every access of the buffer has such an
// index, one c and one r up to constant offsets at least |c| times the extent apart, whatever
// its other dims hold). Other loops (a reduction into `acc[0]`, a stencil reading
// `t[i + 1]` that it also writes) stay as they are: running their iterations as lanes would
// change the result, and LLVM still vectorizes the reductions it can prove safe.
//  - The explicit path, which gives predictable speed: a body of straight-line statements
//    (stores, evaluates, lets of values free of i; no ifs, allocs or vector values; select is
//    fine) where every access that depends on i has `i + r` (coefficient 1, r free of i) as its
//    last index and i nowhere else, so its lanes are contiguous (a load may have a coefficient
//    of 2 to 4: a strided load, see AccessesContiguous). The loop splits into a main loop
//    of extent // W iterations whose body works on W lanes (i becomes ramp(base, 1, W), values
//    that do not depend on i are broadcast where they meet vectors, accesses that do not depend
//    on i stay scalar loads), and a tail loop for the extent % W iterations left
//    (symbolic extents too). The main loop keeps the loop's kind (a parallel loop hands out
//    vector iterations); the tail is serial. A constant extent below W takes the largest power
//    of two that fits as its width, and so does a constant tail of two or more (in turn: 8 + 4 +
//    2 + 1 lanes); trip-count-1 loops are not made (the body is emitted once). A constant tail
//    that would take two or more such pieces, after at least one whole vector, is instead one
//    whole vector ending at the loop's end when the body loads no buffer it stores (running a
//    lane twice then stores the same value twice).
//  - The fallback: any other independent serial body (a strided or transposed access, an
//    indirect index, an if, a let of a value that depends on i) is marked kVectorized, which
//    the LLVM code generator turns into loop-vectorize metadata so LLVM decides the shape. A
//    parallel loop on this path is left parallel (a loop has one kind), and LLVM may still
//    vectorize each chunk.
//
// W is the config key `vectorize.width` when set (0 or 1 turns the pass off); otherwise one
// vector register of f32 for the target (`target.vector_bits` / 32: 16 with AVX-512, 8 with
// AVX2), or 8 when the target is not known.
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Access;
using loop::AffineCoefficient;
using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Mentions;
using loop::SameIndices;
using loop::Stmt;
using loop::VarNode;

constexpr char kWidthKey[] = "vectorize.width";
constexpr int64_t kMaxWidth = 64;

using loop::VarSet;

// What the vectorizer needs to know about a loop body.
struct BodyInfo {
  std::vector<Access> accesses;
  VarSet variant;  // the loop variable and the lets whose values depend on it
  bool has_loop = false;
  bool straight_line = true;  // no if, alloc, free or schedule block
  bool scalar = true;         // no vector values and no reductions
  bool variant_let = false;   // a let binds a value that depends on the loop variable
};

class BodyScanner : public loop::AccessScanner {
 public:
  explicit BodyScanner(BodyInfo* info) : info_(info) {}

 protected:
  void VisitExpr(const Expr& e) override {
    if (e && (e->lanes != 1 || e->kind == loop::ExprKind::kReduce)) info_->scalar = false;
    loop::Visitor::VisitExpr(e);
  }
  void VisitLetStmt(const loop::LetStmtNode* n, const Stmt& self) override {
    // Lets are visited in order, so a let that reads an earlier variant let is variant too.
    if (Mentions(n->value, info_->variant)) {
      info_->variant.insert(n->var.get());
      info_->variant_let = true;
    }
    loop::Visitor::VisitLetStmt(n, self);
  }
  void VisitFor(const loop::ForNode*, const Stmt&) override { info_->has_loop = true; }
  void VisitScheduleBlock(const loop::ScheduleBlockNode*, const Stmt&) override {
    info_->has_loop = true;
  }
  void VisitIfThenElse(const loop::IfThenElseNode* n, const Stmt& self) override {
    info_->straight_line = false;
    loop::Visitor::VisitIfThenElse(n, self);
  }
  void VisitAlloc(const loop::AllocNode*, const Stmt&) override { info_->straight_line = false; }
  void VisitFree(const loop::FreeNode*, const Stmt&) override { info_->straight_line = false; }
  // A prefetch names one element: the loop is left scalar rather than prefetch a vector.
  void VisitPrefetch(const loop::PrefetchNode*, const Stmt&) override {
    info_->straight_line = false;
  }

 private:
  BodyInfo* info_;
};

// Whether the iterations of the loop over `v` (of `extent` iterations, when constant) are
// independent (see the file comment): for each buffer the body stores to, some dim d where every
// access of that buffer has an index affine in v with one nonzero coefficient c, all of them one
// base plus constant offsets that are equal or at least |c| * extent apart. Iteration i then
// touches, in dim d, only base + offset + c * i for those offsets: no two iterations touch one
// element, whatever the other dims hold. (A Winograd transform stores its 36 values at offsets
// that CollapseLoops makes multiples of C x M along one flat loop, or at index lists that
// differ in a constant first index.)
bool IterationsIndependent(const BodyInfo& info, const VarNode* v, std::optional<int64_t> extent) {
  std::set<const loop::BufferNode*> stored;
  for (const Access& a : info.accesses)
    if (a.store) stored.insert(a.buffer);
  for (const loop::BufferNode* b : stored) {
    std::vector<const std::vector<Expr>*> lists;
    for (const Access& a : info.accesses)
      if (a.buffer == b) lists.push_back(a.indices);
    bool separated = false;
    for (size_t d = 0; d < lists.front()->size() && !separated; ++d) {
      const std::optional<int64_t> c = AffineCoefficient((*lists.front())[d], v, info.variant);
      if (!c || *c == 0 || *c == std::numeric_limits<int64_t>::min()) continue;
      const auto [base, first] = loop::SplitConstOffset((*lists.front())[d]);
      separated = true;
      for (const std::vector<Expr>* l : lists) {
        if (l->size() != lists.front()->size()) {
          separated = false;
          break;
        }
        if (loop::StructuralEqual((*l)[d], (*lists.front())[d])) continue;
        const auto [other_base, offset] = loop::SplitConstOffset((*l)[d]);
        int64_t apart = 0, reach = 0;
        separated = extent && AffineCoefficient((*l)[d], v, info.variant) == c &&
                    loop::StructuralEqual(other_base, base) &&
                    !__builtin_sub_overflow(offset, first, &apart) &&
                    apart != std::numeric_limits<int64_t>::min() &&
                    !__builtin_mul_overflow(std::abs(*c), *extent, &reach) &&
                    std::abs(apart) >= reach;
        if (!separated) break;
      }
    }
    if (!separated) return false;
  }
  return true;
}

// Whether `e` is a multiple of c > 0 from its form alone: a constant multiple, a product with
// such a factor, a sum or difference of such.
bool IsMultipleOf(const Expr& e, int64_t c) {
  int64_t v = 0;
  if (loop::IsConstInt(e, &v)) return v % c == 0;
  const loop::BinaryNode* b = loop::AsBinary(e);
  if (!b) return false;
  switch (b->op) {
    case loop::BinaryOp::kMul:
      return IsMultipleOf(b->a, c) || IsMultipleOf(b->b, c);
    case loop::BinaryOp::kAdd:
    case loop::BinaryOp::kSub:
      return IsMultipleOf(b->a, c) && IsMultipleOf(b->b, c);
    default:
      return false;
  }
}

// Rewrites a body to work on `lanes` consecutive iterations: the loop variable becomes
// `ramp(base, 1, lanes)`. Values that do not depend on it stay scalar and are broadcast where
// they meet vector operands; index arithmetic on ramps folds into ramps, so indices stay in
// the `ramp(base, 1, lanes)` form that code generators turn into plain vector accesses.
class Vectorizer : public loop::Mutator {
 public:
  Vectorizer(const VarNode* var, const Expr& base, int lanes)
      : var_(var), ramp_(loop::Ramp(base, 1, lanes)), lanes_(lanes) {}

 protected:
  Expr MutateVar(const VarNode* n, const Expr& self) override { return n == var_ ? ramp_ : self; }

  Expr MutateBinary(const loop::BinaryNode* n, const Expr& self) override {
    Expr a = MutateExpr(n->a);
    Expr b = MutateExpr(n->b);
    if (a == n->a && b == n->b) return self;
    if (a->lanes == b->lanes) return loop::MakeBinary(n->op, a, b);
    if (Expr folded = FoldRamp(n->op, a, b)) return folded;
    return loop::MakeBinary(n->op, Widen(a), Widen(b));
  }

  Expr MutateSelect(const loop::SelectNode* n, const Expr& self) override {
    Expr c = MutateExpr(n->cond);
    Expr t = MutateExpr(n->true_value);
    Expr f = MutateExpr(n->false_value);
    if (c == n->cond && t == n->true_value && f == n->false_value) return self;
    // A scalar condition may choose between vectors; a vector one needs vector values.
    if (c->lanes > 1 || t->lanes != f->lanes) {
      t = Widen(t);
      f = Widen(f);
    }
    return loop::Select(c, t, f);
  }

  Expr MutateCall(const loop::CallNode* n, const Expr& self) override {
    bool changed = false;
    std::vector<Expr> args = MutateExprs(n->args, &changed);
    if (!changed) return self;
    for (Expr& a : args) a = Widen(a);
    return loop::Call(n->fn, std::move(args));
  }

  Stmt MutateStore(const loop::StoreNode* n, const Stmt& self) override {
    bool changed = false;
    std::vector<Expr> idx = MutateExprs(n->indices, &changed);
    Expr value = MutateExpr(n->value);
    if (!changed && value == n->value) return self;
    int lanes = 1;
    for (const Expr& e : idx) lanes = std::max(lanes, e->lanes);
    if (lanes > 1) value = Widen(value);
    return loop::Store(n->buffer, std::move(idx), std::move(value));
  }

 private:
  Expr Widen(const Expr& e) const { return e->lanes == lanes_ ? e : loop::Broadcast(e, lanes_); }

  // ramp +- scalar, scalar + ramp, ramp +- ramp and ramp * constant as one ramp; null otherwise.
  Expr FoldRamp(loop::BinaryOp op, const Expr& a, const Expr& b) const {
    const loop::RampNode* ra = loop::AsRamp(a);
    const loop::RampNode* rb = loop::AsRamp(b);
    auto ramp = [&](Expr base, int64_t stride) {
      return stride == 0 ? loop::Broadcast(base, lanes_) : loop::Ramp(base, stride, lanes_);
    };
    int64_t c;
    switch (op) {
      case loop::BinaryOp::kAdd:
        if (ra && rb) return ramp(loop::Add(ra->base, rb->base), ra->stride + rb->stride);
        if (ra && b->lanes == 1) return ramp(loop::Add(ra->base, b), ra->stride);
        if (rb && a->lanes == 1) return ramp(loop::Add(a, rb->base), rb->stride);
        return nullptr;
      case loop::BinaryOp::kSub:
        if (ra && rb) return ramp(loop::Sub(ra->base, rb->base), ra->stride - rb->stride);
        if (ra && b->lanes == 1) return ramp(loop::Sub(ra->base, b), ra->stride);
        if (rb && a->lanes == 1) return ramp(loop::Sub(a, rb->base), -rb->stride);
        return nullptr;
      case loop::BinaryOp::kMul:
        if (ra && loop::IsConstInt(b, &c)) return ramp(loop::Mul(ra->base, b), ra->stride * c);
        if (rb && loop::IsConstInt(a, &c)) return ramp(loop::Mul(a, rb->base), rb->stride * c);
        return nullptr;
      case loop::BinaryOp::kFloorDiv:
      case loop::BinaryOp::kFloorMod:
        // ramp(m, 1, W) // c and % c, W dividing both m and c: the lanes lie in one run of c
        // (m % c <= c - W), so // is the same for all of them and % steps by 1 (a row-split
        // read, see CollapseLoops).
        if (ra && ra->stride == 1 && loop::IsConstInt(b, &c) && c > 0 && c % lanes_ == 0 &&
            IsMultipleOf(ra->base, lanes_))
          return op == loop::BinaryOp::kFloorDiv ? loop::FloorDiv(ra->base, b)  // stays scalar
                                                 : ramp(loop::FloorMod(ra->base, b), 1);
        return nullptr;
      default:
        return nullptr;
    }
  }

  const VarNode* var_;
  Expr ramp_;
  int lanes_;
};

// Whether every access that depends on `v` reads or writes lanes a code generator loads or
// stores as whole vectors: `v + r` in the last index and `v` in no other, or for a load `c * v
// + r` with c from 2 to kMaxLoadStride (the lanes of a strided load are picked out of the span
// that holds them, as LLVM's code generator does; a stride-2 phase of a padded input, a 2x2
// pool's taps). A load's index that is not affine in `v` counts when it folds to such a ramp
// at `width` lanes (a row-split read: `(v + r) // c` and `%` with width dividing c and r).
// Stores must depend on `v` (checked by IterationsIndependent).
constexpr int64_t kMaxLoadStride = 4;
bool AccessesContiguous(const BodyInfo& info, const loop::ForNode* n, int64_t width) {
  const VarNode* v = n->var.get();
  for (const Access& a : info.accesses) {
    const std::vector<Expr>& idx = *a.indices;
    bool depends = false;
    for (const Expr& e : idx) depends = depends || Mentions(e, info.variant);
    if (!depends) continue;
    for (size_t k = 0; k + 1 < idx.size(); ++k)
      if (Mentions(idx[k], info.variant)) return false;
    std::optional<int64_t> c = AffineCoefficient(idx.back(), v, info.variant);
    if (!c && !a.store) {
      // The lanes as the vector loop will make them (VectorizeExplicitly's base).
      Expr base = loop::Add(n->min, loop::Mul(loop::MakeVar("v"), loop::IntImm(width)));
      Expr lanes = Vectorizer(v, base, static_cast<int>(width)).MutateExpr(idx.back());
      if (const loop::RampNode* r = loop::AsRamp(lanes)) c = r->stride;
    }
    if (!c || (*c != 1 && (a.store || *c < 2 || *c > kMaxLoadStride))) return false;
  }
  return true;
}

// Whether `e` is never negative, from its form alone: constants >= 0, variables (extents and
// shape symbols), and +, *, //, min and max of such. A difference may be negative.
bool NeverNegative(const Expr& e) {
  int64_t c = 0;
  if (loop::IsConstInt(e, &c)) return c >= 0;
  if (e->kind == loop::ExprKind::kVar) return true;
  const loop::BinaryNode* b = loop::AsBinary(e);
  if (!b) return false;
  switch (b->op) {
    case loop::BinaryOp::kAdd:
    case loop::BinaryOp::kMul:
    case loop::BinaryOp::kFloorDiv:
    case loop::BinaryOp::kMin:
      return NeverNegative(b->a) && NeverNegative(b->b);
    case loop::BinaryOp::kMax:
      return NeverNegative(b->a) || NeverNegative(b->b);
    default:
      return false;
  }
}

// Whether running an iteration of the body twice stores what it stored the first time: it
// loads no buffer it stores to (and a straight-line body has no other effect).
bool Idempotent(const BodyInfo& info) {
  std::set<const loop::BufferNode*> stored;
  for (const Access& a : info.accesses)
    if (a.store) stored.insert(a.buffer);
  for (const Access& a : info.accesses)
    if (!a.store && stored.count(a.buffer)) return false;
  return true;
}

// Splits the loop `n` into a vector main loop of `width` lanes and a scalar tail (file comment).
// A loop of negative extent runs no iterations; split as it is, its floor-divided main count
// would be negative (no iterations) but its floor-mod tail width - 1: the extent is clamped at
// 0 first unless its form says it cannot be negative.
Stmt VectorizeExplicitly(const loop::ForNode* n, int64_t width, const BodyInfo& info) {
  Expr w = loop::IntImm(width);
  Expr extent = NeverNegative(n->extent) ? n->extent : loop::Max(n->extent, loop::IntImm(0));
  Expr main_count = loop::FloorDiv(extent, w);
  Expr main_span = loop::Mul(main_count, w);
  std::vector<Stmt> out;

  int64_t count = -1;
  loop::IsConstInt(main_count, &count);
  if (count == 1) {
    // One vector iteration: the body, once, at the loop's start.
    out.push_back(Vectorizer(n->var.get(), n->min, static_cast<int>(width)).MutateStmt(n->body));
  } else if (count != 0) {
    loop::Var v = loop::MakeVar(n->var->name + "_vec");
    Expr base = loop::Add(n->min, loop::Mul(v, w));
    Stmt body = Vectorizer(n->var.get(), base, static_cast<int>(width)).MutateStmt(n->body);
    out.push_back(loop::For(v, loop::IntImm(0), main_count, n->for_kind, body));
  }

  Expr tail_min = loop::Add(n->min, main_span);
  Expr tail_extent = loop::FloorMod(extent, w);
  int64_t tail = -1;
  loop::IsConstInt(tail_extent, &tail);
  if (tail == 1) {
    // Buffers here cannot use the variable (the explicit path has no Alloc in its body), so
    // Substitute re-makes none.
    out.push_back(loop::Substitute(n->body, n->var, tail_min));
  } else if (count >= 1 && tail > 1 && __builtin_popcountll(tail) > 1 && Idempotent(info)) {
    // A tail that narrower vectors would take in two or more pieces (12 = 8 + 4 lanes) is one
    // more whole vector, ending where the loop ends: its first width - tail lanes compute
    // again what the main loop stored, the same values from the same inputs (the body reads
    // no buffer it writes). A depthwise conv's 156 interior columns: 9 vectors of 16 and 8 + 4
    // lanes, each lane a sum of 25 taps, become 10 vectors.
    Expr last = loop::Add(n->min, loop::Sub(extent, w));
    out.push_back(Vectorizer(n->var.get(), last, static_cast<int>(width)).MutateStmt(n->body));
  } else if (tail != 0) {
    Stmt rest = loop::For(n->var, tail_min, tail_extent, ForKind::kSerial, n->body);
    // A constant tail of two or more fills a narrower vector, and what is left of it the next
    // (a 56-column row: 48 + 8 lanes; 7 columns: 4 + 2 + 1), where scalar code would run one
    // element per instruction.
    int64_t narrow = width / 2;
    while (tail > 1 && narrow > tail) narrow /= 2;
    if (tail > 1 && narrow >= 2 && AccessesContiguous(info, loop::AsFor(rest), narrow))
      rest = VectorizeExplicitly(loop::AsFor(rest), narrow, info);
    out.push_back(rest);
  }
  return loop::Seq(std::move(out));
}

Stmt VectorizeLoop(const Stmt& s, int64_t width) {
  const loop::ForNode* n = loop::AsFor(s);
  if (!n || (n->for_kind != ForKind::kSerial && n->for_kind != ForKind::kParallel)) return s;
  if (n->var->dtype != DType::kInt64 || n->min->lanes != 1 || n->extent->lanes != 1) return s;
  int64_t extent = 0;
  bool constant = loop::IsConstInt(n->extent, &extent);
  if (constant && extent < 2) return s;

  BodyInfo info;
  info.variant.insert(n->var.get());
  BodyScanner scanner(&info);
  scanner.VisitStmt(n->body);
  info.accesses = std::move(scanner.accesses);
  if (info.has_loop || !info.scalar ||
      !IterationsIndependent(info, n->var.get(),
                             constant ? std::optional<int64_t>(extent) : std::nullopt))
    return s;

  // A short constant loop still fills a narrower vector (4 lanes of f32 is an SSE register).
  while (constant && width > extent) width /= 2;
  if (info.straight_line && !info.variant_let && width >= 2 && AccessesContiguous(info, n, width))
    return VectorizeExplicitly(n, width, info);
  if (n->for_kind != ForKind::kSerial) return s;
  return loop::For(n->var, n->min, n->extent, ForKind::kVectorized, n->body);
}

}  // namespace

void RegisterVectorizeLoopsPass(PassRegistry& r) {
  RegisterPassConfig(kWidthKey, AttrKind::kInt, int64_t{8},
                     "lanes of the vector loops VectorizeLoops makes (0 or 1: off; at most 64)");
  r.Register(PassRegistration{
      .name = "VectorizeLoops",
      .opt_level = 1,
      .required = {},
      .options = {},
      .doc = "split innermost loops over the contiguous dimension into vector and tail loops",
      .create =
          [](const Attrs& o) {
            return CreateLoopStmtPass(
                PassInfo{"VectorizeLoops", 1, {}},
                [](const Stmt& s, const PassContext& ctx) {
                  int64_t width = ctx.GetConfigInt(kWidthKey);
                  int64_t bits = ctx.GetConfigInt("target.vector_bits");
                  if (!ctx.config().count(kWidthKey) && bits >= 128) width = bits / 32;
                  if (width < 0 || width > kMaxWidth)
                    Throw(ErrorCode::kInvalidArgument, kWidthKey, " must be in [0, ", kMaxWidth,
                          "], got ", width);
                  return width < 2 ? s : VectorizeLoop(s, width);
                },
                o);
          },
  });
}

}  // namespace kiln
