// The code generator registry (kernel.h): every target of jit/targets.def, registered on first
// use, and what all compiled modules share.
#include <algorithm>
#include <map>
#include <mutex>

#include "ir/error.h"
#include "jit/kernel.h"

namespace kiln {

#define KILN_TARGET(kind, factory) CodeGenerator factory();
#include "jit/targets.def"
#undef KILN_TARGET

const std::string& CompiledModule::object() const {
  static const std::string* const kNone = new std::string();  // never destroyed, like Builders
  return *kNone;
}

size_t CompiledModule::resident_bytes() const {
  return source().capacity() + object().capacity();
}

KernelFn CompiledModule::Lookup(const std::string& name) const {
  const KernelEntry& e = Entry(name);
  if (e.on_device())
    Throw(ErrorCode::kInvalidArgument, "kernel '", name,
          "' runs on a device: it has no CPU function to call");
  return e.cpu;
}

const KernelEntry& EntryNamed(const std::map<std::string, KernelEntry>& entries,
                              const std::string& name) {
  auto it = entries.find(name);
  if (it == entries.end()) {
    std::string names;
    for (const auto& [k, e] : entries) names += (names.empty() ? "" : ", ") + k;
    Throw(ErrorCode::kNotFound, "no kernel '", name, "' in this module (it has: ", names, ")");
  }
  return it->second;
}

namespace {

constexpr char kPrefix[] = "target.build.";

struct Registry {
  std::mutex mu;
  std::map<std::string, CodeGenerator> builders;  // by registry name, target.build.<kind>
};
Registry& Builders() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: kernels may be built during teardown
#define KILN_TARGET(kind, factory) reg->builders[kPrefix + std::string(#kind)] = factory();
#include "jit/targets.def"
#undef KILN_TARGET
    return reg;
  }();
  return *r;
}

}  // namespace

void RegisterCodegen(CodeGenerator generator) {
  Registry& r = Builders();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string name = kPrefix + generator.kind;
  if (r.builders.count(name))
    Throw(ErrorCode::kInvalidArgument, "code generator '", name, "' is already registered");
  r.builders[name] = std::move(generator);
}

const CodeGenerator& GetCodegen(const std::string& kind) {
  std::string name = kind.rfind(kPrefix, 0) == 0 ? kind : kPrefix + kind;
  Registry& r = Builders();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.builders.find(name);
  if (it == r.builders.end()) {
    std::string known;
    for (const auto& [k, v] : r.builders) known += (known.empty() ? "" : ", ") + k;
    Throw(ErrorCode::kNotFound, "no code generator '", name, "' (registered: ", known, ")");
  }
  return it->second;
}

DeviceCallShape ShapeDeviceCall(const KernelEntry& entry, const int64_t* scalars) {
  DeviceCallShape shape;
  unsigned widest = 1;
  for (const DeviceLaunch& l : entry.launches) {
    int64_t threads = loop::EvalIndex(l.threads, entry.scalar_params, scalars);
    int64_t blocks = (threads + l.block_threads - 1) / l.block_threads;
    shape.grids.push_back(static_cast<unsigned>(
        std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(entry.max_blocks))));
    widest = std::max(widest, shape.grids.back() * l.block_threads);
  }
  for (const DeviceScratch& s : entry.scratch) {
    int64_t n = std::max<int64_t>(loop::EvalIndex(s.numel, entry.scalar_params, scalars), 0);
    shape.scratch_bytes.push_back(static_cast<size_t>(n) * (s.per_thread ? widest : 1) *
                                  DTypeSize(s.dtype));
  }
  return shape;
}

}  // namespace kiln
