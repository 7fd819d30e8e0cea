// TileLoops' packed operand panels (passes/loop/tile_internal.h): which loads a column tile
// reads from a contiguous copy, when such a copy pays, and how it is filled, in K blocks that
// keep each panel in L1.
#include <algorithm>
#include <limits>
#include <set>

#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/tile_internal.h"

namespace kiln::tile_internal {

using loop::Access;
using loop::Mentions;
using loop::SameIndices;

std::vector<PackedLoad> FindPackedLoads(const ReductionBody& body, const VarNode* i,
                                        const VarNode* j, int64_t tile) {
  std::set<const BufferNode*> stored;
  loop::AccessScanner all;
  for (const Stmt& s : body.statements) all.VisitStmt(s);
  for (const Access& a : all.accesses)
    if (a.store) stored.insert(a.buffer);
  std::vector<PackedLoad> packs;
  for (const Stmt& s : body.statements) {
    const loop::ForNode* k = loop::AsFor(s);
    if (!k || loop::ContainsStmtKind(k->body, {loop::StmtKind::kFor})) continue;
    loop::AccessScanner scan;
    scan.VisitStmt(k->body);
    for (const Access& a : scan.accesses) {
      if (a.store || stored.count(a.buffer)) continue;
      const std::vector<Expr>& idx = *a.indices;
      bool by_j = false, by_k = false, by_i = false;
      for (const Expr& e : idx) {
        by_j = by_j || Mentions(e, j);
        by_k = by_k || Mentions(e, k->var.get());
        by_i = by_i || Mentions(e, i);
      }
      if (!by_j || !by_k || by_i) continue;
      bool seen = false;
      for (const PackedLoad& p : packs)
        seen = seen || (p.src.get() == a.buffer && p.k == k && SameIndices(p.indices, idx));
      if (seen) continue;
      // The Buffer handle of a.buffer, from the load itself.
      struct Finder : loop::Visitor {
        const BufferNode* want;
        Buffer found;
        void VisitExpr(const Expr& e) override {
          if (const loop::LoadNode* l = loop::AsLoad(e); l && l->buffer.get() == want)
            found = l->buffer;
          loop::Visitor::VisitExpr(e);
        }
      } finder;
      finder.want = a.buffer;
      finder.VisitStmt(k->body);
      Expr extent = loop::Mul(k->extent, loop::IntImm(tile));
      packs.push_back({finder.found, idx, k,
                       loop::MakeBuffer(a.buffer->name + "_panel", a.buffer->dtype, {extent},
                                        BufferNode::Scope::kLocal),
                       PrepackedWidth(idx, j) == tile});
    }
  }
  return packs;
}

std::optional<int64_t> OffsetAt(const Expr& e, const VarNode* v, int64_t value) {
  class Fix : public loop::Mutator {
   public:
    Fix(const VarNode* v, int64_t value) : v_(v), value_(value) {}

   protected:
    Expr MutateVar(const VarNode* n, const Expr&) override {
      return loop::IntImm(n == v_ ? value_ : 0, n->dtype);
    }

   private:
    const VarNode* v_;
    int64_t value_;
  };
  int64_t offset;
  if (!loop::IsConstInt(Fix(v, value).MutateExpr(e), &offset)) return std::nullopt;
  return offset;
}

namespace {

// Where the run of row k of p's panel starts in its source, for each k in order (j and every
// other variable at 0); nullopt when the offsets are not constants once the variables are
// fixed, or K is not a constant of at most 4096.
std::optional<std::vector<int64_t>> PanelStarts(const PackedLoad& p) {
  int64_t k_min = 0, depth = 0;
  if (!loop::IsConstInt(p.k->min, &k_min) || !loop::IsConstInt(p.k->extent, &depth) || depth < 1 ||
      depth > 4096)
    return std::nullopt;
  std::optional<Expr> flat = loop::FlatIndex(*p.src, p.indices);
  if (!flat) return std::nullopt;
  std::vector<int64_t> starts;
  for (int64_t k = k_min; k < k_min + depth; ++k) {
    std::optional<int64_t> offset = OffsetAt(*flat, p.k->var.get(), k);
    if (!offset) return std::nullopt;
    starts.push_back(*offset);
  }
  return starts;
}

}  // namespace

// The share of the K x Tj values a panel copies that are distinct elements of its source: the
// union of the K runs [offset(k), offset(k) + Tj) (j at 0, other variables at 0) over K * Tj.
// About 1 for a matmul's operand (its rows are a full row apart); about 1/3 for a 3x3 stride-1
// conv reading its padded input, whose nine taps per channel are shifts of three rows: there
// the panel is an im2col copy three times the data it reads, which then streams from L2 where
// the input itself stays in L1 (dynamic_conv's 16->32 3x3 conv at 112x112: 669 us packed, 575
// unpacked). nullopt when the offsets are not constants once the variables are fixed, or K is
// not a constant of at most 4096.
std::optional<double> DistinctShare(const PackedLoad& p, int64_t tile) {
  std::optional<std::vector<int64_t>> runs = PanelStarts(p);
  if (!runs) return std::nullopt;
  std::vector<int64_t> starts = *runs;
  const int64_t depth = static_cast<int64_t>(starts.size());
  std::sort(starts.begin(), starts.end());
  int64_t covered = 0, end = std::numeric_limits<int64_t>::min();
  for (int64_t o : starts) {
    covered += std::max<int64_t>(0, o + tile - std::max(o, end));
    end = std::max(end, o + tile);
  }
  return static_cast<double>(covered) / (static_cast<double>(depth) * tile);
}

bool ContiguousPanel(const PackedLoad& p, int64_t tile) {
  std::optional<std::vector<int64_t>> starts = PanelStarts(p);
  if (!starts) return false;
  for (size_t k = 1; k < starts->size(); ++k)
    if ((*starts)[k] - (*starts)[k - 1] != tile) return false;
  return true;
}

Stmt PackPanel(const PackedLoad& p, const loop::ForNode* j, const Expr& j0, int64_t tile) {
  loop::Var k = loop::MakeVar(p.k->var->name + "_pack");
  loop::Var c = loop::MakeVar(j->var->name + "_pack");
  std::vector<Expr> idx;
  for (const Expr& e : p.indices)
    idx.push_back(loop::Substitute(loop::Substitute(e, j->var, loop::Add(j0, c)), p.k->var, k));
  Expr at = loop::Add(loop::Mul(loop::Sub(k, p.k->min), loop::IntImm(tile)), c);
  Stmt copy = loop::Store(p.panel, {at}, loop::Load(p.src, idx));
  return loop::For(k, p.k->min, p.k->extent, ForKind::kSerial,
                   loop::For(c, loop::IntImm(0), loop::IntImm(tile), ForKind::kSerial, copy));
}

namespace {

// The statement `tile` with `extra` appended to the body of each loop over `k`.
Stmt AppendToLoops(const Stmt& tile, const VarNode* k, const std::vector<Stmt>& extra) {
  class Appender : public loop::Mutator {
   public:
    Appender(const VarNode* k, const std::vector<Stmt>& extra) : k_(k), extra_(extra) {}

   protected:
    Stmt MutateFor(const loop::ForNode* n, const Stmt& self) override {
      if (n->var.get() != k_) return loop::Mutator::MutateFor(n, self);
      std::vector<Stmt> body = {n->body};
      body.insert(body.end(), extra_.begin(), extra_.end());
      return loop::For(n->var, n->min, n->extent, n->for_kind, loop::Seq(std::move(body)));
    }

   private:
    const VarNode* k_;
    const std::vector<Stmt>& extra_;
  };
  return Appender(k, extra).MutateStmt(tile);
}

}  // namespace

// A panel read in place (pre-packed weights) streams from L3 or memory, each line once: the
// hardware prefetcher fetches it as the first row block of a K block reads it, and the row
// blocks after it, which read it from L1, leave the memory idle. So each reduction step of a
// row block also prefetches (into L2) a line of the row the next K block reads at that step,
// spread over the row blocks: with L lines to a panel row and at least L row blocks, block b
// takes line b mod L; with fewer, every block takes all L. A 7 x 7 conv of 512 -> 512
// channels as a 49 x 4608 by 4608 x 512 product (its 9.4 MB of weights past L3, a C model
// of the kernel, 1 thread, Intel Xeon with AVX-512): 2.76-2.83 -> 2.09-2.22 ms; 2.03-2.07 ->
// 1.83-1.86 ms with the weights in L3.
// `full`: the tile's count of full row blocks (of `rows` rows, the first at row `row_min`).
std::vector<Stmt> NextBlockPrefetches(const std::vector<PackedLoad>& packs, const loop::ForNode* j,
                                      const Expr& j0, int64_t tile, const Expr& k_next,
                                      const RowBlock* b, const Expr& row_min, int64_t rows,
                                      int64_t full) {
  std::vector<Stmt> out;
  for (const PackedLoad& p : packs) {
    if (!p.in_place) continue;
    const int64_t per_line = std::max<int64_t>(1, 64 / DTypeSize(p.src->dtype));
    const int64_t lines = (tile + per_line - 1) / per_line;
    auto line_at = [&](const Expr& line) {
      std::vector<Expr> idx;
      Expr col = loop::Add(j0, loop::Mul(line, loop::IntImm(per_line)));
      for (const Expr& e : p.indices)
        idx.push_back(loop::Substitute(loop::Substitute(e, j->var, col), p.k->var, k_next));
      out.push_back(loop::Prefetch(loop::Load(p.src, idx)));
    };
    if (full >= lines) {
      if (b && b->rows == rows && !b->last)  // a full row block: its own line
        line_at(loop::FloorMod(loop::FloorDiv(loop::Sub(b->base, row_min), loop::IntImm(rows)),
                               loop::IntImm(lines)));
    } else {
      for (int64_t l = 0; l < lines; ++l) line_at(loop::IntImm(l));
    }
  }
  return out;
}

// The packed column tile of TileRows in K blocks of at most `k_block` reduction steps, so that
// each panel (k_block x Tj) stays in L1 while every row block reads it, rather than a K x Tj
// panel streaming from L2 once per row block. The accumulator rows of all rows of the tile live
// in `acc_tile` (rows x Tj) between blocks: the first block runs the body's statements before
// the reduction (the initial values) and saves the rows; each middle block loads them, reduces
// over its K block and saves them; the last block loads them, reduces, and runs the statements
// after the reduction (the epilogue). Every output element still sums its terms in order, so
// the results are bit for bit the unblocked ones.
//
// Only for one accumulator and one reduction loop (the one the panels are read in) with a
// constant depth of at least two blocks, and a constant row count whose accumulator tile stays
// within kMaxAccumulatorTileBytes; nullopt otherwise. The tile goes to and from L2 once per
// block and row block, where without blocks the panel streams from L2 every reduction step: a
// 1x1 conv of 256 -> 512 channels over 480 pixels (512 rows of 80-column tiles, 160 KiB) took
// 786 us unblocked and 695 blocked (1 thread, Intel Xeon with 2 MiB of L2 per core).
std::optional<Stmt> KBlockedTile(const loop::ForNode* n, const loop::ForNode* j,
                                 const ReductionBody& body, const std::vector<PackedLoad>& packs,
                                 const Expr& j0, const loop::Var& j_inner, int64_t tile,
                                 int64_t rows, int64_t k_block, const loop::Var* group_tile,
                                 int64_t group_tiles) {
  int64_t depth = 0, row_count = 0;
  if (!group_tile) group_tiles = 1;
  if (k_block < 1 || body.accumulators.size() != 1 || packs.empty() ||
      !loop::IsConstInt(packs[0].k->extent, &depth) || depth < 2 * k_block ||
      !loop::IsConstInt(n->extent, &row_count) ||
      row_count * tile * group_tiles * 4 > kMaxAccumulatorTileBytes)
    return std::nullopt;
  const loop::ForNode* k = packs[0].k;
  size_t at = body.statements.size();
  for (size_t s = 0; s < body.statements.size(); ++s) {
    if (body.statements[s].get() == static_cast<const loop::StmtNode*>(k)) {
      at = s;
    } else if (loop::ContainsStmtKind(body.statements[s], {loop::StmtKind::kFor})) {
      return std::nullopt;  // a second reduction
    }
  }
  for (const PackedLoad& p : packs)
    if (p.k != k) return std::nullopt;
  if (at == body.statements.size()) return std::nullopt;

  // Blocks of nearly equal depth: `blocks` of `step`, the last one what is left.
  const int64_t blocks = (depth + k_block - 1) / k_block;
  const int64_t step = (depth + blocks - 1) / blocks;
  const int64_t last = depth - (blocks - 1) * step;
  const Buffer& acc = body.accumulators[0];
  Buffer acc_tile =
      loop::MakeBuffer(acc->name + "_tile", acc->dtype,
                       {loop::IntImm(row_count * tile * group_tiles)}, BufferNode::Scope::kLocal);
  Expr zero = loop::IntImm(0);
  Expr slot =
      loop::Add(loop::Mul(loop::Sub(n->var, n->min), loop::IntImm(tile)), loop::Sub(j->var, j0));
  if (group_tile) slot = loop::Add(loop::Mul(*group_tile, loop::IntImm(row_count * tile)), slot);
  Stmt save = loop::Store(acc_tile, {slot}, loop::Load(acc, {zero}));
  Stmt load = loop::Store(acc, {zero}, loop::Load(acc_tile, {slot}));
  std::vector<Buffer> panels;
  for (const PackedLoad& p : packs)
    panels.push_back(loop::MakeBuffer(p.panel->name, p.panel->dtype, {loop::IntImm(step * tile)},
                                      BufferNode::Scope::kLocal));

  // One K block [k_min, k_min + extent): its panels packed, then every row block over them.
  std::vector<Stmt> keep;  // the block loops PackedLoad::k points at
  auto block = [&](const Expr& k_min, int64_t extent, bool first, bool final) {
    keep.push_back(loop::For(k->var, k_min, loop::IntImm(extent), k->for_kind, k->body));
    const loop::ForNode* kb = loop::AsFor(keep.back());
    std::vector<PackedLoad> bp = packs;
    for (size_t p = 0; p < bp.size(); ++p) {
      bp[p].k = kb;
      bp[p].panel = panels[p];
    }
    ReductionBody part{body.accumulators, {}};
    if (first) {
      part.statements.assign(body.statements.begin(), body.statements.begin() + at);
    } else {
      part.statements.push_back(load);
    }
    part.statements.push_back(keep.back());
    if (final) {
      part.statements.insert(part.statements.end(), body.statements.begin() + at + 1,
                             body.statements.end());
    } else {
      part.statements.push_back(save);
    }
    std::vector<Stmt> out;
    for (const PackedLoad& p : bp)
      if (!p.in_place) out.push_back(PackPanel(p, j, j0, tile));
    // The row the next block reads at this step, within the reduction (the last block may
    // be shorter than this one).
    const Expr k_next = loop::Min(loop::Add(k->var, loop::IntImm(step)),
                                  loop::Add(k->min, loop::IntImm(depth - 1)));
    // BuildTile reads `bp` while it runs, so it is built here, not lazily.
    out.push_back(TileRowBlocks(n, rows, [&](const RowBlock* b) {
      Stmt t = BuildTile(j, part, j_inner, j0, loop::IntImm(tile), loop::IntImm(tile), b, &bp);
      if (final) return t;
      return AppendToLoops(
          t, k->var.get(),
          NextBlockPrefetches(bp, j, j0, tile, k_next, b, n->min, rows, row_count / rows));
    }));
    if (group_tile)
      return loop::For(*group_tile, loop::IntImm(0), loop::IntImm(group_tiles), ForKind::kSerial,
                       loop::Seq(std::move(out)));
    return loop::Seq(std::move(out));
  };

  std::vector<Stmt> out;
  for (size_t p = 0; p < panels.size(); ++p)
    if (!packs[p].in_place) out.push_back(loop::Alloc(panels[p]));
  out.push_back(loop::Alloc(acc_tile));
  out.push_back(block(k->min, step, true, false));
  if (blocks > 2) {
    loop::Var kb = loop::MakeVar(k->var->name + "_block");
    Expr k_min = loop::Add(k->min, loop::Mul(kb, loop::IntImm(step)));
    out.push_back(loop::For(kb, loop::IntImm(1), loop::IntImm(blocks - 2), ForKind::kSerial,
                            block(k_min, step, false, false)));
  }
  out.push_back(block(loop::Add(k->min, loop::IntImm((blocks - 1) * step)), last, false, true));
  out.push_back(loop::Free(acc_tile));
  for (size_t p = panels.size(); p-- > 0;)
    if (!packs[p].in_place) out.push_back(loop::Free(panels[p]));
  return loop::Seq(std::move(out));
}

}  // namespace kiln::tile_internal
