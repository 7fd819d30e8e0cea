// DiskKernelStore: the KernelStore that makes a new process start warm (SPEC.md §6), over the
// blob cache of jit/disk_cache.h. The engine makes one when EngineOptions::cache_dir is set.
//
// An entry's key text names everything the code depends on, so that an entry is used only by
// the same program compiled the same way for the same machine: the build of kiln's code
// generator (KilnCodegenIdentity, kept in the entry's header: another build's entry for the
// same key is rejected as other_build and rebuilt), the kiln version, what the target's code
// generator reports as its identity (CodeGenerator::identity; llvm: the LLVM version and the
// resolved CPU and features, the real host CPU when no -mcpu is given), the target string, the
// codegen options, the pass configuration hash, the group's structural hash and its printed
// text, with each large constant as dtype, shape and a hash of its bytes. The payload is the
// kernel's symbol name and the module's object (CompiledModule::object). Targets whose code
// generator has no `load` are not stored.
//
// A load re-runs LowerToLoops and the target's loop pipeline for the group (no code generation:
// a fraction of a millisecond per kernel) for the metadata the engine binds buffers by, exactly
// as CompileKernel would give it, then reads the object back with the code generator's `load`.
// An entry whose payload cannot be decoded, lowered or loaded is rejected (bad_payload) and
// rebuilt.
//
// Threading: thread-safe, as KernelStore requires. Load must run under the PassContext the
// kernel is compiled under (the engine's), as CompileKernel does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/kernel_cache.h"
#include "jit/disk_cache.h"

namespace kiln {

// What a kernel entry of the cache holds, for `kiln cache ls`: from its key text and payload
// ("" where the entry does not decode).
struct KernelEntryInfo {
  std::string kernel;     // the kernel's symbol, `fused_matmul_add_relu`
  std::string target;     // the target string, `llvm`
  std::string kiln;       // the kiln version that wrote it
  std::string identity;   // the code generator's identity: LLVM version, CPU, features
  std::string signature;  // the group's parameter and result types: its shapes
};
KernelEntryInfo DescribeKernelEntry(const DiskCacheEntry& entry);

class DiskKernelStore final : public KernelStore {
 public:
  // Opens (creating) the cache directory; DiskCache's errors otherwise. `build` is the code
  // generator's identity the entries are written and read as; tests pass others to act as
  // another build of kiln.
  DiskKernelStore(const std::string& dir, uint64_t max_bytes,
                  const std::string& build = KilnCodegenIdentity());

  LoadResult Load(const KernelKey& key, std::shared_ptr<const CompiledKernel>* kernel) override;
  void Store(const KernelKey& key, const CompiledKernel& kernel) override;
  std::map<std::string, uint64_t> RejectionsByReason() const override;

  // The full key text the entry for `key` is stored under.
  std::string KeyText(const KernelKey& key);
  DiskCache& cache() { return cache_; }

 private:
  // The code generator's identity for `codegen` (CodeGenerator::identity), memoized: for llvm it
  // detects the host CPU, which costs more than a lookup.
  std::string Identity(const CodegenOptions& codegen);

  DiskCache cache_;
  std::mutex mu_;                               // guards targets_
  std::map<std::string, std::string> targets_;  // CodegenFingerprint -> identity
};

}  // namespace kiln
