// ParallelizeLoops: the outermost loop of each loop nest runs on the thread pool.
//
//   before:  for i in [0, n) {
//              for j in [0, 16) {
//                out[i, j] = a[i, j] + b[j]
//              }
//            }
//   after:   for i in [0, n) parallel {
//              for j in [0, 16) {
//                out[i, j] = a[i, j] + b[j]
//              }
//            }
//
// A function pass: "outermost" is a property of where a loop sits in the whole kernel, which a
// statement or block pass (no context about parents) cannot see.
//
// Which loops. The outermost loop of every loop nest (every loop not inside another loop),
// when it is serial and all three hold:
//  - Safety: its iterations touch disjoint elements of every buffer they write. For each buffer
//    stored to in the loop, other than those allocated inside it (private to an iteration),
//    some dimension d must be indexed `c * i + w + r` by every load and store of that buffer,
//    with one c != 0 and one r for all of them, r free of loads and of variables bound inside
//    the loop, and w a sum of constant multiples of inner loop variables with constant bounds
//    whose values (over all those accesses) span fewer than |c|. Then iteration i keeps to its
//    own window of dimension d: [c * i + r + min w, c * i + r + max w]. This accepts `out[i, j]`
//    and a tiled `out[j_outer * 64 + j_inner]` (j_inner in [0, 64)), and rejects a reduction into
//    an accumulator declared outside the loop (`acc[0] = acc[0] + x[i]`: c = 0), overlapping
//    writes (`out[i + j]` with j in [0, 4): the span 3 is not below 1), indirect ones
//    (`out[idx[i]]`), and reads of what other iterations write (`t[i] = t[i - 1]`: r differs).
//  - Enough work to repay handing out chunks: its extent times the work of its body reaches the
//    config key `parallelize.min_work` (default 16384 elements). The work of a body is the
//    number of stores it runs, counting a loop's body extent times. A symbolic extent with a
//    known bound counts as that bound: the tails tiling and vectorization leave (`n % 64`) are
//    short.
//  - Shape-generic kernels: any other symbolic extent (here or on a loop inside the body) is
//    taken to be large. Such a kernel is compiled once for every shape, its symbols are the
//    batch and sequence dims that are large when speed matters, and oneTBB runs a one-element
//    range on the calling thread. So a loop with a symbolic extent is parallel as soon as its
//    body stores anything.
// Loops that fail a test are left as they are, and the pass does not look further in: parallel
// loops are not nested (but see "Nested" below), and a nest whose outermost loop is not worth
// it has little work.
//
// Collapsing. When the outermost loop has a constant extent below `parallelize.collapse_below`
// (default 64, about the threads of a large machine), its body is exactly one serial loop
// (both starting at 0, the inner extent not depending on the outer variable) whose iterations
// are independent in the same sense, and that inner loop is not the innermost one, the two
// become one parallel loop over their product, with the old variables recomputed by lets:
//
//   for b_i in [0, 256) parallel {      // was: for b in [0, 2) { for i in [0, 128) {
//     let b = b_i // 128;
//     let i = b_i % 128;
//     for j in [0, 64) { ... }
//   }
//
// Distinct (b, i) pairs touch disjoint elements because distinct b do (the outer check) and,
// for one b, distinct i do (the inner check). The innermost loop is never collapsed into the
// parallel one, so it keeps its unit stride for VectorizeLoops. Only two loops are collapsed.
// An outer loop with a symbolic extent and no known bound collapses the same way (unless
// collapse_below is 0): it is a shape-generic kernel's batch, which serving often runs at 1,
// and a batch-1 product parallel over its batch ran on one thread.
//
// Nested. A symbolic outer loop that cannot collapse (its body is several nests: a product and
// its epilogue, a padded conv's borders and interior) is parallel, and so are the nests of its
// body that pass the tests above (one level down, no further):
//
//   for b in [0, batch) parallel {
//     alloc t: f32[seq, 1024] local
//     for p in [0, 21) parallel { <the product's column panels into t> }
//     for i in [0, seq) parallel { <the epilogue over t> }
//   }
//
// kiln_parallel_for runs a loop of one iteration on the calling thread, where the loops inside
// then take the threads, and runs a loop met inside a chunk of another serially there. So a
// batch of 1 splits its panels and rows among the threads and a larger batch splits the batch,
// from one copy of the code (a copy per case, under `if (batch < 4)`, cost the dynamic-image
// conv net 65% more compile time for its generic kernels). A specialized kernel has no such
// loop: its batch is a constant, and a batch of 1 is no loop at all. The batch-1 encoder layer
// through the generic tier, 2 threads: p50 0.10 -> 0.028 ms (specialized 0.022).
//
// A symbolic outer loop whose iterations the safety test cannot tell apart stays serial, and
// the nests of its body that pass the tests and run over a symbolic extent inside (an image's
// rows, each over its symbolic columns) are parallel, one level down as above:
//
//   for b in [0, batch) {                       // a padded conv's result: the border rows,
//     for j in [0, (w + 2) * 16) { <zeros> }    // collapsed to a flat index, and the tails'
//     for i in [0, h) { <zero the left column> } // clamped columns `min(w // 8 * 8 + r, w - 1)`
//     for i in [0, h) parallel { <a row of the conv, its column tiles and tails> }
//   }
//
// The small nests (a border column) stay serial: a parallel loop costs a hand-out of chunks
// per execution, and here it is one per batch element. A row nest is parallel only where its
// work, counted when the kernel runs from the dims (WorkExpr, InChunks), reaches min_work as a
// constant extent's must; a smaller image runs as one chunk on the calling thread. A kernel
// compiled for one thread (target.threads 1) is left as it was: outlined rows only cost there.
// Without this a generic conv with a padded result, and Winograd's (its padded copy, tiles and
// crop in one batch loop), ran on one thread at any thread count. Through the generic tier at
// 2 threads (p50, 3 alternating runs): dynamic_conv at 320x240 2.14-2.20 -> 1.26-1.31 ms
// (specialized 1.03-1.07), 128x128 0.43-0.44 -> 0.29-0.31, 64x48 0.083-0.093 -> 0.072-0.078;
// the ResNet-style net 42 -> 30 ms. Small images pay for the hand-outs and the rows' data
// crossing between cores: 17x23 0.019-0.020 -> 0.023-0.025, 32x32 0.028 -> 0.036-0.041.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/symbolic_bound.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

using loop::Access;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::VarNode;

constexpr char kMinWorkKey[] = "parallelize.min_work";
constexpr char kCollapseBelowKey[] = "parallelize.collapse_below";
constexpr char kThreadsKey[] = "target.threads";

using loop::VarSet;

struct Options {
  int64_t min_work;
  int64_t collapse_below;
  const VarSet* dims;  // the kernel's scalar parameters: dims, >= 0
  bool nest = true;    // whether the nests inside a symbolic outer loop may be parallel too
  // Inside a symbolic outer loop left serial: only nests with a symbolic extent inside them.
  bool over_images = false;
  int64_t threads = 0;  // target.threads: the kernel's (0: unknown)
};

// Inclusive value ranges of loop variables inside the loop being checked.
using Range = loop::Interval;
using Ranges = loop::VarIntervals;

// `e` as `coefficient * v + sum(inner[u] * u) + offset + rest`, where v is the loop's variable,
// each u a loop variable inside it with a constant range, offset a constant and rest mentions
// no buffer and no variable bound inside the loop (so it is the same in every iteration). The
// constant terms gather in offset, which counts with the inner terms' window: a column tile's
// `j_outer * 48 + j_inner` and its tail's `1008 + j_inner` share rest (0).
struct AffineForm {
  int64_t coefficient = 0;
  std::map<const VarNode*, int64_t> inner;
  Expr rest;
  int64_t offset = 0;
};

bool IsZero(const Expr& e) {
  int64_t c;
  return loop::IsConstInt(e, &c) && c == 0;
}

std::optional<AffineForm> SplitAffine(const Expr& e, const VarNode* v, const VarSet& bound,
                                      const Ranges& ranges) {
  if (e.get() == v) return AffineForm{1, {}, loop::IntImm(0)};
  if (const VarNode* u = loop::AsVar(e); u && ranges.count(u))
    return AffineForm{0, {{u, 1}}, loop::IntImm(0)};
  if (int64_t c; loop::IsConstInt(e, &c)) return AffineForm{0, {}, loop::IntImm(0), c};
  if (!loop::MentionsOrLoads(e, bound)) return AffineForm{0, {}, e};
  const loop::BinaryNode* b = loop::AsBinary(e);
  if (!b) return std::nullopt;
  std::optional<AffineForm> x = SplitAffine(b->a, v, bound, ranges);
  std::optional<AffineForm> y = SplitAffine(b->b, v, bound, ranges);
  if (!x || !y) return std::nullopt;
  // Coefficients are small in practice; one that overflows just fails the check.
  auto scaled = [](AffineForm f, int64_t c, const Expr& by) -> std::optional<AffineForm> {
    if (__builtin_mul_overflow(f.coefficient, c, &f.coefficient) ||
        __builtin_mul_overflow(f.offset, c, &f.offset))
      return std::nullopt;
    for (auto& [u, k] : f.inner)
      if (__builtin_mul_overflow(k, c, &k)) return std::nullopt;
    if (!IsZero(f.rest)) f.rest = loop::Mul(f.rest, by);
    return f;
  };
  auto combined = [](AffineForm f, const AffineForm& g, int64_t sign,
                     Expr rest) -> std::optional<AffineForm> {
    if (__builtin_add_overflow(f.coefficient, sign * g.coefficient, &f.coefficient) ||
        __builtin_add_overflow(f.offset, sign * g.offset, &f.offset))
      return std::nullopt;
    for (const auto& [u, k] : g.inner)
      if (__builtin_add_overflow(f.inner[u], sign * k, &f.inner[u])) return std::nullopt;
    f.rest = std::move(rest);
    return f;
  };
  int64_t c;
  switch (b->op) {
    case loop::BinaryOp::kAdd:
      return combined(*x, *y, 1,
                      IsZero(x->rest)   ? y->rest
                      : IsZero(y->rest) ? x->rest
                                        : loop::Add(x->rest, y->rest));
    case loop::BinaryOp::kSub:
      return combined(*x, *y, -1, IsZero(y->rest) ? x->rest : loop::Sub(x->rest, y->rest));
    case loop::BinaryOp::kMul:
      if (y->coefficient == 0 && y->inner.empty() && loop::IsConstInt(b->b, &c))
        return scaled(*x, c, b->b);
      if (x->coefficient == 0 && x->inner.empty() && loop::IsConstInt(b->a, &c))
        return scaled(*y, c, b->a);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// The values `sum(inner[u] * u) + offset` of a form takes, or nullopt on overflow.
std::optional<Range> InnerRange(const AffineForm& f, const Ranges& ranges) {
  Range r{f.offset, f.offset};
  for (const auto& [u, k] : f.inner) {
    const Range& ur = ranges.at(u);
    int64_t a, b;
    if (__builtin_mul_overflow(k, ur.min, &a) || __builtin_mul_overflow(k, ur.max, &b) ||
        __builtin_add_overflow(r.min, std::min(a, b), &r.min) ||
        __builtin_add_overflow(r.max, std::max(a, b), &r.max))
      return std::nullopt;
  }
  return r;
}

// The accesses in a loop body, the variables bound inside it (with the ranges of the loop
// variables whose bounds are constant) and the buffers it allocates.
class NestScanner : public loop::AccessScanner {
 public:
  VarSet bound;
  std::set<const loop::BufferNode*> allocated;

  // Ranges of loop variables all of whose loops have constant bounds (a variable may be bound
  // by several sibling loops).
  Ranges ConstantRanges() const {
    Ranges out;
    for (const auto& [v, r] : ranges_)
      if (!unbounded_.count(v)) out.emplace(v, r);
    return out;
  }

  // The (min, extent) of each loop variable whose loops all have the same bounds, constant or
  // not.
  std::map<const VarNode*, std::pair<Expr, Expr>> LoopBounds() const {
    std::map<const VarNode*, std::pair<Expr, Expr>> out = bounds_;
    for (const VarNode* v : uneven_) out.erase(v);
    return out;
  }

 protected:
  void VisitAlloc(const loop::AllocNode* n, const Stmt& self) override {
    allocated.insert(n->buffer.get());
    loop::Visitor::VisitAlloc(n, self);
  }
  void VisitFor(const loop::ForNode* n, const Stmt& self) override {
    bound.insert(n->var.get());
    auto [at, first] = bounds_.emplace(n->var.get(), std::make_pair(n->min, n->extent));
    if (!first && !(loop::StructuralEqual(at->second.first, n->min) &&
                    loop::StructuralEqual(at->second.second, n->extent)))
      uneven_.insert(n->var.get());
    int64_t min, extent, max;
    if (loop::IsConstInt(n->min, &min) && loop::IsConstInt(n->extent, &extent) && extent > 0 &&
        !__builtin_add_overflow(min, extent - 1, &max)) {
      auto [it, fresh] = ranges_.emplace(n->var.get(), Range{min, max});
      if (!fresh) it->second = Range{std::min(it->second.min, min), std::max(it->second.max, max)};
    } else {
      unbounded_.insert(n->var.get());
    }
    loop::AccessScanner::VisitFor(n, self);
  }
  void VisitLetStmt(const loop::LetStmtNode* n, const Stmt& self) override {
    bound.insert(n->var.get());
    loop::Visitor::VisitLetStmt(n, self);
  }
  void VisitScheduleBlock(const loop::ScheduleBlockNode* n, const Stmt& self) override {
    for (const loop::IterVar& iv : n->iter_vars) bound.insert(iv.var.get());
    loop::Visitor::VisitScheduleBlock(n, self);
  }
  void VisitReduce(const loop::ReduceNode* n, const Expr& self) override {
    for (const loop::IterVar& axis : n->axes) bound.insert(axis.var.get());
    loop::Visitor::VisitReduce(n, self);
  }

 private:
  Ranges ranges_;
  VarSet unbounded_;
  std::map<const VarNode*, std::pair<Expr, Expr>> bounds_;
  VarSet uneven_;
};

// The span (max - min) of the values the inner terms of `forms` take, leaving out the terms
// whose coefficient is a multiple of `modulus` (0: none left out) and, likewise, the multiples
// of it in the constant offset (a row block's rows past the last full block start at
// `60 * 12544`); nullopt on overflow.
std::optional<int64_t> InnerSpan(const std::vector<AffineForm>& forms, const Ranges& ranges,
                                 int64_t modulus) {
  std::optional<Range> window;
  for (AffineForm f : forms) {
    for (auto it = f.inner.begin(); it != f.inner.end();)
      it = modulus != 0 && it->second % modulus == 0 ? f.inner.erase(it) : std::next(it);
    if (modulus != 0) f.offset = ((f.offset % modulus) + modulus) % modulus;
    std::optional<Range> r = InnerRange(f, ranges);
    if (!r) return std::nullopt;
    window = window ? Range{std::min(window->min, r->min), std::max(window->max, r->max)} : *r;
  }
  int64_t span;
  if (!window || __builtin_sub_overflow(window->max, window->min, &span)) return std::nullopt;
  return span;
}

// Whether the accesses of one buffer share a dimension that partitions it among iterations:
// index `c * v + inner + rest` in every access, with one c != 0 and one rest, and either
//  - the inner parts of all of them span fewer than |c| values, so iteration v keeps to the
//    window [c * v + rest + lo, c * v + rest + hi]; or
//  - (a flat index, as CollapseLoops and FlattenBuffers write) the inner terms split into small
//    ones spanning s < |c| and large ones whose coefficients are all multiples of some L with
//    |c| * (extent - 1) + s < L: the index is L * m + c * v + small + rest, and two iterations
//    v1 != v2 meeting at one element would need L * (m1 - m2) = c * (v2 - v1) + (s2 - s1),
//    which is nonzero (|c| > s) and smaller than L in magnitude. So `out[i9 * 50176 + p * 64 +
//    j]` (j in [0, 64), i9 in [0, 16)) is partitioned by p in [0, 196): 64 * 195 + 63 < 12544.
// A buffer that some accesses index flat and others by dims (CollapseLoops flattens the accesses
// of the loops it collapses: a padded result's border rows) is checked on flat indices.
bool PartitionedByIteration(const std::vector<const Access*>& accesses, const VarNode* v,
                            std::optional<int64_t> extent, const VarSet& bound,
                            const Ranges& ranges) {
  std::vector<std::vector<Expr>> indices;
  for (const Access* a : accesses) indices.push_back(*a->indices);
  const size_t rank = indices[0].size();
  const bool mixed =
      std::any_of(indices.begin(), indices.end(),
                  [rank](const std::vector<Expr>& idx) { return idx.size() != rank; });
  for (size_t i = 0; mixed && i < indices.size(); ++i) {
    std::optional<Expr> flat = loop::FlatIndex(*accesses[i]->buffer, indices[i]);
    if (!flat) return false;
    indices[i] = {*flat};
  }
  for (size_t d = 0; d < indices[0].size(); ++d) {
    std::vector<AffineForm> forms;
    bool ok = true;
    for (const std::vector<Expr>& idx : indices) {
      std::optional<AffineForm> f = SplitAffine(idx[d], v, bound, ranges);
      ok = f && f->coefficient != 0 && InnerRange(*f, ranges) &&
           (forms.empty() || (f->coefficient == forms[0].coefficient &&
                              loop::StructuralEqual(f->rest, forms[0].rest)));
      if (!ok) break;
      forms.push_back(*f);
    }
    if (!ok || forms[0].coefficient == std::numeric_limits<int64_t>::min()) continue;
    const int64_t c = std::abs(forms[0].coefficient);
    std::optional<int64_t> span = InnerSpan(forms, ranges, 0);
    if (span && *span < c) return true;
    if (!extent || *extent < 1) continue;
    std::set<int64_t> moduli;
    for (const AffineForm& f : forms)
      for (const auto& [u, k] : f.inner)
        if (k != 0 && k != std::numeric_limits<int64_t>::min()) moduli.insert(std::abs(k));
    for (int64_t modulus : moduli) {
      std::optional<int64_t> small = InnerSpan(forms, ranges, modulus);
      int64_t reach;
      if (small && *small < c && !__builtin_mul_overflow(c, *extent - 1, &reach) &&
          !__builtin_add_overflow(reach, *small, &reach) && reach < modulus)
        return true;
    }
  }
  return false;
}

// The partition rule for symbolic strides and extents (symbolic_bound.h), as CollapseLoops
// leaves a shape-generic conv's pixels: `out[i1 * (h * w) + p_outer * 256 + p_inner]` with the
// tails `out[i1 * (h * w) + h * w // 256 * 256 + p]`. Every access's flat index must be
// C * v + inner + rest, with one C (a sum over atoms) for all of them, the inner loop variables'
// coefficients >= 0, and, with rest_0 the first access's rest, rest - rest_0 + inner in
// [0, C - 1] over the inner loops' bounds. Then iteration v keeps to the window
// [C * v + rest_0, C * v + rest_0 + C - 1].
bool SymbolicallyPartitioned(const std::vector<const Access*>& accesses, const VarNode* v,
                             const NestScanner& scan, const VarSet& dims) {
  using Forms = loop::SymbolicForms;
  using Form = Forms::Form;
  const std::map<const VarNode*, std::pair<Expr, Expr>> loops = scan.LoopBounds();
  VarSet loop_vars{v}, opaque;
  for (const auto& [u, b] : loops) loop_vars.insert(u);
  for (const VarNode* u : scan.bound)
    if (!loop_vars.count(u)) opaque.insert(u);
  Forms forms(loop_vars, opaque, dims);
  struct Window {
    Form base, lo, hi;
  };
  std::optional<Form> stride;
  std::vector<Window> windows;
  for (const Access* a : accesses) {
    std::optional<Expr> flat = loop::FlatIndex(*a->buffer, *a->indices);
    std::optional<Form> f = flat ? forms.Of(*flat) : std::nullopt;
    if (!f) return false;
    Form c = Forms::CoefficientOf(*f, v);
    if (stride ? !(c == *stride) : c == Form{}) return false;
    stride = c;
    Form rest = Forms::Without(*f, v);
    Window w;
    w.base = Forms::Invariant(rest);
    w.lo = w.hi = w.base;
    for (const VarNode* u : Forms::LoopVars(rest)) {
      Form k = Forms::CoefficientOf(rest, u);
      auto b = loops.find(u);
      if (b == loops.end() || !forms.ProvablyNonNegative(k)) return false;
      std::optional<Form> min = forms.Of(b->second.first), extent = forms.Of(b->second.second);
      if (!min || !extent || !Forms::LoopVars(*min).empty() || !Forms::LoopVars(*extent).empty())
        return false;
      // Over [min, min + extent - 1]: k >= 0, so k * min is the least and k * (min + extent
      // - 1) the most (a loop that runs no iteration makes no access).
      Form one;
      one.constant = 1;
      std::optional<Form> last = Forms::Add(*min, *extent);
      if (last) last = Forms::Add(*last, one, -1);
      std::optional<Form> low = Forms::Mul(k, *min);
      std::optional<Form> high = last ? Forms::Mul(k, *last) : std::nullopt;
      std::optional<Form> lo = low ? Forms::Add(w.lo, *low) : std::nullopt;
      std::optional<Form> hi = high ? Forms::Add(w.hi, *high) : std::nullopt;
      if (!lo || !hi) return false;
      w.lo = *lo;
      w.hi = *hi;
    }
    windows.push_back(w);
  }
  if (!stride) return false;
  Form top = *stride;  // C - 1
  top.constant -= 1;
  for (const Window& w : windows) {
    std::optional<Form> above = Forms::Add(w.lo, windows[0].base, -1);
    std::optional<Form> below = Forms::Add(w.hi, windows[0].base, -1);
    if (below) below = Forms::Add(top, *below, -1);
    if (!above || !below || !forms.ProvablyNonNegative(*above) ||
        !forms.ProvablyNonNegative(*below))
      return false;
  }
  return true;
}

// The safety rule of the file comment.
bool IterationsIndependent(const loop::ForNode* n, const VarSet& dims) {
  NestScanner scan;
  scan.VisitStmt(n->body);
  scan.bound.insert(n->var.get());
  Ranges ranges = scan.ConstantRanges();
  std::set<const loop::BufferNode*> stored;
  for (const Access& a : scan.accesses)
    if (a.store && !scan.allocated.count(a.buffer)) stored.insert(a.buffer);
  for (const loop::BufferNode* b : stored) {
    std::vector<const Access*> of_b;
    for (const Access& a : scan.accesses)
      if (a.buffer == b) of_b.push_back(&a);
    if (!PartitionedByIteration(of_b, n->var.get(), loop::ExtentBound(n->extent), scan.bound,
                                ranges) &&
        !SymbolicallyPartitioned(of_b, n->var.get(), scan, dims))
      return false;
  }
  return true;
}

constexpr int64_t kLotsOfWork = std::numeric_limits<int64_t>::max() / 4;

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kLotsOfWork) return kLotsOfWork;
  return r;
}

// Stores run by one execution of `s`; unbounded symbolic extents count as large (file comment).
int64_t Work(const Stmt& s) {
  if (!s) return 0;
  switch (s->kind) {
    case loop::StmtKind::kStore:
      return 1;
    case loop::StmtKind::kFor: {
      const loop::ForNode* n = loop::AsFor(s);
      int64_t body = Work(n->body);
      std::optional<int64_t> extent = loop::ExtentBound(n->extent);
      if (!extent) return body > 0 ? kLotsOfWork : 0;
      return SaturatingMul(std::max<int64_t>(*extent, 0), body);
    }
    case loop::StmtKind::kSeq: {
      int64_t total = 0;
      for (const Stmt& c : loop::AsSeq(s)->stmts) total = std::min(kLotsOfWork, total + Work(c));
      return total;
    }
    case loop::StmtKind::kLetStmt:
      return Work(loop::AsLetStmt(s)->body);
    case loop::StmtKind::kIfThenElse: {
      const loop::IfThenElseNode* n = loop::AsIfThenElse(s);
      return std::max(Work(n->then_case), Work(n->else_case));
    }
    case loop::StmtKind::kScheduleBlock: {
      const loop::ScheduleBlockNode* n = loop::AsScheduleBlock(s);
      return std::min(kLotsOfWork, Work(n->init) + Work(n->body));
    }
    default:
      return 0;
  }
}

// Work(s) as an expression over the kernel's dims, for a loop whose extents are symbolic;
// nullopt where an extent reads anything else (a loop variable, a let, a load). An `if`
// counts its smaller branch, so this is a lower bound: the column tails TileLoops leaves under
// `if (w % 8 != 0)` count nothing, and a small image's few columns, all tail, are not split.
std::optional<Expr> WorkExpr(const Stmt& s, const VarSet& dims) {
  if (!s) return loop::IntImm(0);
  switch (s->kind) {
    case loop::StmtKind::kStore:
      return loop::IntImm(1);
    case loop::StmtKind::kFor: {
      const loop::ForNode* n = loop::AsFor(s);
      std::optional<Expr> body = WorkExpr(n->body, dims);
      if (!body || !loop::ReadsOnly(n->extent, dims)) return std::nullopt;
      if (IsZero(*body)) return body;
      return loop::Mul(loop::Max(n->extent, loop::IntImm(0)), *body);
    }
    case loop::StmtKind::kSeq: {
      Expr total = loop::IntImm(0);
      for (const Stmt& c : loop::AsSeq(s)->stmts) {
        std::optional<Expr> w = WorkExpr(c, dims);
        if (!w) return std::nullopt;
        if (!IsZero(*w)) total = IsZero(total) ? *w : loop::Add(total, *w);
      }
      return total;
    }
    case loop::StmtKind::kLetStmt:
      return WorkExpr(loop::AsLetStmt(s)->body, dims);
    case loop::StmtKind::kIfThenElse: {
      const loop::IfThenElseNode* n = loop::AsIfThenElse(s);
      std::optional<Expr> a = WorkExpr(n->then_case, dims), b = WorkExpr(n->else_case, dims);
      if (!a || !b) return std::nullopt;
      return IsZero(*a) || IsZero(*b) ? loop::IntImm(0) : loop::Min(*a, *b);
    }
    case loop::StmtKind::kScheduleBlock: {
      const loop::ScheduleBlockNode* n = loop::AsScheduleBlock(s);
      return WorkExpr(loop::Seq({n->init, n->body}), dims);
    }
    default:
      return loop::IntImm(0);
  }
}

// `n` as a parallel loop over chunks of its iterations, each a serial loop over consecutive
// ones: a chunk an iteration where its work (WorkExpr, computed when the kernel runs) reaches
// min_work, as the rule for a constant extent; else one chunk of them all, which the calling
// thread runs without handing anything out (kiln_parallel_for). Not a count between the two:
// the runtime cuts a loop into one part a thread, and 3 chunks of rows at 2 threads ran 2 and
// 1 (dynamic_conv at 320x240 through the generic tier: 1.40-1.52 ms against 1.23-1.29 by
// rows). Null where the work is not an expression over the dims.
Stmt InChunks(const loop::ForNode* n, const Options& opt) {
  std::optional<Expr> work = WorkExpr(n->body, *opt.dims);
  if (!work || !loop::ReadsOnly(n->min, *opt.dims) || !loop::ReadsOnly(n->extent, *opt.dims))
    return nullptr;
  const Expr extent = loop::Max(n->extent, loop::IntImm(0));
  loop::Var chunks = loop::MakeVar(n->var->name + "_chunks"),
            c = loop::MakeVar(n->var->name + "_chunk");
  const Expr enough = loop::Min(
      loop::FloorDiv(loop::Mul(extent, *work), loop::IntImm(std::max<int64_t>(opt.min_work, 1))),
      loop::IntImm(1));
  const Expr count = loop::Max(loop::Mul(enough, extent), loop::IntImm(1));
  // chunks is 1 or the extent. Chunk c runs [c * extent // chunks, (c + 1) * extent // chunks):
  // consecutive, covering.
  const Expr first = loop::FloorDiv(loop::Mul(c, extent), chunks);
  const Expr next = loop::FloorDiv(loop::Mul(loop::Add(c, loop::IntImm(1)), extent), chunks);
  Stmt rows = loop::For(n->var, loop::Add(n->min, first), loop::Sub(next, first), ForKind::kSerial,
                        n->body);
  return loop::LetStmt(chunks, count,
                       loop::For(c, loop::IntImm(0), chunks, ForKind::kParallel, rows));
}

// The outer loop and the one loop that is its body as one parallel loop; null when the pair
// does not qualify (file comment).
Stmt Collapse(const loop::ForNode* outer, const VarSet& dims) {
  const loop::ForNode* inner = loop::AsFor(outer->body);
  int64_t outer_min, inner_min;
  if (!inner || inner->for_kind != ForKind::kSerial || !loop::IsConstInt(outer->min, &outer_min) ||
      outer_min != 0 || !loop::IsConstInt(inner->min, &inner_min) || inner_min != 0 ||
      loop::Mentions(inner->extent, outer->var.get()) ||
      !loop::ContainsStmtKind(inner->body, {loop::StmtKind::kFor}) ||
      !IterationsIndependent(inner, dims))
    return nullptr;
  loop::Var fused = loop::MakeVar(outer->var->name + "_" + inner->var->name);
  Stmt body =
      loop::LetStmt(outer->var, loop::FloorDiv(fused, inner->extent),
                    loop::LetStmt(inner->var, loop::FloorMod(fused, inner->extent), inner->body));
  return loop::For(fused, loop::IntImm(0), loop::Mul(outer->extent, inner->extent),
                   ForKind::kParallel, body);
}

Stmt ParallelizeNest(const loop::ForNode* n, const Stmt& self, const Options& opt);

// Visits statements down to the first loop of each nest, and no further.
class Parallelizer : public loop::Mutator {
 public:
  explicit Parallelizer(Options opt) : opt_(opt) {}
  Expr MutateExpr(const Expr& e) override { return e; }

 protected:
  Stmt MutateFor(const loop::ForNode* n, const Stmt& self) override {
    return ParallelizeNest(n, self, opt_);
  }

 private:
  Options opt_;
};

Stmt ParallelizeNest(const loop::ForNode* n, const Stmt& self, const Options& opt) {
  if (n->for_kind != ForKind::kSerial) return self;
  std::optional<int64_t> bound = loop::ExtentBound(n->extent);
  if (!IterationsIndependent(n, *opt.dims)) {
    if (bound || !opt.nest || opt.threads == 1) return self;
    Options inner = opt;  // the file comment's serial batch loop around parallel rows
    inner.nest = false;
    inner.over_images = true;
    Stmt body = Parallelizer(inner).MutateStmt(n->body);
    if (body == n->body) return self;
    return loop::For(n->var, n->min, n->extent, n->for_kind, body);
  }
  int64_t work = Work(n->body), extent;
  if (opt.over_images && work < kLotsOfWork) return self;
  if (bound ? *bound < 2 || SaturatingMul(*bound, work) < opt.min_work : work < 1) return self;
  const bool small_constant = loop::IsConstInt(n->extent, &extent) && extent < opt.collapse_below;
  Stmt collapsed;
  if ((small_constant || (!bound && opt.collapse_below > 0))) collapsed = Collapse(n, *opt.dims);
  if (opt.over_images)
    if (Stmt chunked = InChunks(collapsed ? loop::AsFor(collapsed) : n, opt)) return chunked;
  if (collapsed) return collapsed;
  Stmt body = n->body;
  if (!bound && opt.nest) {
    Options inner = opt;
    inner.nest = false;  // one level: the runtime runs deeper ones serially anyway
    body = Parallelizer(inner).MutateStmt(body);
  }
  return loop::For(n->var, n->min, n->extent, ForKind::kParallel, body);
}

int64_t NonNegativeConfig(const PassContext& ctx, const char* key) {
  int64_t v = ctx.GetConfigInt(key);
  if (v < 0) Throw(ErrorCode::kInvalidArgument, key, " must not be negative, got ", v);
  return v;
}

}  // namespace

void RegisterParallelizeLoopsPass(PassRegistry& r) {
  RegisterPassConfig(kMinWorkKey, AttrKind::kInt, int64_t{16384},
                     "ParallelizeLoops leaves a loop nest with a constant extent serial when it "
                     "stores fewer elements than this");
  RegisterPassConfig(kCollapseBelowKey, AttrKind::kInt, int64_t{64},
                     "ParallelizeLoops fuses a parallel loop with constant extent below this with "
                     "the loop inside it (0: never)");
  r.Register(PassRegistration{
      .name = "ParallelizeLoops",
      .opt_level = 1,
      .required = {},
      .options = {},
      .doc = "run the outermost loop of each nest on the thread pool when it is safe and worth it",
      .create =
          [](const Attrs& o) {
            return CreateLoopFuncPass(
                PassInfo{"ParallelizeLoops", 1, {}},
                [](const loop::PrimFunc& f, const PassContext& ctx) {
                  VarSet dims;
                  for (const loop::Var& d : f->scalar_params) dims.insert(d.get());
                  Options opt{NonNegativeConfig(ctx, kMinWorkKey),
                              NonNegativeConfig(ctx, kCollapseBelowKey), &dims};
                  opt.threads = ctx.GetConfigInt(kThreadsKey);
                  return loop::WithBody(f, Parallelizer(opt).MutateStmt(f->body));
                },
                o);
          },
  });
}

}  // namespace kiln
