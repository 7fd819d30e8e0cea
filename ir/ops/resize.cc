// resize (ONNX Resize, opsets 10-17, and Upsample, on a tensor of any rank). grid_sample
// (grid_sample.cc) and roi_align (roi_align.cc) interpolate as it does; what the three share,
// Keys' cubic weights and the arithmetic that serves numbers and loop expressions alike, is in
// interpolate.h.
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
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ops/interpolate.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {
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

// ---- formulas shared by the reference kernel (N = double) and the lowering (N = LE) ----

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

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterResizeOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "resize",
      .doc = "ONNX Resize/Upsample: x of any rank resized by scales (out = floor(in * scale)) "
             "or to sizes; mode nearest, linear or cubic over every dim; coordinate transforms "
             "and nearest rounding as ONNX names them (nearest_mode simple: Resize-10's floor "
             "when upsampling, ceil when downsampling); roi for tf_crop_and_resize",
      .attrs = {{"mode", AttrKind::kString, AttrValue(std::string("nearest")),
                 ops::CheckOneOf(ops::kModes)},
                {"coordinate_transformation_mode", AttrKind::kString,
                 AttrValue(std::string("half_pixel")), ops::CheckOneOf(ops::kCoords)},
                {"nearest_mode", AttrKind::kString, AttrValue(std::string("round_prefer_floor")),
                 ops::CheckOneOf(ops::kRoundings)},
                {"cubic_coeff_a", AttrKind::kFloat, AttrValue(-0.75)},
                {"exclude_outside", AttrKind::kBool, AttrValue(false)},
                {"extrapolation_value", AttrKind::kFloat, AttrValue(0.0)},
                {"scales", AttrKind::kFloats, AttrValue(std::vector<double>{}),
                 ops::CheckPositiveFloats},
                {"sizes", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                 ops::CheckNonNegativeInts()},
                {"roi", AttrKind::kFloats, AttrValue(std::vector<double>{})}},
      // Linear and cubic read several input elements per output element: fusing a producer
      // would recompute it per tap, while an elementwise consumer fuses as an epilogue.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::ResizeRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { ops::ResizeKernelRef(in[0], attrs, out[0]); },
      .lower = ops::LowerResize,
  });
}

}  // namespace kiln
