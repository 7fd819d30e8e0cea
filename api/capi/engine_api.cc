// The C API's engine half (kiln.h): options, engines, runs, explain, warm start and statistics
// as JSON, over kiln::Engine. Every fallible function has kiln.cc's frame (capi_internal.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/capi/capi_internal.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/trace.h"
#include "ir/type_infer.h"
#include "passes/instrument.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

kiln_status kiln_options_set_max_cache_bytes(kiln_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.max_cache_bytes = max_bytes;
  KILN_API_END
}

kiln_status kiln_options_set_max_run_bytes(kiln_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.max_run_bytes = max_bytes;
  KILN_API_END
}

namespace {

using kiln::ErrorCode;
using kiln::Throw;
using kiln_capi::ExpectedOutputTypes;
using kiln_capi::Join;
using kiln_capi::Matches;
using kiln_capi::NewCString;
using kiln_capi::Str;

// ---- runs -------------------------------------------------------------------------------

// The model-ordered inputs of a run, from the caller's named (or positional) ones.
std::vector<kiln::Tensor> GatherInputs(const kiln_model& m, size_t n, const char* const* names,
                                       const kiln_tensor* const* inputs, const char* fn) {
  const std::string& model_name = m.model->name();
  if (n && !inputs) Throw(ErrorCode::kInvalidArgument, fn, ": inputs is NULL");
  std::vector<int> slot_of(m.inputs.size(), -1);  // per model input: the caller's slot
  for (size_t i = 0; i < n; ++i) {
    size_t index = i;
    if (names) {
      if (!names[i]) Throw(ErrorCode::kInvalidArgument, fn, ": input_names[", i, "] is NULL");
      auto it = std::find_if(m.inputs.begin(), m.inputs.end(),
                             [&](const kiln_model::Io& io) { return io.name == names[i]; });
      if (it == m.inputs.end()) {
        std::vector<std::string> known;
        for (const kiln_model::Io& io : m.inputs) known.push_back(io.name);
        Throw(ErrorCode::kNotFound, fn, ": model '", model_name, "' has no input '", names[i],
              "' (its inputs: ", Join(known, ", "), ")");
      }
      index = static_cast<size_t>(it - m.inputs.begin());
    } else if (i >= m.inputs.size()) {
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "' takes ", m.inputs.size(),
            " inputs, given ", n);
    }
    if (slot_of[index] >= 0)
      Throw(ErrorCode::kInvalidArgument, fn, ": input '", m.inputs[index].name, "' is given twice");
    slot_of[index] = static_cast<int>(i);
  }
  std::vector<kiln::Tensor> out;
  out.reserve(m.inputs.size());
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const kiln_model::Io& io = m.inputs[k];
    if (slot_of[k] < 0)
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "': input '", io.name, "' (",
            kiln::TypeToString(io.type), ") is missing");
    const kiln_tensor* t = inputs[slot_of[k]];
    if (!t) Throw(ErrorCode::kInvalidArgument, fn, ": input '", io.name, "': the tensor is NULL");
    if (!Matches(io.type, t->t))
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", model_name, "': input '", io.name,
            "': expected ", kiln::TypeToString(io.type), ", given ", t->t.TypeString());
    out.push_back(t->t);
  }
  return out;
}

// ---- passes and instruments ----------------------------------------------------------------

// A C instrument: the hooks get the pass name and, when asked for, the module's text: after
// every pass (with_ir), or after those named in `ir_passes` only (printing a real model's
// module takes seconds, and most passes' text would be thrown away).
class CInstrument : public kiln::PassInstrument {
 public:
  CInstrument(kiln_pass_hook before, kiln_pass_hook after, bool with_ir, void* user_data,
              std::set<std::string> ir_passes = {})
      : PassInstrument("CInstrument"),
        before_(before),
        after_(after),
        with_ir_(with_ir),
        ir_passes_(std::move(ir_passes)),
        user_data_(user_data) {}
  void RunBeforePass(const kiln::IRModule& m, const kiln::PassInfo& info) override {
    Call(before_, m, info);
  }
  void RunAfterPass(const kiln::IRModule& m, const kiln::PassInfo& info) override {
    Call(after_, m, info);
  }

 private:
  void Call(kiln_pass_hook hook, const kiln::IRModule& m, const kiln::PassInfo& info) const {
    if (!hook) return;
    if (!with_ir_ && !ir_passes_.count(info.name))
      return hook(info.name.c_str(), nullptr, user_data_);
    std::string text = kiln::Print(m);
    hook(info.name.c_str(), text.c_str(), user_data_);
  }
  kiln_pass_hook before_, after_;
  bool with_ir_;
  std::set<std::string> ir_passes_;
  void* user_data_;
};

// ---- statistics as JSON ------------------------------------------------------------------

void JsonNumber(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  out += buf;
}

void JsonPasses(std::string& out, const std::vector<kiln::PassTimingInstrument::Entry>& entries) {
  out += '[';
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    out += kiln::JsonQuote(e.name);
    out += ",\"calls\":" + std::to_string(e.calls) + ",\"total_ms\":";
    JsonNumber(out, e.total_ms);
    out += ",\"self_ms\":";
    JsonNumber(out, e.self_ms);
    out += ",\"children\":";
    JsonPasses(out, e.children);
    out += '}';
  }
  out += ']';
}

std::string StatsJson(const kiln::EngineStats& s) {
  std::string out = "{";
  auto field = [&](const char* key, uint64_t v) { out += kiln::StrCat("\"", key, "\":", v, ","); };
  field("runs", s.runs);
  field("hits", s.hits);
  field("misses", s.misses);
  field("specializations", s.specializations);
  field("compile_errors", s.compile_errors);
  field("evictions", s.evictions);
  field("evicted_served_generic", s.evicted_served_generic);
  field("respecializations", s.respecializations);
  field("generic_runs", s.generic_runs);
  field("generic_builds", s.generic_builds);
  field("generic_unavailable", s.generic_unavailable);
  field("background_queued", s.background_queued);
  field("background_dropped", s.background_dropped);
  field("cached_executables", s.cached_executables);
  field("cached_bytes", s.cached_bytes);
  field("cache_budget_bytes", s.cache_budget_bytes);
  field("kernel_compiles", s.kernel_compiles);
  field("kernel_cache_hits", s.kernel_cache_hits);
  field("disk_hits", s.disk_hits);
  field("disk_rejections", s.disk_rejections);
  out += "\"generic_unavailable_reasons\":[";
  for (size_t i = 0; i < s.generic_unavailable_reasons.size(); ++i) {
    if (i) out += ',';
    out += kiln::JsonQuote(s.generic_unavailable_reasons[i]);
  }
  out += "],";
  out += "\"disk_rejections_by_reason\":{";
  bool first = true;
  for (const auto& [reason, n] : s.disk_rejections_by_reason) {
    if (!first) out += ',';
    first = false;
    out += kiln::JsonQuote(reason);
    out += ':' + std::to_string(n);
  }
  out += "},\"compile_ms\":";
  JsonNumber(out, s.compile_ms);
  out += ",\"planned_peak_bytes\":" + std::to_string(s.planned_peak_bytes) + ",\"shapes\":[";
  for (size_t i = 0; i < s.shapes.size(); ++i) {
    const kiln::ShapeKeyStats& k = s.shapes[i];
    out += i ? ",{\"shape_key\":" : "{\"shape_key\":";
    out += kiln::JsonQuote(k.shape_key);
    out += ",\"compile_ms\":";
    JsonNumber(out, k.compile_ms);
    out +=
        kiln::StrCat(",\"kernels\":", k.kernels, ",\"planned_peak_bytes\":", k.planned_peak_bytes,
                     ",\"naive_bytes\":", k.naive_bytes, ",\"passes\":");
    JsonPasses(out, k.pass_timing);
    out += '}';
  }
  out += "],\"kernels\":[";
  for (size_t i = 0; i < s.kernel_profile.size(); ++i) {
    const kiln::KernelProfileStats& k = s.kernel_profile[i];
    out += i ? ",{\"shape_key\":" : "{\"shape_key\":";
    out += kiln::JsonQuote(k.shape_key);
    out += ",\"kernel\":";
    out += kiln::JsonQuote(k.kernel);
    out += ",\"calls\":" + std::to_string(k.calls) + ",\"total_ms\":";
    JsonNumber(out, k.total_ms);
    out += '}';
  }
  out += "]}";
  return out;
}

}  // namespace

namespace kiln_capi {

bool Matches(const kiln::Type& type, const kiln::Tensor& t) {
  const kiln::TensorTypeNode* tt = kiln::AsTensor(type);
  if (!tt || tt->dtype != t.dtype() || tt->ndim() != t.ndim()) return false;
  for (int i = 0; i < t.ndim(); ++i)
    if (tt->shape[i].is_const() && tt->shape[i].value() != t.shape()[i]) return false;
  return true;
}

std::vector<std::string> ExpectedOutputTypes(const kiln_model& m,
                                             const std::vector<kiln::Tensor>& inputs) {
  std::vector<kiln::Type> types;
  for (const kiln::Tensor& t : inputs) types.push_back(kiln::TypeOfTensor(t));
  std::map<std::string, int64_t> symbols = kiln::BindInputShapes(m.model->graph(), types);
  std::vector<std::string> out;
  for (const kiln_model::Io& io : m.outputs) {
    const kiln::TensorTypeNode* tt = kiln::AsTensor(io.type);
    std::vector<int64_t> dims;
    for (const kiln::Dim& d : tt->shape) dims.push_back(d.TryEval(symbols).value_or(-1));
    out.push_back(kiln::StrCat(kiln::DTypeName(tt->dtype), kiln::IntsToString(dims)));
  }
  return out;
}

void RequireTensorOutputs(const kiln_model& m, const char* fn) {
  for (const kiln_model::Io& io : m.outputs)
    if (io.sequence)
      Throw(ErrorCode::kUnsupported, fn, ": output '", io.name, "' of model '", m.model->name(),
            "' is a sequence; run the model with kiln_engine_run_lists");
}

PreparedRun PrepareRun(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                       const char* const* input_names, const kiln_tensor* const* inputs,
                       size_t num_outputs, const char* const* output_names, kiln_tensor** outputs,
                       const char* fn) {
  if (!engine) Throw(ErrorCode::kInvalidArgument, fn, ": engine is NULL");
  return BindRun(engine->engine.get(), model, num_inputs, input_names, inputs, num_outputs,
                 output_names, outputs, fn);
}

PreparedRun BindRun(kiln::Engine* engine, const kiln_model* model, size_t num_inputs,
                    const char* const* input_names, const kiln_tensor* const* inputs,
                    size_t num_outputs, const char* const* output_names, kiln_tensor** outputs,
                    const char* fn) {
  if (!model) Throw(ErrorCode::kInvalidArgument, fn, ": model is NULL");
  const kiln_model& m = *model;
  RequireTensorOutputs(m, fn);
  PreparedRun run;
  run.engine = engine;
  run.model = model;
  run.fn = fn;
  run.inputs = GatherInputs(m, num_inputs, input_names, inputs, fn);
  if (num_outputs && !outputs) Throw(ErrorCode::kInvalidArgument, fn, ": outputs is NULL");
  if (!output_names && num_outputs != m.outputs.size())
    Throw(ErrorCode::kInvalidArgument, fn, ": model '", m.model->name(), "' has ", m.outputs.size(),
          " outputs, given ", num_outputs, " slots (and no output names)");
  run.outputs = outputs;

  // Which model output each slot receives; whether every output is written in place, in order.
  std::vector<size_t>& index = run.index;
  index.resize(num_outputs);
  bool in_place = num_outputs == m.outputs.size();
  for (size_t j = 0; j < num_outputs; ++j) {
    index[j] = j;
    if (output_names) {
      if (!output_names[j])
        Throw(ErrorCode::kInvalidArgument, fn, ": output_names[", j, "] is NULL");
      auto it = std::find_if(m.outputs.begin(), m.outputs.end(),
                             [&](const kiln_model::Io& io) { return io.name == output_names[j]; });
      if (it == m.outputs.end()) {
        std::vector<std::string> known;
        for (const kiln_model::Io& io : m.outputs) known.push_back(io.name);
        Throw(ErrorCode::kNotFound, fn, ": model '", m.model->name(), "' has no output '",
              output_names[j], "' (its outputs: ", Join(known, ", "), ")");
      }
      index[j] = static_cast<size_t>(it - m.outputs.begin());
      for (size_t k = 0; k < j; ++k)
        if (index[k] == index[j])
          Throw(ErrorCode::kInvalidArgument, fn, ": output '", output_names[j],
                "' is asked for twice");
    }
    if (outputs[j] && !Matches(m.outputs[index[j]].type, outputs[j]->t))
      Throw(ErrorCode::kInvalidArgument, fn, ": model '", m.model->name(), "': output '",
            m.outputs[index[j]].name, "': expected ", kiln::TypeToString(m.outputs[index[j]].type),
            ", given ", outputs[j]->t.TypeString());
    in_place = in_place && outputs[j] && index[j] == j;
  }
  run.in_place = in_place && engine;
  return run;
}

void PreparedRun::Execute() const {
  const kiln_model& m = *model;
  const std::vector<kiln::Tensor>& in = inputs;
  const size_t num_outputs = index.size();
  const char* const func = fn.c_str();
  if (in_place) {
    std::vector<kiln::Tensor> out;
    out.reserve(num_outputs);
    for (size_t j = 0; j < num_outputs; ++j) out.push_back(outputs[j]->t);
    RunInPlace(*engine, m, in, out, func);
    return;
  }

  std::vector<kiln::Tensor> all =
      engine ? engine->Run(*m.model, in) : kiln::Interpret(m.model->graph(), in);
  // Check the in-place slots and make the new handles before writing any slot.
  std::vector<std::unique_ptr<kiln_tensor>> fresh(num_outputs);
  for (size_t j = 0; j < num_outputs; ++j) {
    const kiln::Tensor& r = all[index[j]];
    if (!outputs[j]) {
      fresh[j] = std::make_unique<kiln_tensor>();
      // The interpreter may return an input or a constant itself (an Identity): a reference
      // run's new handle gets a copy, never the caller's buffer or the model's weights.
      fresh[j]->t = engine ? r : r.Clone();
    } else if (outputs[j]->t.dtype() != r.dtype() || outputs[j]->t.shape() != r.shape()) {
      Throw(ErrorCode::kInvalidArgument, func, ": model '", m.model->name(), "': output '",
            m.outputs[index[j]].name, "': expected ", r.TypeString(), ", given ",
            outputs[j]->t.TypeString());
    }
  }
  for (size_t j = 0; j < num_outputs; ++j) {
    if (fresh[j])
      outputs[j] = fresh[j].release();
    else if (size_t n = all[index[j]].nbytes())
      std::memcpy(outputs[j]->t.raw_data(), all[index[j]].raw_data(), n);
  }
}

}  // namespace kiln_capi

extern "C" {

// ---- options ------------------------------------------------------------------------------

kiln_status kiln_options_create(kiln_options** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = new kiln_options();
  KILN_API_END
}

void kiln_options_destroy(kiln_options* options) {
  delete options;
}

kiln_status kiln_options_set_target(kiln_options* options, const char* target) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string text = Str(target, __func__, "target");
  // Refuses what no engine could use now, rather than at the engine's creation or first run.
  kiln::EngineCodegenOptions(text);
  options->options.target = std::move(text);
  KILN_API_END
}

kiln_status kiln_options_set_opt_level(kiln_options* options, int opt_level) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (opt_level < 0 || opt_level > kiln::kMaxOptLevel)
    Throw(ErrorCode::kInvalidArgument, __func__, ": opt_level must be 0 to ", kiln::kMaxOptLevel,
          ", got ", opt_level);
  options->options.opt_level = opt_level;
  KILN_API_END
}

kiln_status kiln_options_set_num_threads(kiln_options* options, int num_threads) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (num_threads < 0)
    Throw(ErrorCode::kInvalidArgument, __func__, ": num_threads ", num_threads, " is negative");
  options->options.num_threads = num_threads;
  KILN_API_END
}

kiln_status kiln_options_set_cache_dir(kiln_options* options, const char* dir) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.cache_dir = dir ? dir : "";
  KILN_API_END
}

kiln_status kiln_options_set_cache_max_bytes(kiln_options* options, uint64_t max_bytes) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (max_bytes == 0) Throw(ErrorCode::kInvalidArgument, __func__, ": max_bytes must be positive");
  options->options.cache_max_bytes = max_bytes;
  KILN_API_END
}

namespace {
void CheckPassName(const std::string& pass, const char* fn) {
  if (!kiln::PassRegistry::Global().Find(pass))
    Throw(ErrorCode::kNotFound, fn, ": unknown pass '", pass, "'");
}
}  // namespace

kiln_status kiln_options_disable_pass(kiln_options* options, const char* pass) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = Str(pass, __func__, "pass");
  CheckPassName(p, __func__);
  options->options.disabled_passes.push_back(std::move(p));
  KILN_API_END
}

kiln_status kiln_options_require_pass(kiln_options* options, const char* pass) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = Str(pass, __func__, "pass");
  CheckPassName(p, __func__);
  options->options.required_passes.push_back(std::move(p));
  KILN_API_END
}

namespace {
// Checks the key and the value's kind now (a scratch PassContext does it), so the error
// points at this call rather than at kiln_engine_create.
void SetConfig(kiln_options* options, const char* key, kiln::AttrValue value, const char* fn) {
  std::string k = Str(key, fn, "key");
  kiln::PassContext scratch;
  try {
    scratch.SetConfig(k, value);
  } catch (const kiln::Error& e) {
    Throw(e.code(), fn, ": ", e.what());
  }
  options->options.pass_config[k] = scratch.config().at(k);  // converted to the key's kind
}
}  // namespace

kiln_status kiln_options_set_config_int(kiln_options* options, const char* key, int64_t value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_float(kiln_options* options, const char* key, double value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_string(kiln_options* options, const char* key,
                                           const char* value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, Str(value, __func__, "value"), __func__);
  KILN_API_END
}

kiln_status kiln_options_set_config_bool(kiln_options* options, const char* key, int value) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  SetConfig(options, key, value != 0, __func__);
  KILN_API_END
}

kiln_status kiln_options_set_max_specializations(kiln_options* options, int max) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (max < 0) Throw(ErrorCode::kInvalidArgument, __func__, ": max ", max, " is negative");
  options->options.max_specializations = max;
  KILN_API_END
}

kiln_status kiln_options_set_compile_policy(kiln_options* options, const char* policy) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  KILN_REQUIRE(policy);
  options->options.policy = kiln::ParseCompilePolicy(policy);
  KILN_API_END
}

kiln_status kiln_options_set_specialize_after(kiln_options* options, int runs) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (runs < 1) Throw(ErrorCode::kInvalidArgument, __func__, ": runs ", runs, " is below 1");
  options->options.specialize_after = runs;
  KILN_API_END
}

kiln_status kiln_options_set_compile_threads(kiln_options* options, int threads) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (threads < 1)
    Throw(ErrorCode::kInvalidArgument, __func__, ": threads ", threads, " is below 1");
  options->options.compile_threads = threads;
  KILN_API_END
}

kiln_status kiln_options_set_compile_nice(kiln_options* options, int nice) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (nice < 0 || nice > 19)
    Throw(ErrorCode::kInvalidArgument, __func__, ": nice ", nice, " is not 0 to 19");
  options->options.compile_nice = nice;
  KILN_API_END
}

kiln_status kiln_options_set_pipeline(kiln_options* options, const char* pipeline) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  std::string p = pipeline ? pipeline : "";
  if (!p.empty()) {
    try {
      kiln::ParsePipeline(p);
    } catch (const kiln::Error& e) {
      Throw(e.code(), __func__, ": ", e.what());
    }
  }
  options->options.graph_pipeline = std::move(p);
  KILN_API_END
}

kiln_status kiln_options_set_profiling(kiln_options* options, int enabled) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.profile = enabled != 0;
  KILN_API_END
}

kiln_status kiln_options_set_trace(kiln_options* options, int enabled) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  options->options.trace = enabled != 0;
  KILN_API_END
}

kiln_status kiln_options_add_instrument(kiln_options* options, kiln_pass_hook before,
                                        kiln_pass_hook after, int with_ir, void* user_data) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (!before && !after) Throw(ErrorCode::kInvalidArgument, __func__, ": both hooks are NULL");
  options->options.instruments.push_back(
      std::make_shared<CInstrument>(before, after, with_ir != 0, user_data));
  KILN_API_END
}

kiln_status kiln_options_add_instrument_ir_of(kiln_options* options, kiln_pass_hook before,
                                              kiln_pass_hook after, const char* passes,
                                              void* user_data) {
  KILN_API_BEGIN
  KILN_REQUIRE(options);
  if (!before && !after) Throw(ErrorCode::kInvalidArgument, __func__, ": both hooks are NULL");
  const std::string list = Str(passes, __func__, "passes");
  // The hooks also see the pipelines that hold the registered passes (built once here, for
  // their names).
  const std::set<std::string> pipelines = {
      kiln::DefaultGraphPipeline()->info().name, kiln::DefaultLoopPipeline()->info().name,
      kiln::GpuLoopPipeline()->info().name, kiln::Sequential({})->info().name};
  std::set<std::string> names;
  for (size_t at = 0;;) {
    const size_t comma = list.find(',', at);
    const std::string name = list.substr(at, comma == std::string::npos ? comma : comma - at);
    if (name.empty())
      Throw(ErrorCode::kInvalidArgument, __func__, ": an empty pass name in '", list, "'");
    if (!pipelines.count(name)) CheckPassName(name, __func__);
    names.insert(name);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  options->options.instruments.push_back(
      std::make_shared<CInstrument>(before, after, false, user_data, std::move(names)));
  KILN_API_END
}

// ---- engines and runs -----------------------------------------------------------------------

kiln_status kiln_engine_create(const kiln_options* options, kiln_engine** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  auto e = std::make_unique<kiln_engine>();
  e->engine = std::make_unique<kiln::Engine>(options ? options->options : kiln::EngineOptions{});
  *out = e.release();
  KILN_API_END
}

void kiln_engine_destroy(kiln_engine* engine) {
  delete engine;
}

kiln_status kiln_model_run_reference(const kiln_model* model, size_t num_inputs,
                                     const char* const* input_names,
                                     const kiln_tensor* const* inputs, size_t num_outputs,
                                     const char* const* output_names, kiln_tensor** outputs) {
  KILN_API_BEGIN
  kiln_capi::BindRun(nullptr, model, num_inputs, input_names, inputs, num_outputs, output_names,
                     outputs, __func__)
      .Execute();
  KILN_API_END
}

kiln_status kiln_engine_run(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                            const char* const* input_names, const kiln_tensor* const* inputs,
                            size_t num_outputs, const char* const* output_names,
                            kiln_tensor** outputs) {
  KILN_API_BEGIN
  // Every output given in place (the serving case): names matched in place, nothing allocated
  // on a warm shape. Anything else, or an argument at fault, takes the general way, which
  // names what is wrong.
  if (kiln_capi::RunInPlaceFast(engine, model, num_inputs, input_names, inputs, num_outputs,
                                output_names, outputs))
    return KILN_OK;
  kiln_capi::PrepareRun(engine, model, num_inputs, input_names, inputs, num_outputs, output_names,
                        outputs, __func__)
      .Execute();
  KILN_API_END
}

kiln_status kiln_engine_run_lists(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                  const char* const* input_names, const kiln_tensor* const* inputs,
                                  size_t num_outputs, kiln_tensor_list** outputs) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(outputs);
  if (num_outputs != model->outputs.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": model '", model->model->name(), "' has ",
          model->outputs.size(), " outputs; num_outputs is ", num_outputs);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  // A sequence output comes as its length, then its elements (kiln_model's comment).
  std::vector<kiln::Tensor> flat = engine->engine->Run(*model->model, in);
  std::vector<std::unique_ptr<kiln_tensor_list>> lists;
  size_t k = 0;
  for (const kiln_model::Io& io : model->outputs) {
    size_t n = 1;
    if (io.sequence) {
      KILN_CHECK(k < flat.size() && flat[k].numel() == 1, __func__, ": no length for output '",
                 io.name, "'");
      n = static_cast<size_t>(flat[k++].GetAsDouble(0));
    }
    KILN_CHECK(k + n <= flat.size(), __func__, ": ", flat.size(), " results for output '", io.name,
               "'");
    auto list = std::make_unique<kiln_tensor_list>();
    for (size_t i = 0; i < n; ++i) list->tensors.push_back({std::move(flat[k++])});
    lists.push_back(std::move(list));
  }
  KILN_CHECK(k == flat.size(), __func__, ": ", flat.size(), " results, ", k, " regrouped");
  for (size_t j = 0; j < lists.size(); ++j) outputs[j] = lists[j].release();
  KILN_API_END
}

kiln_status kiln_engine_prepare(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  engine->engine->Prepare(*model->model, in);
  KILN_API_END
}

kiln_status kiln_engine_emit_kernels(kiln_engine* engine, const kiln_model* model,
                                     size_t num_inputs, const char* const* input_names,
                                     const kiln_tensor* const* inputs, const char* target,
                                     const char* format, const char* out_dir, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(format);
  KILN_REQUIRE(out_dir);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  std::vector<std::string> paths =
      engine->engine->EmitKernels(*model->model, in, target ? target : "", format, out_dir);
  if (out_json) {
    std::string json = "[";
    for (size_t i = 0; i < paths.size(); ++i) {
      if (i) json += ",";
      json += kiln::JsonQuote(paths[i]);
    }
    *out_json = NewCString(json + "]");
  }
  KILN_API_END
}

kiln_status kiln_engine_explain(kiln_engine* engine, const kiln_model* model, size_t num_inputs,
                                const char* const* input_names, const kiln_tensor* const* inputs,
                                char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(out_json);
  std::vector<kiln::Tensor> in = GatherInputs(*model, num_inputs, input_names, inputs, __func__);
  kiln::Explanation x = engine->engine->Explain(*model->model, in);
  std::string out = "{\"shape_key\":";
  out += kiln::JsonQuote(x.shape_key);
  out += kiln::StrCat(",\"cached\":", x.cached ? "true" : "false", ",\"tier\":\"",
                      kiln::TierName(x.tier), "\",\"reason\":");
  out += kiln::JsonQuote(x.reason);
  if (!x.segments.empty()) {
    out += ",\"segments\":";
    out += kiln::JsonQuote(x.segments);
  }
  out += "}";
  *out_json = NewCString(out);
  KILN_API_END
}

kiln_status kiln_engine_save_shapes(const kiln_engine* engine, const kiln_model* model,
                                    const char* path) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(path);
  const std::string text =
      kiln::FormatShapeLog(*model->model, engine->engine->SeenShapes(*model->model));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
    Throw(ErrorCode::kInvalidArgument, __func__, ": cannot write '", path, "'");
  KILN_API_END
}

kiln_status kiln_engine_precompile_shapes(kiln_engine* engine, const kiln_model* model,
                                          const char* path) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(model);
  KILN_REQUIRE(path);
  std::ifstream f(path, std::ios::binary);
  if (!f) Throw(ErrorCode::kNotFound, __func__, ": cannot read '", path, "'");
  std::stringstream text;
  text << f.rdbuf();
  try {
    engine->engine->Precompile(*model->model, kiln::ParseShapeLog(*model->model, text.str()));
  } catch (const kiln::Error& e) {
    Throw(e.code(), "'", path, "': ", e.what());
  }
  KILN_API_END
}

kiln_status kiln_engine_wait_background_compiles(kiln_engine* engine) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  engine->engine->WaitForBackgroundCompiles();
  KILN_API_END
}

kiln_status kiln_engine_stats_json(const kiln_engine* engine, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(out_json);
  *out_json = NewCString(StatsJson(engine->engine->stats()));
  KILN_API_END
}

kiln_status kiln_engine_trace_json(const kiln_engine* engine, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(engine);
  KILN_REQUIRE(out_json);
  *out_json = NewCString(engine->engine->TraceJson());
  KILN_API_END
}

}  // extern "C"
