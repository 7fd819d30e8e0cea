#include <gmock/gmock.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

Attrs Axes(std::vector<int64_t> axes, bool keepdims = true) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

// ---- type relations ----

TEST(Reduce, ShapesForSeveralAxisSets) {
  Type x = F32({2, 3, 4});
  EXPECT_EQ(Infer("sum", {x}, Axes({1})), "f32[2, 1, 4]");
  EXPECT_EQ(Infer("sum", {x}, Axes({1}, false)), "f32[2, 4]");
  EXPECT_EQ(Infer("max", {x}, Axes({-1, 0})), "f32[1, 3, 1]");
  EXPECT_EQ(Infer("max", {x}, Axes({-1, 0}, false)), "f32[3]");
  EXPECT_EQ(Infer("mean", {x}, Axes({0, 1, 2}, false)), "f32[]");
  EXPECT_EQ(Infer("l2", {x}, Axes({-2})), "f32[2, 1, 4]");
}

TEST(Reduce, EmptyAxesMeanAllUnlessNoop) {
  Type x = F32({2, 3, 4});
  EXPECT_EQ(Infer("sum", {x}), "f32[1, 1, 1]");
  EXPECT_EQ(Infer("prod", {x}, {{"keepdims", false}}), "f32[]");
  EXPECT_EQ(Infer("sum", {x}, {{"noop_with_empty_axes", true}}), "f32[2, 3, 4]");
  EXPECT_EQ(Infer("sum", {x}, {{"noop_with_empty_axes", true}, {"axes", std::vector<int64_t>{0}}}),
            "f32[1, 3, 4]");
  EXPECT_EQ(Infer("sum", {F32({})}), "f32[]");
}

TEST(Reduce, SymbolicShapes) {
  Type x = F32({S("batch"), S("seq"), 64});
  EXPECT_EQ(Infer("sum", {x}, Axes({1}, false)), "f32[batch, 64]");
  EXPECT_EQ(Infer("mean", {x}, Axes({-1})), "f32[batch, seq, 1]");
  EXPECT_EQ(Infer("max", {F32({S("seq") * 2, 5})}, Axes({1}, false)), "f32[seq * 2]");
}

TEST(Reduce, DTypes) {
  Shape s{2, 3};
  EXPECT_EQ(Infer("sum", {TensorType(s, DType::kInt32)}, Axes({0})), "i32[1, 3]");
  EXPECT_EQ(Infer("prod", {TensorType(s, DType::kUInt8)}, Axes({0})), "u8[1, 3]");
  EXPECT_EQ(Infer("max", {TensorType(s, DType::kInt8)}, Axes({0})), "i8[1, 3]");
  EXPECT_EQ(Infer("min", {TensorType(s, DType::kFloat16)}, Axes({0})), "f16[1, 3]");
  EXPECT_EQ(Infer("mean", {TensorType(s, DType::kBFloat16)}, Axes({0})), "bf16[1, 3]");
  EXPECT_THAT(ErrorMessage([&] { Infer("mean", {TensorType(s, DType::kInt32)}); }),
              HasSubstr("mean: expects a float tensor, got i32[2, 3]"));
  EXPECT_THAT(ErrorMessage([&] { Infer("l2", {TensorType(s, DType::kInt64)}); }),
              HasSubstr("got i64[2, 3]"));
  EXPECT_THAT(ErrorMessage([&] { Infer("sum", {TensorType(s, DType::kBool)}); }),
              HasSubstr("sum: expects a float or integer tensor, got bool[2, 3]"));
}

TEST(Reduce, BadAxes) {
  Type x = F32({2, 3, 4});
  EXPECT_THAT(ErrorMessage([&] { Infer("sum", {x}, Axes({3})); }),
              HasSubstr("axis 3 is out of range for rank 3"));
  EXPECT_THAT(ErrorMessage([&] { Infer("sum", {x}, Axes({-4})); }),
              HasSubstr("axis -4 is out of range for rank 3"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("sum", {x}, Axes({1, -2}));
              }),
              HasSubstr("repeated axis in [1, -2]"));
}

TEST(Reduce, BadAttributes) {
  Type x = F32({2, 3});
  EXPECT_THAT(ErrorMessage([&] {
                Infer("sum", {x}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("op 'sum' has no attribute 'axis'"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("max", {x}, {{"keepdims", std::string("yes")}});
              }),
              HasSubstr("attribute 'keepdims' must be bool"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("min", {x}, {{"axes", 1.5}});
              }),
              HasSubstr("attribute 'axes' must be ints"));
}

TEST(Reduce, Patterns) {
  for (const char* op : {"sum", "mean", "max", "min", "prod", "l2", "argmax", "argmin"})
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern, OpPattern::kReduction) << op;
}

// ---- reference kernels: hand-computed values ----

Tensor X23() {
  return MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
}

TEST(ReduceKernel, SumMeanOverEachAxis) {
  EXPECT_TRUE(
      TensorsNear(RunOne("sum", {X23()}, Axes({0}, false)), MakeTensor<float>({3}, {5, 7, 9})));
  EXPECT_TRUE(TensorsNear(RunOne("sum", {X23()}, Axes({1})), MakeTensor<float>({2, 1}, {6, 15})));
  EXPECT_TRUE(TensorsNear(RunOne("sum", {X23()}), MakeTensor<float>({1, 1}, {21})));
  EXPECT_TRUE(
      TensorsNear(RunOne("mean", {X23()}, Axes({-1}, false)), MakeTensor<float>({2}, {2, 5})));
  EXPECT_TRUE(
      TensorsNear(RunOne("mean", {X23()}, {{"keepdims", false}}), MakeTensor<float>({}, {3.5f})));
}

TEST(ReduceKernel, MaxMinProdL2) {
  Tensor x = MakeTensor<float>({2, 3}, {3, -1, 2, 0.5f, 7, -4});
  EXPECT_TRUE(TensorsNear(RunOne("max", {x}, Axes({1}, false)), MakeTensor<float>({2}, {3, 7})));
  EXPECT_TRUE(
      TensorsNear(RunOne("min", {x}, Axes({0}, false)), MakeTensor<float>({3}, {0.5f, -1, -4})));
  EXPECT_TRUE(
      TensorsNear(RunOne("prod", {x}, Axes({0}, false)), MakeTensor<float>({3}, {1.5f, -7, -8})));
  EXPECT_TRUE(
      TensorsNear(RunOne("l2", {MakeTensor<float>({2, 2}, {3, 4, -5, 12})}, Axes({1}, false)),
                  MakeTensor<float>({2}, {5, 13})));
}

TEST(ReduceKernel, OddAndSizeOneDims) {
  // [1, 3, 1, 5]: values 0..14.
  std::vector<float> v(15);
  for (int i = 0; i < 15; ++i) v[i] = static_cast<float>(i);
  Tensor x = MakeTensor<float>({1, 3, 1, 5}, v);
  EXPECT_TRUE(TensorsNear(RunOne("sum", {x}, Axes({0, 2}, false)),
                          MakeTensor<float>({3, 5}, v)));  // only size-1 axes: a copy
  EXPECT_TRUE(TensorsNear(RunOne("sum", {x}, Axes({1})),
                          MakeTensor<float>({1, 1, 1, 5}, {15, 18, 21, 24, 27})));
  EXPECT_TRUE(
      TensorsNear(RunOne("max", {x}, Axes({-1}, false)), MakeTensor<float>({1, 3, 1}, {4, 9, 14})));
  Tensor one = MakeTensor<float>({1}, {-2.5f});
  EXPECT_TRUE(TensorsNear(RunOne("prod", {one}), MakeTensor<float>({1}, {-2.5f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("l2", {one}, {{"keepdims", false}}), MakeTensor<float>({}, {2.5f})));
}

TEST(ReduceKernel, ScalarInput) {
  Tensor s = Tensor::Scalar<float>(4.0f);
  EXPECT_TRUE(TensorsNear(RunOne("sum", {s}), s));
  EXPECT_TRUE(TensorsNear(RunOne("mean", {s}), s));
}

TEST(ReduceKernel, NoopWithEmptyAxesIsIdentity) {
  Tensor x = X23();
  EXPECT_TRUE(TensorsNear(RunOne("sum", {x}, {{"noop_with_empty_axes", true}}), x));
  EXPECT_TRUE(TensorsNear(RunOne("l2", {x}, {{"noop_with_empty_axes", true}}), x));
}

TEST(ReduceKernel, Integers) {
  Tensor i32 = MakeTensor<int32_t>({2, 3}, {1, -2, 3, 4, 5, -6});
  EXPECT_TRUE(
      TensorsNear(RunOne("sum", {i32}, Axes({1}, false)), MakeTensor<int32_t>({2}, {2, 3})));
  EXPECT_TRUE(TensorsNear(RunOne("prod", {i32}, Axes({0}, false)),
                          MakeTensor<int32_t>({3}, {4, -10, -18})));
  EXPECT_TRUE(
      TensorsNear(RunOne("max", {i32}, Axes({0}, false)), MakeTensor<int32_t>({3}, {4, 5, 3})));
  EXPECT_TRUE(
      TensorsNear(RunOne("min", {i32}, Axes({1}, false)), MakeTensor<int32_t>({2}, {-2, -6})));
  Tensor i64 = MakeTensor<int64_t>({3}, {int64_t{1} << 40, 3, -1});
  EXPECT_TRUE(TensorsNear(RunOne("prod", {i64}, {{"keepdims", false}}),
                          MakeTensor<int64_t>({}, {-(int64_t{3} << 40)})));
  Tensor u8 = MakeTensor<uint8_t>({4}, {200, 7, 255, 0});
  EXPECT_TRUE(TensorsNear(RunOne("max", {u8}), MakeTensor<uint8_t>({1}, {255})));
  EXPECT_TRUE(TensorsNear(RunOne("min", {u8}), MakeTensor<uint8_t>({1}, {0})));
}

TEST(ReduceKernel, IntegerOverflowWraps) {
  Tensor i8 = MakeTensor<int8_t>({2}, {100, 100});
  EXPECT_TRUE(TensorsNear(RunOne("sum", {i8}), MakeTensor<int8_t>({1}, {-56})));
  Tensor u8 = MakeTensor<uint8_t>({2}, {16, 17});
  EXPECT_TRUE(TensorsNear(RunOne("prod", {u8}), MakeTensor<uint8_t>({1}, {16})));  // 272 mod 256
}

TEST(ReduceKernel, HalfPrecision) {
  Tensor h = Tensor::Empty(DType::kFloat16, {2, 2});
  Tensor b = Tensor::Empty(DType::kBFloat16, {2, 2});
  for (int i = 0; i < 4; ++i) {
    h.SetFromDouble(i, i + 1);
    b.SetFromDouble(i, i + 1);
  }
  Tensor hs = RunOne("sum", {h}, Axes({0}, false));
  ASSERT_EQ(hs.dtype(), DType::kFloat16);
  EXPECT_EQ(hs.GetAsDouble(0), 4);
  EXPECT_EQ(hs.GetAsDouble(1), 6);
  Tensor bm = RunOne("mean", {b}, Axes({1}, false));
  ASSERT_EQ(bm.dtype(), DType::kBFloat16);
  EXPECT_EQ(bm.GetAsDouble(0), 1.5);
  EXPECT_EQ(bm.GetAsDouble(1), 3.5);
}

TEST(ReduceKernel, EmptyReductionGivesIdentity) {
  Tensor x = Tensor::Empty(DType::kFloat32, {0, 3});
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(TensorsNear(RunOne("sum", {x}, Axes({0})), MakeTensor<float>({1, 3}, {0, 0, 0})));
  EXPECT_TRUE(
      TensorsNear(RunOne("prod", {x}, Axes({0}, false)), MakeTensor<float>({3}, {1, 1, 1})));
  EXPECT_TRUE(TensorsNear(RunOne("l2", {x}, Axes({0}, false)), MakeTensor<float>({3}, {0, 0, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("max", {x}, Axes({0}, false)),
                          MakeTensor<float>({3}, {-inf, -inf, -inf})));
  EXPECT_TRUE(
      TensorsNear(RunOne("min", {x}, Axes({0}, false)), MakeTensor<float>({3}, {inf, inf, inf})));
  Tensor mean = RunOne("mean", {x}, Axes({0}, false));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(mean.GetAsDouble(i)));
  // Reducing the non-empty axis keeps the empty one: nothing to write.
  EXPECT_EQ(RunOne("sum", {x}, Axes({1})).shape(), (std::vector<int64_t>{0, 1}));
  Tensor xi = Tensor::Empty(DType::kInt32, {2, 0});
  EXPECT_TRUE(TensorsNear(RunOne("max", {xi}, Axes({1}, false)),
                          MakeTensor<int32_t>({2}, {std::numeric_limits<int32_t>::lowest(),
                                                    std::numeric_limits<int32_t>::lowest()})));
  EXPECT_TRUE(TensorsNear(RunOne("min", {xi}, Axes({1}, false)),
                          MakeTensor<int32_t>({2}, {std::numeric_limits<int32_t>::max(),
                                                    std::numeric_limits<int32_t>::max()})));
}

TEST(ReduceKernel, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = MakeTensor<float>({2, 3}, {1, nan, 3, 4, 5, 6});
  Tensor mx = RunOne("max", {x}, Axes({1}, false));
  Tensor mn = RunOne("min", {x}, Axes({1}, false));
  EXPECT_TRUE(std::isnan(mx.GetAsDouble(0)));
  EXPECT_EQ(mx.GetAsDouble(1), 6);
  EXPECT_TRUE(std::isnan(mn.GetAsDouble(0)));
  EXPECT_EQ(mn.GetAsDouble(1), 4);
}

// Independent reduction of a rank-3 tensor: explicit loops over all three dims, folding each
// element into the output cell its kept coordinates name.
std::vector<double> NaiveReduce(const Tensor& x, const std::vector<bool>& red,
                                const std::string& op) {
  int64_t d0 = x.shape()[0], d1 = x.shape()[1], d2 = x.shape()[2];
  int64_t o0 = red[0] ? 1 : d0, o1 = red[1] ? 1 : d1, o2 = red[2] ? 1 : d2;
  double init = op == "prod" ? 1 : op == "max" ? -INFINITY : op == "min" ? INFINITY : 0;
  std::vector<double> acc(o0 * o1 * o2, init);
  std::vector<int64_t> count(acc.size(), 0);
  for (int64_t a = 0; a < d0; ++a)
    for (int64_t b = 0; b < d1; ++b)
      for (int64_t c = 0; c < d2; ++c) {
        double v = x.GetAsDouble((a * d1 + b) * d2 + c);
        int64_t o = ((red[0] ? 0 : a) * o1 + (red[1] ? 0 : b)) * o2 + (red[2] ? 0 : c);
        double& r = acc[o];
        if (op == "sum" || op == "mean")
          r += v;
        else if (op == "prod")
          r *= v;
        else if (op == "max")
          r = std::max(r, v);
        else if (op == "min")
          r = std::min(r, v);
        else if (op == "l2")
          r += v * v;
        count[o]++;
      }
  for (size_t i = 0; i < acc.size(); ++i) {
    if (op == "mean") acc[i] /= count[i];
    if (op == "l2") acc[i] = std::sqrt(acc[i]);
  }
  return acc;
}

TEST(ReduceKernel, RandomAgainstNaiveLoops) {
  Tensor x = test::RandomTensor(DType::kFloat32, {3, 5, 7}, 42, -2.0, 2.0);
  std::vector<std::vector<int64_t>> axis_sets = {{0}, {1}, {2}, {-1}, {0, 2}, {-3, -2}, {1, 2}, {}};
  for (const char* op : {"sum", "mean", "max", "min", "prod", "l2"}) {
    for (const auto& axes : axis_sets) {
      std::vector<bool> red(3, axes.empty());
      for (int64_t a : axes) red[a < 0 ? a + 3 : a] = true;
      std::vector<double> want = NaiveReduce(x, red, op);
      for (bool keep : {true, false}) {
        Tensor got = RunOne(op, {x}, Axes(axes, keep));
        std::vector<int64_t> shape;
        for (int d = 0; d < 3; ++d)
          if (!red[d])
            shape.push_back(x.shape()[d]);
          else if (keep)
            shape.push_back(1);
        Tensor expected = Tensor::Empty(DType::kFloat32, shape);
        for (size_t i = 0; i < want.size(); ++i) expected.SetFromDouble(i, want[i]);
        EXPECT_TRUE(TensorsNear(got, expected, 1e-4, 1e-4))
            << op << " axes " << IntsToString(axes) << " keepdims " << keep;
      }
    }
  }
}

TEST(ReduceKernel, RandomIntegersAgainstNaiveLoops) {
  Tensor x = test::RandomTensor(DType::kInt64, {4, 3, 5}, 7, -9, 9);
  for (const char* op : {"sum", "max", "min"}) {
    std::vector<double> want = NaiveReduce(x, {true, false, true}, op);
    Tensor got = RunOne(op, {x}, Axes({0, 2}, false));
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{3}));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got.GetAsDouble(i), want[i]) << op;
  }
}

// ---- argmax / argmin ----

TEST(ArgReduce, Shapes) {
  Type x = F32({2, 3, 4});
  EXPECT_EQ(Infer("argmax", {x}), "i64[1, 3, 4]");
  EXPECT_EQ(Infer("argmax", {x}, {{"axis", int64_t{1}}}), "i64[2, 1, 4]");
  EXPECT_EQ(Infer("argmin", {x}, {{"axis", int64_t{-1}}, {"keepdims", false}}), "i64[2, 3]");
  EXPECT_EQ(Infer("argmin", {TensorType({5}, DType::kUInt8)}, {{"keepdims", false}}), "i64[]");
  EXPECT_EQ(Infer("argmax", {F32({})}), "i64[]");
  EXPECT_EQ(Infer("argmax", {F32({S("batch"), 10})}, {{"axis", int64_t{1}}, {"keepdims", false}}),
            "i64[batch]");
  EXPECT_EQ(Infer("argmax", {F32({S("batch"), S("n")})}, {{"axis", int64_t{-1}}}), "i64[batch, 1]");
}

TEST(ArgReduce, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("argmax", {F32({2, 3})}, {{"axis", int64_t{2}}});
              }),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("argmin", {F32({2, 0})}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("argmin: cannot take argmin over the empty axis 1 of [2, 0]"));
  EXPECT_THAT(ErrorMessage([&] { Infer("argmax", {TensorType({2}, DType::kBool)}); }),
              HasSubstr("got bool[2]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("argmax", {F32({2})}, {{"axes", std::vector<int64_t>{0}}});
              }),
              HasSubstr("op 'argmax' has no attribute 'axes'"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("argmax", {F32({2})}, {{"axis", 0.5}});
              }),
              HasSubstr("attribute 'axis' must be int"));
}

TEST(ArgReduceKernel, FirstOrLastOccurrence) {
  Tensor x = MakeTensor<float>({2, 3}, {1, 3, 3, 5, 2, 5});
  Attrs last = {{"axis", int64_t{1}}, {"keepdims", false}, {"select_last_index", true}};
  Attrs first = {{"axis", int64_t{1}}, {"keepdims", false}};
  EXPECT_TRUE(TensorsNear(RunOne("argmax", {x}, first), MakeTensor<int64_t>({2}, {1, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("argmax", {x}, last), MakeTensor<int64_t>({2}, {2, 2})));
  Tensor y = MakeTensor<float>({2, 3}, {4, 1, 1, 2, 9, 2});
  EXPECT_TRUE(TensorsNear(RunOne("argmin", {y}, first), MakeTensor<int64_t>({2}, {1, 0})));
  EXPECT_TRUE(TensorsNear(RunOne("argmin", {y}, last), MakeTensor<int64_t>({2}, {2, 2})));
  EXPECT_TRUE(TensorsNear(RunOne("argmin", {y}), MakeTensor<int64_t>({1, 3}, {1, 0, 0})));
}

TEST(ArgReduceKernel, IntegersSizeOneAndScalar) {
  Tensor x = MakeTensor<int8_t>({3, 1}, {-5, 7, 7});
  EXPECT_TRUE(TensorsNear(RunOne("argmax", {x}), MakeTensor<int64_t>({1, 1}, {1})));
  EXPECT_TRUE(TensorsNear(RunOne("argmin", {x}, {{"axis", int64_t{1}}}),
                          MakeTensor<int64_t>({3, 1}, {0, 0, 0})));
  EXPECT_TRUE(
      TensorsNear(RunOne("argmax", {Tensor::Scalar<float>(3)}), MakeTensor<int64_t>({}, {0})));
  // An empty tensor whose reduced axis is not empty: an empty result, nothing read.
  EXPECT_EQ(
      RunOne("argmax", {Tensor::Empty(DType::kFloat32, {0, 4})}, {{"axis", int64_t{1}}}).shape(),
      (std::vector<int64_t>{0, 1}));
}

TEST(ArgReduceKernel, NaNIsTheExtreme) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = MakeTensor<float>({5}, {1, nan, 9, nan, -3});
  EXPECT_TRUE(TensorsNear(RunOne("argmax", {x}), MakeTensor<int64_t>({1}, {1})));
  EXPECT_TRUE(TensorsNear(RunOne("argmin", {x}), MakeTensor<int64_t>({1}, {1})));
  EXPECT_TRUE(TensorsNear(RunOne("argmax", {x}, {{"select_last_index", true}}),
                          MakeTensor<int64_t>({1}, {3})));
}

TEST(ArgReduceKernel, RandomAgainstNaiveLoops) {
  Tensor x = test::RandomTensor(DType::kFloat32, {3, 4, 5}, 9);
  for (int axis = -3; axis < 3; ++axis) {
    int a = axis < 0 ? axis + 3 : axis;
    Tensor got = RunOne("argmax", {x}, {{"axis", int64_t{axis}}, {"keepdims", false}});
    Tensor got_min = RunOne("argmin", {x}, {{"axis", int64_t{axis}}, {"keepdims", false}});
    std::vector<int64_t> s = x.shape();
    int64_t cells = x.numel() / s[a];
    ASSERT_EQ(got.numel(), cells);
    int64_t o = 0;
    for (int64_t i = 0; i < s[0]; ++i)
      for (int64_t j = 0; j < s[1]; ++j)
        for (int64_t k = 0; k < s[2]; ++k) {
          int64_t pos[3] = {i, j, k};
          if (pos[a] != 0) continue;
          int64_t best = 0, worst = 0;
          double bv = -INFINITY, wv = INFINITY;
          for (int64_t t = 0; t < s[a]; ++t) {
            pos[a] = t;
            double v = x.GetAsDouble((pos[0] * s[1] + pos[1]) * s[2] + pos[2]);
            if (v > bv) bv = v, best = t;
            if (v < wv) wv = v, worst = t;
          }
          EXPECT_EQ(got.GetAsDouble(o), best) << "axis " << axis << " cell " << o;
          EXPECT_EQ(got_min.GetAsDouble(o), worst) << "axis " << axis << " cell " << o;
          ++o;
        }
  }
}

TEST(ReduceKernel, LogSumLogSumExpSumSquareL1) {
  Tensor x = test::Floats({2, 3}, {1, 2, 3, -1, 0.5f, -2});
  Attrs rows = {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}};
  EXPECT_TRUE(test::TensorsNear(RunOpReference("sum_square", {x}, rows).at(0),
                                test::Floats({2}, {14, 5.25f})));
  EXPECT_TRUE(
      test::TensorsNear(RunOpReference("l1", {x}, rows).at(0), test::Floats({2}, {6, 3.5f})));
  EXPECT_TRUE(test::TensorsNear(RunOpReference("log_sum", {x}, rows).at(0),
                                test::Floats({2}, {1.79175947f, std::nanf("")})));
  EXPECT_TRUE(test::TensorsNear(RunOpReference("log_sum_exp", {x}, rows).at(0),
                                test::Floats({2}, {3.40760596f, 0.76636790f})));
  // Max-shifted: no overflow.
  EXPECT_TRUE(
      test::TensorsNear(RunOpReference("log_sum_exp", {test::Floats({2}, {1000, 1000})}).at(0),
                        test::Floats({1}, {1000.69314718f})));
  // Over no axes (noop_with_empty_axes) each element is transformed alone.
  Attrs noop = {{"noop_with_empty_axes", true}};
  EXPECT_TRUE(test::TensorsNear(RunOpReference("l1", {x}, noop).at(0),
                                test::Floats({2, 3}, {1, 2, 3, 1, 0.5f, 2})));
  EXPECT_TRUE(test::TensorsNear(RunOpReference("log_sum_exp", {x}, noop).at(0), x));
  // Integers wrap.
  Tensor i = test::MakeTensor<int8_t>({3}, {-128, 100, 1});
  EXPECT_TRUE(test::TensorsNear(RunOpReference("l1", {i}).at(0),
                                test::MakeTensor<int8_t>({1}, {static_cast<int8_t>(-27)})));
  EXPECT_THAT(test::InferError("log_sum", {TensorType({2}, DType::kInt32)}),
              ::testing::HasSubstr("expects a float tensor"));
}

}  // namespace
}  // namespace kiln
