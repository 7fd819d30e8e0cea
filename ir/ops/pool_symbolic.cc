// Windowed pools over symbolic spatial extents: max_pool and avg_pool when the input's height or
// width is a symbol, as in a model's shape-generic kernels (the engine's generic tier) for images
// of any size. The concrete-shape lowerings (pool.cc, pool_layout.cc) plan phase splits and
// in-place reads from the sizes; here every tap of a window is read at its index clamped into x
// and dropped by a select where it lies outside, the extents being expressions of the symbols.
// Windows of at most kMaxSpelledTaps taps spell each tap out (the output's innermost loop then
// vectorizes: channels-last, the channels), larger ones reduce over the window. SAME's pads are
// expressions of the extent (SymbolicPads).
//
// Values as pool.cc: integer max exact in its dtype (empty windows give its lowest value),
// float max in f32 (f64 for f64), means summed in f64 and divided by the positions counted
// (count_include_pad: those inside the padded input).
#include <limits>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {

using loop::Expr;

LTensor LowerPoolSymbolic(bool is_max, LowerContext& ctx, const LTensor& x, const Attrs& attrs,
                          const std::vector<Expr>& out_shape) {
  const std::vector<WindowDim> dims = SymbolicWindow(attrs.GetInts("kernel_shape"), attrs);
  std::vector<Expr> extents(x.shape.begin() + 2, x.shape.end());
  const std::vector<PadExprs> pads = SymbolicPads(dims, extents, attrs);
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const DType t = x.dtype;
  const bool exact = is_max && IsInteger(t);
  const DType c = exact ? t : is_max && t != DType::kFloat64 ? DType::kFloat32 : DType::kFloat64;
  const Expr fill = exact    ? loop::IntImm(LowestInt(t), t)
                    : is_max ? lower::Const(-std::numeric_limits<double>::infinity(), c)
                             : lower::Const(0, c);
  const bool spelled = TapCount(dims) <= kMaxSpelledTaps;
  auto position = [dims, pads](size_t d, const Expr& o, const Expr& k) {
    return TapPosition(dims[d], pads[d].begin, o, k);
  };
  // One tap: the value it adds (fill outside x); and (counts) whether it counts toward the mean.
  auto tap = [x, dims, c, fill, position](const std::vector<Expr>& idx,
                                          const std::vector<Expr>& k) {
    std::vector<Expr> xi = {idx[0], idx[1]};
    Expr inside;
    for (size_t d = 0; d < dims.size(); ++d) {
      const Expr& in = x.shape[2 + d];
      Expr pos = position(d, idx[2 + d], k[d]);
      inside = And(inside, InRange(pos, I64(0), in));
      xi.push_back(loop::Max(I64(0), loop::Min(pos, loop::Sub(in, I64(1)))));
    }
    return loop::Select(inside, loop::Cast(c, x.at(xi)), fill);
  };
  auto counts = [x, dims, pads, include_pad, c, position](const std::vector<Expr>& idx,
                                                          const std::vector<Expr>& k) {
    Expr counted;
    for (size_t d = 0; d < dims.size(); ++d)
      counted = And(counted,
                    Counted(pads[d], x.shape[2 + d], position(d, idx[2 + d], k[d]), include_pad));
    return loop::Select(counted, lower::Const(1, c), lower::Const(0, c));
  };
  auto at = [&ctx, dims, is_max, t, spelled, tap, counts](const std::vector<Expr>& idx) {
    Expr acc, count;
    if (spelled) {
      for (int64_t flat = 0; flat < TapCount(dims); ++flat) {
        std::vector<Expr> k(dims.size());
        int64_t rest = flat;
        for (size_t d = dims.size(); d-- > 0;) {
          k[d] = I64(rest % dims[d].kernel);
          rest /= dims[d].kernel;
        }
        Expr v = tap(idx, k);
        acc = !acc ? v : is_max ? loop::Max(acc, v) : loop::Add(acc, v);
        if (!is_max) count = count ? loop::Add(count, counts(idx, k)) : counts(idx, k);
      }
    } else {
      // A reduction over the window's axes; the count's over axes of its own (a reduction's
      // axes belong to it alone).
      auto axes = [&ctx, &dims](const char* prefix, std::vector<Expr>* k) {
        std::vector<loop::IterVar> a;
        for (size_t d = 0; d < dims.size(); ++d) {
          loop::Var v = ctx.NewVar(StrCat(prefix, d));
          a.push_back({v, I64(dims[d].kernel)});
          k->push_back(v);
        }
        return a;
      };
      std::vector<Expr> k, n;
      std::vector<loop::IterVar> value_axes = axes("k", &k);
      acc = loop::Reduce(is_max ? loop::ReduceKind::kMax : loop::ReduceKind::kSum, tap(idx, k),
                         value_axes);
      if (!is_max) {
        std::vector<loop::IterVar> count_axes = axes("n", &n);
        count = loop::Reduce(loop::ReduceKind::kSum, counts(idx, n), count_axes);
      }
    }
    return loop::Cast(t, is_max ? acc : loop::Div(acc, count));
  };
  return LTensor{t, out_shape, at};
}

}  // namespace kiln::ops
