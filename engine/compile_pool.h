// CompilePool: the threads that compile specializations in the background (EngineOptions::policy
// kTiered), apart from the threads that run kernels, so a compile never takes more of the
// machine than `threads` cores.
//
// Threading: Submit and WaitIdle may be called from any thread. Jobs run on the pool's own
// threads, in submission order when there is one thread. The destructor drops jobs that have
// not started and waits for the running ones, so a job may use its owner's members as long as
// the owner destroys the pool first.
#pragma once

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
  explicit CompilePool(int threads);
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
  void Work();

  const int threads_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job was queued, or the pool stops
  std::condition_variable idle_;  // the last pending job finished
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kiln
