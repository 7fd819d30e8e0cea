// SimplifyInference: golden tests for batch_norm's rewrites (constant statistics, statistics
// that are inputs, folding into matmul and gemm weights, and the cases that must not fold),
// and a check through the reference interpreter that the rewritten graphs compute the same
// values.
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;

void ExpectRewritten(const std::string& input, const std::string& expected) {
  ExpectPassOutput("SimplifyInference", input, expected);
}

// epsilon = 0 and these statistics give s = scale / sqrt(var) = [1, 6] and
// t = bias - mean * s = [-0.5, -13], exactly.
const char* const kStats =
    "const(f32[2], [2, 3]), const(f32[2], [0.5, -1]), const(f32[2], [1, 2]), "
    "const(f32[2], [4, 0.25]), epsilon=0.0";

std::string WithStats(const std::string& text) {
  std::string out = text;
  for (size_t at; (at = out.find("STATS")) != std::string::npos;) out.replace(at, 5, kStats);
  return out;
}

// ---- constant statistics ----

TEST(SimplifyInference, RankTwoBecomesScaleAndShiftOverDimOne) {
  ExpectRewritten(WithStats(R"(def @main(%x: f32[batch, 2]) {
    %bn = batch_norm(%x, STATS)
    %bn
  })"),
                  R"(def @main(%x: f32[batch, 2]) {
    %bn = add(mul(%x, const(f32[2], [1, 6])), const(f32[2], [-0.5, -13]))
    %bn
  })");
}

TEST(SimplifyInference, HigherRanksBroadcastFromChannelShape) {
  ExpectRewritten(WithStats(R"(def @main(%x: f32[batch, 2, 5, 5], %y: f32[1, 2, 7]) {
    (batch_norm(%x, STATS), batch_norm(%y, STATS))
  })"),
                  R"(def @main(%x: f32[batch, 2, 5, 5], %y: f32[1, 2, 7]) {
    (add(mul(%x, const(f32[2, 1, 1], [1, 6])), const(f32[2, 1, 1], [-0.5, -13])),
     add(mul(%y, const(f32[2, 1], [1, 6])), const(f32[2, 1], [-0.5, -13])))
  })");
}

TEST(SimplifyInference, EpsilonIsAddedToTheVariance) {
  // var + eps = [4, 1]: s = [1, 1], t = [0, 0].
  ExpectRewritten(R"(def @main(%x: f64[3, 2]) {
    batch_norm(%x, const(f64[2], [2, 1]), const(f64[2], [1, 2]), const(f64[2], [1, 2]),
               const(f64[2], [3.5, 0.5]), epsilon=0.5)
  })",
                  R"(def @main(%x: f64[3, 2]) {
    add(mul(%x, const(f64[2], [1, 1])), const(f64[2], [0, 0]))
  })");
}

// ---- statistics that are not constants ----

TEST(SimplifyInference, StatisticsThatAreInputsAreSpelledOut) {
  ExpectRewritten(R"(def @main(%x: f32[batch, 3, 4, 4], %g: f32[3], %b: f32[3], %m: f32[3],
                              %v: f32[3]) {
    batch_norm(%x, %g, %b, %m, %v)
  })",
                  R"(def @main(%x: f32[batch, 3, 4, 4], %g: f32[3], %b: f32[3], %m: f32[3],
                              %v: f32[3]) {
    %0 = mul(%g, rsqrt(add(%v, const(f32[], 1e-05))))
    add(mul(%x, unsqueeze(%0, axes=[1, 2])), unsqueeze(sub(%b, mul(%m, %0)), axes=[1, 2]))
  })");
}

TEST(SimplifyInference, OneStatisticThatIsNotConstantIsEnough) {
  // Rank 2 needs no unsqueeze; the matmul's weights are not touched.
  ExpectRewritten(R"(def @main(%x: f32[batch, 2], %v: f32[2]) {
    %c = const(f32[2], [2, 3])
    batch_norm(matmul(%x, const(f32[2, 2], [1, 2, 3, 4])), %c, %c, %c, %v, epsilon=0.0)
  })",
                  R"(def @main(%x: f32[batch, 2], %v: f32[2]) {
    %c = const(f32[2], [2, 3])
    %0 = mul(%c, rsqrt(add(%v, const(f32[], 0))))
    add(mul(matmul(%x, const(f32[2, 2], [1, 2, 3, 4])), %0), sub(%c, mul(%c, %0)))
  })");
}

// ---- folding into matmul ----

TEST(SimplifyInference, FoldsIntoMatmulWeights) {
  // W' = W * s column by column; t becomes a bias.
  ExpectRewritten(WithStats(R"(def @main(%x: f32[batch, 3]) {
    %fc = matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6]))
    %bn = batch_norm(%fc, STATS)
    %bn
  })"),
                  R"(def @main(%x: f32[batch, 3]) {
    %fc = matmul(%x, const(f32[3, 2], [1, 12, 3, 24, 5, 36]))
    %bn = add(%fc, const(f32[2], [-0.5, -13]))
    %bn
  })");
}

TEST(SimplifyInference, FoldsADenseLayersBiasIntoTheShift) {
  // t' = t + b * s = [-0.5 + 10, -13 + 120]; the bias may be on either side of the add.
  ExpectRewritten(WithStats(R"(def @main(%x: f32[batch, 3]) {
    %w = const(f32[3, 2], [1, 2, 3, 4, 5, 6])
    (batch_norm(add(matmul(%x, %w), const(f32[2], [10, 20])), STATS),
     batch_norm(add(const(f32[1, 2], [10, 20]), matmul(%x, %w)), STATS))
  })"),
                  R"(def @main(%x: f32[batch, 3]) {
    (add(matmul(%x, const(f32[3, 2], [1, 12, 3, 24, 5, 36])), const(f32[2], [9.5, 107])),
     add(matmul(%x, const(f32[3, 2], [1, 12, 3, 24, 5, 36])), const(f32[2], [9.5, 107])))
  })");
}

TEST(SimplifyInference, MatmulThatCannotTakeTheScaleKeepsItsWeights) {
  // Used elsewhere too (folding would compute it twice), weights that are an input, a bias
  // that differs per row, and a batched product whose dim 1 is not its output column.
  ExpectRewritten(WithStats(R"(def @main(%x: f32[4, 3], %w: f32[3, 2], %z: f32[4, 2, 3]) {
    %mm = matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6]))
    (batch_norm(%mm, STATS), %mm, batch_norm(matmul(%x, %w), STATS),
     batch_norm(add(matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6])),
                    const(f32[4, 1], [1, 2, 3, 4])), STATS),
     batch_norm(matmul(%z, const(f32[3, 1], [1, 1, 1])), STATS))
  })"),
                  R"(def @main(%x: f32[4, 3], %w: f32[3, 2], %z: f32[4, 2, 3]) {
    %mm = matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6]))
    (add(mul(%mm, const(f32[2], [1, 6])), const(f32[2], [-0.5, -13])), %mm,
     add(mul(matmul(%x, %w), const(f32[2], [1, 6])), const(f32[2], [-0.5, -13])),
     add(mul(add(matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6])), const(f32[4, 1], [1, 2, 3, 4])),
             const(f32[2], [1, 6])), const(f32[2], [-0.5, -13])),
     add(mul(matmul(%z, const(f32[3, 1], [1, 1, 1])), const(f32[2, 1], [1, 6])),
         const(f32[2, 1], [-0.5, -13])))
  })");
}

// ---- folding into gemm ----

TEST(SimplifyInference, FoldsIntoGemmWithoutC) {
  ExpectRewritten(WithStats(R"(def @main(%a: f32[batch, 3]) {
    batch_norm(gemm(%a, const(f32[3, 2], [1, 2, 3, 4, 5, 6])), STATS)
  })"),
                  R"(def @main(%a: f32[batch, 3]) {
    gemm(%a, const(f32[3, 2], [1, 12, 3, 24, 5, 36]), const(f32[2], [-0.5, -13]))
  })");
}

TEST(SimplifyInference, FoldsIntoGemmHonouringTransposesAlphaAndBeta) {
  // transB: B is [N, K], so its rows scale. C' = beta * C * s + t = [0.5*4*1 - 0.5,
  // 0.5*8*6 - 13] and beta becomes 1; alpha stays.
  ExpectRewritten(WithStats(R"(def @main(%a: f32[3, batch]) {
    batch_norm(gemm(%a, const(f32[2, 3], [1, 2, 3, 4, 5, 6]), const(f32[2], [4, 8]),
                    transA=true, transB=true, alpha=2.0, beta=0.5), STATS)
  })"),
                  R"(def @main(%a: f32[3, batch]) {
    gemm(%a, const(f32[2, 3], [1, 2, 3, 24, 30, 36]), const(f32[2], [1.5, 11]),
         transA=true, transB=true, alpha=2.0)
  })");
}

TEST(SimplifyInference, GemmBiasOfEveryShape) {
  // C [M, 1] becomes [M, N]; a scalar C becomes [N]; with beta = 0 the gemm ignores C (even
  // inf), and so does the folded one.
  ExpectRewritten(WithStats(R"(def @main(%a: f32[2, 3]) {
    %b = const(f32[3, 2], [1, 2, 3, 4, 5, 6])
    (batch_norm(gemm(%a, %b, const(f32[2, 1], [1, 2])), STATS),
     batch_norm(gemm(%a, %b, const(f32[], 1)), STATS),
     batch_norm(gemm(%a, %b, const(f32[2], [inf, 1]), beta=0.0), STATS))
  })"),
                  R"(def @main(%a: f32[2, 3]) {
    (gemm(%a, const(f32[3, 2], [1, 12, 3, 24, 5, 36]), const(f32[2, 2], [0.5, -7, 1.5, -1])),
     gemm(%a, const(f32[3, 2], [1, 12, 3, 24, 5, 36]), const(f32[2], [0.5, -7])),
     gemm(%a, const(f32[3, 2], [1, 12, 3, 24, 5, 36]), const(f32[2], [-0.5, -13])))
  })");
}

TEST(SimplifyInference, GemmWithInputWeightsOrBiasIsNotFolded) {
  ExpectRewritten(WithStats(R"(def @main(%a: f32[2, 3], %b: f32[3, 2], %c: f32[2]) {
    (batch_norm(gemm(%a, %b), STATS),
     batch_norm(gemm(%a, const(f32[3, 2], [1, 2, 3, 4, 5, 6]), %c), STATS))
  })"),
                  R"(def @main(%a: f32[2, 3], %b: f32[3, 2], %c: f32[2]) {
    (add(mul(gemm(%a, %b), const(f32[2], [1, 6])), const(f32[2], [-0.5, -13])),
     add(mul(gemm(%a, const(f32[3, 2], [1, 2, 3, 4, 5, 6]), %c), const(f32[2], [1, 6])),
         const(f32[2], [-0.5, -13])))
  })");
}

TEST(SimplifyInference, GraphsWithoutBatchNormAreReturnedAsTheyAre) {
  IRModule m = InferTypes(IRModule({{"main", test::EncoderLayerModel()}}));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule out = (*PassRegistry::Global().Create("SimplifyInference"))(m);
  EXPECT_EQ(out.Lookup("main"), m.Lookup("main"));
}

TEST(SimplifyInference, RunsAtOptLevelZero) {
  std::string input = WithStats(R"(def @main(%x: f32[1, 2]) { batch_norm(%x, STATS) })");
  ExpectPassOutput("SimplifyInference", input, R"(def @main(%x: f32[1, 2]) {
    add(mul(%x, const(f32[2], [1, 6])), const(f32[2], [-0.5, -13]))
  })",
                   /*opt_level=*/0);
}

// ---- the values stay the same ----

Expr RandomConstant(const std::vector<int64_t>& shape, uint64_t seed, double lo = -1.0,
                    double hi = 1.0) {
  return MakeConstant(test::RandomTensor(DType::kFloat32, shape, seed, lo, hi));
}

// batch_norm(x) with random constant statistics over `channels` (the variance positive).
Expr RandomBatchNorm(const Expr& x, int64_t channels, uint64_t seed) {
  return MakeCall(
      "batch_norm",
      {x, RandomConstant({channels}, seed, 0.5, 2.0), RandomConstant({channels}, seed + 1),
       RandomConstant({channels}, seed + 2), RandomConstant({channels}, seed + 3, 0.1, 2.0)},
      {{"epsilon", 1e-3}}, "bn");
}

// Runs the pass on `fn` and compares the interpreter's results before and after on random
// inputs (symbolic dims bound to 3). Returns the rewritten function.
Function ExpectSameValues(const Function& fn) {
  IRModule before = InferTypes(IRModule({{"main", fn}}));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule after = (*ParsePipeline("SimplifyInference"))(before);
  for (uint64_t seed : {1, 2}) {
    std::vector<Tensor> inputs;
    for (const Var& p : fn->params) {
      const TensorTypeNode* t = AsTensor(p->type);
      std::vector<int64_t> shape;
      for (const Dim& d : t->shape) shape.push_back(d.is_const() ? d.value() : 3);
      // Positive, so that a variance given as an input is one.
      inputs.push_back(test::RandomTensor(t->dtype, shape, seed * 100 + inputs.size(), 0.1, 2.0));
    }
    std::vector<Tensor> want = Interpret(before.Lookup("main"), inputs);
    std::vector<Tensor> got = Interpret(after.Lookup("main"), inputs);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      EXPECT_TRUE(test::TensorsNear(got[i], want[i], 1e-4, 1e-4)) << "output " << i;
    }
  }
  return after.Lookup("main");
}

// How many calls of `op` the function body holds.
int CountOp(const Function& fn, const std::string& op) {
  int n = 0;
  for (const Expr& e : PostOrder(fn->body)) {
    const CallNode* c = AsCall(e);
    n += c && c->op && c->op->name == op;
  }
  return n;
}

TEST(SimplifyInferenceSemantics, BatchNormAfterMatmul) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 5}, DType::kFloat32));
  Expr mm = MakeCall("matmul", {x, RandomConstant({5, 4}, 1)});
  Function out = ExpectSameValues(MakeFunction({x}, RandomBatchNorm(mm, 4, 10)));
  EXPECT_EQ(CountOp(out, "mul"), 0);
  EXPECT_EQ(CountOp(out, "matmul"), 1);
  // The dense layer of models.h: matmul then a bias.
  Function dense =
      ExpectSameValues(MakeFunction({x}, RandomBatchNorm(test::Dense(x, 5, 4, 20, "fc"), 4, 30)));
  EXPECT_EQ(CountOp(dense, "mul") + CountOp(dense, "batch_norm"), 0);
}

TEST(SimplifyInferenceSemantics, BatchNormAfterGemm) {
  struct Case {
    bool trans_a, trans_b;
    double alpha, beta;
    std::vector<int64_t> c_shape;  // {-1}: no C
  };
  const Case cases[] = {
      {false, false, 1.0, 1.0, {-1}},   {false, true, 1.0, 1.0, {4}},
      {true, false, 0.5, 2.0, {3, 4}},  {true, true, -1.5, 0.25, {3, 1}},
      {false, false, 2.0, 0.0, {1, 4}}, {false, true, 1.0, -1.0, {}},
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(StrCat("transA=", c.trans_a, " transB=", c.trans_b, " alpha=", c.alpha,
                        " beta=", c.beta, " C=", IntsToString(c.c_shape)));
    Var a = MakeVar("a", TensorType(c.trans_a ? Shape{5, 3} : Shape{3, 5}, DType::kFloat32));
    std::vector<Expr> args = {
        a, RandomConstant(c.trans_b ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{5, 4},
                          seed++)};
    if (c.c_shape != std::vector<int64_t>{-1}) args.push_back(RandomConstant(c.c_shape, seed++));
    Expr g = MakeCall(
        "gemm", args,
        {{"transA", c.trans_a}, {"transB", c.trans_b}, {"alpha", c.alpha}, {"beta", c.beta}});
    Function out = ExpectSameValues(MakeFunction({a}, RandomBatchNorm(g, 4, seed++)));
    EXPECT_EQ(CountOp(out, "gemm"), 1);
    EXPECT_EQ(CountOp(out, "mul") + CountOp(out, "add") + CountOp(out, "batch_norm"), 0);
  }
}

TEST(SimplifyInferenceSemantics, BatchNormOnRankFour) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 3, 4, 5}, DType::kFloat32));
  ExpectSameValues(MakeFunction({x}, RandomBatchNorm(MakeCall("relu", {x}), 3, 50)));
  // Statistics given as inputs.
  std::vector<Var> params = {x};
  for (const char* name : {"g", "b", "m", "v"})
    params.push_back(MakeVar(name, TensorType({3}, DType::kFloat32)));
  Expr bn = MakeCall("batch_norm", {params[0], params[1], params[2], params[3], params[4]});
  Function out = ExpectSameValues(MakeFunction(params, bn));
  EXPECT_EQ(CountOp(out, "batch_norm"), 0);
}

TEST(SimplifyInferenceSemantics, Models) {
  for (const Function& fn : {test::MlpModel(), test::EncoderLayerModel(),
                             test::ElementwiseReductionModel(), test::SharedAndDeadModel()}) {
    ExpectSameValues(fn);
  }
  // The MLP with a batch norm after each dense layer.
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 8}, DType::kFloat32));
  Expr h = MakeCall("relu", {RandomBatchNorm(test::Dense(x, 8, 16, 60, "fc1"), 16, 61)});
  Expr o = RandomBatchNorm(test::Dense(h, 16, 10, 70, "fc2"), 10, 71);
  Function out =
      ExpectSameValues(MakeFunction({x}, MakeCall("softmax", {o}, {{"axis", int64_t{-1}}})));
  EXPECT_EQ(CountOp(out, "batch_norm") + CountOp(out, "mul"), 0);
}

}  // namespace
}  // namespace kiln
