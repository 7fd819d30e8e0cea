// The default graph pipeline: it preserves semantics on every model, and PassContext settings
// decide which of its passes run (read from the timing report).
#include "passes/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"
#include "passes/instrument.h"

namespace kiln {
namespace {

using test::RandomTensor;
using test::TensorsNear;

struct Case {
  const char* name;
  Function fn;
  std::vector<std::vector<int64_t>> shapes;  // input shapes to try
};

std::vector<Case> Models() {
  return {
      {"mlp", test::MlpModel(), {{1, 8}, {3, 8}}},
      {"encoder", test::EncoderLayerModel(), {{1, 1, 16}, {2, 5, 16}}},
      {"elementwise_reduction", test::ElementwiseReductionModel(), {{1, 32}, {7, 32}}},
      {"shared_and_dead", test::SharedAndDeadModel(), {{1, 6}, {4, 6}}},
  };
}

IRModule RunPipeline(const Function& fn, std::shared_ptr<PassContext> ctx) {
  PassContextScope scope(std::move(ctx));
  return (*DefaultGraphPipeline())(IRModule({{"main", fn}}));
}

TEST(DefaultPipeline, PreservesSemanticsOnEveryModel) {
  for (const Case& c : Models()) {
    auto ctx = std::make_shared<PassContext>();
    ctx->SetConfig("testing.check_immutable", true);
    IRModule out = RunPipeline(c.fn, ctx);
    Function optimized = out.Lookup("main");
    uint64_t seed = 7;
    for (const auto& shape : c.shapes) {
      Tensor in = RandomTensor(DType::kFloat32, shape, ++seed);
      std::vector<Tensor> want = Interpret(c.fn, {in});
      std::vector<Tensor> got = Interpret(optimized, {in});
      ASSERT_EQ(got.size(), want.size()) << c.name;
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(TensorsNear(got[i], want[i], 1e-5, 1e-4)) << c.name << " output " << i;
    }
  }
}

std::shared_ptr<PassTimingInstrument> TimePipeline(std::shared_ptr<PassContext> ctx) {
  auto timing = std::make_shared<PassTimingInstrument>();
  ctx->SetInstruments({timing});
  RunPipeline(test::EncoderLayerModel(), ctx);
  return timing;
}

TEST(DefaultPipeline, RunsEveryPassAtTheDefaultOptLevel) {
  auto timing = TimePipeline(std::make_shared<PassContext>());
  for (const char* p : {"InferType", "SimplifyInference", "FoldConstant", "SimplifyExpr",
                        "CommonSubexprElimination", "DeadCodeElimination", "FuseOps"})
    EXPECT_TRUE(timing->Ran(p)) << p << "\n" << timing->Render();
}

// FoldScaleAxis rounds differently from the graph it folds: opt level 3 runs it (TVM's level
// for it), the default level does not, unless it is required.
TEST(DefaultPipeline, FoldScaleAxisRunsAtOptLevelThreeOrWhenRequired) {
  EXPECT_FALSE(TimePipeline(std::make_shared<PassContext>())->Ran("FoldScaleAxis"));
  auto ctx = std::make_shared<PassContext>();
  ctx->opt_level = 3;
  EXPECT_TRUE(TimePipeline(ctx)->Ran("FoldScaleAxis"));
  ctx = std::make_shared<PassContext>();
  ctx->required_passes = {"FoldScaleAxis"};
  EXPECT_TRUE(TimePipeline(ctx)->Ran("FoldScaleAxis"));
}

TEST(DefaultPipeline, DisabledFuseOpsDoesNotRun) {
  auto ctx = std::make_shared<PassContext>();
  ctx->disabled_passes = {"FuseOps"};
  auto timing = TimePipeline(ctx);
  EXPECT_FALSE(timing->Ran("FuseOps")) << timing->Render();
  EXPECT_TRUE(timing->Ran("FoldConstant"));
}

TEST(DefaultPipeline, OptLevelZeroRunsOnlyLevelZeroPasses) {
  auto ctx = std::make_shared<PassContext>();
  ctx->opt_level = 0;
  auto timing = TimePipeline(ctx);
  EXPECT_TRUE(timing->Ran("InferType"));
  EXPECT_TRUE(timing->Ran("SimplifyInference"));
  for (const char* p : {"FoldConstant", "SimplifyExpr", "CommonSubexprElimination",
                        "DeadCodeElimination", "FuseOps"})
    EXPECT_FALSE(timing->Ran(p)) << p << "\n" << timing->Render();
  // A required pass runs even at opt_level 0.
  ctx->required_passes = {"FuseOps"};
  EXPECT_TRUE(TimePipeline(ctx)->Ran("FuseOps"));
}

TEST(DefaultPipeline, PrintsAsAPipelineStringThatParsesBack) {
  std::string text = PipelineToString(DefaultGraphPipeline());
  EXPECT_EQ(text,
            "InferType,SimplifyInference,FoldConstant,FoldScaleAxis,SimplifyExpr,"
            "CommonSubexprElimination,"
            "DeadCodeElimination,TrimConvTaps,ChannelsLastConvs,WinogradConvs,ConvTransposeAsMatmul,"
            "PackConstantWeights,"
            "FuseOps");
  EXPECT_EQ(PipelineToString(ParsePipeline(text)), text);
}

}  // namespace
}  // namespace kiln
