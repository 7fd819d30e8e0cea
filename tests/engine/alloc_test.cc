// Steady-state runs allocate nothing: this binary replaces the global operator new with one
// that counts, and 100 cache-hit runs into preallocated outputs must not call it once.
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

// Allocations during `runs` hit runs of `model` on `inputs`, once the shape is served
// specialized (after a warm-up run; under the tiered policy, after its background compile
// and a warm-up run of the specialized executable).
long AllocationsPerHits(Engine& engine, const Model& model, const std::vector<Tensor>& inputs,
                        int runs = 100) {
  std::shared_ptr<const Executable> exe = engine.Prepare(model, inputs);
  std::vector<Tensor> outputs;
  for (const TensorSignature& o : exe->outputs) outputs.push_back(Tensor::Empty(o.dtype, o.shape));
  engine.Run(model, inputs, outputs);
  engine.WaitForBackgroundCompiles();
  engine.Run(model, inputs, outputs);  // warm: the arena pool now holds an arena for this plan
  return test::CountAllocations([&] {
    for (int i = 0; i < runs; ++i) engine.Run(model, inputs, outputs);
  });
}

TEST(EngineAllocations, CounterWorks) {
  std::vector<int>* p = nullptr;
  EXPECT_GE(test::CountAllocations([&] { p = new std::vector<int>(10); }), 2);
  delete p;
}

TEST(EngineAllocations, HitRunsAllocateNothing) {
  Engine engine;
  ModelPtr mlp = Model::Create(test::MlpModel(), "mlp");
  ModelPtr enc = Model::Create(test::EncoderLayerModel(), "enc");
  Var a = MakeVar("a", TensorType({4}, DType::kFloat32));
  Var b = MakeVar("b", TensorType({4}, DType::kFloat32));
  ModelPtr add = Model::Create(MakeFunction({a, b}, MakeCall("add", {a, b})), "add");

  EXPECT_EQ(AllocationsPerHits(
                engine, *add,
                {RandomTensor(DType::kFloat32, {4}, 1), RandomTensor(DType::kFloat32, {4}, 2)}),
            0);
  EXPECT_EQ(AllocationsPerHits(engine, *mlp, {RandomTensor(DType::kFloat32, {1, 8})}), 0);
  EXPECT_EQ(AllocationsPerHits(engine, *mlp, {RandomTensor(DType::kFloat32, {7, 8})}), 0);
  // Large enough for parallel loops: kernels run inside the engine's oneTBB arena.
  EXPECT_EQ(AllocationsPerHits(engine, *mlp, {RandomTensor(DType::kFloat32, {4096, 8})}), 0);
  EXPECT_EQ(AllocationsPerHits(engine, *enc, {RandomTensor(DType::kFloat32, {2, 9, 16})}), 0);
  EXPECT_EQ(AllocationsPerHits(engine, *enc, {RandomTensor(DType::kFloat32, {8, 64, 16})}), 0);

  // A value input (a reshape's target shape): its values are hashed and compared in place.
  Var x = MakeVar("x", TensorType({Dim::Symbol("n")}, DType::kFloat32));
  Var s = MakeVar("s", TensorType({2}, DType::kInt64));
  ModelPtr reshape = Model::Create(
      MakeFunction({x, s}, MakeCall("relu", {MakeCall("dyn.reshape", {x, s})})), "reshape");
  ASSERT_EQ(reshape->value_inputs(), std::vector<int>{1});
  EXPECT_EQ(AllocationsPerHits(
                engine, *reshape,
                {RandomTensor(DType::kFloat32, {12}, 3), Tensor::FromVector<int64_t>({2}, {3, 4})}),
            0);
}

TEST(EngineAllocations, ExecutablesWithParallelLoopsAreTested) {
  // Guards the test above: it covers the task-arena path only if some plan it runs (the
  // specialized ones) is parallel.
  Engine engine;
  ModelPtr mlp = Model::Create(test::MlpModel(), "mlp");
  auto specialized = [&](int64_t rows) {
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, {rows, 8})};
    engine.Run(*mlp, in);
    engine.WaitForBackgroundCompiles();
    std::shared_ptr<const Executable> exe = engine.Prepare(*mlp, in);
    EXPECT_EQ(exe->tier, Tier::kSpecialized);
    return exe;
  };
  EXPECT_TRUE(specialized(4096)->parallel);
  EXPECT_FALSE(specialized(1)->parallel);
}

}  // namespace
}  // namespace kiln
