#include "jit/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "ir/error.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'C', '\r', '\n'};
constexpr const char* kEntrySuffix = ".kc";
constexpr const char* kTempPrefix = ".tmp-";
// A temporary file this old belongs to a writer that died; live writers rename within moments.
constexpr time_t kStaleTempSeconds = 3600;
// Larger files are not read (a bad length field must not make us allocate without bound).
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 32;

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLE(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

std::string Hex16(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 0xf];
  return s;
}

std::string ErrnoText() {
  return std::strerror(errno);
}

// An entry's file name: 16 hex digits and the suffix.
bool IsEntryName(const std::string& name) {
  const size_t n = std::strlen(kEntrySuffix);
  if (name.size() != 16 + n || name.compare(16, n, kEntrySuffix) != 0) return false;
  return std::all_of(name.begin(), name.begin() + 16,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The whole of an open entry file into `bytes`, or why it cannot be used.
std::optional<DiskCacheRejection> ReadEntryFile(int fd, std::string* bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return DiskCacheRejection::kUnreadable;
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) return DiskCacheRejection::kBadLength;
  bytes->assign(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes->size()) {
    ssize_t n = read(fd, bytes->data() + got, bytes->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return DiskCacheRejection::kUnreadable;
    if (n == 0) break;  // shorter than fstat said: decoding calls it truncated
    got += static_cast<size_t>(n);
  }
  bytes->resize(got);
  return std::nullopt;
}

// Creates `dir` and its missing parents; each directory made here is owner-only.
void MakeDirs(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir, "': cannot create '",
            prefix, "': ", ErrnoText());
    if (slash == std::string::npos) return;
  }
}

}  // namespace

const char* DiskCacheRejectionName(DiskCacheRejection r) {
  switch (r) {
#define KILN_X(e, name)       \
  case DiskCacheRejection::e: \
    return name;
    KILN_DISK_CACHE_REJECTIONS(KILN_X)
#undef KILN_X
  }
  return "unknown";
}

uint64_t Fnv1a64(std::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string EncodeDiskCacheEntry(std::string_view build, std::string_view key,
                                 std::string_view payload) {
  std::string out;
  out.reserve(sizeof(kMagic) + 4 + 8 + build.size() + 8 + key.size() + 16 + payload.size());
  out.append(kMagic, sizeof(kMagic));
  PutLE(&out, kDiskCacheFormatVersion, 4);
  PutLE(&out, build.size(), 8);
  out.append(build);
  PutLE(&out, key.size(), 8);
  out.append(key);
  PutLE(&out, payload.size(), 8);
  PutLE(&out, Fnv1a64(payload, Fnv1a64(key, Fnv1a64(build))), 8);
  out.append(payload);
  return out;
}

std::optional<DiskCacheRejection> DecodeDiskCacheEntry(std::string_view bytes, std::string* build,
                                                       std::string* key, std::string* payload) {
  // Every length read from the file is compared with what is left before it is used, by
  // subtraction, so no field value can overflow an offset or reach past `bytes`.
  size_t at = 0;
  auto left = [&] { return bytes.size() - at; };
  if (left() < sizeof(kMagic)) return DiskCacheRejection::kTruncated;
  if (bytes.compare(0, sizeof(kMagic), std::string_view(kMagic, sizeof(kMagic))) != 0)
    return DiskCacheRejection::kBadMagic;
  at += sizeof(kMagic);
  if (left() < 4) return DiskCacheRejection::kTruncated;
  if (GetLE(bytes, at, 4) != kDiskCacheFormatVersion) return DiskCacheRejection::kBadVersion;
  at += 4;
  // A length-prefixed field; empty when the bytes are too few for it.
  auto field = [&](std::string_view* out) {
    if (left() < 8) return false;
    const uint64_t size = GetLE(bytes, at, 8);
    at += 8;
    if (size > left()) return false;
    *out = bytes.substr(at, size);
    at += size;
    return true;
  };
  std::string_view build_bytes, key_bytes;
  if (!field(&build_bytes) || !field(&key_bytes)) return DiskCacheRejection::kTruncated;
  if (left() < 16) return DiskCacheRejection::kTruncated;
  const uint64_t payload_size = GetLE(bytes, at, 8);
  const uint64_t checksum = GetLE(bytes, at + 8, 8);
  at += 16;
  if (payload_size > left()) return DiskCacheRejection::kTruncated;
  if (payload_size < left()) return DiskCacheRejection::kBadLength;
  std::string_view payload_bytes = bytes.substr(at, payload_size);
  if (Fnv1a64(payload_bytes, Fnv1a64(key_bytes, Fnv1a64(build_bytes))) != checksum)
    return DiskCacheRejection::kChecksum;
  build->assign(build_bytes);
  key->assign(key_bytes);
  payload->assign(payload_bytes);
  return std::nullopt;
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes, std::string build)
    : dir_(std::move(dir)), max_bytes_(max_bytes), build_(std::move(build)) {
  if (dir_.empty()) Throw(ErrorCode::kInvalidArgument, "kernel cache directory: empty path");
  struct stat st;
  const bool existed = stat(dir_.c_str(), &st) == 0;
  if (!existed) {
    MakeDirs(dir_);
    if (stat(dir_.c_str(), &st) != 0)
      Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir_, "': ", ErrnoText());
    // Made here, so ours to set: the umask may have taken bits off 0700, never added any.
    if ((st.st_mode & 0777) != 0700 && chmod(dir_.c_str(), 0700) == 0) st.st_mode = S_IFDIR | 0700;
  }
  if (!S_ISDIR(st.st_mode))
    Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir_, "' is not a directory");
  if (st.st_uid != geteuid())
    Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir_, "' belongs to uid ",
          st.st_uid, ", not to this user (uid ", geteuid(),
          "); the cache holds machine code that kiln runs, so it must be the user's own");
  if ((st.st_mode & 0077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir_, "' has mode ", mode,
          "; the cache holds machine code that kiln runs, so only its owner may access it (chmod "
          "700 '",
          dir_, "')");
  }
}

std::string DiskCache::PathFor(const std::string& key) const {
  return StrCat(dir_, '/', Hex16(Fnv1a64(key)), kEntrySuffix);
}

void DiskCache::CountRejection(DiskCacheRejection reason) {
  rejections_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

DiskCache::Result DiskCache::Load(const std::string& key) {
  const std::string path = PathFor(key);
  Result r;
  auto reject = [&](DiskCacheRejection reason) {
    CountRejection(reason);
    unlink(path.c_str());  // the rebuild writes a new one
    r.status = Status::kRejected;
    r.reason = reason;
    return r;
  };
  // O_NOFOLLOW: an entry is a file this cache wrote, never a link to somewhere else.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return r;
    }
    return reject(DiskCacheRejection::kUnreadable);
  }
  std::string bytes;
  if (std::optional<DiskCacheRejection> bad = ReadEntryFile(fd, &bytes)) {
    close(fd);
    return reject(*bad);
  }
  std::string stored_build, stored_key;
  if (std::optional<DiskCacheRejection> bad =
          DecodeDiskCacheEntry(bytes, &stored_build, &stored_key, &r.payload)) {
    close(fd);
    return reject(*bad);
  }
  // Another build first: its entry may well be for this very key, and must not be used.
  if (stored_build != build_) {
    close(fd);
    r.payload.clear();
    return reject(DiskCacheRejection::kOtherBuild);
  }
  if (stored_key != key) {
    close(fd);
    r.payload.clear();
    return reject(DiskCacheRejection::kKeyMismatch);
  }
  futimens(fd, nullptr);  // now the most recently used; failing that only skews eviction
  close(fd);
  hits_.fetch_add(1, std::memory_order_relaxed);
  r.status = Status::kHit;
  return r;
}

void DiskCache::Reject(const std::string& key, DiskCacheRejection reason) {
  CountRejection(reason);
  unlink(PathFor(key).c_str());
}

void DiskCache::Store(const std::string& key, const std::string& payload) {
  const std::string path = PathFor(key);
  const std::string bytes = EncodeDiskCacheEntry(build_, key, payload);
  // It would evict everything else and then itself.
  if (bytes.size() > max_bytes_) return;
  std::string temp = StrCat(dir_, '/', kTempPrefix, Hex16(Fnv1a64(key)), "-XXXXXX");
  int fd = mkstemp(temp.data());  // 0600, a name no other writer has
  if (fd < 0)
    Throw(ErrorCode::kInvalidArgument, "kernel cache directory '", dir_,
          "': cannot create a file: ", ErrnoText());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = ErrnoText();
      close(fd);
      unlink(temp.c_str());
      Throw(ErrorCode::kInvalidArgument, "kernel cache: cannot write '", temp, "': ", why);
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = ErrnoText();
    unlink(temp.c_str());
    Throw(ErrorCode::kInvalidArgument, "kernel cache: cannot write '", path, "': ", why);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  EvictToBound();
}

uint64_t DiskCache::TotalBytes() const {
  uint64_t total = 0;
  DIR* d = opendir(dir_.c_str());
  if (!d) return 0;
  while (const dirent* e = readdir(d)) {
    struct stat st;
    if (IsEntryName(e->d_name) && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      total += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  return total;
}

void DiskCache::EvictToBound() {
  struct File {
    timespec mtime;
    uint64_t size;
    std::string name;
  };
  std::lock_guard<std::mutex> lock(evict_mu_);
  DIR* d = opendir(dir_.c_str());
  if (!d) return;  // the entry is written; the bound is enforced at the next write
  std::vector<File> files;
  uint64_t total = 0;
  const time_t now = time(nullptr);
  while (const dirent* e = readdir(d)) {
    std::string name = e->d_name;
    struct stat st;
    if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (IsEntryName(name)) {
      files.push_back(File{st.st_mtim, static_cast<uint64_t>(st.st_size), std::move(name)});
      total += files.back().size;
    } else if (name.rfind(kTempPrefix, 0) == 0 && now - st.st_mtim.tv_sec > kStaleTempSeconds) {
      unlinkat(dirfd(d), name.c_str(), 0);
    }
  }
  if (total > max_bytes_) {
    std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
      if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
      if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
      return a.name < b.name;
    });
    for (const File& f : files) {
      if (total <= max_bytes_) break;
      // Another process may have evicted or replaced it meanwhile; either way it is gone.
      if (unlinkat(dirfd(d), f.name.c_str(), 0) == 0)
        evictions_.fetch_add(1, std::memory_order_relaxed);
      total -= f.size;
    }
  }
  closedir(d);
}

std::vector<DiskCacheEntry> DiskCache::List() const {
  std::vector<DiskCacheEntry> out;
  DIR* d = opendir(dir_.c_str());
  if (!d) Throw(ErrorCode::kInvalidArgument, "cache directory '", dir_, "': ", ErrnoText());
  while (const dirent* e = readdir(d)) {
    if (!IsEntryName(e->d_name)) continue;
    DiskCacheEntry entry;
    entry.file = e->d_name;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // evicted meanwhile
      entry.problem = DiskCacheRejection::kUnreadable;
      out.push_back(std::move(entry));
      continue;
    }
    struct stat st;
    if (fstat(fd, &st) == 0) {
      entry.bytes = static_cast<uint64_t>(st.st_size);
      entry.modified = st.st_mtim.tv_sec;
    }
    std::string bytes, payload;
    entry.problem = ReadEntryFile(fd, &bytes);
    close(fd);
    if (!entry.problem) {
      entry.problem = DecodeDiskCacheEntry(bytes, &entry.build, &entry.key, &payload);
      entry.payload = std::move(payload);
    }
    if (!entry.problem && entry.build != build_) entry.problem = DiskCacheRejection::kOtherBuild;
    out.push_back(std::move(entry));
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const DiskCacheEntry& a, const DiskCacheEntry& b) { return a.file < b.file; });
  return out;
}

uint64_t DiskCache::Clear() {
  std::lock_guard<std::mutex> lock(evict_mu_);
  DIR* d = opendir(dir_.c_str());
  if (!d) Throw(ErrorCode::kInvalidArgument, "cache directory '", dir_, "': ", ErrnoText());
  uint64_t removed = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    // Only what this cache writes: entries and its temporary files; anything else is left.
    if (!IsEntryName(name) && name.rfind(kTempPrefix, 0) != 0) continue;
    if (unlinkat(dirfd(d), name.c_str(), 0) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

DiskCacheStats DiskCache::stats() const {
  DiskCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kNumDiskCacheRejections; ++i) {
    uint64_t n = rejections_[i].load(std::memory_order_relaxed);
    s.rejections += n;
    if (n) s.rejections_by_reason[DiskCacheRejectionName(static_cast<DiskCacheRejection>(i))] = n;
  }
  return s;
}

}  // namespace kiln
