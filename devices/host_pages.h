// Host memory for the engine's run arenas, mapped straight from the kernel (Linux).
//
// Why not malloc: a run whose shape needs a larger arena than any before touches pages no
// run has touched, and each first touch is a page fault. On the shared VMs we measure on a
// 4 KiB fault costs ~10 us (8 MiB first-touched: 21-28 ms; touched again: 0.03 ms), which
// made the first call of a large new shape 5-8x its warm time. Two things cut it here:
//  - mappings of 2 MiB and more are whole 2 MiB pages, aligned and advised MADV_HUGEPAGE,
//    so where transparent huge pages are on ("madvise" or "always") one fault maps 2 MiB;
//  - growing keeps the pages already mapped (mremap moves them), so a larger shape faults
//    only the part it adds instead of a whole fresh arena; and it at least doubles;
//  - a grown mapping has headroom past what was asked (as much again, 4 to 64 MiB), which a
//    background thread faults in at the lowest priority, so the next larger shapes touch
//    pages that are already there (dynamic_conv's first call at 97 x 61 0.9 -> 0.26 ms).
// The contents are not kept meaningfully across a grow: arenas hold a run's intermediates only.
//
// Not thread-safe per mapping: the caller owns a mapping (ScratchPool hands each to one run).
#pragma once

#include <cstddef>

namespace kiln {

struct HostPages {
  std::byte* data = nullptr;  // page-aligned (2 MiB-aligned from kHugePage up)
  size_t capacity = 0;        // bytes mapped, >= what was asked

  static constexpr size_t kHugePage = size_t{2} << 20;

  // Maps at least `bytes` (> 0). Throws kOutOfMemory naming the size when the kernel refuses.
  static HostPages Map(size_t bytes);
  // Grows `pages` to at least `bytes` plus headroom and twice its capacity, keeping its mapped
  // pages (an empty one is mapped with headroom); the headroom is faulted in on a background
  // thread. On failure throws and leaves `pages` as it was.
  // `min_ahead`: the least headroom (kDefaultAhead for run arenas); below kHugePage in all, a
  // mapping stays on small pages, faulted only as used or by the background thread.
  static constexpr size_t kDefaultAhead = size_t{4} << 20;
  static void Grow(HostPages& pages, size_t bytes, size_t min_ahead = kDefaultAhead);
  // Unmaps (after any background faulting in of it has stopped); no-op for an empty one.
  static void Unmap(HostPages& pages);
};

}  // namespace kiln
