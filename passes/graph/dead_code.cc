// DeadCodeElimination: projects tuple fields out of the tuples that build them, so the fields
// nobody reads become unreachable.
//
//   before:  def @main(%x: f32[4]) {
//              %t = (relu(%x), tanh(%x))
//              %t.0
//            }
//   after:   def @main(%x: f32[4]) {
//              relu(%x)
//            }
//
// The graph is pure dataflow with no let bindings: a node that the result does not reach is
// not part of the function at all (the parser drops such bindings; a rewrite that stops using
// a node lets it go). So the only dead code a graph can carry is a computed value that is
// reached but never read, and the one place that happens is a tuple field: `(a, b).0` reaches
// `b`. The rule is `TupleGetItem(Tuple(f0, ..., fn), i) -> fi`, applied bottom-up, so nested
// projections `((a, b), c).0.1` collapse too. A Constant holds a single tensor, so a constant
// tuple is a Tuple of Constants and is covered by the same rule. A tuple that is also used
// whole stays alive through that other use.
//
// Unreachable functions are not removed: the graph IR has no global references (a call names
// its callee by holding the Function node itself, and the text format has no `@f` operand), so
// no function can reach another, and every function in a module is an entry point in its own
// right. Hence this is a FunctionPass, which also rewrites inside nested function bodies.
#include "ir/visitor.h"
#include "passes/pass.h"

namespace kiln {
namespace {

class TupleProjector : public ExprMutator {
 protected:
  Expr MutateTupleGetItem(const TupleGetItemNode* n, const Expr& self) override {
    // The tuple is rewritten first: its rewrite may itself be a projection that yields a Tuple.
    Expr rebuilt = ExprMutator::MutateTupleGetItem(n, self);
    const TupleGetItemNode* g = AsTupleGetItem(rebuilt);
    const TupleNode* t = AsTuple(g->tuple);
    if (t && g->index >= 0 && g->index < static_cast<int>(t->fields.size()))
      return t->fields[g->index];
    return rebuilt;
  }
};

}  // namespace

void RegisterDeadCodeEliminationPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "DeadCodeElimination",
      .opt_level = 1,
      .required = {"InferType"},
      .options = {},
      .doc = "project tuple fields out of tuples, dropping the fields nobody reads",
      .create =
          [](const Attrs& o) {
            return CreateFunctionPass(
                PassInfo{"DeadCodeElimination", 1, {"InferType"}},
                [](const Function& f, const IRModule&, const PassContext&) {
                  TupleProjector projector;
                  return std::static_pointer_cast<const FunctionNode>(projector.Mutate(f));
                },
                o);
          },
  });
}

}  // namespace kiln
