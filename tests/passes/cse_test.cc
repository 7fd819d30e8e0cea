// CommonSubexprElimination: golden tests in text IR, the constant size cap, function scopes,
// and the models computing the same before and after.
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;

IRModule RunCse(const IRModule& m) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return (*ParsePipeline("CommonSubexprElimination"))(m);
}

TEST(CommonSubexprElimination, NothingToMergeReturnsTheSameFunction) {
  const char* text = R"(
def @main(%x: f32[4], %y: f32[4]) {
  %a = exp(%x)
  add(%a, exp(%y))
}
)";
  ExpectPassOutput("CommonSubexprElimination", text, text);
  IRModule m = InferTypes(ParseModule(text));
  EXPECT_EQ(RunCse(m).Lookup("main"), m.Lookup("main"));
}

TEST(CommonSubexprElimination, MergesIdenticalCalls) {
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[4]) {
  %a = exp(%x)
  %b = exp(%x)
  add(%a, %b)
}
)",
                   R"(
def @main(%x: f32[4]) {
  %a = exp(%x)
  add(%a, %a)
}
)");
}

TEST(CommonSubexprElimination, MergesWholeBranchesBottomUp) {
  // Once the two exp nodes are one, the two relus over them are identical too, and so on up.
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[4], %w: f32[4, 4]) {
  %l1 = relu(matmul(exp(%x), %w))
  %l2 = relu(matmul(exp(%x), %w))
  %r = sum(%l2, axes=[0], keepdims=false)
  (add(%l1, %l2), %r)
}
)",
                   R"(
def @main(%x: f32[4], %w: f32[4, 4]) {
  %l1 = relu(matmul(exp(%x), %w))
  %r = sum(%l1, axes=[0], keepdims=false)
  (add(%l1, %l1), %r)
}
)");
}

TEST(CommonSubexprElimination, CallsThatDifferOnlyInAttributesStayApart) {
  // keepdims=true is the default, so the first two sums are the same call; the others differ
  // from them in one attribute each.
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[4, 4]) {
  %s0 = sum(%x, axes=[1])
  %s1 = sum(%x, axes=[1], keepdims=true)
  %s2 = sum(%x, axes=[0])
  %s3 = sum(%x, axes=[1], keepdims=false)
  %m0 = softmax(%x, axis=0)
  %m1 = softmax(%x, axis=1)
  (%s0, %s1, %s2, %s3, %m0, %m1)
}
)",
                   R"(
def @main(%x: f32[4, 4]) {
  %s0 = sum(%x, axes=[1])
  %s2 = sum(%x, axes=[0])
  %s3 = sum(%x, axes=[1], keepdims=false)
  %m0 = softmax(%x, axis=0)
  %m1 = softmax(%x, axis=1)
  (%s0, %s0, %s2, %s3, %m0, %m1)
}
)");
}

TEST(CommonSubexprElimination, ArgumentOrderMatters) {
  const char* text = R"(
def @main(%x: f32[4], %y: f32[4]) {
  %a = add(%x, %y)
  %b = add(%y, %x)
  (%a, %b)
}
)";
  ExpectPassOutput("CommonSubexprElimination", text, text);
}

TEST(CommonSubexprElimination, MergesEqualConstantsOnly) {
  // Same dtype, shape and bytes merge; another shape, another dtype or -0.0 against 0.0 do not.
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[2]) {
  %a = add(%x, const(f32[2], [1, 0]))
  %b = add(%x, const(f32[2], [1, 0]))
  %c = add(%x, const(f32[2], [1, -0.0]))
  %d = add(%x, const(f32[1, 2], [1, 0]))
  %e = cast(const(i32[2], [1, 0]), dtype=f32)
  (%a, %b, %c, %d, %e)
}
)",
                   R"(
def @main(%x: f32[2]) {
  %a = add(%x, const(f32[2], [1, 0]))
  %c = add(%x, const(f32[2], [1, -0.0]))
  %d = add(%x, const(f32[1, 2], [1, 0]))
  %e = cast(const(i32[2], [1, 0]), dtype=f32)
  (%a, %a, %c, %d, %e)
}
)");
}

TEST(CommonSubexprElimination, LargeConstantsAreNotCompared) {
  auto run = [](int64_t n) {
    Var x = MakeVar("x", TensorType({n}, DType::kFloat32));
    Expr c1 = MakeConstant(Tensor::Empty(DType::kFloat32, {n}));
    Expr c2 = MakeConstant(Tensor::Empty(DType::kFloat32, {n}));
    IRModule m({{"main", MakeFunction({x}, MakeTuple({MakeCall("add", {x, c1}),
                                                      MakeCall("add", {x, c2})}))}});
    IRModule out = RunCse(InferTypes(m));
    const TupleNode* t = AsTuple(out.Lookup("main")->body);
    return t->fields[0] == t->fields[1];
  };
  EXPECT_TRUE(run(4096));
  EXPECT_FALSE(run(4097));
}

TEST(CommonSubexprElimination, MergesTuplesProjectionsAndFunctionCalls) {
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[4], %y: f32[4]) {
  %f = fn(%p: f32[4]) {
    relu(%p)
  }
  %t1 = (%x, %y)
  %t2 = (%x, %y)
  %u = %t1.0
  %v = %t2.0
  %w = %t1.1
  (%f(%u), %f(%v), %w, %t2)
}
)",
                   R"(
def @main(%x: f32[4], %y: f32[4]) {
  %f = fn(%p: f32[4]) {
    relu(%p)
  }
  %t1 = (%x, %y)
  %u = %t1.0
  %0 = %f(%u)
  %w = %t1.1
  (%0, %0, %w, %t1)
}
)");
}

TEST(CommonSubexprElimination, FunctionBodiesAreSeparateScopes) {
  // Inside @f the two exp(%p) merge, and so do the two constants; neither merges with the
  // equal constant of the enclosing function. The outer exp(%x) pair merges too.
  ExpectPassOutput("CommonSubexprElimination", R"(
def @main(%x: f32[2]) {
  %f = fn(%p: f32[2]) {
    %a = add(exp(%p), const(f32[2], [1, 2]))
    %b = add(exp(%p), const(f32[2], [1, 2]))
    mul(%a, %b)
  }
  add(%f(exp(%x)), add(exp(%x), const(f32[2], [1, 2])))
}
)",
                   R"(
def @main(%x: f32[2]) {
  %f = fn(%p: f32[2]) {
    %a = add(exp(%p), const(f32[2], [1, 2]))
    mul(%a, %a)
  }
  %0 = exp(%x)
  add(%f(%0), add(%0, const(f32[2], [1, 2])))
}
)");
}

TEST(CommonSubexprElimination, NodesOfTheEnclosingFunctionStayItsOwn) {
  // The body of @g reads %e of @main. Its own exp(%x) is equal to %e but belongs to @g, so it
  // is not replaced by @main's node; the two exp(%x) inside @g merge with each other.
  Var x = MakeVar("x", TensorType({2}, DType::kFloat32));
  Var p = MakeVar("p", TensorType({2}, DType::kFloat32));
  Expr e = MakeCall("exp", {x}, {}, "e");
  Expr inner1 = MakeCall("exp", {x});
  Expr inner2 = MakeCall("exp", {x});
  Function g = MakeFunction(
      {p}, MakeCall("add", {MakeCall("add", {e, p}), MakeCall("mul", {inner1, inner2})}));
  Expr outer_dup = MakeCall("exp", {x});
  IRModule m({{"main", MakeFunction({x}, MakeTuple({MakeFnCall(g, {e}), outer_dup}))}});
  Function out = RunCse(InferTypes(m)).Lookup("main");
  const TupleNode* t = AsTuple(out->body);
  const CallNode* call = AsCall(t->fields[0]);
  EXPECT_EQ(t->fields[1], call->args[0]);  // the outer duplicate merged with %e
  const FunctionNode* g2 = AsFunction(call->fn);
  const CallNode* body = AsCall(g2->body);
  EXPECT_EQ(AsCall(body->args[0])->args[0], call->args[0]);  // @g still reads @main's %e
  const CallNode* mul = AsCall(body->args[1]);
  EXPECT_EQ(mul->args[0], mul->args[1]);   // merged inside @g
  EXPECT_NE(mul->args[0], call->args[0]);  // but not with @main's node
  EXPECT_EQ(AsCall(mul->args[0])->op->name, "exp");
}

int CountOpCalls(const Function& f) {
  int n = 0;
  for (const Expr& e : PostOrder(f->body))
    if (AsCall(e) && AsCall(e)->op) ++n;
  return n;
}

TEST(CommonSubexprElimination, ModelsComputeTheSame) {
  for (const Function& model : {test::SharedAndDeadModel(), test::MlpModel()}) {
    Function after = RunCse(IRModule({{"main", model}})).Lookup("main");
    int64_t features = AsTensor(model->params[0]->type)->shape[1].value();
    Tensor x = test::RandomTensor(DType::kFloat32, {3, features}, 13);
    std::vector<Tensor> want = Interpret(model, {x});
    std::vector<Tensor> got = Interpret(after, {x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::TensorsNear(got[i], want[i]));
  }
  // SharedAndDeadModel: the second exp, add(a, b) and matmul are merged into the first ones.
  Function shared = test::SharedAndDeadModel();
  EXPECT_EQ(CountOpCalls(RunCse(IRModule({{"main", shared}})).Lookup("main")),
            CountOpCalls(shared) - 3);
  IRModule mlp = InferTypes(IRModule({{"main", test::MlpModel()}}));
  EXPECT_EQ(RunCse(mlp).Lookup("main"), mlp.Lookup("main"));
}

}  // namespace
}  // namespace kiln
