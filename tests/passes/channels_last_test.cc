// ChannelsLastConvs: which convs it moves channels-last (chains of two or more windowed convs
// through elementwise ops and pools, or one with many products per output), where it transposes
// back, the weights' [KH, KW, C, M] layout, and the reference interpreter computing the same values
// before and after.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/kernel_test_util.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using test::RandomTensor;

IRModule ChannelsLastOf(const Function& fn) {
  IRModule m({{"main", InferTypes(fn)}});
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return (*ParsePipeline("ChannelsLastConvs"))(m);
}

// conv(x, w[m, c, k, k] random, bias) with pads k / 2 and the stride given.
Expr Conv(const Expr& x, int64_t c, int64_t m, int64_t k, int64_t stride, uint64_t seed) {
  Expr w = MakeConstant(RandomTensor(DType::kFloat32, {m, c, k, k}, seed));
  Expr b = MakeConstant(RandomTensor(DType::kFloat32, {m}, seed + 1));
  const int64_t p = k / 2;
  return MakeCall("conv", {x, w, b},
                  {{"pads", Ints{p, p, p, p}}, {"strides", Ints{stride, stride}}});
}

// The calls of `fn`'s body by op name, in order.
std::vector<const CallNode*> Calls(const Function& fn, const std::string& op) {
  std::vector<const CallNode*> out;
  for (const Expr& e : PostOrder(fn->body))
    if (const CallNode* c = AsCall(e); c && c->op && c->op->name == op) out.push_back(c);
  return out;
}

void ExpectSameValues(const Function& before, const Function& after, const Ints& shape) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, shape, 7)};
  std::vector<Tensor> want = Interpret(before, in), got = Interpret(after, in);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(test::TensorsNear(got[i], want[i], 1e-5, 1e-5)) << "output " << i;
}

// Three windowed convs with relus between them, the last a 1x1 with a sigmoid: all go
// channels-last, the first reading NCHW, and one transpose brings the result back.
TEST(ChannelsLastConvs, ChainRunsChannelsLastAndTransposesOnceAtTheEnd) {
  Var x = MakeVar("x", TensorType({1, 3, 17, 15}, DType::kFloat32));
  Expr c1 = MakeCall("relu", {Conv(x, 3, 16, 3, 2, 1)});
  Expr c2 = MakeCall("relu", {Conv(c1, 16, 32, 3, 1, 3)});
  Expr c3 = MakeCall("sigmoid", {Conv(c2, 32, 8, 1, 1, 5)});
  Function before = InferTypes(MakeFunction({x}, c3));
  Function after = ChannelsLastOf(before).Lookup("main");
  std::vector<const CallNode*> convs = Calls(after, "conv_nhwc");
  ASSERT_EQ(convs.size(), 3u);
  EXPECT_TRUE(Calls(after, "conv").empty());
  EXPECT_FALSE(convs[0]->attrs.GetBool("input_nhwc"));
  EXPECT_TRUE(convs[1]->attrs.GetBool("input_nhwc"));
  EXPECT_TRUE(convs[2]->attrs.GetBool("input_nhwc"));
  // A chain value read with padding is padded by a pad op (which FuseOps puts at the end of
  // its producer's group); the conv then pads nothing. The first conv pads its NCHW input
  // itself, and the 1x1 conv reads its input as it is.
  EXPECT_EQ(convs[0]->attrs.GetInts("pads"), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(convs[1]->attrs.GetInts("pads"), (Ints{0, 0, 0, 0}));
  const CallNode* pad = AsCall(convs[1]->args[0]);
  ASSERT_TRUE(pad && pad->op && pad->op->name == "pad");
  EXPECT_EQ(pad->attrs.GetInts("pads"), (Ints{0, 1, 1, 0, 0, 1, 1, 0}));
  EXPECT_EQ(Calls(after, "pad").size(), 1u);
  EXPECT_EQ(convs[0]->attrs.GetInts("strides"), (Ints{2, 2}));
  // HWIO weights: w'[ky, kx, c, m] = w[m, c, ky, kx].
  const Tensor& hwio = AsConstant(convs[1]->args[1])->value;
  EXPECT_EQ(hwio.shape(), (Ints{3, 3, 16, 32}));
  const CallNode* orig = AsCall(AsCall(c2)->args[0]);
  const Tensor& oihw = AsConstant(orig->args[1])->value;
  EXPECT_EQ(hwio.data<float>()[((2 * 3 + 1) * 16 + 5) * 32 + 7],
            oihw.data<float>()[((7 * 16 + 5) * 3 + 2) * 3 + 1]);
  std::vector<const CallNode*> transposes = Calls(after, "transpose");
  ASSERT_EQ(transposes.size(), 1u);
  EXPECT_EQ(transposes[0]->attrs.GetInts("perm"), (Ints{0, 3, 1, 2}));
  EXPECT_EQ(TypeToString(InferTypes(after)->body->type), "f32[1, 8, 9, 8]");
  ExpectSameValues(before, after, {1, 3, 17, 15});
}

// A value the chain makes that something NCHW also reads (a residual add of the block's
// input) is transposed back for it, and the add stays NCHW; the chain itself is unchanged.
TEST(ChannelsLastConvs, ValuesLeavingTheChainAreTransposedBack) {
  Var x = MakeVar("x", TensorType({1, 8, 9, 9}, DType::kFloat32));
  Expr c1 = MakeCall("relu", {Conv(x, 8, 8, 3, 1, 1)});
  Expr c2 = Conv(c1, 8, 8, 3, 1, 3);
  Expr sum = MakeCall("add", {c2, x});
  Expr out = MakeTuple({sum, c1});
  Function before = InferTypes(MakeFunction({x}, out));
  Function after = ChannelsLastOf(before).Lookup("main");
  EXPECT_EQ(Calls(after, "conv_nhwc").size(), 2u);
  // c2 for the add, c1 for the tuple.
  EXPECT_EQ(Calls(after, "transpose").size(), 2u);
  ASSERT_EQ(Calls(after, "add").size(), 1u);
  const CallNode* add = Calls(after, "add")[0];
  EXPECT_EQ(add->args[1].get(), x.get());
  ASSERT_NE(AsCall(add->args[0]), nullptr);
  EXPECT_EQ(AsCall(add->args[0])->op->name, "transpose");
  ExpectSameValues(before, after, {1, 8, 9, 9});
}

// Binary ops join a chain when every tensor operand is in it (a residual add of two chain
// values) or a scalar; x * sigmoid(x) walks its diamond once.
TEST(ChannelsLastConvs, BinaryOpsOfChainValuesAndScalarsJoin) {
  Var x = MakeVar("x", TensorType({1, 8, 9, 9}, DType::kFloat32));
  Expr c1 = Conv(x, 8, 8, 3, 1, 1);
  Expr swish = MakeCall("mul", {c1, MakeCall("sigmoid", {c1})});
  Expr c2 = Conv(swish, 8, 8, 3, 1, 3);
  Expr sum = MakeCall("add", {c2, swish});
  Expr scaled = MakeCall("mul", {sum, MakeConstant(Tensor::Scalar(0.5f))});
  Expr c3 = Conv(scaled, 8, 4, 3, 2, 5);
  Function before = InferTypes(MakeFunction({x}, c3));
  Function after = ChannelsLastOf(before).Lookup("main");
  EXPECT_EQ(Calls(after, "conv_nhwc").size(), 3u);
  ASSERT_EQ(Calls(after, "transpose").size(), 1u);  // only the result goes back
  ExpectSameValues(before, after, {1, 8, 9, 9});
}

// A small CNN: convs linked through 2x2 stride-2 pools, a global average pool at the end. The pools
// go channels-last with the convs (max_pool_nhwc, global_avg_pool_nhwc), the conv after a pool
// reads it padded, and one transpose brings the pooled [N, 1, 1, C] back.
TEST(ChannelsLastConvs, PoolsJoinTheChain) {
  Var x = MakeVar("x", TensorType({2, 3, 16, 16}, DType::kFloat32));
  const Attrs two = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  Expr h = MakeCall("max_pool", {MakeCall("relu", {Conv(x, 3, 8, 3, 1, 1)})}, two);
  h = MakeCall("avg_pool", {MakeCall("relu", {Conv(h, 8, 16, 3, 1, 3)})}, two);
  h = MakeCall("global_avg_pool", {Conv(h, 16, 24, 3, 1, 5)});
  Function before = InferTypes(MakeFunction({x}, MakeCall("flatten", {h})));
  Function after = ChannelsLastOf(before).Lookup("main");
  EXPECT_EQ(Calls(after, "conv_nhwc").size(), 3u);
  EXPECT_EQ(Calls(after, "max_pool_nhwc").size(), 1u);
  EXPECT_EQ(Calls(after, "avg_pool_nhwc").size(), 1u);
  ASSERT_EQ(Calls(after, "global_avg_pool_nhwc").size(), 1u);
  for (const char* nchw : {"conv", "max_pool", "avg_pool", "global_avg_pool"})
    EXPECT_TRUE(Calls(after, nchw).empty()) << nchw;
  // The second conv reads the pool's result padded.
  const CallNode* pad = AsCall(Calls(after, "conv_nhwc")[1]->args[0]);
  ASSERT_TRUE(pad && pad->op && pad->op->name == "pad");
  EXPECT_EQ(AsCall(pad->args[0])->op->name, "max_pool_nhwc");
  std::vector<const CallNode*> transposes = Calls(after, "transpose");
  ASSERT_EQ(transposes.size(), 1u);
  EXPECT_EQ(AsCall(transposes[0]->args[0])->op->name, "global_avg_pool_nhwc");
  ExpectSameValues(before, after, {2, 3, 16, 16});
}

// A pool of a conv that stays NCHW stays NCHW too.
TEST(ChannelsLastConvs, PoolsOfNchwConvsStay) {
  Var x = MakeVar("x", TensorType({1, 8, 10, 10}, DType::kFloat32));
  Expr pooled = MakeCall("max_pool", {Conv(x, 8, 8, 3, 1, 9)}, {{"kernel_shape", Ints{2, 2}}});
  Function after =
      ChannelsLastOf(InferTypes(MakeFunction({x}, MakeCall("global_avg_pool", {pooled}))))
          .Lookup("main");
  EXPECT_TRUE(Calls(after, "conv_nhwc").empty());
  EXPECT_EQ(Calls(after, "max_pool").size(), 1u);
  EXPECT_EQ(Calls(after, "global_avg_pool").size(), 1u);
  EXPECT_TRUE(Calls(after, "transpose").empty());
}

// A pool whose windows overlap or pad (a ResNet stem's 3x3 stride 2 with pads) joins the
// chain, its taps spelled out channels-last; one of more than 25 taps (7x7) stays NCHW and
// ends the chain: the convs on either side are chains of their own.
TEST(ChannelsLastConvs, OverlappingPoolsJoinUpTo25Taps) {
  Var x = MakeVar("x", TensorType({1, 3, 16, 16}, DType::kFloat32));
  auto stem = [&](int64_t k) {
    Expr h = MakeCall("relu", {Conv(x, 3, 8, 3, 1, 1)});
    h = MakeCall("relu", {Conv(h, 8, 8, 3, 1, 3)});
    const int64_t p = k / 2;
    h = MakeCall(
        "max_pool", {h},
        {{"kernel_shape", Ints{k, k}}, {"strides", Ints{2, 2}}, {"pads", Ints{p, p, p, p}}});
    return InferTypes(MakeFunction({x}, MakeCall("relu", {Conv(h, 8, 8, 3, 1, 5)})));
  };
  Function small = stem(3);
  Function joined = ChannelsLastOf(small).Lookup("main");
  EXPECT_EQ(Calls(joined, "conv_nhwc").size(), 3u);
  EXPECT_EQ(Calls(joined, "max_pool_nhwc").size(), 1u);
  EXPECT_TRUE(Calls(joined, "max_pool").empty());
  ExpectSameValues(small, joined, {1, 3, 16, 16});
  Function large = stem(7);
  Function ended = ChannelsLastOf(large).Lookup("main");
  EXPECT_EQ(Calls(ended, "conv_nhwc").size(), 2u);
  EXPECT_EQ(Calls(ended, "conv").size(), 1u);
  EXPECT_EQ(Calls(ended, "max_pool").size(), 1u);
  EXPECT_TRUE(Calls(ended, "max_pool_nhwc").empty());
  ExpectSameValues(large, ended, {1, 3, 16, 16});
}

// What stays NCHW: a lone conv, a chain with one windowed conv (the other 1x1), a grouped
// conv, and a conv whose weight is not a constant.
TEST(ChannelsLastConvs, LeavesConvsWithoutAChainAlone) {
  Var x = MakeVar("x", TensorType({1, 8, 10, 10}, DType::kFloat32));
  auto unchanged = [](const Function& before) {
    Function after = ChannelsLastOf(before).Lookup("main");
    EXPECT_TRUE(Calls(after, "conv_nhwc").empty());
    EXPECT_TRUE(Calls(after, "transpose").empty());
  };
  unchanged(InferTypes(MakeFunction({x}, MakeCall("relu", {Conv(x, 8, 16, 3, 1, 1)}))));
  unchanged(InferTypes(
      MakeFunction({x}, Conv(MakeCall("relu", {Conv(x, 8, 16, 3, 1, 1)}), 16, 16, 1, 1, 3))));
  Expr grouped = MakeCall("conv", {x, MakeConstant(RandomTensor(DType::kFloat32, {8, 4, 3, 3}, 5))},
                          {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}});
  unchanged(InferTypes(MakeFunction({x}, Conv(grouped, 8, 8, 3, 1, 6))));
  Var w = MakeVar("w", TensorType({8, 8, 3, 3}, DType::kFloat32));
  Expr variable = MakeCall("conv", {x, w}, {{"pads", Ints{1, 1, 1, 1}}});
  unchanged(InferTypes(MakeFunction({x, w}, Conv(variable, 8, 8, 3, 1, 8))));
}

// A lone windowed conv with 1024 or more products per output (input channels x taps) goes
// channels-last by itself, transposed back once; one just below stays.
TEST(ChannelsLastConvs, ALoneHeavyConvGoesAlone) {
  Var x = MakeVar("x", TensorType({2, 128, 1, 12}, DType::kFloat32));
  Function heavy = InferTypes(MakeFunction({x}, MakeCall("relu", {Conv(x, 128, 16, 3, 1, 1)})));
  Function after = ChannelsLastOf(heavy).Lookup("main");
  EXPECT_EQ(Calls(after, "conv_nhwc").size(), 1u);
  EXPECT_TRUE(Calls(after, "conv").empty());
  EXPECT_EQ(Calls(after, "transpose").size(), 1u);
  ExpectSameValues(heavy, after, {2, 128, 1, 12});
  Var y = MakeVar("y", TensorType({2, 113, 1, 12}, DType::kFloat32));  // 113 x 9 = 1017
  Function light = InferTypes(MakeFunction({y}, MakeCall("relu", {Conv(y, 113, 16, 3, 1, 1)})));
  EXPECT_TRUE(Calls(ChannelsLastOf(light).Lookup("main"), "conv_nhwc").empty());
}

}  // namespace
}  // namespace kiln
