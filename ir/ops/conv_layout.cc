// conv_nhwc: a 2-D convolution that writes channels-last, for chains of convs that
// ChannelsLastConvs (passes/graph/channels_last.cc) moves out of ONNX's NCHW.
//
//   conv_nhwc(x, w[, bias]) -> y[N, OH, OW, M]
//     x: [N, H, W, C] (input_nhwc, the default) or [N, C, H, W] (a chain's first conv)
//     w: [KH, KW, C, M] (HWIO: the output channels contiguous), bias: [M]
//     attrs: conv's window attributes (strides, pads, dilations, auto_pad, kernel_shape);
//            winograd (WinogradConvs sets it): a 3x3 stride-1 conv of f32 whose outputs are
//            multiples of 4 runs by Winograd's F(4x4, 3x3) (conv_winograd.cc);
//            winograd_filter (WinogradConvs sets it for constant weights): w is given
//            transformed, U [36, C, M] = G w G^T per channel pair (the kernel is 3x3);
//            w_panel = T (PackConstantWeights sets it for constant weights the im2col form
//            reads): w is given as the [KH * KW * C, M] matrix in panels of T columns,
//            [ceil(M / T), K, T], with kernel_shape and m (M) given
//
// y[n, oh, ow, m] = bias[m] + sum over (ky, kx, c) of w[ky, kx, c, m] *
// x(n, oh * stride + ky * dilation - pad_begin, ow * stride + kx * dilation - pad_begin, c),
// zero outside x. One group only.
//
// Why channels-last: the lowering computes y as a matrix product whose columns are the output
// channels m (contiguous in y and in w) and whose rows are the output pixels, so TileLoops
// blocks rows of pixels against vectors of channels: each input value is broadcast once per
// tap and feeds a row of channel vectors, whatever the stride (conv's NCHW form loads vectors
// along pixels and splits a strided input into phases first), and the tile's stores are
// whole vectors of y. On an AVX-512 Xeon the 3x3 stride-2 conv 32 -> 32 at 112 x 112 ran its
// product in 0.6 of the NCHW form's time. Reading the input is layout-blind (one broadcast per
// value), so a chain's first conv reads ONNX's NCHW input as it is.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/conv_winograd.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {

bool ConvNhwcIm2colFits(DType t, int64_t batch, int64_t pixels, int64_t k_total) {
  // Where a column tile of w (K x 64 floats) fits half of L2, the direct form reads it from
  // there; the copy is bounded.
  constexpr int64_t kStreamedColumnBytes = 512 << 10;
  constexpr int64_t kIm2colBytes = 8 << 20;
  return t == DType::kFloat32 && k_total * 64 * 4 > kStreamedColumnBytes && batch >= 1 &&
         batch * pixels * k_total * 4 <= kIm2colBytes;
}

namespace {

using loop::Expr;

constexpr char kInputNhwc[] = "input_nhwc";
constexpr char kWinograd[] = "winograd";
constexpr char kWinogradFilter[] = "winograd_filter";
constexpr char kWPanel[] = "w_panel";
constexpr char kM[] = "m";

// x's dims in NCHW order (N, C, H, W), whichever layout it has.
std::vector<int> NchwAxes(bool nhwc) {
  return nhwc ? std::vector<int>{0, 3, 1, 2} : std::vector<int>{0, 1, 2, 3};
}

// A packed weight (w_panel = T > 0, PackConstantWeights): w as the [K, M] matrix of its HWIO
// layout (K = KH * KW * C) in panels of T columns (ops::AssertPackedB); kernel_shape and m
// give KH, KW and M. Checks the attributes and the packed shape for `channels` input channels,
// and returns the kernel.
std::vector<int64_t> PackedWeightKernel(TypeRelContext& ctx, const TensorTypeNode& w,
                                        const Dim& channels, int64_t panel) {
  const int64_t m = ctx.attrs().GetInt(kM);
  const std::vector<int64_t>& ks = ctx.attrs().GetInts("kernel_shape");
  if (panel < 2 || m < 1 || ks.size() != 2 || ks[0] < 1 || ks[1] < 1 ||
      ctx.attrs().GetBool(kWinogradFilter) || w.ndim() != 3)
    ctx.Fail(StrCat("w_panel = ", panel,
                    " needs w_panel >= 2, m >= 1, a 2-D kernel_shape, no winograd_filter and a "
                    "weight [P, K, T], got m = ",
                    m, ", kernel_shape [", JoinInts(ks), "], weight ", ShapeToString(w.shape)));
  if (!channels.is_const())
    ctx.Fail(StrCat("input channels must be a constant, got ", channels.ToString()));
  AssertPackedB(ctx, w, Dim(ks[0] * ks[1] * channels.value()),
                StrCat("kernel ", JoinInts(ks), " of ", channels.value(), " channels"), m, panel);
  return ks;
}

Type ConvNhwcRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& w = ctx.tensor(1);
  RequireFloat(ctx, x, "input");
  CheckWeightDtype(ctx, x, w);
  const bool nhwc = ctx.attrs().GetBool(kInputNhwc);
  if (x.ndim() != 4)
    ctx.Fail(StrCat("input ", ShapeToString(x.shape), " must be 4-D (",
                    nhwc ? "[N, H, W, C]" : "[N, C, H, W]", ")"));
  const std::vector<int> axes = NchwAxes(nhwc);
  Shape nchw;
  for (int a : axes) nchw.push_back(x.shape[a]);
  // A transformed filter U [36, C, M] is a 3x3 kernel's.
  const bool transformed = ctx.attrs().GetBool(kWinogradFilter);
  const int64_t panel = ctx.attrs().GetInt(kWPanel);
  std::vector<int64_t> kernel = {3, 3};
  if (panel != 0) {
    kernel = PackedWeightKernel(ctx, w, nchw[1], panel);
  } else if (transformed) {
    if (w.ndim() != 3 || !w.shape[0].is_const() || w.shape[0].value() != kWinogradTileElems)
      ctx.Fail(StrCat("a winograd_filter weight must be [36, C, M], got ", ShapeToString(w.shape)));
    const std::vector<int64_t>& ks = ctx.attrs().GetInts("kernel_shape");
    if (!ks.empty() && ks != kernel)
      ctx.Fail(StrCat("kernel_shape ", JoinInts(ks), " with a winograd_filter weight (3x3)"));
  } else {
    kernel = ConvKernel(ctx, x, w, "[KH, KW, C, M]", 0);
  }
  const int c_dim = transformed ? 1 : 2;
  if (panel == 0)
    ctx.AssertEqual(w.shape[c_dim], nchw[1],
                    StrCat("input channels of ", ShapeToString(x.shape),
                           " must be the weight's dim ", c_dim, " ", ShapeToString(w.shape)));
  const Dim m = panel != 0 ? Dim(ctx.attrs().GetInt(kM)) : w.shape[c_dim + 1];
  CheckBias(ctx, x, m, StrCat("the weight's M ", ShapeToString(w.shape)));
  // The lowering needs the input channels.
  if (!nchw[1].is_const())
    ctx.Fail(StrCat("input channels must be a constant, got ", ShapeToString(x.shape)));
  const Type view = TensorType(nchw, x.dtype);
  const Shape out = WindowOutShapeOf(ctx, *AsTensor(view), m, kernel);
  return TensorType({out[0], out[2], out[3], out[1]}, x.dtype);
}

// The reference: conv's own reference kernel on NCHW / OIHW copies, its output made NHWC.
void ConvNhwcRef(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  Tensor w = in[1];
  if (attrs.GetBool(kWinogradFilter)) w = WinogradFilterInverse(in[1]);
  if (const int64_t panel = attrs.GetInt(kWPanel); panel > 0) {
    const std::vector<int64_t>& ks = attrs.GetInts("kernel_shape");
    const int64_t m = attrs.GetInt(kM);
    w = UnpackPanels(in[1], m).Reshaped({ks[0], ks[1], in[1].shape()[1] / (ks[0] * ks[1]), m});
  }
  std::vector<Tensor> args = {in[0], PermuteAxes(w, {3, 2, 0, 1})};
  if (attrs.GetBool(kInputNhwc)) args[0] = PermuteAxes(in[0], {0, 3, 1, 2});
  if (in.size() == 3) args.push_back(in[2]);
  const std::vector<int64_t>& y = out[0].shape();
  std::vector<Tensor> nchw = {Tensor::Empty(out[0].dtype(), {y[0], y[3], y[1], y[2]})};
  Attrs conv_attrs = attrs;
  conv_attrs.Set("group", int64_t{1});
  ConvReference(args, conv_attrs, nchw[0]);
  Tensor t = PermuteAxes(nchw[0], {0, 2, 3, 1});
  std::memcpy(out[0].raw_data(), t.raw_data(), t.nbytes());
}

// x as the box of its padded copy (LTensor::box), which keeps rows and columns [0, extent) of
// the padding: the copy's border and interior are then stored by separate nests, the interior
// a plain copy (no select or clamped loads). x's rows past the kept extent are cut off.
std::shared_ptr<const BoxedTensor> Boxed(const LTensor& x, const std::vector<int>& axes,
                                         const std::vector<int64_t>& lo,
                                         const std::vector<int64_t>& extent) {
  LTensor inner = x;
  std::vector<int64_t> at(x.ndim(), 0);
  for (int i = 0; i < 2; ++i) {
    const int a = axes[2 + i];
    int64_t in = 0;
    KILN_CHECK(loop::IsConstInt(x.shape[a], &in), "conv_nhwc with a symbolic spatial extent");
    inner.shape[a] = I64(std::max<int64_t>(0, std::min(in, extent[i] - lo[i])));
    at[a] = lo[i];
  }
  return std::make_shared<BoxedTensor>(BoxedTensor{inner, at, lower::Const(0, x.dtype)});
}

// x padded with zeros where a tap reads outside it, in x's own layout, so each row of taps is
// a run of the padded rows (no bounds test in the product); x itself when nothing is padded.
// Only the rows and columns some tap reads are kept.
// `min_extent` (if given): the copy's extents at least these (Winograd's whole tiles).
LTensor PaddedCopy(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                   const std::vector<WindowDim>& dims, const std::vector<int64_t>& min_extent) {
  std::vector<int64_t> lo(2), extent(2);
  bool padded = false;
  for (int i = 0; i < 2; ++i) {
    const WindowDim& d = dims[i];
    lo[i] = d.pad_begin;
    extent[i] = std::max(WindowSpan(d), min_extent.empty() ? 0 : min_extent[i]);
    padded = padded || d.pad_begin > 0 || extent[i] > d.in;
  }
  if (!padded) return x;
  std::vector<Expr> shape = x.shape;
  shape[axes[2]] = I64(extent[0]);
  shape[axes[3]] = I64(extent[1]);
  return ctx.Materialize(LTensor{x.dtype, shape,
                                 [x, axes, lo, dims](const std::vector<Expr>& idx) {
                                   std::vector<Expr> xi = idx;
                                   Expr inside;
                                   for (int i = 0; i < 2; ++i) {
                                     const int a = axes[2 + i];
                                     Expr pos = loop::Sub(idx[a], I64(lo[i]));
                                     inside = And(inside, InRange(pos, I64(0), I64(dims[i].in)));
                                     // Clamped, so the load stays inside x where the select
                                     // drops it.
                                     xi[a] = loop::Max(I64(0), loop::Min(pos, I64(dims[i].in - 1)));
                                   }
                                   return loop::Select(inside, x.at(xi), lower::Const(0, x.dtype));
                                 },
                                 Boxed(x, axes, lo, extent)},
                         "conv_padded");
}

int64_t ConstDim(const Expr& e) {
  int64_t v = 0;
  KILN_CHECK(loop::IsConstInt(e, &v), "conv_nhwc with symbolic output channels");
  return v;
}

// A conv whose reduction (KH * KW * C) is long as a matrix product over its output pixels:
// the taps of each pixel copied into cols[n, pixel, (ky, kx, c)] (im2col: a tap is a run of C
// channels of the padded input, contiguous in channels-last) and
//
//   E[n, pixel, m] = sum over kk of cols[n, pixel, kk] * w[kk, m]     (w HWIO read as [K, M])
//
// which TileLoops blocks as a matmul: all of one image's pixels are the rows, so a column tile
// of w runs over every pixel block while in cache, in K blocks. The direct form blocks the
// pixels of one output row at a time and reads w's column tile (K x 64 floats: 1.2 MB for a
// 3x3 conv of 512 channels) again from L3 for every row (ResNet-18's 512 -> 512 at 7 x 7, one
// thread: 1.8 ms direct, against 1.3 ms for the matmul of the same FLOPs). Where the tile fits
// L2 (K x 256 bytes up to kStreamedColumnBytes) the direct form reads it from there and needs
// no copy. E is stored once and the output (bias, fused consumers) reads it. w is HWIO, or with
// `panel` > 0 its [K, M] matrix in panels of that many columns (w_panel: PackConstantWeights
// packs exactly the convs this form takes), read in place as TileLoops' pre-packed operand.
//
// nullopt (the direct form serves) where ConvNhwcIm2colFits does not hold (other than f32, a
// short reduction, the copy past its bound), for a symbolic batch, or for an unpacked weight
// that is not a plain read.
std::optional<LTensor> LowerConvNhwcIm2col(LowerContext& ctx, const LTensor& p, const LTensor& w,
                                           int64_t panel, int64_t m_count,
                                           const std::optional<LTensor>& bias,
                                           const std::vector<WindowDim>& dims, int64_t channels,
                                           const std::vector<int64_t>& kernel, bool nhwc,
                                           const std::vector<Expr>& out_shape) {
  const DType t = p.dtype;
  const int64_t k_total = kernel[0] * kernel[1] * channels;
  const int64_t pixels = dims[0].out * dims[1].out;
  int64_t batch = 0;
  if (!loop::IsConstInt(p.shape[0], &batch) || !ConvNhwcIm2colFits(t, batch, pixels, k_total) ||
      (panel == 0 && !IsIdentityRead(ctx, w)))
    return std::nullopt;
  // cols as [N, OH, OW, KH, KW, C]: filled by one loop per dim, read flat as [N, pixels, K].
  LTensor cols = ctx.Materialize(
      LTensor{t,
              {p.shape[0], I64(dims[0].out), I64(dims[1].out), I64(kernel[0]), I64(kernel[1]),
               I64(channels)},
              [p, dims, nhwc](const std::vector<Expr>& idx) {
                Expr h = loop::Add(loop::Mul(idx[1], I64(dims[0].stride)),
                                   loop::Mul(idx[3], I64(dims[0].dilation)));
                Expr v = loop::Add(loop::Mul(idx[2], I64(dims[1].stride)),
                                   loop::Mul(idx[4], I64(dims[1].dilation)));
                return nhwc ? p.at({idx[0], h, v, idx[5]}) : p.at({idx[0], idx[5], h, v});
              }},
      "conv_cols");
  LTensor e = ctx.Materialize(
      LTensor{t,
              {p.shape[0], I64(pixels), I64(m_count)},
              [&ctx, cols, w, panel, k_total, m_count](const std::vector<Expr>& idx) {
                loop::Var kk = ctx.NewVar("kk");
                Expr a = FlatRead(cols, {idx[0]}, loop::Add(loop::Mul(idx[1], I64(k_total)), kk));
                // Packed: w[m // T, kk, m % T], the form TileLoops reads in place.
                Expr b = panel > 0
                             ? w.at({loop::FloorDiv(idx[2], I64(panel)), kk,
                                     loop::FloorMod(idx[2], I64(panel))})
                             : FlatRead(w, {}, loop::Add(loop::Mul(kk, I64(m_count)), idx[2]));
                return loop::Reduce(loop::ReduceKind::kSum, loop::Mul(a, b), {{kk, I64(k_total)}});
              }},
      "conv_gemm");
  const int64_t ow = dims[1].out;
  return LTensor{t, out_shape, [e, bias, ow](const std::vector<Expr>& idx) {
                   Expr v = e.at({idx[0], loop::Add(loop::Mul(idx[1], I64(ow)), idx[2]), idx[3]});
                   return bias ? loop::Add(v, bias->at({idx[3]})) : v;
                 }};
}

std::vector<LTensor> LowerConvNhwc(LowerContext& ctx, const std::vector<LTensor>& in,
                                   const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor& x = in[0];
  const bool transformed = attrs.GetBool(kWinogradFilter);
  LTensor w = in[1];
  const bool nhwc = attrs.GetBool(kInputNhwc);
  const std::vector<int> axes = NchwAxes(nhwc);
  std::vector<int64_t> kernel = {3, 3};
  int64_t channels = 0;
  // A packed weight (ConvNhwcRel's PackedWeightKernel): kept aside for the im2col form, which
  // reads its panels in place; w becomes the [KH, KW, C, M] view of it.
  const int64_t panel = attrs.GetInt(kWPanel);
  const LTensor packed = w;
  if (panel > 0) {
    kernel = attrs.GetInts("kernel_shape");
    KILN_CHECK(loop::IsConstInt(x.shape[axes[1]], &channels), "conv_nhwc with symbolic channels");
    const int64_t m = attrs.GetInt(kM), kw = kernel[1], c = channels;
    w = LTensor{
        w.dtype,
        {I64(kernel[0]), I64(kw), I64(c), I64(m)},
        [packed, panel, kw, c](const std::vector<Expr>& idx) {
          return packed.at(
              {loop::FloorDiv(idx[3], I64(panel)),
               loop::Add(loop::Mul(loop::Add(loop::Mul(idx[0], I64(kw)), idx[1]), I64(c)), idx[2]),
               loop::FloorMod(idx[3], I64(panel))});
        }};
  } else {
    if (!transformed)
      for (int i = 0; i < 2; ++i)
        KILN_CHECK(loop::IsConstInt(w.shape[i], &kernel[i]), "conv_nhwc with a symbolic kernel");
    KILN_CHECK(loop::IsConstInt(w.shape[transformed ? 1 : 2], &channels),
               "conv_nhwc with symbolic channels");
  }
  const DType t = x.dtype;
  // f32 sums in f32 (as conv's GEMM form does); the other float dtypes in f64, as conv.
  const DType acc = t == DType::kFloat32 ? t : DType::kFloat64;
  int64_t m_count = 0;
  // WinogradConvs (passes/graph/winograd.cc) says where Winograd's form may serve.
  const bool winograd_asked = (attrs.GetBool(kWinograd) || transformed) && nhwc && panel == 0 &&
                              t == DType::kFloat32 &&
                              loop::IsConstInt(w.shape[transformed ? 2 : 3], &m_count);
  bool winograd = false;
  std::vector<WindowDim> dims;
  LTensor p = x;
  const std::vector<Expr> out_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  if (HasSymbolicSpatial(x, {axes[2], axes[3]})) {
    // Any image size (the generic tier's kernels): the whole padded copy (conv_symbolic.cc).
    dims = SymbolicWindow(kernel, attrs);
    std::vector<PadExprs> pads = SymbolicPads(dims, {x.shape[axes[2]], x.shape[axes[3]]}, attrs);
    winograd = winograd_asked && WinogradFitsAnySize(channels, m_count, dims, transformed);
    if (winograd)  // whole tiles: the end pads grow to WinogradInputSpan of the outputs
      for (int i = 0; i < 2; ++i)
        pads[i].end = loop::Add(pads[i].end, loop::Sub(WinogradInputSpan(out_shape[1 + i]),
                                                       loop::Add(out_shape[1 + i], I64(2))));
    p = PaddedForWindow(ctx, x, {axes[2], axes[3]}, pads);
  } else {
    std::vector<int64_t> spatial(2);
    for (int i = 0; i < 2; ++i) loop::IsConstInt(x.shape[axes[2 + i]], &spatial[i]);
    std::string error;
    dims = ComputeWindow(spatial, kernel, attrs, &error);
    KILN_CHECK(error.empty(), error);
    int64_t images = 1;  // a symbolic batch counts as one image
    loop::IsConstInt(x.shape[0], &images);
    winograd = winograd_asked && WinogradFits(channels, m_count, images, dims, transformed);
    std::vector<int64_t> min_extent;
    if (winograd)
      for (const WindowDim& d : dims) min_extent.push_back(WinogradInputSpan(d.out));
    p = PaddedCopy(ctx, x, axes, dims, min_extent);
  }
  std::optional<LTensor> bias;
  if (in.size() == 3) bias = in[2];
  if (winograd)
    return {LowerWinogradNhwc(ctx, p, w, transformed, bias, channels, m_count, out_shape)};
  // The direct form reads w; WinogradConvs transforms only where Winograd's form applies, so
  // this costs a per-run inverse only for a graph built with the transform by hand.
  if (transformed) w = LowerWinogradFilterInverse(ctx, w);
  if (!HasSymbolicSpatial(x, {axes[2], axes[3]}))
    if (std::optional<LTensor> y =
            LowerConvNhwcIm2col(ctx, p, panel > 0 ? packed : w, panel, ConstDim(w.shape[3]), bias,
                                dims, channels, kernel, nhwc, out_shape))
      return {*y};
  auto at = [&ctx, p, w, bias, dims, channels, kernel, nhwc, t, acc](const std::vector<Expr>& idx) {
    loop::Var c = ctx.NewVar("kc"), ky = ctx.NewVar("kt"), kx = ctx.NewVar("kt");
    Expr h =
        loop::Add(loop::Mul(idx[1], I64(dims[0].stride)), loop::Mul(ky, I64(dims[0].dilation)));
    Expr v =
        loop::Add(loop::Mul(idx[2], I64(dims[1].stride)), loop::Mul(kx, I64(dims[1].dilation)));
    Expr xv = nhwc ? p.at({idx[0], h, v, c}) : p.at({idx[0], c, h, v});
    Expr wv = w.at({ky, kx, c, idx[3]});
    if (acc != t) {
      xv = loop::Cast(acc, xv);
      wv = loop::Cast(acc, wv);
    }
    // Channels innermost for NHWC (each tap's broadcasts are consecutive), taps innermost
    // for NCHW (a tap row is a run of the input row).
    std::vector<loop::IterVar> red;
    if (!nhwc) red.push_back({c, I64(channels)});
    red.push_back({ky, I64(kernel[0])});
    red.push_back({kx, I64(kernel[1])});
    if (nhwc) red.push_back({c, I64(channels)});
    Expr sum = loop::Reduce(loop::ReduceKind::kSum, loop::Mul(xv, wv), std::move(red));
    if (bias)
      sum = loop::Add(sum, acc != t ? loop::Cast(acc, bias->at({idx[3]})) : bias->at({idx[3]}));
    return acc != t ? loop::Cast(t, sum) : sum;
  };
  return {LTensor{t, out_shape, at}};
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterConvLayoutOps(OpRegistry& r) {
  std::vector<AttrSpec> attrs = ops::WindowAttrs();
  attrs.push_back({"kernel_shape", AttrKind::kInts, AttrValue(std::vector<int64_t>{}),
                   ops::CheckNonNegativeInts()});
  attrs.push_back({ops::kInputNhwc, AttrKind::kBool, AttrValue(true), nullptr});
  attrs.push_back({ops::kWinograd, AttrKind::kBool, AttrValue(false), nullptr});
  attrs.push_back({ops::kWinogradFilter, AttrKind::kBool, AttrValue(false), nullptr});
  attrs.push_back({ops::kWPanel, AttrKind::kInt, AttrValue(int64_t{0}), nullptr});
  attrs.push_back({ops::kM, AttrKind::kInt, AttrValue(int64_t{0}), nullptr});
  r.Register(OpDef{
      .name = "conv_nhwc",
      .doc = "2-D convolution writing channels-last: x[N, H, W, C] (input_nhwc) or [N, C, H, W], "
             "w[KH, KW, C, M], optional bias[M] -> [N, OH, OW, M]; conv's window attributes, one "
             "group; winograd: a 3x3 stride-1 conv of f32 may run by Winograd's F(4x4, 3x3) "
             "(WinogradConvs sets it); winograd_filter: w is that form's transformed filter "
             "U[36, C, M]; w_panel = T (PackConstantWeights sets it): w is the [KH * KW * C, M] "
             "matrix in panels [ceil(M / T), K, T], with kernel_shape and m (M) given",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = attrs,
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::ConvNhwcRel,
      .ref_kernel = ops::ConvNhwcRef,
      .lower = ops::LowerConvNhwc,
  });
}

}  // namespace kiln
