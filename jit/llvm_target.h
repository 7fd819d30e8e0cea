// The machine LLVM generates code for, for the files in jit/ only (it names LLVM types): the
// target machine builder for a CodegenOptions, and the narrow workarounds for miscompiles in
// the LLVM kiln links, decided per resolved CPU. kernel.h has the LLVM-free part of this API
// (LLVMVersion, LLVMTargetDescription, HostCannotRun).
#pragma once

#include <string>

#include "jit/kernel.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"

namespace kiln {

// Registers the native target with LLVM, and kiln's fatal error handler, once per process.
// Thread-safe.
void InitializeLLVM();

// While one lives on a thread, an LLVM fatal error on that thread (report_fatal_error, which
// would abort the process) throws a kCompileError instead. Every entry into LLVM that compiles
// or links holds one. Nests. Not copyable.
class LLVMFatalErrorsThrow {
 public:
  LLVMFatalErrorsThrow();
  ~LLVMFatalErrorsThrow();
  LLVMFatalErrorsThrow(const LLVMFatalErrorsThrow&) = delete;
  LLVMFatalErrorsThrow& operator=(const LLVMFatalErrorsThrow&) = delete;
};

// The host (or the requested CPU). A named CPU brings its own feature set plus `mattr`; for
// the host, `mattr` is appended to the detected features, so "-avx512f" turns one off.
// kCompileError when LLVM cannot describe the host.
llvm::orc::JITTargetMachineBuilder TargetFor(const CodegenOptions& options);

// What BuildLLVM changes in its pipeline for one resolved CPU, because the LLVM it links would
// otherwise generate wrong code there. Each field says which LLVM versions need it.
struct LLVMWorkarounds {
  // LLVM 19's SLP vectorizer miscompiles straight-line multiply trees that reuse loaded
  // scalars when the cost model makes masked gathers cheap, which it does for znver4 and znver5:
  // for a vector of products whose operands come partly from a gather and partly from scalar
  // loads, it builds the operand with a final shufflevector whose mask leaves poison in the
  // lanes that should come from the scalars (the shuffle that would fill them is left dead).
  // Found as conv f64, group=2, strides=[3]: outputs 13, 14, 16 and 17 of 18 wrong. The IR kiln
  // gives it is valid (in-bounds, true noalias, no poison); reduced case:
  // tests/jit/data/zen4_slp_gather_shuffle.ll. The fix is to not run the SLP vectorizer there;
  // the loop vectorizer and kiln's own vectors are unaffected, and the kernels bench
  // (BM_Workarounds) shows no loss from it.
  bool no_slp_vectorizer = false;
};
// The workarounds for `cpu` (a resolved LLVM CPU name, as TargetFor's getCPU() gives) under
// `options`; none when options.llvm_workarounds is false.
LLVMWorkarounds WorkaroundsFor(const std::string& cpu, const CodegenOptions& options);

}  // namespace kiln
