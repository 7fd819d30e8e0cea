// Option values and files that once killed or hung the host process (issue 18), through the C
// API as an application calls it: each is a status with a message naming what is wrong, and
// the library stays usable after it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "c_api_util.h"
#include "kiln.h"

namespace kiln::test {
namespace {

using ::testing::HasSubstr;

// Runs the MLP at batch 3 through an engine made with `options` and checks the result.
void ExpectEngineRuns(kiln_options* options) {
  CMlp mlp(8, 16, 4, 7);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(options, &engine));
  std::vector<float> x = mlp.Input(3, 1), y;
  KILN_EXPECT_OK(RunInto(engine, mlp.model, x, 3, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x, 3), "after refused targets");
  kiln_engine_destroy(engine);
}

TEST(CApiHardening, TargetsLLVMWouldAbortOnAreRefusedWhenSet) {
  struct Case {
    const char* target;
    const char* message;
  };
  const Case cases[] = {
      {"llvm -mcpu=no_such_cpu_9000", "'no_such_cpu_9000' is not a CPU LLVM"},
      {"llvm -mcpu=i386", "'i386' is not an x86-64 CPU model"},
      {"llvm -mcpu=pentium4", "'pentium4' is not an x86-64 CPU model"},
      {"llvm -mattr=-64bit", "'-64bit'"},
      {"llvm -mattr=-sse,-sse2", "turns off sse2"},
      {"llvm -mattr=+soft-float", "calling convention"},
      {"llvm -mattr=+16bit-mode", "calling convention"},
      {"llvm -mattr=+no_such_feature", "'no_such_feature' is not a feature LLVM"},
      {"{\"kind\": \"llvm\", \"mcpu\": \"i386\"}", "'i386' is not an x86-64 CPU model"},
      {"{\"kind\": \"llvm\", \"mattr\": [\"-sse2\"]}", "turns off sse2"},
      // APX's new data destinations, which no x86 CPU this runs on has (yet): code using them
      // would die of an illegal instruction here (it did, before targets were checked).
      {"llvm -mattr=+ndd", "this machine cannot run code for it"},
  };
  kiln_options* options = nullptr;
  KILN_ASSERT_OK(kiln_options_create(&options));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target);
    EXPECT_EQ(kiln_options_set_target(options, c.target), KILN_INVALID_ARGUMENT);
    EXPECT_THAT(kiln_last_error(), HasSubstr(c.message));
  }
  // The options keep their last good target (the host), and an engine made from them runs.
  ExpectEngineRuns(options);
  // A baseline CPU is accepted and runs.
  KILN_ASSERT_OK(kiln_options_set_target(options, "llvm -mcpu=x86-64"));
  ExpectEngineRuns(options);
  kiln_options_destroy(options);
}

TEST(CApiHardening, OptLevelsOutOfRangeAreRefused) {
  kiln_options* options = nullptr;
  KILN_ASSERT_OK(kiln_options_create(&options));
  for (int level : {-1, 4, 1000}) {
    EXPECT_EQ(kiln_options_set_opt_level(options, level), KILN_INVALID_ARGUMENT);
    EXPECT_THAT(kiln_last_error(),
                HasSubstr("opt_level must be 0 to 3, got " + std::to_string(level)));
  }
  for (int level : {0, 3}) KILN_EXPECT_OK(kiln_options_set_opt_level(options, level));
  kiln_options_destroy(options);
}

TEST(CApiHardening, FilesThatAreNotModelsFailAtOnce) {
  for (const char* path : {"/dev/zero", "/dev/urandom", "/proc/self", "/no/such/model.onnx"}) {
    SCOPED_TRACE(path);
    kiln_model* model = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(kiln_model_load_onnx_file(path, &model), KILN_INVALID_ARGUMENT);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
    EXPECT_THAT(kiln_last_error(), HasSubstr(path));
    EXPECT_EQ(model, nullptr);
  }
}

TEST(CApiHardening, LoadLimitsAreCheckedWhenSetAndApplied) {
  kiln_load_options* options = nullptr;
  KILN_ASSERT_OK(kiln_load_options_create(&options));
  for (uint64_t bad : {uint64_t{0}, uint64_t{1} << 31}) {
    EXPECT_EQ(kiln_load_options_set_max_model_bytes(options, bad), KILN_INVALID_ARGUMENT);
    EXPECT_THAT(kiln_last_error(), HasSubstr("max_model_bytes must be 1 to 2147483647"));
  }
  KILN_EXPECT_OK(kiln_load_options_set_max_model_bytes(options, 16));
  KILN_EXPECT_OK(kiln_load_options_set_max_weight_bytes(options, 0));
  KILN_EXPECT_OK(kiln_load_options_set_base_dir(options, nullptr));
  EXPECT_EQ(kiln_load_options_set_base_dir(nullptr, "/tmp"), KILN_INVALID_ARGUMENT);
  // 17 bytes of anything: refused for its size before it is parsed.
  const char bytes[17] = "not an onnx mode";
  kiln_model* model = nullptr;
  EXPECT_EQ(kiln_model_load_onnx_buffer_with(bytes, sizeof bytes, options, &model),
            KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error(), HasSubstr("17 bytes, over the limit of 16 (max_model_bytes)"));
  EXPECT_EQ(model, nullptr);
  // NULL options are the defaults.
  EXPECT_EQ(kiln_model_load_onnx_file_with("/dev/zero", nullptr, &model), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error(), HasSubstr("not a regular file"));
  kiln_load_options_destroy(options);
}

TEST(CApiHardening, RunsOverTheMemoryLimitFailBeforeAllocating) {
  CMlp mlp(8, 16, 4, 7);
  kiln_options* options = nullptr;
  KILN_ASSERT_OK(kiln_options_create(&options));
  // Batch 1 needs 16 floats of hidden activations and 4 of outputs: 80 bytes. Batch 2, 160.
  KILN_ASSERT_OK(kiln_options_set_max_run_bytes(options, 100));
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(options, &engine));
  std::vector<float> x1 = mlp.Input(1, 1), x2 = mlp.Input(2, 2), y;
  KILN_EXPECT_OK(RunInto(engine, mlp.model, x1, 1, mlp.in, mlp.out, &y));
  ExpectNear(y, mlp.Reference(x1, 1), "batch 1, within the limit");
  // Into caller-owned outputs, only the intermediates count: 128 bytes.
  EXPECT_EQ(RunInto(engine, mlp.model, x2, 2, mlp.in, mlp.out, &y), KILN_OUT_OF_MEMORY);
  EXPECT_THAT(kiln_last_error(),
              HasSubstr("a run needs 128 bytes (128 of intermediates, 0 of outputs), over the "
                        "limit of 100 (EngineOptions.max_run_bytes)"));
  // The engine goes on serving what fits.
  KILN_EXPECT_OK(RunInto(engine, mlp.model, x1, 1, mlp.in, mlp.out, &y));
  kiln_engine_destroy(engine);
  kiln_options_destroy(options);
}

// The cache budget: set through the options, reported in the statistics, and held while many
// shapes go through (each a different batch, each compiled: eager).
TEST(CApiHardening, CacheBudgetHoldsOverManyShapes) {
  CMlp mlp(8, 16, 4, 7);
  kiln_options* options = nullptr;
  KILN_ASSERT_OK(kiln_options_create(&options));
  KILN_ASSERT_OK(kiln_options_set_max_cache_bytes(options, 2 << 20));
  KILN_ASSERT_OK(kiln_options_set_compile_policy(options, "eager"));
  EXPECT_EQ(kiln_options_set_max_cache_bytes(nullptr, 1), KILN_INVALID_ARGUMENT);
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(options, &engine));
  std::vector<float> y;
  for (int64_t b = 1; b <= 10; ++b) {
    std::vector<float> x = mlp.Input(b, b);
    KILN_ASSERT_OK(RunInto(engine, mlp.model, x, b, mlp.in, mlp.out, &y));
    ExpectNear(y, mlp.Reference(x, b), "under a cache budget");
  }
  char* json = nullptr;
  KILN_ASSERT_OK(kiln_engine_stats_json(engine, &json));
  const std::string stats = json;
  kiln_string_free(json);
  EXPECT_THAT(stats, HasSubstr("\"cache_budget_bytes\":2097152,"));
  // Over 2 MiB, 10 shapes of 3 kernels (each charged at least 128 KiB) cannot all be cached.
  const size_t at = stats.find("\"cached_bytes\":");
  ASSERT_NE(at, std::string::npos) << stats;
  EXPECT_LE(std::stoull(stats.substr(at + 15)), 2u << 20) << stats;
  EXPECT_THAT(stats, ::testing::Not(HasSubstr("\"evictions\":0,")));
  kiln_engine_destroy(engine);
  kiln_options_destroy(options);
}

}  // namespace
}  // namespace kiln::test
