// WinogradConvs: which conv_nhwc calls it marks winograd=true (f32, channels-last input, 3x3,
// strides and dilations 1, 16 or more input and output channels), which it leaves, and a
// chain of convs through the default pipeline computing what the reference interpreter does.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/kernel_test_util.h"
#include "common/pass_test_util.h"
#include "engine/engine.h"
#include "ir/interpreter.h"
#include "ir/ops/conv_winograd.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using test::RandomTensor;

// conv_nhwc on x [1, 12, 12, c] (f32 unless `t` says) with a [k, k, c, m] weight and `attrs`.
Function ConvNhwc(int64_t c, int64_t m, int64_t k, Attrs attrs, DType t = DType::kFloat32) {
  Var x = MakeVar("x", TensorType({1, 12, 12, c}, t));
  Expr w = MakeConstant(RandomTensor(t, {k, k, c, m}, 1));
  return InferTypes(MakeFunction({x}, MakeCall("conv_nhwc", {x, w}, std::move(attrs))));
}

// `fn` after WinogradConvs.
Function AfterPass(const Function& fn) {
  IRModule m({{"main", fn}});
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return (*ParsePipeline("WinogradConvs"))(m).Lookup("main");
}

// Whether WinogradConvs marks `fn`'s conv.
bool Marked(const Function& fn) {
  const CallNode* call = AsCall(AfterPass(fn)->body);
  return call && call->attrs.GetBool("winograd");
}

// The weight operand of the conv WinogradConvs leaves in `fn`, if that conv has a transformed
// filter (winograd_filter), else null.
const ConstantNode* TransformedFilter(const Function& after) {
  const CallNode* call = AsCall(after->body);
  if (!call || !call->attrs.GetBool("winograd_filter")) return nullptr;
  return AsConstant(call->args[1]);
}

TEST(WinogradConvs, MarksOnlyTheConvsItsFormComputes) {
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  EXPECT_TRUE(Marked(ConvNhwc(16, 16, 3, pad1)));
  EXPECT_TRUE(Marked(ConvNhwc(64, 128, 3, {})));
  EXPECT_TRUE(Marked(ConvNhwc(32, 32, 3, {{"strides", Ints{1, 1}}, {"dilations", Ints{1, 1}}})));
  // Too few channels, another window, a stride, a dilation, f64, an NCHW input.
  EXPECT_FALSE(Marked(ConvNhwc(8, 32, 3, pad1)));
  EXPECT_FALSE(Marked(ConvNhwc(32, 15, 3, pad1)));
  EXPECT_FALSE(Marked(ConvNhwc(32, 32, 1, {})));
  EXPECT_FALSE(Marked(ConvNhwc(32, 32, 5, pad1)));
  EXPECT_FALSE(Marked(ConvNhwc(32, 32, 3, {{"strides", Ints{2, 2}}})));
  EXPECT_FALSE(Marked(ConvNhwc(32, 32, 3, {{"dilations", Ints{1, 2}}})));
  EXPECT_FALSE(Marked(ConvNhwc(32, 32, 3, pad1, DType::kFloat64)));
  Var nchw = MakeVar("x", TensorType({1, 32, 12, 12}, DType::kFloat32));
  Expr w = MakeConstant(RandomTensor(DType::kFloat32, {3, 3, 32, 32}, 2));
  EXPECT_FALSE(Marked(
      InferTypes(MakeFunction({nchw}, MakeCall("conv_nhwc", {nchw, w}, {{"input_nhwc", false}})))));
}

// A constant weight is transformed once (U [36, C, M], winograd_filter) where Winograd's form
// applies to the image size, or to any size (symbolic, U small); a weight that is a parameter,
// an image size the form does not take (outputs of 10 x 10) or a symbolic one with a large U
// keeps the [3, 3, C, M] weight. The
// model's specializations share one U (a derived constant), and U is the filter transformed.
TEST(WinogradConvs, TransformsConstantWeightsOnce) {
  const Attrs pad1 = {{"pads", Ints{1, 1, 1, 1}}};
  Function fn = ConvNhwc(16, 32, 3, pad1);  // x [1, 12, 12, 16]: 3 x 3 tiles of 4 x 4
  const ConstantNode* w = AsConstant(AsCall(fn->body)->args[1]);
  // 12 x 12 outputs: three tiles a row, fewer than the form takes.
  EXPECT_EQ(TransformedFilter(AfterPass(fn)), nullptr);
  auto conv = [&](const Shape& x_shape, bool constant_weight) {
    Var x = MakeVar("x", TensorType(x_shape, DType::kFloat32));
    std::vector<Var> params = {x};
    Expr weight = MakeConstant(w->value);
    if (!constant_weight) {
      Var p = MakeVar("w", TensorType({3, 3, 16, 32}, DType::kFloat32));
      params.push_back(p);
      weight = p;
    }
    return InferTypes(MakeFunction(params, MakeCall("conv_nhwc", {x, weight}, pad1)));
  };
  const Function big = conv({1, 32, 32, 16}, true);
  const Function after = AfterPass(big);  // (keeps U alive)
  const ConstantNode* u = TransformedFilter(after);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->value.shape(), (Ints{36, 16, 32}));
  EXPECT_TRUE(test::TensorsNear(u->value, ops::WinogradFilter(w->value), 0, 0));
  // The same weight node in another specialization's graph: the same U.
  EXPECT_EQ(TransformedFilter(AfterPass(big)), u);
  EXPECT_EQ(TransformedFilter(AfterPass(conv({1, 32, 32, 16}, false))), nullptr);
  EXPECT_TRUE(Marked(conv({1, 32, 32, 16}, false)));
  EXPECT_EQ(TransformedFilter(AfterPass(conv({1, 10, 10, 16}, true))), nullptr);
  // Any image size (a shape-generic build): U is small (72 KiB), so the form serves every size.
  EXPECT_NE(TransformedFilter(AfterPass(conv({1, Dim::Symbol("h"), Dim::Symbol("w"), 16}, true))),
            nullptr);
  // ... but not with U of 1.1 MiB (64 -> 128 channels): rows of few tiles would lose.
  Var x = MakeVar("x", TensorType({1, Dim::Symbol("h"), Dim::Symbol("w"), 64}, DType::kFloat32));
  Expr large = MakeConstant(RandomTensor(DType::kFloat32, {3, 3, 64, 128}, 3));
  EXPECT_EQ(TransformedFilter(
                AfterPass(InferTypes(MakeFunction({x}, MakeCall("conv_nhwc", {x, large}, pad1))))),
            nullptr);
  // U of 2.3 MiB (128 -> 128 channels), given: over 28 x 28 outputs, not over 14 x 14 (a run
  // reads U from memory once an image; too few pixels to pay for it).
  Expr wide = MakeConstant(RandomTensor(DType::kFloat32, {3, 3, 128, 128}, 4));
  auto wide_conv = [&](int64_t side) {
    Var v = MakeVar("x", TensorType({1, side, side, 128}, DType::kFloat32));
    return AfterPass(InferTypes(MakeFunction({v}, MakeCall("conv_nhwc", {v, wide}, pad1))));
  };
  const Function at28 = wide_conv(28), at14 = wide_conv(14);
  EXPECT_NE(TransformedFilter(at28), nullptr);
  EXPECT_EQ(TransformedFilter(at14), nullptr);
  // A symbolic batch over a constant image size: the form applies whatever the batch.
  EXPECT_NE(TransformedFilter(AfterPass(conv({Dim::Symbol("n"), 32, 32, 16}, true))), nullptr);
}

// A chain of two 3x3 convs of 16 -> 32 -> 32 channels with relus, as ONNX has them (NCHW),
// through the default graph pipeline: ChannelsLastConvs moves them channels-last, this pass
// marks the second (the first reads NCHW), and the fused kernels compute what the reference
// interpreter computes on the original graph, within Winograd's rounding.
TEST(WinogradConvs, ChainThroughThePipelineMatchesTheInterpreter) {
  Var x = MakeVar("x", TensorType({1, 16, 32, 40}, DType::kFloat32));
  auto conv = [](const Expr& in, int64_t c, int64_t m, uint64_t seed) {
    Expr w = MakeConstant(RandomTensor(DType::kFloat32, {m, c, 3, 3}, seed));
    Expr b = MakeConstant(RandomTensor(DType::kFloat32, {m}, seed + 1));
    return MakeCall("relu", {MakeCall("conv", {in, w, b}, {{"pads", Ints{1, 1, 1, 1}}})});
  };
  Function fn = InferTypes(MakeFunction({x}, conv(conv(x, 16, 32, 3), 32, 32, 5)));
  IRModule m({{"main", fn}});
  auto ctx = std::make_shared<PassContext>();
  PassContextScope scope(ctx);
  Function after = (*ParsePipeline("InferType,ChannelsLastConvs,WinogradConvs"))(m).Lookup("main");
  int marked = 0;
  for (const Expr& e : PostOrder(after->body))
    if (const CallNode* c = AsCall(e); c && c->op && c->op->name == "conv_nhwc")
      marked += c->attrs.GetBool("winograd") ? 1 : 0;
  EXPECT_EQ(marked, 1);
  // The engine runs the same default pipeline, then fuses, lowers and compiles.
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {1, 16, 32, 40}, 9)};
  Tensor want = Interpret(fn, in).at(0);
  Engine engine;
  Tensor got = engine.Run(*Model::Create(fn, "chain"), in).at(0);
  EXPECT_TRUE(test::TensorsNear(got, want, 4e-5 * std::sqrt(32.0 * 9), 1e-5));
}

}  // namespace
}  // namespace kiln
