#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::F32;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RandomTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

// [batch..., M, N] = [batch..., M, K] x [batch..., K, N] with both operands already broadcast to
// the same batch count, computed the schoolbook way in double.
Tensor NaiveBatchedMatmul(const Tensor& a, const Tensor& b, int64_t batch, int64_t m, int64_t k,
                          int64_t n, const std::vector<int64_t>& out_shape) {
  Tensor out = Tensor::Empty(a.dtype(), out_shape);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q)
          acc += a.GetAsDouble(p * m * k + i * k + q) * b.GetAsDouble(p * k * n + q * n + j);
        out.SetFromDouble(p * m * n + i * n + j, acc);
      }
  return out;
}

// ---------------------------------------------------------------------------------------------
// matmul: type relation

TEST(MatmulType, Concrete2D) {
  EXPECT_EQ(Infer("matmul", {F32({3, 4}), F32({4, 5})}), "f32[3, 5]");
  EXPECT_EQ(Infer("matmul", {F32({1, 1}), F32({1, 1})}), "f32[1, 1]");
  EXPECT_EQ(Infer("matmul", {F32({0, 4}), F32({4, 0})}), "f32[0, 0]");
  EXPECT_EQ(Infer("matmul", {F32({3, 0}), F32({0, 5})}), "f32[3, 5]");
  EXPECT_EQ(Infer("matmul", {TensorType({2, 3}, DType::kInt64), TensorType({3, 2}, DType::kInt64)}),
            "i64[2, 2]");
}

TEST(MatmulType, SymbolicBatch) {
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("matmul", {F32({S("batch"), 784}), F32({784, 10})}, {}, &constraints),
            "f32[batch, 10]");
  EXPECT_TRUE(constraints.empty());
  EXPECT_EQ(Infer("matmul", {F32({S("b"), S("seq"), 64}), F32({S("b"), 64, S("seq")})}),
            "f32[b, seq, seq]");
  EXPECT_EQ(Infer("matmul", {F32({S("seq") * 2, 8}), F32({8, S("seq")})}), "f32[seq * 2, seq]");
}

TEST(MatmulType, SymbolicInnerDimsBecomeAConstraint) {
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("matmul", {F32({2, S("k")}), F32({S("n"), 3})}, {}, &constraints), "f32[2, 3]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_EQ(constraints[0].kind, DimConstraint::Kind::kEqual);
  EXPECT_THAT(constraints[0].ToString(), HasSubstr("inner dimensions differ: [2, k] x [n, 3]"));
}

TEST(MatmulType, BatchDimsBroadcast) {
  EXPECT_EQ(Infer("matmul", {F32({2, 1, 3, 4}), F32({5, 4, 6})}), "f32[2, 5, 3, 6]");
  EXPECT_EQ(Infer("matmul", {F32({5, 4, 6}), F32({2, 1, 6, 3})}), "f32[2, 5, 4, 3]");
  EXPECT_EQ(Infer("matmul", {F32({7, 3, 4}), F32({4, 2})}), "f32[7, 3, 2]");
  EXPECT_EQ(Infer("matmul", {F32({3, 4}), F32({7, 4, 2})}), "f32[7, 3, 2]");
  EXPECT_EQ(Infer("matmul", {F32({0, 3, 4}), F32({1, 4, 2})}), "f32[0, 3, 2]");
  // A symbolic batch dim against 1 stays symbolic; two different symbols give their max and a
  // constraint to check once bound.
  EXPECT_EQ(Infer("matmul", {F32({S("b"), 3, 4}), F32({1, 4, 2})}), "f32[b, 3, 2]");
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("matmul", {F32({S("b"), 3, 4}), F32({S("c"), 4, 2})}, {}, &constraints),
            "f32[max(b, c), 3, 2]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_EQ(constraints[0].kind, DimConstraint::Kind::kBroadcast);
}

TEST(MatmulType, OneDimensionalOperands) {
  EXPECT_EQ(Infer("matmul", {F32({4}), F32({4})}), "f32[]");
  EXPECT_EQ(Infer("matmul", {F32({4}), F32({4, 5})}), "f32[5]");
  EXPECT_EQ(Infer("matmul", {F32({3, 4}), F32({4})}), "f32[3]");
  EXPECT_EQ(Infer("matmul", {F32({2, 3, 4}), F32({4})}), "f32[2, 3]");
  EXPECT_EQ(Infer("matmul", {F32({4}), F32({2, 4, 5})}), "f32[2, 5]");
  EXPECT_EQ(Infer("matmul", {F32({S("k")}), F32({S("k")})}), "f32[]");
  EXPECT_THAT(InferError("matmul", {F32({4}), F32({5})}),
              HasSubstr("inner dimensions differ: [4] x [5]"));
  EXPECT_THAT(InferError("matmul", {F32({4}), F32({5, 4})}),
              HasSubstr("inner dimensions differ: [4] x [5, 4]"));
  EXPECT_THAT(InferError("matmul", {F32({3, 4}), F32({3})}),
              HasSubstr("inner dimensions differ: [3, 4] x [3]"));
}

TEST(MatmulType, InnerMismatchNamesTheShapes) {
  std::string msg = InferError("matmul", {F32({S("batch"), 784}), F32({512, 1024})});
  EXPECT_THAT(msg, HasSubstr("inner dimensions differ: [batch, 784] x [512, 1024]"));
  EXPECT_THAT(msg, HasSubstr("matmul: "));
  msg = InferError("matmul", {F32({2, 5, 3}), F32({2, 4, 6})});
  EXPECT_THAT(msg, HasSubstr("inner dimensions differ: [2, 5, 3] x [2, 4, 6]"));
}

TEST(MatmulType, BatchMismatchNamesTheShapes) {
  std::string msg = InferError("matmul", {F32({2, 3, 4}), F32({3, 4, 5})});
  EXPECT_THAT(msg, HasSubstr("batch dimensions of [2, 3, 4] x [3, 4, 5] do not broadcast"));
}

TEST(MatmulType, RejectsBadOperands) {
  EXPECT_THAT(InferError("matmul", {F32({}), F32({3})}),
              HasSubstr("operands must have rank >= 1, got [] x [3]"));
  EXPECT_THAT(InferError("matmul", {F32({2, 3}), TensorType({3, 2}, DType::kFloat16)}),
              HasSubstr("operands have different dtypes: f32[2, 3] and f16[3, 2]"));
  for (DType dt : {DType::kInt8, DType::kInt16, DType::kUInt8, DType::kBool}) {
    EXPECT_THAT(InferError("matmul", {TensorType({2, 3}, dt), TensorType({3, 2}, dt)}),
                HasSubstr(StrCat("dtype ", DTypeName(dt), " is not supported")));
  }
  EXPECT_THAT(InferError("matmul", {F32({2, 3})}), HasSubstr("expects 2 inputs, got 1"));
  EXPECT_THAT(InferError("matmul", {F32({2, 3}), TupleType({F32({3})})}),
              HasSubstr("argument 1 must be a tensor"));
}

TEST(MatmulType, HasNoAttributes) {
  EXPECT_THAT(InferError("matmul", {F32({2, 3}), F32({3, 2})}, {{"transpose_a", true}}),
              HasSubstr("has no attribute 'transpose_a'"));
  EXPECT_EQ(OpRegistry::Global().Get("matmul").pattern, OpPattern::kOutputFusable);
  EXPECT_EQ(OpRegistry::Global().Get("gemm").pattern, OpPattern::kOutputFusable);
}

// ---------------------------------------------------------------------------------------------
// matmul: reference kernel

TEST(MatmulKernel, HandComputed2D) {
  Tensor a = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {a, b}), MakeTensor<float>({2, 2}, {58, 64, 139, 154})));
}

TEST(MatmulKernel, HandComputedOneDimensional) {
  Tensor v = MakeTensor<float>({3}, {1, 2, 3});
  Tensor w = MakeTensor<float>({3}, {4, 5, 6});
  Tensor m = MakeTensor<float>({3, 2}, {1, 0, 0, 1, 2, -1});
  Tensor mt = MakeTensor<float>({2, 3}, {1, 0, 2, 0, 1, -1});
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {v, w}), Tensor::Scalar<float>(32)));
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {v, m}), MakeTensor<float>({2}, {7, -1})));
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {mt, v}), MakeTensor<float>({2}, {7, -1})));
  // A batched left operand with a 1-D right one: one matrix-vector product per batch.
  Tensor batched = MakeTensor<float>({2, 1, 3}, {1, 1, 1, 0, 0, 2});
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {batched, v}), MakeTensor<float>({2, 1}, {6, 6})));
  Tensor batched_r = MakeTensor<float>({2, 3, 1}, {1, 1, 1, 0, 0, 2});
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {v, batched_r}), MakeTensor<float>({2, 1}, {6, 6})));
}

TEST(MatmulKernel, SizeOneAndEmpty) {
  EXPECT_TRUE(TensorsNear(
      RunOne("matmul", {MakeTensor<float>({1, 1}, {3}), MakeTensor<float>({1, 1}, {-2})}),
      MakeTensor<float>({1, 1}, {-6})));
  EXPECT_TRUE(
      TensorsNear(RunOne("matmul", {MakeTensor<float>({1}, {3}), MakeTensor<float>({1}, {4})}),
                  Tensor::Scalar<float>(12)));
  // K = 0: every output is an empty sum.
  Tensor z = RunOne(
      "matmul", {Tensor::Empty(DType::kFloat32, {2, 0}), Tensor::Empty(DType::kFloat32, {0, 3})});
  EXPECT_TRUE(TensorsNear(z, Tensor::Empty(DType::kFloat32, {2, 3})));
  Tensor dot0 =
      RunOne("matmul", {Tensor::Empty(DType::kFloat32, {0}), Tensor::Empty(DType::kFloat32, {0})});
  EXPECT_TRUE(TensorsNear(dot0, Tensor::Scalar<float>(0)));
  EXPECT_EQ(RunOne("matmul",
                   {Tensor::Empty(DType::kFloat32, {0, 4}), RandomTensor(DType::kFloat32, {4, 3})})
                .shape(),
            (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(RunOne("matmul", {Tensor::Empty(DType::kFloat32, {0, 2, 4}),
                              RandomTensor(DType::kFloat32, {4, 3})})
                .shape(),
            (std::vector<int64_t>{0, 2, 3}));
}

TEST(MatmulKernel, RandomAgainstNaiveLoop) {
  struct Size {
    int64_t m, k, n;
  };
  uint64_t seed = 10;
  for (Size s : {Size{7, 13, 5}, Size{1, 1, 1}, Size{1, 9, 1}, Size{5, 1, 3}, Size{64, 96, 80},
                 Size{3, 257, 2}}) {
    Tensor a = RandomTensor(DType::kFloat32, {s.m, s.k}, seed++);
    Tensor b = RandomTensor(DType::kFloat32, {s.k, s.n}, seed++);
    Tensor want = NaiveBatchedMatmul(a, b, 1, s.m, s.k, s.n, {s.m, s.n});
    EXPECT_TRUE(TensorsNear(RunOne("matmul", {a, b}), want, 1e-5, 1e-5))
        << s.m << "x" << s.k << "x" << s.n;
  }
}

TEST(MatmulKernel, RandomBatchBroadcastAgainstNaiveLoop) {
  // [2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6]: a's batch index (p, 0), b's batch index q.
  Tensor a = RandomTensor(DType::kFloat32, {2, 1, 3, 4}, 3);
  Tensor b = RandomTensor(DType::kFloat32, {5, 4, 6}, 4);
  Tensor a_b = Tensor::Empty(DType::kFloat32, {10, 3, 4});
  Tensor b_b = Tensor::Empty(DType::kFloat32, {10, 4, 6});
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 5; ++q) {
      int64_t out_batch = p * 5 + q;
      for (int64_t e = 0; e < 12; ++e)
        a_b.SetFromDouble(out_batch * 12 + e, a.GetAsDouble(p * 12 + e));
      for (int64_t e = 0; e < 24; ++e)
        b_b.SetFromDouble(out_batch * 24 + e, b.GetAsDouble(q * 24 + e));
    }
  Tensor want = NaiveBatchedMatmul(a_b, b_b, 10, 3, 4, 6, {2, 5, 3, 6});
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {a, b}), want));

  // Same batch on both sides, odd sizes.
  Tensor c = RandomTensor(DType::kFloat32, {3, 7, 5}, 5);
  Tensor d = RandomTensor(DType::kFloat32, {3, 5, 9}, 6);
  EXPECT_TRUE(
      TensorsNear(RunOne("matmul", {c, d}), NaiveBatchedMatmul(c, d, 3, 7, 5, 9, {3, 7, 9})));

  // A 2-D right operand is shared by every batch.
  Tensor e = RandomTensor(DType::kFloat32, {4, 2, 3}, 7);
  Tensor f = RandomTensor(DType::kFloat32, {3, 5}, 8);
  Tensor f_b = Tensor::Empty(DType::kFloat32, {4, 3, 5});
  for (int64_t i = 0; i < f_b.numel(); ++i) f_b.SetFromDouble(i, f.GetAsDouble(i % 15));
  EXPECT_TRUE(
      TensorsNear(RunOne("matmul", {e, f}), NaiveBatchedMatmul(e, f_b, 4, 2, 3, 5, {4, 2, 5})));
}

TEST(MatmulKernel, OtherFloatDTypes) {
  Tensor a64 = RandomTensor(DType::kFloat64, {7, 13}, 20);
  Tensor b64 = RandomTensor(DType::kFloat64, {13, 5}, 21);
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {a64, b64}),
                          NaiveBatchedMatmul(a64, b64, 1, 7, 13, 5, {7, 5}), 1e-12, 1e-12));
  // Small integers are exact in f16 and bf16, and so are these products and sums.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    Tensor a = Tensor::Empty(dt, {2, 3});
    Tensor b = Tensor::Empty(dt, {3, 2});
    const double av[] = {1, 2, 3, 4, 5, 6}, bv[] = {7, 8, 9, 10, 11, 12};
    for (int i = 0; i < 6; ++i) {
      a.SetFromDouble(i, av[i]);
      b.SetFromDouble(i, bv[i]);
    }
    Tensor want = Tensor::Empty(dt, {2, 2});
    const double wv[] = {58, 64, 139, 154};
    for (int i = 0; i < 4; ++i) want.SetFromDouble(i, wv[i]);
    EXPECT_TRUE(TensorsNear(RunOne("matmul", {a, b}), want, 0, 0)) << DTypeName(dt);

    Tensor ra = RandomTensor(dt, {7, 13}, 30);
    Tensor rb = RandomTensor(dt, {13, 5}, 31);
    EXPECT_TRUE(TensorsNear(RunOne("matmul", {ra, rb}),
                            NaiveBatchedMatmul(ra, rb, 1, 7, 13, 5, {7, 5}), 1e-2, 1e-2))
        << DTypeName(dt);
  }
}

TEST(MatmulKernel, IntegersAreExact) {
  Tensor a = MakeTensor<int32_t>({2, 3}, {1, -2, 3, 4, 5, -6});
  Tensor b = MakeTensor<int32_t>({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor out = RunOne("matmul", {a, b});
  EXPECT_EQ(out.dtype(), DType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(out.data<int32_t>(), out.data<int32_t>() + 4),
            (std::vector<int32_t>{22, 24, 7, 10}));
  // Products beyond int32 that cancel: accumulated in 64 bits.
  Tensor big = RunOne("matmul", {MakeTensor<int32_t>({1, 2}, {65536, -65536}),
                                 MakeTensor<int32_t>({2, 1}, {65536, 65535})});
  EXPECT_EQ(big.data<int32_t>()[0], 65536);
  // An int64 result that double could not hold exactly.
  Tensor wide = RunOne(
      "matmul", {MakeTensor<int64_t>({1}, {3000000000001}), MakeTensor<int64_t>({1}, {3000001})});
  EXPECT_EQ(wide.data<int64_t>()[0], int64_t{9000003000003000001});

  Tensor ra = RandomTensor(DType::kInt64, {7, 13}, 40, -100, 100);
  Tensor rb = RandomTensor(DType::kInt64, {13, 5}, 41, -100, 100);
  EXPECT_TRUE(TensorsNear(RunOne("matmul", {ra, rb}),
                          NaiveBatchedMatmul(ra, rb, 1, 7, 13, 5, {7, 5}), 0, 0));
}

TEST(MatmulKernel, NonFiniteValuesPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor a = MakeTensor<float>({1, 2}, {inf, 1});
  Tensor b = MakeTensor<float>({2, 2}, {1, 0, 1, 1});
  Tensor out = RunOne("matmul", {a, b});
  EXPECT_EQ(out.data<float>()[0], inf);
  EXPECT_TRUE(std::isnan(out.data<float>()[1]));  // inf * 0
}

// ---------------------------------------------------------------------------------------------
// gemm: type relation

Attrs GemmAttrs(bool ta, bool tb, double alpha = 1.0, double beta = 1.0) {
  return {{"transA", ta}, {"transB", tb}, {"alpha", alpha}, {"beta", beta}};
}

TEST(GemmType, EveryTransposeCombination) {
  // M = 3, K = 4, N = 5 in every layout.
  EXPECT_EQ(Infer("gemm", {F32({3, 4}), F32({4, 5})}), "f32[3, 5]");
  EXPECT_EQ(Infer("gemm", {F32({4, 3}), F32({4, 5})}, GemmAttrs(true, false)), "f32[3, 5]");
  EXPECT_EQ(Infer("gemm", {F32({3, 4}), F32({5, 4})}, GemmAttrs(false, true)), "f32[3, 5]");
  EXPECT_EQ(Infer("gemm", {F32({4, 3}), F32({5, 4})}, GemmAttrs(true, true)), "f32[3, 5]");
  EXPECT_EQ(
      Infer("gemm", {F32({S("batch"), 784}), F32({10, 784}), F32({10})}, GemmAttrs(false, true)),
      "f32[batch, 10]");
}

TEST(GemmType, InnerMismatchNamesTheShapes) {
  EXPECT_THAT(InferError("gemm", {F32({S("batch"), 784}), F32({512, 1024})}),
              HasSubstr("inner dimensions differ: [batch, 784] x [512, 1024]"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5})}, GemmAttrs(true, false)),
              HasSubstr("inner dimensions differ: [3, 4]^T x [4, 5]"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5})}, GemmAttrs(false, true)),
              HasSubstr("inner dimensions differ: [3, 4] x [4, 5]^T"));
}

TEST(GemmType, CBroadcastsOneWay) {
  for (const Shape& c : std::vector<Shape>{{}, {5}, {1}, {3, 1}, {1, 5}, {3, 5}, {1, 1}}) {
    EXPECT_EQ(Infer("gemm", {F32({3, 4}), F32({4, 5}), F32(c)}), "f32[3, 5]") << ShapeToString(c);
  }
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5}), F32({3})}),
              HasSubstr("C [3] does not broadcast to [3, 5]"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5}), F32({3, 6})}),
              HasSubstr("C [3, 6] does not broadcast to [3, 5]"));
  // Unidirectional: C may not make the output bigger.
  EXPECT_THAT(InferError("gemm", {F32({1, 4}), F32({4, 5}), F32({3, 5})}),
              HasSubstr("C [3, 5] does not broadcast to [1, 5]"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5}), F32({1, 3, 5})}),
              HasSubstr("C [1, 3, 5] does not broadcast to [3, 5]"));
}

TEST(GemmType, SymbolicC) {
  Type a = F32({S("batch"), 4});
  Type b = F32({4, 5});
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("gemm", {a, b, F32({S("batch"), 1})}, {}, &constraints), "f32[batch, 5]");
  EXPECT_TRUE(constraints.empty());
  // A symbolic C dim against a constant output dim: holds only if it binds to 1 or to 5.
  EXPECT_EQ(Infer("gemm", {a, b, F32({S("c")})}, {}, &constraints), "f32[batch, 5]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_THAT(constraints[0].ToString(), HasSubstr("C [c] does not broadcast to [batch, 5]"));
  // A constant C dim against a symbolic output dim: must be equal.
  constraints.clear();
  EXPECT_EQ(Infer("gemm", {a, b, F32({7, 5})}, {}, &constraints), "f32[batch, 5]");
  EXPECT_FALSE(constraints.empty());
  bool has_equal = false;
  for (const DimConstraint& c : constraints) has_equal |= c.kind == DimConstraint::Kind::kEqual;
  EXPECT_TRUE(has_equal);
}

TEST(GemmType, RejectsBadOperandsAndAttributes) {
  EXPECT_THAT(InferError("gemm", {F32({3, 4, 1}), F32({4, 5})}),
              HasSubstr("A and B must be 2-D, got [3, 4, 1] x [4, 5]"));
  EXPECT_THAT(InferError("gemm", {F32({4}), F32({4, 5})}), HasSubstr("must be 2-D"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), TensorType({4, 5}, DType::kFloat64)}),
              HasSubstr("A and B have different dtypes: f32[3, 4] and f64[4, 5]"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5}), TensorType({5}, DType::kFloat16)}),
              HasSubstr("A and C have different dtypes"));
  EXPECT_THAT(
      InferError("gemm", {TensorType({3, 4}, DType::kUInt8), TensorType({4, 5}, DType::kUInt8)}),
      HasSubstr("dtype u8 is not supported"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4})}), HasSubstr("expects 2 to 3 inputs, got 1"));
  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5}), F32({5}), F32({5})}),
              HasSubstr("expects 2 to 3 inputs, got 4"));

  EXPECT_THAT(InferError("gemm", {F32({3, 4}), F32({4, 5})}, {{"trans_a", true}}),
              HasSubstr("has no attribute 'trans_a'"));
  std::string msg =
      InferError("gemm", {F32({3, 4}), F32({4, 5})}, {{"transA", std::string("yes")}});
  EXPECT_THAT(msg, HasSubstr("attribute 'transA' must be bool, got string"));
  msg = InferError("gemm", {F32({3, 4}), F32({4, 5})}, {{"alpha", std::string("2")}});
  EXPECT_THAT(msg, HasSubstr("attribute 'alpha' must be float, got string"));
  msg = InferError("gemm", {F32({3, 4}), F32({4, 5})}, {{"transB", int64_t{2}}});
  EXPECT_THAT(msg, HasSubstr("attribute 'transB' must be bool"));
  // Ints convert to the declared kinds.
  EXPECT_EQ(
      Infer("gemm", {F32({4, 3}), F32({4, 5})}, {{"transA", int64_t{1}}, {"alpha", int64_t{2}}}),
      "f32[3, 5]");

  Type i32a = TensorType({3, 4}, DType::kInt32), i32b = TensorType({4, 5}, DType::kInt32);
  EXPECT_THAT(InferError("gemm", {i32a, i32b}, {{"alpha", 0.5}}),
              HasSubstr("alpha = 0.5 must be a whole number (within int64) for dtype i32"));
  EXPECT_THAT(InferError("gemm", {i32a, i32b}, {{"beta", 1e300}}),
              HasSubstr("beta = 1e+300 must be a whole number"));
  EXPECT_EQ(Infer("gemm", {i32a, i32b}, {{"alpha", 2.0}, {"beta", -3.0}}), "i32[3, 5]");
}

// ---------------------------------------------------------------------------------------------
// gemm: reference kernel

TEST(GemmKernel, HandComputed) {
  Tensor a = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor ab = MakeTensor<float>({2, 2}, {58, 64, 139, 154});
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, b}), ab));
  // alpha * AB + beta * C with C a row [N]: 0.5 * AB + 2 * [1, -1].
  Tensor c = MakeTensor<float>({2}, {1, -1});
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, b, c}, {{"alpha", 0.5}, {"beta", 2.0}}),
                          MakeTensor<float>({2, 2}, {31, 30, 71.5, 75})));
  // C a column [M, 1].
  Tensor col = MakeTensor<float>({2, 1}, {100, 200});
  EXPECT_TRUE(
      TensorsNear(RunOne("gemm", {a, b, col}), MakeTensor<float>({2, 2}, {158, 164, 339, 354})));
  // Transposed inputs give the same product.
  Tensor at = MakeTensor<float>({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor bt = MakeTensor<float>({2, 3}, {7, 9, 11, 8, 10, 12});
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {at, bt}, GemmAttrs(true, true)), ab));
  // A scalar C.
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {at, b, Tensor::Scalar<float>(1)}, GemmAttrs(true, false)),
                          MakeTensor<float>({2, 2}, {59, 65, 140, 155})));
}

// B packed into panels (b_panel, as PackConstantWeights makes it) gives the same product, with
// N not a multiple of the panel width, C and alpha.
TEST(GemmKernel, PackedBMatchesPlainB) {
  Tensor a = RandomTensor(DType::kFloat32, {7, 5}, 1);
  Tensor b = RandomTensor(DType::kFloat32, {5, 11}, 2);
  Tensor c = RandomTensor(DType::kFloat32, {11}, 3);
  for (int64_t t : {2, 4, 16}) {
    Attrs packed = {{"alpha", 0.5}, {"b_panel", t}, {"n", int64_t{11}}};
    EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, test::PackPanels(b, t), c}, packed),
                            RunOne("gemm", {a, b, c}, {{"alpha", 0.5}}), 0, 0))
        << "b_panel " << t;
  }
}

// matmul with B packed into panels: the same product as the plain B, for A of rank 2 and 3
// and N not a multiple of the panel width.
TEST(MatmulKernel, PackedBMatchesPlainB) {
  Tensor b = RandomTensor(DType::kFloat32, {5, 11}, 2);
  for (const std::vector<int64_t>& a_shape : {std::vector<int64_t>{7, 5}, {2, 3, 5}, {1, 1, 5}}) {
    Tensor a = RandomTensor(DType::kFloat32, a_shape, 1);
    for (int64_t t : {2, 4, 16}) {
      Attrs packed = {{"b_panel", t}, {"n", int64_t{11}}};
      EXPECT_TRUE(TensorsNear(RunOne("matmul", {a, test::PackPanels(b, t)}, packed),
                              RunOne("matmul", {a, b}), 0, 0))
          << IntsToString(a_shape) << " b_panel " << t;
    }
  }
}

TEST(MatmulType, PackedB) {
  Attrs packed = {{"b_panel", int64_t{4}}, {"n", int64_t{11}}};
  EXPECT_EQ(Infer("matmul", {F32({7, 5}), F32({3, 5, 4})}, packed), "f32[7, 11]");
  EXPECT_EQ(Infer("matmul", {F32({S("b"), 7, 5}), F32({3, 5, 4})}, packed), "f32[b, 7, 11]");
  EXPECT_THAT(InferError("matmul", {F32({7, 5}), F32({2, 5, 4})}, packed),
              HasSubstr("packed B [2, 5, 4] is not [3, K, 4] for n = 11"));
  EXPECT_THAT(InferError("matmul", {F32({7, 6}), F32({3, 5, 4})}, packed),
              HasSubstr("inner dimensions differ"));
  EXPECT_THAT(InferError("matmul", {F32({5}), F32({3, 5, 4})}, packed),
              HasSubstr("A must have rank >= 2 and the packed B rank 3"));
  EXPECT_THAT(InferError("matmul", {F32({7, 5}), F32({3, 5, 4})}, {{"b_panel", int64_t{4}}}),
              HasSubstr("needs b_panel >= 2 and n >= 1"));
}

TEST(GemmType, PackedB) {
  Attrs packed = {{"b_panel", int64_t{4}}, {"n", int64_t{11}}};
  EXPECT_EQ(Infer("gemm", {F32({7, 5}), F32({3, 5, 4})}, packed), "f32[7, 11]");
  EXPECT_EQ(Infer("gemm", {F32({S("m"), 5}), F32({3, 5, 4}), F32({11})}, packed), "f32[m, 11]");
  EXPECT_THAT(InferError("gemm", {F32({7, 5}), F32({2, 5, 4})}, packed),
              HasSubstr("packed B [2, 5, 4] is not [3, K, 4] for n = 11"));
  EXPECT_THAT(InferError("gemm", {F32({7, 6}), F32({3, 5, 4})}, packed),
              HasSubstr("inner dimensions differ"));
  EXPECT_THAT(InferError("gemm", {F32({7, 5}), F32({5, 11})}, packed),
              HasSubstr("the packed B 3-D"));
  EXPECT_THAT(InferError("gemm", {F32({7, 5}), F32({3, 5, 4})}, {{"b_panel", int64_t{4}}}),
              HasSubstr("needs b_panel >= 2, n >= 1 and transB = 0"));
  EXPECT_THAT(InferError("gemm", {F32({7, 5}), F32({3, 5, 4})},
                         {{"b_panel", int64_t{4}}, {"n", int64_t{11}}, {"transB", true}}),
              HasSubstr("transB = 1"));
}

TEST(GemmKernel, BetaZeroIgnoresC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = MakeTensor<float>({1, 1}, {2});
  Tensor b = MakeTensor<float>({1, 1}, {3});
  Tensor c = MakeTensor<float>({1, 1}, {nan});
  EXPECT_TRUE(
      TensorsNear(RunOne("gemm", {a, b, c}, {{"beta", 0.0}}), MakeTensor<float>({1, 1}, {6})));
  EXPECT_TRUE(std::isnan(RunOne("gemm", {a, b, c}).data<float>()[0]));
}

TEST(GemmKernel, EmptyInnerDimGivesBetaC) {
  Tensor a = Tensor::Empty(DType::kFloat32, {2, 0});
  Tensor b = Tensor::Empty(DType::kFloat32, {0, 3});
  Tensor c = MakeTensor<float>({3}, {1, 2, 3});
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, b, c}, {{"beta", 2.0}}),
                          MakeTensor<float>({2, 3}, {2, 4, 6, 2, 4, 6})));
  EXPECT_EQ(RunOne("gemm",
                   {Tensor::Empty(DType::kFloat32, {0, 4}), Tensor::Empty(DType::kFloat32, {4, 2})})
                .shape(),
            (std::vector<int64_t>{0, 2}));
}

// alpha * op(A) op(B) + beta * C, element by element in double.
Tensor NaiveGemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, double alpha,
                 double beta, int64_t m, int64_t k, int64_t n) {
  Tensor out = Tensor::Empty(a.dtype(), {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) {
        double x = ta ? a.GetAsDouble(q * m + i) : a.GetAsDouble(i * k + q);
        double y = tb ? b.GetAsDouble(j * k + q) : b.GetAsDouble(q * n + j);
        acc += x * y;
      }
      double cv = 0;
      if (c) {
        const std::vector<int64_t>& cs = c->shape();
        int64_t ci = 0;
        if (cs.size() == 1) ci = cs[0] == 1 ? 0 : j;
        if (cs.size() == 2) ci = (cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j);
        cv = c->GetAsDouble(ci);
      }
      out.SetFromDouble(i * n + j, alpha * acc + beta * cv);
    }
  return out;
}

TEST(GemmKernel, RandomEveryLayoutAndC) {
  struct Size {
    int64_t m, k, n;
  };
  uint64_t seed = 100;
  for (Size s : {Size{7, 13, 5}, Size{1, 1, 1}, Size{4, 1, 6}, Size{33, 17, 9}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = RandomTensor(
            DType::kFloat32, ta ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k},
            seed++);
        Tensor b = RandomTensor(
            DType::kFloat32, tb ? std::vector<int64_t>{s.n, s.k} : std::vector<int64_t>{s.k, s.n},
            seed++);
        std::vector<std::vector<int64_t>> c_shapes = {{}, {s.n}, {s.m, 1}, {s.m, s.n}, {1, s.n}};
        // No C at all first.
        Tensor want = NaiveGemm(a, b, nullptr, ta, tb, 1.0, 1.0, s.m, s.k, s.n);
        EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, b}, GemmAttrs(ta, tb)), want));
        for (const auto& cs : c_shapes) {
          Tensor c = RandomTensor(DType::kFloat32, cs, seed++);
          for (auto [alpha, beta] :
               {std::pair{1.0, 1.0}, std::pair{0.5, -2.0}, std::pair{-1.5, 0.0}}) {
            Tensor got = RunOne("gemm", {a, b, c}, GemmAttrs(ta, tb, alpha, beta));
            Tensor exp = NaiveGemm(a, b, &c, ta, tb, alpha, beta, s.m, s.k, s.n);
            EXPECT_TRUE(TensorsNear(got, exp))
                << s.m << "x" << s.k << "x" << s.n << " transA=" << ta << " transB=" << tb
                << " C=" << IntsToString(cs) << " alpha=" << alpha << " beta=" << beta;
          }
        }
      }
    }
  }
}

TEST(GemmKernel, OtherDTypes) {
  Tensor a = RandomTensor(DType::kFloat64, {5, 7}, 200);
  Tensor b = RandomTensor(DType::kFloat64, {3, 7}, 201);
  Tensor c = RandomTensor(DType::kFloat64, {5, 1}, 202);
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {a, b, c}, GemmAttrs(false, true, 0.25, 3.0)),
                          NaiveGemm(a, b, &c, false, true, 0.25, 3.0, 5, 7, 3), 1e-12, 1e-12));

  Tensor h = RandomTensor(DType::kFloat16, {6, 4}, 203);
  Tensor g = RandomTensor(DType::kFloat16, {6, 5}, 204);
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {h, g}, GemmAttrs(true, false)),
                          NaiveGemm(h, g, nullptr, true, false, 1, 1, 4, 6, 5), 1e-2, 1e-2));

  // Integers: exact, with whole alpha and beta.
  Tensor ia = MakeTensor<int32_t>({2, 2}, {1, 2, 3, 4});
  Tensor ib = MakeTensor<int32_t>({2, 2}, {5, 6, 7, 8});
  Tensor ic = MakeTensor<int32_t>({2}, {1, -1});
  Tensor out = RunOne("gemm", {ia, ib, ic}, {{"alpha", 2.0}, {"beta", -3.0}});
  EXPECT_EQ(std::vector<int32_t>(out.data<int32_t>(), out.data<int32_t>() + 4),
            (std::vector<int32_t>{35, 47, 83, 103}));
  Tensor la = RandomTensor(DType::kInt64, {7, 3}, 205, -50, 50);
  Tensor lb = RandomTensor(DType::kInt64, {3, 5}, 206, -50, 50);
  Tensor lc = RandomTensor(DType::kInt64, {7, 5}, 207, -50, 50);
  EXPECT_TRUE(TensorsNear(RunOne("gemm", {la, lb, lc}, {{"alpha", -1.0}, {"beta", 4.0}}),
                          NaiveGemm(la, lb, &lc, false, false, -1, 4, 7, 3, 5), 0, 0));
}

}  // namespace
}  // namespace kiln
