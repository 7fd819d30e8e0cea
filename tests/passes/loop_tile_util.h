// Helpers the TileLoops tests share (loop_tile_test.cc, loop_tile_panels_test.cc): small
// kernels built as LowerReductions leaves them, the pass run with its keys set, and results
// compared bit for bit against the untiled kernel.
#pragma once

#include <string>
#include <vector>

#include "common/loop_test_util.h"
#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "passes/lower_to_loops.h"

namespace kiln::tile_test {

using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::Var;

inline Expr I(int64_t v) {
  return loop::IntImm(v);
}
inline Buffer Buf(const std::string& name, std::vector<Expr> shape) {
  return loop::MakeBuffer(name, DType::kFloat32, std::move(shape));
}
inline Stmt Loop(const Var& v, const Expr& extent, Stmt body) {
  return loop::For(v, I(0), extent, ForKind::kSerial, std::move(body));
}

// (A named constant rather than a literal: GCC 12 warns falsely about assigning a literal to a
// std::string in an inlined function.)
inline const std::string kName = "k";

// A kernel whose body goes through LowerReductions, as in the compiler.
inline loop::PrimFunc Func(std::vector<Buffer> buffers, int num_inputs, std::vector<Var> scalars,
                           Stmt body) {
  loop::PrimFunc lowered = LowerReductions(test::MakePrimFunc(
      std::move(buffers), std::move(scalars), std::move(body), kName, num_inputs));
  loop::Verify(lowered, /*allow_reduce=*/false);
  return lowered;
}

inline Expr Sum(const Expr& source, const Var& k, const Expr& extent) {
  return loop::Reduce(loop::ReduceKind::kSum, source, {{k, extent}});
}

// Runs `pipeline` through the pass manager with `tile.j`, `tile.i` and `tile.pack` set, and
// checks the result verifies. Most cases tile one row at a time (tile.i = 1); the row blocks
// have cases of their own, without and with packed panels.
inline loop::PrimFunc Tile(const loop::PrimFunc& f, int64_t tile_j = 64,
                           const std::string& pipeline = "TileLoops", int64_t tile_i = 1,
                           bool pack = false) {
  return test::RunLoopPipeline(pipeline, f,
                               {{"tile.j", tile_j}, {"tile.i", tile_i}, {"tile.pack", pack}});
}

// TileLoops and the passes after it in the compiler's loop pipeline.
inline const char* const kTiledPipeline =
    "TileLoops,ParallelizeLoops,VectorizeLoops,UnrollLoops,FlattenBuffers,LoopSimplify,"
    "PlanStorage";

// Seeds and value range fixed per file: the cases were written against this data.
inline void ExpectSameResults(const loop::PrimFunc& before, const loop::PrimFunc& after,
                              const std::vector<std::vector<int64_t>>& scalar_sets = {{}}) {
  test::ExpectSameResults(before, after, {29, -2, 2}, scalar_sets);
}

// out[i, j] = max(sum_k a[i, k] * b[k, j] + bias[j], 0) for i < m, j < n, k < depth.
inline loop::PrimFunc Matmul(const Expr& m, const Expr& n, const Expr& depth,
                             std::vector<Var> scalars) {
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", {m, depth}), b = Buf("b", {depth, n}), bias = Buf("bias", {n}),
         out = Buf("out", {m, n});
  Expr dot = Sum(loop::Mul(loop::Load(a, {i, k}), loop::Load(b, {k, j})), k, depth);
  Expr value = loop::Max(loop::Add(dot, loop::Load(bias, {j})), loop::FloatImm(0));
  return Func({a, b, bias, out}, 3, std::move(scalars),
              Loop(i, m, Loop(j, n, loop::Store(out, {i, j}, value))));
}

}  // namespace kiln::tile_test
