// Type relations and reference kernels of the ops whose result sizes depend on values
// (ir/ops/data_dependent.cc): nonzero, compress, unique, non_max_suppression. Expected values
// are worked out by hand from the ONNX definitions (the backend cases check them too).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::Floats;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::vector<int64_t> Values(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int64_t>(t.GetAsDouble(i)));
  return v;
}

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}

TEST(DataDependentOps, TypesLeaveTheValueDecidedDimsUnknown) {
  EXPECT_THAT(Infer("nonzero", {F32({Dim(2), Dim::Symbol("n")})}),
              MatchesRegex(R"(i64\[2, _v[0-9]+\])"));
  EXPECT_THAT(Infer("nonzero", {F32({})}), MatchesRegex(R"(i64\[1, _v[0-9]+\])"));
  Type cond = TensorType({Dim(3)}, DType::kBool);
  EXPECT_THAT(Infer("compress", {F32({Dim(3), Dim(4)}), cond}, {{"axis", std::vector<int64_t>{0}}}),
              MatchesRegex(R"(f32\[_v[0-9]+, 4\])"));
  EXPECT_THAT(Infer("compress", {F32({Dim(3), Dim(4)}), cond}), MatchesRegex(R"(f32\[_v[0-9]+\])"));
  EXPECT_THAT(InferError("compress", {F32({Dim(3)}), F32({Dim(3)})}), HasSubstr("condition"));
  // An axis for a scalar is an error, not an index into an empty shape.
  EXPECT_THAT(InferError("compress", {F32({}), TensorType({Dim(1)}, DType::kBool)},
                         {{"axis", std::vector<int64_t>{0}}}),
              HasSubstr("scalar"));
  EXPECT_THAT(InferError("unique", {F32({})}, {{"axis", std::vector<int64_t>{-1}}}),
              HasSubstr("scalar"));
  EXPECT_THAT(Infer("unique", {F32({Dim(2), Dim(3)})}),
              MatchesRegex(R"(\(f32\[_v[0-9]+\], i64\[_v[0-9]+\], i64\[6\], i64\[_v[0-9]+\]\))"));
  EXPECT_THAT(
      Infer("non_max_suppression", {F32({Dim(1), Dim(6), Dim(4)}), F32({Dim(1), Dim(2), Dim(6)})}),
      MatchesRegex(R"(i64\[_v[0-9]+, 3\])"));
  EXPECT_THAT(InferError("non_max_suppression",
                         {F32({Dim(1), Dim(6), Dim(4)}), F32({Dim(1), Dim(2), Dim(5)})}),
              HasSubstr("boxes"));
}

TEST(DataDependentOps, NonZero) {
  Tensor x = Floats({2, 3}, {0, 1.5f, 0, -2, 0, 3});
  Tensor y = RunOne("nonzero", {x});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values(y), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  // None, a scalar, NaN (nonzero), booleans.
  EXPECT_EQ(RunOne("nonzero", {Floats({3}, {0, 0, 0})}).shape(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Values(RunOne("nonzero", {MakeTensor<float>({}, {7})})), (std::vector<int64_t>{0}));
  EXPECT_EQ(Values(RunOne("nonzero", {Floats({2}, {std::numeric_limits<float>::quiet_NaN(), 0})})),
            (std::vector<int64_t>{0}));
  EXPECT_EQ(Values(RunOne("nonzero", {MakeTensor<bool>({3}, {false, true, true})})),
            (std::vector<int64_t>{1, 2}));
}

TEST(DataDependentOps, Compress) {
  Tensor x = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor c = MakeTensor<bool>({3}, {false, true, true});
  Tensor rows = RunOne("compress", {x, c}, {{"axis", std::vector<int64_t>{0}}});
  EXPECT_EQ(rows.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(Values(rows), (std::vector<int64_t>{3, 4, 5, 6}));
  // Along the last axis (negative), with a shorter condition: the columns past it go.
  Tensor cols =
      RunOne("compress", {x, MakeTensor<bool>({1}, {true})}, {{"axis", std::vector<int64_t>{-1}}});
  EXPECT_EQ(cols.shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(Values(cols), (std::vector<int64_t>{1, 3, 5}));
  // Flattened.
  Tensor flat = RunOne("compress", {x, MakeTensor<bool>({5}, {true, false, false, true, true})});
  EXPECT_EQ(Values(flat), (std::vector<int64_t>{1, 4, 5}));
  EXPECT_THAT(ErrorMessage([&] {
                RunOne("compress", {x, MakeTensor<bool>({4}, {true, true, true, true})},
                       {{"axis", std::vector<int64_t>{0}}});
              }),
              HasSubstr("condition has 4 elements, more than the 3 slices"));
}

TEST(DataDependentOps, UniqueSortedAndInOrderOfOccurrence) {
  Tensor x = Floats({6}, {2, 1, 1, 3, 4, 3});
  std::vector<Tensor> s = RunOpReference("unique", {x}, {{"sorted", true}});
  EXPECT_EQ(Values(s[0]), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values(s[1]), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(Values(s[2]), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(Values(s[3]), (std::vector<int64_t>{2, 1, 2, 1}));
  std::vector<Tensor> u = RunOpReference("unique", {x}, {{"sorted", false}});
  EXPECT_EQ(Values(u[0]), (std::vector<int64_t>{2, 1, 3, 4}));
  EXPECT_EQ(Values(u[1]), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(Values(u[2]), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(Values(u[3]), (std::vector<int64_t>{1, 2, 2, 1}));
}

// Along an axis: whole slices compare, lexicographically.
TEST(DataDependentOps, UniqueSlicesAlongAnAxis) {
  Tensor x = MakeTensor<int64_t>({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  std::vector<Tensor> rows =
      RunOpReference("unique", {x}, {{"sorted", true}, {"axis", std::vector<int64_t>{0}}});
  EXPECT_EQ(rows[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values(rows[0]), (std::vector<int64_t>{1, 0, 0, 2, 3, 4}));
  EXPECT_EQ(Values(rows[2]), (std::vector<int64_t>{0, 0, 1}));
  std::vector<Tensor> cols =
      RunOpReference("unique", {x}, {{"sorted", true}, {"axis", std::vector<int64_t>{1}}});
  // Columns (1,1,2), (0,0,3), (0,0,4): sorted (0,0,3) < (0,0,4) < (1,1,2).
  EXPECT_EQ(cols[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(Values(cols[0]), (std::vector<int64_t>{0, 0, 1, 0, 0, 1, 3, 4, 2}));
  EXPECT_EQ(Values(cols[1]), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(Values(cols[2]), (std::vector<int64_t>{2, 0, 1}));
}

// Two overlapping boxes and a distant one, two classes: the lower-scored overlapping box goes
// (IoU 0.81 > 0.5), the score threshold drops one more, max boxes caps class 1.
TEST(DataDependentOps, NonMaxSuppression) {
  Tensor boxes = Floats({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11});
  Tensor scores = Floats({1, 2, 3}, {0.9f, 0.8f, 0.3f, 0.1f, 0.7f, 0.6f});
  Tensor max_out = MakeTensor<int64_t>({1}, {3});
  Tensor iou = Floats({1}, {0.5f});
  Tensor thr = Floats({1}, {0.2f});
  Tensor y = RunOne("non_max_suppression", {boxes, scores, max_out, iou, thr});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(Values(y), (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}));
  // At most one per class; no score threshold: class 1's best is box 1.
  Tensor one = RunOne("non_max_suppression", {boxes, scores, MakeTensor<int64_t>({1}, {1}), iou});
  EXPECT_EQ(Values(one), (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  // Center format: the same boxes as centers and sizes select the same.
  Tensor centers = Floats({1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 10.5f, 0.5f, 1, 1});
  Tensor c = RunOne("non_max_suppression", {centers, scores, max_out, iou, thr},
                    {{"center_point_box", int64_t{1}}});
  EXPECT_EQ(Values(c), Values(y));
  // No limit as exporters write it (INT64_MAX): every box that survives; a NaN score (no
  // threshold) counts as the lowest.
  Tensor nan_scores = Floats({1, 1, 3}, {std::numeric_limits<float>::quiet_NaN(), 0.5f, 0.7f});
  Tensor all = RunOne(
      "non_max_suppression",
      {boxes, nan_scores, MakeTensor<int64_t>({1}, {std::numeric_limits<int64_t>::max()}), iou});
  EXPECT_EQ(Values(all), (std::vector<int64_t>{0, 0, 2, 0, 0, 1}));
  // No max boxes given: nothing.
  EXPECT_EQ(RunOne("non_max_suppression", {boxes, scores}).shape(), (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace kiln
