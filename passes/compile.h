// Compiling one primitive (fused) function to a runnable kernel: lowering, the loop pipeline,
// and code generation. The engine does this per fused group; tests use it per op.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"
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

// Runs a compiled kernel on concrete tensors: `inputs` bind the group function's parameters;
// `symbols` the scalar parameters (by name); outputs are allocated from `out_shapes`.
std::vector<Tensor> RunKernel(const CompiledKernel& k, const std::vector<Tensor>& inputs,
                              const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                              const std::map<std::string, int64_t>& symbols = {});

}  // namespace kiln
