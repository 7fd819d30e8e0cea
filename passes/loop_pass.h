// Pass managers for the loop IR (SPEC.md §4): expression, statement, block and function
// passes, each with an adaptor that walks the kernels (IRModule::prim_funcs) for it. They are
// ordinary Passes over the IRModule, so they run under the same PassContext, instruments,
// timing and IR printing as graph passes.
//
// Adaptors (what a pass sees):
//   expression pass: every expression of every kernel, operands first (post-order);
//   statement pass:  every statement, children first, with no context about its parents;
//   block pass:      the statement list of every Seq, depth-first and innermost first, left to
//                    right among siblings, the kernel's body last (a block even when it is a
//                    single statement); with the kernel and the block's depth (LoopBlockContext),
//                    by an instance of the pass made for that kernel, told when it is done;
//   function pass:   each whole kernel.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ir/loop/loop.h"
#include "passes/pass.h"

namespace kiln {

using LoopExprPassFn = std::function<loop::Expr(const loop::Expr&, const PassContext&)>;
using LoopStmtPassFn = std::function<loop::Stmt(const loop::Stmt&, const PassContext&)>;
using LoopFuncPassFn = std::function<loop::PrimFunc(const loop::PrimFunc&, const PassContext&)>;

PassPtr CreateLoopExprPass(PassInfo info, LoopExprPassFn fn, Attrs options = {});
PassPtr CreateLoopStmtPass(PassInfo info, LoopStmtPassFn fn, Attrs options = {});

// Where a block lies: its kernel (as it was before the pass), and how many blocks enclose it
// (0: the kernel's body, a block even when it is one statement).
struct LoopBlockContext {
  const loop::PrimFunc& func;
  int depth;
  const PassContext& pass_context;
};

// A block pass works on statement lists: what is local to one list (lifetimes, adjacent
// loops) without walking the kernel itself. One instance is made per kernel, so it may gather
// what it learns of the kernel's blocks and report it in Finish.
class LoopBlockPass {
 public:
  virtual ~LoopBlockPass() = default;
  // `stmts` rewritten: the same list where there is nothing to do. Nested blocks in `stmts`
  // have been rewritten already.
  virtual std::vector<loop::Stmt> RunOnBlock(const std::vector<loop::Stmt>& stmts,
                                             const LoopBlockContext& where) = 0;
  // After the kernel's last block, with the kernel as rewritten.
  virtual void Finish(const loop::PrimFunc& /*rewritten*/, const PassContext& /*ctx*/) {}
};
using LoopBlockPassFactory = std::function<std::unique_ptr<LoopBlockPass>()>;

PassPtr CreateLoopBlockPass(PassInfo info, LoopBlockPassFactory make, Attrs options = {});
// The block adaptor on one kernel: `pass` sees its blocks in the order above, then Finish.
loop::PrimFunc RunBlockPass(LoopBlockPass& pass, const loop::PrimFunc& f, const PassContext& ctx);
PassPtr CreateLoopFuncPass(PassInfo info, LoopFuncPassFn fn, Attrs options = {});

// The adaptors as plain functions, for passes that want to apply a rewrite to one kernel.
loop::Stmt RewriteExprs(const loop::Stmt& s,
                        const std::function<loop::Expr(const loop::Expr&)>& fn);
loop::Stmt RewriteStmts(const loop::Stmt& s,
                        const std::function<loop::Stmt(const loop::Stmt&)>& fn);
loop::Stmt RewriteBlocks(
    const loop::Stmt& s,
    const std::function<std::vector<loop::Stmt>(const std::vector<loop::Stmt>&)>& fn);

// The register block TileLoops gives a matrix product under `ctx`: `columns` per accumulator
// row (0 or 1: TileLoops is off) and `rows` per block, from tile.j and tile.i, or what a known
// target (target.vector_bits) sizes where they are unset; `single_row_columns` for a product
// of one row (a matrix-vector product, no row loop). Throws on negative keys. Graph passes
// that lay out operands for TileLoops (PackConstantWeights) read it too.
struct TileShape {
  int64_t columns;
  int64_t rows;
  int64_t single_row_columns;
  // Where > 0 (AVX-512, keys unset): a block of `narrow_rows` rows of `narrow_columns` (24
  // accumulators) for operands pre-packed in panels that wide; PanelColumns picks it per matrix.
  int64_t narrow_columns = 0;
  int64_t narrow_rows = 0;
  // Where > 0 (likewise): a block of `half_rows` rows of `half_columns` for panels that wide,
  // taken where narrow_columns would leave a short tail and half_columns divides the columns.
  int64_t half_columns = 0;
  int64_t half_rows = 0;

  // The panel width for a B of `n` columns read by `m` rows (m > 1): narrow_columns where that
  // leaves no tail or one of two vectors or more, or where m is at most kNarrowPanelAnyTailRows
  // and n makes kNarrowPanelAnyTailPanels panels or more (few row blocks: each weight vector
  // feeding 8 FMAs pays more than the narrow tail costs, and the threads' shares of the panels
  // stay even); else half_columns where that divides n; else `columns`.
  int64_t PanelColumns(int64_t n, int64_t m) const;
  static constexpr int64_t kNarrowPanelAnyTailRows = 64;
  static constexpr int64_t kNarrowPanelAnyTailPanels = 16;
};
TileShape TileLoopsShape(const PassContext& ctx);

}  // namespace kiln
