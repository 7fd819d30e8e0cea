// Ops that rearrange elements without computing new values: reshape, transpose, squeeze,
// unsqueeze, expand, flatten, tile, depth_to_space, space_to_depth. They allow every dtype; kernels
// copy raw elements, and lowerings are index maps from an output index to the input element it
// reads.
#include <algorithm>
#include <optional>

#include "ir/loop/loop_text.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

// Kernel of the ops whose output is the input's row-major data under another shape.
void CopyAll(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  ops::CopyElements(in[0], 0, out[0], 0, in[0].numel());
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
  const Tensor t = PermuteAxes(x, TransposePerm(attrs.GetInts("perm"), x.ndim()));
  ops::CopyElements(t, 0, out[0], 0, t.numel());
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

Type ExpandRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  Shape target = ShapeFromInts(ctx.attrs().GetInts("shape"));
  return TensorType(ctx.BroadcastShapes(x.shape, target), x.dtype);
}

void ExpandKernel(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  ops::BroadcastIndex map(in[0].shape(), out[0].shape());
  ops::CopyByIndex(in[0], out[0], [&](const std::vector<int64_t>& idx) { return map.Offset(idx); });
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

Type TileRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& repeats = ctx.attrs().GetInts("repeats");
  if (static_cast<int>(repeats.size()) != x.ndim())
    ctx.Fail(StrCat("repeats ", IntsToString(repeats), " has ", repeats.size(), " entries but ",
                    ShapeToString(x.shape), " has rank ", x.ndim()));
  Shape out;
  for (int i = 0; i < x.ndim(); ++i) out.push_back(x.shape[i] * repeats[i]);
  return TensorType(std::move(out), x.dtype);
}

// Output element idx of a tile reads idx modulo the input's shape.
void TileKernel(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  ops::CopyByIndex(x, out[0], [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> src(idx.size());
    for (size_t a = 0; a < idx.size(); ++a) src[a] = idx[a] % x.shape()[a];
    return ops::Ravel(src, x.shape());
  });
}

// depth_to_space and space_to_depth move blocks between the channels and the spatial dims of
// an NCHW tensor. For an element at (c, h, w) of the spatial-side tensor with channel count C
// there, bh = h % b and bw = w % b pick its place in the block, and the depth-side channel is
//   DCR: (bh * b + bw) * C + c        CRD: (c * b + bh) * b + bw
// (space_to_depth uses DCR's order). The reference kernels use this function; the lowerings
// spell the same formulas in loop IR.
int64_t DepthChannel(bool dcr, int64_t c, int64_t bh, int64_t bw, int64_t b, int64_t C) {
  return dcr ? (bh * b + bw) * C + c : (c * b + bh) * b + bw;
}

const TensorTypeNode& RequireNCHW(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() != 4) ctx.Fail(StrCat("input ", ShapeToString(x.shape), " must be 4-D (NCHW)"));
  return x;
}

// `d` divided by `b`, which must divide it (a constraint when `d` is symbolic).
Dim ExactDiv(TypeRelContext& ctx, const Dim& d, int64_t b, const std::string& what) {
  Dim q = FloorDiv(d, b);
  if (d.is_const() && d.value() % b != 0)
    ctx.Fail(StrCat(what, " (", d.value(), ") is not a multiple of ", b));
  if (q * b != d) ctx.AssertEqual(q * b, d, StrCat(what, ", a multiple of ", b));
  return q;
}

Type DepthToSpaceRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = RequireNCHW(ctx);
  int64_t b = ctx.attrs().GetInt("blocksize");
  const std::string& mode = ctx.attrs().GetString("mode");
  if (mode != "DCR" && mode != "CRD") ctx.Fail(StrCat("mode must be DCR or CRD, got '", mode, "'"));
  Dim c = ExactDiv(ctx, x.shape[1], b * b, StrCat("channels of ", ShapeToString(x.shape)));
  return TensorType({x.shape[0], c, x.shape[2] * b, x.shape[3] * b}, x.dtype);
}

Type SpaceToDepthRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = RequireNCHW(ctx);
  int64_t b = ctx.attrs().GetInt("blocksize");
  Dim h = ExactDiv(ctx, x.shape[2], b, StrCat("height of ", ShapeToString(x.shape)));
  Dim w = ExactDiv(ctx, x.shape[3], b, StrCat("width of ", ShapeToString(x.shape)));
  return TensorType({x.shape[0], x.shape[1] * (b * b), h, w}, x.dtype);
}

void DepthToSpaceKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t b = attrs.GetInt("blocksize");
  bool dcr = attrs.GetString("mode") == "DCR";
  int64_t c_out = out[0].shape()[1];
  ops::CopyByIndex(x, out[0], [&](const std::vector<int64_t>& idx) {
    int64_t ch = DepthChannel(dcr, idx[1], idx[2] % b, idx[3] % b, b, c_out);
    return ops::Ravel({idx[0], ch, idx[2] / b, idx[3] / b}, x.shape());
  });
}

void SpaceToDepthKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t b = attrs.GetInt("blocksize");
  int64_t c_in = x.shape()[1];
  ops::CopyByIndex(x, out[0], [&](const std::vector<int64_t>& idx) {
    // Inverse of DepthChannel's DCR order: channel = (bh * b + bw) * C + c.
    int64_t c = idx[1] % c_in, block = idx[1] / c_in;
    return ops::Ravel({idx[0], c, idx[2] * b + block / b, idx[3] * b + block % b}, x.shape());
  });
}

// ---- Lowering ----

std::vector<loop::Expr> OutShape(LowerContext& ctx, const Type& t) {
  return ctx.ShapeExpr(AsTensor(t)->shape);
}

// Whether two extents are certainly equal: equal constants, or the same expression of the
// same symbols.
bool SameExtent(const loop::Expr& a, const loop::Expr& b) {
  int64_t x, y;
  if (loop::IsConstInt(a, &x) && loop::IsConstInt(b, &y)) return x == y;
  return loop::StructuralEqual(a, b);
}

// The input index that a row-major reshape of `in_shape` into `out_shape` reads for `out_idx`:
// the flat offset of the output index, unravelled in the input's shape. Leading and trailing
// dims the two shapes share map to themselves (the flat offsets agree on them, as both shapes
// hold the same number of elements), which keeps the common cases -- splitting or merging some
// dims, adding or removing 1s -- free of division by the dims they do not touch.
std::vector<loop::Expr> ReshapeIndex(const std::vector<loop::Expr>& in_shape,
                                     const std::vector<loop::Expr>& out_shape,
                                     const std::vector<loop::Expr>& out_idx) {
  const size_t ni = in_shape.size(), no = out_shape.size();
  size_t lead = 0;
  while (lead < ni && lead < no && SameExtent(in_shape[lead], out_shape[lead])) ++lead;
  size_t trail = 0;
  while (lead + trail < ni && lead + trail < no &&
         SameExtent(in_shape[ni - 1 - trail], out_shape[no - 1 - trail]))
    ++trail;
  std::vector<loop::Expr> in_idx(ni);
  for (size_t i = 0; i < lead; ++i) in_idx[i] = out_idx[i];
  for (size_t i = 0; i < trail; ++i) in_idx[ni - 1 - i] = out_idx[no - 1 - i];
  // The dims in between: ravel over the output's, unravel over the input's.
  loop::Expr flat = loop::IntImm(0);
  for (size_t i = lead; i < no - trail; ++i)
    flat = loop::Add(loop::Mul(flat, out_shape[i]), out_idx[i]);
  for (size_t i = ni - trail; i-- > lead;) {
    int64_t c;
    if (i == lead) {
      // flat < the extent of this dim here, so it needs no modulo.
      in_idx[i] = flat;
    } else if (loop::IsConstInt(in_shape[i], &c) && c == 1) {
      in_idx[i] = loop::IntImm(0);
    } else {
      in_idx[i] = loop::FloorMod(flat, in_shape[i]);
      flat = loop::FloorDiv(flat, in_shape[i]);
    }
  }
  return in_idx;
}

// reshape, squeeze, unsqueeze and flatten all keep the row-major order of the elements and
// only change the shape, so one lowering serves them all.
std::vector<LTensor> LowerAsReshape(LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
                                    const std::vector<Type>& out_types) {
  LTensor x = in[0];
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  return {LTensor{x.dtype, shape, [x, shape](const std::vector<loop::Expr>& idx) {
                    return x.at(ReshapeIndex(x.shape, shape, idx));
                  }}};
}

std::vector<LTensor> LowerTranspose(LowerContext& ctx, const std::vector<LTensor>& in,
                                    const Attrs& attrs, const std::vector<Type>& out_types) {
  LTensor x = in[0];
  std::vector<int> p = TransposePerm(attrs.GetInts("perm"), x.ndim());
  return {LTensor{x.dtype, OutShape(ctx, out_types[0]), [x, p](const std::vector<loop::Expr>& idx) {
                    std::vector<loop::Expr> in_idx(p.size());
                    for (size_t k = 0; k < p.size(); ++k) in_idx[p[k]] = idx[k];
                    return x.at(in_idx);
                  }}};
}

std::vector<LTensor> LowerExpand(LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
                                 const std::vector<Type>& out_types) {
  LTensor x = in[0];
  const std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  return {LTensor{x.dtype, shape, [x, shape](const std::vector<loop::Expr>& idx) {
                    return x.at(lower::BroadcastIndex(x, idx, shape));
                  }}};
}

// tile: each output index reads its value modulo the input extent; axes that are not repeated
// read the index as is.
std::vector<LTensor> LowerTile(LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  LTensor x = in[0];
  std::vector<int64_t> repeats = attrs.GetInts("repeats");
  return {LTensor{x.dtype, OutShape(ctx, out_types[0]),
                  [x, repeats](const std::vector<loop::Expr>& idx) {
                    std::vector<loop::Expr> in_idx = idx;
                    for (size_t a = 0; a < idx.size(); ++a) {
                      if (repeats[a] != 1) in_idx[a] = loop::FloorMod(idx[a], x.shape[a]);
                    }
                    return x.at(in_idx);
                  }}};
}

std::vector<LTensor> LowerDepthToSpace(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types) {
  LTensor x = in[0];
  const int64_t b = attrs.GetInt("blocksize");
  const bool dcr = attrs.GetString("mode") == "DCR";
  std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  loop::Expr c_out = shape[1];
  return {LTensor{x.dtype, shape, [x, b, dcr, c_out](const std::vector<loop::Expr>& idx) {
                    loop::Expr B = loop::IntImm(b);
                    loop::Expr bh = loop::FloorMod(idx[2], B), bw = loop::FloorMod(idx[3], B);
                    auto add = [](loop::Expr a, loop::Expr c) { return loop::Add(a, c); };
                    auto mul = [](loop::Expr a, loop::Expr c) { return loop::Mul(a, c); };
                    loop::Expr ch = dcr ? add(mul(add(mul(bh, B), bw), c_out), idx[1])
                                        : add(mul(add(mul(idx[1], B), bh), B), bw);
                    return x.at({idx[0], ch, loop::FloorDiv(idx[2], B), loop::FloorDiv(idx[3], B)});
                  }}};
}

std::vector<LTensor> LowerSpaceToDepth(LowerContext& ctx, const std::vector<LTensor>& in,
                                       const Attrs& attrs, const std::vector<Type>& out_types) {
  LTensor x = in[0];
  const int64_t b = attrs.GetInt("blocksize");
  return {LTensor{x.dtype, OutShape(ctx, out_types[0]), [x, b](const std::vector<loop::Expr>& idx) {
                    loop::Expr B = loop::IntImm(b);
                    loop::Expr c = loop::FloorMod(idx[1], x.shape[1]);
                    loop::Expr block = loop::FloorDiv(idx[1], x.shape[1]);
                    return x.at({idx[0], c,
                                 loop::Add(loop::Mul(idx[2], B), loop::FloorDiv(block, B)),
                                 loop::Add(loop::Mul(idx[3], B), loop::FloorMod(block, B))});
                  }}};
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
      .lower = LowerAsReshape,
  });
  r.Register(OpDef{
      .name = "transpose",
      .doc = "Permutes the axes: output axis i is input axis perm[i]; no perm reverses them.",
      .attrs = {{"perm", AttrKind::kInts, AttrValue{V{}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = TransposeRel,
      .ref_kernel = TransposeKernel,
      .lower = LowerTranspose,
  });
  r.Register(OpDef{
      .name = "squeeze",
      .doc = "Removes size-1 axes: the listed ones, or every constant 1 when axes is empty.",
      .attrs = {{"axes", AttrKind::kInts, AttrValue{V{}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = SqueezeRel,
      .ref_kernel = CopyAll,
      .lower = LowerAsReshape,
  });
  r.Register(OpDef{
      .name = "unsqueeze",
      .doc = "Inserts size-1 axes at the given positions of the output.",
      .attrs = {{"axes", AttrKind::kInts, std::nullopt}},
      .pattern = OpPattern::kInjective,
      .type_rel = UnsqueezeRel,
      .ref_kernel = CopyAll,
      .lower = LowerAsReshape,
  });
  r.Register(OpDef{
      .name = "expand",
      .doc = "ONNX Expand: broadcasts the input and `shape` against each other.",
      .attrs = {{"shape", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts("dims")}},
      .pattern = OpPattern::kBroadcast,
      .type_rel = ExpandRel,
      .ref_kernel = ExpandKernel,
      .lower = LowerExpand,
  });
  auto positive = [](const AttrValue& v) {
    return std::get<int64_t>(v) < 1 ? std::string("must be at least 1") : "";
  };
  r.Register(OpDef{
      .name = "tile",
      .doc = "ONNX Tile: repeats the input repeats[i] times along axis i.",
      .attrs = {{"repeats", AttrKind::kInts, std::nullopt, ops::CheckNonNegativeInts()}},
      .pattern = OpPattern::kInjective,
      .type_rel = TileRel,
      .ref_kernel = TileKernel,
      .lower = LowerTile,
  });
  r.Register(OpDef{
      .name = "depth_to_space",
      .doc = "ONNX DepthToSpace on NCHW: [n, c, h, w] -> [n, c / b^2, h * b, w * b]. Mode DCR "
             "takes the block offset from the high channel bits, CRD from the low ones.",
      .attrs = {{"blocksize", AttrKind::kInt, std::nullopt, positive},
                {"mode", AttrKind::kString, AttrValue{std::string("DCR")}}},
      .pattern = OpPattern::kInjective,
      .type_rel = DepthToSpaceRel,
      .ref_kernel = DepthToSpaceKernel,
      .lower = LowerDepthToSpace,
  });
  r.Register(OpDef{
      .name = "space_to_depth",
      .doc = "ONNX SpaceToDepth on NCHW: [n, c, h, w] -> [n, c * b^2, h / b, w / b], the "
             "inverse of depth_to_space in DCR mode.",
      .attrs = {{"blocksize", AttrKind::kInt, std::nullopt, positive}},
      .pattern = OpPattern::kInjective,
      .type_rel = SpaceToDepthRel,
      .ref_kernel = SpaceToDepthKernel,
      .lower = LowerSpaceToDepth,
  });
  r.Register(OpDef{
      .name = "flatten",
      .doc = "To 2-D: [prod(dims[:axis]), prod(dims[axis:])].",
      .attrs = {{"axis", AttrKind::kInt, AttrValue{int64_t{1}}}},
      .pattern = OpPattern::kInjective,
      .type_rel = FlattenRel,
      .ref_kernel = CopyAll,
      .lower = LowerAsReshape,
  });
}

}  // namespace kiln
