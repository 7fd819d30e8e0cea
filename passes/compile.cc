#include "passes/compile.h"

#include <chrono>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "passes/loop_pass.h"
#include "passes/pipeline.h"

namespace kiln {

loop::PrimFunc RunLoopPipeline(const loop::PrimFunc& f) {
  IRModule m = IRModule().WithPrimFunc(f->name, LowerReductions(f));
  m = (*DefaultLoopPipeline())(m);
  loop::PrimFunc out = m.prim_funcs().at(f->name);
  loop::Verify(out, /*allow_reduce=*/false);
  return out;
}

CompiledKernel CompileKernel(const Function& fn, const std::string& name,
                             const CodegenOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  CompiledKernel k;
  k.lowered = LowerToLoops(fn, name);
  k.lowered.func = RunLoopPipeline(k.lowered.func);
  double lower_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CodegenOptions opts = options;
  opts.fast_math = opts.fast_math || PassContext::Current().GetConfigBool("codegen.fast_math");
  opts.fp_contract =
      opts.fp_contract && PassContext::Current().GetConfigBool("codegen.fp_contract");
  opts.reassociate_reductions =
      opts.reassociate_reductions &&
      PassContext::Current().GetConfigBool("codegen.reassociate_reductions");
  opts.slp_vectorize =
      opts.slp_vectorize || PassContext::Current().GetConfigBool("codegen.slp_vectorize");
  k.module = GetCodegen("target.build.llvm")({k.lowered.func}, opts);
  k.fn = k.module->Lookup(name);
  k.timings = k.module->timings();
  k.timings.lower_ms += lower_ms;
  return k;
}

CudaKernelSource LowerKernelToCuda(const Function& fn, const std::string& name) {
  CudaKernelSource k;
  k.lowered = LowerToLoops(fn, name);
  {
    PassContextScope scope(GpuLoopContext());
    IRModule m = IRModule().WithPrimFunc(name, LowerReductions(k.lowered.func));
    m = (*GpuLoopPipeline())(m);
    k.lowered.func = m.prim_funcs().at(name);
    scope.Close();
  }
  loop::Verify(k.lowered.func, /*allow_reduce=*/false);
  k.source = EmitCuda({k.lowered.func});
  return k;
}

KernelCall BindKernelCall(const LoweredKernel& l, const std::vector<Tensor>& inputs,
                          const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                          const std::map<std::string, int64_t>& symbols) {
  if (static_cast<int>(inputs.size()) != l.num_params)
    Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": expected ", l.num_params,
          " inputs, got ", inputs.size());
  KernelCall call;
  for (const Tensor& t : inputs) call.buffers.push_back(t.raw_data());
  for (const Tensor& t : l.constants) call.buffers.push_back(t.raw_data());
  for (const auto& [dtype, shape] : out_types) {
    call.outputs.push_back(Tensor::Empty(dtype, shape));
    call.buffers.push_back(call.outputs.back().raw_data());
  }
  if (call.buffers.size() != l.func->buffer_params.size())
    Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": expected ",
          l.func->buffer_params.size(), " buffers, got ", call.buffers.size());
  for (const std::string& s : l.symbols) {
    auto it = symbols.find(s);
    if (it == symbols.end())
      Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": symbol '", s, "' is unbound");
    call.scalars.push_back(it->second);
  }
  return call;
}

std::vector<Tensor> RunKernel(const CompiledKernel& k, const std::vector<Tensor>& inputs,
                              const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                              const std::map<std::string, int64_t>& symbols) {
  KernelCall call = BindKernelCall(k.lowered, inputs, out_types, symbols);
  k.fn(call.buffers.data(), call.scalars.data());
  return call.outputs;
}

}  // namespace kiln
