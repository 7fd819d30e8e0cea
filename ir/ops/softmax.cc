// softmax and log_softmax along one axis (ONNX opset 13 semantics: the axis alone, not the
// flattened tail). The reference subtracts the row maximum before exponentiating so large
// inputs do not overflow, and works in double whatever the storage type. A row holding NaN
// gives NaN throughout; a row of only -inf gives NaN (0/0), as PyTorch does.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

Type SoftmaxRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (!IsFloat(x.dtype)) ctx.Fail(StrCat("expects a float tensor, got ", TypeToString(ctx.arg(0))));
  ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  return ctx.arg(0);
}

void SoftmaxKernel(bool log, const std::vector<Tensor>& in, const Attrs& attrs,
                   std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int rank = x.ndim();
  // A scalar is a single row of length 1.
  int axis = rank == 0 ? 0 : ops::WrapAxis(attrs.GetInt("axis"), rank);
  // Plain variables, not structured bindings: clang before 16 cannot capture those in a lambda.
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), axis);
  int64_t outer = split.outer, n = split.len, inner = split.inner;
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(false, "softmax on ", DTypeName(x.dtype()), " passed the type relation");
    } else {
      const T* src = x.data<T>();
      T* dst = out[0].data<T>();
      auto at = [](const T* p) { return static_cast<double>(static_cast<ops::ComputeT<T>>(*p)); };
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* row = src + o * n * inner + i;
          T* out_row = dst + o * n * inner + i;
          double max = -std::numeric_limits<double>::infinity();
          bool has_nan = false;
          for (int64_t k = 0; k < n; ++k) {
            double v = at(row + k * inner);
            has_nan |= std::isnan(v);
            max = std::max(max, v);
          }
          if (has_nan) max = std::numeric_limits<double>::quiet_NaN();
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) sum += std::exp(at(row + k * inner) - max);
          double log_sum = std::log(sum);
          for (int64_t k = 0; k < n; ++k) {
            double shifted = at(row + k * inner) - max;
            double r = log ? shifted - log_sum : std::exp(shifted) / sum;
            out_row[k * inner] = static_cast<T>(static_cast<ops::ComputeT<T>>(r));
          }
        }
      }
    }
  });
}

// Lowering: the row max and the row's sum of exponentials (its log for log_softmax; for an f32
// softmax its reciprocal) are materialized, then every element is computed from them. Element math
// is in f32 (f64 for f64 inputs, as the reference's double). The sum accumulates in f32 for rows
// of up to kF32SumMaxRow elements and in f64 (as the reference's does) for longer ones, see
// there.
//
// An f32 sum of a row's exponentials (each in (0, 1], one of them 1) that the JIT splits into
// per-lane partial sums (16 lanes x 4 on AVX-512) is off by at most about n / 64 + 6 roundings,
// 70 ulp at 4096 elements, and in practice far less: on 64 random rows of 4096 in [-10, 10] the
// largest error against the f64 definition went from 1.2e-6 to 1.5e-6 relative (most of it is
// exp's, of shifted arguments that are themselves rounded), well inside ONNX's tolerances, where
// converting every term to f64 cost the attention softmax ([1, 8, 256, 256], 1 thread) 10 % of
// its time. Longer rows (a vocabulary's logits) keep f64.
constexpr int64_t kF32SumMaxRow = 4096;

std::vector<LTensor> LowerSoftmax(bool log, LowerContext& ctx, const std::vector<LTensor>& in,
                                  const Attrs& attrs) {
  // Read three times: by the max, the sum and the output.
  LTensor x = lower::ComputeOnce(ctx, in[0], log ? "log_softmax_input" : "softmax_input");
  int rank = x.ndim();
  // A scalar is one row of length 1: nothing is reduced over, and the statistics are x itself.
  int axis = rank == 0 ? -1 : ops::WrapAxis(attrs.GetInt("axis"), rank);
  std::vector<int> axes;
  if (axis >= 0) axes.push_back(axis);
  DType t = x.dtype;
  DType c = t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  // The index of an element's row statistic (reduced with keepdims, so only the axis is 0).
  auto row = [axis](std::vector<loop::Expr> idx) {
    if (axis >= 0) idx[axis] = loop::IntImm(0);
    return idx;
  };
  LTensor xc = lower::Map(
      x, c, [x, c](const std::vector<loop::Expr>& idx) { return loop::Cast(c, x.at(idx)); });
  // A row holding NaN is NaN everywhere, as in the reference, whatever its max is: the NaN term
  // is NaN after the shift and makes the row's sum NaN. So the max need not propagate NaN
  // (kMaxOrdered: one vmaxps a vector; the attention softmax above 308 -> 258 us).
  LTensor max = ctx.Materialize(
      lower::ReduceAxes(ctx, xc, axes, /*keepdims=*/true, loop::ReduceKind::kMaxOrdered),
      log ? "log_softmax_max" : "softmax_max");
  LTensor shifted = lower::Map(xc, c, [xc, max, row](const std::vector<loop::Expr>& idx) {
    return loop::Sub(xc.at(idx), max.at(row(idx)));
  });
  // Along the last axis the exponentials are materialized, a row at a time once FuseLoops has
  // fused the row loops: an elementwise loop that VectorizeLoops turns into vector exp, where
  // exp inside the sum's reduction loop stayed one scalar libm call per element (LLVM's loop
  // vectorizer has no vector exp), and computed once where the output took them again. The
  // encoder's attention softmax ([1, 4, 128, 128], 1 thread, kernel minima): 110 -> 52 us,
  // and 49 with the reciprocal below; the encoder layer at 1 x 128 and 8 x 128 6-7 % faster.
  const bool rows = axis >= 0 && axis == rank - 1;
  LTensor exps = lower::Map(shifted, c, [shifted](const std::vector<loop::Expr>& idx) {
    return loop::Call(loop::Intrinsic::kExp, {shifted.at(idx)});
  });
  if (rows) exps = ctx.Materialize(exps, log ? "log_softmax_exp" : "softmax_exp");
  // A symbolic row length is taken as long.
  int64_t row_length = 1;
  if (axis >= 0 && !loop::IsConstInt(x.shape[axis], &row_length)) row_length = kF32SumMaxRow + 1;
  const DType acc = row_length <= kF32SumMaxRow ? c : DType::kFloat64;
  LTensor sum = lower::ReduceAxes(ctx, exps, axes, /*keepdims=*/true, loop::ReduceKind::kSum,
                                  [acc](const loop::Expr& e) { return loop::Cast(acc, e); });
  // An f32 softmax multiplies by the row's reciprocal, rounded once from the sum's dtype, where
  // a vector division cost more than the rest of the output pass.
  const bool reciprocal = !log && c == DType::kFloat32;
  LTensor stat{c, sum.shape, [sum, c, log, reciprocal](const std::vector<loop::Expr>& idx) {
                 loop::Expr s = sum.at(idx);
                 if (reciprocal) s = loop::Div(loop::FloatImm(1.0, s->dtype), s);
                 return loop::Cast(c, log ? loop::Call(loop::Intrinsic::kLog, {s}) : s);
               }};
  stat = ctx.Materialize(stat, log ? "log_softmax_lse" : "softmax_sum");
  return {lower::Map(
      x, t, [shifted, exps, stat, row, t, log, reciprocal](const std::vector<loop::Expr>& idx) {
        loop::Expr st = stat.at(row(idx));
        return loop::Cast(t, log          ? loop::Sub(shifted.at(idx), st)
                             : reciprocal ? loop::Mul(exps.at(idx), st)
                                          : loop::Div(exps.at(idx), st));
      })};
}

void RegisterOne(OpRegistry& r, const char* name, const char* doc, bool log) {
  r.Register(OpDef{
      .name = name,
      .doc = doc,
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{-1}}}},
      // Reduces along the axis (max, sum), then broadcasts back to every element.
      .pattern = OpPattern::kReduction,
      .type_rel = SoftmaxRel,
      .ref_kernel = [log](const std::vector<Tensor>& in, const Attrs& attrs,
                          std::vector<Tensor>& out) { SoftmaxKernel(log, in, attrs, out); },
      .lower = [log](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                     const std::vector<Type>&) { return LowerSoftmax(log, ctx, in, attrs); },
  });
}

}  // namespace

void RegisterSoftmaxOps(OpRegistry& r) {
  RegisterOne(r, "softmax", "exp(x) / sum(exp(x)) along `axis`, computed stably; floats.", false);
  RegisterOne(r, "log_softmax", "x - log(sum(exp(x))) along `axis`, computed stably; floats.",
              true);
}

}  // namespace kiln
