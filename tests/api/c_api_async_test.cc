// Asynchronous runs through the C API (kiln.h: kiln_stream, kiln_engine_run_async, kiln_run):
// runs on two streams at once match synchronous runs, runs on one stream finish in order,
// argument errors come back from the enqueueing call, and cancellation stops a run before it
// starts or before its first kernel, deterministically (a pass instrument holds the compile
// until the test has cancelled).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "api/c_api_util.h"
#include "kiln.h"

namespace kiln::test {
namespace {

kiln_engine* MakeEngine(kiln_pass_hook before = nullptr, void* user_data = nullptr) {
  kiln_options* o = nullptr;
  KILN_EXPECT_OK(kiln_options_create(&o));
  KILN_EXPECT_OK(kiln_options_set_compile_policy(o, "eager"));
  if (before) {
    KILN_EXPECT_OK(kiln_options_add_instrument(o, before, nullptr, 0, user_data));
  }
  kiln_engine* e = nullptr;
  KILN_EXPECT_OK(kiln_engine_create(o, &e));
  kiln_options_destroy(o);
  return e;
}

// One run's tensors: x wrapped over the caller's vector, y allocated by the run (slot NULL).
struct AsyncRun {
  std::vector<float> x;
  int batch = 0;
  kiln_tensor* xt = nullptr;
  kiln_tensor* slot[1] = {nullptr};
  kiln_run* run = nullptr;

  AsyncRun(const CMlp& mlp, int b, uint32_t seed) : x(mlp.Input(b, seed)), batch(b) {
    const int64_t shape[2] = {batch, mlp.in};
    KILN_EXPECT_OK(kiln_tensor_wrap(KILN_F32, 2, shape, x.data(), x.size() * sizeof(float), &xt));
  }
  ~AsyncRun() {
    kiln_run_destroy(run);  // waits first
    kiln_tensor_destroy(xt);
    kiln_tensor_destroy(slot[0]);
  }
  kiln_status Enqueue(kiln_engine* e, const kiln_model* m, kiln_stream* s) {
    const kiln_tensor* ins[1] = {xt};
    return kiln_engine_run_async(e, m, s, 1, nullptr, ins, 1, nullptr, slot, &run);
  }
  std::vector<float> Output() const {
    std::vector<float> y;
    if (!slot[0]) return y;
    size_t n = 0;
    EXPECT_EQ(kiln_tensor_nbytes(slot[0], &n), KILN_OK);
    y.resize(n / sizeof(float));
    EXPECT_EQ(kiln_tensor_copy_to_host(slot[0], y.data(), n), KILN_OK);
    return y;
  }
};

TEST(CApiAsync, RunsOnTwoStreamsMatchSynchronousRuns) {
  CMlp mlp(37, 64, 10, 3);
  ASSERT_NE(mlp.model, nullptr);
  kiln_engine* engine = MakeEngine();
  kiln_stream* streams[2] = {nullptr, nullptr};
  for (kiln_stream*& s : streams) KILN_ASSERT_OK(kiln_stream_create(engine, &s));
  // Several runs a stream, of two batch sizes, enqueued before any is waited for.
  std::vector<std::unique_ptr<AsyncRun>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(std::make_unique<AsyncRun>(mlp, i % 2 ? 17 : 3, 100 + i));
    KILN_ASSERT_OK(runs.back()->Enqueue(engine, mlp.model, streams[i % 2]));
  }
  for (auto& r : runs) {
    KILN_ASSERT_OK(kiln_run_wait(r->run));
    int done = 0;
    KILN_EXPECT_OK(kiln_run_is_done(r->run, &done));
    EXPECT_EQ(done, 1);
    std::vector<float> want;
    KILN_ASSERT_OK(RunInto(engine, mlp.model, r->x, r->batch, mlp.in, mlp.out, &want));
    EXPECT_EQ(r->Output(), want) << "batch " << r->batch;
    ExpectNear(r->Output(), mlp.Reference(r->x, r->batch), "async run");
  }
  KILN_EXPECT_OK(kiln_run_wait(runs[0]->run));  // waiting again returns the same status
  for (kiln_stream* s : streams) kiln_stream_destroy(s);
  kiln_engine_destroy(engine);
}

TEST(CApiAsync, RunsOnOneStreamFinishInOrder) {
  CMlp mlp(16, 32, 4, 4);
  kiln_engine* engine = MakeEngine();
  kiln_stream* stream = nullptr;
  KILN_ASSERT_OK(kiln_stream_create(engine, &stream));
  std::vector<std::unique_ptr<AsyncRun>> runs;
  for (int i = 0; i < 6; ++i) {
    runs.push_back(std::make_unique<AsyncRun>(mlp, 1 + i, 200 + i));  // a compile each
    KILN_ASSERT_OK(runs.back()->Enqueue(engine, mlp.model, stream));
  }
  KILN_ASSERT_OK(kiln_run_wait(runs.back()->run));
  for (auto& r : runs) {
    int done = 0;
    KILN_EXPECT_OK(kiln_run_is_done(r->run, &done));
    EXPECT_EQ(done, 1) << "a run enqueued before the last one had not finished";
    ExpectNear(r->Output(), mlp.Reference(r->x, r->batch), "run in order");
  }
  kiln_stream_destroy(stream);
  kiln_engine_destroy(engine);
}

TEST(CApiAsync, ArgumentErrorsComeBackFromTheEnqueueingCall) {
  CMlp mlp(8, 8, 2, 5);
  kiln_engine* engine = MakeEngine();
  kiln_engine* other = MakeEngine();
  kiln_stream* stream = nullptr;
  KILN_ASSERT_OK(kiln_stream_create(engine, &stream));
  AsyncRun wrong(mlp, 2, 1);
  const int64_t shape[2] = {2, 5};  // the model takes [batch, 8]
  kiln_tensor_destroy(wrong.xt);
  wrong.xt = nullptr;
  KILN_ASSERT_OK(kiln_tensor_create(KILN_F32, 2, shape, &wrong.xt));
  EXPECT_EQ(wrong.Enqueue(engine, mlp.model, stream), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("kiln_engine_run_async"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(wrong.run, nullptr) << "nothing is enqueued";
  AsyncRun right(mlp, 2, 2);
  EXPECT_EQ(right.Enqueue(other, mlp.model, stream), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("the stream belongs to another engine"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(right.Enqueue(engine, mlp.model, nullptr), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_run_wait(nullptr), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_run_cancel(nullptr), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_stream_create(nullptr, &stream), KILN_INVALID_ARGUMENT);
  kiln_run_destroy(nullptr);
  kiln_stream_destroy(nullptr);
  kiln_stream_destroy(stream);
  kiln_engine_destroy(other);
  kiln_engine_destroy(engine);
}

// Holds the first compile's first pass until the test releases it.
struct Gate {
  std::atomic<bool> entered{false}, released{false};
};
void HoldFirstPass(const char*, const char*, void* user_data) {
  auto* g = static_cast<Gate*>(user_data);
  if (g->entered.exchange(true)) return;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!g->released.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(CApiAsync, CancelledRunsStopBeforeTheirFirstKernelOrBeforeTheyStart) {
  CMlp mlp(16, 32, 4, 6);
  Gate gate;
  kiln_engine* engine = MakeEngine(HoldFirstPass, &gate);
  kiln_stream* stream = nullptr;
  KILN_ASSERT_OK(kiln_stream_create(engine, &stream));
  AsyncRun first(mlp, 3, 1), second(mlp, 3, 2), third(mlp, 3, 3);
  KILN_ASSERT_OK(first.Enqueue(engine, mlp.model, stream));
  while (!gate.entered.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // `first` is compiling (held in its first pass); `second` and `third` wait behind it.
  KILN_ASSERT_OK(second.Enqueue(engine, mlp.model, stream));
  KILN_ASSERT_OK(third.Enqueue(engine, mlp.model, stream));
  KILN_EXPECT_OK(kiln_run_cancel(first.run));
  KILN_EXPECT_OK(kiln_run_cancel(second.run));
  gate.released = true;

  EXPECT_EQ(kiln_run_wait(first.run), KILN_CANCELLED);
  EXPECT_NE(std::string(kiln_last_error()).find("run cancelled after 0 of"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(first.slot[0], nullptr) << "a cancelled run makes no output";
  EXPECT_EQ(kiln_run_wait(second.run), KILN_CANCELLED);
  EXPECT_NE(std::string(kiln_last_error()).find("run cancelled before it started"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(second.slot[0], nullptr);
  // The one not cancelled runs, on the executable the cancelled run compiled.
  KILN_EXPECT_OK(kiln_run_wait(third.run));
  ExpectNear(third.Output(), mlp.Reference(third.x, 3), "run after cancelled ones");
  KILN_EXPECT_OK(kiln_run_cancel(third.run));  // finished: nothing changes
  KILN_EXPECT_OK(kiln_run_wait(third.run));
  kiln_stream_destroy(stream);
  kiln_engine_destroy(engine);
}

}  // namespace
}  // namespace kiln::test
