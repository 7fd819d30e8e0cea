/* The C API from C99: every function of kiln.h, its error paths (NULL handles, unknown names,
 * wrong ranks and dtypes, with the messages checked), and an MLP with a symbolic batch built
 * through the graph builder, run for batch 1 and 3 and checked against a hand computation.
 *
 * Usage: c_api_test ONNX_NODE_DIR   (the libonnx-testdata `node/` folder, for the ONNX part)
 * Prints one line per failed check and `c_api_test: N failures`; exits non-zero on any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static int g_failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              kiln_last_error());                                                              \
      ++g_failures;                                                                            \
    }                                                                                          \
  } while (0)

#define OK(call) CHECK((call) == KILN_OK)

/* A call that must fail with `status` and a message that contains `text`. */
#define FAILS(call, status, text)                                                                 \
  do {                                                                                            \
    kiln_status s_ = (call);                                                                      \
    if (s_ != (status) || !strstr(kiln_last_error(), (text))) {                                   \
      fprintf(stderr, "%s:%d: %s: expected %s with \"%s\", got %s: \"%s\"\n", __FILE__, __LINE__, \
              #call, kiln_status_name(status), (text), kiln_status_name(s_), kiln_last_error());  \
      ++g_failures;                                                                               \
    }                                                                                             \
  } while (0)

/* Output parameters must be untouched by a failing call: they start as this sentinel. */
static char g_sentinel_storage;
#define SENTINEL ((void*)&g_sentinel_storage)

static void test_basics(void) {
  int major = -1, minor = -1, patch = -1;
  char buf[64];
  CHECK(strcmp(kiln_last_error(), "") == 0);
  kiln_version(&major, &minor, &patch);
  CHECK(major == KILN_VERSION_MAJOR && minor == KILN_VERSION_MINOR && patch == KILN_VERSION_PATCH);
  kiln_version(NULL, NULL, NULL);
  sprintf(buf, "%d.%d.%d", major, minor, patch);
  CHECK(strcmp(kiln_version_string(), buf) == 0);

  CHECK(strcmp(kiln_status_name(KILN_OK), "KILN_OK") == 0);
  CHECK(strcmp(kiln_status_name(KILN_INVALID_ARGUMENT), "KILN_INVALID_ARGUMENT") == 0);
  CHECK(strcmp(kiln_status_name(KILN_NOT_FOUND), "KILN_NOT_FOUND") == 0);
  CHECK(strcmp(kiln_status_name(KILN_UNSUPPORTED), "KILN_UNSUPPORTED") == 0);
  CHECK(strcmp(kiln_status_name(KILN_TYPE_ERROR), "KILN_TYPE_ERROR") == 0);
  CHECK(strcmp(kiln_status_name(KILN_COMPILE_ERROR), "KILN_COMPILE_ERROR") == 0);
  CHECK(strcmp(kiln_status_name(KILN_OUT_OF_MEMORY), "KILN_OUT_OF_MEMORY") == 0);
  CHECK(strcmp(kiln_status_name(KILN_CANCELLED), "KILN_CANCELLED") == 0);
  CHECK(strcmp(kiln_status_name(KILN_INTERNAL), "KILN_INTERNAL") == 0);
  CHECK(strcmp(kiln_status_name(KILN_PARSE_ERROR), "KILN_PARSE_ERROR") == 0);
  CHECK(strcmp(kiln_status_name((kiln_status)77), "KILN_UNKNOWN_STATUS") == 0);

  CHECK(strcmp(kiln_dtype_name(KILN_F32), "f32") == 0);
  CHECK(strcmp(kiln_dtype_name(KILN_I64), "i64") == 0);
  CHECK(strcmp(kiln_dtype_name(KILN_BOOL), "bool") == 0);
  CHECK(strcmp(kiln_dtype_name(KILN_U64), "u64") == 0 && kiln_dtype_size(KILN_U32) == 4 &&
        kiln_dtype_size(KILN_U16) == 2);
  CHECK(kiln_dtype_name((kiln_dtype)99) == NULL);
  CHECK(kiln_dtype_size(KILN_F32) == 4 && kiln_dtype_size(KILN_F16) == 2 &&
        kiln_dtype_size(KILN_F64) == 8 && kiln_dtype_size(KILN_U8) == 1);
  CHECK(kiln_dtype_size((kiln_dtype)99) == 0);
  kiln_string_free(NULL);
}

static void test_tensors(void) {
  const int64_t shape[2] = {2, 3};
  const int64_t bad_shape[2] = {2, -1};
  float values[6] = {1, 2, 3, 4, 5, 6};
  float back[6] = {0};
  int64_t dims[4] = {0};
  kiln_tensor* t = NULL;
  kiln_tensor* w = NULL;
  kiln_tensor* out = (kiln_tensor*)SENTINEL;
  kiln_dtype dtype = KILN_I8;
  size_t rank = 0, nbytes = 0;
  int64_t numel = 0;
  void* data = NULL;
  int i;

  OK(kiln_tensor_create(KILN_F32, 2, shape, &t));
  OK(kiln_tensor_dtype(t, &dtype));
  CHECK(dtype == KILN_F32);
  OK(kiln_tensor_rank(t, &rank));
  CHECK(rank == 2);
  OK(kiln_tensor_shape(t, 4, dims));
  CHECK(dims[0] == 2 && dims[1] == 3);
  OK(kiln_tensor_num_elements(t, &numel));
  CHECK(numel == 6);
  OK(kiln_tensor_nbytes(t, &nbytes));
  CHECK(nbytes == 24);
  OK(kiln_tensor_data(t, &data));
  CHECK(data != NULL && ((const float*)data)[5] == 0.0f); /* zero-filled */
  OK(kiln_tensor_copy_from_host(t, values, sizeof values));
  CHECK(((const float*)data)[4] == 5.0f);
  OK(kiln_tensor_copy_to_host(t, back, sizeof back));
  CHECK(back[0] == 1.0f && back[5] == 6.0f);

  /* A wrapped buffer is used in place: no copy either way. */
  OK(kiln_tensor_wrap(KILN_F32, 2, shape, values, sizeof values, &w));
  OK(kiln_tensor_data(w, &data));
  CHECK(data == (void*)values);
  values[2] = 42.0f;
  OK(kiln_tensor_copy_to_host(w, back, sizeof back));
  CHECK(back[2] == 42.0f);

  /* A scalar: rank 0, shape may be NULL. */
  kiln_tensor_destroy(t);
  t = NULL;
  OK(kiln_tensor_create(KILN_I64, 0, NULL, &t));
  OK(kiln_tensor_num_elements(t, &numel));
  CHECK(numel == 1);
  OK(kiln_tensor_shape(t, 0, NULL));

  /* Errors: NULL handles and outputs, bad shapes and sizes; outputs untouched. */
  FAILS(kiln_tensor_create(KILN_F32, 2, shape, NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  FAILS(kiln_tensor_create(KILN_F32, 2, bad_shape, &out), KILN_INVALID_ARGUMENT, "-1");
  CHECK(out == (kiln_tensor*)SENTINEL);
  FAILS(kiln_tensor_create(KILN_F32, 2, NULL, &out), KILN_INVALID_ARGUMENT, "shape is NULL");
  FAILS(kiln_tensor_create((kiln_dtype)42, 2, shape, &out), KILN_INVALID_ARGUMENT,
        "42 is not a kiln_dtype");
  FAILS(kiln_tensor_wrap(KILN_F32, 2, shape, values, 20, &out), KILN_INVALID_ARGUMENT,
        "needs 24 bytes, the buffer has 20");
  FAILS(kiln_tensor_wrap(KILN_F32, 1, shape, (char*)values + 1, 8, &out), KILN_INVALID_ARGUMENT,
        "not aligned");
  FAILS(kiln_tensor_wrap(KILN_F32, 2, shape, NULL, 24, &out), KILN_INVALID_ARGUMENT,
        "data is NULL");
  CHECK(out == (kiln_tensor*)SENTINEL);
  FAILS(kiln_tensor_dtype(NULL, &dtype), KILN_INVALID_ARGUMENT,
        "kiln_tensor_dtype: tensor is NULL");
  FAILS(kiln_tensor_dtype(w, NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  FAILS(kiln_tensor_rank(NULL, &rank), KILN_INVALID_ARGUMENT, "tensor is NULL");
  FAILS(kiln_tensor_shape(w, 1, dims), KILN_INVALID_ARGUMENT, "rank 2, dims holds only 1");
  FAILS(kiln_tensor_shape(NULL, 4, dims), KILN_INVALID_ARGUMENT, "tensor is NULL");
  FAILS(kiln_tensor_num_elements(NULL, &numel), KILN_INVALID_ARGUMENT, "tensor is NULL");
  FAILS(kiln_tensor_nbytes(w, NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  FAILS(kiln_tensor_data(NULL, &data), KILN_INVALID_ARGUMENT, "tensor is NULL");
  FAILS(kiln_tensor_copy_from_host(w, values, 4), KILN_INVALID_ARGUMENT, "holds 24 bytes, given 4");
  FAILS(kiln_tensor_copy_to_host(w, back, 25), KILN_INVALID_ARGUMENT, "holds 24 bytes, given 25");
  FAILS(kiln_tensor_copy_to_host(NULL, back, 24), KILN_INVALID_ARGUMENT, "tensor is NULL");
  FAILS(kiln_tensor_copy_from_host(w, NULL, 24), KILN_INVALID_ARGUMENT, "src is NULL");
  FAILS(kiln_tensor_read_onnx_pb("/nonexistent/input_0.pb", &out), KILN_INVALID_ARGUMENT,
        "/nonexistent/input_0.pb");
  FAILS(kiln_tensor_read_onnx_pb(NULL, &out), KILN_INVALID_ARGUMENT, "path is NULL");
  CHECK(out == (kiln_tensor*)SENTINEL);
  for (i = 0; i < 6; ++i) CHECK(values[i] == (i == 2 ? 42.0f : (float)(i + 1)));

  kiln_tensor_destroy(t);
  kiln_tensor_destroy(w); /* the buffer stays the caller's */
  kiln_tensor_destroy(NULL);
  values[0] = 7.0f; /* still ours to use */
}

static void after_hook(const char* pass, const char* module_text, void* user_data);

static void test_options(void) {
  kiln_options* o = NULL;
  kiln_options* bad = NULL;
  kiln_engine* e = (kiln_engine*)SENTINEL;

  OK(kiln_options_create(&o));
  OK(kiln_options_set_target(o, "llvm"));
  OK(kiln_options_set_opt_level(o, 3));
  OK(kiln_options_set_num_threads(o, 2));
  OK(kiln_options_set_cache_dir(o, NULL)); /* none */
  OK(kiln_options_set_cache_max_bytes(o, 1u << 20));
  OK(kiln_options_disable_pass(o, "FoldConstant"));
  OK(kiln_options_require_pass(o, "InferType"));
  OK(kiln_options_set_config_int(o, "fuse_ops.max_group_size", 4));
  OK(kiln_options_set_config_bool(o, "codegen.fast_math", 0));
  OK(kiln_options_set_max_specializations(o, 8));
  OK(kiln_options_set_pipeline(o, "InferType,FoldConstant"));
  OK(kiln_options_set_pipeline(o, "")); /* back to the default */
  OK(kiln_options_set_profiling(o, 0));

  FAILS(kiln_options_create(NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  FAILS(kiln_options_set_target(NULL, "llvm"), KILN_INVALID_ARGUMENT,
        "kiln_options_set_target: options is NULL");
  FAILS(kiln_options_set_target(o, NULL), KILN_INVALID_ARGUMENT, "target is NULL");
  FAILS(kiln_options_set_opt_level(o, -1), KILN_INVALID_ARGUMENT, "must be 0 to 3, got -1");
  FAILS(kiln_options_set_num_threads(o, -2), KILN_INVALID_ARGUMENT, "num_threads -2");
  FAILS(kiln_options_set_cache_dir(NULL, "/tmp"), KILN_INVALID_ARGUMENT, "options is NULL");
  FAILS(kiln_options_set_cache_max_bytes(o, 0), KILN_INVALID_ARGUMENT, "must be positive");
  FAILS(kiln_options_disable_pass(o, "NoSuchPass"), KILN_NOT_FOUND, "unknown pass 'NoSuchPass'");
  FAILS(kiln_options_require_pass(o, "AlsoMissing"), KILN_NOT_FOUND, "'AlsoMissing'");
  FAILS(kiln_options_set_config_int(o, "no.such.key", 1), KILN_INVALID_ARGUMENT, "no.such.key");
  FAILS(kiln_options_set_config_float(o, "fuse_ops.max_group_size", 1.5), KILN_INVALID_ARGUMENT,
        "must be int");
  FAILS(kiln_options_set_config_string(o, "codegen.fast_math", "yes"), KILN_INVALID_ARGUMENT,
        "codegen.fast_math");
  FAILS(kiln_options_set_config_bool(NULL, "codegen.fast_math", 1), KILN_INVALID_ARGUMENT,
        "options is NULL");
  FAILS(kiln_options_set_max_specializations(o, -1), KILN_INVALID_ARGUMENT, "-1");
  FAILS(kiln_options_set_pipeline(o, "InferType,NoSuchPass"), KILN_INVALID_ARGUMENT,
        "unknown pass 'NoSuchPass'");
  FAILS(kiln_options_set_profiling(NULL, 1), KILN_INVALID_ARGUMENT, "options is NULL");
  FAILS(kiln_options_add_instrument(o, NULL, NULL, 0, NULL), KILN_INVALID_ARGUMENT,
        "both hooks are NULL");
  FAILS(kiln_options_add_instrument_ir_of(o, NULL, NULL, "FuseOps", NULL), KILN_INVALID_ARGUMENT,
        "both hooks are NULL");
  FAILS(kiln_options_add_instrument_ir_of(o, after_hook, NULL, "FuseOps,NoSuchPass", NULL),
        KILN_NOT_FOUND, "unknown pass 'NoSuchPass'");

  OK(kiln_engine_create(o, &e));
  kiln_engine_destroy(e);
  e = (kiln_engine*)SENTINEL;
  OK(kiln_engine_create(NULL, &e)); /* defaults */
  kiln_engine_destroy(e);
  e = (kiln_engine*)SENTINEL;

  /* An option only the engine can judge: the target. */
  OK(kiln_options_create(&bad));
  OK(kiln_options_set_target(bad, "cuda"));
  FAILS(kiln_engine_create(bad, &e), KILN_UNSUPPORTED, "EngineOptions.target");
  CHECK(e == (kiln_engine*)SENTINEL);
  FAILS(kiln_engine_create(o, NULL), KILN_INVALID_ARGUMENT, "out is NULL");

  kiln_options_destroy(bad);
  kiln_options_destroy(o);
  kiln_options_destroy(NULL);
  kiln_engine_destroy(NULL);
}

/* ---- the MLP: y = relu(x @ w1 + b1) @ w2 + b2, probs = softmax(y), x: f32[batch, 4] ---- */

static const float kW1[4 * 3] = {0.5f,  -1.0f, 0.25f, 1.5f,  0.5f,   -0.75f,
                                 -0.5f, 2.0f,  1.0f,  0.25f, -1.25f, 0.5f};
static const float kB1[3] = {0.1f, -0.2f, 0.3f};
static const float kW2[3 * 2] = {1.0f, -0.5f, -2.0f, 0.75f, 0.5f, 1.25f};
static const float kB2[2] = {-0.1f, 0.2f};

static void mlp_reference(const float* x, int batch, double* y, double* probs) {
  int b, i, j;
  for (b = 0; b < batch; ++b) {
    double h[3], m, sum = 0;
    for (j = 0; j < 3; ++j) {
      double acc = kB1[j];
      for (i = 0; i < 4; ++i) acc += (double)x[b * 4 + i] * kW1[i * 3 + j];
      h[j] = acc > 0 ? acc : 0;
    }
    for (j = 0; j < 2; ++j) {
      double acc = kB2[j];
      for (i = 0; i < 3; ++i) acc += h[i] * kW2[i * 2 + j];
      y[b * 2 + j] = acc;
    }
    m = y[b * 2] > y[b * 2 + 1] ? y[b * 2] : y[b * 2 + 1];
    for (j = 0; j < 2; ++j) sum += exp(y[b * 2 + j] - m);
    for (j = 0; j < 2; ++j) probs[b * 2 + j] = exp(y[b * 2 + j] - m) / sum;
  }
}

static kiln_value add_weight(kiln_graph_builder* b, const float* values, size_t rank,
                             const int64_t* shape, size_t count, const char* name) {
  kiln_tensor* t = NULL;
  kiln_value v = 0;
  OK(kiln_tensor_create(KILN_F32, rank, shape, &t));
  OK(kiln_tensor_copy_from_host(t, values, count * sizeof(float)));
  OK(kiln_graph_builder_add_constant(b, t, name, &v));
  kiln_tensor_destroy(t); /* the constant holds a copy */
  return v;
}

static kiln_model* build_mlp(void) {
  kiln_graph_builder* b = NULL;
  kiln_attrs* softmax_attrs = NULL;
  kiln_model* model = NULL;
  const int64_t x_dims[2] = {0, 4};
  const char* x_names[2] = {"batch", NULL};
  const int64_t w1_shape[2] = {4, 3}, b1_shape[1] = {3}, w2_shape[2] = {3, 2}, b2_shape[1] = {2};
  kiln_value x, w1, b1, w2, b2, v, args[2];

  OK(kiln_graph_builder_create("mlp", &b));
  OK(kiln_graph_builder_add_input(b, "x", KILN_F32, 2, x_dims, x_names, &x));
  w1 = add_weight(b, kW1, 2, w1_shape, 12, "w1");
  b1 = add_weight(b, kB1, 1, b1_shape, 3, "b1");
  w2 = add_weight(b, kW2, 2, w2_shape, 6, "w2");
  b2 = add_weight(b, kB2, 1, b2_shape, 2, "b2");
  args[0] = x;
  args[1] = w1;
  OK(kiln_graph_builder_add_op(b, "matmul", 2, args, NULL, "fc1", &v));
  args[0] = v;
  args[1] = b1;
  OK(kiln_graph_builder_add_op(b, "add", 2, args, NULL, "fc1_bias", &v));
  OK(kiln_graph_builder_add_op(b, "relu", 1, &v, NULL, "act1", &v));
  args[0] = v;
  args[1] = w2;
  OK(kiln_graph_builder_add_op(b, "matmul", 2, args, NULL, "fc2", &v));
  args[0] = v;
  args[1] = b2;
  OK(kiln_graph_builder_add_op(b, "add", 2, args, NULL, "fc2_bias", &v));
  OK(kiln_graph_builder_add_output(b, v, "y"));
  OK(kiln_attrs_create(&softmax_attrs));
  OK(kiln_attrs_set_int(softmax_attrs, "axis", -1));
  OK(kiln_graph_builder_add_op(b, "softmax", 1, &v, softmax_attrs, "probs", &v));
  OK(kiln_graph_builder_add_output(b, v, "probs"));
  OK(kiln_graph_builder_build(b, &model));
  kiln_attrs_destroy(softmax_attrs);
  kiln_graph_builder_destroy(b);
  return model;
}

static void test_builder_errors(void) {
  kiln_graph_builder* b = NULL;
  kiln_attrs* a = NULL;
  kiln_model* model = (kiln_model*)SENTINEL;
  kiln_value x, y, v = 12345, args[2];
  const int64_t dims[2] = {2, 6};
  const int64_t neg[1] = {-3};
  const int64_t axes[1] = {1};
  const int64_t split[2] = {2, 4};
  const double floats[2] = {1.0, 2.0};

  OK(kiln_graph_builder_create(NULL, &b)); /* named "model" */
  OK(kiln_graph_builder_add_input(b, "x", KILN_F32, 2, dims, NULL, &x));
  FAILS(kiln_graph_builder_add_input(b, "x", KILN_F32, 2, dims, NULL, &v), KILN_INVALID_ARGUMENT,
        "already has an input 'x'");
  FAILS(kiln_graph_builder_add_input(b, "n", KILN_F32, 1, neg, NULL, &v), KILN_INVALID_ARGUMENT,
        "input 'n': dim 0 is -3");
  FAILS(kiln_graph_builder_add_input(b, NULL, KILN_F32, 1, dims, NULL, &v), KILN_INVALID_ARGUMENT,
        "name is NULL");
  {
    /* kiln's own symbol forms (_vN, _sN, unk__N) are not a model's to use. */
    const char* const own[1] = {"_s7"};
    FAILS(kiln_graph_builder_add_input(b, "s", KILN_F32, 1, dims, own, &v), KILN_INVALID_ARGUMENT,
          "dim 0 name '_s7' has the form of kiln's own symbols");
  }
  FAILS(kiln_graph_builder_add_input(NULL, "z", KILN_F32, 1, dims, NULL, &v), KILN_INVALID_ARGUMENT,
        "builder is NULL");
  FAILS(kiln_graph_builder_add_constant(b, NULL, "c", &v), KILN_INVALID_ARGUMENT, "value is NULL");
  FAILS(kiln_graph_builder_add_op(b, "no_such_op", 1, &x, NULL, "n1", &v), KILN_NOT_FOUND,
        "unknown op 'no_such_op'");
  args[0] = x;
  args[1] = 99;
  FAILS(kiln_graph_builder_add_op(b, "add", 2, args, NULL, "n2", &v), KILN_INVALID_ARGUMENT,
        "argument 1 is value 99");
  CHECK(v == 12345);

  /* Typed attributes: valid ones of each kind, and ones the schema rejects. */
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_ints(a, "axes", axes, 1));
  OK(kiln_attrs_set_bool(a, "keepdims", 1));
  OK(kiln_graph_builder_add_op(b, "sum", 1, &x, a, "rowsum", &y));
  kiln_attrs_destroy(a);
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_float(a, "min", -1.0));
  OK(kiln_attrs_set_float(a, "max", 1.0));
  OK(kiln_graph_builder_add_op(b, "clip", 1, &x, a, "clipped", &v));
  kiln_attrs_destroy(a);
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_string(a, "approximate", "tanh"));
  OK(kiln_graph_builder_add_op(b, "gelu", 1, &x, a, "gelu", &v));
  kiln_attrs_destroy(a);
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_dtype(a, "dtype", KILN_F64));
  OK(kiln_graph_builder_add_op(b, "cast", 1, &y, a, "to_f64", &y));
  kiln_attrs_destroy(a);
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_floats(a, "axis", floats, 2));
  FAILS(kiln_graph_builder_add_op(b, "softmax", 1, &x, a, "bad_softmax", &v), KILN_INVALID_ARGUMENT,
        "bad_softmax");
  FAILS(kiln_attrs_set_int(NULL, "axis", 1), KILN_INVALID_ARGUMENT, "attrs is NULL");
  FAILS(kiln_attrs_set_float(a, NULL, 1.0), KILN_INVALID_ARGUMENT, "name is NULL");
  FAILS(kiln_attrs_set_string(a, "s", NULL), KILN_INVALID_ARGUMENT, "value is NULL");
  FAILS(kiln_attrs_set_ints(a, "i", NULL, 2), KILN_INVALID_ARGUMENT, "values is NULL");
  FAILS(kiln_attrs_set_floats(NULL, "f", floats, 1), KILN_INVALID_ARGUMENT, "attrs is NULL");
  FAILS(kiln_attrs_set_dtype(a, "d", (kiln_dtype)50), KILN_INVALID_ARGUMENT, "not a kiln_dtype");
  FAILS(kiln_attrs_set_bool(a, NULL, 1), KILN_INVALID_ARGUMENT, "name is NULL");
  FAILS(kiln_attrs_create(NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  kiln_attrs_destroy(a);
  kiln_attrs_destroy(NULL);

  /* A tuple-valued op and its items. */
  OK(kiln_attrs_create(&a));
  OK(kiln_attrs_set_int(a, "axis", 1));
  OK(kiln_attrs_set_ints(a, "split", split, 2));
  OK(kiln_graph_builder_add_op(b, "split", 1, &x, a, "halves", &v));
  kiln_attrs_destroy(a);
  OK(kiln_graph_builder_get_item(b, v, 1, &v));
  FAILS(kiln_graph_builder_get_item(b, 999, 0, &v), KILN_INVALID_ARGUMENT, "value 999");
  FAILS(kiln_graph_builder_get_item(b, x, -1, &v), KILN_INVALID_ARGUMENT, "-1 is negative");

  FAILS(kiln_graph_builder_build(b, &model), KILN_INVALID_ARGUMENT, "has no outputs");
  FAILS(kiln_graph_builder_add_output(b, 1000, "o"), KILN_INVALID_ARGUMENT, "value 1000");
  OK(kiln_graph_builder_add_output(b, v, "second_half"));
  FAILS(kiln_graph_builder_add_output(b, y, "second_half"), KILN_INVALID_ARGUMENT,
        "already has an output 'second_half'");
  OK(kiln_graph_builder_add_output(b, y, "rowsum"));
  OK(kiln_graph_builder_build(b, &model));
  CHECK(model != (kiln_model*)SENTINEL);
  {
    size_t n = 0, rank = 0;
    kiln_dtype dt = KILN_I8;
    int64_t d = 0;
    const char* sym = "x";
    OK(kiln_model_num_outputs(model, &n));
    CHECK(n == 2);
    OK(kiln_model_output_type(model, 0, &dt, &rank));
    CHECK(dt == KILN_F32 && rank == 2);
    OK(kiln_model_output_dim(model, 0, 1, &d, &sym));
    CHECK(d == 4 && sym == NULL);
    OK(kiln_model_output_type(model, 1, &dt, NULL));
    CHECK(dt == KILN_F64);
  }
  kiln_model_destroy(model);
  model = (kiln_model*)SENTINEL;

  /* A type error is found at build, naming the node. */
  args[0] = x;
  args[1] = x;
  OK(kiln_graph_builder_add_op(b, "matmul", 2, args, NULL, "bad_matmul", &v));
  OK(kiln_graph_builder_add_output(b, v, "bad"));
  FAILS(kiln_graph_builder_build(b, &model), KILN_TYPE_ERROR, "bad_matmul");
  CHECK(model == (kiln_model*)SENTINEL);
  FAILS(kiln_graph_builder_build(NULL, &model), KILN_INVALID_ARGUMENT, "builder is NULL");
  FAILS(kiln_graph_builder_create("m", NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  kiln_graph_builder_destroy(b);
  kiln_graph_builder_destroy(NULL);
}

static int close_to(double got, double want) {
  return fabs(got - want) <= 1e-4 + 1e-4 * fabs(want);
}

static void check_mlp_outputs(const float* x, int batch, const float* y, const float* probs) {
  double want_y[6], want_p[6];
  int i;
  mlp_reference(x, batch, want_y, want_p);
  for (i = 0; i < batch * 2; ++i) {
    if (!close_to(y[i], want_y[i]) || !close_to(probs[i], want_p[i])) {
      fprintf(stderr, "batch %d, element %d: y %f (want %f), probs %f (want %f)\n", batch, i, y[i],
              want_y[i], probs[i], want_p[i]);
      ++g_failures;
    }
  }
}

/* The reference run: the same numbers without an engine, into new and into in-place outputs;
 * its argument errors are kiln_engine_run's. */
static void test_reference_run(void) {
  kiln_model* model = build_mlp();
  static const float x2[8] = {1.0f, -2.0f, 0.5f, 3.0f, -1.5f, 2.5f, 1.0f, -0.5f};
  const int64_t x_shape[2] = {2, 4}, o_shape[2] = {2, 2}, bad_shape[2] = {2, 3};
  const char* in_names[1] = {"x"};
  const char* out_names[1] = {"probs"};
  kiln_tensor* x = NULL;
  kiln_tensor* bad = NULL;
  kiln_tensor* probs = NULL;
  kiln_tensor* outs[2] = {NULL, NULL};
  const kiln_tensor* ins[1];
  void* y = NULL;

  CHECK(model != NULL);
  if (!model) return;
  OK(kiln_tensor_wrap(KILN_F32, 2, x_shape, (void*)x2, sizeof x2, &x));
  OK(kiln_tensor_create(KILN_F32, 2, o_shape, &probs));
  OK(kiln_tensor_create(KILN_F32, 2, bad_shape, &bad));
  ins[0] = x;
  OK(kiln_model_run_reference(model, 1, in_names, ins, 2, NULL, outs));
  CHECK(outs[0] && outs[1]);
  if (outs[0] && outs[1]) {
    float p[4];
    OK(kiln_tensor_data(outs[0], &y));
    OK(kiln_tensor_copy_to_host(outs[1], p, sizeof p));
    check_mlp_outputs(x2, 2, (const float*)y, p);
  }
  /* In place, by name. */
  OK(kiln_model_run_reference(model, 1, NULL, ins, 1, out_names, &probs));
  if (outs[0]) {
    float p[4];
    OK(kiln_tensor_copy_to_host(probs, p, sizeof p));
    check_mlp_outputs(x2, 2, (const float*)y, p);
  }
  FAILS(kiln_model_run_reference(NULL, 1, NULL, ins, 2, NULL, outs), KILN_INVALID_ARGUMENT,
        "kiln_model_run_reference: model is NULL");
  ins[0] = bad;
  FAILS(kiln_model_run_reference(model, 1, NULL, ins, 2, NULL, outs), KILN_INVALID_ARGUMENT,
        "input 'x': expected f32[batch, 4], given f32[2, 3]");
  out_names[0] = "nope";
  ins[0] = x;
  FAILS(kiln_model_run_reference(model, 1, NULL, ins, 1, out_names, &probs), KILN_NOT_FOUND,
        "has no output 'nope'");
  kiln_tensor_destroy(outs[0]);
  kiln_tensor_destroy(outs[1]);
  kiln_tensor_destroy(probs);
  kiln_tensor_destroy(bad);
  kiln_tensor_destroy(x);
  kiln_model_destroy(model);
}

static void test_mlp(void) {
  kiln_model* model = build_mlp();
  kiln_engine* engine = NULL;
  const char* name = NULL;
  const char* sym = NULL;
  size_t n = 0, rank = 0;
  kiln_dtype dt = KILN_I8;
  int64_t d = 0;
  char* text = NULL;
  static const float x3[12] = {1.0f, -2.0f, 0.5f,  3.0f, 0.0f, 0.0f,
                               0.0f, 0.0f,  -1.5f, 2.5f, 1.0f, -0.5f};
  const char* in_names[1] = {"x"};
  const char* out_names[2] = {"probs", "y"};
  int batch;

  CHECK(model != NULL);
  if (!model) return;

  /* Introspection: x: f32[batch, 4] -> y: f32[batch, 2], probs: f32[batch, 2]. */
  OK(kiln_model_name(model, &name));
  CHECK(strcmp(name, "mlp") == 0);
  OK(kiln_model_num_inputs(model, &n));
  CHECK(n == 1);
  OK(kiln_model_num_outputs(model, &n));
  CHECK(n == 2);
  OK(kiln_model_input_name(model, 0, &name));
  CHECK(strcmp(name, "x") == 0);
  OK(kiln_model_output_name(model, 1, &name));
  CHECK(strcmp(name, "probs") == 0);
  OK(kiln_model_input_type(model, 0, &dt, &rank));
  CHECK(dt == KILN_F32 && rank == 2);
  OK(kiln_model_input_dim(model, 0, 0, &d, &sym));
  CHECK(d == -1 && sym && strcmp(sym, "batch") == 0);
  OK(kiln_model_input_dim(model, 0, 1, &d, &sym));
  CHECK(d == 4 && sym == NULL);
  OK(kiln_model_output_dim(model, 0, 0, &d, &sym));
  CHECK(d == -1 && sym && strcmp(sym, "batch") == 0);
  OK(kiln_model_output_type(model, 1, &dt, &rank));
  CHECK(dt == KILN_F32 && rank == 2);
  OK(kiln_model_print(model, &text));
  CHECK(text && strstr(text, "matmul") && strstr(text, "batch"));
  kiln_string_free(text);

  FAILS(kiln_model_name(NULL, &name), KILN_INVALID_ARGUMENT, "model is NULL");
  FAILS(kiln_model_num_inputs(NULL, &n), KILN_INVALID_ARGUMENT, "model is NULL");
  FAILS(kiln_model_num_outputs(model, NULL), KILN_INVALID_ARGUMENT, "out is NULL");
  FAILS(kiln_model_input_name(model, 1, &name), KILN_INVALID_ARGUMENT, "index 1 is out of range");
  FAILS(kiln_model_output_name(model, 2, &name), KILN_INVALID_ARGUMENT, "index 2");
  FAILS(kiln_model_input_type(NULL, 0, &dt, &rank), KILN_INVALID_ARGUMENT, "model is NULL");
  FAILS(kiln_model_output_type(model, 5, &dt, &rank), KILN_INVALID_ARGUMENT, "index 5");
  FAILS(kiln_model_input_dim(model, 0, 2, &d, &sym), KILN_INVALID_ARGUMENT,
        "input 'x' has rank 2; dim 2");
  FAILS(kiln_model_output_dim(model, 0, 9, &d, &sym), KILN_INVALID_ARGUMENT, "output 'y'");
  FAILS(kiln_model_print(model, NULL), KILN_INVALID_ARGUMENT, "out_text is NULL");

  /* Eager: each new batch compiles before it answers, so the counts below are per run. */
  {
    kiln_options* eager = NULL;
    OK(kiln_options_create(&eager));
    OK(kiln_options_set_compile_policy(eager, "eager"));
    OK(kiln_engine_create(eager, &engine));
    kiln_options_destroy(eager);
  }
  for (batch = 1; batch <= 3; batch += 2) {
    /* Kiln-allocated outputs (NULL slots), inputs by name. */
    const int64_t x_shape[2] = {batch, 4};
    const int64_t o_shape[2] = {batch, 2};
    kiln_tensor* x = NULL;
    kiln_tensor* outs[2] = {NULL, NULL};
    const kiln_tensor* ins[1];
    float y[6], p[6];
    size_t nbytes = 0;
    int64_t dims[2];
    OK(kiln_tensor_wrap(KILN_F32, 2, x_shape, (void*)x3, batch * 4 * sizeof(float), &x));
    ins[0] = x;
    OK(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, outs));
    CHECK(outs[0] && outs[1]);
    if (!outs[0] || !outs[1]) continue;
    OK(kiln_tensor_shape(outs[0], 2, dims));
    CHECK(dims[0] == batch && dims[1] == 2);
    OK(kiln_tensor_nbytes(outs[0], &nbytes));
    CHECK(nbytes == (size_t)batch * 2 * sizeof(float));
    OK(kiln_tensor_copy_to_host(outs[0], y, nbytes));
    OK(kiln_tensor_copy_to_host(outs[1], p, nbytes));
    check_mlp_outputs(x3, batch, y, p);
    kiln_tensor_destroy(outs[0]);
    kiln_tensor_destroy(outs[1]);

    /* The caller's buffers, written in place; outputs by name, in another order. */
    {
      float yy[6] = {0}, pp[6] = {0};
      kiln_tensor* wy = NULL;
      kiln_tensor* wp = NULL;
      kiln_tensor* slots[2];
      OK(kiln_tensor_wrap(KILN_F32, 2, o_shape, yy, batch * 2 * sizeof(float), &wy));
      OK(kiln_tensor_wrap(KILN_F32, 2, o_shape, pp, batch * 2 * sizeof(float), &wp));
      slots[0] = wp;
      slots[1] = wy;
      OK(kiln_engine_run(engine, model, 1, in_names, ins, 2, out_names, slots));
      CHECK(slots[0] == wp && slots[1] == wy);
      check_mlp_outputs(x3, batch, yy, pp);
      /* All outputs in place, in model order, inputs by position: the direct path. */
      memset(yy, 0, sizeof yy);
      memset(pp, 0, sizeof pp);
      slots[0] = wy;
      slots[1] = wp;
      OK(kiln_engine_run(engine, model, 1, NULL, ins, 2, NULL, slots));
      check_mlp_outputs(x3, batch, yy, pp);
      /* Only one output, kiln-allocated. */
      slots[0] = NULL;
      OK(kiln_engine_run(engine, model, 1, in_names, ins, 1, out_names, slots));
      CHECK(slots[0] != NULL);
      if (slots[0]) {
        OK(kiln_tensor_copy_to_host(slots[0], pp, batch * 2 * sizeof(float)));
        check_mlp_outputs(x3, batch, yy, pp);
      }
      kiln_tensor_destroy(slots[0]);
      kiln_tensor_destroy(wy);
      kiln_tensor_destroy(wp);
    }
    kiln_tensor_destroy(x);
  }

  /* Run errors: each names the input or output, with expected and given types. */
  {
    const int64_t good[2] = {3, 4}, rank3[3] = {3, 4, 1}, wrong_dim[2] = {3, 5}, out2[2] = {2, 2};
    kiln_tensor* x = NULL;
    kiln_tensor* x_rank3 = NULL;
    kiln_tensor* x_i32 = NULL;
    kiln_tensor* x_dim = NULL;
    kiln_tensor* small = NULL;
    kiln_tensor* wrong_dtype = NULL;
    const kiln_tensor* ins[2];
    kiln_tensor* slots[2] = {NULL, NULL};
    const char* bad_names[1] = {"nope"};
    const char* two[2] = {"x", "x"};
    const char* bad_out[1] = {"logits"};
    OK(kiln_tensor_create(KILN_F32, 2, good, &x));
    OK(kiln_tensor_create(KILN_F32, 3, rank3, &x_rank3));
    OK(kiln_tensor_create(KILN_I32, 2, good, &x_i32));
    OK(kiln_tensor_create(KILN_F32, 2, wrong_dim, &x_dim));
    OK(kiln_tensor_create(KILN_F32, 2, out2, &small));
    OK(kiln_tensor_create(KILN_I64, 2, good, &wrong_dtype));

    ins[0] = x;
    FAILS(kiln_engine_run(engine, model, 1, bad_names, ins, 2, NULL, slots), KILN_NOT_FOUND,
          "has no input 'nope' (its inputs: x)");
    FAILS(kiln_engine_run(engine, model, 0, NULL, NULL, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "input 'x' (f32[batch, 4]) is missing");
    ins[1] = x;
    FAILS(kiln_engine_run(engine, model, 2, two, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "input 'x' is given twice");
    ins[0] = x_rank3;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "input 'x': expected f32[batch, 4], given f32[3, 4, 1]");
    ins[0] = x_i32;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "input 'x': expected f32[batch, 4], given i32[3, 4]");
    ins[0] = x_dim;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "given f32[3, 5]");
    ins[0] = NULL;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "input 'x': the tensor is NULL");
    ins[0] = x;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 1, bad_out, slots), KILN_NOT_FOUND,
          "has no output 'logits' (its outputs: y, probs)");
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 1, NULL, slots), KILN_INVALID_ARGUMENT,
          "has 2 outputs, given 1");
    slots[0] = small; /* f32[2, 2] for f32[3, 2]: a wrong concrete dim, in place */
    slots[1] = NULL;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "output 'y': expected f32[3, 2], given f32[2, 2]");
    CHECK(slots[1] == NULL); /* untouched */
    slots[1] = small; /* every output in place: the engine finds the dim, the output is named */
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "output 'y': expected f32[3, 2], given f32[2, 2]");
    slots[1] = small;
    slots[0] = x; /* full in-place path, wrong concrete dim */
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "output 'y': expected f32[batch, 2], given f32[3, 4]");
    slots[0] = wrong_dtype;
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "output 'y': expected f32[batch, 2], given i64[3, 4]");
    slots[0] = NULL;
    slots[1] = NULL;
    FAILS(kiln_engine_run(NULL, model, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "kiln_engine_run: engine is NULL");
    FAILS(kiln_engine_run(engine, NULL, 1, in_names, ins, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "model is NULL");
    FAILS(kiln_engine_run(engine, model, 1, in_names, NULL, 2, NULL, slots), KILN_INVALID_ARGUMENT,
          "inputs is NULL");
    FAILS(kiln_engine_run(engine, model, 1, in_names, ins, 2, NULL, NULL), KILN_INVALID_ARGUMENT,
          "outputs is NULL");
    CHECK(slots[0] == NULL && slots[1] == NULL);

    OK(kiln_engine_prepare(engine, model, 1, in_names, ins));
    ins[0] = x_rank3;
    FAILS(kiln_engine_prepare(engine, model, 1, in_names, ins), KILN_INVALID_ARGUMENT,
          "input 'x': expected f32[batch, 4]");
    FAILS(kiln_engine_prepare(NULL, model, 1, in_names, ins), KILN_INVALID_ARGUMENT,
          "engine is NULL");

    kiln_tensor_destroy(x);
    kiln_tensor_destroy(x_rank3);
    kiln_tensor_destroy(x_i32);
    kiln_tensor_destroy(x_dim);
    kiln_tensor_destroy(small);
    kiln_tensor_destroy(wrong_dtype);
  }

  {
    char* json = NULL;
    OK(kiln_engine_stats_json(engine, &json));
    CHECK(json && strstr(json, "\"misses\":2") && strstr(json, "\"specializations\":2"));
    CHECK(json && strstr(json, "mlp(x: f32[3, 4])"));
    kiln_string_free(json);
    FAILS(kiln_engine_stats_json(NULL, &json), KILN_INVALID_ARGUMENT, "engine is NULL");
    FAILS(kiln_engine_stats_json(engine, NULL), KILN_INVALID_ARGUMENT, "out_json is NULL");
  }

  /* Explain: a cached shape, a new batch; then tiers: a new shape is served by the generic
   * kernels, then specialized in the background. */
  {
    const int64_t s3[2] = {3, 4}, s5[2] = {5, 4};
    kiln_tensor* x = NULL;
    kiln_tensor* outs[2] = {NULL, NULL};
    const kiln_tensor* ins[1];
    char* json = NULL;
    kiln_options* o = NULL;
    kiln_engine* tiered = NULL;
    OK(kiln_tensor_wrap(KILN_F32, 2, s3, (void*)x3, 12 * sizeof(float), &x));
    ins[0] = x;
    OK(kiln_engine_explain(engine, model, 1, NULL, ins, &json));
    CHECK(json && strstr(json, "\"cached\":true") && strstr(json, "\"tier\":\"specialized\""));
    kiln_string_free(json);
    kiln_tensor_destroy(x);
    OK(kiln_tensor_create(KILN_F32, 2, s5, &x));
    ins[0] = x;
    OK(kiln_engine_explain(engine, model, 1, NULL, ins, &json));
    CHECK(json && strstr(json, "\"cached\":false") && strstr(json, "input 'x' dim 0 is 5"));
    kiln_string_free(json);
    FAILS(kiln_engine_explain(engine, model, 1, NULL, ins, NULL), KILN_INVALID_ARGUMENT,
          "out_json is NULL");

    /* The kernels as CUDA C (no GPU needed), written to a directory, their paths returned. */
    OK(kiln_engine_emit_kernels(engine, model, 1, NULL, ins, "cuda -arch=sm_90", "cuda",
                                "c_api_test_kernels", &json));
    CHECK(json && json[0] == '[' && strstr(json, "c_api_test_kernels/") && strstr(json, ".cu\""));
    kiln_string_free(json);
    FAILS(kiln_engine_emit_kernels(engine, model, 1, NULL, ins, NULL, "ptx", "c_api_test_kernels",
                                   NULL),
          KILN_INVALID_ARGUMENT, "emits llvm, asm, not 'ptx'");
    FAILS(kiln_engine_emit_kernels(engine, model, 1, NULL, ins, "cuda", "cuda", NULL, NULL),
          KILN_INVALID_ARGUMENT, "out_dir is NULL");

    OK(kiln_options_create(&o));
    FAILS(kiln_options_set_compile_policy(o, "lazy"), KILN_INVALID_ARGUMENT, "'lazy'");
    FAILS(kiln_options_set_specialize_after(o, 0), KILN_INVALID_ARGUMENT, "below 1");
    FAILS(kiln_options_set_compile_threads(o, 0), KILN_INVALID_ARGUMENT, "below 1");
    FAILS(kiln_options_set_compile_nice(o, -1), KILN_INVALID_ARGUMENT, "nice -1 is not 0 to 19");
    FAILS(kiln_options_set_compile_nice(o, 20), KILN_INVALID_ARGUMENT, "not 0 to 19");
    OK(kiln_options_set_compile_nice(o, 5));
    OK(kiln_options_set_compile_policy(o, "tiered"));
    OK(kiln_options_set_specialize_after(o, 1));
    OK(kiln_options_set_compile_threads(o, 1));
    OK(kiln_engine_create(o, &tiered));
    OK(kiln_engine_run(tiered, model, 1, NULL, ins, 2, NULL, outs));
    kiln_tensor_destroy(outs[0]);
    kiln_tensor_destroy(outs[1]);
    OK(kiln_engine_wait_background_compiles(tiered));
    OK(kiln_engine_explain(tiered, model, 1, NULL, ins, &json));
    CHECK(json && strstr(json, "\"tier\":\"specialized\""));
    kiln_string_free(json);
    OK(kiln_engine_stats_json(tiered, &json));
    /* The model's first run compiled its shape as eager does; the generic tier built meanwhile. */
    CHECK(json && strstr(json, "\"generic_builds\":1") && strstr(json, "\"specializations\":1") &&
          strstr(json, "\"background_queued\":0"));
    kiln_string_free(json);
    FAILS(kiln_engine_wait_background_compiles(NULL), KILN_INVALID_ARGUMENT, "engine is NULL");

    /* Warm start: the shapes it ran, saved and compiled again by a fresh engine. */
    {
      const char* path = "c_api_test_shapes.txt"; /* in the working directory */
      kiln_engine* fresh = NULL;
      OK(kiln_engine_save_shapes(tiered, model, path));
      OK(kiln_engine_create(NULL, &fresh));
      OK(kiln_engine_precompile_shapes(fresh, model, path));
      OK(kiln_engine_explain(fresh, model, 1, NULL, ins, &json));
      CHECK(json && strstr(json, "\"cached\":true"));
      kiln_string_free(json);
      FAILS(kiln_engine_precompile_shapes(fresh, model, "/nonexistent/shapes"), KILN_NOT_FOUND,
            "cannot read '/nonexistent/shapes'");
      FAILS(kiln_engine_save_shapes(fresh, model, NULL), KILN_INVALID_ARGUMENT, "path is NULL");
      kiln_engine_destroy(fresh);
      remove(path);
    }
    kiln_engine_destroy(tiered);
    kiln_options_destroy(o);
    kiln_tensor_destroy(x);
  }
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
  kiln_model_destroy(NULL);
}

/* ---- passes, instruments, profiling ---- */

typedef struct PassLog {
  int calls;
  int saw_main;
} PassLog;

static kiln_status counting_pass(const char* module_text, kiln_pass_result* result,
                                 void* user_data) {
  PassLog* log = (PassLog*)user_data;
  (void)result;
  ++log->calls;
  if (strstr(module_text, "def @main")) ++log->saw_main;
  return KILN_OK;
}

/* Returns its input as the replacement: a round trip through the parser. */
static kiln_status echo_pass(const char* module_text, kiln_pass_result* result, void* user_data) {
  (void)user_data;
  return kiln_pass_result_set_text(result, module_text);
}

static kiln_status failing_pass(const char* module_text, kiln_pass_result* result,
                                void* user_data) {
  (void)module_text;
  (void)user_data;
  kiln_pass_result_set_error(result, "the weights look wrong");
  return KILN_COMPILE_ERROR;
}

static kiln_status garbage_pass(const char* module_text, kiln_pass_result* result,
                                void* user_data) {
  (void)module_text;
  (void)user_data;
  return kiln_pass_result_set_text(result, "def @main(%x: f32[2]) { ??? }");
}

typedef struct HookLog {
  int before, after, with_text;
  int saw_main, saw_echo;
} HookLog;

static void before_hook(const char* pass, const char* module_text, void* user_data) {
  HookLog* log = (HookLog*)user_data;
  ++log->before;
  if (module_text) ++log->with_text;
  if (module_text && strstr(module_text, "def @main")) ++log->saw_main;
  if (strcmp(pass, "CTestEcho") == 0) ++log->saw_echo;
}

static void after_hook(const char* pass, const char* module_text, void* user_data) {
  HookLog* log = (HookLog*)user_data;
  (void)pass;
  (void)module_text;
  ++log->after;
}

static kiln_status run_batch(kiln_engine* engine, kiln_model* model, int batch) {
  static const float x[12] = {1, 2, 3, 4, -1, -2, -3, -4, 0.5f, 0.25f, 0.125f, 1};
  const int64_t shape[2] = {batch, 4};
  kiln_tensor* t = NULL;
  kiln_tensor* outs[2] = {NULL, NULL};
  const kiln_tensor* ins[1];
  kiln_status s;
  OK(kiln_tensor_wrap(KILN_F32, 2, shape, (void*)x, batch * 4 * sizeof(float), &t));
  ins[0] = t;
  s = kiln_engine_run(engine, model, 1, NULL, ins, 2, NULL, outs);
  if (s == KILN_OK) {
    float y[6], p[6];
    OK(kiln_tensor_copy_to_host(outs[0], y, batch * 2 * sizeof(float)));
    OK(kiln_tensor_copy_to_host(outs[1], p, batch * 2 * sizeof(float)));
    check_mlp_outputs(x, batch, y, p);
  }
  kiln_tensor_destroy(outs[0]);
  kiln_tensor_destroy(outs[1]);
  kiln_tensor_destroy(t);
  return s;
}

static void test_passes(void) {
  static PassLog count_log = {0, 0};
  static HookLog hooks = {0, 0, 0, 0, 0};
  const char* req[1] = {"InferType"};
  kiln_model* model = build_mlp();
  kiln_options* o = NULL;
  kiln_engine* engine = NULL;
  size_t n = 0, i;
  int found = 0, level = -1;
  char* name = NULL;
  char* required = NULL;
  char* json = NULL;

  OK(kiln_register_graph_pass("CTestCount", 1, 1, req, counting_pass, &count_log));
  OK(kiln_register_graph_pass("CTestEcho", 0, 0, NULL, echo_pass, NULL));
  OK(kiln_register_graph_pass("CTestFail", 0, 0, NULL, failing_pass, NULL));
  OK(kiln_register_graph_pass("CTestGarbage", 0, 0, NULL, garbage_pass, NULL));
  FAILS(kiln_register_graph_pass("CTestEcho", 0, 0, NULL, echo_pass, NULL), KILN_INVALID_ARGUMENT,
        "'CTestEcho' is already registered");
  FAILS(kiln_register_graph_pass(NULL, 0, 0, NULL, echo_pass, NULL), KILN_INVALID_ARGUMENT,
        "name is NULL");
  FAILS(kiln_register_graph_pass("CTestNoFn", 0, 0, NULL, NULL, NULL), KILN_INVALID_ARGUMENT,
        "fn is NULL");
  FAILS(kiln_register_graph_pass("CTestNeg", -1, 0, NULL, echo_pass, NULL), KILN_INVALID_ARGUMENT,
        "must be 0 to 3, got -1");
  FAILS(kiln_register_graph_pass("CTestHigh", 4, 0, NULL, echo_pass, NULL), KILN_INVALID_ARGUMENT,
        "must be 0 to 3, got 4");
  FAILS(kiln_pass_result_set_text(NULL, "x"), KILN_INVALID_ARGUMENT, "result is NULL");
  FAILS(kiln_pass_result_set_error(NULL, "x"), KILN_INVALID_ARGUMENT, "result is NULL");

  /* The registry lists them, with opt level and requirements. */
  OK(kiln_pass_count(&n));
  CHECK(n >= 4);
  for (i = 0; i < n; ++i) {
    OK(kiln_pass_info(i, &name, &level, &required));
    if (name && strcmp(name, "CTestCount") == 0) {
      found = 1;
      CHECK(level == 1 && strcmp(required, "InferType") == 0);
    }
    kiln_string_free(name);
    kiln_string_free(required);
  }
  CHECK(found);
  OK(kiln_pass_info(0, NULL, NULL, NULL));
  FAILS(kiln_pass_info(n, &name, &level, &required), KILN_INVALID_ARGUMENT, "out of range");
  FAILS(kiln_pass_count(NULL), KILN_INVALID_ARGUMENT, "out is NULL");

  /* A pipeline with the C passes, an instrument, profiling on. */
  OK(kiln_options_create(&o));
  OK(kiln_options_set_pipeline(o, "InferType,CTestEcho,CTestCount,FoldConstant"));
  OK(kiln_options_add_instrument(o, before_hook, after_hook, 1, &hooks));
  OK(kiln_options_set_profiling(o, 1));
  OK(kiln_options_set_compile_policy(o, "eager")); /* the pipeline runs once per shape, now */
  OK(kiln_engine_create(o, &engine));
  OK(run_batch(engine, model, 1));
  OK(run_batch(engine, model, 3));
  OK(run_batch(engine, model, 3));
  CHECK(count_log.calls == 2 && count_log.saw_main == 2); /* once per shape */
  CHECK(hooks.before > 0 && hooks.before == hooks.after && hooks.with_text == hooks.before);
  if (hooks.before != hooks.after || hooks.with_text != hooks.before)
    fprintf(stderr, "hooks: %d before, %d after, %d with text\n", hooks.before, hooks.after,
            hooks.with_text);
  CHECK(hooks.saw_echo == 2 && hooks.saw_main > 0);
  OK(kiln_engine_stats_json(engine, &json));
  CHECK(json && strstr(json, "\"hits\":1") && strstr(json, "\"misses\":2"));
  CHECK(json && strstr(json, "\"name\":\"CTestEcho\"")); /* per-pass timing */
  CHECK(json && strstr(json, "\"kernels\":[{\"shape_key\":\"mlp(x: f32[1, 4])\"")); /* per kernel */
  kiln_string_free(json);
  kiln_engine_destroy(engine);

  /* A failing callback and a replacement that does not parse: the pass is named. */
  OK(kiln_options_set_pipeline(o, "InferType,CTestFail"));
  OK(kiln_engine_create(o, &engine));
  FAILS(run_batch(engine, model, 2), KILN_COMPILE_ERROR,
        "pass 'CTestFail': the callback returned KILN_COMPILE_ERROR: the weights look wrong");
  kiln_engine_destroy(engine);
  OK(kiln_options_set_pipeline(o, "InferType,CTestGarbage"));
  OK(kiln_engine_create(o, &engine));
  FAILS(run_batch(engine, model, 2), KILN_PARSE_ERROR, "pass 'CTestGarbage'");
  kiln_engine_destroy(engine);

  kiln_options_destroy(o);
  kiln_model_destroy(model);
}

/* ---- ONNX ---- */

static void test_onnx(const char* node_dir) {
  char path[1024];
  kiln_model* model = NULL;
  kiln_model* from_buffer = NULL;
  kiln_model* out_model = (kiln_model*)SENTINEL;
  kiln_tensor* input = NULL;
  kiln_tensor* expected = NULL;
  kiln_tensor* outs[1] = {NULL};
  const kiln_tensor* ins[1];
  kiln_engine* engine = NULL;
  FILE* f;
  char* bytes = NULL;
  long size = 0;
  const char* name = NULL;

  if (!node_dir) {
    fprintf(stderr, "c_api_test: no ONNX node dir given; the ONNX checks are not run\n");
    ++g_failures;
    return;
  }
  sprintf(path, "%.900s/test_relu/model.onnx", node_dir);
  OK(kiln_model_load_onnx_file(path, &model));
  f = fopen(path, "rb");
  CHECK(f != NULL);
  if (f) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = (char*)malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    OK(kiln_model_load_onnx_buffer(bytes, (size_t)size, &from_buffer));
    FAILS(kiln_model_load_onnx_buffer(bytes, (size_t)size / 2, &out_model), KILN_INVALID_ARGUMENT,
          "");
    free(bytes);
  }
  FAILS(kiln_model_load_onnx_file("/nonexistent/model.onnx", &out_model), KILN_INVALID_ARGUMENT,
        "/nonexistent/model.onnx");
  FAILS(kiln_model_load_onnx_file(NULL, &out_model), KILN_INVALID_ARGUMENT, "path is NULL");
  FAILS(kiln_model_load_onnx_buffer(NULL, 10, &out_model), KILN_INVALID_ARGUMENT, "data is NULL");
  CHECK(out_model == (kiln_model*)SENTINEL);

  sprintf(path, "%.900s/test_relu/test_data_set_0/input_0.pb", node_dir);
  OK(kiln_tensor_read_onnx_pb(path, &input));
  sprintf(path, "%.900s/test_relu/test_data_set_0/output_0.pb", node_dir);
  OK(kiln_tensor_read_onnx_pb(path, &expected));
  if (model && from_buffer && input && expected) {
    size_t nbytes = 0, i;
    float* got;
    float* want;
    OK(kiln_model_input_name(from_buffer, 0, &name));
    CHECK(strcmp(name, "x") == 0);
    OK(kiln_engine_create(NULL, &engine));
    ins[0] = input;
    OK(kiln_engine_run(engine, model, 1, &name, ins, 1, NULL, outs));
    OK(kiln_tensor_nbytes(expected, &nbytes));
    got = (float*)malloc(nbytes);
    want = (float*)malloc(nbytes);
    OK(kiln_tensor_copy_to_host(outs[0], got, nbytes));
    OK(kiln_tensor_copy_to_host(expected, want, nbytes));
    for (i = 0; i < nbytes / sizeof(float); ++i) CHECK(fabs(got[i] - want[i]) <= 1e-6);
    free(got);
    free(want);
    kiln_tensor_destroy(outs[0]);
    kiln_engine_destroy(engine);
  }
  kiln_tensor_destroy(input);
  kiln_tensor_destroy(expected);
  kiln_model_destroy(model);
  kiln_model_destroy(from_buffer);
}

int main(int argc, char** argv) {
  test_basics();
  test_tensors();
  test_options();
  test_builder_errors();
  test_mlp();
  test_reference_run();
  test_passes();
  test_onnx(argc > 1 ? argv[1] : NULL);
  printf("c_api_test: %d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
