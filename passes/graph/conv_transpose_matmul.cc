// ConvTransposeAsMatmul: a 2-D conv_transpose with constant weights becomes a matrix product of
// its input's pixels by the flattened weights, and then either a reshuffle (windows that tile the
// output) or col2im_nhwc (any other geometry):
//
//   before:  conv_transpose(%x: f32[N, C, H, W], const(w: f32[C, M, KH, KW]), const(b: f32[M]),
//                           kernel_shape=[KH, KW], strides=[KH, KW])
//   after:   %xt = transpose(%x, perm=[0, 2, 3, 1])                          [N, H, W, C]
//            %p = add(matmul(%xt, const(f32[C, M * KH * KW])), const(b'))   [N, H, W, M*KH*KW]
//            %r = reshape(%p, shape=[0, 0, 0, M, KH, KW])
//            %t = transpose(%r, perm=[0, 3, 1, 4, 2, 5])                     [N, M, H, KH, W, KW]
//            reshape(%t, shape=[0, 0, H * KH, W * KW])                        [N, M, OH, OW]
//
// Tiling windows. With strides equal to the kernel and no crop, dilation or output padding,
// output pixel (iy * KH + ky, ix * KW + kx) is tap (ky, kx) of input pixel (iy, ix) alone:
// y[n, m, iy * KH + ky, ix * KW + kx] = b[m] + sum_c x[n, c, iy, ix] * w[c, m, ky, kx]. That sum
// is row (n, iy, ix), column (m, ky, kx) of the product, and the rest moves values without
// arithmetic. b' repeats b[m] for each of its KH * KW columns, so the bias joins the product's
// epilogue.
//
// Other windows (overlapping, gapped, cropped, dilated): the product's columns are (ky, kx, m),
// every tap's contribution of every input pixel, and col2im_nhwc (ir/ops/col2im.cc) sums those
// landing on each output pixel, channels-last; then the bias and a transpose to NCHW.
//
// Either way, where x is itself a transpose from channels-last (the end of a chain of convs that
// ChannelsLastConvs, before this pass, runs as conv_nhwc), the product reads that transpose's
// operand instead.
//
// Why: conv_transpose's own lowering gathers each output through a select per tap, one scalar at
// a time. Two 2x2 stride-2 upsampling convs (segmentation and detection heads), 64 -> 16 at 80 x
// 80 then 16 -> 1 at 160 x 160, ran in 28 ms at 1 thread (ONNX Runtime 1.1 ms); as products and
// reshuffles, 0.98 ms. Two 4x4 stride-2 pad-1 ones, 128 -> 64 -> 64 from 16 x 16: 100 ms -> 2.1
// ms (ONNX Runtime 2.2) through col2im_nhwc (AVX-512 Xeon). The product's weights are a constant
// that PackConstantWeights (after this pass) lays out in panels.
//
// Over a symbolic image size (a shape-generic kernel): square windows that tile the output
// only, the reshuffle being depth_to_space (mode CRD), which needs no constant size.
//
// Rules: f32; x 4-D with constant channels (and constant dims but for the case above); w a
// constant [C, M, KH, KW]; the bias absent or a constant; group 1; the output size the geometry
// gives (ops::ComputeTransposeWindow, which resolves auto_pad and output_shape into begin pads),
// and no begin pad below 0 (an output_shape past the full scatter). Anything else is left to the
// op's own lowering.
#include <vector>

#include "ir/ops/window.h"
#include "ir/visitor.h"
#include "passes/graph/derived_constant.h"
#include "passes/pass.h"

namespace kiln {
namespace {

class ConvTransposeRewriter : public ExprMutator {
 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    if (!c || !c->op || c->op->name != "conv_transpose") return out;
    // Types of the original call and operands (the rewritten ones have none until InferType).
    const TensorTypeNode* x = AsTensor(n->args[0]->type);
    const TensorTypeNode* y = AsTensor(n->type);
    const ConstantNode* w = AsConstant(c->args[1]);
    const ConstantNode* b = c->args.size() == 3 ? AsConstant(c->args[2]) : nullptr;
    if (!x || !y || !w || (c->args.size() == 3 && !b) || x->dtype != DType::kFloat32 ||
        x->ndim() != 4 || y->ndim() != 4 || w->value.dtype() != DType::kFloat32 ||
        w->value.shape().size() != 4)
      return out;
    const std::vector<int64_t>& ws = w->value.shape();
    const int64_t c_in = ws[0], m = ws[1], kh = ws[2], kw = ws[3];
    if (!x->shape[1].is_const() || !y->shape[1].is_const() || c->attrs.GetInt("group") != 1 ||
        x->shape[1].value() != c_in || y->shape[1].value() != m ||
        (b && (b->value.dtype() != DType::kFloat32 || b->value.numel() != m)))
      return out;
    if (!IsConstShape(x->shape) || !IsConstShape(y->shape))
      return AnySize(out, x, y, w, b, m, kh, kw);
    const int64_t h = x->shape[2].value(), wd = x->shape[3].value();
    std::string error;
    const std::vector<ops::WindowDim> dims =
        ops::ComputeTransposeWindow({h, wd}, {kh, kw}, c->attrs, &error);
    if (!error.empty() || dims[0].out != y->shape[2].value() || dims[1].out != y->shape[3].value())
      return out;
    bool tiles = true;
    for (const ops::WindowDim& d : dims) {
      if (d.pad_begin < 0) return out;  // an output_shape past the full scatter
      tiles = tiles && d.stride == d.kernel && d.dilation == 1 && d.pad_begin == 0 &&
              d.out == d.in * d.kernel;
    }
    return tiles ? Tiling(c, w, b, m, kh, kw, h, wd) : Scattered(c, w, b, m, kh, kw, dims);
  }

 private:
  using Ints = std::vector<int64_t>;

  // x [N, C, H, W] as [N, H, W, C]: the operand of the transpose that made x channels-first
  // where there is one (ChannelsLastConvs' transpose back from a chain of convs), so the two
  // do not cancel out in a copy; else a transpose of x.
  static Expr ChannelsLast(const Expr& x) {
    const CallNode* t = AsCall(x);
    if (t && t->op && t->op->name == "transpose" && t->attrs.GetInts("perm") == Ints{0, 3, 1, 2})
      return t->args[0];
    return MakeCall("transpose", {x}, {{"perm", Ints{0, 2, 3, 1}}});
  }

  // Over a symbolic image size (the generic tier): square windows that tile the output only,
  // the product's columns (m, ky, kx) put in place by depth_to_space (CRD: depth channel
  // (m * K + ky) * K + kx), whose output size is H * K whatever H is. Else the op as it is.
  static Expr AnySize(const Expr& same, const TensorTypeNode* x, const TensorTypeNode* y,
                      const ConstantNode* w, const ConstantNode* b, int64_t m, int64_t kh,
                      int64_t kw) {
    const CallNode* c = AsCall(same);
    if (kh != kw || !c->attrs.GetInts("output_shape").empty()) return same;
    std::string error;
    const std::vector<ops::WindowDim> dims =  // a stand-in size: the geometry is size-free here
        ops::ComputeTransposeWindow({1 << 20, 1 << 20}, {kh, kw}, c->attrs, &error);
    if (!error.empty()) return same;
    for (const ops::WindowDim& d : dims)
      if (d.stride != d.kernel || d.dilation != 1 || d.pad_begin != 0 || d.out != d.in * d.kernel)
        return same;
    if (y->shape[2] != x->shape[2] * kh || y->shape[3] != x->shape[3] * kw) return same;
    Expr p = Product(c, w, b, m, kh * kw);
    Expr nchw = MakeCall("transpose", {p}, {{"perm", Ints{0, 3, 1, 2}}});
    return MakeCall("depth_to_space", {nchw}, {{"blocksize", kh}, {"mode", std::string("CRD")}},
                    c->name);
  }

  // The product of x's pixels by w as [C, M * KH * KW], plus the bias repeated for each tap.
  static Expr Product(const CallNode* c, const ConstantNode* w, const ConstantNode* b, int64_t m,
                      int64_t taps) {
    const int64_t c_in = w->value.shape()[0];
    // w [C, M, KH, KW] is already [C, M * KH * KW] row-major: the same values, a new shape.
    Expr wm = DerivedConstant(c->args[1], "cols", [w, c_in, m, taps] {
      Tensor t = Tensor::Empty(DType::kFloat32, {c_in, m * taps});
      std::copy_n(w->value.data<float>(), c_in * m * taps, t.data<float>());
      return t;
    });
    Expr p = MakeCall("matmul", {ChannelsLast(c->args[0]), wm});
    if (!b) return p;
    Expr repeated = DerivedConstant(c->args[2], StrCat("taps", taps), [b, m, taps] {
      Tensor t = Tensor::Empty(DType::kFloat32, {m * taps});
      for (int64_t j = 0; j < m * taps; ++j) t.data<float>()[j] = b->value.data<float>()[j / taps];
      return t;
    });
    return MakeCall("add", {p, repeated});
  }

  // Windows that tile the output: the product's columns (m, ky, kx) are output pixels, which a
  // reshape, a transpose and a reshape put in place; the bias joins the product.
  static Expr Tiling(const CallNode* c, const ConstantNode* w, const ConstantNode* b, int64_t m,
                     int64_t kh, int64_t kw, int64_t h, int64_t wd) {
    Expr p = Product(c, w, b, m, kh * kw);
    Expr r = MakeCall("reshape", {p}, {{"shape", Ints{0, 0, 0, m, kh, kw}}});
    Expr t = MakeCall("transpose", {r}, {{"perm", Ints{0, 3, 1, 4, 2, 5}}});
    return MakeCall("reshape", {t}, {{"shape", Ints{0, 0, h * kh, wd * kw}}}, c->name);
  }

  // Any other geometry: the product's columns (ky, kx, m) are every tap's contribution, which
  // col2im_nhwc sums where taps overlap (and drops where they fall in the pads); then the bias,
  // and a transpose to NCHW.
  static Expr Scattered(const CallNode* c, const ConstantNode* w, const ConstantNode* b, int64_t m,
                        int64_t kh, int64_t kw, const std::vector<ops::WindowDim>& d) {
    const int64_t c_in = w->value.shape()[0], taps = kh * kw;
    // w [C, M, KH, KW] as [C, KH * KW * M]: each tap's M outputs contiguous.
    Expr wm = DerivedConstant(c->args[1], "taps_cols", [w, c_in, m, taps] {
      Tensor t = Tensor::Empty(DType::kFloat32, {c_in, taps * m});
      const float* src = w->value.data<float>();
      float* dst = t.data<float>();
      for (int64_t ci = 0; ci < c_in; ++ci)
        for (int64_t j = 0; j < m; ++j)
          for (int64_t k = 0; k < taps; ++k)
            dst[(ci * taps + k) * m + j] = src[(ci * m + j) * taps + k];
      return t;
    });
    Expr p = MakeCall("matmul", {ChannelsLast(c->args[0]), wm});
    Expr r = MakeCall("reshape", {p}, {{"shape", Ints{0, 0, 0, kh, kw, m}}});
    Expr y = MakeCall("col2im_nhwc", {r},
                      {{"strides", Ints{d[0].stride, d[1].stride}},
                       {"pads", Ints{d[0].pad_begin, d[1].pad_begin}},
                       {"dilations", Ints{d[0].dilation, d[1].dilation}},
                       {"output_shape", Ints{d[0].out, d[1].out}}});
    if (b) y = MakeCall("add", {y, c->args[2]});
    return MakeCall("transpose", {y}, {{"perm", Ints{0, 3, 1, 2}}}, c->name);
  }
};

}  // namespace

void RegisterConvTransposeAsMatmulPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "ConvTransposeAsMatmul",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "compute a conv_transpose whose windows tile its output (strides equal to the "
             "kernel, no padding) as a matmul of its pixels by the flattened weights and a "
             "reshuffle",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"ConvTransposeAsMatmul", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  ConvTransposeRewriter rewriter;
                  return std::static_pointer_cast<const FunctionNode>(rewriter.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
