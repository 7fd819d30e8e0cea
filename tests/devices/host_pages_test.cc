// HostPages: sizes and alignment of the mappings run arenas use, growth that at least
// doubles, keeps what is mapped and maps headroom that is faulted in behind, and unmapping.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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

// A smaller least headroom (a kernel scratch stack's): a small first grow stays on small pages
// (nothing past what was asked is faulted in by the caller), with that headroom faulted in
// behind; a grow past a huge page turns huge as before.
TEST(HostPages, SmallHeadroomKeepsSmallGrowsOnSmallPages) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t ahead = size_t{256} << 10;
  HostPages p;
  HostPages::Grow(p, 64, ahead);
  ASSERT_NE(p.data, nullptr);
  EXPECT_GE(p.capacity, 64 + ahead);
  EXPECT_LT(p.capacity, HostPages::kHugePage);
  EXPECT_EQ(p.capacity % page, 0u);
  bool resident = false;
  for (int i = 0; i < 500 && !resident; ++i) {
    resident = Resident(p.data + page, p.data + p.capacity);
    if (!resident) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(resident) << "the headroom of " << p.capacity << " bytes was not faulted in";
  std::memset(p.data, 3, p.capacity);
  HostPages::Grow(p, size_t{3} << 20, ahead);
  EXPECT_GE(p.capacity, size_t{3} << 20);
  EXPECT_EQ(p.capacity % HostPages::kHugePage, 0u);
  p.data[p.capacity - 1] = std::byte{1};
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

// A process that forks while headroom is being faulted in: the child has no populating thread,
// and what the parent's was doing is not the child's to wait for. The child grows and unmaps
// mappings (Forget, Ahead) without hanging, its own pages keep what it writes, and its headroom
// is faulted in by a thread of its own. The parent goes on as before.
TEST(HostPages, AForkedChildGrowsAndUnmapsWithoutHanging) {
  for (int round = 0; round < 5; ++round) {
    HostPages p;
    HostPages::Grow(p, size_t{3} << 20);  // queues headroom: the fork lands while it is faulted
    const pid_t child = fork();
    ASSERT_GE(child, 0) << std::strerror(errno);
    if (child == 0) {
      alarm(20);  // a hang fails the test (killed by SIGALRM) instead of stalling it
      const size_t used = p.capacity + 1;
      HostPages::Grow(p, used);  // Forget of the parent's range, then Ahead
      p.data[used - 1] = std::byte{7};
      bool resident = false;
      for (int i = 0; i < 500 && !resident; ++i) {
        resident = Resident(p.data + p.capacity - 4096, p.data + p.capacity);
        if (!resident) usleep(10000);
      }
      const bool kept = p.data[used - 1] == std::byte{7};
      HostPages::Unmap(p);
      _exit(resident && kept ? 0 : 3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status))
        << "the child did not exit: signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "round " << round;
    HostPages::Grow(p, p.capacity + 1);
    HostPages::Unmap(p);
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
