// The resize family: resize (ONNX Resize, opsets 10-17, and Upsample, on a tensor of any rank)
// and grid_sample (ONNX GridSample, described at its section below), which share the
// interpolation formulas (Keys' cubic weights) and their double/loop-expression form.
//
// ---- resize ----
//
// Output size. Exactly one of `scales` and `sizes` is given, one value per dim of x:
//   out = sizes[d], or floor(in * scales[d]) (computed in double, as ONNX's reference does).
// A symbolic dim is allowed where the output size is still a dim expression: a scale of 1
// (out = in), a whole-number scale k (out = in * k), or any size.
//
// Each output index o of a dim maps to a source coordinate x in the input (float64), by
// coordinate_transformation_mode, with scale = scales[d] (or out / in when sizes are given),
// and out_width = scale * in: the unrounded output length, which ONNX's reference uses (so a
// downsampled align_corners dim divides by 2.4 - 1, not by 2 - 1):
//   half_pixel:           (o + 0.5) / scale - 0.5
//   pytorch_half_pixel:   half_pixel, but -0.5 when out_width is 1
//   align_corners:        o * (in - 1) / (out_width - 1), 0 when out_width is 1
//   asymmetric:           o / scale
//   tf_half_pixel_for_nn: (o + 0.5) / scale  (Resize-11 only, for nearest)
//   tf_crop_and_resize:   roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) /
//                         (out_width - 1), or the middle of the roi when out_width is 1; a
//                         coordinate outside [0, in - 1] gives extrapolation_value
// with roi = [starts of every dim..., ends of every dim...].
//
// Each output element is then a weighted sum of a few input elements per dim, indices clamped
// into the input (ONNX's "edge" padding), combined over the dims as ONNX's reference does: the
// last dim first, so out = sum_a w0[a] * (sum_b w1[b] * (... x[i0[a], i1[b], ...])).
//   nearest: one element, picked by nearest_mode from floor(x) and floor(x) + 1:
//            round_prefer_floor / round_prefer_ceil (on the fraction 0.5), floor, ceil, and
//            simple (Resize-10 and Upsample, as ONNX Runtime implements them: floor on an
//            upsampled dim, ceil on a downsampled one, i.e. scale < 1).
//   linear:  2 elements, left = ceil(x) - 1 and left + 1, weights 1 - r and r with
//            r = x - left in (0, 1] (ONNX's reference prefers the left pixel: an integer x
//            reads x - 1 with weight 0 and x with weight 1).
//   cubic:   4 elements, left - 1 .. left + 2, Keys' cubic weights with cubic_coeff_a.
// With exclude_outside, linear and cubic drop the elements outside the input and renormalize
// the remaining weights to sum 1 (nearest ignores it). A dim whose scale is 1 maps every index
// to itself (except under tf_half_pixel_for_nn, which shifts, and tf_crop_and_resize with a roi
// other than [0, 1]) and reads only that element: the same value as ONNX's weights 0 and 1.
//
// Dtypes: nearest takes every dtype (it only moves elements); linear and cubic the floats,
// computed in float64. The formulas that decide which elements are read (coordinates, rounding,
// weights) are written once below, for double in the reference kernel and for loop expressions
// in the lowering, so both make the same decisions. The lowering computes them once per output
// index of each dim into small kernel-local tables (index and weight per tap), then reads the
// tables in the main loop.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using loop::Expr;

// ---- attributes ----

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNn,
};
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

// Constant-initialized, so registration may run during any static initialization.
constexpr std::array<std::string_view, 3> kModes = {"nearest", "linear", "cubic"};
constexpr std::array<std::string_view, 6> kCoords = {"half_pixel",         "pytorch_half_pixel",
                                                     "align_corners",      "asymmetric",
                                                     "tf_crop_and_resize", "tf_half_pixel_for_nn"};
constexpr std::array<std::string_view, 5> kRoundings = {"round_prefer_floor", "round_prefer_ceil",
                                                        "floor", "ceil", "simple"};

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

std::string CheckPositiveFloats(const AttrValue& v) {
  for (double s : std::get<std::vector<double>>(v)) {
    if (!(s > 0) || !std::isfinite(s))
      return StrCat("must be positive and finite, got ", FormatDouble(s));
  }
  return "";
}

struct ResizeParams {
  Mode mode;
  Coord coord;
  Rounding rounding;
  double cubic_a;
  bool exclude_outside;
  double extrapolation;
  std::vector<double> scales;  // empty: sizes are given
  std::vector<int64_t> sizes;  // empty: scales are given
  std::vector<double> roi;     // tf_crop_and_resize only
};

ResizeParams ParseParams(const Attrs& a) {
  ResizeParams p;
  p.mode = static_cast<Mode>(IndexOf(kModes, a.GetString("mode")));
  p.coord = static_cast<Coord>(IndexOf(kCoords, a.GetString("coordinate_transformation_mode")));
  p.rounding = static_cast<Rounding>(IndexOf(kRoundings, a.GetString("nearest_mode")));
  p.cubic_a = a.GetFloat("cubic_coeff_a");
  p.exclude_outside = a.GetBool("exclude_outside");
  p.extrapolation = a.GetFloat("extrapolation_value");
  p.scales = a.GetFloats("scales");
  p.sizes = a.GetInts("sizes");
  p.roi = a.GetFloats("roi");
  return p;
}

// Whether dim `d` maps every output index to the same input index, given that its scale is 1.
bool IsIdentityAxis(const ResizeParams& p, int d, int rank) {
  if (p.coord == Coord::kTfHalfPixelForNn) return false;
  if (p.coord == Coord::kTfCropAndResize) return p.roi[d] == 0 && p.roi[d + rank] == 1;
  return true;
}

// ---- formulas shared by reference kernels (N = double, float) and lowerings (N = ExprOf) ----

// A loop expression of dtype kT (a float, or int64 for indices) with the operators of C++'s
// numbers, so that the formulas below read the same for numbers and for loop expressions.
// Comparisons give the bool expression, wrapped alike. The operators are hidden friends, so that
// a number operand converts (`1 - r`).
template <DType kT>
struct ExprOf {
  Expr e;
  ExprOf(Expr x) : e(std::move(x)) {}              // NOLINT: implicit by design
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
bool Or(bool a, bool b) {
  return a || b;
}
bool And(bool a, bool b) {
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
int64_t Min(int64_t a, int64_t b) {
  return std::min(a, b);
}
int64_t Max(int64_t a, int64_t b) {
  return std::max(a, b);
}
// Python's and loop IR's floor modulo: the result has b's sign (b > 0 here).
int64_t FloorMod(int64_t a, int64_t b) {
  return (a % b + b) % b;
}

template <typename N>
using CondOf = decltype(std::declval<N>() < std::declval<N>());

// One dim's geometry.
template <typename N>
struct Axis {
  N in;         // the input length
  N scale;      // what half_pixel and asymmetric divide by
  N out_width;  // scale * in, unrounded
  double roi_start = 0, roi_end = 1;
};

// The source coordinate of output index `o`.
template <typename N>
N SourceCoord(Coord coord, const Axis<N>& a, const N& o) {
  auto half_pixel = [&] { return (o + 0.5) / a.scale - 0.5; };
  switch (coord) {
    case Coord::kHalfPixel:
      return half_pixel();
    case Coord::kPytorchHalfPixel:
      return Pick(a.out_width == N(1), N(-0.5), half_pixel());
    case Coord::kAlignCorners:
      return Pick(a.out_width == N(1), N(0), o * (a.in - 1) / (a.out_width - 1));
    case Coord::kAsymmetric:
      return o / a.scale;
    case Coord::kTfHalfPixelForNn:
      return (o + 0.5) / a.scale;
    case Coord::kTfCropAndResize: {
      const N span = a.roi_end - a.roi_start;
      return Pick(a.out_width == N(1), span * (a.in - 1) / 2,
                  o * span * (a.in - 1) / (a.out_width - 1)) +
             a.roi_start * (a.in - 1);
    }
  }
  return half_pixel();  // not reached: the schema checks the mode
}

// Whether the coordinate or index `i` lies outside [0, in - 1].
template <typename N>
CondOf<N> OutsideInput(const N& i, const N& in) {
  const CondOf<N> below = i < N(0);
  const CondOf<N> above = i > in - 1;
  return Or(below, above);
}

// The elements one output index reads along one dim: input indices first, first + 1, ...
// (unclamped, integral values) with `weight` each.
template <typename N>
struct Taps {
  N first;
  std::vector<N> weight;
  CondOf<N> outside;  // tf_crop_and_resize: the coordinate is outside the input
};

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

template <typename N>
Taps<N> AxisTaps(const ResizeParams& p, const Axis<N>& a, const N& o) {
  const N x = SourceCoord(p.coord, a, o);
  Taps<N> t{N(0), {}, OutsideInput(x, a.in)};
  if (p.mode == Mode::kNearest) {
    const N f = Floor(x);
    const N r = x - f;
    switch (p.rounding) {
      case Rounding::kRoundPreferFloor:
        t.first = Pick(r <= N(0.5), f, f + 1);
        break;
      case Rounding::kRoundPreferCeil:
        t.first = Pick(r < N(0.5), f, f + 1);
        break;
      case Rounding::kFloor:
        t.first = f;
        break;
      case Rounding::kCeil:
        t.first = Ceil(x);
        break;
      case Rounding::kSimple:
        t.first = Pick(a.scale < N(1), Ceil(x), f);
        break;
    }
    t.weight = {N(1)};
    return t;
  }
  // ONNX's reference takes the neighbours around the pixel left of x: r is in (0, 1].
  const N left = Ceil(x) - 1;
  const N r = x - left;
  if (p.mode == Mode::kLinear) {
    t.first = left;
    t.weight = {1 - r, r};
  } else {
    t.first = left - 1;
    t.weight = CubicWeights(N(p.cubic_a), r);
  }
  if (p.exclude_outside) {
    N sum(0);
    for (size_t k = 0; k < t.weight.size(); ++k) {
      const N i = t.first + static_cast<double>(k);
      t.weight[k] = Pick(OutsideInput(i, a.in), N(0), t.weight[k]);
      sum = k == 0 ? t.weight[k] : sum + t.weight[k];
    }
    for (N& w : t.weight) w = w / sum;
  }
  return t;
}

// Tap k's index, clamped into [0, in - 1] (to 0 for an empty input, which has nothing to read:
// every buffer has storage for one element).
template <typename N>
N ClampedIndex(const Taps<N>& t, const N& in, int k) {
  const N i = k == 0 ? t.first : t.first + static_cast<double>(k);
  const N at_most_last = Pick(i > in - 1, in - 1, i);
  return Pick(at_most_last < N(0), N(0), at_most_last);
}

// ---- type relation ----

Type ResizeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const ResizeParams p = ParseParams(ctx.attrs());
  if (p.mode != Mode::kNearest && !IsFloat(x.dtype))
    ctx.Fail(StrCat("mode ", std::string(kModes[static_cast<int>(p.mode)]),
                    " needs a float input (f32, f16, bf16, f64), got ", TypeToString(ctx.arg(0)),
                    "; only nearest takes other dtypes"));
  const int rank = x.ndim();
  const bool has_scales = !p.scales.empty(), has_sizes = !p.sizes.empty();
  if (has_scales == has_sizes)
    ctx.Fail(has_scales ? "scales and sizes are both given; give exactly one"
                        : "neither scales nor sizes is given; give exactly one");
  const size_t count = has_scales ? p.scales.size() : p.sizes.size();
  if (count != static_cast<size_t>(rank)) {
    std::string values;
    if (has_scales) {
      for (size_t i = 0; i < p.scales.size(); ++i)
        values += StrCat(i ? ", " : "", FormatDouble(p.scales[i]));
      values = "[" + values + "]";
    } else {
      values = IntsToString(p.sizes);
    }
    ctx.Fail(StrCat(has_scales ? "scales " : "sizes ", values, " must have one value per dim of x ",
                    ShapeToString(x.shape), " (", rank, ")"));
  }
  if (p.coord == Coord::kTfCropAndResize && p.roi.size() != 2 * static_cast<size_t>(rank))
    ctx.Fail(StrCat("tf_crop_and_resize needs a roi of ", 2 * rank,
                    " values (the starts of every dim, then the ends), got ", p.roi.size()));
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const Dim& in = x.shape[d];
    if (has_sizes) {
      if (in.is_const() && in.value() == 0 && p.sizes[d] > 0)
        ctx.Fail(StrCat("dim ", d, " of x ", ShapeToString(x.shape),
                        " is empty and cannot be resized to size ", p.sizes[d]));
      if (p.sizes[d] > 0)
        ctx.AssertAtMost(Dim(1), in, StrCat("dim ", d, " of x (resized to ", p.sizes[d], ")"));
      out.push_back(Dim(p.sizes[d]));
      continue;
    }
    const double s = p.scales[d];
    if (s == 1) {
      out.push_back(in);
    } else if (in.is_const()) {
      const double n = std::floor(static_cast<double>(in.value()) * s);
      if (!(n < 9e18))
        ctx.Fail(StrCat("scale ", FormatDouble(s), " of dim ", d, " of x ", ShapeToString(x.shape),
                        " gives an output size too large"));
      out.push_back(Dim(static_cast<int64_t>(n)));
    } else if (s == std::floor(s) && s < 2147483648.0) {
      out.push_back(in * Dim(static_cast<int64_t>(s)));
    } else {
      ctx.Fail(
          StrCat("dim ", d, " of x ", ShapeToString(x.shape), " is symbolic, so its scale ",
                 FormatDouble(s),
                 " must be 1 or a whole number (floor(dim * scale) must be a dim expression)"));
    }
  }
  return TensorType(std::move(out), x.dtype);
}

// ---- reference kernel ----

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

// Per dim: the taps of every output index, and whether the dim is an identity.
struct RefAxis {
  bool identity = false;
  std::vector<Taps<double>> taps;
};

std::vector<RefAxis> RefAxes(const ResizeParams& p, const std::vector<int64_t>& in,
                             const std::vector<int64_t>& out) {
  const int rank = static_cast<int>(in.size());
  std::vector<RefAxis> axes(rank);
  for (int d = 0; d < rank; ++d) {
    const bool given = !p.scales.empty();
    const double scale =
        given ? p.scales[d] : static_cast<double>(out[d]) / static_cast<double>(in[d]);
    axes[d].identity = (given ? scale == 1 : in[d] == out[d]) && IsIdentityAxis(p, d, rank);
    if (axes[d].identity) continue;
    Axis<double> a{static_cast<double>(in[d]), scale, scale * static_cast<double>(in[d])};
    if (p.coord == Coord::kTfCropAndResize) {
      a.roi_start = p.roi[d];
      a.roi_end = p.roi[d + rank];
    }
    for (int64_t o = 0; o < out[d]; ++o)
      axes[d].taps.push_back(AxisTaps(p, a, static_cast<double>(o)));
  }
  return axes;
}

void ResizeKernelRef(const Tensor& x, const Attrs& attrs, Tensor& out) {
  const ResizeParams p = ParseParams(attrs);
  const std::vector<int64_t>& in_shape = x.shape();
  const std::vector<int64_t>& out_shape = out.shape();
  const int rank = x.ndim();
  const std::vector<RefAxis> axes = RefAxes(p, in_shape, out_shape);
  std::vector<int64_t> idx;
  auto index = [&](int d, const Taps<double>& t, int k) {
    return static_cast<int64_t>(ClampedIndex(t, static_cast<double>(in_shape[d]), k));
  };
  // Unravels output element o into idx; false when it is extrapolation_value.
  auto inside = [&](int64_t o) {
    ops::Unravel(o, out_shape, idx);
    if (p.coord != Coord::kTfCropAndResize) return true;
    for (int d = 0; d < rank; ++d)
      if (!axes[d].identity && axes[d].taps[idx[d]].outside) return false;
    return true;
  };
  if (p.mode == Mode::kNearest) {
    for (int64_t o = 0; o < out.numel(); ++o) {
      if (!inside(o)) {
        out.SetFromDouble(o, p.extrapolation);
        continue;
      }
      int64_t src = 0;
      for (int d = 0; d < rank; ++d)
        src = src * in_shape[d] + (axes[d].identity ? idx[d] : index(d, axes[d].taps[idx[d]], 0));
      ops::CopyElements(x, src, out, o, 1);
    }
    return;
  }
  DispatchFloat(x.dtype(), [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = out.data<T>();
    // The weighted sum over dim d's taps of the sums over the later dims; `base` is the
    // row-major offset of the indices chosen for dims 0..d-1.
    std::function<double(int, int64_t)> blend = [&](int d, int64_t base) -> double {
      if (d == rank) return ToDouble(xp[base]);
      if (axes[d].identity) return blend(d + 1, base * in_shape[d] + idx[d]);
      const Taps<double>& t = axes[d].taps[idx[d]];
      double sum = 0;
      for (size_t k = 0; k < t.weight.size(); ++k) {
        const double term =
            t.weight[k] * blend(d + 1, base * in_shape[d] + index(d, t, static_cast<int>(k)));
        sum = k == 0 ? term : sum + term;
      }
      return sum;
    };
    for (int64_t o = 0; o < out.numel(); ++o)
      yp[o] = inside(o) ? FromDouble<T>(blend(0, 0)) : FromDouble<T>(p.extrapolation);
  });
}

// ---- lowering ----

// One dim of the lowering: an identity, or tables of the taps' clamped indices and weights (and
// of the tf_crop_and_resize outside flag) per output index.
struct LoweredAxis {
  bool identity = false;
  std::vector<LTensor> index, weight;
  LTensor outside;
};

std::vector<LTensor> LowerResize(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const ResizeParams p = ParseParams(attrs);
  const int rank = x.ndim();
  const DType t = x.dtype;
  const DType f64 = DType::kFloat64;
  const std::vector<Expr> out_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  const bool crop = p.coord == Coord::kTfCropAndResize;
  std::vector<LoweredAxis> axes(rank);
  for (int d = 0; d < rank; ++d) {
    const bool given = !p.scales.empty();
    int64_t n_in = 0, n_out = 0;
    const bool in_const = loop::IsConstInt(x.shape[d], &n_in);
    loop::IsConstInt(out_shape[d], &n_out);
    const bool unit_scale = given ? p.scales[d] == 1 : in_const && n_in == n_out;
    if (unit_scale && IsIdentityAxis(p, d, rank)) {
      axes[d].identity = true;
      continue;
    }
    // The geometry, folded where the input length is a constant.
    Axis<LE> a{LE(0.0), LE(0.0), LE(0.0)};
    if (in_const) {
      const double scale =
          given ? p.scales[d] : static_cast<double>(n_out) / static_cast<double>(n_in);
      a = {LE(static_cast<double>(n_in)), LE(scale), LE(scale * static_cast<double>(n_in))};
    } else {
      const LE in_f = loop::Cast(f64, x.shape[d]);
      const LE scale = given ? LE(p.scales[d]) : LE(loop::Cast(f64, out_shape[d])) / in_f;
      a = {in_f, scale, scale * in_f};
    }
    if (crop) {
      a.roi_start = p.roi[d];
      a.roi_end = p.roi[d + rank];
    }
    auto taps = [p, a](const std::vector<Expr>& i) {
      return AxisTaps<LE>(p, a, LE(loop::Cast(DType::kFloat64, i[0])));
    };
    const std::vector<Expr> shape = {out_shape[d]};
    const int n_taps = p.mode == Mode::kNearest ? 1 : p.mode == Mode::kLinear ? 2 : 4;
    for (int k = 0; k < n_taps; ++k) {
      axes[d].index.push_back(ctx.Materialize(
          LTensor{DType::kInt64, shape,
                  [taps, a, k](const std::vector<Expr>& i) {
                    return loop::Cast(DType::kInt64, ClampedIndex(taps(i), a.in, k).e);
                  }},
          StrCat("resize_index", d, "_", k)));
      if (p.mode == Mode::kNearest) continue;
      axes[d].weight.push_back(ctx.Materialize(
          LTensor{f64, shape,
                  [taps, k](const std::vector<Expr>& i) { return taps(i).weight[k].e; }},
          StrCat("resize_weight", d, "_", k)));
    }
    if (crop)
      axes[d].outside =
          ctx.Materialize(LTensor{DType::kBool, shape,
                                  [taps](const std::vector<Expr>& i) { return taps(i).outside.e; }},
                          StrCat("resize_outside", d));
  }
  // extrapolation_value as the output dtype stores it (saturated for integers), as the
  // reference's SetFromDouble does.
  Tensor extrapolation = Tensor::Empty(t, {});
  extrapolation.SetFromDouble(0, p.extrapolation);
  const Expr fill = lower::Const(extrapolation.GetAsDouble(0), t);
  const Mode mode = p.mode;
  auto at = [x, axes, rank, t, f64, crop, fill, mode](const std::vector<Expr>& idx) {
    std::vector<Expr> src(rank);
    std::function<Expr(int)> blend = [&](int d) -> Expr {
      if (d == rank) return mode == Mode::kNearest ? x.at(src) : loop::Cast(f64, x.at(src));
      const LoweredAxis& a = axes[d];
      if (a.identity) {
        src[d] = idx[d];
        return blend(d + 1);
      }
      Expr sum;
      for (size_t k = 0; k < a.index.size(); ++k) {
        src[d] = a.index[k].at({idx[d]});
        Expr v = blend(d + 1);
        if (mode == Mode::kNearest) return v;
        Expr term = loop::Mul(a.weight[k].at({idx[d]}), v);
        sum = sum ? loop::Add(sum, term) : term;
      }
      return sum;
    };
    Expr v = loop::Cast(t, blend(0));
    if (!crop) return v;
    Expr outside;
    for (int d = 0; d < rank; ++d) {
      if (axes[d].identity) continue;
      Expr o = axes[d].outside.at({idx[d]});
      outside = outside ? loop::MakeBinary(loop::BinaryOp::kOr, outside, o) : o;
    }
    return outside ? loop::Select(outside, fill, v) : v;
  };
  return {LTensor{t, out_shape, at}};
}

// ---- grid_sample ----
//
// ONNX GridSample-16: x [N, C, H, W] sampled at grid [N, Hout, Wout, 2], whose last dim holds
// (x, y) normalized to [-1, 1] over W and H. out[n, c, h, w] interpolates x[n, c] at
// grid[n, h, w], as ONNX's reference (onnx/reference/ops/op_grid_sample.py) and ONNX Runtime do:
//   1. Unnormalize each coordinate g over its dim of length `size`:
//        align_corners: (g + 1) / 2 * (size - 1)   (-1 and 1 are the centres of the edge pixels)
//        otherwise:     ((g + 1) * size - 1) / 2   (-1 and 1 are their outer edges)
//   2. nearest rounds it half to even (PyTorch's nearbyint, which the reference copies).
//   3. Unless padding_mode is zeros, a coordinate outside [lo, hi] (the pixel centres [0,
//      size - 1] with align_corners, else the edges [-0.5, size - 0.5]) is padded: border
//      clamps it to [0, size - 1], reflection reflects it about lo and hi until inside.
//   4. The taps around it: nearest the coordinate itself, bilinear floor(x) and floor(x) + 1
//      with weights 1 - t and t (t = x - floor(x)), bicubic floor(x) - 1 .. floor(x) + 2 with
//      Keys' weights for A = -0.75. Each tap index is padded again: zeros reads 0 outside the
//      input, border clamps the index, reflection reflects it.
//   5. out = sum over the y taps a of wy[a] * (sum over the x taps b of wx[b] * x[iy[a], ix[b]]).
// Padding the coordinate before the taps (3) follows ONNX's reference and ONNX Runtime; PyTorch
// skips it for bicubic, which differs where a border or reflection coordinate lies outside
// [lo, hi]. For bilinear and nearest the two agree.
//
// Coordinates (1-3) are computed in float32, as ONNX's reference does, so that rounding and
// floor decide alike; in float64 when the grid is f64. Tap indices are integers (reflection's
// then by a period, which is exact), weights and sums float64. x may have any dtype under
// nearest (elements are only moved), a float one otherwise; the grid is float. A NaN grid value
// samples as if it were far past the end, and every index is clamped into its dim before it is
// read, so a compiled kernel never reads out of bounds; zeros padding then selects 0.

enum class GsMode { kBilinear, kNearest, kBicubic };
enum class GsPadding { kZeros, kBorder, kReflection };
constexpr std::array<std::string_view, 3> kGsModes = {"bilinear", "nearest", "bicubic"};
constexpr std::array<std::string_view, 3> kGsPaddings = {"zeros", "border", "reflection"};
// GridSample's fixed Keys coefficient (Resize's cubic_coeff_a default too).
constexpr double kGsCubicA = -0.75;

struct GsParams {
  GsMode mode;
  GsPadding padding;
  bool align_corners;
};

GsParams ParseGsParams(const Attrs& a) {
  return {static_cast<GsMode>(IndexOf(kGsModes, a.GetString("mode"))),
          static_cast<GsPadding>(IndexOf(kGsPaddings, a.GetString("padding_mode"))),
          a.GetBool("align_corners")};
}

// One spatial dim of x: its length, and the range [lo, hi] outside which a coordinate is padded.
template <typename N>
struct SampleAxis {
  N size, lo, hi;
};

template <typename N>
SampleAxis<N> MakeSampleAxis(const N& size, bool align_corners) {
  if (align_corners) return {size, N(0), size - 1};
  return {size, N(-0.5), size - N(0.5)};
}

// max(lo, min(x, hi)); NaN gives hi, never NaN.
template <typename N>
N Clamp(const N& x, const N& lo, const N& hi) {
  const N at_most_hi = Pick(x <= hi, x, hi);
  return Pick(at_most_hi >= lo, at_most_hi, lo);
}

// x reflected about lo and hi until it lies in [lo, hi], by ONNX's reference formula: an excess
// of d past a border makes n = floor(d / (hi - lo)) whole crossings and leaves a rest
// r = d - n * (hi - lo), measured from the border reached after them. A range of one point
// (align_corners, size 1) gives lo.
template <typename N>
N Reflect(const N& x, const N& lo, const N& hi) {
  const N span = hi - lo;
  const N step = Pick(span == N(0), N(1), span);  // never divide by 0
  const auto below = x < lo;
  const auto above = x > hi;
  const N excess = Pick(below, lo - x, x - hi);
  const N n = Floor(excess / step);
  const N rest = excess - n * step;
  const auto even = n == Floor(n / 2) * 2;
  const N from_lo = lo + rest, from_hi = hi - rest;
  // Below lo an even count of crossings ends moving up from lo; above hi, down from hi.
  const N reflected = Pick(below, Pick(even, from_lo, from_hi), Pick(even, from_hi, from_lo));
  return Pick(Or(below, above), Pick(span == N(0), lo, reflected), x);
}

// Steps 1-3 for grid value g: the coordinate whose taps are read. Then held in
// [-4, size + 3], which changes no result of a finite coordinate (only zeros padding reaches
// past [-0.5, size - 0.5], and every tap of a coordinate past -4 or size + 3 is outside, as it
// is for the bound) but keeps the taps' indices small; NaN becomes size + 3.
template <typename N>
N SampleCoord(const GsParams& p, const SampleAxis<N>& a, const N& g) {
  N x = p.align_corners ? (g + 1) / 2 * (a.size - 1) : ((g + 1) * a.size - 1) / 2;
  if (p.mode == GsMode::kNearest) x = RoundEven(x);
  if (p.padding != GsPadding::kZeros) {
    const N padded =
        p.padding == GsPadding::kBorder ? Clamp(x, N(0), a.size - 1) : Reflect(x, a.lo, a.hi);
    const auto below = x < a.lo;
    const auto above = x > a.hi;
    x = Pick(Or(below, above), padded, x);
  }
  return Clamp(x, N(-4), a.size + 3);
}

// Tap index i padded by reflection, in integers: x mirrored about the range's borders repeats
// with period 2 * size about the outer edges [-0.5, size - 0.5] (the edge pixels repeat), or
// 2 * (size - 1) about the centres [0, size - 1] with align_corners (they do not). For the
// integers this is what Reflect computes.
template <typename I>
I ReflectIndex(const I& i, const I& size, bool align_corners) {
  const I period = Max(align_corners ? 2 * (size - 1) : 2 * size, I(1));
  const I m = FloorMod(i, period);
  return align_corners ? Pick(m <= size - 1, m, period - m) : Pick(m < size, m, period - 1 - m);
}

// The taps of one coordinate along one dim: indices in [0, size - 1], whether each unpadded tap
// lay inside the input (zeros padding reads 0 where not), and the weights (empty for nearest,
// whose one tap weighs 1).
template <typename I, typename W>
struct SampleTaps {
  std::vector<I> index;
  std::vector<CondOf<I>> inside;
  std::vector<W> weight;
};

// Step 4 for coordinate x (SampleCoord's) along a dim of length `size`. Indices are integers
// (I), weights float64 (W) from the fraction computed in x's precision.
template <typename N, typename I>
auto AxisSampleTaps(const GsParams& p, const I& size, const N& x) {
  SampleTaps<I, decltype(Widen(x))> t;
  I first = ToIndex(x);
  int n_taps = 1;
  if (p.mode != GsMode::kNearest) {
    const N left = Floor(x);
    const auto frac = Widen(x - left);
    first = ToIndex(left);
    if (p.mode == GsMode::kBilinear) {
      n_taps = 2;
      t.weight = {1 - frac, frac};
    } else {
      n_taps = 4;
      first = first - 1;
      t.weight = CubicWeights(decltype(frac)(kGsCubicA), frac);
    }
  }
  const I last = size - 1;
  for (int k = 0; k < n_taps; ++k) {
    const I i = k == 0 ? first : first + k;
    switch (p.padding) {
      case GsPadding::kZeros:
        t.inside.push_back(And(i >= I(0), i <= last));
        break;
      case GsPadding::kBorder:
        break;
      case GsPadding::kReflection:
        t.index.push_back(Max(Min(ReflectIndex(i, size, p.align_corners), last), I(0)));
        continue;
    }
    // The clamp also keeps the reads in bounds for zeros padding (which selects 0 outside) and
    // after a reflection (which needs none but for an empty dim).
    t.index.push_back(Max(Min(i, last), I(0)));
  }
  return t;
}

Type GridSampleRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& grid = ctx.tensor(1);
  const GsParams p = ParseGsParams(ctx.attrs());
  if (x.ndim() != 4)
    ctx.Fail(StrCat("x must have rank 4 [N, C, H, W], got ", TypeToString(ctx.arg(0))));
  if (grid.ndim() != 4)
    ctx.Fail(StrCat("grid must have rank 4 [N, Hout, Wout, 2], got ", TypeToString(ctx.arg(1))));
  if (!grid.shape[3].is_const() || grid.shape[3].value() != 2)
    ctx.Fail(StrCat("the last dim of grid ", ShapeToString(grid.shape),
                    " must be 2 (the x and y of each point)"));
  if (!IsFloat(grid.dtype))
    ctx.Fail(StrCat("grid must be a float tensor (f32, f16, bf16, f64), got ",
                    TypeToString(ctx.arg(1))));
  if (p.mode != GsMode::kNearest && !IsFloat(x.dtype))
    ctx.Fail(StrCat("mode ", std::string(kGsModes[static_cast<int>(p.mode)]),
                    " needs a float x (f32, f16, bf16, f64), got ", TypeToString(ctx.arg(0)),
                    "; only nearest takes other dtypes"));
  for (int d = 2; d < 4; ++d) {
    if (x.shape[d].is_const() && x.shape[d].value() == 0)
      ctx.Fail(StrCat("dim ", d, " of x ", ShapeToString(x.shape),
                      " is empty: there is nothing to sample"));
    ctx.AssertAtMost(Dim(1), x.shape[d], StrCat("dim ", d, " of x (sampled from)"));
  }
  ctx.AssertEqual(x.shape[0], grid.shape[0],
                  StrCat("the batch dim of x ", ShapeToString(x.shape), " and grid ",
                         ShapeToString(grid.shape)));
  const Dim& n = x.shape[0].is_const() ? x.shape[0] : grid.shape[0];
  return TensorType({n, x.shape[1], grid.shape[1], grid.shape[2]}, x.dtype);
}

// The taps of grid value g along a dim of length `size`, from a coordinate computed in C (float,
// or double for an f64 grid).
template <typename C>
SampleTaps<int64_t, double> RefAxisTaps(const GsParams& p, int64_t size, double g) {
  const C x =
      SampleCoord(p, MakeSampleAxis(static_cast<C>(size), p.align_corners), static_cast<C>(g));
  return AxisSampleTaps(p, size, x);
}

void GridSampleKernelRef(const Tensor& x, const Tensor& grid, const Attrs& attrs, Tensor& out) {
  const GsParams p = ParseGsParams(attrs);
  const int64_t n_batch = out.shape()[0], channels = out.shape()[1];
  const int64_t height = x.shape()[2], width = x.shape()[3];
  const int64_t h_out = out.shape()[2], w_out = out.shape()[3];
  const bool f64 = grid.dtype() == DType::kFloat64;
  auto taps = [&](int64_t size, double g) {
    return f64 ? RefAxisTaps<double>(p, size, g) : RefAxisTaps<float>(p, size, g);
  };
  using Taps = SampleTaps<int64_t, double>;
  // The offset of tap (a, b), x[n, c, ty.index[a], tx.index[b]]; -1 where zeros padding reads 0.
  auto source = [&](int64_t n, int64_t c, const Taps& ty, const Taps& tx, size_t a,
                    size_t b) -> int64_t {
    if (p.padding == GsPadding::kZeros && !(ty.inside[a] && tx.inside[b])) return -1;
    return ((n * channels + c) * height + ty.index[a]) * width + tx.index[b];
  };
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t h = 0; h < h_out; ++h) {
      for (int64_t w = 0; w < w_out; ++w) {
        const int64_t g = ((n * h_out + h) * w_out + w) * 2;
        const Taps tx = taps(width, grid.GetAsDouble(g));
        const Taps ty = taps(height, grid.GetAsDouble(g + 1));
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t o = ((n * channels + c) * h_out + h) * w_out + w;
          if (p.mode == GsMode::kNearest) {
            const int64_t src = source(n, c, ty, tx, 0, 0);
            if (src < 0) {
              out.SetFromDouble(o, 0);
            } else {
              ops::CopyElements(x, src, out, o, 1);
            }
            continue;
          }
          DispatchFloat(x.dtype(), [&]<typename T>() {
            const T* xp = x.data<T>();
            double sum = 0;
            for (size_t a = 0; a < ty.weight.size(); ++a) {
              double row = 0;
              for (size_t b = 0; b < tx.weight.size(); ++b) {
                const int64_t src = source(n, c, ty, tx, a, b);
                row += tx.weight[b] * (src < 0 ? 0.0 : ToDouble(xp[src]));
              }
              sum += ty.weight[a] * row;
            }
            out.data<T>()[o] = FromDouble<T>(sum);
          });
        }
      }
    }
  }
}

// The lowering computes each grid point's two coordinates (SampleCoord, in precision kC) once,
// into kernel-local tables over [N, Hout, Wout]: every channel and tap reads them. Inline, the
// padding's formulas, which use their argument several times, would be copied into every tap
// of every output element (loop IR is a tree, not a DAG), and the kernel would take seconds to
// compile. The taps' integer index math stays inline.
template <DType kC>
std::vector<LTensor> LowerGridSampleIn(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types) {
  using C = ExprOf<kC>;
  using I = ExprOf<DType::kInt64>;
  const LTensor x = in[0], grid = in[1];
  const GsParams p = ParseGsParams(attrs);
  const DType t = x.dtype;
  const DType f64 = DType::kFloat64;
  const std::vector<Expr> points(grid.shape.begin(), grid.shape.begin() + 3);
  auto coords = [&](int d, int64_t k, const char* name) {
    int64_t n = 0;
    const C size = loop::IsConstInt(x.shape[d], &n) ? C(static_cast<double>(n))
                                                    : C(loop::Cast(kC, x.shape[d]));
    const SampleAxis<C> axis = MakeSampleAxis(size, p.align_corners);
    auto at = [grid, p, axis, k](const std::vector<Expr>& i) {
      const C g = loop::Cast(kC, grid.at({i[0], i[1], i[2], loop::IntImm(k)}));
      return SampleCoord(p, axis, g).e;
    };
    return ctx.Materialize(LTensor{kC, points, at}, name);
  };
  // The grid's last dim holds x (along W, dim 3) first, then y (along H, dim 2).
  const LTensor cx = coords(3, 0, "grid_sample_x"), cy = coords(2, 1, "grid_sample_y");
  const Expr zero = lower::Const(0, p.mode == GsMode::kNearest ? t : f64);
  auto at = [x, cx, cy, p, t, f64, zero](const std::vector<Expr>& idx) {
    const Expr &n = idx[0], &c = idx[1], &h = idx[2], &w = idx[3];
    const auto tx = AxisSampleTaps(p, I(x.shape[3]), C(cx.at({n, h, w})));
    const auto ty = AxisSampleTaps(p, I(x.shape[2]), C(cy.at({n, h, w})));
    auto value = [&](size_t a, size_t b) {
      Expr v = x.at({n, c, ty.index[a].e, tx.index[b].e});
      if (p.mode != GsMode::kNearest) v = loop::Cast(f64, v);
      if (p.padding != GsPadding::kZeros) return v;
      return loop::Select(And(ty.inside[a], tx.inside[b]).e, v, zero);
    };
    if (p.mode == GsMode::kNearest) return value(0, 0);
    Expr sum;
    for (size_t a = 0; a < ty.weight.size(); ++a) {
      Expr row;
      for (size_t b = 0; b < tx.weight.size(); ++b) {
        const Expr term = loop::Mul(tx.weight[b].e, value(a, b));
        row = row ? loop::Add(row, term) : term;
      }
      const Expr term = loop::Mul(ty.weight[a].e, row);
      sum = sum ? loop::Add(sum, term) : term;
    }
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

std::vector<LTensor> LowerGridSample(LowerContext& ctx, const std::vector<LTensor>& in,
                                     const Attrs& attrs, const std::vector<Type>& out_types) {
  if (in[1].dtype == DType::kFloat64)
    return LowerGridSampleIn<DType::kFloat64>(ctx, in, attrs, out_types);
  return LowerGridSampleIn<DType::kFloat32>(ctx, in, attrs, out_types);
}

// ---- roi_align ----
//
// ONNX RoiAlign-16: for each region of interest r (x1, y1, x2, y2 in rois[r], scaled by
// spatial_scale, less 0.5 with coordinate_transformation_mode half_pixel), the output bin
// (ph, pw) pools a grid_h x grid_w grid of bilinear samples of x[batch_indices[r], c] taken at
// the centres of the grid's cells within the bin, as ONNX's reference (and ONNX Runtime) do:
//   - output_half_pixel makes a region at least 1 x 1;
//   - grid = sampling_ratio, or ceil(roi_size / output_size) when it is 0 (adaptive), per axis;
//   - a sample with y < -1, y > H, x < -1 or x > W reads 0; otherwise y and x are clamped below
//     at 0, and one at or past H - 1 (W - 1) reads that row with the next row's weight 0;
//   - avg divides the sum of the samples by max(grid_h * grid_w, 1); max takes the largest
//     weighted tap w_k * x_k of every sample (ONNX Runtime's max mode, which the reference
//     copies), 0 when the grid is empty.
// Coordinates and sums are in f64.

std::string CheckAtLeastOne(const AttrValue& v) {
  const int64_t n = std::get<int64_t>(v);
  return n >= 1 ? "" : StrCat("must be at least 1, got ", n);
}

std::string CheckNotNegative(const AttrValue& v) {
  const int64_t n = std::get<int64_t>(v);
  return n >= 0 ? "" : StrCat("must not be negative, got ", n);
}

enum class RoiCoord { kHalfPixel, kOutputHalfPixel };
enum class RoiMode { kAvg, kMax };
constexpr std::array<std::string_view, 2> kRoiCoords = {"half_pixel", "output_half_pixel"};
constexpr std::array<std::string_view, 2> kRoiModes = {"avg", "max"};

struct RoiParams {
  bool half_pixel;
  RoiMode mode;
  int64_t out_h, out_w, sampling_ratio;
  double spatial_scale;
};

RoiParams ParseRoiParams(const Attrs& a) {
  return {IndexOf(kRoiCoords, a.GetString("coordinate_transformation_mode")) ==
              static_cast<int>(RoiCoord::kHalfPixel),
          static_cast<RoiMode>(IndexOf(kRoiModes, a.GetString("mode"))),
          a.GetInt("output_height"),
          a.GetInt("output_width"),
          a.GetInt("sampling_ratio"),
          a.GetFloat("spatial_scale")};
}

// One axis of a region: where its bins start, their size, and the samples per bin (before any
// cap; may be 0 or negative for an empty or inverted half_pixel region, which has no samples).
template <typename N>
struct RoiAxis {
  N start, bin, grid;
};

template <typename N>
RoiAxis<N> MakeRoiAxis(const RoiParams& p, const N& lo, const N& hi, int64_t bins) {
  const double offset = p.half_pixel ? 0.5 : 0.0;
  const N start = lo * p.spatial_scale - offset;
  const N end = hi * p.spatial_scale - offset;
  N size = end - start;
  if (!p.half_pixel) size = Pick(size < N(1), N(1), size);  // malformed regions become 1 wide
  const N n_bins(static_cast<double>(bins));
  const N grid =
      p.sampling_ratio > 0 ? N(static_cast<double>(p.sampling_ratio)) : Ceil(size / n_bins);
  return {start, size / n_bins, grid};
}

// The two rows (or columns) a sample at `coord` reads along an axis of length `size`, and the
// second one's weight `frac` (the first weighs 1 - frac). `inside` is false for a coordinate
// outside [-1, size] (or NaN), whose sample reads 0; its rows are then 0.
template <typename N>
struct RoiTap {
  N low, high, frac;
  CondOf<N> inside;
};

template <typename N>
RoiTap<N> MakeRoiTap(const N& coord, const N& size) {
  const CondOf<N> inside = And(coord >= N(-1), coord <= size);
  const N c = Pick(inside, Pick(coord < N(0), N(0), coord), N(0));
  const N floor = Floor(c);
  const CondOf<N> at_end = floor >= size - 1;
  const N low = Pick(at_end, size - 1, floor);
  const N high = Pick(at_end, size - 1, floor + 1);
  return {low, high, Pick(at_end, N(0), c - low), inside};
}

// The sample coordinate of sample i of bin b.
template <typename N>
N RoiSampleCoord(const RoiAxis<N>& a, const N& b, const N& i) {
  return a.start + b * a.bin + (i + 0.5) * a.bin / a.grid;
}

Type RoiAlignRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& rois = ctx.tensor(1);
  const TensorTypeNode& batch = ctx.tensor(2);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kFloat, "x");
  if (x.ndim() != 4)
    ctx.Fail(StrCat("x must have rank 4 [N, C, H, W], got ", TypeToString(ctx.arg(0))));
  if (rois.ndim() != 2 || !rois.shape[1].is_const() || rois.shape[1].value() != 4)
    ctx.Fail(StrCat("rois must be [num_rois, 4] (x1, y1, x2, y2), got ", TypeToString(ctx.arg(1))));
  if (rois.dtype != x.dtype)
    ctx.Fail(StrCat("rois ", TypeToString(ctx.arg(1)), " must have the dtype of x ",
                    TypeToString(ctx.arg(0))));
  if (batch.ndim() != 1 || !IsInteger(batch.dtype))
    ctx.Fail(StrCat("batch_indices must be a 1-D integer tensor [num_rois], got ",
                    TypeToString(ctx.arg(2))));
  for (int d = 2; d < 4; ++d) {
    if (x.shape[d].is_const() && x.shape[d].value() == 0)
      ctx.Fail(StrCat("dim ", d, " of x ", ShapeToString(x.shape),
                      " is empty: there is nothing to sample"));
    ctx.AssertAtMost(Dim(1), x.shape[d], StrCat("dim ", d, " of x (sampled from)"));
  }
  ctx.AssertEqual(rois.shape[0], batch.shape[0],
                  StrCat("the region count of rois ", ShapeToString(rois.shape),
                         " and batch_indices ", ShapeToString(batch.shape)));
  const Dim& n = rois.shape[0].is_const() ? rois.shape[0] : batch.shape[0];
  const RoiParams p = ParseRoiParams(ctx.attrs());
  return TensorType({n, x.shape[1], Dim(p.out_h), Dim(p.out_w)}, x.dtype);
}

void RoiAlignKernelRef(const Tensor& x, const Tensor& rois, const Tensor& batch, const Attrs& attrs,
                       Tensor& out) {
  const RoiParams p = ParseRoiParams(attrs);
  const int64_t n_batch = x.shape()[0], channels = x.shape()[1];
  const int64_t height = x.shape()[2], width = x.shape()[3];
  const int64_t n_rois = rois.shape()[0];
  for (int64_t r = 0; r < n_rois; ++r) {
    const int64_t b = static_cast<int64_t>(batch.GetAsDouble(r));
    if (b < 0 || b >= n_batch)
      Throw(ErrorCode::kInvalidArgument, "roi_align: batch_indices[", r, "] = ", b,
            " is outside [0, ", n_batch, ") (the batch of x)");
    auto roi = [&](int k) { return rois.GetAsDouble(r * 4 + k); };
    const RoiAxis<double> ay = MakeRoiAxis(p, roi(1), roi(3), p.out_h);
    const RoiAxis<double> ax = MakeRoiAxis(p, roi(0), roi(2), p.out_w);
    const auto grid_h = static_cast<int64_t>(ay.grid), grid_w = static_cast<int64_t>(ax.grid);
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t c = 0; c < channels; ++c) {
      auto at = [&](double row, double col) {
        return x.GetAsDouble(((b * channels + c) * height + static_cast<int64_t>(row)) * width +
                             static_cast<int64_t>(col));
      };
      for (int64_t ph = 0; ph < p.out_h; ++ph) {
        for (int64_t pw = 0; pw < p.out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const RoiTap<double> ty =
                MakeRoiTap(RoiSampleCoord(ay, static_cast<double>(ph), static_cast<double>(iy)),
                           static_cast<double>(height));
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const RoiTap<double> tx =
                  MakeRoiTap(RoiSampleCoord(ax, static_cast<double>(pw), static_cast<double>(ix)),
                             static_cast<double>(width));
              double value = 0;
              if (ty.inside && tx.inside) {
                const double terms[4] = {(1 - ty.frac) * (1 - tx.frac) * at(ty.low, tx.low),
                                         (1 - ty.frac) * tx.frac * at(ty.low, tx.high),
                                         ty.frac * (1 - tx.frac) * at(ty.high, tx.low),
                                         ty.frac * tx.frac * at(ty.high, tx.high)};
                value = p.mode == RoiMode::kAvg
                            ? terms[0] + terms[1] + terms[2] + terms[3]
                            : std::max(std::max(std::max(terms[0], terms[1]), terms[2]), terms[3]);
              }
              acc = p.mode == RoiMode::kAvg ? acc + value : (first ? value : std::max(acc, value));
              first = false;
            }
          }
          const int64_t o = ((r * channels + c) * p.out_h + ph) * p.out_w + pw;
          out.SetFromDouble(o, p.mode == RoiMode::kAvg ? acc / count : acc);
        }
      }
    }
  }
}

// The lowering reads a fixed number of samples per bin and axis and masks those past the
// region's grid: sampling_ratio when it is given; else the grid of a region that lies within x,
// ceil(max(H, 1) / output_height) (likewise W), where the adaptive grid of a larger region is
// capped (it is then sampled as if sampling_ratio were the cap). Each axis's sample rows,
// weights and flags are computed once per (region, bin, sample) into a kernel-local table
// [num_rois, bins, samples, kTapSlots], which every channel reads.
enum RoiTapSlot { kLow, kHigh, kFrac, kInside, kInGrid, kGrid, kTapSlots };

LTensor RoiTapTable(LowerContext& ctx, const RoiParams& p, const LTensor& rois,
                    const loop::Expr& size, int64_t bins, const loop::Expr& cap, int axis,
                    const char* name) {
  const loop::Expr shape_rois = rois.shape[0];
  auto at = [p, rois, size, bins, cap, axis](const std::vector<Expr>& i) {
    auto roi = [&](int k) {
      return LE(loop::Cast(DType::kFloat64, rois.at({i[0], loop::IntImm(k)})));
    };
    RoiAxis<LE> a = MakeRoiAxis(p, roi(axis), roi(axis + 2), bins);
    if (p.sampling_ratio == 0) a.grid = Min(a.grid, LE(loop::Cast(DType::kFloat64, cap)));
    const LE sample = loop::Cast(DType::kFloat64, i[2]);
    const LE in_grid = Pick(sample < a.grid, LE(1), LE(0));
    // Past the grid the coordinate is unused (and inf or NaN for an empty grid): sample at 0.
    const LE coord = Pick(in_grid > LE(0.5),
                          RoiSampleCoord(a, LE(loop::Cast(DType::kFloat64, i[1])), sample), LE(0));
    const RoiTap<LE> t = MakeRoiTap(coord, LE(loop::Cast(DType::kFloat64, size)));
    const std::vector<LE> slots = {t.low,   t.high, t.frac, Pick(t.inside, LE(1), LE(0)),
                                   in_grid, a.grid};
    Expr v = slots.back().e;
    for (int k = kTapSlots - 2; k >= 0; --k)
      v = loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, i[3], loop::IntImm(k)), slots[k].e, v);
    return v;
  };
  return ctx.Materialize(
      LTensor{DType::kFloat64, {shape_rois, loop::IntImm(bins), cap, loop::IntImm(kTapSlots)}, at},
      name);
}

std::vector<LTensor> LowerRoiAlign(LowerContext& ctx, const std::vector<LTensor>& in,
                                   const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], rois = in[1], batch = in[2];
  const RoiParams p = ParseRoiParams(attrs);
  const DType f64 = DType::kFloat64, i64 = DType::kInt64;
  auto cap = [&](const Expr& size, int64_t bins) -> Expr {
    if (p.sampling_ratio > 0) return loop::IntImm(p.sampling_ratio);
    const Expr n = loop::Max(size, loop::IntImm(1));
    return loop::FloorDiv(loop::Add(n, loop::IntImm(bins - 1)), loop::IntImm(bins));
  };
  const Expr cap_h = cap(x.shape[2], p.out_h), cap_w = cap(x.shape[3], p.out_w);
  const LTensor ty = RoiTapTable(ctx, p, rois, x.shape[2], p.out_h, cap_h, 1, "roi_align_y");
  const LTensor tx = RoiTapTable(ctx, p, rois, x.shape[3], p.out_w, cap_w, 0, "roi_align_x");
  auto at = [&ctx, x, batch, ty, tx, p, cap_h, cap_w, f64,
             i64](const std::vector<Expr>& idx) -> Expr {
    const Expr &r = idx[0], &c = idx[1], &ph = idx[2], &pw = idx[3];
    // An index outside the batch cannot be reported from a kernel: it reads the nearest batch
    // (the reference kernel rejects it).
    const Expr b =
        loop::Max(loop::Min(loop::Cast(i64, batch.at({r})), loop::Sub(x.shape[0], loop::IntImm(1))),
                  loop::IntImm(0));
    const loop::Var iy = ctx.NewVar("iy"), ix = ctx.NewVar("ix");
    auto y = [&](int k) { return LE(ty.at({r, ph, iy, loop::IntImm(k)})); };
    auto xs = [&](int k) { return LE(tx.at({r, pw, ix, loop::IntImm(k)})); };
    auto read = [&](const LE& row, const LE& col) {
      return LE(loop::Cast(f64, x.at({b, c, loop::Cast(i64, row.e), loop::Cast(i64, col.e)})));
    };
    const LE ly = y(kFrac), lx = xs(kFrac);
    const LE terms[4] = {
        (1 - ly) * (1 - lx) * read(y(kLow), xs(kLow)), (1 - ly) * lx * read(y(kLow), xs(kHigh)),
        ly * (1 - lx) * read(y(kHigh), xs(kLow)), ly * lx * read(y(kHigh), xs(kHigh))};
    const LE inside = And(y(kInside) > LE(0.5), xs(kInside) > LE(0.5));
    const LE in_grid = And(y(kInGrid) > LE(0.5), xs(kInGrid) > LE(0.5));
    const LE grid_h = LE(ty.at({r, loop::IntImm(0), loop::IntImm(0), loop::IntImm(kGrid)}));
    const LE grid_w = LE(tx.at({r, loop::IntImm(0), loop::IntImm(0), loop::IntImm(kGrid)}));
    const std::vector<loop::IterVar> axes = {{iy, cap_h}, {ix, cap_w}};
    Expr result;
    if (p.mode == RoiMode::kAvg) {
      const LE sample =
          Pick(And(inside, in_grid), terms[0] + terms[1] + terms[2] + terms[3], LE(0));
      const LE sum = loop::Reduce(loop::ReduceKind::kSum, sample.e, axes);
      result = (sum / Pick(grid_h * grid_w < LE(1), LE(1), grid_h * grid_w)).e;
    } else {
      const LE largest = Max(Max(Max(terms[0], terms[1]), terms[2]), terms[3]);
      const LE sample =
          Pick(in_grid, Pick(inside, largest, LE(0)), LE(-std::numeric_limits<double>::infinity()));
      const LE best = loop::Reduce(loop::ReduceKind::kMax, sample.e, axes);
      result = Pick(And(grid_h >= LE(1), grid_w >= LE(1)), best, LE(0)).e;
    }
    return loop::Cast(x.dtype, result);
  };
  return {LTensor{x.dtype, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace

void RegisterResizeOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "resize",
      .doc = "ONNX Resize/Upsample: x of any rank resized by scales (out = floor(in * scale)) "
             "or to sizes; mode nearest, linear or cubic over every dim; coordinate transforms "
             "and nearest rounding as ONNX names them (nearest_mode simple: Resize-10's floor "
             "when upsampling, ceil when downsampling); roi for tf_crop_and_resize",
      .attrs = {{"mode", AttrKind::kString, AttrValue(std::string("nearest")), CheckOneOf(kModes)},
                {"coordinate_transformation_mode", AttrKind::kString,
                 AttrValue(std::string("half_pixel")), CheckOneOf(kCoords)},
                {"nearest_mode", AttrKind::kString, AttrValue(std::string("round_prefer_floor")),
                 CheckOneOf(kRoundings)},
                {"cubic_coeff_a", AttrKind::kFloat, AttrValue(-0.75)},
                {"exclude_outside", AttrKind::kBool, AttrValue(false)},
                {"extrapolation_value", AttrKind::kFloat, AttrValue(0.0)},
                {"scales", AttrKind::kFloats, AttrValue(std::vector<double>{}),
                 CheckPositiveFloats},
                {"sizes", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                 ops::CheckNonNegativeInts()},
                {"roi", AttrKind::kFloats, AttrValue(std::vector<double>{})}},
      // Linear and cubic read several input elements per output element: fusing a producer
      // would recompute it per tap, while an elementwise consumer fuses as an epilogue.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ResizeRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { ResizeKernelRef(in[0], attrs, out[0]); },
      .lower = LowerResize,
  });
  r.Register(OpDef{
      .name = "grid_sample",
      .doc = "ONNX GridSample-16: x [N, C, H, W] sampled at grid [N, Hout, Wout, 2] (x, y "
             "normalized to [-1, 1]), giving [N, C, Hout, Wout]; mode bilinear, nearest (half "
             "to even) or bicubic (A = -0.75); padding_mode zeros, border or reflection for "
             "points and taps outside x; align_corners maps -1 and 1 to the edge pixels' "
             "centres instead of their outer edges. Coordinates in float32 (float64 for an f64 "
             "grid), as ONNX's reference",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"mode", AttrKind::kString, AttrValue(std::string("bilinear")),
                 CheckOneOf(kGsModes)},
                {"padding_mode", AttrKind::kString, AttrValue(std::string("zeros")),
                 CheckOneOf(kGsPaddings)},
                {"align_corners", AttrKind::kBool, AttrValue(false)}},
      // As resize: several elements of x per output element, so a producer of x would be
      // recomputed per tap; an elementwise consumer fuses as an epilogue.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = GridSampleRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            GridSampleKernelRef(in[0], in[1], attrs, out[0]);
          },
      .lower = LowerGridSample,
  });
  r.Register(OpDef{
      .name = "roi_align",
      .doc = "ONNX RoiAlign-16: x [N, C, H, W] pooled over regions rois [num_rois, 4] (x1, y1, "
             "x2, y2, scaled by spatial_scale) of the images batch_indices [num_rois], giving "
             "[num_rois, C, output_height, output_width]; each bin averages (mode avg) or takes "
             "the largest weighted tap of (mode max) a grid of bilinear samples, sampling_ratio "
             "per axis (0: ceil(region size / bins)); coordinate_transformation_mode half_pixel "
             "shifts the region by -0.5 pixel, output_half_pixel does not and makes it at least "
             "1 x 1. Compiled, an adaptive grid is capped at ceil(max(H, 1) / output_height) "
             "(likewise W), the most a region within x needs",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {{"coordinate_transformation_mode", AttrKind::kString,
                 AttrValue(std::string("half_pixel")), CheckOneOf(kRoiCoords)},
                {"mode", AttrKind::kString, AttrValue(std::string("avg")), CheckOneOf(kRoiModes)},
                {"output_height", AttrKind::kInt, AttrValue(int64_t{1}), CheckAtLeastOne},
                {"output_width", AttrKind::kInt, AttrValue(int64_t{1}), CheckAtLeastOne},
                {"sampling_ratio", AttrKind::kInt, AttrValue(int64_t{0}), CheckNotNegative},
                {"spatial_scale", AttrKind::kFloat, AttrValue(1.0)}},
      // Many elements of x per output element, as resize.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = RoiAlignRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            RoiAlignKernelRef(in[0], in[1], in[2], attrs, out[0]);
          },
      .lower = LowerRoiAlign,
  });
}

}  // namespace kiln
