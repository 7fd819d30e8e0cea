// The engine on a device target (EngineOptions::target `cuda`): every kernel compiled to CUDA C
// and PTX (NVRTC), the constants uploaded once, the modules loaded once, each run's launches
// on the calling thread's current stream, everything taken given back. Run on a host emulation
// of a CUDA device (tests/common/cuda_host_device.h), whose modules are the same CUDA C compiled
// by the host compiler, against the CPU engine's outputs. scripts/gpu_check.sh runs the same
// models on a real GPU (EngineOnCudaDevice below). Without NVRTC these tests skip, saying why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "common/cuda_device_run.h"
#include "common/cuda_host_device.h"
#include "common/engine_options.h"
#include "common/models.h"
#include "common/test_util.h"
#include "devices/cuda_device.h"
#include "engine/engine.h"
#include "jit/nvrtc.h"

namespace kiln {
namespace {

using test::ErrorOf;
using test::HostCudaDevice;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

#define KILN_SKIP_WITHOUT_NVRTC()                                \
  if (const std::string& why = NvrtcUnavailable(); !why.empty()) \
  GTEST_SKIP() << "NVRTC cannot be loaded, so no CUDA C is compiled: " << why

EngineOptions OnDevice(DeviceAPI* device, CompilePolicy policy) {
  return test::With([&](EngineOptions& o) {
    o.target = "cuda";
    o.device_api = device;
    o.policy = policy;
    o.num_threads = 1;
  });
}

struct Case {
  const char* name;
  Function graph;
  std::vector<int64_t> shape;
};

// A product chain, attention (softmax, layer norm, GELU), convs channels-last with pads and
// strides, and a model whose outputs are copies (a value returned twice, a dead branch).
std::vector<Case> Cases() {
  return {
      {"mlp", test::MlpModel(), {3, 8}},
      {"encoder", test::EncoderLayerModel(), {2, 5, 16}},
      {"conv_chain", test::ConvChainModel(), {1, 3, 9, 11}},
      {"shared_and_dead", test::SharedAndDeadModel(), {5, 6}},
  };
}

void ExpectSameAsCpu(Engine& device, const Case& c, uint64_t seed) {
  ModelPtr model = Model::Create(c.graph, c.name);
  Engine cpu(test::Eager());
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, c.shape, seed, -2, 2)};
  std::vector<Tensor> want = cpu.Run(*model, in), got = device.Run(*model, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(TensorsNear(got[i], want[i])) << "output " << i;
}

TEST(EngineOnDevice, ModelsMatchTheCpuEngine) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  {
    Engine engine(OnDevice(&device, CompilePolicy::kEager));
    uint64_t seed = 1;
    for (const Case& c : Cases()) {
      SCOPED_TRACE(c.name);
      ExpectSameAsCpu(engine, c, seed++);
    }
    EXPECT_GT(device.modules_loaded, 0);
  }
  // The engine gave back every module, constant and workspace.
  EXPECT_EQ(device.modules_unloaded, device.modules_loaded);
  EXPECT_EQ(device.live_allocations(), 0u);
}

TEST(EngineOnDevice, ConstantsAndModulesLoadOnceAndRunsTakeNothingForGood) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  Engine engine(OnDevice(&device, CompilePolicy::kEager));
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {4, 8}, 7, -2, 2)};
  std::vector<Tensor> first = engine.Run(*model, in);
  const int loaded = device.modules_loaded;
  const size_t held = device.live_allocations();  // the constants, uploaded once
  EXPECT_GT(loaded, 0);
  EXPECT_GT(held, 0u);
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> again = engine.Run(*model, in);
    EXPECT_TRUE(TensorsNear(again[0], first[0]));
  }
  EXPECT_EQ(device.modules_loaded, loaded);
  EXPECT_EQ(device.live_allocations(), held);
  EXPECT_GT(device.workspaces_freed, 0);
}

TEST(EngineOnDevice, LaunchesGoToTheCallingThreadsStream) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  Engine engine(OnDevice(&device, CompilePolicy::kEager));
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 8}, 3, -2, 2)};
  engine.Run(*model, in);
  const int on_default = device.launches[nullptr];
  EXPECT_GT(on_default, 0);
  StreamHandle stream = device.CreateStream(HostCudaDevice::kDevice);
  device.SetStream(HostCudaDevice::kDevice, stream);
  engine.Run(*model, in);
  device.SetStream(HostCudaDevice::kDevice, nullptr);
  EXPECT_EQ(device.launches[stream], on_default);
  EXPECT_EQ(device.launches[nullptr], on_default);
  device.FreeStream(HostCudaDevice::kDevice, stream);
}

// The generic tier on a device: kernels that take the dims as arguments, the grids and scratch
// sized per call from them.
TEST(EngineOnDevice, GenericTierServesEveryShape) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  Engine engine(OnDevice(&device, CompilePolicy::kGenericOnly));
  uint64_t seed = 11;
  for (const Case& c :
       {Case{"mlp", test::MlpModel(), {1, 8}}, Case{"mlp", test::MlpModel(), {17, 8}},
        Case{"encoder", test::EncoderLayerModel(), {1, 3, 16}},
        Case{"encoder", test::EncoderLayerModel(), {2, 9, 16}}}) {
    SCOPED_TRACE(c.name);
    ExpectSameAsCpu(engine, c, seed++);
  }
  EXPECT_EQ(engine.stats().specializations, 0u);
}

TEST(EngineOnDevice, ProfilesTimeEachKernel) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  EngineOptions o = OnDevice(&device, CompilePolicy::kEager);
  o.profile = true;
  Engine engine(o);
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 8}, 5, -2, 2)};
  engine.Run(*model, in);
  engine.Run(*model, in);
  std::vector<KernelProfileStats> p = engine.stats().kernel_profile;
  ASSERT_FALSE(p.empty());
  for (const KernelProfileStats& k : p) EXPECT_EQ(k.calls, 2u) << k.kernel;
}

TEST(EngineOnDevice, TargetErrorsNameTheDevice) {
  KILN_SKIP_WITHOUT_NVRTC();
  HostCudaDevice device;
  device.compute_capability = "8.0";
  EngineOptions o = OnDevice(&device, CompilePolicy::kEager);
  o.target = "cuda -arch=sm_90";
  Error e = ErrorOf([&] { Engine engine(o); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cuda(0) has compute capability 8.0"),
                              HasSubstr("at most sm_80, not sm_90")));
  o.target = "cuda -arch=sm_80";
  Engine fits(o);  // an older arch loads on a newer device
}

// The registered CUDA device, where there is no driver (every CI machine): the engine says so
// when it is made, not at its first run.
TEST(EngineOnDevice, NoDriverIsAnErrorAtCreation) {
  if (CUDADeviceAPI::UnavailableReason().empty()) GTEST_SKIP() << "a CUDA driver is loaded here";
  Error e = ErrorOf([] { Engine engine(test::With([](EngineOptions& o) { o.target = "cuda"; })); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("EngineOptions.target 'cuda': there is no cuda(0): "),
                              HasSubstr(CUDADeviceAPI::UnavailableReason())));
}

// The same models on a real GPU, where there is one (scripts/gpu_check.sh).
TEST(EngineOnCudaDevice, ModelsMatchTheCpuEngine) {
  if (const std::string why = CUDADeviceAPI::UnavailableReason(); !why.empty())
    GTEST_SKIP() << "no CUDA device: " << why;
  KILN_SKIP_WITHOUT_NVRTC();
  EngineOptions o =
      test::Eager([&](EngineOptions& x) { x.target = "cuda -arch=" + test::Device0Arch(); });
  Engine engine(o);
  uint64_t seed = 21;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ExpectSameAsCpu(engine, c, seed++);
  }
}

}  // namespace
}  // namespace kiln
