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

Stmt BlockTranspose(const Stmt& s) {
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
