// Asynchronous runs (kiln_stream, kiln_engine_run_async) of an engine whose kernels run on a
// device: each kiln_stream has a stream of the device, on which its runs launch, so runs on
// two kiln_streams overlap there. The device is the host emulation of a CUDA device
// (tests/common/cuda_host_device.h), given to the engine through EngineOptions::device_api,
// which kiln.h does not offer; the engine is wrapped as kiln_engine_create would.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "api/c_api_util.h"
#include "capi_internal.h"
#include "common/cuda_device_run.h"
#include "common/cuda_host_device.h"
#include "devices/cuda_device.h"
#include "jit/nvrtc.h"
#include "kiln.h"

namespace kiln::test {
namespace {

// Runs of two batch sizes enqueued on two streams of `engine`, then waited for and checked
// against the MLP's reference.
void RunOnTwoStreams(kiln_engine* engine) {
  CMlp mlp(13, 24, 5, 7);
  ASSERT_NE(mlp.model, nullptr);
  kiln_stream* streams[2] = {nullptr, nullptr};
  for (kiln_stream*& s : streams) KILN_ASSERT_OK(kiln_stream_create(engine, &s));
  struct Run {
    std::vector<float> x;
    kiln_tensor* xt = nullptr;
    kiln_tensor* slot[1] = {nullptr};
    kiln_run* run = nullptr;
    ~Run() {
      kiln_run_destroy(run);
      kiln_tensor_destroy(xt);
      kiln_tensor_destroy(slot[0]);
    }
  };
  std::vector<std::unique_ptr<Run>> runs;
  for (int i = 0; i < 4; ++i) {
    auto r = std::make_unique<Run>();
    const int batch = i % 2 ? 5 : 2;
    r->x = mlp.Input(batch, 50 + i);
    const int64_t shape[2] = {batch, mlp.in};
    KILN_ASSERT_OK(
        kiln_tensor_wrap(KILN_F32, 2, shape, r->x.data(), r->x.size() * sizeof(float), &r->xt));
    const kiln_tensor* ins[1] = {r->xt};
    KILN_ASSERT_OK(kiln_engine_run_async(engine, mlp.model, streams[i % 2], 1, nullptr, ins, 1,
                                         nullptr, r->slot, &r->run));
    runs.push_back(std::move(r));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    KILN_ASSERT_OK(kiln_run_wait(runs[i]->run));
    size_t n = 0;
    KILN_ASSERT_OK(kiln_tensor_nbytes(runs[i]->slot[0], &n));
    std::vector<float> y(n / sizeof(float));
    KILN_ASSERT_OK(kiln_tensor_copy_to_host(runs[i]->slot[0], y.data(), n));
    ExpectNear(y, mlp.Reference(runs[i]->x, i % 2 ? 5 : 2), "run on the device");
  }
  runs.clear();
  for (kiln_stream* s : streams) kiln_stream_destroy(s);
}

TEST(CApiDevice, RunsOnEachStreamLaunchOnItsOwnDeviceStream) {
  if (const std::string& why = NvrtcUnavailable(); !why.empty())
    GTEST_SKIP() << "NVRTC cannot be loaded, so no CUDA C is compiled: " << why;
  HostCudaDevice device;
  EngineOptions o;
  o.target = "cuda";
  o.device_api = &device;
  o.policy = CompilePolicy::kEager;
  auto* engine = new kiln_engine{std::make_unique<Engine>(o)};
  RunOnTwoStreams(engine);
  // Two device streams, neither the default one, took the launches, two runs each.
  std::set<StreamHandle> used;
  for (const auto& [stream, count] : device.launches)
    if (count > 0) used.insert(stream);
  EXPECT_EQ(used.size(), 2u);
  EXPECT_EQ(used.count(nullptr), 0u);
  kiln_engine_destroy(engine);
  EXPECT_EQ(device.live_allocations(), 0u);  // and the streams were freed (FreeStream checks)
}

// The same through kiln.h alone, on a real GPU where there is one (scripts/gpu_check.sh).
TEST(CApiOnCudaDevice, RunsOnTwoStreams) {
  if (const std::string why = CUDADeviceAPI::UnavailableReason(); !why.empty())
    GTEST_SKIP() << "no CUDA device: " << why;
  kiln_options* o = nullptr;
  KILN_ASSERT_OK(kiln_options_create(&o));
  KILN_ASSERT_OK(kiln_options_set_target(o, ("cuda -arch=" + test::Device0Arch()).c_str()));
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(o, &engine));
  kiln_options_destroy(o);
  RunOnTwoStreams(engine);
  kiln_engine_destroy(engine);
}

}  // namespace
}  // namespace kiln::test
