// ONNX MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv (api/onnx/convert_norm.cc):
// one-node models built with the protobuf classes, imported, interpreted, and compared exactly
// on random 8-bit data with references written here as plain integer loops; and the import
// errors for malformed zero points, scales and dtypes, which name the input at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "common/test_util.h"
#include "ir/interpreter.h"
#include "onnx/onnx_pb.h"
#include "onnx_import/onnx_builders.h"

namespace kiln {
namespace {

using onnx_test::AddInit;
using onnx_test::AttrInt;
using onnx_test::AttrInts;
using onnx_test::Import;
using onnx_test::OnnxType;
using test::ErrorOf;
using test::RandomTensor;
using test::TensorsNear;
using ::testing::HasSubstr;
using Ints = std::vector<int64_t>;

constexpr DType kU8 = DType::kUInt8, kI8 = DType::kInt8, kI32 = DType::kInt32,
                kF32 = DType::kFloat32;

// --- Building and running one-node models ----------------------------------------------------

// One input of the node: a graph input, an initializer (constant), or omitted (t undefined).
struct Arg {
  std::string name;
  Tensor t;
  bool constant = false;
};

struct Node {
  std::string op;
  std::vector<Arg> args;
  DType out;
  std::function<void(onnx::NodeProto*)> attrs = {};
  int64_t opset = 10;
};

struct Built {
  onnx::ModelProto model;
  std::vector<Tensor> feeds;  // the graph inputs, in order
};

Built Build(const Node& n) {
  Built b;
  onnx::ModelProto& m = b.model;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  m.add_opset_import()->set_version(n.opset);
  m.mutable_graph()->set_name("quant");
  onnx::NodeProto* node = m.mutable_graph()->add_node();
  node->set_op_type(n.op);
  node->set_name("q");
  for (const Arg& a : n.args) {
    if (!a.t.defined()) {
      node->add_input("");
      continue;
    }
    node->add_input(a.name);
    if (a.constant) {
      AddInit(m, a.name, a.t);
      continue;
    }
    onnx::ValueInfoProto* v = m.mutable_graph()->add_input();
    v->set_name(a.name);
    onnx::TypeProto::Tensor* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(OnnxType(a.t.dtype()));
    tt->mutable_shape();  // a scalar has an empty shape, not none
    for (int64_t d : a.t.shape()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    b.feeds.push_back(a.t);
  }
  while (node->input_size() > 0 && node->input(node->input_size() - 1).empty())
    node->mutable_input()->RemoveLast();
  node->add_output("y");
  onnx::ValueInfoProto* y = m.mutable_graph()->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(OnnxType(n.out));
  y->mutable_type()->mutable_tensor_type()->mutable_shape();
  if (n.attrs) n.attrs(node);
  return b;
}

Tensor Run(const Node& n) {
  Built b = Build(n);
  std::vector<Tensor> out = Interpret(Import(b.model).graph, b.feeds);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Tensor() : out[0];
}

Error ImportErrorOf(const Node& n) {
  return ErrorOf([&] { Import(Build(n).model); });
}

Tensor Random8(DType t, const Ints& shape, uint64_t seed) {
  return t == kU8 ? RandomTensor(t, shape, seed, 0, 255) : RandomTensor(t, shape, seed, -128, 127);
}

Tensor RandomScale(const Ints& shape, uint64_t seed, double lo, double hi) {
  return RandomTensor(kF32, shape, seed, lo, hi);
}

// --- The references ------------------------------------------------------------------------

// saturate(round_half_even(acc * factor + zp)) as ONNX's reference computes it: factor in f32,
// the rest in double. nearbyint rounds half to even in the default rounding mode.
double Requantize(int64_t acc, float factor, double zp, DType out) {
  double v = std::nearbyint(static_cast<double>(acc) * static_cast<double>(factor) + zp);
  double lo = out == kU8 ? 0 : -128, hi = out == kU8 ? 255 : 127;
  return std::clamp(v, lo, hi);
}

// A matmul operand's parameter (zero point or scale) for batch bi and row (of a) or column (of
// b) i: one value (per tensor), [I] (per row or column), or the N-D form [B or 1, M, 1] /
// [B or 1, 1, N] (and its 2-D [M, 1] / [1, N]), whose non-1 dims follow the operand's.
double MatmulParamAt(const Tensor& p, int64_t bi, int64_t i) {
  if (!p.defined()) return 0;
  if (p.numel() == 1) return p.GetAsDouble(0);
  if (p.ndim() == 1) return p.GetAsDouble(i);
  const int64_t per_batch = p.numel() / p.shape()[0];
  return p.GetAsDouble((p.ndim() == 3 && p.shape()[0] != 1 ? bi : 0) * per_batch + i);
}

// (a - a_zp) @ (b - b_zp) with NumPy's matmul shapes for a and b of rank 1 to 3, in int64.
struct MatmulResult {
  Ints shape;
  std::vector<int64_t> acc;
  int64_t rows = 0, cols = 0;  // M and N of each product, 1 for a 1-D operand
};

MatmulResult RefMatmul(const Tensor& a, const Tensor& b, const Tensor& a_zp, const Tensor& b_zp) {
  const int ra = a.ndim(), rb = b.ndim();
  const int64_t M = ra >= 2 ? a.shape()[ra - 2] : 1, K = a.shape()[ra - 1];
  const int64_t N = rb >= 2 ? b.shape()[rb - 1] : 1;
  const int64_t Ba = ra == 3 ? a.shape()[0] : 1, Bb = rb == 3 ? b.shape()[0] : 1;
  const int64_t B = std::max(Ba, Bb);
  MatmulResult r{{}, {}, M, N};
  if (ra == 3 || rb == 3) r.shape.push_back(B);
  if (ra >= 2) r.shape.push_back(M);
  if (rb >= 2) r.shape.push_back(N);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t av = static_cast<int64_t>(a.GetAsDouble(((Ba == 1 ? 0 : bi) * M + m) * K + k));
          int64_t bv = static_cast<int64_t>(b.GetAsDouble(((Bb == 1 ? 0 : bi) * K + k) * N + n));
          acc += (av - static_cast<int64_t>(MatmulParamAt(a_zp, bi, m))) *
                 (bv - static_cast<int64_t>(MatmulParamAt(b_zp, bi, n)));
        }
        r.acc.push_back(acc);
      }
  return r;
}

Tensor RefMatMulInteger(const Tensor& a, const Tensor& b, const Tensor& a_zp, const Tensor& b_zp) {
  MatmulResult r = RefMatmul(a, b, a_zp, b_zp);
  Tensor y = Tensor::Empty(kI32, r.shape);
  for (int64_t i = 0; i < y.numel(); ++i) y.SetFromDouble(i, static_cast<double>(r.acc[i]));
  return y;
}

struct QParams {
  Tensor scale, zp;
};

Tensor RefQLinearMatMul(const Tensor& a, const QParams& pa, const Tensor& b, const QParams& pb,
                        const QParams& py) {
  MatmulResult r = RefMatmul(a, b, pa.zp, pb.zp);
  Tensor y = Tensor::Empty(py.zp.dtype(), r.shape);
  const float ys = static_cast<float>(py.scale.GetAsDouble(0));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t n = i % r.cols, m = i / r.cols % r.rows, bi = i / (r.cols * r.rows);
    const float ab = static_cast<float>(MatmulParamAt(pa.scale, bi, m)) *
                     static_cast<float>(MatmulParamAt(pb.scale, bi, n));
    y.SetFromDouble(i, Requantize(r.acc[i], ab / ys, py.zp.GetAsDouble(0), py.zp.dtype()));
  }
  return y;
}

// A 1-D or 2-D conv's geometry; a 1-D conv is the 2-D one with H = KH = 1.
struct ConvGeom {
  int64_t n = 1, c = 1, h = 1, w = 1;  // x
  int64_t m = 1, kh = 1, kw = 1;       // w: [m, c / group, kh, kw]
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0, group = 1;
  bool one_d = false;

  int64_t oh() const { return (h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1; }
  Ints x_shape() const { return one_d ? Ints{n, c, w} : Ints{n, c, h, w}; }
  Ints w_shape() const { return one_d ? Ints{m, c / group, kw} : Ints{m, c / group, kh, kw}; }
  Ints y_shape() const { return one_d ? Ints{n, m, ow()} : Ints{n, m, oh(), ow()}; }
  void SetAttrs(onnx::NodeProto* node) const {
    AttrInts(node, "strides", one_d ? Ints{sw} : Ints{sh, sw});
    AttrInts(node, "dilations", one_d ? Ints{dw} : Ints{dh, dw});
    AttrInts(node, "pads", one_d ? Ints{pl, pr} : Ints{pt, pl, pb, pr});
    if (group != 1) AttrInt(node, "group", group);
  }
};

// The conv of (x - x_zp) and (w - w_zp) (per output channel when w_zp has M values), plus the
// bias, with padded positions skipped: they hold x_zp, which contributes 0.
std::vector<int64_t> RefConv(const ConvGeom& g, const Tensor& x, const Tensor& w,
                             const Tensor& x_zp, const Tensor& w_zp, const Tensor& bias) {
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t xz = x_zp.defined() ? static_cast<int64_t>(x_zp.GetAsDouble(0)) : 0;
  std::vector<int64_t> out;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t m = 0; m < g.m; ++m) {
      const int64_t wz = !w_zp.defined()     ? 0
                         : w_zp.numel() == 1 ? static_cast<int64_t>(w_zp.GetAsDouble(0))
                                             : static_cast<int64_t>(w_zp.GetAsDouble(m));
      for (int64_t oh = 0; oh < g.oh(); ++oh)
        for (int64_t ow = 0; ow < g.ow(); ++ow) {
          int64_t acc = bias.defined() ? static_cast<int64_t>(bias.GetAsDouble(m)) : 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t kh = 0; kh < g.kh; ++kh)
              for (int64_t kw = 0; kw < g.kw; ++kw) {
                const int64_t ih = oh * g.sh - g.pt + kh * g.dh, iw = ow * g.sw - g.pl + kw * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const int64_t c = m / mg * cg + ci;
                const int64_t xv =
                    static_cast<int64_t>(x.GetAsDouble(((n * g.c + c) * g.h + ih) * g.w + iw));
                const int64_t wv =
                    static_cast<int64_t>(w.GetAsDouble(((m * cg + ci) * g.kh + kh) * g.kw + kw));
                acc += (xv - xz) * (wv - wz);
              }
          out.push_back(acc);
        }
    }
  return out;
}

// --- MatMulInteger -------------------------------------------------------------------------

// MatMulInteger of a and b with the given zero points (undefined: omitted), as graph inputs
// or, with `constant_zp`, initializers; checked exactly against the reference.
void CheckMatMulInteger(const Tensor& a, const Tensor& b, const Tensor& a_zp, const Tensor& b_zp,
                        bool constant_zp = false, int64_t opset = 10) {
  Node n{"MatMulInteger",
         {{"A", a},
          {"B", b},
          {"a_zero_point", a_zp, constant_zp},
          {"b_zero_point", b_zp, constant_zp}},
         kI32};
  n.opset = opset;
  EXPECT_TRUE(TensorsNear(Run(n), RefMatMulInteger(a, b, a_zp, b_zp), 0, 0));
}

TEST(OnnxQuant, MatMulIntegerWithoutAndWithPerTensorZeroPoints) {
  Tensor a = Random8(kU8, {3, 5}, 1), b = Random8(kU8, {5, 4}, 2);
  CheckMatMulInteger(a, b, Tensor(), Tensor());
  CheckMatMulInteger(a, b, Tensor::Scalar<uint8_t>(129), test::MakeTensor<uint8_t>({1}, {7}));
  // i8 x u8, zero points as initializers, at opset 17.
  Tensor ai = Random8(kI8, {3, 5}, 3);
  CheckMatMulInteger(ai, b, test::MakeTensor<int8_t>({1}, {-5}), Tensor::Scalar<uint8_t>(200), true,
                     17);
  // Only b's zero point: a's is omitted ("").
  CheckMatMulInteger(ai, Random8(kI8, {5, 2}, 4), Tensor(), Tensor::Scalar<int8_t>(-128));
}

TEST(OnnxQuant, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  Tensor a = Random8(kI8, {3, 6}, 5), b = Random8(kU8, {6, 4}, 6);
  CheckMatMulInteger(a, b, Random8(kI8, {3}, 7), Random8(kU8, {4}, 8));
  // The N-D forms [M, 1] and [1, N]; M == N, so a per-row [M] read as per-column would differ.
  Tensor sq = Random8(kU8, {6, 3}, 9);
  CheckMatMulInteger(a, sq, Random8(kI8, {3, 1}, 10), Random8(kU8, {1, 3}, 11), true);
  CheckMatMulInteger(a, sq, Random8(kI8, {3}, 12), Tensor());
}

TEST(OnnxQuant, MatMulIntegerBatchedAndOneDimensional) {
  Tensor a = Random8(kU8, {2, 3, 4}, 13), b = Random8(kU8, {2, 4, 5}, 14);
  CheckMatMulInteger(a, b, Random8(kU8, {2, 3, 1}, 15), Random8(kU8, {2, 1, 5}, 16));
  CheckMatMulInteger(a, Random8(kU8, {4, 5}, 17), Random8(kU8, {1, 3, 1}, 18),
                     Random8(kU8, {5}, 19));
  CheckMatMulInteger(Random8(kI8, {4}, 20), Random8(kI8, {4, 3}, 21), Tensor::Scalar<int8_t>(3),
                     Random8(kI8, {3}, 22));
  CheckMatMulInteger(Random8(kI8, {4}, 23), Random8(kI8, {4}, 24), Tensor::Scalar<int8_t>(-3),
                     Tensor::Scalar<int8_t>(100));
}

TEST(OnnxQuant, MatMulIntegerLarger) {
  CheckMatMulInteger(Random8(kU8, {37, 64}, 25), Random8(kI8, {64, 29}, 26), Random8(kU8, {37}, 27),
                     Random8(kI8, {29}, 28));
}

// --- QLinearMatMul -------------------------------------------------------------------------

// Scales spread the products over the output range, saturating some: |acc| is about
// sqrt(K) * 74^2 for uniform 8-bit operands.
QParams OperandParams(DType t, const Ints& shape, uint64_t seed) {
  return {RandomScale(shape, seed, 0.01, 0.05), Random8(t, shape, seed + 1)};
}

QParams OutputParams(const QParams& pa, const QParams& pb, int64_t k, DType t, uint64_t seed,
                     const Ints& shape = {}) {
  const double typical = std::sqrt(static_cast<double>(k)) * 74 * 74;
  const double ab = pa.scale.GetAsDouble(0) * pb.scale.GetAsDouble(0);
  return {RandomScale(shape, seed, ab * typical / 200, ab * typical / 60),
          Random8(t, shape, seed + 1)};
}

void CheckQLinearMatMul(const Tensor& a, const QParams& pa, const Tensor& b, const QParams& pb,
                        const QParams& py, bool constant_params = false, int64_t opset = 10) {
  bool k = constant_params;
  Node n{"QLinearMatMul",
         {{"a", a},
          {"a_scale", pa.scale, k},
          {"a_zero_point", pa.zp, k},
          {"b", b},
          {"b_scale", pb.scale, k},
          {"b_zero_point", pb.zp, k},
          {"y_scale", py.scale, k},
          {"y_zero_point", py.zp, k}},
         py.zp.dtype()};
  n.opset = opset;
  Tensor want = RefQLinearMatMul(a, pa, b, pb, py);
  Tensor got = Run(n);
  EXPECT_TRUE(TensorsNear(got, want, 0, 0));
  // The scales must make a range of values, not only saturated ones, for the test to bite.
  double lo = want.GetAsDouble(0), hi = lo;
  for (int64_t i = 0; i < want.numel(); ++i) {
    lo = std::min(lo, want.GetAsDouble(i));
    hi = std::max(hi, want.GetAsDouble(i));
  }
  EXPECT_GT(hi - lo, 20) << "degenerate output range";
}

TEST(OnnxQuant, QLinearMatMulPerTensor) {
  Tensor a = Random8(kU8, {4, 6}, 30), b = Random8(kU8, {6, 5}, 31);
  QParams pa = OperandParams(kU8, {}, 32), pb = OperandParams(kU8, {1}, 34);
  CheckQLinearMatMul(a, pa, b, pb, OutputParams(pa, pb, 6, kU8, 36));
  CheckQLinearMatMul(a, pa, b, pb, OutputParams(pa, pb, 6, kU8, 38, {1}), true, 17);
  // Signed a and output, unsigned b.
  Tensor ai = Random8(kI8, {4, 6}, 40);
  QParams pai = OperandParams(kI8, {1}, 41);
  CheckQLinearMatMul(ai, pai, b, pb, OutputParams(pai, pb, 6, kI8, 43));
}

TEST(OnnxQuant, QLinearMatMulPerRowAndPerColumn) {
  Tensor a = Random8(kI8, {4, 8}, 50), b = Random8(kU8, {8, 4}, 51);
  QParams pa = OperandParams(kI8, {4}, 52), pb = OperandParams(kU8, {4}, 54);
  CheckQLinearMatMul(a, pa, b, pb, OutputParams(pa, pb, 8, kU8, 56));
  // Batched, with the N-D forms.
  Tensor a3 = Random8(kU8, {2, 3, 8}, 58), b3 = Random8(kI8, {2, 8, 5}, 59);
  QParams pa3 = OperandParams(kU8, {2, 3, 1}, 60), pb3 = OperandParams(kI8, {1, 1, 5}, 62);
  CheckQLinearMatMul(a3, pa3, b3, pb3, OutputParams(pa3, pb3, 8, kI8, 64), true);
}

TEST(OnnxQuant, QLinearMatMulOneDimensionalOperands) {
  // A 1-D b drops N from the product; a's per-row factor must still follow M.
  Tensor a = Random8(kU8, {5, 16}, 70), b = Random8(kU8, {16}, 71);
  QParams pa = OperandParams(kU8, {5}, 72), pb = OperandParams(kU8, {}, 74);
  CheckQLinearMatMul(a, pa, b, pb, OutputParams(pa, pb, 16, kU8, 76));
  // A 1-D a drops M; b's per-column factor follows N.
  Tensor a1 = Random8(kI8, {16}, 78), b2 = Random8(kI8, {16, 6}, 79);
  QParams pa1 = OperandParams(kI8, {1}, 80), pb2 = OperandParams(kI8, {6}, 82);
  CheckQLinearMatMul(a1, pa1, b2, pb2, OutputParams(pa1, pb2, 16, kI8, 84));
}

TEST(OnnxQuant, QLinearMatMulLarger) {
  Tensor a = Random8(kU8, {33, 48}, 90), b = Random8(kI8, {48, 61}, 91);
  QParams pa = OperandParams(kU8, {}, 92), pb = OperandParams(kI8, {61}, 94);
  CheckQLinearMatMul(a, pa, b, pb, OutputParams(pa, pb, 48, kU8, 96));
}

// --- ConvInteger ---------------------------------------------------------------------------

void CheckConvInteger(const ConvGeom& g, DType xt, DType wt, bool x_zp, int w_zp_values,
                      uint64_t seed, bool constant_zp = false) {
  SCOPED_TRACE(StrCat("seed ", seed));
  Tensor x = Random8(xt, g.x_shape(), seed), w = Random8(wt, g.w_shape(), seed + 1);
  Tensor xz = x_zp ? Random8(xt, {}, seed + 2) : Tensor();
  Tensor wz = w_zp_values == 0   ? Tensor()
              : w_zp_values == 1 ? Random8(wt, {1}, seed + 3)
                                 : Random8(wt, {g.m}, seed + 3);
  Node n{"ConvInteger",
         {{"x", x}, {"w", w}, {"x_zero_point", xz, constant_zp}, {"w_zero_point", wz, constant_zp}},
         kI32,
         [g](onnx::NodeProto* node) { g.SetAttrs(node); }};
  std::vector<int64_t> acc = RefConv(g, x, w, xz, wz, Tensor());
  Tensor want = Tensor::Empty(kI32, g.y_shape());
  for (int64_t i = 0; i < want.numel(); ++i) want.SetFromDouble(i, static_cast<double>(acc[i]));
  EXPECT_TRUE(TensorsNear(Run(n), want, 0, 0));
}

TEST(OnnxQuant, ConvIntegerPerTensorWithPadding) {
  ConvGeom g{
      .n = 2, .c = 3, .h = 5, .w = 6, .m = 4, .kh = 3, .kw = 2, .pt = 1, .pl = 1, .pb = 2, .pr = 0};
  CheckConvInteger(g, kU8, kU8, true, 1, 100);
  CheckConvInteger(g, kU8, kU8, false, 0, 104);
  CheckConvInteger(g, kI8, kU8, true, 0, 108, true);
}

TEST(OnnxQuant, ConvIntegerPerChannelStridesDilationsAndGroups) {
  ConvGeom g{.n = 1,
             .c = 4,
             .h = 7,
             .w = 8,
             .m = 6,
             .kh = 3,
             .kw = 3,
             .sh = 2,
             .sw = 1,
             .dh = 1,
             .dw = 2,
             .pt = 1,
             .pl = 2,
             .pb = 1,
             .pr = 1,
             .group = 2};
  CheckConvInteger(g, kI8, kI8, true, 6, 112);
  CheckConvInteger(g, kU8, kI8, false, 6, 116, true);
}

TEST(OnnxQuant, ConvIntegerOneDimensionalAndLarger) {
  ConvGeom g1{.n = 2, .c = 3, .w = 9, .m = 5, .kw = 3, .sw = 2, .pl = 1, .pr = 2, .one_d = true};
  CheckConvInteger(g1, kU8, kI8, true, 5, 120);
  ConvGeom big{.n = 2,
               .c = 8,
               .h = 12,
               .w = 11,
               .m = 8,
               .kh = 3,
               .kw = 3,
               .pt = 1,
               .pl = 1,
               .pb = 1,
               .pr = 1};
  CheckConvInteger(big, kU8, kU8, true, 8, 124);
}

// --- QLinearConv ---------------------------------------------------------------------------

// w_values: 1 for per-tensor w_scale and w_zero_point, M for per channel.
void CheckQLinearConv(const ConvGeom& g, DType xt, DType wt, DType yt, int64_t w_values, bool bias,
                      uint64_t seed, bool constant_params = false) {
  SCOPED_TRACE(StrCat("seed ", seed));
  const bool k = constant_params;
  Tensor x = Random8(xt, g.x_shape(), seed), w = Random8(wt, g.w_shape(), seed + 1);
  QParams px = OperandParams(xt, {}, seed + 2);
  QParams pw = OperandParams(wt, {w_values}, seed + 4);
  const int64_t taps = g.c / g.group * g.kh * g.kw;
  QParams py = OutputParams(px, pw, taps, yt, seed + 6);
  Tensor b = bias ? RandomTensor(kI32, {g.m}, seed + 8, -3000, 3000) : Tensor();
  Node n{"QLinearConv",
         {{"x", x},
          {"x_scale", px.scale, k},
          {"x_zero_point", px.zp, k},
          {"w", w},
          {"w_scale", pw.scale, k},
          {"w_zero_point", pw.zp, k},
          {"y_scale", py.scale, k},
          {"y_zero_point", py.zp, k},
          {"B", b, k}},
         yt,
         [g](onnx::NodeProto* node) { g.SetAttrs(node); }};
  std::vector<int64_t> acc = RefConv(g, x, w, px.zp, pw.zp, b);
  Tensor want = Tensor::Empty(yt, g.y_shape());
  const int64_t plane = want.numel() / (g.n * g.m);
  const float xs = static_cast<float>(px.scale.GetAsDouble(0)),
              ys = static_cast<float>(py.scale.GetAsDouble(0));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const int64_t m = i / plane % g.m;
    const float ws = static_cast<float>(pw.scale.GetAsDouble(w_values == 1 ? 0 : m));
    const float xw = xs * ws;
    want.SetFromDouble(i, Requantize(acc[i], xw / ys, py.zp.GetAsDouble(0), yt));
  }
  EXPECT_TRUE(TensorsNear(Run(n), want, 0, 0));
}

TEST(OnnxQuant, QLinearConvPerTensorWithBias) {
  ConvGeom g{
      .n = 2, .c = 3, .h = 6, .w = 5, .m = 4, .kh = 3, .kw = 3, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
  CheckQLinearConv(g, kU8, kU8, kU8, 1, true, 200);
  CheckQLinearConv(g, kI8, kU8, kI8, 1, false, 210, true);
}

TEST(OnnxQuant, QLinearConvPerChannelGroupsAndOneDimensional) {
  ConvGeom g{.n = 1,
             .c = 6,
             .h = 7,
             .w = 7,
             .m = 9,
             .kh = 2,
             .kw = 3,
             .sh = 2,
             .sw = 2,
             .dh = 2,
             .dw = 1,
             .pt = 0,
             .pl = 1,
             .pb = 1,
             .pr = 0,
             .group = 3};
  CheckQLinearConv(g, kU8, kI8, kU8, 9, true, 220);
  ConvGeom g1{.n = 3, .c = 2, .w = 10, .m = 4, .kw = 4, .pl = 2, .pr = 1, .one_d = true};
  CheckQLinearConv(g1, kI8, kI8, kI8, 4, true, 230, true);
}

// --- Errors --------------------------------------------------------------------------------

void ExpectInvalid(const Node& n, const std::string& message) {
  Error e = ImportErrorOf(n);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  EXPECT_THAT(e.what(), HasSubstr(message));
  EXPECT_THAT(e.what(), HasSubstr("'q' ("));
}

TEST(OnnxQuantErrors, MatmulZeroPointShapesAndDtypes) {
  Tensor a = Random8(kU8, {2, 4}, 1), b = Random8(kU8, {4, 3}, 2);
  auto mm = [&](const Tensor& az, const Tensor& bz) {
    return Node{
        "MatMulInteger", {{"A", a}, {"B", b}, {"a_zero_point", az}, {"b_zero_point", bz}}, kI32};
  };
  ExpectInvalid(mm(Random8(kU8, {4}, 3), Tensor()),
                "a_zero_point [4] must be a scalar (per tensor) or per row of A [2, 4]: [M] or "
                "[..., M, 1]");
  ExpectInvalid(mm(Random8(kU8, {1, 4}, 3), Tensor()), "a_zero_point [1, 4] must be");
  ExpectInvalid(mm(Tensor(), Random8(kU8, {4}, 3)),
                "b_zero_point [4] must be a scalar (per tensor) or per column of B [4, 3]: [N] or "
                "[..., 1, N]");
  ExpectInvalid(mm(Tensor(), Random8(kU8, {3, 1}, 3)), "b_zero_point [3, 1] must be");
  ExpectInvalid(mm(Tensor::Scalar<int8_t>(1), Tensor()),
                "a_zero_point (input 2) must have the dtype of A (u8), not i8");
  ExpectInvalid(Node{"MatMulInteger", {{"A", Random8(kI32, {2, 4}, 4)}, {"B", b}}, kI32},
                "A (input 0) must be u8 or i8, not i32");
}

TEST(OnnxQuantErrors, QLinearMatMulScalesAndOutputParameters) {
  Tensor a = Random8(kU8, {2, 4}, 1), b = Random8(kU8, {4, 3}, 2);
  QParams pa = OperandParams(kU8, {}, 3), pb = OperandParams(kU8, {}, 5),
          py = OperandParams(kU8, {}, 7);
  auto qmm = [&](const QParams& qa, const QParams& qy) {
    return Node{"QLinearMatMul",
                {{"a", a},
                 {"a_scale", qa.scale},
                 {"a_zero_point", qa.zp},
                 {"b", b},
                 {"b_scale", pb.scale},
                 {"b_zero_point", pb.zp},
                 {"y_scale", qy.scale},
                 {"y_zero_point", qy.zp}},
                qy.zp.dtype()};
  };
  ExpectInvalid(qmm({RandomScale({2}, 9, 0.1, 1), pa.zp}, py),
                "a_zero_point [] must have the shape of a_scale [2]");
  ExpectInvalid(qmm({RandomScale({3}, 9, 0.1, 1), Random8(kU8, {3}, 10)}, py),
                "a_zero_point [3] must be a scalar (per tensor) or per row of a [2, 4]");
  ExpectInvalid(qmm(pa, {RandomScale({3}, 9, 0.1, 1), py.zp}), "y_scale [3] must be a scalar");
  ExpectInvalid(qmm(pa, {py.scale, Random8(kU8, {3}, 11)}), "y_zero_point [3] must be a scalar");
  ExpectInvalid(qmm(pa, {py.scale, Tensor::Scalar<int32_t>(0)}),
                "y_zero_point (input 7) must be u8 or i8, not i32");
  ExpectInvalid(qmm({test::MakeTensor<int32_t>({}, {1}), pa.zp}, py),
                "a_scale (input 1) must be f32, not i32");
}

TEST(OnnxQuantErrors, ConvZeroPointsScalesAndBias) {
  ConvGeom g{.c = 2, .h = 4, .w = 4, .m = 3, .kh = 2, .kw = 2};
  Tensor x = Random8(kU8, g.x_shape(), 1), w = Random8(kI8, g.w_shape(), 2);
  auto ci = [&](const Tensor& xz, const Tensor& wz) {
    return Node{
        "ConvInteger", {{"x", x}, {"w", w}, {"x_zero_point", xz}, {"w_zero_point", wz}}, kI32};
  };
  ExpectInvalid(ci(Random8(kU8, {2}, 3), Tensor()), "x_zero_point [2] must be a scalar");
  ExpectInvalid(ci(Tensor(), Random8(kI8, {2}, 3)),
                "w_zero_point [2] must be a scalar (per tensor) or [M], M the output channels of "
                "w [3, 2, 2, 2]");
  ExpectInvalid(ci(Tensor(), Random8(kI8, {3, 1}, 3)), "w_zero_point [3, 1] must be");
  ExpectInvalid(ci(Tensor(), Random8(kU8, {3}, 3)),
                "w_zero_point (input 3) must have the dtype of w (i8), not u8");

  QParams px = OperandParams(kU8, {}, 4), pw = OperandParams(kI8, {3}, 6),
          py = OperandParams(kU8, {}, 8);
  auto qc = [&](const QParams& qw, const Tensor& bias) {
    return Node{"QLinearConv",
                {{"x", x},
                 {"x_scale", px.scale},
                 {"x_zero_point", px.zp},
                 {"w", w},
                 {"w_scale", qw.scale},
                 {"w_zero_point", qw.zp},
                 {"y_scale", py.scale},
                 {"y_zero_point", py.zp},
                 {"B", bias}},
                kU8};
  };
  ExpectInvalid(qc({pw.scale, Random8(kI8, {}, 10)}, Tensor()),
                "w_zero_point [] must have the shape of w_scale [3]");
  ExpectInvalid(qc({RandomScale({4}, 10, 0.1, 1), Random8(kI8, {4}, 11)}, Tensor()),
                "w_scale [4] must be a scalar (per tensor) or [M]");
  ExpectInvalid(qc(pw, RandomScale({3}, 12, 0, 1)), "B (input 8) must be i32, not f32");
}

}  // namespace
}  // namespace kiln
