// FoldConstant: evaluates constant subgraphs at compile time with the ops' reference kernels.
//
//   before:  def @main(%x: f32[2]) {
//              %c = mul(const(f32[2], [1.0, 2.0]), const(f32[], 2.0))
//              %s = split(const(f32[2], [5.0, 6.0]), num_outputs=2)
//              add(add(%x, %c), %s.1)
//            }
//   after:   def @main(%x: f32[2]) {
//              add(add(%x, const(f32[2], [2.0, 4.0])), const(f32[1], [6.0]))
//            }
//
// Rules, applied bottom-up so that chains fold in one run:
// - an op call whose arguments are all constants, and whose inferred type is concrete, is run
//   with the op's reference kernel and becomes a Constant that keeps the call's source name; a
//   multi-output op (split) becomes a Tuple of Constants;
// - `tuple.i` where field i of a Tuple node is a constant becomes that constant (tuples are
//   pure, so the other fields need not be evaluated).
//
// Not folded:
// - a result with more elements than the `fold_constant.max_elements` config key (a tuple
//   counts all its fields), so that a broadcast of a small constant to a huge shape stays a
//   broadcast instead of becoming a huge weight;
// - a call whose type has a symbolic dim (it cannot be allocated before the shapes are bound);
// - calls of functions (only op calls are evaluated; constants inside a nested function body
//   still fold in place);
// - a call whose kernel throws (gather with an index out of range, say). The subgraph is
//   certain to fail, and it must still fail when the model runs, with the kernel's message
//   naming the node, rather than turn a pass that only optimizes into a compile error. It is
//   left as it was, and a warning diagnostic names it.
//
// Every op is assumed pure (its result depends only on its inputs and attributes), as all
// built-in ops are: that is what makes evaluating it once at compile time correct.
#include <algorithm>

#include "ir/error.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"
#include "passes/pass.h"

namespace kiln {
namespace {

constexpr char kMaxElementsKey[] = "fold_constant.max_elements";

// The output types of a call typed `t`, one per tensor it returns; false when `t` is missing,
// not made of tensors, or not concrete.
bool ConcreteOutputTypes(const Type& t, std::vector<const TensorTypeNode*>& out) {
  if (const TensorTypeNode* tt = AsTensor(t)) {
    if (!IsConstShape(tt->shape)) return false;
    out.push_back(tt);
    return true;
  }
  const TupleTypeNode* tup = AsTuple(t);
  if (!tup) return false;
  for (const Type& f : tup->fields) {
    const TensorTypeNode* ft = AsTensor(f);
    if (!ft || !IsConstShape(ft->shape)) return false;
    out.push_back(ft);
  }
  return true;
}

// Whether the outputs hold at most `limit` (>= 0) elements in all; stops before the product
// of a huge shape can overflow.
bool WithinElementLimit(const std::vector<const TensorTypeNode*>& outputs, int64_t limit) {
  int64_t total = 0;
  for (const TensorTypeNode* t : outputs) {
    std::vector<int64_t> shape = ConstShape(t->shape);
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) continue;  // empty
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d > limit / n) return false;
      n *= d;
    }
    if (n > limit - total) return false;
    total += n;
  }
  return true;
}

class ConstantFolder : public ExprMutator {
 public:
  ConstantFolder(const PassContext& ctx, int64_t max_elements)
      : ctx_(ctx), max_elements_(max_elements) {}

 protected:
  Expr MutateCall(const CallNode* n, const Expr& self) override {
    Expr rebuilt = ExprMutator::MutateCall(n, self);
    if (!n->op || !n->op->ref_kernel) return rebuilt;
    const CallNode* c = AsCall(rebuilt);
    std::vector<Tensor> inputs;
    for (const Expr& a : c->args) {
      const ConstantNode* k = AsConstant(a);
      if (!k) return rebuilt;
      inputs.push_back(k->value);
    }
    // Folding keeps every type, so the type inferred for the original call is the result's.
    std::vector<const TensorTypeNode*> out_types;
    if (!ConcreteOutputTypes(self->type, out_types)) return rebuilt;
    if (max_elements_ < 0 || !WithinElementLimit(out_types, max_elements_)) return rebuilt;

    std::vector<Tensor> outputs;
    for (const TensorTypeNode* t : out_types)
      outputs.push_back(Tensor::Empty(t->dtype, ConstShape(t->shape)));
    try {
      n->op->ref_kernel(inputs, n->attrs, outputs);
    } catch (const Error& e) {
      ctx_.Report({Diagnostic::Level::kWarning, "FoldConstant",
                   StrCat(DescribeNode(self), " left unfolded: ", e.what())});
      return rebuilt;
    }

    if (!AsTuple(self->type)) return MakeConstant(std::move(outputs[0]), n->name);
    auto tuple = std::make_shared<TupleNode>();
    for (Tensor& t : outputs) tuple->fields.push_back(MakeConstant(std::move(t)));
    tuple->name = n->name;
    return tuple;
  }

  Expr MutateTupleGetItem(const TupleGetItemNode* n, const Expr& self) override {
    Expr rebuilt = ExprMutator::MutateTupleGetItem(n, self);
    const TupleGetItemNode* g = AsTupleGetItem(rebuilt);
    const TupleNode* t = AsTuple(g->tuple);
    if (t && g->index >= 0 && g->index < static_cast<int>(t->fields.size()) &&
        AsConstant(t->fields[g->index]))
      return t->fields[g->index];
    return rebuilt;
  }

 private:
  const PassContext& ctx_;
  const int64_t max_elements_;
};

}  // namespace

void RegisterFoldConstantPass(PassRegistry& r) {
  RegisterPassConfig(
      kMaxElementsKey, AttrKind::kInt, int64_t{1} << 20,
      "FoldConstant leaves a result with more elements than this unfolded (negative: "
      "folds nothing)");
  r.Register(PassRegistration{
      .name = "FoldConstant",
      .opt_level = 2,
      .required = {"InferType"},
      .options = {},
      .doc = "evaluate constant subgraphs with the reference kernels",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"FoldConstant", 2, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext& ctx) {
                  ConstantFolder folder(ctx, ctx.GetConfigInt(kMaxElementsKey));
                  Expr out = folder.Mutate(f);
                  return std::static_pointer_cast<const FunctionNode>(out);
                },
                o);
          },
  });
}

}  // namespace kiln
