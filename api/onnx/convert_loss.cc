// ONNX loss ops onto kiln's nll_loss (ir/ops/loss.cc).
//
// SoftmaxCrossEntropyLoss is defined by ONNX as LogSoftmax over axis 1 followed by
// NegativeLogLikelihoodLoss with the same weights, reduction and ignore_index, and that is how
// it is converted: its optional second output, log_prob, is the log_softmax itself. Both ops
// appear in opset 12 with their present meaning but are converted from 13, as every family op
// not listed in op_table.cc's FamilyOldestOpsets.
#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

// The nll_loss attributes of a node. An absent ignore_index keeps nll_loss's default, which
// ignores nothing.
Attrs LossAttrs(const NodeContext& c) {
  Attrs a{{"reduction", c.String("reduction", std::string("mean"))}};
  if (c.HasAttr("ignore_index")) a.Set("ignore_index", c.Int("ignore_index"));
  return a;
}

std::vector<Expr> LossArgs(const NodeContext& c, Expr input) {
  std::vector<Expr> args{std::move(input), c.In(1)};
  if (c.OptIn(2)) args.push_back(c.In(2));
  return args;
}

Outs NegativeLogLikelihoodLoss(const NodeContext& c) {
  return {c.Call("nll_loss", LossArgs(c, c.In(0)), LossAttrs(c))};
}

Outs SoftmaxCrossEntropyLoss(const NodeContext& c) {
  Expr log_prob = c.Call("log_softmax", {c.In(0)}, {{"axis", int64_t{1}}});
  Outs outs{c.Call("nll_loss", LossArgs(c, log_prob), LossAttrs(c))};
  if (c.OutputRequested(1)) outs.push_back(log_prob);
  return outs;
}

}  // namespace

const std::map<std::string, Converter>& LossConverters() {
  static const std::map<std::string, Converter> table = {
      {"NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss},
      {"SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss},
  };
  return table;
}

}  // namespace kiln::onnx_import
