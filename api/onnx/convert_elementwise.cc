// ONNX converters of CastLike, the elementwise activations, the trigonometric/hyperbolic
// functions, IsNaN/IsInf and the reductions that kiln has as single ops (ir/ops/unary.cc,
// binary.cc, reduce.cc). Each ONNX op maps onto one kiln op; attribute defaults are ONNX's.

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

Outs PRelu(const NodeContext& c) {
  return {c.Call("prelu", {c.In(0), c.In(1)})};
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
      {"Elu", Elu},
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
