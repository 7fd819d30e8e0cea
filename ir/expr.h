// The graph IR: a dataflow graph of immutable, shared nodes.
//
// A node's `type` is its type annotation (for a Var) or its inferred type (everything else;
// null until InferTypes fills it). Nodes are never modified after construction; a rewrite
// builds new nodes and shares the unchanged ones. Vars are compared by identity: two Vars with
// the same name are different variables. Nodes may be read from many threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/loop/loop.h"
#include "ir/op.h"
#include "ir/tensor.h"
#include "ir/type.h"

namespace kiln {

enum class ExprKind {
#define KILN_EXPR_NODE(N) k##N,
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
};

struct ExprNode;
// Releases the operands of a node that is being destroyed without recursing on the C++ stack:
// a chain of 100k nodes would otherwise overflow it when its last owner lets go.
void ReleaseOperands(std::vector<std::shared_ptr<const ExprNode>>& operands);

struct ExprNode {
  ExprNode(ExprKind k) : kind(k) {}  // NOLINT
  virtual ~ExprNode() = default;
  const ExprKind kind;
  Type type;         // see the file comment
  std::string name;  // the source name (an ONNX node name, a binding name in text IR) or ""
};
using Expr = std::shared_ptr<const ExprNode>;

struct VarNode : ExprNode {
  VarNode() : ExprNode(ExprKind::kVar) {}
};
using Var = std::shared_ptr<const VarNode>;

struct ConstantNode : ExprNode {
  ConstantNode() : ExprNode(ExprKind::kConstant) {}
  Tensor value;
};

struct FunctionNode;

// A call of an operator (`op` set) or of a function value (`fn` set): exactly one is set.
// `fn` may be a GlobalVar (a module function), a Constructor (building an ADT value), or any
// function-typed expression. `type_args` instantiate a polymorphic global's type parameters
// explicitly, in order (`@plus<(10, 10)>(%a, %b)`); those left out are inferred.
struct CallNode : ExprNode {
  CallNode() : ExprNode(ExprKind::kCall) {}
  CallNode(const CallNode&) = default;
  ~CallNode() override {
    if (fn) args.push_back(std::move(fn));
    ReleaseOperands(args);
  }
  const OpDef* op = nullptr;
  Expr fn;
  std::vector<Expr> args;
  Attrs attrs;  // normalized against the op's schema; empty for function calls
  std::vector<TypeArg> type_args;
};

struct TupleNode : ExprNode {
  TupleNode() : ExprNode(ExprKind::kTuple) {}
  TupleNode(const TupleNode&) = default;
  ~TupleNode() override { ReleaseOperands(fields); }
  std::vector<Expr> fields;
};

struct TupleGetItemNode : ExprNode {
  TupleGetItemNode() : ExprNode(ExprKind::kTupleGetItem) {}
  TupleGetItemNode(const TupleGetItemNode&) = default;
  ~TupleGetItemNode() override {
    std::vector<std::shared_ptr<const ExprNode>> ops{std::move(tuple)};
    ReleaseOperands(ops);
  }
  Expr tuple;
  int index = 0;
};

// Function attributes with meaning to kiln: "primitive" (a fused kernel, bool) and
// "skip_optimization" (bool).
struct FunctionNode : ExprNode {
  FunctionNode() : ExprNode(ExprKind::kFunction) {}
  FunctionNode(const FunctionNode&) = default;
  ~FunctionNode() override {
    std::vector<std::shared_ptr<const ExprNode>> ops{std::move(body)};
    ReleaseOperands(ops);
  }
  std::vector<Var> params;
  Expr body;
  Type ret_type;  // annotation; may be null
  Attrs attrs;
  // A polymorphic function's type parameters (TypeVars, which the annotations may use) and the
  // relations every call must satisfy; both empty for a monomorphic function.
  std::vector<Type> type_params;
  std::vector<TypeConstraint> type_constraints;
};
using Function = std::shared_ptr<const FunctionNode>;

// A reference to the module function `name` (the node's `name`, without the '@'). Calls of it
// are resolved against the module at inference (ir/type_infer.h); it may call itself.
struct GlobalVarNode : ExprNode {
  GlobalVarNode() : ExprNode(ExprKind::kGlobalVar) {}
};

// Constructor `tag` of `adt`; called, it builds a value of the ADT. `name` is the constructor's.
struct ConstructorNode : ExprNode {
  ConstructorNode() : ExprNode(ExprKind::kConstructor) {}
  Adt adt;
  int tag = 0;
};

// What a match clause tests its data against: `_`, a variable that binds the value, a
// constructor with patterns for its fields, or a tuple of patterns.
enum class PatternKind { kWildcard, kVar, kConstructor, kTuple };
struct PatternNode;
using Pattern = std::shared_ptr<const PatternNode>;
struct PatternNode {
  PatternKind kind = PatternKind::kWildcard;
  Var var;                      // kVar
  Adt adt;                      // kConstructor
  int tag = 0;                  // kConstructor
  std::vector<Pattern> fields;  // kConstructor, kTuple
};
Pattern WildcardPattern();
Pattern VarPattern(Var v);
Pattern ConstructorPattern(Adt adt, int tag, std::vector<Pattern> fields);
Pattern TuplePattern(std::vector<Pattern> fields);
// The variables `p` binds, left to right.
void PatternVars(const Pattern& p, std::vector<Var>* out);

// `match (data) { pattern => body, ... }`: the body of the first clause whose pattern matches
// is the value, with the pattern's variables bound. Clause bodies are scopes of their own, like
// function bodies: PostOrder does not enter them, and only the chosen one is evaluated. No
// clause matching at run time is an error naming the match.
struct MatchClause {
  Pattern pattern;
  Expr body;
};
struct MatchNode : ExprNode {
  MatchNode() : ExprNode(ExprKind::kMatch) {}
  MatchNode(const MatchNode&) = default;
  ~MatchNode() override {
    std::vector<std::shared_ptr<const ExprNode>> ops{std::move(data)};
    for (MatchClause& c : clauses) ops.push_back(std::move(c.body));
    ReleaseOperands(ops);
  }
  Expr data;
  std::vector<MatchClause> clauses;
};

// Checked downcasts: nullptr when `e` is of another kind.
#define KILN_EXPR_NODE(N)                                                                   \
  inline const N##Node* As##N(const Expr& e) {                                              \
    return e && e->kind == ExprKind::k##N ? static_cast<const N##Node*>(e.get()) : nullptr; \
  }
#include "ir/expr_nodes.def"
#undef KILN_EXPR_NODE
const char* ExprKindName(ExprKind k);
// The call of operator `op` that `e` is, or nullptr.
inline const CallNode* AsOpCall(const Expr& e, const char* op) {
  const CallNode* c = AsCall(e);
  return c && c->op && c->op->name == op ? c : nullptr;
}
// The value of the constant `e`, or nullptr where `e` is not a constant.
inline const Tensor* ConstantValue(const Expr& e) {
  const ConstantNode* c = AsConstant(e);
  return c ? &c->value : nullptr;
}

// Constructors. MakeCall looks the op up, checks the argument count and normalizes the
// attributes (errors name the op and the node).
Var MakeVar(const std::string& name, Type type = nullptr);
Expr MakeConstant(Tensor value, const std::string& name = "");
Expr MakeCall(const std::string& op, std::vector<Expr> args, const Attrs& attrs = {},
              const std::string& name = "");
Expr MakeCall(const OpDef* op, std::vector<Expr> args, const Attrs& attrs = {},
              const std::string& name = "");
Expr MakeFnCall(Expr fn, std::vector<Expr> args, const std::string& name = "");
Expr MakeTuple(std::vector<Expr> fields);
Expr MakeTupleGetItem(Expr tuple, int index);
Function MakeFunction(std::vector<Var> params, Expr body, Type ret_type = nullptr,
                      Attrs attrs = {});
// A polymorphic function: `type_params` are TypeVars its annotations may use.
Function MakePolyFunction(std::vector<Type> type_params, std::vector<Var> params, Expr body,
                          Type ret_type = nullptr, std::vector<TypeConstraint> constraints = {});
Expr MakeGlobalVar(const std::string& name);
// Throws kNotFound naming the constructor when `adt` has none of that name.
Expr MakeConstructor(const Adt& adt, const std::string& constructor);
Expr MakeMatch(Expr data, std::vector<MatchClause> clauses);

// A copy of `e` with its type set (for Vars: a new variable, so use it only while rebuilding
// every use as well).
Expr WithType(const Expr& e, Type type);

// A named collection of graph functions (`main` is the entry point by convention) and of
// loop-IR kernels (PrimFuncs, made by lowering): one module for both IR levels, so one pass
// infrastructure serves both.
class IRModule {
 public:
  IRModule() = default;
  explicit IRModule(std::map<std::string, Function> fns) : functions_(std::move(fns)) {}
  const std::map<std::string, loop::PrimFunc>& prim_funcs() const { return prim_funcs_; }
  // Returns a module with the kernel `name` added or replaced.
  IRModule WithPrimFunc(const std::string& name, loop::PrimFunc f) const;
  // The module's own ADTs by name; the built-in List is not among them but Find knows it.
  const std::map<std::string, Adt>& adts() const { return adts_; }
  IRModule WithAdt(Adt adt) const;
  Adt FindAdt(const std::string& name) const;  // nullptr when unknown
  const std::map<std::string, Function>& functions() const { return functions_; }
  Function Lookup(const std::string& name) const;  // kNotFound naming the function
  bool Contains(const std::string& name) const { return functions_.count(name) != 0; }
  // Returns a module with `name` added or replaced; this module is unchanged.
  IRModule With(const std::string& name, Function fn) const;
  IRModule Without(const std::string& name) const;

 private:
  std::map<std::string, Function> functions_;
  std::map<std::string, loop::PrimFunc> prim_funcs_;
  std::map<std::string, Adt> adts_;
};

// The nodes reachable from `root`, each once, operands before users, without recursing on the
// C++ stack (graphs from files can be deep). Does not enter nested function bodies or match
// clause bodies.
std::vector<Expr> PostOrder(const Expr& root);

}  // namespace kiln
