#include "engine/compile_pool.h"

#include <algorithm>
#include <cerrno>

#ifdef __linux__
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace kiln {

CompilePool::CompilePool(int threads, int nice) : threads_(std::max(1, threads)), nice_(nice) {}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void CompilePool::Submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    queue_.push_back(std::move(job));
    if (static_cast<int>(workers_.size()) < threads_) {
      workers_.emplace_back([this] { Work(); });  // a new thread looks at the queue first
      return;
    }
    if (sleeping_ == 0 || queue_.size() <= polling_) return;  // a polling thread takes it
  }
  wake_.notify_one();
}

void CompilePool::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
}

size_t CompilePool::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

void CompilePool::Work() {
#ifdef __linux__
  // Linux's niceness is per thread. Raising it needs no privilege; where it fails the pool
  // runs at the process's priority, which is only slower for runs that share its cores. Never
  // below the thread's own (a process already niced past it stays so).
  if (nice_ > 0) {
    const id_t me = static_cast<id_t>(gettid());
    errno = 0;
    const int own = getpriority(PRIO_PROCESS, me);
    if (errno == 0 && own < nice_) setpriority(PRIO_PROCESS, me, nice_);
  }
#endif
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto idle_since = std::chrono::steady_clock::now();
    while (!stop_ && queue_.empty()) {
      if (std::chrono::steady_clock::now() - idle_since < kPollFor) {
        ++polling_;
        wake_.wait_for(lock, kPollInterval);
        --polling_;
      } else {
        ++sleeping_;
        wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        --sleeping_;
      }
    }
    if (stop_) return;
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

}  // namespace kiln
