#include "engine/device_dispatch.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "ir/error.h"

namespace kiln {

namespace {

constexpr Device kHost{DeviceType::kCPU, 0};

// The device buffers of one run, given back when it ends, however it ends: after the stream
// has run what was enqueued, since a launch or a copy may still use them.
class RunBuffers {
 public:
  RunBuffers(DeviceAPI* api, Device dev, StreamHandle stream)
      : api_(api), dev_(dev), stream_(stream) {}
  RunBuffers(const RunBuffers&) = delete;
  RunBuffers& operator=(const RunBuffers&) = delete;
  ~RunBuffers() {
    try {
      if (!finished_) api_->StreamSync(dev_, stream_);
      for (void* p : held_) api_->FreeWorkspace(dev_, p);
    } catch (...) {
      // A device that fails here has failed the run already; what it holds stays with it.
    }
  }

  void* Take(size_t bytes) {
    // Room first, so that a workspace taken is always given back; doubling keeps a run's
    // takes linear in its buffers.
    if (held_.size() == held_.capacity()) held_.reserve(std::max<size_t>(8, 2 * held_.capacity()));
    void* p = api_->AllocWorkspace(dev_, static_cast<int64_t>(bytes));
    held_.push_back(p);
    return p;
  }
  // The run's last step: waits for everything it enqueued (errors of the device's work are
  // thrown here).
  void Finish() {
    api_->StreamSync(dev_, stream_);
    finished_ = true;
  }

 private:
  DeviceAPI* api_;
  Device dev_;
  StreamHandle stream_;
  std::vector<void*> held_;
  bool finished_ = false;
};

}  // namespace

DeviceCode::~DeviceCode() {
  for (void* m : modules) {
    try {
      api->UnloadModule(dev, m);
    } catch (...) {  // the device is gone or failed: nothing more to give back
    }
  }
  for (void* p : constant_data) {
    try {
      api->FreeDataSpace(dev, p);
    } catch (...) {
    }
  }
}

std::shared_ptr<const DeviceCode> MakeDeviceCode(const ExecutableCode& code, DeviceAPI* api,
                                                 Device dev) {
  auto dc = std::make_shared<DeviceCode>();
  dc->api = api;
  dc->dev = dev;
  dc->constant_data.reserve(code.constants.size());
  for (const Tensor& t : code.constants) {
    const int64_t n = static_cast<int64_t>(t.nbytes());
    dc->constant_data.push_back(api->AllocDataSpace(dev, n));
    // On the default stream: finished when the call returns, and before any run's launch.
    api->CopyDataFromTo(t.raw_data(), 0, dc->constant_data.back(), 0, n, kHost, dev, nullptr);
  }
  // A module is loaded once however many launches use it (a group compiled once, called twice).
  std::map<const CompiledModule*, void*> loaded;
  for (const KernelLaunch& k : code.launches) {
    if (!k.entry->on_device())
      Throw(ErrorCode::kInternal, "kernel '", k.name, "' is a CPU function; ", dev,
            " runs device functions only");
    const CompiledModule* m = k.kernel->module.get();
    auto [it, fresh] = loaded.emplace(m, nullptr);
    if (fresh) {
      dc->modules.reserve(dc->modules.size() + 1);
      try {
        it->second = api->LoadModule(dev, m->object(), m->source());
      } catch (const Error& e) {
        Throw(e.code(), "kernel '", k.name, "': ", e.what());
      }
      dc->modules.push_back(it->second);
    }
    std::vector<void*>& handles = dc->kernels.emplace_back();
    for (const DeviceLaunch& l : k.entry->launches)
      handles.push_back(api->GetKernel(dev, it->second, l.kernel));
  }
  return dc;
}

void DispatchOnDevice(const Executable& exe, const Tensor* inputs, const Tensor* outputs,
                      const std::atomic<bool>* cancel) {
  const DeviceCode& dc = *exe.code->device;
  DeviceAPI* api = dc.api;
  const Device dev = dc.dev;
  const StreamHandle stream = api->GetCurrentStream(dev);
  RunBuffers buffers(api, dev, stream);

  std::vector<void*> in(exe.inputs.size()), out(exe.outputs.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t n = inputs[i].nbytes();
    in[i] = buffers.Take(n);
    api->CopyDataFromTo(inputs[i].raw_data(), 0, in[i], 0, static_cast<int64_t>(n), kHost, dev,
                        stream);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = buffers.Take(outputs[i].nbytes());
  std::byte* arena =
      exe.plan.peak_bytes ? static_cast<std::byte*>(buffers.Take(exe.plan.peak_bytes)) : nullptr;
  auto resolve = [&](const BufferRef& r) -> void* {
    switch (r.kind) {
      case BufferRef::Kind::kInput:
        return in[r.index];
      case BufferRef::Kind::kOutput:
        return out[r.index];
      case BufferRef::Kind::kConstant:
        return dc.constant_data[r.index];
      case BufferRef::Kind::kArena:
        return arena + r.offset;
    }
    return nullptr;
  };

  // A launch's parameters (jit/kernel.h DeviceLaunch): the buffers, the scratch, the scalars;
  // `args` holds the address of each, as the device takes them.
  std::vector<void*> pointers, args;
  std::vector<int64_t> scalars;
  const std::vector<KernelLaunch>& launches = exe.launches();
  for (size_t li = 0; li < launches.size(); ++li) {
    const KernelLaunch& k = launches[li];
    if (cancel && cancel->load(std::memory_order_relaxed))
      Throw(ErrorCode::kCancelled, exe.shape_key, ": run cancelled after ", li, " of ",
            launches.size(), " kernels");
    const KernelEntry& entry = *k.entry;
    const int64_t* first_scalar = exe.scalars.data() + k.first_scalar;
    const DeviceCallShape shape = ShapeDeviceCall(entry, first_scalar);
    pointers.clear();
    for (uint32_t i = 0; i < k.num_buffers; ++i)
      pointers.push_back(resolve(exe.buffer_refs[k.first_buffer + i]));
    for (size_t bytes : shape.scratch_bytes) pointers.push_back(buffers.Take(bytes));
    scalars.assign(first_scalar, first_scalar + k.num_scalars);
    args.clear();
    for (void*& p : pointers) args.push_back(&p);
    for (int64_t& s : scalars) args.push_back(&s);

    auto t0 = std::chrono::steady_clock::now();
    for (size_t j = 0; j < entry.launches.size(); ++j)
      api->LaunchKernel(dev, dc.kernels[li][j], shape.grids[j], entry.launches[j].block_threads,
                        args.data(), stream);
    if (k.profile) {  // EngineOptions::profile: the kernel's time on the device, waited for
      api->StreamSync(dev, stream);
      k.profile->Record(t0);
    }
  }
  for (const OutputCopy& c : exe.copies)
    api->CopyDataFromTo(resolve(c.from), 0, out[c.output], 0, static_cast<int64_t>(c.nbytes), dev,
                        dev, stream);
  for (size_t i = 0; i < out.size(); ++i)
    api->CopyDataFromTo(out[i], 0, outputs[i].raw_data(), 0,
                        static_cast<int64_t>(outputs[i].nbytes()), dev, kHost, stream);
  buffers.Finish();
}

}  // namespace kiln
