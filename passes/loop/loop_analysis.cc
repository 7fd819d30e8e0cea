#include "passes/loop/loop_analysis.h"

#include <algorithm>

#include "ir/dim.h"
#include "ir/loop/loop_text.h"

namespace kiln::loop {

namespace {

// Whether `e` reads a variable for which `reads(var)` holds or, with `count_loads`, any buffer.
template <typename Pred>
bool MentionsIf(const Expr& e, const Pred& reads, bool count_loads = false) {
  struct Finder : Visitor {
    const Pred* reads;
    bool count_loads;
    bool found = false;
    void VisitVar(const VarNode* n, const Expr&) override { found = found || (*reads)(n); }
    void VisitLoad(const LoadNode* n, const Expr& self) override {
      found = found || count_loads;
      Visitor::VisitLoad(n, self);
    }
  } f;
  f.reads = &reads;
  f.count_loads = count_loads;
  f.VisitExpr(e);
  return f.found;
}

// AffineCoefficient with "r does not depend on v" given by `mentions`.
template <typename Mentions>
std::optional<int64_t> AffineCoefficientIf(const Expr& e, const VarNode* v,
                                           const Mentions& mentions) {
  if (e.get() == v) return 1;
  if (!mentions(e)) return 0;
  const BinaryNode* b = AsBinary(e);
  if (!b) return std::nullopt;
  std::optional<int64_t> x = AffineCoefficientIf(b->a, v, mentions);
  std::optional<int64_t> y = AffineCoefficientIf(b->b, v, mentions);
  if (!x || !y) return std::nullopt;
  int64_t c;
  switch (b->op) {
    case BinaryOp::kAdd:
      return *x + *y;
    case BinaryOp::kSub:
      return *x - *y;
    case BinaryOp::kMul:
      if (*y == 0 && IsConstInt(b->b, &c)) return *x * c;
      if (*x == 0 && IsConstInt(b->a, &c)) return *y * c;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

bool Mentions(const Expr& e, const VarNode* v) {
  return MentionsIf(e, [v](const VarNode* n) { return n == v; });
}

bool Mentions(const Expr& e, const VarSet& vars) {
  return MentionsIf(e, [&vars](const VarNode* n) { return vars.count(n) != 0; });
}

bool MentionsOrLoads(const Expr& e, const VarSet& vars) {
  return MentionsIf(
      e, [&vars](const VarNode* n) { return vars.count(n) != 0; }, true);
}

bool ReadsOnly(const Expr& e, const VarSet& vars) {
  return !MentionsIf(
      e, [&vars](const VarNode* n) { return vars.count(n) == 0; }, true);
}

std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v, const VarSet& variant) {
  return AffineCoefficientIf(e, v, [&variant](const Expr& x) { return Mentions(x, variant); });
}

std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v) {
  return AffineCoefficientIf(e, v, [v](const Expr& x) { return Mentions(x, v); });
}

std::optional<Expr> SymbolicAffineCoefficient(const Expr& e, const VarNode* v) {
  if (e.get() == v) return IntImm(1, e->dtype);
  if (!Mentions(e, v)) return IntImm(0, e->dtype);
  const BinaryNode* b = AsBinary(e);
  if (!b) return std::nullopt;
  if (b->op == BinaryOp::kMul) {
    // One factor reads v, the other is the coefficient's factor.
    const bool in_a = Mentions(b->a, v), in_b = Mentions(b->b, v);
    if (in_a && in_b) return std::nullopt;
    std::optional<Expr> c = SymbolicAffineCoefficient(in_a ? b->a : b->b, v);
    if (!c) return std::nullopt;
    return Mul(*c, in_a ? b->b : b->a);
  }
  if (b->op != BinaryOp::kAdd && b->op != BinaryOp::kSub) return std::nullopt;
  std::optional<Expr> x = SymbolicAffineCoefficient(b->a, v);
  std::optional<Expr> y = SymbolicAffineCoefficient(b->b, v);
  if (!x || !y) return std::nullopt;
  return b->op == BinaryOp::kAdd ? Add(*x, *y) : Sub(*x, *y);
}

bool IsRowSplitWalk(const Expr& e, const VarNode* v, int64_t align) {
  struct Unsplit : Mutator {
    const VarNode* v;
    int64_t align;
    bool split = false;
    Expr MutateBinary(const BinaryNode* n, const Expr& self) override {
      int64_t c = 0;
      if ((n->op == BinaryOp::kFloorDiv || n->op == BinaryOp::kFloorMod) && IsConstInt(n->b, &c) &&
          c > 0 && c % align == 0 && AffineCoefficient(n->a, v) == 1) {
        split = true;
        return n->op == BinaryOp::kFloorDiv ? IntImm(0) : n->a;
      }
      return Mutator::MutateBinary(n, self);
    }
  } unsplit;
  unsplit.v = v;
  unsplit.align = align;
  Expr flat = unsplit.MutateExpr(e);
  return unsplit.split && AffineCoefficient(flat, v) == 1;
}

std::vector<Expr> RowMajorStrides(const std::vector<Expr>& shape) {
  std::vector<Expr> strides(shape.size());
  Expr acc = IntImm(1);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = acc;
    acc = Mul(shape[d], acc);
  }
  return strides;
}

std::optional<Expr> FlatIndex(const BufferNode& b, const std::vector<Expr>& indices) {
  for (const Expr& e : indices)
    if (e->lanes != 1) return std::nullopt;
  if (indices.size() == 1 && b.shape.size() > 1)
    return b.strides.empty() ? std::nullopt : std::optional<Expr>(indices[0]);
  std::vector<Expr> strides = b.strides.empty() ? RowMajorStrides(b.shape) : b.strides;
  if (indices.size() != strides.size()) return std::nullopt;
  Expr offset = IntImm(0);
  for (size_t d = 0; d < indices.size(); ++d)
    offset = Add(offset, Mul(Cast(DType::kInt64, indices[d]), strides[d]));
  return offset;
}

Buffer ExplicitStrides::Strided(const Buffer& b) {
  if (!b->strides.empty() || b->shape.size() < 2) return b;
  auto it = remade_.find(b.get());
  if (it != remade_.end()) return it->second;
  Buffer out = MakeBuffer(b->name, b->dtype, b->shape, b->scope, RowMajorStrides(b->shape));
  remade_.emplace(b.get(), out);
  return out;
}

Buffer ExplicitStrides::Current(const Buffer& b) const {
  auto it = remade_.find(b.get());
  return it == remade_.end() ? b : it->second;
}

Stmt ExplicitStrides::ReplaceIn(const Stmt& s) const {
  class Replace : public Mutator {
   public:
    explicit Replace(const ExplicitStrides* e) : e_(e) {}

   protected:
    Buffer MutateBuffer(const Buffer& b) override { return e_->Current(b); }

   private:
    const ExplicitStrides* e_;
  } replace(this);
  return replace.MutateStmt(s);
}

bool SameIndices(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!StructuralEqual(a[k], b[k])) return false;
  return true;
}

bool ContainsStmtKind(const Stmt& s, std::initializer_list<StmtKind> kinds) {
  struct Finder : Visitor {
    std::initializer_list<StmtKind> kinds;
    bool found = false;
    void VisitStmt(const Stmt& s) override {
      if (found || !s) return;
      if (std::find(kinds.begin(), kinds.end(), s->kind) != kinds.end()) {
        found = true;
        return;
      }
      Visitor::VisitStmt(s);
    }
    void VisitExpr(const Expr&) override {}  // statements only
  } f;
  f.kinds = kinds;
  f.VisitStmt(s);
  return f.found;
}

std::optional<Interval> IntervalOf(const Expr& e, const VarIntervals& vars) {
  if (int64_t c; IsConstInt(e, &c)) return Interval{c, c};
  if (const VarNode* v = AsVar(e)) {
    auto it = vars.find(v);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
  const BinaryNode* b = AsBinary(e);
  if (!b || b->dtype != DType::kInt64 || b->lanes != 1) return std::nullopt;
  std::optional<Interval> x = IntervalOf(b->a, vars), y = IntervalOf(b->b, vars);
  if (!x || !y) return std::nullopt;
  Interval r{};
  switch (b->op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(x->min, y->min, &r.min) ||
          __builtin_add_overflow(x->max, y->max, &r.max))
        return std::nullopt;
      return r;
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(x->min, y->max, &r.min) ||
          __builtin_sub_overflow(x->max, y->min, &r.max))
        return std::nullopt;
      return r;
    case BinaryOp::kMul: {
      int64_t p[4];
      if (__builtin_mul_overflow(x->min, y->min, &p[0]) ||
          __builtin_mul_overflow(x->min, y->max, &p[1]) ||
          __builtin_mul_overflow(x->max, y->min, &p[2]) ||
          __builtin_mul_overflow(x->max, y->max, &p[3]))
        return std::nullopt;
      return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case BinaryOp::kFloorDiv:
      if (y->min != y->max || y->min <= 0) return std::nullopt;
      return Interval{FloorDivInt(x->min, y->min), FloorDivInt(x->max, y->min)};
    case BinaryOp::kFloorMod:
      if (y->min != y->max || y->min <= 0) return std::nullopt;
      // Within one period the remainders keep their order; across one, any remainder occurs.
      if (FloorDivInt(x->min, y->min) == FloorDivInt(x->max, y->min))
        return Interval{FloorModInt(x->min, y->min), FloorModInt(x->max, y->min)};
      return Interval{0, y->min - 1};
    case BinaryOp::kMin:
      return Interval{std::min(x->min, y->min), std::min(x->max, y->max)};
    case BinaryOp::kMax:
      return Interval{std::max(x->min, y->min), std::max(x->max, y->max)};
    default:
      return std::nullopt;
  }
}

VarIntervals LoopIntervals(const Stmt& s, VarIntervals outer) {
  struct Walker : Visitor {
    VarIntervals vars;
    void Bind(const VarNode* v, Interval r) {
      auto [it, fresh] = vars.emplace(v, r);
      if (!fresh)
        it->second = Interval{std::min(it->second.min, r.min), std::max(it->second.max, r.max)};
    }
    void VisitFor(const ForNode* n, const Stmt& self) override {
      std::optional<Interval> min = IntervalOf(n->min, vars), extent = IntervalOf(n->extent, vars);
      int64_t last;
      if (min && extent && extent->max >= 1 &&
          !__builtin_add_overflow(min->max, extent->max - 1, &last))
        Bind(n->var.get(), Interval{min->min, last});
      Visitor::VisitFor(n, self);
    }
    void VisitLetStmt(const LetStmtNode* n, const Stmt& self) override {
      if (std::optional<Interval> r = IntervalOf(n->value, vars)) Bind(n->var.get(), *r);
      Visitor::VisitLetStmt(n, self);
    }
  } w;
  w.vars = std::move(outer);
  w.VisitStmt(s);
  return w.vars;
}

void AccessScanner::VisitLoad(const LoadNode* n, const Expr& self) {
  accesses.push_back({n->buffer.get(), &n->indices, false, loop_depth_});
  Visitor::VisitLoad(n, self);
}

void AccessScanner::VisitStore(const StoreNode* n, const Stmt& self) {
  accesses.push_back({n->buffer.get(), &n->indices, true, loop_depth_});
  Visitor::VisitStore(n, self);
}

void AccessScanner::VisitFor(const ForNode* n, const Stmt& self) {
  ++loop_depth_;
  Visitor::VisitFor(n, self);
  --loop_depth_;
}

}  // namespace kiln::loop
