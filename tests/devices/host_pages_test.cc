// HostPages: sizes and alignment of the mappings run arenas use, growth that at least
// doubles, keeps what is mapped and maps headroom that is faulted in behind, and unmapping.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <cstdint>
#include <cstring>
#include <string>

#include "devices/host_pages.h"
#include "ir/error.h"

namespace kiln {
namespace {

uintptr_t Address(const HostPages& p) {
  return reinterpret_cast<uintptr_t>(p.data);
}

TEST(HostPages, SmallMappingsArePagesLargeOnesWholeHugePages) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t bytes :
       {size_t{1}, size_t{100}, page, page + 1, size_t{200} << 10, size_t{1} << 20}) {
    HostPages p = HostPages::Map(bytes);
    ASSERT_NE(p.data, nullptr) << bytes;
    EXPECT_GE(p.capacity, bytes);
    EXPECT_LT(p.capacity, bytes + page) << bytes;
    EXPECT_EQ(Address(p) % page, 0u);
    std::memset(p.data, 0x5a, p.capacity);  // all of it is writable
    HostPages::Unmap(p);
    EXPECT_EQ(p.data, nullptr);
    EXPECT_EQ(p.capacity, 0u);
  }
  for (size_t bytes : {HostPages::kHugePage, size_t{3} << 20, size_t{5} << 20}) {
    HostPages p = HostPages::Map(bytes);
    EXPECT_GE(p.capacity, bytes);
    EXPECT_EQ(p.capacity % HostPages::kHugePage, 0u) << bytes;
    EXPECT_EQ(Address(p) % HostPages::kHugePage, 0u) << bytes;
    p.data[p.capacity - 1] = std::byte{1};
    HostPages::Unmap(p);
  }
}

TEST(HostPages, GrowAtLeastDoublesAndKeepsTheMapping) {
  HostPages p;
  HostPages::Grow(p, 5000);  // an empty one is mapped
  ASSERT_NE(p.data, nullptr);
  EXPECT_GE(p.capacity, 5000u);
  size_t before = p.capacity;
  std::memset(p.data, 7, before);
  HostPages::Grow(p, before + 1);
  EXPECT_GE(p.capacity, 2 * before);
  p.data[p.capacity - 1] = std::byte{1};
  before = p.capacity;
  HostPages::Grow(p, size_t{5} << 20);  // into huge pages
  EXPECT_GE(p.capacity, size_t{5} << 20);
  EXPECT_EQ(p.capacity % HostPages::kHugePage, 0u);
  EXPECT_EQ(Address(p) % HostPages::kHugePage, 0u);
  std::memset(p.data, 1, p.capacity);
  HostPages::Unmap(p);
  HostPages::Unmap(p);  // a second unmap of an empty one is a no-op
}

// Whether every page of [begin, end) is resident (mincore).
bool Resident(const std::byte* begin, const std::byte* end) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((static_cast<size_t>(end - begin) + page - 1) / page);
  if (mincore(const_cast<std::byte*>(begin), static_cast<size_t>(end - begin), in.data()) != 0)
    return false;
  for (unsigned char c : in)
    if (!(c & 1)) return false;
  return true;
}

// A grown mapping has headroom past what was asked (at least 4 MiB), which a background thread
// faults in: its pages become resident without the caller touching them.
TEST(HostPages, GrowMapsHeadroomAndFaultsItInBehind) {
  HostPages p;
  HostPages::Grow(p, 5000);
  EXPECT_GE(p.capacity, 5000 + (size_t{4} << 20));
  bool resident = false;
  for (int i = 0; i < 500 && !resident; ++i) {
    resident = Resident(p.data + HostPages::kHugePage, p.data + p.capacity);
    if (!resident) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(resident) << "the headroom of " << p.capacity << " bytes was not faulted in";
  HostPages::Unmap(p);
}

// Using, growing and unmapping a mapping while its headroom is being faulted in: what a run
// writes stays (the faulting in leaves present pages alone), and nothing is left touching an
// unmapped range (repeated, so some of them land while the background thread works). A grow
// does not keep contents (under sanitizers it maps afresh), so they are checked before it.
TEST(HostPages, UseGrowAndUnmapWhileFaultingInBehind) {
  for (int round = 0; round < 20; ++round) {
    HostPages p;
    const size_t used = size_t{3} << 20;
    HostPages::Grow(p, used);
    for (size_t i = 0; i < p.capacity; i += 4096) p.data[i] = std::byte{0x3c};
    for (size_t i = 0; i < p.capacity; i += 4096)
      ASSERT_EQ(p.data[i], std::byte{0x3c}) << "round " << round << ", byte " << i;
    HostPages::Grow(p, p.capacity + 1);
    p.data[p.capacity - 1] = std::byte{2};
    HostPages::Unmap(p);
    EXPECT_EQ(p.data, nullptr);
  }
}

TEST(HostPages, AnImpossibleSizeIsAnErrorNamingIt) {
  try {
    HostPages p = HostPages::Map(size_t{1} << 62);
    HostPages::Unmap(p);
    FAIL() << "mapped 2^62 bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("run arena"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
