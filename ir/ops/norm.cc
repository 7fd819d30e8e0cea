// Normalizations: layer_norm (ONNX LayerNormalization, without the optional mean/inv-std
// outputs), batch_norm in inference form (ONNX BatchNormalization with training_mode=0),
// instance_norm (InstanceNormalization), group_norm, lrn (LRN) and mean_variance_normalization
// (MeanVarianceNormalization). The references compute the statistics in double, with a two-pass
// variance, so they serve as the accurate side when generated kernels are compared with them.
#include <algorithm>
#include <cmath>
#include <functional>
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

// A per-channel parameter of an op on x [N, C, ...]: x's dtype, shape [C].
void RequireChannelParam(TypeRelContext& ctx, int i, const char* what) {
  RequireSameDType(ctx, i, what);
  const TensorTypeNode& x = ctx.tensor(0);
  const Shape& p = ctx.tensor(i).shape;
  std::string mismatch =
      StrCat(what, " ", ShapeToString(p), " must be [C] with C = ", x.shape[1].ToString(),
             ", dim 1 of x ", ShapeToString(x.shape));
  if (p.size() != 1) ctx.Fail(mismatch);
  ctx.AssertEqual(p[0], x.shape[1], mismatch);
}

Type BatchNormRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() < 2)
    ctx.Fail(StrCat("x must be [N, C, ...] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  for (int i = 1; i < 5; ++i) RequireChannelParam(ctx, i, kBatchNormParams[i]);
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

// Mean and two-pass variance, in double, of each group of x: the elements that share their
// indices outside the `reduced` dims (instance_norm: one group per (n, c)).
struct GroupStats {
  std::vector<int64_t> group;  // of each element of x
  std::vector<double> mean, var;
};

GroupStats ComputeGroupStats(const Tensor& x, const std::vector<bool>& reduced) {
  std::vector<int64_t> kept;
  int64_t count = 1, groups = 1;
  for (int d = 0; d < x.ndim(); ++d) {
    if (reduced[d]) {
      count *= x.shape()[d];
    } else {
      kept.push_back(x.shape()[d]);
      groups *= x.shape()[d];
    }
  }
  GroupStats s{std::vector<int64_t>(x.numel()), std::vector<double>(groups, 0.0),
               std::vector<double>(groups, 0.0)};
  std::vector<int64_t> idx, kept_idx;
  for (int64_t i = 0; i < x.numel(); ++i) {
    ops::Unravel(i, x.shape(), idx);
    kept_idx.clear();
    for (int d = 0; d < x.ndim(); ++d)
      if (!reduced[d]) kept_idx.push_back(idx[d]);
    s.group[i] = ops::Ravel(kept_idx, kept);
    s.mean[s.group[i]] += x.GetAsDouble(i);
  }
  for (double& m : s.mean) m /= static_cast<double>(count);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double d = x.GetAsDouble(i) - s.mean[s.group[i]];
    s.var[s.group[i]] += d * d;
  }
  for (double& v : s.var) v /= static_cast<double>(count);
  return s;
}

// instance_norm: layer_norm's statistics per (n, c), over the spatial dims, with batch_norm's
// per-channel scale and bias.

Type InstanceNormRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  if (ctx.tensor(0).ndim() < 3)
    ctx.Fail(StrCat("x must be [N, C, D1, ...] with rank >= 3, got ", TypeToString(ctx.arg(0))));
  RequireChannelParam(ctx, 1, "scale");
  RequireChannelParam(ctx, 2, "bias");
  return ctx.arg(0);
}

void InstanceNormKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) {
  const Tensor &x = in[0], &scale = in[1], &bias = in[2];
  double eps = attrs.GetFloat("epsilon");
  std::vector<bool> reduced(x.ndim(), true);
  reduced[0] = reduced[1] = false;
  GroupStats s = ComputeGroupStats(x, reduced);
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), 1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / split.inner) % split.len, g = s.group[i];
    double inv_std = 1.0 / std::sqrt(s.var[g] + eps);
    out[0].SetFromDouble(
        i, (x.GetAsDouble(i) - s.mean[g]) * inv_std * scale.GetAsDouble(c) + bias.GetAsDouble(c));
  }
}

// group_norm: the channels split into num_groups groups of C / num_groups consecutive
// channels; statistics per (n, group) over its channels and the spatial dims, then the
// per-channel scale and bias (PyTorch's GroupNorm; ONNX GroupNormalization from opset 21).

Type GroupNormRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() < 2)
    ctx.Fail(StrCat("x must be [N, C, ...] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  RequireChannelParam(ctx, 1, "scale");
  RequireChannelParam(ctx, 2, "bias");
  int64_t groups = ctx.attrs().GetInt("num_groups");
  if (x.shape[1].is_const() && x.shape[1].value() % groups != 0)
    ctx.Fail(StrCat("num_groups ", groups, " does not divide the ", x.shape[1].value(),
                    " channels of x ", ShapeToString(x.shape)));
  ctx.AssertEqual(Mod(x.shape[1], Dim(groups)), Dim(0),
                  StrCat("the channels of x modulo num_groups ", groups));
  return ctx.arg(0);
}

void GroupNormKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor &x = in[0], &scale = in[1], &bias = in[2];
  const double eps = attrs.GetFloat("epsilon");
  const int64_t groups = attrs.GetInt("num_groups");
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), 1);  // [N, C, spatial]
  const int64_t per_group = split.len / groups * split.inner;
  // Each (n, g) is one contiguous run of per_group elements.
  for (int64_t r = 0; r < split.outer * groups; ++r) {
    const int64_t base = r * per_group;
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < per_group; ++k) sum += x.GetAsDouble(base + k);
    const double mean = per_group ? sum / static_cast<double>(per_group) : 0;
    for (int64_t k = 0; k < per_group; ++k) {
      double d = x.GetAsDouble(base + k) - mean;
      sq += d * d;
    }
    const double inv_std =
        1.0 / std::sqrt((per_group ? sq / static_cast<double>(per_group) : 0) + eps);
    for (int64_t k = 0; k < per_group; ++k) {
      int64_t c = ((base + k) / split.inner) % split.len;
      out[0].SetFromDouble(
          base + k,
          (x.GetAsDouble(base + k) - mean) * inv_std * scale.GetAsDouble(c) + bias.GetAsDouble(c));
    }
  }
}

// mean_variance_normalization: ONNX's function body is
//   (x - mean(x)) / (sqrt(mean(x^2) - mean(x)^2) + 1e-9)
// with the means over `axes`. The variance here is the two-pass one, equal to
// mean(x^2) - mean(x)^2 but never negative from rounding; the 1e-9 is added after the sqrt, as
// ONNX does.

constexpr double kMvnEpsilon = 1e-9;

// Empty axes reduce over every dim, as ONNX's ReduceMean (before opset 18) does.
std::vector<int64_t> MvnAxes(const Attrs& attrs, int rank) {
  std::vector<int64_t> axes = attrs.GetInts("axes");
  if (axes.empty())
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  return axes;
}

Type MvnRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  int rank = ctx.tensor(0).ndim();
  ops::NormalizeAxes(ctx, MvnAxes(ctx.attrs(), rank), rank, "axes");
  return ctx.arg(0);
}

void MvnKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  std::vector<bool> reduced(x.ndim(), false);
  for (int64_t a : MvnAxes(attrs, x.ndim())) reduced[ops::WrapAxis(a, x.ndim())] = true;
  GroupStats s = ComputeGroupStats(x, reduced);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t g = s.group[i];
    out[0].SetFromDouble(i, (x.GetAsDouble(i) - s.mean[g]) / (std::sqrt(s.var[g]) + kMvnEpsilon));
  }
}

// lrn: y = x / (bias + alpha / size * square_sum)^beta, square_sum over the channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] that exist: `size` channel positions
// around c, the extra one after c when size is even.

std::string CheckLrnSize(const AttrValue& v) {
  return std::get<int64_t>(v) >= 1 ? "" : "must be at least 1";
}

Type LrnRel(TypeRelContext& ctx) {
  RequireFloat(ctx, 0, "x");
  if (ctx.tensor(0).ndim() < 2)
    ctx.Fail(StrCat("x must be [N, C, ...] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  return ctx.arg(0);
}

// The channels before c in c's window (floor((size - 1) / 2)); size - 1 - that many follow it.
int64_t LrnBefore(int64_t size) {
  return (size - 1) / 2;
}

void LrnKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t size = attrs.GetInt("size");
  double alpha = attrs.GetFloat("alpha"), beta = attrs.GetFloat("beta"),
         bias = attrs.GetFloat("bias");
  int64_t before = LrnBefore(size), after = size - 1 - before;
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), 1);
  const int64_t channels = split.len, inner = split.inner;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / inner) % channels, base = i - c * inner;
    double square_sum = 0;
    for (int64_t j = std::max<int64_t>(0, c - before); j <= std::min(channels - 1, c + after);
         ++j) {
      double v = x.GetAsDouble(base + j * inner);
      square_sum += v * v;
    }
    out[0].SetFromDouble(
        i,
        x.GetAsDouble(i) / std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta));
  }
}

// ---- Lowering ----
//
// Element math is in f32 (f64 for f64 inputs, as the reference's double).

DType ComputeDType(DType t) {
  return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}

// `param`'s element for the output index `idx` of x (NumPy broadcasting from the right), in `c`.
loop::Expr ParamAt(const LTensor& param, const std::vector<loop::Expr>& idx, DType c,
                   const std::vector<loop::Expr>& x_shape) {
  return loop::Cast(c, param.at(lower::BroadcastIndex(param, idx, x_shape)));
}

// Statistics over `axes` of x: the mean, then a two-pass variance. The mean is materialized
// per group (the elements that share their indices outside `axes`).
//
// f64 x, and groups of more than kF32StatsLimit elements (or a symbolic count), accumulate in
// f64 as the references do, and take x - mean in f64 too, because it cancels when the mean is
// large against the spread. Smaller f32 (f16, bf16) groups, a LayerNorm's rows, use the
// corrected two-pass algorithm with its second pass in f32: a first mean m~ (summed in f64,
// rounded to f32), then d = x - m~ (exact where the mean is large against the spread, the case
// that cancels), S1 = sum d and S2 = sum d^2 in f32; the mean is m~ + S1 / n, the variance
// S2 / n - (S1 / n)^2, and x - mean is d - S1 / n. m~ is within half an f32 ulp of the mean, so
// d is of the spread's size, S1 corrects what rounding m~ lost, and S2's error is relative to
// the variance itself. f32 lanes do a quarter of f64's work per element and need no
// conversions in those passes (the SiLU -> LayerNorm chain at 1x128x768: ~30 % fewer
// instructions). S2 overflows f32 where |x - mean| passes ~1.8e19 (the variance is then inf and
// the output the bias), which the f64 form would still have summed.
constexpr int64_t kF32StatsLimit = 8192;

struct LoweredStats {
  LTensor centered;  // x - mean (f64, or f32 for the f32 form), in x's shape
  LTensor var;       // f64, one per group, not materialized: each op folds it into its factor
  // The group (stats index) of an index of x: the indices outside `axes`.
  std::function<std::vector<loop::Expr>(const std::vector<loop::Expr>&)> group;
};

LoweredStats LowerStats(LowerContext& ctx, const LTensor& x_in, const std::vector<int>& axes,
                        const std::string& op) {
  const DType f64 = DType::kFloat64;
  // Read three times: by the mean, the variance and the output.
  LTensor x = lower::ComputeOnce(ctx, x_in, op + "_input");
  std::vector<bool> reduced(x.ndim(), false);
  loop::Expr n = loop::IntImm(1);
  for (int a : axes) {
    reduced[a] = true;
    n = loop::Mul(n, x.shape[a]);
  }
  loop::Expr count = loop::Cast(f64, n);
  auto group = [reduced](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> g;
    for (size_t i = 0; i < idx.size(); ++i)
      if (!reduced[i]) g.push_back(idx[i]);
    return g;
  };
  int64_t count_value = 0;
  if (x.dtype != f64 && loop::IsConstInt(n, &count_value) && count_value <= kF32StatsLimit) {
    const DType f32 = DType::kFloat32;
    LTensor xf = lower::Map(x, f32, [x](const std::vector<loop::Expr>& idx) {
      return loop::Cast(DType::kFloat32, x.at(idx));
    });
    // The first sum in f64: its mean is then within half an f32 ulp whatever the summation
    // order (an f32 sum added one element at a time, codegen.reassociate_reductions off, was
    // off by 19 spreads at a mean of 1e5 over 8192 elements) and cannot overflow.
    LTensor sum = lower::ReduceAxes(ctx, xf, axes, /*keepdims=*/false, loop::ReduceKind::kSum,
                                    [](const loop::Expr& v) { return loop::Cast(f64, v); });
    LTensor first =
        ctx.Materialize(LTensor{f32, sum.shape,
                                [sum, count](const std::vector<loop::Expr>& idx) {
                                  return loop::Cast(DType::kFloat32, loop::Div(sum.at(idx), count));
                                }},
                        op + "_mean");
    LTensor d = lower::Map(xf, f32, [xf, first, group](const std::vector<loop::Expr>& idx) {
      return loop::Sub(xf.at(idx), first.at(group(idx)));
    });
    LTensor s1 = lower::ReduceAxes(ctx, d, axes, /*keepdims=*/false, loop::ReduceKind::kSum);
    LTensor s2 = lower::ReduceAxes(ctx, d, axes, /*keepdims=*/false, loop::ReduceKind::kSum,
                                   [](const loop::Expr& v) { return loop::Mul(v, v); });
    // S1 / n, the first mean's error, in f64 (var reads it) and f32 (centered does).
    LTensor shift =
        ctx.Materialize(LTensor{f64, s1.shape,
                                [s1, count](const std::vector<loop::Expr>& idx) {
                                  return loop::Div(loop::Cast(DType::kFloat64, s1.at(idx)), count);
                                }},
                        op + "_shift");
    LTensor centered = lower::Map(d, f32, [d, shift, group](const std::vector<loop::Expr>& idx) {
      return loop::Sub(d.at(idx), loop::Cast(DType::kFloat32, shift.at(group(idx))));
    });
    // S2 / n - shift^2 >= 0 in exact arithmetic (Cauchy-Schwarz); rounding may cross zero.
    LTensor var{
        f64, s2.shape, [s2, shift, count](const std::vector<loop::Expr>& idx) {
          loop::Expr c = shift.at(idx);
          return loop::Max(
              loop::Sub(loop::Div(loop::Cast(DType::kFloat64, s2.at(idx)), count), loop::Mul(c, c)),
              lower::Const(0, DType::kFloat64));
        }};
    return {centered, var, group};
  }
  LTensor x64 = lower::Map(x, f64, [x](const std::vector<loop::Expr>& idx) {
    return loop::Cast(DType::kFloat64, x.at(idx));
  });
  LTensor sum = lower::ReduceAxes(ctx, x64, axes, /*keepdims=*/false, loop::ReduceKind::kSum);
  LTensor mean = ctx.Materialize(LTensor{f64, sum.shape,
                                         [sum, count](const std::vector<loop::Expr>& idx) {
                                           return loop::Div(sum.at(idx), count);
                                         }},
                                 op + "_mean");
  LTensor centered = lower::Map(x64, f64, [x64, mean, group](const std::vector<loop::Expr>& idx) {
    return loop::Sub(x64.at(idx), mean.at(group(idx)));
  });
  LTensor sq = lower::ReduceAxes(ctx, centered, axes, /*keepdims=*/false, loop::ReduceKind::kSum,
                                 [](const loop::Expr& d) { return loop::Mul(d, d); });
  LTensor var{f64, sq.shape, [sq, count](const std::vector<loop::Expr>& idx) {
                return loop::Div(sq.at(idx), count);
              }};
  return {centered, var, group};
}

// f(var), computed in f64 like the reference's factor and stored in `c`, one per group.
LTensor MaterializeFactor(LowerContext& ctx, const LTensor& var, DType c,
                          std::function<loop::Expr(const loop::Expr&)> f, const std::string& name) {
  return ctx.Materialize(LTensor{c, var.shape,
                                 [var, c, f](const std::vector<loop::Expr>& idx) {
                                   return loop::Cast(c, f(var.at(idx)));
                                 }},
                         name);
}

// 1 / sqrt(var + epsilon), in f64.
std::function<loop::Expr(const loop::Expr&)> InvStd(double epsilon) {
  return [epsilon](const loop::Expr& var) {
    const DType f64 = DType::kFloat64;
    return loop::Div(
        lower::Const(1, f64),
        loop::Call(loop::Intrinsic::kSqrt, {loop::Add(var, lower::Const(epsilon, f64))}));
  };
}

// The affine part (* inv_std * scale + bias) is in f32 (f64 for f64 x).
std::vector<LTensor> LowerLayerNorm(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs) {
  const LTensor& x = in[0];
  int rank = x.ndim();
  int axis = ops::WrapAxis(attrs.GetInt("axis"), rank);
  DType t = x.dtype, c = ComputeDType(t);
  std::vector<int> tail;
  for (int i = axis; i < rank; ++i) tail.push_back(i);
  LoweredStats s = LowerStats(ctx, x, tail, "layer_norm");
  LTensor inv_std =
      MaterializeFactor(ctx, s.var, c, InvStd(attrs.GetFloat("epsilon")), "layer_norm_inv_std");
  LTensor scale = in[1];
  std::optional<LTensor> bias;
  if (in.size() > 2) bias = in[2];
  return {lower::Map(x, t, [s, inv_std, scale, bias, t, c, x](const std::vector<loop::Expr>& idx) {
    loop::Expr v = loop::Mul(loop::Mul(loop::Cast(c, s.centered.at(idx)), inv_std.at(s.group(idx))),
                             ParamAt(scale, idx, c, x.shape));
    if (bias) v = loop::Add(v, ParamAt(*bias, idx, c, x.shape));
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

std::vector<LTensor> LowerInstanceNorm(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs) {
  const LTensor &x = in[0], scale = in[1], bias = in[2];
  DType t = x.dtype, c = ComputeDType(t);
  std::vector<int> spatial;
  for (int i = 2; i < x.ndim(); ++i) spatial.push_back(i);
  LoweredStats s = LowerStats(ctx, x, spatial, "instance_norm");
  LTensor inv_std =
      MaterializeFactor(ctx, s.var, c, InvStd(attrs.GetFloat("epsilon")), "instance_norm_inv_std");
  return {lower::Map(x, t, [s, inv_std, scale, bias, t, c](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> ch{idx[1]};
    loop::Expr v = loop::Mul(loop::Mul(loop::Cast(c, s.centered.at(idx)), inv_std.at(s.group(idx))),
                             loop::Cast(c, scale.at(ch)));
    return loop::Cast(t, loop::Add(v, loop::Cast(c, bias.at(ch))));
  })};
}

// The statistics of x seen as [N, G, C / G, spatial...]: LowerStats over that view's dims 2 on,
// read back at x's own indices.
std::vector<LTensor> LowerGroupNorm(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs) {
  const LTensor &x = in[0], scale = in[1], bias = in[2];
  DType t = x.dtype, c = ComputeDType(t);
  const int64_t groups = attrs.GetInt("num_groups");
  loop::Expr cg = loop::FloorDiv(x.shape[1], loop::IntImm(groups));  // channels per group
  LTensor view;
  view.dtype = t;
  view.shape = {x.shape[0], loop::IntImm(groups), cg};
  for (int i = 2; i < x.ndim(); ++i) view.shape.push_back(x.shape[i]);
  view.at = [x, cg](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> xi{idx[0], loop::Add(loop::Mul(idx[1], cg), idx[2])};
    xi.insert(xi.end(), idx.begin() + 3, idx.end());
    return x.at(xi);
  };
  std::vector<int> reduced;
  for (int i = 2; i < view.ndim(); ++i) reduced.push_back(i);
  LoweredStats s = LowerStats(ctx, view, reduced, "group_norm");
  LTensor inv_std =
      MaterializeFactor(ctx, s.var, c, InvStd(attrs.GetFloat("epsilon")), "group_norm_inv_std");
  return {lower::Map(x, t, [s, inv_std, scale, bias, t, c, cg](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> vi{idx[0], loop::FloorDiv(idx[1], cg), loop::FloorMod(idx[1], cg)};
    vi.insert(vi.end(), idx.begin() + 2, idx.end());
    std::vector<loop::Expr> ch{idx[1]};
    loop::Expr v = loop::Mul(loop::Mul(loop::Cast(c, s.centered.at(vi)), inv_std.at(s.group(vi))),
                             loop::Cast(c, scale.at(ch)));
    return loop::Cast(t, loop::Add(v, loop::Cast(c, bias.at(ch))));
  })};
}

std::vector<LTensor> LowerMvn(LowerContext& ctx, const std::vector<LTensor>& in,
                              const Attrs& attrs) {
  const LTensor& x = in[0];
  DType t = x.dtype, c = ComputeDType(t);
  std::vector<int> axes;
  for (int64_t a : MvnAxes(attrs, x.ndim())) axes.push_back(ops::WrapAxis(a, x.ndim()));
  std::sort(axes.begin(), axes.end());
  LoweredStats s = LowerStats(ctx, x, axes, "mean_variance_normalization");
  LTensor inv = MaterializeFactor(
      ctx, s.var, c,
      [](const loop::Expr& var) {
        const DType f64 = DType::kFloat64;
        return loop::Div(lower::Const(1, f64), loop::Add(loop::Call(loop::Intrinsic::kSqrt, {var}),
                                                         lower::Const(kMvnEpsilon, f64)));
      },
      "mean_variance_normalization_inv");
  return {lower::Map(x, t, [s, inv, t, c](const std::vector<loop::Expr>& idx) {
    return loop::Cast(t, loop::Mul(loop::Cast(c, s.centered.at(idx)), inv.at(s.group(idx))));
  })};
}

// The window is a reduction over `size` positions k: channel c - before + k, counted when it
// exists; outside reads are clamped to a real channel and selected away. The square sum is
// accumulated in f64, as the reference's; the power and the division are in f32 (f64 for f64).
std::vector<LTensor> LowerLrn(LowerContext& ctx, const std::vector<LTensor>& in,
                              const Attrs& attrs) {
  const LTensor x = in[0];
  const int64_t size = attrs.GetInt("size"), before = LrnBefore(size);
  const double alpha = attrs.GetFloat("alpha"), beta = attrs.GetFloat("beta"),
               bias = attrs.GetFloat("bias");
  const DType t = x.dtype, c = ComputeDType(t), f64 = DType::kFloat64;
  auto at = [&ctx, x, size, before, alpha, beta, bias, t, c,
             f64](const std::vector<loop::Expr>& idx) {
    const loop::Expr channels = x.shape[1];
    loop::Var k = ctx.NewVar("k");
    loop::Expr ch = loop::Add(loop::Sub(idx[1], loop::IntImm(before)), k);
    loop::Expr inside = loop::MakeBinary(loop::BinaryOp::kAnd,
                                         loop::MakeBinary(loop::BinaryOp::kGE, ch, loop::IntImm(0)),
                                         loop::MakeBinary(loop::BinaryOp::kLT, ch, channels));
    std::vector<loop::Expr> xi = idx;
    xi[1] = loop::Max(loop::IntImm(0), loop::Min(ch, loop::Sub(channels, loop::IntImm(1))));
    loop::Expr v = loop::Cast(f64, x.at(xi));
    loop::Expr sq = loop::Select(inside, loop::Mul(v, v), lower::Const(0, f64));
    loop::Expr square_sum = loop::Reduce(loop::ReduceKind::kSum, sq, {{k, loop::IntImm(size)}});
    loop::Expr base =
        loop::Add(lower::Const(bias, f64),
                  loop::Mul(lower::Const(alpha / static_cast<double>(size), f64), square_sum));
    loop::Expr denom =
        loop::Call(loop::Intrinsic::kPow, {loop::Cast(c, base), lower::Const(beta, c)});
    return loop::Cast(t, loop::Div(loop::Cast(c, x.at(idx)), denom));
  };
  return {LTensor{t, x.shape, at}};
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
  r.Register(OpDef{
      .name = "instance_norm",
      .doc = "(x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], the statistics per (n, c) "
             "over the spatial dims of x [N, C, D1, ...]; floats.",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {AttrSpec{"epsilon", AttrKind::kFloat, AttrValue{1e-5}, CheckEpsilon}},
      .pattern = OpPattern::kReduction,
      .type_rel = InstanceNormRel,
      .ref_kernel = InstanceNormKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerInstanceNorm(ctx, in, attrs); },
  });
  r.Register(OpDef{
      .name = "group_norm",
      .doc = "(x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], the statistics per (n, "
             "group) over the group's C / num_groups channels and the spatial dims of x [N, C, "
             "...]; num_groups must divide C; floats.",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {AttrSpec{"num_groups", AttrKind::kInt, std::nullopt,
                         [](const AttrValue& v) {
                           return std::get<int64_t>(v) >= 1 ? "" : "must be at least 1";
                         }},
                AttrSpec{"epsilon", AttrKind::kFloat, AttrValue{1e-5}, CheckEpsilon}},
      .pattern = OpPattern::kReduction,
      .type_rel = GroupNormRel,
      .ref_kernel = GroupNormKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerGroupNorm(ctx, in, attrs); },
  });
  r.Register(OpDef{
      .name = "mean_variance_normalization",
      .doc = "(x - mean) / (sqrt(var) + 1e-9), the statistics over `axes` (all when empty); "
             "floats.",
      .attrs = {AttrSpec{"axes", AttrKind::kInts, AttrValue{std::vector<int64_t>{0, 2, 3}}}},
      .pattern = OpPattern::kReduction,
      .type_rel = MvnRel,
      .ref_kernel = MvnKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerMvn(ctx, in, attrs); },
  });
  r.Register(OpDef{
      .name = "lrn",
      .doc = "Local response normalization across channels (dim 1): x / (bias + alpha / size * "
             "square_sum)^beta over `size` channels around each; floats.",
      .attrs = {AttrSpec{"size", AttrKind::kInt, std::nullopt, CheckLrnSize},
                AttrSpec{"alpha", AttrKind::kFloat, AttrValue{1e-4}},
                AttrSpec{"beta", AttrKind::kFloat, AttrValue{0.75}},
                AttrSpec{"bias", AttrKind::kFloat, AttrValue{1.0}}},
      // A windowed reduction like pooling: its input is read `size` times per element, so only
      // an epilogue fuses into it.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = LrnRel,
      .ref_kernel = LrnKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                  const std::vector<Type>&) { return LowerLrn(ctx, in, attrs); },
  });
}

}  // namespace kiln
