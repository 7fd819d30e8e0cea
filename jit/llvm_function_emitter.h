// FunctionEmitter, which turns one loop-IR PrimFunc into LLVM functions: internal to jit/ (it
// names LLVM types), used only by EmitKernels (jit/llvm_emit.h). Its members are defined in three
// files, one concern each:
//   llvm_codegen.cc    the function frame: f.body and the KernelFn wrapper, types, scopes, the
//                      declarations of inner and library functions; and EmitKernels itself
//   llvm_emit_expr.cc  expressions: constants, arithmetic, f16/bf16, casts, calls, loads
//   llvm_emit_stmt.cc  statements: stores, Alloc/Free, lets, ifs, blocks, loops (parallel ones
//                      outlined)
// Each of them includes LLVM headers and so costs ~16 s to compile: add no fourth.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "ir/loop/loop.h"
#include "jit/kernel.h"
#include "jit/llvm_vector_math.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::jit_internal {

using loop::Buffer;
using loop::BufferNode;
using loop::Expr;
using loop::ExprKind;
using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;

// Index math is i64; narrower integer indices are widened first.
inline Expr ToIndex(const Expr& e) {
  return e->dtype == DType::kInt64 ? e : loop::Cast(DType::kInt64, e);
}

// Emits one PrimFunc into `module`. Throws kCompileError "@<func>: ..." for anything it
// cannot compile; the module is then discarded by the caller.
class FunctionEmitter {
 public:
  FunctionEmitter(llvm::Module& module, const loop::PrimFuncNode& func, llvm::Function* kernel,
                  const CodegenOptions& options)
      : ctx_(module.getContext()),
        module_(module),
        b_(ctx_),
        func_(func),
        kernel_(kernel),
        reassociate_reductions_(options.reassociate_reductions),
        vector_bits_(VectorRegisterBits(options)),
        math_target_{.avx512f = vector_bits_ >= 512} {
    if (options.fast_math || options.fp_contract) {
      // kernel.h's fast_math means reassociation and contraction only: NaN and infinity
      // keep their meaning, so maximum/minimum and comparisons still behave.
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc(options.fast_math);
      fmf.setAllowContract(true);
      b_.setFastMathFlags(fmf);
    }
  }

  // Emits f.body and the KernelFn `kernel` that calls it.
  void Emit();

  // Every function this emitter made, for verification.
  const std::vector<llvm::Function*>& functions() const { return functions_; }

 private:
  struct VarBinding {
    const loop::VarNode* var;
    llvm::Value* value;
  };
  struct BufferBinding {
    const BufferNode* buffer;
    llvm::Value* data;  // null once freed
    bool heap;          // from aligned_alloc: Free calls free()
  };
  static llvm::MaybeAlign KnownAlign(const BufferBinding& b);

  template <typename... Parts>
  [[noreturn]] void Fail(const Parts&... parts) const {
    Throw(ErrorCode::kCompileError, "@", func_.name, ": ", parts...);
  }

  // Operands that LLVM needs to agree (nodes built without the checked constructors may not).
  void CheckSameType(const char* what, const Expr& a, const Expr& b) const {
    if (a->dtype != b->dtype || a->lanes != b->lanes)
      Fail("operands of '", what, "' differ: ", DTypeName(a->dtype), "x", a->lanes, " vs ",
           DTypeName(b->dtype), "x", b->lanes);
  }

  // ---- The function frame, types and scopes (llvm_codegen.cc) ----

  llvm::Type* ScalarType(DType t);
  llvm::Type* MemType(DType t);
  static llvm::Type* WithLanes(llvm::Type* scalar, int lanes) {
    return lanes == 1 ? scalar : llvm::FixedVectorType::get(scalar, lanes);
  }
  static int LanesOf(llvm::Value* v) {
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) return vt->getNumElements();
    return 1;
  }
  // `scalar` with as many lanes as `like`.
  static llvm::Type* LikeLanes(llvm::Type* scalar, llvm::Value* like) {
    return WithLanes(scalar, LanesOf(like));
  }
  llvm::Value* Splat(llvm::Value* v, int lanes) {
    return lanes == 1 || LanesOf(v) == lanes ? v : b_.CreateVectorSplat(lanes, v);
  }
  llvm::Value* LookupVar(const loop::VarNode* v);
  BufferBinding* FindBuffer(const BufferNode* b);
  llvm::Value* LookupBuffer(const BufferNode* b);
  llvm::AllocaInst* EntryAlloca(llvm::Type* t, const std::string& name, int align);
  llvm::Function* MakeInnerFunction(const std::string& name,
                                    const std::vector<llvm::Type*>& params);
  llvm::FunctionCallee LibFunction(const std::string& name, llvm::FunctionType* type, bool pure);

  // ---- Expressions (llvm_emit_expr.cc) ----

  llvm::Value* EmitExpr(const Expr& e);
  llvm::Value* EmitExprUncached(const Expr& e);
  static llvm::Constant* IntConst(llvm::Type* t, int64_t v);
  llvm::Value* EmitConst(double f, int64_t i, DType dtype);
  llvm::Value* Zero(llvm::Value* like) { return llvm::Constant::getNullValue(like->getType()); }
  llvm::Value* FromBool(llvm::Value* c, DType t);
  llvm::Value* Truthy(llvm::Value* v, DType t);
  llvm::Value* EmitBinary(const loop::BinaryNode* n);
  llvm::Value* IntDivide(llvm::Value* a, llvm::Value* b, bool is_signed, loop::BinaryOp op);
  // f16 / bf16
  llvm::Value* BF16Bits(llvm::Value* f);
  llvm::Value* RoundTo(llvm::Value* f, DType t);
  llvm::Value* FromMemory(llvm::Value* raw, DType t);
  llvm::Value* ToMemory(llvm::Value* v, DType t);
  // Casts and calls
  llvm::Value* EmitCast(llvm::Value* v, DType from, DType to);
  llvm::Value* EmitCall(const loop::CallNode* n);
  llvm::Value* CallLibm(const std::string& name, const std::vector<llvm::Value*>& args);
  // Memory
  struct Access {
    enum Kind { kScalar, kContiguous, kSameAddress, kStrided, kGather } kind;
    llvm::Value* ptr;   // kScalar/kContiguous/kSameAddress/kStrided: the first lane's element
    llvm::Value* ptrs;  // kGather: a vector of element pointers
    int lanes;
    int64_t stride = 0;  // kStrided: elements between lanes (2 to kMaxStridedLoad)
  };
  // Loads (`strided_ok`) whose lanes are a small constant stride apart are kStrided: the span
  // from the first lane to the last is loaded whole and the lanes picked out of it, which is
  // much cheaper than a gather. Stores never are: writing the span would race with other
  // threads writing the elements between the lanes.
  static constexpr int64_t kMaxStridedLoad = 4;
  Access ComputeAccess(const Buffer& buf, const std::vector<Expr>& indices, int lanes,
                       bool strided_ok = false);
  llvm::Value* EmitLoad(const loop::LoadNode* n);
  void ShareShiftedLoads(const Expr& value);

  // ---- Statements (llvm_emit_stmt.cc) ----

  static bool IsAccumulation(const loop::StoreNode* n);
  llvm::Value* EmitAccumulation(const loop::StoreNode* n);
  void EmitStore(const loop::StoreNode* n);
  void EmitAlloc(const loop::AllocNode* n);
  void EmitFree(const loop::FreeNode* n);
  void EmitStmt(const Stmt& s);
  void EmitStmtUncached(const Stmt& s);
  llvm::Value* EmitCondition(const Expr& cond, const char* what);
  // Defined in llvm_emit_stmt.cc, the only file that calls it.
  template <typename Then, typename Else>
  void EmitBranches(llvm::Value* cond, const Then& then_fn, const Else* else_fn);
  void EmitIf(const loop::IfThenElseNode* n);
  void EmitBlock(const loop::ScheduleBlockNode* n);
  llvm::MDNode* LoopMetadata(const std::vector<llvm::Metadata*>& props);
  llvm::Metadata* Property(const char* name, llvm::Constant* value = nullptr);
  void EmitFor(const loop::ForNode* n);
  void EmitSerialFor(const loop::ForNode* n, llvm::MDNode* loop_md);
  void EmitLoop(const loop::ForNode* n, llvm::Value* begin, llvm::Value* end,
                llvm::MDNode* loop_md);
  void EmitParallelFor(const loop::ForNode* n);

  llvm::LLVMContext& ctx_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  const loop::PrimFuncNode& func_;
  llvm::Function* kernel_;
  bool reassociate_reductions_;
  int vector_bits_;               // the target's vector register width (jit/kernel.h)
  InlineMathTarget math_target_;  // what the inline math may use (jit/llvm_vector_math.h)
  llvm::Function* fn_ = nullptr;  // the function statements are emitted into
  // Scopes, innermost last. Vectors rather than maps so that closures are built in a
  // deterministic order and shadowing is a reverse search.
  std::vector<VarBinding> vars_;
  using ExprCache = std::unordered_map<const loop::ExprNode*, std::pair<Expr, llvm::Value*>>;
  ExprCache expr_cache_;
  std::vector<BufferBinding> buffers_;
  std::vector<llvm::Function*> functions_;
  int parallel_count_ = 0;
};

}  // namespace kiln::jit_internal
