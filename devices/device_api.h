// The device abstraction: one DeviceAPI per device kind (cpu, cuda), looked up by device type or
// by registry name. The engine allocates, copies and synchronizes only through this interface,
// so a new device kind is one file that implements it plus one registration line.
//
// Threading: every DeviceAPI method may be called from any thread at once. The current stream
// (SetStream/GetCurrentStream) is per thread and per device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

// The device kinds, once. X(enum, name, value). The value is part of the C API: append only.
#define KILN_DEVICE_TYPES(X) \
  X(kCPU, "cpu", 1)          \
  X(kCUDA, "cuda", 2)

enum class DeviceType : int {
#define KILN_X(e, n, v) e = v,
  KILN_DEVICE_TYPES(KILN_X)
#undef KILN_X
};

std::string_view DeviceTypeName(DeviceType t);  // "cpu", "cuda"

// One device: a kind and an ordinal among the devices of that kind (the CPU is cpu(0)).
struct Device {
  DeviceType type = DeviceType::kCPU;
  int id = 0;

  bool operator==(const Device&) const = default;
  std::string ToString() const;  // "cpu(0)", "cuda(1)": the spelling every error message uses
};
std::ostream& operator<<(std::ostream& os, const Device& dev);

// What GetAttr can be asked, once. X(enum, name, value kind: Int or String). A device answers
// with a value of the listed kind, or with none where the attribute does not apply to it (a
// CPU has no warp size) or where it cannot tell (free memory on some systems).
#define KILN_DEVICE_ATTRS(X)                                                  \
  X(kExists, "exists", Int)            /* 1 if the device is there, else 0 */ \
  X(kName, "name", String)             /* "cpu", "NVIDIA H100 80GB HBM3" */   \
  X(kTotalMemory, "total_memory", Int) /* bytes */                            \
  X(kFreeMemory, "free_memory", Int)   /* bytes */                            \
  X(kThreadCount, "thread_count", Int) /* hardware threads (cpu) */           \
  X(kWarpSize, "warp_size", Int)                                              \
  X(kComputeCapability, "compute_capability", String) /* "9.0" */             \
  X(kMaxThreadsPerBlock, "max_threads_per_block", Int)                        \
  X(kSharedMemoryPerBlock, "shared_memory_per_block", Int) /* bytes */        \
  X(kMultiProcessorCount, "multi_processor_count", Int)                       \
  X(kDriverVersion, "driver_version", Int)

enum class DeviceAttr {
#define KILN_X(e, n, k) e,
  KILN_DEVICE_ATTRS(KILN_X)
#undef KILN_X
};

std::string_view DeviceAttrName(DeviceAttr attr);  // "warp_size"
// Every attribute, in declaration order: for tests and for tools that print a device.
const std::vector<DeviceAttr>& AllDeviceAttrs();

// An attribute's answer: none, an integer or a string.
class DeviceAttrValue {
 public:
  enum class Kind { kNone, kInt, kString };  // the alternatives of value_, in order

  DeviceAttrValue() = default;               // none
  DeviceAttrValue(int64_t v) : value_(v) {}  // NOLINT: implicit, so devices `return 4;`
  DeviceAttrValue(std::string v) : value_(std::move(v)) {}  // NOLINT

  Kind kind() const { return static_cast<Kind>(value_.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  // The value; asking for the wrong kind (or none) is kInvalidArgument naming both kinds.
  int64_t AsInt() const;
  const std::string& AsString() const;
  std::string ToString() const;  // "none", "32", "cpu"

  bool operator==(const DeviceAttrValue&) const = default;

 private:
  std::variant<std::monostate, int64_t, std::string> value_;
};
// The kind each attribute answers with when it is not none (from KILN_DEVICE_ATTRS).
DeviceAttrValue::Kind DeviceAttrKind(DeviceAttr attr);

// A queue of device work; work on one stream runs in the order it was enqueued. Opaque and owned
// by the DeviceAPI that created it; nullptr is the device's default stream, which always exists.
using StreamHandle = void*;

// The alignment AllocDataSpace gives when none is asked for, and that workspaces always have:
// a cache line, and enough for any vector load kiln's code generators emit.
inline constexpr int64_t kAllocAlignment = 64;

// A device kind's operations. Argument checks that every device must make the same way (sizes,
// alignments, offsets) are made once here, in the non-virtual entry points, so every device
// reports them with the same message; the devices implement the protected Do* hooks.
//
// Lifetime: instances come from the registry below and live until the process exits. Memory
// and streams a DeviceAPI hands out are owned by the caller until given back with the matching
// Free*; giving back something the device did not hand out (or twice) is an error where the
// device can detect it.
class DeviceAPI {
 public:
  virtual ~DeviceAPI() = default;

  // Never throws for a valid `attr`, whatever the device: none where it does not apply, and
  // kExists == 0 with everything else none for a device id that is not present.
  virtual DeviceAttrValue GetAttr(Device dev, DeviceAttr attr) = 0;
  // Makes `dev` the calling thread's active device of its kind; kInvalidArgument if absent.
  virtual void SetDevice(Device dev) = 0;

  // `nbytes` >= 0 bytes aligned to `alignment` (a power of two; a device may align more). Size
  // 0 gives a valid pointer that must be freed like any other. `type_hint` is the element type
  // the memory will hold, for devices that allocate differently per type; it may be ignored.
  // Failure: kInvalidArgument for bad arguments, kOutOfMemory when the device has no room.
  void* AllocDataSpace(Device dev, int64_t nbytes, int64_t alignment = kAllocAlignment,
                       std::optional<DType> type_hint = std::nullopt);
  virtual void FreeDataSpace(Device dev, void* ptr) = 0;

  // Scratch memory for kernels, aligned to kAllocAlignment. Expected to be pooled: freeing
  // keeps the buffer for a later AllocWorkspace of a similar size, so a steady state of equal
  // runs does not call the device allocator. The default uses AllocDataSpace directly.
  void* AllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint = std::nullopt);
  virtual void FreeWorkspace(Device dev, void* ptr);

  // Copies `nbytes` from `src + src_offset` (on src_dev) to `dst + dst_offset` (on dst_dev),
  // ordered on `stream` of the device that is not the CPU (of dst_dev when both are the same
  // kind). Asynchronous on a non-default stream: both buffers must stay alive and the source
  // unchanged until the stream has run the copy.
  void CopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                      int64_t nbytes, Device src_dev, Device dst_dev, StreamHandle stream);

  virtual StreamHandle CreateStream(Device dev) = 0;
  // Waits for the stream's work, then frees it. kInvalidArgument for an unknown stream (never
  // created here, or already freed) and for the default stream.
  virtual void FreeStream(Device dev, StreamHandle stream) = 0;
  // The calling thread's current stream for `dev`: what the engine launches on when the user
  // names no stream. Starts as nullptr (the default stream). Does not take ownership: free the
  // stream only after no thread uses it as current.
  virtual void SetStream(Device dev, StreamHandle stream);
  StreamHandle GetCurrentStream(Device dev) const;
  // Blocks until everything enqueued on `stream` so far has run. An error raised by work on the
  // stream since the last sync is thrown here.
  virtual void StreamSync(Device dev, StreamHandle stream) = 0;
  // Makes `to` wait, without blocking the caller, for everything enqueued on `from` so far;
  // work enqueued on `from` later is not waited for.
  virtual void SyncStreamFromTo(Device dev, StreamHandle from, StreamHandle to) = 0;

  // Kernels, for devices that run generated code as modules (a GPU; a CPU's kernels are host
  // functions, so the CPU answers each of these with kUnsupported). LoadModule makes a module
  // of `image`, what the device's code generator made (PTX for CUDA), or of `source`, the code
  // it was made from (CUDA C), for a device that builds from source (a host emulation); a
  // failure is kCompileError carrying the device's log. The module is kept until UnloadModule.
  // GetKernel finds a kernel by name (kNotFound). LaunchKernel enqueues it on `stream` as
  // `grid` blocks of `block` threads; `args` points to each parameter's value in order (as
  // cuLaunchKernel takes them), read before it returns.
  virtual void* LoadModule(Device dev, const std::string& image, const std::string& source);
  virtual void UnloadModule(Device dev, void* module);
  virtual void* GetKernel(Device dev, void* module, const std::string& name);
  virtual void LaunchKernel(Device dev, void* kernel, unsigned grid, unsigned block, void** args,
                            StreamHandle stream);

 protected:
  // Called with arguments already checked: nbytes >= 0, alignment a power of two.
  virtual void* DoAllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                                 std::optional<DType> type_hint) = 0;
  virtual void* DoAllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint);
  // Called with nbytes >= 0, offsets >= 0, and non-null pointers when nbytes > 0.
  virtual void DoCopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                                int64_t nbytes, Device src_dev, Device dst_dev,
                                StreamHandle stream) = 0;
};

// The registry of device kinds, by name: "device_api.<device type name>". Each DeviceAPI is
// created by its factory on the first lookup and then shared; it is never destroyed, because
// streams (and their threads) may be in use while the process exits.
using DeviceAPIFactory = std::function<std::unique_ptr<DeviceAPI>()>;

// kInvalidArgument if the name is taken.
void RegisterDeviceAPI(const std::string& name, DeviceAPIFactory factory);
// kNotFound naming the device and listing the registered ones.
DeviceAPI* GetDeviceAPI(const std::string& name);
DeviceAPI* GetDeviceAPI(DeviceType type);
// Sorted names.
std::vector<std::string> RegisteredDeviceAPIs();

// Registers a DeviceAPI from its own file, as the program starts:
//   KILN_REGISTER_DEVICE_API(cpu, "device_api.cpu", [] { return std::make_unique<Cpu>(); });
// It also defines kiln::RegisterDeviceAPI_<id>(), which registers once however often it is
// called. A linker drops an object file of a static library that nothing references, and its
// static registrar with it, so the devices built into kiln_devices are also listed in
// devices/builtin_devices.def, whose registration functions every lookup calls first.
// A name registered twice this way fails at startup (the error escapes static initialization).
#define KILN_REGISTER_DEVICE_API(id, name, factory)                                  \
  namespace kiln {                                                                   \
  void RegisterDeviceAPI_##id() {                                                    \
    static const bool registered = (::kiln::RegisterDeviceAPI(name, factory), true); \
    (void)registered;                                                                \
  }                                                                                  \
  }                                                                                  \
  namespace {                                                                        \
  [[maybe_unused]] const bool kiln_device_api_registrar_##id =                       \
      (::kiln::RegisterDeviceAPI_##id(), true);                                      \
  }

}  // namespace kiln
