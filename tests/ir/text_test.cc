#include "ir/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "common/test_util.h"
#include "ir/structural.h"

namespace kiln {
namespace {

using test::ErrorMessage;

// Tiny ops of our own, so these tests do not depend on the built-in op library.
Type FirstArgType(TypeRelContext& ctx) {
  return ctx.arg(0);
}

void RegisterTestOp(const std::string& name, int min_inputs, int max_inputs,
                    std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.name = name;
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  def.attrs = std::move(attrs);
  def.type_rel = FirstArgType;
  OpRegistry::Global().Register(std::move(def));
}

const bool kTestOpsRegistered = [] {
  RegisterTestOp("test_add", 2, 2);
  RegisterTestOp("test_relu", 1, 1);
  RegisterTestOp(
      "test_sum", 1, 1,
      {{"axes", AttrKind::kInts, std::vector<int64_t>{}}, {"keepdims", AttrKind::kBool, false}});
  RegisterTestOp("test_attrs", 1, 1,
                 {{"b", AttrKind::kBool, false},
                  {"dt", AttrKind::kDType, DType::kFloat32},
                  {"f", AttrKind::kFloat, 1.0},
                  {"fs", AttrKind::kFloats, std::vector<double>{}},
                  {"i", AttrKind::kInt, int64_t{0}},
                  {"is", AttrKind::kInts, std::vector<int64_t>{}},
                  {"req", AttrKind::kInt, std::nullopt},
                  {"s", AttrKind::kString, std::string()}});
  RegisterTestOp("test_concat", 0, -1);
  RegisterTestOp("test.dotted", 1, 1);
  return true;
}();

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}
Dim Sym(const char* n) {
  return Dim::Symbol(n);
}

// Prints, parses back, and checks that the structure and the text both survive.
void ExpectRoundTrip(const IRModule& m, const PrintOptions& opts = {}) {
  std::vector<Tensor> meta;
  std::string text = Print(m, opts, &meta);
  IRModule back = ParseModule(text, &meta);
  EXPECT_TRUE(StructuralEqual(m, back)) << text;
  EXPECT_EQ(StructuralHash(m), StructuralHash(back)) << text;
  std::vector<Tensor> meta2;
  EXPECT_EQ(Print(back, opts, &meta2), text);
}

// Parses `text`, which must be in printed form already, and checks it prints back verbatim.
void ExpectCanonical(const std::string& text) {
  IRModule m = ParseModule(text);
  EXPECT_EQ(Print(m), text);
  EXPECT_TRUE(StructuralEqual(m, ParseModule(Print(m))));
}

IRModule Main(Function f) {
  return IRModule({{"main", std::move(f)}});
}

TEST(Text, SpecExampleRoundTrips) {
  IRModule m = ParseModule(R"(
    def @main(%x: f32[batch, 784], %w1: f32[784, 128], %b1: f32[128]) -> f32[batch, 128] {
      %fc1: f32[batch, 128] = test_add(%x, %w1)
      %1: f32[batch, 128] = test_add(%fc1, %b1)
      %2 = test_sum(%1, axes=[1], keepdims=false)
      %3 = (%1, %2)
      %4 = %3.0
      %5 = test_relu(const(f32[2], [1.5, -2.0]))
      %f = fn(%p0: f32[2], %p1: f32[2]) attrs{primitive=true} {
        %0 = test_add(%p0, %p1)
        test_relu(%0)
      }
      %6 = %f(%4, %5)
      %6
    })");
  // Counters are renumbered in print order, the default `keepdims` is left out, and the unnamed,
  // untyped result is written inline.
  EXPECT_EQ(
      Print(m),
      R"(def @main(%x: f32[batch, 784], %w1: f32[784, 128], %b1: f32[128]) -> f32[batch, 128] {
  %fc1: f32[batch, 128] = test_add(%x, %w1)
  %0: f32[batch, 128] = test_add(%fc1, %b1)
  %1 = test_sum(%0, axes=[1])
  %2 = (%0, %1)
  %3 = %2.0
  %4 = test_relu(const(f32[2], [1.5, -2.0]))
  %f = fn(%p0: f32[2], %p1: f32[2]) attrs{primitive=true} {
    %5 = test_add(%p0, %p1)
    test_relu(%5)
  }
  %f(%3, %4)
}
)");
  ExpectRoundTrip(m);
  ExpectCanonical(Print(m));

  Function main = m.Lookup("main");
  EXPECT_EQ(main->params[0]->name, "x");
  EXPECT_EQ(TypeToString(main->params[0]->type), "f32[batch, 784]");
  EXPECT_EQ(TypeToString(main->ret_type), "f32[batch, 128]");
  const CallNode* call = AsCall(main->body);
  ASSERT_NE(call, nullptr);
  ASSERT_NE(AsFunction(call->fn), nullptr);
  EXPECT_EQ(call->fn->name, "f");
  EXPECT_TRUE(AsFunction(call->fn)->attrs.GetBool("primitive"));
  const TupleGetItemNode* item = AsTupleGetItem(call->args[0]);
  ASSERT_NE(item, nullptr);
  const TupleNode* tuple = AsTuple(item->tuple);
  ASSERT_NE(tuple, nullptr);
  const CallNode* add = AsCall(tuple->fields[0]);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->name, "");  // `%1` is a counter, not a source name
  EXPECT_EQ(TypeToString(add->type), "f32[batch, 128]");
  EXPECT_EQ(add->args[0]->name, "fc1");
  EXPECT_EQ(AsCall(add->args[0])->args[0], main->params[0]);
  const CallNode* sum = AsCall(tuple->fields[1]);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->args[0], tuple->fields[0]);
  EXPECT_EQ(sum->attrs.GetInts("axes"), std::vector<int64_t>{1});
  EXPECT_FALSE(sum->attrs.GetBool("keepdims"));
}

TEST(Text, BuiltInOpsExampleParses) {
  for (const char* op : {"matmul", "add", "sum", "cast", "relu"})
    ASSERT_NE(OpRegistry::Global().Find(op), nullptr) << "op " << op << " is not registered";
  IRModule m = ParseModule(R"(
    def @main(%x: f32[batch, 784], %w1: f32[784, 128], %b1: f32[128]) -> f32[batch, 128] {
      %fc1: f32[batch, 128] = matmul(%x, %w1)
      %1: f32[batch, 128] = add(%fc1, %b1)
      %2 = sum(%1, axes=[1], keepdims=false)
      %3 = (%1, %2)
      %4 = %3.0
      %5 = cast(const(f32[2], [1.5, -2.0]), dtype=i64)
      %f = fn(%p0: f32[2], %p1: f32[2]) attrs{primitive=true} {
        %0 = add(%p0, %p1)
        relu(%0)
      }
      %6 = %f(%4, %4)
      (%6, %2, %5)
    })");
  ExpectRoundTrip(m);
  // Bindings that the result does not reach are not part of the graph.
  EXPECT_EQ(Print(ParseModule("def @m(%x: f32[2]) {\n  %dead = relu(%x)\n  %x\n}")),
            "def @m(%x: f32[2]) {\n  %x\n}\n");
}

TEST(Text, PrintsGraphBuiltInCpp) {
  Var x = MakeVar("x", F32({Sym("n"), 4}));
  Var y = MakeVar("y", F32({Sym("n"), 4}));
  Expr a = MakeCall("test_add", {x, y});
  Expr r = MakeCall("test_relu", {a}, {}, "out");
  Expr s = MakeCall("test_sum", {r}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", true}});
  IRModule m =
      Main(MakeFunction({x, y}, MakeTuple({r, s}), nullptr, {{"note", std::string("hi")}}));
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[n, 4], %y: f32[n, 4]) attrs{note="hi"} {
  %0 = test_add(%x, %y)
  %out = test_relu(%0)
  %1 = test_sum(%out, axes=[0, 1], keepdims=true)
  (%out, %1)
}
)");
  ExpectRoundTrip(m);
}

// Anonymous printing numbers every node, so graphs that differ only in names print alike.
TEST(Text, AnonymousPrintingLeavesNamesOut) {
  auto graph = [](const std::string& in, const std::string& mid, const std::string& w) {
    Var x = MakeVar(in, F32({Sym("n"), 4}));
    Expr c = MakeConstant(Tensor::FromVector<float>({4}, {1, 2, 3, 4}), w);
    Expr a = MakeCall("test_add", {x, c}, {}, mid);
    return MakeFunction({x}, MakeCall("test_relu", {a}, {}, mid + ".act"));
  };
  Function f = graph("x", "fc1", "fc1.w"), g = graph("input", "layer", "w");
  PrintOptions anonymous;
  anonymous.anonymous = true;
  EXPECT_EQ(Print(f, anonymous), Print(g, anonymous));
  EXPECT_NE(Print(f), Print(g));
  EXPECT_EQ(Print(f, anonymous), R"(fn(%0: f32[n, 4]) {
  %1 = test_add(%0, const(f32[4], [1.0, 2.0, 3.0, 4.0]))
  test_relu(%1)
})");
}

TEST(Text, ModuleWithSeveralFunctions) {
  ExpectCanonical(R"(def @a(%x: f32[2]) {
  test_relu(%x)
}

def @b(%x: f32[2], %y: f32[2]) -> f32[2] {
  test_add(%x, %y)
}
)");
  EXPECT_EQ(ParseModule("").functions().size(), 0u);
  EXPECT_EQ(Print(IRModule()), "");
}

TEST(Text, SymbolicDimsOfEveryForm) {
  Dim n = Sym("n"), m = Sym("m");
  std::vector<Dim> dims = {Dim(0),
                           Dim(7),
                           Dim(-4),
                           n,
                           n * 2,
                           n * m,
                           n - 1,
                           Dim(1) - n,
                           n * n + n * 2 + 1,
                           FloorDiv(n + 1, 2),
                           Mod(n + 5, 3),
                           FloorDiv(n, 2) * 3,
                           FloorDiv(n, m),
                           Mod(n, m),
                           Min(n, m),
                           Max(n, m * 2),
                           Min(n, m) + 1,
                           FloorDiv(n, -3),
                           Mod(n, -3),
                           FloorDiv(n * m + 3, 2) - n,
                           Dim(0) - FloorDiv(n, 2),
                           FloorDiv(n - m, m + 1),
                           Max(Min(n, 3), FloorDiv(m, 4)) * n,
                           Dim::Symbol("batch-size") * 2 + Dim::Symbol("seq len"),
                           Dim::Symbol("min") + Dim::Symbol("9"),
                           Dim(std::numeric_limits<int64_t>::max())};
  for (const Dim& d : dims) {
    Type t = F32({d, 3});
    std::string text = PrintType(t);
    Type back = ParseType(text);
    EXPECT_TRUE(TypeEqual(t, back)) << text << " read back as " << PrintType(back);
    EXPECT_EQ(PrintType(back), text);
    // A module with the dim in a parameter type round-trips too.
    Var x = MakeVar("x", t);
    ExpectRoundTrip(Main(MakeFunction({x}, MakeCall("test_relu", {x}))));
  }
  EXPECT_EQ(PrintType(F32({Sym("batch"), Sym("seq") * 2})), "f32[batch, seq * 2]");
  EXPECT_EQ(PrintType(F32({Dim::Symbol("batch-size")})), R"(f32["batch-size"])");
  EXPECT_EQ(PrintType(F32({FloorDiv(n, -3)})), "f32[n // (-3)]");
  // The parser accepts arithmetic the printer would have simplified away.
  EXPECT_EQ(PrintType(ParseType("f32[(n * 2) // 2, n + 0, 2 * 3 - 1, n - n, min(n, n + 1)]")),
            "f32[n, n, 5, 0, n]");
  EXPECT_EQ(PrintType(ParseType("f32[/* a comment */ n // 2]")), "f32[n // 2]");
}

TEST(Text, TypesOfEveryKind) {
  for (const char* text :
       {"f32[]", "f32[2, 3]", "?", "()", "(f32[2],)", "(f32[2], i64[])", "((f32[2], ?), bool[1])",
        "fn() -> f32[]", "fn(f32[2], (i8[], u8[3])) -> fn(f32[]) -> bf16[2]"}) {
    EXPECT_EQ(PrintType(ParseType(text)), text);
  }
  EXPECT_EQ(PrintType(ParseType("(f32[2])")), "f32[2]");  // grouping, not a 1-tuple
  EXPECT_EQ(PrintType(ParseType("float32[2]")), "f32[2]");
  EXPECT_EQ(PrintType(ParseType("int64[]")), "i64[]");
}

TEST(Text, ConstantsOfEveryDType) {
  const double kNan = std::numeric_limits<double>::quiet_NaN();
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<Tensor> values = {
      test::MakeTensor<float>({7}, {0.1f, -0.0f, std::numeric_limits<float>::denorm_min(),
                                    std::numeric_limits<float>::max(), static_cast<float>(kInf),
                                    static_cast<float>(-kInf), static_cast<float>(kNan)}),
      test::MakeTensor<double>(
          {5}, {0.1, -0.0, 1e300, std::numeric_limits<double>::denorm_min(), -kNan}),
      test::MakeTensor<Half>({5}, {Half(0.1f), Half(-2.5f), Half(65504.0f), Half(6e-8f),
                                   Half(static_cast<float>(kInf))}),
      test::MakeTensor<BFloat16>({4}, {BFloat16(0.1f), BFloat16(-3.0f), BFloat16(1e38f),
                                       BFloat16(static_cast<float>(kNan))}),
      test::MakeTensor<int8_t>({3}, {-128, 0, 127}),
      test::MakeTensor<int16_t>({2}, {-32768, 32767}),
      test::MakeTensor<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 5}),
      test::MakeTensor<int64_t>(
          {2}, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}),
      test::MakeTensor<uint8_t>({2}, {0, 255}),
      test::MakeTensor<bool>({2, 1}, {true, false}),
      Tensor::Scalar<float>(1.5f),
      test::MakeTensor<float>({0, 3}, {}),
  };
  for (const Tensor& t : values) {
    Var x = MakeVar("x", F32({}));
    Expr c = MakeConstant(t);
    IRModule m = Main(MakeFunction({x}, MakeTuple({x, c})));
    ExpectRoundTrip(m);
  }
  auto text_of = [](const Tensor& t) { return Print(MakeConstant(t)); };
  EXPECT_EQ(text_of(values[0]), "const(f32[7], [0.1, -0.0, 1e-45, 3.4028235e+38, inf, -inf, nan])");
  EXPECT_EQ(text_of(values[1]), "const(f64[5], [0.1, -0.0, 1e+300, 5e-324, -nan])");
  EXPECT_EQ(text_of(values[2]), "const(f16[5], [0.1, -2.5, 65504.0, 6e-08, inf])");
  EXPECT_EQ(text_of(values[7]), "const(i64[2], [-9223372036854775808, 9223372036854775807])");
  EXPECT_EQ(text_of(values[9]), "const(bool[2, 1], [true, false])");
  EXPECT_EQ(text_of(values[10]), "const(f32[], 1.5)");
  EXPECT_EQ(text_of(values[11]), "const(f32[0, 3], [])");
  // Integers are fine in float constants, and a scalar may be written as a list.
  Expr c = ParseExpr("const(f32[2], [1, -2])");
  EXPECT_EQ(Print(c), "const(f32[2], [1.0, -2.0])");
  EXPECT_EQ(Print(ParseExpr("const(i32[], [3])")), "const(i32[], 3)");
}

// The printer takes std::to_chars' shortest digits where they read back: the spelling must be
// the one %g gives at the fewest digits that read back, for floats of every magnitude.
TEST(Text, FloatConstantsSpellTheShortestDigitsThatReadBack) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> f32;
  std::vector<double> f64;
  while (f32.size() < 4000) {
    uint32_t b = bits(rng);
    float v;
    std::memcpy(&v, &b, sizeof v);
    if (!std::isfinite(v)) continue;
    f32.push_back(v);
    f64.push_back(static_cast<double>(v) * (1 + 1e-9 * static_cast<double>(bits(rng))));
  }
  auto shortest = [](double v, int max_precision, auto reads_back) {
    char buf[48];
    for (int prec = 1; prec <= max_precision; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*g", prec, v);
      if (reads_back(buf)) break;
    }
    std::string s = buf;
    if (s.find('e') != std::string::npos && v == std::trunc(v) && std::fabs(v) < 1e7) {
      std::snprintf(buf, sizeof buf, "%.0f", v);
      s = buf;
    }
    return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
  };
  std::string want32 = "const(f32[4000], [", want64 = "const(f64[4000], [";
  for (size_t i = 0; i < f32.size(); ++i) {
    const float v = f32[i];
    const double d = f64[i];
    if (i) {
      want32 += ", ";
      want64 += ", ";
    }
    want32 += shortest(v, 9, [&](const char* s) { return std::strtof(s, nullptr) == v; });
    want64 += shortest(d, 17, [&](const char* s) { return std::strtod(s, nullptr) == d; });
  }
  const Tensor t32 = test::MakeTensor<float>({4000}, f32);
  const Tensor t64 = test::MakeTensor<double>({4000}, f64);
  EXPECT_EQ(Print(MakeConstant(t32)), want32 + "])");
  EXPECT_EQ(Print(MakeConstant(t64)), want64 + "])");
  for (const Tensor& t : {t32, t64}) {
    Var x = MakeVar("x", F32({}));
    ExpectRoundTrip(Main(MakeFunction({x}, MakeTuple({x, MakeConstant(t)}))));
  }
}

TEST(Text, AttributesOfEveryKind) {
  Var x = MakeVar("x", F32({2}));
  Attrs attrs{{"b", true},
              {"dt", DType::kBFloat16},
              {"f", -0.25},
              {"fs", std::vector<double>{1.0, 2.5, std::numeric_limits<double>::infinity()}},
              {"i", int64_t{-7}},
              {"is", std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 0}},
              {"req", int64_t{3}},
              {"s", std::string("a \"quoted\"\n\\ \x01 string")}};
  Expr call = MakeCall("test_attrs", {x}, attrs);
  IRModule m = Main(MakeFunction({x}, call));
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[2]) {
  test_attrs(%x, b=true, dt=bf16, f=-0.25, fs=[1.0, 2.5, inf], i=-7, is=[-9223372036854775808, 0], req=3, s="a \"quoted\"\n\\ \x01 string")
}
)");
  ExpectRoundTrip(m);

  // Defaults are left out, and refilled when parsed.
  Expr defaults = MakeCall("test_attrs", {x}, {{"req", int64_t{1}}});
  EXPECT_EQ(Print(defaults), "test_attrs(%x, req=1)");
  Expr back = ParseExpr("test_attrs(%x, req=1)", {{"x", x}});
  EXPECT_TRUE(StructuralEqual(defaults, back));
  EXPECT_EQ(AsCall(back)->attrs.GetFloat("f"), 1.0);

  // Generic values are coerced by the schema: int -> float, empty list -> the declared kind.
  Expr coerced =
      ParseExpr("test_attrs(%x, f=2, fs=[1, 2.5], is=[], req=0, dt=float16)", {{"x", x}});
  EXPECT_EQ(AsCall(coerced)->attrs.GetFloat("f"), 2.0);
  EXPECT_EQ(AsCall(coerced)->attrs.GetFloats("fs"), (std::vector<double>{1.0, 2.5}));
  EXPECT_EQ(AsCall(coerced)->attrs.GetDType("dt"), DType::kFloat16);
  EXPECT_EQ(Print(coerced), "test_attrs(%x, dt=f16, f=2.0, fs=[1.0, 2.5], req=0)");
  Expr fs_empty = ParseExpr("test_attrs(%x, fs=[], req=0)", {{"x", x}});
  EXPECT_EQ(KindOf(*AsCall(fs_empty)->attrs.Find("fs")), AttrKind::kFloats);

  // Function attributes of every kind, with keys that need quoting.
  Attrs fattrs = attrs;
  fattrs.Set("odd key", int64_t{1});
  ExpectRoundTrip(Main(MakeFunction({x}, x, nullptr, fattrs)));
}

TEST(Text, TuplesAndGetItems) {
  Var x = MakeVar("x", F32({2}));
  Expr empty = MakeTuple({});
  Expr one = MakeTuple({x});
  Expr nested = MakeTuple({one, x, empty});
  Expr item = MakeTupleGetItem(MakeTupleGetItem(nested, 0), 0);
  IRModule m = Main(MakeFunction({x}, MakeTuple({item, MakeTupleGetItem(nested, 2)})));
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[2]) {
  %0 = (%x,)
  %1 = ()
  %2 = (%0, %x, %1)
  %3 = %2.0
  %4 = %3.0
  %5 = %2.2
  (%4, %5)
}
)");
  ExpectRoundTrip(m);
  // Get-item chains and inline tuples parse, including a trailing comma.
  Expr e = ParseExpr("((%x, (%x,),).1.0, %x)", {{"x", x}});
  EXPECT_EQ(Print(e), "%0 = (%x,)\n%1 = (%x, %0)\n%2 = %1.1\n%3 = %2.0\n(%3, %x)");
  // A tuple starting the next line is the result, not a call of the bound name before it.
  Expr r = ParseExpr("%t = %x.0\n(%t, %t)", {{"x", x}});
  ASSERT_NE(AsTuple(r), nullptr);
}

TEST(Text, NestedFunctionsWithClosuresAndAttrs) {
  Var x = MakeVar("x", F32({2}));
  Expr outer = MakeCall("test_relu", {x});  // used inside and outside the function
  Var p = MakeVar("p", F32({2}));
  Expr inner_only = MakeCall("test_add", {x, x});  // only the nested function reads it
  Expr body = MakeCall("test_add", {MakeCall("test_add", {p, outer}), inner_only});
  Function f = MakeFunction({p}, body, F32({2}), {{"primitive", true}, {"w", 2.0}});
  Var q = MakeVar("", F32({2}));
  Function g = MakeFunction({q}, MakeFnCall(f, {q}));  // calls f from inside another function
  Expr result = MakeTuple({MakeFnCall(f, {outer}), MakeFnCall(g, {x})});
  IRModule m = Main(MakeFunction({x}, result));
  // `%0` is read inside and outside the function, so it is bound outside; `test_add(%x, %x)`
  // is only read inside, so it is bound inside.
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[2]) {
  %0 = test_relu(%x)
  %1 = fn(%p: f32[2]) -> f32[2] attrs{primitive=true, w=2.0} {
    %2 = test_add(%p, %0)
    %3 = test_add(%x, %x)
    test_add(%2, %3)
  }
  %4 = %1(%0)
  %5 = fn(%6: f32[2]) {
    %1(%6)
  }
  %7 = %5(%x)
  (%4, %7)
}
)");
  ExpectRoundTrip(m);
}

TEST(Text, SourceNamesAreKeptAndQuotedWhenNeeded) {
  Var x = MakeVar("input:0", F32({2}));
  Var y = MakeVar("7", F32({2}));
  Var z = MakeVar("", F32({2}));
  Expr a = MakeCall("test_add", {x, y}, {}, "fc1/MatMul:0");
  Expr b = MakeCall("test_add", {a, z}, {}, "dup");
  Expr c = MakeCall("test_add", {b, b}, {}, "dup");
  Expr d = MakeCall("test_relu", {c}, {}, "0");
  IRModule m = IRModule({{"my model", MakeFunction({x, y, z}, d)}});
  EXPECT_EQ(Print(m), R"(def @"my model"(%"input:0": f32[2], %"7": f32[2], %0: f32[2]) {
  %"fc1/MatMul:0" = test_add(%"input:0", %"7")
  %dup = test_add(%"fc1/MatMul:0", %0)
  %dup_1 = test_add(%dup, %dup)
  %0_1 = test_relu(%dup_1)
  %0_1
}
)");
  IRModule back = ParseModule(Print(m));
  ExpectRoundTrip(m);
  Function f = back.Lookup("my model");
  EXPECT_EQ(f->params[0]->name, "input:0");
  EXPECT_EQ(f->params[1]->name, "7");
  EXPECT_EQ(f->params[2]->name, "");  // a counter is not a source name
  EXPECT_EQ(AsCall(f->body)->args[0]->name, "dup_1");
}

TEST(Text, TypesPresentAndAbsent) {
  Var x = MakeVar("x", F32({Sym("n")}));
  Var untyped = MakeVar("u");
  Var hole = MakeVar("h", IncompleteType());
  Expr a = WithType(MakeCall("test_add", {x, untyped}), F32({Sym("n")}));
  Expr t = WithType(MakeTuple({a, hole}), TupleType({F32({Sym("n")}), IncompleteType()}));
  IRModule m = Main(MakeFunction({x, untyped, hole}, t));
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[n], %u, %h: ?) {
  %0: f32[n] = test_add(%x, %u)
  %1: (f32[n], ?) = (%0, %h)
  %1
}
)");
  ExpectRoundTrip(m);
  IRModule back = ParseModule(Print(m));
  EXPECT_EQ(TypeToString(back.Lookup("main")->body->type), "(f32[n], ?)");
  EXPECT_EQ(back.Lookup("main")->params[1]->type, nullptr);

  PrintOptions no_types;
  no_types.show_types = false;
  std::string bare = Print(m, no_types);
  EXPECT_EQ(bare, R"(def @main(%x: f32[n], %u, %h: ?) {
  %0 = test_add(%x, %u)
  (%0, %h)
}
)");
  EXPECT_TRUE(StructuralEqual(m, ParseModule(bare), /*compare_types=*/false));
  EXPECT_FALSE(StructuralEqual(m, ParseModule(bare)));
}

TEST(Text, LargeConstantsGoToTheMetadataTable) {
  Tensor big = test::RandomTensor(DType::kFloat32, {10, 10}, 7);
  Tensor small = test::RandomTensor(DType::kInt32, {3}, 8, -100, 100);
  Var x = MakeVar("x", F32({10, 10}));
  Expr body = MakeTuple({MakeCall("test_add", {x, MakeConstant(big)}), MakeConstant(small)});
  IRModule m = Main(MakeFunction({x}, body));

  std::vector<Tensor> meta;
  std::string text = Print(m, {}, &meta);
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].raw_data(), big.raw_data());
  EXPECT_NE(text.find("test_add(%x, const(f32[10, 10], meta[0]))"), std::string::npos) << text;
  EXPECT_TRUE(StructuralEqual(m, ParseModule(text, &meta)));
  ExpectRoundTrip(m);

  // Without a table, or with elision off, everything prints in full.
  std::string full = Print(m);
  EXPECT_EQ(full.find("meta["), std::string::npos);
  EXPECT_TRUE(StructuralEqual(m, ParseModule(full)));
  PrintOptions never;
  never.max_inline_constant = 0;
  std::vector<Tensor> unused;
  EXPECT_EQ(Print(m, never, &unused), full);
  EXPECT_TRUE(unused.empty());
  PrintOptions tiny;
  tiny.max_inline_constant = 2;
  ExpectRoundTrip(m, tiny);

  // A bare `meta[i]` is a constant too.
  Expr c = ParseExpr("meta[0]", {}, &meta);
  ASSERT_NE(AsConstant(c), nullptr);
  EXPECT_EQ(AsConstant(c)->value.raw_data(), big.raw_data());
}

TEST(Text, SharedNodesStayShared) {
  Var x = MakeVar("x", F32({2}));
  Expr c = MakeConstant(test::MakeTensor<float>({2}, {1, 2}));
  Expr a = MakeCall("test_add", {c, c});
  Expr b = MakeCall("test_add", {a, a});
  IRModule m = Main(MakeFunction({x}, MakeCall("test_add", {b, x})));
  EXPECT_EQ(Print(m), R"(def @main(%x: f32[2]) {
  %0 = const(f32[2], [1.0, 2.0])
  %1 = test_add(%0, %0)
  %2 = test_add(%1, %1)
  test_add(%2, %x)
}
)");
  ExpectRoundTrip(m);
}

TEST(Text, CommentsAreSkipped) {
  IRModule m = ParseModule(R"(
    // a module
    def @main(%x: f32[2] /* the input */) { // trailing
      /* block
         comment */ test_relu(%x) // done
    }
  )");
  EXPECT_EQ(Print(m), "def @main(%x: f32[2]) {\n  test_relu(%x)\n}\n");
}

TEST(Text, PrintExprAloneAndParseExpr) {
  Var x = MakeVar("x", F32({2}));
  Var y = MakeVar("y", F32({2}));
  Expr e = MakeCall("test_relu", {MakeCall("test_add", {x, y})});
  EXPECT_EQ(Print(e), "%0 = test_add(%x, %y)\ntest_relu(%0)");
  Expr back = ParseExpr(Print(e), {{"x", x}, {"y", y}});
  EXPECT_TRUE(StructuralEqual(e, back));
  EXPECT_EQ(AsCall(AsCall(back)->args[0])->args[1], y);  // the given variables are used

  Var p = MakeVar("p", F32({2}));
  Function f = MakeFunction({p}, MakeCall("test_relu", {p}));
  EXPECT_EQ(Print(f), "fn(%p: f32[2]) {\n  test_relu(%p)\n}");
  EXPECT_TRUE(StructuralEqual(f, ParseExpr(Print(f))));
  EXPECT_EQ(Print(Expr()), "<null>");

  std::ostringstream os;
  os << e;
  EXPECT_EQ(os.str(), Print(e));
  EXPECT_EQ(Print(ParseExpr("test.dotted(%x)", {{"x", x}})), "test.dotted(%x)");
  EXPECT_EQ(Print(ParseExpr("test_concat()")), "test_concat()");
}

TEST(Text, LongChainsPrintAndParseWithoutDeepRecursion) {
  Var x = MakeVar("x", F32({2}));
  Expr e = x;
  for (int i = 0; i < 10000; ++i) e = MakeCall("test_relu", {e});
  IRModule m = Main(MakeFunction({x}, e));
  std::string text = Print(m);
  IRModule back = ParseModule(text);
  EXPECT_TRUE(StructuralEqual(m, back));
  EXPECT_EQ(Print(back), text);
}

// ---- Errors -----------------------------------------------------------------------------------

std::string ParseError(const std::string& text, const std::vector<Tensor>* meta = nullptr) {
  try {
    ParseModule(text, meta);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParseError) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed without error:\n" << text;
  return "";
}

TEST(TextErrors, MessagesNameLineAndColumn) {
  const std::string head = "def @main(%x: f32[2]) {\n";
  EXPECT_EQ(ParseError(head + "  %a = test_relu(%x)\n  test_add(%a, k=%x = 1)\n}"),
            "3:18: expected an attribute value, got '%x'");
  EXPECT_EQ(ParseError(head + "  %a = test_relu(%x\n  %a\n}"),
            "3:3: expected ')' after arguments, got '%a'");
  EXPECT_EQ(ParseError(head + "  test_sum(%x, axes=[1] = 2)\n}"),
            "2:25: expected ')' after arguments, got '='");
  EXPECT_EQ(ParseError(head + "  %a = foo(%x)\n  %a\n}"), "2:8: unknown op 'foo'");
  EXPECT_EQ(ParseError(head + "  test_relu(%y)\n}"), "2:13: unknown variable '%y'");
  EXPECT_EQ(ParseError(head + "  %a = test_relu(%x)\n  %a = test_relu(%a)\n  %a\n}"),
            "3:3: redefinition of '%a'");
  EXPECT_EQ(ParseError(head + "  %x = test_relu(%x)\n  %x\n}"), "2:3: redefinition of '%x'");
  EXPECT_EQ(ParseError(head + "  test_sum(%x, axis=1)\n}"),
            "2:3: op 'test_sum' has no attribute 'axis' (known: axes, keepdims)");
  EXPECT_EQ(ParseError(head + "  test_sum(%x, keepdims=2)\n}"),
            "2:3: op 'test_sum': attribute 'keepdims' must be bool, got int 2");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x)\n}"),
            "2:3: op 'test_attrs': required attribute 'req' is missing");
  EXPECT_EQ(ParseError(head + "  test_relu(%x, %x)\n}"), "2:3: test_relu: expects 1 inputs, got 2");
  EXPECT_EQ(ParseError(head + "  test_sum(%x, axes=[1], %x)\n}"),
            "2:26: a positional argument after attributes");
  EXPECT_EQ(ParseError(head + "  test_sum(%x, axes=[1], axes=[2])\n}"),
            "2:26: duplicate attribute 'axes'");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x, req=1, s=\"abc)\n}"), "2:27: unterminated string");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x, req=1, s=\"a\\qb\")\n}"),
            "2:29: unknown escape '\\q' in a string");
  EXPECT_EQ(ParseError(head + "  /* never closed\n  test_relu(%x)\n}"),
            "2:3: unterminated comment");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x, req=12abc)\n}"), "2:22: bad number '12abc'");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x, req=99999999999999999999)\n}"),
            "2:22: integer literal '99999999999999999999' is out of range");
  EXPECT_EQ(ParseError(head + "  test_attrs(%x, req=1, f=1e999)\n}"),
            "2:27: float literal '1e999' is out of range");
  EXPECT_EQ(ParseError(head + "  test_relu(const(f32[2, 2], [1, 2, 3]))\n}"),
            "2:30: constant f32[2, 2] needs 4 values, got 3");
  EXPECT_EQ(ParseError(head + "  test_relu(const(f32[n], [1]))\n}"),
            "2:19: a constant's shape must be concrete, got f32[n]");
  EXPECT_EQ(ParseError(head + "  test_relu(const(i8[1], [200]))\n}"),
            "2:27: value 200 is out of range for i8");
  EXPECT_EQ(ParseError(head + "  test_relu(const(i8[1], [1.5]))\n}"),
            "2:27: expected an integer in an i8 constant, got '1.5'");
  EXPECT_EQ(ParseError(head + "  test_relu(const(bool[1], [1]))\n}"),
            "2:29: expected true or false in a bool constant, got '1'");
  EXPECT_EQ(ParseError(head + "  test_relu(const(f32[1], meta[0]))\n}"),
            "2:27: meta[0] used, but no metadata table was given");
  std::vector<Tensor> meta = {Tensor::Scalar<float>(1.0f)};
  EXPECT_EQ(ParseError(head + "  test_relu(const(f32[1], meta[1]))\n}", &meta),
            "2:32: meta[1] is out of range: the table has 1 entries");
  EXPECT_EQ(ParseError(head + "  test_relu(const(f32[1], meta[0]))\n}", &meta),
            "2:27: the metadata entry is f32[], but the constant is declared f32[1]");
  EXPECT_EQ(ParseError("def @main(%x: f33[2]) {\n  %x\n}"), "1:15: unknown type 'f33'");
  EXPECT_EQ(ParseError("def @main(%x: f32[n // 0]) {\n  %x\n}"),
            "1:21: dimension division by zero: n // 0");
  EXPECT_EQ(ParseError("def @main(%x: f32[2]) {\n  %x\n}\ndef @main() {\n  ()\n}"),
            "4:5: redefinition of function '@main'");
  EXPECT_EQ(ParseError("def @main(%x: f32[2]) {\n  %x\n"),
            "3:1: expected '}' at the end of the "
            "function body, got end of input");
  EXPECT_EQ(ParseError("main(%x) {}"), "1:1: expected 'def' or 'type', got 'main'");
  EXPECT_EQ(ParseError("def @m() {\n  %t = ()\n  %t.99999999999\n}"),
            "3:6: tuple index '99999999999' is out of range");
  EXPECT_EQ(ParseError("def @m() {\n  $\n}"), "2:3: unexpected character '$'");
  EXPECT_EQ(ParseError("def @m() {\n  % x\n}"), "2:3: expected a name after '%'");
  EXPECT_EQ(ParseError("def @m() {\n}"), "2:1: expected an expression, got '}'");
}

TEST(TextErrors, DeepNestingIsRejectedNotCrashed) {
  std::string deep_tuple = "def @m() {\n  " + std::string(100000, '(') + "\n}";
  EXPECT_EQ(ParseError(deep_tuple), "2:503: nesting is too deep (more than 500 levels)");
  std::string deep_type = "def @m(%x: " + std::string(100000, '(') + ") {\n  %x\n}";
  EXPECT_NE(ParseError(deep_type).find("nesting is too deep"), std::string::npos);
  std::string deep_dim = "def @m(%x: f32[" + std::string(100000, '(') + "]) {\n  %x\n}";
  EXPECT_NE(ParseError(deep_dim).find("nesting is too deep"), std::string::npos);
  std::string deep_fn = "def @m() {\n";
  for (int i = 0; i < 2000; ++i) deep_fn += "fn() {\n";
  EXPECT_NE(ParseError(deep_fn).find("nesting is too deep"), std::string::npos);
  // Moderate nesting is fine.
  std::string ok =
      "def @m(%x: f32[2]) {\n  " + std::string(100, '(') + "%x" + std::string(100, ')') + "\n}";
  EXPECT_NO_THROW(ParseModule(ok));
}

// Every prefix and many random mutations of a module exercising most of the grammar either
// parse or throw kiln::Error. Whatever parses must also print and read back equal.
TEST(TextErrors, FuzzedInputNeverCrashes) {
  std::vector<Tensor> meta = {test::RandomTensor(DType::kFloat32, {4}, 3)};
  const std::string text = R"(// header
def @main(%x: f32[batch, (seq + 1) // 2, min(a, 3)], %"w 1": f32[4], %b: i64[]) -> (f32[4],) {
  %fc1: f32[batch, 4] = test_add(%x, %"w 1")
  %1 = test_sum(%fc1, axes=[1, -1], keepdims=true)
  %2 = (%1, %fc1, const(f16[2], [1.5, -inf]))
  %3 = %2.1 /* block */
  %4 = test_attrs(%3, req=3, f=2.5e-3, s="s\"\x41\n", dt=bool, fs=[1, nan], b=false)
  %f = fn(%p: f32[4]) -> f32[4] attrs{primitive=true, "k k"=[]} {
    %0 = test_add(%p, const(f32[4], meta[0]))
    test_relu(%0)
  }
  %5 = %f(%4)
  (%5,)
}

def @other() {
  const(bool[2], [true, false])
}
)";
  ASSERT_NO_THROW(ParseModule(text, &meta));
  int parsed = 0, failed = 0;
  auto check = [&](const std::string& input) {
    try {
      IRModule m = ParseModule(input, &meta);
      ++parsed;
      std::vector<Tensor> table;
      std::string printed = Print(m, {}, &table);
      IRModule back = ParseModule(printed, &table);
      EXPECT_TRUE(StructuralEqual(m, back)) << input << "\n--- printed as ---\n" << printed;
    } catch (const Error& e) {
      ++failed;
      EXPECT_EQ(e.code(), ErrorCode::kParseError) << e.what() << "\n" << input;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-kiln exception " << e.what() << " for:\n" << input;
    }
  };
  for (size_t n = 0; n <= text.size(); ++n) check(text.substr(0, n));
  std::mt19937 rng(1234);
  const std::string alphabet = "()[]{},:=.%@\"-+*/?0123456789abcdefxyz_ \n\\";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = text;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 2:
          s.erase(pos, 1 + rng() % 8);
          break;
        default:
          s.insert(pos, s.substr(rng() % s.size(), 1 + rng() % 12));
          break;
      }
      if (s.empty()) s.push_back('x');
    }
    check(s);
  }
  EXPECT_GT(parsed, 10);
  EXPECT_GT(failed, 1000);
}

}  // namespace
}  // namespace kiln
