// FunctionEmitter's expressions (jit/llvm_function_emitter.h): constants, arithmetic, f16/bf16,
// casts, intrinsic calls, vector Ramps and Broadcasts, and the buffer accesses of loads (and of
// stores, which llvm_emit_stmt.cc emits).
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
// Semantics follow the reference kernels, so generated code and the interpreter agree bit for
// bit where the math is exact: integer arithmetic wraps; integer x / 0, x // 0 and x % 0 are 0
// (never SIGFPE) and MIN / -1 wraps; float max/min propagate NaN and otherwise are
// `a < b ? b : a` (not llvm.maxnum, which drops NaN); comparisons are C++'s (NaN != x is
// true, every other comparison with NaN false); casts are the reference `cast` kernel's
// (float -> int truncates and saturates, NaN -> 0). fast_math adds only reassoc and contract;
// fp_contract (the default) only contract, so a multiply-add may round once, as an FMA.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/llvm_function_emitter.h"
#include "jit/llvm_vector_math.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::jit_internal {
namespace {

// ---- Loop IR helpers (no LLVM) ----

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

}  // namespace

// ---- Expressions ----

// Emits each expression node once per statement: lowering shares subexpressions (an input
// read by sign(), a guarded divisor), and re-emitting them would grow the IR exponentially
// along a fused chain. Expressions never branch, so every cached value lives in the block
// the statement is emitted into; each statement has its own cache.
llvm::Value* FunctionEmitter::EmitExpr(const Expr& e) {
  auto it = expr_cache_.find(e.get());
  if (it != expr_cache_.end()) return it->second.second;
  llvm::Value* v = EmitExprUncached(e);
  // Holding the node keeps its address from being reused by a temporary expression built
  // during emission (ComputeAccess builds some), which would otherwise hit a stale entry.
  expr_cache_[e.get()] = {e, v};
  return v;
}

llvm::Value* FunctionEmitter::EmitExprUncached(const Expr& e) {
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
      return lane_type->isFloatingPointTy() ? b_.CreateFAdd(base, step) : b_.CreateAdd(base, step);
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
llvm::Constant* FunctionEmitter::IntConst(llvm::Type* t, int64_t v) {
  unsigned bits = t->getScalarSizeInBits();
  uint64_t u = static_cast<uint64_t>(v);
  if (bits < 64) u &= (uint64_t{1} << bits) - 1;
  return llvm::ConstantInt::get(t, u, false);
}

// A constant of `dtype`: float dtypes take `f` (rounded to f16/bf16 precision when
// stored as those), integer dtypes take `i`.
llvm::Value* FunctionEmitter::EmitConst(double f, int64_t i, DType dtype) {
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

// 0/1 of dtype `t` from an i1 (vector).
llvm::Value* FunctionEmitter::FromBool(llvm::Value* c, DType t) {
  if (t == DType::kBool) return c;
  llvm::Type* to = LikeLanes(ScalarType(t), c);
  return IsFloat(t) ? b_.CreateUIToFP(c, to) : b_.CreateZExt(c, to);
}

llvm::Value* FunctionEmitter::Truthy(llvm::Value* v, DType t) {
  if (t == DType::kBool) return v;
  return IsFloat(t) ? b_.CreateFCmpUNE(v, Zero(v)) : b_.CreateICmpNE(v, Zero(v));
}

llvm::Value* FunctionEmitter::EmitBinary(const loop::BinaryNode* n) {
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
llvm::Value* FunctionEmitter::IntDivide(llvm::Value* a, llvm::Value* b, bool is_signed,
                                        loop::BinaryOp op) {
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
llvm::Value* FunctionEmitter::BF16Bits(llvm::Value* f) {
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
llvm::Value* FunctionEmitter::RoundTo(llvm::Value* f, DType t) {
  if (t == DType::kFloat16) {
    llvm::Value* h = b_.CreateFPTrunc(f, LikeLanes(b_.getHalfTy(), f));
    return b_.CreateFPExt(h, f->getType());
  }
  if (t == DType::kBFloat16) return b_.CreateBitCast(BF16Bits(f), f->getType());
  return f;
}

llvm::Value* FunctionEmitter::FromMemory(llvm::Value* raw, DType t) {
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

llvm::Value* FunctionEmitter::ToMemory(llvm::Value* v, DType t) {
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
llvm::Value* FunctionEmitter::EmitCast(llvm::Value* v, DType from, DType to) {
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

llvm::Value* FunctionEmitter::EmitCall(const loop::CallNode* n) {
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
  if (llvm::Value* v = EmitInlineMath(b_, n->fn, args, libm, math_target_)) return v;
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
llvm::Value* FunctionEmitter::CallLibm(const std::string& name,
                                       const std::vector<llvm::Value*>& args) {
  llvm::Type* scalar = args[0]->getType()->getScalarType();
  std::vector<llvm::Type*> params(args.size(), scalar);
  llvm::FunctionCallee fn = LibFunction(name, llvm::FunctionType::get(scalar, params, false), true);
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

FunctionEmitter::Access FunctionEmitter::ComputeAccess(const Buffer& buf,
                                                       const std::vector<Expr>& indices, int lanes,
                                                       bool strided_ok) {
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
    if (strided_ok && lane_stride >= 2 && lane_stride <= kMaxStridedLoad)
      return {Access::kStrided, ptr, nullptr, lanes, lane_stride};
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
    idx =
        b_.CreateIntCast(idx, LikeLanes(b_.getInt64Ty(), idx), IsSignedInteger(indices[k]->dtype));
    llvm::Value* stride = Splat(EmitExpr(strides[k]), lanes);
    offset = b_.CreateAdd(offset, b_.CreateMul(Splat(idx, lanes), stride));
  }
  return {Access::kGather, nullptr, b_.CreateInBoundsGEP(elem, data, offset), lanes};
}

llvm::Value* FunctionEmitter::EmitLoad(const loop::LoadNode* n) {
  DType t = n->buffer->dtype;
  Access acc = ComputeAccess(n->buffer, n->indices, n->lanes, /*strided_ok=*/true);
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
    case Access::kStrided: {
      // The span holds (lanes - 1) * stride + 1 elements, all inside the buffer since its
      // first and last are; the load is rounded up to lanes * stride elements and masks off
      // those past the span, so nothing past the last lane is touched.
      const int64_t width = acc.lanes * acc.stride;
      const int64_t span = (acc.lanes - 1) * acc.stride + 1;
      std::vector<llvm::Constant*> mask;
      for (int64_t i = 0; i < width; ++i) mask.push_back(b_.getInt1(i < span));
      llvm::Value* whole = b_.CreateMaskedLoad(WithLanes(elem, static_cast<int>(width)), acc.ptr,
                                               align, llvm::ConstantVector::get(mask));
      std::vector<int> pick;
      for (int i = 0; i < acc.lanes; ++i) pick.push_back(static_cast<int>(i * acc.stride));
      raw = b_.CreateShuffleVector(whole, pick);
      break;
    }
    case Access::kGather:
      raw = b_.CreateMaskedGather(WithLanes(elem, acc.lanes), acc.ptrs, align);
      break;
  }
  return FromMemory(raw, t);
}

namespace {

// A whole-register load `buf[ramp(root + offset, 1, lanes)]` with a constant offset.
struct ShiftedLoad {
  Expr node;
  const loop::BufferNode* buffer;
  Expr root;
  int64_t offset;
};

class ShiftedLoadScanner : public loop::Visitor {
 public:
  explicit ShiftedLoadScanner(int lanes) : lanes_(lanes) {}
  std::vector<ShiftedLoad> loads;

 protected:
  void VisitLoad(const loop::LoadNode* n, const Expr& self) override {
    const DType t = n->buffer->dtype;
    const loop::RampNode* r = n->indices.size() == 1 ? loop::AsRamp(n->indices[0]) : nullptr;
    if (r && r->stride == 1 && n->lanes == lanes_ &&
        (t == DType::kFloat32 || t == DType::kFloat64)) {
      auto [root, offset] = loop::SplitConstOffset(r->base);
      if (int64_t c = 0; loop::IsConstInt(root, &c)) {  // a constant index: offset from nothing
        root = nullptr;
        offset += c;
      }
      loads.push_back({self, n->buffer.get(), root, offset});
    }
    loop::Visitor::VisitLoad(n, self);
  }

 private:
  int lanes_;
};

}  // namespace

// Loads of one buffer a few elements apart (a stencil's taps: a depthwise conv reads its row
// at columns o + 0 ... o + 4 for one output vector) each take a load port, and on AVX-512 a
// 64-byte load at an unaligned address spans two cache lines 15 times in 16, taking the port
// twice. Where three or more whole-register loads of one statement lie within one register's
// span of each other, the first and last are loaded and the ones between are picked out of
// those two (one two-source permute each, vpermt2ps, exact), cached as the values of their
// nodes. Only for 512-bit registers: AVX2 has no two-source cross-lane permute of floats, and
// composing one costs more than the split load.
void FunctionEmitter::ShareShiftedLoads(const Expr& value) {
  if (vector_bits_ < 512 || value->lanes < 2) return;
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    const int lanes = vector_bits_ / (8 * static_cast<int>(DTypeSize(t)));
    if (value->lanes != lanes) continue;
    ShiftedLoadScanner scan(lanes);
    scan.VisitExpr(value);
    std::vector<ShiftedLoad>& loads = scan.loads;
    std::erase_if(loads, [&](const ShiftedLoad& l) { return l.buffer->dtype != t; });
    // Groups of one buffer and one root, by offset.
    std::vector<bool> taken(loads.size(), false);
    for (size_t i = 0; i < loads.size(); ++i) {
      if (taken[i]) continue;
      std::vector<const ShiftedLoad*> group;
      for (size_t j = i; j < loads.size(); ++j)
        if (!taken[j] && loads[j].buffer == loads[i].buffer &&
            ((!loads[j].root && !loads[i].root) ||
             (loads[j].root && loads[i].root &&
              loop::StructuralEqual(loads[j].root, loads[i].root)))) {
          taken[j] = true;
          group.push_back(&loads[j]);
        }
      std::stable_sort(group.begin(), group.end(), [](const ShiftedLoad* a, const ShiftedLoad* b) {
        return a->offset < b->offset;
      });
      for (size_t first = 0; first < group.size();) {
        size_t end = first + 1;
        while (end < group.size() && group[end]->offset - group[first]->offset < lanes) ++end;
        const ShiftedLoad* lo = group[first];
        const ShiftedLoad* hi = group[end - 1];
        int distinct = 1;
        for (size_t k = first + 1; k < end; ++k)
          distinct += group[k]->offset != group[k - 1]->offset;
        if (distinct >= 3) {
          llvm::Value* a = EmitExpr(lo->node);
          llvm::Value* b = EmitExpr(hi->node);
          for (size_t k = first + 1; k + 1 < end; ++k) {
            const ShiftedLoad* m = group[k];
            if (m->offset == lo->offset || m->offset == hi->offset) continue;
            std::vector<int> mask;
            for (int64_t lane = 0; lane < lanes; ++lane) {
              const int64_t at = m->offset + lane;  // the element, relative to the root
              mask.push_back(at - lo->offset < lanes ? static_cast<int>(at - lo->offset)
                                                     : static_cast<int>(lanes + at - hi->offset));
            }
            expr_cache_[m->node.get()] = {m->node, b_.CreateShuffleVector(a, b, mask)};
          }
        }
        first = end;
      }
    }
  }
}

}  // namespace kiln::jit_internal
