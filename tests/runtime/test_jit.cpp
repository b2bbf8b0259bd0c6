// The JIT pipeline through the public Context: cache outcomes and stage times,
// key sensitivity, the warm cache without NVRTC, and a GPU-less launch.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <atomic>

#include "runtime/driver.h"
#include "runtime/flashjit.h"
#include "runtime/jit.h"
#include "runtime/nvrtc.h"

using namespace flashjit;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/flashjit-jit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Options of a context for sm_90 whose disk cache is `dir` alone.
ContextOptions sm90_options(const std::string& dir) {
  ContextOptions o;
  o.cache.dir = dir;
  o.cache.readonly_dirs.clear();
  o.cache.disk_enabled = true;
  o.arch = Arch::kSm90;
  return o;
}

std::unique_ptr<Context> make_context(const std::string& dir, std::vector<CompileRecord>* records = nullptr) {
  ContextOptions o = sm90_options(dir);
  if (records) o.on_compile = [records](const CompileRecord& r) { records->push_back(r); };
  auto ctx = Context::create(o);
  REQUIRE(ctx.ok());
  return std::move(ctx.value());
}

// Runs a shell command, returns (exit code, output).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const char* kSpec = "fwd_bf16_d64_noncausal_padded_sm90";

}  // namespace

TEST_CASE("compile: cold, memory hit, disk hit, with stage times", "[jit][nvrtc]") {
  REQUIRE(nvrtc::available());
  TempDir dir;
  std::vector<CompileRecord> records;
  auto spec = KernelSpec::parse(kSpec);
  REQUIRE(spec.ok());
  {
    auto ctx = make_context(dir.path, &records);
    auto cold = ctx->compile(*spec);
    REQUIRE(cold.ok());
    CHECK(cold->outcome == CacheOutcome::kCompiled);
    CHECK(cold->spec == spec->to_string());
    CHECK(cold->key.size() == 16);
    CHECK(cold->codegen_s > 0);
    CHECK(cold->nvrtc_s > 0);
    CHECK(cold->compile_s >= cold->codegen_s + cold->nvrtc_s);
    CHECK(cold->registers > 0);
    CHECK(cold->spill_bytes == 0);
    REQUIRE(records.size() == 1);

    auto hot = ctx->compile(*spec);
    REQUIRE(hot.ok());
    CHECK(hot->outcome == CacheOutcome::kMemoryHit);
    CHECK(hot->nvrtc_s == 0);
    CHECK(hot->compile_s < cold->compile_s / 100);
    CHECK(records.size() == 1);  // memory hits are not reported
  }
  // A new process-like context on the same directory reads the disk entry.
  auto ctx2 = make_context(dir.path, &records);
  auto disk = ctx2->compile(*spec);
  REQUIRE(disk.ok());
  CHECK(disk->outcome == CacheOutcome::kDiskHit);
  CHECK(disk->nvrtc_s == 0);
  CHECK(disk->codegen_s == 0);
  CHECK(records.size() == 2);
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir.path)) entries += e.path().extension() == ".fjc";
  CHECK(entries == 1);
}

TEST_CASE("cache key covers spec, templates, NVRTC version, arch, options, version", "[jit]") {
  auto a = KernelSpec::parse("fwd_bf16_d128_noncausal_even_sm90");
  auto b = KernelSpec::parse("fwd_bf16_d128_noncausal_even_sm80");
  auto c = KernelSpec::parse("fwd_bf16_d128_causal_even_sm90");
  REQUIRE((a.ok() && b.ok() && c.ok()));
  const CacheKey ka = cache_key(*a), kb = cache_key(*b), kc = cache_key(*c);
  CHECK(ka.hash() != kb.hash());
  CHECK(ka.hash() != kc.hash());
  CHECK(ka.hash() == cache_key(*a).hash());
  CHECK_THAT(ka.text, Catch::Contains("spec=" + a->to_string()));
  CHECK_THAT(ka.text, Catch::Contains("templates="));
  CHECK_THAT(ka.text, Catch::Contains("nvrtc="));
  CHECK_THAT(ka.text, Catch::Contains("arch=sm_90"));
  CHECK_THAT(ka.text, Catch::Contains("options=--gpu-architecture=sm_90"));
  CHECK_THAT(ka.text, Catch::Contains(std::string("flashjit=") + version()));
  CHECK(ka.file_name().rfind(a->to_string() + "-", 0) == 0);
}

TEST_CASE("a warm cache works without NVRTC", "[jit][nvrtc]") {
  REQUIRE(nvrtc::available());
  TempDir dir;
  {
    auto ctx = make_context(dir.path);
    REQUIRE(ctx->compile(*KernelSpec::parse(kSpec)).ok());
  }
  // A fresh process that cannot load NVRTC: the cached spec is served, an
  // uncached one fails with a message that says NVRTC is missing.
  const std::string env = "FLASHJIT_CACHE_PATH= FLASHJIT_NVRTC_PATH=/nonexistent/libnvrtc.so FLASHJIT_CACHE_DIR=" + dir.path;
  const std::string warmup = std::string(FLASHJIT_BINARY_DIR) + "/flashjit-warmup --arch sm90 ";
  // With its tile, the name stands for that kernel alone (without, for every
  // kernel the runtime may launch for it: the next test).
  auto [code, out] = run(env + " " + warmup + KernelSpec::parse(kSpec)->to_string());
  INFO(out);
  CHECK(code == 0);
  CHECK_THAT(out, Catch::Contains("disk_hit"));
  auto [code2, out2] = run(env + " " + warmup + "fwd_bf16_d128_causal_padded_sm90");
  INFO(out2);
  CHECK(code2 != 0);
  CHECK_THAT(out2, Catch::Contains("NVRTC"));
}

TEST_CASE("flashjit cache cubin writes the cubin this build would load or says how to get one", "[jit][nvrtc]") {
  REQUIRE(nvrtc::available());
  TempDir dir;
  const KernelSpec parsed = *KernelSpec::parse(kSpec);
  const std::string spec = parsed.to_string();
  const std::string cli = "FLASHJIT_CACHE_PATH= FLASHJIT_CACHE_DIR=" + dir.path + " " +
                          std::string(FLASHJIT_BINARY_DIR) + "/flashjit cache cubin ";
  const std::string out = dir.path + "/k.cubin";
  auto [miss, miss_out] = run(cli + spec + " -o " + out);
  INFO(miss_out);
  CHECK(miss == 1);
  CHECK_THAT(miss_out, Catch::Contains("compile it first"));
  CHECK_FALSE(fs::exists(out));

  std::vector<char> cached;
  {
    auto ctx = make_context(dir.path);
    REQUIRE(ctx->compile(parsed).ok());
    DiskCache cache(sm90_options(dir.path).cache);
    auto hit = cache.load(cache_key(parsed));
    REQUIRE(hit);
    cached = *hit;
  }
  auto [code, text] = run(cli + spec + " -o " + out);
  INFO(text);
  REQUIRE(code == 0);
  std::ifstream f(out, std::ios::binary);
  std::vector<char> written((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(written == cached);
  REQUIRE(written.size() > 4);
  CHECK(std::string(written.data(), 4) == "\x7f" "ELF");

  // Without NVRTC (a machine that only reads SASS): the same entry, as a launch there would load it.
  const std::string no_nvrtc_out = dir.path + "/k2.cubin";
  auto [no_nvrtc, no_nvrtc_text] = run("FLASHJIT_NVRTC_PATH=/nonexistent/libnvrtc.so " + cli + spec + " -o " + no_nvrtc_out);
  INFO(no_nvrtc_text);
  CHECK(no_nvrtc == 0);
  std::ifstream f2(no_nvrtc_out, std::ios::binary);
  CHECK(std::vector<char>((std::istreambuf_iterator<char>(f2)), std::istreambuf_iterator<char>()) == cached);

  auto [bad_dir, bad_dir_out] = run(cli + spec + " -o " + dir.path + "/no/such/dir/k.cubin");
  INFO(bad_dir_out);
  CHECK(bad_dir == 1);
  CHECK_THAT(bad_dir_out, Catch::Contains("cannot write"));
}

TEST_CASE("flashjit-warmup fails when the cache cannot keep what it compiled", "[jit][nvrtc]") {
  REQUIRE(nvrtc::available());
  TempDir dir;
  const std::string warmup = std::string(FLASHJIT_BINARY_DIR) + "/flashjit-warmup ";
  const std::string specs = "fwd_bf16_d32_noncausal_even_sm80 fwd_bf16_d64_noncausal_even_sm80";
  // A regular file where the directory should be (unwritable even for root).
  const std::string file = dir.path + "/not-a-dir";
  std::ofstream(file) << "x";
  auto [code, out] = run("FLASHJIT_CACHE_PATH= FLASHJIT_CACHE_DIR=" + file + " " + warmup + specs);
  INFO(out);
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("2 compiled, 0 cached, 0 failed, 2 not in the cache afterwards"));
  CHECK_THAT(out, Catch::Contains("could not be written"));
  // A cap that holds one entry: the other is evicted by the time the warm-up ends.
  const std::string capped = dir.path + "/capped";
  auto [code2, out2] = run("FLASHJIT_CACHE_PATH= FLASHJIT_CACHE_MAX_MB=0 FLASHJIT_CACHE_DIR=" + capped + " " +
                           warmup + "-j1 " + specs);
  INFO(out2);
  CHECK(code2 == 1);
  CHECK_THAT(out2, Catch::Contains("1 kernel is not in the cache"));
  CHECK_THAT(out2, Catch::Contains("FLASHJIT_CACHE_MAX_MB"));
  // Disabled: nothing would be kept, so nothing is compiled.
  auto [code3, out3] = run("FLASHJIT_CACHE_DISABLE=1 FLASHJIT_CACHE_DIR=" + dir.path + "/off " + warmup + specs);
  INFO(out3);
  CHECK(code3 == 2);
  CHECK_THAT(out3, Catch::Contains("disk cache is disabled"));
  CHECK_FALSE(fs::exists(dir.path + "/off"));
  // A writable directory: both kept, exit 0, and the JSON says so.
  const std::string json = dir.path + "/w.json";
  auto [code4, out4] =
      run("FLASHJIT_CACHE_PATH= FLASHJIT_CACHE_DIR=" + dir.path + "/ok " + warmup + specs + " --json " + json);
  INFO(out4);
  CHECK(code4 == 0);
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["summary"]["not_in_cache"] == 0);
  for (const auto& r : j["records"]) CHECK(r["in_cache"] == true);
}

TEST_CASE("flashjit-warmup: a spec named without its tile warms every kernel the runtime may launch for it",
          "[jit]") {
  const std::string warmup = std::string(FLASHJIT_BINARY_DIR) + "/flashjit-warmup --list ";
  // No NVRTC needed to list.
  const std::string env = "FLASHJIT_NVRTC_PATH=/nonexistent/libnvrtc.so ";
  auto [code, out] = run(env + warmup + "fwd_bf16_d64_noncausal_padded_sm90");
  INFO(out);
  CHECK(code == 0);
  // The Hopper forward with both key-length tiles and the three-consumer
  // tiles (with and without split tiles), and the named mma.sync spec
  // (force_mma).
  CHECK(out ==
        "fwd_bf16_d64_noncausal_padded_sm90_bm128_bn64_w4_s2\n"
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn192_w12_s3_wg\n"
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn128_w12_s4_wg\n"
        "fwd_bf16_d64_noncausal_padded_sm90a_bm192_bn128_w16_s4_wg\n"
        "fwd_bf16_d64_noncausal_padded_sm90a_bm192_bn128_w16_s4_wg_sk\n");
  // Named with its tile: that kernel alone.
  auto [code2, out2] = run(env + warmup + "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn192_w12_s3_wg");
  INFO(out2);
  CHECK(code2 == 0);
  CHECK(out2 == "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn192_w12_s3_wg\n");
  // Spec flags name no tile; a spec the Hopper kernel does not serve stays as named.
  auto [code3, out3] = run(env + warmup + "--arch sm90 --dtype f32 --precision ieee --head-dim 128");
  INFO(out3);
  CHECK(code3 == 0);
  CHECK(out3 == "fwd_f32ieee_d128_noncausal_padded_sm90_bm128_bn64_w8_s2\n");
}

TEST_CASE("in-process compiles of one spec from many threads compile once", "[jit][nvrtc]") {
  REQUIRE(nvrtc::available());
  TempDir dir;
  std::vector<CompileRecord> records;
  auto ctx = make_context(dir.path, &records);
  auto spec = *KernelSpec::parse("fwd_bf16_d32_noncausal_even_sm90");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { ok += ctx->compile(spec).ok(); });
  for (auto& t : threads) t.join();
  CHECK(ok == 4);
  CHECK(records.size() == 1);
}

TEST_CASE("without a GPU, a valid forward fails with a driver status, after validation", "[jit]") {
  if (driver::available()) {
    SUCCEED("a GPU is present; the GPU tests cover launches");
    return;
  }
  TempDir dir;
  auto ctx = make_context(dir.path);
  Problem p;
  p.batch = 1; p.heads = 1; p.seqlen_q = 128; p.seqlen_k = 128; p.head_dim = 64;
  alignas(16) static char buf[1 << 16];
  ForwardArgs a;
  a.problem = p;
  a.q = a.k = a.v = a.o = bshd(buf, 1, 128, 1, 64);
  auto r = ctx->forward(a);
  REQUIRE_FALSE(r.ok());
  CHECK((r.status() == Status::kDriverUnavailable || r.status() == Status::kNoDevice ||
         r.status() == Status::kCudaError));
  CHECK_FALSE(r.error().message.empty());
  // Validation comes first: a bad head_dim is reported as such, not as a missing GPU.
  a.problem.head_dim = 80;
  CHECK(ctx->forward(a).status() == Status::kUnsupportedHeadDim);
}

TEST_CASE("forward_scratch_size: V^T bytes for f32 on the Hopper kernel, else 0", "[jit]") {
  TempDir dir;
  auto ctx = make_context(dir.path);  // arch sm90: the Hopper kernel is preferred
  Problem p;
  p.dtype = DType::kF32;
  p.precision = Precision::kTF32;
  p.batch = 4; p.heads = 8; p.seqlen_q = 1500; p.seqlen_k = 600; p.head_dim = 128;
  // [B, H, D, keys rounded up to 32] floats.
  CHECK(ctx->forward_scratch_size(p).value() == size_t(4) * 8 * 128 * 608 * 4);
  p.seqlen_k = 640;
  CHECK(ctx->forward_scratch_size(p).value() == size_t(4) * 8 * 128 * 640 * 4);
  p.precision = Precision::kIEEE;  // 3xTF32 stays on mma.sync
  CHECK(ctx->forward_scratch_size(p).value() == 0);
  p.precision = Precision::kTF32;
  p.head_dim = 96;  // not a Hopper-kernel head_dim
  CHECK(ctx->forward_scratch_size(p).value() == 0);
  p.head_dim = 64;
  p.dtype = DType::kBF16;
  p.precision = Precision::kNative;
  CHECK(ctx->forward_scratch_size(p).value() == 0);
  p.head_dim = 80;
  CHECK(ctx->forward_scratch_size(p).status() == Status::kUnsupportedHeadDim);

  ContextOptions forced;
  forced.cache.dir = dir.path;
  forced.arch = Arch::kSm90;
  forced.force_mma = true;
  auto mma = Context::create(forced);
  REQUIRE(mma.ok());
  p.dtype = DType::kF32;
  p.precision = Precision::kTF32;
  p.head_dim = 128;
  CHECK((*mma)->forward_scratch_size(p).value() == 0);
}

TEST_CASE("head_dim 256 takes the Hopper kernel on sm_90, and a _wg tile never reaches a spec it does not serve", "[jit]") {
  TempDir dir;
  ContextOptions o = sm90_options(dir.path);
  auto ctx = Context::create(o);
  REQUIRE(ctx.ok());
  Problem p;
  p.batch = 1; p.heads = 1; p.seqlen_q = 300; p.seqlen_k = 300; p.head_dim = 256;
  auto d256 = (*ctx)->spec_for(p, Direction::kFwd);
  REQUIRE(d256.ok());
  CHECK(d256->to_string() == "fwd_bf16_d256_noncausal_padded_sm90a_bm128_bn80_w12_s2_wg");
  // A _wg tile where the Hopper kernel does not serve the spec: the policy's
  // mma.sync tile stays.
  o.fwd_tile = TileConfig{128, 64, 12, 2, true};
  auto tiled = Context::create(o);
  REQUIRE(tiled.ok());
  p.head_dim = 96;
  CHECK_FALSE((*tiled)->spec_for(p, Direction::kFwd).value().tile.wgmma);
  p.head_dim = 128;
  p.dtype = DType::kF32;
  p.precision = Precision::kIEEE;
  CHECK_FALSE((*tiled)->spec_for(p, Direction::kFwd).value().tile.wgmma);
  CHECK_FALSE((*tiled)->spec_for(p, Direction::kBwd).value().tile.wgmma);
  // With the mma path forced, head_dim 256 runs mma.sync even with a _wg tile.
  p.dtype = DType::kBF16;
  p.precision = Precision::kNative;
  p.head_dim = 256;
  o.force_mma = true;
  auto forced = Context::create(o);
  REQUIRE(forced.ok());
  CHECK_FALSE((*forced)->spec_for(p, Direction::kFwd).value().tile.wgmma);
  CHECK((*forced)->spec_for(p, Direction::kFwd).value().arch == Arch::kSm90);
}

TEST_CASE("the Hopper forward's tile follows the lengths at head_dim 64, and a forced tile still wins", "[jit]") {
  TempDir dir;
  ContextOptions o = sm90_options(dir.path);
  auto ctx = Context::create(o);
  REQUIRE(ctx.ok());
  ContextOptions unsplit_options = o;
  unsplit_options.fwd_schedule = FwdSchedule::kPersistent;  // no tile may be split
  auto unsplit = Context::create(unsplit_options);
  REQUIRE(unsplit.ok());
  Problem p;
  // 4000 queries: 32 blocks of 128 rows per pair, 21 of 192 (6 waves of 132
  // SMs for 672 tiles, 5.09 split): three consumers splitting tiles (run 65:
  // 355.6 vs 331.9 TFLOP/s), else two consumers.
  p.batch = 4; p.heads = 8; p.seqlen_q = 4000; p.seqlen_k = 600; p.head_dim = 64;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm192_bn128_w16_s4_wg_sk");
  CHECK((*unsplit)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn128_w12_s4_wg");
  const int device_lengths = 0;  // per-batch key lengths (never read here): no split either
  p.seqlens_k = &device_lengths;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn128_w12_s4_wg");
  p.seqlens_k = nullptr;
  // 3000 queries: 16 blocks of 192 rows per pair take 4 waves, 24 of 128 take 6.
  p.seqlen_q = 3000;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm192_bn128_w16_s4_wg");
  p.seqlen_q = 4000;
  p.seqlen_k = 1024;  // a multiple of 128 keys and of 128 queries? 4000 is not: padded
  CHECK((*unsplit)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn128_w12_s4_wg");
  p.seqlen_q = 1024;  // both multiples of the 128-key tile: even
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_even_sm90a_bm128_bn128_w12_s4_wg");
  p.seqlen_k = 1500;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn192_w12_s3_wg");
  // Causal: 128 keys up to 4096 keys, the policy's 192 above (run 38), or
  // three consumers (run 43).
  p.seqlen_k = 600;
  p.causal = true;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().tile.block_n == 128);
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().tile.block_m == 128);
  p.seqlen_q = 4096; p.seqlen_k = 4096;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_causal_even_sm90a_bm128_bn128_w12_s4_wg");
  p.seqlen_q = 8192; p.seqlen_k = 8192;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_causal_padded_sm90a_bm192_bn128_w16_s4_wg");
  p.seqlen_q = 1024; p.seqlen_k = 600;
  // Head_dim 128 keeps the policy's tile; so does the backward.
  p.causal = false;
  CHECK_FALSE((*ctx)->spec_for(p, Direction::kBwd).value().tile.wgmma);
  p.head_dim = 128;
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().tile.block_n == 128);
  CHECK((*ctx)->spec_for(p, Direction::kFwd).value().tile.num_stages == 2);
  // A tile given by the caller replaces the length's choice.
  p.head_dim = 64;
  o.fwd_tile = TileConfig{128, 192, 12, 2, true};
  auto tiled = Context::create(o);
  REQUIRE(tiled.ok());
  CHECK((*tiled)->spec_for(p, Direction::kFwd).value().to_string() ==
        "fwd_bf16_d64_noncausal_padded_sm90a_bm128_bn192_w12_s2_wg");
}
