// Questions the loop passes ask about loop IR (which variables an expression reads, whether an
// index is affine in a loop variable, which buffers a body touches), answered once here so that
// TileLoops, VectorizeLoops, ParallelizeLoops and UnrollLoops agree on them. Each pass keeps its
// own legality rules; these helpers only describe the IR.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "ir/loop/loop_visitor.h"

namespace kiln::loop {

using VarSet = std::set<const VarNode*>;

// Whether `e` reads the variable `v` / any variable of `vars`.
bool Mentions(const Expr& e, const VarNode* v);
bool Mentions(const Expr& e, const VarSet& vars);
// Whether `e` reads a variable of `vars` or any buffer (a load's value may change anywhere).
bool MentionsOrLoads(const Expr& e, const VarSet& vars);
// Whether `e` reads no buffer and no variable outside `vars`.
bool ReadsOnly(const Expr& e, const VarSet& vars);

// The coefficient c when `e` is `c * v + r`, built from +, - and * by constants, with r not
// reading `variant` (which holds v: a let bound to a value of v counts as depending on v);
// nullopt when it is not of that form. Without `variant`, r must not read v.
std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v, const VarSet& variant);
std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v);

// The coefficient c when `e` is `c * v + r`, where c may be an expression (a symbolic stride:
// `h_ * w + w_` is w in h_): built from +, - and products with a factor that does not read v;
// c and r do not read v. nullopt when it is not of that form. c is built with loop::Add and
// loop::Mul, which fold constants (a coefficient 1 is IntImm(1)).
std::optional<Expr> SymbolicAffineCoefficient(const Expr& e, const VarNode* v);

// `e` with LoopSimplify's rules applied bottom-up: one canonical form for shape expressions
// that were built apart (a buffer's `(w + -1) // 2 + 1` and a loop's `(w - 1) // 2 + 1`).
// Defined with the pass, in simplify.cc.
Expr SimplifyExpr(const Expr& e);

// Whether `e` walks along v through rows: its non-affine terms are (x // c) and (x % c) with x
// = v + r (coefficient 1) and c a multiple of `align`, there is at least one, and with each
// x // c taken as constant and each x % c as x, e is v + r'. CollapseLoops' row-split reads:
// lanes of v that start at a multiple of their width (dividing align) are contiguous.
bool IsRowSplitWalk(const Expr& e, const VarNode* v, int64_t align);
// The row length CollapseLoops' row-split reads need a multiple of: a vector of up to 16 lanes
// that starts at a multiple of its width then stays within one row.
constexpr int64_t kRowSplitAlign = 16;

// Row-major strides from `shape`, innermost 1: [n, m, 16] -> [m * 16, 16, 1].
std::vector<Expr> RowMajorStrides(const std::vector<Expr>& shape);

// The flat element offset (sum of index * stride, with the buffer's strides or row-major ones)
// of a scalar access to `b`, or nullopt (vector lanes, or an index count that is neither b's
// rank nor one flat index into a buffer with explicit strides).
std::optional<Expr> FlatIndex(const BufferNode& b, const std::vector<Expr>& indices);

// One replacement per buffer of rank >= 2 without strides: the same buffer with its row-major
// strides written out, which Verify, FlattenBuffers and the code generator accept a single flat
// index into. Every reference to a buffer must name one object, so passes that re-make buffers
// (FlattenBuffers, CollapseLoops) make each once here and replace all references with it.
class ExplicitStrides {
 public:
  // `b`'s replacement, made on first use; `b` itself when it needs none.
  Buffer Strided(const Buffer& b);
  // The replacement made for `b` so far, or `b`.
  Buffer Current(const Buffer& b) const;
  bool empty() const { return remade_.empty(); }
  // `s` with every reference (allocs, frees, accesses, block regions) to a re-made buffer
  // naming its replacement.
  Stmt ReplaceIn(const Stmt& s) const;

 private:
  std::map<const BufferNode*, Buffer> remade_;
};

// Whether two index lists are structurally the same.
bool SameIndices(const std::vector<Expr>& a, const std::vector<Expr>& b);

// Whether `s` holds a statement of one of `kinds` (itself included). Expressions are not
// searched: no statement is inside one.
bool ContainsStmtKind(const Stmt& s, std::initializer_list<StmtKind> kinds);

// Inclusive bounds of an integer value.
struct Interval {
  int64_t min, max;
};
using VarIntervals = std::map<const VarNode*, Interval>;

// The values an integer expression can take with each variable in its interval, from +, -, *,
// floor division and modulo by positive constants, min and max; nullopt when `e` reads a
// variable not in `vars`, loads, or an operation overflows.
std::optional<Interval> IntervalOf(const Expr& e, const VarIntervals& vars);

// The intervals of the variables that the loops and lets inside `s` bind, each loop's from the
// intervals of its min and extent under the loops around it (a variable bound twice gets the
// union). A variable whose bounds read something unknown, or a loop that may run no iteration,
// is left out.
VarIntervals LoopIntervals(const Stmt& s, VarIntervals outer = {});

// One load or store. The pointers point into the visited IR, which must outlive them.
struct Access {
  const BufferNode* buffer;
  const std::vector<Expr>* indices;
  bool store;
  int loop_depth;  // loops around the access inside the scanned statement
};

// Records every load and store it visits, in visiting order. Passes that need more about a body
// derive from it and call its VisitFor, VisitLoad and VisitStore when they override them.
class AccessScanner : public Visitor {
 public:
  std::vector<Access> accesses;

 protected:
  void VisitLoad(const LoadNode* n, const Expr& self) override;
  void VisitStore(const StoreNode* n, const Stmt& self) override;
  void VisitFor(const ForNode* n, const Stmt& self) override;

 private:
  int loop_depth_ = 0;
};

}  // namespace kiln::loop
