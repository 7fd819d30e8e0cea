// Type relations and reference kernels of concat, split, slice and gather (the element-indexed
// ops, scatters, trilu, cumsum, range, one_hot, topk, einsum and the rest:
// ops_select_index_test.cc).
#include <gmock/gmock.h>

#include <limits>
#include <random>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::I64;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RandomTensor;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Row-major offset of a multi-index.
int64_t Offset(const V& idx, const V& shape) {
  int64_t o = 0;
  for (size_t i = 0; i < shape.size(); ++i) o = o * shape[i] + idx[i];
  return o;
}

// ---------------------------------------------------------------- concat

TEST(Concat, Shapes) {
  EXPECT_EQ(Infer("concat", {F32({2, 3}), F32({2, 5})}, {{"axis", int64_t{1}}}), "f32[2, 8]");
  EXPECT_EQ(Infer("concat", {F32({2, 3}), F32({2, 5})}, {{"axis", int64_t{-1}}}), "f32[2, 8]");
  EXPECT_EQ(Infer("concat", {F32({1}), F32({2}), F32({0})}, {{"axis", int64_t{0}}}), "f32[3]");
  EXPECT_EQ(Infer("concat", {F32({4, 1})}, {{"axis", int64_t{0}}}), "f32[4, 1]");
}

TEST(Concat, Symbolic) {
  Dim batch = S("batch"), seq = S("seq");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("concat", {F32({batch, seq}), F32({batch, 1}), F32({batch, seq})},
                  {{"axis", int64_t{1}}}, &cs),
            "f32[batch, seq * 2 + 1]");
  EXPECT_TRUE(cs.empty());
  EXPECT_EQ(Infer("concat", {F32({batch, 3}), F32({S("n"), 3})}, {{"axis", int64_t{1}}}, &cs),
            "f32[batch, 6]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].ToString(),
            "concat, dim 0 differs between input 0 [batch, 3] and input 1 [n, 3]: batch == n");
}

TEST(Concat, Mismatches) {
  EXPECT_EQ(InferError("concat", {F32({2, 3}), F32({3, 3})}, {{"axis", int64_t{1}}}),
            "concat: dim 0 differs between input 0 [2, 3] and input 1 [3, 3]: 2 != 3");
  EXPECT_EQ(InferError("concat", {F32({2, 3}), I64({2, 3})}, {{"axis", int64_t{0}}}),
            "concat: input 1 has dtype i64 but input 0 has f32");
  EXPECT_THAT(InferError("concat", {F32({2, 3}), F32({2})}, {{"axis", int64_t{0}}}),
              HasSubstr("input 1 [2] has rank 1 but input 0 [2, 3] has rank 2"));
  EXPECT_THAT(InferError("concat", {F32({}), F32({})}, {{"axis", int64_t{0}}}),
              HasSubstr("cannot concatenate scalars"));
  EXPECT_THAT(InferError("concat", {F32({2})}, {{"axis", int64_t{1}}}),
              HasSubstr("axis 1 is out of range for rank 1"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("concat", {}, {{"axis", int64_t{0}}});
              }),
              HasSubstr("expects 1 or more inputs, got 0"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("concat", {F32({2})}, {}); }),
              HasSubstr("required attribute 'axis' is missing"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("concat", {F32({2})}, {{"axis", int64_t{0}}, {"dim", 1.0}});
              }),
              HasSubstr("no attribute 'dim'"));
}

TEST(Concat, KernelHandValues) {
  Tensor a = MakeTensor<float>({2, 1}, {1, 2});
  Tensor b = MakeTensor<float>({2, 2}, {3, 4, 5, 6});
  EXPECT_TRUE(TensorsNear(RunOpReference("concat", {a, b}, {{"axis", int64_t{1}}})[0],
                          MakeTensor<float>({2, 3}, {1, 3, 4, 2, 5, 6})));
  Tensor c = MakeTensor<bool>({1, 2}, {true, false});
  Tensor d = MakeTensor<bool>({2, 2}, {false, false, true, true});
  EXPECT_TRUE(TensorsNear(RunOpReference("concat", {c, d}, {{"axis", int64_t{0}}})[0],
                          MakeTensor<bool>({3, 2}, {true, false, false, false, true, true})));
  Tensor e = Tensor::Empty(DType::kFloat32, {2, 0});
  EXPECT_TRUE(TensorsNear(RunOpReference("concat", {e, a, e}, {{"axis", int64_t{-1}}})[0], a));
}

TEST(Concat, RandomAgainstIndexArithmetic) {
  std::vector<V> shapes = {{3, 2, 5}, {3, 1, 5}, {3, 4, 5}};
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    std::vector<Tensor> xs;
    for (size_t k = 0; k < shapes.size(); ++k) {
      xs.push_back(RandomTensor(dt, shapes[k], 100 + k, -20, 20));
    }
    Tensor y = RunOpReference("concat", xs, {{"axis", int64_t{1}}})[0];
    ASSERT_EQ(y.shape(), (V{3, 7, 5}));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 7; ++j)
        for (int64_t l = 0; l < 5; ++l) {
          // Which input row j falls in, and where within it.
          size_t k = 0;
          int64_t jj = j;
          while (jj >= shapes[k][1]) jj -= shapes[k++][1];
          ASSERT_EQ(y.GetAsDouble(Offset({i, j, l}, y.shape())),
                    xs[k].GetAsDouble(Offset({i, jj, l}, shapes[k])));
        }
  }
}

// ---------------------------------------------------------------- split

std::vector<std::string> SplitTypes(const Type& t) {
  std::vector<std::string> out;
  for (const Type& f : AsTuple(t)->fields) out.push_back(TypeToString(f));
  return out;
}
using Strings = std::vector<std::string>;

TEST(Split, Shapes) {
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({6, 4})}, {{"num_outputs", int64_t{3}}})),
            (Strings{"f32[2, 4]", "f32[2, 4]", "f32[2, 4]"}));
  // ONNX: parts of ceil(d / n), the last smaller.
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({5})}, {{"num_outputs", int64_t{2}}})),
            (Strings{"f32[3]", "f32[2]"}));
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({7})}, {{"num_outputs", int64_t{3}}})),
            (Strings{"f32[3]", "f32[3]", "f32[1]"}));
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({1})}, {{"num_outputs", int64_t{1}}})),
            (Strings{"f32[1]"}));
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({2, 6})},
                                   {{"split", V{1, 0, 5}}, {"axis", int64_t{-1}}})),
            (Strings{"f32[2, 1]", "f32[2, 0]", "f32[2, 5]"}));
}

TEST(Split, Symbolic) {
  Dim batch = S("batch"), seq = S("seq");
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({batch * 4, 3})}, {{"num_outputs", int64_t{4}}})),
            (Strings(4, "f32[batch, 3]")));
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({2, seq * 3})},
                                   {{"num_outputs", int64_t{3}}, {"axis", int64_t{1}}})),
            (Strings(3, "f32[2, seq]")));
  // Uneven in general: the dims are exact for every binding.
  Type t = InferOpType("split", {F32({seq})}, {{"num_outputs", int64_t{2}}});
  const auto& f = AsTuple(t)->fields;
  ASSERT_EQ(f.size(), 2u);
  for (int64_t n = 0; n <= 9; ++n) {
    int64_t first = (n + 1) / 2;
    EXPECT_EQ(AsTensor(f[0])->shape[0].TryEval({{"seq", n}}), first) << n;
    EXPECT_EQ(AsTensor(f[1])->shape[0].TryEval({{"seq", n}}), n - first) << n;
  }
  std::vector<DimConstraint> cs;
  EXPECT_EQ(SplitTypes(InferOpType("split", {F32({seq})}, {{"split", V{2, 3}}}, &cs)),
            (Strings{"f32[2]", "f32[3]"}));
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].ToString(), "split, split [2, 3] must sum to axis 0 of [seq]: seq == 5");
}

TEST(Split, Errors) {
  EXPECT_EQ(InferError("split", {F32({6})}),
            "split: give either `split` (the part sizes) or `num_outputs`");
  EXPECT_EQ(InferError("split", {F32({2, 6})}, {{"split", V{2, 3}}, {"axis", int64_t{1}}}),
            "split: split [2, 3] must sum to axis 1 of [2, 6]: 6 != 5");
  EXPECT_EQ(InferError("split", {F32({2})}, {{"num_outputs", int64_t{4}}}),
            "split: cannot split axis 0 of [2] into 4 parts of 1");
  EXPECT_THAT(InferError("split", {F32({6})}, {{"split", V{3, 3}}, {"num_outputs", int64_t{3}}}),
              HasSubstr("split [3, 3] has 2 parts but num_outputs is 3"));
  EXPECT_THAT(InferError("split", {F32({6})}, {{"split", V{6}}, {"axis", int64_t{1}}}),
              HasSubstr("axis 1 is out of range for rank 1"));
  EXPECT_THAT(InferError("split", {F32({})}, {{"num_outputs", int64_t{1}}}),
              HasSubstr("cannot split a scalar"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("split", {F32({6})}, {{"split", V{7, -1}}});
              }),
              HasSubstr("attribute 'split' = [7, -1]: must not be negative, got -1"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("split", {F32({6})}, {{"num_outputs", 2.5}});
              }),
              HasSubstr("attribute 'num_outputs' must be int, got float"));
}

TEST(Split, Kernel) {
  Tensor x = MakeTensor<int32_t>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto ys = RunOpReference("split", {x}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}});
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_TRUE(TensorsNear(ys[0], MakeTensor<int32_t>({2, 3}, {0, 1, 2, 5, 6, 7})));
  EXPECT_TRUE(TensorsNear(ys[1], MakeTensor<int32_t>({2, 2}, {3, 4, 8, 9})));
  ys = RunOpReference("split", {x}, {{"split", V{1, 1}}});
  EXPECT_TRUE(TensorsNear(ys[0], MakeTensor<int32_t>({1, 5}, {0, 1, 2, 3, 4})));
  EXPECT_TRUE(TensorsNear(ys[1], MakeTensor<int32_t>({1, 5}, {5, 6, 7, 8, 9})));
  ys = RunOpReference("split", {x}, {{"axis", int64_t{-1}}, {"split", V{0, 4, 1}}});
  ASSERT_EQ(ys.size(), 3u);
  EXPECT_EQ(ys[0].shape(), (V{2, 0}));
  EXPECT_TRUE(TensorsNear(ys[1], MakeTensor<int32_t>({2, 4}, {0, 1, 2, 3, 5, 6, 7, 8})));
  EXPECT_TRUE(TensorsNear(ys[2], MakeTensor<int32_t>({2, 1}, {4, 9})));
}

TEST(Split, ConcatUndoesSplit) {
  Tensor x = RandomTensor(DType::kBFloat16, {3, 7, 2}, 5);
  auto parts = RunOpReference("split", {x}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (V{3, 1, 2}));
  EXPECT_TRUE(TensorsNear(RunOpReference("concat", parts, {{"axis", int64_t{1}}})[0], x, 0, 0));
}

// ---------------------------------------------------------------- slice

// ONNX Slice on one axis of size d, written out independently of the op: the indices read.
V SliceIndices(int64_t d, int64_t start, int64_t end, int64_t step) {
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; };
  if (start < 0) start += d;
  if (end < 0) end += d;
  V out;
  // The loops stop before stepping past `end`, as i + step could overflow for huge steps.
  if (step > 0) {
    start = clamp(start, 0, d);
    end = clamp(end, 0, d);
    for (int64_t i = start; i < end; i += step) {
      out.push_back(i);
      if (step >= end - i) break;
    }
  } else {
    if (d == 0) return out;
    start = clamp(start, 0, d - 1);
    end = clamp(end, -1, d - 1);
    for (int64_t i = start; i > end; i += step) {
      out.push_back(i);
      if (step <= end - i) break;
    }
  }
  return out;
}

TEST(Slice, Shapes) {
  auto slice1 = [](Shape s, V starts, V ends, V axes = {}, V steps = {}) {
    return Infer("slice", {F32(std::move(s))},
                 {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}});
  };
  EXPECT_EQ(slice1({10}, {2}, {8}), "f32[6]");
  EXPECT_EQ(slice1({10}, {2}, {8}, {}, {3}), "f32[2]");
  EXPECT_EQ(slice1({10}, {-3}, {kMax}), "f32[3]");
  EXPECT_EQ(slice1({10}, {-1}, {kMin}, {}, {-1}), "f32[10]");
  EXPECT_EQ(slice1({10}, {20}, {30}), "f32[0]");
  EXPECT_EQ(slice1({10}, {8}, {2}), "f32[0]");
  EXPECT_EQ(slice1({4, 5, 6}, {1, -4}, {3, kMax}, {-1, 0}), "f32[4, 5, 2]");
  EXPECT_EQ(slice1({4, 5, 6}, {1, -3}, {3, kMax}, {-1, 0}), "f32[3, 5, 2]");
  EXPECT_EQ(slice1({1}, {0}, {1}), "f32[1]");
  EXPECT_EQ(slice1({0, 3}, {0}, {5}), "f32[0, 3]");
}

TEST(Slice, SymbolicShapes) {
  Dim batch = S("batch"), seq = S("seq");
  auto slice1 = [&](V starts, V ends, V axes, V steps = {}) {
    return Infer("slice", {F32({batch, seq, 64})},
                 {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}});
  };
  EXPECT_EQ(slice1({0}, {kMax}, {1}), "f32[batch, seq, 64]");
  EXPECT_EQ(slice1({0, 0}, {32, kMax}, {2, 0}), "f32[batch, seq, 32]");
  EXPECT_EQ(slice1({-1}, {kMin}, {1}, {-1}), "f32[batch, seq, 64]");
  EXPECT_EQ(slice1({0}, {-1}, {1}), "f32[batch, max(0, seq - 1), 64]");
  EXPECT_EQ(slice1({0}, {kMax}, {1}, {2}), "f32[batch, (seq + 1) // 2, 64]");
  EXPECT_EQ(slice1({0}, {4}, {0}), "f32[min(batch, 4), seq, 64]");
}

// Symbolic extents, evaluated at each size, and concrete extents both match the independent
// ONNX arithmetic, over negative, clamped and huge starts/ends/steps.
TEST(Slice, ExtentsMatchOnnxForEveryBinding) {
  const V points = {kMin, -12, -7, -5, -3, -2, -1, 0, 1, 2, 3, 5, 7, 12, kMax};
  const V steps = {kMin, -5, -2, -1, 1, 2, 3, kMax};
  Dim n = S("n");
  for (int64_t start : points)
    for (int64_t end : points)
      for (int64_t step : steps) {
        Attrs attrs{{"starts", V{start}}, {"ends", V{end}}, {"steps", V{step}}};
        Dim sym = AsTensor(InferOpType("slice", {F32({n})}, attrs))->shape[0];
        for (int64_t d = 0; d <= 9; ++d) {
          int64_t expect = static_cast<int64_t>(SliceIndices(d, start, end, step).size());
          SCOPED_TRACE(StrCat("d=", d, " start=", start, " end=", end, " step=", step,
                              " symbolic=", sym.ToString()));
          ASSERT_EQ(sym.TryEval({{"n", d}}), expect);
          ASSERT_EQ(AsTensor(InferOpType("slice", {F32({d})}, attrs))->shape[0].value(), expect);
        }
      }
}

TEST(Slice, Errors) {
  Type x = F32({4, 5});
  EXPECT_EQ(InferError("slice", {x}, {{"starts", V{0}}, {"ends", V{1}}, {"steps", V{0}}}),
            "slice: input [4, 5]: steps [0]: a step of 0");
  EXPECT_THAT(InferError("slice", {x}, {{"starts", V{0, 1}}, {"ends", V{1}}}),
              HasSubstr("input [4, 5]: starts [0, 1] and ends [1] differ in length"));
  EXPECT_THAT(InferError("slice", {x}, {{"starts", V{0}}, {"ends", V{1}}, {"axes", V{2}}}),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(
      InferError("slice", {x}, {{"starts", V{0, 0}}, {"ends", V{1, 1}}, {"axes", V{1, -1}}}),
      HasSubstr("axis -1 appears twice in axes [1, -1]"));
  EXPECT_THAT(InferError("slice", {x}, {{"starts", V{0}}, {"ends", V{1}}, {"axes", V{0, 1}}}),
              HasSubstr("axes [0, 1] and starts [0] differ in length"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("slice", {x}, {{"starts", V{0}}});
              }),
              HasSubstr("required attribute 'ends' is missing"));
}

TEST(Slice, KernelHandValues) {
  Tensor x = MakeTensor<float>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(TensorsNear(
      RunOpReference("slice", {x},
                     {{"starts", V{1}}, {"ends", V{kMax}}, {"axes", V{-1}}, {"steps", V{2}}})[0],
      MakeTensor<float>({2, 2}, {1, 3, 6, 8})));
  EXPECT_TRUE(TensorsNear(
      RunOpReference("slice", {x},
                     {{"starts", V{-1, -2}}, {"ends", V{kMin, 0}}, {"steps", V{-1, -2}}})[0],
      MakeTensor<float>({2, 2}, {8, 6, 3, 1})));
  EXPECT_TRUE(TensorsNear(RunOpReference("slice", {x}, {{"starts", V{1}}, {"ends", V{2}}})[0],
                          MakeTensor<float>({1, 5}, {5, 6, 7, 8, 9})));
  EXPECT_EQ(
      RunOpReference("slice", {x}, {{"starts", V{3}}, {"ends", V{1}}, {"axes", V{1}}})[0].shape(),
      (V{2, 0}));
}

TEST(Slice, RandomAgainstIndexArithmetic) {
  std::mt19937_64 rng(42);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const V shape = {5, 1, 7};
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kInt8}) {
    Tensor x = RandomTensor(dt, shape, 9, -100, 100);
    for (int trial = 0; trial < 50; ++trial) {
      V starts, ends, axes, steps;
      std::vector<V> picked(3);  // indices read along each axis
      for (int a = 0; a < 3; ++a) picked[a] = SliceIndices(shape[a], 0, shape[a], 1);
      for (int a = 0; a < 3; ++a) {
        if (pick(0, 3) == 0) continue;  // leave some axes unsliced
        int64_t s = pick(-9, 9), e = pick(-9, 9), st = pick(1, 3) * (pick(0, 1) ? 1 : -1);
        starts.push_back(s);
        ends.push_back(e);
        steps.push_back(st);
        axes.push_back(pick(0, 1) ? a : a - 3);
        picked[a] = SliceIndices(shape[a], s, e, st);
      }
      Tensor y = RunOpReference(
          "slice", {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}})[0];
      V expect_shape = {static_cast<int64_t>(picked[0].size()),
                        static_cast<int64_t>(picked[1].size()),
                        static_cast<int64_t>(picked[2].size())};
      ASSERT_EQ(y.shape(), expect_shape);
      for (size_t i = 0; i < picked[0].size(); ++i)
        for (size_t j = 0; j < picked[1].size(); ++j)
          for (size_t k = 0; k < picked[2].size(); ++k) {
            V out_idx = {static_cast<int64_t>(i), static_cast<int64_t>(j), static_cast<int64_t>(k)};
            ASSERT_EQ(y.GetAsDouble(Offset(out_idx, expect_shape)),
                      x.GetAsDouble(Offset({picked[0][i], picked[1][j], picked[2][k]}, shape)));
          }
    }
  }
}

// ---------------------------------------------------------------- gather

TEST(Gather, Shapes) {
  EXPECT_EQ(Infer("gather", {F32({5, 3}), I64({2})}), "f32[2, 3]");
  EXPECT_EQ(Infer("gather", {F32({5, 3}), I64({2, 2})}, {{"axis", int64_t{1}}}), "f32[5, 2, 2]");
  EXPECT_EQ(Infer("gather", {F32({5, 3}), I64({})}), "f32[3]");
  EXPECT_EQ(
      Infer("gather", {F32({5, 3, 4}), TensorType({7}, DType::kInt32)}, {{"axis", int64_t{-2}}}),
      "f32[5, 7, 4]");
  EXPECT_EQ(Infer("gather",
                  {TensorType({S("vocab"), 768}, DType::kFloat16), I64({S("batch"), S("seq")})}),
            "f16[batch, seq, 768]");
}

TEST(Gather, Errors) {
  EXPECT_EQ(InferError("gather", {F32({5, 3}), F32({2})}),
            "gather: indices must be i32 or i64, got f32");
  EXPECT_THAT(InferError("gather", {F32({5, 3}), I64({2})}, {{"axis", int64_t{2}}}),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(InferError("gather", {F32({}), I64({2})}), HasSubstr("cannot gather from a scalar"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("gather", {F32({5})}); }),
              HasSubstr("expects 2 inputs, got 1"));
}

TEST(Gather, KernelHandValues) {
  Tensor data = MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(TensorsNear(RunOpReference("gather", {data, MakeTensor<int64_t>({3}, {2, 0, -1})})[0],
                          MakeTensor<float>({3, 2}, {5, 6, 1, 2, 5, 6})));
  EXPECT_TRUE(TensorsNear(RunOpReference("gather", {data, MakeTensor<int32_t>({2, 1}, {1, -2})},
                                         {{"axis", int64_t{1}}})[0],
                          MakeTensor<float>({3, 2, 1}, {2, 1, 4, 3, 6, 5})));
  EXPECT_TRUE(TensorsNear(RunOpReference("gather", {data, Tensor::Scalar<int64_t>(1)})[0],
                          MakeTensor<float>({2}, {3, 4})));
  Tensor none = Tensor::Empty(DType::kInt64, {0});
  EXPECT_EQ(RunOpReference("gather", {data, none})[0].shape(), (V{0, 2}));
}

TEST(Gather, OutOfRangeIndexIsAnErrorNotARead) {
  Tensor data = MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  for (int64_t bad : V{3, -4, kMax, kMin}) {
    try {
      RunOpReference("gather", {data, MakeTensor<int64_t>({2}, {0, bad})});
      ADD_FAILURE() << "no error for index " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(),
                  HasSubstr(StrCat("index ", bad, " is out of range for axis 0 of size 3")));
    }
  }
  EXPECT_THAT(
      ErrorMessage([&] {
        RunOpReference("gather", {data, MakeTensor<int32_t>({1}, {2})}, {{"axis", int64_t{1}}});
      }),
      HasSubstr("index 2 is out of range for axis 1 of size 2 in [3, 2]"));
}

TEST(Gather, RandomAgainstIndexArithmetic) {
  const V shape = {4, 5, 3};
  std::mt19937_64 rng(3);
  for (DType dt : {DType::kFloat32, DType::kUInt8, DType::kBool}) {
    Tensor data = RandomTensor(dt, shape, 17, 0, 200);
    for (int axis = 0; axis < 3; ++axis) {
      int64_t dim = shape[axis];
      Tensor idx = Tensor::Empty(DType::kInt64, {2, 3});
      for (int64_t i = 0; i < 6; ++i) {
        idx.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng);
      }
      Tensor y = RunOpReference("gather", {data, idx}, {{"axis", int64_t{axis - 3}}})[0];
      V ys = shape;
      ys[axis] = 2;
      ys.insert(ys.begin() + axis + 1, 3);
      ASSERT_EQ(y.shape(), ys);
      V out_idx(4);
      for (int64_t o = 0; o < y.numel(); ++o) {
        int64_t r = o;
        for (int k = 3; k >= 0; --k) {
          out_idx[k] = r % ys[k];
          r /= ys[k];
        }
        int64_t k = idx.data<int64_t>()[out_idx[axis] * 3 + out_idx[axis + 1]];
        V in_idx;
        for (int a = 0; a < 3; ++a) {
          if (a < axis) in_idx.push_back(out_idx[a]);
          if (a == axis) in_idx.push_back(k < 0 ? k + dim : k);
          if (a > axis) in_idx.push_back(out_idx[a + 1]);
        }
        ASSERT_EQ(y.GetAsDouble(o), data.GetAsDouble(Offset(in_idx, shape)));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
