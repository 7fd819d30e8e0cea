#include "passes/loop_pass.h"

#include "ir/error.h"
#include "ir/loop/loop_visitor.h"

namespace kiln {

namespace {

class ExprAdaptor : public loop::Mutator {
 public:
  explicit ExprAdaptor(const std::function<loop::Expr(const loop::Expr&)>& fn) : fn_(fn) {}
  loop::Expr MutateExpr(const loop::Expr& e) override {
    loop::Expr rebuilt = loop::Mutator::MutateExpr(e);
    return fn_(rebuilt);
  }

 private:
  const std::function<loop::Expr(const loop::Expr&)>& fn_;
};

class StmtAdaptor : public loop::Mutator {
 public:
  explicit StmtAdaptor(const std::function<loop::Stmt(const loop::Stmt&)>& fn) : fn_(fn) {}
  loop::Stmt MutateStmt(const loop::Stmt& s) override {
    loop::Stmt rebuilt = loop::Mutator::MutateStmt(s);
    return fn_(rebuilt);
  }
  // Statement passes do not look into expressions.
  loop::Expr MutateExpr(const loop::Expr& e) override { return e; }

 private:
  const std::function<loop::Stmt(const loop::Stmt&)>& fn_;
};

class BlockAdaptor : public loop::Mutator {
 public:
  explicit BlockAdaptor(
      const std::function<std::vector<loop::Stmt>(const std::vector<loop::Stmt>&)>& fn)
      : fn_(fn) {}
  loop::Expr MutateExpr(const loop::Expr& e) override { return e; }

 protected:
  loop::Stmt MutateSeq(const loop::SeqNode* n, const loop::Stmt& self) override {
    // Nested blocks first: the default recursion rewrites the children.
    loop::Stmt rebuilt = loop::Mutator::MutateSeq(n, self);
    const loop::SeqNode* seq = loop::AsSeq(rebuilt);
    std::vector<loop::Stmt> stmts = seq ? seq->stmts : std::vector<loop::Stmt>{rebuilt};
    std::vector<loop::Stmt> out = fn_(stmts);
    if (out == stmts) return rebuilt;
    return loop::Seq(std::move(out));
  }

 private:
  const std::function<std::vector<loop::Stmt>(const std::vector<loop::Stmt>&)>& fn_;
};

// Applies `per_func` to every kernel of the module.
IRModule MapPrimFuncs(const IRModule& m,
                      const std::function<loop::PrimFunc(const loop::PrimFunc&)>& per_func) {
  IRModule out = m;
  for (const auto& [name, f] : m.prim_funcs()) {
    loop::PrimFunc g = per_func(f);
    if (!g) Throw(ErrorCode::kInternal, "returned no kernel for @", name);
    if (g != f) out = out.WithPrimFunc(name, g);
  }
  return out;
}

loop::PrimFunc WithNewBody(const loop::PrimFunc& f, const loop::Stmt& body) {
  return body == f->body ? f : loop::WithBody(f, body);
}

}  // namespace

loop::Stmt RewriteExprs(const loop::Stmt& s,
                        const std::function<loop::Expr(const loop::Expr&)>& fn) {
  ExprAdaptor a(fn);
  return a.MutateStmt(s);
}

loop::Stmt RewriteStmts(const loop::Stmt& s,
                        const std::function<loop::Stmt(const loop::Stmt&)>& fn) {
  StmtAdaptor a(fn);
  return a.MutateStmt(s);
}

loop::Stmt RewriteBlocks(
    const loop::Stmt& s,
    const std::function<std::vector<loop::Stmt>(const std::vector<loop::Stmt>&)>& fn) {
  BlockAdaptor a(fn);
  return a.MutateStmt(s);
}

PassPtr CreateLoopExprPass(PassInfo info, LoopExprPassFn fn, Attrs options) {
  return CreateModulePass(
      std::move(info),
      [fn](const IRModule& m, const PassContext& ctx) {
        return MapPrimFuncs(m, [&](const loop::PrimFunc& f) {
          return WithNewBody(
              f, RewriteExprs(f->body, [&](const loop::Expr& e) { return fn(e, ctx); }));
        });
      },
      std::move(options));
}

PassPtr CreateLoopStmtPass(PassInfo info, LoopStmtPassFn fn, Attrs options) {
  return CreateModulePass(
      std::move(info),
      [fn](const IRModule& m, const PassContext& ctx) {
        return MapPrimFuncs(m, [&](const loop::PrimFunc& f) {
          return WithNewBody(
              f, RewriteStmts(f->body, [&](const loop::Stmt& s) { return fn(s, ctx); }));
        });
      },
      std::move(options));
}

PassPtr CreateLoopBlockPass(PassInfo info, LoopBlockPassFn fn, Attrs options) {
  return CreateModulePass(
      std::move(info),
      [fn](const IRModule& m, const PassContext& ctx) {
        return MapPrimFuncs(m, [&](const loop::PrimFunc& f) {
          return WithNewBody(f, RewriteBlocks(f->body, [&](const std::vector<loop::Stmt>& b) {
                               return fn(b, ctx);
                             }));
        });
      },
      std::move(options));
}

PassPtr CreateLoopFuncPass(PassInfo info, LoopFuncPassFn fn, Attrs options) {
  return CreateModulePass(
      std::move(info),
      [fn](const IRModule& m, const PassContext& ctx) {
        return MapPrimFuncs(m, [&](const loop::PrimFunc& f) { return fn(f, ctx); });
      },
      std::move(options));
}

}  // namespace kiln
