// Work handed to oneTBB, made visible to ThreadSanitizer.
//
// The system libtbb is not built with ThreadSanitizer, so TSan does not see the synchronization
// inside its task hand-overs and waits: what a functor handed to task_arena::execute,
// parallel_for or parallel_for_each reads on a worker (its captures, the caller's locals they
// refer to) looks racy against the caller's writes before and after. scripts/tsan.supp
// suppresses reports with oneTBB in a stack, but a report whose earlier access has fallen out
// of TSan's history has no stack to match: that is how a compile thread, writing its stack
// after a parallel_for_each whose workers had read it, failed CI once. So the places kiln hands
// work to oneTBB mark the edges themselves (TbbHandoff), and ParallelEach, whose oneTBB
// internals touch the caller's stack after the last functor returns, runs on plain threads in
// a TSan build (then TSan also checks what the concurrent compiles share). Outside a TSan
// build the annotations compile to nothing.
#pragma once

#include <tbb/parallel_for_each.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define KILN_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_UNDER_TSAN 1
#endif
#endif

#ifdef KILN_UNDER_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace kiln {

// One hand-over: construct it before handing work to oneTBB (it releases), wrap every functor
// oneTBB will run with Wrap, and call Joined once the wait for them has returned. The object
// must outlive the functors (they hold its address); thread-safe.
class TbbHandoff {
 public:
  TbbHandoff() { Release(); }
  TbbHandoff(const TbbHandoff&) = delete;
  TbbHandoff& operator=(const TbbHandoff&) = delete;

  template <class F>
  auto Wrap(F f) const {
    // Constrained, so callers that probe the functor's arity (parallel_for_each looks for a
    // feeder argument) see the wrapped functor's.
    return [ this, f = std::move(f) ](
        auto&&... args) requires std::invocable<const F&, decltype(args)...> {
      Acquire();
      ReleaseOnExit after{this};  // released however the body ends
      return f(std::forward<decltype(args)>(args)...);
    };
  }

  void Joined() const { Acquire(); }

 private:
  // A class of its own, not one local to Wrap's lambda: clang 19 does not emit the destructor
  // of a local class in a constrained generic lambda, and the fuzz build (clang) fails to link.
  struct ReleaseOnExit {
    const TbbHandoff* h;
    ~ReleaseOnExit() { h->Release(); }
  };
#ifdef KILN_UNDER_TSAN
  void Acquire() const {
    __tsan_acquire(const_cast<TbbHandoff*>(this));
  }
  void Release() const {
    __tsan_release(const_cast<TbbHandoff*>(this));
  }
#else
  void Acquire() const {}
  void Release() const {}
#endif
};

// Runs f(item) for every item, concurrently on up to the arena's concurrency threads, and
// returns when all have run. f must not throw.
template <class T, class F>
void ParallelEach(tbb::task_arena& arena, std::vector<T>& items, const F& f) {
#ifdef KILN_UNDER_TSAN
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) f(items[i]);
  };
  size_t helpers = std::min<size_t>(static_cast<size_t>(arena.max_concurrency()), items.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < helpers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
#else
  arena.execute([&] { tbb::parallel_for_each(items.begin(), items.end(), f); });
#endif
}

}  // namespace kiln
