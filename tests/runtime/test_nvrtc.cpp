// NVRTC loader and compiler wrapper. NVRTC needs no GPU, so all of this runs on
// a build machine.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/nvrtc.h"

using namespace flashjit;

namespace {

// The error message of a failed result, for INFO.
template <typename T>
std::string error_text(const Result<T>& r) {
  return r.ok() ? std::string() : r.error().message;
}

const char* const kTinyKernel = R"(
extern "C" __global__ void flashjit_fwd(float* out, const float* in, int n) {
  __shared__ float staged[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  if (i < n) out[i] = 2.f * staged[127 - threadIdx.x];
}
)";

bool has_elf_magic(const std::vector<char>& image) {
  return image.size() > 4 && std::memcmp(image.data(),
                                         "\x7f"
                                         "ELF",
                                         4) == 0;
}

Result<nvrtc::CompileOutput> compile_tiny(const std::string& arch, bool cubin, bool ptx) {
  return nvrtc::compile(kTinyKernel, "tiny.cu", {},
                        {"--gpu-architecture=" + arch, "--ptxas-options=-v", "-std=c++17"}, cubin,
                        ptx);
}

// Sets (or, with null, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A real ptxas -v log (NVRTC 13.0, sm_90), kept verbatim so the parser is
// checked on known text as well as on whatever the installed NVRTC prints.
const char* const kRecordedLog =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'second' for 'sm_90'\n"
    "ptxas info    : Function properties for second\n"
    "ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 34 registers, used 0 barriers, 256 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 7.081 ms\n"
    "ptxas info    : Function properties for _Z6helperf\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'flashjit_fwd' for 'sm_90'\n"
    "ptxas info    : Function properties for flashjit_fwd\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 168 registers, used 1 barriers, 49152 bytes smem\n"
    "ptxas info    : Compile time = 2.388 ms\n";

// The CUDA 12 layout: indented properties line and a cmem entry.
const char* const kOlderLog =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'flashjit_fwd' for 'sm_80'\n"
    "ptxas info    : Function properties for flashjit_fwd\n"
    "    32 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
    "ptxas info    : Used 255 registers, 400 bytes cmem[0]\n";

}  // namespace

TEST_CASE("nvrtc loads and reports its version", "[nvrtc]") {
  Result<void> loaded = nvrtc::load();
  INFO(error_text(loaded));
  REQUIRE(loaded.ok());
  CHECK(nvrtc::available());
  CHECK(nvrtc::library_path().find("libnvrtc") != std::string::npos);

  Result<std::string> version = nvrtc::version();
  REQUIRE(version.ok());
  const std::string& v = *version;
  const size_t dot = v.find('.');
  REQUIRE(dot != std::string::npos);
  CHECK(std::atoi(v.substr(0, dot).c_str()) >= 12);
  CHECK(v.find_first_not_of("0123456789.") == std::string::npos);
}

TEST_CASE("nvrtc compiles a kernel to a cubin for sm_80 and sm_90", "[nvrtc]") {
  for (const char* arch : {"sm_80", "sm_90"}) {
    SECTION(arch) {
      Result<nvrtc::CompileOutput> out = compile_tiny(arch, /*cubin=*/true, /*ptx=*/false);
      INFO(error_text(out));
      REQUIRE(out.ok());
      CHECK(has_elf_magic(out->cubin));
      CHECK(out->ptx.empty());
      // ptxas -v output comes back even on success.
      CHECK(out->log.find("Used") != std::string::npos);
      CHECK(out->log.find(arch) != std::string::npos);
    }
  }
}

TEST_CASE("nvrtc compiles a kernel to PTX for a virtual architecture", "[nvrtc]") {
  Result<nvrtc::CompileOutput> out =
      nvrtc::compile(kTinyKernel, "tiny.cu", {}, {"--gpu-architecture=compute_90"},
                     /*cubin=*/false, /*ptx=*/true);
  INFO(error_text(out));
  REQUIRE(out.ok());
  CHECK(out->cubin.empty());
  CHECK(out->ptx.find(".entry flashjit_fwd") != std::string::npos);
  CHECK(out->ptx.find(".target sm_90") != std::string::npos);
  CHECK(out->ptx.back() != '\0');
}

TEST_CASE("nvrtc asked for a cubin of a virtual architecture says why it has none", "[nvrtc]") {
  Result<nvrtc::CompileOutput> out =
      nvrtc::compile(kTinyKernel, "tiny.cu", {}, {"--gpu-architecture=compute_90"},
                     /*cubin=*/true, /*ptx=*/false);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status() == Status::kInvalidArgument);
  CHECK(out.error().message.find("sm_XX") != std::string::npos);
}

TEST_CASE("nvrtc compile errors carry the error, the log and the options", "[nvrtc]") {
  const std::string broken =
      "extern \"C\" __global__ void k(float* p) { p[0] = undeclared_name; }\n";
  const std::vector<std::string> options = {"--gpu-architecture=sm_90", "-DFLASHJIT_MARKER=1"};
  Result<nvrtc::CompileOutput> out = nvrtc::compile(broken, "broken.cu", {}, options, true, false);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status() == Status::kCompileFailed);
  const std::string& message = out.error().message;
  INFO(message);
  CHECK(message.find("NVRTC_ERROR_COMPILATION") != std::string::npos);
  CHECK(message.find("undeclared_name") != std::string::npos);  // the log line
  CHECK(message.find("broken.cu") != std::string::npos);
  CHECK(message.find("--gpu-architecture=sm_90 -DFLASHJIT_MARKER=1") != std::string::npos);
}

TEST_CASE("nvrtc resolves in-memory headers", "[nvrtc]") {
  const std::vector<nvrtc::Header> headers = {
      {"flashjit/x.cuh", "#pragma once\nconstexpr int kScale = 3;\n"},
      {"flashjit/y.cuh",
       "#pragma once\n#include \"flashjit/x.cuh\"\nconstexpr int kTwice = 2 * kScale;\n"},
  };
  const std::string source =
      "#include \"flashjit/y.cuh\"\n"
      "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = kTwice; }\n";
  Result<nvrtc::CompileOutput> out =
      nvrtc::compile(source, "with_headers.cu", headers, {"--gpu-architecture=sm_90"}, true, true);
  INFO(error_text(out));
  REQUIRE(out.ok());
  CHECK(has_elf_magic(out->cubin));
  CHECK(out->ptx.find(".entry k") != std::string::npos);

  Result<nvrtc::CompileOutput> missing =
      nvrtc::compile(source, "no_headers.cu", {}, {"--gpu-architecture=sm_90"}, true, false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("flashjit/y.cuh") != std::string::npos);
}

TEST_CASE("parse_ptxas_info reads a real ptxas -v log", "[nvrtc]") {
  Result<nvrtc::CompileOutput> out = compile_tiny("sm_90", true, false);
  REQUIRE(out.ok());
  const nvrtc::PtxasInfo info = nvrtc::parse_ptxas_info(out->log, "flashjit_fwd");
  INFO(out->log);
  CHECK(info.registers > 0);
  CHECK(info.spill_stores == 0);
  CHECK(info.spill_loads == 0);
  CHECK(info.stack_frame == 0);
  CHECK(info.static_smem == 128 * static_cast<int>(sizeof(float)));
}

TEST_CASE("ptxas -v lines come back on every compile of the same source", "[nvrtc]") {
  // NVRTC 12.9+ caches compiles; a cache hit would return an empty log.
  for (int i = 0; i < 3; ++i) {
    Result<nvrtc::CompileOutput> out = compile_tiny("sm_90", true, false);
    REQUIRE(out.ok());
    CHECK(nvrtc::parse_ptxas_info(out->log, "flashjit_fwd").registers > 0);
  }
}

TEST_CASE("nvrtc compiles from several threads at once", "[nvrtc]") {
  std::vector<int> registers(4, -1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < registers.size(); ++i) {
    threads.emplace_back([&registers, i] {
      Result<nvrtc::CompileOutput> out = compile_tiny(i % 2 ? "sm_80" : "sm_90", true, false);
      if (out.ok()) registers[i] = nvrtc::parse_ptxas_info(out->log, "flashjit_fwd").registers;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r : registers) CHECK(r > 0);
}

TEST_CASE("parse_ptxas_info keeps each function's section apart", "[nvrtc]") {
  const nvrtc::PtxasInfo fwd = nvrtc::parse_ptxas_info(kRecordedLog, "flashjit_fwd");
  CHECK(fwd.registers == 168);
  CHECK(fwd.static_smem == 49152);
  CHECK(fwd.stack_frame == 0);
  CHECK(fwd.spill_stores == 0);
  CHECK(fwd.spill_loads == 0);

  const nvrtc::PtxasInfo second = nvrtc::parse_ptxas_info(kRecordedLog, "second");
  CHECK(second.registers == 34);
  CHECK(second.stack_frame == 256);
  CHECK(second.static_smem == 0);  // ptxas omits smem when there is none

  // A non-entry function has a properties line but no "Used" line.
  const nvrtc::PtxasInfo helper = nvrtc::parse_ptxas_info(kRecordedLog, "_Z6helperf");
  CHECK(helper.registers == -1);
  CHECK(helper.stack_frame == 0);

  const nvrtc::PtxasInfo older = nvrtc::parse_ptxas_info(kOlderLog, "flashjit_fwd");
  CHECK(older.registers == 255);
  CHECK(older.stack_frame == 32);
  CHECK(older.spill_stores == 24);
  CHECK(older.spill_loads == 16);

  // A kernel whose name is a prefix of another's is not confused with it.
  const nvrtc::PtxasInfo prefix = nvrtc::parse_ptxas_info(kRecordedLog, "flashjit");
  CHECK(prefix.registers == -1);
  CHECK(prefix.spill_stores == -1);
  CHECK(prefix.static_smem == -1);
}

TEST_CASE("nvrtc search order follows the environment", "[nvrtc]") {
  SECTION("without FLASHJIT_NVRTC_PATH: loader names first, then existing files") {
    ScopedEnv no_path("FLASHJIT_NVRTC_PATH", nullptr);
    ScopedEnv cuda_home("CUDA_HOME", "/nonexistent-cuda-home");
    const std::vector<std::string> c = nvrtc::detail::search_candidates();
    REQUIRE(c.size() >= 3);
    CHECK(c[0] == "libnvrtc.so.13");
    CHECK(c[1] == "libnvrtc.so.12");
    CHECK(c[2] == "libnvrtc.so");
    for (size_t i = 3; i < c.size(); ++i) {
      CHECK(c[i].front() == '/');
      CHECK(c[i].find("/nonexistent-cuda-home") == std::string::npos);
    }
  }
  SECTION("a directory is searched for the library names") {
    ScopedEnv path("FLASHJIT_NVRTC_PATH", "/usr/local/cuda/lib64");
    const std::vector<std::string> c = nvrtc::detail::search_candidates();
    REQUIRE(c.size() == 3);
    CHECK(c[0] == "/usr/local/cuda/lib64/libnvrtc.so.13");
    CHECK(c[2] == "/usr/local/cuda/lib64/libnvrtc.so");
  }
  SECTION("a wheel layout under PYTHONPATH is found") {
    const std::string site = "/tmp/flashjit_test_site_" + std::to_string(getpid());
    const std::string lib_dir = site + "/nvidia/cu13/lib";
    REQUIRE(std::system(("mkdir -p " + lib_dir).c_str()) == 0);
    std::ofstream(lib_dir + "/libnvrtc.so.13") << "not a library";
    ScopedEnv python_path("PYTHONPATH", "/nowhere:" + site);
    ScopedEnv no_path("FLASHJIT_NVRTC_PATH", nullptr);
    const std::vector<std::string> c = nvrtc::detail::search_candidates();
    CHECK(std::find(c.begin(), c.end(), lib_dir + "/libnvrtc.so.13") != c.end());
    std::system(("rm -rf " + site).c_str());
  }
}

TEST_CASE("FLASHJIT_NVRTC_PATH naming a bogus file gives an error that names it", "[nvrtc]") {
  const std::string bogus = "/tmp/flashjit_bogus_nvrtc_" + std::to_string(getpid()) + ".so";
  std::ofstream(bogus) << "this is not an ELF file";
  ScopedEnv path("FLASHJIT_NVRTC_PATH", bogus);
  // An explicit path is the only candidate: no silent fallback to another NVRTC.
  const std::vector<std::string> candidates = nvrtc::detail::search_candidates();
  REQUIRE(candidates == std::vector<std::string>{bogus});

  // try_load leaves the process-wide NVRTC alone.
  Result<std::string> r = nvrtc::detail::try_load(candidates);
  std::remove(bogus.c_str());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status() == Status::kNvrtcUnavailable);
  INFO(r.error().message);
  CHECK(r.error().message.find(bogus) != std::string::npos);
  CHECK(r.error().message.find("FLASHJIT_NVRTC_PATH") != std::string::npos);

  Result<std::string> absent = nvrtc::detail::try_load({"/nonexistent/libnvrtc.so.13"});
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.error().message.find("/nonexistent/libnvrtc.so.13") != std::string::npos);
}

TEST_CASE("try_load opens a real NVRTC by path", "[nvrtc]") {
  const std::string toolkit_nvrtc = "/usr/local/cuda/lib64/libnvrtc.so.13";
  if (std::ifstream(toolkit_nvrtc).fail()) {
    WARN("no CUDA 13 toolkit in /usr/local/cuda: skipped");
    return;
  }
  Result<std::string> r = nvrtc::detail::try_load({"/nonexistent/libnvrtc.so.13", toolkit_nvrtc});
  INFO(error_text(r));
  REQUIRE(r.ok());
  CHECK(*r == toolkit_nvrtc);
}

TEST_CASE("parse_ptxas_info sees ptxas serialise a kernel's wgmma", "[nvrtc]") {
  // The line as ptxas 13.0 writes it (through nvcc -Xptxas -v and NVRTC alike).
  const std::string log = std::string(kRecordedLog) +
                          "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
                          "serialized due to insufficient register resources for the wgmma pipeline in the "
                          "function 'flashjit_fwd'\n";
  CHECK(nvrtc::parse_ptxas_info(log, "flashjit_fwd").wgmma_serialized());
  CHECK_FALSE(nvrtc::parse_ptxas_info(log, "second").wgmma_serialized());
  CHECK_FALSE(nvrtc::parse_ptxas_info(log, "flashjit").wgmma_serialized());
  CHECK_FALSE(nvrtc::parse_ptxas_info(kRecordedLog, "flashjit_fwd").wgmma_serialized());
  const nvrtc::PtxasInfo c7511 = nvrtc::parse_ptxas_info(log, "flashjit_fwd");
  REQUIRE(c7511.wgmma_notes.size() == 1);
  CHECK(c7511.wgmma_notes[0].rfind("(C7511) Potential Performance Loss", 0) == 0);
  CHECK(nvrtc::parse_ptxas_info(kRecordedLog, "flashjit_fwd").wgmma_notes.empty());
}

TEST_CASE("parse_ptxas_info sees every reason ptxas gives for serialising or waiting on wgmma", "[nvrtc]") {
  // Lines ptxas 13.0 wrote for variants of templates/fwd_wgmma.cuh (bench/results/2026-12-04-h200-run29
  // and after): a divergent branch inside the consumer's tile loop serialised every wgmma (C7518) while
  // the register report stayed clean; a use of wgmma-written registers got a wait added (C7517).
  const std::string c7518 = std::string(kRecordedLog) +
                            "ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are "
                            "serialized due to program dependence on compiler-inserted WG.DP in divergent path in "
                            "the function 'flashjit_fwd'\n";
  const nvrtc::PtxasInfo serialized = nvrtc::parse_ptxas_info(c7518, "flashjit_fwd");
  CHECK(serialized.wgmma_serialized());
  CHECK_FALSE(serialized.wgmma_wait_injected());
  CHECK(serialized.registers == 168);
  REQUIRE(serialized.wgmma_notes.size() == 1);
  CHECK(serialized.wgmma_notes[0].rfind("(C7518)", 0) == 0);

  const std::string c7517 = std::string(kRecordedLog) +
                            "ptxas info    : (C7517) warpgroup.wait is injected in around line 1080 by compiler to "
                            "allow use of registers defined by GMMA in function 'flashjit_fwd'\n";
  const nvrtc::PtxasInfo waited = nvrtc::parse_ptxas_info(c7517, "flashjit_fwd");
  CHECK_FALSE(waited.wgmma_serialized());
  CHECK(waited.wgmma_wait_injected());
  REQUIRE(waited.wgmma_notes.size() == 1);
  CHECK(waited.wgmma_notes[0].find("warpgroup.wait is injected") != std::string::npos);
  CHECK_FALSE(nvrtc::parse_ptxas_info(c7517, "second").wgmma_wait_injected());
}
