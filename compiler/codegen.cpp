#include "compiler/codegen.h"

#include <fmt/format.h>

#include "compiler/templates.h"
#include "compiler/tile_config.h"

namespace flashjit {
namespace {

const char* element_type(DType d) {
  switch (d) {
    case DType::kBF16: return "flashjit::bf16_t";
    case DType::kF16: return "flashjit::f16_t";
    case DType::kF32: return "float";
  }
  return "?";
}

const char* math_mode(Precision p) {
  switch (p) {
    case Precision::kNative: return "flashjit::MathMode::kNative";
    case Precision::kTF32: return "flashjit::MathMode::kTF32";
    case Precision::kIEEE: return "flashjit::MathMode::k3xTF32";
  }
  return "?";
}

// The constexpr lines every template takes. The Hopper forward derives its
// math and warp count from the element type and tile: maybe_unused keeps
// NVRTC's log free of "declared but never referenced" there.
std::string common_prelude(const KernelSpec& spec) {
  const TileConfig& t = spec.tile;
  return fmt::format(
      "using Element = {};\n"
      "[[maybe_unused]] constexpr flashjit::MathMode kMath = {};\n"
      "constexpr int kHeadDim = {};\n"
      "constexpr bool kIsCausal = {};\n"
      "constexpr bool kIsEven = {};\n"
      "constexpr int kBlockM = {};\n"
      "constexpr int kBlockN = {};\n"
      "[[maybe_unused]] constexpr int kNumWarps = {};\n"
      "constexpr int kStages = {};\n"
      "constexpr int kSmemBytes = {};\n",
      element_type(spec.dtype), math_mode(spec.precision), spec.head_dim,
      spec.causal ? "true" : "false", spec.padding == SeqPadding::kEven ? "true" : "false",
      t.block_m, t.block_n, t.num_warps, t.num_stages, smem_bytes(spec));
}

// The Hopper forward: a __grid_constant__ parameter block, because the TMA
// unit reads the tensor maps from kernel parameter space. f32 (TF32) adds
// the V^T kernel the host runs first.
std::string forward_wgmma_source(const KernelSpec& spec) {
  const bool tf32 = needs_v_transpose(spec);
  return fmt::format(
      "// flashjit generated source: {spec}\n"
      "#include \"flashjit/fwd_wgmma.cuh\"\n"
      "{vt_include}"
      "namespace flashjit_generated {{\n"
      "{prelude}"
      "constexpr bool kOApart = {o_apart};\n"
      "constexpr bool kStreamK = {stream_k};\n"
      "constexpr int kQBuffers = {q_buffers};\n"
      "using Kernel = flashjit::FwdWgmmaKernel<Element, kHeadDim, kBlockM, kBlockN, kStages, kIsCausal,\n"
      "                                        kIsEven, kOApart, kStreamK, kQBuffers, kSmemBytes>;\n"
      "}}  // namespace flashjit_generated\n"
      "extern \"C\" __global__ void __launch_bounds__(flashjit_generated::Kernel::kThreads,\n"
      "                                               flashjit_generated::Kernel::kMinBlocksPerSM)\n"
      "flashjit_fwd(const __grid_constant__ flashjit::FwdTmaParams params) {{\n"
      "  flashjit_generated::Kernel::run(params);\n"
      "}}\n"
      "{vt_entry}",
      fmt::arg("spec", spec.to_string()), fmt::arg("prelude", common_prelude(spec)),
      fmt::arg("o_apart", fwd_wgmma_o_apart(spec) ? "true" : "false"),
      fmt::arg("stream_k", fwd_wgmma_stream_k(spec) ? "true" : "false"),
      fmt::arg("q_buffers", fwd_wgmma_q_buffers(spec)),
      fmt::arg("vt_include", tf32 ? "#include \"flashjit/v_transpose.cuh\"\n" : ""),
      fmt::arg("vt_entry",
               tf32 ? "extern \"C\" __global__ void __launch_bounds__(256)\n"
                      "flashjit_fwd_vt(const flashjit::VtParams params) {\n"
                      "  flashjit::VTransposeKernel<flashjit_generated::kHeadDim>::run(params);\n"
                      "}\n"
                    : ""));
}

std::string forward_source(const KernelSpec& spec) {
  if (spec.tile.wgmma) return forward_wgmma_source(spec);
  return fmt::format(
      "// flashjit generated source: {spec}\n"
      "#include \"flashjit/fwd_mma.cuh\"\n"
      "namespace flashjit_generated {{\n"
      "{prelude}"
      "using Kernel = flashjit::FwdKernel<Element, kMath, kHeadDim, kBlockM, kBlockN, kNumWarps,\n"
      "                                   kStages, kIsCausal, kIsEven, kSmemBytes>;\n"
      "}}  // namespace flashjit_generated\n"
      "extern \"C\" __global__ void __launch_bounds__(flashjit_generated::Kernel::kThreads,\n"
      "                                               flashjit_generated::Kernel::kMinBlocksPerSM)\n"
      "flashjit_fwd(const flashjit::FwdParams params) {{ flashjit_generated::Kernel::run(params); }}\n",
      fmt::arg("spec", spec.to_string()), fmt::arg("prelude", common_prelude(spec)));
}

std::string backward_source(const KernelSpec& spec) {
  std::string entries;
  struct Entry { const char* name; const char* bounds; const char* fn; };
  const Entry kEntries[] = {
      {"flashjit_bwd_preprocess", "Kernel::kPreprocessThreads", "preprocess"},
      {"flashjit_bwd_main", "Kernel::kThreads, flashjit_generated::Kernel::kMinBlocksPerSM", "main"},
      {"flashjit_bwd_dq", "Kernel::kDqThreads, 1", "dq"},
      {"flashjit_bwd_postprocess", "Kernel::kPostprocessThreads", "postprocess"},
  };
  for (const Entry& e : kEntries) {
    entries += fmt::format(
        "extern \"C\" __global__ void __launch_bounds__(flashjit_generated::{})\n"
        "{}(const flashjit::BwdParams params) {{ flashjit_generated::Kernel::{}(params); }}\n",
        e.bounds, e.name, e.fn);
  }
  return fmt::format(
      "// flashjit generated source: {spec}\n"
      "#include \"flashjit/bwd_mma.cuh\"\n"
      "namespace flashjit_generated {{\n"
      "{prelude}"
      "constexpr bool kDeterministic = {det};\n"
      "constexpr int kDqSmemBytes = {dq_smem};\n"
      "using Kernel = flashjit::BwdKernel<Element, kMath, kHeadDim, kBlockM, kBlockN, kNumWarps,\n"
      "                                   kStages, kIsCausal, kIsEven, kDeterministic, kSmemBytes,\n"
      "                                   kDqSmemBytes>;\n"
      "}}  // namespace flashjit_generated\n"
      "{entries}",
      fmt::arg("spec", spec.to_string()), fmt::arg("prelude", common_prelude(spec)),
      fmt::arg("det", spec.deterministic ? "true" : "false"),
      fmt::arg("dq_smem", bwd_dq_smem_bytes(spec)), fmt::arg("entries", entries));
}

}  // namespace

std::string generate_source(const KernelSpec& spec) {
  return spec.direction == Direction::kFwd ? forward_source(spec) : backward_source(spec);
}

std::vector<std::string> kernel_names(const KernelSpec& spec) {
  if (spec.direction == Direction::kFwd) {
    if (needs_v_transpose(spec)) return {"flashjit_fwd", "flashjit_fwd_vt"};
    return {"flashjit_fwd"};
  }
  return {"flashjit_bwd_main", "flashjit_bwd_preprocess", "flashjit_bwd_dq",
          "flashjit_bwd_postprocess"};
}

const std::vector<nvrtc::Header>& template_headers() {
  static const std::vector<nvrtc::Header> headers = [] {
    std::vector<nvrtc::Header> h;
    for (const EmbeddedTemplate& t : embedded_templates()) {
      h.push_back({t.name, std::string(t.data, t.size)});
    }
    return h;
  }();
  return headers;
}

std::vector<std::string> nvrtc_options(const KernelSpec& spec, bool for_ptx) {
  std::string arch = nvrtc_arch_name(spec.arch);  // "sm_90a"
  if (for_ptx) arch = "compute_" + arch.substr(3);
  return {
      "--gpu-architecture=" + arch,
      "--std=c++17",
      // Kernels are plain device code: no host headers, no exceptions.
      "--device-as-default-execution-space",
      // Keep IEEE division and sqrt (the softmax normaliser divides once per
      // row); exp2 uses the approximate ex2 instruction explicitly.
      "--fmad=true",
      "--ptxas-options=-v",
      "-DNDEBUG",
  };
}

}  // namespace flashjit
