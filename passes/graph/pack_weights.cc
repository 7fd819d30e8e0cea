// PackConstantWeights: lays out the constant B of a gemm or a matmul as the panels TileLoops
// reads, once, when the graph is specialized, so the kernel no longer copies them on every run
// (or, with few rows, reads them in place a short run per weight row).
//
//   before:  gemm(%x: f32[32, 784], const(f32[784, 512]))
//   after:   gemm(%x, const(f32[8, 784, 64]), b_panel=64, n=512)
//
// TileLoops computes a product in column tiles of T (tile.j, or 64 on AVX-512) and, with enough
// rows to pay for it, copies each tile's K x T panel of B into a contiguous buffer before the
// rows read it. With the weights constant that copy is the same on every run, and for a
// weight matrix larger than L2 it is a stream from L3 that the rows wait on (the MLP at batch
// 32: about a sixth of its first layer). Here B becomes [ceil(N / T), K, T] (column j of row k
// at [j // T, k, j % T], the columns past N zero), which the gemm reads through its b_panel
// attribute and TileLoops reads in place. On AVX-512 with TileLoops' keys unset, T is 48
// where N is a multiple of 48 or leaves a tail of two vectors or more (TileShape::PanelColumns:
// 512 columns are 10 panels of 48 and one of 32) or M is 64 or less (few row blocks), which
// TileLoops runs 8 rows at a time; 64 otherwise.
//
// A single row (M = 1: a matrix-vector product) is packed too, in the same panels as a few
// rows: its column tiles are what the threads split, and in B's own layout each thread's tile
// is a strided piece of every weight row, whose neighbours the hardware prefetcher pulls into
// that core's L2 as well. In panels, each thread streams only its own (the batch-1 MLP at 2
// threads, weights 2.6 MB in two 2 MB L2s: 37-41 -> 18-20 us, ONNX Runtime 25). The panels
// are the few-rows ones, not TileLoops' wider single-row tile (256 columns on AVX-512), so
// that one packed copy of a weight serves every row count up to 64 and the shape-generic
// tier: a model serving batches of 1 and of 2 to 64 holds its weights once, and a request
// after a switch of row count finds them in cache. AVX-512 Xeon, p50: the batch-1 encoder
// layer at 2 threads 60-66 -> 21 us (its 256-column products were one tile: one thread;
// ONNX Runtime 46), at 1 thread 95 both ways; the batch-1 MLP 67-69 us both ways at 1 thread,
// 13-14 at 2. AVX2 code (-mcpu=znver1) on the same machine: MLP 68 -> 63 us at 1 thread, 19.5
// -> 22 at 2 (16-column panels: two accumulators a row); encoder 104 -> 96 and 31 both ways.
// Switching shapes (kiln bench, 1 thread, tiered): the MLP's first batch-2 request after
// batch 1 ran 0.20 -> 0.15 ms, a batch-1 request after batch 2 0.16 -> 0.08 ms.
//
// Few rows (2 to 4 x tile.i, where TileLoops would not copy panels) are packed too: TileLoops
// reads pre-packed panels in place, and in B's own layout a 64-column tile reads a 256-byte run
// of every weight row, each a page apart, which the prefetcher does not follow (the MLP at
// batch 16, 1 thread: 255 -> 194 us; 2 threads 158 -> 97 us; batch 4: 83 -> 73 and 62 -> 39).
//
// Symbolic rows (a shape-generic executable's batch or sequence) take the panels for few rows:
// unpacked, the generic kernel copied every panel on every run, the whole weight matrix even
// for one row (the generic MLP at 1 x 784, 1 thread, kernel sums: 160 -> 81 us; specialized
// 78-83).
//
// conv_nhwc whose lowering takes the im2col form (ops::ConvNhwcIm2colFits: a reduction KH x KW x C
// past 2048, as in ResNet's 3x3 convs of 256 channels and more) reads its HWIO weight as the
// [KH * KW * C, M] matrix of a product over the pixels' copied taps; that matrix is packed as a
// gemm's B for the batch's pixels as rows, with the attributes w_panel, m and kernel_shape.
// Copied per run, each panel was a 256-byte run from every 2 KiB weight row, which the
// prefetcher does not follow from memory (ResNet-18's 512 -> 512 convs at 7 x 7, p50 of two in
// a row, Zen 5: 3.36 -> 2.74 ms at 1 thread, 2.13 -> 1.46 at 2; ONNX Runtime 2.51 and 1.25).
//
// Rules: a gemm with transB = 0 whose B is a 2-D f32 constant of at least T columns, or of
// fewer than a vector's lanes but not a power of two (then one panel of a vector's lanes), whose
// A is 2-D (T is the few-rows panel for M = 1 and for a symbolic M), on a target whose vector
// width is known (target.vector_bits), with TileLoops' tile T >= 2. A matmul the same, with A
// of rank 2 or more (its rows: all its dims but the last). Anything else is left as it is.
#include <algorithm>
#include <utility>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/conv_winograd.h"
#include "ir/ops/window.h"
#include "ir/visitor.h"
#include "passes/graph/derived_constant.h"
#include "passes/loop_pass.h"
#include "passes/pass.h"

namespace kiln {
namespace {

// The row count a shape-generic product's panels are chosen for: few rows (TileShape's
// few-rows panels), the small batches where a copied panel would cost the most.
constexpr int64_t kGenericRows = 8;

class WeightPacker : public ExprMutator {
 public:
  WeightPacker(const TileShape& shape, int64_t lanes) : shape_(shape), lanes_(lanes) {}

 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    if (c && c->op && c->op->name == "matmul") return Matmul(n, c, out);
    if (c && c->op && c->op->name == "conv_nhwc") return ConvNhwc(n, c, out);
    if (!c || !c->op || c->op->name != "gemm" || c->attrs.GetInt("b_panel") != 0 ||
        c->attrs.GetBool("transB"))
      return out;
    const ConstantNode* b = AsConstant(c->args[1]);
    // (The original operand: the rewritten one has no type until InferType runs again.)
    const TensorTypeNode* a = AsTensor(n->args[0]->type);
    if (!b || !a || b->value.dtype() != DType::kFloat32 || b->value.shape().size() != 2 ||
        a->ndim() != 2)
      return out;
    const Dim& m = a->shape[c->attrs.GetBool("transA") ? 1 : 0];
    const int64_t k = b->value.shape()[0], cols = b->value.shape()[1];
    const int64_t panel = PanelFor(cols, m.is_const() ? m.value() : -1);
    if (panel < 2) return out;
    Attrs attrs = c->attrs;
    attrs.Set("b_panel", panel);
    attrs.Set("n", cols);
    std::vector<Expr> args = c->args;
    args[1] = Packed(c->args[1], k, cols, panel);
    return MakeCall("gemm", std::move(args), std::move(attrs), c->name);
  }

 private:
  // A matmul of A [..., M, K] (rank >= 2) by a 2-D f32 constant B [K, N]: its rows are all of
  // A's but the last dim, as many as those dims hold (constant once specialized), few ones too
  // (the encoder layer at 1x16: its feed-forward matmuls 105 -> 92 and 84 -> 74 us).
  Expr Matmul(const CallNode* n, const CallNode* c, const Expr& out) const {
    const ConstantNode* b = AsConstant(c->args[1]);
    const TensorTypeNode* a = AsTensor(n->args[0]->type);
    if (c->attrs.GetInt("b_panel") != 0 || !b || !a || b->value.dtype() != DType::kFloat32 ||
        b->value.shape().size() != 2 || a->ndim() < 2)
      return out;
    int64_t rows = 1;
    for (int d = 0; d + 1 < a->ndim(); ++d) {
      if (!a->shape[d].is_const()) {
        rows = -1;
        break;
      }
      rows *= a->shape[d].value();
    }
    const int64_t k = b->value.shape()[0], cols = b->value.shape()[1];
    const int64_t panel = PanelFor(cols, rows);
    if (panel < 2) return out;
    Attrs attrs = c->attrs;
    attrs.Set("b_panel", panel);
    attrs.Set("n", cols);
    return MakeCall("matmul", {c->args[0], Packed(c->args[1], k, cols, panel)}, std::move(attrs),
                    c->name);
  }

  // A conv_nhwc whose lowering takes the im2col form (ops::ConvNhwcIm2colFits: a product of
  // the pixels' copied taps by w as a [KH * KW * C, M] matrix) with a constant f32 weight
  // [KH, KW, C, M]: w in panels, as a gemm's B for the batch's pixels as rows. Its image size
  // and batch must be constants, and the conv not one Winograd's form takes.
  Expr ConvNhwc(const CallNode* n, const CallNode* c, const Expr& out) const {
    const ConstantNode* w = AsConstant(c->args[1]);
    const TensorTypeNode* x = AsTensor(n->args[0]->type);
    if (c->attrs.GetInt("w_panel") != 0 || c->attrs.GetBool("winograd_filter") || !w || !x ||
        w->value.dtype() != DType::kFloat32 || w->value.shape().size() != 4 || x->ndim() != 4)
      return out;
    const bool nhwc = c->attrs.GetBool("input_nhwc");
    const Dim &batch = x->shape[0], &h = x->shape[nhwc ? 1 : 2], &wd = x->shape[nhwc ? 2 : 3];
    if (!batch.is_const() || !h.is_const() || !wd.is_const()) return out;
    const std::vector<int64_t>& ws = w->value.shape();
    std::string error;
    const std::vector<ops::WindowDim> dims =
        ops::ComputeWindow({h.value(), wd.value()}, {ws[0], ws[1]}, c->attrs, &error);
    if (!error.empty()) return out;
    if (c->attrs.GetBool("winograd") &&
        ops::WinogradFits(ws[2], ws[3], batch.value(), dims, /*filter_transformed=*/false))
      return out;
    const int64_t k = ws[0] * ws[1] * ws[2], cols = ws[3];
    const int64_t pixels = dims[0].out * dims[1].out;
    if (!ops::ConvNhwcIm2colFits(x->dtype, batch.value(), pixels, k)) return out;
    const int64_t panel = PanelFor(cols, batch.value() * pixels);
    if (panel < 2 || cols < panel) return out;
    Attrs attrs = c->attrs;
    attrs.Set("w_panel", panel);
    attrs.Set("m", cols);
    attrs.Set("kernel_shape", std::vector<int64_t>{ws[0], ws[1]});
    std::vector<Expr> args = c->args;
    args[1] = Packed(c->args[1], k, cols, panel);
    return MakeCall("conv_nhwc", std::move(args), std::move(attrs), c->name);
  }

  // The panel width for `rows` rows (-1: symbolic, a shape-generic kernel's). Symbolic rows
  // take the few-rows panels: the kernel then reads B in place whatever the row count, where
  // unpacked it would copy every panel on every run, the whole weight matrix even for one row.
  //
  // Fewer columns than a panel: one vector's panel where they are not a power of two (a
  // classifier's 10 classes in 16 lanes), which TileLoops accumulates whole, its columns past
  // the product zeros; a power of two fills a narrower vector as it is; 0 (not packed) else.
  // The MLP's 512 -> 10 layer at 256 rows, 1 thread, AVX-512 Zen 5 (12-row blocks, 8 + 2 lanes
  // a row unpacked: two FMAs where one serves): 32.5-35.6 -> 20.1-20.4 us, kernel medians.
  int64_t PanelFor(int64_t cols, int64_t rows) const {
    const int64_t panel = shape_.PanelColumns(cols, rows < 0 ? kGenericRows : rows);
    if (cols >= panel) return panel;
    return cols > 1 && cols < lanes_ && (cols & (cols - 1)) != 0 ? lanes_ : 0;
  }

  // The packed constant for the 2-D f32 constant `b` ([k, cols]), shared by the model's
  // specializations (DerivedConstant).
  static Expr Packed(const Expr& b, int64_t k, int64_t cols, int64_t panel) {
    return DerivedConstant(b, StrCat("panel", panel), [&b, k, cols, panel] {
      const int64_t panels = (cols + panel - 1) / panel;
      Tensor packed = Tensor::Empty(DType::kFloat32, {panels, k, panel});
      const float* src = AsConstant(b)->value.data<float>();
      float* dst = packed.data<float>();
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t r = 0; r < k; ++r)
          for (int64_t t = 0; t < panel; ++t) {
            const int64_t col = p * panel + t;
            dst[(p * k + r) * panel + t] = col < cols ? src[r * cols + col] : 0.0f;
          }
      return packed;
    });
  }

  TileShape shape_;
  int64_t lanes_;  // f32 lanes of the target's vectors
};

}  // namespace

void RegisterPackConstantWeightsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "PackConstantWeights",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "lay out a gemm's or matmul's constant B, or the constant weight of a conv_nhwc "
             "that runs as a product over copied taps, as the column panels TileLoops reads, "
             "once per specialization instead of on every run",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"PackConstantWeights", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext& ctx) {
                  const TileShape shape = TileLoopsShape(ctx);
                  if (ctx.GetConfigInt("target.vector_bits") <= 0 || shape.columns < 2) return f;
                  WeightPacker packer(shape, ctx.GetConfigInt("target.vector_bits") / 32);
                  return std::static_pointer_cast<const FunctionNode>(packer.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
