// Internal to the ONNX importer: what a converter sees of one ONNX node, the table of
// converters (op_table.cc), and TensorProto -> Tensor (onnx_import.cc). Includes the ONNX
// message classes, so only api/onnx/*.cc include it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attrs.h"
#include "ir/expr.h"
#include "ir/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {

// The kiln dtype of an ONNX TensorProto.DataType; nullopt for the ones kiln lacks (string,
// complex, float8).
std::optional<DType> DTypeFromOnnx(int32_t onnx_type);
std::string OnnxTypeName(int32_t onnx_type);

// A TensorProto as a Tensor. `what` names it in errors (`initializer 'w'`); external data
// resolves against `base_dir` (empty: external data is an error). Sizes are checked before
// anything is allocated, so a lying header cannot make the importer allocate or read past
// what the file holds.
Tensor TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                       const std::string& what);

// Memoized types of the graph built so far, for converters that depend on an input's dtype
// or shape. Not thread-safe; one per import.
class TypeCache {
 public:
  // The type of `e`, inferring the nodes it depends on (each once per import). Throws the
  // relation's kTypeError naming the failing node.
  Type TypeOf(const Expr& e);

 private:
  std::unordered_map<const ExprNode*, Type> types_;
  // The nodes typed so far, kept alive for the import: converters drop the calls they fold to
  // constants, and a later node allocated at a freed address must not inherit its type.
  std::vector<Expr> typed_;
};

// One ONNX node as its converter sees it. Errors thrown through Unsupported/Invalid name the
// op type, the node and the opset.
class NodeContext {
 public:
  NodeContext(const onnx::NodeProto& node, std::vector<Expr> inputs, std::string name,
              int64_t opset, TypeCache* types);

  const onnx::NodeProto& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  // The kiln name of the node's calls: the ONNX node name, else `<op_type>_<index>`.
  const std::string& name() const { return name_; }
  // `'fc1' (Gemm, opset 13)`, for messages.
  std::string Where() const;

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Requested outputs: the count of the node's outputs, trailing omitted ones included.
  int num_outputs() const { return node_.output_size(); }
  bool OutputRequested(int i) const { return i < num_outputs() && !node_.output(i).empty(); }

  Expr In(int i) const;     // a required input; missing -> kInvalidArgument
  Expr OptIn(int i) const;  // nullptr when absent or omitted ("")
  // A constant input read as integers (shapes, axes, starts...); a computed one is
  // kUnsupported (kiln needs it at import time), another dtype kInvalidArgument.
  std::vector<int64_t> ConstInts(int i, const char* what) const;
  // A constant scalar (or one-element) input as a double; nullopt when it is not a constant.
  std::optional<double> ConstScalar(int i) const;

  bool HasAttr(const std::string& name) const;
  int64_t Int(const std::string& name, std::optional<int64_t> def = std::nullopt) const;
  double Float(const std::string& name, std::optional<double> def = std::nullopt) const;
  std::string String(const std::string& name, std::optional<std::string> def = std::nullopt) const;
  std::vector<int64_t> Ints(const std::string& name,
                            std::optional<std::vector<int64_t>> def = std::nullopt) const;
  std::vector<double> Floats(const std::string& name,
                             std::optional<std::vector<double>> def = std::nullopt) const;
  std::vector<std::string> Strings(
      const std::string& name, std::optional<std::vector<std::string>> def = std::nullopt) const;

  // A kiln call named after the node.
  Expr Call(const std::string& op, std::vector<Expr> args, const Attrs& attrs = {}) const;
  // A call of `op` whose attributes named in `value_inputs` ({attribute, ONNX input index})
  // come from the node's inputs: a constant input becomes the attribute's value now; a
  // computed one, or a graph input, makes the call `dyn.<op>` (ir/dynamic.h), which
  // specialization resolves to `op` once the shapes and those values are known. An omitted
  // input leaves the attribute as `attrs` has it, else the op's default.
  Expr CallWithValues(const std::string& op, std::vector<Expr> data_args, Attrs attrs,
                      const std::vector<std::pair<std::string, int>>& value_inputs) const;
  // A scalar constant of `dtype`.
  Expr Scalar(double value, DType dtype) const;
  DType DTypeOf(const Expr& e) const;
  int RankOf(const Expr& e) const;
  Shape ShapeOf(const Expr& e) const;  // symbolic where the model's input shapes are

  [[noreturn]] void Unsupported(const std::string& what) const;
  [[noreturn]] void Invalid(const std::string& what) const;

 private:
  const onnx::AttributeProto* FindAttr(const std::string& name,
                                       onnx::AttributeProto_AttributeType type) const;

  const onnx::NodeProto& node_;
  std::vector<Expr> inputs_;
  std::string name_;
  int64_t opset_;
  TypeCache* types_;
};

// Converts one node: returns its outputs in ONNX order (fewer than the node lists means the
// trailing ones are not produced; the importer reports a requested one as unsupported).
using Converter = std::vector<Expr> (*)(const NodeContext& ctx);

// Converter families beyond op_table.cc's own, one file each (converter_families.def).
#define KILN_ONNX_FAMILY(F) const std::map<std::string, Converter>& F##Converters();
#include "api/onnx/converter_families.def"
#undef KILN_ONNX_FAMILY

// Every converter handles its op from opset 13 to 17, and back to the oldest default-domain
// opset whose semantics of the op it implements (branching on NodeContext::opset() where the
// op changed). The importer refuses a node whose model imports an older opset, so an old
// semantic is never read with a new meaning.
struct OpConverter {
  Converter convert = nullptr;
  int64_t oldest_opset = 13;
};

// convert is nullptr when the op type is not in the table.
OpConverter FindConverter(const std::string& op_type);
std::vector<std::string> ConverterNames();  // sorted

}  // namespace kiln::onnx_import
