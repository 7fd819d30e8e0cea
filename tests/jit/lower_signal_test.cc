// Lowering of dft, stft and det: each op compiled, concretely and shape-generic, and compared
// with its reference kernel on random data.
//
// Both sides compute in f64 and round once to the element type, so the tolerances are about one
// rounding of the result: 1e-5 for f32 (relative, plus as much absolute for the bins that cancel
// to near zero), 1e-12 for f64, and one unit in the last place for f16 and bf16.
#include <gmock/gmock.h>

#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln {
namespace {

using test::AttrsText;

using test::CompiledMatchesReference;
using test::ErrorOf;
using test::RandomTensor;
using test::RunCompiled;
using test::TensorsNear;
using ::testing::HasSubstr;

struct Tolerance {
  double atol, rtol;
};

Tolerance TolFor(DType t) {
  switch (t) {
    case DType::kFloat64:
      return {1e-12, 1e-12};
    case DType::kFloat16:
      return {1e-3, 2e-3};
    case DType::kBFloat16:
      return {1e-2, 1.6e-2};
    default:
      return {1e-5, 1e-5};
  }
}

// A function of one call of `op` in which the dims that `symbolic(input, dim)` picks are symbols
// (named after their size, as SingleOpFunction names them): the complex dim and det's matrix
// size must stay constants, the others may be symbolic.
Function PartlySymbolicFunction(const std::string& op, const std::vector<Tensor>& inputs,
                                const Attrs& attrs,
                                const std::function<bool(size_t, int)>& symbolic) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape shape;
    for (int d = 0; d < inputs[i].ndim(); ++d) {
      int64_t n = inputs[i].shape()[d];
      shape.push_back(symbolic(i, d) && n > 1 ? Dim::Symbol(StrCat("d", n)) : Dim(n));
    }
    params.push_back(MakeVar(StrCat("x", i), TensorType(shape, inputs[i].dtype())));
    args.push_back(params.back());
  }
  return InferTypes(
      MakeFunction(params, MakeCall(op, args, attrs), nullptr, Attrs{{"primitive", true}}));
}

// The compiled kernel matches the reference, concretely and with the dims `symbolic` picks.
::testing::AssertionResult Matches(const std::string& op, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs, Tolerance tol,
                                   const std::function<bool(size_t, int)>& symbolic) {
  ::testing::AssertionResult r =
      CompiledMatchesReference(op, inputs, attrs, tol.atol, tol.rtol, /*also_symbolic=*/false);
  if (!r) return r;
  std::vector<Tensor> got;
  try {
    got = RunCompiled(PartlySymbolicFunction(op, inputs, attrs, symbolic), inputs, "k_" + op);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << op << " (symbolic): " << e.what();
  }
  ::testing::AssertionResult s =
      TensorsNear(got.at(0), RunOpReference(op, inputs, attrs).at(0), tol.atol, tol.rtol);
  if (!s) return ::testing::AssertionFailure() << op << " (symbolic): " << s.message();
  return s;
}

const std::vector<DType> kFloatDTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                         DType::kBFloat16};

// Every dim but the trailing (real, imaginary) one may be symbolic.
bool AllButLast(const std::vector<Tensor>& inputs, size_t i, int d) {
  return d != inputs[i].ndim() - 1 || inputs[i].ndim() == 1;
}

// ---- dft ----

struct DftCase {
  std::vector<int64_t> shape;
  int64_t axis;
  bool inverse = false, onesided = false;
  int64_t length = 0;
};

TEST(LowerSignal, Dft) {
  const std::vector<DftCase> cases = {
      {{1, 1, 1}, 1},                   // size 1
      {{1, 1, 2}, 1, true},             // size 1, complex, inverse
      {{2, 7, 1}, 1, false, true},      // odd, onesided
      {{3, 5, 2}, 1, true},             // odd, complex inverse
      {{3, 6, 2}, -2, true, true},      // inverse keeping the first bins, as ONNX's reference
      {{2, 3, 4, 2}, 2},                // an inner axis
      {{5, 3, 1}, 0},                   // the batch axis
      {{2, 5, 1}, 1, false, false, 8},  // zero-padded
      {{2, 9, 2}, 1, false, true, 4},   // truncated, onesided
      {{2, 257, 2}, 1},                 // larger: 66k terms per line set
      {{4, 96, 3, 1}, 1, false, true},  // larger, real, strided lines
  };
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    for (const DftCase& c : cases) {
      if (t != DType::kFloat32 && c.shape[1] > 100) continue;  // the large ones once
      Tensor x = RandomTensor(t, c.shape, seed++, -2, 2);
      Attrs attrs{
          {"axis", c.axis}, {"inverse", c.inverse}, {"onesided", c.onesided}, {"length", c.length}};
      SCOPED_TRACE(StrCat("dft ", x.TypeString(), AttrsText(attrs)));
      std::vector<Tensor> in{x};
      EXPECT_TRUE(Matches("dft", in, attrs, TolFor(t),
                          [&](size_t i, int d) { return AllButLast(in, i, d); }));
    }
  }
}

// ---- stft ----

struct StftCase {
  std::vector<int64_t> signal;
  int64_t step, frame_length;
  bool window, onesided = true;
};

TEST(LowerSignal, Stft) {
  const std::vector<StftCase> cases = {
      {{1, 1, 1}, 1, 1, false},         // size 1
      {{1, 1, 2}, 1, 0, true},          // size 1, complex, the window's length
      {{1, 128, 1}, 8, 16, false},      // ONNX's test_stft
      {{1, 128, 1}, 8, 0, true},        // ONNX's test_stft_with_window
      {{2, 23, 2}, 5, 7, true, false},  // odd, complex, two-sided
      {{3, 10, 1}, 3, 0, false},        // one frame of the whole signal
      {{2, 1000, 1}, 61, 125, true},    // larger, odd frame
  };
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    for (const StftCase& c : cases) {
      if (t != DType::kFloat32 && c.signal[1] > 200) continue;
      std::vector<Tensor> in{RandomTensor(t, c.signal, seed++, -2, 2)};
      if (c.window) {
        int64_t n = c.frame_length > 0 ? c.frame_length : c.signal[1] < 16 ? c.signal[1] : 16;
        in.push_back(RandomTensor(t, {n}, seed++, 0, 1));
      }
      Attrs attrs{
          {"frame_step", c.step}, {"frame_length", c.frame_length}, {"onesided", c.onesided}};
      SCOPED_TRACE(
          StrCat("stft ", in[0].TypeString(), c.window ? " window" : "", AttrsText(attrs)));
      EXPECT_TRUE(Matches("stft", in, attrs, TolFor(t),
                          [&](size_t i, int d) { return AllButLast(in, i, d); }));
    }
  }
}

// ---- det ----

TEST(LowerSignal, Det) {
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1},       {2, 2},    {3, 3},    {4, 4},    {5, 3, 3},
      {2, 3, 4, 4}, {7, 2, 2}, {0, 3, 3}, {3, 0, 0}, {600, 4, 4},  // larger: 9600 elements
  };
  for (DType t : kFloatDTypes) {
    uint64_t seed = 1;
    for (const std::vector<int64_t>& shape : shapes) {
      if (t != DType::kFloat32 && shape[0] > 100) continue;
      std::vector<Tensor> in{RandomTensor(t, shape, seed++, -2, 2)};
      SCOPED_TRACE(StrCat("det ", in[0].TypeString()));
      // The batch dims may be symbolic; the matrix size decides the expansion, so it may not.
      const int rank = static_cast<int>(shape.size());
      EXPECT_TRUE(Matches("det", in, {}, TolFor(t), [&](size_t, int d) { return d < rank - 2; }));
    }
  }
}

// Singular and permutation matrices come out exact: 0 and -1.
TEST(LowerSignal, DetExactCases) {
  Tensor x = test::MakeTensor<float>({3, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9,  //
                                                 0, 1, 0, 1, 0, 0, 0, 0, 1,  //
                                                 2, 0, 0, 0, 3, 0, 0, 0, 4});
  std::vector<Tensor> got = RunCompiled(test::SingleOpFunction("det", {x}, {}, false), {x});
  EXPECT_TRUE(TensorsNear(got.at(0), test::MakeTensor<float>({3}, {0, -1, 24}), 0, 0));
}

TEST(LowerSignal, DetSizeLimit) {
  Tensor x = RandomTensor(DType::kFloat32, {2, 5, 5}, 3);
  Error e = ErrorOf([&] { RunCompiled(test::SingleOpFunction("det", {x}, {}, false), {x}); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("det: x holds 5x5 matrices; the lowering (a cofactor expansion) "
                                  "handles at most 4x4"));
  Tensor y = RandomTensor(DType::kFloat32, {3, 3}, 4);
  e = ErrorOf([&] { RunCompiled(test::SingleOpFunction("det", {y}, {}, true), {y}); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("det: the matrix size is symbolic"));
}

// ---- mel_weight_matrix ----

TEST(LowerSignal, MelWeightMatrix) {
  struct MelCase {
    int64_t bands, dft, rate;
    double lower, upper;
    DType dtype;
  };
  const std::vector<MelCase> cases = {
      {1, 1, 8000, 0, 4000, DType::kFloat32},        // size 1: one bin, one band
      {8, 16, 8192, 0, 4096, DType::kFloat32},       // ONNX's example
      {5, 27, 16000, 37.5, 7000, DType::kFloat64},   // odd length, fractional weights
      {40, 255, 22050, 20, 11025, DType::kFloat16},  // larger: 128 x 40
  };
  for (const MelCase& c : cases) {
    Attrs attrs{{"num_mel_bins", c.bands},     {"dft_length", c.dft},
                {"sample_rate", c.rate},       {"lower_edge_hertz", c.lower},
                {"upper_edge_hertz", c.upper}, {"dtype", c.dtype}};
    SCOPED_TRACE(StrCat("mel_weight_matrix", AttrsText(attrs)));
    const Tolerance tol = TolFor(c.dtype);
    EXPECT_TRUE(
        CompiledMatchesReference("mel_weight_matrix", {}, attrs, tol.atol, tol.rtol, false));
  }
}

}  // namespace
}  // namespace kiln
