// Inline vector math (jit/llvm_vector_math.h): the formulas and why each is accurate.
//
// Every function works lane-wise on a scalar or a vector of f32 or f64 and uses only
// operations every x86-64 target has in vector form (fmuladd becomes an FMA where the CPU has
// one, a multiply and an add otherwise; roundeven is SSE4.1's round). Constants split into a
// "hi" part with trailing zero bits and a "lo" part (Cody-Waite) make `n * hi` exact, so the
// reduced argument keeps full precision without FMA.
#include "jit/llvm_vector_math.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>

#include "llvm/IR/Constants.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/MDBuilder.h"

namespace kiln {
namespace {

// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 (f32) or 32 (f64) significant bits, so n * kLn2Hi is
// exact for every exponent n these functions produce.
constexpr double kLn2HiF32 = 0x1.63p-1;
constexpr double kLn2LoF32 = -2.12194440054713772e-4;
constexpr double kLn2HiF64 = 0x1.62e42feep-1;
constexpr double kLn2LoF64 = 0x1.a39ef35793c76p-33;
constexpr double kLog2E = 0x1.71547652b82fep+0;
// pi / 2 = kPio2_1 + kPio2_2 + kPio2_3 (33, 33 and 53 bits); kPio2_1t = pi/2 - kPio2_1.
constexpr double kPio2_1 = 0x1.921fb544p+0;
constexpr double kPio2_2 = 0x1.0b4611a6p-34;
constexpr double kPio2_3 = 0x1.3198a2e037073p-69;
constexpr double kPio2_1t = 0x1.0b4611a626331p-34;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// sin/cos reduce arguments up to this magnitude inline (n * kPio2_1 stays exact); larger ones
// go to libm, which does the full Payne-Hanek reduction.
constexpr double kTrigInlineLimit = 0x1p20;

// pi/2 and pi/4 as a hi part (pi/2 rounded to f64) plus the rest, so pi/2 - r adds the lost bits
// after the subtraction that cancels.
constexpr double kPio2Hi = 0x1.921fb54442d18p+0;
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPio4Hi = 0x1.921fb54442d18p-1;
constexpr double kPio4Lo = 0x1.1a62633145c07p-55;
constexpr double kTanHalf = 0.54630248984379051326;  // tan(1/2)

// erf(x) for f32, fitted by scripts/fit_erf_f32.py (least squares on Chebyshev nodes, relative
// weight, against double-precision erf and erfc):
//   |x| < 1:  erf(x) = x + x * P(x^2)
//   |x| >= 1: erf(x) = 1 - exp(-x^2) * Q(1/x - 1/2), x clamped to 4 (erf = 1 in f32 beyond 3.92)
constexpr double kErfSmall[] = {0.12837916612625122,   -0.3761262893676758, 0.11283612251281738,
                                -0.026854809373617172, 0.00519005348905921, -0.0008024353883229196,
                                7.898209878476337e-05};
constexpr double kErfBig[] = {0.25539568066596985,  0.4271858334541321,    -0.18552759289741516,
                              0.022850772365927696, 0.06457974761724472,   -0.0876249298453331,
                              0.06308547407388687,  -0.009712192229926586, -0.04957037791609764,
                              0.07357461005449295,  -0.03821760416030884};

// erf(x) for f64 (scripts/fit_erf_f64.py):
//   |x| < 1:  erf(x) = x + x * P(x^2), P erf's Taylor series (2/sqrt(pi) - 1 first), 19 terms:
//             the first omitted one is below 2^-59 at |x| = 1
//   |x| >= 1: erf(x) = 1 - exp(-x^2) * Q(v), v = (1/x - 7/12) / (5/12), x clamped to 6 (erf = 1
//             in f64 beyond 5.93), Q a degree-20 least-squares fit of exp(x^2) erfc(x) weighted
//             by exp(-x^2): the error that reaches erf is erfc's absolute error.
constexpr double kErfSmallF64[] = {
    0.1283791670955126,      -0.37612638903183754,    0.11283791670955126,
    -0.026866170645131252,   0.005223977625442188,    -0.0008548327023450853,
    0.00012055332981789664,  -1.492565035840625e-05,  1.6462114365889248e-06,
    -1.6365844691234924e-07, 1.4807192815879218e-08,  -1.2290555301717928e-09,
    9.422759064650411e-11,   -6.7113668551641105e-12, 4.4632242632864775e-13,
    -2.7835162072109215e-14, 1.6342614095367152e-15,  -9.063970842808673e-17,
    4.763348040515068e-18};
constexpr double kErfBigF64[] = {
    0.28972211632346423,    0.16536269001261458,     -0.030831050508430664,  0.002821131897875684,
    0.0010344322263662403,  -0.0007383867427654397,  0.0002656054667132745,  -5.52864990502565e-05,
    -4.046607748481025e-06, 1.088267641724077e-05,   -6.498123999414931e-06, 2.582929285331981e-06,
    -6.634411066814146e-07, 2.1813463435374006e-09,  1.2660733581849317e-07, -9.692589754692622e-08,
    4.7884765870584536e-08, -1.5985318618507087e-08, 2.7870900732826347e-09, 9.147457819612094e-11,
    -9.462515309831759e-11};
constexpr double kErfBigF64Center = 0.5833333333333334;     // 7/12
constexpr double kErfBigF64HalfWidth = 0.4166666666666667;  // 5/12

// 1/k!, the Taylor coefficients of exp.
double InvFactorial(int k) {
  double f = 1;
  for (int i = 2; i <= k; ++i) f *= i;
  return 1 / f;
}

// Emits lane-wise math on values of one float type (scalar or vector).
class MathEmitter {
 public:
  MathEmitter(llvm::IRBuilder<>& b, llvm::Type* type, const InlineMathTarget& target = {})
      : b_(b),
        type_(type),
        f64_(type->getScalarType()->isDoubleTy()),
        int_(Like(f64_ ? b.getInt64Ty() : b.getInt32Ty())),
        target_(target) {}

  bool f64() const { return f64_; }
  llvm::Type* type() const { return type_; }

  llvm::Value* C(double v) { return llvm::ConstantFP::get(type_, v); }
  llvm::Value* I(int64_t v) { return llvm::ConstantInt::get(int_, v, true); }
  llvm::Type* Like(llvm::Type* scalar) const {
    if (auto* vt = llvm::dyn_cast<llvm::VectorType>(type_))
      return llvm::VectorType::get(scalar, vt->getElementCount());
    return scalar;
  }

  llvm::Value* Add(llvm::Value* a, llvm::Value* b) { return b_.CreateFAdd(a, b); }
  llvm::Value* Sub(llvm::Value* a, llvm::Value* b) { return b_.CreateFSub(a, b); }
  llvm::Value* Mul(llvm::Value* a, llvm::Value* b) { return b_.CreateFMul(a, b); }
  llvm::Value* Div(llvm::Value* a, llvm::Value* b) { return b_.CreateFDiv(a, b); }
  // a * b + c, fused where the CPU has FMA.
  llvm::Value* MulAdd(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type_}, {a, b, c});
  }
  llvm::Value* Unary(llvm::Intrinsic::ID id, llvm::Value* a) {
    return b_.CreateUnaryIntrinsic(id, a);
  }
  llvm::Value* Abs(llvm::Value* a) { return Unary(llvm::Intrinsic::fabs, a); }
  llvm::Value* Round(llvm::Value* a) { return Unary(llvm::Intrinsic::roundeven, a); }
  // minnum/maxnum return the other operand for a NaN: clamps never produce NaN.
  llvm::Value* Clamp(llvm::Value* a, double lo, double hi) {
    llvm::Value* m = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, a, C(lo));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, m, C(hi));
  }
  // The same clamp, but a NaN comes out as NaN: `a < lo ? lo : a` and `a > hi ? hi : a` are
  // one MAXPS and one MINPS with `a` as the operand they return for a NaN.
  llvm::Value* ClampKeepNaN(llvm::Value* a, double lo, double hi) {
    llvm::Value* m = Select(b_.CreateFCmpOLT(a, C(lo)), C(lo), a);
    return Select(b_.CreateFCmpOGT(m, C(hi)), C(hi), m);
  }
  llvm::Value* CopySign(llvm::Value* mag, llvm::Value* sign) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sign);
  }
  llvm::Value* IsNaN(llvm::Value* a) { return b_.CreateFCmpUNO(a, a); }
  llvm::Value* Select(llvm::Value* c, llvm::Value* t, llvm::Value* f) {
    return b_.CreateSelect(c, t, f);
  }
  llvm::Value* Bits(llvm::Value* a) { return b_.CreateBitCast(a, int_); }
  llvm::Value* FromBits(llvm::Value* a) { return b_.CreateBitCast(a, type_); }
  // A float holding an integer value in range -> that integer.
  llvm::Value* ToInt(llvm::Value* a) { return b_.CreateFPToSI(a, int_); }
  llvm::Value* ToFloat(llvm::Value* i) { return b_.CreateSIToFP(i, type_); }

  // c[0] + x * (c[1] + x * (...)): Horner's rule.
  llvm::Value* Poly(llvm::Value* x, std::initializer_list<double> c) {
    return Poly(x, c.begin(), c.size());
  }
  llvm::Value* Poly(llvm::Value* x, const double* c, size_t n) {
    llvm::Value* p = C(c[n - 1]);
    for (size_t k = n - 1; k-- > 0;) p = MulAdd(p, x, C(c[k]));
    return p;
  }

  int MantissaBits() const { return f64_ ? 52 : 23; }
  int ExponentBias() const { return f64_ ? 1023 : 127; }

  // 2^n for integer n within the normal exponent range.
  llvm::Value* Pow2(llvm::Value* n) {
    llvm::Value* biased = b_.CreateAdd(n, I(ExponentBias()));
    return FromBits(b_.CreateShl(biased, I(MantissaBits())));
  }

  // p * 2^n rounded once (n a float holding an integer) with AVX-512F's VSCALEF on a 512-bit
  // vector (where CanScalef). It overflows to inf and rounds into the denormals as the
  // product of two powers in Exp does (the first factor exact), so vector body and scalar tail
  // agree bit for bit.
  bool CanScalef() const {
    auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(type_);
    return target_.avx512f && vt && vt->getNumElements() == (f64_ ? 8u : 16u);
  }
  llvm::Value* Scalef(llvm::Value* p, llvm::Value* n) {
    llvm::Intrinsic::ID id = f64_ ? llvm::Intrinsic::x86_avx512_mask_scalef_pd_512
                                  : llvm::Intrinsic::x86_avx512_mask_scalef_ps_512;
    // All lanes, no merge source, the current rounding mode (4: _MM_FROUND_CUR_DIRECTION).
    llvm::Value* mask = f64_ ? b_.getInt8(0xff) : static_cast<llvm::Value*>(b_.getInt16(0xffff));
    return b_.CreateIntrinsic(id, {}, {p, n, llvm::PoisonValue::get(type_), mask, b_.getInt32(4)});
  }

  // x = n * ln2 + r, |r| <= ln2 / 2, for x already clamped to a finite range.
  void ReduceLn2(llvm::Value* x, llvm::Value** n, llvm::Value** r) {
    *n = Round(Mul(x, C(kLog2E)));
    llvm::Value* neg = b_.CreateFNeg(*n);
    *r = MulAdd(neg, C(f64_ ? kLn2HiF64 : kLn2HiF32), x);
    *r = MulAdd(neg, C(f64_ ? kLn2LoF64 : kLn2LoF32), *r);
  }

  // e^r - 1 - r for |r| <= ln2 / 2, as r^2 * (1/2! + r/3! + ...): Taylor to r^7 (f32, error
  // < 2^-27 relative) or r^13 (f64, < 2^-57).
  llvm::Value* Expm1Tail(llvm::Value* r) {
    int degree = f64_ ? 13 : 7;
    double c[14];
    for (int k = 2; k <= degree; ++k) c[k - 2] = InvFactorial(k);
    llvm::Value* q = Poly(r, c, static_cast<size_t>(degree - 1));
    return Mul(Mul(r, r), q);
  }

  llvm::Value* Exp(llvm::Value* x) {
    // Beyond these, exp is 0 or inf in the type (the smallest denormal is e^-103.97 in f32,
    // e^-745.13 in f64; the largest finite value e^88.72 and e^709.78).
    const double lo = f64_ ? -746 : -104, hi = f64_ ? 710 : 89;
    const bool scalef = CanScalef();
    // With VSCALEF a NaN may go through: every step keeps it NaN, and the NaN check goes.
    llvm::Value* xc = scalef ? ClampKeepNaN(x, lo, hi) : Clamp(x, lo, hi);
    llvm::Value *n, *r;
    ReduceLn2(xc, &n, &r);
    llvm::Value* p = Add(C(1), Add(r, Expm1Tail(r)));
    if (scalef) return Scalef(p, n);
    // 2^n in two factors: n spans [-1076, 1024] (f64), beyond one normal exponent. The first
    // product is exact; the second rounds once, into the denormals where it must.
    llvm::Value* ni = ToInt(n);
    llvm::Value* n1 = b_.CreateAShr(ni, I(1));
    llvm::Value* n2 = b_.CreateSub(ni, n1);
    llvm::Value* y = Mul(Mul(p, Pow2(n1)), Pow2(n2));
    return Select(IsNaN(x), x, y);
  }

  // e^u - 1 for u in [0, limit] with 2^limit / ln2 well inside the exponent range: e^u - 1 =
  // 2^n * expm1(r) + (2^n - 1), where 2^n - 1 is exact for the n tanh needs (<= 58).
  llvm::Value* Expm1NonNegative(llvm::Value* u) {
    llvm::Value *n, *r;
    ReduceLn2(u, &n, &r);
    llvm::Value* em1 = Add(r, Expm1Tail(r));
    llvm::Value* scale = Pow2(ToInt(n));
    return MulAdd(scale, em1, Sub(scale, C(1)));
  }

  // tanh|x| = t / (t + 2) with t = e^(2|x|) - 1: no cancellation for small |x|, and t is
  // clamped where tanh rounds to 1 (|x| >= 9.01 in f32, 19.06 in f64).
  llvm::Value* Tanh(llvm::Value* x) {
    llvm::Value* u = Clamp(Mul(Abs(x), C(2)), 0, f64_ ? 40 : 20);
    llvm::Value* t = Expm1NonNegative(u);
    llvm::Value* y = Div(t, Add(t, C(2)));
    return Select(IsNaN(x), x, CopySign(y, x));
  }

  // x = 2^e * m with m in [sqrt(1/2), sqrt(2)); log x = e ln2 + log1p(f), f = m - 1 (exact).
  // log1p(f) = 2 atanh(s), s = f / (2 + f), |s| <= 0.1716, written as
  // f - (hfsq - s (hfsq + R(s^2))) with hfsq = f^2 / 2 and R(z) = 2z/3 + 2z^2/5 + ..., so the
  // exact f carries the result and only small corrections round.
  // x = 2^e * m with m in [sqrt(1/2), sqrt(2)), for a positive x (denormals included): m and e
  // as a float.
  void SplitForLog(llvm::Value* x, llvm::Value** m_out, llvm::Value** ef_out) {
    // Denormals: scale into the normal range first.
    double tiny = f64_ ? 0x1p-1022 : 0x1p-126;
    int shift = f64_ ? 54 : 25;
    llvm::Value* is_denormal = b_.CreateFCmpOLT(x, C(tiny));
    llvm::Value* xs = Select(is_denormal, Mul(x, C(std::ldexp(1.0, shift))), x);
    llvm::Value* bits = Bits(xs);
    int mant = MantissaBits();
    uint64_t mant_mask = (uint64_t{1} << mant) - 1;
    // The mantissa bits of sqrt(2).
    int64_t sqrt2_bits = f64_ ? 0x6a09e667f3bcdLL : 0x3504f3;
    llvm::Value* m_bits = b_.CreateAnd(bits, I(static_cast<int64_t>(mant_mask)));
    llvm::Value* upper = b_.CreateICmpSGT(m_bits, I(sqrt2_bits));
    // m in [1, sqrt 2) keeps exponent 0; m in [sqrt 2, 2) is halved (exponent -1) and e + 1.
    llvm::Value* m_exp =
        Select(upper, I(int64_t{ExponentBias() - 1} << mant), I(int64_t{ExponentBias()} << mant));
    *m_out = FromBits(b_.CreateOr(m_bits, m_exp));
    llvm::Value* e = b_.CreateSub(b_.CreateLShr(bits, I(mant)), I(ExponentBias()));
    e = b_.CreateAdd(e, b_.CreateZExt(upper, int_));
    e = b_.CreateSub(e, Select(is_denormal, I(shift), I(0)));
    *ef_out = ToFloat(e);
  }

  llvm::Value* Log(llvm::Value* x) {
    llvm::Value *m, *ef;
    SplitForLog(x, &m, &ef);
    llvm::Value* f = Sub(m, C(1));
    llvm::Value* s = Div(f, Add(f, C(2)));
    llvm::Value* z = Mul(s, s);
    // R(z) = sum_k 2 z^k / (2k + 1): to z^5 (f32, next term < 2^-34 relative) or z^10 (f64).
    int terms = f64_ ? 10 : 5;
    double c[10];
    for (int k = 1; k <= terms; ++k) c[k - 1] = 2.0 / (2 * k + 1);
    llvm::Value* R = Mul(z, Poly(z, c, static_cast<size_t>(terms)));
    llvm::Value* hfsq = Mul(C(0.5), Mul(f, f));
    // e ln2 + log1p(f), adding the small parts first.
    llvm::Value* small = MulAdd(ef, C(f64_ ? kLn2LoF64 : kLn2LoF32), Mul(s, Add(hfsq, R)));
    llvm::Value* y = MulAdd(ef, C(f64_ ? kLn2HiF64 : kLn2HiF32), Add(Sub(small, hfsq), f));

    // log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, log(NaN) = NaN.
    const double inf = INFINITY;
    y = Select(b_.CreateFCmpOEQ(x, C(0)), C(-inf), y);
    y = Select(b_.CreateFCmpOLT(x, C(0)), C(NAN), y);
    y = Select(b_.CreateFCmpOEQ(x, C(inf)), x, y);
    return Select(IsNaN(x), x, y);
  }

  // a * b = p + e exactly (Dekker: 27-bit halves, so no FMA is needed and the vector body and
  // the scalar tail agree on every target). The caller keeps contraction off.
  void TwoProd(llvm::Value* a, llvm::Value* b, llvm::Value** p, llvm::Value** e) {
    auto split = [this](llvm::Value* v, llvm::Value** hi, llvm::Value** lo) {
      llvm::Value* c = Mul(C(134217729.0), v);  // 2^27 + 1
      *hi = Sub(c, Sub(c, v));
      *lo = Sub(v, *hi);
    };
    llvm::Value *ah, *al, *bh, *bl;
    split(a, &ah, &al);
    split(b, &bh, &bl);
    *p = Mul(a, b);
    *e = Add(Add(Add(Sub(Mul(ah, bh), *p), Mul(ah, bl)), Mul(al, bh)), Mul(al, bl));
  }

  // f64 x^y = e^(y log x) for x > 0 and finite, y finite, |y| < 2^900 and |y log x| < 700 (the
  // caller sends the rest to libm): log x in double-double, since an error d in y log x is a
  // relative error d in the result and |y log x| reaches 700. log x = e ln2 + log m with
  // log m = 2 atanh(s), s = f / (2 + f) carried to ~2^-100 (its division's remainder taken
  // exactly); the product with y by TwoProd; then e^(t_hi + t_lo) by the reduction Exp uses,
  // t_lo added to the reduced argument, and 2^n exact (the result stays normal). Contraction
  // is off here: the exact steps must round as written.
  llvm::Value* PowF64(llvm::Value* x, llvm::Value* y, llvm::Value** t_hi_out) {
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    b_.setFastMathFlags(llvm::FastMathFlags());
    llvm::Value *m, *ef;
    SplitForLog(x, &m, &ef);
    llvm::Value* f = Sub(m, C(1));  // exact
    llvm::Value* d = Add(f, C(2));
    llvm::Value* d_lo = Sub(f, Sub(d, C(2)));  // 2 + f = d + d_lo exactly
    llvm::Value* s = Div(f, d);
    llvm::Value *p, *pe;
    TwoProd(s, d, &p, &pe);
    // f - s (d + d_lo), the division's remainder (f - p exact: p is within an ulp of f).
    llvm::Value* rem = Sub(Sub(Sub(f, p), pe), Mul(s, d_lo));
    llvm::Value* s_lo = Div(rem, d);
    // log m = 2s + (2/3) s^3 + 2s z^2 P(z), z = s^2, P(z) = 1/5 + z/7 + ... (11 terms: z <=
    // 0.0295, the next below 2^-62 of the sum). 2s is exact; the s^3 term (< 1 % of 2s) is
    // carried in double-double, and so is each sum into hi, so what rounds in plain f64 is
    // below 2^-62 of log x: an error in log x of 2^-57 (the s^3 term in f64, summed into one
    // double) was 37 ulp at x = 0.7, y = 1906.
    llvm::Value *z, *z_lo;
    TwoProd(s, s, &z, &z_lo);
    llvm::Value *cube, *cube_e;
    TwoProd(s, z, &cube, &cube_e);
    llvm::Value* cube_lo = Add(cube_e, Mul(s, z_lo));
    const double two_thirds = 2.0 / 3.0;
    const double two_thirds_lo = 3.700743415417188e-17;  // 2/3 - two_thirds
    llvm::Value *t1, *t1_e;
    TwoProd(cube, C(two_thirds), &t1, &t1_e);
    llvm::Value* t1_lo = Add(Add(t1_e, Mul(cube, C(two_thirds_lo))), Mul(cube_lo, C(two_thirds)));
    double c[11];
    for (int k = 2; k <= 12; ++k) c[k - 2] = 2.0 / (2 * k + 1);
    llvm::Value* rest = Mul(Mul(s, Mul(z, z)), Poly(z, c, 11));
    // d(2/3 s^3)/ds = 2 z: what s_lo adds to the s^3 term.
    llvm::Value* ds = Mul(Mul(C(2), z), s_lo);
    llvm::Value* two_s = Mul(C(2), s);
    // hi = e ln2_hi + 2s + t1 by two exact sums; their errors and the small parts into lo.
    auto two_sum = [this](llvm::Value* a, llvm::Value* b, llvm::Value** sum, llvm::Value** err) {
      *sum = Add(a, b);
      llvm::Value* bv = Sub(*sum, a);
      *err = Add(Sub(a, Sub(*sum, bv)), Sub(b, bv));
    };
    llvm::Value* a = Mul(ef, C(kLn2HiF64));  // exact: e has 11 bits, ln2_hi 32
    llvm::Value *hi, *err1, *err2;
    two_sum(a, two_s, &hi, &err1);
    two_sum(hi, t1, &hi, &err2);
    llvm::Value* lo = Add(Add(err1, err2), Add(Mul(C(2), s_lo), t1_lo));
    lo = Add(lo, Add(Add(rest, ds), Mul(ef, C(kLn2LoF64))));
    llvm::Value* l_hi = Add(hi, lo);
    llvm::Value* l_lo = Sub(lo, Sub(l_hi, hi));
    llvm::Value *t_hi, *t_e;
    TwoProd(y, l_hi, &t_hi, &t_e);
    llvm::Value* t_lo = Add(t_e, Mul(y, l_lo));
    *t_hi_out = t_hi;
    // e^(t_hi + t_lo): n ln2_hi is exact and t_hi - n ln2_hi too (they are within a factor 2).
    llvm::Value* n = Round(Mul(t_hi, C(kLog2E)));
    llvm::Value* r1 = Sub(t_hi, Mul(n, C(kLn2HiF64)));
    llvm::Value* r = Add(r1, Sub(t_lo, Mul(n, C(kLn2LoF64))));
    llvm::Value* q = Add(C(1), Add(r, Expm1Tail(r)));
    return Mul(q, Pow2(ToInt(Clamp(n, -1020, 1020))));
  }

  // f32 erf from the fitted polynomials above.
  llvm::Value* ErfF32(llvm::Value* x) {
    llvm::Value* a = Abs(x);
    llvm::Value* small = MulAdd(a, Poly(Mul(a, a), kErfSmall, std::size(kErfSmall)), a);
    llvm::Value* ac = Clamp(a, 1, 4);
    llvm::Value* t = Sub(Div(C(1), ac), C(0.5));
    llvm::Value* q = Poly(t, kErfBig, std::size(kErfBig));
    llvm::Value* e = Exp(b_.CreateFNeg(Mul(ac, ac)));
    llvm::Value* big = b_.CreateFSub(C(1), Mul(e, q));
    llvm::Value* y = Select(b_.CreateFCmpOLT(a, C(1)), small, big);
    return Select(IsNaN(x), x, CopySign(y, x));
  }

  // atan(x): |x| > 1 maps to pi/2 - atan(1/|x|), then u > tan(1/2) to pi/4 + atan((u - 1) /
  // (u + 1)) (u - 1 exact there, and results of 1/2 or more, so the quotient's rounding stays
  // within an ulp; with tan(pi/8) as the bound, results in [0.39, 0.5) erred by 2.2 ulp). The
  // series atan v = v - v^3/3 + v^5/5 - ... then runs on |v| <= tan(1/2), alternating, its
  // error below the first omitted term v^(2k+1) / (2k+1): 28 terms past v leave < 2^-56
  // relative (f64), 14 leave < 2^-30 (`f32_accuracy`: an f64 evaluation that only has to round
  // correctly to f32). The constants' lost bits are added back after the addition or the
  // subtraction that cancels. atan(+-inf) = +-pi/2, atan(+-0) = +-0, NaN propagates.
  llvm::Value* Atan(llvm::Value* x, bool f32_accuracy) {
    llvm::Value* a = Abs(x);
    llvm::Value* big = b_.CreateFCmpOGT(a, C(1));
    llvm::Value* u = Select(big, Div(C(1), a), a);
    llvm::Value* mid = b_.CreateFCmpOGT(u, C(kTanHalf));
    llvm::Value* v = Select(mid, Div(Sub(u, C(1)), Add(u, C(1))), u);
    llvm::Value* z = Mul(v, v);
    const int terms = f32_accuracy ? 14 : 28;
    double c[28];
    for (int k = 1; k <= terms; ++k) c[k - 1] = (k % 2 ? -1.0 : 1.0) / (2 * k + 1);
    llvm::Value* p = MulAdd(Mul(v, z), Poly(z, c, static_cast<size_t>(terms)), v);
    llvm::Value* r = Select(mid, Add(C(kPio4Hi), Add(p, C(kPio4Lo))), p);
    r = Select(big, Add(Sub(C(kPio2Hi), r), C(kPio2Lo)), r);
    return Select(IsNaN(x), x, CopySign(r, x));
  }

  // asin(x) = atan(x / sqrt((1 - x)(1 + x))): 1 - x is exact where the root is small (|x| >=
  // 1/2), and atan's flat slope there damps the quotient's rounding. asin(+-1) = +-pi/2 (x / 0),
  // |x| > 1 and NaN give NaN (the root of a negative), asin(+-0) = +-0.
  llvm::Value* Asin(llvm::Value* x, bool f32_accuracy) {
    llvm::Value* root = Unary(llvm::Intrinsic::sqrt, Mul(Sub(C(1), x), Add(C(1), x)));
    return Atan(Div(x, root), f32_accuracy);
  }

  // acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): no cancellation at either end (1 - x and 1 + x
  // are exact where they are small). acos(1) = 0, acos(-1) = pi (atan(inf)), |x| > 1 and NaN
  // give NaN.
  llvm::Value* Acos(llvm::Value* x, bool f32_accuracy) {
    llvm::Value* t = Unary(llvm::Intrinsic::sqrt, Div(Sub(C(1), x), Add(C(1), x)));
    return Mul(C(2), Atan(t, f32_accuracy));
  }

  // f64 erf from the series and the fit above.
  llvm::Value* ErfF64(llvm::Value* x) {
    llvm::Value* a = Abs(x);
    llvm::Value* small = MulAdd(a, Poly(Mul(a, a), kErfSmallF64, std::size(kErfSmallF64)), a);
    llvm::Value* ac = Clamp(a, 1, 6);
    llvm::Value* v = Div(Sub(Div(C(1), ac), C(kErfBigF64Center)), C(kErfBigF64HalfWidth));
    llvm::Value* q = Poly(v, kErfBigF64, std::size(kErfBigF64));
    llvm::Value* e = Exp(b_.CreateFNeg(Mul(ac, ac)));
    llvm::Value* big = b_.CreateFSub(C(1), Mul(e, q));
    llvm::Value* y = Select(b_.CreateFCmpOLT(a, C(1)), small, big);
    return Select(IsNaN(x), x, CopySign(y, x));
  }

  // sin (cos_shift 0) or cos (cos_shift 1) of x, |x| <= kTrigInlineLimit: x = n pi/2 + r,
  // |r| <= pi/4, then +-sin r or +-cos r by the quadrant n + cos_shift. `f32_accuracy` keeps the
  // series short when an f64 computation only has to round correctly to f32.
  llvm::Value* SinCos(llvm::Value* x, int cos_shift, bool f32_accuracy) {
    llvm::Value* n = Round(Mul(x, C(kTwoOverPi)));
    n = Clamp(n, -kTrigInlineLimit, kTrigInlineLimit);  // poison-free fptosi for any x
    llvm::Value* neg = b_.CreateFNeg(n);
    llvm::Value* r;
    if (f32_accuracy) {
      r = MulAdd(neg, C(kPio2_1t), MulAdd(neg, C(kPio2_1), x));
    } else {
      r = MulAdd(neg, C(kPio2_1), x);
      r = MulAdd(neg, C(kPio2_2), r);
      r = MulAdd(neg, C(kPio2_3), r);
    }
    llvm::Value* z = Mul(r, r);
    // sin r = r + r z (-1/3! + z/5! - ...), to r^9 (f32) or r^17; cos r = 1 - z/2 + z^2 (1/4!
    // - ...), to r^10 or r^16: the first omitted terms are < 2^-28 and < 2^-56 relative.
    int sin_terms = f32_accuracy ? 4 : 8, cos_terms = f32_accuracy ? 4 : 7;
    double sc[8], cc[8];
    for (int k = 0; k < sin_terms; ++k) sc[k] = (k % 2 ? 1 : -1) * InvFactorial(2 * k + 3);
    for (int k = 0; k < cos_terms; ++k) cc[k] = (k % 2 ? -1 : 1) * InvFactorial(2 * k + 4);
    llvm::Value* sin_r = MulAdd(Mul(r, z), Poly(z, sc, static_cast<size_t>(sin_terms)), r);
    llvm::Value* cos_r =
        Add(MulAdd(Mul(z, z), Poly(z, cc, static_cast<size_t>(cos_terms)), Mul(z, C(-0.5))), C(1));
    llvm::Value* q = b_.CreateAdd(ToInt(n), I(cos_shift));
    llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(q, I(1)), I(0));
    llvm::Value* negate = b_.CreateICmpNE(b_.CreateAnd(q, I(2)), I(0));
    llvm::Value* y = Select(odd, cos_r, sin_r);
    y = Select(negate, b_.CreateFNeg(y), y);
    // sin(-0) = -0: the reduction's r = -0 - 0 * pi/2 is +0.
    if (cos_shift == 0) y = Select(b_.CreateFCmpOEQ(x, C(0)), x, y);
    return y;
  }

 private:
  llvm::IRBuilder<>& b_;
  llvm::Type* type_;
  bool f64_;
  llvm::Type* int_;
  InlineMathTarget target_;
};

// `fast` where `bad` is false in every lane; otherwise a branch (marked unlikely) to a block
// that calls libm for the whole value and takes its lanes where `bad` is true.
llvm::Value* WithLibmFallback(llvm::IRBuilder<>& b, llvm::Value* fast, llvm::Value* bad,
                              const std::string& name, const std::vector<llvm::Value*>& args,
                              const LibmCaller& libm) {
  llvm::Value* any = bad->getType()->isVectorTy() ? b.CreateOrReduce(bad) : bad;
  llvm::BasicBlock* fast_bb = b.GetInsertBlock();
  llvm::Function* fn = fast_bb->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  auto* slow_bb = llvm::BasicBlock::Create(ctx, name + ".libm", fn);
  auto* join_bb = llvm::BasicBlock::Create(ctx, name + ".join", fn);
  llvm::MDBuilder md(ctx);
  b.CreateCondBr(any, slow_bb, join_bb, md.createBranchWeights(1, 1000));
  b.SetInsertPoint(slow_bb);
  llvm::Value* slow = b.CreateSelect(bad, libm(name, args), fast);
  llvm::BasicBlock* slow_end = b.GetInsertBlock();
  b.CreateBr(join_bb);
  b.SetInsertPoint(join_bb);
  llvm::PHINode* phi = b.CreatePHI(fast->getType(), 2, name);
  phi->addIncoming(fast, fast_bb);
  phi->addIncoming(slow, slow_end);
  return phi;
}

}  // namespace

llvm::Value* EmitInlineMath(llvm::IRBuilder<>& b, loop::Intrinsic fn,
                            const std::vector<llvm::Value*>& args, const LibmCaller& libm,
                            const InlineMathTarget& target) {
  using loop::Intrinsic;
  llvm::Value* x = args[0];
  MathEmitter m(b, x->getType(), target);
  bool f64 = m.f64();
  switch (fn) {
    case Intrinsic::kExp:
      return m.Exp(x);
    case Intrinsic::kLog:
      return m.Log(x);
    case Intrinsic::kTanh:
      return m.Tanh(x);
    case Intrinsic::kErf:
      return f64 ? m.ErfF64(x) : m.ErfF32(x);
    case Intrinsic::kSin:
    case Intrinsic::kCos: {
      int cos_shift = fn == Intrinsic::kCos ? 1 : 0;
      std::string name = cos_shift ? "cos" : "sin";
      // f32 reduces and evaluates in f64 and rounds once: the reduction then needs no
      // three-part constant, and the result is within an ulp.
      llvm::Value* y;
      if (f64) {
        y = m.SinCos(x, cos_shift, false);
      } else {
        llvm::Type* wide = m.Like(b.getDoubleTy());
        MathEmitter d(b, wide, target);
        y = b.CreateFPTrunc(d.SinCos(b.CreateFPExt(x, wide), cos_shift, true), x->getType());
      }
      // NaN, inf and |x| beyond the inline reduction's range: libm.
      llvm::Value* bad = b.CreateNot(b.CreateFCmpOLE(m.Abs(x), m.C(kTrigInlineLimit)));
      return WithLibmFallback(b, y, bad, f64 ? name : name + "f", args, libm);
    }
    case Intrinsic::kAtan:
    case Intrinsic::kAsin:
    case Intrinsic::kAcos: {
      // f32 evaluates in f64 with the shorter series and rounds once, as sin and cos do.
      auto eval = [fn](MathEmitter& e, llvm::Value* v, bool f32_accuracy) {
        return fn == Intrinsic::kAtan   ? e.Atan(v, f32_accuracy)
               : fn == Intrinsic::kAsin ? e.Asin(v, f32_accuracy)
                                        : e.Acos(v, f32_accuracy);
      };
      if (f64) return eval(m, x, false);
      llvm::Type* wide = m.Like(b.getDoubleTy());
      MathEmitter d(b, wide, target);
      return b.CreateFPTrunc(eval(d, b.CreateFPExt(x, wide), true), x->getType());
    }
    case Intrinsic::kPow: {
      if (f64) {
        llvm::Value* t_hi;
        llvm::Value* p = m.PowF64(x, args[1], &t_hi);
        // x <= 0, inf or NaN, y inf, NaN or huge, and results near the ends of the range:
        // libm.
        llvm::Value* x_ok =
            b.CreateAnd(b.CreateFCmpOGT(x, m.C(0)), b.CreateFCmpOLT(x, m.C(INFINITY)));
        llvm::Value* y_ok = b.CreateFCmpOLT(m.Abs(args[1]), m.C(0x1p900));
        llvm::Value* t_ok = b.CreateFCmpOLT(m.Abs(t_hi), m.C(700));
        llvm::Value* bad = b.CreateNot(b.CreateAnd(b.CreateAnd(x_ok, y_ok), t_ok));
        return WithLibmFallback(b, p, bad, "pow", args, libm);
      }
      // x^y = e^(y log x) in f64: the product's error (< 2^-45 relative for |y log x| < 256) is
      // far below an f32 ulp; one rounding at the end.
      llvm::Type* wide = m.Like(b.getDoubleTy());
      MathEmitter d(b, wide, target);
      llvm::Value* xw = b.CreateFPExt(x, wide);
      llvm::Value* yw = b.CreateFPExt(args[1], wide);
      llvm::Value* p = b.CreateFPTrunc(d.Exp(b.CreateFMul(yw, d.Log(xw))), x->getType());
      // x <= 0 (signs, zeros, odd integer exponents), inf and NaN operands: libm, which has
      // C's table of special cases.
      llvm::Value* x_ok =
          b.CreateAnd(b.CreateFCmpOGT(x, m.C(0)), b.CreateFCmpOLT(x, m.C(INFINITY)));
      llvm::Value* y_ok = b.CreateFCmpOLT(m.Abs(args[1]), m.C(INFINITY));
      llvm::Value* bad = b.CreateNot(b.CreateAnd(x_ok, y_ok));
      return WithLibmFallback(b, p, bad, "powf", args, libm);
    }
    default:
      return nullptr;
  }
}

}  // namespace kiln
