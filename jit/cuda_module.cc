// The cuda target's code generator (jit/targets.def): loop IR -> CUDA C (cuda_codegen.h) ->
// PTX with NVRTC (nvrtc.h) for the target's -arch. A module holds the PTX and each function's
// launch object; loading the PTX onto a device and launching it is the CUDA device's
// (devices/cuda_device.h), so building needs NVRTC but no GPU.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"
#include "jit/cuda_codegen.h"
#include "jit/kernel.h"
#include "jit/nvrtc.h"

namespace kiln {
namespace {

class CudaCompiledModule final : public CompiledModule {
 public:
  const KernelEntry& Entry(const std::string& name) const override {
    return EntryNamed(entries_, name);
  }
  const CompileTimings& timings() const override { return timings_; }
  const std::string& source() const override { return source_; }  // the CUDA C
  const std::string& object() const override { return ptx_; }

  std::map<std::string, KernelEntry> entries_;
  CompileTimings timings_;
  std::string source_, ptx_;
};

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The program's name in NVRTC's messages: its first function's.
std::string ProgramName(const std::vector<loop::PrimFunc>& funcs) {
  return funcs.empty() ? std::string("kiln") : funcs.front()->name;
}

std::unique_ptr<CompiledModule> BuildCuda(const std::vector<loop::PrimFunc>& funcs,
                                          const CodegenOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<CudaCompiledModule>();
  CudaModuleSource source = EmitCuda(funcs);
  m->timings_.lower_ms = MsSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  m->ptx_ = CompileCudaToPtx(source.code, ProgramName(funcs), options.arch).ptx;
  m->timings_.codegen_ms = MsSince(t1);
  m->source_ = std::move(source.code);
  for (KernelEntry& e : source.functions) m->entries_[e.name] = std::move(e);
  return m;
}

}  // namespace

CodeGenerator CudaCodeGenerator() {
  CodeGenerator g;
  g.kind = "cuda";
  g.loop_pipeline = "gpu";
  g.options = [](const Target& t) {
    CodegenOptions o;
    o.kind = "cuda";
    o.arch = t.GetString("arch");
    return o;
  };
  g.build = BuildCuda;
  // The PTX comes back from the cache (no NVRTC run); the launch objects from the emitter, which
  // is a walk over the PrimFuncs.
  g.load = [](const std::string& ptx, const std::vector<loop::PrimFunc>& funcs,
              const CodegenOptions&) -> std::unique_ptr<CompiledModule> {
    auto m = std::make_unique<CudaCompiledModule>();
    CudaModuleSource source = EmitCuda(funcs);
    for (KernelEntry& e : source.functions)
      for (const DeviceLaunch& l : e.launches)
        if (ptx.find(".entry " + l.kernel + "(") == std::string::npos)
          Throw(ErrorCode::kCompileError, "cached kernels: the PTX has no kernel ", l.kernel);
    m->ptx_ = ptx;
    m->source_ = std::move(source.code);
    for (KernelEntry& e : source.functions) m->entries_[e.name] = std::move(e);
    return m;
  };
  g.identity = [](const CodegenOptions& o) {
    return StrCat("nvrtc=", NvrtcVersion(), "\narch=", o.arch);
  };
  g.formats = {{"cuda", ".cu"}, {"ptx", ".ptx"}};
  g.emit = [](const std::vector<loop::PrimFunc>& funcs, const CodegenOptions& o,
              const std::string& format) {
    if (format != "cuda" && format != "ptx")
      Throw(ErrorCode::kInvalidArgument, "the cuda code generator emits cuda or ptx, not '", format,
            "'");
    std::string code = EmitCuda(funcs).code;
    return format == "cuda" ? code : CompileCudaToPtx(code, ProgramName(funcs), o.arch).ptx;
  };
  return g;
}

}  // namespace kiln
