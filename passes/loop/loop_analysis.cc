#include "passes/loop/loop_analysis.h"

#include <algorithm>

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

std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v, const VarSet& variant) {
  return AffineCoefficientIf(e, v, [&variant](const Expr& x) { return Mentions(x, variant); });
}

std::optional<int64_t> AffineCoefficient(const Expr& e, const VarNode* v) {
  return AffineCoefficientIf(e, v, [v](const Expr& x) { return Mentions(x, v); });
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
