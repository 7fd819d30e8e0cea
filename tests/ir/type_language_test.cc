// The type language beyond tensors and tuples: type parameters with kinds, polymorphic module
// functions instantiated at each call, ADTs (the built-in List) and match, written in text IR,
// typed by InferTypes and run on the interpreter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/structural.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::RandomTensor;
using ::testing::AllOf;
using ::testing::HasSubstr;

Type MainType(const IRModule& typed) {
  return typed.Lookup("main")->body->type;
}

float At(const Tensor& t, int64_t i) {
  return t.data<float>()[i];
}

// The seed's example: a function over tensors of any one shape, called with the shape given
// and with it inferred.
constexpr const char* kPlus = R"(
def @plus<s : Shape>(%a: Tensor[s, f32], %b: Tensor[s, f32]) -> Tensor[s, f32] {
  add(%a, %b)
}
def @main(%x: f32[10, 10], %y: f32[10, 10]) {
  %0 = @plus<(10, 10)>(%x, %y)
  @plus(%0, %y)
}
)";

TEST(TypeLanguage, ShapeParameterGivenOrInferred) {
  IRModule m = ParseModule(kPlus);
  IRModule typed = InferTypes(m);
  EXPECT_EQ(TypeToString(MainType(typed)), "f32[10, 10]");
  Tensor x = RandomTensor(DType::kFloat32, {10, 10}, 1);
  Tensor y = RandomTensor(DType::kFloat32, {10, 10}, 2);
  std::vector<Tensor> out = Interpret(m, {x, y});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < 100; ++i) EXPECT_FLOAT_EQ(At(out[0], i), At(x, i) + At(y, i) + At(y, i));
}

TEST(TypeLanguage, ShapeParameterInstantiatedAfreshAtEachCall) {
  IRModule m = ParseModule(R"(
def @plus<s : Shape>(%a: Tensor[s, f32], %b: Tensor[s, f32]) {
  add(%a, %b)
}
def @main(%x: f32[3], %y: f32[2, 5]) {
  (@plus(%x, %x), @plus(%y, %y))
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(f32[3], f32[2, 5])");
}

TEST(TypeLanguage, ArgumentsThatDisagreeWithTheInstantiationAreNamed) {
  IRModule m = ParseModule(R"(
def @plus<s : Shape>(%a: Tensor[s, f32], %b: Tensor[s, f32]) {
  add(%a, %b)
}
def @main(%x: f32[10, 10], %z: f32[3]) {
  @plus(%x, %z)
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              AllOf(HasSubstr("call of @plus"), HasSubstr("argument 1"), HasSubstr("%b"),
                    HasSubstr("already")));
  IRModule given = ParseModule(R"(
def @plus<s : Shape>(%a: Tensor[s, f32], %b: Tensor[s, f32]) {
  add(%a, %b)
}
def @main(%x: f32[10, 10]) {
  @plus<(3,)>(%x, %x)
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(given); }),
              AllOf(HasSubstr("call of @plus"), HasSubstr("argument 0")));
}

TEST(TypeLanguage, KindErrorsAreReported) {
  // A Type parameter where a shape must stand.
  std::string msg =
      ErrorMessage([] { ParseModule("def @bad<t : Type>(%a: Tensor[t, f32]) {\n  %a\n}\n"); });
  EXPECT_THAT(msg, AllOf(HasSubstr("1:31"), HasSubstr("kind error: 't' has kind Type"),
                         HasSubstr("a tensor's shape needs kind Shape")));
  // A BaseType parameter used as a dim.
  EXPECT_THAT(ErrorMessage([] { ParseModule("def @bad<d : BaseType>(%a: f32[d]) {\n  %a\n}\n"); }),
              AllOf(HasSubstr("kind error: 'd' has kind BaseType"),
                    HasSubstr("a dim needs kind ShapeVar")));
  // A Shape parameter where a whole type must stand.
  EXPECT_THAT(ErrorMessage([] { ParseModule("def @bad<s : Shape>(%a: s) {\n  %a\n}\n"); }),
              HasSubstr("kind error: 's' has kind Shape, but a type needs kind Type"));
  // Built without the parser, the checker finds it.
  Type t = TypeVar("t", ParamKind::kType);
  Var a = MakeVar("a", TensorTypeOf(t, nullptr));
  IRModule m = IRModule().With("bad", MakePolyFunction({t}, {a}, a));
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              AllOf(HasSubstr("@bad"), HasSubstr("parameter %a"), HasSubstr("kind error")));
}

TEST(TypeLanguage, TypeArgumentOfTheWrongKindIsAKindError) {
  IRModule m = ParseModule(kPlus);
  Var x = MakeVar("x", TensorType({2}, DType::kFloat32));
  auto call = std::make_shared<CallNode>(*AsCall(MakeFnCall(MakeGlobalVar("plus"), {x, x})));
  call->type_args = {TypeArg{ParamKind::kType, TensorType({2}, DType::kFloat32), {}, {}, {}}};
  IRModule bad = m.With("main", MakeFunction({x}, call));
  EXPECT_THAT(ErrorMessage([&] { InferTypes(bad); }),
              AllOf(HasSubstr("kind error: type argument 0"), HasSubstr("'s' of @plus")));
}

TEST(TypeLanguage, PolymorphicIdentityAtTwoTypes) {
  IRModule m = ParseModule(R"(
def @id<t : Type>(%x: t) -> t {
  %x
}
def @main(%a: f32[2], %b: i64[3]) {
  %0 = @id(%a)
  %1 = @id((%b, %a))
  (%0, %1)
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(f32[2], (i64[3], f32[2]))");
  Tensor a = RandomTensor(DType::kFloat32, {2}, 3);
  Tensor b = RandomTensor(DType::kInt64, {3}, 4);
  std::vector<Tensor> out = Interpret(m, {a, b});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(test::TensorsNear(out[0], a, 0));
  EXPECT_TRUE(test::TensorsNear(out[1], b, 0));
  EXPECT_TRUE(test::TensorsNear(out[2], a, 0));
}

TEST(TypeLanguage, UninferableParameterAsksForTheTypeArgument) {
  IRModule m = ParseModule(R"(
def @zeros<s : Shape>(%x: f32[]) -> Tensor[s, f32] {
  %x
}
def @main(%x: f32[]) {
  @zeros(%x)
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              HasSubstr("cannot infer type parameter 's' of @zeros"));
}

TEST(TypeLanguage, ConstraintsHoldAtEveryCall) {
  constexpr const char* kDefs = R"(
def @scale<t1 : Type, t2 : Type>(%a: t1, %b: t2) -> t1 where t1 = mul(t1, t2) {
  mul(%a, %b)
}
)";
  IRModule ok =
      ParseModule(std::string(kDefs) + "def @main(%x: f32[4], %s: f32[]) {\n  @scale(%x, %s)\n}\n");
  EXPECT_EQ(TypeToString(MainType(InferTypes(ok))), "f32[4]");
  IRModule bad =
      ParseModule(std::string(kDefs) + "def @main(%x: f32[4], %s: f32[]) {\n  @scale(%s, %x)\n}\n");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(bad); }),
              AllOf(HasSubstr("call of @scale"), HasSubstr("constraint t1 = mul(t1, t2)"),
                    HasSubstr("does not hold"), HasSubstr("f32[4], not f32[]")));
}

TEST(TypeLanguage, ListsOfTensorsAndOfTuples) {
  IRModule m = ParseModule(R"(
def @main(%a: f32[2], %b: f32[2]) {
  %l = Cons(%a, Cons(%b, Nil))
  %t = Cons((%a, %b), Nil)
  (%l, %t)
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(List[f32[2]], List[(f32[2], f32[2])])");
}

TEST(TypeLanguage, IllTypedListsAreRejected) {
  // Elements of two types.
  IRModule mixed = ParseModule(R"(
def @main(%a: f32[2], %i: i64[]) {
  Cons(%a, Cons(%i, Nil))
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(mixed); }),
              AllOf(HasSubstr("Cons"), HasSubstr("field 1 of constructor Cons"),
                    HasSubstr("List[f32[2]]"), HasSubstr("List[i64[]]")));
  // A tail that is not a list.
  IRModule tail = ParseModule(R"(
def @main(%a: f32[2]) {
  Cons(%a, %a)
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(tail); }),
              AllOf(HasSubstr("field 1 of constructor Cons"), HasSubstr("List[f32[2]]")));
}

// A recursive function over the list: a match on Cons/Nil, run on the interpreter.
constexpr const char* kLength = R"(
def @length<a : Type>(%l: List[a]) -> i64[] {
  match (%l) {
    Cons(_, %t) => {
      add(@length(%t), const(i64[], 1))
    }
    Nil => {
      const(i64[], 0)
    }
  }
}
def @sum(%l: List[f32[3]]) -> f32[3] {
  match (%l) {
    Cons(%h, %t) => {
      add(%h, @sum(%t))
    }
    Nil => {
      const(f32[3], [0, 0, 0])
    }
  }
}
def @main(%x: f32[3], %y: f32[3]) {
  %l = Cons(%x, Cons(%y, Cons(%x, Nil)))
  (@length(%l), @length(Cons(%l, Nil)), @sum(%l))
}
)";

TEST(TypeLanguage, RecursiveLengthRunsOnTheInterpreter) {
  IRModule m = ParseModule(kLength);
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(i64[], i64[], f32[3])");
  Tensor x = RandomTensor(DType::kFloat32, {3}, 5);
  Tensor y = RandomTensor(DType::kFloat32, {3}, 6);
  std::vector<Tensor> out = Interpret(m, {x, y});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].data<int64_t>()[0], 3);
  EXPECT_EQ(out[1].data<int64_t>()[0], 1);
  for (int64_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(At(out[2], i), At(y, i) + At(x, i) + At(x, i));
}

TEST(TypeLanguage, TextRoundTripOfTheWholeLanguage) {
  for (const char* text : {kPlus, kLength}) {
    IRModule m = ParseModule(text);
    std::string printed = Print(m);
    IRModule again = ParseModule(printed);
    EXPECT_TRUE(StructuralEqual(m, again)) << printed;
    EXPECT_EQ(Print(again), printed);
  }
  IRModule adt = ParseModule(R"(
type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }
def @main(%x: f32[]) {
  Node(%x, Leaf, Node(%x, Leaf, Leaf))
}
)");
  std::string printed = Print(adt);
  EXPECT_THAT(printed, HasSubstr("type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }"));
  EXPECT_TRUE(StructuralEqual(adt, ParseModule(printed))) << printed;
  EXPECT_EQ(TypeToString(MainType(InferTypes(adt))), "Tree[f32[]]");
}

TEST(TypeLanguage, AdtsAreNominal) {
  IRModule m = ParseModule(R"(
type A { MakeA(f32[]) }
type B { MakeB(f32[]) }
def @take(%a: A) -> f32[] {
  match (%a) {
    MakeA(%v) => {
      %v
    }
  }
}
def @main(%x: f32[]) {
  @take(MakeB(%x))
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              AllOf(HasSubstr("call of @take"), HasSubstr("expected A, got B")));
}

TEST(TypeLanguage, PatternsAreTypedAgainstTheData) {
  IRModule m = ParseModule(R"(
def @main(%a: f32[2]) {
  match (%a) {
    Cons(_, _) => {
      %a
    }
  }
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              AllOf(HasSubstr("match"), HasSubstr("pattern Cons"), HasSubstr("f32[2]")));
  IRModule tuple = ParseModule(R"(
def @main(%a: f32[2], %b: i64[]) {
  match ((%a, %b)) {
    (%p, %q) => {
      (%q, %p)
    }
  }
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(tuple))), "(i64[], f32[2])");
}

TEST(TypeLanguage, RecursionNeedsTheReturnTypeAnnotated) {
  IRModule m = ParseModule(R"(
def @loop(%l: List[f32[]]) {
  match (%l) {
    Cons(_, %t) => {
      @loop(%t)
    }
    Nil => {
      const(f32[], 0)
    }
  }
}
def @main(%x: f32[]) {
  @loop(Cons(%x, Nil))
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              HasSubstr("a recursive call of @loop needs @loop's return type annotated"));
}

TEST(TypeLanguage, UnknownFunctionsAndConstructorsAreNamed) {
  IRModule m = ParseModule("def @main(%x: f32[]) {\n  @nowhere(%x)\n}\n");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }),
              HasSubstr("the module has no function @nowhere"));
  EXPECT_THAT(
      ErrorMessage([] {
        ParseModule(
            "def @main(%x: f32[]) {\n  match (%x) {\n    Foo => {\n      %x\n    }\n  }\n}\n");
      }),
      HasSubstr("unknown constructor 'Foo'"));
}

TEST(TypeLanguage, AdtsMayReferToOnesDefinedLater) {
  // Mutually recursive ADTs: each names the other before or after its definition.
  IRModule m = ParseModule(R"(
type Even { Zero, SuccE(Odd) }
type Odd { SuccO(Even) }
def @main(%x: f32[]) {
  (%x, SuccE(SuccO(Zero)))
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(f32[], Even)");
  std::string printed = Print(m);
  EXPECT_TRUE(StructuralEqual(m, ParseModule(printed))) << printed;
}

TEST(TypeLanguage, ConstructorsMayNotHideOpsOrKeywords) {
  EXPECT_THAT(ErrorMessage([] { ParseModule("type T { relu }\n"); }),
              HasSubstr("constructor 'relu' would hide an op or a keyword"));
  EXPECT_THAT(ErrorMessage([] { ParseModule("type T { match(f32[]) }\n"); }),
              HasSubstr("would hide an op or a keyword"));
  EXPECT_THAT(ErrorMessage([] { ParseModule("type List { A }\n"); }),
              HasSubstr("type 'List' is already defined"));
}

TEST(TypeLanguage, TypesThatGrowAtEachRecursiveCallAreStopped) {
  IRModule m = ParseModule(R"(
def @grow<a : Type>(%x: a) -> a {
  %0 = @grow((%x, %x))
  %0.0
}
def @main(%x: f32[]) {
  @grow(%x)
}
)");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(m); }), HasSubstr("too large to check"));
}

TEST(TypeLanguage, MonomorphicModuleFunctionsBindTheirDimSymbols) {
  IRModule m = ParseModule(R"(
def @double(%x: f32[n]) {
  concat(%x, %x, axis=0)
}
def @main(%a: f32[3], %b: f32[batch]) {
  (@double(%a), @double(%b))
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(f32[6], f32[batch * 2])");
  Tensor a = RandomTensor(DType::kFloat32, {3}, 7);
  Tensor b = RandomTensor(DType::kFloat32, {5}, 8);
  std::vector<Tensor> out = Interpret(m, {a, b});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{10}));
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(At(out[1], i), At(b, i % 5));
}

TEST(TypeLanguage, MatchWithNoClauseForTheValueFailsAtRunTime) {
  IRModule m = ParseModule(R"(
def @head(%l: List[f32[2]]) -> f32[2] {
  match (%l) {
    Cons(%h, _) => {
      %h
    }
  }
}
def @main(%x: f32[2]) {
  (@head(Cons(%x, Nil)), @head(Nil))
}
)");
  EXPECT_EQ(TypeToString(MainType(InferTypes(m))), "(f32[2], f32[2])");
  Tensor x = RandomTensor(DType::kFloat32, {2}, 9);
  EXPECT_THAT(ErrorMessage([&] { Interpret(m, {x}); }), HasSubstr("no clause matches"));
}

// Inputs a review found to break the checker or the round trip, each refused by name.
TEST(TypeLanguage, MalformedProgramsAreRefusedByName) {
  auto infer_error = [](const std::string& text) {
    return ErrorMessage([&] { InferTypes(ParseModule(text)); });
  };
  // A list that would contain itself: an infinite type.
  EXPECT_THAT(infer_error("def @main(%l) {\n  Cons(%l, %l)\n}\n"),
              HasSubstr("field 1 of constructor Cons differs: expected List[?], got ?"));
  EXPECT_THAT(infer_error("def @main(%x) {\n  %x(%x)\n}\n"), HasSubstr("infinite type"));
  // Incomplete annotations where a call or an ADT needs a type.
  EXPECT_THAT(ErrorMessage([] { ParseModule("type T { C(?) }\n"); }),
              HasSubstr("a constructor's field type must be complete"));
  IRModule holes = ParseModule("def @f(%x: ?) {\n  %x\n}\ndef @main(%x: f32[]) {\n  @f(%x)\n}\n");
  EXPECT_THAT(ErrorMessage([&] { InferTypes(holes, holes.Lookup("main")); }),
              HasSubstr("parameter %x of @f has no complete type annotation"));
  // A module function or constructor passed as a value.
  EXPECT_THAT(infer_error("def @f(%x: f32[]) -> f32[] {\n  %x\n}\n"
                          "def @main(%x: f32[]) {\n  %p = (@f,)\n  %h = %p.0\n  %h(%x)\n}\n"),
              HasSubstr("@f is used as a value"));
  // A dim symbol nothing binds.
  EXPECT_THAT(infer_error("def @f(%x: f32[n + 1]) -> f32[n + 1] {\n  %x\n}\n"
                          "def @main(%y: f32[3]) {\n  @f(%y)\n}\n"),
              HasSubstr("cannot bind dim symbol 'n' of @f"));
  // Duplicate ADT parameters; `where` with nothing to constrain.
  EXPECT_THAT(ErrorMessage([] { ParseModule("type T[a, a] { C(a) }\n"); }),
              HasSubstr("type parameter 'a' is declared twice"));
  EXPECT_THAT(ErrorMessage([] {
                ParseModule("def @f(%x: f32[2]) where f32[3] = add(f32[2], f32[2]) {\n  %x\n}\n");
              }),
              HasSubstr("'where' constraints need type parameters"));
  // A header inside a comment does not lend a def type parameters or a type a definition.
  EXPECT_THAT(ErrorMessage([] {
                ParseModule(
                    "/*\ndef @g<s : Shape>()\n*/\ndef @g() {\n  ()\n}\n"
                    "def @main() {\n  @g<(2)>()\n}\n");
              }),
              HasSubstr("type arguments for @g, which has no such type parameters"));
  EXPECT_THAT(
      ErrorMessage([] { ParseModule("/*\ntype Foo\n*/\ndef @main(%x: Foo) {\n  %x\n}\n"); }),
      HasSubstr("unknown type 'Foo'"));
  EXPECT_THAT(ErrorMessage([] { MakeMatch(MakeVar("x"), {}); }), HasSubstr("match: no clauses"));
}

TEST(TypeLanguage, InstantiationsAreBudgeted) {
  // Each function calls the previous one at two new types: 2^30 instances unless stopped.
  std::string text = "def @f0<t : Type>(%x: t) -> f32[] {\n  const(f32[], 0)\n}\n";
  for (int i = 1; i <= 30; ++i)
    text += StrCat("def @f", i, "<t : Type>(%x: t) -> f32[] {\n  add(@f", i - 1, "((%x,)), @f",
                   i - 1, "(Cons(%x, Nil)))\n}\n");
  text += "def @main(%x: f32[]) {\n  @f30(%x)\n}\n";
  EXPECT_THAT(ErrorMessage([&] { InferTypes(ParseModule(text)); }),
              HasSubstr("instances of module functions in one inference"));
}

TEST(TypeLanguage, BindingAGlobalKeepsItsCallee) {
  IRModule m = ParseModule(R"(
def @f(%x: f32[]) -> f32[] {
  %x
}
def @g(%x: f32[]) -> f32[] {
  neg(%x)
}
def @main(%x: f32[]) {
  %g = @f
  %g(%x)
}
)");
  EXPECT_THAT(Print(m), HasSubstr("@f(%x)"));
}

}  // namespace
}  // namespace kiln
