#include "jit/runtime.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

extern "C" void kiln_parallel_for(int64_t begin, int64_t end, void (*body)(int64_t, int64_t, void*),
                                  void* closure) {
  if (end <= begin) return;
  if (end - begin == 1) {
    body(begin, end, closure);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(begin, end),
      [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end(), closure); },
      tbb::static_partitioner());
}
