// The CPU DeviceAPI ("device_api.cpu", always registered). There is one CPU device, cpu(0).
//
// Memory: data space comes from the system allocator, aligned to at least kAllocAlignment;
// workspaces come from a pool of size classes that keeps freed buffers for reuse.
// Streams: each created stream owns one worker thread that runs the stream's work in order, so
// work on different streams overlaps. The default stream (nullptr) runs work inline, on the
// calling thread, before the call returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "devices/device_api.h"

namespace kiln {

class CPUDeviceAPI final : public DeviceAPI {
 public:
  CPUDeviceAPI();
  // Drains and joins the streams still open and frees the memory still held. The registered
  // instance is never destroyed; this is for instances a test makes on its own.
  ~CPUDeviceAPI() override;

  DeviceAttrValue GetAttr(Device dev, DeviceAttr attr) override;
  void SetDevice(Device dev) override;
  // nullptr is ignored; a pointer AllocDataSpace did not hand out is kInvalidArgument.
  void FreeDataSpace(Device dev, void* ptr) override;
  // nullptr is ignored; a pointer AllocWorkspace did not hand out is kInvalidArgument.
  void FreeWorkspace(Device dev, void* ptr) override;
  StreamHandle CreateStream(Device dev) override;
  // Waits for the stream's work, stops its thread and frees it; then rethrows an error its work
  // raised since the last StreamSync, if any (the stream is freed either way).
  void FreeStream(Device dev, StreamHandle stream) override;
  void SetStream(Device dev, StreamHandle stream) override;
  void StreamSync(Device dev, StreamHandle stream) override;
  // `to` == nullptr (the default stream, which runs inline) blocks the caller until `from` has
  // run what was enqueued so far; `from` == nullptr has nothing pending, so it is a no-op.
  void SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) override;

  // Runs `task` on `stream` after everything enqueued there before it: how the engine launches
  // CPU kernels. On the default stream it runs now and its exception propagates; on a created
  // stream an exception is kept and thrown by the next StreamSync (or FreeStream), and the
  // tasks after it still run. The task must not wait for work enqueued on the same stream
  // after it.
  void EnqueueOnStream(Device dev, StreamHandle stream, std::function<void()> task);

  // Bytes the workspace pool holds for reuse (freed, not handed out); for tests and stats.
  int64_t PooledWorkspaceBytes() const;
  // Gives the pooled workspaces back to the system; the ones in use are not affected.
  void TrimWorkspacePool();

 protected:
  void* DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                         std::optional<DType> type_hint) override;
  void* DoAllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint) override;
  void DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                        int64_t nbytes, Device src_dev, Device dst_dev,
                        StreamHandle stream) override;

 private:
  class Stream;
  // The stream behind a non-null handle; kInvalidArgument naming the handle if it is unknown.
  // Shared, so a stream freed by another thread meanwhile stays valid for this call.
  std::shared_ptr<Stream> FindStream(StreamHandle stream) const;

  // Handles are ids, never addresses, so a freed handle is never reused by a later stream and
  // freeing it twice is always caught.
  mutable std::mutex streams_mu_;
  std::unordered_map<uintptr_t, std::shared_ptr<Stream>> streams_;
  uintptr_t next_stream_id_ = 1;

  // Live data space, so a foreign or double free is an error, not heap corruption.
  std::mutex data_mu_;
  std::unordered_set<void*> data_;

  // The workspace pool: size class -> freed buffers of that class, and handed-out buffer ->
  // its size class. Every buffer is in exactly one of the two.
  mutable std::mutex workspace_mu_;
  std::unordered_map<int64_t, std::vector<void*>> free_workspaces_;
  std::unordered_map<void*, int64_t> used_workspaces_;
  int64_t pooled_bytes_ = 0;
};

// The registered CPU device API.
CPUDeviceAPI& GetCPUDeviceAPI();

}  // namespace kiln
