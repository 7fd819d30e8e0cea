#include "engine/kernel_cache.h"

#include <chrono>

#include "ir/error.h"
#include "ir/structural.h"

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

namespace kiln {

const char* KilnVersion() {
  return KILN_VERSION_STRING;
}

uint64_t StableHash(const std::string& text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Every CodegenOptions field, in one string: the one place to extend when the options grow.
std::string CodegenFingerprint(const CodegenOptions& o) {
  return StrCat("kind=", o.kind, ";arch=", o.arch, ";mcpu=", o.mcpu, ";mattr=", o.mattr, ";O",
                o.opt_level, ";fast_math=", o.fast_math, ";fp_contract=", o.fp_contract,
                ";reassociate_reductions=", o.reassociate_reductions,
                ";slp_vectorize=", o.slp_vectorize, ";llvm_workarounds=", o.llvm_workarounds);
}

KernelKey KernelKey::Make(Function group, std::string target, CodegenOptions codegen,
                          uint64_t pipeline_hash) {
  KernelKey k;
  k.group = std::move(group);
  k.target = std::move(target);
  k.codegen = std::move(codegen);
  k.kiln_version = KilnVersion();
  k.pipeline_hash = pipeline_hash;
  std::string rest =
      StrCat(k.target, '|', CodegenFingerprint(k.codegen), '|', k.kiln_version, '|', pipeline_hash);
  k.digest = StableHash(rest, StableHash(std::to_string(StructuralHash(k.group))));
  return k;
}

bool KernelKey::operator==(const KernelKey& o) const {
  return digest == o.digest && pipeline_hash == o.pipeline_hash && target == o.target &&
         CodegenFingerprint(codegen) == CodegenFingerprint(o.codegen) &&
         kiln_version == o.kiln_version && StructuralEqual(group, o.group);
}

std::shared_ptr<KernelCache::Entry> KernelCache::FindLocked(const KernelKey& key) const {
  auto [begin, end] = entries_.equal_range(key.digest);
  for (auto it = begin; it != end; ++it)
    if (it->second->key == key) return it->second;
  return nullptr;
}

void KernelCache::EraseLocked(const std::shared_ptr<Entry>& e) {
  auto [begin, end] = entries_.equal_range(e->key.digest);
  for (auto it = begin; it != end; ++it) {
    if (it->second == e) {
      entries_.erase(it);
      return;
    }
  }
}

void KernelCache::SweepExpiredLocked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    bool dead = !it->second->pending.valid() && it->second->kernel.expired();
    it = dead ? entries_.erase(it) : std::next(it);
  }
  sweep_at_ = std::max<size_t>(64, 2 * entries_.size());
}

std::shared_ptr<const CompiledKernel> KernelCache::GetOrCompile(const KernelKey& key,
                                                                const CompileFn& compile) {
  std::promise<KernelPtr> promise;
  std::shared_ptr<Entry> mine;
  {
    std::unique_lock<std::mutex> lock(mu_);
    std::shared_ptr<Entry> e = FindLocked(key);
    if (e && e->pending.valid()) {
      std::shared_future<KernelPtr> pending = e->pending;
      lock.unlock();
      KernelPtr k = pending.get();  // rethrows the compiler's error
      hits_.fetch_add(1, std::memory_order_relaxed);
      return k;
    }
    if (e) {
      if (KernelPtr k = e->kernel.lock()) {
        hits_.fetch_add(1, std::memory_order_relaxed);
        return k;
      }
      EraseLocked(e);  // its kernel was freed with the last executable that used it
    }
    if (entries_.size() >= sweep_at_) SweepExpiredLocked();
    mine = std::make_shared<Entry>();
    mine->key = key;
    mine->pending = promise.get_future().share();
    entries_.emplace(key.digest, mine);
  }

  KernelPtr kernel;
  try {
    kernel = Produce(key, compile);
  } catch (...) {
    compile_errors_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      EraseLocked(mine);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine->kernel = kernel;
    mine->pending = {};
  }
  promise.set_value(kernel);
  return kernel;
}

KernelCache::KernelPtr KernelCache::Produce(const KernelKey& key, const CompileFn& compile) {
  if (store_) {
    KernelPtr loaded;
    switch (store_->Load(key, &loaded)) {
      case KernelStore::LoadResult::kHit:
        if (loaded) {
          disk_hits_.fetch_add(1, std::memory_order_relaxed);
          return loaded;
        }
        disk_rejections_.fetch_add(1, std::memory_order_relaxed);  // a hit without a kernel
        break;
      case KernelStore::LoadResult::kRejected:
        disk_rejections_.fetch_add(1, std::memory_order_relaxed);
        break;
      case KernelStore::LoadResult::kMiss:
        break;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  auto kernel = std::make_shared<const CompiledKernel>(compile());
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  compiles_.fetch_add(1, std::memory_order_relaxed);
  compile_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
  if (store_) {
    try {
      store_->Store(key, *kernel);
    } catch (const Error&) {
      // Best effort by contract: the kernel is good, only persisting it failed.
    }
  }
  return kernel;
}

size_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [digest, e] : entries_) n += e->pending.valid() || !e->kernel.expired();
  return n;
}

KernelCacheCounters KernelCache::counters() const {
  KernelCacheCounters c;
  c.compiles = compiles_.load(std::memory_order_relaxed);
  c.hits = hits_.load(std::memory_order_relaxed);
  c.disk_hits = disk_hits_.load(std::memory_order_relaxed);
  c.disk_rejections = disk_rejections_.load(std::memory_order_relaxed);
  c.compile_errors = compile_errors_.load(std::memory_order_relaxed);
  c.compile_ms = compile_us_.load(std::memory_order_relaxed) / 1000.0;
  return c;
}

}  // namespace kiln
