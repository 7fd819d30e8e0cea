// ONNX sequences (api/onnx/convert_sequence.cc, ir/sequence.h): imported as List[Tensor] ops,
// typed before specialization with what every element shares, resolved at specialization to
// tuples of their elements. Each model runs on the reference interpreter (which specializes
// it as the engine does) and is compared with the expected elements computed here, for
// several position and split values given as inputs (value inputs); then the malformed and
// unsupported cases, each an error naming the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/test_util.h"
#include "ir/dynamic.h"
#include "ir/sequence.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "onnx/onnx-data_pb.h"
#include "onnx_import/onnx_builders.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the model builders
using test::ErrorOf;
using test::RandomTensor;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// --- Expected values -------------------------------------------------------------------------

int64_t Prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// x[..., start:end, ...] along `axis` (f32).
Tensor Piece(const Tensor& x, int axis, int64_t start, int64_t end) {
  std::vector<int64_t> shape = x.shape();
  const int64_t outer = Prod(shape, 0, axis), inner = Prod(shape, axis + 1, shape.size());
  const int64_t dim = shape[axis];
  shape[axis] = end - start;
  Tensor out = Tensor::Empty(DType::kFloat32, shape);
  float* o = out.data<float>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t j = start; j < end; ++j)
      for (int64_t b = 0; b < inner; ++b) *o++ = x.data<float>()[(a * dim + j) * inner + b];
  return out;
}

// `parts` joined along `axis` (f32, equal ranks).
Tensor Cat(const std::vector<Tensor>& parts, int axis) {
  std::vector<int64_t> shape = parts.at(0).shape();
  shape[axis] = 0;
  for (const Tensor& p : parts) shape[axis] += p.shape()[axis];
  const int64_t outer = Prod(shape, 0, axis), inner = Prod(shape, axis + 1, shape.size());
  Tensor out = Tensor::Empty(DType::kFloat32, shape);
  float* o = out.data<float>();
  for (int64_t a = 0; a < outer; ++a)
    for (const Tensor& p : parts) {
      const int64_t n = p.shape()[axis] * inner;
      for (int64_t k = 0; k < n; ++k) *o++ = p.data<float>()[a * n + k];
    }
  return out;
}

// The same values with another shape.
Tensor Reshaped(const Tensor& t, const std::vector<int64_t>& shape) {
  return Tensor::FromVector<float>(
      shape, std::vector<float>(t.data<float>(), t.data<float>() + t.numel()));
}

// Runs `m` and returns its one output; also checks that specialization left no sequence op.
Tensor RunOne(const onnx::ModelProto& m, const std::vector<Tensor>& in,
              const std::map<std::string, int64_t>& dims = {}) {
  ImportedModel model = Import(m);
  std::string resolved = Print(ResolveDynamic(BindSymbols(model.graph, dims), in));
  EXPECT_THAT(resolved, Not(HasSubstr("seq."))) << resolved;
  std::vector<Tensor> out = Interpret(model.graph, in);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

Tensor I64(int64_t v) {
  return Tensor::Scalar<int64_t>(v);
}

// --- Models ----------------------------------------------------------------------------------

// An empty sequence grown by three inserts (the last at position input p), read at position
// input q: elements of different first dims, one of them symbolic.
onnx::ModelProto InsertAtModel() {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "a", {std::string("n"), 3, 4});
  AddInput(m, "b", {1, 3, 4});
  AddInput(m, "c", {3, 3, 4});
  AddInput(m, "p", {}, onnx::TensorProto::INT64);
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  AddNode(m, "SequenceEmpty", {}, {"s0"}, "empty");
  AddNode(m, "SequenceInsert", {"s0", "a"}, {"s1"}, "ins_a");
  AddNode(m, "SequenceInsert", {"s1", "b"}, {"s2"}, "ins_b");
  AddNode(m, "SequenceInsert", {"s2", "c", "p"}, {"s3"}, "ins_c");
  AddNode(m, "SequenceAt", {"s3", "q"}, {"y"}, "at");
  AddOutput(m, "y");
  return m;
}

TEST(OnnxImportSequence, InsertAndReadAtPositionsGivenAsInputs) {
  onnx::ModelProto m = InsertAtModel();
  ImportedModel model = Import(m);
  // Before specialization the element type keeps what the three share.
  std::string text = Print(model.graph);
  EXPECT_THAT(text,
              AllOf(HasSubstr("seq.empty"), HasSubstr("dyn.seq.insert"), HasSubstr("dyn.seq.at")))
      << text;
  EXPECT_EQ(ValueInputs(model.graph), (std::vector<int>{3, 4}));
  const TensorTypeNode* y = AsTensor(model.graph->body->type);
  ASSERT_NE(y, nullptr) << TypeToString(model.graph->body->type);
  EXPECT_EQ(y->ndim(), 3);
  EXPECT_EQ(y->shape[1], Dim(3));
  EXPECT_TRUE(TypeRelContext::IsUnknownDim(y->shape[0])) << TypeToString(model.graph->body->type);

  Tensor a = RandomTensor(DType::kFloat32, {2, 3, 4}, 1),
         b = RandomTensor(DType::kFloat32, {1, 3, 4}, 2),
         c = RandomTensor(DType::kFloat32, {3, 3, 4}, 3);
  for (int64_t p : {0, 1, 2, -1, -2})
    for (int64_t q : {0, 1, 2, -1, -3}) {
      std::vector<Tensor> list = {a, b};
      list.insert(list.begin() + (p < 0 ? p + 2 : p), c);
      const Tensor& want = list[q < 0 ? q + 3 : q];
      EXPECT_TRUE(test::TensorsNear(RunOne(m, {a, b, c, I64(p), I64(q)}, {{"n", 2}}), want, 0, 0))
          << "p " << p << ", q " << q;
    }

  // Positions out of range name the node and the range.
  Error e = ErrorOf([&] { Interpret(model.graph, {a, b, c, I64(3), I64(0)}); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("ins_c"), HasSubstr("position 3"), HasSubstr("[-2, 2]")));
  e = ErrorOf([&] { Interpret(model.graph, {a, b, c, I64(0), I64(-4)}); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'at'"), HasSubstr("position -4")));
}

// SequenceConstruct, SequenceErase at an input position, SequenceInsert at a constant one, and
// ConcatFromSequence joining along an axis or stacking along a new last one.
onnx::ModelProto ConcatModel(int64_t axis, int64_t new_axis) {
  onnx::ModelProto m = NewModel(13);
  for (const char* x : {"x0", "x1", "x2"}) AddInput(m, x, {2, 3, 4});
  AddInput(m, "p", {1}, onnx::TensorProto::INT64);  // a position of shape [1]
  AddInit(m, "back", Tensor::FromVector<int64_t>({}, {-1}));
  AddNode(m, "SequenceConstruct", {"x0", "x1", "x2"}, {"s0"}, "make");
  AddNode(m, "SequenceErase", {"s0", "p"}, {"s1"}, "erase");
  AddNode(m, "SequenceInsert", {"s1", "x0", "back"}, {"s2"}, "ins");
  onnx::NodeProto* n = AddNode(m, "ConcatFromSequence", {"s2"}, {"y"}, "cat");
  AttrInt(n, "axis", axis);
  if (new_axis) AttrInt(n, "new_axis", new_axis);
  AddOutput(m, "y");
  return m;
}

TEST(OnnxImportSequence, ConstructEraseInsertConcatAndStack) {
  std::vector<Tensor> x;
  for (int i = 0; i < 3; ++i) x.push_back(RandomTensor(DType::kFloat32, {2, 3, 4}, 10 + i));
  for (int64_t p : {0, 2, -1, -3}) {
    std::vector<Tensor> list = x;
    list.erase(list.begin() + (p < 0 ? p + 3 : p));
    list.insert(list.end() - 1, x[0]);  // inserted before the last element
    std::vector<Tensor> in = {x[0], x[1], x[2], Tensor::FromVector<int64_t>({1}, {p})};
    EXPECT_TRUE(test::TensorsNear(RunOne(ConcatModel(1, 0), in), Cat(list, 1), 0, 0)) << p;
    EXPECT_TRUE(test::TensorsNear(RunOne(ConcatModel(-3, 0), in), Cat(list, 0), 0, 0)) << p;
    // new_axis = 1, axis = -1: stacked along a new last axis.
    std::vector<Tensor> rows;
    for (const Tensor& t : list) rows.push_back(Reshaped(t, {2, 3, 4, 1}));
    EXPECT_TRUE(test::TensorsNear(RunOne(ConcatModel(-1, 1), in), Cat(rows, 3), 0, 0)) << p;
    rows.clear();
    for (const Tensor& t : list) rows.push_back(Reshaped(t, {1, 2, 3, 4}));
    EXPECT_TRUE(test::TensorsNear(RunOne(ConcatModel(0, 1), in), Cat(rows, 0), 0, 0)) << p;
  }
  // Before specialization the stacked axis is unknown, the others known.
  ImportedModel model = Import(ConcatModel(-1, 1));
  EXPECT_EQ(TypeToString(model.graph->body->type).rfind("f32[2, 3, 4, ", 0), 0u)
      << TypeToString(model.graph->body->type);
  Error e = ErrorOf([&] { Import(ConcatModel(4, 1)); });
  EXPECT_EQ(e.code(), ErrorCode::kTypeError);
  EXPECT_THAT(e.what(), HasSubstr("cat"));
}

// SplitToSequence of a symbolic-length input: without a split (keepdims 1 and 0), with a
// scalar split (pieces of that size, the last smaller) and with a vector of sizes (a zero-size
// piece among them); SequenceLength and SequenceAt of the pieces.
onnx::ModelProto SplitModel(const std::string& split_kind, int64_t keepdims, bool length) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {3, std::string("n")});
  std::vector<std::string> ins = {"x"};
  if (split_kind == "scalar") AddInput(m, "k", {}, onnx::TensorProto::INT64);
  if (split_kind == "vector") AddInput(m, "k", {3}, onnx::TensorProto::INT64);
  if (split_kind != "none") ins.push_back("k");
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  onnx::NodeProto* n = AddNode(m, "SplitToSequence", ins, {"s"}, "split");
  AttrInt(n, "axis", -1);
  if (keepdims != 1) AttrInt(n, "keepdims", keepdims);
  if (length) {
    AddNode(m, "SequenceLength", {"s"}, {"y"}, "len");
    AddOutput(m, "y", onnx::TensorProto::INT64);
  } else {
    AddNode(m, "SequenceAt", {"s", "q"}, {"y"}, "at");
    AddOutput(m, "y");
  }
  return m;
}

TEST(OnnxImportSequence, SplitToSequenceEveryWayWithLengthAndAt) {
  for (int64_t n : {1, 5, 7}) {
    Tensor x = RandomTensor(DType::kFloat32, {3, n}, 20 + n);
    const std::map<std::string, int64_t> dims = {{"n", n}};
    // No split: n pieces of width 1; keepdims 0 drops the axis.
    EXPECT_EQ(RunOne(SplitModel("none", 1, true), {x, I64(0)}, dims).data<int64_t>()[0], n);
    for (int64_t q : {int64_t{0}, n - 1, -n}) {
      const int64_t j = q < 0 ? q + n : q;
      EXPECT_TRUE(test::TensorsNear(RunOne(SplitModel("none", 1, false), {x, I64(q)}, dims),
                                    Piece(x, 1, j, j + 1), 0, 0));
      EXPECT_TRUE(test::TensorsNear(RunOne(SplitModel("none", 0, false), {x, I64(q)}, dims),
                                    Reshaped(Piece(x, 1, j, j + 1), {3}), 0, 0));
    }
    // A scalar split: pieces of 2, the last one smaller when n is odd.
    const int64_t pieces = (n + 1) / 2;
    EXPECT_EQ(RunOne(SplitModel("scalar", 1, true), {x, I64(2), I64(0)}, dims).data<int64_t>()[0],
              pieces);
    EXPECT_TRUE(
        test::TensorsNear(RunOne(SplitModel("scalar", 1, false), {x, I64(2), I64(-1)}, dims),
                          Piece(x, 1, 2 * (pieces - 1), n), 0, 0));
    // A vector of sizes with an empty piece; keepdims does not apply.
    Tensor sizes = Tensor::FromVector<int64_t>({3}, {n - 1, 0, 1});
    EXPECT_EQ(RunOne(SplitModel("vector", 0, true), {x, sizes, I64(0)}, dims).data<int64_t>()[0],
              3);
    EXPECT_TRUE(test::TensorsNear(RunOne(SplitModel("vector", 0, false), {x, sizes, I64(1)}, dims),
                                  Piece(x, 1, n - 1, n - 1), 0, 0));
    EXPECT_TRUE(test::TensorsNear(RunOne(SplitModel("vector", 0, false), {x, sizes, I64(2)}, dims),
                                  Piece(x, 1, n - 1, n), 0, 0));
  }
  // Sizes that do not sum to the axis, and a split size of 0, name the node.
  Tensor x = RandomTensor(DType::kFloat32, {3, 4}, 30);
  ImportedModel model = Import(SplitModel("vector", 1, true));
  Error e = ErrorOf([&] {
    Interpret(model.graph, {x, Tensor::FromVector<int64_t>({3}, {1, 1, 1}), I64(0)});
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'split'"), HasSubstr("sums to 3")));
  model = Import(SplitModel("scalar", 1, true));
  e = ErrorOf([&] { Interpret(model.graph, {x, I64(0), I64(0)}); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'split'"), HasSubstr("must be positive")));
  // More pieces than kiln compiles: unsupported, naming the node, whatever the count.
  Tensor wide = RandomTensor(DType::kFloat32, {3, kMaxUnrolledIterations + 1}, 31);
  model = Import(SplitModel("none", 1, true));
  e = ErrorOf([&] { Interpret(model.graph, {wide, I64(0)}); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'split'"), HasSubstr("more than the 4096")));
}

TEST(OnnxImportSequence, IllTypedSequencesAreTypeErrorsNamingTheNode) {
  // Elements of different dtypes, and of different ranks.
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "a", {2});
  AddInput(m, "b", {2}, onnx::TensorProto::INT64);
  AddNode(m, "SequenceConstruct", {"a", "b"}, {"s"}, "mixed");
  AddNode(m, "SequenceLength", {"s"}, {"y"}, "len");
  AddOutput(m, "y", onnx::TensorProto::INT64);
  Error e = ImportError(m);
  EXPECT_EQ(e.code(), ErrorCode::kTypeError);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("mixed"), HasSubstr("different dtypes")));

  m = NewModel(13);
  AddInput(m, "a", {2});
  AddInput(m, "b", {2, 2});
  AddNode(m, "SequenceEmpty", {}, {"s0"}, "empty");
  AddNode(m, "SequenceInsert", {"s0", "a"}, {"s1"}, "first");
  AddNode(m, "SequenceInsert", {"s1", "b"}, {"s2"}, "second");
  AddNode(m, "SequenceLength", {"s2"}, {"y"}, "len");
  AddOutput(m, "y", onnx::TensorProto::INT64);
  e = ImportError(m);
  EXPECT_EQ(e.code(), ErrorCode::kTypeError);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("second"), HasSubstr("different ranks")));

  // A tensor where a sequence belongs.
  m = NewModel(13);
  AddInput(m, "a", {2});
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  AddNode(m, "SequenceAt", {"a", "q"}, {"y"}, "at");
  AddOutput(m, "y");
  e = ImportError(m);
  EXPECT_EQ(e.code(), ErrorCode::kTypeError);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("at"), HasSubstr("must be a sequence")));

  // Reading from or concatenating a sequence that never holds an element.
  m = NewModel(13);
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  AddNode(m, "SequenceEmpty", {}, {"s"}, "empty");
  AddNode(m, "SequenceAt", {"s", "q"}, {"y"}, "read");
  AddOutput(m, "y");
  e = ImportError(m);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("read"), HasSubstr("holds no element")));
}

// A position computed from input data (an argmax): the input it is computed from becomes a
// value input, so the position is still known at specialization.
TEST(OnnxImportSequence, APositionComputedFromASmallInputIsResolved) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "a", {2});
  AddInput(m, "b", {2});
  AddNode(m, "SequenceConstruct", {"a", "b"}, {"s"}, "make");
  onnx::NodeProto* n = AddNode(m, "ArgMax", {"a"}, {"i"}, "pick");
  AttrInt(n, "keepdims", 0);
  AddNode(m, "SequenceAt", {"s", "i"}, {"y"}, "at");
  AddOutput(m, "y");
  ImportedModel model = Import(m);
  EXPECT_EQ(ValueInputs(model.graph), std::vector<int>{0});
  Tensor b = RandomTensor(DType::kFloat32, {2}, 5);
  for (float first : {0.5f, 3.0f}) {
    Tensor a = Tensor::FromVector<float>({2}, {first, 2.0f});
    EXPECT_TRUE(test::TensorsNear(Interpret(model.graph, {a, b}).at(0), first > 2 ? a : b, 0, 0));
  }
}

// A subgraph attribute `name` of node `n` (a Loop's or SequenceMap's body, an If's branch),
// the graph named so too.
onnx::GraphProto* BodyAttr(onnx::NodeProto* n, const std::string& name) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  g->set_name(name);
  return g;
}

// An If whose branches make sequences of different lengths and element shapes, on a condition
// given as an input: typed before specialization as what both share, resolved to the taken
// branch's elements.
onnx::ModelProto IfModel() {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "a", {2, 3});
  AddInput(m, "b", {4, 3});
  AddInput(m, "c", {}, onnx::TensorProto::BOOL);
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  onnx::NodeProto* n = AddNode(m, "If", {"c"}, {"s"}, "choose");
  auto branch = [&](const std::string& name, const std::vector<std::string>& elements) {
    onnx::GraphProto* g = BodyAttr(n, name);
    onnx::NodeProto* make = g->add_node();
    make->set_op_type("SequenceConstruct");
    make->set_name(name + "_make");
    for (const std::string& e : elements) make->add_input(e);
    make->add_output(name + "_s");
    g->add_output()->set_name(name + "_s");
  };
  branch("then_branch", {"a", "b"});
  branch("else_branch", {"b"});
  AddNode(m, "SequenceAt", {"s", "q"}, {"y"}, "at");
  AddOutput(m, "y");
  return m;
}

TEST(OnnxImportSequence, IfBranchesOfDifferentSequencesResolvePerCondition) {
  ImportedModel model = Import(IfModel());
  EXPECT_EQ(ValueInputs(model.graph), (std::vector<int>{2, 3}));
  const TensorTypeNode* y = AsTensor(model.graph->body->type);
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->ndim(), 2);
  EXPECT_EQ(y->shape[1], Dim(3));
  Tensor a = RandomTensor(DType::kFloat32, {2, 3}, 41),
         b = RandomTensor(DType::kFloat32, {4, 3}, 42);
  for (bool c : {true, false})
    for (int64_t q : {0, -1}) {
      const Tensor& want = c && q == 0 ? a : b;
      EXPECT_TRUE(
          test::TensorsNear(RunOne(IfModel(), {a, b, Tensor::Scalar<bool>(c), I64(q)}), want, 0, 0))
          << c << " " << q;
    }
  // The else branch has one element: position 1 is out of range only there.
  Error e = ErrorOf([&] { Interpret(model.graph, {a, b, Tensor::Scalar<bool>(false), I64(1)}); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'at'"), HasSubstr("sequence of 1 elements")));
}

// --- Loops and SequenceMap ------------------------------------------------------------------

// A subgraph input of a tensor (rank -1: no shape) or sequence type.
void GraphInput(onnx::GraphProto* g, const std::string& name, int32_t elem, bool sequence) {
  onnx::ValueInfoProto* v = g->add_input();
  v->set_name(name);
  onnx::TypeProto* t = v->mutable_type();
  if (sequence) t = t->mutable_sequence_type()->mutable_elem_type();
  t->mutable_tensor_type()->set_elem_type(elem);
}

onnx::NodeProto* GraphNode(onnx::GraphProto* g, const std::string& op,
                           const std::vector<std::string>& ins,
                           const std::vector<std::string>& outs) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  for (const std::string& i : ins) n->add_input(i);
  for (const std::string& o : outs) n->add_output(o);
  return n;
}

// A Loop that carries a sequence from SequenceEmpty and appends x + i at iteration i; the
// result stacked. The trip count is an input, or the constant 4.
onnx::ModelProto LoopModel(bool trip_input) {
  onnx::ModelProto m = NewModel(13);
  AddInput(m, "x", {3});
  if (trip_input) AddInput(m, "trips", {}, onnx::TensorProto::INT64);
  if (!trip_input) AddInit(m, "trips", I64(4));
  AddInit(m, "yes", Tensor::Scalar<bool>(true));
  AddNode(m, "SequenceEmpty", {}, {"s0"}, "empty");
  onnx::NodeProto* loop = AddNode(m, "Loop", {"trips", "yes", "s0"}, {"s"}, "loop");
  onnx::GraphProto* g = BodyAttr(loop, "body");
  GraphInput(g, "i", onnx::TensorProto::INT64, false);
  GraphInput(g, "c", onnx::TensorProto::BOOL, false);
  GraphInput(g, "acc", onnx::TensorProto::FLOAT, true);
  AttrInt(GraphNode(g, "Cast", {"i"}, {"fi"}), "to", onnx::TensorProto::FLOAT);
  GraphNode(g, "Add", {"x", "fi"}, {"v"});
  GraphNode(g, "SequenceInsert", {"acc", "v"}, {"acc2"});
  GraphNode(g, "Identity", {"c"}, {"c2"});
  g->add_output()->set_name("c2");
  g->add_output()->set_name("acc2");
  onnx::NodeProto* cat = AddNode(m, "ConcatFromSequence", {"s"}, {"y"}, "stack");
  AttrInt(cat, "axis", 0);
  AttrInt(cat, "new_axis", 1);
  AddOutput(m, "y");
  return m;
}

Tensor Rows(const Tensor& x, int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < x.numel(); ++k) v.push_back(x.data<float>()[k] + i);
  return Tensor::FromVector<float>({n, x.numel()}, v);
}

TEST(OnnxImportSequence, LoopsCarrySequencesUnrolledAtImportOrSpecialization) {
  Tensor x = RandomTensor(DType::kFloat32, {3}, 71);
  EXPECT_TRUE(test::TensorsNear(RunOne(LoopModel(false), {x}), Rows(x, 4), 0, 0));
  ImportedModel model = Import(LoopModel(true));
  EXPECT_THAT(Print(model.graph), HasSubstr("dyn.loop("));
  EXPECT_EQ(ValueInputs(model.graph), std::vector<int>{1});  // the trip count, not x
  for (int64_t n : {1, 5, 2})
    EXPECT_TRUE(test::TensorsNear(RunOne(LoopModel(true), {x, I64(n)}), Rows(x, n), 0, 0)) << n;
  // No iteration: an empty sequence, which cannot be stacked (its shape is unknown).
  Error e = ErrorOf([&] { Interpret(model.graph, {x, I64(0)}); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'stack'"), HasSubstr("empty sequence")));
}

// SequenceMap over a sequence input (elements of different lengths) and a tensor: the body
// adds the tensor and takes the element's shape; two output sequences.
onnx::ModelProto MapModel() {
  onnx::ModelProto m = NewModel(17);
  GraphInput(m.mutable_graph(), "s", onnx::TensorProto::FLOAT, true);
  AddInput(m, "t", {1});
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  onnx::NodeProto* map = AddNode(m, "SequenceMap", {"s", "t"}, {"sums", "shapes"}, "map");
  onnx::GraphProto* g = BodyAttr(map, "body");
  GraphInput(g, "e", onnx::TensorProto::FLOAT, false);
  GraphInput(g, "u", onnx::TensorProto::FLOAT, false);
  GraphNode(g, "Add", {"e", "u"}, {"sum"});
  GraphNode(g, "Shape", {"e"}, {"shape"});
  g->add_output()->set_name("sum");
  g->add_output()->set_name("shape");
  onnx::NodeProto* cat = AddNode(m, "ConcatFromSequence", {"sums"}, {"y"}, "join");
  AttrInt(cat, "axis", 0);
  AddNode(m, "SequenceAt", {"shapes", "q"}, {"z"}, "pick");
  AddOutput(m, "y");
  AddOutput(m, "z", onnx::TensorProto::INT64);
  return m;
}

TEST(OnnxImportSequence, SequenceMapRunsItsBodyOnEveryElement) {
  OnnxImportOptions o;
  o.sequence_inputs["s"] = {{Dim::Symbol("a")}, {Dim::Symbol("b")}, {Dim::Symbol("c")}};
  std::string bytes = Bytes(MapModel());
  ImportedModel model = ImportOnnxBuffer(bytes.data(), bytes.size(), o);
  EXPECT_EQ(ValueInputs(model.graph), std::vector<int>{4});  // q; not the elements
  std::vector<Tensor> parts = {RandomTensor(DType::kFloat32, {2}, 81),
                               RandomTensor(DType::kFloat32, {5}, 82),
                               RandomTensor(DType::kFloat32, {1}, 83)};
  Tensor t = Tensor::FromVector<float>({1}, {0.5f});
  for (int64_t q : {0, 1, 2}) {
    std::vector<Tensor> out = Interpret(model.graph, {parts[0], parts[1], parts[2], t, I64(q)});
    ASSERT_EQ(out.size(), 2u);
    std::vector<float> want;
    for (const Tensor& p : parts)
      for (int64_t k = 0; k < p.numel(); ++k) want.push_back(p.data<float>()[k] + 0.5f);
    EXPECT_TRUE(test::TensorsNear(out[0], Tensor::FromVector<float>({8}, want), 0, 0));
    EXPECT_EQ(out[1].data<int64_t>()[0], parts[q].numel()) << q;
  }
}

// --- Sequence inputs and data files ----------------------------------------------------------

// A sequence input `s` of f32 tensors (no shape: the model cannot say the length or the
// ranks), a tensor t appended to it, and the element at position q and the length returned.
onnx::ModelProto SequenceInputModel() {
  onnx::ModelProto m = NewModel(13);
  GraphInput(m.mutable_graph(), "s", onnx::TensorProto::FLOAT, true);
  AddInput(m, "t", {3});
  AddInput(m, "q", {}, onnx::TensorProto::INT64);
  AddNode(m, "SequenceInsert", {"s", "t"}, {"s2"}, "append");
  AddNode(m, "SequenceAt", {"s2", "q"}, {"y"}, "at");
  AddNode(m, "SequenceLength", {"s2"}, {"n"}, "len");
  AddOutput(m, "y");
  AddOutput(m, "n", onnx::TensorProto::INT64);
  return m;
}

ImportedModel ImportWith(const onnx::ModelProto& m, std::vector<Shape> elements) {
  OnnxImportOptions o;
  o.sequence_inputs["s"] = std::move(elements);
  std::string bytes = Bytes(m);
  return ImportOnnxBuffer(bytes.data(), bytes.size(), o);
}

TEST(OnnxImportSequence, SequenceInputsTakeTheirElementShapesFromTheOptions) {
  onnx::ModelProto m = SequenceInputModel();
  Error e = ImportError(m);
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("graph input 's'"), HasSubstr("sequence_inputs")));

  // Two elements, one of a symbolic length: parameters s.0 and s.1 before t and q.
  ImportedModel model = ImportWith(m, {{Dim(3)}, {Dim::Symbol("k")}});
  EXPECT_EQ(model.input_names, (std::vector<std::string>{"s.0", "s.1", "t", "q"}));
  Tensor a = RandomTensor(DType::kFloat32, {3}, 51), b = RandomTensor(DType::kFloat32, {3}, 52),
         t = RandomTensor(DType::kFloat32, {3}, 53);
  for (int64_t q : {0, 1, 2, -1}) {
    std::vector<Tensor> out = Interpret(model.graph, {a, b, t, I64(q)});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(test::TensorsNear(out[0], q == 0 ? a : q == 1 ? b : t, 0, 0)) << q;
    EXPECT_EQ(out[1].data<int64_t>()[0], 3);
  }
  // No elements: the sequence is t alone.
  model = ImportWith(m, {});
  EXPECT_EQ(model.input_names, (std::vector<std::string>{"t", "q"}));
  std::vector<Tensor> out = Interpret(model.graph, {t, I64(0)});
  EXPECT_TRUE(test::TensorsNear(out.at(0), t, 0, 0));
  EXPECT_EQ(out.at(1).data<int64_t>()[0], 1);
  // Elements of another rank than t: a type error naming the node that joins them.
  e = ErrorOf([&] { ImportWith(m, {{Dim(3), Dim(1)}}); });
  EXPECT_EQ(e.code(), ErrorCode::kTypeError);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("append"), HasSubstr("different ranks")));
}

TEST(OnnxImportSequence, SequenceDataFilesReadAsTheirElements) {
  test::TempDir dir("kiln-onnx-seq");
  auto write = [&](const std::string& name, const google::protobuf::MessageLite& msg) {
    std::string path = dir.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << msg.SerializeAsString();
    return path;
  };
  Tensor a = RandomTensor(DType::kFloat32, {2, 3}, 61);
  Tensor b = Tensor::FromVector<float>({1}, {4.0f});
  onnx::SequenceProto seq;
  seq.set_name("seq");
  seq.set_elem_type(onnx::SequenceProto::TENSOR);
  *seq.add_tensor_values() = ToProto("a", a);
  *seq.add_tensor_values() = ToProto("b", b);
  std::string name;
  std::vector<Tensor> got = ReadOnnxSequenceFile(write("two.pb", seq), &name);
  EXPECT_EQ(name, "seq");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(test::TensorsNear(got[0], a, 0, 0));
  EXPECT_TRUE(test::TensorsNear(got[1], b, 0, 0));
  onnx::SequenceProto empty;
  empty.set_elem_type(onnx::SequenceProto::TENSOR);
  EXPECT_TRUE(ReadOnnxSequenceFile(write("empty.pb", empty)).empty());
  // A sequence of sequences, and bytes that are no message, are errors naming the file.
  onnx::SequenceProto nested;
  nested.set_elem_type(onnx::SequenceProto::SEQUENCE);
  *nested.add_sequence_values() = seq;
  Error e = ErrorOf([&] { ReadOnnxSequenceFile(write("nested.pb", nested)); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("nested.pb"));
  std::string junk_path = dir.path() + "/junk.pb";
  std::ofstream(junk_path, std::ios::binary) << std::string("\xff\xff\xff\x0f", 4);
  e = ErrorOf([&] { ReadOnnxSequenceFile(junk_path); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("junk.pb"));
}

}  // namespace
}  // namespace kiln
