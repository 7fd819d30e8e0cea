// The C API (kiln.h) over the engine, the graph IR and the ONNX importer.
//
// Every function that can fail has the same frame: KILN_API_BEGIN ... KILN_API_END, the one
// place where C++ exceptions become statuses (kiln::Error -> its code, std::bad_alloc ->
// KILN_OUT_OF_MEMORY, anything else -> KILN_INTERNAL) and the thread-local last-error message
// is set. Inside the frame, results are computed into locals first and written to the
// caller's output parameters last, so a failure leaves them untouched.
#include "kiln.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "ir/error.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "passes/instrument.h"
#include "passes/pass.h"

// ---- the handles ------------------------------------------------------------------------

struct kiln_tensor {
  kiln::Tensor t;
};

// A model and what its introspection functions return: the strings live here so that the
// `const char*` the C caller gets stay valid as long as the handle.
struct kiln_model {
  struct Io {
    std::string name;
    kiln::Type type;                    // a tensor type; dims may be symbolic
    std::vector<std::string> dim_text;  // per dim: "" for a constant, else its text
  };
  kiln::ModelPtr model;
  std::vector<Io> inputs, outputs;
};

struct kiln_engine {
  std::unique_ptr<kiln::Engine> engine;
};

struct kiln_options {
  kiln::EngineOptions options;
};

struct kiln_attrs {
  kiln::Attrs attrs;
};

struct kiln_graph_builder {
  std::string name;
  std::vector<kiln::Var> params;
  std::vector<kiln::Expr> values;  // indexed by kiln_value
  std::vector<std::pair<kiln::Expr, std::string>> outputs;
};

struct kiln_pass_result {
  bool has_text = false;
  std::string text;
  std::string error;
};

namespace {

using kiln::ErrorCode;
using kiln::Throw;

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

ErrorCode ToErrorCode(kiln_status s) {
  return s >= KILN_INVALID_ARGUMENT && s <= KILN_PARSE_ERROR ? static_cast<ErrorCode>(s)
                                                             : ErrorCode::kInternal;
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

kiln::DType ToDType(kiln_dtype d, const char* fn) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) >= kNumDTypes)
    Throw(ErrorCode::kInvalidArgument, fn, ": ", static_cast<int>(d), " is not a kiln_dtype");
  return static_cast<kiln::DType>(d);
}

std::vector<int64_t> ToShape(size_t rank, const int64_t* shape, const char* fn) {
  if (rank && !shape) Throw(ErrorCode::kInvalidArgument, fn, ": shape is NULL for rank ", rank);
  return std::vector<int64_t>(shape, shape + rank);
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// ---- models ---------------------------------------------------------------------------

kiln_model::Io MakeIo(std::string name, const kiln::Type& type) {
  kiln_model::Io io{std::move(name), type, {}};
  if (const kiln::TensorTypeNode* tt = kiln::AsTensor(type))
    for (const kiln::Dim& d : tt->shape) io.dim_text.push_back(d.is_const() ? "" : d.ToString());
  return io;
}

// Wraps a created model with its input and output names (`output_names` empty: `output_<i>`).
std::unique_ptr<kiln_model> WrapModel(kiln::ModelPtr model,
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
    if (!kiln::AsTensor(out_types[j]))
      Throw(ErrorCode::kUnsupported, "model '", model->name(), "': output '", name, "' has type ",
            kiln::TypeToString(out_types[j]), "; outputs must be tensors");
    m->outputs.push_back(MakeIo(std::move(name), out_types[j]));
  }
  m->model = std::move(model);
  return m;
}

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

// ---- runs -------------------------------------------------------------------------------

// `x: f32[batch, 784]` matches a tensor when dtype and rank agree and every constant dim is
// equal; symbols are bound (and checked for consistency) by the engine.
bool Matches(const kiln::Type& type, const kiln::Tensor& t) {
  const kiln::TensorTypeNode* tt = kiln::AsTensor(type);
  if (!tt || tt->dtype != t.dtype() || tt->ndim() != t.ndim()) return false;
  for (int i = 0; i < t.ndim(); ++i)
    if (tt->shape[i].is_const() && tt->shape[i].value() != t.shape()[i]) return false;
  return true;
}

// The model-ordered inputs of a run, from the caller's named (or positional) ones.
std::vector<kiln::Tensor> GatherInputs(const kiln_model& m, size_t n, const char* const* names,
                                       const kiln_tensor* const* inputs, const char* fn) {
  const std::string& model_name = m.model->name();
  if (n && !inputs) Throw(ErrorCode::kInvalidArgument, fn, ": inputs is NULL");
  std::vector<int> slot_of(m.inputs.size(), -1);  // per model input: the caller's slot
  for (size_t i = 0; i < n; ++i) {
    size_t index = i;
    if (names) {
      if (!names[i]) Throw(ErrorCode::kInvalidArgument, fn, ": input_names[", i, "] is NULL");
      auto it = std::find_if(m.inputs.begin(), m.inputs.end(),
                             [&](const kiln_model::Io& io) { return io.name == names[i]; });
      if (it == m.inputs.end()) {
        std::vector<std::string> known;
        for (const kiln_model::Io& io : m.inputs) known.push_back(io.name);
        Throw(ErrorCode::kNotFound, fn, ": model '", model_name, "' has no input '", names[i],
              "' (its inputs: ", Join(known, ", "), ")");
      }
      index = static_cast<size_t>(it - m.inputs.begin());
    } else if (i >= m.inputs.size()) {
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "' takes ", m.inputs.size(),
            " inputs, given ", n);
    }
    if (slot_of[index] >= 0)
      Throw(ErrorCode::kInvalidArgument, fn, ": input '", m.inputs[index].name, "' is given twice");
    slot_of[index] = static_cast<int>(i);
  }
  std::vector<kiln::Tensor> out;
  out.reserve(m.inputs.size());
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const kiln_model::Io& io = m.inputs[k];
    if (slot_of[k] < 0)
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "': input '", io.name, "' (",
            kiln::TypeToString(io.type), ") is missing");
    const kiln_tensor* t = inputs[slot_of[k]];
    if (!t) Throw(ErrorCode::kInvalidArgument, fn, ": input '", io.name, "': the tensor is NULL");
    if (!Matches(io.type, t->t))
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "': input '", io.name,
            "': expected ", kiln::TypeToString(io.type), ", given ", t->t.TypeString());
    out.push_back(t->t);
  }
  return out;
}

// The concrete type of each output for these inputs, for naming the output in an error.
std::vector<std::string> ExpectedOutputTypes(const kiln_model& m,
                                             const std::vector<kiln::Tensor>& inputs) {
  std::vector<kiln::Type> types;
  for (const kiln::Tensor& t : inputs) types.push_back(kiln::TypeOfTensor(t));
  std::map<std::string, int64_t> symbols = kiln::BindInputShapes(m.model->graph(), types);
  std::vector<std::string> out;
  for (const kiln_model::Io& io : m.outputs) {
    const kiln::TensorTypeNode* tt = kiln::AsTensor(io.type);
    std::vector<int64_t> dims;
    for (const kiln::Dim& d : tt->shape) dims.push_back(d.TryEval(symbols).value_or(-1));
    out.push_back(kiln::StrCat(kiln::DTypeName(tt->dtype), kiln::IntsToString(dims)));
  }
  return out;
}

// ---- passes and instruments --------------------------------------------------------------

// A C instrument: the hooks get the pass name and, when asked for, the module's text.
class CInstrument : public kiln::PassInstrument {
 public:
  CInstrument(kiln_pass_hook before, kiln_pass_hook after, bool with_ir, void* user_data)
      : PassInstrument("CInstrument"),
        before_(before),
        after_(after),
        with_ir_(with_ir),
        user_data_(user_data) {}
  void RunBeforePass(const kiln::IRModule& m, const kiln::PassInfo& info) override {
    Call(before_, m, info);
  }
  void RunAfterPass(const kiln::IRModule& m, const kiln::PassInfo& info) override {
    Call(after_, m, info);
  }

 private:
  void Call(kiln_pass_hook hook, const kiln::IRModule& m, const kiln::PassInfo& info) const {
    if (!hook) return;
    if (!with_ir_) return hook(info.name.c_str(), nullptr, user_data_);
    std::string text = kiln::Print(m);
    hook(info.name.c_str(), text.c_str(), user_data_);
  }
  kiln_pass_hook before_, after_;
  bool with_ir_;
  void* user_data_;
};

// A C graph pass: module -> text -> callback -> (replacement text -> module). Errors get the
// pass's name from Pass::operator().
kiln::IRModule RunCPass(kiln_graph_pass_fn fn, void* user_data, const kiln::IRModule& m) {
  std::vector<kiln::Tensor> meta;
  std::string text = kiln::Print(m, {}, &meta);
  kiln_pass_result result;
  kiln_status status = fn(text.c_str(), &result, user_data);
  if (status != KILN_OK)
    Throw(ToErrorCode(status), "the callback returned ", kiln_status_name(status),
          result.error.empty() ? "" : ": ", result.error);
  if (!result.has_text) return m;
  kiln::IRModule out;
  try {
    out = kiln::ParseModule(result.text, &meta);
  } catch (const kiln::Error& e) {
    Throw(e.code(), "the module the callback returned does not parse: ", e.what());
  }
  for (const auto& [name, f] : m.prim_funcs())
    if (!out.prim_funcs().count(name)) out = out.WithPrimFunc(name, f);
  return out;
}

// ---- statistics as JSON ------------------------------------------------------------------

void JsonString(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void JsonNumber(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  out += buf;
}

void JsonPasses(std::string& out, const std::vector<kiln::PassTimingInstrument::Entry>& entries) {
  out += '[';
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    JsonString(out, e.name);
    out += ",\"calls\":" + std::to_string(e.calls) + ",\"total_ms\":";
    JsonNumber(out, e.total_ms);
    out += ",\"self_ms\":";
    JsonNumber(out, e.self_ms);
    out += ",\"children\":";
    JsonPasses(out, e.children);
    out += '}';
  }
  out += ']';
}

std::string StatsJson(const kiln::EngineStats& s) {
  std::string out = "{";
  auto field = [&](const char* key, uint64_t v) { out += kiln::StrCat("\"", key, "\":", v, ","); };
  field("runs", s.runs);
  field("hits", s.hits);
  field("misses", s.misses);
  field("specializations", s.specializations);
  field("compile_errors", s.compile_errors);
  field("evictions", s.evictions);
  field("generic_runs", s.generic_runs);
  field("generic_builds", s.generic_builds);
  field("generic_unavailable", s.generic_unavailable);
  field("background_queued", s.background_queued);
  field("cached_executables", s.cached_executables);
  field("kernel_compiles", s.kernel_compiles);
  field("kernel_cache_hits", s.kernel_cache_hits);
  field("disk_hits", s.disk_hits);
  field("disk_rejections", s.disk_rejections);
  out += "\"generic_unavailable_reasons\":[";
  for (size_t i = 0; i < s.generic_unavailable_reasons.size(); ++i) {
    if (i) out += ',';
    JsonString(out, s.generic_unavailable_reasons[i]);
  }
  out += "],";
  out += "\"disk_rejections_by_reason\":{";
  bool first = true;
  for (const auto& [reason, n] : s.disk_rejections_by_reason) {
    if (!first) out += ',';
    first = false;
    JsonString(out, reason);
    out += ':' + std::to_string(n);
  }
  out += "},\"compile_ms\":";
  JsonNumber(out, s.compile_ms);
  out += ",\"planned_peak_bytes\":" + std::to_string(s.planned_peak_bytes) + ",\"shapes\":[";
  for (size_t i = 0; i < s.shapes.size(); ++i) {
    const kiln::ShapeKeyStats& k = s.shapes[i];
    out += i ? ",{\"shape_key\":" : "{\"shape_key\":";
    JsonString(out, k.shape_key);
    out += ",\"compile_ms\":";
    JsonNumber(out, k.compile_ms);
    out +=
        kiln::StrCat(",\"kernels\":", k.kernels, ",\"planned_peak_bytes\":", k.planned_peak_bytes,
                     ",\"naive_bytes\":", k.naive_bytes, ",\"passes\":");
    JsonPasses(out, k.pass_timing);
    out += '}';
  }
  out += "],\"kernels\":[";
  for (size_t i = 0; i < s.kernel_profile.size(); ++i) {
    const kiln::KernelProfileStats& k = s.kernel_profile[i];
    out += i ? ",{\"shape_key\":" : "{\"shape_key\":";
    JsonString(out, k.shape_key);
    out += ",\"kernel\":";
    JsonString(out, k.kernel);
    out += ",\"calls\":" + std::to_string(k.calls) + ",\"total_ms\":";
    JsonNumber(out, k.total_ms);
    out += '}';
  }
  out += "]}";
  return out;
}

}  // namespace

// The boundary: one frame for every fallible function. `__func__` names the function in the
// messages of KILN_REQUIRE.
#define KILN_API_BEGIN try {
#define KILN_API_END                                              \
  }                                                               \
  catch (const kiln::Error& e) {                                  \
    return Fail(ToStatus(e.code()), e.what());                    \
  }                                                               \
  catch (const std::bad_alloc&) {                                 \
    return Fail(KILN_OUT_OF_MEMORY, "kiln: out of memory");       \
  }                                                               \
  catch (const std::exception& e) {                               \
    return Fail(KILN_INTERNAL, e.what());                         \
  }                                                               \
  catch (...) {                                                   \
    return Fail(KILN_INTERNAL, "kiln: an unknown C++ exception"); \
  }                                                               \
  return KILN_OK;

// A required pointer argument: NULL is KILN_INVALID_ARGUMENT naming the function and argument.
#define KILN_REQUIRE(p)                                                                         \
  do {                                                                                          \
    if (!(p)) ::kiln::Throw(::kiln::ErrorCode::kInvalidArgument, __func__, ": " #p " is NULL"); \
  } while (0)

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
  KILN_API_BEGIN
  KILN_REQUIRE(path);
  KILN_REQUIRE(out);
  *out = WrapImported(kiln::ImportOnnxFile(path)).release();
  KILN_API_END
}

kiln_status kiln_model_load_onnx_buffer(const void* data, size_t size, kiln_model** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(data);
  KILN_REQUIRE(out);
  *out = WrapImported(kiln::ImportOnnxBuffer(data, size)).release();
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

// ---- graph building -------------------------------------------------------------------------

kiln_status kiln_attrs_create(kiln_attrs** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = new kiln_attrs();
  KILN_API_END
}

void kiln_attrs_destroy(kiln_attrs* attrs) {
  delete attrs;
}

#define KILN_ATTR_SETTER(suffix, ctype, convert)                                          \
  kiln_status kiln_attrs_set_##suffix(kiln_attrs* attrs, const char* name, ctype value) { \
    KILN_API_BEGIN                                                                        \
    KILN_REQUIRE(attrs);                                                                  \
    KILN_REQUIRE(name);                                                                   \
    attrs->attrs.Set(name, convert);                                                      \
    KILN_API_END                                                                          \
  }
KILN_ATTR_SETTER(int, int64_t, kiln::AttrValue(value))
KILN_ATTR_SETTER(float, double, kiln::AttrValue(value))
KILN_ATTR_SETTER(string, const char*, kiln::AttrValue(Str(value, __func__, "value")))
KILN_ATTR_SETTER(dtype, kiln_dtype, kiln::AttrValue(ToDType(value, __func__)))
KILN_ATTR_SETTER(bool, int, kiln::AttrValue(value != 0))
#undef KILN_ATTR_SETTER

kiln_status kiln_attrs_set_ints(kiln_attrs* attrs, const char* name, const int64_t* values,
                                size_t count) {
  KILN_API_BEGIN
  KILN_REQUIRE(attrs);
  KILN_REQUIRE(name);
  if (count) KILN_REQUIRE(values);
  attrs->attrs.Set(name, std::vector<int64_t>(values, values + count));
  KILN_API_END
}

kiln_status kiln_attrs_set_floats(kiln_attrs* attrs, const char* name, const double* values,
                                  size_t count) {
  KILN_API_BEGIN
  KILN_REQUIRE(attrs);
  KILN_REQUIRE(name);
  if (count) KILN_REQUIRE(values);
  attrs->attrs.Set(name, std::vector<double>(values, values + count));
  KILN_API_END
}

kiln_status kiln_graph_builder_create(const char* model_name, kiln_graph_builder** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  auto b = std::make_unique<kiln_graph_builder>();
  b->name = model_name && *model_name ? model_name : "model";
  *out = b.release();
  KILN_API_END
}

void kiln_graph_builder_destroy(kiln_graph_builder* builder) {
  delete builder;
}

kiln_status kiln_graph_builder_add_input(kiln_graph_builder* builder, const char* name,
                                         kiln_dtype dtype, size_t rank, const int64_t* dims,
                                         const char* const* dim_names, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  std::string n = Str(name, __func__, "name");
  if (n.empty()) Throw(ErrorCode::kInvalidArgument, __func__, ": an input needs a name");
  for (const kiln::Var& p : builder->params)
    if (p->name == n)
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
            "' already has an input '", n, "'");
  kiln::DType d = ToDType(dtype, __func__);
  kiln::Shape shape;
  for (size_t i = 0; i < rank; ++i) {
    if (dim_names && dim_names[i]) {
      if (!*dim_names[i])
        Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i,
              " has an empty symbol name");
      if (kiln::IsReservedDimName(dim_names[i]))
        Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i, " name '",
              dim_names[i], "' has the form of kiln's own symbols (_vN, _sN, unk__N)");
      shape.push_back(kiln::Dim::Symbol(dim_names[i]));
      continue;
    }
    if (!dims)
      Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i,
            " is neither a number (dims is NULL) nor a symbol");
    if (dims[i] < 0)
      Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i, " is ", dims[i]);
    shape.push_back(kiln::Dim(dims[i]));
  }
  kiln::Var v = kiln::MakeVar(n, kiln::TensorType(shape, d));
  builder->values.push_back(v);
  builder->params.push_back(v);
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_constant(kiln_graph_builder* builder, const kiln_tensor* value,
                                            const char* name, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(value);
  KILN_REQUIRE(out);
  builder->values.push_back(kiln::MakeConstant(value->t.Clone(), name ? name : ""));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_op(kiln_graph_builder* builder, const char* op, size_t num_args,
                                      const kiln_value* args, const kiln_attrs* attrs,
                                      const char* node_name, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(op);
  KILN_REQUIRE(out);
  if (num_args) KILN_REQUIRE(args);
  std::string node = node_name ? node_name : "";
  std::vector<kiln::Expr> operands;
  for (size_t i = 0; i < num_args; ++i) {
    if (args[i] >= builder->values.size())
      Throw(ErrorCode::kInvalidArgument, __func__, ": node '", node, "' (", op, "): argument ", i,
            " is value ", args[i], ", but the builder has ", builder->values.size(), " values");
    operands.push_back(builder->values[args[i]]);
  }
  kiln::Expr call;
  try {
    call = kiln::MakeCall(op, std::move(operands), attrs ? attrs->attrs : kiln::Attrs{}, node);
  } catch (const kiln::Error& e) {
    Throw(e.code(), __func__, ": node '", node, "': ", e.what());
  }
  builder->values.push_back(std::move(call));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_get_item(kiln_graph_builder* builder, kiln_value tuple, int index,
                                        kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  if (tuple >= builder->values.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": value ", tuple, " does not exist");
  if (index < 0) Throw(ErrorCode::kInvalidArgument, __func__, ": index ", index, " is negative");
  builder->values.push_back(kiln::MakeTupleGetItem(builder->values[tuple], index));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_output(kiln_graph_builder* builder, kiln_value value,
                                          const char* name) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  std::string n = Str(name, __func__, "name");
  if (value >= builder->values.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": output '", n, "': value ", value,
          " does not exist");
  for (const auto& [e, other] : builder->outputs)
    if (other == n)
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
            "' already has an output '", n, "'");
  builder->outputs.emplace_back(builder->values[value], std::move(n));
  KILN_API_END
}

kiln_status kiln_graph_builder_build(kiln_graph_builder* builder, kiln_model** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  if (builder->outputs.empty())
    Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
          "' has no outputs (kiln_graph_builder_add_output)");
  std::vector<kiln::Expr> results;
  std::vector<std::string> names;
  for (const auto& [e, name] : builder->outputs) {
    results.push_back(e);
    names.push_back(name);
  }
  kiln::Expr body = results.size() == 1 ? results[0] : kiln::MakeTuple(results);
  kiln::ModelPtr model =
      kiln::Model::Create(kiln::MakeFunction(builder->params, body), builder->name);
  *out = WrapModel(std::move(model), {}, names).release();
  KILN_API_END
}

// ---- passes -------------------------------------------------------------------------------

kiln_status kiln_pass_result_set_text(kiln_pass_result* result, const char* module_text) {
  KILN_API_BEGIN
  KILN_REQUIRE(result);
  KILN_REQUIRE(module_text);
  result->text = module_text;
  result->has_text = true;
  KILN_API_END
}

kiln_status kiln_pass_result_set_error(kiln_pass_result* result, const char* message) {
  KILN_API_BEGIN
  KILN_REQUIRE(result);
  KILN_REQUIRE(message);
  result->error = message;
  KILN_API_END
}

kiln_status kiln_register_graph_pass(const char* name, int opt_level, size_t num_required,
                                     const char* const* required, kiln_graph_pass_fn fn,
                                     void* user_data) {
  KILN_API_BEGIN
  std::string n = Str(name, __func__, "name");
  KILN_REQUIRE(fn);
  if (num_required) KILN_REQUIRE(required);
  if (opt_level < 0)
    Throw(ErrorCode::kInvalidArgument, __func__, ": pass '", n, "': opt_level ", opt_level,
          " is negative");
  kiln::PassInfo info{n, opt_level, {}};
  for (size_t i = 0; i < num_required; ++i)
    info.required.push_back(Str(required[i], __func__, "a required pass name"));
  kiln::PassRegistration reg;
  reg.name = n;
  reg.opt_level = opt_level;
  reg.required = info.required;
  reg.doc = "registered through the C API";
  reg.create = [info, fn, user_data](const kiln::Attrs&) {
    return kiln::CreateModulePass(
        info, [fn, user_data](const kiln::IRModule& m, const kiln::PassContext&) {
          return RunCPass(fn, user_data, m);
        });
  };
  kiln::PassRegistry::Global().Register(std::move(reg));
  KILN_API_END
}

kiln_status kiln_pass_count(size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = kiln::PassRegistry::Global().Names().size();
  KILN_API_END
}

kiln_status kiln_pass_info(size_t index, char** name, int* opt_level, char** required) {
  KILN_API_BEGIN
  std::vector<std::string> names = kiln::PassRegistry::Global().Names();
  if (index >= names.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": ", names.size(),
          " passes are registered; index ", index, " is out of range");
  const kiln::PassRegistration* reg = kiln::PassRegistry::Global().Find(names[index]);
  KILN_CHECK(reg, "pass '", names[index], "' listed but not found");
  // Allocate both strings before writing either, so a failure writes nothing.
  std::unique_ptr<char, void (*)(char*)> n(name ? NewCString(reg->name) : nullptr,
                                           kiln_string_free);
  std::unique_ptr<char, void (*)(char*)> r(
      required ? NewCString(Join(reg->required, ",")) : nullptr, kiln_string_free);
  if (name) *name = n.release();
  if (required) *required = r.release();
  if (opt_level) *opt_level = reg->opt_level;
  KILN_API_END
}

// ---- options ------------------------------------------------------------------------------

kiln_status kiln_options_create(kiln_options** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = new kiln_options();
  KILN_API_END
}

void kiln_options_destroy(kiln_options* options) {
  delete options;
}

kiln_status kiln_options_set_target(kiln_options* options, const char* target) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.target = Str(target, __func__, "target");
  KILN_API_END
}

kiln_status kiln_options_set_opt_level(kiln_options* options, int opt_level) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (opt_level < 0)
    Throw(ErrorCode::kInvalidArgument, __func__, ": opt_level ", opt_level, " is negative");
  options->options.opt_level = opt_level;
  KILN_API_END
}

kiln_status kiln_options_set_num_threads(kiln_options* options, int num_threads) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (num_threads < 0)
    Throw(ErrorCode::kInvalidArgument, __func__, ": num_threads ", num_threads, " is negative");
  options->options.num_threads = num_threads;
  KILN_API_END
}

kiln_status kiln_options_set_cache_dir(kiln_options* options, const char* dir) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.cache_dir = dir ? dir : "";
  KILN_API_END
}

kiln_status kiln_options_set_cache_max_bytes(kiln_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (max_bytes == 0) Throw(ErrorCode::kInvalidArgument, __func__, ": max_bytes must be positive");
  options->options.cache_max_bytes = max_bytes;
  KILN_API_END
}

namespace {
void CheckPassName(const std::string& pass, const char* fn) {
  if (!kiln::PassRegistry::Global().Find(pass))
    Throw(ErrorCode::kNotFound, fn, ": unknown pass '", pass, "'");
}
}  // namespace

kiln_status kiln_options_disable_pass(kiln_options* options, const char* pass) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = Str(pass, __func__, "pass");
  CheckPassName(p, __func__);
  options->options.disabled_passes.push_back(std::move(p));
  KILN_API_END
}

kiln_status kiln_options_require_pass(kiln_options* options, const char* pass) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = Str(pass, __func__, "pass");
  CheckPassName(p, __func__);
  options->options.required_passes.push_back(std::move(p));
  KILN_API_END
}

namespace {
// Checks the key and the value's kind now (a scratch PassContext does it), so the error
// points at this call rather than at kiln_engine_create.
void SetConfig(kiln_options* options, const char* key, kiln::AttrValue value, const char* fn) {
  std::string k = Str(key, fn, "key");
  kiln::PassContext scratch;
  try {
    scratch.SetConfig(k, value);
  } catch (const kiln::Error& e) {
    Throw(e.code(), fn, ": ", e.what());
  }
  options->options.pass_config[k] = scratch.config().at(k);  // converted to the key's kind
}
}  // namespace

kiln_status kiln_options_set_config_int(kiln_options* options, const char* key, int64_t value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_float(kiln_options* options, const char* key, double value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_string(kiln_options* options, const char* key,
                                           const char* value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, Str(value, __func__, "value"), __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_bool(kiln_options* options, const char* key, int value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value != 0, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_max_specializations(kiln_options* options, int max) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (max < 0) Throw(ErrorCode::kInvalidArgument, __func__, ": max ", max, " is negative");
  options->options.max_specializations = max;
  KILN_API_END
}

kiln_status kiln_options_set_compile_policy(kiln_options* options, const char* policy) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  KILN_REQUIRE(policy);
  options->options.policy = kiln::ParseCompilePolicy(policy);
  KILN_API_END
}

kiln_status kiln_options_set_specialize_after(kiln_options* options, int runs) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (runs < 1) Throw(ErrorCode::kInvalidArgument, __func__, ": runs ", runs, " is below 1");
  options->options.specialize_after = runs;
  KILN_API_END
}

kiln_status kiln_options_set_compile_threads(kiln_options* options, int threads) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (threads < 1)
    Throw(ErrorCode::kInvalidArgument, __func__, ": threads ", threads, " is below 1");
  options->options.compile_threads = threads;
  KILN_API_END
}

kiln_status kiln_options_set_pipeline(kiln_options* options, const char* pipeline) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = pipeline ? pipeline : "";
  if (!p.empty()) {
    try {
      kiln::ParsePipeline(p);
    } catch (const kiln::Error& e) {
      Throw(e.code(), __func__, ": ", e.what());
    }
  }
  options->options.graph_pipeline = std::move(p);
  KILN_API_END
}

kiln_status kiln_options_set_profiling(kiln_options* options, int enabled) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.profile = enabled != 0;
  KILN_API_END
}

kiln_status kiln_options_add_instrument(kiln_options* options, kiln_pass_hook before,
                                        kiln_pass_hook after, int with_ir, void* user_data) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (!before && !after) Throw(ErrorCode::kInvalidArgument, __func__, ": both hooks are NULL");
  options->options.instruments.push_back(
      std::make_shared<CInstrument>(before, after, with_ir != 0, user_data));
  KILN_API_END
}

// ---- engines and runs -----------------------------------------------------------------------

kiln_status kiln_engine_create(const kiln_options* options, kiln_engine** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  auto e = std::make_unique<kiln_engine>();
  e->engine = std::make_unique<kiln::Engine>(options ? options->options : kiln::EngineOptions{});
  *out = e.release();
  KILN_API_END
}

void kiln_engine_destroy(kiln_engine* engine) {
  delete engine;
}

kiln_status kiln_engine_run(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                            const char* const* input_names, const kiln_tensor* const* inputs,
                            size_t num_outputs, const char* const* output_names,
                            kiln_tensor** outputs) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  const kiln_model& m = *model;
  std::vector<kiln::Tensor> in = GatherInputs(m, num_inputs, input_names, inputs, __func__);
  if (num_outputs && !outputs) Throw(ErrorCode::kInvalidArgument, __func__, ": outputs is NULL");
  if (!output_names && num_outputs != m.outputs.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": model '", m.model->name(), "' has ",
          m.outputs.size(), " outputs, given ", num_outputs, " slots (and no output names)");

  // Which model output each slot receives; whether every output is written in place, in order.
  std::vector<size_t> index(num_outputs);
  bool in_place = num_outputs == m.outputs.size();
  for (size_t j = 0; j < num_outputs; ++j) {
    index[j] = j;
    if (output_names) {
      if (!output_names[j])
        Throw(ErrorCode::kInvalidArgument, __func__, ": output_names[", j, "] is NULL");
      auto it = std::find_if(m.outputs.begin(), m.outputs.end(),
                             [&](const kiln_model::Io& io) { return io.name == output_names[j]; });
      if (it == m.outputs.end()) {
        std::vector<std::string> known;
        for (const kiln_model::Io& io : m.outputs) known.push_back(io.name);
        Throw(ErrorCode::kNotFound, __func__, ": model '", m.model->name(), "' has no output '",
              output_names[j], "' (its outputs: ", Join(known, ", "), ")");
      }
      index[j] = static_cast<size_t>(it - m.outputs.begin());
      for (size_t k = 0; k < j; ++k)
        if (index[k] == index[j])
          Throw(ErrorCode::kInvalidArgument, __func__, ": output '", output_names[j],
                "' is asked for twice");
    }
    if (outputs[j] && !Matches(m.outputs[index[j]].type, outputs[j]->t))
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", m.model->name(), "': output '",
            m.outputs[index[j]].name, "': expected ", kiln::TypeToString(m.outputs[index[j]].type),
            ", given ", outputs[j]->t.TypeString());
    in_place = in_place && outputs[j] && index[j] == j;
  }

  if (in_place) {
    std::vector<kiln::Tensor> out;
    out.reserve(num_outputs);
    for (size_t j = 0; j < num_outputs; ++j) out.push_back(outputs[j]->t);
    try {
      engine->engine->Run(*m.model, in, out);
    } catch (const kiln::Error& e) {
      // A model run in segments names the output and the size this run made itself.
      if (e.code() != ErrorCode::kInvalidArgument || m.model->segments()) throw;
      // A concrete dim of an output is wrong: name the output (only on this error path).
      std::vector<std::string> want = ExpectedOutputTypes(m, in);
      for (size_t j = 0; j < num_outputs; ++j)
        if (want[j] != out[j].TypeString())
          Throw(ErrorCode::kInvalidArgument, __func__, ": model '", m.model->name(), "': output '",
                m.outputs[j].name, "': expected ", want[j], ", given ", out[j].TypeString());
      throw;
    }
    return KILN_OK;
  }

  std::vector<kiln::Tensor> all = engine->engine->Run(*m.model, in);
  // Check the in-place slots and make the new handles before writing any slot.
  std::vector<std::unique_ptr<kiln_tensor>> fresh(num_outputs);
  for (size_t j = 0; j < num_outputs; ++j) {
    const kiln::Tensor& r = all[index[j]];
    if (!outputs[j]) {
      fresh[j] = std::make_unique<kiln_tensor>();
      fresh[j]->t = r;
    } else if (outputs[j]->t.dtype() != r.dtype() || outputs[j]->t.shape() != r.shape()) {
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", m.model->name(), "': output '",
            m.outputs[index[j]].name, "': expected ", r.TypeString(), ", given ",
            outputs[j]->t.TypeString());
    }
  }
  for (size_t j = 0; j < num_outputs; ++j) {
    if (fresh[j])
      outputs[j] = fresh[j].release();
    else if (size_t n = all[index[j]].nbytes())
      std::memcpy(outputs[j]->t.raw_data(), all[index[j]].raw_data(), n);
  }
  KILN_API_END
}

kiln_status kiln_engine_prepare(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  engine->engine->Prepare(*model->model, in);
  KILN_API_END
}

kiln_status kiln_engine_explain(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs,
                                char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(out_json);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  kiln::Explanation x = engine->engine->Explain(*model->model, in);
  std::string out = "{\"shape_key\":";
  JsonString(out, x.shape_key);
  out += kiln::StrCat(",\"cached\":", x.cached ? "true" : "false", ",\"tier\":\"",
                      kiln::TierName(x.tier), "\",\"reason\":");
  JsonString(out, x.reason);
  out += "}";
  *out_json = NewCString(out);
  KILN_API_END
}

kiln_status kiln_engine_save_shapes(const kiln_engine* engine, const kiln_model* model,
                                    const char* path) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(path);
  const std::string text =
      kiln::FormatShapeLog(*model->model, engine->engine->SeenShapes(*model->model));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
    Throw(ErrorCode::kInvalidArgument, __func__, ": cannot write '", path, "'");
  KILN_API_END
}

kiln_status kiln_engine_precompile_shapes(kiln_engine* engine, const kiln_model* model,
                                          const char* path) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(path);
  std::ifstream f(path, std::ios::binary);
  if (!f) Throw(ErrorCode::kNotFound, __func__, ": cannot read '", path, "'");
  std::stringstream text;
  text << f.rdbuf();
  try {
    engine->engine->Precompile(*model->model, kiln::ParseShapeLog(*model->model, text.str()));
  } catch (const kiln::Error& e) {
    Throw(e.code(), "'", path, "': ", e.what());
  }
  KILN_API_END
}

kiln_status kiln_engine_wait_background_compiles(kiln_engine* engine) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  engine->engine->WaitForBackgroundCompiles();
  KILN_API_END
}

kiln_status kiln_engine_stats_json(const kiln_engine* engine, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(out_json);
  *out_json = NewCString(StatsJson(engine->engine->stats()));
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
