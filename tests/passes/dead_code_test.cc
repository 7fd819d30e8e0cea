// DeadCodeElimination: golden tests in text IR and the models computing the same before and
// after.
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;

IRModule RunDce(const IRModule& m) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return (*ParsePipeline("DeadCodeElimination"))(m);
}

TEST(DeadCodeElimination, NothingToDoReturnsTheSameFunction) {
  const char* text = R"(
def @main(%x: f32[4]) {
  %s = split(%x, num_outputs=2)
  (relu(%s.0), %s)
}
)";
  // A projection of a call's tuple result is not a Tuple node: nothing to project.
  ExpectPassOutput("DeadCodeElimination", text, text);
  IRModule m = InferTypes(ParseModule(text));
  EXPECT_EQ(RunDce(m).Lookup("main"), m.Lookup("main"));
}

TEST(DeadCodeElimination, DropsADeadTupleField) {
  ExpectPassOutput("DeadCodeElimination", R"(
def @main(%x: f32[4]) {
  %t = (relu(%x), tanh(exp(%x)))
  neg(%t.0)
}
)",
                   R"(
def @main(%x: f32[4]) {
  neg(relu(%x))
}
)");
}

TEST(DeadCodeElimination, CollapsesNestedProjections) {
  ExpectPassOutput("DeadCodeElimination", R"(
def @main(%x: f32[4], %y: f32[4]) {
  %t = ((relu(%x), %y), tanh(%x))
  add(%t.0.1, %t.0.0)
}
)",
                   R"(
def @main(%x: f32[4], %y: f32[4]) {
  add(%y, relu(%x))
}
)");
}

TEST(DeadCodeElimination, ConstantTuplesProjectToTheirField) {
  ExpectPassOutput("DeadCodeElimination", R"(
def @main(%x: f32[2]) {
  add(%x, (const(f32[2], [1, 2]), const(f32[3], [3, 4, 5])).0)
}
)",
                   R"(
def @main(%x: f32[2]) {
  add(%x, const(f32[2], [1, 2]))
}
)");
}

TEST(DeadCodeElimination, ATupleUsedWholeStays) {
  ExpectPassOutput("DeadCodeElimination", R"(
def @main(%x: f32[4]) {
  %t = (relu(%x), tanh(%x))
  (%t.0, %t)
}
)",
                   R"(
def @main(%x: f32[4]) {
  %0 = relu(%x)
  %t = (%0, tanh(%x))
  (%0, %t)
}
)");
}

TEST(DeadCodeElimination, RewritesNestedFunctionsAndKeepsEveryFunction) {
  // @other is called by nothing, but nothing can call a function by name: it is an entry point
  // of its own and stays.
  ExpectPassOutput("DeadCodeElimination", R"(
def @main(%x: f32[4]) {
  %f = fn(%p: f32[4]) {
    (exp(%p), neg(%p)).1
  }
  %f(%x)
}
def @other(%y: f32[2]) {
  (%y, relu(%y)).0
}
)",
                   R"(
def @main(%x: f32[4]) {
  %f = fn(%p: f32[4]) {
    neg(%p)
  }
  %f(%x)
}
def @other(%y: f32[2]) {
  %y
}
)");
}

TEST(DeadCodeElimination, ModelsComputeTheSame) {
  for (const Function& model : {test::SharedAndDeadModel(), test::MlpModel()}) {
    Function after = RunDce(IRModule({{"main", model}})).Lookup("main");
    int64_t features = AsTensor(model->params[0]->type)->shape[1].value();
    Tensor x = test::RandomTensor(DType::kFloat32, {3, features}, 11);
    std::vector<Tensor> want = Interpret(model, {x});
    std::vector<Tensor> got = Interpret(after, {x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::TensorsNear(got[i], want[i]));
  }
  // The dead branch of SharedAndDeadModel (tanh of a matmul with the `unused` weight) is gone;
  // the MLP has no tuple and comes back as it was.
  Function shared = test::SharedAndDeadModel();
  Function after = RunDce(IRModule({{"main", shared}})).Lookup("main");
  auto has = [](const Function& f, const std::string& op, const std::string& name) {
    for (const Expr& e : PostOrder(f->body)) {
      if (!op.empty() && AsCall(e) && AsCall(e)->op && AsCall(e)->op->name == op) return true;
      if (!name.empty() && e->name == name) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(shared, "tanh", "") && has(shared, "", "unused"));
  EXPECT_FALSE(has(after, "tanh", ""));
  EXPECT_FALSE(has(after, "", "unused"));
  IRModule mlp = InferTypes(IRModule({{"main", test::MlpModel()}}));
  EXPECT_EQ(RunDce(mlp).Lookup("main"), mlp.Lookup("main"));
}

}  // namespace
}  // namespace kiln
