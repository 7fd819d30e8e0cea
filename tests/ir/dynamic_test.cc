// Shapes as values (ir/dynamic.h): the shape and size ops, the dynamic variants' relations,
// which inputs are value inputs, and ResolveDynamic turning a graph with computed shapes into
// a static one (checked against the same computation written with static ops), with its
// errors.
#include <gmock/gmock.h>

#include "common/test_util.h"
#include "ir/dynamic.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

Function Parse(const std::string& text) {
  return InferTypes(ParseModule(text)).Lookup("main");
}

// The ops called in `fn`'s body, in post order.
std::vector<std::string> OpsOf(const Function& fn) {
  std::vector<std::string> ops;
  for (const Expr& e : PostOrder(fn->body))
    if (const CallNode* c = AsCall(e); c && c->op) ops.push_back(c->op->name);
  return ops;
}

TEST(ShapeOp, RelationAndReference) {
  Type x = F32({2, 3, 4});
  EXPECT_EQ(Infer("shape", {x}), "i64[3]");
  EXPECT_EQ(Infer("shape", {x}, {{"start", int64_t{1}}}), "i64[2]");
  EXPECT_EQ(Infer("shape", {x}, {{"start", int64_t{-1}}}), "i64[1]");
  EXPECT_EQ(Infer("shape", {x}, {{"start", int64_t{-10}}, {"end", int64_t{10}}}), "i64[3]");
  EXPECT_EQ(Infer("shape", {x}, {{"start", int64_t{2}}, {"end", int64_t{1}}}), "i64[0]");
  // A symbolic dim leaves the length known.
  EXPECT_EQ(Infer("shape", {TensorType({Dim::Symbol("n"), 5}, DType::kFloat32)}), "i64[2]");
  EXPECT_EQ(Infer("size", {x}), "i64[]");

  Tensor t = RandomTensor(DType::kFloat32, {2, 3, 4}, 1);
  Tensor s = RunOpReference("shape", {t}, {{"start", int64_t{1}}}).at(0);
  EXPECT_EQ(s.data<int64_t>()[0], 3);
  EXPECT_EQ(s.data<int64_t>()[1], 4);
  EXPECT_EQ(RunOpReference("size", {t}).at(0).data<int64_t>()[0], 24);
}

TEST(DynamicOps, RelationsKnowTheRankOnly) {
  Type x = F32({6});
  Type two = TensorType({2}, DType::kInt64);
  EXPECT_THAT(Infer("dyn.reshape", {x, two}), MatchesRegex(R"(f32\[_v[0-9]+, _v[0-9]+\])"));
  EXPECT_THAT(Infer("dyn.unsqueeze", {x, two}), MatchesRegex(R"(f32\[(_v[0-9]+, ){2}_v[0-9]+\])"));
  EXPECT_EQ(Infer("dyn.cumsum", {x, TensorType({}, DType::kInt64)}), "f32[6]");
  // A value whose length is symbolic leaves the rank unknown: a type error.
  Type sym = TensorType({Dim::Symbol("k")}, DType::kInt64);
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("dyn.reshape", {x, sym});
              }),
              HasSubstr("shape has a symbolic length k"));
  // A scalar has no axis to split or take the top k along (found by fuzzing the C API).
  Type scalar = F32({});
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("dyn.split", {scalar, two});
              }),
              HasSubstr("cannot split a scalar"));
  EXPECT_THAT(ErrorMessage([&] {
                InferOpType("dyn.topk", {scalar, TensorType({1}, DType::kInt64)});
              }),
              HasSubstr("got a scalar"));
  // The static op's other attributes stay on the variant; the value ones are gone.
  const OpDef& dyn = OpRegistry::Global().Get("dyn.reshape");
  EXPECT_EQ(dyn.static_op, "reshape");
  ASSERT_EQ(dyn.attrs.size(), 1u);
  EXPECT_EQ(dyn.attrs[0].name, "allowzero");
}

TEST(AttrFromTensor, ConvertsByKindAndNamesBadValues) {
  Tensor ints = Tensor::FromVector<int64_t>({2}, {std::numeric_limits<int64_t>::max(), -3});
  EXPECT_EQ(std::get<std::vector<int64_t>>(AttrFromTensor(ints, AttrKind::kInts, "ends")),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), -3}));
  Tensor one = Tensor::FromVector<int32_t>({1}, {4});
  EXPECT_EQ(std::get<int64_t>(AttrFromTensor(one, AttrKind::kInt, "axis")), 4);
  EXPECT_EQ(std::get<double>(AttrFromTensor(one, AttrKind::kFloat, "delta")), 4.0);
  EXPECT_THAT(ErrorMessage([&] { AttrFromTensor(ints, AttrKind::kInt, "axis"); }),
              HasSubstr("axis: expected one value"));
  Tensor floats = Tensor::FromVector<float>({1}, {1.5f});
  EXPECT_THAT(ErrorMessage([&] { AttrFromTensor(floats, AttrKind::kInts, "shape"); }),
              HasSubstr("shape: expected integers"));
  Tensor matrix = Tensor::FromVector<int64_t>({1, 1}, {1});
  EXPECT_THAT(ErrorMessage([&] { AttrFromTensor(matrix, AttrKind::kInts, "shape"); }),
              HasSubstr("expected a 1-D tensor"));
  // The attribute's tensor form reads back as the same value.
  AttrValue v = std::vector<double>{0.5, 2.0};
  EXPECT_EQ(AttrFromTensor(TensorFromAttr(v), AttrKind::kFloats, "scales"), v);
}

constexpr char kReshapeByInput[] = R"(
def @main(%x: f32[n], %s: i64[2]) {
  dyn.reshape(%x, %s)
}
)";

// x reshaped to [n / 2, 2] with the target computed from x's own shape.
constexpr char kComputedShape[] = R"(
def @main(%x: f32[n, 4]) {
  %s = shape(%x)
  %rows = gather(%s, const(i64[1], [0]), axis=0)
  %t = concat(%rows, const(i64[1], [2]), const(i64[1], [2]), axis=0)
  %y = dyn.reshape(%x, %t)
  dyn.reshape(%y, shape(%x))
}
)";

TEST(ValueInputs, AreTheInputsWhoseValuesReachAValueArgument) {
  EXPECT_EQ(ValueInputs(Parse(kReshapeByInput)), std::vector<int>{1});
  // Through shape() only the type is read: x is not a value input.
  EXPECT_TRUE(ValueInputs(Parse(kComputedShape)).empty());
  EXPECT_TRUE(HasDynamicOps(Parse(kComputedShape)));
  EXPECT_FALSE(HasDynamicOps(Parse("def @main(%x: f32[2]) { relu(%x) }")));
  // Through arithmetic the value is read.
  Function f = Parse(R"(
def @main(%x: f32[6], %k: i64[2]) {
  dyn.reshape(%x, add(%k, const(i64[], 1)))
}
)");
  EXPECT_EQ(ValueInputs(f), std::vector<int>{1});
}

TEST(ResolveDynamic, AValueInputBecomesTheStaticAttribute) {
  Function f = Parse(kReshapeByInput);
  Tensor x = RandomTensor(DType::kFloat32, {6}, 2);
  Tensor s = Tensor::FromVector<int64_t>({2}, {3, -1});
  Function bound = BindSymbols(f, {{"n", 6}});
  Function r = ResolveDynamic(bound, {x, s});
  EXPECT_EQ(OpsOf(r), std::vector<std::string>{"reshape"});
  EXPECT_EQ(TypeToString(r->body->type), "f32[3, 2]");
  std::vector<Tensor> got = Interpret(f, {x, s});
  EXPECT_EQ(got.at(0).shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(TensorsNear(got[0], x.Reshaped({3, 2})));
}

TEST(ResolveDynamic, AShapeComputationFoldsAway) {
  Function f = Parse(kComputedShape);
  for (int64_t n : {1, 3, 8}) {
    Function r = ResolveDynamic(BindSymbols(f, {{"n", n}}), {Tensor()});
    // Nothing of the computation is left: two static reshapes of x.
    EXPECT_EQ(OpsOf(r), (std::vector<std::string>{"reshape", "reshape"})) << n;
    EXPECT_EQ(TypeToString(r->body->type), StrCat("f32[", n, ", 4]"));
    const CallNode* inner = AsCall(AsCall(r->body)->args[0]);
    EXPECT_EQ(AttrValueToString(*inner->attrs.Find("shape")), StrCat("[", n, ", 2, 2]"));
    Tensor x = RandomTensor(DType::kFloat32, {n, 4}, 3 + n);
    EXPECT_TRUE(TensorsNear(Interpret(f, {x}).at(0), x));
  }
}

TEST(ResolveDynamic, EveryVariantResolvesToItsStaticOp) {
  Function f = Parse(R"(
def @main(%x: f32[4, 6], %starts: i64[2], %axes: i64[1], %reps: i64[2]) {
  %a = dyn.slice(%x, %starts, const(i64[2], [4, 5]), const(i64[2], [0, 1]), const(i64[2], [1, 2]))
  %b = dyn.unsqueeze(%a, %axes)
  %c = dyn.squeeze(%b, %axes)
  %d = dyn.tile(%c, %reps)
  %e = dyn.sum(%d, %axes, keepdims=false)
  %f = dyn.cumsum(%e, const(i64[], 0))
  %g = dyn.expand(%f, const(i64[2], [2, 1]))
  %h = dyn.split(%g, const(i64[2], [1, 1]), axis=0)
  %r = dyn.range(const(f64[], 0), size(%x), const(f64[], 6), dtype=f32)
  (%h.1, %r)
}
)");
  Tensor x = RandomTensor(DType::kFloat32, {4, 6}, 4);
  std::vector<Tensor> in{x, Tensor::FromVector<int64_t>({2}, {1, 0}),
                         Tensor::FromVector<int64_t>({1}, {0}),
                         Tensor::FromVector<int64_t>({2}, {2, 1})};
  Function r = ResolveDynamic(BindSymbols(f, {}), in);
  for (const std::string& op : OpsOf(r)) EXPECT_EQ(op.rfind("dyn.", 0), std::string::npos) << op;
  // The same computation with static ops.
  Function s = Parse(R"(
def @main(%x: f32[4, 6]) {
  %a = slice(%x, starts=[1, 0], ends=[4, 5], axes=[0, 1], steps=[1, 2])
  %d = tile(squeeze(unsqueeze(%a, axes=[0]), axes=[0]), repeats=[2, 1])
  %g = expand(cumsum(sum(%d, axes=[0], keepdims=false), axis=0), shape=[2, 1])
  %h = split(%g, split=[1, 1], axis=0)
  (%h.1, range(start=0.0, limit=24.0, delta=6.0, dtype=f32))
}
)");
  std::vector<Tensor> got = Interpret(f, in);
  std::vector<Tensor> want = Interpret(s, {x});
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(TensorsNear(got[i], want[i])) << i;
}

TEST(ResolveDynamic, AValueThatCannotBeComputedIsNamed) {
  // The gather index is out of range: the fold fails, so the reshape cannot be resolved.
  Function f = Parse(R"(
def @main(%x: f32[6]) {
  %t = gather(shape(%x), const(i64[1], [5]), axis=0)
  %r = dyn.reshape(%x, %t)
  %r
}
)");
  EXPECT_THAT(ErrorMessage([&] { ResolveDynamic(BindSymbols(f, {}), {Tensor()}); }),
              AllOf(HasSubstr("dyn.reshape"), HasSubstr("its shape (argument 1)"),
                    HasSubstr("only known after the run")));
  // A value the static op rejects names the node.
  Function g = Parse(kReshapeByInput);
  Tensor bad = Tensor::FromVector<int64_t>({2}, {4, 4});
  EXPECT_THAT(
      ErrorMessage([&] {
        ResolveDynamic(BindSymbols(g, {{"n", 6}}), {RandomTensor(DType::kFloat32, {6}, 5), bad});
      }),
      HasSubstr("reshape"));
}

}  // namespace
}  // namespace kiln
