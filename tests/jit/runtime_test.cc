// kiln_parallel_for with and without a ParallelTeam: every index of every loop runs exactly
// once, loops run one after another (each sees the previous one's writes), the chunks are
// those of a static split, and a team whose helpers never start (an arena of one thread)
// still finishes every loop on its owner.
#include <gtest/gtest.h>

#include <tbb/task_arena.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "jit/runtime.h"

namespace kiln {
namespace {

struct Loop {
  std::vector<std::atomic<int>>* hits;
  std::vector<int>* previous;  // what the loop before wrote: read to check the order
  int pass;
  std::atomic<int>* stale;
};

void CountHits(int64_t begin, int64_t end, void* closure) {
  Loop* l = static_cast<Loop*>(closure);
  for (int64_t i = begin; i < end; ++i) {
    (*l->hits)[i].fetch_add(1);
    if ((*l->previous)[i] != l->pass - 1) l->stale->fetch_add(1);
    (*l->previous)[i] = l->pass;
  }
}

// Runs `loops` loops over ranges of every length up to 200 elements, checking each.
void RunLoops(int loops) {
  std::vector<int> previous(256, 0);
  std::atomic<int> stale{0};
  for (int pass = 1; pass <= loops; ++pass) {
    const int64_t n = pass % 200 + 1;  // 1 to 200, so ranges below the team size too
    std::vector<std::atomic<int>> hits(256);
    // Indices past n keep last pass's mark: advance them as the loop would have.
    for (int64_t i = n; i < 256; ++i) previous[i] = pass;
    Loop l{&hits, &previous, pass, &stale};
    kiln_parallel_for(0, n, CountHits, &l);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "pass " << pass << " i " << i;
  }
  EXPECT_EQ(stale.load(), 0);
}

TEST(ParallelTeam, EveryIndexOnceAndLoopsInOrder) {
  for (int threads : {2, 3, 4}) {
    SCOPED_TRACE(threads);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      ParallelTeamPool pool;
      for (int team_run = 0; team_run < 3; ++team_run) {  // a state reused by later teams
        ParallelTeam team(pool, threads);
        RunLoops(700);
      }
    });
  }
}

TEST(ParallelTeam, HelpersThatNeverStartLeaveTheWorkToTheOwner) {
  tbb::task_arena arena(1);  // no worker slot: the helpers stay queued until the team ends
  arena.execute([&] {
    ParallelTeamPool pool;
    ParallelTeam team(pool, 4);
    RunLoops(300);
  });
}

TEST(ParallelTeam, WithoutATeamOneTbbRunsTheLoop) {
  tbb::task_arena arena(2);
  arena.execute([&] { RunLoops(300); });
}

// The chunks of a loop are a static split: one per thread, sizes differing by at most one.
void RecordChunk(int64_t begin, int64_t end, void* closure) {
  auto* chunks = static_cast<std::vector<std::pair<int64_t, int64_t>>*>(closure);
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  chunks->push_back({begin, end});
}

TEST(ParallelTeam, ChunksAreAStaticSplit) {
  tbb::task_arena arena(3);
  arena.execute([&] {
    ParallelTeamPool pool;
    ParallelTeam team(pool, 3);
    std::vector<std::pair<int64_t, int64_t>> chunks;
    kiln_parallel_for(10, 21, RecordChunk, &chunks);  // 11 elements: 4, 4, 3
    std::set<std::pair<int64_t, int64_t>> got(chunks.begin(), chunks.end());
    EXPECT_EQ(got, (std::set<std::pair<int64_t, int64_t>>{{10, 14}, {14, 18}, {18, 21}}));
  });
}

}  // namespace
}  // namespace kiln
