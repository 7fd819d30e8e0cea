// Compiling one primitive (fused) function to a launchable kernel, for any target: lowering to
// loop IR, the loop pipeline the target's code generator names, and the code generator itself,
// both chosen by CodegenOptions::kind from the registry (jit/kernel.h GetCodegen,
// `target.build.<kind>`). The engine does this per fused group; tests use it per op.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "jit/cuda_codegen.h"
#include "jit/kernel.h"
#include "passes/lower_to_loops.h"

namespace kiln {

struct CompiledKernel {
  LoweredKernel lowered;                   // after the loop pipeline
  std::shared_ptr<CompiledModule> module;  // keeps the entry's code alive
  // How to call it (jit/kernel.h): the CPU function, or the device launches. Points into
  // `module`.
  const KernelEntry* entry = nullptr;
  CompileTimings timings;  // lower_ms includes graph -> loop IR lowering and loop passes
};

// `fn` (typed, primitive) lowered to loop IR and put through the loop pipeline of `kind`'s code
// generator, under the current PassContext (the "gpu" pipeline under its own, GpuLoopContext).
LoweredKernel LowerKernel(const Function& fn, const std::string& name,
                          const std::string& kind = "llvm");

// `options` as the current PassContext's codegen.* keys adjust them (fast_math, fp_contract,
// reassociate_reductions, slp_vectorize).
CodegenOptions WithPassContextOptions(const CodegenOptions& options);

// Lowers `fn` and compiles it with the code generator of `options.kind`, with the options
// WithPassContextOptions gives.
CompiledKernel CompileKernel(const Function& fn, const std::string& name,
                             const CodegenOptions& options = {});

// A fused group as CUDA C, without compiling it (which needs NVRTC): `lowered.func` is the loop
// IR after the gpu pipeline, `source` what the cuda code generator makes of it.
struct CudaKernelSource {
  LoweredKernel lowered;
  CudaModuleSource source;
};
CudaKernelSource LowerKernelToCuda(const Function& fn, const std::string& name);

// The arguments of one call of a lowered kernel: `inputs` bind the group function's parameters,
// then come its constants, then outputs allocated from `out_types`; the scalars are `symbols`'
// values in the kernel's order. Wrong counts and unbound symbols are kInvalidArgument.
struct KernelCall {
  std::vector<void*> buffers;
  std::vector<Tensor> outputs;
  std::vector<int64_t> scalars;
};
KernelCall BindKernelCall(const LoweredKernel& l, const std::vector<Tensor>& inputs,
                          const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                          const std::map<std::string, int64_t>& symbols);

// Runs a compiled CPU kernel on concrete tensors: `inputs` bind the group function's
// parameters; `symbols` the scalar parameters (by name); outputs are allocated from
// `out_shapes`. A device kernel is kInvalidArgument.
std::vector<Tensor> RunKernel(const CompiledKernel& k, const std::vector<Tensor>& inputs,
                              const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                              const std::map<std::string, int64_t>& symbols = {});

}  // namespace kiln
