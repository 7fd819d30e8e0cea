#include "ir/structural.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/test_util.h"
#include "ir/text.h"

namespace kiln {
namespace {

Type FirstArgType(TypeRelContext& ctx) {
  return ctx.arg(0);
}

void RegisterTestOp(const std::string& name, int inputs, std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.name = name;
  def.min_inputs = inputs;
  def.max_inputs = inputs;
  def.attrs = std::move(attrs);
  def.type_rel = FirstArgType;
  OpRegistry::Global().Register(std::move(def));
}

// Ops of our own, so these tests do not depend on the built-in op library.
const bool kTestOpsRegistered = [] {
  RegisterTestOp("st_add", 2);
  RegisterTestOp("st_sub", 2);
  RegisterTestOp("st_neg", 1);
  RegisterTestOp("st_scale", 1, {{"k", AttrKind::kFloat, 1.0}});
  return true;
}();

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}

// Asserts a == b, b == a and equal hashes.
void ExpectEqual(const Expr& a, const Expr& b, bool compare_types = true) {
  EXPECT_TRUE(StructuralEqual(a, b, compare_types)) << Print(a) << "\n-- vs --\n" << Print(b);
  EXPECT_TRUE(StructuralEqual(b, a, compare_types)) << Print(b) << "\n-- vs --\n" << Print(a);
  EXPECT_EQ(StructuralHash(a), StructuralHash(b));
}

void ExpectDifferent(const Expr& a, const Expr& b, bool compare_types = true) {
  EXPECT_FALSE(StructuralEqual(a, b, compare_types)) << Print(a) << "\n-- vs --\n" << Print(b);
  EXPECT_FALSE(StructuralEqual(b, a, compare_types)) << Print(b) << "\n-- vs --\n" << Print(a);
}

Function AddFn(const std::string& xname = "x", const std::string& yname = "y") {
  Var x = MakeVar(xname, F32({2}));
  Var y = MakeVar(yname, F32({2}));
  return MakeFunction({x, y}, MakeCall("st_neg", {MakeCall("st_add", {x, y})}));
}

TEST(Structural, EqualModuloVariableIdentityAndNames) {
  Function a = AddFn("x", "y");
  Function b = AddFn("p", "q");  // other Var objects, other names
  ExpectEqual(a, b);
  ExpectEqual(a, a);
  Expr named =
      MakeCall("st_neg", {MakeCall("st_add", {b->params[0], b->params[1]}, {}, "sum")}, {}, "out");
  ExpectEqual(a, MakeFunction(b->params, named));
}

TEST(Structural, ParametersAreMappedInOrder) {
  Var x = MakeVar("x", F32({2}));
  Var y = MakeVar("y", F32({2}));
  Function f = MakeFunction({x, y}, MakeCall("st_sub", {x, y}));
  Function swapped = MakeFunction({y, x}, MakeCall("st_sub", {x, y}));
  ExpectDifferent(f, swapped);
  Function fewer = MakeFunction({x}, MakeCall("st_sub", {x, x}));
  ExpectDifferent(f, fewer);
}

TEST(Structural, FreeVariablesMapConsistently) {
  Var a = MakeVar("a", F32({2}));
  Var b = MakeVar("b", F32({2}));
  Var c = MakeVar("c", F32({2}));
  Var d = MakeVar("d", F32({2}));
  ExpectEqual(MakeCall("st_sub", {a, b}), MakeCall("st_sub", {c, d}));
  ExpectEqual(MakeCall("st_sub", {a, a}), MakeCall("st_sub", {c, c}));
  ExpectDifferent(MakeCall("st_sub", {a, a}), MakeCall("st_sub", {c, d}));
  ExpectDifferent(MakeCall("st_sub", {a, b}), MakeCall("st_sub", {a, a}));
  // A var annotation is always compared, even with compare_types=false.
  ExpectDifferent(a, MakeVar("a", F32({3})), /*compare_types=*/false);
  ExpectDifferent(a, MakeVar("a"));
}

TEST(Structural, LocalPropertiesAreCompared) {
  Var x = MakeVar("x", F32({2}));
  Var y = MakeVar("y", F32({2}));
  ExpectDifferent(MakeCall("st_add", {x, y}), MakeCall("st_sub", {x, y}));
  ExpectDifferent(MakeCall("st_scale", {x}, {{"k", 2.0}}), MakeCall("st_scale", {x}, {{"k", 3.0}}));
  ExpectEqual(MakeCall("st_scale", {x}, {{"k", 1.0}}), MakeCall("st_scale", {x}));
  Expr t = MakeTuple({x, y});
  ExpectDifferent(MakeTupleGetItem(t, 0), MakeTupleGetItem(t, 1));
  ExpectDifferent(MakeTuple({x, y}), MakeTuple({x, y, x}));
  ExpectDifferent(MakeTuple({x}), MakeCall("st_neg", {x}));

  auto c = [](std::vector<float> v) { return MakeConstant(test::MakeTensor<float>({2}, v)); };
  ExpectEqual(c({1, 2}), c({1, 2}));
  ExpectDifferent(c({1, 2}), c({1, 3}));
  ExpectDifferent(c({0.0f, 1}), c({-0.0f, 1}));  // bytes, not values
  ExpectEqual(c({NAN, 1}), c({NAN, 1}));
  ExpectDifferent(c({1, 2}), MakeConstant(test::MakeTensor<float>({2, 1}, {1, 2})));
  ExpectDifferent(c({1, 2}), MakeConstant(test::MakeTensor<int32_t>({2}, {1, 2})));

  Function f = AddFn();
  ExpectDifferent(f, MakeFunction(f->params, f->body, F32({2})));
  ExpectDifferent(f, MakeFunction(f->params, f->body, nullptr, {{"primitive", true}}));
  ExpectEqual(MakeFunction(f->params, f->body, nullptr, {{"primitive", true}}),
              MakeFunction(f->params, f->body, nullptr, {{"primitive", true}}));
  // A NaN attribute still equals itself.
  Expr nan = MakeCall("st_scale", {x}, {{"k", std::numeric_limits<double>::quiet_NaN()}});
  ExpectEqual(nan, nan);

  ExpectEqual(Expr(), Expr());
  ExpectDifferent(Expr(), x);
}

TEST(Structural, FunctionValueCallsCompareTheCallee) {
  Function f = AddFn();
  Function g = AddFn();
  Var x = MakeVar("x", F32({2}));
  ExpectEqual(MakeFnCall(f, {x, x}), MakeFnCall(g, {x, x}));
  Var p = MakeVar("p", F32({2}));
  Function h = MakeFunction({p, p}, p);
  ExpectDifferent(MakeFnCall(f, {x, x}), MakeFnCall(h, {x, x}));
}

// The one-to-one node map makes sharing part of the structure; see structural.h.
TEST(Structural, SharingIsSignificant) {
  Var x = MakeVar("x", F32({2}));
  Expr c1 = MakeConstant(test::MakeTensor<float>({2}, {1, 2}));
  Expr c2 = MakeConstant(test::MakeTensor<float>({2}, {1, 2}));
  Expr shared = MakeCall("st_add", {c1, c1});
  Expr distinct = MakeCall("st_add", {c1, c2});
  ExpectDifferent(shared, distinct);
  ExpectEqual(shared, MakeCall("st_add", {c2, c2}));

  Expr n1 = MakeCall("st_neg", {x});
  Expr n2 = MakeCall("st_neg", {x});
  ExpectDifferent(MakeTuple({n1, n1}), MakeTuple({n1, n2}));
  ExpectEqual(MakeTuple({n1, n2}), MakeTuple({n2, n1}));
}

TEST(Structural, TypesAreComparedUnlessAskedNotTo) {
  Var x = MakeVar("x", F32({Dim::Symbol("n")}));
  Expr plain = MakeCall("st_neg", {x});
  Expr typed = WithType(plain, F32({Dim::Symbol("n")}));
  ExpectDifferent(plain, typed);
  ExpectEqual(plain, typed, /*compare_types=*/false);
  ExpectDifferent(typed, WithType(plain, F32({Dim::Symbol("m")})));
  ExpectEqual(typed, WithType(plain, F32({Dim::Symbol("n") * 2 - Dim::Symbol("n")})));

  // Holes only have to correspond one to one.
  Type h1 = IncompleteType(), h2 = IncompleteType(), h3 = IncompleteType();
  ExpectEqual(WithType(MakeTuple({plain, plain}), TupleType({h1, h1})),
              WithType(MakeTuple({plain, plain}), TupleType({h3, h3})));
  ExpectDifferent(WithType(MakeTuple({plain, plain}), TupleType({h1, h2})),
                  WithType(MakeTuple({plain, plain}), TupleType({h3, h3})));
}

TEST(Structural, ModulesCompareFunctionByFunction) {
  IRModule a({{"main", AddFn()}, {"other", AddFn()}});
  IRModule b({{"main", AddFn()}, {"other", AddFn()}});
  EXPECT_TRUE(StructuralEqual(a, b));
  EXPECT_EQ(StructuralHash(a), StructuralHash(b));
  EXPECT_FALSE(StructuralEqual(a, a.Without("other")));
  EXPECT_FALSE(StructuralEqual(a.Without("other"), a));
  IRModule renamed({{"main", AddFn()}, {"another", AddFn()}});
  EXPECT_FALSE(StructuralEqual(a, renamed));
  EXPECT_NE(StructuralHash(a), StructuralHash(renamed));
  Var x = MakeVar("x", F32({2}));
  EXPECT_FALSE(StructuralEqual(a, a.With("other", MakeFunction({x}, x))));
}

TEST(Structural, HashSeparatesCommonDifferences) {
  Var x = MakeVar("x", F32({2}));
  Var y = MakeVar("y", F32({2}));
  std::vector<Expr> exprs = {
      MakeCall("st_add", {x, y}),
      MakeCall("st_sub", {x, y}),
      MakeCall("st_add", {x, x}),
      MakeCall("st_scale", {x}, {{"k", 2.0}}),
      MakeCall("st_scale", {x}, {{"k", 3.0}}),
      MakeTuple({x, y}),
      MakeTupleGetItem(MakeTuple({x, y}), 1),
      MakeConstant(test::MakeTensor<float>({2}, {1, 2})),
      MakeConstant(test::MakeTensor<float>({2}, {1, 3})),
      MakeFunction({x, y}, MakeCall("st_add", {x, y})),
      MakeFunction({y, x}, MakeCall("st_add", {x, y})),
  };
  for (size_t i = 0; i < exprs.size(); ++i)
    for (size_t j = i + 1; j < exprs.size(); ++j) {
      EXPECT_FALSE(StructuralEqual(exprs[i], exprs[j])) << i << " vs " << j;
      EXPECT_NE(StructuralHash(exprs[i]), StructuralHash(exprs[j])) << i << " vs " << j;
    }
}

TEST(Structural, NestedFunctionsAndClosures) {
  auto build = [](double k) {
    Var x = MakeVar("x", F32({2}));
    Expr outer = MakeCall("st_neg", {x});
    Var p = MakeVar("p", F32({2}));
    Function inner =
        MakeFunction({p}, MakeCall("st_add", {p, outer}), nullptr, {{"primitive", true}});
    return MakeFunction({x}, MakeFnCall(inner, {MakeCall("st_scale", {outer}, {{"k", k}})}));
  };
  ExpectEqual(build(2.0), build(2.0));
  ExpectDifferent(build(2.0), build(3.0));
  // A text round trip keeps closures and sharing.
  Function f = build(2.0);
  ExpectEqual(f, ParseExpr(Print(f)));
}

TEST(Structural, LongChainsNeedNoDeepRecursion) {
  auto chain = [](int n, const char* last) {
    Var x = MakeVar("x", F32({2}));
    Expr e = x;
    for (int i = 0; i < n; ++i) e = MakeCall(i == 0 ? last : "st_neg", {e});
    return MakeFunction({x}, e);
  };
  Function a = chain(10000, "st_neg");
  Function b = chain(10000, "st_neg");
  Function c = chain(10000, "st_scale");  // differs at the far end only
  ExpectEqual(a, b);
  ExpectDifferent(a, c);
  EXPECT_NE(StructuralHash(a), StructuralHash(c));
}

}  // namespace
}  // namespace kiln
