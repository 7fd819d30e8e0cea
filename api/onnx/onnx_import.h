// ONNX import: an ONNX ModelProto (file or memory) -> a kiln graph Function, through Debian's
// libonnx (protobuf parsing and the checker). No ONNX or protobuf type appears in this header,
// so the C API and the tools include it without those headers.
//
// What the importer guarantees (SPEC.md §7, issue 6): graph inputs with `dim_param` become
// symbolic dims (`batch`); initializers become constants; each ONNX op maps onto kiln ops
// through one table (op_table.cc), attributes converted and defaulted there. Default-domain
// opsets 1 to 17 import; each node is converted with its opset's semantics (older attribute
// forms, legacy broadcasting, Softmax's 2-D coercion), and an op whose old semantics kiln does
// not implement is kUnsupported naming the op, the node and the opset. Other domains
// (ai.onnx.ml, ai.onnx.preview.training) are kUnsupported. Every malformed
// input is a kiln::Error whose message names the thing at fault (the node name and op type, the
// initializer, the file), never a crash or an out-of-bounds read.
//
// Inputs that kiln needs at import time (Reshape's shape, Slice's starts/ends/axes/steps,
// Squeeze/Unsqueeze/ReduceSum axes, Split sizes, Expand's shape) must be initializers or
// `Constant` outputs; a computed one is kUnsupported naming the node. External data must lie
// inside the model's folder (no absolute path, no `..`, no symlink out of it).
//
// Threading: the functions are reentrant; they share nothing mutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace kiln {

struct ImportedModel {
  // Parameters are the graph inputs that are not initializers, in ONNX order, each with a
  // tensor type whose dims may be symbolic (a sequence input: one parameter per element, as
  // OnnxImportOptions::sequence_inputs gives them); the body returns the graph outputs (a Tuple
  // when there are several), in ONNX order, a sequence output as a List.
  Function graph;
  std::string name;                      // graph.name, else the file's stem, else "model"
  std::vector<std::string> input_names;  // one per parameter
  std::vector<std::string> output_names;
  int64_t opset = 0;  // of the default ("" / "ai.onnx") domain
};

// Protobuf cannot address more than 2 GiB in one message: the most an ONNX file can hold.
inline constexpr uint64_t kMaxProtobufBytes = 0x7fffffff;

struct OnnxImportOptions {
  // Folder against which external-data locations resolve. Empty: external data is an error
  // (ImportOnnxBuffer); ImportOnnxFile then uses the model file's folder.
  std::string base_dir;
  // The largest model file (or buffer) accepted, checked before it is read: a file is stat'ed
  // first, and must be a regular file. At most kMaxProtobufBytes.
  uint64_t max_model_bytes = kMaxProtobufBytes;
  // The most bytes of weights (initializers and Constant values, inline or external) the model
  // may have, checked tensor by tensor before each is allocated; 0: half the machine's memory.
  // External data of 64 KiB and more (at 64-byte aligned offsets) is memory-mapped, not read.
  uint64_t max_weight_bytes = 0;
  // The element shapes of the graph's sequence inputs, by input name (a sequence's length and
  // its elements' ranks are not in the model: a run gives them). Element i becomes the
  // parameter `<name>.<i>` of that shape (dims may be symbols) and the input the sequence of
  // those parameters (ir/sequence.h); no elements, an empty sequence. A sequence input without
  // an entry is kUnsupported, naming it.
  std::map<std::string, std::vector<Shape>> sequence_inputs;
};

// kInvalidArgument (unreadable, truncated or malformed file, failed checker), kUnsupported
// (an op or opset kiln does not map: the message names the op type, the node and the opset),
// kTypeError (the graph does not type-check: the node is named).
ImportedModel ImportOnnxFile(const std::string& path, const OnnxImportOptions& options = {});
ImportedModel ImportOnnxBuffer(const void* data, size_t size,
                               const OnnxImportOptions& options = {});

// A serialized ONNX TensorProto (the backend test cases' input_N.pb / output_N.pb) as a Tensor;
// `name` receives the proto's name when non-null. Errors as above, naming the file.
Tensor ReadOnnxTensorFile(const std::string& path, std::string* name = nullptr);
Tensor ReadOnnxTensorBuffer(const void* data, size_t size, std::string* name = nullptr);

// A graph input of an ONNX model as a loader sees it before importing: its name and whether it
// is a sequence (whose elements' shapes OnnxImportOptions::sequence_inputs must then give).
struct OnnxGraphInput {
  std::string name;
  bool sequence = false;
};
// The graph inputs of the model file at `path` that are not initializers, in ONNX order. Reads
// and parses the file (not the weights' external data); errors as ImportOnnxFile's.
std::vector<OnnxGraphInput> OnnxGraphInputs(const std::string& path,
                                            uint64_t max_model_bytes = kMaxProtobufBytes);

// A serialized ONNX SequenceProto of tensors (a backend test case's input or output that is a
// sequence: the model's type says which file holds one) as its elements; `name` receives the
// proto's name when non-null. A sequence of anything but tensors is kUnsupported; other errors as
// above, naming the file.
std::vector<Tensor> ReadOnnxSequenceFile(const std::string& path, std::string* name = nullptr);

// The ONNX op types the table maps (sorted), for `kiln` tools and error messages.
std::vector<std::string> SupportedOnnxOps();

}  // namespace kiln
