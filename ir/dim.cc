#include "ir/dim.h"

#include <algorithm>
#include <numeric>

#include "ir/dim_program.h"
#include "ir/error.h"
#include "ir/lower_api.h"

namespace kiln {

namespace {

enum class AtomKind { kSymbol, kFloorDiv, kMod, kMin, kMax };

struct Atom {
  AtomKind kind;
  std::string name;  // kSymbol only
  Dim a, b;          // the operands of the other kinds
  size_t hash;
};
using AtomPtr = std::shared_ptr<const Atom>;

// One term of the canonical sum: coef * factors[0] * factors[1] * ...; factors sorted.
struct Term {
  int64_t coef;
  std::vector<AtomPtr> factors;
};

size_t HashCombine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

int CompareAtom(const Atom& x, const Atom& y) {
  if (x.kind != y.kind) return x.kind < y.kind ? -1 : 1;
  if (x.kind == AtomKind::kSymbol)
    return x.name.compare(y.name) < 0 ? -1 : (x.name == y.name ? 0 : 1);
  if (int c = Dim::Compare(x.a, y.a)) return c;
  return Dim::Compare(x.b, y.b);
}

// Higher degree first, then factor by factor; so the constant term (no factors) sorts last.
int CompareMonomial(const std::vector<AtomPtr>& x, const std::vector<AtomPtr>& y) {
  if (x.size() != y.size()) return x.size() > y.size() ? -1 : 1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == y[i]) continue;
    if (int c = CompareAtom(*x[i], *y[i])) return c;
  }
  return 0;
}

int64_t CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    Throw(ErrorCode::kInvalidArgument, "dimension arithmetic overflows int64 (", a, " * ", b, ")");
  return r;
}
int64_t CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    Throw(ErrorCode::kInvalidArgument, "dimension arithmetic overflows int64 (", a, " + ", b, ")");
  return r;
}
}  // namespace

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorModInt(int64_t a, int64_t b) {
  return a - FloorDivInt(a, b) * b;
}

struct DimNode {
  std::vector<Term> terms;  // canonical: sorted by monomial, no zero coefs, no duplicates
  size_t hash = 0;
};

// Builds canonical DimNodes; a friend of Dim so it can wrap nodes.
struct DimBuilder {
  static Dim Make(std::vector<Term> terms) {
    std::sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) {
      return CompareMonomial(x.factors, y.factors) < 0;
    });
    std::vector<Term> merged;
    for (Term& t : terms) {
      if (!merged.empty() && CompareMonomial(merged.back().factors, t.factors) == 0) {
        merged.back().coef = CheckedAdd(merged.back().coef, t.coef);
      } else {
        merged.push_back(std::move(t));
      }
    }
    std::erase_if(merged, [](const Term& t) { return t.coef == 0; });
    auto node = std::make_shared<DimNode>();
    size_t h = 0x5eed;
    for (const Term& t : merged) {
      h = HashCombine(h, std::hash<int64_t>()(t.coef));
      for (const AtomPtr& f : t.factors) h = HashCombine(h, f->hash);
      h = HashCombine(h, 0x7e57);
    }
    node->terms = std::move(merged);
    node->hash = h;
    return Dim(std::shared_ptr<const DimNode>(std::move(node)));
  }

  static Dim FromAtom(AtomPtr atom) { return Make({Term{1, {std::move(atom)}}}); }

  static AtomPtr MakeAtom(AtomKind kind, std::string name, Dim a, Dim b) {
    size_t h =
        HashCombine(std::hash<int>()(static_cast<int>(kind)), std::hash<std::string>()(name));
    h = HashCombine(h, a.hash());
    h = HashCombine(h, b.hash());
    return std::make_shared<const Atom>(Atom{kind, std::move(name), std::move(a), std::move(b), h});
  }

  static const std::vector<Term>& Terms(const Dim& d) { return d.node_->terms; }

  // The single atom of `d` when d is exactly `1 * atom`.
  static const Atom* AsAtom(const Dim& d) {
    const auto& t = Terms(d);
    if (t.size() == 1 && t[0].coef == 1 && t[0].factors.size() == 1) return t[0].factors[0].get();
    return nullptr;
  }

  static Dim Scale(const Dim& d, int64_t k) {
    std::vector<Term> terms = Terms(d);
    for (Term& t : terms) t.coef = CheckedMul(t.coef, k);
    return Make(std::move(terms));
  }

  static Dim FloorDivConst(const Dim& a, int64_t c) {
    if (c == 0)
      Throw(ErrorCode::kInvalidArgument, "dimension division by zero: ", a.ToString(), " // 0");
    if (c == 1) return a;
    if (a.is_const()) return Dim(FloorDivInt(a.value(), c));
    if (c < 0) return FromAtom(MakeAtom(AtomKind::kFloorDiv, "", a, Dim(c)));
    // (x // b) // c == x // (b * c) for b, c > 0 (two stride-2 convs: (h - 1) // 4).
    int64_t bc;
    if (const Atom* inner = AsAtom(a); inner && inner->kind == AtomKind::kFloorDiv &&
                                       inner->b.is_const() && inner->b.value() > 0 &&
                                       !__builtin_mul_overflow(inner->b.value(), c, &bc))
      return FloorDivConst(inner->a, bc);
    // (q*c + r) // c == q + r // c for integer q: pull out the terms divisible by c.
    std::vector<Term> quotient, rest;
    for (const Term& t : Terms(a)) {
      if (t.coef % c == 0) {
        quotient.push_back(Term{t.coef / c, t.factors});
      } else {
        rest.push_back(t);
      }
    }
    Dim q = Make(std::move(quotient));
    if (rest.empty()) return q;
    Dim r = Make(std::move(rest));
    if (r.is_const()) return q + Dim(FloorDivInt(r.value(), c));
    // (g*r') // (g*c') == r' // c'
    int64_t g = c;
    for (const Term& t : Terms(r)) g = std::gcd(g, t.coef);
    if (g > 1) {
      std::vector<Term> reduced = Terms(r);
      for (Term& t : reduced) t.coef /= g;
      r = Make(std::move(reduced));
      c /= g;
      if (c == 1) return q + r;
    }
    return q + FromAtom(MakeAtom(AtomKind::kFloorDiv, "", r, Dim(c)));
  }

  static Dim ModConst(const Dim& a, int64_t c) {
    if (c == 0)
      Throw(ErrorCode::kInvalidArgument, "dimension modulo by zero: ", a.ToString(), " % 0");
    if (c == 1 || c == -1) return Dim(0);
    if (a.is_const()) return Dim(FloorModInt(a.value(), c));
    if (c < 0) return FromAtom(MakeAtom(AtomKind::kMod, "", a, Dim(c)));
    // Terms divisible by c contribute nothing; the constant is reduced into [0, c).
    std::vector<Term> rest;
    for (const Term& t : Terms(a)) {
      if (t.coef % c == 0) continue;
      if (t.factors.empty()) {
        int64_t m = FloorModInt(t.coef, c);
        if (m != 0) rest.push_back(Term{m, {}});
      } else {
        rest.push_back(Term{FloorModInt(t.coef, c), t.factors});
      }
    }
    Dim r = Make(std::move(rest));
    if (r.is_const()) return r;
    return FromAtom(MakeAtom(AtomKind::kMod, "", r, Dim(c)));
  }

  // min and max are associative, commutative and idempotent: a nest of one of them is an
  // operand set, kept flat, without repeats, and without an operand another dominates by a
  // constant (max(n, n + 2) is n + 2); then folded right, in Dim::Compare order, so every
  // nesting and ordering of the same set is one form. Without it a recurrence (an LSTM over T
  // steps whose gate dims are symbolic) nests max(x, max(y, max(x, ...))) T deep, and typing
  // it took time quadratic in T.
  static void CollectOperands(AtomKind kind, const Dim& d, std::vector<Dim>* out) {
    if (const Atom* at = AsAtom(d); at && at->kind == kind) {
      CollectOperands(kind, at->a, out);
      CollectOperands(kind, at->b, out);
      return;
    }
    out->push_back(d);
  }

  static Dim MinMax(AtomKind kind, const Dim& a, const Dim& b) {
    if (a == b) return a;
    std::vector<Dim> ops;
    CollectOperands(kind, a, &ops);
    CollectOperands(kind, b, &ops);
    std::sort(ops.begin(), ops.end(),
              [](const Dim& x, const Dim& y) { return Dim::Compare(x, y) < 0; });
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    // Drop each operand that another bounds by a constant difference.
    std::vector<bool> gone(ops.size(), false);
    for (size_t i = 0; i < ops.size(); ++i) {
      for (size_t j = i + 1; j < ops.size() && !gone[i]; ++j) {
        if (gone[j]) continue;
        Dim diff = ops[i] - ops[j];
        if (!diff.is_const()) continue;
        const bool i_smaller = diff.value() < 0;
        if ((kind == AtomKind::kMin) == i_smaller)
          gone[j] = true;
        else
          gone[i] = true;
      }
    }
    std::vector<Dim> kept;
    for (size_t i = 0; i < ops.size(); ++i)
      if (!gone[i]) kept.push_back(ops[i]);
    Dim folded = kept.back();
    for (size_t i = kept.size() - 1; i-- > 0;)
      folded = FromAtom(MakeAtom(kind, "", kept[i], folded));
    return folded;
  }

  static Dim ApplyAtom(const Atom& at, const Dim& a, const Dim& b) {
    switch (at.kind) {
      case AtomKind::kSymbol:
        return Dim::Symbol(at.name);
      case AtomKind::kFloorDiv:
        return FloorDiv(a, b);
      case AtomKind::kMod:
        return Mod(a, b);
      case AtomKind::kMin:
        return Min(a, b);
      case AtomKind::kMax:
        return Max(a, b);
    }
    return Dim(0);
  }
};

namespace {

std::string WrapOperand(const Dim& d) {
  if (d.is_const() && d.value() >= 0) return d.ToString();
  if (const Atom* a = DimBuilder::AsAtom(d)) {
    if (a->kind != AtomKind::kFloorDiv && a->kind != AtomKind::kMod) return d.ToString();
  }
  std::string s = "(";
  s += d.ToString();
  s += ')';
  return s;
}

std::string AtomToString(const Atom& a, bool in_product) {
  switch (a.kind) {
    case AtomKind::kSymbol:
      return a.name;
    case AtomKind::kFloorDiv:
    case AtomKind::kMod: {
      std::string s =
          WrapOperand(a.a) + (a.kind == AtomKind::kFloorDiv ? " // " : " % ") + WrapOperand(a.b);
      return in_product ? "(" + s + ")" : s;
    }
    case AtomKind::kMin:
      return "min(" + a.a.ToString() + ", " + a.b.ToString() + ")";
    case AtomKind::kMax:
      return "max(" + a.a.ToString() + ", " + a.b.ToString() + ")";
  }
  return "?";
}

}  // namespace

Dim::Dim(int64_t value) {
  static const Dim kZero = DimBuilder::Make({});
  if (value == 0 && kZero.node_) {
    node_ = kZero.node_;
    return;
  }
  *this = DimBuilder::Make({Term{value, {}}});
}

bool IsReservedDimName(const std::string& name) {
  for (const char* prefix : {"_v", "_s", "unk__"}) {
    const size_t n = std::char_traits<char>::length(prefix);
    if (name.size() > n && name.compare(0, n, prefix) == 0 &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(n), name.end(),
                    [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

std::string ExternalDimName(const std::string& name) {
  if (IsReservedDimName(name) || name.compare(0, 4, "ext:") == 0) return "ext:" + name;
  return name;
}

Dim Dim::Symbol(const std::string& name) {
  return DimBuilder::FromAtom(DimBuilder::MakeAtom(AtomKind::kSymbol, name, Dim(0), Dim(0)));
}

bool Dim::is_const() const {
  return node_->terms.empty() || (node_->terms.size() == 1 && node_->terms[0].factors.empty());
}
int64_t Dim::value() const {
  KILN_CHECK(is_const(), "dimension ", ToString(), " is not a constant");
  return node_->terms.empty() ? 0 : node_->terms[0].coef;
}
bool Dim::is_symbol() const {
  const Atom* a = DimBuilder::AsAtom(*this);
  return a && a->kind == AtomKind::kSymbol;
}
const std::string& Dim::name() const {
  const Atom* a = DimBuilder::AsAtom(*this);
  KILN_CHECK(a && a->kind == AtomKind::kSymbol, "dimension ", ToString(), " is not a symbol");
  return a->name;
}

Dim operator+(const Dim& a, const Dim& b) {
  std::vector<Term> terms = DimBuilder::Terms(a);
  const auto& tb = DimBuilder::Terms(b);
  terms.insert(terms.end(), tb.begin(), tb.end());
  return DimBuilder::Make(std::move(terms));
}

Dim operator-(const Dim& a, const Dim& b) {
  return a + DimBuilder::Scale(b, -1);
}

Dim operator*(const Dim& a, const Dim& b) {
  std::vector<Term> terms;
  for (const Term& x : DimBuilder::Terms(a)) {
    for (const Term& y : DimBuilder::Terms(b)) {
      Term t{CheckedMul(x.coef, y.coef), {}};
      t.factors.resize(x.factors.size() + y.factors.size());
      std::merge(x.factors.begin(), x.factors.end(), y.factors.begin(), y.factors.end(),
                 t.factors.begin(),
                 [](const AtomPtr& p, const AtomPtr& q) { return CompareAtom(*p, *q) < 0; });
      terms.push_back(std::move(t));
    }
  }
  return DimBuilder::Make(std::move(terms));
}

Dim FloorDiv(const Dim& a, const Dim& b) {
  if (b.is_const()) return DimBuilder::FloorDivConst(a, b.value());
  if (a == b) return Dim(1);
  return DimBuilder::FromAtom(DimBuilder::MakeAtom(AtomKind::kFloorDiv, "", a, b));
}

Dim Mod(const Dim& a, const Dim& b) {
  if (b.is_const()) return DimBuilder::ModConst(a, b.value());
  if (a == b) return Dim(0);
  return DimBuilder::FromAtom(DimBuilder::MakeAtom(AtomKind::kMod, "", a, b));
}

Dim Min(const Dim& a, const Dim& b) {
  return DimBuilder::MinMax(AtomKind::kMin, a, b);
}
Dim Max(const Dim& a, const Dim& b) {
  return DimBuilder::MinMax(AtomKind::kMax, a, b);
}

bool Dim::operator==(const Dim& other) const {
  if (node_ == other.node_) return true;
  if (node_->hash != other.node_->hash) return false;
  return Compare(*this, other) == 0;
}

int Dim::Compare(const Dim& a, const Dim& b) {
  if (a.node_ == b.node_) return 0;
  const auto& x = a.node_->terms;
  const auto& y = b.node_->terms;
  if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
  for (size_t i = 0; i < x.size(); ++i) {
    if (int c = CompareMonomial(x[i].factors, y[i].factors)) return c;
    if (x[i].coef != y[i].coef) return x[i].coef < y[i].coef ? -1 : 1;
  }
  return 0;
}

size_t Dim::hash() const {
  return node_->hash;
}

std::string Dim::ToString() const {
  const auto& terms = node_->terms;
  if (terms.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    // Unsigned, so the magnitude of INT64_MIN is representable.
    uint64_t mag = t.coef < 0 ? 0 - static_cast<uint64_t>(t.coef) : static_cast<uint64_t>(t.coef);
    if (i == 0) {
      if (t.coef < 0) out += "-";
    } else {
      out += t.coef < 0 ? " - " : " + ";
    }
    if (t.factors.empty()) {
      out += std::to_string(mag);
      continue;
    }
    bool product = t.factors.size() > 1 || mag != 1;
    for (size_t f = 0; f < t.factors.size(); ++f) {
      if (f) out += " * ";
      out += AtomToString(*t.factors[f], product);
    }
    if (mag != 1) out += " * " + std::to_string(mag);
  }
  return out;
}

std::optional<int64_t> Dim::TryEval(const std::map<std::string, int64_t>& bindings) const {
  int64_t sum = 0;
  for (const Term& t : node_->terms) {
    int64_t prod = t.coef;
    for (const AtomPtr& f : t.factors) {
      int64_t v;
      if (f->kind == AtomKind::kSymbol) {
        auto it = bindings.find(f->name);
        if (it == bindings.end()) return std::nullopt;
        v = it->second;
      } else {
        auto a = f->a.TryEval(bindings);
        auto b = f->b.TryEval(bindings);
        if (!a || !b) return std::nullopt;
        switch (f->kind) {
          case AtomKind::kFloorDiv:
            if (*b == 0) return std::nullopt;
            v = FloorDivInt(*a, *b);
            break;
          case AtomKind::kMod:
            if (*b == 0) return std::nullopt;
            v = FloorModInt(*a, *b);
            break;
          case AtomKind::kMin:
            v = std::min(*a, *b);
            break;
          default:
            v = std::max(*a, *b);
            break;
        }
      }
      if (__builtin_mul_overflow(prod, v, &prod)) return std::nullopt;
    }
    if (__builtin_add_overflow(sum, prod, &sum)) return std::nullopt;
  }
  return sum;
}

Dim Dim::Substitute(const std::function<std::optional<Dim>(const std::string&)>& fn) const {
  Dim sum(0);
  for (const Term& t : node_->terms) {
    Dim prod(t.coef);
    for (const AtomPtr& f : t.factors) {
      Dim v;
      if (f->kind == AtomKind::kSymbol) {
        auto r = fn(f->name);
        v = r ? *r : Dim::Symbol(f->name);
      } else {
        v = DimBuilder::ApplyAtom(*f, f->a.Substitute(fn), f->b.Substitute(fn));
      }
      prod = prod * v;
    }
    sum = sum + prod;
  }
  return sum;
}

void Dim::CollectSymbols(std::set<std::string>* out) const {
  for (const Term& t : node_->terms) {
    for (const AtomPtr& f : t.factors) {
      if (f->kind == AtomKind::kSymbol) {
        out->insert(f->name);
      } else {
        f->a.CollectSymbols(out);
        f->b.CollectSymbols(out);
      }
    }
  }
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].ToString();
  }
  return s + "]";
}

size_t HashShape(const Shape& shape) {
  size_t h = shape.size();
  for (const Dim& d : shape) h = HashCombine(h, d.hash());
  return h;
}

bool IsConstShape(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_const(); });
}

std::vector<int64_t> ConstShape(const Shape& shape) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Dim& d : shape) out.push_back(d.value());
  return out;
}

Shape ShapeFromInts(const std::vector<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

Dim ShapeNumel(const Shape& shape) {
  Dim n(1);
  for (const Dim& d : shape) n = n * d;
  return n;
}

DimProgram::DimProgram(const std::vector<Dim>& dims, std::vector<std::string> symbols)
    : symbols_(std::move(symbols)) {
  for (const Dim& d : dims) {
    Emit(d);
    steps_.push_back({Op::kStore, static_cast<int64_t>(num_dims_++)});
    --depth_;
  }
}

int64_t DimProgram::Slot(const std::string& name) {
  for (size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i] == name) return static_cast<int64_t>(i);
  symbols_.push_back(name);
  return static_cast<int64_t>(symbols_.size() - 1);
}

// Postfix, in TryEval's order: the sum starts at 0, each term at its coefficient, and each
// factor multiplies into its term; a binary atom pushes its operands, then applies.
void DimProgram::Emit(const Dim& d) {
  auto push = [&](Op op, int64_t arg) {
    steps_.push_back({op, arg});
    max_stack_ = std::max(max_stack_, ++depth_);
  };
  auto apply = [&](Op op) {
    steps_.push_back({op, 0});
    --depth_;
  };
  push(Op::kConst, 0);
  for (const Term& t : d.node()->terms) {
    push(Op::kConst, t.coef);
    for (const AtomPtr& f : t.factors) {
      if (f->kind == AtomKind::kSymbol) {
        push(Op::kSymbol, Slot(f->name));
      } else {
        Emit(f->a);
        Emit(f->b);
        apply(f->kind == AtomKind::kFloorDiv ? Op::kFloorDiv
              : f->kind == AtomKind::kMod    ? Op::kMod
              : f->kind == AtomKind::kMin    ? Op::kMin
                                             : Op::kMax);
      }
      apply(Op::kMul);
    }
    apply(Op::kAdd);
  }
}

bool DimProgram::Eval(const int64_t* values, int64_t* out) const {
  // Dims nest a few levels deep: the stack is on the stack unless a program needs more.
  constexpr size_t kInline = 64;
  int64_t inline_stack[kInline];
  std::vector<int64_t> heap_stack;
  int64_t* stack = inline_stack;
  if (max_stack_ > kInline) {
    heap_stack.resize(max_stack_);
    stack = heap_stack.data();
  }
  size_t top = 0;  // stack[top - 1] is the top
  for (const Step& s : steps_) {
    switch (s.op) {
      case Op::kConst:
        stack[top++] = s.arg;
        continue;
      case Op::kSymbol:
        stack[top++] = values[s.arg];
        continue;
      case Op::kStore:
        out[s.arg] = stack[--top];
        continue;
      default:
        break;
    }
    const int64_t b = stack[--top];
    int64_t& a = stack[top - 1];
    switch (s.op) {
      case Op::kAdd:
        if (__builtin_add_overflow(a, b, &a)) return false;
        break;
      case Op::kMul:
        if (__builtin_mul_overflow(a, b, &a)) return false;
        break;
      case Op::kFloorDiv:
        if (b == 0) return false;
        a = FloorDivInt(a, b);
        break;
      case Op::kMod:
        if (b == 0) return false;
        a = FloorModInt(a, b);
        break;
      case Op::kMin:
        a = std::min(a, b);
        break;
      default:
        a = std::max(a, b);
        break;
    }
  }
  return true;
}

}  // namespace kiln

// ---- Dims as loop-IR index expressions (declared in ir/lower_api.h) ----

namespace kiln::lower {

loop::Expr DimToExpr(const Dim& d, const std::function<loop::Expr(const std::string&)>& symbol) {
  loop::Expr sum = loop::IntImm(0);
  for (const Term& t : DimBuilder::Terms(d)) {
    loop::Expr prod = loop::IntImm(t.coef);
    for (const AtomPtr& f : t.factors) {
      loop::Expr v;
      switch (f->kind) {
        case AtomKind::kSymbol:
          v = symbol(f->name);
          break;
        case AtomKind::kFloorDiv:
          v = loop::FloorDiv(DimToExpr(f->a, symbol), DimToExpr(f->b, symbol));
          break;
        case AtomKind::kMod:
          v = loop::FloorMod(DimToExpr(f->a, symbol), DimToExpr(f->b, symbol));
          break;
        case AtomKind::kMin:
          v = loop::Min(DimToExpr(f->a, symbol), DimToExpr(f->b, symbol));
          break;
        case AtomKind::kMax:
          v = loop::Max(DimToExpr(f->a, symbol), DimToExpr(f->b, symbol));
          break;
      }
      prod = loop::Mul(prod, v);
    }
    sum = loop::Add(sum, prod);
  }
  return sum;
}

}  // namespace kiln::lower
