// DiskCache: the on-disk compiled-code cache, a directory of blobs named by their key. It knows
// nothing of kernels or LLVM: a key is text that names everything the payload depends on, the
// payload is bytes (the engine stores object files; engine/disk_store.h).
//
//   DiskCache cache("/home/me/.cache/kiln", 1 << 30, build_id);
//   cache.Store(key_text, object_bytes);
//   DiskCache::Result r = cache.Load(key_text);  // kHit: r.payload; kRejected: r.reason
//
// One file per entry, `<16 hex digits of FNV-1a(key)>.kc`, laid out little-endian as
//
//   magic "KILNKC\r\n" (8) | format version u32 | build length u64 | build | key length u64 |
//   key | payload length u64 | checksum u64 (FNV-1a 64 over build, key, payload) | payload
//
// `build` identifies the program that wrote the entry (for kiln, a hash of the code that makes
// kernels, computed at build time: engine/kernel_cache.h KilnCodegenIdentity). It is not part
// of the file name, so a rebuilt program finds the entries an older build wrote under the same
// key, rejects them as other_build and writes its own over them.
//
// Trust. Every read checks everything before anything is returned: the magic, the version, that
// the lengths add up to the file size exactly, the checksum, and that the key stored in the file
// is byte for byte the key asked for and the build is this cache's (so a name collision, or an
// entry from another build of kiln, LLVM or CPU, is never used). An entry failing any check is
// rejected, counted by reason and removed; the caller rebuilds it. The checksum catches corruption,
// not malice: whoever can write to the directory can make this process run their code. So the
// directory is created owner-only (0700), and an existing directory that is not owned by this user,
// or that group or others can access, is refused with an error saying what to fix. Its permissions
// are never changed, because it may be a directory the user made for other things too.
//
// Writes go to a temporary file in the same directory (mkstemp, 0600) and are renamed over the
// entry, so a reader sees a whole old entry, a whole new one or none, and processes writing one
// entry at once are safe (the last rename wins, and either entry is whole). No fsync: after a
// crash an entry may be torn, and a torn entry fails its checks on the next read.
//
// Size. After each write the directory is scanned, and while the entries total more than
// `max_bytes` the least recently used (oldest mtime; a hit touches its file) is removed, so
// the bound holds after every write. An entry larger than the whole bound is not written.
// Temporary files older than an hour (from a writer that crashed) are removed by the same scan.
//
// Threading: every member function is thread-safe; processes share a directory through the
// file system alone. A rejection may remove an entry another process renamed into place just
// after the read; that only costs a rebuild.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Why an entry was not used: each listed once, for the enum and the names in statistics.
#define KILN_DISK_CACHE_REJECTIONS(X)                                                          \
  X(kTruncated, "truncated")      /* shorter than its header says (or than a header) */        \
  X(kBadMagic, "bad_magic")       /* not a kiln cache entry */                                 \
  X(kBadVersion, "bad_version")   /* written by another format version */                      \
  X(kBadLength, "bad_length")     /* longer than its header says */                            \
  X(kChecksum, "checksum")        /* key or payload bytes changed */                           \
  X(kKeyMismatch, "key_mismatch") /* an intact entry for another key (target, version, ...) */ \
  X(kOtherBuild, "other_build")   /* intact, written by another build of the program */        \
  X(kUnreadable, "unreadable")    /* not a regular file, or reading it failed */               \
  X(kBadPayload, "bad_payload")   /* intact, but the caller could not use the payload */

enum class DiskCacheRejection {
#define KILN_X(e, name) e,
  KILN_DISK_CACHE_REJECTIONS(KILN_X)
#undef KILN_X
};
inline constexpr size_t kNumDiskCacheRejections = 0
#define KILN_X(e, name) +1
    KILN_DISK_CACHE_REJECTIONS(KILN_X)
#undef KILN_X
    ;
const char* DiskCacheRejectionName(DiskCacheRejection r);

inline constexpr uint32_t kDiskCacheFormatVersion = 2;
inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;

// 64-bit FNV-1a: the same in every process and build. Any change of one byte changes it.
uint64_t Fnv1a64(std::string_view bytes, uint64_t seed = kFnvOffsetBasis);

// The file format alone, for the cache and for tests and tools that inspect or damage entries.
std::string EncodeDiskCacheEntry(std::string_view build, std::string_view key,
                                 std::string_view payload);
// Verifies `bytes` as an entry (all but the build and key comparisons) and on success sets
// `*build`, `*key` and `*payload`; otherwise returns why not. Reads nothing outside `bytes`,
// whatever they hold.
std::optional<DiskCacheRejection> DecodeDiskCacheEntry(std::string_view bytes, std::string* build,
                                                       std::string* key, std::string* payload);

// One file of the cache as List finds it, whatever state it is in.
struct DiskCacheEntry {
  std::string file;  // its name in the directory
  uint64_t bytes = 0;
  int64_t modified = 0;                       // mtime, Unix seconds: the last write or hit
  std::string build, key, payload;            // when it decodes
  std::optional<DiskCacheRejection> problem;  // why a Load would reject it (other_build too)
};

struct DiskCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t rejections = 0;
  uint64_t writes = 0;
  uint64_t evictions = 0;
  std::map<std::string, uint64_t> rejections_by_reason;  // by DiskCacheRejectionName; nonzero
};

class DiskCache {
 public:
  // Opens `dir`, creating it (and missing parents) owner-only. kInvalidArgument naming the path
  // when it cannot be created, is not a directory, is another user's, or is open to others.
  // Entries are written as `build`'s, and only `build`'s are used.
  DiskCache(std::string dir, uint64_t max_bytes, std::string build);
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  enum class Status { kMiss, kHit, kRejected };
  struct Result {
    Status status = Status::kMiss;
    std::string payload;                                         // kHit
    DiskCacheRejection reason = DiskCacheRejection::kTruncated;  // kRejected
  };
  // The payload stored under `key`, verified; a hit makes the entry the most recently used.
  Result Load(const std::string& key);
  // Writes (or replaces) the entry atomically, then evicts down to the size bound; an entry
  // larger than the bound is not written.
  // kInvalidArgument naming the path when the file cannot be written.
  void Store(const std::string& key, const std::string& payload);
  // For a hit whose payload the caller found unusable: counted under `reason` and removed.
  void Reject(const std::string& key, DiskCacheRejection reason);

  // Where the entry for `key` lives (it may not exist).
  std::string PathFor(const std::string& key) const;
  // The entries' total size now, by a scan of the directory.
  uint64_t TotalBytes() const;
  // Every entry file, read and checked (nothing is removed), by file name. kInvalidArgument
  // when the directory cannot be read.
  std::vector<DiskCacheEntry> List() const;
  // Removes every entry and temporary file (nothing else in the directory); returns how many.
  uint64_t Clear();
  const std::string& dir() const { return dir_; }
  const std::string& build() const { return build_; }
  uint64_t max_bytes() const { return max_bytes_; }
  DiskCacheStats stats() const;

 private:
  void CountRejection(DiskCacheRejection reason);
  void EvictToBound();

  const std::string dir_;
  const uint64_t max_bytes_;
  const std::string build_;
  std::mutex evict_mu_;  // one eviction scan at a time in this process
  std::atomic<uint64_t> hits_{0}, misses_{0}, writes_{0}, evictions_{0};
  std::array<std::atomic<uint64_t>, kNumDiskCacheRejections> rejections_{};
};

}  // namespace kiln
