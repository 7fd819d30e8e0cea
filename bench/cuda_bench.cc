// GPU benchmarks for issue 16: kiln's CUDA kernels (lowered to CUDA C, compiled by NVRTC, launched
// through the CUDA device) next to a baseline measured in the same binary, on cuda(0).
//
//   build/bench/kiln_cuda_bench --benchmark_min_time=0.2
//
// Chain/N: a fused elementwise chain, out = x * sigmoid(x) + y over N f32 elements (two reads,
// one write), timed alternately with a device-to-device copy of N f32 (one read, one write).
// Counters: GB/s (bytes read and written per second), copy_GB/s, vs_copy (the ratio; the
// target is >= 0.8).
// Matmul/M/K/N: kiln's f32 matmul kernel and cuBLAS's SGEMM (libcublas loaded with dlopen; never
// linked) on the same inputs, timed alternately. Counters: GFLOP/s, cublas_GFLOP/s, vs_cublas
// (target >= 0.5 for now), max_rel_err (kiln's result against cuBLAS's).
// Each timed batch is several launches on the default stream, then one wait. Where there is no
// GPU, NVRTC or cuBLAS, each benchmark is skipped with the reason.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "common/cuda_device_run.h"
#include "common/test_util.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
using test::CudaKernelOnDevice;
const Device kGpu{DeviceType::kCUDA, 0};

// Seconds per call of `f`, over a batch of `reps` calls on the default stream and one wait.
template <typename F>
double TimeBatch(int reps, F&& f) {
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f();
  CudaKernelOnDevice::api().StreamSync(kGpu, nullptr);
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps;
}

// Launches so that a batch takes about 5 ms (at least 1): the wait's cost is then small.
int RepsFor(double seconds_per_call) {
  return std::max(1, static_cast<int>(5e-3 / std::max(seconds_per_call, 1e-7)));
}

// Times `kiln` and `baseline` alternately, one batch of each per iteration (so drift on the
// machine hits both alike); the iteration's time is kiln's. Mean seconds per call of each.
template <typename F, typename G>
std::pair<double, double> TimeAlternately(benchmark::State& state, F&& kiln, G&& baseline) {
  const int kiln_reps = RepsFor(TimeBatch(1, kiln));  // the first calls also warm up
  const int base_reps = RepsFor(TimeBatch(1, baseline));
  double kiln_s = 0, base_s = 0;
  for (auto _ : state) {
    const double t = TimeBatch(kiln_reps, kiln);
    base_s += TimeBatch(base_reps, baseline);
    kiln_s += t;
    state.SetIterationTime(t);
  }
  const double n = std::max<double>(1, static_cast<double>(state.iterations()));
  return {kiln_s / n, base_s / n};
}

void BM_Chain(benchmark::State& state) {
  if (std::string why = test::CudaRunUnavailable(); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const int64_t n = state.range(0);
  Var x = MakeVar("x", TensorType({Dim(n)}, DType::kFloat32));
  Var y = MakeVar("y", TensorType({Dim(n)}, DType::kFloat32));
  Expr silu = MakeCall("mul", {x, MakeCall("sigmoid", {x})});
  Function fn = InferTypes(
      MakeFunction({x, y}, MakeCall("add", {silu, y}), nullptr, Attrs{{"primitive", true}}));
  std::vector<Tensor> in = {test::RandomTensor(DType::kFloat32, {n}, 1, -4, 4),
                            test::RandomTensor(DType::kFloat32, {n}, 2, -1, 1)};
  CudaKernelOnDevice chain(fn, in, {{DType::kFloat32, {n}}}, {}, "chain");
  CUDADeviceAPI& api = CudaKernelOnDevice::api();
  const int64_t bytes = n * 4;
  void* src = api.AllocDataSpace(kGpu, bytes);
  void* dst = api.AllocDataSpace(kGpu, bytes);
  auto copy = [&] { api.CopyDataFromTo(src, 0, dst, 0, bytes, kGpu, kGpu, nullptr); };
  auto [chain_s, copy_s] = TimeAlternately(
      state, [&] { chain.Launch(); }, copy);
  api.FreeDataSpace(kGpu, src);
  api.FreeDataSpace(kGpu, dst);
  const double chain_gbs = 3.0 * bytes / chain_s / 1e9;
  const double copy_gbs = 2.0 * bytes / copy_s / 1e9;
  state.counters["GB/s"] = chain_gbs;
  state.counters["copy_GB/s"] = copy_gbs;
  state.counters["vs_copy"] = chain_gbs / copy_gbs;
}
BENCHMARK(BM_Chain)->Arg(1 << 20)->Arg(1 << 25)->UseManualTime()->Unit(benchmark::kMicrosecond);

// cuBLAS's C API, declared here (no CUDA headers), loaded at first use; the toolkit's library.
struct Cublas {
  std::string unavailable;
  int (*create)(void**) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*sgemm)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
               const float*, float*, int) = nullptr;
  void* handle = nullptr;
};

const Cublas& GetCublas() {
  static const Cublas* c = [] {
    auto* c = new Cublas();  // never freed: kernels may use it until the process ends
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      const char* why = dlerror();
      c->unavailable = std::string("cuBLAS not found: ") + (why ? why : "libcublas.so.13");
      return c;
    }
    c->create = reinterpret_cast<decltype(c->create)>(dlsym(lib, "cublasCreate_v2"));
    c->destroy = reinterpret_cast<decltype(c->destroy)>(dlsym(lib, "cublasDestroy_v2"));
    c->sgemm = reinterpret_cast<decltype(c->sgemm)>(dlsym(lib, "cublasSgemm_v2"));
    if (!c->create || !c->destroy || !c->sgemm) {
      c->unavailable = "the loaded cuBLAS lacks cublasCreate_v2/cublasSgemm_v2";
      return c;
    }
    // cuBLAS works in the device's primary context, the one the CUDA device makes current.
    CudaKernelOnDevice::api().SetDevice(kGpu);
    if (int s = c->create(&c->handle); s != 0)
      c->unavailable = "cublasCreate_v2 failed with status " + std::to_string(s);
    return c;
  }();
  return *c;
}

void BM_Matmul(benchmark::State& state) {
  if (std::string why = test::CudaRunUnavailable(); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const Cublas& blas = GetCublas();
  if (!blas.unavailable.empty()) {
    state.SkipWithError(blas.unavailable.c_str());
    return;
  }
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Var a = MakeVar("a", TensorType({Dim(m), Dim(k)}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({Dim(k), Dim(n)}, DType::kFloat32));
  Function fn = InferTypes(
      MakeFunction({a, b}, MakeCall("matmul", {a, b}), nullptr, Attrs{{"primitive", true}}));
  std::vector<Tensor> in = {test::RandomTensor(DType::kFloat32, {m, k}, 1),
                            test::RandomTensor(DType::kFloat32, {k, n}, 2)};
  CudaKernelOnDevice mm(fn, in, {{DType::kFloat32, {m, n}}}, {}, "matmul");
  CUDADeviceAPI& api = CudaKernelOnDevice::api();
  const Device host{DeviceType::kCPU, 0};
  void* da = api.AllocDataSpace(kGpu, m * k * 4);
  void* db = api.AllocDataSpace(kGpu, k * n * 4);
  void* dc = api.AllocDataSpace(kGpu, m * n * 4);
  api.CopyDataFromTo(in[0].raw_data(), 0, da, 0, m * k * 4, host, kGpu, nullptr);
  api.CopyDataFromTo(in[1].raw_data(), 0, db, 0, k * n * 4, host, kGpu, nullptr);
  const float one = 1, zero = 0;
  int status = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's (n, m, k) with B first.
  auto cublas = [&] {
    status |= blas.sgemm(blas.handle, 0, 0, static_cast<int>(n), static_cast<int>(m),
                         static_cast<int>(k), &one, static_cast<const float*>(db),
                         static_cast<int>(n), static_cast<const float*>(da), static_cast<int>(k),
                         &zero, static_cast<float*>(dc), static_cast<int>(n));
  };
  auto [mm_s, blas_s] = TimeAlternately(
      state, [&] { mm.Launch(); }, cublas);
  if (status != 0)
    state.SkipWithError(("cublasSgemm_v2 failed: " + std::to_string(status)).c_str());
  // kiln's result against cuBLAS's: both f32 with different summation orders.
  Tensor want = Tensor::Empty(DType::kFloat32, {m, n});
  api.CopyDataFromTo(dc, 0, want.raw_data(), 0, m * n * 4, kGpu, host, nullptr);
  Tensor got = mm.Outputs().at(0);
  double max_rel = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    const double w = want.data<float>()[i], g = got.data<float>()[i];
    max_rel = std::max(max_rel, std::abs(g - w) / std::max(1.0, std::abs(w)));
  }
  api.FreeDataSpace(kGpu, da);
  api.FreeDataSpace(kGpu, db);
  api.FreeDataSpace(kGpu, dc);
  const double flop = 2.0 * m * k * n;
  state.counters["GFLOP/s"] = flop / mm_s / 1e9;
  state.counters["cublas_GFLOP/s"] = flop / blas_s / 1e9;
  state.counters["vs_cublas"] = blas_s / mm_s;
  state.counters["max_rel_err"] = max_rel;
}
BENCHMARK(BM_Matmul)
    ->Args({1024, 1024, 1024})
    ->Args({4096, 4096, 4096})
    ->Args({128, 768, 3072})  // a transformer layer's MLP up-projection, 128 tokens
    ->Args({1, 4096, 4096})   // batch-1 GEMV
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
