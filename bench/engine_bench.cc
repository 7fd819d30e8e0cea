// Engine benchmarks for issue 5: what a cache hit costs beyond its kernels, and what a new
// shape costs to compile.
//
//   build/bench/kiln_engine_bench --benchmark_min_time=0.2
//
// Hit/*: one Engine::Run into preallocated outputs, per iteration (us). Kernels/* runs the same
// executable's kernels straight from a prepared pointer table, so Hit minus Kernels is the
// dispatch overhead (shape key, lookup, checks, arena, binding). ONNX Runtime's figure to
// compare with: about 3.1 us per run plus 0.8 us per node. NewShape/* minus Hit/Generic*: what
// binding the shape-generic executable to a new shape costs. Cold/*: one run of a shape never
// seen before, compiled first (eager), per iteration (ms): specialization, passes, fusion,
// lowering, codegen, planning.
#include <benchmark/benchmark.h>

#include "common/models.h"
#include "engine/engine.h"

namespace kiln {
namespace {

using test::RandomTensor;

ModelPtr AddModel() {
  Var a = MakeVar("a", TensorType({4}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({4}, DType::kFloat32));
  return Model::Create(MakeFunction({a, b}, MakeCall("add", {a, b})), "add");
}

int CountOps(const Function& f) {
  int n = 0;
  for (const Expr& e : PostOrder(f->body)) n += AsCall(e) && AsCall(e)->op;
  return n;
}

void RunHits(benchmark::State& state, const ModelPtr& model, std::vector<Tensor> inputs) {
  Engine engine;
  auto exe = engine.Prepare(*model, inputs);
  std::vector<Tensor> outputs;
  for (const TensorSignature& o : exe->outputs) outputs.push_back(Tensor::Empty(o.dtype, o.shape));
  for (auto _ : state) engine.Run(*model, inputs, outputs);
  state.counters["graph_ops"] = CountOps(model->graph());
  state.counters["kernels"] = static_cast<double>(exe->launches().size());
}

// The kernels alone: what a dispatcher with nothing to look up or check would cost.
void RunKernelsOnly(benchmark::State& state, const ModelPtr& model, std::vector<Tensor> inputs) {
  Engine engine;
  auto exe = engine.Prepare(*model, inputs);
  std::vector<Tensor> outputs;
  for (const TensorSignature& o : exe->outputs) outputs.push_back(Tensor::Empty(o.dtype, o.shape));
  Tensor arena = Tensor::Empty(DType::kUInt8, {static_cast<int64_t>(exe->plan.peak_bytes) + 1});
  std::vector<std::vector<void*>> tables;
  for (const KernelLaunch& k : exe->launches()) {
    std::vector<void*> t;
    for (uint32_t i = 0; i < k.num_buffers; ++i) {
      const BufferRef& r = exe->buffer_refs[k.first_buffer + i];
      switch (r.kind) {
        case BufferRef::Kind::kInput:
          t.push_back(inputs[r.index].raw_data());
          break;
        case BufferRef::Kind::kOutput:
          t.push_back(outputs[r.index].raw_data());
          break;
        case BufferRef::Kind::kConstant:
          t.push_back(exe->code->constant_data[r.index]);
          break;
        case BufferRef::Kind::kArena:
          t.push_back(static_cast<std::byte*>(arena.raw_data()) + r.offset);
          break;
      }
    }
    tables.push_back(std::move(t));
  }
  for (auto _ : state) {
    for (size_t i = 0; i < exe->launches().size(); ++i)
      exe->launches()[i].entry->cpu(tables[i].data(),
                                    exe->scalars.data() + exe->launches()[i].first_scalar);
    benchmark::ClobberMemory();
  }
}

void BM_Hit_Add4(benchmark::State& state) {
  RunHits(state, AddModel(),
          {RandomTensor(DType::kFloat32, {4}, 1), RandomTensor(DType::kFloat32, {4}, 2)});
}
void BM_Kernels_Add4(benchmark::State& state) {
  RunKernelsOnly(state, AddModel(),
                 {RandomTensor(DType::kFloat32, {4}, 1), RandomTensor(DType::kFloat32, {4}, 2)});
}
void BM_Hit_MlpBatch1(benchmark::State& state) {
  RunHits(state, Model::Create(test::MlpModel(), "mlp"), {RandomTensor(DType::kFloat32, {1, 8})});
}
void BM_Kernels_MlpBatch1(benchmark::State& state) {
  RunKernelsOnly(state, Model::Create(test::MlpModel(), "mlp"),
                 {RandomTensor(DType::kFloat32, {1, 8})});
}
void BM_Hit_EncoderB1S8(benchmark::State& state) {
  RunHits(state, Model::Create(test::EncoderLayerModel(), "enc"),
          {RandomTensor(DType::kFloat32, {1, 8, 16})});
}
void BM_Kernels_EncoderB1S8(benchmark::State& state) {
  RunKernelsOnly(state, Model::Create(test::EncoderLayerModel(), "enc"),
                 {RandomTensor(DType::kFloat32, {1, 8, 16})});
}

// A new shape served by the shape-generic tier: every iteration runs one of 32 shapes on an
// engine that keeps 2, so each is a miss that binds the generic executable to its shape (the
// first request of a shape under the tiered policy, less the queueing of its compile).
// Minus Hit/GenericEncoder (the same shapes, all kept), what binding a shape costs.
void RunGenericShapes(benchmark::State& state, int kept) {
  EngineOptions o;
  o.policy = CompilePolicy::kGenericOnly;
  o.max_specializations = kept;
  Engine engine(o);
  ModelPtr model = Model::Create(test::EncoderLayerModel(), "enc");
  std::vector<std::vector<Tensor>> inputs;
  for (int64_t s = 1; s <= 32; ++s)
    inputs.push_back({RandomTensor(DType::kFloat32, {1, s, 16}, s)});
  for (const std::vector<Tensor>& in : inputs) engine.Run(*model, in);  // builds the generic tier
  size_t i = 0;
  for (auto _ : state) {
    engine.Run(*model, inputs[i]);
    i = (i + 1) % inputs.size();
  }
}
void BM_NewShape_GenericEncoder(benchmark::State& state) {
  RunGenericShapes(state, 2);
}
void BM_Hit_GenericEncoder(benchmark::State& state) {
  RunGenericShapes(state, 64);
}

// Every iteration runs a shape the engine has not seen (batch 1, 2, 3, ...), compiled before it
// runs (the eager policy).
void RunColdShapes(benchmark::State& state, const ModelPtr& model,
                   std::vector<int64_t> (*shape_of)(int64_t)) {
  EngineOptions o;
  o.policy = CompilePolicy::kEager;
  Engine engine(o);
  int64_t n = 0;
  for (auto _ : state) {
    ++n;
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, shape_of(n), n)};
    engine.Run(*model, in);
  }
  EngineStats s = engine.stats();
  state.counters["kernel_compiles_per_shape"] =
      static_cast<double>(s.kernel_compiles) / static_cast<double>(s.specializations);
}

void BM_Cold_Mlp(benchmark::State& state) {
  RunColdShapes(state, Model::Create(test::MlpModel(), "mlp"), [](int64_t i) {
    return std::vector<int64_t>{i, 8};
  });
}
void BM_Cold_Encoder(benchmark::State& state) {
  RunColdShapes(state, Model::Create(test::EncoderLayerModel(), "enc"), [](int64_t i) {
    return std::vector<int64_t>{1, i, 16};
  });
}

BENCHMARK(BM_Hit_Add4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Kernels_Add4)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Hit_MlpBatch1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Kernels_MlpBatch1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Hit_EncoderB1S8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Kernels_EncoderB1S8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NewShape_GenericEncoder)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Hit_GenericEncoder)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cold_Mlp)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_Cold_Encoder)->Unit(benchmark::kMillisecond)->Iterations(10);

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
