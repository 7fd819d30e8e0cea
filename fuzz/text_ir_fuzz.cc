// libFuzzer target: text -> the graph IR parser -> type inference -> the printer, whose text
// must parse again to the same print (the printer and parser read each other's output back),
// and a run of each function on small inputs. Every way to fail must be a kiln::Error.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_util.h"
#include "ir/error.h"
#include "ir/text.h"
#include "ir/type_infer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // the grammar is small; long inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  kiln::IRModule module;
  try {
    module = kiln::ParseModule(text);
  } catch (const kiln::Error&) {
    return 0;
  }
  const std::string printed = kiln::Print(module);
  std::string again;
  try {
    again = kiln::Print(kiln::ParseModule(printed));
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "the printer's text does not parse: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  if (again != printed) {
    std::fprintf(stderr, "print -> parse -> print differs:\n%s\n---\n%s\n", printed.c_str(),
                 again.c_str());
    std::abort();
  }
  try {
    kiln::IRModule typed = kiln::InferTypes(module);
    for (const auto& [name, fn] : typed.functions()) kiln::fuzz::RunIfSmall(fn);
  } catch (const kiln::Error&) {
  }
  return 0;
}
