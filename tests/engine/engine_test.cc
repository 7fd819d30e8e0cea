// The engine end to end: models run with many shapes match the reference interpreter, repeat
// shapes are cache hits, kernels are shared through the kernel cache, the specialization bound
// evicts the least recently used shape, memory plans reuse buffers without aliasing live ones,
// and bad inputs are reported by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "common/engine_options.h"
#include "common/models.h"
#include "engine/engine.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using test::Eager;
using test::ErrorMessage;
using test::RandomTensor;
using test::TensorsNear;
using test::With;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void ExpectMatchesInterpreter(Engine& engine, const Model& model,
                              const std::vector<Tensor>& inputs) {
  std::vector<Tensor> want = Interpret(model.graph(), inputs);
  std::vector<Tensor> got = engine.Run(model, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(TensorsNear(got[i], want[i], 1e-5, 1e-4)) << "output " << i;
}

// Runs `shapes` twice each: every run matches Interpret, every first run compiles (eager),
// every second run is a hit.
void RunShapesTwice(const Function& graph, const std::vector<std::vector<int64_t>>& shapes) {
  Engine engine(Eager());
  ModelPtr model = Model::Create(graph, "m");
  uint64_t seed = 1;
  for (const std::vector<int64_t>& shape : shapes) {
    SCOPED_TRACE(IntsToString(shape));
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, shape, ++seed)};
    EngineStats before = engine.stats();
    ExpectMatchesInterpreter(engine, *model, in);
    EngineStats mid = engine.stats();
    EXPECT_EQ(mid.misses, before.misses + 1);
    EXPECT_EQ(mid.specializations, before.specializations + 1);
    in = {RandomTensor(DType::kFloat32, shape, ++seed)};  // new values, same shape
    ExpectMatchesInterpreter(engine, *model, in);
    EngineStats after = engine.stats();
    EXPECT_EQ(after.hits, mid.hits + 1);
    EXPECT_EQ(after.misses, mid.misses);
    EXPECT_EQ(after.kernel_compiles, mid.kernel_compiles);
  }
  EngineStats s = engine.stats();
  EXPECT_EQ(s.specializations, shapes.size());
  EXPECT_EQ(s.shapes.size(), shapes.size());
  EXPECT_EQ(s.runs, 2 * shapes.size());
}

TEST(Engine, MlpTwentyShapesMatchInterpreter) {
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t b : {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 50, 64, 65, 100, 127, 256})
    shapes.push_back({b, 8});
  RunShapesTwice(test::MlpModel(), shapes);
}

TEST(Engine, EncoderLayerTwentyShapesMatchInterpreter) {
  std::vector<std::vector<int64_t>> shapes;
  for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 2},  {1, 5},  {2, 1},  {2, 3}, {1, 16}, {3, 7}, {4, 4},  {2, 9}, {1, 17},
           {5, 2}, {2, 16}, {3, 11}, {1, 33}, {6, 5}, {4, 8},  {7, 3}, {2, 24}, {8, 1}, {1, 64}})
    shapes.push_back({b, s, 16});
  RunShapesTwice(test::EncoderLayerModel(), shapes);
}

// Image sizes odd and even (a stride-2 conv then reads one padded row fewer), down to 1x1.
TEST(Engine, ConvChainShapesMatchInterpreter) {
  std::vector<std::vector<int64_t>> shapes;
  for (auto [h, w] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {2, 3}, {7, 9}, {16, 16}, {17, 12}, {33, 20}, {40, 57}})
    shapes.push_back({h == 16 ? 2 : 1, 3, h, w});
  RunShapesTwice(test::ConvChainModel(), shapes);
}

// Convs with a 2x2 max pool between them (one kernel with the conv before it where the batch
// splits evenly among the threads), then two conv_transposes: one whose windows tile its output
// (a matmul and a reshuffle), one whose windows overlap (a matmul and col2im_nhwc): odd sizes,
// so the pool drops a row or column, and batches that do and do not split evenly.
TEST(Engine, PoolAndUpsamplingConvsMatchInterpreter) {
  using Ints = std::vector<int64_t>;
  Var x = MakeVar("x",
                  TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("height"), Dim::Symbol("width")},
                             DType::kFloat32));
  auto conv = [](const Expr& in, int64_t c, int64_t m, uint64_t seed) {
    return MakeCall("relu", {MakeCall("conv",
                                      {in, test::Weight({m, c, 3, 3}, seed, "w", 0.3),
                                       test::Weight({m}, seed + 1, "b")},
                                      {{"pads", Ints{1, 1, 1, 1}}})});
  };
  Expr h = MakeCall("max_pool", {conv(x, 3, 8, 1)},
                    {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  Expr up = MakeCall(
      "conv_transpose",
      {conv(h, 8, 16, 3), test::Weight({16, 4, 2, 2}, 5, "t1", 0.3), test::Weight({4}, 6, "t1.b")},
      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  Expr out = MakeCall("conv_transpose",
                      {MakeCall("relu", {up}), test::Weight({4, 2, 3, 3}, 7, "t2", 0.3),
                       test::Weight({2}, 8, "t2.b")},
                      {{"kernel_shape", Ints{3, 3}},
                       {"strides", Ints{2, 2}},
                       {"pads", Ints{1, 1, 1, 1}},
                       {"output_padding", Ints{1, 1}}});
  RunShapesTwice(MakeFunction({x}, MakeCall("sigmoid", {out})),
                 {{1, 3, 8, 8}, {2, 3, 9, 7}, {3, 3, 6, 10}, {4, 3, 5, 5}});
}

TEST(Engine, RunIntoPreallocatedOutputs) {
  Engine engine;
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {6, 8}, 3)};
  std::vector<Tensor> out{Tensor::Empty(DType::kFloat32, {6, 10})};
  engine.Run(*model, in, out);
  EXPECT_TRUE(TensorsNear(out[0], Interpret(model->graph(), in)[0], 1e-5, 1e-4));
  std::vector<Tensor> wrong{Tensor::Empty(DType::kFloat32, {5, 10})};
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*model, in, wrong); }),
              HasSubstr("mlp(x: f32[6, 8]): output 0: expected f32[6, 10], given f32[5, 10]"));
  std::vector<Tensor> none;
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*model, in, none); }),
              HasSubstr("expected 1 outputs, got 0"));
}

TEST(Engine, IdenticalFusedGroupsShareKernels) {
  Engine engine(Eager());
  // Different weights, same program: the weights are kernel arguments, not kernel code.
  ModelPtr a = Model::Create(test::MlpModel(100), "a");
  ModelPtr b = Model::Create(test::MlpModel(500), "b");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {4, 8}, 9)};
  engine.Run(*a, in);
  EngineStats after_a = engine.stats();
  EXPECT_GT(after_a.kernel_compiles, 0u);
  ExpectMatchesInterpreter(engine, *b, in);
  EngineStats after_b = engine.stats();
  EXPECT_EQ(after_b.kernel_compiles, after_a.kernel_compiles);
  EXPECT_EQ(after_b.kernel_cache_hits, after_a.kernel_cache_hits + after_b.shapes[1].kernels);
  EXPECT_EQ(after_b.specializations, 2u);
}

TEST(Engine, EncoderReusesKernelsWithinAModel) {
  // q, k and v are the same dense layer on different weights: one kernel for the three.
  Engine engine(Eager());  // one build: the counts are its
  ModelPtr m = Model::Create(test::EncoderLayerModel(), "enc");
  engine.Run(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 5, 16}, 4)});
  EngineStats s = engine.stats();
  EXPECT_GT(s.kernel_cache_hits, 0u);
  EXPECT_EQ(s.kernel_compiles + s.kernel_cache_hits, static_cast<uint64_t>(s.shapes[0].kernels));
}

TEST(Engine, BoundedSpecializationsEvictLeastRecentlyUsed) {
  Engine engine(Eager([](EngineOptions& o) { o.max_specializations = 2; }));
  ModelPtr m = Model::Create(test::MlpModel(), "mlp");
  auto run = [&](int64_t batch) {
    engine.Run(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {batch, 8}, batch)});
  };
  run(1);
  run(2);
  run(1);  // 2 is now the least recently used
  EXPECT_EQ(engine.stats().evictions, 0u);
  run(3);  // evicts 2
  EngineStats s = engine.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.cached_executables, 2u);
  EXPECT_EQ(s.specializations, 3u);
  run(1);  // still cached
  EXPECT_EQ(engine.stats().hits, s.hits + 1);
  run(2);  // was evicted: compiled again, evicting 3
  s = engine.stats();
  EXPECT_EQ(s.specializations, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.cached_executables, 2u);
  run(1);
  run(2);
  EXPECT_EQ(engine.stats().specializations, 4u);
  // Another model has a bound of its own.
  ModelPtr other = Model::Create(test::MlpModel(7), "other");
  engine.Run(*other, std::vector<Tensor>{RandomTensor(DType::kFloat32, {5, 8}, 5)});
  EXPECT_EQ(engine.stats().evictions, 2u);
  EXPECT_EQ(engine.stats().cached_executables, 3u);
}

// Buffers whose lifetimes overlap never share bytes; the plan beats one buffer each.
void ExpectPlanSound(const Executable& exe) {
  const MemoryPlan& p = exe.plan;
  ASSERT_EQ(p.offsets.size(), exe.intermediates.size());
  for (size_t i = 0; i < p.offsets.size(); ++i) {
    const BufferLifetime& a = exe.intermediates[i].lifetime;
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0u);
    EXPECT_LE(p.offsets[i] + a.bytes, p.peak_bytes);
    for (size_t j = i + 1; j < p.offsets.size(); ++j) {
      const BufferLifetime& b = exe.intermediates[j].lifetime;
      if (!LifetimesOverlap(a, b) || a.bytes == 0 || b.bytes == 0) continue;
      bool disjoint =
          p.offsets[i] + a.bytes <= p.offsets[j] || p.offsets[j] + b.bytes <= p.offsets[i];
      EXPECT_TRUE(disjoint) << exe.launches()[exe.intermediates[i].producer].name << " and "
                            << exe.launches()[exe.intermediates[j].producer].name
                            << " alias while both are live";
    }
  }
  size_t naive = 0;
  for (const IntermediateBuffer& b : exe.intermediates) naive += AlignArena(b.lifetime.bytes);
  EXPECT_EQ(p.naive_bytes, naive);
}

TEST(Engine, MemoryPlanReusesBuffersOfDisjointLifetimes) {
  Engine engine;
  ModelPtr enc = Model::Create(test::EncoderLayerModel(), "enc");
  auto exe = engine.Prepare(*enc, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 7, 16})});
  ExpectPlanSound(*exe);
  EXPECT_GT(exe->intermediates.size(), 5u);
  EXPECT_LT(exe->plan.peak_bytes, exe->plan.naive_bytes);

  ModelPtr mlp = Model::Create(test::MlpModel(), "mlp");
  exe = engine.Prepare(*mlp, std::vector<Tensor>{RandomTensor(DType::kFloat32, {9, 8})});
  ExpectPlanSound(*exe);
  EXPECT_LE(exe->plan.peak_bytes, exe->plan.naive_bytes);
  EXPECT_EQ(engine.stats().runs, 0u);  // Prepare compiles, runs nothing
}

TEST(Engine, OutputsThatAreInputsOrRepeatedAreCopied) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("n")}, DType::kFloat32));
  Expr e = MakeCall("exp", {x}, {}, "e");
  Function f = MakeFunction({x}, MakeTuple({e, x, e}));
  Engine engine;
  ModelPtr m = Model::Create(f, "copies");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {5}, 2)};
  std::vector<Tensor> want = Interpret(f, in);
  std::vector<Tensor> got = engine.Run(*m, in);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(TensorsNear(got[i], want[i]));
}

TEST(Engine, DisablingFuseOpsGivesOneKernelPerOp) {
  Engine fused, unfused(With([](EngineOptions&o) { o.disabled_passes = {"FuseOps"}; }));
  ModelPtr m = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {3, 8})};
  auto a = fused.Prepare(*m, in);
  auto b = unfused.Prepare(*m, in);
  EXPECT_GT(b->launches().size(), a->launches().size());
  ExpectMatchesInterpreter(unfused, *m, in);
}

// The target option takes every spelling Target parses; an explicit CPU compiles for it.
TEST(Engine, TargetsAsShortStringsAndJson) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {5, 8}, 3)};
  for (const char* target :
       {"llvm", "llvm -mcpu=x86-64", "{\"kind\": \"llvm\", \"mcpu\": \"x86-64\"}",
        "llvm -mattr=+avx2,+fma"}) {
    SCOPED_TRACE(target);
    Engine engine(With([&](EngineOptions& o) { o.target = target; }));
    ExpectMatchesInterpreter(engine, *model, in);
  }
}

TEST(Engine, ThreadCountIsTheArenaBound) {
  Engine one(With([](EngineOptions&o) { o.num_threads = 1; })),
      two(With([](EngineOptions&o) { o.num_threads = 2; }));
  EXPECT_EQ(one.num_threads(), 1);
  EXPECT_EQ(two.num_threads(), 2);
}

// ---- errors ----

TEST(EngineErrors, WrongInputCount) {
  Engine engine;
  ModelPtr m = Model::Create(test::MlpModel(), "mlp");
  Tensor x = RandomTensor(DType::kFloat32, {2, 8});
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*m, std::vector<Tensor>{x, x});
              }),
              HasSubstr("model 'mlp': expected 1 inputs, got 2"));
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, std::vector<Tensor>{}); }),
              HasSubstr("model 'mlp': expected 1 inputs, got 0"));
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, std::vector<Tensor>{Tensor()}); }),
              HasSubstr("input 0 'x' is an undefined tensor"));
}

TEST(EngineErrors, WrongRankOrDtype) {
  Engine engine;
  ModelPtr m = Model::Create(test::MlpModel(), "mlp");
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 8, 1})});
              }),
              HasSubstr("model 'mlp': input 'x': expected f32[batch, 8], given f32[2, 8, 1] "
                        "(rank differs)"));
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*m, std::vector<Tensor>{RandomTensor(DType::kInt32, {2, 8})});
              }),
              HasSubstr("given i32[2, 8] (dtype differs)"));
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*m, std::vector<Tensor>{RandomTensor(DType::kFloat32, {2, 7})});
              }),
              HasSubstr("given f32[2, 7] (dim 1 must be 8"));
  EngineStats s = engine.stats();
  EXPECT_EQ(s.specializations, 0u);
  EXPECT_EQ(s.generic_builds, 0u);  // checked before anything is built
  EXPECT_EQ(s.compile_errors, 0u);  // the caller's error, not a compile's
  EXPECT_EQ(s.cached_executables, 0u);
}

TEST(EngineErrors, SymbolBoundInconsistently) {
  Dim n = Dim::Symbol("n");
  Var x = MakeVar("x", TensorType({n, 4}, DType::kFloat32));
  Var y = MakeVar("y", TensorType({n, 4}, DType::kFloat32));
  Engine engine;
  ModelPtr m = Model::Create(MakeFunction({x, y}, MakeCall("add", {x, y}, {}, "sum")), "pair");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 4}),
                         RandomTensor(DType::kFloat32, {3, 4})};
  EXPECT_THAT(ErrorMessage([&] { engine.Run(*m, in); }),
              HasSubstr("model 'pair': input 'y': expected f32[n, 4], given f32[3, 4] (dim 0 is "
                        "n, which input 'x' bound to 2)"));
  in[1] = RandomTensor(DType::kFloat32, {2, 4});
  ExpectMatchesInterpreter(engine, *m, in);
}

TEST(EngineErrors, ModelValidationNamesTheNode) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 8}, DType::kFloat32));
  Expr mm = MakeCall("matmul", {x, test::Weight({4, 4}, 1, "w")}, {}, "fc1");
  EXPECT_THAT(ErrorMessage([&] { Model::Create(MakeFunction({x}, mm), "bad"); }),
              HasSubstr("model 'bad': matmul 'fc1'"));
  Var t = MakeVar("t", nullptr);
  EXPECT_THAT(ErrorMessage([&] { Model::Create(MakeFunction({t}, t), "untyped"); }),
              HasSubstr("model 'untyped': input 0 't' must have a tensor type"));
}

TEST(EngineErrors, BadOptions) {
  EXPECT_THAT(ErrorMessage([] { Engine e(With([](EngineOptions& o) { o.target = "ptx"; })); }),
              HasSubstr("EngineOptions.target: "));
  EXPECT_THAT(
      ErrorMessage([] { Engine e(With([](EngineOptions& o) { o.target = "llvm -foo=1"; })); }),
      AllOf(HasSubstr("EngineOptions.target: "), HasSubstr("foo")));
  EXPECT_THAT(
      ErrorMessage([] { Engine e(With([](EngineOptions& o) { o.target = "{\"kind\": 3}"; })); }),
      HasSubstr("EngineOptions.target: "));
  EXPECT_THAT(ErrorMessage([] {
                Engine e(With([](EngineOptions& o) { o.disabled_passes = {"NoSuchPass"}; }));
              }),
              HasSubstr("unknown pass 'NoSuchPass'"));
  EXPECT_THAT(
      ErrorMessage([] {
        Engine e(With([](EngineOptions& o) { o.pass_config = {{"no.such.key", int64_t{1}}}; }));
      }),
      HasSubstr("EngineOptions.pass_config: unknown pass config key 'no.such.key'"));
  EXPECT_THAT(ErrorMessage([] { Engine e(With([](EngineOptions& o) { o.num_threads = -1; })); }),
              HasSubstr("num_threads must not be negative"));
}

TEST(EngineErrors, PassConfigReachesTheCompiler) {
  // A config value changes the kernel key: two engines never confuse their kernels, and the
  // results agree.
  Engine a, b(With([](EngineOptions&o) {
    o.pass_config = {{"fuse_ops.max_group_size", int64_t{1}}};
  }));
  ModelPtr m = Model::Create(test::MlpModel(), "mlp");
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {3, 8})};
  EXPECT_GT(b.Prepare(*m, in)->launches().size(), a.Prepare(*m, in)->launches().size());
  ExpectMatchesInterpreter(b, *m, in);
}

// Symbolic image sizes: conv with stride and padding, a ceil_mode max pool, a SAME avg pool.
// The model's output type is an expression of height and width, and each size specializes to
// the shapes the reference computes.
TEST(Engine, SymbolicSpatialDimsMatchInterpreter) {
  IRModule mod = InferTypes(ParseModule(R"(
def @main(%x: f32[batch, 3, height, width], %w: f32[4, 3, 3, 3], %v: f32[6, 4, 1, 1]) {
  %c = relu(conv(%x, %w, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))
  %p = max_pool(%c, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=true)
  avg_pool(conv(%p, %v, kernel_shape=[1, 1]), kernel_shape=[2, 2], strides=[2, 2],
           auto_pad="SAME_UPPER")
}
)"));
  Function graph = mod.Lookup("main");
  const std::string out = TypeToString(graph->body->type);
  EXPECT_THAT(out, HasSubstr("height")) << out;
  EXPECT_THAT(out, HasSubstr("width")) << out;
  EXPECT_THAT(out, HasSubstr("//")) << out;
  Engine engine;
  ModelPtr model = Model::Create(graph, "m");
  uint64_t seed = 7;
  for (auto [h, w] : {std::pair<int64_t, int64_t>{17, 17}, {32, 24}, {9, 40}, {64, 63}}) {
    SCOPED_TRACE(StrCat(h, "x", w));
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 3, h, w}, ++seed),
                           RandomTensor(DType::kFloat32, {4, 3, 3, 3}, ++seed),
                           RandomTensor(DType::kFloat32, {6, 4, 1, 1}, ++seed)};
    ExpectMatchesInterpreter(engine, *model, in);
  }
  engine.WaitForBackgroundCompiles();  // tiered: each shape specialized once, in the background
  EXPECT_EQ(engine.stats().specializations, 4u);
}

// An encoder-decoder over symbolic batch, height and width (issue 14's acceptance net): a
// stride-2 padded conv, a ceil_mode max pool, a conv, a resize x2, a concat with the skip
// connection and a conv_transpose. The types stay symbolic, and four image sizes (multiples of
// 4, where the skip connection's sizes agree) each match the interpreter.
TEST(Engine, SymbolicEncoderDecoderMatchesInterpreter) {
  IRModule mod = InferTypes(ParseModule(R"(
def @main(%x: f32[batch, 3, height, width], %w: f32[8, 3, 3, 3], %v: f32[8, 8, 3, 3],
          %t: f32[16, 4, 2, 2]) {
  %skip = relu(conv(%x, %w, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))
  %p = max_pool(%skip, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=true)
  %c = conv(%p, %v, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
  %u = resize(%c, scales=[1.0, 1.0, 2.0, 2.0])
  conv_transpose(concat(%u, %skip, axis=1), %t, strides=[2, 2])
}
)"));
  Function graph = mod.Lookup("main");
  const std::string out = TypeToString(graph->body->type);
  EXPECT_THAT(out, HasSubstr("height")) << out;
  EXPECT_THAT(out, HasSubstr("width")) << out;
  Engine engine;
  ModelPtr model = Model::Create(graph, "m");
  uint64_t seed = 17;
  for (auto [n, h, w] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 4, 4}, {2, 32, 24}, {1, 16, 44}, {3, 40, 8}}) {
    SCOPED_TRACE(StrCat(n, "x", h, "x", w));
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, {n, 3, h, w}, ++seed),
                           RandomTensor(DType::kFloat32, {8, 3, 3, 3}, ++seed),
                           RandomTensor(DType::kFloat32, {8, 8, 3, 3}, ++seed),
                           RandomTensor(DType::kFloat32, {16, 4, 2, 2}, ++seed)};
    std::vector<Tensor> got = engine.Run(*model, in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{n, 4, h, w}));
    ExpectMatchesInterpreter(engine, *model, in);
  }
  engine.WaitForBackgroundCompiles();  // tiered: each shape specialized once, in the background
  EXPECT_EQ(engine.stats().specializations, 4u);
}

// A shape given as an input (ONNX Reshape's second input): the engine specializes on its
// values as on shapes, one executable per distinct value, and a repeat value is a hit.
TEST(EngineValueInputs, SpecializesOnTheValuesOfShapeInputs) {
  ModelPtr m = Model::Create(InferTypes(ParseModule(R"(
def @main(%x: f32[n], %s: i64[2]) {
  relu(dyn.reshape(%x, %s))
}
)"))
                                 .Lookup("main"),
                             "m");
  EXPECT_EQ(m->value_inputs(), std::vector<int>{1});
  Engine engine;
  Tensor x = RandomTensor(DType::kFloat32, {6}, 11);
  auto run = [&](std::vector<int64_t> s) {
    std::vector<Tensor> in{x, Tensor::FromVector<int64_t>({2}, s)};
    std::vector<Tensor> out = engine.Run(*m, in);
    EXPECT_EQ(out.at(0).shape(), s);
    EXPECT_TRUE(TensorsNear(out[0], Interpret(m->graph(), in).at(0)));
  };
  run({2, 3});
  run({3, 2});
  run({2, 3});
  EngineStats st = engine.stats();
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.hits, 1u);
  ASSERT_EQ(st.shapes.size(), 2u);
  EXPECT_THAT(st.shapes[0].shape_key, HasSubstr("s: i64[2] = [2, 3]"));
  // Values are bounded: they are part of the key.
  Tensor big = Tensor::Empty(DType::kInt64, {5000});
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*m, std::vector<Tensor>{x, big});
              }),
              AllOf(HasSubstr("input 1 's' sets shapes"), HasSubstr("at most 4096")));
}

// A shape computed from shapes (Shape -> Gather -> Concat -> Reshape) costs nothing at run
// time: the executable has the kernels of the static model that computes the same thing.
TEST(EngineValueInputs, ComputedShapesFoldAwayAtSpecialization) {
  ModelPtr dyn = Model::Create(InferTypes(ParseModule(R"(
def @main(%x: f32[n, 4]) {
  %s = shape(%x)
  %t = concat(gather(%s, const(i64[1], [0]), axis=0), const(i64[2], [2, 2]), axis=0)
  exp(dyn.reshape(%x, %t))
}
)"))
                                   .Lookup("main"),
                               "dyn");
  ModelPtr st = Model::Create(InferTypes(ParseModule(R"(
def @main(%x: f32[n, 4]) {
  exp(reshape(%x, shape=[-1, 2, 2]))
}
)"))
                                  .Lookup("main"),
                              "static");
  EXPECT_TRUE(dyn->value_inputs().empty());
  Engine engine(Eager());  // one specialization per model and shape, in order
  for (int64_t n : {1, 5}) {
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, {n, 4}, 12 + n)};
    std::vector<Tensor> got = engine.Run(*dyn, in);
    std::vector<Tensor> want = engine.Run(*st, in);
    EXPECT_EQ(got.at(0).shape(), (std::vector<int64_t>{n, 2, 2}));
    EXPECT_TRUE(TensorsNear(got[0], want.at(0)));
  }
  EngineStats s = engine.stats();
  ASSERT_EQ(s.shapes.size(), 4u);
  EXPECT_EQ(s.shapes[0].kernels, s.shapes[1].kernels);
}

// ONNX If on a scalar input (a sample rate): the condition is computed from a value input, so
// each value specializes, and the executable is the taken branch alone, inlined: its kernels,
// nothing of the other branch and no control flow. The branches' shapes differ ([n], [2n]).
TEST(EngineValueInputs, IfOnAScalarInputInlinesTheTakenBranch) {
  ModelPtr m = Model::Create(InferTypes(ParseModule(R"(
def @main(%x: f32[n], %sr: i64[]) {
  dyn.branch(exp(%x), concat(%x, neg(%x), axis=0), equal(%sr, const(i64[], 16000)))
}
)"))
                                 .Lookup("main"),
                             "m");
  EXPECT_EQ(m->value_inputs(), std::vector<int>{1});
  EngineOptions options;
  options.profile = true;
  Engine engine(options);
  Tensor x = RandomTensor(DType::kFloat32, {5}, 21);
  for (int64_t sr : {16000, 8000, 16000}) {
    std::vector<Tensor> in{x, Tensor::Scalar<int64_t>(sr)};
    std::vector<Tensor> out = engine.Run(*m, in);
    EXPECT_EQ(out.at(0).shape(), (std::vector<int64_t>{sr == 16000 ? 5 : 10}));
    for (int64_t i = 0; i < 5; ++i) {
      double v = x.GetAsDouble(i);
      EXPECT_NEAR(out[0].GetAsDouble(i), sr == 16000 ? std::exp(v) : v, 1e-6);
      if (sr != 16000) {
        EXPECT_NEAR(out[0].GetAsDouble(5 + i), -v, 1e-6);
      }
    }
    EXPECT_TRUE(TensorsNear(out[0], Interpret(m->graph(), in).at(0)));
  }
  EngineStats st = engine.stats();
  EXPECT_EQ(st.misses, 2u);
  ASSERT_EQ(st.shapes.size(), 2u);
  std::map<std::string, std::vector<std::string>> kernels;  // per shape key
  for (const KernelProfileStats& k : st.kernel_profile) kernels[k.shape_key].push_back(k.kernel);
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& [key, names] : kernels) {
    const bool then_taken = key.find("= [16000]") != std::string::npos;
    for (const std::string& name : names) {
      EXPECT_THAT(name, Not(HasSubstr("branch"))) << key;
      EXPECT_THAT(name, Not(HasSubstr(then_taken ? "concat" : "exp"))) << key;
    }
  }
}

}  // namespace
}  // namespace kiln
