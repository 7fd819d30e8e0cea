#include <map>
#include <mutex>

#include "ir/error.h"
#include "jit/kernel.h"

namespace kiln {

const std::string& CompiledModule::object() const {
  static const std::string* const kNone = new std::string();  // never destroyed, like Builders
  return *kNone;
}

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, BuildFn> builders;
};
Registry& Builders() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: kernels may be built during teardown
    reg->builders["target.build.llvm"] = [](const std::vector<loop::PrimFunc>& f,
                                            const CodegenOptions& o) { return BuildLLVM(f, o); };
    return reg;
  }();
  return *r;
}
}  // namespace

void RegisterCodegen(const std::string& name, BuildFn fn) {
  Registry& r = Builders();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.builders.count(name))
    Throw(ErrorCode::kInvalidArgument, "code generator '", name, "' is already registered");
  r.builders[name] = std::move(fn);
}

const BuildFn& GetCodegen(const std::string& name) {
  Registry& r = Builders();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.builders.find(name);
  if (it == r.builders.end()) {
    std::string known;
    for (const auto& [k, v] : r.builders) {
      if (!known.empty()) known += ", ";
      known += k;
    }
    Throw(ErrorCode::kNotFound, "no code generator '", name, "' (registered: ", known, ")");
  }
  return it->second;
}

}  // namespace kiln
