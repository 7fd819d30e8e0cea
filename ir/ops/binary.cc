// Broadcasting binary ops (arithmetic, prelu, comparisons, logic) and `where`.
//
// Integer arithmetic wraps modulo 2^n, as NumPy and the generated kernels do, instead of
// being undefined on overflow: it is done in uint64 and narrowed with static_cast.
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::DTypeClass;

template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  } else {
    return a - b;
  }
}

template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

// Integer division truncates toward zero (ONNX Div). Division by zero has no value; kiln
// defines it as 0 so that bad data cannot crash the process (C++ would trap or be undefined).
template <typename T>
T Divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == T{0}) return T{0};
    // MIN / -1 overflows; the wrapped result is -MIN == MIN.
    if constexpr (std::is_signed_v<T>) {
      if (b == T{-1}) return WrapSub(T{0}, a);
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

// Integer power by squaring, wrapping like the other integer ops. A negative exponent gives
// 1 / base^-e truncated toward zero: nonzero only for base 1 and -1, and base 0 (a division
// by zero) gives 0 as in Divide.
int64_t IntPow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return exponent % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

template <typename T>
T Power(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(IntPow(static_cast<int64_t>(a), static_cast<int64_t>(b)));
  } else {
    return std::pow(a, b);
  }
}

template <typename T>
bool IsNaN(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(v);
  }
}

// maximum/minimum propagate NaN, as NumPy's do.
template <typename T>
T Larger(T a, T b) {
  if (IsNaN(a)) return a;
  if (IsNaN(b)) return b;
  return a < b ? b : a;
}
template <typename T>
T Smaller(T a, T b) {
  if (IsNaN(a)) return a;
  if (IsNaN(b)) return b;
  return b < a ? b : a;
}

// ONNX Mod. fmod=1: the C remainder (sign of the dividend). fmod=0: the sign of the divisor,
// as Python's %. Integer mod by zero is defined as 0, like Divide; float mod by zero is NaN.
template <typename T>
T Remainder(T a, T b, bool c_fmod) {
  T r;
  if constexpr (std::is_integral_v<T>) {
    if (b == T{0}) return T{0};
    if constexpr (std::is_signed_v<T>) {
      if (b == T{-1}) return T{0};  // MIN % -1 overflows; every x % -1 is 0
    }
    r = static_cast<T>(a % b);
  } else {
    r = std::fmod(a, b);
  }
  if constexpr (std::is_signed_v<T> || !std::is_integral_v<T>) {
    if (!c_fmod && r != T{0} && ((r < T{0}) != (b < T{0}))) r = WrapAdd(r, b);
  }
  return r;
}

// ONNX PRelu. Unsigned (and bool, which the type relation rejects) values are never negative.
template <typename T>
T PRelu(T x, T slope) {
  if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) {
    return x < T{0} ? WrapMul(slope, x) : x;
  } else {
    return x;
  }
}

// ---- Lowering (ir/lower_api.h) ----
//
// Every op reads its inputs at lower::BroadcastIndex of the output index. Float arithmetic on
// f16/bf16 is done in f32 and cast back, as the reference does (ComputeT), so single ops agree
// bit for bit with it (pow and mod through the same libm functions). Integer arithmetic wraps
// (the loop IR's +, -, * do), and the integer divisions never reach a divisor that traps
// (0, or -1 with the most negative dividend): it is replaced by 1 first, and the reference's
// defined result is selected afterwards, so no lane of even a vectorized select divides by it.

DType ComputeDType(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 ? DType::kFloat32 : t;
}

loop::Expr C(double v, const loop::Expr& like) {
  return lower::Const(v, like->dtype);
}
loop::Expr Cmp(loop::BinaryOp op, loop::Expr a, loop::Expr b) {
  return loop::MakeBinary(op, std::move(a), std::move(b));
}

// The most negative value of a signed integer dtype.
loop::Expr MinValue(DType t) {
  int64_t v = DispatchDType(t, []<typename T>() -> int64_t {
    if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(std::numeric_limits<T>::min());
    return 0;
  });
  return loop::IntImm(v, t);
}

// Divide's integer case: a / 0 == 0 and MIN / -1 == MIN (wrapped -MIN).
loop::Expr LowerIntDivide(const loop::Expr& a, const loop::Expr& b) {
  using loop::BinaryOp;
  DType t = a->dtype;
  loop::Expr by_zero = Cmp(BinaryOp::kEQ, b, C(0, b));
  loop::Expr trap = by_zero;
  if (IsSignedInteger(t))
    trap = loop::MakeBinary(BinaryOp::kOr, trap,
                            loop::MakeBinary(BinaryOp::kAnd, Cmp(BinaryOp::kEQ, a, MinValue(t)),
                                             Cmp(BinaryOp::kEQ, b, C(-1, b))));
  // MIN / 1 is MIN, the wrapped MIN / -1, so only division by zero needs its own result.
  loop::Expr q = loop::Div(a, loop::Select(trap, C(1, b), b));
  return loop::Select(by_zero, C(0, a), q);
}

// Remainder's integer case: x % 0 == 0 and x % -1 == 0. Both are also x % 1, so the guarded
// divisor alone gives the reference's results (and MIN % -1 never overflows).
loop::Expr LowerIntRemainder(const loop::Expr& a, const loop::Expr& b, bool c_fmod) {
  using loop::BinaryOp;
  loop::Expr trap = Cmp(BinaryOp::kEQ, b, C(0, b));
  if (IsSignedInteger(a->dtype))
    trap = loop::MakeBinary(BinaryOp::kOr, trap, Cmp(BinaryOp::kEQ, b, C(-1, b)));
  loop::Expr d = loop::Select(trap, C(1, b), b);
  // The loop IR has floored, not truncated, remainder; the C remainder is a - (a / d) * d,
  // where |(a / d) * d| <= |a| cannot overflow. Unsigned values have one remainder.
  if (c_fmod && IsSignedInteger(a->dtype)) return loop::Sub(a, loop::Mul(loop::Div(a, d), d));
  return loop::FloorMod(a, d);
}

// Remainder's float case: C fmod, moved into the divisor's sign for fmod=0.
loop::Expr LowerFloatRemainder(const loop::Expr& a, const loop::Expr& b, bool c_fmod) {
  using loop::BinaryOp;
  loop::Expr r = loop::Call(loop::Intrinsic::kFmod, {a, b});
  if (c_fmod) return r;
  loop::Expr zero = C(0, r);
  loop::Expr signs_differ =
      Cmp(BinaryOp::kNE, Cmp(BinaryOp::kLT, r, zero), Cmp(BinaryOp::kLT, b, zero));
  loop::Expr adjust = loop::MakeBinary(BinaryOp::kAnd, Cmp(BinaryOp::kNE, r, zero), signs_differ);
  return loop::Select(adjust, loop::Add(r, b), r);
}

// How many squarings of the base IntPow can need: the value bits of a nonnegative exponent.
int ExponentBits(DType t) {
  return IsUnsignedInteger(t) ? DTypeSize(t) * 8 : DTypeSize(t) * 8 - 1;
}

// Squarings per expression before IntPow's state is materialized. The loop IR has no
// let-expression and code generators emit a shared subexpression once per use, so each
// squaring doubles the size of the emitted expression: 8 levels emit 256 reads per element
// (the optimizer merges them back into one), and i8/u8 need no local buffers at all.
constexpr int kPowLevelsPerPass = 8;

// A tensor whose element may be repeated in an expression without repeating work.
bool CheapToRepeat(const LTensor& t) {
  std::vector<loop::Expr> zeros(t.shape.size(), loop::IntImm(0));
  loop::Expr e = t.at(zeros);
  if (const loop::CastNode* c = loop::AsCast(e)) e = c->value;
  return loop::AsLoad(e) || loop::AsIntImm(e) || loop::AsFloatImm(e);
}

// Power's integer case: IntPow as square-and-multiply over the exponent's bits, in the dtype
// itself (products wrap modulo 2^n, the low bits of IntPow's wrapping 64-bit products). The
// square b^(2^k) and the partial product are materialized every kPowLevelsPerPass squarings
// into local buffers of the output's shape (the loop IR cannot name a value twice otherwise);
// i64 takes 14 such buffers, i32 6, i16 2.
LTensor LowerIntPower(LowerContext& ctx, const LTensor& base_in, const LTensor& exp_in) {
  using loop::BinaryOp;
  using Fn = std::function<loop::Expr(const std::vector<loop::Expr>&)>;
  DType t = base_in.dtype;
  LTensor base = base_in, exponent = exp_in;
  if (!CheapToRepeat(base)) base = ctx.Materialize(base, "pow_base");
  if (!CheapToRepeat(exponent)) exponent = ctx.Materialize(exponent, "pow_exp");
  Fn exp_at = exponent.at;
  Fn square = base.at;  // b^(2^k)
  Fn product = [t](const std::vector<loop::Expr>&) { return loop::IntImm(1, t); };
  int bits = ExponentBits(t);
  for (int k = 0; k < bits; ++k) {
    if (k > 0 && k % kPowLevelsPerPass == 0) {
      square = ctx.Materialize(LTensor{t, base.shape, square}, "pow_square").at;
      product = ctx.Materialize(LTensor{t, base.shape, product}, "pow_product").at;
    }
    loop::Expr step = loop::IntImm(int64_t{1} << k, t);
    product = [product, square, exp_at, step, t](const std::vector<loop::Expr>& idx) {
      loop::Expr bit = loop::FloorMod(loop::FloorDiv(exp_at(idx), step), loop::IntImm(2, t));
      loop::Expr factor = loop::Select(Cmp(BinaryOp::kEQ, bit, loop::IntImm(1, t)), square(idx),
                                       loop::IntImm(1, t));
      return loop::Mul(product(idx), factor);
    };
    if (k + 1 < bits) {
      square = [square](const std::vector<loop::Expr>& idx) {
        return loop::Mul(square(idx), square(idx));
      };
    }
  }
  if (!IsSignedInteger(t)) return LTensor{t, base.shape, product};
  // A negative exponent: 1 / b^-e truncated, nonzero only for b == 1 and b == -1.
  Fn base_at = base.at;
  return LTensor{
      t, base.shape, [=](const std::vector<loop::Expr>& idx) {
        loop::Expr b = base_at(idx), e = exp_at(idx);
        loop::Expr one = loop::IntImm(1, t), minus_one = loop::IntImm(-1, t);
        loop::Expr even =
            Cmp(BinaryOp::kEQ, loop::FloorMod(e, loop::IntImm(2, t)), loop::IntImm(0, t));
        loop::Expr negative =
            loop::Select(Cmp(BinaryOp::kEQ, b, one), one,
                         loop::Select(Cmp(BinaryOp::kEQ, b, minus_one),
                                      loop::Select(even, one, minus_one), loop::IntImm(0, t)));
        return loop::Select(Cmp(BinaryOp::kLT, e, loop::IntImm(0, t)), negative, product(idx));
      }};
}

// Reads each input at its broadcast index of the output index.
std::vector<loop::Expr> ReadBroadcast(const std::vector<LTensor>& in,
                                      const std::vector<loop::Expr>& idx,
                                      const std::vector<loop::Expr>& out_shape) {
  std::vector<loop::Expr> v;
  for (const LTensor& t : in) v.push_back(t.at(lower::BroadcastIndex(t, idx, out_shape)));
  return v;
}

// The inputs, broadcast to the output's shape and dtype `out_type`, combined by `fn` in
// ComputeDType of the inputs' dtype.
using BinaryLowerFn = std::function<loop::Expr(const loop::Expr& a, const loop::Expr& b)>;
LTensor LowerBroadcastBinary(LowerContext& ctx, const std::vector<LTensor>& in,
                             const Type& out_type, BinaryLowerFn fn) {
  const TensorTypeNode* tt = AsTensor(out_type);
  KILN_CHECK(tt, "binary op without a tensor result");
  DType out = tt->dtype, compute = ComputeDType(in.at(0).dtype);
  const std::vector<loop::Expr> shape = ctx.ShapeExpr(tt->shape);
  return LTensor{out, shape, [in, fn, out, compute, shape](const std::vector<loop::Expr>& idx) {
                   std::vector<loop::Expr> v = ReadBroadcast(in, idx, shape);
                   return loop::Cast(out, fn(loop::Cast(compute, v[0]), loop::Cast(compute, v[1])));
                 }};
}

// An attribute-free binary op's lowering from its loop expression.
LowerFn BinaryLowering(BinaryLowerFn fn) {
  return [fn](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
              const std::vector<Type>& out_types) {
    return std::vector<LTensor>{LowerBroadcastBinary(ctx, in, out_types.at(0), fn)};
  };
}

LowerFn ComparisonLowering(loop::BinaryOp op) {
  return BinaryLowering([op](const loop::Expr& a, const loop::Expr& b) { return Cmp(op, a, b); });
}

std::vector<LTensor> LowerPower(LowerContext& ctx, const std::vector<LTensor>& in,
                                const std::vector<Type>& out_types) {
  if (IsFloat(in.at(0).dtype))
    return {LowerBroadcastBinary(ctx, in, out_types.at(0),
                                 [](const loop::Expr& a, const loop::Expr& b) {
                                   return loop::Call(loop::Intrinsic::kPow, {a, b});
                                 })};
  // Broadcast both operands to the output's shape first: the squarings are materialized in it.
  const TensorTypeNode* tt = AsTensor(out_types.at(0));
  std::vector<loop::Expr> shape = ctx.ShapeExpr(tt->shape);
  std::vector<LTensor> full;
  for (size_t i = 0; i < 2; ++i) {
    LTensor x = in.at(i);
    full.push_back(LTensor{x.dtype, shape, [x, shape](const std::vector<loop::Expr>& idx) {
                             return x.at(lower::BroadcastIndex(x, idx, shape));
                           }});
  }
  return {LowerIntPower(ctx, full[0], full[1])};
}

// a << b or a >> b for the unsigned integers (the relation admits no others; the other
// instantiations exist only because kernels are generic over the dtype).
template <bool kLeft, typename T>
T ShiftBits(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
    if (b >= sizeof(T) * 8) return 0;
    return static_cast<T>(kLeft ? a << b : a >> b);
  } else {
    return a;
  }
}

// Checks that both inputs have the same dtype, in `allowed`, and broadcasts their shapes.
Shape BroadcastSameDType(TypeRelContext& ctx, DTypeClass allowed) {
  const TensorTypeNode& a = ctx.tensor(0);
  const TensorTypeNode& b = ctx.tensor(1);
  if (a.dtype != b.dtype)
    ctx.Fail(StrCat("input dtypes differ: ", DTypeName(a.dtype), " vs ", DTypeName(b.dtype), " (",
                    TypeToString(ctx.arg(0)), " and ", TypeToString(ctx.arg(1)), ")"));
  ops::RequireDType(ctx, a.dtype, allowed);
  return ctx.BroadcastShapes(a.shape, b.shape);
}

// out = fn(a, b) over the broadcast inputs; the output is bool or the input dtype.
template <bool kBoolOut, typename Fn>
void BinaryKernel(const std::vector<Tensor>& in, Tensor& out, Fn fn) {
  DispatchDType(in[0].dtype(), [&]<typename T>() {
    ops::MapBinary<T, std::conditional_t<kBoolOut, bool, T>>(in[0], in[1], out, fn);
  });
}

// Registers an attribute-free binary op. `fn` is generic: it is called with ops::ComputeT<T>
// of every dtype, although the type relation only lets `allowed` ones reach it.
template <bool kBoolOut, typename Fn>
void RegisterBinary(OpRegistry& r, const char* name, const char* doc, DTypeClass allowed, Fn fn,
                    LowerFn lower) {
  r.Register(OpDef{
      .name = name,
      .doc = doc,
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {},
      .pattern = OpPattern::kBroadcast,
      .type_rel =
          [allowed](TypeRelContext& ctx) {
            Shape shape = BroadcastSameDType(ctx, allowed);
            return TensorType(std::move(shape), kBoolOut ? DType::kBool : ctx.tensor(0).dtype);
          },
      .ref_kernel = [fn](const std::vector<Tensor>& in, const Attrs&,
                         std::vector<Tensor>& out) { BinaryKernel<kBoolOut>(in, out[0], fn); },
      .lower = std::move(lower),
  });
}

Type WhereRel(TypeRelContext& ctx) {
  const TensorTypeNode& cond = ctx.tensor(0);
  const TensorTypeNode& x = ctx.tensor(1);
  const TensorTypeNode& y = ctx.tensor(2);
  ops::RequireDType(ctx, cond.dtype, DTypeClass::kBool, "condition");
  if (x.dtype != y.dtype)
    ctx.Fail(StrCat("x and y dtypes differ: ", DTypeName(x.dtype), " vs ", DTypeName(y.dtype)));
  Shape shape = ctx.BroadcastShapes(ctx.BroadcastShapes(cond.shape, x.shape), y.shape);
  return TensorType(std::move(shape), x.dtype);
}

void WhereKernel(const std::vector<Tensor>& in, Tensor& out) {
  const std::vector<int64_t>& shape = out.shape();
  ops::BroadcastIndex ic(in[0].shape(), shape), ix(in[1].shape(), shape), iy(in[2].shape(), shape);
  const bool* cond = in[0].data<bool>();
  DispatchDType(out.dtype(), [&]<typename T>() {
    const T* x = in[1].data<T>();
    const T* y = in[2].data<T>();
    T* z = out.data<T>();
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < out.numel(); ++i) {
      ops::Unravel(i, shape, idx);
      z[i] = cond[ic.Offset(idx)] ? x[ix.Offset(idx)] : y[iy.Offset(idx)];
    }
  });
}

}  // namespace

void RegisterBinaryOps(OpRegistry& r) {
  using loop::BinaryOp;
  using loop::Expr;
  constexpr DTypeClass kNum = DTypeClass::kNumeric;
  RegisterBinary<false>(
      r, "add", "a + b", kNum, [](auto a, auto b) { return WrapAdd(a, b); },
      BinaryLowering([](const Expr& a, const Expr& b) { return loop::Add(a, b); }));
  RegisterBinary<false>(
      r, "sub", "a - b", kNum, [](auto a, auto b) { return WrapSub(a, b); },
      BinaryLowering([](const Expr& a, const Expr& b) { return loop::Sub(a, b); }));
  RegisterBinary<false>(
      r, "mul", "a * b", kNum, [](auto a, auto b) { return WrapMul(a, b); },
      BinaryLowering([](const Expr& a, const Expr& b) { return loop::Mul(a, b); }));
  RegisterBinary<false>(
      r, "div", "a / b; integers truncate toward zero, x / 0 == 0", kNum,
      [](auto a, auto b) { return Divide(a, b); }, BinaryLowering([](const Expr& a, const Expr& b) {
        return IsFloat(a->dtype) ? loop::Div(a, b) : LowerIntDivide(a, b);
      }));
  RegisterBinary<false>(
      r, "pow", "a ** b", kNum, [](auto a, auto b) { return Power(a, b); },
      [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
         const std::vector<Type>& out_types) { return LowerPower(ctx, in, out_types); });
  // The loop IR's max/min are Larger/Smaller: NaN in either operand propagates.
  RegisterBinary<false>(
      r, "maximum", "elementwise max; NaN propagates", kNum,
      [](auto a, auto b) { return Larger(a, b); },
      BinaryLowering([](const Expr& a, const Expr& b) { return loop::Max(a, b); }));
  RegisterBinary<false>(
      r, "minimum", "elementwise min; NaN propagates", kNum,
      [](auto a, auto b) { return Smaller(a, b); },
      BinaryLowering([](const Expr& a, const Expr& b) { return loop::Min(a, b); }));

  // ONNX PRelu: x < 0 ? slope * x : x, with the slope broadcast against x (per channel,
  // typically). Integer products wrap; unsigned values pass through.
  RegisterBinary<false>(
      r, "prelu", "x < 0 ? slope * x : x; slope broadcasts", DTypeClass::kSignedOrFloat,
      [](auto x, auto slope) { return PRelu(x, slope); },
      BinaryLowering([](const Expr& x, const Expr& slope) {
        return loop::Select(Cmp(BinaryOp::kLT, x, C(0, x)), loop::Mul(slope, x), x);
      }));

  // ONNX BitShift, on unsigned integers: a shift by the bit width or more gives 0.
  RegisterBinary<false>(
      r, "shift_left", "a << b; 0 when b >= the bit width", DTypeClass::kUnsigned,
      [](auto a, auto b) { return ShiftBits<true>(a, b); },
      BinaryLowering(
          [](const Expr& a, const Expr& b) { return loop::MakeBinary(BinaryOp::kShl, a, b); }));
  RegisterBinary<false>(
      r, "shift_right", "a >> b (logical); 0 when b >= the bit width", DTypeClass::kUnsigned,
      [](auto a, auto b) { return ShiftBits<false>(a, b); },
      BinaryLowering(
          [](const Expr& a, const Expr& b) { return loop::MakeBinary(BinaryOp::kShr, a, b); }));

  // The loop IR's comparisons are C++'s: false with a NaN operand, except !=.
  constexpr DTypeClass kAny = DTypeClass::kAny;
  RegisterBinary<true>(
      r, "equal", "a == b", kAny, [](auto a, auto b) { return a == b; },
      ComparisonLowering(BinaryOp::kEQ));
  RegisterBinary<true>(
      r, "not_equal", "a != b", kAny, [](auto a, auto b) { return a != b; },
      ComparisonLowering(BinaryOp::kNE));
  RegisterBinary<true>(
      r, "less", "a < b", kAny, [](auto a, auto b) { return a < b; },
      ComparisonLowering(BinaryOp::kLT));
  RegisterBinary<true>(
      r, "less_equal", "a <= b", kAny, [](auto a, auto b) { return a <= b; },
      ComparisonLowering(BinaryOp::kLE));
  RegisterBinary<true>(
      r, "greater", "a > b", kAny, [](auto a, auto b) { return a > b; },
      ComparisonLowering(BinaryOp::kGT));
  RegisterBinary<true>(
      r, "greater_equal", "a >= b", kAny, [](auto a, auto b) { return a >= b; },
      ComparisonLowering(BinaryOp::kGE));

  constexpr DTypeClass kBool = DTypeClass::kBool;
  RegisterBinary<false>(
      r, "and", "logical and", kBool, [](auto a, auto b) { return a && b; },
      BinaryLowering(
          [](const Expr& a, const Expr& b) { return loop::MakeBinary(BinaryOp::kAnd, a, b); }));
  RegisterBinary<false>(
      r, "or", "logical or", kBool, [](auto a, auto b) { return a || b; },
      BinaryLowering(
          [](const Expr& a, const Expr& b) { return loop::MakeBinary(BinaryOp::kOr, a, b); }));
  RegisterBinary<false>(
      r, "xor", "logical xor", kBool, [](auto a, auto b) { return (a != 0) != (b != 0); },
      BinaryLowering([](const Expr& a, const Expr& b) { return Cmp(BinaryOp::kNE, a, b); }));

  r.Register(OpDef{
      .name = "mod",
      .doc = "remainder; fmod=0: sign of the divisor (Python), fmod=1: C fmod; integer x % 0 == 0",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"fmod", AttrKind::kInt, int64_t{0},
                 [](const AttrValue& v) -> std::string {
                   int64_t f = std::get<int64_t>(v);
                   return f == 0 || f == 1 ? "" : "must be 0 or 1";
                 }}},
      .pattern = OpPattern::kBroadcast,
      .type_rel =
          [](TypeRelContext& ctx) {
            Shape shape = BroadcastSameDType(ctx, DTypeClass::kNumeric);
            return TensorType(std::move(shape), ctx.tensor(0).dtype);
          },
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            bool c_fmod = attrs.GetInt("fmod") == 1;
            BinaryKernel<false>(in, out[0],
                                [c_fmod](auto a, auto b) { return Remainder(a, b, c_fmod); });
          },
      .lower =
          [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>& out_types) {
            bool c_fmod = attrs.GetInt("fmod") == 1;
            return std::vector<LTensor>{LowerBroadcastBinary(
                ctx, in, out_types.at(0), [c_fmod](const loop::Expr& a, const loop::Expr& b) {
                  return IsFloat(a->dtype) ? LowerFloatRemainder(a, b, c_fmod)
                                           : LowerIntRemainder(a, b, c_fmod);
                })};
          },
  });

  r.Register(OpDef{
      .name = "where",
      .doc = "condition ? x : y, broadcasting all three",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {},
      .pattern = OpPattern::kBroadcast,
      .type_rel = WhereRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs&,
                       std::vector<Tensor>& out) { WhereKernel(in, out[0]); },
      .lower =
          [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
             const std::vector<Type>& out_types) {
            const TensorTypeNode* tt = AsTensor(out_types.at(0));
            const std::vector<loop::Expr> shape = ctx.ShapeExpr(tt->shape);
            return std::vector<LTensor>{
                LTensor{tt->dtype, shape, [in, shape](const std::vector<loop::Expr>& idx) {
                          std::vector<loop::Expr> v = ReadBroadcast(in, idx, shape);
                          return loop::Select(v[0], v[1], v[2]);
                        }}};
          },
  });
}

}  // namespace kiln
