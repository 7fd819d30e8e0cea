// Loop IR -> machine code, the JIT half (kernel.h: BuildLLVM, LoadLLVMObject): the module
// llvm_codegen.cc emits is optimized (LLVM's O0-O3 pipeline for the target, less what
// LLVMWorkarounds turns off), compiled to an object file, which is kept for the disk cache, and
// linked by ORC LLJIT into a JITDylib of the module's own (SharedJIT); LoadLLVMObject links such
// an object from the cache the same way. The JIT defines the runtime helpers (jit/runtime.h)
// itself.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/error.h"
#include "jit/kernel.h"
#include "jit/llvm_emit.h"
#include "jit/llvm_target.h"
#include "jit/runtime.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CodeGen.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <unistd.h>

namespace kiln {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string TakeMessage(llvm::Error err) {
  return llvm::toString(std::move(err));
}

// The JITs that modules link into: one per target triple, made at the first link and kept for
// the life of the process. Each module links into a JITDylib of its own there, which its
// destructor removes, giving back its code and data pages and ORC's records of it. A JIT per
// module instead cost ~130 KB resident each (LLVM 19; tests/jit/disk_cache_test.cc measures).
// Leaked on purpose: modules held by statics may be destroyed after any static of this file.
// Thread-safe: ORC's ExecutionSession serializes what it must, and links run concurrently.
// A failed link is an llvm::Error that leaves only the failing module's JITDylib to remove; the
// objects linked are kiln's own or disk cache entries checked whole, which LLVM does not abort on
// (LLVMObject.BadObjectsAreCompileErrors feeds it truncated ones).
class SharedJIT {
 public:
  // The JIT for `jtmb`'s triple. Only the triple matters: an object file is linked, not
  // compiled, so the CPU and features of the first caller's target are not the JIT's business.
  static SharedJIT& For(const llvm::orc::JITTargetMachineBuilder& jtmb);

  // A fresh JITDylib that links against the runtime helpers and the process's symbols (libm).
  llvm::orc::JITDylib& NewDylib();
  void Remove(llvm::orc::JITDylib& dylib);
  llvm::orc::LLJIT& lljit() { return *jit_; }

 private:
  explicit SharedJIT(std::unique_ptr<llvm::orc::LLJIT> jit) : jit_(std::move(jit)) {}
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // its main JITDylib holds the runtime helpers
  std::atomic<uint64_t> next_id_{0};       // names each JITDylib (ORC wants unique names)
};

class LLVMCompiledModule final : public CompiledModule {
 public:
  explicit LLVMCompiledModule(SharedJIT& jit) : jit_(jit), dylib_(jit.NewDylib()) {}
  ~LLVMCompiledModule() override { jit_.Remove(dylib_); }

  const KernelEntry& Entry(const std::string& name) const override {
    return EntryNamed(kernels_, name);
  }
  const CompileTimings& timings() const override { return timings_; }
  const std::string& source() const override { return source_; }
  const std::string& object() const override { return object_; }
  // A module of a 3.6 KB object costs ~44 KB resident in all: its code and data pages, ORC's
  // records of its JITDylib, and the object twice (kept here, and LLVM's copy) (LLVM 19,
  // Zen 5; measured by LLVMObject.LoadedModulesGiveTheirMemoryBack).
  size_t resident_bytes() const override {
    constexpr size_t kJitBytes = 32 << 10;
    return CompiledModule::resident_bytes() + kJitBytes + 2 * object_.size();
  }

  SharedJIT& jit_;
  llvm::orc::JITDylib& dylib_;  // owns the machine code the kernels point into
  std::map<std::string, KernelEntry> kernels_;
  CompileTimings timings_;
  std::string source_;
  std::string object_;
};

void Optimize(llvm::Module& module, llvm::TargetMachine* tm, int opt_level, bool slp_vectorize,
              const LLVMWorkarounds& workarounds) {
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2 && slp_vectorize && !workarounds.no_slp_vectorizer;
  tuning.LoopUnrolling = opt_level >= 1;
  tuning.LoopInterleaving = opt_level >= 2;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // With the TargetMachine, the cost models (vector width, FMA) are the CPU's.
  llvm::PassBuilder pb(tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  switch (opt_level) {
    case 0:
      mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
      break;
    case 1:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1);
      break;
    case 2:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
      break;
    default:
      mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
      break;
  }
  mpm.run(module, mam);
}

// An LLJIT for `jtmb`'s target with the runtime helpers defined in its main JITDylib: they are
// defined here rather than found in the process, which may not export them (a static library
// inside a shared one). Every module's JITDylib links against exactly this.
std::unique_ptr<llvm::orc::LLJIT> CreateJIT(llvm::orc::JITTargetMachineBuilder jtmb) {
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) Throw(ErrorCode::kCompileError, "LLVM JIT: ", TakeMessage(jit.takeError()));
  llvm::orc::LLJIT& lljit = **jit;
  llvm::orc::SymbolMap runtime;
  auto define = [&](const char* name, auto* function) {
    runtime[lljit.mangleAndIntern(name)] = llvm::orc::ExecutorSymbolDef(
        llvm::orc::ExecutorAddr::fromPtr(function),
        llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  };
  define("kiln_parallel_for", &kiln_parallel_for);
  define("kiln_scratch_alloc", &kiln_scratch_alloc);
  define("kiln_scratch_free", &kiln_scratch_free);
  if (llvm::Error err =
          lljit.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(runtime))))
    Throw(ErrorCode::kCompileError, "LLVM JIT: ", TakeMessage(std::move(err)));
  return std::move(*jit);
}

SharedJIT& SharedJIT::For(const llvm::orc::JITTargetMachineBuilder& jtmb) {
  static std::mutex mu;
  static auto* jits = new std::map<std::string, SharedJIT*>();  // leaked: see SharedJIT
  std::lock_guard<std::mutex> lock(mu);
  SharedJIT*& jit = (*jits)[jtmb.getTargetTriple().str()];
  if (!jit) jit = new SharedJIT(CreateJIT(jtmb));
  return *jit;
}

llvm::orc::JITDylib& SharedJIT::NewDylib() {
  auto dylib = jit_->createJITDylib("kiln.module." + std::to_string(next_id_++));
  if (!dylib) Throw(ErrorCode::kCompileError, "LLVM JIT: ", TakeMessage(dylib.takeError()));
  // After its own definitions, a module finds what createJITDylib linked by default (the
  // process's symbols: libm), then the runtime helpers, which the process may not export.
  dylib->addToLinkOrder(jit_->getMainJITDylib());
  return *dylib;
}

void SharedJIT::Remove(llvm::orc::JITDylib& dylib) {
  // Nothing can be done about a failure here (a destructor): the JITDylib then stays, leaked.
  llvm::consumeError(jit_->getExecutionSession().removeJITDylib(dylib));
}

// One function symbol of an ELF relocatable object: its value is its offset in its section.
struct FunctionSymbol {
  std::string name;
  uint64_t value = 0, size = 0;
  uint64_t section_address = 0, section_size = 0;
};

// The function symbols of `object`; empty where it cannot be read or is not ELF (whose symbols
// carry sizes). A symbol LLVM cannot read is left out.
std::vector<FunctionSymbol> FunctionSymbols(const std::string& object) {
  std::vector<FunctionSymbol> out;
  auto buffer = llvm::MemoryBuffer::getMemBuffer(object, "kiln-object-symbols", false);
  auto file = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!file) {
    llvm::consumeError(file.takeError());
    return out;
  }
  if (!llvm::isa<llvm::object::ELFObjectFileBase>(file->get())) return out;
  for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
    auto type = sym.getType();
    auto name = sym.getName();
    auto value = sym.getValue();
    auto section = sym.getSection();
    if (!type || !name || !value || !section) {
      if (!type) llvm::consumeError(type.takeError());
      if (!name) llvm::consumeError(name.takeError());
      if (!value) llvm::consumeError(value.takeError());
      if (!section) llvm::consumeError(section.takeError());
      continue;
    }
    if (*type != llvm::object::SymbolRef::ST_Function) continue;
    FunctionSymbol f;
    f.name = name->str();
    f.value = *value;
    f.size = llvm::object::ELFSymbolRef(sym).getSize();
    if (*section != (*file)->section_end()) {
      f.section_address = (*section)->getAddress();
      f.section_size = (*section)->getSize();
    }
    out.push_back(std::move(f));
  }
  return out;
}

// Each kernel's text section as it lies in memory (KernelEntry::text), from the object file and
// the address the JIT gave the kernel: the section starts the kernel's offset in it before it.
void SetTextSpans(const std::string& object, std::map<std::string, KernelEntry>* kernels) {
  for (const FunctionSymbol& f : FunctionSymbols(object)) {
    auto it = kernels->find(f.name);
    if (it == kernels->end() && !f.name.empty()) it = kernels->find(f.name.substr(1));  // a prefix
    if (it == kernels->end() || !it->second.cpu || !f.section_size) continue;
    const auto* fn = reinterpret_cast<const char*>(it->second.cpu);
    it->second.text = fn - (f.value - f.section_address);
    it->second.text_bytes = f.section_size;
  }
}

// For `perf record` on a process that runs JIT'd kernels: with KILN_PERF_MAP set (to anything
// but "0"), every loaded module appends its functions (kernels and their f.body / f.parallel.K
// helpers) to /tmp/perf-<pid>.map, the file perf reads to name code that has no ELF image
// (`perf report` then shows, say, fused_conv.parallel.2). All of one object's functions sit in
// one .text section, so each address is the looked-up kernel's address moved by the difference
// of symbol values. Names get a `#N` suffix, N counting loaded modules in this process, since
// many modules define a fused_conv (with one thread, N follows the order groups compile in).
// Debugging aid only: nothing reads the file back.
void AppendPerfMap(const std::string& object, const std::string& kernel, uint64_t kernel_addr) {
  const char* env = std::getenv("KILN_PERF_MAP");
  if (!env || std::string(env) == "0") return;
  const std::vector<FunctionSymbol> fns = FunctionSymbols(object);
  uint64_t kernel_value = 0;
  bool found = false;
  for (const FunctionSymbol& f : fns)
    if (f.name == kernel) {
      kernel_value = f.value;
      found = true;
    }
  if (!found) return;
  static std::mutex mu;  // modules compile concurrently; lines must not interleave
  static int modules = 0;
  std::lock_guard<std::mutex> lock(mu);
  const int n = modules++;
  std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  FILE* out = std::fopen(path.c_str(), "a");
  if (!out) return;
  for (const FunctionSymbol& f : fns)
    std::fprintf(out, "%llx %llx %s#%d\n",
                 static_cast<unsigned long long>(kernel_addr - kernel_value + f.value),
                 static_cast<unsigned long long>(f.size), f.name.c_str(), n);
  std::fclose(out);
}

}  // namespace

// LLVM's diagnostics while a module is optimized and compiled. Warnings and remarks are dropped
// rather than printed on stderr: they are not the user's to act on (the common one, a loop that
// VectorizeLoops asked LLVM to vectorize and LLVM could not, stays a correct scalar loop).
// Errors are collected, and fail the compile. Shared with the context, which ORC keeps.
class CollectErrors : public llvm::DiagnosticHandler {
 public:
  explicit CollectErrors(std::shared_ptr<std::string> errors) : errors_(std::move(errors)) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& di) override {
    if (di.getSeverity() != llvm::DS_Error) return true;
    llvm::raw_string_ostream os(*errors_);
    if (!errors_->empty()) os << "; ";
    llvm::DiagnosticPrinterRawOStream printer(os);
    di.print(printer);
    return true;
  }

 private:
  std::shared_ptr<std::string> errors_;
};

namespace {

// The PrimFuncs as one optimized LLVM module for the target `options` describe, with what
// compiling it further needs.
struct OptimizedModule {
  llvm::orc::JITTargetMachineBuilder jtmb;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::shared_ptr<std::string> errors;  // LLVM's diagnostics of kind error, collected
  double lower_ms = 0, opt_ms = 0;
};

OptimizedModule LowerAndOptimize(const std::vector<loop::PrimFunc>& funcs,
                                 const CodegenOptions& options) {
  InitializeLLVM();
  auto t0 = std::chrono::steady_clock::now();

  // ---- lower: loop IR -> LLVM IR, verified ----
  OptimizedModule m{TargetFor(options), nullptr, nullptr, nullptr, nullptr};
  auto tm = m.jtmb.createTargetMachine();
  if (!tm) Throw(ErrorCode::kCompileError, "LLVM target machine: ", TakeMessage(tm.takeError()));
  m.tm = std::move(*tm);
  m.context = std::make_unique<llvm::LLVMContext>();
  m.errors = std::make_shared<std::string>();
  m.context->setDiagnosticHandler(std::make_unique<CollectErrors>(m.errors));
  m.module = std::make_unique<llvm::Module>("kiln", *m.context);
  m.module->setDataLayout(m.tm->createDataLayout());
  m.module->setTargetTriple(m.tm->getTargetTriple().str());

  EmitKernels(*m.module, funcs, options);
  // LLVM's cost model for Intel's AVX-512 cores vectorizes the loops it vectorizes itself (the
  // reductions kiln leaves to it: row sums and maxima) 256 bits wide, where kiln's own vectors
  // are 512 already, so nothing is gained by holding back. A NaN-propagating max costs about
  // six instructions per vector: 16 lanes each halve it. Softmax over [1, 8, 256, 256], 1
  // thread, kernel minima: 384 -> 305 us; the encoder layer at 1 x 128: its softmax 59 -> 48
  // us, its layer norms 13.5 -> 12.2 (AVX-512 Xeon). Models without such reductions unchanged.
  if (m.tm->getTargetFeatureString().contains("+avx512f"))
    for (llvm::Function& f : *m.module)
      if (!f.isDeclaration()) f.addFnAttr("prefer-vector-width", "512");
  m.lower_ms = MsSince(t0);

  // ---- opt ----
  auto t1 = std::chrono::steady_clock::now();
  Optimize(*m.module, m.tm.get(), options.opt_level, options.slp_vectorize,
           WorkaroundsFor(m.tm->getTargetCPU().str(), options));
  m.opt_ms = MsSince(t1);
  return m;
}

}  // namespace

namespace {

// The machine code (an object file, or assembly text) for the optimized module. Code generation
// runs here, outside ORC, so that an LLVM error in it (a diagnostic, or a fatal error that
// LLVMFatalErrorsThrow turns into an exception) leaves no JIT half-way through materializing.
std::string Codegen(OptimizedModule& m, llvm::CodeGenFileType type) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager codegen;
  if (m.tm->addPassesToEmitFile(codegen, os, nullptr, type))
    Throw(ErrorCode::kCompileError, "LLVM: the target machine cannot emit ",
          type == llvm::CodeGenFileType::AssemblyFile ? "assembly" : "object files");
  codegen.run(*m.module);
  if (!m.errors->empty()) Throw(ErrorCode::kCompileError, "LLVM: ", *m.errors);
  return std::string(out.str());
}

// `object` linked into a fresh JIT for `options`' target: every global function it defines,
// looked up (so linked) now. Errors name `what` ("cached kernels", "LLVM JIT").
std::unique_ptr<LLVMCompiledModule> LinkObject(const std::string& object,
                                               const CodegenOptions& options, const char* what) {
  llvm::orc::JITTargetMachineBuilder jtmb = TargetFor(options);
  // A copy that LLVM owns (and aligns, as the object readers want): the JIT keeps it.
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBufferCopy(object, "kiln-kernels");

  // Read the symbol table before the JIT sees the bytes, so that what is not an object file for
  // this machine fails here with LLVM's reason, and so we know which kernels it defines: its
  // global function definitions (the f.body and f.parallel.K helpers are internal).
  std::vector<std::string> names;
  {
    auto file = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
    if (!file)
      Throw(ErrorCode::kCompileError, what,
            ": not an object file: ", TakeMessage(file.takeError()));
    llvm::Triple triple = (*file)->makeTriple();
    if (triple.getArch() != jtmb.getTargetTriple().getArch())
      Throw(ErrorCode::kCompileError, what, ": object file for ", triple.getArchName().str(),
            ", not ", jtmb.getTargetTriple().getArchName().str());
    for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
      auto flags = sym.getFlags();
      if (!flags) Throw(ErrorCode::kCompileError, what, ": ", TakeMessage(flags.takeError()));
      if (!(*flags & llvm::object::SymbolRef::SF_Global) ||
          (*flags & llvm::object::SymbolRef::SF_Undefined))
        continue;
      auto type = sym.getType();
      if (!type) Throw(ErrorCode::kCompileError, what, ": ", TakeMessage(type.takeError()));
      if (*type != llvm::object::SymbolRef::ST_Function) continue;
      auto name = sym.getName();
      if (!name) Throw(ErrorCode::kCompileError, what, ": ", TakeMessage(name.takeError()));
      names.push_back(name->str());
    }
  }
  if (names.empty()) Throw(ErrorCode::kCompileError, what, ": the object file defines no function");

  // From here on, a failure destroys `result`, which removes what was linked so far.
  auto result = std::make_unique<LLVMCompiledModule>(SharedJIT::For(jtmb));
  result->object_ = object;
  llvm::orc::LLJIT& lljit = result->jit_.lljit();
  if (llvm::Error err = lljit.addObjectFile(result->dylib_, std::move(buffer)))
    Throw(ErrorCode::kCompileError, what, ": ", TakeMessage(std::move(err)));
  // Linking happens here, at the first lookup: a relocation or symbol that cannot be resolved is
  // an error now, not when a kernel is called.
  const char prefix = lljit.getDataLayout().getGlobalPrefix();
  uint64_t first_addr = 0;  // of names.front(), for AppendPerfMap
  for (const std::string& linker_name : names) {
    auto addr = lljit.lookupLinkerMangled(result->dylib_, linker_name);
    if (!addr)
      Throw(ErrorCode::kCompileError, what, ": @", linker_name, ": ",
            TakeMessage(addr.takeError()));
    if (!first_addr) first_addr = addr->getValue();
    std::string name = linker_name;
    if (prefix != '\0' && !name.empty() && name[0] == prefix) name.erase(0, 1);
    KernelEntry& e = result->kernels_[name];
    e.name = name;
    e.cpu = addr->toPtr<KernelFn>();
  }
  SetTextSpans(result->object_, &result->kernels_);
  AppendPerfMap(result->object_, names.front(), first_addr);
  return result;
}

// The argument layouts, which an object file does not record: the PrimFuncs'. Every PrimFunc
// must be defined by the module.
void SetLayouts(LLVMCompiledModule& module, const std::vector<loop::PrimFunc>& funcs,
                const char* what) {
  for (const loop::PrimFunc& f : funcs) {
    auto it = module.kernels_.find(f->name);
    if (it == module.kernels_.end())
      Throw(ErrorCode::kCompileError, what, ": the object has no @", f->name);
    it->second.num_buffers = static_cast<uint32_t>(f->buffer_params.size());
    it->second.scalar_params = f->scalar_params;
  }
}

}  // namespace

std::string LLVMAssembly(const std::vector<loop::PrimFunc>& funcs, const CodegenOptions& options) {
  LLVMFatalErrorsThrow guard;
  OptimizedModule m = LowerAndOptimize(funcs, options);
  return Codegen(m, llvm::CodeGenFileType::AssemblyFile);
}

std::unique_ptr<CompiledModule> BuildLLVM(const std::vector<loop::PrimFunc>& funcs,
                                          const CodegenOptions& options) {
  LLVMFatalErrorsThrow guard;
  OptimizedModule m = LowerAndOptimize(funcs, options);
  std::string source;
  {
    llvm::raw_string_ostream os(source);
    m.module->print(os, nullptr);
  }
  auto t2 = std::chrono::steady_clock::now();
  std::string object = Codegen(m, llvm::CodeGenFileType::ObjectFile);
  std::unique_ptr<LLVMCompiledModule> result = LinkObject(object, options, "LLVM JIT");
  SetLayouts(*result, funcs, "LLVM JIT");
  result->source_ = std::move(source);
  result->timings_.lower_ms = m.lower_ms;
  result->timings_.opt_ms = m.opt_ms;
  result->timings_.codegen_ms = MsSince(t2);
  return result;
}

// ---- Object files: the disk cache's way back in ----

std::unique_ptr<CompiledModule> LoadLLVMObject(const std::string& object,
                                               const CodegenOptions& options) {
  InitializeLLVM();
  LLVMFatalErrorsThrow guard;
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<LLVMCompiledModule> result = LinkObject(object, options, "cached kernels");
  result->timings_.codegen_ms = MsSince(t0);
  return result;
}

// ---- The target's registration (jit/targets.def) ----

CodeGenerator LLVMCodeGenerator() {
  CodeGenerator g;
  g.kind = "llvm";
  g.loop_pipeline = "cpu";
  g.options = [](const Target& t) {
    CodegenOptions o;
    o.kind = "llvm";
    o.mcpu = t.GetString("mcpu");
    for (const std::string& feature : t.GetStrings("mattr"))
      o.mattr += (o.mattr.empty() ? "" : ",") + feature;
    if (std::string why = InvalidLLVMTarget(o); !why.empty())
      Throw(ErrorCode::kInvalidArgument, "target '", t.str(), "': ", why);
    return o;
  };
  g.build = [](const std::vector<loop::PrimFunc>& f, const CodegenOptions& o) {
    return BuildLLVM(f, o);
  };
  g.load = [](const std::string& object, const std::vector<loop::PrimFunc>& funcs,
              const CodegenOptions& o) -> std::unique_ptr<CompiledModule> {
    auto m = LoadLLVMObject(object, o);
    SetLayouts(static_cast<LLVMCompiledModule&>(*m), funcs, "cached kernels");
    return m;
  };
  g.identity = [](const CodegenOptions& o) {
    return StrCat("llvm=", LLVMVersion(), "\nmachine=", LLVMTargetDescription(o));
  };
  g.formats = {{"llvm", ".ll"}, {"asm", ".s"}};
  g.emit = [](const std::vector<loop::PrimFunc>& f, const CodegenOptions& o,
              const std::string& format) {
    if (format != "llvm" && format != "asm")
      Throw(ErrorCode::kInvalidArgument, "the llvm code generator emits llvm or asm, not '", format,
            "'");
    return format == "asm" ? LLVMAssembly(f, o) : BuildLLVM(f, o)->source();
  };
  return g;
}

}  // namespace kiln
