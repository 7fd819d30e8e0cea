// Fused groups, compiled: every primitive function FuseOps makes for the model graphs is
// lowered, put through the loop pipeline, JIT-compiled and compared with the reference
// interpreter on random inputs, concrete and shape-generic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/kernel_test_util.h"
#include "common/models.h"
#include "ir/text.h"
#include "passes/pass.h"

namespace kiln {
namespace {

using test::RandomTensor;
using test::TensorsNear;

// The primitive functions of `fn` after InferType and FuseOps.
std::vector<Function> FusedGroups(const Function& fn) {
  IRModule m = (*ParsePipeline("InferType,FuseOps"))(IRModule({{"main", fn}}));
  std::vector<Function> groups;
  for (const Expr& e : PostOrder(m.Lookup("main")->body)) {
    const CallNode* c = AsCall(e);
    if (c && c->fn) groups.push_back(std::static_pointer_cast<const FunctionNode>(c->fn));
  }
  return groups;
}

// Binds every symbol of `fn`'s parameters to `value` and makes random inputs for it.
std::vector<Tensor> InputsFor(const Function& fn, int64_t value, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const Var& p : fn->params) {
    const TensorTypeNode* tt = AsTensor(p->type);
    std::vector<int64_t> shape;
    for (const Dim& d : tt->shape) {
      std::set<std::string> syms;
      d.CollectSymbols(&syms);
      std::map<std::string, int64_t> b;
      for (const std::string& s : syms) b[s] = value;
      shape.push_back(*d.TryEval(b));
    }
    inputs.push_back(RandomTensor(tt->dtype, shape, ++seed));
  }
  return inputs;
}

void ExpectGroupsMatch(const Function& model, const std::vector<std::string>& must_have) {
  std::vector<Function> groups = FusedGroups(model);
  ASSERT_FALSE(groups.empty());
  std::string names;
  for (const Function& g : groups) {
    for (int64_t size : {1, 3, 17}) {
      std::vector<Tensor> in = InputsFor(g, size, 40 + size);
      std::vector<Tensor> want = Interpret(g, in);
      std::vector<Tensor> got;
      try {
        got = test::RunCompiled(g, in, "group");
      } catch (const Error& e) {
        ADD_FAILURE() << e.what() << "\n" << Print(g);
        continue;
      }
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_TRUE(TensorsNear(got[i], want[i], 1e-5, 1e-4)) << "size " << size << "\n"
                                                              << Print(g);
    }
    names += Print(g) + "\n";
  }
  for (const std::string& op : must_have) EXPECT_THAT(names, ::testing::HasSubstr(op));
}

Function GemmBiasRelu() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 24}, DType::kFloat32));
  Expr w = test::Weight({16, 24}, 3, "w");
  Expr c = test::Weight({16}, 4, "c");
  Expr g = MakeCall("gemm", {x, w, c}, {{"transB", true}, {"alpha", 0.5}});
  return MakeFunction({x}, MakeCall("relu", {MakeCall("add", {g, test::Weight({16}, 5, "b")})}));
}

Function ErfGeluChain() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 33}, DType::kFloat32));
  // 0.5 * x * (1 + erf(x / sqrt(2))), spelled out op by op.
  Expr inner =
      MakeCall("erf", {MakeCall("div", {x, MakeConstant(Tensor::Scalar<float>(1.41421356f))})});
  Expr one_plus = MakeCall("add", {inner, MakeConstant(Tensor::Scalar<float>(1.0f))});
  Expr half_x = MakeCall("mul", {x, MakeConstant(Tensor::Scalar<float>(0.5f))});
  return MakeFunction({x}, MakeCall("mul", {half_x, one_plus}));
}

TEST(FusedGroups, GemmBiasRelu) {
  ExpectGroupsMatch(GemmBiasRelu(), {"gemm", "relu"});
}
TEST(FusedGroups, ErfGeluChain) {
  ExpectGroupsMatch(ErfGeluChain(), {"erf"});
}
TEST(FusedGroups, ElementwiseChainWithReduction) {
  ExpectGroupsMatch(test::ElementwiseReductionModel(), {"sum", "exp", "relu"});
}
TEST(FusedGroups, Mlp) {
  ExpectGroupsMatch(test::MlpModel(), {"matmul", "softmax"});
}
TEST(FusedGroups, EncoderLayer) {
  ExpectGroupsMatch(test::EncoderLayerModel(), {"softmax", "layer_norm", "gelu", "transpose"});
}

// A conv_nhwc whose pool takes its group (FuseOps with target.threads set): the conv's result
// is local to the kernel, and the batch loop runs each image's conv and pool together. Odd
// sizes, so the pool leaves the conv's last row and column unread; max and average.
TEST(FusedGroups, ConvWithItsPool) {
  for (const std::string pool : {"max_pool_nhwc", "avg_pool_nhwc"}) {
    IRModule m = ParseModule(StrCat(R"(
def @main(%x: f32[4, 9, 7, 5], %w: f32[3, 3, 5, 24], %b: f32[24]) {
  %1 = conv_nhwc(%x, %w, %b, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
  %2 = relu(%1)
  %3 = )",
                                    pool, R"((%2, kernel_shape=[2, 2], strides=[2, 2])
  pad(%3, pads=[0, 1, 1, 0, 0, 1, 1, 0])
})"));
    auto ctx = std::make_shared<PassContext>();
    ctx->SetConfig("target.threads", int64_t{2});
    PassContextScope scope(ctx);
    m = (*ParsePipeline("InferType,FuseOps"))(m);
    std::vector<Function> groups;
    for (const Expr& e : PostOrder(m.Lookup("main")->body))
      if (const CallNode* c = AsCall(e); c && c->fn)
        groups.push_back(std::static_pointer_cast<const FunctionNode>(c->fn));
    ASSERT_EQ(groups.size(), 1u) << Print(m.Lookup("main"));
    std::vector<Tensor> in = InputsFor(groups[0], 1, 60);
    std::vector<Tensor> want = Interpret(groups[0], in);
    std::vector<Tensor> got = test::RunCompiled(groups[0], in, "conv_pool");
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(TensorsNear(got[0], want[0], 1e-5, 1e-4)) << pool;
  }
}

}  // namespace
}  // namespace kiln
