// The kernel cache: compiled fused groups, shared by every executable of an engine, so two
// shapes or two models whose fused groups are the same program share one kernel.
//
// Key: the structural hash of the typed primitive function (its concrete shapes and dtypes are
// in its types) + the target + the codegen options + the kiln version + a hash of the pass
// configuration (opt level, required/disabled passes, config entries, pipeline). A hash match
// is confirmed with StructuralEqual, so a hash collision never hands out the wrong kernel.
//
// Threading: every member function is thread-safe. A key being compiled has exactly one
// compiler; other callers of that key wait for it (single flight). A failed compile is
// delivered to every waiter and leaves nothing cached, so the next caller compiles again.
//
// Ownership: entries hold their kernels weakly. Executables own their kernels; once the last
// executable using a kernel is evicted, its machine code is freed and the entry is dropped.
// The disk cache (a KernelStore) is where kernels outlive their executables.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/compile.h"

namespace kiln {

struct KernelKey {
  Function group;  // typed, concrete shapes; compared structurally on a digest match
  std::string target;
  CodegenOptions codegen;
  std::string kiln_version;
  uint64_t pipeline_hash = 0;
  // All of the above in one value; stable across processes of one build (StructuralHash is),
  // so a disk cache can name entries by it.
  uint64_t digest = 0;

  static KernelKey Make(Function group, std::string target, CodegenOptions codegen,
                        uint64_t pipeline_hash);
  bool operator==(const KernelKey& other) const;
};

// Every field of `o` as text; part of a key's digest and equality.
std::string CodegenFingerprint(const CodegenOptions& o);

// The version string compiled into every key.
const char* KilnVersion();
// The identity of the code that makes kernels in this build: 32 hex digits of a hash of the
// sources of ir/, passes/, jit/ and engine/ (and the compiler and build type), computed at build
// time (cmake/codegen_identity.cmake). Every disk cache entry carries it, so a kiln rebuilt with
// other lowering or codegen never loads machine code an older build wrote, whatever its
// version number says.
const char* KilnCodegenIdentity();

// 64-bit FNV-1a: a hash that is the same in every process and build, for keys that persist.
uint64_t StableHash(const std::string& text, uint64_t seed = 0xcbf29ce484222325ull);

// The seam for a persistent (disk) kernel cache, consulted on an in-memory miss before
// compiling. Implementations must be thread-safe. An entry that is corrupt, from another kiln
// version or another target must be reported as kRejected, never returned.
class KernelStore {
 public:
  enum class LoadResult { kMiss, kHit, kRejected };
  virtual ~KernelStore() = default;
  // On kHit sets `*kernel`.
  virtual LoadResult Load(const KernelKey& key, std::shared_ptr<const CompiledKernel>* kernel) = 0;
  // Best effort: called after each compile (also after a rejection, to rebuild the entry). A
  // kiln::Error thrown here is ignored; the kernel is used all the same.
  virtual void Store(const KernelKey& key, const CompiledKernel& kernel) = 0;
  // Rejected entries by reason (`checksum`, `key_mismatch`, ...), for statistics; may be empty.
  virtual std::map<std::string, uint64_t> RejectionsByReason() const { return {}; }
};

struct KernelCacheCounters {
  uint64_t compiles = 0;         // kernels compiled
  uint64_t hits = 0;             // served from memory (including waiting on another compile)
  uint64_t disk_hits = 0;        // loaded from the KernelStore
  uint64_t disk_rejections = 0;  // KernelStore entries found unusable
  uint64_t compile_errors = 0;
  double compile_ms = 0;  // total time in `compile`
};

class KernelCache {
 public:
  explicit KernelCache(std::shared_ptr<KernelStore> store = nullptr) : store_(std::move(store)) {}

  using CompileFn = std::function<CompiledKernel()>;
  // The kernel for `key`: from memory, else from the store, else made by `compile` (called on
  // this thread, at most once per key at a time). Rethrows the compile's error.
  std::shared_ptr<const CompiledKernel> GetOrCompile(const KernelKey& key,
                                                     const CompileFn& compile);

  // Entries whose kernel is alive or being compiled.
  size_t size() const;
  const std::shared_ptr<KernelStore>& store() const { return store_; }
  KernelCacheCounters counters() const;

 private:
  using KernelPtr = std::shared_ptr<const CompiledKernel>;
  struct Entry {
    KernelKey key;
    std::weak_ptr<const CompiledKernel> kernel;  // set once compiled
    std::shared_future<KernelPtr> pending;       // valid while being compiled
  };
  std::shared_ptr<Entry> FindLocked(const KernelKey& key) const;
  void EraseLocked(const std::shared_ptr<Entry>& e);
  void SweepExpiredLocked();
  KernelPtr Produce(const KernelKey& key, const CompileFn& compile);

  std::shared_ptr<KernelStore> store_;
  mutable std::mutex mu_;
  std::unordered_multimap<uint64_t, std::shared_ptr<Entry>> entries_;  // by digest
  size_t sweep_at_ = 64;  // entries_ size at which expired entries are next swept

  std::atomic<uint64_t> compiles_{0}, hits_{0}, disk_hits_{0}, disk_rejections_{0},
      compile_errors_{0};
  std::atomic<uint64_t> compile_us_{0};
};

}  // namespace kiln
