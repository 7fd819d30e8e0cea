// Lowering of nll_loss: compiled concretely and shape-generic, compared with the reference
// kernel on random inputs and random targets that include ignored and out-of-range classes.
// Both compute per-element values in f64 and sum in the same order, so results agree to
// rounding; 1e-6 allows a later reassociating loop pass.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

// Targets in [-2, c + 1]: mostly classes, some negative and some past the end.
Tensor RandomTargets(DType dtype, const std::vector<int64_t>& shape, int64_t c, uint64_t seed) {
  return RandomTensor(dtype, shape, seed, -2.0, static_cast<double>(c + 1));
}

// Size 1 everywhere, odd sizes, spatial dims of 1 and 2, a large case, and empty batches
// (sum 0, mean 0 / 0 = NaN).
struct Case {
  std::vector<int64_t> input_shape;  // [N, C, d...]
};

std::vector<Case> Cases() {
  return {{{1, 1}},       {{7, 3}},      {{1, 5, 1}}, {{3, 5, 4}}, {{2, 3, 3, 5}},
          {{5, 2, 1, 7}}, {{64, 33, 9}}, {{0, 3}},    {{2, 3, 0}}};
}

std::vector<int64_t> TargetShape(const std::vector<int64_t>& input_shape) {
  std::vector<int64_t> s{input_shape[0]};
  s.insert(s.end(), input_shape.begin() + 2, input_shape.end());
  return s;
}

TEST(LowerNllLoss, MatchesReference) {
  uint64_t seed = 1;
  for (const Case& c : Cases()) {
    int64_t classes = c.input_shape[1];
    for (DType t : {DType::kFloat32, DType::kFloat64}) {
      for (DType index : {DType::kInt32, DType::kInt64}) {
        Tensor x = RandomTensor(t, c.input_shape, ++seed, -3.0, 0.0);
        Tensor target = RandomTargets(index, TargetShape(c.input_shape), classes, ++seed);
        Tensor w = RandomTensor(t, {classes}, ++seed, 0.1, 2.0);
        for (const char* reduction : {"none", "sum", "mean"}) {
          for (bool weighted : {false, true}) {
            for (bool ignore : {false, true}) {
              Attrs attrs{{"reduction", std::string(reduction)}};
              if (ignore) attrs.Set("ignore_index", int64_t{classes > 1 ? 1 : 0});
              std::vector<Tensor> in{x, target};
              if (weighted) in.push_back(w);
              EXPECT_TRUE(CompiledMatchesReference("nll_loss", in, attrs, 1e-6, 1e-6))
                  << "input " << IntsToString(c.input_shape) << " " << DTypeName(t) << " target "
                  << DTypeName(index) << " reduction " << reduction << (weighted ? " weighted" : "")
                  << (ignore ? " ignore_index" : "");
            }
          }
        }
      }
    }
  }
}

// A negative ignore_index and a batch whose every target is ignored (the mean is NaN in both).
TEST(LowerNllLoss, NegativeIgnoreIndexAndAllIgnored) {
  Tensor x = RandomTensor(DType::kFloat32, {5, 4, 3}, 7, -3.0, 0.0);
  Tensor some = RandomTensor(DType::kInt64, {5, 3}, 8, -1.0, 3.0);
  Tensor all = Tensor::Empty(DType::kInt64, {5, 3});
  for (int64_t i = 0; i < all.numel(); ++i) all.SetFromDouble(i, -1);
  for (const Tensor& target : {some, all}) {
    for (const char* reduction : {"none", "sum", "mean"}) {
      Attrs attrs{{"reduction", std::string(reduction)}, {"ignore_index", int64_t{-1}}};
      EXPECT_TRUE(CompiledMatchesReference("nll_loss", {x, target}, attrs, 1e-6, 1e-6))
          << reduction;
    }
  }
}

}  // namespace
}  // namespace kiln
