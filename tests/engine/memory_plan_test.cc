// PlanMemory on its own: reuse across disjoint lifetimes, no overlap between live buffers, and
// alignment, on hand-made and random lifetimes.
#include <gtest/gtest.h>

#include <random>

#include "engine/memory_plan.h"

namespace kiln {
namespace {

void ExpectNoLiveOverlap(const std::vector<BufferLifetime>& b, const MemoryPlan& p) {
  ASSERT_EQ(p.offsets.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0u);
    EXPECT_LE(p.offsets[i] + b[i].bytes, p.peak_bytes);
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (!LifetimesOverlap(b[i], b[j]) || b[i].bytes == 0 || b[j].bytes == 0) continue;
      EXPECT_TRUE(p.offsets[i] + b[i].bytes <= p.offsets[j] ||
                  p.offsets[j] + b[j].bytes <= p.offsets[i])
          << "buffers " << i << " and " << j << " alias while both are live";
    }
  }
}

TEST(MemoryPlan, ChainReusesEveryOtherBuffer) {
  // a -> b -> c -> d: each buffer lives from its producer to its consumer.
  std::vector<BufferLifetime> b{{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}, {4096, 3, 4}};
  MemoryPlan p = PlanMemory(b);
  ExpectNoLiveOverlap(b, p);
  EXPECT_EQ(p.naive_bytes, 4 * 4096u);
  EXPECT_EQ(p.peak_bytes, 2 * 4096u);
  EXPECT_EQ(p.offsets[0], p.offsets[2]);
  EXPECT_EQ(p.offsets[1], p.offsets[3]);
}

TEST(MemoryPlan, SmallBufferFitsInAGap) {
  std::vector<BufferLifetime> b{{1000, 0, 1}, {3000, 1, 2}, {5000, 2, 3}, {100, 0, 0}};
  MemoryPlan p = PlanMemory(b);
  ExpectNoLiveOverlap(b, p);
  EXPECT_LT(p.peak_bytes, p.naive_bytes);
  EXPECT_EQ(p.naive_bytes, 1024u + 3008u + 5056u + 128u);
}

TEST(MemoryPlan, EmptyAndZeroSized) {
  EXPECT_EQ(PlanMemory({}).peak_bytes, 0u);
  MemoryPlan p = PlanMemory({{0, 0, 5}, {64, 1, 2}});
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.peak_bytes, 64u);
}

TEST(MemoryPlan, RandomLifetimesNeverAliasWhileLive) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> b;
    int n = 1 + rng() % 30;
    for (int i = 0; i < n; ++i) {
      int first = rng() % 20;
      b.push_back({static_cast<size_t>(rng() % 5000), first, first + static_cast<int>(rng() % 6)});
    }
    MemoryPlan p = PlanMemory(b);
    ExpectNoLiveOverlap(b, p);
    EXPECT_LE(p.peak_bytes, p.naive_bytes);
    // At least as large as the bytes live at the busiest step.
    for (int step = 0; step < 26; ++step) {
      size_t live = 0;
      for (const BufferLifetime& x : b)
        if (x.first_step <= step && step <= x.last_step) live += AlignArena(x.bytes);
      EXPECT_GE(p.peak_bytes, live);
    }
  }
}

}  // namespace
}  // namespace kiln
