// ONNX converters of the signal and linear-algebra ops (ir/ops/signal.cc): DFT, STFT, Det and
// MelWeightMatrix.
// kiln's ops share ONNX's semantics; the inputs that decide output shapes become attributes.
//
// Opsets: DFT, STFT and MelWeightMatrix exist from opset 17 (kiln reads up to 17, so DFT-20's axis
// input never arrives); Det from 11.
#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

// dft_length (input 1) sets the output's size along the axis, so kiln needs it at import.
Outs Dft(const NodeContext& c) {
  Attrs a = {{"axis", c.Int("axis", 1)},
             {"inverse", c.Int("inverse", 0) != 0},
             {"onesided", c.Int("onesided", 0) != 0}};
  if (c.OptIn(1)) {
    std::vector<int64_t> length = c.ConstInts(1, "dft_length");
    if (length.size() != 1)
      c.Invalid(StrCat("dft_length (input 1) must hold one value, got ", length.size()));
    if (length[0] < 1)
      c.Invalid(StrCat("dft_length (input 1) must be at least 1, got ", length[0]));
    a.Set("length", length[0]);
  }
  return {c.Call("dft", {c.In(0)}, a)};
}

// The all-ones window that ONNX's STFT means when it has none: frame_length (input 3) long,
// else as long as the signal. Passing it keeps stft's arguments (signal, window) the same with
// and without a window, as its dynamic form dyn.stft needs (a fixed number of data arguments
// before the values). A frame_length that is a graph input or computed makes the window
// dyn.constant_of_shape, resolved with it.
Expr OnesWindow(const NodeContext& c, const Expr& signal) {
  const Attrs ones = {{"value", 1.0}, {"dtype", c.DTypeOf(signal)}};
  if (c.OptIn(3)) return c.CallWithValues("constant_of_shape", {}, ones, {{"shape", 3}});
  Shape s = c.ShapeOf(signal);
  if (s.size() != 3)
    c.Invalid(StrCat("signal must be [batch, length, 1 or 2], got ", ShapeToString(s)));
  if (s[1].is_const()) {
    Attrs fixed = ones;
    fixed.Set("shape", std::vector<int64_t>{s[1].value()});
    return c.Call("constant_of_shape", {}, fixed);
  }
  Expr length = c.Call("shape", {signal}, {{"start", int64_t{1}}, {"end", int64_t{2}}});
  return c.Call("dyn.constant_of_shape", {length}, ones);
}

// frame_step (input 1) and frame_length (input 3) set the output shape: constants become
// stft's attributes; graph inputs or computed values make the call dyn.stft.
Outs Stft(const NodeContext& c) {
  Expr signal = c.In(0);
  c.In(1);  // frame_step is required
  if (c.OptIn(3)) {
    std::optional<double> frame_length = c.ConstScalar(3);
    // kiln's frame_length 0 means "the window's length"; ONNX has no such value.
    if (frame_length && !(*frame_length >= 1))
      c.Invalid(StrCat("frame_length (input 3) must be at least 1, got ", *frame_length));
  }
  Expr window = c.OptIn(2);
  if (!window) window = OnesWindow(c, signal);
  return {c.CallWithValues("stft", {signal, window}, {{"onesided", c.Int("onesided", 1) != 0}},
                           {{"frame_step", 1}, {"frame_length", 3}})};
}

Outs Det(const NodeContext& c) {
  return {c.Call("det", {c.In(0)})};
}

// MelWeightMatrix-17: every input is a scalar that kiln's mel_weight_matrix takes as an
// attribute (they decide the output shape); constants become them now, anything else makes the
// call dyn.mel_weight_matrix.
Outs MelWeightMatrix(const NodeContext& c) {
  const std::optional<DType> dtype =
      DTypeFromOnnx(static_cast<int32_t>(c.Int("output_datatype", onnx::TensorProto::FLOAT)));
  if (!dtype) c.Unsupported("output_datatype names a dtype kiln lacks");
  return {c.CallWithValues("mel_weight_matrix", {}, {{"dtype", *dtype}},
                           {{"num_mel_bins", 0},
                            {"dft_length", 1},
                            {"sample_rate", 2},
                            {"lower_edge_hertz", 3},
                            {"upper_edge_hertz", 4}})};
}

}  // namespace

const std::map<std::string, Converter>& SignalConverters() {
  static const std::map<std::string, Converter> table = {
      {"DFT", Dft},
      {"Det", Det},
      {"MelWeightMatrix", MelWeightMatrix},
      {"STFT", Stft},
  };
  return table;
}

}  // namespace kiln::onnx_import
