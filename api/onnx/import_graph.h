// The ONNX importer's graph walk (import_graph.cc): the topological sort with subgraphs'
// implicit inputs, and the conversion of nodes, If/Loop/Scan included, into graph IR values.
// Internal to api/onnx.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/onnx/op_table.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {

std::string Quoted(const std::string& s);  // 's'
// The ONNX node name, else `<op_type>_<index>`.
std::string NodeLabel(const onnx::NodeProto& node, int index);

// Checks that every value a node uses (a subgraph's free names included) is defined once, in
// this graph or, for a subgraph, where `enclosing` says a scope around it defines it, and
// returns the node order in which each node comes after the producers of what it uses (stable:
// a sorted graph keeps its order). Errors are kInvalidArgument naming the node.
std::vector<int> TopologicalOrder(
    const onnx::GraphProto& graph,
    const std::function<bool(const std::string&)>& enclosing = nullptr);

// Converts the nodes of `graph`, already in topological order and labelled by `labels`, into
// `values` (name -> value, holding the graph's inputs and initializers).
void ConvertGraph(const onnx::ModelProto& model, const onnx::GraphProto& graph,
                  const std::vector<std::string>& labels, int64_t opset,
                  const std::string& base_dir, TypeCache* types,
                  std::unordered_map<std::string, Expr>& values);

}  // namespace kiln::onnx_import
