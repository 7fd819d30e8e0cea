// FuseOps: golden tests of the grouping rules, then the model graphs: their groups as op lists,
// and the interpreter's results before and after fusion.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An identity op that fusion must treat as a wall.
void RegisterTestOpaqueOp() {
  static bool done = [] {
    OpRegistry::Global().Register(OpDef{
        .name = "test.opaque",
        .doc = "identity, opaque to fusion",
        .min_inputs = 1,
        .max_inputs = 1,
        .attrs = {},
        .pattern = OpPattern::kOpaque,
        .type_rel = [](TypeRelContext& ctx) { return ctx.arg(0); },
        .ref_kernel =
            [](const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
              std::memcpy(out[0].raw_data(), in[0].raw_data(), in[0].nbytes());
            },
    });
    return true;
  }();
  (void)done;
}

IRModule Fuse(const IRModule& m, int64_t max_group_size = 32) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  ctx->SetConfig("fuse_ops.max_group_size", max_group_size);
  PassContextScope scope(ctx);
  return (*ParsePipeline("FuseOps"))(m);
}

IRModule ModuleOf(const Function& fn) {
  return InferTypes(IRModule({{"main", fn}}));
}

// Each primitive function that `fn` calls, in dataflow order, as "name: op op ...".
std::vector<std::string> Groups(const Function& fn) {
  std::vector<std::string> out;
  for (const Expr& e : PostOrder(fn->body)) {
    const CallNode* c = AsCall(e);
    if (!c) continue;
    EXPECT_EQ(c->op, nullptr) << "op call outside a group: " << c->op->name;
    const FunctionNode* f = AsFunction(c->fn);
    if (!f) continue;
    EXPECT_TRUE(f->attrs.GetBool("primitive"));
    std::string s = e->name + ":";
    for (const Expr& inner : PostOrder(f->body))
      if (const CallNode* ic = AsCall(inner)) s += " " + ic->op->name;
    out.push_back(s);
  }
  return out;
}

TEST(FuseOps, ElementwiseBroadcastInjectiveChainIsOneGroup) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 4], %b: f32[4]) {
  %1 = exp(%x)
  %2 = add(%1, %b)
  %3 = reshape(%2, shape=[4, 2])
  %4 = transpose(%3, perm=[1, 0])
  relu(%4)
})",
                   R"(
def @main(%x: f32[2, 4], %b: f32[4]) {
  %0 = fn(%1: f32[2, 4], %2: f32[4]) attrs{primitive=true} {
    %3 = exp(%1)
    %4 = add(%3, %2)
    %5 = reshape(%4, shape=[4, 2])
    %6 = transpose(%5, perm=[1, 0])
    relu(%6)
  }
  %fused_exp_add_reshape_transpose_relu = %0(%x, %b)
  %fused_exp_add_reshape_transpose_relu
})");
}

TEST(FuseOps, MatmulWithBiasAndReluIsOneGroup) {
  // The weights are arguments; the scalar is copied into the group.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[batch, 3]) {
  %fc = matmul(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6]))
  %bias = add(%fc, const(f32[2], [0.5, -0.5]))
  %act = relu(%bias)
  mul(%act, const(f32[], 2))
})",
                   R"(
def @main(%x: f32[batch, 3]) {
  %0 = fn(%1: f32[batch, 3], %2: f32[3, 2], %3: f32[2]) attrs{primitive=true} {
    %fc = matmul(%1, %2)
    %bias = add(%fc, %3)
    %act = relu(%bias)
    %4 = mul(%act, const(f32[], 2))
    %4
  }
  %fused_matmul_add_relu_mul = %0(%x, const(f32[3, 2], [1, 2, 3, 4, 5, 6]), const(f32[2], [0.5, -0.5]))
  %fused_matmul_add_relu_mul
})");
}

TEST(FuseOps, GemmWithBiasAndActivation) {
  ExpectPassOutput("FuseOps", R"(
def @main(%a: f32[4, 3], %w: f32[2, 3], %c: f32[2], %r: f32[4, 2]) {
  %1 = gemm(%a, %w, %c, transB=true, alpha=0.5)
  %2 = sigmoid(%1)
  %3 = add(%2, %r)
  tanh(%3)
})",
                   R"(
def @main(%a: f32[4, 3], %w: f32[2, 3], %c: f32[2], %r: f32[4, 2]) {
  %0 = fn(%1: f32[4, 3], %2: f32[2, 3], %3: f32[2], %4: f32[4, 2]) attrs{primitive=true} {
    %5 = gemm(%1, %2, %3, transB=true, alpha=0.5)
    %6 = sigmoid(%5)
    %7 = add(%6, %4)
    tanh(%7)
  }
  %fused_gemm_sigmoid_add_tanh = %0(%a, %w, %c, %r)
  %fused_gemm_sigmoid_add_tanh
})");
}

TEST(FuseOps, OutputFusableTakesNoProducers) {
  // The relu feeds the matmul (its input side) and the epilogue: it must stay outside, or the
  // matmul would recompute it for every use of each operand element. The group reads it once.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4, 4], %w: f32[4, 4]) {
  %1 = relu(%x)
  %2 = matmul(%1, %w)
  add(%2, %1)
})",
                   R"(
def @main(%x: f32[4, 4], %w: f32[4, 4]) {
  %0 = fn(%1: f32[4, 4]) attrs{primitive=true} {
    relu(%1)
  }
  %fused_relu = %0(%x)
  %2 = fn(%3: f32[4, 4], %4: f32[4, 4]) attrs{primitive=true} {
    %5 = matmul(%3, %4)
    add(%5, %3)
  }
  %fused_matmul_add = %2(%fused_relu, %w)
  %fused_matmul_add
})");
}

TEST(FuseOps, ReductionWithProducersAndConsumers) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 8]) {
  %1 = neg(%x)
  %2 = exp(%1)
  %3 = mul(%2, const(f32[], 2))
  %s = sum(%3, axes=[1])
  %4 = sub(%x, %s)
  relu(%4)
})",
                   R"(
def @main(%x: f32[2, 8]) {
  %0 = fn(%1: f32[2, 8]) attrs{primitive=true} {
    %2 = neg(%1)
    %3 = exp(%2)
    %4 = mul(%3, const(f32[], 2))
    %s = sum(%4, axes=[1])
    %5 = sub(%1, %s)
    relu(%5)
  }
  %fused_neg_exp_mul_sum_sub_relu = %0(%x)
  %fused_neg_exp_mul_sum_sub_relu
})");
}

TEST(FuseOps, InjectiveOpsDoNotJoinAReduction) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 8]) {
  %1 = transpose(%x, perm=[1, 0])
  %2 = max(%1, axes=[0])
  reshape(%2, shape=[2, 1])
})",
                   R"(
def @main(%x: f32[2, 8]) {
  %0 = fn(%1: f32[2, 8]) attrs{primitive=true} {
    transpose(%1, perm=[1, 0])
  }
  %fused_transpose = %0(%x)
  %2 = fn(%3: f32[8, 2]) attrs{primitive=true} {
    max(%3, axes=[0])
  }
  %fused_max = %2(%fused_transpose)
  %4 = fn(%5: f32[1, 2]) attrs{primitive=true} {
    reshape(%5, shape=[2, 1])
  }
  %fused_reshape = %4(%fused_max)
  %fused_reshape
})");
}

// A constant pad that crops nothing ends the anchor's group (its result is the epilogue's,
// stored into a box of the padded buffer); nothing joins the group after it, and a pad that
// crops, or one after an injective op, does not.
TEST(FuseOps, APadThatCropsNothingEndsAnAnchorsGroup) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4, 4], %w: f32[4, 4]) {
  %1 = matmul(%x, %w)
  %2 = relu(%1)
  %3 = pad(%2, pads=[1, 0, 1, 2])
  %4 = exp(%3)
  %5 = matmul(%x, %w)
  %6 = pad(%5, pads=[2, -1, 0, 3])
  add(%4, %6)
})",
                   R"(
def @main(%x: f32[4, 4], %w: f32[4, 4]) {
  %0 = fn(%1: f32[4, 4], %2: f32[4, 4]) attrs{primitive=true} {
    %3 = matmul(%1, %2)
    %4 = relu(%3)
    pad(%4, pads=[1, 0, 1, 2])
  }
  %fused_matmul_relu_pad = %0(%x, %w)
  %5 = fn(%6: f32[4, 4], %7: f32[4, 4]) attrs{primitive=true} {
    matmul(%6, %7)
  }
  %fused_matmul = %5(%x, %w)
  %8 = fn(%9: f32[6, 6], %10: f32[4, 4]) attrs{primitive=true} {
    %11 = exp(%9)
    %12 = pad(%10, pads=[2, -1, 0, 3])
    add(%11, %12)
  }
  %fused_exp_pad_add = %8(%fused_matmul_relu_pad, %fused_matmul)
  %fused_exp_pad_add
})");
}

// conv_nhwc -> relu -> a channels-last pool -> pad over a batch of `n`, fused with
// target.threads set to `threads` (0: unset); its groups as op lists.
std::vector<std::string> ConvPoolGroups(int64_t n, int64_t threads, const std::string& pool) {
  const std::string text = StrCat(R"(
def @main(%x: f32[)",
                                  n, R"(, 8, 8, 4], %w: f32[3, 3, 4, 8], %b: f32[8]) {
  %1 = conv_nhwc(%x, %w, %b, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
  %2 = relu(%1)
  %3 = )",
                                  pool, R"(
  pad(%3, pads=[0, 1, 1, 0, 0, 1, 1, 0])
})");
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  if (threads > 0) ctx->SetConfig("target.threads", threads);
  PassContextScope scope(ctx);
  IRModule m = (*ParsePipeline("InferType,FuseOps"))(ParseModule(text));
  return Groups(m.Lookup("main"));
}

// A channels-last pool whose windows tile its input takes its conv's group (one kernel, the
// conv's result local to it), where the batch splits evenly among the threads or is 8 times
// their number; windows that overlap or pad, an uneven small batch, or unknown threads keep
// the pool apart.
TEST(FuseOps, APoolOfTilingWindowsTakesItsConvsGroup) {
  const std::string max2 = "max_pool_nhwc(%2, kernel_shape=[2, 2], strides=[2, 2])";
  const std::string fused =
      "fused_conv_nhwc_relu_max_pool_nhwc_pad: conv_nhwc relu max_pool_nhwc pad";
  EXPECT_THAT(ConvPoolGroups(4, 2, max2), ElementsAre(fused));
  EXPECT_THAT(ConvPoolGroups(3, 1, max2), ElementsAre(fused));
  EXPECT_THAT(ConvPoolGroups(17, 2, max2), ElementsAre(fused));
  EXPECT_THAT(
      ConvPoolGroups(4, 2, "avg_pool_nhwc(%2, kernel_shape=[2, 2], strides=[2, 2])"),
      ElementsAre("fused_conv_nhwc_relu_avg_pool_nhwc_pad: conv_nhwc relu avg_pool_nhwc pad"));
  const std::vector<std::string> apart = {"fused_conv_nhwc_relu: conv_nhwc relu",
                                          "fused_max_pool_nhwc_pad: max_pool_nhwc pad"};
  EXPECT_THAT(ConvPoolGroups(3, 2, max2), ::testing::ElementsAreArray(apart));
  EXPECT_THAT(ConvPoolGroups(1, 2, max2), ::testing::ElementsAreArray(apart));
  EXPECT_THAT(ConvPoolGroups(4, 0, max2), ::testing::ElementsAreArray(apart));
  EXPECT_THAT(ConvPoolGroups(4, 2, "max_pool_nhwc(%2, kernel_shape=[3, 3], strides=[2, 2])"),
              ::testing::ElementsAreArray(apart));
  EXPECT_THAT(
      ConvPoolGroups(4, 2,
                     "max_pool_nhwc(%2, kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])"),
      ::testing::ElementsAreArray(apart));
}

TEST(FuseOps, TwoReductionsInARowAreTwoGroups) {
  // The exp between them is the first reduction's epilogue: producers are placed first.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 8]) {
  %1 = softmax(%x)
  %2 = exp(%1)
  sum(%2, axes=[1])
})",
                   R"(
def @main(%x: f32[2, 8]) {
  %0 = fn(%1: f32[2, 8]) attrs{primitive=true} {
    %2 = softmax(%1)
    exp(%2)
  }
  %fused_softmax_exp = %0(%x)
  %3 = fn(%4: f32[2, 8]) attrs{primitive=true} {
    sum(%4, axes=[1])
  }
  %fused_sum = %3(%fused_softmax_exp)
  %fused_sum
})");
}

TEST(FuseOps, TwoMatmulsNeverShareAGroup) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 4], %w1: f32[4, 4], %w2: f32[4, 4]) {
  %1 = matmul(%x, %w1)
  %2 = relu(%1)
  matmul(%2, %w2)
})",
                   R"(
def @main(%x: f32[2, 4], %w1: f32[4, 4], %w2: f32[4, 4]) {
  %0 = fn(%1: f32[2, 4], %2: f32[4, 4]) attrs{primitive=true} {
    %3 = matmul(%1, %2)
    relu(%3)
  }
  %fused_matmul_relu = %0(%x, %w1)
  %4 = fn(%5: f32[2, 4], %6: f32[4, 4]) attrs{primitive=true} {
    matmul(%5, %6)
  }
  %fused_matmul = %4(%fused_matmul_relu, %w2)
  %fused_matmul
})");
}

TEST(FuseOps, SharedIntermediateWithConsumersInDifferentGroupsIsMaterialized) {
  // %e feeds a reduction and a matmul, which never share a group: %e ends its own group.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 4], %w: f32[4, 4]) {
  %e = exp(%x)
  %s = sum(%e, axes=[1])
  %m = matmul(%e, %w)
  (%s, %m)
})",
                   R"(
def @main(%x: f32[2, 4], %w: f32[4, 4]) {
  %0 = fn(%1: f32[2, 4]) attrs{primitive=true} {
    %e = exp(%1)
    %e
  }
  %fused_exp = %0(%x)
  %2 = fn(%3: f32[2, 4]) attrs{primitive=true} {
    %s = sum(%3, axes=[1])
    %s
  }
  %fused_sum = %2(%fused_exp)
  %4 = fn(%5: f32[2, 4], %6: f32[4, 4]) attrs{primitive=true} {
    %m = matmul(%5, %6)
    %m
  }
  %fused_matmul = %4(%fused_exp, %w)
  (%fused_sum, %fused_matmul)
})");
}

TEST(FuseOps, SharedIntermediateWhoseConsumersAllJoinIsFused) {
  // A diamond, and a value used by a reduction and a side branch of its epilogue.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 4]) {
  %e = exp(%x)
  %a = relu(%e)
  %b = neg(%e)
  %c = add(%a, %b)
  %s = sum(%c, axes=[1])
  %t = tanh(%c)
  sub(%t, %s)
})",
                   R"(
def @main(%x: f32[2, 4]) {
  %0 = fn(%1: f32[2, 4]) attrs{primitive=true} {
    %e = exp(%1)
    %a = relu(%e)
    %b = neg(%e)
    %c = add(%a, %b)
    %t = tanh(%c)
    %s = sum(%c, axes=[1])
    sub(%t, %s)
  }
  %fused_exp_relu_neg_add_tanh_sum_sub = %0(%x)
  %fused_exp_relu_neg_add_tanh_sum_sub
})");
}

TEST(FuseOps, ValueReadOutsideTheFunctionEndsItsGroup) {
  // %a is also a result, so it is materialized; the tuple stays in @main.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4]) {
  %a = exp(%x)
  %b = relu(%a)
  (%a, %b)
})",
                   R"(
def @main(%x: f32[4]) {
  %0 = fn(%1: f32[4]) attrs{primitive=true} {
    %a = exp(%1)
    %a
  }
  %fused_exp = %0(%x)
  %2 = fn(%3: f32[4]) attrs{primitive=true} {
    %b = relu(%3)
    %b
  }
  %fused_relu = %2(%fused_exp)
  (%fused_exp, %fused_relu)
})");
}

TEST(FuseOps, ScalarConstantsAreCopiedInAndLargerOnesArePassed) {
  // Each group gets its own copy of the scalar; the vector is an argument of each group.
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[2, 2]) {
  %two = const(f32[], 2)
  %v = const(f32[2], [1, 2])
  %1 = mul(%x, %two)
  %2 = add(%1, %v)
  %3 = sum(%2, axes=[1])
  %4 = sum(%3, axes=[0])
  %5 = mul(%4, %two)
  add(%5, %v)
})",
                   R"(
def @main(%x: f32[2, 2]) {
  %v = const(f32[2], [1, 2])
  %0 = fn(%1: f32[2, 2], %2: f32[2]) attrs{primitive=true} {
    %3 = mul(%1, const(f32[], 2))
    %4 = add(%3, %2)
    sum(%4, axes=[1])
  }
  %fused_mul_add_sum = %0(%x, %v)
  %6 = fn(%7: f32[2, 1], %8: f32[2]) attrs{primitive=true} {
    %9 = sum(%7, axes=[0])
    %10 = mul(%9, const(f32[], 2))
    add(%10, %8)
  }
  %fused_sum_mul_add = %6(%fused_mul_add_sum, %v)
  %fused_sum_mul_add
})");
}

TEST(FuseOps, CallsOfPrimitiveFunctionsAreWalls) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4]) {
  %0 = fn(%1: f32[4]) attrs{primitive=true} {
    %2 = exp(%1)
    neg(%2)
  }
  %3 = %0(%x)
  relu(%3)
})",
                   R"(
def @main(%x: f32[4]) {
  %0 = fn(%1: f32[4]) attrs{primitive=true} {
    %2 = exp(%1)
    neg(%2)
  }
  %3 = %0(%x)
  %4 = fn(%5: f32[4]) attrs{primitive=true} {
    relu(%5)
  }
  %fused_relu = %4(%3)
  %fused_relu
})");
}

TEST(FuseOps, OpaqueOpIsAWall) {
  RegisterTestOpaqueOp();
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4]) {
  %1 = exp(%x)
  %2 = test.opaque(%1)
  relu(%2)
})",
                   R"(
def @main(%x: f32[4]) {
  %0 = fn(%1: f32[4]) attrs{primitive=true} {
    exp(%1)
  }
  %fused_exp = %0(%x)
  %2 = fn(%3: f32[4]) attrs{primitive=true} {
    test.opaque(%3)
  }
  %fused_test_opaque = %2(%fused_exp)
  %4 = fn(%5: f32[4]) attrs{primitive=true} {
    relu(%5)
  }
  %fused_relu = %4(%fused_test_opaque)
  %fused_relu
})");
}

TEST(FuseOps, MultiOutputOpIsAloneAndTupleItemsStayOutside) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4, 2]) {
  %1 = exp(%x)
  %2 = split(%1, num_outputs=2)
  %3 = %2.0
  %4 = %2.1
  add(%3, %4)
})",
                   R"(
def @main(%x: f32[4, 2]) {
  %0 = fn(%1: f32[4, 2]) attrs{primitive=true} {
    exp(%1)
  }
  %fused_exp = %0(%x)
  %2 = fn(%3: f32[4, 2]) attrs{primitive=true} {
    split(%3, num_outputs=2)
  }
  %fused_split = %2(%fused_exp)
  %4 = fn(%5: f32[2, 2], %6: f32[2, 2]) attrs{primitive=true} {
    add(%5, %6)
  }
  %fused_add = %4(%fused_split.0, %fused_split.1)
  %fused_add
})");
}

TEST(FuseOps, MaxGroupSizeIsHonoured) {
  const char* input = R"(
def @main(%x: f32[4]) {
  %1 = exp(%x)
  %2 = neg(%1)
  %3 = relu(%2)
  %4 = tanh(%3)
  sigmoid(%4)
})";
  IRModule out = Fuse(InferTypes(ParseModule(input)), 2);
  EXPECT_THAT(Groups(out.Lookup("main")),
              ElementsAre("fused_exp_neg: exp neg", "fused_relu_tanh: relu tanh",
                          "fused_sigmoid: sigmoid"));
  // The pass option overrides the config key.
  ExpectPassOutput("FuseOps(max_group_size=3)", input, R"(
def @main(%x: f32[4]) {
  %0 = fn(%1: f32[4]) attrs{primitive=true} {
    %2 = exp(%1)
    %3 = neg(%2)
    relu(%3)
  }
  %fused_exp_neg_relu = %0(%x)
  %4 = fn(%5: f32[4]) attrs{primitive=true} {
    %6 = tanh(%5)
    sigmoid(%6)
  }
  %fused_tanh_sigmoid = %4(%fused_exp_neg_relu)
  %fused_tanh_sigmoid
})");
  std::string msg = test::ErrorMessage([&] { Fuse(InferTypes(ParseModule(input)), 0); });
  EXPECT_THAT(msg, HasSubstr("fuse_ops.max_group_size must be at least 1, got 0"));
  EXPECT_EQ(PassContext().GetConfigInt("fuse_ops.max_group_size"), 32);
}

Function ExpChain(int length) {
  Var x = MakeVar("x", TensorType({2, 4}, DType::kFloat32));
  Expr e = x;
  for (int i = 0; i < length; ++i) e = MakeCall("exp", {e});
  return MakeFunction({x}, e);
}

TEST(FuseOps, LongGroupNamesAreShortened) {
  std::vector<std::string> groups = Groups(Fuse(ModuleOf(ExpChain(10))).Lookup("main"));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_THAT(groups[0], HasSubstr("fused_exp_exp_exp_exp_exp_exp_exp_exp_and_2_more:"));
}

TEST(FuseOps, DeepChains) {
  // Nothing recurses on the C++ stack, and with no size limit every op absorbs its producer's
  // whole group, which must not copy the members each time.
  const int length = 20000;
  IRModule m = ModuleOf(ExpChain(length));
  EXPECT_EQ(Groups(Fuse(m, length).Lookup("main")).size(), 1u);
  EXPECT_EQ(Groups(Fuse(m).Lookup("main")).size(), static_cast<size_t>((length + 31) / 32));
}

TEST(FuseOps, IsIdempotentAndSkipsPrimitiveFunctions) {
  const char* input = R"(
def @main(%x: f32[2, 4], %w: f32[4, 4]) {
  %1 = matmul(%x, %w)
  %2 = relu(%1)
  %3 = softmax(%2)
  %4 = split(%3, num_outputs=2, axis=1)
  %5 = %4.0
  exp(%5)
}
def @kernel(%y: f32[4]) attrs{primitive=true} {
  %1 = exp(%y)
  neg(%1)
})";
  IRModule before = InferTypes(ParseModule(input));
  IRModule once = Fuse(before);
  IRModule twice = Fuse(once);
  EXPECT_EQ(Print(twice), Print(once));
  EXPECT_TRUE(StructuralEqual(twice, once));
  EXPECT_EQ(twice.Lookup("main"), once.Lookup("main"));       // nothing to do: the same node
  EXPECT_EQ(once.Lookup("kernel"), before.Lookup("kernel"));  // primitive: left alone
  EXPECT_THAT(Groups(once.Lookup("main")),
              ElementsAre("fused_matmul_relu: matmul relu", "fused_softmax: softmax",
                          "fused_split: split", "fused_exp: exp"));
}

TEST(FuseOps, NestedFunctionsAreFusedOnTheirOwn) {
  ExpectPassOutput("FuseOps", R"(
def @main(%x: f32[4]) {
  %f = fn(%y: f32[4]) {
    %1 = exp(%y)
    neg(%1)
  }
  %f(%x)
})",
                   R"(
def @main(%x: f32[4]) {
  %f = fn(%y: f32[4]) {
    %0 = fn(%1: f32[4]) attrs{primitive=true} {
      %2 = exp(%1)
      neg(%2)
    }
    %fused_exp_neg = %0(%y)
    %fused_exp_neg
  }
  %f(%x)
})");
}

TEST(FuseOps, EncoderLayerGroups) {
  // The head split/merge (reshape, transpose) is not part of a matmul epilogue, so it is a group
  // of its own; each elementwise op between a matmul and a reduction ends the matmul's group.
  IRModule out = Fuse(ModuleOf(test::EncoderLayerModel()));
  EXPECT_THAT(Groups(out.Lookup("main")),
              ElementsAre("fused_matmul_add: matmul add",  // q projection and bias
                          "fused_reshape_transpose: reshape transpose",
                          "fused_matmul_add: matmul add",  // k
                          "fused_reshape_transpose: reshape transpose",
                          "fused_matmul_mul: matmul mul",  // scores, scaled
                          "fused_softmax: softmax",
                          "fused_matmul_add: matmul add",  // v
                          "fused_reshape_transpose: reshape transpose",
                          "fused_matmul: matmul",  // context
                          "fused_transpose_reshape: transpose reshape",
                          "fused_matmul_add_add: matmul add add",  // out projection, residual
                          "fused_layer_norm: layer_norm",
                          "fused_matmul_add_gelu: matmul add gelu",  // FFN up
                          "fused_matmul_add_add: matmul add add",    // FFN down, residual
                          "fused_layer_norm: layer_norm"));
}

TEST(FuseOps, MlpAndElementwiseReductionGroups) {
  EXPECT_THAT(Groups(Fuse(ModuleOf(test::MlpModel())).Lookup("main")),
              ElementsAre("fused_matmul_add_relu: matmul add relu", "fused_matmul_add: matmul add",
                          "fused_softmax: softmax"));
  EXPECT_THAT(Groups(Fuse(ModuleOf(test::ElementwiseReductionModel())).Lookup("main")),
              ElementsAre("fused_neg_exp_mul_add_sum_sub_relu: neg exp mul add sum sub relu"));
}

TEST(FuseOps, ModelsComputeTheSameAfterFusion) {
  struct Case {
    const char* name;
    Function model;
    std::vector<int64_t> input_shape;
  };
  RegisterTestOpaqueOp();
  // A multi-output group, tuple items read by two groups, an opaque op and a shared value.
  Function walls = ParseModule(R"(
def @main(%x: f32[batch, 6]) {
  %e = exp(%x)
  %parts = split(%e, num_outputs=2, axis=1)
  %a = test.opaque(%parts.0)
  %s = sum(%parts.1, axes=[1])
  %d = sub(%a, %s)
  mul(%d, %parts.1)
})")
                       .Lookup("main");
  for (const Case& c : {Case{"encoder", test::EncoderLayerModel(), {2, 5, 16}},
                        Case{"mlp", test::MlpModel(), {2, 8}},
                        Case{"elementwise_reduction", test::ElementwiseReductionModel(), {2, 32}},
                        Case{"shared_and_dead", test::SharedAndDeadModel(), {2, 6}},
                        Case{"walls", walls, {2, 6}}}) {
    SCOPED_TRACE(c.name);
    IRModule before = ModuleOf(c.model);
    IRModule after = Fuse(before);
    ASSERT_FALSE(StructuralEqual(before, after));
    Tensor x = test::RandomTensor(DType::kFloat32, c.input_shape, 7);
    std::vector<Tensor> want = Interpret(before.Lookup("main"), {x});
    std::vector<Tensor> got = Interpret(after.Lookup("main"), {x});
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::TensorsNear(got[i], want[i]));
  }
}

}  // namespace
}  // namespace kiln
