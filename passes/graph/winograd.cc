// WinogradConvs: marks the channels-last 3x3 convolutions that conv_nhwc's lowering may compute
// by Winograd's F(4x4, 3x3) (ir/ops/conv_winograd.cc): 36 multiply-adds per 16 outputs and
// input channel where the direct form takes 144.
//
//   before:  conv_nhwc(%x: f32[1, 56, 56, 64], const(f32[3, 3, 64, 128]), %b, pads=[1, 1, 1, 1])
//   after:   conv_nhwc(%x, const(f32[36, 64, 128]), %b, pads=[1, 1, 1, 1], winograd=true,
//                      winograd_filter=true)
//
// A constant weight is transformed here, once (U = G w G^T per channel pair, a derived constant
// every specialization of the model shares), where the lowering will take Winograd's form for
// the image size (ops::WinogradFits) or for any image size (ops::WinogradFitsAnySize, a
// shape-generic build's symbolic sizes): the kernel then reads U instead of
// computing it on one thread every run (about 8% of the 56 x 56 64 -> 64 conv's time at one
// thread), and convs with few tiles, where that per-run transform did not pay, take the form.
// Other weights keep their [3, 3, C, M] form and the kernel transforms them.
//
// The lowering applies the form only where the shapes it sees allow it; over symbolic image
// sizes only with U given (a constant weight), and only where the PassContext's
// winograd.any_image_size is on (the default). A shape-generic build then serves new image
// sizes at about the speed of their specializations: dynamic_conv's generic tier, p50 over
// specialized p50 at 48x80 to 200x120 (kiln bench, 1 thread, Zen 5), 1.6-1.8x -> 1.03-1.16x.
// It costs the build, which a tiered engine runs in the background: dynamic_conv's 0.63 ->
// 1.0 s, the 320 x 320 detection net's 7.9 -> 8.8 s. Measured
// (AMD EPYC Zen 5, AVX-512, 1 thread, the pool_cnn model at 224 x 224): its three 3x3 convs of
// 32 -> 64, 64 -> 64 and 64 -> 128 channels, 2.29 + 1.00 + 2.21 ms direct -> about 1.45 + 0.52
// + 1.04 ms.
//
// Winograd's sums run in another order than the direct form's and its transforms round at the
// magnitude of a 6x6 tile's sums: the results differ from the direct form's by about 2e-5 of
// the outputs' magnitude in f32 (the direct form: about 1e-6). Disable this pass
// (PassContext's disabled passes) where that matters more than the time.
//
// Rules: conv_nhwc with input_nhwc, f32, a [3, 3, C, M] weight with C and M at least 16
// (fewer, and the transforms cost more than they save), strides and dilations 1.
#include "ir/ops/conv_winograd.h"
#include "ir/ops/window.h"
#include "ir/visitor.h"
#include "passes/graph/derived_constant.h"
#include "passes/pass.h"

namespace kiln {
namespace {

constexpr int64_t kMinChannels = 16;

bool AllOnes(const Attrs& attrs, const char* name) {
  if (!attrs.Has(name)) return true;
  for (int64_t v : attrs.GetInts(name))
    if (v != 1) return false;
  return true;
}

constexpr const char* kAnySizeKey = "winograd.any_image_size";

class WinogradMarker : public ExprMutator {
 public:
  explicit WinogradMarker(bool any_size) : any_size_(any_size) {}

 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    if (!c || !c->op || c->op->name != "conv_nhwc" || c->attrs.GetBool("winograd") ||
        !c->attrs.GetBool("input_nhwc") || !AllOnes(c->attrs, "strides") ||
        !AllOnes(c->attrs, "dilations"))
      return out;
    // (The original operands: the rewritten ones have no type until InferType runs again.)
    const TensorTypeNode* x = AsTensor(n->args[0]->type);
    const TensorTypeNode* w = AsTensor(n->args[1]->type);
    if (!x || !w || x->dtype != DType::kFloat32 || w->ndim() != 4) return out;
    auto at_least = [](const Dim& d, int64_t v) { return d.is_const() && d.value() >= v; };
    const Shape& ws = w->shape;
    if (!ws[0].is_const() || ws[0].value() != 3 || !ws[1].is_const() || ws[1].value() != 3 ||
        !at_least(ws[2], kMinChannels) || !at_least(ws[3], kMinChannels))
      return out;
    Attrs attrs = c->attrs;
    attrs.Set("winograd", true);
    std::vector<Expr> args = c->args;
    if (TransformsOnce(*x, ws, c->attrs, args[1])) {
      const ConstantNode* w_const = AsConstant(args[1]);
      args[1] = DerivedConstant(args[1], "winograd_f4x4",
                                [w_const] { return ops::WinogradFilter(w_const->value); });
      attrs.Set("winograd_filter", true);
    }
    return MakeCall("conv_nhwc", std::move(args), std::move(attrs), c->name);
  }

 private:
  // Whether the weight `w` (of shape ws) is a constant and the lowering takes Winograd's form
  // given U for x [N, H, W, C]: at its constant image size, or at any (WinogradFitsAnySize).
  bool TransformsOnce(const TensorTypeNode& x, const Shape& ws, const Attrs& attrs,
                      const Expr& w) const {
    const ConstantNode* k = AsConstant(w);
    if (!k || k->value.dtype() != DType::kFloat32 || x.ndim() != 4 || !ws[2].is_const() ||
        !ws[3].is_const())
      return false;
    if (!x.shape[1].is_const() || !x.shape[2].is_const())  // any image size: the generic tier
      return any_size_ && ops::WinogradFitsAnySize(ws[2].value(), ws[3].value(),
                                                   ops::SymbolicWindow({3, 3}, attrs),
                                                   /*filter_transformed=*/true);
    std::string error;
    const std::vector<ops::WindowDim> dims =
        ops::ComputeWindow({x.shape[1].value(), x.shape[2].value()}, {3, 3}, attrs, &error);
    const int64_t images = x.shape[0].is_const() ? x.shape[0].value() : 1;
    return error.empty() && ops::WinogradFits(ws[2].value(), ws[3].value(), images, dims,
                                              /*filter_transformed=*/true);
  }

  const bool any_size_;
};

}  // namespace

void RegisterWinogradConvsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "WinogradConvs",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "let channels-last 3x3 stride-1 convs of f32 with 16 or more channels run by "
             "Winograd's F(4x4, 3x3) (about 2e-5 of the outputs' magnitude from the direct form)",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"WinogradConvs", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext& ctx) {
                  WinogradMarker marker(ctx.GetConfigBool(kAnySizeKey));
                  return std::static_pointer_cast<const FunctionNode>(marker.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
