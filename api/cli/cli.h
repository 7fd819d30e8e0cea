// The `kiln` tool's shared pieces (api/cli): usage errors, owning wrappers over the C API's
// handles, argument parsing, model I/O types and element access, and the commands kiln.cc
// dispatches to (run.cc, bench.cc, test_onnx.cc).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln.h"

namespace kiln::cli {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Bad usage: thrown by argument parsing, caught in main (exit 2).
struct UsageError {
  std::string message;
};

// A failure reported through the C API: the message is kiln_last_error() with context.
struct Failure {
  std::string message;
};

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

struct IoType {
  std::string name;
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> dims;         // -1 where symbolic
  std::vector<std::string> symbols;  // "" where constant
};

void Check(kiln_status s, const std::string& what);
int64_t ParseInt(const std::string& flag, const std::string& text);
double ParseDouble(const std::string& flag, const std::string& text);
std::vector<int64_t> ParseShape(const std::string& flag, const std::string& text);
std::pair<std::string, std::string> SplitAssignment(const std::string& flag,
                                                    const std::string& text);
IoType GetIoType(const kiln_model* model, size_t i, bool input);
std::string TypeString(const IoType& t);
std::string ShapeString(const kiln_tensor* t);
ModelPtr LoadModel(const std::string& path);
std::vector<IoType> ModelIo(const kiln_model* model, bool input);
float HalfToFloat(uint16_t h);
// IEEE binary16 and bfloat16 from f32, rounding to nearest even.
uint16_t FloatToHalf(float f);
uint16_t FloatToBf16(float f);
double GetElement(const void* data, kiln_dtype dtype, int64_t i);
void FillRandom(kiln_tensor* t, std::mt19937& rng);
std::string FirstValues(const kiln_tensor* t, int64_t limit);
// The p-th percentile (0-100) of `v`, nearest rank; 0 for none.
double Percentile(std::vector<double> v, double p);
// Whether these inputs' shape key is cached with a specialized executable now
// (kiln_engine_explain).
bool ServedSpecialized(kiln_engine* engine, const kiln_model* model,
                       const std::vector<const kiln_tensor*>& in);
// Writes the engine's trace (made with kiln_options_set_trace) to `path` and says so on `say`;
// Failure names --trace and the path when it cannot.
void WriteTrace(kiln_engine* engine, const std::string& path, FILE* say);
// --config KEY=VALUE (or another `flag` of that form) into `options`: KEY=INTEGER for the
// integer keys (tile sizes, vector width), anything else as a string; UsageError otherwise.
void SetConfig(kiln_options* options, const std::string& flag, const std::string& v);

// The commands: each parses its arguments (UsageError on bad usage, Failure on a C API error)
// and returns the exit status.
int RunCommand(const std::vector<std::string>& args);
int TestOnnxCommand(const std::vector<std::string>& args);
int BenchCommand(const std::vector<std::string>& args);
int CompileCommand(const std::vector<std::string>& args);
int ServeCommand(const std::vector<std::string>& args);
int CacheCommand(const std::vector<std::string>& args);

}  // namespace kiln::cli
