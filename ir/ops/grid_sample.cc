// grid_sample, of the resize family (resize.cc; the arithmetic they share: interpolate.h).
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
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ops/interpolate.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {
namespace {

using loop::Expr;

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

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterGridSampleOps(OpRegistry& r) {
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
                 ops::CheckOneOf(ops::kGsModes)},
                {"padding_mode", AttrKind::kString, AttrValue(std::string("zeros")),
                 ops::CheckOneOf(ops::kGsPaddings)},
                {"align_corners", AttrKind::kBool, AttrValue(false)}},
      // As resize: several elements of x per output element, so a producer of x would be
      // recomputed per tap; an elementwise consumer fuses as an epilogue.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::GridSampleRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            ops::GridSampleKernelRef(in[0], in[1], attrs, out[0]);
          },
      .lower = ops::LowerGridSample,
  });
}

}  // namespace kiln
