// ONNX converters of CastLike, the elementwise activations, the trigonometric/hyperbolic
// functions, IsNaN/IsInf and the reductions that kiln has as single ops (ir/ops/unary.cc,
// binary.cc, reduce.cc). Each ONNX op maps onto one kiln op; attribute defaults are ONNX's.

#include <cmath>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

template <const char* kOp>
Outs Unary(const NodeContext& c) {
  return {c.Call(kOp, {c.In(0)})};
}

Outs Selu(const NodeContext& c) {
  return {c.Call("selu", {c.In(0)},
                 {{"alpha", c.Float("alpha", 1.67326319217681884765625)},
                  {"gamma", c.Float("gamma", 1.05070102214813232421875)}})};
}

Outs LeakyRelu(const NodeContext& c) {
  return {c.Call("leaky_relu", {c.In(0)}, {{"alpha", c.Float("alpha", 0.01)}})};
}

Outs Elu(const NodeContext& c) {
  return {c.Call("elu", {c.In(0)}, {{"alpha", c.Float("alpha", 1.0)}})};
}

Outs HardSigmoid(const NodeContext& c) {
  return {c.Call("hard_sigmoid", {c.In(0)},
                 {{"alpha", c.Float("alpha", 0.2)}, {"beta", c.Float("beta", 0.5)}})};
}

Outs Celu(const NodeContext& c) {
  return {c.Call("celu", {c.In(0)}, {{"alpha", c.Float("alpha", 1.0)}})};
}

Outs ThresholdedRelu(const NodeContext& c) {
  return {c.Call("thresholded_relu", {c.In(0)}, {{"alpha", c.Float("alpha", 1.0)}})};
}

// CastLike(x, like) is Cast(x) to like's element type.
Outs CastLike(const NodeContext& c) {
  return {c.Call("cast", {c.In(0)}, {{"dtype", c.DTypeOf(c.In(1))}})};
}

// PRelu-6 applies a 1-D slope of C values per channel (dim 1); from opset 7 the slope
// broadcasts as NumPy does, so the old form is the new one with the slope shaped [C, 1, ...].
Outs PRelu(const NodeContext& c) {
  Expr slope = c.In(1);
  if (c.opset() < 7) {
    Shape s = c.ShapeOf(slope);
    const int rank = c.RankOf(c.In(0));
    if (s.size() == 1 && rank > 2) {
      std::vector<int64_t> axes;
      for (int i = 1; i < rank - 1; ++i) axes.push_back(i);
      slope = c.Call("unsqueeze", {slope}, {{"axes", axes}});
    }
  }
  return {c.Call("prelu", {c.In(0), slope})};
}

// HannWindow, HammingWindow, BlackmanWindow (opset 17): y[n] = a0 - a1 cos(2 pi n / N)
// + a2 cos(4 pi n / N) for n in [0, size), N = size when periodic, else size - 1; composed in
// f64 and cast to output_datatype. The size is a value: a constant now, else the model's input
// is specialized on (ir/dynamic.h), and range's length follows from it.
template <int kWindow>
Outs Window(const NodeContext& c) {
  constexpr double kAlpha = 25.0 / 46.0;
  constexpr double kCoef[3][3] = {{0.5, 0.5, 0}, {kAlpha, 1 - kAlpha, 0}, {0.42, 0.5, 0.08}};
  const double* a = kCoef[kWindow];
  std::optional<DType> out =
      DTypeFromOnnx(static_cast<int32_t>(c.Int("output_datatype", onnx::TensorProto::FLOAT)));
  if (!out) c.Unsupported("output_datatype names a dtype kiln lacks");
  const DType f64 = DType::kFloat64;
  Expr n = c.CallWithValues("range", {}, {{"start", 0.0}, {"delta", 1.0}, {"dtype", f64}},
                            {{"limit", 0}});
  Expr size = c.Call("cast", {c.In(0)}, {{"dtype", f64}});
  Expr denom = c.Int("periodic", 1) ? size : c.Call("sub", {size, c.Scalar(1, f64)});
  Expr phase = c.Call("div", {c.Call("mul", {n, c.Scalar(2 * M_PI, f64)}), denom});
  Expr y = c.Call(
      "sub", {c.Scalar(a[0], f64), c.Call("mul", {c.Scalar(a[1], f64), c.Call("cos", {phase})})});
  if (a[2] != 0) {
    Expr cos2 = c.Call("cos", {c.Call("mul", {phase, c.Scalar(2, f64)})});
    y = c.Call("add", {y, c.Call("mul", {c.Scalar(a[2], f64), cos2})});
  }
  return {c.Call("cast", {y}, {{"dtype", *out}})};
}

Outs IsInf(const NodeContext& c) {
  return {c.Call("isinf", {c.In(0)},
                 {{"detect_positive", c.Int("detect_positive", 1) != 0},
                  {"detect_negative", c.Int("detect_negative", 1) != 0}})};
}

// The axes are an attribute before opset 18 and an optional constant input from 18 on.
template <const char* kOp>
Outs Reduce(const NodeContext& c) {
  std::vector<int64_t> axes = c.Ints("axes", std::vector<int64_t>{});
  if (c.OptIn(1)) axes = c.ConstInts(1, "axes");
  return {c.Call(kOp, {c.In(0)},
                 {{"axes", axes},
                  {"keepdims", c.Int("keepdims", 1) != 0},
                  {"noop_with_empty_axes", c.Int("noop_with_empty_axes", 0) != 0}})};
}

constexpr char kSoftplus[] = "softplus";
constexpr char kSoftsign[] = "softsign";
constexpr char kHardSwish[] = "hard_swish";
constexpr char kMish[] = "mish";
constexpr char kTan[] = "tan";
constexpr char kAsin[] = "asin";
constexpr char kAcos[] = "acos";
constexpr char kAtan[] = "atan";
constexpr char kSinh[] = "sinh";
constexpr char kCosh[] = "cosh";
constexpr char kAsinh[] = "asinh";
constexpr char kAcosh[] = "acosh";
constexpr char kAtanh[] = "atanh";
constexpr char kIsNaN[] = "isnan";
constexpr char kLogSum[] = "log_sum";
constexpr char kLogSumExp[] = "log_sum_exp";
constexpr char kSumSquare[] = "sum_square";
constexpr char kL1[] = "l1";

}  // namespace

const std::map<std::string, Converter>& ElementwiseConverters() {
  static const std::map<std::string, Converter> table = {
      {"Acos", Unary<kAcos>},
      {"Acosh", Unary<kAcosh>},
      {"Asin", Unary<kAsin>},
      {"Asinh", Unary<kAsinh>},
      {"Atan", Unary<kAtan>},
      {"Atanh", Unary<kAtanh>},
      {"Celu", Celu},
      {"Cosh", Unary<kCosh>},
      {"BlackmanWindow", Window<2>},
      {"Elu", Elu},
      {"HammingWindow", Window<1>},
      {"HannWindow", Window<0>},
      {"HardSigmoid", HardSigmoid},
      {"HardSwish", Unary<kHardSwish>},
      {"IsInf", IsInf},
      {"IsNaN", Unary<kIsNaN>},
      {"LeakyRelu", LeakyRelu},
      {"Mish", Unary<kMish>},
      {"CastLike", CastLike},
      {"PRelu", PRelu},
      {"ReduceL1", Reduce<kL1>},
      {"ReduceLogSum", Reduce<kLogSum>},
      {"ReduceLogSumExp", Reduce<kLogSumExp>},
      {"ReduceSumSquare", Reduce<kSumSquare>},
      {"Selu", Selu},
      {"Sinh", Unary<kSinh>},
      {"Softplus", Unary<kSoftplus>},
      {"Softsign", Unary<kSoftsign>},
      {"Tan", Unary<kTan>},
      {"ThresholdedRelu", ThresholdedRelu},
  };
  return table;
}

}  // namespace kiln::onnx_import
