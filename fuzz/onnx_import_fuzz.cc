// libFuzzer target: bytes -> the ONNX importer (parse, check, convert, infer types) -> a run on
// small inputs through the reference interpreter. Every way to fail must be a kiln::Error;
// anything else (a crash, an out-of-bounds read, undefined behaviour, another exception, an
// allocation past libFuzzer's limit) is a finding.
#include <cstddef>
#include <cstdint>

#include "api/onnx/onnx_import.h"
#include "fuzz/fuzz_util.h"
#include "ir/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::OnnxImportOptions options;
  options.max_weight_bytes = 1 << 20;  // no external data (no base folder), small weights
  kiln::ImportedModel model;
  try {
    model = kiln::ImportOnnxBuffer(data, size, options);
  } catch (const kiln::Error&) {
    return 0;
  }
  kiln::fuzz::RunIfSmall(model.graph);
  return 0;
}
