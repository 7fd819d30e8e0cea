// Tiers (EngineOptions::policy): the shape-generic executable serves any shape of a model whose
// dims the inputs bind, within the reference tolerance of the specialized one; under kTiered a
// new shape is answered by it at once and specialized in the background, once per key; models
// without a generic tier are served eagerly; memory stays bounded over many shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#ifdef __linux__
#include <sys/resource.h>
#include <unistd.h>
#endif

#include "common/engine_options.h"
#include "common/models.h"
#include "engine/engine.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"
#include "passes/instrument.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;

EngineOptions Policy(CompilePolicy p, int threads = 1) {
  return test::With([&](EngineOptions& o) {
    o.policy = p;
    o.num_threads = threads;
  });
}

struct Case {
  const char* name;
  Function graph;
  std::vector<std::vector<int64_t>> shapes;
};

// A transposed conv up to a fixed output_shape from images of a few sizes around half of it:
// its pads are expressions of the size, negative below it.
Function SizedUpsamplingModel() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("h"), Dim::Symbol("w")},
                                  DType::kFloat32));
  return MakeFunction({x}, MakeCall("conv_transpose", {x, test::Weight({3, 2, 3, 3}, 5, "up.w")},
                                    {{"strides", std::vector<int64_t>{2, 2}},
                                     {"output_shape", std::vector<int64_t>{40, 47}}},
                                    "up"));
}

// A segmentation net's pool and unpool: the maxima's positions from max_pool_with_indices,
// then max_unpool putting the maxima back, over images of any size (odd ones lose a row).
Function PoolUnpoolModel() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("h"), Dim::Symbol("w")},
                                  DType::kFloat32));
  const Attrs k2s2 = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                      {"strides", std::vector<int64_t>{2, 2}}};
  Expr pool = MakeCall("max_pool_with_indices", {x}, k2s2, "pool");
  return MakeFunction(
      {x}, MakeCall("max_unpool", {MakeTupleGetItem(pool, 0), MakeTupleGetItem(pool, 1)}, k2s2,
                    "unpool"));
}

std::vector<Case> SymbolicBatchCases() {
  return {
      {"mlp", test::MlpModel(), {{1, 8}, {3, 8}, {17, 8}, {64, 8}}},
      {"encoder", test::EncoderLayerModel(), {{1, 1, 16}, {1, 5, 16}, {3, 7, 16}, {2, 33, 16}}},
      {"elementwise_reduction", test::ElementwiseReductionModel(), {{1, 32}, {9, 32}, {100, 32}}},
      {"shared_and_dead", test::SharedAndDeadModel(), {{1, 6}, {5, 6}, {31, 6}}},
      // Any image size: strided, dilated and asymmetrically padded convs, channels-last; at
      // 70x90 their rows run on both threads (ParallelizeLoops' image nests).
      {"conv_chain",
       test::ConvChainModel(),
       {{1, 3, 19, 23}, {2, 3, 8, 8}, {1, 3, 33, 17}, {1, 3, 70, 90}}},
      // Windowed pools over any image size, the smallest a 2x2 image.
      {"pool_chain", test::PoolChainModel(), {{1, 3, 19, 23}, {2, 3, 2, 2}, {1, 3, 40, 17}}},
      {"same_padded", test::SamePaddedModel(), {{1, 3, 19, 23}, {2, 3, 1, 2}, {1, 3, 40, 17}}},
      // A max pool's positions too (values and indices exactly as specialized).
      {"max_pool_indices",
       test::MaxPoolIndicesModel(),
       {{1, 3, 19, 23}, {2, 3, 1, 2}, {1, 3, 8, 9}}},
      {"sized_upsampling",
       SizedUpsamplingModel(),
       {{1, 3, 19, 23}, {2, 3, 20, 24}, {1, 3, 18, 22}}},
      {"pool_unpool", PoolUnpoolModel(), {{1, 3, 19, 23}, {2, 3, 2, 2}, {1, 3, 16, 9}}},
  };
}

// Every shape through the generic executable matches the specialized one (which the engine
// tests check against the interpreter), and nothing is specialized.
TEST(EngineTiers, GenericOnlyMatchesEager) {
  for (const Case& c : SymbolicBatchCases()) {
    SCOPED_TRACE(c.name);
    ModelPtr model = Model::Create(c.graph, c.name);
    Engine eager(Policy(CompilePolicy::kEager)), generic(Policy(CompilePolicy::kGenericOnly, 2));
    uint64_t seed = 1;
    for (const std::vector<int64_t>& shape : c.shapes) {
      std::vector<Tensor> in{RandomTensor(DType::kFloat32, shape, seed++, -2, 2)};
      std::vector<Tensor> want = eager.Run(*model, in), got = generic.Run(*model, in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(TensorsNear(got[i], want[i]));
      // A second run of the shape is a hit on the bound generic executable.
      got = generic.Run(*model, in);
      EXPECT_TRUE(TensorsNear(got[0], want[0]));
      std::shared_ptr<const Executable> exe = generic.Prepare(*model, in);
      EXPECT_EQ(exe->tier, Tier::kGeneric);
      EXPECT_EQ(exe->inputs[0].shape, shape);
    }
    EngineStats s = generic.stats();
    EXPECT_EQ(s.specializations, 0u);
    EXPECT_EQ(s.generic_builds, 1u);
    EXPECT_EQ(s.generic_unavailable, 0u);
    EXPECT_EQ(s.generic_runs, 3 * c.shapes.size());
    EXPECT_EQ(s.background_queued, 0u);
    // At most one compile per kernel of the generic executable (equal groups share one),
    // whatever the number of shapes.
    std::vector<Tensor> any{RandomTensor(DType::kFloat32, c.shapes[0], 9)};
    EXPECT_LE(s.kernel_compiles, generic.Prepare(*model, any)->launches().size());
  }
}

// A shape bound after the model's generic executable exists goes the fast way (GenericBinder,
// straight from the tensors); the model's first shape, bound while it is built, the slow way
// (BindGeneric, by the symbols' names). Both must make the same executable: the same shapes,
// sizes, memory plan, arena offsets, scalars, symbols and key, and the same results.
TEST(EngineTiers, FastAndSlowBindingsAgree) {
  for (const Case& c : SymbolicBatchCases()) {
    ModelPtr model = Model::Create(c.graph, c.name);
    for (size_t k = 1; k < c.shapes.size(); ++k) {
      SCOPED_TRACE(StrCat(c.name, " shape ", k));
      const std::vector<Tensor> first{RandomTensor(DType::kFloat32, c.shapes[0], 1, -2, 2)};
      const std::vector<Tensor> in{RandomTensor(DType::kFloat32, c.shapes[k], 2, -2, 2)};
      Engine warm(Policy(CompilePolicy::kGenericOnly)), cold(Policy(CompilePolicy::kGenericOnly));
      warm.Run(*model, first);
      std::vector<Tensor> fast_out = warm.Run(*model, in), slow_out = cold.Run(*model, in);
      std::shared_ptr<const Executable> fast = warm.Prepare(*model, in);
      std::shared_ptr<const Executable> slow = cold.Prepare(*model, in);
      ASSERT_EQ(fast->tier, Tier::kGeneric);
      ASSERT_EQ(slow->tier, Tier::kGeneric);
      EXPECT_EQ(fast->shape_key, slow->shape_key);
      EXPECT_EQ(fast->symbols, slow->symbols);
      auto same_sigs = [](const std::vector<TensorSignature>& a,
                          const std::vector<TensorSignature>& b) {
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_EQ(a[i].dtype, b[i].dtype) << i;
          EXPECT_EQ(a[i].shape, b[i].shape) << i;
          EXPECT_EQ(a[i].nbytes, b[i].nbytes) << i;
        }
      };
      same_sigs(fast->inputs, slow->inputs);
      same_sigs(fast->outputs, slow->outputs);
      ASSERT_EQ(fast->intermediates.size(), slow->intermediates.size());
      for (size_t i = 0; i < fast->intermediates.size(); ++i) {
        same_sigs({fast->intermediates[i].type}, {slow->intermediates[i].type});
        EXPECT_EQ(fast->intermediates[i].lifetime.bytes, slow->intermediates[i].lifetime.bytes);
      }
      EXPECT_EQ(fast->plan.offsets, slow->plan.offsets);
      EXPECT_EQ(fast->plan.peak_bytes, slow->plan.peak_bytes);
      EXPECT_EQ(fast->scalars, slow->scalars);
      ASSERT_EQ(fast->buffer_refs.size(), slow->buffer_refs.size());
      for (size_t i = 0; i < fast->buffer_refs.size(); ++i) {
        EXPECT_EQ(fast->buffer_refs[i].kind, slow->buffer_refs[i].kind) << i;
        EXPECT_EQ(fast->buffer_refs[i].index, slow->buffer_refs[i].index) << i;
        EXPECT_EQ(fast->buffer_refs[i].offset, slow->buffer_refs[i].offset) << i;
      }
      ASSERT_EQ(fast->copies.size(), slow->copies.size());
      for (size_t i = 0; i < fast->copies.size(); ++i)
        EXPECT_EQ(fast->copies[i].nbytes, slow->copies[i].nbytes) << i;
      ASSERT_EQ(fast_out.size(), slow_out.size());
      for (size_t i = 0; i < fast_out.size(); ++i)
        EXPECT_TRUE(TensorsNear(fast_out[i], slow_out[i]));
    }
  }
}

// Bad inputs after the generic executable exists: the fast way gives up on them and the slow
// way names the fault, so the message is the one a fresh engine gives, whatever was wrong: a
// constant dim, the rank, the dtype, a window larger than the image, a constraint.
TEST(EngineTiers, BadInputsAfterAGoodShapeReadAsOnAFreshEngine) {
  struct Bad {
    Function graph;
    std::vector<int64_t> good;
    std::vector<Tensor> inputs;
  };
  const Function topk =
      InferTypes(ParseModule("def @main(%x: f32[n, 4]) { topk(%x, axis=0, k=3).0 }"))
          .Lookup("main");
  const Function pool =
      InferTypes(
          ParseModule("def @main(%x: f32[n, 2, h, w]) { max_pool(%x, kernel_shape=[3, 3]) }"))
          .Lookup("main");
  const std::vector<Bad> bad = {
      {test::MlpModel(), {3, 8}, {RandomTensor(DType::kFloat32, {3, 9}, 1)}},
      {test::MlpModel(), {3, 8}, {RandomTensor(DType::kFloat32, {3}, 1)}},
      {test::MlpModel(), {3, 8}, {RandomTensor(DType::kFloat64, {3, 8}, 1)}},
      {pool, {1, 2, 9, 9}, {RandomTensor(DType::kFloat32, {1, 2, 1, 9}, 1)}},
      {topk, {5, 4}, {RandomTensor(DType::kFloat32, {2, 4}, 1)}},
  };
  for (CompilePolicy p : {CompilePolicy::kTiered, CompilePolicy::kGenericOnly}) {
    for (size_t i = 0; i < bad.size(); ++i) {
      SCOPED_TRACE(StrCat(CompilePolicyName(p), " case ", i));
      ModelPtr model = Model::Create(bad[i].graph, "m");
      Engine fresh(Policy(p)), warm(Policy(p));
      warm.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, bad[i].good, 2)});
      const std::string want = ErrorMessage([&] { fresh.Run(*model, bad[i].inputs); });
      EXPECT_FALSE(want.empty());
      EXPECT_EQ(ErrorMessage([&] { warm.Run(*model, bad[i].inputs); }), want);
      warm.WaitForBackgroundCompiles();
      fresh.WaitForBackgroundCompiles();
    }
  }
}

// Records, after each WinogradConvs pass, every conv_nhwc's image size (symbolic or not) and
// whether its weight came out transformed (Winograd's form with U given).
class WinogradRecorder : public PassInstrument {
 public:
  WinogradRecorder() : PassInstrument("winograd_recorder") {}
  void RunAfterPass(const IRModule& m, const PassInfo& info) override {
    if (info.name != "WinogradConvs") return;
    struct Convs : ExprVisitor {
      std::vector<std::pair<bool, bool>>* out;
      void VisitCall(const CallNode* n, const Expr& self) override {
        ExprVisitor::VisitCall(n, self);
        const TensorTypeNode* x = n->args.empty() ? nullptr : AsTensor(n->args[0]->type);
        if (n->op && n->op->name == "conv_nhwc" && x && x->ndim() == 4)
          out->push_back({!x->shape[1].is_const(), n->attrs.GetBool("winograd_filter")});
      }
    } convs;
    std::lock_guard<std::mutex> lock(mu);
    convs.out = &seen;
    convs.Visit(m.Lookup("main")->body);
  }
  // (symbolic image size, transformed) of each conv_nhwc seen, in order.
  std::vector<std::pair<bool, bool>> Take() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(seen, {});
  }
  std::mutex mu;
  std::vector<std::pair<bool, bool>> seen;
};

// Winograd's form over any image size (winograd.any_image_size, on by default) serves the
// generic tier under either policy that builds one, unless pass_config turns it off;
// specializations take the form at their size either way. conv_chain has two convs of 16 -> 16
// channels, stride 1, that the form takes.
TEST(EngineTiers, GenericTierTakesWinogradUnlessConfigSaysNot) {
  using Seen = std::vector<std::pair<bool, bool>>;
  ModelPtr model = Model::Create(test::ConvChainModel(), "conv_chain");
  const std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {1, 3, 64, 64}, 1, -2, 2)};
  auto seen = [&](CompilePolicy policy, std::map<std::string, AttrValue> config) {
    auto recorder = std::make_shared<WinogradRecorder>();
    EngineOptions o = Policy(policy);
    o.instruments = {recorder};
    o.pass_config = std::move(config);
    Engine engine(o);
    engine.Run(*model, in);
    engine.WaitForBackgroundCompiles();
    Seen all = recorder->Take();
    // Which convs took the form: those the recorder saw transformed, in order (a tiered
    // engine builds its generic tier in the background while the first shape compiles).
    Seen transformed;
    for (const auto& s : all)
      if (s.second) transformed.push_back(s);
    std::sort(transformed.begin(), transformed.end());
    return transformed;
  };
  const std::pair<bool, bool> generic{true, true}, specialized{false, true};
  EXPECT_EQ(seen(CompilePolicy::kGenericOnly, {}), (Seen{generic, generic}));
  EXPECT_EQ(seen(CompilePolicy::kTiered, {}), (Seen{specialized, specialized, generic, generic}));
  EXPECT_EQ(seen(CompilePolicy::kTiered, {{"winograd.any_image_size", false}}),
            (Seen{specialized, specialized}));
  EXPECT_EQ(seen(CompilePolicy::kGenericOnly, {{"winograd.any_image_size", false}}), Seen{});
}

// Tiered: a model's first run compiles its shape as eager does, while the generic tier builds
// in the background; from then on the first run of a new shape is served generic and queues it;
// once the background compile is done the shape is served by its specialized executable, equal
// bit for bit to an eager engine's (the same compile).
TEST(EngineTiers, TieredServesGenericThenSpecialized) {
  ModelPtr model = Model::Create(test::EncoderLayerModel(), "encoder");
  Engine eager(Policy(CompilePolicy::kEager)), tiered(Policy(CompilePolicy::kTiered));
  std::vector<Tensor> first_in{RandomTensor(DType::kFloat32, {1, 4, 16}, 4)};
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 9, 16}, 5)};
  std::vector<Tensor> first_want = eager.Run(*model, first_in), want = eager.Run(*model, in);

  EXPECT_EQ(tiered.Explain(*model, first_in).tier, Tier::kSpecialized);
  std::vector<Tensor> first = tiered.Run(*model, first_in);
  EXPECT_EQ(std::memcmp(first[0].raw_data(), first_want[0].raw_data(), first_want[0].nbytes()), 0);
  EXPECT_EQ(tiered.stats().specializations, 1u);
  EXPECT_EQ(tiered.stats().background_queued, 0u);
  tiered.WaitForBackgroundCompiles();  // the generic tier
  EXPECT_EQ(tiered.stats().generic_builds, 1u);

  EXPECT_EQ(tiered.Explain(*model, in).tier, Tier::kGeneric);
  std::vector<Tensor> served = tiered.Run(*model, in);
  EXPECT_TRUE(TensorsNear(served[0], want[0]));
  EXPECT_EQ(tiered.stats().generic_runs, 1u);
  EXPECT_EQ(tiered.stats().background_queued, 1u);
  tiered.WaitForBackgroundCompiles();
  EXPECT_EQ(tiered.Prepare(*model, in)->tier, Tier::kSpecialized);
  std::vector<Tensor> later = tiered.Run(*model, in);
  ASSERT_EQ(later[0].nbytes(), want[0].nbytes());
  EXPECT_EQ(std::memcmp(later[0].raw_data(), want[0].raw_data(), want[0].nbytes()), 0);
  EngineStats s = tiered.stats();
  EXPECT_EQ(s.specializations, 2u);
  EXPECT_EQ(s.background_queued, 1u);
  EXPECT_EQ(s.compile_errors, 0u);
}

// Holds a model's generic build (a pipeline over symbolic input shapes; a specialization's
// are concrete) at its first pass until Open, so a test can run shapes while it is pending.
class HoldGenericBuild : public PassInstrument {
 public:
  HoldGenericBuild() : PassInstrument("hold_generic_build") {}
  void RunBeforePass(const IRModule& mod, const PassInfo&) override {
    if (!mod.Contains("main")) return;
    bool generic = false;
    for (const Var& p : mod.Lookup("main")->params)
      if (const TensorTypeNode* t = AsTensor(p->type); t && !IsConstShape(t->shape)) generic = true;
    if (!generic) return;
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    released_.wait(lock, [this] { return open_; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    released_.notify_all();
  }
  bool held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  std::mutex mu_;
  std::condition_variable released_;
  bool open_ = false, held_ = false;
};

// Tiered: the shapes that come while the model's generic tier is still building are compiled
// as eager compiles them (bit for bit the same, each cached as specialized); once it is built,
// a new shape is served by it.
TEST(EngineTiers, ShapesBeforeTheGenericTierCompileAsEager) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  Engine eager(Policy(CompilePolicy::kEager));
  auto hold = std::make_shared<HoldGenericBuild>();
  EngineOptions o = Policy(CompilePolicy::kTiered);
  o.instruments = {hold};
  Engine tiered(o);
  struct OpenOnExit {  // before the engine goes: its pool waits for the held build
    HoldGenericBuild* hold;
    ~OpenOnExit() { hold->Open(); }
  } open_on_exit{hold.get()};
  for (int64_t batch : {2, 5}) {
    SCOPED_TRACE(StrCat("batch ", batch));
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, {batch, 8}, batch)};
    EXPECT_EQ(tiered.Explain(*model, in).tier, Tier::kSpecialized);
    std::vector<Tensor> got = tiered.Run(*model, in), want = eager.Run(*model, in);
    ASSERT_EQ(got[0].nbytes(), want[0].nbytes());
    EXPECT_EQ(std::memcmp(got[0].raw_data(), want[0].raw_data(), want[0].nbytes()), 0);
    EXPECT_EQ(tiered.Prepare(*model, in)->tier, Tier::kSpecialized);
  }
  EngineStats s = tiered.stats();
  EXPECT_EQ(s.specializations, 2u);
  EXPECT_EQ(s.generic_builds, 0u);
  EXPECT_EQ(s.generic_runs, 0u);
  EXPECT_EQ(s.background_queued, 0u);

  hold->Open();
  tiered.WaitForBackgroundCompiles();
  EXPECT_TRUE(hold->held());
  EXPECT_EQ(tiered.stats().generic_builds, 1u);
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {7, 8}, 7)};
  EXPECT_EQ(tiered.Explain(*model, in).tier, Tier::kGeneric);
  EXPECT_TRUE(TensorsNear(tiered.Run(*model, in)[0], eager.Run(*model, in)[0]));
  s = tiered.stats();
  EXPECT_EQ(s.generic_runs, 1u);
  EXPECT_EQ(s.background_queued, 1u);
}

// specialize_after: a shape is queued on its Nth run, once. (The model's first shape, compiled
// while the generic tier builds, is another shape.)
TEST(EngineTiers, SpecializeAfterCountsRuns) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  EngineOptions o = Policy(CompilePolicy::kTiered);
  o.specialize_after = 3;
  Engine engine(o);
  engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {1, 8}, 2)});
  engine.WaitForBackgroundCompiles();  // the generic tier
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {4, 8}, 1)};
  engine.Run(*model, in);
  engine.Run(*model, in);
  engine.WaitForBackgroundCompiles();
  EXPECT_EQ(engine.stats().background_queued, 0u);
  EXPECT_EQ(engine.Prepare(*model, in)->tier, Tier::kGeneric);  // Prepare is the third lookup
  engine.Run(*model, in);
  engine.Run(*model, in);
  engine.WaitForBackgroundCompiles();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.background_queued, 1u);
  EXPECT_EQ(s.specializations, 2u);
  EXPECT_EQ(engine.Prepare(*model, in)->tier, Tier::kSpecialized);
}

// A model without a generic tier is served eagerly under every policy, and the reason is kept:
// no symbolic dims; shapes that an input's values set (a reshape to a shape given as an input).
TEST(EngineTiers, ModelsWithoutAGenericTierAreServedEagerly) {
  Var x = MakeVar("x", TensorType({2, 3}, DType::kFloat32));
  ModelPtr fixed = Model::Create(MakeFunction({x}, MakeCall("relu", {x})), "fixed");
  Var flat = MakeVar("x", TensorType({Dim::Symbol("n")}, DType::kFloat32));
  Var to = MakeVar("s", TensorType({2}, DType::kInt64));
  ModelPtr reshape = Model::Create(
      MakeFunction({flat, to}, MakeCall("relu", {MakeCall("dyn.reshape", {flat, to})})),
      "reshape_to_input");
  for (CompilePolicy p : {CompilePolicy::kTiered, CompilePolicy::kGenericOnly}) {
    SCOPED_TRACE(CompilePolicyName(p));
    Engine engine(Policy(p)), eager(Policy(CompilePolicy::kEager));
    std::vector<Tensor> a{RandomTensor(DType::kFloat32, {2, 3}, 1)};
    EXPECT_TRUE(TensorsNear(engine.Run(*fixed, a)[0], eager.Run(*fixed, a)[0]));
    std::vector<Tensor> b{RandomTensor(DType::kFloat32, {12}, 2),
                          Tensor::FromVector<int64_t>({2}, {3, 4})};
    EXPECT_TRUE(TensorsNear(engine.Run(*reshape, b)[0], eager.Run(*reshape, b)[0]));
    EngineStats s = engine.stats();
    EXPECT_EQ(s.generic_unavailable, 2u);
    EXPECT_EQ(s.generic_runs, 0u);
    EXPECT_EQ(s.specializations, 2u);
    EXPECT_THAT(engine.GenericUnavailableReason(*fixed), HasSubstr("no symbolic dims"));
    EXPECT_THAT(engine.GenericUnavailableReason(*reshape),
                HasSubstr("its shapes depend on input values"));
    ASSERT_EQ(s.generic_unavailable_reasons.size(), 2u);
  }
}

// Bad inputs are the caller's errors before any tier is involved, and leave nothing behind.
// A max unpool into a fixed output_shape: an image whose unpooled size does not fit it is
// refused by the generic tier as by specialization (a constraint checked per binding), and one
// that fits is served with the scatter at the output's start.
TEST(EngineTiers, UnpoolPastOutputShapeIsRefusedAsWhenSpecialized) {
  Var x = MakeVar("x", TensorType({1, 3, Dim::Symbol("h"), Dim::Symbol("w")}, DType::kFloat32));
  Attrs k2s2 = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                {"strides", std::vector<int64_t>{2, 2}}};
  Expr pool = MakeCall("max_pool_with_indices", {x}, k2s2, "pool");
  k2s2.Set("output_shape", std::vector<int64_t>{1, 3, 9, 8});
  ModelPtr model = Model::Create(
      MakeFunction(
          {x}, MakeCall("max_unpool", {MakeTupleGetItem(pool, 0), MakeTupleGetItem(pool, 1)}, k2s2,
                        "unpool")),
      "unpool_to_size");
  Engine generic(Policy(CompilePolicy::kGenericOnly)), eager(Policy(CompilePolicy::kEager));
  for (const std::vector<int64_t>& fits :
       {std::vector<int64_t>{1, 3, 6, 7}, std::vector<int64_t>{1, 3, 9, 8}}) {
    std::vector<Tensor> in{RandomTensor(DType::kFloat32, fits, 3)};
    EXPECT_TRUE(TensorsNear(generic.Run(*model, in)[0], eager.Run(*model, in)[0]));
  }
  EXPECT_EQ(generic.stats().generic_unavailable, 0u);
  std::vector<Tensor> big{RandomTensor(DType::kFloat32, {1, 3, 12, 8}, 4)};
  Error from_generic = test::ErrorOf([&] { generic.Run(*model, big); });
  Error from_eager = test::ErrorOf([&] { eager.Run(*model, big); });
  EXPECT_EQ(from_generic.code(), from_eager.code());
  EXPECT_EQ(from_generic.code(), ErrorCode::kTypeError);
  EXPECT_THAT(from_generic.what(), HasSubstr("output_shape [1, 3, 9, 8]"));
  EXPECT_THAT(from_eager.what(), HasSubstr("output_shape [1, 3, 9, 8]"));
  EXPECT_EQ(generic.stats().specializations, 0u);
}

TEST(EngineTiers, BadInputsAreErrors) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  Engine engine(Policy(CompilePolicy::kTiered));
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {3, 9}, 1)});
              }),
              HasSubstr("model 'mlp'"));
  EXPECT_THAT(ErrorMessage([&] {
                engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {3}, 1)});
              }),
              HasSubstr("model 'mlp'"));
  engine.WaitForBackgroundCompiles();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.cached_executables, 0u);
  EXPECT_EQ(s.background_queued, 0u);
  EXPECT_EQ(s.compile_errors, 0u);

  EngineOptions o;
  o.specialize_after = 0;
  EXPECT_THAT(ErrorMessage([&] { Engine e(o); }), HasSubstr("specialize_after"));
  o.specialize_after = 1;
  o.compile_threads = 0;
  EXPECT_THAT(ErrorMessage([&] { Engine e(o); }), HasSubstr("compile_threads"));
  o.compile_threads = 1;
  for (int nice : {-1, 20}) {
    o.compile_nice = nice;
    EXPECT_THAT(ErrorMessage([&] { Engine e(o); }), HasSubstr("compile_nice must be 0 to 19"));
  }
  EXPECT_THAT(ErrorMessage([] { ParseCompilePolicy("lazy"); }), HasSubstr("'lazy'"));
  EXPECT_EQ(ParseCompilePolicy("generic_only"), CompilePolicy::kGenericOnly);
}

#ifdef __linux__
// Records the niceness of the threads that run the graph pipeline: the caller's (the thread
// that made it) and the highest of any other thread's.
class NiceRecorder : public PassInstrument {
 public:
  NiceRecorder() : PassInstrument("nice_recorder"), caller_(gettid()) {}
  void RunBeforePass(const IRModule&, const PassInfo&) override {
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    if (errno != 0) return;
    std::atomic<int>& max = gettid() == caller_ ? caller_nice : other_nice;
    int seen = max.load();
    while (nice > seen && !max.compare_exchange_weak(seen, nice)) {
    }
  }
  std::atomic<int> caller_nice{-100}, other_nice{-100};

 private:
  const pid_t caller_;
};

// Background compiles (the generic tier, specializations) run at compile_nice; the model's
// first shape, compiled as eager does, on the run's thread at the process's own priority. A
// pool of two threads is not niced: its threads may start oneTBB's workers, which would
// inherit the niceness and which runs share.
TEST(EngineTiers, BackgroundCompilesRunAtTheirNiceness) {
  for (auto [threads, nice] : {std::pair{1, 19}, std::pair{1, 7}, std::pair{2, 19}}) {
    SCOPED_TRACE(StrCat(threads, " threads, nice ", nice));
    auto recorder = std::make_shared<NiceRecorder>();
    EngineOptions o = Policy(CompilePolicy::kTiered);
    o.compile_threads = threads;
    o.compile_nice = nice;
    o.specialize_after = 2;
    o.instruments = {recorder};
    Engine engine(o);
    ModelPtr model = Model::Create(test::MlpModel(), "mlp");
    const int own = getpriority(PRIO_PROCESS, 0);
    const int background = threads == 1 ? std::max(own, nice) : own;
    engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {3, 8}, 3)});
    engine.WaitForBackgroundCompiles();
    EXPECT_EQ(recorder->caller_nice.load(), own);        // the first shape, on this thread
    EXPECT_EQ(recorder->other_nice.load(), background);  // the generic tier
    const std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {2, 8}, 1)};
    engine.Run(*model, in);
    engine.Run(*model, in);
    engine.WaitForBackgroundCompiles();
    ASSERT_EQ(engine.stats().specializations, 2u);
    EXPECT_EQ(recorder->caller_nice.load(), own);
    EXPECT_EQ(recorder->other_nice.load(), background);
  }
}
#endif

// A relation's checks that symbolic dims leave undecided (a count within a length, a length of
// at least one) are constraints on the model's symbols, checked when a run binds them: the
// generic tier, which binds shapes without inferring types again, refuses such inputs as the
// specialized one does, where its kernels would have read or written past a buffer.
TEST(EngineTiers, ShapeChecksHoldInEveryTier) {
  struct Bad {
    const char* text;
    std::vector<Tensor> inputs;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {"def @main(%x: f32[n, 4]) { topk(%x, axis=0, k=3).0 }",
       {RandomTensor(DType::kFloat32, {2, 4}, 1)},
       "k (at most the length of axis 0)"},
      {"def @main(%x: f32[b, n]) { argmax(%x, axis=1) }",
       {RandomTensor(DType::kFloat32, {3, 0}, 2)},
       "the length of axis 1"},
      {"def @main(%x: f32[n, c]) { group_norm(%x, const(f32[3], [1, 1, 1]), "
       "const(f32[3], [0, 0, 0]), num_groups=2) }",
       {RandomTensor(DType::kFloat32, {2, 3}, 3)},
       "modulo num_groups 2"},
      {"def @main(%x: f32[1, 1, h, w]) { conv(%x, const(f32[1, 1, 3, 3], [1, 1, 1, 1, 1, 1, 1, "
       "1, 1])) }",
       {RandomTensor(DType::kFloat32, {1, 1, 3, 2}, 4)},
       "the effective kernel 3 (at most the padded input)"},
  };
  for (CompilePolicy p :
       {CompilePolicy::kEager, CompilePolicy::kTiered, CompilePolicy::kGenericOnly}) {
    for (const Bad& b : bad) {
      SCOPED_TRACE(std::string(CompilePolicyName(p)) + ": " + b.text);
      ModelPtr model = Model::Create(InferTypes(ParseModule(b.text)).Lookup("main"), "m");
      Engine engine(Policy(p));
      EXPECT_THAT(ErrorMessage([&] { engine.Run(*model, b.inputs); }),
                  AllOf(HasSubstr("model 'm'"), HasSubstr(b.message)));
      engine.WaitForBackgroundCompiles();
      EXPECT_EQ(engine.stats().compile_errors, 0u);
    }
  }
}

// Many threads, random shapes, one tiered engine: every output matches the single-threaded
// eager result within tolerance (bitwise once specialized), and each shape key is compiled
// once. Twice: from a fresh engine (the shapes that come before the generic tier is built
// compile as eager does, concurrently with it), and once it is built (every new shape is
// served generic and specialized in the background).
TEST(EngineTiers, ThreadsWithRandomShapesCompileEachKeyOnce) {
  ModelPtr model = Model::Create(test::EncoderLayerModel(), "encoder");
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t b : {1, 2, 3})
    for (int64_t s : {1, 4, 9, 16}) shapes.push_back({b, s, 16});
  Engine reference(Policy(CompilePolicy::kEager));
  std::vector<std::vector<Tensor>> inputs, want;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back({RandomTensor(DType::kFloat32, shapes[i], 50 + i)});
    want.push_back(reference.Run(*model, inputs.back()));
  }
  for (bool built_first : {false, true}) {
    SCOPED_TRACE(built_first ? "the generic tier built first" : "a fresh engine");
    EngineOptions o = Policy(CompilePolicy::kTiered, 2);
    o.compile_threads = 2;
    Engine engine(o);
    const std::vector<Tensor> first{RandomTensor(DType::kFloat32, {4, 2, 16}, 1)};
    if (built_first) {
      engine.Run(*model, first);  // a shape of its own, compiled as eager does
      engine.WaitForBackgroundCompiles();
    }
    constexpr int kThreads = 16, kRuns = 30;
    std::barrier start(kThreads);
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(t);
        start.arrive_and_wait();
        for (int r = 0; r < kRuns; ++r) {
          size_t i = rng() % shapes.size();
          std::vector<Tensor> got = engine.Run(*model, inputs[i]);
          if (!TensorsNear(got[0], want[i][0])) mismatches.fetch_add(1);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    engine.WaitForBackgroundCompiles();
    EXPECT_EQ(mismatches.load(), 0);
    EngineStats s = engine.stats();
    std::set<std::string> keys;
    for (const ShapeKeyStats& k : s.shapes) keys.insert(k.shape_key);
    EXPECT_EQ(keys.size(), s.shapes.size()) << "a shape key compiled twice";
    EXPECT_EQ(s.generic_builds, 1u);
    if (built_first) {
      EXPECT_EQ(s.specializations, s.background_queued + 1);  // + the first shape
      EXPECT_LE(s.specializations, shapes.size() + 1);
    } else {
      EXPECT_LE(s.background_queued, s.specializations);
      EXPECT_LE(s.specializations, shapes.size());
    }
    EXPECT_EQ(s.compile_errors, 0u);
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<Tensor> got = engine.Run(*model, inputs[i]);
      EXPECT_EQ(std::memcmp(got[0].raw_data(), want[i][0].raw_data(), want[i][0].nbytes()), 0);
    }
  }
}

// 1000 distinct shapes with max_specializations: the cache holds at most that many
// executables, and the arenas stay those of the largest shapes seen.
TEST(EngineTiers, ThousandShapesStayBounded) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  for (CompilePolicy p : {CompilePolicy::kTiered, CompilePolicy::kGenericOnly}) {
    SCOPED_TRACE(CompilePolicyName(p));
    EngineOptions o = Policy(p);
    o.max_specializations = 16;
    o.specialize_after = 4;  // most shapes here run once: they never compile
    Engine engine(o);
    for (int64_t b = 1; b <= 1000; ++b) {
      std::vector<Tensor> in{RandomTensor(DType::kFloat32, {b, 8}, b)};
      engine.Run(*model, in);
      // Tiered: the first shape compiles as eager does while the generic tier builds; the
      // shapes after it are served by that tier.
      if (b == 1) engine.WaitForBackgroundCompiles();
      if (b % 100 == 0) {
        for (int r = 0; r < 4; ++r) engine.Run(*model, in);  // due for specialization
        EXPECT_LE(engine.stats().cached_executables, 16u);
      }
    }
    engine.WaitForBackgroundCompiles();
    EngineStats s = engine.stats();
    EXPECT_LE(s.cached_executables, 16u);
    EXPECT_GE(s.evictions, 1000u - 16u);
    EXPECT_EQ(s.generic_builds, 1u);
    // Each shape due is queued once; one evicted before its turn is dropped, not compiled.
    const bool tiered = p == CompilePolicy::kTiered;
    EXPECT_EQ(s.background_queued, tiered ? 10u : 0u);
    EXPECT_EQ(s.specializations + s.background_dropped, s.background_queued + (tiered ? 1 : 0));
    // The largest arena is that of the largest batch, as planned for it.
    EXPECT_LE(s.planned_peak_bytes, size_t{1000} * 16 * 4 * 2 + 4096);
  }
}

// The default bound: 64 shapes per model, the least recently used evicted past it (a server
// fed ever new shapes keeps its memory without setting anything).
TEST(EngineTiers, DefaultBoundKeepsSixtyFourShapes) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  EngineOptions o = Policy(CompilePolicy::kGenericOnly);  // binds each shape, compiles none
  EXPECT_EQ(o.max_specializations, 64);
  Engine engine(o);
  for (int64_t b = 1; b <= 70; ++b)
    engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {b, 8}, b)});
  EngineStats s = engine.stats();
  EXPECT_EQ(s.cached_executables, 64u);
  EXPECT_EQ(s.evictions, 6u);
  // The first shapes went; the last ones are hits.
  engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {70, 8}, 1)});
  EXPECT_EQ(engine.stats().hits, s.hits + 1);
  engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, {1, 8}, 1)});
  EXPECT_EQ(engine.stats().misses, s.misses + 1);
}

// Forget drops the generic executable too: the next run builds it again.
TEST(EngineTiers, ForgetDropsTheGenericExecutable) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  Engine engine(Policy(CompilePolicy::kGenericOnly));
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {2, 8}, 1)};
  engine.Run(*model, in);
  engine.Forget(*model);
  engine.Run(*model, in);
  EXPECT_EQ(engine.stats().generic_builds, 2u);
}

// A shape that leaves a tensor empty is compiled for itself under every policy (an image of
// height 0 with pads that leave a pool's window room; a slice to no rows), and matches eager;
// other shapes keep the generic tier. Explain says which tier serves each, before and after
// the generic executable is built.
TEST(EngineTiers, ShapesWithAnEmptyTensorAreSpecialized) {
  Var x = MakeVar("x", TensorType({1, 4, Dim::Symbol("h"), Dim::Symbol("w")}, DType::kFloat32));
  const Attrs pool = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                      {"pads", std::vector<int64_t>{2, 2, 2, 2}}};
  ModelPtr model = Model::Create(
      InferTypes(MakeFunction({x}, MakeCall("relu", {MakeCall("max_pool", {x}, pool)}))), "pool");
  Engine eager(Policy(CompilePolicy::kEager));
  for (CompilePolicy p : {CompilePolicy::kGenericOnly, CompilePolicy::kTiered}) {
    SCOPED_TRACE(CompilePolicyName(p));
    Engine engine(Policy(p));
    const std::vector<Tensor> wide{RandomTensor(DType::kFloat32, {1, 4, 5, 37}, 1)};
    const std::vector<Tensor> empty{RandomTensor(DType::kFloat32, {1, 4, 0, 37}, 2)};
    EXPECT_EQ(engine.Explain(*model, empty).tier, Tier::kSpecialized);
    engine.Run(*model, wide);
    engine.WaitForBackgroundCompiles();
    const std::vector<Tensor> also_wide{RandomTensor(DType::kFloat32, {1, 4, 6, 30}, 3)};
    EXPECT_EQ(engine.Explain(*model, also_wide).tier, Tier::kGeneric);
    EXPECT_EQ(engine.Explain(*model, empty).tier, Tier::kSpecialized);
    std::vector<Tensor> got = engine.Run(*model, empty), want = eager.Run(*model, empty);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{1, 4, 2, 39}));
    EXPECT_TRUE(TensorsNear(got[0], want[0]));
    EXPECT_EQ(engine.Prepare(*model, empty)->tier, Tier::kSpecialized);
    EXPECT_EQ(engine.Prepare(*model, also_wide)->tier, Tier::kGeneric);
  }
}

}  // namespace
}  // namespace kiln
