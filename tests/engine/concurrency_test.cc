// Many threads, one engine: results equal the single-threaded ones bit for bit, each shape is
// compiled exactly once (single flight), and a failed compile reaches every waiter, leaves
// nothing cached, and is retried by the next call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "common/engine_options.h"
#include "common/models.h"
#include "engine/engine.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::RandomTensor;
using ::testing::HasSubstr;

bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(EngineConcurrency, EightThreadsMatchSingleThreadBitwise) {
  const std::vector<int64_t> batches{1, 2, 3, 5, 8, 13, 21, 34, 64, 200};
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<std::vector<Tensor>> inputs, want;
  // Eager: every run is served specialized, in both engines (the tiered policy's concurrency:
  // tests/engine/tiers_test.cc).
  Engine reference(test::Eager([](EngineOptions& o) { o.num_threads = 1; }));
  for (int64_t b : batches) {
    inputs.push_back({RandomTensor(DType::kFloat32, {b, 8}, 10 + b)});
    want.push_back(reference.Run(*model, inputs.back()));
  }

  Engine engine(test::Eager());
  constexpr int kThreads = 8, kRunsPerThread = 40;
  std::barrier start(kThreads);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::vector<Tensor>> outs;
      for (size_t i = 0; i < batches.size(); ++i)
        outs.push_back({Tensor::Empty(DType::kFloat32, {batches[i], 10})});
      start.arrive_and_wait();
      for (int r = 0; r < kRunsPerThread; ++r) {
        // Every thread starts on the same shape, so its compile has waiters.
        size_t i = r == 0 ? 0 : rng() % batches.size();
        engine.Run(*model, inputs[i], outs[i]);
        if (!BitwiseEqual(outs[i][0], want[i][0])) mismatches.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EngineStats s = engine.stats();
  EngineStats r = reference.stats();
  EXPECT_EQ(s.runs, static_cast<uint64_t>(kThreads * kRunsPerThread));
  EXPECT_EQ(s.specializations, batches.size());
  EXPECT_EQ(s.cached_executables, batches.size());
  EXPECT_EQ(s.kernel_compiles, r.kernel_compiles);
  EXPECT_EQ(s.hits + s.misses, s.runs);
  EXPECT_GE(s.misses, batches.size());
}

// A graph pass for the tests below: fails (once `failures` is positive, decrementing it) when
// the first input's leading dim is 3, after a pause that lets waiters pile up.
std::atomic<int> g_fail_runs{0};
std::atomic<int> g_failures{0};

void RegisterFailingPass() {
  static bool registered = [] {
    PassRegistry::Global().Register(PassRegistration{
        .name = "FailOnBatch3",
        .opt_level = 0,
        .required = {},
        .options = {},
        .doc = "test pass: throws for batch 3",
        .create =
            [](const Attrs&) {
              return CreateModulePass(
                  PassInfo{"FailOnBatch3", 0, {}}, [](const IRModule& m, const PassContext&) {
                    const TensorTypeNode* t = AsTensor(m.Lookup("main")->params[0]->type);
                    if (t->shape[0] != Dim(3)) return m;
                    g_fail_runs.fetch_add(1);
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    if (g_failures.fetch_sub(1) > 0)
                      Throw(ErrorCode::kCompileError, "injected failure");
                    return m;
                  });
            },
    });
    return true;
  }();
  (void)registered;
}

TEST(EngineConcurrency, CompileErrorReachesEveryWaiterAndIsNotCached) {
  RegisterFailingPass();
  g_fail_runs = 0;
  g_failures = 1;
  Engine engine(test::Eager(
      [](EngineOptions& o) { o.graph_pipeline = "InferType,FailOnBatch3,FoldConstant,FuseOps"; }));
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {3, 8}, 3)};

  constexpr int kThreads = 8;
  std::barrier start(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        engine.Run(*model, in);
      } catch (const Error& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_THAT(errors[t], HasSubstr("mlp(x: f32[3, 8]): pass 'FailOnBatch3': injected failure"))
        << "thread " << t;
  EXPECT_EQ(g_fail_runs.load(), 1);  // one compile for eight callers
  EngineStats s = engine.stats();
  EXPECT_EQ(s.compile_errors, 1u);
  EXPECT_EQ(s.specializations, 0u);
  EXPECT_EQ(s.cached_executables, 0u);

  // Other shapes are unaffected; the failed one is retried, and now succeeds.
  engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {4, 8})});
  std::vector<Tensor> got = engine.Run(*model, in);
  EXPECT_EQ(g_fail_runs.load(), 2);
  EXPECT_TRUE(test::TensorsNear(got[0], Interpret(model->graph(), in)[0], 1e-5, 1e-4));
  s = engine.stats();
  EXPECT_EQ(s.specializations, 2u);
  EXPECT_EQ(s.cached_executables, 2u);
}

TEST(EngineConcurrency, KernelCompileIsSingleFlight) {
  // Eight models with the same fused groups, first run at once: each kernel compiles once.
  std::vector<ModelPtr> models;
  for (int i = 0; i < 8; ++i) models.push_back(Model::Create(test::MlpModel(100 + i), "mlp"));
  Engine engine(test::Eager());
  std::barrier start(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      engine.Run(*models[t], std::vector<Tensor>{RandomTensor(DType::kFloat32, {6, 8}, t)});
    });
  }
  for (std::thread& th : threads) th.join();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.specializations, 8u);
  const uint64_t kernels = static_cast<uint64_t>(s.shapes[0].kernels);
  EXPECT_EQ(s.kernel_compiles, kernels);
  EXPECT_EQ(s.kernel_cache_hits, 7 * kernels);
}

// A store that counts what the engine asks of it: the seam a disk cache plugs into.
class CountingStore : public KernelStore {
 public:
  std::atomic<int> loads{0}, stores{0};
  LoadResult Load(const KernelKey&, std::shared_ptr<const CompiledKernel>*) override {
    loads.fetch_add(1);
    return LoadResult::kRejected;
  }
  void Store(const KernelKey&, const CompiledKernel&) override { stores.fetch_add(1); }
};

TEST(EngineConcurrency, KernelStoreIsConsultedOnMiss) {
  auto store = std::make_shared<CountingStore>();
  EngineOptions options;
  options.kernel_store = store;
  options.cache_dir = "/tmp/kiln-cache-unused";
  Engine engine(options);
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 8})});
  engine.WaitForBackgroundCompiles();  // the shape's specialization (tiered) counts too
  EngineStats s = engine.stats();
  EXPECT_EQ(static_cast<uint64_t>(store->loads.load()), s.kernel_compiles);
  EXPECT_EQ(static_cast<uint64_t>(store->stores.load()), s.kernel_compiles);
  EXPECT_EQ(s.disk_rejections, s.kernel_compiles);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(engine.options().cache_dir, "/tmp/kiln-cache-unused");
}

}  // namespace
}  // namespace kiln
