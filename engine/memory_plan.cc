#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace kiln {

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers) {
  const size_t n = buffers.size();
  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  for (const BufferLifetime& b : buffers) plan.naive_bytes += AlignArena(b.bytes);

  // Largest first; ties by first use, then by index, so the plan does not depend on sort
  // stability.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    if (buffers[a].first_step != buffers[b].first_step)
      return buffers[a].first_step < buffers[b].first_step;
    return a < b;
  });

  std::vector<size_t> placed;  // indices already given an offset
  struct Range {
    size_t begin, end;
  };
  std::vector<Range> busy;
  for (size_t i : order) {
    const size_t size = AlignArena(buffers[i].bytes);
    if (size == 0) continue;
    // The byte ranges of placed buffers that are live at the same time as this one.
    busy.clear();
    for (size_t j : placed)
      if (LifetimesOverlap(buffers[i], buffers[j]))
        busy.push_back({plan.offsets[j], plan.offsets[j] + AlignArena(buffers[j].bytes)});
    std::sort(busy.begin(), busy.end(), [](const Range& a, const Range& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    // Best fit: the smallest gap that holds it; else after the highest busy range.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const Range& r : busy) {
      if (r.begin > cursor) {
        size_t gap = r.begin - cursor;
        if (gap >= size && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, r.end);
    }
    plan.offsets[i] = best != SIZE_MAX ? best : cursor;
    plan.peak_bytes = std::max(plan.peak_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace kiln
