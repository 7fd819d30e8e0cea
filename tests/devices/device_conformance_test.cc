// The conformance suite every DeviceAPI runs: allocation, copies in every direction, workspaces,
// stream ordering and waits, attributes and errors. It sees a device only through DeviceAPI and
// host buffers, so a new device joins by one INSTANTIATE line at the bottom; a device that is
// not present on this machine (kExists is 0) skips every test, saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "devices/device_api.h"
#include "ir/error.h"

namespace kiln {
namespace {

using test::ErrorOf;
using ::testing::HasSubstr;

struct DeviceCase {
  std::string api_name;  // registry name, e.g. "device_api.cpu"
  Device device;
};

void PrintTo(const DeviceCase& c, std::ostream* os) {
  *os << c.api_name << " " << c.device;
}

// `n` bytes that differ from one `seed` to the next and are not all one value.
std::vector<uint8_t> Pattern(int64_t n, int seed) {
  std::vector<uint8_t> bytes(n);
  for (int64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 131 + seed * 17 + 7) % 251);
  return bytes;
}

bool IsAligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(alignment) == 0;
}

constexpr Device kHost{DeviceType::kCPU, 0};
constexpr int64_t k64MiB = int64_t{64} << 20;

class DeviceConformance : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    api_ = GetDeviceAPI(GetParam().api_name);
    dev_ = GetParam().device;
    DeviceAttrValue exists = api_->GetAttr(dev_, DeviceAttr::kExists);
    if (exists.is_none() || exists.AsInt() == 0)
      GTEST_SKIP() << GetParam().api_name << " reports no device " << dev_
                   << " on this machine (kExists = " << exists.ToString() << ")";
  }

  void TearDown() override {
    for (StreamHandle s : streams_) api_->FreeStream(dev_, s);
    for (void* p : buffers_) api_->FreeDataSpace(dev_, p);
  }

  // Device memory freed at the end of the test.
  void* Alloc(int64_t nbytes, int64_t alignment = kAllocAlignment) {
    void* p = api_->AllocDataSpace(dev_, nbytes, alignment);
    buffers_.push_back(p);
    return p;
  }
  // A stream freed at the end of the test.
  StreamHandle NewStream() {
    streams_.push_back(api_->CreateStream(dev_));
    return streams_.back();
  }

  void Upload(void* dst, int64_t dst_offset, const std::vector<uint8_t>& bytes,
              StreamHandle stream = nullptr) {
    api_->CopyDataFromTo(bytes.data(), 0, dst, dst_offset, static_cast<int64_t>(bytes.size()),
                         kHost, dev_, stream);
    api_->StreamSync(dev_, stream);
  }
  std::vector<uint8_t> Download(const void* src, int64_t src_offset, int64_t nbytes,
                                StreamHandle stream = nullptr) {
    std::vector<uint8_t> bytes(nbytes);
    api_->CopyDataFromTo(src, src_offset, bytes.data(), 0, nbytes, dev_, kHost, stream);
    api_->StreamSync(dev_, stream);
    return bytes;
  }

  DeviceAPI* api_ = nullptr;
  Device dev_;
  std::vector<void*> buffers_;
  std::vector<StreamHandle> streams_;
};

TEST_P(DeviceConformance, AllocatesEverySizeAndKeepsData) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{63}, int64_t{4097}, k64MiB + 3}) {
    SCOPED_TRACE(n);
    void* p = Alloc(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(IsAligned(p, kAllocAlignment));
    std::vector<uint8_t> data = Pattern(n, static_cast<int>(n % 97));
    Upload(p, 0, data);
    EXPECT_EQ(Download(p, 0, n), data);
  }
}

TEST_P(DeviceConformance, SizeZeroAllocationsAreDistinctAndFreeable) {
  void* a = api_->AllocDataSpace(dev_, 0);
  void* b = api_->AllocDataSpace(dev_, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  // A zero-byte copy touches nothing and needs no pointers at all.
  api_->CopyDataFromTo(nullptr, 0, a, 0, 0, kHost, dev_, nullptr);
  api_->CopyDataFromTo(a, 0, nullptr, 0, 0, dev_, kHost, nullptr);
  api_->FreeDataSpace(dev_, a);
  api_->FreeDataSpace(dev_, b);
}

TEST_P(DeviceConformance, HonoursAlignment) {
  for (int64_t alignment : {1, 8, 64, 128, 4096}) {
    for (int64_t n : {0, 1, 100, 5000}) {
      SCOPED_TRACE(testing::Message() << "alignment " << alignment << ", size " << n);
      void* p = Alloc(n, alignment);
      EXPECT_TRUE(IsAligned(p, std::max(alignment, kAllocAlignment)));
    }
  }
}

TEST_P(DeviceConformance, CopiesInEveryDirectionWithOffsets) {
  const int64_t n = 10007;
  std::vector<uint8_t> data = Pattern(n, 1);
  void* a = Alloc(n + 100);
  void* b = Alloc(n + 100);
  std::vector<uint8_t> zeros(n + 100, 0);
  Upload(a, 0, zeros);
  Upload(b, 0, zeros);

  // host -> device at an offset; the bytes around it stay zero.
  Upload(a, 13, data);
  std::vector<uint8_t> a_bytes = Download(a, 0, n + 100);
  EXPECT_EQ(std::vector<uint8_t>(a_bytes.begin() + 13, a_bytes.begin() + 13 + n), data);
  EXPECT_EQ(std::vector<uint8_t>(a_bytes.begin(), a_bytes.begin() + 13),
            std::vector<uint8_t>(13, 0));
  EXPECT_EQ(std::vector<uint8_t>(a_bytes.begin() + 13 + n, a_bytes.end()),
            std::vector<uint8_t>(100 - 13, 0));

  // device -> device, both offsets non-zero.
  api_->CopyDataFromTo(a, 13 + 5, b, 41, n - 5, dev_, dev_, nullptr);
  api_->StreamSync(dev_, nullptr);
  EXPECT_EQ(Download(b, 41, n - 5), std::vector<uint8_t>(data.begin() + 5, data.end()));
  EXPECT_EQ(Download(b, 0, 41), std::vector<uint8_t>(41, 0));

  // device -> host into the middle of a host buffer.
  std::vector<uint8_t> host(n + 8, 0xee);
  api_->CopyDataFromTo(a, 13, host.data(), 4, n, dev_, kHost, nullptr);
  api_->StreamSync(dev_, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(host.begin() + 4, host.begin() + 4 + n), data);
  EXPECT_EQ(host[3], 0xee);
  EXPECT_EQ(host[n + 4], 0xee);
}

TEST_P(DeviceConformance, CopiesOnAStreamInEveryDirection) {
  StreamHandle s = NewStream();
  const int64_t n = 1 << 20;
  std::vector<uint8_t> data = Pattern(n, 2);
  void* a = Alloc(n);
  void* b = Alloc(n);
  std::vector<uint8_t> back(n, 0);
  api_->CopyDataFromTo(data.data(), 0, a, 0, n, kHost, dev_, s);
  api_->CopyDataFromTo(a, 0, b, 0, n, dev_, dev_, s);
  api_->CopyDataFromTo(b, 0, back.data(), 0, n, dev_, kHost, s);
  api_->StreamSync(dev_, s);
  EXPECT_EQ(back, data);
}

TEST_P(DeviceConformance, WorkspacesAreReusedAndHoldData) {
  void* w = api_->AllocWorkspace(dev_, 3000);
  EXPECT_TRUE(IsAligned(w, kAllocAlignment));
  std::vector<uint8_t> data = Pattern(3000, 3);
  Upload(w, 0, data);
  EXPECT_EQ(Download(w, 0, 3000), data);
  api_->FreeWorkspace(dev_, w);
  // The pool hands the same buffer back for the same size.
  void* again = api_->AllocWorkspace(dev_, 3000);
  EXPECT_EQ(again, w);
  // Two live workspaces never share memory.
  void* other = api_->AllocWorkspace(dev_, 3000);
  EXPECT_NE(other, again);
  void* empty = api_->AllocWorkspace(dev_, 0);
  EXPECT_NE(empty, nullptr);
  api_->FreeWorkspace(dev_, again);
  api_->FreeWorkspace(dev_, other);
  api_->FreeWorkspace(dev_, empty);
}

TEST_P(DeviceConformance, WorkspacesAndDataSpaceAreThreadSafe) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<void*> held;
      for (int i = 0; i < 200; ++i) {
        int64_t n = (i * 977 + t * 131) % 20000;
        held.push_back(api_->AllocWorkspace(dev_, n));
        void* d = api_->AllocDataSpace(dev_, n);
        api_->FreeDataSpace(dev_, d);
        if (i % 3 == 2) {
          api_->FreeWorkspace(dev_, held.front());
          held.erase(held.begin());
        }
      }
      for (void* p : held) api_->FreeWorkspace(dev_, p);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Each round overwrites the whole buffer with pattern i, then copies out chunk i: every chunk
// of the result shows the pattern of its own round only if the stream ran the copies in order.
TEST_P(DeviceConformance, StreamRunsCopiesInOrder) {
  StreamHandle s = NewStream();
  const int rounds = 64;
  const int64_t chunk = 256, n = rounds * chunk;
  std::vector<std::vector<uint8_t>> patterns;
  for (int i = 0; i < rounds; ++i) patterns.push_back(Pattern(n, 100 + i));
  void* buffer = Alloc(n);
  void* collected = Alloc(n);
  for (int i = 0; i < rounds; ++i) {
    api_->CopyDataFromTo(patterns[i].data(), 0, buffer, 0, n, kHost, dev_, s);
    api_->CopyDataFromTo(buffer, i * chunk, collected, i * chunk, chunk, dev_, dev_, s);
  }
  std::vector<uint8_t> result(n);
  api_->CopyDataFromTo(collected, 0, result.data(), 0, n, dev_, kHost, s);
  api_->StreamSync(dev_, s);
  for (int i = 0; i < rounds; ++i)
    ASSERT_EQ(std::vector<uint8_t>(result.begin() + i * chunk, result.begin() + (i + 1) * chunk),
              std::vector<uint8_t>(patterns[i].begin() + i * chunk,
                                   patterns[i].begin() + (i + 1) * chunk))
        << "chunk " << i;
}

// Stream B reads what a large copy on stream A writes; only B is synchronized. Without the wait
// B would read (some of) the zeros that were there before.
TEST_P(DeviceConformance, StreamWaitsForAnotherStream) {
  StreamHandle a = NewStream();
  StreamHandle b = NewStream();
  std::vector<uint8_t> data = Pattern(k64MiB, 4);
  void* target = Alloc(k64MiB);
  Upload(target, 0, std::vector<uint8_t>(k64MiB, 0));
  std::vector<uint8_t> tail(4096, 0);
  api_->CopyDataFromTo(data.data(), 0, target, 0, k64MiB, kHost, dev_, a);
  api_->SyncStreamFromTo(dev_, a, b);
  api_->CopyDataFromTo(target, k64MiB - 4096, tail.data(), 0, 4096, dev_, kHost, b);
  api_->StreamSync(dev_, b);
  EXPECT_EQ(tail, std::vector<uint8_t>(data.end() - 4096, data.end()));
  api_->StreamSync(dev_, a);
}

TEST_P(DeviceConformance, DefaultStreamCanWaitForAStream) {
  StreamHandle a = NewStream();
  std::vector<uint8_t> data = Pattern(k64MiB, 5);
  void* target = Alloc(k64MiB);
  api_->CopyDataFromTo(data.data(), 0, target, 0, k64MiB, kHost, dev_, a);
  api_->SyncStreamFromTo(dev_, a, nullptr);
  EXPECT_EQ(Download(target, k64MiB - 4096, 4096),
            std::vector<uint8_t>(data.end() - 4096, data.end()));
  // Waiting on the default stream, or a stream on itself, has nothing to wait for.
  api_->SyncStreamFromTo(dev_, nullptr, a);
  api_->SyncStreamFromTo(dev_, a, a);
  api_->StreamSync(dev_, a);
}

TEST_P(DeviceConformance, CurrentStreamIsPerThread) {
  StreamHandle s = NewStream();
  EXPECT_EQ(api_->GetCurrentStream(dev_), nullptr);
  api_->SetStream(dev_, s);
  EXPECT_EQ(api_->GetCurrentStream(dev_), s);
  StreamHandle seen_elsewhere = s;
  std::thread([&] { seen_elsewhere = api_->GetCurrentStream(dev_); }).join();
  EXPECT_EQ(seen_elsewhere, nullptr);
  api_->SetStream(dev_, nullptr);
  EXPECT_EQ(api_->GetCurrentStream(dev_), nullptr);
}

TEST_P(DeviceConformance, AttributesHaveTheirKindOrNone) {
  for (DeviceAttr attr : AllDeviceAttrs()) {
    SCOPED_TRACE(DeviceAttrName(attr));
    DeviceAttrValue v = api_->GetAttr(dev_, attr);
    if (!v.is_none()) {
      EXPECT_EQ(v.kind(), DeviceAttrKind(attr)) << v.ToString();
    }
  }
  EXPECT_EQ(api_->GetAttr(dev_, DeviceAttr::kExists).AsInt(), 1);
  EXPECT_FALSE(api_->GetAttr(dev_, DeviceAttr::kName).AsString().empty());
  DeviceAttrValue total = api_->GetAttr(dev_, DeviceAttr::kTotalMemory);
  if (!total.is_none()) {
    EXPECT_GT(total.AsInt(), 0);
  }
}

TEST_P(DeviceConformance, AbsentDeviceExistsNotAndHasNoAttributes) {
  Device absent{dev_.type, dev_.id + 1000};
  for (DeviceAttr attr : AllDeviceAttrs()) {
    SCOPED_TRACE(DeviceAttrName(attr));
    DeviceAttrValue v = api_->GetAttr(absent, attr);
    if (attr == DeviceAttr::kExists)
      EXPECT_EQ(v, DeviceAttrValue(int64_t{0}));
    else
      EXPECT_TRUE(v.is_none()) << v.ToString();
  }
  Error e = ErrorOf([&] { api_->AllocDataSpace(absent, 16); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr(absent.ToString()));
  EXPECT_THAT(ErrorOf([&] { api_->SetDevice(absent); }).what(), HasSubstr(absent.ToString()));
  api_->SetDevice(dev_);
}

TEST_P(DeviceConformance, BadAllocationArgumentsAreErrors) {
  const std::string dev = dev_.ToString();
  Error e = ErrorOf([&] { api_->AllocDataSpace(dev_, 16, 3); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()), "allocation alignment 3 on " + dev + " is not a power of two");
  EXPECT_EQ(std::string(ErrorOf([&] { api_->AllocDataSpace(dev_, 16, 0); }).what()),
            "allocation alignment 0 on " + dev + " is not a power of two");
  e = ErrorOf([&] { api_->AllocDataSpace(dev_, -1); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()), "cannot allocate a negative size (-1 bytes) on " + dev);
  EXPECT_EQ(std::string(ErrorOf([&] { api_->AllocWorkspace(dev_, -5); }).what()),
            "cannot allocate a workspace of negative size (-5 bytes) on " + dev);
}

TEST_P(DeviceConformance, ExhaustedMemoryIsOutOfMemory) {
  for (bool workspace : {false, true}) {
    Error e = ErrorOf([&] {
      int64_t huge = int64_t{1} << 62;
      if (workspace)
        api_->AllocWorkspace(dev_, huge);
      else
        api_->AllocDataSpace(dev_, huge);
    });
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_THAT(e.what(), HasSubstr("out of memory"));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(int64_t{1} << 62) + " bytes"));
    EXPECT_THAT(e.what(), HasSubstr(dev_.ToString()));
  }
}

TEST_P(DeviceConformance, BadCopyArgumentsAreErrors) {
  void* p = Alloc(64);
  std::vector<uint8_t> host(64);
  const std::string dev = dev_.ToString();
  EXPECT_EQ(std::string(ErrorOf([&] {
                          api_->CopyDataFromTo(host.data(), 0, p, 0, -2, kHost, dev_, nullptr);
                        }).what()),
            "cannot copy a negative size (-2 bytes) from cpu(0) to " + dev);
  EXPECT_EQ(std::string(ErrorOf([&] {
                          api_->CopyDataFromTo(host.data(), -1, p, 0, 8, kHost, dev_, nullptr);
                        }).what()),
            "copy from cpu(0) to " + dev + " has a negative offset (source -1, destination 0)");
  EXPECT_EQ(std::string(ErrorOf([&] {
                          api_->CopyDataFromTo(nullptr, 0, p, 0, 8, kHost, dev_, nullptr);
                        }).what()),
            "copy of 8 bytes from cpu(0) to " + dev + " has a null source");
  EXPECT_EQ(std::string(ErrorOf([&] {
                          api_->CopyDataFromTo(p, 0, nullptr, 0, 8, dev_, kHost, nullptr);
                        }).what()),
            "copy of 8 bytes from " + dev + " to cpu(0) has a null destination");
}

TEST_P(DeviceConformance, FreedStreamIsUnknown) {
  StreamHandle s = api_->CreateStream(dev_);
  api_->FreeStream(dev_, s);
  for (const std::function<void()>& use : std::vector<std::function<void()>>{
           [&] { api_->FreeStream(dev_, s); },
           [&] { api_->StreamSync(dev_, s); },
           [&] { api_->SetStream(dev_, s); },
           [&] { api_->SyncStreamFromTo(dev_, s, nullptr); },
       }) {
    Error e = ErrorOf(use);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("unknown stream"));
    EXPECT_THAT(e.what(), HasSubstr(dev_.ToString()));
  }
  Error e = ErrorOf([&] { api_->FreeStream(dev_, nullptr); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("default stream"));
}

std::string CaseName(const ::testing::TestParamInfo<DeviceCase>& info) {
  return StrCat(DeviceTypeName(info.param.device.type), info.param.device.id);
}

// One line per device kind.
INSTANTIATE_TEST_SUITE_P(CPU, DeviceConformance,
                         ::testing::Values(DeviceCase{"device_api.cpu", {DeviceType::kCPU, 0}}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(CUDA, DeviceConformance,
                         ::testing::Values(DeviceCase{"device_api.cuda", {DeviceType::kCUDA, 0}}),
                         CaseName);

}  // namespace
}  // namespace kiln
