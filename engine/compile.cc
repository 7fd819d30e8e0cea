#include "engine/compile.h"

#include <chrono>

#include "ir/error.h"
#include "ir/trace.h"
#include "passes/pass_context.h"
#include "passes/pipeline.h"

namespace kiln {

LoweredKernel LowerKernel(const Function& fn, const std::string& name, const std::string& kind) {
  LoweredKernel l = LowerToLoops(fn, name);
  l.func = RunLoopPipeline(l.func, GetCodegen(kind).loop_pipeline);
  return l;
}

CodegenOptions WithPassContextOptions(const CodegenOptions& options) {
  CodegenOptions o = options;
  const PassContext& ctx = PassContext::Current();
  o.fast_math = o.fast_math || ctx.GetConfigBool("codegen.fast_math");
  o.fp_contract = o.fp_contract && ctx.GetConfigBool("codegen.fp_contract");
  o.reassociate_reductions =
      o.reassociate_reductions && ctx.GetConfigBool("codegen.reassociate_reductions");
  o.slp_vectorize = o.slp_vectorize || ctx.GetConfigBool("codegen.slp_vectorize");
  return o;
}

CompiledKernel CompileKernel(const Function& fn, const std::string& name,
                             const CodegenOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  const CodeGenerator& generator = GetCodegen(options.kind);
  CompiledKernel k;
  {
    TraceSpan span("compile", "lower to loops");  // and the loop passes, each a span of its own
    k.lowered = LowerKernel(fn, name, options.kind);
  }
  double lower_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  {
    TraceSpan span("compile", options.kind == "llvm" ? "LLVM" : "code generation");
    k.module = generator.build({k.lowered.func}, WithPassContextOptions(options));
  }
  k.entry = &k.module->Entry(name);
  k.timings = k.module->timings();
  k.timings.lower_ms += lower_ms;
  return k;
}

CudaKernelSource LowerKernelToCuda(const Function& fn, const std::string& name) {
  CudaKernelSource k;
  k.lowered = LowerKernel(fn, name, "cuda");
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
  if (k.entry->on_device())
    Throw(ErrorCode::kInvalidArgument, "@", k.lowered.func->name,
          " runs on a device: RunKernel calls CPU kernels only");
  KernelCall call = BindKernelCall(k.lowered, inputs, out_types, symbols);
  k.entry->cpu(call.buffers.data(), call.scalars.data());
  return call.outputs;
}

}  // namespace kiln
