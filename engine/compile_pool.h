// CompilePool: the threads that compile specializations in the background (EngineOptions::policy
// kTiered), apart from the threads that run kernels, so a compile never takes more of the
// machine than `threads` cores.
//
// Threading: Submit and WaitIdle may be called from any thread. Jobs run on the pool's own
// threads, in submission order when there is one thread.
//
// Waking: an idle thread polls the queue (a timed wait every kPollInterval) for kPollFor after
// its last job before it sleeps until woken. A Submit wakes a thread only when the queued jobs
// outnumber the polling ones: the run that queues its new shape's specialization then returns
// without a futex wake, which on a 2-vCPU VM was ~25 us of that first call (kiln bench, MLP
// 1-7 rows, first calls 0.15-0.21 -> 0.12-0.17 ms). The destructor drops jobs that have
// not started and waits for the running ones, so a job may use its owner's members as long as
// the owner destroys the pool first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class CompilePool {
 public:
  // Threads start on the first Submit, so an engine that never compiles in the background
  // never has them.
  // `nice`: each pool thread's niceness at least (Linux; 0 leaves the process's). Threads a pool
  // thread creates inherit it: oneTBB's workers, if it starts them (a compile arena of more than
  // one thread), which runs would then share; such a pool should not be niced.
  CompilePool(int threads, int nice = 0);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Queues `job`; it must not throw (the pool's threads have no one to report to).
  void Submit(std::function<void()> job);
  // Blocks until no job is queued or running.
  void WaitIdle();
  // Jobs queued or running.
  size_t pending() const;

 private:
  static constexpr std::chrono::milliseconds kPollInterval{1};
  static constexpr std::chrono::seconds kPollFor{2};

  void Work();

  const int threads_;
  const int nice_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job was queued, or the pool stops
  std::condition_variable idle_;  // the last pending job finished
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  size_t polling_ = 0;   // threads in timed waits: they find a queued job without a wake
  size_t sleeping_ = 0;  // threads that wait to be woken
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kiln
