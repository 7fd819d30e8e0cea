// Normalizations: layer_norm (ONNX LayerNormalization, without the optional mean/inv-std
// outputs) and batch_norm in inference form (ONNX BatchNormalization with training_mode=0).
// The references compute the statistics in double, with a two-pass variance, so they serve as
// the accurate side when generated kernels are compared with them.
#include <cmath>

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
  int64_t channels = x.shape()[1];
  int64_t inner = 1;
  for (int i = 2; i < x.ndim(); ++i) inner *= x.shape()[i];
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
  });
}

}  // namespace kiln
