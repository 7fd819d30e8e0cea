// Helpers shared by the op files: index arithmetic for reference kernels and small pieces of
// type relations and lowerings. Reference kernels favour the obviously correct over the fast.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Slice indices at least this large (exporters write INT64_MAX) are past the end of any dim:
// no tensor with a dim that large could be allocated. Also bounds sums of sizes.
inline constexpr int64_t kHuge = int64_t{1} << 62;

// The type reference arithmetic is done in: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeT = std::conditional_t<kIsHalf<T>, float, T>;

// Row-major unravel/ravel.
inline void Unravel(int64_t linear, const std::vector<int64_t>& shape, std::vector<int64_t>& idx) {
  idx.resize(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t d = shape[i] == 0 ? 1 : shape[i];
    idx[i] = linear % d;
    linear /= d;
  }
}
inline int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t linear = 0;
  for (size_t i = 0; i < shape.size(); ++i) linear = linear * shape[i] + idx[i];
  return linear;
}

// A row-major shape seen as [outer, len, inner] around one axis: element (o, k, i) of the view
// is at (o * len + k) * inner + i. A rank-0 shape (with axis 0) is one row of length 1. An empty
// shape (a dim of 0 anywhere) has no rows: outer and inner are 0, whatever the other dims. Its
// other dims may be huge (only a product with elements must fit in memory): multiplied out,
// they overflowed, and with the axis of length 0 a row loop ran their product's count of
// empty rows. So a kernel that writes something for an empty axis (a reduction's identity)
// must not take its row count from here.
struct AxisSplit {
  int64_t outer = 1;  // product of the dims before the axis
  int64_t len = 1;    // the axis' own size
  int64_t inner = 1;  // product of the dims after the axis
};
inline AxisSplit SplitAtAxis(const std::vector<int64_t>& shape, int axis) {
  AxisSplit s;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    if (shape[i] == 0) {
      s.outer = s.inner = 0;
      if (axis >= 0 && axis < static_cast<int>(shape.size())) s.len = shape[axis];
      return s;
    }
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (i < axis)
      s.outer *= shape[i];
    else if (i == axis)
      s.len = shape[i];
    else
      s.inner *= shape[i];
  }
  return s;
}

// Copies `n` elements; byte copies keep the kernels independent of the dtype.
inline void CopyElements(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off,
                         int64_t n) {
  if (n <= 0) return;  // empty tensors may have no buffer
  size_t es = static_cast<size_t>(DTypeSize(src.dtype()));
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_off * es,
              static_cast<const char*>(src.raw_data()) + src_off * es, n * es);
}

// out[i] = x[src_offset(idx)] for every element i of `out`, with idx its multi-index: the
// kernel of the ops that only move elements (slice, transpose, expand).
template <typename SrcOffset>
void CopyByIndex(const Tensor& x, Tensor& out, SrcOffset src_offset) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out.numel(); ++i) {
    Unravel(i, out.shape(), idx);
    CopyElements(x, src_offset(idx), out, i, 1);
  }
}

// Element j of an i32/i64 index tensor.
inline int64_t IndexAt(const Tensor& indices, int64_t j) {
  return indices.dtype() == DType::kInt64 ? indices.data<int64_t>()[j] : indices.data<int32_t>()[j];
}

// Maps an index of the broadcast output to the element of one input that it reads
// (NumPy rules: shapes aligned from the right, size-1 dims repeat).
class BroadcastIndex {
 public:
  BroadcastIndex(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape)
      : strides_(out_shape.size(), 0) {
    size_t off = out_shape.size() - in_shape.size();
    int64_t acc = 1;
    for (size_t i = in_shape.size(); i-- > 0;) {
      strides_[off + i] = in_shape[i] == 1 ? 0 : acc;
      // Saturates where a shape with a zero dim has others whose product overflows: no index
      // of such a tensor is ever read.
      if (__builtin_mul_overflow(acc, in_shape[i], &acc)) acc = std::numeric_limits<int64_t>::max();
    }
  }
  // Input offset for an output multi-index.
  int64_t Offset(const std::vector<int64_t>& out_idx) const {
    int64_t o = 0;
    for (size_t i = 0; i < strides_.size(); ++i) o += out_idx[i] * strides_[i];
    return o;
  }

 private:
  std::vector<int64_t> strides_;
};

// out[i] = fn(in[i]) for every element, computing in ComputeT<In> and storing to Out.
template <typename In, typename Out, typename Fn>
void MapUnary(const Tensor& in, Tensor& out, Fn fn) {
  const In* x = in.data<In>();
  Out* y = out.data<Out>();
  for (int64_t i = 0; i < in.numel(); ++i) {
    y[i] = static_cast<Out>(fn(static_cast<ComputeT<In>>(x[i])));
  }
}

// out = fn(a, b) with NumPy broadcasting; `out` already has the broadcast shape.
template <typename In, typename Out, typename Fn>
void MapBinary(const Tensor& a, const Tensor& b, Tensor& out, Fn fn) {
  BroadcastIndex ia(a.shape(), out.shape()), ib(b.shape(), out.shape());
  const In* x = a.data<In>();
  const In* y = b.data<In>();
  Out* z = out.data<Out>();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out.numel(); ++i) {
    Unravel(i, out.shape(), idx);
    z[i] = static_cast<Out>(fn(static_cast<ComputeT<In>>(x[ia.Offset(idx)]),
                               static_cast<ComputeT<In>>(y[ib.Offset(idx)])));
  }
}

// Type relation pieces.
inline Type SameTypeAsArg0(TypeRelContext& ctx) {
  return ctx.arg(0);
}

// The dtype families ops accept, for RequireDType.
enum class DTypeClass {
  kFloat,          // f32, f16, bf16, f64
  kSignedOrFloat,  // the floats and the signed integers
  kNumeric,        // every dtype but bool
  kUnsigned,       // u8, u16, u32, u64
  kBool,
  kAny,
};
bool DTypeIn(DType t, DTypeClass c);
// Fails with `<what> must be <class>, got <dtype>` unless `t` is in `c`.
void RequireDType(const TypeRelContext& ctx, DType t, DTypeClass c,
                  const std::string& what = "input");

// An AttrSpec check for a kInts attribute whose values must all be >= 0. The message is
// `<what> must not be negative, got <v>` (just `must not be negative, ...` when `what` is "").
std::function<std::string(const AttrValue&)> CheckNonNegativeInts(const std::string& what = "");

// Normalizes a list of axes against `rank`: negatives wrapped, range checked, duplicates
// rejected (type errors name `what`). Returns them sorted.
std::vector<int> NormalizeAxes(TypeRelContext& ctx, const std::vector<int64_t>& axes, int rank,
                               const std::string& what = "axes");

// The same for kernels, which see already-checked attributes.
inline int WrapAxis(int64_t axis, int rank) {
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// A [K, N] matrix pre-packed into panels of T columns (PackConstantWeights: gemm's and
// matmul's b_panel, conv_nhwc's w_panel) is [ceil(N / T), K, T], element (k, j) at
// [j // T, k, j % T], the columns past N zero. AssertPackedB checks that the rank-3 `b` has
// that shape for the reduction dim `k` (`a_text` names the other operand in the message);
// UnpackPanels gives the [K, N] matrix back (the reference kernels compute with it).
void AssertPackedB(TypeRelContext& ctx, const TensorTypeNode& b, const Dim& k,
                   const std::string& a_text, int64_t n, int64_t panel);
Tensor UnpackPanels(const Tensor& b, int64_t n);

// Lowering pieces.
// The result type's shape as loop expressions.
std::vector<loop::Expr> OutShape(LowerContext& ctx, const Type& t);
// a < b, a bool expression.
loop::Expr Less(const loop::Expr& a, const loop::Expr& b);
// Whether two extents are certainly equal: equal constants, or the same expression.
bool SameExtent(const loop::Expr& a, const loop::Expr& b);
// The index of a read from a tensor that may be empty at run time (a symbolic extent that is
// 0): then no index is in range, so every dim reads 0 -- the first element, for which every
// buffer has storage even when empty (Tensor::Empty allocates at least 64 bytes). Zeroing only
// the other dims would not do: with inner dims, an index 0 on the empty axis still reaches up
// to their size past the start. Costs a select per dim, so only symbolic extents get it.
std::vector<loop::Expr> FirstElementIfEmpty(const loop::Expr& extent, std::vector<loop::Expr> idx);

}  // namespace kiln::ops
