// LoopSimplify: golden tests on printed loop IR, run through the pass manager, plus one kernel
// compiled before and after to check that the rewrites keep every bit of the results.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "jit/kernel.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;
using test::RunF32Kernel;
using test::RunLoopPass;

Expr I(int64_t v, DType t = DType::kInt64) {
  return IntImm(v, t);
}
Expr F(double v, DType t = DType::kFloat32) {
  return FloatImm(v, t);
}
// A binary node built as it is, without the folding and identities of MakeBinary, so that the
// test controls exactly what the pass sees.
Expr Raw(BinaryOp op, Expr a, Expr b) {
  DType t = IsComparison(op) ? DType::kBool : a->dtype;
  return std::make_shared<const BinaryNode>(op, a, b, t, a->lanes);
}
Expr Cmp(BinaryOp op, Expr a, Expr b) {
  return MakeBinary(op, std::move(a), std::move(b));
}

// Scalars the expression cases use, all parameters of the kernel they run in.
struct Scalars {
  Var x = MakeVar("x"), y = MakeVar("y");
  Var x32 = MakeVar("x32", DType::kInt32), x8 = MakeVar("x8", DType::kInt8);
  Var fx = MakeVar("fx", DType::kFloat32), fy = MakeVar("fy", DType::kFloat32);
  Var h = MakeVar("h", DType::kFloat16), b = MakeVar("b", DType::kBool);
  std::vector<Var> all() const { return {x, y, x32, x8, fx, fy, h, b}; }
};

struct Case {
  Expr input;
  std::string expected;
};

// Simplifies every case's expression (each one statement of one kernel) and compares the text.
void ExpectSimplified(const Scalars& s, const std::vector<Case>& cases) {
  std::vector<Stmt> stmts;
  for (const Case& c : cases) stmts.push_back(Evaluate(c.input));
  PrimFunc out =
      RunLoopPass("LoopSimplify", MakePrimFunc({}, s.all(), std::make_shared<SeqNode>(stmts)));
  const SeqNode* seq = AsSeq(out->body);
  std::vector<Stmt> got = seq ? seq->stmts : std::vector<Stmt>{out->body};
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(Print(AsEvaluate(got[i])->value), cases[i].expected)
        << "input: " << Print(cases[i].input);
  // Simplified expressions are a fixpoint: a second run (the pipeline has two) changes nothing.
  PrimFunc again = RunLoopPass("LoopSimplify", out);
  EXPECT_EQ(again, out) << Print(out) << "\nbecame\n" << Print(again);
}

TEST(LoopSimplify, IntegerSumsAndProducts) {
  Scalars s;
  Expr x = s.x, y = s.y;
  ExpectSimplified(s, {
                          {Raw(BinaryOp::kAdd, x, I(0)), "x"},
                          {Add(Add(x, I(3)), I(4)), "x + 7"},
                          {Sub(Add(x, I(3)), I(5)), "x - 2"},
                          {Add(I(3), x), "x + 3"},
                          {Add(Add(x, I(2)), y), "x + y + 2"},
                          {Add(x, Add(y, I(2))), "x + y + 2"},
                          {Add(Sub(x, I(2)), I(2)), "x"},
                          {Add(x, I(-3)), "x - 3"},
                          {Sub(x, I(-3)), "x + 3"},
                          {Sub(x, x), "0"},
                          {Sub(Add(x, y), y), "x"},
                          {Sub(Add(x, y), x), "y"},
                          {Add(Sub(x, y), y), "x"},
                          {Sub(I(10), Add(x, I(3))), "7 - x"},
                          {Sub(Add(x, I(5)), Add(y, I(2))), "x - y + 3"},
                          {Mul(Mul(x, I(4)), I(8)), "x * 32"},
                          {Mul(I(4), x), "x * 4"},
                          {Mul(Add(x, I(1)), I(16)), "x * 16 + 16"},
                          {Mul(Mul(x, I(2)), y), "x * y * 2"},
                          {Mul(x, Sub(y, y)), "0"},
                          {Raw(BinaryOp::kMul, x, I(1)), "x"},
                          // Rules that must not fire: nothing to combine.
                          {Add(x, y), "x + y"},
                          {Mul(x, y), "x * y"},
                          {Sub(I(3), x), "3 - x"},
                      });
}

TEST(LoopSimplify, IntegerDivisionAndModulo) {
  Scalars s;
  Expr x = s.x, y = s.y;
  ExpectSimplified(
      s, {
             {FloorDiv(Mul(x, I(16)), I(16)), "x"},
             {FloorMod(Mul(x, I(16)), I(16)), "0"},
             {FloorDiv(Mul(x, I(32)), I(16)), "x * 2"},
             {FloorMod(Mul(x, I(32)), I(16)), "0"},
             {FloorDiv(Add(Mul(x, I(16)), y), I(16)), "x + y // 16"},
             {FloorMod(Add(Mul(x, I(16)), y), I(16)), "y % 16"},
             {FloorDiv(Add(y, Mul(x, I(16))), I(16)), "y // 16 + x"},
             {FloorDiv(Sub(y, Mul(x, I(16))), I(16)), "y // 16 - x"},
             {FloorDiv(Add(x, I(32)), I(16)), "x // 16 + 2"},
             {FloorMod(Add(x, I(33)), I(16)), "(x + 1) % 16"},
             {FloorDiv(Add(x, I(33)), I(16)), "(x + 1) // 16 + 2"},
             {FloorDiv(Add(Mul(x, I(16)), I(17)), I(16)), "x + 1"},
             {FloorDiv(FloorDiv(x, I(4)), I(8)), "x // 32"},
             {FloorDiv(FloorMod(x, I(8)), I(8)), "0"},
             {FloorDiv(FloorMod(x, I(8)), I(16)), "0"},
             {FloorMod(FloorMod(x, I(8)), I(16)), "x % 8"},
             {FloorMod(FloorMod(x, I(8)), I(8)), "x % 8"},
             {FloorMod(FloorMod(x, I(16)), I(8)), "x % 8"},
             {FloorMod(x, I(1)), "0"},
             {Raw(BinaryOp::kFloorDiv, x, I(1)), "x"},
             {Div(Mul(x, I(16)), I(16)), "x"},
             {Raw(BinaryOp::kFloorDiv, I(-7), I(2)), "-4"},
             {Raw(BinaryOp::kFloorMod, I(-7), I(2)), "1"},
             {Raw(BinaryOp::kDiv, I(-7), I(2)), "-3"},
             // Must not fire: no common factor, truncation, a modulo range larger than the divisor,
             // division by 0 and MIN / -1 (the code generator's defined behaviour decides).
             {FloorDiv(Add(x, I(1)), I(2)), "(x + 1) // 2"},
             {Div(Add(Mul(x, I(16)), y), I(16)), "(x * 16 + y) / 16"},
             {FloorDiv(FloorMod(x, I(16)), I(8)), "x % 16 // 8"},
             {FloorDiv(x, I(16)), "x // 16"},
             {FloorDiv(Sub(x, I(1)), I(16)), "(x - 1) // 16"},
             {Raw(BinaryOp::kFloorDiv, I(7), I(0)), "7 // 0"},
             {Raw(BinaryOp::kDiv, I(std::numeric_limits<int64_t>::min()), I(-1)),
              "-9223372036854775808 / -1"},
         });
}

TEST(LoopSimplify, MinMaxAndComparisons) {
  Scalars s;
  Expr x = s.x, y = s.y;
  ExpectSimplified(s, {
                          {Min(x, x), "x"},
                          {Min(I(3), x), "min(x, 3)"},
                          {Min(Min(x, I(3)), I(5)), "min(x, 3)"},
                          {Max(Max(x, I(3)), I(5)), "max(x, 5)"},
                          {Min(Add(x, I(4)), Add(x, I(1))), "x + 1"},
                          {Max(x, Add(x, I(2))), "x + 2"},
                          {Min(x, y), "min(x, y)"},
                          {Cmp(BinaryOp::kLT, I(3), x), "x > 3"},
                          {Cmp(BinaryOp::kGE, I(3), x), "x <= 3"},
                          {Cmp(BinaryOp::kLT, Add(x, I(2)), I(10)), "x < 8"},
                          {Cmp(BinaryOp::kEQ, Sub(x, I(1)), I(0)), "x == 1"},
                          {Cmp(BinaryOp::kLE, x, x), "true"},
                          {Cmp(BinaryOp::kLT, x, x), "false"},
                          {Cmp(BinaryOp::kLT, Add(x, I(1)), Add(x, I(2))), "true"},
                          {Cmp(BinaryOp::kLT, x, y), "x < y"},
                          // The range of a modulo, [0, c): a tail's max(n % 64, 0).
                          {Max(FloorMod(x, I(64)), I(0)), "x % 64"},
                          {Max(FloorMod(x, I(64)), I(-3)), "x % 64"},
                          {Max(FloorMod(x, I(64)), I(1)), "max(x % 64, 1)"},
                          {Min(FloorMod(x, I(64)), I(63)), "x % 64"},
                          {Min(FloorMod(x, I(64)), I(62)), "min(x % 64, 62)"},
                          {Max(FloorMod(x, I(-4)), I(0)), "max(x % -4, 0)"},
                      });
}

// The whole-expression form other passes use to compare shape expressions built apart.
TEST(LoopSimplify, SimplifyExprCanonicalizesAWholeTree) {
  Scalars s;
  Expr built =
      Raw(BinaryOp::kAdd, Raw(BinaryOp::kFloorDiv, Raw(BinaryOp::kAdd, s.x, I(-1)), I(2)), I(1));
  Expr other =
      Raw(BinaryOp::kAdd, Raw(BinaryOp::kFloorDiv, Raw(BinaryOp::kSub, s.x, I(1)), I(2)), I(1));
  EXPECT_FALSE(StructuralEqual(built, other));
  EXPECT_TRUE(StructuralEqual(SimplifyExpr(built), SimplifyExpr(other)));
  EXPECT_EQ(Print(SimplifyExpr(built)), "(x - 1) // 2 + 1");
}

TEST(LoopSimplify, NarrowIntegersWrapAndKeepOnlyWrapSafeRules) {
  Scalars s;
  Expr x32 = s.x32, x8 = s.x8;
  ExpectSimplified(
      s,
      {
          {Raw(BinaryOp::kAdd, I(2147483647, DType::kInt32), I(1, DType::kInt32)),
           "-2147483648i32"},
          {Raw(BinaryOp::kAdd, I(250, DType::kUInt8), I(10, DType::kUInt8)), "4u8"},
          {Raw(BinaryOp::kAdd, Raw(BinaryOp::kAdd, x8, I(100, DType::kInt8)), I(100, DType::kInt8)),
           "x8 - 56i8"},
          {Raw(BinaryOp::kMul, Raw(BinaryOp::kAdd, x32, I(1, DType::kInt32)), I(4, DType::kInt32)),
           "x32 * 4i32 + 4i32"},
          // x32 * 16 can wrap, so these need the i64 no-overflow assumption and must not fire.
          {Raw(BinaryOp::kFloorDiv, Raw(BinaryOp::kMul, x32, I(16, DType::kInt32)),
               I(16, DType::kInt32)),
           "x32 * 16i32 // 16i32"},
          {Cmp(BinaryOp::kLT, Raw(BinaryOp::kAdd, x32, I(1, DType::kInt32)), I(5, DType::kInt32)),
           "x32 + 1i32 < 5i32"},
      });
}

TEST(LoopSimplify, FloatsOnlyExactRewrites) {
  Scalars s;
  Expr fx = s.fx, fy = s.fy, h = s.h;
  double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectSimplified(
      s, {
             {Raw(BinaryOp::kMul, fx, F(1.0)), "fx"},
             {Raw(BinaryOp::kMul, F(1.0), fx), "fx"},
             {Raw(BinaryOp::kDiv, fx, F(1.0)), "fx"},
             {Raw(BinaryOp::kAdd, fx, F(-0.0)), "fx"},
             {Raw(BinaryOp::kAdd, F(-0.0), fx), "fx"},
             {Raw(BinaryOp::kSub, fx, F(0.0)), "fx"},
             {Min(fx, fx), "fx"},
             {Raw(BinaryOp::kAdd, F(1.5), F(2.25)), "3.75f"},
             {Raw(BinaryOp::kDiv, F(1.0), F(3.0)), "0.33333334f"},
             {Raw(BinaryOp::kMul, F(1e30), F(1e30)), "f32(inf)"},
             {Raw(BinaryOp::kMax, F(nan), F(1.0)), "f32(nan)"},
             {Raw(BinaryOp::kMax, F(-0.0), F(0.0)), "-0.0f"},
             {Cmp(BinaryOp::kLT, F(3.0), fx), "fx > 3.0f"},
             {Raw(BinaryOp::kLT, F(1.0, DType::kFloat16), F(2.0, DType::kFloat16)), "true"},
             // Not exact, so never rewritten: -0.0 + 0.0 is +0.0; NaN and infinities; f16 sums are
             // computed in f32; and which NaN payload wins depends on the operand order.
             {Raw(BinaryOp::kAdd, fx, F(0.0)), "fx + 0.0f"},
             {Raw(BinaryOp::kSub, fx, F(-0.0)), "fx - -0.0f"},
             {Raw(BinaryOp::kMul, fx, F(0.0)), "fx * 0.0f"},
             {Sub(fx, fx), "fx - fx"},
             {Cmp(BinaryOp::kEQ, fx, fx), "fx == fx"},
             {Add(Add(fx, F(1.0)), F(2.0)), "fx + 1.0f + 2.0f"},
             {Mul(F(2.0), fx), "2.0f * fx"},
             {Raw(BinaryOp::kAdd, F(1.0, DType::kFloat16), F(2.0, DType::kFloat16)),
              "1.0f16 + 2.0f16"},
             {Add(h, h), "h + h"},
             {Min(fx, fy), "min(fx, fy)"},
         });
}

TEST(LoopSimplify, LogicAndSelect) {
  Scalars s;
  Expr b = s.b, x = s.x, y = s.y, fx = s.fx, fy = s.fy;
  auto select = [](Expr c, Expr t, Expr f) { return std::make_shared<const SelectNode>(c, t, f); };
  ExpectSimplified(s, {
                          {Raw(BinaryOp::kAnd, b, BoolImm(true)), "b"},
                          {Raw(BinaryOp::kAnd, b, BoolImm(false)), "false"},
                          {Raw(BinaryOp::kOr, BoolImm(true), b), "true"},
                          {Raw(BinaryOp::kOr, b, BoolImm(false)), "b"},
                          {Raw(BinaryOp::kAnd, b, b), "b"},
                          {Not(Not(b)), "b"},
                          {Not(BoolImm(false)), "true"},
                          {Not(Cmp(BinaryOp::kLT, x, y)), "x >= y"},
                          {Not(Cmp(BinaryOp::kLT, fx, fy)), "!(fx < fy)"},  // NaN: not fx >= fy
                          {select(BoolImm(true), x, y), "x"},
                          {select(Cmp(BinaryOp::kLT, I(2), I(1)), x, y), "y"},
                          {select(b, x, x), "x"},
                          {select(b, BoolImm(true), BoolImm(false)), "b"},
                          {select(b, BoolImm(false), BoolImm(true)), "!b"},
                          {select(b, x, y), "select(b, x, y)"},
                      });
}

TEST(LoopSimplify, Casts) {
  Scalars s;
  Expr x = s.x, x8 = s.x8, x32 = s.x32, fx = s.fx, h = s.h;
  auto cast = [](DType t, Expr v) { return std::make_shared<const CastNode>(t, v); };
  double nan = std::numeric_limits<double>::quiet_NaN();
  ExpectSimplified(s, {
                          {cast(DType::kInt8, I(300)), "44i8"},
                          {cast(DType::kUInt8, I(-1)), "255u8"},
                          {cast(DType::kInt32, I(int64_t{1} << 40)), "0i32"},
                          {cast(DType::kFloat32, I(3)), "3.0f"},
                          {cast(DType::kFloat32, I((int64_t{1} << 53) + 1)), "9.007199e+15f"},
                          {cast(DType::kInt32, F(2.7)), "2i32"},
                          {cast(DType::kInt32, F(-2.7)), "-2i32"},
                          {cast(DType::kInt32, F(-1e10)), "-2147483648i32"},
                          {cast(DType::kUInt8, F(-3.0)), "0u8"},
                          {cast(DType::kInt32, F(nan)), "0i32"},
                          {cast(DType::kBool, F(0.5)), "true"},
                          {cast(DType::kBool, F(nan)), "true"},
                          {cast(DType::kBool, I(0)), "false"},
                          {cast(DType::kFloat16, F(0.1)), "0.1f16"},
                          {cast(DType::kFloat32, FloatImm(0.1, DType::kFloat64)), "0.1f"},
                          // Nested casts: the inner one loses nothing, so it goes.
                          {Cast(DType::kInt64, Cast(DType::kInt32, x8)), "i64(x8)"},
                          {Cast(DType::kInt32, Cast(DType::kInt64, x32)), "x32"},
                          {Cast(DType::kFloat64, Cast(DType::kFloat32, h)), "f64(h)"},
                          {Cast(DType::kFloat32, Cast(DType::kInt16, x8)), "f32(x8)"},
                          // ... and when it loses something, it stays.
                          {Cast(DType::kInt64, Cast(DType::kInt8, x)), "i64(i8(x))"},
                          {Cast(DType::kFloat32, Cast(DType::kFloat16, fx)), "f32(f16(fx))"},
                          {Cast(DType::kFloat64, Cast(DType::kFloat32, x32)), "f64(f32(x32))"},
                          {Cast(DType::kInt64, Cast(DType::kInt32, fx)), "i64(i32(fx))"},
                      });
}

TEST(LoopSimplify, Vectors) {
  Scalars s;
  Expr x = s.x, y = s.y;
  ExpectSimplified(s, {
                          {Add(Ramp(x, 1, 4), Broadcast(I(2), 4)), "ramp(x + 2, 1, 4)"},
                          {Add(Broadcast(Add(x, I(1)), 4), Ramp(y, 1, 4)), "ramp(y + x + 1, 1, 4)"},
                          {Mul(Broadcast(x, 4), Broadcast(I(2), 4)), "broadcast(x * 2, 4)"},
                          {Mul(Ramp(x, 1, 4), Broadcast(I(16), 4)), "ramp(x * 16, 16, 4)"},
                          {Add(Ramp(x, 1, 4), Ramp(y, 2, 4)), "ramp(x + y, 3, 4)"},
                          {Sub(Ramp(Add(x, I(4)), 1, 4), Broadcast(I(4), 4)), "ramp(x, 1, 4)"},
                          {Ramp(x, 0, 4), "broadcast(x, 4)"},
                          {Add(Mul(Ramp(x, 1, 4), Broadcast(I(16), 4)), Broadcast(I(16), 4)),
                           "ramp(x * 16 + 16, 16, 4)"},
                      });
}

// A kernel as flattening and unrolling leave it, simplified as a whole.
TEST(LoopSimplify, KernelGolden) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(16)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {Mul(n, I(16))});
  Expr index = Sub(Add(Mul(Add(i, I(1)), I(16)), j), I(16));
  Expr value = std::make_shared<const SelectNode>(
      Raw(BinaryOp::kLT, I(2), I(3)),
      Raw(BinaryOp::kMul, Load(a, {FloorDiv(Mul(i, I(4)), I(4)), j}), F(1.0)), F(0.0));
  Stmt body = For(i, I(0), n, ForKind::kSerial,
                  For(j, I(0), I(16), ForKind::kSerial, Store(out, {index}, value)));
  PrimFunc f = MakePrimFunc({a, out}, {n}, body);
  EXPECT_EQ(Print(f),
            "func @f(%a: f32[n, 16], %out: f32[n * 16]; n: i64) {\n"
            "  for i in [0, n) {\n"
            "    for j in [0, 16) {\n"
            "      out[(i + 1) * 16 + j - 16] = select(2 < 3, a[i * 4 // 4, j] * 1.0f, 0.0f)\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(Print(RunLoopPass("LoopSimplify", f)),
            "func @f(%a: f32[n, 16], %out: f32[n * 16]; n: i64) {\n"
            "  for i in [0, n) {\n"
            "    for j in [0, 16) {\n"
            "      out[i * 16 + j] = a[i, j]\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// Loop bounds, let values and if conditions are expressions too.
TEST(LoopSimplify, StatementOperands) {
  Var n = MakeVar("n"), i = MakeVar("i"), t = MakeVar("t");
  Buffer out = MakeBuffer("out", DType::kInt64, {n});
  Stmt body = For(i, Sub(Add(n, I(2)), n), Add(I(1), Sub(n, I(3))), ForKind::kSerial,
                  LetStmt(t, Mul(I(2), i),
                          IfThenElse(Cmp(BinaryOp::kLT, I(4), Add(t, I(1))), Store(out, {i}, t))));
  EXPECT_EQ(Print(RunLoopPass("LoopSimplify", MakePrimFunc({out}, {n}, body))),
            "func @f(%out: i64[n]; n: i64) {\n"
            "  for i in [2, 2 + (n - 2)) {\n"
            "    let t = i * 2;\n"
            "    if (t > 3) {\n"
            "      out[i] = t\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// A kernel with nothing to simplify comes back as the same object.
TEST(LoopSimplify, NothingToDoKeepsTheKernel) {
  Var n = MakeVar("n"), i = MakeVar("i");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n});
  PrimFunc f = MakePrimFunc(
      {a, out}, {n},
      For(i, I(0), n, ForKind::kSerial, Store(out, {i}, Add(Load(a, {Sub(i, I(1))}), F(2.0)))));
  EXPECT_EQ(RunLoopPass("LoopSimplify", f), f);
}

// Compiled before and after: every output bit agrees, -0.0 and NaN inputs included.
TEST(LoopSimplify, CompiledResultsAgree) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(4)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(4), I(3)});
  Expr row = FloorDiv(Add(Mul(i, I(8)), I(16)), I(8));                 // i + 2
  Expr col = FloorMod(Add(Mul(Add(j, I(1)), I(4)), Sub(j, j)), I(4));  // 0
  Expr x = Load(a, {Sub(row, I(2)), j});
  // `+ 0.0f` must stay. It is added to a load the pass does not change: when an operand
  // changes, the adaptor rebuilds the sum with loop::MakeBinary, which drops a float `+ 0.0`
  // itself (see RebuiltFloatSumKeepsPositiveZero).
  Expr plain = Load(a, {i, j});
  Stmt body = For(i, I(0), n, ForKind::kSerial,
                  For(j, I(0), I(4), ForKind::kSerial,
                      Seq({Store(out, {i, j, col}, Raw(BinaryOp::kAdd, plain, F(0.0))),
                           Store(out, {i, j, I(1)},
                                 Raw(BinaryOp::kAdd, Raw(BinaryOp::kMul, x, F(1.0)), F(-0.0))),
                           Store(out, {i, j, Sub(Add(j, I(2)), j)},
                                 Select(Cmp(BinaryOp::kLT, Add(j, I(1)), I(3)), Max(x, x),
                                        Cast(DType::kFloat32, Mul(I(2), j))))})));
  PrimFunc f = MakePrimFunc({a, out}, {n}, body);
  PrimFunc g = RunLoopPass("LoopSimplify", f);
  ASSERT_NE(Print(g), Print(f));

  const int64_t rows = 3;
  std::vector<float> in = {-0.0f,
                           0.0f,
                           std::numeric_limits<float>::quiet_NaN(),
                           -1.5f,
                           2.0f,
                           -3.0f,
                           std::numeric_limits<float>::infinity(),
                           1e-40f,
                           7.0f,
                           -0.0f,
                           0.25f,
                           -8.0f};
  auto run = [&](const PrimFunc& k) { return RunF32Kernel(k, {in.data()}, rows * 12, {rows}); };
  std::vector<float> before = run(f), after = run(g);
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  uint32_t bits;
  std::memcpy(&bits, &before[0], sizeof bits);
  EXPECT_EQ(bits, 0u) << "-0.0 + 0.0 is +0.0";
  std::memcpy(&bits, &before[1], sizeof bits);
  EXPECT_EQ(bits, 0x80000000u) << "-0.0 * 1.0 + -0.0 is -0.0";
}

// Random integer expressions compiled before and after: the rewrites keep every value (floor
// semantics, signs, operand order), for negative variables and, in i32, for sums that wrap.
template <typename T>
void CheckRandomExpressions(DType t, uint32_t seed, const std::vector<int64_t>& values,
                            const std::vector<int64_t>& big_constants) {
  Var x = MakeVar("x", t), y = MakeVar("y", t);
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  auto constant = [&](int64_t v) { return IntImm(v, t); };
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || pick(4) == 0) {
      int k = pick(4);
      if (k == 0) return x;
      if (k == 1) return y;
      if (k == 2 && !big_constants.empty())
        return constant(big_constants[pick(big_constants.size())]);
      return constant(pick(41) - 20);
    }
    static const BinaryOp ops[] = {BinaryOp::kAdd,      BinaryOp::kSub,      BinaryOp::kMul,
                                   BinaryOp::kFloorDiv, BinaryOp::kFloorMod, BinaryOp::kMin,
                                   BinaryOp::kMax,      BinaryOp::kDiv};
    BinaryOp op = ops[pick(8)];
    bool division = op == BinaryOp::kFloorDiv || op == BinaryOp::kFloorMod || op == BinaryOp::kDiv;
    // Two constant operands are kept apart: loop::MakeBinary folds them without wrapping when
    // the mutator rebuilds a node (see RebuiltNarrowProductWraps), which is not this pass.
    Expr a = gen(depth - 1),
         b = division ? constant(pick(2) ? pick(16) + 1 : -pick(8) - 1) : gen(depth - 1);
    while (IsConstInt(a) && IsConstInt(b)) a = gen(depth - 1);
    if (pick(6) == 0) return Select(Cmp(BinaryOp::kLT, a, b), a, b);
    return Raw(op, a, b);
  };
  const int count = 300;
  Buffer out = MakeBuffer("out", t, {I(count)});
  std::vector<Stmt> stmts;
  for (int k = 0; k < count; ++k) stmts.push_back(Store(out, {I(k)}, gen(4)));
  PrimFunc f = MakePrimFunc({out}, {x, y}, std::make_shared<SeqNode>(stmts));
  PrimFunc g = RunLoopPass("LoopSimplify", f);
  std::unique_ptr<CompiledModule> before = BuildLLVM({f}), after = BuildLLVM({g});
  for (int64_t xv : values) {
    for (int64_t yv : {-9, -1, 0, 2, 17}) {
      std::vector<T> want(count, 7), got(count, 7);
      int64_t scalars[] = {xv, yv};
      void* want_buffers[] = {want.data()};
      void* got_buffers[] = {got.data()};
      before->Lookup("f")(want_buffers, scalars);
      after->Lookup("f")(got_buffers, scalars);
      for (int k = 0; k < count; ++k)
        ASSERT_EQ(got[k], want[k]) << "x = " << xv << ", y = " << yv << ": "
                                   << Print(AsStore(AsSeq(f->body)->stmts[k])->value) << " became "
                                   << Print(AsStore(AsSeq(g->body)->stmts[k])->value);
    }
  }
}

TEST(LoopSimplify, RandomIndexExpressionsKeepTheirValues) {
  CheckRandomExpressions<int64_t>(DType::kInt64, 2024, {-37, -16, -5, -1, 0, 1, 3, 16, 100}, {});
}

TEST(LoopSimplify, RandomWrappingI32ExpressionsKeepTheirValues) {
  const int64_t max = std::numeric_limits<int32_t>::max(),
                min = std::numeric_limits<int32_t>::min();
  CheckRandomExpressions<int32_t>(DType::kInt32, 7, {min, -37, -1, 0, 3, 100, max},
                                  {max, max - 9, min, min + 13});
}

// loop::MakeBinary must not treat +0.0 as an additive identity of floats (-0.0 + 0.0 is
// +0.0): the Mutator rebuilds `a[(i + 1) - 1] + 0.0f` through MakeBinary once the index is
// simplified, and the `+ 0.0f` must survive.
TEST(LoopSimplify, RebuiltFloatSumKeepsPositiveZero) {
  Var i = MakeVar("i");
  Buffer a = MakeBuffer("a", DType::kFloat32, {I(4)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(4)});
  Stmt body = For(i, I(0), I(4), ForKind::kSerial,
                  Store(out, {i}, Raw(BinaryOp::kAdd, Load(a, {Sub(Add(i, I(1)), I(1))}), F(0.0))));
  EXPECT_EQ(Print(RunLoopPass("LoopSimplify", MakePrimFunc({a, out}, {}, body))),
            "func @f(%a: f32[4], %out: f32[4]) {\n"
            "  for i in [0, 4) {\n"
            "    out[i] = a[i] + 0.0f\n"
            "  }\n"
            "}\n");
}

// loop::MakeBinary folds narrow integers with wrapping: once `2147483647i32 + 0` is
// simplified, the mutator rebuilds the product through MakeBinary, which must fold it to the
// i32 value the kernel computes, not to 4294967294.
TEST(LoopSimplify, RebuiltNarrowProductWraps) {
  Expr big = Raw(BinaryOp::kAdd, IntImm(2147483647, DType::kInt32), IntImm(0, DType::kInt32));
  Buffer out = MakeBuffer("out", DType::kInt32, {I(1)});
  PrimFunc f = MakePrimFunc({out}, {},
                            Store(out, {I(0)}, Raw(BinaryOp::kMul, big, IntImm(2, DType::kInt32))));
  EXPECT_EQ(Print(RunLoopPass("LoopSimplify", f)),
            "func @f(%out: i32[1]) {\n"
            "  out[0] = -2i32\n"
            "}\n");
}

}  // namespace
}  // namespace kiln::loop
