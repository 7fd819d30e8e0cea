// ONNX RNN, GRU and LSTM (api/onnx/convert_rnn.cc): models built with the protobuf classes,
// imported, interpreted, and compared on random data with a reference recurrence written here
// as plain loops, one sequence at a time (the converter masks whole batches per step instead).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "common/test_util.h"
#include "ir/interpreter.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

using test::ErrorOf;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::HasSubstr;

// --- The reference recurrence --------------------------------------------------------------

struct Act {
  std::string name;  // ONNX spelling
  double alpha = 0, beta = 0;
};

double ApplyAct(const Act& f, double x) {
  std::string n = f.name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "sigmoid") return 1 / (1 + std::exp(-x));
  if (n == "tanh") return std::tanh(x);
  if (n == "relu") return std::max(x, 0.0);
  if (n == "leakyrelu") return x < 0 ? f.alpha * x : x;
  if (n == "thresholdedrelu") return x > f.alpha ? x : 0;
  if (n == "elu") return x < 0 ? f.alpha * (std::exp(x) - 1) : x;
  if (n == "hardsigmoid") return std::clamp(f.alpha * x + f.beta, 0.0, 1.0);
  if (n == "affine") return f.alpha * x + f.beta;
  if (n == "scaledtanh") return f.alpha * std::tanh(f.beta * x);
  if (n == "softsign") return x / (1 + std::fabs(x));
  if (n == "softplus") return std::log1p(std::exp(x));
  ADD_FAILURE() << "no reference for " << f.name;
  return 0;
}

struct Case {
  std::string op;  // RNN, GRU or LSTM
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  std::string direction = "forward";
  bool bias = true, initial = false, peepholes = false;
  std::vector<int32_t> lens = {};  // sequence_lens; empty: none
  bool lens_constant = true;       // an initializer, else a graph input
  bool weights_constant = false;   // W, R, B, P as initializers, else graph inputs
  bool symbolic_batch = false;     // X's batch dim declared as "batch"
  int64_t layout = 0;
  int64_t opset = 14;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  std::optional<float> clip = std::nullopt;
  std::vector<Act> acts = {};  // the activations attribute (all directions); empty: none
  std::vector<bool> outputs = {true, true, true};  // Y, Y_h, (LSTM) Y_c requested
};

int Gates(const Case& k) {
  return k.op == "LSTM" ? 4 : k.op == "GRU" ? 3 : 1;
}
int Dirs(const Case& k) {
  return k.direction == "bidirectional" ? 2 : 1;
}
int NumOutputs(const Case& k) {
  return k.op == "LSTM" ? 3 : 2;
}

// The node's inputs, in ONNX order; absent optional ones are undefined tensors.
struct Inputs {
  Tensor x, w, r, b, lens, h0, c0, p;
};

Inputs MakeInputs(const Case& k, int64_t batch, uint64_t seed) {
  const int64_t G = Gates(k), D = Dirs(k), H = k.hidden;
  Inputs in;
  in.x = k.layout ? RandomTensor(DType::kFloat32, {batch, k.seq, k.input}, seed)
                  : RandomTensor(DType::kFloat32, {k.seq, batch, k.input}, seed);
  in.w = RandomTensor(DType::kFloat32, {D, G * H, k.input}, seed + 1);
  in.r = RandomTensor(DType::kFloat32, {D, G * H, H}, seed + 2);
  if (k.bias) in.b = RandomTensor(DType::kFloat32, {D, 2 * G * H}, seed + 3);
  if (!k.lens.empty()) in.lens = test::MakeTensor<int32_t>({batch}, k.lens);
  if (k.initial) {
    std::vector<int64_t> shape =
        k.layout ? std::vector<int64_t>{batch, D, H} : std::vector<int64_t>{D, batch, H};
    in.h0 = RandomTensor(DType::kFloat32, shape, seed + 4);
    if (k.op == "LSTM") in.c0 = RandomTensor(DType::kFloat32, shape, seed + 5);
  }
  if (k.peepholes) in.p = RandomTensor(DType::kFloat32, {D, 3 * H}, seed + 6);
  return in;
}

// The activations each direction uses: the attribute's, else ONNX's defaults.
std::vector<Act> DirectionActs(const Case& k, int d) {
  std::vector<Act> defaults = k.op == "LSTM"  ? std::vector<Act>{{"Sigmoid"}, {"Tanh"}, {"Tanh"}}
                              : k.op == "GRU" ? std::vector<Act>{{"Sigmoid"}, {"Tanh"}}
                                              : std::vector<Act>{{"Tanh"}};
  if (k.acts.empty()) return defaults;
  return {k.acts.begin() + d * defaults.size(), k.acts.begin() + (d + 1) * defaults.size()};
}

// Y, Y_h and Y_c as ONNX defines them, one sequence and one direction at a time.
std::vector<Tensor> Reference(const Case& k, const Inputs& in, int64_t batch) {
  const int64_t T = k.seq, B = batch, I = k.input, H = k.hidden, G = Gates(k), D = Dirs(k);
  auto x = [&](int64_t t, int64_t b, int64_t i) {
    return in.x.GetAsDouble(k.layout ? (b * T + t) * I + i : (t * B + b) * I + i);
  };
  auto w = [&](int64_t d, int64_t row, int64_t i) {
    return in.w.GetAsDouble((d * G * H + row) * I + i);
  };
  auto r = [&](int64_t d, int64_t row, int64_t j) {
    return in.r.GetAsDouble((d * G * H + row) * H + j);
  };
  auto wb = [&](int64_t d, int64_t row) {
    return in.b.defined() ? in.b.GetAsDouble(d * 2 * G * H + row) : 0.0;
  };
  auto rb = [&](int64_t d, int64_t row) {
    return in.b.defined() ? in.b.GetAsDouble(d * 2 * G * H + G * H + row) : 0.0;
  };
  auto state_index = [&](int64_t d, int64_t b, int64_t j) {
    return k.layout ? (b * D + d) * H + j : (d * B + b) * H + j;
  };
  auto clip = [&](double v) { return k.clip ? std::clamp<double>(v, -*k.clip, *k.clip) : v; };

  std::vector<int64_t> y_shape =
      k.layout ? std::vector<int64_t>{B, T, D, H} : std::vector<int64_t>{T, D, B, H};
  std::vector<int64_t> s_shape =
      k.layout ? std::vector<int64_t>{B, D, H} : std::vector<int64_t>{D, B, H};
  Tensor y = Tensor::Empty(DType::kFloat32, y_shape);  // zero-filled: steps past a length
  Tensor yh = Tensor::Empty(DType::kFloat32, s_shape), yc = Tensor::Empty(DType::kFloat32, s_shape);

  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = k.direction == "reverse" || d == 1;
    std::vector<Act> f = DirectionActs(k, static_cast<int>(d));
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(H, 0.0), c(H, 0.0);
      if (in.h0.defined())
        for (int64_t j = 0; j < H; ++j) h[j] = in.h0.GetAsDouble(state_index(d, b, j));
      if (in.c0.defined())
        for (int64_t j = 0; j < H; ++j) c[j] = in.c0.GetAsDouble(state_index(d, b, j));
      const int64_t len = in.lens.defined() ? in.lens.GetAsDouble(b) : T;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        // pre[g][j]: X W^T + H R^T + Wb + Rb of gate g (GRU's h gate: without the R part).
        std::vector<std::vector<double>> pre(G, std::vector<double>(H));
        for (int64_t g = 0; g < G; ++g)
          for (int64_t j = 0; j < H; ++j) {
            const int64_t row = g * H + j;
            double v = wb(d, row);
            for (int64_t i = 0; i < I; ++i) v += x(t, b, i) * w(d, row, i);
            if (k.op != "GRU" || g < 2) {
              v += rb(d, row);
              for (int64_t m = 0; m < H; ++m) v += h[m] * r(d, row, m);
            }
            pre[g][j] = v;
          }
        std::vector<double> nh(H), nc(H);
        if (k.op == "RNN") {
          for (int64_t j = 0; j < H; ++j) nh[j] = ApplyAct(f[0], clip(pre[0][j]));
        } else if (k.op == "GRU") {
          std::vector<double> z(H), rr(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = ApplyAct(f[0], clip(pre[0][j]));
            rr[j] = ApplyAct(f[0], clip(pre[1][j]));
          }
          for (int64_t j = 0; j < H; ++j) {
            const int64_t row = 2 * H + j;
            double rec = 0;
            if (k.linear_before_reset) {
              for (int64_t m = 0; m < H; ++m) rec += h[m] * r(d, row, m);
              rec = rr[j] * (rec + rb(d, row));
            } else {
              for (int64_t m = 0; m < H; ++m) rec += rr[m] * h[m] * r(d, row, m);
              rec += rb(d, row);
            }
            double hh = ApplyAct(f[1], clip(pre[2][j] + rec));
            nh[j] = (1 - z[j]) * hh + z[j] * h[j];
          }
        } else {
          auto peep = [&](int64_t g, int64_t j) {
            return in.p.defined() ? in.p.GetAsDouble(d * 3 * H + g * H + j) : 0.0;
          };
          for (int64_t j = 0; j < H; ++j) {
            double i = ApplyAct(f[0], clip(pre[0][j] + peep(0, j) * c[j]));
            double fg =
                k.input_forget ? 1 - i : ApplyAct(f[0], clip(pre[2][j] + peep(2, j) * c[j]));
            double cc = ApplyAct(f[1], clip(pre[3][j]));
            nc[j] = fg * c[j] + i * cc;
            double o = ApplyAct(f[0], clip(pre[1][j] + peep(1, j) * nc[j]));
            nh[j] = o * ApplyAct(f[2], nc[j]);
          }
          c = nc;
        }
        h = nh;
        for (int64_t j = 0; j < H; ++j)
          y.SetFromDouble(k.layout ? ((b * T + t) * D + d) * H + j : ((t * D + d) * B + b) * H + j,
                          h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        yh.SetFromDouble(state_index(d, b, j), h[j]);
        yc.SetFromDouble(state_index(d, b, j), c[j]);
      }
    }
  }
  std::vector<Tensor> out = {y, yh, yc};
  out.resize(NumOutputs(k));
  return out;
}

// --- Building the model --------------------------------------------------------------------

onnx::TensorProto ToProto(const std::string& name, const Tensor& t) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(t.dtype() == DType::kInt32 ? onnx::TensorProto::INT32 : onnx::TensorProto::FLOAT);
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
  return p;
}

void AddInput(onnx::ModelProto& m, const std::string& name, const Tensor& t,
              const std::vector<std::string>& dim_params = {}) {
  onnx::ValueInfoProto* v = m.mutable_graph()->add_input();
  v->set_name(name);
  onnx::TypeProto::Tensor* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(t.dtype() == DType::kInt32 ? onnx::TensorProto::INT32
                                               : onnx::TensorProto::FLOAT);
  for (int i = 0; i < t.ndim(); ++i) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (i < static_cast<int>(dim_params.size()) && !dim_params[i].empty())
      dim->set_dim_param(dim_params[i]);
    else
      dim->set_dim_value(t.shape()[i]);
  }
}

void AddOutput(onnx::ModelProto& m, const std::string& name) {
  onnx::ValueInfoProto* v = m.mutable_graph()->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  v->mutable_type()->mutable_tensor_type()->mutable_shape();
}

onnx::AttributeProto* Attr(onnx::NodeProto* n, const std::string& name,
                           onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

// The model of `k` and the tensors its graph inputs take, in order.
struct Built {
  onnx::ModelProto model;
  std::vector<Tensor> feeds;
};

Built Build(const Case& k, const Inputs& in) {
  Built out;
  onnx::ModelProto& m = out.model;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  m.add_opset_import()->set_version(k.opset);
  m.mutable_graph()->set_name("rnn");
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_op_type(k.op);
  n->set_name("cell");

  auto feed = [&](const std::string& name, const Tensor& t, bool constant,
                  const std::vector<std::string>& dim_params = {}) {
    if (!t.defined()) {
      n->add_input("");
      return;
    }
    n->add_input(name);
    if (constant) {
      *m.mutable_graph()->add_initializer() = ToProto(name, t);
    } else {
      AddInput(m, name, t, dim_params);
      out.feeds.push_back(t);
    }
  };
  std::vector<std::string> x_dims(3);
  if (k.symbolic_batch) x_dims[k.layout ? 0 : 1] = "batch";
  feed("X", in.x, false, x_dims);
  feed("W", in.w, k.weights_constant);
  feed("R", in.r, k.weights_constant);
  feed("B", in.b, k.weights_constant);
  std::vector<std::string> state_dims(3);
  if (k.symbolic_batch) state_dims[k.layout ? 0 : 1] = "batch";
  feed("sequence_lens", in.lens, k.lens_constant, {k.symbolic_batch ? "batch" : ""});
  feed("initial_h", in.h0, false, state_dims);
  feed("initial_c", in.c0, false, state_dims);
  feed("P", in.p, k.weights_constant);
  while (n->input_size() > 0 && n->input(n->input_size() - 1).empty())
    n->mutable_input()->RemoveLast();

  const char* names[] = {"Y", "Y_h", "Y_c"};
  int last = -1;
  for (int i = 0; i < NumOutputs(k); ++i)
    if (k.outputs[i]) last = i;
  for (int i = 0; i <= last; ++i) {
    n->add_output(k.outputs[i] ? names[i] : "");
    if (k.outputs[i]) AddOutput(m, names[i]);
  }

  Attr(n, "hidden_size", onnx::AttributeProto::INT)->set_i(k.hidden);
  if (k.direction != "forward")
    Attr(n, "direction", onnx::AttributeProto::STRING)->set_s(k.direction);
  if (k.layout) Attr(n, "layout", onnx::AttributeProto::INT)->set_i(k.layout);
  if (k.linear_before_reset) Attr(n, "linear_before_reset", onnx::AttributeProto::INT)->set_i(1);
  if (k.input_forget) Attr(n, "input_forget", onnx::AttributeProto::INT)->set_i(1);
  if (k.clip) Attr(n, "clip", onnx::AttributeProto::FLOAT)->set_f(*k.clip);
  if (!k.acts.empty()) {
    onnx::AttributeProto* names_attr = Attr(n, "activations", onnx::AttributeProto::STRINGS);
    onnx::AttributeProto* alpha = nullptr;
    onnx::AttributeProto* beta = nullptr;
    for (const Act& f : k.acts) {
      names_attr->add_strings(f.name);
      // The values are consumed in order by the functions that take them.
      std::string lower = f.name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      const bool uses_alpha = lower == "leakyrelu" || lower == "thresholdedrelu" ||
                              lower == "elu" || lower == "hardsigmoid" || lower == "affine" ||
                              lower == "scaledtanh";
      const bool uses_beta = lower == "hardsigmoid" || lower == "affine" || lower == "scaledtanh";
      if (uses_alpha) {
        if (!alpha) alpha = Attr(n, "activation_alpha", onnx::AttributeProto::FLOATS);
        alpha->add_floats(static_cast<float>(f.alpha));
      }
      if (uses_beta) {
        if (!beta) beta = Attr(n, "activation_beta", onnx::AttributeProto::FLOATS);
        beta->add_floats(static_cast<float>(f.beta));
      }
    }
  }
  return out;
}

ImportedModel Import(const onnx::ModelProto& m) {
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return ImportOnnxBuffer(bytes.data(), bytes.size());
}

// Imports `k`, runs it on random data for each batch size, and compares every requested
// output with the reference.
void Check(const Case& k, const std::vector<int64_t>& batches = {}, uint64_t seed = 1) {
  std::vector<int64_t> sizes = batches.empty() ? std::vector<int64_t>{k.batch} : batches;
  ImportedModel model;
  for (int64_t batch : sizes) {
    SCOPED_TRACE(StrCat(k.op, " ", k.direction, " batch ", batch));
    Inputs in = MakeInputs(k, batch, seed);
    Built built = Build(k, in);
    if (!model.graph) model = Import(built.model);
    std::vector<Tensor> got = Interpret(model.graph, built.feeds);
    std::vector<Tensor> want = Reference(k, in, batch);
    size_t o = 0;
    for (int i = 0; i < NumOutputs(k); ++i) {
      if (!k.outputs[i]) continue;
      ASSERT_LT(o, got.size());
      EXPECT_TRUE(TensorsNear(got[o++], want[i], 1e-5, 1e-4)) << "output " << i;
    }
    EXPECT_EQ(o, got.size());
  }
}

// --- Cases ---------------------------------------------------------------------------------

TEST(OnnxRnn, RnnForwardWithBias) {
  Case k{.op = "RNN"};
  Check(k);
}

TEST(OnnxRnn, RnnBidirectionalWithInitialStateClipAndActivations) {
  Case k{.op = "RNN", .seq = 4, .direction = "bidirectional", .initial = true, .clip = 0.7f};
  k.acts = {{"Relu"}, {"LeakyRelu", 0.3}};
  Check(k);
  k.acts = {{"Elu", 0.5}, {"Elu", 1.5}};  // alphas consumed in order, one per Elu
  Check(k);
}

TEST(OnnxRnn, RnnReverseWithSequenceLengthsAndOnlyYh) {
  Case k{.op = "RNN", .seq = 4, .batch = 3, .direction = "reverse", .lens = {4, 1, 2}};
  k.outputs = {false, true, false};
  Check(k);
}

TEST(OnnxRnn, GruForwardWithInitialStateAndConstantSequenceLengths) {
  Case k{.op = "GRU",
         .seq = 3,
         .batch = 3,
         .initial = true,
         .lens = {3, 1, 2},
         .weights_constant = true};
  Check(k);
}

TEST(OnnxRnn, GruReverseLinearBeforeResetBatchMajor) {
  Case k{.op = "GRU",
         .direction = "reverse",
         .initial = true,
         .symbolic_batch = true,
         .layout = 1,
         .linear_before_reset = true};
  Check(k, {1, 3});
  k.initial = false;  // the reset gate then multiplies Rb_h alone on the first step
  Check(k);
}

TEST(OnnxRnn, GruBidirectionalWithoutBiasOnASymbolicBatch) {
  Case k{.op = "GRU", .direction = "bidirectional", .bias = false, .symbolic_batch = true};
  k.acts = {{"HardSigmoid", 0.3, 0.4}, {"Softsign"}, {"Sigmoid"}, {"ScaledTanh", 0.9, 1.2}};
  Check(k, {1, 3});
}

TEST(OnnxRnn, LstmForwardWithPeepholesAndInitialStates) {
  Case k{.op = "LSTM", .seq = 3, .initial = true, .peepholes = true, .weights_constant = true};
  Check(k);
  k.initial = false;
  k.outputs = {false, false, true};  // Y_c alone
  Check(k);
}

TEST(OnnxRnn, LstmBidirectionalBatchMajorWithSequenceLengthsFromAGraphInput) {
  Case k{.op = "LSTM",
         .seq = 4,
         .batch = 3,
         .direction = "bidirectional",
         .initial = true,
         .peepholes = true,
         .lens = {2, 4, 3},
         .lens_constant = false,
         .layout = 1};
  Check(k);
}

TEST(OnnxRnn, LstmReverseInputForgetClipAndActivationsAtOpset7) {
  Case k{.op = "LSTM", .direction = "reverse", .opset = 7, .input_forget = true, .clip = 0.9f};
  k.acts = {{"Sigmoid"}, {"Affine", 0.8, 0.1}, {"Softplus"}};
  Check(k);
  k.acts = {{"HardSigmoid", 0.25, 0.45}, {"ThresholdedRelu", 0.1}, {"Tanh"}};
  Check(k);
}

// --- Errors --------------------------------------------------------------------------------

Error ImportErrorOf(const Case& k, const std::function<void(onnx::ModelProto&)>& edit = {}) {
  Built built = Build(k, MakeInputs(k, k.batch, 1));
  if (edit) edit(built.model);
  return ErrorOf([&] { Import(built.model); });
}

onnx::AttributeProto* FindAttr(onnx::ModelProto& m, const std::string& name) {
  for (auto& a : *m.mutable_graph()->mutable_node(0)->mutable_attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

TEST(OnnxRnn, ASymbolicSequenceLengthIsUnsupported) {
  Case k{.op = "LSTM"};
  Error e = ImportErrorOf(k, [](onnx::ModelProto& m) {
    m.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(0)
        ->set_dim_param("seq");
  });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("sequence length (dim 0 of X) must be known at import"));
  EXPECT_THAT(e.what(), HasSubstr("'cell' (LSTM, opset 14)"));
}

TEST(OnnxRnn, BadAttributesAndShapesNameTheCulprit) {
  Case k{.op = "GRU"};
  Error e = ImportErrorOf(k, [](onnx::ModelProto& m) {
    auto* n = m.mutable_graph()->mutable_node(0);
    Attr(n, "direction", onnx::AttributeProto::STRING)->set_s("sideways");
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("direction \"sideways\""));

  k.acts = {{"Sigmoid"}, {"Swish"}};
  e = ImportErrorOf(k);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("activation \"Swish\""));

  k.acts = {{"Sigmoid"}};
  e = ImportErrorOf(k);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(),
              HasSubstr("activations lists 1 functions; GRU with 1 direction(s) takes 2"));

  k.acts = {};
  e = ImportErrorOf(k, [](onnx::ModelProto& m) { FindAttr(m, "hidden_size")->set_i(5); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("W (input 1) dim 1 is 12, expected 15"));

  Case lstm{.op = "LSTM", .clip = -1.0f};
  e = ImportErrorOf(lstm);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("clip -1 must be positive"));

  Case lens{.op = "RNN", .lens = {4, 1}};
  e = ImportErrorOf(lens);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("sequence_lens holds 4, outside [0, 3]"));
}

}  // namespace
}  // namespace kiln
