// The C API's sequences (kiln.h): sequence inputs given at load, lists of tensors, and the
// ONNX graph inputs a loader asks about first. Sequence outputs are made by WrapModel (kiln.cc)
// and returned by kiln_engine_run_lists (engine_api.cc). Every fallible function has kiln.cc's
// frame (capi_internal.h).
#include <memory>
#include <string>
#include <vector>

#include "api/capi/capi_internal.h"
#include "ir/trace.h"

namespace {

using kiln::ErrorCode;
using kiln::Throw;

}  // namespace

kiln_status kiln_onnx_file_inputs_json(const char* path, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(path);
  KILN_REQUIRE(out_json);
  std::string json = "[";
  for (const kiln::OnnxGraphInput& in : kiln::OnnxGraphInputs(path)) {
    if (json.size() > 1) json += ",";
    json += kiln::StrCat("{\"name\":", kiln::JsonQuote(in.name),
                         ",\"sequence\":", in.sequence ? "true" : "false", "}");
  }
  *out_json = kiln_capi::NewCString(json + "]");
  KILN_API_END
}

kiln_status kiln_load_options_set_sequence_input(kiln_load_options* options, const char* input,
                                                 size_t num_elements, const size_t* ranks,
                                                 const int64_t* dims) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  const std::string name = kiln_capi::Str(input, __func__, "input");
  if (num_elements && !ranks)
    Throw(ErrorCode::kInvalidArgument, __func__, ": ranks is NULL for ", num_elements, " elements");
  std::vector<kiln::Shape> shapes(num_elements);
  size_t at = 0;
  for (size_t i = 0; i < num_elements; ++i) {
    if (ranks[i] && !dims) Throw(ErrorCode::kInvalidArgument, __func__, ": dims is NULL");
    for (size_t k = 0; k < ranks[i]; ++k, ++at) {
      const int64_t d = dims[at];
      if (d < -1)
        Throw(ErrorCode::kInvalidArgument, __func__, ": input '", name, "' element ", i, " dim ", k,
              " is ", d, " (a size, or -1 for any)");
      shapes[i].push_back(
          d >= 0 ? kiln::Dim(d)
                 : kiln::Dim::Symbol(kiln::ExternalDimName(kiln::StrCat(name, ".", i, ".d", k))));
    }
  }
  options->options.sequence_inputs[name] = std::move(shapes);
  KILN_API_END
}

kiln_status kiln_model_output_is_sequence(const kiln_model* model, size_t index, int* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(model);
  KILN_REQUIRE(out);
  if (index >= model->outputs.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": model '", model->model->name(), "' has ",
          model->outputs.size(), " outputs; index ", index, " is out of range");
  *out = model->outputs[index].sequence ? 1 : 0;
  KILN_API_END
}

kiln_status kiln_tensor_list_size(const kiln_tensor_list* list, size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(list);
  KILN_REQUIRE(out);
  *out = list->tensors.size();
  KILN_API_END
}

kiln_status kiln_tensor_list_get(const kiln_tensor_list* list, size_t index,
                                 const kiln_tensor** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(list);
  KILN_REQUIRE(out);
  if (index >= list->tensors.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": the list has ", list->tensors.size(),
          " tensors; index ", index, " is out of range");
  *out = &list->tensors[index];
  KILN_API_END
}

void kiln_tensor_list_destroy(kiln_tensor_list* list) {
  delete list;
}

kiln_status kiln_tensor_list_read_onnx_pb(const char* path, kiln_tensor_list** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(path);
  KILN_REQUIRE(out);
  auto list = std::make_unique<kiln_tensor_list>();
  for (kiln::Tensor& t : kiln::ReadOnnxSequenceFile(path)) list->tensors.push_back({std::move(t)});
  *out = list.release();
  KILN_API_END
}
