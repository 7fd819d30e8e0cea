// Prometheus text exposition for `kiln serve` (metrics.h).
#include "api/serve/metrics.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

namespace kiln::serve {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A label value: backslash, quote and newline escaped, as the format asks.
std::string Label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Help(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
}

void Histogram::Write(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" +
           (i < bounds_.size() ? Number(bounds_[i]) : std::string("+Inf")) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + Number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(cumulative) + "\n";
}

Metrics::PerModel::PerModel()
    : latency({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      batch_requests({1, 2, 4, 8, 16, 32, 64, 128}),
      batch_rows({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {}

Metrics::Metrics(const std::vector<std::string>& models) {
  for (const std::string& m : models) models_[m] = std::make_unique<PerModel>();
}

void Metrics::Request(const std::string& model, bool ok, double seconds) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  (ok ? it->second->ok : it->second->failed)++;
  it->second->latency.Observe(seconds);
}

void Metrics::Batch(const std::string& model, int64_t requests, int64_t rows) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  it->second->batch_requests.Observe(static_cast<double>(requests));
  it->second->batch_rows.Observe(static_cast<double>(rows));
}

std::string Metrics::Text(const std::string& engine_stats_json) const {
  std::string out;
  Help(out, "kiln_inference_requests_total", "counter", "Inference requests by model and outcome.");
  for (const auto& [name, m] : models_) {
    out += "kiln_inference_requests_total{model=\"" + Label(name) + "\",outcome=\"success\"} " +
           std::to_string(m->ok.load()) + "\n";
    out += "kiln_inference_requests_total{model=\"" + Label(name) + "\",outcome=\"failure\"} " +
           std::to_string(m->failed.load()) + "\n";
  }
  Help(out, "kiln_inference_request_duration_seconds", "histogram",
       "Inference request latency, from parsed request to encoded response.");
  for (const auto& [name, m] : models_)
    m->latency.Write(out, "kiln_inference_request_duration_seconds",
                     "model=\"" + Label(name) + "\"");
  Help(out, "kiln_batch_requests", "histogram",
       "Requests served by one engine run (dynamic batching).");
  for (const auto& [name, m] : models_)
    m->batch_requests.Write(out, "kiln_batch_requests", "model=\"" + Label(name) + "\"");
  Help(out, "kiln_batch_rows", "histogram", "Rows (batch dim) of one engine run.");
  for (const auto& [name, m] : models_)
    m->batch_rows.Write(out, "kiln_batch_rows", "model=\"" + Label(name) + "\"");

  // The engine's counters, from its statistics.
  nlohmann::json stats = nlohmann::json::parse(engine_stats_json, nullptr, false);
  struct Counter {
    const char* key;
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Counter kCounters[] = {
      {"runs", "kiln_engine_runs_total", "counter", "Engine runs."},
      {"hits", "kiln_engine_cache_hits_total", "counter", "Runs whose shape was compiled."},
      {"misses", "kiln_engine_cache_misses_total", "counter", "Runs of a shape not compiled yet."},
      {"specializations", "kiln_engine_specializations_total", "counter",
       "Shapes compiled to specialized kernels."},
      {"kernel_compiles", "kiln_engine_kernel_compiles_total", "counter",
       "Kernels compiled by LLVM (or NVRTC)."},
      {"kernel_cache_hits", "kiln_engine_kernel_cache_hits_total", "counter",
       "Kernels found in the in-memory kernel cache."},
      {"disk_hits", "kiln_engine_disk_cache_hits_total", "counter",
       "Kernels loaded from the disk cache."},
      {"compile_errors", "kiln_engine_compile_errors_total", "counter", "Failed compiles."},
      {"cached_executables", "kiln_engine_cached_executables", "gauge",
       "Compiled shapes held by the engine."},
  };
  for (const Counter& c : kCounters) {
    if (!stats.is_object() || !stats.contains(c.key) || !stats[c.key].is_number()) continue;
    Help(out, c.name, c.type, c.help);
    out += std::string(c.name) + " " + Number(stats[c.key].get<double>()) + "\n";
  }
  return out;
}

}  // namespace kiln::serve
