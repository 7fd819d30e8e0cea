// Small model graphs shared by pass, lowering and engine tests. Weights are random but fixed by
// the seed; inputs have a symbolic batch (and seq) dimension.
#pragma once

#include <cmath>

#include "common/test_util.h"
#include "ir/expr.h"

namespace kiln::test {

inline Expr Weight(const std::vector<int64_t>& shape, uint64_t seed, const std::string& name,
                   double scale = 0.5) {
  return MakeConstant(RandomTensor(DType::kFloat32, shape, seed, -scale, scale), name);
}

inline Expr Dense(const Expr& x, int64_t in, int64_t out, uint64_t seed, const std::string& name) {
  Expr mm = MakeCall("matmul", {x, Weight({in, out}, seed, name + ".w")}, {}, name);
  return MakeCall("add", {mm, Weight({out}, seed + 1, name + ".b")}, {}, name + ".bias");
}

// x[batch, 8] -> dense(16) -> relu -> dense(10) -> softmax
inline Function MlpModel(uint64_t seed = 100) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 8}, DType::kFloat32));
  Expr h = MakeCall("relu", {Dense(x, 8, 16, seed, "fc1")}, {}, "act1");
  Expr o = Dense(h, 16, 10, seed + 2, "fc2");
  return MakeFunction({x}, MakeCall("softmax", {o}, {{"axis", int64_t{-1}}}, "probs"));
}

// One transformer encoder layer: 2-head self-attention and a GELU feed-forward block, each
// with a residual connection and layer norm. x[batch, seq, 16].
inline Function EncoderLayerModel(uint64_t seed = 200) {
  const int64_t d = 16, heads = 2, dh = 8, ff = 32;
  Dim batch = Dim::Symbol("batch"), seq = Dim::Symbol("seq");
  Var x = MakeVar("x", TensorType({batch, seq, d}, DType::kFloat32));
  auto heads_of = [&](const Expr& t, std::vector<int64_t> perm, const std::string& name) {
    Expr r = MakeCall("reshape", {t}, {{"shape", std::vector<int64_t>{0, 0, heads, dh}}},
                      name + ".split");
    return MakeCall("transpose", {r}, {{"perm", std::move(perm)}}, name + ".heads");
  };
  Expr q = heads_of(Dense(x, d, d, seed, "q"), {0, 2, 1, 3}, "q");      // [b, h, s, dh]
  Expr k = heads_of(Dense(x, d, d, seed + 2, "k"), {0, 2, 3, 1}, "k");  // [b, h, dh, s]
  Expr v = heads_of(Dense(x, d, d, seed + 4, "v"), {0, 2, 1, 3}, "v");  // [b, h, s, dh]
  Expr scores = MakeCall("matmul", {q, k}, {}, "scores");
  Expr scale = MakeConstant(Tensor::Scalar<float>(1.0f / std::sqrt(float(dh))), "scale");
  Expr probs = MakeCall("softmax", {MakeCall("mul", {scores, scale}, {}, "scaled")},
                        {{"axis", int64_t{-1}}}, "attn");
  Expr ctx = MakeCall("matmul", {probs, v}, {}, "context");
  ctx = MakeCall("transpose", {ctx}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "context.t");
  ctx = MakeCall("reshape", {ctx}, {{"shape", std::vector<int64_t>{0, 0, d}}}, "context.merge");
  Expr attn_out = Dense(ctx, d, d, seed + 6, "out");
  Expr res1 = MakeCall("add", {x, attn_out}, {}, "res1");
  Expr ln1 = MakeCall("layer_norm",
                      {res1, Weight({d}, seed + 8, "ln1.g", 1.0), Weight({d}, seed + 9, "ln1.b")},
                      {}, "ln1");
  Expr h = MakeCall("gelu", {Dense(ln1, d, ff, seed + 10, "ff1")}, {}, "ff.act");
  Expr res2 = MakeCall("add", {ln1, Dense(h, ff, d, seed + 12, "ff2")}, {}, "res2");
  Expr ln2 = MakeCall("layer_norm",
                      {res2, Weight({d}, seed + 14, "ln2.g", 1.0), Weight({d}, seed + 15, "ln2.b")},
                      {}, "ln2");
  return MakeFunction({x}, ln2);
}

// relu(x - sum(exp(-x) * 2 + 1, axis 1)) : an elementwise chain feeding a reduction, whose
// result feeds more elementwise ops. x[batch, 32].
inline Function ElementwiseReductionModel() {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 32}, DType::kFloat32));
  Expr two = MakeConstant(Tensor::Scalar<float>(2.0f), "two");
  Expr one = MakeConstant(Tensor::Scalar<float>(1.0f), "one");
  Expr e = MakeCall("add", {MakeCall("mul", {MakeCall("exp", {MakeCall("neg", {x})}), two}), one});
  Expr s = MakeCall("sum", {e}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", true}}, "rowsum");
  return MakeFunction({x}, MakeCall("relu", {MakeCall("sub", {x, s})}, {}, "out"));
}

// Shared subexpressions (exp(x) built twice, the same weights multiplied twice) and dead
// branches (a tuple field never read, a whole computation dropped by it), plus constant
// subgraphs that fold.
inline Function SharedAndDeadModel(uint64_t seed = 300) {
  Var x = MakeVar("x", TensorType({Dim::Symbol("batch"), 6}, DType::kFloat32));
  Expr w = Weight({6, 6}, seed, "w");
  Expr a = MakeCall("exp", {x});
  Expr b = MakeCall("exp", {x});
  Expr m1 = MakeCall("matmul", {MakeCall("add", {a, b}), w});
  Expr m2 = MakeCall("matmul", {MakeCall("add", {a, b}), w});
  Expr dead = MakeCall("tanh", {MakeCall("matmul", {x, Weight({6, 6}, seed + 1, "unused")})});
  Expr pick = MakeTupleGetItem(MakeTuple({MakeCall("add", {m1, m2}), dead}), 0);
  // A constant subgraph: (c * 2 + 1) folds to one constant.
  Expr c = MakeCall(
      "add",
      {MakeCall("mul", {Weight({6}, seed + 2, "c"), MakeConstant(Tensor::Scalar<float>(2.0f))}),
       MakeConstant(Tensor::Scalar<float>(1.0f))});
  return MakeFunction({x}, MakeCall("add", {pick, c}, {}, "out"));
}

// A conv net with a symbolic image size, x[batch, 3, height, width]: windowed convs in a
// chain (ChannelsLastConvs runs it channels-last), with strides 1 and 2, asymmetric pads, a
// dilation, a residual add of two chain values, and a 1x1 conv at the end.
inline Function ConvChainModel(uint64_t seed = 400) {
  using Ints = std::vector<int64_t>;
  Var x = MakeVar("x",
                  TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("height"), Dim::Symbol("width")},
                             DType::kFloat32));
  auto conv = [&](const Expr& in, int64_t c, int64_t m, int64_t k, Ints pads, int64_t stride,
                  int64_t dilation, const std::string& name) {
    // Scaled by the fan-in, so activations stay near 1 (rounding is compared in absolute terms).
    Expr w = Weight({m, c, k, k}, seed++, name + ".w", 1.5 / std::sqrt(double(c * k * k)));
    Expr b = Weight({m}, seed++, name + ".b");
    return MakeCall("conv", {in, w, b},
                    {{"pads", std::move(pads)},
                     {"strides", Ints{stride, stride}},
                     {"dilations", Ints{dilation, dilation}}},
                    name);
  };
  Expr h = MakeCall("relu", {conv(x, 3, 16, 3, {1, 1, 1, 1}, 2, 1, "c1")});
  Expr a = MakeCall("relu", {conv(h, 16, 16, 3, {1, 1, 1, 1}, 1, 1, "c2")});
  Expr r =
      MakeCall("add", {a, MakeCall("sigmoid", {conv(a, 16, 16, 3, {2, 0, 0, 2}, 1, 1, "c3")})});
  Expr d = MakeCall("relu", {conv(r, 16, 24, 3, {2, 2, 2, 2}, 1, 2, "c4")});
  Expr s = MakeCall("relu", {conv(d, 24, 32, 3, {1, 1, 1, 1}, 2, 1, "c5")});
  return MakeFunction({x}, conv(s, 32, 8, 1, {0, 0, 0, 0}, 1, 1, "c6"));
}

// A small CNN over images of any size with windowed pools between its convs: a 2x2 stride-2 max
// pool, a padded 3x3 stride-2 one in ceil mode, a padded 3x3 mean that counts only the image,
// then a global mean. x[batch, 3, height, width] -> [batch, 12, 1, 1].
inline Function PoolChainModel(uint64_t seed = 500) {
  using Ints = std::vector<int64_t>;
  Var x = MakeVar("x",
                  TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("height"), Dim::Symbol("width")},
                             DType::kFloat32));
  auto conv = [&](const Expr& in, int64_t c, int64_t m, const std::string& name) {
    Expr w = Weight({m, c, 3, 3}, seed++, name + ".w", 1.5 / std::sqrt(double(c * 9)));
    return MakeCall("relu", {MakeCall("conv", {in, w, Weight({m}, seed++, name + ".b")},
                                      {{"pads", Ints{1, 1, 1, 1}}}, name)});
  };
  Expr h = MakeCall("max_pool", {conv(x, 3, 8, "c1")},
                    {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, "p1");
  h = MakeCall("max_pool", {conv(h, 8, 12, "c2")},
               {{"kernel_shape", Ints{3, 3}},
                {"strides", Ints{2, 2}},
                {"pads", Ints{1, 1, 1, 1}},
                {"ceil_mode", true}},
               "p2");
  h = MakeCall("avg_pool", {conv(h, 12, 12, "c3")},
               {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, "p3");
  return MakeFunction({x}, MakeCall("global_avg_pool", {h}, {}, "gap"));
}

// A conv, then a max pool that also returns where each max was (ONNX MaxPool's Indices, as
// segmentation nets feed MaxUnpool), padded and in ceil mode, column-major indices, over images
// of any size. x[batch, 3, height, width] -> (values, i64 indices), both [batch, 6, ...].
inline Function MaxPoolIndicesModel(uint64_t seed = 550) {
  using Ints = std::vector<int64_t>;
  Var x = MakeVar("x",
                  TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("height"), Dim::Symbol("width")},
                             DType::kFloat32));
  Expr c = MakeCall("conv", {x, Weight({6, 3, 3, 3}, seed, "c.w", 0.5)},
                    {{"pads", Ints{1, 1, 1, 1}}}, "c");
  return MakeFunction({x}, MakeCall("max_pool_with_indices", {c},
                                    {{"kernel_shape", Ints{3, 2}},
                                     {"strides", Ints{2, 2}},
                                     {"pads", Ints{1, 0, 1, 1}},
                                     {"ceil_mode", true},
                                     {"storage_order", int64_t{1}}},
                                    "pool"));
}

// Convs and a pool padded SAME (as models exported from TensorFlow are), over images of any
// size: the pads are what makes ceil(size / stride) windows fit, so they depend on the size.
// Then a 2x2 stride-2 transposed conv back up (a segmentation head's upsampling).
// x[batch, 3, height, width] -> [batch, 4, 2 * ceil(height / 2), 2 * ceil(width / 2)].
inline Function SamePaddedModel(uint64_t seed = 600) {
  using Ints = std::vector<int64_t>;
  const std::string upper = "SAME_UPPER", lower = "SAME_LOWER";
  Var x = MakeVar("x",
                  TensorType({Dim::Symbol("batch"), 3, Dim::Symbol("height"), Dim::Symbol("width")},
                             DType::kFloat32));
  auto conv = [&](const Expr& in, int64_t c, Attrs attrs, const std::string& name) {
    Expr w = Weight({8, c, 3, 3}, seed++, name + ".w", 1.5 / std::sqrt(double(c * 9)));
    attrs.Set("auto_pad", upper);
    return MakeCall("relu", {MakeCall("conv", {in, w, Weight({8}, seed++, name + ".b")},
                                      std::move(attrs), name)});
  };
  Expr h = conv(x, 3, {{"strides", Ints{2, 2}}}, "c1");
  h = MakeCall("max_pool", {h}, {{"kernel_shape", Ints{2, 2}}, {"auto_pad", lower}}, "p1");
  h = conv(h, 8, {{"dilations", Ints{2, 2}}}, "c2");
  Expr up = Weight({8, 4, 2, 2}, seed++, "up.w", 0.5);
  return MakeFunction({x}, MakeCall("conv_transpose", {h, up, Weight({4}, seed++, "up.b")},
                                    {{"strides", Ints{2, 2}}}, "up"));
}

}  // namespace kiln::test
