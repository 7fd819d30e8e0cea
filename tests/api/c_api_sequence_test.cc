// Sequences through the C API (kiln.h): a model built with sequence ops that returns a sequence,
// run with kiln_engine_run_lists (the other runs refuse it, naming the output); ONNX backend
// cases with sequence inputs loaded with their elements' shapes (kiln_onnx_file_inputs_json,
// kiln_load_options_set_sequence_input) and compared with their SequenceProto data; and the
// misuses, each an error naming the argument.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "c_api_util.h"

namespace kiln::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<const kiln_tensor*> Elements(const kiln_tensor_list* list) {
  size_t n = 0;
  EXPECT_EQ(kiln_tensor_list_size(list, &n), KILN_OK) << kiln_last_error();
  std::vector<const kiln_tensor*> v(n);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(kiln_tensor_list_get(list, i, &v[i]), KILN_OK) << kiln_last_error();
  return v;
}

std::vector<int64_t> Shape(const kiln_tensor* t) {
  size_t rank = 0;
  EXPECT_EQ(kiln_tensor_rank(t, &rank), KILN_OK);
  std::vector<int64_t> dims(rank);
  EXPECT_EQ(kiln_tensor_shape(t, rank, dims.data()), KILN_OK);
  return dims;
}

template <typename T>
const T* Data(const kiln_tensor* t) {
  void* p = nullptr;
  EXPECT_EQ(kiln_tensor_data(t, &p), KILN_OK);
  return static_cast<const T*>(p);
}

// x: f32[3, n] -> (exp(x), x split into its n columns).
kiln_model* SplitModel() {
  kiln_graph_builder* b = nullptr;
  EXPECT_EQ(kiln_graph_builder_create("columns", &b), KILN_OK);
  const int64_t dims[2] = {3, 0};
  const char* syms[2] = {nullptr, "n"};
  kiln_value x = 0, e = 0, s = 0;
  KILN_EXPECT_OK(kiln_graph_builder_add_input(b, "x", KILN_F32, 2, dims, syms, &x));
  KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "exp", 1, &x, nullptr, "exp", &e));
  kiln_attrs* attrs = nullptr;
  KILN_EXPECT_OK(kiln_attrs_create(&attrs));
  KILN_EXPECT_OK(kiln_attrs_set_int(attrs, "axis", 1));
  KILN_EXPECT_OK(kiln_graph_builder_add_op(b, "seq.split", 1, &x, attrs, "split", &s));
  kiln_attrs_destroy(attrs);
  KILN_EXPECT_OK(kiln_graph_builder_add_output(b, e, "exp"));
  KILN_EXPECT_OK(kiln_graph_builder_add_output(b, s, "columns"));
  kiln_model* m = nullptr;
  KILN_EXPECT_OK(kiln_graph_builder_build(b, &m));
  kiln_graph_builder_destroy(b);
  return m;
}

TEST(CApiSequence, ASequenceOutputRunsAsAListAndOnlySo) {
  kiln_model* m = SplitModel();
  ASSERT_NE(m, nullptr);
  size_t outputs = 0;
  KILN_EXPECT_OK(kiln_model_num_outputs(m, &outputs));
  EXPECT_EQ(outputs, 2u);
  int seq0 = -1, seq1 = -1;
  KILN_EXPECT_OK(kiln_model_output_is_sequence(m, 0, &seq0));
  KILN_EXPECT_OK(kiln_model_output_is_sequence(m, 1, &seq1));
  EXPECT_EQ(seq0, 0);
  EXPECT_EQ(seq1, 1);
  kiln_dtype dtype = KILN_I8;
  size_t rank = 0;
  KILN_EXPECT_OK(kiln_model_output_type(m, 1, &dtype, &rank));  // the elements'
  EXPECT_EQ(dtype, KILN_F32);
  EXPECT_EQ(rank, 2u);

  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  for (int64_t n : {4, 1, 7}) {
    const int64_t dims[2] = {3, n};
    kiln_tensor* x = nullptr;
    KILN_ASSERT_OK(kiln_tensor_create(KILN_F32, 2, dims, &x));
    void* p = nullptr;
    KILN_EXPECT_OK(kiln_tensor_data(x, &p));
    for (int64_t i = 0; i < 3 * n; ++i) static_cast<float*>(p)[i] = static_cast<float>(i) * 0.25f;
    const kiln_tensor* in[1] = {x};
    kiln_tensor_list* out[2] = {nullptr, nullptr};
    KILN_ASSERT_OK(kiln_engine_run_lists(engine, m, 1, nullptr, in, 2, out));
    std::vector<const kiln_tensor*> e = Elements(out[0]), cols = Elements(out[1]);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NEAR(Data<float>(e[0])[1], std::exp(0.25f), 1e-5);
    ASSERT_EQ(cols.size(), static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_EQ(Shape(cols[c]), (std::vector<int64_t>{3, 1}));
      for (int64_t r = 0; r < 3; ++r)
        EXPECT_EQ(Data<float>(cols[c])[r], static_cast<float>(r * n + c) * 0.25f)
            << n << " " << c << " " << r;
    }
    // The list's misuses name the argument.
    const kiln_tensor* t = nullptr;
    EXPECT_EQ(kiln_tensor_list_get(out[1], static_cast<size_t>(n), &t), KILN_INVALID_ARGUMENT);
    EXPECT_THAT(kiln_last_error(), HasSubstr("out of range"));
    EXPECT_EQ(kiln_tensor_list_get(nullptr, 0, &t), KILN_INVALID_ARGUMENT);
    kiln_tensor_list_destroy(out[0]);
    kiln_tensor_list_destroy(out[1]);

    // The other runs refuse the model, naming the output and the way to run it.
    kiln_tensor* outs[2] = {nullptr, nullptr};
    EXPECT_EQ(kiln_engine_run(engine, m, 1, nullptr, in, 2, nullptr, outs), KILN_UNSUPPORTED);
    EXPECT_THAT(kiln_last_error(),
                AllOf(HasSubstr("'columns'"), HasSubstr("kiln_engine_run_lists")));
    EXPECT_EQ(outs[0], nullptr);
    kiln_tensor_destroy(x);
  }
  kiln_binding* binding = nullptr;
  EXPECT_EQ(kiln_binding_create(engine, m, &binding), KILN_UNSUPPORTED);
  EXPECT_THAT(kiln_last_error(), HasSubstr("'columns'"));
  // A wrong output count, and NULL outputs.
  kiln_tensor_list* one[1] = {nullptr};
  EXPECT_EQ(kiln_engine_run_lists(engine, m, 0, nullptr, nullptr, 1, one), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error(), HasSubstr("num_outputs is 1"));
  EXPECT_EQ(kiln_engine_run_lists(engine, m, 0, nullptr, nullptr, 2, nullptr),
            KILN_INVALID_ARGUMENT);
  int seq = 0;
  EXPECT_EQ(kiln_model_output_is_sequence(m, 2, &seq), KILN_INVALID_ARGUMENT);
  kiln_engine_destroy(engine);
  kiln_model_destroy(m);
}

TEST(CApiSequence, SequenceInputOptionsCheckTheirArguments) {
  kiln_load_options* o = nullptr;
  KILN_ASSERT_OK(kiln_load_options_create(&o));
  const size_t ranks[2] = {1, 2};
  const int64_t dims[3] = {4, -1, 2};
  KILN_EXPECT_OK(kiln_load_options_set_sequence_input(o, "s", 2, ranks, dims));
  KILN_EXPECT_OK(kiln_load_options_set_sequence_input(o, "empty", 0, nullptr, nullptr));
  EXPECT_EQ(kiln_load_options_set_sequence_input(o, nullptr, 0, nullptr, nullptr),
            KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_load_options_set_sequence_input(o, "s", 2, nullptr, dims), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error(), HasSubstr("ranks is NULL"));
  const int64_t bad[3] = {4, -2, 2};
  EXPECT_EQ(kiln_load_options_set_sequence_input(o, "s", 2, ranks, bad), KILN_INVALID_ARGUMENT);
  EXPECT_THAT(kiln_last_error(), AllOf(HasSubstr("'s' element 1 dim 0"), HasSubstr("-2")));
  kiln_load_options_destroy(o);
}

// The ONNX backend cases whose inputs or outputs are sequences, as a user would run them. Needs
// Debian's libonnx-testdata (installed by scripts/dev.sh).
const char kData[] = "/usr/share/libonnx-testdata/data/node";

TEST(CApiSequence, BackendSequenceInputsLoadWithTheirElementShapes) {
  const std::string dir = std::string(kData) + "/test_sequence_insert_at_front";
  if (!std::filesystem::exists(dir + "/model.onnx"))
    GTEST_SKIP() << "no " << dir << " (Debian's libonnx-testdata is not installed)";
  const std::string model_path = dir + "/model.onnx";
  char* json = nullptr;
  KILN_ASSERT_OK(kiln_onnx_file_inputs_json(model_path.c_str(), &json));
  EXPECT_THAT(json, AllOf(HasSubstr("{\"name\":\"sequence\",\"sequence\":true}"),
                          HasSubstr("{\"name\":\"tensor\",\"sequence\":false}")));
  kiln_string_free(json);

  // Without the elements' shapes: unsupported, naming the input and the option.
  kiln_model* m = nullptr;
  EXPECT_EQ(kiln_model_load_onnx_file(model_path.c_str(), &m), KILN_UNSUPPORTED);
  EXPECT_THAT(kiln_last_error(),
              AllOf(HasSubstr("'sequence'"), HasSubstr("kiln_load_options_set_sequence_input")));

  const std::string set = dir + "/test_data_set_0/";
  kiln_tensor_list* seq = nullptr;
  KILN_ASSERT_OK(kiln_tensor_list_read_onnx_pb((set + "input_0.pb").c_str(), &seq));
  std::vector<const kiln_tensor*> elements = Elements(seq);
  ASSERT_FALSE(elements.empty());
  std::vector<size_t> ranks;
  std::vector<int64_t> dims;
  for (const kiln_tensor* t : elements) {
    std::vector<int64_t> s = Shape(t);
    ranks.push_back(s.size());
    for (size_t k = 0; k < s.size(); ++k) dims.push_back(-1);  // any size: one model serves all
  }
  kiln_load_options* o = nullptr;
  KILN_ASSERT_OK(kiln_load_options_create(&o));
  KILN_EXPECT_OK(
      kiln_load_options_set_sequence_input(o, "sequence", ranks.size(), ranks.data(), dims.data()));
  KILN_ASSERT_OK(kiln_model_load_onnx_file_with(model_path.c_str(), o, &m));
  kiln_load_options_destroy(o);
  const char* name = nullptr;
  KILN_EXPECT_OK(kiln_model_input_name(m, 0, &name));
  EXPECT_STREQ(name, "sequence.0");

  std::vector<const kiln_tensor*> in = elements;
  std::vector<kiln_tensor*> owned;
  for (const char* f : {"input_1.pb", "input_2.pb"}) {
    kiln_tensor* t = nullptr;
    KILN_ASSERT_OK(kiln_tensor_read_onnx_pb((set + f).c_str(), &t));
    owned.push_back(t);
    in.push_back(t);
  }
  kiln_engine* engine = nullptr;
  KILN_ASSERT_OK(kiln_engine_create(nullptr, &engine));
  kiln_tensor_list* out[1] = {nullptr};
  KILN_ASSERT_OK(kiln_engine_run_lists(engine, m, in.size(), nullptr, in.data(), 1, out));
  kiln_tensor_list* want = nullptr;
  KILN_ASSERT_OK(kiln_tensor_list_read_onnx_pb((set + "output_0.pb").c_str(), &want));
  std::vector<const kiln_tensor*> got = Elements(out[0]), expected = Elements(want);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(Shape(got[i]), Shape(expected[i])) << i;
    size_t nbytes = 0;
    KILN_EXPECT_OK(kiln_tensor_nbytes(got[i], &nbytes));
    EXPECT_EQ(std::memcmp(Data<char>(got[i]), Data<char>(expected[i]), nbytes), 0) << i;
  }
  kiln_tensor_list_destroy(want);
  kiln_tensor_list_destroy(out[0]);
  kiln_tensor_list_destroy(seq);
  for (kiln_tensor* t : owned) kiln_tensor_destroy(t);
  kiln_engine_destroy(engine);
  kiln_model_destroy(m);

  // A file that is not a SequenceProto names itself.
  EXPECT_NE(kiln_tensor_list_read_onnx_pb("/no/such/file.pb", &seq), KILN_OK);
  EXPECT_THAT(kiln_last_error(), HasSubstr("/no/such/file.pb"));
}

}  // namespace
}  // namespace kiln::test
