// What the interpolating ops share: resize (resize.cc), grid_sample (grid_sample.cc) and
// roi_align (roi_align.cc). Their formulas are written once, as templates over N, for numbers
// in the reference kernels and for loop expressions (ExprOf) in the lowerings, so that both make
// the same decisions; this header holds the arithmetic that makes one template serve both, Keys'
// cubic weights, the reference kernels' float dispatch, and the checks of string attributes
// that name one of a few modes.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/ops/op_util.h"

namespace kiln::ops {

// The position of `s` in `names` (the enum's value); -1 when absent.
template <size_t K>
int IndexOf(const std::array<std::string_view, K>& names, const std::string& s) {
  auto it = std::find(names.begin(), names.end(), s);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

template <size_t K>
std::function<std::string(const AttrValue&)> CheckOneOf(
    const std::array<std::string_view, K>& names) {
  return [names](const AttrValue& v) -> std::string {
    const std::string& s = std::get<std::string>(v);
    if (IndexOf(names, s) >= 0) return "";
    std::string list;
    for (size_t i = 0; i < K; ++i) list += StrCat(i ? ", " : "", std::string(names[i]));
    return StrCat("must be one of ", list, ", got \"", s, "\"");
  };
}

// ---- formulas shared by reference kernels (N = double, float) and lowerings (N = ExprOf) ----

// A loop expression of dtype kT (a float, or int64 for indices) with the operators of C++'s
// numbers, so that the family's formulas read the same for numbers and for loop expressions.
// Comparisons give the bool expression, wrapped alike. The operators are hidden friends, so that
// a number operand converts (`1 - r`).
template <DType kT>
struct ExprOf {
  loop::Expr e;
  ExprOf(loop::Expr x) : e(std::move(x)) {}        // NOLINT: implicit by design
  ExprOf(double v) : e(loop::MakeConst(v, kT)) {}  // NOLINT

  friend ExprOf operator+(const ExprOf& a, const ExprOf& b) { return loop::Add(a.e, b.e); }
  friend ExprOf operator-(const ExprOf& a, const ExprOf& b) { return loop::Sub(a.e, b.e); }
  friend ExprOf operator*(const ExprOf& a, const ExprOf& b) { return loop::Mul(a.e, b.e); }
  friend ExprOf operator/(const ExprOf& a, const ExprOf& b) { return loop::Div(a.e, b.e); }
  friend ExprOf operator<(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kLT, a.e, b.e);
  }
  friend ExprOf operator<=(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kLE, a.e, b.e);
  }
  friend ExprOf operator>(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kGT, a.e, b.e);
  }
  friend ExprOf operator>=(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kGE, a.e, b.e);
  }
  friend ExprOf operator==(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kEQ, a.e, b.e);
  }
  friend ExprOf Or(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kOr, a.e, b.e);
  }
  friend ExprOf And(const ExprOf& a, const ExprOf& b) {
    return loop::MakeBinary(loop::BinaryOp::kAnd, a.e, b.e);
  }
  friend ExprOf Pick(const ExprOf& cond, const ExprOf& a, const ExprOf& b) {
    return loop::Select(cond.e, a.e, b.e);
  }
  friend ExprOf Floor(const ExprOf& a) { return loop::Call(loop::Intrinsic::kFloor, {a.e}); }
  friend ExprOf Ceil(const ExprOf& a) { return loop::Call(loop::Intrinsic::kCeil, {a.e}); }
  // Rounds half to even, as C's nearbyint in the default rounding mode.
  friend ExprOf RoundEven(const ExprOf& a) {
    return loop::Call(loop::Intrinsic::kRoundEven, {a.e});
  }
  friend ExprOf Min(const ExprOf& a, const ExprOf& b) { return loop::Min(a.e, b.e); }
  friend ExprOf Max(const ExprOf& a, const ExprOf& b) { return loop::Max(a.e, b.e); }
  friend ExprOf FloorMod(const ExprOf& a, const ExprOf& b) { return loop::FloorMod(a.e, b.e); }
  // As float64, for weights computed from a coordinate of another precision.
  friend ExprOf<DType::kFloat64> Widen(const ExprOf& a) { return loop::Cast(DType::kFloat64, a.e); }
  // A float holding an integral value as an int64 index.
  friend ExprOf<DType::kInt64> ToIndex(const ExprOf& a) { return loop::Cast(DType::kInt64, a.e); }
};
using LE = ExprOf<DType::kFloat64>;

// The same for numbers: float and double (coordinates), int64_t (grid_sample's indices).
// Templates, so that operands of two types do not mix unnoticed; an ExprOf's own friends win
// over them.
inline bool Or(bool a, bool b) {
  return a || b;
}
inline bool And(bool a, bool b) {
  return a && b;
}
template <typename T>
T Pick(bool cond, T a, T b) {
  static_assert(std::is_arithmetic_v<T>);
  return cond ? a : b;
}
template <typename T>
T Floor(T a) {
  static_assert(std::is_floating_point_v<T>);
  return std::floor(a);
}
template <typename T>
T Ceil(T a) {
  static_assert(std::is_floating_point_v<T>);
  return std::ceil(a);
}
template <typename T>
T RoundEven(T a) {
  static_assert(std::is_floating_point_v<T>);
  return std::nearbyint(a);
}
template <typename T>
double Widen(T a) {
  static_assert(std::is_floating_point_v<T>);
  return a;
}
template <typename T>
int64_t ToIndex(T a) {
  static_assert(std::is_floating_point_v<T>);
  return static_cast<int64_t>(a);
}
inline int64_t Min(int64_t a, int64_t b) {
  return std::min(a, b);
}
inline int64_t Max(int64_t a, int64_t b) {
  return std::max(a, b);
}
// Python's and loop IR's floor modulo: the result has b's sign (b > 0 here).
inline int64_t FloorMod(int64_t a, int64_t b) {
  return (a % b + b) % b;
}

template <typename N>
using CondOf = decltype(std::declval<N>() < std::declval<N>());

// Keys' cubic convolution weights, with coefficient A, of the four taps around a coordinate at
// fraction r past the second tap: at distances 1 + r, r, 1 - r and 2 - r, in the operation
// order of ONNX's references (Resize and GridSample compute them alike).
template <typename N>
std::vector<N> CubicWeights(const N& A, const N& r) {
  const N s = 1 - r;
  return {((A * (r + 1) - A * 5) * (r + 1) + A * 8) * (r + 1) - A * 4,
          ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * s - (A + 3)) * s * s + 1,
          ((A * (s + 1) - A * 5) * (s + 1) + A * 8) * (s + 1) - A * 4};
}

// ---- reference kernels ----

template <typename T>
double ToDouble(T v) {
  return static_cast<double>(static_cast<ops::ComputeT<T>>(v));
}
template <typename T>
T FromDouble(double v) {
  return static_cast<T>(static_cast<ops::ComputeT<T>>(v));
}

// Calls fn.template operator()<T>() for the float dtypes.
template <typename Fn>
void DispatchFloat(DType t, Fn&& fn) {
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || ops::kIsHalf<T>) {
      fn.template operator()<T>();
    } else {
      KILN_CHECK(false, "dtype ", DTypeName(t), " passed the type relation");
    }
  });
}

}  // namespace kiln::ops
