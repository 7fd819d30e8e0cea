// Accuracy of the math the LLVM code generator emits for exp, log, tanh, erf, sin, cos, pow, atan,
// asin and acos
// (jit/llvm_emit_expr.cc, EmitCall), in ulps against long double libm, for f32 and f64, through
// both the vector loop and the scalar tail of one kernel; and f16/bf16, which compute through
// f32. The rules a result must keep:
//   (a) its class agrees with the reference exactly: NaN where the reference is NaN; the same
//       infinity where the reference is infinite or beyond the type's largest finite value by
//       half an ulp or more (where round-to-nearest overflows); and for the odd functions (tanh,
//       erf, sin) a zero, on either side, has the reference's sign (F(-0) = -0);
//   (b) otherwise it is within the function's bound in kMaxUlp, an ulp being the spacing of the
//       type at the reference value (the denormal spacing below the smallest normal); an
//       infinite result counts as the value one ulp past the largest finite one.
// Each (function, type) prints one summary line: points checked, the largest error and the input
// where it occurred, so results can be quoted.
//
// Inputs. f32 unary functions: every 257th bit pattern of all 2^32 (so +-0, denormals, huge
// values, infinities and NaN patterns), or every one with KILN_EXHAUSTIVE_MATH=1 (hours). f64,
// and pow of either type: about 4M random points, part random bit patterns and part the
// function's interesting range. Every function also gets its special values and edges. The
// sample sizes keep the whole file under 20 s on one core in a Release build. Under
// KILN_TEST_CPU (the cross-CPU sweep of tests/CMakeLists.txt, which runs this file once per CPU
// model) the samples are 8 times smaller: there the point is the code of each model (FMA or
// not, AVX-512 or not), not the densest sweep.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/kernel_test_util.h"
#include "ir/loop/loop.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Intrinsic;
using loop::Stmt;
using loop::Var;

// The largest error allowed, in ulps of the result type, per function: what
// jit/llvm_vector_math.h promises (measured maxima printed by each test). glibc's libm itself
// measures at most 0.76 ulp here except tanh (2.12 f32, 2.04 f64) and erf f64 (1.00).
struct UlpBound {
  Intrinsic fn;
  double f32;
  double f64;
};
constexpr UlpBound kMaxUlp[] = {
    {Intrinsic::kExp, 2, 2},  {Intrinsic::kLog, 2, 2},  {Intrinsic::kTanh, 3, 3},
    {Intrinsic::kErf, 2, 2},  {Intrinsic::kSin, 1, 3},  {Intrinsic::kCos, 1, 3},
    {Intrinsic::kPow, 1, 2},  {Intrinsic::kAtan, 1, 2}, {Intrinsic::kAsin, 1, 3},
    {Intrinsic::kAcos, 1, 3},
};

constexpr int kLanesF32 = 16;
constexpr int kLanesF64 = 8;
constexpr int64_t kChunk = (int64_t{1} << 20) - 3;  // elements per call: not a multiple of lanes
constexpr int kScalarEvery = 61;                    // every 61st point also goes through the tail
constexpr int kMaxReportedFailures = 10;            // per (function, type); the rest are counted

// Which loop of the kernel computed a result: all of a call of fewer elements than lanes goes
// through the scalar tail.
enum class Path { kVectorLoop, kTail };
const char* PathName(Path p) {
  return p == Path::kTail ? "scalar tail" : "vector loop";
}

template <typename T>
constexpr bool kIsF32 = std::is_same_v<T, float>;

template <typename T>
const char* TypeName() {
  return kIsF32<T> ? "f32" : "f64";
}

double MaxUlp(Intrinsic fn, bool f32) {
  for (const UlpBound& b : kMaxUlp)
    if (b.fn == fn) return f32 ? b.f32 : b.f64;
  ADD_FAILURE() << "no bound for " << loop::IntrinsicName(fn);
  return 0;
}

bool IsOdd(Intrinsic fn) {
  return fn == Intrinsic::kTanh || fn == Intrinsic::kErf || fn == Intrinsic::kSin ||
         fn == Intrinsic::kAtan || fn == Intrinsic::kAsin;
}

long double Reference(Intrinsic fn, long double a, long double b) {
  switch (fn) {
    case Intrinsic::kExp:
      return expl(a);
    case Intrinsic::kLog:
      return logl(a);
    case Intrinsic::kTanh:
      return tanhl(a);
    case Intrinsic::kErf:
      return erfl(a);
    case Intrinsic::kSin:
      return sinl(a);
    case Intrinsic::kCos:
      return cosl(a);
    case Intrinsic::kPow:
      return powl(a, b);
    case Intrinsic::kAtan:
      return atanl(a);
    case Intrinsic::kAsin:
      return asinl(a);
    case Intrinsic::kAcos:
      return acosl(a);
    default:
      ADD_FAILURE() << "no reference for " << loop::IntrinsicName(fn);
      return 0;
  }
}

Expr I(int64_t v) {
  return loop::IntImm(v);
}

// out[i] = fn(a[i] [, b[i]]) for i in [0, n), n a run-time scalar: a vector loop of `lanes`
// lanes over the first n - n % lanes elements, then a scalar loop over the rest (the shape the
// loop pipeline gives a vectorized elementwise kernel).
loop::PrimFunc MathFunc(Intrinsic fn, DType t, int lanes) {
  Var n = loop::MakeVar("n"), io = loop::MakeVar("io"), i = loop::MakeVar("i");
  int arity = loop::IntrinsicArity(fn);
  std::vector<Buffer> buffers;
  for (int k = 0; k < arity; ++k) buffers.push_back(loop::MakeBuffer(k == 0 ? "a" : "b", t, {n}));
  Buffer out = loop::MakeBuffer("out", t, {n});
  auto store = [&](const Expr& index) {
    std::vector<Expr> args;
    for (int k = 0; k < arity; ++k) args.push_back(loop::Load(buffers[k], {index}));
    return loop::Store(out, {index}, loop::Call(fn, args));
  };
  Expr vector_end = loop::Mul(loop::FloorDiv(n, I(lanes)), I(lanes));
  Stmt body = loop::Seq({
      loop::For(io, I(0), loop::FloorDiv(n, I(lanes)), ForKind::kSerial,
                store(loop::Ramp(loop::Mul(io, I(lanes)), 1, lanes))),
      loop::For(i, vector_end, loop::Sub(n, vector_end), ForKind::kSerial, store(i)),
  });
  buffers.push_back(out);
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = StrCat(loop::IntrinsicName(fn), "_", DTypeName(t));
  f->buffer_params = std::move(buffers);
  f->num_inputs = arity;
  f->scalar_params = {n};
  f->body = std::move(body);
  return f;
}

// MathFunc compiled for TestCodegen(); T is the element's storage type.
template <typename T>
class MathKernel {
 public:
  MathKernel(Intrinsic fn, DType t, int lanes) : arity_(loop::IntrinsicArity(fn)), lanes_(lanes) {
    loop::PrimFunc f = MathFunc(fn, t, lanes);
    module_ = BuildLLVM({f}, test::TestCodegen());
    fn_ = module_->Lookup(f->name);
  }
  // out[0, n) = fn(a[0, n) [, b[0, n)]); b is ignored for unary functions.
  void Run(const T* a, const T* b, T* out, int64_t n) const {
    void* buffers[3] = {const_cast<T*>(a), const_cast<T*>(b), out};
    if (arity_ == 1) buffers[1] = out;
    fn_(buffers, &n);
  }
  // The same, in calls of fewer than `lanes` elements, so the scalar tail computes all of them.
  void RunScalar(const T* a, const T* b, T* out, int64_t n) const {
    for (int64_t at = 0; at < n; at += lanes_ - 1)
      Run(a + at, arity_ == 1 ? nullptr : b + at, out + at, std::min<int64_t>(lanes_ - 1, n - at));
  }

 private:
  int arity_;
  int lanes_;
  std::unique_ptr<CompiledModule> module_;
  KernelFn fn_ = nullptr;
};

// The spacing of T at `x`: the denormal spacing below T's smallest normal.
template <typename T>
long double UlpAt(long double x) {
  using L = std::numeric_limits<T>;
  int e = 0;
  if (x != 0) std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0L, std::max(e, L::min_exponent) - L::digits);
}

constexpr double kClassError = std::numeric_limits<double>::infinity();

// The error of `got` against the exact `want`, in ulps of T at `want`; kClassError where rule
// (a) at the top is broken.
template <typename T>
double UlpError(long double want, T got, bool odd) {
  using L = std::numeric_limits<T>;
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0 : kClassError;
  // Round to nearest gives infinity from the largest finite value plus half its ulp on.
  const long double overflow =
      static_cast<long double>(L::max()) + std::ldexp(1.0L, L::max_exponent - L::digits - 1);
  if (std::fabs(want) >= overflow)
    return std::isinf(got) && std::signbit(got) == std::signbit(want) ? 0 : kClassError;
  if (odd && (want == 0 || got == 0) && std::signbit(got) != std::signbit(want)) return kClassError;
  long double g = got;
  if (std::isinf(got)) g = std::copysign(std::ldexp(1.0L, L::max_exponent), g);
  return static_cast<double>(std::fabs(g - want) / UlpAt<T>(want));
}

// Errors of one (function, type): the largest, where, and the failures of rules (a) and (b).
template <typename T>
class UlpCheck {
 public:
  explicit UlpCheck(Intrinsic fn)
      : fn_(fn),
        binary_(loop::IntrinsicArity(fn) == 2),
        odd_(IsOdd(fn)),
        bound_(MaxUlp(fn, kIsF32<T>)) {}

  // Checks out[k] = fn(a[k] [, b[k]]), computed by `path`.
  void Check(const T* a, const T* b, const T* out, int64_t n, Path path) {
    for (int64_t k = 0; k < n; ++k) {
      T y = binary_ ? b[k] : T(0);
      long double want = Reference(fn_, a[k], y);
      double err = UlpError<T>(want, out[k], odd_);
      ++(path == Path::kTail ? tail_points_ : points_);
      if (err != kClassError && err > max_ulp_) {
        max_ulp_ = err;
        worst_a_ = a[k];
        worst_b_ = y;
      }
      if (err <= bound_) continue;
      ++(err == kClassError ? class_failures_ : ulp_failures_);
      if (class_failures_ + ulp_failures_ > kMaxReportedFailures) continue;
      const int digits = std::numeric_limits<T>::max_digits10;
      char msg[512];
      std::snprintf(msg, sizeof msg, "%s %s (%s): x = %s%s, got %a (%.*g), expected %a (%.*Lg): ",
                    loop::IntrinsicName(fn_), TypeName<T>(), PathName(path), Hex(a[k]).c_str(),
                    binary_ ? StrCat(", y = ", Hex(y)).c_str() : "", static_cast<double>(out[k]),
                    digits, static_cast<double>(out[k]), static_cast<double>(want), digits + 2,
                    want);
      if (err == kClassError)
        ADD_FAILURE() << msg << "wrong NaN, infinity or sign of zero";
      else
        ADD_FAILURE() << msg << StrCat(err, " ulp > bound ", bound_);
    }
  }

  // Prints the summary line and fails the test if any point broke a rule.
  void Finish(const std::string& inputs) const {
    std::printf("%s %s: %" PRId64 " points + %" PRId64
                " again through the scalar tail (%s), "
                "max %.3f ulp (bound %g) at x = %s%s; %" PRId64 " class mismatches, %" PRId64
                " over bound\n",
                loop::IntrinsicName(fn_), TypeName<T>(), points_, tail_points_, inputs.c_str(),
                max_ulp_, bound_, Hex(worst_a_).c_str(),
                binary_ ? StrCat(", y = ", Hex(worst_b_)).c_str() : "", class_failures_,
                ulp_failures_);
    std::fflush(stdout);
    EXPECT_EQ(class_failures_ + ulp_failures_, 0)
        << loop::IntrinsicName(fn_) << " " << TypeName<T>() << ": failures (the first "
        << kMaxReportedFailures << " are listed above)";
  }

 private:
  static std::string Hex(T v) {
    char s[64];
    std::snprintf(s, sizeof s, "%a", static_cast<double>(v));
    return s;
  }

  Intrinsic fn_;
  bool binary_;
  bool odd_;
  double bound_;
  int64_t points_ = 0;       // through kernel calls of many elements
  int64_t tail_points_ = 0;  // through calls of fewer elements than lanes: the tail only
  double max_ulp_ = 0;
  T worst_a_ = 0;
  T worst_b_ = 0;
  int64_t class_failures_ = 0;
  int64_t ulp_failures_ = 0;
};

// One source of inputs, filled a chunk at a time: fill(first, n, a, b) writes points
// [first, first + n) of `count`; b only for binary functions.
template <typename T>
struct Inputs {
  std::string what;  // for the summary line
  int64_t count;
  std::function<void(int64_t first, int64_t n, T* a, T* b)> fill;
};

bool Exhaustive() {
  const char* e = std::getenv("KILN_EXHAUSTIVE_MATH");
  return e != nullptr && std::string(e) == "1";
}

// 8 under the cross-CPU sweep (KILN_TEST_CPU set), else 1: what the sample sizes are divided by.
int64_t SampleDivisor() {
  return test::TestCodegen().mcpu.empty() ? 1 : 8;
}

// Every stride-th f32 bit pattern of all 2^32.
Inputs<float> BitSweepF32() {
  int64_t stride = Exhaustive() ? 1 : 257 * SampleDivisor();
  int64_t count = ((int64_t{1} << 32) - 1) / stride + 1;
  std::string what = stride == 1 ? "exhaustive: all 2^32 bit patterns"
                                 : StrCat("sampled: every ", stride, "th bit pattern");
  return {what, count, [stride](int64_t first, int64_t n, float* a, float*) {
            for (int64_t k = 0; k < n; ++k)
              a[k] = std::bit_cast<float>(static_cast<uint32_t>((first + k) * stride));
          }};
}

// Random bit patterns, uniform over all of T's. Each chunk is seeded from its first index, so a
// point can be found again from the index of its chunk.
template <typename T>
Inputs<T> RandomBits(int64_t count, uint64_t seed) {
  using U = std::conditional_t<kIsF32<T>, uint32_t, uint64_t>;
  return {StrCat(count, " random bit patterns"), count,
          [seed](int64_t first, int64_t n, T* a, T* b) {
            std::mt19937_64 rng(seed + first);
            for (int64_t k = 0; k < n; ++k) {
              a[k] = std::bit_cast<T>(static_cast<U>(rng()));
              if (b) b[k] = std::bit_cast<T>(static_cast<U>(rng()));
            }
          }};
}

// Uniform in [lo, hi], or log-uniform with `log_scale`.
template <typename T>
Inputs<T> RandomRange(int64_t count, double lo, double hi, bool log_scale, uint64_t seed) {
  return {StrCat(count, log_scale ? " log-uniform in [" : " uniform in [", lo, ", ", hi, "]"),
          count, [=](int64_t first, int64_t n, T* a, T*) {
            std::mt19937_64 rng(seed + first);
            std::uniform_real_distribution<double> d(log_scale ? std::log(lo) : lo,
                                                     log_scale ? std::log(hi) : hi);
            for (int64_t k = 0; k < n; ++k) {
              double v = d(rng);
              a[k] = static_cast<T>(log_scale ? std::exp(v) : v);
            }
          }};
}

// pow: x log-uniform in [x_lo, x_hi] and y uniform in [-y_max, y_max]; with `negative_base`, x
// negated and y rounded to an integer (where pow of a negative base is defined).
template <typename T>
Inputs<T> RandomPow(int64_t count, double x_lo, double x_hi, double y_max, bool negative_base,
                    uint64_t seed) {
  std::string what = negative_base ? StrCat(count, " (-x, integer y)") : StrCat(count, " (x, y)");
  what += StrCat(", x log-uniform in [", x_lo, ", ", x_hi, "], |y| <= ", y_max);
  return {what, count, [=](int64_t first, int64_t n, T* a, T* b) {
            std::mt19937_64 rng(seed + first);
            std::uniform_real_distribution<double> lx(std::log(x_lo), std::log(x_hi));
            std::uniform_real_distribution<double> uy(-y_max, y_max);
            for (int64_t k = 0; k < n; ++k) {
              double x = std::exp(lx(rng)), y = uy(rng);
              a[k] = static_cast<T>(negative_base ? -x : x);
              b[k] = static_cast<T>(negative_base ? std::nearbyint(y) : y);
            }
          }};
}

// The values every function of type T gets, both signs.
template <typename T>
std::vector<T> CommonSpecials() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {0,
                      L::infinity(),
                      L::denorm_min(),
                      L::min() - L::denorm_min(),  // the largest denormal
                      L::min(),
                      L::max(),
                      1,
                      L::epsilon(),
                      static_cast<T>(0.5),
                      2};
  size_t n = v.size();
  for (size_t k = 0; k < n; ++k) v.push_back(-v[k]);
  v.push_back(L::quiet_NaN());
  v.push_back(-L::quiet_NaN());
  v.push_back(L::signaling_NaN());
  return v;
}

// Each function's special values and edges for type T, as (x, y) pairs (y only for pow).
template <typename T>
std::vector<std::pair<T, T>> Specials(Intrinsic fn) {
  using L = std::numeric_limits<T>;
  const bool f32 = kIsF32<T>;
  const T inf = L::infinity(), nan = L::quiet_NaN();
  std::vector<T> common = CommonSpecials<T>();
  std::vector<double> edges;
  switch (fn) {
    case Intrinsic::kExp:
      edges = f32 ? std::vector<double>{88.72283,    88.72284,    88.7228394, 89,
                                        -87.33654,   -87.3365479, -103.97208, -103.97209,
                                        -103.972084, -104,        -150,       1e-8}
                  : std::vector<double>{709.782712893383,
                                        709.782712893384,
                                        709.79,
                                        710,
                                        -708.39641853226408,
                                        -745.1332191019411,
                                        -745.1332191019412,
                                        -745.14,
                                        -746,
                                        -1100,
                                        1e-17};
      break;
    case Intrinsic::kLog:
      edges = {1 + 1.0 / 1024, 1 - 1.0 / 1024, 0.7, 1.4, std::numbers::e, 10, 1e-30, 1e30};
      edges.push_back(std::nextafter(T(1), T(0)));
      edges.push_back(std::nextafter(T(1), T(2)));
      for (int k = 1; k < 8; ++k) edges.push_back(L::denorm_min() * k * 977);
      break;
    case Intrinsic::kTanh:
      edges = f32 ? std::vector<double>{9.0, 9.1, 1e-5, 1e-20, 1e-40, 0.55, 0.625, 20}
                  : std::vector<double>{19.06, 19.07, 22, 1e-8, 1e-20, 1e-310, 0.55, 0.625, 40};
      break;
    case Intrinsic::kErf:
      edges =
          f32 ? std::vector<double>{3.9, 4, 1e-5, 1e-20, 1e-40, 0.84375, 1.25, 2.857}
              : std::vector<double>{5.9, 5.92, 6, 27, 1e-8, 1e-20, 1e-310, 0.84375, 1.25, 2.857};
      break;
    case Intrinsic::kSin:
    case Intrinsic::kCos:
      for (int k = -16; k <= 16; ++k) edges.push_back(k * std::numbers::pi / 4);
      for (double e : {1e4, 1e5, 1e6, 1e7, 1e15, 1e22, 1e30, 1e300}) edges.push_back(e);
      edges.push_back(f32 ? 0x1.921fb6p+0 : 0x1.921fb54442d18p+0);  // pi/2 rounded
      edges.push_back(f32 ? 0x1.2d97c8p+3 : 0x1.2d97c7f3321d2p+3);  // 3 pi/2 rounded
      edges.push_back(1e-5);
      edges.push_back(1e-20);
      break;
    case Intrinsic::kAtan:
      // The reductions' boundaries (1, tan(1/2) above and below, its reciprocal), tiny and huge
      // values.
      edges = {1,
               0.54630248984379051,
               0.5463024898437906,
               1.830487721712452,
               0.5,
               1e-5,
               1e-20,
               1e-300,
               1e10,
               1e20,
               1e300};
      break;
    case Intrinsic::kAsin:
    case Intrinsic::kAcos:
      edges = {1, 0.5, 0.99999, 1e-5, 1e-20, 1e-300, 0x1.6a09e667f3bcdp-1};  // ..., 1/sqrt(2)
      edges.push_back(std::nextafter(T(1), T(0)));
      edges.push_back(std::nextafter(T(1), T(2)));
      break;
    default:
      break;
  }
  std::vector<std::pair<T, T>> out;
  if (fn != Intrinsic::kPow) {
    for (T v : common) out.push_back({v, 0});
    for (double e : edges) {
      out.push_back({static_cast<T>(e), 0});
      out.push_back({static_cast<T>(-e), 0});
    }
    return out;
  }
  // pow: every pair of a set of special values, then results near the ends of the range.
  std::vector<T> values = {0,
                           -0.0,
                           inf,
                           -inf,
                           nan,
                           1,
                           -1,
                           0.5,
                           -0.5,
                           2,
                           -2,
                           3,
                           -3,
                           0.25,
                           L::denorm_min(),
                           L::min(),
                           L::max(),
                           -L::max(),
                           1 + L::epsilon(),
                           1 - L::epsilon() / 2};
  for (T x : values)
    for (T y : values) out.push_back({x, y});
  std::vector<std::pair<double, double>> pairs =
      f32 ? std::vector<std::pair<double, double>>{{10, 38},    {10, 38.5},   {10, 39},
                                                   {10, -37},   {10, -45},    {10, -46},
                                                   {2, 127.99}, {2, 128},     {2, -126},
                                                   {2, -149},   {2, -149.5},  {2, -150},
                                                   {-2, 127},   {-2, -149},   {1e-20, 2},
                                                   {1e20, -2},  {0.9999, 1e6}}
          : std::vector<std::pair<double, double>>{
                {10, 308},    {10, 308.3}, {10, 309},   {10, -307},  {10, -323},   {10, -324},
                {2, 1023.99}, {2, 1024},   {2, -1022},  {2, -1074},  {2, -1074.5}, {2, -1075},
                {-2, 1023},   {-2, -1073}, {1e-200, 2}, {1e200, -2}, {0.9999, 1e7}};
  for (auto [x, y] : pairs) out.push_back({static_cast<T>(x), static_cast<T>(y)});
  return out;
}

// Checks one function for type T on `inputs` and its special values, printing the summary line.
template <typename T>
void CheckAccuracy(Intrinsic fn, const std::vector<Inputs<T>>& inputs) {
  const int lanes = kIsF32<T> ? kLanesF32 : kLanesF64;
  MathKernel<T> kernel(fn, kIsF32<T> ? DType::kFloat32 : DType::kFloat64, lanes);
  UlpCheck<T> check(fn);
  bool binary = loop::IntrinsicArity(fn) == 2;

  // Special values: tiled `lanes` times through the vector loop, then once through the tail.
  std::vector<std::pair<T, T>> specials = Specials<T>(fn);
  std::vector<T> a, b, out;
  for (int rep = 0; rep < lanes; ++rep)
    for (auto [x, y] : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  out.resize(a.size());
  kernel.Run(a.data(), b.data(), out.data(), static_cast<int64_t>(a.size()));
  check.Check(a.data(), b.data(), out.data(), static_cast<int64_t>(a.size()), Path::kVectorLoop);
  int64_t s = static_cast<int64_t>(specials.size());
  kernel.RunScalar(a.data(), b.data(), out.data(), s);
  check.Check(a.data(), b.data(), out.data(), s, Path::kTail);

  // The samples, a chunk per call: all through the kernel (the last n % lanes of each call in
  // the tail), every kScalarEvery-th again all through the tail.
  std::string what = StrCat(s, " special values");
  a.resize(kChunk);
  b.resize(binary ? kChunk : 0);
  out.resize(kChunk);
  std::vector<T> sa, sb, sout;
  for (const Inputs<T>& in : inputs) {
    what += StrCat(" + ", in.what);
    for (int64_t first = 0; first < in.count; first += kChunk) {
      int64_t n = std::min(kChunk, in.count - first);
      in.fill(first, n, a.data(), binary ? b.data() : nullptr);
      kernel.Run(a.data(), b.data(), out.data(), n);
      check.Check(a.data(), b.data(), out.data(), n, Path::kVectorLoop);
      sa.clear();
      sb.clear();
      for (int64_t k = 0; k < n; k += kScalarEvery) {
        sa.push_back(a[k]);
        if (binary) sb.push_back(b[k]);
      }
      sout.resize(sa.size());
      int64_t m = static_cast<int64_t>(sa.size());
      kernel.RunScalar(sa.data(), sb.data(), sout.data(), m);
      check.Check(sa.data(), sb.data(), sout.data(), m, Path::kTail);
    }
  }
  check.Finish(what);
}

constexpr int64_t kF64Points = 4'000'000;

// The f64 inputs of a unary function: random bit patterns, then its interesting range.
std::vector<Inputs<double>> F64Inputs(Intrinsic fn) {
  const int64_t n = kF64Points / SampleDivisor();
  std::vector<Inputs<double>> in = {RandomBits<double>(n / 4, 1)};
  const int64_t rest = n - n / 4;
  switch (fn) {
    case Intrinsic::kExp:
      in.push_back(RandomRange<double>(rest, -750, 710, false, 2));
      break;
    case Intrinsic::kLog:
      in.push_back(RandomRange<double>(rest, 1e-300, 1e300, true, 3));
      break;
    case Intrinsic::kSin:
    case Intrinsic::kCos:
      in.push_back(RandomRange<double>(rest / 2, -1e6, 1e6, false, 4));
      in.push_back(RandomRange<double>(rest - rest / 2, -10, 10, false, 5));
      break;
    case Intrinsic::kAtan:
      in.push_back(RandomRange<double>(rest / 2, -4, 4, false, 7));
      in.push_back(RandomRange<double>(rest - rest / 2, 1e-10, 1e10, true, 8));
      break;
    case Intrinsic::kAsin:
    case Intrinsic::kAcos:
      in.push_back(RandomRange<double>(rest / 2, -1, 1, false, 9));
      in.push_back(RandomRange<double>(rest - rest / 2, 1e-12, 1, true, 10));
      break;
    case Intrinsic::kErf:  // where erf is not yet 1 in f64, and beyond
      in.push_back(RandomRange<double>(rest * 2 / 3, -6, 6, false, 11));
      in.push_back(RandomRange<double>(rest - rest * 2 / 3, -20, 20, false, 6));
      break;
    default:  // tanh
      in.push_back(RandomRange<double>(rest, -20, 20, false, 6));
      break;
  }
  return in;
}

// pow: random bit-pattern pairs, (x, y) in the usual range, and negative bases with integer
// exponents.
template <typename T>
std::vector<Inputs<T>> PowInputs() {
  const int64_t n = kF64Points / SampleDivisor();
  const bool f32 = kIsF32<T>;
  // Bases near 1 with large exponents: y log x up to ~700 from a log x below 0.35, where an
  // error in log x is amplified the most.
  return {RandomBits<T>(n / 4, 11),
          RandomPow<T>(n / 2, f32 ? 1e-4 : 1e-6, f32 ? 1e4 : 1e3, f32 ? 30 : 50, false, 12),
          RandomPow<T>(n / 6, 0.7, 1.42, f32 ? 250 : 2000, false, 14),
          RandomPow<T>(n - n / 4 - n / 2 - n / 6, f32 ? 1e-4 : 1e-6, f32 ? 1e4 : 1e3, f32 ? 30 : 50,
                       true, 13)};
}

void CheckUnary(Intrinsic fn) {
  {
    SCOPED_TRACE("f32");
    CheckAccuracy<float>(fn, {BitSweepF32()});
  }
  {
    SCOPED_TRACE("f64");
    CheckAccuracy<double>(fn, F64Inputs(fn));
  }
}

TEST(VectorMathAccuracy, Exp) {
  CheckUnary(Intrinsic::kExp);
}
TEST(VectorMathAccuracy, Log) {
  CheckUnary(Intrinsic::kLog);
}
TEST(VectorMathAccuracy, Tanh) {
  CheckUnary(Intrinsic::kTanh);
}
TEST(VectorMathAccuracy, Atan) {
  CheckUnary(Intrinsic::kAtan);
}
TEST(VectorMathAccuracy, Asin) {
  CheckUnary(Intrinsic::kAsin);
}
TEST(VectorMathAccuracy, Acos) {
  CheckUnary(Intrinsic::kAcos);
}
TEST(VectorMathAccuracy, Erf) {
  CheckUnary(Intrinsic::kErf);
}
TEST(VectorMathAccuracy, Sin) {
  CheckUnary(Intrinsic::kSin);
}
TEST(VectorMathAccuracy, Cos) {
  CheckUnary(Intrinsic::kCos);
}
TEST(VectorMathAccuracy, Pow) {
  {
    SCOPED_TRACE("f32");
    CheckAccuracy<float>(Intrinsic::kPow, PowInputs<float>());
  }
  {
    SCOPED_TRACE("f64");
    CheckAccuracy<double>(Intrinsic::kPow, PowInputs<double>());
  }
}

// ---- f16 and bf16: computed through f32 ----

// A 16-bit float's bits as a position on the number line (-0 and +0 both 0, infinities one past
// the largest finite values), so that adjacent values differ by one.
int OrderedBits(uint16_t bits) {
  int magnitude = bits & 0x7fff;
  return bits & 0x8000 ? -magnitude : magnitude;
}

template <typename H>
void CheckHalfThroughF32(Intrinsic fn, DType t) {
  const int lanes = kLanesF32;
  MathKernel<H> narrow(fn, t, lanes);
  MathKernel<float> wide(fn, DType::kFloat32, lanes);
  const int64_t n = 1 << 16;  // every bit pattern
  std::vector<H> a(n), got(n), got_tail(n);
  std::vector<float> a32(n), out32(n);
  for (int64_t k = 0; k < n; ++k) {
    a[k].bits = static_cast<uint16_t>(k);
    a32[k] = a[k];
  }
  narrow.Run(a.data(), nullptr, got.data(), n - 5);  // the last 5 + 11 through the tail
  narrow.RunScalar(a.data() + n - 5, nullptr, got.data() + n - 5, 5);
  narrow.RunScalar(a.data(), nullptr, got_tail.data(), n);
  wide.Run(a32.data(), nullptr, out32.data(), n);
  int failures = 0;
  for (int64_t k = 0; k < n; ++k) {
    H want = out32[k];
    for (const H& g : {got[k], got_tail[k]}) {
      float w = want, gf = g;
      bool ok = std::isnan(w) || std::isnan(gf)
                    ? std::isnan(w) && std::isnan(gf)
                    : std::abs(OrderedBits(g.bits) - OrderedBits(want.bits)) <= 1 &&
                          ((w != 0 && gf != 0) || std::signbit(w) == std::signbit(gf));
      if (!ok && ++failures <= kMaxReportedFailures)
        ADD_FAILURE() << loop::IntrinsicName(fn) << " " << DTypeName(t) << ": x = " << float(a[k])
                      << " (bits 0x" << std::hex << a[k].bits << "), got " << gf << " (0x" << g.bits
                      << "), the f32 result rounded is " << w << " (0x" << want.bits << std::dec
                      << ")";
    }
  }
  std::printf("%s %s: all %" PRId64
              " bit patterns, vector loop and scalar tail: %d off by more "
              "than 1 ulp from the f32 result rounded\n",
              loop::IntrinsicName(fn), std::string(DTypeName(t)).c_str(), n, failures);
  EXPECT_EQ(failures, 0);
}

TEST(VectorMathAccuracy, HalfAndBFloat16ThroughF32) {
  for (Intrinsic fn : {Intrinsic::kExp, Intrinsic::kTanh, Intrinsic::kErf}) {
    SCOPED_TRACE(loop::IntrinsicName(fn));
    CheckHalfThroughF32<Half>(fn, DType::kFloat16);
    CheckHalfThroughF32<BFloat16>(fn, DType::kBFloat16);
  }
}

}  // namespace
}  // namespace kiln
