// TrimConvTaps: a conv over a constant image size whose edge taps only ever read padding loses
// those taps:
//
//   before:  conv(%x: f32[1, 512, 1, 40], const(w: f32[64, 512, 3, 3]), kernel_shape=[3, 3],
//                 pads=[1, 1, 1, 1])
//   after:   conv(%x, const(w[:, :, 1:2, :]: f32[64, 512, 1, 3]), kernel_shape=[1, 3],
//                 pads=[0, 1, 0, 1])
//
// Why: a text recognizer pools its image to one row and then runs 3x3 convs over it; a
// classifier's last stages run 5x5 depthwise convs over 2 x 6 images. Two of three rows of
// taps there multiply zeros. ONNX Runtime's blocked convs skip the padding; kiln's conv lowerings
// (GEMM over the phase-split padded input, Winograd) compute every tap, so the 3x3 conv of 1024
// channels to 64 over 1 x 40 took 3.3x ONNX Runtime's time before this pass.
//
// Per spatial dim (ComputeWindow's geometry: in, kernel k, stride s, dilation d, pads b and e,
// out), tap t reads positions o * s - b + t * d for o in [0, out); it is useful when one of them
// lies in [0, in). Taps [t0, t1] are the first and last useful ones; the trimmed conv has kernel
// t1 - t0 + 1, begin pad b - t0 * d and the end pad that gives the same out. Every output then
// sums the same products but for the ones of padding (zeros), so values change only by the
// order of the sum.
//
// Rules: a conv whose weight is a constant and whose input's spatial dims are constants (a
// specialization; the generic tier keeps every tap); some tap trimmed; every dim with at least
// one useful tap, and pads that stay non-negative and give the same output size. auto_pad
// becomes explicit pads. Anything else is left as it is.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ir/ops/window.h"
#include "ir/visitor.h"
#include "passes/graph/derived_constant.h"
#include "passes/pass.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

// The first useful tap of `d` at or after `t` going in direction `step` (+1 or -1), or -1/kernel
// past the end: tap t reads c + o * s for o in [0, out), c = t * d - b.
int64_t UsefulTap(const ops::WindowDim& d, int64_t t, int64_t step) {
  for (; t >= 0 && t < d.kernel; t += step) {
    const int64_t c = t * d.dilation - d.pad_begin;
    // The first o with c + o * s >= 0.
    const int64_t o = c >= 0 ? 0 : (-c + d.stride - 1) / d.stride;
    if (o < d.out && c + o * d.stride < d.in) return t;
  }
  return t;
}

// w[:, :, t0[0]:t0[0]+k[0], ...] of a weight [M, C/g, *kernel], copied byte-wise (any dtype).
Tensor SliceTaps(const Tensor& w, const Ints& t0, const Ints& k) {
  const Ints& ws = w.shape();
  const size_t rank = ws.size() - 2;
  Ints out_shape = {ws[0], ws[1]};
  out_shape.insert(out_shape.end(), k.begin(), k.end());
  Tensor t = Tensor::Empty(w.dtype(), out_shape);
  const int64_t elem = DTypeSize(w.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(w.raw_data());
  uint8_t* dst = static_cast<uint8_t*>(t.raw_data());
  const int64_t outer = ws[0] * ws[1];
  // Spatial strides of the source, innermost last.
  Ints src_stride(rank, 1);
  for (size_t i = rank - 1; i > 0; --i) src_stride[i - 1] = src_stride[i] * ws[i + 2];
  const int64_t src_plane = src_stride[0] * ws[2];
  int64_t dst_taps = 1;
  for (int64_t v : k) dst_taps *= v;
  for (int64_t p = 0; p < outer; ++p) {
    for (int64_t j = 0; j < dst_taps; ++j) {
      // Unravel j over k, offset by t0, into the source's taps.
      int64_t rest = j, src_off = 0;
      for (size_t i = rank; i-- > 0;) {
        src_off += (rest % k[i] + t0[i]) * src_stride[i];
        rest /= k[i];
      }
      std::memcpy(dst + (p * dst_taps + j) * elem, src + (p * src_plane + src_off) * elem, elem);
    }
  }
  return t;
}

class TapTrimmer : public ExprMutator {
 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    if (!c || !c->op || c->op->name != "conv") return out;
    const TensorTypeNode* x = AsTensor(n->args[0]->type);
    const TensorTypeNode* y = AsTensor(n->type);
    const ConstantNode* w = AsConstant(c->args[1]);
    if (!x || !y || !w || x->ndim() < 3 || y->ndim() != x->ndim() ||
        static_cast<int>(w->value.shape().size()) != x->ndim())
      return out;
    Ints in;
    for (int i = 2; i < x->ndim(); ++i) {
      if (!x->shape[i].is_const() || !y->shape[i].is_const()) return out;
      in.push_back(x->shape[i].value());
    }
    const Ints kernel(w->value.shape().begin() + 2, w->value.shape().end());
    std::string error;
    const std::vector<ops::WindowDim> dims = ops::ComputeWindow(in, kernel, c->attrs, &error);
    if (!error.empty()) return out;
    const size_t rank = dims.size();
    Ints t0(rank), k(rank), begin(rank), end(rank);
    bool trimmed = false;
    for (size_t i = 0; i < rank; ++i) {
      const ops::WindowDim& d = dims[i];
      if (d.out != y->shape[i + 2].value()) return out;
      const int64_t first = UsefulTap(d, 0, 1), last = UsefulTap(d, d.kernel - 1, -1);
      if (first > last) return out;  // no tap reads the image: every output is the bias
      t0[i] = first;
      k[i] = last - first + 1;
      begin[i] = d.pad_begin - first * d.dilation;
      const int64_t span = (k[i] - 1) * d.dilation + 1;
      end[i] = std::max<int64_t>(0, (d.out - 1) * d.stride + span - d.in - begin[i]);
      if (begin[i] < 0 || end[i] > d.pad_end ||
          (d.in + begin[i] + end[i] - span) / d.stride + 1 != d.out)
        return out;
      trimmed = trimmed || k[i] != d.kernel;
    }
    if (!trimmed) return out;
    std::string variant = "taps";
    for (size_t i = 0; i < rank; ++i) variant += StrCat("_", t0[i], "x", k[i]);
    Expr wt =
        DerivedConstant(c->args[1], variant, [w, t0, k] { return SliceTaps(w->value, t0, k); });
    Attrs attrs = c->attrs;
    Ints pads = begin;
    pads.insert(pads.end(), end.begin(), end.end());
    attrs.Set("kernel_shape", k);
    attrs.Set("pads", pads);
    attrs.Set("auto_pad", std::string("NOTSET"));
    std::vector<Expr> args = c->args;
    args[1] = wt;
    return MakeCall("conv", std::move(args), attrs, c->name);
  }
};

}  // namespace

void RegisterTrimConvTapsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "TrimConvTaps",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "drop the edge taps of a conv over a constant image size that only ever read "
             "padding (3x3 convs over one row, 5x5 over 2 x 6 images)",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"TrimConvTaps", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  TapTrimmer trimmer;
                  return std::static_pointer_cast<const FunctionNode>(trimmer.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
