// Shared helpers for kiln's tests: random tensors, tensor comparison, error capture, and the
// short forms the op tests use to build types and run one op.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/tensor.h"

#include <unistd.h>

namespace kiln::test {

// The process's resident memory, from /proc/self/statm; 0 where it cannot be read.
inline size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Uniform random values in [lo, hi] (integers: whole numbers in that range; bool: 0/1).
inline Tensor RandomTensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed = 1,
                           double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::Empty(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(rng);
    if (dtype == DType::kBool)
      v = v > (lo + hi) / 2 ? 1.0 : 0.0;
    else if (!IsFloat(dtype))
      v = std::round(v);
    t.SetFromDouble(i, v);
  }
  return t;
}

template <typename T>
Tensor MakeTensor(const std::vector<int64_t>& shape, const std::vector<T>& values) {
  return Tensor::FromVector<T>(shape, values);
}

// Checks dtype, shape and every element: |a - e| <= atol + rtol * |e|; NaN matches NaN and
// infinities must match exactly. Reports the first few mismatching indices.
inline ::testing::AssertionResult TensorsNear(const Tensor& actual, const Tensor& expected,
                                              double atol = 1e-5, double rtol = 1e-5) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "type " << actual.TypeString() << " != expected " << expected.TypeString();
  int bad = 0;
  std::string msg;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.GetAsDouble(i), e = expected.GetAsDouble(i);
    bool ok = (std::isnan(a) && std::isnan(e)) || a == e ||
              (std::isfinite(e) && std::fabs(a - e) <= atol + rtol * std::fabs(e));
    if (!ok && bad++ < 5) msg += StrCat("\n  [", i, "] ", a, " vs expected ", e);
  }
  if (bad) return ::testing::AssertionFailure() << bad << " elements differ:" << msg;
  return ::testing::AssertionSuccess();
}

// The message of the kiln::Error that `fn` throws, or "" (and a test failure) if none.
inline std::string ErrorMessage(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

// The error `fn` throws, code and message; a test failure (and a kInternal error with an empty
// message) if it throws none.
inline Error ErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error(ErrorCode::kInternal, "");
}

// A symbolic dim: S("batch").
inline Dim S(const char* name) {
  return Dim::Symbol(name);
}

// The f32 tensor type of `shape`.
inline Type F32(Shape shape) {
  return TensorType(std::move(shape), DType::kFloat32);
}

// The i64 tensor type of `shape`.
inline Type I64(Shape shape) {
  return TensorType(std::move(shape), DType::kInt64);
}

// An f32 tensor of `shape` holding `values` (row-major).
inline Tensor Floats(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  return MakeTensor<float>(shape, values);
}

// The type `op` infers for `args`, as text (e.g. `f32[batch, 512]`). Constraints the relation
// places on symbolic dims are appended to `constraints` when it is given.
inline std::string Infer(const std::string& op, const std::vector<Type>& args,
                         const Attrs& attrs = {},
                         std::vector<DimConstraint>* constraints = nullptr) {
  return TypeToString(InferOpType(op, args, attrs, constraints));
}

// The message of the error that inferring `op`'s type for `args` raises.
inline std::string InferError(const std::string& op, const std::vector<Type>& args,
                              const Attrs& attrs = {}) {
  return ErrorMessage([&] { InferOpType(op, args, attrs); });
}

// Runs `op`'s reference kernel on `inputs` and returns its output, expecting exactly one.
inline Tensor RunOne(const std::string& op, const std::vector<Tensor>& inputs,
                     const Attrs& attrs = {}) {
  std::vector<Tensor> out = RunOpReference(op, inputs, attrs);
  EXPECT_EQ(out.size(), 1u) << op;
  return out.at(0);
}

// b [K, N] laid out as gemm's packed B (b_panel = t): [ceil(N / t), K, t], element (k, j) at
// [j / t, k, j % t], the columns past N zero. Written here from the layout's definition, apart
// from the pass that makes it (PackConstantWeights).
inline Tensor PackPanels(const Tensor& b, int64_t t) {
  const int64_t k = b.shape()[0], n = b.shape()[1], panels = (n + t - 1) / t;
  Tensor out = Tensor::Empty(b.dtype(), {panels, k, t});
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < t; ++c)
        out.SetFromDouble((p * k + r) * t + c,
                          p * t + c < n ? b.GetAsDouble(r * n + p * t + c) : 0);
  return out;
}

}  // namespace kiln::test
