// Many threads running one model through the C API at once (kiln.h: kiln_engine and
// kiln_model are thread-safe): different batch sizes at once, and one shape compiled once while
// several threads wait for it. Outputs must equal those of single-threaded runs.
#include <gtest/gtest.h>

#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "api/c_api_util.h"
#include "kiln.h"

namespace kiln::test {
namespace {

// Eager engines: every run is served by its shape's specialized executable, so outputs compare
// bit for bit and a shape's compile has waiters (the tiered policy's threads:
// tests/engine/tiers_test.cc).
struct EngineHandle {
  kiln_engine* engine = nullptr;
  explicit EngineHandle(int threads = 0) {
    kiln_options* o = nullptr;
    KILN_EXPECT_OK(kiln_options_create(&o));
    KILN_EXPECT_OK(kiln_options_set_num_threads(o, threads));
    KILN_EXPECT_OK(kiln_options_set_compile_policy(o, "eager"));
    KILN_EXPECT_OK(kiln_engine_create(o, &engine));
    kiln_options_destroy(o);
  }
  ~EngineHandle() { kiln_engine_destroy(engine); }
};

TEST(CApiThreads, TwoThreadsDifferentBatchesMatchSingleThreadedRuns) {
  CMlp mlp(37, 64, 10, 1);
  ASSERT_NE(mlp.model, nullptr);
  const int batches[2] = {3, 17};
  std::vector<float> inputs[2] = {mlp.Input(batches[0], 11), mlp.Input(batches[1], 12)};

  // Single-threaded references, from an engine of their own.
  std::vector<float> reference[2];
  {
    EngineHandle single;
    for (int t = 0; t < 2; ++t) {
      KILN_ASSERT_OK(
          RunInto(single.engine, mlp.model, inputs[t], batches[t], mlp.in, mlp.out, &reference[t]));
      ExpectNear(reference[t], mlp.Reference(inputs[t], batches[t]), "reference");
    }
  }

  // A fresh engine: both threads start cold, so they compile their shapes at the same time.
  EngineHandle shared;
  constexpr int kIters = 200;
  std::latch start(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> x = inputs[t];
      std::vector<float> y;
      start.arrive_and_wait();
      for (int i = 0; i < kIters && errors[t].empty(); ++i) {
        if (RunInto(shared.engine, mlp.model, x, batches[t], mlp.in, mlp.out, &y) != KILN_OK)
          errors[t] = std::string("run failed: ") + kiln_last_error();  // thread-local message
        else if (y != reference[t])
          errors[t] = "iteration " + std::to_string(i) + ": output differs from the reference";
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  std::string stats = StatsJson(shared.engine);
  EXPECT_NE(stats.find("\"runs\":400"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"specializations\":2"), std::string::npos) << stats;
}

TEST(CApiThreads, OneShapeIsCompiledOnceWhileOthersWait) {
  CMlp mlp(16, 32, 4, 2);
  ASSERT_NE(mlp.model, nullptr);
  std::vector<float> x = mlp.Input(5, 21);
  std::vector<double> want = mlp.Reference(x, 5);
  EngineHandle shared;
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> in = x;
      std::vector<float> y;
      start.arrive_and_wait();
      for (int i = 0; i < 20; ++i) {
        if (RunInto(shared.engine, mlp.model, in, 5, mlp.in, mlp.out, &y) != KILN_OK) {
          errors[t] = kiln_last_error();
          return;
        }
        for (size_t k = 0; k < y.size(); ++k)
          if (std::fabs(y[k] - want[k]) > 1e-4 + 1e-4 * std::fabs(want[k])) {
            errors[t] = "element " + std::to_string(k) + " is wrong";
            return;
          }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  std::string stats = StatsJson(shared.engine);
  EXPECT_NE(stats.find("\"specializations\":1,"), std::string::npos) << stats;
}

// The last-error message is per thread: a failure on one thread does not overwrite another's.
TEST(CApiThreads, LastErrorIsPerThread) {
  EXPECT_EQ(kiln_tensor_rank(nullptr, nullptr), KILN_INVALID_ARGUMENT);
  std::string mine = kiln_last_error();
  std::string theirs;
  std::thread([&] {
    theirs = kiln_last_error();  // nothing failed on this thread yet
    EXPECT_EQ(kiln_model_num_inputs(nullptr, nullptr), KILN_INVALID_ARGUMENT);
  }).join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(std::string(kiln_last_error()), mine);
  EXPECT_NE(mine.find("kiln_tensor_rank"), std::string::npos) << mine;
}

}  // namespace
}  // namespace kiln::test
