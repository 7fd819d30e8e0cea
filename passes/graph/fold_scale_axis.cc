// FoldScaleAxis: a multiply by a constant per-channel scale next to a conv or a matmul with
// constant weights is folded into those weights, and a constant per-channel shift after a conv
// into its bias.
//
//   before:  def @main(%x: f32[1, 3, 8, 8]) {
//              %c = conv(%x, const(w: f32[2, 3, 3, 3]), const(b: f32[2]), kernel_shape=[3, 3])
//              add(mul(%c, const(f32[2, 1, 1], [s0, s1])), const(f32[2, 1, 1], [t0, t1]))
//            }
//   after:   def @main(%x: f32[1, 3, 8, 8]) {
//              conv(%x, const(w * s per output channel), const(b * s + t), kernel_shape=[3, 3])
//            }
//
// That is what a batch_norm after a conv becomes once SimplifyInference (before this pass) has
// turned it into a scale and a shift: nothing is left of it. Rules, with s a constant of the
// product's dtype whose shape broadcasts along one channel axis only (its other dims 1, its rank
// at most the product's; a scalar scales every channel alike):
// - backward, the scale after the product: mul(conv(x, W[, b]), s) over dim 1 of the conv's
//   output -> conv(x, W', b * s) with W'[m, ...] = W[m, ...] * s[m]; mul(matmul(a, W[K, N]), s)
//   over the last dim -> matmul(a, W') with W'[k, n] = W[k, n] * s[n];
// - a shift after a conv: add(conv(x, W[, b]), t) over dim 1 -> conv(x, W, b + t);
// - forward, the scale before the product: conv(mul(x, s), W) over dim 1 of x -> conv(x, W')
//   with W'[m, c, ...] = W[m, c, ...] * s[input channel of (m, c)] (any group; the conv's zero
//   padding is still zero once scaled); matmul(mul(a, s), W[K, N]) over a's last dim ->
//   matmul(a, W') with W'[k, n] = W[k, n] * s[k].
// Each applies only where the product (or the scaled operand) is used by nothing else, the
// constant does not broadcast the result to a larger shape, the dtype is a float one, and the
// conv's weights (and bias, if any) are constants. Chains fold from the inside out: the shift
// first joins the bias, then the scale scales weights and bias. Folded values are computed in
// double and rounded once, so the result agrees with the unfolded graph to within rounding,
// not bit for bit: hence opt level 3, as TVM places it, and not in the engine's default level.
#include <functional>
#include <vector>

#include "ir/visitor.h"
#include "passes/graph/use_count.h"
#include "passes/pass.h"

namespace kiln {
namespace {

// The per-channel values of the constant `e` broadcast against a value of rank `rank` along
// `axis` with `channels` channels; false where `e` is not such a constant of `dtype`.
bool PerChannel(const Expr& e, DType dtype, int rank, int axis, int64_t channels,
                std::vector<double>* out) {
  const Tensor* t = ConstantValue(e);
  if (!t || t->dtype() != dtype || t->ndim() > rank) return false;
  const int lead = rank - t->ndim();
  bool along = false;
  for (int j = 0; j < t->ndim(); ++j) {
    const int64_t d = t->shape()[j];
    if (d == 1) continue;
    if (lead + j != axis || d != channels) return false;
    along = true;
  }
  out->resize(channels);
  for (int64_t c = 0; c < channels; ++c) (*out)[c] = t->GetAsDouble(along ? c : 0);
  return true;
}

// `w` with element i multiplied by factor(i), in double, rounded once.
Expr Scaled(const Tensor& w, const std::function<double(int64_t)>& factor) {
  Tensor out = Tensor::Empty(w.dtype(), w.shape());
  for (int64_t i = 0; i < w.numel(); ++i) out.SetFromDouble(i, w.GetAsDouble(i) * factor(i));
  return MakeConstant(std::move(out));
}

Expr Vector(DType dtype, const std::vector<double>& v) {
  Tensor t = Tensor::Empty(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetFromDouble(static_cast<int64_t>(i), v[i]);
  return MakeConstant(std::move(t));
}

// A conv whose weights (and bias, if it has one) are constants of `dtype`: its output channels
// and bias values (zeros where it has none); nullptr otherwise.
const Tensor* ConstantConv(const CallNode* conv, DType dtype, std::vector<double>* bias) {
  const Tensor* w = ConstantValue(conv->args[1]);
  if (!w || w->dtype() != dtype || w->ndim() < 3) return nullptr;
  const int64_t m = w->shape()[0];
  bias->assign(m, 0.0);
  if (conv->args.size() == 3) {
    const Tensor* b = ConstantValue(conv->args[2]);
    if (!b || b->dtype() != dtype || b->numel() != m) return nullptr;
    for (int64_t i = 0; i < m; ++i) (*bias)[i] = b->GetAsDouble(i);
  }
  return w;
}

class ScaleFolder : public ExprMutator {
 public:
  explicit ScaleFolder(const Function& fn) { uses_.Visit(fn); }

 protected:
  // Operands are rewritten first, so that a chain folds from the inside out. The original call
  // `n` has the types and is what the use counts count; `c` has the rewritten operands.
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    const TensorTypeNode* y = AsTensor(n->type);
    if (!c || !c->op || !y || !IsFloat(y->dtype)) return out;
    const std::string& op = c->op->name;
    if ((op == "mul" || op == "add") && c->args.size() == 2) {
      for (int i = 0; i < 2; ++i) {
        // The product at i, the constant at 1 - i; the constant must not broadcast it larger.
        if (!uses_.UsedOnce(n->args[i]) || !TypeEqual(n->args[i]->type, n->type)) continue;
        if (Expr f = Backward(op == "mul", c->args[i], c->args[1 - i], *y, self->name)) return f;
      }
    }
    if ((op == "conv" || op == "matmul") && c->args.size() >= 2)
      if (Expr f = Forward(n, c, self->name)) return f;
    return out;
  }

 private:
  // product * k (scale) or product + k (shift, convs only), or nullptr.
  static Expr Backward(bool scale, const Expr& product, const Expr& k, const TensorTypeNode& y,
                       const std::string& name) {
    const int rank = y.ndim();
    std::vector<double> s, bias;
    if (const CallNode* conv = AsOpCall(product, "conv")) {
      const Tensor* w = ConstantConv(conv, y.dtype, &bias);
      if (!w || rank < 3) return nullptr;
      const int64_t m = w->shape()[0], per_channel = w->numel() / m;
      if (!PerChannel(k, y.dtype, rank, 1, m, &s)) return nullptr;
      Expr weights = conv->args[1];
      for (int64_t i = 0; i < m; ++i) bias[i] = scale ? bias[i] * s[i] : bias[i] + s[i];
      if (scale) weights = Scaled(*w, [&](int64_t i) { return s[i / per_channel]; });
      return MakeCall("conv", {conv->args[0], weights, Vector(y.dtype, bias)}, conv->attrs, name);
    }
    const CallNode* mm = AsOpCall(product, "matmul");
    if (!scale || !mm) return nullptr;
    const Tensor* w = ConstantValue(mm->args[1]);
    if (!w || w->dtype() != y.dtype || w->ndim() != 2) return nullptr;
    const int64_t cols = w->shape()[1];
    if (!PerChannel(k, y.dtype, rank, rank - 1, cols, &s)) return nullptr;
    return MakeCall("matmul", {mm->args[0], Scaled(*w, [&](int64_t i) { return s[i % cols]; })},
                    mm->attrs, name);
  }

  // conv(mul(x, s), W, ...) or matmul(mul(a, s), W), or nullptr.
  Expr Forward(const CallNode* n, const CallNode* c, const std::string& name) const {
    const CallNode* before = AsOpCall(n->args[0], "mul");  // the original mul, typed
    const CallNode* mul = AsOpCall(c->args[0], "mul");     // as rewritten
    const TensorTypeNode* xt = AsTensor(n->args[0]->type);
    if (!before || !mul || mul->args.size() != 2 || !xt || !uses_.UsedOnce(n->args[0]))
      return nullptr;
    const int j = ConstantValue(mul->args[1]) ? 1 : 0;  // the scale's side
    if (!TypeEqual(before->args[1 - j]->type, n->args[0]->type)) return nullptr;
    const Expr& x = mul->args[1 - j];
    const int rank = xt->ndim();
    std::vector<double> s, bias;
    if (c->op->name == "conv") {
      const Tensor* w = ConstantConv(c, xt->dtype, &bias);
      const int64_t group = c->attrs.GetInt("group");
      if (!w || rank < 3 || group < 1 || w->shape()[0] % group != 0) return nullptr;
      const int64_t m = w->shape()[0], cg = w->shape()[1], mg = m / group;
      const int64_t taps = w->numel() / (m * cg);
      if (!PerChannel(mul->args[j], xt->dtype, rank, 1, cg * group, &s)) return nullptr;
      std::vector<Expr> args = c->args;
      args[0] = x;
      args[1] = Scaled(*w, [&](int64_t i) {
        const int64_t out = i / (cg * taps), in = (i / taps) % cg;
        return s[(out / mg) * cg + in];
      });
      return MakeCall("conv", args, c->attrs, name);
    }
    const Tensor* w = ConstantValue(c->args[1]);
    if (!w || w->dtype() != xt->dtype || w->ndim() != 2 || rank < 1) return nullptr;
    const int64_t rows = w->shape()[0], cols = w->shape()[1];
    if (!PerChannel(mul->args[j], xt->dtype, rank, rank - 1, rows, &s)) return nullptr;
    return MakeCall("matmul", {x, Scaled(*w, [&](int64_t i) { return s[i / cols]; })}, c->attrs,
                    name);
  }

  UseCounter uses_;
};

}  // namespace

void RegisterFoldScaleAxisPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "FoldScaleAxis",
      .opt_level = 3,
      .required = {"InferType"},
      .options = {},
      .doc = "fold a constant per-channel scale before or after a conv or matmul into its "
             "constant weights, and a per-channel shift after a conv into its bias (a "
             "batch_norm after a conv disappears)",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"FoldScaleAxis", 3, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  ScaleFolder folder(f);
                  return std::static_pointer_cast<const FunctionNode>(folder.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
