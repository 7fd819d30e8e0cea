// The C API (kiln.h) over the engine, the graph IR and the ONNX importer: this file has status
// and errors, tensors and models; graph_api.cc has graph building and passes; engine_api.cc
// options, engines, runs and statistics; capi_internal.h the handles and helpers they share.
//
// Every function that can fail has the same frame: KILN_API_BEGIN ... KILN_API_END, the one
// place where C++ exceptions become statuses (kiln::Error -> its code, std::bad_alloc ->
// KILN_OUT_OF_MEMORY, anything else -> KILN_INTERNAL) and the thread-local last-error message
// is set. Inside the frame, results are computed into locals first and written to the
// caller's output parameters last, so a failure leaves them untouched.
#include "kiln.h"

#include "api/capi/capi_internal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "ir/error.h"
#include "ir/sequence.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace {

using kiln::ErrorCode;
using kiln::Throw;
using kiln_capi::Join;
using kiln_capi::NewCString;
using kiln_capi::Str;
using kiln_capi::ToDType;
using kiln_capi::WrapModel;

// The mirrors kiln.h promises.
static_assert(KILN_INVALID_ARGUMENT == static_cast<int>(ErrorCode::kInvalidArgument));
static_assert(KILN_NOT_FOUND == static_cast<int>(ErrorCode::kNotFound));
static_assert(KILN_UNSUPPORTED == static_cast<int>(ErrorCode::kUnsupported));
static_assert(KILN_TYPE_ERROR == static_cast<int>(ErrorCode::kTypeError));
static_assert(KILN_COMPILE_ERROR == static_cast<int>(ErrorCode::kCompileError));
static_assert(KILN_OUT_OF_MEMORY == static_cast<int>(ErrorCode::kOutOfMemory));
static_assert(KILN_CANCELLED == static_cast<int>(ErrorCode::kCancelled));
static_assert(KILN_INTERNAL == static_cast<int>(ErrorCode::kInternal));
static_assert(KILN_PARSE_ERROR == static_cast<int>(ErrorCode::kParseError));
// kiln_dtype lists kiln::DType's enumerators in order; a new DType needs a kiln_dtype too.
#define KILN_COUNT_DTYPE(e, n, t, s) +1
constexpr int kNumDTypes = 0 KILN_DTYPES(KILN_COUNT_DTYPE);
#undef KILN_COUNT_DTYPE
static_assert(kNumDTypes == KILN_U64 + 1, "kiln.h's kiln_dtype is missing a kiln::DType");
static_assert(KILN_F32 == static_cast<int>(kiln::DType::kFloat32) &&
              KILN_F16 == static_cast<int>(kiln::DType::kFloat16) &&
              KILN_BF16 == static_cast<int>(kiln::DType::kBFloat16) &&
              KILN_F64 == static_cast<int>(kiln::DType::kFloat64) &&
              KILN_I8 == static_cast<int>(kiln::DType::kInt8) &&
              KILN_I16 == static_cast<int>(kiln::DType::kInt16) &&
              KILN_I32 == static_cast<int>(kiln::DType::kInt32) &&
              KILN_I64 == static_cast<int>(kiln::DType::kInt64) &&
              KILN_U8 == static_cast<int>(kiln::DType::kUInt8) &&
              KILN_BOOL == static_cast<int>(kiln::DType::kBool) &&
              KILN_U16 == static_cast<int>(kiln::DType::kUInt16) &&
              KILN_U32 == static_cast<int>(kiln::DType::kUInt32) &&
              KILN_U64 == static_cast<int>(kiln::DType::kUInt64));

thread_local std::string t_last_error;

}  // namespace

kiln::DType kiln_capi::ToDType(kiln_dtype d, const char* fn) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) >= kNumDTypes)
    Throw(ErrorCode::kInvalidArgument, fn, ": ", static_cast<int>(d), " is not a kiln_dtype");
  return static_cast<kiln::DType>(d);
}

namespace {

std::vector<int64_t> ToShape(size_t rank, const int64_t* shape, const char* fn) {
  if (rank && !shape) Throw(ErrorCode::kInvalidArgument, fn, ": shape is NULL for rank ", rank);
  return std::vector<int64_t>(shape, shape + rank);
}

// ---- models ---------------------------------------------------------------------------

kiln_model::Io MakeIo(std::string name, const kiln::Type& type) {
  kiln_model::Io io{std::move(name), type, {}, false};
  if (const kiln::TensorTypeNode* tt = kiln::AsTensor(type))
    for (const kiln::Dim& d : tt->shape) io.dim_text.push_back(d.is_const() ? "" : d.ToString());
  return io;
}

// `model` returning, before each sequence output (of `out_types`, its outputs' types), that
// sequence's length, so a run's flat results can be regrouped (kiln_model's comment).
kiln::ModelPtr WithSequenceLengths(const kiln::Model& model,
                                   const std::vector<kiln::Type>& out_types) {
  const kiln::Function& g = model.graph();
  const kiln::TupleNode* tuple = out_types.size() > 1 ? kiln::AsTuple(g->body) : nullptr;
  std::vector<kiln::Expr> outs;
  for (size_t j = 0; j < out_types.size(); ++j) {
    kiln::Expr o = tuple                  ? tuple->fields[j]
                   : out_types.size() > 1 ? kiln::MakeTupleGetItem(g->body, static_cast<int>(j))
                                          : g->body;
    if (kiln::SequenceElement(out_types[j]))
      outs.push_back(kiln::MakeCall("seq.length", {o}, {}, kiln::StrCat(o->name, ":length")));
    outs.push_back(o);
  }
  return kiln::Model::Create(kiln::MakeFunction(g->params, kiln::MakeTuple(outs)), model.name());
}

}  // namespace

std::unique_ptr<kiln_model> kiln_capi::WrapModel(kiln::ModelPtr model,
                                                 const std::vector<std::string>& input_names,
                                                 const std::vector<std::string>& output_names) {
  auto m = std::make_unique<kiln_model>();
  const kiln::Function& g = model->graph();
  for (size_t i = 0; i < g->params.size(); ++i)
    m->inputs.push_back(MakeIo(
        i < input_names.size() && !input_names[i].empty() ? input_names[i] : g->params[i]->name,
        g->params[i]->type));
  std::vector<kiln::Type> out_types;
  if (const kiln::TupleTypeNode* tup = kiln::AsTuple(g->body->type))
    out_types = tup->fields;
  else
    out_types.push_back(g->body->type);
  for (size_t j = 0; j < out_types.size(); ++j) {
    std::string name = j < output_names.size() ? output_names[j] : kiln::StrCat("output_", j);
    const kiln::TensorTypeNode* element = kiln::SequenceElement(out_types[j]);
    if (!kiln::AsTensor(out_types[j]) && !element)
      Throw(ErrorCode::kUnsupported, "model '", model->name(), "': output '", name, "' has type ",
            kiln::TypeToString(out_types[j]), "; outputs must be tensors or sequences of them");
    m->outputs.push_back(
        MakeIo(std::move(name),
               element ? kiln::TensorType(element->shape, element->dtype) : out_types[j]));
    m->outputs.back().sequence = element != nullptr;
    m->sequence_outputs = m->sequence_outputs || element;
  }
  if (m->sequence_outputs) model = WithSequenceLengths(*model, out_types);
  m->model = std::move(model);
  return m;
}

namespace {

std::unique_ptr<kiln_model> WrapImported(kiln::ImportedModel imported) {
  kiln::ModelPtr model = kiln::Model::Create(imported.graph, imported.name);
  return WrapModel(std::move(model), imported.input_names, imported.output_names);
}

const kiln_model::Io& IoAt(const kiln_model* model, size_t index, bool input, const char* fn) {
  if (!model) Throw(ErrorCode::kInvalidArgument, fn, ": model is NULL");
  const std::vector<kiln_model::Io>& v = input ? model->inputs : model->outputs;
  if (index >= v.size())
    Throw(ErrorCode::kInvalidArgument, fn, ": model '", model->model->name(), "' has ", v.size(),
          input ? " inputs" : " outputs", "; index ", index, " is out of range");
  return v[index];
}

kiln_status IoType(const kiln_model* model, size_t index, bool input, kiln_dtype* dtype,
                   size_t* rank, const char* fn);
kiln_status IoDim(const kiln_model* model, size_t index, bool input, size_t dim, int64_t* value,
                  const char** symbol, const char* fn);

}  // namespace

namespace kiln_capi {

using kiln::ErrorCode;

kiln_status Fail(kiln_status status, const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // no memory for the message: the status still says what happened
  }
  return status;
}

kiln_status ToStatus(ErrorCode code) {
  int c = static_cast<int>(code);
  return c >= KILN_INVALID_ARGUMENT && c <= KILN_PARSE_ERROR ? static_cast<kiln_status>(c)
                                                             : KILN_INTERNAL;
}

// Copies a C string the caller passed; NULL is an error naming the function and parameter.
std::string Str(const char* s, const char* fn, const char* what) {
  if (!s) Throw(ErrorCode::kInvalidArgument, fn, ": ", what, " is NULL");
  return s;
}

char* NewCString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace kiln_capi

// ---- status, errors, version ------------------------------------------------------------

extern "C" {

const char* kiln_last_error(void) {
  return t_last_error.c_str();
}

const char* kiln_status_name(kiln_status status) {
  switch (status) {
    case KILN_OK:
      return "KILN_OK";
    case KILN_INVALID_ARGUMENT:
      return "KILN_INVALID_ARGUMENT";
    case KILN_NOT_FOUND:
      return "KILN_NOT_FOUND";
    case KILN_UNSUPPORTED:
      return "KILN_UNSUPPORTED";
    case KILN_TYPE_ERROR:
      return "KILN_TYPE_ERROR";
    case KILN_COMPILE_ERROR:
      return "KILN_COMPILE_ERROR";
    case KILN_OUT_OF_MEMORY:
      return "KILN_OUT_OF_MEMORY";
    case KILN_CANCELLED:
      return "KILN_CANCELLED";
    case KILN_INTERNAL:
      return "KILN_INTERNAL";
    case KILN_PARSE_ERROR:
      return "KILN_PARSE_ERROR";
  }
  return "KILN_UNKNOWN_STATUS";
}

void kiln_version(int* major, int* minor, int* patch) {
  if (major) *major = KILN_VERSION_MAJOR;
  if (minor) *minor = KILN_VERSION_MINOR;
  if (patch) *patch = KILN_VERSION_PATCH;
}

#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)
const char* kiln_version_string(void) {
  return KILN_STR(KILN_VERSION_MAJOR) "." KILN_STR(KILN_VERSION_MINOR) "." KILN_STR(
      KILN_VERSION_PATCH);
}

void kiln_string_free(char* s) {
  std::free(s);
}

const char* kiln_dtype_name(kiln_dtype dtype) {
  int d = static_cast<int>(dtype);
  if (d < 0 || d >= kNumDTypes) return nullptr;
  return kiln::DTypeName(static_cast<kiln::DType>(d)).data();  // names are string literals
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  int d = static_cast<int>(dtype);
  if (d < 0 || d >= kNumDTypes) return 0;
  return static_cast<size_t>(kiln::DTypeSize(static_cast<kiln::DType>(d)));
}

// ---- tensors ------------------------------------------------------------------------------

kiln_status kiln_tensor_create(kiln_dtype dtype, size_t rank, const int64_t* shape,
                               kiln_tensor** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  auto t = std::make_unique<kiln_tensor>();
  t->t = kiln::Tensor::Empty(ToDType(dtype, __func__), ToShape(rank, shape, __func__));
  *out = t.release();
  KILN_API_END
}

kiln_status kiln_tensor_wrap(kiln_dtype dtype, size_t rank, const int64_t* shape, void* data,
                             size_t nbytes, kiln_tensor** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  kiln::DType d = ToDType(dtype, __func__);
  std::vector<int64_t> dims = ToShape(rank, shape, __func__);
  size_t want =
      static_cast<size_t>(kiln::CheckedNumel(dims, "kiln_tensor_wrap: shape")) * kiln::DTypeSize(d);
  if (nbytes != want)
    Throw(ErrorCode::kInvalidArgument, __func__, ": ", kiln::DTypeName(d), kiln::IntsToString(dims),
          " needs ", want, " bytes, the buffer has ", nbytes);
  if (want && !data) Throw(ErrorCode::kInvalidArgument, __func__, ": data is NULL");
  if (reinterpret_cast<uintptr_t>(data) % kiln::DTypeSize(d))
    Throw(ErrorCode::kInvalidArgument, __func__, ": data is not aligned to its ",
          kiln::DTypeSize(d), "-byte elements");
  auto t = std::make_unique<kiln_tensor>();
  // No owner: the caller keeps the buffer (kiln.h states the lifetime rule).
  t->t = kiln::Tensor::Wrap(d, dims, data, nullptr);
  *out = t.release();
  KILN_API_END
}

kiln_status kiln_tensor_read_onnx_pb(const char* path, kiln_tensor** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(path);
  KILN_REQUIRE(out);
  auto t = std::make_unique<kiln_tensor>();
  t->t = kiln::ReadOnnxTensorFile(path);
  *out = t.release();
  KILN_API_END
}

void kiln_tensor_destroy(kiln_tensor* tensor) {
  delete tensor;
}

kiln_status kiln_tensor_dtype(const kiln_tensor* tensor, kiln_dtype* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  KILN_REQUIRE(out);
  *out = static_cast<kiln_dtype>(tensor->t.dtype());
  KILN_API_END
}

kiln_status kiln_tensor_rank(const kiln_tensor* tensor, size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  KILN_REQUIRE(out);
  *out = static_cast<size_t>(tensor->t.ndim());
  KILN_API_END
}

kiln_status kiln_tensor_shape(const kiln_tensor* tensor, size_t capacity, int64_t* dims) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  size_t rank = static_cast<size_t>(tensor->t.ndim());
  if (rank && !dims) Throw(ErrorCode::kInvalidArgument, __func__, ": dims is NULL");
  if (capacity < rank)
    Throw(ErrorCode::kInvalidArgument, __func__, ": the tensor has rank ", rank,
          ", dims holds only ", capacity);
  std::copy(tensor->t.shape().begin(), tensor->t.shape().end(), dims);
  KILN_API_END
}

kiln_status kiln_tensor_num_elements(const kiln_tensor* tensor, int64_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  KILN_REQUIRE(out);
  *out = tensor->t.numel();
  KILN_API_END
}

kiln_status kiln_tensor_nbytes(const kiln_tensor* tensor, size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  KILN_REQUIRE(out);
  *out = tensor->t.nbytes();
  KILN_API_END
}

kiln_status kiln_tensor_data(const kiln_tensor* tensor, void** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  KILN_REQUIRE(out);
  *out = tensor->t.numel() ? tensor->t.raw_data() : nullptr;
  KILN_API_END
}

kiln_status kiln_tensor_copy_from_host(kiln_tensor* tensor, const void* src, size_t nbytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  if (nbytes != tensor->t.nbytes())
    Throw(ErrorCode::kInvalidArgument, __func__, ": the tensor ", tensor->t.TypeString(), " holds ",
          tensor->t.nbytes(), " bytes, given ", nbytes);
  if (nbytes) {
    KILN_REQUIRE(src);
    std::memcpy(tensor->t.raw_data(), src, nbytes);
  }
  KILN_API_END
}

kiln_status kiln_tensor_copy_to_host(const kiln_tensor* tensor, void* dst, size_t nbytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(tensor);
  if (nbytes != tensor->t.nbytes())
    Throw(ErrorCode::kInvalidArgument, __func__, ": the tensor ", tensor->t.TypeString(), " holds ",
          tensor->t.nbytes(), " bytes, given ", nbytes);
  if (nbytes) {
    KILN_REQUIRE(dst);
    std::memcpy(dst, tensor->t.raw_data(), nbytes);
  }
  KILN_API_END
}

// ---- models ---------------------------------------------------------------------------------

kiln_status kiln_model_load_onnx_file(const char* path, kiln_model** out) {
  return kiln_model_load_onnx_file_with(path, nullptr, out);
}

kiln_status kiln_model_load_onnx_buffer(const void* data, size_t size, kiln_model** out) {
  return kiln_model_load_onnx_buffer_with(data, size, nullptr, out);
}

kiln_status kiln_load_options_create(kiln_load_options** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = new kiln_load_options();
  KILN_API_END
}

void kiln_load_options_destroy(kiln_load_options* options) {
  delete options;
}

kiln_status kiln_load_options_set_max_model_bytes(kiln_load_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (max_bytes == 0 || max_bytes > kiln::kMaxProtobufBytes)
    Throw(ErrorCode::kInvalidArgument, __func__, ": max_model_bytes must be 1 to ",
          kiln::kMaxProtobufBytes, " (protobuf's limit), got ", max_bytes);
  options->options.max_model_bytes = max_bytes;
  KILN_API_END
}

kiln_status kiln_load_options_set_max_weight_bytes(kiln_load_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.max_weight_bytes = max_bytes;
  KILN_API_END
}

kiln_status kiln_load_options_set_base_dir(kiln_load_options* options, const char* dir) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.base_dir = dir ? dir : "";
  KILN_API_END
}

kiln_status kiln_model_load_onnx_file_with(const char* path, const kiln_load_options* options,
                                           kiln_model** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(path);
  KILN_REQUIRE(out);
  *out = WrapImported(
             kiln::ImportOnnxFile(path, options ? options->options : kiln::OnnxImportOptions{}))
             .release();
  KILN_API_END
}

kiln_status kiln_model_load_onnx_buffer_with(const void* data, size_t size,
                                             const kiln_load_options* options, kiln_model** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(data);
  KILN_REQUIRE(out);
  *out = WrapImported(kiln::ImportOnnxBuffer(
                          data, size, options ? options->options : kiln::OnnxImportOptions{}))
             .release();
  KILN_API_END
}

void kiln_model_destroy(kiln_model* model) {
  delete model;
}

kiln_status kiln_model_name(const kiln_model* model, const char** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(model);
  KILN_REQUIRE(out);
  *out = model->model->name().c_str();
  KILN_API_END
}

kiln_status kiln_model_num_inputs(const kiln_model* model, size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(model);
  KILN_REQUIRE(out);
  *out = model->inputs.size();
  KILN_API_END
}

kiln_status kiln_model_num_outputs(const kiln_model* model, size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(model);
  KILN_REQUIRE(out);
  *out = model->outputs.size();
  KILN_API_END
}

kiln_status kiln_model_input_name(const kiln_model* model, size_t index, const char** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = IoAt(model, index, true, __func__).name.c_str();
  KILN_API_END
}

kiln_status kiln_model_output_name(const kiln_model* model, size_t index, const char** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = IoAt(model, index, false, __func__).name.c_str();
  KILN_API_END
}

kiln_status kiln_model_input_type(const kiln_model* model, size_t index, kiln_dtype* dtype,
                                  size_t* rank) {
  return IoType(model, index, true, dtype, rank, __func__);
}

kiln_status kiln_model_output_type(const kiln_model* model, size_t index, kiln_dtype* dtype,
                                   size_t* rank) {
  return IoType(model, index, false, dtype, rank, __func__);
}

kiln_status kiln_model_input_dim(const kiln_model* model, size_t index, size_t dim, int64_t* value,
                                 const char** symbol) {
  return IoDim(model, index, true, dim, value, symbol, __func__);
}

kiln_status kiln_model_output_dim(const kiln_model* model, size_t index, size_t dim, int64_t* value,
                                  const char** symbol) {
  return IoDim(model, index, false, dim, value, symbol, __func__);
}

kiln_status kiln_model_print(const kiln_model* model, char** out_text) {
  KILN_API_BEGIN
  KILN_REQUIRE(model);
  KILN_REQUIRE(out_text);
  std::vector<kiln::Tensor> meta;  // large weights print as meta[i], not in full
  *out_text = NewCString(kiln::Print(kiln::IRModule({{"main", model->model->graph()}}), {}, &meta));
  KILN_API_END
}

}  // extern "C"

// ---- helpers shared by input and output introspection ---------------------------------------

namespace {

kiln_status IoType(const kiln_model* model, size_t index, bool input, kiln_dtype* dtype,
                   size_t* rank, const char* fn) {
  KILN_API_BEGIN
  const kiln::TensorTypeNode* tt = kiln::AsTensor(IoAt(model, index, input, fn).type);
  KILN_CHECK(tt, "model inputs and outputs are tensors");
  if (dtype) *dtype = static_cast<kiln_dtype>(tt->dtype);
  if (rank) *rank = static_cast<size_t>(tt->ndim());
  KILN_API_END
}

kiln_status IoDim(const kiln_model* model, size_t index, bool input, size_t dim, int64_t* value,
                  const char** symbol, const char* fn) {
  KILN_API_BEGIN
  const kiln_model::Io& io = IoAt(model, index, input, fn);
  const kiln::TensorTypeNode* tt = kiln::AsTensor(io.type);
  KILN_CHECK(tt, "model inputs and outputs are tensors");
  if (dim >= static_cast<size_t>(tt->ndim()))
    Throw(ErrorCode::kInvalidArgument, fn, ": ", input ? "input '" : "output '", io.name,
          "' has rank ", tt->ndim(), "; dim ", dim, " is out of range");
  const kiln::Dim& d = tt->shape[dim];
  if (value) *value = d.is_const() ? d.value() : -1;
  if (symbol) *symbol = d.is_const() ? nullptr : io.dim_text[dim].c_str();
  KILN_API_END
}

}  // namespace
