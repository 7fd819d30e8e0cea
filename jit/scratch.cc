// kiln_scratch_alloc / kiln_scratch_free: the memory of kernel-local buffers.
//
// Why not aligned_alloc per call: a kernel's large local buffers (a padded input, Winograd's
// transformed tiles, up to megabytes) were allocated and freed on every call. glibc serves
// large blocks from fresh mappings or trims them back, so a call could fault its buffers'
// pages in again, and a first call at a larger shape always does; a page fault costs ~10 us
// on the VMs we measure on (a generic 3x3 conv at 128x128: 560 us a call against 16 us at
// 97x61 before this). Here each thread keeps one stack of mapped pages (devices/host_pages.h:
// huge pages where the system offers them), so a steady-state call allocates nothing and
// faults nothing.
//
// Threading: everything is thread_local; a block is freed on the thread that allocated it
// (kernels allocate and free within one function, and a parallel chunk runs on one thread).
// Ownership: the thread's stack lives until the thread ends; it holds the most its kernels
// ever needed at once (per thread: the run's caller and the engine's workers).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "devices/host_pages.h"
#include "jit/runtime.h"

namespace kiln {
namespace {

constexpr size_t kBlockAlign = 64;

// The least headroom of a thread's stack (HostPages::Grow's min_ahead). A run arena's 4 MiB
// would map every thread's first stack, even for 64 bytes, as 2 MiB pages and fault the first
// one in before the kernel goes on: here 0.3-22 ms (a fresh huge page on this VM), paid by the
// first call that allocates on each thread (the encoder's generic softmax on a worker that had
// never allocated: its new shape's first call 4-5 ms against a warm 0.07). Small stacks stay on
// small pages, the kernel faulting only what it uses and the background thread the rest.
constexpr size_t kScratchAhead = size_t{256} << 10;

struct ScratchStack {
  HostPages pages;
  size_t top = 0;  // bytes in use from pages.data; a multiple of kBlockAlign
  // Most bytes wanted at once so far: what the stack grows to when nothing is live.
  size_t wanted = 0;
  // The blocks given out, in allocation order (so by offset). A freed block stays until the
  // blocks above it are freed too: frees may come in any order.
  struct Block {
    size_t offset;
    bool freed;
  };
  std::vector<Block> blocks;

  ~ScratchStack() { HostPages::Unmap(pages); }

  bool Owns(const void* p) const {
    auto* b = static_cast<const std::byte*>(p);
    return pages.data && b >= pages.data && b < pages.data + pages.capacity;
  }

  void* Alloc(size_t bytes) {
    const size_t size = (std::max<size_t>(bytes, 1) + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
    wanted = std::max(wanted, top + size);
    // Live blocks cannot move, so the stack grows only when none is live.
    if (blocks.empty() && pages.capacity < wanted) {
      try {
        HostPages::Grow(pages, wanted, kScratchAhead);
      } catch (...) {  // no mapping to be had: this call takes the heap
      }
    }
    if (top + size > pages.capacity) return std::aligned_alloc(kBlockAlign, size);
    blocks.push_back({top, false});
    void* block = pages.data + top;
    top += size;
    return block;
  }

  void Free(void* block) {
    if (!Owns(block)) {
      std::free(block);
      return;
    }
    const size_t offset = static_cast<size_t>(static_cast<std::byte*>(block) - pages.data);
    for (size_t i = blocks.size(); i-- > 0;)
      if (blocks[i].offset == offset) {
        blocks[i].freed = true;
        break;
      }
    while (!blocks.empty() && blocks.back().freed) {
      top = blocks.back().offset;
      blocks.pop_back();
    }
  }
};

thread_local ScratchStack tls_scratch;

}  // namespace

void ReserveThreadScratch() {
  ScratchStack& s = tls_scratch;
  if (s.pages.data) return;
  try {
    HostPages::Grow(s.pages, 1, kScratchAhead);  // all but the first page faulted in behind
  } catch (...) {                                // no mapping now: the first allocation tries again
  }
}

size_t ThreadScratchBytes() {
  return tls_scratch.pages.capacity;
}

}  // namespace kiln

extern "C" void* kiln_scratch_alloc(int64_t bytes) {
  return kiln::tls_scratch.Alloc(static_cast<size_t>(std::max<int64_t>(bytes, 0)));
}

extern "C" void kiln_scratch_free(void* block) {
  if (block) kiln::tls_scratch.Free(block);
}
