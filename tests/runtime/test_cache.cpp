// Disk cache tests: the entry format, hits and misses, damaged entries,
// unwritable directories, the environment, the LRU cap, read-only layers, and
// processes and threads racing on one key. Each test owns a fresh /tmp directory.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cache.h"

namespace {

using namespace flashjit;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

using Bytes = std::vector<char>;
using CompileFn = std::function<Result<Bytes>()>;

/// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/flashjit_cache_test.XXXXXX";
    if (::mkdtemp(name)) path = name;
    REQUIRE(!path.empty());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path;
};

/// Sets or unsets environment variables for one test and restores them after.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

/// Collects warnings; thread-safe because the cache may warn from any thread.
class Warnings {
 public:
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(m);
    };
  }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  size_t count() { return messages().size(); }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
};

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

CacheKey make_key(const std::string& spec, const std::string& text) { return CacheKey{spec, text}; }

CacheOptions options_for(const std::string& dir, uint64_t max_bytes = 1ull << 30) {
  CacheOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  return o;
}

/// A compile callback that counts its calls and returns `payload`.
struct FakeCompiler {
  Bytes payload;
  std::atomic<int> calls{0};
  CompileFn fn() {
    return [this]() -> Result<Bytes> {
      ++calls;
      return payload;
    };
  }
};

CompileFn must_not_compile() {
  return []() -> Result<Bytes> { return make_error(Status::kInternal, "compile must not be called"); };
}

std::vector<std::string> files_ending(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(name);
  }
  return names;
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void set_mtime(const std::string& path, time_t seconds) {
  const timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

time_t mtime_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mtime;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Offset of the payload's first byte in an encoded entry (see cache.h's layout).
size_t payload_offset(const CacheKey& key) { return 8 + 4 + 4 + key.text.size() + 8; }

}  // namespace

// ---- entry format -------------------------------------------------------------

TEST_CASE("cache entries round-trip through encode and decode", "[cache]") {
  const CacheKey key = make_key("fwd_bf16_d128_sm90", "spec=fwd_bf16_d128_sm90;nvrtc=12.4;arch=sm_90");
  Bytes payload = bytes_of("ELF cubin");
  payload.push_back('\0');
  payload.push_back('\xff');

  const Bytes encoded = encode_cache_entry(key, payload);
  CHECK(std::string(encoded.data(), 8) == "FJITCUBN");
  CHECK(encoded.size() == payload_offset(key) + payload.size() + 8);

  std::string key_text;
  Result<Bytes> decoded = decode_cache_entry(encoded, key.text, &key_text);
  REQUIRE(decoded.ok());
  CHECK(decoded.value() == payload);
  CHECK(key_text == key.text);

  SECTION("an empty payload round-trips too") {
    Result<Bytes> empty = decode_cache_entry(encode_cache_entry(key, {}), key.text);
    REQUIRE(empty.ok());
    CHECK(empty.value().empty());
  }
  SECTION("an empty expected key skips the key check") {
    CHECK(decode_cache_entry(encoded, "").ok());
  }
}

TEST_CASE("decoding names what is wrong with a damaged entry", "[cache]") {
  const CacheKey key = make_key("spec", "the key text");
  const Bytes good = encode_cache_entry(key, bytes_of("payload bytes"));
  Bytes bad = good;
  std::string expected;

  SECTION("bad magic") {
    bad[0] = 'X';
    expected = "magic";
  }
  SECTION("unknown format version") {
    bad[8] = 2;
    expected = "version";
  }
  SECTION("flipped payload byte") {
    bad[payload_offset(key)] ^= 0x01;
    expected = "checksum";
  }
  SECTION("flipped checksum byte") {
    bad.back() ^= 0x01;
    expected = "checksum";
  }
  SECTION("bytes after the checksum") {
    bad.push_back('x');
    expected = "length mismatch";
  }
  SECTION("truncated to half") {
    bad.resize(good.size() / 2);
    expected = "truncated";
  }
  SECTION("another key's entry") {
    bad = encode_cache_entry(make_key("spec", "another key text"), bytes_of("payload bytes"));
    expected = "key mismatch";
  }
  Result<Bytes> r = decode_cache_entry(bad, key.text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status() == Status::kCacheError);
  CHECK_THAT(r.error().message, Catch::Contains(expected));
}

TEST_CASE("every proper prefix of an entry is rejected", "[cache]") {
  const CacheKey key = make_key("spec", "key");
  const Bytes good = encode_cache_entry(key, bytes_of("0123456789"));
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_FALSE(decode_cache_entry(Bytes(good.begin(), good.begin() + n), key.text).ok());
  }
}

TEST_CASE("cache file names are the spec and the key hash", "[cache]") {
  // xxh64 of the empty string with seed 0, from the xxHash reference.
  CHECK(make_key("fwd_bf16", "").hash() == 0xef46db3751d8e999ull);
  CHECK(make_key("fwd_bf16", "").file_name() == "fwd_bf16-ef46db3751d8e999.fjc");

  const CacheKey a = make_key("fwd_bf16", "text a");
  const CacheKey b = make_key("fwd_bf16", "text b");
  CHECK(a.hash() != b.hash());
  CHECK(a.file_name() != b.file_name());

  SECTION("unsafe characters are replaced") {
    const std::string name = make_key("../a b/c*", "t").file_name();
    CHECK(name.rfind(".._a_b_c_-", 0) == 0);
    CHECK(name.find('/') == std::string::npos);
  }
  SECTION("a very long spec still gives a legal file name") {
    CHECK(make_key(std::string(1000, 's'), "t").file_name().size() < 200);
  }
}

TEST_CASE("cache outcomes have stable names", "[cache]") {
  CHECK(std::string(to_string(CacheOutcome::kMemoryHit)) == "memory_hit");
  CHECK(std::string(to_string(CacheOutcome::kDiskHit)) == "disk_hit");
  CHECK(std::string(to_string(CacheOutcome::kCompiled)) == "compiled");
}

// ---- hits and misses ------------------------------------------------------------

TEST_CASE("a miss compiles and stores, and the next lookup is a disk hit", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  const CacheKey key = make_key("fwd_f16_d64", "key one");
  FakeCompiler compiler{bytes_of("cubin one")};

  CHECK_FALSE(cache.load(key).has_value());
  CacheOutcome outcome = CacheOutcome::kMemoryHit;
  Result<Bytes> first = cache.get_or_compile(key, compiler.fn(), &outcome);
  REQUIRE(first.ok());
  CHECK(first.value() == compiler.payload);
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK(compiler.calls == 1);
  CHECK(exists(tmp.path + "/" + key.file_name()));

  Result<Bytes> second = cache.get_or_compile(key, must_not_compile(), &outcome);
  REQUIRE(second.ok());
  CHECK(second.value() == compiler.payload);
  CHECK(outcome == CacheOutcome::kDiskHit);

  // A second object (as another process would) finds it too.
  DiskCache other(options_for(tmp.path));
  REQUIRE(other.load(key).has_value());
  CHECK(*other.load(key) == compiler.payload);
  CHECK(files_ending(tmp.path, ".tmp").empty());
  CHECK(warnings.count() == 0);
}

TEST_CASE("store then load returns the payload", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  const CacheKey key = make_key("spec", "key");
  REQUIRE(cache.store(key, bytes_of("stored")).ok());
  REQUIRE(cache.load(key).has_value());
  CHECK(*cache.load(key) == bytes_of("stored"));
  CHECK_FALSE(cache.load(make_key("spec", "other key")).has_value());
}

TEST_CASE("keys with the same spec and different text are different entries", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  const CacheKey k1 = make_key("fwd_bf16_d128", "fwd_bf16_d128;nvrtc=12.4");
  const CacheKey k2 = make_key("fwd_bf16_d128", "fwd_bf16_d128;nvrtc=12.6");
  FakeCompiler c1{bytes_of("cubin for 12.4")};
  FakeCompiler c2{bytes_of("cubin for 12.6")};

  CacheOutcome outcome;
  REQUIRE(cache.get_or_compile(k1, c1.fn(), &outcome).ok());
  Result<Bytes> r2 = cache.get_or_compile(k2, c2.fn(), &outcome);
  REQUIRE(r2.ok());
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK(r2.value() == c2.payload);
  CHECK(files_ending(tmp.path, ".fjc").size() == 2);
  CHECK(*cache.load(k1) == c1.payload);
  CHECK(*cache.load(k2) == c2.payload);

  SECTION("an entry of another key under this key's name (a hash collision) is never returned") {
    fs::copy_file(tmp.path + "/" + k1.file_name(), tmp.path + "/" + k2.file_name(),
                  fs::copy_options::overwrite_existing);
    FakeCompiler again{bytes_of("cubin for 12.6, recompiled")};
    Result<Bytes> r = cache.get_or_compile(k2, again.fn(), &outcome);
    REQUIRE(r.ok());
    CHECK(r.value() == again.payload);
    CHECK(outcome == CacheOutcome::kCompiled);
    REQUIRE(warnings.count() == 1);
    CHECK_THAT(warnings.messages()[0], Catch::Contains("key mismatch"));
  }
}

TEST_CASE("compile errors are returned unchanged and nothing is stored", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  int calls = 0;
  auto failing = [&calls]() -> Result<Bytes> {
    ++calls;
    return make_error(Status::kCompileFailed, "fwd_bf16: error: expected ';'");
  };
  CacheOutcome outcome;
  for (int i = 0; i < 2; ++i) {
    Result<Bytes> r = cache.get_or_compile(make_key("fwd_bf16", "k"), failing, &outcome);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status() == Status::kCompileFailed);
    CHECK(r.error().message == "fwd_bf16: error: expected ';'");
  }
  CHECK(calls == 2);
  CHECK(files_ending(tmp.path, ".fjc").empty());
  CHECK(files_ending(tmp.path, ".tmp").empty());
  CHECK(warnings.count() == 0);
}

TEST_CASE("a null outcome pointer is allowed", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  FakeCompiler compiler{bytes_of("x")};
  CHECK(cache.get_or_compile(make_key("s", "k"), compiler.fn(), nullptr).ok());
  CHECK(cache.get_or_compile(make_key("s", "k"), compiler.fn(), nullptr).ok());
  CHECK(compiler.calls == 1);
}

// ---- damaged entries --------------------------------------------------------------

TEST_CASE("a damaged entry is reported once, replaced and recompiled", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  const CacheKey key = make_key("fwd_bf16", "damage me");
  const std::string path = tmp.path + "/" + key.file_name();
  REQUIRE(cache.store(key, bytes_of("the original cubin, long enough to cut")).ok());

  std::function<void()> damage;
  std::string problem;
  SECTION("a flipped payload byte") {
    damage = [&] {
      Bytes b = read_bytes(path);
      b[payload_offset(key) + 3] ^= 0x20;
      write_bytes(path, b);
    };
    problem = "checksum";
  }
  SECTION("truncated to half") {
    damage = [&] { fs::resize_file(path, fs::file_size(path) / 2); };
    problem = "truncated";
  }
  SECTION("bad magic") {
    damage = [&] {
      Bytes b = read_bytes(path);
      std::memcpy(b.data(), "NOTACUBN", 8);
      write_bytes(path, b);
    };
    problem = "magic";
  }

  damage();
  FakeCompiler compiler{bytes_of("the recompiled cubin")};
  CacheOutcome outcome;
  Result<Bytes> r = cache.get_or_compile(key, compiler.fn(), &outcome);
  REQUIRE(r.ok());
  CHECK(r.value() == compiler.payload);
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK(compiler.calls == 1);
  REQUIRE(warnings.count() == 1);
  CHECK_THAT(warnings.messages()[0], Catch::Contains(path) && Catch::Contains(problem));

  // The file was replaced with a valid entry holding the new cubin.
  Result<Bytes> on_disk = decode_cache_entry(read_bytes(path), key.text);
  REQUIRE(on_disk.ok());
  CHECK(on_disk.value() == compiler.payload);

  // Damaged again: recompiled again, but the path was already reported.
  damage();
  REQUIRE(cache.get_or_compile(key, compiler.fn(), &outcome).ok());
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK(compiler.calls == 2);
  CHECK(warnings.count() == 1);
}

TEST_CASE("load reports and removes a damaged entry", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  const CacheKey key = make_key("spec", "key");
  const std::string path = tmp.path + "/" + key.file_name();
  REQUIRE(cache.store(key, bytes_of("payload")).ok());
  SECTION("truncated") { fs::resize_file(path, 10); }
  SECTION("another key's entry under this key's name") {
    write_bytes(path, encode_cache_entry(make_key("spec", "another key"), bytes_of("payload")));
  }

  CHECK_FALSE(cache.load(key).has_value());
  CHECK(warnings.count() == 1);
  CHECK_FALSE(exists(path));
}

// ---- unwritable and disabled ------------------------------------------------------

TEST_CASE("an unwritable directory still returns the compiled cubin with one warning", "[cache]") {
  TempDir tmp;
  // Permission bits do not stop root; a path under a regular file fails for everyone (ENOTDIR).
  const std::string file = tmp.path + "/file";
  write_bytes(file, bytes_of("not a directory"));
  const std::string dir = file + "/sub";
  Warnings warnings;
  DiskCache cache(options_for(dir), warnings.sink());
  CHECK(cache.writable());

  FakeCompiler compiler{bytes_of("cubin")};
  for (int i = 0; i < 3; ++i) {
    CacheOutcome outcome = CacheOutcome::kDiskHit;
    Result<Bytes> r = cache.get_or_compile(make_key("spec", "key " + std::to_string(i % 2)), compiler.fn(), &outcome);
    REQUIRE(r.ok());
    CHECK(r.value() == compiler.payload);
    CHECK(outcome == CacheOutcome::kCompiled);
  }
  CHECK(compiler.calls == 3);
  CHECK_FALSE(cache.writable());
  CHECK_FALSE(cache.stats().writable);
  REQUIRE(warnings.count() == 1);
  CHECK_THAT(warnings.messages()[0], Catch::Contains(dir) && Catch::Contains(std::strerror(ENOTDIR)));

  Result<void> stored = cache.store(make_key("spec", "key"), bytes_of("x"));
  CHECK_FALSE(stored.ok());
  CHECK(stored.status() == Status::kCacheError);
  CHECK(warnings.count() == 1);

  SECTION("threads failing at once still give one warning") {
    constexpr int kThreads = 8;
    Warnings fresh_warnings;
    DiskCache fresh(options_for(dir), fresh_warnings.sink());
    std::array<int, kThreads> ok{};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] { ok[i] = fresh.get_or_compile(make_key("s", "k"), compiler.fn(), nullptr).ok(); });
    for (std::thread& t : threads) t.join();
    for (int v : ok) CHECK(v == 1);
    CHECK(fresh_warnings.count() == 1);
  }
}

TEST_CASE("a failed write warns once and stops further writes", "[cache]") {
  TempDir tmp;
  Warnings warnings;
  DiskCache cache(options_for(tmp.path), warnings.sink());
  // A directory squatting on the entry's name makes the rename fail, even for root.
  const CacheKey blocked = make_key("spec", "blocked");
  REQUIRE(fs::create_directory(tmp.path + "/" + blocked.file_name()));
  FakeCompiler compiler{bytes_of("cubin")};
  CacheOutcome outcome = CacheOutcome::kDiskHit;

  Result<Bytes> r = cache.get_or_compile(blocked, compiler.fn(), &outcome);
  REQUIRE(r.ok());
  CHECK(r.value() == compiler.payload);
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK_FALSE(cache.writable());
  auto unwritable_warnings = [&] {
    const std::vector<std::string> messages = warnings.messages();
    return std::count_if(messages.begin(), messages.end(),
                         [&](const std::string& m) { return contains(m, "cannot write to " + tmp.path); });
  };
  CHECK(unwritable_warnings() == 1);

  const CacheKey other = make_key("spec", "other");
  REQUIRE(cache.get_or_compile(other, compiler.fn(), &outcome).ok());
  CHECK(outcome == CacheOutcome::kCompiled);
  CHECK_FALSE(exists(tmp.path + "/" + other.file_name()));
  CHECK(unwritable_warnings() == 1);
  CHECK(files_ending(tmp.path, ".tmp").empty());
}

TEST_CASE("with the disk layer disabled every call compiles and nothing is written", "[cache]") {
  TempDir tmp;
  CacheOptions options = options_for(tmp.path + "/cache");
  options.disk_enabled = false;
  DiskCache cache(options);
  FakeCompiler compiler{bytes_of("cubin")};
  for (int i = 0; i < 2; ++i) {
    CacheOutcome outcome = CacheOutcome::kDiskHit;
    REQUIRE(cache.get_or_compile(make_key("spec", "key"), compiler.fn(), &outcome).ok());
    CHECK(outcome == CacheOutcome::kCompiled);
  }
  CHECK(compiler.calls == 2);
  CHECK_FALSE(cache.writable());
  CHECK_FALSE(cache.store(make_key("spec", "key"), bytes_of("x")).ok());
  CHECK_FALSE(exists(tmp.path + "/cache"));
}

// ---- environment and directory --------------------------------------------------

TEST_CASE("from_env reads the FLASHJIT_CACHE_* variables", "[cache]") {
  EnvGuard env({"FLASHJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "FLASHJIT_CACHE_PATH", "FLASHJIT_CACHE_DISABLE",
                "FLASHJIT_CACHE_MAX_MB"});
  ::setenv("HOME", "/home/u", 1);

  SECTION("FLASHJIT_CACHE_DIR comes first") {
    ::setenv("FLASHJIT_CACHE_DIR", "/explicit/dir", 1);
    ::setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK(CacheOptions::from_env().dir == "/explicit/dir");
  }
  SECTION("then $XDG_CACHE_HOME/flashjit") {
    ::setenv("XDG_CACHE_HOME", "/xdg", 1);
    CHECK(CacheOptions::from_env().dir == "/xdg/flashjit");
  }
  SECTION("then ~/.cache/flashjit") {
    CHECK(CacheOptions::from_env().dir == "/home/u/.cache/flashjit");
  }
  SECTION("a relative XDG_CACHE_HOME is ignored, as the XDG spec says") {
    ::setenv("XDG_CACHE_HOME", "relative/cache", 1);
    CHECK(CacheOptions::from_env().dir == "/home/u/.cache/flashjit");
  }
  SECTION("defaults") {
    const CacheOptions o = CacheOptions::from_env();
    CHECK(o.disk_enabled);
    CHECK(o.readonly_dirs.empty());
    CHECK(o.max_bytes == 1024ull << 20);
  }
  SECTION("FLASHJIT_CACHE_DISABLE=1 turns the disk layer off") {
    ::setenv("FLASHJIT_CACHE_DISABLE", "1", 1);
    CHECK_FALSE(CacheOptions::from_env().disk_enabled);
    ::setenv("FLASHJIT_CACHE_DISABLE", "0", 1);
    CHECK(CacheOptions::from_env().disk_enabled);
  }
  SECTION("FLASHJIT_CACHE_PATH is a ':'-separated list") {
    ::setenv("FLASHJIT_CACHE_PATH", "/opt/app/kernels::/usr/share/fj:", 1);
    CHECK(CacheOptions::from_env().readonly_dirs == std::vector<std::string>{"/opt/app/kernels", "/usr/share/fj"});
  }
  SECTION("FLASHJIT_CACHE_MAX_MB sets the cap; a malformed value keeps the default") {
    ::setenv("FLASHJIT_CACHE_MAX_MB", "5", 1);
    CHECK(CacheOptions::from_env().max_bytes == 5ull << 20);
    ::setenv("FLASHJIT_CACHE_MAX_MB", "lots", 1);
    CHECK(CacheOptions::from_env().max_bytes == 1024ull << 20);
  }
}

TEST_CASE("the cache directory and its parents are created private to the user", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/a/b/flashjit";
  DiskCache cache(options_for(dir));
  REQUIRE(cache.store(make_key("spec", "key"), bytes_of("x")).ok());
  for (const std::string& d : {tmp.path + "/a", tmp.path + "/a/b", dir}) {
    struct stat st;
    REQUIRE(::stat(d.c_str(), &st) == 0);
    INFO(d);
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 0777) == 0700);
  }
}

TEST_CASE("a deleted cache directory is created again", "[cache]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/cache";
  Warnings warnings;
  DiskCache cache(options_for(dir), warnings.sink());
  REQUIRE(cache.store(make_key("spec", "a"), bytes_of("x")).ok());
  fs::remove_all(dir);
  FakeCompiler compiler{bytes_of("y")};
  REQUIRE(cache.get_or_compile(make_key("spec", "b"), compiler.fn(), nullptr).ok());
  CHECK(exists(dir + "/" + make_key("spec", "b").file_name()));
  CHECK(cache.writable());
  CHECK(warnings.count() == 0);
}

// ---- read-only layers -------------------------------------------------------------

TEST_CASE("read-only layers are searched first and never written", "[cache]") {
  TempDir tmp;
  const std::string ro = tmp.path + "/pack";
  const std::string user = tmp.path + "/user";
  const CacheKey shared = make_key("spec", "in both");
  const CacheKey ro_only = make_key("spec", "only in the pack");
  REQUIRE(DiskCache(options_for(ro)).store(shared, bytes_of("from the pack")).ok());
  REQUIRE(DiskCache(options_for(ro)).store(ro_only, bytes_of("pack only")).ok());
  REQUIRE(DiskCache(options_for(user)).store(shared, bytes_of("from the user dir")).ok());
  const std::string ro_path = ro + "/" + ro_only.file_name();
  set_mtime(ro_path, 1000);

  CacheOptions options = options_for(user);
  options.readonly_dirs = {tmp.path + "/missing", ro};
  Warnings warnings;
  DiskCache cache(options, warnings.sink());
  CacheOutcome outcome;

  Result<Bytes> r = cache.get_or_compile(shared, must_not_compile(), &outcome);
  REQUIRE(r.ok());
  CHECK(r.value() == bytes_of("from the pack"));
  CHECK(outcome == CacheOutcome::kDiskHit);

  r = cache.get_or_compile(ro_only, must_not_compile(), &outcome);
  REQUIRE(r.ok());
  CHECK(r.value() == bytes_of("pack only"));
  CHECK(outcome == CacheOutcome::kDiskHit);
  CHECK_FALSE(exists(user + "/" + ro_only.file_name()));
  CHECK(files_ending(user, ".lock").empty());
  CHECK(mtime_of(ro_path) == 1000);

  SECTION("list marks the pack's entries read-only") {
    int readonly = 0, writable = 0;
    for (const CacheEntryInfo& e : cache.list()) {
      CHECK(e.valid);
      CHECK(e.spec == "spec");
      (e.readonly ? readonly : writable)++;
    }
    CHECK(readonly == 2);
    CHECK(writable == 1);
  }
  SECTION("clear, eviction and verify leave the pack alone") {
    fs::resize_file(ro + "/" + shared.file_name(), 12);
    CacheOptions tiny = options;
    tiny.max_bytes = 0;
    DiskCache capped(tiny);
    capped.enforce_cap();
    REQUIRE(capped.clear().ok());
    CHECK(capped.verify(/*remove_bad=*/true).size() == 1);
    CHECK(files_ending(ro, ".fjc").size() == 2);
    CHECK(files_ending(user, ".fjc").empty());
  }
  SECTION("a damaged pack entry is reported, kept, and compiled into the user dir") {
    const CacheKey key = make_key("spec", "damaged in the pack");
    const std::string damaged = ro + "/" + key.file_name();
    write_bytes(damaged, bytes_of("garbage that is not an entry"));
    FakeCompiler compiler{bytes_of("compiled")};
    r = cache.get_or_compile(key, compiler.fn(), &outcome);
    REQUIRE(r.ok());
    CHECK(outcome == CacheOutcome::kCompiled);
    CHECK(exists(damaged));
    CHECK(exists(user + "/" + key.file_name()));
    REQUIRE(warnings.count() == 1);
    CHECK_THAT(warnings.messages()[0], Catch::Contains(damaged) && Catch::Contains("read-only"));
  }
}

// ---- LRU and maintenance ------------------------------------------------------------

TEST_CASE("a hit refreshes the entry's mtime", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  const CacheKey key = make_key("spec", "key");
  const std::string path = tmp.path + "/" + key.file_name();
  REQUIRE(cache.store(key, bytes_of("x")).ok());
  set_mtime(path, 1000);
  CacheOutcome outcome;
  REQUIRE(cache.get_or_compile(key, must_not_compile(), &outcome).ok());
  CHECK(outcome == CacheOutcome::kDiskHit);
  CHECK(mtime_of(path) > ::time(nullptr) - 60);
}

TEST_CASE("the size cap evicts least-recently-used entries", "[cache]") {
  TempDir tmp;
  const CacheKey a = make_key("spec", "key A"), b = make_key("spec", "key B"), c = make_key("spec", "key C");
  const CacheKey d = make_key("spec", "key D");
  const Bytes payload(1000, 'p');
  DiskCache roomy(options_for(tmp.path));
  for (const CacheKey& k : {a, b, c}) REQUIRE(roomy.store(k, payload).ok());
  auto path = [&](const CacheKey& k) { return tmp.path + "/" + k.file_name(); };
  const uint64_t entry_bytes = fs::file_size(path(a));
  set_mtime(path(a), 3000);
  set_mtime(path(b), 1000);
  set_mtime(path(c), 2000);

  DiskCache capped(options_for(tmp.path, 2 * entry_bytes));
  capped.enforce_cap();
  CHECK(exists(path(a)));
  CHECK_FALSE(exists(path(b)));
  CHECK(exists(path(c)));

  // Storing D goes over the cap again: C (2000) is older than A (3000).
  REQUIRE(capped.store(d, payload).ok());
  CHECK(exists(path(a)));
  CHECK_FALSE(exists(path(c)));
  CHECK(exists(path(d)));
  CHECK(capped.stats().bytes <= 2 * entry_bytes);

  SECTION("the entry just written is never evicted, even over the cap") {
    DiskCache tiny(options_for(tmp.path, 1));
    const CacheKey e = make_key("spec", "key E");
    FakeCompiler compiler{payload};
    REQUIRE(tiny.get_or_compile(e, compiler.fn(), nullptr).ok());
    CHECK(files_ending(tmp.path, ".fjc") == std::vector<std::string>{e.file_name()});
  }
}

TEST_CASE("stale temp files are cleaned, fresh ones are left to their writer", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  write_bytes(tmp.path + "/x.fjc.1.2.3.tmp", bytes_of("crashed writer"));
  write_bytes(tmp.path + "/y.fjc.4.5.6.tmp", bytes_of("writer at work"));
  set_mtime(tmp.path + "/x.fjc.1.2.3.tmp", ::time(nullptr) - 2 * 3600);
  cache.enforce_cap();
  CHECK(files_ending(tmp.path, ".tmp") == std::vector<std::string>{"y.fjc.4.5.6.tmp"});
}

TEST_CASE("verify reports invalid entries and removes them when asked", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  const CacheKey good = make_key("spec_good", "good");
  const CacheKey bad = make_key("spec_bad", "bad");
  REQUIRE(cache.store(good, bytes_of("good cubin")).ok());
  REQUIRE(cache.store(bad, bytes_of("bad cubin")).ok());
  const std::string bad_path = tmp.path + "/" + bad.file_name();
  Bytes bytes = read_bytes(bad_path);
  bytes[payload_offset(bad)] ^= 0x01;
  write_bytes(bad_path, bytes);
  write_bytes(tmp.path + "/README.txt", bytes_of("not an entry"));
  // A valid entry of another key under a made-up name is invalid too.
  const std::string misnamed = tmp.path + "/spec_good-0123456789abcdef.fjc";
  fs::copy_file(tmp.path + "/" + good.file_name(), misnamed);

  SECTION("a misnamed entry is reported as a key mismatch") {
    bool found = false;
    for (const CacheEntryInfo& e : cache.verify(/*remove_bad=*/false))
      if (e.path == misnamed) found = contains(e.problem, "key mismatch");
    CHECK(found);
  }
  fs::remove(misnamed);

  std::vector<CacheEntryInfo> report = cache.verify(/*remove_bad=*/false);
  REQUIRE(report.size() == 1);
  CHECK(report[0].path == bad_path);
  CHECK(report[0].spec == "spec_bad");
  CHECK_FALSE(report[0].valid);
  CHECK_THAT(report[0].problem, Catch::Contains("checksum"));
  CHECK(exists(bad_path));

  CHECK(cache.verify(/*remove_bad=*/true).size() == 1);
  CHECK_FALSE(exists(bad_path));
  CHECK(cache.verify(/*remove_bad=*/false).empty());
  REQUIRE(cache.list().size() == 1);
  CHECK(cache.list()[0].spec == "spec_good");
  CHECK(exists(tmp.path + "/README.txt"));
}

TEST_CASE("clear empties the user directory and stats follow", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  FakeCompiler compiler{Bytes(100, 'c')};
  for (const char* text : {"k1", "k2", "k3"})
    REQUIRE(cache.get_or_compile(make_key("s", text), compiler.fn(), nullptr).ok());
  write_bytes(tmp.path + "/notes.txt", bytes_of("kept"));

  CacheStats before = cache.stats();
  CHECK(before.dir == tmp.path);
  CHECK(before.disk_enabled);
  CHECK(before.writable);
  CHECK(before.entries == 3);
  CHECK(before.bytes == 3 * fs::file_size(tmp.path + "/" + make_key("s", "k1").file_name()));
  CHECK(files_ending(tmp.path, ".lock").size() == 3);

  Result<uint64_t> removed = cache.clear();
  REQUIRE(removed.ok());
  CHECK(removed.value() == 3);
  CHECK(files_ending(tmp.path, ".fjc").empty());
  CHECK(files_ending(tmp.path, ".lock").empty());
  CHECK(exists(tmp.path + "/notes.txt"));
  CHECK(cache.stats().entries == 0);
  CHECK(cache.list().empty());

  SECTION("clearing a directory that does not exist removes nothing") {
    DiskCache absent(options_for(tmp.path + "/absent"));
    REQUIRE(absent.clear().ok());
    CHECK(absent.clear().value() == 0);
  }
}

// ---- concurrency ------------------------------------------------------------------------

namespace {

constexpr int kChildCompiled = 10;
constexpr int kChildDiskHit = 11;
constexpr int kChildFailed = 1;

// Runs in a forked child: no Catch2 macros, the exit code is the result.
int race_in_child(const std::string& dir, const std::string& counter_path, const CacheKey& key, const Bytes& payload) {
  DiskCache cache(options_for(dir));
  auto slow_compile = [&]() -> Result<Bytes> {
    std::this_thread::sleep_for(100ms);
    const int fd = ::open(counter_path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd >= 0) {
      (void)!::write(fd, "compiled\n", 9);
      ::close(fd);
    }
    return payload;
  };
  CacheOutcome outcome;
  Result<Bytes> r = cache.get_or_compile(key, slow_compile, &outcome);
  if (!r.ok() || r.value() != payload) return kChildFailed;
  return outcome == CacheOutcome::kCompiled ? kChildCompiled : kChildDiskHit;
}

size_t count_lines(const std::string& path) {
  const Bytes b = read_bytes(path);
  return static_cast<size_t>(std::count(b.begin(), b.end(), '\n'));
}

}  // namespace

TEST_CASE("processes racing on one key compile once and leave one valid entry", "[cache]") {
  constexpr int kProcesses = 6;
  TempDir tmp;
  const std::string dir = tmp.path + "/cache";
  const std::string counter = tmp.path + "/compiles";
  const CacheKey key = make_key("fwd_bf16_race", "the raced key");
  const Bytes payload = bytes_of("the one cubin");

  int start[2];
  REQUIRE(::pipe(start) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(start[1]);
      char c;
      while (::read(start[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::_exit(race_in_child(dir, counter, key, payload));
    }
    if (pid < 0) break;
    children.push_back(pid);
  }
  // Closing the write end wakes every child at once.
  ::close(start[0]);
  ::close(start[1]);
  REQUIRE(children.size() == kProcesses);

  int compiled = 0, hits = 0;
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    CHECK((code == kChildCompiled || code == kChildDiskHit));
    (code == kChildCompiled ? compiled : hits)++;
  }
  CHECK(compiled == 1);
  CHECK(hits == kProcesses - 1);
  CHECK(count_lines(counter) == 1);
  const std::vector<std::string> entries = files_ending(dir, ".fjc");
  REQUIRE(entries.size() == 1);
  Result<Bytes> on_disk = decode_cache_entry(read_bytes(dir + "/" + entries[0]), key.text);
  REQUIRE(on_disk.ok());
  CHECK(on_disk.value() == payload);
  CHECK(files_ending(dir, ".tmp").empty());
}

TEST_CASE("threads racing on one key compile once", "[cache]") {
  constexpr int kThreads = 4;
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  const CacheKey key = make_key("spec", "shared by threads");
  std::atomic<int> calls{0};
  auto slow_compile = [&calls]() -> Result<Bytes> {
    ++calls;
    std::this_thread::sleep_for(50ms);
    return bytes_of("cubin");
  };
  std::array<int, kThreads> ok{};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      Result<Bytes> r = cache.get_or_compile(key, slow_compile, nullptr);
      ok[i] = r.ok() && r.value() == bytes_of("cubin");
    });
  for (std::thread& t : threads) t.join();
  for (int v : ok) CHECK(v == 1);
  CHECK(calls == 1);
  CHECK(files_ending(tmp.path, ".fjc").size() == 1);
}

TEST_CASE("threads compile different keys in parallel", "[cache]") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path));
  std::atomic<int> inside{0};
  std::array<std::atomic<bool>, 2> saw_peer{};
  // Each compile waits for the other to start: if the cache serialized
  // compiles (a lock held across compile()), neither would ever see its peer.
  auto compile_meeting_peer = [&](int i) {
    return [&, i]() -> Result<Bytes> {
      ++inside;
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (inside < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
      saw_peer[i] = inside >= 2;
      return bytes_of("cubin " + std::to_string(i));
    };
  };
  std::array<CacheOutcome, 2> outcomes{};
  std::array<bool, 2> ok{};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      Result<Bytes> r = cache.get_or_compile(make_key("spec", "key " + std::to_string(i)), compile_meeting_peer(i),
                                             &outcomes[i]);
      ok[i] = r.ok() && r.value() == bytes_of("cubin " + std::to_string(i));
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    CHECK(ok[i]);
    CHECK(saw_peer[i]);
    CHECK(outcomes[i] == CacheOutcome::kCompiled);
  }
  CHECK(files_ending(tmp.path, ".fjc").size() == 2);
}
