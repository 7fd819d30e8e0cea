// The on-disk compiled-code cache: the blob store's format checks (every kind of damage is
// rejected, counted by reason and removed, never returned), atomic writes, LRU eviction by
// size, the directory's permissions; and object files: a kernel's object saved, read back with
// LoadLLVMObject and run gives the same bits as the kernel it came from.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "common/file_util.h"
#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "jit/disk_cache.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("kiln-disk-cache") {}
};
using test::ErrorMessage;
using test::ReadFile;
using test::WriteFile;
using ::testing::HasSubstr;

std::vector<std::string> FileNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const std::string kKey = "kiln kernel\ntarget=llvm\nmachine=x86_64 znver3 +avx2\n";
const std::string kPayload = std::string("payload \0 with a NUL and more bytes", 35);

const std::string kBuild = "0123456789abcdef0123456789abcdef";  // as KilnCodegenIdentity's

// Offsets in an entry for kKey (see disk_cache.h for the layout).
constexpr size_t kVersionAt = 8;
const size_t kBuildAt = 8 + 4 + 8;
const size_t kKeyAt = kBuildAt + kBuild.size() + 8;
const size_t kPayloadSizeAt = kKeyAt + kKey.size();
const size_t kChecksumAt = kPayloadSizeAt + 8;
const size_t kPayloadAt = kChecksumAt + 8;

TEST(DiskCache, RoundTrip) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  EXPECT_EQ(cache.Load(kKey).status, DiskCache::Status::kMiss);
  cache.Store(kKey, kPayload);
  DiskCache::Result r = cache.Load(kKey);
  ASSERT_EQ(r.status, DiskCache::Status::kHit);
  EXPECT_EQ(r.payload, kPayload);
  EXPECT_EQ(ReadFile(cache.PathFor(kKey)), EncodeDiskCacheEntry(kBuild, kKey, kPayload));
  EXPECT_EQ(ReadFile(cache.PathFor(kKey)).size(), kPayloadAt + kPayload.size());
  // Replacing an entry is a plain store.
  cache.Store(kKey, "second");
  EXPECT_EQ(cache.Load(kKey).payload, "second");
  DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.writes, 2u);
  EXPECT_EQ(s.rejections, 0u);
  // Files are the owner's only.
  struct stat st;
  ASSERT_EQ(stat(cache.PathFor(kKey).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Each case damages the stored entry of kKey in one way; a load must reject it for `reason`,
// count it, and remove the file, and the next store and load must work again.
struct Damage {
  const char* what;
  std::function<std::string(std::string)> apply;
  DiskCacheRejection reason;
};

std::string FlipBit(std::string s, size_t at, int bit = 0) {
  s[at] = static_cast<char>(s[at] ^ (1 << bit));
  return s;
}

TEST(DiskCache, DamagedEntriesAreRejectedByReason) {
  const std::vector<Damage> cases = {
      {"empty", [](std::string) { return std::string(); }, DiskCacheRejection::kTruncated},
      {"cut in the magic", [](std::string s) { return s.substr(0, 5); },
       DiskCacheRejection::kTruncated},
      {"cut in the key", [](std::string s) { return s.substr(0, kKeyAt + 3); },
       DiskCacheRejection::kTruncated},
      {"cut in the payload", [](std::string s) { return s.substr(0, s.size() - 1); },
       DiskCacheRejection::kTruncated},
      {"trailing bytes", [](std::string s) { return s + "x"; }, DiskCacheRejection::kBadLength},
      {"wrong magic", [](std::string s) { return "ELF" + s.substr(3); },
       DiskCacheRejection::kBadMagic},
      {"bit flip in magic", [](std::string s) { return FlipBit(s, 2); },
       DiskCacheRejection::kBadMagic},
      {"wrong version",
       [](std::string s) {
         s[kVersionAt] = static_cast<char>(kDiskCacheFormatVersion + 1);
         return s;
       },
       DiskCacheRejection::kBadVersion},
      {"bit flip in key length", [](std::string s) { return FlipBit(s, kKeyAt - 8, 6); },
       DiskCacheRejection::kTruncated},
      {"huge key length", [](std::string s) { return FlipBit(s, kKeyAt - 1, 7); },
       DiskCacheRejection::kTruncated},
      {"bit flip in payload length", [](std::string s) { return FlipBit(s, kPayloadSizeAt, 6); },
       DiskCacheRejection::kTruncated},
      {"bit flip in key", [](std::string s) { return FlipBit(s, kKeyAt + 10, 3); },
       DiskCacheRejection::kChecksum},
      {"bit flip in checksum", [](std::string s) { return FlipBit(s, kChecksumAt + 4, 5); },
       DiskCacheRejection::kChecksum},
      {"bit flip in payload", [](std::string s) { return FlipBit(s, kPayloadAt + 9, 0); },
       DiskCacheRejection::kChecksum},
      {"entry of another key",
       [](std::string) { return EncodeDiskCacheEntry(kBuild, kKey + "mcpu=skylake\n", kPayload); },
       DiskCacheRejection::kKeyMismatch},
      {"cut in the build", [](std::string s) { return s.substr(0, kBuildAt + 5); },
       DiskCacheRejection::kTruncated},
      {"bit flip in build", [](std::string s) { return FlipBit(s, kBuildAt + 3, 1); },
       DiskCacheRejection::kChecksum},
      // Intact, for this very key, but written by a kiln whose code generator differs.
      {"entry of another build",
       [](std::string) { return EncodeDiskCacheEntry(kBuild + "x", kKey, kPayload); },
       DiskCacheRejection::kOtherBuild},
  };
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  std::map<std::string, uint64_t> want;
  for (const Damage& d : cases) {
    SCOPED_TRACE(d.what);
    cache.Store(kKey, kPayload);
    const std::string path = cache.PathFor(kKey);
    WriteFile(path, d.apply(ReadFile(path)));
    DiskCache::Result r = cache.Load(kKey);
    EXPECT_EQ(r.status, DiskCache::Status::kRejected);
    EXPECT_EQ(DiskCacheRejectionName(r.reason), std::string(DiskCacheRejectionName(d.reason)));
    EXPECT_TRUE(r.payload.empty());
    EXPECT_FALSE(fs::exists(path)) << "a rejected entry must be removed";
    ++want[DiskCacheRejectionName(d.reason)];
    // Rebuilt, it is good again.
    cache.Store(kKey, kPayload);
    EXPECT_EQ(cache.Load(kKey).payload, kPayload);
  }
  DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.rejections, cases.size());
  EXPECT_EQ(s.rejections_by_reason, want);
  EXPECT_EQ(s.hits, cases.size());
}

TEST(DiskCache, DecodeRejectsEveryPrefixAndEveryBitFlip) {
  // Exhaustive over a small entry: no damage of these kinds decodes, and none reads outside
  // the bytes (each case decodes from a buffer of exactly its size).
  const std::string entry = EncodeDiskCacheEntry("build", "key", "0123456789");
  std::string build, key, payload;
  ASSERT_FALSE(DecodeDiskCacheEntry(entry, &build, &key, &payload).has_value());
  EXPECT_EQ(key, "key");
  EXPECT_EQ(payload, "0123456789");
  for (size_t n = 0; n < entry.size(); ++n) {
    std::vector<char> exact(entry.begin(), entry.begin() + n);
    EXPECT_TRUE(
        DecodeDiskCacheEntry(std::string_view(exact.data(), n), &build, &key, &payload).has_value())
        << "prefix of " << n;
  }
  for (size_t at = 0; at < entry.size(); ++at)
    for (int bit = 0; bit < 8; ++bit)
      EXPECT_TRUE(DecodeDiskCacheEntry(FlipBit(entry, at, bit), &build, &key, &payload).has_value())
          << "byte " << at << " bit " << bit;
}

TEST(DiskCache, UnreadableEntryIsRejected) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  // A directory where an entry should be: never read, never trusted.
  ASSERT_TRUE(fs::create_directory(cache.PathFor(kKey)));
  DiskCache::Result r = cache.Load(kKey);
  EXPECT_EQ(r.status, DiskCache::Status::kRejected);
  EXPECT_EQ(r.reason, DiskCacheRejection::kUnreadable);
  // A symbolic link to a valid entry elsewhere is refused too (O_NOFOLLOW).
  fs::remove(cache.PathFor(kKey));
  const std::string elsewhere = dir.path() + "/elsewhere";
  WriteFile(elsewhere, EncodeDiskCacheEntry(kBuild, kKey, kPayload));
  fs::create_symlink(elsewhere, cache.PathFor(kKey));
  EXPECT_EQ(cache.Load(kKey).status, DiskCache::Status::kRejected);
}

TEST(DiskCache, ConcurrentWritesLeaveOnlyWholeEntries) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        // Every thread writes the shared key; each also writes keys of its own.
        cache.Store("shared", std::string(1000, 'x'));
        cache.Store(StrCat("key", t, "-", i % 3), std::string(100 + t, 'a' + t));
        DiskCache::Result r = cache.Load("shared");
        EXPECT_EQ(r.status, DiskCache::Status::kHit);
        EXPECT_EQ(r.payload, std::string(1000, 'x'));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> names = FileNames(dir.path());
  EXPECT_EQ(names.size(), 1u + 8 * 3);
  for (const std::string& n : names) EXPECT_THAT(n, ::testing::EndsWith(".kc")) << "temp left";
  EXPECT_EQ(cache.stats().rejections, 0u);
}

TEST(DiskCache, EvictsLeastRecentlyUsedBeyondTheBound) {
  TempDir dir;
  const std::string payload(1000, 'p');
  const uint64_t entry = EncodeDiskCacheEntry(kBuild, "a", payload).size();
  DiskCache cache(dir.path(), 2 * entry + entry / 2, kBuild);  // room for two
  // File times are coarse (a kernel tick); sleeping orders them.
  auto tick = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  cache.Store("a", payload);
  tick();
  cache.Store("b", payload);
  tick();
  ASSERT_EQ(cache.Load("a").status, DiskCache::Status::kHit);  // a is now newer than b
  tick();
  cache.Store("c", payload);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_TRUE(fs::exists(cache.PathFor("a")));
  EXPECT_FALSE(fs::exists(cache.PathFor("b")));
  EXPECT_TRUE(fs::exists(cache.PathFor("c")));
  EXPECT_LE(cache.TotalBytes(), cache.max_bytes());
  EXPECT_EQ(cache.Load("b").status, DiskCache::Status::kMiss);

  // An entry larger than the whole bound is not written, and evicts nothing.
  cache.Store("huge", std::string(3 * entry, 'h'));
  EXPECT_FALSE(fs::exists(cache.PathFor("huge")));
  EXPECT_TRUE(fs::exists(cache.PathFor("a")));
  EXPECT_TRUE(fs::exists(cache.PathFor("c")));
  EXPECT_EQ(cache.stats().evictions, 1u);

  // Files that are not entries are left alone; a stale temporary file is cleaned up.
  WriteFile(dir.path() + "/notes.txt", "mine");
  const std::string stale = dir.path() + "/.tmp-0123456789abcdef-XXXXXX";
  WriteFile(stale, "half an entry");
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  cache.Store("d", payload);
  EXPECT_TRUE(fs::exists(dir.path() + "/notes.txt"));
  EXPECT_FALSE(fs::exists(stale));
}

TEST(DiskCache, ListShowsEveryEntryAsItIsAndRemovesNothing) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  cache.Store(kKey, kPayload);
  cache.Store("second key", "two");
  DiskCache other(dir.path(), 1 << 20, "another build");
  other.Store("third key", "three");
  std::string damaged = ReadFile(cache.PathFor("second key"));
  damaged.back() ^= 1;
  WriteFile(cache.PathFor("second key"), damaged);
  WriteFile(dir.path() + "/notes.txt", "not an entry");

  std::vector<DiskCacheEntry> entries = cache.List();
  ASSERT_EQ(entries.size(), 3u);
  std::map<std::string, const DiskCacheEntry*> by_key;
  for (const DiskCacheEntry& e : entries) {
    EXPECT_EQ(e.bytes, fs::file_size(dir.path() + "/" + e.file)) << e.file;
    EXPECT_GT(e.modified, 0);
    by_key[e.key] = &e;
  }
  ASSERT_TRUE(by_key.count(kKey));
  EXPECT_FALSE(by_key[kKey]->problem);
  EXPECT_EQ(by_key[kKey]->payload, kPayload);
  EXPECT_EQ(by_key[kKey]->build, kBuild);
  ASSERT_TRUE(by_key.count("third key"));
  EXPECT_EQ(by_key["third key"]->problem, DiskCacheRejection::kOtherBuild);
  ASSERT_TRUE(by_key.count(""));  // the damaged one does not decode
  EXPECT_EQ(by_key[""]->problem, DiskCacheRejection::kChecksum);
  EXPECT_EQ(FileNames(dir.path()).size(), 4u) << "listing removed something";
  EXPECT_EQ(cache.stats().rejections, 0u);
}

TEST(DiskCache, ClearRemovesEntriesAndTemporariesOnly) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  cache.Store(kKey, kPayload);
  cache.Store("second key", "two");
  WriteFile(dir.path() + "/.tmp-abandoned", "half an entry");
  WriteFile(dir.path() + "/notes.txt", "not an entry");
  EXPECT_EQ(cache.Clear(), 3u);
  EXPECT_EQ(FileNames(dir.path()), std::vector<std::string>{"notes.txt"});
  EXPECT_TRUE(cache.List().empty());
  EXPECT_EQ(cache.Load(kKey).status, DiskCache::Status::kMiss);
}

TEST(DiskCache, DirectoryIsOwnerOnly) {
  TempDir dir;
  const std::string nested = dir.path() + "/a/b/kiln";
  DiskCache cache(nested, 1 << 20, kBuild);
  struct stat st;
  ASSERT_EQ(stat(nested.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir.path() + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // An existing directory open to others is refused, with the fix in the message, and left as
  // it was.
  const std::string open_dir = dir.path() + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0755), 0);
  std::string msg = ErrorMessage([&] { DiskCache c(open_dir, 1 << 20, kBuild); });
  EXPECT_THAT(msg, HasSubstr("has mode 0755"));
  EXPECT_THAT(msg, HasSubstr("chmod 700"));
  ASSERT_EQ(stat(open_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);

  WriteFile(dir.path() + "/file", "x");
  EXPECT_THAT(ErrorMessage([&] { DiskCache c(dir.path() + "/file", 1 << 20, kBuild); }),
              HasSubstr("is not a directory"));
  EXPECT_THAT(ErrorMessage([&] { DiskCache c(dir.path() + "/file/sub", 1 << 20, kBuild); }),
              HasSubstr("cannot create"));
  EXPECT_THAT(ErrorMessage([&] { DiskCache c("", 1 << 20, kBuild); }), HasSubstr("empty path"));
}

// ---- Object files ----

// out[i] = exp(a[i]) * 2 + b[i] for i in [0, n), as a parallel loop: the object then refers to
// kiln_parallel_for and to libm, which loading must resolve again.
loop::PrimFunc ExpKernel(const std::string& name) {
  loop::Var n = loop::MakeVar("n");
  loop::Var i = loop::MakeVar("i");
  loop::Buffer a = loop::MakeBuffer("a", DType::kFloat32, {n});
  loop::Buffer b = loop::MakeBuffer("b", DType::kFloat32, {n});
  loop::Buffer out = loop::MakeBuffer("out", DType::kFloat32, {n});
  loop::Expr value = loop::Add(
      loop::Mul(loop::Call(loop::Intrinsic::kExp, {loop::Load(a, {i})}), loop::FloatImm(2.0)),
      loop::Load(b, {i}));
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = name;
  f->buffer_params = {a, b, out};
  f->num_inputs = 2;
  f->scalar_params = {n};
  f->body =
      loop::For(i, loop::IntImm(0), n, loop::ForKind::kParallel, loop::Store(out, {i}, value));
  return f;
}

std::vector<float> RunExpKernel(KernelFn fn, const std::vector<float>& a,
                                const std::vector<float>& b) {
  std::vector<float> out(a.size(), -1.0f);
  void* buffers[] = {const_cast<float*>(a.data()), const_cast<float*>(b.data()), out.data()};
  int64_t scalars[] = {static_cast<int64_t>(a.size())};
  fn(buffers, scalars);
  return out;
}

TEST(LLVMObject, RoundTripThroughTheDiskCacheRunsTheSame) {
  std::unique_ptr<CompiledModule> built = BuildLLVM({ExpKernel("k_exp"), ExpKernel("k_exp2")});
  ASSERT_FALSE(built->object().empty());
  EXPECT_EQ(built->object().substr(0, 4),
            "\x7f"
            "ELF");

  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kBuild);
  cache.Store(kKey, built->object());
  DiskCache::Result r = cache.Load(kKey);
  ASSERT_EQ(r.status, DiskCache::Status::kHit);
  std::unique_ptr<CompiledModule> loaded = LoadLLVMObject(r.payload);
  EXPECT_EQ(loaded->object(), built->object());

  std::vector<float> a(1001), b(1001);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;
    b[i] = static_cast<float>(i) * 0.001f;
  }
  for (const char* name : {"k_exp", "k_exp2"}) {
    SCOPED_TRACE(name);
    std::vector<float> want = RunExpKernel(built->Lookup(name), a, b);
    std::vector<float> got = RunExpKernel(loaded->Lookup(name), a, b);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
    EXPECT_FLOAT_EQ(got[5], std::exp(a[5]) * 2 + b[5]);
    // Built or loaded, an entry knows the text its code lies in (what a cold run prefetches).
    for (const CompiledModule* m : {built.get(), loaded.get()}) {
      const KernelEntry& e = m->Entry(name);
      const auto* fn = reinterpret_cast<const char*>(e.cpu);
      const auto* text = static_cast<const char*>(e.text);
      ASSERT_NE(text, nullptr);
      EXPECT_LE(text, fn);
      EXPECT_LT(fn, text + e.text_bytes);
    }
  }
  // Only the kernels are exported; the outlined helpers stay internal.
  EXPECT_THAT(ErrorMessage([&] { loaded->Lookup("k_exp.body"); }), HasSubstr("it has: k_exp"));
}

TEST(LLVMObject, BadObjectsAreCompileErrors) {
  std::unique_ptr<CompiledModule> built = BuildLLVM({ExpKernel("k")});
  const std::string& object = built->object();
  auto code_of = [](const std::string& bytes) {
    try {
      LoadLLVMObject(bytes);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // loaded: not what these tests want
  };
  EXPECT_EQ(code_of(""), ErrorCode::kCompileError);
  EXPECT_EQ(code_of("not an object file at all"), ErrorCode::kCompileError);
  EXPECT_EQ(code_of(object.substr(0, 64)), ErrorCode::kCompileError);
  EXPECT_EQ(code_of(object.substr(0, object.size() / 2)), ErrorCode::kCompileError);
  EXPECT_THAT(ErrorMessage([] { LoadLLVMObject("garbage"); }), HasSubstr("not an object file"));
}

// Destroying a module gives back what linking it took (its code and data pages and the JIT's
// own records of it), and one module costs little more than its pages: a server that churns
// through shapes loads and drops modules all day.
TEST(LLVMObject, LoadedModulesGiveTheirMemoryBack) {
  if (test::ResidentBytes() == 0)
    GTEST_SKIP() << "/proc/self/statm cannot be read: no resident size to check";
  const std::string object = BuildLLVM({ExpKernel("k")})->object();
  LoadLLVMObject(object);  // what the first load sets up for good is not measured
  malloc_trim(0);
  const size_t before = test::ResidentBytes();
  constexpr int kModules = 400;
  size_t grown = 0;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<CompiledModule>> modules;
    for (int i = 0; i < kModules; ++i) modules.push_back(LoadLLVMObject(object));
    for (const auto& m : modules) ASSERT_NE(m->Lookup("k"), nullptr);
    grown = test::ResidentBytes() - std::min(before, test::ResidentBytes());
    std::printf("%d modules of a %zu-byte object: resident +%.1f KB each\n", kModules,
                object.size(), grown / 1024.0 / kModules);
    modules.clear();
    malloc_trim(0);
  }
  const size_t after = test::ResidentBytes();
  std::printf("resident: %.1f MB before, %.1f MB after %d modules were destroyed\n", before / 1e6,
              after / 1e6, kModules);
  EXPECT_LE(after, before + grown / 10);
}

TEST(LLVMObject, KeyFacts) {
  EXPECT_EQ(LLVMVersion().rfind("19.", 0), 0u) << LLVMVersion();
  const std::string host = LLVMTargetDescription();
  EXPECT_THAT(host, HasSubstr("x86_64"));
  EXPECT_EQ(host, LLVMTargetDescription());  // stable
  // Features are sorted and deduplicated, a later flag winning.
  CodegenOptions o;
  o.mcpu = "znver3";
  o.mattr = "+fma,+avx2,-avx2";
  EXPECT_THAT(LLVMTargetDescription(o), ::testing::EndsWith(" znver3 -avx2,+fma"));
  o.mcpu = "skylake";
  EXPECT_NE(LLVMTargetDescription(o), host);
  // The host description names the real CPU (not "generic") and its features.
  EXPECT_THAT(host, ::testing::Not(HasSubstr(" generic ")));
  EXPECT_THAT(host, ::testing::ContainsRegex(" [a-z0-9_-]+ [+-]"));
}

}  // namespace
}  // namespace kiln
