// Engine set-up, the executable cache's miss side (single flight, insertion, LRU eviction) and
// statistics. The hit side is dispatch.cc; building an executable is specialize.cc.
#include "engine/engine.h"

#include <algorithm>
#include <new>
#include <sstream>

#include "devices/cuda_device.h"
#include "devices/target.h"
#include "engine/disk_store.h"
#include "engine/segments.h"
#include "ir/error.h"
#include "ir/type_infer.h"
#include "jit/nvrtc.h"
#include "passes/pipeline.h"

namespace kiln {

namespace {

EngineOptions Validated(EngineOptions o) {
  if (o.num_threads < 0)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.num_threads must not be negative, got ",
          o.num_threads);
  if (o.max_specializations < 0)
    Throw(ErrorCode::kInvalidArgument,
          "EngineOptions.max_specializations must not be negative, got ", o.max_specializations);
  if (!o.cache_dir.empty() && o.cache_max_bytes == 0)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.cache_max_bytes must be positive");
  if (o.specialize_after < 1)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.specialize_after must be at least 1, got ",
          o.specialize_after);
  if (o.compile_threads < 1)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.compile_threads must be at least 1, got ",
          o.compile_threads);
  if (o.compile_nice < 0 || o.compile_nice > 19)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.compile_nice must be 0 to 19, got ",
          o.compile_nice);
  if (o.opt_level < 0 || o.opt_level > kMaxOptLevel)
    Throw(ErrorCode::kInvalidArgument, "EngineOptions.opt_level must be 0 to ", kMaxOptLevel,
          ", got ", o.opt_level);
  for (const auto* names : {&o.disabled_passes, &o.required_passes})
    for (const std::string& n : *names)
      if (!PassRegistry::Global().Find(n))
        Throw(ErrorCode::kNotFound, "EngineOptions: unknown pass '", n, "'");
  return o;
}

// Half the machine's physical memory (1 TiB where it cannot be read).
uint64_t HalfOfMemory() {
  const int64_t total = PhysicalMemoryBytes();
  return total > 0 ? static_cast<uint64_t>(total) / 2 : uint64_t{1} << 40;
}

// The default cache budget: a sixteenth of the machine's memory, within [64 MiB, 1 GiB].
uint64_t DefaultCacheBudget() {
  const int64_t total = PhysicalMemoryBytes();
  const uint64_t lo = uint64_t{64} << 20, hi = uint64_t{1} << 30;
  return total > 0 ? std::clamp(static_cast<uint64_t>(total) / 16, lo, hi) : hi;
}

// The entry of `cache` (an Engine's) least recently used among those `pick` takes; end() if none.
// A linear scan, but only at a bound: it reads every entry, each cold on the first request of a
// new shape (which inserts), where below the bounds only a count is read.
template <typename Cache, typename Pick>
typename Cache::iterator LeastRecent(Cache& cache, Pick pick) {
  auto lru = cache.end();
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (!pick(*it->second)) continue;
    if (lru == cache.end() || it->second->last_used.load(std::memory_order_relaxed) <
                                  lru->second->last_used.load(std::memory_order_relaxed))
      lru = it;
  }
  return lru;
}

// The "sm_90" of an arch, or the "9.0" of a compute capability, as 90; -1 if neither.
int ArchNumber(std::string text) {
  if (text.rfind("sm_", 0) == 0) text = text.substr(3);
  text.erase(std::remove(text.begin(), text.end(), '.'), text.end());
  if (text.empty() || text.size() > 4 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoi(text);
}

// The KernelStore the options ask for: the caller's own, else the disk cache, else none.
std::shared_ptr<KernelStore> MakeKernelStore(const EngineOptions& o) {
  if (o.kernel_store) return o.kernel_store;
  if (o.cache_dir.empty()) return nullptr;
  try {
    return std::make_shared<DiskKernelStore>(o.cache_dir, o.cache_max_bytes);
  } catch (const Error& e) {
    Throw(e.code(), "EngineOptions.cache_dir: ", e.what());
  }
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + ",";
  return s;
}

}  // namespace

CodegenOptions EngineCodegenOptions(const std::string& text) {
  // Read through Target, so every spelling Target accepts (short strings and JSON) is accepted,
  // and made by the target kind's code generator (jit/kernel.h CodeGenerator::options), which
  // checks what it knows.
  CodegenOptions codegen;
  try {
    Target target = Target::Parse(text);
    codegen = GetCodegen(std::string(TargetKindName(target.kind()))).options(target);
  } catch (const Error& e) {
    Throw(e.code(), "EngineOptions.target: ", e.what());
  }
  if (codegen.kind == "llvm")
    if (std::string why = HostCannotRun(codegen); !why.empty())
      Throw(ErrorCode::kInvalidArgument, "EngineOptions.target '", text,
            "': this machine cannot run code for it: ", why);
  return codegen;
}

void Engine::UseDevice() {
  const std::string& text = options_.target;
  device_ = Device{DeviceTypeFor(Target::Parse(text)), 0};
  device_api_ = options_.device_api ? options_.device_api : GetDeviceAPI(device_.type);
  if (device_api_->GetAttr(device_, DeviceAttr::kExists).AsInt() != 1) {
    // The registered CUDA device knows why it is missing (no driver, no GPU).
    std::string why = device_.type == DeviceType::kCUDA && !options_.device_api
                          ? CUDADeviceAPI::UnavailableReason()
                          : "";
    Throw(ErrorCode::kUnsupported, "EngineOptions.target '", text, "': there is no ", device_,
          why.empty() ? "" : ": ", why);
  }
  if (codegen_.kind == "cuda") {
    if (std::string why = NvrtcUnavailable(); !why.empty())
      Throw(ErrorCode::kUnsupported, "EngineOptions.target '", text,
            "': CUDA C cannot be compiled here: ", why);
    // PTX for a newer architecture than the device's does not load on it.
    const DeviceAttrValue cc = device_api_->GetAttr(device_, DeviceAttr::kComputeCapability);
    const int have = cc.is_none() ? -1 : ArchNumber(cc.AsString());
    if (have >= 0 && ArchNumber(codegen_.arch) > have)
      Throw(ErrorCode::kInvalidArgument, "EngineOptions.target '", text, "': ", device_,
            " has compute capability ", cc.AsString(), ", so -arch may be at most sm_", have,
            ", not ", codegen_.arch);
  }
}

Engine::Engine(EngineOptions options)
    : options_(Validated(std::move(options))),
      tracer_(options_.trace ? std::make_shared<Tracer>() : nullptr),
      codegen_(EngineCodegenOptions(options_.target)),
      max_run_bytes_(options_.max_run_bytes ? options_.max_run_bytes : HalfOfMemory()),
      max_cache_bytes_(options_.max_cache_bytes ? options_.max_cache_bytes : DefaultCacheBudget()),
      vector_bits_(VectorRegisterBits(codegen_)),
      arena_(options_.num_threads > 0 ? options_.num_threads : tbb::task_arena::automatic),
      kernels_(MakeKernelStore(options_)),
      compile_arena_(options_.compile_threads),
      // Niced only alone: a thread inherits its creator's niceness, and pool threads that share a
      // compile arena start oneTBB workers, which the process's runs share too.
      compile_pool_(options_.compile_threads,
                    options_.compile_threads == 1 ? options_.compile_nice : 0) {
  MakePassContext();  // rejects unknown config keys and values of the wrong kind, now
  if (codegen_.kind != "llvm") UseDevice();
  graph_pipeline_ = options_.graph_pipeline.empty() ? DefaultGraphPipeline()
                                                    : ParsePipeline(options_.graph_pipeline);
  // The engine needs fused groups whatever the options say: with FuseOps disabled, every op
  // becomes a group of its own.
  bool no_fusion = std::find(options_.disabled_passes.begin(), options_.disabled_passes.end(),
                             "FuseOps") != options_.disabled_passes.end();
  fuse_ops_ = no_fusion
                  ? PassRegistry::Global().Create("FuseOps", Attrs{{"max_group_size", int64_t{1}}})
                  : PassRegistry::Global().Create("FuseOps");
  // Everything that changes the code a fused group compiles to, except the group itself and
  // the codegen options, which the kernel key holds separately.
  std::string config;
  for (const auto& [k, v] : options_.pass_config) config += k + "=" + AttrValueToString(v) + ";";
  pipeline_hash_ = StableHash(
      StrCat("opt=", options_.opt_level, "|disabled=", Join(options_.disabled_passes),
             "|required=", Join(options_.required_passes), "|config=", config,
             "|graph=", PipelineToString(graph_pipeline_), "|fuse=", fuse_ops_->ToString(),
             // The passes see the kernel threads (target.threads): TileLoops groups tiles by
             // them, so a kernel built for one count is not another's.
             "|threads=", num_threads()));
  arena_.initialize();
}

Engine::~Engine() {
  // A background compile still running (a model's generic tier, say, in a process that ran one
  // shape) stops at its next kernel instead of holding the destructor for the rest of it.
  stopping_.store(true, std::memory_order_relaxed);
}

std::shared_ptr<PassContext> Engine::MakePassContext() const {
  auto ctx = std::make_shared<PassContext>();
  ctx->opt_level = options_.opt_level;
  ctx->disabled_passes = options_.disabled_passes;
  ctx->required_passes = options_.required_passes;
  ctx->SetInstruments(options_.instruments);
  // The loop passes size vectors and register tiles for this target (the options may override).
  ctx->SetConfig("target.vector_bits", int64_t{vector_bits_});
  ctx->SetConfig("target.threads", int64_t{num_threads()});
  for (const auto& [key, value] : options_.pass_config) {
    try {
      ctx->SetConfig(key, value);
    } catch (const Error& e) {
      Throw(e.code(), "EngineOptions.pass_config: ", e.what());
    }
  }
  return ctx;
}

std::shared_ptr<const Executable> Engine::Prepare(const Model& model,
                                                  std::span<const Tensor> inputs) {
  if (const std::shared_ptr<const Segments>& seg = model.segments()) {
    if (static_cast<int>(inputs.size()) != model.num_inputs())
      Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': expected ",
            model.num_inputs(), " inputs, got ", inputs.size());
    return seg->head ? Prepare(*seg->head, inputs) : nullptr;
  }
  return Acquire(model, inputs);
}

void Engine::InFlight::RecordCurrentError() {
  try {
    throw;
  } catch (const Error& e) {
    error_code = e.code();
    error_message = e.what();
  } catch (const std::bad_alloc&) {
    error_code = ErrorCode::kOutOfMemory;
    error_message = "out of memory";
  } catch (const std::exception& e) {
    error_message = e.what();
  } catch (...) {
    error_message = "an unknown exception";
  }
}

std::shared_ptr<const Executable> Engine::GetOrBuild(const Model& model, uint64_t key_hash,
                                                     std::span<const Tensor> inputs) {
  // Bad inputs (count, rank, dtype, a symbol bound two ways) are the caller's error, found
  // before any compile is registered, so they never reach waiters or the statistics.
  std::map<std::string, int64_t> symbols = BindInputs(model, inputs);

  std::promise<std::shared_ptr<const Executable>> promise;
  std::shared_ptr<InFlight> mine;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    // Someone may have finished this key between our Find and this lock.
    if (Specialization* done = FindLocked(model, key_hash, inputs)) return done->exe;
    for (const std::shared_ptr<InFlight>& f : in_flight_) {
      if (f->model_id != model.id() || f->key_hash != key_hash ||
          !MatchesSignature(model, f->signature, inputs))
        continue;
      std::shared_ptr<InFlight> compile = f;
      lock.unlock();
      if (std::shared_ptr<const Executable> exe = compile->result.get()) return exe;
      // Dropped, it left in_flight_ first: this key compiles here, or by a caller met there.
      if (compile->dropped) return GetOrBuild(model, key_hash, inputs);
      throw Error(compile->error_code, compile->error_message);  // the compiler's error
    }
    mine = std::make_shared<InFlight>();
    mine->model_id = model.id();
    mine->key_hash = key_hash;
    mine->signature = MakeSignature(model, inputs);
    mine->result = promise.get_future().share();
    in_flight_.push_back(mine);
  }
  // From here on `mine` must leave in_flight_ and `promise` must be fulfilled on every path,
  // or later callers of this key would wait on a compile that no one runs.
  std::shared_ptr<const Executable> exe;
  try {
    BuildRequest req;
    for (const Tensor& t : inputs) req.inputs.push_back({t.dtype(), t.shape(), t.nbytes()});
    req.values = inputs;
    req.symbols = std::move(symbols);
    req.arena = &arena_;
    exe = Build(model, req);
    std::unique_lock<std::shared_mutex> lock(mu_);
    PublishLocked(model.id(), key_hash, mine->signature, exe);
    in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), mine));
  } catch (...) {
    compile_errors_.fetch_add(1, std::memory_order_relaxed);
    {
      std::unique_lock<std::shared_mutex> lock(mu_);
      auto it = std::find(in_flight_.begin(), in_flight_.end(), mine);
      if (it != in_flight_.end()) in_flight_.erase(it);
    }
    mine->RecordCurrentError();
    promise.set_value(nullptr);
    throw;
  }
  specializations_.fetch_add(1, std::memory_order_relaxed);
  RecordBuilt(*exe, /*with_plan=*/true);
  promise.set_value(exe);
  return exe;
}

void Engine::RecordBuilt(const Executable& exe, bool with_plan) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  // Bounded: the oldest half goes at twice the bound, so the cost per record stays constant;
  // their kernels' profiles go with them.
  if (shape_stats_.size() >= 2 * EngineStats::kMaxShapeStats) {
    const size_t drop = shape_stats_.size() - EngineStats::kMaxShapeStats;
    size_t records = 0;
    for (size_t i = 0; i < drop; ++i) records += profiles_per_shape_[i];
    shape_stats_.erase(shape_stats_.begin(), shape_stats_.begin() + drop);
    profiles_per_shape_.erase(profiles_per_shape_.begin(), profiles_per_shape_.begin() + drop);
    profiles_.erase(profiles_.begin(), profiles_.begin() + records);
  }
  shape_stats_.push_back(ShapeKeyStats{exe.shape_key, exe.compile_ms,
                                       with_plan ? exe.plan.peak_bytes : 0,
                                       with_plan ? exe.plan.naive_bytes : 0,
                                       static_cast<int>(exe.launches().size()), exe.pass_timing});
  const size_t profiled = profiles_.size();
  for (const KernelLaunch& k : exe.launches())
    if (k.profile) profiles_.push_back(ProfileRecord{exe.shape_key, k.name, k.profile});
  profiles_per_shape_.push_back(static_cast<uint32_t>(profiles_.size() - profiled));
}

void Engine::EvictLocked(
    std::unordered_multimap<uint64_t, std::shared_ptr<Specialization>>::iterator it) {
  const Specialization& spec = *it->second;
  cached_bytes_ -= CachedExecutableBytes(*spec.exe);
  --cached_per_model_[spec.model_id];
  if (spec.exe->tier == Tier::kSpecialized) {
    if (evicted_count_ >= kMaxEvictedKeys) {
      evicted_.clear();
      evicted_count_ = 0;
    }
    evicted_count_ += evicted_[spec.model_id].insert(spec.key_hash).second ? 1 : 0;
  }
  // Runs in flight keep their executable alive; its memory goes when they finish.
  cache_.erase(it);
  evictions_.fetch_add(1, std::memory_order_relaxed);
}

bool Engine::WasEvictedLocked(uint64_t model_id, uint64_t key_hash) const {
  auto it = evicted_.find(model_id);
  return it != evicted_.end() && it->second.count(key_hash);
}

void Engine::InsertLocked(std::shared_ptr<Specialization> spec) {
  // Evict the model's least recently used executables until there is room.
  const uint64_t model_id = spec->model_id;
  while (options_.max_specializations > 0 &&
         cached_per_model_[model_id] >= options_.max_specializations) {
    auto lru = LeastRecent(cache_, [&](const Specialization& s) { return s.model_id == model_id; });
    if (lru == cache_.end()) break;  // the count and the cache disagree: a bug, but no loop
    EvictLocked(lru);
  }
  spec->last_used.store(clock_.fetch_add(1, std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
  cached_bytes_ += CachedExecutableBytes(*spec->exe);
  ++cached_per_model_[model_id];
  const Specialization* kept = spec.get();
  const uint64_t key_hash = spec->key_hash;
  cache_.emplace(key_hash, std::move(spec));
  TrimLocked(kept);
}

void Engine::PublishLocked(uint64_t model_id, uint64_t key_hash,
                           const std::vector<int64_t>& signature,
                           std::shared_ptr<const Executable> exe) {
  auto [begin, end] = cache_.equal_range(key_hash);
  for (auto it = begin; it != end; ++it) {
    Specialization& s = *it->second;
    if (s.model_id != model_id || s.signature != signature) continue;
    cached_bytes_ += CachedExecutableBytes(*exe) - CachedExecutableBytes(*s.exe);
    s.exe = std::move(exe);
    TrimLocked(&s);
    return;
  }
  auto spec = std::make_shared<Specialization>();
  spec->model_id = model_id;
  spec->key_hash = key_hash;
  spec->signature = signature;
  spec->exe = std::move(exe);
  InsertLocked(std::move(spec));
}

void Engine::TrimLocked(const Specialization* keep) {
  while (cached_bytes_ > max_cache_bytes_) {
    auto lru = LeastRecent(cache_, [&](const Specialization& s) { return &s != keep; });
    if (lru == cache_.end()) break;  // `keep` alone is over the budget: it stays
    EvictLocked(lru);
  }
}

void Engine::Forget(const Model& model) {
  if (const std::shared_ptr<const Segments>& seg = model.segments()) {
    if (seg->head) Forget(*seg->head);
    if (seg->loop_body) Forget(*seg->loop_body);
    Forget(*seg->rest);
  }
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (it->second->model_id != model.id()) {
        ++it;
        continue;
      }
      cached_bytes_ -= CachedExecutableBytes(*it->second->exe);
      it = cache_.erase(it);
    }
    cached_per_model_.erase(model.id());
    // Forgotten, not evicted: its shapes specialize again.
    if (auto it = evicted_.find(model.id()); it != evicted_.end()) {
      evicted_count_ -= it->second.size();
      evicted_.erase(it);
    }
  }
  std::lock_guard<std::mutex> lock(generic_mu_);
  generic_.erase(model.id());
}

std::string Engine::TraceJson() const {
  if (!tracer_)
    Throw(ErrorCode::kInvalidArgument,
          "the engine does not trace: EngineOptions::trace was off when it was made");
  return tracer_->Json();
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.runs = runs_.load(std::memory_order_relaxed);
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.specializations = specializations_.load(std::memory_order_relaxed);
  s.compile_errors = compile_errors_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.evicted_served_generic = evicted_served_generic_.load(std::memory_order_relaxed);
  s.respecializations = respecializations_.load(std::memory_order_relaxed);
  s.cache_budget_bytes = max_cache_bytes_;
  s.generic_runs = generic_runs_.load(std::memory_order_relaxed);
  s.generic_builds = generic_builds_.load(std::memory_order_relaxed);
  s.generic_unavailable = generic_unavailable_.load(std::memory_order_relaxed);
  s.background_queued = background_queued_.load(std::memory_order_relaxed);
  s.background_dropped = background_dropped_.load(std::memory_order_relaxed);
  KernelCacheCounters k = kernels_.counters();
  s.kernel_compiles = k.compiles;
  s.kernel_cache_hits = k.hits;
  s.disk_hits = k.disk_hits;
  s.disk_rejections = k.disk_rejections;
  if (kernels_.store()) s.disk_rejections_by_reason = kernels_.store()->RejectionsByReason();
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    s.cached_executables = cache_.size();
    s.cached_bytes = cached_bytes_;
    for (const auto& [hash, spec] : cache_)
      s.planned_peak_bytes = std::max(s.planned_peak_bytes, spec->exe->plan.peak_bytes);
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    s.shapes = shape_stats_;
    for (const ProfileRecord& r : profiles_)
      s.kernel_profile.push_back(KernelProfileStats{
          r.shape_key, r.kernel, r.profile->calls.load(std::memory_order_relaxed),
          static_cast<double>(r.profile->total_ns.load(std::memory_order_relaxed)) / 1e6});
  }
  for (const ShapeKeyStats& r : s.shapes) s.compile_ms += r.compile_ms;
  {
    std::lock_guard<std::mutex> lock(generic_mu_);
    for (const auto& [id, entry] : generic_)
      if (entry->exe.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
          !entry->exe.get())
        s.generic_unavailable_reasons.push_back(entry->model_name + ": " + entry->why);
  }
  return s;
}

}  // namespace kiln
