// The LLVM code generator on hand-built PrimFuncs: every node kind and every dtype (binary ops,
// intrinsics, casts, selects), against C++ loops and the ops' reference kernels. Local buffers,
// parallel and vector loops, options, errors: llvm_codegen_loops_test.cc.
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
#include "jit/llvm_codegen_util.h"

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

using codegen_test::Buf;
using codegen_test::Call;
using codegen_test::I;
using codegen_test::Loop1D;
using codegen_test::MakeFunc;
using codegen_test::SameTensor;

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

}  // namespace
}  // namespace kiln
