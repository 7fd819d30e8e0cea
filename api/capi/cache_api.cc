// The C API's disk cache functions (kiln.h): the kernel cache of kiln_options_set_cache_dir
// listed and cleared from outside any engine, for `kiln cache ls|clear`.
#include <sys/stat.h>

#include <string>

#include "api/capi/capi_internal.h"
#include "engine/disk_store.h"
#include "engine/kernel_cache.h"
#include "ir/trace.h"

namespace {

using kiln::ErrorCode;
using kiln::Throw;

// The cache at `dir`, which must exist: listing or clearing never creates one. Opening it
// checks its ownership and permissions as an engine would.
kiln::DiskCache OpenExisting(const char* dir, const char* fn) {
  std::string path = kiln_capi::Str(dir, fn, "dir");
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Throw(ErrorCode::kNotFound, fn, ": there is no cache directory '", path, "'");
  return kiln::DiskCache(path, UINT64_MAX, kiln::KilnCodegenIdentity());
}

}  // namespace

extern "C" {

kiln_status kiln_cache_list_json(const char* dir, char** out_json) {
  KILN_API_BEGIN
  KILN_REQUIRE(out_json);
  kiln::DiskCache cache = OpenExisting(dir, __func__);
  std::string out = "[";
  for (const kiln::DiskCacheEntry& e : cache.List()) {
    kiln::KernelEntryInfo info = kiln::DescribeKernelEntry(e);
    if (out.size() > 1) out += ',';
    out += kiln::StrCat(
        "{\"file\":", kiln::JsonQuote(e.file), ",\"bytes\":", e.bytes, ",\"modified\":", e.modified,
        ",\"status\":",
        kiln::JsonQuote(e.problem ? kiln::DiskCacheRejectionName(*e.problem) : "ok"),
        ",\"kernel\":", kiln::JsonQuote(info.kernel), ",\"target\":", kiln::JsonQuote(info.target),
        ",\"signature\":", kiln::JsonQuote(info.signature),
        ",\"kiln\":", kiln::JsonQuote(info.kiln), ",\"identity\":", kiln::JsonQuote(info.identity),
        "}");
  }
  *out_json = kiln_capi::NewCString(out + "]");
  KILN_API_END
}

kiln_status kiln_cache_clear(const char* dir, uint64_t* removed) {
  KILN_API_BEGIN
  kiln::DiskCache cache = OpenExisting(dir, __func__);
  uint64_t n = cache.Clear();
  if (removed) *removed = n;
  KILN_API_END
}

}  // extern "C"
