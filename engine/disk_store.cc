#include "engine/disk_store.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "ir/structural.h"
#include "ir/text.h"
#include "passes/pass_context.h"

namespace kiln {

namespace {

// FNV-1a over 64-bit words (then the tail bytes): eight times faster than bytewise on weights,
// and still stable across processes and builds.
uint64_t HashBytes(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = kFnvOffsetBasis;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The payload: u32 little-endian length of the kernel's symbol name, the name, the object file.
std::string EncodePayload(const std::string& name, const std::string& object) {
  std::string out;
  out.reserve(4 + name.size() + object.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((name.size() >> (8 * i)) & 0xff));
  out += name;
  out += object;
  return out;
}

bool DecodePayload(const std::string& payload, std::string* name, std::string* object) {
  if (payload.size() < 4) return false;
  uint64_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint64_t{static_cast<unsigned char>(payload[i])} << (8 * i);
  if (n == 0 || n > payload.size() - 4) return false;
  *name = payload.substr(4, n);
  *object = payload.substr(4 + n);
  return !object->empty();
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

KernelEntryInfo DescribeKernelEntry(const DiskCacheEntry& entry) {
  KernelEntryInfo info;
  std::string object;
  DecodePayload(entry.payload, &info.kernel, &object);
  // The key text, a line each (KeyText): a header, kiln=, the identity, target=, ..., group=,
  // then the group's text, whose first line is its signature.
  std::vector<std::string> lines;
  for (size_t at = 0; at < entry.key.size();) {
    size_t nl = entry.key.find('\n', at);
    if (nl == std::string::npos) nl = entry.key.size();
    lines.push_back(entry.key.substr(at, nl - at));
    at = nl + 1;
  }
  bool in_identity = false;  // the identity's lines run from after kiln= to target=
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("kiln=", 0) == 0) {
      info.kiln = l.substr(5);
      in_identity = true;
    } else if (l.rfind("target=", 0) == 0) {
      info.target = l.substr(7);
      in_identity = false;
    } else if (in_identity) {
      info.identity += (info.identity.empty() ? "" : "; ") + l;
    } else if (l == "group=" && i + 1 < lines.size()) {
      // `%0: fn(f32[3, 64], ...) -> f32[3, 128] = fn(%1: ...) {`: the type is the shapes.
      std::string sig = lines[i + 1];
      if (size_t colon = sig.find(": "); sig.rfind("%", 0) == 0 && colon != std::string::npos)
        sig = sig.substr(colon + 2);
      if (size_t eq = sig.find(" = "); eq != std::string::npos) sig = sig.substr(0, eq);
      info.signature = sig;
      break;
    }
  }
  return info;
}

DiskKernelStore::DiskKernelStore(const std::string& dir, uint64_t max_bytes,
                                 const std::string& build)
    : cache_(dir, max_bytes, build) {}

std::string DiskKernelStore::Identity(const CodegenOptions& codegen) {
  const std::string fingerprint = CodegenFingerprint(codegen);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = targets_.find(fingerprint);
    if (it != targets_.end()) return it->second;
  }
  std::string description = GetCodegen(codegen.kind).identity(codegen);
  std::lock_guard<std::mutex> lock(mu_);
  return targets_.emplace(fingerprint, std::move(description)).first->second;
}

std::string DiskKernelStore::KeyText(const KernelKey& key) {
  // Constants of more than 64 elements print as meta[i] and are keyed by content hash; smaller
  // ones are in the text in full.
  // Names are left out, as the in-memory key's structural equality leaves them out: groups that
  // differ only in names share one kernel there (which of them compiles it first is a race
  // when groups compile in parallel), so they must share one entry here.
  std::vector<Tensor> meta;
  PrintOptions print;
  print.anonymous = true;
  std::string group = Print(key.group, print, &meta);
  std::string text = StrCat("kiln kernel\nkiln=", key.kiln_version, "\n", Identity(key.codegen),
                            "\ntarget=", key.target, "\ncodegen=", CodegenFingerprint(key.codegen),
                            "\npipeline=", key.pipeline_hash, "\ndigest=", key.digest,
                            "\nstructural=", StructuralHash(key.group), "\ngroup=\n", group, "\n");
  for (size_t i = 0; i < meta.size(); ++i)
    text += StrCat("meta[", i, "]=", DTypeName(meta[i].dtype()), IntsToString(meta[i].shape()),
                   " bytes=", meta[i].nbytes(),
                   " hash=", HashBytes(meta[i].raw_data(), meta[i].nbytes()), "\n");
  return text;
}

KernelStore::LoadResult DiskKernelStore::Load(const KernelKey& key,
                                              std::shared_ptr<const CompiledKernel>* kernel) {
  const std::string key_text = KeyText(key);
  DiskCache::Result r = cache_.Load(key_text);
  if (r.status == DiskCache::Status::kMiss) return LoadResult::kMiss;
  if (r.status == DiskCache::Status::kRejected) return LoadResult::kRejected;

  // The entry is intact and for this key; what remains can fail only if kiln itself changed
  // without its version (a development build) or the object does not link here. Either way,
  // reject it: the compile that follows rebuilds it.
  std::string name, object;
  if (!DecodePayload(r.payload, &name, &object)) {
    cache_.Reject(key_text, DiskCacheRejection::kBadPayload);
    return LoadResult::kRejected;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    CompiledKernel k;
    // What CompileKernel does before code generation, so `lowered` is the same.
    const CodeGenerator& generator = GetCodegen(key.codegen.kind);
    if (!generator.load)
      Throw(ErrorCode::kUnsupported, "a ", generator.kind, " module cannot be loaded back");
    k.lowered = LowerKernel(key.group, name, key.codegen.kind);
    k.timings.lower_ms = MsSince(t0);
    k.module = generator.load(object, {k.lowered.func}, key.codegen);
    k.entry = &k.module->Entry(name);
    k.timings.codegen_ms = k.module->timings().codegen_ms;
    *kernel = std::make_shared<const CompiledKernel>(std::move(k));
  } catch (const Error&) {
    cache_.Reject(key_text, DiskCacheRejection::kBadPayload);
    return LoadResult::kRejected;
  }
  return LoadResult::kHit;
}

void DiskKernelStore::Store(const KernelKey& key, const CompiledKernel& kernel) {
  if (!kernel.module || kernel.module->object().empty() || !kernel.lowered.func ||
      !GetCodegen(key.codegen.kind).load)
    return;
  cache_.Store(KeyText(key), EncodePayload(kernel.lowered.func->name, kernel.module->object()));
}

std::map<std::string, uint64_t> DiskKernelStore::RejectionsByReason() const {
  return cache_.stats().rejections_by_reason;
}

}  // namespace kiln
