// Helpers for the C++ tests of the C API: an MLP built through kiln.h's graph builder (with a
// symbolic batch), its reference computed in double, and a run into a caller-owned buffer.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::test {

#define KILN_EXPECT_OK(call) EXPECT_EQ((call), KILN_OK) << kiln_last_error()
#define KILN_ASSERT_OK(call) ASSERT_EQ((call), KILN_OK) << kiln_last_error()

// The engine's statistics as JSON text ("" and a test failure on error).
inline std::string StatsJson(kiln_engine* e) {
  char* json = nullptr;
  EXPECT_EQ(kiln_engine_stats_json(e, &json), KILN_OK) << kiln_last_error();
  std::string s = json ? json : "";
  kiln_string_free(json);
  return s;
}

// y = act(x @ w1 + b1) @ w2 + b2, x: f32[batch, in]; `act` is a unary op name (`relu`).
struct CMlp {
  int in = 0, hidden = 0, out = 0;
  std::vector<float> w1, b1, w2, b2;
  kiln_model* model = nullptr;

  CMlp(int in_, int hidden_, int out_, uint32_t seed, const char* act = "relu")
      : in(in_), hidden(hidden_), out(out_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      for (float& f : v) f = dist(rng);
    };
    fill(w1, static_cast<size_t>(in) * hidden);
    fill(b1, hidden);
    fill(w2, static_cast<size_t>(hidden) * out);
    fill(b2, out);

    kiln_graph_builder* b = nullptr;
    KILN_EXPECT_OK(kiln_graph_builder_create("cmlp", &b));
    const int64_t x_dims[2] = {0, in};
    const char* x_syms[2] = {"batch", nullptr};
    kiln_value x = 0, v = 0;
    KILN_EXPECT_OK(kiln_graph_builder_add_input(b, "x", KILN_F32, 2, x_dims, x_syms, &x));
    auto weight = [&](const std::vector<float>& data, std::vector<int64_t> shape) {
      kiln_tensor* t = nullptr;
      kiln_value c = 0;
      KILN_EXPECT_OK(kiln_tensor_wrap(KILN_F32, shape.size(), shape.data(),
                                      const_cast<float*>(data.data()), data.size() * sizeof(float),
                                      &t));
      KILN_EXPECT_OK(kiln_graph_builder_add_constant(b, t, nullptr, &c));
      kiln_tensor_destroy(t);
      return c;
    };
    kiln_value args[2] = {x, weight(w1, {in, hidden})};
    KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "matmul", 2, args, nullptr, "fc1", &v));
    args[0] = v;
    args[1] = weight(b1, {hidden});
    KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "add", 2, args, nullptr, "fc1_bias", &v));
    KILN_EXPECT_OK(kiln_graph_builder_add_op(b, act, 1, &v, nullptr, "act", &v));
    args[0] = v;
    args[1] = weight(w2, {hidden, out});
    KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "matmul", 2, args, nullptr, "fc2", &v));
    args[0] = v;
    args[1] = weight(b2, {out});
    KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "add", 2, args, nullptr, "fc2_bias", &v));
    KILN_EXPECT_OK(kiln_graph_builder_add_output(b, v, "y"));
    KILN_EXPECT_OK(kiln_graph_builder_build(b, &model));
    kiln_graph_builder_destroy(b);
  }
  ~CMlp() { kiln_model_destroy(model); }
  CMlp(const CMlp&) = delete;
  CMlp& operator=(const CMlp&) = delete;

  std::vector<float> Input(int batch, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(batch) * in);
    for (float& f : x) f = dist(rng);
    return x;
  }

  // `sigmoid` instead of relu when `sigmoid` is set.
  std::vector<double> Reference(const std::vector<float>& x, int batch,
                                bool sigmoid = false) const {
    std::vector<double> y(static_cast<size_t>(batch) * out);
    std::vector<double> h(hidden);
    for (int r = 0; r < batch; ++r) {
      for (int j = 0; j < hidden; ++j) {
        double acc = b1[j];
        for (int i = 0; i < in; ++i) acc += double{x[r * in + i]} * w1[i * hidden + j];
        h[j] = sigmoid ? 1.0 / (1.0 + std::exp(-acc)) : (acc > 0 ? acc : 0);
      }
      for (int j = 0; j < out; ++j) {
        double acc = b2[j];
        for (int i = 0; i < hidden; ++i) acc += h[i] * w2[i * out + j];
        y[r * out + j] = acc;
      }
    }
    return y;
  }
};

// Runs `model` (one input `x`, one output) on x: f32[batch, in], writing into a caller-owned
// buffer through wrapped tensors. Returns the status; `y` receives the output on success.
inline kiln_status RunInto(kiln_engine* engine, const kiln_model* model, std::vector<float>& x,
                           int batch, int in, int out, std::vector<float>* y) {
  y->assign(static_cast<size_t>(batch) * out, 0.0f);
  const int64_t x_shape[2] = {batch, in}, y_shape[2] = {batch, out};
  kiln_tensor* xt = nullptr;
  kiln_tensor* yt = nullptr;
  kiln_status s = kiln_tensor_wrap(KILN_F32, 2, x_shape, x.data(), x.size() * sizeof(float), &xt);
  if (s == KILN_OK)
    s = kiln_tensor_wrap(KILN_F32, 2, y_shape, y->data(), y->size() * sizeof(float), &yt);
  if (s == KILN_OK) {
    const char* in_names[1] = {"x"};
    const kiln_tensor* ins[1] = {xt};
    kiln_tensor* outs[1] = {yt};
    s = kiln_engine_run(engine, model, 1, in_names, ins, 1, nullptr, outs);
  }
  kiln_tensor_destroy(xt);
  kiln_tensor_destroy(yt);
  return s;
}

inline void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << what << ", element " << i;
}

}  // namespace kiln::test
