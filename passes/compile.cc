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

std::vector<Tensor> RunKernel(const CompiledKernel& k, const std::vector<Tensor>& inputs,
                              const std::vector<std::pair<DType, std::vector<int64_t>>>& out_types,
                              const std::map<std::string, int64_t>& symbols) {
  const LoweredKernel& l = k.lowered;
  if (static_cast<int>(inputs.size()) != l.num_params)
    Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": expected ", l.num_params,
          " inputs, got ", inputs.size());
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) buffers.push_back(t.raw_data());
  for (const Tensor& t : l.constants) buffers.push_back(t.raw_data());
  std::vector<Tensor> outputs;
  for (const auto& [dtype, shape] : out_types) {
    outputs.push_back(Tensor::Empty(dtype, shape));
    buffers.push_back(outputs.back().raw_data());
  }
  if (buffers.size() != l.func->buffer_params.size())
    Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": expected ",
          l.func->buffer_params.size(), " buffers, got ", buffers.size());
  std::vector<int64_t> scalars;
  for (const std::string& s : l.symbols) {
    auto it = symbols.find(s);
    if (it == symbols.end())
      Throw(ErrorCode::kInvalidArgument, "@", l.func->name, ": symbol '", s, "' is unbound");
    scalars.push_back(it->second);
  }
  k.fn(buffers.data(), scalars.data());
  return outputs;
}

}  // namespace kiln
