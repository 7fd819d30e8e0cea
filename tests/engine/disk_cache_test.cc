// The disk kernel cache end to end (SPEC.md §6): a new engine over the same cache directory
// starts warm (disk hits, no compiles, the same output bits); entries that are truncated,
// bit-flipped, from another format version, for another CPU, or whose object does not load are
// rejected, counted by reason, rebuilt, and the outputs stay right.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/file_util.h"
#include "common/models.h"
#include "engine/disk_store.h"
#include "engine/engine.h"
#include "ir/interpreter.h"
#include "ir/type_infer.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("kiln-engine-cache") {}
};
using test::ErrorMessage;
using test::RandomTensor;
using test::ReadFile;
using test::TensorsNear;
using test::WriteFile;
using ::testing::HasSubstr;

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kc") paths.push_back(e.path().string());
  return paths;
}

EngineOptions CachedAt(const std::string& dir) {
  EngineOptions o;
  o.cache_dir = dir;
  return o;
}

struct Case {
  const char* name;
  std::function<Function()> graph;
  std::vector<int64_t> shape;
};

const std::vector<Case>& Models() {
  static const std::vector<Case> cases = {
      {"mlp", [] { return test::MlpModel(); }, {3, 8}},
      {"encoder", [] { return test::EncoderLayerModel(); }, {2, 5, 16}},
  };
  return cases;
}

void ExpectBitwiseEqual(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].nbytes(), want[i].nbytes());
    EXPECT_EQ(std::memcmp(got[i].raw_data(), want[i].raw_data(), want[i].nbytes()), 0)
        << "output " << i;
  }
}

// Runs `c` on a fresh engine over `dir`; returns its outputs and stats.
std::vector<Tensor> RunOnce(const std::string& dir, const Case& c, EngineStats* stats) {
  Engine engine(CachedAt(dir));
  ModelPtr model = Model::Create(c.graph(), c.name);
  std::vector<Tensor> inputs{RandomTensor(DType::kFloat32, c.shape, 7)};
  std::vector<Tensor> out = engine.Run(*model, inputs);
  std::vector<Tensor> want = Interpret(model->graph(), inputs);
  EXPECT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size() && i < out.size(); ++i)
    EXPECT_TRUE(TensorsNear(out[i], want[i], 1e-5, 1e-4)) << "output " << i;
  engine.WaitForBackgroundCompiles();  // the shape's specialization (tiered) counts too
  *stats = engine.stats();
  return out;
}

TEST(EngineDiskCache, NewEngineStartsWarm) {
  for (const Case& c : Models()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    EngineStats cold, warm;
    std::vector<Tensor> first = RunOnce(dir.path(), c, &cold);
    ASSERT_GT(cold.kernel_compiles, 0u);
    EXPECT_EQ(cold.disk_hits, 0u);
    EXPECT_EQ(cold.disk_rejections, 0u);
    EXPECT_EQ(Entries(dir.path()).size(), cold.kernel_compiles);

    std::vector<Tensor> second = RunOnce(dir.path(), c, &warm);
    EXPECT_EQ(warm.kernel_compiles, 0u);
    EXPECT_EQ(warm.disk_hits, cold.kernel_compiles);
    EXPECT_EQ(warm.disk_rejections, 0u);
    EXPECT_EQ(warm.misses, 1u);  // the executable is still built; its kernels are loaded
    ExpectBitwiseEqual(second, first);
  }
}

// One way of damaging every entry on disk, and the reason it must be rejected for.
struct Damage {
  const char* what;
  std::function<std::string(const std::string&)> apply;
  const char* reason;
};

std::string Reencode(const std::string& bytes,
                     const std::function<void(std::string* key, std::string* payload)>& edit,
                     const std::string& build = KilnCodegenIdentity()) {
  std::string stored_build, key, payload;
  EXPECT_FALSE(DecodeDiskCacheEntry(bytes, &stored_build, &key, &payload).has_value());
  EXPECT_EQ(stored_build, KilnCodegenIdentity());
  edit(&key, &payload);
  return EncodeDiskCacheEntry(build, key, payload);
}

const std::vector<Damage>& Damages() {
  static const std::vector<Damage> damages = {
      {"truncated", [](const std::string& b) { return b.substr(0, b.size() / 2); }, "truncated"},
      {"bit-flipped",
       [](const std::string& b) {
         std::string s = b;
         s[s.size() - s.size() / 3] ^= 0x10;  // in the object code
         return s;
       },
       "checksum"},
      {"wrong version",
       [](const std::string& b) {
         std::string s = b;
         s[8] = static_cast<char>(kDiskCacheFormatVersion + 1);
         return s;
       },
       "bad_version"},
      {"wrong target",  // an intact entry whose key names another CPU, at this entry's name
       [](const std::string& b) {
         return Reencode(b, [](std::string* key, std::string*) {
           size_t at = key->find("\nmachine=");
           size_t end = key->find('\n', at + 1);
           EXPECT_NE(at, std::string::npos);
           key->replace(at, end - at, "\nmachine=x86_64-unknown-linux-gnu skylake +avx2,+fma");
         });
       },
       "key_mismatch"},
      {"object that does not load",  // intact entry, right key, not an object file
       [](const std::string& b) {
         return Reencode(b, [](std::string*, std::string* payload) {
           size_t elf = payload->find(
               "\x7f"
               "ELF");
           EXPECT_NE(elf, std::string::npos);
           (*payload)[elf + 1] = 'X';
         });
       },
       "bad_payload"},
      {"written by another build",  // intact, right key, another code generator's identity
       [](const std::string& b) {
         return Reencode(
             b, [](std::string*, std::string*) {}, "another kiln build");
       },
       "other_build"},
  };
  return damages;
}

TEST(EngineDiskCache, DamagedEntriesAreRejectedAndRebuilt) {
  for (const Case& c : Models()) {
    for (const Damage& d : Damages()) {
      SCOPED_TRACE(StrCat(c.name, ", ", d.what));
      TempDir dir;
      EngineStats cold, damaged, rebuilt;
      std::vector<Tensor> want = RunOnce(dir.path(), c, &cold);
      const uint64_t kernels = cold.kernel_compiles;
      for (const std::string& path : Entries(dir.path())) WriteFile(path, d.apply(ReadFile(path)));

      std::vector<Tensor> got = RunOnce(dir.path(), c, &damaged);
      EXPECT_EQ(damaged.disk_hits, 0u);
      EXPECT_EQ(damaged.disk_rejections, kernels);
      EXPECT_EQ(damaged.disk_rejections_by_reason,
                (std::map<std::string, uint64_t>{{d.reason, kernels}}));
      EXPECT_EQ(damaged.kernel_compiles, kernels);
      ExpectBitwiseEqual(got, want);

      // The rebuild replaced every entry: the next engine starts warm again.
      got = RunOnce(dir.path(), c, &rebuilt);
      EXPECT_EQ(rebuilt.disk_hits, kernels);
      EXPECT_EQ(rebuilt.disk_rejections, 0u);
      EXPECT_EQ(rebuilt.kernel_compiles, 0u);
      ExpectBitwiseEqual(got, want);
    }
  }
}

TEST(EngineDiskCache, AnotherCpuNeverLoadsTheHostsEntries) {
  TempDir dir;
  const Case& c = Models()[0];
  EngineStats host;
  RunOnce(dir.path(), c, &host);
  EngineOptions o = CachedAt(dir.path());
  o.target = "llvm -mcpu=x86-64";  // baseline x86-64: no AVX
  Engine engine(o);
  ModelPtr model = Model::Create(c.graph(), c.name);
  std::vector<Tensor> inputs{RandomTensor(DType::kFloat32, c.shape, 7)};
  std::vector<Tensor> got = engine.Run(*model, inputs);
  engine.WaitForBackgroundCompiles();
  EngineStats s = engine.stats();
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.kernel_compiles, host.kernel_compiles);
  // Its own entries sit beside the host's.
  EXPECT_EQ(Entries(dir.path()).size(), 2 * host.kernel_compiles);
  std::vector<Tensor> want = Interpret(model->graph(), inputs);
  EXPECT_TRUE(TensorsNear(got[0], want[0], 1e-5, 1e-4));
}

// Two builds of kiln whose code generators differ share one cache folder: neither loads the
// other's entries (each is rejected as other_build and rebuilt), and each loads its own.
TEST(EngineDiskCache, TwoBuildsNeverLoadEachOthersEntries) {
  TempDir dir;
  DiskKernelStore a(dir.path(), 1 << 20, "build-a"), b(dir.path(), 1 << 20, "build-b");
  Var x = MakeVar("x", TensorType({3, 8}, DType::kFloat32));
  Function group =
      InferTypes(MakeFunction({x}, MakeCall("relu", {x}, {}), nullptr, Attrs{{"primitive", true}}));
  KernelKey key = KernelKey::Make(group, "llvm", CodegenOptions{}, 42);
  CompiledKernel kernel = CompileKernel(group, "k_relu");
  std::shared_ptr<const CompiledKernel> loaded;

  a.Store(key, kernel);
  EXPECT_EQ(b.Load(key, &loaded), KernelStore::LoadResult::kRejected);
  EXPECT_EQ(b.RejectionsByReason(), (std::map<std::string, uint64_t>{{"other_build", 1}}));
  EXPECT_EQ(loaded, nullptr);
  b.Store(key, kernel);  // the rebuild replaces a's entry
  EXPECT_EQ(a.Load(key, &loaded), KernelStore::LoadResult::kRejected);
  EXPECT_EQ(a.RejectionsByReason(), (std::map<std::string, uint64_t>{{"other_build", 1}}));
  EXPECT_EQ(loaded, nullptr);
  a.Store(key, kernel);
  EXPECT_EQ(a.Load(key, &loaded), KernelStore::LoadResult::kHit);
  ASSERT_NE(loaded, nullptr);
  ASSERT_NE(loaded->entry, nullptr);
  EXPECT_NE(loaded->entry->cpu, nullptr);
}

// A cuda module is stored as its PTX under the key of NVRTC's version and the arch, and comes
// back without NVRTC compiling again, with the launch objects the emitter gives.
TEST(EngineDiskCache, CudaModulesAreStoredAsPtxWithTheirLaunches) {
  if (!NvrtcUnavailable().empty()) GTEST_SKIP() << "NVRTC cannot be loaded: " << NvrtcUnavailable();
  TempDir dir;
  DiskKernelStore store(dir.path(), 1 << 20);
  Var x = MakeVar("x", TensorType({3, 8}, DType::kFloat32));
  Function group =
      InferTypes(MakeFunction({x}, MakeCall("relu", {x}, {}), nullptr, Attrs{{"primitive", true}}));
  const std::string target = "cuda -arch=sm_80";
  CodegenOptions options = GetCodegen("cuda").options(Target::Parse(target));
  KernelKey key = KernelKey::Make(group, target, options, 42);
  EXPECT_THAT(store.KeyText(key), HasSubstr(StrCat("nvrtc=", NvrtcVersion(), "\narch=sm_80\n")));
  CompiledKernel kernel = CompileKernel(group, "k_relu", options);
  ASSERT_TRUE(kernel.entry->on_device());
  store.Store(key, kernel);
  std::shared_ptr<const CompiledKernel> loaded;
  ASSERT_EQ(store.Load(key, &loaded), KernelStore::LoadResult::kHit);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->module->object(), kernel.module->object());  // the same PTX
  EXPECT_THAT(loaded->module->object(), HasSubstr(".target sm_80"));
  const KernelEntry& want = *kernel.entry;
  const KernelEntry& got = *loaded->entry;
  EXPECT_TRUE(got.on_device());
  EXPECT_EQ(got.num_buffers, want.num_buffers);
  EXPECT_EQ(got.scalar_params.size(), want.scalar_params.size());
  EXPECT_EQ(got.scratch.size(), want.scratch.size());
  ASSERT_EQ(got.launches.size(), want.launches.size());
  for (size_t i = 0; i < got.launches.size(); ++i)
    EXPECT_EQ(got.launches[i].kernel, want.launches[i].kernel);
  // PTX without the kernels the group needs is rejected, not loaded.
  EXPECT_THAT(
      ErrorMessage([&] { GetCodegen("cuda").load("// empty\n", {loaded->lowered.func}, options); }),
      HasSubstr("the PTX has no kernel"));
}

// The identity is a real hash of this build's code generator, not a placeholder.
TEST(EngineDiskCache, CodegenIdentityIsAHash) {
  const std::string id = KilnCodegenIdentity();
  EXPECT_EQ(id.size(), 32u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  TempDir dir;
  DiskKernelStore store(dir.path(), 1 << 20);
  EXPECT_EQ(store.cache().build(), id);
}

TEST(EngineDiskCache, KeyTextNamesEverythingTheCodeDependsOn) {
  TempDir dir;
  DiskKernelStore store(dir.path(), 1 << 20);
  Function group = test::MlpModel();
  KernelKey key = KernelKey::Make(group, "llvm", CodegenOptions{}, 42);
  std::string text = store.KeyText(key);
  EXPECT_THAT(text, HasSubstr(StrCat("kiln=", KilnVersion(), "\n")));
  EXPECT_THAT(text, HasSubstr(StrCat("llvm=", LLVMVersion(), "\n")));
  EXPECT_THAT(text, HasSubstr(StrCat("machine=", LLVMTargetDescription(), "\n")));
  EXPECT_THAT(text, HasSubstr("pipeline=42\n"));
  EXPECT_THAT(text, HasSubstr("softmax"));
  // A weight of more than 64 elements is keyed by its bytes' hash: other weights, another key.
  EXPECT_THAT(text, HasSubstr("meta[0]=f32[8, 16] bytes=512 hash="));
  EXPECT_NE(store.KeyText(KernelKey::Make(test::MlpModel(101), "llvm", CodegenOptions{}, 42)),
            text);
  EXPECT_EQ(store.KeyText(KernelKey::Make(test::MlpModel(), "llvm", CodegenOptions{}, 42)), text);
}

TEST(EngineDiskCache, CacheDirectoryErrorsNameTheOption) {
  TempDir dir;
  const std::string open_dir = dir.path() + "/shared";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);
  std::string msg = ErrorMessage([&] { Engine engine(CachedAt(open_dir)); });
  EXPECT_THAT(msg, HasSubstr("EngineOptions.cache_dir"));
  EXPECT_THAT(msg, HasSubstr("chmod 700"));
  EngineOptions o = CachedAt(dir.path());
  o.cache_max_bytes = 0;
  EXPECT_THAT(ErrorMessage([&] { Engine engine(o); }), HasSubstr("cache_max_bytes"));
}

// Not a speed test (those live in bench/): prints what a warm start saves, for the record.
TEST(EngineDiskCache, ReportWarmStartTime) {
  for (const Case& c : Models()) {
    TempDir dir;
    auto first_run_ms = [&] {
      auto t0 = std::chrono::steady_clock::now();
      Engine engine(CachedAt(dir.path()));
      ModelPtr model = Model::Create(c.graph(), c.name);
      engine.Run(*model, std::vector<Tensor>{RandomTensor(DType::kFloat32, c.shape, 7)});
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
    };
    double cold = first_run_ms();
    double warm = first_run_ms();
    double warm2 = first_run_ms();
    std::printf("[ timing ] %s: first run cold (compile) %.1f ms, warm (disk) %.1f / %.1f ms\n",
                c.name, cold, warm, warm2);
  }
}

}  // namespace
}  // namespace kiln
