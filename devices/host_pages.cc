#include "devices/host_pages.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

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

// Headroom a grown mapping gets past what was asked, and which the Populator faults in behind
// the run: the next larger shapes find their pages mapped. A first touch costs ~10 us per 4 KiB
// page on the VMs we measure on, a fresh 2 MiB huge page up to 3.2 ms, and a run that grew its
// arena paid them all in its own time (dynamic_conv's first call at 97 x 61: 0.9 ms, 0.26 with
// the pages mapped; its tier-0 p50 0.18). As much again as was asked, from 4 MiB up (the
// arenas of small models stay mapped ahead through several doublings of the image) to 64 MiB
// (a large model's arena is not doubled in memory it may never use). The minimum is the
// caller's (Grow's min_ahead): kernel scratch stacks take less (jit/scratch.cc says why).
constexpr size_t kAheadMax = size_t{64} << 20;

size_t Ahead(size_t bytes, size_t min_ahead) {
  return std::clamp(bytes, std::min(min_ahead, kAheadMax), kAheadMax);
}

// Faults in ranges of mappings on a thread of its own, at the lowest priority, so that runs
// touch pages that are already there. MADV_POPULATE_WRITE allocates the pages that are missing
// and leaves the contents of present ones alone, so it may run while a run uses the range. A
// range must not be unmapped or moved while it runs there: Unmap and Grow call Forget first,
// which drops queued work in the range and waits for the chunk in progress (at most
// kChunkBytes: a fraction of a millisecond of small-page faults, one huge page).
//
// Threading: every member of State under its mu; the worker thread is started on first use,
// detached, and runs for the life of the process (nothing is ever destroyed).
//
// fork: the child has no worker, and the parent's State may be mid-change under a lock some
// other thread held, or name a chunk in progress that nothing will finish (a Forget would wait
// on it forever). So the child starts from a new State (the old one is left as it was, unused)
// and its first Ahead starts a worker of its own; work queued in the parent is dropped, which
// only means the child faults those pages in itself.
class Populator {
 public:
  static Populator& Get() {
    static Populator* p = new Populator();
    return *p;
  }

  void Ahead(std::byte* begin, std::byte* end) {
    if (begin >= end) return;
    State* s = state_;
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->started) {
      std::thread([s] { Loop(s); }).detach();
      s->started = true;
    }
    s->jobs.push_back({begin, end});
    s->work.notify_one();
  }

  void Forget(std::byte* begin, std::byte* end) {
    State* s = state_;
    std::unique_lock<std::mutex> lock(s->mu);
    auto overlaps = [&](std::byte* b, std::byte* e) { return b < end && begin < e; };
    for (Job& j : s->jobs)
      if (overlaps(j.begin, j.end)) j.begin = j.end;  // emptied; the worker skips it
    s->chunk_done.wait(lock, [&] { return !overlaps(s->busy.begin, s->busy.end); });
  }

 private:
  struct Job {
    std::byte* begin;
    std::byte* end;
  };
  struct State {
    std::mutex mu;
    std::condition_variable work;        // a job was queued
    std::condition_variable chunk_done;  // `busy` was cleared
    std::deque<Job> jobs;
    Job busy = {nullptr, nullptr};  // the chunk being populated, outside the lock
    bool started = false;           // a worker runs for this State
  };
  static constexpr size_t kChunkBytes = size_t{256} << 10;

  Populator() {
    pthread_atfork(nullptr, nullptr, [] { Get().state_ = new State(); });
  }

  static void Loop(State* s) {
    // The lowest priority (Linux: niceness is per thread): populating yields to runs.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      s->work.wait(lock, [&] { return !s->jobs.empty(); });
      Job& job = s->jobs.front();
      if (job.begin >= job.end) {
        s->jobs.pop_front();
        continue;
      }
      s->busy = {job.begin, std::min(job.end, job.begin + kChunkBytes)};
      job.begin = s->busy.end;
      lock.unlock();
      madvise(s->busy.begin, static_cast<size_t>(s->busy.end - s->busy.begin), MADV_POPULATE_WRITE);
      lock.lock();
      s->busy = {nullptr, nullptr};
      s->chunk_done.notify_all();
    }
  }

  // Replaced only in a forked child, which has one thread then: read without a lock.
  State* state_ = new State();
};

// The range past `used` of `pages` (to its end), populated in the background.
void PopulateAhead(const HostPages& pages, size_t used) {
  const size_t from = std::min(pages.capacity, RoundUp(used, AlignmentFor(pages.capacity)));
  Populator::Get().Ahead(pages.data + from, pages.data + pages.capacity);
}

void Forget(const HostPages& pages) {
  if (pages.data) Populator::Get().Forget(pages.data, pages.data + pages.capacity);
}

}  // namespace

HostPages HostPages::Map(size_t bytes) {
  return MapFor(CapacityFor(bytes), bytes);
}

void HostPages::Grow(HostPages& pages, size_t bytes, size_t min_ahead) {
  if (!pages.data) {
    pages = MapFor(CapacityFor(bytes + Ahead(bytes, min_ahead)), bytes);
    PopulateAhead(pages, bytes);
    return;
  }
  // At least double: a run of ever larger shapes then remaps O(log) times (a remap costs
  // 0.1-0.3 ms here); and headroom past what was asked (Ahead).
  const size_t capacity =
      CapacityFor(std::max(bytes + Ahead(bytes, min_ahead), 2 * pages.capacity));
  // Small pages moved into a huge-page mapping would keep their 2 MiB range on small pages
  // (and its populate on small faults): a mapping that turns huge starts afresh, dropping
  // less than kHugePage of mapped pages.
  bool fresh = pages.capacity < kHugePage && capacity >= kHugePage;
#ifdef KILN_HOST_PAGES_NO_MREMAP
  fresh = true;
#endif
  Forget(pages);
  if (fresh) {
    HostPages grown = MapFor(capacity, bytes);
    Unmap(pages);
    pages = grown;
    PopulateAhead(pages, bytes);
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
  PopulateAhead(pages, bytes);
}

void HostPages::Unmap(HostPages& pages) {
  Forget(pages);
  if (pages.data) munmap(pages.data, pages.capacity);
  pages = HostPages();
}

}  // namespace kiln
