// Building ONNX models in tests: a model, its inputs/outputs with symbolic or constant dims,
// nodes and their attributes, initializers; importing it (ImportOnnxBuffer) and running it on
// the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "common/test_util.h"
#include "ir/interpreter.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_test {

using DimSpec = std::variant<int64_t, std::string>;

inline onnx::ModelProto NewModel(int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("test_graph");
  return m;
}

inline void SetType(onnx::ValueInfoProto* v, int32_t elem, const std::vector<DimSpec>* dims) {
  onnx::TypeProto::Tensor* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  // libonnx 1.12's checker wants a shape on every graph input and output; the importer reads
  // only the inputs', so outputs get an empty one.
  onnx::TensorShapeProto* shape = tt->mutable_shape();
  if (!dims) return;
  for (const DimSpec& d : *dims) {
    onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    if (const int64_t* v = std::get_if<int64_t>(&d))
      dim->set_dim_value(*v);
    else if (!std::get<std::string>(d).empty())
      dim->set_dim_param(std::get<std::string>(d));
  }
}

inline void AddInput(onnx::ModelProto& m, const std::string& name, std::vector<DimSpec> dims,
                     int32_t elem = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto* v = m.mutable_graph()->add_input();
  v->set_name(name);
  SetType(v, elem, &dims);
}

inline void AddOutput(onnx::ModelProto& m, const std::string& name,
                      int32_t elem = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto* v = m.mutable_graph()->add_output();
  v->set_name(name);
  SetType(v, elem, nullptr);
}

inline onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op,
                                const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs,
                                const std::string& name = "") {
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  if (!name.empty()) n->set_name(name);
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return n;
}

inline void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

inline int32_t OnnxType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return onnx::TensorProto::FLOAT;
    case DType::kInt64:
      return onnx::TensorProto::INT64;
    case DType::kInt32:
      return onnx::TensorProto::INT32;
    case DType::kBool:
      return onnx::TensorProto::BOOL;
    case DType::kFloat64:
      return onnx::TensorProto::DOUBLE;
    case DType::kUInt8:
      return onnx::TensorProto::UINT8;
    case DType::kInt8:
      return onnx::TensorProto::INT8;
    default:
      ADD_FAILURE() << "no ONNX type in the test for " << DTypeName(t);
      return 0;
  }
}

inline onnx::TensorProto ToProto(const std::string& name, const Tensor& t) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(OnnxType(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_raw_data(std::string(static_cast<const char*>(t.raw_data()), t.nbytes()));
  return p;
}

inline void AddInit(onnx::ModelProto& m, const std::string& name, const Tensor& t) {
  *m.mutable_graph()->add_initializer() = ToProto(name, t);
}

// An f32[n] initializer `name` whose values are in the file `location` (relative to the
// model's folder), `length` bytes at `offset`: ONNX external data.
inline void AddExternalInit(onnx::ModelProto& m, const std::string& name, int64_t n,
                            const std::string& location, int64_t offset, int64_t length) {
  onnx::TensorProto* w = m.mutable_graph()->add_initializer();
  w->set_name(name);
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(n);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, std::string>{"location", location},
                      {"offset", std::to_string(offset)},
                      {"length", std::to_string(length)}}) {
    onnx::StringStringEntryProto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
}

inline std::string Bytes(const onnx::ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

inline ImportedModel Import(const onnx::ModelProto& m, const std::string& base_dir = "") {
  std::string s = Bytes(m);
  OnnxImportOptions options;
  options.base_dir = base_dir;
  return ImportOnnxBuffer(s.data(), s.size(), options);
}

inline Error ImportError(const onnx::ModelProto& m, const std::string& base_dir = "") {
  return test::ErrorOf([&] { Import(m, base_dir); });
}

inline std::vector<Tensor> RunModel(const onnx::ModelProto& m, const std::vector<Tensor>& inputs) {
  return Interpret(Import(m).graph, inputs);
}

// One node `op` over inputs x0, x1, ... of the given tensors' types, output y.
inline onnx::ModelProto OneNode(const std::string& op, const std::vector<Tensor>& inputs,
                                int64_t opset = 13, DType out = DType::kFloat32) {
  onnx::ModelProto m = NewModel(opset);
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back(StrCat("x", i));
    std::vector<DimSpec> dims(inputs[i].shape().begin(), inputs[i].shape().end());
    AddInput(m, names.back(), dims, OnnxType(inputs[i].dtype()));
  }
  AddNode(m, op, names, {"y"}, "node0");
  AddOutput(m, "y", OnnxType(out));
  return m;
}

}  // namespace kiln::onnx_test
