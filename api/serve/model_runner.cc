// A served model and its dynamic batching (model_runner.h).
#include "api/serve/model_runner.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <future>
#include <utility>

namespace kiln::serve {
namespace {

[[noreturn]] void Bad(std::string message) {
  throw HttpError{400, std::move(message)};
}

// kiln's errors as HTTP: the caller's fault is 400, running out of memory 503 (try again).
HttpError EngineError(kiln_status s, const std::string& model) {
  int status = 500;
  switch (s) {
    case KILN_INVALID_ARGUMENT:
    case KILN_NOT_FOUND:
    case KILN_TYPE_ERROR:
      status = 400;
      break;
    case KILN_OUT_OF_MEMORY:
    case KILN_CANCELLED:
      status = 503;
      break;
    default:
      break;
  }
  return HttpError{status, "model '" + model + "': " + kiln_last_error()};
}

// Whether `symbol` appears in the dim text `text` as a whole identifier (`batch * 2` uses
// `batch`; `batches` does not).
bool Mentions(const std::string& text, const std::string& symbol) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(symbol); at != std::string::npos; at = text.find(symbol, at + 1)) {
    size_t end = at + symbol.size();
    if ((at == 0 || !ident(text[at - 1])) && (end == text.size() || !ident(text[end]))) return true;
  }
  return false;
}

// The symbol every input and output has as dim 0, uses nowhere else, and is named as a batch
// is (`batch`, `batch_size`, `N`), or "" with the reason in `*why`. The name matters: a
// sequence-first model (`seq, batch, d`) has the same structure, and concatenating its requests
// along dim 0 would mix them.
std::string BatchSymbol(const std::vector<cli::IoType>& inputs,
                        const std::vector<cli::IoType>& outputs, std::string* why) {
  *why = "";
  if (inputs.empty() || outputs.empty() || inputs[0].symbols.empty() ||
      inputs[0].symbols[0].empty()) {
    *why = "input dim 0 is not symbolic";
    return "";
  }
  const std::string symbol = inputs[0].symbols[0];
  std::string lower = symbol;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("batch") == std::string::npos && lower != "n") {
    *why = "dim 0 is '" + symbol + "', not named as a batch dim ('batch', 'batch_size', 'N')";
    return "";
  }
  for (const auto* list : {&inputs, &outputs})
    for (const cli::IoType& t : *list) {
      if (t.symbols.empty() || t.symbols[0] != symbol) {
        *why = "'" + t.name + "' does not have '" + symbol + "' as dim 0";
        return "";
      }
      for (size_t d = 1; d < t.symbols.size(); ++d)
        if (Mentions(t.symbols[d], symbol)) {
          *why = "'" + t.name + "' uses '" + symbol + "' past dim 0";
          return "";
        }
    }
  return symbol;
}

int64_t RowBytes(kiln_dtype dtype, const std::vector<int64_t>& shape) {
  int64_t n = static_cast<int64_t>(kiln_dtype_size(dtype));
  for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

}  // namespace

// A request waiting for the batch thread: its model-ordered inputs and where its outputs go.
struct ModelRunner::Pending {
  std::vector<InputTensor> inputs;
  int64_t rows = 0;
  std::chrono::steady_clock::time_point arrival;
  std::promise<std::vector<OutputView>> result;  // every output, in model order
  // Requests batch together when their inputs agree on every dim but the first.
  bool SameOtherDims(const Pending& o) const {
    for (size_t k = 0; k < inputs.size(); ++k)
      if (!std::equal(inputs[k].shape.begin() + 1, inputs[k].shape.end(),
                      o.inputs[k].shape.begin() + 1, o.inputs[k].shape.end()))
        return false;
    return true;
  }
};

ModelRunner::ModelRunner(std::string name, kiln_engine* engine, const kiln_model* model,
                         BatchOptions options, BatchObserver observer)
    : name_(std::move(name)),
      engine_(engine),
      model_(model),
      options_(options),
      observer_(std::move(observer)),
      inputs_(cli::ModelIo(model, true)),
      outputs_(cli::ModelIo(model, false)) {
  if (options_.max_batch > 1)
    batch_symbol_ = BatchSymbol(inputs_, outputs_, &unbatched_why_);
  else
    unbatched_why_ = "--max-batch is 1";
  if (!batch_symbol_.empty()) batch_thread_ = std::thread([this] { BatchLoop(); });
}

ModelRunner::~ModelRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (batch_thread_.joinable()) batch_thread_.join();
  for (auto& p : queue_)
    p->result.set_exception(
        std::make_exception_ptr(HttpError{503, "model '" + name_ + "': the server is stopping"}));
}

std::vector<InputTensor> ModelRunner::Order(std::vector<InputTensor> given) const {
  std::vector<InputTensor> ordered(inputs_.size());
  std::vector<bool> seen(inputs_.size());
  for (InputTensor& t : given) {
    auto it = std::find_if(inputs_.begin(), inputs_.end(),
                           [&](const cli::IoType& io) { return io.name == t.name; });
    if (it == inputs_.end()) {
      std::string known;
      for (const cli::IoType& io : inputs_) known += (known.empty() ? "" : ", ") + io.name;
      Bad("model '" + name_ + "' has no input '" + t.name + "' (its inputs: " + known + ")");
    }
    const cli::IoType& io = *it;
    if (t.dtype != io.dtype)
      Bad("input '" + t.name + "': datatype " + OipDatatype(t.dtype) + ", the model takes " +
          OipDatatype(io.dtype) + " (" + cli::TypeString(io) + ")");
    bool fits = t.shape.size() == io.dims.size();
    for (size_t d = 0; fits && d < t.shape.size(); ++d)
      fits = io.dims[d] < 0 || io.dims[d] == t.shape[d];
    if (!fits) {
      std::string shape;
      for (int64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      Bad("input '" + t.name + "': shape [" + shape + "], the model takes " + cli::TypeString(io));
    }
    size_t k = static_cast<size_t>(it - inputs_.begin());
    seen[k] = true;
    ordered[k] = std::move(t);
  }
  for (size_t k = 0; k < inputs_.size(); ++k)
    if (!seen[k])
      Bad("input '" + inputs_[k].name + "' (" + cli::TypeString(inputs_[k]) + ") is missing");
  return ordered;
}

std::vector<size_t> ModelRunner::OutputIndex(const std::vector<std::string>& names) const {
  std::vector<size_t> index;
  if (names.empty())
    for (size_t j = 0; j < outputs_.size(); ++j) index.push_back(j);
  for (const std::string& n : names) {
    auto it = std::find_if(outputs_.begin(), outputs_.end(),
                           [&](const cli::IoType& io) { return io.name == n; });
    if (it == outputs_.end()) {
      std::string known;
      for (const cli::IoType& io : outputs_) known += (known.empty() ? "" : ", ") + io.name;
      Bad("model '" + name_ + "' has no output '" + n + "' (its outputs: " + known + ")");
    }
    index.push_back(static_cast<size_t>(it - outputs_.begin()));
  }
  return index;
}

std::vector<OutputView> ModelRunner::Run(const std::vector<const InputTensor*>& inputs) const {
  // Wrap the inputs (no copy); the handles go when this returns.
  std::vector<cli::TensorPtr> wrapped;
  std::vector<const kiln_tensor*> handles;
  for (const InputTensor* t : inputs) {
    kiln_tensor* h = nullptr;
    kiln_status s =
        kiln_tensor_wrap(t->dtype, t->shape.size(), t->shape.data(), t->data.get(), t->nbytes, &h);
    if (s != KILN_OK) throw EngineError(s, name_);
    wrapped.emplace_back(h);
    handles.push_back(h);
  }
  std::vector<kiln_tensor*> outs(outputs_.size(), nullptr);
  kiln_status s = kiln_engine_run(engine_, model_, handles.size(), nullptr, handles.data(),
                                  outs.size(), nullptr, outs.data());
  if (s != KILN_OK) throw EngineError(s, name_);
  std::vector<OutputView> views;
  for (size_t j = 0; j < outs.size(); ++j) {
    std::shared_ptr<const void> owner(outs[j], [](const void* p) {
      kiln_tensor_destroy(static_cast<kiln_tensor*>(const_cast<void*>(p)));
    });
    OutputView v;
    v.name = outputs_[j].name;
    size_t rank = 0;
    void* data = nullptr;
    kiln_tensor_dtype(outs[j], &v.dtype);
    kiln_tensor_rank(outs[j], &rank);
    v.shape.resize(rank);
    kiln_tensor_shape(outs[j], rank, v.shape.data());
    kiln_tensor_data(outs[j], &data);
    kiln_tensor_nbytes(outs[j], &v.nbytes);
    v.data = data;
    v.owner = std::move(owner);
    views.push_back(std::move(v));
  }
  return views;
}

std::vector<OutputView> ModelRunner::Infer(std::vector<InputTensor> given,
                                           const std::vector<std::string>& output_names) {
  std::vector<size_t> index = OutputIndex(output_names);
  std::vector<InputTensor> inputs = Order(std::move(given));
  std::vector<OutputView> all;
  // A request whose inputs disagree on the batch dim runs alone, and the engine names the fault.
  bool batch = !batch_symbol_.empty();
  for (const InputTensor& t : inputs) batch = batch && t.shape[0] == inputs[0].shape[0];
  if (!batch) {
    std::vector<const InputTensor*> ptrs;
    for (const InputTensor& t : inputs) ptrs.push_back(&t);
    all = Run(ptrs);
    if (observer_) observer_(1, inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0]);
  } else {
    auto p = std::make_shared<Pending>();
    p->rows = inputs[0].shape[0];
    p->inputs = std::move(inputs);
    p->arrival = std::chrono::steady_clock::now();
    std::future<std::vector<OutputView>> done = p->result.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) throw HttpError{503, "model '" + name_ + "': the server is stopping"};
      queue_.push_back(std::move(p));
    }
    cv_.notify_all();
    all = done.get();  // rethrows the batch's HttpError
  }
  std::vector<OutputView> out;
  for (size_t j : index) out.push_back(all[j]);
  return out;
}

void ModelRunner::BatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  // The oldest request and those after it that batch with it, within max_batch rows: calls `f`
  // with each one's queue index. Allocates nothing.
  auto each_pick = [&](auto&& f) {
    int64_t rows = queue_[0]->rows;
    f(size_t{0});
    for (size_t i = 1; i < queue_.size() && rows < options_.max_batch; ++i)
      if (rows + queue_[i]->rows <= options_.max_batch && queue_[i]->SameOtherDims(*queue_[0])) {
        rows += queue_[i]->rows;
        f(i);
      }
    return rows;
  };
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const auto deadline = queue_[0]->arrival + options_.max_delay;
    while (!stopping_ && each_pick([](size_t) {}) < options_.max_batch &&
           cv_.wait_until(lock, deadline) != std::cv_status::timeout) {
    }
    if (stopping_) return;
    std::vector<size_t> picked;
    std::vector<std::shared_ptr<Pending>> batch;
    try {
      each_pick([&](size_t i) { picked.push_back(i); });
      batch.reserve(picked.size());
    } catch (...) {  // out of memory choosing: the oldest request fails, alone
      std::shared_ptr<Pending> p = std::move(queue_.front());
      queue_.pop_front();
      p->result.set_exception(std::current_exception());
      continue;
    }
    // From the back, so the indices stay right; moves and erases do not throw.
    for (auto it = picked.rbegin(); it != picked.rend(); ++it) {
      batch.push_back(std::move(queue_[*it]));
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(*it));
    }
    std::reverse(batch.begin(), batch.end());
    lock.unlock();
    RunBatch(batch);
    lock.lock();
  }
}

void ModelRunner::RunBatch(std::vector<std::shared_ptr<Pending>>& batch) {
  size_t answered = 0;  // requests given their outputs
  try {
    int64_t rows = 0;
    for (const auto& p : batch) rows += p->rows;
    std::vector<OutputView> all;
    if (batch.size() == 1) {
      std::vector<const InputTensor*> ptrs;
      for (const InputTensor& t : batch[0]->inputs) ptrs.push_back(&t);
      all = Run(ptrs);
    } else {
      // Concatenate each input along dim 0, in request order.
      std::vector<InputTensor> joined(inputs_.size());
      std::vector<const InputTensor*> ptrs;
      for (size_t k = 0; k < joined.size(); ++k) {
        InputTensor& j = joined[k];
        const InputTensor& first = batch[0]->inputs[k];
        j.name = first.name;
        j.dtype = first.dtype;
        j.shape = first.shape;
        j.shape[0] = rows;
        j.nbytes = static_cast<size_t>(rows * RowBytes(j.dtype, j.shape));
        j.data.reset(new unsigned char[j.nbytes ? j.nbytes : 1]);
        size_t at = 0;
        for (const auto& p : batch) {
          if (p->inputs[k].nbytes)
            std::memcpy(j.data.get() + at, p->inputs[k].data.get(), p->inputs[k].nbytes);
          at += p->inputs[k].nbytes;
        }
        ptrs.push_back(&j);
      }
      all = Run(ptrs);
    }
    if (observer_) observer_(static_cast<int64_t>(batch.size()), rows);
    // Each request's rows of every output: views sharing the batch's tensors.
    int64_t offset = 0;
    for (const auto& p : batch) {
      std::vector<OutputView> mine;
      for (const OutputView& o : all) {
        OutputView v = o;
        const int64_t row_bytes = RowBytes(o.dtype, o.shape);
        v.shape[0] = p->rows;
        v.data = static_cast<const unsigned char*>(o.data) + offset * row_bytes;
        v.nbytes = static_cast<size_t>(p->rows * row_bytes);
        mine.push_back(std::move(v));
      }
      offset += p->rows;
      p->result.set_value(std::move(mine));
      ++answered;
    }
  } catch (...) {
    // A batch that failed before answering anyone runs its requests one by one, so an error
    // that one request's values cause (an index out of range) reaches that request alone.
    const std::exception_ptr error = std::current_exception();
    for (size_t i = answered; i < batch.size(); ++i) {
      Pending& p = *batch[i];
      try {
        if (batch.size() == 1 || answered) std::rethrow_exception(error);
        std::vector<const InputTensor*> ptrs;
        for (const InputTensor& t : p.inputs) ptrs.push_back(&t);
        std::vector<OutputView> alone = Run(ptrs);
        if (observer_) observer_(1, p.rows);
        p.result.set_value(std::move(alone));
      } catch (...) {
        p.result.set_exception(std::current_exception());
      }
    }
  }
}

}  // namespace kiln::serve
