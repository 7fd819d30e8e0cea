// Memory planning for the intermediate buffers of one executable: every intermediate gets an
// offset in a single arena per run, and buffers whose lifetimes do not overlap share space.
//
//   buffers (bytes, [first, last] kernel steps):  a 4096 [0, 1]  b 1024 [1, 2]  c 4096 [2, 3]
//   plan:  a @0, b @4096, c @0  ->  peak 5120 bytes instead of the naive 9216
//
// The algorithm is "greedy by size" (as TFLite's arena planner): buffers are placed largest
// first, each in the smallest gap between already placed buffers whose lifetimes overlap its
// own (else after the last of them). Offsets are multiples of kArenaAlignment, so every buffer
// is as aligned as the arena.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln {

// The arena's alignment and the granularity of every offset (a cache line, and enough for any
// vector load the code generators emit).
inline constexpr size_t kArenaAlignment = 64;

// One intermediate buffer: its size, and the kernel steps that write and read it. The buffer is
// live on [first_step, last_step], both ends included: a kernel's outputs never share space
// with its own inputs (kernel buffers must not overlap).
struct BufferLifetime {
  size_t bytes = 0;
  int first_step = 0;
  int last_step = 0;
};

inline bool LifetimesOverlap(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

struct MemoryPlan {
  std::vector<size_t> offsets;  // per buffer, in the order given; multiples of kArenaAlignment
  size_t peak_bytes = 0;        // the arena size a run needs
  size_t naive_bytes = 0;       // one aligned buffer each, no reuse: what the plan saves against
};

// Plans `buffers`. Buffers of overlapping lifetimes get disjoint byte ranges; zero-byte buffers
// get offset 0 and take no space. Deterministic: equal inputs give equal plans.
MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers);

// Rounds `bytes` up to a multiple of kArenaAlignment.
inline size_t AlignArena(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace kiln
