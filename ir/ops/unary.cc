// Elementwise unary ops: the math functions, `cast` and `clip`.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::DTypeClass;

// Integer results are computed in int64 and narrowed by static_cast, which wraps modulo 2^n
// (C++20), so abs/neg of the most negative value wrap as they do in NumPy instead of
// overflowing.
int64_t WrapNeg(int64_t x) {
  return static_cast<int64_t>(0 - static_cast<uint64_t>(x));
}

// Half away from zero is std::round; ONNX Round wants half to even, and std::nearbyint would
// depend on the thread's rounding mode.
double RoundHalfEven(double x) {
  double r = std::floor(x);
  double frac = x - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return std::copysign(r, x);  // keeps -0.0 for -0.4, as NumPy does
}

double GeluErf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}
double GeluTanh(double x) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
  return 0.5 * x * (1.0 + std::tanh(kC * (x + 0.044715 * x * x * x)));
}

// ---- Lowering (ir/lower_api.h) ----
//
// Float math on f16/bf16 is done in f32, as the reference does (ComputeT), and the result is
// cast back to the op's dtype; f32 is computed in f32 and f64 in f64. The reference computes
// every float function in double, so for f32 the transcendental functions agree to about an
// ulp rather than bit for bit; the exact ones (neg, abs, floor, relu, ...) agree exactly.

using loop::Expr;

DType ComputeDType(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 ? DType::kFloat32 : t;
}

// A constant of x's dtype.
Expr C(double v, const Expr& like) {
  return lower::Const(v, like->dtype);
}

Expr Fn(loop::Intrinsic f, const Expr& x) {
  return loop::Call(f, {x});
}

Expr LowerNeg(const Expr& x) {
  // x * -1 rather than 0 - x: it negates zeros too (-(+0) is -0), as the reference's -x does.
  // Integers: 0 - x wraps, so -MIN == MIN.
  return IsFloat(x->dtype) ? loop::Mul(x, C(-1, x)) : loop::Sub(C(0, x), x);
}

Expr LowerSigmoid(const Expr& x) {
  return loop::Div(C(1, x), loop::Add(C(1, x), Fn(loop::Intrinsic::kExp, LowerNeg(x))));
}

// The reference's `x < 0 ? 0 : x`: the loop IR's max propagates NaN and is `a < b ? b : a`
// otherwise, so it also keeps -0 (ir/loop/binary_ops.def, jit/llvm_codegen.cc).
Expr LowerRelu(const Expr& x) {
  return loop::Max(x, C(0, x));
}

// Zeros and NaN map to themselves (the innermost `x`); unsigned values are never negative.
Expr LowerSign(const Expr& x) {
  Expr pos = loop::MakeBinary(loop::BinaryOp::kGT, x, C(0, x));
  if (x->dtype == DType::kUInt8) return loop::Select(pos, C(1, x), x);
  Expr neg = loop::MakeBinary(loop::BinaryOp::kLT, x, C(0, x));
  return loop::Select(pos, C(1, x), loop::Select(neg, C(-1, x), x));
}

Expr LowerGeluErf(const Expr& x) {
  Expr phi = loop::Add(C(1, x), Fn(loop::Intrinsic::kErf, loop::Div(x, C(std::numbers::sqrt2, x))));
  return loop::Mul(loop::Mul(C(0.5, x), x), phi);
}

Expr LowerGeluTanh(const Expr& x) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi), as GeluTanh
  Expr cube = loop::Mul(loop::Mul(loop::Mul(C(0.044715, x), x), x), x);
  Expr t = Fn(loop::Intrinsic::kTanh, loop::Mul(C(kC, x), loop::Add(x, cube)));
  return loop::Mul(loop::Mul(C(0.5, x), x), loop::Add(C(1, x), t));
}

// out[i] = f(in[i]), with float inputs computed in ComputeDType.
LTensor MapUnary(const LTensor& in, Expr (*f)(const Expr&)) {
  DType t = in.dtype;
  LTensor x = in;
  return lower::Map(in, t, [x, f, t](const std::vector<Expr>& idx) {
    return loop::Cast(t, f(loop::Cast(ComputeDType(t), x.at(idx))));
  });
}

// One row per plain unary op. `on_int` serves the integer (and bool) dtypes that `allowed`
// admits and is null when there are none; `on_float` is null for bool-only ops. `lower` gets
// the element in ComputeDType and serves every dtype that `allowed` admits.
struct UnaryMathOp {
  const char* name;
  DTypeClass allowed;
  double (*on_float)(double);
  int64_t (*on_int)(int64_t);
  Expr (*lower)(const Expr& x);
};

const UnaryMathOp kUnaryMathOps[] = {
    {"neg", DTypeClass::kSignedOrFloat, [](double x) { return -x; }, WrapNeg, LowerNeg},
    // The loop IR's fabs of a signed integer wraps like WrapNeg (llvm.abs, MIN -> MIN).
    {"abs", DTypeClass::kSignedOrFloat, [](double x) { return std::fabs(x); },
     [](int64_t x) { return x < 0 ? WrapNeg(x) : x; },
     [](const Expr& x) { return Fn(loop::Intrinsic::kFabs, x); }},
    {"exp", DTypeClass::kFloat, [](double x) { return std::exp(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kExp, x); }},
    {"log", DTypeClass::kFloat, [](double x) { return std::log(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kLog, x); }},
    {"sqrt", DTypeClass::kFloat, [](double x) { return std::sqrt(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kSqrt, x); }},
    {"rsqrt", DTypeClass::kFloat, [](double x) { return 1.0 / std::sqrt(x); }, nullptr,
     [](const Expr& x) { return loop::Div(C(1, x), Fn(loop::Intrinsic::kSqrt, x)); }},
    {"reciprocal", DTypeClass::kFloat, [](double x) { return 1.0 / x; }, nullptr,
     [](const Expr& x) { return loop::Div(C(1, x), x); }},
    {"tanh", DTypeClass::kFloat, [](double x) { return std::tanh(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kTanh, x); }},
    {"sigmoid", DTypeClass::kFloat, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, nullptr,
     LowerSigmoid},
    // `x < 0 ? 0 : x` rather than max(x, 0) so that NaN stays NaN.
    {"relu", DTypeClass::kSignedOrFloat, [](double x) { return x < 0 ? 0.0 : x; },
     [](int64_t x) { return x < 0 ? int64_t{0} : x; }, LowerRelu},
    {"erf", DTypeClass::kFloat, [](double x) { return std::erf(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kErf, x); }},
    {"sin", DTypeClass::kFloat, [](double x) { return std::sin(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kSin, x); }},
    {"cos", DTypeClass::kFloat, [](double x) { return std::cos(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kCos, x); }},
    {"floor", DTypeClass::kFloat, [](double x) { return std::floor(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kFloor, x); }},
    {"ceil", DTypeClass::kFloat, [](double x) { return std::ceil(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kCeil, x); }},
    {"round", DTypeClass::kFloat, RoundHalfEven, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kRoundEven, x); }},
    // Zeros (and NaN) map to themselves.
    {"sign", DTypeClass::kNumeric, [](double x) { return x > 0   ? 1.0
                                                         : x < 0 ? -1.0
                                                                 : x; },
     [](int64_t x) { return int64_t{x > 0} - int64_t{x < 0}; }, LowerSign},
    {"not", DTypeClass::kBool, nullptr, [](int64_t x) { return int64_t{x == 0}; },
     [](const Expr& x) { return loop::Not(x); }},
};

Type SameTypeIf(TypeRelContext& ctx, DTypeClass allowed) {
  ops::RequireDType(ctx, ctx.tensor(0).dtype, allowed);
  return ctx.arg(0);
}

// Floats are computed in double (exact for f64, correctly rounded enough for the rest);
// integers and bool in int64.
void ApplyUnary(const Tensor& in, Tensor& out, double (*on_float)(double),
                int64_t (*on_int)(int64_t)) {
  DispatchDType(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(on_int, "no integer kernel for ", DTypeName(in.dtype()));
      ops::MapUnary<T, T>(in, out, [&](T x) { return on_int(static_cast<int64_t>(x)); });
    } else {
      KILN_CHECK(on_float, "no float kernel for ", DTypeName(in.dtype()));
      ops::MapUnary<T, T>(in, out,
                          [&](ops::ComputeT<T> x) { return on_float(static_cast<double>(x)); });
    }
  });
}

// Float -> integer: truncates toward zero like a C++ conversion. The cases where that
// conversion is undefined are defined here: NaN gives 0, and values out of range saturate
// to the type's limits.
template <typename To>
To SaturatingFromDouble(double d) {
  if (std::isnan(d)) return To{0};
  double t = std::trunc(d);
  constexpr double kLo = static_cast<double>(std::numeric_limits<To>::min());  // exact: -2^k or 0
  const double kHiExclusive = std::ldexp(1.0, std::numeric_limits<To>::digits);
  if (t < kLo) return std::numeric_limits<To>::min();
  if (t >= kHiExclusive) return std::numeric_limits<To>::max();
  return static_cast<To>(t);
}

template <typename From>
double ToDouble(From v) {
  if constexpr (ops::kIsHalf<From>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

template <typename To, typename From>
To CastValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_integral_v<From>)
      return v != From{0};
    else
      return ToDouble(v) != 0.0;  // NaN is nonzero, so true
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    // Integer to integer directly, so int64 values beyond 2^53 survive; narrowing wraps.
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<To>) {
    return SaturatingFromDouble<To>(ToDouble(v));
  } else if constexpr (ops::kIsHalf<To>) {
    return To(static_cast<float>(ToDouble(v)));
  } else {
    return static_cast<To>(ToDouble(v));
  }
}

void CastKernel(const Tensor& in, Tensor& out) {
  DispatchDType(in.dtype(), [&]<typename From>() {
    DispatchDType(out.dtype(), [&]<typename To>() {
      const From* x = in.data<From>();
      To* y = out.data<To>();
      for (int64_t i = 0; i < in.numel(); ++i) y[i] = CastValue<To>(x[i]);
    });
  });
}

void ClipKernel(const Tensor& in, const Attrs& attrs, Tensor& out) {
  double lo = attrs.GetFloat("min"), hi = attrs.GetFloat("max");
  DispatchDType(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      // The integer bounds are the integers inside [min, max], clamped to T's range.
      T ilo = SaturatingFromDouble<T>(std::ceil(lo)), ihi = SaturatingFromDouble<T>(std::floor(hi));
      // max then min, as ONNX Clip, so even an empty range [0.2, 0.8] has one answer (0).
      ops::MapUnary<T, T>(in, out, [&](T x) { return std::min(std::max(x, ilo), ihi); });
    } else {
      // Written so that NaN passes through unchanged.
      ops::MapUnary<T, T>(in, out, [&](ops::ComputeT<T> x) {
        double d = static_cast<double>(x);
        return d < lo ? lo : d > hi ? hi : d;
      });
    }
  });
}

// ClipKernel as loop IR. Integers clamp to the same integer bounds; floats compare in
// ComputeDType against the bounds rounded to it, which decides every element as the double
// comparison does: a value below `lo` is at most round(lo), the value that clamping gives.
LTensor LowerClip(const LTensor& in, const Attrs& attrs) {
  double lo = attrs.GetFloat("min"), hi = attrs.GetFloat("max");
  DType t = in.dtype;
  LTensor x = in;
  if (!IsFloat(t)) {
    auto [ilo, ihi] = DispatchDType(t, [&]<typename T>() -> std::pair<int64_t, int64_t> {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        return {SaturatingFromDouble<T>(std::ceil(lo)), SaturatingFromDouble<T>(std::floor(hi))};
      } else {
        KILN_CHECK(false, "clip of ", DTypeName(t));
        return {0, 0};
      }
    });
    return lower::Map(in, t, [x, t, ilo, ihi](const std::vector<Expr>& idx) {
      // max then min, as ClipKernel (an empty range gives the upper bound).
      return loop::Min(loop::Max(x.at(idx), loop::IntImm(ilo, t)), loop::IntImm(ihi, t));
    });
  }
  DType c = ComputeDType(t);
  return lower::Map(in, t, [x, t, c, lo, hi](const std::vector<Expr>& idx) {
    Expr v = loop::Cast(c, x.at(idx));
    Expr r = v;
    // Written like ClipKernel so that NaN passes through; infinite bounds clamp nothing.
    if (hi != std::numeric_limits<double>::infinity())
      r = loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, v, loop::FloatImm(hi, c)),
                       loop::FloatImm(hi, c), r);
    if (lo != -std::numeric_limits<double>::infinity())
      r = loop::Select(loop::MakeBinary(loop::BinaryOp::kLT, v, loop::FloatImm(lo, c)),
                       loop::FloatImm(lo, c), r);
    return loop::Cast(t, r);
  });
}

std::string NotNaN(const AttrValue& v) {
  return std::isnan(std::get<double>(v)) ? "must not be NaN" : "";
}

}  // namespace

void RegisterUnaryOps(OpRegistry& r) {
  for (const UnaryMathOp& m : kUnaryMathOps) {
    r.Register(OpDef{
        .name = m.name,
        .doc = "elementwise math function",
        .attrs = {},
        .pattern = OpPattern::kElementwise,
        .type_rel = [allowed = m.allowed](TypeRelContext& ctx) { return SameTypeIf(ctx, allowed); },
        .ref_kernel =
            [m](const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
              ApplyUnary(in[0], out[0], m.on_float, m.on_int);
            },
        .lower = [f = m.lower](
                     LowerContext&, const std::vector<LTensor>& in, const Attrs&,
                     const std::vector<Type>&) { return std::vector<LTensor>{MapUnary(in[0], f)}; },
    });
  }

  r.Register(OpDef{
      .name = "gelu",
      .doc = "x * Phi(x); approximate = \"none\" (exact, with erf) or \"tanh\"",
      .attrs = {{"approximate", AttrKind::kString, std::string("none"),
                 [](const AttrValue& v) -> std::string {
                   const std::string& s = std::get<std::string>(v);
                   return s == "none" || s == "tanh" ? "" : "must be \"none\" or \"tanh\"";
                 }}},
      .pattern = OpPattern::kElementwise,
      .type_rel = [](TypeRelContext& ctx) { return SameTypeIf(ctx, DTypeClass::kFloat); },
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            bool tanh_form = attrs.GetString("approximate") == "tanh";
            ApplyUnary(in[0], out[0], tanh_form ? GeluTanh : GeluErf, nullptr);
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) {
            bool tanh_form = attrs.GetString("approximate") == "tanh";
            return std::vector<LTensor>{MapUnary(in[0], tanh_form ? LowerGeluTanh : LowerGeluErf)};
          },
  });

  r.Register(OpDef{
      .name = "cast",
      .doc = "converts to `dtype`: float->int truncates (NaN -> 0, out of range saturates), "
             "x->bool is x != 0, bool->number is 0/1",
      .attrs = {{"dtype", AttrKind::kDType, std::nullopt}},
      .pattern = OpPattern::kElementwise,
      .type_rel =
          [](TypeRelContext& ctx) {
            return TensorType(ctx.tensor(0).shape, ctx.attrs().GetDType("dtype"));
          },
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs&,
                       std::vector<Tensor>& out) { CastKernel(in[0], out[0]); },
      // The loop IR's Cast has exactly the semantics documented above (ir/loop/loop.h).
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) {
            DType to = attrs.GetDType("dtype");
            LTensor x = in[0];
            return std::vector<LTensor>{lower::Map(
                x, to,
                [x, to](const std::vector<loop::Expr>& idx) { return loop::Cast(to, x.at(idx)); })};
          },
  });

  constexpr double kInf = std::numeric_limits<double>::infinity();
  r.Register(OpDef{
      .name = "clip",
      .doc = "clamps to [min, max]; integer tensors clamp to the integers in that range",
      .attrs = {{"min", AttrKind::kFloat, -kInf, NotNaN}, {"max", AttrKind::kFloat, kInf, NotNaN}},
      .pattern = OpPattern::kElementwise,
      .type_rel =
          [](TypeRelContext& ctx) {
            double lo = ctx.attrs().GetFloat("min"), hi = ctx.attrs().GetFloat("max");
            if (lo > hi)
              ctx.Fail(StrCat("min ", FormatDouble(lo), " is greater than max ", FormatDouble(hi)));
            return SameTypeIf(ctx, DTypeClass::kNumeric);
          },
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { ClipKernel(in[0], attrs, out[0]); },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) { return std::vector<LTensor>{LowerClip(in[0], attrs)}; },
  });
}

}  // namespace kiln
