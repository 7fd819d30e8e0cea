// Engine::EmitKernels: a model's fused groups, compiled for a target and written out as source
// or assembly (`kiln compile --emit`), on any machine: CUDA C and PTX need NVRTC, not a GPU.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "devices/target.h"
#include "engine/engine.h"
#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) Throw(ErrorCode::kInternal, "could not write '", path.string(), "'");
}

}  // namespace

std::vector<std::string> Engine::EmitKernels(const Model& model, std::span<const Tensor> inputs,
                                             const std::string& target_text,
                                             const std::string& format,
                                             const std::string& out_dir) {
  Target target;
  try {
    target = Target::Parse(target_text.empty() ? options_.target : target_text);
  } catch (const Error& e) {
    Throw(e.code(), "target: ", e.what());
  }
  const CodeGenerator& generator = GetCodegen(std::string(TargetKindName(target.kind())));
  auto fmt = std::find_if(generator.formats.begin(), generator.formats.end(),
                          [&](const CodeGenerator::EmitFormat& f) { return f.name == format; });
  if (fmt == generator.formats.end()) {
    std::string formats;
    for (const CodeGenerator::EmitFormat& f : generator.formats)
      formats += (formats.empty() ? "" : ", ") + f.name;
    Throw(ErrorCode::kInvalidArgument, "a ", generator.kind, " target emits ", formats, ", not '",
          format, "'");
  }
  if (model.segments())
    Throw(ErrorCode::kUnsupported, "model '", model.name(),
          "' runs in segments (its shapes depend on data): its kernels are known only as it runs");

  std::map<std::string, int64_t> symbols = BindInputs(model, inputs);
  Function fn = BindSymbols(model.graph(), symbols, model.constraints());
  if (model.dynamic()) fn = ResolveDynamic(fn, std::vector<Tensor>(inputs.begin(), inputs.end()));
  PassContextScope scope(MakePassContext());
  IRModule m = (*graph_pipeline_)(IRModule({{"main", fn}}));
  Function main = (*fuse_ops_)(m).Lookup("main");

  // Under the engine's PassContext (below), whose codegen.* keys adjust it as in CompileKernel.
  const CodegenOptions codegen = generator.options(target);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) Throw(ErrorCode::kInvalidArgument, "could not create '", out_dir, "': ", ec.message());

  std::vector<std::string> written;
  std::map<std::string, int> taken;  // groups of one name get _1, _2, ... after the first
  for (const Expr& e : PostOrder(main->body)) {
    const CallNode* call = e->kind == ExprKind::kCall ? AsCall(e) : nullptr;
    if (!call || !call->fn || !AsFunction(call->fn)) continue;
    Function group = std::static_pointer_cast<const FunctionNode>(call->fn);
    std::string name = KernelName(e->name);
    if (int n = taken[name]++) name += StrCat("_", n);
    std::filesystem::path path = std::filesystem::path(out_dir) / name;
    std::string text;
    try {
      text = generator.emit({LowerKernel(group, name, generator.kind).func},
                            WithPassContextOptions(codegen), format);
    } catch (const Error& err) {
      Throw(err.code(), "kernel '", name, "': ", err.what());
    }
    path += fmt->extension;
    WriteFile(path, text);
    written.push_back(path.string());
  }
  scope.Close();
  return written;
}

}  // namespace kiln
