// pad, with the semantics of ONNX Pad: every rank and every dtype. The other neural-network
// ops are in conv.cc (conv, conv_transpose) and pool.cc (the pools and max_unpool).
//
// Lowering never loads out of bounds: every arm of a select is evaluated (vector code loads all
// lanes), so a padded position reads the input at its index clamped into range and the select
// then discards the value.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {
namespace {

using loop::Expr;

// ---- pad ----
//
// out[o] = x[o - pad_begin] where that is inside x; elsewhere `value` (constant), the nearest
// edge element (edge) or the mirror image without repeating the edge (reflect). Negative pads
// crop. reflect needs pads of at most in - 1, so one reflection reaches every padded position.

std::string CheckPadMode(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "constant" || s == "reflect" || s == "edge") return "";
  return StrCat("must be constant, reflect or edge, got \"", s, "\"");
}

Type PadRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const std::vector<int64_t>& pads = ctx.attrs().GetInts("pads");
  const int rank = x.ndim();
  if (static_cast<int>(pads.size()) != 2 * rank)
    ctx.Fail(StrCat("pads ", JoinInts(pads), " must have ", 2 * rank,
                    " values (the begin pads of every axis, then the end pads) for ",
                    ShapeToString(x.shape)));
  const std::string& mode = ctx.attrs().GetString("mode");
  Shape out;
  for (int i = 0; i < rank; ++i) {
    const int64_t pb = pads[i], pe = pads[rank + i];
    const Dim& d = x.shape[i];
    if (!d.is_const()) {
      if (pb < 0 || pe < 0 || (mode != "constant" && (pb || pe)))
        ctx.Fail(StrCat("axis ", i, " of ", ShapeToString(x.shape),
                        " is symbolic: it can only get non-negative constant-mode pads, got ", pb,
                        ", ", pe, " in mode ", mode));
      out.push_back(d + Dim(pb + pe));
      continue;
    }
    const int64_t n = d.value() + pb + pe;
    if (n < 0)
      ctx.Fail(StrCat("pads ", pb, ", ", pe, " crop axis ", i, " of ", ShapeToString(x.shape),
                      " below size 0"));
    if (mode == "edge" && d.value() == 0 && (pb > 0 || pe > 0))
      ctx.Fail(StrCat("edge mode cannot pad the empty axis ", i, " of ", ShapeToString(x.shape)));
    if (mode == "reflect" && (pb > 0 || pe > 0) && (pb >= d.value() || pe >= d.value()))
      ctx.Fail(StrCat("reflect mode pads ", pb, ", ", pe, " of axis ", i, " of ",
                      ShapeToString(x.shape), " must be smaller than its size"));
    out.push_back(n);
  }
  return TensorType(std::move(out), x.dtype);
}

// The input index that output index `o` of an axis of size `n` reads, or -1 for `value`.
int64_t PadSource(int64_t o, int64_t pb, int64_t n, const std::string& mode) {
  const int64_t i = o - pb;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect
}

void PadKernelRef(const Tensor& x, const Attrs& attrs, Tensor& out) {
  const std::vector<int64_t>& pads = attrs.GetInts("pads");
  const std::string& mode = attrs.GetString("mode");
  const double value = attrs.GetFloat("value");
  std::vector<int64_t> idx, src(x.ndim());
  for (int64_t o = 0; o < out.numel(); ++o) {
    ops::Unravel(o, out.shape(), idx);
    bool inside = true;
    for (int i = 0; i < x.ndim(); ++i) {
      src[i] = PadSource(idx[i], pads[i], x.shape()[i], mode);
      inside = inside && src[i] >= 0;
    }
    if (inside)
      ops::CopyElements(x, ops::Ravel(src, x.shape()), out, o, 1);
    else
      out.SetFromDouble(o, value);
  }
}

// Constant mode, nothing cropped, something padded: the result is x in a box.
bool PadBoxesOperand(const Attrs& attrs) {
  if (attrs.GetString("mode") != "constant") return false;
  bool any = false;
  for (int64_t p : attrs.GetInts("pads")) {
    if (p < 0) return false;
    any = any || p > 0;
  }
  return any;
}

std::vector<LTensor> LowerPad(LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                              const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const std::vector<int64_t> pads = attrs.GetInts("pads");
  const std::string mode = attrs.GetString("mode");
  const Expr value = lower::Const(attrs.GetFloat("value"), x.dtype);
  std::vector<Expr> shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  // An empty input (only constant mode may pad one) has nothing to load: all `value`.
  bool empty = false;
  Expr maybe_empty;  // a symbolic extent is 0 at run time
  for (const Expr& e : x.shape) {
    int64_t v = 0;
    if (loop::IsConstInt(e, &v))
      empty = empty || v == 0;
    else
      maybe_empty = Or(maybe_empty, loop::MakeBinary(loop::BinaryOp::kEQ, e, I64(0)));
  }
  if (empty) return {LTensor{x.dtype, shape, [value](const std::vector<Expr>&) { return value; }}};
  auto at = [x, pads, mode, value, maybe_empty](const std::vector<Expr>& idx) {
    const int rank = x.ndim();
    std::vector<Expr> src(rank);
    Expr inside;
    for (int a = 0; a < rank; ++a) {
      const int64_t pb = pads[a], pe = pads[rank + a];
      Expr i = loop::Sub(idx[a], I64(pb));
      if (pb <= 0 && pe <= 0) {  // only cropped: always inside
        src[a] = i;
        continue;
      }
      const Expr last = loop::Sub(x.shape[a], I64(1));
      if (mode == "constant") {
        inside = And(inside, InRange(i, I64(0), x.shape[a]));
        src[a] = loop::Max(I64(0), loop::Min(i, last));
      } else if (mode == "edge") {
        src[a] = loop::Max(I64(0), loop::Min(i, last));
      } else {  // reflect: |i|, mirrored at the last element
        Expr r =
            loop::Select(loop::MakeBinary(loop::BinaryOp::kLT, i, I64(0)), loop::Sub(I64(0), i), i);
        src[a] = loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, r, last),
                              loop::Sub(loop::Mul(I64(2), last), r), r);
      }
    }
    // With an extent 0 at run time every position is `value`, but the load still runs: read
    // the first element, for which every buffer has storage (see select.cc's concat).
    if (maybe_empty) {
      for (Expr& s : src) s = loop::Select(maybe_empty, I64(0), s);
      inside = And(inside, loop::Not(maybe_empty));
    }
    Expr v = x.at(src);
    return inside ? loop::Select(inside, v, value) : v;
  };
  LTensor out{x.dtype, shape, at};
  // The box needs no empty-input guard: its nest runs zero times when x is empty, and the
  // border nests then cover the whole result.
  if (PadBoxesOperand(attrs))
    out.box = std::make_shared<BoxedTensor>(
        BoxedTensor{x, std::vector<int64_t>(pads.begin(), pads.begin() + x.ndim()), value});
  return {out};
}

}  // namespace
}  // namespace kiln::ops

namespace kiln {

void RegisterNnOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "pad",
      .doc = "ONNX Pad: pads = [begin of each axis..., end of each axis...] (negative crops); "
             "mode constant (with value), reflect or edge",
      .attrs = {{"pads", AttrKind::kInts, std::nullopt},
                {"mode", AttrKind::kString, AttrValue(std::string("constant")), ops::CheckPadMode},
                {"value", AttrKind::kFloat, AttrValue(0.0)}},
      .pattern = OpPattern::kInjective,
      .type_rel = ops::PadRel,
      .ref_kernel = [](const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) { ops::PadKernelRef(in[0], attrs, out[0]); },
      .lower = ops::LowerPad,
      .boxes_operand = ops::PadBoxesOperand,
  });
}

}  // namespace kiln
