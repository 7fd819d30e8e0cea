// PackConstantWeights: golden tests of the packed layout (tile.j = 4, so the constants stay
// small), the gemms it must leave alone, and the reference interpreter computing the same
// values before and after.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

// Runs PackConstantWeights with a known 256-bit target and TileLoops' keys as given.
IRModule Pack(const std::string& input, int64_t vector_bits = 256,
              const std::map<std::string, int64_t>& config = {{"tile.j", 4}}) {
  IRModule m = InferTypes(ParseModule(input));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  ctx->SetConfig("target.vector_bits", vector_bits);
  for (const auto& [key, value] : config) ctx->SetConfig(key, value);
  PassContextScope scope(ctx);
  return (*ParsePipeline("PackConstantWeights"))(m);
}

// const(<dtype>[rows, cols], [1, 2, ...]).
std::string Const(int64_t rows, int64_t cols, const char* dtype = "f32") {
  std::string s = std::string("const(") + dtype + "[" + std::to_string(rows) + ", " +
                  std::to_string(cols) + "], [";
  for (int64_t i = 0; i < rows * cols; ++i) s += (i ? ", " : "") + std::to_string(i + 1);
  return s + "])";
}

std::string Printed(const std::string& text) {
  return Print(InferTypes(ParseModule(text)));
}

TEST(PackConstantWeights, GemmWeightsBecomePanels) {
  // B [2, 5] in panels of 4: panel 0 holds columns 0-3 of both rows, panel 1 column 4 and
  // zeros.
  IRModule out = Pack(R"(def @main(%x: f32[25, 2], %c: f32[5]) {
    gemm(%x, const(f32[2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), %c, alpha=0.5)
  })");
  EXPECT_EQ(Print(out), Printed(R"(def @main(%x: f32[25, 2], %c: f32[5]) {
    gemm(%x, const(f32[2, 2, 4], [1, 2, 3, 4, 6, 7, 8, 9, 5, 0, 0, 0, 10, 0, 0, 0]), %c,
         alpha=0.5, b_panel=4, n=5)
  })"));
  // The same values, through the reference interpreter.
  IRModule before = InferTypes(ParseModule(R"(def @main(%x: f32[25, 2], %c: f32[5]) {
    gemm(%x, const(f32[2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), %c, alpha=0.5)
  })"));
  std::vector<Tensor> inputs = {test::RandomTensor(DType::kFloat32, {25, 2}, 1),
                                test::RandomTensor(DType::kFloat32, {5}, 2)};
  EXPECT_TRUE(test::TensorsNear(Interpret(out.Lookup("main"), inputs)[0],
                                Interpret(before.Lookup("main"), inputs)[0], 0, 0));
}

// The packed B of one weight node is made once and shared by every graph packed from it (one
// per specialized shape), not copied again for each.
TEST(PackConstantWeights, SpecializationsShareOnePackedCopy) {
  IRModule model =
      InferTypes(ParseModule("def @main(%x: f32[25, 2]) { gemm(%x, " + Const(2, 5) + ") }"));
  auto packed_data = [](const IRModule& m) -> const void* {
    for (const Expr& e : PostOrder(m.Lookup("main")->body))
      if (const CallNode* c = AsCall(e); c && c->op && c->op->name == "gemm")
        if (const ConstantNode* b = AsConstant(c->args[1]); b && b->value.ndim() == 3)
          return b->value.raw_data();
    return nullptr;
  };
  auto run = [&] {
    auto ctx = std::make_shared<PassContext>();
    ctx->SetConfig("target.vector_bits", int64_t{256});
    ctx->SetConfig("tile.j", int64_t{4});
    PassContextScope scope(ctx);
    return (*ParsePipeline("PackConstantWeights"))(model);
  };
  IRModule first = run(), second = run();
  ASSERT_NE(packed_data(first), nullptr);
  EXPECT_EQ(packed_data(first), packed_data(second));
  // An executable keeps only the packed tensor (not the graph): while it lives, a later
  // specialization reuses it too, where it had packed a fresh copy once the graphs were gone.
  Tensor kept;
  for (const Expr& e : PostOrder(first.Lookup("main")->body))
    if (const ConstantNode* b = AsConstant(e); b && b->value.ndim() == 3) kept = b->value;
  ASSERT_TRUE(kept.defined());
  first = IRModule();
  second = IRModule();
  IRModule third = run();
  EXPECT_EQ(packed_data(third), kept.raw_data());
  std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {25, 2}, 5)};
  EXPECT_TRUE(test::TensorsNear(Interpret(third.Lookup("main"), x)[0],
                                Interpret(model.Lookup("main"), x)[0], 0, 0));
}

// Symbolic rows (a shape-generic executable's batch) are packed in the panels for few rows,
// so the generic kernel reads B in place for any batch rather than copying every panel on
// every run: 48 columns on AVX-512 with the keys unset (TileLoops' 8-row blocks), tile.j's
// where it is set; the same values as before.
TEST(PackConstantWeights, SymbolicRowsTakeFewRowPanels) {
  const std::string gemm = "def @main(%x: f32[m, 3]) { gemm(%x, " + Const(3, 512) + ") }";
  EXPECT_NE(Print(Pack(gemm, 512, {})).find("b_panel=48"), std::string::npos);
  const std::string matmul = "def @main(%x: f32[b, s, 3]) { matmul(%x, " + Const(3, 512) + ") }";
  EXPECT_NE(Print(Pack(matmul, 512, {})).find("b_panel=48"), std::string::npos);
  const std::string small = "def @main(%x: f32[m, 2]) { gemm(%x, " + Const(2, 5) + ") }";
  IRModule out = Pack(small);
  EXPECT_EQ(Print(out), Printed(R"(def @main(%x: f32[m, 2]) {
    gemm(%x, const(f32[2, 2, 4], [1, 2, 3, 4, 6, 7, 8, 9, 5, 0, 0, 0, 10, 0, 0, 0]), b_panel=4,
         n=5)
  })"));
  for (int64_t rows : {1, 7}) {
    std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {rows, 2}, 6)};
    EXPECT_TRUE(test::TensorsNear(Interpret(out.Lookup("main"), x)[0],
                                  Interpret(InferTypes(ParseModule(small)).Lookup("main"), x)[0], 0,
                                  0));
  }
}

// AVX-512's 64 columns when the keys are unset (where neither 48 nor 32 fits: 112 columns), for
// many rows and few (TileLoops reads the panels in place either way); a B narrower than that
// stays.
TEST(PackConstantWeights, TileShapeFollowsTheTarget) {
  auto with = [&](const char* rows, int64_t cols) {
    return std::string("def @main(%x: f32[") + rows + ", 3]) { gemm(%x, " + Const(3, cols) + ") }";
  };
  for (const char* rows : {"17", "16", "2"})
    EXPECT_NE(Print(Pack(with(rows, 112), 512, {})).find("b_panel=64"), std::string::npos) << rows;
  EXPECT_EQ(Print(Pack(with("16", 63), 512, {})), Printed(with("16", 63)));
}

// On AVX-512 with the keys unset, a B read by more than one row is packed in panels of 48
// columns (TileLoops runs them 8 rows at a time) where its columns are a multiple of 48 or
// leave a tail of at least 32 (two vectors); a tail of one vector takes 32-column panels
// (12 rows) where 32 divides the columns, else keeps 64-column ones, unless at most 64 rows
// read a B of 16 panels or more. A single row takes the same panels as a few; a set tile.j
// keeps its tile.
TEST(PackConstantWeights, NarrowPanelsWhereTheColumnsFit) {
  auto with = [&](const char* rows, int64_t cols) {
    return std::string("def @main(%x: f32[") + rows + ", 3]) { gemm(%x, " + Const(3, cols) + ") }";
  };
  auto panel = [&](const char* rows, int64_t cols, const std::map<std::string, int64_t>& config) {
    std::string text = Print(Pack(with(rows, cols), 512, config));
    size_t at = text.find("b_panel=");
    return at == std::string::npos ? std::string("none") : text.substr(at, text.find(',', at) - at);
  };
  EXPECT_EQ(panel("32", 96, {}), "b_panel=48");
  EXPECT_EQ(panel("32", 512, {}), "b_panel=48");  // 10 x 48 + 32
  EXPECT_EQ(panel("2", 48, {}), "b_panel=48");
  EXPECT_EQ(panel("32", 256, {}), "b_panel=32");   // 5 x 48 + 16; 8 x 32
  EXPECT_EQ(panel("32", 1024, {}), "b_panel=48");  // 21 x 48 + 16, few rows
  EXPECT_EQ(panel("64", 768, {}), "b_panel=48");
  EXPECT_EQ(panel("65", 1024, {}), "b_panel=32");
  EXPECT_EQ(panel("65", 1040, {}), "b_panel=48");  // 21 x 48 + 32
  EXPECT_EQ(panel("65", 1072, {}), "b_panel=64");  // 22 x 48 + 16, 33 x 32 + 16
  EXPECT_EQ(panel("32", 740, {}), "b_panel=64");   // 15 x 48 + 20: under 16 panels
  EXPECT_EQ(panel("32", 47, {}), "none");
  EXPECT_EQ(panel("1", 512, {}), "b_panel=48");
  EXPECT_EQ(panel("32", 96, {{"tile.j", 32}}), "b_panel=32");
  EXPECT_EQ(panel("32", 96, {{"tile.i", 6}}), "b_panel=64");
  // The same values, through the reference interpreter.
  IRModule before = InferTypes(ParseModule(with("5", 80)));
  std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {5, 3}, 4)};
  EXPECT_TRUE(test::TensorsNear(Interpret(Pack(with("5", 80), 512, {}).Lookup("main"), x)[0],
                                Interpret(before.Lookup("main"), x)[0], 0, 0));
}

// A single row (a matrix-vector product) is packed in the same panels as a few rows, not in
// TileLoops' wider single-row tile (256 columns on AVX-512): one packed copy of a weight then
// serves every row count up to 64 and the shape-generic tier, and the threads still split the
// panels, each streaming its own. With tile.j set, its tile.
TEST(PackConstantWeights, SingleRowsShareTheFewRowsPanels) {
  auto with = [&](const char* rows, int64_t cols) {
    return std::string("def @main(%x: f32[") + rows + ", 3]) { gemm(%x, " + Const(3, cols) + ") }";
  };
  auto panel = [&](const std::string& text, int64_t bits,
                   const std::map<std::string, int64_t>& config) {
    std::string printed = Print(Pack(text, bits, config));
    size_t at = printed.find("b_panel=");
    return at == std::string::npos ? std::string("none")
                                   : printed.substr(at, printed.find(',', at) - at);
  };
  for (int64_t cols : {300, 512, 1024, 200, 96})
    for (int64_t bits : {256, 512})
      EXPECT_EQ(panel(with("1", cols), bits, {}), panel(with("8", cols), bits, {}))
          << cols << " columns, " << bits << " bits";
  EXPECT_EQ(panel(with("1", 300), 512, {}), "b_panel=64");  // 6 x 48 + 12: 64-column panels
  EXPECT_EQ(panel(with("1", 512), 256, {}), "b_panel=16");  // AVX2: tile.j's 16 columns
  EXPECT_EQ(panel(with("1", 5), 256, {{"tile.j", 4}}), "b_panel=4");
  EXPECT_EQ(panel(with("1", 47), 512, {}), "none");  // narrower than a panel
  // The same values, through the reference interpreter.
  IRModule before = InferTypes(ParseModule(with("1", 300)));
  std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {1, 3}, 3)};
  EXPECT_TRUE(test::TensorsNear(Interpret(Pack(with("1", 300), 512, {}).Lookup("main"), x)[0],
                                Interpret(before.Lookup("main"), x)[0], 0, 0));
}

// A matmul's constant 2-D B is packed whatever A's rank and however few its rows (all but A's
// last dim): with B packed TileLoops reads every tile's panel in place, nothing copied.
TEST(PackConstantWeights, MatmulWeightsBecomePanels) {
  const std::string text = "def @main(%x: f32[1, 3, 2]) { matmul(%x, " + Const(2, 5) + ") }";
  IRModule out = Pack(text);
  EXPECT_EQ(Print(out), Printed(R"(def @main(%x: f32[1, 3, 2]) {
    matmul(%x, const(f32[2, 2, 4], [1, 2, 3, 4, 6, 7, 8, 9, 5, 0, 0, 0, 10, 0, 0, 0]), b_panel=4,
           n=5)
  })"));
  std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {1, 3, 2}, 4)};
  EXPECT_TRUE(test::TensorsNear(Interpret(out.Lookup("main"), x)[0],
                                Interpret(InferTypes(ParseModule(text)).Lookup("main"), x)[0], 0,
                                0));
  // One row: the few-rows panels (64 columns for 300 on AVX-512).
  auto one_row = "def @main(%x: f32[1, 3]) { matmul(%x, " + Const(3, 300) + ") }";
  EXPECT_NE(Print(Pack(one_row, 512, {})).find("b_panel=64"), std::string::npos);
  for (const std::string& alone : {
           // a 1-D A, a batched B, B narrower than a panel by a power of two (it fills a
           // narrower vector as it is) or not f32
           "def @main(%x: f32[2]) { matmul(%x, " + Const(2, 5) + ") }",
           std::string("def @main(%x: f32[3, 2]) { matmul(%x, const(f32[1, 2, 5], [1, 2, 3, 4, 5, "
                       "6, 7, 8, 9, 10])) }"),
           "def @main(%x: f32[3, 2]) { matmul(%x, " + Const(2, 2) + ") }",
           "def @main(%x: f64[3, 2]) { matmul(%x, " + Const(2, 5, "f64") + ") }",
       }) {
    EXPECT_EQ(Print(Pack(alone)), Printed(alone)) << alone;
  }
}

// const(f32[shape], [...]) with values 1 to 7 repeating: a conv weight of any rank.
std::string ConstOfShape(const std::vector<int64_t>& shape) {
  std::string s = "const(f32[";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
    n *= shape[i];
  }
  s += "], [";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(i % 7 + 1);
  return s + "])";
}

// A conv_nhwc whose lowering takes the im2col form (a reduction KH x KW x C past 2048, the copy
// of the taps within 8 MiB) gets its constant HWIO weight as panels of the [K, M] matrix, with
// kernel_shape and m; the same values through the reference interpreter. Left alone: a
// reduction of 2048, a symbolic batch or image size, a conv Winograd's form takes (winograd and
// it fits), a copy past 8 MiB.
TEST(PackConstantWeights, ConvNhwcWeightsBecomePanels) {
  auto conv = [](const std::string& x, const std::vector<int64_t>& w, const std::string& attrs) {
    return "def @main(%x: f32[" + x + "]) { conv_nhwc(%x, " + ConstOfShape(w) + attrs + ") }";
  };
  const std::string one = conv("1, 2, 3, 2049", {1, 1, 2049, 5}, "");
  IRModule out = Pack(one);
  const std::string text = Print(out);
  EXPECT_NE(text.find("w_panel=4"), std::string::npos) << text.substr(0, 200);
  EXPECT_NE(text.find("m=5"), std::string::npos);
  EXPECT_NE(text.find("f32[2, 2049, 4]"), std::string::npos);
  const std::vector<Tensor> x = {test::RandomTensor(DType::kFloat32, {1, 2, 3, 2049}, 7)};
  EXPECT_TRUE(test::TensorsNear(Interpret(out.Lookup("main"), x)[0],
                                Interpret(InferTypes(ParseModule(one)).Lookup("main"), x)[0], 1e-5,
                                1e-6));
  // A 3x3 conv of 228 channels (K 2052) at 30 x 30: packed, unless WinogradConvs marked it (its
  // form takes 8 x 8 tiles of 228 -> 16 channels).
  const std::string pads = ", pads=[1, 1, 1, 1]";
  EXPECT_NE(Print(Pack(conv("1, 30, 30, 228", {3, 3, 228, 16}, pads))).find("w_panel=4"),
            std::string::npos);
  for (const std::string& alone : {
           conv("1, 2, 3, 2048", {1, 1, 2048, 5}, ""),
           conv("n, 2, 3, 2049", {1, 1, 2049, 5}, ""),
           conv("1, h, 3, 2049", {1, 1, 2049, 5}, ""),
           conv("1, 30, 30, 228", {3, 3, 228, 16}, pads + ", winograd=true"),
           conv("1, 32, 32, 228", {3, 3, 228, 5}, pads),
       })
    EXPECT_EQ(Print(Pack(alone)), Printed(alone)) << alone.substr(0, 120);
}

TEST(PackConstantWeights, LeavesOtherGemmsAlone) {
  const std::string b = Const(2, 5);
  for (const std::string& text : {
           // B transposed, or not a constant, or not f32, or narrower than a panel by a power
           // of two
           "def @main(%x: f32[25, 2]) { gemm(%x, " + Const(5, 2) + ", transB=1) }",
           std::string("def @main(%x: f32[25, 2], %b: f32[2, 5]) { gemm(%x, %b) }"),
           "def @main(%x: f64[25, 2]) { gemm(%x, " + Const(2, 5, "f64") + ") }",
           "def @main(%x: f32[25, 2]) { gemm(%x, " + Const(2, 2) + ") }",
       }) {
    EXPECT_EQ(Print(Pack(text)), Printed(text)) << text;
  }
  // No known target (vector_bits 0), or TileLoops off (tile.j = 1): nothing to lay out for.
  const std::string text = "def @main(%x: f32[25, 2]) { gemm(%x, " + b + ") }";
  EXPECT_EQ(Print(Pack(text, 0)), Printed(text));
  EXPECT_EQ(Print(Pack(text, 256, {{"tile.j", 1}})), Printed(text));
}

// Fewer columns than a panel, not a power of two (a classifier's 10 classes): one vector's
// panel (8 lanes here), zeros past the columns, which TileLoops accumulates whole. The same
// results as the graph unpacked.
TEST(PackConstantWeights, NarrowWeightsFillOneVectorPanel) {
  for (const std::string& text : {
           "def @main(%x: f32[25, 2]) { gemm(%x, " + Const(2, 3) + ") }",
           "def @main(%x: f32[3, 2]) { matmul(%x, " + Const(2, 3) + ") }",
       }) {
    IRModule out = Pack(text);
    EXPECT_NE(Print(out).find("const(f32[1, 2, 8], [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, "
                              "5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0]), b_panel=8, n=3"),
              std::string::npos)
        << Print(out);
    const TensorTypeNode* x = AsTensor(out.Lookup("main")->params[0]->type);
    std::vector<int64_t> shape;
    for (const Dim& d : x->shape) shape.push_back(d.value());
    std::vector<Tensor> in = {test::RandomTensor(DType::kFloat32, shape, 5)};
    EXPECT_TRUE(test::TensorsNear(Interpret(out.Lookup("main"), in)[0],
                                  Interpret(InferTypes(ParseModule(text)).Lookup("main"), in)[0], 0,
                                  0));
  }
}

}  // namespace
}  // namespace kiln
