// SimplifyInference: rewrites inference-time normalizations into plain arithmetic, folding it
// into the weights of the op before it where those are constants.
//
//   before:  def @main(%x: f32[batch, 2]) {
//              %mm = matmul(%x, const(f32[2, 2], [1.0, 2.0, 3.0, 4.0]))
//              batch_norm(%mm, %scale, %bias, %mean, %var)      // all four constants
//            }
//   after:   def @main(%x: f32[batch, 2]) {
//              %mm = matmul(%x, const(f32[2, 2], [s0, 2 * s1, 3 * s0, 4 * s1]))
//              add(%mm, const(f32[2], [t0, t1]))
//            }
//   with s = scale / sqrt(var + epsilon) and t = bias - mean * s, per channel.
//
// Rules for batch_norm(x, scale, bias, mean, var), whose channel is dim 1 of x:
// - x = matmul(a, W) with a 2-D `a` and a constant 2-D W [K, C], or gemm(A, B, C?) with a
//   constant B and no C or a constant one, and that product used by nothing else, and all four
//   statistics constant: s goes into the weights (W[k, c] * s[c]; B's rows instead of its
//   columns when transB) and t into a bias: an add after the matmul, or the gemm's C
//   (beta * C * s + t, with beta then 1; alpha stays). A constant per-column bias added
//   between the matmul and the batch_norm (a dense layer) joins t (b * s + t);
// - otherwise, with constant statistics: x * s + t, s and t computed here as constants of
//   shape [C, 1, ...] so that they broadcast over dim 1 of x ([C] when x is 2-D);
// - otherwise: the same x * s + t spelled out in ops (add, rsqrt, mul, sub, and unsqueeze to
//   [C, 1, ...]), for FoldConstant or the fused kernel to deal with.
// s, t and folded weights are computed in double and rounded once to x's dtype. The rewritten
// graph then multiplies and adds in x's dtype where the batch_norm reference kernel works in
// double, so the two agree to within a few units in the last place, not bit for bit.
//
// Convolutions get the same folding into their weights when the conv op exists (issue 7).
// There is no dropout-like op to drop yet.
#include <cmath>
#include <unordered_map>

#include "ir/visitor.h"
#include "passes/graph/use_count.h"
#include "passes/pass.h"

namespace kiln {
namespace {

// The per-channel affine map that a batch_norm with constant statistics computes.
struct ScaleShift {
  std::vector<double> scale, shift;  // s and t, one per channel
};

ScaleShift ComputeScaleShift(const CallNode* bn) {
  const Tensor& scale = *ConstantValue(bn->args[1]);
  const Tensor& bias = *ConstantValue(bn->args[2]);
  const Tensor& mean = *ConstantValue(bn->args[3]);
  const Tensor& var = *ConstantValue(bn->args[4]);
  double eps = bn->attrs.GetFloat("epsilon");
  ScaleShift ss;
  for (int64_t c = 0; c < scale.numel(); ++c) {
    double s = scale.GetAsDouble(c) / std::sqrt(var.GetAsDouble(c) + eps);
    ss.scale.push_back(s);
    ss.shift.push_back(bias.GetAsDouble(c) - mean.GetAsDouble(c) * s);
  }
  return ss;
}

Tensor TensorOf(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  Tensor t = Tensor::Empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.SetFromDouble(i, v[i]);
  return t;
}

// [C] followed by rank - 2 ones: broadcasts against [N, C, ...] on dim 1.
std::vector<int64_t> ChannelShape(int64_t channels, int rank) {
  std::vector<int64_t> shape(rank - 1, 1);
  shape[0] = channels;
  return shape;
}

// `w` with column j (row j when `rows`) multiplied by s[j].
Tensor ScaleWeights(const Tensor& w, const std::vector<double>& s, bool rows) {
  Tensor out = Tensor::Empty(w.dtype(), w.shape());
  int64_t cols = w.shape()[1];
  for (int64_t i = 0; i < w.numel(); ++i) {
    out.SetFromDouble(i, w.GetAsDouble(i) * s[rows ? i / cols : i % cols]);
  }
  return out;
}

// The constant [channels] values that a bias `b` adds to every row of an [N, C] product, or
// false when `b` is not a constant or varies along N.
bool PerColumnValues(const Expr& b, int64_t channels, std::vector<double>& out) {
  const Tensor* t = ConstantValue(b);
  if (!t || t->ndim() > 2 || (t->ndim() == 2 && t->shape()[0] != 1)) return false;
  int64_t n = t->numel();
  if (n != 1 && n != channels) return false;
  out.resize(channels);
  for (int64_t c = 0; c < channels; ++c) out[c] = t->GetAsDouble(n == 1 ? 0 : c);
  return true;
}

class BatchNormRewriter : public ExprMutator {
 public:
  explicit BatchNormRewriter(const Function& fn) { counter_.Visit(fn); }

 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    if (!n->op || n->op->name != "batch_norm") return ExprMutator::MutateCall(n, self);
    const TensorTypeNode* x = AsTensor(self->type);
    if (!x) return ExprMutator::MutateCall(n, self);
    bool constant_stats = true;
    for (int i = 1; i < 5; ++i) constant_stats &= ConstantValue(n->args[i]) != nullptr;
    if (!constant_stats) return Spelled(n, self);
    ScaleShift ss = ComputeScaleShift(n);
    if (Expr folded = FoldIntoProduct(n->args[0], ss, x->dtype, self->name)) return folded;
    int64_t channels = static_cast<int64_t>(ss.scale.size());
    std::vector<int64_t> shape = ChannelShape(channels, x->ndim());
    Expr scaled =
        MakeCall("mul", {Mutate(n->args[0]), MakeConstant(TensorOf(x->dtype, shape, ss.scale))});
    return MakeCall("add", {scaled, MakeConstant(TensorOf(x->dtype, shape, ss.shift))}, {},
                    self->name);
  }

 private:
  bool UsedOnce(const Expr& e) const { return counter_.UsedOnce(e); }

  // matmul(a, W) * s + t, or (matmul(a, W) + b) * s + t, with W' = W * s as the new weights;
  // or the gemm form. nullptr when `x` is none of these.
  Expr FoldIntoProduct(const Expr& x, const ScaleShift& ss, DType dtype, const std::string& name) {
    if (!UsedOnce(x)) return nullptr;
    const int64_t channels = static_cast<int64_t>(ss.scale.size());
    std::vector<double> shift = ss.shift;
    Expr product = x;
    const CallNode* add = AsOpCall(x, "add");
    if (add) {
      // The bias b joins t: (p + b) * s + t = p * s + (b * s + t).
      int bias_at = ConstantValue(add->args[1]) ? 1 : 0;
      product = add->args[1 - bias_at];
      std::vector<double> b;
      if (!PerColumnValues(add->args[bias_at], channels, b) || !UsedOnce(product) ||
          !TypeEqual(product->type, x->type))
        return nullptr;
      for (int64_t c = 0; c < channels; ++c) shift[c] += b[c] * ss.scale[c];
    }
    std::vector<int64_t> column = {channels};
    if (const CallNode* mm = AsOpCall(product, "matmul")) {
      const Tensor* w = ConstantValue(mm->args[1]);
      const TensorTypeNode* a = AsTensor(mm->args[0]->type);
      if (!w || w->ndim() != 2 || !a || a->ndim() != 2) return nullptr;
      Expr scaled =
          MakeCall("matmul", {Mutate(mm->args[0]), MakeConstant(ScaleWeights(*w, ss.scale, false))},
                   {}, product->name);
      return MakeCall("add", {scaled, MakeConstant(TensorOf(dtype, column, shift))}, {}, name);
    }
    const CallNode* gemm = AsOpCall(product, "gemm");
    if (!gemm || add) return nullptr;
    const Tensor* b = ConstantValue(gemm->args[1]);
    const Tensor* c = gemm->args.size() == 3 ? ConstantValue(gemm->args[2]) : nullptr;
    if (!b || (gemm->args.size() == 3 && !c)) return nullptr;
    bool trans_b = gemm->attrs.GetBool("transB");
    double beta = gemm->attrs.GetFloat("beta");
    // C' = beta * C * s + t, broadcast to [rows of C or 1, channels]; the gemm kernel skips C
    // when beta is 0, so such a C is dropped rather than multiplied.
    Tensor new_c;
    if (c && beta != 0.0) {
      std::vector<int64_t> cs = c->shape();
      int64_t rows = cs.size() == 2 ? cs[0] : 1;
      int64_t cols = cs.empty() ? 1 : cs.back();
      std::vector<double> v(rows * channels);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < channels; ++j) {
          double cv = c->GetAsDouble(i * cols + (cols == 1 ? 0 : j));
          v[i * channels + j] = beta * cv * ss.scale[j] + shift[j];
        }
      }
      new_c = rows == 1 ? TensorOf(dtype, column, v) : TensorOf(dtype, {rows, channels}, v);
    } else {
      new_c = TensorOf(dtype, column, shift);
    }
    Attrs attrs = gemm->attrs;
    attrs.Set("beta", 1.0);
    return MakeCall("gemm",
                    {Mutate(gemm->args[0]), MakeConstant(ScaleWeights(*b, ss.scale, trans_b)),
                     MakeConstant(new_c)},
                    attrs, name);
  }

  // x * s + t in ops, for statistics that are not all constants.
  Expr Spelled(const CallNode* n, const Expr& self) {
    const TensorTypeNode* x = AsTensor(self->type);
    Expr scale = Mutate(n->args[1]), bias = Mutate(n->args[2]);
    Expr mean = Mutate(n->args[3]), var = Mutate(n->args[4]);
    Tensor eps = Tensor::Empty(x->dtype, {});
    eps.SetFromDouble(0, n->attrs.GetFloat("epsilon"));
    Expr s =
        MakeCall("mul", {scale, MakeCall("rsqrt", {MakeCall("add", {var, MakeConstant(eps)})})});
    Expr t = MakeCall("sub", {bias, MakeCall("mul", {mean, s})});
    if (x->ndim() > 2) {
      std::vector<int64_t> axes;
      for (int i = 1; i < x->ndim() - 1; ++i) axes.push_back(i);
      s = MakeCall("unsqueeze", {s}, {{"axes", axes}});
      t = MakeCall("unsqueeze", {t}, {{"axes", axes}});
    }
    return MakeCall("add", {MakeCall("mul", {Mutate(n->args[0]), s}), t}, {}, self->name);
  }

  UseCounter counter_;
};

}  // namespace

void RegisterSimplifyInferencePass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "SimplifyInference",
      .opt_level = 0,
      .required = {"InferType"},
      .options = {},
      .doc = "batch_norm to a per-channel scale and shift, folded into the constant weights of "
             "a preceding matmul or gemm",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"SimplifyInference", 0, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  BatchNormRewriter rewriter(f);
                  return std::static_pointer_cast<const FunctionNode>(rewriter.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
