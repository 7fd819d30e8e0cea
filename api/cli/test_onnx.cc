// kiln test-onnx (api/cli/kiln.cc's file comment): ONNX backend test cases run and compared.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/cli/cli.h"

namespace kiln::cli {
namespace {

// ---- kiln test-onnx -----------------------------------------------------------------------

bool IsFloating(kiln_dtype dtype) {
  return dtype == KILN_F32 || dtype == KILN_F16 || dtype == KILN_BF16 || dtype == KILN_F64;
}

// A float element matches as a careful test compares: an expected NaN only a NaN (any
// payload), an expected infinity only the same infinity, a finite value a finite value within
// atol + rtol * |expected|. (Without the first two rules the tolerance, infinite when the
// expected value is, would let any finite value match an infinity.)
bool FloatMatches(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// An integer or bool element exactly, for messages: through double, 64-bit values past 2^53
// would print alike when they differ.
std::string ExactElementString(const void* data, kiln_dtype dtype, int64_t i) {
  switch (dtype) {
    case KILN_I64:
      return std::to_string(static_cast<const int64_t*>(data)[i]);
    case KILN_U64:
      return std::to_string(static_cast<const uint64_t*>(data)[i]);
    case KILN_BOOL:
      return static_cast<const uint8_t*>(data)[i] ? "true" : "false";
    default:  // every narrower integer is exact in a double
      return std::to_string(static_cast<long long>(GetElement(data, dtype, i)));
  }
}

std::string Mismatch(int64_t i, const std::string& got, const std::string& want) {
  return "element " + std::to_string(i) + ": got " + got + ", expected " + want;
}

// Floats within the tolerances; "" when all match, else the first mismatch.
std::string CompareFloats(const void* g, const void* w, kiln_dtype dtype, int64_t n, double rtol,
                          double atol) {
  for (int64_t i = 0; i < n; ++i) {
    double a = GetElement(g, dtype, i), b = GetElement(w, dtype, i);
    if (FloatMatches(a, b, rtol, atol)) continue;
    // f64 needs 17 digits to show a difference the tolerances can see.
    const char* format = dtype == KILN_F64 ? "%.17g" : "%.9g";
    char got[32], want[32];
    std::snprintf(got, sizeof got, format, a);
    std::snprintf(want, sizeof want, format, b);
    return Mismatch(i, got, want);
  }
  return "";
}

// Integers and bools exactly, whatever the tolerances. Equal dtypes make equal values equal
// bytes, except bool, where any nonzero byte is true.
std::string CompareExact(const void* g, const void* w, kiln_dtype dtype, int64_t n) {
  const size_t size = kiln_dtype_size(dtype);
  const auto* gb = static_cast<const unsigned char*>(g);
  const auto* wb = static_cast<const unsigned char*>(w);
  for (int64_t i = 0; i < n; ++i) {
    const size_t at = static_cast<size_t>(i) * size;
    bool same = dtype == KILN_BOOL ? (gb[at] != 0) == (wb[at] != 0)
                                   : std::memcmp(gb + at, wb + at, size) == 0;
    if (!same) return Mismatch(i, ExactElementString(g, dtype, i), ExactElementString(w, dtype, i));
  }
  return "";
}

// Compares one output: its dtype and shape, then floats within the tolerances, other dtypes
// exactly; "" when it matches, else the reason.
std::string Compare(const kiln_tensor* got, const kiln_tensor* want, double rtol, double atol) {
  std::string got_type = ShapeString(got), want_type = ShapeString(want);
  if (got_type != want_type) return "got " + got_type + ", expected " + want_type;
  kiln_dtype dtype = KILN_F32;
  int64_t n = 0;
  void* g = nullptr;
  void* w = nullptr;
  Check(kiln_tensor_dtype(got, &dtype), "tensor");
  Check(kiln_tensor_num_elements(got, &n), "tensor");
  Check(kiln_tensor_data(got, &g), "tensor");
  Check(kiln_tensor_data(want, &w), "tensor");
  return IsFloating(dtype) ? CompareFloats(g, w, dtype, n, rtol, atol)
                           : CompareExact(g, w, dtype, n);
}

// The ONNX suite stores bfloat16 test data as UINT16 tensors of the same bits: such a tensor,
// where the model has bf16, is read as bf16 (a copy with the same bytes).
TensorPtr AsBFloat16IfBits(TensorPtr t, kiln_dtype want) {
  kiln_dtype have = KILN_F32;
  Check(kiln_tensor_dtype(t.get(), &have), "tensor");
  if (have != KILN_U16 || want != KILN_BF16) return t;
  size_t rank = 0;
  Check(kiln_tensor_rank(t.get(), &rank), "tensor");
  std::vector<int64_t> dims(rank);
  Check(kiln_tensor_shape(t.get(), rank, dims.data()), "tensor");
  kiln_tensor* copy = nullptr;
  Check(kiln_tensor_create(KILN_BF16, rank, dims.data(), &copy), "tensor");
  TensorPtr out(copy);
  int64_t n = 0;
  void* from = nullptr;
  void* to = nullptr;
  Check(kiln_tensor_num_elements(t.get(), &n), "tensor");
  Check(kiln_tensor_data(t.get(), &from), "tensor");
  Check(kiln_tensor_data(copy, &to), "tensor");
  if (n > 0) std::memcpy(to, from, static_cast<size_t>(n) * 2);
  return out;
}

struct ListDeleter {
  void operator()(kiln_tensor_list* l) const { kiln_tensor_list_destroy(l); }
};
using ListPtr = std::unique_ptr<kiln_tensor_list, ListDeleter>;
struct LoadOptionsDeleter {
  void operator()(kiln_load_options* o) const { kiln_load_options_destroy(o); }
};

// A graph input of the case's model as its files give it: a tensor, or a sequence's elements.
struct CaseInput {
  std::string name;
  bool sequence = false;
};

std::vector<CaseInput> OnnxInputs(const std::string& model_path) {
  char* json = nullptr;
  Check(kiln_onnx_file_inputs_json(model_path.c_str(), &json), "cannot load '" + model_path + "'");
  std::string text = json;
  kiln_string_free(json);
  std::vector<CaseInput> v;
  for (const nlohmann::json& in : nlohmann::json::parse(text))
    v.push_back({in.at("name").get<std::string>(), in.at("sequence").get<bool>()});
  return v;
}

// A copy of `t`, the caller's.
TensorPtr CopyOf(const kiln_tensor* t) {
  size_t rank = 0, n = 0;
  kiln_dtype dtype = KILN_F32;
  void* from = nullptr;
  Check(kiln_tensor_rank(t, &rank), "tensor");
  Check(kiln_tensor_dtype(t, &dtype), "tensor");
  std::vector<int64_t> dims(rank);
  Check(kiln_tensor_shape(t, rank, dims.data()), "tensor");
  kiln_tensor* c = nullptr;
  Check(kiln_tensor_create(dtype, rank, dims.data(), &c), "tensor");
  TensorPtr copy(c);
  Check(kiln_tensor_nbytes(t, &n), "tensor");
  Check(kiln_tensor_data(t, &from), "tensor");
  if (n) Check(kiln_tensor_copy_from_host(c, from, n), "tensor");
  return copy;
}

// The elements of a list, as borrowed tensors.
std::vector<const kiln_tensor*> Elements(const kiln_tensor_list* list) {
  size_t n = 0;
  Check(kiln_tensor_list_size(list, &n), "list");
  std::vector<const kiln_tensor*> v(n);
  for (size_t i = 0; i < n; ++i) Check(kiln_tensor_list_get(list, i, &v[i]), "list");
  return v;
}

// The model for one data set: as loaded once, or, when it has sequence inputs, loaded with the
// element shapes of this set's sequences (kiln_load_options_set_sequence_input).
ModelPtr LoadForSet(const std::string& path, const std::vector<CaseInput>& onnx_inputs,
                    const std::vector<ListPtr>& lists) {
  kiln_load_options* o = nullptr;
  Check(kiln_load_options_create(&o), "load options");
  std::unique_ptr<kiln_load_options, LoadOptionsDeleter> options(o);
  for (size_t k = 0; k < onnx_inputs.size(); ++k) {
    if (!onnx_inputs[k].sequence) continue;
    std::vector<size_t> ranks;
    std::vector<int64_t> dims;
    for (const kiln_tensor* t : Elements(lists[k].get())) {
      size_t rank = 0;
      Check(kiln_tensor_rank(t, &rank), "tensor");
      std::vector<int64_t> shape(rank);
      Check(kiln_tensor_shape(t, rank, shape.data()), "tensor");
      ranks.push_back(rank);
      dims.insert(dims.end(), shape.begin(), shape.end());
    }
    Check(kiln_load_options_set_sequence_input(options.get(), onnx_inputs[k].name.c_str(),
                                               ranks.size(), ranks.data(), dims.data()),
          "load options");
  }
  kiln_model* m = nullptr;
  Check(kiln_model_load_onnx_file_with(path.c_str(), options.get(), &m),
        "cannot load '" + path + "'");
  return ModelPtr(m);
}

// Runs one case dir on `engine`; "" when it passes, else the reason. A sequence input or
// output (its file a SequenceProto) is given and compared element by element.
std::string RunCase(const std::filesystem::path& dir, kiln_engine* engine, double rtol,
                    double atol) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return "not a directory";
  const std::string model_path = (dir / "model.onnx").string();
  const std::vector<CaseInput> onnx_inputs = OnnxInputs(model_path);
  const bool sequence_inputs = std::any_of(onnx_inputs.begin(), onnx_inputs.end(),
                                           [](const CaseInput& c) { return c.sequence; });
  ModelPtr loaded = sequence_inputs ? ModelPtr() : LoadModel(model_path);
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_* directory";
  for (const fs::path& set : sets) {
    const std::string where = set.filename().string();
    auto file = [&](const char* prefix, size_t k) {
      return set / (prefix + std::to_string(k) + ".pb");
    };
    auto count = [&](const char* prefix) {
      size_t k = 0;
      while (fs::exists(file(prefix, k))) ++k;
      return k;
    };
    // Input k is read as the model's graph input k says: a tensor or a sequence.
    if (count("input_") != onnx_inputs.size())
      return where + ": " + std::to_string(count("input_")) + " input files for a model of " +
             std::to_string(onnx_inputs.size()) + " inputs";
    std::vector<TensorPtr> tensors(onnx_inputs.size());
    std::vector<ListPtr> lists(onnx_inputs.size());
    for (size_t k = 0; k < onnx_inputs.size(); ++k) {
      const std::string path = file("input_", k).string();
      if (onnx_inputs[k].sequence) {
        kiln_tensor_list* l = nullptr;
        Check(kiln_tensor_list_read_onnx_pb(path.c_str(), &l), where);
        lists[k].reset(l);
      } else {
        kiln_tensor* t = nullptr;
        Check(kiln_tensor_read_onnx_pb(path.c_str(), &t), where);
        tensors[k].reset(t);
      }
    }
    ModelPtr for_set = sequence_inputs ? LoadForSet(model_path, onnx_inputs, lists) : ModelPtr();
    const kiln_model* model = sequence_inputs ? for_set.get() : loaded.get();
    std::vector<IoType> inputs = ModelIo(model, true);
    std::vector<IoType> outputs = ModelIo(model, false);
    // The model's inputs: each tensor, and each sequence's elements in their place.
    std::vector<TensorPtr> converted;
    std::vector<const kiln_tensor*> in_ptrs;
    for (size_t k = 0; k < onnx_inputs.size(); ++k) {
      std::vector<const kiln_tensor*> parts =
          lists[k] ? Elements(lists[k].get()) : std::vector<const kiln_tensor*>{tensors[k].get()};
      for (const kiln_tensor* t : parts) {
        const size_t i = in_ptrs.size();
        kiln_dtype have = KILN_F32;
        Check(kiln_tensor_dtype(t, &have), "tensor");
        if (i < inputs.size() && have == KILN_U16 && inputs[i].dtype == KILN_BF16) {
          converted.push_back(AsBFloat16IfBits(CopyOf(t), KILN_BF16));
          t = converted.back().get();
        }
        in_ptrs.push_back(t);
      }
    }
    if (in_ptrs.size() != inputs.size())
      return where + ": " + std::to_string(in_ptrs.size()) + " input tensors for a model of " +
             std::to_string(inputs.size()) + " inputs";
    if (count("output_") != outputs.size())
      return where + ": " + std::to_string(count("output_")) + " output files for a model of " +
             std::to_string(outputs.size()) + " outputs";
    // Every output as a list: a tensor output's holds it alone.
    std::vector<ListPtr> got(outputs.size());
    std::vector<kiln_tensor_list*> got_ptrs(outputs.size(), nullptr);
    Check(kiln_engine_run_lists(engine, model, in_ptrs.size(), nullptr, in_ptrs.data(),
                                got_ptrs.size(), got_ptrs.data()),
          where);
    for (size_t j = 0; j < got.size(); ++j) got[j].reset(got_ptrs[j]);
    for (size_t j = 0; j < outputs.size(); ++j) {
      int sequence = 0;
      Check(kiln_model_output_is_sequence(model, j, &sequence), "model");
      const std::string path = file("output_", j).string();
      std::vector<TensorPtr> want;
      if (sequence) {
        kiln_tensor_list* l = nullptr;
        Check(kiln_tensor_list_read_onnx_pb(path.c_str(), &l), where);
        ListPtr list(l);
        for (const kiln_tensor* t : Elements(list.get())) want.push_back(CopyOf(t));
      } else {
        kiln_tensor* t = nullptr;
        Check(kiln_tensor_read_onnx_pb(path.c_str(), &t), where);
        want.emplace_back(t);
      }
      for (TensorPtr& w : want) w = AsBFloat16IfBits(std::move(w), outputs[j].dtype);
      std::vector<const kiln_tensor*> have = Elements(got[j].get());
      if (have.size() != want.size())
        return where + ": output '" + outputs[j].name + "': got a sequence of " +
               std::to_string(have.size()) + " tensors, expected " + std::to_string(want.size());
      for (size_t e = 0; e < want.size(); ++e) {
        std::string why = Compare(have[e], want[e].get(), rtol, atol);
        if (!why.empty())
          return where + ": output '" + outputs[j].name + "'" +
                 (sequence ? " element " + std::to_string(e) : std::string()) + ": " + why;
      }
    }
  }
  return "";
}

// The sum of the numbers under `field` in the objects of the array `array`, a member of the
// top-level object of `json` (as kiln_engine_stats_json writes it). A scanner, not a parser:
// it follows strings (shape keys hold model names, which may hold any character) and nesting.
uint64_t SumJsonArrayField(const std::string& json, const std::string& array,
                           const std::string& field) {
  uint64_t sum = 0;
  int depth = 0;
  std::string member;  // the top-level member being read
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      std::string text;
      for (++i; i < json.size() && json[i] != '"'; ++i) {
        if (json[i] == '\\') ++i;  // the escaped character is taken as it is
        if (i < json.size()) text += json[i];
      }
      size_t next = json.find_first_not_of(" \t\r\n", i + 1);
      if (next == std::string::npos || json[next] != ':') continue;  // a value, not a key
      if (depth == 1) member = text;
      // depth 3: {top-level object [array {element object
      if (depth == 3 && member == array && text == field)
        sum += std::strtoull(json.c_str() + next + 1, nullptr, 10);
    }
  }
  return sum;
}

// How many times compiled kernels were called on `engine`, which must profile. Zero after a
// run means no compiled code computed the outputs: the engine folded them at specialization
// (with the reference kernels) or copied them from inputs.
uint64_t CompiledKernelCalls(const kiln_engine* engine) {
  char* json = nullptr;
  Check(kiln_engine_stats_json(engine, &json), "stats");
  std::string text = json;
  kiln_string_free(json);
  return SumJsonArrayField(text, "kernels", "calls");
}

}  // namespace

int TestOnnxCommand(const std::vector<std::string>& args) {
  double rtol = 1e-3, atol = 1e-5;
  std::vector<std::string> dirs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--rtol") {
      rtol = ParseDouble(a, value());
    } else if (a == "--atol") {
      atol = ParseDouble(a, value());
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln test-onnx: unknown option '" + a + "'"};
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) throw UsageError{"kiln test-onnx: no CASE_DIR given"};
  if (rtol < 0 || atol < 0) throw UsageError{"kiln test-onnx: tolerances must not be negative"};
  // Profiling counts kernel calls, so a case that passes without running compiled code is
  // told apart from a pass through the JIT.
  OptionsPtr options;
  {
    kiln_options* o = nullptr;
    Check(kiln_options_create(&o), "options");
    options.reset(o);
  }
  Check(kiln_options_set_profiling(options.get(), 1), "profiling");
  int passed = 0, failed = 0, passed_without_kernels = 0;
  for (const std::string& d : dirs) {
    std::filesystem::path dir(d);
    std::string name = dir.filename().string();
    if (name.empty()) name = dir.parent_path().filename().string();  // `case/`
    std::string why;
    uint64_t kernel_calls = 0;
    // A bad case fails with its reason; nothing in one case stops the others. Each case has an
    // engine of its own, so its kernel calls are its alone.
    try {
      kiln_engine* e = nullptr;
      Check(kiln_engine_create(options.get(), &e), "engine");
      EnginePtr engine(e);
      why = RunCase(dir, engine.get(), rtol, atol);
      kernel_calls = CompiledKernelCalls(engine.get());
    } catch (const Failure& f) {
      why = f.message;
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty()) {
      ++passed;
      if (kernel_calls == 0) ++passed_without_kernels;
      std::printf("PASS %s%s\n", name.c_str(), kernel_calls ? "" : " (no compiled kernel ran)");
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
    }
    std::fflush(stdout);
  }
  if (passed)
    std::printf("%d of %d passing cases ran no compiled kernel (outputs folded or copied)\n",
                passed_without_kernels, passed);
  // The last line, which scripts read.
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? kExitFailure : 0;
}

}  // namespace kiln::cli
