// FuseOps: partitions each function's op calls into groups, each of which later stages lower to
// one kernel (SPEC.md §3). A group becomes a nested function with `primitive=true`, called from
// where its ops were.
//
//   before:
//     def @main(%x: f32[batch, 4], %w: f32[4, 4]) {
//       %mm = matmul(%x, %w)
//       %act = relu(add(%mm, const(f32[], 1)))
//       %t = transpose(%act, perm=[1, 0])
//       exp(%t)
//     }
//   after (types not shown):
//     def @main(%x: f32[batch, 4], %w: f32[4, 4]) {
//       %0 = fn(%1: f32[batch, 4], %2: f32[4, 4]) attrs{primitive=true} {
//         %mm = matmul(%1, %2)
//         %3 = add(%mm, const(f32[], 1.0))
//         %act = relu(%3)
//         %act
//       }
//       %fused_matmul_add_relu = %0(%x, %w)
//       %4 = fn(%5: f32[batch, 4]) attrs{primitive=true} {
//         %t = transpose(%5, perm=[1, 0])
//         exp(%t)
//       }
//       %fused_transpose_exp = %4(%fused_matmul_add_relu)
//       %fused_transpose_exp
//     }
//
// The algorithm. Nodes are visited once, operands before users. Every op call starts a group of
// its own and then absorbs the groups of its operands, one at a time and again until none more
// fits (so a diamond `e -> a -> c, e -> c` closes in one visit of `c`). A producer group joins
// the consumer's group only if
//   - its root (the one member whose value leaves it) is used by members of the merged group
//     only, and is not the function's result: a value read outside its group must be
//     materialized, so it ends its group. Every group therefore has exactly one output, and is
//     convex (no path leaves the group and comes back), so one call can replace it;
//   - the merged group has at most `max_group_size` op calls;
//   - the merged group has at most one anchor, a reduction or an output-fusable op (two
//     reductions, or two matmuls, never share a group), and when it has one, every other
//     member is elementwise or broadcast: a reduction takes elementwise/broadcast producers on
//     its input side and an elementwise/broadcast epilogue, an output-fusable op only an
//     epilogue, so none of its members may be one of its ancestors (its operands are read many
//     times and must be materialized). Groups without an anchor chain elementwise, broadcast
//     and injective ops freely.
// Opaque ops, multi-output ops (split: the group returns the tuple) and calls of functions stay
// alone; constants, variables, tuples and tuple items are never members, so fusion never
// crosses them.
//
// Decisions the rules imply. Because producers are visited first, an elementwise op between two
// anchors joins the upstream one: `matmul -> mul -> softmax` gives {matmul, mul} and {softmax},
// and `matmul -> add(bias) -> add(residual) -> layer_norm` gives {matmul, add, add} and
// {layer_norm}. Either way one tensor of the same size is materialized, but this way the
// reduction does not recompute the elementwise ops on each of its passes over the row, and
// with a residual add it reads one input instead of two. Injective ops (reshape, transpose) are not
// part of an epilogue: an epilogue runs in the anchor's own index space as its results are stored,
// and a layout change there would turn those stores into scatters; `matmul -> add -> reshape ->
// transpose` gives {matmul, add} and {reshape, transpose}. One injective op may end an anchor's
// group: a constant pad that crops nothing, whose result is its operand in a box (OpDef::
// boxes_operand); the epilogue's stores then go into the box, and the border is filled apart.
// `conv -> relu -> pad -> conv` gives {conv, relu, pad} and {conv}, with no copy for the pad.
//
// One pair of anchors shares a group: a channels-last pool whose windows tile its input (no
// overlap, no padding: each value it reads is read once) takes the group of the conv_nhwc
// that feeds it, epilogue and all (PoolTakesConv). The conv's result becomes a buffer local to
// the kernel, and FuseLoops puts the conv and the pool of one image into one iteration of the
// batch loop, so the pool reads an image the conv wrote into L2 a moment before, where two
// kernels would stream the whole batch out to L3 and back (the small CNN at batch 32, conv 3 ->
// 32 at 32 x 32 then a 2x2 max pool: 4 MB each way). That loop is then what the threads split,
// so it is taken only where the batch divides among `target.threads` evenly or is 8 times
// larger (3 images on 2 threads ran 199 -> 227 us).
//
// Group functions: parameters are the group's distinct external inputs in order of first use;
// constants of at most one element are copied into the group (they become immediates in the
// kernel), larger ones are passed in. The call is named `fused_<op>_<op>...` after its members
// in dataflow order, so kernel names read like the ops they run. A function marked primitive
// is left alone and calls of one are opaque, so the pass is idempotent; nested functions that
// are not primitive are fused on their own.
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "ir/error.h"
#include "ir/ops/window.h"
#include "passes/pass.h"

namespace kiln {

namespace {

constexpr const char* kMaxGroupSizeKey = "fuse_ops.max_group_size";
constexpr const char* kThreadsKey = "target.threads";
// A batch that does not divide among the threads takes a conv's pool when it is at least this
// many times the threads (one image more than another thread's share costs at most 1/8).
constexpr int64_t kMinImagesPerThread = 8;
// Constants with at most this many elements are copied into the groups that read them.
constexpr int64_t kMaxInlinedConstantElements = 1;
// Group names list at most this many ops, then how many more there are.
constexpr size_t kMaxNamedOps = 8;

bool IsPrimitive(const FunctionNode* f) {
  const AttrValue* v = f->attrs.Find("primitive");
  return v && KindOf(*v) == AttrKind::kBool && std::get<bool>(*v);
}

void Operands(const Expr& e, std::vector<Expr>& out) {
  out.clear();
  if (const CallNode* c = AsCall(e)) {
    if (c->fn) out.push_back(c->fn);
    out.insert(out.end(), c->args.begin(), c->args.end());
  } else if (const TupleNode* t = AsTuple(e)) {
    out = t->fields;
  } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
    out.push_back(g->tuple);
  }
}

std::string GroupName(const std::vector<std::string>& ops) {
  std::string name = "fused";
  for (size_t i = 0; i < ops.size() && i < kMaxNamedOps; ++i) {
    name += '_';
    for (char c : ops[i]) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  if (ops.size() > kMaxNamedOps) name += StrCat("_and_", ops.size() - kMaxNamedOps, "_more");
  return name;
}

// What the groups may be: max_group_size op calls at most; `threads` the kernels' threads (0:
// unknown), which PoolTakesConv's batch loop is split across.
struct FuseLimits {
  int64_t max_group_size;
  int64_t threads;
};

Function FuseFunction(const Function& fn, const FuseLimits& limits);

// Partitions the body of one function and rebuilds it with a call per group.
class Fuser {
 public:
  Fuser(const Function& fn, const FuseLimits& limits)
      : fn_(fn), limits_(limits), order_(PostOrder(fn->body)) {}

  Function Run() {
    const int n = static_cast<int>(order_.size());
    for (int i = 0; i < n; ++i) index_[order_[i].get()] = i;
    consumers_.resize(n);
    std::vector<Expr> ops;
    for (int i = 0; i < n; ++i) {
      Operands(order_[i], ops);
      for (const Expr& o : ops) {
        std::vector<int>& users = consumers_[index_.at(o.get())];
        if (users.empty() || users.back() != i) users.push_back(i);
      }
    }
    group_of_.assign(n, -1);
    for (int i = 0; i < n; ++i)
      if (AsOpCall(i)) Place(i);
    return Rebuild();
  }

 private:
  struct Group {
    std::vector<int> members;
    int root = -1;    // the only member whose value is read outside the group
    int anchor = -1;  // the reduction or output-fusable member, if any
    bool alone = false;
    OpPattern max_other = OpPattern::kElementwise;  // over the members but the anchor
    std::vector<int> inputs;  // distinct op calls outside the group that members read
  };

  const CallNode* AsOpCall(int i) const {
    const CallNode* c = AsCall(order_[i]);
    return c && c->op ? c : nullptr;
  }

  // Starts a group for op call `i` and absorbs producer groups while one fits.
  void Place(int i) {
    const CallNode* c = AsOpCall(i);
    int g = static_cast<int>(groups_.size());
    Group& group = groups_.emplace_back();
    group.members = {i};
    group.root = i;
    OpPattern p = c->op->pattern;
    if (p == OpPattern::kReduction || p == OpPattern::kOutputFusable) {
      group.anchor = i;
    } else {
      group.max_other = p;
    }
    group.alone = p == OpPattern::kOpaque || (order_[i]->type && AsTuple(order_[i]->type));
    for (const Expr& a : c->args) {
      int ai = index_.at(a.get());
      if (group_of_[ai] < 0) continue;
      KILN_CHECK(groups_[group_of_[ai]].root == ai, "an op read outside its group is not a root");
      if (std::find(group.inputs.begin(), group.inputs.end(), ai) == group.inputs.end())
        group.inputs.push_back(ai);
    }
    group_of_[i] = g;
    if (group.alone) return;
    // Restart after each absorption: the merged group has new inputs, and a producer that did
    // not fit before may fit now (its other consumers may have joined).
    for (bool changed = true; changed;) {
      changed = false;
      for (int input : groups_[g].inputs) {
        if (CanAbsorb(g, group_of_[input])) {
          g = Absorb(g, group_of_[input]);
          changed = true;
          break;
        }
      }
    }
  }

  bool CanAbsorb(int g, int pg) const {
    const Group& s = groups_[g];
    const Group& p = groups_[pg];
    if (p.alone) return false;
    if (static_cast<int64_t>(s.members.size() + p.members.size()) > limits_.max_group_size)
      return false;
    if (p.root == static_cast<int>(order_.size()) - 1) return false;  // the function's result
    for (int u : consumers_[p.root])
      if (group_of_[u] != g) return false;
    if (s.anchor >= 0 && p.anchor >= 0) return PoolTakesConv(s, p);
    int anchor = s.anchor >= 0 ? s.anchor : p.anchor;
    if (anchor < 0) return true;
    if (std::max(s.max_other, p.max_other) > OpPattern::kBroadcast && !EndsAnchorGroup(s, p))
      return false;
    if (AsOpCall(anchor)->op->pattern == OpPattern::kOutputFusable) {
      // No member may feed the anchor. Groups are convex, so a member that reaches it inside
      // the merged group is one of its operands.
      for (const Expr& a : AsOpCall(anchor)->args) {
        int gi = group_of_[index_.at(a.get())];
        if (gi == g || gi == pg) return false;
      }
    }
    return true;
  }

  // A lone channels-last max or average pool whose windows neither overlap nor pad
  // (ops::WindowsApart: each value it reads is read once) consuming a conv_nhwc's group whose
  // other members are elementwise or broadcast, over a constant batch of 2 or more that the
  // threads split evenly or that is kMinImagesPerThread times their number. (The caller has
  // checked that the conv group's root feeds nothing else.)
  bool PoolTakesConv(const Group& s, const Group& p) const {
    if (s.members.size() != 1 || p.max_other > OpPattern::kBroadcast || limits_.threads < 1)
      return false;
    const CallNode* pool = AsOpCall(s.members[0]);
    const CallNode* conv = AsOpCall(p.anchor);
    if ((pool->op->name != "max_pool_nhwc" && pool->op->name != "avg_pool_nhwc") ||
        conv->op->name != "conv_nhwc")
      return false;
    const TensorTypeNode* t = AsTensor(order_[p.root]->type);
    if (!t || t->ndim() != 4) return false;
    for (const Dim& d : t->shape)
      if (!d.is_const()) return false;
    // x is [N, H, W, C].
    std::string error;
    const std::vector<ops::WindowDim> dims =
        ops::ComputeWindow({t->shape[1].value(), t->shape[2].value()},
                           pool->attrs.GetInts("kernel_shape"), pool->attrs, &error);
    if (!error.empty() || !ops::WindowsApart(dims)) return false;
    const int64_t n = t->shape[0].value(), threads = limits_.threads;
    return n >= 2 && (n % threads == 0 || n >= kMinImagesPerThread * threads);
  }

  // A lone boxing op (a constant pad that crops nothing, OpDef::boxes_operand) consuming an
  // anchor's group whose other members are elementwise or broadcast: it ends that group, and
  // the anchor's result is stored straight into its box (LowerToLoops), where a group of its own
  // would copy it. The merged group's max_other is then injective, so nothing joins it later.
  bool EndsAnchorGroup(const Group& s, const Group& p) const {
    if (s.members.size() != 1 || p.anchor < 0 || p.max_other > OpPattern::kBroadcast) return false;
    const CallNode* c = AsOpCall(s.members[0]);
    return c->op->boxes_operand && c->op->boxes_operand(c->attrs);
  }

  // Merges the two groups (the smaller one's members move) and returns the merged group's id.
  // The consumer group's root stays the root.
  int Absorb(int g, int pg) {
    int keep = groups_[g].members.size() >= groups_[pg].members.size() ? g : pg;
    int gone = keep == g ? pg : g;
    Group& k = groups_[keep];
    Group& o = groups_[gone];
    for (int m : o.members) group_of_[m] = keep;
    k.members.insert(k.members.end(), o.members.begin(), o.members.end());
    k.root = groups_[g].root;
    if (k.anchor < 0) k.anchor = o.anchor;
    k.max_other = std::max(k.max_other, o.max_other);
    std::vector<int> inputs;
    for (const std::vector<int>* list : {&k.inputs, &o.inputs})
      for (int x : *list)
        if (group_of_[x] != keep && std::find(inputs.begin(), inputs.end(), x) == inputs.end())
          inputs.push_back(x);
    k.inputs = std::move(inputs);
    o = Group{};
    return keep;
  }

  Function Rebuild() {
    const int n = static_cast<int>(order_.size());
    rebuilt_.assign(n, nullptr);
    for (int i = 0; i < n; ++i) {
      const Expr& e = order_[i];
      if (AsOpCall(i)) {
        if (groups_[group_of_[i]].root == i) rebuilt_[i] = EmitGroup(group_of_[i]);
        continue;  // other members live inside their group only
      }
      if (const FunctionNode* f = AsFunction(e)) {
        rebuilt_[i] = IsPrimitive(f)
                          ? e
                          : FuseFunction(std::static_pointer_cast<const FunctionNode>(e), limits_);
        continue;
      }
      rebuilt_[i] = WithOperands(e);
    }
    if (rebuilt_[n - 1] == fn_->body) return fn_;
    auto out = std::make_shared<FunctionNode>(*fn_);
    out->body = rebuilt_[n - 1];
    out->type = nullptr;
    return out;
  }

  // `e` (a variable, constant, tuple, tuple item or function call) over rebuilt operands.
  Expr WithOperands(const Expr& e) const {
    auto get = [&](const Expr& o) { return rebuilt_[index_.at(o.get())]; };
    if (const CallNode* c = AsCall(e)) {
      auto n = std::make_shared<CallNode>(*c);
      bool changed = false;
      n->fn = c->fn ? get(c->fn) : nullptr;
      changed |= n->fn != c->fn;
      for (Expr& a : n->args) {
        Expr r = get(a);
        changed |= r != a;
        a = std::move(r);
      }
      if (!changed) return e;
      n->type = nullptr;
      return n;
    }
    if (const TupleNode* t = AsTuple(e)) {
      auto n = std::make_shared<TupleNode>(*t);
      bool changed = false;
      for (Expr& f : n->fields) {
        Expr r = get(f);
        changed |= r != f;
        f = std::move(r);
      }
      if (!changed) return e;
      n->type = nullptr;
      return n;
    }
    if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
      Expr t = get(g->tuple);
      if (t == g->tuple) return e;
      auto n = std::make_shared<TupleGetItemNode>(*g);
      n->tuple = std::move(t);
      n->type = nullptr;
      return n;
    }
    return e;
  }

  // The group's function and the call of it that replaces the group's root.
  Expr EmitGroup(int g) {
    std::vector<int> members = groups_[g].members;
    std::sort(members.begin(), members.end());
    std::unordered_map<int, Expr> inner;  // member or external input -> its node in the group
    std::vector<Var> params;
    std::vector<Expr> args;
    std::vector<std::string> op_names;
    for (int m : members) {
      const CallNode* c = AsOpCall(m);
      auto call = std::make_shared<CallNode>(*c);
      call->type = nullptr;
      for (Expr& a : call->args) {
        int ai = index_.at(a.get());
        auto it = inner.find(ai);
        if (it == inner.end()) {
          const ConstantNode* k = AsConstant(a);
          Expr inside;
          if (k && k->value.defined() && k->value.numel() <= kMaxInlinedConstantElements) {
            inside = MakeConstant(k->value, k->name);
          } else {
            Var p = MakeVar("", a->type);
            params.push_back(p);
            args.push_back(rebuilt_[ai]);
            inside = p;
          }
          it = inner.emplace(ai, std::move(inside)).first;
        }
        a = it->second;
      }
      inner[m] = call;
      op_names.push_back(c->op->name);
    }
    Function fn = MakeFunction(std::move(params), inner.at(groups_[g].root), nullptr,
                               Attrs{{"primitive", true}});
    return MakeFnCall(fn, std::move(args), GroupName(op_names));
  }

  Function fn_;
  FuseLimits limits_;
  std::vector<Expr> order_;  // the body's nodes, operands first; the result is last
  std::unordered_map<const ExprNode*, int> index_;
  std::vector<std::vector<int>> consumers_;  // distinct users of each node
  std::vector<Group> groups_;
  std::vector<int> group_of_;  // -1 for nodes that are not op calls
  std::vector<Expr> rebuilt_;  // each node's replacement; null for non-root group members
};

Function FuseFunction(const Function& fn, const FuseLimits& limits) {
  if (IsPrimitive(fn.get())) return fn;
  return Fuser(fn, limits).Run();
}

}  // namespace

void RegisterFuseOpsPass(PassRegistry& r) {
  RegisterPassConfig(kMaxGroupSizeKey, AttrKind::kInt, int64_t{32},
                     "the most op calls FuseOps puts in one group (kernel)");
  r.Register(PassRegistration{
      .name = "FuseOps",
      .opt_level = 1,
      .required = {"InferType"},
      .options = {{"max_group_size", AttrKind::kInt, AttrValue{int64_t{0}},
                   [](const AttrValue& v) {
                     return std::get<int64_t>(v) < 0 ? std::string("must not be negative") : "";
                   }}},
      .doc = "group ops into primitive functions, one kernel each; max_group_size=0 reads "
             "the config key fuse_ops.max_group_size",
      .create =
          [](const Attrs& o) {
            int64_t option = o.GetInt("max_group_size");
            return CreateFunctionPass(
                PassInfo{"FuseOps", 1, {"InferType"}},
                [option](const Function& f, const IRModule&, const PassContext& ctx) {
                  int64_t max = option > 0 ? option : ctx.GetConfigInt(kMaxGroupSizeKey);
                  if (max < 1)
                    Throw(ErrorCode::kInvalidArgument, kMaxGroupSizeKey,
                          " must be at least 1, got ", max);
                  return FuseFunction(f, FuseLimits{max, ctx.GetConfigInt(kThreadsKey)});
                },
                o);
          },
  });
}

}  // namespace kiln
