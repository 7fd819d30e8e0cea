// The `kiln` tool's shared pieces (api/cli/cli.h).
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

#include "api/cli/cli.h"

namespace kiln::cli {

void Check(kiln_status s, const std::string& what) {
  if (s != KILN_OK) throw Failure{what + ": " + kiln_last_error()};
}

int64_t ParseInt(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno) throw UsageError{flag + ": '" + text + "' is not a number"};
  return v;
}

double ParseDouble(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) throw UsageError{flag + ": '" + text + "' is not a number"};
  return v;
}

// `1x784` -> {1, 784}
std::vector<int64_t> ParseShape(const std::string& flag, const std::string& text) {
  std::vector<int64_t> dims;
  size_t start = 0;
  for (;;) {
    size_t x = text.find('x', start);
    std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    int64_t d = ParseInt(flag, part);
    if (d < 0) throw UsageError{flag + ": dim " + part + " is negative"};
    dims.push_back(d);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return dims;
}

// `NAME=VALUE` -> {NAME, VALUE}
std::pair<std::string, std::string> SplitAssignment(const std::string& flag,
                                                    const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError{flag + " wants NAME=VALUE, got '" + text + "'"};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// ---- types ------------------------------------------------------------------------------

IoType GetIoType(const kiln_model* model, size_t i, bool input) {
  IoType t;
  const char* name = nullptr;
  size_t rank = 0;
  Check(input ? kiln_model_input_name(model, i, &name) : kiln_model_output_name(model, i, &name),
        "model");
  Check(input ? kiln_model_input_type(model, i, &t.dtype, &rank)
              : kiln_model_output_type(model, i, &t.dtype, &rank),
        "model");
  t.name = name;
  for (size_t d = 0; d < rank; ++d) {
    int64_t value = 0;
    const char* symbol = nullptr;
    Check(input ? kiln_model_input_dim(model, i, d, &value, &symbol)
                : kiln_model_output_dim(model, i, d, &value, &symbol),
          "model");
    t.dims.push_back(value);
    t.symbols.push_back(symbol ? symbol : "");
  }
  return t;
}

// A dim that only values decide (a NonZero count, a loop's iteration count) is written `?`:
// its internal name (`_v12`) means nothing to a user.
std::string TypeString(const IoType& t) {
  static const std::regex unknown("_v[0-9]+");
  std::string s = std::string(kiln_dtype_name(t.dtype)) + "[";
  for (size_t d = 0; d < t.dims.size(); ++d)
    s += (d ? ", " : "") + (t.symbols[d].empty() ? std::to_string(t.dims[d])
                                                 : std::regex_replace(t.symbols[d], unknown, "?"));
  return s + "]";
}

std::string ShapeString(const kiln_tensor* t) {
  kiln_dtype dtype = KILN_F32;
  size_t rank = 0;
  Check(kiln_tensor_dtype(t, &dtype), "tensor");
  Check(kiln_tensor_rank(t, &rank), "tensor");
  std::vector<int64_t> dims(rank);
  Check(kiln_tensor_shape(t, rank, dims.data()), "tensor");
  std::string s = std::string(kiln_dtype_name(dtype)) + "[";
  for (size_t d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + "]";
}

ModelPtr LoadModel(const std::string& path) {
  kiln_model* m = nullptr;
  Check(kiln_model_load_onnx_file(path.c_str(), &m), "cannot load '" + path + "'");
  return ModelPtr(m);
}

std::vector<IoType> ModelIo(const kiln_model* model, bool input) {
  size_t n = 0;
  Check(input ? kiln_model_num_inputs(model, &n) : kiln_model_num_outputs(model, &n), "model");
  std::vector<IoType> v;
  for (size_t i = 0; i < n; ++i) v.push_back(GetIoType(model, i, input));
  return v;
}

// ---- element access for printing, random inputs and comparison ---------------------------

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mant), -24);
  uint32_t bits =
      exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {  // round to nearest even; overflow to infinity; NaN stays NaN
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24 (exact scaling)
    float v;
    std::memcpy(&v, &abs, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  }
  // Drop 13 mantissa bits rounding to nearest even, then rebias the exponent (127 -> 15); a
  // carry out of the mantissa correctly bumps the exponent.
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

uint16_t FloatToBf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

double GetElement(const void* data, kiln_dtype dtype, int64_t i) {
  switch (dtype) {
    case KILN_F32:
      return static_cast<const float*>(data)[i];
    case KILN_F16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case KILN_BF16: {
      uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(data)[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case KILN_F64:
      return static_cast<const double*>(data)[i];
    case KILN_I8:
      return static_cast<const int8_t*>(data)[i];
    case KILN_I16:
      return static_cast<const int16_t*>(data)[i];
    case KILN_I32:
      return static_cast<const int32_t*>(data)[i];
    case KILN_I64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case KILN_U8:
      return static_cast<const uint8_t*>(data)[i];
    case KILN_BOOL:
      return static_cast<const uint8_t*>(data)[i] ? 1 : 0;
    case KILN_U16:
      return static_cast<const uint16_t*>(data)[i];
    case KILN_U32:
      return static_cast<const uint32_t*>(data)[i];
    case KILN_U64:
      return static_cast<double>(static_cast<const uint64_t*>(data)[i]);
  }
  return 0;
}

void FillRandom(kiln_tensor* t, std::mt19937& rng) {
  kiln_dtype dtype = KILN_F32;
  int64_t n = 0;
  void* data = nullptr;
  Check(kiln_tensor_dtype(t, &dtype), "tensor");
  Check(kiln_tensor_num_elements(t, &n), "tensor");
  Check(kiln_tensor_data(t, &data), "tensor");
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case KILN_F32:
        static_cast<float*>(data)[i] = real(rng);
        break;
      case KILN_F16:
        static_cast<uint16_t*>(data)[i] = FloatToHalf(real(rng));
        break;
      case KILN_BF16: {
        float f = real(rng);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits >> 16);
        break;
      }
      case KILN_F64:
        static_cast<double*>(data)[i] = real(rng);
        break;
      case KILN_I8:
        static_cast<int8_t*>(data)[i] = static_cast<int8_t>(small(rng));
        break;
      case KILN_I16:
        static_cast<int16_t*>(data)[i] = static_cast<int16_t>(small(rng));
        break;
      case KILN_I32:
        static_cast<int32_t*>(data)[i] = small(rng);
        break;
      case KILN_I64:
        static_cast<int64_t*>(data)[i] = small(rng);
        break;
      case KILN_U8:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(small(rng));
        break;
      case KILN_BOOL:
        static_cast<uint8_t*>(data)[i] = small(rng) & 1;
        break;
      case KILN_U16:
        static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(small(rng));
        break;
      case KILN_U32:
        static_cast<uint32_t*>(data)[i] = static_cast<uint32_t>(small(rng));
        break;
      case KILN_U64:
        static_cast<uint64_t*>(data)[i] = static_cast<uint64_t>(small(rng));
        break;
    }
  }
}

// `[0.125, -1, 3.5, ...]`: the first `limit` values.
std::string FirstValues(const kiln_tensor* t, int64_t limit) {
  kiln_dtype dtype = KILN_F32;
  int64_t n = 0;
  void* data = nullptr;
  Check(kiln_tensor_dtype(t, &dtype), "tensor");
  Check(kiln_tensor_num_elements(t, &n), "tensor");
  Check(kiln_tensor_data(t, &data), "tensor");
  std::string s = "[";
  for (int64_t i = 0; i < std::min(n, limit); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", GetElement(data, dtype, i));
    s += buf;
  }
  return s + (n > limit ? ", ...]" : "]");
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

bool ServedSpecialized(kiln_engine* engine, const kiln_model* model,
                       const std::vector<const kiln_tensor*>& in) {
  char* json = nullptr;
  Check(kiln_engine_explain(engine, model, in.size(), nullptr, in.data(), &json), "explain");
  std::string s = json;
  kiln_string_free(json);
  return s.find("\"cached\":true") != std::string::npos &&
         s.find("\"tier\":\"specialized\"") != std::string::npos;
}

void SetConfig(kiln_options* options, const std::string& flag, const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError{flag + " wants KEY=VALUE, got '" + v + "'"};
  std::string key = v.substr(0, eq), text = v.substr(eq + 1);
  char* end = nullptr;
  long long n = std::strtoll(text.c_str(), &end, 10);
  kiln_status st = !text.empty() && *end == '\0'
                       ? kiln_options_set_config_int(options, key.c_str(), n)
                       : kiln_options_set_config_string(options, key.c_str(), text.c_str());
  if (st) throw UsageError{kiln_last_error()};
}

void WriteTrace(kiln_engine* engine, const std::string& path, FILE* say) {
  char* json = nullptr;
  Check(kiln_engine_trace_json(engine, &json), "--trace");
  std::string text = json;
  kiln_string_free(json);
  FILE* f = std::fopen(path.c_str(), "wb");
  bool written = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f && std::fclose(f) != 0) written = false;
  if (!written) throw Failure{"--trace: cannot write '" + path + "'"};
  std::fprintf(say, "trace: %zu bytes written to %s (chrome://tracing or ui.perfetto.dev)\n",
               text.size(), path.c_str());
}

}  // namespace kiln::cli
