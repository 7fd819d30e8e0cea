// Runtime helpers that generated kernels call. Their addresses are defined in each JIT's
// symbol table, so kernels never depend on the process exporting them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

extern "C" {
// Splits [begin, end) into chunks and runs body(chunk_begin, chunk_end, closure) for each;
// chunks may run concurrently. Returns when all have finished. The body takes a range rather
// than one index so a chunk is a plain loop that LLVM can vectorize, and costs one indirect
// call per chunk. The range is cut into one equal chunk per thread, not split adaptively:
// kernels run back to back, and there is no splitting or stealing to pay for on small kernels.
// Inside a run that has a ParallelTeam (below) the team's threads take the chunks; elsewhere
// oneTBB's parallel_for (static_partitioner) on the current task arena does. A range of one
// index, and any range met inside a chunk (a parallel loop nested in another), runs on the
// calling thread, serially: so the loops inside a lone iteration take the threads, and nested
// loops never wait on threads busy with the outer one.
void kiln_parallel_for(int64_t begin, int64_t end,
                       void (*body)(int64_t chunk_begin, int64_t chunk_end, void* closure),
                       void* closure);

// Kernel-local buffers too large for the stack (or of symbolic size): `bytes` (> 0) aligned
// to 64, from a per-thread stack of mapped pages that keeps its memory from call to call
// (jit/scratch.cc). kiln_scratch_free takes back any block kiln_scratch_alloc gave on the
// same thread, in any order. Never fails while the heap has room (it falls back to
// aligned_alloc); null only when that fails too.
void* kiln_scratch_alloc(int64_t bytes);
void kiln_scratch_free(void* block);
}

namespace kiln {

// Maps the calling thread's kernel scratch stack (kiln_scratch_alloc) ahead of its first use, with
// its pages faulted in by a background thread, so that the first kernel to allocate on the thread
// does not fault them in itself (~10 us a page on the VMs we measure on). A no-op where the stack
// is mapped already. Engines call it on each thread that runs their kernels (engine.cc).
void ReserveThreadScratch();
// The bytes the calling thread's scratch stack has mapped (0: none yet).
size_t ThreadScratchBytes();

// The threads of one run, kept awake between its parallel loops. oneTBB's workers sleep when
// they find no work for a few microseconds, and waking one costs ~10 us on the machines here
// (a fork-join of two empty chunks: 0.5 us back to back, 2 us 20 us apart, 11.5 us 100 us
// apart), so a model whose parallel loops are separated by serial code (a padding copy, a
// small kernel) paid that per loop. A team enqueues threads - 1 helper tasks on the current
// oneTBB task arena (the engine's, so the thread bound holds), which spin on the team's job
// slot until the team ends; kiln_parallel_for on the constructing thread publishes each loop
// there and runs chunks itself too. A helper that never starts (the arena busy with another
// run) only leaves its chunks to the others: chunks are claimed, not assigned, and the caller
// waits only for claimed chunks. Construct and destroy on the run's thread, inside the arena;
// while a team lives its helpers keep their cores busy.
class ParallelTeamPool;

class ParallelTeam {
 public:
  // Takes its state from `pool` (so a steady-state run allocates nothing).
  ParallelTeam(ParallelTeamPool& pool, int threads);
  ~ParallelTeam();
  ParallelTeam(const ParallelTeam&) = delete;
  ParallelTeam& operator=(const ParallelTeam&) = delete;

  // Shared with the helpers, which may start after their team has ended (they then return)
  // or, the state reused, join a later team of the same pool, which only adds a member.
  struct State;

 private:
  ParallelTeamPool& pool_;
  std::shared_ptr<State> state_;
  State* previous_;  // the thread's team before this one (teams nest only in tests)
};

// Team states for reuse, one per run in flight at most; thread-safe. Owned by an engine.
class ParallelTeamPool {
 public:
  ParallelTeamPool();
  ~ParallelTeamPool();

 private:
  friend class ParallelTeam;
  std::shared_ptr<ParallelTeam::State> Acquire(int threads);
  void Release(std::shared_ptr<ParallelTeam::State> s);
  struct Free;
  std::unique_ptr<Free> free_;
};

}  // namespace kiln
