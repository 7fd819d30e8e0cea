// Normalizations: layer_norm (ONNX LayerNormalization, without the optional mean/inv-std
// outputs) and batch_norm in inference form (ONNX BatchNormalization with training_mode=0).
// The references compute the statistics in double, with a two-pass variance, so they serve as
// the accurate side when generated kernels are compared with them.
#include <cmath>
#include <optional>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

std::string CheckEpsilon(const AttrValue& v) {
  double e = std::get<double>(v);
  return e >= 0 && std::isfinite(e) ? "" : "must be finite and non-negative";
}

void RequireFloat(TypeRelContext& ctx, int i, const char* what) {
  const TensorTypeNode& t = ctx.tensor(i);
  if (!IsFloat(t.dtype))
    ctx.Fail(StrCat(what, " must be a float tensor, got ", TypeToString(ctx.arg(i))));
}

void RequireSameDType(TypeRelContext& ctx, int i, const char* what) {
  if (ctx.tensor(i).dtype != ctx.tensor(0).dtype)
    ctx.Fail(StrCat(what, " ", TypeToString(ctx.arg(i)), " must have the dtype of x ",
                    TypeToString(ctx.arg(0))));
}

template <typename T>
double Load(const T* p, int64_t i) {
  return static_cast<double>(static_cast<ops::ComputeT<T>>(p[i]));
}
template <typename T>
T Store(double v) {
  return static_cast<T>(static_cast<ops::ComputeT<T>>(v));
}

// layer_norm

const char* const kLayerNormParams[] = {"x", "scale", "bias"};

Type LayerNormRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() == 0) ctx.Fail(StrCat("x must have rank >= 1, got ", TypeToString(ctx.arg(0))));
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  Shape tail(x.shape.begin() + axis, x.shape.end());
  for (int i = 1; i < ctx.num_args(); ++i) {
    const char* what = kLayerNormParams[i];
    RequireSameDType(ctx, i, what);
    const Shape& p = ctx.tensor(i).shape;
    std::string mismatch = StrCat(what, " ", ShapeToString(p), " does not broadcast to x[", axis,
                                  ":] = ", ShapeToString(tail), " of x ", ShapeToString(x.shape));
    if (p.size() > tail.size()) ctx.Fail(mismatch);
    size_t off = tail.size() - p.size();
    for (size_t d = 0; d < p.size(); ++d) {
      // Only the parameter may broadcast: the output keeps x's shape.
      if (p[d].is_const() && p[d].value() == 1) continue;
      ctx.AssertEqual(p[d], tail[off + d], mismatch);
    }
  }
  return ctx.arg(0);
}

// `param` broadcast to `tail` and flattened, as doubles.
template <typename T>
std::vector<double> ExpandParam(const Tensor& param, const std::vector<int64_t>& tail, int64_t n) {
  std::vector<double> out(n);
  ops::BroadcastIndex bi(param.shape(), tail);
  const T* p = param.data<T>();
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < n; ++k) {
    ops::Unravel(k, tail, idx);
    out[k] = Load(p, bi.Offset(idx));
  }
  return out;
}

void LayerNormKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int axis = ops::WrapAxis(attrs.GetInt("axis"), x.ndim());
  double eps = attrs.GetFloat("epsilon");
  std::vector<int64_t> tail(x.shape().begin() + axis, x.shape().end());
  int64_t n = 1;
  for (int64_t d : tail) n *= d;
  if (n == 0) return;
  int64_t rows = x.numel() / n;
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(false, "layer_norm on ", DTypeName(x.dtype()), " passed the type relation");
    } else {
      std::vector<double> scale = ExpandParam<T>(in[1], tail, n);
      std::vector<double> bias =
          in.size() > 2 ? ExpandParam<T>(in[2], tail, n) : std::vector<double>(n, 0.0);
      const T* src = x.data<T>();
      T* dst = out[0].data<T>();
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = src + r * n;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < n; ++k) mean += Load(row, k);
        mean /= static_cast<double>(n);
        for (int64_t k = 0; k < n; ++k) var += (Load(row, k) - mean) * (Load(row, k) - mean);
        var /= static_cast<double>(n);
        double inv_std = 1.0 / std::sqrt(var + eps);
        for (int64_t k = 0; k < n; ++k)
          dst[r * n + k] = Store<T>((Load(row, k) - mean) * inv_std * scale[k] + bias[k]);
      }
    }
  });
}

// batch_norm

const char* const kBatchNormParams[] = {"x", "scale", "bias", "mean", "var"};

Type BatchNormRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() < 2)
    ctx.Fail(StrCat("x must be [N, C, ...] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  for (int i = 1; i < 5; ++i) {
    const char* what = kBatchNormParams[i];
    RequireSameDType(ctx, i, what);
    const Shape& p = ctx.tensor(i).shape;
    std::string mismatch =
        StrCat(what, " ", ShapeToString(p), " must be [C] with C = ", x.shape[1].ToString(),
               ", dim 1 of x ", ShapeToString(x.shape));
    if (p.size() != 1) ctx.Fail(mismatch);
    ctx.AssertEqual(p[0], x.shape[1], mismatch);
  }
  return ctx.arg(0);
}

void BatchNormKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  double eps = attrs.GetFloat("epsilon");
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), 1);
  int64_t channels = split.len, inner = split.inner;
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(false, "batch_norm on ", DTypeName(x.dtype()), " passed the type relation");
    } else {
      const T *scale = in[1].data<T>(), *bias = in[2].data<T>();
      const T *mean = in[3].data<T>(), *var = in[4].data<T>();
      const T* src = x.data<T>();
      T* dst = out[0].data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t c = (i / inner) % channels;
        double inv_std = 1.0 / std::sqrt(Load(var, c) + eps);
        dst[i] =
            Store<T>((Load(src, i) - Load(mean, c)) * inv_std * Load(scale, c) + Load(bias, c));
      }
    }
  });
}

// ---- Lowering ----
//
// Element math is in f32 (f64 for f64 inputs, as the reference's double).

DType ComputeDType(DType t) {
  return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}

// `param`'s element for the output index `idx` of x (NumPy broadcasting from the right), in `c`.
loop::Expr ParamAt(const LTensor& param, const std::vector<loop::Expr>& idx, DType c) {
  return loop::Cast(c, param.at(lower::BroadcastIndex(param, idx)));
}

// The statistics are computed as the reference does: the mean, then a two-pass variance, both
// accumulated in f64, and inv_std = 1 / sqrt(var + epsilon) in f64; mean and inv_std are
// materialized per row. x - mean is taken in f64 too, because it cancels when the mean is large
// against the spread; the affine part (* inv_std * scale + bias) is in f32.
std::vector<LTensor> LowerLayerNorm(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs) {
  const LTensor& x = in[0];
  int rank = x.ndim();
  int axis = ops::WrapAxis(attrs.GetInt("axis"), rank);
  DType t = x.dtype, c = ComputeDType(t);
  const DType f64 = DType::kFloat64;
  std::vector<int> tail;
  loop::Expr n = loop::IntImm(1);
  for (int i = axis; i < rank; ++i) {
    tail.push_back(i);
    n = loop::Mul(n, x.shape[i]);
  }
  loop::Expr count = loop::Cast(f64, n);
  // Statistics are reduced without keepdims: a row is indexed by the dims before `axis`.
  auto row = [axis](const std::vector<loop::Expr>& idx) {
    return std::vector<loop::Expr>(idx.begin(), idx.begin() + axis);
  };
  LTensor x64 = lower::Map(x, f64, [x](const std::vector<loop::Expr>& idx) {
    return loop::Cast(DType::kFloat64, x.at(idx));
  });
  LTensor sum = lower::ReduceAxes(ctx, x64, tail, /*keepdims=*/false, loop::ReduceKind::kSum);
  LTensor mean = ctx.Materialize(LTensor{f64, sum.shape,
                                         [sum, count](const std::vector<loop::Expr>& idx) {
                                           return loop::Div(sum.at(idx), count);
                                         }},
                                 "layer_norm_mean");
  LTensor centered = lower::Map(x64, f64, [x64, mean, row](const std::vector<loop::Expr>& idx) {
    return loop::Sub(x64.at(idx), mean.at(row(idx)));
  });
  LTensor sq = lower::ReduceAxes(ctx, centered, tail, /*keepdims=*/false, loop::ReduceKind::kSum,
                                 [](const loop::Expr& d) { return loop::Mul(d, d); });
  loop::Expr eps = lower::Const(attrs.GetFloat("epsilon"), f64);
  LTensor inv_std = ctx.Materialize(
      LTensor{c, sq.shape,
              [sq, count, eps, c](const std::vector<loop::Expr>& idx) {
                loop::Expr var = loop::Div(sq.at(idx), count);
                return loop::Cast(
                    c, loop::Div(lower::Const(1, DType::kFloat64),
                                 loop::Call(loop::Intrinsic::kSqrt, {loop::Add(var, eps)})));
              }},
      "layer_norm_inv_std");
  LTensor scale = in[1];
  std::optional<LTensor> bias;
  if (in.size() > 2) bias = in[2];
  return {lower::Map(
      x, t, [centered, inv_std, scale, bias, row, t, c](const std::vector<loop::Expr>& idx) {
        loop::Expr v = loop::Mul(loop::Mul(loop::Cast(c, centered.at(idx)), inv_std.at(row(idx))),
                                 ParamAt(scale, idx, c));
        if (bias) v = loop::Add(v, ParamAt(*bias, idx, c));
        return loop::Cast(t, v);
      })};
}

// Inference batch norm is elementwise: each element reads its channel's (dim 1) parameters.
std::vector<LTensor> LowerBatchNorm(const std::vector<LTensor>& in, const Attrs& attrs) {
  const LTensor& x = in[0];
  DType t = x.dtype, c = ComputeDType(t);
  loop::Expr eps = lower::Const(attrs.GetFloat("epsilon"), c);
  std::vector<LTensor> p(in.begin() + 1, in.end());  // scale, bias, mean, var: each [C]
  return {lower::Map(x, t, [x, p, eps, t, c](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> ch{idx[1]};
    auto param = [&](int i) { return loop::Cast(c, p[i].at(ch)); };
    loop::Expr inv_std = loop::Div(lower::Const(1, c),
                                   loop::Call(loop::Intrinsic::kSqrt, {loop::Add(param(3), eps)}));
    loop::Expr v =
        loop::Mul(loop::Mul(loop::Sub(loop::Cast(c, x.at(idx)), param(2)), inv_std), param(0));
    return loop::Cast(t, loop::Add(v, param(1)));
  })};
}

}  // namespace

void RegisterNormOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "layer_norm",
      .doc = "(x - mean) / sqrt(var + epsilon) * scale + bias over dims [axis, rank); floats.",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = {AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{-1}}},
                AttrSpec{"epsilon", AttrKind::kFloat, AttrValue{1e-5}, CheckEpsilon}},
      .pattern = OpPattern::kReduction,
      .type_rel = LayerNormRel,
      .ref_kernel = LayerNormKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerLayerNorm(ctx, in, attrs); },
  });
  r.Register(OpDef{
      .name = "batch_norm",
      .doc = "Inference batch norm: (x - mean) / sqrt(var + epsilon) * scale + bias, per channel "
             "(dim 1); floats.",
      .min_inputs = 5,
      .max_inputs = 5,
      .attrs = {AttrSpec{"epsilon", AttrKind::kFloat, AttrValue{1e-5}, CheckEpsilon}},
      // At inference the statistics are inputs, so this is a per-channel affine map.
      .pattern = OpPattern::kBroadcast,
      .type_rel = BatchNormRel,
      .ref_kernel = BatchNormKernel,
      .lower = [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerBatchNorm(in, attrs); },
  });
}

}  // namespace kiln
