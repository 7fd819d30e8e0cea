// `kiln serve`'s metrics in Prometheus' text format (GET /metrics): per model, requests by
// outcome, request latency and batch sizes as histograms; for the engine, its statistics
// (runs, cache hits and misses, compiles) read at each scrape.
// Threading: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::serve {

// A cumulative histogram over fixed upper bounds (+Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // `name`_bucket{le=...}, `name`_sum and `name`_count lines with `labels` (`model="mlp"`).
  void Write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bound, then +Inf; not cumulative; guarded by mu_
  double sum_ = 0;                // guarded by mu_
};

class Metrics {
 public:
  // The served models; requests to others are not counted per model.
  explicit Metrics(const std::vector<std::string>& models);
  void Request(const std::string& model, bool ok, double seconds);
  void Batch(const std::string& model, int64_t requests, int64_t rows);
  // The exposition, with the engine's statistics (kiln_engine_stats_json's text).
  std::string Text(const std::string& engine_stats_json) const;

 private:
  struct PerModel {
    std::atomic<uint64_t> ok{0}, failed{0};
    Histogram latency, batch_requests, batch_rows;
    PerModel();
  };
  std::map<std::string, std::unique_ptr<PerModel>> models_;  // fixed after construction
};

}  // namespace kiln::serve
