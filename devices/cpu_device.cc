#include "devices/cpu_device.h"

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <thread>
#include <utility>

#include "ir/error.h"
#include "ir/tensor.h"

namespace kiln {

namespace {

constexpr Device kCPU0{DeviceType::kCPU, 0};

bool IsCPU0(Device dev) {
  return dev == kCPU0;
}

void CheckDevice(Device dev) {
  if (dev.type != DeviceType::kCPU)
    Throw(ErrorCode::kInvalidArgument, "the cpu device API cannot use ", dev);
  if (dev.id != 0)
    Throw(ErrorCode::kInvalidArgument, "no device ", dev, ": the only CPU device is cpu(0)");
}

// `nbytes` (0 allowed) aligned to `alignment` (a power of two >= kAllocAlignment); null when
// the system has no room.
void* AlignedAlloc(int64_t nbytes, int64_t alignment) {
  // Linux overcommits: a request beyond physical memory might "succeed" and fail on first
  // touch, and sanitizers abort on huge requests instead of returning null. Refuse it here.
  int64_t total = PhysicalMemoryBytes();
  if ((total > 0 && nbytes > total) || nbytes > std::numeric_limits<int64_t>::max() - alignment)
    return nullptr;
  void* p = nullptr;
  // At least one byte, so size 0 gives a distinct pointer that free() accepts.
  if (posix_memalign(&p, static_cast<size_t>(alignment),
                     static_cast<size_t>(std::max<int64_t>(nbytes, 1))) != 0)
    return nullptr;
  return p;
}

[[noreturn]] void ThrowOutOfMemory(const char* what, int64_t nbytes, int64_t alignment) {
  Throw(ErrorCode::kOutOfMemory, "out of memory: cannot allocate ", what, " of ", nbytes,
        " bytes (alignment ", alignment, ") on cpu(0), which has ", PhysicalMemoryBytes(),
        " bytes in all");
}

// Workspace size classes: four per power of two, multiples of kAllocAlignment, so a pooled
// buffer is at most 25% larger than the request it serves (beyond the 64-byte minimum).
int64_t WorkspaceSizeClass(int64_t nbytes) {
  if (nbytes <= kAllocAlignment) return kAllocAlignment;
  // 2^log2 < nbytes <= 2^(log2 + 1)
  int log2 = 63 - std::countl_zero(static_cast<uint64_t>(nbytes - 1));
  int64_t step = int64_t{1} << std::max(log2 - 2, 6);
  return (nbytes + step - 1) / step * step;
}

uintptr_t StreamId(StreamHandle stream) {
  return reinterpret_cast<uintptr_t>(stream);
}

// A one-shot flag that a stream sets and another stream (or the host) waits for: the CPU's
// event, recorded by SyncStreamFromTo.
class Event {
 public:
  void Signal() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

// An ordered task queue with its own worker thread. Tasks are numbered as they are enqueued;
// Sync waits for the number that was last when it was called, so work that other threads
// enqueue meanwhile does not keep it waiting.
class CPUDeviceAPI::Stream {
 public:
  explicit Stream(uintptr_t id) : id_(id), worker_([this] { Run(); }) {}
  // Normally Close() has run; if not, close here, since a joinable worker would terminate the
  // process. There is nobody to report an error to at this point.
  ~Stream() {
    try {
      Close();
    } catch (...) {
    }
  }

  void Enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_)
        Throw(ErrorCode::kInvalidArgument, "stream #", id_, " on cpu(0) is being freed");
      queue_.push_back(std::move(task));
      ++enqueued_;
    }
    work_cv_.notify_one();
  }

  // Waits for the tasks enqueued so far; then throws the first error since the last Sync.
  void Sync() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t target = enqueued_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  // Lets the queue drain, stops the worker and joins it. Idempotent; tasks may no longer be
  // enqueued afterwards. Throws like Sync.
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    work_cv_.notify_one();
    if (worker_.joinable()) worker_.join();
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;  // closing, and drained
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      task = nullptr;  // destroy what the task captured before it counts as done
      lock.lock();
      if (error && !error_) error_ = error;
      ++completed_;
      done_cv_.notify_all();
    }
  }

  const uintptr_t id_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits here for tasks
  std::condition_variable done_cv_;  // Sync waits here for completions
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool closing_ = false;
  std::exception_ptr error_;  // the first error since the last Sync
  std::thread worker_;        // last: starts after every other member is constructed
};

CPUDeviceAPI::CPUDeviceAPI() = default;

CPUDeviceAPI::~CPUDeviceAPI() {
  for (auto& [id, stream] : streams_) {
    try {
      stream->Close();
    } catch (...) {
      // Nobody is left to report a stream's error to.
    }
  }
  for (void* p : data_) std::free(p);
  for (auto& [p, size_class] : used_workspaces_) std::free(p);
  TrimWorkspacePool();
}

DeviceAttrValue CPUDeviceAPI::GetAttr(Device dev, DeviceAttr attr) {
  if (!IsCPU0(dev))
    return attr == DeviceAttr::kExists ? DeviceAttrValue(int64_t{0}) : DeviceAttrValue();
  switch (attr) {
    case DeviceAttr::kExists:
      return int64_t{1};
    case DeviceAttr::kName:
      return std::string("cpu");
    case DeviceAttr::kTotalMemory: {
      int64_t total = PhysicalMemoryBytes();
      return total > 0 ? DeviceAttrValue(total) : DeviceAttrValue();
    }
    case DeviceAttr::kThreadCount: {
      unsigned n = std::thread::hardware_concurrency();
      return n > 0 ? DeviceAttrValue(int64_t{n}) : DeviceAttrValue();
    }
    // Free memory is none: the system's count of free pages leaves out reclaimable caches, so
    // it would mislead a memory planner more than no answer.
    case DeviceAttr::kFreeMemory:
    // The GPU notions (warps, blocks, shared memory, SMs, a driver) do not apply.
    case DeviceAttr::kWarpSize:
    case DeviceAttr::kComputeCapability:
    case DeviceAttr::kMaxThreadsPerBlock:
    case DeviceAttr::kSharedMemoryPerBlock:
    case DeviceAttr::kMultiProcessorCount:
    case DeviceAttr::kDriverVersion:
      return DeviceAttrValue();
  }
  return DeviceAttrValue();
}

void CPUDeviceAPI::SetDevice(Device dev) {
  CheckDevice(dev);
}

void* CPUDeviceAPI::DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                                     std::optional<DType> /*type_hint*/) {
  CheckDevice(dev);
  alignment = std::max(alignment, kAllocAlignment);
  void* p = AlignedAlloc(nbytes, alignment);
  if (p == nullptr) ThrowOutOfMemory("data space", nbytes, alignment);
  std::lock_guard<std::mutex> lock(data_mu_);
  data_.insert(p);
  return p;
}

void CPUDeviceAPI::FreeDataSpace(Device dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    if (data_.erase(ptr) == 0)
      Throw(ErrorCode::kInvalidArgument, "cannot free ", ptr,
            " as data space of cpu(0): AllocDataSpace did not return it, or it was freed already");
  }
  std::free(ptr);
}

void* CPUDeviceAPI::DoAllocWorkspace(Device dev, int64_t nbytes,
                                     std::optional<DType> /*type_hint*/) {
  CheckDevice(dev);
  int64_t size_class = WorkspaceSizeClass(nbytes);
  {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    auto it = free_workspaces_.find(size_class);
    if (it != free_workspaces_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      pooled_bytes_ -= size_class;
      used_workspaces_[p] = size_class;
      return p;
    }
  }
  // Allocate outside the lock: a large allocation takes a while.
  void* p = AlignedAlloc(size_class, kAllocAlignment);
  if (p == nullptr) ThrowOutOfMemory("a workspace", nbytes, kAllocAlignment);
  std::lock_guard<std::mutex> lock(workspace_mu_);
  used_workspaces_[p] = size_class;
  return p;
}

void CPUDeviceAPI::FreeWorkspace(Device dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(workspace_mu_);
  auto it = used_workspaces_.find(ptr);
  if (it == used_workspaces_.end())
    Throw(ErrorCode::kInvalidArgument, "cannot free ", ptr,
          " as a workspace of cpu(0): AllocWorkspace did not return it, or it was freed already");
  free_workspaces_[it->second].push_back(ptr);
  pooled_bytes_ += it->second;
  used_workspaces_.erase(it);
}

int64_t CPUDeviceAPI::PooledWorkspaceBytes() const {
  std::lock_guard<std::mutex> lock(workspace_mu_);
  return pooled_bytes_;
}

void CPUDeviceAPI::TrimWorkspacePool() {
  std::lock_guard<std::mutex> lock(workspace_mu_);
  for (auto& [size_class, buffers] : free_workspaces_)
    for (void* p : buffers) std::free(p);
  free_workspaces_.clear();
  pooled_bytes_ = 0;
}

void CPUDeviceAPI::DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst,
                                    int64_t dst_offset, int64_t nbytes, Device src_dev,
                                    Device dst_dev, StreamHandle stream) {
  CheckDevice(src_dev);
  CheckDevice(dst_dev);
  if (nbytes == 0) return;
  const char* from = static_cast<const char*>(src) + src_offset;
  char* to = static_cast<char*>(dst) + dst_offset;
  // memmove: a copy within one buffer may overlap itself.
  if (stream == nullptr) {
    std::memmove(to, from, static_cast<size_t>(nbytes));
    return;
  }
  FindStream(stream)->Enqueue(
      [from, to, nbytes] { std::memmove(to, from, static_cast<size_t>(nbytes)); });
}

std::shared_ptr<CPUDeviceAPI::Stream> CPUDeviceAPI::FindStream(StreamHandle stream) const {
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(StreamId(stream));
  if (it == streams_.end())
    Throw(ErrorCode::kInvalidArgument, "unknown stream #", StreamId(stream),
          " on cpu(0): it was never created by this device API, or it was freed already");
  return it->second;
}

StreamHandle CPUDeviceAPI::CreateStream(Device dev) {
  CheckDevice(dev);
  std::lock_guard<std::mutex> lock(streams_mu_);
  uintptr_t id = next_stream_id_++;
  streams_.emplace(id, std::make_shared<Stream>(id));
  return reinterpret_cast<StreamHandle>(id);
}

void CPUDeviceAPI::FreeStream(Device dev, StreamHandle stream) {
  CheckDevice(dev);
  if (stream == nullptr)
    Throw(ErrorCode::kInvalidArgument, "cannot free the default stream of cpu(0)");
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    auto it = streams_.find(StreamId(stream));
    if (it == streams_.end())
      Throw(ErrorCode::kInvalidArgument, "cannot free unknown stream #", StreamId(stream),
            " on cpu(0): it was never created by this device API, or it was freed already");
    s = std::move(it->second);
    streams_.erase(it);
  }
  s->Close();
}

void CPUDeviceAPI::SetStream(Device dev, StreamHandle stream) {
  CheckDevice(dev);
  if (stream != nullptr) FindStream(stream);
  DeviceAPI::SetStream(dev, stream);
}

void CPUDeviceAPI::StreamSync(Device dev, StreamHandle stream) {
  CheckDevice(dev);
  if (stream == nullptr) return;  // the default stream has run everything already
  FindStream(stream)->Sync();
}

void CPUDeviceAPI::SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) {
  CheckDevice(dev);
  if (from == nullptr || from == to) {
    if (to != nullptr) FindStream(to);  // still an error to name an unknown stream
    return;
  }
  std::shared_ptr<Stream> source = FindStream(from);
  std::shared_ptr<Stream> target = to == nullptr ? nullptr : FindStream(to);
  auto event = std::make_shared<Event>();
  source->Enqueue([event] { event->Signal(); });
  if (target == nullptr)
    event->Wait();
  else
    target->Enqueue([event] { event->Wait(); });
}

void CPUDeviceAPI::EnqueueOnStream(Device dev, StreamHandle stream, std::function<void()> task) {
  CheckDevice(dev);
  if (stream == nullptr) {
    task();
    return;
  }
  FindStream(stream)->Enqueue(std::move(task));
}

CPUDeviceAPI& GetCPUDeviceAPI() {
  static CPUDeviceAPI* cpu = [] {
    auto* api = dynamic_cast<CPUDeviceAPI*>(GetDeviceAPI(DeviceType::kCPU));
    KILN_CHECK(api != nullptr, "device_api.cpu is not the built-in CPUDeviceAPI");
    return api;
  }();
  return *cpu;
}

}  // namespace kiln

KILN_REGISTER_DEVICE_API(cpu, "device_api.cpu",
                         [] { return std::make_unique<kiln::CPUDeviceAPI>(); })
