// Elementwise unary ops: the math functions, `cast` and `clip`.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::DTypeClass;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

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
// otherwise, so it also keeps -0 (ir/loop/binary_ops.def, jit/llvm_emit_expr.cc).
Expr LowerRelu(const Expr& x) {
  return loop::Max(x, C(0, x));
}

// Zeros and NaN map to themselves (the innermost `x`); unsigned values are never negative.
Expr LowerSign(const Expr& x) {
  Expr pos = loop::MakeBinary(loop::BinaryOp::kGT, x, C(0, x));
  if (IsUnsignedInteger(x->dtype)) return loop::Select(pos, C(1, x), x);
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
    {"asin", DTypeClass::kFloat, [](double x) { return std::asin(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kAsin, x); }},
    {"acos", DTypeClass::kFloat, [](double x) { return std::acos(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kAcos, x); }},
    {"atan", DTypeClass::kFloat, [](double x) { return std::atan(x); }, nullptr,
     [](const Expr& x) { return Fn(loop::Intrinsic::kAtan, x); }},
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

// ---- Float functions with parameters, and the composed math functions ----
//
// The loop IR has no expm1, log1p or hyperbolic/inverse functions, so the lowerings below
// compose them from exp, log, sqrt and tanh in forms that stay accurate to a few ulp where
// the textbook formula cancels (near 0) or overflows early (large |x|). The references use
// the <cmath> functions in double, so the tests compare the two forms.

// e^x - 1 without the cancellation of exp(x) - 1 near 0 (Kahan: (u - 1) * x / log(u) with
// u = e^x rounded, exact where u == 1; u == 0 is x = -inf or an underflow, where it is -1).
Expr Expm1(const Expr& x) {
  Expr u = Fn(loop::Intrinsic::kExp, x);
  Expr um1 = loop::Sub(u, C(1, x));
  Expr general = loop::Div(loop::Mul(um1, x), Fn(loop::Intrinsic::kLog, u));
  Expr eq1 = loop::MakeBinary(loop::BinaryOp::kEQ, u, C(1, x));
  Expr eq0 = loop::MakeBinary(loop::BinaryOp::kEQ, u, C(0, x));
  // u == +inf: (inf * x) / inf would be NaN; e^x - 1 is inf there too.
  Expr inf = loop::MakeBinary(loop::BinaryOp::kEQ, u, C(kInfinity, x));
  return loop::Select(eq1, x, loop::Select(eq0, C(-1, x), loop::Select(inf, u, general)));
}

// log(1 + u) for u >= -1 without the cancellation of log(1 + u) near 0 (Goldberg's theorem 4:
// log(w) * u / (w - 1) with w = 1 + u rounded, exact where w == 1). u == +inf gives +inf.
Expr Log1p(const Expr& u) {
  Expr w = loop::Add(C(1, u), u);
  Expr general = loop::Mul(Fn(loop::Intrinsic::kLog, w), loop::Div(u, loop::Sub(w, C(1, u))));
  Expr eq1 = loop::MakeBinary(loop::BinaryOp::kEQ, w, C(1, u));
  Expr inf = loop::MakeBinary(loop::BinaryOp::kEQ, u, C(kInfinity, u));
  return loop::Select(eq1, u, loop::Select(inf, u, general));
}

Expr Lt(const Expr& a, const Expr& b) {
  return loop::MakeBinary(loop::BinaryOp::kLT, a, b);
}
Expr Gt(const Expr& a, const Expr& b) {
  return loop::MakeBinary(loop::BinaryOp::kGT, a, b);
}
// -x where x < 0, else x: the sign of an odd function's result computed on |x|.
Expr WithSignOf(const Expr& x, const Expr& r) {
  return loop::Select(Lt(x, C(0, x)), LowerNeg(r), r);
}

// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): e^x overflows for large x, where the result is x.
double SoftplusRef(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
Expr LowerSoftplus(const Expr& x) {
  Expr pos = Gt(x, C(0, x));
  Expr e = Fn(loop::Intrinsic::kExp, loop::Select(pos, LowerNeg(x), x));
  return loop::Add(loop::Select(pos, x, C(0, x)), Log1p(e));
}

// clamp(alpha * x + beta, 0, 1), written so that NaN passes through.
double HardSigmoidRef(double x, double alpha, double beta) {
  double v = alpha * x + beta;
  return v < 0 ? 0.0 : v > 1 ? 1.0 : v;
}
Expr LowerHardSigmoid(const Expr& x, double alpha, double beta) {
  Expr v = loop::Add(loop::Mul(C(alpha, x), x), C(beta, x));
  return loop::Select(Lt(v, C(0, v)), C(0, v), loop::Select(Gt(v, C(1, v)), C(1, v), v));
}

// sinh(|x|) for |x| > 1 as h * (h / 2) - 1 / (2 h^2) with h = e^(|x|/2), which overflows
// only where sinh does; below that, 2t / (1 - t^2) with t = tanh(x / 2), where 1 - t^2 >= 0.78
// and nothing cancels.
Expr LowerSinh(const Expr& x) {
  Expr a = Fn(loop::Intrinsic::kFabs, x);
  Expr h = Fn(loop::Intrinsic::kExp, loop::Mul(a, C(0.5, x)));
  Expr big =
      loop::Sub(loop::Mul(h, loop::Mul(h, C(0.5, x))), loop::Div(C(0.5, x), loop::Mul(h, h)));
  Expr t = Fn(loop::Intrinsic::kTanh, loop::Mul(x, C(0.5, x)));
  Expr small = loop::Div(loop::Mul(C(2, x), t), loop::Sub(C(1, x), loop::Mul(t, t)));
  return loop::Select(Gt(a, C(1, x)), WithSignOf(x, big), small);
}

// cosh(x) = h * (h / 2) + 1 / (2 h^2), h = e^(|x|/2): a sum of positive terms.
Expr LowerCosh(const Expr& x) {
  Expr a = Fn(loop::Intrinsic::kFabs, x);
  Expr h = Fn(loop::Intrinsic::kExp, loop::Mul(a, C(0.5, x)));
  return loop::Add(loop::Mul(h, loop::Mul(h, C(0.5, x))), loop::Div(C(0.5, x), loop::Mul(h, h)));
}

// Beyond 2^28, 1 + a^2 rounds to a^2 in every float format and the log(2a) form is exact;
// below it a^2 cannot overflow.
constexpr double kHugeArg = 268435456.0;

// asinh(|x|) = log1p(a + a^2 / (1 + sqrt(1 + a^2))), odd.
Expr LowerAsinh(const Expr& x) {
  Expr a = Fn(loop::Intrinsic::kFabs, x);
  Expr a2 = loop::Mul(a, a);
  Expr u = loop::Add(
      a, loop::Div(a2, loop::Add(C(1, x), Fn(loop::Intrinsic::kSqrt, loop::Add(C(1, x), a2)))));
  Expr huge = loop::Add(Fn(loop::Intrinsic::kLog, a), C(std::numbers::ln2, x));
  Expr r = loop::Select(Gt(a, C(kHugeArg, x)), huge, Log1p(u));
  return WithSignOf(x, r);
}

// acosh(x) = log1p(m + sqrt(m (x + 1))), m = x - 1 (exact for x in [1, 2]).
Expr LowerAcosh(const Expr& x) {
  Expr m = loop::Sub(x, C(1, x));
  Expr u = loop::Add(m, Fn(loop::Intrinsic::kSqrt, loop::Mul(m, loop::Add(x, C(1, x)))));
  Expr huge = loop::Add(Fn(loop::Intrinsic::kLog, x), C(std::numbers::ln2, x));
  // x < 1 is NaN; stated, since for x <= -1 the product m (x + 1) is not negative.
  Expr nan = C(std::numeric_limits<double>::quiet_NaN(), x);
  return loop::Select(Lt(x, C(1, x)), nan, loop::Select(Gt(x, C(kHugeArg, x)), huge, Log1p(u)));
}

// atanh(x) = log1p(2a / (1 - a)) / 2, odd; a == 1 gives +inf, a > 1 NaN (log of a negative).
Expr LowerAtanh(const Expr& x) {
  Expr a = Fn(loop::Intrinsic::kFabs, x);
  Expr u = loop::Div(loop::Mul(C(2, x), a), loop::Sub(C(1, x), a));
  return WithSignOf(x, loop::Mul(C(0.5, x), Log1p(u)));
}

// A float-only elementwise function of x and the op's float attributes, in schema order.
struct ParamUnaryOp {
  const char* name;
  const char* doc;
  std::vector<std::pair<const char*, double>> params;  // attribute name and default
  double (*ref)(double x, const std::vector<double>& p);
  Expr (*lower)(const Expr& x, const std::vector<double>& p);
};

constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

const std::vector<ParamUnaryOp>& ParamUnaryOps() {
  using P = std::vector<double>;
  static const std::vector<ParamUnaryOp> ops = {
      {"leaky_relu",
       "x < 0 ? alpha * x : x",
       {{"alpha", 0.01}},
       [](double x, const P& p) { return x < 0 ? p[0] * x : x; },
       [](const Expr& x, const P& p) {
         return loop::Select(Lt(x, C(0, x)), loop::Mul(C(p[0], x), x), x);
       }},
      {"elu",
       "x < 0 ? alpha * (e^x - 1) : x",
       {{"alpha", 1.0}},
       [](double x, const P& p) { return x < 0 ? p[0] * std::expm1(x) : x; },
       [](const Expr& x, const P& p) {
         return loop::Select(Lt(x, C(0, x)), loop::Mul(C(p[0], x), Expm1(x)), x);
       }},
      {"selu",
       "gamma * (x <= 0 ? alpha * (e^x - 1) : x)",
       {{"alpha", kSeluAlpha}, {"gamma", kSeluGamma}},
       [](double x, const P& p) { return p[1] * (x <= 0 ? p[0] * std::expm1(x) : x); },
       [](const Expr& x, const P& p) {
         Expr neg = loop::Mul(C(p[0], x), Expm1(x));
         return loop::Mul(C(p[1], x), loop::Select(Gt(x, C(0, x)), x, neg));
       }},
      {"celu",
       "x > 0 ? x : alpha * (e^(x / alpha) - 1); alpha != 0",
       {{"alpha", 1.0}},
       [](double x, const P& p) { return x > 0 ? x : p[0] * std::expm1(x / p[0]); },
       [](const Expr& x, const P& p) {
         Expr neg = loop::Mul(C(p[0], x), Expm1(loop::Div(x, C(p[0], x))));
         return loop::Select(Gt(x, C(0, x)), x, neg);
       }},
      {"softplus",
       "log(1 + e^x)",
       {},
       [](double x, const P&) { return SoftplusRef(x); },
       [](const Expr& x, const P&) { return LowerSoftplus(x); }},
      {"softsign",
       "x / (1 + |x|)",
       {},
       [](double x, const P&) { return x / (1.0 + std::fabs(x)); },
       [](const Expr& x, const P&) {
         return loop::Div(x, loop::Add(C(1, x), Fn(loop::Intrinsic::kFabs, x)));
       }},
      {"hard_sigmoid",
       "clamp(alpha * x + beta, 0, 1)",
       {{"alpha", 0.2}, {"beta", 0.5}},
       [](double x, const P& p) { return HardSigmoidRef(x, p[0], p[1]); },
       [](const Expr& x, const P& p) { return LowerHardSigmoid(x, p[0], p[1]); }},
      {"hard_swish",
       "x * clamp(x / 6 + 1 / 2, 0, 1)",
       {},
       [](double x, const P&) { return x * HardSigmoidRef(x, 1.0 / 6, 0.5); },
       [](const Expr& x, const P&) { return loop::Mul(x, LowerHardSigmoid(x, 1.0 / 6, 0.5)); }},
      {"mish",
       "x * tanh(softplus(x))",
       {},
       [](double x, const P&) { return x * std::tanh(SoftplusRef(x)); },
       [](const Expr& x, const P&) {
         return loop::Mul(x, Fn(loop::Intrinsic::kTanh, LowerSoftplus(x)));
       }},
      {"thresholded_relu",
       "x > alpha ? x : 0",
       {{"alpha", 1.0}},
       [](double x, const P& p) { return x > p[0] ? x : 0.0; },
       [](const Expr& x, const P& p) { return loop::Select(Gt(x, C(p[0], x)), x, C(0, x)); }},
      {"tan",
       "tangent",
       {},
       [](double x, const P&) { return std::tan(x); },
       [](const Expr& x, const P&) {
         return loop::Div(Fn(loop::Intrinsic::kSin, x), Fn(loop::Intrinsic::kCos, x));
       }},
      {"sinh",
       "hyperbolic sine",
       {},
       [](double x, const P&) { return std::sinh(x); },
       [](const Expr& x, const P&) { return LowerSinh(x); }},
      {"cosh",
       "hyperbolic cosine",
       {},
       [](double x, const P&) { return std::cosh(x); },
       [](const Expr& x, const P&) { return LowerCosh(x); }},
      {"asinh",
       "inverse hyperbolic sine",
       {},
       [](double x, const P&) { return std::asinh(x); },
       [](const Expr& x, const P&) { return LowerAsinh(x); }},
      {"acosh",
       "inverse hyperbolic cosine; NaN below 1",
       {},
       [](double x, const P&) { return std::acosh(x); },
       [](const Expr& x, const P&) { return LowerAcosh(x); }},
      {"atanh",
       "inverse hyperbolic tangent; +-inf at +-1, NaN beyond",
       {},
       [](double x, const P&) { return std::atanh(x); },
       [](const Expr& x, const P&) { return LowerAtanh(x); }},
  };
  return ops;
}

std::vector<double> ParamValues(const ParamUnaryOp& op, const Attrs& attrs) {
  std::vector<double> p;
  for (const auto& [name, def] : op.params) p.push_back(attrs.GetFloat(name));
  return p;
}

// out[i] = f(in[i]) for a float function: computed in double, stored in the input's dtype.
void ApplyFloat(const Tensor& in, Tensor& out, const std::function<double(double)>& f) {
  DispatchDType(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(false, "no integer kernel for ", DTypeName(in.dtype()));
    } else {
      ops::MapUnary<T, T>(in, out, [&](ops::ComputeT<T> x) { return f(static_cast<double>(x)); });
    }
  });
}

// isinf with the ONNX flags: which of +inf and -inf count.
bool IsInfRef(double x, bool positive, bool negative) {
  return (positive && x == kInfinity) || (negative && x == -kInfinity);
}

// out[i] = pred(in[i]) for a float input and a bool output.
void ApplyFloatPredicate(const Tensor& in, Tensor& out, const std::function<bool(double)>& pred) {
  DispatchDType(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      KILN_CHECK(false, "no integer kernel for ", DTypeName(in.dtype()));
    } else {
      ops::MapUnary<T, bool>(in, out,
                             [&](ops::ComputeT<T> x) { return pred(static_cast<double>(x)); });
    }
  });
}

Type BoolOfFloat(TypeRelContext& ctx) {
  ops::RequireDType(ctx, ctx.tensor(0).dtype, DTypeClass::kFloat);
  return TensorType(ctx.tensor(0).shape, DType::kBool);
}

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

  for (const ParamUnaryOp& m : ParamUnaryOps()) {
    std::vector<AttrSpec> attrs;
    for (const auto& [name, def] : m.params) attrs.push_back({name, AttrKind::kFloat, def, NotNaN});
    // celu divides by alpha.
    if (std::string(m.name) == "celu")
      attrs[0].check = [](const AttrValue& v) -> std::string {
        double a = std::get<double>(v);
        return std::isnan(a) ? "must not be NaN" : a == 0 ? "must not be 0" : "";
      };
    r.Register(OpDef{
        .name = m.name,
        .doc = m.doc,
        .attrs = std::move(attrs),
        .pattern = OpPattern::kElementwise,
        .type_rel = [](TypeRelContext& ctx) { return SameTypeIf(ctx, DTypeClass::kFloat); },
        .ref_kernel =
            [&m](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
              std::vector<double> p = ParamValues(m, attrs);
              ApplyFloat(in[0], out[0], [&](double x) { return m.ref(x, p); });
            },
        .lower =
            [&m](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
                 const std::vector<Type>&) {
              std::vector<double> p = ParamValues(m, attrs);
              auto f = m.lower;
              DType t = in[0].dtype;
              LTensor x = in[0];
              return std::vector<LTensor>{
                  lower::Map(x, t, [x, f, p, t](const std::vector<Expr>& idx) {
                    return loop::Cast(t, f(loop::Cast(ComputeDType(t), x.at(idx)), p));
                  })};
            },
    });
  }

  r.Register(OpDef{
      .name = "isnan",
      .doc = "x is NaN; bool result",
      .attrs = {},
      .pattern = OpPattern::kElementwise,
      .type_rel = BoolOfFloat,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
            ApplyFloatPredicate(in[0], out[0], [](double x) { return std::isnan(x); });
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs&,
             const std::vector<Type>&) {
            LTensor x = in[0];
            return std::vector<LTensor>{
                lower::Map(x, DType::kBool, [x](const std::vector<Expr>& idx) {
                  Expr v = x.at(idx);  // a load: repeating it costs nothing
                  return loop::MakeBinary(loop::BinaryOp::kNE, v, v);
                })};
          },
  });

  r.Register(OpDef{
      .name = "isinf",
      .doc = "x is +inf (detect_positive) or -inf (detect_negative); bool result",
      .attrs = {{"detect_positive", AttrKind::kBool, true},
                {"detect_negative", AttrKind::kBool, true}},
      .pattern = OpPattern::kElementwise,
      .type_rel = BoolOfFloat,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            bool pos = attrs.GetBool("detect_positive"), neg = attrs.GetBool("detect_negative");
            ApplyFloatPredicate(in[0], out[0],
                                [pos, neg](double x) { return IsInfRef(x, pos, neg); });
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) {
            bool pos = attrs.GetBool("detect_positive"), neg = attrs.GetBool("detect_negative");
            LTensor x = in[0];
            // Infinities survive the cast to f32, so comparing in ComputeDType is exact.
            return std::vector<LTensor>{
                lower::Map(x, DType::kBool, [x, pos, neg](const std::vector<Expr>& idx) {
                  Expr v = loop::Cast(ComputeDType(x.dtype), x.at(idx));
                  Expr r = loop::IntImm(0, DType::kBool);
                  if (pos) r = loop::MakeBinary(loop::BinaryOp::kEQ, v, C(kInfinity, v));
                  if (neg) {
                    Expr n = loop::MakeBinary(loop::BinaryOp::kEQ, v, C(-kInfinity, v));
                    r = pos ? loop::MakeBinary(loop::BinaryOp::kOr, r, n) : n;
                  }
                  return r;
                })};
          },
  });

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
