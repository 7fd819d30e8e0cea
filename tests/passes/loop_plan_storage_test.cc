// PlanStorage: golden tests on printed loop IR, run through the pass manager; kernels compiled
// before and after; and the bytes it saves on a layer_norm-like kernel and on the lowered
// softmax and layer_norm ops.
#include <gtest/gtest.h>

#include <cstring>

#include "common/kernel_test_util.h"
#include "common/loop_test_util.h"
#include "engine/compile.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/kernel.h"
#include "passes/loop_pass.h"

namespace kiln::loop {
namespace {

using test::MakePrimFunc;
using test::RunF32Kernel;
using test::RunLoopPipeline;

Expr I(int64_t v) {
  return IntImm(v);
}
Expr F(double v) {
  return FloatImm(v);
}

std::string Planned(const PrimFunc& f) {
  return Print(RunLoopPipeline("PlanStorage", f));
}

Stmt Loop(const Var& v, Expr extent, Stmt body, ForKind kind = ForKind::kSerial) {
  return For(v, I(0), std::move(extent), kind, std::move(body));
}

Buffer Local(const std::string& name, std::vector<Expr> shape, DType t = DType::kFloat32,
             std::vector<Expr> strides = {}) {
  return MakeBuffer(name, t, std::move(shape), BufferNode::Scope::kLocal, std::move(strides));
}

// The bytes of local storage a kernel's Allocs ask for (constant sizes only).
int64_t LocalBytes(const PrimFunc& f) {
  struct Counter : Visitor {
    int64_t bytes = 0;
    void VisitAlloc(const AllocNode* n, const Stmt&) override {
      int64_t numel = 1, d;
      for (const Expr& e : n->buffer->shape) numel *= IsConstInt(e, &d) ? d : 0;
      bytes += numel * DTypeSize(n->buffer->dtype);
    }
  } counter;
  counter.VisitStmt(f->body);
  return counter.bytes;
}

// ---- hoisting ----

TEST(PlanStorage, HoistsOutOfSerialNests) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(4)});
  Buffer t = Local("t", {I(2)});
  Stmt body = Loop(i, n,
                   Loop(j, I(4),
                        Seq({Alloc(t), Store(t, {I(1)}, F(1.0)),
                             Store(out, {i, j}, Load(t, {I(1)})), Free(t)})));
  // The body is a single loop: no Seq around it, and still hoisted.
  EXPECT_EQ(Planned(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: f32[n, 4]; n: i64) {\n"
            "  alloc t: f32[2] local\n"
            "  for i in [0, n) {\n"
            "    for j in [0, 4) {\n"
            "      t[1] = 1.0f\n"
            "      out[i, j] = t[1]\n"
            "    }\n"
            "  }\n"
            "  free t\n"
            "}\n");
}

// Parallel and vectorized iterations run at once: they keep their own buffers. Symbolic sizes
// and allocations without a Free in the loop body stay too.
TEST(PlanStorage, NoHoistingPastParallelLoopsOrOfSymbolicSizes) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k"), l = MakeVar("l");
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(4)});
  Buffer t = Local("t", {I(2)}), u = Local("u", {I(2)}), s = Local("s", {n}),
         w = Local("w", {I(2)});
  Stmt body = Seq({
      Loop(i, n,
           Loop(j, I(4),
                Seq({Alloc(t), Store(t, {I(0)}, F(1.0)), Store(out, {i, j}, Load(t, {I(0)})),
                     Free(t)})),
           ForKind::kParallel),
      Loop(k, I(4),
           Seq({Alloc(u), Store(u, {I(0)}, F(2.0)), Store(out, {I(0), k}, Load(u, {I(0)})),
                Free(u)}),
           ForKind::kVectorized),
      Loop(l, I(4),
           Seq({Alloc(s), Store(s, {I(0)}, F(3.0)), Store(out, {I(1), l}, Load(s, {I(0)})),
                Free(s)})),
      Loop(l, I(4), Seq({Alloc(w), Store(out, {I(2), l}, F(4.0))})),
  });
  EXPECT_EQ(Planned(MakePrimFunc({out}, {n}, body)),
            "func @f(%out: f32[n, 4]; n: i64) {\n"
            "  for i in [0, n) parallel {\n"
            "    alloc t: f32[2] local\n"
            "    for j in [0, 4) {\n"
            "      t[0] = 1.0f\n"
            "      out[i, j] = t[0]\n"
            "    }\n"
            "    free t\n"
            "  }\n"
            "  for k in [0, 4) vectorized {\n"
            "    alloc u: f32[2] local\n"
            "    u[0] = 2.0f\n"
            "    out[0, k] = u[0]\n"
            "    free u\n"
            "  }\n"
            "  for l in [0, 4) {\n"
            "    alloc s: f32[n] local\n"
            "    s[0] = 3.0f\n"
            "    out[1, l] = s[0]\n"
            "    free s\n"
            "  }\n"
            "  for l in [0, 4) {\n"
            "    alloc w: f32[2] local\n"
            "    out[2, l] = 4.0f\n"
            "  }\n"
            "}\n");
}

// ---- sharing ----

// Same layout: the later buffer becomes the earlier one, whose Free moves to the later one's.
TEST(PlanStorage, SharesBuffersOfOneLayout) {
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(2)});
  Buffer a = Local("a", {I(2), I(2)}), b = Local("b", {I(2), I(2)});
  Stmt body =
      Seq({Alloc(a), Store(a, {I(0), I(1)}, F(1.0)), Store(out, {I(0)}, Load(a, {I(0), I(1)})),
           Free(a), Alloc(b), Store(b, {I(1), I(0)}, F(2.0)),
           Store(out, {I(1)}, Load(b, {I(1), I(0)})), Free(b)});
  std::vector<Diagnostic> notes;
  PrimFunc g = RunLoopPipeline("PlanStorage", MakePrimFunc({out}, {}, body), {}, &notes);
  EXPECT_EQ(Print(g),
            "func @f(%out: f32[2]) {\n"
            "  alloc a: f32[2, 2] local\n"
            "  a[0, 1] = 1.0f\n"
            "  out[0] = a[0, 1]\n"
            "  a[1, 0] = 2.0f\n"
            "  out[1] = a[1, 0]\n"
            "  free a\n"
            "}\n");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].pass, "PlanStorage");
  EXPECT_EQ(notes[0].message, "@f: sharing local storage saves 16 bytes");
}

// Flat accesses (after FlattenBuffers) let buffers of different layouts share a rank-1 buffer of
// the largest span; best fit picks the slot that grows least.
TEST(PlanStorage, SharesFlatBuffersOfDifferentLayouts) {
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(4)});
  Buffer small = Local("small", {I(1)}),
         big = Local("big", {I(2), I(3)}, DType::kFloat32, {I(3), I(1)});
  Buffer c = Local("c", {I(4)}), d = Local("d", {I(2)});
  Stmt body = Seq({
      Alloc(small),
      Alloc(c),  // both live together
      Store(small, {I(0)}, F(1.0)),
      Store(c, {I(3)}, Load(small, {I(0)})),
      Free(small),
      Alloc(big),
      Store(big, {I(5)}, Load(c, {I(3)})),
      Store(out, {I(0)}, Load(big, {I(5)})),
      Free(c),
      Alloc(d),
      Store(d, {I(1)}, Load(big, {I(5)})),
      Store(out, {I(1)}, Load(d, {I(1)})),
      Free(d),
      Free(big),
  });
  EXPECT_EQ(Planned(MakePrimFunc({out}, {}, body)),
            "func @f(%out: f32[4]) {\n"
            "  alloc small: f32[6] local\n"
            "  alloc c: f32[4] local\n"
            "  small[0] = 1.0f\n"
            "  c[3] = small[0]\n"
            "  small[5] = c[3]\n"
            "  out[0] = small[5]\n"
            "  c[1] = small[5]\n"
            "  out[1] = c[1]\n"
            "  free c\n"
            "  free small\n"
            "}\n");
}

// Must not share: overlapping lifetimes, other dtypes, different layouts addressed per dim,
// block regions, symbolic sizes, a buffer allocated twice.
TEST(PlanStorage, BuffersThatDoNotShare) {
  Var n = MakeVar("n"), vi = MakeVar("vi");
  Buffer out = MakeBuffer("out", DType::kFloat32, {I(8)});
  Buffer a = Local("a", {I(4)}), b = Local("b", {I(4)});  // overlap
  Buffer c = Local("c", {I(4)}, DType::kInt32);           // another dtype
  Buffer d = Local("d", {I(2), I(2)});                    // per-dim, other layout
  Buffer e = Local("e", {I(4)});                          // in a block region
  Buffer s = Local("s", {n});                             // symbolic
  Buffer r = Local("r", {I(4)});                          // allocated twice
  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = "fill";
  block->iter_vars = {{vi, I(4)}};
  block->is_reduce = {false};
  block->bindings = {I(0)};
  block->writes = {{e, {vi}, {I(1)}}};
  block->body = Store(e, {vi}, F(5.0));
  Stmt body = Seq({
      Alloc(a),
      Alloc(b),
      Store(a, {I(0)}, F(1.0)),
      Store(b, {I(0)}, Load(a, {I(0)})),
      Free(a),
      Store(out, {I(0)}, Load(b, {I(0)})),
      Free(b),
      Alloc(c),
      Store(c, {I(0)}, IntImm(3, DType::kInt32)),
      Free(c),
      Alloc(d),
      Store(d, {I(1), I(1)}, F(4.0)),
      Store(out, {I(1)}, Load(d, {I(1), I(1)})),
      Free(d),
      Alloc(e),
      Stmt(block),
      Store(out, {I(2)}, Load(e, {I(3)})),
      Free(e),
      Alloc(s),
      Store(s, {I(0)}, F(6.0)),
      Free(s),
      Alloc(r),
      Store(r, {I(0)}, F(7.0)),
      Free(r),
      Alloc(r),
      Store(out, {I(3)}, F(8.0)),
      Free(r),
  });
  PrimFunc f = MakePrimFunc({out}, {n}, body);
  EXPECT_EQ(RunLoopPipeline("PlanStorage", f), f);
}

// Inner blocks first: buffers of a loop body share, and then the shared buffer leaves the loop
// (the example at the top of plan_storage.cc).
TEST(PlanStorage, SharesInsideLoopsThenHoists) {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer x =
      MakeBuffer("x", DType::kFloat32, {n, I(16)}, BufferNode::Scope::kGlobal, {I(16), I(1)});
  Buffer y = MakeBuffer("y", DType::kFloat32, {n}), z = MakeBuffer("z", DType::kFloat32, {n});
  Buffer mx = Local("mx", {I(1)}), sum = Local("s", {I(1)});
  Expr xij = Load(x, {Add(Mul(i, I(16)), j)});
  Stmt body =
      Loop(i, n,
           Seq({Alloc(mx), Store(mx, {I(0)}, F(-INFINITY)),
                Loop(j, I(16), Store(mx, {I(0)}, Max(Load(mx, {I(0)}), xij))),
                Store(y, {i}, Load(mx, {I(0)})), Free(mx), Alloc(sum), Store(sum, {I(0)}, F(0.0)),
                Loop(j, I(16), Store(sum, {I(0)}, Add(Load(sum, {I(0)}), xij))),
                Store(z, {i}, Load(sum, {I(0)})), Free(sum)}));
  EXPECT_EQ(Planned(MakePrimFunc({x, y, z}, {n}, body, "f", /*num_inputs=*/1)),
            "func @f(%x: f32[n, 16] strides [16, 1], %y: f32[n], %z: f32[n]; n: i64) num_inputs=1 "
            "{\n"
            "  alloc mx: f32[1] local\n"
            "  for i in [0, n) {\n"
            "    mx[0] = f32(-inf)\n"
            "    for j in [0, 16) {\n"
            "      mx[0] = max(mx[0], x[i * 16 + j])\n"
            "    }\n"
            "    y[i] = mx[0]\n"
            "    mx[0] = 0.0f\n"
            "    for j in [0, 16) {\n"
            "      mx[0] = mx[0] + x[i * 16 + j]\n"
            "    }\n"
            "    z[i] = mx[0]\n"
            "  }\n"
            "  free mx\n"
            "}\n");
}

// A layer_norm-like row kernel with five local intermediates, as FlattenBuffers leaves it.
PrimFunc LayerNormLike() {
  Var n = MakeVar("n"), i = MakeVar("i"), j = MakeVar("j");
  Buffer x =
      MakeBuffer("x", DType::kFloat32, {n, I(16)}, BufferNode::Scope::kGlobal, {I(16), I(1)});
  Buffer out =
      MakeBuffer("out", DType::kFloat32, {n, I(16)}, BufferNode::Scope::kGlobal, {I(16), I(1)});
  Buffer mean = Local("mean", {I(1)}), xc = Local("xc", {I(16)}), sq = Local("sq", {I(16)});
  Buffer var = Local("var", {I(1)}), y = Local("y", {I(2), I(8)}, DType::kFloat32, {I(8), I(1)});
  Expr xij = Load(x, {Add(Mul(i, I(16)), j)});
  Expr zero = I(0);
  Stmt body = Loop(
      i, n,
      Seq({Alloc(mean), Store(mean, {zero}, F(0.0)),
           Loop(j, I(16), Store(mean, {zero}, Add(Load(mean, {zero}), xij))),
           Store(mean, {zero}, Div(Load(mean, {zero}), F(16.0))), Alloc(xc),
           Loop(j, I(16), Store(xc, {j}, Sub(xij, Load(mean, {zero})))), Free(mean), Alloc(sq),
           Loop(j, I(16), Store(sq, {j}, Mul(Load(xc, {j}), Load(xc, {j})))), Alloc(var),
           Store(var, {zero}, F(0.0)),
           Loop(j, I(16), Store(var, {zero}, Add(Load(var, {zero}), Load(sq, {j})))), Free(sq),
           Alloc(y),
           Loop(j, I(16),
                Store(y, {j},
                      Div(Load(xc, {j}), Call(Intrinsic::kSqrt,
                                              {Add(Div(Load(var, {zero}), F(16.0)), F(1e-5))})))),
           Free(var), Free(xc), Loop(j, I(16), Store(out, {Add(Mul(i, I(16)), j)}, Load(y, {j}))),
           Free(y)}));
  return MakePrimFunc({x, out}, {n}, body, "layer_norm_like");
}

TEST(PlanStorage, LayerNormLikeKernel) {
  PrimFunc f = LayerNormLike();
  std::vector<Diagnostic> notes;
  PrimFunc g = RunLoopPipeline("PlanStorage", f, {}, &notes);
  // mean (1 float), then sq (16) and y (16) take turns in one buffer of 16: 68 of 200 bytes.
  EXPECT_EQ(Print(g),
            "func @layer_norm_like(%x: f32[n, 16] strides [16, 1], %out: f32[n, 16] strides [16, "
            "1]; n: i64) {\n"
            "  alloc mean: f32[16] local\n"
            "  alloc xc: f32[16] local\n"
            "  alloc var: f32[1] local\n"
            "  for i in [0, n) {\n"
            "    mean[0] = 0.0f\n"
            "    for j in [0, 16) {\n"
            "      mean[0] = mean[0] + x[i * 16 + j]\n"
            "    }\n"
            "    mean[0] = mean[0] / 16.0f\n"
            "    for j in [0, 16) {\n"
            "      xc[j] = x[i * 16 + j] - mean[0]\n"
            "    }\n"
            "    for j in [0, 16) {\n"
            "      mean[j] = xc[j] * xc[j]\n"
            "    }\n"
            "    var[0] = 0.0f\n"
            "    for j in [0, 16) {\n"
            "      var[0] = var[0] + mean[j]\n"
            "    }\n"
            "    for j in [0, 16) {\n"
            "      mean[j] = xc[j] / sqrt(var[0] / 16.0f + 1e-05f)\n"
            "    }\n"
            "    for j in [0, 16) {\n"
            "      out[i * 16 + j] = mean[j]\n"
            "    }\n"
            "  }\n"
            "  free var\n"
            "  free xc\n"
            "  free mean\n"
            "}\n");
  EXPECT_EQ(LocalBytes(f), 200);
  EXPECT_EQ(LocalBytes(g), 132);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].message, "@layer_norm_like: sharing local storage saves 68 bytes");

  // Compiled before and after: the same bits.
  const int64_t rows = 5;
  Tensor x = test::RandomTensor(DType::kFloat32, {rows, 16}, 7);
  auto run = [&](const PrimFunc& k) { return RunF32Kernel(k, {x.raw_data()}, rows * 16, {rows}); };
  std::vector<float> before = run(f), after = run(g);
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  EXPECT_NE(before[0], 42.0f);  // the kernel ran
}

// The lowered softmax and layer_norm ops, through this project's own loop passes: what sharing
// saves there (softmax's two f32 accumulators, the max's and the sum's, share; of layer_norm's,
// the first mean's is f64 and its two f32 ones, the sums of x - mean and of its square, share).
TEST(PlanStorage, LoweredSoftmaxAndLayerNorm) {
  struct Op {
    const char* name;
    int64_t saved;
  };
  for (const Op& op : {Op{"softmax", 4}, Op{"layer_norm", 4}}) {
    SCOPED_TRACE(op.name);
    std::vector<Tensor> in{test::RandomTensor(DType::kFloat32, {4, 16}, 3)};
    if (std::string(op.name) == "layer_norm")
      in.push_back(test::RandomTensor(DType::kFloat32, {16}, 4));
    LoweredKernel lowered = LowerToLoops(test::SingleOpFunction(op.name, in, {}, false), op.name);
    PrimFunc f =
        RunLoopPipeline("LoopSimplify,RemoveTrivialLoops,UnrollLoops,FlattenBuffers,LoopSimplify",
                        LowerReductions(lowered.func));
    std::vector<Diagnostic> notes;
    PrimFunc g = RunLoopPipeline("PlanStorage", f, {}, &notes);
    EXPECT_EQ(LocalBytes(f) - LocalBytes(g), op.saved);
    auto run = [&](const PrimFunc& k) {
      std::unique_ptr<CompiledModule> mod = BuildLLVM({k});
      Tensor result = Tensor::Empty(DType::kFloat32, {4, 16});
      std::vector<void*> buffers;
      for (const Tensor& t : in) buffers.push_back(t.raw_data());
      buffers.push_back(result.raw_data());
      mod->Lookup(k->name)(buffers.data(), nullptr);
      return result;
    };
    Tensor before = run(f), after = run(g);
    EXPECT_EQ(std::memcmp(before.raw_data(), after.raw_data(), before.nbytes()), 0);
    EXPECT_TRUE(test::TensorsNear(after, RunOpReference(op.name, in, {}).at(0), 1e-6, 1e-5));
  }
}

}  // namespace
}  // namespace kiln::loop
