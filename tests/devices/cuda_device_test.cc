// What is particular to the CUDA device: how it behaves where CUDA is missing (every machine
// without a driver), and, on a GPU, its attributes, alignment beyond cuMemAlloc's 256 bytes, a
// 1 GiB buffer, copies at offsets across two streams, and its error messages. The behaviour
// every device shares is tested in device_conformance_test.cc. Tests that need a GPU skip,
// saying why, where there is none.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "devices/cuda_device.h"
#include "ir/error.h"

namespace kiln {
namespace {

using test::ErrorOf;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr Device kHost{DeviceType::kCPU, 0};
constexpr Device kCUDA0{DeviceType::kCUDA, 0};

CUDADeviceAPI& Api() {
  auto* api = dynamic_cast<CUDADeviceAPI*>(GetDeviceAPI(DeviceType::kCUDA));
  KILN_CHECK(api != nullptr, "device_api.cuda is not the built-in CUDADeviceAPI");
  return *api;
}

bool HaveGPU() {
  return Api().GetAttr(kCUDA0, DeviceAttr::kExists).AsInt() == 1;
}

#define SKIP_WITHOUT_GPU() \
  if (!HaveGPU())          \
  GTEST_SKIP() << "no CUDA device cuda(0) on this machine: " << CUDADeviceAPI::UnavailableReason()

std::vector<uint8_t> Pattern(int64_t n, int seed) {
  std::vector<uint8_t> bytes(n);
  for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + seed * 17 + 7) % 251);
  return bytes;
}

bool IsAligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(alignment) == 0;
}

TEST(CUDARegistry, FindsTheCUDAAPIByTypeAndByNameWithOrWithoutAGPU) {
  DeviceAPI* by_type = GetDeviceAPI(DeviceType::kCUDA);
  EXPECT_EQ(by_type, GetDeviceAPI("device_api.cuda"));
  EXPECT_EQ(by_type, &Api());
  EXPECT_THAT(RegisteredDeviceAPIs(), Contains("device_api.cuda"));
}

TEST(CUDADevice, GetAttrNeverThrowsAndAbsentDevicesDoNotExist) {
  for (Device dev : {kCUDA0, Device{DeviceType::kCUDA, 1000}, Device{DeviceType::kCUDA, -1},
                     Device{DeviceType::kCPU, 0}}) {
    const bool present = dev == kCUDA0 && HaveGPU();
    for (DeviceAttr attr : AllDeviceAttrs()) {
      SCOPED_TRACE(testing::Message() << dev << " " << DeviceAttrName(attr));
      DeviceAttrValue v;
      EXPECT_NO_THROW(v = Api().GetAttr(dev, attr));
      if (attr == DeviceAttr::kExists) {
        EXPECT_EQ(v, DeviceAttrValue(int64_t{present ? 1 : 0}));
      } else if (!present) {
        EXPECT_TRUE(v.is_none()) << v.ToString();
      }
    }
  }
}

// Every call but GetAttr throws kUnsupported, naming the device and saying why.
TEST(CUDADevice, WithoutCUDAEveryCallIsUnsupportedSayingWhy) {
  if (HaveGPU()) GTEST_SKIP() << "a CUDA device is present, so CUDA is available";
  const std::string reason = CUDADeviceAPI::UnavailableReason();
  EXPECT_FALSE(reason.empty());
  // Where this process cannot load the driver either, the reason is dlopen's own words.
  dlerror();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    ASSERT_NE(why, nullptr);
    EXPECT_EQ(reason, StrCat("libcuda.so.1 not found: ", why));
  } else {
    dlclose(lib);
    std::cout << "libcuda.so.1 loads here, but CUDA is unavailable: " << reason << "\n";
  }

  CUDADeviceAPI& api = Api();
  std::vector<uint8_t> host(16);
  void* fake = host.data();
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"SetDevice", [&] { api.SetDevice(kCUDA0); }},
      {"AllocDataSpace", [&] { api.AllocDataSpace(kCUDA0, 16); }},
      {"AllocWorkspace", [&] { api.AllocWorkspace(kCUDA0, 16); }},
      {"FreeDataSpace", [&] { api.FreeDataSpace(kCUDA0, fake); }},
      {"FreeWorkspace", [&] { api.FreeWorkspace(kCUDA0, fake); }},
      {"CopyDataFromTo to",
       [&] { api.CopyDataFromTo(fake, 0, fake, 0, 16, kHost, kCUDA0, nullptr); }},
      {"CopyDataFromTo from",
       [&] { api.CopyDataFromTo(fake, 0, fake, 0, 16, kCUDA0, kHost, nullptr); }},
      {"CopyDataFromTo within",
       [&] { api.CopyDataFromTo(fake, 0, fake, 0, 0, kCUDA0, kCUDA0, nullptr); }},
      {"CreateStream", [&] { api.CreateStream(kCUDA0); }},
      {"FreeStream", [&] { api.FreeStream(kCUDA0, fake); }},
      {"SetStream", [&] { api.SetStream(kCUDA0, nullptr); }},
      {"StreamSync", [&] { api.StreamSync(kCUDA0, nullptr); }},
      {"SyncStreamFromTo", [&] { api.SyncStreamFromTo(kCUDA0, nullptr, nullptr); }},
      {"LoadModule", [&] { api.LoadModule(kCUDA0, ".version 7.0", ""); }},
      {"UnloadModule", [&] { api.UnloadModule(kCUDA0, fake); }},
      {"GetKernel", [&] { api.GetKernel(kCUDA0, fake, "k"); }},
      {"LaunchKernel", [&] { api.LaunchKernel(kCUDA0, fake, 1, 1, nullptr, nullptr); }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    Error e = ErrorOf(call);
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(std::string(e.what()), "cannot use cuda(0): CUDA is not available (" + reason + ")");
  }
  // Nothing could be handed out, so there is nothing to pool or trim.
  EXPECT_EQ(api.PooledWorkspaceBytes(), 0);
  api.TrimWorkspacePool();
}

TEST(CUDADevice, OnlyCUDADevicesAndTheHostAreAccepted) {
  CUDADeviceAPI& api = Api();
  Error e = ErrorOf([&] { api.SetDevice(kHost); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()), "the cuda device API cannot use cpu(0)");
  std::vector<uint8_t> a(8), b(8);
  e = ErrorOf([&] { api.CopyDataFromTo(a.data(), 0, b.data(), 0, 8, kHost, kHost, nullptr); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("neither is a CUDA device"));
  e = ErrorOf([&] {
    api.CopyDataFromTo(a.data(), 0, b.data(), 0, 8, Device{DeviceType::kCPU, 1}, kCUDA0, nullptr);
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("must be a CUDA device or the host, cpu(0)"));
}

TEST(CUDADevice, AttributesAreSane) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  for (DeviceAttr attr : AllDeviceAttrs())
    std::cout << "cuda(0) " << DeviceAttrName(attr) << " = " << api.GetAttr(kCUDA0, attr).ToString()
              << "\n";
  EXPECT_FALSE(api.GetAttr(kCUDA0, DeviceAttr::kName).AsString().empty());
  EXPECT_EQ(api.GetAttr(kCUDA0, DeviceAttr::kWarpSize).AsInt(), 32);
  const std::string cc = api.GetAttr(kCUDA0, DeviceAttr::kComputeCapability).AsString();
  ASSERT_NE(cc.find('.'), std::string::npos) << cc;
  const int major = std::stoi(cc.substr(0, cc.find('.')));
  const int minor = std::stoi(cc.substr(cc.find('.') + 1));
  EXPECT_GE(major * 10 + minor, 70) << cc;
  const int64_t total = api.GetAttr(kCUDA0, DeviceAttr::kTotalMemory).AsInt();
  EXPECT_GT(total, int64_t{1} << 30);
  const int64_t free = api.GetAttr(kCUDA0, DeviceAttr::kFreeMemory).AsInt();
  EXPECT_GT(free, 0);
  EXPECT_LE(free, total);
  EXPECT_GE(api.GetAttr(kCUDA0, DeviceAttr::kMaxThreadsPerBlock).AsInt(), 512);
  EXPECT_GE(api.GetAttr(kCUDA0, DeviceAttr::kSharedMemoryPerBlock).AsInt(), 48 * 1024);
  EXPECT_GT(api.GetAttr(kCUDA0, DeviceAttr::kMultiProcessorCount).AsInt(), 0);
  EXPECT_GE(api.GetAttr(kCUDA0, DeviceAttr::kDriverVersion).AsInt(), 11000);
  EXPECT_TRUE(api.GetAttr(kCUDA0, DeviceAttr::kThreadCount).is_none());
}

TEST(CUDADevice, AlignsTo256AndBeyondByOverAllocating) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  for (int64_t alignment : {1, 64, 256, 512, 4096, 1 << 21}) {
    for (int64_t n : {0, 1, 1000, 3 << 20}) {
      SCOPED_TRACE(testing::Message() << "alignment " << alignment << ", size " << n);
      void* p = api.AllocDataSpace(kCUDA0, n, alignment);
      EXPECT_TRUE(IsAligned(p, std::max<int64_t>(alignment, 256)));
      // Every byte from the aligned start is usable.
      std::vector<uint8_t> data = Pattern(n, 7), back(n);
      api.CopyDataFromTo(data.data(), 0, p, 0, n, kHost, kCUDA0, nullptr);
      api.CopyDataFromTo(p, 0, back.data(), 0, n, kCUDA0, kHost, nullptr);
      EXPECT_EQ(back, data);
      api.FreeDataSpace(kCUDA0, p);
    }
  }
}

TEST(CUDADevice, AllocatesOneGiB) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  const int64_t n = int64_t{1} << 30;
  void* p = api.AllocDataSpace(kCUDA0, n);
  ASSERT_NE(p, nullptr);
  // The first and the last 4 MiB hold what was written there.
  const int64_t chunk = 4 << 20;
  std::vector<uint8_t> head = Pattern(chunk, 8), tail = Pattern(chunk, 9), back(chunk);
  api.CopyDataFromTo(head.data(), 0, p, 0, chunk, kHost, kCUDA0, nullptr);
  api.CopyDataFromTo(tail.data(), 0, p, n - chunk, chunk, kHost, kCUDA0, nullptr);
  api.CopyDataFromTo(p, 0, back.data(), 0, chunk, kCUDA0, kHost, nullptr);
  EXPECT_EQ(back, head);
  api.CopyDataFromTo(p, n - chunk, back.data(), 0, chunk, kCUDA0, kHost, nullptr);
  EXPECT_EQ(back, tail);
  api.FreeDataSpace(kCUDA0, p);
}

// host -> A on stream 1; stream 2 waits, copies A -> B; stream 1 waits, copies B -> host. Every
// copy is at an offset, and 64 MiB is large enough that a missing wait reads stale bytes.
TEST(CUDADevice, CopiesAtOffsetsAcrossTwoStreams) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  const int64_t n = 64 << 20;
  std::vector<uint8_t> data = Pattern(n, 10), zeros(n + 4096, 0), back(n + 64, 0xee);
  void* a = api.AllocDataSpace(kCUDA0, n + 4096);
  void* b = api.AllocDataSpace(kCUDA0, n + 4096);
  api.CopyDataFromTo(zeros.data(), 0, a, 0, n + 4096, kHost, kCUDA0, nullptr);
  api.CopyDataFromTo(zeros.data(), 0, b, 0, n + 4096, kHost, kCUDA0, nullptr);
  StreamHandle s1 = api.CreateStream(kCUDA0);
  StreamHandle s2 = api.CreateStream(kCUDA0);
  ASSERT_NE(s1, s2);

  api.CopyDataFromTo(data.data(), 0, a, 100, n, kHost, kCUDA0, s1);
  api.SyncStreamFromTo(kCUDA0, s1, s2);
  api.CopyDataFromTo(a, 100, b, 3000, n, kCUDA0, kCUDA0, s2);
  api.SyncStreamFromTo(kCUDA0, s2, s1);
  api.CopyDataFromTo(b, 3000, back.data(), 32, n, kCUDA0, kHost, s1);
  api.StreamSync(kCUDA0, s1);

  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 32));
  EXPECT_EQ(back[31], 0xee);
  EXPECT_EQ(back[n + 32], 0xee);
  // The bytes in front of the offsets were not touched.
  std::vector<uint8_t> front(3000);
  api.CopyDataFromTo(b, 0, front.data(), 0, 3000, kCUDA0, kHost, nullptr);
  EXPECT_EQ(front, std::vector<uint8_t>(3000, 0));

  api.FreeStream(kCUDA0, s1);
  api.FreeStream(kCUDA0, s2);
  api.FreeDataSpace(kCUDA0, a);
  api.FreeDataSpace(kCUDA0, b);
}

// A kernel written in PTX (ptxas accepts it for sm_80 and sm_90): data[i] += 1 for i < n.
constexpr char kAddOnePtx[] = R"(.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 data, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [data];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r6, [%rd4];
  add.s32 %r7, %r6, 1;
  st.global.u32 [%rd4], %r7;
DONE:
  ret;
}
)";

TEST(CUDADevice, LoadsPtxAndLaunchesItsKernelOnAStream) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  void* module = api.LoadModule(kCUDA0, kAddOnePtx, "");
  void* kernel = api.GetKernel(kCUDA0, module, "add_one");
  EXPECT_EQ(ErrorOf([&] { api.GetKernel(kCUDA0, module, "no_such"); }).code(),
            ErrorCode::kNotFound);
  const unsigned n = 1000;  // not a multiple of the block: the last block's tail is idle
  std::vector<int32_t> host(n + 24);
  for (unsigned i = 0; i < host.size(); ++i) host[i] = static_cast<int32_t>(i * 7);
  void* data = api.AllocDataSpace(kCUDA0, static_cast<int64_t>(host.size() * 4));
  api.CopyDataFromTo(host.data(), 0, data, 0, static_cast<int64_t>(host.size() * 4), kHost, kCUDA0,
                     nullptr);
  StreamHandle stream = api.CreateStream(kCUDA0);
  unsigned count = n;
  void* args[] = {&data, &count};
  api.LaunchKernel(kCUDA0, kernel, (n + 255) / 256, 256, args, stream);
  EXPECT_EQ(ErrorOf([&] { api.LaunchKernel(kCUDA0, kernel, 0, 256, args, stream); }).code(),
            ErrorCode::kInvalidArgument);
  std::vector<int32_t> back(host.size());
  api.CopyDataFromTo(data, 0, back.data(), 0, static_cast<int64_t>(back.size() * 4), kCUDA0, kHost,
                     stream);
  api.StreamSync(kCUDA0, stream);
  for (unsigned i = 0; i < host.size(); ++i)
    ASSERT_EQ(back[i], host[i] + (i < n ? 1 : 0)) << "element " << i;
  api.FreeStream(kCUDA0, stream);
  api.FreeDataSpace(kCUDA0, data);
  api.UnloadModule(kCUDA0, module);
  Error bad = ErrorOf([&] { api.LoadModule(kCUDA0, ".version 7.0\n.target sm_80\nnot ptx", ""); });
  EXPECT_EQ(bad.code(), ErrorCode::kCompileError) << bad.what();
}

TEST(CUDADevice, WorkspacePoolKeepsAndTrimsBuffers) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  api.TrimWorkspacePool();
  EXPECT_EQ(api.PooledWorkspaceBytes(), 0);
  void* w = api.AllocWorkspace(kCUDA0, 5000);
  EXPECT_TRUE(IsAligned(w, 256));
  api.FreeWorkspace(kCUDA0, w);
  EXPECT_GE(api.PooledWorkspaceBytes(), 5000);
  EXPECT_EQ(api.AllocWorkspace(kCUDA0, 5000), w);
  EXPECT_EQ(api.PooledWorkspaceBytes(), 0);
  api.FreeWorkspace(kCUDA0, w);
  api.TrimWorkspacePool();
  EXPECT_EQ(api.PooledWorkspaceBytes(), 0);
}

TEST(CUDADevice, ForeignAndDoubleFreesAreErrors) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  void* p = api.AllocDataSpace(kCUDA0, 64);
  api.FreeDataSpace(kCUDA0, p);
  Error e = ErrorOf([&] { api.FreeDataSpace(kCUDA0, p); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("as data space of cuda(0)"));
  EXPECT_THAT(e.what(), HasSubstr("freed already"));
  void* w = api.AllocWorkspace(kCUDA0, 64);
  e = ErrorOf([&] { api.FreeDataSpace(kCUDA0, w); });  // a workspace is not data space
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  api.FreeWorkspace(kCUDA0, w);
  e = ErrorOf([&] { api.FreeWorkspace(kCUDA0, w); });
  EXPECT_THAT(e.what(), HasSubstr("as a workspace of cuda(0)"));
}

TEST(CUDADevice, OutOfMemorySaysHowMuchIsFree) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  const int64_t total = api.GetAttr(kCUDA0, DeviceAttr::kTotalMemory).AsInt();
  // More than the device has: refused before the driver is asked.
  Error e = ErrorOf([&] { api.AllocDataSpace(kCUDA0, total + 1); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(e.what(), HasSubstr(StrCat("out of memory: cannot allocate data space of ", total + 1,
                                         " bytes (alignment 256) on cuda(0)")));
  EXPECT_THAT(e.what(), HasSubstr(StrCat(" bytes free of ", total)));
  // Almost all of it (more than is free): the driver's answer becomes the same error.
  e = ErrorOf([&] { api.AllocDataSpace(kCUDA0, total - 1024); });
  EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  EXPECT_THAT(e.what(), HasSubstr("out of memory: cannot allocate data space"));
}

TEST(CUDADevice, StreamsAreCheckedAgainstTheirDevice) {
  SKIP_WITHOUT_GPU();
  CUDADeviceAPI& api = Api();
  StreamHandle s = api.CreateStream(kCUDA0);
  api.SetStream(kCUDA0, s);
  EXPECT_EQ(api.GetCurrentStream(kCUDA0), s);
  api.SetStream(kCUDA0, nullptr);
  api.FreeStream(kCUDA0, s);
  Error e = ErrorOf([&] { api.StreamSync(kCUDA0, s); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("cannot synchronize unknown stream"));
  e = ErrorOf([&] { api.FreeStream(kCUDA0, s); });
  EXPECT_THAT(e.what(), HasSubstr("cannot free unknown stream"));
  std::vector<uint8_t> host(8);
  e = ErrorOf([&] { api.CopyDataFromTo(host.data(), 0, host.data(), 0, 8, kHost, kCUDA0, s); });
  EXPECT_THAT(e.what(), HasSubstr("cannot copy on unknown stream"));
}

// A copy between two GPUs goes through cuMemcpyPeerAsync on the destination's stream.
TEST(CUDADevice, CopiesBetweenTwoDevices) {
  SKIP_WITHOUT_GPU();
  const Device cuda1{DeviceType::kCUDA, 1};
  CUDADeviceAPI& api = Api();
  if (api.GetAttr(cuda1, DeviceAttr::kExists).AsInt() == 0)
    GTEST_SKIP() << "needs two CUDA devices; this machine has one";
  const int64_t n = 1 << 20;
  std::vector<uint8_t> data = Pattern(n, 11), back(n);
  void* a = api.AllocDataSpace(kCUDA0, n);
  void* b = api.AllocDataSpace(cuda1, n);
  StreamHandle s = api.CreateStream(cuda1);
  api.CopyDataFromTo(data.data(), 0, a, 0, n, kHost, kCUDA0, nullptr);
  api.CopyDataFromTo(a, 0, b, 0, n, kCUDA0, cuda1, s);
  api.CopyDataFromTo(b, 0, back.data(), 0, n, cuda1, kHost, s);
  api.StreamSync(cuda1, s);
  EXPECT_EQ(back, data);
  api.FreeStream(cuda1, s);
  api.FreeDataSpace(kCUDA0, a);
  api.FreeDataSpace(cuda1, b);
}

}  // namespace
}  // namespace kiln
