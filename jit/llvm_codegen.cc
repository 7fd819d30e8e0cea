// Loop IR -> LLVM IR (SPEC.md §4-5): EmitKernels (jit/llvm_emit.h). llvm_jit.cc optimizes the
// module and compiles it with ORC LLJIT; llvm_target.cc says which CPU for. Only jit/ includes
// LLVM headers: each file that does costs ~16 s to compile.
//
// FunctionEmitter (jit/llvm_function_emitter.h) emits one PrimFunc: this file holds its frame
// (f.body, the KernelFn wrapper, types, scopes, inner and library functions),
// llvm_emit_expr.cc its expressions (the meaning of values, vectors and arithmetic is described
// there) and llvm_emit_stmt.cc its statements (loops and blocks).
//
// Every PrimFunc `f` becomes three kinds of LLVM functions:
//
//   void f(ptr %buffers, ptr %scalars)          ; the KernelFn: unpacks the arguments
//   internal void f.body(ptr noalias %a, ..., i64 %n, ...)   ; alwaysinline; the loop nest
//   internal void f.parallel.K(i64 %begin, i64 %end, ptr %closure)  ; per parallel loop
//
// The noalias parameters of f.body are how the optimizer learns that buffers do not overlap
// (kernel.h states that contract); once f.body is inlined into f, the noalias scopes survive.
//
// Reduce is rejected: LowerReductions must run first.
#include <string>
#include <vector>

#include "ir/error.h"
#include "jit/kernel.h"
#include "jit/llvm_emit.h"
#include "jit/llvm_function_emitter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace jit_internal {

// ---- The function frame ----

void FunctionEmitter::Emit() {
  // f.body: noalias buffer pointers and scalars as typed values.
  std::vector<llvm::Type*> params;
  for (size_t i = 0; i < func_.buffer_params.size(); ++i) params.push_back(b_.getPtrTy());
  for (const loop::Var& v : func_.scalar_params) {
    if (!IsInteger(v->dtype) && v->dtype != DType::kBool)
      Fail("scalar parameter '", v->name, "' is ", DTypeName(v->dtype),
           "; scalars are passed as int64 and must be integers");
    params.push_back(ScalarType(v->dtype));
  }
  llvm::Function* body = MakeInnerFunction(func_.name + ".body", params);

  // The KernelFn wrapper: unpack buffers[i] and scalars[j], call f.body.
  {
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", kernel_));
    llvm::Value* buffers = kernel_->getArg(0);
    llvm::Value* scalars = kernel_->getArg(1);
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < func_.buffer_params.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), buffers, i);
      args.push_back(b_.CreateAlignedLoad(b_.getPtrTy(), slot, llvm::Align(8),
                                          func_.buffer_params[i]->name + ".data"));
    }
    for (size_t j = 0; j < func_.scalar_params.size(); ++j) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), scalars, j);
      llvm::Value* v =
          b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8), func_.scalar_params[j]->name);
      DType t = func_.scalar_params[j]->dtype;
      args.push_back(t == DType::kBool ? b_.CreateICmpNE(v, b_.getInt64(0))
                                       : b_.CreateIntCast(v, ScalarType(t), true));
    }
    b_.CreateCall(body, args);
    b_.CreateRetVoid();
  }

  fn_ = body;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
  for (size_t i = 0; i < func_.buffer_params.size(); ++i) {
    const Buffer& buf = func_.buffer_params[i];
    body->getArg(i)->setName(buf->name);
    buffers_.push_back({buf.get(), body->getArg(i), false});
  }
  for (size_t j = 0; j < func_.scalar_params.size(); ++j) {
    llvm::Value* arg = body->getArg(func_.buffer_params.size() + j);
    arg->setName(func_.scalar_params[j]->name);
    vars_.push_back({func_.scalar_params[j].get(), arg});
  }
  if (func_.body) EmitStmt(func_.body);
  b_.CreateRetVoid();
}

// ---- Types ----

// The register type of one lane: f16/bf16 compute in f32, bool is i1.
llvm::Type* FunctionEmitter::ScalarType(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      return b_.getFloatTy();
    case DType::kFloat64:
      return b_.getDoubleTy();
    case DType::kInt8:
    case DType::kUInt8:
      return b_.getInt8Ty();
    case DType::kInt16:
    case DType::kUInt16:
      return b_.getInt16Ty();
    case DType::kInt32:
    case DType::kUInt32:
      return b_.getInt32Ty();
    case DType::kInt64:
    case DType::kUInt64:
      return b_.getInt64Ty();
    case DType::kBool:
      return b_.getInt1Ty();
  }
  Fail("unknown dtype");
}

// The storage type of one element in memory.
llvm::Type* FunctionEmitter::MemType(DType t) {
  if (t == DType::kFloat16 || t == DType::kBFloat16) return b_.getInt16Ty();
  if (t == DType::kBool) return b_.getInt8Ty();
  return ScalarType(t);
}

// ---- Scopes ----

llvm::Value* FunctionEmitter::LookupVar(const loop::VarNode* v) {
  for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
    if (it->var == v) return it->value;
  Fail("variable '", v->name, "' is used but not defined");
}

FunctionEmitter::BufferBinding* FunctionEmitter::FindBuffer(const BufferNode* b) {
  for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
    if (it->buffer == b) return &*it;
  return nullptr;
}

llvm::Value* FunctionEmitter::LookupBuffer(const BufferNode* b) {
  BufferBinding* binding = FindBuffer(b);
  if (!binding)
    Fail("buffer '", b->name, "' is neither a parameter nor allocated (",
         b->scope == BufferNode::Scope::kLocal ? "local" : "global", ")");
  if (!binding->data) Fail("buffer '", b->name, "' is used after its Free");
  return binding->data;
}

// An alloca at the top of the current function, so loops do not grow the stack.
llvm::AllocaInst* FunctionEmitter::EntryAlloca(llvm::Type* t, const std::string& name, int align) {
  llvm::BasicBlock& entry = fn_->getEntryBlock();
  llvm::IRBuilder<> eb(&entry, entry.begin());
  llvm::AllocaInst* a = eb.CreateAlloca(t, nullptr, name);
  a->setAlignment(llvm::Align(align));
  return a;
}

// An internal, always-inlined function whose pointer parameters are noalias.
llvm::Function* FunctionEmitter::MakeInnerFunction(const std::string& name,
                                                   const std::vector<llvm::Type*>& params) {
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), params, false);
  auto* f = llvm::Function::Create(type, llvm::GlobalValue::InternalLinkage, name, module_);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->isPointerTy()) f->addParamAttr(i, llvm::Attribute::NoAlias);
  functions_.push_back(f);
  return f;
}

llvm::FunctionCallee FunctionEmitter::LibFunction(const std::string& name, llvm::FunctionType* type,
                                                  bool pure) {
  // Only kernels can be in the way (BuildLLVM declares them all first).
  if (llvm::Function* existing = module_.getFunction(name);
      existing && existing->getFunctionType() != type)
    Fail("a kernel named '", name, "' hides the library function the code calls");
  llvm::FunctionCallee callee = module_.getOrInsertFunction(name, type);
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    // errno is never read, so the math functions can be hoisted, vectorized around and CSE'd.
    if (pure) f->setDoesNotAccessMemory();
  }
  return callee;
}

}  // namespace jit_internal

// ---- Compilation ----

namespace {

// Whether calls that generated code makes could resolve to a kernel of this name: the kernels
// are found before the process's symbols, so a kernel named `expf` would also catch the calls
// LLVM emits for llvm.exp. Covers the libm functions of every intrinsic (and LLVM's lowering
// of them), the C library calls emitted here and by LLVM, and compiler-runtime helpers.
bool CallsCouldReach(const std::string& name) {
  if (name.rfind("__", 0) == 0 || name.rfind("llvm.", 0) == 0) return true;
  static const char* const kLibrary[] = {"aligned_alloc",
                                         "free",
                                         "malloc",
                                         "memcpy",
                                         "memmove",
                                         "memset",
                                         "kiln_parallel_for",
                                         "kiln_scratch_alloc",
                                         "kiln_scratch_free",
                                         "roundeven",
                                         "sincos",
                                         "exp2",
                                         "exp10",
                                         "log2",
                                         "log10",
                                         "ldexp"};
  for (const char* lib : kLibrary)
    if (name == lib || name == std::string(lib) + "f") return true;
  static const char* const kIntrinsics[] = {
#define KILN_INTRINSIC(E, N, A) N,
#include "ir/loop/intrinsics.def"
  };
  for (const char* lib : kIntrinsics)
    if (name == lib || name == std::string(lib) + "f") return true;
  return false;
}

}  // namespace

void EmitKernels(llvm::Module& module, const std::vector<loop::PrimFunc>& funcs,
                 const CodegenOptions& options) {
  llvm::LLVMContext& context = module.getContext();
  // Declare every kernel first, so helper functions that LLVM renames never take a kernel's
  // (external) name.
  std::vector<llvm::Function*> kernels;
  llvm::Type* ptr = llvm::PointerType::getUnqual(context);
  auto* kernel_type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, ptr}, false);
  for (const loop::PrimFunc& f : funcs) {
    KILN_CHECK(f != nullptr, "BuildLLVM given a null PrimFunc");
    if (f->name.empty()) Throw(ErrorCode::kCompileError, "@: a PrimFunc has no name");
    if (module.getNamedValue(f->name))
      Throw(ErrorCode::kCompileError, "@", f->name, ": two functions have this name");
    if (CallsCouldReach(f->name))
      Throw(ErrorCode::kCompileError, "@", f->name,
            ": the name of a library function that generated code calls");
    auto* kernel =
        llvm::Function::Create(kernel_type, llvm::GlobalValue::ExternalLinkage, f->name, module);
    kernel->addFnAttr(llvm::Attribute::NoUnwind);
    kernels.push_back(kernel);
  }
  for (size_t i = 0; i < funcs.size(); ++i) {
    jit_internal::FunctionEmitter emitter(module, *funcs[i], kernels[i], options);
    emitter.Emit();
    // Bad IR must come back as an error naming the function, never reach the optimizer.
    std::vector<llvm::Function*> fns = emitter.functions();
    fns.push_back(kernels[i]);
    for (llvm::Function* fn : fns) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      if (llvm::verifyFunction(*fn, &os))
        Throw(ErrorCode::kCompileError, "@", funcs[i]->name, ": invalid LLVM IR in ",
              fn->getName().str(), ": ", os.str());
    }
  }
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (llvm::verifyModule(module, &os))
      Throw(ErrorCode::kCompileError, "invalid LLVM module: ", os.str());
  }
}

}  // namespace kiln
