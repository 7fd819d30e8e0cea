// Lowering of softmax, log_softmax, layer_norm, batch_norm, instance_norm,
// mean_variance_normalization and lrn: each op compiled, concretely and shape-generic, and
// compared with its reference kernel on random data.
//
// Tolerances (these are transcendental or rounding-sensitive): the kernels compute elements in
// f32 where the reference uses double, so f32 results are checked to 1e-5 relative plus 1e-5
// absolute; f64 to 1e-12; f16 and bf16 to about one unit in their last place (2e-3 and 1.6e-2
// relative), since a value near a rounding boundary may round the other way.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::AttrsText;

using test::CompiledMatchesReference;
using test::MakeTensor;
using test::RandomTensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

const std::vector<DType> kFloatDTypes = {DType::kFloat32, DType::kFloat16, DType::kFloat64,
                                         DType::kBFloat16};

struct Tolerance {
  double atol, rtol;
};

Tolerance TolFor(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-12, 1e-12};
    case DType::kFloat16:
      return {1e-4, 2e-3};
    case DType::kBFloat16:
      return {1e-3, 1.6e-2};
    default:
      return {1e-5, 1e-5};
  }
}

// ---- softmax / log_softmax ----

struct SoftmaxCase {
  std::vector<int64_t> shape;
  int64_t axis;
};

std::vector<SoftmaxCase> SoftmaxCases() {
  return {
      {{1}, -1},
      {{7}, 0},
      {{13, 5}, 1},
      {{13, 5}, 0},
      {{13, 5}, -2},
      {{3, 4, 5}, 1},
      {{2, 1, 3}, 1},
      {{0, 5}, 1},
      {{5, 0}, 1},
      {{}, 0},
      {{257, 1031}, -1},
      {{257, 1031}, 0},
      {{1 << 16}, 0},
      // The longest rows summed in f32, and the shortest in f64 (LowerSoftmax's kF32SumMaxRow).
      {{9, 4096}, 1},
      {{3, 4097}, -1},
  };
}

void CheckSoftmaxOp(const std::string& op) {
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (const SoftmaxCase& c : SoftmaxCases()) {
      // A wide range, so the max subtraction matters and exp spans many magnitudes.
      Tensor x = RandomTensor(t, c.shape, seed++, -10, 10);
      Attrs attrs{{"axis", c.axis}};
      SCOPED_TRACE(StrCat(op, " ", x.TypeString(), AttrsText(attrs)));
      EXPECT_TRUE(CompiledMatchesReference(op, {x}, attrs, tol.atol, tol.rtol));
    }
  }
}

TEST(LowerSoftmax, Softmax) {
  CheckSoftmaxOp("softmax");
}
TEST(LowerSoftmax, LogSoftmax) {
  CheckSoftmaxOp("log_softmax");
}

// Large inputs do not overflow (the row max is subtracted); a row holding NaN is NaN throughout;
// a row of only -inf is NaN (0/0); +inf gives NaN from inf - inf.
TEST(LowerSoftmax, ExtremeRows) {
  Tensor x = MakeTensor<float>({5, 3}, {1000, 999, -1000,     //
                                        1, kNaN, 2,           //
                                        -kInf, -kInf, -kInf,  //
                                        -kInf, 0, 1,          //
                                        kInf, 0, 1});
  for (const char* op : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(CompiledMatchesReference(op, {x}, {{"axis", int64_t{1}}}, 1e-6, 1e-5));
  }
}

// ---- layer_norm ----

struct LayerNormCase {
  std::vector<int64_t> x, scale, bias;  // bias empty with has_bias false: two inputs
  int64_t axis;
  bool has_bias = true;
};

std::vector<LayerNormCase> LayerNormCases() {
  return {
      {{1}, {1}, {1}, -1},
      {{7}, {7}, {7}, 0},
      {{13, 5}, {5}, {5}, 1},
      {{13, 5}, {13, 5}, {5}, 0},  // normalizes over everything; bias broadcasts
      {{13, 5}, {1, 5}, {}, 0},    // a size-1 parameter dim and a scalar bias
      {{13, 5}, {5}, {}, -1, false},
      {{2, 3, 4}, {3, 4}, {4}, 1},
      {{0, 5}, {5}, {5}, 1},  // no rows
      {{5, 0}, {0}, {0}, 1},  // empty rows: empty output
      {{257, 1031}, {1031}, {1031}, -1},
      {{16, 4096}, {4096}, {1}, 1},
  };
}

TEST(LowerNorm, LayerNorm) {
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (const LayerNormCase& c : LayerNormCases()) {
      // An offset mean, so centering matters.
      std::vector<Tensor> in{RandomTensor(t, c.x, seed++, 2, 5),
                             RandomTensor(t, c.scale, seed++, -2, 2)};
      if (c.has_bias) in.push_back(RandomTensor(t, c.bias, seed++, -1, 1));
      Attrs attrs{{"axis", c.axis}, {"epsilon", 1e-3}};
      SCOPED_TRACE(StrCat("layer_norm ", in[0].TypeString(), " scale ", in[1].TypeString(),
                          AttrsText(attrs)));
      EXPECT_TRUE(CompiledMatchesReference("layer_norm", in, attrs, tol.atol, tol.rtol));
    }
  }
}

// Rows whose mean is 1e4 times their spread: a mean accumulated in f32 is off by about
// 1e-2 there, and so would be every output. Rows of up to 8192 elements take the corrected
// two-pass form in f32, longer ones accumulate in f64 (norm.cc, kF32StatsLimit); both must match
// the double reference to f32's usual tolerance.
TEST(LowerNorm, LayerNormLargeMeanSmallSpread) {
  uint64_t seed = 7;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{3, 768}, {2, 8192}, {2, 8193}, {1, 1}, {5, 33}}) {
    const int64_t d = shape.back();
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, shape, seed++, 1e4 - 1, 1e4 + 1),
                           RandomTensor(DType::kFloat32, {d}, seed++, -2, 2),
                           RandomTensor(DType::kFloat32, {d}, seed++, -1, 1)};
    SCOPED_TRACE(in[0].TypeString());
    EXPECT_TRUE(CompiledMatchesReference("layer_norm", in, {{"epsilon", 1e-5}}, 1e-5, 1e-5));
  }
}

// A constant row has variance 0, so the result is bias (x - mean is exactly 0); a NaN poisons
// its row only.
TEST(LowerNorm, LayerNormDegenerateRows) {
  Tensor x = MakeTensor<float>({3, 4}, {3, 3, 3, 3, 1, kNaN, 2, 3, 1, 2, 3, 4});
  Tensor scale = MakeTensor<float>({4}, {1, 2, 3, 4});
  Tensor bias = MakeTensor<float>({4}, {0.5f, -0.5f, 0, 1});
  EXPECT_TRUE(CompiledMatchesReference("layer_norm", {x, scale, bias}, {}, 1e-6, 1e-5));
  EXPECT_TRUE(CompiledMatchesReference("layer_norm", {x, scale}, {{"epsilon", 0.0}}, 1e-6, 1e-5));
}

// ---- batch_norm ----

TEST(LowerNorm, BatchNorm) {
  std::vector<std::vector<int64_t>> shapes = {{1, 1},       {2, 3},    {1, 7},    {3, 7, 13},
                                              {2, 3, 5, 7}, {0, 3, 4}, {2, 3, 0}, {4, 64, 32, 32}};
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (const std::vector<int64_t>& shape : shapes) {
      std::vector<int64_t> c{shape[1]};
      std::vector<Tensor> in{RandomTensor(t, shape, seed++, -3, 3),
                             RandomTensor(t, c, seed++, -2, 2), RandomTensor(t, c, seed++, -1, 1),
                             RandomTensor(t, c, seed++, -1, 1), RandomTensor(t, c, seed++, 0.1, 2)};
      SCOPED_TRACE(StrCat("batch_norm ", in[0].TypeString()));
      EXPECT_TRUE(
          CompiledMatchesReference("batch_norm", in, {{"epsilon", 1e-5}}, tol.atol, tol.rtol));
    }
  }
}

// A negative variance gives NaN, as sqrt does in the reference; zero variance with epsilon 0
// gives infinities (or NaN where x equals the mean).
TEST(LowerNorm, BatchNormDegenerateVariance) {
  Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 0.5f, 6});
  Tensor scale = MakeTensor<float>({3}, {1, 1, 1});
  Tensor bias = MakeTensor<float>({3}, {0, 0, 0});
  Tensor mean = MakeTensor<float>({3}, {1, 0.5f, 0});
  Tensor var = MakeTensor<float>({3}, {-1, 0, 1});
  EXPECT_TRUE(CompiledMatchesReference("batch_norm", {x, scale, bias, mean, var},
                                       {{"epsilon", 0.0}}, 1e-6, 1e-5));
}

// The newer ops below run every case in f32 and a few (size 1, odd sizes) in the other float
// dtypes, to keep the number of compiled kernels small.
bool InReducedSet(DType t, size_t case_index) {
  return t == DType::kFloat32 || case_index < 3;
}

// ---- instance_norm ----

TEST(LowerNorm, InstanceNorm) {
  std::vector<std::vector<int64_t>> shapes = {{1, 1, 1},    {2, 3, 7},     {1, 2, 1, 3},
                                              {2, 3, 5, 7}, {1, 5, 3, 3},  {0, 3, 4},
                                              {2, 3, 0},    {2, 4, 33, 31}};
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!InReducedSet(t, i)) continue;
      const std::vector<int64_t>& shape = shapes[i];
      std::vector<int64_t> c{shape[1]};
      std::vector<Tensor> in{RandomTensor(t, shape, seed++, 2, 5),
                             RandomTensor(t, c, seed++, -2, 2), RandomTensor(t, c, seed++, -1, 1)};
      SCOPED_TRACE(StrCat("instance_norm ", in[0].TypeString()));
      EXPECT_TRUE(
          CompiledMatchesReference("instance_norm", in, {{"epsilon", 1e-3}}, tol.atol, tol.rtol));
    }
  }
}

// ---- group_norm ----

TEST(LowerNorm, GroupNorm) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t groups;
  };
  const Case cases[] = {{{1, 1, 1}, 1}, {{2, 6, 7}, 3}, {{1, 4, 3, 5}, 2}, {{3, 8, 9, 11}, 4}};
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (size_t i = 0; i < std::size(cases); ++i) {
      if (!InReducedSet(t, i)) continue;
      const Case& k = cases[i];
      std::vector<int64_t> c{k.shape[1]};
      std::vector<Tensor> in{RandomTensor(t, k.shape, seed++, 2, 5),
                             RandomTensor(t, c, seed++, -2, 2), RandomTensor(t, c, seed++, -1, 1)};
      SCOPED_TRACE(StrCat("group_norm ", in[0].TypeString(), " groups ", k.groups));
      EXPECT_TRUE(CompiledMatchesReference(
          "group_norm", in, {{"num_groups", k.groups}, {"epsilon", 1e-3}}, tol.atol, tol.rtol));
    }
  }
}

// ---- mean_variance_normalization ----

struct MvnCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;
  bool default_axes = false;
};

TEST(LowerNorm, MeanVarianceNormalization) {
  std::vector<MvnCase> cases = {
      {{1, 1, 1, 1}, {}, true},
      {{3, 3, 3, 1}, {}, true},
      {{3, 4, 5}, {-1, 0}},
      {{7}, {0}},
      {{13, 5}, {1}},
      {{13, 5}, {0}},
      {{3, 4, 5}, {}},
      {{0, 5}, {1}},
      {{2, 8, 16, 16}, {}, true},
  };
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!InReducedSet(t, i)) continue;
      const MvnCase& c = cases[i];
      Tensor x = RandomTensor(t, c.shape, seed++, -3, 6);
      Attrs attrs;
      if (!c.default_axes) attrs.Set("axes", c.axes);
      SCOPED_TRACE(StrCat("mean_variance_normalization ", x.TypeString(), AttrsText(attrs)));
      EXPECT_TRUE(
          CompiledMatchesReference("mean_variance_normalization", {x}, attrs, tol.atol, tol.rtol));
    }
  }
}

// A constant group has variance 0: its elements are exactly 0 (0 / 1e-9).
TEST(LowerNorm, MeanVarianceNormalizationConstantGroup) {
  Tensor x = MakeTensor<float>({2, 3}, {4, 4, 4, 1, 2, 6});
  EXPECT_TRUE(CompiledMatchesReference("mean_variance_normalization", {x},
                                       {{"axes", std::vector<int64_t>{1}}}, 1e-6, 1e-5));
}

// ---- lrn ----

struct LrnCase {
  std::vector<int64_t> shape;
  int64_t size;
};

TEST(LowerNorm, Lrn) {
  std::vector<LrnCase> cases = {
      {{1, 1}, 1},    {{2, 5, 3, 3}, 3}, {{1, 7, 3}, 4},    {{1, 1, 1, 1}, 3},   {{2, 5}, 2},
      {{0, 3, 2}, 3}, {{2, 0, 3}, 3},    {{2, 3, 4, 5}, 9}, {{2, 8, 15, 17}, 5},
  };
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    Tolerance tol = TolFor(t);
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!InReducedSet(t, i)) continue;
      const LrnCase& c = cases[i];
      Tensor x = RandomTensor(t, c.shape, seed++, -4, 4);
      Attrs attrs{{"size", c.size}, {"alpha", 0.3}, {"beta", 0.7}, {"bias", 1.25}};
      SCOPED_TRACE(StrCat("lrn ", x.TypeString(), AttrsText(attrs)));
      EXPECT_TRUE(CompiledMatchesReference("lrn", {x}, attrs, tol.atol, tol.rtol));
    }
  }
  // ONNX's defaults (alpha 1e-4, beta 0.75, bias 1).
  Tensor x = RandomTensor(DType::kFloat32, {2, 5, 4, 3}, 99, -10, 10);
  EXPECT_TRUE(CompiledMatchesReference("lrn", {x}, {{"size", int64_t{3}}}));
}

}  // namespace
}  // namespace kiln
