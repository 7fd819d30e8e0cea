// TrimConvTaps: which convs lose edge taps (those that only read padding) and to what kernel and
// pads, which stay, and the reference interpreter computing the same values before and after:
// one-row images, small images under 5x5 depthwise windows, strides, dilations, SAME padding,
// 1-D convs, f64, with and without a bias.
#include <gtest/gtest.h>

#include <string>

#include "common/kernel_test_util.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using test::RandomTensor;

Function Trimmed(const Function& fn) {
  IRModule m({{"main", InferTypes(fn)}});
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  return InferTypes((*ParsePipeline("TrimConvTaps"))(m)).Lookup("main");
}

// conv of x (shape `x_shape`, symbolic where `sym` names a dim) by a random constant weight
// [m, c / group, *kernel] and bias, with `attrs`.
Function Conv(const Shape& x_shape, int64_t m, const Ints& kernel, bool bias, Attrs attrs,
              DType dtype = DType::kFloat32) {
  Var x = MakeVar("x", TensorType(x_shape, dtype));
  const int64_t group = attrs.Has("group") ? attrs.GetInt("group") : 1;
  Ints ws = {m, x_shape[1].value() / group};
  ws.insert(ws.end(), kernel.begin(), kernel.end());
  std::vector<Expr> args = {x, MakeConstant(RandomTensor(dtype, ws, 3))};
  if (bias) args.push_back(MakeConstant(RandomTensor(dtype, {m}, 4)));
  attrs.Set("kernel_shape", kernel);
  return MakeFunction({x}, MakeCall("conv", args, attrs));
}

const CallNode* TheConv(const Function& fn) {
  for (const Expr& e : PostOrder(fn->body))
    if (const CallNode* c = AsCall(e); c && c->op && c->op->name == "conv") return c;
  return nullptr;
}

void ExpectSameValues(const Function& before, const Function& after, const Ints& shape,
                      DType dtype = DType::kFloat32) {
  std::vector<Tensor> in = {RandomTensor(dtype, shape, 7)};
  std::vector<Tensor> want = Interpret(InferTypes(before), in), got = Interpret(after, in);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_TRUE(test::TensorsNear(got[0], want[0], 1e-5, 1e-5));
}

TEST(TrimConvTaps, EdgeTapsThatOnlyReadPaddingGo) {
  struct Case {
    std::string what;
    Ints x;
    int64_t m;
    Ints kernel;
    Attrs attrs;
    Ints want_kernel, want_pads;
  };
  const Case cases[] = {
      {"3x3 over one row",
       {1, 16, 1, 40},
       8,
       {3, 3},
       {{"pads", Ints{1, 1, 1, 1}}},
       {1, 3},
       {0, 1, 0, 1}},
      {"5x5 depthwise over 2 x 6",
       {2, 12, 2, 6},
       12,
       {5, 5},
       {{"pads", Ints{2, 2, 2, 2}}, {"group", int64_t{12}}},
       {3, 5},
       {1, 2, 1, 2}},
      {"5x5 over 1 x 1",
       {1, 7, 1, 1},
       5,
       {5, 5},
       {{"pads", Ints{2, 2, 2, 2}}},
       {1, 1},
       {0, 0, 0, 0}},
      {"stride 2 over one row",
       {1, 4, 1, 9},
       3,
       {3, 3},
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
       {1, 3},
       {0, 1, 0, 1}},
      {"dilation 2 over 2 rows",
       {1, 4, 2, 7},
       3,
       {3, 3},
       {{"pads", Ints{2, 2, 2, 2}}, {"dilations", Ints{2, 2}}},
       {1, 3},
       {0, 2, 0, 2}},
      {"SAME_UPPER over one row",
       {1, 6, 1, 10},
       4,
       {3, 3},
       {{"auto_pad", std::string("SAME_UPPER")}},
       {1, 3},
       {0, 1, 0, 1}},
      {"1-D over one position", {2, 5, 1}, 3, {3}, {{"pads", Ints{1, 1}}}, {1}, {0, 0}},
      {"uneven pads", {1, 4, 2, 5}, 2, {3, 3}, {{"pads", Ints{2, 1, 0, 1}}}, {2, 3}, {1, 1, 0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    for (bool bias : {false, true}) {
      Function before = Conv(ShapeFromInts(c.x), c.m, c.kernel, bias, c.attrs);
      Function after = Trimmed(before);
      const CallNode* conv = TheConv(after);
      ASSERT_NE(conv, nullptr);
      EXPECT_EQ(conv->attrs.GetInts("kernel_shape"), c.want_kernel);
      EXPECT_EQ(conv->attrs.GetInts("pads"), c.want_pads);
      EXPECT_EQ(conv->attrs.GetString("auto_pad"), "NOTSET");
      ExpectSameValues(before, after, c.x);
    }
  }
}

TEST(TrimConvTaps, F64WeightsAreSlicedToo) {
  Function before = Conv(ShapeFromInts({1, 3, 1, 6}), 2, {3, 3}, true, {{"pads", Ints{1, 1, 1, 1}}},
                         DType::kFloat64);
  Function after = Trimmed(before);
  ASSERT_NE(TheConv(after), nullptr);
  EXPECT_EQ(TheConv(after)->attrs.GetInts("kernel_shape"), (Ints{1, 3}));
  ExpectSameValues(before, after, {1, 3, 1, 6}, DType::kFloat64);
}

TEST(TrimConvTaps, ConvsWhoseTapsAllReadTheImageStay) {
  struct Case {
    std::string what;
    Shape x;
    Ints kernel;
    Attrs attrs;
  };
  const Case cases[] = {
      {"3x3 over 5 x 5", ShapeFromInts({1, 4, 5, 5}), {3, 3}, {{"pads", Ints{1, 1, 1, 1}}}},
      {"no padding", ShapeFromInts({1, 4, 3, 3}), {3, 3}, {}},
      {"symbolic rows",
       Shape{Dim(1), Dim(4), Dim::Symbol("h"), Dim(7)},
       {3, 3},
       {{"pads", Ints{1, 1, 1, 1}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Function before = Conv(c.x, 3, c.kernel, true, c.attrs);
    Function after = Trimmed(before);  // holds the conv TheConv points into
    const CallNode* conv = TheConv(after);
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->attrs.GetInts("kernel_shape"), c.kernel);
  }
}

}  // namespace
}  // namespace kiln
