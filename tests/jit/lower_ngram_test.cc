// Lowering of tfidf_vectorizer: compiled concretely and shape-generic, compared with the
// reference kernel on random token rows. Tokens come from a small alphabet so that pooled
// n-grams occur often; pools mix lengths, skips, shared columns and unused columns. Counts are
// exact and weighting rounds once to f32 in both, so results agree exactly.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;

constexpr int64_t kAlphabet = 4;  // tokens in [0, 3]

// A pool of distinct random n-grams for each length in [1, max_n] (`per_length` tries each),
// as tfidf_vectorizer attributes; lengths below min_n are in the pool but not counted. Columns
// run in reverse pool order; with `shared`, every third n-gram takes the previous one's column,
// which leaves some columns without an n-gram.
Attrs RandomPool(const std::string& mode, int64_t min_n, int64_t max_n, int64_t max_skip,
                 int per_length, bool shared, bool weighted, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> token(0, kAlphabet - 1);
  std::vector<int64_t> counts, pool, indexes;
  for (int64_t n = 1; n <= max_n; ++n) {
    counts.push_back(static_cast<int64_t>(pool.size()));
    std::set<std::vector<int64_t>> seen;
    for (int i = 0; i < per_length; ++i) {
      std::vector<int64_t> g(n);
      for (int64_t& t : g) t = token(rng);
      if (!seen.insert(g).second) continue;
      pool.insert(pool.end(), g.begin(), g.end());
    }
  }
  const int64_t ngrams = [&] {
    int64_t total = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
      total += (end - counts[i]) / static_cast<int64_t>(i + 1);
    }
    return total;
  }();
  for (int64_t g = 0; g < ngrams; ++g) {
    int64_t column = ngrams - 1 - g;
    if (shared && g % 3 == 2) column = indexes.back();
    indexes.push_back(column);
  }
  Attrs a{{"mode", mode},
          {"min_gram_length", min_n},
          {"max_gram_length", max_n},
          {"max_skip_count", max_skip},
          {"ngram_counts", counts},
          {"ngram_indexes", indexes},
          {"pool_int64s", pool}};
  if (weighted) {
    std::uniform_real_distribution<double> w(0.1, 3.0);
    std::vector<double> weights(ngrams);
    for (double& v : weights) v = static_cast<float>(w(rng));  // as ONNX stores them
    a.Set("weights", weights);
  }
  return a;
}

struct Case {
  std::vector<int64_t> shape;
  std::string mode;
  int64_t min_n, max_n, max_skip;
  bool shared, weighted;
};

// Size 1, odd lengths, 1-D and 2-D, every mode, unigrams with and without longer n-grams,
// skips larger than the row, and a larger batch (16 x 250 tokens).
std::vector<Case> Cases() {
  return {
      {{1}, "TF", 1, 2, 3, false, false},        {{1, 1}, "TFIDF", 1, 1, 0, false, true},
      {{7}, "TF", 2, 2, 0, false, false},        {{13}, "TF", 1, 3, 2, true, false},
      {{13}, "IDF", 1, 2, 1, false, true},       {{3, 11}, "TFIDF", 1, 3, 1, true, true},
      {{5, 9}, "IDF", 2, 3, 0, false, false},    {{2, 6}, "TF", 2, 3, 1000, false, false},
      {{16, 250}, "TFIDF", 1, 2, 2, true, true},
  };
}

TEST(LowerTfIdfVectorizer, MatchesReference) {
  uint64_t seed = 11;
  for (const Case& c : Cases()) {
    Attrs attrs = RandomPool(c.mode, c.min_n, c.max_n, c.max_skip, 6, c.shared, c.weighted, ++seed);
    for (DType t : {DType::kInt32, DType::kInt64}) {
      // Tokens in [0, kAlphabet]: kAlphabet itself matches nothing.
      Tensor x = RandomTensor(t, c.shape, ++seed, -0.4, kAlphabet + 0.4);
      EXPECT_TRUE(CompiledMatchesReference("tfidf_vectorizer", {x}, attrs, 0, 0))
          << IntsToString(c.shape) << " " << DTypeName(t) << " " << c.mode << " n " << c.min_n
          << ".." << c.max_n << " skip " << c.max_skip << (c.shared ? " shared" : "")
          << (c.weighted ? " weighted" : "");
    }
  }
}

// Rows of zero length, and zero rows: every count is 0.
TEST(LowerTfIdfVectorizer, EmptyInputs) {
  Attrs attrs = RandomPool("TF", 1, 2, 1, 4, false, false, 5);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, {3, 0}, {0, 5}}) {
    Tensor x = RandomTensor(DType::kInt64, shape, 6, 0, kAlphabet - 1);
    EXPECT_TRUE(CompiledMatchesReference("tfidf_vectorizer", {x}, attrs, 0, 0))
        << IntsToString(shape);
  }
}

}  // namespace
}  // namespace kiln
