// Proofs about index expressions whose extents are symbols (a shape-generic kernel's h * w), for
// the passes that must show two iterations of a loop touch different elements.
//
// An index is read as an integer sum of monomials, each 1, an atom, a loop variable, or a loop
// variable times an atom:
//
//   i1 * (h * w) + p_outer * 256 + h * w // 256 * 256 + p
//   = (i1 x [h * w]) + 256 (p_outer) + 256 [h * w // 256] + (p)
//
// An atom is a subexpression that reads no loop variable (a dim, a product of dims, a floor
// division, a min or max), simplified (SimplifyExpr) and compared structurally, so `x % c` is
// written as x - c * [x // c]. Loop variables are those the caller names; any other variable
// bound inside the loop makes the index unreadable.
//
// A sum over atoms alone is shown nonnegative (ProvablyNonNegative) from two facts:
//  - each atom has a lower bound: the caller's dims are >= 0, x % c >= 0, x // c >= lb(x) // c,
//    sums, products and min/max of bounded terms are bounded;
//  - floor division: c * [x // c] <= x (c > 0), so a term -k * c * [x // c] may be traded for
//    -k * x, which gives a smaller sum; `h * w - 256 * [h * w // 256]` is h * w % 256 >= 0.
// These cover the windows TileLoops and CollapseLoops leave (a tiled pixel loop and its tails
// stay below h * w); anything else is "not shown", never wrongly shown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "passes/loop/loop_analysis.h"

namespace kiln::loop {

class SymbolicForms {
 public:
  // A sum of monomials: (loop variable or null, atom index or -1) -> coefficient.
  struct Form {
    std::map<std::pair<const VarNode*, int>, int64_t> terms;
    int64_t constant = 0;
    bool operator==(const Form& o) const { return terms == o.terms && constant == o.constant; }
  };

  // `loop_vars` may appear in monomials; `opaque` (other variables bound in the loop) may not
  // appear at all; `nonnegative` are the variables known to be >= 0 (the kernel's dims).
  SymbolicForms(VarSet loop_vars, VarSet opaque, VarSet nonnegative)
      : loop_vars_(std::move(loop_vars)),
        opaque_(std::move(opaque)),
        nonnegative_(std::move(nonnegative)) {}

  // `e` as a sum of monomials; nullopt when it is not one (a loop variable under a division or
  // a product of two of them, a load, an opaque variable, overflow).
  std::optional<Form> Of(const Expr& e);

  // The coefficient of `v` (a form over atoms), and the form without v's monomials.
  static Form CoefficientOf(const Form& f, const VarNode* v);
  static Form Without(const Form& f, const VarNode* v);
  // The loop variables a form mentions.
  static std::vector<const VarNode*> LoopVars(const Form& f);
  // The form without any loop variable's monomials: its part over atoms alone.
  static Form Invariant(const Form& f);

  // Arithmetic on forms; nullopt on overflow or, for Mul, a product of two non-constant forms
  // that is not a monomial (atom times atom, variable times variable).
  static std::optional<Form> Add(const Form& a, const Form& b, int64_t sign = 1);
  static std::optional<Form> Scale(const Form& a, int64_t k);
  static std::optional<Form> Mul(const Form& a, const Form& b);

  // Whether f (over atoms only) is >= 0 for every value of the symbols (file comment).
  bool ProvablyNonNegative(Form f);

 private:
  int AtomIndex(const Expr& e);
  std::optional<int64_t> LowerBound(const Expr& e) const;

  VarSet loop_vars_, opaque_, nonnegative_;
  std::vector<Expr> atoms_;
};

}  // namespace kiln::loop
