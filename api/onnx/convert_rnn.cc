// ONNX converters of the recurrent ops RNN, GRU and LSTM. kiln graphs have no loops, so each
// node is unrolled over its sequence into kiln's matmul, slice and elementwise calls: one
// matmul of the whole sequence with W, then per step one matmul with R and the cell's gate
// arithmetic. The sequence length must therefore be known at import; the batch may be symbolic.
//
// Semantics are the ONNX operators' from opset 7 (gate orders: LSTM i, o, f, c; GRU z, r, h;
// B is [Wb, Rb]; P is [Pi, Po, Pf]); opset 14 added `layout` (batch-major X, Y, Y_h, Y_c),
// which is read from 14 on. sequence_lens may be computed: per step a mask `t < len[b]` keeps
// a finished sequence's state and zeroes its outputs, so Y_h/Y_c hold each sequence's last
// valid step (for `reverse`, processing starts at each sequence's own last element).
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;
using Ints = std::vector<int64_t>;

enum class Cell { kRnn, kGru, kLstm };

int NumGates(Cell cell) {
  return cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1;
}

// Dim `axis` of `e` when the model fixes it (its inferred type has a constant there), else
// nullopt.
std::optional<int64_t> KnownDim(const NodeContext& c, const Expr& e, int axis) {
  Shape s = c.ShapeOf(e);
  if (axis >= static_cast<int>(s.size()) || !s[axis].is_const()) return std::nullopt;
  return s[axis].value();
}

// kiln calls over tensors that may be absent. An absent (null) tensor stands for zeros: a
// missing initial_h/initial_c or bias. Keeping zeros symbolic means no zero tensor of the
// batch size has to be built (the batch may be symbolic), and the first step of a model
// without initial states skips its recurrent matmul.
class Builder {
 public:
  Builder(const NodeContext& c, DType dtype) : c_(c), dtype_(dtype) {}

  Expr Call(const std::string& op, std::vector<Expr> args, const Attrs& attrs = {}) const {
    return c_.Call(op, std::move(args), attrs);
  }
  Expr Scalar(double v) const { return c_.Scalar(v, dtype_); }

  Expr Add(const Expr& a, const Expr& b) const {
    if (!a) return b;
    if (!b) return a;
    return Call("add", {a, b});
  }
  Expr Mul(const Expr& a, const Expr& b) const {
    if (!a || !b) return nullptr;
    return Call("mul", {a, b});
  }
  Expr MatMul(const Expr& a, const Expr& b) const {
    if (!a || !b) return nullptr;
    return Call("matmul", {a, b});
  }
  // x[index] along `axis`, which is dropped.
  Expr Take(const Expr& x, int64_t index, int64_t axis) const {
    if (!x) return nullptr;
    return Call("gather", {x, MakeConstant(Tensor::Scalar<int64_t>(index))}, {{"axis", axis}});
  }
  // x[begin:end] along `axis`.
  Expr Slice(const Expr& x, int64_t axis, int64_t begin, int64_t end) const {
    if (!x) return nullptr;
    return Call("slice", {x}, {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{axis}}});
  }
  Expr Transpose(const Expr& x, Ints perm) const {
    if (!x) return nullptr;
    return Call("transpose", {x}, {{"perm", std::move(perm)}});
  }
  // cond ? a : b, with absent tensors as zeros.
  Expr Where(const Expr& cond, const Expr& a, const Expr& b) const {
    return Call("where", {cond, a ? a : Scalar(0), b ? b : Scalar(0)});
  }
  // Joins `parts` (each gets new axes `axes`) along `axis`.
  Expr Stack(const std::vector<Expr>& parts, const Ints& axes, int64_t axis) const {
    std::vector<Expr> expanded;
    for (const Expr& p : parts) expanded.push_back(Call("unsqueeze", {p}, {{"axes", axes}}));
    return expanded.size() == 1 ? expanded[0] : Call("concat", expanded, {{"axis", axis}});
  }

 private:
  const NodeContext& c_;
  DType dtype_;
};

// One entry of the `activations` attribute, with the alpha/beta it consumed.
struct Activation {
  std::string name;  // lower case: ONNX Runtime matches the names case-insensitively
  double alpha = 0.0, beta = 0.0;
};

struct ActivationParams {
  const char* name;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // ONNX's defaults (those of the ops of the same name)
};

constexpr ActivationParams kActivations[] = {
    {"sigmoid", false, false, 0, 0},        {"tanh", false, false, 0, 0},
    {"relu", false, false, 0, 0},           {"softsign", false, false, 0, 0},
    {"softplus", false, false, 0, 0},       {"leakyrelu", true, false, 0.01, 0},
    {"thresholdedrelu", true, false, 1, 0}, {"elu", true, false, 1, 0},
    {"hardsigmoid", true, true, 0.2, 0.5},  {"affine", true, true, 1, 0},
    {"scaledtanh", true, true, 1, 1},
};

// The activations of every direction, `defaults.size()` per direction, forward's first. A
// bidirectional node may list one direction's (both then use them). activation_alpha and
// activation_beta are consumed in list order by the functions that take them, as ONNX Runtime
// reads them; a function past the end of the values gets its default.
std::vector<Activation> ReadActivations(const NodeContext& c,
                                        const std::vector<std::string>& defaults,
                                        int num_directions) {
  std::vector<std::string> names = c.Strings("activations", std::vector<std::string>{});
  const size_t per_direction = defaults.size();
  if (names.empty()) names = defaults;
  if (names.size() == per_direction && num_directions == 2) {
    const std::vector<std::string> one_direction = names;
    names.insert(names.end(), one_direction.begin(), one_direction.end());
  }
  if (names.size() != per_direction * num_directions)
    c.Invalid(StrCat("activations lists ", names.size(), " functions; ", c.op_type(), " with ",
                     num_directions, " direction(s) takes ", per_direction * num_directions));
  const std::vector<double> alphas = c.Floats("activation_alpha", std::vector<double>{});
  const std::vector<double> betas = c.Floats("activation_beta", std::vector<double>{});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& given : names) {
    Activation f;
    f.name = given;
    std::transform(f.name.begin(), f.name.end(), f.name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const ActivationParams* p = nullptr;
    for (const ActivationParams& k : kActivations)
      if (f.name == k.name) p = &k;
    if (!p)
      c.Unsupported(StrCat("activation \"", given,
                           "\" (supported: Sigmoid, Tanh, Relu, LeakyRelu, ThresholdedRelu, Elu, "
                           "HardSigmoid, Affine, ScaledTanh, Softsign, Softplus)"));
    if (p->uses_alpha) f.alpha = next_alpha < alphas.size() ? alphas[next_alpha++] : p->alpha;
    if (p->uses_beta) f.beta = next_beta < betas.size() ? betas[next_beta++] : p->beta;
    out.push_back(f);
  }
  return out;
}

Expr Apply(const Builder& b, const Activation& f, const Expr& x) {
  if (f.name == "sigmoid" || f.name == "tanh" || f.name == "relu" || f.name == "softsign" ||
      f.name == "softplus")
    return b.Call(f.name, {x});
  if (f.name == "leakyrelu") return b.Call("leaky_relu", {x}, {{"alpha", f.alpha}});
  if (f.name == "thresholdedrelu") return b.Call("thresholded_relu", {x}, {{"alpha", f.alpha}});
  if (f.name == "elu") return b.Call("elu", {x}, {{"alpha", f.alpha}});
  if (f.name == "hardsigmoid")
    return b.Call("hard_sigmoid", {x}, {{"alpha", f.alpha}, {"beta", f.beta}});
  if (f.name == "affine")
    return b.Call("add", {b.Call("mul", {x, b.Scalar(f.alpha)}), b.Scalar(f.beta)});
  KILN_CHECK(f.name == "scaledtanh", "activation '", f.name, "' passed ReadActivations");
  return b.Call("mul", {b.Scalar(f.alpha), b.Call("tanh", {b.Call("mul", {x, b.Scalar(f.beta)})})});
}

// What every step of one direction reads.
struct Direction {
  bool reverse = false;
  Expr xw;                    // X W^T + the biases folded into it: [T, batch, gates * hidden]
  Expr rt;                    // R^T: [hidden, gates * hidden] (GRU: the z and r columns only)
  Expr rt_h;                  // GRU: R_h^T [hidden, hidden]
  Expr rb_h;                  // GRU: Rb_h [hidden], or null
  Expr pi, po, pf;            // LSTM peepholes [hidden], or null
  Expr h, c;                  // the initial states [batch, hidden], or null (zeros)
  std::vector<Activation> f;  // this direction's activations
};

struct Config {
  Cell cell = Cell::kRnn;
  int64_t hidden = 0;
  std::optional<double> clip;
  bool input_forget = false;
  bool linear_before_reset = false;
};

Expr Clip(const Builder& b, const Config& cfg, const Expr& x) {
  if (!cfg.clip) return x;
  return b.Call("clip", {x}, {{"min", -*cfg.clip}, {"max", *cfg.clip}});
}

// One step of `d`'s cell from its states d.h and d.c (updated in place) on X's step t; `mask`
// ([batch, 1] bool, or null when every sequence covers t) says which sequences take the step.
// Returns the step's Y.
Expr Step(const Builder& b, const Config& cfg, Direction& d, int64_t t, const Expr& mask) {
  const int64_t H = cfg.hidden;
  Expr xw_t = b.Take(d.xw, t, 0);  // [batch, gates * hidden]
  auto gate = [&](const Expr& all, int k) { return b.Slice(all, 1, k * H, (k + 1) * H); };
  Expr h, c;
  switch (cfg.cell) {
    case Cell::kRnn:
      h = Apply(b, d.f[0], Clip(b, cfg, b.Add(xw_t, b.MatMul(d.h, d.rt))));
      break;
    case Cell::kGru: {
      Expr zr = b.Add(b.Slice(xw_t, 1, 0, 2 * H), b.MatMul(d.h, d.rt));
      Expr z = Apply(b, d.f[0], Clip(b, cfg, gate(zr, 0)));
      Expr r = Apply(b, d.f[0], Clip(b, cfg, gate(zr, 1)));
      Expr recurrent = cfg.linear_before_reset ? b.Mul(r, b.Add(b.MatMul(d.h, d.rt_h), d.rb_h))
                                               : b.Add(b.MatMul(b.Mul(r, d.h), d.rt_h), d.rb_h);
      Expr hh = Apply(b, d.f[1], Clip(b, cfg, b.Add(gate(xw_t, 2), recurrent)));
      // h = (1 - z) * hh + z * h_prev
      h = b.Add(b.Mul(b.Call("sub", {b.Scalar(1), z}), hh), b.Mul(z, d.h));
      break;
    }
    case Cell::kLstm: {
      Expr g = b.Add(xw_t, b.MatMul(d.h, d.rt));
      Expr i = Apply(b, d.f[0], Clip(b, cfg, b.Add(gate(g, 0), b.Mul(d.pi, d.c))));
      // input_forget couples the gates: f = 1 - i.
      Expr f = cfg.input_forget
                   ? b.Call("sub", {b.Scalar(1), i})
                   : Apply(b, d.f[0], Clip(b, cfg, b.Add(gate(g, 2), b.Mul(d.pf, d.c))));
      Expr cc = Apply(b, d.f[1], Clip(b, cfg, gate(g, 3)));
      c = b.Add(b.Mul(f, d.c), b.Mul(i, cc));
      Expr o = Apply(b, d.f[0], Clip(b, cfg, b.Add(gate(g, 1), b.Mul(d.po, c))));
      h = b.Mul(o, Apply(b, d.f[2], c));
      break;
    }
  }
  if (!mask) {
    d.h = h;
    d.c = c;
    return h;
  }
  Expr y = b.Where(mask, h, nullptr);
  d.h = d.h ? b.Where(mask, h, d.h) : y;
  if (c) d.c = b.Where(mask, c, d.c);
  return y;
}

Outs Recurrent(const NodeContext& c, Cell cell) {
  const int gates = NumGates(cell);
  Expr x = c.In(0), w = c.In(1), r = c.In(2), bias = c.OptIn(3), seq_lens = c.OptIn(4);
  Expr init_h = c.OptIn(5);
  Expr init_c = cell == Cell::kLstm ? c.OptIn(6) : nullptr;
  Expr peep = cell == Cell::kLstm ? c.OptIn(7) : nullptr;
  const DType dtype = c.DTypeOf(x);
  Builder b(c, dtype);

  const std::string direction = c.String("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.Invalid(StrCat("direction \"", direction, "\" (expected forward, reverse or bidirectional)"));
  const int num_directions = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = c.opset() >= 14 ? c.Int("layout", 0) : 0;
  if (layout != 0 && layout != 1) c.Invalid(StrCat("layout ", layout, " (expected 0 or 1)"));
  const bool batch_major = layout == 1;

  // Ranks and the dims the model fixes, checked here so that a mismatch names the input
  // rather than a kiln call of the unrolled graph.
  auto check_rank = [&](const Expr& e, int rank, const char* what) {
    if (e && c.RankOf(e) != rank)
      c.Invalid(StrCat(what, " must have rank ", rank, ", not ", c.RankOf(e)));
  };
  check_rank(x, 3, "X (input 0)");
  check_rank(w, 3, "W (input 1)");
  check_rank(r, 3, "R (input 2)");
  check_rank(bias, 2, "B (input 3)");
  check_rank(seq_lens, 1, "sequence_lens (input 4)");
  check_rank(init_h, 3, "initial_h (input 5)");
  check_rank(init_c, 3, "initial_c (input 6)");
  check_rank(peep, 2, "P (input 7)");

  Config cfg;
  cfg.cell = cell;
  if (c.HasAttr("hidden_size")) {
    cfg.hidden = c.Int("hidden_size");
  } else if (std::optional<int64_t> h = KnownDim(c, r, 2)) {
    cfg.hidden = *h;
  } else {
    c.Invalid("hidden_size is required when R's shape (input 2) is not known");
  }
  if (cfg.hidden <= 0) c.Invalid(StrCat("hidden_size ", cfg.hidden, " must be positive"));
  const int64_t H = cfg.hidden, GH = gates * H;
  auto check_dim = [&](const Expr& e, int axis, int64_t want, const char* what) {
    if (!e) return;
    std::optional<int64_t> got = KnownDim(c, e, axis);
    if (got && *got != want)
      c.Invalid(StrCat(what, " dim ", axis, " is ", *got, ", expected ", want, " (", num_directions,
                       " direction(s), hidden_size ", H, ")"));
  };
  check_dim(w, 0, num_directions, "W (input 1)");
  check_dim(w, 1, GH, "W (input 1)");
  check_dim(r, 0, num_directions, "R (input 2)");
  check_dim(r, 1, GH, "R (input 2)");
  check_dim(r, 2, H, "R (input 2)");
  check_dim(bias, 0, num_directions, "B (input 3)");
  check_dim(bias, 1, 2 * GH, "B (input 3)");
  check_dim(peep, 0, num_directions, "P (input 7)");
  check_dim(peep, 1, 3 * H, "P (input 7)");
  for (const Expr& state : {init_h, init_c}) {
    check_dim(state, batch_major ? 1 : 0, num_directions, "the initial state");
    check_dim(state, 2, H, "the initial state");
  }

  if (c.HasAttr("clip")) {
    cfg.clip = c.Float("clip");
    if (!(*cfg.clip > 0)) c.Invalid(StrCat("clip ", *cfg.clip, " must be positive"));
  }
  if (cell == Cell::kLstm) cfg.input_forget = c.Int("input_forget", 0) != 0;
  if (cell == Cell::kGru) cfg.linear_before_reset = c.Int("linear_before_reset", 0) != 0;
  const std::vector<std::string> default_activations =
      cell == Cell::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                           : std::vector<std::string>{"Tanh"};
  const std::vector<Activation> activations =
      ReadActivations(c, default_activations, num_directions);

  std::optional<int64_t> seq = KnownDim(c, x, batch_major ? 1 : 0);
  if (!seq)
    c.Unsupported(StrCat("the sequence length (dim ", batch_major ? 1 : 0,
                         " of X) must be known at import: kiln unrolls the recurrence"));
  const int64_t T = *seq;
  if (T == 0) c.Unsupported("an empty sequence (sequence length 0)");

  // Sequence-major from here on.
  if (batch_major) {
    x = b.Transpose(x, {1, 0, 2});
    init_h = b.Transpose(init_h, {1, 0, 2});
    init_c = b.Transpose(init_c, {1, 0, 2});
  }

  // Masks are needed unless the lengths are constants that all cover the whole sequence.
  bool masked = seq_lens != nullptr;
  if (AsConstant(seq_lens)) {
    Ints lens = c.ConstInts(4, "sequence_lens");
    for (int64_t len : lens)
      if (len < 0 || len > T)
        c.Invalid(StrCat("sequence_lens holds ", len, ", outside [0, ", T, "]"));
    masked = std::any_of(lens.begin(), lens.end(), [T](int64_t len) { return len != T; });
  }
  std::vector<Expr> masks(T);
  if (masked) {
    const DType len_dtype = c.DTypeOf(seq_lens);
    for (int64_t t = 0; t < T; ++t)
      masks[t] = b.Call("unsqueeze", {b.Call("less", {c.Scalar(t, len_dtype), seq_lens})},
                        {{"axes", Ints{1}}});
  }

  std::vector<Direction> dirs(num_directions);
  const int per_direction = static_cast<int>(default_activations.size());
  for (int k = 0; k < num_directions; ++k) {
    Direction& d = dirs[k];
    d.reverse = direction == "reverse" || k == 1;
    d.f.assign(activations.begin() + k * per_direction,
               activations.begin() + (k + 1) * per_direction);
    Expr bias_x;  // the biases added to every step's X W^T
    if (bias) {
      Expr bd = b.Take(bias, k, 0);
      Expr wb = b.Slice(bd, 0, 0, GH), rb = b.Slice(bd, 0, GH, 2 * GH);
      if (cell == Cell::kGru) {
        // Rb_z and Rb_r add like Wb; Rb_h sits inside the reset gate's product.
        d.rb_h = b.Slice(rb, 0, 2 * H, 3 * H);
        Expr zeros = MakeConstant(Tensor::Empty(dtype, {H}));
        bias_x = b.Add(wb, b.Call("concat", {b.Slice(rb, 0, 0, 2 * H), zeros}, {{"axis", 0}}));
      } else {
        bias_x = b.Add(wb, rb);
      }
    }
    d.xw = b.Add(b.MatMul(x, b.Transpose(b.Take(w, k, 0), {1, 0})), bias_x);
    Expr rt = b.Transpose(b.Take(r, k, 0), {1, 0});
    if (cell == Cell::kGru) {
      d.rt = b.Slice(rt, 1, 0, 2 * H);
      d.rt_h = b.Slice(rt, 1, 2 * H, 3 * H);
    } else {
      d.rt = rt;
    }
    if (peep) {
      Expr pd = b.Take(peep, k, 0);
      d.pi = b.Slice(pd, 0, 0, H);
      d.po = b.Slice(pd, 0, H, 2 * H);
      d.pf = b.Slice(pd, 0, 2 * H, 3 * H);
    }
    d.h = b.Take(init_h, k, 0);
    d.c = b.Take(init_c, k, 0);
  }

  std::vector<std::vector<Expr>> ys(num_directions, std::vector<Expr>(T));
  for (int k = 0; k < num_directions; ++k)
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = dirs[k].reverse ? T - 1 - s : s;
      ys[k][t] = Step(b, cfg, dirs[k], t, masks[t]);
    }

  Outs outs(c.num_outputs());
  if (c.OutputRequested(0)) {
    std::vector<Expr> per_direction_y;
    for (int k = 0; k < num_directions; ++k) per_direction_y.push_back(b.Stack(ys[k], {0, 1}, 0));
    Expr y = per_direction_y.size() == 1
                 ? per_direction_y[0]
                 : b.Call("concat", per_direction_y, {{"axis", int64_t{1}}});
    outs[0] = batch_major ? b.Transpose(y, {2, 0, 1, 3}) : y;  // [batch, T, dirs, hidden]
  }
  auto final_state = [&](Expr Direction::*state) {
    std::vector<Expr> parts;
    for (const Direction& d : dirs) parts.push_back(d.*state);
    Expr s = b.Stack(parts, {0}, 0);
    return batch_major ? b.Transpose(s, {1, 0, 2}) : s;  // [batch, dirs, hidden]
  };
  if (c.OutputRequested(1)) outs[1] = final_state(&Direction::h);
  if (c.OutputRequested(2)) {
    if (cell != Cell::kLstm) c.Invalid(StrCat(c.op_type(), " has two outputs, not three"));
    outs[2] = final_state(&Direction::c);
  }
  return outs;
}

Outs Rnn(const NodeContext& c) {
  return Recurrent(c, Cell::kRnn);
}
Outs Gru(const NodeContext& c) {
  return Recurrent(c, Cell::kGru);
}
Outs Lstm(const NodeContext& c) {
  return Recurrent(c, Cell::kLstm);
}

}  // namespace

const std::map<std::string, Converter>& RnnConverters() {
  static const std::map<std::string, Converter> table = {
      {"GRU", Gru},
      {"LSTM", Lstm},
      {"RNN", Rnn},
  };
  return table;
}

}  // namespace kiln::onnx_import
