// The Open Inference Protocol v2 (KServe v2) on the wire, for `kiln serve`: datatypes, the
// inference request (JSON tensors, and the binary tensor data extension: a JSON header of
// `Inference-Header-Content-Length` bytes followed by the tensors' raw bytes), the inference
// response, and model metadata. Pure functions of bytes and model types; no HTTP and no engine,
// so every malformed input can be tested on its own. Errors are HttpError with the status to
// answer and a message that names the tensor or field at fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/cli/cli.h"
#include "kiln.h"

namespace kiln::serve {

struct HttpError {
  int status = 400;
  std::string message;
};

// "FP32", "INT64", "BOOL", ... (the protocol's names); nullptr for none.
const char* OipDatatype(kiln_dtype dtype);
// The kiln dtype of a protocol name; false for BYTES and unknown names.
bool DtypeFromOip(std::string_view name, kiln_dtype* out);

// A request's input tensor, decoded into kiln's layout. `data` is owned and aligned for any
// element type (operator new's alignment).
struct InputTensor {
  std::string name;
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> shape;
  std::unique_ptr<unsigned char[]> data;
  size_t nbytes = 0;
};

// An output the request asks for by name, and whether it wants it as binary data.
struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;  // echoed in the response; "" when absent
  std::vector<InputTensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_outputs = false;           // parameters.binary_data_output: the default for all
};

struct Limits {
  size_t max_elements = size_t{1} << 28;  // per tensor
};

// Parses an infer request body. `header_length` is Inference-Header-Content-Length when the
// request carries binary tensors (the JSON is then the first header_length bytes). Checks the
// JSON's structure, each input's datatype, shape (dims >= 0, elements <= limits.max_elements),
// and that its data (JSON values, or binary_data_size bytes of the binary part) has exactly the
// shape's elements, in range for the datatype. Throws HttpError 400.
InferRequest ParseInferRequest(std::string_view body, std::optional<size_t> header_length,
                               const Limits& limits);

// An output of a run: a view of bytes owned by `owner` (a kiln tensor, maybe shared by the
// requests of one batch, each viewing its rows).
struct OutputView {
  std::string name;
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;
};

// An encoded response: `body` is JSON, or (when header_length is set) a JSON header of that
// many bytes followed by binary tensors.
struct Response {
  std::string body;
  std::optional<size_t> header_length;
};

// The infer response for `outputs` (in the order asked for); `binary[i]` says whether
// outputs[i] goes as binary data.
Response EncodeInferResponse(const std::string& model_name, const std::string& id,
                             const std::vector<OutputView>& outputs,
                             const std::vector<bool>& binary);

// Model metadata: {"name", "versions": ["1"], "platform": "kiln_onnx", "inputs"/"outputs":
// [{"name", "datatype", "shape"}]}, symbolic dims as -1.
std::string ModelMetadataJson(const std::string& name, const std::vector<cli::IoType>& inputs,
                              const std::vector<cli::IoType>& outputs);

// {"error": message}
std::string ErrorJson(const std::string& message);

}  // namespace kiln::serve
