// CollapseLoops: a loop whose body is one inner loop becomes a single loop over both, when
// every access they make walks memory as the flat index would.
//
//   before:  for h in [0, 28) {                  after:  for h_w in [0, 784) {
//              for w in [0, 28) {                          out[c * 784 + h_w] =
//                out[c, h, w] = x[c, h, w] * s[c]              x[c * 784 + h_w] * s[c]
//              }                                         }
//            }
//
// Why: operators lower to one loop per dimension, and the innermost one is what VectorizeLoops
// turns into vectors. Image tensors have short rows (56, 28, 14, 7 columns), so most of each
// row would run as a scalar tail, and a reduction over [H, W] (a global pool) as a nest of short
// loops. Collapsed, the loop runs over H * W contiguous elements. For a 1x1 convolution the
// collapsed loop is the column loop of a matrix product over the output pixels, which TileLoops
// then blocks, with the bias and activation applied as each tile is stored.
//
// The rule. A serial loop over a in [0, A) whose body is exactly a serial loop over b in
// [0, B) (mins 0; extents constant, or symbolic as below) collapses when every load and store in
// the inner body that reads a or b has a flat element offset F (sum of index * stride, with the
// buffer's strides or row-major ones) that is affine in both, with coef(a) = B * coef(b): then F =
// coef(b) * (a * B + b) + r, and with p = a * B + b running over [0, A * B) in order, the access is
// F(a = 0, b = p), and iterations run in the same order as before. a and b must appear nowhere else
// (a loop bound, a condition, a value): those would need p // B and p % B. A rewritten access is a
// single flat index into its buffer, re-made with explicit strides for the whole function (every
// reference to a buffer names one object); Verify, FlattenBuffers and the code generator read a
// single index into a buffer with explicit strides as the flat offset. Applied bottom up, so [N, C,
// H, W] elementwise loops collapse to one loop where all accesses allow it (a broadcast along C
// stops the collapse at C).
//
// Row-split reads. Before TileLoops (below), a column walk whose rows lie Q elements apart
// where the loop pair covers B < Q of each (a 3x3 conv reading its zero-padded input: rows of
// W + 2, output rows of W) does not fit the rule, yet collapsing still pays: the output and
// every other access are flat in p, and the walk reads through F(a = p // B, b = p % B). When B
// is a multiple of 16, a vector of p that starts at a multiple of its width lies in one row, and
// VectorizeLoops turns p // B into a scalar and p % B into a ramp, so the walk's lanes are
// contiguous (the small CNN's 3x3 conv at 16 x 16 then computes 256 columns per image, not the
// 288 of its padded rows).
//
// Symbolic extents (a shape-generic kernel's image, [C, H, W] with H and W run-time values):
// the same rule, with coefficients that are expressions: coef(a) must be the same expression
// as B * coef(b), as a dense buffer's strides are (x[c, h, w]: w for h, 1 for w). Uncollapsed,
// the column loop of such a kernel is an image row, and the rows of a detection net's deep
// layers (10, 20, 40 pixels) ran mostly or wholly in scalar tails: its generic 1x1 convs took
// 20-45x the specialized ones. No row-split reads there (their rows must be a multiple of 16).
//
// Two modes, two places in the pipeline (option `column_walks_only`):
//  - before TileLoops, only pairs whose inner loop holds a reduction that reads along the
//    collapsed variable with coefficient 1 (the column walk TileLoops blocks: a 1x1 conv's
//    pixels). Collapsing more there would hide the row structure FuseLoops needs (a layer norm
//    is a row loop around reductions along the last axis; those are left alone).
//  - after FuseLoops, all pairs.
#include <map>
#include <optional>
#include <utility>

#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/symbolic_bound.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::VarNode;

bool MentionsAny(const std::vector<Expr>& indices, const VarNode* a, const VarNode* b) {
  for (const Expr& e : indices)
    if (loop::Mentions(e, a) || loop::Mentions(e, b)) return true;
  return false;
}

// Uses of two variables outside the index lists of loads and stores. Loads are skipped whole:
// their indices are among the accesses AccessScanner lists, which TryCollapse checks apart.
class OtherUses : public loop::Visitor {
 public:
  OtherUses(const VarNode* a, const VarNode* b) : a_(a), b_(b) {}
  bool found = false;

 protected:
  void VisitVar(const VarNode* n, const Expr&) override { found |= n == a_ || n == b_; }
  void VisitLoad(const loop::LoadNode*, const Expr&) override {}  // indices checked apart
  void VisitStore(const loop::StoreNode* n, const Stmt&) override { VisitExpr(n->value); }

 private:
  const VarNode* a_;
  const VarNode* b_;
};

// The variables of the loops inside a statement.
class InnerLoopVars : public loop::Visitor {
 public:
  loop::VarSet vars;

 protected:
  void VisitFor(const loop::ForNode* n, const Stmt& self) override {
    vars.insert(n->var.get());
    loop::Visitor::VisitFor(n, self);
  }
};

class Collapser : public loop::Mutator {
 public:
  Collapser(bool column_walks_only, loop::VarSet dims)
      : column_walks_only_(column_walks_only), dims_(std::move(dims)) {}

  // The buffers collapses re-made, each once for the whole function.
  const loop::ExplicitStrides& strided() const { return strided_; }
  bool changed() const { return !strided_.empty() || collapsed_; }

 protected:
  Stmt MutateFor(const loop::ForNode* n, const Stmt& self) override {
    Stmt s = Mutator::MutateFor(n, self);
    const loop::ForNode* outer = loop::AsFor(s);
    if (!outer) return s;
    if (Stmt c = TryCollapse(outer)) {
      collapsed_ = true;
      return c;
    }
    return s;
  }

 private:
  Stmt TryCollapse(const loop::ForNode* outer) {
    const loop::ForNode* inner = loop::AsFor(outer->body);
    int64_t a_extent = 0, b_extent = 0, zero;
    if (!inner || outer->for_kind != ForKind::kSerial || inner->for_kind != ForKind::kSerial ||
        !loop::IsConstInt(outer->min, &zero) || zero != 0 || !loop::IsConstInt(inner->min, &zero) ||
        zero != 0)
      return nullptr;
    const bool constant =
        loop::IsConstInt(outer->extent, &a_extent) && loop::IsConstInt(inner->extent, &b_extent);
    if (constant && (a_extent < 1 || b_extent < 1)) return nullptr;
    // A symbolic pair runs A * B times: only when neither extent can be negative (two
    // negative ones would run a positive product of iterations where the pair ran none).
    if (!constant && !(NonNegative(outer->extent) && NonNegative(inner->extent))) return nullptr;
    const VarNode* a = outer->var.get();
    const VarNode* b = inner->var.get();
    OtherUses other(a, b);
    other.VisitStmt(inner->body);
    if (other.found) return nullptr;
    loop::AccessScanner scan;
    scan.VisitStmt(inner->body);
    InnerLoopVars inner_loops;
    inner_loops.VisitStmt(inner->body);
    // Coefficients must be the same in every iteration of the pair: free of its variables,
    // of the loops inside and of loads.
    loop::VarSet variant = inner_loops.vars;
    variant.insert(a);
    variant.insert(b);
    bool column_walk = false;
    for (const loop::Access& acc : scan.accesses) {
      if (!MentionsAny(*acc.indices, a, b)) continue;
      std::optional<Expr> flat = loop::FlatIndex(*acc.buffer, *acc.indices);
      if (!flat) return nullptr;
      if (!constant) {
        // A symbolic extent (a shape-generic kernel's image): the same rule with coefficients
        // that are expressions, coef(a) the same expression as B * coef(b) (the strides of a
        // dense buffer are products of the extents inside: x[c, h, w] has w for h), and no
        // row-split reads.
        std::optional<Expr> ca = loop::SymbolicAffineCoefficient(*flat, a);
        std::optional<Expr> cb = loop::SymbolicAffineCoefficient(*flat, b);
        if (!ca || !cb || loop::MentionsOrLoads(*ca, variant) ||
            loop::MentionsOrLoads(*cb, variant) ||
            !loop::StructuralEqual(loop::SimplifyExpr(*ca),
                                   loop::SimplifyExpr(loop::Mul(inner->extent, *cb))))
          return nullptr;
        int64_t unit = 0;
        column_walk |= !acc.store && acc.loop_depth > 0 && loop::IsConstInt(*cb, &unit) &&
                       unit == 1 && loop::Mentions(*flat, inner_loops.vars);
        continue;
      }
      std::optional<int64_t> ca = loop::AffineCoefficient(*flat, a);
      std::optional<int64_t> cb = loop::AffineCoefficient(*flat, b);
      if (!ca || !cb) return nullptr;
      // A walk moves along b and along a loop inside (a 1x1 conv's x[k, p] under the k of its
      // reduction); a value the inner loops only re-read (a layer norm's row mean, read in
      // each term of its variance) is no column walk, and collapsing its row loops early
      // would keep FuseLoops from fusing them with the row's other loops.
      const bool walk =
          !acc.store && acc.loop_depth > 0 && *cb == 1 && loop::Mentions(*flat, inner_loops.vars);
      // A column walk over rows that lie further apart than B (a padded input's rows) may
      // read through p // B and p % B, see the file comment.
      if (*ca != b_extent * *cb &&
          !(walk && column_walks_only_ && b_extent % loop::kRowSplitAlign == 0))
        return nullptr;
      column_walk |= walk;
    }
    if (column_walks_only_ && !column_walk) return nullptr;

    loop::Var p = loop::MakeVar(outer->var->name + "_" + inner->var->name);
    AccessRewriter rewrite(this, outer->var, inner->var, p, constant ? b_extent : 0);
    Stmt body = rewrite.MutateStmt(inner->body);
    return loop::For(
        p, loop::IntImm(0),
        constant ? loop::IntImm(a_extent * b_extent) : loop::Mul(outer->extent, inner->extent),
        ForKind::kSerial, body);
  }

  // Rewrites the accesses of one collapsed body to single flat indices in p.
  class AccessRewriter : public loop::Mutator {
   public:
    AccessRewriter(Collapser* c, loop::Var a, loop::Var b, loop::Var p, int64_t b_extent)
        : c_(c), a_(std::move(a)), b_(std::move(b)), p_(std::move(p)), b_extent_(b_extent) {}

   protected:
    Expr MutateLoad(const loop::LoadNode* n, const Expr& self) override {
      Expr e = Mutator::MutateLoad(n, self);
      const loop::LoadNode* load = loop::AsLoad(e);
      if (!load || !MentionsAny(load->indices, a_.get(), b_.get())) return e;
      return loop::Load(c_->strided_.Strided(load->buffer), {Flat(*load->buffer, load->indices)});
    }
    Stmt MutateStore(const loop::StoreNode* n, const Stmt& self) override {
      Stmt s = Mutator::MutateStore(n, self);
      const loop::StoreNode* store = loop::AsStore(s);
      if (!store || !MentionsAny(store->indices, a_.get(), b_.get())) return s;
      return loop::Store(c_->strided_.Strided(store->buffer),
                         {Flat(*store->buffer, store->indices)}, store->value);
    }

   private:
    Expr Flat(const loop::BufferNode& buf, const std::vector<Expr>& indices) {
      Expr flat = *loop::FlatIndex(buf, indices);  // TryCollapse checked every such access
      // Affine with coef(a) = B * coef(b) (TryCollapse's rule; always, for a symbolic B, which
      // b_extent_ 0 stands for), else a row-split read.
      if (b_extent_ == 0 || *loop::AffineCoefficient(flat, a_.get()) ==
                                b_extent_ * *loop::AffineCoefficient(flat, b_.get()))
        return loop::Substitute(loop::Substitute(flat, a_, loop::IntImm(0)), b_, p_);
      Expr row = loop::FloorDiv(p_, loop::IntImm(b_extent_));
      Expr column = loop::FloorMod(p_, loop::IntImm(b_extent_));
      return loop::Substitute(loop::Substitute(flat, a_, row), b_, column);
    }
    Collapser* c_;
    loop::Var a_, b_, p_;
    int64_t b_extent_;
  };

  // Whether an extent is >= 0 for every value of the kernel's dims (>= 0 themselves).
  bool NonNegative(const Expr& extent) const {
    loop::SymbolicForms forms({}, {}, dims_);
    std::optional<loop::SymbolicForms::Form> f = forms.Of(extent);
    return f && forms.ProvablyNonNegative(*f);
  }

  bool column_walks_only_;
  loop::VarSet dims_;  // the kernel's scalar parameters
  bool collapsed_ = false;
  loop::ExplicitStrides strided_;
};

loop::PrimFunc CollapseLoops(const loop::PrimFunc& f, bool column_walks_only) {
  loop::VarSet dims;
  for (const loop::Var& d : f->scalar_params) dims.insert(d.get());
  Collapser collapser(column_walks_only, std::move(dims));
  Stmt body = collapser.MutateStmt(f->body);
  if (!collapser.changed()) return f;
  // Allocs, frees and accesses the collapses did not rewrite still name the old buffers.
  auto out = std::make_shared<loop::PrimFuncNode>(*f);
  for (Buffer& b : out->buffer_params) b = collapser.strided().Current(b);
  out->body = collapser.strided().ReplaceIn(body);
  return out;
}

}  // namespace

void RegisterCollapseLoopsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "CollapseLoops",
      .opt_level = 2,
      .required = {},
      .options = {{"column_walks_only", AttrKind::kBool, AttrValue{false}, nullptr}},
      .doc = "make a loop and the one loop in its body a single loop over both where every "
             "access is affine in the flat index; column_walks_only: only around reductions "
             "that read along the inner loop (for TileLoops)",
      .create =
          [](const Attrs& o) {
            bool column_walks_only = o.GetBool("column_walks_only");
            return CreateLoopFuncPass(
                PassInfo{"CollapseLoops", 2, {}},
                [column_walks_only](const loop::PrimFunc& f, const PassContext&) {
                  return CollapseLoops(f, column_walks_only);
                },
                o);
          },
  });
}

}  // namespace kiln
