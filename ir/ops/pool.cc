// Pooling on NCHW tensors: max_pool, max_pool_with_indices, avg_pool, max_unpool,
// global_max_pool and global_avg_pool, with the semantics of ONNX MaxPool (with its Indices
// output), AveragePool, MaxUnpool and GlobalMaxPool/GlobalAveragePool. The window geometry and
// the lowering helpers they share with conv are in window.h, where the windowed ops' output
// sizes and padding rules are spelled out. max_unpool's geometry differs from the others; see
// its section.
//
// Float dtypes only (f32, f16, bf16, f64), except that max_pool, max_pool_with_indices and
// max_unpool also take the integer dtypes (compared exactly, in their own type; max_unpool only
// moves elements). The reference kernels accumulate in double; the lowerings accumulate in f64
// too (a loop::Reduce per output element, like matmul's), so the generated kernels match the
// reference up to rounding order.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {
namespace {

using loop::Expr;

// ---- max_pool / max_pool_with_indices / avg_pool ----
//
// max_pool_with_indices is max_pool with ONNX MaxPool's second output, Indices (i64, the shape
// of the values): where in the input each max was taken, as a flat index over the whole input
// that ignores the padding. With storage_order 0 (row major) that is
//   ((n * C + c) * D1 + i1) * D2 + i2 ...
// and with storage_order 1 the plane offset (n * C + c) * D1 * D2 ... plus the position within
// the plane in column-major order, i1 + i2 * D1 + i3 * D1 * D2 (as ONNX's reference and ONNX
// Runtime compute it; the batch and channel stay row major). The max of a window is its first
// occurrence in the window's scan order (the kernel's dims outermost first, as the values are
// visited); a NaN is the max of its window (the values output propagates it), so the first
// NaN wins. A window that lies wholly in the padding (possible only with dilations or large
// pads) has value -inf (the lowest integer) and index -1.

// max_pool when `is_max` (which also takes integers: a max needs no rounding), else avg_pool;
// `with_indices` (max_pool_with_indices) adds the i64 indices as a second tuple field.
Type PoolRel(bool is_max, TypeRelContext& ctx, bool with_indices = false) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (!is_max)
    RequireFloat(ctx, x, "input");
  else if (!IsFloat(x.dtype) && !IsInteger(x.dtype))
    ctx.Fail(StrCat("input must be a float or integer tensor, got ",
                    TypeToString(TensorType(x.shape, x.dtype))));
  CheckWindowRank(ctx, x);  // before x.shape[1] is read (a fuzzed model had rank 1)
  Shape out = WindowOutShapeOf(ctx, x, x.shape[1], ctx.attrs().GetInts("kernel_shape"));
  if (!with_indices) return TensorType(std::move(out), x.dtype);
  return TupleType({TensorType(out, x.dtype), TensorType(out, DType::kInt64)});
}

// max_pool when `is_max`, else avg_pool; with `indices`, max_pool_with_indices, which also
// writes there where each max was taken. Integers (max_pool only) are compared in T, exactly;
// floats accumulate in double.
template <typename T>
void PoolKernelRef(bool is_max, const Tensor& x, const Attrs& attrs, Tensor& out,
                   Tensor* indices = nullptr) {
  std::string error;
  const std::vector<WindowDim> d =
      PadTo3(ComputeWindow(SpatialShape(x.shape()), attrs.GetInts("kernel_shape"), attrs, &error));
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t in_plane = d[0].in * d[1].in * d[2].in;
  const T* xp = x.data<T>();
  T* yp = out.data<T>();
  int64_t* ip = indices ? indices->data<int64_t>() : nullptr;
  const bool column_major = indices && attrs.GetInt("storage_order") == 1;
  constexpr bool kIntegral = std::is_integral_v<T>;
  using Acc = std::conditional_t<kIntegral, T, double>;
  // The max of nothing (a window wholly in the padding): -inf, or the lowest integer.
  constexpr Acc kMaxIdentity =
      kIntegral ? std::numeric_limits<Acc>::lowest() : -std::numeric_limits<Acc>::infinity();
  // Whether position i of dim j counts toward avg_pool's divisor.
  auto counted = [&](int j, int64_t i) {
    return include_pad ? i >= -d[j].pad_begin && i < d[j].in + d[j].pad_end : i >= 0 && i < d[j].in;
  };
  int64_t o = 0;
  for (int64_t p = 0; p < planes; ++p) {
    const T* xc = xp + p * in_plane;
    for (int64_t o0 = 0; o0 < d[0].out; ++o0) {
      for (int64_t o1 = 0; o1 < d[1].out; ++o1) {
        for (int64_t o2 = 0; o2 < d[2].out; ++o2) {
          Acc acc = is_max ? kMaxIdentity : Acc(0);
          int64_t count = 0;
          int64_t best = -1;  // max: the max's row-major position in the plane; -1 none yet
          for (int64_t k0 = 0; k0 < d[0].kernel; ++k0) {
            const int64_t i0 = o0 * d[0].stride - d[0].pad_begin + k0 * d[0].dilation;
            for (int64_t k1 = 0; k1 < d[1].kernel; ++k1) {
              const int64_t i1 = o1 * d[1].stride - d[1].pad_begin + k1 * d[1].dilation;
              for (int64_t k2 = 0; k2 < d[2].kernel; ++k2) {
                const int64_t i2 = o2 * d[2].stride - d[2].pad_begin + k2 * d[2].dilation;
                if (counted(0, i0) && counted(1, i1) && counted(2, i2)) ++count;
                if (i0 < 0 || i0 >= d[0].in || i1 < 0 || i1 >= d[1].in || i2 < 0 || i2 >= d[2].in)
                  continue;
                const int64_t pos = (i0 * d[1].in + i1) * d[2].in + i2;
                const T& e = xc[pos];
                // The first element taken, then only a strictly larger one: the first max in
                // scan order wins.
                if constexpr (kIntegral) {
                  if (best < 0 || e > acc) {
                    acc = e;
                    best = pos;
                  }
                } else {
                  const double v = ToDouble(e);
                  if (!is_max) {
                    acc += v;
                  } else if (best < 0 || (!std::isnan(acc) && (std::isnan(v) || v > acc))) {
                    acc = v;  // NaN propagates, as reduce max does, and then stays
                    best = pos;
                  }
                }
              }
            }
          }
          if (ip) {
            int64_t flat = best;
            if (best >= 0 && column_major) {
              const int64_t i2 = best % d[2].in, i1 = best / d[2].in % d[1].in;
              const int64_t i0 = best / (d[1].in * d[2].in);
              flat = (i2 * d[1].in + i1) * d[0].in + i0;
            }
            ip[o] = best < 0 ? -1 : p * in_plane + flat;
          }
          // A window wholly in the padding: max of nothing is -inf; avg is 0 / 0.
          if constexpr (kIntegral)
            yp[o++] = acc;
          else
            yp[o++] = FromDouble<T>(is_max ? acc : acc / static_cast<double>(count));
        }
      }
    }
  }
}

// Float pools of at most kMaxSpelledTaps taps (window.h) read the phase-split input
// (ops::SplitPhases, -inf or 0 around x) with every tap spelled out: each tap of a row of
// outputs is then a unit-stride shift, so the output loop is elementwise and vectorizes with
// contiguous loads, where a reduction of a few taps per output (with a clamped index and a
// select per tap) stays scalar. A 3x3/1 max pool at 64x56x56 went from 666 to 117 us (Zen 5).
// Windows that do not overlap (2x2/2) read each input element once anyway, and there the copy
// into phases costs more than it saves (the small CNN's first pool: 53 -> 208 us): when they
// also do not pad, their taps are spelled out reading x in place (strided), else they keep the
// reduction.

std::optional<LTensor> LowerPoolOverPhases(bool is_max, bool include_pad, LowerContext& ctx,
                                           const LTensor& x, const std::vector<WindowDim>& dims,
                                           const std::vector<Expr>& out_shape) {
  const DType t = x.dtype;
  const int64_t taps = TapCount(dims);
  bool overlap = false;
  for (const WindowDim& d : dims) overlap = overlap || (d.kernel - 1) * d.dilation + 1 > d.stride;
  if (!IsFloat(t) || taps > kMaxSpelledTaps) return std::nullopt;
  const DType c = is_max ? (t == DType::kFloat64 ? t : DType::kFloat32) : DType::kFloat64;
  // (Rows of at least 4 outputs, which VectorizeLoops turns into strided vector loads: the small
  // CNN's second pool, rows of 8, went 4.5 -> 1.5 us; at 16 its first went 2.3 -> 1.2 us.)
  if (WindowsReadInPlace(dims)) {
    // Windows that neither overlap nor pad (2x2 stride 2): the taps read x in place, strided,
    // with nothing to copy; the innermost output loop vectorizes with strided loads.
    auto at = [x, dims, taps, is_max, t, c](const std::vector<Expr>& idx) {
      Expr acc;
      for (int64_t flat = 0; flat < taps; ++flat) {
        std::vector<Expr> xi = {idx[0], idx[1]};
        int64_t rest = flat;
        std::vector<int64_t> kv(dims.size());
        for (size_t d = dims.size(); d-- > 0;) {
          kv[d] = rest % dims[d].kernel;
          rest /= dims[d].kernel;
        }
        for (size_t d = 0; d < dims.size(); ++d)
          xi.push_back(
              loop::Add(loop::Mul(idx[2 + d], I64(dims[d].stride)), I64(kv[d] * dims[d].dilation)));
        Expr v = loop::Cast(c, x.at(xi));
        acc = !acc ? v : is_max ? loop::Max(acc, v) : loop::Add(acc, v);
      }
      return loop::Cast(t,
                        is_max ? acc : loop::Div(acc, lower::Const(static_cast<double>(taps), c)));
    };
    return LTensor{t, out_shape, at};
  }
  if (!overlap) return std::nullopt;
  const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  ops::PhaseSplit split = ops::SplitPhases(ctx, x, dims, fill);
  auto at = [split, dims, taps, is_max, include_pad, t, c](const std::vector<Expr>& idx) {
    Expr j = split.Column(idx);
    Expr acc, count;
    for (int64_t flat = 0; flat < taps; ++flat) {
      std::vector<Expr> k(dims.size());
      std::vector<int64_t> kv(dims.size());
      int64_t rest = flat;
      for (size_t d = dims.size(); d-- > 0;) {
        kv[d] = rest % dims[d].kernel;
        k[d] = I64(kv[d]);
        rest /= dims[d].kernel;
      }
      Expr v = loop::Cast(c, split.Read(idx[0], idx[1], k, j));
      acc = !acc ? v : is_max ? loop::Max(acc, v) : loop::Add(acc, v);
      if (is_max) continue;
      Expr counted;
      for (size_t d = 0; d < dims.size(); ++d)
        counted = And(counted, Counted(dims[d], idx[2 + d], kv[d], include_pad));
      Expr one = counted ? loop::Select(counted, lower::Const(1, c), lower::Const(0, c))
                         : lower::Const(1, c);
      count = count ? loop::Add(count, one) : one;
    }
    return loop::Cast(t, is_max ? acc : loop::Div(acc, count));
  };
  return LTensor{t, out_shape, at};
}

std::vector<LTensor> LowerPool(bool is_max, LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  std::vector<int> spatial;
  for (int a = 2; a < x.ndim(); ++a) spatial.push_back(a);
  if (HasSymbolicSpatial(x, spatial))
    return {LowerPoolSymbolic(is_max, ctx, x, attrs, ctx.ShapeExpr(AsTensor(out_types[0])->shape))};
  const std::vector<WindowDim> dims = LoweredWindow(x, attrs.GetInts("kernel_shape"), attrs);
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const DType t = x.dtype;
  if (std::optional<LTensor> p = LowerPoolOverPhases(is_max, include_pad, ctx, x, dims,
                                                     ctx.ShapeExpr(AsTensor(out_types[0])->shape)))
    return {*p};
  const DType acc = DType::kFloat64;
  auto at = [&ctx, x, dims, is_max, include_pad, t, acc](const std::vector<Expr>& idx) {
    WindowTaps taps = Taps(ctx, dims, idx);
    std::vector<Expr> xi = {idx[0], idx[1]};
    xi.insert(xi.end(), taps.index.begin(), taps.index.end());
    if (is_max && IsInteger(t)) {  // exact in t; the identity of max is t's lowest value
      Expr v = x.at(xi);
      if (taps.inside) v = loop::Select(taps.inside, v, loop::IntImm(LowestInt(t), t));
      return loop::Reduce(loop::ReduceKind::kMax, v, taps.axes);
    }
    if (is_max) {
      // A max is exact in any type that holds the values: f32 for f32, f16 and bf16 (half the
      // width of f64, twice the lanes).
      const DType m = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
      Expr v = loop::Cast(m, x.at(xi));
      if (taps.inside)
        v = loop::Select(taps.inside, v, lower::Const(-std::numeric_limits<double>::infinity(), m));
      return loop::Cast(t, loop::Reduce(loop::ReduceKind::kMax, v, taps.axes));
    }
    Expr v = loop::Cast(acc, x.at(xi));
    if (taps.inside) v = loop::Select(taps.inside, v, lower::Const(0, acc));
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, v, taps.axes);
    // The divisor: the window positions that count, summed over a second set of kernel axes.
    Expr counted;
    std::vector<loop::IterVar> count_axes;
    for (size_t i = 0; i < dims.size(); ++i) {
      const WindowDim& d = dims[i];
      loop::Var k = ctx.NewVar(StrCat("n", i));
      count_axes.push_back({k, I64(d.kernel)});
      Expr pos = loop::Add(loop::Sub(loop::Mul(idx[2 + i], I64(d.stride)), I64(d.pad_begin)),
                           loop::Mul(k, I64(d.dilation)));
      counted = include_pad ? And(counted, InRange(pos, I64(-d.pad_begin), I64(d.in + d.pad_end)))
                            : And(counted, InRange(pos, I64(0), I64(d.in)));
    }
    Expr count =
        loop::Reduce(loop::ReduceKind::kSum,
                     loop::Select(counted, lower::Const(1, acc), lower::Const(0, acc)), count_axes);
    return loop::Cast(t, loop::Div(sum, count));
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// max_pool_with_indices in two passes, as argmax lowers (reduce.cc), because loop::Reduce
// combines values and carries no position: max_pool's values, materialized; then per window
// the smallest row-major position in the plane that holds the max (a NaN, where the max is
// NaN), which is the first in scan order because the scan visits positions in increasing
// row-major order. Padded positions never hit. The position is materialized too, since the
// index reads it several times (column-major reordering, the empty-window test). Over symbolic
// spatial extents (a shape-generic kernel) the extents, pads and plane size are expressions of
// the symbols and every tap is clamped into x and tested, as LowerPoolSymbolic does.
std::vector<LTensor> LowerMaxPoolWithIndices(LowerContext& ctx, const std::vector<LTensor>& in,
                                             const Attrs& attrs,
                                             const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  std::vector<int> spatial;
  for (int a = 2; a < x.ndim(); ++a) spatial.push_back(a);
  const bool symbolic = HasSymbolicSpatial(x, spatial);
  const std::vector<int64_t>& kernel = attrs.GetInts("kernel_shape");
  const std::vector<WindowDim> dims =
      symbolic ? SymbolicWindow(kernel, attrs) : LoweredWindow(x, kernel, attrs);
  const std::vector<Expr> extents(x.shape.begin() + 2, x.shape.end());
  const std::vector<PadExprs> pads =
      symbolic ? SymbolicPads(dims, extents, attrs) : std::vector<PadExprs>{};
  const bool column_major = attrs.GetInt("storage_order") == 1;
  const bool is_float = IsFloat(x.dtype);
  const LTensor values = ctx.Materialize(
      LowerPool(/*is_max=*/true, ctx, in, attrs, {out_types[0]}).at(0), "max_pool_value");
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();  // min's identity: no hit
  Expr in_plane = I64(1);
  for (const Expr& e : extents) in_plane = loop::Mul(in_plane, e);
  auto taps_of = [&ctx, dims, pads, extents, symbolic](const std::vector<Expr>& idx) {
    if (!symbolic) return Taps(ctx, dims, idx);
    WindowTaps t;
    for (size_t i = 0; i < dims.size(); ++i) {
      loop::Var k = ctx.NewVar(StrCat("k", i));
      t.axes.push_back({k, I64(dims[i].kernel)});
      const Expr pos = TapPosition(dims[i], pads[i].begin, idx[2 + i], k);
      t.inside = And(t.inside, InRange(pos, I64(0), extents[i]));
      t.index.push_back(loop::Max(I64(0), loop::Min(pos, loop::Sub(extents[i], I64(1)))));
    }
    return t;
  };
  const LTensor first = ctx.Materialize(
      LTensor{DType::kInt64, values.shape,
              [x, values, extents, is_float, taps_of](const std::vector<Expr>& idx) {
                WindowTaps taps = taps_of(idx);
                std::vector<Expr> xi = {idx[0], idx[1]};
                xi.insert(xi.end(), taps.index.begin(), taps.index.end());
                Expr v = x.at(xi), best = values.at(idx);
                if (is_float) {  // f64 holds every float dtype exactly
                  v = loop::Cast(DType::kFloat64, v);
                  best = loop::Cast(DType::kFloat64, best);
                }
                Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, v, best);
                if (is_float) hit = Or(hit, loop::MakeBinary(loop::BinaryOp::kNE, v, v));
                if (taps.inside) hit = And(taps.inside, hit);
                Expr pos = I64(0);
                for (size_t i = 0; i < extents.size(); ++i)
                  pos = loop::Add(loop::Mul(pos, extents[i]), taps.index[i]);
                return loop::Reduce(loop::ReduceKind::kMin, loop::Select(hit, pos, I64(kNone)),
                                    taps.axes);
              }},
      "max_pool_first");
  LTensor indices{DType::kInt64, values.shape,
                  [x, first, extents, column_major, in_plane](const std::vector<Expr>& idx) {
                    const Expr r = first.at(idx);
                    // Clamped so that the arithmetic of an empty window (r = kNone) cannot
                    // overflow; the select discards it.
                    const Expr p = loop::Min(r, loop::Sub(in_plane, I64(1)));
                    Expr flat = p;
                    if (column_major && extents.size() > 1) {
                      std::vector<Expr> pos(extents.size());
                      Expr rest = p;
                      for (size_t i = extents.size(); i-- > 0;) {
                        pos[i] = loop::FloorMod(rest, extents[i]);
                        rest = loop::FloorDiv(rest, extents[i]);
                      }
                      flat = pos.back();
                      for (size_t i = extents.size() - 1; i-- > 0;)
                        flat = loop::Add(loop::Mul(flat, extents[i]), pos[i]);
                    }
                    const Expr plane = loop::Add(loop::Mul(idx[0], x.shape[1]), idx[1]);
                    return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, r, I64(kNone)),
                                        I64(-1), loop::Add(loop::Mul(plane, in_plane), flat));
                  }};
  return {values, indices};
}

// ---- max_unpool ----
//
// ONNX MaxUnpool, the partial inverse of max_pool_with_indices: x[N, C, *spatial] and
// indices (i64, x's shape) scatter x into zeros of the "scatter shape" [N, C, *s], where per
// spatial dim
//   s = (in - 1) * stride + kernel - pad_begin - pad_end
// (the input size of the max_pool that x could come from), as scatter.flat[indices[i]] =
// x.flat[i]. The output is the scatter itself, or, with output_shape (the whole output shape,
// N and C included, as ONNX's output_shape input), zeros of that shape holding the scatter at
// its start: out[n, c, o...] = scatter[n, c, o...] where every o < s, else 0. output_shape's
// spatial dims may not be smaller than s, and with it the pads are ignored (s uses none), as the
// ONNX spec says. This follows ONNX's reference implementation and backend tests, in which the
// indices index the scatter shape; ONNX Runtime and PyTorch instead index output_shape
// directly. The two agree when output_shape is the scatter shape.
//
// An index is a flat index over the whole scatter, as MaxPool's Indices are over its input.
// MaxPool's index for an element of plane (n, c) always lies in plane (n, c), and kiln relies
// on it: an index outside its element's own plane, [(n * C + c) * P, (n * C + c + 1) * P) for
// the scatter's plane size P, is dropped (ONNX leaves such input undefined). When several
// elements of a plane name the same position, the last in row-major order wins, as ONNX's
// reference and ONNX Runtime, which write in order, have it.
//
// Loop IR has no scattered stores, so the lowering gathers: each scatter element searches its
// plane of `indices` for the last position naming it (a max reduction), materialized, then
// reads x there. That is scatter_numel * in_plane comparisons, quadratic in the plane size,
// where a scatter would be linear; the windows that could cover a position are not enough to
// search, since nothing guarantees that an index lies in its element's window.

struct UnpoolGeometry {
  std::vector<int64_t> scatter;  // the scatter shape's spatial dims
  std::vector<int64_t> out;      // the output's: output_shape's, else the scatter's
};

// The spatial dims of max_unpool's scatter and output for the input's spatial dims `in`; sets
// `*error` when the attributes do not fit.
UnpoolGeometry UnpoolSpatial(const std::vector<int64_t>& in, const Attrs& attrs,
                             std::string* error) {
  const size_t n = in.size();
  UnpoolGeometry g{std::vector<int64_t>(n, 1), std::vector<int64_t>(n, 1)};
  const std::vector<int64_t>& kernel = attrs.GetInts("kernel_shape");
  if (kernel.size() != n) {
    *error = StrCat("kernel_shape ", JoinInts(kernel), " must have ", n,
                    " values (one per spatial dim)");
    return g;
  }
  std::vector<int64_t> strides = PerDim(attrs, "strides", n, 1, error);
  std::vector<int64_t> pads = Pads(attrs, n, error);
  const std::vector<int64_t>& output_shape = attrs.GetInts("output_shape");
  const bool given = output_shape.size() == n + 2;  // the relation checks the length
  for (size_t i = 0; i < n; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || in[i] < 1) {
      if (error->empty())
        *error = StrCat("spatial dim ", i, ": input ", in[i], ", kernel ", kernel[i],
                        " and stride ", strides[i], " must be positive");
      continue;
    }
    const int64_t pb = given ? 0 : pads[i], pe = given ? 0 : pads[n + i];
    g.scatter[i] = (in[i] - 1) * strides[i] + kernel[i] - pb - pe;
    if (g.scatter[i] < 1) {
      if (error->empty())
        *error =
            StrCat("spatial dim ", i, ": the output size (", in[i], " - 1) * ", strides[i], " + ",
                   kernel[i], " - ", pb, " - ", pe, " = ", g.scatter[i], " is not positive");
      g.scatter[i] = 1;
      continue;
    }
    g.out[i] = given ? output_shape[2 + i] : g.scatter[i];
    if (g.out[i] < g.scatter[i] && error->empty())
      *error = StrCat("output_shape ", JoinInts(output_shape), ": spatial dim ", i,
                      " is smaller than the unpooled size (", in[i], " - 1) * ", strides[i], " + ",
                      kernel[i], " = ", g.scatter[i]);
  }
  return g;
}

Type MaxUnpoolRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& ind = ctx.tensor(1);
  if (!IsFloat(x.dtype) && !IsInteger(x.dtype))
    ctx.Fail(StrCat("input must be a float or integer tensor, got ",
                    TypeToString(TensorType(x.shape, x.dtype))));
  CheckWindowRank(ctx, x);
  const std::string want = StrCat("x's shape ", ShapeToString(x.shape));
  if (ind.dtype != DType::kInt64 || ind.ndim() != x.ndim())
    ctx.Fail(StrCat("indices must be an i64 tensor of ", want, ", got ",
                    TypeToString(TensorType(ind.shape, ind.dtype))));
  for (int i = 0; i < x.ndim(); ++i)
    ctx.AssertEqual(ind.shape[i], x.shape[i],
                    StrCat("indices ", ShapeToString(ind.shape), " must have ", want));
  const std::vector<int64_t>& output_shape = ctx.attrs().GetInts("output_shape");
  if (!output_shape.empty()) {
    if (static_cast<int>(output_shape.size()) != x.ndim())
      ctx.Fail(StrCat("output_shape ", JoinInts(output_shape), " must have ", x.ndim(),
                      " values (the whole output shape, like ", want, ")"));
    for (int i = 0; i < 2; ++i)
      ctx.AssertEqual(Dim(output_shape[i]), x.shape[i],
                      StrCat("output_shape ", JoinInts(output_shape),
                             " must keep the batch and channels of ", want));
  }
  // A symbolic spatial size gives in * stride + (kernel - stride - pads), or output_shape's
  // value where it is given. The attributes are checked as for constant sizes, with a stand-in
  // for each symbolic one: a large one, or 1 when output_shape is given (the smallest input,
  // whose unpooled size any valid output_shape holds); specialization checks the rest.
  const bool given = !output_shape.empty();
  const int64_t stand_in = given ? 1 : int64_t{1} << 20;
  std::vector<int64_t> spatial;
  for (int i = 2; i < x.ndim(); ++i)
    spatial.push_back(x.shape[i].is_const() ? x.shape[i].value() : stand_in);
  std::string error;
  const UnpoolGeometry g = UnpoolSpatial(spatial, ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  const std::vector<int64_t> strides = PerDim(ctx.attrs(), "strides", g.out.size(), 1, &error);
  const std::vector<int64_t>& kernel = ctx.attrs().GetInts("kernel_shape");
  Shape out = {x.shape[0], x.shape[1]};
  for (size_t i = 0; i < g.out.size(); ++i) {
    const Dim& in = x.shape[2 + i];
    // A symbolic size's unpooled size must fit output_shape: checked on every binding of a
    // shape-generic executable, as specialization checks it.
    if (given && !in.is_const())
      ctx.AssertAtMost(in * Dim(strides[i]) + Dim(kernel[i] - strides[i]), Dim(g.out[i]),
                       StrCat("output_shape ", JoinInts(output_shape), ": spatial dim ", i,
                              " must hold the unpooled size (", ShapeToString(x.shape), ")"));
    out.push_back(in.is_const() || given
                      ? Dim(g.out[i])
                      : in * Dim(strides[i]) + Dim(g.out[i] - strides[i] * stand_in));
  }
  return TensorType(std::move(out), x.dtype);
}

// The scatter, in order (the last write wins), straight into the output: a scatter position is
// the output position with the same coordinates. Zero bits are zero in every dtype it takes.
void MaxUnpoolKernelRef(const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int64_t* ind = in[1].data<int64_t>();
  Tensor& y = out[0];
  if (y.numel() == 0) return;  // an empty tensor may have no buffer
  std::memset(y.raw_data(), 0, static_cast<size_t>(y.numel() * DTypeSize(y.dtype())));
  std::string error;
  const UnpoolGeometry g = UnpoolSpatial(SpatialShape(x.shape()), attrs, &error);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t in_plane = 1, scatter_plane = 1, out_plane = 1;
  for (size_t i = 0; i < g.out.size(); ++i) {
    in_plane *= x.shape()[2 + i];
    scatter_plane *= g.scatter[i];
    out_plane *= g.out[i];
  }
  std::vector<int64_t> pos;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t j = 0; j < in_plane; ++j) {
      const int64_t target = ind[p * in_plane + j] - p * scatter_plane;
      if (target < 0 || target >= scatter_plane) continue;  // outside its plane: dropped
      ops::Unravel(target, g.scatter, pos);
      ops::CopyElements(x, p * in_plane + j, y, p * out_plane + ops::Ravel(pos, g.out), 1);
    }
  }
}

std::vector<LTensor> LowerMaxUnpool(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0], ind = in[1];
  // The input's, the scatter's and the output's spatial extents: constants for a concrete x
  // (UnpoolSpatial checks them), expressions of its symbols over a symbolic image size (the
  // relation checked the attributes and recorded output_shape's bound).
  const size_t n = static_cast<size_t>(x.ndim() - 2);
  const std::vector<Expr> in_sp(x.shape.begin() + 2, x.shape.end());
  std::vector<Expr> sc(n);
  std::vector<bool> whole(n);  // the output's extent is the scatter's: nothing to pad
  std::vector<int> spatial;
  for (int a = 2; a < x.ndim(); ++a) spatial.push_back(a);
  if (!HasSymbolicSpatial(x, spatial)) {
    std::vector<int64_t> sizes;
    for (const Expr& e : in_sp) {
      int64_t v = 0;
      loop::IsConstInt(e, &v);
      sizes.push_back(v);
    }
    std::string error;
    const UnpoolGeometry g = UnpoolSpatial(sizes, attrs, &error);
    KILN_CHECK(error.empty(), error);
    for (size_t i = 0; i < n; ++i) {
      sc[i] = I64(g.scatter[i]);
      whole[i] = g.out[i] == g.scatter[i];
    }
  } else {
    std::string error;
    const std::vector<int64_t>& kernel = attrs.GetInts("kernel_shape");
    const std::vector<int64_t> strides = PerDim(attrs, "strides", n, 1, &error);
    const std::vector<int64_t> pads = Pads(attrs, n, &error);
    KILN_CHECK(error.empty() && kernel.size() == n, "max_unpool: ", error);
    const std::vector<int64_t>& output_shape = attrs.GetInts("output_shape");
    const bool given = output_shape.size() == n + 2;  // with it the pads are ignored
    for (size_t i = 0; i < n; ++i) {
      const int64_t pads_i = given ? 0 : pads[i] + pads[n + i];
      sc[i] = loop::Add(loop::Mul(loop::Sub(in_sp[i], I64(1)), I64(strides[i])),
                        I64(kernel[i] - pads_i));
      whole[i] = !given;
    }
  }
  Expr scatter_plane = I64(1);
  for (const Expr& d : sc) scatter_plane = loop::Mul(scatter_plane, d);
  std::vector<Expr> scatter_shape = {x.shape[0], x.shape[1]};
  scatter_shape.insert(scatter_shape.end(), sc.begin(), sc.end());
  // The last row-major position in the plane of `indices` that names each scatter position,
  // or -1 when none does.
  const LTensor source = ctx.Materialize(
      LTensor{DType::kInt64, scatter_shape,
              [&ctx, x, ind, in_sp, sc, scatter_plane](const std::vector<Expr>& idx) {
                const Expr plane = loop::Add(loop::Mul(idx[0], x.shape[1]), idx[1]);
                Expr target = loop::Mul(plane, scatter_plane);
                Expr within = I64(0);
                for (size_t i = 0; i < sc.size(); ++i)
                  within = loop::Add(loop::Mul(within, sc[i]), idx[2 + i]);
                target = loop::Add(target, within);
                std::vector<Expr> ii = {idx[0], idx[1]};
                std::vector<loop::IterVar> axes;
                Expr pos = I64(0);
                for (size_t i = 0; i < in_sp.size(); ++i) {
                  loop::Var j = ctx.NewVar(StrCat("j", i));
                  axes.push_back({j, in_sp[i]});
                  ii.push_back(j);
                  pos = loop::Add(loop::Mul(pos, in_sp[i]), j);
                }
                Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, ind.at(ii), target);
                return loop::Reduce(loop::ReduceKind::kMax, loop::Select(hit, pos, I64(-1)), axes);
              }},
      "max_unpool_source");
  auto at = [x, source, in_sp, sc, whole](const std::vector<Expr>& idx) {
    // Output positions past the scatter shape (only with output_shape) are zeros; they read
    // the source at a clamped position, which the select discards.
    Expr inside;
    std::vector<Expr> si = {idx[0], idx[1]};
    for (size_t i = 0; i < sc.size(); ++i) {
      if (whole[i]) {
        si.push_back(idx[2 + i]);
        continue;
      }
      inside = And(inside, loop::MakeBinary(loop::BinaryOp::kLT, idx[2 + i], sc[i]));
      si.push_back(loop::Min(idx[2 + i], loop::Sub(sc[i], I64(1))));
    }
    const Expr s = source.at(si);
    // x at the source position (clamped in range for a miss, whose value the select discards).
    Expr rest = loop::Max(s, I64(0));
    std::vector<Expr> xi(x.ndim());
    xi[0] = idx[0];
    xi[1] = idx[1];
    for (size_t i = in_sp.size(); i-- > 0;) {
      xi[2 + i] = i == 0 ? rest : loop::FloorMod(rest, in_sp[i]);
      rest = loop::FloorDiv(rest, in_sp[i]);
    }
    const Expr found = And(inside, loop::MakeBinary(loop::BinaryOp::kGE, s, I64(0)));
    return loop::Select(found, x.at(xi), lower::Const(0, x.dtype));
  };
  return {LTensor{x.dtype, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

// ---- global_max_pool / global_avg_pool ----

Type GlobalPoolRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  RequireFloat(ctx, x, "input");
  if (x.ndim() < 3)
    ctx.Fail(StrCat("input must be [N, C, *spatial] with at least one spatial dim, got ",
                    ShapeToString(x.shape)));
  Shape out = {x.shape[0], x.shape[1]};
  out.resize(x.ndim(), Dim(1));
  return TensorType(std::move(out), x.dtype);
}

template <typename T>
void GlobalPoolKernelRef(bool is_max, const Tensor& x, Tensor& out) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t len = 1;
  for (int64_t d : SpatialShape(x.shape())) len *= d;
  const T* xp = x.data<T>();
  T* yp = out.data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < len; ++i) {
      const double v = ToDouble(xp[p * len + i]);
      if (!is_max)
        acc += v;
      else if (std::isnan(v) || v > acc)
        acc = std::isnan(acc) ? acc : v;
    }
    yp[p] = FromDouble<T>(is_max ? acc : acc / static_cast<double>(len));
  }
}

// global_avg_pool over planes of a constant E >= 2 * kPlaneLanes elements read in place: each
// plane sums in kPlaneLanes partial sums, partial[l] = sum over q of x[q * kPlaneLanes + l], then
// the partials and the E % kPlaneLanes elements left over. The partial sums are a column walk
// that TileLoops blocks over several planes and VectorizeLoops makes vector adds; the plain
// reduction along the plane is a chain of scalar adds, which LLVM vectorized across planes with
// gathers (small CNN's 8 x 8 planes at batch 32: 71 -> 19 us; MobileNet's 960 planes of 7 x 7:
// 11.6 -> 6.3 us; 16 lanes: 35 us, the final sum of 16 partials then costs more). f64 sums
// either way, in another order. nullopt where it does not apply.
constexpr int64_t kPlaneLanes = 8;
std::optional<LTensor> LaneSplitPlaneSum(LowerContext& ctx, const LTensor& x) {
  int64_t plane = 1;
  for (int i = 2; i < x.ndim(); ++i) {
    int64_t d = 0;
    if (!loop::IsConstInt(x.shape[i], &d)) return std::nullopt;
    plane *= d;
  }
  if (plane < 2 * kPlaneLanes || !IsIdentityRead(ctx, x)) return std::nullopt;
  const DType acc = DType::kFloat64;
  const int64_t steps = plane / kPlaneLanes;
  auto read = [x](const Expr& n, const Expr& c, const Expr& flat) {
    return loop::Cast(DType::kFloat64, FlatRead(x, {n, c}, flat));
  };
  LTensor lanes{acc,
                {x.shape[0], x.shape[1], I64(kPlaneLanes)},
                [&ctx, read, steps](const std::vector<Expr>& i) {
                  loop::Var q = ctx.NewVar("q");
                  return loop::Reduce(
                      loop::ReduceKind::kSum,
                      read(i[0], i[1], loop::Add(loop::Mul(q, I64(kPlaneLanes)), i[2])),
                      {{q, I64(steps)}});
                }};
  LTensor partial = ctx.Materialize(lanes, "plane_lanes");
  const int64_t left = plane - steps * kPlaneLanes;
  std::vector<Expr> shape = {x.shape[0], x.shape[1]};
  return LTensor{acc, shape, [&ctx, partial, read, steps, left](const std::vector<Expr>& i) {
                   loop::Var l = ctx.NewVar("l");
                   Expr sum = loop::Reduce(loop::ReduceKind::kSum, partial.at({i[0], i[1], l}),
                                           {{l, I64(kPlaneLanes)}});
                   if (left == 0) return sum;
                   loop::Var r = ctx.NewVar("r");
                   return loop::Add(
                       sum, loop::Reduce(loop::ReduceKind::kSum,
                                         read(i[0], i[1], loop::Add(I64(steps * kPlaneLanes), r)),
                                         {{r, I64(left)}}));
                 }};
}

std::vector<LTensor> LowerGlobalPool(bool is_max, LowerContext& ctx,
                                     const std::vector<LTensor>& in) {
  const LTensor& x = in[0];
  std::vector<int> axes;
  Expr count = I64(1);
  for (int i = 2; i < x.ndim(); ++i) {
    axes.push_back(i);
    count = loop::Mul(count, x.shape[i]);
  }
  const DType t = x.dtype;
  const DType acc = DType::kFloat64;
  if (std::optional<LTensor> sums = is_max ? std::nullopt : LaneSplitPlaneSum(ctx, x)) {
    LTensor s = *sums;
    std::vector<Expr> shape = {x.shape[0], x.shape[1]};
    shape.resize(x.shape.size(), I64(1));
    return {
        LTensor{t, shape, [s, t, count, acc](const std::vector<Expr>& idx) {
                  return loop::Cast(t, loop::Div(s.at({idx[0], idx[1]}), loop::Cast(acc, count)));
                }}};
  }
  LTensor r = lower::ReduceAxes(ctx, x, axes, /*keepdims=*/true,
                                is_max ? loop::ReduceKind::kMax : loop::ReduceKind::kSum,
                                [acc](const Expr& e) { return loop::Cast(acc, e); });
  return {lower::Map(r, t, [r, t, is_max, count, acc](const std::vector<Expr>& idx) {
    Expr v = r.at(idx);
    return loop::Cast(t, is_max ? v : loop::Div(v, loop::Cast(acc, count)));
  })};
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterPoolOps(OpRegistry& r) {
  for (bool is_max : {true, false}) {
    std::vector<AttrSpec> attrs = ops::WindowAttrs();
    attrs.push_back({"kernel_shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()});
    attrs.push_back({"ceil_mode", AttrKind::kBool, AttrValue(false)});
    if (!is_max) attrs.push_back({"count_include_pad", AttrKind::kBool, AttrValue(false)});
    r.Register(OpDef{
        .name = is_max ? "max_pool" : "avg_pool",
        .doc = is_max ? "ONNX MaxPool (values only): the max over each window, padding ignored; "
                        "floats and integers"
                      : "ONNX AveragePool: the mean over each window; padding counts toward the "
                        "divisor only with count_include_pad",
        .attrs = attrs,
        .pattern = OpPattern::kOutputFusable,
        .type_rel = [is_max](TypeRelContext& ctx) { return ops::PoolRel(is_max, ctx); },
        .ref_kernel =
            [is_max](const std::vector<Tensor>& in, const Attrs& a, std::vector<Tensor>& out) {
              DispatchDType(in[0].dtype(), [&]<typename T>() {
                if constexpr (std::is_same_v<T, bool>) {
                  KILN_CHECK(false, "dtype bool passed the type relation");
                } else {
                  ops::PoolKernelRef<T>(is_max, in[0], a, out[0]);
                }
              });
            },
        .lower =
            [is_max](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& a,
                     const std::vector<Type>& out_types) {
              return ops::LowerPool(is_max, ctx, in, a, out_types);
            },
    });
    if (is_max) {
      attrs.push_back({"storage_order", AttrKind::kInt, AttrValue(int64_t{0}),
                       [](const AttrValue& v) -> std::string {
                         const int64_t o = std::get<int64_t>(v);
                         return o == 0 || o == 1
                                    ? ""
                                    : StrCat("must be 0 (row major) or 1 (column major), got ", o);
                       }});
      r.Register(OpDef{
          .name = "max_pool_with_indices",
          .doc = "ONNX MaxPool with its Indices output: a tuple of max_pool's values and, as i64, "
                 "the flat index over the whole input of each max (the first in the window; "
                 "a NaN if any), storage_order 0 row major or 1 column major within the plane; "
                 "-1 for a window wholly in the padding",
          .attrs = attrs,
          .pattern = OpPattern::kOpaque,
          .type_rel = [](TypeRelContext& ctx) { return ops::PoolRel(true, ctx, true); },
          .ref_kernel =
              [](const std::vector<Tensor>& in, const Attrs& a, std::vector<Tensor>& out) {
                DispatchDType(in[0].dtype(), [&]<typename T>() {
                  if constexpr (std::is_same_v<T, bool>) {
                    KILN_CHECK(false, "dtype bool passed the type relation");
                  } else {
                    ops::PoolKernelRef<T>(true, in[0], a, out[0], &out[1]);
                  }
                });
              },
          .lower = ops::LowerMaxPoolWithIndices,
      });
    }
    r.Register(OpDef{
        .name = is_max ? "global_max_pool" : "global_avg_pool",
        .doc = is_max ? "ONNX GlobalMaxPool: [N, C, *spatial] -> [N, C, 1, ...], the max of each "
                        "channel"
                      : "ONNX GlobalAveragePool: [N, C, *spatial] -> [N, C, 1, ...], the mean "
                        "of each channel",
        .attrs = {},
        .pattern = OpPattern::kReduction,
        .type_rel = ops::GlobalPoolRel,
        .ref_kernel =
            [is_max](const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
              ops::DispatchFloat(in[0].dtype(), [&]<typename T>() {
                ops::GlobalPoolKernelRef<T>(is_max, in[0], out[0]);
              });
            },
        .lower = [is_max](
                     LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
                     const std::vector<Type>&) { return ops::LowerGlobalPool(is_max, ctx, in); },
    });
  }

  const AttrValue none = std::vector<int64_t>{};
  r.Register(OpDef{
      .name = "max_unpool",
      .doc = "ONNX MaxUnpool: x[N, C, *spatial] (1-3 spatial dims) and i64 indices of x's shape "
             "(max_pool_with_indices' row-major ones) scatter x into zeros of spatial dims "
             "(in - 1) * stride + kernel - pads (the last write wins; an index outside its "
             "element's (n, c) plane is dropped); output_shape (the whole shape, pads then "
             "ignored) zero-extends that at the end, as ONNX's reference does. Compiled as a "
             "search: quadratic in the plane size",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"kernel_shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()},
                {"strides", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
                {"pads", AttrKind::kInts, none, ops::CheckNonNegativeInts()},
                {"output_shape", AttrKind::kInts, none, ops::CheckNonNegativeInts()}},
      .pattern = OpPattern::kOpaque,
      .type_rel = ops::MaxUnpoolRel,
      .ref_kernel = ops::MaxUnpoolKernelRef,
      .lower = ops::LowerMaxUnpool,
  });
}

}  // namespace kiln
