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
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < rank; ++i) {
    int64_t d = x.shape()[i];
    if (i < axis)
      outer *= d;
    else if (i == axis)
      n = d;
    else
      inner *= d;
  }
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
  });
}

}  // namespace

void RegisterSoftmaxOps(OpRegistry& r) {
  RegisterOne(r, "softmax", "exp(x) / sum(exp(x)) along `axis`, computed stably; floats.", false);
  RegisterOne(r, "log_softmax", "x - log(sum(exp(x))) along `axis`, computed stably; floats.",
              true);
}

}  // namespace kiln
