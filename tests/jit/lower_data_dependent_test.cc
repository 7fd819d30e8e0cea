// Lowering of the bounded forms of the data-dependent ops (nonzero_bounded, compress_bounded,
// unique_bounded, non_max_suppression_bounded: ir/ops/bounded.cc), compiled concretely and
// shape-generic and compared with their reference kernels on random data: the upper-bound buffer
// (hits in order, zeros after) and the count must agree exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

// Random values of `dtype` with about `zero_share` of them zero (so both branches run).
Tensor Sparse(DType dtype, const std::vector<int64_t>& shape, uint64_t seed, double zero_share) {
  Tensor t = RandomTensor(dtype, shape, seed, -3, 3);
  std::mt19937_64 rng(seed * 7 + 1);
  std::bernoulli_distribution zero(zero_share);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (zero(rng)) t.SetFromDouble(i, 0);
  return t;
}

// Size 1, a scalar, odd sizes, ranks 1-4, all zeros, no zeros, and a large input.
std::vector<std::vector<int64_t>> Shapes() {
  return {{1}, {}, {7}, {3, 5}, {2, 3, 5}, {2, 1, 3, 4}, {129}, {64, 257}};
}

TEST(LowerNonZeroBounded, MatchesReference) {
  uint64_t seed = 3;
  for (const std::vector<int64_t>& shape : Shapes())
    for (DType t : {DType::kFloat32, DType::kInt64, DType::kBool, DType::kFloat16})
      for (double share : {0.0, 0.5, 1.0}) {
        Tensor x = Sparse(t, shape, ++seed, share);
        EXPECT_TRUE(CompiledMatchesReference("nonzero_bounded", {x}, {}, 0, 0))
            << IntsToString(shape) << " " << DTypeName(t) << " zeros " << share;
      }
}

// NaN is not zero: it counts, as in the reference.
TEST(LowerNonZeroBounded, NaNCounts) {
  Tensor x = Tensor::FromVector<float>({4}, {0, std::nanf(""), -0.0f, 1});
  EXPECT_TRUE(CompiledMatchesReference("nonzero_bounded", {x}, {}, 0, 0));
}

// Empty inputs: no columns, a count of 0.
TEST(LowerNonZeroBounded, EmptyInputs) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, {3, 0}})
    EXPECT_TRUE(CompiledMatchesReference("nonzero_bounded",
                                         {Sparse(DType::kFloat32, shape, 2, 0.5)}, {}, 0, 0))
        << IntsToString(shape);
  EXPECT_TRUE(CompiledMatchesReference(
      "compress_bounded",
      {Sparse(DType::kFloat32, {3, 0}, 3, 0.5), Sparse(DType::kBool, {0}, 4, 0.5)},
      {{"axis", std::vector<int64_t>{1}}}, 0, 0));
}

TEST(LowerCompressBounded, MatchesReference) {
  uint64_t seed = 40;
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int64_t> axis;  // [] flattens
    int64_t cond_len;
  };
  for (const Case& c : std::vector<Case>{{{1}, {}, 1},
                                         {{7}, {0}, 7},
                                         {{7}, {0}, 4},
                                         {{3, 5}, {}, 15},
                                         {{3, 5}, {}, 9},
                                         {{3, 5}, {1}, 5},
                                         {{3, 5}, {-2}, 2},
                                         {{2, 3, 5}, {1}, 3},
                                         {{64, 257}, {1}, 257},
                                         {{64, 257}, {}, 1000}})
    for (DType t : {DType::kFloat32, DType::kInt32}) {
      for (double share : {0.0, 0.5, 1.0}) {
        Tensor x = RandomTensor(t, c.shape, ++seed, -5, 5);
        Tensor cond = Sparse(DType::kBool, {c.cond_len}, ++seed, share);
        EXPECT_TRUE(
            CompiledMatchesReference("compress_bounded", {x, cond}, {{"axis", c.axis}}, 0, 0))
            << IntsToString(c.shape) << " axis " << IntsToString(c.axis) << " cond " << c.cond_len
            << " " << DTypeName(t) << " false share " << share;
      }
    }
}

// Values drawn from `distinct` levels (so slices repeat), in x's dtype.
Tensor Repeating(DType dtype, const std::vector<int64_t>& shape, uint64_t seed, int distinct) {
  Tensor t = RandomTensor(DType::kFloat32, shape, seed, 0, 1);
  Tensor out = Tensor::Empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.SetFromDouble(i, std::floor(t.GetAsDouble(i) * distinct) - distinct / 2);
  return out;
}

TEST(LowerUniqueBounded, MatchesReference) {
  uint64_t seed = 70;
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int64_t> axis;  // [] flattens
  };
  for (const Case& c : std::vector<Case>{{{1}, {}},
                                         {{}, {}},
                                         {{7}, {}},
                                         {{3, 5}, {}},
                                         {{3, 5}, {0}},
                                         {{3, 5}, {1}},
                                         {{4, 3, 2}, {1}},
                                         {{4, 3, 2}, {-1}},
                                         {{5, 2, 3}, {0}},
                                         {{1000}, {}},
                                         {{300, 2}, {0}}})
    for (int distinct : {1, 3, 1000})
      for (bool sorted : {true, false}) {
        // Every dtype class over the cases, one per case (each compiles twice).
        const DType types[] = {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kUInt8};
        const DType t = types[++seed % 4];
        Tensor x = Repeating(t, c.shape, seed, distinct);
        EXPECT_TRUE(CompiledMatchesReference("unique_bounded", {x},
                                             {{"sorted", sorted}, {"axis", c.axis}}, 0, 0))
            << IntsToString(c.shape) << " axis " << IntsToString(c.axis) << " " << DTypeName(t)
            << " distinct " << distinct << " sorted " << sorted;
      }
}

// NaN sorts after every number and equals NaN; -0 equals 0; bools compare as integers.
TEST(LowerUniqueBounded, SpecialValues) {
  const float nan = std::nanf("");
  const float inf = INFINITY;
  Tensor x = Tensor::FromVector<float>({9}, {nan, 1, -0.0f, inf, nan, 0, -inf, 1, -2});
  Tensor b = Tensor::FromVector<bool>({5}, {true, false, true, true, false});
  for (bool sorted : {true, false}) {
    EXPECT_TRUE(CompiledMatchesReference("unique_bounded", {x}, {{"sorted", sorted}}, 0, 0));
    EXPECT_TRUE(CompiledMatchesReference("unique_bounded", {b}, {{"sorted", sorted}}, 0, 0));
  }
  EXPECT_TRUE(CompiledMatchesReference("unique_bounded", {Tensor::Empty(DType::kFloat32, {0, 3})},
                                       {{"axis", std::vector<int64_t>{0}}}, 0, 0));
}

// Boxes around a few centres (so many overlap), random scores with ties and a NaN.
std::vector<Tensor> NmsInputs(int64_t batches, int64_t classes, int64_t n, uint64_t seed,
                              bool center) {
  Tensor centre = RandomTensor(DType::kFloat32, {batches, n, 2}, seed, 0, 4);
  Tensor size = RandomTensor(DType::kFloat32, {batches, n, 2}, seed + 1, 0.5, 3);
  Tensor boxes = Tensor::Empty(DType::kFloat32, {batches, n, 4});
  for (int64_t i = 0; i < batches * n; ++i) {
    const double cy = std::floor(centre.GetAsDouble(2 * i)), cx = centre.GetAsDouble(2 * i + 1);
    const double h = size.GetAsDouble(2 * i), w = size.GetAsDouble(2 * i + 1);
    const double v[4] = {cx, cy, w, h};
    // Corners with either diagonal (flipped on odd boxes), or centre and size.
    const double c[4] = {cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2};
    for (int k = 0; k < 4; ++k)
      boxes.SetFromDouble(4 * i + k, center ? v[k] : c[i % 2 ? (k + 2) % 4 : k]);
  }
  Tensor scores = RandomTensor(DType::kFloat32, {batches, classes, n}, seed + 2, 0, 1);
  for (int64_t i = 0; i < scores.numel(); i += 5)  // ties
    scores.SetFromDouble(i, 0.5);
  if (scores.numel() > 3) scores.SetFromDouble(3, std::nan(""));
  return {boxes, scores};
}

TEST(LowerNmsBounded, MatchesReference) {
  uint64_t seed = 90;
  struct Case {
    int64_t batches, classes, n;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1}, {1, 1, 7}, {2, 3, 13}, {1, 2, 200}})
    for (bool center : {false, true}) {
      std::vector<Tensor> in = NmsInputs(c.batches, c.classes, c.n, seed += 3, center);
      const Attrs attrs = {{"center_point_box", int64_t{center ? 1 : 0}}};
      auto with = [&](std::vector<Tensor> extra) {
        std::vector<Tensor> all = in;
        for (Tensor& t : extra) all.push_back(t);
        return all;
      };
      const std::string what = StrCat(c.batches, "x", c.classes, "x", c.n, " center ", center);
      // No optional inputs: no boxes at all.
      EXPECT_TRUE(CompiledMatchesReference("non_max_suppression_bounded", in, attrs, 0, 0)) << what;
      for (int64_t limit : {0, 3, 1000}) {
        const float iou = limit == 3 ? 0.0f : 0.5f;
        Tensor m = Tensor::Scalar<int64_t>(limit), t = Tensor::Scalar<float>(iou);
        EXPECT_TRUE(
            CompiledMatchesReference("non_max_suppression_bounded", with({m, t}), attrs, 0, 0))
            << what << " limit " << limit << " iou " << iou;
        EXPECT_TRUE(CompiledMatchesReference(
            "non_max_suppression_bounded", with({m, t, Tensor::Scalar<float>(0.4f)}), attrs, 0, 0))
            << what << " limit " << limit << " iou " << iou << " score_threshold 0.4";
      }
      // A float count (truncated) given as a one-element tensor, a negative one, a huge one.
      if (c.n == 13) {
        for (double limit : {2.7, -1.0, 1e30})
          EXPECT_TRUE(CompiledMatchesReference(
              "non_max_suppression_bounded",
              with({Tensor::FromVector<float>({1}, {static_cast<float>(limit)}),
                    Tensor::Scalar<float>(0.5f)}),
              attrs, 0, 0))
              << what << " limit " << limit;
      }
    }
}

}  // namespace
}  // namespace kiln
