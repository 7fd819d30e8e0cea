#include "ir/ops/op_util.h"

#include <algorithm>

#include "ir/loop/loop_text.h"

namespace kiln::ops {
namespace {

loop::Expr IsZero(const loop::Expr& extent) {
  return loop::MakeBinary(loop::BinaryOp::kEQ, extent, loop::IntImm(0));
}

}  // namespace

std::vector<int> NormalizeAxes(TypeRelContext& ctx, const std::vector<int64_t>& axes, int rank,
                               const std::string& what) {
  std::vector<int> out;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      ctx.Fail(StrCat(what, ": axis ", a, " is out of range for rank ", rank));
    out.push_back(static_cast<int>(a < 0 ? a + rank : a));
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    ctx.Fail(StrCat(what, ": repeated axis in ", IntsToString(axes)));
  return out;
}

std::function<std::string(const AttrValue&)> CheckNonNegativeInts(const std::string& what) {
  std::string prefix = what.empty() ? "" : what + " ";
  return [prefix](const AttrValue& v) -> std::string {
    for (int64_t d : std::get<std::vector<int64_t>>(v)) {
      if (d < 0) return StrCat(prefix, "must not be negative, got ", d);
    }
    return "";
  };
}

bool DTypeIn(DType t, DTypeClass c) {
  switch (c) {
    case DTypeClass::kFloat:
      return IsFloat(t);
    case DTypeClass::kSignedOrFloat:
      return IsFloat(t) || IsSignedInteger(t);
    case DTypeClass::kNumeric:
      return t != DType::kBool;
    case DTypeClass::kUnsigned:
      return IsUnsignedInteger(t);
    case DTypeClass::kBool:
      return t == DType::kBool;
    case DTypeClass::kAny:
      return true;
  }
  return false;
}

void RequireDType(const TypeRelContext& ctx, DType t, DTypeClass c, const std::string& what) {
  if (DTypeIn(t, c)) return;
  const char* expected = "";
  switch (c) {
    case DTypeClass::kFloat:
      expected = "a float dtype (f32, f16, bf16, f64)";
      break;
    case DTypeClass::kSignedOrFloat:
      expected = "a float or signed integer dtype";
      break;
    case DTypeClass::kNumeric:
      expected = "a numeric (non-bool) dtype";
      break;
    case DTypeClass::kUnsigned:
      expected = "an unsigned integer dtype (u8, u16, u32, u64)";
      break;
    case DTypeClass::kBool:
      expected = "bool";
      break;
    case DTypeClass::kAny:
      break;
  }
  ctx.Fail(StrCat(what, " must be ", expected, ", got ", DTypeName(t)));
}

std::vector<loop::Expr> OutShape(LowerContext& ctx, const Type& t) {
  return ctx.ShapeExpr(AsTensor(t)->shape);
}

loop::Expr Less(const loop::Expr& a, const loop::Expr& b) {
  return loop::MakeBinary(loop::BinaryOp::kLT, a, b);
}

bool SameExtent(const loop::Expr& a, const loop::Expr& b) {
  int64_t x, y;
  if (loop::IsConstInt(a, &x) && loop::IsConstInt(b, &y)) return x == y;
  return loop::StructuralEqual(a, b);
}

std::vector<loop::Expr> FirstElementIfEmpty(const loop::Expr& extent, std::vector<loop::Expr> idx) {
  if (loop::IsConstInt(extent)) return idx;
  loop::Expr empty = IsZero(extent);
  for (loop::Expr& i : idx) i = loop::Select(empty, loop::IntImm(0), i);
  return idx;
}

void AssertPackedB(TypeRelContext& ctx, const TensorTypeNode& b, const Dim& k,
                   const std::string& a_text, int64_t n, int64_t panel) {
  const std::string what = StrCat("packed B ", ShapeToString(b.shape), " is not [",
                                  (n + panel - 1) / panel, ", K, ", panel, "] for n = ", n);
  ctx.AssertEqual(b.shape[0], Dim((n + panel - 1) / panel), what);
  ctx.AssertEqual(b.shape[2], Dim(panel), what);
  ctx.AssertEqual(
      k, b.shape[1],
      StrCat("inner dimensions differ: ", a_text, " x packed ", ShapeToString(b.shape)));
}

Tensor UnpackPanels(const Tensor& b, int64_t n) {
  const int64_t panels = b.shape()[0], k = b.shape()[1], panel = b.shape()[2];
  Tensor out = Tensor::Empty(b.dtype(), {k, n});
  const size_t size = DTypeSize(b.dtype());
  const auto* src = static_cast<const unsigned char*>(b.raw_data());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t r = 0; r < k; ++r)
      for (int64_t t = 0; t < panel && p * panel + t < n; ++t)
        std::memcpy(dst + (r * n + p * panel + t) * size, src + ((p * k + r) * panel + t) * size,
                    size);
  return out;
}

}  // namespace kiln::ops
