// What is particular to the CPU device (tasks on streams, the workspace pool's size classes, its
// error messages) and the DeviceAPI registry. The behaviour every device shares is tested in
// device_conformance_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "devices/cpu_device.h"
#include "ir/error.h"

namespace kiln {
namespace {

using test::ErrorOf;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr Device kCPU0{DeviceType::kCPU, 0};

// A gate that tasks block on until the test opens it, so orderings are forced, not timed.
class Gate {
 public:
  void Open() { promise_.set_value(); }
  void Wait() const { future_.wait(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

TEST(DeviceRegistry, FindsTheCPUByTypeAndByName) {
  DeviceAPI* by_type = GetDeviceAPI(DeviceType::kCPU);
  EXPECT_EQ(by_type, GetDeviceAPI("device_api.cpu"));
  EXPECT_EQ(by_type, &GetCPUDeviceAPI());
  EXPECT_THAT(RegisteredDeviceAPIs(), Contains("device_api.cpu"));
}

TEST(DeviceRegistry, UnknownNameListsTheRegisteredOnes) {
  Error e = ErrorOf([] { GetDeviceAPI("device_api.tpu"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_THAT(e.what(), HasSubstr("no device API 'device_api.tpu' (registered: "));
  EXPECT_THAT(e.what(), HasSubstr("device_api.cpu"));
}

TEST(DeviceRegistry, RegistersOnceAndCreatesLazilyOnce) {
  // A fresh name per run, so the test can be repeated in one process (--gtest_repeat).
  static int run = 0;
  const std::string name = StrCat("device_api.test_lazy", run++);
  auto created = std::make_shared<std::atomic<int>>(0);
  RegisterDeviceAPI(name, [created] {
    ++*created;
    return std::make_unique<CPUDeviceAPI>();
  });
  EXPECT_EQ(*created, 0);
  DeviceAPI* first = GetDeviceAPI(name);
  EXPECT_EQ(GetDeviceAPI(name), first);
  EXPECT_EQ(*created, 1);
  EXPECT_THAT(RegisteredDeviceAPIs(), Contains(name));

  Error e = ErrorOf(
      [] { RegisterDeviceAPI("device_api.cpu", [] { return std::make_unique<CPUDeviceAPI>(); }); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()), "device API 'device_api.cpu' is already registered");
  EXPECT_EQ(std::string(ErrorOf([] { RegisterDeviceAPI("device_api.null", nullptr); }).what()),
            "device API 'device_api.null' is registered without a factory");
}

TEST(CPUDevice, Attributes) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  EXPECT_EQ(cpu.GetAttr(kCPU0, DeviceAttr::kName).AsString(), "cpu");
  EXPECT_EQ(cpu.GetAttr(kCPU0, DeviceAttr::kThreadCount).AsInt(),
            static_cast<int64_t>(std::thread::hardware_concurrency()));
  EXPECT_GT(cpu.GetAttr(kCPU0, DeviceAttr::kTotalMemory).AsInt(), int64_t{1} << 20);
  for (DeviceAttr none :
       {DeviceAttr::kFreeMemory, DeviceAttr::kWarpSize, DeviceAttr::kComputeCapability,
        DeviceAttr::kMaxThreadsPerBlock, DeviceAttr::kSharedMemoryPerBlock,
        DeviceAttr::kMultiProcessorCount, DeviceAttr::kDriverVersion})
    EXPECT_TRUE(cpu.GetAttr(kCPU0, none).is_none()) << DeviceAttrName(none);
  // Another kind's device is not the CPU's: absent, not an error.
  EXPECT_EQ(cpu.GetAttr({DeviceType::kCUDA, 0}, DeviceAttr::kExists).AsInt(), 0);
}

TEST(CPUDevice, NamesAndValues) {
  EXPECT_EQ(Device{}.ToString(), "cpu(0)");
  EXPECT_EQ((Device{DeviceType::kCUDA, 3}).ToString(), "cuda(3)");
  EXPECT_EQ(DeviceAttrName(DeviceAttr::kSharedMemoryPerBlock), "shared_memory_per_block");
  EXPECT_EQ(DeviceAttrKind(DeviceAttr::kComputeCapability), DeviceAttrValue::Kind::kString);
  EXPECT_EQ(AllDeviceAttrs().size(), 11u);
  EXPECT_EQ(DeviceAttrValue().ToString(), "none");
  EXPECT_EQ(DeviceAttrValue(int64_t{32}).ToString(), "32");
  EXPECT_EQ(DeviceAttrValue(std::string("9.0")).ToString(), "9.0");
  EXPECT_EQ(std::string(ErrorOf([] { DeviceAttrValue().AsInt(); }).what()),
            "device attribute value is none, not an integer");
  EXPECT_EQ(std::string(ErrorOf([] { DeviceAttrValue(int64_t{1}).AsString(); }).what()),
            "device attribute value is an integer, not a string");
}

TEST(CPUDevice, OnlyCPUZeroExists) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  EXPECT_EQ(std::string(ErrorOf([&] {
                          cpu.AllocDataSpace({DeviceType::kCPU, 1}, 8);
                        }).what()),
            "no device cpu(1): the only CPU device is cpu(0)");
  void* p = cpu.AllocDataSpace(kCPU0, 8);
  EXPECT_EQ(std::string(ErrorOf([&] {
                          cpu.CopyDataFromTo(p, 0, p, 0, 8, kCPU0, {DeviceType::kCUDA, 0}, nullptr);
                        }).what()),
            "the cpu device API cannot use cuda(0)");
  cpu.FreeDataSpace(kCPU0, p);
}

TEST(CPUDevice, OutOfMemoryMessage) {
  Error e = ErrorOf([] { GetCPUDeviceAPI().AllocDataSpace(kCPU0, int64_t{1} << 62, 128); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(e.what(), HasSubstr("out of memory: cannot allocate data space of "
                                  "4611686018427387904 bytes (alignment 128) on cpu(0), which "
                                  "has "));
}

// A CPU's kernels are host functions: the module calls say so, naming the device.
TEST(CPUDevice, LoadsNoKernelModules) {
  DeviceAPI* api = GetDeviceAPI(DeviceType::kCPU);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { api->LoadModule(kCPU0, ".entry k(", "__global__ void k() {}"); },
           [&] { api->UnloadModule(kCPU0, nullptr); }, [&] { api->GetKernel(kCPU0, nullptr, "k"); },
           [&] { api->LaunchKernel(kCPU0, nullptr, 1, 1, nullptr, nullptr); }}) {
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), HasSubstr("on cpu(0): cpu devices run host functions"));
  }
}

TEST(CPUDevice, ForeignAndDoubleFreesAreErrors) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  void* data = cpu.AllocDataSpace(kCPU0, 100);
  void* work = cpu.AllocWorkspace(kCPU0, 100);
  Error e = ErrorOf([&] { cpu.FreeWorkspace(kCPU0, data); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("as a workspace of cpu(0): AllocWorkspace did not return it, "
                                  "or it was freed already"));
  EXPECT_THAT(ErrorOf([&] { cpu.FreeDataSpace(kCPU0, work); }).what(),
              HasSubstr("as data space of cpu(0): AllocDataSpace did not return it, or it was "
                        "freed already"));
  cpu.FreeDataSpace(kCPU0, data);
  cpu.FreeWorkspace(kCPU0, work);
  EXPECT_THAT(ErrorOf([&] { cpu.FreeDataSpace(kCPU0, data); }).what(),
              HasSubstr("AllocDataSpace did not return it, or it was freed already"));
  EXPECT_THAT(ErrorOf([&] { cpu.FreeWorkspace(kCPU0, work); }).what(),
              HasSubstr("AllocWorkspace did not return it, or it was freed already"));
  // Like free(), freeing null does nothing.
  cpu.FreeDataSpace(kCPU0, nullptr);
  cpu.FreeWorkspace(kCPU0, nullptr);
}

TEST(CPUDevice, WorkspacePoolReusesBySizeClass) {
  CPUDeviceAPI cpu;  // its own pool, so other tests' workspaces do not interfere
  void* w = cpu.AllocWorkspace(kCPU0, 1000);
  cpu.FreeWorkspace(kCPU0, w);
  EXPECT_EQ(cpu.PooledWorkspaceBytes(), 1024);
  // 1000 and 1020 share the 1024-byte class; 1100 is in the next one (1280).
  EXPECT_EQ(cpu.AllocWorkspace(kCPU0, 1020), w);
  EXPECT_EQ(cpu.PooledWorkspaceBytes(), 0);
  void* bigger = cpu.AllocWorkspace(kCPU0, 1100);
  EXPECT_NE(bigger, w);
  cpu.FreeWorkspace(kCPU0, w);
  cpu.FreeWorkspace(kCPU0, bigger);
  EXPECT_EQ(cpu.PooledWorkspaceBytes(), 1024 + 1280);
  cpu.TrimWorkspacePool();
  EXPECT_EQ(cpu.PooledWorkspaceBytes(), 0);
  // Still usable after a trim; memory still held at destruction is freed then.
  void* held = cpu.AllocWorkspace(kCPU0, 50);
  EXPECT_NE(held, nullptr);
}

TEST(CPUDevice, TasksOnAStreamRunInOrderOnAnotherThread) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle s = cpu.CreateStream(kCPU0);
  std::vector<int> order;  // touched only by the stream's thread until the sync
  std::thread::id ran_on;
  for (int i = 0; i < 1000; ++i)
    cpu.EnqueueOnStream(kCPU0, s, [&order, &ran_on, i] {
      order.push_back(i);
      ran_on = std::this_thread::get_id();
    });
  cpu.StreamSync(kCPU0, s);
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  cpu.FreeStream(kCPU0, s);
}

TEST(CPUDevice, DefaultStreamRunsInline) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  std::thread::id ran_on;
  cpu.EnqueueOnStream(kCPU0, nullptr, [&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  Error e = ErrorOf([&] {
    cpu.EnqueueOnStream(kCPU0, nullptr, [] { Throw(ErrorCode::kInternal, "kernel failed"); });
  });
  EXPECT_EQ(std::string(e.what()), "kernel failed");
}

TEST(CPUDevice, TaskErrorIsThrownByTheNextSync) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle s = cpu.CreateStream(kCPU0);
  std::atomic<int> after{0};
  cpu.EnqueueOnStream(kCPU0, s, [] { Throw(ErrorCode::kInternal, "first failure"); });
  cpu.EnqueueOnStream(kCPU0, s, [] { Throw(ErrorCode::kInternal, "second failure"); });
  cpu.EnqueueOnStream(kCPU0, s, [&] { ++after; });
  Error e = ErrorOf([&] { cpu.StreamSync(kCPU0, s); });
  EXPECT_EQ(e.code(), ErrorCode::kInternal);
  EXPECT_EQ(std::string(e.what()), "first failure");
  EXPECT_EQ(after, 1);       // the tasks after a failure still ran
  cpu.StreamSync(kCPU0, s);  // reported once
  cpu.EnqueueOnStream(kCPU0, s, [] { Throw(ErrorCode::kCancelled, "at free"); });
  EXPECT_EQ(std::string(ErrorOf([&] { cpu.FreeStream(kCPU0, s); }).what()), "at free");
  // ... and the stream is gone even so.
  EXPECT_THAT(ErrorOf([&] { cpu.StreamSync(kCPU0, s); }).what(), HasSubstr("unknown stream"));
}

TEST(CPUDevice, FreeStreamDrainsFirst) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle s = cpu.CreateStream(kCPU0);
  Gate gate;
  std::atomic<int> ran{0};
  cpu.EnqueueOnStream(kCPU0, s, [&] { gate.Wait(); });
  for (int i = 0; i < 10; ++i) cpu.EnqueueOnStream(kCPU0, s, [&] { ++ran; });
  std::thread opener([&] { gate.Open(); });
  cpu.FreeStream(kCPU0, s);
  EXPECT_EQ(ran, 10);
  opener.join();
}

// B's task must see A's slow task done; the caller of SyncStreamFromTo is not blocked (A is
// still held at its gate when the call returns).
TEST(CPUDevice, StreamWaitsForAnotherStreamsSlowTask) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle a = cpu.CreateStream(kCPU0);
  StreamHandle b = cpu.CreateStream(kCPU0);
  Gate gate;
  std::atomic<bool> a_done{false};
  std::atomic<int> b_saw{-1};
  cpu.EnqueueOnStream(kCPU0, a, [&] {
    gate.Wait();
    a_done = true;
  });
  cpu.SyncStreamFromTo(kCPU0, a, b);
  cpu.EnqueueOnStream(kCPU0, b, [&] { b_saw = a_done ? 1 : 0; });
  // Work enqueued on A after the wait was recorded is not waited for.
  Gate later;
  cpu.EnqueueOnStream(kCPU0, a, [&] { later.Wait(); });
  // Give B time to run its task if it wrongly did not wait; it must still be waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(a_done);
  EXPECT_EQ(b_saw, -1);
  gate.Open();
  cpu.StreamSync(kCPU0, b);
  EXPECT_EQ(b_saw, 1);
  later.Open();
  cpu.FreeStream(kCPU0, a);
  cpu.FreeStream(kCPU0, b);
}

TEST(CPUDevice, DefaultStreamWaitBlocksTheCaller) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle a = cpu.CreateStream(kCPU0);
  Gate gate;
  std::atomic<bool> a_done{false};
  cpu.EnqueueOnStream(kCPU0, a, [&] {
    gate.Wait();
    a_done = true;
  });
  std::thread opener([&] { gate.Open(); });
  cpu.SyncStreamFromTo(kCPU0, a, nullptr);
  EXPECT_TRUE(a_done);
  opener.join();
  cpu.FreeStream(kCPU0, a);
}

TEST(CPUDevice, ManyThreadsEnqueueOnOneStream) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  StreamHandle s = cpu.CreateStream(kCPU0);
  int total = 0;  // only the stream's thread writes it: tasks on one stream never overlap
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) cpu.EnqueueOnStream(kCPU0, s, [&] { ++total; });
      cpu.StreamSync(kCPU0, s);
    });
  for (std::thread& t : threads) t.join();
  cpu.StreamSync(kCPU0, s);
  EXPECT_EQ(total, 2000);
  cpu.FreeStream(kCPU0, s);
}

TEST(CPUDevice, SetStreamChecksTheStream) {
  CPUDeviceAPI& cpu = GetCPUDeviceAPI();
  Error e =
      ErrorOf([&] { cpu.SetStream(kCPU0, reinterpret_cast<StreamHandle>(uintptr_t{999999})); });
  EXPECT_EQ(std::string(e.what()),
            "unknown stream #999999 on cpu(0): it was never created by this device API, or it "
            "was freed already");
  EXPECT_EQ(std::string(ErrorOf([&] { cpu.FreeStream(kCPU0, nullptr); }).what()),
            "cannot free the default stream of cpu(0)");
}

TEST(CPUDevice, DestructionClosesOpenStreamsAndFreesMemory) {
  std::atomic<int> ran{0};
  {
    CPUDeviceAPI cpu;
    StreamHandle s = cpu.CreateStream(kCPU0);
    for (int i = 0; i < 100; ++i) cpu.EnqueueOnStream(kCPU0, s, [&] { ++ran; });
    cpu.AllocDataSpace(kCPU0, 1000);
    cpu.AllocWorkspace(kCPU0, 1000);
  }
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace kiln
