// ONNX converters of the neural-network ops (ir/ops/conv.cc, pool.cc, nn.cc): Conv,
// ConvTranspose, MaxPool, MaxUnpool, AveragePool, GlobalAveragePool, GlobalMaxPool and Pad. The
// kiln ops share ONNX's attribute names and semantics, so the windowed ops pass their attributes
// through; kiln checks them.
#include <string>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;
using Ints = std::vector<int64_t>;

// The attributes every windowed op shares, with ONNX's defaults (empty lists: kiln's own
// defaults, which are ONNX's: strides and dilations 1, pads 0).
Attrs WindowAttrs(const NodeContext& c) {
  return {{"strides", c.Ints("strides", Ints{})},
          {"pads", c.Ints("pads", Ints{})},
          {"dilations", c.Ints("dilations", Ints{})},
          {"auto_pad", c.String("auto_pad", "NOTSET")}};
}

Outs Conv(const NodeContext& c) {
  Attrs a = WindowAttrs(c);
  a.Set("group", c.Int("group", 1));
  a.Set("kernel_shape", c.Ints("kernel_shape", Ints{}));
  Outs args = {c.In(0), c.In(1)};
  if (Expr b = c.OptIn(2)) args.push_back(b);
  return {c.Call("conv", args, a)};
}

Outs ConvTranspose(const NodeContext& c) {
  Attrs a = WindowAttrs(c);
  a.Set("group", c.Int("group", 1));
  a.Set("kernel_shape", c.Ints("kernel_shape", Ints{}));
  a.Set("output_padding", c.Ints("output_padding", Ints{}));
  // kiln's output_shape lists the spatial dims only; ONNX Runtime also accepts the full output
  // shape, whose batch and channels follow from the inputs anyway.
  Expr x = c.In(0);
  Ints output_shape = c.Ints("output_shape", Ints{});
  if (!output_shape.empty() && static_cast<int>(output_shape.size()) == c.RankOf(x))
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  a.Set("output_shape", output_shape);
  Outs args = {x, c.In(1)};
  if (Expr b = c.OptIn(2)) args.push_back(b);
  return {c.Call("conv_transpose", args, a)};
}

Attrs PoolAttrs(const NodeContext& c) {
  Attrs a = WindowAttrs(c);
  a.Set("kernel_shape", c.Ints("kernel_shape"));
  a.Set("ceil_mode", c.Int("ceil_mode", 0) != 0);
  return a;
}

// Integer inputs (int8/uint8 from opset 12) pass through: kiln's max_pool takes them. The
// Indices output (opset 8 on) makes it max_pool_with_indices, the only one storage_order
// affects.
Outs MaxPool(const NodeContext& c) {
  Attrs a = PoolAttrs(c);
  if (!c.OutputRequested(1)) return {c.Call("max_pool", {c.In(0)}, a)};
  if (c.opset() < 8)
    c.Invalid("output 1 (Indices) is requested, but MaxPool has it only from opset 8 on");
  a.Set("storage_order", c.Int("storage_order", 0));
  Expr both = c.Call("max_pool_with_indices", {c.In(0)}, a);
  return {MakeTupleGetItem(both, 0), MakeTupleGetItem(both, 1)};
}

// output_shape (input 2) is the whole output shape; a graph input or computed one makes the
// call dyn.max_unpool, resolved once its value is known.
Outs MaxUnpool(const NodeContext& c) {
  Attrs a = {{"kernel_shape", c.Ints("kernel_shape")},
             {"strides", c.Ints("strides", Ints{})},
             {"pads", c.Ints("pads", Ints{})}};
  return {c.CallWithValues("max_unpool", {c.In(0), c.In(1)}, a, {{"output_shape", 2}})};
}

Outs AveragePool(const NodeContext& c) {
  Attrs a = PoolAttrs(c);
  a.Set("count_include_pad", c.Int("count_include_pad", 0) != 0);
  return {c.Call("avg_pool", {c.In(0)}, a)};
}

Outs GlobalAveragePool(const NodeContext& c) {
  return {c.Call("global_avg_pool", {c.In(0)})};
}

Outs GlobalMaxPool(const NodeContext& c) {
  return {c.Call("global_max_pool", {c.In(0)})};
}

// Pad: before opset 11 pads and value are attributes; from 11 on pads (and constant_value)
// are inputs, which kiln needs as constants; from 18 on an optional axes input says which
// axes the pads are for.
Outs Pad(const NodeContext& c) {
  Expr x = c.In(0);
  const std::string mode = c.String("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.Unsupported(StrCat("mode \"", mode, "\" (supported: constant, reflect, edge)"));
  if (c.opset() < 11)
    return {c.Call("pad", {x},
                   {{"pads", c.Ints("pads")}, {"mode", mode}, {"value", c.Float("value", 0.0)}})};
  if (!c.OptIn(3))
    return {c.CallWithValues("pad", {x}, {{"mode", mode}}, {{"pads", 1}, {"value", 2}})};
  Ints pads = c.ConstInts(1, "pads");
  double value = 0.0;
  if (c.OptIn(2)) {
    std::optional<double> v = c.ConstScalar(2);
    if (!v) c.Unsupported("constant_value (input 2) must be a constant");
    value = *v;
  }
  {
    // Spread the pads of the listed axes over every axis; the others get 0.
    const int rank = c.RankOf(x);
    Ints axes = c.ConstInts(3, "axes");
    if (pads.size() != 2 * axes.size())
      c.Invalid(StrCat("pads has ", pads.size(), " values for ", axes.size(), " axes"));
    Ints full(2 * rank, 0);
    for (size_t j = 0; j < axes.size(); ++j) {
      int64_t a = axes[j] < 0 ? axes[j] + rank : axes[j];
      if (a < 0 || a >= rank)
        c.Invalid(StrCat("axis ", axes[j], " is out of range for rank ", rank));
      full[a] = pads[j];
      full[rank + a] = pads[axes.size() + j];
    }
    pads = full;
  }
  return {c.Call("pad", {x}, {{"pads", pads}, {"mode", mode}, {"value", value}})};
}

}  // namespace

const std::map<std::string, Converter>& NnConverters() {
  static const std::map<std::string, Converter> table = {
      {"AveragePool", AveragePool},     {"Conv", Conv},
      {"ConvTranspose", ConvTranspose}, {"GlobalAveragePool", GlobalAveragePool},
      {"GlobalMaxPool", GlobalMaxPool}, {"MaxPool", MaxPool},
      {"MaxUnpool", MaxUnpool},         {"Pad", Pad},
  };
  return table;
}

}  // namespace kiln::onnx_import
