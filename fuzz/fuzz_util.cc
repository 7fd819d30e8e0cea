#include "fuzz/fuzz_util.h"

#include <map>
#include <set>
#include <string>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/type.h"
#include "ir/visitor.h"

namespace kiln::fuzz {
namespace {

// The bytes of a value typed `t`, symbols bound; false where it cannot be known.
bool TypeBytes(const Type& t, uint64_t* bytes) {
  if (!t) return false;
  if (const TupleTypeNode* tuple = AsTuple(t)) {
    for (const Type& f : tuple->fields)
      if (!TypeBytes(f, bytes)) return false;
    return true;
  }
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt) return t->kind == TypeKind::kFunc;  // a nested function's own values count apart
  std::set<std::string> symbols;
  for (const Dim& d : tt->shape) d.CollectSymbols(&symbols);
  std::map<std::string, int64_t> bindings;
  for (const std::string& s : symbols) bindings[s] = kSymbolValue;
  uint64_t n = DTypeSize(tt->dtype);
  for (const Dim& d : tt->shape) {
    std::optional<int64_t> v = d.TryEval(bindings);
    if (!v || *v < 0 || (*v > 0 && n > (uint64_t{1} << 40) / static_cast<uint64_t>(*v)))
      return false;
    n *= static_cast<uint64_t>(*v);
  }
  *bytes += n;
  return true;
}

class ByteCounter : public ExprVisitor {
 public:
  uint64_t bytes = 0;
  bool known = true;

 protected:
  void VisitCall(const CallNode* node, const Expr& self) override {
    Count(self);
    ExprVisitor::VisitCall(node, self);
  }
  void VisitVar(const VarNode* node, const Expr& self) override {
    Count(self);
    ExprVisitor::VisitVar(node, self);
  }
  void VisitConstant(const ConstantNode* node, const Expr& self) override {
    Count(self);
    ExprVisitor::VisitConstant(node, self);
  }

 private:
  void Count(const Expr& e) {
    if (known && !TypeBytes(e->type, &bytes)) known = false;
  }
};

}  // namespace

bool SmallEnoughToRun(const Function& fn, uint64_t limit) {
  ByteCounter counter;
  counter.Visit(fn);
  return counter.known && counter.bytes <= limit;
}

std::vector<Tensor> SmallInputs(const Function& fn, bool* ok) {
  *ok = false;
  std::vector<Tensor> inputs;
  uint32_t seed = 1;
  for (const Var& p : fn->params) {
    const TensorTypeNode* tt = AsTensor(p->type);
    if (!tt) return {};
    std::vector<int64_t> shape;
    std::map<std::string, int64_t> bindings;
    std::set<std::string> symbols;
    for (const Dim& d : tt->shape) d.CollectSymbols(&symbols);
    for (const std::string& s : symbols) bindings[s] = kSymbolValue;
    for (const Dim& d : tt->shape) {
      std::optional<int64_t> v = d.TryEval(bindings);
      if (!v || *v < 0) return {};
      shape.push_back(*v);
    }
    Tensor t = Tensor::Empty(tt->dtype, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      seed = seed * 1103515245u + 12345u;
      // -3 .. 3, in steps of a half: indices in range for small dims, no overflow anywhere.
      t.SetFromDouble(i, static_cast<double>(static_cast<int>((seed >> 16) % 13) - 6) / 2.0);
    }
    inputs.push_back(std::move(t));
  }
  *ok = true;
  return inputs;
}

void RunIfSmall(const Function& fn) {
  // 1 MiB of tensors in all: a window op over a few hundred thousand elements already runs for
  // seconds in the reference interpreter under ASan (a 164-byte MaxPool over 9x35x28x28 with a
  // 3x37 window: 11 s), which starves the campaign of executions and finds nothing new.
  if (!SmallEnoughToRun(fn, uint64_t{1} << 20)) return;
  bool ok = false;
  std::vector<Tensor> inputs = SmallInputs(fn, &ok);
  if (!ok) return;
  try {
    Interpret(fn, inputs);
  } catch (const Error&) {
    // A model that is certain to fail at run time (an index out of range, say) says so.
  }
}

}  // namespace kiln::fuzz
