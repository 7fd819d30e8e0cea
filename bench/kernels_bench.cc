// Kernel benchmarks for issue 4: compile latency by phase, a fused elementwise chain against a
// STREAM triad, matmul against Eigen, and the code generator's vector math against scalar libm,
// each baseline measured in this same binary; conv against a matmul of the same FLOPs, and a
// GEMV against a STREAM-style read of its weight bytes.
//
//   build/bench/kiln_kernels_bench --benchmark_min_time=0.2
//
// Report ratios (kiln / baseline), not absolute figures: the machines are shared and noisy.
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <Eigen/Core>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/compile.h"
#include "ir/loop/loop.h"
#include "ir/type_infer.h"
#include "jit/kernel.h"
#include "passes/pass.h"
#include "passes/pass_context.h"

namespace kiln {
namespace {

Tensor Random(const std::vector<int64_t>& shape, uint64_t seed) {
  Tensor t = Tensor::Empty(DType::kFloat32, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Function Primitive(std::vector<Var> params, Expr body) {
  return InferTypes(
      MakeFunction(std::move(params), std::move(body), nullptr, Attrs{{"primitive", true}}));
}

Expr Scalar(float v) {
  return MakeConstant(Tensor::Scalar<float>(v));
}

// abs(neg(min(relu(x * 2 + 1), 6))): six cheap ops, so the fused kernel is bound by memory.
Function ElementwiseChain(int64_t n) {
  Var x = MakeVar("x", TensorType({n}, DType::kFloat32));
  Expr e = MakeCall("mul", {x, Scalar(2)});
  e = MakeCall("add", {e, Scalar(1)});
  e = MakeCall("relu", {e});
  e = MakeCall("minimum", {e, Scalar(6)});
  e = MakeCall("neg", {e});
  e = MakeCall("abs", {e});
  return Primitive({x}, e);
}

Function Matmul(int64_t m, int64_t k, int64_t n) {
  Var a = MakeVar("a", TensorType({m, k}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({k, n}, DType::kFloat32));
  return Primitive({a, b}, MakeCall("matmul", {a, b}));
}

// A context with one thread, or two, for the oneTBB loops inside kernels.
std::unique_ptr<tbb::global_control> Threads(int n) {
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
}

// CompileKernel as the engine runs it (engine/engine.cc, MakePassContext): under a context whose
// target.vector_bits sizes the loop passes' vectors and register tiles for the host.
CompiledKernel CompileForHost(const Function& fn, const std::string& name,
                              const CodegenOptions& opts = {}) {
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("target.vector_bits", int64_t{VectorRegisterBits(opts)});
  PassContextScope scope(ctx);
  return CompileKernel(fn, name, opts);
}

// Random inputs for `fn`'s parameters and an f32 output, with the buffer pointers in the order
// `k` takes them: parameters, the kernel's captured constants, the output.
struct KernelBuffers {
  std::vector<Tensor> tensors;
  std::vector<void*> ptrs;
};
KernelBuffers RandomBuffers(const Function& fn, const CompiledKernel& k, uint64_t seed) {
  KernelBuffers b;
  for (const Var& p : fn->params) {
    const TensorTypeNode* tt = AsTensor(p->type);
    b.tensors.push_back(Random(ConstShape(tt->shape), seed++));
  }
  const TensorTypeNode* out = AsTensor(fn->body->type);
  b.tensors.push_back(Tensor::Empty(DType::kFloat32, ConstShape(out->shape)));
  for (Tensor& t : b.tensors) b.ptrs.push_back(t.raw_data());
  for (const Tensor& c : k.lowered.constants) b.ptrs.insert(b.ptrs.end() - 1, c.raw_data());
  return b;
}

// ---- (a) compile latency, split by phase ----

void BM_CompileLatency(benchmark::State& state, Function (*make)(), const char*) {
  Function fn = make();
  CompileTimings sum;
  for (auto _ : state) {
    CompiledKernel k = CompileKernel(fn, "bench_kernel");
    sum.lower_ms += k.timings.lower_ms;
    sum.opt_ms += k.timings.opt_ms;
    sum.codegen_ms += k.timings.codegen_ms;
  }
  double n = static_cast<double>(state.iterations());
  state.counters["lower_ms"] = sum.lower_ms / n;
  state.counters["O3_ms"] = sum.opt_ms / n;
  state.counters["codegen_ms"] = sum.codegen_ms / n;
}
Function SmallChain() {
  return ElementwiseChain(4096);
}
Function MatmulBiasRelu() {
  Var x = MakeVar("x", TensorType({32, 128}, DType::kFloat32));
  Var w = MakeVar("w", TensorType({128, 64}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({64}, DType::kFloat32));
  return Primitive({x, w, b}, MakeCall("relu", {MakeCall("add", {MakeCall("matmul", {x, w}), b})}));
}
BENCHMARK_CAPTURE(BM_CompileLatency, elementwise_chain, SmallChain, "")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CompileLatency, matmul_bias_relu, MatmulBiasRelu, "")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- (b) fused elementwise chain vs STREAM triad ----

constexpr int64_t kStreamN = 16 << 20;

void BM_StreamTriad(benchmark::State& state) {
  auto t = Threads(1);
  Tensor a = Random({kStreamN}, 1), b = Random({kStreamN}, 2), c = Random({kStreamN}, 3);
  float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* pc = c.data<float>();
  for (auto _ : state) {
    for (int64_t i = 0; i < kStreamN; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kStreamN * 3 * sizeof(float));
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_FusedChain(benchmark::State& state) {
  auto t = Threads(static_cast<int>(state.range(0)));
  CompiledKernel k = CompileForHost(ElementwiseChain(kStreamN), "chain");
  Tensor x = Random({kStreamN}, 4), y = Tensor::Empty(DType::kFloat32, {kStreamN});
  void* bufs[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) {
    k.entry->cpu(bufs, nullptr);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kStreamN * 2 * sizeof(float));
}
BENCHMARK(BM_FusedChain)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- (c) matmul vs Eigen ----

void BM_EigenMatmul(benchmark::State& state) {
  auto t = Threads(1);
  Eigen::setNbThreads(1);
  int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat a = Mat::Random(m, k), b = Mat::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * k * n * state.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_EigenMatmul)
    ->Args({1024, 1024, 1024})
    ->Args({32, 768, 3072})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_KilnMatmul(benchmark::State& state) {
  auto t = Threads(static_cast<int>(state.range(3)));
  int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  CodegenOptions opts;
  opts.fast_math = state.range(4) != 0;  // adds reassociation (FMA contraction is the default)
  CompiledKernel kern = CompileForHost(Matmul(m, k, n), "mm", opts);
  Tensor a = Random({m, k}, 5), b = Random({k, n}, 6), c = Tensor::Empty(DType::kFloat32, {m, n});
  void* bufs[] = {a.raw_data(), b.raw_data(), c.raw_data()};
  for (auto _ : state) {
    kern.entry->cpu(bufs, nullptr);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * k * n * state.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_KilnMatmul)
    ->ArgNames({"m", "k", "n", "threads", "fast_math"})
    ->Args({1024, 1024, 1024, 1, 0})
    ->Args({1024, 1024, 1024, 1, 1})
    ->Args({1024, 1024, 1024, 2, 1})
    ->Args({32, 768, 3072, 1, 0})
    ->Args({32, 768, 3072, 1, 1})
    ->Args({32, 768, 3072, 2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- (d) what the LLVM workarounds cost (jit/llvm_target.h) ----
// Each kernel with CodegenOptions::llvm_workarounds on (arg 1) and off (arg 0), for the host:
// compare the two rows of a kernel. Where no workaround applies to the host CPU the two are the
// same code. (Off is not safe in general: it is how the miscompile was found.)

Function Conv3x3() {
  Var x = MakeVar("x", TensorType({1, 16, 56, 56}, DType::kFloat32));
  Var w = MakeVar("w", TensorType({32, 16, 3, 3}, DType::kFloat32));
  return Primitive({x, w}, MakeCall("conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
}
Function Softmax() {
  Var x = MakeVar("x", TensorType({256, 1000}, DType::kFloat32));
  return Primitive({x}, MakeCall("softmax", {x}, {{"axis", int64_t{-1}}}));
}
Function Matmul256() {
  return Matmul(256, 256, 256);
}
Function Chain1M() {
  return ElementwiseChain(1 << 20);
}

void BM_Workarounds(benchmark::State& state, Function (*make)(), const char*) {
  auto t = Threads(1);
  CodegenOptions opts;
  opts.llvm_workarounds = state.range(0) != 0;
  Function fn = make();
  CompiledKernel k = CompileKernel(fn, "wk", opts);
  KernelBuffers bufs = RandomBuffers(fn, k, 10);
  for (auto _ : state) {
    k.entry->cpu(bufs.ptrs.data(), nullptr);
    benchmark::ClobberMemory();
  }
}
// Workarounds on (1), then off (0).
void OnAndOff(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_Workarounds, conv3x3, Conv3x3, "")->Apply(OnAndOff);
BENCHMARK_CAPTURE(BM_Workarounds, matmul256, Matmul256, "")->Apply(OnAndOff);
BENCHMARK_CAPTURE(BM_Workarounds, softmax, Softmax, "")->Apply(OnAndOff);
BENCHMARK_CAPTURE(BM_Workarounds, chain1m, Chain1M, "")->Apply(OnAndOff);

// ---- (e) vector math: the code generator's exp, log, tanh, erf, sin, cos, atan, asin, pow vs
// scalar libm ----
// out[i] = f(a[i]) over kMathN elements: a kiln kernel built as the loop pipeline shapes an
// elementwise op (a vector loop of 16 f32 / 8 f64 lanes, then a scalar tail), against a C++ loop
// of std:: calls, which GCC leaves scalar without -ffast-math. Compare items/s of the /kiln and
// /libm rows of one function. Inputs in each function's everyday range.

constexpr int64_t kMathN = int64_t{1} << 16;
constexpr double kPowExponent = 2.5;

loop::PrimFunc MathKernel(loop::Intrinsic fn, DType t, int lanes) {
  using loop::Expr;
  loop::Var n = loop::MakeVar("n"), io = loop::MakeVar("io"), i = loop::MakeVar("i");
  loop::Buffer a = loop::MakeBuffer("a", t, {n}), out = loop::MakeBuffer("out", t, {n});
  // pow's exponent is a constant (kPowExponent): the base varies.
  auto store = [&](const Expr& index) {
    std::vector<Expr> args = {loop::Load(a, {index})};
    if (loop::IntrinsicArity(fn) == 2) {
      Expr y = loop::FloatImm(kPowExponent, t);
      args.push_back(index->lanes > 1 ? loop::Broadcast(y, index->lanes) : y);
    }
    return loop::Store(out, {index}, loop::Call(fn, args));
  };
  Expr vector_trips = loop::FloorDiv(n, loop::IntImm(lanes));
  Expr vector_end = loop::Mul(vector_trips, loop::IntImm(lanes));
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = "math";
  f->buffer_params = {a, out};
  f->num_inputs = 1;
  f->scalar_params = {n};
  f->body = loop::Seq({
      loop::For(io, loop::IntImm(0), vector_trips, loop::ForKind::kSerial,
                store(loop::Ramp(loop::Mul(io, loop::IntImm(lanes)), 1, lanes))),
      loop::For(i, vector_end, loop::Sub(n, vector_end), loop::ForKind::kSerial, store(i)),
  });
  return f;
}

template <typename T>
T Libm(loop::Intrinsic fn, T x) {
  switch (fn) {
    case loop::Intrinsic::kExp:
      return std::exp(x);
    case loop::Intrinsic::kLog:
      return std::log(x);
    case loop::Intrinsic::kTanh:
      return std::tanh(x);
    case loop::Intrinsic::kErf:
      return std::erf(x);
    case loop::Intrinsic::kSin:
      return std::sin(x);
    case loop::Intrinsic::kAtan:
      return std::atan(x);
    case loop::Intrinsic::kAsin:
      return std::asin(x);
    case loop::Intrinsic::kPow:
      return std::pow(x, static_cast<T>(kPowExponent));
    default:
      return std::cos(x);
  }
}

// The baseline: fn a constant, so the switch folds away and the loop is just the libm calls.
template <typename T, loop::Intrinsic kFn>
void LibmLoop(const T* a, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Libm(kFn, a[i]);
}

// kiln's kernel for `fn`, or the `libm` loop where that is given.
template <typename T>
void BM_VectorMath(benchmark::State& state, loop::Intrinsic fn, double lo, double hi,
                   void (*libm)(const T*, T*, int64_t)) {
  constexpr bool f64 = std::is_same_v<T, double>;
  std::vector<T> a(kMathN), out(kMathN);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> d(lo, hi);
  for (T& x : a) x = static_cast<T>(d(rng));
  std::unique_ptr<CompiledModule> module;
  KernelFn kernel = nullptr;
  if (!libm) {
    module = BuildLLVM({MathKernel(fn, f64 ? DType::kFloat64 : DType::kFloat32, f64 ? 8 : 16)});
    kernel = module->Lookup("math");
  }
  void* bufs[] = {a.data(), out.data()};
  int64_t n = kMathN;
  for (auto _ : state) {
    if (libm)
      libm(a.data(), out.data(), n);
    else
      kernel(bufs, &n);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kMathN);
}

template <typename T, loop::Intrinsic kFn>
void RegisterVectorMath(double lo, double hi) {
  std::string name = StrCat("BM_VectorMath/", loop::IntrinsicName(kFn),
                            std::is_same_v<T, float> ? "_f32" : "_f64");
  benchmark::RegisterBenchmark(StrCat(name, "/kiln").c_str(), BM_VectorMath<T>, kFn, lo, hi,
                               nullptr)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(StrCat(name, "/libm").c_str(), BM_VectorMath<T>, kFn, lo, hi,
                               LibmLoop<T, kFn>)
      ->Unit(benchmark::kMicrosecond);
}
template <loop::Intrinsic kFn>
void RegisterVectorMath(double lo, double hi) {
  RegisterVectorMath<float, kFn>(lo, hi);
  RegisterVectorMath<double, kFn>(lo, hi);
}
// BM_VectorMath/<fn>_<f32|f64>/<kiln|libm>, over each function's everyday inputs.
[[maybe_unused]] const bool kVectorMathRegistered = [] {
  RegisterVectorMath<loop::Intrinsic::kExp>(-10, 10);
  RegisterVectorMath<loop::Intrinsic::kLog>(1e-3, 100);
  RegisterVectorMath<loop::Intrinsic::kTanh>(-5, 5);
  RegisterVectorMath<loop::Intrinsic::kErf>(-5, 5);
  RegisterVectorMath<loop::Intrinsic::kSin>(-10, 10);
  RegisterVectorMath<loop::Intrinsic::kCos>(-10, 10);
  RegisterVectorMath<loop::Intrinsic::kAtan>(-10, 10);
  RegisterVectorMath<loop::Intrinsic::kAsin>(-1, 1);
  RegisterVectorMath<loop::Intrinsic::kPow>(0.01, 100);  // x^2.5
  return true;
}();

// ---- (f) conv vs a matmul of the same FLOPs ----
// f32 conv lowers to a packed GEMM (ir/ops/conv_gemm.h); each conv here is beside the matmul
// [M x C*k*k] @ [C*k*k x H*W] of its FLOPs, so the GFLOPs of /conv over /matmul of one shape is
// what the conv lowering costs over a plain GEMM. Both compiled as the engine compiles them, one
// thread. The depthwise conv has no meaningful matmul twin: read its GFLOPs alone.

// make()'s function compiled for the host (CompileForHost) and run on random inputs on one thread,
// reporting `counter` as a rate of `per_iteration` units (FLOPs, bytes) a second.
void BM_HostKernel(benchmark::State& state, const std::function<Function()>& make,
                   const char* counter, double per_iteration) {
  auto t = Threads(1);
  Function fn = make();
  CompiledKernel k = CompileForHost(fn, "bench_kernel");
  KernelBuffers bufs = RandomBuffers(fn, k, 20);
  for (auto _ : state) {
    k.entry->cpu(bufs.ptrs.data(), nullptr);
    benchmark::ClobberMemory();
  }
  state.counters[counter] =
      benchmark::Counter(per_iteration * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// conv of x[1, C, H, W] by w[M, C/group, k, k], stride 1, padded to keep H x W.
Function Conv(int64_t c, int64_t m, int64_t hw, int64_t kernel, int64_t group) {
  Var x = MakeVar("x", TensorType({1, c, hw, hw}, DType::kFloat32));
  Var w = MakeVar("w", TensorType({m, c / group, kernel, kernel}, DType::kFloat32));
  int64_t p = kernel / 2;
  return Primitive(
      {x, w},
      MakeCall("conv", {x, w}, {{"pads", std::vector<int64_t>{p, p, p, p}}, {"group", group}}));
}

// conv_nhwc (channels-last, as ChannelsLastConvs makes convs) of x[1, H, W, C] by w[3, 3, C, M],
// padded to keep H x W: the direct form, Winograd's F(4x4, 3x3) transforming w in the kernel
// (as WinogradConvs marks a conv), or reading the transformed filter U[36, C, M] (as
// WinogradConvs passes a constant weight).
enum class ConvForm { kDirect, kWinograd, kWinogradFilterGiven };
Function ConvNhwc(int64_t c, int64_t m, int64_t hw, ConvForm form) {
  const bool given = form == ConvForm::kWinogradFilterGiven;
  Var x = MakeVar("x", TensorType({1, hw, hw, c}, DType::kFloat32));
  Var w = MakeVar("w", given ? TensorType({36, c, m}, DType::kFloat32)
                             : TensorType({3, 3, c, m}, DType::kFloat32));
  return Primitive({x, w}, MakeCall("conv_nhwc", {x, w},
                                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                     {"winograd", form != ConvForm::kDirect},
                                     {"winograd_filter", given}}));
}

// BM_ConvVsMatmul/<shape>/conv, and /matmul unless `twin` is false.
void RegisterConvVsMatmul(const std::string& shape, int64_t c, int64_t m, int64_t hw,
                          int64_t kernel, int64_t group, bool twin) {
  const int64_t k = c / group * kernel * kernel;
  const double flops = 2.0 * m * k * hw * hw;
  std::string name = StrCat("BM_ConvVsMatmul/", shape);
  benchmark::RegisterBenchmark(
      StrCat(name, "/conv").c_str(), BM_HostKernel, [=] { return Conv(c, m, hw, kernel, group); },
      "GFLOPs", flops)
      ->Unit(benchmark::kMicrosecond);
  if (twin)
    benchmark::RegisterBenchmark(
        StrCat(name, "/matmul").c_str(), BM_HostKernel, [=] { return Matmul(m, k, hw * hw); },
        "GFLOPs", flops)
        ->Unit(benchmark::kMicrosecond);
}
[[maybe_unused]] const bool kConvVsMatmulRegistered = [] {
  RegisterConvVsMatmul("C32_M64_16x16_3x3", 32, 64, 16, 3, 1, true);
  RegisterConvVsMatmul("C64_M128_28x28_3x3", 64, 128, 28, 3, 1, true);
  RegisterConvVsMatmul("C64_M128_56x56_1x1", 64, 128, 56, 1, 1, true);
  RegisterConvVsMatmul("C96_56x56_3x3_depthwise", 96, 96, 56, 3, 96, false);
  // Channels-last 3x3, direct and Winograd, both counted at the direct form's FLOPs (Winograd's
  // GFLOPs are its effective rate), beside the matmul of those FLOPs; 54 x 54 is not a
  // multiple of 4 (Winograd's last tiles computed whole and cropped); 128 and 256 channels
  // have U of 2.3 and 9 MiB, past L2 (taken only given); the direct form of 256 and 512
  // channels copies the taps (im2col) and runs a matmul.
  for (auto [c, m, hw] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 56},
                          {64, 64, 54},
                          {32, 64, 112},
                          {32, 64, 16},
                          {128, 128, 28},
                          {256, 256, 14},
                          {512, 512, 7}}) {
    const double flops = 2.0 * m * c * 9 * hw * hw;
    const std::string name = StrCat("BM_ConvVsMatmul/C", c, "_M", m, "_", hw, "x", hw, "_3x3_nhwc");
    for (auto [form, suffix] : {std::pair{ConvForm::kDirect, "/direct"},
                                {ConvForm::kWinograd, "/winograd"},
                                {ConvForm::kWinogradFilterGiven, "/winograd_filter_given"}})
      benchmark::RegisterBenchmark(
          StrCat(name, suffix).c_str(), BM_HostKernel, [=] { return ConvNhwc(c, m, hw, form); },
          "GFLOPs", flops)
          ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        StrCat(name, "/matmul").c_str(), BM_HostKernel, [=] { return Matmul(m, c * 9, hw * hw); },
        "GFLOPs", flops)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

// ---- (g) GEMV vs a STREAM read ----
// x[1, K] @ W[K, N] + b[N] reads each weight once: its bytes_read (K * N * 4 a call) a second
// against a plain loop summing a float array of the same bytes, one thread each. Compare
// BM_Gemv/<K>x<N>/kiln with BM_StreamRead/<K * N * 4>.

Function Gemv(int64_t k, int64_t n) {
  Var x = MakeVar("x", TensorType({1, k}, DType::kFloat32));
  Var w = MakeVar("w", TensorType({k, n}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({n}, DType::kFloat32));
  return Primitive({x, w, b}, MakeCall("add", {MakeCall("matmul", {x, w}), b}));
}

// The sum of `n` floats in kLanes independent partial sums, which GCC keeps in vector registers:
// several chains of vector adds in flight, so the loop waits on memory, not on the add latency.
float SumFloats(const float* p, int64_t n) {
  constexpr int64_t kLanes = 64;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += p[i + j];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

void BM_StreamRead(benchmark::State& state, int64_t bytes) {
  auto t = Threads(1);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  Tensor a = Random({n}, 30);
  for (auto _ : state) {
    float s = SumFloats(a.data<float>(), n);
    benchmark::DoNotOptimize(s);
  }
  state.counters["bytes_read"] =
      benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

[[maybe_unused]] const bool kGemvRegistered = [] {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{784, 512}, {1024, 1024}, {4096, 1024}}) {
    const int64_t bytes = k * n * static_cast<int64_t>(sizeof(float));
    benchmark::RegisterBenchmark(
        StrCat("BM_Gemv/", k, "x", n, "/kiln").c_str(), BM_HostKernel,
        [k, n] { return Gemv(k, n); }, "bytes_read", static_cast<double>(bytes))
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(StrCat("BM_StreamRead/", bytes).c_str(), BM_StreamRead, bytes)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
