// SimplifyExpr: algebraic rewrites that leave every value and every type exactly as it was.
//
//   before:  def @main(%x: f32[batch, 4, 8]) {
//              %t = transpose(transpose(%x, perm=[0, 2, 1]), perm=[0, 2, 1])
//              %r = reshape(reshape(%t, shape=[0, 32]), shape=[-1, 8, 4])
//              relu(relu(mul(%r, const(f32[], 1.0))))
//            }
//   after:   def @main(%x: f32[batch, 4, 8]) {
//              %r = reshape(%x, shape=[-1, 8, 4])
//              relu(%r)
//            }
//
// Rules (x, y: any expressions; "1", "0", "-1": constants of any dtype whose every element has
// that value):
// - identities: x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1, x ** 1, maximum(x, x),
//   minimum(x, x), and(x, x), or(x, x), and(x, true), or(x, false) (either side),
//   where(c, x, x), clip(x) with no bounds -> x;
// - negation: neg(neg(x)) -> x; x * -1, -1 * x, x / -1 -> neg(x); x + neg(y) -> x - y;
//   neg(x) + y -> y - x; x - neg(y) -> x + y; abs(neg(x)) -> abs(x);
// - idempotent ops: f(f(x)) -> f(x) for relu, abs, floor, ceil, round and sign;
// - casts: cast to x's own dtype -> x; cast(cast(x, A), B) -> cast(x, B) when A holds every
//   value of x's dtype and converts like it (integer to a wider integer, float to a wider
//   float, bool to an integer), so the inner cast cannot change what the outer one produces;
// - transposes: the identity permutation -> x; transpose(transpose(x, p), q) -> one
//   transpose with the composed permutation, or x when that is the identity;
// - views (reshape, squeeze, unsqueeze, flatten: each keeps the row-major element order, so
//   only the type tells them apart): a view whose type is its input's -> x; a view of a view
//   whose type is the inner input's -> that input (squeeze(unsqueeze(x)) with the same axes,
//   say, also after the unsqueeze became a reshape: see ViewOrigins); a reshape of a view, or
//   a view of a reshape -> one reshape of the inner input, when its `shape` attribute can be
//   written for that input (see ComposedReshapeAttrs);
// - expand to x's own shape, a slice that takes every element (positive steps and x's type),
//   and concat of a single input -> x;
// - tuples: (x, y, ...).i -> field i.
//
// What must not fire: an identity whose constant broadcasts x to a larger shape (x * 1 with the
// 1 of a higher rank); a composed reshape whose symbolic shape has no single `shape` attribute
// over the inner input (two dims that are neither constants nor copies of the input's dims at
// the same position); a slice with a negative step, which reverses x without changing its type.
// Every rewrite is checked against the type of the node it replaces, so a rule that would
// change a shape or a dtype is not applied.
//
// x + 0 -> x and x - (-0) -> x give a -0.0 in x back as itself rather than as +0.0, as every
// compiler's default floating-point simplification does; no other rule changes a value (NaN
// payloads aside).
//
// The rewrite is bottom-up: a node's operands are already simplified when its rules run, and a
// node that a rule builds is simplified again at once, so chains collapse in a single pass.
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

#include "ir/error.h"
#include "ir/visitor.h"
#include "passes/pass.h"

namespace kiln {
namespace {

bool SameType(const Expr& a, const Expr& b) {
  return a->type && b->type && TypeEqual(a->type, b->type);
}

// A constant every element of which equals `v`.
bool IsFilledWith(const Expr& e, double v) {
  const ConstantNode* c = AsConstant(e);
  if (!c) return false;
  for (int64_t i = 0; i < c->value.numel(); ++i) {
    if (c->value.GetAsDouble(i) != v) return false;
  }
  return true;
}

// `op(args)`, typed, to replace `replaced`; nullptr when its type is not exactly replaced's (or
// the op rejects the arguments), so that a rewrite built with it cannot change a type.
Expr BuildLike(const std::string& op, std::vector<Expr> args, const Attrs& attrs,
               const Expr& replaced) {
  std::vector<Type> arg_types;
  for (const Expr& a : args) {
    if (!a->type) return nullptr;
    arg_types.push_back(a->type);
  }
  Type t;
  try {
    t = InferOpType(op, arg_types, attrs);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTypeError) throw;
    return nullptr;
  }
  if (!TypeEqual(t, replaced->type)) return nullptr;
  return WithType(MakeCall(op, std::move(args), attrs, replaced->name), std::move(t));
}

bool IsIdempotent(const std::string& op) {
  return op == "relu" || op == "abs" || op == "floor" || op == "ceil" || op == "round" ||
         op == "sign";
}

bool IsView(const std::string& op) {
  return op == "reshape" || op == "squeeze" || op == "unsqueeze" || op == "flatten";
}

// Whether every value of `from` is a value of `to` and casts onward from `to` exactly as it
// would from `from`. Kernels convert integers to integers by wrapping but floats to integers by
// saturating, so the inner cast must not cross between the two.
bool IsLosslessWidening(DType from, DType to) {
  using D = DType;
  switch (from) {
    case D::kBool:
      return IsInteger(to);
    case D::kUInt8:
      return to == D::kInt16 || to == D::kInt32 || to == D::kInt64;
    case D::kInt8:
      return to == D::kInt16 || to == D::kInt32 || to == D::kInt64;
    case D::kInt16:
      return to == D::kInt32 || to == D::kInt64;
    case D::kInt32:
      return to == D::kInt64;
    case D::kFloat16:
    case D::kBFloat16:
      return to == D::kFloat32 || to == D::kFloat64;
    case D::kFloat32:
      return to == D::kFloat64;
    default:
      return false;
  }
}

// perm[i] is the input axis that becomes output axis i; an empty `perm` reverses the axes.
std::vector<int64_t> TransposePerm(const CallNode* c, int rank) {
  const std::vector<int64_t>& perm = c->attrs.GetInts("perm");
  std::vector<int64_t> p(rank);
  for (int i = 0; i < rank; ++i) {
    p[i] = perm.empty() ? rank - 1 - i : (perm[i] < 0 ? perm[i] + rank : perm[i]);
  }
  return p;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

Attrs ReshapeAttrs(std::vector<int64_t> shape, bool allowzero) {
  return Attrs{{"shape", std::move(shape)}, {"allowzero", allowzero}};
}

// Candidate `shape` attributes for one reshape of `input` to `out`, the type of a view of a
// view (`outer`): each is checked by the caller, the first that gives `out` exactly wins.
// - a concrete `out` is written as is;
// - the outer reshape's own attribute still fits when it copies nothing with a 0 (its -1 is
//   inferred from the element count, which every view keeps);
// - otherwise each dim is written as a positive constant, as a 0 that copies the input dim at
//   the same position, or, for one symbolic dim, as the -1.
std::vector<Attrs> ComposedReshapeAttrs(const CallNode* outer, const TensorTypeNode& out,
                                        const TensorTypeNode& input) {
  std::vector<Attrs> candidates;
  if (IsConstShape(out.shape)) {
    std::vector<int64_t> dims = ConstShape(out.shape);
    bool has_zero = std::find(dims.begin(), dims.end(), 0) != dims.end();
    candidates.push_back(ReshapeAttrs(std::move(dims), has_zero));
  }
  if (outer->op->name == "reshape") {
    const std::vector<int64_t>& spec = outer->attrs.GetInts("shape");
    bool allowzero = outer->attrs.GetBool("allowzero");
    if (allowzero || std::find(spec.begin(), spec.end(), 0) == spec.end())
      candidates.push_back(ReshapeAttrs(spec, allowzero));
  }
  std::vector<int64_t> spec;
  bool inferred = false;
  for (int i = 0; i < out.ndim(); ++i) {
    const Dim& d = out.shape[i];
    if (d.is_const() && d.value() > 0) {
      spec.push_back(d.value());
    } else if (i < input.ndim() && d == input.shape[i]) {
      spec.push_back(0);
    } else if (!d.is_const() && !inferred) {
      spec.push_back(-1);
      inferred = true;
    } else {
      return candidates;
    }
  }
  candidates.push_back(ReshapeAttrs(std::move(spec), false));
  return candidates;
}

// For each reshape that replaced a view of a view, V2(V1(x)) -> reshape(x): the node V1(x).
// The reshape is a view of it, so a later view of the reshape that has V1(x)'s type is V1(x)
// itself: squeeze(unsqueeze(%r)) still finds %r after unsqueeze(%r) has become a reshape of
// %r's input. The keys are kept alive, so that a freed node's address cannot be reused.
class ViewOrigins {
 public:
  void Add(const Expr& composed, const Expr& inner_view) {
    origins_[composed.get()] = {composed, inner_view};
  }
  // The nodes that `e` is known to be a view of, nearest first.
  std::vector<Expr> Chain(const Expr& e) const {
    std::vector<Expr> chain;
    for (auto it = origins_.find(e.get()); it != origins_.end();
         it = origins_.find(it->second.second.get()))
      chain.push_back(it->second.second);
    return chain;
  }

 private:
  std::unordered_map<const ExprNode*, std::pair<Expr, Expr>> origins_;
};

// A view (reshape, squeeze, unsqueeze, flatten) `e` of a simplified operand.
Expr RewriteView(const Expr& e, ViewOrigins& views) {
  const CallNode* c = AsCall(e);
  const Expr& input = c->args[0];
  if (SameType(e, input)) return input;
  for (const Expr& v : views.Chain(input)) {
    if (SameType(e, v)) return v;
  }
  const CallNode* inner = AsCall(input);
  if (!inner || !inner->op || !IsView(inner->op->name)) return e;
  const Expr& x = inner->args[0];
  if (SameType(e, x)) return x;
  const TensorTypeNode* out = AsTensor(e->type);
  const TensorTypeNode* in = AsTensor(x->type);
  if (!out || !in || (c->op->name != "reshape" && inner->op->name != "reshape")) return e;
  for (const Attrs& attrs : ComposedReshapeAttrs(c, *out, *in)) {
    if (Expr r = BuildLike("reshape", {x}, attrs, e)) {
      views.Add(r, input);
      return r;
    }
  }
  return e;
}

// One rule applied to a typed call whose operands are simplified: the replacement (typed
// exactly as `e`), or `e` when no rule applies.
Expr RewriteOnce(const Expr& e, ViewOrigins& views) {
  const CallNode* c = AsCall(e);
  if (!c || !c->op || !e->type) return e;
  const std::string& op = c->op->name;
  const std::vector<Expr>& args = c->args;
  // `x` when it has e's type (so replacing e by it is exact), else e unchanged.
  auto to = [&](const Expr& x) { return x && SameType(e, x) ? x : e; };

  if (op == "add") {
    if (IsFilledWith(args[1], 0) && SameType(e, args[0])) return args[0];
    if (IsFilledWith(args[0], 0) && SameType(e, args[1])) return args[1];
    if (const CallNode* n = AsOpCall(args[1], "neg"))
      if (Expr r = BuildLike("sub", {args[0], n->args[0]}, {}, e)) return r;
    if (const CallNode* n = AsOpCall(args[0], "neg"))
      if (Expr r = BuildLike("sub", {args[1], n->args[0]}, {}, e)) return r;
    return e;
  }
  if (op == "sub") {
    if (IsFilledWith(args[1], 0) && SameType(e, args[0])) return args[0];
    if (const CallNode* n = AsOpCall(args[1], "neg"))
      if (Expr r = BuildLike("add", {args[0], n->args[0]}, {}, e)) return r;
    return e;
  }
  if (op == "mul") {
    if (IsFilledWith(args[1], 1) && SameType(e, args[0])) return args[0];
    if (IsFilledWith(args[0], 1) && SameType(e, args[1])) return args[1];
    // neg rejects unsigned and bool types, so BuildLike declines those.
    if (IsFilledWith(args[1], -1))
      if (Expr r = BuildLike("neg", {args[0]}, {}, e)) return r;
    if (IsFilledWith(args[0], -1))
      if (Expr r = BuildLike("neg", {args[1]}, {}, e)) return r;
    return e;
  }
  if (op == "div") {
    if (IsFilledWith(args[1], 1) && SameType(e, args[0])) return args[0];
    if (IsFilledWith(args[1], -1))
      if (Expr r = BuildLike("neg", {args[0]}, {}, e)) return r;
    return e;
  }
  if (op == "pow") {
    return IsFilledWith(args[1], 1) ? to(args[0]) : e;
  }
  if ((op == "and" && IsFilledWith(args[1], 1)) || (op == "or" && IsFilledWith(args[1], 0)))
    return to(args[0]);
  if ((op == "and" && IsFilledWith(args[0], 1)) || (op == "or" && IsFilledWith(args[0], 0)))
    return to(args[1]);
  if (op == "maximum" || op == "minimum" || op == "and" || op == "or") {
    return args[0] == args[1] ? to(args[0]) : e;
  }
  if (op == "where") {
    return args[1] == args[2] ? to(args[1]) : e;
  }
  if (op == "clip") {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    bool unbounded = c->attrs.GetFloat("min") == -kInf && c->attrs.GetFloat("max") == kInf;
    return unbounded ? to(args[0]) : e;
  }
  if (op == "neg") {
    if (const CallNode* n = AsOpCall(args[0], "neg")) return to(n->args[0]);
    return e;
  }
  if (IsIdempotent(op)) {
    if (AsOpCall(args[0], op.c_str())) return args[0];
    if (op == "abs") {
      if (const CallNode* n = AsOpCall(args[0], "neg"))
        if (Expr r = BuildLike("abs", {n->args[0]}, {}, e)) return r;
    }
    return e;
  }
  if (op == "cast") {
    if (SameType(e, args[0])) return args[0];
    const CallNode* inner = AsOpCall(args[0], "cast");
    const TensorTypeNode* x = inner ? AsTensor(inner->args[0]->type) : nullptr;
    if (x && IsLosslessWidening(x->dtype, inner->attrs.GetDType("dtype"))) {
      if (Expr r = BuildLike("cast", {inner->args[0]}, c->attrs, e)) return r;
    }
    return e;
  }
  if (op == "transpose") {
    const TensorTypeNode* t = AsTensor(e->type);
    if (!t) return e;
    std::vector<int64_t> outer = TransposePerm(c, t->ndim());
    if (IsIdentityPerm(outer)) return to(args[0]);
    const CallNode* inner = AsOpCall(args[0], "transpose");
    if (!inner) return e;
    std::vector<int64_t> p = TransposePerm(inner, t->ndim()), composed(outer.size());
    // Output axis i of the outer transpose is its input axis outer[i], which the inner one
    // took from axis p[outer[i]] of x.
    for (size_t i = 0; i < outer.size(); ++i) composed[i] = p[outer[i]];
    if (IsIdentityPerm(composed)) return to(inner->args[0]);
    Expr r = BuildLike("transpose", {inner->args[0]}, Attrs{{"perm", composed}}, e);
    return r ? r : e;
  }
  if (IsView(op)) return RewriteView(e, views);
  if (op == "expand") return to(args[0]);
  if (op == "slice") {
    for (int64_t step : c->attrs.GetInts("steps")) {
      if (step < 0) return e;
    }
    return to(args[0]);
  }
  if (op == "concat") {
    return args.size() == 1 ? to(args[0]) : e;
  }
  return e;
}

// Rebuilt nodes get the type of the node they replace: every rule keeps types, so a node whose
// operands were rewritten has exactly its old type, and rules further up can rely on it.
class Simplifier : public ExprMutator {
 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr e = Retyped(ExprMutator::MutateCall(n, self), self);
    for (Expr next = RewriteOnce(e, views_); next != e; next = RewriteOnce(e, views_)) e = next;
    return e;
  }
  Expr MutateTuple(const TupleNode* n, const Expr& self) override {
    return Retyped(ExprMutator::MutateTuple(n, self), self);
  }
  Expr MutateTupleGetItem(const TupleGetItemNode* n, const Expr& self) override {
    if (const TupleNode* t = AsTuple(Mutate(n->tuple))) return t->fields[n->index];
    return Retyped(ExprMutator::MutateTupleGetItem(n, self), self);
  }
  Expr MutateFunction(const FunctionNode* n, const Expr& self) override {
    return Retyped(ExprMutator::MutateFunction(n, self), self);
  }

 private:
  static Expr Retyped(const Expr& rebuilt, const Expr& original) {
    return rebuilt == original ? rebuilt : WithType(rebuilt, original->type);
  }

  ViewOrigins views_;
};

}  // namespace

void RegisterSimplifyExprPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "SimplifyExpr",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "algebraic simplification that keeps values and types: x*1, x+0, neg(neg(x)), "
             "double transposes, reshapes of reshapes, casts to the same dtype, ...",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"SimplifyExpr", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  Simplifier s;
                  Expr out = s.Mutate(f);
                  return std::static_pointer_cast<const FunctionNode>(out);
                },
                o);
          },
  });
}

}  // namespace kiln
