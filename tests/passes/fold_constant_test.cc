// FoldConstant: golden tests in text IR, the size cap, kernels that fail, and the models
// computing the same before and after.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;
using ::testing::HasSubstr;

// Runs FoldConstant on `m` under a context with `max_elements` set (the golden helper cannot
// set config keys).
IRModule FoldWithLimit(const IRModule& m, int64_t max_elements,
                       std::vector<Diagnostic>* diagnostics = nullptr) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  ctx->SetConfig("fold_constant.max_elements", max_elements);
  PassContextScope scope(ctx);
  IRModule out = (*ParsePipeline("FoldConstant"))(m);
  if (diagnostics) *diagnostics = ctx->diagnostics();
  return out;
}

IRModule FoldWithLimit(const std::string& input, int64_t max_elements,
                       std::vector<Diagnostic>* diagnostics = nullptr) {
  return FoldWithLimit(InferTypes(ParseModule(input)), max_elements, diagnostics);
}

std::string Printed(const std::string& text) {
  return Print(InferTypes(ParseModule(text)));
}

TEST(FoldConstant, NothingToFoldReturnsTheSameFunction) {
  const char* text = R"(
def @main(%x: f32[2], %w: f32[2]) {
  relu(add(%x, %w))
}
)";
  ExpectPassOutput("FoldConstant", text, text);
  IRModule m = InferTypes(ParseModule(text));
  EXPECT_EQ(FoldWithLimit(m, 1 << 20).Lookup("main"), m.Lookup("main"));
}

TEST(FoldConstant, FoldsAChainAndKeepsTheSourceName) {
  // %b is used twice, so the printer binds the folded constant and shows its name.
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[2]) {
  %a = mul(const(f32[2], [1, 2]), const(f32[], 2))
  %b = add(%a, const(f32[], 1))
  %c = neg(%b)
  mul(add(%x, %c), %c)
}
)",
                   R"(
def @main(%x: f32[2]) {
  %c = const(f32[2], [-3, -5])
  mul(add(%x, %c), %c)
}
)");
}

TEST(FoldConstant, StopsAtASymbolicShape) {
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[batch, 2]) {
  %c = exp(const(f32[2], [0, 0]))
  %y = add(%x, %c)
  mul(%y, neg(const(f32[], 2)))
}
)",
                   R"(
def @main(%x: f32[batch, 2]) {
  %y = add(%x, const(f32[2], [1, 1]))
  mul(%y, const(f32[], -2))
}
)");
}

TEST(FoldConstant, ZeroInputOpsAndOtherDTypesFold) {
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[3]) {
  add(%x, cast(range(start=0, limit=3, delta=1, dtype=i32), dtype=f32))
}
)",
                   R"(
def @main(%x: f32[3]) {
  add(%x, const(f32[3], [0, 1, 2]))
}
)");
}

TEST(FoldConstant, MultiOutputOpsBecomeTuplesOfConstants) {
  // A projection of the folded split folds to its field.
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[2]) {
  %s = split(const(f32[4], [1, 2, 3, 4]), num_outputs=2)
  add(%x, %s.1)
}
)",
                   R"(
def @main(%x: f32[2]) {
  add(%x, const(f32[2], [3, 4]))
}
)");
  // Used whole, the tuple of constants stays (and keeps its name).
  ExpectPassOutput("FoldConstant", R"(
def @main() {
  %s = split(const(f32[3], [1, 2, 3]), split=[1, 2])
  %s
}
)",
                   R"(
def @main() {
  %s = (const(f32[1], [1]), const(f32[2], [2, 3]))
  %s
}
)");
}

TEST(FoldConstant, ProjectionOfAConstantTupleFieldFolds) {
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[2]) {
  %t = (neg(const(f32[2], [1, 2])), %x)
  (add(%t.0, %x), %t.1)
}
)",
                   R"(
def @main(%x: f32[2]) {
  %0 = const(f32[2], [-1, -2])
  %t = (%0, %x)
  (add(%0, %x), %t.1)
}
)");
}

TEST(FoldConstant, FoldsInsideNestedFunctions) {
  ExpectPassOutput("FoldConstant", R"(
def @main(%x: f32[2]) {
  %f = fn(%p: f32[2]) {
    add(%p, neg(const(f32[2], [1, 2])))
  }
  %f(%x)
}
)",
                   R"(
def @main(%x: f32[2]) {
  %f = fn(%p: f32[2]) {
    add(%p, const(f32[2], [-1, -2]))
  }
  %f(%x)
}
)");
}

TEST(FoldConstant, SizeCapLeavesLargeResultsUnfolded) {
  const char* text = R"(
def @main(%x: f32[4, 4]) {
  %big = expand(const(f32[], 1), shape=[4, 4])
  %small = neg(const(f32[4], [1, 2, 3, 4]))
  add(add(%x, %big), %small)
}
)";
  const char* capped = R"(
def @main(%x: f32[4, 4]) {
  %big = expand(const(f32[], 1), shape=[4, 4])
  add(add(%x, %big), const(f32[4], [-1, -2, -3, -4]))
}
)";
  EXPECT_EQ(Print(FoldWithLimit(text, 15)), Printed(capped));
  // The cap is inclusive: 16 elements fold at a limit of 16.
  EXPECT_EQ(Print(FoldWithLimit(text, 16)), Printed(R"(
def @main(%x: f32[4, 4]) {
  add(add(%x, const(f32[4, 4], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])),
      const(f32[4], [-1, -2, -3, -4]))
}
)"));
  // Limit 0 folds only empty results.
  EXPECT_EQ(Print(FoldWithLimit(text, 0)), Printed(text));
  // A broadcast to a shape whose element count overflows int64 is not attempted.
  const char* huge = R"(
def @main() {
  expand(const(f32[], 1), shape=[4294967296, 4294967296, 4])
}
)";
  EXPECT_EQ(Print(FoldWithLimit(huge, int64_t{1} << 62)), Printed(huge));
}

TEST(FoldConstant, DefaultCapIsAMillionElements) {
  PassContext ctx;
  EXPECT_EQ(ctx.GetConfigInt("fold_constant.max_elements"), 1 << 20);
  const char* text = R"(
def @main() {
  sum(expand(const(f32[], 1), shape=[1025, 1024]))
}
)";
  // 1025 * 1024 elements exceed the default: the expand stays, so the sum does too.
  EXPECT_EQ(test::RunPasses("FoldConstant", text), Printed(text));
}

TEST(FoldConstant, AFailingKernelIsLeftToFailAtRunTime) {
  const char* text = R"(
def @main(%x: f32[1]) {
  %g = gather(const(f32[3], [1, 2, 3]), const(i64[1], [5]))
  add(%x, %g)
}
)";
  std::vector<Diagnostic> diags;
  IRModule out = FoldWithLimit(text, 1 << 20, &diags);
  EXPECT_EQ(Print(out), Printed(text));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].level, Diagnostic::Level::kWarning);
  EXPECT_EQ(diags[0].pass, "FoldConstant");
  EXPECT_THAT(diags[0].message, HasSubstr("gather 'g' left unfolded"));
  EXPECT_THAT(diags[0].message, HasSubstr("index 5 is out of range"));
  EXPECT_THAT(test::ErrorMessage(
                  [&] { Interpret(out.Lookup("main"), {Tensor::FromVector<float>({1}, {0})}); }),
              HasSubstr("index 5 is out of range"));
}

int CountOpCalls(const Function& f) {
  int n = 0;
  for (const Expr& e : PostOrder(f->body))
    if (AsCall(e) && AsCall(e)->op) ++n;
  return n;
}

// Random inputs give the same outputs before and after the pass.
void ExpectSameResults(const Function& before, const Function& after,
                       const std::vector<int64_t>& input_shape) {
  Tensor x = test::RandomTensor(DType::kFloat32, input_shape, 7);
  std::vector<Tensor> want = Interpret(before, {x});
  std::vector<Tensor> got = Interpret(after, {x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::TensorsNear(got[i], want[i]));
}

IRModule RunFold(const Function& model) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return (*ParsePipeline("FoldConstant"))(IRModule({{"main", model}}));
}

TEST(FoldConstant, ModelsComputeTheSame) {
  Function shared = test::SharedAndDeadModel();
  Function folded = RunFold(shared).Lookup("main");
  // c * 2 + 1 became one constant: two calls fewer.
  EXPECT_EQ(CountOpCalls(folded), CountOpCalls(shared) - 2);
  ExpectSameResults(shared, folded, {3, 6});

  Function mlp = test::MlpModel();
  Function mlp_folded = RunFold(mlp).Lookup("main");
  EXPECT_EQ(CountOpCalls(mlp_folded), CountOpCalls(mlp));  // nothing constant to fold
  ExpectSameResults(mlp, mlp_folded, {5, 8});
}

}  // namespace
}  // namespace kiln
