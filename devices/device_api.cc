#include "devices/device_api.h"

#include <map>
#include <mutex>

#include "ir/error.h"

namespace kiln {

#define KILN_BUILTIN_DEVICE_API(id) void RegisterDeviceAPI_##id();
#include "devices/builtin_devices.def"
#undef KILN_BUILTIN_DEVICE_API

std::string_view DeviceTypeName(DeviceType t) {
  switch (t) {
#define KILN_X(e, n, v) \
  case DeviceType::e:   \
    return n;
    KILN_DEVICE_TYPES(KILN_X)
#undef KILN_X
  }
  return "unknown";  // only for a value cast from an integer that names no device type
}

std::string Device::ToString() const {
  return StrCat(DeviceTypeName(type), "(", id, ")");
}

std::ostream& operator<<(std::ostream& os, const Device& dev) {
  return os << dev.ToString();
}

std::string_view DeviceAttrName(DeviceAttr attr) {
  switch (attr) {
#define KILN_X(e, n, kind) \
  case DeviceAttr::e:      \
    return n;
    KILN_DEVICE_ATTRS(KILN_X)
#undef KILN_X
  }
  return "unknown";
}

DeviceAttrValue::Kind DeviceAttrKind(DeviceAttr attr) {
  switch (attr) {
#define KILN_X(e, n, kind) \
  case DeviceAttr::e:      \
    return DeviceAttrValue::Kind::k##kind;
    KILN_DEVICE_ATTRS(KILN_X)
#undef KILN_X
  }
  return DeviceAttrValue::Kind::kNone;
}

const std::vector<DeviceAttr>& AllDeviceAttrs() {
  static const std::vector<DeviceAttr> all = {
#define KILN_X(e, n, k) DeviceAttr::e,
      KILN_DEVICE_ATTRS(KILN_X)
#undef KILN_X
  };
  return all;
}

namespace {
const char* KindName(DeviceAttrValue::Kind k) {
  switch (k) {
    case DeviceAttrValue::Kind::kNone:
      return "none";
    case DeviceAttrValue::Kind::kInt:
      return "an integer";
    case DeviceAttrValue::Kind::kString:
      return "a string";
  }
  return "unknown";
}
}  // namespace

int64_t DeviceAttrValue::AsInt() const {
  if (kind() != Kind::kInt)
    Throw(ErrorCode::kInvalidArgument, "device attribute value is ", KindName(kind()),
          ", not an integer");
  return std::get<int64_t>(value_);
}

const std::string& DeviceAttrValue::AsString() const {
  if (kind() != Kind::kString)
    Throw(ErrorCode::kInvalidArgument, "device attribute value is ", KindName(kind()),
          ", not a string");
  return std::get<std::string>(value_);
}

std::string DeviceAttrValue::ToString() const {
  switch (kind()) {
    case Kind::kNone:
      return "none";
    case Kind::kInt:
      return std::to_string(std::get<int64_t>(value_));
    case Kind::kString:
      return std::get<std::string>(value_);
  }
  return "none";
}

void* DeviceAPI::AllocDataSpace(Device dev, int64_t nbytes, int64_t alignment,
                                std::optional<DType> type_hint) {
  if (nbytes < 0)
    Throw(ErrorCode::kInvalidArgument, "cannot allocate a negative size (", nbytes, " bytes) on ",
          dev);
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    Throw(ErrorCode::kInvalidArgument, "allocation alignment ", alignment, " on ", dev,
          " is not a power of two");
  return DoAllocDataSpace(dev, nbytes, alignment, type_hint);
}

void* DeviceAPI::AllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint) {
  if (nbytes < 0)
    Throw(ErrorCode::kInvalidArgument, "cannot allocate a workspace of negative size (", nbytes,
          " bytes) on ", dev);
  return DoAllocWorkspace(dev, nbytes, type_hint);
}

void* DeviceAPI::DoAllocWorkspace(Device dev, int64_t nbytes, std::optional<DType> type_hint) {
  return DoAllocDataSpace(dev, nbytes, kAllocAlignment, type_hint);
}

void DeviceAPI::FreeWorkspace(Device dev, void* ptr) {
  FreeDataSpace(dev, ptr);
}

namespace {
[[noreturn]] void NoModules(Device dev, const char* call) {
  Throw(ErrorCode::kUnsupported, call, " on ", dev, ": ", DeviceTypeName(dev.type),
        " devices run host functions, not kernel modules");
}
}  // namespace

void* DeviceAPI::LoadModule(Device dev, const std::string&, const std::string&) {
  NoModules(dev, "LoadModule");
}
void DeviceAPI::UnloadModule(Device dev, void*) {
  NoModules(dev, "UnloadModule");
}
void* DeviceAPI::GetKernel(Device dev, void*, const std::string&) {
  NoModules(dev, "GetKernel");
}
void DeviceAPI::LaunchKernel(Device dev, void*, unsigned, unsigned, void**, StreamHandle) {
  NoModules(dev, "LaunchKernel");
}

void DeviceAPI::CopyDataFromTo(const void* src, int64_t src_offset, void* dst, int64_t dst_offset,
                               int64_t nbytes, Device src_dev, Device dst_dev,
                               StreamHandle stream) {
  if (nbytes < 0)
    Throw(ErrorCode::kInvalidArgument, "cannot copy a negative size (", nbytes, " bytes) from ",
          src_dev, " to ", dst_dev);
  if (src_offset < 0 || dst_offset < 0)
    Throw(ErrorCode::kInvalidArgument, "copy from ", src_dev, " to ", dst_dev,
          " has a negative offset (source ", src_offset, ", destination ", dst_offset, ")");
  if (nbytes > 0 && (src == nullptr || dst == nullptr))
    Throw(ErrorCode::kInvalidArgument, "copy of ", nbytes, " bytes from ", src_dev, " to ", dst_dev,
          " has a null ", src == nullptr ? "source" : "destination");
  DoCopyDataFromTo(src, src_offset, dst, dst_offset, nbytes, src_dev, dst_dev, stream);
}

namespace {
// The calling thread's current streams, by DeviceAPI and device. A handful of entries at most,
// so a vector beats a map. Entries are never removed: a stale handle left here by a freed
// stream is caught by the device when it is next used.
struct CurrentStream {
  const DeviceAPI* api;
  Device dev;
  StreamHandle stream;
};
thread_local std::vector<CurrentStream> current_streams;
}  // namespace

void DeviceAPI::SetStream(Device dev, StreamHandle stream) {
  for (CurrentStream& c : current_streams) {
    if (c.api == this && c.dev == dev) {
      c.stream = stream;
      return;
    }
  }
  current_streams.push_back({this, dev, stream});
}

StreamHandle DeviceAPI::GetCurrentStream(Device dev) const {
  for (const CurrentStream& c : current_streams)
    if (c.api == this && c.dev == dev) return c.stream;
  return nullptr;
}

namespace {
// A factory, and the instance it made on the first lookup (never destroyed: see the header).
struct Entry {
  DeviceAPIFactory factory;
  DeviceAPI* instance = nullptr;
};
struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> entries;
};
Registry& GetRegistry() {
  static Registry* r = new Registry();  // never destroyed: lookups may run during teardown
  return *r;
}

// Registers the devices built into kiln_devices, once. Called by every lookup, outside the
// registry lock, since registering takes it.
void EnsureBuiltinDeviceAPIs() {
  static const bool done = [] {
#define KILN_BUILTIN_DEVICE_API(id) RegisterDeviceAPI_##id();
#include "devices/builtin_devices.def"
#undef KILN_BUILTIN_DEVICE_API
    return true;
  }();
  (void)done;
}

std::string RegisteredList(const Registry& r) {
  std::string names;
  for (const auto& [name, entry] : r.entries) names += StrCat(names.empty() ? "" : ", ", name);
  return names;
}
}  // namespace

void RegisterDeviceAPI(const std::string& name, DeviceAPIFactory factory) {
  if (!factory)
    Throw(ErrorCode::kInvalidArgument, "device API '", name, "' is registered without a factory");
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.entries.count(name))
    Throw(ErrorCode::kInvalidArgument, "device API '", name, "' is already registered");
  r.entries[name].factory = std::move(factory);
}

DeviceAPI* GetDeviceAPI(const std::string& name) {
  EnsureBuiltinDeviceAPIs();
  Registry& r = GetRegistry();
  // Held while the factory runs, so two first lookups make one instance.
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.entries.find(name);
  if (it == r.entries.end())
    Throw(ErrorCode::kNotFound, "no device API '", name, "' (registered: ", RegisteredList(r), ")");
  Entry& e = it->second;
  if (e.instance == nullptr) {
    e.instance = e.factory().release();
    KILN_CHECK(e.instance != nullptr, "the factory of device API '", name, "' returned null");
  }
  return e.instance;
}

DeviceAPI* GetDeviceAPI(DeviceType type) {
  return GetDeviceAPI(StrCat("device_api.", DeviceTypeName(type)));
}

std::vector<std::string> RegisteredDeviceAPIs() {
  EnsureBuiltinDeviceAPIs();
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, entry] : r.entries) names.push_back(name);
  return names;
}

}  // namespace kiln
