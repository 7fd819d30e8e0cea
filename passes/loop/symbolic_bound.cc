// Sums of monomials over loop variables and symbolic atoms, and nonnegativity proofs over atoms
// (symbolic_bound.h).
#include "passes/loop/symbolic_bound.h"

#include <algorithm>

#include "ir/loop/loop_text.h"

namespace kiln::loop {

namespace {

using Form = SymbolicForms::Form;

bool PositiveConst(const Expr& e, int64_t* c) {
  return IsConstInt(e, c) && *c > 0;
}

std::optional<Form> Constant(int64_t c) {
  Form f;
  f.constant = c;
  return f;
}

}  // namespace

std::optional<Form> SymbolicForms::Add(const Form& a, const Form& b, int64_t sign) {
  Form out = a;
  int64_t scaled;
  if (__builtin_mul_overflow(b.constant, sign, &scaled) ||
      __builtin_add_overflow(out.constant, scaled, &out.constant))
    return std::nullopt;
  for (const auto& [key, k] : b.terms) {
    int64_t& slot = out.terms[key];
    if (__builtin_mul_overflow(k, sign, &scaled) || __builtin_add_overflow(slot, scaled, &slot))
      return std::nullopt;
    if (slot == 0) out.terms.erase(key);
  }
  return out;
}

std::optional<Form> SymbolicForms::Scale(const Form& a, int64_t k) {
  return Add(Form{}, a, k);
}

std::optional<Form> SymbolicForms::Mul(const Form& a, const Form& b) {
  if (a.terms.empty()) return Scale(b, a.constant);
  if (b.terms.empty()) return Scale(a, b.constant);
  // Both have monomials: every product must still be one (at most one variable, one atom).
  using Key = std::pair<const VarNode*, int>;
  std::vector<std::pair<Key, int64_t>> xs(a.terms.begin(), a.terms.end()),
      ys(b.terms.begin(), b.terms.end());
  xs.push_back({{nullptr, -1}, a.constant});
  ys.push_back({{nullptr, -1}, b.constant});
  Form out;
  for (const auto& [kx, cx] : xs) {
    for (const auto& [ky, cy] : ys) {
      if (cx == 0 || cy == 0) continue;
      if ((kx.first && ky.first) || (kx.second >= 0 && ky.second >= 0)) return std::nullopt;
      Form term;
      if (__builtin_mul_overflow(cx, cy, &term.constant)) return std::nullopt;
      const Key key{kx.first ? kx.first : ky.first, std::max(kx.second, ky.second)};
      if (key.first || key.second >= 0) {
        term.terms[key] = term.constant;
        term.constant = 0;
      }
      std::optional<Form> sum = Add(out, term);
      if (!sum) return std::nullopt;
      out = *sum;
    }
  }
  return out;
}

Form SymbolicForms::CoefficientOf(const Form& f, const VarNode* v) {
  Form out;
  for (const auto& [key, k] : f.terms) {
    if (key.first != v) continue;
    if (key.second < 0)
      out.constant = k;
    else
      out.terms[{nullptr, key.second}] = k;
  }
  return out;
}

Form SymbolicForms::Without(const Form& f, const VarNode* v) {
  Form out = f;
  for (auto it = out.terms.begin(); it != out.terms.end();)
    it = it->first.first == v ? out.terms.erase(it) : std::next(it);
  return out;
}

std::vector<const VarNode*> SymbolicForms::LoopVars(const Form& f) {
  std::vector<const VarNode*> vars;
  for (const auto& [key, k] : f.terms)
    if (key.first && std::find(vars.begin(), vars.end(), key.first) == vars.end())
      vars.push_back(key.first);
  return vars;
}

Form SymbolicForms::Invariant(const Form& f) {
  Form out = f;
  for (auto it = out.terms.begin(); it != out.terms.end();)
    it = it->first.first ? out.terms.erase(it) : std::next(it);
  return out;
}

int SymbolicForms::AtomIndex(const Expr& e) {
  for (size_t i = 0; i < atoms_.size(); ++i)
    if (StructuralEqual(atoms_[i], e)) return static_cast<int>(i);
  atoms_.push_back(e);
  return static_cast<int>(atoms_.size()) - 1;
}

std::optional<Form> SymbolicForms::Of(const Expr& e) {
  if (!e || e->dtype != DType::kInt64 || e->lanes != 1) return std::nullopt;
  int64_t c;
  if (IsConstInt(e, &c)) return Constant(c);
  if (MentionsOrLoads(e, VarSet{})) return std::nullopt;  // a load may change in the loop
  if (const VarNode* v = AsVar(e); v && loop_vars_.count(v)) {
    Form f;
    f.terms[{v, -1}] = 1;
    return f;
  }
  if (Mentions(e, opaque_)) return std::nullopt;
  const bool free = !Mentions(e, loop_vars_);
  int64_t c1;
  // A loop-invariant part: simplified once, so that its atoms compare structurally.
  const Expr x = free ? SimplifyExpr(e) : e;
  if (IsConstInt(x, &c)) return Constant(c);
  const BinaryNode* b = AsBinary(x);
  if (b && (b->op == BinaryOp::kAdd || b->op == BinaryOp::kSub)) {
    std::optional<Form> fa = Of(b->a), fb = Of(b->b);
    if (!fa || !fb) return std::nullopt;
    return Add(*fa, *fb, b->op == BinaryOp::kAdd ? 1 : -1);
  }
  if (b && b->op == BinaryOp::kMul && (!free || IsConstInt(b->a, &c) || IsConstInt(b->b, &c))) {
    std::optional<Form> fa = Of(b->a), fb = Of(b->b);
    if (!fa || !fb) return std::nullopt;
    return Mul(*fa, *fb);
  }
  if (!free) return std::nullopt;  // a loop variable under a division, min, select...
  if (b && b->op == BinaryOp::kFloorMod && PositiveConst(b->b, &c)) {
    // x % c = x - c * (x // c), with x // c an atom.
    std::optional<Form> fx = Of(b->a);
    if (!fx) return std::nullopt;
    Form quotient;
    quotient.terms[{nullptr, AtomIndex(SimplifyExpr(FloorDiv(b->a, b->b)))}] = c;
    return Add(*fx, quotient, -1);
  }
  if (const BinaryNode* m = b ? AsBinary(b->a) : nullptr;
      b && b->op == BinaryOp::kFloorDiv && PositiveConst(b->b, &c) && m &&
      m->op == BinaryOp::kFloorMod && IsConstInt(m->b, &c1) && c1 > 0 && c1 % c == 0) {
    // (x % c1) // c = x // c - (c1 / c) * (x // c1) when c divides c1: a tail's vectors.
    std::optional<Form> fine = Of(FloorDiv(m->a, b->b)), coarse = Of(FloorDiv(m->a, m->b));
    if (!fine || !coarse) return std::nullopt;
    return Add(*fine, *coarse, -(c1 / c));
  }
  Form f;
  f.terms[{nullptr, AtomIndex(x)}] = 1;
  return f;
}

std::optional<int64_t> SymbolicForms::LowerBound(const Expr& e) const {
  int64_t c, r;
  if (IsConstInt(e, &c)) return c;
  if (const VarNode* v = AsVar(e)) {
    if (nonnegative_.count(v)) return 0;
    return std::nullopt;
  }
  const BinaryNode* b = AsBinary(e);
  if (!b) return std::nullopt;
  switch (b->op) {
    case BinaryOp::kAdd: {
      std::optional<int64_t> x = LowerBound(b->a), y = LowerBound(b->b);
      if (!x || !y || __builtin_add_overflow(*x, *y, &r)) return std::nullopt;
      return r;
    }
    case BinaryOp::kSub: {
      std::optional<int64_t> x = LowerBound(b->a);
      if (!x || !IsConstInt(b->b, &c) || __builtin_sub_overflow(*x, c, &r)) return std::nullopt;
      return r;
    }
    case BinaryOp::kMul: {
      std::optional<int64_t> x = LowerBound(b->a), y = LowerBound(b->b);
      // Products of nonnegative terms are bounded by the product of their bounds.
      if (!x || !y || *x < 0 || *y < 0 || __builtin_mul_overflow(*x, *y, &r)) return std::nullopt;
      return r;
    }
    case BinaryOp::kFloorDiv: {
      std::optional<int64_t> x = LowerBound(b->a);
      if (!x || !PositiveConst(b->b, &c)) return std::nullopt;
      return *x >= 0 ? *x / c : -((-*x + c - 1) / c);
    }
    case BinaryOp::kFloorMod:
      if (PositiveConst(b->b, &c)) return 0;
      return std::nullopt;
    case BinaryOp::kMax: {
      std::optional<int64_t> x = LowerBound(b->a), y = LowerBound(b->b);
      if (x && y) return std::max(*x, *y);
      return x ? x : y;
    }
    case BinaryOp::kMin: {
      std::optional<int64_t> x = LowerBound(b->a), y = LowerBound(b->b);
      if (x && y) return std::min(*x, *y);
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

bool SymbolicForms::ProvablyNonNegative(Form f) {
  // Trade each -k * c * [x // c] for -k * x (c * (x // c) <= x), which only lowers the sum.
  for (int round = 0; round < 16; ++round) {
    bool traded = false;
    for (const auto& [key, q] : f.terms) {
      if (key.first) return false;  // a loop variable: not a sum over atoms
      const BinaryNode* d = key.second >= 0 ? AsBinary(atoms_[key.second]) : nullptr;
      int64_t c;
      if (q >= 0 || !d || d->op != BinaryOp::kFloorDiv || !PositiveConst(d->b, &c) || q % c != 0)
        continue;
      std::optional<Form> x = Of(d->a);
      if (!x) return false;
      Form rest = f;
      rest.terms.erase(key);
      std::optional<Form> traded_form = Add(rest, *x, q / c);  // q / c = -k
      if (!traded_form) return false;
      f = *traded_form;
      traded = true;
      break;
    }
    if (!traded) break;
  }
  int64_t sum = f.constant;
  for (const auto& [key, q] : f.terms) {
    if (key.first || q < 0) return false;
    std::optional<int64_t> lb = LowerBound(atoms_[key.second]);
    int64_t term;
    if (!lb || __builtin_mul_overflow(q, *lb, &term) || __builtin_add_overflow(sum, term, &sum))
      return false;
  }
  return sum >= 0;
}

}  // namespace kiln::loop
