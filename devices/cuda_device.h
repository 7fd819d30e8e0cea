// The CUDA DeviceAPI ("device_api.cuda", always registered): the CUDA driver API, loaded with
// dlopen("libcuda.so.1") on first use. kiln never links libcuda or includes CUDA headers, so it
// builds and runs where there is no driver; there, GetAttr answers kExists == 0 and every other
// call throws kUnsupported saying why (UnavailableReason()).
//
// Contexts: each device's primary context, retained on first use and kept. Every call on a
// device makes that context current on the calling thread (as cudaSetDevice would).
// Memory: data space comes from cuMemAlloc, which aligns to 256 bytes; a larger alignment is
// honoured by over-allocating. Workspaces come from a per-device pool of size classes.
// Streams: a StreamHandle is the CUstream itself, so code generators can launch on it directly.
// Created streams are non-blocking: like the CPU's, they are ordered with each other and with
// the default stream only by SyncStreamFromTo. The default stream (nullptr) is the legacy
// stream; a copy on it has finished when CopyDataFromTo returns.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "devices/device_api.h"

namespace kiln {

class CUDADeviceAPI final : public DeviceAPI {
 public:
  CUDADeviceAPI();
  // Frees the streams and memory still held and releases the primary contexts this instance
  // retained. The registered instance is never destroyed; this is for instances a test makes.
  ~CUDADeviceAPI() override;

  // Why CUDA cannot be used here ("libcuda.so.1 not found: ...", "cuInit failed: ..."), or ""
  // when the driver loaded and initialized. Loads the driver on the first call; never throws.
  static std::string UnavailableReason();

  DeviceAttrValue GetAttr(Device dev, DeviceAttr attr) override;
  void SetDevice(Device dev) override;
  // nullptr is ignored; a pointer AllocDataSpace did not hand out for `dev` is kInvalidArgument.
  void FreeDataSpace(Device dev, void* ptr) override;
  // nullptr is ignored; a pointer AllocWorkspace did not hand out for `dev` is kInvalidArgument.
  void FreeWorkspace(Device dev, void* ptr) override;
  StreamHandle CreateStream(Device dev) override;
  void FreeStream(Device dev, StreamHandle stream) override;
  void SetStream(Device dev, StreamHandle stream) override;
  void StreamSync(Device dev, StreamHandle stream) override;
  // Records an event on `from` and makes `to` wait for it on the device; never blocks the host.
  // Either may be the default stream; `from` == `to` is a no-op.
  void SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) override;

  // Kernels (DeviceAPI's). LoadModule gives the PTX `image` to the driver, which compiles it
  // for the device (a failure is kCompileError with the driver's log; `source` is not used) and
  // returns the module (a CUmodule). LaunchKernel is asynchronous, like a copy on the stream.
  void* LoadModule(Device dev, const std::string& image, const std::string& source) override;
  void UnloadModule(Device dev, void* module) override;
  void* GetKernel(Device dev, void* module, const std::string& name) override;
  void LaunchKernel(Device dev, void* kernel, unsigned grid, unsigned block, void** args,
                    StreamHandle stream) override;

  // Bytes the workspace pools of all devices hold for reuse; for tests and stats.
  int64_t PooledWorkspaceBytes() const;
  // Gives the pooled workspaces back to the driver; the ones in use are not affected.
  void TrimWorkspacePool();

 protected:
  void* DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                         std::optional<DType> type_hint) override;
  void* DoAllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint) override;
  // One side may be the host (cpu(0)); the copy runs on `stream` of the CUDA side (of dst_dev
  // for a copy between two CUDA devices).
  void DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                        int64_t nbytes, Device src_dev, Device dst_dev,
                        StreamHandle stream) override;

 private:
  // Checks `dev` (kind, driver, ordinal) and makes its primary context current; returns it.
  void* Activate(Device dev);
  // The primary context of a checked device id, retained on first use.
  void* PrimaryContext(int id);
  // Throws kInvalidArgument unless `stream` is nullptr or a live stream of device `id`.
  void CheckStream(int id, StreamHandle stream, const char* use) const;
  // cuMemAlloc of `nbytes` on the active device; kOutOfMemory naming `what` when full.
  uint64_t DriverAlloc(Device dev, int64_t nbytes, int64_t alignment, const char* what);
  void TrimWorkspacePoolLocked(int id);

  // Retained primary contexts, by device id (null until first use).
  std::mutex contexts_mu_;
  std::vector<void*> contexts_;

  // Live streams -> the device id they belong to. A driver may reuse a freed handle's address
  // for a later stream, so a stale handle is caught only until then.
  mutable std::mutex streams_mu_;
  std::unordered_map<StreamHandle, int> streams_;

  // Live data space: the pointer handed out -> what cuMemAlloc returned (lower when the
  // alignment asked for more than 256) and the device id.
  struct Allocation {
    uint64_t base;
    int device;
  };
  std::mutex data_mu_;
  std::unordered_map<void*, Allocation> data_;

  // The workspace pools: (device id, size class) -> freed buffers, and handed-out buffer ->
  // (device id, size class). Every pooled buffer is in exactly one of the two.
  struct WorkspaceKey {
    int device;
    int64_t size_class;
    bool operator==(const WorkspaceKey&) const = default;
  };
  struct WorkspaceKeyHash {
    size_t operator()(const WorkspaceKey& k) const {
      return std::hash<int64_t>()(k.size_class) * 31 + static_cast<size_t>(k.device);
    }
  };
  mutable std::mutex workspace_mu_;
  std::unordered_map<WorkspaceKey, std::vector<void*>, WorkspaceKeyHash> free_workspaces_;
  std::unordered_map<void*, WorkspaceKey> used_workspaces_;
  int64_t pooled_bytes_ = 0;
};

}  // namespace kiln
