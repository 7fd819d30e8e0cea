// The pass infrastructure's contract (SPEC.md §2): enabling, contexts, config, instruments and
// every one of their ordering and failure rules, Sequential's requirements, pipelines.
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/test_util.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"
#include "passes/instrument.h"
#include "passes/pass.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

IRModule SmallModule() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 4}, DType::kFloat32));
  return IRModule({{"main", MakeFunction({x}, MakeCall("relu", {MakeCall("exp", {x})}))}});
}

// Records every hook call as "<name>.<hook>[:pass]"; throws from the hook named in `throw_on`.
class Recorder : public PassInstrument {
 public:
  Recorder(std::string name, std::vector<std::string>* log, std::string throw_on = "",
           bool veto = false)
      : PassInstrument(name), log_(log), throw_on_(std::move(throw_on)), veto_(veto) {}
  void EnterPassContext() override { Hook("enter"); }
  void ExitPassContext() override { Hook("exit"); }
  bool ShouldRun(const IRModule&, const PassInfo& info) override {
    Hook("should_run", info.name);
    return !veto_;
  }
  void RunBeforePass(const IRModule&, const PassInfo& info) override { Hook("before", info.name); }
  void RunAfterPass(const IRModule&, const PassInfo& info) override { Hook("after", info.name); }

 private:
  void Hook(const std::string& hook, const std::string& pass = "") {
    log_->push_back(name() + "." + hook + (pass.empty() ? "" : ":" + pass));
    if (hook == throw_on_) Throw(ErrorCode::kInternal, name(), " failed in ", hook);
  }
  std::vector<std::string>* log_;
  std::string throw_on_;
  bool veto_;
};

PassPtr Counting(const std::string& name, int* runs, int opt_level = 0,
                 std::vector<std::string> required = {}) {
  return CreateModulePass(PassInfo{name, opt_level, std::move(required)},
                          [runs](const IRModule& m, const PassContext&) {
                            ++*runs;
                            return m;
                          });
}

TEST(PassContext, EnablingRule) {
  PassContext ctx;
  EXPECT_EQ(ctx.opt_level, 2);
  EXPECT_TRUE(ctx.PassEnabled({"A", 2, {}}));
  EXPECT_FALSE(ctx.PassEnabled({"A", 3, {}}));
  ctx.disabled_passes = {"A"};
  EXPECT_FALSE(ctx.PassEnabled({"A", 0, {}}));
  ctx.required_passes = {"A"};  // required wins over disabled and over opt_level
  EXPECT_TRUE(ctx.PassEnabled({"A", 9, {}}));
}

TEST(PassContext, ConfigKeysAreRegisteredAndTyped) {
  RegisterPassConfig("test.limit", AttrKind::kInt, int64_t{10});
  RegisterPassConfig("test.scale", AttrKind::kFloat, 1.0);
  PassContext ctx;
  EXPECT_EQ(ctx.GetConfigInt("test.limit"), 10);
  ctx.SetConfig("test.limit", int64_t{3});
  EXPECT_EQ(ctx.GetConfigInt("test.limit"), 3);
  ctx.SetConfig("test.scale", int64_t{2});  // ints widen to floats
  EXPECT_DOUBLE_EQ(ctx.GetConfigFloat("test.scale"), 2.0);
  std::string unknown = ErrorMessage([&] { ctx.SetConfig("test.nope", int64_t{1}); });
  EXPECT_THAT(unknown, HasSubstr("unknown pass config key 'test.nope'"));
  EXPECT_THAT(unknown, HasSubstr("test.limit"));
  EXPECT_THAT(unknown, HasSubstr("test.scale"));
  EXPECT_THAT(ErrorMessage([&] { ctx.SetConfig("test.limit", std::string("x")); }),
              HasSubstr("pass config 'test.limit' must be int, got string"));
  EXPECT_THAT(ErrorMessage([&] { ctx.GetConfig("test.nope"); }), HasSubstr("test.nope"));
}

TEST(PassContext, ScopesNestPerThread) {
  EXPECT_EQ(PassContext::Current().opt_level, 2);
  auto outer = std::make_shared<PassContext>();
  outer->opt_level = 3;
  {
    PassContextScope s1(outer);
    EXPECT_EQ(PassContext::Current().opt_level, 3);
    auto inner = std::make_shared<PassContext>();
    inner->opt_level = 0;
    {
      PassContextScope s2(inner);
      EXPECT_EQ(PassContext::Current().opt_level, 0);
      int seen = -1;
      std::thread t([&] { seen = PassContext::Current().opt_level; });
      t.join();
      EXPECT_EQ(seen, 2);  // another thread has its own default context
    }
    EXPECT_EQ(PassContext::Current().opt_level, 3);
  }
  EXPECT_EQ(PassContext::Current().opt_level, 2);
}

TEST(Instruments, EnterAndExitRunInListOrder) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments(
      {std::make_shared<Recorder>("a", &log), std::make_shared<Recorder>("b", &log)});
  {
    PassContextScope scope(ctx);
    int runs = 0;
    (*Counting("P", &runs))(SmallModule());
    scope.Close();
  }
  EXPECT_THAT(log,
              ElementsAre("a.enter", "b.enter", "a.should_run:P", "b.should_run:P", "a.before:P",
                          "b.before:P", "a.after:P", "b.after:P", "a.exit", "b.exit"));
}

TEST(Instruments, EnterThrowingExitsThoseEnteredAndClears) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<Recorder>("a", &log),
                       std::make_shared<Recorder>("b", &log, "enter"),
                       std::make_shared<Recorder>("c", &log)});
  EXPECT_THAT(ErrorMessage([&] { PassContextScope scope(ctx); }), HasSubstr("b failed in enter"));
  EXPECT_THAT(log, ElementsAre("a.enter", "b.enter", "a.exit"));
  EXPECT_TRUE(ctx->instruments().empty());
  EXPECT_NE(&PassContext::Current(), ctx.get());  // the scope never opened
}

TEST(Instruments, ExitThrowingClearsAndPropagates) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments(
      {std::make_shared<Recorder>("a", &log, "exit"), std::make_shared<Recorder>("b", &log)});
  PassContextScope scope(ctx);
  EXPECT_THAT(ErrorMessage([&] { scope.Close(); }), HasSubstr("a failed in exit"));
  EXPECT_THAT(log, ElementsAre("a.enter", "b.enter", "a.exit"));
  EXPECT_TRUE(ctx->instruments().empty());
  EXPECT_NE(&PassContext::Current(), ctx.get());
}

TEST(Instruments, ShouldRunVetoesUnlessRequired) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<Recorder>("a", &log, "", /*veto=*/true),
                       std::make_shared<Recorder>("b", &log)});
  PassContextScope scope(ctx);
  int runs = 0;
  PassPtr p = Counting("P", &runs);
  (*p)(SmallModule());
  EXPECT_EQ(runs, 0);
  EXPECT_THAT(log, ElementsAre("a.enter", "b.enter", "a.should_run:P"));
  log.clear();
  ctx->required_passes = {"P"};  // required: should-run is not asked
  (*p)(SmallModule());
  EXPECT_EQ(runs, 1);
  EXPECT_THAT(log, ElementsAre("a.before:P", "b.before:P", "a.after:P", "b.after:P"));
}

TEST(Instruments, ThrowingInShouldRunBeforeOrAfterPropagatesAtOnce) {
  for (std::string hook : {"should_run", "before", "after"}) {
    std::vector<std::string> log;
    auto ctx = std::make_shared<PassContext>();
    ctx->SetInstruments(
        {std::make_shared<Recorder>("a", &log, hook), std::make_shared<Recorder>("b", &log)});
    PassContextScope scope(ctx);
    int runs = 0;
    EXPECT_THAT(ErrorMessage([&] { (*Counting("P", &runs))(SmallModule()); }),
                HasSubstr("a failed in " + hook));
    EXPECT_EQ(log.back(), "a." + hook + ":P") << hook;  // nothing ran after the throw
    EXPECT_EQ(runs, hook == "after" ? 1 : 0) << hook;
    scope.Close();  // exit hooks still run
    EXPECT_EQ(log.back(), "b.exit");
  }
}

TEST(Instruments, OverrideInstrumentsExitsOldAndEntersNew) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<Recorder>("old", &log)});
  PassContextScope scope(ctx);
  ctx->OverrideInstruments(
      {std::make_shared<Recorder>("new1", &log), std::make_shared<Recorder>("new2", &log)});
  scope.Close();
  EXPECT_THAT(log, ElementsAre("old.enter", "old.exit", "new1.enter", "new2.enter", "new1.exit",
                               "new2.exit"));
}

TEST(Passes, ThrowingPassNamesItselfAndLeavesTheModule) {
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<Recorder>("a", &log)});
  IRModule m = SmallModule();
  std::string before = Print(m);
  PassPtr bad = CreateModulePass(PassInfo{"Broken", 0, {}},
                                 [](const IRModule&, const PassContext&) -> IRModule {
                                   Throw(ErrorCode::kInvalidArgument, "something is off");
                                 });
  {
    PassContextScope scope(ctx);
    EXPECT_THAT(ErrorMessage([&] { (*Sequential({bad}))(m); }),
                HasSubstr("pass 'Broken': something is off"));
  }
  EXPECT_EQ(Print(m), before);
  EXPECT_EQ(log.back(), "a.exit");  // the scope's destructor ran the exit hooks
}

TEST(Passes, SequentialRunsRequiredPassesFirst) {
  static int a_runs = 0;
  static bool registered = [] {
    PassRegistry::Global().Register(
        PassRegistration{.name = "TestA",
                         .opt_level = 0,
                         .required = {},
                         .options = {},
                         .doc = "",
                         .create = [](const Attrs&) { return Counting("TestA", &a_runs); }});
    PassRegistry::Global().Register(PassRegistration{
        .name = "TestCycle1",
        .opt_level = 0,
        .required = {"TestCycle2"},
        .options = {},
        .doc = "",
        .create = [](const Attrs&) { return Counting("TestCycle1", &a_runs, 0, {"TestCycle2"}); }});
    PassRegistry::Global().Register(PassRegistration{
        .name = "TestCycle2",
        .opt_level = 0,
        .required = {"TestCycle1"},
        .options = {},
        .doc = "",
        .create = [](const Attrs&) { return Counting("TestCycle2", &a_runs, 0, {"TestCycle1"}); }});
    return true;
  }();
  (void)registered;
  std::vector<std::string> log;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<Recorder>("r", &log)});
  PassContextScope scope(ctx);
  int b_runs = 0;
  a_runs = 0;
  (*Sequential({Counting("TestB", &b_runs, 0, {"TestA"})}))(SmallModule());
  EXPECT_EQ(a_runs, 1);
  EXPECT_EQ(b_runs, 1);
  EXPECT_THAT(log, ::testing::Contains("r.before:TestA"));
  auto a_pos = std::find(log.begin(), log.end(), "r.after:TestA");
  auto b_pos = std::find(log.begin(), log.end(), "r.before:TestB");
  EXPECT_LT(a_pos, b_pos);

  EXPECT_THAT(ErrorMessage([&] {
                (*Sequential({Counting("TestC", &b_runs, 0, {"NoSuchPass"})}))(SmallModule());
              }),
              HasSubstr("requires unknown pass 'NoSuchPass'"));
  EXPECT_THAT(ErrorMessage([&] {
                (*Sequential({PassRegistry::Global().Create("TestCycle1")}))(SmallModule());
              }),
              HasSubstr("pass requirement cycle: TestCycle1 -> TestCycle2 -> TestCycle1"));
}

TEST(Passes, SequentialHonoursOptLevelAndDisabled) {
  int low = 0, high = 0;
  PassPtr seq = Sequential({Counting("Low", &low, 1), Counting("High", &high, 3)});
  auto ctx = std::make_shared<PassContext>();
  {
    PassContextScope scope(ctx);
    (*seq)(SmallModule());
  }
  EXPECT_EQ(low, 1);
  EXPECT_EQ(high, 0);
  ctx->opt_level = 3;
  ctx->disabled_passes = {"Low"};
  {
    PassContextScope scope(ctx);
    (*seq)(SmallModule());
  }
  EXPECT_EQ(low, 1);
  EXPECT_EQ(high, 1);
}

TEST(Passes, FunctionPassSkipsMarkedFunctionsAndReinfersTypes) {
  Var x = MakeVar("x", TensorType({3}, DType::kFloat32));
  Function f = MakeFunction({x}, MakeCall("exp", {x}));
  Function g = MakeFunction({x}, MakeCall("exp", {x}), nullptr, Attrs{{"skip_optimization", true}});
  IRModule m({{"f", InferTypes(f)}, {"g", InferTypes(g)}});
  int calls = 0;
  PassPtr to_neg = CreateFunctionPass(
      PassInfo{"ExpToNeg", 0, {}}, [&](const Function& fn, const IRModule&, const PassContext&) {
        ++calls;
        return MakeFunction(fn->params, MakeCall("neg", {fn->params[0]}), nullptr, fn->attrs);
      });
  IRModule out = (*to_neg)(m);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out.Lookup("g"), m.Lookup("g"));
  EXPECT_EQ(AsCall(out.Lookup("f")->body)->op->name, "neg");
  EXPECT_EQ(TypeToString(out.Lookup("f")->body->type), "f32[3]");
}

TEST(Passes, TimingReportIsNested) {
  auto timing = std::make_shared<PassTimingInstrument>();
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({timing});
  int a = 0, b = 0;
  {
    PassContextScope scope(ctx);
    (*Sequential({Counting("A", &a), Counting("B", &b), Counting("A", &a)}, "Outer"))(
        SmallModule());
  }
  ASSERT_EQ(timing->report().size(), 1u);
  const auto& outer = timing->report()[0];
  EXPECT_EQ(outer.name, "Outer");
  ASSERT_EQ(outer.children.size(), 2u);
  EXPECT_EQ(outer.children[0].name, "A");
  EXPECT_EQ(outer.children[0].calls, 2);
  EXPECT_EQ(outer.children[1].name, "B");
  EXPECT_GE(outer.total_ms, outer.children[0].total_ms + outer.children[1].total_ms - 1e-9);
  EXPECT_THAT(timing->Render(), HasSubstr("  A"));
  EXPECT_TRUE(timing->Ran("B"));
  EXPECT_FALSE(timing->Ran("C"));
}

TEST(Passes, PrintIRBeforeAndAfterChosenPasses) {
  std::vector<std::string> out;
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<PrintIRInstrument>(
      std::vector<std::string>{"B"}, true, true, [&](const std::string& s) { out.push_back(s); })});
  int a = 0, b = 0;
  PassContextScope scope(ctx);
  (*Sequential({Counting("A", &a), Counting("B", &b)}))(SmallModule());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[0], HasSubstr("// IR before B"));
  EXPECT_THAT(out[0], HasSubstr("def @main"));
  EXPECT_THAT(out[1], HasSubstr("// IR after B"));
}

TEST(Passes, VerifierCatchesUndefinedVariables) {
  Var x = MakeVar("x", TensorType({3}, DType::kFloat32));
  Var stray = MakeVar("stray", TensorType({3}, DType::kFloat32));
  IRModule bad({{"main", MakeFunction({x}, MakeCall("add", {x, stray}))}});
  EXPECT_THAT(ErrorMessage([&] { VerifyModule(bad, false); }),
              HasSubstr("variable %stray is used but not defined"));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({std::make_shared<IRVerifierInstrument>()});
  PassContextScope scope(ctx);
  PassPtr breaker = CreateModulePass(PassInfo{"Breaker", 0, {}},
                                     [&](const IRModule&, const PassContext&) { return bad; });
  EXPECT_THAT(ErrorMessage([&] { (*breaker)(SmallModule()); }),
              HasSubstr("IR verifier after pass 'Breaker'"));
}

TEST(Passes, DumpIRWritesOneFilePerChangingStep) {
  std::string dir = ::testing::TempDir() + "/kiln_dump_ir_test";
  std::filesystem::remove_all(dir);
  auto dump = std::make_shared<DumpIRInstrument>(dir);
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({dump});
  int same = 0;
  PassPtr change =
      CreateModulePass(PassInfo{"ExpToNeg", 0, {}}, [](const IRModule& m, const PassContext&) {
        Function f = m.Lookup("main");
        return m.With("main", MakeFunction(f->params, MakeCall("neg", {f->params[0]})));
      });
  {
    PassContextScope scope(ctx);
    (*Sequential({Counting("Same", &same), change, Counting("Same2", &same)}, "Seq"))(
        SmallModule());
  }
  ASSERT_EQ(dump->files().size(), 2u);
  EXPECT_THAT(dump->files()[0], HasSubstr("000_input.kir"));
  EXPECT_THAT(dump->files()[1], HasSubstr("001_ExpToNeg.kir"));
  std::ifstream f(dump->files()[1]);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("neg(%x)"));
  // Each file parses back.
  EXPECT_NO_THROW(ParseModule(text));
  std::filesystem::remove_all(dir);
}

// `add(%x, const)`, and a pass that writes through the constant's shared buffer: the classic
// in-place folding bug.
IRModule AddOfConstant() {
  Var x = MakeVar("x", TensorType({3}, DType::kFloat32));
  Tensor c = Tensor::FromVector<float>({3}, {1, 2, 3});
  return IRModule({{"main", MakeFunction({x}, MakeCall("add", {x, MakeConstant(c)}))}});
}
PassPtr SneakyPass() {
  return CreateModulePass(PassInfo{"Sneaky", 0, {}}, [](const IRModule& mod, const PassContext&) {
    const CallNode* call = AsCall(mod.Lookup("main")->body);
    float& v = AsConstant(call->args[1])->value.data<float>()[0];
    v += 1;
    return mod;
  });
}

TEST(Passes, TestingModeCatchesAPassThatModifiesItsInput) {
  IRModule m = AddOfConstant();
  PassPtr sneaky = SneakyPass();
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  EXPECT_THAT(ErrorMessage([&] { (*sneaky)(m); }),
              HasSubstr("pass 'Sneaky' modified the module it was given"));
}

// Test mode is on by default for every pass the pass tests run, not only where a test sets it:
// ctest gives these tests KILN_TESTING_CHECK_IMMUTABLE=1 (tests/CMakeLists.txt).
TEST(PassInfra, TestModeIsOnByDefaultInPassTests) {
  const char* env = std::getenv("KILN_TESTING_CHECK_IMMUTABLE");
  if (!env || std::string(env) != "1")
    GTEST_SKIP() << "KILN_TESTING_CHECK_IMMUTABLE=1 is not set: run this test through ctest";
  EXPECT_TRUE(PassContext().GetConfigBool("testing.check_immutable"));
  IRModule m = AddOfConstant();
  // No config set anywhere: the thread's default context.
  EXPECT_THAT(ErrorMessage([&] { (*SneakyPass())(m); }),
              HasSubstr("pass 'Sneaky' modified the module it was given"));
}

TEST(Pipelines, ParseAndPrintRoundTrip) {
  PassPtr p = ParsePipeline("InferType, InferType");
  EXPECT_EQ(PipelineToString(p), "InferType,InferType");
  EXPECT_EQ(SequentialPasses(p).size(), 2u);
  EXPECT_THAT(ErrorMessage([] { ParsePipeline("InferType,Bogus"); }),
              HasSubstr("unknown pass 'Bogus'"));
  EXPECT_THAT(ErrorMessage([] { ParsePipeline("InferType(x=1)"); }),
              HasSubstr("pass 'InferType' has no attribute 'x'"));
  EXPECT_THAT(ErrorMessage([] { ParsePipeline("InferType("); }), HasSubstr("expected"));
}

TEST(Pipelines, UserPassesBehaveLikeBuiltins) {
  static int runs = 0;
  PassRegistry::Global().Register(
      PassRegistration{.name = "UserCount",
                       .opt_level = 1,
                       .required = {"InferType"},
                       .options = {AttrSpec{"step", AttrKind::kInt, AttrValue(int64_t{1})}},
                       .doc = "counts",
                       .create = [](const Attrs& o) {
                         int64_t step = o.GetInt("step");
                         return CreateModulePass(
                             PassInfo{"UserCount", 1, {"InferType"}},
                             [step](const IRModule& m, const PassContext&) {
                               runs += static_cast<int>(step);
                               return m;
                             },
                             o);
                       }});
  PassPtr p = ParsePipeline("UserCount(step=5),UserCount");
  EXPECT_EQ(PipelineToString(p), "UserCount(step=5),UserCount");
  (*p)(SmallModule());
  EXPECT_EQ(runs, 6);
}

// A user pass written as a class: it takes part in pipelines like a built-in.
class ReluToAbs : public Pass {
 public:
  ReluToAbs() : Pass(PassInfo{"ReluToAbs", 1, {"InferType"}}) {}

 protected:
  IRModule Run(const IRModule& m, const PassContext&) const override {
    class Rewriter : public ExprMutator {
     protected:
      Expr MutateCall(const CallNode* n, const Expr& self) override {
        Expr e = ExprMutator::MutateCall(n, self);
        const CallNode* c = AsCall(e);
        if (c->op && c->op->name == "relu") return MakeCall("abs", c->args);
        return e;
      }
    };
    IRModule out = m;
    for (const auto& [name, f] : m.functions()) {
      Rewriter r;
      out = out.With(name, std::static_pointer_cast<const FunctionNode>(r.Mutate(f)));
    }
    return out;
  }
};

TEST(Pipelines, UserPassClassesBehaveLikeBuiltins) {
  PassRegistry::Global().Register(PassRegistration{
      .name = "ReluToAbs",
      .opt_level = 1,
      .required = {"InferType"},
      .options = {},
      .doc = "",
      .create = [](const Attrs&) -> PassPtr { return std::make_shared<ReluToAbs>(); }});
  auto timing = std::make_shared<PassTimingInstrument>();
  auto ctx = std::make_shared<PassContext>();
  ctx->SetInstruments({timing});
  PassContextScope scope(ctx);
  IRModule out = (*ParsePipeline("ReluToAbs"))(SmallModule());
  EXPECT_THAT(Print(out), HasSubstr("abs("));
  EXPECT_TRUE(timing->Ran("ReluToAbs"));
  EXPECT_TRUE(timing->Ran("InferType"));  // its requirement ran first
  ctx->disabled_passes = {"ReluToAbs"};
  EXPECT_THAT(Print((*ParsePipeline("ReluToAbs"))(SmallModule())), HasSubstr("relu("));
}

}  // namespace
}  // namespace kiln
