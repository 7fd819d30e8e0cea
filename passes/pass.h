// Passes: module-to-module transforms, and the registry that names them (SPEC.md §2).
//
// A Pass is immutable once made and may be run by several threads at once (each with its
// own PassContext). Calling a pass runs the instrument protocol of the current context around
// it; a pass that throws leaves the caller's module as it was (modules are immutable) and the
// error names the pass.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/op.h"
#include "passes/pass_context.h"

namespace kiln {

class Pass {
 public:
  explicit Pass(PassInfo info, Attrs options = {})
      : info_(std::move(info)), options_(std::move(options)) {}
  virtual ~Pass() = default;
  const PassInfo& info() const { return info_; }
  const Attrs& options() const { return options_; }

  // Runs the pass under `ctx` (default: PassContext::Current()), with instrumentation.
  // Does not check whether the pass is enabled: that is Sequential's job.
  IRModule operator()(const IRModule& m) const;
  IRModule operator()(const IRModule& m, const PassContext& ctx) const;

  // `Name` or `Name(key=value, ...)` with the options that differ from their defaults; what a
  // pipeline string holds.
  virtual std::string ToString() const;

 protected:
  virtual IRModule Run(const IRModule& m, const PassContext& ctx) const = 0;

 private:
  PassInfo info_;
  Attrs options_;
};
using PassPtr = std::shared_ptr<const Pass>;

using ModulePassFn = std::function<IRModule(const IRModule&, const PassContext&)>;
using FunctionPassFn =
    std::function<Function(const Function&, const IRModule&, const PassContext&)>;

// Sees the whole module; may add and remove functions.
PassPtr CreateModulePass(PassInfo info, ModulePassFn fn, Attrs options = {});
// Rewrites one function at a time; functions with the `skip_optimization` attribute are left
// alone, and functions cannot be added or removed. Functions it changed get their types
// re-inferred.
PassPtr CreateFunctionPass(PassInfo info, FunctionPassFn fn, Attrs options = {});
// Runs `passes` in order, skipping the ones the context does not enable; before each enabled
// pass it first runs that pass's `required` passes (by registry name, recursively). A cycle in
// the requirements or an unknown name is an error naming it.
PassPtr Sequential(std::vector<PassPtr> passes, std::string name = "Sequential");
// The passes of a Sequential (empty for other passes).
const std::vector<PassPtr>& SequentialPasses(const PassPtr& p);

// A pass known by name, with typed options (reusing the attribute schema of ops).
struct PassRegistration {
  std::string name;
  int opt_level = 0;
  std::vector<std::string> required;
  std::vector<AttrSpec> options;
  std::string doc;
  // Makes the pass from normalized options (defaults filled in).
  std::function<PassPtr(const Attrs& options)> create;
};

class PassRegistry {
 public:
  // The process-wide registry, with every built-in pass registered. Thread-safe.
  static PassRegistry& Global();
  // A second registration of one name is kInvalidArgument.
  void Register(PassRegistration reg);
  const PassRegistration* Find(const std::string& name) const;
  // Makes a pass; an unknown name is kNotFound listing the known names, a bad option is
  // kInvalidArgument naming it.
  PassPtr Create(const std::string& name, const Attrs& options = {}) const;
  std::vector<std::string> Names() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const PassRegistration>> passes_;
};

// `"InferType,FoldConstant,FuseOps(max_group_size=8)"` -> a Sequential of registered passes.
// Spaces are allowed around names and commas; errors give the position and name.
PassPtr ParsePipeline(const std::string& text);
// The inverse: a Sequential prints as its passes joined by ','; parsing the result gives the
// same pipeline.
std::string PipelineToString(const PassPtr& pass);

}  // namespace kiln
