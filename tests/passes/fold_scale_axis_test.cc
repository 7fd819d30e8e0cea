// FoldScaleAxis: golden tests for each fold (a batch_norm after a conv folded away with
// SimplifyInference, the scale after a matmul, the scale before a conv of any group and before a
// matmul, a shift into a conv's bias), the cases that must stay as they are, and the reference
// interpreter computing the same values before and after on random graphs.
#include <gtest/gtest.h>

#include "common/engine_options.h"
#include "common/models.h"
#include "common/pass_test_util.h"
#include "engine/engine.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using test::ExpectPassOutput;
using test::RandomTensor;

void ExpectFolded(const std::string& input, const std::string& expected) {
  ExpectPassOutput("FoldScaleAxis", input, expected);
}

// s = [1, 6] and t = [-0.5, -13] exactly (epsilon 0), as in simplify_inference_test.cc.
const char* const kStats =
    "const(f32[2], [2, 3]), const(f32[2], [0.5, -1]), const(f32[2], [1, 2]), "
    "const(f32[2], [4, 0.25]), epsilon=0.0";

TEST(FoldScaleAxis, BatchNormAfterAConvFoldsIntoItsWeightsAndBias) {
  // W' = W * s per output channel; b' = b * s + t = [0.5 - 0.5, -6 - 13].
  ExpectPassOutput(
      "SimplifyInference,FoldScaleAxis", std::string(R"(def @main(%x: f32[1, 1, 3, 3]) {
    %c = conv(%x, const(f32[2, 1, 1, 1], [1, 2]), const(f32[2], [0.5, -1]), kernel_shape=[1, 1])
    %bn = batch_norm(%c, )") + kStats + R"()
    %bn
  })",
      R"(def @main(%x: f32[1, 1, 3, 3]) {
    %bn = conv(%x, const(f32[2, 1, 1, 1], [1, 12]), const(f32[2], [0, -19]), kernel_shape=[1, 1])
    %bn
  })");
}

TEST(FoldScaleAxis, ScaleAndShiftAfterAConvWithoutBiasGiveItOne) {
  // A shift alone becomes the bias; a scalar scale scales every channel; either side of the op.
  ExpectFolded(R"(def @main(%x: f32[2, 1, 4]) {
    %w = const(f32[2, 1, 1], [1, 2])
    (add(const(f32[2, 1], [3, 4]), conv(%x, %w, kernel_shape=[1])),
     mul(conv(%x, %w, kernel_shape=[1]), const(f32[], 0.5)))
  })",
               R"(def @main(%x: f32[2, 1, 4]) {
    %w = const(f32[2, 1, 1], [1, 2])
    (conv(%x, %w, const(f32[2], [3, 4]), kernel_shape=[1]),
     conv(%x, const(f32[2, 1, 1], [0.5, 1]), const(f32[2], [0, 0]), kernel_shape=[1]))
  })");
}

TEST(FoldScaleAxis, ScaleAfterAMatmulScalesItsColumns) {
  ExpectFolded(R"(def @main(%a: f32[batch, 2]) {
    mul(matmul(%a, const(f32[2, 2], [1, 2, 3, 4])), const(f32[2], [2, 0.5]))
  })",
               R"(def @main(%a: f32[batch, 2]) {
    matmul(%a, const(f32[2, 2], [2, 1, 6, 2]))
  })");
}

TEST(FoldScaleAxis, ScaleBeforeAProductScalesItsInputChannels) {
  // matmul: rows of W by s[k]; conv of 2 groups of 2 input channels: W'[m, c] = W[m, c] *
  // s[group of m * 2 + c], so output channel 0 (group 0) takes s[0], s[1] and 1 takes s[2], s[3].
  ExpectFolded(R"(def @main(%a: f32[3, 2], %x: f32[1, 4, 2, 2]) {
    (matmul(mul(%a, const(f32[2], [2, 0.5])), const(f32[2, 2], [1, 2, 3, 4])),
     conv(mul(const(f32[4, 1, 1], [1, 2, 3, 4]), %x), const(f32[2, 2, 1, 1], [1, 1, 1, 1]),
          kernel_shape=[1, 1], group=2))
  })",
               R"(def @main(%a: f32[3, 2], %x: f32[1, 4, 2, 2]) {
    (matmul(%a, const(f32[2, 2], [2, 4, 1.5, 2])),
     conv(%x, const(f32[2, 2, 1, 1], [1, 2, 3, 4]), kernel_shape=[1, 1], group=2))
  })");
}

TEST(FoldScaleAxis, WhatCannotFoldStaysAsItIs) {
  // The product used twice; a scale that is an input; one that varies over the image or the
  // batch; one that broadcasts the product larger; weights that are an input; and a matmul
  // shift (it has no bias to take it).
  const std::string same = R"(def @main(%x: f32[1, 2, 3, 3], %s: f32[2, 1, 1], %w: f32[2, 2, 1, 1],
                                       %a: f32[4, 2]) {
    %k = const(f32[2, 2, 1, 1], [1, 2, 3, 4])
    %c = conv(%x, %k, kernel_shape=[1, 1])
    (mul(%c, const(f32[2, 1, 1], [1, 2])), %c,
     mul(conv(%x, %k, kernel_shape=[1, 1]), %s),
     mul(conv(%x, %k, kernel_shape=[1, 1]), const(f32[3, 1], [1, 2, 3])),
     mul(conv(%x, %k, kernel_shape=[1, 1]), const(f32[2, 2, 1, 1], [1, 2, 3, 4])),
     mul(conv(%x, %w, kernel_shape=[1, 1]), const(f32[2, 1, 1], [1, 2])),
     add(matmul(%a, const(f32[2, 2], [1, 2, 3, 4])), const(f32[2], [1, 2])))
  })";
  ExpectFolded(same, same);
}

// Random weights, scales and inputs through the interpreter: the folded graph computes what the
// original does, to within rounding. Convs with and without bias, groups, strides and padding
// (the zero padding of a scaled input is still zero); matmuls both ways.
TEST(FoldScaleAxis, FoldedGraphsComputeTheSameValues) {
  auto constant = [](const Ints& shape, uint64_t seed) {
    return MakeConstant(RandomTensor(DType::kFloat32, shape, seed));
  };
  Var x = MakeVar("x", TensorType({2, 4, 7, 5}, DType::kFloat32));
  Var a = MakeVar("a", TensorType({3, 6}, DType::kFloat32));
  Attrs conv_attrs{{"kernel_shape", Ints{3, 3}},
                   {"pads", Ints{1, 1, 1, 1}},
                   {"group", int64_t{2}},
                   {"strides", Ints{2, 1}}};
  // Backward: (conv(x) + t) * s + t2, the conv with a bias.
  Expr c1 = MakeCall("conv", {x, constant({6, 2, 3, 3}, 1), constant({6}, 2)}, conv_attrs);
  Expr back = MakeCall(
      "add",
      {MakeCall("mul", {MakeCall("add", {c1, constant({6, 1, 1}, 3)}), constant({6, 1, 1}, 4)}),
       constant({6, 1, 1}, 5)});
  // Forward: conv(x * s) of 2 groups, no bias.
  Expr fwd =
      MakeCall("conv", {MakeCall("mul", {x, constant({4, 1, 1}, 6)}), constant({6, 2, 3, 3}, 7)},
               conv_attrs);
  // matmuls: (a * s) @ W, then that times s2 by columns.
  Expr mm = MakeCall(
      "mul", {MakeCall("matmul", {MakeCall("mul", {constant({6}, 8), a}), constant({6, 5}, 9)}),
              constant({5}, 10)});
  Function before = InferTypes(MakeFunction({x, a}, MakeTuple({back, fwd, mm})));
  IRModule m({{"main", before}});
  auto ctx = std::make_shared<PassContext>();
  ctx->opt_level = 3;  // the pass's level
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  Function after = InferTypes((*ParsePipeline("FoldScaleAxis"))(m)).Lookup("main");
  int muls = 0, adds = 0;
  for (const Expr& e : PostOrder(after->body))
    if (const CallNode* c = AsCall(e); c && c->op) {
      muls += c->op->name == "mul";
      adds += c->op->name == "add";
    }
  EXPECT_EQ(muls, 0) << Print(after);
  EXPECT_EQ(adds, 0) << Print(after);
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {2, 4, 7, 5}, 11),
                            RandomTensor(DType::kFloat32, {3, 6}, 12)};
  std::vector<Tensor> want = Interpret(before, in), got = Interpret(after, in);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(test::TensorsNear(got[i], want[i], 1e-5, 1e-5));
  }
}

// Through the engine at opt level 3 (so the default pipeline folds): conv, batch_norm, relu, a
// grouped conv, batch_norm, over images of any size, computes what the interpreter computes
// from the unfolded graph.
TEST(FoldScaleAxis, EngineAtOptLevelThreeComputesTheSameValues) {
  using test::Weight;
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 4, Dim::Symbol("h"), Dim::Symbol("w")},
                                  DType::kFloat32));
  uint64_t seed = 20;
  auto bn = [&](const Expr& in, int64_t c) {
    return MakeCall(
        "batch_norm",
        {in, Weight({c}, seed++, "g", 1.0), Weight({c}, seed++, "b"), Weight({c}, seed++, "m"),
         MakeConstant(RandomTensor(DType::kFloat32, {c}, seed++, 0.5, 1.5))});
  };
  Expr c1 = MakeCall("conv", {x, Weight({8, 4, 3, 3}, seed++, "w1"), Weight({8}, seed++, "b1")},
                     {{"pads", Ints{1, 1, 1, 1}}});
  Expr h = MakeCall("relu", {bn(c1, 8)});
  Expr c2 = MakeCall("conv", {h, Weight({8, 2, 3, 3}, seed++, "w2")},
                     {{"group", int64_t{4}}, {"strides", Ints{2, 2}}});
  ModelPtr model = Model::Create(MakeFunction({x}, bn(c2, 8)), "conv_bn");
  Engine engine(test::Eager([](EngineOptions& o) { o.opt_level = 3; }));
  for (const Ints& shape : {Ints{1, 4, 9, 9}, Ints{2, 4, 6, 11}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    std::vector<Tensor> in = {RandomTensor(DType::kFloat32, shape, 30)};
    std::vector<Tensor> want = Interpret(model->graph(), in), got = engine.Run(*model, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(test::TensorsNear(got[0], want[0], 1e-5, 1e-4));
  }
}

}  // namespace
}  // namespace kiln
