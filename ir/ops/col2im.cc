// col2im_nhwc: the scatter half of a 2-D conv_transpose, channels-last, for ConvTransposeAsMatmul
// (passes/graph/conv_transpose_matmul.cc), whose matmul computes every input pixel's
// contribution to every tap:
//
//   col2im_nhwc(cols[N, H, W, KH, KW, M], strides, pads, dilations, output_shape) -> y[N, OH, OW,
//   M] y[n, oy, ox, m] = sum over taps (ky, kx) and input pixels (iy, ix) with
//                     iy * sy + ky * dy - pad_y = oy and ix * sx + kx * dx - pad_x = ox
//                     of cols[n, iy, ix, ky, kx, m]
//
// `pads` are the two begin pads (conv_transpose's crop at the start; its end pads and output
// padding are in output_shape [OH, OW]). So conv_transpose(x, w) with no bias is
// col2im_nhwc(x_nhwc @ w') laid out NCHW, w' being w as [C, KH * KW * M].
//
// The lowering gathers, as conv_transpose's does, but with the channels innermost: each output
// pixel sums, over the taps, cols at the input pixel that tap reads when it lands on one (a
// select per tap, its index clamped into cols), and whether it does depends on the pixel, not
// the channel, so the channel loop vectorizes with contiguous loads. The reference scatters, in
// double.
#include <cstring>
#include <vector>

#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {
namespace {

using loop::Expr;

struct Col2ImGeometry {
  std::vector<int64_t> strides, pads, dilations, output_shape;
};

// The attributes, each two values (strides and dilations positive, pads not negative); the
// first problem found goes to `error`.
Col2ImGeometry Geometry(const Attrs& attrs, std::string* error) {
  Col2ImGeometry g{attrs.GetInts("strides"), attrs.GetInts("pads"), attrs.GetInts("dilations"),
                   attrs.GetInts("output_shape")};
  for (auto [name, v, min] : {std::tuple{"strides", &g.strides, 1},
                              {"pads", &g.pads, 0},
                              {"dilations", &g.dilations, 1},
                              {"output_shape", &g.output_shape, 1}}) {
    if (v->size() != 2) {
      if (error->empty()) *error = StrCat(name, " must have 2 values, got ", JoinInts(*v));
      v->assign(2, min);
      continue;
    }
    for (int64_t x : *v)
      if (x < min && error->empty())
        *error = StrCat(name, " must be at least ", min, ", got ", JoinInts(*v));
  }
  return g;
}

Type Col2ImRel(TypeRelContext& ctx) {
  const TensorTypeNode& cols = ctx.tensor(0);
  RequireFloat(ctx, cols, "input");
  if (cols.ndim() != 6)
    ctx.Fail(StrCat("input ", ShapeToString(cols.shape), " must be 6-D [N, H, W, KH, KW, M]"));
  std::string error;
  const Col2ImGeometry g = Geometry(ctx.attrs(), &error);
  if (!error.empty()) ctx.Fail(error);
  return TensorType({cols.shape[0], Dim(g.output_shape[0]), Dim(g.output_shape[1]), cols.shape[5]},
                    cols.dtype);
}

template <typename T>
void Col2ImRef(const Tensor& cols, const Attrs& attrs, Tensor& out) {
  std::string error;
  const Col2ImGeometry g = Geometry(attrs, &error);
  const std::vector<int64_t>& s = cols.shape();
  const int64_t n = s[0], h = s[1], w = s[2], kh = s[3], kw = s[4], m = s[5];
  const int64_t oh = g.output_shape[0], ow = g.output_shape[1];
  std::vector<double> acc(static_cast<size_t>(n * oh * ow * m), 0.0);
  const T* c = cols.data<T>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < w; ++ix)
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t oy = iy * g.strides[0] + ky * g.dilations[0] - g.pads[0];
          if (oy < 0 || oy >= oh) continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t ox = ix * g.strides[1] + kx * g.dilations[1] - g.pads[1];
            if (ox < 0 || ox >= ow) continue;
            const T* src = c + ((((b * h + iy) * w + ix) * kh + ky) * kw + kx) * m;
            double* dst = acc.data() + ((b * oh + oy) * ow + ox) * m;
            for (int64_t j = 0; j < m; ++j) dst[j] += ToDouble(src[j]);
          }
        }
  T* y = out.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = FromDouble<T>(acc[i]);
}

std::vector<LTensor> LowerCol2Im(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor cols = in[0];
  std::string error;
  const Col2ImGeometry g = Geometry(attrs, &error);
  KILN_CHECK(error.empty(), error);
  std::vector<int64_t> k(2), extent(2);
  for (int d = 0; d < 2; ++d) {
    KILN_CHECK(loop::IsConstInt(cols.shape[3 + d], &k[d]), "col2im_nhwc with a symbolic kernel");
    KILN_CHECK(loop::IsConstInt(cols.shape[1 + d], &extent[d]),
               "col2im_nhwc with a symbolic spatial extent");
  }
  const DType t = cols.dtype;
  // f32 sums in f32 (a few taps each); the other float dtypes in f64.
  const DType acc = t == DType::kFloat32 ? t : DType::kFloat64;
  auto at = [cols, g, k, extent, t, acc](const std::vector<Expr>& idx) {
    Expr sum;
    for (int64_t ky = 0; ky < k[0]; ++ky) {
      for (int64_t kx = 0; kx < k[1]; ++kx) {
        // Tap (ky, kx) of output (oy, ox) reads input q / stride where q = o + pad - k * dilation
        // is a multiple of the stride inside the input.
        Expr lands;
        std::vector<Expr> ci = {idx[0], nullptr, nullptr, I64(ky), I64(kx), idx[3]};
        const int64_t tap[2] = {ky, kx};
        for (int d = 0; d < 2; ++d) {
          const Expr q = loop::Add(idx[1 + d], I64(g.pads[d] - tap[d] * g.dilations[d]));
          const Expr i = loop::FloorDiv(q, I64(g.strides[d]));
          lands = And(lands, InRange(q, I64(0), I64(extent[d] * g.strides[d])));
          if (g.strides[d] > 1)
            lands = And(lands, loop::MakeBinary(loop::BinaryOp::kEQ,
                                                loop::FloorMod(q, I64(g.strides[d])), I64(0)));
          ci[1 + d] = loop::Max(I64(0), loop::Min(i, I64(extent[d] - 1)));
        }
        Expr v = loop::Select(lands, loop::Cast(acc, cols.at(ci)), lower::Const(0, acc));
        sum = sum ? loop::Add(sum, v) : v;
      }
    }
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterCol2ImOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "col2im_nhwc",
      .doc = "conv_transpose's scatter, channels-last: cols[N, H, W, KH, KW, M] -> [N, OH, OW, M], "
             "the sum of the taps landing on each output pixel (strides, begin pads, dilations, "
             "output_shape: two values each)",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {{"strides", AttrKind::kInts, std::nullopt, nullptr},
                {"pads", AttrKind::kInts, std::nullopt, nullptr},
                {"dilations", AttrKind::kInts, std::nullopt, nullptr},
                {"output_shape", AttrKind::kInts, std::nullopt, nullptr}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = ops::Col2ImRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            ops::DispatchFloat(in[0].dtype(),
                               [&]<typename T>() { ops::Col2ImRef<T>(in[0], attrs, out[0]); });
          },
      .lower = ops::LowerCol2Im,
  });
}

}  // namespace kiln
