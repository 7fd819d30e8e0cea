// Signal and linear-algebra ops: dft (ONNX DFT-17), stft (STFT-17) and det (Det-11).
//
// Complex values are stored as ONNX stores them: a trailing dim of 2 holding (real, imaginary).
// A trailing dim of 1 is a real signal. Results are always complex.
//
//   dft(x: f32[1, 10, 10, 1], axis=1)                     -> f32[1, 10, 10, 2]
//   dft(x: f32[4, 9, 1], axis=1, onesided=true)           -> f32[4, 5, 2]
//   dft(x: f32[4, 9, 1], axis=1, length=16)               -> f32[4, 16, 2]  (zero-padded)
//   stft(s: f32[1, 128, 1], w: f32[16], frame_step=8)     -> f32[1, 15, 9, 2]
//   det(x: f32[3, 4, 4])                                  -> f32[3]
//
// Precision: the reference kernels compute in f64, and so do the lowerings, whose results are
// cast to the element type at the end; f32 results then agree with numpy's double-precision FFT
// (what ONNX's test data comes from) to the last rounding. The twiddle angle of sample n in bin
// k is taken from (n * k) mod N, so it stays in [0, 2 pi) however long the signal is.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

std::string CheckNonNegative(const AttrValue& v) {
  int64_t n = std::get<int64_t>(v);
  return n >= 0 ? "" : StrCat("must not be negative, got ", n);
}

std::string CheckPositive(const AttrValue& v) {
  int64_t n = std::get<int64_t>(v);
  return n >= 1 ? "" : StrCat("must be at least 1, got ", n);
}

// The trailing (real, imaginary) dim of a signal: 1 (real) or 2 (complex). Must be a constant,
// since it decides which elements exist.
int64_t ComplexParts(TypeRelContext& ctx, int arg, const char* what) {
  const TensorTypeNode& t = ctx.tensor(arg);
  const Dim& last = t.shape.back();
  if (!last.is_const() || (last.value() != 1 && last.value() != 2))
    ctx.Fail(StrCat(what, " ", TypeToString(ctx.arg(arg)),
                    " must end in a dim of 1 (real) or 2 (real, imaginary), got ",
                    last.ToString()));
  return last.value();
}

// The bins a DFT of `length` points returns: all of them, or the first floor(length / 2) + 1
// (the rest of a real signal's spectrum are their complex conjugates).
Dim Bins(const Dim& length, bool onesided) {
  return onesided ? FloorDiv(length, 2) + 1 : length;
}

// One term of a DFT: sample (xr + i xi) times the twiddle e^(-+ i angle), added to (re, im).
// The forward transform turns by -angle, the inverse by +angle.
struct Accumulator {
  double re = 0, im = 0;
  void Add(double xr, double xi, double angle, bool inverse) {
    double c = std::cos(angle), s = inverse ? std::sin(angle) : -std::sin(angle);
    re += xr * c - xi * s;
    im += xr * s + xi * c;
  }
};

// The angle of sample n in bin k of a DFT of `length` points.
double TwiddleAngle(int64_t n, int64_t k, int64_t length) {
  return kTwoPi * static_cast<double>((n * k) % length) / static_cast<double>(length);
}

// ---- dft ----
//
// y[..., k, ..., :] = sum over n < min(length, N) of x[..., n, ..., :] * e^(-+ 2 pi i n k / length)
// along `axis`, divided by `length` for the inverse. Samples past N are the zero padding; samples
// past `length` are dropped. `onesided` keeps the first length // 2 + 1 bins of that result
// whatever the input: for a complex input or the inverse this is how ONNX's reference
// implementation reads DFT-17, whose text calls onesided output of complex input "not possible"
// without making it an error.

Dim DftLength(TypeRelContext& ctx, int axis) {
  int64_t length = ctx.attrs().GetInt("length");
  return length > 0 ? Dim(length) : ctx.tensor(0).shape[axis];
}

Type DftRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kFloat, "x");
  const int rank = x.ndim();
  if (rank < 2)
    ctx.Fail(
        StrCat("x must be [..., N, ..., 1 or 2] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  ComplexParts(ctx, 0, "x");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), rank);
  if (axis == rank - 1)
    ctx.Fail(StrCat("axis ", ctx.attrs().GetInt("axis"), " is the last dim of x ",
                    TypeToString(ctx.arg(0)),
                    ", which holds the real and imaginary parts, not samples"));
  Dim length = DftLength(ctx, axis);
  if (length.is_const() && length.value() == 0)
    ctx.Fail(StrCat("the DFT length is 0: x ", TypeToString(ctx.arg(0)),
                    " has no samples along axis ", axis, " and no length is given"));
  ctx.AssertAtMost(Dim(1), length, "the DFT length");
  Shape s = x.shape;
  s[axis] = Bins(length, ctx.attrs().GetBool("onesided"));
  s.back() = 2;
  return TensorType(s, x.dtype);
}

void DftKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  const int rank = x.ndim();
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), rank);
  const bool inverse = attrs.GetBool("inverse");
  // x as [outer, n_in, inner, parts]; y as [outer, bins, inner, 2].
  const int64_t parts = x.shape().back();
  const int64_t n_in = x.shape()[axis];
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int d = axis + 1; d < rank - 1; ++d) inner *= x.shape()[d];
  const int64_t length = attrs.GetInt("length") > 0 ? attrs.GetInt("length") : n_in;
  const int64_t bins = y.shape()[axis];
  const int64_t used = std::min(length, n_in);
  const double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < bins; ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        Accumulator acc;
        for (int64_t n = 0; n < used; ++n) {
          int64_t at = ((o * n_in + n) * inner + i) * parts;
          acc.Add(x.GetAsDouble(at), parts == 2 ? x.GetAsDouble(at + 1) : 0.0,
                  TwiddleAngle(n, k, length), inverse);
        }
        int64_t to = ((o * bins + k) * inner + i) * 2;
        y.SetFromDouble(to, acc.re * scale);
        y.SetFromDouble(to + 1, acc.im * scale);
      }
    }
  }
}

// ---- stft ----
//
// y[b, f, k, :] = sum over n < frame_length of w[n] * s[b, f * frame_step + n, :] *
// e^(-2 pi i n k / frame_length): the DFT of each frame of the signal, weighted by the window
// (all ones when there is none). frames = 1 + (length - frame_length) // frame_step, so the last
// frame ends within the signal.

// The frame length: the attribute, else the window's length, else the signal's (ONNX's
// reference takes the whole signal as one frame then).
Dim StftFrameLength(TypeRelContext& ctx) {
  int64_t frame_length = ctx.attrs().GetInt("frame_length");
  if (frame_length > 0) return frame_length;
  if (ctx.num_args() > 1) return ctx.tensor(1).shape[0];
  return ctx.tensor(0).shape[1];
}

Type StftRel(TypeRelContext& ctx) {
  const TensorTypeNode& s = ctx.tensor(0);
  ops::RequireDType(ctx, s.dtype, ops::DTypeClass::kFloat, "signal");
  if (s.ndim() != 3)
    ctx.Fail(StrCat("signal must be [batch, length, 1 or 2], got ", TypeToString(ctx.arg(0))));
  ComplexParts(ctx, 0, "signal");
  if (ctx.num_args() > 1) {
    const TensorTypeNode& w = ctx.tensor(1);
    if (w.dtype != s.dtype || w.ndim() != 1)
      ctx.Fail(StrCat("window must be a 1-D tensor of the signal's dtype ", DTypeName(s.dtype),
                      ", got ", TypeToString(ctx.arg(1))));
    int64_t frame_length = ctx.attrs().GetInt("frame_length");
    if (frame_length > 0)
      ctx.AssertEqual(w.shape[0], Dim(frame_length),
                      StrCat("window ", TypeToString(ctx.arg(1)),
                             " must have frame_length = ", frame_length, " elements"));
  }
  Dim frame_length = StftFrameLength(ctx);
  const Dim& length = s.shape[1];
  if (frame_length.is_const() && frame_length.value() == 0)
    ctx.Fail("the frame length is 0 (an empty window, and no frame_length)");
  if (frame_length.is_const() && length.is_const() && length.value() < frame_length.value())
    ctx.Fail(StrCat("signal ", TypeToString(ctx.arg(0)), " has ", length.value(),
                    " samples, fewer than one frame of frame_length ", frame_length.value()));
  ctx.AssertAtMost(Dim(1), frame_length, "the frame length");
  ctx.AssertAtMost(frame_length, length, "the frame length (at most the signal's samples)");
  Dim frames = FloorDiv(length - frame_length, Dim(ctx.attrs().GetInt("frame_step"))) + 1;
  return TensorType({s.shape[0], frames, Bins(frame_length, ctx.attrs().GetBool("onesided")), 2},
                    s.dtype);
}

void StftKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& s = in[0];
  Tensor& y = out[0];
  const std::optional<Tensor> window = in.size() > 1 ? std::optional<Tensor>(in[1]) : std::nullopt;
  const int64_t batch = s.shape()[0], length = s.shape()[1], parts = s.shape()[2];
  const int64_t step = attrs.GetInt("frame_step");
  int64_t frame_length = attrs.GetInt("frame_length");
  if (frame_length == 0) frame_length = window ? window->numel() : length;
  const int64_t frames = y.shape()[1], bins = y.shape()[2];
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t k = 0; k < bins; ++k) {
        Accumulator acc;
        for (int64_t n = 0; n < frame_length; ++n) {
          double w = window ? window->GetAsDouble(n) : 1.0;
          int64_t at = (b * length + f * step + n) * parts;
          acc.Add(w * s.GetAsDouble(at), parts == 2 ? w * s.GetAsDouble(at + 1) : 0.0,
                  TwiddleAngle(n, k, frame_length), /*inverse=*/false);
        }
        int64_t to = ((b * frames + f) * bins + k) * 2;
        y.SetFromDouble(to, acc.re);
        y.SetFromDouble(to + 1, acc.im);
      }
    }
  }
}

// ---- det ----

Type DetRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  ops::RequireDType(ctx, x.dtype, ops::DTypeClass::kFloat, "x");
  const int rank = x.ndim();
  if (rank < 2)
    ctx.Fail(StrCat("x must be [..., M, M] with rank >= 2, got ", TypeToString(ctx.arg(0))));
  ctx.AssertEqual(x.shape[rank - 2], x.shape[rank - 1],
                  StrCat("x ", TypeToString(ctx.arg(0)), " must hold square matrices"));
  return TensorType(Shape(x.shape.begin(), x.shape.end() - 2), x.dtype);
}

// LU decomposition with partial pivoting, in f64: the determinant is the product of the pivots,
// negated once per row swap. A zero pivot column means a singular matrix.
double DeterminantLU(std::vector<double> a, int64_t m) {
  double det = 1.0;
  for (int64_t c = 0; c < m; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < m; ++r)
      if (std::fabs(a[r * m + c]) > std::fabs(a[pivot * m + c])) pivot = r;
    if (a[pivot * m + c] == 0.0) return 0.0;
    if (pivot != c) {
      for (int64_t j = 0; j < m; ++j) std::swap(a[c * m + j], a[pivot * m + j]);
      det = -det;
    }
    det *= a[c * m + c];
    for (int64_t r = c + 1; r < m; ++r) {
      double f = a[r * m + c] / a[c * m + c];
      for (int64_t j = c + 1; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
    }
  }
  return det;
}

void DetKernel(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int64_t m = x.shape().back();
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < out[0].numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.GetAsDouble(b * m * m + i);
    out[0].SetFromDouble(b, DeterminantLU(a, m));
  }
}

// ---- Lowering ----

constexpr DType kF64 = DType::kFloat64;

loop::Expr Eq(const loop::Expr& a, int64_t b) {
  return loop::MakeBinary(loop::BinaryOp::kEQ, a, loop::IntImm(b));
}

// cos and sin of 2 pi m / length for m in [0, length), as an f64 table [length, 2]: computed
// once per kernel, so the DFT's inner loop reads its twiddles instead of calling cos and sin.
LTensor TwiddleTable(LowerContext& ctx, const loop::Expr& length, const std::string& op) {
  LTensor table{kF64, {length, loop::IntImm(2)}, [length](const std::vector<loop::Expr>& idx) {
                  loop::Expr angle =
                      loop::Div(loop::Mul(lower::Const(kTwoPi, kF64), loop::Cast(kF64, idx[0])),
                                loop::Cast(kF64, length));
                  return loop::Select(Eq(idx[1], 0), loop::Call(loop::Intrinsic::kCos, {angle}),
                                      loop::Call(loop::Intrinsic::kSin, {angle}));
                }};
  return ctx.Materialize(table, op + "_twiddle");
}

// The part (0: real, 1: imaginary) of one DFT term (xr + i xi) * e^(-+ i angle), with cos and
// sin of the angle read from the table: the reference's Accumulator::Add as an expression.
loop::Expr TermPart(const loop::Expr& part, const loop::Expr& xr,
                    const std::optional<loop::Expr>& xi, const loop::Expr& cos,
                    const loop::Expr& sin, bool inverse) {
  // s = -sin for the forward transform; re = xr c - xi s, im = xr s + xi c.
  loop::Expr s = inverse ? sin : loop::Sub(lower::Const(0, kF64), sin);
  loop::Expr re = loop::Mul(xr, cos), im = loop::Mul(xr, s);
  if (xi) {
    re = loop::Sub(re, loop::Mul(*xi, s));
    im = loop::Add(im, loop::Mul(*xi, cos));
  }
  return loop::Select(Eq(part, 0), re, im);
}

std::vector<LTensor> LowerDft(LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                              const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const int rank = x.ndim();
  const int axis = ops::WrapAxis(attrs.GetInt("axis"), rank);
  const bool inverse = attrs.GetBool("inverse");
  int64_t parts = 0;
  KILN_CHECK(loop::IsConstInt(x.shape.back(), &parts), "dft: symbolic complex dim");
  const loop::Expr n_in = x.shape[axis];
  const loop::Expr length =
      attrs.GetInt("length") > 0 ? loop::IntImm(attrs.GetInt("length")) : n_in;
  const loop::Expr used = loop::Min(length, n_in);
  const LTensor table = TwiddleTable(ctx, length, "dft");
  const DType t = x.dtype;
  auto at = [&ctx, x, axis, inverse, parts, length, used, table,
             t](const std::vector<loop::Expr>& idx) {
    loop::Var n = ctx.NewVar("n");
    std::vector<loop::Expr> xi = idx;
    xi[axis] = n;
    xi.back() = loop::IntImm(0);
    loop::Expr re = loop::Cast(kF64, x.at(xi));
    std::optional<loop::Expr> im;
    if (parts == 2) {
      xi.back() = loop::IntImm(1);
      im = loop::Cast(kF64, x.at(xi));
    }
    loop::Expr m = loop::FloorMod(loop::Mul(n, idx[axis]), length);
    loop::Expr term = TermPart(idx.back(), re, im, table.at({m, loop::IntImm(0)}),
                               table.at({m, loop::IntImm(1)}), inverse);
    loop::Expr sum = loop::Reduce(loop::ReduceKind::kSum, term, {{n, used}});
    if (inverse) sum = loop::Div(sum, loop::Cast(kF64, length));
    return loop::Cast(t, sum);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types.at(0))->shape), at}};
}

std::vector<LTensor> LowerStft(LowerContext& ctx, const std::vector<LTensor>& in,
                               const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor s = in[0];
  const std::optional<LTensor> window =
      in.size() > 1 ? std::optional<LTensor>(in[1]) : std::nullopt;
  int64_t parts = 0;
  KILN_CHECK(loop::IsConstInt(s.shape[2], &parts), "stft: symbolic complex dim");
  const loop::Expr step = loop::IntImm(attrs.GetInt("frame_step"));
  loop::Expr frame_length = loop::IntImm(attrs.GetInt("frame_length"));
  if (attrs.GetInt("frame_length") == 0) frame_length = window ? window->shape[0] : s.shape[1];
  const LTensor table = TwiddleTable(ctx, frame_length, "stft");
  const DType t = s.dtype;
  auto at = [&ctx, s, window, parts, step, frame_length, table,
             t](const std::vector<loop::Expr>& idx) {
    // idx = [b, f, k, part]
    loop::Var n = ctx.NewVar("n");
    loop::Expr w = window ? loop::Cast(kF64, window->at({n})) : lower::Const(1, kF64);
    std::vector<loop::Expr> si = {idx[0], loop::Add(loop::Mul(idx[1], step), n), loop::IntImm(0)};
    loop::Expr re = loop::Mul(w, loop::Cast(kF64, s.at(si)));
    std::optional<loop::Expr> im;
    if (parts == 2) {
      si[2] = loop::IntImm(1);
      im = loop::Mul(w, loop::Cast(kF64, s.at(si)));
    }
    loop::Expr m = loop::FloorMod(loop::Mul(n, idx[2]), frame_length);
    loop::Expr term = TermPart(idx[3], re, im, table.at({m, loop::IntImm(0)}),
                               table.at({m, loop::IntImm(1)}), /*inverse=*/false);
    return loop::Cast(t, loop::Reduce(loop::ReduceKind::kSum, term, {{n, frame_length}}));
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types.at(0))->shape), at}};
}

// The largest matrix det lowers: its cofactor expansion has M! products (24 for 4x4), too many
// beyond that. Larger matrices would need an LU lowering, with the matrices materialized once per
// elimination step (a lowering states values, not in-place row updates); none is written yet, so
// they are kUnsupported when compiled (the reference kernel takes any size).
constexpr int64_t kMaxLoweredDetSize = 4;

// The determinant of the submatrix of `a` on `rows` x `cols` by cofactor expansion along its
// first row.
loop::Expr Cofactors(const std::function<loop::Expr(int64_t, int64_t)>& a,
                     const std::vector<int64_t>& rows, const std::vector<int64_t>& cols) {
  if (rows.empty()) return lower::Const(1, kF64);
  if (rows.size() == 1) return a(rows[0], cols[0]);
  std::vector<int64_t> rest_rows(rows.begin() + 1, rows.end());
  loop::Expr det;
  for (size_t j = 0; j < cols.size(); ++j) {
    std::vector<int64_t> rest_cols = cols;
    rest_cols.erase(rest_cols.begin() + static_cast<std::ptrdiff_t>(j));
    loop::Expr term = loop::Mul(a(rows[0], cols[j]), Cofactors(a, rest_rows, rest_cols));
    if (!det)
      det = term;
    else
      det = j % 2 == 0 ? loop::Add(det, term) : loop::Sub(det, term);
  }
  return det;
}

std::vector<LTensor> LowerDet(const std::vector<LTensor>& in, const std::vector<Type>& out_types,
                              LowerContext& ctx) {
  const LTensor x = in[0];
  int64_t m = 0;
  if (!loop::IsConstInt(x.shape.back(), &m))
    Throw(ErrorCode::kUnsupported,
          "det: the matrix size is symbolic; its lowering (a cofactor expansion) needs it known");
  if (m > kMaxLoweredDetSize)
    Throw(ErrorCode::kUnsupported, "det: x holds ", m, "x", m,
          " matrices; the lowering (a cofactor expansion) handles at most ", kMaxLoweredDetSize,
          "x", kMaxLoweredDetSize);
  const DType t = x.dtype;
  auto at = [x, m, t](const std::vector<loop::Expr>& idx) {
    auto a = [&](int64_t i, int64_t j) {
      std::vector<loop::Expr> xi = idx;
      xi.push_back(loop::IntImm(i));
      xi.push_back(loop::IntImm(j));
      return loop::Cast(kF64, x.at(xi));
    };
    std::vector<int64_t> all;
    for (int64_t i = 0; i < m; ++i) all.push_back(i);
    return loop::Cast(t, Cofactors(a, all, all));
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types.at(0))->shape), at}};
}

// ---- mel_weight_matrix ----
//
// ONNX MelWeightMatrix-17: [dft_length / 2 + 1, num_mel_bins] triangle filters that map a
// one-sided spectrum's bins to mel bands, as ONNX's reference computes them. The band edges
// are num_mel_bins + 2 points evenly spaced on the mel scale mel(f) = 2595 log10(1 + f / 700)
// from lower_edge_hertz, in steps of (mel(upper) - mel(lower)) / (num_mel_bins + 2) (so the
// last edge stays below upper_edge_hertz), each turned back into hertz and then into a DFT bin
// floor((dft_length + 1) * f / sample_rate). Band i rises from edge i to edge i + 1 (value
// (j - l) / (c - l) at bin j) and falls to edge i + 2 ((h - j) / (h - c), up to but excluding
// h); where the falling side exists it is the value at the shared bin c, which is 1 either way;
// a band whose first two edges coincide is 1 at that bin alone on its rising side. Bins past
// the spectrum (an edge can reach dft_length / 2 + 1 for an odd dft_length) are dropped.
// Everything is computed in f64 and rounded once to dtype.

double HertzToMel(double hz) {
  return 2595.0 * std::log10(1.0 + hz / 700.0);
}

// What the band edges are computed from: edge k = floor(scale * (10^((low + k step) / 2595) -
// 1)), with scale = 700 (dft_length + 1) / sample_rate.
struct MelEdges {
  double low_mel, mel_step, scale;
};

MelEdges MakeMelEdges(const Attrs& a) {
  const double low = HertzToMel(a.GetFloat("lower_edge_hertz"));
  const double high = HertzToMel(a.GetFloat("upper_edge_hertz"));
  const auto n = static_cast<double>(a.GetInt("num_mel_bins") + 2);
  return {low, (high - low) / n,
          700.0 * static_cast<double>(a.GetInt("dft_length") + 1) /
              static_cast<double>(a.GetInt("sample_rate"))};
}

double MelEdge(const MelEdges& m, int64_t k) {
  const double mel = static_cast<double>(k) * m.mel_step + m.low_mel;
  return std::floor(m.scale * (std::pow(10.0, mel / 2595.0) - 1.0));
}

Type MelWeightMatrixRel(TypeRelContext& ctx) {
  const Attrs& a = ctx.attrs();
  const DType dtype = a.GetDType("dtype");
  ops::RequireDType(ctx, dtype, ops::DTypeClass::kFloat, "dtype");
  const double lower = a.GetFloat("lower_edge_hertz"), upper = a.GetFloat("upper_edge_hertz");
  if (!(lower >= 0) || !std::isfinite(lower))
    ctx.Fail(StrCat("lower_edge_hertz must be finite and at least 0, got ", FormatDouble(lower)));
  if (!(upper > lower) || !std::isfinite(upper))
    ctx.Fail(StrCat("upper_edge_hertz must be finite and above lower_edge_hertz ",
                    FormatDouble(lower), ", got ", FormatDouble(upper)));
  return TensorType({a.GetInt("dft_length") / 2 + 1, a.GetInt("num_mel_bins")}, dtype);
}

// ONNX's reference loop: the rising side of each band, then the falling side over it.
void MelWeightMatrixKernel(const std::vector<Tensor>&, const Attrs& attrs,
                           std::vector<Tensor>& out) {
  const MelEdges m = MakeMelEdges(attrs);
  const int64_t bins = out[0].shape()[0], bands = out[0].shape()[1];
  std::vector<double> w(static_cast<size_t>(bins * bands), 0.0);
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j >= 0 && j < bins) w[static_cast<size_t>(j * bands + i)] = v;
  };
  for (int64_t i = 0; i < bands; ++i) {
    const auto l = static_cast<int64_t>(MelEdge(m, i));
    const auto c = static_cast<int64_t>(MelEdge(m, i + 1));
    const auto h = static_cast<int64_t>(MelEdge(m, i + 2));
    if (c == l) {
      set(c, i, 1);
    } else {
      for (int64_t j = l; j <= c; ++j)
        set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
    }
    for (int64_t j = c; j < h; ++j)
      set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
  }
  for (size_t k = 0; k < w.size(); ++k) out[0].SetFromDouble(static_cast<int64_t>(k), w[k]);
}

// Each element in closed form: the band edges (from pow, used several times per element) come
// from a kernel-local table of num_mel_bins + 2 values; bin j of band i is then
//   falling (c <= j < h): (h - j) / (h - c), else rising (l <= j <= c, l < c): (j - l) / (c - l),
//   else 1 where j = c = l, else 0.
std::vector<LTensor> LowerMelWeightMatrix(LowerContext& ctx, const std::vector<LTensor>&,
                                          const Attrs& attrs, const std::vector<Type>& out_types) {
  const MelEdges m = MakeMelEdges(attrs);
  const DType t = attrs.GetDType("dtype");
  const int64_t bands = attrs.GetInt("num_mel_bins");
  auto edge = [m](const std::vector<loop::Expr>& k) {
    loop::Expr mel = loop::Add(loop::Mul(loop::Cast(kF64, k[0]), lower::Const(m.mel_step, kF64)),
                               lower::Const(m.low_mel, kF64));
    loop::Expr power =
        loop::Call(loop::Intrinsic::kPow,
                   {lower::Const(10.0, kF64), loop::Div(mel, lower::Const(2595.0, kF64))});
    return loop::Call(
        loop::Intrinsic::kFloor,
        {loop::Mul(lower::Const(m.scale, kF64), loop::Sub(power, lower::Const(1.0, kF64)))});
  };
  const LTensor edges =
      ctx.Materialize(LTensor{kF64, {loop::IntImm(bands + 2)}, edge}, "mel_edges");
  auto at = [edges, t](const std::vector<loop::Expr>& idx) {
    using loop::BinaryOp;
    auto cmp = [](BinaryOp op, const loop::Expr& a, const loop::Expr& b) {
      return loop::MakeBinary(op, a, b);
    };
    auto both = [&](const loop::Expr& a, const loop::Expr& b) {
      return loop::MakeBinary(BinaryOp::kAnd, a, b);
    };
    const loop::Expr j = loop::Cast(kF64, idx[0]);
    const loop::Expr l = edges.at({idx[1]});
    const loop::Expr c = edges.at({loop::Add(idx[1], loop::IntImm(1))});
    const loop::Expr h = edges.at({loop::Add(idx[1], loop::IntImm(2))});
    const loop::Expr falling = both(cmp(BinaryOp::kLE, c, j), cmp(BinaryOp::kLT, j, h));
    const loop::Expr rising =
        both(cmp(BinaryOp::kLT, l, c), both(cmp(BinaryOp::kLE, l, j), cmp(BinaryOp::kLE, j, c)));
    const loop::Expr peak = both(cmp(BinaryOp::kEQ, l, c), cmp(BinaryOp::kEQ, j, c));
    // Where a side's condition is false its quotient is never used (and may divide by 0).
    loop::Expr v = loop::Select(peak, lower::Const(1, kF64), lower::Const(0, kF64));
    v = loop::Select(rising, loop::Div(loop::Sub(j, l), loop::Sub(c, l)), v);
    v = loop::Select(falling, loop::Div(loop::Sub(h, j), loop::Sub(h, c)), v);
    return loop::Cast(t, v);
  };
  return {LTensor{t, ctx.ShapeExpr(AsTensor(out_types.at(0))->shape), at}};
}

}  // namespace

void RegisterSignalOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "dft",
      .doc = "ONNX DFT-17: the discrete Fourier transform of x [..., N, ..., 1 or 2] (real, or "
             "real and imaginary) along `axis`, as [..., bins, ..., 2]. `length` (0: N) pads "
             "with zeros or truncates the signal; `inverse` turns the other way and divides by "
             "the length; `onesided` keeps the first length // 2 + 1 bins. Floats.",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{1}}},
                AttrSpec{"inverse", AttrKind::kBool, AttrValue{false}},
                AttrSpec{"onesided", AttrKind::kBool, AttrValue{false}},
                AttrSpec{"length", AttrKind::kInt, AttrValue{int64_t{0}}, CheckNonNegative}},
      // Every output reads a whole line of x: only an epilogue fuses into it.
      .pattern = OpPattern::kOutputFusable,
      .type_rel = DftRel,
      .ref_kernel = DftKernel,
      .lower = LowerDft,
  });
  r.Register(OpDef{
      .name = "stft",
      .doc = "ONNX STFT-17: the DFT of each frame of signal [batch, length, 1 or 2], the frames "
             "`frame_length` long (0: the window's length, else the signal's) and `frame_step` "
             "apart, weighted by the optional window [frame_length]; [batch, frames, bins, 2] "
             "with frames = 1 + (length - frame_length) // frame_step. `onesided` keeps the first "
             "frame_length // 2 + 1 bins. Floats.",
      .min_inputs = 1,
      .max_inputs = 2,
      .attrs = {AttrSpec{"frame_step", AttrKind::kInt, std::nullopt, CheckPositive},
                AttrSpec{"frame_length", AttrKind::kInt, AttrValue{int64_t{0}}, CheckNonNegative},
                AttrSpec{"onesided", AttrKind::kBool, AttrValue{true}}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = StftRel,
      .ref_kernel = StftKernel,
      .lower = LowerStft,
  });
  r.Register(OpDef{
      .name = "det",
      .doc = "ONNX Det: the determinants of the square matrices x [..., M, M], as [...]. Floats. "
             "Compiled for M <= 4 (cofactor expansion); the reference takes any M (LU).",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = DetRel,
      .ref_kernel = DetKernel,
      .lower = [](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs&,
                  const std::vector<Type>& out_types) { return LowerDet(in, out_types, ctx); },
  });
  r.Register(OpDef{
      .name = "mel_weight_matrix",
      .doc = "ONNX MelWeightMatrix-17: the [dft_length / 2 + 1, num_mel_bins] matrix of "
             "triangle filters (peak 1) that maps a one-sided spectrum of a dft_length-point DFT "
             "at sample_rate to mel bands between lower_edge_hertz and upper_edge_hertz (mel(f) "
             "= 2595 log10(1 + f / 700)), with ONNX's reference's band edges "
             "(num_mel_bins + 2 steps, floored to DFT bins). No inputs; a float dtype.",
      .min_inputs = 0,
      .max_inputs = 0,
      .attrs = {AttrSpec{"num_mel_bins", AttrKind::kInt, std::nullopt, CheckPositive},
                AttrSpec{"dft_length", AttrKind::kInt, std::nullopt, CheckPositive},
                AttrSpec{"sample_rate", AttrKind::kInt, std::nullopt, CheckPositive},
                AttrSpec{"lower_edge_hertz", AttrKind::kFloat, std::nullopt},
                AttrSpec{"upper_edge_hertz", AttrKind::kFloat, std::nullopt},
                AttrSpec{"dtype", AttrKind::kDType, AttrValue{DType::kFloat32}}},
      .pattern = OpPattern::kInjective,
      .type_rel = MelWeightMatrixRel,
      .ref_kernel = MelWeightMatrixKernel,
      .lower = LowerMelWeightMatrix,
  });
}

}  // namespace kiln
