// Tiers (EngineOptions::policy): a shape without a specialized executable is served by the
// model's shape-generic executable, bound to its shape (BindGeneric), and specialized in the
// background on the compile pool; the specialized executable then replaces the bound generic
// one in the shape's cache entry, so later runs find it with no more work than any hit.
//
// Threading: the generic executable is built once per model (single flight through a shared
// future in generic_, under generic_mu_); a background specialization registers its key in
// in_flight_ like an eager compile, so a key is never compiled twice at once; publishing swaps
// the entry's executable under the exclusive lock, and runs in flight keep the one they took.
#include <future>
#include <set>
#include <shared_mutex>

#include "engine/engine.h"
#include "engine/generic_bind.h"
#include "engine/segments.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

const char* CompilePolicyName(CompilePolicy p) {
  switch (p) {
    case CompilePolicy::kEager:
      return "eager";
    case CompilePolicy::kTiered:
      return "tiered";
    case CompilePolicy::kGenericOnly:
      return "generic_only";
  }
  return "?";
}

CompilePolicy ParseCompilePolicy(const std::string& name) {
  for (CompilePolicy p :
       {CompilePolicy::kEager, CompilePolicy::kTiered, CompilePolicy::kGenericOnly})
    if (name == CompilePolicyName(p)) return p;
  Throw(ErrorCode::kInvalidArgument, "unknown compile policy '", name,
        "'; expected eager, tiered or generic_only");
}

std::map<std::string, int64_t> Engine::BindInputs(const Model& model,
                                                  std::span<const Tensor> inputs) {
  std::vector<Type> types;
  for (const Tensor& t : inputs) types.push_back(TypeOfTensor(t));
  try {
    std::map<std::string, int64_t> symbols = BindInputShapes(model.graph(), types);
    CheckConstraints(model.constraints(), symbols);
    return symbols;
  } catch (const Error& e) {
    Throw(e.code(), "model '", model.name(), "': ", e.what());
  }
}

namespace {

// Why `model` cannot have a generic tier without trying to build one; empty if it may.
std::string GenericPrecondition(const Model& model) {
  if (model.dynamic() || !model.value_inputs().empty()) return "its shapes depend on input values";
  for (const Var& p : model.graph()->params)
    if (const TensorTypeNode* t = AsTensor(p->type); t && !IsConstShape(t->shape)) return "";
  return "its inputs have no symbolic dims (one shape: nothing to be generic over)";
}

}  // namespace

std::shared_ptr<const Executable> Engine::GenericFor(const Model& model, GenericBuild build) {
  std::shared_ptr<GenericEntry> entry;
  std::shared_ptr<std::promise<std::shared_ptr<const Executable>>> promise;  // set: we build it
  {
    std::lock_guard<std::mutex> lock(generic_mu_);
    auto it = generic_.find(model.id());
    if (it != generic_.end()) {
      entry = it->second;
    } else if (build == GenericBuild::kNo) {
      return nullptr;
    } else {
      promise = std::make_shared<std::promise<std::shared_ptr<const Executable>>>();
      entry = std::make_shared<GenericEntry>();
      entry->exe = promise->get_future().share();
      entry->model_name = model.name();
      generic_.emplace(model.id(), entry);
    }
  }
  if (!promise) {  // built, or being built by another caller or in the background
    if (build == GenericBuild::kHere) return entry->exe.get();  // a failed build leaves null
    return entry->exe.wait_for(std::chrono::seconds(0)) == std::future_status::ready
               ? entry->exe.get()
               : nullptr;
  }
  std::string why = GenericPrecondition(model);
  if (why.empty() && build == GenericBuild::kBackground) {
    std::shared_ptr<const Model> keep = model.shared_from_this();
    compile_pool_.Submit([this, keep, entry, promise] {
      BuildGeneric(*keep, &compile_arena_, "", entry.get(), promise.get());
    });
    return nullptr;
  }
  return BuildGeneric(model, &arena_, std::move(why), entry.get(), promise.get());
}

std::shared_ptr<const Executable> Engine::BuildGeneric(
    const Model& model, tbb::task_arena* arena, std::string why, GenericEntry* entry,
    std::promise<std::shared_ptr<const Executable>>* promise) {
  std::shared_ptr<const Executable> exe;
  if (why.empty()) {
    try {
      BuildRequest req;
      req.generic = true;
      req.arena = arena;
      exe = Build(model, req);
      generic_builds_.fetch_add(1, std::memory_order_relaxed);
      // Every shape bound to it shares these launches' counters; its plan is a placeholder.
      RecordBuilt(*exe, /*with_plan=*/false);
    } catch (const std::exception& e) {
      why = e.what();
      exe = nullptr;
    } catch (...) {
      why = "an unknown error";
      exe = nullptr;
    }
  }
  if (!exe) generic_unavailable_.fetch_add(1, std::memory_order_relaxed);
  entry->why = why;  // before set_value: readers read it after the future is ready
  promise->set_value(exe);
  return exe;
}

std::string Engine::GenericUnavailableReason(const Model& model) const {
  std::shared_ptr<GenericEntry> entry;
  {
    std::lock_guard<std::mutex> lock(generic_mu_);
    auto it = generic_.find(model.id());
    if (it == generic_.end()) return "";
    entry = it->second;
  }
  if (entry->exe.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return "";
  return entry->exe.get() ? "" : entry->why;
}

std::shared_ptr<const Executable> Engine::ServeGeneric(const Model& model, uint64_t key_hash,
                                                       std::span<const Tensor> inputs,
                                                       bool* defer_queue) {
  auto spec = std::make_shared<Specialization>();
  // The fast way, once the generic executable is built: bound straight from the tensors. Where
  // it gives up, the inputs are checked first (bad ones are the caller's error, and build
  // nothing), then bound by names, which names any fault (engine/generic_bind.h).
  std::shared_ptr<const Executable> generic = GenericFor(model, GenericBuild::kNo);
  if (!generic && options_.policy == CompilePolicy::kTiered) {
    // Not built yet, or none: a model's shape-generic kernels take a few times a shape's
    // specialization to compile (a detection-shaped conv net: 6.6 s against 2.0), so the
    // shapes that come before it is ready are compiled as eager would compile them, and it
    // builds meanwhile on the background compile pool. A model's first run never waits longer
    // than under kEager.
    GenericFor(model, GenericBuild::kBackground);
    return nullptr;
  }
  if (generic) PrefetchGeneric(*generic);
  std::shared_ptr<Executable> fast;
  if (generic && generic->generic->binder) fast = generic->generic->binder->Bind(*generic, inputs);
  if (fast) {
    fast->shape_key = ShapeKeyText(model, fast->inputs, inputs);
    spec->exe = std::move(fast);
  } else {
    std::map<std::string, int64_t> symbols = BindInputs(model, inputs);
    generic = GenericFor(model, GenericBuild::kHere);
    if (!generic) return nullptr;
    std::vector<TensorSignature> sigs;
    for (const Tensor& t : inputs) sigs.push_back({t.dtype(), t.shape(), t.nbytes()});
    spec->exe = BindGeneric(*generic, symbols, ShapeKeyText(model, sigs, inputs));
  }
  // Compiled for itself (GetOrBuild, whatever the policy): generic_bind.h says why.
  if (BindsAnEmptyTensor(*spec->exe)) return nullptr;
  spec->model_id = model.id();
  spec->key_hash = key_hash;
  spec->signature = MakeSignature(model, inputs);
  spec->generic_runs.store(1, std::memory_order_relaxed);
  std::shared_ptr<const Executable> exe = spec->exe;
  bool queue_now = false;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    // Another run may have bound (or specialized) this shape meanwhile: use its entry.
    if (Specialization* done = FindLocked(model, key_hash, inputs)) return done->exe;
    // A shape specialized before and evicted stays on the generic tier: `queued` for good, so
    // no run queues it (a bound smaller than the shapes in use would compile in a loop).
    bool evicted = WasEvictedLocked(model.id(), key_hash);
    if (evicted) {
      // Unless the runs served specialized since the last one pay for specializing it again.
      const uint64_t hits = hits_.load(std::memory_order_relaxed);
      const uint64_t tier0 = generic_runs_.load(std::memory_order_relaxed) -
                             generic_binds_.load(std::memory_order_relaxed);
      const uint64_t specialized_hits = hits > tier0 ? hits - tier0 : 0;
      if (specialized_hits / kRunsPerRespecialization >
          respecializations_.load(std::memory_order_relaxed)) {
        respecializations_.fetch_add(1, std::memory_order_relaxed);
        evicted = false;
      } else {
        evicted_served_generic_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    queue_now =
        !evicted && options_.policy == CompilePolicy::kTiered && options_.specialize_after <= 1;
    spec->queued.store(evicted || queue_now, std::memory_order_relaxed);
    InsertLocked(spec);
  }
  generic_runs_.fetch_add(1, std::memory_order_relaxed);
  generic_binds_.fetch_add(1, std::memory_order_relaxed);
  if (queue_now) {
    if (defer_queue)
      *defer_queue = true;
    else
      QueueSpecialization(model, key_hash, inputs, exe->symbols);
  }
  return exe;
}

void Engine::QueueSpecialization(const Model& model, uint64_t key_hash,
                                 std::span<const Tensor> inputs,
                                 const std::map<std::string, int64_t>& symbols) {
  auto promise = std::make_shared<std::promise<std::shared_ptr<const Executable>>>();
  auto mine = std::make_shared<InFlight>();
  mine->model_id = model.id();
  mine->key_hash = key_hash;
  mine->signature = MakeSignature(model, inputs);
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    for (const std::shared_ptr<InFlight>& f : in_flight_)
      if (f->model_id == model.id() && f->key_hash == key_hash && f->signature == mine->signature)
        return;  // already being compiled
    // Already compiled: by a compile of the key that was in flight when a run bound the
    // generic tier to it (the model's first shapes compile as eager does).
    if (Specialization* done = FindLocked(model, key_hash, inputs);
        done && done->exe->tier == Tier::kSpecialized)
      return;
    mine->result = promise->get_future().share();
    in_flight_.push_back(mine);
  }
  background_queued_.fetch_add(1, std::memory_order_relaxed);
  BuildRequest req;
  for (const Tensor& t : inputs) req.inputs.push_back({t.dtype(), t.shape(), t.nbytes()});
  req.symbols = symbols;
  req.arena = &compile_arena_;
  std::shared_ptr<const Model> keep = model.shared_from_this();
  compile_pool_.Submit([this, keep, req = std::move(req), mine, promise] {
    {
      // A shape evicted while it waited here is not compiled: under shape churn most queued
      // shapes are gone before their turn, and compiling them would only evict others.
      std::unique_lock<std::shared_mutex> lock(mu_);
      bool cached = false;
      auto [begin, end] = cache_.equal_range(mine->key_hash);
      for (auto it = begin; it != end && !cached; ++it)
        cached = it->second->model_id == mine->model_id &&
                 it->second->signature == mine->signature &&
                 it->second->exe->tier == Tier::kGeneric;
      if (!cached) {  // or specialized meanwhile, by an eager compile of the key
        in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), mine));
        mine->dropped = true;  // before the result: a waiter reads it after
        lock.unlock();
        background_dropped_.fetch_add(1, std::memory_order_relaxed);
        promise->set_value(nullptr);
        return;
      }
    }
    std::shared_ptr<const Executable> exe;
    try {
      exe = Build(*keep, req);
    } catch (...) {
      // The shape stays on its generic executable; the error is counted (and an eager compile
      // of the same key, were one to wait on this, gets it).
      compile_errors_.fetch_add(1, std::memory_order_relaxed);
      std::unique_lock<std::shared_mutex> lock(mu_);
      in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), mine));
      mine->RecordCurrentError();
      promise->set_value(nullptr);
      return;
    }
    {
      std::unique_lock<std::shared_mutex> lock(mu_);
      // Into the shape's generic entry; evicted meanwhile, cached anew (it was asked for).
      PublishLocked(mine->model_id, mine->key_hash, mine->signature, exe);
      in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), mine));
    }
    specializations_.fetch_add(1, std::memory_order_relaxed);
    RecordBuilt(*exe, /*with_plan=*/true);
    promise->set_value(exe);
  });
}

void Engine::WaitForBackgroundCompiles() {
  compile_pool_.WaitIdle();
}

bool Engine::LeavesATensorEmpty(const Executable* generic, const Model& model,
                                std::span<const Tensor> inputs) const {
  if (std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.numel() == 0; }))
    return true;
  if (!generic) return false;  // not built yet: what its binding would leave empty is unknown
  std::shared_ptr<const Executable> bound;
  if (generic->generic->binder) bound = generic->generic->binder->Bind(*generic, inputs);
  try {
    if (!bound) bound = BindGeneric(*generic, BindInputs(model, inputs), "");
  } catch (const Error&) {
    return false;  // a run would fail the same way: no tier serves it
  }
  return BindsAnEmptyTensor(*bound);
}

Explanation Engine::Explain(const Model& model, std::span<const Tensor> inputs) const {
  if (const std::shared_ptr<const Segments>& seg = model.segments()) {
    // Only the head is keyed by the inputs: what runs after the data-dependent op is keyed by
    // what it computes, known once a run gets there.
    Explanation x;
    if (seg->head) {
      x = Explain(*seg->head, inputs);
    } else {
      BindInputs(model, inputs);  // the run's checks, with its messages
      x.shape_key = StrCat(model.name(), " (no head: it starts with ", seg->node, ")");
      x.reason = "nothing before the data-dependent op is compiled";
    }
    x.segments = StrCat("model '", model.name(), "' runs in segments at ", seg->node,
                        ": this is its head; the ", seg->loop_body ? "loop body's" : "rest's",
                        " keys depend on the values it computes");
    return x;
  }
  BindInputs(model, inputs);  // the run's checks, with its messages
  Explanation x;
  std::vector<TensorSignature> sigs;
  for (const Tensor& t : inputs) sigs.push_back({t.dtype(), t.shape(), t.nbytes()});
  x.shape_key = ShapeKeyText(model, sigs, inputs);
  const uint64_t key_hash = ShapeKeyHash(model, inputs);
  std::vector<std::vector<int64_t>> seen;  // the model's cached signatures
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    for (const auto& [hash, spec] : cache_) {
      if (spec->model_id != model.id()) continue;
      if (hash == key_hash && MatchesSignature(model, spec->signature, inputs)) {
        x.cached = true;
        x.tier = spec->exe->tier;
        return x;
      }
      seen.push_back(spec->signature);
    }
  }
  // A miss: served by the generic tier when the policy and the model allow.
  if (options_.policy != CompilePolicy::kEager) {
    std::lock_guard<std::mutex> lock(generic_mu_);
    auto it = generic_.find(model.id());
    const bool ready = it != generic_.end() && it->second->exe.wait_for(std::chrono::seconds(0)) ==
                                                   std::future_status::ready;
    const bool unavailable = ready && !it->second->exe.get();
    // Tiered: until the generic executable is built, a new shape compiles as under kEager.
    const bool serves =
        options_.policy == CompilePolicy::kGenericOnly ? !unavailable : ready && !unavailable;
    if (serves && GenericPrecondition(model).empty())
      x.tier = LeavesATensorEmpty(ready ? it->second->exe.get().get() : nullptr, model, inputs)
                   ? Tier::kSpecialized
                   : Tier::kGeneric;
  }
  if (seen.empty()) {
    x.reason = StrCat("first run of model '", model.name(), "'");
    return x;
  }
  // The first input component whose value no cached key has. A signature is, per input,
  // dtype, rank, dims (and a value input's words): walk the inputs through each one.
  std::vector<size_t> pos(seen.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::string name = StrCat("input '", model.graph()->params[i]->name, "'");
    std::set<int64_t> dtypes, ranks;
    for (size_t k = 0; k < seen.size(); ++k) {
      dtypes.insert(seen[k][pos[k]]);
      ranks.insert(seen[k][pos[k] + 1]);
    }
    auto list = [](const std::set<int64_t>& v, auto show) {
      std::string s;
      for (int64_t e : v) s += StrCat(s.empty() ? "" : ", ", show(e));
      return s;
    };
    if (!dtypes.count(static_cast<int64_t>(t.dtype()))) {
      x.reason = StrCat(name, " has dtype ", DTypeName(t.dtype()), "; cached: ",
                        list(dtypes, [](int64_t d) { return DTypeName(static_cast<DType>(d)); }));
      return x;
    }
    for (int d = 0; d < t.ndim(); ++d) {
      std::set<int64_t> values;
      for (size_t k = 0; k < seen.size(); ++k) values.insert(seen[k][pos[k] + 2 + d]);
      if (!values.count(t.shape()[d])) {
        x.reason = StrCat(name, " dim ", d, " is ", t.shape()[d],
                          "; cached: ", list(values, [](int64_t v) { return StrCat(v); }));
        return x;
      }
    }
    for (size_t k = 0; k < seen.size(); ++k) {
      pos[k] += 2 + static_cast<size_t>(t.ndim());
      if (model.is_value_input(static_cast<int>(i))) pos[k] += (t.nbytes() + 7) / 8;
    }
    if (model.is_value_input(static_cast<int>(i))) {
      x.reason = StrCat(name, " sets shapes, and its values are new");
      return x;
    }
  }
  x.reason = "a new combination of dims seen before";
  return x;
}

}  // namespace kiln
