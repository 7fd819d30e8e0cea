// The engine's memory stays bounded by default: shape churn through one engine keeps the cache
// within its byte budget, destroying the engine gives the memory back, a byte budget evicts
// across models, and a bound smaller than the shapes in use does not make the engine compile
// in a loop (the generic tier serves what was evicted).
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>

#include "common/engine_options.h"
#include "common/models.h"
#include "common/test_util.h"
#include "engine/engine.h"

namespace kiln {
namespace {

using test::RandomTensor;
using test::ResidentBytes;

std::vector<Tensor> Batch(int64_t b, uint64_t seed) {
  return {RandomTensor(DType::kFloat32, {b, 8}, seed)};
}

// 1,000 distinct shapes through one engine with the default options: the cache stays within
// its default budget (the accounted bytes, and the resident memory the process gains), and
// destroying the engine gives the memory back (within 10% of the level before it, once
// malloc_trim returned free heap pages).
TEST(EngineBounds, ShapeChurnStaysWithinTheDefaultBudget) {
  const size_t probe = ResidentBytes();
  if (probe == 0) GTEST_SKIP() << "/proc/self/statm cannot be read: no resident size to check";
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  {
    // What the first engine of a process sets up for good (LLVM's targets and options, oneTBB's
    // workers, the compile pool's thread stack) is not what this test measures.
    Engine warm;
    for (int64_t b : {1000, 3}) warm.Run(*model, Batch(b, 1));
    warm.WaitForBackgroundCompiles();
  }
  malloc_trim(0);
  const size_t before = ResidentBytes();
  size_t peak = before;
  EngineStats s;
  {
    Engine engine;
    for (int64_t b = 1; b <= 1000; ++b) {
      engine.Run(*model, Batch(b, b));
      if (b % 100 == 0) {
        s = engine.stats();
        EXPECT_LE(s.cached_bytes, s.cache_budget_bytes) << "after " << b << " shapes";
        peak = std::max(peak, ResidentBytes());
      }
    }
    engine.WaitForBackgroundCompiles();
    s = engine.stats();
    peak = std::max(peak, ResidentBytes());
    std::printf(
        "1000 shapes: %lu specialized, %lu dropped unstarted, %lu cached (%.1f MB accounted, "
        "budget %.0f MB), resident +%.1f MB at most\n",
        static_cast<unsigned long>(s.specializations),
        static_cast<unsigned long>(s.background_dropped),
        static_cast<unsigned long>(s.cached_executables), s.cached_bytes / 1e6,
        s.cache_budget_bytes / 1e6, (peak - before) / 1e6);
    EXPECT_LE(s.cached_bytes, s.cache_budget_bytes);
    EXPECT_LE(s.cached_executables, 64u);
    EXPECT_GT(s.cached_bytes, 0u);
    EXPECT_LE(peak - before, s.cache_budget_bytes);
    EXPECT_LE(s.shapes.size(), 2 * EngineStats::kMaxShapeStats);
  }
  malloc_trim(0);
  const size_t after = ResidentBytes();
  std::printf("resident: %.1f MB before the engine, %.1f MB after it was destroyed\n", before / 1e6,
              after / 1e6);
  EXPECT_LE(after, before + before / 10);
}

// A byte budget evicts the least recently used executables of any model, and holds at every
// step; an executable's estimate counts its kernels' code.
TEST(EngineBounds, ByteBudgetEvictsAcrossModels) {
  ModelPtr a = Model::Create(test::MlpModel(1), "a");
  ModelPtr b = Model::Create(test::MlpModel(2), "b");
  const uint64_t budget = 3 << 20;
  Engine engine(test::Eager([&](EngineOptions& o) { o.max_cache_bytes = budget; }));
  for (int64_t n = 1; n <= 12; ++n) {
    engine.Run(*a, Batch(n, n));
    engine.Run(*b, Batch(n, n));
    EngineStats s = engine.stats();
    EXPECT_EQ(s.cache_budget_bytes, budget);
    EXPECT_LE(s.cached_bytes, budget);
  }
  EngineStats s = engine.stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LT(s.cached_executables, 24u);
  // Each executable is charged its kernels' modules: at least a JITDylib's 32 KiB for each.
  std::shared_ptr<const Executable> exe = engine.Prepare(*a, Batch(12, 1));
  EXPECT_GE(exe->code_bytes, exe->launches().size() * (32u << 10));
  EXPECT_EQ(CachedExecutableBytes(*exe), ExecutableTableBytes(*exe) + exe->code_bytes);
  // The most recent shapes of both models are still there.
  const uint64_t hits = engine.stats().hits;
  engine.Run(*a, Batch(12, 3));
  engine.Run(*b, Batch(12, 3));
  EXPECT_EQ(engine.stats().hits, hits + 2);
  // Forget gives back what the model's executables were charged.
  engine.Forget(*a);
  engine.Forget(*b);
  EXPECT_EQ(engine.stats().cached_bytes, 0u);
}

// 8 threads cycling over 24 shapes with max_specializations = 2 (tiered, the default policy):
// every shape is specialized at most once, then the generic tier serves it when it comes back,
// so compiles stay within the distinct shapes plus the bound, and every result is right.
TEST(EngineBounds, BoundSmallerThanTheShapesInUseDoesNotThrash) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  constexpr int kShapes = 24, kThreads = 8, kRunsPerThread = 600;
  std::vector<std::vector<Tensor>> inputs, want;
  Engine reference(test::Eager([](EngineOptions& o) { o.num_threads = 1; }));
  for (int i = 0; i < kShapes; ++i) {
    inputs.push_back(Batch(i + 1, 50 + i));
    want.push_back(reference.Run(*model, inputs.back()));
  }
  Engine engine(test::With([](EngineOptions& o) { o.max_specializations = 2; }));
  // Past the model's first run, whose shape compiles as eager does while the generic tier
  // builds: the thrash in question is the generic tier's.
  engine.Run(*model, inputs[0]);
  engine.WaitForBackgroundCompiles();
  std::barrier start(kThreads);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int r = 0; r < kRunsPerThread; ++r) {
        const int i = (r + 3 * t) % kShapes;
        std::vector<Tensor> got = engine.Run(*model, inputs[i]);
        if (!test::TensorsNear(got[0], want[i][0])) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  engine.WaitForBackgroundCompiles();
  EngineStats s = engine.stats();
  std::printf(
      "%d runs: %lu specializations, %lu kernel compiles, %lu evictions, %lu lookups of "
      "evicted shapes served generic\n",
      kThreads * kRunsPerThread, static_cast<unsigned long>(s.specializations),
      static_cast<unsigned long>(s.kernel_compiles), static_cast<unsigned long>(s.evictions),
      static_cast<unsigned long>(s.evicted_served_generic));
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(s.runs, static_cast<uint64_t>(kThreads * kRunsPerThread + 1));
  EXPECT_LE(s.specializations, static_cast<uint64_t>(kShapes + 3));
  EXPECT_EQ(s.generic_builds, 1u);
  EXPECT_LE(s.cached_executables, 2u);
  EXPECT_GT(s.generic_runs, 0u);
  // Kernels: the generic executable's, and each specialization's.
  const uint64_t per_shape = engine.Prepare(*model, inputs[0])->launches().size();
  EXPECT_LE(s.kernel_compiles, (kShapes + 3 + 1) * per_shape);
}

// Forget is not eviction: a forgotten model's shapes are specialized again.
TEST(EngineBounds, ForgottenShapesSpecializeAgain) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  Engine engine(test::With([](EngineOptions& o) { o.max_specializations = 1; }));
  for (int64_t b : {2, 3, 2}) {
    engine.Run(*model, Batch(b, 1));
    engine.WaitForBackgroundCompiles();
  }
  EngineStats s = engine.stats();
  EXPECT_EQ(s.specializations, 2u);  // 2 then 3; 2 again is evicted, served generic
  EXPECT_EQ(s.evicted_served_generic, 1u);
  engine.Forget(*model);
  engine.Run(*model, Batch(2, 1));
  engine.WaitForBackgroundCompiles();
  EXPECT_EQ(engine.stats().specializations, 3u);
  EXPECT_EQ(engine.Prepare(*model, Batch(2, 1))->tier, Tier::kSpecialized);
}

// A hot shape pushed out by a burst of new ones is specialized again once enough runs were
// served specialized (kRunsPerRespecialization), not before.
TEST(EngineBounds, HotShapeEvictedByABurstRecovers) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  Engine engine(test::With([](EngineOptions& o) { o.max_specializations = 2; }));
  auto run_settled = [&](int64_t b) {
    engine.Run(*model, Batch(b, 1));
    engine.WaitForBackgroundCompiles();
  };
  run_settled(5);
  for (int64_t b : {6, 7}) run_settled(b);  // 5 goes
  run_settled(5);                           // served generic: nothing paid for it yet
  EngineStats s = engine.stats();
  EXPECT_EQ(s.specializations, 3u);
  EXPECT_EQ(s.respecializations, 0u);
  EXPECT_EQ(s.evicted_served_generic, 1u);
  // Runs served specialized pay for one: 7's. 5 goes for 8, then comes back specialized.
  for (uint64_t i = 0; i < kRunsPerRespecialization; ++i) engine.Run(*model, Batch(7, 1));
  run_settled(8);
  run_settled(5);
  s = engine.stats();
  EXPECT_EQ(s.respecializations, 1u);
  EXPECT_EQ(s.specializations, 5u);
  EXPECT_EQ(engine.Prepare(*model, Batch(5, 1))->tier, Tier::kSpecialized);
  // Paid for once: 6, evicted long ago, comes back to the generic tier.
  run_settled(6);
  s = engine.stats();
  EXPECT_EQ(s.respecializations, 1u);
  EXPECT_EQ(s.evicted_served_generic, 2u);
  EXPECT_EQ(engine.Prepare(*model, Batch(6, 1))->tier, Tier::kGeneric);
}

// Runs, new shapes, evictions (by count and by bytes), Forget and statistics from many threads
// at once, then the engine destroyed with background compiles still queued; three times. Every
// result is right. Under ThreadSanitizer in CI (scripts/dev.sh tsan_tests).
TEST(EngineBounds, StressRunsNewShapesEvictionAndDestroy) {
  ModelPtr models[] = {Model::Create(test::MlpModel(1), "a"),
                       Model::Create(test::MlpModel(2), "b")};
  constexpr int kBatches = 40, kThreads = 4, kRunsPerThread = 60;
  std::vector<Tensor> inputs[kBatches + 1], want[2][kBatches + 1];
  Engine reference(test::Eager([](EngineOptions& o) { o.num_threads = 1; }));
  for (int b = 1; b <= kBatches; ++b) {
    inputs[b] = Batch(b, 100 + b);
    for (int m = 0; m < 2; ++m) want[m][b] = reference.Run(*models[m], inputs[b]);
  }
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    auto engine = std::make_unique<Engine>(test::With([&](EngineOptions& o) {
      o.max_specializations = 3;
      o.max_cache_bytes = 4 << 20;  // about 5 of these executables: evictions by bytes too
      o.num_threads = 2;
    }));
    std::barrier start(kThreads + 1);
    std::atomic<int> wrong{0}, errors{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(round * 100 + t);
        start.arrive_and_wait();
        for (int r = 0; r < kRunsPerThread; ++r) {
          const int m = static_cast<int>(rng() % 2);
          // Mostly a few hot shapes; now and then one of many others (new to the engine).
          const int b = rng() % 4 ? 1 + static_cast<int>(rng() % 4)
                                  : 5 + static_cast<int>(rng() % (kBatches - 4));
          try {
            std::vector<Tensor> got = engine->Run(*models[m], inputs[b]);
            if (!test::TensorsNear(got[0], want[m][b][0])) wrong.fetch_add(1);
          } catch (const std::exception& e) {
            errors.fetch_add(1);
            ADD_FAILURE() << e.what();
          }
          if (t == 0 && r % 20 == 19) engine->Forget(*models[rng() % 2]);
        }
      });
    }
    std::thread observer([&] {
      start.arrive_and_wait();
      while (!done.load()) {
        EngineStats s = engine->stats();
        EXPECT_LE(s.cached_executables, 6u);
        engine->Explain(*models[0], inputs[3]);
        std::this_thread::yield();
      }
    });
    for (std::thread& th : threads) th.join();
    done.store(true);
    observer.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(errors.load(), 0);
    // Queue more background compiles, then destroy the engine under them.
    for (int b = kBatches - 4; b <= kBatches; ++b) engine->Run(*models[round % 2], inputs[b]);
    engine.reset();
  }
}

}  // namespace
}  // namespace kiln
