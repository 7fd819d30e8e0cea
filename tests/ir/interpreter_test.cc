#include "ir/interpreter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "ir/type_infer.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::HasSubstr;

const Dim kBatch = Dim::Symbol("batch");

Type F32(Shape s) {
  return TensorType(std::move(s), DType::kFloat32);
}

// relu(x @ w + b), computed by hand.
Tensor MlpByHand(const Tensor& x, const Tensor& w, const Tensor& b) {
  int64_t n = x.shape()[0], k = x.shape()[1], m = w.shape()[1];
  Tensor out = Tensor::Empty(DType::kFloat32, {n, m});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double acc = b.data<float>()[j];
      for (int64_t p = 0; p < k; ++p)
        acc += double(x.data<float>()[i * k + p]) * w.data<float>()[p * m + j];
      out.data<float>()[i * m + j] = acc > 0 ? float(acc) : 0.0f;
    }
  }
  return out;
}

TEST(Interpreter, RunsAnMlpForSeveralBatchSizes) {
  Var x = MakeVar("x", F32({kBatch, 7}));
  Tensor w = RandomTensor(DType::kFloat32, {7, 5}, 2);
  Tensor b = RandomTensor(DType::kFloat32, {5}, 3);
  Expr body = MakeCall(
      "relu", {MakeCall("add", {MakeCall("matmul", {x, MakeConstant(w)}), MakeConstant(b)})});
  Function f = MakeFunction({x}, body);
  for (int64_t batch : {1, 3, 17}) {
    Tensor in = RandomTensor(DType::kFloat32, {batch, 7}, 10 + batch);
    std::vector<Tensor> out = Interpret(f, {in});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(TensorsNear(out[0], MlpByHand(in, w, b), 1e-5, 1e-5)) << "batch " << batch;
  }
}

TEST(Interpreter, TupleResultsAreFlattenedAndFunctionsCalled) {
  Var x = MakeVar("x", F32({kBatch, 4}));
  Var p = MakeVar("p");
  Function neg_exp = MakeFunction({p}, MakeCall("neg", {MakeCall("exp", {p})}));
  Expr parts = MakeCall("split", {x}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}});
  Expr body =
      MakeTuple({MakeFnCall(neg_exp, {MakeTupleGetItem(parts, 0)}), MakeTupleGetItem(parts, 1)});
  Function f = MakeFunction({x}, body);
  Tensor in = test::MakeTensor<float>({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<Tensor> out = Interpret(f, {in});
  ASSERT_EQ(out.size(), 2u);
  Tensor want0 =
      test::MakeTensor<float>({2, 2}, {-1.0f, -std::exp(1.0f), -std::exp(4.0f), -std::exp(5.0f)});
  EXPECT_TRUE(TensorsNear(out[0], want0));
  EXPECT_TRUE(TensorsNear(out[1], test::MakeTensor<float>({2, 2}, {2, 3, 6, 7})));
}

TEST(Interpreter, BadInputsAreReportedBeforeAnyKernelRuns) {
  Var x = MakeVar("x", F32({kBatch, 4}));
  Var y = MakeVar("y", F32({kBatch, 4}));
  Function f = MakeFunction({x, y}, MakeCall("add", {x, y}));
  Tensor a = RandomTensor(DType::kFloat32, {3, 4});
  Tensor b = RandomTensor(DType::kFloat32, {4, 4});
  EXPECT_THAT(ErrorMessage([&] {
                Interpret(f, {a, b});
              }),
              HasSubstr("input 'y': expected f32[batch, 4], given f32[4, 4]"));
  EXPECT_THAT(ErrorMessage([&] { Interpret(f, {a}); }), HasSubstr("expected 2 inputs, got 1"));
  Tensor c = RandomTensor(DType::kInt32, {3, 4});
  EXPECT_THAT(ErrorMessage([&] { Interpret(f, {a, c}); }), HasSubstr("input 'y'"));
  // The next valid run still works.
  EXPECT_EQ(Interpret(f, {a, a})[0].shape(), (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace kiln
