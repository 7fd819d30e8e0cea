// `kiln`: the command-line tool (SPEC.md §8), written over the C API alone (kiln.h), as any
// application would be.
//
//   kiln run MODEL [--shape NAME=1x784 ...] [--input NAME=FILE.pb ...] [--iters N] [--warmup N]
//            [--threads N] [--opt-level N] [--disable-pass P] [--cache-dir D] [--target T]
//            [--config K=V] [--versus 'K=V ...']
//            [--print-ir after=PASS|all] [--time-passes] [--stats]
//   kiln types MODEL
//   kiln passes
//   kiln test-onnx [--rtol R] [--atol A] CASE_DIR...
//
// run --versus times a second engine, made with the same options plus the given config
// assignments, on the same inputs, alternating with the first in blocks of a few runs: on a shared
// machine whose speed drifts by half within a minute, only such interleaved timings compare two
// configurations (tile sizes, say) fairly. At more than one thread the two engines' worker
// pools share the cores and can slow each other unevenly: compare there across processes.
//
// test-onnx prints a line per case, `PASS NAME` or `FAIL NAME: REASON`; a pass whose outputs no
// compiled kernel computed (folded at specialization, or copied from inputs) is
// `PASS NAME (no compiled kernel ran)`, so it is not taken for a pass through the JIT. After a
// count of those, the last line is `N passed, M failed`, which scripts read.
//
// Exit status: 0 success, 1 a failure (a model that does not load or run, a test case that
// fails), 2 bad usage.
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

#include "kiln.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

const char kUsage[] =
    "usage:\n"
    "  kiln run MODEL [--shape NAME=1x784 ...] [--input NAME=FILE.pb ...] [--iters N]\n"
    "           [--warmup N] [--threads N] [--opt-level N] [--disable-pass P] [--cache-dir D]\n"
    "           [--target 'llvm -mcpu=CPU -mattr=+f,-g'] [--config KEY=VALUE]\n"
    "           [--versus 'KEY=VALUE ...']\n"
    "           [--print-ir after=PASS|all] [--time-passes] [--stats]\n"
    "  kiln types MODEL\n"
    "  kiln passes\n"
    "  kiln test-onnx [--rtol R] [--atol A] CASE_DIR...\n";

// Bad usage: thrown by argument parsing, caught in main (exit 2).
struct UsageError {
  std::string message;
};
// A failure reported through the C API: the message is kiln_last_error() with context.
struct Failure {
  std::string message;
};

void Check(kiln_status s, const std::string& what) {
  if (s != KILN_OK) throw Failure{what + ": " + kiln_last_error()};
}

// Owning wrappers, so every path out of a command destroys what it created.
struct TensorDeleter {
  void operator()(kiln_tensor* t) const { kiln_tensor_destroy(t); }
};
struct ModelDeleter {
  void operator()(kiln_model* m) const { kiln_model_destroy(m); }
};
struct EngineDeleter {
  void operator()(kiln_engine* e) const { kiln_engine_destroy(e); }
};
struct OptionsDeleter {
  void operator()(kiln_options* o) const { kiln_options_destroy(o); }
};
using TensorPtr = std::unique_ptr<kiln_tensor, TensorDeleter>;
using ModelPtr = std::unique_ptr<kiln_model, ModelDeleter>;
using EnginePtr = std::unique_ptr<kiln_engine, EngineDeleter>;
using OptionsPtr = std::unique_ptr<kiln_options, OptionsDeleter>;

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

struct IoType {
  std::string name;
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> dims;         // -1 where symbolic
  std::vector<std::string> symbols;  // "" where constant
};

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

uint16_t FloatToHalf(float f) {  // for random inputs in [-1, 1]: normal range, truncated
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3ff));
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

// ---- kiln run -----------------------------------------------------------------------------

// --print-ir and --time-passes: C hooks over the pass instrument protocol. The CLI runs on one
// thread, so they need no locks.
struct PassObserver {
  std::string print_after;  // "" none, "all", or a pass name
  bool time = false;
  struct Open {
    std::string pass;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Open> open;
  std::vector<std::string> order;                        // first-run order
  std::map<std::string, std::pair<int, double>> totals;  // calls, ms (inclusive)
};

void BeforePass(const char* pass, const char*, void* user_data) {
  auto* o = static_cast<PassObserver*>(user_data);
  if (o->time) o->open.push_back({pass, std::chrono::steady_clock::now()});
}

void AfterPass(const char* pass, const char* module_text, void* user_data) {
  auto* o = static_cast<PassObserver*>(user_data);
  if (o->time && !o->open.empty()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          o->open.back().start)
                    .count();
    o->open.pop_back();
    auto [it, fresh] = o->totals.try_emplace(pass, 0, 0.0);
    if (fresh) o->order.push_back(pass);
    it->second.first += 1;
    it->second.second += ms;
  }
  if (module_text && (o->print_after == "all" || o->print_after == pass))
    std::printf("// IR after %s\n%s\n", pass, module_text);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// --config KEY=VALUE: KEY=INTEGER for the integer keys (tile sizes, vector width); anything
// else as a string.
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

int RunCommand(const std::vector<std::string>& args) {
  std::string model_path;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> input_files;
  int64_t iters = 10, warmup = 2;
  bool stats = false;
  PassObserver observer;
  auto new_options = [] {
    kiln_options* o = nullptr;
    Check(kiln_options_create(&o), "options");
    return OptionsPtr(o);
  };
  OptionsPtr options = new_options();
  // Every option that shapes compilation, replayed onto the --versus engine's options.
  std::vector<std::function<void(kiln_options*)>> setters;
  auto set = [&](std::function<void(kiln_options*)> f) {
    f(options.get());
    setters.push_back(std::move(f));
  };
  std::vector<std::string> versus;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--shape") {
      auto [name, text] = SplitAssignment(a, value());
      shapes[name] = ParseShape(a, text);
    } else if (a == "--input") {
      auto [name, file] = SplitAssignment(a, value());
      input_files[name] = file;
    } else if (a == "--iters") {
      iters = ParseInt(a, value());
      if (iters < 1) throw UsageError{"--iters must be at least 1"};
    } else if (a == "--warmup") {
      warmup = ParseInt(a, value());
      if (warmup < 0) throw UsageError{"--warmup must not be negative"};
    } else if (a == "--threads") {
      int n = static_cast<int>(ParseInt(a, value()));
      set([n](kiln_options* o) {
        if (kiln_options_set_num_threads(o, n)) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--opt-level") {
      int n = static_cast<int>(ParseInt(a, value()));
      set([n](kiln_options* o) {
        if (kiln_options_set_opt_level(o, n)) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--disable-pass") {
      set([p = value()](kiln_options* o) {
        if (kiln_options_disable_pass(o, p.c_str())) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--target") {
      set([t = value()](kiln_options* o) {
        if (kiln_options_set_target(o, t.c_str())) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--config") {
      set([v = value()](kiln_options* o) { SetConfig(o, "--config", v); });
    } else if (a == "--versus") {
      std::istringstream words(value());
      for (std::string w; words >> w;) versus.push_back(w);
      if (versus.empty()) throw UsageError{"--versus wants KEY=VALUE assignments"};
    } else if (a == "--cache-dir") {
      set([d = value()](kiln_options* o) {
        Check(kiln_options_set_cache_dir(o, d.c_str()), "--cache-dir");
      });
    } else if (a == "--print-ir") {
      const std::string& v = value();
      if (v.rfind("after=", 0) != 0 || v.size() == 6)
        throw UsageError{"--print-ir wants after=PASS or after=all, got '" + v + "'"};
      observer.print_after = v.substr(6);
    } else if (a == "--time-passes") {
      observer.time = true;
    } else if (a == "--stats") {
      stats = true;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln run: unknown option '" + a + "'"};
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      throw UsageError{"kiln run: more than one model given ('" + model_path + "', '" + a + "')"};
    }
  }
  if (model_path.empty()) throw UsageError{"kiln run: no MODEL given"};
  if (!observer.print_after.empty() || observer.time)
    Check(kiln_options_add_instrument(options.get(), BeforePass, AfterPass,
                                      !observer.print_after.empty(), &observer),
          "instrument");
  if (stats) set([](kiln_options* o) { Check(kiln_options_set_profiling(o, 1), "profiling"); });

  ModelPtr model = LoadModel(model_path);
  std::vector<IoType> inputs = ModelIo(model.get(), true);
  for (const auto& [name, shape] : shapes)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const IoType& t) { return t.name == name; }))
      throw UsageError{"--shape " + name + ": the model has no input '" + name + "'"};

  // The inputs: from files, else random of the model's shape (symbolic dims from --shape).
  std::mt19937 rng(0);
  std::vector<TensorPtr> owned;
  for (const IoType& in : inputs) {
    kiln_tensor* t = nullptr;
    auto file = input_files.find(in.name);
    if (file != input_files.end()) {
      Check(kiln_tensor_read_onnx_pb(file->second.c_str(), &t), "--input " + in.name);
      owned.emplace_back(t);
      continue;
    }
    std::vector<int64_t> dims = in.dims;
    auto given = shapes.find(in.name);
    if (given != shapes.end()) {
      if (given->second.size() != dims.size())
        throw UsageError{"--shape " + in.name + ": the input has rank " +
                         std::to_string(dims.size()) + " (" + TypeString(in) + ")"};
      dims = given->second;
    } else {
      for (size_t d = 0; d < dims.size(); ++d)
        if (!in.symbols[d].empty())
          throw UsageError{"input '" + in.name + "' (" + TypeString(in) +
                           ") has the symbolic dim '" + in.symbols[d] +
                           "': give its shape with --shape " + in.name + "=..."};
    }
    Check(kiln_tensor_create(in.dtype, dims.size(), dims.data(), &t), "input '" + in.name + "'");
    owned.emplace_back(t);
    FillRandom(t, rng);
  }
  for (const auto& [name, file] : input_files)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const IoType& t) { return t.name == name; }))
      throw UsageError{"--input " + name + ": the model has no input '" + name + "'"};

  EnginePtr engine;
  {
    kiln_engine* e = nullptr;
    Check(kiln_engine_create(options.get(), &e), "engine");
    engine.reset(e);
  }
  std::vector<const kiln_tensor*> in_ptrs;
  for (const TensorPtr& t : owned) in_ptrs.push_back(t.get());
  std::vector<IoType> outputs = ModelIo(model.get(), false);
  std::vector<kiln_tensor*> out_ptrs(outputs.size(), nullptr);
  std::vector<TensorPtr> out_owned;

  // The --versus engine: the same options, then the assignments.
  EnginePtr other;
  std::vector<kiln_tensor*> other_out(outputs.size(), nullptr);
  if (!versus.empty()) {
    OptionsPtr o = new_options();
    for (const auto& f : setters) f(o.get());
    for (const std::string& v : versus) SetConfig(o.get(), "--versus", v);
    kiln_engine* e = nullptr;
    Check(kiln_engine_create(o.get(), &e), "--versus engine");
    other.reset(e);
  }

  // The first run compiles; later runs write into the same outputs, in place.
  auto t0 = std::chrono::steady_clock::now();
  Check(kiln_engine_run(engine.get(), model.get(), in_ptrs.size(), nullptr, in_ptrs.data(),
                        out_ptrs.size(), nullptr, out_ptrs.data()),
        "run");
  double first_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (kiln_tensor* t : out_ptrs) out_owned.emplace_back(t);
  auto run_on = [&](kiln_engine* e, std::vector<kiln_tensor*>& outs) {
    Check(kiln_engine_run(e, model.get(), in_ptrs.size(), nullptr, in_ptrs.data(), outs.size(),
                          nullptr, outs.data()),
          e == engine.get() ? "run" : "--versus run");
  };
  if (other) {
    run_on(other.get(), other_out);
    for (kiln_tensor* t : other_out) out_owned.emplace_back(t);
  }
  for (int64_t i = 0; i < warmup; ++i) {
    run_on(engine.get(), out_ptrs);
    if (other) run_on(other.get(), other_out);
  }
  auto timed = [](const std::function<void()>& f) {
    auto s = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
  };
  std::vector<double> ms, other_ms;
  if (!other) {
    for (int64_t i = 0; i < iters; ++i)
      ms.push_back(timed([&] { run_on(engine.get(), out_ptrs); }));
  } else {
    // Blocks of kBlock timed runs per engine, each after one untimed run: an engine's worker
    // threads keep spinning a while after its run ends, and would slow the other engine's
    // next run, not the one after.
    constexpr int64_t kBlock = 8;
    for (int64_t done = 0; done < iters; done += kBlock) {
      for (auto [e, outs, times] : {std::tuple{engine.get(), &out_ptrs, &ms},
                                    std::tuple{other.get(), &other_out, &other_ms}}) {
        run_on(e, *outs);
        for (int64_t i = done; i < std::min(iters, done + kBlock); ++i)
          times->push_back(timed([&] { run_on(e, *outs); }));
      }
    }
  }

  for (size_t j = 0; j < outputs.size(); ++j)
    std::printf("%s: %s = %s\n", outputs[j].name.c_str(), ShapeString(out_ptrs[j]).c_str(),
                FirstValues(out_ptrs[j], 8).c_str());
  std::printf("compile + first run: %.3f ms\n", first_ms);
  std::printf("latency over %lld runs: p50 %.4f ms, p90 %.4f ms, p99 %.4f ms\n",
              static_cast<long long>(iters), Percentile(ms, 50), Percentile(ms, 90),
              Percentile(ms, 99));
  if (other) {
    std::string assignments;
    for (const std::string& v : versus) assignments += (assignments.empty() ? "" : " ") + v;
    std::printf("versus %s, alternating: p50 %.4f ms, p90 %.4f ms; p50 ratio %.3f\n",
                assignments.c_str(), Percentile(other_ms, 50), Percentile(other_ms, 90),
                Percentile(other_ms, 50) / Percentile(ms, 50));
  }
  if (observer.time) {
    std::printf("pass timing (inclusive):\n");
    for (const std::string& p : observer.order)
      std::printf("  %-32s %5d calls %10.3f ms\n", p.c_str(), observer.totals[p].first,
                  observer.totals[p].second);
  }
  if (stats) {
    char* json = nullptr;
    Check(kiln_engine_stats_json(engine.get(), &json), "stats");
    std::printf("%s\n", json);
    kiln_string_free(json);
    if (other) {
      Check(kiln_engine_stats_json(other.get(), &json), "--versus stats");
      std::printf("versus stats: %s\n", json);
      kiln_string_free(json);
    }
  }
  return 0;
}

// ---- kiln types, kiln passes ----------------------------------------------------------------

int TypesCommand(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].empty() || args[0][0] == '-')
    throw UsageError{"kiln types takes exactly one MODEL"};
  ModelPtr model = LoadModel(args[0]);
  const char* name = nullptr;
  Check(kiln_model_name(model.get(), &name), "model");
  std::printf("model %s\ninputs:\n", name);
  for (const IoType& t : ModelIo(model.get(), true))
    std::printf("  %s: %s\n", t.name.c_str(), TypeString(t).c_str());
  std::printf("outputs:\n");
  bool unknown = false;
  for (const IoType& t : ModelIo(model.get(), false)) {
    std::string type = TypeString(t);
    unknown = unknown || type.find('?') != std::string::npos;
    std::printf("  %s: %s\n", t.name.c_str(), type.c_str());
  }
  if (unknown) std::printf("(? : a size known only when the model runs: it depends on values)\n");
  return 0;
}

int PassesCommand(const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError{"kiln passes takes no arguments"};
  size_t n = 0;
  Check(kiln_pass_count(&n), "passes");
  std::printf("%-28s %-9s %s\n", "pass", "opt_level", "requires");
  for (size_t i = 0; i < n; ++i) {
    char* name = nullptr;
    char* required = nullptr;
    int level = 0;
    Check(kiln_pass_info(i, &name, &level, &required), "passes");
    std::printf("%-28s %-9d %s\n", name, level, *required ? required : "-");
    kiln_string_free(name);
    kiln_string_free(required);
  }
  return 0;
}

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

// Runs one case dir on `engine`; "" when it passes, else the reason.
std::string RunCase(const std::filesystem::path& dir, kiln_engine* engine, double rtol,
                    double atol) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return "not a directory";
  ModelPtr model = LoadModel((dir / "model.onnx").string());
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_* directory";
  std::vector<IoType> inputs = ModelIo(model.get(), true);
  std::vector<IoType> outputs = ModelIo(model.get(), false);
  for (const fs::path& set : sets) {
    const std::string where = set.filename().string();
    auto read_all = [&](const char* prefix) {
      std::vector<TensorPtr> v;
      for (int k = 0;; ++k) {
        fs::path file = set / (prefix + std::to_string(k) + ".pb");
        if (!fs::exists(file)) break;
        kiln_tensor* t = nullptr;
        Check(kiln_tensor_read_onnx_pb(file.string().c_str(), &t), where);
        v.emplace_back(t);
      }
      return v;
    };
    std::vector<TensorPtr> in = read_all("input_");
    std::vector<TensorPtr> want = read_all("output_");
    for (size_t k = 0; k < in.size() && k < inputs.size(); ++k)
      in[k] = AsBFloat16IfBits(std::move(in[k]), inputs[k].dtype);
    for (size_t k = 0; k < want.size() && k < outputs.size(); ++k)
      want[k] = AsBFloat16IfBits(std::move(want[k]), outputs[k].dtype);
    if (in.size() != inputs.size())
      return where + ": " + std::to_string(in.size()) + " input files for a model of " +
             std::to_string(inputs.size()) + " inputs";
    if (want.size() != outputs.size())
      return where + ": " + std::to_string(want.size()) + " output files for a model of " +
             std::to_string(outputs.size()) + " outputs";
    std::vector<const kiln_tensor*> in_ptrs;
    for (const TensorPtr& t : in) in_ptrs.push_back(t.get());
    std::vector<kiln_tensor*> out_ptrs(outputs.size(), nullptr);
    Check(kiln_engine_run(engine, model.get(), in_ptrs.size(), nullptr, in_ptrs.data(),
                          out_ptrs.size(), nullptr, out_ptrs.data()),
          where);
    std::vector<TensorPtr> got;
    for (kiln_tensor* t : out_ptrs) got.emplace_back(t);
    for (size_t j = 0; j < got.size(); ++j) {
      std::string why = Compare(got[j].get(), want[j].get(), rtol, atol);
      if (!why.empty()) return where + ": output '" + outputs[j].name + "': " + why;
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "run") return RunCommand(args);
    if (command == "types") return TypesCommand(args);
    if (command == "passes") return PassesCommand(args);
    if (command == "test-onnx") return TestOnnxCommand(args);
    throw UsageError{"unknown command '" + command + "'"};
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln: %s\n%s", e.message.c_str(), kUsage);
    return kExitUsage;
  } catch (const Failure& f) {
    std::fprintf(stderr, "kiln: %s\n", f.message.c_str());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return kExitFailure;
  }
}
