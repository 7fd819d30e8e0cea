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
// channels innermost, so the channels are what VectorizeLoops makes vectors of.
//
// Why: a pool between two convs of a chain would otherwise end it (a transpose back to NCHW,
// another into the next conv). Kept channels-last, every kernel of a small CNN splits its
// outermost loop, the output rows, across threads, so each thread reads mostly the rows it
// wrote: a conv's NCHW form splits the output channels, and each thread then reads all of the
// input, half of it from the other core's cache (two threads of one conv 32 -> 64 at 16 x 16
// took 37 us each where one took 48 for both: every byte written by one core and read by the
// other costs ~0.25 ns on the 2-vCPU Xeon here).
#include <cstring>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"

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
    const LTensor view{x.dtype, Permuted(x.shape, kToNchw), [x](const std::vector<loop::Expr>& i) {
                         return x.at(Permuted(i, kToNhwc));
                       }};
    const std::vector<Type> nchw_types = {PermutedType(*AsTensor(out_types[0]), kToNchw)};
    const LTensor y = OpRegistry::Global().Get(nchw).lower(ctx, {view}, attrs, nchw_types).at(0);
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
