// SymbolicForms: index expressions read as sums of monomials, and the nonnegativity proofs over
// symbolic atoms that ParallelizeLoops' symbolic partition rule rests on. Each "shown" case is
// also checked by evaluating it over a grid of dims, so a wrong proof cannot pass.
#include <gtest/gtest.h>

#include <map>

#include "ir/loop/loop_text.h"
#include "passes/loop/symbolic_bound.h"

namespace kiln::loop {
namespace {

Expr I(int64_t v) {
  return IntImm(v);
}

struct Dims {
  Var h = MakeVar("h"), w = MakeVar("w"), s = MakeVar("s");  // s: not known >= 0
  SymbolicForms forms{{}, {}, {h.get(), w.get()}};
};

// Evaluates a loop-free integer expression with h and w bound.
int64_t Eval(const Expr& e, const Dims& d, int64_t h, int64_t w) {
  return EvalIndex(e, {{d.h.get(), h}, {d.w.get(), w}});
}

bool Shown(Dims& d, const Expr& e) {
  std::optional<SymbolicForms::Form> f = d.forms.Of(e);
  return f && d.forms.ProvablyNonNegative(*f);
}

TEST(SymbolicForms, ShowsTheWindowsOfATiledPixelLoop) {
  Dims d;
  Expr hw = Mul(d.h, d.w);
  // A 256-pixel tile loop's last element, and its tail's, are below h * w.
  Expr tiles_end = Mul(FloorDiv(hw, I(256)), I(256));
  Expr rem = FloorMod(hw, I(256));
  Expr tail_end = Add(tiles_end, Add(Mul(FloorDiv(rem, I(16)), I(16)), FloorMod(rem, I(16))));
  std::vector<Expr> shown = {
      Sub(hw, tiles_end),  // h * w % 256
      Sub(hw, tail_end),   // exactly 0
      Sub(Sub(Mul(hw, I(480)), I(1)), Add(Mul(I(479), hw), Sub(hw, I(1)))),
      Sub(Add(FloorDiv(Sub(d.h, I(1)), I(16)), I(1)), I(0)),  // a strided layer's rows
      Max(Sub(d.h, I(1)), FloorMod(d.w, I(4))),
  };
  for (const Expr& e : shown) {
    EXPECT_TRUE(Shown(d, e)) << Print(e);
    for (int64_t h : {0, 1, 3, 16, 17, 255})
      for (int64_t w : {0, 1, 2, 16, 31})
        EXPECT_GE(Eval(e, d, h, w), 0) << Print(e) << " at " << h << "x" << w;
  }
}

TEST(SymbolicForms, DoesNotShowWhatMayBeNegative) {
  Dims d;
  Expr hw = Mul(d.h, d.w);
  std::vector<Expr> not_shown = {
      Sub(Mul(FloorDiv(hw, I(256)), I(256)), hw),             // -(h * w % 256)
      Sub(hw, Add(Mul(FloorDiv(hw, I(256)), I(256)), I(1))),  // may be -1
      Sub(d.h, I(1)),                                         // h = 0
      d.s,                                                    // a symbol not known >= 0
      Mul(d.s, d.s),                                          // (no rule for squares)
      Sub(hw, Mul(FloorDiv(hw, I(16)), I(17))),               // 17 * (x // 16) > x for x = 16
  };
  for (const Expr& e : not_shown) EXPECT_FALSE(Shown(d, e)) << Print(e);
}

TEST(SymbolicForms, ReadsLoopVariablesAsMonomials) {
  Var h = MakeVar("h"), w = MakeVar("w"), m = MakeVar("m"), p = MakeVar("p");
  Var let = MakeVar("t");
  SymbolicForms forms({m.get(), p.get()}, {let.get()}, {h.get(), w.get()});
  Expr hw = Mul(h, w);
  std::optional<SymbolicForms::Form> f =
      forms.Of(Add(Mul(Mul(m, hw), I(3)), Add(Mul(p, I(16)), I(5))));
  ASSERT_TRUE(f);
  SymbolicForms::Form cm = SymbolicForms::CoefficientOf(*f, m.get());
  EXPECT_EQ(cm.constant, 0);
  ASSERT_EQ(cm.terms.size(), 1u);
  EXPECT_EQ(cm.terms.begin()->second, 3);
  EXPECT_EQ(SymbolicForms::CoefficientOf(*f, p.get()).constant, 16);
  EXPECT_EQ(SymbolicForms::Without(SymbolicForms::Without(*f, m.get()), p.get()).constant, 5);
  EXPECT_EQ(SymbolicForms::LoopVars(*f).size(), 2u);
  // Without every loop variable: the part over atoms (here 5); an atom's monomial stays
  // (h * w + m * 2 -> h * w).
  EXPECT_EQ(SymbolicForms::Invariant(*f),
            SymbolicForms::Without(SymbolicForms::Without(*f, m.get()), p.get()));
  std::optional<SymbolicForms::Form> g = forms.Of(Add(hw, Mul(m, I(2))));
  ASSERT_TRUE(g);
  SymbolicForms::Form gi = SymbolicForms::Invariant(*g);
  EXPECT_EQ(gi.constant, 0);
  ASSERT_EQ(gi.terms.size(), 1u);
  EXPECT_EQ(gi.terms.begin()->second, 1);
  EXPECT_TRUE(SymbolicForms::LoopVars(gi).empty());
  // Not monomials: a loop variable under a division, a product of two, an opaque variable.
  EXPECT_FALSE(forms.Of(FloorDiv(p, I(4))));
  EXPECT_FALSE(forms.Of(Mul(m, p)));
  EXPECT_FALSE(forms.Of(Add(p, let)));
  // A form over loop variables is not a sum over atoms.
  EXPECT_FALSE(forms.ProvablyNonNegative(*f));
}

}  // namespace
}  // namespace kiln::loop
