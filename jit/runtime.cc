#include "jit/runtime.h"

#include "jit/tbb_handoff.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

namespace {

// Set while this thread runs a chunk of a parallel loop: a parallel loop nested in it runs
// serially there (the team is busy with the outer loop, and Run is not re-entrant).
thread_local bool in_chunk = false;

void RunChunk(void (*body)(int64_t, int64_t, void*), int64_t begin, int64_t end, void* closure) {
  // Restored however body ends (generated bodies do not throw; a C++ one in a test may).
  struct Restore {
    bool outer;
    ~Restore() { in_chunk = outer; }
  } restore{in_chunk};
  in_chunk = true;
  body(begin, end, closure);
}

}  // namespace

// The job slot. `ticket` packs the job's epoch (high 48 bits, never reused while the state
// lives: a state serves many teams) and its chunk count (16 bits); chunk i
// belongs to team member i (the owner is 0) and is run by whoever claims it first: its owner
// as soon as it looks, another member once it has run its own. So a loop cut the same way as
// the one before gives each thread the part it wrote (and has in its cache), and a member that
// never starts only leaves its chunk to the others. Claiming chunk i for epoch e moves
// claimed[i] from below e to e with a compare-exchange; a job's fields are read only after a
// claim in its epoch, and the owner rewrites them for the next job only once `done` says every
// chunk of this one has finished, so they never change under a reader. The owner publishes a
// job by writing the fields and then the ticket (release); members read the ticket (acquire).
struct ParallelTeam::State {
  explicit State(int n) : threads(n), claimed(n) {}

  // Written by one side and polled by the other, each on a cache line of its own: the
  // members poll `ticket` and `ended`, the owner polls `done`, which the members bump.
  struct alignas(64) Claim {
    std::atomic<uint64_t> epoch{0};  // the last epoch the chunk was claimed in
  };
  const int threads;
  std::vector<Claim> claimed;
  alignas(64) std::atomic<uint64_t> ticket{0};
  std::atomic<bool> ended{false};
  alignas(64) std::atomic<int64_t> done{0};
  // The job (written by the owner between jobs, read-only while it runs).
  alignas(64) int64_t begin = 0;
  int64_t size = 0, rest = 0;
  void (*body)(int64_t, int64_t, void*) = nullptr;
  void* closure = nullptr;
  // Atomic: a helper of an earlier team of this state may read it while a new team sets it.
  std::atomic<std::thread::id> owner;
  uint64_t epoch = 0;  // the owner's; handed over with the state through the pool's mutex

  // Member `me` runs its own chunk of the current job, then any unclaimed one; false if it
  // found none.
  bool Work(int me) {
    const uint64_t t = ticket.load(std::memory_order_acquire);
    const uint64_t e = t >> 16;
    const int chunks = static_cast<int>(t & 0xffff);
    bool any = false;
    for (int k = 0; k < chunks; ++k) {
      const int i = (me + k) % chunks;
      std::atomic<uint64_t>& c = claimed[i].epoch;
      uint64_t seen = c.load(std::memory_order_acquire);
      if (seen >= e || !c.compare_exchange_strong(seen, e, std::memory_order_acq_rel)) continue;
      const int64_t first = begin + i * size + std::min<int64_t>(i, rest);
      RunChunk(body, first, first + size + (i < rest ? 1 : 0), closure);
      done.fetch_add(1, std::memory_order_release);
      any = true;
    }
    return any;
  }

  void Run(int64_t b, int64_t e, void (*f)(int64_t, int64_t, void*), void* c) {
    const int64_t n = e - b;
    const int64_t chunks = std::min<int64_t>({n, threads, 0xffff});
    begin = b;
    size = n / chunks;
    rest = n % chunks;
    body = f;
    closure = c;
    done.store(0, std::memory_order_relaxed);
    ++epoch;
    ticket.store((epoch << 16) | static_cast<uint64_t>(chunks), std::memory_order_release);
    Work(0);
    while (done.load(std::memory_order_acquire) < chunks) Pause();
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  // Member `me` (1 to threads - 1): runs chunks as they are published until the team ends. One
  // that a oneTBB wait on the owner's own thread picks up returns at once (it would keep the
  // owner spinning forever).
  static void Help(const std::shared_ptr<State>& s, int me) {
    if (std::this_thread::get_id() == s->owner.load(std::memory_order_acquire)) return;
    while (!s->ended.load(std::memory_order_acquire))
      if (!s->Work(me)) Pause();
  }
};

namespace {
thread_local ParallelTeam::State* current_team = nullptr;
}  // namespace

struct ParallelTeamPool::Free {
  std::mutex mu;
  std::vector<std::shared_ptr<ParallelTeam::State>> states;  // capacity only grows
};

ParallelTeamPool::ParallelTeamPool() : free_(std::make_unique<Free>()) {}
ParallelTeamPool::~ParallelTeamPool() = default;

std::shared_ptr<ParallelTeam::State> ParallelTeamPool::Acquire(int threads) {
  {
    std::lock_guard<std::mutex> lock(free_->mu);
    for (size_t i = free_->states.size(); i-- > 0;) {
      if (free_->states[i]->threads != threads) continue;
      std::shared_ptr<ParallelTeam::State> s = std::move(free_->states[i]);
      free_->states.erase(free_->states.begin() + static_cast<std::ptrdiff_t>(i));
      return s;
    }
  }
  return std::make_shared<ParallelTeam::State>(threads);
}

void ParallelTeamPool::Release(std::shared_ptr<ParallelTeam::State> s) {
  std::lock_guard<std::mutex> lock(free_->mu);
  free_->states.push_back(std::move(s));
}

ParallelTeam::ParallelTeam(ParallelTeamPool& pool, int threads)
    : pool_(pool), state_(pool.Acquire(std::max(1, threads))), previous_(current_team) {
  state_->owner.store(std::this_thread::get_id(), std::memory_order_release);
  state_->ended.store(false, std::memory_order_release);
  for (int i = 1; i < state_->threads; ++i)
    tbb::this_task_arena::enqueue([s = state_, i] { State::Help(s, i); });
  current_team = state_.get();
}

ParallelTeam::~ParallelTeam() {
  state_->ended.store(true, std::memory_order_release);
  current_team = previous_;
  pool_.Release(std::move(state_));
}

}  // namespace kiln

extern "C" void kiln_parallel_for(int64_t begin, int64_t end, void (*body)(int64_t, int64_t, void*),
                                  void* closure) {
  if (end <= begin) return;
  // One iteration, or a loop inside a chunk of another: here, serially. A lone iteration is
  // not a chunk, so parallel loops inside it still take the threads.
  if (end - begin == 1 || kiln::in_chunk) {
    body(begin, end, closure);
    return;
  }
  if (kiln::ParallelTeam::State* team = kiln::current_team) {
    if (team->threads > 1)
      team->Run(begin, end, body, closure);
    else
      body(begin, end, closure);  // a one-thread run: no chunks to hand out
    return;
  }
  kiln::TbbHandoff handoff;
  tbb::parallel_for(tbb::blocked_range<int64_t>(begin, end),
                    handoff.Wrap([&](const tbb::blocked_range<int64_t>& r) {
                      kiln::RunChunk(body, r.begin(), r.end(), closure);
                    }),
                    tbb::static_partitioner());
  handoff.Joined();
}
