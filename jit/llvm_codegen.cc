// Loop IR -> LLVM IR (SPEC.md §4-5): EmitKernels (jit/llvm_emit.h). llvm_jit.cc optimizes the
// module and compiles it with ORC LLJIT; llvm_target.cc says which CPU for. Only jit/ includes
// LLVM headers: each file that does costs ~16 s to compile.
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
// Values. f32 and f64 are native. f16 and bf16 live as i16 in memory and as f32 in registers:
// they are widened on load, rounded (to nearest even) on store and by an explicit Cast, and
// computed in f32 in between. Integers keep their width; signedness picks the instructions (u8
// is the only unsigned type). bool is i1 in registers and i8 (0/1) in memory.
//
// Vectors. Ramp and Broadcast become LLVM vectors. A vector Load/Store whose flat index is
// `base + lane * s` is a plain vector access when s == 1, one scalar access when s == 0, and a
// masked gather/scatter otherwise (the backend scalarizes those where the CPU lacks them).
//
// Loops. Serial loops are emitted in rotated form (guard, body, latch) with i64 or the loop
// variable's own integer type. kUnrolled adds llvm.loop.unroll.full; kVectorized adds
// llvm.loop.vectorize.enable (and .width = extent for small power-of-two extents) when its body
// is still scalar (a vectorized body already made of Ramps is emitted as it is). kParallel
// outlines the loop into f.parallel.K, which runs one chunk [begin, end) of it as a serial
// loop, passes every value in scope through a closure struct on the caller's stack, and
// calls kiln_parallel_for, which blocks until all chunks have run.
//
// Semantics follow the reference kernels, so generated code and the interpreter agree bit for
// bit where the math is exact: integer arithmetic wraps; integer x / 0, x // 0 and x % 0 are 0
// (never SIGFPE) and MIN / -1 wraps; float max/min propagate NaN and otherwise are
// `a < b ? b : a` (not llvm.maxnum, which drops NaN); comparisons are C++'s (NaN != x is
// true, every other comparison with NaN false); casts are the reference `cast` kernel's
// (float -> int truncates and saturates, NaN -> 0). fast_math adds only reassoc and contract;
// fp_contract (the default) only contract, so a multiply-add may round once, as an FMA.
// reassociate_reductions (the default) marks the add of a float reduction's update
// (`acc[i] = acc[i] + v`) reassoc, which lets the loop vectorizer sum in per-lane partial sums.
//
// ScheduleBlocks are compiled directly: iter_vars are bound to their bindings (like lets) and
// `init` runs when every reduction iter_var's binding is 0, its first iteration (the ranges
// of iter_vars start at 0). Reduce is rejected: LowerReductions must run first.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "jit/llvm_emit.h"
#include "jit/llvm_vector_math.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::BufferNode;
using loop::Expr;
using loop::ExprKind;
using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;

// Local buffers up to this size live on the stack (entry-block allocas); larger or symbolic
// ones come from aligned_alloc. Small enough for oneTBB worker stacks even with several.
constexpr int64_t kMaxStackBytes = 16 * 1024;
// Alignment of local buffers, so vector accesses to them never straddle cache lines.
constexpr int kLocalAlign = 64;

// ---- Loop IR helpers (no LLVM) ----

// Whether any expression under `s` has more than one lane (it was vectorized already).
bool HasVectorLanes(const Stmt& s) {
  struct Finder : loop::Visitor {
    bool found = false;
    void VisitExpr(const Expr& e) override {
      if (found || !e) return;
      if (e->lanes > 1) {
        found = true;
        return;
      }
      loop::Visitor::VisitExpr(e);
    }
  } finder;
  finder.VisitStmt(s);
  return finder.found;
}

// Index math is i64; narrower integer indices are widened first.
Expr ToIndex(const Expr& e) {
  return e->dtype == DType::kInt64 ? e : loop::Cast(DType::kInt64, e);
}

// A vector index written as `base + lane * stride` with a scalar base and a constant stride.
struct LaneAffine {
  Expr base;
  int64_t stride;
};

// Recognizes the forms vectorization produces (Ramp, Broadcast, and sums and constant
// multiples of them); nullopt for anything else, which then needs a gather.
std::optional<LaneAffine> SplitLanes(const Expr& e) {
  if (e->lanes == 1) return LaneAffine{ToIndex(e), 0};
  if (const auto* r = loop::AsRamp(e)) return LaneAffine{ToIndex(r->base), r->stride};
  if (const auto* b = loop::AsBroadcast(e)) return LaneAffine{ToIndex(b->value), 0};
  const auto* bin = loop::AsBinary(e);
  if (!bin || !IsInteger(e->dtype)) return std::nullopt;
  auto x = SplitLanes(bin->a);
  auto y = SplitLanes(bin->b);
  if (!x || !y) return std::nullopt;
  switch (bin->op) {
    case loop::BinaryOp::kAdd:
      return LaneAffine{loop::Add(x->base, y->base), x->stride + y->stride};
    case loop::BinaryOp::kSub:
      return LaneAffine{loop::Sub(x->base, y->base), x->stride - y->stride};
    case loop::BinaryOp::kMul: {
      int64_t c;
      if (y->stride == 0 && loop::IsConstInt(y->base, &c))
        return LaneAffine{loop::Mul(x->base, y->base), x->stride * c};
      if (x->stride == 0 && loop::IsConstInt(x->base, &c))
        return LaneAffine{loop::Mul(x->base, y->base), y->stride * c};
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// The element strides an access with `num_indices` indices uses: the buffer's own strides, or
// row-major from its shape; a single index into a buffer of another rank is a flat offset.
std::vector<Expr> AccessStrides(const BufferNode& b, size_t num_indices) {
  size_t rank = b.shape.size();
  if (num_indices == 1 && rank != 1) return {loop::IntImm(1)};
  std::vector<Expr> strides(rank);
  if (!b.strides.empty()) {
    for (size_t k = 0; k < rank; ++k) strides[k] = ToIndex(b.strides[k]);
    return strides;
  }
  Expr acc = loop::IntImm(1);
  for (size_t k = rank; k-- > 0;) {
    strides[k] = acc;
    acc = loop::Mul(acc, ToIndex(b.shape[k]));
  }
  return strides;
}

// ---- The emitter ----

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
        reassociate_reductions_(options.reassociate_reductions) {
    if (options.fast_math || options.fp_contract) {
      // kernel.h's fast_math means reassociation and contraction only: NaN and infinity
      // keep their meaning, so maximum/minimum and comparisons still behave.
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc(options.fast_math);
      fmf.setAllowContract(true);
      b_.setFastMathFlags(fmf);
    }
  }

  void Emit() {
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
        llvm::Value* v = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8),
                                              func_.scalar_params[j]->name);
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

  // ---- Types ----

  // The register type of one lane: f16/bf16 compute in f32, bool is i1.
  llvm::Type* ScalarType(DType t) {
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
  llvm::Type* MemType(DType t) {
    if (t == DType::kFloat16 || t == DType::kBFloat16) return b_.getInt16Ty();
    if (t == DType::kBool) return b_.getInt8Ty();
    return ScalarType(t);
  }
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

  // ---- Scopes ----

  llvm::Value* LookupVar(const loop::VarNode* v) {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
      if (it->var == v) return it->value;
    Fail("variable '", v->name, "' is used but not defined");
  }
  BufferBinding* FindBuffer(const BufferNode* b) {
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
      if (it->buffer == b) return &*it;
    return nullptr;
  }
  llvm::Value* LookupBuffer(const BufferNode* b) {
    BufferBinding* binding = FindBuffer(b);
    if (!binding)
      Fail("buffer '", b->name, "' is neither a parameter nor allocated (",
           b->scope == BufferNode::Scope::kLocal ? "local" : "global", ")");
    if (!binding->data) Fail("buffer '", b->name, "' is used after its Free");
    return binding->data;
  }

  // An alloca at the top of the current function, so loops do not grow the stack.
  llvm::AllocaInst* EntryAlloca(llvm::Type* t, const std::string& name, int align) {
    llvm::BasicBlock& entry = fn_->getEntryBlock();
    llvm::IRBuilder<> eb(&entry, entry.begin());
    llvm::AllocaInst* a = eb.CreateAlloca(t, nullptr, name);
    a->setAlignment(llvm::Align(align));
    return a;
  }

  // An internal, always-inlined function whose pointer parameters are noalias.
  llvm::Function* MakeInnerFunction(const std::string& name,
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

  llvm::FunctionCallee LibFunction(const std::string& name, llvm::FunctionType* type, bool pure) {
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

  // ---- Expressions ----

  // Emits each expression node once per statement: lowering shares subexpressions (an input
  // read by sign(), a guarded divisor), and re-emitting them would grow the IR exponentially
  // along a fused chain. Expressions never branch, so every cached value lives in the block
  // the statement is emitted into; each statement has its own cache.
  llvm::Value* EmitExpr(const Expr& e) {
    auto it = expr_cache_.find(e.get());
    if (it != expr_cache_.end()) return it->second.second;
    llvm::Value* v = EmitExprUncached(e);
    // Holding the node keeps its address from being reused by a temporary expression built
    // during emission (ComputeAccess builds some), which would otherwise hit a stale entry.
    expr_cache_[e.get()] = {e, v};
    return v;
  }

  llvm::Value* EmitExprUncached(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        return EmitConst(static_cast<double>(loop::AsIntImm(e)->value), loop::AsIntImm(e)->value,
                         e->dtype);
      case ExprKind::kFloatImm: {
        double v = loop::AsFloatImm(e)->value;
        bool fits = std::isfinite(v) && std::fabs(v) < 9.2e18;  // a FloatImm of an integer dtype
        return EmitConst(v, fits ? static_cast<int64_t>(v) : 0, e->dtype);
      }
      case ExprKind::kVar:
        return LookupVar(loop::AsVar(e));
      case ExprKind::kBinary:
        return EmitBinary(loop::AsBinary(e));
      case ExprKind::kNot: {
        const Expr& a = loop::AsNot(e)->a;
        if (a->dtype != DType::kBool) Fail("'not' of a ", DTypeName(a->dtype), " value");
        return b_.CreateNot(EmitExpr(a));
      }
      case ExprKind::kSelect: {
        const auto* n = loop::AsSelect(e);
        CheckSameType("select", n->true_value, n->false_value);
        if (n->cond->dtype != DType::kBool)
          Fail("select condition is ", DTypeName(n->cond->dtype), ", not bool");
        llvm::Value* c = EmitExpr(n->cond);
        llvm::Value* t = EmitExpr(n->true_value);
        llvm::Value* f = EmitExpr(n->false_value);
        int lanes = std::max(LanesOf(c), LanesOf(t));
        if (LanesOf(c) > 1) {
          t = Splat(t, lanes);
          f = Splat(f, lanes);
        }
        return b_.CreateSelect(c, t, f);
      }
      case ExprKind::kCast: {
        const auto* n = loop::AsCast(e);
        return EmitCast(EmitExpr(n->value), n->value->dtype, n->dtype);
      }
      case ExprKind::kLoad:
        return EmitLoad(loop::AsLoad(e));
      case ExprKind::kCall:
        return EmitCall(loop::AsCall(e));
      case ExprKind::kRamp: {
        const auto* n = loop::AsRamp(e);
        llvm::Value* base = Splat(EmitExpr(n->base), n->lanes);
        llvm::Type* lane_type = ScalarType(n->dtype);
        std::vector<llvm::Constant*> steps;
        for (int i = 0; i < n->lanes; ++i) {
          int64_t s = n->stride * i;
          steps.push_back(lane_type->isFloatingPointTy()
                              ? llvm::ConstantFP::get(lane_type, static_cast<double>(s))
                              : IntConst(lane_type, s));
        }
        llvm::Value* step = llvm::ConstantVector::get(steps);
        return lane_type->isFloatingPointTy() ? b_.CreateFAdd(base, step)
                                              : b_.CreateAdd(base, step);
      }
      case ExprKind::kBroadcast: {
        const auto* n = loop::AsBroadcast(e);
        return Splat(EmitExpr(n->value), n->lanes);
      }
      case ExprKind::kReduce:
        Fail("Reduce must be lowered first (run LowerReductions)");
    }
    Fail("unknown expression kind");
  }

  // An integer constant of `t` (scalar or vector) holding `v` modulo 2^bits.
  static llvm::Constant* IntConst(llvm::Type* t, int64_t v) {
    unsigned bits = t->getScalarSizeInBits();
    uint64_t u = static_cast<uint64_t>(v);
    if (bits < 64) u &= (uint64_t{1} << bits) - 1;
    return llvm::ConstantInt::get(t, u, false);
  }

  // A constant of `dtype`: float dtypes take `f` (rounded to f16/bf16 precision when
  // stored as those), integer dtypes take `i`.
  llvm::Value* EmitConst(double f, int64_t i, DType dtype) {
    llvm::Type* t = ScalarType(dtype);
    switch (dtype) {
      case DType::kFloat16:
        return llvm::ConstantFP::get(t, static_cast<float>(Half(static_cast<float>(f))));
      case DType::kBFloat16:
        return llvm::ConstantFP::get(t, static_cast<float>(BFloat16(static_cast<float>(f))));
      case DType::kFloat32:
        return llvm::ConstantFP::get(t, static_cast<double>(static_cast<float>(f)));
      case DType::kFloat64:
        return llvm::ConstantFP::get(t, f);
      case DType::kBool:
        return b_.getInt1(f != 0);
      default:
        return IntConst(t, i);
    }
  }

  llvm::Value* Zero(llvm::Value* like) { return llvm::Constant::getNullValue(like->getType()); }

  // 0/1 of dtype `t` from an i1 (vector).
  llvm::Value* FromBool(llvm::Value* c, DType t) {
    if (t == DType::kBool) return c;
    llvm::Type* to = LikeLanes(ScalarType(t), c);
    return IsFloat(t) ? b_.CreateUIToFP(c, to) : b_.CreateZExt(c, to);
  }
  llvm::Value* Truthy(llvm::Value* v, DType t) {
    if (t == DType::kBool) return v;
    return IsFloat(t) ? b_.CreateFCmpUNE(v, Zero(v)) : b_.CreateICmpNE(v, Zero(v));
  }

  llvm::Value* EmitBinary(const loop::BinaryNode* n) {
    using loop::BinaryOp;
    CheckSameType(loop::BinaryOpName(n->op), n->a, n->b);
    DType t = n->a->dtype;
    llvm::Value* a = EmitExpr(n->a);
    llvm::Value* b = EmitExpr(n->b);
    bool fp = IsFloat(t);
    bool is_signed = IsSignedInteger(t);
    switch (n->op) {
      case BinaryOp::kAdd:
        return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
      case BinaryOp::kSub:
        return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
      case BinaryOp::kMul:
        return fp ? b_.CreateFMul(a, b) : b_.CreateMul(a, b);
      case BinaryOp::kDiv:
        return fp ? b_.CreateFDiv(a, b) : IntDivide(a, b, is_signed, BinaryOp::kDiv);
      case BinaryOp::kFloorDiv:
        if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
        return IntDivide(a, b, is_signed, BinaryOp::kFloorDiv);
      case BinaryOp::kFloorMod: {
        if (!fp) return IntDivide(a, b, is_signed, BinaryOp::kFloorMod);
        // fmod, then moved into the divisor's sign as the reference `mod` (fmod=0) does.
        llvm::Value* r = b_.CreateFRem(a, b);
        llvm::Value* differ =
            b_.CreateXor(b_.CreateFCmpOLT(r, Zero(r)), b_.CreateFCmpOLT(b, Zero(b)));
        llvm::Value* adjust = b_.CreateAnd(b_.CreateFCmpUNE(r, Zero(r)), differ);
        return b_.CreateSelect(adjust, b_.CreateFAdd(r, b), r);
      }
      case BinaryOp::kMin:
      case BinaryOp::kMax: {
        if (!fp)
          return b_.CreateBinaryIntrinsic(
              n->op == BinaryOp::kMin ? (is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin)
                                      : (is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax),
              a, b);
        // The reference kernels' NaN-propagating max/min: NaN in either gives NaN, and
        // otherwise `a < b ? b : a` (so max(-0, +0) is -0, as std::max gives). A NaN `a` already
        // falls through to `a`; only a NaN `b` needs its own test. With a constant `b` (relu)
        // that test folds away and x86 selects a single maxps/minps.
        llvm::Value* take_b =
            n->op == BinaryOp::kMax ? b_.CreateFCmpOLT(a, b) : b_.CreateFCmpOLT(b, a);
        take_b = b_.CreateOr(take_b, b_.CreateFCmpUNO(b, b));
        return b_.CreateSelect(take_b, b, a);
      }
      // C++ comparison semantics: every comparison with NaN is false except != .
      case BinaryOp::kEQ:
        return fp ? b_.CreateFCmpOEQ(a, b) : b_.CreateICmpEQ(a, b);
      case BinaryOp::kNE:
        return fp ? b_.CreateFCmpUNE(a, b) : b_.CreateICmpNE(a, b);
      case BinaryOp::kLT:
        return fp          ? b_.CreateFCmpOLT(a, b)
               : is_signed ? b_.CreateICmpSLT(a, b)
                           : b_.CreateICmpULT(a, b);
      case BinaryOp::kLE:
        return fp          ? b_.CreateFCmpOLE(a, b)
               : is_signed ? b_.CreateICmpSLE(a, b)
                           : b_.CreateICmpULE(a, b);
      case BinaryOp::kGT:
        return fp          ? b_.CreateFCmpOGT(a, b)
               : is_signed ? b_.CreateICmpSGT(a, b)
                           : b_.CreateICmpUGT(a, b);
      case BinaryOp::kGE:
        return fp          ? b_.CreateFCmpOGE(a, b)
               : is_signed ? b_.CreateICmpSGE(a, b)
                           : b_.CreateICmpUGE(a, b);
      case BinaryOp::kAnd:
        return FromBool(b_.CreateAnd(Truthy(a, t), Truthy(b, t)), t);
      case BinaryOp::kOr:
        return FromBool(b_.CreateOr(Truthy(a, t), Truthy(b, t)), t);
      case BinaryOp::kShl:
      case BinaryOp::kShr: {
        // LLVM's shifts are poison past the width: shift by at most width - 1 and pick the
        // out-of-range result (0, or the sign for a signed right shift) with a select.
        llvm::Type* ty = a->getType();
        unsigned bits = ty->getScalarSizeInBits();
        llvm::Value* width = llvm::ConstantInt::get(ty, bits);
        llvm::Value* in_range = b_.CreateICmpULT(b, width);  // negative amounts are huge
        llvm::Value* amount = b_.CreateSelect(in_range, b, llvm::ConstantInt::get(ty, bits - 1));
        if (n->op == BinaryOp::kShr && is_signed) return b_.CreateAShr(a, amount);
        llvm::Value* shifted =
            n->op == BinaryOp::kShl ? b_.CreateShl(a, amount) : b_.CreateLShr(a, amount);
        return b_.CreateSelect(in_range, shifted, llvm::ConstantInt::get(ty, 0));
      }
    }
    Fail("unknown binary operator");
  }

  // Integer /, // and % with the reference kernels' total semantics: x / 0 == x // 0 == 0 and
  // x % 0 == 0 (so bad data cannot raise SIGFPE), MIN / -1 wraps to MIN. The divisor is
  // replaced by 1 where the hardware would trap; a constant divisor folds all of it away.
  llvm::Value* IntDivide(llvm::Value* a, llvm::Value* b, bool is_signed, loop::BinaryOp op) {
    llvm::Type* t = a->getType();
    llvm::Value* zero = Zero(a);
    llvm::Value* one = IntConst(t, 1);
    llvm::Value* b_zero = b_.CreateICmpEQ(b, zero);
    llvm::Value* trap = b_zero;
    if (is_signed) {
      unsigned bits = t->getScalarSizeInBits();
      llvm::Value* min = llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(bits));
      llvm::Value* overflow =
          b_.CreateAnd(b_.CreateICmpEQ(a, min), b_.CreateICmpEQ(b, IntConst(t, -1)));
      trap = b_.CreateOr(trap, overflow);
    }
    llvm::Value* safe_b = b_.CreateSelect(trap, one, b);
    if (!is_signed) {
      if (op == loop::BinaryOp::kFloorMod) return b_.CreateURem(a, safe_b);  // x % 1 == 0
      return b_.CreateSelect(b_zero, zero, b_.CreateUDiv(a, safe_b));
    }
    if (op == loop::BinaryOp::kDiv) return b_.CreateSelect(b_zero, zero, b_.CreateSDiv(a, safe_b));
    llvm::Value* q = b_.CreateSDiv(a, safe_b);
    llvm::Value* r = b_.CreateSRem(a, safe_b);
    // Truncation rounded toward zero; step once toward -inf when the remainder is nonzero and
    // its sign differs from the divisor's.
    llvm::Value* adjust =
        b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
    if (op == loop::BinaryOp::kFloorMod) return b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
    q = b_.CreateSub(q, b_.CreateZExt(adjust, t));
    return b_.CreateSelect(b_zero, zero, q);
  }

  // ---- f16 / bf16 ----

  // f32 (vector) -> the i32 bits of the nearest-even bf16, low half zero; NaN stays a quiet NaN.
  // The same rounding as kiln::BFloat16.
  llvm::Value* BF16Bits(llvm::Value* f) {
    llvm::Type* it = LikeLanes(b_.getInt32Ty(), f);
    llvm::Value* x = b_.CreateBitCast(f, it);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(x, IntConst(it, 16)), IntConst(it, 1));
    llvm::Value* rounded = b_.CreateAdd(b_.CreateAdd(x, IntConst(it, 0x7fff)), lsb);
    llvm::Value* high = IntConst(it, 0xffff0000);
    rounded = b_.CreateAnd(rounded, high);
    llvm::Value* nan = b_.CreateAnd(b_.CreateOr(x, IntConst(it, 0x00400000)), high);
    return b_.CreateSelect(b_.CreateFCmpUNO(f, f), nan, rounded);
  }
  // An f32 register value rounded to what `t` can hold (identity for f32).
  llvm::Value* RoundTo(llvm::Value* f, DType t) {
    if (t == DType::kFloat16) {
      llvm::Value* h = b_.CreateFPTrunc(f, LikeLanes(b_.getHalfTy(), f));
      return b_.CreateFPExt(h, f->getType());
    }
    if (t == DType::kBFloat16) return b_.CreateBitCast(BF16Bits(f), f->getType());
    return f;
  }
  llvm::Value* FromMemory(llvm::Value* raw, DType t) {
    switch (t) {
      case DType::kFloat16: {
        llvm::Value* h = b_.CreateBitCast(raw, LikeLanes(b_.getHalfTy(), raw));
        return b_.CreateFPExt(h, LikeLanes(b_.getFloatTy(), raw));
      }
      case DType::kBFloat16: {
        llvm::Value* x = b_.CreateZExt(raw, LikeLanes(b_.getInt32Ty(), raw));
        x = b_.CreateShl(x, IntConst(x->getType(), 16));
        return b_.CreateBitCast(x, LikeLanes(b_.getFloatTy(), raw));
      }
      case DType::kBool:
        return b_.CreateICmpNE(raw, Zero(raw));
      default:
        return raw;
    }
  }
  llvm::Value* ToMemory(llvm::Value* v, DType t) {
    switch (t) {
      case DType::kFloat16: {
        llvm::Value* h = b_.CreateFPTrunc(v, LikeLanes(b_.getHalfTy(), v));
        return b_.CreateBitCast(h, LikeLanes(b_.getInt16Ty(), v));
      }
      case DType::kBFloat16: {
        llvm::Value* bits = BF16Bits(v);
        bits = b_.CreateLShr(bits, IntConst(bits->getType(), 16));
        return b_.CreateTrunc(bits, LikeLanes(b_.getInt16Ty(), v));
      }
      case DType::kBool:
        return b_.CreateZExt(v, LikeLanes(b_.getInt8Ty(), v));
      default:
        return v;
    }
  }

  // ---- Casts ----

  // The reference `cast` kernel's semantics for every pair: x -> bool is x != 0 (NaN is
  // true); int -> int wraps or extends by the source's signedness; int -> float goes through
  // f64 (exact for all but i64) and then to the target; float -> int truncates and saturates
  // with NaN -> 0 (llvm.fpto[su]i.sat); f64 -> f16/bf16 goes through f32 as the reference does.
  llvm::Value* EmitCast(llvm::Value* v, DType from, DType to) {
    if (from == to) return v;
    llvm::Type* to_type = LikeLanes(ScalarType(to), v);
    if (to == DType::kBool) return Truthy(v, from);
    if (from == DType::kBool) {
      if (!IsFloat(to)) return b_.CreateZExt(v, to_type);
      return b_.CreateUIToFP(v, to_type);  // 0 and 1 are exact in every float type
    }
    bool from_float = IsFloat(from), to_float = IsFloat(to);
    if (!from_float && !to_float) return b_.CreateIntCast(v, to_type, IsSignedInteger(from));
    if (!from_float) {
      bool is_signed = IsSignedInteger(from);
      if (from == DType::kInt64 && to != DType::kFloat64) {
        llvm::Value* d = b_.CreateSIToFP(v, LikeLanes(b_.getDoubleTy(), v));
        return RoundTo(b_.CreateFPTrunc(d, to_type), to);
      }
      llvm::Value* f = is_signed ? b_.CreateSIToFP(v, to_type) : b_.CreateUIToFP(v, to_type);
      return RoundTo(f, to);
    }
    if (!to_float) {
      auto id = IsSignedInteger(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat;
      return b_.CreateIntrinsic(id, {to_type, v->getType()}, {v});
    }
    if (to == DType::kFloat64) return b_.CreateFPExt(v, to_type);
    if (from == DType::kFloat64) v = b_.CreateFPTrunc(v, to_type);
    return RoundTo(v, to);
  }

  // ---- Calls ----

  llvm::Value* EmitCall(const loop::CallNode* n) {
    using loop::Intrinsic;
    std::vector<llvm::Value*> args;
    for (const Expr& a : n->args) {
      CheckSameType(loop::IntrinsicName(n->fn), n->args[0], a);
      args.push_back(EmitExpr(a));
    }
    if (static_cast<int>(args.size()) != loop::IntrinsicArity(n->fn))
      Fail(loop::IntrinsicName(n->fn), " takes ", loop::IntrinsicArity(n->fn), " arguments, got ",
           args.size());
    DType t = n->dtype;
    if (!IsFloat(t)) {
      // The few intrinsics that mean something for integers.
      if (n->fn == Intrinsic::kFabs && IsSignedInteger(t))
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, args[0], b_.getFalse());
      if (n->fn == Intrinsic::kFabs || n->fn == Intrinsic::kFloor || n->fn == Intrinsic::kCeil ||
          n->fn == Intrinsic::kRoundEven)
        return args[0];
      Fail(loop::IntrinsicName(n->fn), " needs float arguments, got ", DTypeName(t));
    }
    bool f64 = t == DType::kFloat64;
    // Transcendentals as inline vector code where kiln has it (jit/llvm_vector_math.h).
    auto libm = [this](const std::string& name, const std::vector<llvm::Value*>& a) {
      return CallLibm(name, a);
    };
    if (llvm::Value* v = EmitInlineMath(b_, n->fn, args, libm)) return v;
    switch (n->fn) {
      case Intrinsic::kExp:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, args[0]);
      case Intrinsic::kLog:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, args[0]);
      case Intrinsic::kSqrt:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, args[0]);
      case Intrinsic::kSin:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sin, args[0]);
      case Intrinsic::kCos:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::cos, args[0]);
      case Intrinsic::kFloor:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, args[0]);
      case Intrinsic::kCeil:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, args[0]);
      case Intrinsic::kRoundEven:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, args[0]);
      case Intrinsic::kFabs:
        return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
      case Intrinsic::kPow:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, args[0], args[1]);
      case Intrinsic::kFma:
        return b_.CreateIntrinsic(llvm::Intrinsic::fma, {args[0]->getType()}, args);
      case Intrinsic::kFmod:
        return b_.CreateFRem(args[0], args[1]);  // C fmod semantics
      // No LLVM intrinsic: libm, resolved from the process at link time.
      case Intrinsic::kTanh:
        return CallLibm(f64 ? "tanh" : "tanhf", args);
      case Intrinsic::kErf:
        return CallLibm(f64 ? "erf" : "erff", args);
      case Intrinsic::kAsin:
        return CallLibm(f64 ? "asin" : "asinf", args);
      case Intrinsic::kAcos:
        return CallLibm(f64 ? "acos" : "acosf", args);
      case Intrinsic::kAtan:
        return CallLibm(f64 ? "atan" : "atanf", args);
    }
    Fail("unknown intrinsic");
  }

  // A libm call, lane by lane for vectors.
  llvm::Value* CallLibm(const std::string& name, const std::vector<llvm::Value*>& args) {
    llvm::Type* scalar = args[0]->getType()->getScalarType();
    std::vector<llvm::Type*> params(args.size(), scalar);
    llvm::FunctionCallee fn =
        LibFunction(name, llvm::FunctionType::get(scalar, params, false), true);
    int lanes = LanesOf(args[0]);
    if (lanes == 1) return b_.CreateCall(fn, args);
    llvm::Value* out = llvm::PoisonValue::get(args[0]->getType());
    for (int i = 0; i < lanes; ++i) {
      std::vector<llvm::Value*> lane_args;
      for (llvm::Value* a : args) lane_args.push_back(b_.CreateExtractElement(a, i));
      out = b_.CreateInsertElement(out, b_.CreateCall(fn, lane_args), i);
    }
    return out;
  }

  // ---- Memory ----

  struct Access {
    enum Kind { kScalar, kContiguous, kSameAddress, kGather } kind;
    llvm::Value* ptr;   // kScalar/kContiguous/kSameAddress: the first lane's element
    llvm::Value* ptrs;  // kGather: a vector of element pointers
    int lanes;
  };

  Access ComputeAccess(const Buffer& buf, const std::vector<Expr>& indices, int lanes) {
    size_t rank = buf->shape.size();
    if (indices.size() != rank && indices.size() != 1)
      Fail("buffer '", buf->name, "' has rank ", rank, " but is accessed with ", indices.size(),
           " indices");
    if (!buf->strides.empty() && buf->strides.size() != rank)
      Fail("buffer '", buf->name, "' has ", buf->strides.size(), " strides for rank ", rank);
    llvm::Value* data = LookupBuffer(buf.get());
    llvm::Type* elem = MemType(buf->dtype);
    std::vector<Expr> strides = AccessStrides(*buf, indices.size());

    // The common case: the flat index is `base + lane * stride`, with a constant stride.
    Expr base = loop::IntImm(0);
    int64_t lane_stride = 0;
    bool affine = true;
    for (size_t k = 0; k < indices.size() && affine; ++k) {
      if (!IsInteger(indices[k]->dtype))
        Fail("buffer '", buf->name, "' is indexed with a ", DTypeName(indices[k]->dtype), " value");
      std::optional<LaneAffine> split = SplitLanes(indices[k]);
      int64_t c = 0;
      if (!split || (split->stride != 0 && !loop::IsConstInt(strides[k], &c))) {
        affine = false;
        break;
      }
      lane_stride += split->stride * c;
      base = loop::Add(base, loop::Mul(split->base, strides[k]));
    }
    if (affine) {
      llvm::Value* ptr = b_.CreateInBoundsGEP(elem, data, EmitExpr(base));
      if (lanes == 1) return {Access::kScalar, ptr, nullptr, 1};
      if (lane_stride == 1) return {Access::kContiguous, ptr, nullptr, lanes};
      if (lane_stride == 0) return {Access::kSameAddress, ptr, nullptr, lanes};
      std::vector<llvm::Constant*> offsets;
      for (int i = 0; i < lanes; ++i) offsets.push_back(b_.getInt64(lane_stride * i));
      llvm::Value* ptrs = b_.CreateInBoundsGEP(elem, ptr, llvm::ConstantVector::get(offsets));
      return {Access::kGather, nullptr, ptrs, lanes};
    }
    // Anything else: per-lane offsets, computed as vectors.
    llvm::Type* vi64 = WithLanes(b_.getInt64Ty(), lanes);
    llvm::Value* offset = llvm::Constant::getNullValue(vi64);
    for (size_t k = 0; k < indices.size(); ++k) {
      llvm::Value* idx = EmitExpr(indices[k]);
      idx = b_.CreateIntCast(idx, LikeLanes(b_.getInt64Ty(), idx),
                             IsSignedInteger(indices[k]->dtype));
      llvm::Value* stride = Splat(EmitExpr(strides[k]), lanes);
      offset = b_.CreateAdd(offset, b_.CreateMul(Splat(idx, lanes), stride));
    }
    return {Access::kGather, nullptr, b_.CreateInBoundsGEP(elem, data, offset), lanes};
  }

  llvm::Value* EmitLoad(const loop::LoadNode* n) {
    DType t = n->buffer->dtype;
    Access acc = ComputeAccess(n->buffer, n->indices, n->lanes);
    llvm::Type* elem = MemType(t);
    llvm::Align align(DTypeSize(t));
    llvm::Value* raw = nullptr;
    switch (acc.kind) {
      case Access::kScalar:
        raw = b_.CreateAlignedLoad(elem, acc.ptr, align);
        break;
      case Access::kContiguous:
        raw = b_.CreateAlignedLoad(WithLanes(elem, acc.lanes), acc.ptr, align);
        break;
      case Access::kSameAddress:
        raw = Splat(b_.CreateAlignedLoad(elem, acc.ptr, align), acc.lanes);
        break;
      case Access::kGather:
        raw = b_.CreateMaskedGather(WithLanes(elem, acc.lanes), acc.ptrs, align);
        break;
    }
    return FromMemory(raw, t);
  }

  // `buf[idx] = buf[idx] op v` on floats, op add, max or min: a reduction's update
  // (LowerReductions writes them).
  static bool IsAccumulation(const loop::StoreNode* n) {
    if (!IsFloat(n->buffer->dtype) || n->value->kind != ExprKind::kBinary) return false;
    const auto* add = loop::AsBinary(n->value);
    using loop::BinaryOp;
    if (add->op != BinaryOp::kAdd && add->op != BinaryOp::kMax && add->op != BinaryOp::kMin)
      return false;
    if (add->a->kind != ExprKind::kLoad) return false;
    const auto* load = loop::AsLoad(add->a);
    if (load->buffer.get() != n->buffer.get() || load->indices.size() != n->indices.size())
      return false;
    for (size_t k = 0; k < n->indices.size(); ++k)
      if (!loop::StructuralEqual(load->indices[k], n->indices[k])) return false;
    return true;
  }

  // The update's add may reassociate: LLVM's loop vectorizer keeps per-lane partial sums only
  // for a reassociable add, and a float sum that runs one element at a time is bound by the
  // add's latency (4 cycles an element). The order of the sum then depends on the vector width
  // the target picks, within rounding, as in any vectorized library; the terms are computed as
  // written (the flag is on this add alone).
  //
  // max and min become llvm.maximum / llvm.minimum, which the loop vectorizer reduces per lane
  // without any flag: like the reference's max they propagate NaN, and they order -0 below +0,
  // so only the sign of a zero maximum can differ from the element-by-element select (which
  // keeps the first of equal zeros).
  llvm::Value* EmitAccumulation(const loop::StoreNode* n) {
    const auto* add = loop::AsBinary(n->value);
    llvm::Value* a = EmitExpr(add->a);
    llvm::Value* b = EmitExpr(add->b);
    if (add->op != loop::BinaryOp::kAdd) {
      if (LanesOf(a) != LanesOf(b)) Fail("max/min of ", LanesOf(a), " and ", LanesOf(b), " lanes");
      return b_.CreateBinaryIntrinsic(
          add->op == loop::BinaryOp::kMax ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, a,
          b);
    }
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    llvm::FastMathFlags fmf = b_.getFastMathFlags();
    fmf.setAllowReassoc();
    b_.setFastMathFlags(fmf);
    return b_.CreateFAdd(a, b);
  }

  void EmitStore(const loop::StoreNode* n) {
    DType t = n->buffer->dtype;
    if (n->value->dtype != t)
      Fail("stores a ", DTypeName(n->value->dtype), " value into ", DTypeName(t), " buffer '",
           n->buffer->name, "'");
    int index_lanes = 1;
    for (const Expr& i : n->indices) index_lanes = std::max(index_lanes, i->lanes);
    if (n->value->lanes > 1 && index_lanes == 1)
      Fail("stores a ", n->value->lanes, "-lane value to a scalar index of '", n->buffer->name,
           "'");
    if (n->value->lanes > 1 && n->value->lanes != index_lanes)
      Fail("stores a ", n->value->lanes, "-lane value through ", index_lanes, "-lane indices");
    llvm::Value* value =
        reassociate_reductions_ && IsAccumulation(n) ? EmitAccumulation(n) : EmitExpr(n->value);
    Access acc = ComputeAccess(n->buffer, n->indices, index_lanes);
    llvm::Value* raw = ToMemory(Splat(value, index_lanes), t);
    llvm::Align align(DTypeSize(t));
    switch (acc.kind) {
      case Access::kScalar:
      case Access::kContiguous:
        b_.CreateAlignedStore(raw, acc.ptr, align);
        break;
      case Access::kSameAddress:  // every lane writes the same element: the last one wins
        b_.CreateAlignedStore(b_.CreateExtractElement(raw, acc.lanes - 1), acc.ptr, align);
        break;
      case Access::kGather:
        b_.CreateMaskedScatter(raw, acc.ptrs, align);
        break;
    }
  }

  void EmitAlloc(const loop::AllocNode* n) {
    const BufferNode& buf = *n->buffer;
    if (buf.scope != BufferNode::Scope::kLocal)
      Fail("Alloc of '", buf.name, "', which is not a local buffer");
    Expr numel = loop::IntImm(1);
    for (const Expr& d : buf.shape) numel = loop::Mul(numel, ToIndex(d));
    int64_t count;
    int64_t size = DTypeSize(buf.dtype);
    if (loop::IsConstInt(numel, &count) && count >= 0 && count * size <= kMaxStackBytes) {
      llvm::Type* type = llvm::ArrayType::get(MemType(buf.dtype), static_cast<uint64_t>(count));
      buffers_.push_back({&buf, EntryAlloca(type, buf.name, kLocalAlign), false});
      return;
    }
    // aligned_alloc wants a multiple of the alignment.
    llvm::Value* bytes = b_.CreateMul(EmitExpr(numel), b_.getInt64(size));
    bytes =
        b_.CreateAnd(b_.CreateAdd(bytes, b_.getInt64(kLocalAlign - 1)), b_.getInt64(-kLocalAlign));
    auto* alloc_type =
        llvm::FunctionType::get(b_.getPtrTy(), {b_.getInt64Ty(), b_.getInt64Ty()}, false);
    llvm::Value* data = b_.CreateCall(LibFunction("aligned_alloc", alloc_type, false),
                                      {b_.getInt64(kLocalAlign), bytes}, buf.name);
    buffers_.push_back({&buf, data, true});
  }

  void EmitFree(const loop::FreeNode* n) {
    BufferBinding* binding = FindBuffer(n->buffer.get());
    if (!binding || !binding->data) Fail("Free of '", n->buffer->name, "', which is not allocated");
    if (binding->heap) {
      auto* free_type = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy()}, false);
      b_.CreateCall(LibFunction("free", free_type, false), {binding->data});
    }
    binding->data = nullptr;
  }

  // ---- Statements ----

  void EmitStmt(const Stmt& s) {
    // A nested statement starts with an empty cache (its blocks may not be dominated by
    // values cached inside sibling statements) and gives the outer one its cache back.
    ExprCache outer = std::move(expr_cache_);
    expr_cache_.clear();
    EmitStmtUncached(s);
    expr_cache_ = std::move(outer);
  }

  void EmitStmtUncached(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kLetStmt: {
        const auto* n = loop::AsLetStmt(s);
        if (n->value->dtype != n->var->dtype)
          Fail("let binds a ", DTypeName(n->value->dtype), " value to ", DTypeName(n->var->dtype),
               " variable '", n->var->name, "'");
        vars_.push_back({n->var.get(), EmitExpr(n->value)});
        EmitStmt(n->body);
        vars_.pop_back();
        return;
      }
      case StmtKind::kStore:
        EmitStore(loop::AsStore(s));
        return;
      case StmtKind::kAlloc:
        EmitAlloc(loop::AsAlloc(s));
        return;
      case StmtKind::kFree:
        EmitFree(loop::AsFree(s));
        return;
      case StmtKind::kIfThenElse:
        EmitIf(loop::AsIfThenElse(s));
        return;
      case StmtKind::kFor:
        EmitFor(loop::AsFor(s));
        return;
      case StmtKind::kEvaluate:
        EmitExpr(loop::AsEvaluate(s)->value);
        return;
      case StmtKind::kScheduleBlock:
        EmitBlock(loop::AsScheduleBlock(s));
        return;
      case StmtKind::kSeq: {
        // An Alloc's buffer is visible until its Free or the end of the enclosing Seq.
        size_t scope = buffers_.size();
        for (const Stmt& c : loop::AsSeq(s)->stmts) EmitStmt(c);
        buffers_.resize(scope);
        return;
      }
    }
    Fail("unknown statement kind");
  }

  llvm::Value* EmitCondition(const Expr& cond, const char* what) {
    if (cond->lanes != 1) Fail(what, " condition has ", cond->lanes, " lanes");
    return Truthy(EmitExpr(cond), cond->dtype);
  }

  // Runs `then_fn` when `cond` (i1) holds, `else_fn` (may be empty) otherwise.
  template <typename Then, typename Else>
  void EmitBranches(llvm::Value* cond, const Then& then_fn, const Else* else_fn) {
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
    auto* else_bb = else_fn ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
    auto* merge_bb = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : merge_bb);
    b_.SetInsertPoint(then_bb);
    then_fn();
    b_.CreateBr(merge_bb);
    if (else_bb) {
      b_.SetInsertPoint(else_bb);
      (*else_fn)();
      b_.CreateBr(merge_bb);
    }
    b_.SetInsertPoint(merge_bb);
  }

  void EmitIf(const loop::IfThenElseNode* n) {
    llvm::Value* cond = EmitCondition(n->cond, "if");
    auto then_fn = [&] { EmitStmt(n->then_case); };
    auto else_fn = [&] { EmitStmt(n->else_case); };
    EmitBranches(cond, then_fn, n->else_case ? &else_fn : nullptr);
  }

  void EmitBlock(const loop::ScheduleBlockNode* n) {
    if (n->bindings.size() != n->iter_vars.size())
      Fail("block '", n->name, "' has ", n->iter_vars.size(), " iter_vars but ", n->bindings.size(),
           " bindings");
    // Evaluate every binding before binding any: they refer to the enclosing loops only.
    std::vector<llvm::Value*> values;
    for (const Expr& e : n->bindings) values.push_back(EmitExpr(e));
    llvm::Value* first = nullptr;  // all reduction iter_vars at 0
    bool has_reduce = false;
    for (size_t i = 0; i < values.size(); ++i) {
      vars_.push_back({n->iter_vars[i].var.get(), values[i]});
      if (i < n->is_reduce.size() && n->is_reduce[i]) {
        llvm::Value* at_start = b_.CreateICmpEQ(values[i], Zero(values[i]));
        first = has_reduce ? b_.CreateAnd(first, at_start) : at_start;
        has_reduce = true;
      }
    }
    if (n->init) {
      if (has_reduce) {
        auto init_fn = [&] { EmitStmt(n->init); };
        EmitBranches(first, init_fn, static_cast<decltype(init_fn)*>(nullptr));
      } else {
        EmitStmt(n->init);
      }
    }
    if (n->body) EmitStmt(n->body);
    vars_.resize(vars_.size() - values.size());
  }

  // A self-referencing llvm.loop node with the given properties.
  llvm::MDNode* LoopMetadata(const std::vector<llvm::Metadata*>& props) {
    std::vector<llvm::Metadata*> ops = {nullptr};
    ops.insert(ops.end(), props.begin(), props.end());
    llvm::MDNode* node = llvm::MDNode::getDistinct(ctx_, ops);
    node->replaceOperandWith(0, node);
    return node;
  }
  llvm::Metadata* Property(const char* name, llvm::Constant* value = nullptr) {
    std::vector<llvm::Metadata*> ops = {llvm::MDString::get(ctx_, name)};
    if (value) ops.push_back(llvm::ConstantAsMetadata::get(value));
    return llvm::MDNode::get(ctx_, ops);
  }

  void EmitFor(const loop::ForNode* n) {
    if (!IsInteger(n->var->dtype))
      Fail("loop variable '", n->var->name, "' is ", DTypeName(n->var->dtype));
    if (n->min->lanes != 1 || n->extent->lanes != 1)
      Fail("loop '", n->var->name, "' has vector bounds");
    switch (n->for_kind) {
      case ForKind::kSerial:
        EmitSerialFor(n, nullptr);
        return;
      case ForKind::kUnrolled:
        EmitSerialFor(n, LoopMetadata({Property("llvm.loop.unroll.full")}));
        return;
      case ForKind::kVectorized: {
        // Vectorization that already happened (Ramps in the body) must not be redone.
        if (HasVectorLanes(n->body)) {
          EmitSerialFor(n, nullptr);
          return;
        }
        std::vector<llvm::Metadata*> props = {Property("llvm.loop.vectorize.enable", b_.getTrue())};
        int64_t extent;
        if (loop::IsConstInt(n->extent, &extent) && extent >= 2 && extent <= 16 &&
            (extent & (extent - 1)) == 0)
          props.push_back(
              Property("llvm.loop.vectorize.width", b_.getInt32(static_cast<uint32_t>(extent))));
        EmitSerialFor(n, LoopMetadata(props));
        return;
      }
      case ForKind::kParallel:
        EmitParallelFor(n);
        return;
      case ForKind::kGpuBlockX:
      case ForKind::kGpuBlockY:
      case ForKind::kGpuBlockZ:
      case ForKind::kGpuThreadX:
      case ForKind::kGpuThreadY:
      case ForKind::kGpuThreadZ:
        Fail("loop '", n->var->name, "' is bound to ", loop::ForKindName(n->for_kind),
             ", which the CPU code generator cannot compile");
    }
    Fail("unknown loop kind");
  }

  void EmitSerialFor(const loop::ForNode* n, llvm::MDNode* loop_md) {
    llvm::Type* type = ScalarType(n->var->dtype);
    llvm::Value* begin = b_.CreateIntCast(EmitExpr(n->min), type, IsSignedInteger(n->min->dtype));
    llvm::Value* extent =
        b_.CreateIntCast(EmitExpr(n->extent), type, IsSignedInteger(n->extent->dtype));
    EmitLoop(n, begin, b_.CreateAdd(begin, extent), loop_md);
  }

  // for (v = begin; v < end; ++v) body, in rotated form: a guard, then a body whose latch
  // branches back, so LLVM's loop passes see a canonical loop. `begin` and `end` have the
  // loop variable's type.
  void EmitLoop(const loop::ForNode* n, llvm::Value* begin, llvm::Value* end,
                llvm::MDNode* loop_md) {
    bool is_signed = IsSignedInteger(n->var->dtype);
    llvm::Type* type = begin->getType();
    auto less = [&](llvm::Value* x, llvm::Value* y) {
      return is_signed ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
    };
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* body_bb = llvm::BasicBlock::Create(ctx_, "for." + n->var->name, fn_);
    auto* exit_bb = llvm::BasicBlock::Create(ctx_, "for." + n->var->name + ".end", fn_);
    b_.CreateCondBr(less(begin, end), body_bb, exit_bb);

    b_.SetInsertPoint(body_bb);
    llvm::PHINode* iv = b_.CreatePHI(type, 2, n->var->name);
    iv->addIncoming(begin, pre);
    vars_.push_back({n->var.get(), iv});
    EmitStmt(n->body);
    vars_.pop_back();
    // next <= end, so the increment cannot wrap.
    llvm::Value* next = b_.CreateAdd(iv, llvm::ConstantInt::get(type, 1), n->var->name + ".next",
                                     /*HasNUW=*/!is_signed, /*HasNSW=*/is_signed);
    llvm::BranchInst* latch = b_.CreateCondBr(less(next, end), body_bb, exit_bb);
    if (loop_md) latch->setMetadata(llvm::LLVMContext::MD_loop, loop_md);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.SetInsertPoint(exit_bb);
  }

  // The loop becomes `f.parallel.K(i64 chunk_begin, i64 chunk_end, ptr closure)`, which runs
  // a serial loop over its chunk (so the chunk can be vectorized); kiln_parallel_for hands
  // out the chunks. The closure struct holds every value and buffer pointer in scope (the
  // optimizer drops the loads the body does not use). It lives on this function's stack,
  // which is safe because kiln_parallel_for returns only after every chunk has finished.
  void EmitParallelFor(const loop::ForNode* n) {
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::Value* begin = b_.CreateIntCast(EmitExpr(n->min), i64, IsSignedInteger(n->min->dtype));
    llvm::Value* extent =
        b_.CreateIntCast(EmitExpr(n->extent), i64, IsSignedInteger(n->extent->dtype));
    llvm::Value* end = b_.CreateAdd(begin, extent);

    // The innermost binding of each var and buffer (outer ones are shadowed).
    std::vector<VarBinding> vars;
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
      if (std::none_of(vars.begin(), vars.end(),
                       [&](const VarBinding& v) { return v.var == it->var; }))
        vars.push_back(*it);
    std::vector<BufferBinding> buffers;
    for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
      if (it->data && std::none_of(buffers.begin(), buffers.end(),
                                   [&](const BufferBinding& b) { return b.buffer == it->buffer; }))
        buffers.push_back(*it);
    std::vector<llvm::Type*> fields;
    for (const BufferBinding& b : buffers) fields.push_back(b.data->getType());
    for (const VarBinding& v : vars) fields.push_back(v.value->getType());
    llvm::StructType* closure_type = llvm::StructType::get(ctx_, fields);

    std::string name = func_.name + ".parallel." + std::to_string(parallel_count_++);
    std::vector<llvm::Type*> params = {i64, i64};
    params.insert(params.end(), fields.begin(), fields.end());
    llvm::Function* body = MakeInnerFunction(name + ".body", params);

    // The trampoline kiln_parallel_for calls: unpack the closure into f.parallel.K.body's
    // (noalias) arguments.
    auto* tramp_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false);
    auto* tramp =
        llvm::Function::Create(tramp_type, llvm::GlobalValue::InternalLinkage, name, module_);
    tramp->addFnAttr(llvm::Attribute::NoUnwind);
    functions_.push_back(tramp);
    {
      llvm::IRBuilder<> tb(llvm::BasicBlock::Create(ctx_, "entry", tramp));
      std::vector<llvm::Value*> args = {tramp->getArg(0), tramp->getArg(1)};
      for (unsigned i = 0; i < fields.size(); ++i)
        args.push_back(
            tb.CreateLoad(fields[i], tb.CreateStructGEP(closure_type, tramp->getArg(2), i)));
      tb.CreateCall(body, args);
      tb.CreateRetVoid();
    }

    // Fill the closure here and hand it over.
    llvm::AllocaInst* closure = EntryAlloca(closure_type, name + ".closure", 8);
    {
      unsigned i = 0;
      for (const BufferBinding& b : buffers)
        b_.CreateStore(b.data, b_.CreateStructGEP(closure_type, closure, i++));
      for (const VarBinding& v : vars)
        b_.CreateStore(v.value, b_.CreateStructGEP(closure_type, closure, i++));
    }
    auto* pfor_type =
        llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy(), b_.getPtrTy()}, false);
    b_.CreateCall(LibFunction("kiln_parallel_for", pfor_type, false), {begin, end, tramp, closure});

    // Emit the chunk loop into f.parallel.K.body with the captured values as its scope.
    llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
    llvm::Function* saved_fn = fn_;
    std::vector<VarBinding> saved_vars = std::move(vars_);
    std::vector<BufferBinding> saved_buffers = std::move(buffers_);
    fn_ = body;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
    vars_.clear();
    buffers_.clear();
    // Push outermost first so the scope order (and shadowing) is as in the caller. Arguments
    // follow the closure's field order: the chunk, then buffers, then vars (innermost first).
    constexpr unsigned kFirstCapture = 2;
    for (size_t k = buffers.size(); k-- > 0;) {
      llvm::Argument* a = body->getArg(kFirstCapture + k);
      a->setName(buffers[k].buffer->name);
      buffers_.push_back({buffers[k].buffer, a, false});
    }
    for (size_t k = vars.size(); k-- > 0;) {
      llvm::Argument* a = body->getArg(kFirstCapture + buffers.size() + k);
      a->setName(vars[k].var->name);
      vars_.push_back({vars[k].var, a});
    }
    body->getArg(0)->setName(n->var->name + ".begin");
    body->getArg(1)->setName(n->var->name + ".end");
    // Chunks lie inside [min, min + extent), so they fit the loop variable's own type.
    llvm::Type* type = ScalarType(n->var->dtype);
    EmitLoop(n, b_.CreateIntCast(body->getArg(0), type, true),
             b_.CreateIntCast(body->getArg(1), type, true), nullptr);
    b_.CreateRetVoid();

    fn_ = saved_fn;
    vars_ = std::move(saved_vars);
    buffers_ = std::move(saved_buffers);
    b_.restoreIP(saved_ip);
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  const loop::PrimFuncNode& func_;
  llvm::Function* kernel_;
  bool reassociate_reductions_;
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

// ---- Compilation ----

// Whether calls that generated code makes could resolve to a kernel of this name: the kernels
// are found before the process's symbols, so a kernel named `expf` would also catch the calls
// LLVM emits for llvm.exp. Covers the libm functions of every intrinsic (and LLVM's lowering
// of them), the C library calls emitted here and by LLVM, and compiler-runtime helpers.
bool CallsCouldReach(const std::string& name) {
  if (name.rfind("__", 0) == 0 || name.rfind("llvm.", 0) == 0) return true;
  static const char* const kLibrary[] = {
      "aligned_alloc", "free",   "malloc", "memcpy", "memmove", "memset", "kiln_parallel_for",
      "roundeven",     "sincos", "exp2",   "exp10",  "log2",    "log10",  "ldexp"};
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
    FunctionEmitter emitter(module, *funcs[i], kernels[i], options);
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
