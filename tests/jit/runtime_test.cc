// kiln_parallel_for with and without a ParallelTeam: every index of every loop runs exactly
// once, loops run one after another (each sees the previous one's writes), the chunks are
// those of a static split, and a team whose helpers never start (an arena of one thread)
// still finishes every loop on its owner; a loop nested in a chunk runs serially there, and
// one inside a loop of a single iteration is split as any other.
#include <gtest/gtest.h>

#include <tbb/task_arena.h>

#include <atomic>
#include <mutex>
#include <optional>
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
  for (int threads : {1, 2, 3, 4}) {
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

// A parallel loop inside a chunk of another (a shape-generic kernel's batch loop around the
// nests of its body) runs serially on the chunk's thread, one chunk; inside a loop of one
// iteration it is cut among the threads as any other.
struct Nested {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> inner_chunks;  // of all inner loops
  std::atomic<int> inner_on_other_thread{0};
  std::vector<std::atomic<int>> hits = std::vector<std::atomic<int>>(64 * 16);
};

struct InnerClosure {
  Nested* n;
  int64_t outer;
  std::thread::id outer_thread;
};

void InnerBody(int64_t begin, int64_t end, void* closure) {
  auto* c = static_cast<InnerClosure*>(closure);
  {
    std::lock_guard<std::mutex> lock(c->n->mu);
    c->n->inner_chunks.push_back({begin, end});
  }
  if (std::this_thread::get_id() != c->outer_thread) c->n->inner_on_other_thread.fetch_add(1);
  for (int64_t i = begin; i < end; ++i) c->n->hits[c->outer * 16 + i].fetch_add(1);
}

void OuterBody(int64_t begin, int64_t end, void* closure) {
  for (int64_t b = begin; b < end; ++b) {
    InnerClosure c{static_cast<Nested*>(closure), b, std::this_thread::get_id()};
    kiln_parallel_for(0, 16, InnerBody, &c);
  }
}

void ExpectEveryIndexOnce(Nested& n, int64_t outer) {
  for (int64_t i = 0; i < outer * 16; ++i) ASSERT_EQ(n.hits[i].load(), 1) << i;
  for (int64_t i = outer * 16; i < 64 * 16; ++i) ASSERT_EQ(n.hits[i].load(), 0) << i;
}

TEST(ParallelTeam, NestedLoopsRunSeriallyInsideAChunk) {
  tbb::task_arena arena(2);
  arena.execute([&] {
    ParallelTeamPool pool;
    ParallelTeam team(pool, 2);
    Nested n;
    kiln_parallel_for(0, 5, OuterBody, &n);
    ExpectEveryIndexOnce(n, 5);
    EXPECT_EQ(n.inner_chunks.size(), 5u);  // one whole chunk per outer iteration
    for (const auto& c : n.inner_chunks) EXPECT_EQ(c, (std::pair<int64_t, int64_t>{0, 16}));
    EXPECT_EQ(n.inner_on_other_thread.load(), 0);
  });
}

TEST(ParallelTeam, LoopsInsideALoneIterationTakeTheThreads) {
  for (bool with_team : {true, false}) {
    SCOPED_TRACE(with_team);
    tbb::task_arena arena(2);
    arena.execute([&] {
      ParallelTeamPool pool;
      std::optional<ParallelTeam> team;
      if (with_team) team.emplace(pool, 2);
      Nested n;
      kiln_parallel_for(
          3, 4, [](int64_t b, int64_t e, void* c) { OuterBody(b - 3, e - 3, c); }, &n);
      ExpectEveryIndexOnce(n, 1);
      std::set<std::pair<int64_t, int64_t>> got(n.inner_chunks.begin(), n.inner_chunks.end());
      EXPECT_EQ(got, (std::set<std::pair<int64_t, int64_t>>{{0, 8}, {8, 16}}));
    });
  }
}

}  // namespace
}  // namespace kiln
