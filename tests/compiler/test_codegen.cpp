#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/templates.h"
#include "compiler/tile_config.h"
#include "runtime/nvrtc.h"

using namespace flashjit;

TEST_CASE("generated source is a prelude around a template include", "[codegen]") {
  auto spec = KernelSpec::parse("fwd_bf16_d128_causal_padded_sm90");
  REQUIRE(spec.ok());
  const std::string src = generate_source(*spec);
  CHECK_THAT(src, Catch::Contains("// flashjit generated source: " + spec->to_string()));
  CHECK_THAT(src, Catch::Contains("#include \"flashjit/fwd_mma.cuh\""));
  CHECK_THAT(src, Catch::Contains("constexpr int kHeadDim = 128;"));
  CHECK_THAT(src, Catch::Contains("constexpr bool kIsCausal = true;"));
  CHECK_THAT(src, Catch::Contains("constexpr bool kIsEven = false;"));
  CHECK_THAT(src, Catch::Contains("using Element = flashjit::bf16_t;"));
  CHECK_THAT(src, Catch::Contains("constexpr int kSmemBytes = " + std::to_string(smem_bytes(*spec)) + ";"));
  CHECK_THAT(src, Catch::Contains("extern \"C\" __global__"));
  CHECK_THAT(src, Catch::Contains("flashjit_fwd("));
  // No toolkit or host headers: only the embedded templates.
  CHECK(src.find("#include <") == std::string::npos);

  auto bwd = KernelSpec::parse("bwd_f32ieee_d64_noncausal_even_sm80_det");
  REQUIRE(bwd.ok());
  const std::string bsrc = generate_source(*bwd);
  CHECK_THAT(bsrc, Catch::Contains("using Element = float;"));
  CHECK_THAT(bsrc, Catch::Contains("flashjit::MathMode::k3xTF32"));
  CHECK_THAT(bsrc, Catch::Contains("constexpr bool kDeterministic = true;"));
  for (const std::string& name : kernel_names(*bwd)) CHECK_THAT(bsrc, Catch::Contains(name + "("));
}

TEST_CASE("the Hopper forward takes its tensor maps as a __grid_constant__ parameter", "[codegen]") {
  auto spec = KernelSpec::parse("fwd_f16_d64_noncausal_padded_sm90a");
  REQUIRE(spec.ok());
  REQUIRE(spec->tile.wgmma);
  const std::string src = generate_source(*spec);
  CHECK_THAT(src, Catch::Contains("#include \"flashjit/fwd_wgmma.cuh\""));
  CHECK_THAT(src, Catch::Contains("using Element = flashjit::f16_t;"));
  CHECK_THAT(src, Catch::Contains("flashjit::FwdWgmmaKernel<Element, kHeadDim, kBlockM, kBlockN, kStages"));
  CHECK_THAT(src, Catch::Contains("flashjit_fwd(const __grid_constant__ flashjit::FwdTmaParams params)"));
  CHECK_THAT(src, Catch::Contains("constexpr int kSmemBytes = " + std::to_string(smem_bytes(*spec)) + ";"));
  CHECK(nvrtc_options(*spec).front() == "--gpu-architecture=sm_90a");
}

TEST_CASE("templates are embedded and hashed", "[codegen]") {
  const auto& t = embedded_templates();
  auto has = [&](const char* name) {
    for (const auto& e : t) if (std::string(e.name) == name) return e.size > 0;
    return false;
  };
  CHECK(has("flashjit/params.cuh"));
  CHECK(has("flashjit/ptx.cuh"));
  CHECK(has("flashjit/fwd_mma.cuh"));
  CHECK(has("flashjit/bwd_mma.cuh"));
  CHECK(has("flashjit/fwd_wgmma.cuh"));
  CHECK(has("flashjit/hopper_ptx.cuh"));
  CHECK(has("flashjit/fwd_common.cuh"));
  CHECK(templates_hash() != 0);
  CHECK(template_headers().size() == t.size());
  for (const auto& e : t) {
    // Templates must not reach for toolkit or standard headers.
    const std::string text(e.data, e.size);
    INFO(e.name);
    CHECK(text.find("#include <") == std::string::npos);
  }
}

namespace {

struct CompileCheck {
  std::string spec;
  bool ok = false;
  std::string error;
  std::vector<std::string> perf_bugs;  // kernels with spills, a stack frame or slowed wgmma
  int registers = -1;
};

// Compiles every spec with NVRTC on one thread per core (at least two, at
// most 16: the all-arch list takes ~9 minutes on two cores) and records, per
// kernel entry, whether ptxas reported spills.
std::vector<CompileCheck> compile_all(const std::vector<KernelSpec>& specs) {
  std::vector<CompileCheck> out(specs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      const KernelSpec& s = specs[i];
      CompileCheck& c = out[i];
      c.spec = s.to_string();
      auto r = nvrtc::compile(generate_source(s), c.spec + ".cu", template_headers(),
                              nvrtc_options(s), true, false);
      if (!r) { c.error = r.error().message; continue; }
      c.ok = !r->cubin.empty();
      for (const std::string& k : kernel_names(s)) {
        const auto info = nvrtc::parse_ptxas_info(r->log, k);
        if (k == kernel_names(s).front()) c.registers = info.registers;
        if (info.registers < 0 || info.spill_stores != 0 || info.spill_loads != 0) {
          c.perf_bugs.push_back(k + ": regs " + std::to_string(info.registers) + ", spill stores " +
                               std::to_string(info.spill_stores) + ", spill loads " +
                               std::to_string(info.spill_loads));
        }
        // Right results at a fraction of the speed: no GPU test would notice.
        for (const std::string& note : info.wgmma_notes) c.perf_bugs.push_back(k + ": " + note);
      }
    }
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 2u, 16u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  return out;
}

void check_all(const std::vector<CompileCheck>& results) {
  for (const CompileCheck& c : results) {
    INFO(c.spec << "\n" << c.error);
    CHECK(c.ok);
    for (const std::string& s : c.perf_bugs) {
      INFO(s);
      CHECK(false);  // local-memory spills and serialised wgmma are performance bugs
    }
  }
}

}  // namespace

TEST_CASE("NVRTC compiles every spec of the warm-up grid with no spills", "[codegen][nvrtc]") {
  REQUIRE(nvrtc::load().ok());
  check_all(compile_all(seed_grid_specs(Arch::kSm90)));
}

TEST_CASE("NVRTC compiles every supported spec on every arch with no spills", "[codegen][nvrtc]") {
  REQUIRE(nvrtc::load().ok());
  std::vector<KernelSpec> specs;
  for (Arch arch : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90}) {
    for (const KernelSpec& s : all_supported_specs(arch)) specs.push_back(s);
  }
  // sm90 lists the Hopper forward (bf16/f16/f32-tf32 x hd 64, 128 and
  // bf16/f16 x hd 256, x causal x padding) beside the mma.sync spec that
  // forcing the mma path selects, the 16-bit hd 64 forward's short-key and
  // three-consumer tiles (x causal x padding), the 16-bit hd 128 causal
  // forward's wide-key tile (x padding), and the non-causal tiles that split
  // tiles, three-consumer hd 64 and two-consumer hd 128 (x padding).
  REQUIRE(all_supported_specs(Arch::kSm90).size() ==
          all_supported_specs(Arch::kSm80).size() + 24 + 8 + 8 + 8 + 4 + 4 + 4);
  REQUIRE(specs.size() == 3 * all_supported_specs(Arch::kSm80).size() + all_supported_specs(Arch::kSm90).size());
  check_all(compile_all(specs));
}
