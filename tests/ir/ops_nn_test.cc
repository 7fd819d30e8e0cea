// The nn ops (conv, conv_transpose, max_pool, max_pool_with_indices, max_unpool, avg_pool, global
// pools, pad): type relations on concrete and symbolic shapes (auto_pad, ceil_mode, output_shape
// and output_padding included), errors with their messages, and the reference kernels against
// small hand-computed examples.
#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <optional>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Floats;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

using Ints = std::vector<int64_t>;

// ---- type relations ----

TEST(Conv, Shapes) {
  Type x = F32({1, 1, 5, 5});
  Type w = F32({1, 1, 3, 3});
  EXPECT_EQ(Infer("conv", {x, w}), "f32[1, 1, 3, 3]");
  EXPECT_EQ(Infer("conv", {x, w}, {{"pads", Ints{1, 1, 1, 1}}}), "f32[1, 1, 5, 5]");
  EXPECT_EQ(Infer("conv", {x, w}, {{"pads", Ints{1, 0, 1, 0}}, {"strides", Ints{2, 2}}}),
            "f32[1, 1, 3, 2]");
  EXPECT_EQ(Infer("conv", {x, w}, {{"dilations", Ints{2, 2}}}), "f32[1, 1, 1, 1]");
  EXPECT_EQ(Infer("conv", {x, w}, {{"auto_pad", std::string("VALID")}}), "f32[1, 1, 3, 3]");
  // SAME: out = ceil(in / stride), whatever the kernel.
  for (const char* same : {"SAME_UPPER", "SAME_LOWER"}) {
    EXPECT_EQ(Infer("conv", {x, w}, {{"auto_pad", std::string(same)}}), "f32[1, 1, 5, 5]");
    EXPECT_EQ(Infer("conv", {x, w}, {{"auto_pad", std::string(same)}, {"strides", Ints{2, 2}}}),
              "f32[1, 1, 3, 3]");
  }
  // 1-D and 3-D, groups, bias.
  EXPECT_EQ(Infer("conv", {F32({2, 4, 7}), F32({6, 2, 3}), F32({6})}, {{"group", int64_t{2}}}),
            "f32[2, 6, 5]");
  EXPECT_EQ(Infer("conv", {F32({1, 2, 4, 5, 6}), F32({3, 2, 1, 2, 3})}), "f32[1, 3, 4, 4, 4]");
  EXPECT_EQ(Infer("conv",
                  {TensorType({1, 1, 4}, DType::kFloat64), TensorType({1, 1, 2}, DType::kFloat64)}),
            "f64[1, 1, 3]");
}

TEST(Conv, SymbolicBatch) {
  EXPECT_EQ(
      Infer("conv", {F32({S("n"), 3, 8, 8}), F32({4, 3, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}}),
      "f32[n, 4, 8, 8]");
  EXPECT_EQ(Infer("conv", {F32({1, 3, S("h"), 8}), F32({4, 3, 3, 3})},
                  {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}),
            "f32[1, 4, (h - 1) // 2 + 1, 4]");
}

// The output size of a symbolic spatial dim, bound to a size, is the size the relation gives
// for that size as a constant: every attribute combination, every size from 1 to 40 where the
// constant one is valid.
void ExpectSymbolicSizesBindAsConstants(const std::string& op, int64_t channels,
                                        const std::vector<Type>& rest, const Attrs& attrs) {
  const Type sym = InferOpType(
      op,
      [&] {
        std::vector<Type> a{F32({1, channels, S("h")})};
        a.insert(a.end(), rest.begin(), rest.end());
        return a;
      }(),
      attrs);
  const Dim out = AsTensor(sym)->shape[2];
  for (int64_t h = 1; h <= 40; ++h) {
    std::vector<Type> a{F32({1, channels, h})};
    a.insert(a.end(), rest.begin(), rest.end());
    std::optional<Type> want;
    try {
      want = InferOpType(op, a, attrs);
    } catch (const Error&) {
      continue;  // too small for the window: no size to compare
    }
    EXPECT_EQ(out.TryEval({{"h", h}}), AsTensor(*want)->shape[2].value())
        << op << " h = " << h << " out = " << out.ToString();
  }
}

TEST(Window, SymbolicSizesBindAsConstants) {
  for (int64_t k : {1, 2, 3, 5})
    for (int64_t stride : {1, 2, 3})
      for (int64_t dil : {1, 2})
        for (auto [pb, pe] : {std::pair<int64_t, int64_t>{0, 0}, {1, 1}, {0, 1}, {2, 1}}) {
          Attrs a = {{"strides", Ints{stride}}, {"dilations", Ints{dil}}, {"pads", Ints{pb, pe}}};
          ExpectSymbolicSizesBindAsConstants("conv", 2, {F32({3, 2, k})}, a);
          a.Set("kernel_shape", Ints{k});
          ExpectSymbolicSizesBindAsConstants("avg_pool", 2, {}, a);
          if (pe < (k - 1) * dil + 1) {
            a.Set("ceil_mode", true);
            ExpectSymbolicSizesBindAsConstants("max_pool", 2, {}, a);
          }
        }
  for (const char* pad : {"SAME_UPPER", "SAME_LOWER", "VALID"})
    for (int64_t stride : {1, 2, 3})
      ExpectSymbolicSizesBindAsConstants(
          "max_pool", 2, {},
          {{"kernel_shape", Ints{3}}, {"strides", Ints{stride}}, {"auto_pad", std::string(pad)}});
  // ceil_mode with an end pad as wide as the window has no one-expression size.
  EXPECT_THAT(InferError("max_pool", {F32({1, 1, S("w")})},
                         {{"kernel_shape", Ints{2}}, {"pads", Ints{0, 2}}, {"ceil_mode", true}}),
              HasSubstr("needs constant spatial dims"));
}

TEST(Conv, Errors) {
  Type x = F32({1, 4, 5, 5});
  EXPECT_THAT(InferError("conv", {x, F32({2, 3, 3, 3})}),
              HasSubstr("input channels [1, 4, 5, 5] must be group (1) x the weight's dim 1"));
  EXPECT_THAT(InferError("conv", {x, F32({3, 2, 3, 3})}, {{"group", int64_t{2}}}),
              HasSubstr("output channels 3 are not divisible by group 2"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3})}), HasSubstr("must have the input's rank 4"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})}, {{"pads", Ints{1, 1}}}),
              HasSubstr("pads [1, 1] must have 4 values"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})}, {{"strides", Ints{1}}}),
              HasSubstr("strides [1] must have 2 values"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})}, {{"strides", Ints{0, 1}}}),
              HasSubstr("stride 0 and dilation 1 must be positive"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 7, 3})}),
              HasSubstr("the effective kernel 7 is larger than the padded input 5"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})}, {{"kernel_shape", Ints{2, 2}}}),
              HasSubstr("kernel_shape [2, 2] does not match the weight [2, 4, 3, 3]"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3}), F32({3})}),
              HasSubstr("bias [3] must have the weight's M"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})},
                         {{"auto_pad", std::string("SAME_UPPER")}, {"pads", Ints{1, 1, 1, 1}}}),
              HasSubstr("explicit pads [1, 1, 1, 1] conflict with auto_pad SAME_UPPER"));
  EXPECT_THAT(InferError("conv", {x, F32({2, 4, 3, 3})}, {{"auto_pad", std::string("SAME")}}),
              HasSubstr("must be NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  EXPECT_THAT(InferError("conv", {F32({4, 5}), F32({2, 4})}),
              HasSubstr("input must be [N, C, *spatial] with 1 to 3 spatial dims"));
  EXPECT_THAT(InferError("conv", {TensorType({1, 1, 4}, DType::kInt32),
                                  TensorType({1, 1, 2}, DType::kInt32)}),
              HasSubstr("input must be a float tensor"));
  EXPECT_THAT(InferError("conv", {x, TensorType({2, 4, 3, 3}, DType::kFloat64)}),
              HasSubstr("weight dtype f64 differs from the input's f32"));
}

TEST(ConvTranspose, Shapes) {
  // Per spatial dim: out = stride * (in - 1) + output_padding + ek - pad_begin - pad_end.
  Type x = F32({1, 1, 3, 3});
  Type w = F32({1, 2, 3, 3});
  EXPECT_EQ(Infer("conv_transpose", {x, w}), "f32[1, 2, 5, 5]");
  EXPECT_EQ(Infer("conv_transpose", {x, w}, {{"strides", Ints{3, 2}}}), "f32[1, 2, 9, 7]");
  EXPECT_EQ(
      Infer("conv_transpose", {x, w}, {{"strides", Ints{3, 2}}, {"output_padding", Ints{1, 1}}}),
      "f32[1, 2, 10, 8]");
  EXPECT_EQ(Infer("conv_transpose", {x, w}, {{"pads", Ints{1, 2, 1, 2}}}), "f32[1, 2, 3, 1]");
  EXPECT_EQ(Infer("conv_transpose", {x, w}, {{"dilations", Ints{2, 2}}}), "f32[1, 2, 7, 7]");
  // output_shape wins over the pads (here it needs negative ones); SAME_* gives in * stride.
  EXPECT_EQ(
      Infer("conv_transpose", {x, w},
            {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}, {"pads", Ints{1, 1, 1, 1}}}),
      "f32[1, 2, 10, 8]");
  for (const char* same : {"SAME_UPPER", "SAME_LOWER"}) {
    EXPECT_EQ(
        Infer("conv_transpose", {x, w}, {{"auto_pad", std::string(same)}, {"strides", Ints{2, 2}}}),
        "f32[1, 2, 6, 6]");
    EXPECT_EQ(Infer("conv_transpose", {x, w},
                    {{"auto_pad", std::string(same)}, {"output_shape", Ints{4, 7}}}),
              "f32[1, 2, 4, 7]");
  }
  EXPECT_EQ(Infer("conv_transpose", {x, w},
                  {{"auto_pad", std::string("VALID")}, {"strides", Ints{2, 2}}}),
            "f32[1, 2, 7, 7]");
  // 1-D with groups and bias (M = group x the weight's dim 1), 3-D, f64.
  EXPECT_EQ(
      Infer("conv_transpose", {F32({2, 4, 5}), F32({4, 3, 2}), F32({6})}, {{"group", int64_t{2}}}),
      "f32[2, 6, 6]");
  EXPECT_EQ(Infer("conv_transpose", {F32({1, 1, 2, 3, 4}), F32({1, 1, 2, 2, 2})}),
            "f32[1, 1, 3, 4, 5]");
  EXPECT_EQ(Infer("conv_transpose",
                  {TensorType({1, 1, 4}, DType::kFloat64), TensorType({1, 3, 2}, DType::kFloat64)}),
            "f64[1, 3, 5]");
  EXPECT_EQ(Infer("conv_transpose", {F32({1, 2, 3}), F32({2, 1, 2})}, {{"kernel_shape", Ints{2}}}),
            "f32[1, 1, 4]");
}

TEST(ConvTranspose, SymbolicBatch) {
  EXPECT_EQ(Infer("conv_transpose", {F32({S("n"), 3, 4, 4}), F32({3, 2, 3, 3})},
                  {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
            "f32[n, 2, 7, 7]");
  EXPECT_EQ(Infer("conv_transpose", {F32({1, S("c"), 4}), F32({S("c"), 2, 3})}), "f32[1, 2, 6]");
}

// Symbolic image sizes give output sizes that are expressions of them (the full size less the
// pads, in * stride with SAME), or output_shape's constants.
TEST(ConvTranspose, SymbolicSpatialDims) {
  const Type x = F32({S("n"), 3, S("h"), S("w")});
  const Type w = F32({3, 2, 3, 3});
  // 2 * (h - 1) + 1 + 3 - 2 = 2h.
  EXPECT_EQ(
      Infer("conv_transpose", {x, w},
            {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}),
      "f32[n, 2, h * 2, w * 2]");
  EXPECT_EQ(Infer("conv_transpose", {x, w}), "f32[n, 2, h + 2, w + 2]");
  EXPECT_EQ(Infer("conv_transpose", {x, w},
                  {{"strides", Ints{3, 1}}, {"auto_pad", std::string("SAME_UPPER")}}),
            "f32[n, 2, h * 3, w]");
  EXPECT_EQ(Infer("conv_transpose", {F32({1, 3, S("h"), 4}), w},
                  {{"strides", Ints{2, 2}}, {"output_shape", Ints{10, 9}}}),
            "f32[1, 2, 10, 9]");
  // Bad attributes still fail at load time.
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"strides", Ints{0, 1}}}),
              HasSubstr("must be positive"));
}

TEST(ConvTranspose, Errors) {
  Type x = F32({1, 4, 5, 5});
  Type w = F32({4, 2, 3, 3});
  EXPECT_THAT(InferError("conv_transpose", {x, F32({3, 2, 3, 3})}),
              HasSubstr("input channels [1, 4, 5, 5] must equal the weight's dim 0 [3, 2, 3, 3]"));
  EXPECT_THAT(
      InferError("conv_transpose", {F32({1, 3, 5}), F32({3, 1, 3})}, {{"group", int64_t{2}}}),
      HasSubstr("input channels 3 are not divisible by group 2"));
  EXPECT_THAT(InferError("conv_transpose", {x, F32({4, 2, 3})}),
              HasSubstr("must have the input's rank 4 ([C, M/group, *kernel])"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"output_shape", Ints{5}}}),
              HasSubstr("output_shape [5] must have 2 values"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"output_padding", Ints{1}}}),
              HasSubstr("output_padding [1] must have 2 values"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"output_padding", Ints{-1, 0}}}),
              HasSubstr("must not be negative"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"pads", Ints{1, 1}}}),
              HasSubstr("pads [1, 1] must have 4 values"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"strides", Ints{1, 0}}}),
              HasSubstr("stride 0 and dilation 1 must be positive"));
  EXPECT_THAT(
      InferError("conv_transpose", {F32({1, 1, 3}), F32({1, 1, 2})}, {{"pads", Ints{2, 2}}}),
      HasSubstr("spatial dim 0: the output size 0 is not positive (full size 4, pads 2, 2)"));
  EXPECT_THAT(InferError("conv_transpose", {F32({1, 4, 5}), F32({4, 3, 2}), F32({3})},
                         {{"group", int64_t{2}}}),
              HasSubstr("bias [3] must have the output channels M = group (2) x the weight's dim 1 "
                        "[4, 3, 2]"));
  EXPECT_THAT(InferError("conv_transpose", {x, w}, {{"kernel_shape", Ints{2, 2}}}),
              HasSubstr("kernel_shape [2, 2] does not match the weight [4, 2, 3, 3]"));
  EXPECT_THAT(InferError("conv_transpose", {x, w},
                         {{"auto_pad", std::string("SAME_LOWER")}, {"pads", Ints{1, 0, 0, 0}}}),
              HasSubstr("explicit pads [1, 0, 0, 0] conflict with auto_pad SAME_LOWER"));
  EXPECT_THAT(InferError("conv_transpose", {TensorType({1, 1, 4}, DType::kInt32),
                                            TensorType({1, 1, 2}, DType::kInt32)}),
              HasSubstr("input must be a float tensor"));
  EXPECT_THAT(InferError("conv_transpose", {x, TensorType({4, 2, 3, 3}, DType::kFloat64)}),
              HasSubstr("weight dtype f64 differs from the input's f32"));
}

TEST(Pool, Shapes) {
  Attrs k3s2 = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}};
  Type x = F32({1, 2, 4, 4});
  EXPECT_EQ(Infer("max_pool", {x}, k3s2), "f32[1, 2, 1, 1]");
  Attrs ceil = k3s2;
  ceil.Set("ceil_mode", true);
  EXPECT_EQ(Infer("max_pool", {x}, ceil), "f32[1, 2, 2, 2]");
  EXPECT_EQ(Infer("avg_pool", {x}, ceil), "f32[1, 2, 2, 2]");
  // ceil_mode drops a last window that would start in the end padding: in 5, k 2, s 2, pads 1
  // gives ceil(5 / 2) + 1 = 4 windows, the last starting at 6 >= 5 + 1.
  Attrs drop = {
      {"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}, {"ceil_mode", true}};
  EXPECT_EQ(Infer("max_pool", {F32({1, 1, 5})}, drop), "f32[1, 1, 3]");
  // auto_pad.
  Attrs same = {
      {"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"auto_pad", std::string("SAME_LOWER")}};
  EXPECT_EQ(Infer("avg_pool", {F32({1, 1, 5})}, same), "f32[1, 1, 3]");
  same.Set("auto_pad", std::string("VALID"));
  EXPECT_EQ(Infer("avg_pool", {F32({1, 1, 5})}, same), "f32[1, 1, 2]");
  // Dilations, 3-D, symbolic batch and channels.
  EXPECT_EQ(
      Infer("max_pool", {F32({1, 1, 7})}, {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}}),
      "f32[1, 1, 3]");
  EXPECT_EQ(Infer("max_pool", {F32({S("n"), S("c"), 4, 6, 8})}, {{"kernel_shape", Ints{2, 2, 2}}}),
            "f32[n, c, 3, 5, 7]");
}

TEST(Pool, IntegerMax) {
  Attrs k2 = {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 0}}};
  for (DType t : {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kInt64})
    EXPECT_EQ(Infer("max_pool", {TensorType({S("n"), 2, 5}, t)}, k2),
              StrCat(DTypeName(t), "[n, 2, 5]"));
  EXPECT_THAT(InferError("max_pool", {TensorType({1, 1, 4}, DType::kBool)}, k2),
              HasSubstr("input must be a float or integer tensor, got bool[1, 1, 4]"));
  // A mean would round: avg_pool stays float-only.
  EXPECT_THAT(InferError("avg_pool", {TensorType({1, 1, 4}, DType::kInt32)}, k2),
              HasSubstr("input must be a float tensor"));
}

TEST(Pool, Errors) {
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("max_pool", {F32({1, 1, 4, 4})});
              }),
              HasSubstr("kernel_shape"));
  EXPECT_THAT(
      InferError("max_pool", {F32({1, 1, 4, 4})}, {{"kernel_shape", Ints{2}}}),
      HasSubstr("kernel_shape [2] must have 2 values (one per spatial dim of [1, 1, 4, 4])"));
  EXPECT_THAT(InferError("avg_pool", {F32({1, 1, 4})}, {{"kernel_shape", Ints{5}}}),
              HasSubstr("the effective kernel 5 is larger than the padded input 4"));
  EXPECT_THAT(
      InferError("avg_pool", {F32({1, 1, 4})}, {{"kernel_shape", Ints{2}}, {"pads", Ints{-1, 0}}}),
      HasSubstr("must not be negative"));
  EXPECT_EQ(Infer("max_pool", {F32({1, 1, S("w")})}, {{"kernel_shape", Ints{2}}}),
            "f32[1, 1, w - 1]");
}

TEST(MaxPoolWithIndices, Shapes) {
  Attrs k3s2 = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  EXPECT_EQ(Infer("max_pool_with_indices", {F32({S("n"), 2, 5, 4})}, k3s2),
            "(f32[n, 2, 3, 2], i64[n, 2, 3, 2])");
  k3s2.Set("storage_order", int64_t{1});
  EXPECT_EQ(Infer("max_pool_with_indices", {TensorType({1, 3, 7}, DType::kUInt8)},
                  {{"kernel_shape", Ints{2}}, {"ceil_mode", true}, {"strides", Ints{2}}}),
            "(u8[1, 3, 4], i64[1, 3, 4])");
  EXPECT_EQ(
      Infer("max_pool_with_indices", {F32({1, 1, 4, 4, 4})}, {{"kernel_shape", Ints{2, 2, 2}}}),
      "(f32[1, 1, 3, 3, 3], i64[1, 1, 3, 3, 3])");
}

TEST(MaxPoolWithIndices, Errors) {
  EXPECT_THAT(InferError("max_pool_with_indices", {F32({1, 1, 4})},
                         {{"kernel_shape", Ints{2}}, {"storage_order", int64_t{2}}}),
              HasSubstr("must be 0 (row major) or 1 (column major), got 2"));
  EXPECT_THAT(InferError("max_pool_with_indices", {TensorType({1, 1, 4}, DType::kBool)},
                         {{"kernel_shape", Ints{2}}}),
              HasSubstr("input must be a float or integer tensor, got bool[1, 1, 4]"));
  EXPECT_THAT(InferError("max_pool_with_indices", {F32({1, 1, 4, 4})}, {{"kernel_shape", Ints{2}}}),
              HasSubstr("kernel_shape [2] must have 2 values"));
  // max_pool keeps its single output and has no storage_order.
  EXPECT_EQ(Infer("max_pool", {F32({1, 1, 4})}, {{"kernel_shape", Ints{2}}}), "f32[1, 1, 3]");
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("max_pool", {F32({1, 1, 4})},
                            {{"kernel_shape", Ints{2}}, {"storage_order", int64_t{1}}});
              }),
              HasSubstr("storage_order"));
}

TEST(MaxUnpool, Shapes) {
  const Type i64 = TensorType({1, 1, 2, 2}, DType::kInt64);
  Attrs k2s2 = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  EXPECT_EQ(Infer("max_unpool", {F32({1, 1, 2, 2}), i64}, k2s2), "f32[1, 1, 4, 4]");
  // Per spatial dim (in - 1) * stride + kernel - pad_begin - pad_end.
  Attrs padded = k2s2;
  padded.Set("pads", Ints{1, 0, 0, 1});
  EXPECT_EQ(Infer("max_unpool", {F32({1, 1, 2, 2}), i64}, padded), "f32[1, 1, 3, 3]");
  // output_shape is the whole shape; the pads are then ignored.
  padded.Set("output_shape", Ints{1, 1, 5, 4});
  EXPECT_EQ(Infer("max_unpool", {F32({1, 1, 2, 2}), i64}, padded), "f32[1, 1, 5, 4]");
  EXPECT_EQ(
      Infer("max_unpool",
            {TensorType({S("n"), 3, 5}, DType::kInt32), TensorType({S("n"), 3, 5}, DType::kInt64)},
            {{"kernel_shape", Ints{3}}}),
      "i32[n, 3, 7]");
  EXPECT_EQ(Infer("max_unpool",
                  {TensorType({1, 2, 2, 3, 1}, DType::kFloat64),
                   TensorType({1, 2, 2, 3, 1}, DType::kInt64)},
                  {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 1, 3}}}),
            "f64[1, 2, 4, 4, 2]");
}

// Symbolic image sizes: (in - 1) * stride + kernel - pads as an expression of in, or
// output_shape's constants; output_shape smaller than any input's unpooled size still fails.
TEST(MaxUnpool, SymbolicSpatialDims) {
  const Type x = F32({S("n"), 2, S("h"), S("w")});
  const Type i = TensorType({S("n"), 2, S("h"), S("w")}, DType::kInt64);
  Attrs k3s2 = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}};
  EXPECT_EQ(Infer("max_unpool", {x, i}, k3s2), "f32[n, 2, h * 2, w * 2]");
  EXPECT_EQ(Infer("max_unpool", {x, i}, {{"kernel_shape", Ints{2, 3}}}), "f32[n, 2, h + 1, w + 2]");
  Attrs shaped = k3s2;
  shaped.Set("output_shape", Ints{1, 2, 9, 8});
  EXPECT_EQ(Infer("max_unpool", {x, i}, shaped), "f32[n, 2, 9, 8]");
  shaped.Set("output_shape", Ints{1, 2, 2, 8});
  EXPECT_THAT(InferError("max_unpool", {x, i}, shaped),
              HasSubstr("spatial dim 0 is smaller than the unpooled size"));
}

TEST(MaxUnpool, Errors) {
  const Type x = F32({1, 2, 2, 2});
  const Type i = TensorType({1, 2, 2, 2}, DType::kInt64);
  const Attrs k2 = {{"kernel_shape", Ints{2, 2}}};
  EXPECT_THAT(InferError("max_unpool", {x, TensorType({1, 2, 2, 2}, DType::kInt32)}, k2),
              HasSubstr("indices must be an i64 tensor of x's shape [1, 2, 2, 2], got i32"));
  EXPECT_THAT(InferError("max_unpool", {x, TensorType({1, 2, 2, 3}, DType::kInt64)}, k2),
              HasSubstr("indices [1, 2, 2, 3] must have x's shape [1, 2, 2, 2]"));
  EXPECT_THAT(InferError("max_unpool", {x, i}, {{"kernel_shape", Ints{2}}}),
              HasSubstr("kernel_shape [2] must have 2 values"));
  EXPECT_THAT(
      InferError("max_unpool", {x, i}, {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1}}}),
      HasSubstr("pads [1, 1] must have 4 values"));
  EXPECT_THAT(
      InferError("max_unpool", {x, i}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{0, 1}}}),
      HasSubstr("spatial dim 0: input 2, kernel 2 and stride 0 must be positive"));
  EXPECT_THAT(InferError("max_unpool", {F32({1, 1, 1}), TensorType({1, 1, 1}, DType::kInt64)},
                         {{"kernel_shape", Ints{1}}, {"pads", Ints{1, 0}}}),
              HasSubstr("the output size (1 - 1) * 1 + 1 - 1 - 0 = 0 is not positive"));
  Attrs shaped = k2;
  shaped.Set("output_shape", Ints{3, 3});
  EXPECT_THAT(InferError("max_unpool", {x, i}, shaped),
              HasSubstr("output_shape [3, 3] must have 4 values (the whole output shape"));
  shaped.Set("output_shape", Ints{1, 3, 3, 3});
  EXPECT_THAT(InferError("max_unpool", {x, i}, shaped),
              HasSubstr("output_shape [1, 3, 3, 3] must keep the batch and channels"));
  shaped.Set("output_shape", Ints{1, 2, 3, 2});
  EXPECT_THAT(InferError("max_unpool", {x, i}, shaped),
              HasSubstr("spatial dim 1 is smaller than the unpooled size (2 - 1) * 1 + 2 = 3"));
  EXPECT_THAT(
      InferError("max_unpool",
                 {TensorType({1, 1, 2}, DType::kBool), TensorType({1, 1, 2}, DType::kInt64)},
                 {{"kernel_shape", Ints{2}}}),
      HasSubstr("input must be a float or integer tensor"));
  EXPECT_THAT(ErrorMessage([&] { InferOpType("max_unpool", {x, i}); }), HasSubstr("kernel_shape"));
}

TEST(GlobalPool, Shapes) {
  EXPECT_EQ(Infer("global_avg_pool", {F32({S("n"), 3, 7, 7})}), "f32[n, 3, 1, 1]");
  EXPECT_EQ(Infer("global_max_pool", {F32({2, 3, S("w")})}), "f32[2, 3, 1]");
  EXPECT_THAT(InferError("global_max_pool", {F32({2, 3})}), HasSubstr("at least one spatial dim"));
  EXPECT_THAT(InferError("global_avg_pool", {TensorType({1, 1, 2}, DType::kInt64)}),
              HasSubstr("input must be a float tensor"));
}

TEST(Pad, Shapes) {
  EXPECT_EQ(Infer("pad", {F32({2, 3})}, {{"pads", Ints{1, 0, 2, 3}}}), "f32[5, 6]");
  EXPECT_EQ(Infer("pad", {F32({2, 3})}, {{"pads", Ints{0, -1, 0, -1}}}), "f32[2, 1]");
  EXPECT_EQ(Infer("pad", {F32({S("n"), 3})}, {{"pads", Ints{1, 1, 1, 1}}}), "f32[n + 2, 5]");
  EXPECT_EQ(Infer("pad", {TensorType({4}, DType::kInt32)},
                  {{"pads", Ints{1, 2}}, {"mode", std::string("reflect")}}),
            "i32[7]");
}

TEST(Pad, Errors) {
  EXPECT_THAT(InferError("pad", {F32({2, 3})}, {{"pads", Ints{1, 1}}}),
              HasSubstr("pads [1, 1] must have 4 values"));
  EXPECT_THAT(InferError("pad", {F32({2})}, {{"pads", Ints{-2, -1}}}),
              HasSubstr("crop axis 0 of [2] below size 0"));
  EXPECT_THAT(
      InferError("pad", {F32({3})}, {{"pads", Ints{3, 0}}, {"mode", std::string("reflect")}}),
      HasSubstr("reflect mode pads 3, 0 of axis 0 of [3] must be smaller than its size"));
  EXPECT_THAT(InferError("pad", {F32({0})}, {{"pads", Ints{1, 0}}, {"mode", std::string("edge")}}),
              HasSubstr("edge mode cannot pad the empty axis 0"));
  EXPECT_THAT(
      InferError("pad", {F32({S("n")})}, {{"pads", Ints{1, 0}}, {"mode", std::string("edge")}}),
      HasSubstr("axis 0 of [n] is symbolic"));
  EXPECT_THAT(InferError("pad", {F32({2})}, {{"pads", Ints{1, 0}}, {"mode", std::string("wrap")}}),
              HasSubstr("must be constant, reflect or edge"));
}

// ---- reference kernels ----

TEST(ConvRef, TwoDimensional) {
  Tensor x = Floats({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = Floats({1, 1, 2, 2}, {1, 1, 1, 1});
  EXPECT_TRUE(TensorsNear(RunOne("conv", {x, w}), Floats({1, 1, 2, 2}, {12, 16, 24, 28})));
  // A 3x3 ones kernel with pads 1 sums each 3x3 neighbourhood; stride 2 keeps the corners.
  Tensor w3 = Floats({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  EXPECT_TRUE(
      TensorsNear(RunOne("conv", {x, w3}, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}),
                  Floats({1, 1, 2, 2}, {12, 16, 24, 28})));
  EXPECT_TRUE(TensorsNear(RunOne("conv", {x, w3}, {{"auto_pad", std::string("SAME_UPPER")}}),
                          Floats({1, 1, 3, 3}, {12, 21, 16, 27, 45, 33, 24, 39, 28})));
}

TEST(ConvRef, GroupsBiasDilation) {
  Tensor x = Floats({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = Floats({2, 1, 1}, {2, 3});
  Tensor b = Floats({2}, {1, -1});
  EXPECT_TRUE(TensorsNear(RunOne("conv", {x, w, b}, {{"group", int64_t{2}}}),
                          Floats({1, 2, 3}, {3, 5, 7, 11, 14, 17})));
  // Without groups each output channel sums both input channels.
  Tensor w2 = Floats({1, 2, 1}, {1, 10});
  EXPECT_TRUE(TensorsNear(RunOne("conv", {x, w2}), Floats({1, 1, 3}, {41, 52, 63})));
  Tensor x5 = MakeTensor<double>({1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor wd = MakeTensor<double>({1, 1, 2}, {1, 1});
  EXPECT_TRUE(TensorsNear(RunOne("conv", {x5, wd}, {{"dilations", Ints{2}}}),
                          MakeTensor<double>({1, 1, 3}, {4, 6, 8})));
}

TEST(ConvTransposeRef, OneDimensional) {
  // Input i scatters x[i] * w[k] to i * stride + k * dilation - pad_begin.
  Tensor x = Floats({1, 1, 3}, {1, 2, 3});
  Tensor w = Floats({1, 1, 2}, {1, 10});
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}), Floats({1, 1, 4}, {1, 12, 23, 30})));
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}, {{"strides", Ints{2}}}),
                          Floats({1, 1, 6}, {1, 10, 2, 20, 3, 30})));
  EXPECT_TRUE(
      TensorsNear(RunOne("conv_transpose", {x, w}, {{"strides", Ints{2}}, {"pads", Ints{1, 0}}}),
                  Floats({1, 1, 5}, {10, 2, 20, 3, 30})));
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}, {{"dilations", Ints{2}}}),
                          Floats({1, 1, 5}, {1, 2, 13, 20, 30})));
  // output_padding adds positions at the end that get only the bias.
  Tensor b = Floats({1}, {5});
  EXPECT_TRUE(TensorsNear(
      RunOne("conv_transpose", {x, w, b}, {{"strides", Ints{2}}, {"output_padding", Ints{1}}}),
      Floats({1, 1, 7}, {6, 15, 7, 25, 8, 35, 5})));
}

TEST(ConvTransposeRef, OutputShapeAndAutoPad) {
  Tensor x = Floats({1, 1, 3}, {1, 2, 3});
  Tensor w = Floats({1, 1, 2}, {1, 10});
  Attrs s2 = {{"strides", Ints{2}}};
  // full = 6. output_shape 7: total -1 rounds to pads (0, -1), one extra position at the end.
  Attrs a = s2;
  a.Set("output_shape", Ints{7});
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}, a),
                          Floats({1, 1, 7}, {1, 10, 2, 20, 3, 30, 0})));
  // output_shape 5: total 1, the extra pad at the start (NOTSET, SAME_LOWER) or end (SAME_UPPER).
  a.Set("output_shape", Ints{5});
  EXPECT_TRUE(
      TensorsNear(RunOne("conv_transpose", {x, w}, a), Floats({1, 1, 5}, {10, 2, 20, 3, 30})));
  a.Set("auto_pad", std::string("SAME_UPPER"));
  EXPECT_TRUE(
      TensorsNear(RunOne("conv_transpose", {x, w}, a), Floats({1, 1, 5}, {1, 10, 2, 20, 3})));
  // SAME without output_shape: out = in * stride. A ones kernel of 3 makes full
  // {1, 1, 3, 2, 5, 3, 3}; out 6 drops its last (SAME_UPPER) or first (SAME_LOWER) position.
  Tensor w3 = Floats({1, 1, 3}, {1, 1, 1});
  Attrs same = {{"strides", Ints{2}}, {"auto_pad", std::string("SAME_UPPER")}};
  EXPECT_TRUE(
      TensorsNear(RunOne("conv_transpose", {x, w3}, same), Floats({1, 1, 6}, {1, 1, 3, 2, 5, 3})));
  same.Set("auto_pad", std::string("SAME_LOWER"));
  EXPECT_TRUE(
      TensorsNear(RunOne("conv_transpose", {x, w3}, same), Floats({1, 1, 6}, {1, 3, 2, 5, 3, 3})));
}

TEST(ConvTransposeRef, ChannelsAndGroups) {
  Tensor x = MakeTensor<double>({1, 2, 2}, {1, 2, 3, 4});
  // w[c, m]: every output channel sums over both input channels.
  Tensor w = MakeTensor<double>({2, 2, 1}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}),
                          MakeTensor<double>({1, 2, 2}, {10, 14, 14, 20})));
  // group 2: output channel j reads input channel j only.
  Tensor wg = MakeTensor<double>({2, 1, 1}, {2, 3});
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, wg}, {{"group", int64_t{2}}}),
                          MakeTensor<double>({1, 2, 2}, {2, 4, 9, 12})));
}

TEST(ConvTransposeRef, TwoDimensional) {
  // ONNX's ConvTranspose example: 0..8 with a 3x3 ones kernel, into two channels.
  std::vector<float> v(9);
  for (int i = 0; i < 9; ++i) v[i] = static_cast<float>(i);
  Tensor x = Floats({1, 1, 3, 3}, v);
  Tensor w = Floats({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> both = plane;
  both.insert(both.end(), plane.begin(), plane.end());
  EXPECT_TRUE(TensorsNear(RunOne("conv_transpose", {x, w}), Floats({1, 2, 5, 5}, both)));
}

TEST(PoolRef, IntegerMax) {
  // Padding never wins, even over the lowest value; windows that are all padding cannot occur.
  Tensor x = MakeTensor<int8_t>({1, 1, 4}, {-128, -5, 100, -7});
  EXPECT_TRUE(
      TensorsNear(RunOne("max_pool", {x}, {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 1}}}),
                  MakeTensor<int8_t>({1, 1, 5}, {-128, -5, 100, 100, -7})));
  Tensor u = MakeTensor<uint8_t>({1, 1, 3}, {0, 255, 7});
  EXPECT_TRUE(TensorsNear(RunOne("max_pool", {u}, {{"kernel_shape", Ints{2}}}),
                          MakeTensor<uint8_t>({1, 1, 2}, {255, 255})));
  // Compared exactly: 2^53 + 1 and 2^53 are one double.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor l = MakeTensor<int64_t>({1, 1, 3}, {big - 1, big, big - 1});
  Tensor got = RunOne("max_pool", {l}, {{"kernel_shape", Ints{2}}});
  ASSERT_EQ(got.TypeString(), "i64[1, 1, 2]");
  EXPECT_EQ(got.data<int64_t>()[0], big);
  EXPECT_EQ(got.data<int64_t>()[1], big);
}

TEST(PoolRef, MaxAndAvg) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  Tensor x = Floats({1, 1, 4, 4}, v);
  Attrs k2s2 = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  EXPECT_TRUE(TensorsNear(RunOne("max_pool", {x}, k2s2), Floats({1, 1, 2, 2}, {6, 8, 14, 16})));
  EXPECT_TRUE(
      TensorsNear(RunOne("avg_pool", {x}, k2s2), Floats({1, 1, 2, 2}, {3.5, 5.5, 11.5, 13.5})));
}

TEST(PoolRef, PaddingCeilModeDilation) {
  Tensor x = Floats({1, 1, 3}, {1, 2, 3});
  Attrs a = {{"kernel_shape", Ints{3}}, {"pads", Ints{1, 1}}};
  EXPECT_TRUE(TensorsNear(RunOne("avg_pool", {x}, a), Floats({1, 1, 3}, {1.5, 2, 2.5})));
  Attrs include = a;
  include.Set("count_include_pad", true);
  EXPECT_TRUE(TensorsNear(RunOne("avg_pool", {x}, include), Floats({1, 1, 3}, {1, 2, 5.0f / 3})));
  // Padding never wins a max, even over negative values.
  Tensor neg = Floats({1, 1, 3}, {-1, -2, -3});
  EXPECT_TRUE(TensorsNear(RunOne("max_pool", {neg}, a), Floats({1, 1, 3}, {-1, -1, -2})));
  // ceil_mode: the last window hangs over the end and sees only the 5.
  Tensor x5 = Floats({1, 1, 5}, {1, 2, 3, 4, 5});
  Attrs c = {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"ceil_mode", true}};
  EXPECT_TRUE(TensorsNear(RunOne("max_pool", {x5}, c), Floats({1, 1, 3}, {2, 4, 5})));
  EXPECT_TRUE(TensorsNear(RunOne("avg_pool", {x5}, c), Floats({1, 1, 3}, {1.5, 3.5, 5})));
  Tensor xd = Floats({1, 1, 5}, {1, 5, 2, 4, 3});
  EXPECT_TRUE(
      TensorsNear(RunOne("max_pool", {xd}, {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}}),
                  Floats({1, 1, 3}, {2, 5, 3})));
}

// Runs max_pool_with_indices' reference and returns {values, indices}.
std::vector<Tensor> WithIndices(const Tensor& x, const Attrs& attrs) {
  std::vector<Tensor> out = RunOpReference("max_pool_with_indices", {x}, attrs);
  EXPECT_EQ(out.size(), 2u);
  return out;
}

TEST(MaxPoolWithIndicesRef, RowMajor) {
  // ONNX's test_maxpool_with_argmax_2d_precomputed_pads: 1..25, a 5x5 kernel, pads 2.
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[i] = static_cast<float>(i + 1);
  std::vector<Tensor> r = WithIndices(Floats({1, 1, 5, 5}, v),
                                      {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}});
  EXPECT_TRUE(
      TensorsNear(r[0], Floats({1, 1, 5, 5}, {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                                              25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25})));
  EXPECT_TRUE(TensorsNear(
      r[1], MakeTensor<int64_t>({1, 1, 5, 5}, {12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24,
                                               24, 24, 22, 23, 24, 24, 24, 22, 23, 24, 24, 24})));
  // The index counts the batch and channel planes before it: ((n * C + c) * W + w).
  Tensor x = Floats({2, 2, 3}, {1, 5, 2, 7, 0, 3, 4, 4, 1, 0, 9, 8});
  r = WithIndices(x, {{"kernel_shape", Ints{2}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({2, 2, 2}, {5, 5, 7, 3, 4, 4, 9, 9})));
  // Plane 2 is [4, 4, 1]: its first window's tie goes to the first 4 (index 6 + 0).
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({2, 2, 2}, {1, 1, 3, 5, 6, 7, 10, 10})));
}

TEST(MaxPoolWithIndicesRef, ColumnMajor) {
  // ONNX's test_maxpool_with_argmax_2d_precomputed_strides: a 2x2 kernel, stride 2, storage
  // order 1: (h, w) has index h + w * H.
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[i] = static_cast<float>(i + 1);
  Attrs a = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"storage_order", int64_t{1}}};
  std::vector<Tensor> r = WithIndices(Floats({1, 1, 5, 5}, v), a);
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 2, 2}, {7, 9, 17, 19})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 2, 2}, {6, 16, 8, 18})));
  // A 1x1 kernel takes every element: the indices list the plane in column-major order, after
  // the planes before it (6 elements each).
  Tensor x = Floats({1, 2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  a = {{"kernel_shape", Ints{1, 1}}, {"storage_order", int64_t{1}}};
  EXPECT_TRUE(
      TensorsNear(WithIndices(x, a)[1], MakeTensor<int64_t>({1, 2, 2, 3}, {0, 2, 4, 1, 3, 5,  //
                                                                           6, 8, 10, 7, 9, 11})));
  // Ties go to the first in scan order (row by row), not the first in storage order: the 7 at
  // (0, 1) has index 0 + 1 * 2 = 2, though the 7 at (1, 0) has the smaller index 1.
  EXPECT_TRUE(
      TensorsNear(WithIndices(Floats({1, 1, 2, 2}, {1, 7, 7, 2}),
                              {{"kernel_shape", Ints{2, 2}}, {"storage_order", int64_t{1}}})[1],
                  MakeTensor<int64_t>({1, 1, 1, 1}, {2})));
  // 3-D: (d, h, w) has index d + h * D + w * D * H; the max sits at (0, 1, 1).
  Tensor x3 = Floats({1, 1, 2, 2, 2}, {1, 2, 3, 9, 4, 5, 6, 7});
  a = {{"kernel_shape", Ints{2, 2, 2}}};
  EXPECT_TRUE(TensorsNear(WithIndices(x3, a)[1], MakeTensor<int64_t>({1, 1, 1, 1, 1}, {3})));
  a.Set("storage_order", int64_t{1});
  EXPECT_TRUE(TensorsNear(WithIndices(x3, a)[1], MakeTensor<int64_t>({1, 1, 1, 1, 1}, {6})));
}

TEST(MaxPoolWithIndicesRef, PadsDilationsNaN) {
  // Padding never wins, even over negative values.
  std::vector<Tensor> r = WithIndices(Floats({1, 1, 3}, {-1, -2, -3}),
                                      {{"kernel_shape", Ints{3}}, {"pads", Ints{1, 1}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 3}, {-1, -1, -2})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 3}, {0, 0, 1})));
  // Dilation 2: the windows are {0, 2}, {1, 3}, {2, 4}.
  r = WithIndices(Floats({1, 1, 5}, {1, 5, 2, 4, 3}),
                  {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 3}, {2, 5, 3})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 3}, {2, 1, 4})));
  // Strides with pads in 2-D: windows start at -1 and 1 in both dims.
  r = WithIndices(
      Floats({1, 1, 3, 3}, {1, 8, 2, 3, 4, 9, 5, 6, 7}),
      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 0, 0}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 2, 2}, {1, 8, 5, 9})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 2, 2}, {0, 1, 6, 5})));
  // A NaN is the max of its window; the first one wins.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  r = WithIndices(Floats({1, 1, 5}, {1, nan, 3, nan, 2}), {{"kernel_shape", Ints{2}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 4}, {nan, nan, nan, nan})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 4}, {1, 1, 3, 3})));
  // A window wholly in the padding (positions -1 and 1 of a size-1 input): -inf and index -1.
  r = WithIndices(Floats({1, 1, 1}, {4}),
                  {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 1}}});
  EXPECT_TRUE(TensorsNear(r[0], Floats({1, 1, 1}, {-std::numeric_limits<float>::infinity()})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 1}, {-1})));
  // All -inf: the first is still the max.
  const float inf = std::numeric_limits<float>::infinity();
  r = WithIndices(Floats({1, 1, 2}, {-inf, -inf}), {{"kernel_shape", Ints{2}}});
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 1}, {0})));
}

TEST(MaxPoolWithIndicesRef, Integers) {
  // Padding never wins over the lowest value; ties go to the first.
  std::vector<Tensor> r = WithIndices(MakeTensor<int8_t>({1, 1, 3}, {-128, -128, 5}),
                                      {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 0}}});
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<int8_t>({1, 1, 3}, {-128, -128, 5})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 3}, {0, 0, 2})));
  // Compared exactly: 2^53 + 1 and 2^53 are one double.
  const int64_t big = (int64_t{1} << 53) + 1;
  r = WithIndices(MakeTensor<int64_t>({1, 1, 3}, {big - 1, big, big - 1}),
                  {{"kernel_shape", Ints{3}}});
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1, 1, 1}, {1})));
}

TEST(MaxUnpoolRef, ScatterAndOutputShape) {
  // ONNX's test_maxunpool_export_without_output_shape.
  const Tensor idx = MakeTensor<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15});
  Attrs a = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  EXPECT_TRUE(TensorsNear(RunOne("max_unpool", {Floats({1, 1, 2, 2}, {1, 2, 3, 4}), idx}, a),
                          Floats({1, 1, 4, 4}, {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4})));
  // test_maxunpool_export_with_output_shape: the indices index the 4x4 scatter, which the 5x5
  // output holds at its start.
  a.Set("output_shape", Ints{1, 1, 5, 5});
  EXPECT_TRUE(TensorsNear(RunOne("max_unpool", {Floats({1, 1, 2, 2}, {5, 6, 7, 8}), idx}, a),
                          Floats({1, 1, 5, 5}, {0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0,
                                                0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0})));
  // Pads shrink the default output: (2 - 1) * 2 + 2 - 1 = 3 per dim.
  a = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}};
  EXPECT_TRUE(TensorsNear(
      RunOne("max_unpool",
             {Floats({1, 1, 2, 2}, {1, 2, 3, 4}), MakeTensor<int64_t>({1, 1, 2, 2}, {0, 2, 4, 8})},
             a),
      Floats({1, 1, 3, 3}, {1, 0, 2, 0, 3, 0, 0, 0, 4})));
}

TEST(MaxUnpoolRef, PlanesCollisionsAndIntegers) {
  // Indices are over the whole output: plane p's lie in [p * 4, p * 4 + 4). An index outside
  // its element's plane (or negative) is dropped; of two writes to one position the last wins.
  Tensor x = MakeTensor<int32_t>({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor idx = MakeTensor<int64_t>({1, 2, 3}, {1, 1, 0, 4, 3, 7});
  EXPECT_TRUE(TensorsNear(RunOne("max_unpool", {x, idx}, {{"kernel_shape", Ints{2}}}),
                          MakeTensor<int32_t>({1, 2, 4}, {3, 2, 0, 0, 4, 0, 0, 6})));
  idx = MakeTensor<int64_t>({1, 2, 3}, {-1, 9, 2, 1, 2, 6});
  EXPECT_TRUE(TensorsNear(RunOne("max_unpool", {x, idx}, {{"kernel_shape", Ints{2}}}),
                          MakeTensor<int32_t>({1, 2, 4}, {0, 0, 3, 0, 0, 0, 6, 0})));
  // Unpooling max_pool_with_indices' output puts each max back where it was.
  Tensor src = Floats({2, 1, 4}, {1, 3, 2, 0, 5, 4, 7, 6});
  Attrs k2s2 = {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}};
  std::vector<Tensor> pooled = WithIndices(src, k2s2);
  EXPECT_TRUE(
      TensorsNear(RunOne("max_unpool", pooled, k2s2), Floats({2, 1, 4}, {0, 3, 2, 0, 5, 0, 7, 0})));
}

TEST(GlobalPoolRef, Values) {
  Tensor x = MakeTensor<double>({1, 2, 2}, {1, 2, 3, 5});
  EXPECT_TRUE(TensorsNear(RunOne("global_avg_pool", {x}), MakeTensor<double>({1, 2, 1}, {1.5, 4})));
  EXPECT_TRUE(TensorsNear(RunOne("global_max_pool", {x}), MakeTensor<double>({1, 2, 1}, {2, 5})));
}

TEST(PadRef, Modes) {
  Tensor x = Floats({3}, {1, 2, 3});
  Attrs a = {{"pads", Ints{2, 1}}, {"value", 9.0}};
  EXPECT_TRUE(TensorsNear(RunOne("pad", {x}, a), Floats({6}, {9, 9, 1, 2, 3, 9})));
  a.Set("mode", std::string("reflect"));
  EXPECT_TRUE(TensorsNear(RunOne("pad", {x}, a), Floats({6}, {3, 2, 1, 2, 3, 2})));
  a.Set("mode", std::string("edge"));
  EXPECT_TRUE(TensorsNear(RunOne("pad", {x}, a), Floats({6}, {1, 1, 1, 2, 3, 3})));
  EXPECT_TRUE(TensorsNear(RunOne("pad", {x}, {{"pads", Ints{-1, 1}}}), Floats({3}, {2, 3, 0})));
  Tensor m = MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsNear(RunOne("pad", {m}, {{"pads", Ints{1, 0, 0, 1}}, {"value", -1.0}}),
                          MakeTensor<int32_t>({3, 3}, {-1, -1, -1, 1, 2, -1, 3, 4, -1})));
}

}  // namespace
}  // namespace kiln
