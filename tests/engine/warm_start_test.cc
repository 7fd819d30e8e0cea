// Warm start: the shapes a process ran, as a shape log, compiled by the next process before its
// first request, from the disk cache without running LLVM.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/models.h"
#include "engine/engine.h"

namespace kiln {
namespace {

using test::RandomTensor;
using ::testing::HasSubstr;

// A fresh owner-only directory for a disk cache, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln_warm_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(WarmStart, ShapeLogRoundTripsMostRunFirst) {
  ModelPtr model = Model::Create(test::EncoderLayerModel(), "encoder");
  Engine engine;
  std::vector<Tensor> a{RandomTensor(DType::kFloat32, {1, 5, 16}, 1)};
  std::vector<Tensor> b{RandomTensor(DType::kFloat32, {2, 3, 16}, 2)};
  engine.Run(*model, a);
  for (int i = 0; i < 3; ++i) engine.Run(*model, b);
  std::vector<SeenShape> seen = engine.SeenShapes(*model);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].inputs, (std::vector<std::vector<int64_t>>{{2, 3, 16}}));
  EXPECT_EQ(seen[0].runs, 3u);
  EXPECT_EQ(seen[1].runs, 1u);
  const std::string text = FormatShapeLog(*model, seen);
  EXPECT_THAT(text, HasSubstr("3 x=2x3x16\n1 x=1x5x16\n"));
  std::vector<SeenShape> back = ParseShapeLog(*model, text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].inputs, seen[0].inputs);
  EXPECT_EQ(back[1].inputs, seen[1].inputs);
  EXPECT_EQ(back[1].runs, 1u);
}

TEST(WarmStart, ParseErrorsNameTheLine) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b : {Bad{"x=3x8\n", "run count 'x=3x8'"}, Bad{"2 y=3x8\n", "no input 'y'"},
                       Bad{"# c\n2\n", "line 2 '2': no dims for input 'x'"},
                       Bad{"1 x=3xa\n", "dim 'a'"}, Bad{"1 x=3x8 x=3x8\n", "given twice"},
                       Bad{"1 x3x8\n", "not NAME=DIMS"}, Bad{"-1 x=3x8\n", "not a count"}}) {
    SCOPED_TRACE(b.text);
    Error e = test::ErrorOf([&] { ParseShapeLog(*model, b.text); });
    EXPECT_EQ(e.code(), ErrorCode::kParseError);
    EXPECT_THAT(e.what(), HasSubstr(b.says));
  }
}

// The second process: the shape log and the first one's disk cache; Precompile loads every
// kernel from disk (nothing compiles), and the requests that follow are all hits, with the
// first process's results bit for bit.
TEST(WarmStart, SecondProcessCompilesNothing) {
  TempDir dir;
  Function graph = test::EncoderLayerModel();
  const std::vector<std::vector<int64_t>> shapes = {{1, 4, 16}, {2, 9, 16}, {1, 31, 16}};
  std::vector<std::vector<Tensor>> inputs, want;
  std::string log;
  {
    // Eager: `want` is what the specialized executables compute (a generic kernel may sum in
    // another order), and every kernel is on disk when the first process ends.
    EngineOptions o;
    o.cache_dir = dir.path;
    o.policy = CompilePolicy::kEager;
    Engine first(o);
    ModelPtr model = Model::Create(graph, "encoder");
    for (size_t i = 0; i < shapes.size(); ++i) {
      inputs.push_back({RandomTensor(DType::kFloat32, shapes[i], 10 + i)});
      want.push_back(first.Run(*model, inputs.back()));
    }
    log = FormatShapeLog(*model, first.SeenShapes(*model));
  }
  for (CompilePolicy p : {CompilePolicy::kEager, CompilePolicy::kTiered}) {
    SCOPED_TRACE(CompilePolicyName(p));
    EngineOptions o;
    o.cache_dir = dir.path;
    o.policy = p;
    Engine second(o);
    ModelPtr model = Model::Create(graph, "encoder");  // a new model, as a new process has
    second.Precompile(*model, ParseShapeLog(*model, log));
    EngineStats s = second.stats();
    EXPECT_EQ(s.kernel_compiles, 0u);
    EXPECT_GT(s.disk_hits, 0u);
    EXPECT_EQ(s.specializations, shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<Tensor> got = second.Run(*model, inputs[i]);
      EXPECT_EQ(std::memcmp(got[0].raw_data(), want[i][0].raw_data(), want[i][0].nbytes()), 0);
    }
    s = second.stats();
    EXPECT_EQ(s.misses, 0u);
    EXPECT_EQ(s.kernel_compiles, 0u);
    EXPECT_EQ(s.generic_builds, 0u);
  }
}

// A shape served by the generic tier is specialized by Precompile; bad shapes are the caller's
// errors.
TEST(WarmStart, PrecompileSpecializesAGenericEntryAndChecksShapes) {
  ModelPtr model = Model::Create(test::MlpModel(), "mlp");
  EngineOptions o;
  o.policy = CompilePolicy::kGenericOnly;
  Engine engine(o);
  std::vector<Tensor> in{RandomTensor(DType::kFloat32, {3, 8}, 1)};
  engine.Run(*model, in);
  EXPECT_EQ(engine.Prepare(*model, in)->tier, Tier::kGeneric);
  engine.Precompile(*model, ParseShapeLog(*model, "1 x=3x8\n"));
  EXPECT_EQ(engine.Prepare(*model, in)->tier, Tier::kSpecialized);
  EXPECT_THAT(
      test::ErrorMessage([&] { engine.Precompile(*model, ParseShapeLog(*model, "1 x=3x9\n")); }),
      HasSubstr("model 'mlp'"));
}

}  // namespace
}  // namespace kiln
