// Runtime helpers that generated kernels call. Their addresses are defined in each JIT's
// symbol table, so kernels never depend on the process exporting them.
#pragma once

#include <cstdint>

extern "C" {
// Splits [begin, end) into chunks and runs body(chunk_begin, chunk_end, closure) for each on
// the current oneTBB task arena (the engine's, which bounds the thread count); chunks may run
// concurrently. Returns when all have finished. The body takes a range rather than one index
// so a chunk is a plain loop that LLVM can vectorize, and costs one indirect call per chunk.
// The range is cut into one equal chunk per thread (oneTBB's static_partitioner), not split
// adaptively: kernels run back to back, each thread then gets the same part of every kernel,
// and there is no splitting or stealing to pay for on small kernels (2 threads on this
// project's Zen 5 host: the small CNN at batch 1 75 -> 66 us, the MobileNet-style net
// 1.13 -> 1.07 ms; larger ones unchanged within noise).
void kiln_parallel_for(int64_t begin, int64_t end,
                       void (*body)(int64_t chunk_begin, int64_t chunk_end, void* closure),
                       void* closure);
}
