#include "ir/type_infer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using ::testing::HasSubstr;

const Dim kBatch = Dim::Symbol("batch");
const Dim kSeq = Dim::Symbol("seq");

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}

TEST(TypeInfer, MlpWithSymbolicBatch) {
  Var x = MakeVar("x", F32({kBatch, 784}));
  Var w1 = MakeVar("w1", F32({784, 128}));
  Var b1 = MakeVar("b1", F32({128}));
  Var w2 = MakeVar("w2", F32({128, 10}));
  Expr h = MakeCall("relu", {MakeCall("add", {MakeCall("matmul", {x, w1}, {}, "fc1"), b1})});
  Expr out = MakeCall("matmul", {h, w2}, {}, "fc2");
  Function f = InferTypes(MakeFunction({x, w1, b1, w2}, out));
  EXPECT_EQ(TypeToString(f->body->type), "f32[batch, 10]");
  EXPECT_EQ(TypeToString(f->type),
            "fn(f32[batch, 784], f32[784, 128], f32[128], f32[128, 10]) -> f32[batch, 10]");
  // Every node got a type.
  for (const Expr& e : PostOrder(f->body)) EXPECT_TRUE(IsComplete(e->type)) << DescribeNode(e);
}

TEST(TypeInfer, MismatchNamesNodeOpAndShapes) {
  Var x = MakeVar("x", F32({kBatch, 784}));
  Var w = MakeVar("w", F32({512, 1024}));
  Function f = MakeFunction({x, w}, MakeCall("matmul", {x, w}, {}, "fc1"));
  EXPECT_THAT(ErrorMessage([&] { InferTypes(f); }),
              HasSubstr("matmul 'fc1': inner dimensions differ: [batch, 784] x [512, 1024]"));
}

TEST(TypeInfer, DtypeMismatchIsATypeError) {
  Var x = MakeVar("x", F32({2}));
  Var y = MakeVar("y", TensorType({2}, DType::kInt64));
  Function f = MakeFunction({x, y}, MakeCall("add", {x, y}, {}, "sum1"));
  try {
    InferTypes(f);
    FAIL() << "expected a type error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTypeError);
    EXPECT_THAT(e.what(), HasSubstr("add 'sum1'"));
  }
}

TEST(TypeInfer, SymbolicBroadcastIsRecordedAndCheckedWhenBound) {
  Var x = MakeVar("x", F32({kBatch, 3}));
  Var y = MakeVar("y", F32({kSeq, 3}));
  Function f = MakeFunction({x, y}, MakeCall("add", {x, y}, {}, "mix"));
  std::vector<DimConstraint> constraints;
  Function typed = InferTypes(f, &constraints);
  EXPECT_EQ(TypeToString(typed->body->type), "f32[max(batch, seq), 3]");
  ASSERT_EQ(constraints.size(), 1u);
  EXPECT_THAT(constraints[0].where, HasSubstr("add 'mix'"));

  // batch = 1 broadcasts against seq = 5: fine, and the result is concrete.
  Function ok = BindSymbols(typed, {{"batch", 1}, {"seq", 5}}, constraints);
  EXPECT_EQ(TypeToString(ok->body->type), "f32[5, 3]");
  // 2 and 5 do not broadcast: the recorded constraint reports it, naming the node.
  std::string msg = ErrorMessage([&] {
    BindSymbols(typed, {{"batch", 2}, {"seq", 5}}, constraints);
  });
  EXPECT_THAT(msg, HasSubstr("add 'mix'"));
  EXPECT_THAT(msg, HasSubstr("do not broadcast"));
  // Without the recorded constraints, the concrete re-inference still catches it.
  EXPECT_THAT(ErrorMessage([&] {
                BindSymbols(typed, {{"batch", 2}, {"seq", 5}});
              }),
              HasSubstr("add 'mix'"));
}

TEST(TypeInfer, ShapeArithmeticSimplifies) {
  // concat doubles the dim, split halves it again: (seq + seq) // 2 == seq.
  Var x = MakeVar("x", F32({kBatch, kSeq}));
  Expr cat = MakeCall("concat", {x, x}, {{"axis", int64_t{1}}});
  Expr parts = MakeCall("split", {cat}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}});
  Function f = InferTypes(MakeFunction({x}, MakeTupleGetItem(parts, 1)));
  EXPECT_EQ(TypeToString(AsTupleGetItem(f->body)->tuple->type),
            "(f32[batch, seq], f32[batch, seq])");
  EXPECT_EQ(TypeToString(f->body->type), "f32[batch, seq]");
  const CallNode* split = AsCall(AsTupleGetItem(f->body)->tuple);
  EXPECT_EQ(TypeToString(split->args[0]->type), "f32[batch, seq * 2]");
}

TEST(TypeInfer, NestedFunctionNeedsSeveralRounds) {
  // The inner function's parameters carry no annotation: its add cannot run until the call
  // unifies the parameters with the arguments, so the solver must come back to it.
  Var p = MakeVar("p");
  Var q = MakeVar("q");
  Function inner = MakeFunction({p, q}, MakeCall("add", {p, q}, {}, "inner_add"));
  Var x = MakeVar("x", F32({kBatch, 8}));
  Var y = MakeVar("y", F32({8}));
  Expr pre = MakeCall("relu", {x});
  Expr call = MakeFnCall(inner, {pre, y}, "fused");
  Function f = MakeFunction({x, y}, MakeCall("exp", {call}));
  InferStats stats;
  Function typed = InferTypes(f, nullptr, &stats);
  EXPECT_EQ(TypeToString(typed->body->type), "f32[batch, 8]");
  EXPECT_GE(stats.rounds, 2);
  EXPECT_GT(stats.relation_runs, 3);  // inner add and exp ran more than once
  const CallNode* c = AsCall(AsCall(typed->body)->args[0]);
  EXPECT_EQ(TypeToString(c->fn->type), "fn(f32[batch, 8], f32[8]) -> f32[batch, 8]");
  EXPECT_EQ(TypeToString(AsFunction(c->fn)->params[0]->type), "f32[batch, 8]");
}

TEST(TypeInfer, TuplesAndItems) {
  Var x = MakeVar("x", F32({kBatch, 6}));
  Expr parts =
      MakeCall("split", {x}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{2, 4}}});
  Expr t = MakeTuple({MakeTupleGetItem(parts, 1), x});
  Function f = InferTypes(MakeFunction({x}, t));
  EXPECT_EQ(TypeToString(f->body->type), "(f32[batch, 4], f32[batch, 6])");

  Function bad = MakeFunction({x}, MakeTupleGetItem(parts, 2));
  EXPECT_THAT(ErrorMessage([&] { InferTypes(bad); }), HasSubstr("index 2 is out of range"));
  Function not_tuple = MakeFunction({x}, MakeTupleGetItem(x, 0));
  EXPECT_THAT(ErrorMessage([&] { InferTypes(not_tuple); }), HasSubstr("not a tuple"));
}

TEST(TypeInfer, HolesLeftAskForAnnotation) {
  Var x = MakeVar("x");
  Function f = MakeFunction({x}, MakeCall("relu", {x}, {}, "act"));
  std::string msg = ErrorMessage([&] { InferTypes(f); });
  EXPECT_THAT(msg, HasSubstr("relu 'act'"));
  EXPECT_THAT(msg, HasSubstr("annotate"));
}

TEST(TypeInfer, ReturnAnnotationIsChecked) {
  Var x = MakeVar("x", F32({kBatch, 4}));
  Function ok = MakeFunction({x}, MakeCall("relu", {x}), F32({kBatch, 4}));
  EXPECT_NO_THROW(InferTypes(ok));
  Function bad = MakeFunction({x}, MakeCall("relu", {x}), F32({kBatch, 5}));
  EXPECT_THAT(
      ErrorMessage([&] { InferTypes(bad); }),
      HasSubstr(
          "function: the declared return type differs: expected f32[batch, 5], got f32[batch, 4]"));
}

TEST(TypeInfer, InferringATypedGraphReturnsItUnchanged) {
  Var x = MakeVar("x", F32({kBatch, 4}));
  Function f = InferTypes(MakeFunction({x}, MakeCall("exp", {MakeCall("relu", {x})})));
  EXPECT_EQ(InferTypes(f), f);
  EXPECT_EQ(f->params[0], x);  // annotated parameters keep their identity
}

TEST(TypeInfer, BindInputShapesReportsTheInputAtFault) {
  Var x = MakeVar("x", F32({kBatch, 4}));
  Var y = MakeVar("y", F32({kBatch, kSeq}));
  Function f = MakeFunction({x, y}, MakeTuple({x, y}));
  auto binds = BindInputShapes(f, {F32({3, 4}), F32({3, 10})});
  EXPECT_EQ(binds.at("batch"), 3);
  EXPECT_EQ(binds.at("seq"), 10);
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {F32({3, 4, 1}), F32({3, 10})});
              }),
              HasSubstr("input 'x': expected f32[batch, 4], given f32[3, 4, 1] (rank differs)"));
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {TensorType({3, 4}, DType::kInt32), F32({3, 10})});
              }),
              HasSubstr("input 'x': expected f32[batch, 4], given i32[3, 4] (dtype differs)"));
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {F32({3, 4}), F32({4, 10})});
              }),
              HasSubstr("input 'y': expected f32[batch, seq], given f32[4, 10] (dim 0 is batch, "
                        "which input 'x' bound to 3)"));
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {F32({3, 5}), F32({3, 10})});
              }),
              HasSubstr("input 'x': expected f32[batch, 4], given f32[3, 5]"));
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {F32({3, 4})});
              }),
              HasSubstr("expected 2 inputs, got 1"));
}

TEST(TypeInfer, BoundExpressionDimsAreChecked) {
  Var s = MakeVar("s", F32({kSeq}));
  Var y = MakeVar("y", F32({kSeq * 2}));
  Function f = MakeFunction({s, y}, MakeTuple({s, y}));
  EXPECT_EQ(BindInputShapes(f, {F32({5}), F32({10})}).at("seq"), 5);
  EXPECT_THAT(ErrorMessage([&] {
                BindInputShapes(f, {F32({5}), F32({11})});
              }),
              HasSubstr("dim 0 must be seq * 2 = 10"));
}

}  // namespace
}  // namespace kiln
