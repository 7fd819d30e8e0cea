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
#include "passes/compile.h"

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

// The value of an index expression over the kernel's scalar parameters.
inline int64_t EvalIndex(const loop::Expr& e, const std::map<const loop::VarNode*, int64_t>& vars) {
  if (const auto* i = loop::AsIntImm(e)) return i->value;
  if (const auto* v = loop::AsVar(e)) return vars.at(v);
  if (const auto* c = loop::AsCast(e)) return EvalIndex(c->value, vars);
  if (const auto* b = loop::AsBinary(e)) {
    int64_t x = EvalIndex(b->a, vars), y = EvalIndex(b->b, vars), r = 0;
    if (loop::FoldIntBinary(b->op, x, y, DType::kInt64, &r)) return r;
  }
  Throw(ErrorCode::kInternal, "cannot evaluate an index expression of kind ",
        loop::ExprKindName(e->kind));
}

// `fn` lowered to CUDA C and run on the host: RunKernel's contract (inputs bind the group's
// parameters, outputs are allocated from `out_types`, symbols bind the scalars).
inline std::vector<Tensor> RunCudaOnHost(
    const Function& fn, const std::vector<Tensor>& inputs,
    const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
    const std::map<std::string, int64_t>& symbols, const std::string& name) {
  CudaKernelSource k = LowerKernelToCuda(fn, name);
  const LoweredKernel& l = k.lowered;
  TempDir dir("kiln-cuda-host");
  const std::string src = dir.path() + "/k.cc", lib = dir.path() + "/k.so";
  std::ofstream(src) << kCudaHostShim << k.source.code;
  const std::string cmd = "c++ -std=c++17 -O1 -w -shared -fPIC -o " + lib + " " + src + " 2>&1";
  if (std::system(cmd.c_str()) != 0)
    Throw(ErrorCode::kCompileError, "the host compiler rejects the CUDA C of ", name, ":\n",
          k.source.code);
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) Throw(ErrorCode::kInternal, "dlopen: ", dlerror());
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
  std::map<const loop::VarNode*, int64_t> vars;
  for (size_t i = 0; i < scalars.size(); ++i) vars[l.func->scalar_params.at(i).get()] = scalars[i];
  constexpr unsigned kBlock = 4, kMaxGrid = 3;
  const CudaFunction& f = k.source.functions.at(0);
  std::vector<std::vector<char>> scratch;
  for (const CudaScratch& s : f.scratch) {
    int64_t n = EvalIndex(s.numel, vars) * (s.per_thread ? kBlock * kMaxGrid : 1);
    scratch.emplace_back(static_cast<size_t>(std::max<int64_t>(n, 1)) * DTypeSize(s.dtype));
    pointers.push_back(scratch.back().data());
  }
  for (const CudaLaunch& launch : f.launches) {
    auto entry = reinterpret_cast<Entry>(dlsym(handle, (launch.kernel + "_host_entry").c_str()));
    if (!entry) Throw(ErrorCode::kInternal, "no host entry for ", launch.kernel);
    int64_t threads = EvalIndex(launch.threads, vars);
    unsigned grid =
        static_cast<unsigned>(std::clamp<int64_t>((threads + kBlock - 1) / kBlock, 1, kMaxGrid));
    for (unsigned b = 0; b < grid; ++b)
      for (unsigned t = 0; t < kBlock; ++t) {
        set_thread(b, t, grid, kBlock);
        entry(pointers.data(), scalars.data());
      }
  }
  return call.outputs;
}

}  // namespace kiln::test
