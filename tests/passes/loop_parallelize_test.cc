// ParallelizeLoops: golden text for the loops it makes parallel (symbolic extents, enough
// constant work, collapsed pairs, reductions with private accumulators), the safety check on
// the loops it must not touch, the configuration, and the kernels compiled before and after
// agreeing bit for bit on random data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "common/loop_test_util.h"
#include "common/test_util.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"
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

Expr I(int64_t v) {
  return loop::IntImm(v);
}
Expr F(double v) {
  return loop::FloatImm(v);
}
Buffer Buf(const std::string& name, std::vector<Expr> shape) {
  return loop::MakeBuffer(name, DType::kFloat32, std::move(shape));
}
Stmt Loop(const Var& v, const Expr& extent, Stmt body) {
  return loop::For(v, I(0), extent, ForKind::kSerial, std::move(body));
}

// (A named constant rather than a literal: GCC 12 warns falsely about assigning a literal to a
// std::string in an inlined function.)
const std::string kName = "k";

// A kernel, after LowerReductions as in the compiler.
loop::PrimFunc Func(std::vector<Buffer> buffers, int num_inputs, std::vector<Var> scalars,
                    Stmt body) {
  loop::PrimFunc lowered = LowerReductions(test::MakePrimFunc(
      std::move(buffers), std::move(scalars), std::move(body), kName, num_inputs));
  loop::Verify(lowered, /*allow_reduce=*/false);
  return lowered;
}

// Runs ParallelizeLoops through the pass manager with `config`, and checks the result verifies.
loop::PrimFunc Parallelize(const loop::PrimFunc& f,
                           const std::map<std::string, int64_t>& config = {}) {
  test::PassConfig attrs;
  for (const auto& [key, value] : config) attrs.emplace(key, value);
  return test::RunLoopPass("ParallelizeLoops", f, attrs);
}

// Seeds and value range fixed per file: the cases were written against this data.
void ExpectSameResults(const loop::PrimFunc& before, const loop::PrimFunc& after,
                       const std::vector<std::vector<int64_t>>& scalar_sets = {{}}) {
  test::ExpectSameResults(before, after, {41, -3, 3}, scalar_sets);
}

// out[i, j] = a[i, j] + b[j] over [rows, cols).
loop::PrimFunc AddRows(const Expr& rows, const Expr& cols, std::vector<Var> scalars) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer a = Buf("a", {rows, cols}), b = Buf("b", {cols}), out = Buf("out", {rows, cols});
  return Func(
      {a, b, out}, 2, std::move(scalars),
      Loop(i, rows,
           Loop(j, cols,
                loop::Store(out, {i, j}, loop::Add(loop::Load(a, {i, j}), loop::Load(b, {j}))))));
}

// ---- what becomes parallel ----

// The pass header's example: a shape-generic kernel.
TEST(ParallelizeLoops, SymbolicExtentIsParallel) {
  Var n = loop::MakeVar("n");
  auto f = AddRows(n, I(16), {n});
  auto g = Parallelize(f);
  EXPECT_EQ(BodyText(g), R"(for i in [0, n) parallel {
  for j in [0, 16) {
    out[i, j] = a[i, j] + b[j]
  }
}
)");
  ExpectSameResults(f, g, {{1}, {2}, {1000}});
}

TEST(ParallelizeLoops, ConstantExtentNeedsEnoughWork) {
  // 64 * 256 = 16384 elements: exactly the default threshold.
  auto big = AddRows(I(64), I(256), {});
  auto g = Parallelize(big);
  EXPECT_THAT(BodyText(g), HasSubstr("for i in [0, 64) parallel {\n  for j in [0, 256) {"));
  ExpectSameResults(big, g);
  // One element less per row is not enough; a lower threshold makes it so.
  auto small = AddRows(I(64), I(255), {});
  EXPECT_EQ(loop::Print(Parallelize(small)), loop::Print(small));
  EXPECT_THAT(loop::Print(Parallelize(small, {{"parallelize.min_work", 100}})),
              HasSubstr("parallel"));
  // A symbolic loop inside counts as large.
  Var n = loop::MakeVar("n");
  auto inner_symbolic = AddRows(I(70), n, {n});
  EXPECT_THAT(BodyText(Parallelize(inner_symbolic)), HasSubstr("for i in [0, 70) parallel {"));
}

// A reduction whose accumulator is allocated inside the row loop: each row has its own.
TEST(ParallelizeLoops, PrivateAccumulatorsAreSafe) {
  Var m = loop::MakeVar("m"), i = loop::MakeVar("i"), j = loop::MakeVar("j"),
      k = loop::MakeVar("k");
  Buffer a = Buf("a", {m, I(24)}), b = Buf("b", {I(24), I(40)}), out = Buf("out", {m, I(40)});
  Expr dot = loop::Reduce(loop::ReduceKind::kSum,
                          loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), {{k, I(24)}});
  auto f = Func({a, b, out}, 2, {m}, Loop(i, m, Loop(j, I(40), loop::Store(out, {i, j}, dot))));
  // (Not collapsed, to see the accumulator where the reduction put it.)
  auto g = Parallelize(f, {{"parallelize.collapse_below", 0}});
  EXPECT_EQ(BodyText(g), R"(for i in [0, m) parallel {
  for j in [0, 40) {
    alloc acc0: f32[1] local
    acc0[0] = 0.0f
    for k in [0, 24) {
      acc0[0] = acc0[0] + a[i, k] * b[k, j]
    }
    out[i, j] = acc0[0]
    free acc0
  }
}
)");
  ExpectSameResults(f, g, {{1}, {33}});
}

// A few outer iterations over a loop that is not the innermost: the two fuse.
TEST(ParallelizeLoops, SmallOuterExtentCollapses) {
  Var b = loop::MakeVar("b"), i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer x = Buf("x", {I(2), I(128), I(64)}), out = Buf("out", {I(2), I(128), I(64)});
  auto f = Func(
      {x, out}, 1, {},
      Loop(b, I(2),
           Loop(i, I(128),
                Loop(j, I(64),
                     loop::Store(out, {b, i, j}, loop::Mul(loop::Load(x, {b, i, j}), F(3)))))));
  auto g = Parallelize(f);
  EXPECT_EQ(BodyText(g), R"(for b_i in [0, 256) parallel {
  let b = b_i // 128;
  let i = b_i % 128;
  for j in [0, 64) {
    out[b, i, j] = x[b, i, j] * 3.0f
  }
}
)");
  ExpectSameResults(f, g);
  EXPECT_THAT(BodyText(Parallelize(f, {{"parallelize.collapse_below", 0}})),
              HasSubstr("for b in [0, 2) parallel {"));

  // With a symbolic inner extent.
  Var n = loop::MakeVar("n");
  Buffer xs = Buf("x", {I(3), n, I(8)}), outs = Buf("out", {I(3), n, I(8)});
  auto fs = Func(
      {xs, outs}, 1, {n},
      Loop(b, I(3),
           Loop(i, n, Loop(j, I(8), loop::Store(outs, {b, i, j}, loop::Load(xs, {b, i, j}))))));
  auto gs = Parallelize(fs);
  EXPECT_THAT(
      BodyText(gs),
      HasSubstr("for b_i in [0, 3 * n) parallel {\n  let b = b_i // n;\n  let i = b_i % n;"));
  ExpectSameResults(fs, gs, {{1}, {5}});

  // The innermost loop is not fused: it keeps its unit stride for the vectorizer.
  auto two_d = AddRows(I(4), I(8192), {});
  EXPECT_THAT(BodyText(Parallelize(two_d)),
              HasSubstr("for i in [0, 4) parallel {\n  for j in [0, 8192) {"));
}

// A symbolic outer loop (a generic kernel's batch, often 1) collapses with the loop inside it
// like a small constant one: a batch-1 product still splits its column tiles among threads.
TEST(ParallelizeLoops, SymbolicOuterExtentCollapses) {
  Var n = loop::MakeVar("n"), b = loop::MakeVar("b"), i = loop::MakeVar("i"),
      j = loop::MakeVar("j");
  Buffer x = Buf("x", {n, I(21), I(48)}), out = Buf("out", {n, I(21), I(48)});
  auto f = Func(
      {x, out}, 1, {n},
      Loop(b, n,
           Loop(i, I(21),
                Loop(j, I(48),
                     loop::Store(out, {b, i, j}, loop::Mul(loop::Load(x, {b, i, j}), F(3)))))));
  auto g = Parallelize(f);
  EXPECT_EQ(BodyText(g), R"(for b_i in [0, n * 21) parallel {
  let b = b_i // 21;
  let i = b_i % 21;
  for j in [0, 48) {
    out[b, i, j] = x[b, i, j] * 3.0f
  }
}
)");
  ExpectSameResults(f, g, {{1}, {2}, {7}});
  EXPECT_THAT(BodyText(Parallelize(f, {{"parallelize.collapse_below", 0}})),
              HasSubstr("for b in [0, n) parallel {"));
}

// A symbolic outer loop over several nests (a generic kernel's batch loop around a product and
// its epilogue) cannot collapse: it is parallel, and so are the nests inside (the runtime runs
// them on the threads when the outer loop has one iteration, serially inside its chunks when
// it has more).
TEST(ParallelizeLoops, NestsInsideASymbolicOuterLoopAreParallelToo) {
  Var n = loop::MakeVar("n"), m = loop::MakeVar("m"), b = loop::MakeVar("b"),
      i = loop::MakeVar("i"), j = loop::MakeVar("j"), i2 = loop::MakeVar("i2"),
      j2 = loop::MakeVar("j2");
  Buffer x = Buf("x", {n, m, I(16)}), out = Buf("out", {n, m, I(16)});
  Buffer t = loop::MakeBuffer("t", DType::kFloat32, {m, I(16)}, loop::BufferNode::Scope::kLocal);
  auto f = Func(
      {x, out}, 1, {n, m},
      Loop(b, n,
           loop::Seq(
               {loop::Alloc(t),
                Loop(i, m,
                     Loop(j, I(16),
                          loop::Store(t, {i, j}, loop::Mul(loop::Load(x, {b, i, j}), F(2))))),
                Loop(i2, m,
                     Loop(j2, I(16),
                          loop::Store(out, {b, i2, j2}, loop::Add(loop::Load(t, {i2, j2}), F(1))))),
                loop::Free(t)})));
  auto g = Parallelize(f);
  EXPECT_EQ(BodyText(g), R"(for b in [0, n) parallel {
  alloc t: f32[m, 16] local
  for i in [0, m) parallel {
    for j in [0, 16) {
      t[i, j] = x[b, i, j] * 2.0f
    }
  }
  for i2 in [0, m) parallel {
    for j2 in [0, 16) {
      out[b, i2, j2] = t[i2, j2] + 1.0f
    }
  }
  free t
}
)");
  ExpectSameResults(f, g, {{1, 1}, {1, 9}, {3, 5}, {4, 2}, {9, 3}});
  // Inside a constant outer loop, nothing is nested: its extent is known when it is compiled.
  Buffer out2 = Buf("out", {I(2), m, I(2)});
  auto c = Func({out2}, 0, {m},
                Loop(b, I(2),
                     loop::Seq({Loop(i, m, loop::Store(out2, {b, i, I(0)}, F(1))),
                                Loop(i2, m, loop::Store(out2, {b, i2, I(1)}, F(2)))})));
  EXPECT_EQ(BodyText(Parallelize(c)), R"(for b in [0, 2) parallel {
  for i in [0, m) {
    out[b, i, 0] = 1.0f
  }
  for i2 in [0, m) {
    out[b, i2, 1] = 2.0f
  }
}
)");
}

// A symbolic outer loop whose iterations cannot be told apart (here a clamped write, as the
// column tails of a generic conv's padded result) stays serial; the nests inside that run over
// an image (a symbolic extent inside) are parallel, a chunk a row where the image has min_work
// stores, else one chunk (the calling thread runs it); the small ones stay serial. A kernel
// for one thread is left as it was.
TEST(ParallelizeLoops, ImageNestsInsideAnUnprovenSymbolicLoopRunInChunks) {
  Var n = loop::MakeVar("n"), h = loop::MakeVar("h"), w = loop::MakeVar("w"),
      b = loop::MakeVar("b"), j = loop::MakeVar("j"), r = loop::MakeVar("r"),
      c = loop::MakeVar("c");
  Buffer x = Buf("x", {n, h, w}), out = Buf("out", {n, h, w});
  Buffer side = Buf("side", {loop::Mul(n, I(4))});
  Expr clamped = loop::Min(loop::Add(loop::Mul(b, I(4)), j), loop::Sub(loop::Mul(n, I(4)), I(1)));
  auto f =
      Func({x, side, out}, 1, {n, h, w},
           Loop(b, n,
                loop::Seq({Loop(j, I(4), loop::Store(side, {clamped}, F(1))),
                           Loop(r, h,
                                Loop(c, w,
                                     loop::Store(out, {b, r, c},
                                                 loop::Mul(loop::Load(x, {b, r, c}), F(2)))))})));
  auto g = Parallelize(f, {{"parallelize.min_work", 8}});
  EXPECT_EQ(BodyText(g), R"(for b in [0, n) {
  for j in [0, 4) {
    side[min(b * 4 + j, n * 4 - 1)] = 1.0f
  }
  let r_chunks = max(min(max(h, 0) * max(w, 0) // 8, 1) * max(h, 0), 1);
  for r_chunk in [0, r_chunks) parallel {
    for r in [r_chunk * max(h, 0) // r_chunks, r_chunk * max(h, 0) // r_chunks + ((r_chunk + 1) * max(h, 0) // r_chunks - r_chunk * max(h, 0) // r_chunks)) {
      for c in [0, w) {
        out[b, r, c] = x[b, r, c] * 2.0f
      }
    }
  }
}
)");
  // One chunk (a small image), a few, one a row, uneven, and several images.
  ExpectSameResults(f, g, {{1, 1, 1}, {1, 3, 2}, {1, 7, 5}, {1, 13, 64}, {3, 9, 4}, {2, 1, 100}});
  EXPECT_THAT(BodyText(Parallelize(f)), HasSubstr("// 16384"));  // the default
  EXPECT_EQ(loop::Print(Parallelize(f, {{"target.threads", 1}})), loop::Print(f));
  EXPECT_THAT(BodyText(Parallelize(f, {{"target.threads", 2}})), HasSubstr("parallel"));
}

// Every top-level nest is considered on its own; a local buffer written by rows is safe.
TEST(ParallelizeLoops, EachNestOnItsOwn) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), j = loop::MakeVar("j"),
      i2 = loop::MakeVar("i2");
  Buffer x = Buf("x", {n, I(4)}), out = Buf("out", {n, I(4)});
  Buffer t = loop::MakeBuffer("t", DType::kFloat32, {n, I(4)}, loop::BufferNode::Scope::kLocal);
  Buffer tiny = loop::MakeBuffer("tiny", DType::kFloat32, {I(2)}, loop::BufferNode::Scope::kLocal);
  auto f =
      Func({x, out}, 1, {n},
           loop::Seq(
               {loop::Alloc(t), loop::Alloc(tiny),
                Loop(i, n,
                     Loop(j, I(4), loop::Store(t, {i, j}, loop::Mul(loop::Load(x, {i, j}), F(2))))),
                Loop(i2, I(2), loop::Store(tiny, {i2}, F(1))),
                Loop(i, n,
                     Loop(j, I(4),
                          loop::Store(out, {i, j},
                                      loop::Add(loop::Load(t, {i, j}), loop::Load(tiny, {I(1)}))))),
                loop::Free(tiny), loop::Free(t)}));
  auto g = Parallelize(f);
  EXPECT_EQ(BodyText(g), R"(alloc t: f32[n, 4] local
alloc tiny: f32[2] local
for i in [0, n) parallel {
  for j in [0, 4) {
    t[i, j] = x[i, j] * 2.0f
  }
}
for i2 in [0, 2) {
  tiny[i2] = 1.0f
}
for i in [0, n) parallel {
  for j in [0, 4) {
    out[i, j] = t[i, j] + tiny[1]
  }
}
free tiny
free t
)");
  ExpectSameResults(f, g, {{1}, {9}});
}

// ---- the safety check ----

TEST(ParallelizeLoops, SharedWritesStaySerial) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer x = Buf("x", {n}), out = Buf("out", {n});
  Buffer acc = loop::MakeBuffer("acc", DType::kFloat32, {I(1)}, loop::BufferNode::Scope::kLocal);
  auto unchanged = [](const loop::PrimFunc& f) {
    EXPECT_EQ(loop::Print(Parallelize(f)), loop::Print(f));
  };

  // An accumulator declared outside the loop, updated by every iteration.
  unchanged(Func(
      {x, out}, 1, {n},
      loop::Seq(
          {loop::Alloc(acc), loop::Store(acc, {I(0)}, F(0)),
           Loop(i, n,
                loop::Store(acc, {I(0)}, loop::Add(loop::Load(acc, {I(0)}), loop::Load(x, {i})))),
           loop::Store(out, {I(0)}, loop::Load(acc, {I(0)})), loop::Free(acc)})));
  // Reading what the previous iteration wrote.
  unchanged(Func({x, out}, 1, {n},
                 Loop(i, n,
                      loop::Store(out, {i},
                                  loop::Add(loop::Load(out, {loop::Max(loop::Sub(i, I(1)), I(0))}),
                                            loop::Load(x, {i}))))));
  unchanged(
      Func({x, out}, 1, {n},
           Loop(i, n, loop::Store(out, {i}, loop::Load(out, {loop::Sub(n, loop::Add(i, I(1)))})))));
  // Overlapping writes: out[i + j] is written by several i.
  Buffer wide = Buf("wide", {loop::Add(n, I(4))});
  unchanged(
      Func({x, wide}, 1, {n},
           Loop(i, n, Loop(j, I(4), loop::Store(wide, {loop::Add(i, j)}, loop::Load(x, {i}))))));
  // Indirect writes (a scatter).
  Buffer idx = loop::MakeBuffer("idx", DType::kInt64, {n});
  unchanged(Func({x, idx, out}, 2, {n},
                 Loop(i, n, loop::Store(out, {loop::Load(idx, {i})}, loop::Load(x, {i})))));
  // Not injective: out[i // 2].
  unchanged(Func({x, out}, 1, {n},
                 Loop(i, n, loop::Store(out, {loop::FloorDiv(i, I(2))}, loop::Load(x, {i})))));

  // Allowed: a stride, and an offset shared by every access.
  Buffer even = Buf("even", {loop::Mul(n, I(2))});
  auto strided = Func(
      {x, even}, 1, {n},
      Loop(i, n, loop::Store(even, {loop::Add(loop::Mul(i, I(2)), I(1))}, loop::Load(x, {i}))));
  EXPECT_THAT(BodyText(Parallelize(strided)), HasSubstr("parallel"));
  ExpectSameResults(strided, Parallelize(strided), {{1}, {100}});
  auto in_place =
      Func({x, out}, 1, {n},
           Loop(i, n, loop::Store(out, {i}, loop::Add(loop::Load(out, {i}), loop::Load(x, {i})))));
  EXPECT_THAT(BodyText(Parallelize(in_place)), HasSubstr("parallel"));
}

// Windows: an inner loop variable with constant bounds may add to the partitioning index as
// long as the windows of two iterations cannot overlap.
TEST(ParallelizeLoops, InnerLoopWindowsWithinTheStride) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Buffer x = Buf("x", {n}), out = Buf("out", {loop::Mul(n, I(4))});
  auto window = [&](int64_t width) {
    return Func(
        {x, out}, 1, {n},
        Loop(i, n,
             Loop(j, I(width),
                  loop::Store(out, {loop::Add(loop::Mul(i, I(4)), j)}, loop::Load(x, {i})))));
  };
  auto fits = window(4);
  auto g = Parallelize(fits);
  EXPECT_THAT(BodyText(g), HasSubstr("for i in [0, n) parallel {"));
  ExpectSameResults(fits, g, {{1}, {77}});
  auto overlaps = window(5);
  EXPECT_EQ(loop::Print(Parallelize(overlaps)), loop::Print(overlaps));

  // A matrix-vector product after TileLoops: the column tiles are the outermost loop.
  Var jo = loop::MakeVar("j_outer"), ji = loop::MakeVar("j_inner"), k = loop::MakeVar("k");
  Buffer v = Buf("v", {I(32)}), w = Buf("w", {I(32), loop::Mul(n, I(64))}),
         y = Buf("y", {loop::Mul(n, I(64))});
  Buffer acc = loop::MakeBuffer("acc", DType::kFloat32, {I(64)}, loop::BufferNode::Scope::kLocal);
  Expr col = loop::Add(loop::Mul(jo, I(64)), ji);
  Stmt tile = loop::Seq(
      {loop::Alloc(acc), Loop(ji, I(64), loop::Store(acc, {ji}, F(0))),
       Loop(k, I(32),
            Loop(ji, I(64),
                 loop::Store(acc, {ji},
                             loop::Add(loop::Load(acc, {ji}),
                                       loop::Mul(loop::Load(v, {k}), loop::Load(w, {k, col})))))),
       Loop(ji, I(64), loop::Store(y, {col}, loop::Load(acc, {ji}))), loop::Free(acc)});
  auto matvec = Func({v, w, y}, 2, {n}, Loop(jo, n, tile));
  auto pm = Parallelize(matvec);
  EXPECT_THAT(BodyText(pm), HasSubstr("for j_outer in [0, n) parallel {"));
  ExpectSameResults(matvec, pm, {{1}, {9}});
}

// A flat index (CollapseLoops' form) with an inner term whose coefficient is a multiple of one
// above the iteration's whole reach: the rows of a row block sit 12544 apart, and column tile p
// of 196 reaches 64 * 195 + 63 < 12544, so tiles never meet; with rows 12000 apart they would.
TEST(ParallelizeLoops, FlatIndexWithRowsAboveTheReach) {
  auto tiles = [](int64_t row_stride) {
    Var p = loop::MakeVar("p"), r = loop::MakeVar("r"), j = loop::MakeVar("j");
    Buffer x = Buf("x", {I(4 * 12544)}), out = Buf("out", {I(4 * 12544)});
    Expr at = loop::Add(loop::Add(loop::Mul(r, I(row_stride)), loop::Mul(p, I(64))), j);
    return Func(
        {x, out}, 1, {},
        Loop(p, I(196),
             Loop(r, I(4),
                  Loop(j, I(64), loop::Store(out, {at}, loop::Mul(loop::Load(x, {at}), F(2)))))));
  };
  auto apart = tiles(12544);
  auto g = Parallelize(apart);
  EXPECT_THAT(BodyText(g), HasSubstr("for p in [0, 196) parallel {"));
  ExpectSameResults(apart, g);
  auto overlapping = tiles(12000);
  EXPECT_EQ(loop::Print(Parallelize(overlapping)), loop::Print(overlapping));
}

// A shape-generic conv's pixels after CollapseLoops and TileLoops: channel m writes
// [m * (h * w), (m + 1) * (h * w)) through a tiled pixel loop and its tail. The strides and the
// extents are symbols, so only the symbolic rule (symbolic_bound.h) shows the channels apart.
loop::PrimFunc TiledPixels(int64_t tile_stride, int64_t tail_extra) {
  Var h = loop::MakeVar("h"), w = loop::MakeVar("w");
  Var m = loop::MakeVar("m"), po = loop::MakeVar("po"), pi = loop::MakeVar("pi");
  Var pt = loop::MakeVar("pt");
  Expr hw = loop::Mul(h, w);
  Buffer x = Buf("x", {loop::Mul(I(8), hw)}), out = Buf("out", {loop::Mul(I(8), hw)});
  auto scale = [&](const Expr& at) {
    return loop::Store(out, {at}, loop::Mul(loop::Load(x, {at}), F(2)));
  };
  Expr tiled = loop::Add(loop::Mul(m, hw), loop::Add(loop::Mul(po, I(tile_stride)), pi));
  Expr tail =
      loop::Add(loop::Mul(m, hw), loop::Add(loop::Mul(loop::FloorDiv(hw, I(16)), I(16)), pt));
  return Func(
      {x, out}, 1, {h, w},
      Loop(
          m, I(8),
          loop::Seq({Loop(po, loop::FloorDiv(hw, I(16)), Loop(pi, I(16), scale(tiled))),
                     Loop(pt, loop::Add(loop::FloorMod(hw, I(16)), I(tail_extra)), scale(tail))})));
}

TEST(ParallelizeLoops, SymbolicStrideWithTiledPixels) {
  auto f = TiledPixels(16, 0);
  auto g = Parallelize(f);
  EXPECT_THAT(BodyText(g), HasSubstr("for m in [0, 8) parallel {"));
  ExpectSameResults(f, g, {{1, 1}, {3, 5}, {4, 4}, {7, 9}, {16, 17}});
  // A tile stride of 17 runs past the channel's h * w pixels, and so does a tail one longer:
  // both stay serial.
  for (auto [stride, extra] : {std::pair<int64_t, int64_t>{17, 0}, {16, 1}}) {
    auto overlapping = TiledPixels(stride, extra);
    EXPECT_EQ(loop::Print(Parallelize(overlapping)), loop::Print(overlapping))
        << stride << " " << extra;
  }
}

// A row block past the last full one (TileLoops' rows left over) starts at a constant multiple
// of the row stride, which goes with the rows: the offset 4 * 12544 does not count against the
// column tile's reach; an offset of 4 * 12544 + 64 (the next tile's columns) would.
TEST(ParallelizeLoops, FlatIndexWithConstantRowOffsets) {
  auto tiles = [](int64_t rest_at) {
    Var p = loop::MakeVar("p"), r = loop::MakeVar("r"), j = loop::MakeVar("j"),
        q = loop::MakeVar("q");
    Buffer x = Buf("x", {I(6 * 12544)}), out = Buf("out", {I(6 * 12544)});
    auto at = [&](const Expr& row) {
      return loop::Add(loop::Add(loop::Mul(row, I(12544)), loop::Mul(p, I(64))), j);
    };
    Expr rest = loop::Add(at(q), I(rest_at));
    Stmt body =
        loop::Seq({Loop(r, I(4), Loop(j, I(64), loop::Store(out, {at(r)}, loop::Load(x, {at(r)})))),
                   Loop(q, I(2), Loop(j, I(64), loop::Store(out, {rest}, F(0))))});
    return Func({x, out}, 1, {}, Loop(p, I(196), body));
  };
  auto own = tiles(4 * 12544);
  auto g = Parallelize(own);
  EXPECT_THAT(BodyText(g), HasSubstr("for p in [0, 196) parallel {"));
  ExpectSameResults(own, g);
  auto next = tiles(4 * 12544 + 64);
  EXPECT_EQ(loop::Print(Parallelize(next)), loop::Print(next));
}

// Column tiles and the tail TileLoops leaves after them in one row: out[b, jo * 48 + j] and
// out[b, 96 + j] differ by a constant, which joins the window of the inner terms: each b keeps
// to [0, 111] of its row (so the batch loop is parallel), and a tail reaching 112 past it
// (offset 112 on a 112-wide row) would meet the next row.
TEST(ParallelizeLoops, ConstantOffsetsJoinTheWindow) {
  auto tiles = [](int64_t tail_at) {
    Var b = loop::MakeVar("b"), jo = loop::MakeVar("jo"), j = loop::MakeVar("j"),
        t = loop::MakeVar("t");
    Buffer x = Buf("x", {I(16), I(112)}), out = Buf("out", {I(16 * 112 + 16)});
    auto flat = [&](const Expr& col) { return loop::Add(loop::Mul(b, I(112)), col); };
    Expr col = loop::Add(loop::Mul(jo, I(48)), j), tail = loop::Add(I(tail_at), t);
    Stmt body = loop::Seq(
        {Loop(jo, I(2), Loop(j, I(48), loop::Store(out, {flat(col)}, loop::Load(x, {b, col})))),
         Loop(t, I(16), loop::Store(out, {flat(tail)}, loop::Mul(loop::Load(x, {b, t}), F(2))))});
    return Func({x, out}, 1, {}, Loop(b, I(16), body));
  };
  test::PassConfig few = {{"parallelize.min_work", int64_t{1}}};
  auto fits = tiles(96);
  auto g = test::RunLoopPass("ParallelizeLoops", fits, few);
  EXPECT_THAT(BodyText(g), HasSubstr("for b in [0, 16) parallel {"));
  ExpectSameResults(fits, g);
  auto past = tiles(112);
  EXPECT_EQ(loop::Print(test::RunLoopPass("ParallelizeLoops", past, few)), loop::Print(past));
}

// Accesses of one buffer some flat and some by dims (CollapseLoops flattens the loops it
// collapses: a padded result's border rows), checked on flat indices: each b writes row 0 of
// its [4, 8] plane flat and rows 1 to 3 by dims, all within [32 * b, 32 * b + 31]; a flat row
// at offset 40 would be row 1 of the next b's.
TEST(ParallelizeLoops, FlatAndDimIndicesOfOneBuffer) {
  auto planes = [](int64_t border_at) {
    Var b = loop::MakeVar("b"), t = loop::MakeVar("t"), r = loop::MakeVar("r"),
        c = loop::MakeVar("c");
    Buffer x = Buf("x", {I(16), I(3), I(8)});
    Buffer out = loop::MakeBuffer("out", DType::kFloat32, {I(16), I(4), I(8)},
                                  loop::BufferNode::Scope::kGlobal, {I(32), I(8), I(1)});
    Expr flat = loop::Add(loop::Add(loop::Mul(b, I(32)), I(border_at)), t);
    Stmt body = loop::Seq({Loop(t, I(8), loop::Store(out, {flat}, F(0))),
                           Loop(r, I(3),
                                Loop(c, I(8),
                                     loop::Store(out, {b, loop::Add(r, I(1)), c},
                                                 loop::Mul(loop::Load(x, {b, r, c}), F(2)))))});
    return Func({x, out}, 1, {}, Loop(b, I(16), body));
  };
  test::PassConfig few = {{"parallelize.min_work", int64_t{1}}};
  auto own = planes(0);
  auto g = test::RunLoopPass("ParallelizeLoops", own, few);
  EXPECT_THAT(BodyText(g), HasSubstr("for b in [0, 16) parallel {"));
  ExpectSameResults(own, g);
  auto next = planes(40);
  EXPECT_EQ(loop::Print(test::RunLoopPass("ParallelizeLoops", next, few)), loop::Print(next));
}

// A symbolic extent with a known bound (a tail) counts as its bound.
TEST(ParallelizeLoops, BoundedSymbolicExtentsAreShort) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer x = Buf("x", {n}), out = Buf("out", {n});
  Expr start = loop::Mul(loop::FloorDiv(n, I(64)), I(64));
  auto tail = Func({x, out}, 1, {n},
                   loop::For(i, start, loop::FloorMod(n, I(64)), ForKind::kSerial,
                             loop::Store(out, {i}, loop::Load(x, {i}))));
  EXPECT_EQ(loop::Print(Parallelize(tail)), loop::Print(tail));
  EXPECT_THAT(loop::Print(Parallelize(tail, {{"parallelize.min_work", 63}})),
              HasSubstr("parallel"));
}

// Loops that are already something else, and trip-count-1 loops, are not touched.
TEST(ParallelizeLoops, OtherKindsAndTinyLoopsStay) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer x = Buf("x", {n}), out = Buf("out", {n});
  auto vec =
      Func({x, out}, 1, {n},
           loop::For(i, I(0), n, ForKind::kVectorized, loop::Store(out, {i}, loop::Load(x, {i}))));
  EXPECT_EQ(loop::Print(Parallelize(vec)), loop::Print(vec));
  auto one =
      Func({x, out}, 1, {n},
           loop::For(i, I(0), I(1), ForKind::kSerial, loop::Store(out, {i}, loop::Load(x, {i}))));
  EXPECT_EQ(loop::Print(Parallelize(one, {{"parallelize.min_work", 0}})), loop::Print(one));
  EXPECT_THAT(ErrorMessage([&] {
                Parallelize(one, {{"parallelize.min_work", -1}});
              }),
              HasSubstr("parallelize.min_work must not be negative, got -1"));
}

TEST(ParallelizeLoops, ConfigKeysAreRegistered) {
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("parallelize.min_work", int64_t{16384}));
  EXPECT_TRUE(test::ConfigRegisteredWithDefault("parallelize.collapse_below", int64_t{64}));
}

}  // namespace
}  // namespace kiln
