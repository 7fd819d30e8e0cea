// Loss ops: nll_loss (ONNX NegativeLogLikelihoodLoss). SoftmaxCrossEntropyLoss is not an op of
// its own: the ONNX importer composes it as log_softmax(axis 1) followed by nll_loss, which is
// exactly how ONNX defines it, and returns the log_softmax as its optional second output.
//
// nll_loss(input[N, C, d1..dk], target[N, d1..dk], weight[C]?):
//   loss[n, d] = -input[n, t, d] * weight[t]   with t = target[n, d] (weight 1 when absent)
//   none: loss; sum: sum(loss); mean: sum(loss) / sum(weight[t] over the counted targets).
// A target equal to `ignore_index` contributes 0 to the loss and 0 to the mean's divisor. A
// target outside [0, C) cannot be an error in a compiled kernel (kernels do not throw), so it is
// treated the same way, in the reference too, so that both agree: no out-of-bounds read. The
// default ignore_index, INT64_MIN, is outside [0, C) for every C, so "no ignore_index" needs no
// separate flag. A mean whose every target is ignored is 0 / 0 = NaN, as in ONNX's reference.
// Sums accumulate in double in row-major target order, in the reference and the lowering alike.
#include <cmath>
#include <limits>
#include <utility>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

constexpr int64_t kNoIgnoreIndex = std::numeric_limits<int64_t>::min();

std::string CheckReduction(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "none" || s == "sum" || s == "mean") return "";
  return StrCat("must be \"none\", \"sum\" or \"mean\", got \"", s, "\"");
}

Type NllLossRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& target = ctx.tensor(1);
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64)
    ctx.Fail(StrCat("input must be f32 or f64, got ", TypeToString(ctx.arg(0))));
  if (x.ndim() < 2)
    ctx.Fail(StrCat("input must have rank >= 2 ([N, C, d...]), got ", ShapeToString(x.shape)));
  if (x.shape[1].is_const() && x.shape[1].value() == 0)
    ctx.Fail(StrCat("input ", ShapeToString(x.shape), " has no classes (dim 1 is 0)"));
  ctx.AssertAtMost(Dim(1), x.shape[1], "the class count (dim 1 of the input)");
  if (target.dtype != DType::kInt32 && target.dtype != DType::kInt64)
    ctx.Fail(StrCat("target must be i32 or i64, got ", DTypeName(target.dtype)));
  if (target.ndim() != x.ndim() - 1)
    ctx.Fail(StrCat("target ", ShapeToString(target.shape), " must have rank ", x.ndim() - 1,
                    " to match input ", ShapeToString(x.shape)));
  ctx.AssertEqual(target.shape[0], x.shape[0],
                  StrCat("target ", ShapeToString(target.shape), " and input ",
                         ShapeToString(x.shape), " differ in N"));
  for (int i = 1; i < target.ndim(); ++i)
    ctx.AssertEqual(target.shape[i], x.shape[i + 1],
                    StrCat("dim ", i, " of target ", ShapeToString(target.shape),
                           " differs from dim ", i + 1, " of input ", ShapeToString(x.shape)));
  if (ctx.num_args() == 3) {
    const TensorTypeNode& w = ctx.tensor(2);
    if (w.dtype != x.dtype)
      ctx.Fail(
          StrCat("weight has dtype ", DTypeName(w.dtype), " but input has ", DTypeName(x.dtype)));
    if (w.ndim() != 1)
      ctx.Fail(StrCat("weight must have rank 1 ([C]), got ", ShapeToString(w.shape)));
    ctx.AssertEqual(w.shape[0], x.shape[1],
                    StrCat("weight ", ShapeToString(w.shape), " must have C = dim 1 of input ",
                           ShapeToString(x.shape)));
  }
  if (ctx.attrs().GetString("reduction") == "none") return TensorType(target.shape, x.dtype);
  return TensorType(Shape{}, x.dtype);
}

int64_t TargetAt(const Tensor& target, int64_t i) {
  return target.dtype() == DType::kInt64 ? target.data<int64_t>()[i] : target.data<int32_t>()[i];
}

void NllLossKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const Tensor& target = in[1];
  const Tensor* weight = in.size() == 3 ? &in[2] : nullptr;
  const std::string& reduction = attrs.GetString("reduction");
  int64_t ignore = attrs.GetInt("ignore_index");
  int64_t n_count = x.shape()[0], c_count = x.shape()[1];
  int64_t d_count = n_count == 0 ? 0 : target.numel() / n_count;  // product of d1..dk
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (!std::is_floating_point_v<T>) {
      KILN_CHECK(false, "nll_loss on ", DTypeName(x.dtype()), " passed the type relation");
    } else {
      const T* xs = x.data<T>();
      const T* ws = weight ? weight->data<T>() : nullptr;
      T* y = out[0].data<T>();
      double loss_sum = 0, weight_sum = 0;
      for (int64_t n = 0; n < n_count; ++n) {
        for (int64_t d = 0; d < d_count; ++d) {
          int64_t i = n * d_count + d;
          int64_t t = TargetAt(target, i);
          bool counted = t != ignore && t >= 0 && t < c_count;
          double w = !counted ? 0.0 : ws ? static_cast<double>(ws[t]) : 1.0;
          double loss =
              counted ? -(static_cast<double>(xs[(n * c_count + t) * d_count + d]) * w) : 0.0;
          if (reduction == "none") y[i] = static_cast<T>(loss);
          loss_sum += loss;
          weight_sum += w;
        }
      }
      if (reduction == "sum") y[0] = static_cast<T>(loss_sum);
      if (reduction == "mean") y[0] = static_cast<T>(loss_sum / weight_sum);
    }
  });
}

// ---- Lowering ----
//
// Each target element becomes (counted, class) with the class clamped into [0, C - 1], so the
// input and weight are always read in bounds (every arm of a select is evaluated); an uncounted
// element's read is discarded by the select. A symbolic C bound to 0 at run time (the relation
// rejects a constant 0) leaves no element to clamp to and reads element 0, as gather does.
// Per-element values are computed in f64 as the reference does; sum and mean reduce over every
// axis of the target in row-major order, and the mean's divisor, itself a reduction over the
// counted targets' weights, is materialized first so that the output holds one Reduce.

loop::Expr F64(const loop::Expr& e) {
  return loop::Cast(DType::kFloat64, e);
}

std::vector<LTensor> LowerNllLoss(LowerContext& ctx, const std::vector<LTensor>& in,
                                  const Attrs& attrs, const std::vector<Type>&) {
  const LTensor x = in[0], target = in[1];
  const bool has_weight = in.size() == 3;
  const LTensor weight = has_weight ? in[2] : LTensor{};
  const int64_t ignore = attrs.GetInt("ignore_index");
  const std::string reduction = attrs.GetString("reduction");
  const DType t = x.dtype;
  const loop::Expr classes = x.shape[1];

  // Element idx of the target: whether it counts, and its class clamped into range.
  auto target_class = [target, classes, ignore](const std::vector<loop::Expr>& idx) {
    loop::Expr k = loop::Cast(DType::kInt64, target.at(idx));
    loop::Expr in_range = loop::MakeBinary(
        loop::BinaryOp::kAnd, loop::MakeBinary(loop::BinaryOp::kGE, k, loop::IntImm(0)),
        loop::MakeBinary(loop::BinaryOp::kLT, k, classes));
    loop::Expr counted =
        loop::MakeBinary(loop::BinaryOp::kAnd, in_range,
                         loop::MakeBinary(loop::BinaryOp::kNE, k, loop::IntImm(ignore)));
    loop::Expr safe = loop::Max(loop::Min(k, loop::Sub(classes, loop::IntImm(1))), loop::IntImm(0));
    return std::make_pair(counted, safe);
  };
  auto weight_of = [weight, has_weight](const loop::Expr& cls) {
    return has_weight ? F64(weight.at({cls})) : lower::Const(1, DType::kFloat64);
  };
  const loop::Expr zero = lower::Const(0, DType::kFloat64);

  LTensor loss{DType::kFloat64, target.shape,
               [x, target_class, weight_of, zero](const std::vector<loop::Expr>& idx) {
                 auto [counted, cls] = target_class(idx);
                 std::vector<loop::Expr> x_idx{idx[0], cls};
                 x_idx.insert(x_idx.end(), idx.begin() + 1, idx.end());
                 loop::Expr v = loop::Mul(loop::Mul(F64(x.at(x_idx)), weight_of(cls)),
                                          lower::Const(-1, DType::kFloat64));
                 return loop::Select(counted, v, zero);
               }};
  if (reduction == "none")
    return {lower::Map(loss, t, [loss, t](const std::vector<loop::Expr>& idx) {
      return loop::Cast(t, loss.at(idx));
    })};

  std::vector<int> all_axes;
  for (int i = 0; i < target.ndim(); ++i) all_axes.push_back(i);
  LTensor loss_sum =
      lower::ReduceAxes(ctx, loss, all_axes, /*keepdims=*/false, loop::ReduceKind::kSum);
  if (reduction == "sum")
    return {LTensor{t, {}, [loss_sum, t](const std::vector<loop::Expr>& idx) {
                      return loop::Cast(t, loss_sum.at(idx));
                    }}};

  LTensor weights{DType::kFloat64, target.shape,
                  [target_class, weight_of, zero](const std::vector<loop::Expr>& idx) {
                    auto [counted, cls] = target_class(idx);
                    return loop::Select(counted, weight_of(cls), zero);
                  }};
  LTensor weight_sum = ctx.Materialize(
      lower::ReduceAxes(ctx, weights, all_axes, /*keepdims=*/false, loop::ReduceKind::kSum),
      "nll_loss_weight_sum");
  return {LTensor{t, {}, [loss_sum, weight_sum, t](const std::vector<loop::Expr>& idx) {
                    return loop::Cast(t, loop::Div(loss_sum.at(idx), weight_sum.at(idx)));
                  }}};
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "nll_loss",
      .doc = "ONNX NegativeLogLikelihoodLoss: -input[n, target, d...] * weight[target], reduced "
             "by `reduction` (none, sum, mean over the counted weights); targets equal to "
             "`ignore_index` or outside [0, C) count 0; f32, f64.",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = {AttrSpec{"reduction", AttrKind::kString, AttrValue{std::string("mean")},
                         CheckReduction},
                AttrSpec{"ignore_index", AttrKind::kInt, AttrValue{kNoIgnoreIndex}}},
      // The input is read at indices that come from the target's data, which FuseOps' index
      // patterns cannot describe, so the op is never fused.
      .pattern = OpPattern::kOpaque,
      .type_rel = NllLossRel,
      .ref_kernel = NllLossKernel,
      .lower = LowerNllLoss,
  });
}

}  // namespace kiln
