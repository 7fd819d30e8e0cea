// Ops that rearrange elements without computing new values: reshape, transpose, squeeze,
// unsqueeze, expand, flatten. They allow every dtype; kernels copy raw elements.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

// Copies `n` elements; byte copies keep the kernels independent of the dtype.
void CopyElements(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;  // empty tensors may have no buffer
  size_t es = static_cast<size_t>(DTypeSize(src.dtype()));
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_off * es,
              static_cast<const char*>(src.raw_data()) + src_off * es, n * es);
}

// Kernel of the ops whose output is the input's row-major data under another shape.
void CopyAll(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  CopyElements(in[0], 0, out[0], 0, in[0].numel());
}

// The -1 of a reshape: numel(input) / product(known target dims). Target dims copied by a 0
// are input dims, so they are cancelled against themselves first: `[batch, 8, 64] -> [0, -1]`
// gives 512 rather than `(batch * 512) // batch`, which Dim arithmetic does not simplify. What
// remains of the target is constant (each copied dim has its own input position).
Dim InferReshapeDim(TypeRelContext& ctx, const Shape& in, const Shape& out, size_t infer,
                    const std::string& what) {
  std::vector<Dim> in_left = in;
  Dim divisor = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == infer) continue;
    auto it = std::find(in_left.begin(), in_left.end(), out[i]);
    if (it != in_left.end()) {
      in_left.erase(it);
    } else {
      divisor = divisor * out[i];  // a literal from `shape`, which holds no 0 here
    }
  }
  Dim rest = ShapeNumel(in_left);
  Dim result = FloorDiv(rest, divisor);
  Dim back = result * divisor;
  if (back != rest) {
    if ((back - rest).is_const()) {
      Shape known = out;
      known.erase(known.begin() + infer);
      ctx.Fail(StrCat(what, ": ", ShapeNumel(in).ToString(), " elements are not a multiple of ",
                      ShapeNumel(known).ToString()));
    }
    // Divisible only for some bindings (`[seq, 3] -> [-1, 2]`): checked once seq is known.
    ctx.AssertEqual(back, rest, StrCat(what, ", element count"));
  }
  return result;
}

Type ReshapeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& spec = ctx.attrs().GetInts("shape");
  bool allowzero = ctx.attrs().GetBool("allowzero");
  std::string what = StrCat("cannot reshape ", ShapeToString(x.shape), " to ", IntsToString(spec));
  Shape out(spec.size());
  std::optional<size_t> infer;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer) ctx.Fail(StrCat(what, ": more than one -1"));
      infer = i;
    } else if (v < -1) {
      ctx.Fail(StrCat(what, ": dim ", v, " is negative (only -1, to infer a dim, is allowed)"));
    } else if (v == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.ndim())
        ctx.Fail(StrCat(what, ": the 0 at position ", i,
                        " copies an input dim, but the input has rank ", x.ndim()));
      out[i] = x.shape[i];
    } else {
      has_zero |= v == 0;
      out[i] = v;
    }
  }
  if (infer) {
    if (has_zero) ctx.Fail(StrCat(what, ": with allowzero, a 0 and a -1 cannot both appear"));
    out[*infer] = InferReshapeDim(ctx, x.shape, out, *infer, what);
  } else {
    Dim n_in = ShapeNumel(x.shape), n_out = ShapeNumel(out);
    if (n_in != n_out && (n_in - n_out).is_const())
      ctx.Fail(StrCat(what, ": ", n_in.ToString(), " elements vs ", n_out.ToString()));
    ctx.AssertEqual(n_in, n_out, StrCat(what, ", element count"));
  }
  return TensorType(std::move(out), x.dtype);
}

// perm[i] is the input axis that becomes output axis i.
std::vector<int> TransposePerm(const std::vector<int64_t>& perm, int rank) {
  std::vector<int> p(rank);
  for (int i = 0; i < rank; ++i) {
    p[i] = perm.empty() ? rank - 1 - i : ops::WrapAxis(perm[i], rank);
  }
  return p;
}

Type TransposeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& perm = ctx.attrs().GetInts("perm");
  if (!perm.empty()) {
    if (static_cast<int>(perm.size()) != x.ndim())
      ctx.Fail(StrCat("perm ", IntsToString(perm), " has ", perm.size(), " entries but ",
                      ShapeToString(x.shape), " has rank ", x.ndim()));
    ops::NormalizeAxes(ctx, perm, x.ndim(), StrCat("perm ", IntsToString(perm)));
  }
  Shape out;
  for (int a : TransposePerm(perm, x.ndim())) out.push_back(x.shape[a]);
  return TensorType(std::move(out), x.dtype);
}

void TransposeKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  std::vector<int> p = TransposePerm(attrs.GetInts("perm"), x.ndim());
  std::vector<int64_t> in_strides = x.strides();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    ops::Unravel(i, out[0].shape(), idx);
    int64_t src = 0;
    for (size_t k = 0; k < p.size(); ++k) src += idx[k] * in_strides[p[k]];
    CopyElements(x, src, out[0], i, 1);
  }
}

Type SqueezeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& axes_attr = ctx.attrs().GetInts("axes");
  std::vector<bool> drop(x.ndim(), false);
  if (axes_attr.empty()) {
    // A symbolic dim is kept: squeezing it would make the rank depend on the binding.
    for (int i = 0; i < x.ndim(); ++i) drop[i] = x.shape[i].is_const() && x.shape[i].value() == 1;
  } else {
    for (int a : ops::NormalizeAxes(ctx, axes_attr, x.ndim())) {
      const Dim& d = x.shape[a];
      if (d.is_const() && d.value() != 1)
        ctx.Fail(StrCat("cannot squeeze axis ", a, " of ", ShapeToString(x.shape), ": its size is ",
                        d.value(), ", not 1"));
      ctx.AssertEqual(d, 1, StrCat("squeezed axis ", a, " of ", ShapeToString(x.shape)));
      drop[a] = true;
    }
  }
  Shape out;
  for (int i = 0; i < x.ndim(); ++i) {
    if (!drop[i]) out.push_back(x.shape[i]);
  }
  return TensorType(std::move(out), x.dtype);
}

Type UnsqueezeRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& axes_attr = ctx.attrs().GetInts("axes");
  int out_rank = x.ndim() + static_cast<int>(axes_attr.size());
  std::vector<bool> is_new(out_rank, false);
  for (int a : ops::NormalizeAxes(ctx, axes_attr, out_rank)) is_new[a] = true;
  Shape out;
  int next = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? Dim(1) : x.shape[next++]);
  return TensorType(std::move(out), x.dtype);
}

std::string CheckNonNegative(const AttrValue& v) {
  for (int64_t d : std::get<std::vector<int64_t>>(v)) {
    if (d < 0) return StrCat("dims must not be negative, got ", d);
  }
  return "";
}

Type ExpandRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  Shape target = ShapeFromInts(ctx.attrs().GetInts("shape"));
  return TensorType(ctx.BroadcastShapes(x.shape, target), x.dtype);
}

void ExpandKernel(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  ops::BroadcastIndex map(in[0].shape(), out[0].shape());
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < out[0].numel(); ++i) {
    ops::Unravel(i, out[0].shape(), idx);
    CopyElements(in[0], map.Offset(idx), out[0], i, 1);
  }
}

Type FlattenRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  int64_t axis = ctx.attrs().GetInt("axis");
  // Unlike most axes, rank itself is valid: everything goes into the first output dim.
  if (axis < -x.ndim() || axis > x.ndim())
    ctx.Fail(StrCat("axis ", axis, " is out of range for ", ShapeToString(x.shape),
                    " (flatten allows -rank..rank)"));
  if (axis < 0) axis += x.ndim();
  Shape outer(x.shape.begin(), x.shape.begin() + axis);
  Shape inner(x.shape.begin() + axis, x.shape.end());
  return TensorType({ShapeNumel(outer), ShapeNumel(inner)}, x.dtype);
}

}  // namespace

void RegisterTransformOps(OpRegistry& r) {
  using V = std::vector<int64_t>;
  r.Register(OpDef{
      .name = "reshape",
      .doc = "ONNX Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred.",
      .attrs = {{"shape", AttrKind::kInts, std::nullopt},
                {"allowzero", AttrKind::kBool, AttrValue{false}}},
      .pattern = OpPattern::kInjective,
      .type_rel = ReshapeRel,
      .ref_kernel = CopyAll,
  });
  r.Register(OpDef{
      .name = "transpose",
      .doc = "Permutes the axes: output axis i is input axis perm[i]; no perm reverses them.",
      .attrs = {{"perm", AttrKind::kInts, AttrValue{V{}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = TransposeRel,
      .ref_kernel = TransposeKernel,
  });
  r.Register(OpDef{
      .name = "squeeze",
      .doc = "Removes size-1 axes: the listed ones, or every constant 1 when axes is empty.",
      .attrs = {{"axes", AttrKind::kInts, AttrValue{V{}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = SqueezeRel,
      .ref_kernel = CopyAll,
  });
  r.Register(OpDef{
      .name = "unsqueeze",
      .doc = "Inserts size-1 axes at the given positions of the output.",
      .attrs = {{"axes", AttrKind::kInts, std::nullopt}},
      .pattern = OpPattern::kInjective,
      .type_rel = UnsqueezeRel,
      .ref_kernel = CopyAll,
  });
  r.Register(OpDef{
      .name = "expand",
      .doc = "ONNX Expand: broadcasts the input and `shape` against each other.",
      .attrs = {{"shape", AttrKind::kInts, std::nullopt, CheckNonNegative}},
      .pattern = OpPattern::kBroadcast,
      .type_rel = ExpandRel,
      .ref_kernel = ExpandKernel,
  });
  r.Register(OpDef{
      .name = "flatten",
      .doc = "To 2-D: [prod(dims[:axis]), prod(dims[axis:])].",
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{1}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = FlattenRel,
      .ref_kernel = CopyAll,
  });
}

}  // namespace kiln
