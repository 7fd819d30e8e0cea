// ConvTransposeAsMatmul: which conv_transposes become a matmul and a reshuffle (windows that tile
// the output; depth_to_space over any image size) or a matmul and col2im_nhwc (other
// geometries), which stay, and the reference
// interpreter computing the same values before and after, with and without a bias, square and
// oblong kernels, batches of one and more.
#include <gtest/gtest.h>

#include <string>

#include "common/kernel_test_util.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using test::RandomTensor;

Function Rewritten(const Function& fn) {
  IRModule m({{"main", InferTypes(fn)}});
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return InferTypes((*ParsePipeline("ConvTransposeAsMatmul"))(m)).Lookup("main");
}

// conv_transpose of x[n, c, h, w] by a random constant w[c, m, kh, kw] (and bias), with `attrs`.
Function ConvTranspose(const Ints& x_shape, int64_t m, int64_t kh, int64_t kw, bool bias,
                       Attrs attrs) {
  Var x = MakeVar("x", TensorType(ShapeFromInts(x_shape), DType::kFloat32));
  std::vector<Expr> args = {
      x, MakeConstant(RandomTensor(DType::kFloat32, {x_shape[1], m, kh, kw}, 3))};
  if (bias) args.push_back(MakeConstant(RandomTensor(DType::kFloat32, {m}, 4)));
  attrs.Set("kernel_shape", Ints{kh, kw});
  return MakeFunction({x}, MakeCall("conv_transpose", args, attrs));
}

int CountOps(const Function& fn, const std::string& op) {
  int n = 0;
  for (const Expr& e : PostOrder(fn->body))
    if (const CallNode* c = AsCall(e); c && c->op && c->op->name == op) ++n;
  return n;
}

void ExpectSameValues(const Function& before, const Function& after, const Ints& shape) {
  std::vector<Tensor> in = {RandomTensor(DType::kFloat32, shape, 7)};
  std::vector<Tensor> want = Interpret(InferTypes(before), in), got = Interpret(after, in);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_TRUE(test::TensorsNear(got[0], want[0], 1e-5, 1e-5));
}

TEST(ConvTransposeAsMatmul, TilingWindowsBecomeAMatmulAndAReshuffle) {
  struct Case {
    Ints x;
    int64_t m, kh, kw;
    bool bias;
  };
  for (const Case& c : {Case{{1, 8, 5, 4}, 3, 2, 2, true}, Case{{2, 5, 3, 7}, 4, 2, 3, false},
                        Case{{1, 1, 1, 1}, 1, 1, 1, true}, Case{{3, 6, 4, 2}, 16, 3, 3, true}}) {
    SCOPED_TRACE(::testing::PrintToString(c.x));
    Function before =
        ConvTranspose(c.x, c.m, c.kh, c.kw, c.bias,
                      Attrs{{"strides", Ints{c.kh, c.kw}}, {"pads", Ints{0, 0, 0, 0}}});
    Function after = Rewritten(before);
    EXPECT_EQ(CountOps(after, "conv_transpose"), 0);
    EXPECT_EQ(CountOps(after, "matmul"), 1);
    EXPECT_EQ(CountOps(after, "add"), c.bias ? 1 : 0);
    const TensorTypeNode* y = AsTensor(after->body->type);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(ShapeToString(y->shape),
              ShapeToString(Shape{Dim(c.x[0]), Dim(c.m), Dim(c.x[2] * c.kh), Dim(c.x[3] * c.kw)}));
    ExpectSameValues(before, after, c.x);
  }
}

// x transposed from channels-last (a conv chain's end): the product reads the channels-last
// value, so the only transpose left is the reshuffle's.
TEST(ConvTransposeAsMatmul, ReadsThroughATransposeFromChannelsLast) {
  Var v = MakeVar("x", TensorType({2, 5, 3, 6}, DType::kFloat32));
  Expr x = MakeCall("transpose", {v}, {{"perm", Ints{0, 3, 1, 2}}});
  Function before =
      MakeFunction({v}, MakeCall("conv_transpose",
                                 {x, MakeConstant(RandomTensor(DType::kFloat32, {6, 4, 2, 2}, 3))},
                                 Attrs{{"strides", Ints{2, 2}}, {"kernel_shape", Ints{2, 2}}}));
  Function after = Rewritten(before);
  EXPECT_EQ(CountOps(after, "transpose"), 1) << Print(after);
  EXPECT_EQ(CountOps(after, "matmul"), 1);
  ExpectSameValues(before, after, {2, 5, 3, 6});
}

// Any other geometry with begin pads from the attribute: a matmul of every tap's contribution
// and col2im_nhwc summing them where windows overlap and dropping those in the pads, then the
// bias and a transpose to NCHW. Kernels larger and smaller than the stride, pads, output padding,
// dilation, oblong shapes, batches of one and more, with and without a bias.
TEST(ConvTransposeAsMatmul, OtherGeometriesScatterThroughCol2Im) {
  struct Case {
    Ints x;
    int64_t m, kh, kw;
    Ints strides, pads, output_padding, dilations;
    bool bias;
  };
  for (const Case& c : {Case{{1, 8, 5, 4}, 3, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, true},
                        Case{{2, 5, 3, 7}, 4, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, false},
                        Case{{1, 3, 4, 4}, 2, 3, 3, {1, 1}, {0, 0, 0, 0}, {0, 0}, {1, 1}, true},
                        Case{{1, 6, 3, 5}, 5, 2, 3, {3, 2}, {0, 2, 1, 0}, {2, 1}, {2, 1}, true},
                        Case{{3, 2, 1, 1}, 7, 5, 2, {1, 4}, {2, 0, 2, 1}, {0, 3}, {1, 1}, false}}) {
    SCOPED_TRACE(::testing::PrintToString(c.x) + " kernel " + std::to_string(c.kh) + "x" +
                 std::to_string(c.kw));
    Function before = ConvTranspose(c.x, c.m, c.kh, c.kw, c.bias,
                                    Attrs{{"strides", c.strides},
                                          {"pads", c.pads},
                                          {"output_padding", c.output_padding},
                                          {"dilations", c.dilations}});
    Function after = Rewritten(before);
    EXPECT_EQ(CountOps(after, "conv_transpose"), 0);
    EXPECT_EQ(CountOps(after, "col2im_nhwc"), 1);
    EXPECT_EQ(CountOps(after, "matmul"), 1);
    EXPECT_EQ(ShapeToString(AsTensor(after->body->type)->shape),
              ShapeToString(AsTensor(InferTypes(before)->body->type)->shape));
    ExpectSameValues(before, after, c.x);
  }
}

// An output_shape or automatic pads: their begin pads follow from the output size
// (ops::ComputeTransposeWindow), and they scatter through col2im_nhwc like explicit pads.
TEST(ConvTransposeAsMatmul, OutputShapeAndAutoPadScatterThroughCol2Im) {
  const Ints x = {2, 4, 5, 5};
  for (const Attrs& attrs :
       {Attrs{{"strides", Ints{2, 2}}, {"output_shape", Ints{10, 11}}},
        Attrs{{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}},
        Attrs{{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}}) {
    Function before = ConvTranspose(x, 3, 3, 3, true, attrs);
    Function after = Rewritten(before);
    EXPECT_EQ(CountOps(after, "conv_transpose"), 0) << Print(after);
    EXPECT_EQ(CountOps(after, "col2im_nhwc"), 1);
    ExpectSameValues(before, after, x);
  }
}

// Groups, an output_shape past the full scatter (a negative begin pad), a weight that is not a
// constant, a symbolic batch: the op stays.
TEST(ConvTransposeAsMatmul, OthersStay) {
  const Ints x = {1, 4, 5, 5};
  Function past = Rewritten(ConvTranspose(
      x, 4, 3, 3, true, Attrs{{"strides", Ints{2, 2}}, {"output_shape", Ints{13, 13}}}));
  EXPECT_EQ(CountOps(past, "conv_transpose"), 1) << Print(past);
  Var g = MakeVar("x", TensorType(ShapeFromInts(x), DType::kFloat32));
  Function grouped = MakeFunction(
      {g},
      MakeCall(
          "conv_transpose", {g, MakeConstant(RandomTensor(DType::kFloat32, {4, 2, 2, 2}, 3))},
          Attrs{{"strides", Ints{2, 2}}, {"group", int64_t{2}}, {"kernel_shape", Ints{2, 2}}}));
  EXPECT_EQ(CountOps(Rewritten(grouped), "conv_transpose"), 1);
  Var v = MakeVar("x", TensorType(ShapeFromInts(x), DType::kFloat32));
  Var w = MakeVar("w", TensorType({4, 3, 2, 2}, DType::kFloat32));
  Function variable_weight =
      MakeFunction({v, w}, MakeCall("conv_transpose", {v, w},
                                    Attrs{{"strides", Ints{2, 2}}, {"kernel_shape", Ints{2, 2}}}));
  EXPECT_EQ(CountOps(Rewritten(variable_weight), "conv_transpose"), 1);
}

// Over a symbolic batch and image size (a shape-generic kernel): square windows that tile the
// output become the product and depth_to_space (CRD), the same values at any size; oblong or
// overlapping windows stay (their reshuffle or col2im needs the size).
TEST(ConvTransposeAsMatmul, AnyImageSizeTakesDepthToSpace) {
  const Shape any = {Dim::Symbol("n"), 4, Dim::Symbol("h"), Dim::Symbol("w")};
  auto transposed = [&](int64_t kh, int64_t kw, Attrs attrs, bool bias) {
    Var x = MakeVar("x", TensorType(any, DType::kFloat32));
    std::vector<Expr> args = {x, MakeConstant(RandomTensor(DType::kFloat32, {4, 3, kh, kw}, 3))};
    if (bias) args.push_back(MakeConstant(RandomTensor(DType::kFloat32, {3}, 4)));
    attrs.Set("kernel_shape", Ints{kh, kw});
    return MakeFunction({x}, MakeCall("conv_transpose", args, attrs));
  };
  for (int64_t k : {2, 3}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(StrCat("k ", k, bias ? " with a bias" : ""));
      Function before = transposed(k, k, {{"strides", Ints{k, k}}}, bias);
      Function after = Rewritten(before);
      EXPECT_EQ(CountOps(after, "conv_transpose"), 0) << Print(after);
      EXPECT_EQ(CountOps(after, "matmul"), 1);
      EXPECT_EQ(CountOps(after, "depth_to_space"), 1);
      EXPECT_EQ(TypeToString(after->body->type), StrCat("f32[n, 3, h * ", k, ", w * ", k, "]"));
      for (const Ints& shape : {Ints{1, 4, 1, 1}, Ints{2, 4, 3, 5}, Ints{1, 4, 7, 2}})
        ExpectSameValues(before, after, shape);
    }
  }
  EXPECT_EQ(
      CountOps(Rewritten(transposed(2, 3, {{"strides", Ints{2, 3}}}, true)), "conv_transpose"), 1);
  EXPECT_EQ(
      CountOps(Rewritten(transposed(3, 3, {{"strides", Ints{2, 2}}}, true)), "conv_transpose"), 1);
}

}  // namespace
}  // namespace kiln
