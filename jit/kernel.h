// What code generators produce: compiled kernels with one calling convention, whatever the
// target. No LLVM or CUDA types appear here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devices/target.h"
#include "ir/loop/loop.h"

namespace kiln {

// The calling convention of every CPU kernel: `buffers` holds the data pointers of the
// PrimFunc's buffer parameters in order; `scalars` its scalar parameters (symbolic extents).
// Kernels are reentrant: many threads may call one kernel at once on different buffers.
// The buffers of one call must not overlap (code generators mark them noalias); element
// alignment is all they assume of the pointers.
using KernelFn = void (*)(void* const* buffers, const int64_t* scalars);

struct CompileTimings {
  double lower_ms = 0;    // loop IR -> LLVM IR (or CUDA C)
  double opt_ms = 0;      // optimization pipeline (O3)
  double codegen_ms = 0;  // machine code generation and linking
};

struct CodegenOptions {
  // The code generator (a registered target kind, GetCodegen): "llvm" for CPUs, "cuda".
  std::string kind = "llvm";
  std::string arch;   // cuda: the virtual architecture NVRTC compiles for ("sm_90")
  std::string mcpu;   // llvm; empty: the host CPU
  std::string mattr;  // llvm; e.g. "+avx2,+fma"; empty: the host's features
  int opt_level = 3;
  bool fast_math = false;   // reassociation and contraction for float math
  bool fp_contract = true;  // contraction only: a * b + c may become fma(a, b, c)
  // A reduction's update `acc[i] = acc[i] + v` may reassociate, so the loop vectorizer keeps
  // per-lane partial sums: the sum's order then follows the vector width (within rounding).
  bool reassociate_reductions = true;
  // LLVM's SLP vectorizer, which packs straight-line scalar code into vectors. Off by default:
  // kiln's own passes vectorize the loops (VectorizeLoops, TileLoops' tiles), and what SLP
  // packed there was mostly a register tile's one scalar column across its rows, which it
  // built with a gather of the rows' weights every reduction step (a 1x1 conv 160 -> 960 at
  // 7 x 7, 49 columns: 292 -> 136 us without it; the other kernels of the model set unchanged
  // within noise).
  bool slp_vectorize = false;
  // Narrow workarounds for miscompiles of the linked LLVM on some CPUs (LLVMWorkarounds in
  // jit/llvm_target.h). Turned off only by tests that check a workaround is still needed.
  bool llvm_workarounds = true;
};

// One kernel launch of a device function (a GPU's __global__). Every launch of a function takes
// the same parameters, in order: the PrimFunc's buffer parameters, then its scratch buffers
// (KernelEntry::scratch), then its scalar parameters.
struct DeviceLaunch {
  std::string kernel;  // the kernel's name in the module
  // The threads the launch can use, over the PrimFunc's scalar parameters: a parallel loop's
  // extent, or 1. The launcher picks the grid from it (ShapeDeviceCall); any grid is correct.
  loop::Expr threads;
  unsigned block_threads = 256;  // threads per block (a multiple of the warp size)
  size_t shared_bytes = 0;       // dynamic shared memory per block
};

// Global memory a device function's launches need for one call: `numel` elements of `dtype`,
// numel over the PrimFunc's scalar parameters. Shared by all the launches and their threads, or,
// with `per_thread`, numel elements for every thread a launch starts (grid x block): the pool
// of a buffer each thread allocates with a size that is not a constant, of which each thread
// uses its own slice.
struct DeviceScratch {
  std::string name;
  DType dtype = DType::kFloat32;
  loop::Expr numel;
  bool per_thread = false;
};

// How to call one compiled function: the launch object the engine dispatches. The argument
// layout is the PrimFunc's whatever the device: `buffers` (its buffer parameters' data
// pointers, in order; num_buffers of them) and `scalars` (its scalar parameters, int64). A CPU
// function is `cpu`, called on the dispatching thread (which is the CPU's ordered stream). A
// device function is `launches`, enqueued in order on one stream, each with the buffers, then
// `scratch` allocated per call, then the scalars.
struct KernelEntry {
  std::string name;
  KernelFn cpu = nullptr;
  std::vector<DeviceLaunch> launches;
  std::vector<DeviceScratch> scratch;
  std::vector<loop::Var> scalar_params;  // the variables `threads` and `numel` are over
  uint32_t num_buffers = 0;
  // Blocks a launch may start at most: a grid-stride loop covers the rest. Kept small where the
  // function has per-thread pools, whose size grows with the threads started.
  unsigned max_blocks = 4096;
  // A CPU function's machine code with its helpers (the text section it sits in), for a run
  // that is about to call it with a cold cache to prefetch; null and 0 where unknown.
  const void* text = nullptr;
  size_t text_bytes = 0;
  bool on_device() const { return cpu == nullptr; }
};

// What one call of a device function needs, for the call's scalar arguments: each launch's grid
// (blocks), and each scratch buffer's size in bytes (per-thread pools sized for the largest
// grid). An expression the scalars cannot evaluate is kInternal.
struct DeviceCallShape {
  std::vector<unsigned> grids;
  std::vector<size_t> scratch_bytes;
};
DeviceCallShape ShapeDeviceCall(const KernelEntry& entry, const int64_t* scalars);

// A set of compiled kernels and the code that backs them. Immutable once built; may be shared
// between threads. Destroying it frees the code, so keep it alive while its entries may be
// called.
class CompiledModule {
 public:
  virtual ~CompiledModule() = default;
  // How to call the function compiled from the PrimFunc of that name; kNotFound if none.
  virtual const KernelEntry& Entry(const std::string& name) const = 0;
  // A CPU function's code (Entry(name).cpu); kInvalidArgument for a device function.
  KernelFn Lookup(const std::string& name) const;
  virtual const CompileTimings& timings() const = 0;
  // The optimized LLVM IR (or CUDA C source), for debugging and tests.
  virtual const std::string& source() const = 0;
  // What the code generator's `load` reads back (the disk cache stores it): LLVM's relocatable
  // object file, a device module's PTX; empty where there is none to give.
  virtual const std::string& object() const;
  // The memory this module keeps (an estimate, for the engine's cache budget): its text and
  // object, plus what the code generator holds per module (a JIT instance and its code pages
  // for LLVM).
  virtual size_t resident_bytes() const;
};

// entries.at(name) for a CompiledModule::Entry; kNotFound naming it and the module's kernels.
const KernelEntry& EntryNamed(const std::map<std::string, KernelEntry>& entries,
                              const std::string& name);

// Compiles PrimFuncs to machine code for the host CPU with LLVM ORC. The functions must pass
// loop::Verify with no Reduce left (run the loop pipeline first); an error from LLVM is
// kCompileError naming the function.
std::unique_ptr<CompiledModule> BuildLLVM(const std::vector<loop::PrimFunc>& funcs,
                                          const CodegenOptions& options = {});

// The assembly BuildLLVM's code generation makes of the PrimFuncs for `options` (AT&T syntax
// on x86), for reading: `kiln compile --emit asm`. Errors as BuildLLVM's.
std::string LLVMAssembly(const std::vector<loop::PrimFunc>& funcs,
                         const CodegenOptions& options = {});

// Links an object file that BuildLLVM produced (CompiledModule::object) into a new JIT for the
// target `options` describe, with the same runtime helpers defined, and serves Lookup for every
// function the object exports. Bytes that are not an object file for this target, or that fail
// to link, are kCompileError; nothing is run on load. The object must come from a trusted place
// (it is machine code): callers check where it came from and that it is intact.
std::unique_ptr<CompiledModule> LoadLLVMObject(const std::string& object,
                                               const CodegenOptions& options = {});

// What a persistent cache key needs so that code built by another LLVM or for another CPU is
// never loaded. The LLVM version kiln was built against ("19.1.7").
std::string LLVMVersion();
// The machine BuildLLVM generates code for under `options`, resolved: the triple, the CPU name
// and the features, sorted and deduplicated (`x86_64-pc-linux-gnu znver3 +avx2,+fma,-avx512f`).
// With options.mcpu empty it is the real host CPU and its detected features plus options.mattr.
std::string LLVMTargetDescription(const CodegenOptions& options = {});
// Whether this machine can execute code BuildLLVM makes for `options`: "" when it can, else why
// not, naming the instruction-set features the CPU model (plus mattr) has and the host lacks,
// or the unknown CPU name.
std::string HostCannotRun(const CodegenOptions& options);
// Whether LLVM can generate x86-64 code for `options` at all: "" when it can, else why not (an
// unknown CPU or feature, a 32-bit CPU, SSE2 or 64-bit mode turned off, a mode or float-ABI
// feature). Targets are checked with it when they are parsed, because LLVM aborts the process on
// some of these rather than returning an error.
std::string InvalidLLVMTarget(const CodegenOptions& options);

// The widest vector register the code for `options` may use, in bits: 512 with AVX-512F, 256
// with AVX, else 128. The loop passes size their vectors and register tiles by it (the
// PassContext key target.vector_bits).
int VectorRegisterBits(const CodegenOptions& options);

// A code generator: what the engine needs to compile for one target kind and to name what it
// compiled. Registered once per kind as `target.build.<kind>`, from jit/targets.def (one line a
// target); GetCodegen finds it by the target's kind.
using BuildFn = std::function<std::unique_ptr<CompiledModule>(const std::vector<loop::PrimFunc>&,
                                                              const CodegenOptions&)>;
struct CodeGenerator {
  std::string kind;  // "llvm"
  // The loop pipeline its PrimFuncs go through first (passes/pipeline.h RunLoopPipeline): "cpu"
  // (tiles and vectors for the host) or "gpu" (threads, no vectors).
  std::string loop_pipeline;
  // The options a Target of this kind (devices/target.h) asks for; its errors name the attribute.
  std::function<CodegenOptions(const Target&)> options;
  BuildFn build;
  // Reads back what CompiledModule::object gave for `funcs` and the options (the PrimFuncs
  // after the loop pipeline, as `build` had them: the entries' argument layouts and launches
  // come from them); nullptr where the target's modules cannot be stored (the disk cache then
  // skips them).
  std::function<std::unique_ptr<CompiledModule>(
      const std::string& object, const std::vector<loop::PrimFunc>& funcs, const CodegenOptions&)>
      load;
  // Everything the code depends on besides the PrimFuncs and the options themselves (compiler
  // versions, the resolved machine), for persistent cache keys: a stored module is used only
  // where the identity is the same.
  std::function<std::string(const CodegenOptions&)> identity;
  // What `kiln compile --emit` can write (each format's name and its files' extension), and the
  // text for one format (kInvalidArgument for one not in `formats`).
  struct EmitFormat {
    std::string name;       // "ptx"
    std::string extension;  // ".ptx"
  };
  std::vector<EmitFormat> formats;
  std::function<std::string(const std::vector<loop::PrimFunc>&, const CodegenOptions&,
                            const std::string& format)>
      emit;
};

// kInvalidArgument if the kind is taken.
void RegisterCodegen(CodeGenerator generator);
// By kind ("llvm") or registry name ("target.build.llvm"); kNotFound naming it and listing the
// registered ones.
const CodeGenerator& GetCodegen(const std::string& kind);

}  // namespace kiln
