// dft, stft and det (ir/ops/signal.cc): type relations, their errors, and the reference kernels
// against hand-computed transforms and determinants.
#include <gmock/gmock.h>

#include <cmath>
#include <vector>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::MakeTensor;
using test::RandomTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

Attrs DftAttrs(int64_t axis, bool inverse = false, bool onesided = false, int64_t length = 0) {
  return {{"axis", axis}, {"inverse", inverse}, {"onesided", onesided}, {"length", length}};
}

// ---- dft: type relation ----

TEST(Dft, Shapes) {
  EXPECT_EQ(Infer("dft", {F32({1, 10, 10, 1})}), "f32[1, 10, 10, 2]");
  EXPECT_EQ(Infer("dft", {F32({1, 10, 10, 2})}, {{"axis", int64_t{2}}}), "f32[1, 10, 10, 2]");
  EXPECT_EQ(Infer("dft", {F32({1, 10, 7, 1})}, {{"axis", int64_t{-2}}, {"onesided", true}}),
            "f32[1, 10, 4, 2]");
  EXPECT_EQ(Infer("dft", {F32({3, 9, 1})}, {{"onesided", true}}), "f32[3, 5, 2]");
  EXPECT_EQ(Infer("dft", {F32({3, 9, 1})}, {{"length", int64_t{16}}}), "f32[3, 16, 2]");
  EXPECT_EQ(Infer("dft", {F32({3, 9, 1})}, {{"length", int64_t{4}}, {"onesided", true}}),
            "f32[3, 3, 2]");
  // The batch dim may be transformed too, and a rank-2 tensor is one signal.
  EXPECT_EQ(Infer("dft", {F32({6, 2})}, {{"axis", int64_t{0}}}), "f32[6, 2]");
  EXPECT_EQ(Infer("dft", {TensorType({2, 5, 2}, DType::kFloat64)}, {{"inverse", true}}),
            "f64[2, 5, 2]");
  EXPECT_EQ(Infer("dft", {TensorType({2, 5, 1}, DType::kFloat16)}), "f16[2, 5, 2]");
  EXPECT_EQ(OpRegistry::Global().Get("dft").pattern, OpPattern::kOutputFusable);
}

TEST(Dft, SymbolicShapes) {
  EXPECT_EQ(Infer("dft", {F32({S("batch"), S("n"), 1})}), "f32[batch, n, 2]");
  EXPECT_EQ(Infer("dft", {F32({S("batch"), S("n"), 2})}, {{"onesided", true}}),
            "f32[batch, n // 2 + 1, 2]");
  EXPECT_EQ(Infer("dft", {F32({S("batch"), S("n"), 1})}, {{"length", int64_t{8}}}),
            "f32[batch, 8, 2]");
}

TEST(Dft, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {TensorType({2, 4, 1}, DType::kInt32)});
              }),
              HasSubstr("x must be a float dtype (f32, f16, bf16, f64), got i32"));
  EXPECT_THAT(ErrorMessage([&] { Infer("dft", {F32({4})}); }),
              HasSubstr("dft: x must be [..., N, ..., 1 or 2] with rank >= 2, got f32[4]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, 3})});
              }),
              HasSubstr("x f32[2, 4, 3] must end in a dim of 1 (real) or 2 (real, imaginary), "
                        "got 3"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, S("c")})});
              }),
              HasSubstr("must end in a dim of 1 (real) or 2 (real, imaginary), got c"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, 1})}, {{"axis", int64_t{2}}});
              }),
              HasSubstr("axis 2 is the last dim of x f32[2, 4, 1], which holds the real and "
                        "imaginary parts"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, 1})}, {{"axis", int64_t{-1}}});
              }),
              HasSubstr("axis -1 is the last dim"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, 1})}, {{"axis", int64_t{3}}});
              }),
              HasSubstr("axis 3 is out of range for rank 3"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 4, 1})}, {{"length", int64_t{-2}}});
              }),
              HasSubstr("attribute 'length' = -2: must not be negative"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("dft", {F32({2, 0, 1})});
              }),
              HasSubstr("the DFT length is 0: x f32[2, 0, 1] has no samples along axis 1"));
}

// ---- dft: reference kernel ----

TEST(DftKernel, HandComputed) {
  // [1, 2, 3, 4]: X[k] = sum x[n] (-i)^(nk) = 10, -2 + 2i, -2, -2 - 2i.
  Tensor x = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsNear(RunOne("dft", {x}, DftAttrs(1)),
                          MakeTensor<float>({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2})));
  // Onesided: the first 4 // 2 + 1 bins.
  EXPECT_TRUE(TensorsNear(RunOne("dft", {x}, DftAttrs(1, false, true)),
                          MakeTensor<float>({1, 3, 2}, {10, 0, -2, 2, -2, 0})));
  // Truncated to 2 samples: [1 + 2, 1 - 2].
  EXPECT_TRUE(TensorsNear(RunOne("dft", {x}, DftAttrs(1, false, false, 2)),
                          MakeTensor<float>({1, 2, 2}, {3, 0, -1, 0})));
  // [0, 1] zero-padded to 4: a unit delay, X[k] = (-i)^k.
  EXPECT_TRUE(TensorsNear(
      RunOne("dft", {MakeTensor<float>({1, 2, 1}, {0, 1})}, DftAttrs(1, false, false, 4)),
      MakeTensor<float>({1, 4, 2}, {1, 0, 0, -1, -1, 0, 0, 1})));
  // Complex input [i, 0]: X = [i, i].
  EXPECT_TRUE(TensorsNear(RunOne("dft", {MakeTensor<float>({1, 2, 2}, {0, 1, 0, 0})}, DftAttrs(1)),
                          MakeTensor<float>({1, 2, 2}, {0, 1, 0, 1})));
  // Inverse of [4, 0, 0, 0] (a constant spectrum) is [1, 1, 1, 1]: divided by the length.
  EXPECT_TRUE(TensorsNear(
      RunOne("dft", {MakeTensor<float>({1, 4, 2}, {4, 0, 0, 0, 0, 0, 0, 0})}, DftAttrs(1, true)),
      MakeTensor<float>({1, 4, 2}, {1, 0, 1, 0, 1, 0, 1, 0})));
  // A single sample transforms to itself.
  EXPECT_TRUE(TensorsNear(RunOne("dft", {MakeTensor<float>({2, 1, 1}, {5, -3})}, DftAttrs(1)),
                          MakeTensor<float>({2, 1, 2}, {5, 0, -3, 0})));
}

TEST(DftKernel, AlongOtherAxes) {
  // x [2, 3, 1] along axis 0: each column's 2-point DFT [a + b, a - b].
  Tensor x = MakeTensor<float>({2, 3, 1}, {1, 2, 3, 10, 20, 30});
  EXPECT_TRUE(
      TensorsNear(RunOne("dft", {x}, DftAttrs(0)),
                  MakeTensor<float>({2, 3, 2}, {11, 0, 22, 0, 33, 0, -9, 0, -18, 0, -27, 0})));
  // Along axis 1 of y [2, 5, 3, 2] equals along axis 2 of its transpose z [2, 3, 5, 2].
  Tensor y = RandomTensor(DType::kFloat64, {2, 5, 3, 2}, 7);
  Tensor z = Tensor::Empty(DType::kFloat64, {2, 3, 5, 2});
  auto yi = [](int64_t b, int64_t n, int64_t j, int64_t p) {
    return ((b * 5 + n) * 3 + j) * 2 + p;
  };
  auto zi = [](int64_t b, int64_t j, int64_t n, int64_t p) {
    return ((b * 3 + j) * 5 + n) * 2 + p;
  };
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t n = 0; n < 5; ++n)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t p = 0; p < 2; ++p)
          z.SetFromDouble(zi(b, j, n, p), y.GetAsDouble(yi(b, n, j, p)));
  Tensor along1 = RunOne("dft", {y}, DftAttrs(1));
  Tensor along2 = RunOne("dft", {z}, DftAttrs(2));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 5; ++k)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t p = 0; p < 2; ++p)
          EXPECT_EQ(along1.GetAsDouble(yi(b, k, j, p)), along2.GetAsDouble(zi(b, j, k, p)));
  // And the DC bin is the plain sum of each line.
  for (int64_t j = 0; j < 3; ++j) {
    double re = 0;
    for (int64_t n = 0; n < 5; ++n) re += y.GetAsDouble(yi(1, n, j, 0));
    EXPECT_NEAR(along1.GetAsDouble(yi(1, 0, j, 0)), re, 1e-12);
  }
}

TEST(DftKernel, InverseUndoesForward) {
  for (int64_t n : {1, 2, 7, 16}) {
    SCOPED_TRACE(StrCat("n = ", n));
    Tensor x = RandomTensor(DType::kFloat64, {3, n, 2}, static_cast<uint64_t>(n));
    Tensor spectrum = RunOne("dft", {x}, DftAttrs(1));
    EXPECT_TRUE(TensorsNear(RunOne("dft", {spectrum}, DftAttrs(1, true)), x, 1e-12, 1e-12));
  }
  // A real signal comes back with zero imaginary parts.
  Tensor real = RandomTensor(DType::kFloat64, {2, 9, 1}, 3);
  Tensor back = RunOne("dft", {RunOne("dft", {real}, DftAttrs(1))}, DftAttrs(1, true));
  for (int64_t i = 0; i < real.numel(); ++i) {
    EXPECT_NEAR(back.GetAsDouble(2 * i), real.GetAsDouble(i), 1e-12);
    EXPECT_NEAR(back.GetAsDouble(2 * i + 1), 0.0, 1e-12);
  }
}

TEST(DftKernel, OnesidedIsTheFirstBinsOfTheFull) {
  // A real signal's spectrum is conjugate-symmetric: X[N - k] = conj(X[k]).
  for (int64_t n : {5, 8}) {
    Tensor x = RandomTensor(DType::kFloat64, {2, n, 1}, 11);
    Tensor full = RunOne("dft", {x}, DftAttrs(1));
    Tensor half = RunOne("dft", {x}, DftAttrs(1, false, true));
    const int64_t bins = n / 2 + 1;
    ASSERT_EQ(half.shape(), (std::vector<int64_t>{2, bins, 2}));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < n; ++k) {
        double re = full.GetAsDouble((b * n + k) * 2), im = full.GetAsDouble((b * n + k) * 2 + 1);
        if (k < bins) {
          EXPECT_EQ(half.GetAsDouble((b * bins + k) * 2), re);
          EXPECT_EQ(half.GetAsDouble((b * bins + k) * 2 + 1), im);
        }
        int64_t mirror = (n - k) % n;
        EXPECT_NEAR(full.GetAsDouble((b * n + mirror) * 2), re, 1e-12);
        EXPECT_NEAR(full.GetAsDouble((b * n + mirror) * 2 + 1), -im, 1e-12);
      }
  }
}

// ---- stft: type relation ----

Attrs StftAttrs(int64_t step, int64_t frame_length = 0, bool onesided = true) {
  return {{"frame_step", step}, {"frame_length", frame_length}, {"onesided", onesided}};
}

TEST(Stft, Shapes) {
  EXPECT_EQ(Infer("stft", {F32({2, 128, 1})}, StftAttrs(8, 16)), "f32[2, 15, 9, 2]");
  EXPECT_EQ(Infer("stft", {F32({2, 128, 1}), F32({16})}, StftAttrs(8)), "f32[2, 15, 9, 2]");
  EXPECT_EQ(Infer("stft", {F32({2, 128, 1}), F32({16})}, StftAttrs(8, 16)), "f32[2, 15, 9, 2]");
  EXPECT_EQ(Infer("stft", {F32({2, 128, 2})}, StftAttrs(8, 16, false)), "f32[2, 15, 16, 2]");
  // No window and no frame length: the whole signal is one frame.
  EXPECT_EQ(Infer("stft", {F32({1, 10, 1})}, StftAttrs(3)), "f32[1, 1, 6, 2]");
  // The last frame ends within the signal: 1 + (20 - 6) // 4 = 4 frames.
  EXPECT_EQ(Infer("stft", {F32({1, 20, 1})}, StftAttrs(4, 6)), "f32[1, 4, 4, 2]");
  EXPECT_EQ(OpRegistry::Global().Get("stft").pattern, OpPattern::kOutputFusable);
}

TEST(Stft, SymbolicShapes) {
  // (len - 8) // 4 + 1 frames, in canonical form.
  EXPECT_EQ(Infer("stft", {F32({S("b"), S("len"), 1})}, StftAttrs(4, 8)),
            "f32[b, len // 4 - 1, 5, 2]");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("stft", {F32({1, 64, 1}), F32({S("w")})}, StftAttrs(8, 16), &cs),
            "f32[1, 7, 9, 2]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].kind, DimConstraint::Kind::kEqual);
}

TEST(Stft, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({128, 1})}, StftAttrs(8, 16));
              }),
              HasSubstr("stft: signal must be [batch, length, 1 or 2], got f32[128, 1]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 128, 3})}, StftAttrs(8, 16));
              }),
              HasSubstr("signal f32[1, 128, 3] must end in a dim of 1 (real) or 2"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {TensorType({1, 8, 1}, DType::kInt64)}, StftAttrs(2, 4));
              }),
              HasSubstr("signal must be a float dtype (f32, f16, bf16, f64), got i64"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 128, 1}), F32({15})}, StftAttrs(8, 16));
              }),
              AllOf(HasSubstr("window f32[15] must have frame_length = 16 elements"),
                    HasSubstr("15 != 16")));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 128, 1}), TensorType({16}, DType::kFloat64)}, StftAttrs(8));
              }),
              HasSubstr("window must be a 1-D tensor of the signal's dtype f32, got f64[16]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 128, 1}), F32({4, 4})}, StftAttrs(8));
              }),
              HasSubstr("window must be a 1-D tensor"));
  EXPECT_THAT(
      ErrorMessage([&] {
        Infer("stft", {F32({1, 8, 1})}, StftAttrs(2, 16));
      }),
      HasSubstr("signal f32[1, 8, 1] has 8 samples, fewer than one frame of frame_length 16"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 8, 1}), F32({0})}, StftAttrs(2));
              }),
              HasSubstr("the frame length is 0"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 8, 1})}, StftAttrs(0, 4));
              }),
              HasSubstr("attribute 'frame_step' = 0: must be at least 1"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("stft", {F32({1, 8, 1})}, {{"frame_length", int64_t{4}}});
              }),
              HasSubstr("op 'stft': required attribute 'frame_step'"));
}

// ---- stft: reference kernel ----

TEST(StftKernel, HandComputed) {
  // Frames [1, 2, 3, 4] and [3, 4, 5, 6]: DFTs [10, -2 + 2i, -2, ...] and [18, -2 + 2i, -2, ...].
  Tensor s = MakeTensor<float>({1, 6, 1}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(
      TensorsNear(RunOne("stft", {s}, StftAttrs(2, 4)),
                  MakeTensor<float>({1, 2, 3, 2}, {10, 0, -2, 2, -2, 0, 18, 0, -2, 2, -2, 0})));
  EXPECT_TRUE(TensorsNear(
      RunOne("stft", {s}, StftAttrs(2, 4, false)),
      MakeTensor<float>({1, 2, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2, 18, 0, -2, 2, -2, 0, -2, -2})));
  // Window [0, 1, 0, 0] keeps the second sample of each frame, delayed by one: 2 (-i)^k, 4 (-i)^k.
  Tensor w = MakeTensor<float>({4}, {0, 1, 0, 0});
  EXPECT_TRUE(
      TensorsNear(RunOne("stft", {s, w}, StftAttrs(2)),
                  MakeTensor<float>({1, 2, 3, 2}, {2, 0, 0, -2, -2, 0, 4, 0, 0, -4, -4, 0})));
  // An all-ones window is no window.
  EXPECT_TRUE(TensorsNear(RunOne("stft", {s, MakeTensor<float>({4}, {1, 1, 1, 1})}, StftAttrs(2)),
                          RunOne("stft", {s}, StftAttrs(2, 4))));
}

// Each frame of the stft is the dft of that slice of the signal times the window.
TEST(StftKernel, FramesAreWindowedDfts) {
  const int64_t length = 23, step = 5, frame = 7;
  Tensor s = RandomTensor(DType::kFloat64, {2, length, 2}, 5);
  Tensor w = RandomTensor(DType::kFloat64, {frame}, 6, 0, 1);
  Tensor y = RunOne("stft", {s, w}, StftAttrs(step, frame, false));
  const int64_t frames = 1 + (length - frame) / step;
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, frames, frame, 2}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      Tensor slice = Tensor::Empty(DType::kFloat64, {1, frame, 2});
      for (int64_t n = 0; n < frame; ++n)
        for (int64_t p = 0; p < 2; ++p)
          slice.SetFromDouble(
              n * 2 + p, w.GetAsDouble(n) * s.GetAsDouble((b * length + f * step + n) * 2 + p));
      Tensor want = RunOne("dft", {slice}, DftAttrs(1));
      for (int64_t i = 0; i < frame * 2; ++i)
        EXPECT_NEAR(y.GetAsDouble(((b * frames + f) * frame) * 2 + i), want.GetAsDouble(i), 1e-12);
    }
}

// ---- det ----

TEST(Det, Shapes) {
  EXPECT_EQ(Infer("det", {F32({2, 2})}), "f32[]");
  EXPECT_EQ(Infer("det", {F32({3, 4, 4})}), "f32[3]");
  EXPECT_EQ(Infer("det", {TensorType({2, 3, 5, 5}, DType::kFloat64)}), "f64[2, 3]");
  EXPECT_EQ(Infer("det", {F32({S("b"), S("m"), S("m")})}), "f32[b]");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("det", {F32({S("m"), 3})}, {}, &cs), "f32[]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(OpRegistry::Global().Get("det").pattern, OpPattern::kOutputFusable);
}

TEST(Det, Errors) {
  EXPECT_THAT(ErrorMessage([&] {
                Infer("det", {F32({2, 3})});
              }),
              AllOf(HasSubstr("det: x f32[2, 3] must hold square matrices"), HasSubstr("2 != 3")));
  EXPECT_THAT(ErrorMessage([&] { Infer("det", {F32({4})}); }),
              HasSubstr("x must be [..., M, M] with rank >= 2, got f32[4]"));
  EXPECT_THAT(ErrorMessage([&] {
                Infer("det", {TensorType({2, 2}, DType::kInt32)});
              }),
              HasSubstr("x must be a float dtype (f32, f16, bf16, f64), got i32"));
}

TEST(DetKernel, HandComputed) {
  EXPECT_TRUE(TensorsNear(RunOne("det", {MakeTensor<float>({2, 2}, {1, 2, 3, 4})}),
                          MakeTensor<float>({}, {-2})));
  // A zero first pivot: the rows must be swapped.
  EXPECT_TRUE(TensorsNear(RunOne("det", {MakeTensor<float>({2, 2}, {0, 1, 1, 0})}),
                          MakeTensor<float>({}, {-1})));
  EXPECT_TRUE(TensorsNear(RunOne("det", {MakeTensor<double>({3, 3}, {6, 1, 1, 4, -2, 5, 2, 8, 7})}),
                          MakeTensor<double>({}, {-306}), 1e-12, 1e-12));
  // The anti-diagonal 4x4: the reversal permutation is even, so +2 * 3 * 5 * 7.
  EXPECT_TRUE(TensorsNear(
      RunOne("det", {MakeTensor<float>({4, 4}, {0, 0, 0, 2, 0, 0, 3, 0, 0, 5, 0, 0, 7, 0, 0, 0})}),
      MakeTensor<float>({}, {210})));
  EXPECT_TRUE(TensorsNear(RunOne("det", {MakeTensor<float>({1, 1}, {-4.5f})}),
                          MakeTensor<float>({}, {-4.5f})));
  // Batched, one of them singular (the second row is twice the first).
  EXPECT_TRUE(TensorsNear(
      RunOne("det", {MakeTensor<float>({3, 2, 2}, {1, 2, 3, 4, 1, 2, 2, 4, 2, 0, 0, 3})}),
      MakeTensor<float>({3}, {-2, 0, 6})));
  // A singular 3x3 (row 0 = 3 * row 2 - row 1) and empty matrices (det 1, the empty product).
  EXPECT_TRUE(TensorsNear(RunOne("det", {MakeTensor<float>({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 1})}),
                          MakeTensor<float>({}, {0})));
  EXPECT_TRUE(TensorsNear(RunOne("det", {Tensor::Empty(DType::kFloat32, {2, 0, 0})}),
                          MakeTensor<float>({2}, {1, 1})));
}

// Properties that hold for any M: det(A^T) = det(A), det(2A) = 2^M det(A), and swapping two rows
// negates it.
TEST(DetKernel, RandomProperties) {
  for (int64_t m : {3, 6}) {
    SCOPED_TRACE(StrCat("m = ", m));
    Tensor a = RandomTensor(DType::kFloat64, {m, m}, static_cast<uint64_t>(m));
    Tensor at = Tensor::Empty(DType::kFloat64, {m, m});
    Tensor twice = Tensor::Empty(DType::kFloat64, {m, m});
    Tensor swapped = Tensor::Empty(DType::kFloat64, {m, m});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        at.SetFromDouble(j * m + i, a.GetAsDouble(i * m + j));
        twice.SetFromDouble(i * m + j, 2 * a.GetAsDouble(i * m + j));
        int64_t src = i == 0 ? 1 : i == 1 ? 0 : i;  // rows 0 and 1 swapped
        swapped.SetFromDouble(i * m + j, a.GetAsDouble(src * m + j));
      }
    double d = RunOne("det", {a}).GetAsDouble(0);
    EXPECT_NE(d, 0.0);
    EXPECT_NEAR(RunOne("det", {at}).GetAsDouble(0), d, 1e-12);
    EXPECT_NEAR(RunOne("det", {twice}).GetAsDouble(0), std::ldexp(d, static_cast<int>(m)), 1e-10);
    EXPECT_NEAR(RunOne("det", {swapped}).GetAsDouble(0), -d, 1e-12);
  }
}

// ---- mel_weight_matrix ----

Attrs Mel(int64_t bands, int64_t dft, int64_t rate, double lower, double upper) {
  return {{"num_mel_bins", bands},
          {"dft_length", dft},
          {"sample_rate", rate},
          {"lower_edge_hertz", lower},
          {"upper_edge_hertz", upper}};
}

TEST(MelWeightMatrix, ShapesAndErrors) {
  EXPECT_EQ(Infer("mel_weight_matrix", {}, Mel(8, 16, 8192, 0, 4096)), "f32[9, 8]");
  Attrs f64 = Mel(3, 15, 1000, 20, 400);
  f64.Set("dtype", DType::kFloat64);
  EXPECT_EQ(Infer("mel_weight_matrix", {}, f64), "f64[8, 3]");
  EXPECT_THAT(test::InferError("mel_weight_matrix", {}, Mel(0, 16, 8192, 0, 4096)),
              HasSubstr("must be at least 1, got 0"));
  EXPECT_THAT(test::InferError("mel_weight_matrix", {}, Mel(8, 16, 8192, -1, 4096)),
              HasSubstr("lower_edge_hertz must be finite and at least 0, got -1.0"));
  EXPECT_THAT(test::InferError("mel_weight_matrix", {}, Mel(8, 16, 8192, 100, 100)),
              HasSubstr("upper_edge_hertz must be finite and above lower_edge_hertz 100.0, got "
                        "100.0"));
  Attrs ints = Mel(8, 16, 8192, 0, 4096);
  ints.Set("dtype", DType::kInt32);
  EXPECT_THAT(test::InferError("mel_weight_matrix", {}, ints),
              HasSubstr("a float dtype (f32, f16, bf16, f64)"));
}

TEST(MelWeightMatrix, OnnxExample) {
  // ONNX's test case (test_melweightmatrix): 8 bands over a 16-point DFT at 8192 Hz, 0-4096 Hz.
  std::vector<float> want(9 * 8, 0.0f);
  const int64_t ones[][2] = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  for (const auto& [j, i] : ones) want[j * 8 + i] = 1;
  EXPECT_TRUE(TensorsNear(RunOne("mel_weight_matrix", {}, Mel(8, 16, 8192, 0, 4096)),
                          test::Floats({9, 8}, want)));
}

TEST(MelWeightMatrix, HandComputed) {
  // 3 bands, 20-point DFT at 1000 Hz, 0-500 Hz: the mel steps are mel(500) / 5, whose edges
  // 0, 79.7, 168.4, 267.3, 377.4 Hz fall in bins floor(21 f / 1000) = 0, 1, 3, 5, 7. Band 0 rises
  // over bins 0-1 and falls to 3 (0.5 at bin 2); bands 1 and 2 are 0.5, 1, 0.5 around bins 3, 5.
  std::vector<double> want(11 * 3, 0.0);
  auto set = [&](int j, int i, double v) { want[j * 3 + i] = v; };
  set(1, 0, 1), set(2, 0, 0.5);
  set(2, 1, 0.5), set(3, 1, 1), set(4, 1, 0.5);
  set(4, 2, 0.5), set(5, 2, 1), set(6, 2, 0.5);
  Attrs attrs = Mel(3, 20, 1000, 0, 500);
  attrs.Set("dtype", DType::kFloat64);
  EXPECT_TRUE(
      TensorsNear(RunOne("mel_weight_matrix", {}, attrs), MakeTensor<double>({11, 3}, want)));
}

}  // namespace
}  // namespace kiln
