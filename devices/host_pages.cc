#include "devices/host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "ir/error.h"

// Sanitizers track mappings through their mmap/munmap interceptors but not mremap's move of
// pages to a new address, so under them a grow maps afresh (the old pages are dropped).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define KILN_HOST_PAGES_NO_MREMAP 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define KILN_HOST_PAGES_NO_MREMAP 1
#endif
#endif

namespace kiln {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// From kHugeFrom up a mapping is whole huge pages, so none of them is partly outside. Not
// lower: dynamic_conv's first call at 97x61, whose arena turned huge at ~500 KiB, took 3.9-4.1
// ms with 256 KiB here (small pages: 0.9-1.0), and the 224x224 one, turning huge at 2.5 MiB,
// 2.1-2.2 ms with 2 MiB against 5.3-5.5 with 256 KiB (its growth then remapped huge pages).
constexpr size_t kHugeFrom = HostPages::kHugePage;

size_t CapacityFor(size_t bytes) {
  return bytes >= kHugeFrom ? RoundUp(bytes, HostPages::kHugePage) : RoundUp(bytes, PageSize());
}

size_t AlignmentFor(size_t capacity) {
  return capacity >= HostPages::kHugePage ? HostPages::kHugePage : PageSize();
}

[[noreturn]] void ThrowMapFailed(const char* what, size_t bytes, int err) {
  Throw(ErrorCode::kOutOfMemory, "cannot ", what, " a run arena of ", bytes,
        " bytes: ", std::strerror(err));
}

// `capacity` bytes of anonymous memory starting at a multiple of `align` (a power of two,
// at least a page): maps `align` more and unmaps the head and tail around the aligned part.
std::byte* MapAligned(size_t capacity, size_t align, int prot) {
  const size_t extra = align > PageSize() ? align : 0;
  void* raw = mmap(nullptr, capacity + extra, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) ThrowMapFailed("map", capacity, errno);
  auto* base = static_cast<std::byte*>(raw);
  const size_t head =
      RoundUp(reinterpret_cast<uintptr_t>(base), align) - reinterpret_cast<uintptr_t>(base);
  if (head) munmap(base, head);
  if (extra - head) munmap(base + head + capacity, extra - head);
  return base + head;
}

// Failure only means no huge pages (THP off, or an old kernel): the arena works as is.
void AdviseHuge(std::byte* data, size_t capacity) {
  if (capacity >= HostPages::kHugePage) madvise(data, capacity, MADV_HUGEPAGE);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL), which is fine
#endif

// Faults in the first `bytes` of a huge-page mapping in one call, before the run that needs
// them: here 4 MiB take 0.15-0.2 ms so, against 0.3-0.5 ms (at times 5 ms) touched by the
// kernels. Small-page mappings are left to fault on use (the populate saves little there:
// the hypervisor still faults each page on first touch).
void Populate(std::byte* data, size_t capacity, size_t bytes) {
  if (capacity < HostPages::kHugePage) return;
  madvise(data, std::min(capacity, RoundUp(bytes, HostPages::kHugePage)), MADV_POPULATE_WRITE);
}

// `capacity` bytes (a CapacityFor), the first `used` of them populated.
HostPages MapFor(size_t capacity, size_t used) {
  HostPages pages;
  pages.capacity = capacity;
  pages.data = MapAligned(capacity, AlignmentFor(capacity), PROT_READ | PROT_WRITE);
  AdviseHuge(pages.data, capacity);
  Populate(pages.data, capacity, used);
  return pages;
}

}  // namespace

HostPages HostPages::Map(size_t bytes) {
  return MapFor(CapacityFor(bytes), bytes);
}

void HostPages::Grow(HostPages& pages, size_t bytes) {
  if (!pages.data) {
    pages = Map(bytes);
    return;
  }
  // At least double: a run of ever larger shapes then remaps O(log) times (a remap costs
  // 0.1-0.3 ms here), and pages past what runs touch cost address space only.
  const size_t capacity = CapacityFor(std::max(bytes, 2 * pages.capacity));
  // Small pages moved into a huge-page mapping would keep their 2 MiB range on small pages
  // (and its populate on small faults): a mapping that turns huge starts afresh, dropping
  // less than kHugePage of mapped pages.
  bool fresh = pages.capacity < kHugePage && capacity >= kHugePage;
#ifdef KILN_HOST_PAGES_NO_MREMAP
  fresh = true;
#endif
  if (fresh) {
    HostPages grown = MapFor(capacity, bytes);
    Unmap(pages);
    pages = grown;
    return;
  }
  // Reserve an aligned range without memory behind it, then move the mapping onto it:
  // MREMAP_FIXED replaces the reservation, and the pages already faulted in come along.
  std::byte* target = MapAligned(capacity, AlignmentFor(capacity), PROT_NONE);
  void* moved = mremap(pages.data, pages.capacity, capacity, MREMAP_MAYMOVE | MREMAP_FIXED, target);
  if (moved == MAP_FAILED) {
    const int err = errno;
    munmap(target, capacity);
    ThrowMapFailed("grow", capacity, err);
  }
  pages.data = static_cast<std::byte*>(moved);
  pages.capacity = capacity;
  AdviseHuge(pages.data, pages.capacity);
  Populate(pages.data, pages.capacity, bytes);
}

void HostPages::Unmap(HostPages& pages) {
  if (pages.data) munmap(pages.data, pages.capacity);
  pages = HostPages();
}

}  // namespace kiln
