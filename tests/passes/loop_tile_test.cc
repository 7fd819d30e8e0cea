// TileLoops: golden text for matmul-shaped reductions as LowerReductions leaves them (full
// tiles, a constant tail, a symbolic tail, several accumulators), the reductions it leaves
// alone, and the kernels compiled before and after (and after the vectorizer and parallelizer
// that follow it in the pipeline) agreeing bit for bit: each output still sums its terms in
// the same order.
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
using loop::ForKind;
using loop::Stmt;
using loop::Var;
using test::BodyText;
using test::ErrorMessage;
using ::testing::HasSubstr;
using ::testing::Not;
using tile_test::Buf;
using tile_test::ExpectSameResults;
using tile_test::Func;
using tile_test::I;
using tile_test::Loop;
using tile_test::Matmul;
using tile_test::Sum;
using tile_test::Tile;

// ---- the tiling ----

// The pass header's example: full tiles in a j_outer loop.
TEST(TileLoops, FullTilesOfAMatmulWithEpilogue) {
  Var m = loop::MakeVar("m");
  auto f = Matmul(m, I(256), I(8), {m});
  auto g = Tile(f);
  EXPECT_EQ(BodyText(g), R"(for i in [0, m) {
  for j_outer in [0, 4) {
    alloc acc0: f32[64] local
    for j_inner in [0, 64) {
      acc0[j_inner] = 0.0f
    }
    for k in [0, 8) {
      for j_inner in [0, 64) {
        acc0[j_inner] = acc0[j_inner] + a[i, k] * b[k, j_outer * 64 + j_inner]
      }
    }
    for j_inner in [0, 64) {
      out[i, j_outer * 64 + j_inner] = max(acc0[j_inner] + bias[j_outer * 64 + j_inner], 0.0f)
    }
    free acc0
  }
}
)");
  ExpectSameResults(f, g, {{1}, {5}});
}

// The same matmul with out written at one flat index (CollapseLoops' form: out[i * 256 + j] into
// a buffer with explicit strides): rows 256 apart, columns within one row, so the rows still
// run as blocks.
TEST(TileLoops, FlatIndexRowsRunAsBlocks) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(8), I(5)}), b = Buf("b", {I(5), I(256)});
  Buffer out = loop::MakeBuffer("out", DType::kFloat32, {I(8), I(256)},
                                loop::BufferNode::Scope::kGlobal, {I(256), I(1)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, I(5));
  auto f = Func(
      {a, b, out}, 2, {},
      Loop(i, I(8), Loop(j, I(256), loop::Store(out, {loop::Add(loop::Mul(i, I(256)), j)}, dot))));
  auto g = Tile(f, 64, "TileLoops", 4);
  EXPECT_THAT(BodyText(g), HasSubstr("alloc acc0: f32[256] local")) << BodyText(g);
  ExpectSameResults(f, g);
}

// The same with a symbolic row length (a shape-generic 1x1 conv's pixels after CollapseLoops:
// out[m * (h * w) + p], p over h * w): the rows are h * w apart, the stride the expression of
// the columns' extent, so they run as blocks; rows written at a shorter stride do not.
TEST(TileLoops, SymbolicFlatIndexRowsRunAsBlocks) {
  auto kernel = [](bool overlapping) {
    Var h = loop::MakeVar("h"), w = loop::MakeVar("w");
    Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
    Expr hw = loop::Mul(h, w);
    Expr stride = overlapping ? loop::Sub(hw, I(1)) : hw;
    Buffer a = Buf("a", {I(8), I(5)}), b = Buf("b", {I(5), hw});
    Buffer out = Buf("out", {loop::Add(loop::Mul(I(8), hw), I(8))});
    Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, I(5));
    return Func(
        {a, b, out}, 2, {h, w},
        Loop(i, I(8), Loop(j, hw, loop::Store(out, {loop::Add(loop::Mul(i, stride), j)}, dot))));
  };
  auto f = kernel(false);
  auto g = Tile(f, 64, "TileLoops", 4);
  EXPECT_THAT(BodyText(g), HasSubstr("alloc acc0: f32[256] local")) << BodyText(g);
  ExpectSameResults(f, g, {{1, 1}, {3, 7}, {9, 10}});
  EXPECT_THAT(BodyText(Tile(kernel(true), 64, "TileLoops", 4)),
              Not(HasSubstr("alloc acc0: f32[256] local")));
}

// Structurally equal reductions in one store (an activation reading its input twice) share one
// accumulator, whatever their axes are named.
TEST(TileLoops, EqualReductionsShareAnAccumulator) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k"),
      k2 = loop::MakeVar("k2");
  Buffer a = Buf("a", {I(4), I(3)}), b = Buf("b", {I(3), I(8)}), out = Buf("out", {I(4), I(8)});
  Expr d1 = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, I(3));
  Expr d2 = Sum(loop::Mul(loop::Load(a, {i, k2}), loop::Load(b, {k2, j})), k2, I(3));
  auto f = Func({a, b, out}, 2, {},
                Loop(i, I(4), Loop(j, I(8), loop::Store(out, {i, j}, loop::Mul(d1, d2)))));
  EXPECT_THAT(BodyText(f), HasSubstr("out[i, j] = acc0[0] * acc0[0]")) << BodyText(f);
  EXPECT_THAT(BodyText(f), Not(HasSubstr("acc1")));
}

// K blocks: each column tile's panel holds `tile.k` reduction steps, and the accumulator rows
// wait in acc0_tile between blocks (100 steps in blocks of 25: first, two middle, last). The
// terms still add in order: bit for bit the unblocked kernel.
TEST(TileLoops, KBlocksKeepResultsBitForBit) {
  auto f = Matmul(I(8), I(128), I(100), {});
  auto g = test::RunLoopPipeline("TileLoops", f,
                                 {{"tile.j", int64_t{64}},
                                  {"tile.i", int64_t{4}},
                                  {"tile.pack", true},
                                  {"tile.k", int64_t{32}}});
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("alloc acc0_tile: f32[512] local")) << text;
  EXPECT_THAT(text, HasSubstr("alloc b_panel: f32[1600] local")) << text;  // 25 x 64
  EXPECT_THAT(text, HasSubstr("for k_block in [1, 3) {")) << text;
  ExpectSameResults(f, g);
  auto unblocked = test::RunLoopPipeline("TileLoops", f,
                                         {{"tile.j", int64_t{64}},
                                          {"tile.i", int64_t{4}},
                                          {"tile.pack", true},
                                          {"tile.k", int64_t{1}}});
  EXPECT_THAT(BodyText(unblocked), Not(HasSubstr("acc0_tile")));
}

// Rows whose accumulator tile (rows x tile.j floats) is up to 512 KiB take K blocks: 1024 rows
// of 64 columns (256 KiB) do, bit for bit; 4096 rows (1 MiB) stream their panel unblocked.
TEST(TileLoops, KBlocksUpToAHalfMiBAccumulatorTile) {
  test::PassConfig keys = {{"tile.j", int64_t{64}},
                           {"tile.i", int64_t{4}},
                           {"tile.pack", true},
                           {"tile.k", int64_t{32}}};
  auto f = Matmul(I(1024), I(64), I(100), {});
  auto g = test::RunLoopPipeline("TileLoops", f, keys);
  EXPECT_THAT(BodyText(g), HasSubstr("alloc acc0_tile: f32[65536] local")) << BodyText(g);
  ExpectSameResults(f, g);
  EXPECT_THAT(
      BodyText(test::RunLoopPipeline("TileLoops", Matmul(I(4096), I(64), I(100), {}), keys)),
      Not(HasSubstr("acc0_tile")));
}

// One column tile over many row blocks, its operand already one contiguous panel (an 8 x 8
// conv's im2col copy): the rows run in groups of 8 row blocks, each over K blocks of the panel
// read in place (nothing copied), and the groups are what ParallelizeLoops shares out. A tile
// whose operand rows are further apart is left as before (row blocks outermost, no panel).
TEST(TileLoops, SingleContiguousTileRunsRowGroupsInKBlocks) {
  test::PassConfig keys = {
      {"tile.j", int64_t{64}}, {"tile.i", int64_t{4}}, {"tile.k", int64_t{50}}};
  auto f = Matmul(I(64), I(64), I(200), {});
  auto g = test::RunLoopPipeline("TileLoops", f, keys);
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("for i_group in [0, 2) {")) << text;
  EXPECT_THAT(text, HasSubstr("for k_block in [1, 3) {")) << text;
  EXPECT_THAT(text, Not(HasSubstr("b_panel"))) << text;
  ExpectSameResults(f, g);
  auto p = test::RunLoopPipeline("TileLoops, ParallelizeLoops", f, keys);
  EXPECT_THAT(BodyText(p), HasSubstr("for i_group in [0, 2) parallel {"));

  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(64), I(200)}), b = Buf("b", {I(200), I(100)}),
         out = Buf("out", {I(64), I(64)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, I(200));
  auto strided =
      Func({a, b, out}, 2, {}, Loop(i, I(64), Loop(j, I(64), loop::Store(out, {i, j}, dot))));
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", strided, keys)),
              Not(HasSubstr("i_group")));
}

// A panel that would copy the same elements again and again (a stencil: the nine taps read
// shifts of one row) is not made; a matmul's is.
TEST(TileLoops, OverlappingPanelsAreNotPacked) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer w = Buf("w", {I(32), I(9)}), x = Buf("x", {I(130)}), out = Buf("out", {I(32), I(128)});
  Expr tap = loop::Add(j, loop::FloorMod(k, I(3)));
  auto stencil = Func(
      {w, x, out}, 2, {},
      Loop(
          i, I(32),
          Loop(j, I(128),
               loop::Store(out, {i, j},
                           Sum(loop::Mul(loop::Load(w, {i, k}), loop::Load(x, {tap})), k, I(9))))));
  test::PassConfig no_pack_key = {{"tile.j", int64_t{64}}, {"tile.i", int64_t{2}}};
  auto g = test::RunLoopPipeline("TileLoops", stencil, no_pack_key);
  EXPECT_THAT(BodyText(g), Not(HasSubstr("_panel"))) << BodyText(g);
  ExpectSameResults(stencil, g);
  auto matmul = Matmul(I(32), I(128), I(9), {});
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", matmul, no_pack_key)),
              HasSubstr("b_panel"));
}

// A constant extent that is not a multiple of the tile: one full tile (no loop) and a tail of
// its own width; a one-column tail needs no j_inner loop at all.
TEST(TileLoops, ConstantTailTiles) {
  auto f = Matmul(I(3), I(10), I(5), {});
  auto g = Tile(f, 4);
  EXPECT_EQ(BodyText(g), R"(for i in [0, 3) {
  for j_outer in [0, 2) {
    alloc acc0: f32[4] local
    for j_inner in [0, 4) {
      acc0[j_inner] = 0.0f
    }
    for k in [0, 5) {
      for j_inner in [0, 4) {
        acc0[j_inner] = acc0[j_inner] + a[i, k] * b[k, j_outer * 4 + j_inner]
      }
    }
    for j_inner in [0, 4) {
      out[i, j_outer * 4 + j_inner] = max(acc0[j_inner] + bias[j_outer * 4 + j_inner], 0.0f)
    }
    free acc0
  }
  alloc acc0_1: f32[2] local
  for j_inner_1 in [0, 2) {
    acc0_1[j_inner_1] = 0.0f
  }
  for k in [0, 5) {
    for j_inner_1 in [0, 2) {
      acc0_1[j_inner_1] = acc0_1[j_inner_1] + a[i, k] * b[k, 8 + j_inner_1]
    }
  }
  for j_inner_1 in [0, 2) {
    out[i, 8 + j_inner_1] = max(acc0_1[j_inner_1] + bias[8 + j_inner_1], 0.0f)
  }
  free acc0_1
}
)");
  ExpectSameResults(f, g);

  auto f5 = Matmul(I(2), I(5), I(3), {});
  auto g5 = Tile(f5, 4);
  EXPECT_THAT(BodyText(g5), HasSubstr(R"(  alloc acc0_1: f32[1] local
  acc0_1[0] = 0.0f
  for k in [0, 3) {
    acc0_1[0] = acc0_1[0] + a[i, k] * b[k, 4]
  }
  out[i, 4] = max(acc0_1[0] + bias[4], 0.0f)
  free acc0_1
)"));
  ExpectSameResults(f5, g5);

  // Fewer columns than the tile: one tile as wide as the loop.
  auto f3 = Matmul(I(2), I(3), I(3), {});
  EXPECT_THAT(BodyText(Tile(f3)), HasSubstr("alloc acc0: f32[3] local\n  for j_inner in [0, 3) {"));
  ExpectSameResults(f3, Tile(f3));
}

// A symbolic number of columns: a j_outer loop over the full tiles and a tail tile with a full
// row of accumulators, both correct for every n including 1 and multiples of the tile.
TEST(TileLoops, SymbolicColumnsGetASymbolicTail) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  auto f = Matmul(m, n, I(7), {m, n});
  auto g = Tile(f, 16);
  EXPECT_EQ(BodyText(g), R"(for i in [0, m) {
  for j_outer in [0, n // 16) {
    alloc acc0: f32[16] local
    for j_inner in [0, 16) {
      acc0[j_inner] = 0.0f
    }
    for k in [0, 7) {
      for j_inner in [0, 16) {
        acc0[j_inner] = acc0[j_inner] + a[i, k] * b[k, j_outer * 16 + j_inner]
      }
    }
    for j_inner in [0, 16) {
      out[i, j_outer * 16 + j_inner] = max(acc0[j_inner] + bias[j_outer * 16 + j_inner], 0.0f)
    }
    free acc0
  }
  alloc acc0_1: f32[16] local
  for j_inner_1 in [0, n % 16) {
    acc0_1[j_inner_1] = 0.0f
  }
  for k in [0, 7) {
    for j_inner_1 in [0, n % 16) {
      acc0_1[j_inner_1] = acc0_1[j_inner_1] + a[i, k] * b[k, n // 16 * 16 + j_inner_1]
    }
  }
  for j_inner_1 in [0, n % 16) {
    out[i, n // 16 * 16 + j_inner_1] = max(acc0_1[j_inner_1] + bias[n // 16 * 16 + j_inner_1], 0.0f)
  }
  free acc0_1
}
)");
  ExpectSameResults(f, g, {{3, 1}, {2, 15}, {2, 16}, {1, 17}, {4, 100}});
}

// Two reductions in one value (two accumulators), and a column sum (the j loop at top level).
TEST(TileLoops, SeveralAccumulatorsAndColumnSums) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k"),
      k2 = loop::MakeVar("k2");
  Buffer x = Buf("x", {I(6), I(20)}), out = Buf("out", {I(20)});
  Expr value =
      loop::Add(Sum(loop::Load(x, {k, j}), k, I(6)),
                loop::Reduce(loop::ReduceKind::kMax, loop::Load(x, {k2, j}), {{k2, I(6)}}));
  auto f = Func({x, out}, 1, {}, Loop(j, I(20), loop::Store(out, {j}, value)));
  auto g = Tile(f, 16);
  EXPECT_THAT(BodyText(g), HasSubstr(R"(alloc acc0: f32[16] local
alloc acc1: f32[16] local
for j_inner in [0, 16) {
  acc0[j_inner] = 0.0f
}
for k in [0, 6) {
  for j_inner in [0, 16) {
    acc0[j_inner] = acc0[j_inner] + x[k, j_inner]
  }
}
for j_inner in [0, 16) {
  acc1[j_inner] = f32(-inf)
}
for k2 in [0, 6) {
  for j_inner in [0, 16) {
    acc1[j_inner] = max(acc1[j_inner], x[k2, j_inner])
  }
}
for j_inner in [0, 16) {
  out[j_inner] = acc0[j_inner] + acc1[j_inner]
}
free acc1
free acc0
)"));
  ExpectSameResults(f, g);
}

// Batched: the j loop of the innermost matrix is tiled wherever it sits.
TEST(TileLoops, BatchedMatmul) {
  Var bt = loop::MakeVar("bt"), i = loop::MakeVar("i"), j = loop::MakeVar("j"),
      k = loop::MakeVar("k");
  Buffer a = Buf("a", {I(2), I(3), I(9)}), b = Buf("b", {I(2), I(9), I(70)}),
         out = Buf("out", {I(2), I(3), I(70)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {bt, i, k}), loop::Load(b, {bt, k, j})), k, I(9));
  auto f = Func({a, b, out}, 2, {},
                Loop(bt, I(2), Loop(i, I(3), Loop(j, I(70), loop::Store(out, {bt, i, j}, dot)))));
  auto g = Tile(f);
  EXPECT_THAT(BodyText(g),
              HasSubstr("acc0[j_inner] = acc0[j_inner] + a[bt, i, k] * b[bt, k, j_inner]"));
  ExpectSameResults(f, g);
}

// ---- what it leaves alone ----

TEST(TileLoops, ContiguousReductionsAreLeftAlone) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  // A sum over the last axis reads x[i, k] along k already.
  Buffer x = Buf("x", {I(8), I(32)}), rows = Buf("rows", {I(8)});
  auto f = Func({x, rows}, 1, {},
                Loop(i, I(8), loop::Store(rows, {i}, Sum(loop::Load(x, {i, k}), k, I(32)))));
  EXPECT_EQ(loop::Print(Tile(f)), loop::Print(f));

  // a @ b^T reads b[j, k] along k too.
  Buffer a = Buf("a", {I(4), I(16)}), bt = Buf("bt", {I(8), I(16)}), out = Buf("out", {I(4), I(8)});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(bt, {j, k})), k, I(16));
  auto g = Func({a, bt, out}, 2, {}, Loop(i, I(4), Loop(j, I(8), loop::Store(out, {i, j}, dot))));
  EXPECT_EQ(loop::Print(Tile(g)), loop::Print(g));

  // Elementwise code has no reduction to turn around.
  auto h = Func({x, rows}, 1, {}, Loop(i, I(8), loop::Store(rows, {i}, loop::Load(x, {i, I(0)}))));
  EXPECT_EQ(loop::Print(Tile(h)), loop::Print(h));
}

// The rewrite would change the result (or is not the pattern): left alone.
TEST(TileLoops, IllegalOrForeignBodiesAreLeftAlone) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer b = Buf("b", {I(4), I(8)}), out = Buf("out", {I(8)});
  Buffer acc = loop::MakeBuffer("acc", DType::kFloat32, {I(1)}, loop::BufferNode::Scope::kLocal);
  auto body = [&](Stmt epilogue) {
    return loop::Seq(
        {loop::Alloc(acc), loop::Store(acc, {I(0)}, loop::FloatImm(0)),
         Loop(k, I(4),
              loop::Store(acc, {I(0)}, loop::Add(loop::Load(acc, {I(0)}), loop::Load(b, {k, j})))),
         std::move(epilogue), loop::Free(acc)});
  };
  // The epilogue reads out at another column than it writes (a dependence between columns).
  Expr shifted = loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, j, I(0)),
                              loop::Load(out, {loop::Sub(j, I(1))}), loop::FloatImm(0));
  auto f =
      Func({b, out}, 1, {},
           Loop(j, I(8), body(loop::Store(out, {j}, loop::Add(loop::Load(acc, {I(0)}), shifted)))));
  EXPECT_EQ(loop::Print(Tile(f)), loop::Print(f));

  // Every column writes one element: not injective in j.
  auto g =
      Func({b, out}, 1, {}, Loop(j, I(8), body(loop::Store(out, {I(0)}, loop::Load(acc, {I(0)})))));
  EXPECT_EQ(loop::Print(Tile(g)), loop::Print(g));

  // Extent 1, and the pass turned off.
  auto h = Func({b, out}, 1, {},
                loop::For(j, I(3), I(1), ForKind::kSerial,
                          body(loop::Store(out, {j}, loop::Load(acc, {I(0)})))));
  EXPECT_EQ(loop::Print(Tile(h)), loop::Print(h));
  auto ok =
      Func({b, out}, 1, {}, Loop(j, I(8), body(loop::Store(out, {j}, loop::Load(acc, {I(0)})))));
  EXPECT_NE(loop::Print(Tile(ok, 4)), loop::Print(ok));
  EXPECT_EQ(loop::Print(Tile(ok, 1)), loop::Print(ok));
  EXPECT_THAT(ErrorMessage([&] { Tile(ok, -2); }),
              HasSubstr("tile.j must not be negative, got -2"));
}

// ---- with the passes that follow it ----

// Tiling, then parallelizing and vectorizing as the default pipeline does: the row loop runs on
// the thread pool and every j_inner loop becomes vector code.
TEST(TileLoops, ThenParallelizeAndVectorize) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  auto f = Matmul(m, n, I(33), {m, n});
  auto g = Tile(f, 64, "TileLoops,ParallelizeLoops,VectorizeLoops");
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("for i in [0, m) parallel {"));
  EXPECT_THAT(
      text,
      HasSubstr("acc0[ramp(j_inner_vec_1 * 8, 1, 8)] = acc0[ramp(j_inner_vec_1 * 8, 1, 8)] + "
                "broadcast(a[i, k], 8) * b[k, ramp(j_outer * 64 + j_inner_vec_1 * 8, 1, 8)]"));
  ExpectSameResults(f, g, {{1, 1}, {3, 64}, {5, 71}, {67, 130}});
}

// A conv's pixels over a padded input as CollapseLoops leaves them: x read through p // 16 and
// p % 16 (a row-split read) is a column walk, tiled, and its lanes come out contiguous.
TEST(TileLoops, RowSplitReadIsTiled) {
  Var i = loop::MakeVar("i"), p = loop::MakeVar("p"), k = loop::MakeVar("k");
  Buffer w = Buf("w", {I(5), I(3)}), x = Buf("x", {I(3 * 6 * 18)}), out = Buf("out", {I(5), I(96)});
  Expr at = loop::Add(loop::Mul(k, I(6 * 18)), loop::Add(loop::Mul(loop::FloorDiv(p, I(16)), I(18)),
                                                         loop::FloorMod(p, I(16))));
  Expr dot = Sum(loop::Mul(loop::Load(w, {i, k}), loop::Load(x, {at})), k, I(3));
  auto f = Func({w, x, out}, 2, {}, Loop(i, I(5), Loop(p, I(96), loop::Store(out, {i, p}, dot))));
  auto g = Tile(f, 32, "TileLoops,VectorizeLoops");
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("for p_outer in [0, 3) {"));
  EXPECT_THAT(text, Not(HasSubstr("vectorized")));
  EXPECT_THAT(text, HasSubstr("x[ramp(k * 108 + ((p_outer * 32 + p_inner_vec_1 * 8) // 16 * 18 + "
                              "(p_outer * 32 + p_inner_vec_1 * 8) % 16), 1, 8)]"));
  ExpectSameResults(f, g);
}

TEST(TileLoops, ConfigKeyIsRegistered) {
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("tile.j", int64_t{16}));
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("tile.i", int64_t{6}));
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("tile.pack", true));
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("tile.k", int64_t{0}));
  auto f = Matmul(I(8), I(128), I(100), {});
  EXPECT_THAT(ErrorMessage([&] {
                test::RunLoopPipeline("TileLoops", f, {{"tile.k", int64_t{-1}}});
              }),
              HasSubstr("tile.k must not be negative"));
}

// ---- row blocks (tile.i) ----

// Few rows (at most 4 blocks) over several column tiles, tile.pack left unset: the column tiles
// run outermost (b streams through once), each over the row blocks and the row tail, then the
// tail columns.
TEST(TileLoops, FewRowBlocksRunInsideColumnTiles) {
  auto f = Matmul(I(9), I(72), I(5), {});
  auto g = test::RunLoopPipeline("TileLoops", f, {{"tile.j", int64_t{32}}, {"tile.i", int64_t{4}}});
  std::string text = BodyText(g);
  ASSERT_THAT(text, HasSubstr("for j_outer in [0, 2) {\n  for i_outer in [0, 2) {"));
  EXPECT_THAT(text, HasSubstr("for i in [8, 9) {"));
  EXPECT_THAT(text, HasSubstr("b[k, 64 + j_inner"));  // the 8 tail columns, after the tiles
  ExpectSameResults(f, g);
  // tile.pack set (to false) leaves the order to it: row blocks outermost.
  EXPECT_THAT(BodyText(Tile(f, 32, "TileLoops", 4, false)),
              HasSubstr("for i_outer in [0, 2) {\n  for j_outer in [0, 2) {"));
}

// Many row blocks reading, unpacked, an operand along j that is past L2's share (512 KiB: the
// stencil's x of 140000 floats is 560 KB, counted whole): the column tiles run outermost too,
// so x streams through once rather than once per row block. With x of 120000 floats the row
// blocks stay outermost.
TEST(TileLoops, LargeColumnOperandRunsRowBlocksInsideColumnTiles) {
  auto stencil = [](int64_t x_size) {
    Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
    Buffer w = Buf("w", {I(32), I(9)}), x = Buf("x", {I(x_size)}),
           out = Buf("out", {I(32), I(128)});
    Expr tap = loop::Add(j, loop::FloorMod(k, I(3)));
    return Func({w, x, out}, 2, {},
                Loop(i, I(32),
                     Loop(j, I(128),
                          loop::Store(out, {i, j},
                                      Sum(loop::Mul(loop::Load(w, {i, k}), loop::Load(x, {tap})), k,
                                          I(9))))));
  };
  test::PassConfig no_pack_key = {{"tile.j", int64_t{64}}, {"tile.i", int64_t{4}}};
  auto large = stencil(140000);
  auto g = test::RunLoopPipeline("TileLoops", large, no_pack_key);
  EXPECT_THAT(BodyText(g), HasSubstr("for j_outer in [0, 2) {\n  for i_outer in [0, 8) {"));
  ExpectSameResults(large, g);
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", stencil(120000), no_pack_key)),
              HasSubstr("for i_outer in [0, 8) {\n  for j_outer in [0, 2) {"));
}

// On a 512-bit target with the tile keys unset (64 columns x 4 rows), an operand read in place
// whose 64-column tile touches more than 3/4 of a 48 KiB L1 over the reduction, where a
// 32-column one fits in 2/3 of it, gets 32-column tiles of 8 rows (as many accumulators): 160
// taps 112 floats apart touch 40 KiB per 64 columns, 20 per 32. Nine taps (2.3 KiB) keep 64 x 4.
TEST(TileLoops, ColumnTileThatOverflowsL1IsHalvedWithTwiceTheRows) {
  auto taps = [](int64_t k_count) {
    Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
    Buffer w = Buf("w", {I(32), I(k_count)}), x = Buf("x", {I(k_count * 112 + 128)}),
           out = Buf("out", {I(32), I(128)});
    Expr at = loop::Add(loop::Mul(k, I(112)), j);
    return Func({w, x, out}, 2, {},
                Loop(i, I(32),
                     Loop(j, I(128),
                          loop::Store(out, {i, j},
                                      Sum(loop::Mul(loop::Load(w, {i, k}), loop::Load(x, {at})), k,
                                          I(k_count))))));
  };
  test::PassConfig avx512 = {{"target.vector_bits", int64_t{512}}};
  auto wide = taps(160);
  auto g = test::RunLoopPipeline("TileLoops", wide, avx512);
  EXPECT_THAT(BodyText(g), HasSubstr("j_outer in [0, 4)"));
  EXPECT_THAT(BodyText(g), HasSubstr("i_outer in [0, 4)"));
  ExpectSameResults(wide, g);
  std::string narrow = BodyText(test::RunLoopPipeline("TileLoops", taps(9), avx512));
  EXPECT_THAT(narrow, HasSubstr("j_outer in [0, 2)"));
  // Not halved: a full 4-vector tile, in blocks of kWideTileRows (32 = 5 x 6 + 2).
  EXPECT_THAT(narrow, HasSubstr("i_row in [0, 6) unrolled"));
  EXPECT_THAT(narrow, HasSubstr("i_outer in [0, 5)"));
}

// On a 512-bit target with the tile keys unset, a row block whose column operand is read at
// offsets a reduction loop moves by other than a multiple of 16 floats (a 3x3 conv's taps over
// a padded row: t % 3 + 34 * (t / 3), here as two loops; the output flat, as FlattenBuffers
// leaves it) gets 8 rows of 48 columns, every load feeding 8 FMAs: 128 columns are two full
// tiles and a 32-column tail. Row counts that are not a multiple of 8, aligned offsets (34 ->
// 48 floats a row, taps 16 apart) and an explicit tile.i keep 4 rows of 64, as does an operand
// read in one reduction loop.
TEST(TileLoops, UnalignedColumnReadsGetEightRowsOfThreeVectors) {
  auto conv = [](int64_t rows, int64_t row_stride, int64_t tap_stride) {
    Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), ky = loop::MakeVar("ky"),
        kx = loop::MakeVar("kx");
    Buffer w = Buf("w", {I(rows), I(3), I(3)}), x = Buf("x", {I(3 * row_stride + 256)}),
           out = Buf("out", {I(rows * 128)});
    Expr at = loop::Add(j, loop::Add(loop::Mul(ky, I(row_stride)), loop::Mul(kx, I(tap_stride))));
    Expr dot = loop::Reduce(loop::ReduceKind::kSum,
                            loop::Mul(loop::Load(w, {i, ky, kx}), loop::Load(x, {at})),
                            {{ky, I(3)}, {kx, I(3)}});
    return Func({w, x, out}, 2, {},
                Loop(i, I(rows),
                     Loop(j, I(128), loop::Store(out, {loop::Add(loop::Mul(i, I(128)), j)}, dot))));
  };
  test::PassConfig avx512 = {{"target.vector_bits", int64_t{512}}};
  auto f = conv(32, 34, 1);
  auto g = test::RunLoopPipeline("TileLoops", f, avx512);
  std::string text = BodyText(g);
  EXPECT_THAT(text, HasSubstr("i_outer in [0, 4)"));
  EXPECT_THAT(text, HasSubstr("j_outer in [0, 2)"));
  EXPECT_THAT(text, HasSubstr("i_row in [0, 8) unrolled"));
  EXPECT_THAT(text, HasSubstr("j_inner in [0, 48)"));
  EXPECT_THAT(text, HasSubstr("j_inner_1 in [0, 32)"));
  ExpectSameResults(f, g);
  // With row blocks outermost (64 rows), the tail tile's column variable is its own, so the
  // row blocks' stores keep to their rows and the row block loop runs in parallel.
  test::PassConfig avx512_parallel = {{"target.vector_bits", int64_t{512}},
                                      {"parallelize.min_work", int64_t{1}}};
  auto tall = conv(64, 34, 1);
  auto p = test::RunLoopPipeline("TileLoops, ParallelizeLoops", tall, avx512_parallel);
  EXPECT_THAT(BodyText(p), HasSubstr("for i_outer in [0, 8) parallel {"));
  ExpectSameResults(tall, p);
  for (auto [rows, row_stride, tap_stride] : {std::tuple{int64_t{28}, int64_t{34}, int64_t{1}},
                                              std::tuple{int64_t{32}, int64_t{48}, int64_t{16}}}) {
    std::string kept =
        BodyText(test::RunLoopPipeline("TileLoops", conv(rows, row_stride, tap_stride), avx512));
    EXPECT_THAT(kept, HasSubstr("i_row in [0, 6) unrolled")) << rows << " " << row_stride;
    EXPECT_THAT(kept, HasSubstr("j_inner in [0, 64)")) << rows << " " << row_stride;
  }
  // One reduction loop over rows 34 floats apart (a matmul's operand): FindPackedLoads may copy
  // it into aligned panels, so the block stays.
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer w = Buf("w", {I(32), I(9)}), x = Buf("x", {I(9 * 34 + 128)}),
         out = Buf("out", {I(32), I(128)});
  Expr row = loop::Add(loop::Mul(k, I(34)), j);
  auto rows = Func(
      {w, x, out}, 2, {},
      Loop(
          i, I(32),
          Loop(j, I(128),
               loop::Store(out, {i, j},
                           Sum(loop::Mul(loop::Load(w, {i, k}), loop::Load(x, {row})), k, I(9))))));
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", rows, avx512)),
              HasSubstr("i_row in [0, 6) unrolled"));
  test::PassConfig explicit_rows = {{"target.vector_bits", int64_t{512}}, {"tile.i", int64_t{4}}};
  EXPECT_THAT(BodyText(test::RunLoopPipeline("TileLoops", f, explicit_rows)),
              HasSubstr("i_row in [0, 4) unrolled"));
}

// Rows in blocks of tile.i: one accumulator block of rows x Tj, an unrolled row loop around
// each j_inner loop (so one row of b feeds every row of the block), and the rows left as one
// shorter block (alone, a row has too few accumulators to hide the FMA latency); a single row
// left over runs as a row loop.
TEST(TileLoops, RowBlocksAndARowTail) {
  auto f = Matmul(I(7), I(32), I(8), {});
  auto g = Tile(f, 32, "TileLoops", 4);
  EXPECT_EQ(BodyText(g), R"(alloc acc0: f32[128] local
for i_row in [0, 4) unrolled {
  for j_inner in [0, 32) {
    acc0[i_row * 32 + j_inner] = 0.0f
  }
}
for k in [0, 8) {
  for i_row in [0, 4) unrolled {
    for j_inner in [0, 32) {
      acc0[i_row * 32 + j_inner] = acc0[i_row * 32 + j_inner] + a[i_row, k] * b[k, j_inner]
    }
  }
}
for i_row in [0, 4) unrolled {
  for j_inner in [0, 32) {
    out[i_row, j_inner] = max(acc0[i_row * 32 + j_inner] + bias[j_inner], 0.0f)
  }
}
free acc0
alloc acc0_1: f32[96] local
for i_rest in [0, 3) unrolled {
  for j_inner_1 in [0, 32) {
    acc0_1[i_rest * 32 + j_inner_1] = 0.0f
  }
}
for k in [0, 8) {
  for i_rest in [0, 3) unrolled {
    for j_inner_1 in [0, 32) {
      acc0_1[i_rest * 32 + j_inner_1] = acc0_1[i_rest * 32 + j_inner_1] + a[4 + i_rest, k] * b[k, j_inner_1]
    }
  }
}
for i_rest in [0, 3) unrolled {
  for j_inner_1 in [0, 32) {
    out[4 + i_rest, j_inner_1] = max(acc0_1[i_rest * 32 + j_inner_1] + bias[j_inner_1], 0.0f)
  }
}
free acc0_1
)");
  ExpectSameResults(f, g);
  auto f9 = Matmul(I(9), I(32), I(8), {});
  auto g9 = Tile(f9, 32, "TileLoops", 4);
  EXPECT_THAT(BodyText(g9), HasSubstr("for i in [8, 9) {"));
  ExpectSameResults(f9, g9);
}

// A symbolic row count leaves a symbolic tail (m % 4 rows): a single row alone, else one
// block of 2, 3 or 4 rows, the smallest that holds it, its rows past m clamped to the last (min).
TEST(TileLoops, SymbolicRowsGetASymbolicRowTail) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  auto f = Matmul(m, n, I(5), {m, n});
  auto g = Tile(f, 16, "TileLoops", 4);
  EXPECT_EQ(BodyText(g), R"(for i_outer in [0, m // 4) {
  for j_outer in [0, n // 16) {
    alloc acc0: f32[64] local
    for i_row in [0, 4) unrolled {
      for j_inner in [0, 16) {
        acc0[i_row * 16 + j_inner] = 0.0f
      }
    }
    for k in [0, 5) {
      for i_row in [0, 4) unrolled {
        for j_inner in [0, 16) {
          acc0[i_row * 16 + j_inner] = acc0[i_row * 16 + j_inner] + a[i_outer * 4 + i_row, k] * b[k, j_outer * 16 + j_inner]
        }
      }
    }
    for i_row in [0, 4) unrolled {
      for j_inner in [0, 16) {
        out[i_outer * 4 + i_row, j_outer * 16 + j_inner] = max(acc0[i_row * 16 + j_inner] + bias[j_outer * 16 + j_inner], 0.0f)
      }
    }
    free acc0
  }
  alloc acc0_1: f32[64] local
  for i_row in [0, 4) unrolled {
    for j_inner_1 in [0, n % 16) {
      acc0_1[i_row * 16 + j_inner_1] = 0.0f
    }
  }
  for k in [0, 5) {
    for i_row in [0, 4) unrolled {
      for j_inner_1 in [0, n % 16) {
        acc0_1[i_row * 16 + j_inner_1] = acc0_1[i_row * 16 + j_inner_1] + a[i_outer * 4 + i_row, k] * b[k, n // 16 * 16 + j_inner_1]
      }
    }
  }
  for i_row in [0, 4) unrolled {
    for j_inner_1 in [0, n % 16) {
      out[i_outer * 4 + i_row, n // 16 * 16 + j_inner_1] = max(acc0_1[i_row * 16 + j_inner_1] + bias[n // 16 * 16 + j_inner_1], 0.0f)
    }
  }
  free acc0_1
}
if (m % 4 != 0) {
  if (m % 4 == 1) {
    for i in [m // 4 * 4, m // 4 * 4 + 1) {
      for j_outer_1 in [0, n // 16) {
        alloc acc0_2: f32[16] local
        for j_inner_2 in [0, 16) {
          acc0_2[j_inner_2] = 0.0f
        }
        for k in [0, 5) {
          for j_inner_2 in [0, 16) {
            acc0_2[j_inner_2] = acc0_2[j_inner_2] + a[i, k] * b[k, j_outer_1 * 16 + j_inner_2]
          }
        }
        for j_inner_2 in [0, 16) {
          out[i, j_outer_1 * 16 + j_inner_2] = max(acc0_2[j_inner_2] + bias[j_outer_1 * 16 + j_inner_2], 0.0f)
        }
        free acc0_2
      }
      alloc acc0_3: f32[16] local
      for j_inner_3 in [0, n % 16) {
        acc0_3[j_inner_3] = 0.0f
      }
      for k in [0, 5) {
        for j_inner_3 in [0, n % 16) {
          acc0_3[j_inner_3] = acc0_3[j_inner_3] + a[i, k] * b[k, n // 16 * 16 + j_inner_3]
        }
      }
      for j_inner_3 in [0, n % 16) {
        out[i, n // 16 * 16 + j_inner_3] = max(acc0_3[j_inner_3] + bias[n // 16 * 16 + j_inner_3], 0.0f)
      }
      free acc0_3
    }
  } else {
    if (m % 4 <= 2) {
      for j_outer_2 in [0, n // 16) {
        alloc acc0_4: f32[32] local
        for i_rest in [0, 2) unrolled {
          for j_inner_4 in [0, 16) {
            acc0_4[i_rest * 16 + j_inner_4] = 0.0f
          }
        }
        for k in [0, 5) {
          for i_rest in [0, 2) unrolled {
            for j_inner_4 in [0, 16) {
              acc0_4[i_rest * 16 + j_inner_4] = acc0_4[i_rest * 16 + j_inner_4] + a[min(m // 4 * 4 + i_rest, m - 1), k] * b[k, j_outer_2 * 16 + j_inner_4]
            }
          }
        }
        for i_rest in [0, 2) unrolled {
          for j_inner_4 in [0, 16) {
            out[min(m // 4 * 4 + i_rest, m - 1), j_outer_2 * 16 + j_inner_4] = max(acc0_4[i_rest * 16 + j_inner_4] + bias[j_outer_2 * 16 + j_inner_4], 0.0f)
          }
        }
        free acc0_4
      }
      alloc acc0_5: f32[32] local
      for i_rest in [0, 2) unrolled {
        for j_inner_5 in [0, n % 16) {
          acc0_5[i_rest * 16 + j_inner_5] = 0.0f
        }
      }
      for k in [0, 5) {
        for i_rest in [0, 2) unrolled {
          for j_inner_5 in [0, n % 16) {
            acc0_5[i_rest * 16 + j_inner_5] = acc0_5[i_rest * 16 + j_inner_5] + a[min(m // 4 * 4 + i_rest, m - 1), k] * b[k, n // 16 * 16 + j_inner_5]
          }
        }
      }
      for i_rest in [0, 2) unrolled {
        for j_inner_5 in [0, n % 16) {
          out[min(m // 4 * 4 + i_rest, m - 1), n // 16 * 16 + j_inner_5] = max(acc0_5[i_rest * 16 + j_inner_5] + bias[n // 16 * 16 + j_inner_5], 0.0f)
        }
      }
      free acc0_5
    } else {
      if (m % 4 <= 3) {
        for j_outer_3 in [0, n // 16) {
          alloc acc0_6: f32[48] local
          for i_rest_1 in [0, 3) unrolled {
            for j_inner_6 in [0, 16) {
              acc0_6[i_rest_1 * 16 + j_inner_6] = 0.0f
            }
          }
          for k in [0, 5) {
            for i_rest_1 in [0, 3) unrolled {
              for j_inner_6 in [0, 16) {
                acc0_6[i_rest_1 * 16 + j_inner_6] = acc0_6[i_rest_1 * 16 + j_inner_6] + a[min(m // 4 * 4 + i_rest_1, m - 1), k] * b[k, j_outer_3 * 16 + j_inner_6]
              }
            }
          }
          for i_rest_1 in [0, 3) unrolled {
            for j_inner_6 in [0, 16) {
              out[min(m // 4 * 4 + i_rest_1, m - 1), j_outer_3 * 16 + j_inner_6] = max(acc0_6[i_rest_1 * 16 + j_inner_6] + bias[j_outer_3 * 16 + j_inner_6], 0.0f)
            }
          }
          free acc0_6
        }
        alloc acc0_7: f32[48] local
        for i_rest_1 in [0, 3) unrolled {
          for j_inner_7 in [0, n % 16) {
            acc0_7[i_rest_1 * 16 + j_inner_7] = 0.0f
          }
        }
        for k in [0, 5) {
          for i_rest_1 in [0, 3) unrolled {
            for j_inner_7 in [0, n % 16) {
              acc0_7[i_rest_1 * 16 + j_inner_7] = acc0_7[i_rest_1 * 16 + j_inner_7] + a[min(m // 4 * 4 + i_rest_1, m - 1), k] * b[k, n // 16 * 16 + j_inner_7]
            }
          }
        }
        for i_rest_1 in [0, 3) unrolled {
          for j_inner_7 in [0, n % 16) {
            out[min(m // 4 * 4 + i_rest_1, m - 1), n // 16 * 16 + j_inner_7] = max(acc0_7[i_rest_1 * 16 + j_inner_7] + bias[n // 16 * 16 + j_inner_7], 0.0f)
          }
        }
        free acc0_7
      } else {
        for j_outer_4 in [0, n // 16) {
          alloc acc0_8: f32[64] local
          for i_rest_2 in [0, 4) unrolled {
            for j_inner_8 in [0, 16) {
              acc0_8[i_rest_2 * 16 + j_inner_8] = 0.0f
            }
          }
          for k in [0, 5) {
            for i_rest_2 in [0, 4) unrolled {
              for j_inner_8 in [0, 16) {
                acc0_8[i_rest_2 * 16 + j_inner_8] = acc0_8[i_rest_2 * 16 + j_inner_8] + a[min(m // 4 * 4 + i_rest_2, m - 1), k] * b[k, j_outer_4 * 16 + j_inner_8]
              }
            }
          }
          for i_rest_2 in [0, 4) unrolled {
            for j_inner_8 in [0, 16) {
              out[min(m // 4 * 4 + i_rest_2, m - 1), j_outer_4 * 16 + j_inner_8] = max(acc0_8[i_rest_2 * 16 + j_inner_8] + bias[j_outer_4 * 16 + j_inner_8], 0.0f)
            }
          }
          free acc0_8
        }
        alloc acc0_9: f32[64] local
        for i_rest_2 in [0, 4) unrolled {
          for j_inner_9 in [0, n % 16) {
            acc0_9[i_rest_2 * 16 + j_inner_9] = 0.0f
          }
        }
        for k in [0, 5) {
          for i_rest_2 in [0, 4) unrolled {
            for j_inner_9 in [0, n % 16) {
              acc0_9[i_rest_2 * 16 + j_inner_9] = acc0_9[i_rest_2 * 16 + j_inner_9] + a[min(m // 4 * 4 + i_rest_2, m - 1), k] * b[k, n // 16 * 16 + j_inner_9]
            }
          }
        }
        for i_rest_2 in [0, 4) unrolled {
          for j_inner_9 in [0, n % 16) {
            out[min(m // 4 * 4 + i_rest_2, m - 1), n // 16 * 16 + j_inner_9] = max(acc0_9[i_rest_2 * 16 + j_inner_9] + bias[n // 16 * 16 + j_inner_9], 0.0f)
          }
        }
        free acc0_9
      }
    }
  }
}
)");
  ExpectSameResults(f, g, {{1, 1}, {4, 16}, {7, 17}, {13, 35}, {0, 3}, {6, 20}, {3, 16}});
}

// The sizes of the unrolled row blocks that a symbolic row tail may take, from the printed
// kernel (`for i_rest... in [0, K) unrolled`).
std::set<int64_t> RowBlockSizes(const loop::PrimFunc& g) {
  std::set<int64_t> sizes;
  const std::string text = BodyText(g);
  const std::regex block(R"(for i_rest\w* in \[0, (\d+)\) unrolled)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), block);
       it != std::sregex_iterator(); ++it)
    sizes.insert(std::stoll((*it)[1].str()));
  return sizes;
}

// A row count that is one symbol (a batch, a sequence) is often small, all of its work in the
// tail: its tail blocks come in finer steps than a product's (an image's pixels), whose blocks
// double. Tails of either take the untiled kernel's results.
TEST(TileLoops, LoneSymbolRowTailsComeInFinerBlocksThanProducts) {
  Var m = loop::MakeVar("m"), p = loop::MakeVar("p"), q = loop::MakeVar("q");
  auto lone = Matmul(m, I(16), I(5), {m});
  auto lone_tiled = Tile(lone, 16, "TileLoops", 12);
  EXPECT_EQ(RowBlockSizes(lone_tiled), (std::set<int64_t>{2, 3, 4, 6, 8, 10, 12}));
  // Tails of 1, 5, 7, 11, 2 and 9 rows (each run compiles both kernels: a few counts).
  ExpectSameResults(lone, lone_tiled, {{1}, {5}, {7}, {11}, {14}, {21}});

  auto product = Matmul(loop::Mul(p, q), I(16), I(5), {p, q});
  auto product_tiled = Tile(product, 16, "TileLoops", 12);
  EXPECT_EQ(RowBlockSizes(product_tiled), (std::set<int64_t>{2, 4, 8, 12}));
  ExpectSameResults(product, product_tiled, {{1, 5}, {3, 3}, {1, 11}});
}

// Odd row counts through the whole loop pipeline (parallel row blocks, vector columns,
// unrolled rows): the same results bit for bit, with and without a column tail.
TEST(TileLoops, RowBlocksThroughThePipeline) {
  const std::string pipeline =
      "TileLoops,ParallelizeLoops,VectorizeLoops,UnrollLoops,FlattenBuffers,LoopSimplify";
  for (int64_t m : {7, 13}) {
    for (int64_t n : {64, 70}) {
      auto f = Matmul(I(m), I(n), I(19), {});
      for (int64_t tile_j : {32, 64}) {
        auto g = Tile(f, tile_j, pipeline, 4);
        ExpectSameResults(f, g);
      }
    }
  }
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  auto f = Matmul(m, n, I(33), {m, n});
  auto g = Tile(f, 32, pipeline, 4);
  ExpectSameResults(f, g, {{1, 1}, {7, 64}, {13, 71}, {8, 130}});
  EXPECT_THAT(ErrorMessage([&] { Tile(f, 32, "TileLoops", -1); }),
              HasSubstr("tile.i must not be negative"));
}

}  // namespace
}  // namespace kiln
