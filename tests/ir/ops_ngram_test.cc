// tfidf_vectorizer: type relations, attribute errors (each naming the attribute at fault), and
// the reference kernel against hand-counted n-grams: TF/IDF/TFIDF, skips, unigrams counted
// once per position, uncounted lengths, columns shared by two n-grams, 1-D and 2-D inputs.
#include <gmock/gmock.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::F32;
using test::Floats;
using test::I64;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

using Ints = std::vector<int64_t>;

// The pool of ONNX's TfIdfVectorizer examples: unigrams 2, 3, 5, 4 (columns 0-3) and bigrams
// [5, 6], [7, 8], [6, 7] (columns 4-6).
Attrs ExampleAttrs(const char* mode, int64_t min_n, int64_t max_n, int64_t max_skip) {
  return {{"mode", std::string(mode)},
          {"min_gram_length", min_n},
          {"max_gram_length", max_n},
          {"max_skip_count", max_skip},
          {"ngram_counts", Ints{0, 4}},
          {"ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 6}},
          {"pool_int64s", Ints{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}}};
}

Attrs With(Attrs a, const std::string& name, AttrValue v) {
  a.Set(name, std::move(v));
  return a;
}

Type I32(Shape shape) {
  return TensorType(std::move(shape), DType::kInt32);
}

// The example input: 12 tokens.
Tensor Example(std::vector<int64_t> shape = {12}) {
  return MakeTensor<int32_t>(shape, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8});
}

// ---- type relations ----

TEST(TfIdfVectorizer, Types) {
  const Attrs a = ExampleAttrs("TF", 1, 2, 0);
  EXPECT_EQ(Infer("tfidf_vectorizer", {I32({12})}, a), "f32[7]");
  EXPECT_EQ(Infer("tfidf_vectorizer", {I64({2, 6})}, a), "f32[2, 7]");
  EXPECT_EQ(Infer("tfidf_vectorizer", {I64({S("n"), S("c")})}, a), "f32[n, 7]");
  EXPECT_EQ(Infer("tfidf_vectorizer", {I32({S("c")})}, a), "f32[7]");
  // The width is max(ngram_indexes) + 1, not the number of n-grams.
  EXPECT_EQ(
      Infer("tfidf_vectorizer", {I32({5})}, With(a, "ngram_indexes", Ints{0, 1, 2, 3, 4, 5, 9})),
      "f32[10]");
  EXPECT_EQ(OpRegistry::Global().Get("tfidf_vectorizer").pattern, OpPattern::kOpaque);
}

TEST(TfIdfVectorizer, InputErrors) {
  const Attrs a = ExampleAttrs("TF", 1, 2, 0);
  EXPECT_THAT(InferError("tfidf_vectorizer", {F32({12})}, a),
              HasSubstr("tfidf_vectorizer: input must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("tfidf_vectorizer", {I32({})}, a),
              HasSubstr("input must have rank 1 ([C]) or 2 ([N, C]), got []"));
  EXPECT_THAT(InferError("tfidf_vectorizer", {I32({2, 3, 4})}, a),
              HasSubstr("input must have rank 1 ([C]) or 2 ([N, C]), got [2, 3, 4]"));
}

TEST(TfIdfVectorizer, AttributeErrors) {
  const Attrs a = ExampleAttrs("TF", 1, 2, 0);
  auto error = [](const Attrs& attrs) { return InferError("tfidf_vectorizer", {I32({6})}, attrs); };
  EXPECT_THAT(error(With(a, "mode", std::string("BM25"))),
              HasSubstr("attribute 'mode' = \"BM25\": must be \"TF\", \"IDF\" or \"TFIDF\""));
  Attrs missing{{"mode", std::string("TF")}, {"min_gram_length", int64_t{1}}};
  EXPECT_THAT(error(missing), HasSubstr("required attribute 'max_gram_length' is missing"));
  EXPECT_THAT(error(With(a, "min_gram_length", int64_t{0})),
              HasSubstr("min_gram_length must be >= 1, got 0"));
  EXPECT_THAT(error(ExampleAttrs("TF", 2, 1, 0)),
              HasSubstr("max_gram_length 1 is less than min_gram_length 2"));
  EXPECT_THAT(error(With(a, "max_skip_count", int64_t{-1})),
              HasSubstr("max_skip_count must be >= 0, got -1"));
  EXPECT_THAT(error(With(a, "ngram_counts", Ints{})), HasSubstr("ngram_counts must not be empty"));
  EXPECT_THAT(error(ExampleAttrs("TF", 1, 3, 0)),
              HasSubstr("max_gram_length 3 is longer than the 2 n-gram lengths that ngram_counts "
                        "[0, 4] describes"));
  EXPECT_THAT(error(With(a, "ngram_counts", Ints{0, 11})),
              HasSubstr("ngram_counts [0, 11]: start 11 of the 2-grams is outside pool_int64s "
                        "(10 values)"));
  EXPECT_THAT(error(With(With(a, "ngram_counts", Ints{0, 4, 2}), "max_gram_length", int64_t{3})),
              HasSubstr("ngram_counts [0, 4, 2] must not decrease (2-grams start at 4, the next "
                        "group at 2)"));
  EXPECT_THAT(error(With(a, "ngram_counts", Ints{0, 3})),
              HasSubstr("ngram_counts [0, 3]: the 7 values of the 2-grams are not whole 2-grams"));
  EXPECT_THAT(error(With(a, "ngram_indexes", Ints{0, 1, 2, 3, 4, 5})),
              HasSubstr("ngram_indexes has 6 entries but pool_int64s holds 7 n-grams "
                        "(ngram_counts [0, 4])"));
  EXPECT_THAT(error(With(a, "ngram_indexes", Ints{})),
              HasSubstr("ngram_indexes must not be empty"));
  EXPECT_THAT(error(With(a, "ngram_indexes", Ints{0, 1, 2, 3, 4, -5, 6})),
              HasSubstr("attribute 'ngram_indexes' = [0, 1, 2, 3, 4, -5, 6]: must not be "
                        "negative, got -5"));
  EXPECT_THAT(error(With(a, "pool_int64s", Ints{2, 3, 5, 4, 5, 6, 7, 8, 5, 6})),
              HasSubstr("pool_int64s holds the 2-gram [5, 6] twice (n-grams 4 and 6)"));
  EXPECT_THAT(error(With(a, "weights", std::vector<double>{1, 2, 3})),
              HasSubstr("weights has 3 values but ngram_indexes has 7"));
  // Two n-grams share column 0, so 7 weights only cover 7 of the 8 columns.
  EXPECT_THAT(error(With(With(a, "ngram_indexes", Ints{0, 1, 2, 3, 4, 0, 7}), "weights",
                         std::vector<double>(7, 1.0))),
              HasSubstr("weights has 7 values but is read per output column, and there are 8 "
                        "(max(ngram_indexes) + 1)"));
}

// A duplicate among lengths that are not counted is no error: only counted n-grams are looked
// up.
TEST(TfIdfVectorizer, DuplicateOutsideCountedLengths) {
  Attrs a = With(ExampleAttrs("TF", 2, 2, 0), "pool_int64s", Ints{2, 3, 2, 4, 5, 6, 7, 8, 6, 7});
  EXPECT_EQ(Infer("tfidf_vectorizer", {I32({6})}, a), "f32[7]");
}

// ---- reference kernel ----

// X = 1 1 3 3 3 7 8 6 7 5 6 8 (positions 0-11).
TEST(TfIdfVectorizer, ReferenceBigramsWithoutSkips) {
  // Adjacent pairs: [5, 6] at 9; [7, 8] at 5; [6, 7] at 7.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TF", 2, 2, 0)),
                          Floats({7}, {0, 0, 0, 0, 1, 1, 1})));
}

TEST(TfIdfVectorizer, ReferenceBigramsWithSkips) {
  // [7, 8]: (5, 6) d 1, (5, 11) d 6, (8, 11) d 3; [5, 6]: (9, 10); [6, 7]: (7, 8).
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TF", 2, 2, 5)),
                          Floats({7}, {0, 0, 0, 0, 1, 3, 1})));
  // Distances up to 3 only: (5, 11) drops out.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TF", 2, 2, 2)),
                          Floats({7}, {0, 0, 0, 0, 1, 2, 1})));
}

TEST(TfIdfVectorizer, ReferenceUnigramsAndBigrams) {
  // Unigram 3 occurs 3 times and 5 once, whatever max_skip_count is.
  for (int64_t skip : {0, 5}) {
    Tensor want =
        skip == 0 ? Floats({7}, {0, 3, 1, 0, 1, 1, 1}) : Floats({7}, {0, 3, 1, 0, 1, 3, 1});
    EXPECT_TRUE(
        TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TF", 1, 2, skip)), want))
        << skip;
  }
  // Unigrams only.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TF", 1, 1, 5)),
                          Floats({7}, {0, 3, 1, 0, 0, 0, 0})));
}

TEST(TfIdfVectorizer, ReferenceBatch) {
  // Rows 1 1 3 3 3 7 and 8 6 7 5 6 8: no n-gram spans the two rows.
  Tensor x = Example({2, 6});
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {x}, ExampleAttrs("TF", 1, 2, 5)),
                          Floats({2, 7}, {0, 3, 0, 0, 0, 0, 0,  //
                                          0, 0, 1, 0, 1, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {x}, ExampleAttrs("TF", 2, 2, 0)),
                          Floats({2, 7}, {0, 0, 0, 0, 0, 0, 0,  //
                                          0, 0, 0, 0, 1, 0, 1})));
}

TEST(TfIdfVectorizer, ReferenceWeighting) {
  const std::vector<double> w{0.5, 2, 3, 4, 1.5, 0.25, 10};
  // Counts 0 3 1 0 1 3 1.
  EXPECT_TRUE(TensorsNear(
      RunOne("tfidf_vectorizer", {Example()}, With(ExampleAttrs("IDF", 1, 2, 5), "weights", w)),
      Floats({7}, {0, 2, 3, 0, 1.5f, 0.25f, 10})));
  EXPECT_TRUE(TensorsNear(
      RunOne("tfidf_vectorizer", {Example()}, With(ExampleAttrs("TFIDF", 1, 2, 5), "weights", w)),
      Floats({7}, {0, 6, 3, 0, 1.5f, 0.75f, 10})));
  // Without weights: IDF marks presence, TFIDF is TF.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("IDF", 1, 2, 5)),
                          Floats({7}, {0, 1, 1, 0, 1, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {Example()}, ExampleAttrs("TFIDF", 1, 2, 5)),
                          Floats({7}, {0, 3, 1, 0, 1, 3, 1})));
}

// 4 4 4 4 with unigram [4], bigram [4, 4] and trigram [4, 4, 4], skips 0 and 1: the unigram
// counts 4 (once per position, not once per skip); the bigram 3 (d 1) + 2 (d 2); the trigram
// 2 (d 1) + 0 (d 2 needs 5 tokens).
TEST(TfIdfVectorizer, ReferenceUnigramsCountOncePerPosition) {
  Attrs a{{"mode", std::string("TF")},
          {"min_gram_length", int64_t{1}},
          {"max_gram_length", int64_t{3}},
          {"max_skip_count", int64_t{1}},
          {"ngram_counts", Ints{0, 1, 3}},
          {"ngram_indexes", Ints{0, 1, 2}},
          {"pool_int64s", Ints{4, 4, 4, 4, 4, 4}}};
  for (DType t : {DType::kInt32, DType::kInt64}) {
    Tensor x = Tensor::Empty(t, {4});
    for (int64_t i = 0; i < 4; ++i) x.SetFromDouble(i, 4);
    EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {x}, a), Floats({3}, {4, 5, 2})))
        << DTypeName(t);
  }
  // Only trigrams: the shorter ones keep their columns, at 0.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {MakeTensor<int64_t>({4}, {4, 4, 4, 4})},
                                 With(a, "min_gram_length", int64_t{3})),
                          Floats({3}, {0, 0, 2})));
}

// ngram_indexes need not be one-to-one: unigram 1 and bigram [1, 2] share column 3, unigram 2
// has column 0, and columns 1 and 2 have no n-gram. Negative and large tokens match exactly.
TEST(TfIdfVectorizer, ReferenceSharedAndEmptyColumns) {
  const int64_t big = int64_t{1} << 40;
  Attrs a{{"mode", std::string("TF")},
          {"min_gram_length", int64_t{1}},
          {"max_gram_length", int64_t{2}},
          {"max_skip_count", int64_t{0}},
          {"ngram_counts", Ints{0, 2}},
          {"ngram_indexes", Ints{3, 0, 3}},
          {"pool_int64s", Ints{-1, big, -1, big}}};
  Tensor x = MakeTensor<int64_t>({5}, {-1, big, -1, big, 7});
  // Unigram -1: 2, bigram [-1, big]: 2 -> column 3 holds 4; unigram big: 2.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {x}, a), Floats({4}, {2, 0, 0, 4})));
  // An i32 input never holds `big`.
  Tensor x32 = MakeTensor<int32_t>({5}, {-1, 0, -1, 0, 7});
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {x32}, a), Floats({4}, {0, 0, 0, 2})));
}

TEST(TfIdfVectorizer, ReferenceShortAndEmptyRows) {
  const Attrs a = ExampleAttrs("TF", 1, 2, 5);
  // One token: only unigrams can occur.
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {MakeTensor<int32_t>({1}, {5})}, a),
                          Floats({7}, {0, 0, 1, 0, 0, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {MakeTensor<int32_t>({0}, {})}, a),
                          Floats({7}, std::vector<float>(7, 0))));
  EXPECT_TRUE(TensorsNear(RunOne("tfidf_vectorizer", {MakeTensor<int32_t>({2, 0}, {})}, a),
                          Floats({2, 7}, std::vector<float>(14, 0))));
}

}  // namespace
}  // namespace kiln
