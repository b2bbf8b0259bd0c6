// The disk cache of compiled kernels (cubins). jitify's file cache is the model:
// an entry is written to a temp file in the same directory, fsync'd and renamed
// atomically; a lock is taken only on a miss, and the cache is looked at again
// after taking it; every entry starts with a magic number and a format version,
// carries its full key text, and ends with a checksum.
//
// Entry layout (little-endian):
//   magic "FJITCUBN" (8 bytes) | u32 format version | u32 key length | key text
//   | u64 payload length | payload | u64 xxh64(everything before this field)
//
// Location: FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else
// ~/.cache/flashjit, created 0700. FLASHJIT_CACHE_PATH (':'-separated) lists
// read-only layers searched first (a pack shipped with an application).
// FLASHJIT_CACHE_DISABLE=1 turns the disk layer off; FLASHJIT_CACHE_MAX_MB
// (default 1024) caps the user directory, evicting least-recently-used entries.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/status.h"

namespace flashjit {

/// Everything that determines a cubin. `text` is the full key (printed into the
/// entry and compared on load, so a hash collision can never return a wrong cubin).
struct CacheKey {
  std::string spec;  ///< canonical spec string, used in the file name
  std::string text;  ///< spec, template-source hash, NVRTC version, arch, options, flashjit version
  /// xxh64 of `text`.
  uint64_t hash() const;
  /// "<spec>-<16 hex digits of hash>.fjc"
  std::string file_name() const;
};

enum class CacheOutcome { kMemoryHit, kDiskHit, kCompiled };
const char* to_string(CacheOutcome o);  ///< "memory_hit", "disk_hit", "compiled"

struct CacheOptions {
  std::string dir;                         ///< the user's read-write directory
  std::vector<std::string> readonly_dirs;  ///< searched before `dir`, never written
  bool disk_enabled = true;
  uint64_t max_bytes = 1024ull << 20;
  /// Reads the FLASHJIT_CACHE_* variables (see the file comment).
  static CacheOptions from_env();
};

/// One entry as listed by `flashjit cache list`.
struct CacheEntryInfo {
  std::string path;
  std::string spec;
  uint64_t bytes = 0;
  int64_t mtime = 0;  ///< seconds since the epoch (last use: hits touch it)
  bool valid = false;
  std::string problem;  ///< why it is invalid, when it is
  bool readonly = false;
};

struct CacheStats {
  std::string dir;
  bool disk_enabled = false;
  bool writable = false;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
};

/// The disk layer. Thread-safe; safe across processes.
class DiskCache {
 public:
  /// `warn` receives each warning (unwritable directory, corrupt entry); the
  /// library never prints. May be empty; may be called from any thread.
  explicit DiskCache(CacheOptions options, std::function<void(const std::string&)> warn = {});

  /// Returns the cubin for `key`, from a read-only layer or the user's
  /// directory, or calls `compile` and stores its result. When several
  /// processes or threads miss on one key at once, one compiles (under an
  /// exclusive file lock), the rest wait and then read its entry; every caller
  /// gets a valid cubin and exactly one valid entry is left. A corrupt or
  /// truncated entry is reported once through `warn`, removed and recompiled.
  /// If the directory cannot be written the result is still returned (the
  /// caller's in-memory cache keeps it) and one warning is given.
  Result<std::vector<char>> get_or_compile(const CacheKey& key,
                                           const std::function<Result<std::vector<char>>()>& compile,
                                           CacheOutcome* outcome);

  /// Looks up without compiling. nullopt on a miss or an invalid entry.
  std::optional<std::vector<char>> load(const CacheKey& key);
  /// Writes an entry atomically (temp file, fsync, rename), then enforces the size cap.
  Result<void> store(const CacheKey& key, const std::vector<char>& payload);

  std::vector<CacheEntryInfo> list() const;
  CacheStats stats() const;
  /// Checks every entry; returns the invalid ones (and removes them if `remove_bad`).
  std::vector<CacheEntryInfo> verify(bool remove_bad);
  /// Removes every entry of the user's directory; returns how many.
  Result<uint64_t> clear();
  /// Evicts least-recently-used entries until the directory is under max_bytes.
  void enforce_cap();

  const CacheOptions& options() const { return options_; }
  /// False once the directory turned out unwritable (or the disk layer is off).
  bool writable() const;

 private:
  CacheOptions options_;
  std::function<void(const std::string&)> warn_;
  mutable std::mutex mu_;
  bool dir_failed_ = false;  ///< set (and warned about) once; no write is tried after it
  std::vector<std::string> warned_corrupt_;
  bool ensure_dir();  ///< mkdir -p, 0700; false (after one warning) if it cannot be created
  std::string user_path(const CacheKey& key) const;
  /// Read-only layers, then the user's directory (a hit there is touched). Unlocked.
  std::optional<std::vector<char>> lookup(const CacheKey& key, bool* user_entry_invalid);
  /// Temp file, fsync, rename, fsync of the directory; no lock, no eviction.
  Result<void> write_entry(const CacheKey& key, const std::vector<char>& payload);
  Error mark_unwritable(const std::string& problem);  ///< warns the first time only
  void report_invalid(const std::string& path, const std::string& problem, bool readonly);  ///< once per path
};

/// Serializes an entry (exposed for tests and `flashjit cache verify`).
std::vector<char> encode_cache_entry(const CacheKey& key, const std::vector<char>& payload);
/// Parses an entry; the error says what is wrong (bad magic, version, key
/// mismatch, truncated, checksum). `expected_key_text` may be empty to skip the key check.
Result<std::vector<char>> decode_cache_entry(const std::vector<char>& bytes,
                                             const std::string& expected_key_text,
                                             std::string* key_text_out = nullptr);

}  // namespace flashjit
