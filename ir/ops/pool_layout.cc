// Channels-last pools, for the chains of convs that ChannelsLastConvs
// (passes/graph/channels_last.cc) moves out of ONNX's NCHW:
//
//   max_pool_nhwc(x), avg_pool_nhwc(x):  x[N, H, W, C] -> [N, OH, OW, C]
//   global_max_pool_nhwc(x), global_avg_pool_nhwc(x):  x[N, H, W, C] -> [N, 1, 1, C]
//
// Each is its NCHW op (pool.cc) on x's dims read in NCHW order, with the same attributes and
// the same result, laid out channels-last. So the type relation, the reference kernel and the
// lowering are the NCHW op's, on a permuted view: the relation on the permuted type, the
// reference on permuted copies, the lowering on an LTensor that reads x at permuted indices
// (a view costs nothing: an LTensor is a function of its index). The loop nest is the result's,
// channels innermost, so the channels are what VectorizeLoops makes vectors of. One exception:
// windows that overlap or pad take a lowering of their own (LowerWindowedPoolNhwc below), where
// the NCHW one would copy x into phases.
//
// Why: a pool between two convs of a chain would otherwise end it (a transpose back to NCHW,
// another into the next conv). Kept channels-last, every kernel of a small CNN splits its
// outermost loop, the output rows, across threads, so each thread reads mostly the rows it
// wrote: a conv's NCHW form splits the output channels, and each thread then reads all of the
// input, half of it from the other core's cache (two threads of one conv 32 -> 64 at 16 x 16
// took 37 us each where one took 48 for both: every byte written by one core and read by the
// other costs ~0.25 ns on the 2-vCPU Xeon here).
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {
namespace {

// NCHW dims from NHWC ones, and back.
const std::vector<int> kToNchw = {0, 3, 1, 2};
const std::vector<int> kToNhwc = {0, 2, 3, 1};

template <typename D>
std::vector<D> Permuted(const std::vector<D>& v, const std::vector<int>& perm) {
  std::vector<D> out;
  for (int a : perm) out.push_back(v[a]);
  return out;
}

Type PermutedType(const TensorTypeNode& t, const std::vector<int>& perm) {
  return TensorType(Permuted(t.shape, perm), t.dtype);
}

// x[N, H, W, C] read as [N, C, H, W].
LTensor NchwView(const LTensor& x) {
  return LTensor{x.dtype, Permuted(x.shape, kToNchw),
                 [x](const std::vector<loop::Expr>& i) { return x.at(Permuted(i, kToNhwc)); }};
}

// A windowed pool whose windows overlap or pad, channels-last, with its taps spelled out:
// y[n, oy, ox, c] = max (or the mean over the counted positions) of x[n, h, w, c] over the
// window's positions, each read at its index clamped into x and dropped by a select where it
// lies outside. The select's condition depends on the pixel, not the channel, so the output's
// channel loop vectorizes with contiguous loads and a select per tap; the NCHW lowering's phase
// split would gather from the channels-last x (64 x 112 x 112, 3x3 stride 2: 5.2 ms against
// 0.42 NCHW). Float dtypes, at most kMaxSpelledTaps taps; nullopt otherwise, for windows that
// read in place and over a symbolic image size (the NCHW op's lowering does those).
std::optional<LTensor> LowerWindowedPoolNhwc(bool is_max, const LTensor& x, const Attrs& attrs,
                                             const std::vector<loop::Expr>& out_shape) {
  if (HasSymbolicSpatial(x, {1, 2})) return std::nullopt;  // the NCHW op's symbolic lowering
  const std::vector<WindowDim> dims =
      LoweredWindow(NchwView(x), attrs.GetInts("kernel_shape"), attrs);
  if (!IsFloat(x.dtype) || dims.size() != 2 || WindowsReadInPlace(dims) ||
      TapCount(dims) > kMaxSpelledTaps)
    return std::nullopt;
  const bool include_pad = !is_max && attrs.GetBool("count_include_pad");
  const DType t = x.dtype;
  // Max in f32 (f64 for f64: exact either way); the mean's sum in f64, as the NCHW lowering.
  const DType c = is_max ? (t == DType::kFloat64 ? t : DType::kFloat32) : DType::kFloat64;
  auto at = [x, dims, is_max, include_pad, t, c](const std::vector<loop::Expr>& idx) {
    loop::Expr acc, count;
    for (int64_t ky = 0; ky < dims[0].kernel; ++ky) {
      for (int64_t kx = 0; kx < dims[1].kernel; ++kx) {
        std::vector<loop::Expr> xi = {idx[0], nullptr, nullptr, idx[3]};
        loop::Expr inside, counted;
        const int64_t k[2] = {ky, kx};
        for (int d = 0; d < 2; ++d) {
          const WindowDim& w = dims[d];
          loop::Expr pos = TapPosition(w, idx[1 + d], I64(k[d]));
          inside = And(inside, InRange(pos, I64(0), I64(w.in)));
          counted = And(counted, Counted(w, idx[1 + d], k[d], include_pad));
          xi[1 + d] = loop::Max(I64(0), loop::Min(pos, I64(w.in - 1)));
        }
        loop::Expr fill = lower::Const(is_max ? -std::numeric_limits<double>::infinity() : 0, c);
        loop::Expr v = loop::Select(inside, loop::Cast(c, x.at(xi)), fill);
        acc = !acc ? v : is_max ? loop::Max(acc, v) : loop::Add(acc, v);
        if (is_max) continue;
        loop::Expr one = loop::Select(counted, lower::Const(1, c), lower::Const(0, c));
        count = count ? loop::Add(count, one) : one;
      }
    }
    return loop::Cast(t, is_max ? acc : loop::Div(acc, count));
  };
  return LTensor{t, out_shape, at};
}

// The channels-last form of the NCHW op `nchw`, whose one input and one output are
// [N, C, H, W].
OpDef ChannelsLastPool(const std::string& nchw, const OpDef& def) {
  OpDef op = def;
  op.name = nchw + "_nhwc";
  op.doc = StrCat(nchw, " on channels-last x[N, H, W, C], the result channels-last too");
  op.boxes_operand = nullptr;
  op.type_rel = [nchw](TypeRelContext& ctx) {
    const TensorTypeNode& x = ctx.tensor(0);
    if (x.ndim() != 4)
      ctx.Fail(StrCat("input must be 4-D [N, H, W, C], got ", ShapeToString(x.shape)));
    const Type y = InferOpType(nchw, {PermutedType(x, kToNchw)}, ctx.attrs());
    return PermutedType(*AsTensor(y), kToNhwc);
  };
  op.ref_kernel = [nchw](const std::vector<Tensor>& in, const Attrs& attrs,
                         std::vector<Tensor>& out) {
    const std::vector<Tensor> y = RunOpReference(nchw, {PermuteAxes(in[0], kToNchw)}, attrs);
    const Tensor t = PermuteAxes(y[0], kToNhwc);
    std::memcpy(out[0].raw_data(), t.raw_data(), t.nbytes());
  };
  op.lower = [nchw](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                    const std::vector<Type>& out_types) {
    const LTensor& x = in[0];
    if (nchw == "max_pool" || nchw == "avg_pool")
      if (std::optional<LTensor> y = LowerWindowedPoolNhwc(
              nchw == "max_pool", x, attrs, ctx.ShapeExpr(AsTensor(out_types[0])->shape)))
        return std::vector<LTensor>{*y};
    const std::vector<Type> nchw_types = {PermutedType(*AsTensor(out_types[0]), kToNchw)};
    const LTensor y =
        OpRegistry::Global().Get(nchw).lower(ctx, {NchwView(x)}, attrs, nchw_types).at(0);
    return std::vector<LTensor>{
        LTensor{y.dtype, Permuted(y.shape, kToNhwc),
                [y](const std::vector<loop::Expr>& i) { return y.at(Permuted(i, kToNchw)); }}};
  };
  return op;
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

// After RegisterPoolOps (ops.def's order): each variant copies its NCHW op's attributes and
// pattern.
void RegisterPoolLayoutOps(OpRegistry& r) {
  for (const char* nchw : {"max_pool", "avg_pool", "global_max_pool", "global_avg_pool"})
    r.Register(ops::ChannelsLastPool(nchw, r.Get(nchw)));
}

}  // namespace kiln
