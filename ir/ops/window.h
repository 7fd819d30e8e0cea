// Window geometry and lowering helpers shared by the windowed ops (conv.cc: conv,
// conv_transpose; pool.cc: the pools and max_unpool) and pad (nn.cc). Internal to ir/ops/.
//
// Windowed ops (conv and the pools) take x[N, C, *spatial] with 1 to 3 spatial dims. Their
// output spatial size is fixed by the input's spatial size; any dim may be symbolic (a spatial
// one gives an output dim that is an expression of it, WindowOutShapeOf). Per spatial dim, with
// the effective
// kernel ek = (k - 1) * dilation + 1:
//   NOTSET:      out = floor((in + pad_begin + pad_end - ek) / stride) + 1   (ceil with ceil_mode,
//                dropping a last window that would start in the end padding, as PyTorch and
//                ONNX's reference do)
//   VALID:       pads 0, out = floor((in - ek) / stride) + 1
//   SAME_UPPER:  out = ceil(in / stride), total pad = max(0, (out - 1) * stride + ek - in),
//                split with the extra one at the end; SAME_LOWER puts it at the beginning.
// An input position that falls in the padding contributes nothing: a zero to conv's sum, no
// candidate to max_pool's max, and to avg_pool's divisor only with count_include_pad (which
// counts positions inside [-pad_begin, in + pad_end), so ceil_mode's overhang is not counted).
//
// Lowering never loads out of bounds: every arm of a select is evaluated (vector code loads all
// lanes), so a padded position reads the input at its index clamped into range and the select
// then discards the value.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/op_util.h"

namespace kiln::ops {

// ---- window geometry, shared by the relations, kernels and lowerings ----
//
// One spatial dim of a windowed op, all sizes concrete, is a WindowDim (declared in conv_gemm.h,
// beside the phase split that conv's and the pools' lowerings share).

std::string JoinInts(const std::vector<int64_t>& v);

// How many positions of the padded input the windows of `d` read, from the first window's
// first tap to the last window's last: (out - 1) * stride + (kernel - 1) * dilation + 1.
int64_t WindowSpan(const WindowDim& d);

// Whether windows neither overlap nor pad (nor reach past the input with ceil_mode): each input
// position is read by one window at most.
bool WindowsApart(const std::vector<WindowDim>& dims);

// Whether windows are apart (WindowsApart) and the innermost dim has at least 4 of them (2x2 stride
// 2 on rows of 8 or more): a pool then reads its taps in place, strided, and its innermost output
// loop vectorizes (pool.cc).
bool WindowsReadInPlace(const std::vector<WindowDim>& dims);

// `attr` as a list of `n` values, `def` each when empty; a wrong length is an error message.
std::vector<int64_t> PerDim(const Attrs& attrs, const char* attr, size_t n, int64_t def,
                            std::string* error);

// The `pads` attribute: the begin pads of the n spatial dims, then their end pads (all 0 when
// not given).
std::vector<int64_t> Pads(const Attrs& attrs, size_t n, std::string* error);

// Fails (sets `*error`, when empty) on explicit nonzero pads with an auto_pad other than
// NOTSET.
void CheckPadsAgainstAutoPad(const std::vector<int64_t>& pads, const std::string& auto_pad,
                             std::string* error);

// One WindowDim per spatial dim with its input size, kernel, stride and dilation set; the
// pads and the output size are left to the caller (ComputeWindow, conv_transpose's geometry).
std::vector<WindowDim> BaseWindowDims(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& kernel,
                                      const std::vector<int64_t>& strides,
                                      const std::vector<int64_t>& dilations);

// conv_transpose's geometry of every spatial dim (conv.cc says how): `out` its output size,
// pad_begin the positions its output crops at the start of the full scatter (negative where an
// output_shape reaches past it). Sets `*error` when the attributes do not fit.
std::vector<WindowDim> ComputeTransposeWindow(const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& kernel,
                                              const Attrs& attrs, std::string* error);

// The geometry of every spatial dim, from the input's spatial sizes and the kernel sizes.
// Attributes read: strides, pads, dilations (when the op has it), auto_pad, ceil_mode (when the
// op has it). Sets `*error` (and returns what it could) when the attributes do not fit.
std::vector<WindowDim> ComputeWindow(const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& kernel, const Attrs& attrs,
                                     std::string* error);

std::vector<int64_t> SpatialShape(const std::vector<int64_t>& shape);

// The schema shared by the windowed ops.
std::vector<AttrSpec> WindowAttrs();

// The type relation pieces of the windowed ops.

void RequireFloat(TypeRelContext& ctx, const TensorTypeNode& t, const char* what);

// Checks x is [N, C, *spatial] with 1-3 spatial dims.
void CheckWindowRank(TypeRelContext& ctx, const TensorTypeNode& x);

// Checks x is [N, C, *spatial] with 1-3 constant spatial dims, and returns the spatial sizes.
std::vector<int64_t> ConstSpatial(TypeRelContext& ctx, const TensorTypeNode& x);

std::vector<WindowDim> WindowOrFail(TypeRelContext& ctx, const std::vector<int64_t>& spatial,
                                    const std::vector<int64_t>& kernel);

Shape WindowOutShape(const Dim& n, const Dim& c, const std::vector<WindowDim>& dims);

// [N, c, *out] for a windowed op over x = [N, C, *spatial] (1-3 spatial dims, `kernel` one size
// per dim). Spatial dims may be symbolic: each output size is then a dim expression of the input
// size (the formulas above: floor division, and a min for ceil_mode), which specialization binds
// to exactly the size constant dims give. Fails on a bad rank, kernel or attributes.
Shape WindowOutShapeOf(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& c,
                       const std::vector<int64_t>& kernel);

// The type relation pieces conv, conv_transpose and conv_nhwc share (conv.cc).
// The weight's kernel dims, w's dims [first, first + spatial rank), constants that kernel_shape
// (when set) must match; `layout` names the weight's dims for the messages.
std::vector<int64_t> ConvKernel(TypeRelContext& ctx, const TensorTypeNode& x,
                                const TensorTypeNode& w, const char* layout, int first);
// The optional bias (argument 2): [m] of the input's dtype. `what` says where m comes from.
void CheckBias(TypeRelContext& ctx, const TensorTypeNode& x, const Dim& m, const std::string& what);
void CheckWeightDtype(TypeRelContext& ctx, const TensorTypeNode& x, const TensorTypeNode& w);

// conv's reference kernel (x NCHW, w [M, C/group, *kernel], optional bias; conv's attributes),
// for the ops that compute a conv in another layout (conv_layout.cc) to check against.
void ConvReference(const std::vector<Tensor>& in, const Attrs& attrs, Tensor& out);

// The input channel that channel `c` of output channel `m`'s group reads: group g = m / (M /
// group) reads input channels [g * cg, (g + 1) * cg), cg = w's dim 1 (conv.cc).
loop::Expr GroupInputChannel(const loop::Expr& m, const loop::Expr& c, const LTensor& w,
                             int64_t group);

// ---- symbolic spatial extents (conv_symbolic.cc) ----

// Whether any of x's `spatial_axes` is not a constant.
bool HasSymbolicSpatial(const LTensor& x, const std::vector<int>& spatial_axes);
// The window of a windowed op over symbolic spatial dims: kernel, stride and dilation from the
// attributes, `in`, `out` and the pads left 0: the shapes hold the extents, SymbolicPads the
// pads. Fails (KILN_CHECK) on bad attributes.
std::vector<WindowDim> SymbolicWindow(const std::vector<int64_t>& kernel, const Attrs& attrs);
// The begin and end pads of one spatial dim, as expressions of its extent.
struct PadExprs {
  loop::Expr begin, end;
};
// The pads of each dim of `dims` (SymbolicWindow) over the extents `in`: the attributes' for
// auto_pad NOTSET and VALID; SAME's from the extent, as ComputeWindow: the total that makes
// ceil(in / stride) windows fit, max(0, (ceil(in / stride) - 1) * stride + effective kernel -
// in), halved, the odd one at the end for SAME_UPPER and at the start for SAME_LOWER.
std::vector<PadExprs> SymbolicPads(const std::vector<WindowDim>& dims,
                                   const std::vector<loop::Expr>& in, const Attrs& attrs);
// x zero-padded along its `axes` (one per entry of `pads`), materialized as `conv_padded`, its
// extents expressions of x's; loads clamped into x, so a padded position never reads out of
// bounds (an axis of extent 0 reads x's first element, or nothing where the 0 is a constant).
// x itself when nothing is padded.
LTensor PaddedForWindow(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                        const std::vector<PadExprs>& pads);
// max_pool or avg_pool (NCHW, any rank) over symbolic spatial dims (pool_symbolic.cc), as
// pool.cc lowers them over constant ones: each tap's index clamped into x and dropped by a
// select where it lies outside.
LTensor LowerPoolSymbolic(bool is_max, LowerContext& ctx, const LTensor& x, const Attrs& attrs,
                          const std::vector<loop::Expr>& out_shape);
// conv (NCHW, any group) over symbolic spatial dims: a reduction over (channels, taps) of the
// padded input, f32 summed in f32 and the other floats in f64.
std::vector<LTensor> LowerConvSymbolic(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types,
                                       const std::vector<int64_t>& kernel);

// Reference kernels see up to 3 spatial dims; missing ones are size-1 dims of a size-1 kernel.
inline constexpr int kMaxSpatial = 3;
std::vector<WindowDim> PadTo3(std::vector<WindowDim> dims);

// Calls fn.template operator()<T>() for the float dtypes the windowed relations allow.
template <typename Fn>
void DispatchFloat(DType t, Fn&& fn) {
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || kIsHalf<T>) {
      fn.template operator()<T>();
    } else {
      KILN_CHECK(false, "dtype ", DTypeName(t), " passed the type relation");
    }
  });
}

template <typename T>
double ToDouble(T v) {
  return static_cast<double>(static_cast<ComputeT<T>>(v));
}
template <typename T>
T FromDouble(double v) {
  if constexpr (kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// ---- lowering helpers ----

loop::Expr I64(int64_t v);
// a && b, or b when a is null (no condition yet).
loop::Expr And(const loop::Expr& a, const loop::Expr& b);
// a || b, or b when a is null.
loop::Expr Or(const loop::Expr& a, const loop::Expr& b);
// lo <= i < hi.
loop::Expr InRange(const loop::Expr& i, const loop::Expr& lo, const loop::Expr& hi);

// Pools of at most this many taps spell each tap out as its own term (pool.cc over phases,
// pool_layout.cc channels-last) rather than reduce over the window.
constexpr int64_t kMaxSpelledTaps = 25;

// The taps of one window: the product of the kernel sizes.
int64_t TapCount(const std::vector<WindowDim>& dims);

// The input position tap k of output index o reads along dim d (the padding below 0):
// o * stride - pad_begin + k * dilation.
loop::Expr TapPosition(const WindowDim& d, const loop::Expr& o, const loop::Expr& k);
// The same with the begin pad an expression (SymbolicPads: SAME over a symbolic extent).
loop::Expr TapPosition(const WindowDim& d, const loop::Expr& pad_begin, const loop::Expr& o,
                       const loop::Expr& k);

// Whether window position `pos` (of output index o, tap k along dim d) counts toward avg_pool's
// divisor.
loop::Expr Counted(const WindowDim& d, const loop::Expr& o, int64_t k, bool include_pad);
// The same for input position `pos` of an input `in` long with pads `pads` (expressions: a
// symbolic extent).
loop::Expr Counted(const PadExprs& pads, const loop::Expr& in, const loop::Expr& pos,
                   bool include_pad);

// The lowest value of an integer dtype (the identity of max); 0 for other dtypes.
int64_t LowestInt(DType t);

// The window geometry of a lowering, from the (by then constant) spatial extents.
std::vector<WindowDim> LoweredWindow(const LTensor& x, const std::vector<int64_t>& kernel,
                                     const Attrs& attrs);

// The input positions one output element's window reads: per spatial dim, the index (clamped
// in range, so it may always be loaded) and whether it is really inside the input (null when
// it always is).
struct WindowTaps {
  std::vector<loop::Expr> index;
  loop::Expr inside;
  std::vector<loop::IterVar> axes;  // the kernel's reduction axes
};

WindowTaps Taps(LowerContext& ctx, const std::vector<WindowDim>& dims,
                const std::vector<loop::Expr>& out_idx);

}  // namespace kiln::ops
