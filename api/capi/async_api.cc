// The C API's asynchronous runs (kiln.h: kiln_stream, kiln_run, kiln_engine_run_async): a run
// is checked and bound on the caller's thread (kiln_capi::PrepareRun, as kiln_engine_run), then
// executed as a task on a CPU device stream (CPUDeviceAPI::EnqueueOnStream: one worker thread a
// stream, tasks in order). Cancellation is the engine's (Engine::CancelScope): the task runs
// under the run's flag.
//
// Threading: a kiln_run's state is shared by the caller's handle and the stream's task; `mu`
// guards done/status/message, `cancel` is atomic. A stream's handle is used by its creator's
// calls only, which kiln.h leaves to the caller to order (create, enqueue, destroy).
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "capi_internal.h"
#include "devices/cpu_device.h"

using kiln::ErrorCode;
using kiln::Throw;

struct kiln_stream {
  kiln_engine* engine = nullptr;
  kiln::CPUDeviceAPI* cpu = nullptr;
  kiln::StreamHandle handle = nullptr;
  // For an engine whose kernels run on a device: a stream of that device, the current one of
  // the CPU stream's thread while it runs, so that runs on different kiln_streams overlap on
  // the device too (on its default stream they would queue behind each other).
  kiln::DeviceAPI* device_api = nullptr;
  kiln::Device device;
  kiln::StreamHandle device_stream = nullptr;
};

namespace {

constexpr kiln::Device kCpu{kiln::DeviceType::kCPU, 0};

struct RunState {
  std::mutex mu;
  std::condition_variable finished;
  bool done = false;
  kiln_status status = KILN_OK;
  std::string message;
  std::atomic<bool> cancel{false};

  void Finish(kiln_status s, std::string m) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    message = std::move(m);
    done = true;
    finished.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    finished.wait(lock, [&] { return done; });
  }
};

}  // namespace

struct kiln_run {
  std::shared_ptr<RunState> state;
};

kiln_status kiln_stream_create(kiln_engine* engine, kiln_stream** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(out);
  auto* cpu = dynamic_cast<kiln::CPUDeviceAPI*>(kiln::GetDeviceAPI(kiln::DeviceType::kCPU));
  if (!cpu) Throw(ErrorCode::kInternal, __func__, ": the CPU device is not the CPU DeviceAPI");
  auto s = std::make_unique<kiln_stream>();
  s->engine = engine;
  s->cpu = cpu;
  if (kiln::DeviceAPI* api = engine->engine->device_api()) {
    s->device_api = api;
    s->device = engine->engine->device();
    s->device_stream = api->CreateStream(s->device);
  }
  try {
    s->handle = cpu->CreateStream(kCpu);
  } catch (...) {
    if (s->device_stream) s->device_api->FreeStream(s->device, s->device_stream);
    throw;
  }
  *out = s.release();
  KILN_API_END
}

void kiln_stream_destroy(kiln_stream* stream) {
  if (!stream) return;
  try {
    // Tasks never throw (each ends its run with a status), so this only waits and frees.
    stream->cpu->FreeStream(kCpu, stream->handle);
    // The runs are done, and each waited for its device work.
    if (stream->device_stream)
      stream->device_api->FreeStream(stream->device, stream->device_stream);
  } catch (...) {  // a destructor-like call: nothing to report to
  }
  delete stream;
}

kiln_status kiln_engine_run_async(kiln_engine* engine, const kiln_model* model, kiln_stream* stream,
                                  size_t num_inputs, const char* const* input_names,
                                  const kiln_tensor* const* inputs, size_t num_outputs,
                                  const char* const* output_names, kiln_tensor** outputs,
                                  kiln_run** out_run) {
  KILN_API_BEGIN
  KILN_REQUIRE(stream);
  KILN_REQUIRE(out_run);
  if (engine && stream->engine != engine)
    Throw(ErrorCode::kInvalidArgument, __func__, ": the stream belongs to another engine");
  auto prepared = std::make_shared<const kiln_capi::PreparedRun>(
      kiln_capi::PrepareRun(engine, model, num_inputs, input_names, inputs, num_outputs,
                            output_names, outputs, __func__));
  auto run = std::make_unique<kiln_run>();
  run->state = std::make_shared<RunState>();
  std::shared_ptr<RunState> state = run->state;
  stream->cpu->EnqueueOnStream(kCpu, stream->handle, [state, prepared, s = *stream] {
    kiln::Engine::CancelScope scope(&state->cancel);
    try {
      if (s.device_stream) s.device_api->SetStream(s.device, s.device_stream);  // this thread's
      prepared->Execute();
      state->Finish(KILN_OK, "");
    } catch (const kiln::Error& e) {
      state->Finish(kiln_capi::ToStatus(e.code()), e.what());
    } catch (const std::bad_alloc&) {
      state->Finish(KILN_OUT_OF_MEMORY, "kiln: out of memory");
    } catch (const std::exception& e) {
      state->Finish(KILN_INTERNAL, e.what());
    } catch (...) {
      state->Finish(KILN_INTERNAL, "kiln: an unknown C++ exception");
    }
  });
  *out_run = run.release();
  KILN_API_END
}

kiln_status kiln_run_wait(kiln_run* run) {
  KILN_API_BEGIN
  KILN_REQUIRE(run);
  run->state->Wait();
  // done is never unset, so status and message are stable once it is seen.
  if (run->state->status != KILN_OK)
    return kiln_capi::Fail(run->state->status, run->state->message.c_str());
  KILN_API_END
}

kiln_status kiln_run_is_done(const kiln_run* run, int* done) {
  KILN_API_BEGIN
  KILN_REQUIRE(run);
  KILN_REQUIRE(done);
  std::lock_guard<std::mutex> lock(run->state->mu);
  *done = run->state->done ? 1 : 0;
  KILN_API_END
}

kiln_status kiln_run_cancel(kiln_run* run) {
  KILN_API_BEGIN
  KILN_REQUIRE(run);
  run->state->cancel.store(true, std::memory_order_relaxed);
  KILN_API_END
}

void kiln_run_destroy(kiln_run* run) {
  if (!run) return;
  run->state->Wait();
  delete run;
}
