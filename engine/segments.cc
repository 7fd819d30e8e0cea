#include "engine/segments.h"

#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "engine/model.h"
#include "ir/error.h"
#include "ir/type_infer.h"
#include "ir/visitor.h"

namespace kiln {

namespace {

bool IsDataDependentCall(const Expr& e) {
  const CallNode* c = AsCall(e);
  return c && c->op && c->op->data_dependent_shape;
}

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

// The type of a segment parameter that carries a value typed `t` in the whole graph: constant
// dims and the model's own symbols stay (they bind as the model's inputs bind them, and must
// agree); any other dim (an expression of symbols, or one that only values decide) becomes a
// fresh symbol, which the tensor passed at run time binds.
Type SegmentParamType(const Type& t, const std::string& what) {
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt)
    Throw(ErrorCode::kUnsupported, what, " of type ", TypeToString(t),
          " would cross a segment boundary (only tensors do)");
  static std::atomic<int64_t> next{0};
  Shape shape;
  for (const Dim& d : tt->shape) {
    const bool keep = d.is_const() || (d.is_symbol() && !TypeRelContext::IsUnknownDim(d));
    shape.push_back(keep ? d : Dim::Symbol(StrCat("_s", next.fetch_add(1))));
  }
  return TensorType(shape, tt->dtype);
}

// Rewrites the graph past the cut: the values it reads from before the cut, and the cut call,
// become the rest's parameters (seeded in the memo, so the mutator never descends into the
// head).
class CutMutator : public ExprMutator {
 public:
  void Replace(const Expr& from, Expr to) { memo_[from.get()] = std::move(to); }
};

}  // namespace

std::shared_ptr<const Segments> SplitAtDataDependentOp(const Function& graph,
                                                       const std::string& name) {
  std::vector<Expr> order = PostOrder(graph->body);
  Expr cut;
  for (const Expr& e : order)
    if (IsDataDependentCall(e)) {
      cut = e;
      break;
    }
  if (!cut) return nullptr;
  // The nodes downstream of the cut (itself included): the rest.
  std::unordered_set<const ExprNode*> rest;
  for (const Expr& e : order) {
    bool downstream = e == cut;
    for (const Expr& op : Operands(e)) downstream = downstream || rest.count(op.get()) > 0;
    if (downstream) rest.insert(e.get());
  }

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
  const CallNode* call = AsCall(cut);
  seg->op = call->op;
  seg->attrs = call->attrs;
  seg->node = DescribeNode(cut);
  for (const Expr& a : call->args) {
    if (!AsTensor(a->type))
      Throw(ErrorCode::kUnsupported, "model '", name, "': ", seg->node, ": argument of type ",
            TypeToString(a->type), " (a data-dependent op takes tensors)");
    seg->op_args.push_back(source_of(a));
  }

  // The rest's parameters: what it reads from before the cut (model inputs, head values; the
  // constants and function values stay in it), in order of first use, then the cut's outputs.
  CutMutator mutator;
  std::vector<Var> rest_params;
  std::unordered_set<const ExprNode*> read;
  for (const Expr& e : order) {
    if (!rest.count(e.get()) || e == cut) continue;
    for (const Expr& v : Operands(e)) {
      if (rest.count(v.get()) || AsConstant(v) || AsFunction(v) || !read.insert(v.get()).second)
        continue;
      Segments::Source s = source_of(v);
      Var p;
      if (s.kind == Segments::Source::Kind::kInput) {
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
  Expr rest_body = mutator.Mutate(graph->body);
  if (!head_values.empty())
    seg->head = Model::Create(MakeFunction(graph->params, MakeTuple(head_values)), name + ".head");
  seg->rest = Model::Create(MakeFunction(rest_params, rest_body), name + ".rest");
  return seg;
}

}  // namespace kiln
