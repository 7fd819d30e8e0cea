// BlockTransposes: golden tests of the blocked copy, the copies it must leave alone, and
// kernels compiled before and after compared bit for bit (also through the loop pipeline's
// later passes).
#include <gtest/gtest.h>

#include "common/loop_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/loop_pass.h"

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

PrimFunc Blocked(const PrimFunc& f) {
  return test::RunLoopPass("BlockTransposes", f);
}

// out[c, p] = x[p, c] + 1 over a [p_count, c_count] x.
PrimFunc Transpose(int64_t c_count, int64_t p_count) {
  Var c = MakeVar("c"), p = MakeVar("p");
  Buffer x = F32("x", {I(p_count), I(c_count)}), out = F32("out", {I(c_count), I(p_count)});
  return MakePrimFunc(
      {x, out}, {},
      Loop(c, I(c_count),
           Loop(p, I(p_count), Store(out, {c, p}, Add(Load(x, {p, c}), FloatImm(1))))));
}

// NHWC -> NCHW of 64 channels: blocks of 64 rows (16 KiB) with the channel loop inside.
TEST(BlockTransposes, ChannelsLastToFirstRunsInBlocks) {
  PrimFunc f = Transpose(64, 12544);
  PrimFunc g = Blocked(f);
  EXPECT_EQ(Print(g->body), R"(for p_block in [0, 196) {
  for c in [0, 64) {
    for p in [0, 64) {
      out[c, p_block * 64 + p] = x[p_block * 64 + p, c] + 1.0f
    }
  }
}
)");
  // Fewer channels: longer blocks (16 channels: 256 rows in 16 KiB, the largest multiple of 16
  // dividing 3136 below that is 224); a small transpose still bit for bit the same.
  EXPECT_NE(test::BodyText(Blocked(Transpose(16, 3136))).find("p in [0, 224)"), std::string::npos);
  PrimFunc small = Transpose(20, 48);
  test::ExpectSameResults(small, Blocked(small), {3, -2, 2});
  EXPECT_NE(test::BodyText(Blocked(small)).find("p_block in [0, 3)"), std::string::npos);
  const std::string pipeline =
      "BlockTransposes,ParallelizeLoops,VectorizeLoops,UnrollLoops,FlattenBuffers,LoopSimplify";
  test::ExpectSameResults(small, test::RunLoopPipeline(pipeline, small), {3, -2, 2});
}

// A batch of transposes whose batch and channel loops are one (v over 3 x 20, as CollapseLoops
// leaves them: x read at v // 20 and v % 20): split back, the batch loop around the blocked
// nest; bit for bit the same. A divisor that does not divide the extent leaves it alone.
TEST(BlockTransposes, CollapsedBatchSplitsBack) {
  auto batched = [](int64_t divisor) {
    Var v = MakeVar("v"), p = MakeVar("p");
    Buffer x = F32("x", {I(3), I(48), I(20)}), out = F32("out", {I(60), I(48)});
    Expr n = FloorDiv(v, I(divisor)), c = FloorMod(v, I(divisor));
    return MakePrimFunc(
        {x, out}, {},
        Loop(v, I(60), Loop(p, I(48), Store(out, {v, p}, Add(Load(x, {n, p, c}), FloatImm(1))))));
  };
  PrimFunc f = batched(20);
  PrimFunc g = Blocked(f);
  EXPECT_EQ(Print(g->body), R"(for v_n in [0, 3) {
  for p_block in [0, 3) {
    for v_c in [0, 20) {
      for p in [0, 16) {
        out[v_n * 20 + v_c, p_block * 16 + p] = x[v_n, p_block * 16 + p, v_c] + 1.0f
      }
    }
  }
}
)");
  test::ExpectSameResults(f, g, {3, -2, 2});
  PrimFunc odd = batched(7);
  EXPECT_EQ(Print(Blocked(odd)->body), Print(odd->body));
}

// Left alone: rows not a multiple of 16, one column, a single block, columns too close to gain
// (8 floats apart: the column reads already share lines), a copy along rows, and a store that
// several iterations could share.
TEST(BlockTransposes, LeavesOtherCopiesAlone) {
  for (PrimFunc f : {Transpose(64, 100), Transpose(1, 64), Transpose(64, 16), Transpose(8, 3136)}) {
    PrimFunc g = Blocked(f);
    EXPECT_EQ(Print(g->body), Print(f->body));
  }
  Var c = MakeVar("c"), p = MakeVar("p");
  Buffer x = F32("x", {I(32), I(64)}), out = F32("out", {I(32), I(64)});
  PrimFunc along = MakePrimFunc(
      {x, out}, {}, Loop(c, I(32), Loop(p, I(64), Store(out, {c, p}, Load(x, {c, p})))));
  EXPECT_EQ(Print(Blocked(along)->body), Print(along->body));
  Buffer y = F32("y", {I(64), I(32)}), row = F32("row", {I(64)});
  PrimFunc shared =
      MakePrimFunc({y, row}, {}, Loop(c, I(32), Loop(p, I(64), Store(row, {p}, Load(y, {p, c})))));
  EXPECT_EQ(Print(Blocked(shared)->body), Print(shared->body));
}

// More that stays: the row loop not starting at 0, the copy reading the buffer it writes,
// rows closer than the row loop's extent (two (c, p) could share an element), a parallel loop;
// and one that is blocked: the column loop starting past 0, its min kept.
TEST(BlockTransposes, LegalityRules) {
  Var c = MakeVar("c"), p = MakeVar("p");
  Buffer x = F32("x", {I(64), I(32)}), out = F32("out", {I(32), I(64)});
  Stmt copy = Store(out, {c, p}, Load(x, {p, c}));
  PrimFunc from_one =
      MakePrimFunc({x, out}, {}, Loop(c, I(32), For(p, I(1), I(48), ForKind::kSerial, copy)));
  EXPECT_EQ(Print(Blocked(from_one)->body), Print(from_one->body));
  Buffer sq = F32("sq", {I(64), I(64)});
  PrimFunc in_place =
      MakePrimFunc({sq}, {}, Loop(c, I(64), Loop(p, I(64), Store(sq, {c, p}, Load(sq, {p, c})))));
  EXPECT_EQ(Print(Blocked(in_place)->body), Print(in_place->body));
  Buffer flat = F32("flat", {I(32 * 64)});
  PrimFunc close = MakePrimFunc(
      {x, flat}, {},
      Loop(c, I(32), Loop(p, I(64), Store(flat, {Add(Mul(c, I(32)), p)}, Load(x, {p, c})))));
  EXPECT_EQ(Print(Blocked(close)->body), Print(close->body));
  PrimFunc parallel =
      MakePrimFunc({x, out}, {}, For(c, I(0), I(32), ForKind::kParallel, Loop(p, I(64), copy)));
  EXPECT_EQ(Print(Blocked(parallel)->body), Print(parallel->body));
  PrimFunc offset =
      MakePrimFunc({x, out}, {}, For(c, I(2), I(30), ForKind::kSerial, Loop(p, I(64), copy)));
  PrimFunc g = Blocked(offset);
  EXPECT_NE(Print(g->body).find("for c in [2, 32)"), std::string::npos) << Print(g->body);
  EXPECT_NE(Print(g->body).find("p_block in [0, 2)"), std::string::npos) << Print(g->body);
  test::ExpectSameResults(offset, g, {3, -2, 2});
}

}  // namespace
}  // namespace kiln::loop
