#include "jit/nvrtc.h"

#include <dlfcn.h>

#include <cstddef>
#include <memory>

#include "ir/error.h"

namespace kiln {
namespace {

// NVRTC's C API, declared here rather than included: the toolkit's headers need not be present
// where kiln builds. The types match nvrtc.h (CUDA 12 and 13).
using nvrtcResult = int;
constexpr nvrtcResult kNvrtcSuccess = 0;
struct NvrtcProgramNode;
using nvrtcProgram = NvrtcProgramNode*;

struct Nvrtc {
  std::string unavailable;  // "" when every entry point below is set
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
};

// The newest first; the unversioned name last (it is the development symlink, present only
// with the toolkit). Never unloaded: kernels compiled from it may outlive any owner.
const Nvrtc* LoadNvrtc() {
  auto* n = new Nvrtc();
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
    dlerror();
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* why = dlerror();
    tried += StrCat(tried.empty() ? "" : "; ", why ? why : name);
  }
  if (!lib) {
    n->unavailable = StrCat("NVRTC not found (", tried, ")");
    return n;
  }
#define KILN_NVRTC(sym)                                                      \
  n->sym = reinterpret_cast<decltype(n->sym)>(dlsym(lib, #sym));             \
  if (!n->sym) {                                                             \
    n->unavailable = StrCat("the loaded NVRTC has no ", #sym, " (too old)"); \
    return n;                                                                \
  }
  KILN_NVRTC(nvrtcVersion)
  KILN_NVRTC(nvrtcGetErrorString)
  KILN_NVRTC(nvrtcCreateProgram)
  KILN_NVRTC(nvrtcDestroyProgram)
  KILN_NVRTC(nvrtcCompileProgram)
  KILN_NVRTC(nvrtcGetPTXSize)
  KILN_NVRTC(nvrtcGetPTX)
  KILN_NVRTC(nvrtcGetProgramLogSize)
  KILN_NVRTC(nvrtcGetProgramLog)
  KILN_NVRTC(nvrtcGetNumSupportedArchs)
  KILN_NVRTC(nvrtcGetSupportedArchs)
#undef KILN_NVRTC
  return n;
}

const Nvrtc& GetNvrtc() {
  static const Nvrtc* nvrtc = LoadNvrtc();  // once, thread-safe; never freed
  return *nvrtc;
}

const Nvrtc& RequireNvrtc() {
  const Nvrtc& n = GetNvrtc();
  if (!n.unavailable.empty()) Throw(ErrorCode::kUnsupported, n.unavailable);
  return n;
}

// `sm_90` -> 90; kInvalidArgument unless NVRTC lists it.
int ArchNumber(const Nvrtc& n, const std::string& arch) {
  int number = -1;
  if (arch.size() > 3 && arch.compare(0, 3, "sm_") == 0 &&
      arch.find_first_not_of("0123456789", 3) == std::string::npos && arch.size() <= 6)
    number = std::stoi(arch.substr(3));
  int count = 0;
  std::vector<int> known;
  if (n.nvrtcGetNumSupportedArchs(&count) == kNvrtcSuccess && count > 0) {
    known.resize(static_cast<size_t>(count));
    if (n.nvrtcGetSupportedArchs(known.data()) != kNvrtcSuccess) known.clear();
  }
  for (int k : known)
    if (k == number) return number;
  std::string list;
  for (int k : known) list += StrCat(list.empty() ? "" : ", ", "sm_", k);
  Throw(ErrorCode::kInvalidArgument, "CUDA architecture '", arch,
        "' is not one this NVRTC compiles for (", list, ")");
}

std::string ProgramLog(const Nvrtc& n, nvrtcProgram p) {
  size_t size = 0;
  if (n.nvrtcGetProgramLogSize(p, &size) != kNvrtcSuccess || size <= 1) return "";
  std::string log(size, '\0');
  if (n.nvrtcGetProgramLog(p, log.data()) != kNvrtcSuccess) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

}  // namespace

const std::string& NvrtcUnavailable() {
  return GetNvrtc().unavailable;
}

std::string NvrtcVersion() {
  const Nvrtc& n = GetNvrtc();
  int major = 0, minor = 0;
  if (!n.unavailable.empty() || n.nvrtcVersion(&major, &minor) != kNvrtcSuccess) return "";
  return StrCat(major, ".", minor);
}

NvrtcResult CompileCudaToPtx(const std::string& source, const std::string& name,
                             const std::string& arch,
                             const std::vector<std::string>& extra_options) {
  const Nvrtc& n = RequireNvrtc();
  const int number = ArchNumber(n, arch);
  nvrtcProgram p = nullptr;
  if (nvrtcResult r = n.nvrtcCreateProgram(&p, source.c_str(), name.c_str(), 0, nullptr, nullptr);
      r != kNvrtcSuccess)
    Throw(ErrorCode::kCompileError, "NVRTC could not create program '", name,
          "': ", n.nvrtcGetErrorString(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(
      &p, [](nvrtcProgram* q) { GetNvrtc().nvrtcDestroyProgram(q); });
  std::vector<std::string> options = {StrCat("--gpu-architecture=compute_", number), "--std=c++17",
                                      "--fmad=true"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  nvrtcResult r = n.nvrtcCompileProgram(p, static_cast<int>(argv.size()), argv.data());
  NvrtcResult out;
  out.log = ProgramLog(n, p);
  if (r != kNvrtcSuccess)
    Throw(ErrorCode::kCompileError, "NVRTC failed to compile '", name, "' for ", arch, ": ",
          n.nvrtcGetErrorString(r), out.log.empty() ? "" : "\n", out.log);
  size_t size = 0;
  if (n.nvrtcGetPTXSize(p, &size) != kNvrtcSuccess || size == 0)
    Throw(ErrorCode::kCompileError, "NVRTC gave no PTX for '", name, "'");
  out.ptx.assign(size, '\0');
  if (n.nvrtcGetPTX(p, out.ptx.data()) != kNvrtcSuccess)
    Throw(ErrorCode::kCompileError, "NVRTC gave no PTX for '", name, "'");
  out.ptx.resize(size - 1);  // the terminating NUL
  return out;
}

}  // namespace kiln
