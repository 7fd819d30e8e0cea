// kiln_parallel_for with and without a ParallelTeam: every index of every loop runs exactly
// once, loops run one after another (each sees the previous one's writes), the chunks are
// those of a static split, and a team whose helpers never start (an arena of one thread)
// still finishes every loop on its owner; a loop nested in a chunk runs serially there, and
// one inside a loop of a single iteration is split as any other.
#include <gtest/gtest.h>

#include <tbb/task_arena.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
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

namespace kiln {
namespace {

// kiln_scratch_alloc: 64-byte aligned blocks that never overlap while live, freed in any
// order; a steady state reuses the same memory; blocks larger than the stack while others
// live come from the heap and are freed there; every thread has its own.
TEST(ScratchAlloc, BlocksAreAlignedDisjointAndFreedInAnyOrder) {
  struct Live {
    std::byte* p;
    int64_t n;
  };
  std::vector<Live> live;
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4096}, int64_t{300000}, int64_t{64}}) {
    auto* p = static_cast<std::byte*>(kiln_scratch_alloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    std::memset(p, static_cast<int>(live.size()) + 1, static_cast<size_t>(n));
    live.push_back({p, n});
  }
  // Every block still holds what was written to it: none overlapped a later one.
  for (size_t i = 0; i < live.size(); ++i)
    for (int64_t j = 0; j < live[i].n; ++j)
      ASSERT_EQ(live[i].p[j], std::byte(i + 1)) << "block " << i << " byte " << j;
  // Free the middle ones first, then the rest: a new block must not land on a live one.
  kiln_scratch_free(live[1].p);
  kiln_scratch_free(live[3].p);
  auto* extra = static_cast<std::byte*>(kiln_scratch_alloc(128));
  std::memset(extra, 0xee, 128);
  for (size_t i : {size_t{0}, size_t{2}, size_t{4}})
    for (int64_t j = 0; j < live[i].n; ++j)
      ASSERT_EQ(live[i].p[j], std::byte(i + 1)) << "block " << i << " byte " << j;
  kiln_scratch_free(extra);
  kiln_scratch_free(live[4].p);
  kiln_scratch_free(live[0].p);
  kiln_scratch_free(live[2].p);
  kiln_scratch_free(nullptr);  // as free(nullptr)
}

TEST(ScratchAlloc, ASteadyStateReusesItsMemory) {
  // The first round may grow the stack (a block that did not fit while another lived came from
  // the heap); from then on the same two blocks, one after the other in the stack.
  void* first = nullptr;
  void* second = nullptr;
  for (int round = 0; round < 5; ++round) {
    void* a = kiln_scratch_alloc(100000);
    void* b = kiln_scratch_alloc(50000);
    if (round == 1) {
      first = a;
      second = b;
      EXPECT_EQ(static_cast<std::byte*>(b), static_cast<std::byte*>(a) + 100032);
    } else if (round > 1) {
      EXPECT_EQ(a, first) << "round " << round;
      EXPECT_EQ(b, second) << "round " << round;
    }
    kiln_scratch_free(b);
    kiln_scratch_free(a);
  }
}

// ReserveThreadScratch maps a fresh thread's stack before any kernel allocates: a first block
// and a 200 KB one after it, live together, both come from that stack; the pages it reserved
// are faulted in behind; reserving again changes nothing.
TEST(ScratchAlloc, AReservedStackServesTheFirstBlocks) {
  std::thread([] {
    EXPECT_EQ(ThreadScratchBytes(), 0u);
    ReserveThreadScratch();
    const size_t reserved = ThreadScratchBytes();
    EXPECT_GE(reserved, 200064u);
    auto* a = static_cast<std::byte*>(kiln_scratch_alloc(64));
    auto* b = static_cast<std::byte*>(kiln_scratch_alloc(200000));
    EXPECT_EQ(b, a + 64);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in(200000 / page);
    bool resident = false;
    for (int i = 0; i < 500 && !resident; ++i) {
      ASSERT_EQ(mincore(a + page, in.size() * page, in.data()), 0);
      resident = std::all_of(in.begin(), in.end(), [](unsigned char c) { return c & 1; });
      if (!resident) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(resident) << "the reserved pages were not faulted in";
    std::memset(b, 1, 200000);
    kiln_scratch_free(a);
    kiln_scratch_free(b);
    ReserveThreadScratch();
    EXPECT_EQ(ThreadScratchBytes(), reserved);
    EXPECT_EQ(kiln_scratch_alloc(64), a);
    kiln_scratch_free(a);
  }).join();
}

TEST(ScratchAlloc, ABlockTooLargeWhileOthersLiveComesFromTheHeap) {
  void* small = kiln_scratch_alloc(64);
  // Far beyond anything this thread's stack held: it cannot grow under a live block.
  const int64_t big = int64_t{48} << 20;
  auto* p = static_cast<std::byte*>(kiln_scratch_alloc(big));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  p[0] = std::byte{1};
  p[big - 1] = std::byte{2};
  kiln_scratch_free(p);
  kiln_scratch_free(small);
  // With nothing live the stack grows to what was wanted at once, so this one fits there.
  void* again = kiln_scratch_alloc(big);
  void* next = kiln_scratch_alloc(64);
  EXPECT_EQ(static_cast<std::byte*>(next), static_cast<std::byte*>(again) + big);
  kiln_scratch_free(next);
  kiln_scratch_free(again);
}

TEST(ScratchAlloc, EachThreadHasItsOwnStack) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &bad] {
      for (int round = 0; round < 200; ++round) {
        auto* a = static_cast<unsigned char*>(kiln_scratch_alloc(4000 + t));
        auto* b = static_cast<unsigned char*>(kiln_scratch_alloc(70000));
        std::memset(a, t, 4000 + t);
        std::memset(b, t + 100, 70000);
        for (int j = 0; j < 4000 + t; j += 97) bad += a[j] != t;
        for (int j = 0; j < 70000; j += 97) bad += b[j] != t + 100;
        kiln_scratch_free(round % 2 ? a : b);
        kiln_scratch_free(round % 2 ? b : a);
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace kiln
