// ONNX control flow (api/onnx/onnx_import.cc). If: branches as subgraphs that read the
// enclosing scope, a constant condition taken at import, a condition computed from a scalar
// input resolved per value at specialization (ir/dynamic.h, dyn.branch), nested Ifs, and the
// malformed cases, each an error that names the node. Loop and Scan unrolled at import: carried
// state, scan outputs, directions and axes, an early stop, and what is not known at import.
// Data-dependent sizes (NonZero, NonMaxSuppression) import with dims only values decide.
// Models are built with the protobuf classes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "common/test_util.h"
#include "ir/dynamic.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

using test::ErrorOf;
using test::RandomTensor;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// --- Building graphs -------------------------------------------------------------------------

onnx::NodeProto* Node(onnx::GraphProto& g, const std::string& op,
                      const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                      const std::string& name) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& i : ins) n->add_input(i);
  for (const std::string& o : outs) n->add_output(o);
  return n;
}

// A value of element type `elem` (onnx::TensorProto::FLOAT, INT64, ...), rank 1 with a
// symbolic dim, or a scalar.
void Typed(onnx::ValueInfoProto* v, const std::string& name, int32_t elem, bool scalar = false) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  onnx::TensorShapeProto* s = t->mutable_shape();
  if (!scalar) s->add_dim()->set_dim_param("n");
}

// An output of rank 1 (its dim left unnamed: the branches' lengths differ).
void Output(onnx::GraphProto& g, const std::string& name, int32_t elem = onnx::TensorProto::FLOAT) {
  onnx::ValueInfoProto* v = g.add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
}

void ScalarInit(onnx::GraphProto& g, const std::string& name, int64_t v) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_int64_data(v);
}

void BoolInit(onnx::GraphProto& g, const std::string& name, bool v) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A graph input or output of element type `elem` and constant shape `dims`.
void Fixed(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims,
           int32_t elem = onnx::TensorProto::FLOAT) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  onnx::TensorShapeProto* s = t->mutable_shape();
  for (int64_t d : dims) s->add_dim()->set_dim_value(d);
}

void SetDimParam(onnx::ValueInfoProto* v, int dim, const std::string& name) {
  v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(dim)->set_dim_param(name);
}

onnx::ModelProto NewModel(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

onnx::GraphProto* Branch(onnx::NodeProto* node, const std::string& which) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(which);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(which);
  return a->mutable_g();
}

// x: f32[n], sr: i64[] -> If(cond) with then = exp(x) and else = concat(x, -x): [n] or [2n].
// `cond` is an initializer (`constant`) or sr == 16000.
onnx::ModelProto IfModel(std::optional<bool> constant) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(16);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("if_model");
  Typed(g.add_input(), "x", onnx::TensorProto::FLOAT);
  Typed(g.add_input(), "sr", onnx::TensorProto::INT64, true);
  if (constant) {
    BoolInit(g, "cond", *constant);
  } else {
    ScalarInit(g, "rate", 16000);
    Node(g, "Equal", {"sr", "rate"}, {"cond"}, "is_16k");
  }
  onnx::NodeProto* node = Node(g, "If", {"cond"}, {"y"}, "if0");
  onnx::GraphProto* then_g = Branch(node, "then_branch");
  Node(*then_g, "Exp", {"x"}, {"e"}, "then_exp");  // x: the enclosing graph's input
  Output(*then_g, "e");
  onnx::GraphProto* else_g = Branch(node, "else_branch");
  Node(*else_g, "Neg", {"x"}, {"neg"}, "else_neg");
  onnx::NodeProto* cat = Node(*else_g, "Concat", {"x", "neg"}, {"cat"}, "else_cat");
  onnx::AttributeProto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  Output(*else_g, "cat");
  Output(g, "y");
  return m;
}

ImportedModel Import(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return ImportOnnxBuffer(s.data(), s.size(), OnnxImportOptions{});
}

// then = exp(x), else = concat(x, -x).
Tensor Expected(const Tensor& x, bool then_taken) {
  const int64_t n = x.numel();
  Tensor y = Tensor::Empty(DType::kFloat32, {then_taken ? n : 2 * n});
  for (int64_t i = 0; i < n; ++i) {
    double v = x.GetAsDouble(i);
    if (then_taken) {
      y.SetFromDouble(i, std::exp(v));
    } else {
      y.SetFromDouble(i, v);
      y.SetFromDouble(n + i, -v);
    }
  }
  return y;
}

// --- Tests -----------------------------------------------------------------------------------

TEST(OnnxImportIf, ConstantConditionTakesItsBranchAtImport) {
  Tensor x = RandomTensor(DType::kFloat32, {7}, 3);
  Tensor sr = Tensor::Scalar<int64_t>(1);
  for (bool taken : {true, false}) {
    ImportedModel model = Import(IfModel(taken));
    std::string text = Print(model.graph);
    EXPECT_THAT(text, Not(HasSubstr("branch"))) << text;
    EXPECT_THAT(text, HasSubstr(taken ? "exp(" : "concat(")) << text;
    std::vector<Tensor> out = Interpret(model.graph, {x, sr});
    EXPECT_TRUE(test::TensorsNear(out.at(0), Expected(x, taken), 1e-6, 1e-6));
  }
}

TEST(OnnxImportIf, ConditionFromAScalarInputResolvesPerValue) {
  ImportedModel model = Import(IfModel(std::nullopt));
  std::string text = Print(model.graph);
  EXPECT_THAT(text, HasSubstr("dyn.branch(")) << text;
  EXPECT_EQ(ValueInputs(model.graph), std::vector<int>{1});  // sr sets the condition
  Tensor x = RandomTensor(DType::kFloat32, {6}, 4);
  for (int64_t rate : {16000, 8000, 44100}) {
    std::vector<Tensor> in = {x, Tensor::Scalar<int64_t>(rate)};
    Function resolved = ResolveDynamic(BindSymbols(model.graph, {{"n", 6}}), in);
    std::string r = Print(resolved);
    EXPECT_THAT(r, Not(HasSubstr("branch"))) << r;
    EXPECT_THAT(r, Not(HasSubstr(rate == 16000 ? "concat(" : "exp("))) << r;
    EXPECT_TRUE(
        test::TensorsNear(Interpret(model.graph, in).at(0), Expected(x, rate == 16000), 1e-6, 1e-6))
        << rate;
  }
}

// An If inside a branch reads the outermost graph's input through two scopes; its own
// condition comes from the outer one.
TEST(OnnxImportIf, NestedIfReadsThroughEveryEnclosingScope) {
  onnx::ModelProto m = IfModel(std::nullopt);
  onnx::GraphProto* then_g = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
  then_g->clear_node();
  then_g->clear_output();
  onnx::NodeProto* inner = Node(*then_g, "If", {"cond"}, {"inner_y"}, "if_inner");
  Node(*Branch(inner, "then_branch"), "Exp", {"x"}, {"ie"}, "inner_exp");
  Output(*inner->mutable_attribute(0)->mutable_g(), "ie");
  onnx::GraphProto* inner_else = Branch(inner, "else_branch");
  Node(*inner_else, "Neg", {"x"}, {"in"}, "inner_neg");
  Output(*inner_else, "in");
  Output(*then_g, "inner_y");
  ImportedModel model = Import(m);
  Tensor x = RandomTensor(DType::kFloat32, {3}, 5);
  for (int64_t rate : {16000, 8000}) {
    std::vector<Tensor> out = Interpret(model.graph, {x, Tensor::Scalar<int64_t>(rate)});
    EXPECT_TRUE(test::TensorsNear(out.at(0), Expected(x, rate == 16000), 1e-6, 1e-6)) << rate;
  }
}

TEST(OnnxImportIf, MalformedBranchesAreErrorsNamingTheNode) {
  {  // a branch with more outputs than the node
    onnx::ModelProto m = IfModel(std::nullopt);
    Output(*m.mutable_graph()->mutable_node(1)->mutable_attribute(1)->mutable_g(), "neg");
    Error e = ErrorOf([&] { Import(m); });
    EXPECT_THAT(e.what(), AllOf(HasSubstr("if0"), HasSubstr("else_branch has 2 outputs")));
  }
  {  // a branch reading a value no enclosing scope defines
    onnx::ModelProto m = IfModel(std::nullopt);
    m.mutable_graph()
        ->mutable_node(1)
        ->mutable_attribute(0)
        ->mutable_g()
        ->mutable_node(0)
        ->set_input(0, "nowhere");
    Error e = ErrorOf([&] { Import(m); });
    EXPECT_THAT(e.what(), HasSubstr("nowhere"));
  }
  {  // branches whose outputs disagree in dtype
    onnx::ModelProto m = IfModel(std::nullopt);
    onnx::GraphProto* else_g =
        m.mutable_graph()->mutable_node(1)->mutable_attribute(1)->mutable_g();
    onnx::NodeProto* cast = Node(*else_g, "Cast", {"cat"}, {"cat_i"}, "else_cast");
    onnx::AttributeProto* to = cast->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::INT64);
    else_g->mutable_output(0)->set_name("cat_i");
    else_g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::INT64);
    Error e = ErrorOf([&] { Import(m); });
    EXPECT_THAT(e.what(), AllOf(HasSubstr("if0"), HasSubstr("disagree")));
  }
  {  // a condition that is not one element
    onnx::ModelProto m = IfModel(true);
    m.mutable_graph()->mutable_initializer(0)->add_int32_data(0);
    m.mutable_graph()->mutable_initializer(0)->add_dims(2);
    Error e = ErrorOf([&] { Import(m); });
    EXPECT_THAT(e.what(), HasSubstr("if0"));
  }
}

// Loop with a constant trip count (4) and condition: y += iteration number, each iteration's
// y * x stacked as a scan output; the body reads x from the enclosing graph.
onnx::ModelProto LoopModel(bool trip_count_input) {
  onnx::ModelProto m = NewModel(16);
  onnx::GraphProto& g = *m.mutable_graph();
  Fixed(g.add_input(), "x", {3});
  Fixed(g.add_input(), "y", {3});
  if (trip_count_input) {
    Fixed(g.add_input(), "m", {}, onnx::TensorProto::INT64);
  } else {
    ScalarInit(g, "m", 4);
  }
  BoolInit(g, "c", true);
  onnx::NodeProto* loop = Node(g, "Loop", {"m", "c", "y"}, {"y_final", "scan"}, "loop0");
  onnx::GraphProto* body = Branch(loop, "body");
  Fixed(body->add_input(), "i", {}, onnx::TensorProto::INT64);
  Fixed(body->add_input(), "c_in", {}, onnx::TensorProto::BOOL);
  Fixed(body->add_input(), "y_in", {3});
  Node(*body, "Identity", {"c_in"}, {"c_out"}, "keep_going");
  IntAttr(Node(*body, "Cast", {"i"}, {"i_f"}, "to_float"), "to", onnx::TensorProto::FLOAT);
  Node(*body, "Add", {"y_in", "i_f"}, {"y_out"}, "step");
  Node(*body, "Mul", {"y_out", "x"}, {"s"}, "scan_value");
  Fixed(body->add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  Fixed(body->add_output(), "y_out", {3});
  Fixed(body->add_output(), "s", {3});
  Fixed(g.add_output(), "y_final", {3});
  Fixed(g.add_output(), "scan", {4, 3});
  return m;
}

// The expected outputs of LoopModel for `trips` iterations: y + 0 + ... + (trips - 1), and
// each iteration's running y times x.
void ExpectLoop(const std::vector<Tensor>& out, const Tensor& x, const Tensor& y, int64_t trips) {
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{trips, 3}));
  for (int64_t j = 0; j < 3; ++j) {
    double acc = y.GetAsDouble(j);
    for (int64_t t = 0; t < trips; ++t) {
      acc += static_cast<double>(t);
      EXPECT_NEAR(out[1].GetAsDouble(t * 3 + j), acc * x.GetAsDouble(j), 1e-5) << t << " " << j;
    }
    EXPECT_NEAR(out[0].GetAsDouble(j), acc, 1e-5);
  }
}

TEST(OnnxImportLoop, ConstantTripCountUnrollsAtImport) {
  ImportedModel model = Import(LoopModel(false));
  EXPECT_THAT(Print(model.graph), Not(HasSubstr("dyn.loop")));
  Tensor x = RandomTensor(DType::kFloat32, {3}, 6), y = RandomTensor(DType::kFloat32, {3}, 7);
  ExpectLoop(Interpret(model.graph, {x, y}), x, y, 4);
}

// A body whose condition turns false (a constant) ends the loop after that iteration.
TEST(OnnxImportLoop, BodyConditionEndsTheLoop) {
  onnx::ModelProto m = LoopModel(false);
  onnx::GraphProto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  BoolInit(*body, "stop", false);
  body->mutable_node(0)->set_input(0, "stop");
  m.mutable_graph()
      ->mutable_output(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(1);
  ImportedModel model = Import(m);
  Tensor x = RandomTensor(DType::kFloat32, {3}, 8), y = RandomTensor(DType::kFloat32, {3}, 9);
  std::vector<Tensor> out = Interpret(model.graph, {x, y});
  EXPECT_EQ(out.at(1).shape(), (std::vector<int64_t>{1, 3}));  // one iteration, i = 0
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(out[0].GetAsDouble(j), y.GetAsDouble(j), 1e-6);
}

// A trip count given as an input: the Loop imports as dyn.loop, a value input sets the count,
// and specialization unrolls it, once per count.
TEST(OnnxImportLoop, TripCountInputUnrollsAtSpecialization) {
  ImportedModel model = Import(LoopModel(true));
  EXPECT_THAT(Print(model.graph), HasSubstr("dyn.loop("));
  EXPECT_EQ(ValueInputs(model.graph), std::vector<int>{2});
  Tensor x = RandomTensor(DType::kFloat32, {3}, 13), y = RandomTensor(DType::kFloat32, {3}, 14);
  for (int64_t trips : {4, 1, 6}) {
    std::vector<Tensor> in = {x, y, Tensor::Scalar<int64_t>(trips)};
    Function resolved = ResolveDynamic(BindSymbols(model.graph, {}), in);
    EXPECT_THAT(Print(resolved), Not(HasSubstr("dyn.loop"))) << trips;
    ExpectLoop(Interpret(model.graph, in), x, y, trips);
  }
  // No iteration leaves the scan output without a shape: unsupported, naming the node.
  Error e = ErrorOf([&] { Interpret(model.graph, {x, y, Tensor::Scalar<int64_t>(0)}); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("loop0"), HasSubstr("no iteration")));
}

TEST(OnnxImportLoop, MalformedLoopsAreErrorsNamingTheNode) {
  {  // a body with one output more than the condition, 1 carried value and 1 scan output
    onnx::ModelProto m = LoopModel(true);
    onnx::GraphProto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    Fixed(body->add_output(), "y_in", {3});
    Error e = ErrorOf([&] { Import(m); });
    EXPECT_THAT(e.what(), AllOf(HasSubstr("loop0"), HasSubstr("body has 4 outputs, 3 expected")));
  }
  {  // more iterations than kiln unrolls
    ImportedModel model = Import(LoopModel(true));
    Tensor x = RandomTensor(DType::kFloat32, {3}, 15);
    Error e = ErrorOf([&] {
      Interpret(model.graph, {x, x, Tensor::Scalar<int64_t>(kMaxUnrolledIterations + 1)});
    });
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("loop0"), HasSubstr("more than the")));
  }
}

// The Scan tests' body: state s += a_t; outputs s and b_t.
void SumAndCopyBody(onnx::NodeProto* scan) {
  onnx::GraphProto* body = Branch(scan, "body");
  Fixed(body->add_input(), "s_in", {2});
  Fixed(body->add_input(), "a_t", {2});
  Fixed(body->add_input(), "b_t", {2});
  Node(*body, "Add", {"s_in", "a_t"}, {"s_out"}, "acc");
  Node(*body, "Identity", {"s_out"}, {"sum_t"}, "sum");
  Node(*body, "Identity", {"b_t"}, {"b_out"}, "copy");
  Fixed(body->add_output(), "s_out", {2});
  Fixed(body->add_output(), "sum_t", {2});
  Fixed(body->add_output(), "b_out", {2});
}

// Scan over a: [3, 2] along axis 0 (forward), and b: [2, 3] along axis 1 (reverse): state s += a_t,
// the running s stacked along axis 0, and b_t stacked along axis 1 in reverse, which gives b.
TEST(OnnxImportScan, StateDirectionsAndAxes) {
  onnx::ModelProto m = NewModel(16);
  onnx::GraphProto& g = *m.mutable_graph();
  Fixed(g.add_input(), "s0", {2});
  Fixed(g.add_input(), "a", {3, 2});
  Fixed(g.add_input(), "b", {2, 3});
  onnx::NodeProto* scan = Node(g, "Scan", {"s0", "a", "b"}, {"s", "sums", "b_again"}, "scan0");
  IntAttr(scan, "num_scan_inputs", 2);
  IntsAttr(scan, "scan_input_axes", {0, 1});
  IntsAttr(scan, "scan_input_directions", {0, 1});
  IntsAttr(scan, "scan_output_axes", {0, -1});
  IntsAttr(scan, "scan_output_directions", {0, 1});
  SumAndCopyBody(scan);
  Fixed(g.add_output(), "s", {2});
  Fixed(g.add_output(), "sums", {3, 2});
  Fixed(g.add_output(), "b_again", {2, 3});
  ImportedModel model = Import(m);
  Tensor s0 = RandomTensor(DType::kFloat32, {2}, 10), a = RandomTensor(DType::kFloat32, {3, 2}, 11),
         b = RandomTensor(DType::kFloat32, {2, 3}, 12);
  std::vector<Tensor> out = Interpret(model.graph, {s0, a, b});
  ASSERT_EQ(out.size(), 3u);
  for (int64_t j = 0; j < 2; ++j) {
    double acc = s0.GetAsDouble(j);
    for (int64_t t = 0; t < 3; ++t) {
      acc += a.GetAsDouble(t * 2 + j);
      EXPECT_NEAR(out[1].GetAsDouble(t * 2 + j), acc, 1e-5);
    }
    EXPECT_NEAR(out[0].GetAsDouble(j), acc, 1e-5);
  }
  EXPECT_TRUE(test::TensorsNear(out[2], b, 0, 0));

  // The same Scan over a symbolic length unrolls at specialization (dyn.loop), reverse output
  // included, with the same results.
  SetDimParam(m.mutable_graph()->mutable_input(1), 0, "seq");
  SetDimParam(m.mutable_graph()->mutable_input(2), 1, "seq");
  ImportedModel symbolic = Import(m);
  EXPECT_THAT(Print(symbolic.graph), HasSubstr("dyn.loop("));
  std::vector<Tensor> again = Interpret(symbolic.graph, {s0, a, b});
  ASSERT_EQ(again.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(test::TensorsNear(again[i], out[i], 0, 0)) << i;
}

// A Scan over a symbolic length: a: [seq, 2] forward, b: [2, seq] read from the end; the running
// sum stacked along axis 0 and b's slices along the last axis, which gives b reversed.
TEST(OnnxImportScan, SymbolicLengthUnrollsAtSpecialization) {
  onnx::ModelProto m = NewModel(16);
  onnx::GraphProto& g = *m.mutable_graph();
  Fixed(g.add_input(), "s0", {2});
  Fixed(g.add_input(), "a", {1, 2});
  SetDimParam(g.mutable_input(1), 0, "seq");
  Fixed(g.add_input(), "b", {2, 1});
  SetDimParam(g.mutable_input(2), 1, "seq");
  onnx::NodeProto* scan = Node(g, "Scan", {"s0", "a", "b"}, {"s", "sums", "b_rev"}, "scan1");
  IntAttr(scan, "num_scan_inputs", 2);
  IntsAttr(scan, "scan_input_axes", {0, 1});
  IntsAttr(scan, "scan_input_directions", {0, 1});
  IntsAttr(scan, "scan_output_axes", {0, -1});
  SumAndCopyBody(scan);
  Fixed(g.add_output(), "s", {2});
  Fixed(g.add_output(), "sums", {1, 2});
  Fixed(g.add_output(), "b_rev", {2, 1});
  ImportedModel model = Import(m);
  EXPECT_THAT(Print(model.graph), HasSubstr("dyn.loop("));
  for (int64_t seq : {3, 5}) {
    Tensor s0 = RandomTensor(DType::kFloat32, {2}, 16),
           a = RandomTensor(DType::kFloat32, {seq, 2}, 17),
           b = RandomTensor(DType::kFloat32, {2, seq}, 18);
    std::vector<Tensor> out = Interpret(model.graph, {s0, a, b});
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{seq, 2}));
    ASSERT_EQ(out[2].shape(), (std::vector<int64_t>{2, seq}));
    for (int64_t j = 0; j < 2; ++j) {
      double acc = s0.GetAsDouble(j);
      for (int64_t t = 0; t < seq; ++t) {
        acc += a.GetAsDouble(t * 2 + j);
        EXPECT_NEAR(out[1].GetAsDouble(t * 2 + j), acc, 1e-5);
        EXPECT_EQ(out[2].GetAsDouble(j * seq + t), b.GetAsDouble(j * seq + seq - 1 - t));
      }
      EXPECT_NEAR(out[0].GetAsDouble(j), acc, 1e-5);
    }
  }
}

// Opset 8's Scan: a batch of 2 items, each its own scan (a forward, b from the end), every
// output stacked over the items.
TEST(OnnxImportScan, Opset8BatchesItsItems) {
  onnx::ModelProto m = NewModel(8);
  onnx::GraphProto& g = *m.mutable_graph();
  Fixed(g.add_input(), "s0", {2, 2});
  Fixed(g.add_input(), "a", {2, 3, 2});
  Fixed(g.add_input(), "b", {2, 3, 2});
  onnx::NodeProto* scan = Node(g, "Scan", {"", "s0", "a", "b"}, {"s", "sums", "b_rev"}, "scan8");
  IntAttr(scan, "num_scan_inputs", 2);
  IntsAttr(scan, "directions", {0, 1});
  SumAndCopyBody(scan);
  Fixed(g.add_output(), "s", {2, 2});
  Fixed(g.add_output(), "sums", {2, 3, 2});
  Fixed(g.add_output(), "b_rev", {2, 3, 2});
  ImportedModel model = Import(m);
  Tensor s0 = RandomTensor(DType::kFloat32, {2, 2}, 19),
         a = RandomTensor(DType::kFloat32, {2, 3, 2}, 20),
         b = RandomTensor(DType::kFloat32, {2, 3, 2}, 21);
  std::vector<Tensor> out = Interpret(model.graph, {s0, a, b});
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{2, 3, 2}));
  for (int64_t item = 0; item < 2; ++item) {
    for (int64_t j = 0; j < 2; ++j) {
      double acc = s0.GetAsDouble(item * 2 + j);
      for (int64_t t = 0; t < 3; ++t) {
        acc += a.GetAsDouble(item * 6 + t * 2 + j);
        EXPECT_NEAR(out[1].GetAsDouble(item * 6 + t * 2 + j), acc, 1e-5);
        EXPECT_EQ(out[2].GetAsDouble(item * 6 + t * 2 + j),
                  b.GetAsDouble(item * 6 + (2 - t) * 2 + j));
      }
      EXPECT_NEAR(out[0].GetAsDouble(item * 2 + j), acc, 1e-5);
    }
  }
}

// --- Data-dependent sizes ----------------------------------------------------------------------

// A value of `elem` with the given dims (a name: a symbolic dim).
void TypedDims(onnx::ValueInfoProto* v, const std::string& name, int32_t elem,
               const std::vector<std::variant<int64_t, std::string>>& dims) {
  v->set_name(name);
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  onnx::TensorShapeProto* s = t->mutable_shape();
  for (const auto& d : dims) {
    if (const int64_t* k = std::get_if<int64_t>(&d))
      s->add_dim()->set_dim_value(*k);
    else
      s->add_dim()->set_dim_param(std::get<std::string>(d));
  }
}

// NonZero feeding GatherND (select the positive elements): the importer types the count as a
// dim only values decide, and the interpreter runs it (the engine runs it in segments:
// tests/engine/segments_test.cc).
TEST(OnnxImportDataDependent, SizesImportAndRun) {
  onnx::ModelProto m = NewModel(13);
  onnx::GraphProto& g = *m.mutable_graph();
  TypedDims(g.add_input(), "x", onnx::TensorProto::FLOAT, {std::string("b"), int64_t{4}});
  Node(g, "Relu", {"x"}, {"r"}, "relu");
  Node(g, "NonZero", {"r"}, {"nz"}, "nz");
  onnx::AttributeProto* perm = Node(g, "Transpose", {"nz"}, {"idx"}, "t")->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  Node(g, "GatherND", {"r", "idx"}, {"y"}, "gather");
  Output(g, "y");
  ImportedModel model = Import(m);
  EXPECT_THAT(TypeToString(model.graph->body->type), ::testing::MatchesRegex("f32\\[_v[0-9]+\\]"));
  Tensor x = test::MakeTensor<float>({2, 4}, {1, -1, 0, 2, -3, 4, 5, -6});
  std::vector<Tensor> out = Interpret(model.graph, {x});
  EXPECT_TRUE(test::TensorsNear(out.at(0), test::MakeTensor<float>({4}, {1, 2, 4, 5})));

  // NonMaxSuppression with max_output_boxes_per_class omitted ("") before a given
  // iou_threshold: ONNX's default 0 boxes applies.
  onnx::ModelProto n = NewModel(11);
  onnx::GraphProto& h = *n.mutable_graph();
  TypedDims(h.add_input(), "boxes", onnx::TensorProto::FLOAT, {int64_t{1}, int64_t{2}, int64_t{4}});
  TypedDims(h.add_input(), "scores", onnx::TensorProto::FLOAT,
            {int64_t{1}, int64_t{1}, int64_t{2}});
  onnx::TensorProto* iou = h.add_initializer();
  iou->set_name("iou");
  iou->set_data_type(onnx::TensorProto::FLOAT);
  iou->add_dims(1);
  iou->add_float_data(0.5f);
  Node(h, "NonMaxSuppression", {"boxes", "scores", "", "iou"}, {"sel"}, "nms");
  TypedDims(h.add_output(), "sel", onnx::TensorProto::INT64, {std::string("k"), int64_t{3}});
  Tensor boxes = test::MakeTensor<float>({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  Tensor scores = test::MakeTensor<float>({1, 1, 2}, {0.5f, 0.9f});
  EXPECT_EQ(Interpret(Import(n).graph, {boxes, scores}).at(0).shape(),
            (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace kiln
