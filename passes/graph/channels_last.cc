// ChannelsLastConvs: runs chains of 2-D convolutions channels-last (conv_nhwc,
// ir/ops/conv_layout.cc; the pools between them, ir/ops/pool_layout.cc), with a transpose back
// to NCHW only where a value leaves the chain.
//
//   before:  %1 = relu(conv(%x, const(f32[32, 16, 3, 3]), pads=[1, 1, 1, 1]))
//            conv(%1, const(f32[64, 32, 3, 3]), pads=[1, 1, 1, 1], strides=[2, 2])
//   after:   %1 = relu(conv_nhwc(%x, const(f32[3, 3, 16, 32]), input_nhwc=0, pads=...))
//            transpose(conv_nhwc(%1, const(f32[3, 3, 32, 64]), pads=..., strides=...),
//                      perm=[0, 3, 1, 2])
//
// conv_nhwc computes a conv as rows of output pixels against vectors of output channels, which
// runs at the core's peak whatever the stride, where conv's NCHW form splits a strided input
// into phases and stores its product in padded rows. What it costs is the layout: its output
// is [N, H, W, M], and a transpose back to NCHW is a gather. So convs go channels-last only in
// chains, where the next conv reads the channels-last value as it is: a conv whose input is made
// of other convs' outputs through elementwise ops (relu, sigmoid, hard_swish, ...; binary ones
// when every tensor operand is such a value, or a scalar) is linked to them, and a chain of
// linked convs converts when two or more of them have a spatial window (a 1x1 conv runs as
// fast in NCHW, and MobileNet-style blocks, 1x1 convs between depthwise ones, ran 2.7x slower
// converted, the transposes back costing more than the convs saved). A chain's first conv
// reads NCHW (conv_nhwc's input_nhwc = 0: one broadcast per input value, either layout reads
// the same). dynamic_conv (four 3x3 convs and a 1x1), 1 thread / 2 threads, min of 5
// alternating runs: 224 x 224 2168 -> 2039 us / 1264 -> 1050 us, 320 x 240 3806 -> 3298 us /
// 2032 -> 1679 us (AVX-512 Xeon).
//
// Pools join chains too: a global pool, or a max_pool or avg_pool of at most 25 taps or whose
// windows neither overlap nor pad (ChannelsLastPoolName), of a chain value runs on it
// channels-last (pool_layout.cc), and a conv that reads the pool's result is linked to the convs
// before it. A small CNN (conv, max
// pool, conv, max pool, conv, global average pool) had been three chains of one windowed conv, so
// NCHW throughout, where every conv splits its output channels across threads and each thread then
// reads the whole input, half of it written by the other core. Channels-last, each kernel's
// outermost loop is the output rows, so each thread reads mostly what it wrote. bench/vs_ort's
// small_cnn at batch 1, 2 threads: 98.5 -> 68.8 us (ONNX Runtime 74.9); 1 thread 112.5 -> 106.0 us;
// batch 32 about even (min of 3 alternating runs, 2-vCPU AVX-512 Xeon).
//
// A chain value that a conv reads with padding is padded by a pad op of its own, and the conv
// pads nothing: FuseOps ends the producer's group with that pad (fuse_ops.cc), so the producer
// stores its result straight into the middle of the padded buffer (LTensor::box) and no kernel
// copies it. dynamic_conv at 224 x 224, 1 thread, min of 6 alternating runs: 2144 -> 1949 us
// (the stride-2 conv's copy of its 1.6 MB input was 85 us of its 467).
//
// Rules: conv with group 1, a 4-D f32 input whose channel and spatial dims are constants, and a
// 4-D f32 constant weight (laid out [KH, KW, C, M] here, once per specialization, shared by the
// model's specializations as PackConstantWeights shares its panels).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/ops/conv_gemm.h"
#include "ir/ops/window.h"
#include "ir/visitor.h"
#include "passes/graph/derived_constant.h"
#include "passes/pass.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

// A conv that conv_nhwc can compute (see the rules above), judged on the original node.
bool ConvertibleConv(const CallNode* c) {
  if (!c->op || c->op->name != "conv" || c->attrs.GetInt("group") != 1) return false;
  const TensorTypeNode* x = AsTensor(c->args[0]->type);
  const ConstantNode* w = AsConstant(c->args[1]);
  if (!x || x->dtype != DType::kFloat32 || x->ndim() != 4 || !w ||
      w->value.dtype() != DType::kFloat32 || w->value.shape().size() != 4)
    return false;
  // Any image size too (conv_nhwc's SymbolicWindow and SymbolicPads).
  return x->shape[1].is_const();
}

// Whether the conv's kernel covers more than one pixel.
bool HasWindow(const CallNode* c) {
  const std::vector<int64_t>& w = AsConstant(c->args[1])->value.shape();
  return w[2] * w[3] > 1;
}

// A conv with a window whose products per output (input channels x taps, after TrimConvTaps)
// are so many that the transpose of its result back to NCHW is noise: it runs channels-last
// alone. In NCHW its product's columns are one image's padded pixels, which for a short image
// fill registers badly (the OCR recognizer's 3x3 conv of 1024 channels over 6 images of 1 x
// 40, 64 out: 42 columns, two vectors and two partial ones; 1.25 -> 0.80 ms, 1 thread, AVX-512
// Xeon; 1 image 0.20 -> 0.14).
bool HeavyWindow(const CallNode* c) {
  constexpr int64_t kMinProducts = 1024;
  const std::vector<int64_t>& w = AsConstant(c->args[1])->value.shape();
  return w[2] * w[3] > 1 && w[1] * w[2] * w[3] >= kMinProducts;
}

// An elementwise op that can run on a chain's channels-last value unchanged: every operand a
// tensor of the result's shape (the chain value, permuted alike) or a scalar.
bool LayoutBlindElementwise(const CallNode* c) {
  // Binary ops are kBroadcast; operands of the result's shape (checked below) do not broadcast.
  if (!c->op ||
      (c->op->pattern != OpPattern::kElementwise && c->op->pattern != OpPattern::kBroadcast))
    return false;
  const TensorTypeNode* out = AsTensor(c->type);
  if (!out || out->ndim() != 4) return false;
  for (const Expr& a : c->args) {
    const TensorTypeNode* t = AsTensor(a->type);
    if (!t) return false;
    if (t->ndim() != 0 && t->shape != out->shape) return false;
  }
  return true;
}

// A pool that runs as fast channels-last (pool_layout.cc): its name with "_nhwc", else empty.
// The global pools; windowed ones whose windows neither overlap nor pad (2x2 stride 2), which
// read their taps in place either way; and overlapping or padded windows of at most
// kMaxSpelledTaps taps, which pool_layout.cc spells out along the channels (a ResNet stem's 3x3
// stride-2 max pool of 64 x 112 x 112: 152 us channels-last against 443-453 NCHW; the stem of a
// 7x7 stride-2 conv, that pool and two 3x3 convs at 224 x 224: 4.84-4.89 -> 4.06-4.18 ms at
// 1 thread, 2.57-2.59 -> 2.04-2.09 at 2). Larger windows take the NCHW lowering's phase split,
// which from a channels-last input is a gather (5.2 ms for that pool), so they end the chain.
// Over a symbolic image size, any window (SAME pads too).
std::string ChannelsLastPoolName(const CallNode* c) {
  if (!c->op) return "";
  const std::string& name = c->op->name;
  const bool global = name == "global_max_pool" || name == "global_avg_pool";
  if (!global && name != "max_pool" && name != "avg_pool") return "";
  const TensorTypeNode* x = AsTensor(c->args[0]->type);
  if (!x || x->ndim() != 4) return "";
  if (global) return name + "_nhwc";
  std::vector<int64_t> spatial(2);
  for (int i = 0; i < 2; ++i) {
    if (x->shape[2 + i].is_const()) {
      spatial[i] = x->shape[2 + i].value();
      continue;
    }
    // Any image size: each tap spelled out or reduced, never a phase split (pool_symbolic.cc).
    return name + "_nhwc";
  }
  std::string error;
  const std::vector<ops::WindowDim> dims =
      ops::ComputeWindow(spatial, c->attrs.GetInts("kernel_shape"), c->attrs, &error);
  if (!error.empty()) return "";
  return ops::WindowsReadInPlace(dims) || ops::TapCount(dims) <= ops::kMaxSpelledTaps
             ? name + "_nhwc"
             : "";
}

// Which convs join a chain, judged on the original graph as the rewrite will see it. A value
// can be channels-last when it is a convertible conv, or a layout-blind elementwise op all of
// whose tensor operands can be; a convertible conv whose input can be joins a chain, with
// every convertible conv that input is made of. A conv with no such neighbour stays NCHW (its
// output would only be transposed back), and an elementwise op with an NCHW tensor operand (a
// residual add of a block's NCHW input) ends the chain there.
class ChainFinder : public ExprVisitor {
 public:
  std::unordered_set<const ExprNode*> Find(const Expr& body) {
    Visit(body);
    // Chains as components: each conv whose input can be channels-last is linked to the convs
    // that input is made of.
    std::unordered_map<const ExprNode*, const ExprNode*> parent;
    auto root = [&parent](const ExprNode* e) {
      while (parent.count(e) && parent[e] != e) e = parent[e] = parent[parent[e]];
      return e;
    };
    for (const ExprNode* conv : convs_) parent[conv] = conv;
    for (const ExprNode* conv : convs_) {
      const ExprNode* x = static_cast<const CallNode*>(conv)->args[0].get();
      if (!able_.count(x)) continue;
      std::vector<const ExprNode*> stack = {x};
      std::unordered_set<const ExprNode*> seen;  // a diamond (x * sigmoid(x)) is walked once
      while (!stack.empty()) {
        const ExprNode* e = stack.back();
        stack.pop_back();
        if (!seen.insert(e).second) continue;
        if (convs_.count(e)) {
          parent[root(e)] = root(conv);
          continue;
        }
        for (const Expr& a : static_cast<const CallNode*>(e)->args)
          if (able_.count(a.get())) stack.push_back(a.get());
      }
    }
    // A chain pays where it holds two convs with a spatial window: a 1x1 conv alone runs as
    // fast NCHW (its pixels are the product's columns, nothing padded or split), and the
    // transposes where the chain ends would cost what it saves (MobileNet-style blocks, whose
    // 1x1 convs sit between depthwise ones: 2.7x slower converted).
    // So does a chain holding a heavy conv (HeavyWindow), whose products outweigh the
    // transposes at the chain's ends.
    std::unordered_map<const ExprNode*, int> windowed;
    std::unordered_set<const ExprNode*> heavy;
    for (const ExprNode* conv : convs_) {
      if (HasWindow(static_cast<const CallNode*>(conv))) ++windowed[root(conv)];
      if (HeavyWindow(static_cast<const CallNode*>(conv))) heavy.insert(root(conv));
    }
    std::unordered_set<const ExprNode*> chained;
    for (const ExprNode* conv : convs_)
      if (windowed[root(conv)] >= 2 || heavy.count(root(conv))) chained.insert(conv);
    return chained;
  }

 protected:
  void VisitCall(const CallNode* n, const Expr& self) override {
    ExprVisitor::VisitCall(n, self);
    if (ConvertibleConv(n)) {
      convs_.insert(self.get());
      able_.insert(self.get());
      return;
    }
    if (!ChannelsLastPoolName(n).empty()) {
      if (able_.count(n->args[0].get())) able_.insert(self.get());
      return;
    }
    if (!LayoutBlindElementwise(n)) return;
    bool any = false;
    for (const Expr& a : n->args) {
      if (able_.count(a.get())) {
        any = true;
      } else if (AsTensor(a->type)->ndim() != 0) {
        return;
      }
    }
    if (any) able_.insert(self.get());
  }

 private:
  std::unordered_set<const ExprNode*> convs_;
  // Values that can be channels-last (convertible convs and elementwise ops of them).
  std::unordered_set<const ExprNode*> able_;
};

class ChannelsLast : public ExprMutator {
 public:
  explicit ChannelsLast(std::unordered_set<const ExprNode*> chained)
      : chained_(std::move(chained)) {}

 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr out = ExprMutator::MutateCall(n, self);
    const CallNode* c = AsCall(out);
    if (!c || !c->op) return out;
    if (chained_.count(self.get())) {
      Expr x = c->args[0];
      bool input_nhwc = false;
      if (auto it = nhwc_.find(x.get()); it != nhwc_.end()) {
        x = it->second;
        input_nhwc = true;
      }
      Attrs attrs;
      for (const char* key : {"strides", "pads", "dilations", "auto_pad", "kernel_shape"})
        if (const AttrValue* v = c->attrs.Find(key)) attrs.Set(key, *v);
      attrs.Set("input_nhwc", input_nhwc);
      if (input_nhwc) x = Boxed(x, n, attrs);
      std::vector<Expr> args = {x, Hwio(c->args[1])};
      if (c->args.size() == 3) args.push_back(c->args[2]);
      return Nchw(MakeCall("conv_nhwc", std::move(args), attrs, c->name), c->name);
    }
    if (const std::string pool = ChannelsLastPoolName(n); !pool.empty()) {
      auto it = nhwc_.find(c->args[0].get());
      if (it == nhwc_.end()) return out;
      return Nchw(MakeCall(pool, {it->second}, c->attrs, c->name), c->name);
    }
    if (!LayoutBlindElementwise(n)) return out;
    std::vector<Expr> args = c->args;
    bool any = false;
    for (size_t i = 0; i < args.size(); ++i) {
      if (auto it = nhwc_.find(args[i].get()); it != nhwc_.end()) {
        args[i] = it->second;
        any = true;
      } else if (AsTensor(n->args[i]->type)->ndim() != 0) {
        return out;  // an NCHW tensor operand: the op stays NCHW
      }
    }
    if (!any) return out;
    return Nchw(MakeCall(c->op, std::move(args), c->attrs, c->name), c->name);
  }

 private:
  // `y` (channels-last) as NCHW for whoever needs NCHW; the chain's next ops find `y` again.
  Expr Nchw(const Expr& y, const std::string& name) {
    Expr back = MakeCall("transpose", {y}, Attrs{{"perm", Ints{0, 3, 1, 2}}}, name);
    nhwc_[back.get()] = y;
    return back;
  }

  // A chain value `x` that conv `n` reads with padding, padded by a pad op, with `attrs`'
  // padding then zero: FuseOps ends x's group with such a pad (fuse_ops.cc), so the producer
  // stores straight into the padded buffer where conv_nhwc would copy x into one. The pad keeps
  // only the rows and columns a tap reads, as conv_nhwc's own padding does. `x` as it is when
  // nothing is padded.
  static Expr Boxed(const Expr& x, const CallNode* n, Attrs& attrs) {
    const TensorTypeNode* t = AsTensor(n->args[0]->type);
    const std::vector<int64_t>& w = AsConstant(n->args[1])->value.shape();
    const bool sized = t->shape[2].is_const() && t->shape[3].is_const();
    std::string error;
    // Any image size: the attribute's pads whole (past the last window's rows when the stride
    // does not divide evenly, unread).
    const std::vector<ops::WindowDim> dims =
        sized ? ops::ComputeWindow({t->shape[2].value(), t->shape[3].value()}, {w[2], w[3]},
                                   n->attrs, &error)
              : ops::ComputeWindow({int64_t{1} << 30, int64_t{1} << 30}, {w[2], w[3]}, n->attrs,
                                   &error);
    if (!error.empty()) return x;  // the conv's own type relation reports it
    Ints pads(8, 0);               // NHWC: [begin of N, H, W, C, end of N, H, W, C]
    bool any = false;
    for (int i = 0; i < 2; ++i) {
      const ops::WindowDim& d = dims[i];
      pads[1 + i] = d.pad_begin;
      pads[5 + i] =
          sized ? std::max<int64_t>(0, ops::WindowSpan(d) - d.in - d.pad_begin) : d.pad_end;
      any = any || pads[1 + i] > 0 || pads[5 + i] > 0;
    }
    if (!any) return x;
    attrs.Set("pads", Ints{0, 0, 0, 0});
    attrs.Set("auto_pad", std::string("NOTSET"));
    return MakeCall("pad", {x},
                    Attrs{{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}},
                    n->name);
  }

  // The weight [M, C, KH, KW] as [KH, KW, C, M], shared by the model's specializations.
  static Expr Hwio(const Expr& w) {
    return DerivedConstant(w, "hwio", [&w] {
      return PermuteAxes(AsConstant(w)->value, {2, 3, 1, 0});
    });
  }

  std::unordered_set<const ExprNode*> chained_;  // original conv nodes to convert
  // A rewritten NCHW value (the transpose Nchw made) -> its channels-last form.
  std::unordered_map<const ExprNode*, Expr> nhwc_;
};

}  // namespace

void RegisterChannelsLastConvsPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "ChannelsLastConvs",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "run chains of 2-D convs channels-last (conv_nhwc), transposing back to NCHW only "
             "where a value leaves the chain",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"ChannelsLastConvs", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  std::unordered_set<const ExprNode*> chained = ChainFinder().Find(f->body);
                  if (chained.empty()) return f;
                  ChannelsLast rewriter(std::move(chained));
                  return std::static_pointer_cast<const FunctionNode>(rewriter.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
