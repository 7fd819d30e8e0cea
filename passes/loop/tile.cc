// TileLoops: a reduction that reads its operand down a column (the matmul pattern) is turned
// around to run over a row of accumulators, so the operand is read along its rows.
//
//   before:  for i in [0, m) {
//              for j in [0, 256) {
//                alloc acc0: f32[1] local
//                acc0[0] = 0.0f
//                for k in [0, 8) {
//                  acc0[0] = acc0[0] + a[i, k] * b[k, j]
//                }
//                out[i, j] = max(acc0[0] + bias[j], 0.0f)
//                free acc0
//              }
//            }
//   after:   for i in [0, m) {
//              for j_outer in [0, 4) {
//                alloc acc0: f32[64] local
//                for j_inner in [0, 64) {
//                  acc0[j_inner] = 0.0f
//                }
//                for k in [0, 8) {
//                  for j_inner in [0, 64) {
//                    acc0[j_inner] = acc0[j_inner] + a[i, k] * b[k, j_outer * 64 + j_inner]
//                  }
//                }
//                for j_inner in [0, 64) {
//                  out[i, j_outer * 64 + j_inner] = max(acc0[j_inner] + bias[j_outer * 64 +
//                  j_inner], 0.0f)
//                }
//                free acc0
//              }
//            }
//
// Before, the innermost loop walks b down a column (stride 256 elements) and keeps one
// accumulator; after, it walks a row of b and a row of Tj accumulators, both contiguous, so
// VectorizeLoops turns it into vector loads and adds, and the accumulator row (the default
// Tj = 16 f32 is two AVX2 registers; a block of 6 rows, twelve) stays in registers across k.
// Each output element still sums its terms in the same order, so results are bit for bit those
// of the untiled loop (compiled with the same contraction setting).
//
// A statement pass: the pattern and the rewrite are one loop (the `j` loop) and its body.
//
// The pattern, as LowerReductions leaves it: a serial loop over j whose body is
//   Allocs of accumulators (local, one element), then statements that are stores or loop nests
//   of stores (the accumulators' initial values, their update loops, the epilogue that stores
//   the result), then the Frees of the accumulators,
// where
//  - accumulators are accessed at index 0 only;
//  - at least one statement is a loop (a reduction), and loop bounds do not depend on j;
//  - every other buffer the body stores to is stored outside the reduction loops, at one index
//    list that depends on j (c * j + r with c != 0 in some index), and is not read in the body;
//  - profitability: inside the reduction loops, every load that depends on j has `j + r` as its
//    last index and j in no other (or reads rows through (j + r) // c and % c: a row-split
//    read, see CollapseLoops), and there is at least one. A reduction over the last axis
//    (sum over k of x[i, k], or a @ b^T reading b[j, k]) is already contiguous along k and
//    fails this, so it is left alone.
// The first three make the rewrite legal: the only values that flow between statements of one j
// are in its private accumulators, so each statement can run for all j of a tile before the
// next one starts (distribution), and j can move inside the reduction loops (interchange).
//
// The rewrite. With Tj the config key `tile.j` (default 16; 0 or 1 turns the pass off), the
// extent N of j splits into N // Tj full tiles, in a loop `j_outer` (no loop for a single
// one), and a tail tile of N % Tj columns, whose statements are the same with that width. A
// tile allocates its accumulators as a row (Tj elements; a constant tail uses its own width),
// and each of its statements gets an innermost loop `j_inner` over the tile's columns: stores
// inside it, a reduction nest innermost. A symbolic N always has a tail tile; when N % Tj is 0
// at run time its j_inner loops run zero times, which costs the empty reduction loop per row.
//
// Row blocks and packed panels. With `tile.i` rows (default 6) the i loop runs in blocks whose
// accumulators form a rows x Tj block, so each vector of b loaded feeds every row. When the
// operand read along j does not depend on i (b of a matmul) and `tile.pack` is on (default),
// the column tiles go outermost and each copies its K x Tj panel of b into a contiguous local
// buffer once, which every row block then reads with unit stride (see TileRows): at 1024^3
// this took the kernel from 0.9 to 1.4 times Eigen's speed, single-threaded.
//
// K blocks (`tile.k`, tile_panels.cc): a packed tile runs its reduction in blocks whose panels
// fit 24 KiB, so a panel stays in L1 while every row block reads it; the accumulator rows wait
// in a local tile between blocks (the MLP at 32x784: -5 %). A panel that would mostly copy the
// same elements again (a 3x3 stride-1 conv's taps are shifts of three rows) is not made: the
// operand is read in place (dynamic_conv at 224x224: -7 %, the small CNN -5 to -7 %).
//
// Pre-packed operands. An operand already laid out as panels, read as b[j // T, k, j % T]
// (PrepackedWidth: gemm's b_panel, made once per specialization by PackConstantWeights), fixes
// Tj to T and is read in place: its tiles start at multiples of T, so column j0 + c of a tile
// is b[j0 / T, k, c], contiguous in c. It takes the packed loop order (column tiles outermost,
// K blocks) with nothing copied (the MLP at batch 32: 225 -> 190 us).
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/tile_internal.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace tile_internal {

using loop::Access;
using loop::AffineCoefficient;
using loop::Mentions;
using loop::SameIndices;

bool IsAccumulator(const Buffer& b) {
  int64_t n;
  return b->scope == BufferNode::Scope::kLocal && b->shape.size() == 1 && b->strides.empty() &&
         loop::IsConstInt(b->shape[0], &n) && n == 1;
}

std::optional<ReductionBody> SplitBody(const Stmt& body) {
  const loop::SeqNode* seq = loop::AsSeq(body);
  if (!seq) return std::nullopt;
  const std::vector<Stmt>& s = seq->stmts;
  ReductionBody out;
  size_t k = 0;
  for (; k < s.size() && loop::AsAlloc(s[k]); ++k) {
    if (!IsAccumulator(loop::AsAlloc(s[k])->buffer)) return std::nullopt;
    out.accumulators.push_back(loop::AsAlloc(s[k])->buffer);
  }
  size_t end = s.size();
  std::set<const BufferNode*> freed;
  for (; end > k && loop::AsFree(s[end - 1]); --end)
    freed.insert(loop::AsFree(s[end - 1])->buffer.get());
  if (out.accumulators.empty() || freed.size() != out.accumulators.size()) return std::nullopt;
  for (const Buffer& b : out.accumulators)
    if (!freed.count(b.get())) return std::nullopt;
  out.statements.assign(s.begin() + k, s.begin() + end);
  return out;
}

// Collects the accesses of the body's statements and whether they keep to the pattern.
class PatternScanner : public loop::AccessScanner {
 public:
  explicit PatternScanner(const VarNode* j) : j_(j) {}
  bool ok = true;
  bool has_loop = false;

  void VisitExpr(const Expr& e) override {
    if (e && (e->lanes != 1 || e->kind == loop::ExprKind::kReduce)) ok = false;
    loop::Visitor::VisitExpr(e);
  }
  void VisitStmt(const Stmt& s) override {
    if (!s) return;
    switch (s->kind) {
      case loop::StmtKind::kStore:
      case loop::StmtKind::kFor:
      case loop::StmtKind::kSeq:
        loop::Visitor::VisitStmt(s);
        return;
      default:  // lets, ifs, allocs, blocks: outside the pattern
        ok = false;
    }
  }

 protected:
  void VisitFor(const loop::ForNode* n, const Stmt& self) override {
    if (n->for_kind != ForKind::kSerial || Mentions(n->min, j_) || Mentions(n->extent, j_))
      ok = false;
    has_loop = true;
    loop::AccessScanner::VisitFor(n, self);
  }

 private:
  const VarNode* j_;
};

int64_t PrepackedWidth(const std::vector<Expr>& idx, const VarNode* j) {
  if (idx.size() != 3 || Mentions(idx[1], j)) return 0;
  const loop::BinaryNode* div = loop::AsBinary(idx[0]);
  const loop::BinaryNode* mod = loop::AsBinary(idx[2]);
  int64_t t = 0, u = 0;
  if (!div || !mod || div->op != loop::BinaryOp::kFloorDiv ||
      mod->op != loop::BinaryOp::kFloorMod ||
      div->a.get() != static_cast<const loop::ExprNode*>(j) ||
      mod->a.get() != static_cast<const loop::ExprNode*>(j) || !loop::IsConstInt(div->b, &t) ||
      !loop::IsConstInt(mod->b, &u) || t != u || t < 2)
    return 0;
  return t;
}

// The panel width of the pre-packed operands the j loop's body reads (PrepackedWidth), 0 when
// there are none, -1 when two disagree.
int64_t BodyPrepackedWidth(const ReductionBody& body, const VarNode* j) {
  loop::AccessScanner scan;
  for (const Stmt& s : body.statements) scan.VisitStmt(s);
  int64_t width = 0;
  for (const Access& a : scan.accesses) {
    if (a.store) continue;
    int64_t t = PrepackedWidth(*a.indices, j);
    if (t == 0) continue;
    if (width != 0 && width != t) return -1;
    width = t;
  }
  return width;
}

// The legality and profitability rules of the file comment.
bool Tileable(const ReductionBody& body, const VarNode* j) {
  PatternScanner scan(j);
  for (const Stmt& s : body.statements) scan.VisitStmt(s);
  if (!scan.ok || !scan.has_loop) return false;
  std::set<const BufferNode*> accs, stored;
  for (const Buffer& b : body.accumulators) accs.insert(b.get());
  for (const Access& a : scan.accesses)
    if (a.store && !accs.count(a.buffer)) stored.insert(a.buffer);
  bool contiguous_load = false;
  for (const Access& a : scan.accesses) {
    const std::vector<Expr>& idx = *a.indices;
    if (accs.count(a.buffer)) {
      int64_t zero;
      if (idx.size() != 1 || !loop::IsConstInt(idx[0], &zero) || zero != 0) return false;
      continue;
    }
    if (stored.count(a.buffer)) {
      if (!a.store || a.loop_depth > 0) return false;
      bool injective = false;
      for (const Expr& e : idx) {
        std::optional<int64_t> c = AffineCoefficient(e, j);
        injective = injective || (c && *c != 0);
      }
      if (!injective) return false;
      for (const Access& other : scan.accesses)
        if (other.buffer == a.buffer && !SameIndices(idx, *other.indices)) return false;
      continue;
    }
    if (a.loop_depth == 0 || idx.empty()) continue;
    bool depends = false;
    for (const Expr& e : idx) depends = depends || Mentions(e, j);
    if (!depends) continue;
    if (PrepackedWidth(idx, j) > 0) {
      contiguous_load = true;
      continue;
    }
    for (size_t k = 0; k + 1 < idx.size(); ++k)
      if (Mentions(idx[k], j)) return false;
    std::optional<int64_t> c = AffineCoefficient(idx.back(), j);
    if ((!c || *c != 1) && !loop::IsRowSplitWalk(idx.back(), j, loop::kRowSplitAlign)) return false;
    contiguous_load = true;
  }
  return contiguous_load;
}

// Rewrites one statement for a tile: j becomes `j0 + j_inner`, i (in a row block) `base + r`,
// and each accumulator's element 0 becomes element `r * row_extent + j_inner` of its block.
class TileRewriter : public loop::Mutator {
 public:
  TileRewriter(const VarNode* j, Expr j0, Expr j_value, const RowBlock* block, Expr lane,
               std::vector<std::pair<Buffer, Buffer>> rows,
               const std::vector<PackedLoad>* packs = nullptr, Expr column = {}, int64_t tile = 0)
      : j_(j),
        j0_(std::move(j0)),
        j_value_(std::move(j_value)),
        block_(block),
        lane_(std::move(lane)),
        rows_(std::move(rows)),
        packs_(packs),
        column_(std::move(column)),
        tile_(tile) {}

 protected:
  Expr MutateVar(const VarNode* n, const Expr& self) override {
    if (n == j_) return j_value_;
    if (block_ && n == block_->i) {
      Expr row = loop::Add(block_->base, block_->r);
      return block_->last ? loop::Min(row, block_->last) : row;
    }
    return self;
  }
  Expr MutateLoad(const loop::LoadNode* n, const Expr& self) override {
    if (const Buffer* row = Row(n->buffer)) return loop::Load(*row, {lane_});
    if (packs_)
      for (const PackedLoad& p : *packs_)
        if (!p.in_place && n->buffer == p.src && SameIndices(n->indices, p.indices)) {
          Expr k = loop::Sub(p.k->var, p.k->min);
          return loop::Load(p.panel, {loop::Add(loop::Mul(k, loop::IntImm(tile_)), column_)});
        }
    // A pre-packed operand: the tile starts at j0, a multiple of the panel width T (the tiles
    // are T wide), and its columns are those of panel j0 // T.
    if (int64_t t = PrepackedWidth(n->indices, j_); t > 0)
      return loop::Load(n->buffer,
                        {loop::FloorDiv(j0_, loop::IntImm(t)), MutateExpr(n->indices[1]), column_});
    return loop::Mutator::MutateLoad(n, self);
  }
  Stmt MutateStore(const loop::StoreNode* n, const Stmt& self) override {
    if (const Buffer* row = Row(n->buffer)) return loop::Store(*row, {lane_}, MutateExpr(n->value));
    return loop::Mutator::MutateStore(n, self);
  }

 private:
  const Buffer* Row(const Buffer& acc) const {
    for (const auto& [from, to] : rows_)
      if (from == acc) return &to;
    return nullptr;
  }

  const VarNode* j_;
  Expr j0_;
  Expr j_value_;
  const RowBlock* block_;
  Expr lane_;
  std::vector<std::pair<Buffer, Buffer>> rows_;
  const std::vector<PackedLoad>* packs_;
  Expr column_;
  int64_t tile_;
};

// Whether the statement `s` of a tile only zeroes or accumulates: it holds a loop (a reduction)
// or stores to accumulators alone (an init).
bool AccumulatesOnly(const Stmt& s, const ReductionBody& body) {
  if (loop::ContainsStmtKind(s, {loop::StmtKind::kFor})) return true;
  loop::AccessScanner scan;
  scan.VisitStmt(s);
  for (const Access& a : scan.accesses)
    if (a.store && std::none_of(body.accumulators.begin(), body.accumulators.end(),
                                [&](const Buffer& b) { return b.get() == a.buffer; }))
      return false;
  return true;
}

// Whether the accumulating statements of `body` (AccumulatesOnly) read along j only
// pre-packed operands of panel width `t`: then they may run over a whole panel, the columns
// past the product's being the panel's zeros, in bounds.
bool ReadsAlongJOnlyPanels(const ReductionBody& body, const VarNode* j, int64_t t) {
  for (const Stmt& s : body.statements) {
    if (!AccumulatesOnly(s, body)) continue;
    loop::AccessScanner scan;
    scan.VisitStmt(s);
    for (const Access& a : scan.accesses) {
      if (a.store) continue;
      bool along_j = false;
      for (const Expr& e : *a.indices) along_j = along_j || Mentions(e, j);
      if (along_j && PrepackedWidth(*a.indices, j) != t) return false;
    }
  }
  return true;
}

Stmt BuildTile(const loop::ForNode* n, const ReductionBody& body, const loop::Var& j_inner,
               const Expr& j0, const Expr& width, const Expr& given_row_extent,
               const RowBlock* block, const std::vector<PackedLoad>* packs) {
  int64_t w = 0;
  bool single = loop::IsConstInt(width, &w) && w == 1;
  // The last, partial panel of a pre-packed operand (a product of fewer columns than a panel,
  // say 10 classes in 16 lanes): the zeroing and accumulating run over the whole panel, its
  // columns past the product zeros in bounds, so the accumulators are whole vectors; only the
  // epilogue keeps to the product's columns. Over exactly its columns, 10 split into 8 + 2
  // lanes: two FMAs a row where one serves.
  Expr row_extent = given_row_extent;
  Expr accumulate_width = width;
  if (body.prepacked > 0 && !single && w > 1 && w < body.prepacked && !packs &&
      ReadsAlongJOnlyPanels(body, n->var.get(), body.prepacked)) {
    row_extent = loop::IntImm(body.prepacked);
    accumulate_width = row_extent;
  }
  // A one-column tile needs no j_inner loop: its lane is 0.
  Expr column = single ? loop::IntImm(0) : Expr(j_inner);
  Expr lane = block ? loop::Add(loop::Mul(block->r, row_extent), column) : column;
  Expr extent = block ? loop::Mul(loop::IntImm(block->rows), row_extent) : row_extent;
  std::vector<std::pair<Buffer, Buffer>> rows;
  for (const Buffer& acc : body.accumulators)
    rows.push_back(
        {acc, loop::MakeBuffer(acc->name, acc->dtype, {extent}, BufferNode::Scope::kLocal)});
  int64_t tile = 0;
  loop::IsConstInt(width, &tile);
  TileRewriter rewrite(n->var.get(), j0, loop::Add(j0, column), block, lane, rows, packs, column,
                       tile);
  auto inner_loop = [&](const Stmt& s, const Expr& columns) {
    Stmt r = rewrite.MutateStmt(s);
    if (!single) r = loop::For(j_inner, loop::IntImm(0), columns, ForKind::kSerial, r);
    // The row loop goes around j_inner, which stays innermost for the vectorizer; it is
    // unrolled so that each load of a row of b feeds every row's accumulators.
    if (block)
      r = loop::For(block->r, loop::IntImm(0), loop::IntImm(block->rows), ForKind::kUnrolled, r);
    return r;
  };
  // j_inner goes innermost: around each statement that holds no loop.
  std::function<Stmt(const Stmt&, const Expr&)> wrap = [&](const Stmt& s,
                                                           const Expr& columns) -> Stmt {
    if (!loop::ContainsStmtKind(s, {loop::StmtKind::kFor})) return inner_loop(s, columns);
    if (const loop::ForNode* f = loop::AsFor(s))
      return loop::For(f->var, f->min, f->extent, f->for_kind, wrap(f->body, columns));
    std::vector<Stmt> parts;
    for (const Stmt& c : loop::AsSeq(s)->stmts) parts.push_back(wrap(c, columns));
    return loop::Seq(std::move(parts));
  };
  std::vector<Stmt> out;
  for (const auto& [acc, row] : rows) out.push_back(loop::Alloc(row));
  for (const Stmt& s : body.statements)
    out.push_back(wrap(s, AccumulatesOnly(s, body) ? accumulate_width : width));
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) out.push_back(loop::Free(it->second));
  return loop::Seq(std::move(out));
}

// Whether the j loop `n` keeps to the pattern.
std::optional<ReductionBody> TileablePattern(const loop::ForNode* n) {
  if (!n || n->for_kind != ForKind::kSerial || n->var->dtype != DType::kInt64) return std::nullopt;
  int64_t extent = 0;
  if (loop::IsConstInt(n->extent, &extent) && extent < 2) return std::nullopt;
  std::optional<ReductionBody> body = SplitBody(n->body);
  if (!body || !Tileable(*body, n->var.get())) return std::nullopt;
  // Tiles of a pre-packed operand start at multiples of its panel width.
  int64_t panel = BodyPrepackedWidth(*body, n->var.get()), min = 0;
  if (panel < 0 || (panel > 0 && (!loop::IsConstInt(n->min, &min) || min != 0)))
    return std::nullopt;
  body->prepacked = panel;
  return body;
}

// Tiles the j loop `n` (which keeps to the pattern), for one row or a block of rows.
Stmt TileJ(const loop::ForNode* n, const ReductionBody& body, int64_t tile, const RowBlock* block) {
  Expr t = loop::IntImm(tile);
  Expr full = loop::FloorDiv(n->extent, t);
  Expr rest = loop::FloorMod(n->extent, t);
  loop::Var j_inner = loop::MakeVar(n->var->name + "_inner");
  std::vector<Stmt> out;
  int64_t full_count = -1, rest_count = -1;
  loop::IsConstInt(full, &full_count);
  loop::IsConstInt(rest, &rest_count);
  if (full_count == 1) {
    out.push_back(BuildTile(n, body, j_inner, n->min, t, t, block));
  } else if (full_count != 0) {
    loop::Var j_outer = loop::MakeVar(n->var->name + "_outer");
    Stmt tile_body =
        BuildTile(n, body, j_inner, loop::Add(n->min, loop::Mul(j_outer, t)), t, t, block);
    out.push_back(loop::For(j_outer, loop::IntImm(0), full, ForKind::kSerial, tile_body));
  }
  if (rest_count != 0) {
    // A constant tail gets a row of its own width; a symbolic one a full row (on the stack).
    // Its column variable is its own: ParallelizeLoops bounds a variable by the union of its
    // loops' ranges, and the full tiles' 0..tile-1 past the tail's start would reach the next
    // row block (then not run in parallel).
    Expr row = rest_count > 0 ? rest : t;
    out.push_back(BuildTile(n, body, loop::MakeVar(n->var->name + "_inner"),
                            loop::Add(n->min, loop::Mul(full, t)), rest, row, block));
  }
  return loop::Seq(std::move(out));
}

// Whether the rows of the i loop `n`, whose body is the j loop `j`, can run as a block: the
// j loop's and the reduction loops' bounds do not depend on i, and every store outside the
// accumulators writes one element per (i, j) (an index `c * i + r` free of j, another
// `c' * j + r'` free of i, c and c' nonzero; or one index `c * i + c' * j + r` with |c| at least
// |c'| times j's extent, or c the expression c' * extent for a symbolic extent), so no two rows
// touch one element.
bool RowBlockable(const loop::ForNode* n, const loop::ForNode* j, const ReductionBody& body) {
  if (n->for_kind != ForKind::kSerial || n->var->dtype != DType::kInt64) return false;
  const VarNode* i = n->var.get();
  if (Mentions(j->min, i) || Mentions(j->extent, i)) return false;
  bool ok = true;
  std::set<const BufferNode*> accs;
  for (const Buffer& b : body.accumulators) accs.insert(b.get());
  class Scan : public loop::AccessScanner {
   public:
    Scan(const VarNode* i, bool* ok) : i_(i), ok_(ok) {}

   protected:
    void VisitFor(const loop::ForNode* f, const Stmt& self) override {
      if (Mentions(f->min, i_) || Mentions(f->extent, i_)) *ok_ = false;
      loop::AccessScanner::VisitFor(f, self);
    }

   private:
    const VarNode* i_;
    bool* ok_;
  } scan(i, &ok);
  for (const Stmt& s : body.statements) scan.VisitStmt(s);
  if (!ok) return false;
  const VarNode* jv = j->var.get();
  for (const Access& a : scan.accesses) {
    if (!a.store || accs.count(a.buffer)) continue;
    const std::vector<Expr>& idx = *a.indices;
    bool by_i = false, by_j = false, flat = false;
    int64_t j_extent = 0;
    for (const Expr& e : idx) {
      std::optional<int64_t> ci = AffineCoefficient(e, i), cj = AffineCoefficient(e, jv);
      by_i = by_i || (ci && *ci != 0 && !Mentions(e, jv));
      by_j = by_j || (cj && *cj != 0 && !Mentions(e, i));
      // One flat index `ci * i + cj * j + r` (CollapseLoops' form) whose rows do not overlap:
      // j spans less than |ci|.
      flat = flat || (ci && cj && *cj != 0 && loop::IsConstInt(j->extent, &j_extent) &&
                      std::abs(*ci) >= std::abs(*cj) * j_extent);
      // The same with a symbolic row stride (a shape-generic conv's collapsed pixels, h * w
      // per output channel): ci is the expression cj * j's extent, cj > 0.
      if (!flat && !ci && cj && *cj > 0) {
        std::optional<Expr> sci = loop::SymbolicAffineCoefficient(e, i);
        flat = sci && !Mentions(*sci, i) && !Mentions(*sci, jv) &&
               loop::StructuralEqual(loop::SimplifyExpr(*sci),
                                     loop::SimplifyExpr(loop::Mul(loop::IntImm(*cj), j->extent)));
      }
    }
    if (!(by_i && by_j) && !flat) return false;
  }
  return true;
}

Stmt TileRowBlocks(const loop::ForNode* n, int64_t rows,
                   const std::function<Stmt(const RowBlock*)>& tile_for) {
  Expr r_count = loop::IntImm(rows);
  Expr full = loop::FloorDiv(n->extent, r_count);
  Expr rest = loop::FloorMod(n->extent, r_count);
  int64_t full_count = -1, rest_count = -1;
  loop::IsConstInt(full, &full_count);
  loop::IsConstInt(rest, &rest_count);
  std::vector<Stmt> out;
  if (full_count != 0) {
    loop::Var outer = loop::MakeVar(n->var->name + "_outer");
    loop::Var r = loop::MakeVar(n->var->name + "_row");
    Expr base = full_count == 1 ? n->min : loop::Add(n->min, loop::Mul(outer, r_count));
    RowBlock block{n->var.get(), base, r, rows};
    Stmt blocked = tile_for(&block);
    out.push_back(full_count == 1
                      ? blocked
                      : loop::For(outer, loop::IntImm(0), full, ForKind::kSerial, blocked));
  }
  if (rest_count >= 2) {
    // The rows left over as one shorter block, not one by one: a row alone has a row's
    // accumulators, too few to hide the FMA latency. dynamic_conv's 3x3 stride-2 conv 32 -> 32
    // at 320 x 240 (rows of 60 pixels in blocks of 8, 2 vectors: 4 rows left, 2 accumulators
    // each): 545-568 -> 497-521 us, 1 thread (3 alternating runs, AVX-512 Xeon).
    RowBlock block{n->var.get(), loop::Add(n->min, loop::Mul(full, r_count)),
                   loop::MakeVar(n->var->name + "_rest"), rest_count};
    out.push_back(tile_for(&block));
  } else if (rest_count < 0 && rows >= 2) {
    // A symbolic count of rows left over (a shape-generic kernel's batch) runs as one block,
    // the smallest of the sizes below or `rows` that holds it, its rows past the count clamped
    // to the last one (RowBlock::last); a single row alone. Row by row, a row's few
    // accumulators could not hide the FMA latency, and as blocks of the count's binary digits
    // each block read all of the column operand again. Shape-generic kernels at 1 thread,
    // kernel minima (AVX-512 Xeon): the encoder layer at 1 x 7 x 256, each 256 x 256 product
    // 13.0-13.9 us row by row or in binary blocks, 9.9-11.0 in one block (specialized
    // 10.1-11.4); the MLP at 7 x 784 207 us row by row, 121-140 in binary blocks, 96-106 in
    // one block (specialized 90-98).
    Expr start = loop::Add(n->min, loop::Mul(full, r_count));
    Expr last = loop::Sub(loop::Add(n->min, n->extent), loop::IntImm(1));
    auto block_of = [&](int64_t size) {
      RowBlock block{n->var.get(), start, loop::MakeVar(n->var->name + "_rest"), size, last};
      return tile_for(&block);
    };
    // A count that is one shape symbol (a batch, a sequence length) is often small, and then
    // its leftover rows are all of the kernel's work, so the blocks come in finer steps (2, 3,
    // 4, 6, 8, 10, ...: at most one row in six computed for nothing) where a product of
    // symbols (an image's pixels) is large, its leftover a small part, and the blocks double
    // (fewer of them to compile). Shape-generic kernels at 1 thread, AVX-512 Zen 5, run p50
    // (`kiln bench`, bench/tiers.sh): the encoder layer at 1 x 5 x 256 (an 8-row block for 5
    // rows before) 57.5-61.8 -> 43.9-45.5 us (specialized 37-42), the MLP at 5 x 784 43 -> 35.
    const bool fine = n->extent->kind == loop::ExprKind::kVar;
    std::vector<int64_t> sizes;
    for (int64_t s = 2; s < rows; s += fine && s >= 4 ? 2 : fine ? 1 : s) sizes.push_back(s);
    Stmt blocks = block_of(rows);
    for (auto it = sizes.rbegin(); it != sizes.rend(); ++it)
      blocks = loop::IfThenElse(loop::MakeBinary(loop::BinaryOp::kLE, rest, loop::IntImm(*it)),
                                block_of(*it), blocks);
    Stmt one = loop::For(n->var, start, loop::IntImm(1), ForKind::kSerial, tile_for(nullptr));
    out.push_back(loop::IfThenElse(
        loop::MakeBinary(loop::BinaryOp::kNE, rest, loop::IntImm(0)),
        loop::IfThenElse(loop::MakeBinary(loop::BinaryOp::kEQ, rest, loop::IntImm(1)), one,
                         blocks)));
  } else if (rest_count != 0) {
    out.push_back(loop::For(n->var, loop::Add(n->min, loop::Mul(full, r_count)), rest,
                            ForKind::kSerial, tile_for(nullptr)));
  }
  return loop::Seq(std::move(out));
}

}  // namespace tile_internal

}  // namespace kiln
