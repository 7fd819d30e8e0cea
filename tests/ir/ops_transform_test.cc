// Type relations and reference kernels of reshape, transpose, squeeze, unsqueeze, expand,
// flatten, tile, depth_to_space, space_to_depth.
#include <gmock/gmock.h>

#include <numeric>

#include "common/test_util.h"
#include "ir/op.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using test::F32;
using test::Infer;
using test::InferError;
using test::MakeTensor;
using test::RandomTensor;
using test::S;
using test::TensorsNear;
using ::testing::HasSubstr;
using V = std::vector<int64_t>;

// 0, 1, 2, ... as f32.
Tensor Iota(const V& shape) {
  Tensor t = Tensor::Empty(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, static_cast<double>(i));
  return t;
}

// ---------------------------------------------------------------- reshape

TEST(Reshape, ConcreteShapes) {
  EXPECT_EQ(Infer("reshape", {F32({2, 3, 4})}, {{"shape", V{4, -1}}}), "f32[4, 6]");
  EXPECT_EQ(Infer("reshape", {F32({2, 3, 4})}, {{"shape", V{0, -1}}}), "f32[2, 12]");
  EXPECT_EQ(Infer("reshape", {F32({2, 3, 4})}, {{"shape", V{-1}}}), "f32[24]");
  EXPECT_EQ(Infer("reshape", {F32({2, 3, 4})}, {{"shape", V{2, 0, 4}}}), "f32[2, 3, 4]");
  EXPECT_EQ(Infer("reshape", {F32({1})}, {{"shape", V{}}}), "f32[]");
  EXPECT_EQ(Infer("reshape", {F32({})}, {{"shape", V{1, 1, -1}}}), "f32[1, 1, 1]");
  EXPECT_EQ(Infer("reshape", {F32({0, 5})}, {{"shape", V{5, -1}}}), "f32[5, 0]");
  EXPECT_EQ(Infer("reshape", {TensorType({6}, DType::kBool)}, {{"shape", V{3, 2}}}), "bool[3, 2]");
}

TEST(Reshape, AllowZeroMakesZeroLiteral) {
  EXPECT_EQ(Infer("reshape", {F32({0, 3})}, {{"shape", V{3, 0}}, {"allowzero", true}}),
            "f32[3, 0]");
  EXPECT_THAT(InferError("reshape", {F32({2, 3})}, {{"shape", V{0, 3}}, {"allowzero", true}}),
              HasSubstr("cannot reshape [2, 3] to [0, 3]: 6 elements vs 0"));
  EXPECT_THAT(InferError("reshape", {F32({0, 3})}, {{"shape", V{0, -1}}, {"allowzero", true}}),
              HasSubstr("a 0 and a -1 cannot both appear"));
}

TEST(Reshape, SymbolicShapes) {
  Dim batch = S("batch"), seq = S("seq");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("reshape", {F32({batch, 8, 64})}, {{"shape", V{0, -1}}}, &cs), "f32[batch, 512]");
  EXPECT_EQ(Infer("reshape", {F32({batch * seq, 768})}, {{"shape", V{-1, 12, 64}}}, &cs),
            "f32[batch * seq, 12, 64]");
  EXPECT_EQ(Infer("reshape", {F32({batch, seq, 768})}, {{"shape", V{0, 0, 12, 64}}}, &cs),
            "f32[batch, seq, 12, 64]");
  EXPECT_EQ(Infer("reshape", {F32({batch, seq, 12, 64})}, {{"shape", V{0, 0, -1}}}, &cs),
            "f32[batch, seq, 768]");
  EXPECT_EQ(Infer("reshape", {F32({batch, seq, 12, 64})}, {{"shape", V{-1, 64}}}, &cs),
            "f32[batch * seq * 12, 64]");
  EXPECT_EQ(Infer("reshape", {F32({batch, 4})}, {{"shape", V{0, 2, 2}}}, &cs), "f32[batch, 2, 2]");
  EXPECT_TRUE(cs.empty());
  Dim a = S("a"), b = S("b");
  EXPECT_EQ(Infer("reshape", {F32({a * b, 4})}, {{"shape", V{-1}}}, &cs), "f32[a * b * 4]");
  EXPECT_EQ(Infer("reshape", {F32({a, b * 6})}, {{"shape", V{0, 3, -1}}}, &cs), "f32[a, 3, b * 2]");
}

TEST(Reshape, SymbolicDivisibilityIsAConstraint) {
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("reshape", {F32({S("seq"), 3})}, {{"shape", V{-1, 2}}}, &cs),
            "f32[(seq * 3) // 2, 2]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_THAT(cs[0].ToString(), HasSubstr("element count"));
  // Without a -1, unequal symbolic counts are asserted, not rejected.
  cs.clear();
  EXPECT_EQ(Infer("reshape", {F32({S("n"), 4})}, {{"shape", V{8, 2}}}, &cs), "f32[8, 2]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].a.ToString(), "n * 4");
}

TEST(Reshape, Mismatches) {
  EXPECT_EQ(InferError("reshape", {F32({2, 3})}, {{"shape", V{4, -1}}}),
            "reshape: cannot reshape [2, 3] to [4, -1]: 6 elements are not a multiple of 4");
  EXPECT_EQ(InferError("reshape", {F32({2, 3})}, {{"shape", V{4, 2}}}),
            "reshape: cannot reshape [2, 3] to [4, 2]: 6 elements vs 8");
  EXPECT_THAT(InferError("reshape", {F32({2, 3})}, {{"shape", V{-1, -1}}}),
              HasSubstr("cannot reshape [2, 3] to [-1, -1]: more than one -1"));
  EXPECT_THAT(InferError("reshape", {F32({2, 3})}, {{"shape", V{6, 1, 0}}}),
              HasSubstr("the 0 at position 2 copies an input dim, but the input has rank 2"));
  EXPECT_THAT(InferError("reshape", {F32({2, 3})}, {{"shape", V{-2, 3}}}),
              HasSubstr("dim -2 is negative"));
  // Equal only for batch == 0, so it is left to the check at binding time.
  std::vector<DimConstraint> cs;
  Infer("reshape", {F32({S("batch"), 3})}, {{"shape", V{0, 4}}}, &cs);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].ToString(),
            "reshape, cannot reshape [batch, 3] to [0, 4], element count: batch * 3 == batch * 4");
}

TEST(Reshape, BadAttributes) {
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("reshape", {F32({2})}, {{"shap", V{2}}});
              }),
              HasSubstr("no attribute 'shap'"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("reshape", {F32({2})}, {{"shape", 1.5}});
              }),
              HasSubstr("attribute 'shape' must be ints, got float"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("reshape", {F32({2})}, {}); }),
              HasSubstr("required attribute 'shape' is missing"));
}

TEST(Reshape, KernelKeepsRowMajorOrder) {
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool}) {
    Tensor x = RandomTensor(dt, {2, 3, 5}, 7);
    Tensor y = RunOpReference("reshape", {x}, {{"shape", V{5, -1}}})[0];
    EXPECT_TRUE(TensorsNear(y, x.Reshaped({5, 6}), 0, 0)) << DTypeName(dt);
  }
  Tensor one = MakeTensor<int32_t>({1}, {42});
  EXPECT_TRUE(TensorsNear(RunOpReference("reshape", {one}, {{"shape", V{}}})[0],
                          Tensor::Scalar<int32_t>(42)));
  Tensor empty = Tensor::Empty(DType::kFloat32, {0, 3});
  EXPECT_EQ(RunOpReference("reshape", {empty}, {{"shape", V{3, -1}}})[0].shape(), (V{3, 0}));
}

// ---------------------------------------------------------------- transpose

TEST(Transpose, Shapes) {
  EXPECT_EQ(Infer("transpose", {F32({2, 3, 4})}), "f32[4, 3, 2]");
  EXPECT_EQ(Infer("transpose", {F32({2, 3, 4})}, {{"perm", V{1, 0, 2}}}), "f32[3, 2, 4]");
  EXPECT_EQ(Infer("transpose", {F32({2, 3, 4})}, {{"perm", V{-1, 0, 1}}}), "f32[4, 2, 3]");
  EXPECT_EQ(Infer("transpose", {F32({})}), "f32[]");
  EXPECT_EQ(Infer("transpose", {F32({S("batch"), S("seq"), 64})}, {{"perm", V{0, 2, 1}}}),
            "f32[batch, 64, seq]");
}

TEST(Transpose, BadPerm) {
  EXPECT_THAT(InferError("transpose", {F32({2, 3, 4})}, {{"perm", V{0, 0, 1}}}),
              HasSubstr("perm [0, 0, 1]: repeated axis"));
  EXPECT_EQ(InferError("transpose", {F32({2, 3, 4})}, {{"perm", V{1, 0}}}),
            "transpose: perm [1, 0] has 2 entries but [2, 3, 4] has rank 3");
  EXPECT_THAT(InferError("transpose", {F32({2, 3, 4})}, {{"perm", V{0, 3, 1}}}),
              HasSubstr("axis 3 is out of range for rank 3"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("transpose", {F32({2})}, {{"perm", 1.0}});
              }),
              HasSubstr("attribute 'perm' must be ints"));
}

TEST(Transpose, KernelHandValues) {
  Tensor x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(TensorsNear(RunOpReference("transpose", {x})[0],
                          MakeTensor<float>({3, 2}, {1, 4, 2, 5, 3, 6})));
  Tensor s = Tensor::Scalar<int8_t>(-3);
  EXPECT_TRUE(TensorsNear(RunOpReference("transpose", {s})[0], s));
  Tensor one = MakeTensor<int64_t>({1, 1, 1}, {9});
  EXPECT_TRUE(TensorsNear(RunOpReference("transpose", {one}, {{"perm", V{2, 0, 1}}})[0], one));
}

TEST(Transpose, RandomAgainstIndexArithmetic) {
  const V shape = {3, 1, 5, 2};
  const V perm = {2, 0, 3, 1};
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt16, DType::kUInt8}) {
    Tensor x = RandomTensor(dt, shape, 11, -50, 50);
    Tensor y = RunOpReference("transpose", {x}, {{"perm", perm}})[0];
    ASSERT_EQ(y.shape(), (V{5, 3, 2, 1}));
    // y[a][b][c][d] = x[b][d][a][c]
    for (int64_t a = 0; a < 5; ++a)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t d = 0; d < 1; ++d) {
            int64_t yi = ((a * 3 + b) * 2 + c) * 1 + d;
            int64_t xi = ((b * 1 + d) * 5 + a) * 2 + c;
            ASSERT_EQ(y.GetAsDouble(yi), x.GetAsDouble(xi)) << DTypeName(dt);
          }
  }
}

// ---------------------------------------------------------------- squeeze / unsqueeze

TEST(Squeeze, Shapes) {
  EXPECT_EQ(Infer("squeeze", {F32({1, 3, 1, 2})}), "f32[3, 2]");
  EXPECT_EQ(Infer("squeeze", {F32({1, 3, 1, 2})}, {{"axes", V{0}}}), "f32[3, 1, 2]");
  EXPECT_EQ(Infer("squeeze", {F32({1, 3, 1, 2})}, {{"axes", V{-2}}}), "f32[1, 3, 2]");
  EXPECT_EQ(Infer("squeeze", {F32({1, 1})}), "f32[]");
  EXPECT_EQ(Infer("squeeze", {F32({})}), "f32[]");
}

TEST(Squeeze, SymbolicDimsAreKeptUnlessNamed) {
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("squeeze", {F32({S("batch"), 1, S("seq")})}, {}, &cs), "f32[batch, seq]");
  EXPECT_TRUE(cs.empty());
  EXPECT_EQ(Infer("squeeze", {F32({S("batch"), 1, S("seq")})}, {{"axes", V{0, 1}}}, &cs),
            "f32[seq]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].a, S("batch"));
  EXPECT_EQ(cs[0].b, Dim(1));
  EXPECT_THAT(cs[0].ToString(), HasSubstr("squeezed axis 0 of [batch, 1, seq]"));
}

TEST(Squeeze, NonOneAxisIsAnError) {
  EXPECT_EQ(InferError("squeeze", {F32({2, 3})}, {{"axes", V{1}}}),
            "squeeze: cannot squeeze axis 1 of [2, 3]: its size is 3, not 1");
  EXPECT_THAT(InferError("squeeze", {F32({1, 3})}, {{"axes", V{2}}}),
              HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(InferError("squeeze", {F32({1, 1})}, {{"axes", V{0, -2}}}),
              HasSubstr("repeated axis"));
}

TEST(Squeeze, Kernel) {
  Tensor x = MakeTensor<float>({1, 3, 1}, {1, 2, 3});
  EXPECT_TRUE(TensorsNear(RunOpReference("squeeze", {x})[0], MakeTensor<float>({3}, {1, 2, 3})));
  EXPECT_TRUE(TensorsNear(RunOpReference("squeeze", {x}, {{"axes", V{-1}}})[0],
                          MakeTensor<float>({1, 3}, {1, 2, 3})));
}

TEST(Unsqueeze, Shapes) {
  EXPECT_EQ(Infer("unsqueeze", {F32({3, 4})}, {{"axes", V{0}}}), "f32[1, 3, 4]");
  EXPECT_EQ(Infer("unsqueeze", {F32({3, 4})}, {{"axes", V{-1}}}), "f32[3, 4, 1]");
  EXPECT_EQ(Infer("unsqueeze", {F32({3, 4})}, {{"axes", V{0, 3}}}), "f32[1, 3, 4, 1]");
  EXPECT_EQ(Infer("unsqueeze", {F32({3, 4})}, {{"axes", V{-1, 1}}}), "f32[3, 1, 4, 1]");
  EXPECT_EQ(Infer("unsqueeze", {F32({})}, {{"axes", V{0}}}), "f32[1]");
  EXPECT_EQ(Infer("unsqueeze", {F32({S("batch")})}, {{"axes", V{0, 2}}}), "f32[1, batch, 1]");
}

TEST(Unsqueeze, Errors) {
  EXPECT_THAT(InferError("unsqueeze", {F32({3, 4})}, {{"axes", V{3}}}),
              HasSubstr("axis 3 is out of range for rank 3"));
  EXPECT_THAT(InferError("unsqueeze", {F32({3, 4})}, {{"axes", V{0, -4}}}),
              HasSubstr("repeated axis in [0, -4]"));
  EXPECT_THAT(ErrorMessage([] { InferOpType("unsqueeze", {F32({3})}); }),
              HasSubstr("required attribute 'axes' is missing"));
}

TEST(Unsqueeze, Kernel) {
  Tensor x = MakeTensor<int32_t>({3}, {7, 8, 9});
  Tensor y = RunOpReference("unsqueeze", {x}, {{"axes", V{0, -1}}})[0];
  EXPECT_TRUE(TensorsNear(y, MakeTensor<int32_t>({1, 3, 1}, {7, 8, 9})));
}

// ---------------------------------------------------------------- expand

TEST(Expand, Shapes) {
  EXPECT_EQ(Infer("expand", {F32({3, 1})}, {{"shape", V{2, 1, 4}}}), "f32[2, 3, 4]");
  // Bidirectional: a 1 in `shape` keeps the input dim, a shorter shape is fine.
  EXPECT_EQ(Infer("expand", {F32({3})}, {{"shape", V{1}}}), "f32[3]");
  EXPECT_EQ(Infer("expand", {F32({2, 3})}, {{"shape", V{}}}), "f32[2, 3]");
  EXPECT_EQ(Infer("expand", {F32({S("batch"), 1})}, {{"shape", V{1, 5}}}), "f32[batch, 5]");
  std::vector<DimConstraint> cs;
  EXPECT_EQ(Infer("expand", {F32({S("n")})}, {{"shape", V{4}}}, &cs), "f32[4]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(cs[0].kind, DimConstraint::Kind::kBroadcast);
  EXPECT_EQ(OpRegistry::Global().Get("expand").pattern, OpPattern::kBroadcast);
}

TEST(Expand, Errors) {
  EXPECT_THAT(InferError("expand", {F32({2, 3})}, {{"shape", V{4}}}),
              HasSubstr("cannot broadcast [2, 3] and [4]"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("expand", {F32({2})}, {{"shape", V{-1}}});
              }),
              HasSubstr("attribute 'shape' = [-1]: dims must not be negative"));
}

TEST(Expand, Kernel) {
  Tensor x = MakeTensor<float>({3, 1}, {1, 2, 3});
  Tensor y = RunOpReference("expand", {x}, {{"shape", V{2, 1, 2}}})[0];
  EXPECT_TRUE(TensorsNear(y, MakeTensor<float>({2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3})));
  Tensor r = RandomTensor(DType::kInt64, {1, 5, 1}, 3, -9, 9);
  Tensor z = RunOpReference("expand", {r}, {{"shape", V{3, 1, 5, 7}}})[0];
  ASSERT_EQ(z.shape(), (V{3, 1, 5, 7}));
  for (int64_t i = 0; i < z.numel(); ++i) {
    int64_t j = (i / 7) % 5;  // the only axis r varies along
    ASSERT_EQ(z.GetAsDouble(i), r.GetAsDouble(j)) << i;
  }
}

// ---------------------------------------------------------------- flatten

TEST(Flatten, Shapes) {
  EXPECT_EQ(Infer("flatten", {F32({2, 3, 4})}), "f32[2, 12]");
  EXPECT_EQ(Infer("flatten", {F32({2, 3, 4})}, {{"axis", int64_t{0}}}), "f32[1, 24]");
  EXPECT_EQ(Infer("flatten", {F32({2, 3, 4})}, {{"axis", int64_t{3}}}), "f32[24, 1]");
  EXPECT_EQ(Infer("flatten", {F32({2, 3, 4})}, {{"axis", int64_t{-1}}}), "f32[6, 4]");
  EXPECT_EQ(Infer("flatten", {F32({})}, {{"axis", int64_t{0}}}), "f32[1, 1]");
  EXPECT_EQ(Infer("flatten", {F32({S("batch"), S("seq"), 64})}, {{"axis", int64_t{2}}}),
            "f32[batch * seq, 64]");
  EXPECT_EQ(Infer("flatten", {F32({S("batch"), 3, 4})}), "f32[batch, 12]");
}

TEST(Flatten, Errors) {
  EXPECT_EQ(InferError("flatten", {F32({2, 3, 4})}, {{"axis", int64_t{4}}}),
            "flatten: axis 4 is out of range for [2, 3, 4] (flatten allows -rank..rank)");
  EXPECT_THAT(InferError("flatten", {F32({2, 3})}, {{"axis", int64_t{-3}}}),
              HasSubstr("axis -3 is out of range for [2, 3]"));
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("flatten", {F32({2})}, {{"axis", V{1}}});
              }),
              HasSubstr("attribute 'axis' must be int, got ints"));
}

TEST(Flatten, Kernel) {
  Tensor x = Iota({2, 3, 5});
  Tensor y = RunOpReference("flatten", {x}, {{"axis", int64_t{2}}})[0];
  EXPECT_TRUE(TensorsNear(y, x.Reshaped({6, 5})));
}

// ---------------------------------------------------------------- tile

TEST(Tile, Shapes) {
  EXPECT_EQ(Infer("tile", {F32({2, 3})}, {{"repeats", V{3, 1}}}), "f32[6, 3]");
  EXPECT_EQ(Infer("tile", {F32({S("n"), 3})}, {{"repeats", V{2, 0}}}), "f32[n * 2, 0]");
  EXPECT_THAT(InferError("tile", {F32({2, 3})}, {{"repeats", V{2}}}),
              HasSubstr("repeats [2] has 1 entries but [2, 3] has rank 2"));
  EXPECT_THAT(InferError("tile", {F32({2})}, {{"repeats", V{-1}}}),
              HasSubstr("must not be negative"));
}

TEST(Tile, Kernel) {
  Tensor x = Iota({2, 3});
  EXPECT_TRUE(TensorsNear(RunOpReference("tile", {x}, {{"repeats", V{2, 2}}})[0],
                          test::Floats({4, 6}, {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,  //
                                                0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5})));
  EXPECT_EQ(RunOpReference("tile", {x}, {{"repeats", V{0, 3}}})[0].shape(), (V{0, 9}));
}

// ---------------------------------------------------------------- depth_to_space

TEST(DepthToSpace, Shapes) {
  EXPECT_EQ(Infer("depth_to_space", {F32({1, 8, 2, 3})}, {{"blocksize", int64_t{2}}}),
            "f32[1, 2, 4, 6]");
  EXPECT_EQ(Infer("space_to_depth", {F32({1, 2, 4, 6})}, {{"blocksize", int64_t{2}}}),
            "f32[1, 8, 2, 3]");
  EXPECT_THAT(InferError("depth_to_space", {F32({1, 6, 2, 3})}, {{"blocksize", int64_t{2}}}),
              HasSubstr("channels of [1, 6, 2, 3] (6) is not a multiple of 4"));
  EXPECT_THAT(InferError("space_to_depth", {F32({1, 2, 4, 5})}, {{"blocksize", int64_t{2}}}),
              HasSubstr("width of [1, 2, 4, 5] (5) is not a multiple of 2"));
  EXPECT_THAT(InferError("depth_to_space", {F32({8, 2, 3})}, {{"blocksize", int64_t{2}}}),
              HasSubstr("must be 4-D (NCHW)"));
  EXPECT_THAT(InferError("depth_to_space", {F32({1, 8, 2, 3})},
                         {{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}}),
              HasSubstr("mode must be DCR or CRD, got 'XYZ'"));
  EXPECT_THAT(InferError("space_to_depth", {F32({1, 2, 4, 6})}, {{"blocksize", int64_t{0}}}),
              HasSubstr("must be at least 1"));
}

TEST(DepthToSpace, SymbolicDivisibilityIsAConstraint) {
  std::vector<DimConstraint> cs;
  EXPECT_EQ(
      Infer("space_to_depth", {F32({S("n"), 3, S("h"), 4})}, {{"blocksize", int64_t{2}}}, &cs),
      "f32[n, 12, h // 2, 2]");
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_THAT(cs[0].ToString(), HasSubstr("height of [n, 3, h, 4], a multiple of 2"));
}

TEST(DepthToSpace, KernelHandValues) {
  // The examples of the ONNX operator documentation: x = arange(48).reshape(1, 8, 2, 3).
  Tensor x = Iota({1, 8, 2, 3});
  Tensor dcr = RunOpReference("depth_to_space", {x}, {{"blocksize", int64_t{2}}})[0];
  EXPECT_TRUE(TensorsNear(
      dcr, test::Floats({1, 2, 4, 6},
                        {0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                         5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                         31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47})));
  Tensor crd = RunOpReference("depth_to_space", {x},
                              {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}})[0];
  EXPECT_TRUE(TensorsNear(
      crd, test::Floats({1, 2, 4, 6},
                        {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                         5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                         37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47})));
  // space_to_depth undoes DCR.
  EXPECT_TRUE(
      TensorsNear(RunOpReference("space_to_depth", {dcr}, {{"blocksize", int64_t{2}}})[0], x));
}

TEST(TransformOps, NewOpsAreInjective) {
  for (const char* op : {"tile", "depth_to_space", "space_to_depth"})
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern, OpPattern::kInjective) << op;
  EXPECT_THAT(ErrorMessage([] {
                InferOpType("tile", {F32({2})}, {{"repeats", V{2}}, {"bogus", int64_t{1}}});
              }),
              HasSubstr("op 'tile' has no attribute 'bogus'"));
}

TEST(TransformOps, UnknownAttributeIsNamedAndPatternsAreSet) {
  for (const char* op : {"reshape", "transpose", "squeeze", "unsqueeze", "expand", "flatten"}) {
    EXPECT_THAT(ErrorMessage([&] {
                  InferOpType(op, {F32({2})}, {{"bogus", int64_t{1}}});
                }),
                HasSubstr(StrCat("op '", op, "' has no attribute 'bogus'")));
    EXPECT_EQ(OpRegistry::Global().Get(op).pattern,
              std::string(op) == "expand" ? OpPattern::kBroadcast : OpPattern::kInjective);
  }
}

}  // namespace
}  // namespace kiln
