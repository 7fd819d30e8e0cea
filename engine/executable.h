// Executable: one model specialized to one set of input shapes, ready to dispatch. Built on a
// cache miss (engine/specialize.cc), run on every hit (engine/dispatch.cc).
//
// Immutable once built and shared between threads: per-run state (the arena of intermediate
// buffers, the pointer table of a launch) lives in the run, never here. An executable owns
// what its launches touch: its kernels (shared with the kernel cache and other executables)
// and its constants (shared with the model), so it stays valid after the model is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/compile.h"
#include "engine/memory_plan.h"
#include "ir/dim.h"
#include "ir/trace.h"
#include "passes/instrument.h"

namespace kiln {

// The type a run's input or output tensor must have.
struct TensorSignature {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
  std::string ToString() const;  // `f32[3, 8]`
};

// Where the data of one kernel buffer argument lives during a run.
struct BufferRef {
  enum class Kind : uint8_t { kInput, kOutput, kConstant, kArena };
  Kind kind = Kind::kArena;
  uint32_t index = 0;  // the input, output or constant index; for kArena the intermediate's
  size_t offset = 0;   // kArena: the byte offset in the run's arena (from the memory plan)
};

// A kernel's run time, accumulated by dispatch when the engine profiles. Shared by the
// executable (which writes it from any number of runs at once) and the engine's statistics.
// With EngineOptions::trace it also records each call as a trace event.
struct KernelProfile {
  mutable std::atomic<uint64_t> calls{0};
  mutable std::atomic<uint64_t> total_ns{0};
  std::shared_ptr<Tracer> tracer;  // set only when the engine traces
  std::string name, trace_args;    // the event's name and arguments (ir/trace.h)

  // One call that started at `t0` and has just ended: a clock read and two relaxed adds (and a
  // trace event on thread `tid`, the run's, when tracing).
  void Record(std::chrono::steady_clock::time_point t0, int tid = 0) const {
    const auto t1 = std::chrono::steady_clock::now();
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    calls.fetch_add(1, std::memory_order_relaxed);
    total_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
    if (tracer)
      tracer->Complete(name, "kernel", t0, t1, trace_args, tid ? tid : Tracer::ThreadId());
  }
};

// One kernel call. Its buffer arguments are Executable::buffer_refs[first_buffer, +num_buffers)
// in the kernel's order ([group params..., captured constants..., outputs...]); its scalar
// arguments Executable::scalars[first_scalar, +num_scalars).
struct KernelLaunch {
  std::string name;  // the fused group's call, e.g. `fused_matmul_add_relu`
  std::shared_ptr<const CompiledKernel> kernel;  // keeps `entry` and its code alive
  const KernelEntry* entry = nullptr;            // how to call it (jit/kernel.h)
  uint32_t first_buffer = 0, num_buffers = 0;
  uint32_t first_scalar = 0, num_scalars = 0;
  bool parallel = false;  // has a parallel loop: must run inside the engine's task arena
  std::shared_ptr<const KernelProfile> profile;  // set only when the engine profiles
};

// An output that no kernel writes directly (it is an input, a constant, or a value returned
// twice): copied after the last launch.
struct OutputCopy {
  BufferRef from;
  uint32_t output = 0;
  size_t nbytes = 0;
};

// An intermediate buffer, for inspection and tests; its storage is plan.offsets[i].
struct IntermediateBuffer {
  uint32_t producer = 0;  // the launch that writes it (ExecutableCode::launches)
  TensorSignature type;
  BufferLifetime lifetime;  // in launch steps
};

// Kernel calls bind at most this many buffers (a stack array in dispatch; checked at build).
inline constexpr uint32_t kMaxKernelBuffers = 256;

class GenericBinder;  // engine/generic_bind.h

// What a shape-generic executable (Executable::generic) knows of its tensors: shapes over the
// model's input symbols, evaluated per shape by BindGeneric (or its fast way, `binder`).
struct GenericShapes {
  std::vector<Shape> inputs, outputs;
  std::vector<Shape> intermediates;             // of Executable::intermediates, in order
  std::vector<std::string> scalar_symbols;      // the symbol each of Executable::scalars takes
  std::shared_ptr<const GenericBinder> binder;  // null: the model binds by names only
};

// Which tier made an executable (EngineOptions::policy).
enum class Tier : uint8_t {
  kSpecialized,  // compiled for its one shape key
  kGeneric,      // the model's shape-generic kernels, bound to one shape key (BindGeneric)
};
const char* TierName(Tier t);  // "specialized", "generic"

struct DeviceCode;  // engine/device_dispatch.h

// What every shape bound to one shape-generic executable shares with it (BindGeneric): the
// kernels and the constants they read. Immutable once built.
struct ExecutableCode {
  std::vector<Tensor> constants;     // model weights passed to kernels, kernels' captured constants
  std::vector<void*> constant_data;  // constants[i].raw_data(), read on dispatch
  std::vector<KernelLaunch> launches;  // in dataflow order
  // Set when the kernels run on a device (a `cuda` target): the constants there and the loaded
  // modules. Null: CPU kernels, called on the host.
  std::shared_ptr<const DeviceCode> device;
};

struct Executable {
  std::string shape_key;  // `mlp(x: f32[3, 8])`: the model and the shapes, for messages and stats
  uint64_t model_id = 0;
  std::map<std::string, int64_t> symbols;  // the binding of the model's symbolic dims
  std::vector<TensorSignature> inputs, outputs;

  // Shared, not copied, by BindGeneric: a new shape's first request binds the generic
  // executable, and copying every launch (names, kernel references) and constant was a third
  // to a half of that binding, cold (encoder layer: 12-18 of 30-38 us).
  std::shared_ptr<const ExecutableCode> code;
  const std::vector<KernelLaunch>& launches() const { return code->launches; }
  std::vector<BufferRef> buffer_refs;
  std::vector<int64_t> scalars;
  std::vector<OutputCopy> copies;

  std::vector<IntermediateBuffer> intermediates;
  MemoryPlan plan;        // offsets of `intermediates` in one arena of plan.peak_bytes
  bool parallel = false;  // some launch is parallel

  // What the kernels and constants of `code` keep in memory, estimated when it was built
  // (ExecutableCodeBytes). Every shape bound to a generic executable shares its code, which is
  // not charged to them (the generic executable, one per model, is outside the cache budget).
  size_t code_bytes = 0;

  double compile_ms = 0;  // the whole specialization, kernel cache hits included
  std::vector<PassTimingInstrument::Entry> pass_timing;  // when the engine profiles

  Tier tier = Tier::kSpecialized;
  // Set on the model's shape-generic executable only, which is never dispatched itself: its
  // kernels take the dims as scalar arguments, and `inputs`, `outputs`, `intermediates`,
  // `scalars`, `plan`, the arena offsets in `buffer_refs` and the sizes of `copies` are
  // placeholders that BindGeneric fills in for one shape.
  std::shared_ptr<const GenericShapes> generic;
};

// Estimates for the engine's cache budget (EngineOptions::max_cache_bytes), in bytes.
//
// What `code` keeps: per kernel its module (CompiledModule::resident_bytes) and loop IR, and
// every constant whose data `is_shared` does not claim (a model's weights are the model's; what
// was folded or packed for one shape is the code's). A kernel that several executables share
// is charged to each, so the estimate errs high.
size_t ExecutableCodeBytes(const ExecutableCode& code,
                           const std::function<bool(const void*)>& is_shared);
// What `exe` keeps besides its code: its tables (buffer references, scalars, intermediates,
// memory plan, signatures).
size_t ExecutableTableBytes(const Executable& exe);
// What a cache entry holding `exe` costs: its tables, plus its code unless it shares the code
// of the model's generic executable (Tier::kGeneric).
inline size_t CachedExecutableBytes(const Executable& exe) {
  return ExecutableTableBytes(exe) + (exe.tier == Tier::kGeneric ? 0 : exe.code_bytes);
}

}  // namespace kiln
