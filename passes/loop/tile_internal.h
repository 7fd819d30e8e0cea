// TileLoops' internals shared by passes/loop/tile.cc (the pattern, row blocks, tiles),
// passes/loop/tile_rows.cc (the order of row blocks and column tiles: TileRows),
// passes/loop/tile_panels.cc (packed operand panels and their K blocks) and
// passes/loop/tile_shape.cc (the block each product takes, and the pass). Internal to the pass.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "ir/loop/loop.h"

namespace kiln::tile_internal {

using loop::Buffer;
using loop::BufferNode;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::VarNode;

// The j loop's body split into its parts.
struct ReductionBody {
  std::vector<Buffer> accumulators;  // in Alloc order
  std::vector<Stmt> statements;      // between the Allocs and the Frees
  // The panel width of the pre-packed operands it reads (PrepackedWidth), 0 when none: the
  // tile width then. Set by TileablePattern.
  int64_t prepacked = 0;
};

// A block of rows: the i loop's variable becomes `base + r` for r in [0, rows), or, with
// `last` set, `min(base + r, last)`: a block over fewer rows than it has (a symbolic tail),
// whose extra rows compute the last one again and store the same values.
struct RowBlock {
  const VarNode* i;
  Expr base;
  loop::Var r;
  int64_t rows;
  Expr last = {};
};

// A load inside a reduction loop `k` that reads a panel of an operand: `src[indices]`, where
// the indices depend on j (the last one as `j + r`) and k, not on i. Within one column tile it
// is read from `panel`, a copy of the K x Tj values the tile needs, laid out row after row:
// panel[(k - k_min) * Tj + column].
struct PackedLoad {
  Buffer src;
  std::vector<Expr> indices;
  const loop::ForNode* k;
  Buffer panel;
  // src is already laid out as panels (PrepackedWidth): the tile reads it in place, nothing is
  // copied and `panel` is never allocated.
  bool in_place = false;
};

// T when `idx` reads an operand pre-packed into panels of T columns (see the pass
// PackConstantWeights): src[j // T, e, j % T], e free of j, T > 1. Column j of row e is then
// element j % T of row e of panel j // T, so the T columns of a tile that starts at a multiple
// of T are contiguous in every row. 0 otherwise.
int64_t PrepackedWidth(const std::vector<Expr>& idx, const VarNode* j);

// One tile: columns [j0, j0 + width) of the j loop `n`, with accumulator rows of `row_extent`
// (one row, or block->rows of them in a row block). `packs` (full tiles only, width = Tj) reads
// those loads from their panels.
Stmt BuildTile(const loop::ForNode* n, const ReductionBody& body, const loop::Var& j_inner,
               const Expr& j0, const Expr& width, const Expr& row_extent, const RowBlock* block,
               const std::vector<PackedLoad>* packs = nullptr);

// The i loop `n` in blocks of `rows` rows, then the rows left, with `tile_for(block)` (block is
// null for the rows left) as the body of each.
Stmt TileRowBlocks(const loop::ForNode* n, int64_t rows,
                   const std::function<Stmt(const RowBlock*)>& tile_for);

// Whether the j loop `n` keeps to the pattern (tile.cc's file comment); its parts if so.
std::optional<ReductionBody> TileablePattern(const loop::ForNode* n);

// Tiles the j loop `n` (which keeps to the pattern), for one row or a block of rows.
Stmt TileJ(const loop::ForNode* n, const ReductionBody& body, int64_t tile, const RowBlock* block);

// Whether the i loop `n` around the j loop `j` can run in row blocks (no two rows touch one
// element).
bool RowBlockable(const loop::ForNode* n, const loop::ForNode* j, const ReductionBody& body);

// ---- tile_rows.cc ----

// Whether `body` reads an operand along j but not i, in place, at offsets that one step of one
// of its loops moves off a multiple of `lanes` elements (loads that straddle cache lines).
bool UnalignedColumnReads(const ReductionBody& body, const VarNode* i, const VarNode* j,
                          int64_t lanes, int64_t tile);

// Per buffer read along j, the offsets at which a column tile's runs start (tile_rows.cc).
using ColumnStarts = std::map<const BufferNode*, std::vector<int64_t>>;
std::optional<ColumnStarts> ColumnTileStarts(const ReductionBody& body, const VarNode* i,
                                             const VarNode* j);
// The bytes a column tile `tile` wide touches, the runs merged per buffer.
int64_t ColumnTileBytes(const ColumnStarts& starts, int64_t tile);

// The i loop `n` in row blocks of `rows` over column tiles `tile` wide (tile_rows.cc).
// `threads`: the kernel's threads (target.threads; 0 unknown), which K-blocked tiles run in
// groups for (TileGroups).
Stmt TileRows(const loop::ForNode* n, const loop::ForNode* j, const ReductionBody& body,
              int64_t tile, int64_t rows, bool pack, bool pack_set, int64_t k_block,
              bool grouped = false, int64_t threads = 0);

// ---- tile_panels.cc ----

// The loads that a column tile can read from packed panels (see PackedLoad): loads in a
// reduction loop `k` that holds no other loop, of a buffer the body does not store, whose
// indices depend on j and k and not on the row variable i. Distinct index lists get distinct
// panels.
// The value of the index `e` with the variable v at `value` and every other variable at 0, or
// nullopt when that is not a constant (a load in it, say).
std::optional<int64_t> OffsetAt(const Expr& e, const VarNode* v, int64_t value);

std::vector<PackedLoad> FindPackedLoads(const ReductionBody& body, const VarNode* i,
                                        const VarNode* j, int64_t tile);

// The share of the K x Tj values a panel copies that are distinct elements of its source
// (see tile_panels.cc); nullopt when it cannot be computed.
std::optional<double> DistinctShare(const PackedLoad& p, int64_t tile);
// Whether p's K x Tj panel is already one contiguous run of its source, row after row (an
// im2col copy one tile wide): then reading it in place reads what a copy would hold.
bool ContiguousPanel(const PackedLoad& p, int64_t tile);

// Fills the panels of one column tile starting at column j0:
//   for k in [k_min, k_min + K) { for c in [0, Tj) { panel[(k - k_min) * Tj + c] = src[j := j0 + c]
//   } }
Stmt PackPanel(const PackedLoad& p, const loop::ForNode* j, const Expr& j0, int64_t tile);

// The packed column tile in K blocks of at most `k_block` steps (see tile_panels.cc), or
// nullopt where the body does not allow it.
// Past this the accumulator tile of a K-blocked product leaves L2 between blocks.
constexpr int64_t kMaxAccumulatorTileBytes = 512 << 10;

// With `group_tile` set, the tile is one of `group_tiles` tiles whose columns start at j0
// (which reads *group_tile): each K block then runs over all of them, in a loop over
// *group_tile, before the next block, their accumulator tiles side by side.
std::optional<Stmt> KBlockedTile(const loop::ForNode* n, const loop::ForNode* j,
                                 const ReductionBody& body, const std::vector<PackedLoad>& packs,
                                 const Expr& j0, const loop::Var& j_inner, int64_t tile,
                                 int64_t rows, int64_t k_block,
                                 const loop::Var* group_tile = nullptr, int64_t group_tiles = 1);

}  // namespace kiln::tile_internal
