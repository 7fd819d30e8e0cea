// A CUDA device emulated on the host, for the engine's device dispatch without a GPU
// (EngineOptions::device_api): cuda(0) whose memory is host memory, whose modules are the
// generated CUDA C compiled by the host compiler (cuda_host_emulation.h), and whose launches
// run every thread of the grid one after another, at once (a stream's work is done when it is
// enqueued, which is one order a real stream may take). It counts what the engine asks of it,
// so tests can check that constants are uploaded once, modules loaded once, every launch goes
// to the caller's current stream, and everything taken is given back.
//
// Threading: every method may be called from any thread (one lock).
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/cuda_host_emulation.h"
#include "devices/device_api.h"
#include "ir/error.h"

namespace kiln::test {

class HostCudaDevice final : public DeviceAPI {
 public:
  static constexpr Device kDevice{DeviceType::kCUDA, 0};

  ~HostCudaDevice() override {
    for (auto& [handle, m] : modules_) dlclose(handle);
  }

  DeviceAttrValue GetAttr(Device dev, DeviceAttr attr) override {
    const bool exists = dev == kDevice;
    if (attr == DeviceAttr::kExists) return int64_t{exists};
    if (!exists) return {};
    switch (attr) {
      case DeviceAttr::kName:
        return std::string("host emulation of a CUDA device");
      case DeviceAttr::kComputeCapability:
        return compute_capability;
      case DeviceAttr::kWarpSize:
        return int64_t{32};
      case DeviceAttr::kMaxThreadsPerBlock:
        return int64_t{1024};
      default:
        return {};
    }
  }
  void SetDevice(Device dev) override { Check(dev, "SetDevice"); }

  void FreeDataSpace(Device dev, void* ptr) override {
    Check(dev, "FreeDataSpace");
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_.erase(ptr))
      Throw(ErrorCode::kInvalidArgument, "FreeDataSpace on ", dev, ": not handed out here");
    std::free(ptr);
  }
  void FreeWorkspace(Device dev, void* ptr) override {
    FreeDataSpace(dev, ptr);
    std::lock_guard<std::mutex> lock(mu_);
    ++workspaces_freed;
  }

  StreamHandle CreateStream(Device dev) override {
    Check(dev, "CreateStream");
    std::lock_guard<std::mutex> lock(mu_);
    auto* s = new int(0);
    streams_.insert(s);
    return s;
  }
  void FreeStream(Device dev, StreamHandle stream) override {
    Check(dev, "FreeStream");
    std::lock_guard<std::mutex> lock(mu_);
    if (!stream || !streams_.erase(stream))
      Throw(ErrorCode::kInvalidArgument, "FreeStream on ", dev, ": not a stream of it");
    delete static_cast<int*>(stream);
  }
  void StreamSync(Device dev, StreamHandle stream) override {
    CheckStream(dev, stream, "StreamSync");
    std::lock_guard<std::mutex> lock(mu_);
    ++syncs;
  }
  void SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) override {
    CheckStream(dev, from, "SyncStreamFromTo");
    CheckStream(dev, to, "SyncStreamFromTo");
  }

  void* LoadModule(Device dev, const std::string& image, const std::string& source) override {
    Check(dev, "LoadModule");
    if (image.find(".entry") == std::string::npos)  // what the engine got from NVRTC
      Throw(ErrorCode::kCompileError, "LoadModule on ", dev, ": the image is not PTX");
    void* handle = LoadCudaOnHost(source, "a module");
    std::lock_guard<std::mutex> lock(mu_);
    modules_[handle];
    ++modules_loaded;
    return handle;
  }
  void UnloadModule(Device dev, void* module) override {
    Check(dev, "UnloadModule");
    std::lock_guard<std::mutex> lock(mu_);
    if (!modules_.erase(module))
      Throw(ErrorCode::kInvalidArgument, "UnloadModule on ", dev, ": not a module of it");
    dlclose(module);
    ++modules_unloaded;
  }
  void* GetKernel(Device dev, void* module, const std::string& name) override {
    Check(dev, "GetKernel");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = modules_.find(module);
    if (it == modules_.end())
      Throw(ErrorCode::kInvalidArgument, "GetKernel on ", dev, ": not a module of it");
    Kernel k;
    k.launch = reinterpret_cast<Kernel::Launch>(dlsym(module, (name + "_host_launch").c_str()));
    k.set_thread = reinterpret_cast<Kernel::SetThread>(dlsym(module, "kiln_set_thread"));
    if (!k.launch || !k.set_thread)
      Throw(ErrorCode::kNotFound, "no kernel '", name, "' in the module on ", dev);
    auto& kernels = it->second;
    kernels.push_back(std::make_unique<Kernel>(k));
    return kernels.back().get();
  }
  void LaunchKernel(Device dev, void* kernel, unsigned grid, unsigned block, void** args,
                    StreamHandle stream) override {
    CheckStream(dev, stream, "LaunchKernel");
    if (grid == 0 || block == 0)
      Throw(ErrorCode::kInvalidArgument, "LaunchKernel on ", dev, ": a grid of ", grid,
            " blocks of ", block, " threads");
    const Kernel& k = *static_cast<const Kernel*>(kernel);
    std::lock_guard<std::mutex> lock(mu_);  // a module's thread indices are its globals
    for (unsigned b = 0; b < grid; ++b)
      for (unsigned t = 0; t < block; ++t) {
        k.set_thread(b, t, grid, block);
        k.launch(args);
      }
    ++launches[stream];
  }

  // What the device reports as its compute capability.
  std::string compute_capability = "9.0";
  // Counters, read by tests once the engine is idle.
  int modules_loaded = 0, modules_unloaded = 0, workspaces_freed = 0, syncs = 0;
  std::map<StreamHandle, int> launches;  // per stream (nullptr: the default stream)
  size_t live_allocations() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }

 protected:
  void* DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                         std::optional<DType>) override {
    Check(dev, "AllocDataSpace");
    const size_t align = static_cast<size_t>(std::max<int64_t>(alignment, 64));
    const size_t size = (static_cast<size_t>(nbytes) + align - 1) / align * align + align;
    void* p = std::aligned_alloc(align, size);
    if (!p) Throw(ErrorCode::kOutOfMemory, "AllocDataSpace on ", dev, ": ", nbytes, " bytes");
    std::memset(p, 0xA5, size);  // never zero: a kernel that reads before writing shows
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(p);
    return p;
  }
  void DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                        int64_t nbytes, Device src_dev, Device dst_dev,
                        StreamHandle stream) override {
    CheckStream(src_dev.type == DeviceType::kCUDA ? src_dev : dst_dev, stream, "CopyDataFromTo");
    if (nbytes)
      std::memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
                  static_cast<size_t>(nbytes));
  }

 private:
  struct Kernel {
    using Launch = void (*)(void* const*);
    using SetThread = void (*)(unsigned, unsigned, unsigned, unsigned);
    Launch launch = nullptr;
    SetThread set_thread = nullptr;
  };

  void Check(Device dev, const char* call) const {
    if (dev != kDevice) Throw(ErrorCode::kInvalidArgument, call, ": there is no ", dev);
  }
  void CheckStream(Device dev, StreamHandle stream, const char* call) {
    Check(dev, call);
    std::lock_guard<std::mutex> lock(mu_);
    if (stream && !streams_.count(stream))
      Throw(ErrorCode::kInvalidArgument, call, " on ", dev, ": not a stream of it");
  }

  std::mutex mu_;
  std::set<void*> live_;
  std::set<StreamHandle> streams_;
  std::map<void*, std::vector<std::unique_ptr<Kernel>>> modules_;  // dlopen handle -> kernels
};

}  // namespace kiln::test
