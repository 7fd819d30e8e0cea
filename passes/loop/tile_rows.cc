// TileLoops' order of row blocks and column tiles (TileRows): which operand streams through
// once, whether a tile's panels are packed, K-blocked, or run in groups, and the column tile
// offsets that decide it. The pattern and the tiles themselves are in tile.cc, packed panels and
// K blocks in tile_panels.cc; see tile.cc for what the pass does.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ir/error.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/tile_internal.h"

namespace kiln {
namespace {

// A row block streams its j operand from wherever it lives; past this, not from L2 (half of
// the 1 MiB L2 per core of the machines here, leaving room for the rest of a tile).
constexpr int64_t kStreamedOperandBytes = 512 << 10;

}  // namespace

namespace tile_internal {

// Whether `body` reads an operand along j but not along i, in place (no packed panel: its
// reduction is a loop nest, which FindPackedLoads leaves alone), at an offset that one step of
// one of its loops moves off a multiple of `lanes` elements: such loads straddle cache lines (a
// stride-1 conv's taps, one element apart; a stride-2 conv's, whose taps alternate between
// phase planes 3306 floats apart at 112 x 112).
bool UnalignedColumnReads(const ReductionBody& body, const VarNode* i, const VarNode* j,
                          int64_t lanes, int64_t tile) {
  if (!FindPackedLoads(body, i, j, tile).empty()) return false;
  struct Loops : loop::Visitor {
    std::vector<const loop::ForNode*> loops;
    void VisitStmt(const Stmt& s) override {
      if (const loop::ForNode* f = loop::AsFor(s)) loops.push_back(f);
      loop::Visitor::VisitStmt(s);
    }
  } nest;
  loop::AccessScanner scan;
  for (const Stmt& s : body.statements) {
    nest.VisitStmt(s);
    scan.VisitStmt(s);
  }
  for (const loop::Access& a : scan.accesses) {
    if (a.store) continue;
    bool along_j = false, along_i = false;
    for (const Expr& e : *a.indices) {
      along_j = along_j || loop::Mentions(e, j);
      along_i = along_i || loop::Mentions(e, i);
    }
    std::optional<Expr> flat =
        along_j && !along_i ? loop::FlatIndex(*a.buffer, *a.indices) : std::nullopt;
    if (!flat) continue;
    for (const loop::ForNode* f : nest.loops) {
      int64_t min = 0, extent = 0;
      if (f->var.get() == j || !loop::Mentions(*flat, f->var.get()) ||
          !loop::IsConstInt(f->min, &min) || !loop::IsConstInt(f->extent, &extent) || extent < 2)
        continue;
      std::optional<int64_t> at = OffsetAt(*flat, f->var.get(), min),
                             next = OffsetAt(*flat, f->var.get(), min + 1);
      if (at && next && (*next - *at) % lanes != 0) return true;
    }
  }
  return false;
}

// The bytes of the buffers that loads in `body` read along j but not along i (the operand a
// row block streams through), by their whole constant size; buffers of symbolic size count 0.
int64_t ColumnOperandBytes(const ReductionBody& body, const VarNode* i, const VarNode* j) {
  loop::AccessScanner scan;
  for (const Stmt& s : body.statements) scan.VisitStmt(s);
  std::set<const BufferNode*> seen;
  int64_t bytes = 0;
  for (const loop::Access& a : scan.accesses) {
    if (a.store || seen.count(a.buffer)) continue;
    bool along_j = false, along_i = false;
    for (const Expr& e : *a.indices) {
      along_j = along_j || loop::Mentions(e, j);
      along_i = along_i || loop::Mentions(e, i);
    }
    if (!along_j || along_i) continue;
    seen.insert(a.buffer);
    int64_t elems = 1, d = 0;
    for (const Expr& e : a.buffer->shape) elems = loop::IsConstInt(e, &d) ? elems * d : 0;
    bytes += elems * DTypeSize(a.buffer->dtype);
  }
  return bytes;
}

// Where the operand read along j (not along i) is read, in place, over the whole reduction:
// per buffer, the sorted flat offsets of its loads at j = 0 over every value of the loops
// around them (any other variable at 0). A column tile `tile` wide then touches the runs
// [offset, offset + tile) (ColumnTileBytes). nullopt when an offset is not a constant once the
// loops are fixed, or the loops around a load run more than 4096 times in all (a compile-time
// bound: each run rebuilds the index).
std::optional<ColumnStarts> ColumnTileStarts(const ReductionBody& body, const VarNode* i,
                                             const VarNode* j) {
  class Scan : public loop::Visitor {
   public:
    Scan(const VarNode* i, const VarNode* j) : i_(i), j_(j) {}
    bool ok = true;
    ColumnStarts starts;

   protected:
    void VisitFor(const loop::ForNode* n, const Stmt& self) override {
      loops_.push_back(n);
      loop::Visitor::VisitFor(n, self);
      loops_.pop_back();
    }
    void VisitLoad(const loop::LoadNode* n, const Expr& self) override {
      loop::Visitor::VisitLoad(n, self);
      bool along_j = false, along_i = false;
      for (const Expr& e : n->indices) {
        along_j = along_j || loop::Mentions(e, j_);
        along_i = along_i || loop::Mentions(e, i_);
      }
      if (!along_j || along_i || !ok) return;
      std::optional<Expr> flat = loop::FlatIndex(*n->buffer, n->indices);
      std::vector<int64_t> mins, extents;
      int64_t runs = 1;
      for (const loop::ForNode* f : loops_) {
        int64_t lo = 0, ext = 0;
        if (!loop::IsConstInt(f->min, &lo) || !loop::IsConstInt(f->extent, &ext) || ext < 1 ||
            (runs *= ext) > 4096) {
          ok = false;
          return;
        }
        mins.push_back(lo);
        extents.push_back(ext);
      }
      if (!flat) {
        ok = false;
        return;
      }
      std::vector<int64_t> at = mins;
      std::vector<int64_t>& out = starts[n->buffer.get()];
      for (int64_t r = 0; r < runs; ++r) {
        Fix fix(loops_, at);
        int64_t offset = 0;
        if (!loop::IsConstInt(fix.MutateExpr(*flat), &offset)) {
          ok = false;
          return;
        }
        out.push_back(offset);
        for (size_t d = at.size(); d-- > 0;) {  // the next combination, last loop fastest
          if (++at[d] < mins[d] + extents[d]) break;
          at[d] = mins[d];
        }
      }
    }

   private:
    // Every variable at 0 but the loops' own, at `values`.
    class Fix : public loop::Mutator {
     public:
      Fix(const std::vector<const loop::ForNode*>& loops, const std::vector<int64_t>& values)
          : loops_(loops), values_(values) {}

     protected:
      Expr MutateVar(const VarNode* n, const Expr&) override {
        for (size_t d = 0; d < loops_.size(); ++d)
          if (loops_[d]->var.get() == n) return loop::IntImm(values_[d], n->dtype);
        return loop::IntImm(0, n->dtype);
      }

     private:
      const std::vector<const loop::ForNode*>& loops_;
      const std::vector<int64_t>& values_;
    };
    const VarNode* i_;
    const VarNode* j_;
    std::vector<const loop::ForNode*> loops_;
  };
  Scan scan(i, j);
  for (const Stmt& st : body.statements) scan.VisitStmt(st);
  if (!scan.ok) return std::nullopt;
  for (auto& [buffer, starts] : scan.starts) std::sort(starts.begin(), starts.end());
  return std::move(scan.starts);
}

// The bytes a column tile `tile` wide touches (ColumnTileStarts): the runs merged per buffer.
// A 3x3 stride-1 conv's taps are shifts of three rows (32 channels, 64 columns: 23 KiB); a
// stride-2 conv's phase-split input spans two rows in each of four phases (46.5 KiB).
int64_t ColumnTileBytes(const ColumnStarts& starts, int64_t tile) {
  int64_t bytes = 0;
  for (const auto& [buffer, offsets] : starts) {
    int64_t covered = 0, end = std::numeric_limits<int64_t>::min();
    for (int64_t o : offsets) {
      covered += std::max<int64_t>(0, o + tile - std::max(o, end));
      end = std::max(end, o + tile);
    }
    bytes += covered * DTypeSize(buffer->dtype);
  }
  return bytes;
}

// A single column tile whose column operand is already one contiguous panel (an im2col copy one
// tile wide: an 8 x 8 conv's 64 pixels) over many row blocks (its 128 output channels), in
// groups of kRowBlocksPerGroup blocks: `for g { rows of group g }`, each group's rows in K
// blocks of the panel read in place (TileRows, grouped), so a K block stays in L1 while the
// group's row blocks read it, where each row block streamed all of it from L2; ParallelizeLoops
// shares out the groups. nullopt unless the rows split into at least two whole groups and
// every panel the tile reads is contiguous (copying it once per group cost more than it saved).
constexpr int64_t kRowBlocksPerGroup = 8;
std::optional<Stmt> TileRowGroups(const loop::ForNode* n, int64_t tile, int64_t rows,
                                  int64_t k_block) {
  int64_t row_count = 0, min = 0;
  const int64_t group_rows = kRowBlocksPerGroup * rows;
  if (!loop::IsConstInt(n->extent, &row_count) || !loop::IsConstInt(n->min, &min) || rows < 1 ||
      row_count % group_rows != 0 || row_count / group_rows < 2)
    return std::nullopt;
  loop::Var g = loop::MakeVar(n->var->name + "_group");
  loop::Var i = loop::MakeVar(n->var->name);
  Stmt inner = loop::For(
      i, loop::IntImm(0), loop::IntImm(group_rows), ForKind::kSerial,
      loop::Substitute(
          n->body, n->var,
          loop::Add(loop::IntImm(min), loop::Add(loop::Mul(g, loop::IntImm(group_rows)), i))));
  const loop::ForNode* in = loop::AsFor(inner);
  const loop::ForNode* j = in ? loop::AsFor(in->body) : nullptr;
  std::optional<ReductionBody> body = TileablePattern(j);
  if (!body) return std::nullopt;
  std::vector<PackedLoad> packs = FindPackedLoads(*body, in->var.get(), j->var.get(), tile);
  if (packs.empty() || !std::all_of(packs.begin(), packs.end(), [&](const PackedLoad& p) {
        return p.in_place || ContiguousPanel(p, tile);
      }))
    return std::nullopt;
  return loop::For(g, loop::IntImm(0), loop::IntImm(row_count / group_rows), ForKind::kSerial,
                   TileRows(in, j, *body, tile, rows, true, false, k_block, true, 0));
}

// The i loop `n` around a tileable j loop.
//
// Unpacked: row blocks outermost, each running over every column tile (TileJ).
// Packed (when FindPackedLoads finds operand panels and there are full column tiles): column
// tiles outermost; each copies its K x Tj panel of the operand into a contiguous buffer once
// and runs every row block over it, then the tail columns run unpacked. The panel is read
// with unit stride and stays in L2 across row blocks; read in place, its rows are a full row
// of the operand apart, and at power-of-two widths (1024 floats: 4 KiB) they all fall into
// the same cache sets and evict each other.
// How many groups the column tiles of a K-blocked product run in (TileRows), 0 for none (each
// tile runs all its K blocks alone). By tiles, each tile reads all of the rows operand, K block
// by K block: where that is large (kGroupedRowBytes: rows x depth, what an im2col conv's rows
// read, not the input it reads them from) it streams from L3 once per tile. In groups, a K
// block of the rows stays in L2 while it runs over every tile of the group, so the rows operand
// streams once per group, and the accumulator tiles of the group wait in L2 between blocks
// (kMaxAccumulatorTileBytes). One group per thread (`threads`, 0: unknown, one), or the fewest
// that divide the tiles evenly; none where that leaves a tile a group. 196 x 2304 x 256 (a 3x3
// conv of 256 channels at 14 x 14 as a matmul), 8 tiles of 32, kernel times at 1 / 2 threads,
// Intel Xeon (2 MiB of L2): 1404-1439 / 700-797 us by tiles, 1217 / 626-765 in groups (4 groups
// of 2 tiles: 1287 / 639); the ResNet-style net's 256- and 512-channel 3x3 convs 5-13 % faster.
// The MLP at 256 x 784 (800 KiB of rows) gained nothing, hence the bound.
constexpr int64_t kGroupedRowBytes = 1 << 20;
int64_t TileGroups(const loop::ForNode* n, const std::vector<PackedLoad>& packs, int64_t tile,
                   int64_t tiles, int64_t threads) {
  int64_t rows = 0, depth = 0;
  if (packs.empty() || tiles < 2 || !loop::IsConstInt(n->extent, &rows) ||
      !loop::IsConstInt(packs[0].k->extent, &depth) ||
      rows * depth * DTypeSize(packs[0].src->dtype) < kGroupedRowBytes)
    return 0;
  for (int64_t groups = std::max<int64_t>(1, threads); groups < tiles; ++groups)
    if (tiles % groups == 0 && rows * tile * (tiles / groups) * 4 <= kMaxAccumulatorTileBytes)
      return groups;
  return 0;
}

Stmt TileRows(const loop::ForNode* n, const loop::ForNode* j, const ReductionBody& body,
              int64_t tile, int64_t rows, bool pack, bool pack_set, int64_t k_block, bool grouped,
              int64_t threads) {
  std::vector<PackedLoad> packs;
  Expr t = loop::IntImm(tile);
  Expr full = loop::FloorDiv(j->extent, t);
  int64_t full_count = -1;
  loop::IsConstInt(full, &full_count);
  // A panel is copied once per column tile and pays for itself over the row blocks that read
  // it (unless tile.pack is set explicitly): with four or fewer (16 rows of a 16 x 256 @ 256 x 1024
  // matmul), copying costs more than it saves (the encoder layer at 1x16: 172 -> 143 us unpacked;
  // at 1x128, 1.10 -> 1.31 ms unpacked).
  int64_t row_count = -1;
  bool few_rows = !pack_set && loop::IsConstInt(n->extent, &row_count) && row_count <= 4 * rows;
  // A single column tile is not packed either: its row blocks would all run in it, one after
  // the other, and ParallelizeLoops could not share them out (an 8 x 8 conv's 64 pixels, 128
  // output channels: 2 threads ran as 1).
  int64_t columns = -1;
  bool one_tile = !pack_set && !grouped && loop::IsConstInt(j->extent, &columns) && columns == tile;
  if (one_tile && pack && k_block > 0)
    if (std::optional<Stmt> groups = TileRowGroups(n, tile, rows, k_block)) return *groups;
  if (pack && full_count != 0 && !one_tile)
    packs = FindPackedLoads(body, n->var.get(), j->var.get(), tile);
  // A group's contiguous panels are read in place (TileRowGroups).
  if (grouped)
    for (PackedLoad& p : packs) p.in_place = true;
  // Pre-packed operands (read in place, copying nothing) stay; the copies go with few rows, or
  // when they would mostly copy the same elements again (DistinctShare below a half), unless
  // tile.pack is set explicitly.
  std::vector<PackedLoad*> copied;
  for (PackedLoad& p : packs)
    if (!p.in_place) copied.push_back(&p);
  if (!copied.empty() &&
      (few_rows || (!pack_set && std::all_of(copied.begin(), copied.end(), [&](PackedLoad* p) {
         std::optional<double> share = DistinctShare(*p, tile);
         return share && *share < 0.5;
       }))))
    packs.erase(
        std::remove_if(packs.begin(), packs.end(), [](const PackedLoad& p) { return !p.in_place; }),
        packs.end());
  // An operand read along j too large for L2 (kStreamedOperandBytes) is better streamed once,
  // column tiles outermost, than once per row block from L3: a tile's share of it stays in
  // L2 over the row blocks, which read the (smaller) rows operand again per tile instead (a
  // stride-2 3x3 conv 32 -> 32 at 112 x 112: 1.7 MB of phase-split input, 8 row blocks).
  const bool big_operand =
      !pack_set && ColumnOperandBytes(body, n->var.get(), j->var.get()) > kStreamedOperandBytes;
  if (packs.empty() && (few_rows || big_operand) && full_count > 1) {
    // Few row blocks over many column tiles: column tiles outermost, so the operand read along
    // j streams through once (and ParallelizeLoops shares out columns), where row blocks
    // outermost read all of it once per block (a 1x1 conv 64 -> 8 at 56 x 56: 800 KB of input
    // per block; 2 threads ran no faster than 1, each reading all of it).
    loop::Var j_outer = loop::MakeVar(j->var->name + "_outer");
    auto tile_at = [&](const Expr& j0, const Expr& width, const Expr& row) {
      return TileRowBlocks(n, rows, [&](const RowBlock* b) {
        return BuildTile(j, body, loop::MakeVar(j->var->name + "_inner"), j0, width, row, b);
      });
    };
    std::vector<Stmt> out = {loop::For(j_outer, loop::IntImm(0), full, ForKind::kSerial,
                                       tile_at(loop::Add(j->min, loop::Mul(j_outer, t)), t, t))};
    Expr rest = loop::FloorMod(j->extent, t);
    int64_t rest_count = -1;
    loop::IsConstInt(rest, &rest_count);
    if (rest_count != 0)
      out.push_back(
          tile_at(loop::Add(j->min, loop::Mul(full, t)), rest, rest_count > 0 ? rest : t));
    return loop::Seq(std::move(out));
  }
  if (packs.empty())
    return TileRowBlocks(n, rows, [&](const RowBlock* b) { return TileJ(j, body, tile, b); });

  loop::Var j_inner = loop::MakeVar(j->var->name + "_inner");
  loop::Var j_outer = loop::MakeVar(j->var->name + "_outer");
  Expr j0 = full_count == 1 ? j->min : loop::Add(j->min, loop::Mul(j_outer, t));
  std::optional<Stmt> blocked;
  Expr outer = full;  // the extent of j_outer: the tiles, or their groups
  int64_t outer_count = full_count;
  if (const int64_t groups = TileGroups(n, packs, tile, full_count, threads); groups > 0) {
    // Column tiles in `groups` groups (j_outer), each K block running over every tile of its
    // group (j_panel) before the next block.
    const int64_t per = full_count / groups;
    loop::Var panel = loop::MakeVar(j->var->name + "_panel");
    Expr first = groups == 1 ? loop::IntImm(0) : loop::Mul(j_outer, loop::IntImm(per));
    Expr group_j0 = loop::Add(j->min, loop::Mul(loop::Add(first, panel), t));
    blocked = KBlockedTile(n, j, body, packs, group_j0, j_inner, tile, rows, k_block, &panel, per);
    if (blocked) {  // the loop below runs the groups (`full` still counts the tiles)
      outer = loop::IntImm(groups);
      outer_count = groups;
    }
  }
  if (!blocked) blocked = KBlockedTile(n, j, body, packs, j0, j_inner, tile, rows, k_block);
  std::vector<Stmt> tile_body;
  if (blocked) {
    tile_body.push_back(*blocked);
  } else {
    for (const PackedLoad& p : packs)
      if (!p.in_place) tile_body.push_back(loop::Alloc(p.panel));
    for (const PackedLoad& p : packs)
      if (!p.in_place) tile_body.push_back(PackPanel(p, j, j0, tile));
    tile_body.push_back(TileRowBlocks(n, rows, [&](const RowBlock* b) {
      return BuildTile(j, body, j_inner, j0, t, t, b, &packs);
    }));
    for (auto it = packs.rbegin(); it != packs.rend(); ++it)
      if (!it->in_place) tile_body.push_back(loop::Free(it->panel));
  }
  std::vector<Stmt> out;
  Stmt tiles = loop::Seq(std::move(tile_body));
  out.push_back(outer_count == 1
                    ? tiles
                    : loop::For(j_outer, loop::IntImm(0), outer, ForKind::kSerial, tiles));
  Expr rest = loop::FloorMod(j->extent, t);
  int64_t rest_count = -1;
  loop::IsConstInt(rest, &rest_count);
  if (rest_count != 0) {
    // The tail columns, unpacked: a constant tail gets rows of its own width; a symbolic one
    // full rows (on the stack).
    Expr row = rest_count > 0 ? rest : t;
    Expr start = loop::Add(j->min, loop::Mul(full, t));
    out.push_back(TileRowBlocks(n, rows, [&](const RowBlock* b) {
      return BuildTile(j, body, j_inner, start, rest, row, b);
    }));
  }
  return loop::Seq(std::move(out));
}

}  // namespace tile_internal

}  // namespace kiln
