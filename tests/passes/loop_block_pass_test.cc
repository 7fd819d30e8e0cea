// The block pass adaptor (passes/loop_pass.h): the order it shows a kernel's blocks in (depth
// first, innermost first, siblings left to right, the body last and a block even when it is one
// statement), the depth and kernel each block comes with, one pass instance per kernel told
// when it is done, and that what a block pass returns replaces the block.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/loop_pass.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;

// out[k] = v: a statement that names itself in the printed IR.
Stmt Mark(const Buffer& out, int64_t k, double v) {
  return Store(out, {IntImm(k)}, FloatImm(v));
}

Stmt Serial(const std::string& var, Stmt body) {
  return For(MakeVar(var), IntImm(0), IntImm(2), ForKind::kSerial, std::move(body));
}

// Records each block it is shown: its depth and the values its marks store, as "d:v,v".
struct Recorder : LoopBlockPass {
  std::vector<std::string>* seen;
  std::vector<std::string>* finished;
  explicit Recorder(std::vector<std::string>* s, std::vector<std::string>* f)
      : seen(s), finished(f) {}

  std::vector<Stmt> RunOnBlock(const std::vector<Stmt>& stmts,
                               const LoopBlockContext& where) override {
    std::string entry = std::to_string(where.depth) + ":";
    for (const Stmt& s : stmts) {
      if (const StoreNode* st = AsStore(s))
        entry += Print(st->value) + ",";
      else
        entry += "loop,";
    }
    entry.pop_back();
    seen->push_back(entry + "@" + where.func->name);
    return stmts;
  }
  void Finish(const PrimFunc& f, const PassContext&) override { finished->push_back(f->name); }
};

TEST(LoopBlockPass, ShowsBlocksInnermostFirstWithTheirDepth) {
  Buffer out = MakeBuffer("out", DType::kFloat32, {IntImm(8)});
  // { 1; for { 2; for { 3; 4 } }; for { 5; 6 } }
  Stmt body = Seq(
      {Mark(out, 0, 1),
       Serial("i", Seq({Mark(out, 1, 2), Serial("j", Seq({Mark(out, 2, 3), Mark(out, 3, 4)}))})),
       Serial("k", Seq({Mark(out, 4, 5), Mark(out, 5, 6)}))});
  // A body that is one loop: its block of one comes last, at depth 0.
  Stmt single = Serial("i", Seq({Mark(out, 0, 7), Mark(out, 1, 8)}));
  IRModule m = IRModule()
                   .WithPrimFunc("a", MakePrimFunc({out}, {}, body, "a", 0))
                   .WithPrimFunc("b", MakePrimFunc({out}, {}, single, "b", 0));
  std::vector<std::string> seen, finished;
  PassPtr pass = CreateLoopBlockPass(PassInfo{"Record", 0, {}},
                                     [&] { return std::make_unique<Recorder>(&seen, &finished); });
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule after = (*pass)(m);
  EXPECT_EQ(seen, (std::vector<std::string>{"2:3.0f,4.0f@a", "1:2.0f,loop@a", "1:5.0f,6.0f@a",
                                            "0:1.0f,loop,loop@a", "1:7.0f,8.0f@b", "0:loop@b"}));
  EXPECT_EQ(finished, (std::vector<std::string>{"a", "b"}));
  // Nothing rewritten: the kernels are the ones given.
  EXPECT_EQ(after.prim_funcs().at("a"), m.prim_funcs().at("a"));
  EXPECT_EQ(after.prim_funcs().at("b"), m.prim_funcs().at("b"));
}

// Drops every store of 0 from each block; a kernel whose single statement goes is left empty.
struct DropZeros : LoopBlockPass {
  std::vector<Stmt> RunOnBlock(const std::vector<Stmt>& stmts, const LoopBlockContext&) override {
    std::vector<Stmt> out;
    for (const Stmt& s : stmts) {
      const StoreNode* st = AsStore(s);
      const FloatImmNode* v = st ? AsFloatImm(st->value) : nullptr;
      if (!v || v->value != 0) out.push_back(s);
    }
    return out;
  }
};

TEST(LoopBlockPass, WhatTheBlockPassReturnsReplacesTheBlock) {
  Buffer out = MakeBuffer("out", DType::kFloat32, {IntImm(4)});
  Stmt body =
      Seq({Mark(out, 0, 0), Serial("i", Seq({Mark(out, 1, 0), Mark(out, 2, 5)})), Mark(out, 3, 1)});
  PrimFunc f = MakePrimFunc({out}, {}, body, "f", 0);
  DropZeros pass;
  PassContext ctx;
  PrimFunc g = RunBlockPass(pass, f, ctx);
  const std::string text = Print(g);
  EXPECT_EQ(text.find("= 0.0f"), std::string::npos) << text;
  EXPECT_NE(text.find("out[2] = 5.0f"), std::string::npos) << text;
  EXPECT_NE(text.find("out[3] = 1.0f"), std::string::npos) << text;
  EXPECT_NE(Print(f).find("out[0] = 0.0f"), std::string::npos);  // f itself unchanged
}

}  // namespace
}  // namespace kiln::loop
