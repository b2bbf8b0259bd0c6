// The backward's launch plan. Mirrors templates/bwd_mma.cuh: the kernel names,
// the block sizes (BwdKernel::kThreads, kDqThreads, kPreprocessThreads), the
// rows per pre/postprocess block and the workspace layout the kernels index.
#include "runtime/bwd_plan.h"

#include "compiler/tile_config.h"

namespace flashjit {
namespace {

constexpr unsigned kWarpSize = 32;
/// BwdKernel::kPreprocessThreads / kPostprocessThreads.
constexpr unsigned kPrepThreads = 256;
/// BwdKernel::kRowsPerPrepBlock: 8 threads per row of D elements.
constexpr unsigned kPrepRowsPerBlock = kPrepThreads / 8;
/// Rows of one mma tile: the dq kernel runs one warp per 16 query rows.
constexpr unsigned kMmaRows = 16;
/// Workspace buffers start on this boundary (16-byte vector accesses need 16;
/// 256 keeps them on separate cache-line groups).
constexpr size_t kBufferAlign = 256;

size_t align_up(size_t n) { return (n + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

unsigned ceil_div(int a, int b) { return static_cast<unsigned>((a + b - 1) / b); }

/// dsum: [B, H, Sq] fp32.
size_t dsum_bytes(const BwdShape& s) {
  return align_up(size_t(s.batch) * s.heads * s.seqlen_q * sizeof(float));
}

/// dq_accum: [B, H, Sq, D] fp32, only when dQ is accumulated with atomics.
size_t dq_accum_bytes(const KernelSpec& spec, const BwdShape& s) {
  if (spec.deterministic) return 0;
  return align_up(size_t(s.batch) * s.heads * s.seqlen_q * spec.head_dim * sizeof(float));
}

}  // namespace

size_t bwd_workspace_bytes(const KernelSpec& spec, const BwdShape& shape) {
  return dsum_bytes(shape) + dq_accum_bytes(spec, shape);
}

void bwd_assign_workspace(const KernelSpec& spec, const BwdShape& shape, void* workspace,
                          BwdParams* params) {
  char* base = static_cast<char*>(workspace);
  params->dsum = reinterpret_cast<float*>(base);
  params->dq_accum =
      spec.deterministic ? nullptr : reinterpret_cast<float*>(base + dsum_bytes(shape));
}

std::vector<BwdLaunch> bwd_launch_plan(const KernelSpec& spec, const BwdShape& shape) {
  std::vector<BwdLaunch> plan;
  const TileConfig& t = spec.tile;
  const unsigned heads = static_cast<unsigned>(shape.heads);
  const unsigned batch = static_cast<unsigned>(shape.batch);
  if (batch == 0 || heads == 0) return plan;
  // Grids with no blocks are not launched: with Sq == 0 only the main kernel
  // runs (it writes dK = dV = 0); with Sk == 0 there are no keys and dQ = 0 is
  // still written (postprocess of a zeroed accumulator, or the dq kernel).
  const unsigned q_rows_blocks = ceil_div(shape.seqlen_q, int(kPrepRowsPerBlock));
  const LaunchDim prep_block{kPrepThreads, 1, 1};

  if (q_rows_blocks > 0) {
    plan.push_back({"flashjit_bwd_preprocess", {q_rows_blocks, heads, batch}, prep_block, 0});
  }
  const unsigned k_blocks = ceil_div(shape.seqlen_k, t.block_n);
  if (k_blocks > 0) {
    plan.push_back({"flashjit_bwd_main",
                    {k_blocks, heads, batch},
                    {static_cast<unsigned>(t.num_warps) * kWarpSize, 1, 1},
                    smem_bytes(spec)});
  }
  if (spec.deterministic) {
    // The dq kernel writes dQ itself; no postprocess.
    const unsigned q_blocks = ceil_div(shape.seqlen_q, t.block_m);
    // BwdKernel::kDqSplitD: two warps per 16 query rows for hd256.
    const unsigned dq_split_d = spec.head_dim > 128 ? 2 : 1;
    if (q_blocks > 0) {
      plan.push_back({"flashjit_bwd_dq",
                      {q_blocks, heads, batch},
                      {static_cast<unsigned>(t.block_m) / kMmaRows * dq_split_d * kWarpSize, 1, 1},
                      bwd_dq_smem_bytes(spec)});
    }
  } else if (q_rows_blocks > 0) {
    plan.push_back({"flashjit_bwd_postprocess", {q_rows_blocks, heads, batch}, prep_block, 0});
  }
  return plan;
}

}  // namespace flashjit
