// Custom passes and instruments through the C API, and the engine's statistics as JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "api/c_api_util.h"
#include "kiln.h"

namespace kiln::test {
namespace {

struct OptionsHandle {
  kiln_options* o = nullptr;
  OptionsHandle() { KILN_EXPECT_OK(kiln_options_create(&o)); }
  ~OptionsHandle() { kiln_options_destroy(o); }
};

struct EngineHandle {
  kiln_engine* engine = nullptr;
  explicit EngineHandle(const kiln_options* o) { KILN_EXPECT_OK(kiln_engine_create(o, &engine)); }
  ~EngineHandle() { kiln_engine_destroy(engine); }
};

// A pass that rewrites the module's text: every relu becomes a sigmoid.
kiln_status ReluToSigmoid(const char* module_text, kiln_pass_result* result, void* user_data) {
  ++*static_cast<int*>(user_data);
  std::string text = module_text;
  for (size_t at; (at = text.find("relu(")) != std::string::npos;) text.replace(at, 4, "sigmoid");
  return kiln_pass_result_set_text(result, text.c_str());
}

TEST(CApiPasses, ReplacementTextIsCompiledAndRun) {
  static int calls = 0;
  const char* required[1] = {"InferType"};
  KILN_ASSERT_OK(
      kiln_register_graph_pass("CppReluToSigmoid", 0, 1, required, ReluToSigmoid, &calls));
  CMlp mlp(6, 5, 3, 7);
  std::vector<float> x = mlp.Input(4, 3), y;

  OptionsHandle options;
  KILN_ASSERT_OK(kiln_options_set_pipeline(options.o, "InferType,CppReluToSigmoid,InferType"));
  // Eager: one compile, on this thread (tiered would run the pass again, in the background).
  KILN_ASSERT_OK(kiln_options_set_compile_policy(options.o, "eager"));
  EngineHandle engine(options.o);
  KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x, 4, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x, 4, /*sigmoid=*/true), "rewritten");
  KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x, 4, mlp.in, mlp.out, &y));
  EXPECT_EQ(calls, 1);  // a cache hit runs no pass

  // Without the pass, the same model computes relu.
  EngineHandle plain(nullptr);
  KILN_ASSERT_OK(RunInto(plain.engine, mlp.model, x, 4, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x, 4), "plain");
}

kiln_status BadText(const char*, kiln_pass_result* result, void*) {
  return kiln_pass_result_set_text(result, "def @main(%x: f32[2]) {\n  relu(%x\n}");
}

kiln_status Refuses(const char*, kiln_pass_result* result, void*) {
  kiln_pass_result_set_error(result, "no thanks");
  return KILN_UNSUPPORTED;
}

TEST(CApiPasses, CallbackErrorsNameThePass) {
  KILN_ASSERT_OK(kiln_register_graph_pass("CppBadText", 0, 0, nullptr, BadText, nullptr));
  KILN_ASSERT_OK(kiln_register_graph_pass("CppRefuses", 0, 0, nullptr, Refuses, nullptr));
  CMlp mlp(4, 4, 2, 8);
  std::vector<float> x = mlp.Input(2, 1), y;
  {
    OptionsHandle options;
    KILN_ASSERT_OK(kiln_options_set_pipeline(options.o, "InferType,CppBadText"));
    EngineHandle engine(options.o);
    EXPECT_EQ(RunInto(engine.engine, mlp.model, x, 2, mlp.in, mlp.out, &y), KILN_PARSE_ERROR);
    std::string msg = kiln_last_error();
    EXPECT_NE(msg.find("pass 'CppBadText'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not parse"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cmlp(x: f32[2, 4])"), std::string::npos) << msg;  // the shape key
  }
  {
    OptionsHandle options;
    KILN_ASSERT_OK(kiln_options_set_pipeline(options.o, "CppRefuses"));
    EngineHandle engine(options.o);
    EXPECT_EQ(RunInto(engine.engine, mlp.model, x, 2, mlp.in, mlp.out, &y), KILN_UNSUPPORTED);
    std::string msg = kiln_last_error();
    EXPECT_NE(msg.find("pass 'CppRefuses': the callback returned KILN_UNSUPPORTED: no thanks"),
              std::string::npos)
        << msg;
    // The failed compile left nothing behind: a later run fails the same way again.
    EXPECT_EQ(RunInto(engine.engine, mlp.model, x, 2, mlp.in, mlp.out, &y), KILN_UNSUPPORTED);
    std::string stats = StatsJson(engine.engine);
    EXPECT_NE(stats.find("\"compile_errors\":2"), std::string::npos) << stats;
    EXPECT_NE(stats.find("\"cached_executables\":0"), std::string::npos) << stats;
  }
  // A disabled C pass does not run; a required one runs whatever the opt level.
  {
    OptionsHandle options;
    KILN_ASSERT_OK(kiln_options_set_pipeline(options.o, "InferType,CppRefuses"));
    KILN_ASSERT_OK(kiln_options_disable_pass(options.o, "CppRefuses"));
    EngineHandle engine(options.o);
    KILN_EXPECT_OK(RunInto(engine.engine, mlp.model, x, 2, mlp.in, mlp.out, &y));
  }
}

// Records the hooks' calls in order; the mutex because hooks may come from several threads.
struct HookLog {
  std::mutex mu;
  std::vector<std::string> events;
  int with_text = 0;
};

void Before(const char* pass, const char* text, void* user_data) {
  auto* log = static_cast<HookLog*>(user_data);
  std::lock_guard<std::mutex> lock(log->mu);
  log->events.push_back(std::string("before ") + pass);
  if (text) ++log->with_text;
}

void After(const char* pass, const char*, void* user_data) {
  auto* log = static_cast<HookLog*>(user_data);
  std::lock_guard<std::mutex> lock(log->mu);
  log->events.push_back(std::string("after ") + pass);
}

TEST(CApiInstruments, HooksSeeEveryPassInOrder) {
  HookLog log;
  CMlp mlp(4, 8, 2, 9);
  std::vector<float> x = mlp.Input(3, 2), y;
  OptionsHandle options;
  KILN_ASSERT_OK(kiln_options_set_pipeline(options.o, "InferType,FoldConstant"));
  KILN_ASSERT_OK(kiln_options_add_instrument(options.o, Before, After, 0, &log));
  KILN_ASSERT_OK(kiln_options_add_instrument(options.o, nullptr, After, 1, &log));
  // Eager: one compile, on this thread (tiered would run the hooks again, in the background).
  KILN_ASSERT_OK(kiln_options_set_compile_policy(options.o, "eager"));
  EngineHandle engine(options.o);
  KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x, 3, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x, 3), "instrumented");

  ASSERT_GE(log.events.size(), 4u);
  // The pipeline (a Sequential) is the outer pass; its first child is InferType.
  EXPECT_EQ(log.events[1], "before InferType");
  EXPECT_EQ(log.events[2], "after InferType");
  EXPECT_EQ(log.events[3], "after InferType");  // the second instrument's after hook
  EXPECT_NE(std::find(log.events.begin(), log.events.end(), "before FoldConstant"),
            log.events.end());
  EXPECT_NE(std::find(log.events.begin(), log.events.end(), "after FuseOps"), log.events.end());
  EXPECT_EQ(log.with_text, 0);  // the first instrument did not ask for text
  size_t before = std::count_if(log.events.begin(), log.events.end(),
                                [](const std::string& e) { return e.rfind("before ", 0) == 0; });
  EXPECT_EQ(before * 2, log.events.size() - before);  // two after hooks per before hook

  // A cache hit compiles nothing: no hooks.
  size_t n = log.events.size();
  KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x, 3, mlp.in, mlp.out, &y));
  EXPECT_EQ(log.events.size(), n);
}

// Text for the named passes only: every hook still runs, and only FoldConstant's and FuseOps'
// get the module (the pass name, then a text that parses); a bad list is refused by name.
struct TextLog {
  std::mutex mu;
  std::vector<std::string> with_text, without_text;
};

void AfterText(const char* pass, const char* text, void* user_data) {
  auto* log = static_cast<TextLog*>(user_data);
  std::lock_guard<std::mutex> lock(log->mu);
  (text ? log->with_text : log->without_text).push_back(pass);
  if (text) {
    EXPECT_NE(std::string(text).find("def @"), std::string::npos) << pass;
  }
}

TEST(CApiInstruments, TextOnlyForTheNamedPasses) {
  TextLog log;
  CMlp mlp(4, 8, 2, 9);
  std::vector<float> x = mlp.Input(3, 2), y;
  OptionsHandle options;
  KILN_ASSERT_OK(kiln_options_set_compile_policy(options.o, "eager"));
  KILN_ASSERT_OK(kiln_options_add_instrument_ir_of(options.o, nullptr, AfterText,
                                                   "FoldConstant,FuseOps", &log));
  EngineHandle engine(options.o);
  KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x, 3, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x, 3), "instrumented");
  ASSERT_FALSE(log.with_text.empty());
  for (const std::string& p : log.with_text)
    EXPECT_TRUE(p == "FoldConstant" || p == "FuseOps") << p;
  EXPECT_NE(std::find(log.with_text.begin(), log.with_text.end(), "FuseOps"), log.with_text.end());
  EXPECT_NE(std::find(log.without_text.begin(), log.without_text.end(), "InferType"),
            log.without_text.end());

  // The pipelines' names are what the hooks see too.
  OptionsHandle pipelines;
  KILN_EXPECT_OK(kiln_options_add_instrument_ir_of(pipelines.o, nullptr, AfterText,
                                                   "GraphPipeline,LoopPipeline", &log));

  OptionsHandle bad;
  EXPECT_EQ(kiln_options_add_instrument_ir_of(bad.o, nullptr, AfterText, "FuseOps,Nope", &log),
            KILN_NOT_FOUND);
  EXPECT_NE(std::string(kiln_last_error()).find("'Nope'"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_options_add_instrument_ir_of(bad.o, nullptr, AfterText, "FuseOps,", &log),
            KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_options_add_instrument_ir_of(bad.o, nullptr, AfterText, nullptr, &log),
            KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_options_add_instrument_ir_of(bad.o, nullptr, nullptr, "FuseOps", &log),
            KILN_INVALID_ARGUMENT);
}

TEST(CApiStats, CountsAndProfilesAsJson) {
  CMlp mlp(8, 16, 4, 10);
  std::vector<float> x1 = mlp.Input(1, 1), x5 = mlp.Input(5, 2), y;
  {
    OptionsHandle options;  // eager: each new shape is a specialization, counted at once
    KILN_ASSERT_OK(kiln_options_set_compile_policy(options.o, "eager"));
    EngineHandle engine(options.o);
    KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x1, 1, mlp.in, mlp.out, &y));
    KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x1, 1, mlp.in, mlp.out, &y));
    KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x5, 5, mlp.in, mlp.out, &y));
    std::string s = StatsJson(engine.engine);
    EXPECT_EQ(s.front(), '{');
    EXPECT_EQ(s.back(), '}');
    for (const char* want : {"\"runs\":3", "\"hits\":1", "\"misses\":2", "\"specializations\":2",
                             "\"cached_executables\":2", "\"shape_key\":\"cmlp(x: f32[1, 8])\"",
                             "\"shape_key\":\"cmlp(x: f32[5, 8])\"",
                             "\"compile_ms\":", "\"passes\":[]", "\"kernels\":[]"})
      EXPECT_NE(s.find(want), std::string::npos) << want << " in " << s;
  }
  {
    OptionsHandle options;
    KILN_ASSERT_OK(kiln_options_set_profiling(options.o, 1));
    KILN_ASSERT_OK(kiln_options_set_compile_policy(options.o, "eager"));
    EngineHandle engine(options.o);
    for (int i = 0; i < 4; ++i)
      KILN_ASSERT_OK(RunInto(engine.engine, mlp.model, x5, 5, mlp.in, mlp.out, &y));
    ExpectNear(y, mlp.Reference(x5, 5), "profiled");
    std::string s = StatsJson(engine.engine);
    for (const char* want : {"\"passes\":[{\"name\":", "\"name\":\"InferType\"", "\"self_ms\":",
                             "\"kernels\":[{\"shape_key\":\"cmlp(x: f32[5, 8])\",\"kernel\":",
                             "\"calls\":4,\"total_ms\":"})
      EXPECT_NE(s.find(want), std::string::npos) << want << " in " << s;
  }
}

}  // namespace
}  // namespace kiln::test
