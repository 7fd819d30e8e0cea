// Type relations and reference kernels of gather_elements, scatter_elements, gather_nd,
// scatter_nd, trilu, hardmax, cumsum, range, one_hot, topk, einsum, eye_like, constant_of_shape,
// reverse_sequence (concat, split, slice and gather: ops_select_test.cc).
#include <gmock/gmock.h>

#include <limits>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::I64;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RandomTensor;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// ---------------------------------------------------------------- gather_elements

TEST(GatherElements, Shapes) {
  EXPECT_EQ(Infer("gather_elements", {F32({3, 3}), I64({2, 3})}), "f32[2, 3]");
  EXPECT_EQ(Infer("gather_elements", {F32({3, 3}), I64({3, 7})}, {{"axis", int64_t{-1}}}),
            "f32[3, 7]");
  // Smaller than data off the axis is allowed when both dims are constant.
  EXPECT_EQ(Infer("gather_elements", {F32({4, 5}), TensorType({2, 1}, DType::kInt32)},
                  {{"axis", int64_t{1}}}),
            "f32[2, 1]");
}

TEST(GatherElements, SymbolicDimsOffTheAxisMustBeEqual) {
  Dim n = S("n"), m = S("m");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("gather_elements", {F32({n, 4}), I64({m, 4})}, {{"axis", int64_t{1}}}, &cs),
            "f32[m, 4]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_THAT(cs[0].ToString(), HasSubstr("dim 0 of indices [m, 4] and data [n, 4]"));
  cs.clear();
  EXPECT_EQ(Infer("gather_elements", {F32({n, 4}), I64({n, 9})}, {{"axis", int64_t{1}}}, &cs),
            "f32[n, 9]");
  EXPECT_TRUE(cs.empty());
}

TEST(GatherElements, Errors) {
  EXPECT_THAT(InferError("gather_elements", {F32({3, 3}), F32({3, 3})}),
              HasSubstr("indices must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("gather_elements", {F32({3, 3}), I64({3})}),
              HasSubstr("indices [3] must have the rank of data [3, 3]"));
  EXPECT_THAT(InferError("gather_elements", {F32({3, 3}), I64({2, 4})}),
              HasSubstr("dim 1 of indices [2, 4] is larger than that of data [3, 3]"));
  EXPECT_THAT(InferError("gather_elements", {F32({3, 3}), I64({2, 3})}, {{"axis", int64_t{2}}}),
              HasSubstr("axis 2 is out of range"));
  EXPECT_THAT(InferError("gather_elements", {F32({}), I64({})}),
              HasSubstr("cannot gather from a scalar"));
}

TEST(GatherElements, KernelHandValues) {
  // The examples of the ONNX operator documentation.
  Tensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("gather_elements", {a, MakeTensor<int64_t>({2, 2}, {0, 0, 1, 0})},
                                 {{"axis", int64_t{1}}})[0],
                  MakeTensor<float>({2, 2}, {1, 1, 4, 3})));
  Tensor b = MakeTensor<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(TensorsNear(
      RunOpReference("gather_elements", {b, MakeTensor<int32_t>({2, 3}, {1, 2, 0, 2, 0, 0})})[0],
      MakeTensor<float>({2, 3}, {4, 8, 3, 7, 2, 3})));
  // Negative indices wrap.
  EXPECT_TRUE(TensorsNear(
      RunOpReference("gather_elements", {b, MakeTensor<int64_t>({2, 3}, {-1, -2, 0, -2, 0, 0})})[0],
      MakeTensor<float>({2, 3}, {7, 5, 3, 4, 2, 3})));
  Tensor none = Tensor::Empty(DType::kInt64, {0, 3});
  EXPECT_EQ(RunOpReference("gather_elements", {b, none})[0].shape(), (V{0, 3}));
}

TEST(GatherElements, OutOfRangeIndexIsAnErrorNotARead) {
  Tensor data = MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  for (int64_t bad : V{2, -3, kMax, kMin}) {
    EXPECT_THAT(
        ErrorMessage([&] {
          RunOpReference("gather_elements", {data, MakeTensor<int64_t>({1, 2}, {0, bad})},
                         {{"axis", int64_t{1}}});
        }),
        HasSubstr(StrCat("index ", bad, " is out of range for axis 1 of size 2 in [3, 2]")));
  }
}

// ---------------------------------------------------------------- scatter_elements

Attrs Scatter(int64_t axis, const std::string& reduction = "none") {
  return {{"axis", axis}, {"reduction", reduction}};
}

TEST(ScatterElements, Shapes) {
  EXPECT_EQ(Infer("scatter_elements", {F32({3, 3}), I64({2, 3}), F32({2, 3})}), "f32[3, 3]");
  Dim n = S("n");
  EXPECT_EQ(Infer("scatter_elements", {F32({n, 5}), I64({n, 2}), F32({n, 2})}, Scatter(-1)),
            "f32[n, 5]");
}

TEST(ScatterElements, Errors) {
  EXPECT_THAT(InferError("scatter_elements", {F32({3, 3}), I64({2, 3}), F32({2, 2})}),
              HasSubstr("updates [2, 2] must have the shape of indices [2, 3]"));
  EXPECT_THAT(InferError("scatter_elements", {F32({3, 3}), I64({2, 3}), I64({2, 3})}),
              HasSubstr("updates have dtype i64 but data has f32"));
  EXPECT_THAT(InferError("scatter_elements", {F32({3, 3}), F32({2, 3}), F32({2, 3})}),
              HasSubstr("indices must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("scatter_elements", {F32({3, 3}), I64({2, 4}), F32({2, 4})}),
              HasSubstr("dim 1 of indices [2, 4] is larger than that of data [3, 3]"));
  Type b = TensorType({2}, DType::kBool);
  EXPECT_THAT(InferError("scatter_elements", {b, I64({2}), b}, Scatter(0, "add")),
              HasSubstr("data of a add reduction must be"));
  EXPECT_THAT(InferError("scatter_elements", {F32({2}), I64({2}), F32({2})}, Scatter(0, "max")),
              HasSubstr("must be none, add or mul, got 'max'"));
}

TEST(ScatterElements, KernelHandValues) {
  // The examples of the ONNX operator documentation.
  Tensor data = MakeTensor<float>({3, 3}, std::vector<float>(9, 0));
  Tensor idx = MakeTensor<int64_t>({2, 3}, {1, 0, 2, 0, 2, 1});
  Tensor upd = MakeTensor<float>({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("scatter_elements", {data, idx, upd})[0],
                  MakeTensor<float>({3, 3}, {2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f})));
  Tensor row = MakeTensor<float>({1, 5}, {1, 2, 3, 4, 5});
  Tensor u2 = MakeTensor<float>({1, 2}, {1.1f, 2.1f});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("scatter_elements",
                                 {row, MakeTensor<int64_t>({1, 2}, {1, -2}), u2}, Scatter(1))[0],
                  MakeTensor<float>({1, 5}, {1, 1.1f, 3, 2.1f, 5})));
  // Duplicates: none keeps the last, add and mul combine all.
  Tensor dup = MakeTensor<int64_t>({1, 2}, {1, 1});
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_elements", {row, dup, u2}, Scatter(1))[0],
                          MakeTensor<float>({1, 5}, {1, 2.1f, 3, 4, 5})));
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_elements", {row, dup, u2}, Scatter(1, "add"))[0],
                          MakeTensor<float>({1, 5}, {1, 5.2f, 3, 4, 5})));
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_elements", {row, dup, u2}, Scatter(1, "mul"))[0],
                          MakeTensor<float>({1, 5}, {1, 2 * 1.1f * 2.1f, 3, 4, 5})));
}

TEST(ScatterElements, OutOfRangeIndexIsAnErrorNotAWrite) {
  Tensor data = MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor upd = MakeTensor<float>({1, 2}, {0, 0});
  for (int64_t bad : V{3, -4, kMax, kMin}) {
    EXPECT_THAT(
        ErrorMessage([&] {
          RunOpReference("scatter_elements", {data, MakeTensor<int64_t>({1, 2}, {0, bad}), upd});
        }),
        HasSubstr(StrCat("index ", bad, " is out of range for axis 0 of size 3 in [3, 2]")));
  }
}

// ---------------------------------------------------------------- gather_nd, scatter_nd

TEST(GatherNd, Shapes) {
  EXPECT_EQ(Infer("gather_nd", {F32({2, 2}), I64({2, 2})}), "f32[2]");
  EXPECT_EQ(Infer("gather_nd", {F32({2, 2}), I64({2, 1})}), "f32[2, 2]");
  EXPECT_EQ(Infer("gather_nd", {F32({2, 2, 2}), I64({2, 1})}, {{"batch_dims", int64_t{1}}}),
            "f32[2, 2]");
  Dim n = S("n");
  EXPECT_EQ(Infer("gather_nd", {F32({n, 3, 5}), I64({n, 7, 1})}, {{"batch_dims", int64_t{1}}}),
            "f32[n, 7, 5]");
}

TEST(GatherNd, Errors) {
  EXPECT_THAT(InferError("gather_nd", {F32({2, 2}), I64({2, S("m")})}),
              HasSubstr("the last dim of indices [2, m] must be a constant"));
  EXPECT_THAT(InferError("gather_nd", {F32({2, 2}), I64({2, 3})}),
              HasSubstr("index tuples of length 3"));
  EXPECT_THAT(InferError("gather_nd", {F32({2, 2}), I64({2, 1})}, {{"batch_dims", int64_t{2}}}),
              HasSubstr("batch_dims 2 must be less than the ranks"));
  EXPECT_THAT(InferError("gather_nd", {F32({2, 2}), I64({3, 1})}, {{"batch_dims", int64_t{1}}}),
              HasSubstr("batch dim 0 of indices [3, 1] and data [2, 2]"));
  EXPECT_THAT(InferError("gather_nd", {F32({2, 2}), I64({})}), HasSubstr("got a scalar"));
}

TEST(GatherNd, KernelHandValues) {
  // The examples of the ONNX operator documentation.
  Tensor a = MakeTensor<int32_t>({2, 2}, {0, 1, 2, 3});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("gather_nd", {a, MakeTensor<int64_t>({2, 2}, {0, 0, 1, 1})})[0],
                  MakeTensor<int32_t>({2}, {0, 3})));
  EXPECT_TRUE(TensorsNear(RunOpReference("gather_nd", {a, MakeTensor<int64_t>({2, 1}, {1, 0})})[0],
                          MakeTensor<int32_t>({2, 2}, {2, 3, 0, 1})));
  Tensor b = MakeTensor<int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("gather_nd", {b, MakeTensor<int64_t>({2, 1, 2}, {0, 1, 1, 0})})[0],
                  MakeTensor<int32_t>({2, 1, 2}, {2, 3, 4, 5})));
  EXPECT_TRUE(TensorsNear(RunOpReference("gather_nd", {b, MakeTensor<int64_t>({2, 1}, {1, 0})},
                                         {{"batch_dims", int64_t{1}}})[0],
                          MakeTensor<int32_t>({2, 2}, {2, 3, 4, 5})));
  // Negative indices wrap.
  EXPECT_TRUE(
      TensorsNear(RunOpReference("gather_nd", {a, MakeTensor<int64_t>({1, 2}, {-1, -2})})[0],
                  MakeTensor<int32_t>({1}, {2})));
  EXPECT_THAT(ErrorMessage([&] {
                RunOpReference("gather_nd", {a, MakeTensor<int64_t>({1, 2}, {0, 2})});
              }),
              HasSubstr("index 2 is out of range for axis 1 of size 2 in [2, 2]"));
}

TEST(ScatterNd, Shapes) {
  EXPECT_EQ(Infer("scatter_nd", {F32({8}), I64({4, 1}), F32({4})}), "f32[8]");
  EXPECT_EQ(Infer("scatter_nd", {F32({4, 4, 4}), I64({2, 1}), F32({2, 4, 4})}), "f32[4, 4, 4]");
  EXPECT_THAT(InferError("scatter_nd", {F32({4, 4, 4}), I64({2, 1}), F32({2, 4})}),
              HasSubstr("updates [2, 4] must have shape [2, 4, 4] (indices[:-1] + data[m:])"));
  EXPECT_THAT(InferError("scatter_nd", {F32({4}), I64({2, 2}), F32({2})}),
              HasSubstr("index tuples of length 2"));
}

TEST(ScatterNd, KernelHandValues) {
  // The examples of the ONNX operator documentation.
  Tensor data = MakeTensor<float>({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = MakeTensor<int64_t>({4, 1}, {4, 3, 1, 7});
  Tensor upd = MakeTensor<float>({4}, {9, 10, 11, 12});
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_nd", {data, idx, upd})[0],
                          MakeTensor<float>({8}, {1, 11, 3, 10, 9, 6, 7, 12})));
  Tensor dup = MakeTensor<int64_t>({2, 1}, {0, -8});
  Tensor u2 = MakeTensor<float>({2}, {5, 6});
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_nd", {data, dup, u2})[0],
                          MakeTensor<float>({8}, {6, 2, 3, 4, 5, 6, 7, 8})));
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_nd", {data, dup, u2}, {{"reduction", "add"}})[0],
                          MakeTensor<float>({8}, {12, 2, 3, 4, 5, 6, 7, 8})));
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_nd", {data, dup, u2}, {{"reduction", "mul"}})[0],
                          MakeTensor<float>({8}, {30, 2, 3, 4, 5, 6, 7, 8})));
  Tensor d2 = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsNear(RunOpReference("scatter_nd", {d2, MakeTensor<int64_t>({1, 1}, {1}),
                                                        MakeTensor<float>({1, 2}, {7, 8})})[0],
                          MakeTensor<float>({2, 2}, {1, 2, 7, 8})));
  EXPECT_THAT(ErrorMessage([&] {
                RunOpReference("scatter_nd", {data, MakeTensor<int64_t>({1, 1}, {8}),
                                              MakeTensor<float>({1}, {0})});
              }),
              HasSubstr("index 8 is out of range for axis 0 of size 8 in [8]"));
}

// ---------------------------------------------------------------- trilu

TEST(Trilu, Shapes) {
  EXPECT_EQ(Infer("trilu", {F32({3, 4})}), "f32[3, 4]");
  EXPECT_EQ(Infer("trilu", {F32({S("b"), 3, S("n")})}, {{"upper", false}, {"k", int64_t{-2}}}),
            "f32[b, 3, n]");
  EXPECT_THAT(InferError("trilu", {F32({3})}), HasSubstr("input [3] must have rank 2 or more"));
  // k as an input: one integer element.
  EXPECT_EQ(Infer("trilu", {F32({3, 4}), I64({})}), "f32[3, 4]");
  EXPECT_EQ(Infer("trilu", {F32({3, 4}), TensorType({1}, DType::kInt32)}), "f32[3, 4]");
  EXPECT_THAT(InferError("trilu", {F32({3, 4}), I64({2})}),
              HasSubstr("k (input 1) must hold one element, got [2]"));
  EXPECT_THAT(InferError("trilu", {F32({3, 4}), F32({})}),
              HasSubstr("k (input 1) must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("trilu", {F32({3, 4}), I64({})}, {{"k", int64_t{1}}}),
              HasSubstr("give k either as the attribute or as input 1, not both"));
}

TEST(Trilu, KernelHandValues) {
  Tensor x = MakeTensor<float>({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  auto run = [&](bool upper, int64_t k) {
    return RunOpReference("trilu", {x}, {{"upper", upper}, {"k", k}})[0];
  };
  EXPECT_TRUE(
      TensorsNear(run(true, 0), MakeTensor<float>({3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12})));
  EXPECT_TRUE(
      TensorsNear(run(true, 1), MakeTensor<float>({3, 4}, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12})));
  EXPECT_TRUE(TensorsNear(run(false, 0),
                          MakeTensor<float>({3, 4}, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0})));
  EXPECT_TRUE(TensorsNear(run(false, -1),
                          MakeTensor<float>({3, 4}, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0})));
  // k far outside the matrix: everything or nothing is kept.
  EXPECT_TRUE(TensorsNear(run(true, -100), x));
  EXPECT_TRUE(TensorsNear(run(false, kMax), x));
  EXPECT_TRUE(TensorsNear(run(true, kMax), MakeTensor<float>({3, 4}, std::vector<float>(12, 0))));
  // k as an input means the same as the attribute.
  EXPECT_TRUE(
      TensorsNear(RunOpReference("trilu", {x, Tensor::Scalar<int64_t>(1)})[0], run(true, 1)));
  // Batched: every matrix is masked alike; bool zeroes to false.
  Tensor bools = Tensor::Empty(DType::kBool, {2, 2, 2});
  for (int i = 0; i < 8; ++i) bools.SetFromDouble(i, 1);
  EXPECT_TRUE(
      TensorsNear(RunOpReference("trilu", {bools})[0],
                  MakeTensor<bool>({2, 2, 2}, {true, true, false, true, true, true, false, true})));
}

// ---------------------------------------------------------------- hardmax

TEST(Hardmax, Shapes) {
  EXPECT_EQ(Infer("hardmax", {F32({S("b"), 3, 4})}), "f32[b, 3, 4]");
  EXPECT_EQ(Infer("hardmax", {F32({3, 4})}, {{"axis", int64_t{0}}}), "f32[3, 4]");
  EXPECT_THAT(InferError("hardmax", {I64({3})}), HasSubstr("input must be"));
  EXPECT_THAT(InferError("hardmax", {F32({})}), HasSubstr("got a scalar"));
  EXPECT_THAT(InferError("hardmax", {F32({3})}, {{"axis", int64_t{1}}}),
              HasSubstr("axis 1 is out of range"));
}

TEST(Hardmax, KernelHandValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Ties go to the first maximum; NaN is never the maximum; a row of NaNs is all 0.
  Tensor x = MakeTensor<float>({4, 3}, {3, 1, 3, -1, nan, -2, nan, nan, nan, 0, 5, 4});
  EXPECT_TRUE(TensorsNear(RunOpReference("hardmax", {x})[0],
                          MakeTensor<float>({4, 3}, {1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0})));
  EXPECT_TRUE(TensorsNear(RunOpReference("hardmax", {x}, {{"axis", int64_t{0}}})[0],
                          MakeTensor<float>({4, 3}, {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1})));
}

// ---------------------------------------------------------------- cumsum

TEST(Cumsum, Shapes) {
  EXPECT_EQ(Infer("cumsum", {F32({S("b"), 3})}, {{"axis", int64_t{-1}}}), "f32[b, 3]");
  EXPECT_EQ(Infer("cumsum", {I64({5})}, {{"axis", int64_t{0}}}), "i64[5]");
  EXPECT_THAT(InferError("cumsum", {TensorType({2}, DType::kBool)}, {{"axis", int64_t{0}}}),
              HasSubstr("input must be"));
  EXPECT_THAT(InferError("cumsum", {F32({})}, {{"axis", int64_t{0}}}), HasSubstr("got a scalar"));
  EXPECT_THAT(InferError("cumsum", {F32({3})}, {{"axis", int64_t{1}}}),
              HasSubstr("axis 1 is out of range"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("cumsum", {F32({3})}); }), HasSubstr("axis"));
}

TEST(Cumsum, KernelHandValues) {
  // The examples of the ONNX operator documentation.
  Tensor x = MakeTensor<float>({5}, {1, 2, 3, 4, 5});
  auto run = [&](const Tensor& t, int64_t axis, bool exclusive, bool reverse) {
    return RunOpReference("cumsum", {t},
                          {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}})[0];
  };
  EXPECT_TRUE(TensorsNear(run(x, 0, false, false), MakeTensor<float>({5}, {1, 3, 6, 10, 15})));
  EXPECT_TRUE(TensorsNear(run(x, 0, true, false), MakeTensor<float>({5}, {0, 1, 3, 6, 10})));
  EXPECT_TRUE(TensorsNear(run(x, 0, false, true), MakeTensor<float>({5}, {15, 14, 12, 9, 5})));
  EXPECT_TRUE(TensorsNear(run(x, 0, true, true), MakeTensor<float>({5}, {14, 12, 9, 5, 0})));
  Tensor m = MakeTensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(
      TensorsNear(run(m, 0, false, false), MakeTensor<int32_t>({2, 3}, {1, 2, 3, 5, 7, 9})));
  EXPECT_TRUE(
      TensorsNear(run(m, -1, false, false), MakeTensor<int32_t>({2, 3}, {1, 3, 6, 4, 9, 15})));
}

// ---------------------------------------------------------------- range

Attrs RangeAttrs(double start, double limit, double delta, DType dt = DType::kFloat32) {
  return {{"start", start}, {"limit", limit}, {"delta", delta}, {"dtype", dt}};
}

TEST(Range, Shapes) {
  EXPECT_EQ(Infer("range", {}, RangeAttrs(0, 5, 1)), "f32[5]");
  EXPECT_EQ(Infer("range", {}, RangeAttrs(1, 2, 0.3)), "f32[4]");
  EXPECT_EQ(Infer("range", {}, RangeAttrs(5, 0, -2, DType::kInt32)), "i32[3]");
  EXPECT_EQ(Infer("range", {}, RangeAttrs(0, -1, 1)), "f32[0]");
  EXPECT_EQ(Infer("range", {}, RangeAttrs(0, 1, 5, DType::kInt8)), "i8[1]");
  // Int attributes convert to floats.
  EXPECT_EQ(
      Infer("range", {}, {{"start", int64_t{0}}, {"limit", int64_t{3}}, {"delta", int64_t{1}}}),
      "f32[3]");
}

TEST(Range, Errors) {
  EXPECT_THAT(ErrorMessage([] { InferOpType("range", {}, RangeAttrs(0, 5, 0)); }),
              HasSubstr("attribute 'delta' = 0.0: must not be zero"));
  EXPECT_EQ(ErrorMessage([] { InferOpType("range", {}, RangeAttrs(0, 5, 1, DType::kBool)); }),
            "range: dtype must be a numeric (non-bool) dtype, got bool");
  EXPECT_THAT(ErrorMessage([] { InferOpType("range", {}, RangeAttrs(0.5, 5, 1, DType::kInt32)); }),
              HasSubstr("0.5 is not a whole number, as i32 needs"));
  EXPECT_THAT(
      ErrorMessage([] { InferOpType("range", {}, RangeAttrs(250, 260, 1, DType::kUInt8)); }),
      HasSubstr("259.0 does not fit in u8"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("range", {}, RangeAttrs(0, std::numeric_limits<double>::infinity(), 1));
              }),
              HasSubstr("has no representable length"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("range", {F32({1})}, RangeAttrs(0, 1, 1)); }),
              HasSubstr("expects 0 inputs, got 1"));
  EXPECT_THAT(
      ErrorMessage([] {
        InferOpType("range", {}, {{"start", std::string("0")}, {"limit", 1.0}, {"delta", 1.0}});
      }),
      HasSubstr("attribute 'start' must be float, got string"));
}

TEST(Range, Kernel) {
  EXPECT_TRUE(TensorsNear(RunOpReference("range", {}, RangeAttrs(1, 2, 0.3))[0],
                          MakeTensor<float>({4}, {1.0f, 1.3f, 1.6f, 1.9f})));
  EXPECT_TRUE(TensorsNear(RunOpReference("range", {}, RangeAttrs(5, 0, -2, DType::kInt64))[0],
                          MakeTensor<int64_t>({3}, {5, 3, 1})));
  EXPECT_TRUE(TensorsNear(RunOpReference("range", {}, RangeAttrs(10, 0, -3, DType::kUInt8))[0],
                          MakeTensor<uint8_t>({4}, {10, 7, 4, 1})));
  EXPECT_TRUE(TensorsNear(RunOpReference("range", {}, RangeAttrs(-1, 0, 1, DType::kFloat16))[0],
                          MakeTensor<Half>({1}, {Half(-1.0f)})));
  EXPECT_EQ(RunOpReference("range", {}, RangeAttrs(3, 3, 1))[0].numel(), 0);
}

// The scatters and cumsum are lowered with reductions over whole lines (gather form), so they
// must stay alone in their kernels.
TEST(SelectOps, PatternsOfTheNewOps) {
  for (const char* op : {"gather_elements", "gather_nd", "trilu"})
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern, OpPattern::kInjective) << op;
  for (const char* op : {"scatter_elements", "scatter_nd", "cumsum"})
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern, OpPattern::kOpaque) << op;
  EXPECT_EQ(OpRegistry::Global().Get("hardmax").pattern, OpPattern::kReduction);
}

TEST(SelectOps, UnknownAttributeIsNamed) {
  for (const char* op : {"concat", "split", "slice", "gather", "range"}) {
    Attrs attrs{{"bogus", int64_t{1}}};
    std::vector<Type> args = {F32({2})};
    if (std::string(op) == "gather") args.push_back(I64({1}));
    if (std::string(op) == "range") args.clear();
    EXPECT_THAT(ErrorMessage([&] { InferOpType(op, args, attrs); }),
                HasSubstr(StrCat("op '", op, "' has no attribute 'bogus'")));
  }
}

// ---------------------------------------------------------------- one_hot

Attrs OneHotAttrs(int64_t depth, int64_t axis = -1) {
  return {{"depth", depth}, {"axis", axis}};
}

TEST(OneHot, Shapes) {
  EXPECT_EQ(Infer("one_hot", {I64({3}), F32({2})}, OneHotAttrs(10)), "f32[3, 10]");
  EXPECT_EQ(Infer("one_hot", {I64({3}), F32({2})}, OneHotAttrs(10, 0)), "f32[10, 3]");
  EXPECT_EQ(Infer("one_hot", {F32({2, 2}), F32({2})}, OneHotAttrs(10, 1)), "f32[2, 10, 2]");
  EXPECT_EQ(Infer("one_hot", {F32({2, 2}), F32({2})}, OneHotAttrs(10, -2)), "f32[2, 10, 2]");
  EXPECT_EQ(Infer("one_hot", {I64({S("b")}), TensorType({2}, DType::kInt32)}, OneHotAttrs(5)),
            "i32[b, 5]");
  EXPECT_EQ(Infer("one_hot", {I64({}), F32({2})}, OneHotAttrs(4)), "f32[4]");
}

TEST(OneHot, Errors) {
  EXPECT_EQ(InferError("one_hot", {I64({3}), F32({3})}, OneHotAttrs(10)),
            "one_hot: values [3] must hold two elements, [off, on]: 3 != 2");
  EXPECT_THAT(InferError("one_hot", {I64({3}), F32({2, 1})}, OneHotAttrs(10)),
              HasSubstr("values [2, 1] must hold two elements"));
  EXPECT_THAT(InferError("one_hot", {TensorType({3}, DType::kBool), F32({2})}, OneHotAttrs(10)),
              HasSubstr("indices must be a numeric (non-bool) dtype, got bool"));
  EXPECT_THAT(InferError("one_hot", {I64({3}), F32({2})}, OneHotAttrs(10, 2)),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(InferError("one_hot", {I64({3}), F32({2})}, OneHotAttrs(0)),
              HasSubstr("attribute 'depth' = 0: must be positive"));
  EXPECT_THAT(InferError("one_hot", {I64({3}), F32({2})}),
              HasSubstr("required attribute 'depth' is missing"));
}

TEST(OneHot, KernelHandValues) {
  // ONNX's example: negative indices count from depth.
  Tensor values = MakeTensor<float>({2}, {1, 3});
  Tensor y = RunOpReference("one_hot", {MakeTensor<int64_t>({3}, {0, -7, -8}), values},
                            OneHotAttrs(10, 1))[0];
  std::vector<float> want(30, 1);
  want[0] = want[10 + 3] = want[20 + 2] = 3;
  EXPECT_TRUE(TensorsNear(y, MakeTensor<float>({3, 10}, want)));
  // Out of [-depth, depth): all off. Floats truncate toward zero; NaN reads as 0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor on_off = MakeTensor<int32_t>({2}, {0, 1});
  EXPECT_TRUE(
      TensorsNear(RunOpReference("one_hot", {MakeTensor<int64_t>({4}, {3, -4, 4, kMin}), on_off},
                                 OneHotAttrs(3))[0],
                  MakeTensor<int32_t>({4, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})));
  EXPECT_TRUE(TensorsNear(
      RunOpReference("one_hot", {MakeTensor<float>({4}, {1.7f, -0.5f, -2.9f, nan}), on_off},
                     OneHotAttrs(3))[0],
      MakeTensor<int32_t>({4, 3}, {0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0})));
  // The new axis first: out[d, i, j] = (indices[i, j] == d).
  Tensor idx = MakeTensor<int32_t>({2, 2}, {1, 0, 2, 1});
  EXPECT_TRUE(TensorsNear(
      RunOpReference("one_hot", {idx, MakeTensor<float>({2}, {-1, 5})}, OneHotAttrs(3, 0))[0],
      MakeTensor<float>({3, 2, 2}, {-1, 5, -1, -1, 5, -1, -1, 5, -1, -1, 5, -1})));
}

// ---------------------------------------------------------------- topk

Attrs TopKAttrs(int64_t k, int64_t axis = -1, bool largest = true) {
  return {{"k", k}, {"axis", axis}, {"largest", largest}};
}

TEST(TopK, Shapes) {
  EXPECT_EQ(Infer("topk", {F32({3, 4})}, TopKAttrs(3, 1)), "(f32[3, 3], i64[3, 3])");
  EXPECT_EQ(Infer("topk", {I64({5, 2})}, TopKAttrs(0, 0)), "(i64[0, 2], i64[0, 2])");
  EXPECT_EQ(Infer("topk", {F32({S("b"), S("n")})}, TopKAttrs(2)), "(f32[b, 2], i64[b, 2])");
}

TEST(TopK, Errors) {
  EXPECT_EQ(InferError("topk", {F32({3, 4})}, TopKAttrs(5)),
            "topk: k = 5 is larger than axis 1 of input [3, 4]");
  EXPECT_THAT(InferError("topk", {TensorType({3}, DType::kBool)}, TopKAttrs(1)),
              HasSubstr("input must be a numeric (non-bool) dtype"));
  EXPECT_THAT(InferError("topk", {F32({})}, TopKAttrs(0)), HasSubstr("got a scalar"));
  EXPECT_THAT(InferError("topk", {F32({3})}, TopKAttrs(1, 1)),
              HasSubstr("axis 1 is out of range for rank 1"));
  EXPECT_THAT(InferError("topk", {F32({3})}, TopKAttrs(-1)),
              HasSubstr("attribute 'k' = -1: must not be negative"));
}

TEST(TopK, KernelHandValues) {
  // ONNX's example.
  Tensor x = MakeTensor<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  std::vector<Tensor> r = RunOpReference("topk", {x}, TopKAttrs(3, 1));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<float>({3, 3}, {3, 2, 1, 7, 6, 5, 11, 10, 9})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({3, 3}, {3, 2, 1, 3, 2, 1, 3, 2, 1})));
  r = RunOpReference("topk", {x}, TopKAttrs(2, 0, false));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<float>({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({2, 4}, {0, 0, 0, 0, 1, 1, 1, 1})));
  // Ties go to the lower index.
  Tensor t = MakeTensor<int32_t>({5}, {3, 1, 3, 2, 3});
  r = RunOpReference("topk", {t}, TopKAttrs(3));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<int32_t>({3}, {3, 3, 3})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({3}, {0, 2, 4})));
  r = RunOpReference("topk", {t}, TopKAttrs(4, 0, false));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<int32_t>({4}, {1, 2, 3, 3})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({4}, {1, 3, 0, 2})));
  // NaN is larger than every number.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = MakeTensor<float>({4}, {1, nan, 3, nan});
  r = RunOpReference("topk", {n}, TopKAttrs(3));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<float>({3}, {nan, nan, 3})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({3}, {1, 3, 2})));
  r = RunOpReference("topk", {n}, TopKAttrs(3, 0, false));
  EXPECT_TRUE(TensorsNear(r[0], MakeTensor<float>({3}, {1, 3, nan})));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({3}, {0, 2, 1})));
  // i64 values beyond 2^53 compare exactly.
  Tensor big = MakeTensor<int64_t>({2}, {(int64_t{1} << 60) + 1, (int64_t{1} << 60) + 2});
  r = RunOpReference("topk", {big}, TopKAttrs(1));
  EXPECT_TRUE(TensorsNear(r[1], MakeTensor<int64_t>({1}, {1})));
}

// ---------------------------------------------------------------- einsum

std::string InferEinsum(const std::string& eq, const std::vector<Type>& args) {
  return Infer("einsum", args, {{"equation", eq}});
}

std::string EinsumError(const std::string& eq, const std::vector<Type>& args) {
  return InferError("einsum", args, {{"equation", eq}});
}

Tensor RunEinsum(const std::string& eq, const std::vector<Tensor>& in) {
  return RunOpReference("einsum", in, {{"equation", eq}})[0];
}

TEST(Einsum, Shapes) {
  EXPECT_EQ(InferEinsum("ij,jk->ik", {F32({2, 3}), F32({3, 4})}), "f32[2, 4]");
  EXPECT_EQ(InferEinsum("ij,jk", {F32({2, 3}), F32({3, 4})}), "f32[2, 4]");
  EXPECT_EQ(InferEinsum("bij, bjk -> bik", {F32({5, 2, 3}), F32({5, 3, 4})}), "f32[5, 2, 4]");
  EXPECT_EQ(InferEinsum("ij->ji", {F32({3, 4})}), "f32[4, 3]");
  EXPECT_EQ(InferEinsum("ba", {F32({3, 4})}), "f32[4, 3]");  // implicit: alphabetical
  EXPECT_EQ(InferEinsum("ij->", {F32({3, 4})}), "f32[]");
  EXPECT_EQ(InferEinsum("ij->i", {F32({3, 4})}), "f32[3]");
  EXPECT_EQ(InferEinsum("ii->i", {F32({3, 3})}), "f32[3]");
  EXPECT_EQ(InferEinsum("ii", {F32({3, 3})}), "f32[]");
  EXPECT_EQ(InferEinsum("i,j->ij", {F32({3}), F32({4})}), "f32[3, 4]");
  EXPECT_EQ(InferEinsum("i,i", {F32({5}), F32({5})}), "f32[]");
  EXPECT_EQ(InferEinsum(",i->i", {F32({}), F32({5})}), "f32[5]");
  EXPECT_EQ(InferEinsum("...ij,...jk->...ik", {F32({5, 2, 3}), F32({3, 4})}), "f32[5, 2, 4]");
  EXPECT_EQ(InferEinsum("...ij,...jk", {F32({5, 1, 2, 3}), F32({7, 3, 4})}), "f32[5, 7, 2, 4]");
  EXPECT_EQ(InferEinsum("...ii ->...i", {F32({3, 5, 5})}), "f32[3, 5]");
  EXPECT_EQ(InferEinsum("i...->...", {F32({3, 5, 6})}), "f32[5, 6]");
  EXPECT_EQ(
      InferEinsum("ij,jk", {TensorType({2, 3}, DType::kInt32), TensorType({3, 4}, DType::kInt32)}),
      "i32[2, 4]");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("einsum", {F32({S("m"), S("n")}), F32({S("k"), S("p")})},
                  {{"equation", std::string("ij,jk")}}, &cs),
            "f32[m, p]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_THAT(cs[0].ToString(), HasSubstr("letter 'j' has different sizes"));
}

TEST(Einsum, Errors) {
  EXPECT_EQ(EinsumError("ij,jk->ik", {F32({2, 3}), F32({4, 5})}),
            "einsum: equation \"ij,jk->ik\": letter 'j' has different sizes in input 0 [2, 3] "
            "and input 1 [4, 5]: 3 != 4");
  EXPECT_THAT(EinsumError("ii", {F32({2, 3})}),
              HasSubstr("letter 'i' has different sizes in input 0 [2, 3] and input 0 [2, 3]"));
  EXPECT_THAT(EinsumError("ij,jk", {F32({2, 3})}),
              HasSubstr("equation \"ij,jk\": has 2 operand terms but the op has 1 input"));
  EXPECT_THAT(EinsumError("ijk", {F32({2, 3})}),
              HasSubstr("operand 0 \"ijk\" has 3 subscripts but input 0 has rank 2"));
  EXPECT_THAT(EinsumError("...ijk", {F32({2, 3})}),
              HasSubstr("operand 0 \"...ijk\" has 3 subscripts but input 0 has rank 2"));
  EXPECT_THAT(EinsumError("ij->i2", {F32({2, 3})}),
              HasSubstr("the output \"i2\" has '2', which is neither a letter nor part of '...'"));
  EXPECT_THAT(EinsumError("i.j", {F32({2, 3})}), HasSubstr("has '.', which is neither"));
  EXPECT_THAT(EinsumError("...i...", {F32({2, 3})}), HasSubstr("has two ellipses"));
  EXPECT_THAT(EinsumError("ij->k", {F32({2, 3})}), HasSubstr("output letter 'k' is in no operand"));
  EXPECT_THAT(EinsumError("ij->ii", {F32({2, 3})}),
              HasSubstr("letter 'i' appears twice in the output"));
  EXPECT_THAT(EinsumError("...ij->ij", {F32({4, 2, 3})}),
              HasSubstr("the operands' ellipses stand for 1 dims, so the output needs '...' too"));
  EXPECT_THAT(EinsumError("...i,...i", {F32({2, 3}), F32({4, 3})}),
              HasSubstr("the dims under '...' do not broadcast: 2 vs 4"));
  EXPECT_THAT(EinsumError("i,i", {F32({2}), I64({2})}),
              HasSubstr("input 1 has dtype i64 but input 0 has f32"));
  EXPECT_THAT(EinsumError("i", {TensorType({2}, DType::kBool)}),
              HasSubstr("input must be a numeric (non-bool) dtype"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("einsum", {F32({2})}); }),
              HasSubstr("required attribute 'equation' is missing"));
}

TEST(Einsum, KernelHandValues) {
  Tensor a = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor<float>({3, 2}, {1, -1, 2, 0, 0, 3});
  EXPECT_TRUE(
      TensorsNear(RunEinsum("ij,jk->ik", {a, b}), MakeTensor<float>({2, 2}, {5, 8, 14, 14})));
  EXPECT_TRUE(TensorsNear(RunEinsum("ij,jk", {a, b}), MakeTensor<float>({2, 2}, {5, 8, 14, 14})));
  // Transposed operand, output transposed: (a b)^T = b^T a^T.
  EXPECT_TRUE(
      TensorsNear(RunEinsum("ij,jk->ki", {a, b}), MakeTensor<float>({2, 2}, {5, 14, 8, 14})));
  EXPECT_TRUE(TensorsNear(RunEinsum("ij->ji", {a}), MakeTensor<float>({3, 2}, {1, 4, 2, 5, 3, 6})));
  EXPECT_TRUE(TensorsNear(RunEinsum("ij->", {a}), Tensor::Scalar<float>(21)));
  EXPECT_TRUE(TensorsNear(RunEinsum("ij->j", {a}), MakeTensor<float>({3}, {5, 7, 9})));
  Tensor sq = MakeTensor<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(TensorsNear(RunEinsum("ii->i", {sq}), MakeTensor<float>({3}, {1, 5, 9})));
  EXPECT_TRUE(TensorsNear(RunEinsum("ii", {sq}), Tensor::Scalar<float>(15)));
  Tensor u = MakeTensor<float>({2}, {1, 2}), v = MakeTensor<float>({3}, {3, 4, 5});
  EXPECT_TRUE(
      TensorsNear(RunEinsum("i,j->ij", {u, v}), MakeTensor<float>({2, 3}, {3, 4, 5, 6, 8, 10})));
  EXPECT_TRUE(TensorsNear(RunEinsum("i,i", {v, v}), Tensor::Scalar<float>(50)));
  // ONNX's inner product example in f64: the sum of the products.
  Tensor x = MakeTensor<double>({2}, {1.5, -2.25}), y = MakeTensor<double>({2}, {4, 2});
  EXPECT_TRUE(TensorsNear(RunEinsum("i,i", {x, y}), Tensor::Scalar<double>(1.5)));
  // Batch diagonal with an ellipsis; broadcast under the ellipsis.
  Tensor bd = MakeTensor<int32_t>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_TRUE(
      TensorsNear(RunEinsum("...ii->...i", {bd}), MakeTensor<int32_t>({2, 2}, {1, 4, 5, 8})));
  Tensor scale = MakeTensor<int32_t>({1, 2}, {10, -1});
  EXPECT_TRUE(TensorsNear(RunEinsum("...j,...j->...", {bd, scale}),
                          MakeTensor<int32_t>({2, 2}, {8, 26, 44, 62})));
  // A scalar operand; integer sums wrap as i64 arithmetic truncated to the dtype.
  EXPECT_TRUE(TensorsNear(RunEinsum(",i->i", {Tensor::Scalar<float>(2), v}),
                          MakeTensor<float>({3}, {6, 8, 10})));
  Tensor i8 = MakeTensor<int8_t>({2}, {100, 100});
  EXPECT_TRUE(TensorsNear(RunEinsum("i,i", {i8, MakeTensor<int8_t>({2}, {1, 1})}),
                          Tensor::Scalar<int8_t>(static_cast<int8_t>(200 - 256))));
  // Empty reduction: zeros.
  EXPECT_TRUE(TensorsNear(RunEinsum("ij,jk", {Tensor::Empty(DType::kFloat32, {2, 0}),
                                              Tensor::Empty(DType::kFloat32, {0, 3})}),
                          MakeTensor<float>({2, 3}, std::vector<float>(6, 0))));
}

TEST(Einsum, BatchMatmulMatchesMatmul) {
  Tensor a = RandomTensor(DType::kFloat32, {4, 3, 5}, 21);
  Tensor b = RandomTensor(DType::kFloat32, {4, 5, 2}, 22);
  EXPECT_TRUE(TensorsNear(RunEinsum("bij,bjk->bik", {a, b}), RunOpReference("matmul", {a, b})[0]));
  EXPECT_TRUE(
      TensorsNear(RunEinsum("...ij,...jk->...ik", {a, b}), RunOpReference("matmul", {a, b})[0]));
}

// ---------------------------------------------------------------- eye_like

TEST(EyeLike, Shapes) {
  EXPECT_EQ(Infer("eye_like", {TensorType({3, 4}, DType::kInt32)}, {{"dtype", DType::kFloat64}}),
            "f64[3, 4]");
  EXPECT_EQ(
      Infer("eye_like", {F32({S("n"), S("n")})}, {{"dtype", DType::kFloat32}, {"k", int64_t{-1}}}),
      "f32[n, n]");
  EXPECT_THAT(InferError("eye_like", {F32({3})}, {{"dtype", DType::kFloat32}}),
              HasSubstr("input [3] must be 2-D"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("eye_like", {F32({3, 3})});
              }),
              HasSubstr("required attribute 'dtype' is missing"));
}

TEST(EyeLike, KernelHandValues) {
  Tensor x = RandomTensor(DType::kFloat32, {3, 4}, 3);
  auto run = [&](int64_t k, DType dt) {
    return RunOpReference("eye_like", {x}, {{"k", k}, {"dtype", dt}})[0];
  };
  EXPECT_TRUE(TensorsNear(run(0, DType::kFloat32),
                          MakeTensor<float>({3, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0})));
  EXPECT_TRUE(TensorsNear(run(1, DType::kInt32),
                          MakeTensor<int32_t>({3, 4}, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1})));
  EXPECT_TRUE(TensorsNear(run(-2, DType::kBool),
                          MakeTensor<bool>({3, 4}, {false, false, false, false, false, false, false,
                                                    false, true, false, false, false})));
  EXPECT_TRUE(
      TensorsNear(run(4, DType::kFloat32), MakeTensor<float>({3, 4}, std::vector<float>(12, 0))));
}

// ---------------------------------------------------------------- constant_of_shape

Attrs ConstantAttrs(V shape, double value = 0, DType dt = DType::kFloat32) {
  return {{"shape", shape}, {"value", value}, {"dtype", dt}};
}

TEST(ConstantOfShape, Shapes) {
  EXPECT_EQ(Infer("constant_of_shape", {}, ConstantAttrs({4, 3, 2}, 1)), "f32[4, 3, 2]");
  EXPECT_EQ(Infer("constant_of_shape", {}, ConstantAttrs({}, 1)), "f32[]");
  EXPECT_EQ(Infer("constant_of_shape", {}, ConstantAttrs({0}, 0, DType::kInt32)), "i32[0]");
  EXPECT_EQ(Infer("constant_of_shape", {}, {{"shape", V{2}}}), "f32[2]");
  EXPECT_EQ(InferError("constant_of_shape", {}, ConstantAttrs({2}, 1.5, DType::kInt32)),
            "constant_of_shape: value 1.5 is not representable in i32");
  EXPECT_THAT(InferError("constant_of_shape", {}, ConstantAttrs({2}, 256, DType::kUInt8)),
              HasSubstr("value 256.0 is not representable in u8"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("constant_of_shape", {}, ConstantAttrs({2, -1}));
              }),
              HasSubstr("attribute 'shape' = [2, -1]: must not be negative, got -1"));
  EXPECT_THAT(
      InferError("constant_of_shape", {}, ConstantAttrs({int64_t{1} << 40, int64_t{1} << 40})),
      HasSubstr("has too many elements"));
  EXPECT_THAT(
      ErrorMessage([] { InferOpType("constant_of_shape", {F32({2})}, ConstantAttrs({2})); }),
      HasSubstr("expects 0 inputs, got 1"));
}

TEST(ConstantOfShape, KernelHandValues) {
  EXPECT_TRUE(TensorsNear(RunOpReference("constant_of_shape", {}, ConstantAttrs({2, 2}, 1.5))[0],
                          MakeTensor<float>({2, 2}, {1.5, 1.5, 1.5, 1.5})));
  EXPECT_TRUE(
      TensorsNear(RunOpReference("constant_of_shape", {}, ConstantAttrs({3}, -7, DType::kInt64))[0],
                  MakeTensor<int64_t>({3}, {-7, -7, -7})));
  EXPECT_TRUE(
      TensorsNear(RunOpReference("constant_of_shape", {}, ConstantAttrs({}, 1, DType::kBool))[0],
                  Tensor::Scalar<bool>(true)));
  EXPECT_EQ(RunOpReference("constant_of_shape", {}, ConstantAttrs({4, 0}))[0].numel(), 0);
}

// ---------------------------------------------------------------- reverse_sequence

Attrs ReverseAttrs(int64_t batch_axis, int64_t time_axis) {
  return {{"batch_axis", batch_axis}, {"time_axis", time_axis}};
}

TEST(ReverseSequence, Shapes) {
  EXPECT_EQ(Infer("reverse_sequence", {F32({4, 3}), I64({3})}), "f32[4, 3]");
  EXPECT_EQ(
      Infer("reverse_sequence", {F32({S("b"), S("t"), 2}), I64({S("b")})}, ReverseAttrs(0, 1)),
      "f32[b, t, 2]");
  EXPECT_EQ(InferError("reverse_sequence", {F32({4, 3}), I64({4})}),
            "reverse_sequence: sequence_lens [4] must hold one length per batch entry (axis 1 of "
            "input [4, 3]): 4 != 3");
  EXPECT_THAT(InferError("reverse_sequence", {F32({4, 3}), F32({3})}),
              HasSubstr("sequence_lens must be i32 or i64, got f32"));
  EXPECT_THAT(InferError("reverse_sequence", {F32({4}), I64({4})}),
              HasSubstr("input [4] must have rank 2 or more"));
  EXPECT_THAT(InferError("reverse_sequence", {F32({4, 4}), I64({4})}, ReverseAttrs(1, 1)),
              HasSubstr("batch_axis and time_axis are both axis 1"));
  EXPECT_THAT(InferError("reverse_sequence", {F32({4, 4}), I64({4})}, ReverseAttrs(2, 0)),
              HasSubstr("batch_axis 2 is out of range"));
}

TEST(ReverseSequence, KernelHandValues) {
  Tensor x = MakeTensor<float>({4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  // ONNX's examples: time along axis 0, then along axis 1.
  EXPECT_TRUE(TensorsNear(
      RunOpReference("reverse_sequence", {x, MakeTensor<int64_t>({4}, {4, 3, 2, 1})})[0],
      MakeTensor<float>({4, 4}, {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15})));
  EXPECT_TRUE(TensorsNear(
      RunOpReference("reverse_sequence", {x, MakeTensor<int32_t>({4}, {1, 2, 3, 4})},
                     ReverseAttrs(0, 1))[0],
      MakeTensor<float>({4, 4}, {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12})));
  // Lengths clamp into [0, steps]: 0 and -1 reverse nothing, 9 reverses all 4.
  EXPECT_TRUE(TensorsNear(
      RunOpReference("reverse_sequence", {x, MakeTensor<int64_t>({4}, {0, 9, -1, 2})},
                     ReverseAttrs(0, 1))[0],
      MakeTensor<float>({4, 4}, {0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 13, 12, 14, 15})));
}

TEST(SelectOps, PatternsOfTheCreationOps) {
  for (const char* op : {"one_hot", "eye_like", "constant_of_shape", "reverse_sequence"})
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern, OpPattern::kInjective) << op;
  EXPECT_EQ(OpRegistry::Global().Get("topk").pattern, OpPattern::kOpaque);
  EXPECT_EQ(OpRegistry::Global().Get("einsum").pattern, OpPattern::kOutputFusable);
}

}  // namespace
}  // namespace kiln
