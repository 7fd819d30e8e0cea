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
  std::function<void()> on_enter, on_leave;  // around the recursion into a Seq's statements

 protected:
  loop::Stmt MutateSeq(const loop::SeqNode* n, const loop::Stmt& self) override {
    // Nested blocks first: the default recursion rewrites the children, one Seq deeper.
    if (on_enter) on_enter();
    loop::Stmt rebuilt = loop::Mutator::MutateSeq(n, self);
    if (on_leave) on_leave();
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

loop::PrimFunc RunBlockPass(LoopBlockPass& pass, const loop::PrimFunc& f, const PassContext& ctx) {
  // Blocks around the one being rewritten (BlockAdaptor recurses): a body that is not a Seq is
  // a block of one around everything in it.
  int depth = loop::AsSeq(f->body) ? 0 : 1;
  const std::function<std::vector<loop::Stmt>(const std::vector<loop::Stmt>&)> run =
      [&](const std::vector<loop::Stmt>& stmts) {
        return pass.RunOnBlock(stmts, LoopBlockContext{f, depth, ctx});
      };
  BlockAdaptor adaptor(run);  // keeps a reference to `run`
  adaptor.on_enter = [&depth] { ++depth; };
  adaptor.on_leave = [&depth] { --depth; };
  loop::Stmt body = adaptor.MutateStmt(f->body);
  // A body that is one statement is a block of one (a Seq body was the adaptor's last block,
  // even where what it became is one statement).
  if (body && !loop::AsSeq(f->body)) {
    std::vector<loop::Stmt> one = {body};
    std::vector<loop::Stmt> out = pass.RunOnBlock(one, LoopBlockContext{f, 0, ctx});
    if (out != one) body = loop::Seq(std::move(out));
  }
  loop::PrimFunc g = WithNewBody(f, body);
  pass.Finish(g, ctx);
  return g;
}

PassPtr CreateLoopBlockPass(PassInfo info, LoopBlockPassFactory make, Attrs options) {
  return CreateModulePass(
      std::move(info),
      [make](const IRModule& m, const PassContext& ctx) {
        return MapPrimFuncs(m, [&](const loop::PrimFunc& f) {
          std::unique_ptr<LoopBlockPass> pass = make();
          return RunBlockPass(*pass, f, ctx);
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
