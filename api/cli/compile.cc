// kiln compile (api/cli/kiln.cc's file comment): a model's kernels for given input shapes,
// written as source or assembly, one file per fused group. Works without a GPU: CUDA C is
// text, and PTX needs NVRTC only.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "api/cli/cli.h"

namespace kiln::cli {

int CompileCommand(const std::vector<std::string>& args) {
  std::string model_path, out_dir, target, emit;
  std::map<std::string, std::vector<int64_t>> shapes;
  kiln_options* o = nullptr;
  Check(kiln_options_create(&o), "options");
  OptionsPtr options(o);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--shape") {
      auto [name, text] = SplitAssignment(a, value());
      shapes[name] = ParseShape(a, text);
    } else if (a == "--target") {
      target = value();
    } else if (a == "--emit") {
      emit = value();
    } else if (a == "--opt-level") {
      if (kiln_options_set_opt_level(o, static_cast<int>(ParseInt(a, value()))))
        throw UsageError{kiln_last_error()};
    } else if (a == "--disable-pass") {
      if (kiln_options_disable_pass(o, value().c_str())) throw UsageError{kiln_last_error()};
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln compile: unknown option '" + a + "'"};
    } else if (model_path.empty()) {
      model_path = a;
    } else if (out_dir.empty()) {
      out_dir = a;
    } else {
      throw UsageError{"kiln compile: takes one MODEL and one OUT_DIR, got '" + a + "' too"};
    }
  }
  if (model_path.empty() || out_dir.empty())
    throw UsageError{"kiln compile: needs a MODEL and an OUT_DIR"};
  if (emit.empty()) throw UsageError{"kiln compile: needs --emit cuda|ptx|llvm|asm"};

  ModelPtr model = LoadModel(model_path);
  std::vector<IoType> io = ModelIo(model.get(), true);
  for (const auto& [name, dims] : shapes) {
    bool known = false;
    for (const IoType& t : io) known = known || t.name == name;
    if (!known) throw UsageError{"--shape " + name + ": the model has no input '" + name + "'"};
  }
  // Inputs of the given shapes: only their dtypes and shapes matter (a model whose shapes
  // depend on an input's values gets zeros there).
  std::vector<TensorPtr> owned;
  std::vector<const kiln_tensor*> in;
  for (const IoType& t : io) {
    auto given = shapes.find(t.name);
    std::vector<int64_t> dims = given != shapes.end() ? given->second : t.dims;
    if (dims.size() != t.dims.size())
      throw UsageError{"--shape " + t.name + ": the input has rank " +
                       std::to_string(t.dims.size())};
    for (int64_t d : dims)
      if (d < 0)
        throw UsageError{"input '" + t.name + "' has symbolic dims: give its shape with --shape " +
                         t.name + "=..."};
    kiln_tensor* k = nullptr;
    Check(kiln_tensor_create(t.dtype, dims.size(), dims.data(), &k), "input '" + t.name + "'");
    owned.emplace_back(k);
    in.push_back(k);
  }
  kiln_engine* e = nullptr;
  Check(kiln_engine_create(o, &e), "engine");
  EnginePtr engine(e);
  char* json = nullptr;
  Check(kiln_engine_emit_kernels(engine.get(), model.get(), in.size(), nullptr, in.data(),
                                 target.empty() ? nullptr : target.c_str(), emit.c_str(),
                                 out_dir.c_str(), &json),
        "compile");
  // One path a line, from the JSON array of strings (escapes undone).
  std::string list = json, path;
  kiln_string_free(json);
  int count = 0;
  bool in_string = false;
  for (size_t i = 0; i < list.size(); ++i) {
    char c = list[i];
    if (!in_string) {
      in_string = c == '"';
    } else if (c == '\\' && i + 1 < list.size()) {
      path += list[++i];
    } else if (c == '"') {
      std::printf("%s\n", path.c_str());
      path.clear();
      in_string = false;
      ++count;
    } else {
      path += c;
    }
  }
  std::fprintf(stderr, "kiln: %d kernel file(s) written to %s\n", count, out_dir.c_str());
  return 0;
}

}  // namespace kiln::cli
