// One served model: checks a request's inputs against the model, and runs it through the
// shared engine, with dynamic batching where the model allows it.
//
// Batching: a model whose every input and output has the same symbol as dim 0, used nowhere
// else and named as a batch dim is (`batch`, `batch_size`, `N`: a sequence-first model has the
// same structure, and must not be batched), can run many requests as one: their inputs are
// concatenated along dim 0, the engine runs once, and each request gets a view of its rows of every
// output (no copy; the batch's output tensors live until the last view is gone). A batch thread per
// such model takes the oldest waiting request and the requests after it with the same other dims,
// up to max_batch rows, waiting at most max_delay after the oldest arrived for more to come. Other
// models run on the calling thread.
//
// Threading: Infer is called from many HTTP threads at once; the engine is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/cli/cli.h"
#include "api/serve/oip.h"
#include "kiln.h"

namespace kiln::serve {

struct BatchOptions {
  int64_t max_batch = 32;  // rows; 1 turns batching off
  std::chrono::microseconds max_delay{2000};
};

// Called after each engine run with the number of requests and rows it served.
using BatchObserver = std::function<void(int64_t requests, int64_t rows)>;

class ModelRunner {
 public:
  // `engine` and `model` must outlive the runner.
  ModelRunner(std::string name, kiln_engine* engine, const kiln_model* model, BatchOptions options,
              BatchObserver observer);
  // Stops the batch thread; requests still waiting fail with 503.
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<cli::IoType>& inputs() const { return inputs_; }
  const std::vector<cli::IoType>& outputs() const { return outputs_; }
  // The symbol requests are batched along ("" when the model is not batched, and then why).
  const std::string& batch_symbol() const { return batch_symbol_; }
  const std::string& unbatched_why() const { return unbatched_why_; }

  // Runs one request; blocks until its outputs are ready. Returns the outputs named in
  // `output_names` in that order (all, in model order, when empty). Throws HttpError: 400 for
  // inputs or outputs that do not fit the model, the engine's error otherwise.
  std::vector<OutputView> Infer(std::vector<InputTensor> inputs,
                                const std::vector<std::string>& output_names);

 private:
  struct Pending;
  std::vector<InputTensor> Order(std::vector<InputTensor> inputs) const;
  std::vector<size_t> OutputIndex(const std::vector<std::string>& names) const;
  // Runs the engine on model-ordered inputs; returns every output, owned by the views.
  std::vector<OutputView> Run(const std::vector<const InputTensor*>& inputs) const;
  void BatchLoop();
  void RunBatch(std::vector<std::shared_ptr<Pending>>& batch);

  const std::string name_;
  kiln_engine* const engine_;
  const kiln_model* const model_;
  const BatchOptions options_;
  const BatchObserver observer_;
  std::vector<cli::IoType> inputs_, outputs_;
  std::string batch_symbol_, unbatched_why_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> queue_;  // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  std::thread batch_thread_;                    // only for a batchable model
};

}  // namespace kiln::serve
