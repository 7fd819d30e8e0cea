// TileLoops with packed operand panels: panels copied per column tile (tile.pack) and K
// blocks, operands pre-packed by PackConstantWeights and read in place (their partial last
// panel accumulated whole), the row counts their panels take; golden text where it pins the
// form, and results bit for bit against the untiled kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <tuple>

#include "common/loop_test_util.h"
#include "common/test_util.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"
#include "passes/loop_tile_util.h"
#include "passes/lower_to_loops.h"

namespace kiln {
namespace {

using loop::Buffer;
using loop::Expr;
using loop::Var;
using test::BodyText;
using ::testing::HasSubstr;
using ::testing::Not;
using tile_test::Buf;
using tile_test::ExpectSameResults;
using tile_test::Func;
using tile_test::I;
using tile_test::kTiledPipeline;
using tile_test::Loop;
using tile_test::Matmul;
using tile_test::Sum;
using tile_test::Tile;

// ---- packed panels (tile.pack) ----

// Column tiles outermost: each copies its panel of b (depth x Tj) into a contiguous buffer,
// then every row block and the row tail read the panel; the tail columns run unpacked.
TEST(TileLoops, PackedPanelsPerColumnTile) {
  auto f = Matmul(I(5), I(36), I(3), {});
  auto g = Tile(f, 16, "TileLoops", 4, /*pack=*/true);
  EXPECT_EQ(BodyText(g), R"(for j_outer in [0, 2) {
  alloc b_panel: f32[48] local
  for k_pack in [0, 3) {
    for j_pack in [0, 16) {
      b_panel[k_pack * 16 + j_pack] = b[k_pack, j_outer * 16 + j_pack]
    }
  }
  alloc acc0: f32[64] local
  for i_row in [0, 4) unrolled {
    for j_inner in [0, 16) {
      acc0[i_row * 16 + j_inner] = 0.0f
    }
  }
  for k in [0, 3) {
    for i_row in [0, 4) unrolled {
      for j_inner in [0, 16) {
        acc0[i_row * 16 + j_inner] = acc0[i_row * 16 + j_inner] + a[i_row, k] * b_panel[k * 16 + j_inner]
      }
    }
  }
  for i_row in [0, 4) unrolled {
    for j_inner in [0, 16) {
      out[i_row, j_outer * 16 + j_inner] = max(acc0[i_row * 16 + j_inner] + bias[j_outer * 16 + j_inner], 0.0f)
    }
  }
  free acc0
  for i in [4, 5) {
    alloc acc0_1: f32[16] local
    for j_inner in [0, 16) {
      acc0_1[j_inner] = 0.0f
    }
    for k in [0, 3) {
      for j_inner in [0, 16) {
        acc0_1[j_inner] = acc0_1[j_inner] + a[i, k] * b_panel[k * 16 + j_inner]
      }
    }
    for j_inner in [0, 16) {
      out[i, j_outer * 16 + j_inner] = max(acc0_1[j_inner] + bias[j_outer * 16 + j_inner], 0.0f)
    }
    free acc0_1
  }
  free b_panel
}
alloc acc0_2: f32[16] local
for i_row_1 in [0, 4) unrolled {
  for j_inner in [0, 4) {
    acc0_2[i_row_1 * 4 + j_inner] = 0.0f
  }
}
for k in [0, 3) {
  for i_row_1 in [0, 4) unrolled {
    for j_inner in [0, 4) {
      acc0_2[i_row_1 * 4 + j_inner] = acc0_2[i_row_1 * 4 + j_inner] + a[i_row_1, k] * b[k, 32 + j_inner]
    }
  }
}
for i_row_1 in [0, 4) unrolled {
  for j_inner in [0, 4) {
    out[i_row_1, 32 + j_inner] = max(acc0_2[i_row_1 * 4 + j_inner] + bias[32 + j_inner], 0.0f)
  }
}
free acc0_2
for i in [4, 5) {
  alloc acc0_3: f32[4] local
  for j_inner in [0, 4) {
    acc0_3[j_inner] = 0.0f
  }
  for k in [0, 3) {
    for j_inner in [0, 4) {
      acc0_3[j_inner] = acc0_3[j_inner] + a[i, k] * b[k, 32 + j_inner]
    }
  }
  for j_inner in [0, 4) {
    out[i, 32 + j_inner] = max(acc0_3[j_inner] + bias[32 + j_inner], 0.0f)
  }
  free acc0_3
}
)");
  ExpectSameResults(f, g);
}

// Packing through the whole loop pipeline, the way the compiler runs it: odd and symbolic
// rows, columns and depths, with and without tails, agree bit for bit with the plain loops.
TEST(TileLoops, PackedPanelsThroughThePipeline) {
  const std::string pipeline = kTiledPipeline;
  for (int64_t m : {1, 6, 13}) {
    for (int64_t n : {16, 70}) {
      auto f = Matmul(I(m), I(n), I(19), {});
      auto g = Tile(f, 16, pipeline, 6, /*pack=*/true);
      ExpectSameResults(f, g);
    }
  }
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n"), d = loop::MakeVar("d");
  auto f = Matmul(m, n, d, {m, n, d});
  auto g = Tile(f, 16, pipeline, 6, /*pack=*/true);
  EXPECT_THAT(loop::Print(g), HasSubstr("b_panel"));
  ExpectSameResults(f, g, {{1, 1, 1}, {7, 64, 5}, {13, 71, 33}, {8, 130, 2}, {6, 15, 0}});
}

// out[i, j] = sum_k a[i, k] * bp[j // t, k, j % t]: b pre-packed into panels of t columns (as
// gemm's b_panel reads it).
// `m` rows: a constant, or a symbolic Var listed in `scalars`.
loop::PrimFunc PrepackedMatmul(Expr m, int64_t n, int64_t depth, int64_t t,
                               std::vector<Var> scalars = {}) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {m, I(depth)}), bp = Buf("bp", {I((n + t - 1) / t), I(depth), I(t)}),
         out = Buf("out", {m, I(n)});
  Expr b = loop::Load(bp, {loop::FloorDiv(j, I(t)), k, loop::FloorMod(j, I(t))});
  return Func(
      {a, bp, out}, 2, std::move(scalars),
      Loop(i, m,
           Loop(j, I(n),
                loop::Store(out, {i, j}, Sum(loop::Mul(loop::Load(a, {i, k}), b), k, I(depth))))));
}

// A pre-packed operand sets the tile width to its panels' (16 here, though tile.j asks for 32)
// and is read in place: no panel is copied, the column tiles still go outermost.
TEST(TileLoops, PrepackedOperandIsReadInPlace) {
  auto f = PrepackedMatmul(I(5), 20, 3, 16);
  auto g = Tile(f, 32, "TileLoops", 4, /*pack=*/true);
  std::string text = BodyText(g);
  EXPECT_THAT(text, Not(HasSubstr("_panel")));
  EXPECT_THAT(text, HasSubstr("bp[0, k, j_inner]"));  // the full tile: panel 0
  EXPECT_THAT(text, HasSubstr("bp[1, k, j_inner]"));  // the 4 columns left: panel 1
  EXPECT_THAT(text, Not(HasSubstr("//")));
  ExpectSameResults(f, g);
  const std::string pipeline = kTiledPipeline;
  for (auto [m, n, t] : {std::tuple{1, 16, 16}, {13, 70, 16}, {30, 130, 64}, {6, 7, 2}}) {
    auto h = PrepackedMatmul(I(m), n, 19, t);
    ExpectSameResults(h, Tile(h, 64, pipeline, 6, /*pack=*/true));
    ExpectSameResults(h, Tile(h, 64, pipeline, 6, /*pack=*/false));
  }
}

// The last, partial panel of a pre-packed operand (10 columns of a 16-wide panel: a
// classifier's classes) zeroes and accumulates all 16 columns, its zeros past the product in
// bounds, so each accumulator row is one whole vector; the epilogue stores the 10. Results as
// the untiled kernel's, through the whole pipeline, for partial panels alone and after full
// ones, and for a symbolic row count.
TEST(TileLoops, PartialPanelAccumulatesWhole) {
  auto f = PrepackedMatmul(I(25), 10, 19, 16);
  auto g = Tile(f, 16, "TileLoops", 4);
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("acc0[i_row * 16 + j_inner] = acc0[i_row * 16 + j_inner] + "
                              "a[i_outer * 4 + i_row, k] * bp[0, k, j_inner]"))
      << text;
  EXPECT_THAT(text, HasSubstr("for j_inner in [0, 16)")) << text;
  EXPECT_THAT(text, HasSubstr("for j_inner in [0, 10)")) << text;
  EXPECT_THAT(text, HasSubstr("out[i_outer * 4 + i_row, j_inner] = acc0[i_row * 16 + j_inner]"))
      << text;
  ExpectSameResults(f, g);
  const std::string pipeline = kTiledPipeline;
  for (auto [m, n, t] : {std::tuple{25, 10, 16}, {1, 10, 16}, {13, 70, 16}, {6, 7, 8}}) {
    auto h = PrepackedMatmul(I(m), n, 19, t);
    ExpectSameResults(h, Tile(h, 64, pipeline, 6));
  }
  Var m = loop::MakeVar("m");
  auto sym = PrepackedMatmul(m, 10, 23, 16, {m});
  ExpectSameResults(sym, Tile(sym, 16, pipeline, 6), {{1}, {7}, {13}});
}

// On a 512-bit target with the tile keys unset, panels 48 columns wide (TileShape's narrow
// panels, which PackConstantWeights makes where they fit the column count) run in blocks of 8
// rows (3 vectors each, 24 accumulators); 64-column panels keep 4 rows.
TEST(TileLoops, NarrowPrepackedPanelsGetEightRows) {
  test::PassConfig avx512 = {{"target.vector_bits", int64_t{512}}};
  auto f = PrepackedMatmul(I(32), 128, 19, 48);
  auto g = test::RunLoopPipeline("TileLoops", f, avx512);
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("i_row in [0, 8) unrolled")) << text;
  EXPECT_THAT(text, HasSubstr("j_inner in [0, 48)")) << text;
  EXPECT_THAT(text, HasSubstr("j_inner in [0, 32)")) << text;  // 128 = 2 x 48 + 32
  EXPECT_THAT(text, HasSubstr("bp[2, k, j_inner]")) << text;
  ExpectSameResults(f, g);
  auto wide = PrepackedMatmul(I(32), 128, 19, 64);
  std::string kept = BodyText(test::RunLoopPipeline("TileLoops", wide, avx512));
  EXPECT_THAT(kept, HasSubstr("i_row in [0, 4) unrolled")) << kept;
  EXPECT_THAT(kept, HasSubstr("j_inner in [0, 64)")) << kept;
  // 32-column panels (TileShape's half panels) take 12 rows, 2 vectors each; 16 rows are a
  // block of 12 and one of 4.
  auto half = PrepackedMatmul(I(16), 256, 19, 32);
  auto hg = test::RunLoopPipeline("TileLoops", half, avx512);
  std::string halved = BodyText(hg);
  EXPECT_THAT(halved, HasSubstr("i_row in [0, 12) unrolled")) << halved;
  EXPECT_THAT(halved, HasSubstr("i_rest in [0, 4) unrolled")) << halved;
  EXPECT_THAT(halved, HasSubstr("j_inner in [0, 32)")) << halved;
  ExpectSameResults(half, hg);
  // Through the pipeline to scalar code, rows not a multiple of 8 and a symbolic-free tail.
  const std::string pipeline = kTiledPipeline;
  for (auto [m, n] : {std::pair{1, 48}, {13, 130}, {30, 96}}) {
    auto h = PrepackedMatmul(I(m), n, 23, 48);
    ExpectSameResults(h, test::RunLoopPipeline(pipeline, h, avx512));
  }
  // A symbolic row count (a shape-generic kernel's batch): blocks of 8, then the tail as
  // one block of 2, 4 or 8 rows clamped to the last row, or a single row.
  Var m = loop::MakeVar("m");
  auto sym = PrepackedMatmul(m, 130, 23, 48, {m});
  auto sg = test::RunLoopPipeline("TileLoops", sym, avx512);
  std::string tail = BodyText(sg);
  for (const char* block : {" in [0, 2) unrolled", " in [0, 4) unrolled", " in [0, 8) unrolled"})
    EXPECT_THAT(tail, HasSubstr(block)) << tail;
  EXPECT_THAT(tail, HasSubstr("a[min(m // 8 * 8 + i_rest")) << tail;
  ExpectSameResults(sym, sg, {{1}, {2}, {7}, {8}, {15}, {21}});
  ExpectSameResults(sym, test::RunLoopPipeline(pipeline, sym, avx512), {{1}, {6}, {13}, {23}});
}

// A pre-packed panel read in K blocks: every block but the last prefetches, at each reduction
// step, the row the next block reads at that step (clamped to the last row), one line per row
// block spread over the row blocks (6 blocks of 8 rows, 3 lines of 16 floats), or every line
// in each block where there are fewer row blocks than lines. Results bit for bit.
TEST(TileLoops, KBlocksPrefetchTheNextBlocksPanelRows) {
  test::PassConfig keys = {{"target.vector_bits", int64_t{512}}, {"tile.k", int64_t{64}}};
  auto f = PrepackedMatmul(I(49), 96, 190, 48);
  auto g = test::RunLoopPipeline("TileLoops, LoopSimplify", f, keys);
  std::string text = BodyText(g);
  // (The column's panel and offset stay divisions that the code generator hoists out of k.)
  EXPECT_THAT(text, HasSubstr("prefetch(bp[j_outer + i_outer % 3 * 16 // 48, min(k + 64, 189), "
                              "i_outer % 3 * 16 % 48])"))
      << text;
  // Blocks 1 and 2 of 3 (the middle one in a loop), none in the last or the one-row tail.
  size_t count = 0;
  for (size_t at = text.find("prefetch("); at != std::string::npos;
       at = text.find("prefetch(", at + 1))
    ++count;
  EXPECT_EQ(count, 2u) << text;
  ExpectSameResults(f, g);
  auto few = PrepackedMatmul(I(8), 96, 190, 48);
  auto fg = test::RunLoopPipeline("TileLoops, LoopSimplify", few, keys);
  std::string all = BodyText(fg);
  for (const char* line :
       {"min(k + 64, 189), 0])", "min(k + 64, 189), 16])", "min(k + 64, 189), 32])"})
    EXPECT_THAT(all, HasSubstr(line)) << all;
  ExpectSameResults(few, fg);
  const std::string pipeline = kTiledPipeline;
  for (auto [m, n] : {std::pair{49, 96}, {8, 48}, {17, 130}}) {
    auto h = PrepackedMatmul(I(m), n, 190, 48);
    ExpectSameResults(h, test::RunLoopPipeline(pipeline, h, keys));
  }
}

// On a 512-bit target with the tile keys unset, a product narrower than one 64-column tile
// (conv_nhwc's output channels) takes rows for 16 accumulators, at most 12: 32 columns (two
// vectors) 8 rows, 16 columns 12; a full tile over 24 rows or more takes 6 (FullTileBlock), as
// do whole 64-column tiles over rows that split into 6s with no tail or one of 4 or more (16,
// 12); other multiples of 8 rows take 8 rows of 3 vectors (likewise), other counts tile.i's 4.
// Same results through to scalar code.
TEST(TileLoops, NarrowProductsTakeMoreRows) {
  test::PassConfig avx512 = {{"target.vector_bits", int64_t{512}}};
  for (auto [m, n, rows, columns] : {std::tuple{50, 32, 8, 32},
                                     {50, 16, 12, 16},
                                     {50, 24, 8, 24},
                                     {50, 40, 5, 40},
                                     {50, 128, 6, 64},
                                     {20, 128, 4, 64},
                                     {16, 128, 6, 64},
                                     {12, 64, 6, 64},
                                     {16, 112, 8, 48},
                                     {8, 128, 8, 48}}) {
    auto f = Matmul(I(m), I(n), I(9), {});
    auto g = test::RunLoopPipeline("TileLoops", f, avx512);
    std::string text = BodyText(g);
    EXPECT_THAT(text, HasSubstr("i_row in [0, " + std::to_string(rows) + ") unrolled"))
        << n << " columns\n"
        << text;
    EXPECT_THAT(text, HasSubstr("j_inner in [0, " + std::to_string(columns) + ")")) << text;
    ExpectSameResults(f, g);
  }
  // AVX2 (16 registers, 16-column tiles): 8 columns take 12 rows, 12 columns (two vectors)
  // keep tile.i's 6 (12 accumulators).
  test::PassConfig avx2 = {{"target.vector_bits", int64_t{256}}};
  for (auto [n, rows] : {std::pair{8, 12}, {12, 6}}) {
    auto f = Matmul(I(50), I(n), I(9), {});
    std::string text = BodyText(test::RunLoopPipeline("TileLoops", f, avx2));
    EXPECT_THAT(text, HasSubstr("i_row in [0, " + std::to_string(rows) + ") unrolled"))
        << n << " columns\n"
        << text;
  }
  // tile.i given: the block is what it says.
  auto f = Matmul(I(50), I(32), I(9), {});
  std::string set = BodyText(test::RunLoopPipeline(
      "TileLoops", f, {{"target.vector_bits", int64_t{512}}, {"tile.i", int64_t{3}}}));
  EXPECT_THAT(set, HasSubstr("i_row in [0, 3) unrolled")) << set;
  const std::string pipeline = kTiledPipeline;
  for (auto [m, n] : {std::pair{1, 16}, {13, 32}, {29, 47}}) {
    auto h = Matmul(I(m), I(n), I(7), {});
    ExpectSameResults(h, test::RunLoopPipeline(pipeline, h, avx512));
  }
}

// A load of b that also depends on the row is not a panel shared by the rows: nothing packs.
TEST(TileLoops, OperandsThatDependOnTheRowAreNotPacked) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(8), I(8)}), b = Buf("b", {I(8), I(8), I(32)}),
         out = Buf("out", {I(8), I(32)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {i, k, j})), k, I(8));
  auto f = Func({a, b, out}, 2, {}, Loop(i, I(8), Loop(j, I(32), loop::Store(out, {i, j}, dot))));
  auto g = Tile(f, 16, "TileLoops", 4, /*pack=*/true);
  EXPECT_EQ(BodyText(g), BodyText(Tile(f, 16, "TileLoops", 4, /*pack=*/false)));
  EXPECT_THAT(BodyText(g), Not(HasSubstr("panel")));
  ExpectSameResults(f, g);
}

// A store that does not give each row its own element keeps the rows in order.
TEST(TileLoops, RowsSharingAnOutputAreNotBlocked) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(8), I(8)}), b = Buf("b", {I(8), I(16)}), out = Buf("out", {I(16)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, I(8));
  auto f = Func({a, b, out}, 2, {}, Loop(i, I(8), Loop(j, I(16), loop::Store(out, {j}, dot))));
  EXPECT_EQ(BodyText(Tile(f, 16, "TileLoops", 4)), BodyText(Tile(f, 16, "TileLoops", 1)));
}

// Column tiles in groups (TileGroups): where the rows operand is large (256 rows x 1024 deep,
// 1 MiB), each K block runs over every tile of a group before the next block, so the rows'
// block stays in L2 over them; one group per thread (target.threads), the accumulator tiles of a
// group side by side. Results bit for bit, with and without tail columns. With a tile per
// thread, or a smaller rows operand, the tiles run alone.
TEST(TileLoops, KBlockedTilesRunInGroupsOverALargeRowsOperand) {
  auto keys = [](int64_t threads) {
    return test::PassConfig{{"tile.j", int64_t{64}},
                            {"tile.i", int64_t{4}},
                            {"tile.pack", true},
                            {"tile.k", int64_t{128}},
                            {"target.threads", threads}};
  };
  auto f = tile_test::Matmul(I(256), I(256), I(1024), {});
  auto two = test::RunLoopPipeline("TileLoops", f, keys(2));
  std::string text = BodyText(two);
  EXPECT_THAT(text, HasSubstr("for j_outer in [0, 2) {")) << text;
  EXPECT_THAT(text, HasSubstr("for j_panel in [0, 2) {")) << text;
  EXPECT_THAT(text, HasSubstr("alloc acc0_tile: f32[32768] local")) << text;  // 256 x 64 x 2
  ExpectSameResults(f, two);
  auto one = test::RunLoopPipeline("TileLoops", f, keys(1));
  EXPECT_THAT(BodyText(one), HasSubstr("for j_panel in [0, 4) {")) << BodyText(one);
  EXPECT_THAT(BodyText(one), Not(HasSubstr("j_outer"))) << BodyText(one);
  ExpectSameResults(f, one);
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", f, keys(4))), Not(HasSubstr("j_panel")));
  auto shallow = tile_test::Matmul(I(256), I(256), I(1000), {});
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", shallow, keys(2))),
              Not(HasSubstr("j_panel")));
  ExpectSameResults(f, test::RunLoopPipeline(kTiledPipeline, f, keys(2)));
  // Tail columns past the grouped tiles (4 tiles of 64, then 16) start after the last tile, not
  // after the last group.
  auto tail = tile_test::Matmul(I(256), I(272), I(1024), {});
  auto tg = test::RunLoopPipeline("TileLoops", tail, keys(2));
  EXPECT_THAT(BodyText(tg), HasSubstr("for j_panel in [0, 2) {")) << BodyText(tg);
  ExpectSameResults(tail, tg);
}

}  // namespace
}  // namespace kiln
