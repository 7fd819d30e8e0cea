// CommonSubexprElimination: merges nodes that compute the same value into one shared node.
//
//   before:  def @main(%x: f32[4]) {
//              %a = exp(%x)
//              %b = exp(%x)
//              add(%a, %b)
//            }
//   after:   def @main(%x: f32[4]) {
//              %a = exp(%x)
//              add(%a, %a)
//            }
//
// Nodes are hash-consed bottom-up: once a node's operands are merged, it is looked up by its
// local content and replaced by the first node seen with the same content:
// - calls: the same op (or the same callee Function node), equal attributes, and the very same
//   argument nodes; calls that differ only in an attribute are different;
// - tuples and tuple projections: the same field nodes / the same tuple node and index;
// - constants: the same dtype, shape and bytes (so 0.0 and -0.0 stay apart), for constants of
//   at most kMaxMergedConstantElements elements. Weights larger than that are almost never
//   duplicated by value (exporters share one initializer), and hashing every large weight on
//   every compile of every shape would cost more than it finds.
// Variables are never merged: two parameters are two inputs. The survivor keeps its source
// name.
//
// Each function body is a scope of its own: a node inside a nested function is merged only with
// nodes of that same function, never with a node of the enclosing one (a fused kernel's body
// must not start referring to its caller's nodes). A node of the enclosing function that a
// nested body refers to belongs to the enclosing function.
//
// Merging two calls is only correct for pure ops, whose result depends on their inputs and
// attributes alone. Every op in the registry is pure; an op with side effects or randomness
// would need a purity flag on OpDef that this pass checks.
#include <cstring>
#include <deque>
#include <unordered_map>

#include "ir/visitor.h"
#include "passes/pass.h"

namespace kiln {
namespace {

constexpr int64_t kMaxMergedConstantElements = 4096;

size_t Combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

size_t HashPtr(const void* p) {
  return std::hash<const void*>()(p);
}

size_t HashBytes(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return static_cast<size_t>(h);
}

bool Mergeable(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kCall:  // not module calls or constructors (type arguments, ADT values)
      return !AsGlobalVar(AsCall(e)->fn) && !AsConstructor(AsCall(e)->fn);
    case ExprKind::kTuple:
    case ExprKind::kTupleGetItem:
      return true;
    case ExprKind::kConstant:
      return AsConstant(e)->value.numel() <= kMaxMergedConstantElements;
    default:
      return false;
  }
}

// A hash of what SameContent compares: the node itself, with operands by identity.
size_t ContentHash(const Expr& e) {
  size_t h = static_cast<size_t>(e->kind);
  if (const CallNode* c = AsCall(e)) {
    h = Combine(h, HashPtr(c->op));
    h = Combine(h, HashPtr(c->fn.get()));
    for (const Expr& a : c->args) h = Combine(h, HashPtr(a.get()));
    h = Combine(h, c->attrs.Hash());
  } else if (const TupleNode* t = AsTuple(e)) {
    for (const Expr& f : t->fields) h = Combine(h, HashPtr(f.get()));
  } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
    h = Combine(Combine(h, HashPtr(g->tuple.get())), static_cast<size_t>(g->index));
  } else if (const ConstantNode* k = AsConstant(e)) {
    h = Combine(h, static_cast<size_t>(k->value.dtype()));
    for (int64_t d : k->value.shape()) h = Combine(h, static_cast<size_t>(d));
    h = Combine(h, HashBytes(k->value.raw_data(), k->value.nbytes()));
  }
  return h;
}

bool SameContent(const Expr& a, const Expr& b) {
  if (a->kind != b->kind) return false;
  if (const CallNode* x = AsCall(a)) {
    const CallNode* y = AsCall(b);
    return x->op == y->op && x->fn == y->fn && x->args == y->args && x->attrs == y->attrs;
  }
  if (const TupleNode* x = AsTuple(a)) return x->fields == AsTuple(b)->fields;
  if (const TupleGetItemNode* x = AsTupleGetItem(a)) {
    const TupleGetItemNode* y = AsTupleGetItem(b);
    return x->tuple == y->tuple && x->index == y->index;
  }
  if (const ConstantNode* x = AsConstant(a)) {
    const Tensor &u = x->value, &v = AsConstant(b)->value;
    return u.dtype() == v.dtype() && u.shape() == v.shape() &&
           (u.nbytes() == 0 || std::memcmp(u.raw_data(), v.raw_data(), u.nbytes()) == 0);
  }
  return false;
}

// The function (by its original node) that each node of `root` belongs to: the outermost one
// whose body reaches it without entering a nested function body. Breadth-first, so every
// enclosing function claims its nodes before the functions nested in it look.
std::unordered_map<const ExprNode*, const ExprNode*> FunctionScopes(const Function& root) {
  std::unordered_map<const ExprNode*, const ExprNode*> scope;
  std::deque<const FunctionNode*> pending{root.get()};
  while (!pending.empty()) {
    const FunctionNode* fn = pending.front();
    pending.pop_front();
    for (const Expr& e : PostOrder(fn->body)) {
      if (!scope.emplace(e.get(), fn).second) continue;
      if (const FunctionNode* nested = AsFunction(e)) pending.push_back(nested);
    }
  }
  return scope;
}

class Merger : public ExprMutator {
 public:
  explicit Merger(const Function& root) : scope_(FunctionScopes(root)) {}

 protected:
  Expr MutateConstant(const ConstantNode* n, const Expr& self) override {
    return Canonical(self, ExprMutator::MutateConstant(n, self));
  }
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    return Canonical(self, ExprMutator::MutateCall(n, self));
  }
  Expr MutateTuple(const TupleNode* n, const Expr& self) override {
    return Canonical(self, ExprMutator::MutateTuple(n, self));
  }
  Expr MutateTupleGetItem(const TupleGetItemNode* n, const Expr& self) override {
    return Canonical(self, ExprMutator::MutateTupleGetItem(n, self));
  }

 private:
  // `rebuilt` is `original` with merged operands; returns the node of its scope with the same
  // content, registering `rebuilt` when it is the first.
  Expr Canonical(const Expr& original, const Expr& rebuilt) {
    if (!Mergeable(rebuilt)) return rebuilt;
    auto it = scope_.find(original.get());
    if (it == scope_.end()) return rebuilt;  // cannot happen: every node was given a scope
    auto& table = seen_[it->second];
    size_t h = ContentHash(rebuilt);
    auto [first, last] = table.equal_range(h);
    for (auto c = first; c != last; ++c)
      if (SameContent(c->second, rebuilt)) return c->second;
    table.emplace(h, rebuilt);
    return rebuilt;
  }

  std::unordered_map<const ExprNode*, const ExprNode*> scope_;
  std::unordered_map<const ExprNode*, std::unordered_multimap<size_t, Expr>> seen_;
};

}  // namespace

void RegisterCommonSubexprEliminationPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "CommonSubexprElimination",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "merge nodes that compute the same value",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"CommonSubexprElimination", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  Merger merger(f);
                  return std::static_pointer_cast<const FunctionNode>(merger.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
