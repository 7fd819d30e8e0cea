#include "devices/cuda_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>

#include "ir/error.h"

namespace kiln {

namespace {

// The slice of the CUDA driver API used here, declared by hand so kiln needs no CUDA headers to
// build. Types, values and signatures are checked against /usr/local/cuda/include/cuda.h of
// CUDA 13.0 (CUDA_VERSION 13000); they have been stable since CUDA 4 (the _v2 entry points)
// and are part of the driver's ABI.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2
using CUcontext = void*;                 // struct CUctx_st*
using CUstream = void*;                  // struct CUstream_st*; nullptr is the legacy stream
using CUevent = void*;                   // struct CUevent_st*
using CUmodule = void*;                  // struct CUmod_st*
using CUfunction = void*;                // struct CUfunc_st*
using CUjit_option = int;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;

// CUdevice_attribute.
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;   // CUstream_flags
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;  // CUevent_flags

// What cuMemAlloc guarantees (CUDA C Programming Guide: "at least 256-byte aligned").
constexpr int64_t kDriverAlignment = 256;

// The entry points, once: X(field, exported symbol, signature). The symbols are the versioned
// names cuda.h maps the plain names to (cuMemAlloc -> cuMemAlloc_v2, ...), without the _ptsz
// per-thread-stream variants, so nullptr means the legacy default stream.
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                              \
  X(cuGetErrorName, "cuGetErrorName", CUresult (*)(CUresult, const char**))                        \
  X(cuGetErrorString, "cuGetErrorString", CUresult (*)(CUresult, const char**))                    \
  X(cuInit, "cuInit", CUresult (*)(unsigned))                                                      \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult (*)(int*))                                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult (*)(int*))                                      \
  X(cuDeviceGet, "cuDeviceGet", CUresult (*)(CUdevice*, int))                                      \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult (*)(char*, int, CUdevice))                        \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult (*)(size_t*, CUdevice))                      \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult (*)(int*, int, CUdevice))               \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult (*)(CUcontext*, CUdevice))      \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult (*)(CUdevice))             \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult (*)(CUcontext*))                                  \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult (*)(CUcontext))                                   \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult (*)(size_t*, size_t*))                               \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult (*)(CUdeviceptr*, size_t))                               \
  X(cuMemFree, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                                          \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                     \
    CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))                                      \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult (*)(void*, CUdeviceptr, size_t, CUstream)) \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                     \
    CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                                      \
  X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync",                                                        \
    CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))                \
  X(cuStreamCreate, "cuStreamCreate", CUresult (*)(CUstream*, unsigned))                           \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult (*)(CUstream))                                 \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult (*)(CUstream))                            \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult (*)(CUstream, CUevent, unsigned))             \
  X(cuEventCreate, "cuEventCreate", CUresult (*)(CUevent*, unsigned))                              \
  X(cuEventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))                               \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))                                    \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                                      \
    CUresult (*)(CUmodule*, const void*, unsigned, CUjit_option*, void**))                         \
  X(cuModuleUnload, "cuModuleUnload", CUresult (*)(CUmodule))                                      \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult (*)(CUfunction*, CUmodule, const char*))  \
  X(cuLaunchKernel, "cuLaunchKernel",                                                              \
    CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
                 CUstream, void**, void**))

// One entry point and the symbol it was loaded from, for error messages.
template <typename Fn>
struct Entry {
  Fn fn = nullptr;
  const char* symbol = "";
};

// The loaded driver. Made once, on first use, and never unloaded: a DeviceAPI lives until the
// process exits, and unloading libcuda under live contexts is not safe.
struct Driver {
#define KILN_X(field, symbol, type) Entry<type> field;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_X)
#undef KILN_X
  std::string unavailable;  // why CUDA cannot be used; "" when it can
  int device_count = 0;
};

// Names and descriptions of the results a driver that cannot describe them (the toolkit's stub
// libcuda answers CUDA_ERROR_STUB_LIBRARY to cuGetErrorName too) most likely gives at start-up.
struct KnownResult {
  const char* name;
  const char* text;
};
KnownResult Known(CUresult r) {
  switch (r) {
    case CUDA_ERROR_STUB_LIBRARY:
      return {"CUDA_ERROR_STUB_LIBRARY", "the CUDA toolkit's stub libcuda is loaded, not a driver"};
    case CUDA_ERROR_NO_DEVICE:
      return {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"};
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
              "the kernel driver and libcuda differ in version"};
    default:
      return {"CUresult", "unknown error"};
  }
}

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
std::string Describe(const Driver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName.fn == nullptr || d.cuGetErrorName.fn(r, &name) != CUDA_SUCCESS)
    name = Known(r).name;
  if (d.cuGetErrorString.fn == nullptr || d.cuGetErrorString.fn(r, &text) != CUDA_SUCCESS)
    text = Known(r).text;
  return StrCat(name ? name : Known(r).name, " (", r, "): ", text ? text : Known(r).text);
}

const Driver* LoadDriver() {
  auto* d = new Driver();
  dlerror();  // clear a stale error
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    d->unavailable = StrCat("libcuda.so.1 not found: ", why ? why : "dlopen failed");
    return d;
  }
#define KILN_X(field, sym, type)                                                               \
  d->field.symbol = sym;                                                                       \
  d->field.fn = reinterpret_cast<type>(dlsym(lib, sym));                                       \
  if (d->field.fn == nullptr) {                                                                \
    d->unavailable = StrCat("libcuda.so.1 has no ", sym, " (the driver is too old for kiln)"); \
    return d;                                                                                  \
  }
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_X)
#undef KILN_X
  // The toolkit's stub libcuda.so answers CUDA_ERROR_STUB_LIBRARY here; a machine without a
  // GPU but with a driver answers CUDA_ERROR_NO_DEVICE.
  if (CUresult r = d->cuInit.fn(0); r != CUDA_SUCCESS) {
    d->unavailable = StrCat("cuInit failed: ", Describe(*d, r));
    return d;
  }
  if (CUresult r = d->cuDeviceGetCount.fn(&d->device_count); r != CUDA_SUCCESS) {
    d->unavailable = StrCat("cuDeviceGetCount failed: ", Describe(*d, r));
    d->device_count = 0;
    return d;
  }
  if (d->device_count <= 0) {
    d->unavailable = "the CUDA driver reports no devices";
    d->device_count = 0;
  }
  return d;
}

const Driver& GetDriver() {
  static const Driver* driver = LoadDriver();  // thread-safe, once; never freed
  return *driver;
}

ErrorCode ErrorCodeOf(CUresult r) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return ErrorCode::kOutOfMemory;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_HANDLE:
      return ErrorCode::kInvalidArgument;
    case CUDA_ERROR_NOT_SUPPORTED:
      return ErrorCode::kUnsupported;
    default:
      return ErrorCode::kInternal;
  }
}

// Calls a driver entry point; a failure throws an Error naming the call, the device and the
// driver's own words.
template <typename... Params, typename... Args>
void Call(Device dev, const Entry<CUresult (*)(Params...)>& entry, Args&&... args) {
  CUresult r = entry.fn(std::forward<Args>(args)...);
  if (r != CUDA_SUCCESS)
    Throw(ErrorCodeOf(r), entry.symbol, " failed on ", dev, ": ", Describe(GetDriver(), r));
}

// The driver's handle of device `dev`.
CUdevice DeviceHandle(const Driver& d, Device dev) {
  CUdevice cu = 0;
  Call(dev, d.cuDeviceGet, &cu, dev.id);
  return cu;
}

// The driver, after checking that `dev` is one of its devices.
const Driver& CheckDevice(Device dev) {
  if (dev.type != DeviceType::kCUDA)
    Throw(ErrorCode::kInvalidArgument, "the cuda device API cannot use ", dev);
  const Driver& d = GetDriver();
  if (!d.unavailable.empty())
    Throw(ErrorCode::kUnsupported, "cannot use ", dev, ": CUDA is not available (", d.unavailable,
          ")");
  if (dev.id < 0 || dev.id >= d.device_count)
    Throw(ErrorCode::kInvalidArgument, "no device ", dev, ": this machine has ", d.device_count,
          d.device_count == 1 ? " CUDA device" : " CUDA devices");
  return d;
}

bool Exists(Device dev) {
  if (dev.type != DeviceType::kCUDA) return false;
  const Driver& d = GetDriver();
  return d.unavailable.empty() && dev.id >= 0 && dev.id < d.device_count;
}

CUdeviceptr ToDevicePtr(const void* p, int64_t offset) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)) +
         static_cast<CUdeviceptr>(offset);
}

// Workspace size classes: four per power of two, multiples of the driver's 256-byte
// granularity, so a pooled buffer is at most 25% larger than a request over 1 KiB it serves.
int64_t WorkspaceSizeClass(int64_t nbytes) {
  if (nbytes <= kDriverAlignment) return kDriverAlignment;
  int log2 = 63 - std::countl_zero(static_cast<uint64_t>(nbytes - 1));
  int64_t step = int64_t{1} << std::max(log2 - 2, 8);
  return (nbytes + step - 1) / step * step;
}

// "<free> bytes free of <total>", for out-of-memory messages; the context must be current.
std::string MemoryInfo(const Driver& d) {
  size_t free = 0, total = 0;
  if (d.cuMemGetInfo.fn(&free, &total) != CUDA_SUCCESS) return "an unknown amount free";
  return StrCat(free, " bytes free of ", total);
}

[[noreturn]] void ThrowOutOfMemory(Device dev, const char* what, int64_t nbytes,
                                   int64_t alignment) {
  Throw(ErrorCode::kOutOfMemory, "out of memory: cannot allocate ", what, " of ", nbytes,
        " bytes (alignment ", alignment, ") on ", dev, ", which has ", MemoryInfo(GetDriver()));
}

}  // namespace

CUDADeviceAPI::CUDADeviceAPI() = default;

CUDADeviceAPI::~CUDADeviceAPI() {
  const Driver& d = GetDriver();
  if (!d.unavailable.empty()) return;  // nothing can have been handed out
  // Best effort: nobody is left to report an error to.
  auto activate = [&](int id) {
    return id < static_cast<int>(contexts_.size()) && contexts_[id] != nullptr &&
           d.cuCtxSetCurrent.fn(contexts_[id]) == CUDA_SUCCESS;
  };
  for (auto& [stream, id] : streams_) {
    if (!activate(id)) continue;
    d.cuStreamSynchronize.fn(stream);
    d.cuStreamDestroy.fn(stream);
  }
  for (auto& [ptr, a] : data_)
    if (activate(a.device)) d.cuMemFree.fn(a.base);
  for (auto& [ptr, key] : used_workspaces_)
    if (activate(key.device)) d.cuMemFree.fn(ToDevicePtr(ptr, 0));
  for (auto& [key, buffers] : free_workspaces_)
    for (void* p : buffers)
      if (activate(key.device)) d.cuMemFree.fn(ToDevicePtr(p, 0));
  for (int id = 0; id < static_cast<int>(contexts_.size()); ++id) {
    if (contexts_[id] == nullptr) continue;
    CUdevice cu = 0;
    if (d.cuDeviceGet.fn(&cu, id) == CUDA_SUCCESS) d.cuDevicePrimaryCtxRelease.fn(cu);
  }
  d.cuCtxSetCurrent.fn(nullptr);  // the primary contexts may be gone now
}

std::string CUDADeviceAPI::UnavailableReason() {
  return GetDriver().unavailable;
}

void* CUDADeviceAPI::PrimaryContext(int id) {
  const Driver& d = GetDriver();
  Device dev{DeviceType::kCUDA, id};
  std::lock_guard<std::mutex> lock(contexts_mu_);
  if (contexts_.empty()) contexts_.resize(d.device_count, nullptr);
  if (contexts_[id] == nullptr) {
    CUcontext ctx = nullptr;
    Call(dev, d.cuDevicePrimaryCtxRetain, &ctx, DeviceHandle(d, dev));
    contexts_[id] = ctx;
  }
  return contexts_[id];
}

void* CUDADeviceAPI::Activate(Device dev) {
  const Driver& d = CheckDevice(dev);
  void* ctx = PrimaryContext(dev.id);
  Call(dev, d.cuCtxSetCurrent, ctx);
  return ctx;
}

DeviceAttrValue CUDADeviceAPI::GetAttr(Device dev, DeviceAttr attr) {
  if (!Exists(dev))
    return attr == DeviceAttr::kExists ? DeviceAttrValue(int64_t{0}) : DeviceAttrValue();
  const Driver& d = GetDriver();
  CUdevice cu = 0;
  if (d.cuDeviceGet.fn(&cu, dev.id) != CUDA_SUCCESS) return DeviceAttrValue();
  // A driver attribute as an Int, or none if the driver does not answer.
  auto int_attr = [&](int which) {
    int v = 0;
    return d.cuDeviceGetAttribute.fn(&v, which, cu) == CUDA_SUCCESS ? DeviceAttrValue(int64_t{v})
                                                                    : DeviceAttrValue();
  };
  switch (attr) {
    case DeviceAttr::kExists:
      return int64_t{1};
    case DeviceAttr::kName: {
      char name[256] = {};
      if (d.cuDeviceGetName.fn(name, sizeof(name) - 1, cu) != CUDA_SUCCESS) return {};
      return std::string(name);
    }
    case DeviceAttr::kTotalMemory: {
      size_t total = 0;
      if (d.cuDeviceTotalMem.fn(&total, cu) != CUDA_SUCCESS) return {};
      return static_cast<int64_t>(total);
    }
    case DeviceAttr::kFreeMemory: {
      // Needs the device's context current; the caller's current context is put back after.
      CUcontext previous = nullptr;
      if (d.cuCtxGetCurrent.fn(&previous) != CUDA_SUCCESS) return {};
      void* ctx = nullptr;
      try {
        ctx = PrimaryContext(dev.id);
      } catch (const Error&) {
        return {};
      }
      if (d.cuCtxSetCurrent.fn(ctx) != CUDA_SUCCESS) return {};
      size_t free = 0, total = 0;
      CUresult r = d.cuMemGetInfo.fn(&free, &total);
      d.cuCtxSetCurrent.fn(previous);
      if (r != CUDA_SUCCESS) return {};
      return static_cast<int64_t>(free);
    }
    case DeviceAttr::kWarpSize:
      return int_attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    case DeviceAttr::kComputeCapability: {
      DeviceAttrValue major = int_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
      DeviceAttrValue minor = int_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
      if (major.is_none() || minor.is_none()) return {};
      return StrCat(major.AsInt(), ".", minor.AsInt());
    }
    case DeviceAttr::kMaxThreadsPerBlock:
      return int_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    case DeviceAttr::kSharedMemoryPerBlock:
      return int_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    case DeviceAttr::kMultiProcessorCount:
      return int_attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    case DeviceAttr::kDriverVersion: {
      int version = 0;
      if (d.cuDriverGetVersion.fn(&version) != CUDA_SUCCESS) return {};
      return int64_t{version};  // 1000 * major + 10 * minor: 13000 is CUDA 13.0
    }
    // The host's notion; a GPU's threads are warps times SMs times occupancy, not one number.
    case DeviceAttr::kThreadCount:
      return {};
  }
  return {};
}

void CUDADeviceAPI::SetDevice(Device dev) {
  Activate(dev);
}

uint64_t CUDADeviceAPI::DriverAlloc(Device dev, int64_t nbytes, int64_t alignment,
                                    const char* what) {
  const Driver& d = GetDriver();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc.fn(&p, static_cast<size_t>(nbytes));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) ThrowOutOfMemory(dev, what, nbytes, alignment);
  if (r != CUDA_SUCCESS)
    Throw(ErrorCodeOf(r), d.cuMemAlloc.symbol, " of ", nbytes, " bytes failed on ", dev, ": ",
          Describe(d, r));
  return p;
}

void* CUDADeviceAPI::DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                                      std::optional<DType> /*type_hint*/) {
  const Driver& d = GetDriver();
  Activate(dev);
  alignment = std::max(alignment, kDriverAlignment);
  // cuMemAlloc's pointers are 256-aligned, so alignment - 256 extra bytes always leave room
  // for an aligned start. At least one byte: cuMemAlloc refuses size 0, and size 0 must still
  // give a distinct pointer.
  const int64_t padding = alignment - kDriverAlignment;
  size_t total = 0;
  Call(dev, d.cuDeviceTotalMem, &total, DeviceHandle(d, dev));
  // Refuse what can never fit before asking the driver (which may answer a huge size with
  // CUDA_ERROR_INVALID_VALUE rather than out of memory).
  if (nbytes > static_cast<int64_t>(total) - padding)
    ThrowOutOfMemory(dev, "data space", nbytes, alignment);
  uint64_t base = DriverAlloc(dev, std::max<int64_t>(nbytes, 1) + padding, alignment, "data space");
  auto* aligned = reinterpret_cast<void*>((base + static_cast<uint64_t>(padding)) &
                                          ~static_cast<uint64_t>(alignment - 1));
  std::lock_guard<std::mutex> lock(data_mu_);
  data_[aligned] = Allocation{base, dev.id};
  return aligned;
}

void CUDADeviceAPI::FreeDataSpace(Device dev, void* ptr) {
  const Driver& d = CheckDevice(dev);
  if (ptr == nullptr) return;
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    auto it = data_.find(ptr);
    if (it == data_.end() || it->second.device != dev.id)
      Throw(ErrorCode::kInvalidArgument, "cannot free ", ptr, " as data space of ", dev,
            ": AllocDataSpace did not return it for this device, or it was freed already");
    a = it->second;
    data_.erase(it);
  }
  Activate(dev);
  Call(dev, d.cuMemFree, a.base);
}

void* CUDADeviceAPI::DoAllocWorkspace(Device dev, int64_t nbytes,
                                      std::optional<DType> /*type_hint*/) {
  const Driver& d = GetDriver();
  Activate(dev);
  const WorkspaceKey key{dev.id, WorkspaceSizeClass(nbytes)};
  {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    auto it = free_workspaces_.find(key);
    if (it != free_workspaces_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      pooled_bytes_ -= key.size_class;
      used_workspaces_.emplace(p, key);
      return p;
    }
  }
  size_t total = 0;
  Call(dev, d.cuDeviceTotalMem, &total, DeviceHandle(d, dev));
  if (key.size_class > static_cast<int64_t>(total))
    ThrowOutOfMemory(dev, "a workspace", nbytes, kAllocAlignment);
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc.fn(&p, static_cast<size_t>(key.size_class));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    // The pool may hold the memory this request needs in buffers of other sizes.
    {
      std::lock_guard<std::mutex> lock(workspace_mu_);
      TrimWorkspacePoolLocked(dev.id);
    }
    p = DriverAlloc(dev, key.size_class, kAllocAlignment, "a workspace");
  } else if (r != CUDA_SUCCESS) {
    Throw(ErrorCodeOf(r), d.cuMemAlloc.symbol, " of ", key.size_class, " bytes failed on ", dev,
          ": ", Describe(d, r));
  }
  void* ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  std::lock_guard<std::mutex> lock(workspace_mu_);
  used_workspaces_.emplace(ptr, key);
  return ptr;
}

void CUDADeviceAPI::FreeWorkspace(Device dev, void* ptr) {
  CheckDevice(dev);
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(workspace_mu_);
  auto it = used_workspaces_.find(ptr);
  if (it == used_workspaces_.end() || it->second.device != dev.id)
    Throw(ErrorCode::kInvalidArgument, "cannot free ", ptr, " as a workspace of ", dev,
          ": AllocWorkspace did not return it for this device, or it was freed already");
  free_workspaces_[it->second].push_back(ptr);
  pooled_bytes_ += it->second.size_class;
  used_workspaces_.erase(it);
}

int64_t CUDADeviceAPI::PooledWorkspaceBytes() const {
  std::lock_guard<std::mutex> lock(workspace_mu_);
  return pooled_bytes_;
}

void CUDADeviceAPI::TrimWorkspacePool() {
  const Driver& d = GetDriver();
  if (!d.unavailable.empty()) return;  // nothing can be pooled
  std::lock_guard<std::mutex> lock(workspace_mu_);
  for (int id = 0; id < d.device_count; ++id) TrimWorkspacePoolLocked(id);
}

// Frees device `id`'s pooled buffers; its context is made current. Errors are thrown after
// the pool's books are straight (the buffers are forgotten either way).
void CUDADeviceAPI::TrimWorkspacePoolLocked(int id) {
  const Driver& d = GetDriver();
  Device dev{DeviceType::kCUDA, id};
  std::vector<void*> buffers;
  for (auto it = free_workspaces_.begin(); it != free_workspaces_.end();) {
    if (it->first.device != id) {
      ++it;
      continue;
    }
    pooled_bytes_ -= it->first.size_class * static_cast<int64_t>(it->second.size());
    buffers.insert(buffers.end(), it->second.begin(), it->second.end());
    it = free_workspaces_.erase(it);
  }
  if (buffers.empty()) return;
  Activate(dev);
  for (void* p : buffers) Call(dev, d.cuMemFree, ToDevicePtr(p, 0));
}

void CUDADeviceAPI::CheckStream(int id, StreamHandle stream, const char* use) const {
  if (stream == nullptr) return;
  Device dev{DeviceType::kCUDA, id};
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end())
    Throw(ErrorCode::kInvalidArgument, "cannot ", use, " unknown stream ", stream, " on ", dev,
          ": it was never created by this device API, or it was freed already");
  if (it->second != id)
    Throw(ErrorCode::kInvalidArgument, "cannot ", use, " stream ", stream, " on ", dev,
          ": it belongs to ", Device{DeviceType::kCUDA, it->second});
}

void CUDADeviceAPI::DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst,
                                     int64_t dst_offset, int64_t nbytes, Device src_dev,
                                     Device dst_dev, StreamHandle stream) {
  const Driver& d = GetDriver();
  const bool src_cuda = src_dev.type == DeviceType::kCUDA;
  const bool dst_cuda = dst_dev.type == DeviceType::kCUDA;
  constexpr Device kHost{DeviceType::kCPU, 0};
  if (!src_cuda && !dst_cuda)
    Throw(ErrorCode::kInvalidArgument, "the cuda device API cannot copy from ", src_dev, " to ",
          dst_dev, ": neither is a CUDA device");
  if ((!src_cuda && src_dev != kHost) || (!dst_cuda && dst_dev != kHost))
    Throw(ErrorCode::kInvalidArgument, "the cuda device API cannot copy from ", src_dev, " to ",
          dst_dev, ": the other side of a copy must be a CUDA device or the host, cpu(0)");
  // The stream belongs to the CUDA side, to the destination when both are.
  const Device stream_dev = dst_cuda ? dst_dev : src_dev;
  if (src_cuda) CheckDevice(src_dev);
  if (dst_cuda) CheckDevice(dst_dev);
  void* ctx = Activate(stream_dev);
  CheckStream(stream_dev.id, stream, "copy on");
  if (nbytes == 0) return;
  const size_t n = static_cast<size_t>(nbytes);
  const char* from = static_cast<const char*>(src) + src_offset;
  char* to = static_cast<char*>(dst) + dst_offset;
  if (!src_cuda) {
    Call(stream_dev, d.cuMemcpyHtoDAsync, ToDevicePtr(to, 0), from, n, stream);
  } else if (!dst_cuda) {
    Call(stream_dev, d.cuMemcpyDtoHAsync, to, ToDevicePtr(from, 0), n, stream);
  } else if (src_dev.id == dst_dev.id) {
    Call(stream_dev, d.cuMemcpyDtoDAsync, ToDevicePtr(to, 0), ToDevicePtr(from, 0), n, stream);
  } else {
    void* src_ctx = PrimaryContext(src_dev.id);
    Call(stream_dev, d.cuMemcpyPeerAsync, ToDevicePtr(to, 0), ctx, ToDevicePtr(from, 0), src_ctx, n,
         stream);
  }
  // On the default stream the copy is finished when the call returns, as on the CPU, so host
  // buffers may be reused at once.
  if (stream == nullptr) Call(stream_dev, d.cuStreamSynchronize, nullptr);
}

StreamHandle CUDADeviceAPI::CreateStream(Device dev) {
  const Driver& d = GetDriver();
  Activate(dev);
  CUstream s = nullptr;
  Call(dev, d.cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_[s] = dev.id;
  return s;
}

void CUDADeviceAPI::FreeStream(Device dev, StreamHandle stream) {
  const Driver& d = CheckDevice(dev);
  if (stream == nullptr)
    Throw(ErrorCode::kInvalidArgument, "cannot free the default stream of ", dev);
  {
    // Looked up and forgotten under one lock, so two threads cannot both destroy it.
    std::lock_guard<std::mutex> lock(streams_mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end() || it->second != dev.id)
      Throw(ErrorCode::kInvalidArgument, "cannot free unknown stream ", stream, " on ", dev,
            ": it was never created by this device API for this device, or it was freed already");
    streams_.erase(it);
  }
  Activate(dev);
  // Destroy even when the work failed, then report the failure.
  CUresult sync = d.cuStreamSynchronize.fn(stream);
  Call(dev, d.cuStreamDestroy, stream);
  if (sync != CUDA_SUCCESS)
    Throw(ErrorCodeOf(sync), d.cuStreamSynchronize.symbol, " failed on ", dev,
          " while freeing stream ", stream, ": ", Describe(d, sync));
}

void CUDADeviceAPI::SetStream(Device dev, StreamHandle stream) {
  CheckDevice(dev);
  CheckStream(dev.id, stream, "make current");
  DeviceAPI::SetStream(dev, stream);
}

void CUDADeviceAPI::StreamSync(Device dev, StreamHandle stream) {
  const Driver& d = GetDriver();
  Activate(dev);
  CheckStream(dev.id, stream, "synchronize");
  Call(dev, d.cuStreamSynchronize, stream);
}

void CUDADeviceAPI::SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) {
  const Driver& d = GetDriver();
  Activate(dev);
  CheckStream(dev.id, from, "wait for");
  CheckStream(dev.id, to, "make wait");
  if (from == to) return;
  CUevent event = nullptr;
  Call(dev, d.cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
  // The driver keeps an event alive until the work waiting for it has run, so it is destroyed
  // here, whether or not the calls between succeed.
  struct DestroyEvent {
    const Driver& d;
    CUevent event;
    ~DestroyEvent() { d.cuEventDestroy.fn(event); }
  } destroy{d, event};
  Call(dev, d.cuEventRecord, event, from);
  Call(dev, d.cuStreamWaitEvent, to, event, 0u);
}

// ---- Kernels ----

void* CUDADeviceAPI::LoadModule(Device dev, const std::string& ptx, const std::string&) {
  const Driver& d = CheckDevice(dev);
  Activate(dev);
  // The driver compiles the PTX for the GPU here; its error log says why it would not.
  std::string log(8192, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  CUmodule module = nullptr;
  CUresult r = d.cuModuleLoadDataEx.fn(&module, ptx.c_str(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    log.resize(std::strlen(log.c_str()));
    Throw(ErrorCode::kCompileError, "cuModuleLoadDataEx failed on ", dev, ": ", Describe(d, r),
          log.empty() ? "" : "\n", log);
  }
  return module;
}

void CUDADeviceAPI::UnloadModule(Device dev, void* module) {
  if (module == nullptr) return;
  const Driver& d = CheckDevice(dev);
  Activate(dev);
  Call(dev, d.cuModuleUnload, module);
}

void* CUDADeviceAPI::GetKernel(Device dev, void* module, const std::string& name) {
  const Driver& d = CheckDevice(dev);
  Activate(dev);
  CUfunction f = nullptr;
  if (CUresult r = d.cuModuleGetFunction.fn(&f, module, name.c_str()); r != CUDA_SUCCESS)
    Throw(ErrorCode::kNotFound, "no kernel '", name, "' in the module on ", dev, ": ",
          Describe(d, r));
  return f;
}

void CUDADeviceAPI::LaunchKernel(Device dev, void* kernel, unsigned grid, unsigned block,
                                 void** args, StreamHandle stream) {
  const Driver& d = CheckDevice(dev);
  Activate(dev);
  CheckStream(dev.id, stream, "LaunchKernel");
  if (grid == 0 || block == 0)
    Throw(ErrorCode::kInvalidArgument, "LaunchKernel on ", dev, ": a grid of ", grid, " blocks of ",
          block, " threads");
  Call(dev, d.cuLaunchKernel, kernel, 1u * grid, 1u, 1u, 1u * block, 1u, 1u, 0u,
       static_cast<CUstream>(stream), args, nullptr);
}

}  // namespace kiln

KILN_REGISTER_DEVICE_API(cuda, "device_api.cuda",
                         [] { return std::make_unique<kiln::CUDADeviceAPI>(); })
