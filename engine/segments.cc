#include "engine/segments.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "engine/model.h"
#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/sequence.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"

namespace kiln {

namespace {

std::vector<Expr> Operands(const Expr& e) {
  if (const CallNode* c = AsCall(e)) {
    std::vector<Expr> out = c->args;
    if (c->fn) out.push_back(c->fn);
    return out;
  }
  if (const TupleNode* t = AsTuple(e)) return t->fields;
  if (const TupleGetItemNode* g = AsTupleGetItem(e)) return {g->tuple};
  return {};
}

// Fresh symbols for segment parameters' dims, unique in the process.
int64_t NextSymbol() {
  static std::atomic<int64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// The type of a segment parameter that carries a value typed `t` in the whole graph: constant
// dims and the model's own symbols stay (they bind as the model's inputs bind them, and must
// agree); any other dim (an expression of symbols, or one that only values decide) becomes a
// fresh symbol, which the tensor passed at run time binds.
Type SegmentParamType(const Type& t, const std::string& what) {
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt)
    Throw(ErrorCode::kUnsupported, what, " of type ", TypeToString(t),
          " would cross a segment boundary (only tensors do)");
  Shape shape;
  for (const Dim& d : tt->shape) {
    const bool keep = d.is_const() || (d.is_symbol() && !TypeRelContext::IsUnknownDim(d));
    shape.push_back(keep ? d : Dim::Symbol(StrCat("_s", NextSymbol())));
  }
  return TensorType(shape, tt->dtype);
}

// Replaces nodes by given ones (seeded in the memo, so the mutator never descends below a
// replaced node): the rest's parameters for what it reads from before the cut, a loop body's
// retyped parameters.
class CutMutator : public ExprMutator {
 public:
  void Replace(const Expr& from, Expr to) { memo_[from.get()] = std::move(to); }
};

// dyn.loop's body as a model: its parameters typed as segment parameters, and a carried value
// whose type the body changes (a sequence that grows) with a fresh symbol for every dim, so
// that each iteration's shapes bind anew.
std::shared_ptr<const Model> LoopBodyModel(const FunctionNode& body, int64_t carried,
                                           const std::string& name) {
  const TupleTypeNode* ret = AsTuple(body.body->type);
  CutMutator rebind;
  std::vector<Var> params;
  for (size_t i = 0; i < body.params.size(); ++i) {
    const Var& p = body.params[i];
    const TensorTypeNode* tt = AsTensor(p->type);
    Type t = SegmentParamType(p->type, StrCat("model '", name, "': body parameter ", i));
    const bool is_carried = i >= 2 && static_cast<int64_t>(i) < 2 + carried;
    if (is_carried && ret && ret->fields.size() > i - 1 &&
        TypeToString(ret->fields[i - 1]) != TypeToString(p->type)) {
      Shape fresh;
      for (size_t d = 0; d < tt->shape.size(); ++d)
        fresh.push_back(Dim::Symbol(StrCat("_s", NextSymbol())));
      t = TensorType(fresh, tt->dtype);
    }
    Var np = MakeVar(p->name, t);
    rebind.Replace(p, np);
    params.push_back(np);
  }
  return Model::Create(MakeFunction(params, rebind.Mutate(body.body)), name);
}

// The dim of each output of `call` (its result, or each field of a tuple result) that its
// bounded form (OpDef::bounded_op) holds at the upper bound: the output's only value-decided
// dim, -1 for an output with none. Empty when the op has no bounded form, or when an output has
// more than one such dim.
std::vector<int> TrimmedDims(const CallNode& call, const Type& result) {
  if (call.op->bounded_op.empty()) return {};
  std::vector<Type> outputs = {result};
  if (const TupleTypeNode* tup = AsTuple(result)) outputs = tup->fields;
  std::vector<int> dims;
  for (const Type& out : outputs) {
    const TensorTypeNode* t = AsTensor(out);
    if (!t) return {};
    int dim = -1;
    for (size_t d = 0; d < t->shape.size(); ++d) {
      if (!TypeRelContext::IsUnknownDim(t->shape[d])) continue;
      if (dim >= 0) return {};
      dim = static_cast<int>(d);
    }
    dims.push_back(dim);
  }
  return dims;
}

}  // namespace

bool RunsAsLoop(const CallNode& call) {
  if (!call.op || call.op->name != kDynLoopOp || call.args.size() < 3) return false;
  const FunctionNode* body = AsFunction(call.args[0]);
  const TupleNode* ret = body ? AsTuple(body->body) : nullptr;
  if (!ret || ret->fields.empty()) return false;
  // Sequences exist only until specialization resolves them (ir/sequence.h): a loop that
  // carries one unrolls there.
  for (const Expr& f : ret->fields)
    if (SequenceElement(f->type)) return false;
  // A body that must itself run in segments cannot unroll into one graph.
  for (const Expr& e : PostOrder(body->body))
    if (const CallNode* c = AsCall(e);
        c && c->op &&
        (c->op->data_dependent_shape || RunsAsLoop(*c) || !ValueArgsFromData(*c).empty()))
      return true;
  // The body parameters that hold data: body parameter i >= 2 (a carried or captured value)
  // is call argument i - 1, data unless a constant; a carried value is data too once the body
  // computes its next value from data (carried parameter i is body output i - 1). A condition
  // that reads them cannot fold, so the loop cannot unroll.
  std::unordered_set<const ExprNode*> data;
  for (size_t i = 2; i < body->params.size() && i - 1 < call.args.size(); ++i)
    if (!AsConstant(call.args[i - 1])) data.insert(body->params[i].get());
  auto reads_data = [&data](const Expr& e) {
    for (const Expr& n : PostOrder(e))
      if (data.count(n.get())) return true;
    return false;
  };
  const size_t carried = static_cast<size_t>(call.attrs.GetInt("num_carried"));
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t k = 0; k < carried && 2 + k < body->params.size() && 1 + k < ret->fields.size();
         ++k)
      if (!data.count(body->params[2 + k].get()) && reads_data(ret->fields[1 + k]))
        grew = data.insert(body->params[2 + k].get()).second;
  }
  if (reads_data(ret->fields[0])) return true;
  const ConstantNode* trips = AsConstant(call.args[call.args.size() - 2]);
  if (trips)  // past what unrolls (a Loop without a trip count), or unrolled
    return trips->value.dtype() == DType::kInt64 && trips->value.numel() == 1 &&
           trips->value.data<int64_t>()[0] > kMaxUnrolledIterations;
  // A trip count known only at run time (an input, a sequence length): one body executable
  // serves every count, where unrolling would compile the body again for each new count (a
  // Scan over 1000 steps: 1000 copies). Unless the body's shapes follow the iteration number
  // or a carried value (a Slice at the iteration: they are value inputs of the body), which
  // would compile the body once per iteration: that loop unrolls at specialization instead.
  const Function fn = std::static_pointer_cast<const FunctionNode>(call.args[0]);
  for (int i : ValueInputs(fn))
    if (i == 0 || (i >= 2 && static_cast<size_t>(i) < 2 + carried)) return false;
  return true;
}

std::vector<Expr> ValueArgsFromData(const CallNode& call) {
  if (!call.op || call.op->static_op.empty()) return {};
  // Whether `v` reads, through any op but a shape-like one (those read types only, and fold at
  // specialization), a model input that cannot be a value input.
  auto from_data = [](const Expr& v) {
    std::vector<Expr> stack = {v};
    std::unordered_set<const ExprNode*> seen;
    while (!stack.empty()) {
      Expr e = stack.back();
      stack.pop_back();
      if (!seen.insert(e.get()).second) continue;
      if (AsVar(e)) {
        const TensorTypeNode* t = AsTensor(e->type);
        if (!t || !IsConstShape(t->shape)) return true;
        int64_t n = 1;
        for (int64_t d : ConstShape(t->shape)) n *= d;
        if (n > kMaxValueInputElements) return true;
        continue;
      }
      PushValueSources(e, stack);
    }
    return false;
  };
  std::vector<Expr> out;
  bool any = false;
  for (size_t i = FirstValueArg(call); i < call.args.size(); ++i) {
    const Expr& a = call.args[i];
    // A model input itself is a value input by design (checked for size when it runs).
    if (AsConstant(a) || AsVar(a)) continue;
    out.push_back(a);
    any = any || from_data(a);
  }
  return any ? out : std::vector<Expr>{};
}

std::shared_ptr<const Segments> SplitAtDataDependentOp(const Function& graph,
                                                       const std::string& name) {
  std::vector<Expr> order = PostOrder(graph->body);
  // The cut: a data-dependent op or a loop that runs as one (the host step, whose outputs the
  // rest receives), or the value arguments of a dynamic op computed from data (no step: the
  // rest receives them as value inputs and specializes on them: a branch on data to the taken
  // branch, a TopK to its k).
  Expr cut;  // the step's call; null for values from data
  const CallNode* call = nullptr;
  std::vector<int> trim_dims;  // the op runs in the head as its bounded form, trimmed along these
  std::vector<Expr> inputs;    // what the head computes for the step (or the rest)
  for (const Expr& e : order) {
    const CallNode* c = AsCall(e);
    if (!c || !c->op) continue;
    if (c->op->data_dependent_shape || RunsAsLoop(*c)) {
      cut = e;
      call = c;
      const size_t first = c->op->name == kDynLoopOp ? 1 : 0;
      inputs.assign(c->args.begin() + static_cast<std::ptrdiff_t>(first), c->args.end());
      // An op with a compiled bounded form: the head computes that (its result at the upper
      // bound and the count), and the host only trims.
      if (std::vector<int> dims = TrimmedDims(*c, e->type); !dims.empty()) {
        std::vector<Type> arg_types;
        for (const Expr& a : c->args) arg_types.push_back(a->type);
        const Type t = InferOpType(c->op->bounded_op, arg_types, c->attrs);
        Expr bounded = WithType(MakeCall(c->op->bounded_op, c->args, c->attrs, c->name), t);
        const TupleTypeNode* fields = AsTuple(t);
        if (!fields || fields->fields.size() != dims.size() + 1)
          Throw(ErrorCode::kInternal, c->op->bounded_op, " must return one result per output of ",
                c->op->name, " and the count");
        inputs.clear();
        for (size_t i = 0; i < fields->fields.size(); ++i)
          inputs.push_back(
              WithType(MakeTupleGetItem(bounded, static_cast<int>(i)), fields->fields[i]));
        trim_dims = std::move(dims);
      }
      break;
    }
    if (std::vector<Expr> values = ValueArgsFromData(*c); !values.empty()) {
      inputs = std::move(values);
      break;
    }
  }
  if (inputs.empty()) return nullptr;

  // The head: everything the step's inputs are computed from (shared values the rest reads
  // too cross as head outputs). The rest computes the other nodes.
  std::unordered_set<const ExprNode*> head;
  for (const Expr& in : inputs)
    for (const Expr& e : PostOrder(in)) head.insert(e.get());
  // A tuple crosses as its fields: an item taken from a head tuple is computed in the head.
  for (const Expr& e : order)
    if (const TupleGetItemNode* g = AsTupleGetItem(e); g && head.count(g->tuple.get()))
      head.insert(e.get());

  std::unordered_map<const ExprNode*, int> param_index;
  for (size_t i = 0; i < graph->params.size(); ++i)
    param_index[graph->params[i].get()] = static_cast<int>(i);
  std::vector<Expr> head_values;
  std::unordered_map<const ExprNode*, int> head_index;
  auto source_of = [&](const Expr& v) {
    Segments::Source s;
    if (auto it = param_index.find(v.get()); it != param_index.end()) {
      s.kind = Segments::Source::Kind::kInput;
      s.index = it->second;
    } else if (const ConstantNode* k = AsConstant(v)) {
      s.kind = Segments::Source::Kind::kConstant;
      s.constant = k->value;
    } else {
      auto [it, fresh] = head_index.emplace(v.get(), static_cast<int>(head_values.size()));
      if (fresh) head_values.push_back(v);
      s.kind = Segments::Source::Kind::kHead;
      s.index = it->second;
    }
    return s;
  };

  auto seg = std::make_shared<Segments>();
  if (call) {
    seg->op = call->op;
    seg->attrs = call->attrs;
    seg->node = DescribeNode(cut);
    seg->trim_dims = trim_dims;
    if (call->op->name == kDynLoopOp) {
      const FunctionNode* body = AsFunction(call->args.at(0));
      if (!body)
        Throw(ErrorCode::kUnsupported, "model '", name, "': ", seg->node,
              ": the body is not a function");
      std::string base = call->name.empty() ? "loop" : call->name;
      seg->loop_body =
          LoopBodyModel(*body, call->attrs.GetInt("num_carried"), StrCat(name, ".", base, ".body"));
    }
    for (const Expr& a : inputs) {
      if (!AsTensor(a->type))
        Throw(ErrorCode::kUnsupported, "model '", name, "': ", seg->node, ": argument of type ",
              TypeToString(a->type), " (a data-dependent op takes tensors)");
      seg->op_args.push_back(source_of(a));
    }
  }

  // The rest's parameters: what it reads from the head or the model inputs (constants and
  // function values stay in it), in order of first use, then the step's outputs.
  CutMutator mutator;
  std::vector<Var> rest_params;
  std::unordered_set<const ExprNode*> read;
  for (const Expr& e : order) {
    if (head.count(e.get()) || e == cut) continue;
    for (const Expr& v : Operands(e)) {
      if (v == cut || AsConstant(v) || AsFunction(v) || !read.insert(v.get()).second) continue;
      const bool input = param_index.count(v.get()) > 0;
      if (!input && !head.count(v.get())) continue;  // computed in the rest
      Segments::Source s = source_of(v);
      Var p;
      if (input) {
        p = graph->params[s.index];  // the same variable: its uses need no rewrite
      } else {
        std::string what = StrCat("model '", name, "': ", DescribeNode(v));
        p = MakeVar(StrCat("head_", s.index), SegmentParamType(v->type, what));
        mutator.Replace(v, p);
      }
      rest_params.push_back(p);
      seg->rest_args.push_back(s);
    }
  }
  if (call) {
    std::string base = call->name.empty() ? call->op->name : call->name;
    auto op_output = [&](int i, const Type& t) {
      Var p = MakeVar(StrCat(base, "_", i), SegmentParamType(t, seg->node));
      rest_params.push_back(p);
      Segments::Source s;
      s.kind = Segments::Source::Kind::kOp;
      s.index = i;
      seg->rest_args.push_back(s);
      return p;
    };
    if (const TupleTypeNode* tup = AsTuple(cut->type)) {
      std::vector<Expr> fields;
      for (size_t i = 0; i < tup->fields.size(); ++i)
        fields.push_back(op_output(static_cast<int>(i), tup->fields[i]));
      mutator.Replace(cut, MakeTuple(std::move(fields)));
    } else {
      mutator.Replace(cut, op_output(0, cut->type));
    }
  }
  Expr rest_body = mutator.Mutate(graph->body);
  if (!head_values.empty())
    seg->head = Model::Create(MakeFunction(graph->params, MakeTuple(head_values)), name + ".head");
  seg->rest = Model::Create(MakeFunction(rest_params, rest_body), name + ".rest");
  return seg;
}

}  // namespace kiln
