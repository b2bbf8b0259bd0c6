// The disk cache: entry encoding, the directory layout, and the
// look → lock → look again → compile → store protocol described in cache.h.
#include "runtime/cache.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace flashjit {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'F', 'J', 'I', 'T', 'C', 'U', 'B', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kChecksumSeed = 0;
constexpr const char* kEntrySuffix = ".fjc";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTempSuffix = ".tmp";
constexpr mode_t kDirMode = 0700;   // kernels are private to their user
constexpr mode_t kFileMode = 0600;
constexpr uint64_t kDefaultMaxMb = 1024;
constexpr size_t kHashHexDigits = 16;
// Leaves room under NAME_MAX (255) for "-<hash>.fjc" plus the lock and temp suffixes.
constexpr size_t kMaxSpecChars = 160;
// A writer never holds a temp file this long; an older one is left by a crash.
constexpr int64_t kStaleTempSeconds = 3600;
// Lock files replaced under us (clear, eviction) are retried this many times,
// then we go on unlocked: the atomic rename still leaves one valid entry.
constexpr int kMaxLockAttempts = 8;

std::string errno_text(int err) { return std::system_category().message(err); }

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_truthy(const std::string& v) {
  return v == "1" || v == "true" || v == "TRUE" || v == "yes" || v == "on";
}

std::string home_dir() {
  std::string home = env_or_empty("HOME");
  if (!home.empty()) return home;
  // Services may run without HOME; the password database still knows it.
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir)
    return found->pw_dir;
  return {};
}

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> dirs;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) dirs.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

uint64_t parse_max_mb(const std::string& v) {
  if (v.empty()) return kDefaultMaxMb;
  char* end = nullptr;
  errno = 0;
  const unsigned long long mb = std::strtoull(v.c_str(), &end, 10);
  // A malformed value keeps the default rather than silently capping at 0.
  if (errno != 0 || *end != '\0' || v[0] == '-' || mb > (UINT64_MAX >> 20)) return kDefaultMaxMb;
  return mb;
}

// ---- entry encoding ---------------------------------------------------------

void append_le(std::vector<char>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

/// Reads little-endian fields from an entry, refusing to run past its end.
class EntryReader {
 public:
  explicit EntryReader(const std::vector<char>& bytes) : bytes_(bytes) {}
  bool has(uint64_t n) const { return n <= bytes_.size() - pos_; }
  size_t pos() const { return pos_; }
  size_t left() const { return bytes_.size() - pos_; }
  uint64_t le(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  const char* take(size_t n) {
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  const std::vector<char>& bytes_;
  size_t pos_ = 0;
};

Error entry_error(const std::string& what) { return make_error(Status::kCacheError, what); }

Error truncated(const char* field, uint64_t need, size_t left) {
  return entry_error(fmt::format("truncated: {} needs {} bytes, only {} left", field, need, left));
}

// ---- files ------------------------------------------------------------------

/// The whole file, or the errno that stopped reading it.
struct FileBytes {
  int err = 0;
  std::vector<char> bytes;
};

FileBytes read_file(const std::string& path) {
  FileBytes out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.err = errno;
    return out;
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.bytes.insert(out.bytes.end(), buf, buf + n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      out.err = errno;
      break;
    }
  }
  ::close(fd);
  return out;
}

int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

/// Creates `path` (which must not exist), writes `bytes` and fsyncs it, so
/// that the rename that publishes it never exposes a partly written entry.
int write_new_file_durably(const std::string& path, const std::vector<char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
  if (fd < 0) return errno;
  int err = write_all(fd, bytes.data(), bytes.size());
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Makes a rename durable; failure only weakens crash safety, so it is ignored.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

/// `mkdir -p` where every directory it creates is private to the user. 0 or an errno.
int make_private_dirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (::mkdir(prefix.c_str(), kDirMode) != 0) {
      const int err = errno;
      if (err != EEXIST) return err;
      if (::stat(prefix.c_str(), &st) != 0) return errno;
      if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    }
    if (slash == std::string::npos) return 0;
  }
}

/// Unique among processes (pid), threads (thread id) and calls (counter).
std::string temp_path_for(const std::string& final_path) {
  static std::atomic<uint64_t> counter{0};
  const size_t thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return fmt::format("{}.{}.{:x}.{}{}", final_path, ::getpid(), thread, counter++, kTempSuffix);
}

/// One regular file of a cache directory.
struct DirFile {
  std::string path;
  std::string name;
  uint64_t bytes = 0;
  timespec mtime{};
};

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

/// The regular files of `dir`; a missing directory is an empty one.
std::vector<DirFile> scan_dir(const std::string& dir, std::error_code* error = nullptr) {
  std::vector<DirFile> files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    DirFile f;
    f.name = it->path().filename().string();
    f.path = join_path(dir, f.name);
    struct stat st;
    if (::lstat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    f.bytes = static_cast<uint64_t>(st.st_size);
    f.mtime = st.st_mtim;
    files.push_back(std::move(f));
  }
  if (error) *error = ec == std::errc::no_such_file_or_directory ? std::error_code() : ec;
  std::sort(files.begin(), files.end(), [](const DirFile& a, const DirFile& b) { return a.name < b.name; });
  return files;
}

void remove_stale_temps(const std::vector<DirFile>& files) {
  const int64_t cutoff = static_cast<int64_t>(::time(nullptr)) - kStaleTempSeconds;
  for (const DirFile& f : files)
    if (ends_with(f.name, kTempSuffix) && f.mtime.tv_sec < cutoff) ::unlink(f.path.c_str());
}

// ---- locks ------------------------------------------------------------------

enum class LockWait { kBlock, kTry };

/// An exclusive flock on "<entry>.lock", released when destroyed. flock locks
/// belong to the open file, so threads of one process exclude each other too.
class EntryLock {
 public:
  enum class State { kHeld, kBusy, kUnavailable };

  static EntryLock acquire(const std::string& path, LockWait wait, bool create) {
    const int op = wait == LockWait::kBlock ? LOCK_EX : LOCK_EX | LOCK_NB;
    for (int attempt = 0; attempt < kMaxLockAttempts; ++attempt) {
      const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), kFileMode);
      if (fd < 0) return EntryLock(-1, State::kUnavailable);
      int rc;
      while ((rc = ::flock(fd, op)) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        const State state = errno == EWOULDBLOCK ? State::kBusy : State::kUnavailable;
        ::close(fd);
        return EntryLock(-1, state);
      }
      if (still_linked(fd, path)) return EntryLock(fd, State::kHeld);
      // The file was unlinked while we waited (clear, eviction): a newcomer
      // would lock its replacement, so we must lock that one too.
      ::close(fd);
    }
    return EntryLock(-1, State::kUnavailable);
  }

  EntryLock(EntryLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), state_(other.state_) {}
  EntryLock& operator=(EntryLock&&) = delete;
  ~EntryLock() { release(); }

  State state() const { return state_; }
  bool held() const { return fd_ >= 0; }
  void release() {
    if (fd_ >= 0) ::close(fd_);  // closing drops the flock
    fd_ = -1;
  }

 private:
  EntryLock(int fd, State state) : fd_(fd), state_(state) {}

  static bool still_linked(int fd, const std::string& path) {
    struct stat by_fd, by_path;
    return ::fstat(fd, &by_fd) == 0 && ::stat(path.c_str(), &by_path) == 0 &&
           by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
  }

  int fd_;
  State state_;
};

// Unlinking only while holding the lock keeps a concurrent holder's exclusion:
// waiters on the old inode notice it is gone and lock the new one.
void remove_idle_lock_file(const std::string& lock_path) {
  EntryLock lock = EntryLock::acquire(lock_path, LockWait::kTry, /*create=*/false);
  if (lock.held()) ::unlink(lock_path.c_str());
}

// ---- entries on disk --------------------------------------------------------

/// What reading one entry file found.
struct EntryRead {
  enum class State { kMissing, kValid, kInvalid } state = State::kMissing;
  std::vector<char> payload;
  std::string problem;
};

EntryRead read_entry(const std::string& path, const std::string& key_text) {
  EntryRead r;
  FileBytes file = read_file(path);
  // ENOTDIR: the directory itself is missing or not a directory; that is a miss too.
  if (file.err == ENOENT || file.err == ENOTDIR) return r;
  if (file.err != 0) {
    r.state = EntryRead::State::kInvalid;
    r.problem = "cannot be read: " + errno_text(file.err);
    return r;
  }
  Result<std::vector<char>> decoded = decode_cache_entry(file.bytes, key_text);
  if (!decoded.ok()) {
    r.state = EntryRead::State::kInvalid;
    r.problem = decoded.error().message;
    return r;
  }
  r.state = EntryRead::State::kValid;
  r.payload = std::move(decoded).value();
  return r;
}

// Marks the entry as recently used, for LRU eviction. Best effort.
void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool is_hex_hash(const std::string& s) {
  return s.size() == kHashHexDigits &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// Splits "<spec>-<16 hex digits>.fjc"; false when the name has another shape.
bool parse_entry_name(const std::string& name, std::string* spec, std::string* hash_hex) {
  if (!ends_with(name, kEntrySuffix)) return false;
  const std::string stem = name.substr(0, name.size() - std::strlen(kEntrySuffix));
  const size_t dash = stem.rfind('-');
  if (dash == std::string::npos || !is_hex_hash(stem.substr(dash + 1))) return false;
  *spec = stem.substr(0, dash);
  *hash_hex = stem.substr(dash + 1);
  return true;
}

/// Why the entry file at `path` is invalid, or "" when it is valid. Needs no
/// key: the file name must carry the hash of the key text the entry holds.
std::string entry_problem(const std::string& path) {
  std::string spec, name_hash;
  if (!parse_entry_name(fs::path(path).filename().string(), &spec, &name_hash))
    return "file name is not <spec>-<16 hex digits>.fjc";
  FileBytes file = read_file(path);
  if (file.err != 0) return "cannot be read: " + errno_text(file.err);
  std::string key_text;
  Result<std::vector<char>> decoded = decode_cache_entry(file.bytes, "", &key_text);
  if (!decoded.ok()) return decoded.error().message;
  // Another key's entry under this name would be returned for the wrong key.
  if (fmt::format("{:016x}", CacheKey{spec, key_text}.hash()) != name_hash)
    return "key mismatch (the file name is not the hash of the key it holds)";
  return {};
}

// Removes an invalid entry unless its writer holds the lock (it is about to
// replace it) or it became valid meanwhile.
void remove_if_still_invalid(const std::string& path) {
  EntryLock lock = EntryLock::acquire(path + kLockSuffix, LockWait::kTry, /*create=*/true);
  if (lock.state() == EntryLock::State::kBusy) return;
  if (!entry_problem(path).empty()) ::unlink(path.c_str());
}

CacheEntryInfo describe_entry(const DirFile& file, bool readonly) {
  CacheEntryInfo info;
  info.path = file.path;
  info.bytes = file.bytes;
  info.mtime = file.mtime.tv_sec;
  info.readonly = readonly;
  std::string name_hash;
  if (!parse_entry_name(file.name, &info.spec, &name_hash))
    info.spec = file.name.substr(0, file.name.size() - std::strlen(kEntrySuffix));
  info.problem = entry_problem(file.path);
  info.valid = info.problem.empty();
  return info;
}

void append_dir_entries(const std::string& dir, bool readonly, std::vector<CacheEntryInfo>* out) {
  if (dir.empty()) return;
  for (const DirFile& f : scan_dir(dir))
    if (ends_with(f.name, kEntrySuffix)) out->push_back(describe_entry(f, readonly));
}

/// Evicts oldest-used entries of `dir` until it holds at most `max_bytes`,
/// never `keep_path` (the entry just written).
void evict_until_under_cap(const std::string& dir, uint64_t max_bytes, const std::string& keep_path) {
  std::vector<DirFile> files = scan_dir(dir);
  remove_stale_temps(files);
  std::vector<DirFile> entries;
  uint64_t total = 0;
  for (DirFile& f : files) {
    if (!ends_with(f.name, kEntrySuffix)) continue;
    total += f.bytes;
    entries.push_back(std::move(f));
  }
  if (total <= max_bytes) return;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const DirFile& a, const DirFile& b) { return older(a.mtime, b.mtime); });
  for (const DirFile& e : entries) {
    if (total <= max_bytes) break;
    if (e.path == keep_path) continue;
    if (::unlink(e.path.c_str()) != 0 && errno != ENOENT) continue;
    total -= e.bytes;
    remove_idle_lock_file(e.path + kLockSuffix);
  }
}

}  // namespace

// ---- keys and options -------------------------------------------------------

uint64_t CacheKey::hash() const { return XXH64(text.data(), text.size(), kChecksumSeed); }

std::string CacheKey::file_name() const {
  std::string safe = spec.substr(0, kMaxSpecChars);
  for (char& c : safe) {
    const bool allowed = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                         c == '_' || c == '.' || c == '-';
    if (!allowed) c = '_';
  }
  return fmt::format("{}-{:016x}{}", safe, hash(), kEntrySuffix);
}

const char* to_string(CacheOutcome o) {
  switch (o) {
    case CacheOutcome::kMemoryHit: return "memory_hit";
    case CacheOutcome::kDiskHit: return "disk_hit";
    case CacheOutcome::kCompiled: return "compiled";
  }
  return "unknown";
}

CacheOptions CacheOptions::from_env() {
  CacheOptions o;
  o.dir = env_or_empty("FLASHJIT_CACHE_DIR");
  if (o.dir.empty()) {
    // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    const std::string xdg = env_or_empty("XDG_CACHE_HOME");
    if (!xdg.empty() && xdg[0] == '/') {
      o.dir = join_path(xdg, "flashjit");
    } else {
      const std::string home = home_dir();
      if (!home.empty()) o.dir = join_path(home, ".cache/flashjit");
    }
  }
  o.readonly_dirs = split_path_list(env_or_empty("FLASHJIT_CACHE_PATH"));
  // No directory at all (no HOME, no passwd entry): nowhere to write, so the disk layer is off.
  o.disk_enabled = !o.dir.empty() && !env_truthy(env_or_empty("FLASHJIT_CACHE_DISABLE"));
  o.max_bytes = parse_max_mb(env_or_empty("FLASHJIT_CACHE_MAX_MB")) << 20;
  return o;
}

// ---- encoding ---------------------------------------------------------------

std::vector<char> encode_cache_entry(const CacheKey& key, const std::vector<char>& payload) {
  // Starts from the magic rather than inserting it into an empty reserved
  // vector, which GCC 12 at -O2 takes for a write past a 0-byte buffer.
  std::vector<char> out(kMagic, kMagic + sizeof kMagic);
  out.reserve(sizeof kMagic + 4 + 4 + key.text.size() + 8 + payload.size() + 8);
  append_le(out, kFormatVersion, 4);
  append_le(out, key.text.size(), 4);
  out.insert(out.end(), key.text.begin(), key.text.end());
  append_le(out, payload.size(), 8);
  out.insert(out.end(), payload.begin(), payload.end());
  append_le(out, XXH64(out.data(), out.size(), kChecksumSeed), 8);
  return out;
}

Result<std::vector<char>> decode_cache_entry(const std::vector<char>& bytes, const std::string& expected_key_text,
                                             std::string* key_text_out) {
  EntryReader in(bytes);
  if (!in.has(sizeof kMagic)) return truncated("the magic", sizeof kMagic, in.left());
  if (std::memcmp(in.take(sizeof kMagic), kMagic, sizeof kMagic) != 0)
    return entry_error("bad magic (not a flashjit cache entry)");
  if (!in.has(4)) return truncated("the format version", 4, in.left());
  const uint64_t version = in.le(4);
  if (version != kFormatVersion)
    return entry_error(fmt::format("unsupported format version {} (expected {})", version, kFormatVersion));
  if (!in.has(4)) return truncated("the key length", 4, in.left());
  const uint64_t key_size = in.le(4);
  if (!in.has(key_size)) return truncated("the key", key_size, in.left());
  std::string key_text(in.take(key_size), key_size);
  if (!in.has(8)) return truncated("the payload length", 8, in.left());
  const uint64_t payload_size = in.le(8);
  if (!in.has(payload_size)) return truncated("the payload", payload_size, in.left());
  const char* payload = in.take(payload_size);
  const size_t checksummed = in.pos();
  if (!in.has(8)) return truncated("the checksum", 8, in.left());
  const uint64_t stored_checksum = in.le(8);
  if (in.left() != 0)
    return entry_error(fmt::format("length mismatch: {} unexpected bytes after the checksum", in.left()));
  if (XXH64(bytes.data(), checksummed, kChecksumSeed) != stored_checksum) return entry_error("checksum mismatch");
  // Checked last: only an intact entry can say whose it is.
  if (!expected_key_text.empty() && key_text != expected_key_text)
    return entry_error("key mismatch (the entry holds another kernel's key)");
  if (key_text_out) *key_text_out = std::move(key_text);
  return std::vector<char>(payload, payload + payload_size);
}

// ---- DiskCache --------------------------------------------------------------

DiskCache::DiskCache(CacheOptions options, std::function<void(const std::string&)> warn)
    : options_(std::move(options)), warn_(std::move(warn)) {}

bool DiskCache::writable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.disk_enabled && !dir_failed_;
}

std::string DiskCache::user_path(const CacheKey& key) const { return join_path(options_.dir, key.file_name()); }

Error DiskCache::mark_unwritable(const std::string& problem) {
  const std::string message =
      fmt::format("flashjit cache: {}; kernels will be compiled but not cached", problem);
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = !dir_failed_;
    dir_failed_ = true;
  }
  // Called outside mu_ so that a callback may use this cache.
  if (first && warn_) warn_(message);
  return make_error(Status::kCacheError, message);
}

void DiskCache::report_invalid(const std::string& path, const std::string& problem, bool readonly) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(warned_corrupt_.begin(), warned_corrupt_.end(), path) != warned_corrupt_.end()) return;
    warned_corrupt_.push_back(path);
  }
  if (warn_)
    warn_(fmt::format("flashjit cache: invalid entry {}: {}; {}", path, problem,
                      readonly ? "ignoring it (read-only layer)" : "removing it and recompiling"));
}

// Re-run on every miss (one stat when the directory exists), so a cache
// directory deleted while the process runs is simply created again.
bool DiskCache::ensure_dir() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dir_failed_) return false;
  }
  if (options_.dir.empty()) {
    mark_unwritable("no cache directory was given");
    return false;
  }
  const int err = make_private_dirs(options_.dir);
  if (err == 0) return true;
  mark_unwritable(fmt::format("cannot create {}: {}", options_.dir, errno_text(err)));
  return false;
}

std::optional<std::vector<char>> DiskCache::lookup(const CacheKey& key, bool* user_entry_invalid) {
  if (user_entry_invalid) *user_entry_invalid = false;
  const std::string name = key.file_name();
  for (const std::string& dir : options_.readonly_dirs) {
    const std::string path = join_path(dir, name);
    EntryRead r = read_entry(path, key.text);
    if (r.state == EntryRead::State::kValid) return std::move(r.payload);
    if (r.state == EntryRead::State::kInvalid) report_invalid(path, r.problem, /*readonly=*/true);
  }
  const std::string path = user_path(key);
  EntryRead r = read_entry(path, key.text);
  if (r.state == EntryRead::State::kValid) {
    touch(path);
    return std::move(r.payload);
  }
  if (r.state == EntryRead::State::kInvalid) {
    report_invalid(path, r.problem, /*readonly=*/false);
    if (user_entry_invalid) *user_entry_invalid = true;
  }
  return std::nullopt;
}

Result<void> DiskCache::write_entry(const CacheKey& key, const std::vector<char>& payload) {
  if (!ensure_dir()) return make_error(Status::kCacheError, "cache directory " + options_.dir + " is not writable");
  const std::string final_path = user_path(key);
  const std::string temp_path = temp_path_for(final_path);
  int err = write_new_file_durably(temp_path, encode_cache_entry(key, payload));
  if (err == 0 && ::rename(temp_path.c_str(), final_path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp_path.c_str());
    return mark_unwritable(fmt::format("cannot write to {}: {}", options_.dir, errno_text(err)));
  }
  sync_directory(options_.dir);
  return {};
}

Result<std::vector<char>> DiskCache::get_or_compile(const CacheKey& key,
                                                    const std::function<Result<std::vector<char>>()>& compile,
                                                    CacheOutcome* outcome) {
  auto report = [outcome](CacheOutcome o) {
    if (outcome) *outcome = o;
  };
  report(CacheOutcome::kCompiled);
  if (!options_.disk_enabled) return compile();

  // An invalid entry found here is removed below, under the lock.
  if (auto hit = lookup(key, /*user_entry_invalid=*/nullptr)) {
    report(CacheOutcome::kDiskHit);
    return std::move(*hit);
  }
  if (!ensure_dir()) return compile();

  const std::string path = user_path(key);
  // Without a lock file (read-only directory) we go on unlocked: the rename
  // still leaves one valid entry, at the cost of maybe compiling twice.
  EntryLock lock = EntryLock::acquire(path + kLockSuffix, LockWait::kBlock, /*create=*/true);
  // Another process may have stored the entry while we waited for the lock.
  EntryRead again = read_entry(path, key.text);
  if (again.state == EntryRead::State::kValid) {
    touch(path);
    report(CacheOutcome::kDiskHit);
    return std::move(again.payload);
  }
  if (again.state == EntryRead::State::kInvalid) {
    report_invalid(path, again.problem, /*readonly=*/false);
    ::unlink(path.c_str());
  }

  Result<std::vector<char>> compiled = compile();
  if (!compiled.ok()) return compiled;
  const bool stored = write_entry(key, compiled.value()).ok();
  lock.release();
  if (stored) evict_until_under_cap(options_.dir, options_.max_bytes, path);
  return compiled;
}

std::optional<std::vector<char>> DiskCache::load(const CacheKey& key) {
  if (!options_.disk_enabled) return std::nullopt;
  bool invalid = false;
  std::optional<std::vector<char>> hit = lookup(key, &invalid);
  if (invalid) remove_if_still_invalid(user_path(key));
  return hit;
}

Result<void> DiskCache::store(const CacheKey& key, const std::vector<char>& payload) {
  if (!options_.disk_enabled) return make_error(Status::kCacheError, "the disk cache is disabled");
  Result<void> written = write_entry(key, payload);
  if (written.ok()) evict_until_under_cap(options_.dir, options_.max_bytes, user_path(key));
  return written;
}

std::vector<CacheEntryInfo> DiskCache::list() const {
  std::vector<CacheEntryInfo> entries;
  for (const std::string& dir : options_.readonly_dirs) append_dir_entries(dir, /*readonly=*/true, &entries);
  append_dir_entries(options_.dir, /*readonly=*/false, &entries);
  return entries;
}

// Counts the user's directory only: that is what max_bytes caps.
CacheStats DiskCache::stats() const {
  CacheStats s;
  s.dir = options_.dir;
  s.disk_enabled = options_.disk_enabled;
  s.writable = writable();
  s.max_bytes = options_.max_bytes;
  if (options_.dir.empty()) return s;
  for (const DirFile& f : scan_dir(options_.dir)) {
    if (!ends_with(f.name, kEntrySuffix)) continue;
    ++s.entries;
    s.bytes += f.bytes;
  }
  return s;
}

std::vector<CacheEntryInfo> DiskCache::verify(bool remove_bad) {
  std::vector<CacheEntryInfo> bad;
  for (CacheEntryInfo& e : list()) {
    if (e.valid) continue;
    if (remove_bad && !e.readonly) remove_if_still_invalid(e.path);
    bad.push_back(std::move(e));
  }
  return bad;
}

Result<uint64_t> DiskCache::clear() {
  if (options_.dir.empty()) return uint64_t{0};
  std::error_code ec;
  std::vector<DirFile> files = scan_dir(options_.dir, &ec);
  if (ec) return make_error(Status::kCacheError, fmt::format("cannot read {}: {}", options_.dir, ec.message()));
  remove_stale_temps(files);
  uint64_t removed = 0;
  std::string failure;
  for (const DirFile& f : files) {
    if (ends_with(f.name, kLockSuffix)) {
      remove_idle_lock_file(f.path);
    } else if (ends_with(f.name, kEntrySuffix)) {
      if (::unlink(f.path.c_str()) == 0) {
        ++removed;
      } else if (const int err = errno; err != ENOENT && failure.empty()) {
        failure = fmt::format("cannot remove {}: {}", f.path, errno_text(err));
      }
    }
  }
  if (!failure.empty()) return make_error(Status::kCacheError, failure);
  return removed;
}

void DiskCache::enforce_cap() {
  if (options_.dir.empty()) return;
  evict_until_under_cap(options_.dir, options_.max_bytes, /*keep_path=*/"");
}

}  // namespace flashjit
