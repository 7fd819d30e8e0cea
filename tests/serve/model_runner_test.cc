// `kiln serve`'s model runner (api/serve/model_runner.h): requests from many threads batched
// along the batch dim give each request its own rows, equal to the reference; requests with
// other dims differing are never mixed; inputs that do not fit the model are refused with a
// message naming them; a model without a batch symbol runs unbatched. Also run under TSan.
#include "api/serve/model_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/c_api_util.h"

namespace kiln::serve {
namespace {

using test::CMlp;

InputTensor Input(const std::string& name, kiln_dtype dtype, std::vector<int64_t> shape,
                  const void* data) {
  InputTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.nbytes = kiln_dtype_size(dtype);
  for (int64_t d : t.shape) t.nbytes *= static_cast<size_t>(d);
  t.data.reset(new unsigned char[t.nbytes ? t.nbytes : 1]);
  if (t.nbytes) std::memcpy(t.data.get(), data, t.nbytes);
  return t;
}

std::vector<float> Floats(const OutputView& v) {
  std::vector<float> out(v.nbytes / sizeof(float));
  if (v.nbytes) std::memcpy(out.data(), v.data, v.nbytes);
  return out;
}

// y = op(x) for x: f32[dims] (`symbols[d]` names a symbolic dim, nullptr a constant one).
kiln_model* UnaryModel(const char* op, std::vector<int64_t> dims,
                       std::vector<const char*> symbols) {
  kiln_graph_builder* b = nullptr;
  kiln_model* model = nullptr;
  kiln_value x = 0, y = 0;
  KILN_EXPECT_OK(kiln_graph_builder_create("unary", &b));
  KILN_EXPECT_OK(
      kiln_graph_builder_add_input(b, "x", KILN_F32, dims.size(), dims.data(), symbols.data(), &x));
  KILN_EXPECT_OK(kiln_graph_builder_add_op(b, op, 1, &x, nullptr, op, &y));
  KILN_EXPECT_OK(kiln_graph_builder_add_output(b, y, "y"));
  KILN_EXPECT_OK(kiln_graph_builder_build(b, &model));
  kiln_graph_builder_destroy(b);
  return model;
}

struct Batches {
  std::mutex mu;
  int64_t runs = 0, requests = 0, rows = 0, most = 0;
  BatchObserver Observer() {
    return [this](int64_t n, int64_t r) {
      std::lock_guard<std::mutex> lock(mu);
      ++runs;
      requests += n;
      rows += r;
      most = std::max(most, n);
    };
  }
};

TEST(ModelRunner, ConcurrentRequestsAreBatchedAndGetTheirOwnRows) {
  CMlp mlp(24, 32, 5, 11);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  Batches batches;
  {
    ModelRunner runner("cmlp", engine, mlp.model, {8, std::chrono::microseconds(20000)},
                       batches.Observer());
    EXPECT_EQ(runner.batch_symbol(), "batch");
    constexpr int kThreads = 8, kEach = 6;
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          const int batch = 1 + (t + i) % 3;
          std::vector<float> x = mlp.Input(batch, static_cast<uint32_t>(100 * t + i));
          std::vector<InputTensor> in;
          in.push_back(Input("x", KILN_F32, {batch, 24}, x.data()));
          std::vector<OutputView> out = runner.Infer(std::move(in), {});
          std::vector<double> want = mlp.Reference(x, batch);
          if (out.size() != 1 || out[0].shape != std::vector<int64_t>{batch, 5}) {
            ++failures;
            continue;
          }
          std::vector<float> got = Floats(out[0]);
          for (size_t k = 0; k < got.size(); ++k)
            if (std::fabs(got[k] - want[k]) > 1e-4 + 1e-4 * std::fabs(want[k])) ++failures;
        }
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(batches.requests, kThreads * kEach);
    EXPECT_LT(batches.runs, kThreads * kEach) << "no two requests ran together";
    EXPECT_GT(batches.most, 1);
  }
  kiln_engine_destroy(engine);
}

TEST(ModelRunner, RequestsWithOtherDimsDifferentAreNeverMixed) {
  // x: f32[batch, seq] -> relu: the seq dim differs between the two kinds of request.
  kiln_model* model = UnaryModel("relu", {0, 0}, {"batch", "seq"});
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  Batches batches;
  {
    ModelRunner runner("seqs", engine, model, {64, std::chrono::microseconds(20000)},
                       batches.Observer());
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        const int64_t seq = t % 2 ? 3 : 5;
        std::vector<float> x(static_cast<size_t>(2 * seq));
        for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k) - 3.0f + 100.0f * t;
        std::vector<InputTensor> in;
        in.push_back(Input("x", KILN_F32, {2, seq}, x.data()));
        std::vector<OutputView> out = runner.Infer(std::move(in), {"y"});
        std::vector<float> got = Floats(out[0]);
        if (out[0].shape != std::vector<int64_t>{2, seq}) ++failures;
        for (size_t k = 0; k < x.size(); ++k)
          if (got[k] != std::max(x[k], 0.0f)) ++failures;
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GE(batches.runs, 2) << "two seq lengths cannot share a run";
  }
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
}

TEST(ModelRunner, InputsThatDoNotFitAreRefusedNamingThem) {
  CMlp mlp(4, 3, 2, 5);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  {
    ModelRunner runner("cmlp", engine, mlp.model, {}, nullptr);
    auto error = [&](std::vector<InputTensor> in, std::vector<std::string> outs = {}) {
      try {
        runner.Infer(std::move(in), outs);
      } catch (const HttpError& e) {
        EXPECT_EQ(e.status, 400);
        return e.message;
      }
      return std::string("(no error)");
    };
    const float zeros[16] = {};
    const double dzeros[8] = {};
    auto one = [&](InputTensor t) {
      std::vector<InputTensor> v;
      v.push_back(std::move(t));
      return v;
    };
    EXPECT_EQ(error(one(Input("z", KILN_F32, {1, 4}, zeros))),
              "model 'cmlp' has no input 'z' (its inputs: x)");
    EXPECT_EQ(error(one(Input("x", KILN_F64, {1, 4}, dzeros))),
              "input 'x': datatype FP64, the model takes FP32 (f32[batch, 4])");
    EXPECT_EQ(error(one(Input("x", KILN_F32, {1, 5}, zeros))),
              "input 'x': shape [1, 5], the model takes f32[batch, 4]");
    EXPECT_EQ(error(one(Input("x", KILN_F32, {4}, zeros))),
              "input 'x': shape [4], the model takes f32[batch, 4]");
    EXPECT_EQ(error({}), "input 'x' (f32[batch, 4]) is missing");
    EXPECT_EQ(error(one(Input("x", KILN_F32, {1, 4}, zeros)), {"nope"}),
              "model 'cmlp' has no output 'nope' (its outputs: y)");
    // A good request still runs after the bad ones.
    std::vector<OutputView> out = runner.Infer(one(Input("x", KILN_F32, {2, 4}, zeros)), {"y"});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 2}));
  }
  kiln_engine_destroy(engine);
}

TEST(ModelRunner, ASequenceFirstModelIsNotBatched) {
  // [seq, batch]: the structure of a batch dim, but concatenating along it would mix requests.
  kiln_model* model = UnaryModel("relu", {0, 0}, {"seq", "batch"});
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  {
    ModelRunner runner("seq_first", engine, model, {}, nullptr);
    EXPECT_EQ(runner.batch_symbol(), "");
    EXPECT_EQ(runner.unbatched_why(),
              "dim 0 is 'seq', not named as a batch dim ('batch', 'batch_size', 'N')");
  }
  {
    ModelRunner runner("off", engine, model, {1, std::chrono::microseconds(0)}, nullptr);
    EXPECT_EQ(runner.unbatched_why(), "--max-batch is 1");
  }
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
}

TEST(ModelRunner, AModelWithoutABatchSymbolRunsUnbatched) {
  kiln_model* model = UnaryModel("neg", {3}, {nullptr});
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  Batches batches;
  {
    ModelRunner runner("fixed", engine, model, {}, batches.Observer());
    EXPECT_EQ(runner.batch_symbol(), "");
    EXPECT_EQ(runner.unbatched_why(), "input dim 0 is not symbolic");
    const float x3[3] = {1, -2, 3};
    std::vector<InputTensor> in;
    in.push_back(Input("x", KILN_F32, {3}, x3));
    std::vector<OutputView> out = runner.Infer(std::move(in), {});
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{-1, 2, -3}));
    EXPECT_EQ(batches.runs, 1);
  }
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
}

}  // namespace
}  // namespace kiln::serve
