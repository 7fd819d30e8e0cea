// The hit path: shape key, lookup, dispatch. Everything a run does when its shapes were seen
// before is in this file, and none of it allocates on the heap: the key is hashed from the
// tensors in place, a hash match is confirmed against the stored dims, the arena comes from a
// pool, and each launch's pointer table is a stack array. A miss leaves for GetOrBuild.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>

#include "engine/device_dispatch.h"
#include "engine/engine.h"
#include "engine/segments.h"
#include "ir/dynamic.h"
#include "ir/error.h"
#include "jit/runtime.h"
#include "jit/tbb_handoff.h"

namespace kiln {

namespace {

inline uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64's finalizer over the combination: every input bit reaches every output bit.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A value input's bytes as 64-bit words (the last one zero-padded): what the key hashes and
// the signature stores of it.
template <typename Fn>
void ForEachValueWord(const Tensor& t, Fn fn) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  size_t n = t.nbytes();
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, bytes + i, std::min<size_t>(8, n - i));
    fn(w);
  }
}

// One defined tensor per model input.
void CheckInputCount(const Model& model, std::span<const Tensor> inputs) {
  if (static_cast<int>(inputs.size()) != model.num_inputs())
    Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': expected ", model.num_inputs(),
          " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': input ", i, " '",
            model.graph()->params[i]->name, "' is an undefined tensor");
}

}  // namespace

uint64_t ShapeKeyHash(const Model& model, std::span<const Tensor> inputs) {
  uint64_t h = Mix(0, model.id());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    h = Mix(h, (static_cast<uint64_t>(t.dtype()) << 32) | static_cast<uint64_t>(t.ndim()));
    for (int64_t d : t.shape()) h = Mix(h, static_cast<uint64_t>(d));
    if (model.is_value_input(static_cast<int>(i)))
      ForEachValueWord(t, [&](uint64_t w) { h = Mix(h, w); });
  }
  return h;
}

std::vector<int64_t> Engine::MakeSignature(const Model& model, std::span<const Tensor> inputs) {
  std::vector<int64_t> sig;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    sig.push_back(static_cast<int64_t>(t.dtype()));
    sig.push_back(t.ndim());
    sig.insert(sig.end(), t.shape().begin(), t.shape().end());
    if (model.is_value_input(static_cast<int>(i)))
      ForEachValueWord(t, [&](uint64_t w) { sig.push_back(static_cast<int64_t>(w)); });
  }
  return sig;
}

bool Engine::MatchesSignature(const Model& model, const std::vector<int64_t>& sig,
                              std::span<const Tensor> inputs) {
  size_t i = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (i + 2 + t.shape().size() > sig.size()) return false;
    if (sig[i] != static_cast<int64_t>(t.dtype()) || sig[i + 1] != t.ndim()) return false;
    i += 2;
    for (int64_t d : t.shape())
      if (sig[i++] != d) return false;
    if (!model.is_value_input(static_cast<int>(k))) continue;
    bool same = true;
    ForEachValueWord(t, [&](uint64_t w) {
      same = same && i < sig.size() && sig[i] == static_cast<int64_t>(w);
      ++i;
    });
    if (!same) return false;
  }
  return i == sig.size();
}

Engine::Specialization* Engine::FindLocked(const Model& model, uint64_t key_hash,
                                           std::span<const Tensor> inputs) const {
  auto [begin, end] = cache_.equal_range(key_hash);
  for (auto it = begin; it != end; ++it)
    if (it->second->model_id == model.id() &&
        MatchesSignature(model, it->second->signature, inputs))
      return it->second.get();
  return nullptr;
}

std::shared_ptr<const Executable> Engine::Find(const Model& model, uint64_t key_hash,
                                               std::span<const Tensor> inputs, bool* queue) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (Specialization* found = FindLocked(model, key_hash, inputs)) {
    Specialization& s = *found;
    s.last_used.store(clock_.fetch_add(1, std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
    s.lookups.fetch_add(1, std::memory_order_relaxed);
    if (s.exe->tier == Tier::kGeneric) {
      generic_runs_.fetch_add(1, std::memory_order_relaxed);
      // Tiered: due for specialization once it has served specialize_after runs (queued once).
      uint32_t runs = s.generic_runs.fetch_add(1, std::memory_order_relaxed) + 1;
      if (options_.policy == CompilePolicy::kTiered &&
          runs >= static_cast<uint32_t>(options_.specialize_after) &&
          !s.queued.load(std::memory_order_relaxed) &&
          !s.queued.exchange(true, std::memory_order_relaxed))
        *queue = true;
    }
    return s.exe;
  }
  return nullptr;
}

std::shared_ptr<const Executable> Engine::Acquire(const Model& model,
                                                  std::span<const Tensor> inputs,
                                                  bool* defer_queue) {
  CheckInputCount(model, inputs);
  for (int i : model.value_inputs())
    if (inputs[i].numel() > kMaxValueInputElements)
      Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': input ", i, " '",
            model.graph()->params[i]->name,
            "' sets shapes, so its values are part of the "
            "specialization key; it may have at most ",
            kMaxValueInputElements, " elements, got ", inputs[i].TypeString());
  uint64_t key_hash = ShapeKeyHash(model, inputs);
  bool queue = false;
  if (std::shared_ptr<const Executable> exe = Find(model, key_hash, inputs, &queue)) {
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (queue && defer_queue)
      *defer_queue = true;
    else if (queue)
      QueueSpecialization(model, key_hash, inputs, exe->symbols);
    return exe;
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (options_.policy != CompilePolicy::kEager)
    if (std::shared_ptr<const Executable> exe = ServeGeneric(model, key_hash, inputs, defer_queue))
      return exe;
  return GetOrBuild(model, key_hash, inputs);
}

Engine::QueueAfterRun::~QueueAfterRun() {
  if (!model) return;
  try {
    engine->QueueSpecialization(*model, ShapeKeyHash(*model, inputs), inputs, served->symbols);
  } catch (...) {
    // Out of memory queueing: the shape stays on its generic executable.
  }
}

namespace {

// The cancel flag of the runs this thread starts (Engine::CancelScope); null: not cancellable.
thread_local const std::atomic<bool>* tls_cancel = nullptr;

void ThrowIfCancelled(const Model& model) {
  if (tls_cancel && tls_cancel->load(std::memory_order_relaxed))
    Throw(ErrorCode::kCancelled, "model '", model.name(), "': run cancelled before it started");
}

// A run's trace arguments: its inputs' types.
std::string TraceInputs(std::span<const Tensor> inputs) {
  std::string s = "\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ',';
    s += JsonQuote(inputs[i].TypeString());
  }
  return s + "]";
}

// A run's span in the engine's trace, its input types as arguments; the tracer is current
// for the run (for the passes of a compile it waits for).
struct TracedRun {
  TracerScope scope;
  TraceSpan span;
  TracedRun(Tracer* tracer, const std::string& model, std::span<const Tensor> inputs)
      : scope(tracer), span("run", model) {
    span.SetArgs(TraceInputs(inputs));
  }
};

}  // namespace

Engine::CancelScope::CancelScope(const std::atomic<bool>* flag) : outer_(tls_cancel) {
  tls_cancel = flag;
}
Engine::CancelScope::~CancelScope() {
  tls_cancel = outer_;
}

void Engine::Run(const Model& model, std::span<const Tensor> inputs,
                 std::span<const Tensor> outputs) {
  std::optional<TracedRun> traced;  // only when tracing: the hit path touches no thread-local
  if (tracer_) traced.emplace(tracer_.get(), model.name(), inputs);
  ThrowIfCancelled(model);
  if (model.segments()) {
    runs_.fetch_add(1, std::memory_order_relaxed);
    std::vector<Tensor> results = RunSegments(model, inputs);
    if (outputs.size() != results.size())
      Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': expected ", results.size(),
            " outputs, got ", outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& got = outputs[i];
      if (!got.defined() || got.dtype() != results[i].dtype() || got.shape() != results[i].shape())
        Throw(ErrorCode::kInvalidArgument, "model '", model.name(), "': output ", i,
              ": this run made ", results[i].TypeString(), ", given ",
              got.defined() ? got.TypeString() : "an undefined tensor");
      if (size_t n = results[i].nbytes()) std::memcpy(got.raw_data(), results[i].raw_data(), n);
    }
    return;
  }
  runs_.fetch_add(1, std::memory_order_relaxed);
  bool queue = false;
  std::shared_ptr<const Executable> exe = Acquire(model, inputs, &queue);
  QueueAfterRun after{this, queue ? &model : nullptr, inputs, exe.get()};
  if (outputs.size() != exe->outputs.size())
    Throw(ErrorCode::kInvalidArgument, exe->shape_key, ": expected ", exe->outputs.size(),
          " outputs, got ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorSignature& want = exe->outputs[i];
    const Tensor& got = outputs[i];
    if (!got.defined() || got.dtype() != want.dtype || got.shape() != want.shape)
      Throw(ErrorCode::kInvalidArgument, exe->shape_key, ": output ", i, ": expected ",
            want.ToString(), ", given ", got.defined() ? got.TypeString() : "an undefined tensor");
  }
  Dispatch(*exe, inputs.data(), outputs.data());
}

std::vector<Tensor> Engine::Run(const Model& model, std::span<const Tensor> inputs) {
  std::optional<TracedRun> traced;  // only when tracing: the hit path touches no thread-local
  if (tracer_) traced.emplace(tracer_.get(), model.name(), inputs);
  ThrowIfCancelled(model);
  runs_.fetch_add(1, std::memory_order_relaxed);
  return RunPart(model, inputs);
}

std::vector<Tensor> Engine::RunPart(const Model& model, std::span<const Tensor> inputs) {
  if (model.segments()) return RunSegments(model, inputs);
  bool queue = false;
  std::shared_ptr<const Executable> exe = Acquire(model, inputs, &queue);
  QueueAfterRun after{this, queue ? &model : nullptr, inputs, exe.get()};
  CheckRunBytes(*exe, /*output_bytes=*/true);
  std::vector<Tensor> outputs;
  for (const TensorSignature& o : exe->outputs) outputs.push_back(Tensor::Empty(o.dtype, o.shape));
  Dispatch(*exe, inputs.data(), outputs.data());
  return outputs;
}

void Engine::CheckRunBytes(const Executable& exe, bool output_bytes) const {
  uint64_t outputs = 0;
  if (output_bytes)
    for (const TensorSignature& o : exe.outputs) outputs += o.nbytes;
  const uint64_t total = exe.plan.peak_bytes + outputs;
  if (total > max_run_bytes_)
    Throw(ErrorCode::kOutOfMemory, exe.shape_key, ": a run needs ", total, " bytes (",
          exe.plan.peak_bytes, " of intermediates, ", outputs, " of outputs), over the limit of ",
          max_run_bytes_, " (EngineOptions.max_run_bytes)");
}

// dyn.loop's semantics (ir/dynamic.h), run: the body once per iteration while the trip count
// and the condition allow, carried values passed on, scan values stacked along a new axis 0.
std::vector<Tensor> Engine::RunLoop(const Segments& seg, const std::vector<Tensor>& args) {
  const int64_t carried = seg.attrs.GetInt("num_carried"), scans = seg.attrs.GetInt("num_scans");
  const std::vector<int64_t> reverse =
      seg.attrs.Has("scan_reverse") ? seg.attrs.GetInts("scan_reverse") : std::vector<int64_t>{};
  const Tensor& trip_t = args.at(args.size() - 2);
  const Tensor& cond_t = args.at(args.size() - 1);
  if (trip_t.numel() != 1 || cond_t.numel() != 1 || trip_t.dtype() != DType::kInt64)
    Throw(ErrorCode::kInvalidArgument,
          "the trip count must be one i64 element and the condition one element, got ",
          trip_t.TypeString(), " and ", cond_t.TypeString());
  const int64_t trips = trip_t.data<int64_t>()[0];
  bool go = cond_t.GetAsDouble(0) != 0;
  std::vector<Tensor> in = {Tensor(), Tensor::Scalar<bool>(true)};
  in.insert(in.end(), args.begin(), args.end() - 2);  // carried, then captured
  // Scan values are appended as they come (an iteration's tensor is freed at once), then
  // stacked along a new axis 0: a long loop holds one growing buffer per scan output.
  struct ScanStack {
    DType dtype = DType::kFloat32;
    std::vector<int64_t> shape;  // one iteration's
    std::vector<char> bytes;
    int64_t count = 0;
  };
  std::vector<ScanStack> stacks(static_cast<size_t>(scans));
  // The stacks grow with the trip count, which the inputs may set: they count against
  // max_run_bytes, checked before each iteration's values are appended.
  uint64_t stacked_bytes = 0;
  // The steady state allocates nothing and looks nothing up (malloc/free were half of a
  // 10000-step Scan, the shape-key hash another 6 %): the body's executable is kept while its
  // inputs keep their dtypes and shapes, and its outputs are two sets used in turn, so that
  // iteration t never writes the buffers its carried inputs (t - 1's outputs) are in. A body
  // that runs in segments, or with value inputs (whose values key its executable), takes
  // RunPart each iteration.
  const Model& body = *seg.loop_body;
  bool direct = !body.segments();
  for (int k = 0; k < body.num_inputs() && direct; ++k) direct = !body.is_value_input(k);
  std::shared_ptr<const Executable> exe;
  std::vector<Tensor> sets[2];
  auto same_types = [](const std::vector<TensorSignature>& sig, std::span<const Tensor> ts) {
    if (sig.size() != ts.size()) return false;
    for (size_t k = 0; k < ts.size(); ++k)
      if (sig[k].dtype != ts[k].dtype() || sig[k].shape != ts[k].shape()) return false;
    return true;
  };
  Tensor iteration = Tensor::Scalar<int64_t>(0);
  in[0] = iteration;  // shares its element: written in place below
  for (int64_t t = 0; t < trips && go; ++t) {
    iteration.data<int64_t>()[0] = t;
    std::vector<Tensor> out;
    if (direct) {
      if (!exe || !same_types(exe->inputs, in)) exe = Acquire(body, in);
      std::vector<Tensor>& set = sets[t % 2];
      if (!same_types(exe->outputs, set)) {
        set.clear();
        for (const TensorSignature& o : exe->outputs)
          set.push_back(Tensor::Empty(o.dtype, o.shape));
      }
      Dispatch(*exe, in.data(), set.data());
      out = set;  // shares the buffers
    } else {
      out = RunPart(body, in);
    }
    if (out.size() != static_cast<size_t>(1 + carried + scans) || out[0].numel() != 1)
      Throw(ErrorCode::kInvalidArgument, "iteration ", t, ": the body must return one condition ",
            "element, ", carried, " carried and ", scans, " scan values; it returned ", out.size(),
            " values, the condition ", out.empty() ? "missing" : out[0].TypeString());
    go = out[0].GetAsDouble(0) != 0;
    for (int64_t i = 0; i < carried; ++i) in[2 + i] = std::move(out[1 + i]);
    for (int64_t i = 0; i < scans; ++i) {
      const Tensor& v = out[1 + carried + i];
      ScanStack& st = stacks[i];
      if (st.count == 0) {
        st.dtype = v.dtype();
        st.shape = v.shape();
      } else if (v.dtype() != st.dtype || v.shape() != st.shape) {
        Throw(ErrorCode::kInvalidArgument, "scan output ", i, ": iteration ", t, " made ",
              v.TypeString(), ", iteration 0 ", TensorSignature{st.dtype, st.shape, 0}.ToString(),
              " (scan values stack)");
      }
      stacked_bytes += v.nbytes();
      if (stacked_bytes > max_run_bytes_)
        Throw(ErrorCode::kOutOfMemory, "iteration ", t, ": the loop's scan outputs would take ",
              stacked_bytes, " bytes, over the limit of ", max_run_bytes_,
              " (EngineOptions.max_run_bytes)");
      const char* data = static_cast<const char*>(v.raw_data());
      if (v.nbytes()) st.bytes.insert(st.bytes.end(), data, data + v.nbytes());
      st.count += 1;
    }
  }
  std::vector<Tensor> results(in.begin() + 2, in.begin() + 2 + carried);
  for (int64_t i = 0; i < scans; ++i) {
    ScanStack& st = stacks[i];
    if (st.count == 0) {
      // No iteration ran: the scan output is empty, shaped as one iteration's would be (the
      // body's executable for these inputs says, without running).
      if (seg.loop_body->segments())
        Throw(ErrorCode::kUnsupported, "it ran no iteration, and its scan output ", i,
              " would be empty with a shape kiln cannot tell (its body runs in segments)");
      in[0] = Tensor::Scalar<int64_t>(0);
      const TensorSignature& one =
          Acquire(*seg.loop_body, in)->outputs.at(static_cast<size_t>(1 + carried + i));
      std::vector<int64_t> shape = one.shape;
      shape.insert(shape.begin(), 0);
      results.push_back(Tensor::Empty(one.dtype, shape));
      continue;
    }
    std::vector<int64_t> shape = st.shape;
    shape.insert(shape.begin(), st.count);
    Tensor stacked = Tensor::Empty(st.dtype, shape);
    const size_t n = st.bytes.size() / static_cast<size_t>(st.count);  // one iteration's bytes
    const bool reversed = i < static_cast<int64_t>(reverse.size()) && reverse[i];
    char* dst = static_cast<char*>(stacked.raw_data());
    if (!reversed) {
      if (!st.bytes.empty()) std::memcpy(dst, st.bytes.data(), st.bytes.size());
    } else {
      for (int64_t t = 0; t < st.count && n; ++t)
        std::memcpy(dst + (st.count - 1 - t) * n, st.bytes.data() + t * n, n);
    }
    results.push_back(std::move(stacked));
  }
  return results;
}

namespace {

// The first `count` (one i64) entries of `bounded` along `dim`: a bounded form's result
// trimmed to the size the values decided (Segments::trim_dims).
Tensor KeepLeading(const Tensor& bounded, int dim, const Tensor& count) {
  const int64_t len = bounded.shape().at(static_cast<size_t>(dim));
  const int64_t n =
      count.numel() == 1 && count.dtype() == DType::kInt64 ? count.data<int64_t>()[0] : -1;
  if (n < 0 || n > len)
    Throw(ErrorCode::kInternal, "the compiled kernel counted ", n, " entries, outside [0, ", len,
          "]");
  std::vector<int64_t> shape = bounded.shape();
  shape[static_cast<size_t>(dim)] = n;
  Tensor out = Tensor::Empty(bounded.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const size_t es = static_cast<size_t>(DTypeSize(bounded.dtype()));
  const size_t row = static_cast<size_t>(n * inner) * es;
  const char* src = static_cast<const char*>(bounded.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer && row; ++o)
    std::memcpy(dst + static_cast<size_t>(o) * row, src + static_cast<size_t>(o * len * inner) * es,
                row);
  return out;
}

}  // namespace

std::vector<Tensor> Engine::RunSegments(const Model& model, std::span<const Tensor> inputs) {
  const Segments& seg = *model.segments();
  CheckInputCount(model, inputs);
  std::vector<Tensor> head;
  if (seg.head) {
    try {
      head = RunPart(*seg.head, inputs);
    } catch (const Error& e) {
      // The head is a model of its own (`NAME.head`): say whose.
      throw Error(e.code(), StrCat("model '", model.name(), "': ", e.what()));
    }
  }
  std::vector<Tensor> op_out;
  auto value = [&](const Segments::Source& s) -> const Tensor& {
    switch (s.kind) {
      case Segments::Source::Kind::kInput:
        return inputs[s.index];
      case Segments::Source::Kind::kHead:
        return head.at(s.index);
      case Segments::Source::Kind::kConstant:
        return s.constant;
      case Segments::Source::Kind::kOp:
        break;
    }
    return op_out.at(s.index);
  };
  if (seg.op) {
    std::vector<Tensor> op_in;
    for (const Segments::Source& s : seg.op_args) op_in.push_back(value(s));
    try {
      if (seg.loop_body)
        op_out = RunLoop(seg, op_in);
      else if (!seg.trim_dims.empty())
        for (size_t i = 0; i < seg.trim_dims.size(); ++i)
          op_out.push_back(seg.trim_dims[i] < 0
                               ? op_in.at(i)
                               : KeepLeading(op_in.at(i), seg.trim_dims[i], op_in.back()));
      else
        op_out = RunOpReference(seg.op->name, op_in, seg.attrs);
    } catch (const Error& e) {
      throw Error(e.code(), StrCat("model '", model.name(), "': ", seg.node, ": ", e.what()));
    }
  }
  std::vector<Tensor> rest_in;
  for (const Segments::Source& s : seg.rest_args) rest_in.push_back(value(s));
  return RunPart(*seg.rest, rest_in);
}

void Engine::Dispatch(const Executable& exe, const Tensor* inputs, const Tensor* outputs) {
  // Read here, on the run's thread: run_all may run on one of the arena's.
  const std::atomic<bool>* cancel = tls_cancel;
  CheckRunBytes(exe, /*output_bytes=*/false);  // the outputs are given
  if (exe.code->device) return DispatchOnDevice(exe, inputs, outputs, cancel);
  // The calling thread's, for kernels that run on it (arena threads reserve on joining it). A
  // thread-local test after the first run on a thread.
  ReserveThreadScratch();
  ScratchPool::Scratch* scratch =
      exe.plan.peak_bytes ? scratch_.Acquire(exe.plan.peak_bytes) : nullptr;
  struct Release {  // the arena goes back however the run ends (a cancelled run throws)
    ScratchPool& pool;
    ScratchPool::Scratch* scratch;
    ~Release() {
      if (scratch) pool.Release(scratch);
    }
  } release{scratch_, scratch};
  std::byte* arena = scratch ? scratch->pages.data : nullptr;
  void* const* constants = exe.code->constant_data.data();
  auto resolve = [&](const BufferRef& r) -> void* {
    switch (r.kind) {
      case BufferRef::Kind::kInput:
        return inputs[r.index].raw_data();
      case BufferRef::Kind::kOutput:
        return outputs[r.index].raw_data();
      case BufferRef::Kind::kConstant:
        return constants[r.index];
      case BufferRef::Kind::kArena:
        return arena + r.offset;
    }
    return nullptr;
  };
  const int trace_tid = tracer_ ? Tracer::ThreadId() : 0;  // the run's: workers may call kernels
  auto run_all = [&] {
    void* buffers[kMaxKernelBuffers];
    for (const KernelLaunch& k : exe.launches()) {
      if (cancel && cancel->load(std::memory_order_relaxed))
        Throw(ErrorCode::kCancelled, exe.shape_key, ": run cancelled after ",
              &k - exe.launches().data(), " of ", exe.launches().size(), " kernels");
      const BufferRef* refs = exe.buffer_refs.data() + k.first_buffer;
      for (uint32_t i = 0; i < k.num_buffers; ++i) buffers[i] = resolve(refs[i]);
      if (!k.profile) {
        k.entry->cpu(buffers, exe.scalars.data() + k.first_scalar);
        continue;
      }
      // Profiling (EngineOptions::profile): two clock reads and two relaxed atomic adds (and an
      // event when tracing).
      auto t0 = std::chrono::steady_clock::now();
      k.entry->cpu(buffers, exe.scalars.data() + k.first_scalar);
      k.profile->Record(t0, trace_tid);
    }
    for (const OutputCopy& c : exe.copies)
      std::memcpy(outputs[c.output].raw_data(), resolve(c.from), c.nbytes);
  };
  // Kernels without a parallel loop never touch oneTBB: entering the arena would only cost.
  // A team keeps the arena's threads awake between the run's parallel loops (jit/runtime.h):
  // at 2 threads, min of 5-10 alternating runs, the MLP at batch 1 21.8 -> 20.4 us, the
  // encoder at 1x16 195 -> 188 us, the MobileNet-style net 2448 -> 2314 us, dynamic_conv at
  // 224x224 1497 -> 1454 us, the small CNN at batch 1 134 -> 130 us.
  if (exe.parallel) {
    TbbHandoff handoff;  // execute may hand the functor to a worker of the arena
    arena_.execute(handoff.Wrap([&] {
      ParallelTeam team(teams_, arena_.max_concurrency());
      run_all();
    }));
    handoff.Joined();
  } else {
    run_all();
  }
}

void Engine::ScratchPool::FreeArena(Scratch* s) {
  HostPages::Unmap(s->pages);
}

Engine::ScratchPool::Scratch* Engine::ScratchPool::Acquire(size_t bytes) {
  Scratch* s = nullptr;
  for (std::atomic<Scratch*>& slot : slots_) {
    s = slot.exchange(nullptr, std::memory_order_acquire);
    if (s) break;
  }
  if (s && s->pages.capacity >= bytes) return s;
  // No free scratch, or one too small for this plan: grow it. Scratches only grow, so once
  // each concurrent run has seen the largest plan, this never happens again.
  const bool fresh = !s;
  if (fresh) s = new Scratch();
  try {
    HostPages::Grow(s->pages, bytes);
  } catch (...) {
    if (fresh)
      delete s;
    else
      Release(s);  // still usable for smaller plans
    throw;
  }
  return s;
}

void Engine::ScratchPool::Release(Scratch* s) {
  for (std::atomic<Scratch*>& slot : slots_) {
    Scratch* expected = nullptr;
    if (slot.compare_exchange_strong(expected, s, std::memory_order_release,
                                     std::memory_order_relaxed))
      return;
  }
  FreeArena(s);  // more runs at once than slots: let this one go
  delete s;
}

Engine::ScratchPool::~ScratchPool() {
  for (std::atomic<Scratch*>& slot : slots_) {
    if (Scratch* s = slot.load()) {
      FreeArena(s);
      delete s;
    }
  }
}

}  // namespace kiln
