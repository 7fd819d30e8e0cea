// matmul (NumPy semantics) and gemm (ONNX semantics).
//
// Both allow f32, f16, bf16, f64, i32 and i64, with every operand of one dtype. The reference
// kernels accumulate floats in double (so the reference is at least as accurate as any
// generated kernel, which is compared against it with a tolerance) and integers in 64-bit
// two's complement arithmetic that wraps on overflow, as NumPy's does, instead of being
// undefined behaviour.
//
// Lowered, an output element is a loop::Reduce sum over k of a[..., k] * b[k, ...]. Integers
// accumulate in wrapping i64, exactly like the reference. f64 accumulates in f64; f32, f16
// and bf16 accumulate in f32 rather than the reference's double: a kernel keeps twice the
// SIMD lanes, as BLAS libraries do, at an error that grows with K (tests use a tolerance
// scaled by K).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

bool IsMatmulDType(DType t) {
  return IsFloat(t) || t == DType::kInt32 || t == DType::kInt64;
}

// Calls fn.template operator()<T>() for the dtypes IsMatmulDType allows; the type relation
// has rejected the others, so only those kernels are instantiated.
template <typename Fn>
void DispatchMatmulDType(DType t, Fn&& fn) {
  DispatchDType(t, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || ops::kIsHalf<T> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int64_t>) {
      fn.template operator()<T>();
    } else {
      KILN_CHECK(false, "dtype ", DTypeName(t), " passed the type relation");
    }
  });
}

void CheckMatmulDType(TypeRelContext& ctx, DType t) {
  if (!IsMatmulDType(t))
    ctx.Fail(StrCat("dtype ", DTypeName(t), " is not supported (f32, f16, bf16, f64, i32, i64)"));
}

void CheckSameDType(TypeRelContext& ctx, const TensorTypeNode& a, const TensorTypeNode& b,
                    const char* what) {
  if (a.dtype != b.dtype)
    ctx.Fail(StrCat(what, " have different dtypes: ", DTypeName(a.dtype), ShapeToString(a.shape),
                    " and ", DTypeName(b.dtype), ShapeToString(b.shape)));
}

// The accumulator of a dot product over T: double for floats, wrapping 64-bit for integers.
template <typename T>
using AccT = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <typename T>
AccT<T> ToAcc(T x) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(x));
  } else {
    return static_cast<double>(static_cast<ops::ComputeT<T>>(x));
  }
}

template <typename T>
T FromAcc(AccT<T> acc) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(acc));
  } else if constexpr (ops::kIsHalf<T>) {
    return T(static_cast<float>(acc));
  } else {
    return static_cast<T>(acc);
  }
}

// ---- matmul ----

Type PackedMatmulRel(TypeRelContext& ctx, const TensorTypeNode& a, const TensorTypeNode& b,
                     int64_t panel);

Type MatmulRel(TypeRelContext& ctx) {
  const TensorTypeNode& a = ctx.tensor(0);
  const TensorTypeNode& b = ctx.tensor(1);
  CheckSameDType(ctx, a, b, "operands");
  CheckMatmulDType(ctx, a.dtype);
  if (const int64_t panel = ctx.attrs().GetInt("b_panel"); panel != 0)
    return PackedMatmulRel(ctx, a, b, panel);
  if (a.ndim() == 0 || b.ndim() == 0)
    ctx.Fail(StrCat("operands must have rank >= 1, got ", ShapeToString(a.shape), " x ",
                    ShapeToString(b.shape)));
  // NumPy promotes a 1-D left operand to a row [1, K] and a 1-D right operand to a column
  // [K, 1], and drops the added 1 from the result.
  const Dim& ka = a.shape.back();
  const Dim& kb = b.ndim() == 1 ? b.shape[0] : b.shape[b.ndim() - 2];
  ctx.AssertEqual(
      ka, kb,
      StrCat("inner dimensions differ: ", ShapeToString(a.shape), " x ", ShapeToString(b.shape)));
  Shape a_batch(a.shape.begin(), a.shape.end() - std::min(a.ndim(), 2));
  Shape b_batch(b.shape.begin(), b.shape.end() - std::min(b.ndim(), 2));
  Shape out;
  try {
    out = ctx.BroadcastShapes(a_batch, b_batch);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTypeError) throw;
    ctx.Fail(StrCat("batch dimensions of ", ShapeToString(a.shape), " x ", ShapeToString(b.shape),
                    " do not broadcast (", e.what(), ")"));
  }
  if (a.ndim() >= 2) out.push_back(a.shape[a.ndim() - 2]);
  if (b.ndim() >= 2) out.push_back(b.shape.back());
  return TensorType(std::move(out), a.dtype);
}

template <typename T>
void MatmulKernel(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t m = a.ndim() >= 2 ? a.shape()[a.ndim() - 2] : 1;
  const int64_t k = a.shape().back();
  const int64_t n = b.ndim() >= 2 ? b.shape().back() : 1;
  // The output's leading dims are the broadcast batch dims; the matrix dims that survive
  // (M unless `a` is 1-D, N unless `b` is 1-D) follow them.
  const int matrix_dims = (a.ndim() >= 2) + (b.ndim() >= 2);
  std::vector<int64_t> batch(out.shape().begin(), out.shape().end() - matrix_dims);
  std::vector<int64_t> a_batch(a.shape().begin(), a.shape().end() - std::min(a.ndim(), 2));
  std::vector<int64_t> b_batch(b.shape().begin(), b.shape().end() - std::min(b.ndim(), 2));
  ops::BroadcastIndex ia(a_batch, batch), ib(b_batch, batch);
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;

  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* z = out.data<T>();
  std::vector<AccT<T>> row(n);
  std::vector<int64_t> idx;
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    ops::Unravel(bi, batch, idx);
    const T* xa = x + ia.Offset(idx) * m * k;
    const T* yb = y + ib.Offset(idx) * k * n;
    T* zo = z + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      // i-k-j order walks both operands row by row; each output still sums over k in order.
      std::fill(row.begin(), row.end(), AccT<T>{0});
      for (int64_t kk = 0; kk < k; ++kk) {
        AccT<T> xik = ToAcc(xa[i * k + kk]);
        for (int64_t j = 0; j < n; ++j) row[j] += xik * ToAcc(yb[kk * n + j]);
      }
      for (int64_t j = 0; j < n; ++j) zo[i * n + j] = FromAcc<T>(row[j]);
    }
  }
}

// matmul with a packed B (AssertPackedB). A has rank 2 or more (its batch dims all use the one B).
Type PackedMatmulRel(TypeRelContext& ctx, const TensorTypeNode& a, const TensorTypeNode& b,
                     int64_t panel) {
  const int64_t n = ctx.attrs().GetInt("n");
  if (panel < 2 || n < 1)
    ctx.Fail(StrCat("b_panel = ", panel, " needs b_panel >= 2 and n >= 1, got n = ", n));
  if (a.ndim() < 2 || b.ndim() != 3)
    ctx.Fail(StrCat("A must have rank >= 2 and the packed B rank 3, got ", ShapeToString(a.shape),
                    " x ", ShapeToString(b.shape)));
  ops::AssertPackedB(ctx, b, a.shape.back(), ShapeToString(a.shape), n, panel);
  Shape out(a.shape.begin(), a.shape.end() - 1);
  out.push_back(Dim(n));
  return TensorType(std::move(out), a.dtype);
}

// ---- gemm ----

// Whole and within int64, so the integer kernel can use it exactly.
bool IsWholeInt64(double v) {
  return v == std::trunc(v) && v >= -0x1p63 && v < 0x1p63;
}

Type GemmOut(TypeRelContext& ctx, const TensorTypeNode& a, Shape out);

// gemm with a packed B (AssertPackedB). Only for an untransposed B.
Type PackedGemmRel(TypeRelContext& ctx, const TensorTypeNode& a, const TensorTypeNode& b,
                   bool trans_a, bool trans_b, int64_t panel) {
  const int64_t n = ctx.attrs().GetInt("n");
  if (panel < 2 || trans_b || n < 1)
    ctx.Fail(StrCat("b_panel = ", panel, " needs b_panel >= 2, n >= 1 and transB = 0, got n = ", n,
                    ", transB = ", trans_b));
  if (a.ndim() != 2 || b.ndim() != 3)
    ctx.Fail(StrCat("A must be 2-D and the packed B 3-D, got ", ShapeToString(a.shape), " x ",
                    ShapeToString(b.shape)));
  ops::AssertPackedB(ctx, b, a.shape[trans_a ? 0 : 1],
                     StrCat(ShapeToString(a.shape), trans_a ? "^T" : ""), n, panel);
  return GemmOut(ctx, a, {a.shape[trans_a ? 1 : 0], Dim(n)});
}

Type GemmRel(TypeRelContext& ctx) {
  const TensorTypeNode& a = ctx.tensor(0);
  const TensorTypeNode& b = ctx.tensor(1);
  CheckSameDType(ctx, a, b, "A and B");
  CheckMatmulDType(ctx, a.dtype);
  const bool trans_a = ctx.attrs().GetBool("transA");
  const bool trans_b = ctx.attrs().GetBool("transB");
  const int64_t panel = ctx.attrs().GetInt("b_panel");
  if (panel != 0) return PackedGemmRel(ctx, a, b, trans_a, trans_b, panel);
  if (a.ndim() != 2 || b.ndim() != 2)
    ctx.Fail(
        StrCat("A and B must be 2-D, got ", ShapeToString(a.shape), " x ", ShapeToString(b.shape)));
  if (!IsFloat(a.dtype)) {
    // Integer gemm is exact, so the scale factors must be too.
    for (const char* name : {"alpha", "beta"}) {
      double v = ctx.attrs().GetFloat(name);
      if (!IsWholeInt64(v))
        ctx.Fail(StrCat(name, " = ", FormatDouble(v),
                        " must be a whole number (within int64) for dtype ", DTypeName(a.dtype)));
    }
  }
  Dim m = a.shape[trans_a ? 1 : 0];
  Dim ka = a.shape[trans_a ? 0 : 1];
  Dim kb = b.shape[trans_b ? 1 : 0];
  Dim n = b.shape[trans_b ? 0 : 1];
  ctx.AssertEqual(ka, kb,
                  StrCat("inner dimensions differ: ", ShapeToString(a.shape), trans_a ? "^T" : "",
                         " x ", ShapeToString(b.shape), trans_b ? "^T" : ""));
  return GemmOut(ctx, a, {m, n});
}

// gemm's output type, once A and B gave [M, N]: C must broadcast to it.
Type GemmOut(TypeRelContext& ctx, const TensorTypeNode& a, Shape out) {
  if (ctx.num_args() == 3) {
    const TensorTypeNode& c = ctx.tensor(2);
    CheckSameDType(ctx, a, c, "A and C");
    std::string what =
        StrCat("C ", ShapeToString(c.shape), " does not broadcast to ", ShapeToString(out));
    if (c.ndim() > 2) ctx.Fail(what);
    // Unidirectional: C's dims are 1 or equal the output's; the output never grows.
    for (int i = 0; i < c.ndim(); ++i) {
      const Dim& cd = c.shape[i];
      const Dim& od = out[2 - c.ndim() + i];
      if (cd == od || (cd.is_const() && cd.value() == 1)) continue;
      ctx.AssertEqual(ctx.BroadcastDim(cd, od, what), od, what);
    }
  }
  return TensorType(std::move(out), a.dtype);
}

template <typename T>
void GemmKernel(const std::vector<Tensor>& in, const Attrs& attrs, Tensor& out) {
  const Tensor& a = in[0];
  const bool trans_a = attrs.GetBool("transA");
  const bool trans_b = attrs.GetBool("transB");
  const double alpha = attrs.GetFloat("alpha");
  const double beta = attrs.GetFloat("beta");
  const int64_t m = out.shape()[0], n = out.shape()[1];
  const int64_t k = a.shape()[trans_a ? 0 : 1];
  const Tensor b = attrs.GetInt("b_panel") > 0 ? ops::UnpackPanels(in[1], n) : in[1];
  // Element (r, c) of a row-major [rows, cols] matrix, or of its transpose.
  auto at = [](const T* p, int64_t r, int64_t c, int64_t cols, bool trans, int64_t rows_t) {
    return trans ? p[c * rows_t + r] : p[r * cols + c];
  };
  auto b_at = [&](const T* p, int64_t r, int64_t c) { return at(p, r, c, n, trans_b, k); };
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* z = out.data<T>();
  // ONNX's reference skips C when beta is 0, so a C holding inf or nan does not leak in.
  const bool use_c = in.size() == 3 && beta != 0.0;
  const T* cp = use_c ? in[2].data<T>() : nullptr;
  std::vector<int64_t> c_shape = use_c ? in[2].shape() : std::vector<int64_t>{};
  const int64_t c_rows = c_shape.size() == 2 ? c_shape[0] : 1;
  const int64_t c_cols = c_shape.empty() ? 1 : c_shape.back();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      AccT<T> acc{0};
      for (int64_t kk = 0; kk < k; ++kk)
        acc += ToAcc(at(x, i, kk, k, trans_a, m)) * ToAcc(b_at(y, kk, j));
      AccT<T> c{0};
      if (use_c) c = ToAcc(cp[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)]);
      if constexpr (std::is_integral_v<T>) {
        // Whole alpha/beta were checked by the type relation; wrap like the products do.
        uint64_t al = static_cast<uint64_t>(static_cast<int64_t>(alpha));
        uint64_t be = static_cast<uint64_t>(static_cast<int64_t>(beta));
        z[i * n + j] = FromAcc<T>(al * acc + (use_c ? be * c : 0));
      } else {
        z[i * n + j] = FromAcc<T>(alpha * acc + (use_c ? beta * c : 0.0));
      }
    }
  }
}

// ---- Lowering ----

// The dtype dot products of `t` accumulate in (see the file comment).
DType AccumDType(DType t) {
  if (!IsFloat(t)) return DType::kInt64;
  return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
}

// sum over k in [0, extent) of x(k) * y(k), in the accumulator dtype of the operands.
loop::Expr DotProduct(LowerContext& ctx, const loop::Expr& extent,
                      const std::function<loop::Expr(const loop::Expr&)>& x,
                      const std::function<loop::Expr(const loop::Expr&)>& y, DType acc) {
  loop::Var k = ctx.NewVar("k");
  loop::Expr product = loop::Mul(loop::Cast(acc, x(k)), loop::Cast(acc, y(k)));
  return loop::Reduce(loop::ReduceKind::kSum, product, {loop::IterVar{k, extent}});
}

std::vector<LTensor> LowerMatmul(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor a = in[0], b = in[1];
  std::vector<loop::Expr> shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  if (const int64_t panel = attrs.GetInt("b_panel"); panel > 0) {
    // B pre-packed (PackedMatmulRel), in the form TileLoops' tiles read in place.
    const DType dtype = a.dtype;
    auto at = [&ctx, a, b, panel, dtype](const std::vector<loop::Expr>& idx) {
      const loop::Expr& j = idx.back();
      loop::Expr t = loop::IntImm(panel);
      auto x = [&](const loop::Expr& k) {
        std::vector<loop::Expr> i(idx.begin(), idx.end() - 1);
        i.push_back(k);
        return a.at(i);
      };
      auto y = [&](const loop::Expr& k) {
        return b.at({loop::FloorDiv(j, t), k, loop::FloorMod(j, t)});
      };
      return loop::Cast(dtype, DotProduct(ctx, a.shape.back(), x, y, AccumDType(dtype)));
    };
    return {LTensor{dtype, shape, at}};
  }
  // As in the kernel: the output is the broadcast batch dims, then M unless `a` is 1-D and N
  // unless `b` is 1-D.
  const size_t nbatch = shape.size() - (a.ndim() >= 2) - (b.ndim() >= 2);
  // Only the batch dims' shapes matter to BroadcastIndex.
  LTensor a_batch{a.dtype, {a.shape.begin(), a.shape.end() - std::min(a.ndim(), 2)}, nullptr};
  LTensor b_batch{b.dtype, {b.shape.begin(), b.shape.end() - std::min(b.ndim(), 2)}, nullptr};
  const DType dtype = a.dtype;
  const std::vector<loop::Expr> batch_shape(shape.begin(), shape.begin() + nbatch);
  auto at = [&ctx, a, b, a_batch, b_batch, nbatch, batch_shape,
             dtype](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> batch(idx.begin(), idx.begin() + nbatch);
    std::vector<loop::Expr> ai = lower::BroadcastIndex(a_batch, batch, batch_shape);
    std::vector<loop::Expr> bi = lower::BroadcastIndex(b_batch, batch, batch_shape);
    if (a.ndim() >= 2) ai.push_back(idx[nbatch]);
    auto x = [&](const loop::Expr& k) {
      std::vector<loop::Expr> i = ai;
      i.push_back(k);
      return a.at(i);
    };
    auto y = [&](const loop::Expr& k) {
      std::vector<loop::Expr> i = bi;
      i.push_back(k);
      if (b.ndim() >= 2) i.push_back(idx.back());
      return b.at(i);
    };
    return loop::Cast(dtype, DotProduct(ctx, a.shape.back(), x, y, AccumDType(dtype)));
  };
  return {LTensor{dtype, shape, at}};
}

// gemm: alpha * dot + beta * C[broadcast], in double for floats (as the reference computes
// it, once per output element) and in wrapping i64 for integers.
std::vector<LTensor> LowerGemm(LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor a = in[0], b = in[1];
  const bool trans_a = attrs.GetBool("transA");
  const bool trans_b = attrs.GetBool("transB");
  const double alpha = attrs.GetFloat("alpha");
  const double beta = attrs.GetFloat("beta");
  // As the reference: C is skipped when beta is 0, so an inf or nan in it does not leak in.
  const bool use_c = in.size() == 3 && beta != 0.0;
  const LTensor c = use_c ? in[2] : LTensor{};
  const DType dtype = a.dtype;
  const loop::Expr k_extent = a.shape[trans_a ? 0 : 1];
  const int64_t panel = attrs.GetInt("b_panel");
  const std::vector<loop::Expr> out_shape = ctx.ShapeExpr(AsTensor(out_types[0])->shape);
  auto at = [&ctx, a, b, c, trans_a, trans_b, alpha, beta, use_c, dtype, k_extent, panel,
             out_shape](const std::vector<loop::Expr>& idx) {
    const loop::Expr& i = idx[0];
    const loop::Expr& j = idx[1];
    auto x = [&](const loop::Expr& k) { return trans_a ? a.at({k, i}) : a.at({i, k}); };
    // A packed B in TileLoops' pre-packed form, which its tiles read in place.
    auto y = [&](const loop::Expr& k) {
      if (panel > 0) {
        loop::Expr t = loop::IntImm(panel);
        return b.at({loop::FloorDiv(j, t), k, loop::FloorMod(j, t)});
      }
      return trans_b ? b.at({j, k}) : b.at({k, j});
    };
    loop::Expr dot = DotProduct(ctx, k_extent, x, y, AccumDType(dtype));
    if (alpha == 1.0 && !use_c) return loop::Cast(dtype, dot);
    // f32 with alpha = beta = 1 (a Linear layer's bias): adding in f32 gives the bits the
    // reference's f64 sum rounded to f32 does (double rounding is harmless for + when the wider
    // format has at least 2p + 2 bits: 53 >= 2 * 24 + 2), without converting each tile to f64.
    if (dtype == DType::kFloat32 && alpha == 1.0 && beta == 1.0 && use_c)
      return loop::Add(dot, c.at(lower::BroadcastIndex(c, idx, out_shape)));
    // Integer alpha and beta are whole numbers within int64 (checked by the type relation).
    const DType e = IsFloat(dtype) ? DType::kFloat64 : DType::kInt64;
    auto scalar = [e](double v) {
      return IsFloat(e) ? loop::FloatImm(v, e) : loop::IntImm(static_cast<int64_t>(v), e);
    };
    loop::Expr r = loop::Mul(scalar(alpha), loop::Cast(e, dot));
    if (use_c)
      r = loop::Add(r, loop::Mul(scalar(beta),
                                 loop::Cast(e, c.at(lower::BroadcastIndex(c, idx, out_shape)))));
    return loop::Cast(dtype, r);
  };
  return {LTensor{dtype, out_shape, at}};
}

}  // namespace

void RegisterMatmulOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "matmul",
      .doc = "NumPy matmul: batched, with broadcast batch dims; 1-D operands are promoted",
      .min_inputs = 2,
      .max_inputs = 2,
      // B pre-packed into panels of this many columns (0: a plain B), and the column count N
      // it holds; see PackedMatmulRel.
      .attrs = {{"b_panel", AttrKind::kInt, AttrValue(int64_t{0})},
                {"n", AttrKind::kInt, AttrValue(int64_t{0})}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = MatmulRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            const int64_t panel = attrs.GetInt("b_panel");
            const Tensor b = panel > 0 ? ops::UnpackPanels(in[1], attrs.GetInt("n")) : in[1];
            DispatchMatmulDType(in[0].dtype(),
                                [&]<typename T>() { MatmulKernel<T>(in[0], b, out[0]); });
          },
      .lower = LowerMatmul,
  });
  r.Register(OpDef{
      .name = "gemm",
      .doc = "ONNX Gemm: alpha * A' B' + beta * C, A' = transA ? A^T : A, C broadcast to [M, N]",
      .min_inputs = 2,
      .max_inputs = 3,
      .attrs = {{"transA", AttrKind::kBool, AttrValue(false)},
                {"transB", AttrKind::kBool, AttrValue(false)},
                {"alpha", AttrKind::kFloat, AttrValue(1.0)},
                {"beta", AttrKind::kFloat, AttrValue(1.0)},
                // B pre-packed into panels of this many columns (0: a plain B), and the
                // column count N it holds; see PackedGemmRel.
                {"b_panel", AttrKind::kInt, AttrValue(int64_t{0})},
                {"n", AttrKind::kInt, AttrValue(int64_t{0})}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = GemmRel,
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            DispatchMatmulDType(in[0].dtype(),
                                [&]<typename T>() { GemmKernel<T>(in, attrs, out[0]); });
          },
      .lower = LowerGemm,
  });
}

}  // namespace kiln
