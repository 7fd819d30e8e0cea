// The ONNX importer's graph walk (import_graph.h): topological order with subgraphs' implicit
// inputs, and node conversion with If, Loop, Scan and SequenceMap, whose subgraphs are converted in
// scopes that see the enclosing values.
#include "api/onnx/import_graph.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ir/dynamic.h"
#include "ir/sequence.h"

namespace kiln::onnx_import {

std::string Quoted(const std::string& s) {
  return StrCat("'", s, "'");
}

std::string NodeLabel(const onnx::NodeProto& node, int index) {
  return node.name().empty() ? StrCat(node.op_type(), "_", index) : node.name();
}

namespace {

// The names a subgraph (an If branch) reads from the scopes around it: what its nodes, and
// their own subgraphs, use that it does not define (its inputs, initializers, node outputs).
void FreeNames(const onnx::GraphProto& g, std::unordered_set<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const onnx::ValueInfoProto& v : g.input()) defined.insert(v.name());
  for (const onnx::TensorProto& t : g.initializer()) defined.insert(t.name());
  for (const onnx::NodeProto& node : g.node())
    for (const std::string& o : node.output()) defined.insert(o);
  std::unordered_set<std::string> used;
  for (const onnx::NodeProto& node : g.node()) {
    for (const std::string& in : node.input()) used.insert(in);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) FreeNames(a.g(), used);
      for (const onnx::GraphProto& sub : a.graphs()) FreeNames(sub, used);
    }
  }
  for (const onnx::ValueInfoProto& o : g.output()) used.insert(o.name());
  for (const std::string& name : used)
    if (!name.empty() && !defined.count(name)) out.insert(name);
}

// What a node uses: its inputs and the free names of its subgraphs (implicit inputs).
std::vector<std::string> NodeUses(const onnx::NodeProto& node) {
  std::vector<std::string> uses(node.input().begin(), node.input().end());
  std::unordered_set<std::string> free;
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g()) FreeNames(a.g(), free);
    for (const onnx::GraphProto& sub : a.graphs()) FreeNames(sub, free);
  }
  uses.insert(uses.end(), free.begin(), free.end());
  return uses;
}

}  // namespace

std::vector<int> TopologicalOrder(const onnx::GraphProto& graph,
                                  const std::function<bool(const std::string&)>& enclosing) {
  const int n = graph.node_size();
  std::unordered_set<std::string> outer;
  for (const onnx::ValueInfoProto& v : graph.input()) outer.insert(v.name());
  for (const onnx::TensorProto& t : graph.initializer()) outer.insert(t.name());
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (out.empty()) continue;
      if (outer.count(out))
        Throw(ErrorCode::kInvalidArgument, "node ", Quoted(NodeLabel(graph.node(i), i)), " (",
              graph.node(i).op_type(), ") redefines graph input or initializer ", Quoted(out));
      auto [it, fresh] = producer.emplace(out, i);
      if (!fresh)
        Throw(ErrorCode::kInvalidArgument, "value ", Quoted(out), " is produced by two nodes, ",
              Quoted(NodeLabel(graph.node(it->second), it->second)), " and ",
              Quoted(NodeLabel(graph.node(i), i)));
    }
  }
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : NodeUses(graph.node(i))) {
      if (in.empty() || outer.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end()) {
        if (enclosing && enclosing(in)) continue;
        Throw(ErrorCode::kInvalidArgument, "node ", Quoted(NodeLabel(graph.node(i), i)), " (",
              graph.node(i).op_type(), ") uses undefined value ", Quoted(in));
      }
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  // Kahn's algorithm, always taking the lowest ready index so the order is deterministic.
  std::vector<int> order;
  order.reserve(n);
  std::vector<int> ready;
  for (int i = n - 1; i >= 0; --i)
    if (pending[i] == 0) ready.push_back(i);
  auto cmp = [](int a, int b) { return a > b; };
  std::make_heap(ready.begin(), ready.end(), cmp);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), cmp);
    int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) {
        ready.push_back(u);
        std::push_heap(ready.begin(), ready.end(), cmp);
      }
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0)
        Throw(ErrorCode::kInvalidArgument, "the graph has a cycle through node ",
              Quoted(NodeLabel(graph.node(i), i)), " (", graph.node(i).op_type(), ")");
  }
  return order;
}

namespace {

Tensor ConstantValue(const onnx::NodeProto& node, const std::string& label,
                     const std::string& base_dir) {
  const std::string what = StrCat("Constant node ", Quoted(label));
  if (node.attribute_size() != 1)
    Throw(ErrorCode::kInvalidArgument, what, ": expected exactly one value attribute");
  const onnx::AttributeProto& a = node.attribute(0);
  if (a.name() == "value") return TensorFromProto(a.t(), base_dir, what);
  if (a.name() == "value_float") return Tensor::Scalar<float>(a.f());
  if (a.name() == "value_int") return Tensor::Scalar<int64_t>(a.i());
  if (a.name() == "value_floats")
    return Tensor::FromVector<float>({a.floats_size()},
                                     std::vector<float>(a.floats().begin(), a.floats().end()));
  if (a.name() == "value_ints")
    return Tensor::FromVector<int64_t>({a.ints_size()},
                                       std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  Throw(ErrorCode::kUnsupported, what, ": attribute '", a.name(), "' is not supported");
}

// Converts nodes to graph IR calls, into `values` (name -> value; a subgraph starts from a copy
// of its enclosing scope's, so it reads outer values and its own names shadow them).
struct GraphConverter {
  const onnx::ModelProto& model;
  int64_t opset;
  const std::string& base_dir;
  TypeCache* types;

  // The nodes of `graph` in `order`, labelled by `labels` (in that order).
  void Convert(const onnx::GraphProto& graph, const std::vector<int>& order,
               const std::vector<std::string>& labels,
               std::unordered_map<std::string, Expr>& values) {
    for (size_t k = 0; k < order.size(); ++k) {
      const onnx::NodeProto& node = graph.node(order[k]);
      const std::string& label = labels[k];
      std::vector<Expr> outs;
      if (!node.domain().empty() && node.domain() != "ai.onnx") {
        // Each node's semantics come from its own domain's opset; kiln maps the default
        // domain's ops only, so any other domain's node is refused whatever its version.
        int64_t version = -1;
        for (const onnx::OperatorSetIdProto& id : model.opset_import())
          if (id.domain() == node.domain()) version = id.version();
        Throw(ErrorCode::kUnsupported, "unsupported ONNX op '", node.domain(), ".", node.op_type(),
              "' (node ", Quoted(label), ", domain opset ", version,
              "; kiln imports only the default domain)");
      } else if (node.op_type() == "Constant") {
        outs.push_back(MakeConstant(ConstantValue(node, label, base_dir), label));
      } else if (node.op_type() == "If") {
        outs = ConvertIf(node, label, values);
      } else if (node.op_type() == "Loop") {
        outs = ConvertLoop(node, label, values);
      } else if (node.op_type() == "Scan") {
        outs = ConvertScan(node, label, values);
      } else if (node.op_type() == "SequenceMap") {
        outs = ConvertSequenceMap(node, label, values);
      } else {
        OpConverter op = FindConverter(node.op_type());
        if (!op.convert)
          Throw(ErrorCode::kUnsupported, "unsupported ONNX op '", node.op_type(), "' (node ",
                Quoted(label), ", opset ", opset, ")");
        if (opset < op.oldest_opset)
          Throw(ErrorCode::kUnsupported, "unsupported ONNX op '", node.op_type(), "' (node ",
                Quoted(label), ", opset ", opset, "): kiln implements its semantics from opset ",
                op.oldest_opset, " on");
        std::vector<Expr> ins;
        for (const std::string& in : node.input())
          ins.push_back(in.empty() ? nullptr : values.at(in));  // defined: TopologicalOrder
        NodeContext ctx(node, std::move(ins), label, opset, types);
        outs = op.convert(ctx);
      }
      for (int i = 0; i < node.output_size(); ++i) {
        if (node.output(i).empty()) continue;
        if (i >= static_cast<int>(outs.size()) || !outs[i])
          Throw(ErrorCode::kUnsupported, "ONNX op '", node.op_type(), "' (node ", Quoted(label),
                ", opset ", opset, "): output ", i, " is not supported");
        values[node.output(i)] = outs[i];
      }
    }
  }

  // The graph attribute `name` of a node (If's branches, Loop's and Scan's body).
  static const onnx::GraphProto& GraphAttr(const onnx::NodeProto& node, const std::string& label,
                                           const char* name) {
    for (const onnx::AttributeProto& a : node.attribute())
      if (a.name() == name && a.has_g()) return a.g();
    Throw(ErrorCode::kInvalidArgument, node.op_type(), " node ", Quoted(label), " has no ", name,
          " attribute (a graph)");
  }

  // The outputs of subgraph `g` (`which` of node `label`) converted once, in a scope that sees
  // `values` and binds g's inputs to `inputs`; `outputs` of them are expected.
  std::vector<Expr> Subgraph(const onnx::NodeProto& node, const std::string& label,
                             const char* which, const std::unordered_map<std::string, Expr>& values,
                             const std::vector<Expr>& inputs, int outputs) {
    const onnx::GraphProto& g = GraphAttr(node, label, which);
    const std::string where = StrCat(node.op_type(), " node ", Quoted(label));
    if (g.input_size() != static_cast<int>(inputs.size()))
      Throw(ErrorCode::kInvalidArgument, where, ": its ", which, " has ", g.input_size(),
            " inputs, ", inputs.size(), " expected");
    if (g.output_size() != outputs)
      Throw(ErrorCode::kInvalidArgument, where, ": its ", which, " has ", g.output_size(),
            " outputs, ", outputs, " expected");
    std::unordered_map<std::string, Expr> scope = values;
    for (int i = 0; i < g.input_size(); ++i) scope[g.input(i).name()] = inputs[i];
    for (const onnx::TensorProto& init : g.initializer())
      scope[init.name()] = MakeConstant(TensorFromProto(init, base_dir,
                                                        StrCat("initializer ", Quoted(init.name()),
                                                               " of ", which, " of ", where)),
                                        init.name());
    std::vector<int> order;
    try {
      order = TopologicalOrder(g, [&values](const std::string& n) { return values.count(n) > 0; });
    } catch (const Error& e) {
      throw Error(e.code(), StrCat(where, ", ", which, ": ", e.what()));
    }
    std::vector<std::string> labels;
    for (int i : order) labels.push_back(NodeLabel(g.node(i), i));
    Convert(g, order, labels, scope);
    std::vector<Expr> outs;
    for (const onnx::ValueInfoProto& o : g.output()) {
      auto it = scope.find(o.name());
      if (it == scope.end())
        Throw(ErrorCode::kInvalidArgument, where, ": output ", Quoted(o.name()), " of its ", which,
              " is not defined");
      outs.push_back(it->second);
    }
    return outs;
  }

  std::vector<Expr> Branch(const onnx::NodeProto& node, const std::string& label, const char* which,
                           const std::unordered_map<std::string, Expr>& values) {
    return Subgraph(node, label, which, values, {}, node.output_size());
  }

  // The per-iteration values `parts` of one scan output stacked along `axis` (negative: from
  // the end of the stacked rank).
  Expr Stack(const std::vector<Expr>& parts, int64_t axis, const std::string& name) {
    const int rank = AsTensor(types->TypeOf(parts.at(0)))->ndim() + 1;
    if (axis < -rank || axis >= rank)
      Throw(ErrorCode::kInvalidArgument, "node ", Quoted(name), ": scan output axis ", axis,
            " is out of range for rank ", rank);
    return StackIterations(parts, axis < 0 ? axis + rank : axis, name);
  }

  // Loop, unrolled at import when its trip count is a constant (at most kMaxUnrolledIterations)
  // and its condition constant (or passed through by the body), so the iterations are known
  // when the model loads; otherwise a dyn.loop, unrolled at specialization or run as a loop. Each
  // iteration is the body converted again with the iteration number, the condition and the
  // loop-carried values bound; scan outputs stack the iterations' values along axis 0.
  std::vector<Expr> ConvertLoop(const onnx::NodeProto& node, const std::string& label,
                                const std::unordered_map<std::string, Expr>& values) {
    const std::string where = StrCat("Loop node ", Quoted(label));
    auto input = [&](int i) -> Expr {
      return i < node.input_size() && !node.input(i).empty() ? values.at(node.input(i)) : nullptr;
    };
    const int carried = node.input_size() - 2;
    const int scans = node.output_size() - std::max(carried, 0);
    if (carried < 0 || scans < 0)
      Throw(ErrorCode::kInvalidArgument, where, ": ", node.input_size(), " inputs and ",
            node.output_size(), " outputs (want M, cond, the N carried values; N + K outputs)");
    Expr trip = input(0), cond = input(1);
    // No trip count (a while loop): as many as the condition allows. A dyn.loop with a trip
    // count past kMaxUnrolledIterations runs as a loop (engine/segments.h).
    if (!trip)
      trip = MakeConstant(Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::max()),
                          StrCat(label, ":trips"));
    const ConstantNode* m = AsConstant(trip);
    if (!m || (cond && !AsConstant(cond))) return DynamicLoop(node, label, values, trip, cond);
    const int64_t count =
        std::get<int64_t>(AttrFromTensor(m->value, AttrKind::kInt, StrCat(where, ": trip count")));
    if (count > kMaxUnrolledIterations) return DynamicLoop(node, label, values, trip, cond);
    // A body condition computed from the iteration's values: the loop unrolls at
    // specialization instead, where it may fold.
    struct NotConstant {};
    auto constant_cond = [&](const Expr& c, const char* what) {
      const ConstantNode* k = c ? AsConstant(c) : nullptr;
      if (c && !k) throw NotConstant{};
      return !k ||
             std::get<bool>(AttrFromTensor(k->value, AttrKind::kBool, StrCat(where, ": ", what)));
    };
    std::vector<Expr> state;
    for (int i = 0; i < carried; ++i) state.push_back(input(2 + i));
    std::vector<std::vector<Expr>> parts(scans);
    const Expr yes = MakeConstant(Tensor::Scalar<bool>(true), StrCat(label, ":cond"));
    try {
      for (int64_t t = 0; t < count && constant_cond(cond, "condition"); ++t) {
        std::vector<Expr> in = {MakeConstant(Tensor::Scalar<int64_t>(t), StrCat(label, ":iter")),
                                yes};
        in.insert(in.end(), state.begin(), state.end());
        std::vector<Expr> outs = Subgraph(node, label, "body", values, in, 1 + carried + scans);
        cond = outs[0];
        state.assign(outs.begin() + 1, outs.begin() + 1 + carried);
        for (int k = 0; k < scans; ++k) parts[k].push_back(outs[1 + carried + k]);
      }
    } catch (const NotConstant&) {
      return DynamicLoop(node, label, values, trip, input(1));
    }
    std::vector<Expr> results = state;
    for (int k = 0; k < scans; ++k) {
      if (parts[k].empty())
        Throw(ErrorCode::kUnsupported, where, ": it runs no iteration, and its scan output ", k,
              " would be empty with a shape kiln cannot tell");
      results.push_back(Stack(parts[k], 0, label));
    }
    return results;
  }

  // The first parameters of a dyn.loop body function: the iteration number and the condition.
  static std::vector<Var> LoopHead(const std::string& label) {
    return {MakeVar(StrCat(label, ":iter"), TensorType({}, DType::kInt64)),
            MakeVar(StrCat(label, ":cond"), TensorType({}, DType::kBool))};
  }

  // The outer values body `g` reads become parameters of its function (in name order), so it
  // has no free variables: `scope` maps their names to the parameters, `args` gets the values.
  void Capture(const onnx::GraphProto& g, const std::unordered_map<std::string, Expr>& values,
               std::unordered_map<std::string, Expr>& scope, std::vector<Var>& params,
               std::vector<Expr>& args) {
    std::unordered_set<std::string> free;
    FreeNames(g, free);
    std::vector<std::string> captured;
    for (const std::string& name : free)
      if (values.count(name)) captured.push_back(name);
    std::sort(captured.begin(), captured.end());
    for (const std::string& name : captured) {
      Var v = MakeVar(name, types->TypeOf(values.at(name)));
      scope[name] = v;
      params.push_back(v);
      args.push_back(values.at(name));
    }
  }

  // A Scan's inputs (the states, then the scan inputs) and its per-input and per-output axes
  // and directions, normalized.
  struct ScanSpec {
    std::vector<Expr> ins;
    int64_t states;
    std::vector<int64_t> axes, in_dirs, out_axes, out_dirs;
  };

  // Loop as dyn.loop (ir/dynamic.h), unrolled at specialization: the body becomes a function of
  // the iteration number, the condition, the carried values and the outer values it reads
  // (captured: passed as arguments, so the function has no free variables).
  std::vector<Expr> DynamicLoop(const onnx::NodeProto& node, const std::string& label,
                                const std::unordered_map<std::string, Expr>& values,
                                const Expr& trip, const Expr& cond) {
    const int carried = node.input_size() - 2;
    const int scans = node.output_size() - carried;
    std::vector<Var> params = LoopHead(label);
    std::vector<Expr> args = {nullptr};
    for (int k = 0; k < carried; ++k) {
      Expr init = values.at(node.input(2 + k));
      params.push_back(MakeVar(StrCat(label, ":", node.input(2 + k)), types->TypeOf(init)));
      args.push_back(init);
    }
    std::unordered_map<std::string, Expr> scope = values;
    Capture(GraphAttr(node, label, "body"), values, scope, params, args);
    std::vector<Expr> body_in(params.begin(), params.begin() + 2 + carried);
    std::vector<Expr> outs = Subgraph(node, label, "body", scope, body_in, 1 + carried + scans);
    args[0] = MakeFunction(params, MakeTuple(outs));
    args.push_back(trip);
    args.push_back(cond ? cond : MakeConstant(Tensor::Scalar<bool>(true), StrCat(label, ":cond")));
    Expr loop =
        MakeCall(kDynLoopOp, args,
                 Attrs{{"num_carried", int64_t{carried}}, {"num_scans", int64_t{scans}}}, label);
    std::vector<Expr> results;
    for (int i = 0; i < carried + scans; ++i) results.push_back(MakeTupleGetItem(loop, i));
    return results;
  }

  // SequenceMap as the loop it stands for, a dyn.loop over the first sequence's length,
  // unrolled at specialization (ir/sequence.h): iteration t runs the body on element t of each
  // sequence input (a tensor input as it is) and appends each body output to its output
  // sequence, carried from an empty one.
  std::vector<Expr> ConvertSequenceMap(const onnx::NodeProto& node, const std::string& label,
                                       const std::unordered_map<std::string, Expr>& values) {
    const std::string where = StrCat("SequenceMap node ", Quoted(label));
    if (node.input_size() < 1 || node.input(0).empty())
      Throw(ErrorCode::kInvalidArgument, where, ": it needs an input sequence");
    std::vector<Var> head = LoopHead(label), captured;
    std::vector<Expr> args, body_in;
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i).empty())
        Throw(ErrorCode::kInvalidArgument, where, ": input ", i, " is omitted");
      const Expr& in = values.at(node.input(i));
      Var p = MakeVar(StrCat(label, ":in", i), types->TypeOf(in));
      if (i == 0 && !SequenceElement(p->type))
        Throw(ErrorCode::kInvalidArgument, where, ": input 0 must be a sequence, is ",
              TypeToString(p->type));
      captured.push_back(p);
      args.push_back(in);
      body_in.push_back(SequenceElement(p->type)
                            ? MakeCall("dyn.seq.at", {p, head[0]}, {}, StrCat(label, ":at", i))
                            : Expr(p));
    }
    std::unordered_map<std::string, Expr> scope = values;
    Capture(GraphAttr(node, label, "body"), values, scope, captured, args);
    std::vector<Expr> outs = Subgraph(node, label, "body", scope, body_in, node.output_size());
    std::vector<Var> carried;
    std::vector<Expr> init, next = {MakeConstant(Tensor::Scalar<bool>(true), label)};
    for (size_t m = 0; m < outs.size(); ++m) {
      const TensorTypeNode* t = AsTensor(types->TypeOf(outs[m]));
      if (!t) Throw(ErrorCode::kUnsupported, where, ": body output ", m, " is not a tensor");
      init.push_back(
          MakeCall("seq.empty", {}, Attrs{{"dtype", t->dtype}}, StrCat(label, ":out", m)));
      carried.push_back(MakeVar(StrCat(label, ":out", m), types->TypeOf(init.back())));
      next.push_back(MakeCall("seq.insert", {carried.back(), outs[m]}, {}, label));
    }
    std::vector<Var> params = head;
    params.insert(params.end(), carried.begin(), carried.end());
    params.insert(params.end(), captured.begin(), captured.end());
    std::vector<Expr> loop_args = {MakeFunction(params, MakeTuple(next))};
    loop_args.insert(loop_args.end(), init.begin(), init.end());
    loop_args.insert(loop_args.end(), args.begin(), args.end());
    loop_args.push_back(MakeCall("seq.length", {args[0]}, {}, StrCat(label, ":length")));
    loop_args.push_back(MakeConstant(Tensor::Scalar<bool>(true), StrCat(label, ":cond")));
    const int64_t n = static_cast<int64_t>(outs.size());
    Expr loop = MakeCall(kDynLoopOp, loop_args,
                         Attrs{{"num_carried", n}, {"num_scans", int64_t{0}}}, label);
    std::vector<Expr> results;
    for (int64_t m = 0; m < n; ++m) results.push_back(MakeTupleGetItem(loop, m));
    return results;
  }

  // Scan over a symbolic length as dyn.loop, unrolled at specialization: the trip count is the
  // first scan input's length (folded from shapes), the scan inputs are captured, and the body
  // function reads iteration t's slice of each (from the end for a reverse direction). dyn.loop
  // stacks along a new axis 0 (in reverse for a reverse output); another output axis is a
  // transpose after it.
  std::vector<Expr> ScanAsLoop(const onnx::NodeProto& node, const std::string& label,
                               const std::unordered_map<std::string, Expr>& values,
                               const ScanSpec& spec) {
    const auto& [ins, states, axes, in_dirs, out_axes, out_dirs] = spec;
    const std::string where = StrCat("Scan node ", Quoted(label));
    const int64_t k_in = static_cast<int64_t>(ins.size()) - states;
    const int64_t k_out = node.output_size() - states;
    // The length of scan input `x` along `axis`, as an i64 scalar (folds from shapes).
    auto length_of = [&](const Expr& x, int64_t axis) {
      return MakeCall("squeeze",
                      {MakeCall("shape", {x}, Attrs{{"start", axis}, {"end", axis + 1}}, label)},
                      Attrs{{"axes", std::vector<int64_t>{0}}}, label);
    };
    std::vector<Var> params = LoopHead(label);
    std::vector<Expr> args = {nullptr};
    for (int64_t k = 0; k < states; ++k) {
      params.push_back(MakeVar(StrCat(label, ":state", k), types->TypeOf(ins[k])));
      args.push_back(ins[k]);
    }
    std::vector<Expr> slices;
    for (int64_t j = 0; j < k_in; ++j) {
      const Expr& x = ins[states + j];
      Var v = MakeVar(StrCat(label, ":scan", j), types->TypeOf(x));
      params.push_back(v);
      args.push_back(x);
      Expr at = params[0];
      if (in_dirs[j])
        at = MakeCall(
            "sub",
            {MakeCall("sub",
                      {length_of(v, axes[j]), MakeConstant(Tensor::Scalar<int64_t>(1), label)}, {},
                      label),
             at},
            {}, label);
      slices.push_back(MakeCall("gather", {v, at}, Attrs{{"axis", axes[j]}}, label));
    }
    std::unordered_map<std::string, Expr> scope = values;
    Capture(GraphAttr(node, label, "body"), values, scope, params, args);
    std::vector<Expr> body_in(params.begin() + 2, params.begin() + 2 + states);
    body_in.insert(body_in.end(), slices.begin(), slices.end());
    std::vector<Expr> outs = Subgraph(node, label, "body", scope, body_in, states + k_out);
    outs.insert(outs.begin(), MakeConstant(Tensor::Scalar<bool>(true), StrCat(label, ":cond")));
    args[0] = MakeFunction(params, MakeTuple(outs));
    args.push_back(length_of(ins[states], axes[0]));
    args.push_back(MakeConstant(Tensor::Scalar<bool>(true), StrCat(label, ":cond")));
    Expr loop = MakeCall(kDynLoopOp, args,
                         Attrs{{"num_carried", int64_t{states}},
                               {"num_scans", int64_t{k_out}},
                               {"scan_reverse", out_dirs}},
                         label);
    std::vector<Expr> results;
    for (int64_t i = 0; i < states; ++i) results.push_back(MakeTupleGetItem(loop, i));
    for (int64_t k = 0; k < k_out; ++k) {
      Expr stacked = MakeTupleGetItem(loop, states + k);
      const int rank = AsTensor(types->TypeOf(outs[1 + states + k]))->ndim() + 1;
      int64_t axis = out_axes[k] < 0 ? out_axes[k] + rank : out_axes[k];
      if (axis < 0 || axis >= rank)
        Throw(ErrorCode::kInvalidArgument, where, ": scan output axis ", out_axes[k],
              " is out of range for rank ", rank);
      if (axis != 0) {  // [t, d0, d1, ...] -> the iteration dim at `axis`
        std::vector<int64_t> perm;
        for (int64_t d = 1; d < rank; ++d) {
          if (d - 1 == axis) perm.push_back(0);
          perm.push_back(d);
        }
        if (axis == rank - 1) perm.push_back(0);
        stacked = MakeCall("transpose", {stacked}, Attrs{{"perm", perm}}, label);
      }
      results.push_back(stacked);
    }
    return results;
  }

  // Scan (opset 9 on), unrolled at import over its sequence length, which must be a constant
  // dim then: each iteration binds the state and the iteration's slice of every scan input
  // (along its axis, from the end in reverse), and each scan output stacks the iterations'
  // values along its axis (reversed for a reverse direction).
  std::vector<Expr> ConvertScan(const onnx::NodeProto& node, const std::string& label,
                                const std::unordered_map<std::string, Expr>& values) {
    const std::string where = StrCat("Scan node ", Quoted(label));
    if (opset < 9) return ScanOpset8(node, label, values);
    std::vector<Expr> ins;
    for (const std::string& in : node.input()) ins.push_back(in.empty() ? nullptr : values.at(in));
    NodeContext attrs(node, ins, label, opset, types);
    const int64_t k_in = attrs.Int("num_scan_inputs");
    const int64_t states = static_cast<int64_t>(ins.size()) - k_in;
    const int64_t k_out = node.output_size() - states;
    if (k_in < 1 || states < 0 || k_out < 0)
      Throw(ErrorCode::kInvalidArgument, where, ": num_scan_inputs ", k_in, " with ", ins.size(),
            " inputs and ", node.output_size(), " outputs");
    auto per = [&](const char* name, int64_t n) {
      std::vector<int64_t> v = attrs.Ints(name, std::vector<int64_t>(n, 0));
      if (static_cast<int64_t>(v.size()) != n)
        Throw(ErrorCode::kInvalidArgument, where, ": ", name, " has ", v.size(), " values, ", n,
              " expected");
      return v;
    };
    const std::vector<int64_t> in_axes = per("scan_input_axes", k_in),
                               in_dirs = per("scan_input_directions", k_in),
                               out_axes = per("scan_output_axes", k_out),
                               out_dirs = per("scan_output_directions", k_out);
    int64_t length = -1;
    bool symbolic = false;
    std::vector<int64_t> axes(k_in);
    for (int64_t j = 0; j < k_in; ++j) {
      const Expr& x = ins.at(states + j);
      if (!x) Throw(ErrorCode::kInvalidArgument, where, ": scan input ", j, " is omitted");
      Shape shape = attrs.ShapeOf(x);
      const int64_t rank = static_cast<int64_t>(shape.size());
      axes[j] = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
      if (axes[j] < 0 || axes[j] >= rank)
        Throw(ErrorCode::kInvalidArgument, where, ": scan input axis ", in_axes[j],
              " is out of range for rank ", rank);
      const Dim& d = shape[axes[j]];
      if (!d.is_const()) {
        symbolic = true;
        continue;
      }
      if (length >= 0 && d.value() != length)
        Throw(ErrorCode::kInvalidArgument, where, ": scan inputs of lengths ", length, " and ",
              d.value());
      length = d.value();
    }
    const ScanSpec spec{ins, states, axes, in_dirs, out_axes, out_dirs};
    // A long constant length runs as a loop too (engine/segments.h), not as that many copies.
    if (symbolic || length > kMaxUnrolledIterations) return ScanAsLoop(node, label, values, spec);
    return UnrollScan(node, label, values, spec, length);
  }

  // A Scan over a constant `length`, unrolled: `ins` holds the states, then the scan inputs.
  std::vector<Expr> UnrollScan(const onnx::NodeProto& node, const std::string& label,
                               const std::unordered_map<std::string, Expr>& values,
                               const ScanSpec& spec, int64_t length) {
    const auto& [ins, states, axes, in_dirs, out_axes, out_dirs] = spec;
    const std::string where = StrCat("Scan node ", Quoted(label));
    const int64_t k_in = static_cast<int64_t>(ins.size()) - states;
    const int64_t k_out = node.output_size() - states;
    std::vector<Expr> state(ins.begin(), ins.begin() + states);
    std::vector<std::vector<Expr>> parts(k_out);
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Expr> in = state;
      for (int64_t j = 0; j < k_in; ++j) {
        const int64_t at = in_dirs[j] ? length - 1 - t : t;
        in.push_back(MakeCall(
            "gather",
            {ins[states + j], MakeConstant(Tensor::Scalar<int64_t>(at), StrCat(label, ":step"))},
            Attrs{{"axis", axes[j]}}, label));
      }
      std::vector<Expr> outs = Subgraph(node, label, "body", values, in, states + k_out);
      state.assign(outs.begin(), outs.begin() + states);
      for (int64_t k = 0; k < k_out; ++k) parts[k].push_back(outs[states + k]);
    }
    std::vector<Expr> results = state;
    for (int64_t k = 0; k < k_out; ++k) {
      if (parts[k].empty())
        Throw(ErrorCode::kUnsupported, where, ": a scan of length 0 leaves scan output ", k,
              " empty with a shape kiln cannot tell");
      if (out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
      results.push_back(Stack(parts[k], out_axes[k], label));
    }
    return results;
  }

  // Opset 8's Scan: inputs sequence_lens (unsupported when given), the states and the scan
  // inputs, all with a leading batch dim; scan inputs are [batch, sequence, ...] and the body
  // sees one batch item. Each item is its own unrolled scan (constant batch and length), and
  // every output stacks the items along axis 0.
  std::vector<Expr> ScanOpset8(const onnx::NodeProto& node, const std::string& label,
                               const std::unordered_map<std::string, Expr>& values) {
    const std::string where = StrCat("Scan node ", Quoted(label));
    std::vector<Expr> ins;
    for (const std::string& in : node.input()) ins.push_back(in.empty() ? nullptr : values.at(in));
    NodeContext attrs(node, ins, label, opset, types);
    if (!ins.empty() && ins[0])
      Throw(ErrorCode::kUnsupported, where, ": opset 8's sequence_lens is not supported");
    const int64_t k_in = attrs.Int("num_scan_inputs");
    const int64_t states = static_cast<int64_t>(ins.size()) - 1 - k_in;
    const int64_t k_out = node.output_size() - states;
    if (k_in < 1 || states < 0 || k_out < 0)
      Throw(ErrorCode::kInvalidArgument, where, ": num_scan_inputs ", k_in, " with ", ins.size(),
            " inputs and ", node.output_size(), " outputs");
    std::vector<int64_t> dirs = attrs.Ints("directions", std::vector<int64_t>(k_in, 0));
    if (static_cast<int64_t>(dirs.size()) != k_in)
      Throw(ErrorCode::kInvalidArgument, where, ": directions has ", dirs.size(), " values, ", k_in,
            " expected");
    Shape first = attrs.ShapeOf(ins.at(1 + states));
    if (first.size() < 2 || !first[0].is_const() || !first[1].is_const())
      Throw(ErrorCode::kUnsupported, where,
            ": opset 8's Scan needs a constant batch and sequence length");
    const int64_t batch = first[0].value(), length = first[1].value();
    if (batch * length > kMaxUnrolledIterations)
      Throw(ErrorCode::kUnsupported, where, ": its batch of ", batch, " sequences of ", length,
            " is more than the ", kMaxUnrolledIterations, " iterations kiln unrolls");
    std::vector<std::vector<Expr>> per_output(states + k_out);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Expr> item;
      for (size_t i = 1; i < ins.size(); ++i) {
        if (!ins[i]) Throw(ErrorCode::kInvalidArgument, where, ": input ", i, " is omitted");
        item.push_back(MakeCall(
            "gather", {ins[i], MakeConstant(Tensor::Scalar<int64_t>(b), StrCat(label, ":item"))},
            Attrs{{"axis", int64_t{0}}}, label));
      }
      const std::vector<int64_t> zeros_out(k_out, 0);
      const ScanSpec spec{item, states, std::vector<int64_t>(k_in, 0), dirs, zeros_out, zeros_out};
      std::vector<Expr> outs = UnrollScan(node, label, values, spec, length);
      for (size_t i = 0; i < outs.size(); ++i) per_output[i].push_back(outs[i]);
    }
    std::vector<Expr> results;
    for (const std::vector<Expr>& parts : per_output) {
      if (parts.empty())
        Throw(ErrorCode::kUnsupported, where, ": a batch of 0 leaves its outputs without a shape");
      results.push_back(Stack(parts, 0, label));
    }
    return results;
  }

  // If: with a constant condition, the taken branch's values (the other is not converted);
  // otherwise one dyn.branch per output, which specialization resolves once the condition is
  // known from shapes and value inputs (ir/dynamic.h).
  std::vector<Expr> ConvertIf(const onnx::NodeProto& node, const std::string& label,
                              const std::unordered_map<std::string, Expr>& values) {
    if (node.input_size() < 1 || node.input(0).empty())
      Throw(ErrorCode::kInvalidArgument, "If node ", Quoted(label), " has no condition input");
    Expr cond = values.at(node.input(0));
    if (const ConstantNode* c = AsConstant(cond)) {
      bool taken = std::get<bool>(AttrFromTensor(
          c->value, AttrKind::kBool, StrCat("the condition of If node ", Quoted(label))));
      return Branch(node, label, taken ? "then_branch" : "else_branch", values);
    }
    std::vector<Expr> then_outs = Branch(node, label, "then_branch", values);
    std::vector<Expr> else_outs = Branch(node, label, "else_branch", values);
    std::vector<Expr> outs;
    for (size_t i = 0; i < then_outs.size(); ++i)
      outs.push_back(MakeCall("dyn.branch", {then_outs[i], else_outs[i], cond}, {},
                              then_outs.size() == 1 ? label : StrCat(label, ":", i)));
    return outs;
  }
};

}  // namespace

void ConvertGraph(const onnx::ModelProto& model, const onnx::GraphProto& graph,
                  const std::vector<std::string>& labels, int64_t opset,
                  const std::string& base_dir, TypeCache* types,
                  std::unordered_map<std::string, Expr>& values) {
  GraphConverter converter{model, opset, base_dir, types};
  std::vector<int> order(graph.node_size());
  for (int k = 0; k < graph.node_size(); ++k) order[k] = k;
  converter.Convert(graph, order, labels, values);
}

}  // namespace kiln::onnx_import
