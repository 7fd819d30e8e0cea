#include "ir/expr.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "ir/visitor.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using ::testing::HasSubstr;

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}

TEST(Expr, MakeCallValidatesArgumentsAndAttributes) {
  Var x = MakeVar("x", F32({2}));
  EXPECT_THAT(ErrorMessage([&] {
                MakeCall("relu", {x, x}, {}, "act");
              }),
              HasSubstr("relu 'act': expects 1 inputs, got 2"));
  EXPECT_THAT(ErrorMessage([&] { MakeCall("no_such_op", {x}); }),
              HasSubstr("unknown op 'no_such_op'"));
  EXPECT_THAT(ErrorMessage([&] {
                MakeCall("sum", {x}, {{"axis", int64_t{0}}}, "s");
              }),
              HasSubstr("node 's': op 'sum' has no attribute 'axis'"));
  EXPECT_THAT(ErrorMessage([&] {
                MakeCall("sum", {x}, {{"keepdims", std::string("yes")}});
              }),
              HasSubstr("attribute 'keepdims' must be bool, got string"));
  Expr c = MakeCall("sum", {x}, {{"axes", std::vector<int64_t>{0}}});
  EXPECT_TRUE(AsCall(c)->attrs.Has("keepdims"));  // defaults are filled in
}

TEST(Expr, PostOrderVisitsOperandsFirstAndSharedNodesOnce) {
  Var x = MakeVar("x", F32({2}));
  Expr e = MakeCall("exp", {x});
  Expr sum = MakeCall("add", {e, e});
  std::vector<Expr> order = PostOrder(sum);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], x);
  EXPECT_EQ(order[1], e);
  EXPECT_EQ(order[2], sum);
}

class CountCalls : public ExprVisitor {
 public:
  int calls = 0;

 protected:
  void VisitCall(const CallNode* n, const Expr& self) override {
    ++calls;
    ExprVisitor::VisitCall(n, self);
  }
};

class ExpToLog : public ExprMutator {
 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr rebuilt = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(rebuilt);
    if (c->op && c->op->name == "exp") return MakeCall("log", c->args);
    return rebuilt;
  }
};

TEST(Expr, VisitorsRecurseByDefaultAndMutatorsShareUnchangedNodes) {
  Var x = MakeVar("x", F32({2}));
  Expr r = MakeCall("relu", {x});
  Expr body = MakeTuple({MakeCall("add", {r, MakeCall("exp", {r})}), r});
  CountCalls counter;
  counter.Visit(body);
  EXPECT_EQ(counter.calls, 3);  // relu once though used three times

  ExpToLog m;
  Expr out = m.Mutate(body);
  EXPECT_NE(out, body);
  const TupleNode* t = AsTuple(out);
  EXPECT_EQ(t->fields[1], r);  // unchanged subgraph is shared, not copied
  EXPECT_EQ(AsCall(AsCall(t->fields[0])->args[1])->op->name, "log");

  class Nothing : public ExprMutator {};
  Nothing n;
  EXPECT_EQ(n.Mutate(body), body);  // nothing changed: the very same node comes back
}

TEST(Expr, VeryDeepChainsBuildWalkAndFreeWithoutRecursion) {
  Var x = MakeVar("x", F32({2}));
  Expr e = x;
  for (int i = 0; i < 300000; ++i) e = MakeCall("neg", {e});
  EXPECT_EQ(PostOrder(e).size(), 300001u);
  e.reset();  // must not overflow the stack
  SUCCEED();
}

TEST(Expr, ModulesAreValues) {
  Var x = MakeVar("x", F32({2}));
  Function f = MakeFunction({x}, x);
  IRModule a({{"main", f}});
  IRModule b = a.With("other", f);
  EXPECT_FALSE(a.Contains("other"));
  EXPECT_TRUE(b.Contains("other"));
  EXPECT_FALSE(b.Without("other").Contains("other"));
  EXPECT_THAT(ErrorMessage([&] { a.Lookup("nope"); }), HasSubstr("no function '@nope'"));
}

}  // namespace
}  // namespace kiln
