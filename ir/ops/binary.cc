// Broadcasting binary ops (arithmetic, comparisons, logic) and `where`.
//
// Integer arithmetic wraps modulo 2^n, as NumPy and the generated kernels do, instead of
// being undefined on overflow: it is done in uint64 and narrowed with static_cast.
#include <cmath>
#include <limits>
#include <type_traits>

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
void RegisterBinary(OpRegistry& r, const char* name, const char* doc, DTypeClass allowed, Fn fn) {
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
  constexpr DTypeClass kNum = DTypeClass::kNumeric;
  RegisterBinary<false>(r, "add", "a + b", kNum, [](auto a, auto b) { return WrapAdd(a, b); });
  RegisterBinary<false>(r, "sub", "a - b", kNum, [](auto a, auto b) { return WrapSub(a, b); });
  RegisterBinary<false>(r, "mul", "a * b", kNum, [](auto a, auto b) { return WrapMul(a, b); });
  RegisterBinary<false>(r, "div", "a / b; integers truncate toward zero, x / 0 == 0", kNum,
                        [](auto a, auto b) { return Divide(a, b); });
  RegisterBinary<false>(r, "pow", "a ** b", kNum, [](auto a, auto b) { return Power(a, b); });
  RegisterBinary<false>(r, "maximum", "elementwise max; NaN propagates", kNum,
                        [](auto a, auto b) { return Larger(a, b); });
  RegisterBinary<false>(r, "minimum", "elementwise min; NaN propagates", kNum,
                        [](auto a, auto b) { return Smaller(a, b); });

  constexpr DTypeClass kAny = DTypeClass::kAny;
  RegisterBinary<true>(r, "equal", "a == b", kAny, [](auto a, auto b) { return a == b; });
  RegisterBinary<true>(r, "not_equal", "a != b", kAny, [](auto a, auto b) { return a != b; });
  RegisterBinary<true>(r, "less", "a < b", kAny, [](auto a, auto b) { return a < b; });
  RegisterBinary<true>(r, "less_equal", "a <= b", kAny, [](auto a, auto b) { return a <= b; });
  RegisterBinary<true>(r, "greater", "a > b", kAny, [](auto a, auto b) { return a > b; });
  RegisterBinary<true>(r, "greater_equal", "a >= b", kAny, [](auto a, auto b) { return a >= b; });

  constexpr DTypeClass kBool = DTypeClass::kBool;
  RegisterBinary<false>(r, "and", "logical and", kBool, [](auto a, auto b) { return a && b; });
  RegisterBinary<false>(r, "or", "logical or", kBool, [](auto a, auto b) { return a || b; });
  RegisterBinary<false>(r, "xor", "logical xor", kBool,
                        [](auto a, auto b) { return (a != 0) != (b != 0); });

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
  });
}

}  // namespace kiln
