// The LLVM code generator on hand-built PrimFuncs: local buffers, parallel and vector loops,
// schedule blocks, options, errors, timings and the codegen registry (node kinds and dtypes:
// llvm_codegen_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "ir/tensor.h"
#include "jit/kernel.h"
#include "jit/llvm_codegen_util.h"

namespace kiln {
namespace {

using loop::BinaryOp;
using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Intrinsic;
using loop::Stmt;
using loop::Var;
using test::ErrorMessage;
using ::testing::HasSubstr;

using codegen_test::Buf;
using codegen_test::Call;
using codegen_test::I;
using codegen_test::Loop1D;
using codegen_test::MakeFunc;
using codegen_test::SameTensor;

// ---- local buffers ----

TEST(LLVMCodegen, LocalAllocFree) {
  Var n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), r = loop::MakeVar("r");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  // A symbolic-size temp (heap) and a 4-element one per iteration (stack).
  Buffer big = loop::MakeBuffer("big", DType::kFloat32, {n}, loop::BufferNode::Scope::kLocal);
  Buffer small =
      loop::MakeBuffer("small", DType::kFloat32, {I(4)}, loop::BufferNode::Scope::kLocal);
  Stmt per_element = loop::Seq({
      loop::Alloc(small),
      loop::For(j, I(0), I(4), ForKind::kSerial,
                loop::Store(small, {j},
                            loop::Mul(loop::Load(big, {loop::Sub(loop::Sub(n, I(1)), i)}),
                                      loop::Cast(DType::kFloat32, j)))),
      loop::Store(out, {i}, loop::Add(loop::Load(small, {I(3)}), loop::Load(small, {I(1)}))),
      loop::Free(small),
  });
  Stmt body = loop::Seq({
      loop::Alloc(big),
      loop::For(r, I(0), n, ForKind::kSerial,
                loop::Store(big, {r}, loop::Add(loop::Load(a, {r}), loop::FloatImm(1)))),
      loop::For(i, I(0), n, ForKind::kSerial, per_element),
      loop::Free(big),
  });
  auto mod = BuildLLVM({MakeFunc("local", {a, out}, 1, {n}, body)});
  for (int64_t size : {1, 5, 3000}) {
    std::vector<float> x(size), y(size);
    for (int64_t k = 0; k < size; ++k) x[k] = 0.5f * k;
    Call(mod->Lookup("local"), {x.data(), y.data()}, {size});
    for (int64_t k = 0; k < size; ++k) EXPECT_EQ(y[k], (x[size - 1 - k] + 1) * 4) << k;
  }
}

TEST(LLVMCodegen, LocalBufferErrors) {
  Buffer local = loop::MakeBuffer("tmp", DType::kFloat32, {I(4)}, loop::BufferNode::Scope::kLocal);
  Buffer out = Buf("out", DType::kFloat32, {I(4)});
  auto unallocated =
      MakeFunc("noalloc", {out}, 0, {}, loop::Store(out, {I(0)}, loop::Load(local, {I(0)})));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({unallocated}); }),
              HasSubstr("@noalloc: buffer 'tmp' is neither a parameter nor allocated"));
  auto after_free = MakeFunc("afterfree", {out}, 0, {},
                             loop::Seq({loop::Alloc(local), loop::Free(local),
                                        loop::Store(out, {I(0)}, loop::Load(local, {I(0)}))}));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({after_free}); }), HasSubstr("used after its Free"));
}

// ---- parallel ----

// out[i, j] = in[i, j] * s + scale, with a let outside the parallel loop, a local buffer
// inside it and a nested parallel loop: equal to the serial version.
loop::PrimFunc ParallelKernel(const std::string& name, ForKind outer, ForKind inner) {
  Var m = loop::MakeVar("m"), n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j");
  Var scale = loop::MakeVar("scale", DType::kFloat32);
  Buffer in = Buf("in", DType::kFloat32, {m, n}), out = Buf("out", DType::kFloat32, {m, n});
  Buffer row = loop::MakeBuffer("row", DType::kFloat32, {I(2)}, loop::BufferNode::Scope::kLocal);
  Stmt inner_body = loop::Seq({
      loop::Alloc(row),
      loop::Store(row, {I(0)}, loop::Load(in, {i, j})),
      loop::Store(row, {I(1)}, loop::Cast(DType::kFloat32, loop::Add(i, j))),
      loop::Store(out, {i, j},
                  loop::Add(loop::Mul(loop::Load(row, {I(0)}), scale), loop::Load(row, {I(1)}))),
      loop::Free(row),
  });
  Stmt body = loop::LetStmt(scale, loop::Cast(DType::kFloat32, loop::Add(m, I(1))),
                            loop::For(i, I(0), m, outer, loop::For(j, I(0), n, inner, inner_body)));
  return MakeFunc(name, {in, out}, 1, {m, n}, body);
}

TEST(LLVMCodegen, ParallelLoopMatchesSerial) {
  auto mod = BuildLLVM({ParallelKernel("par", ForKind::kParallel, ForKind::kSerial),
                        ParallelKernel("nested", ForKind::kParallel, ForKind::kParallel),
                        ParallelKernel("ser", ForKind::kSerial, ForKind::kSerial)});
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {257, 130}}) {
    std::vector<float> x(m * n), serial(m * n), par(m * n), nested(m * n);
    for (int64_t e = 0; e < m * n; ++e) x[e] = 0.25f * static_cast<float>(e % 97) - 3;
    Call(mod->Lookup("ser"), {x.data(), serial.data()}, {m, n});
    Call(mod->Lookup("par"), {x.data(), par.data()}, {m, n});
    Call(mod->Lookup("nested"), {x.data(), nested.data()}, {m, n});
    EXPECT_EQ(par, serial);
    EXPECT_EQ(nested, serial);
    EXPECT_EQ(serial[m * n - 1],
              x[m * n - 1] * static_cast<float>(m + 1) + static_cast<float>(m - 1 + n - 1));
  }
  EXPECT_THAT(mod->source(), HasSubstr("kiln_parallel_for"));
}

// A local buffer allocated outside a parallel loop reaches its body with its alignment (a
// scratch block's 64 bytes), as it has outside, and the loop computes what the serial one does.
TEST(LLVMCodegen, ParallelBodiesKnowTheirLocalBuffersAlignment) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Buffer in = Buf("in", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  Buffer tmp = loop::MakeBuffer("tmp", DType::kFloat32, {n}, loop::BufferNode::Scope::kLocal);
  Stmt body = loop::Seq({
      loop::Alloc(tmp),
      Loop1D(i, n, loop::Store(tmp, {i}, loop::Mul(loop::Load(in, {i}), loop::FloatImm(2))),
             ForKind::kParallel),
      Loop1D(k, n, loop::Store(out, {k}, loop::Add(loop::Load(tmp, {k}), loop::FloatImm(1)))),
      loop::Free(tmp),
  });
  auto mod = BuildLLVM({MakeFunc("aligned", {in, out}, 1, {n}, body)});
  // The trampoline's load of the block from the closure says so (the body is inlined there).
  EXPECT_THAT(mod->source(), HasSubstr("load ptr, ptr %2, align 8, !align !"));
  EXPECT_THAT(mod->source(), HasSubstr(" = !{i64 64}"));
  for (int64_t size : {1, 33, 1000}) {
    std::vector<float> x(size), y(size);
    for (int64_t e = 0; e < size; ++e) x[e] = 0.5f * static_cast<float>(e % 13) - 2;
    Call(mod->Lookup("aligned"), {x.data(), y.data()}, {size});
    for (int64_t e = 0; e < size; ++e) EXPECT_EQ(y[e], x[e] * 2 + 1) << e;
  }
}

// ---- vectors ----

// lanes 8 with a scalar tail: out[io*8 + (0..7)] = a[...] * 2 + c, then the tail; plus a
// stride-2 gather, a scatter, a Ramp as data and a vector let.
TEST(LLVMCodegen, VectorLanesWithTail) {
  Var n = loop::MakeVar("n");
  Var io = loop::MakeVar("io"), i = loop::MakeVar("i");
  Var c = loop::MakeVar("c", DType::kFloat32);
  Buffer a = Buf("a", DType::kFloat32, {loop::Mul(n, I(2))});
  Buffer out = Buf("out", DType::kFloat32, {n}), even = Buf("even", DType::kFloat32, {n});
  Buffer spread = Buf("spread", DType::kFloat32, {loop::Mul(n, I(2))});
  Buffer idx = Buf("idx", DType::kInt32, {n});
  Expr base = loop::Mul(io, I(8));
  Expr lanes = loop::Ramp(base, 1, 8);
  Stmt vector_body = loop::LetStmt(
      c, loop::FloatImm(0.5),
      loop::Seq({
          loop::Store(
              out, {lanes},
              loop::Add(loop::Mul(loop::Load(a, {lanes}), loop::Broadcast(loop::FloatImm(2), 8)),
                        loop::Broadcast(c, 8))),
          loop::Store(even, {lanes}, loop::Load(a, {loop::Ramp(loop::Mul(base, I(2)), 2, 8)})),
          loop::Store(spread, {loop::Ramp(loop::Mul(base, I(2)), 2, 8)}, loop::Load(a, {lanes})),
          loop::Store(idx, {lanes}, loop::Cast(DType::kInt32, lanes)),
      }));
  Expr x = loop::Load(a, {i});
  Stmt tail_body = loop::Seq({
      loop::Store(out, {i}, loop::Add(loop::Mul(x, loop::FloatImm(2)), loop::FloatImm(0.5))),
      loop::Store(even, {i}, loop::Load(a, {loop::Mul(i, I(2))})),
      loop::Store(spread, {loop::Mul(i, I(2))}, x),
      loop::Store(idx, {i}, loop::Cast(DType::kInt32, i)),
  });
  Expr vec_end = loop::FloorDiv(n, I(8));
  Stmt body = loop::Seq({
      loop::For(io, I(0), vec_end, ForKind::kSerial, vector_body),
      loop::For(i, loop::Mul(vec_end, I(8)), loop::Sub(n, loop::Mul(vec_end, I(8))),
                ForKind::kSerial, tail_body),
  });
  auto mod = BuildLLVM({MakeFunc("vec8", {a, out, even, spread, idx}, 1, {n}, body)});
  for (int64_t size : {1, 8, 13, 1000}) {
    std::vector<float> av(2 * size), o(size), e(size), s(2 * size, -1);
    std::vector<int32_t> ix(size);
    for (int64_t k = 0; k < 2 * size; ++k) av[k] = 0.75f * static_cast<float>(k) - 10;
    Call(mod->Lookup("vec8"), {av.data(), o.data(), e.data(), s.data(), ix.data()}, {size});
    for (int64_t k = 0; k < size; ++k) {
      ASSERT_EQ(o[k], av[k] * 2 + 0.5f) << size << ":" << k;
      ASSERT_EQ(e[k], av[2 * k]) << size << ":" << k;
      ASSERT_EQ(s[2 * k], av[k]) << size << ":" << k;
      ASSERT_EQ(s[2 * k + 1], -1) << size << ":" << k;
      ASSERT_EQ(ix[k], k);
    }
  }
}

// A vector index that is not `base + lane * const` (a loaded index vector) is a gather.
TEST(LLVMCodegen, VectorGatherThroughLoadedIndices) {
  Var io = loop::MakeVar("io");
  Buffer table = Buf("table", DType::kFloat64, {I(100)});
  Buffer idx = Buf("idx", DType::kInt32, {I(16)});
  Buffer out = Buf("out", DType::kFloat64, {I(16)});
  Expr lanes = loop::Ramp(loop::Mul(io, I(4)), 1, 4);
  auto f =
      MakeFunc("gather", {table, idx, out}, 2, {},
               loop::For(io, I(0), I(4), ForKind::kSerial,
                         loop::Store(out, {lanes}, loop::Load(table, {loop::Load(idx, {lanes})}))));
  auto mod = BuildLLVM({f});
  std::vector<double> t(100), o(16);
  std::vector<int32_t> ix(16);
  for (int k = 0; k < 100; ++k) t[k] = k * 1.5;
  for (int k = 0; k < 16; ++k) ix[k] = (k * 37) % 100;
  Call(mod->Lookup("gather"), {t.data(), ix.data(), o.data()});
  for (int k = 0; k < 16; ++k) EXPECT_EQ(o[k], t[ix[k]]);
}

// Vector lanes through every kind of expression: comparisons into a bool buffer, select,
// libm calls lane by lane, LLVM intrinsics, casts and integer floor division.
TEST(LLVMCodegen, VectorExpressions) {
  Var io = loop::MakeVar("io");
  const int64_t n = 32;
  Buffer a = Buf("a", DType::kFloat32, {I(n)}), out = Buf("out", DType::kFloat32, {I(n)});
  Buffer mask = Buf("mask", DType::kBool, {I(n)}), q = Buf("q", DType::kInt32, {I(n)});
  Buffer h = Buf("h", DType::kBFloat16, {I(n)});
  Expr lanes = loop::Ramp(loop::Mul(io, I(8)), 1, 8);
  Expr x = loop::Load(a, {lanes});
  Expr positive = loop::MakeBinary(BinaryOp::kGT, x, loop::Broadcast(loop::FloatImm(0), 8));
  Expr as_int = loop::Cast(DType::kInt32, x);
  Stmt body = loop::Seq({
      loop::Store(out, {lanes},
                  loop::Select(positive, loop::Call(Intrinsic::kTanh, {x}),
                               loop::Call(Intrinsic::kExp, {x}))),
      loop::Store(mask, {lanes}, loop::Not(positive)),
      loop::Store(q, {lanes},
                  loop::FloorDiv(as_int, loop::Broadcast(loop::IntImm(3, DType::kInt32), 8))),
      loop::Store(h, {lanes},
                  loop::Cast(DType::kBFloat16,
                             loop::Call(Intrinsic::kSqrt, {loop::Call(Intrinsic::kFabs, {x})}))),
  });
  auto mod = BuildLLVM({MakeFunc("vexpr", {a, out, mask, q, h}, 1, {},
                                 loop::For(io, I(0), I(n / 8), ForKind::kSerial, body))});
  std::vector<float> av(n), o(n);
  std::vector<uint8_t> m(n, 7);
  std::vector<int32_t> qv(n);
  std::vector<BFloat16> hv(n);
  for (int k = 0; k < n; ++k) av[k] = 0.37f * static_cast<float>(k) - 6.1f;
  Call(mod->Lookup("vexpr"), {av.data(), o.data(), m.data(), qv.data(), hv.data()});
  for (int k = 0; k < n; ++k) {
    EXPECT_NEAR(o[k], av[k] > 0 ? std::tanh(av[k]) : std::exp(av[k]), 1e-6) << k;
    EXPECT_EQ(m[k], av[k] > 0 ? 0 : 1) << k;
    int32_t iv = static_cast<int32_t>(av[k]);
    EXPECT_EQ(qv[k], iv >= 0 ? iv / 3 : -((-iv + 2) / 3)) << k;
    EXPECT_EQ(hv[k].bits, BFloat16(std::sqrt(std::fabs(av[k]))).bits) << k;
  }
}

// kVectorized on a scalar body and kUnrolled: correct results, and the loop hints are in the
// IR (before optimization consumes them, so at -O0).
TEST(LLVMCodegen, VectorizedAndUnrolledLoops) {
  Var n = loop::MakeVar("n");
  Var i = loop::MakeVar("i"), j = loop::MakeVar("j"), k = loop::MakeVar("k");
  Buffer a = Buf("a", DType::kFloat32, {n, I(8)}), out = Buf("out", DType::kFloat32, {n, I(8)});
  Stmt body = loop::For(
      i, I(0), n, ForKind::kSerial,
      loop::Seq(
          {loop::For(j, I(0), I(8), ForKind::kVectorized,
                     loop::Store(out, {i, j}, loop::Mul(loop::Load(a, {i, j}), loop::FloatImm(3)))),
           loop::For(
               k, I(0), I(4), ForKind::kUnrolled,
               loop::Store(out, {i, k}, loop::Add(loop::Load(out, {i, k}), loop::FloatImm(1))))}));
  auto f = MakeFunc("hints", {a, out}, 1, {n}, body);
  for (int level : {0, 3}) {
    CodegenOptions options;
    options.opt_level = level;
    auto mod = BuildLLVM({f}, options);
    if (level == 0) {
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.vectorize.enable"));
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.vectorize.width"));
      EXPECT_THAT(mod->source(), HasSubstr("llvm.loop.unroll.full"));
    }
    const int64_t rows = 5;
    std::vector<float> x(rows * 8), y(rows * 8);
    for (int e = 0; e < rows * 8; ++e) x[e] = static_cast<float>(e) - 7;
    Call(mod->Lookup("hints"), {x.data(), y.data()}, {rows});
    for (int e = 0; e < rows * 8; ++e) EXPECT_EQ(y[e], x[e] * 3 + (e % 8 < 4 ? 1 : 0)) << e;
  }
}

// A serial loop that carries two sums gets interleaving and no-unroll hints (a loop of one sum
// or one that stores along its variable gets none); the sums come out right either way.
TEST(LLVMCodegen, LoopsOfTwoSumsAreInterleaved) {
  Var k = loop::MakeVar("k");
  const int64_t len = 300;
  Buffer a = Buf("a", DType::kFloat32, {I(len)}), out = Buf("out", DType::kFloat32, {I(2)});
  auto sums = [&](bool two) {
    Stmt update0 = loop::Store(out, {I(0)}, loop::Add(loop::Load(out, {I(0)}), loop::Load(a, {k})));
    Stmt update1 = loop::Store(
        out, {I(1)},
        loop::Add(loop::Load(out, {I(1)}), loop::Mul(loop::Load(a, {k}), loop::Load(a, {k}))));
    Stmt body = loop::Seq({loop::Store(out, {I(0)}, loop::FloatImm(0)),
                           loop::Store(out, {I(1)}, loop::FloatImm(0)),
                           loop::For(k, I(0), I(len), ForKind::kSerial,
                                     two ? loop::Seq({update0, update1}) : update0)});
    return MakeFunc(two ? "two_sums" : "one_sum", {a, out}, 1, {}, body);
  };
  for (bool two : {false, true}) {
    CodegenOptions o0;
    o0.opt_level = 0;
    std::string source = BuildLLVM({sums(two)}, o0)->source();
    EXPECT_EQ(source.find("llvm.loop.interleave.count") != std::string::npos, two) << source;
    EXPECT_EQ(source.find("llvm.loop.unroll.disable") != std::string::npos, two) << source;
    auto mod = BuildLLVM({sums(two)}, CodegenOptions{});
    std::vector<float> x(len), y(2, -1);
    double s = 0, s2 = 0;
    for (int e = 0; e < len; ++e) {
      x[e] = static_cast<float>((e * 37) % 101) / 50.0f - 1.0f;
      s += x[e];
      s2 += static_cast<double>(x[e]) * x[e];
    }
    Call(mod->Lookup(two ? "two_sums" : "one_sum"), {x.data(), y.data()});
    EXPECT_NEAR(y[0], s, 1e-4);
    if (two) {
      EXPECT_NEAR(y[1], s2, 1e-3);
    }
  }
}

// A loop of one sum or max over a short constant trip count (under 8 vectors) gets a vector
// width, no interleaving and no unroll, so LLVM vectorizes it instead of unrolling it into one
// scalar chain; longer and shorter ones get no hint. Sums and maxima come out right either way,
// for trip counts the width divides (40: 8 lanes), does not (49), and at the edges (8, 9).
TEST(LLVMCodegen, ShortReductionsGetAVectorWidth) {
  Var k = loop::MakeVar("k");
  for (int64_t len : {5, 8, 9, 12, 40, 49, 63, 300}) {
    SCOPED_TRACE(len);
    Buffer a = Buf("a", DType::kFloat32, {I(len)}), out = Buf("out", DType::kFloat32, {I(2)});
    Expr sum = loop::Load(out, {I(0)}), max = loop::Load(out, {I(1)}), v = loop::Load(a, {k});
    Stmt body = loop::Seq(
        {loop::Store(out, {I(0)}, loop::FloatImm(0)),
         loop::For(k, I(0), I(len), ForKind::kSerial, loop::Store(out, {I(0)}, loop::Add(sum, v))),
         loop::Store(out, {I(1)}, loop::FloatImm(-INFINITY)),
         loop::For(k, I(0), I(len), ForKind::kSerial,
                   loop::Store(out, {I(1)},
                               loop::Select(loop::MakeBinary(BinaryOp::kGT, v, max), v, max)))});
    auto f = MakeFunc("short_sum", {a, out}, 1, {}, body);
    CodegenOptions o0;
    o0.opt_level = 0;
    const std::string source = BuildLLVM({f}, o0)->source();
    // Hinted below 8 vectors of the target's f32 lanes (16 with AVX-512, 8 with AVX2).
    const int64_t lanes = VectorRegisterBits(o0) / 32;
    const bool hinted = len >= 8 && len < 8 * lanes;
    EXPECT_EQ(source.find("llvm.loop.vectorize.width") != std::string::npos, hinted) << source;
    EXPECT_EQ(source.find("llvm.loop.unroll.disable") != std::string::npos, hinted) << source;
    auto mod = BuildLLVM({f}, CodegenOptions{});
    std::vector<float> x(len), y(2, -1);
    double s = 0;
    float m = -INFINITY;
    for (int64_t e = 0; e < len; ++e) {
      x[e] = static_cast<float>((e * 37) % 101) / 50.0f - 1.0f;
      s += x[e];
      m = std::max(m, x[e]);
    }
    Call(mod->Lookup("short_sum"), {x.data(), y.data()});
    EXPECT_NEAR(y[0], s, 1e-4);
    EXPECT_EQ(y[1], m);
    // Without reassociation the hint would still let LLVM split the sum into partial sums
    // (an explicit width allows reordering): no hint, and the sum is the in-order one.
    CodegenOptions exact;
    exact.reassociate_reductions = false;
    exact.fp_contract = false;
    auto strict = BuildLLVM({f}, exact);
    EXPECT_EQ(strict->source().find("llvm.loop.vectorize.width"), std::string::npos);
    float in_order = 0;
    for (float e : x) in_order += e;
    Call(strict->Lookup("short_sum"), {x.data(), y.data()});
    EXPECT_EQ(y[0], in_order);
    EXPECT_EQ(y[1], m);
  }
}

// Symbolic extents (shape-generic kernels): a tail shorter than a vector (`n % 4`) keeps its
// scalar loop, neither vectorized nor unrolled, and a loop over `n` is not unrolled; constant
// extents get no such hint. Each copies right for every n, 0 and 1 included.
TEST(LLVMCodegen, SymbolicLoopsAreNotUnrolled) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i"), j = loop::MakeVar("j"),
      k = loop::MakeVar("k");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n}),
         c = Buf("c", DType::kFloat32, {I(64)}), cout = Buf("cout", DType::kFloat32, {I(64)});
  Expr full = loop::Mul(loop::FloorDiv(n, I(4)), I(4));
  Stmt body = loop::Seq(
      {Loop1D(i, full, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(2)))),
       loop::For(j, full, loop::FloorMod(n, I(4)), ForKind::kSerial,
                 loop::Store(out, {j}, loop::Mul(loop::Load(a, {j}), loop::FloatImm(3)))),
       Loop1D(k, I(64), loop::Store(cout, {k}, loop::Load(c, {k})))});
  auto f = MakeFunc("sym", {a, out, c, cout}, 2, {n}, body);
  CodegenOptions o0;
  o0.opt_level = 0;
  const std::string source = BuildLLVM({f}, o0)->source();
  // Two symbolic loops hinted (the constant one not), not to unroll, the tail not to vectorize.
  size_t hinted = 0, at = 0;
  while ((at = source.find("!llvm.loop !", at)) != std::string::npos) ++hinted, ++at;
  EXPECT_EQ(hinted, 2u) << source;
  EXPECT_THAT(source, HasSubstr("!{!\"llvm.loop.unroll.disable\"}"));
  EXPECT_THAT(source, HasSubstr("!{!\"llvm.loop.vectorize.enable\", i1 false}"));
  auto mod = BuildLLVM({f});
  std::vector<float> x(64), y(64), cx(64, 1.5f), cy(64);
  for (int e = 0; e < 64; ++e) x[e] = static_cast<float>(e) - 20.5f;
  for (int64_t len : {0, 1, 3, 4, 17, 63, 64}) {
    std::fill(y.begin(), y.end(), -7.0f);
    Call(mod->Lookup("sym"), {x.data(), y.data(), cx.data(), cy.data()}, {len});
    const int64_t cut = len / 4 * 4;
    for (int64_t e = 0; e < 64; ++e)
      EXPECT_EQ(y[e], e < cut ? x[e] * 2 : e < len ? x[e] * 3 : -7.0f) << len << " " << e;
    EXPECT_EQ(cy, cx);
  }
}

// A kMaxOrdered update (`acc = v > acc ? v : acc`, as LowerReductions writes it) becomes a
// vectorized llvm.maxnum: the max of any length, odd ones and 1 included, is exact.
TEST(LLVMCodegen, OrderedMaxIsAVectorMax) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {I(1)});
  Expr acc = loop::Load(out, {I(0)}), v = loop::Load(a, {i});
  Stmt update =
      loop::Store(out, {I(0)}, loop::Select(loop::MakeBinary(BinaryOp::kGT, v, acc), v, acc));
  Stmt body =
      loop::Seq({loop::Store(out, {I(0)}, loop::FloatImm(-INFINITY)), Loop1D(i, n, update)});
  auto mod = BuildLLVM({MakeFunc("omax", {a, out}, 1, {n}, body)});
  EXPECT_THAT(mod->source(), HasSubstr("llvm.maxnum"));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100, 100);
  for (int64_t len : {1, 7, 300, 4099}) {
    std::vector<float> x(len);
    for (float& e : x) e = dist(rng);
    float result = 0;
    Call(mod->Lookup("omax"), {x.data(), &result}, {len});
    EXPECT_EQ(result, *std::max_element(x.begin(), x.end())) << len;
  }
}

// ---- schedule blocks ----

// out[i] = sum_k in[i, k] as a block with a reduction iter_var and an init.
TEST(LLVMCodegen, ScheduleBlockRunsInitOnFirstReductionIteration) {
  Var i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Var vi = loop::MakeVar("vi"), vk = loop::MakeVar("vk");
  Buffer in = Buf("in", DType::kInt32, {I(6), I(5)}), out = Buf("out", DType::kInt32, {I(6)});
  auto block = std::make_shared<loop::ScheduleBlockNode>();
  block->name = "rowsum";
  block->iter_vars = {{vi, I(6)}, {vk, I(5)}};
  block->is_reduce = {false, true};
  block->bindings = {i, k};
  block->init = loop::Store(out, {vi}, loop::IntImm(0, DType::kInt32));
  block->body = loop::Store(out, {vi}, loop::Add(loop::Load(out, {vi}), loop::Load(in, {vi, vk})));
  Stmt body =
      loop::For(i, I(0), I(6), ForKind::kSerial, loop::For(k, I(0), I(5), ForKind::kSerial, block));
  auto mod = BuildLLVM({MakeFunc("rowsum", {in, out}, 1, {}, body)});
  std::vector<int32_t> x(30), y(6, 12345);
  for (int e = 0; e < 30; ++e) x[e] = e - 10;
  Call(mod->Lookup("rowsum"), {x.data(), y.data()});
  for (int r = 0; r < 6; ++r) {
    int32_t s = 0;
    for (int c = 0; c < 5; ++c) s += x[r * 5 + c];
    EXPECT_EQ(y[r], s);
  }
}

// ---- options ----

TEST(LLVMCodegen, FastMathSumStaysClose) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {I(1)});
  Stmt body = loop::Seq(
      {loop::Store(out, {I(0)}, loop::FloatImm(0)),
       Loop1D(i, n,
              loop::Store(out, {I(0)}, loop::Add(loop::Load(out, {I(0)}), loop::Load(a, {i}))))});
  CodegenOptions options;
  options.fast_math = true;
  auto mod = BuildLLVM({MakeFunc("sum", {a, out}, 1, {n}, body)}, options);
  std::vector<float> x(10000);
  double expected = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    x[e] = static_cast<float>(e % 13) * 0.1f;
    expected += x[e];
  }
  float result = 0;
  Call(mod->Lookup("sum"), {x.data(), &result}, {static_cast<int64_t>(x.size())});
  EXPECT_NEAR(result, expected, 1e-3 * expected);
}

// mattr on the host CPU is appended to its features: turning AVX2 and FMA off still works.
TEST(LLVMCodegen, HostCpuWithFeaturesTurnedOff) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  Expr x = loop::Load(a, {i});
  auto f = MakeFunc("axpy", {a, out}, 1, {n},
                    Loop1D(i, n, loop::Store(out, {i}, loop::Add(loop::Mul(x, x), x))));
  CodegenOptions options;
  options.mattr = "-avx2,-fma";
  auto mod = BuildLLVM({f}, options);
  std::vector<float> xs(77), ys(77);
  for (int k = 0; k < 77; ++k) xs[k] = 0.3f * static_cast<float>(k) - 9;
  Call(mod->Lookup("axpy"), {xs.data(), ys.data()}, {77});
  for (int k = 0; k < 77; ++k) EXPECT_EQ(ys[k], xs[k] * xs[k] + xs[k]) << k;
}

// ---- errors ----

TEST(LLVMCodegen, ReduceIsRejected) {
  Var i = loop::MakeVar("i"), k = loop::MakeVar("k");
  Buffer in = Buf("in", DType::kFloat32, {I(4), I(4)}), out = Buf("out", DType::kFloat32, {I(4)});
  Expr sum = loop::Reduce(loop::ReduceKind::kSum, loop::Load(in, {i, k}), {{k, I(4)}});
  auto f = MakeFunc("withreduce", {in, out}, 1, {}, Loop1D(i, I(4), loop::Store(out, {i}, sum)));
  Error e = test::ErrorOf([&] { BuildLLVM({f}); });
  EXPECT_EQ(e.code(), ErrorCode::kCompileError);
  EXPECT_THAT(e.what(), HasSubstr("@withreduce: Reduce must be lowered first"));
}

TEST(LLVMCodegen, GpuLoopIsRejected) {
  Var i = loop::MakeVar("i");
  Buffer out = Buf("out", DType::kInt64, {I(4)});
  auto f = MakeFunc("ongpu", {out}, 0, {},
                    Loop1D(i, I(4), loop::Store(out, {i}, i), ForKind::kGpuThreadX));
  Error e = test::ErrorOf([&] { BuildLLVM({f}); });
  EXPECT_EQ(e.code(), ErrorCode::kCompileError);
  EXPECT_THAT(e.what(), HasSubstr("@ongpu: loop 'i' is bound to gpu.thread.x"));
}

TEST(LLVMCodegen, OtherErrors) {
  Var undefined = loop::MakeVar("u");
  Buffer out = Buf("out", DType::kInt64, {I(4)});
  auto f = MakeFunc("undef", {out}, 0, {}, loop::Store(out, {I(0)}, undefined));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({f}); }),
              HasSubstr("@undef: variable 'u' is used but not defined"));
  auto g = MakeFunc("dup", {out}, 0, {}, loop::Store(out, {I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] {
                BuildLLVM({g, g});
              }),
              HasSubstr("@dup: two functions have this name"));
  auto libm = MakeFunc("expf", {out}, 0, {}, loop::Store(out, {I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({libm}); }),
              HasSubstr("@expf: the name of a library function that generated code calls"));
  auto h = MakeFunc("rank", {out}, 0, {}, loop::Store(out, {I(0), I(0)}, I(1)));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({h}); }),
              HasSubstr("@rank: buffer 'out' has rank 1 but is accessed with 2"));
  auto bad_call = MakeFunc("intexp", {out}, 0, {},
                           loop::Store(out, {I(0)}, loop::Call(Intrinsic::kExp, {I(2)})));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({bad_call}); }),
              HasSubstr("@intexp: exp needs float arguments"));
  auto mod = BuildLLVM({g});
  try {
    mod->Lookup("nope");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("no kernel 'nope'"));
  }
}

TEST(LLVMCodegen, IllTypedNodesAreCompileErrors) {
  Buffer out = Buf("out", DType::kInt64, {I(1)});
  // Built without MakeBinary, which would have refused it.
  Expr bad = std::make_shared<const loop::BinaryNode>(
      BinaryOp::kAdd, I(1), loop::IntImm(2, DType::kInt32), DType::kInt64, 1);
  auto f = MakeFunc("illtyped", {out}, 0, {}, loop::Store(out, {I(0)}, bad));
  EXPECT_THAT(ErrorMessage([&] { BuildLLVM({f}); }),
              HasSubstr("@illtyped: operands of '+' differ: i64x1 vs i32x1"));
}

// Builds are independent: several threads may compile (and run) at once.
TEST(LLVMCodegen, ConcurrentBuilds) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ok] {
      Var i = loop::MakeVar("i");
      Buffer out = Buf("out", DType::kInt64, {I(100)});
      auto f = MakeFunc(
          "fill", {out}, 0, {},
          Loop1D(i, I(100), loop::Store(out, {i}, loop::Mul(i, I(t + 1))), ForKind::kParallel));
      auto mod = BuildLLVM({f});
      std::vector<int64_t> o(100);
      Call(mod->Lookup("fill"), {o.data()});
      bool good = true;
      for (int k = 0; k < 100; ++k) good = good && o[k] == k * (t + 1);
      ok[t] = good;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

// ---- timings, source, registry ----

TEST(LLVMCodegen, TimingsSourceAndRegistry) {
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  auto f = MakeFunc(
      "scale_by_two", {a, out}, 1, {n},
      Loop1D(i, n, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(2)))));
  auto mod = GetCodegen("target.build.llvm").build({f}, CodegenOptions{});
  const CompileTimings& t = mod->timings();
  EXPECT_GE(t.lower_ms, 0);
  EXPECT_GE(t.opt_ms, 0);
  EXPECT_GT(t.codegen_ms, 0);
  EXPECT_THAT(mod->source(), HasSubstr("define void @scale_by_two(ptr"));
  std::vector<float> x = {1, 2, 3}, y(3);
  Call(mod->Lookup("scale_by_two"), {x.data(), y.data()}, {3});
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
  std::printf("compile times for a small kernel: lower %.2f ms, opt %.2f ms, codegen %.2f ms\n",
              t.lower_ms, t.opt_ms, t.codegen_ms);
  // The launch object: a CPU function, the PrimFunc's argument layout.
  const KernelEntry& e = mod->Entry("scale_by_two");
  EXPECT_FALSE(e.on_device());
  EXPECT_EQ(e.cpu, mod->Lookup("scale_by_two"));
  EXPECT_EQ(e.num_buffers, 2u);
  ASSERT_EQ(e.scalar_params.size(), 1u);
  EXPECT_EQ(e.scalar_params[0].get(), n.get());
  EXPECT_THAT(ErrorMessage([&] { mod->Entry("nope"); }),
              HasSubstr("no kernel 'nope' in this module (it has: scale_by_two)"));
}

TEST(CodegenRegistry, FindsEveryTargetOfTheListByKindOrName) {
  for (const char* kind : {"llvm", "cuda"}) {
    const CodeGenerator& g = GetCodegen(kind);
    EXPECT_EQ(g.kind, kind);
    EXPECT_EQ(&GetCodegen(std::string("target.build.") + kind), &g);
    EXPECT_TRUE(g.build && g.options && g.identity && g.emit) << kind;
    EXPECT_FALSE(g.formats.empty()) << kind;
    for (const CodeGenerator::EmitFormat& f : g.formats)
      EXPECT_TRUE(!f.name.empty() && f.extension.size() > 1 && f.extension[0] == '.')
          << kind << " format '" << f.name << "' extension '" << f.extension << "'";
  }
  EXPECT_EQ(GetCodegen("llvm").loop_pipeline, "cpu");
  EXPECT_EQ(GetCodegen("cuda").loop_pipeline, "gpu");
  EXPECT_THAT(ErrorMessage([] { GetCodegen("opencl"); }),
              HasSubstr("no code generator 'target.build.opencl' (registered: target.build.cuda, "
                        "target.build.llvm"));
  // Options come from a Target of the kind; the identity names what the code depends on.
  CodegenOptions cuda = GetCodegen("cuda").options(Target::Parse("cuda -arch=sm_80"));
  EXPECT_EQ(cuda.kind, "cuda");
  EXPECT_EQ(cuda.arch, "sm_80");
  EXPECT_THAT(GetCodegen("cuda").identity(cuda), HasSubstr("arch=sm_80"));
  CodegenOptions cpu = GetCodegen("llvm").options(Target::Parse("llvm -mcpu=znver3 -mattr=-avx2"));
  EXPECT_EQ(cpu.kind, "llvm");
  EXPECT_EQ(cpu.mcpu, "znver3");
  EXPECT_EQ(cpu.mattr, "-avx2");
  EXPECT_THAT(GetCodegen("llvm").identity(cpu), HasSubstr("x86_64"));
  EXPECT_THAT(GetCodegen("llvm").identity(cpu), HasSubstr("znver3"));
}

TEST(CodegenRegistry, AnotherTargetIsOneRegistration) {
  // A code generator registered at run time is found like the built-in ones; here one that
  // builds with LLVM under its own kind, as a third target would build with its own code.
  CodeGenerator g = GetCodegen("llvm");
  g.kind = "llvm_for_test";
  RegisterCodegen(g);
  EXPECT_EQ(GetCodegen("llvm_for_test").kind, "llvm_for_test");
  EXPECT_THAT(ErrorMessage([&] { RegisterCodegen(g); }),
              HasSubstr("code generator 'target.build.llvm_for_test' is already registered"));
  Var n = loop::MakeVar("n"), i = loop::MakeVar("i");
  Buffer a = Buf("a", DType::kFloat32, {n}), out = Buf("out", DType::kFloat32, {n});
  auto f = MakeFunc(
      "negate", {a, out}, 1, {n},
      Loop1D(i, n, loop::Store(out, {i}, loop::Mul(loop::Load(a, {i}), loop::FloatImm(-1)))));
  auto mod = GetCodegen("llvm_for_test").build({f}, CodegenOptions{});
  std::vector<float> x = {1, -2, 3}, y(3);
  Call(mod->Lookup("negate"), {x.data(), y.data()}, {3});
  EXPECT_EQ(y, (std::vector<float>{-1, 2, -3}));
}

}  // namespace
}  // namespace kiln
