// Profiling (EngineOptions::profile, which the C API's kiln_options_set_profiling turns on)
// keeps the hit path allocation-free: this binary replaces the global operator new with one
// that counts, as tests/engine/alloc_test.cc does, and checks the per-kernel counters.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/alloc_counter.h"
#include "common/models.h"
#include "engine/engine.h"

namespace kiln {
namespace {

using test::RandomTensor;

TEST(ProfilingAllocations, ProfiledHitRunsAllocateNothingAndCountEveryLaunch) {
  // Eager: each shape has one executable, whose kernels count every run.
  EngineOptions options;
  options.profile = true;
  options.policy = CompilePolicy::kEager;
  Engine engine(options);
  ModelPtr mlp = Model::Create(test::MlpModel(), "mlp");
  for (int64_t batch : {1, 4096}) {  // 4096: parallel loops, inside the engine's task arena
    std::vector<Tensor> inputs{RandomTensor(DType::kFloat32, {batch, 8})};
    std::shared_ptr<const Executable> exe = engine.Prepare(*mlp, inputs);
    std::vector<Tensor> outputs;
    for (const TensorSignature& o : exe->outputs)
      outputs.push_back(Tensor::Empty(o.dtype, o.shape));
    engine.Run(*mlp, inputs, outputs);  // warm
    EXPECT_EQ(test::CountAllocations([&] {
                for (int i = 0; i < 100; ++i) engine.Run(*mlp, inputs, outputs);
              }),
              0)
        << "batch " << batch;
  }
  EngineStats s = engine.stats();
  ASSERT_FALSE(s.kernel_profile.empty());
  for (const KernelProfileStats& k : s.kernel_profile) {
    EXPECT_EQ(k.calls, 101u) << k.shape_key << " " << k.kernel;
    EXPECT_GT(k.total_ms, 0.0) << k.kernel;
  }
  ASSERT_EQ(s.shapes.size(), 2u);
  EXPECT_FALSE(s.shapes[0].pass_timing.empty());
}

TEST(ProfilingAllocations, OffByDefault) {
  Engine engine;
  ModelPtr mlp = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> inputs{RandomTensor(DType::kFloat32, {3, 8})};
  engine.Run(*mlp, inputs);
  EngineStats s = engine.stats();
  EXPECT_TRUE(s.kernel_profile.empty());
  ASSERT_EQ(s.shapes.size(), 1u);
  EXPECT_TRUE(s.shapes[0].pass_timing.empty());
  for (const KernelLaunch& k : engine.Prepare(*mlp, inputs)->launches())
    EXPECT_EQ(k.profile, nullptr);
}

}  // namespace
}  // namespace kiln
