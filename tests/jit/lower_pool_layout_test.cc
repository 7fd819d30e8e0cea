// The channels-last pools (ir/ops/pool_layout.cc): compiled and compared with their reference
// kernels (the NCHW ops' on permuted copies) on random data, both lowerings (overlapping or
// padded windows of up to 25 taps spelled out; the NCHW op's on a view), over size-1, odd and
// larger shapes, channel counts around the vector widths, overlapping, padded, strided, dilated and
// ceil_mode windows, f32 / f64 / f16 and integers; a symbolic batch; each result checked against
// the NCHW op's on the same values; and the type relation's errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/guarded_run.h"
#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::AttrsText;
using test::CompiledMatchesReference;
using test::RandomTensor;
using test::SymbolicBatchMatchesReference;
using test::SymbolicImageMatchesReference;

using Ints = std::vector<int64_t>;

struct Case {
  Ints x;  // [N, H, W, C]
  Attrs attrs;
};

std::vector<Case> Cases() {
  const Attrs two = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  return {
      // A small CNN's 2x2 / 2 pools, channels on and off the vector widths.
      {{1, 32, 32, 32}, two},
      {{2, 16, 16, 64}, two},
      {{1, 9, 7, 5}, two},
      {{1, 2, 2, 1}, two},
      {{1, 1, 1, 17}, {{"kernel_shape", Ints{1, 1}}}},
      // Overlapping windows (the phase-split form), padded, strided.
      {{1, 13, 11, 24},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 8, 9, 3}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}},
      // ceil_mode, dilation, asymmetric and automatic pads.
      {{1, 7, 6, 33},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"ceil_mode", true},
        {"pads", Ints{1, 1, 0, 1}}}},
      {{1, 9, 9, 7},
       {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 3}}, {"pads", Ints{1, 0, 1, 2}}}},
      {{1, 8, 8, 16},
       {{"kernel_shape", Ints{3, 2}},
        {"auto_pad", std::string("SAME_UPPER")},
        {"strides", Ints{2, 3}}}},
      // More than 25 taps: the NCHW op's lowering on the permuted view.
      {{1, 9, 8, 6}, {{"kernel_shape", Ints{6, 5}}, {"pads", Ints{1, 1, 1, 1}}}},
      // Larger than the caches' first level.
      {{1, 56, 56, 64},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
  };
}

TEST(LowerPoolNhwc, MatchesReference) {
  uint64_t seed = 1;
  for (const Case& c : Cases()) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      Tensor x = RandomTensor(t, c.x, seed++);
      EXPECT_TRUE(CompiledMatchesReference("max_pool_nhwc", {x}, c.attrs, 0, 0, false))
          << DTypeName(t) << AttrsText(c.attrs);
      for (bool include_pad : {false, true}) {
        Attrs a = c.attrs;
        a.Set("count_include_pad", include_pad);
        EXPECT_TRUE(CompiledMatchesReference("avg_pool_nhwc", {x}, a, 1e-5, 1e-5, false))
            << DTypeName(t) << AttrsText(a);
      }
    }
  }
}

TEST(LowerPoolNhwc, Float16AndIntegers) {
  uint64_t seed = 100;
  for (const Case& c : Cases()) {
    Tensor h = RandomTensor(DType::kFloat16, c.x, seed++);
    EXPECT_TRUE(CompiledMatchesReference("max_pool_nhwc", {h}, c.attrs, 0, 0, false))
        << AttrsText(c.attrs);
    EXPECT_TRUE(CompiledMatchesReference("avg_pool_nhwc", {h}, c.attrs, 1e-2, 1e-2, false))
        << AttrsText(c.attrs);
    Tensor i = RandomTensor(DType::kInt32, c.x, seed++, -128, 127);
    EXPECT_TRUE(CompiledMatchesReference("max_pool_nhwc", {i}, c.attrs, 0, 0, false))
        << AttrsText(c.attrs);
  }
}

// Any image size (the generic tier), channels-last: every case (SAME's pads expressions of the
// size), float max exact, means both ways of counting.
TEST(LowerPoolNhwc, SymbolicImageSize) {
  uint64_t seed = 300;
  for (const Case& c : Cases()) {
    Tensor x = RandomTensor(DType::kFloat32, c.x, seed++);
    EXPECT_TRUE(SymbolicImageMatchesReference("max_pool_nhwc", {x}, c.attrs, 0, 3))
        << AttrsText(c.attrs);
    for (bool include_pad : {false, true}) {
      Attrs a = c.attrs;
      a.Set("count_include_pad", include_pad);
      EXPECT_TRUE(SymbolicImageMatchesReference("avg_pool_nhwc", {x}, a, 1e-5, 3)) << AttrsText(a);
    }
  }
}

// An image of height or width 0 with pads that leave the window room: every window lies in the
// padding, and the input is never read. Run on guarded memory, where a read past the input's
// one element of storage faults; the NCHW ops as well as the channels-last ones. Constant
// sizes only: the engine never runs shape-generic kernels on a shape that leaves a tensor
// empty (engine/generic_bind.h, BindsAnEmptyTensor), and the symbolic pools' clamped reads
// reach past an empty input.
TEST(LowerPoolNhwc, EmptyImageReadsNothing) {
  const Attrs attrs = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{2, 2, 2, 2}}};
  uint64_t seed = 320;
  for (const Ints& shape : {Ints{1, 0, 37, 16}, Ints{1, 37, 0, 16}}) {
    const Tensor nhwc = RandomTensor(DType::kFloat32, shape, seed++);
    const Tensor nchw =
        RandomTensor(DType::kFloat32, {shape[0], shape[3], shape[1], shape[2]}, seed++);
    for (const auto& [op, x] : {std::pair{"max_pool_nhwc", nhwc},
                                {"avg_pool_nhwc", nhwc},
                                {"max_pool", nchw},
                                {"avg_pool", nchw}}) {
      EXPECT_TRUE(test::GuardedMatchesReference(op, test::SingleOpFunction(op, {x}, attrs, false),
                                                {x}, attrs, 1e-6, 1e-6))
          << op << " " << x.TypeString();
    }
  }
}

TEST(LowerPoolNhwc, SymbolicBatch) {
  Tensor x = RandomTensor(DType::kFloat32, {3, 7, 6, 20}, 11);
  const Attrs a = {
      {"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 1, 1, 0}}, {"strides", Ints{2, 2}}};
  EXPECT_TRUE(SymbolicBatchMatchesReference("max_pool_nhwc", {x}, a, 0));
  EXPECT_TRUE(SymbolicBatchMatchesReference("avg_pool_nhwc", {x}, a));
  EXPECT_TRUE(SymbolicBatchMatchesReference("global_avg_pool_nhwc", {x}, {}));
}

TEST(LowerGlobalPoolNhwc, MatchesReference) {
  uint64_t seed = 200;
  for (const Ints& shape : std::vector<Ints>{
           {1, 1, 1, 1}, {1, 8, 8, 128}, {2, 7, 7, 5}, {3, 3, 5, 33}, {1, 33, 17, 64}}) {
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      Tensor x = RandomTensor(t, shape, seed++);
      for (const char* op : {"global_avg_pool_nhwc", "global_max_pool_nhwc"})
        EXPECT_TRUE(CompiledMatchesReference(op, {x}, {}, 1e-5, 1e-5, true)) << op;
    }
  }
}

// The reference is the NCHW op's on permuted copies; this pins that down on one case by hand:
// the channels-last result, permuted back, is the NCHW op's on the permuted input.
TEST(LowerPoolNhwc, IsTheNchwOpPermuted) {
  Tensor x = RandomTensor(DType::kFloat32, {2, 9, 7, 5}, 300);
  const Attrs a = {
      {"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  for (const char* op : {"max_pool", "avg_pool", "global_max_pool", "global_avg_pool"}) {
    const Attrs attrs = std::string(op).rfind("global", 0) == 0 ? Attrs{} : a;
    Tensor nchw = RunOpReference(op, {PermuteAxes(x, {0, 3, 1, 2})}, attrs)[0];
    Tensor nhwc = RunOpReference(StrCat(op, "_nhwc"), {x}, attrs)[0];
    EXPECT_TRUE(test::TensorsNear(PermuteAxes(nhwc, {0, 3, 1, 2}), nchw, 0, 0)) << op;
  }
}

std::string TypeError(const char* op, const Type& x, const Attrs& attrs) {
  try {
    InferTypes(MakeFunction({}, MakeCall(op, {MakeVar("x", x)}, attrs)));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PoolNhwcType, OutputShapeAndErrors) {
  const DType f = DType::kFloat32;
  const Attrs a = {
      {"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  Function fn = InferTypes(
      MakeFunction({}, MakeCall("max_pool_nhwc", {MakeVar("x", TensorType({2, 9, 11, 3}, f))}, a)));
  EXPECT_EQ(TypeToString(fn->body->type), "f32[2, 5, 6, 3]");
  fn = InferTypes(MakeFunction(
      {}, MakeCall("global_avg_pool_nhwc", {MakeVar("x", TensorType({2, 9, 11, 3}, f))})));
  EXPECT_EQ(TypeToString(fn->body->type), "f32[2, 1, 1, 3]");
  EXPECT_NE(TypeError("max_pool_nhwc", TensorType({1, 9, 11}, f), a).find("must be 4-D"),
            std::string::npos);
  EXPECT_NE(TypeError("global_max_pool_nhwc", TensorType({9, 11}, f), {}).find("must be 4-D"),
            std::string::npos);
  // The NCHW op's own checks, on the NCHW view: a kernel larger than the padded input, an
  // integer average.
  EXPECT_NE(TypeError("max_pool_nhwc", TensorType({1, 2, 2, 3}, f), {{"kernel_shape", Ints{5, 5}}})
                .find("max_pool"),
            std::string::npos);
  EXPECT_NE(TypeError("avg_pool_nhwc", TensorType({1, 4, 4, 3}, DType::kInt32),
                      {{"kernel_shape", Ints{2, 2}}})
                .find("avg_pool"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
