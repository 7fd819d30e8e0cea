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
  std::string mcpu;   // empty: the host CPU
  std::string mattr;  // e.g. "+avx2,+fma"; empty: the host's features
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

// A set of compiled kernels and the machine code that backs them. Immutable once built; may be
// shared between threads. Destroying it frees the code, so keep it alive while its KernelFns
// may be called.
class CompiledModule {
 public:
  virtual ~CompiledModule() = default;
  // The kernel compiled from the PrimFunc of that name; kNotFound if there is none.
  virtual KernelFn Lookup(const std::string& name) const = 0;
  virtual const CompileTimings& timings() const = 0;
  // The optimized LLVM IR (or CUDA C source), for debugging and tests.
  virtual const std::string& source() const = 0;
  // The relocatable object file the kernels were linked from, which LoadLLVMObject reads back
  // (the disk kernel cache stores it); empty where the code generator has none to give.
  virtual const std::string& object() const;
};

// Compiles PrimFuncs to machine code for the host CPU with LLVM ORC. The functions must pass
// loop::Verify with no Reduce left (run the loop pipeline first); an error from LLVM is
// kCompileError naming the function.
std::unique_ptr<CompiledModule> BuildLLVM(const std::vector<loop::PrimFunc>& funcs,
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

// The widest vector register the code for `options` may use, in bits: 512 with AVX-512F, 256
// with AVX, else 128. The loop passes size their vectors and register tiles by it (the
// PassContext key target.vector_bits).
int VectorRegisterBits(const CodegenOptions& options);

// Code generators by target kind ("llvm", later "cuda"), looked up as `target.build.<kind>`.
using BuildFn = std::function<std::unique_ptr<CompiledModule>(const std::vector<loop::PrimFunc>&,
                                                              const CodegenOptions&)>;
void RegisterCodegen(const std::string& name, BuildFn fn);
// kNotFound naming the target and listing the registered ones.
const BuildFn& GetCodegen(const std::string& name);

}  // namespace kiln
