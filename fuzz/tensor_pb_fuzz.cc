// libFuzzer target: bytes -> the ONNX tensor reader (the `.pb` files of test data and of
// `kiln run --input`). Every way to fail must be a kiln::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/onnx/onnx_import.h"
#include "ir/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    std::string name;
    kiln::Tensor t = kiln::ReadOnnxTensorBuffer(data, size, &name);
    // Every element is readable.
    double sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.GetAsDouble(i);
    (void)sum;
  } catch (const kiln::Error&) {
  }
  return 0;
}
