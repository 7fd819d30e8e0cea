// The LLVM code generator on hand-built PrimFuncs: every node kind, every dtype, every loop
// kind, against C++ loops and the ops' reference kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "ir/tensor.h"
#include "jit/kernel.h"

namespace kiln {
namespace {

using loop::BinaryOp;
using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Intrinsic;
using loop::Stmt;
using loop::Var;
using test::ErrorMessage;
using ::testing::HasSubstr;

loop::PrimFunc MakeFunc(const std::string& name, std::vector<Buffer> buffers, int num_inputs,
                        std::vector<Var> scalars, Stmt body) {
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = name;
  f->buffer_params = std::move(buffers);
  f->num_inputs = num_inputs;
  f->scalar_params = std::move(scalars);
  f->body = std::move(body);
  return f;
}

Buffer Buf(const std::string& name, DType t, std::vector<Expr> shape) {
  return loop::MakeBuffer(name, t, std::move(shape));
}

Expr I(int64_t v) {
  return loop::IntImm(v);
}

// out[i] = value(i) for i in [0, n): the shape of most tests.
Stmt Loop1D(const Var& i, const Expr& n, Stmt body, ForKind kind = ForKind::kSerial) {
  return loop::For(i, I(0), n, kind, std::move(body));
}

void Call(KernelFn fn, std::vector<void*> buffers, std::vector<int64_t> scalars = {}) {
  fn(buffers.data(), scalars.data());
}

// Bitwise equal, or both NaN.
::testing::AssertionResult SameTensor(const Tensor& actual, const Tensor& expected) {
  return test::TensorsNear(actual, expected, 0, 0);
}

// ---- a[i] = b[i] + c[i] with a run-time extent ----

TEST(LLVMCodegen, VectorAddScalarExtent) {
  Var n = loop::MakeVar("n");
  Var i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), b = Buf("b", DType::kFloat32, {n}),
         c = Buf("c", DType::kFloat32, {n});
  auto f = MakeFunc(
      "vadd", {b, c, a}, 2, {n},
      Loop1D(i, n, loop::Store(a, {i}, loop::Add(loop::Load(b, {i}), loop::Load(c, {i})))));
  auto mod = BuildLLVM({f});
  KernelFn fn = mod->Lookup("vadd");
  for (int64_t size : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1} << 20}) {
    std::vector<float> x(size), y(size), out(size, -1), expected(size);
    std::mt19937 rng(size);
    std::uniform_real_distribution<float> dist(-5, 5);
    for (int64_t k = 0; k < size; ++k) {
      x[k] = dist(rng);
      y[k] = dist(rng);
      expected[k] = x[k] + y[k];
    }
    Call(fn, {x.data(), y.data(), out.data()}, {size});
    EXPECT_EQ(out, expected) << "n = " << size;
  }
}

// ---- strides ----

// out[j, i] = in[j, i] where `in` is a transposed view (strides {1, N}) of row-major M x N
// data: out becomes the transpose. Both shapes are symbolic.
TEST(LLVMCodegen, StridedTranspose) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer in =
      loop::MakeBuffer("in", DType::kFloat32, {n, m}, loop::BufferNode::Scope::kGlobal, {I(1), n});
  Buffer out = Buf("out", DType::kFloat32, {n, m});
  Stmt body = loop::For(
      j, I(0), n, ForKind::kSerial,
      loop::For(i, I(0), m, ForKind::kSerial, loop::Store(out, {j, i}, loop::Load(in, {j, i}))));
  auto mod = BuildLLVM({MakeFunc("transpose", {in, out}, 1, {m, n}, body)});
  const int64_t M = 37, N = 53;
  std::vector<float> data(M * N), result(M * N, 0);
  for (int64_t k = 0; k < M * N; ++k) data[k] = static_cast<float>(k);
  Call(mod->Lookup("transpose"), {data.data(), result.data()}, {M, N});
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < N; ++c) ASSERT_EQ(result[c * M + r], data[r * N + c]) << r << "," << c;
}

// A single (flat) index into a 2-D buffer addresses elements directly, as after flattening.
TEST(LLVMCodegen, FlatIndexIntoMultiDimBuffer) {
  Var i = loop::MakeVar("i");
  Buffer in = Buf("in", DType::kInt32, {I(3), I(4)});
  Buffer out = Buf("out", DType::kInt32, {I(12)});
  auto mod = BuildLLVM(
      {MakeFunc("flat", {in, out}, 1, {},
                Loop1D(i, I(12), loop::Store(out, {i}, loop::Load(in, {loop::Sub(I(11), i)}))))});
  std::vector<int32_t> x(12), y(12);
  for (int k = 0; k < 12; ++k) x[k] = k * 3;
  Call(mod->Lookup("flat"), {x.data(), y.data()});
  for (int k = 0; k < 12; ++k) EXPECT_EQ(y[k], x[11 - k]);
}

// ---- binary operators, every dtype ----

// The graph op whose reference kernel defines a loop operator ("" where there is none).
const char* ReferenceOp(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
    case BinaryOp::kMin:
      return "minimum";
    case BinaryOp::kMax:
      return "maximum";
    case BinaryOp::kShl:
      return "shift_left";
    case BinaryOp::kShr:
      return "shift_right";
    case BinaryOp::kEQ:
      return "equal";
    case BinaryOp::kNE:
      return "not_equal";
    case BinaryOp::kLT:
      return "less";
    case BinaryOp::kLE:
      return "less_equal";
    case BinaryOp::kGT:
      return "greater";
    case BinaryOp::kGE:
      return "greater_equal";
    case BinaryOp::kAnd:
      return "and";
    case BinaryOp::kOr:
      return "or";
    default:
      return "";
  }
}

// Floor division and modulo as binary_ops.def defines them, with kiln's x // 0 == x % 0 == 0.
template <typename T>
T RefFloorDivMod(T a, T b, bool mod) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return mod ? T{0} : static_cast<T>(0 - static_cast<uint64_t>(a));
      T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) {
        --q;
        r = static_cast<T>(r + b);
      }
      return mod ? r : q;
    } else {
      return mod ? static_cast<T>(a % b) : static_cast<T>(a / b);
    }
  } else {
    if (!mod) return std::floor(a / b);
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}

// Random values of `t`, with the edge cases the operators treat specially mixed in.
Tensor EdgeInputs(DType t, int64_t n, uint64_t seed) {
  Tensor x =
      test::RandomTensor(t, {n}, seed, IsFloat(t) ? -10.0 : -100.0, IsFloat(t) ? 10.0 : 100.0);
  if (t == DType::kUInt8) x = test::RandomTensor(t, {n}, seed, 0, 255);
  std::vector<double> edges = {0, 0, 1, -1, 2, -2, 7, -7};
  if (IsFloat(t)) {
    edges.insert(edges.end(), {std::nan(""), 0.5, -0.5, -0.0});
  } else if (t != DType::kBool) {
    double lo = t == DType::kUInt8   ? 0
                : t == DType::kInt8  ? -128
                : t == DType::kInt16 ? -32768
                                     : -2147483648.0;
    edges.insert(edges.end(), {lo, -lo - 1});
  }
  for (size_t k = 0; k < edges.size() && static_cast<int64_t>(k) < n; ++k)
    x.SetFromDouble(static_cast<int64_t>(seed % 3 + 3 * k) % n, edges[k]);
  if (t == DType::kInt64) x.data<int64_t>()[1] = std::numeric_limits<int64_t>::min();
  return x;
}

TEST(LLVMCodegen, BinaryOpsEveryDType) {
  const std::vector<BinaryOp> ops = {
#define KILN_BINARY_OP(E, S, C) BinaryOp::E,
#include "ir/loop/binary_ops.def"
  };
  const int64_t n = 203;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                  DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8, DType::kBool}) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    Tensor x = EdgeInputs(t, n, 1), y = EdgeInputs(t, n, 2);
    std::vector<loop::PrimFunc> funcs;
    std::vector<BinaryOp> tested;
    for (BinaryOp op : ops) {
      bool arithmetic = !loop::IsComparison(op) && op != BinaryOp::kAnd && op != BinaryOp::kOr;
      if (t == DType::kBool && arithmetic && op != BinaryOp::kMin && op != BinaryOp::kMax) continue;
      if (t != DType::kBool && (op == BinaryOp::kAnd || op == BinaryOp::kOr)) continue;
      // Shifts are integer-only; their reference ops take the unsigned dtypes (signed right
      // shifts are covered by the loop IR's own folding tests).
      if ((op == BinaryOp::kShl || op == BinaryOp::kShr) && t != DType::kUInt8) continue;
      Var i = loop::MakeVar("i");
      Buffer a = Buf("a", t, {I(n)}), b = Buf("b", t, {I(n)});
      Buffer out = Buf("out", loop::IsComparison(op) ? DType::kBool : t, {I(n)});
      Expr value = loop::MakeBinary(op, loop::Load(a, {i}), loop::Load(b, {i}));
      funcs.push_back(MakeFunc(std::string("op_") + std::to_string(tested.size()), {a, b, out}, 2,
                               {}, Loop1D(i, I(n), loop::Store(out, {i}, value))));
      tested.push_back(op);
    }
    auto mod = BuildLLVM(funcs);
    for (size_t k = 0; k < tested.size(); ++k) {
      BinaryOp op = tested[k];
      SCOPED_TRACE(loop::BinaryOpName(op));
      Tensor out = Tensor::Empty(loop::IsComparison(op) ? DType::kBool : t, {n});
      Call(mod->Lookup(funcs[k]->name), {x.raw_data(), y.raw_data(), out.raw_data()});
      Tensor expected = Tensor::Empty(out.dtype(), {n});
      if (*ReferenceOp(op) &&
          (t != DType::kBool || op == BinaryOp::kEQ || op == BinaryOp::kNE ||
           op == BinaryOp::kAnd || op == BinaryOp::kOr || loop::IsComparison(op))) {
        expected = test::RunOne(ReferenceOp(op), {x, y});
      } else {
        DispatchDType(t, [&]<typename T>() {
          using C =
              std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
          for (int64_t e = 0; e < n; ++e) {
            C a = static_cast<C>(x.data<T>()[e]), b = static_cast<C>(y.data<T>()[e]);
            C r{};
            if (op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod) {
              if constexpr (!std::is_same_v<C, bool>)
                r = RefFloorDivMod<C>(a, b, op == BinaryOp::kFloorMod);
            } else if (op == BinaryOp::kMin) {
              r = b < a ? b : a;
            } else if (op == BinaryOp::kMax) {
              r = a < b ? b : a;
            }
            expected.data<T>()[e] = static_cast<T>(r);
          }
        });
      }
      EXPECT_TRUE(SameTensor(out, expected));
    }
  }
}

TEST(LLVMCodegen, IntegerDivisionByZeroIsZero) {
  Var i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kInt32, {I(4)}), q = Buf("q", DType::kInt32, {I(4)}),
         r = Buf("r", DType::kInt32, {I(4)}), d = Buf("d", DType::kInt32, {I(4)});
  Expr zero = loop::IntImm(0, DType::kInt32);
  Stmt body =
      loop::Seq({loop::Store(q, {i}, loop::FloorDiv(loop::Load(a, {i}), loop::Load(d, {i}))),
                 loop::Store(r, {i}, loop::FloorMod(loop::Load(a, {i}), loop::Load(d, {i})))});
  auto mod = BuildLLVM({MakeFunc("divzero", {a, d, q, r}, 2, {}, Loop1D(i, I(4), body))});
  std::vector<int32_t> x = {5, -5, std::numeric_limits<int32_t>::min(), 9}, div = {0, 0, -1, 4},
                       qo(4), ro(4);
  Call(mod->Lookup("divzero"), {x.data(), div.data(), qo.data(), ro.data()});
  EXPECT_EQ(qo, (std::vector<int32_t>{0, 0, std::numeric_limits<int32_t>::min(), 2}));
  EXPECT_EQ(ro, (std::vector<int32_t>{0, 0, 0, 1}));
}

// ---- intrinsics ----

double RefIntrinsic(Intrinsic fn, double a, double b, double c) {
  switch (fn) {
    case Intrinsic::kExp:
      return std::exp(a);
    case Intrinsic::kLog:
      return std::log(a);
    case Intrinsic::kSqrt:
      return std::sqrt(a);
    case Intrinsic::kTanh:
      return std::tanh(a);
    case Intrinsic::kErf:
      return std::erf(a);
    case Intrinsic::kSin:
      return std::sin(a);
    case Intrinsic::kCos:
      return std::cos(a);
    case Intrinsic::kAsin:
      return std::asin(a);
    case Intrinsic::kAcos:
      return std::acos(a);
    case Intrinsic::kAtan:
      return std::atan(a);
    case Intrinsic::kFloor:
      return std::floor(a);
    case Intrinsic::kCeil:
      return std::ceil(a);
    case Intrinsic::kRoundEven:
      return std::nearbyint(a);  // the default rounding mode: to even
    case Intrinsic::kFabs:
      return std::fabs(a);
    case Intrinsic::kPow:
      return std::pow(a, b);
    case Intrinsic::kFmod:
      return std::fmod(a, b);
    case Intrinsic::kFma:
      return std::fma(a, b, c);
  }
  return 0;
}

TEST(LLVMCodegen, IntrinsicsEveryFloatDType) {
  const std::vector<Intrinsic> fns = {
#define KILN_INTRINSIC(E, N, A) Intrinsic::E,
#include "ir/loop/intrinsics.def"
  };
  const int64_t n = 101;
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(DTypeName(t)));
    // Positive inputs (log, sqrt, pow's base), signed ones, and ties for round_even.
    Tensor pos = test::RandomTensor(t, {n}, 3, 0.01, 4.0);
    Tensor sgn = test::RandomTensor(t, {n}, 4, -4.0, 4.0);
    Tensor third = test::RandomTensor(t, {n}, 5, -2.0, 2.0);
    Tensor unit = test::RandomTensor(t, {n}, 6, -1.0, 1.0);  // asin and acos's domain
    for (int k = 0; k < 6; ++k) sgn.SetFromDouble(k, -2.5 + k);
    std::vector<loop::PrimFunc> funcs;
    for (Intrinsic fn : fns) {
      Var i = loop::MakeVar("i");
      Buffer a = Buf("a", t, {I(n)}), b = Buf("b", t, {I(n)}), c = Buf("c", t, {I(n)}),
             out = Buf("out", t, {I(n)});
      std::vector<Expr> args = {loop::Load(a, {i}), loop::Load(b, {i}), loop::Load(c, {i})};
      args.resize(loop::IntrinsicArity(fn));
      funcs.push_back(MakeFunc(std::string("fn_") + loop::IntrinsicName(fn), {a, b, c, out}, 3, {},
                               Loop1D(i, I(n), loop::Store(out, {i}, loop::Call(fn, args)))));
    }
    auto mod = BuildLLVM(funcs);
    // f32 libm results are within an ulp or two; f16/bf16 results are rounded once on store.
    double rtol = t == DType::kFloat64   ? 1e-14
                  : t == DType::kFloat32 ? 1e-6
                  : t == DType::kFloat16 ? 1e-3
                                         : 8e-3;
    for (Intrinsic fn : fns) {
      SCOPED_TRACE(loop::IntrinsicName(fn));
      bool positive = fn == Intrinsic::kLog || fn == Intrinsic::kSqrt || fn == Intrinsic::kPow;
      bool in_unit = fn == Intrinsic::kAsin || fn == Intrinsic::kAcos;
      const Tensor& a = positive ? pos : in_unit ? unit : sgn;
      const Tensor& b = fn == Intrinsic::kFmod ? pos : sgn;
      Tensor out = Tensor::Empty(t, {n});
      Call(mod->Lookup(std::string("fn_") + loop::IntrinsicName(fn)),
           {a.raw_data(), b.raw_data(), third.raw_data(), out.raw_data()});
      Tensor expected = Tensor::Empty(t, {n});
      for (int64_t e = 0; e < n; ++e) {
        double r = RefIntrinsic(fn, a.GetAsDouble(e), b.GetAsDouble(e), third.GetAsDouble(e));
        if (t == DType::kFloat32) r = static_cast<float>(r);
        expected.SetFromDouble(e, r);
      }
      EXPECT_TRUE(test::TensorsNear(out, expected, 1e-6, rtol));
    }
  }
}

// ---- casts: every pair against the reference `cast` kernel ----

Tensor CastInputs(DType t) {
  std::vector<double> values;
  if (t == DType::kBool) {
    values = {0, 1, 1, 0};
  } else if (IsFloat(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    values = {0,
              -0.0,
              1,
              -1,
              0.5,
              -0.5,
              1.5,
              2.5,
              -2.5,
              3.7,
              -3.7,
              100.25,
              127.9,
              128,
              -128.9,
              -129,
              255.9,
              256,
              300,
              -300,
              32767.5,
              -32769,
              65504,
              65519,
              65520,
              70000,
              -70000,
              1e10,
              -1e10,
              3e38,
              -3e38,
              1.0 / 3,
              1.00048828125,
              1.00146484375,
              1.00390625,
              1.01171875,
              9.2233720368547758e18,
              -9.3e18,
              std::nan(""),
              inf,
              -inf};
  } else {
    values = {0,      1,     -1,    2,      -2,       127,        -128,
              128,    255,   256,   -129,   1000,     -1000,      32767,
              -32768, 65535, 70000, -70000, 16777217, 2147483647, -2147483648.0};
  }
  Tensor x = Tensor::Empty(t, {static_cast<int64_t>(values.size())});
  DispatchDType(t, [&]<typename T>() {
    for (size_t k = 0; k < values.size(); ++k) {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
        x.data<T>()[k] = static_cast<T>(static_cast<int64_t>(values[k]));  // wraps
      else if constexpr (std::is_same_v<T, bool>)
        x.data<T>()[k] = values[k] != 0;
      else
        x.data<T>()[k] = static_cast<T>(static_cast<float>(values[k]));
    }
    if constexpr (std::is_same_v<T, double>) {
      x.data<T>()[0] = 1.0 + 1e-12;  // rounds differently through f32
      x.data<T>()[1] = 0.1;
    }
    if constexpr (std::is_same_v<T, int64_t>) {
      x.data<T>()[0] = (int64_t{1} << 53) + 1;  // not exact in f64
      x.data<T>()[1] = std::numeric_limits<int64_t>::max();
      x.data<T>()[2] = std::numeric_limits<int64_t>::min();
      x.data<T>()[3] = (int64_t{1} << 40) + 12345;
    }
  });
  return x;
}

TEST(LLVMCodegen, CastsEveryDTypePair) {
  std::vector<DType> dtypes;
#define KILN_X(e, n, t, s) dtypes.push_back(DType::e);
  KILN_DTYPES(KILN_X)
#undef KILN_X
  std::vector<loop::PrimFunc> funcs;
  for (DType from : dtypes) {
    int64_t n = CastInputs(from).numel();
    for (DType to : dtypes) {
      Var i = loop::MakeVar("i");
      Buffer in = Buf("in", from, {I(n)}), out = Buf("out", to, {I(n)});
      funcs.push_back(
          MakeFunc(StrCat("cast_", DTypeName(from), "_", DTypeName(to)), {in, out}, 1, {},
                   Loop1D(i, I(n), loop::Store(out, {i}, loop::Cast(to, loop::Load(in, {i}))))));
    }
  }
  auto mod = BuildLLVM(funcs);
  for (DType from : dtypes) {
    Tensor in = CastInputs(from);
    for (DType to : dtypes) {
      SCOPED_TRACE(StrCat(DTypeName(from), " -> ", DTypeName(to)));
      Tensor out = Tensor::Empty(to, {in.numel()});
      Call(mod->Lookup(StrCat("cast_", DTypeName(from), "_", DTypeName(to))),
           {in.raw_data(), out.raw_data()});
      Tensor expected = test::RunOne("cast", {in}, {{"dtype", to}});
      // Integers compare exactly (GetAsDouble would round i64).
      if (!IsFloat(to)) {
        EXPECT_EQ(std::memcmp(out.raw_data(), expected.raw_data(), out.nbytes()), 0);
        for (int64_t e = 0; e < in.numel(); ++e)
          EXPECT_EQ(out.GetAsDouble(e), expected.GetAsDouble(e))
              << "element " << e << " = " << in.GetAsDouble(e);
      }
      EXPECT_TRUE(SameTensor(out, expected));
    }
  }
}

// The baseline x86-64 CPU has no F16C: f16 conversion goes through libgcc's helpers.
TEST(LLVMCodegen, Float16WithoutF16C) {
  Var i = loop::MakeVar("i");
  const int64_t n = 37;
  Buffer a = Buf("a", DType::kFloat16, {I(n)}), b = Buf("b", DType::kFloat16, {I(n)});
  Expr v = loop::Load(a, {i});
  auto f = MakeFunc(
      "half", {a, b}, 1, {},
      Loop1D(
          i, I(n),
          loop::Store(b, {i}, loop::Add(loop::Mul(v, v), loop::Call(Intrinsic::kRoundEven, {v})))));
  CodegenOptions options;
  options.mcpu = "x86-64";
  auto mod = BuildLLVM({f}, options);
  Tensor x = test::RandomTensor(DType::kFloat16, {n}, 9, -30, 30);
  Tensor out = Tensor::Empty(DType::kFloat16, {n}), expected = Tensor::Empty(DType::kFloat16, {n});
  for (int64_t e = 0; e < n; ++e) {
    float xv = x.data<Half>()[e];
    expected.data<Half>()[e] = Half(xv * xv + std::nearbyint(xv));
  }
  Call(mod->Lookup("half"), {x.raw_data(), out.raw_data()});
  EXPECT_TRUE(SameTensor(out, expected));
}

// ---- select, not, if-then-else, let ----

TEST(LLVMCodegen, SelectNotIfLet) {
  Var i = loop::MakeVar("i");
  Var t = loop::MakeVar("t", DType::kFloat32);
  const int64_t n = 64;
  Buffer a = Buf("a", DType::kFloat32, {I(n)}), out = Buf("out", DType::kFloat32, {I(n)});
  Expr x = loop::Load(a, {i});
  Expr f = loop::FloatImm(0);
  Expr cond =
      loop::MakeBinary(BinaryOp::kAnd, loop::MakeBinary(BinaryOp::kGT, t, loop::FloatImm(1)),
                       loop::Not(loop::MakeBinary(BinaryOp::kLT, x, loop::FloatImm(-3))));
  Stmt body = loop::LetStmt(
      t, loop::Mul(x, loop::FloatImm(2)),
      loop::IfThenElse(
          cond,
          loop::Store(out, {i},
                      loop::Select(loop::MakeBinary(BinaryOp::kGT, x, loop::FloatImm(2)), t,
                                   loop::Sub(f, t))),
          loop::Store(out, {i}, loop::FloatImm(-100))));
  auto mod = BuildLLVM({MakeFunc("sel", {a, out}, 1, {}, Loop1D(i, I(n), body))});
  std::vector<float> xs(n), ys(n);
  for (int k = 0; k < n; ++k) xs[k] = -4.0f + 0.125f * k;
  Call(mod->Lookup("sel"), {xs.data(), ys.data()});
  for (int k = 0; k < n; ++k) {
    float tv = xs[k] * 2;
    float e = (tv > 1 && !(xs[k] < -3)) ? (xs[k] > 2 ? tv : -tv) : -100.0f;
    EXPECT_EQ(ys[k], e) << k;
  }
}

// If without an else, and Evaluate (a value computed for nothing).
TEST(LLVMCodegen, IfWithoutElseAndEvaluate) {
  Var i = loop::MakeVar("i");
  Buffer out = Buf("out", DType::kInt64, {I(10)});
  Stmt body =
      loop::Seq({loop::Evaluate(loop::Mul(i, I(3))),
                 loop::IfThenElse(loop::MakeBinary(BinaryOp::kEQ, loop::FloorMod(i, I(3)), I(0)),
                                  loop::Store(out, {i}, i))});
  auto mod = BuildLLVM({MakeFunc("ifonly", {out}, 0, {}, Loop1D(i, I(10), body))});
  std::vector<int64_t> o(10, -1);
  Call(mod->Lookup("ifonly"), {o.data()});
  EXPECT_EQ(o, (std::vector<int64_t>{0, -1, -1, 3, -1, -1, 6, -1, -1, 9}));
}

// ---- local buffers ----

TEST(LLVMCodegen, LocalAllocFree) {
  Var n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), r = loop::MakeVar("r");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  // A symbolic-size temp (heap) and a 4-element one per iteration (stack).
  Buffer big = loop::MakeBuffer("big", DType::kFloat32, {n}, loop::BufferNode::Scope::kLocal);
  Buffer small =
      loop::MakeBuffer("small", DType::kFloat32, {I(4)}, loop::BufferNode::Scope::kLocal);
  Stmt per_element = loop::Seq({
      loop::Alloc(small),
      loop::For(j, I(0), I(4), ForKind::kSerial,
                loop::Store(small, {j},
                            loop::Mul(loop::Load(big, {loop::Sub(loop::Sub(n, I(1)), i)}),
                                      loop::Cast(DType::kFloat32, j)))),
      loop::Store(out, {i}, loop::Add(loop::Load(small, {I(3)}), loop::Load(small, {I(1)}))),
      loop::Free(small),
  });
  Stmt body = loop::Seq({
      loop::Alloc(big),
      loop::For(r, I(0), n, ForKind::kSerial,
                loop::Store(big, {r}, loop::Add(loop::Load(a, {r}), loop::FloatImm(1)))),
      loop::For(i, I(0), n, ForKind::kSerial, per_element),
      loop::Free(big),
  });
  auto mod = BuildLLVM({MakeFunc("local", {a, out}, 1, {n}, body)});
  for (int64_t size : {1, 5, 3000}) {
    std::vector<float> x(size), y(size);
    for (int64_t k = 0; k < size; ++k) x[k] = 0.5f * k;
    Call(mod->Lookup("local"), {x.data(), y.data()}, {size});
    for (int64_t k = 0; k < size; ++k) EXPECT_EQ(y[k], (x[size - 1 - k] + 1) * 4) << k;
  }
}

TEST(LLVMCodegen, LocalBufferErrors) {
  Buffer local = loop::MakeBuffer("tmp", DType::kFloat32, {I(4)}, loop::BufferNode::Scope::kLocal);
  Buffer out = Buf("out", DType::kFloat32, {I(4)});
  auto unallocated =
      MakeFunc("noalloc", {out}, 0, {}, loop::Store(out, {I(0)}, loop::Load(local, {I(0)})));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({unallocated}); }),
              HasSubstr("@noalloc: buffer 'tmp' is neither a parameter nor allocated"));
  auto after_free = MakeFunc("afterfree", {out}, 0, {},
                             loop::Seq({loop::Alloc(local), loop::Free(local),
                                        loop::Store(out, {I(0)}, loop::Load(local, {I(0)}))}));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({after_free}); }), HasSubstr("used after its Free"));
}

// ---- parallel ----

// out[i, j] = in[i, j] * s + scale, with a let outside the parallel loop, a local buffer
// inside it and a nested parallel loop: equal to the serial version.
loop::PrimFunc ParallelKernel(const std::string& name, ForKind outer, ForKind inner) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Var scale = loop::MakeVar("scale", DType::kFloat32);
  Buffer in = Buf("in", DType::kFloat32, {m, n}), out = Buf("out", DType::kFloat32, {m, n});
  Buffer row = loop::MakeBuffer("row", DType::kFloat32, {I(2)}, loop::BufferNode::Scope::kLocal);
  Stmt inner_body = loop::Seq({
      loop::Alloc(row),
      loop::Store(row, {I(0)}, loop::Load(in, {i, j})),
      loop::Store(row, {I(1)}, loop::Cast(DType::kFloat32, loop::Add(i, j))),
      loop::Store(out, {i, j},
                  loop::Add(loop::Mul(loop::Load(row, {I(0)}), scale), loop::Load(row, {I(1)}))),
      loop::Free(row),
  });
  Stmt body = loop::LetStmt(scale, loop::Cast(DType::kFloat32, loop::Add(m, I(1))),
                            loop::For(i, I(0), m, outer, loop::For(j, I(0), n, inner, inner_body)));
  return MakeFunc(name, {in, out}, 1, {m, n}, body);
}

TEST(LLVMCodegen, ParallelLoopMatchesSerial) {
  auto mod = BuildLLVM({ParallelKernel("par", ForKind::kParallel, ForKind::kSerial),
                        ParallelKernel("nested", ForKind::kParallel, ForKind::kParallel),
                        ParallelKernel("ser", ForKind::kSerial, ForKind::kSerial)});
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {257, 130}}) {
    std::vector<float> x(m * n), serial(m * n), par(m * n), nested(m * n);
    for (int64_t e = 0; e < m * n; ++e) x[e] = 0.25f * static_cast<float>(e % 97) - 3;
    Call(mod->Lookup("ser"), {x.data(), serial.data()}, {m, n});
    Call(mod->Lookup("par"), {x.data(), par.data()}, {m, n});
    Call(mod->Lookup("nested"), {x.data(), nested.data()}, {m, n});
    EXPECT_EQ(par, serial);
    EXPECT_EQ(nested, serial);
    EXPECT_EQ(serial[m * n - 1],
              x[m * n - 1] * static_cast<float>(m + 1) + static_cast<float>(m - 1 + n - 1));
  }
  EXPECT_THAT(mod->source(), HasSubstr("kiln_parallel_for"));
}

// ---- vectors ----

// lanes 8 with a scalar tail: out[io*8 + (0..7)] = a[...] * 2 + c, then the tail; plus a
// stride-2 gather, a scatter, a Ramp as data and a vector let.
TEST(LLVMCodegen, VectorLanesWithTail) {
  Var n = loop::MakeVar("n");
  Var io = loop::MakeVar("io"), i = loop::MakeVar("i");
  Var c = loop::MakeVar("c", DType::kFloat32);
  Buffer a = Buf("a", DType::kFloat32, {loop::Mul(n, I(2))});
  Buffer out = Buf("out", DType::kFloat32, {n}), even = Buf("even", DType::kFloat32, {n});
  Buffer spread = Buf("spread", DType::kFloat32, {loop::Mul(n, I(2))});
  Buffer idx = Buf("idx", DType::kInt32, {n});
  Expr base = loop::Mul(io, I(8));
  Expr lanes = loop::Ramp(base, 1, 8);
  Stmt vector_body = loop::LetStmt(
      c, loop::FloatImm(0.5),
      loop::Seq({
          loop::Store(
              out, {lanes},
              loop::Add(loop::Mul(loop::Load(a, {lanes}), loop::Broadcast(loop::FloatImm(2), 8)),
                        loop::Broadcast(c, 8))),
          loop::Store(even, {lanes}, loop::Load(a, {loop::Ramp(loop::Mul(base, I(2)), 2, 8)})),
          loop::Store(spread, {loop::Ramp(loop::Mul(base, I(2)), 2, 8)}, loop::Load(a, {lanes})),
          loop::Store(idx, {lanes}, loop::Cast(DType::kInt32, lanes)),
      }));
  Expr x = loop::Load(a, {i});
  Stmt tail_body = loop::Seq({
      loop::Store(out, {i}, loop::Add(loop::Mul(x, loop::FloatImm(2)), loop::FloatImm(0.5))),
      loop::Store(even, {i}, loop::Load(a, {loop::Mul(i, I(2))})),
      loop::Store(spread, {loop::Mul(i, I(2))}, x),
      loop::Store(idx, {i}, loop::Cast(DType::kInt32, i)),
  });
  Expr vec_end = loop::FloorDiv(n, I(8));
  Stmt body = loop::Seq({
      loop::For(io, I(0), vec_end, ForKind::kSerial, vector_body),
      loop::For(i, loop::Mul(vec_end, I(8)), loop::Sub(n, loop::Mul(vec_end, I(8))),
                ForKind::kSerial, tail_body),
  });
  auto mod = BuildLLVM({MakeFunc("vec8", {a, out, even, spread, idx}, 1, {n}, body)});
  for (int64_t size : {1, 8, 13, 1000}) {
    std::vector<float> av(2 * size), o(size), e(size), s(2 * size, -1);
    std::vector<int32_t> ix(size);
    for (int64_t k = 0; k < 2 * size; ++k) av[k] = 0.75f * static_cast<float>(k) - 10;
    Call(mod->Lookup("vec8"), {av.data(), o.data(), e.data(), s.data(), ix.data()}, {size});
    for (int64_t k = 0; k < size; ++k) {
      ASSERT_EQ(o[k], av[k] * 2 + 0.5f) << size << ":" << k;
      ASSERT_EQ(e[k], av[2 * k]) << size << ":" << k;
      ASSERT_EQ(s[2 * k], av[k]) << size << ":" << k;
      ASSERT_EQ(s[2 * k + 1], -1) << size << ":" << k;
      ASSERT_EQ(ix[k], k);
    }
  }
}

// A vector index that is not `base + lane * const` (a loaded index vector) is a gather.
TEST(LLVMCodegen, VectorGatherThroughLoadedIndices) {
  Var io = loop::MakeVar("io");
  Buffer table = Buf("table", DType::kFloat64, {I(100)});
  Buffer idx = Buf("idx", DType::kInt32, {I(16)});
  Buffer out = Buf("out", DType::kFloat64, {I(16)});
  Expr lanes = loop::Ramp(loop::Mul(io, I(4)), 1, 4);
  auto f =
      MakeFunc("gather", {table, idx, out}, 2, {},
               loop::For(io, I(0), I(4), ForKind::kSerial,
                         loop::Store(out, {lanes}, loop::Load(table, {loop::Load(idx, {lanes})}))));
  auto mod = BuildLLVM({f});
  std::vector<double> t(100), o(16);
  std::vector<int32_t> ix(16);
  for (int k = 0; k < 100; ++k) t[k] = k * 1.5;
  for (int k = 0; k < 16; ++k) ix[k] = (k * 37) % 100;
  Call(mod->Lookup("gather"), {t.data(), ix.data(), o.data()});
  for (int k = 0; k < 16; ++k) EXPECT_EQ(o[k], t[ix[k]]);
}

// Vector lanes through every kind of expression: comparisons into a bool buffer, select,
// libm calls lane by lane, LLVM intrinsics, casts and integer floor division.
TEST(LLVMCodegen, VectorExpressions) {
  Var io = loop::MakeVar("io");
  const int64_t n = 32;
  Buffer a = Buf("a", DType::kFloat32, {I(n)}), out = Buf("out", DType::kFloat32, {I(n)});
  Buffer mask = Buf("mask", DType::kBool, {I(n)}), q = Buf("q", DType::kInt32, {I(n)});
  Buffer h = Buf("h", DType::kBFloat16, {I(n)});
  Expr lanes = loop::Ramp(loop::Mul(io, I(8)), 1, 8);
  Expr x = loop::Load(a, {lanes});
  Expr positive = loop::MakeBinary(BinaryOp::kGT, x, loop::Broadcast(loop::FloatImm(0), 8));
  Expr as_int = loop::Cast(DType::kInt32, x);
  Stmt body = loop::Seq({
      loop::Store(out, {lanes},
                  loop::Select(positive, loop::Call(Intrinsic::kTanh, {x}),
                               loop::Call(Intrinsic::kExp, {x}))),
      loop::Store(mask, {lanes}, loop::Not(positive)),
      loop::Store(q, {lanes},
                  loop::FloorDiv(as_int, loop::Broadcast(loop::IntImm(3, DType::kInt32), 8))),
      loop::Store(h, {lanes},
                  loop::Cast(DType::kBFloat16,
                             loop::Call(Intrinsic::kSqrt, {loop::Call(Intrinsic::kFabs, {x})}))),
  });
  auto mod = BuildLLVM({MakeFunc("vexpr", {a, out, mask, q, h}, 1, {},
                                 loop::For(io, I(0), I(n / 8), ForKind::kSerial, body))});
  std::vector<float> av(n), o(n);
  std::vector<uint8_t> m(n, 7);
  std::vector<int32_t> qv(n);
  std::vector<BFloat16> hv(n);
  for (int k = 0; k < n; ++k) av[k] = 0.37f * static_cast<float>(k) - 6.1f;
  Call(mod->Lookup("vexpr"), {av.data(), o.data(), m.data(), qv.data(), hv.data()});
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(o[k], av[k] > 0 ? std::tanh(av[k]) : std::exp(av[k]), 1e-6) << k;
    EXPECT_EQ(m[k], av[k] > 0 ? 0 : 1) << k;
    int32_t iv = static_cast<int32_t>(av[k]);
    EXPECT_EQ(qv[k], iv >= 0 ? iv / 3 : -((-iv + 2) / 3)) << k;
    EXPECT_EQ(hv[k].bits, BFloat16(std::sqrt(std::fabs(av[k]))).bits) << k;
  }
}

// kVectorized on a scalar body and kUnrolled: correct results, and the loop hints are in the
// IR (before optimization consumes them, so at -O0).
TEST(LLVMCodegen, VectorizedAndUnrolledLoops) {
  Var n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", DType::kFloat32, {n, I(8)}), out = Buf("out", DType::kFloat32, {n, I(8)});
  Stmt body = loop::For(
      i, I(0), n, ForKind::kSerial,
      loop::Seq(
          {loop::For(j, I(0), I(8), ForKind::kVectorized,
                     loop::Store(out, {i, j}, loop::Mul(loop::Load(a, {i, j}), loop::FloatImm(3)))),
           loop::For(
               k, I(0), I(4), ForKind::kUnrolled,
               loop::Store(out, {i, k}, loop::Add(loop::Load(out, {i, k}), loop::FloatImm(1))))}));
  auto f = MakeFunc("hints", {a, out}, 1, {n}, body);
  for (int level : {0, 3}) {
    CodegenOptions options;
    options.opt_level = level;
    auto mod = BuildLLVM({f}, options);
    if (level == 0) {
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.vectorize.enable"));
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.vectorize.width"));
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.unroll.full"));
    }
    const int64_t rows = 5;
    std::vector<float> x(rows * 8), y(rows * 8);
    for (int e = 0; e < rows * 8; ++e) x[e] = static_cast<float>(e) - 7;
    Call(mod->Lookup("hints"), {x.data(), y.data()}, {rows});
    for (int e = 0; e < rows * 8; ++e) EXPECT_EQ(y[e], x[e] * 3 + (e % 8 < 4 ? 1 : 0)) << e;
  }
}

// A serial loop that carries two sums gets interleaving and no-unroll hints (a loop of one sum
// or one that stores along its variable gets none); the sums come out right either way.
TEST(LLVMCodegen, LoopsOfTwoSumsAreInterleaved) {
  Var k = loop::MakeVar("k");
  const int64_t len = 300;
  Buffer a = Buf("a", DType::kFloat32, {I(len)}), out = Buf("out", DType::kFloat32, {I(2)});
  auto sums = [&](bool two) {
    Stmt update0 = loop::Store(out, {I(0)}, loop::Add(loop::Load(out, {I(0)}), loop::Load(a, {k})));
    Stmt update1 = loop::Store(
        out, {I(1)},
        loop::Add(loop::Load(out, {I(1)}), loop::Mul(loop::Load(a, {k}), loop::Load(a, {k}))));
    Stmt body = loop::Seq({loop::Store(out, {I(0)}, loop::FloatImm(0)),
                           loop::Store(out, {I(1)}, loop::FloatImm(0)),
                           loop::For(k, I(0), I(len), ForKind::kSerial,
                                     two ? loop::Seq({update0, update1}) : update0)});
    return MakeFunc(two ? "two_sums" : "one_sum", {a, out}, 1, {}, body);
  };
  for (bool two : {false, true}) {
    CodegenOptions o0;
    o0.opt_level = 0;
    std::string source = BuildLLVM({sums(two)}, o0)->source();
    EXPECT_EQ(source.find("llvm.loop.interleave.count") != std::string::npos, two) << source;
    EXPECT_EQ(source.find("llvm.loop.unroll.disable") != std::string::npos, two) << source;
    auto mod = BuildLLVM({sums(two)}, CodegenOptions{});
    std::vector<float> x(len), y(2, -1);
    double s = 0, s2 = 0;
    for (int e = 0; e < len; ++e) {
      x[e] = static_cast<float>((e * 37) % 101) / 50.0f - 1.0f;
      s += x[e];
      s2 += static_cast<double>(x[e]) * x[e];
    }
    Call(mod->Lookup(two ? "two_sums" : "one_sum"), {x.data(), y.data()});
    EXPECT_NEAR(y[0], s, 1e-4);
    if (two) {
      EXPECT_NEAR(y[1], s2, 1e-3);
    }
  }
}

// A loop of one sum or max over a short constant trip count (under 8 vectors) gets a vector
// width, no interleaving and no unroll, so LLVM vectorizes it instead of unrolling it into one
// scalar chain; longer and shorter ones get no hint. Sums and maxima come out right either way,
// for trip counts the width divides (40: 8 lanes), does not (49), and at the edges (8, 9).
TEST(LLVMCodegen, ShortReductionsGetAVectorWidth) {
  Var k = loop::MakeVar("k");
  for (int64_t len : {5, 8, 9, 12, 40, 49, 63, 300}) {
    SCOPED_TRACE(len);
    Buffer a = Buf("a", DType::kFloat32, {I(len)}), out = Buf("out", DType::kFloat32, {I(2)});
    Expr sum = loop::Load(out, {I(0)}), max = loop::Load(out, {I(1)}), v = loop::Load(a, {k});
    Stmt body = loop::Seq(
        {loop::Store(out, {I(0)}, loop::FloatImm(0)),
         loop::For(k, I(0), I(len), ForKind::kSerial, loop::Store(out, {I(0)}, loop::Add(sum, v))),
         loop::Store(out, {I(1)}, loop::FloatImm(-INFINITY)),
         loop::For(k, I(0), I(len), ForKind::kSerial,
                   loop::Store(out, {I(1)},
                               loop::Select(loop::MakeBinary(BinaryOp::kGT, v, max), v, max)))});
    auto f = MakeFunc("short_sum", {a, out}, 1, {}, body);
    CodegenOptions o0;
    o0.opt_level = 0;
    const std::string source = BuildLLVM({f}, o0)->source();
    // Hinted below 8 vectors of the target's f32 lanes (16 with AVX-512, 8 with AVX2).
    const int64_t lanes = VectorRegisterBits(o0) / 32;
    const bool hinted = len >= 8 && len < 8 * lanes;
    EXPECT_EQ(source.find("llvm.loop.vectorize.width") != std::string::npos, hinted) << source;
    EXPECT_EQ(source.find("llvm.loop.unroll.disable") != std::string::npos, hinted) << source;
    auto mod = BuildLLVM({f}, CodegenOptions{});
    std::vector<float> x(len), y(2, -1);
    double s = 0;
    float m = -INFINITY;
    for (int64_t e = 0; e < len; ++e) {
      x[e] = static_cast<float>((e * 37) % 101) / 50.0f - 1.0f;
      s += x[e];
      m = std::max(m, x[e]);
    }
    Call(mod->Lookup("short_sum"), {x.data(), y.data()});
    EXPECT_NEAR(y[0], s, 1e-4);
    EXPECT_EQ(y[1], m);
    // Without reassociation the hint would still let LLVM split the sum into partial sums
    // (an explicit width allows reordering): no hint, and the sum is the in-order one.
    CodegenOptions exact;
    exact.reassociate_reductions = false;
    exact.fp_contract = false;
    auto strict = BuildLLVM({f}, exact);
    EXPECT_EQ(strict->source().find("llvm.loop.vectorize.width"), std::string::npos);
    float in_order = 0;
    for (float e : x) in_order += e;
    Call(strict->Lookup("short_sum"), {x.data(), y.data()});
    EXPECT_EQ(y[0], in_order);
    EXPECT_EQ(y[1], m);
  }
}

// Symbolic extents (shape-generic kernels): a tail shorter than a vector (`n % 4`) keeps its
// scalar loop, neither vectorized nor unrolled, and a loop over `n` is not unrolled; constant
// extents get no such hint. Each copies right for every n, 0 and 1 included.
TEST(LLVMCodegen, SymbolicLoopsAreNotUnrolled) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), j = loop::MakeVar("j"),
      k = loop::MakeVar("k");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n}),
         c = Buf("c", DType::kFloat32, {I(64)}), cout = Buf("cout", DType::kFloat32, {I(64)});
  Expr full = loop::Mul(loop::FloorDiv(n, I(4)), I(4));
  Stmt body = loop::Seq(
      {Loop1D(i, full, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(2)))),
       loop::For(j, full, loop::FloorMod(n, I(4)), ForKind::kSerial,
                 loop::Store(out, {j}, loop::Mul(loop::Load(a, {j}), loop::FloatImm(3)))),
       Loop1D(k, I(64), loop::Store(cout, {k}, loop::Load(c, {k})))});
  auto f = MakeFunc("sym", {a, out, c, cout}, 2, {n}, body);
  CodegenOptions o0;
  o0.opt_level = 0;
  const std::string source = BuildLLVM({f}, o0)->source();
  // Two symbolic loops hinted (the constant one not), not to unroll, the tail not to vectorize.
  size_t hinted = 0, at = 0;
  while ((at = source.find("!llvm.loop !", at)) != std::string::npos) ++hinted, ++at;
  EXPECT_EQ(hinted, 2u) << source;
  EXPECT_THAT(source, HasSubstr("!{!\"llvm.loop.unroll.disable\"}"));
  EXPECT_THAT(source, HasSubstr("!{!\"llvm.loop.vectorize.enable\", i1 false}"));
  auto mod = BuildLLVM({f});
  std::vector<float> x(64), y(64), cx(64, 1.5f), cy(64);
  for (int e = 0; e < 64; ++e) x[e] = static_cast<float>(e) - 20.5f;
  for (int64_t len : {0, 1, 3, 4, 17, 63, 64}) {
    std::fill(y.begin(), y.end(), -7.0f);
    Call(mod->Lookup("sym"), {x.data(), y.data(), cx.data(), cy.data()}, {len});
    const int64_t cut = len / 4 * 4;
    for (int64_t e = 0; e < 64; ++e)
      EXPECT_EQ(y[e], e < cut ? x[e] * 2 : e < len ? x[e] * 3 : -7.0f) << len << " " << e;
    EXPECT_EQ(cy, cx);
  }
}

// A kMaxOrdered update (`acc = v > acc ? v : acc`, as LowerReductions writes it) becomes a
// vectorized llvm.maxnum: the max of any length, odd ones and 1 included, is exact.
TEST(LLVMCodegen, OrderedMaxIsAVectorMax) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {I(1)});
  Expr acc = loop::Load(out, {I(0)}), v = loop::Load(a, {i});
  Stmt update =
      loop::Store(out, {I(0)}, loop::Select(loop::MakeBinary(BinaryOp::kGT, v, acc), v, acc));
  Stmt body =
      loop::Seq({loop::Store(out, {I(0)}, loop::FloatImm(-INFINITY)), Loop1D(i, n, update)});
  auto mod = BuildLLVM({MakeFunc("omax", {a, out}, 1, {n}, body)});
  EXPECT_THAT(mod->source(), HasSubstr("llvm.maxnum"));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100, 100);
  for (int64_t len : {1, 7, 300, 4099}) {
    std::vector<float> x(len);
    for (float& e : x) e = dist(rng);
    float result = 0;
    Call(mod->Lookup("omax"), {x.data(), &result}, {len});
    EXPECT_EQ(result, *std::max_element(x.begin(), x.end())) << len;
  }
}

// ---- schedule blocks ----

// out[i] = sum_k in[i, k] as a block with a reduction iter_var and an init.
TEST(LLVMCodegen, ScheduleBlockRunsInitOnFirstReductionIteration) {
  Var i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Var vi = loop::MakeVar("vi"), vk = loop::MakeVar("vk");
  Buffer in = Buf("in", DType::kInt32, {I(6), I(5)}), out = Buf("out", DType::kInt32, {I(6)});
  auto block = std::make_shared<loop::ScheduleBlockNode>();
  block->name = "rowsum";
  block->iter_vars = {{vi, I(6)}, {vk, I(5)}};
  block->is_reduce = {false, true};
  block->bindings = {i, k};
  block->init = loop::Store(out, {vi}, loop::IntImm(0, DType::kInt32));
  block->body = loop::Store(out, {vi}, loop::Add(loop::Load(out, {vi}), loop::Load(in, {vi, vk})));
  Stmt body =
      loop::For(i, I(0), I(6), ForKind::kSerial, loop::For(k, I(0), I(5), ForKind::kSerial, block));
  auto mod = BuildLLVM({MakeFunc("rowsum", {in, out}, 1, {}, body)});
  std::vector<int32_t> x(30), y(6, 12345);
  for (int e = 0; e < 30; ++e) x[e] = e - 10;
  Call(mod->Lookup("rowsum"), {x.data(), y.data()});
  for (int r = 0; r < 6; ++r) {
    int32_t s = 0;
    for (int c = 0; c < 5; ++c) s += x[r * 5 + c];
    EXPECT_EQ(y[r], s);
  }
}

// ---- options ----

TEST(LLVMCodegen, FastMathSumStaysClose) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {I(1)});
  Stmt body = loop::Seq(
      {loop::Store(out, {I(0)}, loop::FloatImm(0)),
       Loop1D(i, n,
              loop::Store(out, {I(0)}, loop::Add(loop::Load(out, {I(0)}), loop::Load(a, {i}))))});
  CodegenOptions options;
  options.fast_math = true;
  auto mod = BuildLLVM({MakeFunc("sum", {a, out}, 1, {n}, body)}, options);
  std::vector<float> x(10000);
  double expected = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    x[e] = static_cast<float>(e % 13) * 0.1f;
    expected += x[e];
  }
  float result = 0;
  Call(mod->Lookup("sum"), {x.data(), &result}, {static_cast<int64_t>(x.size())});
  EXPECT_NEAR(result, expected, 1e-3 * expected);
}

// mattr on the host CPU is appended to its features: turning AVX2 and FMA off still works.
TEST(LLVMCodegen, HostCpuWithFeaturesTurnedOff) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  Expr x = loop::Load(a, {i});
  auto f = MakeFunc("axpy", {a, out}, 1, {n},
                    Loop1D(i, n, loop::Store(out, {i}, loop::Add(loop::Mul(x, x), x))));
  CodegenOptions options;
  options.mattr = "-avx2,-fma";
  auto mod = BuildLLVM({f}, options);
  std::vector<float> xs(77), ys(77);
  for (int k = 0; k < 77; ++k) xs[k] = 0.3f * static_cast<float>(k) - 9;
  Call(mod->Lookup("axpy"), {xs.data(), ys.data()}, {77});
  for (int k = 0; k < 77; ++k) EXPECT_EQ(ys[k], xs[k] * xs[k] + xs[k]) << k;
}

// ---- errors ----

TEST(LLVMCodegen, ReduceIsRejected) {
  Var i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Buffer in = Buf("in", DType::kFloat32, {I(4), I(4)}), out = Buf("out", DType::kFloat32, {I(4)});
  Expr sum = loop::Reduce(loop::ReduceKind::kSum, loop::Load(in, {i, k}), {{k, I(4)}});
  auto f = MakeFunc("withreduce", {in, out}, 1, {}, Loop1D(i, I(4), loop::Store(out, {i}, sum)));
  try {
    BuildLLVM({f});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCompileError);
    EXPECT_THAT(e.what(), HasSubstr("@withreduce: Reduce must be lowered first"));
  }
}

TEST(LLVMCodegen, GpuLoopIsRejected) {
  Var i = loop::MakeVar("i");
  Buffer out = Buf("out", DType::kInt64, {I(4)});
  auto f = MakeFunc("ongpu", {out}, 0, {},
                    Loop1D(i, I(4), loop::Store(out, {i}, i), ForKind::kGpuThreadX));
  try {
    BuildLLVM({f});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCompileError);
    EXPECT_THAT(e.what(), HasSubstr("@ongpu: loop 'i' is bound to gpu.thread.x"));
  }
}

TEST(LLVMCodegen, OtherErrors) {
  Var undefined = loop::MakeVar("u");
  Buffer out = Buf("out", DType::kInt64, {I(4)});
  auto f = MakeFunc("undef", {out}, 0, {}, loop::Store(out, {I(0)}, undefined));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({f}); }),
              HasSubstr("@undef: variable 'u' is used but not defined"));
  auto g = MakeFunc("dup", {out}, 0, {}, loop::Store(out, {I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] {
                BuildLLVM({g, g});
              }),
              HasSubstr("@dup: two functions have this name"));
  auto libm = MakeFunc("expf", {out}, 0, {}, loop::Store(out, {I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({libm}); }),
              HasSubstr("@expf: the name of a library function that generated code calls"));
  auto h = MakeFunc("rank", {out}, 0, {}, loop::Store(out, {I(0), I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({h}); }),
              HasSubstr("@rank: buffer 'out' has rank 1 but is accessed with 2"));
  auto bad_call = MakeFunc("intexp", {out}, 0, {},
                           loop::Store(out, {I(0)}, loop::Call(Intrinsic::kExp, {I(2)})));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({bad_call}); }),
              HasSubstr("@intexp: exp needs float arguments"));
  auto mod = BuildLLVM({g});
  try {
    mod->Lookup("nope");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("no kernel 'nope'"));
  }
}

TEST(LLVMCodegen, IllTypedNodesAreCompileErrors) {
  Buffer out = Buf("out", DType::kInt64, {I(1)});
  // Built without MakeBinary, which would have refused it.
  Expr bad = std::make_shared<const loop::BinaryNode>(
      BinaryOp::kAdd, I(1), loop::IntImm(2, DType::kInt32), DType::kInt64, 1);
  auto f = MakeFunc("illtyped", {out}, 0, {}, loop::Store(out, {I(0)}, bad));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({f}); }),
              HasSubstr("@illtyped: operands of '+' differ: i64x1 vs i32x1"));
}

// Builds are independent: several threads may compile (and run) at once.
TEST(LLVMCodegen, ConcurrentBuilds) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      Var i = loop::MakeVar("i");
      Buffer out = Buf("out", DType::kInt64, {I(100)});
      auto f = MakeFunc(
          "fill", {out}, 0, {},
          Loop1D(i, I(100), loop::Store(out, {i}, loop::Mul(i, I(t + 1))), ForKind::kParallel));
      auto mod = BuildLLVM({f});
      std::vector<int64_t> o(100);
      Call(mod->Lookup("fill"), {o.data()});
      bool good = true;
      for (int k = 0; k < 100; ++k) good = good && o[k] == k * (t + 1);
      ok[t] = good;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

// ---- timings, source, registry ----

TEST(LLVMCodegen, TimingsSourceAndRegistry) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  auto f = MakeFunc(
      "scale_by_two", {a, out}, 1, {n},
      Loop1D(i, n, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(2)))));
  auto mod = GetCodegen("target.build.llvm").build({f}, CodegenOptions{});
  const CompileTimings& t = mod->timings();
  EXPECT_GE(t.lower_ms, 0);
  EXPECT_GE(t.opt_ms, 0);
  EXPECT_GT(t.codegen_ms, 0);
  EXPECT_THAT(mod->source(), HasSubstr("define void @scale_by_two(ptr"));
  std::vector<float> x = {1, 2, 3}, y(3);
  Call(mod->Lookup("scale_by_two"), {x.data(), y.data()}, {3});
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
  std::printf("compile times for a small kernel: lower %.2f ms, opt %.2f ms, codegen %.2f ms\n",
              t.lower_ms, t.opt_ms, t.codegen_ms);
  // The launch object: a CPU function, the PrimFunc's argument layout.
  const KernelEntry& e = mod->Entry("scale_by_two");
  EXPECT_FALSE(e.on_device());
  EXPECT_EQ(e.cpu, mod->Lookup("scale_by_two"));
  EXPECT_EQ(e.num_buffers, 2u);
  ASSERT_EQ(e.scalar_params.size(), 1u);
  EXPECT_EQ(e.scalar_params[0].get(), n.get());
  EXPECT_THAT(ErrorMessage([&] { mod->Entry("nope"); }),
              HasSubstr("no kernel 'nope' in this module (it has: scale_by_two)"));
}

TEST(CodegenRegistry, FindsEveryTargetOfTheListByKindOrName) {
  for (const char* kind : {"llvm", "cuda"}) {
    const CodeGenerator& g = GetCodegen(kind);
    EXPECT_EQ(g.kind, kind);
    EXPECT_EQ(&GetCodegen(std::string("target.build.") + kind), &g);
    EXPECT_TRUE(g.build && g.options && g.identity && g.emit) << kind;
    EXPECT_FALSE(g.formats.empty()) << kind;
    for (const CodeGenerator::EmitFormat& f : g.formats)
      EXPECT_TRUE(!f.name.empty() && f.extension.size() > 1 && f.extension[0] == '.')
          << kind << " format '" << f.name << "' extension '" << f.extension << "'";
  }
  EXPECT_EQ(GetCodegen("llvm").loop_pipeline, "cpu");
  EXPECT_EQ(GetCodegen("cuda").loop_pipeline, "gpu");
  EXPECT_THAT(ErrorMessage([] { GetCodegen("opencl"); }),
              HasSubstr("no code generator 'target.build.opencl' (registered: target.build.cuda, "
                        "target.build.llvm"));
  // Options come from a Target of the kind; the identity names what the code depends on.
  CodegenOptions cuda = GetCodegen("cuda").options(Target::Parse("cuda -arch=sm_80"));
  EXPECT_EQ(cuda.kind, "cuda");
  EXPECT_EQ(cuda.arch, "sm_80");
  EXPECT_THAT(GetCodegen("cuda").identity(cuda), HasSubstr("arch=sm_80"));
  CodegenOptions cpu = GetCodegen("llvm").options(Target::Parse("llvm -mcpu=znver3 -mattr=-avx2"));
  EXPECT_EQ(cpu.kind, "llvm");
  EXPECT_EQ(cpu.mcpu, "znver3");
  EXPECT_EQ(cpu.mattr, "-avx2");
  EXPECT_THAT(GetCodegen("llvm").identity(cpu), HasSubstr("x86_64"));
  EXPECT_THAT(GetCodegen("llvm").identity(cpu), HasSubstr("znver3"));
}

TEST(CodegenRegistry, AnotherTargetIsOneRegistration) {
  // A code generator registered at run time is found like the built-in ones; here one that
  // builds with LLVM under its own kind, as a third target would build with its own code.
  CodeGenerator g = GetCodegen("llvm");
  g.kind = "llvm_for_test";
  RegisterCodegen(g);
  EXPECT_EQ(GetCodegen("llvm_for_test").kind, "llvm_for_test");
  EXPECT_THAT(ErrorMessage([&] { RegisterCodegen(g); }),
              HasSubstr("code generator 'target.build.llvm_for_test' is already registered"));
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  auto f = MakeFunc(
      "negate", {a, out}, 1, {n},
      Loop1D(i, n, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(-1)))));
  auto mod = GetCodegen("llvm_for_test").build({f}, CodegenOptions{});
  std::vector<float> x = {1, -2, 3}, y(3);
  Call(mod->Lookup("negate"), {x.data(), y.data()}, {3});
  EXPECT_EQ(y, (std::vector<float>{-1, 2, -3}));
}

}  // namespace
}  // namespace kiln
