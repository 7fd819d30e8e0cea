// The C API's implementation, shared by its files (kiln.cc: status, tensors, models; graph_api.cc:
// graph building, passes; engine_api.cc: options, engines, runs, statistics): the handles behind
// kiln.h's opaque types, the helpers they share, and the frame every fallible function has
// (KILN_API_BEGIN ... KILN_API_END, kiln.cc's file comment). Not installed.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "engine/engine.h"
#include "engine/model.h"
#include "ir/error.h"
#include "kiln.h"

// ---- the handles ------------------------------------------------------------------------

struct kiln_tensor {
  kiln::Tensor t;
};

// A model and what its introspection functions return: the strings live here so that the
// `const char*` the C caller gets stay valid as long as the handle.
// A sequence output `o` (ir/sequence.h) is returned by `model` as seq.length(o) followed by the
// elements of o, in place: kiln_engine_run_lists regroups them; the other runs refuse such a
// model (RequireTensorOutputs).
struct kiln_model {
  struct Io {
    std::string name;
    kiln::Type type;  // a tensor type (a sequence's element); dims may be symbolic
    std::vector<std::string> dim_text;  // per dim: "" for a constant, else its text
    bool sequence = false;
  };
  kiln::ModelPtr model;
  std::vector<Io> inputs, outputs;
  bool sequence_outputs = false;  // any output is a sequence
};

struct kiln_tensor_list {
  std::vector<kiln_tensor> tensors;
};

struct kiln_engine {
  std::unique_ptr<kiln::Engine> engine;
};

struct kiln_options {
  kiln::EngineOptions options;
};

struct kiln_load_options {
  kiln::OnnxImportOptions options;
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

namespace kiln_capi {

// Sets the thread's last-error message and returns `status`.
kiln_status Fail(kiln_status status, const char* message) noexcept;
// The kiln_status of an ErrorCode (kiln.h mirrors them; anything else is KILN_INTERNAL).
kiln_status ToStatus(kiln::ErrorCode code);
// Copies a C string the caller passed; NULL is an error naming the function and parameter.
std::string Str(const char* s, const char* fn, const char* what);
// A malloc'ed copy, the caller's to free with kiln_string_free.
char* NewCString(const std::string& s);
std::string Join(const std::vector<std::string>& v, const char* sep);
// The DType of a kiln_dtype; one out of range is kInvalidArgument naming `fn`.
kiln::DType ToDType(kiln_dtype d, const char* fn);
// Wraps a created model with its input and output names (`output_names` empty: `output_<i>`).
std::unique_ptr<kiln_model> WrapModel(kiln::ModelPtr model,
                                      const std::vector<std::string>& input_names,
                                      const std::vector<std::string>& output_names);

// Throws kUnsupported naming `fn` and the first sequence output of `m`, if it has one: only
// kiln_engine_run_lists returns sequences.
void RequireTensorOutputs(const kiln_model& m, const char* fn);

// A run whose arguments (kiln_engine_run's) are checked and bound, to execute now or on a
// stream (engine_api.cc). Holds the inputs' tensors (their storage is shared, so the caller's
// handles may go); `engine`, `model`, the `outputs` slot array and the tensors in it are the
// caller's and must outlive Execute.
struct PreparedRun {
  kiln::Engine* engine = nullptr;  // null: a reference run (kiln::Interpret), never in place
  const kiln_model* model = nullptr;
  std::vector<kiln::Tensor> inputs;
  kiln_tensor** outputs = nullptr;
  std::vector<size_t> index;  // the model output each slot receives
  bool in_place = false;      // every output given in place, in model order
  std::string fn;             // the C function, for messages
  // Runs the model and fills the slots, as kiln_engine_run documents; throws kiln::Error.
  void Execute() const;
};
// Errors name `fn` and the argument at fault, as kiln_engine_run's do.
PreparedRun PrepareRun(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                       const char* const* input_names, const kiln_tensor* const* inputs,
                       size_t num_outputs, const char* const* output_names, kiln_tensor** outputs,
                       const char* fn);
// `x: f32[batch, 784]` matches a tensor when dtype and rank agree and every constant dim is
// equal; symbols are bound (and checked for consistency) by the engine.
bool Matches(const kiln::Type& type, const kiln::Tensor& t);
// The concrete type of each output of `m` for these inputs, for naming the output in an error.
std::vector<std::string> ExpectedOutputTypes(const kiln_model& m,
                                             const std::vector<kiln::Tensor>& inputs);
// Runs `m` on `engine` into caller-given outputs in the model's order; a wrong output type is
// kInvalidArgument naming the output and `fn`.
void RunInPlace(kiln::Engine& engine, const kiln_model& m, std::span<const kiln::Tensor> in,
                std::span<const kiln::Tensor> out, const char* fn);
// kiln_engine_run where every output is given in place, in the model's order: checks and runs
// it without allocating (a warm shape allocates nothing at all) and returns true, or returns
// false having done nothing when the call is not that case or an argument is at fault (the
// general way, PrepareRun, then reports it). Throws what the run throws.
bool RunInPlaceFast(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                    const char* const* input_names, const kiln_tensor* const* inputs,
                    size_t num_outputs, const char* const* output_names, kiln_tensor** outputs);
// PrepareRun's checks and binding for a given engine, or for a reference run (`engine` null).
PreparedRun BindRun(kiln::Engine* engine, const kiln_model* model, size_t num_inputs,
                    const char* const* input_names, const kiln_tensor* const* inputs,
                    size_t num_outputs, const char* const* output_names, kiln_tensor** outputs,
                    const char* fn);

}  // namespace kiln_capi

// The boundary: one frame for every fallible function. `__func__` names the function in the
// messages of KILN_REQUIRE.
#define KILN_API_BEGIN try {
#define KILN_API_END                                                           \
  }                                                                            \
  catch (const kiln::Error& e) {                                               \
    return ::kiln_capi::Fail(::kiln_capi::ToStatus(e.code()), e.what());       \
  }                                                                            \
  catch (const std::bad_alloc&) {                                              \
    return ::kiln_capi::Fail(KILN_OUT_OF_MEMORY, "kiln: out of memory");       \
  }                                                                            \
  catch (const std::exception& e) {                                            \
    return ::kiln_capi::Fail(KILN_INTERNAL, e.what());                         \
  }                                                                            \
  catch (...) {                                                                \
    return ::kiln_capi::Fail(KILN_INTERNAL, "kiln: an unknown C++ exception"); \
  }                                                                            \
  return KILN_OK;

// A required pointer argument: NULL is KILN_INVALID_ARGUMENT naming the function and argument.
#define KILN_REQUIRE(p)                                                                         \
  do {                                                                                          \
    if (!(p)) ::kiln::Throw(::kiln::ErrorCode::kInvalidArgument, __func__, ": " #p " is NULL"); \
  } while (0)
