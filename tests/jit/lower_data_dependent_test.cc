// Lowering of the bounded forms of the data-dependent ops (nonzero_bounded, compress_bounded:
// ir/ops/data_dependent.cc), compiled concretely and shape-generic and compared with their
// reference kernels on random data: the upper-bound buffer (hits in order, zeros after) and the
// count must agree exactly.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln
