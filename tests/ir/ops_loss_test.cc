// nll_loss: type relations, errors, and the reference kernel against hand-computed values
// (weights, ignore_index, out-of-range targets, every reduction, extra spatial dims).
#include <gmock/gmock.h>

#include <cmath>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Floats;
using test::I64;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RunOne;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;

Attrs Reduction(const char* r) {
  return {{"reduction", std::string(r)}};
}

Attrs Reduction(const char* r, int64_t ignore_index) {
  return {{"reduction", std::string(r)}, {"ignore_index", ignore_index}};
}

// ---- type relations ----

TEST(NllLoss, Types) {
  EXPECT_EQ(Infer("nll_loss", {F32({3, 5}), I64({3})}), "f32[]");
  EXPECT_EQ(Infer("nll_loss", {F32({3, 5}), I64({3})}, Reduction("none")), "f32[3]");
  EXPECT_EQ(Infer("nll_loss", {F32({3, 5}), I64({3})}, Reduction("sum")), "f32[]");
  EXPECT_EQ(Infer("nll_loss", {F32({3, 5, 2, 4}), TensorType({3, 2, 4}, DType::kInt32), F32({5})},
                  Reduction("none")),
            "f32[3, 2, 4]");
  EXPECT_EQ(Infer("nll_loss", {TensorType({2, 3}, DType::kFloat64), I64({2})}), "f64[]");
  EXPECT_EQ(OpRegistry::Global().Get("nll_loss").pattern, OpPattern::kOpaque);
}

TEST(NllLoss, SymbolicShapes) {
  EXPECT_EQ(Infer("nll_loss", {F32({S("n"), 5, S("h")}), I64({S("n"), S("h")})}, Reduction("none")),
            "f32[n, h]");
  std::vector<DimConstraint> constraints;
  EXPECT_EQ(Infer("nll_loss", {F32({S("n"), S("c")}), I64({S("m")}), F32({S("k")})},
                  Reduction("mean"), &constraints),
            "f32[]");
  ASSERT_EQ(constraints.size(), 3u);  // 1 <= c, m == n, k == c
  EXPECT_EQ(constraints[0].kind, DimConstraint::Kind::kAtMost);
  EXPECT_EQ(constraints[0].b.ToString(), "c");
}

TEST(NllLoss, Errors) {
  EXPECT_THAT(InferError("nll_loss", {TensorType({3, 5}, DType::kFloat16), I64({3})}),
              HasSubstr("nll_loss: input must be f32 or f64, got f16[3, 5]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3}), I64({3})}),
              HasSubstr("input must have rank >= 2 ([N, C, d...]), got [3]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 0}), I64({3})}),
              HasSubstr("input [3, 0] has no classes (dim 1 is 0)"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), F32({3})}),
              HasSubstr("target must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5, 2}), I64({3})}),
              HasSubstr("target [3] must have rank 2 to match input [3, 5, 2]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), I64({4})}),
              HasSubstr("target [4] and input [3, 5] differ in N"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5, 2}), I64({3, 3})}),
              HasSubstr("dim 1 of target [3, 3] differs from dim 2 of input [3, 5, 2]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), I64({3}), F32({4})}),
              HasSubstr("weight [4] must have C = dim 1 of input [3, 5]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), I64({3}), F32({5, 1})}),
              HasSubstr("weight must have rank 1 ([C]), got [5, 1]"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), I64({3}), TensorType({5}, DType::kFloat64)}),
              HasSubstr("weight has dtype f64 but input has f32"));
  EXPECT_THAT(InferError("nll_loss", {F32({3, 5}), I64({3})}, Reduction("avg")),
              HasSubstr("must be \"none\", \"sum\" or \"mean\", got \"avg\""));
}

// ---- reference kernel ----

// input [N=3, C=4]
Tensor Input() {
  return Floats({3, 4}, {-1.0f, -2.0f, -3.0f, -4.0f,  //
                         -0.5f, -1.5f, -2.5f, -3.5f,  //
                         -0.1f, -0.2f, -0.3f, -0.4f});
}

TEST(NllLoss, ReferenceWithoutWeights) {
  Tensor target = MakeTensor<int64_t>({3}, {1, 3, 0});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target}, Reduction("none")),
                          Floats({3}, {2.0f, 3.5f, 0.1f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("nll_loss", {Input(), target}, Reduction("sum")), Floats({}, {5.6f})));
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target}), Floats({}, {5.6f / 3})));
}

TEST(NllLoss, ReferenceWithWeights) {
  Tensor target = MakeTensor<int32_t>({3}, {1, 3, 0});
  Tensor w = Floats({4}, {0.5f, 2.0f, 10.0f, 0.25f});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}, Reduction("none")),
                          Floats({3}, {4.0f, 0.875f, 0.05f})));
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}, Reduction("sum")),
                          Floats({}, {4.925f})));
  // mean divides by the weights of the targets: 2 + 0.25 + 0.5.
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}), Floats({}, {4.925f / 2.75f})));
}

TEST(NllLoss, ReferenceIgnoreIndex) {
  Tensor target = MakeTensor<int64_t>({3}, {1, 3, 1});
  Tensor w = Floats({4}, {0.5f, 2.0f, 10.0f, 0.25f});
  // Targets equal to 1 count nothing, neither loss nor weight.
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}, Reduction("none", 1)),
                          Floats({3}, {0.0f, 0.875f, 0.0f})));
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}, Reduction("mean", 1)),
                          Floats({}, {0.875f / 0.25f})));
  EXPECT_TRUE(
      TensorsNear(RunOne("nll_loss", {Input(), target}, Reduction("mean", 1)), Floats({}, {3.5f})));
  // A negative ignore_index, as ONNX's tests use.
  Tensor neg = MakeTensor<int64_t>({3}, {-1, 2, -1});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), neg, w}, Reduction("sum", -1)),
                          Floats({}, {25.0f})));
  // Every target ignored: the mean is 0 / 0.
  Tensor all = MakeTensor<int64_t>({3}, {1, 1, 1});
  EXPECT_TRUE(std::isnan(RunOne("nll_loss", {Input(), all}, Reduction("mean", 1)).GetAsDouble(0)));
}

TEST(NllLoss, ReferenceOutOfRangeTargetsCountNothing) {
  Tensor target = MakeTensor<int64_t>({3}, {4, -1, 2});
  Tensor w = Floats({4}, {0.5f, 2.0f, 10.0f, 0.25f});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}, Reduction("none")),
                          Floats({3}, {0.0f, 0.0f, 3.0f})));
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {Input(), target, w}), Floats({}, {0.3f})));
}

TEST(NllLoss, ReferenceSpatialDims) {
  // input [N=1, C=2, d=3]: element (0, c, d) is (c + 1) * (d + 1) / 10.
  Tensor x = Floats({1, 2, 3}, {0.1f, 0.2f, 0.3f, 0.2f, 0.4f, 0.6f});
  Tensor target = MakeTensor<int64_t>({1, 3}, {1, 0, 1});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {x, target}, Reduction("none")),
                          Floats({1, 3}, {-0.2f, -0.2f, -0.6f})));
  Tensor w = Floats({2}, {3.0f, 1.0f});
  EXPECT_TRUE(TensorsNear(RunOne("nll_loss", {x, target, w}, Reduction("mean")),
                          Floats({}, {(-0.2f - 0.6f - 0.6f) / 5.0f})));
}

TEST(NllLoss, ReferenceF64) {
  Tensor x = MakeTensor<double>({2, 2}, {-0.25, -1.5, -2.0, -0.125});
  Tensor target = MakeTensor<int64_t>({2}, {1, 1});
  Tensor y = RunOne("nll_loss", {x, target}, Reduction("sum"));
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  EXPECT_EQ(y.GetAsDouble(0), 1.625);
}

}  // namespace
}  // namespace kiln
