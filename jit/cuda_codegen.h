// CUDA C from loop IR: the GPU half of code generation (DESIGN.md: loop IR -> CUDA C ->
// NVRTC). Plain text generation, no CUDA headers or libraries: it runs on any machine, and
// NVRTC (jit/nvrtc.h) turns the text into PTX where the toolkit is installed.
//
// How a PrimFunc becomes kernels. Its body is cut into stages at the top level: every
// top-level statement other than an Alloc or Free of a local buffer. Each stage is one
// __global__ function, launched in order on one stream (the stream orders them, so a stage
// sees everything the one before wrote). A stage that is a parallel loop (ParallelizeLoops
// proved its iterations independent) is spread over the grid: a grid-stride loop, so any grid
// size is correct. Any other stage runs on one thread. A top-level local buffer is scratch in
// global memory that the launcher provides (CudaFunction::scratch), shared by the stages and
// their threads: ParallelizeLoops only makes a loop parallel when its iterations write
// disjoint elements and read none that another iteration writes. A local buffer allocated
// inside a stage is private to the thread: an array when its size is a constant of at most
// 16 KiB, else the thread's slice of a per-thread pool that the launcher provides.
//
// Semantics are those of the CPU code generator (jit/llvm_emit_expr.cc), so that both agree
// with the reference kernels: integer arithmetic wraps; x / 0, x // 0 and x % 0 are 0 and
// MIN / -1 wraps; float max/min propagate NaN; float -> int truncates and saturates (NaN -> 0);
// f16 and bf16 are stored as 16 bits and computed in f32, rounded (to nearest even) on store
// and by an explicit cast; bool is one byte in memory.
#pragma once

#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "jit/kernel.h"

namespace kiln {

// Threads per block of every launch (a multiple of the warp size).
inline constexpr unsigned kCudaBlockThreads = 256;
// The most blocks a launch of a function with per-thread pools starts (KernelEntry::max_blocks):
// the pools grow with the threads started.
inline constexpr unsigned kCudaMaxBlocksWithPools = 32;

// With KILN_CUDA_HOST_EMULATION defined, the source also compiles as host C++ (given a shim that
// defines the CUDA built-ins, blockIdx and the rest, and kiln_h2f/kiln_f2h), and each kernel K
// gets `extern "C" void K_host_entry(void* const* b, const long long* s)`, which calls it with
// its pointers from b (buffers, scratch, per-thread pools, in parameter order) and its scalars
// from s: how tests run generated CUDA C on a machine without a GPU, one emulated thread at a
// time (kernels never synchronize threads).
//
// Each function becomes a KernelEntry (jit/kernel.h) with no CPU code: its launches (a stage
// each; `threads` the parallel loop's extent, or 1), its scratch (top-level local buffers, then
// per-thread pools) and its argument layout.
struct CudaModuleSource {
  std::string code;  // one translation unit: the prelude, then every function's kernels
  std::vector<KernelEntry> functions;
};

// The functions must pass loop::Verify with no Reduce left (run the GPU loop pipeline first)
// and hold no vector lanes. What CUDA C cannot express here (a vector value, a thread's buffer
// whose size changes inside the kernel) is kUnsupported naming the function and the thing.
CudaModuleSource EmitCuda(const std::vector<loop::PrimFunc>& funcs);

}  // namespace kiln
