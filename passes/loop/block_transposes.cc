// BlockTransposes: a copy whose inner loop writes along a row while it reads down a column (a
// transpose: NHWC -> NCHW, [B, S, H, D] -> [B, H, S, D]) runs in blocks of the inner loop, so the
// columns it reads are cached across the outer loop.
//
//   before:  for c in [0, 64) {
//              for p in [0, 12544) {
//                out[c * 12544 + p] = x[p * 64 + c]
//              }
//            }
//   after:   for p_block in [0, 196) {
//              for c in [0, 64) {
//                for p in [0, 64) {
//                  out[c * 12544 + (p_block * 64 + p)] = x[(p_block * 64 + p) * 64 + c]
//                }
//              }
//            }
//
// Before, every c reads one float of each 256-byte row of x: all of x's 3.2 MB per c, 64 times
// over (a 1x112x112x64 channels-last value transposed back: 4 ms). After, a block of 64 rows
// (16 KiB) is read once from memory and then from L1 for every c. The inner loop still writes
// along a row, so VectorizeLoops vectorizes it as before (a gather from the block).
//
// The pattern: a serial loop over c (constant extent >= 2) whose body is one serial loop over p
// (from 0, constant extent, a multiple of 16) whose body is one store, with
//  - the store's flat index p + a * c + r: along p, rows of at least p's extent apart, so every
//    (c, p) writes its own element and the order does not matter;
//  - a load whose flat index is b * p + c + r with b >= 16: down a column; and no load of the
//    stored buffer.
// The block is the largest multiple of 16 dividing p's extent with block x b elements <= 16 KiB
// (at least 16), and smaller than the extent.
//
// A batch of transposes whose batch and row loops CollapseLoops made one (v over N * C, read at
// v // C and v % C: [32, 16, 16, 64] -> [32, 64, 16, 16]) is split back into n and c first,
// v // C becoming n, v % C c, and v itself n * C + c; the c loop then keeps to the pattern, and
// n goes around the blocked nest. That transpose: 1 thread 368 -> 188 us, 2 threads 167-331
// -> 68-71 us (AVX-512 Xeon).
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Expr;
using loop::Stmt;

constexpr int64_t kBlockBytes = 16 << 10;
constexpr int64_t kMinStride = 16;

// The loop over v in [0, n * c_extent), its body rewritten over n and c: v // c_extent -> n,
// v % c_extent -> c, any other v -> n * c_extent + c.
class SplitCollapsed : public loop::Mutator {
 public:
  SplitCollapsed(const loop::VarNode* v, int64_t c_extent, loop::Var n, loop::Var c)
      : v_(v), c_extent_(c_extent), n_(std::move(n)), c_(std::move(c)) {}

 protected:
  Expr MutateBinary(const loop::BinaryNode* b, const Expr& self) override {
    int64_t d = 0;
    if (b->a.get() == v_ && loop::IsConstInt(b->b, &d) && d == c_extent_) {
      if (b->op == loop::BinaryOp::kFloorDiv) return n_;
      if (b->op == loop::BinaryOp::kFloorMod) return c_;
    }
    return loop::Mutator::MutateBinary(b, self);
  }
  Expr MutateVar(const loop::VarNode* v, const Expr& self) override {
    if (v != v_) return self;
    return loop::Add(loop::Mul(n_, loop::IntImm(c_extent_)), c_);
  }

 private:
  const loop::VarNode* v_;
  int64_t c_extent_;
  loop::Var n_, c_;
};

// The divisor C of the first `v // C` or `v % C` in `e` (C a constant), or 0.
int64_t CollapsedDivisor(const Expr& e, const loop::VarNode* v) {
  struct Find : loop::Visitor {
    const loop::VarNode* v;
    int64_t divisor = 0;
    void VisitBinary(const loop::BinaryNode* b, const Expr& self) override {
      int64_t d = 0;
      if (divisor == 0 && b->a.get() == v && loop::IsConstInt(b->b, &d) &&
          (b->op == loop::BinaryOp::kFloorDiv || b->op == loop::BinaryOp::kFloorMod))
        divisor = d;
      loop::Visitor::VisitBinary(b, self);
    }
  } find;
  find.v = v;
  find.VisitExpr(e);
  return find.divisor;
}

Stmt BlockTransposeNest(const Stmt& s);

Stmt BlockTranspose(const Stmt& s) {
  const loop::ForNode* outer = loop::AsFor(s);
  const loop::ForNode* inner = outer ? loop::AsFor(outer->body) : nullptr;
  const loop::StoreNode* store = inner ? loop::AsStore(inner->body) : nullptr;
  int64_t extent = 0, min = -1;
  if (!store || outer->for_kind != loop::ForKind::kSerial ||
      !loop::IsConstInt(outer->extent, &extent) || !loop::IsConstInt(outer->min, &min) || min != 0)
    return BlockTransposeNest(s);
  const int64_t c_extent = CollapsedDivisor(store->value, outer->var.get());
  if (c_extent < 2 || extent % c_extent != 0 || extent / c_extent < 2) return BlockTransposeNest(s);
  loop::Var n = loop::MakeVar(outer->var->name + "_n"), c = loop::MakeVar(outer->var->name + "_c");
  Stmt body = SplitCollapsed(outer->var.get(), c_extent, n, c).MutateStmt(outer->body);
  Stmt c_loop = loop::For(c, loop::IntImm(0), loop::IntImm(c_extent), loop::ForKind::kSerial, body);
  Stmt blocked = BlockTransposeNest(c_loop);
  if (blocked == c_loop) return s;
  return loop::For(n, loop::IntImm(0), loop::IntImm(extent / c_extent), loop::ForKind::kSerial,
                   blocked);
}

Stmt BlockTransposeNest(const Stmt& s) {
  const loop::ForNode* outer = loop::AsFor(s);
  if (!outer) return s;
  const loop::ForNode* inner = loop::AsFor(outer->body);
  int64_t c_extent = 0, p_extent = 0;
  if (!inner || !loop::IsConstInt(outer->extent, &c_extent) ||
      !loop::IsConstInt(inner->extent, &p_extent) || c_extent < 2 || p_extent % 16 != 0 ||
      outer->for_kind != loop::ForKind::kSerial || inner->for_kind != loop::ForKind::kSerial)
    return s;
  const loop::StoreNode* store = loop::AsStore(inner->body);
  int64_t p_min = -1;
  if (!store || !loop::IsConstInt(inner->min, &p_min) || p_min != 0) return s;
  const loop::VarNode* c = outer->var.get();
  const loop::VarNode* p = inner->var.get();
  std::optional<Expr> out = loop::FlatIndex(*store->buffer, store->indices);
  if (!out || loop::AffineCoefficient(*out, p) != 1) return s;
  std::optional<int64_t> row = loop::AffineCoefficient(*out, c);
  if (!row || std::abs(*row) < p_extent) return s;

  loop::AccessScanner scan;
  scan.VisitExpr(store->value);
  int64_t column = 0, column_bytes = 0;  // the widest column read, and its bytes per row
  for (const loop::Access& a : scan.accesses) {
    if (a.buffer == store->buffer.get()) return s;
    std::optional<Expr> in = loop::FlatIndex(*a.buffer, *a.indices);
    if (!in) continue;
    std::optional<int64_t> along_p = loop::AffineCoefficient(*in, p);
    if (along_p && *along_p >= kMinStride && loop::AffineCoefficient(*in, c) == 1 &&
        *along_p * DTypeSize(a.buffer->dtype) > column_bytes) {
      column = *along_p;
      column_bytes = *along_p * DTypeSize(a.buffer->dtype);
    }
  }
  if (column == 0) return s;

  int64_t block = 16;
  for (int64_t b = 32; b < p_extent && b * column_bytes <= kBlockBytes; b += 16)
    if (p_extent % b == 0) block = b;
  if (block >= p_extent) return s;
  loop::Var outer_p = loop::MakeVar(p->name + "_block");
  loop::Var inner_p = loop::MakeVar(p->name);
  Expr pos = loop::Add(loop::Mul(outer_p, loop::IntImm(block)), inner_p);
  Stmt body = loop::Substitute(inner->body, inner->var, pos);
  Stmt p_loop =
      loop::For(inner_p, loop::IntImm(0), loop::IntImm(block), loop::ForKind::kSerial, body);
  Stmt c_loop = loop::For(outer->var, outer->min, outer->extent, loop::ForKind::kSerial, p_loop);
  return loop::For(outer_p, loop::IntImm(0), loop::IntImm(p_extent / block), loop::ForKind::kSerial,
                   c_loop);
}

}  // namespace

void RegisterBlockTransposesPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "BlockTransposes",
      .opt_level = 2,
      .required = {},
      .options = {},
      .doc = "run a copy that reads down columns in blocks of its rows, so the columns stay cached",
      .create =
          [](const Attrs& o) {
            return CreateLoopStmtPass(
                PassInfo{"BlockTransposes", 2, {}},
                [](const Stmt& s, const PassContext&) { return BlockTranspose(s); }, o);
          },
  });
}

}  // namespace kiln
