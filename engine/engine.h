// Engine: runs models, compiling one executable per (model, input shapes) on first use and
// dispatching it on every later run with those shapes (SPEC.md §6, DESIGN.md "Data flow of one
// run").
//
//   EngineOptions options;
//   options.num_threads = 4;
//   Engine engine(options);
//   ModelPtr model = Model::Create(graph, "mlp");
//   std::vector<Tensor> out = engine.Run(*model, inputs);  // miss: specialize, compile, run
//   engine.Run(*model, inputs, out);                       // hit: no heap allocation
//
// Threading: every member function may be called by many threads at once, with one model or
// many. A shape being compiled is compiled once; other callers of it wait for it. Kernels run
// inside a oneTBB task arena owned by the engine, so num_threads bounds the threads its
// kernels use. The engine must outlive the runs it serves.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

#include "devices/device_api.h"
#include "devices/host_pages.h"
#include "engine/compile_pool.h"
#include "engine/executable.h"
#include "engine/kernel_cache.h"
#include "engine/model.h"
#include "ir/attrs.h"
#include "jit/runtime.h"
#include "passes/instrument.h"
#include "passes/pass.h"

namespace kiln {

struct Segments;

// How a shape that has no specialized executable yet is served (EngineOptions::policy).
enum class CompilePolicy {
  // The caller waits while its shape is specialized and compiled (on its own thread and the
  // engine's arena).
  kEager,
  // The model's shape-generic executable (kernels that take the dims as arguments, compiled
  // once, on the background compile pool from the model's first run; until it is ready a new
  // shape is compiled as under kEager) serves the shape at once; once the shape has been run
  // `specialize_after` times it is queued for specialization on the background compile pool,
  // and the specialized executable replaces the generic one for later runs when it is ready.
  kTiered,
  // The shape-generic executable serves every shape but one that leaves a tensor empty, which
  // is compiled for itself (engine/generic_bind.h says why); nothing else is specialized.
  kGenericOnly,
};
const char* CompilePolicyName(CompilePolicy p);  // "eager", "tiered", "generic_only"
// The policy named `eager`, `tiered` or `generic_only`; kInvalidArgument otherwise.
CompilePolicy ParseCompilePolicy(const std::string& name);

// The highest opt level a pass is registered at (passes run at or below the context's level);
// levels above it would mean nothing, so they are refused rather than taken as 3.
inline constexpr int kMaxOptLevel = 3;

// EngineOptions::max_specializations: the runs served by specialized executables that pay for
// specializing one evicted shape again.
inline constexpr uint64_t kRunsPerRespecialization = 1024;

struct EngineOptions {
  // A Target (devices/target.h) as a short string (`llvm -mcpu=znver3 -mattr=+avx2,+fma`) or
  // JSON. `llvm` alone is the host CPU. `cuda` (`cuda -arch=sm_80`) runs every kernel on
  // cuda(0): CUDA C compiled by NVRTC for the arch, launched on the run thread's current stream
  // of the device (engine/device_dispatch.h); runs take and give host tensors.
  std::string target = "llvm";
  // The device API that runs a device target's kernels; null: the registered one of the
  // target's device kind (devices/device_api.h). Not owned: it must outlive the engine. Tests
  // give a host emulation of a CUDA device here.
  DeviceAPI* device_api = nullptr;
  int opt_level = 2;                             // the PassContext's opt level, 0 to kMaxOptLevel
  std::vector<std::string> disabled_passes;      // never run (FuseOps disabled: one op per kernel)
  std::vector<std::string> required_passes;      // run whatever the opt level
  std::map<std::string, AttrValue> pass_config;  // registered PassContext config keys -> values
  // The graph pipeline as a pipeline string (`InferType,FoldConstant,FuseOps`); empty: the
  // DefaultGraphPipeline. FuseOps runs after it in any case.
  std::string graph_pipeline;
  int num_threads = 0;  // kernel threads; 0: all the machine has
  // Where the disk kernel cache lives (empty: none), so a new process starts warm: compiled
  // kernels are written there and loaded instead of compiled (engine/disk_store.h). Created
  // owner-only if missing; an existing directory must be the user's and mode 0700 (or
  // stricter), since the cache holds machine code this process runs.
  std::string cache_dir;
  // The bound on the disk cache's total size; past it the least recently used entries go.
  uint64_t cache_max_bytes = uint64_t{1} << 30;
  // The most memory one run may take: its arena of intermediates, plus its outputs where the
  // engine allocates them. A run over it fails with kOutOfMemory naming the limit before any of
  // it is allocated, so a small model cannot make a server allocate without bound (a
  // ConstantOfShape to 2^31 elements, say). 0: half the machine's memory.
  uint64_t max_run_bytes = 0;
  // Consulted on an in-memory kernel cache miss. When set, it is used instead of the disk cache
  // of `cache_dir` (a test double, or a store of the caller's own).
  std::shared_ptr<KernelStore> kernel_store;
  // The most executables (shapes) kept per model; past it the least recently used is evicted.
  // 0: unbounded. Bounded by default, so a server fed ever new shapes keeps its memory.
  // Tiered, a shape whose specialized executable was evicted is served by the generic tier
  // when it comes back, not specialized again: with a bound smaller than the shapes in use,
  // the engine would otherwise compile in a loop. Only one such shape is specialized again
  // per kRunsPerRespecialization runs served specialized, so a hot shape that a burst of new
  // ones pushed out recovers, while compiles stay within the distinct shapes seen plus one
  // per that many runs.
  int max_specializations = 64;
  // The memory all cached executables of all models may keep, as estimated
  // (CachedExecutableBytes: their kernels' code and loop IR, constants folded or packed for
  // their shape, their tables); past it the least recently used of any model are evicted, as
  // for max_specializations (the one just cached stays, even alone over the budget: a run
  // needs it). 0: a sixteenth of the machine's memory, at least 64 MiB and at most 1 GiB
  // (EngineStats::cache_budget_bytes says which).
  uint64_t max_cache_bytes = 0;
  // Installed in the PassContext of every specialization's graph pipeline, after the engine's
  // own. Compiles of different shapes run on their callers' threads, so hooks may be called
  // from several threads at once: an instrument shared here must be thread-safe.
  std::vector<InstrumentPtr> instruments;
  // Tiers (CompilePolicy). A model has a generic tier when its inputs have symbolic dims and
  // every dim inside it is made of them; a model without one (no symbolic dims, dims that
  // values decide, a data-dependent op's segments aside) is served eagerly whatever the policy.
  // Tiered by default: once a model has run, a new shape of it never waits for a compile.
  CompilePolicy policy = CompilePolicy::kTiered;
  int specialize_after = 1;  // kTiered: runs of a shape before it is queued; at least 1
  int compile_threads = 1;   // kTiered: the background compile pool's threads; at least 1
  // kTiered: the niceness of the compile pool's threads (Linux; 0 to 19, 0: the process's own).
  // At 19 a compile takes the cores that runs leave idle and yields to a run at once: where
  // runs and compiles share cores, a shape served by the generic tier meanwhile runs as fast as
  // alone (2 vCPUs, 2 run threads, kiln bench of the encoder layer over 8 shapes: tier-0 p50
  // 1.6-2.3x -> 1.0-1.3x the specialized p50). A machine kept saturated by runs then compiles
  // slowly; a lower value gives compiles a fixed share. Only a pool of one thread is niced: with
  // compile_threads > 1 the pool's threads could start oneTBB's workers, which would inherit
  // the niceness and which runs share.
  int compile_nice = 19;
  // Profiling: each specialization records its per-pass timing (a PassTimingInstrument of its
  // own), and dispatch times every kernel launch, accumulated per kernel (EngineStats). Off, the
  // hit path does no timing at all.
  bool profile = false;
  // Tracing: a Chrome/Perfetto trace (Engine::TraceJson, ir/trace.h) of every compile (its
  // phases, each pass, each kernel's lowering and code generation) and every run and kernel
  // launch, per thread, with shapes in the events' arguments. It times each launch as
  // profiling does (and so fills the kernel profile) and records an event per launch: for
  // finding where time goes, not for serving. Off, the hit path sets no span.
  bool trace = false;
};

// One compiled shape key.
struct ShapeKeyStats {
  std::string shape_key;  // `mlp(x: f32[3, 8])`
  double compile_ms = 0;
  size_t planned_peak_bytes = 0;
  size_t naive_bytes = 0;
  int kernels = 0;
  // With EngineOptions::profile: the graph pipeline's passes, nested as PassTiming records them.
  std::vector<PassTimingInstrument::Entry> pass_timing;
};

// With EngineOptions::profile: one kernel of one specialization, over every run so far.
struct KernelProfileStats {
  std::string shape_key;
  std::string kernel;
  uint64_t calls = 0;
  double total_ms = 0;
};

// A snapshot of the engine's counters (each read atomically; together, approximately).
struct EngineStats {
  uint64_t runs = 0;  // Run calls (a model run in segments counts once)
  // Lookups by Run and Prepare: found cached, or not (then compiled, or waited for); each
  // segment of a run (engine/segments.h) looks up its own executable.
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t specializations = 0;  // executables built
  uint64_t compile_errors = 0;   // specializations that failed
  // Tiers: lookups served by a model's shape-generic executable, the generic executables built,
  // the models found to have none (served eagerly), and background specializations queued.
  uint64_t generic_runs = 0;
  uint64_t generic_builds = 0;
  uint64_t generic_unavailable = 0;
  uint64_t background_queued = 0;
  uint64_t background_dropped = 0;  // queued, then not compiled: evicted before their turn
  // Per model found to have no generic tier: `model: why` (the build's error, or the reason it
  // was not tried).
  std::vector<std::string> generic_unavailable_reasons;
  uint64_t evictions = 0;  // executables dropped for max_specializations or max_cache_bytes
  // Lookups of a shape whose specialized executable was evicted, served by the generic tier
  // instead of compiling it again; and such shapes specialized again all the same
  // (kRunsPerRespecialization).
  uint64_t evicted_served_generic = 0;
  uint64_t respecializations = 0;
  uint64_t cached_executables = 0;
  uint64_t cached_bytes = 0;        // their estimated memory (EngineOptions::max_cache_bytes)
  uint64_t cache_budget_bytes = 0;  // max_cache_bytes, its default resolved
  uint64_t kernel_compiles = 0;
  uint64_t kernel_cache_hits = 0;
  uint64_t disk_hits = 0;        // kernels loaded from the disk cache (the KernelStore)
  uint64_t disk_rejections = 0;  // entries found unusable there, then rebuilt
  // disk_rejections by reason (`truncated`, `checksum`, `bad_version`, `key_mismatch`, ...).
  std::map<std::string, uint64_t> disk_rejections_by_reason;
  double compile_ms = 0;          // all specializations
  size_t planned_peak_bytes = 0;  // the largest arena among cached executables
  // The specializations built, in order (evicted ones too): the last kMaxShapeStats at least,
  // so a server that sees ever new shapes keeps no growing list.
  std::vector<ShapeKeyStats> shapes;
  static constexpr size_t kMaxShapeStats = 4096;
  // With profile: every kernel of the specializations in `shapes`, evicted ones too.
  std::vector<KernelProfileStats> kernel_profile;
};

// What serves a run with given inputs now, and on a miss why (Engine::Explain).
struct Explanation {
  std::string shape_key;           // `mlp(x: f32[7, 8])`
  bool cached = false;             // an executable is cached for the shape key
  Tier tier = Tier::kSpecialized;  // cached: what serves it; a miss: what would
  // A miss: what is new, `first run of model 'mlp'`, `input 'x' dim 0 is 7; cached: 1, 3`,
  // `input 'x' has dtype f16; cached: f32`, `a new combination of seen dims`. "" on a hit.
  std::string reason;
  // A model run in segments (a data-dependent op): the above is its head's, the part the
  // inputs key, and this says so and names the op. "" otherwise.
  std::string segments;
};

// A shape key a process ran, for warm starts (Engine::SeenShapes, Precompile): each input's
// dims (dtypes are the model's), and the lookups it had.
struct SeenShape {
  std::vector<std::vector<int64_t>> inputs;
  uint64_t runs = 0;
};
// The shape log as text, one shape a line: `RUNS NAME=DIMS NAME=DIMS ...`, DIMS as `3x784` (empty
// for a scalar); `#` starts a comment line. Parse errors (kParseError) name the line and what is
// wrong; inputs are matched by name against `model`'s.
std::string FormatShapeLog(const Model& model, const std::vector<SeenShape>& shapes);
std::vector<SeenShape> ParseShapeLog(const Model& model, const std::string& text);

// The codegen options an engine makes of `target` (EngineOptions::target, in any spelling
// devices/target.h reads). kInvalidArgument (kParseError for text that is not a target) when it
// names a CPU or feature the code generator does not know, or asks for CPU code this machine
// cannot run: a target is refused before any code is generated for it, never by the process
// dying in the compiler. kiln_options_set_target checks with it too.
CodegenOptions EngineCodegenOptions(const std::string& target);

class Engine {
 public:
  // Validates the options (target, pass names, config keys); errors are kInvalidArgument,
  // kUnsupported or kNotFound naming the option.
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs `model` on `inputs` (one per model input), writing into `outputs`, which must be
  // defined tensors of the executable's output types and must not overlap the inputs. On a
  // cache hit this allocates nothing on the heap (except for a model run in segments, whose
  // output sizes are known only once it ran: it allocates, then copies into `outputs`). Errors
  // name the model, the input or output and the shapes; a compile error names the pass or node.
  void Run(const Model& model, std::span<const Tensor> inputs, std::span<const Tensor> outputs);
  // The same, allocating the outputs.
  std::vector<Tensor> Run(const Model& model, std::span<const Tensor> inputs);

  // Makes the runs the calling thread starts while it lives cancellable by `*flag` (not owned;
  // it must outlive the scope): such a run checks it before it looks up or compiles its
  // executable and before each kernel launch (a launch in progress finishes), and once it is
  // set throws kCancelled naming the shape key and how far the run got. Scopes nest; the inner
  // one's flag applies. How kiln_run_cancel stops an asynchronous run.
  class CancelScope {
   public:
    explicit CancelScope(const std::atomic<bool>* flag);
    ~CancelScope();
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

   private:
    const std::atomic<bool>* outer_;
  };

  // The executable for these inputs' shapes, compiled if it is not cached (nothing runs). A
  // model run in segments has no one executable: its head's is prepared and returned (null
  // when it has no head); the rest's shapes are known only once a run gets there.
  std::shared_ptr<const Executable> Prepare(const Model& model, std::span<const Tensor> inputs);
  // Drops every cached executable of `model` (runs in flight keep theirs).
  void Forget(const Model& model);

  EngineStats stats() const;
  // With EngineOptions::trace: the trace so far, in the Chrome/Perfetto JSON format
  // (Tracer::Json). Throws kInvalidArgument when the engine does not trace.
  std::string TraceJson() const;
  // What a run of `model` on `inputs` would be served by now, and on a miss which component of
  // the shape key is new. Looks only: nothing is compiled, counted or made recently used.
  // `inputs` are checked as a run checks them (count, rank, dtype, constraints). A model run
  // in segments is explained by its head (Explanation::segments).
  Explanation Explain(const Model& model, std::span<const Tensor> inputs) const;
  // Warm start. The shapes of `model` cached now, most run first (a model whose input values
  // set shapes records none: its keys hold values). Precompile builds the specialized executable
  // of each shape as an eager miss would, running nothing, whatever the policy: with the disk
  // cache of an earlier process that ran them, LLVM does not run, and the first request of each
  // shape is a hit. Shapes are checked as a run's inputs are (errors name the input).
  std::vector<SeenShape> SeenShapes(const Model& model) const;
  void Precompile(const Model& model, const std::vector<SeenShape>& shapes);
  // Blocks until the background compile pool (CompilePolicy::kTiered) has nothing queued or
  // running: every shape queued so far is then served by its specialized executable.
  void WaitForBackgroundCompiles();
  // The kernels `model` compiles to for `inputs` (their dtypes and shapes, a value input's
  // values), written to `out_dir` (created if missing), one file per fused group named after
  // it, in dataflow order: for a `cuda` target (a Target string, devices/target.h) CUDA C
  // (`format` "cuda", NAME.cu) or PTX for its arch ("ptx", NAME.ptx); for an `llvm` one the
  // optimized LLVM IR ("llvm", NAME.ll) or assembly ("asm", NAME.s). The formats are the target
  // kind's code generator's (CodeGenerator::formats). The engine's pass options apply; nothing
  // runs, is cached, or needs a GPU. Returns the paths written. A model run in segments (shapes
  // that depend on data) is kUnsupported; an unknown format for the target's kind is
  // kInvalidArgument naming the ones it has.
  std::vector<std::string> EmitKernels(const Model& model, std::span<const Tensor> inputs,
                                       const std::string& target, const std::string& format,
                                       const std::string& out_dir);
  // Why `model` has no shape-generic executable (empty when it has one, or none was tried).
  std::string GenericUnavailableReason(const Model& model) const;
  // Whether `inputs` leave a tensor of the model's generic executable empty (an input, or once
  // `generic` is built, any tensor of its binding): Explain's view of ServeGeneric's check.
  bool LeavesATensorEmpty(const Executable* generic, const Model& model,
                          std::span<const Tensor> inputs) const;
  const EngineOptions& options() const { return options_; }
  // A device target's device API and device (engine/device_dispatch.h); null and cpu(0) for the
  // CPU. A run launches on the calling thread's current stream of that device.
  DeviceAPI* device_api() const { return device_api_; }
  Device device() const { return device_; }
  int num_threads() const { return arena_.max_concurrency(); }

 private:
  // A cached executable and what identifies its shape key. `signature` is, per input, its
  // dtype, rank and dims: what a hash match is confirmed against.
  struct Specialization {
    uint64_t model_id = 0;
    uint64_t key_hash = 0;
    std::vector<int64_t> signature;
    // Replaced (under the exclusive lock) when a background specialization of a tier-0 entry
    // is published.
    std::shared_ptr<const Executable> exe;
    std::atomic<uint64_t> last_used{0};     // the engine's clock at the last hit
    std::atomic<uint32_t> generic_runs{0};  // runs served by a tier-0 `exe`
    std::atomic<uint64_t> lookups{0};       // hits, for SeenShapes
    std::atomic<bool> queued{false};        // queued for background specialization
  };
  // A model's shape-generic executable, built once: by the first run that needs it (kGenericOnly)
  // or in the background from the model's first run (kTiered); null in the future when the
  // model has none (`why` says why).
  struct GenericEntry {
    std::shared_future<std::shared_ptr<const Executable>> exe;
    std::string model_name;
    std::string why;
  };
  // What Build compiles: one shape key (`inputs`' signatures; `values`, the input tensors, for
  // a model whose shapes depend on values; `symbols`, their binding), or with `generic` the
  // model's shape-generic executable (the rest unused). Groups compile in parallel on `arena`.
  struct BuildRequest {
    bool generic = false;
    std::vector<TensorSignature> inputs;
    std::span<const Tensor> values;
    std::map<std::string, int64_t> symbols;
    tbb::task_arena* arena = nullptr;
  };
  // A shape key being compiled: its one compiler fulfils `result`, its waiters read it.
  struct InFlight {
    uint64_t model_id = 0;
    uint64_t key_hash = 0;
    std::vector<int64_t> signature;
    // Null when the compile failed: then the error, written before the result is set. Waiters
    // throw exceptions of their own made from it, never the compiler's: an exception object
    // shared between threads is freed by whichever lets go last, through reference counts
    // that ThreadSanitizer cannot see (libstdc++ is not instrumented).
    std::shared_future<std::shared_ptr<const Executable>> result;
    ErrorCode error_code = ErrorCode::kInternal;
    std::string error_message;
    // A background compile dropped before it started (its shape was evicted): no error, and a
    // waiter compiles the key itself.
    bool dropped = false;
    // Sets error_code and error_message from the exception being handled.
    void RecordCurrentError();
  };
  // Arenas for intermediate buffers, reused from run to run so a hit allocates nothing. Each
  // run takes one and gives it back; lock-free, one atomic exchange per slot tried.
  class ScratchPool {
   public:
    struct Scratch {
      HostPages pages;  // page-aligned, so kArenaAlignment-aligned
    };
    ScratchPool() = default;
    ~ScratchPool();
    ScratchPool(const ScratchPool&) = delete;
    ScratchPool& operator=(const ScratchPool&) = delete;
    // A scratch of at least `bytes`; maps memory only when no free one is large enough (then
    // grows one, keeping its pages).
    Scratch* Acquire(size_t bytes);
    void Release(Scratch* s);
    static void FreeArena(Scratch* s);

   private:
    static constexpr int kSlots = 64;  // more concurrent runs than this allocate and free
    std::atomic<Scratch*> slots_[kSlots] = {};
  };

  // Per input its dtype, rank and dims, and for a value input (Model::value_inputs) its data.
  static std::vector<int64_t> MakeSignature(const Model& model, std::span<const Tensor> inputs);
  static bool MatchesSignature(const Model& model, const std::vector<int64_t>& signature,
                               std::span<const Tensor> inputs);

  // The binding of the model's symbols that `inputs` give, checked against its constraints.
  // Errors (the caller's) name the model.
  static std::map<std::string, int64_t> BindInputs(const Model& model,
                                                   std::span<const Tensor> inputs);
  // Hit path (dispatch.cc): the executable for `inputs`, found or (on a miss) built.
  // With `defer_queue`, a background specialization the lookup makes due is not queued but
  // flagged there, for the caller to queue once its run is dispatched (QueueAfterRun): a
  // compile that starts beside a shape's first run slowed it 2-5x on 2 cores.
  std::shared_ptr<const Executable> Acquire(const Model& model, std::span<const Tensor> inputs,
                                            bool* defer_queue = nullptr);
  // The cached entry of `inputs`' shape key, or null; mu_ held (shared or exclusive).
  Specialization* FindLocked(const Model& model, uint64_t key_hash,
                             std::span<const Tensor> inputs) const;
  // Sets `*queue` when a tier-0 hit makes the shape due for background specialization.
  std::shared_ptr<const Executable> Find(const Model& model, uint64_t key_hash,
                                         std::span<const Tensor> inputs, bool* queue) const;
  void Dispatch(const Executable& exe, const Tensor* inputs, const Tensor* outputs);
  // kOutOfMemory when a run of `exe` needs more than max_run_bytes_: its arena, and its
  // outputs' bytes when the engine allocates them (`output_bytes`).
  void CheckRunBytes(const Executable& exe, bool output_bytes) const;
  // Run without counting it in stats().runs: a whole run, or a segment of one (its head, a loop
  // body's iteration, its rest), which counts as part of the run that asked for it.
  std::vector<Tensor> RunPart(const Model& model, std::span<const Tensor> inputs);
  // A model with segments (engine/segments.h): its head, its data-dependent op, its rest.
  std::vector<Tensor> RunSegments(const Model& model, std::span<const Tensor> inputs);
  // A segment's loop (Segments::loop_body), iteration by iteration.
  std::vector<Tensor> RunLoop(const Segments& seg, const std::vector<Tensor>& args);
  // Queues the background specialization Acquire deferred (`model` set) when the run leaves,
  // by return or by exception, so a shape flagged as queued is always queued.
  struct QueueAfterRun {
    Engine* engine;
    const Model* model;
    std::span<const Tensor> inputs;
    const Executable* served;  // the generic executable the run took; it outlives this
    ~QueueAfterRun();
  };
  // Miss path: single flight per shape key (engine.cc), building (specialize.cc).
  std::shared_ptr<const Executable> GetOrBuild(const Model& model, uint64_t key_hash,
                                               std::span<const Tensor> inputs);
  std::shared_ptr<const Executable> Build(const Model& model, const BuildRequest& req);
  // Tiers (tiers.cc): the shape served by the model's generic executable, or null when the
  // model has none; the generic executable itself, built on first use; a shape's background
  // specialization, queued and published.
  std::shared_ptr<const Executable> ServeGeneric(const Model& model, uint64_t key_hash,
                                                 std::span<const Tensor> inputs, bool* defer_queue);
  // kNo looks only: null unless it is built (a build in flight is not waited for). kHere
  // builds it on this thread when no one has started it, and waits for a build in flight.
  // kBackground starts its build on the compile pool when no one has, and returns null unless
  // it is built.
  enum class GenericBuild { kNo, kHere, kBackground };
  std::shared_ptr<const Executable> GenericFor(const Model& model, GenericBuild build);
  // Builds `model`'s generic executable on `arena` unless `why` says it has none, and fulfils
  // `entry`'s promise with it (null when it has none, `why` then set).
  std::shared_ptr<const Executable> BuildGeneric(
      const Model& model, tbb::task_arena* arena, std::string why, GenericEntry* entry,
      std::promise<std::shared_ptr<const Executable>>* promise);
  // `symbols`: the inputs' binding of the model's symbols, checked (the generic executable
  // serving the shape has it): the request thread does not bind the inputs a second time.
  void QueueSpecialization(const Model& model, uint64_t key_hash, std::span<const Tensor> inputs,
                           const std::map<std::string, int64_t>& symbols);
  std::shared_ptr<PassContext> MakePassContext() const;
  // For a device target: finds its device (device_api_, device_), which must be there, and
  // checks that its kernels can be compiled for it and loaded there.
  void UseDevice();
  // Caches `spec`, first evicting the least recently used entries its model has past
  // max_specializations, then those of any model past max_cache_bytes (never `spec` itself).
  void InsertLocked(std::shared_ptr<Specialization> spec);
  // Caches a specialized `exe` for the shape key: in the key's entry when it has one (a generic
  // binding that served the shape while it compiled), else in a new one (InsertLocked).
  void PublishLocked(uint64_t model_id, uint64_t key_hash, const std::vector<int64_t>& signature,
                     std::shared_ptr<const Executable> exe);
  // Evicts least recently used entries of any model but `keep` while cached_bytes_ is over
  // the budget.
  void TrimLocked(const Specialization* keep);
  void EvictLocked(std::unordered_multimap<uint64_t, std::shared_ptr<Specialization>>::iterator it);
  // Whether the shape key's specialized executable was evicted (then the generic tier serves it
  // unless runs paid for specializing it again: kRunsPerRespecialization); mu_ held.
  bool WasEvictedLocked(uint64_t model_id, uint64_t key_hash) const;
  // Adds a built executable to stats().shapes (and its kernels' profiles); stats_mu_ not held.
  void RecordBuilt(const Executable& exe, bool with_plan);

  const EngineOptions options_;
  // With options_.trace; shared with the kernel profiles that record launches into it.
  const std::shared_ptr<Tracer> tracer_;
  CodegenOptions codegen_;    // from the target string
  uint64_t max_run_bytes_;    // options_.max_run_bytes, its default resolved
  uint64_t max_cache_bytes_;  // options_.max_cache_bytes, its default resolved
  // A device target's device and its API (EngineOptions::device_api or the registry's); null
  // for the CPU, whose kernels are called on the host.
  DeviceAPI* device_api_ = nullptr;
  Device device_;
  int vector_bits_ = 0;  // VectorRegisterBits(codegen_)
  PassPtr graph_pipeline_;
  PassPtr fuse_ops_;
  uint64_t pipeline_hash_ = 0;  // pass configuration, part of every kernel key
  mutable tbb::task_arena arena_;
  // Reserves each thread's kernel scratch as it joins arena_ (ReserveThreadScratch); declared
  // after arena_, so it stops observing before the arena goes.
  class ScratchReserver : public tbb::task_scheduler_observer {
   public:
    explicit ScratchReserver(tbb::task_arena& arena) : tbb::task_scheduler_observer(arena) {
      observe(true);
    }
    ~ScratchReserver() override { observe(false); }
    void on_scheduler_entry(bool) override { ReserveThreadScratch(); }
  };
  ScratchReserver scratch_reserver_{arena_};
  // Thread teams for runs with parallel loops (jit/runtime.h), reused so hits allocate nothing.
  mutable ParallelTeamPool teams_;
  ScratchPool scratch_;
  KernelCache kernels_;
  // Background compiles (kTiered) group-compile on an arena of their own, compile_threads wide.
  mutable tbb::task_arena compile_arena_;

  // Cached executables by shape-key hash (model id, dtypes, dims). Readers (the hit path)
  // take the lock shared; inserting, evicting and the in-flight table take it exclusively.
  mutable std::shared_mutex mu_;
  std::unordered_multimap<uint64_t, std::shared_ptr<Specialization>> cache_;
  std::unordered_map<uint64_t, int> cached_per_model_;  // cache_'s entries by model id
  std::vector<std::shared_ptr<InFlight>> in_flight_;    // shape keys being compiled
  uint64_t cached_bytes_ = 0;  // CachedExecutableBytes of cache_'s executables
  // Shape keys (hashes, by model id) whose specialized executable was evicted. At most
  // kMaxEvictedKeys in all: past it the record starts over, so each may specialize once more.
  // By hash alone: a collision only keeps a shape on the generic tier.
  std::unordered_map<uint64_t, std::unordered_set<uint64_t>> evicted_;
  size_t evicted_count_ = 0;
  static constexpr size_t kMaxEvictedKeys = 1 << 16;
  mutable std::atomic<uint64_t> clock_{0};  // LRU time, ticked by every hit

  std::atomic<uint64_t> runs_{0}, hits_{0}, misses_{0}, specializations_{0}, compile_errors_{0},
      evictions_{0}, evicted_served_generic_{0}, respecializations_{0};
  mutable std::mutex stats_mu_;
  std::vector<ShapeKeyStats> shape_stats_;
  // With profile: every launch's counters, kept past eviction so the totals stay whole.
  struct ProfileRecord {
    std::string shape_key;
    std::string kernel;
    std::shared_ptr<const KernelProfile> profile;
  };
  std::vector<ProfileRecord> profiles_;
  // How many of profiles_ each of shape_stats_ added (in the same order): profiles_ is trimmed
  // with shape_stats_, so it too stays bounded however many shapes come.
  std::vector<uint32_t> profiles_per_shape_;

  mutable std::mutex generic_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<GenericEntry>> generic_;  // by model id
  // generic_binds_: the generic runs that were misses (ServeGeneric), so that hits_ -
  // (generic_runs_ - generic_binds_) counts the hits served specialized, with no counter of its
  // own on the hit path.
  mutable std::atomic<uint64_t> generic_runs_{0}, generic_binds_{0}, generic_builds_{0},
      generic_unavailable_{0}, background_queued_{0}, background_dropped_{0};
  // Set by the destructor: builds stop before their next kernel compile (kCancelled).
  std::atomic<bool> stopping_{false};
  // Last, so it is destroyed first: its running jobs use the members above.
  CompilePool compile_pool_;
};

// The shape key's hash of `inputs` for `model`: over its id and each input's dtype, rank and
// dims, and the values of its value inputs. Allocation-free; equal keys are confirmed by
// comparing the signature itself.
uint64_t ShapeKeyHash(const Model& model, std::span<const Tensor> inputs);
// The shape key as text, `mlp(x: f32[3, 8])` (value inputs show their leading values from
// `values`, the input tensors, when given).
std::string ShapeKeyText(const Model& model, const std::vector<TensorSignature>& inputs,
                         std::span<const Tensor> values);
// A kernel's symbol name from its fused group's call name (`fused_matmul_add`): letters, digits
// and underscores.
std::string KernelName(const std::string& call_name);

}  // namespace kiln
