// HostPages: sizes and alignment of the mappings run arenas use, growth that at least
// doubles and keeps what is mapped, and unmapping.
#include <gtest/gtest.h>

#include <unistd.h>

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
