// roi_align, of the resize family (resize.cc; the arithmetic they share: interpolate.h).
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
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ops/interpolate.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {
namespace {

using loop::Expr;

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
}  // namespace kiln::ops

namespace kiln {

void RegisterRoiAlignOps(OpRegistry& r) {
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
                 AttrValue(std::string("half_pixel")), ops::CheckOneOf(ops::kRoiCoords)},
                {"mode", AttrKind::kString, AttrValue(std::string("avg")),
                 ops::CheckOneOf(ops::kRoiModes)},
                {"output_height", AttrKind::kInt, AttrValue(int64_t{1}), ops::CheckAtLeastOne},
                {"output_width", AttrKind::kInt, AttrValue(int64_t{1}), ops::CheckAtLeastOne},
                {"sampling_ratio", AttrKind::kInt, AttrValue(int64_t{0}), ops::CheckNotNegative},
                {"spatial_scale", AttrKind::kFloat, AttrValue(1.0)}},
      // Many elements of x per output element, as resize.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::RoiAlignRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            ops::RoiAlignKernelRef(in[0], in[1], in[2], attrs, out[0]);
          },
      .lower = ops::LowerRoiAlign,
  });
}

}  // namespace kiln
