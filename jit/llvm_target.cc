// Which machine code is generated for, and whether this machine can run it (jit/llvm_target.h,
// jit/kernel.h). Kept apart from llvm_codegen.cc so that the target questions the engine, the
// disk cache and the cross-CPU tests ask do not sit in the emitter.
#include "jit/llvm_target.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "ir/error.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

namespace kiln {
namespace {

std::once_flag g_llvm_init;

llvm::CodeGenOptLevel CodeGenLevel(int opt_level) {
  switch (opt_level) {
    case 0:
      return llvm::CodeGenOptLevel::None;
    case 1:
      return llvm::CodeGenOptLevel::Less;
    case 2:
      return llvm::CodeGenOptLevel::Default;
    default:
      return llvm::CodeGenOptLevel::Aggressive;
  }
}

std::vector<std::string> SplitFeatures(const std::string& mattr) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= mattr.size()) {
    size_t comma = mattr.find(',', start);
    if (comma == std::string::npos) comma = mattr.size();
    if (comma > start) out.push_back(mattr.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Features whose instructions LLVM emits only through their own intrinsics, which generated
// kernels never call: a CPU model that has them runs kiln's code on a host without them. (Host
// detection also leaves some of them out in virtual machines, and never reports x87.)
bool IntrinsicOnly(const std::string& f) {
  static const std::set<std::string> kFeatures = {
      // system, synchronization and security instructions
      "x87", "mwaitx", "monitorx", "pku", "rdpru", "wbnoinvd", "sgx", "pconfig", "ptwrite",
      "movdiri", "movdir64b", "waitpkg", "uintr", "serialize", "cldemote", "enqcmd", "tsxldtrk",
      "rtm", "clzero", "clflushopt", "clwb", "invpcid", "rdpid", "rdrnd", "rdseed", "shstk",
      "fsgsbase", "xsave", "xsaveopt", "xsavec", "xsaves", "fxsr", "hreset", "kl", "widekl", "lwp",
      "usermsr", "raoint",
      // prefetches (kiln emits none) and cryptography
      "prfchw", "prefetchi", "sha", "sha512", "sm3", "sm4", "aes", "vaes", "pclmul", "vpclmulqdq",
      // AMX tiles
      "amx-tile", "amx-int8", "amx-bf16", "amx-fp16", "amx-complex"};
  return kFeatures.count(f) != 0;
}

}  // namespace

namespace {

// How deep the calling thread is in kiln's LLVM work (LLVMFatalErrorsThrow).
thread_local int t_fatal_errors_throw = 0;

// LLVM's fatal error handler, for the whole process (LLVM has one). LLVM calls it in place of
// printing "LLVM ERROR" and aborting (or exiting); when it returns, LLVM aborts all the same.
// On a thread inside kiln's compile or link it throws instead, so the error reaches the caller
// as a kCompileError and the process lives on. LLVM is built without exceptions, so the LLVM
// frames the exception crosses run no destructors: what they held for that one module leaks
// (kiln's own frames release theirs). LLVM releases its handler lock before calling the handler.
// Elsewhere (another library's use of the same libLLVM) it does what LLVM would have done.
void OnFatalError(void*, const char* reason, bool) {
  if (t_fatal_errors_throw > 0) Throw(ErrorCode::kCompileError, "LLVM fatal error: ", reason);
  std::fprintf(stderr, "LLVM ERROR: %s\n", reason);
}

}  // namespace

LLVMFatalErrorsThrow::LLVMFatalErrorsThrow() {
  InitializeLLVM();
  ++t_fatal_errors_throw;
}
LLVMFatalErrorsThrow::~LLVMFatalErrorsThrow() {
  --t_fatal_errors_throw;
}

void InitializeLLVM() {
  std::call_once(g_llvm_init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::install_fatal_error_handler(&OnFatalError, nullptr);
  });
}

llvm::orc::JITTargetMachineBuilder TargetFor(const CodegenOptions& options) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    Throw(ErrorCode::kCompileError,
          "LLVM cannot describe the host: ", llvm::toString(jtmb.takeError()));
  if (!options.mcpu.empty()) {
    jtmb->setCPU(options.mcpu);
    jtmb->setFeatures(options.mattr);
  } else if (!options.mattr.empty()) {
    jtmb->addFeatures(SplitFeatures(options.mattr));
  }
  jtmb->setCodeGenOptLevel(CodeGenLevel(options.opt_level));
  return std::move(*jtmb);
}

LLVMWorkarounds WorkaroundsFor(const std::string& cpu, const CodegenOptions& options) {
  LLVMWorkarounds w;
  if (!options.llvm_workarounds) return w;
#if LLVM_VERSION_MAJOR == 19
  // Seen with 19.1.7 (Debian 12's llvm-19); not checked on 20 and later, so only 19 gets it.
  // tests/jit/llvm_workarounds_test.cc shows whether the miscompile is still there.
  w.no_slp_vectorizer = cpu == "znver4" || cpu == "znver5";
#else
  (void)cpu;
#endif
  return w;
}

std::string LLVMVersion() {
  return LLVM_VERSION_STRING;
}

std::string LLVMTargetDescription(const CodegenOptions& options) {
  llvm::orc::JITTargetMachineBuilder jtmb = TargetFor(options);
  // SubtargetFeatures keeps flags in order and a later one wins ("+avx512f" then "-avx512f"
  // after mattr); resolve that first, so that equal feature sets describe equally.
  std::map<std::string, char> features;
  for (const std::string& f : jtmb.getFeatures().getFeatures()) {
    if (f.empty()) continue;
    if (f[0] == '+' || f[0] == '-') {
      features[f.substr(1)] = f[0];
    } else {
      features[f] = '+';
    }
  }
  std::string list;
  for (const auto& [name, sign] : features) list += StrCat(list.empty() ? "" : ",", sign, name);
  std::string text = StrCat(jtmb.getTargetTriple().str(), ' ', jtmb.getCPU(), ' ', list);
  // A workaround changes the code, so it is part of what the code was built for.
  if (WorkaroundsFor(jtmb.getCPU(), options).no_slp_vectorizer) text += " [no-slp]";
  return text;
}

namespace {

// The named CPU's features (none for the host) with mattr's +feature added and -feature removed.
std::set<std::string> NamedFeatures(const CodegenOptions& options) {
  std::set<std::string> features;
  if (!options.mcpu.empty()) {
    llvm::SmallVector<llvm::StringRef, 64> cpu_features;
    llvm::X86::getFeaturesForCPU(options.mcpu, cpu_features);
    for (llvm::StringRef f : cpu_features) features.insert(f.str());
  }
  for (const std::string& f : SplitFeatures(options.mattr)) {
    if (f.size() < 2) continue;
    if (f[0] == '+') features.insert(f.substr(1));
    if (f[0] == '-') features.erase(f.substr(1));
  }
  return features;
}

// Whether each feature is on in the code for `options`, with what each implies: LLVM lists a
// named CPU's features as it adds them to its base, so x86-64-v3 names avx2 but not avx, and
// x86-64-v4 avx512bw but not avx512f. A feature mattr removes takes what needs it along ("-sse"
// removes sse2 and every AVX).
class EffectiveFeatures {
 public:
  explicit EffectiveFeatures(const CodegenOptions& options) : named_(NamedFeatures(options)) {
    if (options.mcpu.empty()) {
      // The host's features, then mattr's changes on top (NamedFeatures applied them to none).
      for (const auto& entry : llvm::sys::getHostCPUFeatures())
        if (entry.second) named_.insert(entry.first().str());
      for (const std::string& f : SplitFeatures(options.mattr))
        if (f.size() >= 2 && f[0] == '-') named_.erase(f.substr(1));
    }
    for (const std::string& f : named_) llvm::X86::updateImpliedFeatures(f, true, on_);
    for (const std::string& f : SplitFeatures(options.mattr))
      if (f.size() >= 2 && f[0] == '-') llvm::X86::updateImpliedFeatures(f.substr(1), false, on_);
  }
  bool has(const char* f) const {
    auto it = on_.find(f);
    return it != on_.end() ? it->second : named_.count(f) > 0;
  }

 private:
  std::set<std::string> named_;
  llvm::StringMap<bool> on_;
};

}  // namespace

int VectorRegisterBits(const CodegenOptions& options) {
  EffectiveFeatures features(options);
  if (features.has("avx512f")) return 512;
  if (features.has("avx")) return 256;
  return 128;
}

std::string InvalidLLVMTarget(const CodegenOptions& options) {
  InitializeLLVM();
  const std::string triple = llvm::sys::getProcessTriple();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) return StrCat("LLVM ", LLVMVersion(), " has no target for ", triple, ": ", error);
  // Only to ask what LLVM knows: the CPU and feature tables of the host's architecture.
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  if (!info) return StrCat("LLVM ", LLVMVersion(), " cannot describe ", triple);
  if (!options.mcpu.empty() && !info->isCPUStringValid(options.mcpu))
    return StrCat("mcpu '", options.mcpu, "' is not a CPU LLVM ", LLVMVersion(),
                  " knows (`llc -mcpu=help` lists them)");
  std::set<std::string> known;
  for (const llvm::SubtargetFeatureKV& kv : info->getAllProcessorFeatures()) known.insert(kv.Key);
  for (const std::string& f : SplitFeatures(options.mattr)) {
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-'))
      return StrCat("mattr '", f, "' is not a feature like +avx2 or -fma");
    const std::string name = f.substr(1);
    if (!known.count(name))
      return StrCat("mattr '", f, "': '", name, "' is not a feature LLVM ", LLVMVersion(),
                    " knows (`llc -mattr=help` lists them)");
    // Modes and float ABIs are not instruction sets: the kernels' calling convention, which the
    // engine calls them by, depends on them (LLVM aborts on some, and soft floats need a
    // runtime kiln does not link).
    if (name == "16bit-mode" || name == "32bit-mode" || name == "64bit-mode" ||
        name == "soft-float")
      return StrCat("mattr '", f, "': '", name,
                    "' changes the calling convention, not the instruction set; kiln's kernels "
                    "are x86-64 functions with hardware floats");
  }
  if (llvm::Triple(triple).getArch() != llvm::Triple::x86_64) return "";
  if (!options.mcpu.empty() &&
      llvm::X86::parseArchX86(options.mcpu, /*Only64Bit=*/true) == llvm::X86::CK_None)
    return StrCat("mcpu '", options.mcpu,
                  "' is not an x86-64 CPU model (x86-64 names the baseline every one has)");
  // x86-64 passes and returns floats in SSE registers, and every x86-64 CPU (a named one is
  // one, now) has SSE2: only mattr can take it away, or 64-bit mode, in the order it lists them.
  // (updateImpliedFeatures sets what a feature implies, and what implies a feature it clears,
  // but for one it turns on not the feature itself.)
  llvm::StringMap<bool> on;
  auto set = [&on](const std::string& f, bool enable) {
    llvm::X86::updateImpliedFeatures(f, enable, on);
    on[f] = enable;
  };
  set("sse2", true);
  for (const std::string& f : SplitFeatures(options.mattr)) {
    if (f == "-64bit") return "mattr '-64bit': kiln generates x86-64 code";
    set(f.substr(1), f[0] == '+');
  }
  if (!on.lookup("sse2"))
    return StrCat("mattr '", options.mattr,
                  "' turns off sse2, which every x86-64 CPU has and x86-64 code needs");
  return "";
}

std::string HostCannotRun(const CodegenOptions& options) {
  // What the code may use: the named CPU's instruction set (the host's own when none is named),
  // with mattr's +feature added and -feature removed.
  if (!options.mcpu.empty() &&
      llvm::X86::parseArchX86(options.mcpu, /*Only64Bit=*/true) == llvm::X86::CK_None)
    return StrCat("'", options.mcpu, "' is not an x86-64 CPU model LLVM ", LLVMVersion(), " knows");
  std::set<std::string> needed = NamedFeatures(options);
  const llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::string missing;
  for (const std::string& f : needed) {
    auto it = host.find(f);
    if ((it == host.end() || !it->second) && !IntrinsicOnly(f))
      missing += StrCat(missing.empty() ? "" : " ", f);
  }
  if (missing.empty()) return "";
  return StrCat("the host (", llvm::sys::getHostCPUName().str(), ") lacks ", missing);
}

}  // namespace kiln
