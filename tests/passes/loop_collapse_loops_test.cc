// CollapseLoops: golden tests on printed loop IR for the nests it collapses and those it must
// leave alone, and kernels compiled before and after compared bit for bit.
#include <gtest/gtest.h>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/loop_pass.h"
#include "passes/lower_to_loops.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;

Expr I(int64_t v) {
  return IntImm(v);
}

Buffer F32(const std::string& name, std::vector<Expr> shape) {
  return MakeBuffer(name, DType::kFloat32, std::move(shape));
}

Stmt Loop(const Var& v, const Expr& extent, Stmt body) {
  return For(v, I(0), extent, ForKind::kSerial, std::move(body));
}

PrimFunc Collapsed(const PrimFunc& f, bool column_walks_only = false) {
  Attrs options;
  if (column_walks_only) options.Set("column_walks_only", true);
  return test::RunLoopPass(PassRegistry::Global().Create("CollapseLoops", options), f);
}

void ExpectSameResults(const PrimFunc& before, const PrimFunc& after) {
  test::ExpectSameResults(before, after, {53, -2, 2});
}

// out[n, c, h, w] = x[n, c, h, w] * 2 + y[n, c, h, w]: one loop over every element.
TEST(CollapseLoops, DenseElementwiseNestBecomesOneLoop) {
  Var n = MakeVar("n"), c = MakeVar("c"), h = MakeVar("h"), w = MakeVar("w");
  std::vector<Expr> shape = {I(2), I(3), I(5), I(7)};
  Buffer x = F32("x", shape), y = F32("y", shape), out = F32("out", shape);
  std::vector<Expr> at = {n, c, h, w};
  PrimFunc f = MakePrimFunc(
      {x, y, out}, {},
      Loop(n, I(2),
           Loop(c, I(3),
                Loop(h, I(5),
                     Loop(w, I(7),
                          Store(out, at, Add(Mul(Load(x, at), FloatImm(2)), Load(y, at))))))));
  PrimFunc g = Collapsed(f);
  EXPECT_EQ(Print(g->body), R"(for n_c_h_w in [0, 210) {
  out[n_c_h_w] = x[n_c_h_w] * 2.0f + y[n_c_h_w]
}
)");
  EXPECT_EQ(g->buffer_params[0]->strides.size(), 4u);  // re-made with explicit strides
  ExpectSameResults(f, g);
}

// A per-channel operand (s[c]) is affine in c but not in the flat index over (c, h, w): the
// collapse stops at h, w.
TEST(CollapseLoops, BroadcastAlongChannelsStopsAtTheImage) {
  Var c = MakeVar("c"), h = MakeVar("h"), w = MakeVar("w");
  Buffer x = F32("x", {I(3), I(4), I(6)}), s = F32("s", {I(3)}),
         out = F32("out", {I(3), I(4), I(6)});
  PrimFunc f = MakePrimFunc(
      {x, s, out}, {},
      Loop(c, I(3),
           Loop(h, I(4),
                Loop(w, I(6), Store(out, {c, h, w}, Mul(Load(x, {c, h, w}), Load(s, {c})))))));
  PrimFunc g = Collapsed(f);
  EXPECT_EQ(Print(g->body), R"(for c in [0, 3) {
  for h_w in [0, 24) {
    out[c * 24 + h_w] = x[c * 24 + h_w] * s[c]
  }
}
)");
  ExpectSameResults(f, g);
}

// Each of these needs h // W and h % W in the flat loop, so nothing changes.
TEST(CollapseLoops, NestsThatStay) {
  Var h = MakeVar("h"), w = MakeVar("w");
  Buffer x = F32("x", {I(6), I(4)}), out = F32("out", {I(4), I(6)});
  // A transpose: out is walked along rows, x down columns.
  PrimFunc transpose =
      MakePrimFunc({x, out}, {}, Loop(h, I(4), Loop(w, I(6), Store(out, {h, w}, Load(x, {w, h})))));
  EXPECT_EQ(Print(Collapsed(transpose)->body), Print(transpose->body));
  // A loop variable used as a value.
  PrimFunc iota = MakePrimFunc(
      {x, out}, {}, Loop(h, I(4), Loop(w, I(6), Store(out, {h, w}, Cast(DType::kFloat32, h)))));
  EXPECT_EQ(Print(Collapsed(iota)->body), Print(iota->body));
  // An inner extent that is not the buffer's row length (a crop).
  PrimFunc crop =
      MakePrimFunc({x, out}, {}, Loop(h, I(4), Loop(w, I(5), Store(out, {h, w}, FloatImm(1)))));
  EXPECT_EQ(Print(Collapsed(crop)->body), Print(crop->body));
}

// A shape-generic image: x[c, h, w] and out[c, h, w] over symbolic H and W collapse to one loop
// over H * W per channel (x's dense strides have W for h). The extents are written as lowering
// leaves a strided layer's ((W + -1) // 2 + 1 for the buffer, (W - 1) // 2 + 1 for the loop):
// they compare after simplification. A crop (an inner extent that is not the row) stays, and so
// does an extent that may be negative.
TEST(CollapseLoops, SymbolicImageBecomesOnePixelLoop) {
  Var hs = MakeVar("hs"), ws = MakeVar("ws");
  Var c = MakeVar("c"), h = MakeVar("h"), w = MakeVar("w");
  Expr rows = Add(FloorDiv(Add(hs, I(-1)), I(2)), I(1));
  Expr cols = Add(FloorDiv(Add(ws, I(-1)), I(2)), I(1));
  Expr cols_loop = Add(FloorDiv(Sub(ws, I(1)), I(2)), I(1));
  Buffer x = F32("x", {I(3), rows, cols}), s = F32("s", {I(3)}),
         out = F32("out", {I(3), rows, cols});
  auto kernel = [&](const Expr& inner, const Expr& outer) {
    return MakePrimFunc(
        {x, s, out}, {hs, ws},
        Loop(c, I(3),
             Loop(h, outer,
                  Loop(w, inner, Store(out, {c, h, w}, Mul(Load(x, {c, h, w}), Load(s, {c})))))));
  };
  PrimFunc f = kernel(cols_loop, rows);
  PrimFunc g = Collapsed(f);
  EXPECT_EQ(Print(g->body), R"(for c in [0, 3) {
  for h_w in [0, ((hs + -1) // 2 + 1) * ((ws - 1) // 2 + 1)) {
    out[c * (((hs + -1) // 2 + 1) * ((ws + -1) // 2 + 1)) + h_w] = x[c * (((hs + -1) // 2 + 1) * ((ws + -1) // 2 + 1)) + h_w] * s[c]
  }
}
)");
  test::ExpectSameResults(f, g, {53, -2, 2}, {{1, 1}, {5, 8}, {9, 3}});
  PrimFunc crop = kernel(FloorDiv(ws, I(4)), rows);
  EXPECT_EQ(Print(Collapsed(crop)->body), Print(crop->body));
  // Rows that may number below 0 (hs - 3 for hs < 3): collapsed, the pair would run a
  // positive product of iterations where it ran none.
  PrimFunc maybe_negative = kernel(cols_loop, Sub(hs, I(3)));
  EXPECT_EQ(Print(Collapsed(maybe_negative)->body), Print(maybe_negative->body));
}

// A reduction over [H, W] (a global pool): its two loops become one, in the same order, so the
// sum is bit for bit the same.
TEST(CollapseLoops, ReductionOverTheImage) {
  Var c = MakeVar("c"), h = MakeVar("h"), w = MakeVar("w");
  Buffer x = F32("x", {I(3), I(7), I(7)}), out = F32("out", {I(3)});
  Buffer acc = MakeBuffer("acc", DType::kFloat32, {I(1)}, BufferNode::Scope::kLocal);
  PrimFunc f = MakePrimFunc(
      {x, out}, {},
      Loop(c, I(3),
           Seq({Alloc(acc), Store(acc, {I(0)}, FloatImm(0)),
                Loop(h, I(7),
                     Loop(w, I(7), Store(acc, {I(0)}, Add(Load(acc, {I(0)}), Load(x, {c, h, w}))))),
                Store(out, {c}, Load(acc, {I(0)})), Free(acc)})));
  PrimFunc g = Collapsed(f);
  EXPECT_NE(Print(g->body).find("for h_w in [0, 49) {"), std::string::npos) << Print(g->body);
  ExpectSameResults(f, g);
}

// Before TileLoops only the loops around a reduction that reads along the inner loop collapse:
// a 1x1 conv's pixels (x read at [k, h, w] inside the reduction over k), not a row loop around
// a reduction along the last axis.
TEST(CollapseLoops, ColumnWalksOnly) {
  Var m = MakeVar("m"), h = MakeVar("h"), w = MakeVar("w"), k = MakeVar("k");
  Buffer x = F32("x", {I(5), I(3), I(8)}), wt = F32("wt", {I(4), I(5)}),
         out = F32("out", {I(4), I(3), I(8)});
  Expr conv = Reduce(ReduceKind::kSum, Mul(Load(wt, {m, k}), Load(x, {k, h, w})), {{k, I(5)}});
  PrimFunc f = LowerReductions(MakePrimFunc(
      {x, wt, out}, {}, Loop(m, I(4), Loop(h, I(3), Loop(w, I(8), Store(out, {m, h, w}, conv))))));
  PrimFunc g = Collapsed(f, true);
  std::string text = Print(g->body);
  EXPECT_NE(text.find("for h_w in [0, 24) {"), std::string::npos) << text;
  EXPECT_NE(text.find("for m in [0, 4) {"), std::string::npos) << text;
  ExpectSameResults(f, g);

  Var i = MakeVar("i"), j = MakeVar("j"), k2 = MakeVar("k2");
  Buffer y = F32("y", {I(3), I(4), I(6)}), sums = F32("sums", {I(3), I(4)});
  Expr row_sum = Reduce(ReduceKind::kSum, Load(y, {i, j, k2}), {{k2, I(6)}});
  PrimFunc rows = LowerReductions(
      MakePrimFunc({y, sums}, {}, Loop(i, I(3), Loop(j, I(4), Store(sums, {i, j}, row_sum)))));
  EXPECT_EQ(Print(Collapsed(rows, true)->body), Print(rows->body));
  // Without the restriction the row loops do collapse.
  EXPECT_NE(Print(Collapsed(rows)->body).find("for i_j in [0, 12) {"), std::string::npos);

  // A layer norm's variance re-reads the row's mean in every term: mean[i, j] walks j with
  // coefficient 1 inside the reduction but does not move with k2, so it is no column walk
  // (collapsing here kept FuseLoops from fusing the row loops of an 8 x 512 x 768 layer norm).
  Buffer mean = F32("mean", {I(3), I(4)});
  Expr centered = Sub(Load(y, {i, j, k2}), Load(mean, {i, j}));
  Expr variance = Reduce(ReduceKind::kSum, Mul(centered, centered), {{k2, I(6)}});
  PrimFunc var_rows = LowerReductions(MakePrimFunc(
      {y, mean, sums}, {}, Loop(i, I(3), Loop(j, I(4), Store(sums, {i, j}, variance)))));
  EXPECT_EQ(Print(Collapsed(var_rows, true)->body), Print(var_rows->body));
  EXPECT_NE(Print(Collapsed(var_rows)->body).find("for i_j in [0, 12) {"), std::string::npos);
}

// A 3x3 conv over a zero-padded input: x's rows are 18 apart, the output's 16. Before TileLoops
// the pixel loops still collapse, x read through h_w // 16 and h_w % 16 (a row-split read);
// with a row of 12 (not a multiple of 16), or without the restriction, they stay.
TEST(CollapseLoops, RowSplitReadsOfAPaddedInput) {
  for (int64_t width : {16, 32, 12}) {
    Var m = MakeVar("m"), h = MakeVar("h"), w = MakeVar("w"), k = MakeVar("k"), t = MakeVar("t");
    Buffer x = F32("x", {I(2), I(5), I(width + 2)}), wt = F32("wt", {I(3), I(2), I(3)}),
           out = F32("out", {I(3), I(3), I(width)});
    Expr conv =
        Reduce(ReduceKind::kSum, Mul(Load(wt, {m, k, t}), Load(x, {k, Add(h, t), Add(w, t)})),
               {{k, I(2)}, {t, I(3)}});
    PrimFunc f = LowerReductions(
        MakePrimFunc({x, wt, out}, {},
                     Loop(m, I(3), Loop(h, I(3), Loop(w, I(width), Store(out, {m, h, w}, conv))))));
    PrimFunc g = Collapsed(f, true);
    std::string text = Print(g->body);
    if (width % 16 == 0) {
      std::string row = std::to_string(width), padded = std::to_string(width + 2);
      EXPECT_NE(text.find("for h_w in [0, " + std::to_string(3 * width) + ") {"), std::string::npos)
          << text;
      // x[k * 5 * padded + (h_w // row + t) * padded + (h_w % row + t)]
      EXPECT_NE(text.find("(h_w // " + row + " + t) * " + padded + " + (h_w % " + row + " + t)"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("out[m * " + std::to_string(3 * width) + " + h_w]"), std::string::npos)
          << text;
      ExpectSameResults(f, g);
    } else {
      EXPECT_EQ(text, Print(f->body));
    }
    EXPECT_EQ(Print(Collapsed(f)->body), Print(f->body));
  }
}

// A buffer accessed both inside a collapsed nest and elsewhere is one object everywhere.
TEST(CollapseLoops, RemadeBufferIsOneObject) {
  Var h = MakeVar("h"), w = MakeVar("w"), i = MakeVar("i");
  Buffer x = F32("x", {I(4), I(6)}), out = F32("out", {I(4), I(6)});
  PrimFunc f =
      MakePrimFunc({x, out}, {},
                   Seq({Loop(h, I(4), Loop(w, I(6), Store(out, {h, w}, Load(x, {h, w})))),
                        Loop(i, I(4), Store(out, {i, i}, Add(Load(out, {i, i}), FloatImm(1))))}));
  PrimFunc g = Collapsed(f);  // RunLoopPass verifies: one object per buffer
  EXPECT_EQ(Print(g->body), R"(for h_w in [0, 24) {
  out[h_w] = x[h_w]
}
for i in [0, 4) {
  out[i, i] = out[i, i] + 1.0f
}
)");
  ExpectSameResults(f, g);
}

}  // namespace
}  // namespace kiln::loop
