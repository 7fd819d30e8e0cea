// Lowerings of matmul and gemm (ir/ops/matmul.cc): each op compiled, concretely and
// shape-generic, and compared with its reference kernel on random data.
//
// Tolerances: integers (wrapping i64 accumulation, as the reference) and f64 (same order of
// the same double operations) match exactly, up to a last-bit slack for f64 in case the host
// compiler contracts the reference's multiply-add. f32, f16 and bf16 accumulate in f32 in the
// kernel but in double in the reference, so they get an absolute tolerance that grows with K
// plus, for f16/bf16, one unit in the last place of the output dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::CompiledMatchesReference;
using test::RandomTensor;
using V = std::vector<int64_t>;

const DType kDTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                         DType::kBFloat16, DType::kInt32,   DType::kInt64};

struct Tolerance {
  double atol, rtol;
};

// See the file comment. Inputs are in [-1, 1] for floats, so the f32 rounding error of a sum of
// K products stays far below 2e-6 * K.
Tolerance ToleranceFor(DType t, int64_t k) {
  const double kf = static_cast<double>(std::max<int64_t>(k, 1));
  switch (t) {
    case DType::kFloat32:
      return {2e-6 * kf, 1e-5};
    case DType::kFloat64:
      return {1e-14 * kf, 1e-14};
    case DType::kFloat16:
      return {2e-6 * kf, 1e-3};  // 2^-10: one f16 ulp
    case DType::kBFloat16:
      return {2e-6 * kf, 8e-3};  // 2^-7: one bf16 ulp
    default:
      return {0, 0};
  }
}

Tensor RandomOperand(DType t, const V& shape, uint64_t seed) {
  return IsFloat(t) ? RandomTensor(t, shape, seed, -1, 1) : RandomTensor(t, shape, seed, -100, 100);
}

TEST(LowerMatmul, Matmul) {
  struct Case {
    V a, b;
  };
  const Case cases[] = {
      {{1}, {1}},                  // 1-D x 1-D: a scalar
      {{1, 1}, {1, 1}},            // size 1
      {{7}, {7, 13}},              // 1-D left
      {{13, 5}, {5}},              // 1-D right
      {{13, 5}, {5, 7}},           // odd sizes
      {{3, 1, 13, 5}, {4, 5, 7}},  // broadcast batch dims
      {{2, 13, 5}, {5, 7}},        // batched left only
      {{5}, {3, 5, 7}},            // 1-D left, batched right
      {{2, 3, 7, 5}, {5}},         // batched left, 1-D right
      {{0, 5}, {5, 7}},            // empty output
      {{13, 0}, {0, 7}},           // K = 0: zeros
      {{0, 13, 5}, {1, 5, 7}},     // empty batch
      {{257, 64}, {64, 1031}},     // large output
      {{33, 1031}, {1031, 65}},    // large K
  };
  for (DType t : kDTypes) {
    for (const Case& c : cases) {
      Tolerance tol = ToleranceFor(t, c.a.back());
      EXPECT_TRUE(CompiledMatchesReference(
          "matmul", {RandomOperand(t, c.a, 1), RandomOperand(t, c.b, 2)}, {}, tol.atol, tol.rtol))
          << DTypeName(t) << IntsToString(c.a) << " x " << IntsToString(c.b);
    }
  }
}

// Integer products and sums wrap in i64 and the result is truncated to the dtype, as in the
// reference kernel.
TEST(LowerMatmul, MatmulIntegerWraps) {
  Tensor a32 = RandomTensor(DType::kInt32, {13, 7}, 1, -50000, 50000);
  Tensor b32 = RandomTensor(DType::kInt32, {7, 5}, 2, -50000, 50000);
  EXPECT_TRUE(CompiledMatchesReference("matmul", {a32, b32}, {}, 0, 0));
  Tensor a64 = RandomTensor(DType::kInt64, {13, 7}, 3, -3e9, 3e9);
  Tensor b64 = RandomTensor(DType::kInt64, {7, 5}, 4, -3e9, 3e9);
  EXPECT_TRUE(CompiledMatchesReference("matmul", {a64, b64}, {}, 0, 0));
}

struct GemmCase {
  V a, b;
  bool trans_a, trans_b;
  double alpha, beta;
  std::optional<V> c;
};

Attrs GemmAttrs(const GemmCase& g, double alpha, double beta) {
  return {{"transA", g.trans_a}, {"transB", g.trans_b}, {"alpha", alpha}, {"beta", beta}};
}

TEST(LowerMatmul, Gemm) {
  const GemmCase cases[] = {
      {{1, 1}, {1, 1}, false, false, 1, 1, std::nullopt},      // size 1
      {{13, 5}, {5, 7}, false, false, 1, 1, std::nullopt},     // odd sizes, no C
      {{13, 5}, {5, 7}, false, false, -3, 1, std::nullopt},    // alpha without C
      {{5, 13}, {5, 7}, true, false, 0.5, 1, V{7}},            // transA, C a row
      {{13, 5}, {7, 5}, false, true, 1, 2, V{13, 1}},          // transB, C a column
      {{5, 13}, {7, 5}, true, true, -1.5, 0.25, V{13, 7}},     // both, full C
      {{13, 5}, {5, 7}, false, false, 2, -1, V{}},             // scalar C
      {{13, 5}, {5, 7}, false, false, 1, 1, V{1}},             // C of one element
      {{13, 5}, {5, 7}, false, false, 1, 3, V{1, 7}},          // C [1, N]
      {{0, 5}, {5, 7}, false, false, 1, 1, V{7}},              // empty output
      {{13, 0}, {0, 7}, false, false, 1, 2, V{13, 7}},         // K = 0: beta * C
      {{257, 64}, {64, 1031}, false, false, 1, 1, V{1031}},    // large
      {{1031, 33}, {65, 1031}, true, true, 2, -1, V{33, 65}},  // large K
  };
  for (DType t : kDTypes) {
    for (const GemmCase& g : cases) {
      // Integer gemm needs whole alpha and beta: the fractional ones are truncated.
      double alpha = IsFloat(t) ? g.alpha : std::trunc(g.alpha);
      double beta = IsFloat(t) ? g.beta : std::trunc(g.beta);
      std::vector<Tensor> inputs = {RandomOperand(t, g.a, 1), RandomOperand(t, g.b, 2)};
      if (g.c) inputs.push_back(RandomOperand(t, *g.c, 3));
      Tolerance tol = ToleranceFor(t, g.a[g.trans_a ? 0 : 1]);
      // alpha and beta scale the sum and C, and with them its error.
      tol.atol *= std::max(1.0, std::fabs(alpha));
      EXPECT_TRUE(
          CompiledMatchesReference("gemm", inputs, GemmAttrs(g, alpha, beta), tol.atol, tol.rtol))
          << DTypeName(t) << IntsToString(g.a) << (g.trans_a ? "^T" : "") << " x "
          << IntsToString(g.b) << (g.trans_b ? "^T" : "") << " alpha " << alpha << " beta " << beta
          << " C " << (g.c ? IntsToString(*g.c) : "none");
    }
  }
}

// gemm with B packed into panels (b_panel): TileLoops tiles its columns by the panel width
// and reads the panels in place. Widths the host's tiles use (16, 64) and others, N a multiple
// of the width and not, rows enough for row blocks and K blocks, few rows, single rows (also in the
// wide panels PackConstantWeights gives a matrix-vector product), A transposed; alpha scales the
// product (the f64 path of the lowering).
TEST(LowerMatmul, GemmPackedB) {
  struct Case {
    int64_t m, k, n, t;
    bool trans_a;
  };
  for (const Case& c :
       {Case{37, 33, 70, 16, false}, Case{40, 300, 128, 64, false}, Case{33, 200, 150, 64, false},
        Case{1, 9, 20, 8, false}, Case{5, 3, 3, 2, false}, Case{29, 17, 80, 64, true},
        // few rows (row blocks that read the panels in place)
        Case{16, 100, 200, 64, false}, Case{3, 40, 130, 64, true},
        // a single row in the wide panels of a matrix-vector product (AVX-512: 256, AVX2: 96)
        Case{1, 784, 512, 256, false}, Case{1, 37, 1000, 256, false}, Case{1, 50, 300, 96, true}}) {
    Tensor a = RandomOperand(DType::kFloat32, c.trans_a ? V{c.k, c.m} : V{c.m, c.k}, 1);
    Tensor b = RandomOperand(DType::kFloat32, {c.k, c.n}, 2);
    Tensor bias = RandomOperand(DType::kFloat32, {c.n}, 3);
    Attrs attrs = {{"b_panel", c.t}, {"n", c.n}, {"transA", c.trans_a}, {"alpha", 1.5}};
    Tolerance tol = ToleranceFor(DType::kFloat32, c.k);
    EXPECT_TRUE(CompiledMatchesReference("gemm", {a, test::PackPanels(b, c.t), bias}, attrs,
                                         tol.atol, tol.rtol))
        << c.m << " x " << c.k << " x " << c.n << " in panels of " << c.t
        << (c.trans_a ? ", A transposed" : "");
  }
}

// matmul with B packed into panels: A of rank 2 and 3 (its batch dims all rows of the one B),
// N a multiple of the width and not, a single row in the wide panels of a matrix-vector
// product, the encoder layer's 16 rows.
TEST(LowerMatmul, MatmulPackedB) {
  struct Case {
    V a;
    int64_t n, t;
  };
  for (const Case& c :
       {Case{{37, 33}, 70, 16}, Case{{1, 16, 256}, 1024, 64}, Case{{2, 9, 40}, 150, 64},
        Case{{1, 1, 784}, 512, 256}, Case{{3, 5, 3}, 3, 2}, Case{{1, 7}, 20, 8}}) {
    Tensor a = RandomOperand(DType::kFloat32, c.a, 1);
    Tensor b = RandomOperand(DType::kFloat32, {c.a.back(), c.n}, 2);
    Attrs attrs = {{"b_panel", c.t}, {"n", c.n}};
    Tolerance tol = ToleranceFor(DType::kFloat32, c.a.back());
    EXPECT_TRUE(CompiledMatchesReference("matmul", {a, test::PackPanels(b, c.t)}, attrs, tol.atol,
                                         tol.rtol))
        << IntsToString(c.a) << " x " << c.n << " in panels of " << c.t;
  }
}

// As in the reference (and ONNX's), beta == 0 skips C entirely, so NaN or inf in it does not
// turn the output into NaN.
TEST(LowerMatmul, GemmBetaZeroIgnoresC) {
  GemmCase g{{13, 5}, {5, 7}, false, false, 1.5, 0, V{13, 7}};
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    Tensor c = Tensor::Empty(t, {13, 7});
    for (int64_t i = 0; i < c.numel(); ++i)
      c.SetFromDouble(i, i % 2 ? std::numeric_limits<double>::quiet_NaN()
                               : std::numeric_limits<double>::infinity());
    Tolerance tol = ToleranceFor(t, 5);
    EXPECT_TRUE(CompiledMatchesReference("gemm",
                                         {RandomOperand(t, g.a, 1), RandomOperand(t, g.b, 2), c},
                                         GemmAttrs(g, g.alpha, g.beta), tol.atol, tol.rtol))
        << DTypeName(t);
  }
}

TEST(LowerMatmul, GemmIntegerWraps) {
  GemmCase g{{13, 7}, {7, 5}, false, false, 0, 0, V{13, 5}};
  Tensor a = RandomTensor(DType::kInt64, g.a, 1, -3e9, 3e9);
  Tensor b = RandomTensor(DType::kInt64, g.b, 2, -3e9, 3e9);
  Tensor c = RandomTensor(DType::kInt64, *g.c, 3, -3e9, 3e9);
  EXPECT_TRUE(CompiledMatchesReference("gemm", {a, b, c}, GemmAttrs(g, 1e15, -7e12), 0, 0));
  Tensor a32 = RandomTensor(DType::kInt32, g.a, 1, -50000, 50000);
  Tensor b32 = RandomTensor(DType::kInt32, g.b, 2, -50000, 50000);
  Tensor c32 = RandomTensor(DType::kInt32, *g.c, 3, -50000, 50000);
  EXPECT_TRUE(CompiledMatchesReference("gemm", {a32, b32, c32}, GemmAttrs(g, 3, 100000), 0, 0));
}

}  // namespace
}  // namespace kiln
