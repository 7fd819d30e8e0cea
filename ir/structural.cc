#include "ir/structural.h"

#include "ir/loop/loop_text.h"

#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

namespace kiln {

namespace {

size_t Mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

// Operand slots of a node in a fixed order, entering function bodies (params first).
void Operands(const ExprNode* n, std::vector<const ExprNode*>& out) {
  out.clear();
  switch (n->kind) {
    case ExprKind::kCall: {
      const CallNode* c = static_cast<const CallNode*>(n);
      out.push_back(c->fn.get());
      for (const Expr& a : c->args) out.push_back(a.get());
      break;
    }
    case ExprKind::kTuple:
      for (const Expr& f : static_cast<const TupleNode*>(n)->fields) out.push_back(f.get());
      break;
    case ExprKind::kTupleGetItem:
      out.push_back(static_cast<const TupleGetItemNode*>(n)->tuple.get());
      break;
    case ExprKind::kFunction: {
      const FunctionNode* f = static_cast<const FunctionNode*>(n);
      for (const Var& p : f->params) out.push_back(p.get());
      out.push_back(f->body.get());
      break;
    }
    case ExprKind::kMatch: {
      const MatchNode* m = static_cast<const MatchNode*>(n);
      out.push_back(m->data.get());
      for (const MatchClause& c : m->clauses) {
        std::vector<Var> vars;
        PatternVars(c.pattern, &vars);
        for (const Var& v : vars) out.push_back(v.get());
        out.push_back(c.body.get());
      }
      break;
    }
    default:
      break;
  }
}

// The shape of a pattern, its variables aside (they are operands).
bool SamePattern(const Pattern& a, const Pattern& b) {
  if (a->kind != b->kind || a->fields.size() != b->fields.size()) return false;
  if (a->kind == PatternKind::kConstructor && (a->adt->name != b->adt->name || a->tag != b->tag))
    return false;
  for (size_t i = 0; i < a->fields.size(); ++i)
    if (!SamePattern(a->fields[i], b->fields[i])) return false;
  return true;
}

size_t HashPattern(const Pattern& p) {
  size_t h = Mix(0x9a7, static_cast<size_t>(p->kind));
  if (p->kind == PatternKind::kConstructor)
    h = Mix(Mix(h, std::hash<std::string>()(p->adt->name)), static_cast<size_t>(p->tag));
  for (const Pattern& f : p->fields) h = Mix(h, HashPattern(f));
  return h;
}

bool TypeArgsEqual(const std::vector<TypeArg>& a, const std::vector<TypeArg>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!TypeArgEqual(a[i], b[i])) return false;
  return true;
}

bool ConstraintsEqual(const std::vector<TypeConstraint>& a, const std::vector<TypeConstraint>& b) {
  // Compared as function types carrying them, which TypeEqual covers.
  return TypeEqual(PolyFuncType({}, {}, nullptr, a), PolyFuncType({}, {}, nullptr, b));
}

bool SameConstant(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Attrs::operator==, except that NaN equals NaN: a graph with a NaN attribute must still equal
// itself.
bool AttrsEqual(const Attrs& a, const Attrs& b) {
  const auto& x = a.values();
  const auto& y = b.values();
  if (x.size() != y.size()) return false;
  auto same = [](double p, double q) { return p == q || (std::isnan(p) && std::isnan(q)); };
  for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j) {
    if (i->first != j->first || i->second.index() != j->second.index()) return false;
    if (KindOf(i->second) == AttrKind::kFloat) {
      if (!same(std::get<double>(i->second), std::get<double>(j->second))) return false;
    } else if (KindOf(i->second) == AttrKind::kFloats) {
      const auto& p = std::get<std::vector<double>>(i->second);
      const auto& q = std::get<std::vector<double>>(j->second);
      if (p.size() != q.size()) return false;
      for (size_t k = 0; k < p.size(); ++k)
        if (!same(p[k], q[k])) return false;
    } else if (i->second != j->second) {
      return false;
    }
  }
  return true;
}

class Comparer {
 public:
  explicit Comparer(bool compare_types) : compare_types_(compare_types) {}

  bool Equal(const ExprNode* a, const ExprNode* b) {
    work_.push_back({a, b});
    std::vector<const ExprNode*> ops_a, ops_b;
    while (!work_.empty()) {
      auto [x, y] = work_.back();
      work_.pop_back();
      if (!x || !y) {
        if (x != y) return false;
        continue;
      }
      auto it = a_to_b_.find(x);
      if (it != a_to_b_.end()) {
        if (it->second != y) return false;
        continue;
      }
      if (!b_to_a_.emplace(y, x).second) return false;  // y already paired with another node
      a_to_b_.emplace(x, y);
      if (!LocalEqual(x, y)) return false;
      Operands(x, ops_a);
      Operands(y, ops_b);
      if (ops_a.size() != ops_b.size()) return false;
      for (size_t i = 0; i < ops_a.size(); ++i) work_.push_back({ops_a[i], ops_b[i]});
    }
    return true;
  }

 private:
  bool LocalEqual(const ExprNode* x, const ExprNode* y) {
    if (x->kind != y->kind) return false;
    bool types = x->kind == ExprKind::kVar || (compare_types_ && x->kind != ExprKind::kFunction);
    if (types && !TypesEqual(x->type, y->type)) return false;
    switch (x->kind) {
      case ExprKind::kVar:
        return true;
      case ExprKind::kConstant:
        return SameConstant(static_cast<const ConstantNode*>(x)->value,
                            static_cast<const ConstantNode*>(y)->value);
      case ExprKind::kCall: {
        const CallNode* c = static_cast<const CallNode*>(x);
        const CallNode* d = static_cast<const CallNode*>(y);
        return c->op == d->op && AttrsEqual(c->attrs, d->attrs) &&
               TypeArgsEqual(c->type_args, d->type_args);
      }
      case ExprKind::kGlobalVar:
        return x->name == y->name;
      case ExprKind::kConstructor: {
        const ConstructorNode* c = static_cast<const ConstructorNode*>(x);
        const ConstructorNode* d = static_cast<const ConstructorNode*>(y);
        return c->adt->name == d->adt->name && c->tag == d->tag;
      }
      case ExprKind::kMatch: {
        const MatchNode* m = static_cast<const MatchNode*>(x);
        const MatchNode* n = static_cast<const MatchNode*>(y);
        if (m->clauses.size() != n->clauses.size()) return false;
        for (size_t i = 0; i < m->clauses.size(); ++i)
          if (!SamePattern(m->clauses[i].pattern, n->clauses[i].pattern)) return false;
        return true;
      }
      case ExprKind::kTuple:
        return true;
      case ExprKind::kTupleGetItem:
        return static_cast<const TupleGetItemNode*>(x)->index ==
               static_cast<const TupleGetItemNode*>(y)->index;
      case ExprKind::kFunction: {
        const FunctionNode* f = static_cast<const FunctionNode*>(x);
        const FunctionNode* g = static_cast<const FunctionNode*>(y);
        if (f->type_params.size() != g->type_params.size()) return false;
        for (size_t i = 0; i < f->type_params.size(); ++i)
          if (!TypeEqual(f->type_params[i], g->type_params[i])) return false;
        return AttrsEqual(f->attrs, g->attrs) && TypesEqual(f->ret_type, g->ret_type) &&
               ConstraintsEqual(f->type_constraints, g->type_constraints);
      }
    }
    return false;
  }

  // TypeEqual, except that holes (each a distinct id) only need to correspond one to one, so a
  // graph with holes equals its own parsed copy.
  bool TypesEqual(const Type& a, const Type& b) {
    if (a == b) return true;
    if (!a || !b || a->kind != b->kind) return false;
    switch (a->kind) {
      case TypeKind::kTensor:
        return TypeEqual(a, b);
      case TypeKind::kTuple: {
        const auto& x = AsTuple(a)->fields;
        const auto& y = AsTuple(b)->fields;
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
          if (!TypesEqual(x[i], y[i])) return false;
        return true;
      }
      case TypeKind::kFunc: {
        const FuncTypeNode* x = AsFunc(a);
        const FuncTypeNode* y = AsFunc(b);
        if (x->params.size() != y->params.size() || !TypesEqual(x->ret, y->ret)) return false;
        for (size_t i = 0; i < x->params.size(); ++i)
          if (!TypesEqual(x->params[i], y->params[i])) return false;
        return true;
      }
      case TypeKind::kTypeVar:
        return TypeEqual(a, b);
      case TypeKind::kTypeCall: {
        const TypeCallNode* x = AsTypeCall(a);
        const TypeCallNode* y = AsTypeCall(b);
        if (x->adt != y->adt || x->args.size() != y->args.size()) return false;
        for (size_t i = 0; i < x->args.size(); ++i)
          if (!TypesEqual(x->args[i], y->args[i])) return false;
        return true;
      }
      case TypeKind::kIncomplete: {
        int64_t i = static_cast<const IncompleteTypeNode*>(a.get())->id;
        int64_t j = static_cast<const IncompleteTypeNode*>(b.get())->id;
        auto [it, fresh] = hole_a_to_b_.emplace(i, j);
        if (!fresh) return it->second == j;
        return hole_b_to_a_.emplace(j, i).second;
      }
    }
    return false;
  }

  bool compare_types_;
  std::vector<std::pair<const ExprNode*, const ExprNode*>> work_;
  std::unordered_map<const ExprNode*, const ExprNode*> a_to_b_, b_to_a_;
  std::unordered_map<int64_t, int64_t> hole_a_to_b_, hole_b_to_a_;
};

// TypeHash without the hole ids, which differ between equal graphs.
size_t TypeHashNoHoles(const Type& t) {
  if (!t) return 0x9e37;
  switch (t->kind) {
    case TypeKind::kTensor:
      return TypeHash(t);
    case TypeKind::kTuple: {
      size_t h = 0x7091;
      for (const Type& f : AsTuple(t)->fields) h = Mix(h, TypeHashNoHoles(f));
      return h;
    }
    case TypeKind::kFunc: {
      size_t h = 0xf17;
      for (const Type& p : AsFunc(t)->params) h = Mix(h, TypeHashNoHoles(p));
      return Mix(h, TypeHashNoHoles(AsFunc(t)->ret));
    }
    case TypeKind::kIncomplete:
      return 0x401e;
    case TypeKind::kTypeVar:
      return TypeHash(t);
    case TypeKind::kTypeCall: {
      size_t h = std::hash<std::string>()(AsTypeCall(t)->adt);
      for (const Type& a : AsTypeCall(t)->args) h = Mix(h, TypeHashNoHoles(a));
      return h;
    }
  }
  return 0;
}

// Hashes bottom-up in one iterative post-order. A variable hashes as the order in which the
// traversal first reaches it, which equal graphs share: parameters come first in their
// function's operand list, so they are numbered in order.
class Hasher {
 public:
  size_t Hash(const ExprNode* root) {
    if (!root) return 0x2011;
    struct Frame {
      const ExprNode* node;
      std::vector<const ExprNode*> ops;
      size_t next = 0;
    };
    std::vector<Frame> stack;
    auto push = [&](const ExprNode* n) {
      stack.push_back(Frame{n, {}, 0});
      Operands(n, stack.back().ops);
    };
    push(root);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.ops.size()) {
        const ExprNode* child = top.ops[top.next++];
        if (child && !memo_.count(child)) push(child);
        continue;
      }
      memo_[top.node] = Local(top.node, top.ops);
      stack.pop_back();
    }
    return memo_.at(root);
  }

 private:
  size_t Local(const ExprNode* n, const std::vector<const ExprNode*>& ops) {
    size_t h = Mix(0x57c, static_cast<size_t>(n->kind));
    for (const ExprNode* op : ops) h = Mix(h, op ? memo_.at(op) : 0x2011);
    switch (n->kind) {
      case ExprKind::kVar:
        h = Mix(h, next_var_++);
        h = Mix(h, TypeHashNoHoles(n->type));
        break;
      case ExprKind::kConstant: {
        const Tensor& t = static_cast<const ConstantNode*>(n)->value;
        if (!t.defined()) break;
        h = Mix(h, static_cast<size_t>(t.dtype()));
        for (int64_t d : t.shape()) h = Mix(h, std::hash<int64_t>()(d));
        h = Mix(h, std::hash<std::string_view>()(
                       std::string_view(static_cast<const char*>(t.raw_data()), t.nbytes())));
        break;
      }
      case ExprKind::kCall: {
        const CallNode* c = static_cast<const CallNode*>(n);
        if (c->op) h = Mix(h, std::hash<std::string>()(c->op->name));
        h = Mix(h, c->attrs.Hash());
        h = Mix(h, c->type_args.size());
        break;
      }
      case ExprKind::kGlobalVar:
        h = Mix(h, std::hash<std::string>()(n->name));
        break;
      case ExprKind::kConstructor:
        h = Mix(h, std::hash<std::string>()(static_cast<const ConstructorNode*>(n)->adt->name));
        h = Mix(h, static_cast<size_t>(static_cast<const ConstructorNode*>(n)->tag));
        break;
      case ExprKind::kMatch:
        for (const MatchClause& c : static_cast<const MatchNode*>(n)->clauses)
          h = Mix(h, HashPattern(c.pattern));
        break;
      case ExprKind::kTuple:
        break;
      case ExprKind::kTupleGetItem:
        h = Mix(h, static_cast<size_t>(static_cast<const TupleGetItemNode*>(n)->index));
        break;
      case ExprKind::kFunction: {
        const FunctionNode* f = static_cast<const FunctionNode*>(n);
        h = Mix(h, f->attrs.Hash());
        h = Mix(h, TypeHashNoHoles(f->ret_type));
        h = Mix(h, f->type_params.size());
        break;
      }
    }
    return h;
  }

  std::unordered_map<const ExprNode*, size_t> memo_;
  size_t next_var_ = 0;
};

}  // namespace

bool StructuralEqual(const Expr& a, const Expr& b, bool compare_types) {
  return Comparer(compare_types).Equal(a.get(), b.get());
}

bool StructuralEqual(const IRModule& a, const IRModule& b, bool compare_types) {
  const auto& fa = a.functions();
  const auto& fb = b.functions();
  if (fa.size() != fb.size()) return false;
  for (auto x = fa.begin(), y = fb.begin(); x != fa.end(); ++x, ++y) {
    if (x->first != y->first || !StructuralEqual(x->second, y->second, compare_types)) return false;
  }
  const auto& aa = a.adts();
  const auto& ab = b.adts();
  if (aa.size() != ab.size()) return false;
  for (auto x = aa.begin(), y = ab.begin(); x != aa.end(); ++x, ++y) {
    const AdtDef& p = *x->second;
    const AdtDef& q = *y->second;
    if (x->first != y->first || p.type_params.size() != q.type_params.size() ||
        p.constructors.size() != q.constructors.size())
      return false;
    for (size_t i = 0; i < p.constructors.size(); ++i) {
      const AdtConstructor& c = p.constructors[i];
      const AdtConstructor& d = q.constructors[i];
      if (c.name != d.name || !TypeEqual(TupleType(c.fields), TupleType(d.fields))) return false;
    }
  }
  const auto& pa = a.prim_funcs();
  const auto& pb = b.prim_funcs();
  if (pa.size() != pb.size()) return false;
  for (auto x = pa.begin(), y = pb.begin(); x != pa.end(); ++x, ++y) {
    if (x->first != y->first || !loop::StructuralEqual(x->second, y->second)) return false;
  }
  return true;
}

size_t StructuralHash(const Expr& e) {
  return Hasher().Hash(e.get());
}

size_t StructuralHash(const IRModule& m) {
  size_t h = 0x30d;
  for (const auto& [name, fn] : m.functions()) {
    h = Mix(h, std::hash<std::string>()(name));
    h = Mix(h, StructuralHash(fn));
  }
  for (const auto& [name, f] : m.prim_funcs()) {
    h = Mix(h, std::hash<std::string>()(name));
    h = Mix(h, loop::StructuralHash(f));
  }
  return h;
}

}  // namespace kiln
