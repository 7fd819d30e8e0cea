// Compiling one primitive (fused) function to a runnable kernel: lowering, the loop pipeline,
// and code generation. The engine does this per fused group; tests use it per op.
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
  std::shared_ptr<CompiledModule> module;  // keeps the machine code alive
  KernelFn fn = nullptr;
  CompileTimings timings;  // lower_ms includes graph -> loop IR lowering and loop passes
};

// The loop-level pipeline run on every lowered kernel (LowerReductions, then the loop
// passes registered for `opt_level`), under the current PassContext.
loop::PrimFunc RunLoopPipeline(const loop::PrimFunc& f);

// Lowers `fn` (typed, primitive), runs the loop pipeline and compiles it with `target.build.llvm`.
CompiledKernel CompileKernel(const Function& fn, const std::string& name,
                             const CodegenOptions& options = {});

// A fused group as CUDA C (jit/cuda_codegen.h): lowered, put through GpuLoopPipeline, and
// emitted as one function's kernels. `lowered.func` is the loop IR the source was made from.
// Compiling the source to PTX is CompileCudaToPtx's (jit/nvrtc.h).
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

// Runs a compiled kernel on concrete tensors: `inputs` bind the group function's parameters;
// `symbols` the scalar parameters (by name); outputs are allocated from `out_shapes`.
std::vector<Tensor> RunKernel(const CompiledKernel& k, const std::vector<Tensor>& inputs,
                              const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                              const std::map<std::string, int64_t>& symbols = {});

}  // namespace kiln
