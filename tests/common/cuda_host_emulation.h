// Runs generated CUDA C on the host (no GPU): the kernel source, compiled as C++ with a shim for
// the CUDA built-ins (jit/cuda_codegen.h, KILN_CUDA_HOST_EMULATION), loaded with dlopen, and
// each launch run one emulated thread after another over a small grid (3 blocks of 4 threads
// at most, so that grid-stride loops take several turns). Kernels never synchronize threads, so
// running them in turn is one of the schedules a GPU may pick. This checks what the emitter
// writes (indexing, stages, scratch, the integer, NaN, cast and f16/bf16 semantics) against the
// reference kernels; the CUDA math library's own rounding is not emulated (the host's libm is).
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "engine/compile.h"

namespace kiln::test {

inline constexpr char kCudaHostShim[] = R"(// Host shim for generated CUDA C.
#include <math.h>
#include <string.h>
#define KILN_CUDA_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
struct kiln_dim3 { unsigned x, y, z; };
static kiln_dim3 blockIdx, threadIdx, blockDim, gridDim;
extern "C" void kiln_set_thread(unsigned block, unsigned thread, unsigned grid, unsigned block_dim) {
  blockIdx.x = block; threadIdx.x = thread; gridDim.x = grid; blockDim.x = block_dim;
}
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline float kiln_h2f(unsigned short h) { _Float16 v; memcpy(&v, &h, 2); return (float)v; }
static inline unsigned short kiln_f2h(float f) { _Float16 v = (_Float16)f; unsigned short h; memcpy(&h, &v, 2); return h; }
)";

// `source` (generated CUDA C) compiled for the host with the shim above and loaded: a dlopen
// handle for dlsym and dlclose. The host compiler's rejection is kCompileError naming `name`.
inline void* LoadCudaOnHost(const std::string& source, const std::string& name) {
  TempDir dir("kiln-cuda-host");
  const std::string src = dir.path() + "/k.cc", lib = dir.path() + "/k.so";
  std::ofstream(src) << kCudaHostShim << source;
  const std::string cmd = "c++ -std=c++17 -O1 -w -shared -fPIC -o " + lib + " " + src + " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    Throw(ErrorCode::kCompileError, "the host compiler rejects the CUDA C of ", name, ":\n",
          source);
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) Throw(ErrorCode::kInternal, "dlopen: ", dlerror());
  return handle;  // the library stays mapped when its file goes with `dir`
}

// `fn` lowered to CUDA C and run on the host: RunKernel's contract (inputs bind the group's
// parameters, outputs are allocated from `out_types`, symbols bind the scalars).
inline std::vector<Tensor> RunCudaOnHost(
    const Function& fn, const std::vector<Tensor>& inputs,
    const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
    const std::map<std::string, int64_t>& symbols, const std::string& name) {
  CudaKernelSource k = LowerKernelToCuda(fn, name);
  const LoweredKernel& l = k.lowered;
  void* handle = LoadCudaOnHost(k.source.code, name);
  struct Closer {
    void* h;
    ~Closer() { dlclose(h); }
  } closer{handle};
  using SetThread = void (*)(unsigned, unsigned, unsigned, unsigned);
  using Entry = void (*)(void* const*, const long long*);
  auto set_thread = reinterpret_cast<SetThread>(dlsym(handle, "kiln_set_thread"));

  KernelCall call = BindKernelCall(l, inputs, out_types, symbols);
  std::vector<void*>& pointers = call.buffers;
  std::vector<long long> scalars(call.scalars.begin(), call.scalars.end());
  // A small grid, so every thread's code runs: 4 threads a block, at most 3 blocks.
  KernelEntry f = k.source.functions.at(0);
  constexpr unsigned kBlock = 4;
  for (DeviceLaunch& launch : f.launches) launch.block_threads = kBlock;
  f.max_blocks = 3;
  const DeviceCallShape shape = ShapeDeviceCall(f, call.scalars.data());
  std::vector<std::vector<char>> scratch;
  for (size_t bytes : shape.scratch_bytes) {
    scratch.emplace_back(std::max<size_t>(bytes, 1));
    pointers.push_back(scratch.back().data());
  }
  for (size_t i = 0; i < f.launches.size(); ++i) {
    const DeviceLaunch& launch = f.launches[i];
    auto entry = reinterpret_cast<Entry>(dlsym(handle, (launch.kernel + "_host_entry").c_str()));
    if (!entry) Throw(ErrorCode::kInternal, "no host entry for ", launch.kernel);
    for (unsigned b = 0; b < shape.grids[i]; ++b)
      for (unsigned t = 0; t < kBlock; ++t) {
        set_thread(b, t, shape.grids[i], kBlock);
        entry(pointers.data(), scalars.data());
      }
  }
  return call.outputs;
}

}  // namespace kiln::test
