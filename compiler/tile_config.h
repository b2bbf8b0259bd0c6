// The tiling policy: one pure function from a spec to a TileConfig, plus the
// shared-memory size each tile config needs. Testable with no GPU.
#pragma once

#include <vector>

#include "compiler/spec.h"

namespace flashjit {

/// The tile config the policy picks for `spec` on `spec.arch` (spec.tile is ignored).
TileConfig choose_tile_config(const KernelSpec& spec);

/// `spec` with its tile filled in by the policy when it is empty.
KernelSpec with_default_tile(KernelSpec spec);

/// Checks that a (possibly user-given) tile config is one the templates support
/// for this spec; the message names the field and value.
Result<void> validate_tile_config(const KernelSpec& spec);

/// Threads per CTA of the main kernel of the spec.
int threads_per_block(const KernelSpec& spec);

/// Dynamic shared memory (bytes) of the main kernel of the spec. The generated
/// source passes it to the template as kSmemBytes, and the template checks it
/// against sizeof(its SharedStorage) with a static_assert, so the two can
/// never drift apart.
int smem_bytes(const KernelSpec& spec);

/// Dynamic shared memory (bytes) of the backward's separate dQ kernel
/// (flashjit_bwd_dq, used in deterministic mode); passed as kDqSmemBytes.
int bwd_dq_smem_bytes(const KernelSpec& spec);

/// Hopper forward: the policy's tile for a key length (the longest of the
/// batch). 16-bit head_dim 64 takes 128 keys per tile instead of 192 where
/// that pads the keys by enough less to pay for the narrower tile's lower rate
/// (non-causal) or up to 4096 keys (causal); 16-bit head_dim 128 takes 176
/// keys (non-causal) or 160 (causal) from 8192 keys; every other spec keeps
/// choose_tile_config's tile.
TileConfig fwd_wgmma_tile_for_keys(const KernelSpec& spec, int seqlen_k);

/// The lengths of a Hopper forward launch, which pick its tile.
struct FwdShape {
  int seqlen_q = 0;
  int seqlen_k = 0;      ///< the longest of the batch
  long long pairs = 1;   ///< (batch, head) pairs
  /// Stream-K may split tiles: one key length for the whole batch and the
  /// schedule auto or streamk.
  bool split_tiles = true;
};

/// Hopper forward: the policy's tile for a launch of `shape` on `sm_count`
/// SMs (0: unknown, modelled as an H200's 132). 16-bit head_dim 64 takes
/// three consumer warpgroups (192 query rows, 128 keys) where a model of the
/// padding and the waves of tiles says they finish sooner than
/// fwd_wgmma_tile_for_keys's two, non-causal with stream-K's split tiles
/// (TileConfig::stream_k) where shape.split_tiles and splitting pays; 16-bit
/// head_dim 128 non-causal takes its split tile where shape.split_tiles and a
/// model of whole rounds against the pieces' cost says it gains (run 70);
/// every other spec takes that tile.
TileConfig fwd_wgmma_tile_for_shape(const KernelSpec& spec, const FwdShape& shape, int sm_count);

/// Hopper forward: every tile fwd_wgmma_tile_for_shape may pick for `spec`
/// (the policy's first), so that a warm-up compiles each.
std::vector<TileConfig> fwd_wgmma_launch_tiles(const KernelSpec& spec);

/// Hopper forward: true where O's staging tile fits in shared memory beside
/// Q and the K/V ring, so the next tile's Q can land while O is stored
/// (else 16-bit O is staged in the Q tile and f32 O written from registers);
/// passed as kOApart.
bool fwd_wgmma_o_apart(const KernelSpec& spec);

/// Hopper forward: Q buffers, passed as kQBuffers. 2 where the producer
/// loads the next tile's Q into a second buffer as a tile starts (not as its
/// last S ends): 16-bit non-causal head_dim 128 two-consumer kernels
/// without split tiles whose second Q tile fits beside O's staging tile;
/// else 1.
int fwd_wgmma_q_buffers(const KernelSpec& spec);

/// Hopper forward: the schedule (never kAuto) measured fastest for the spec
/// with `tiles` (query block, head, batch) tiles on `sm_count` SMs. kStreamK
/// only where fwd_wgmma_stream_k allows it: TF32 where fwd_stream_k_pays, a
/// 16-bit "_sk" tile (the policy weighed the split) wherever the tiles leave
/// a partial round; the launch falls back to kPersistent where its shape does
/// not allow it (per-batch key lengths).
FwdSchedule fwd_wgmma_schedule(const KernelSpec& spec, long long tiles, int sm_count);

/// Hopper forward: whether the kernel can split tiles by K/V steps
/// (FwdSchedule::kStreamK): TF32 non-causal kernels (every tile the same
/// steps) and 16-bit ones with TileConfig::stream_k; the other 16-bit
/// kernels measured slower with the code in (run 58-59).
bool fwd_wgmma_stream_k(const KernelSpec& spec);

/// Stream-K: how many of the `tiles` tiles, the last ones, are dealt by K/V
/// steps over `ctas` CTAs: one round plus the partial last round, so each
/// CTA's share is longer than a tile and a tile is split at most once; 0 where
/// the tiles fill whole rounds or a single one.
long long fwd_stream_k_tiles(long long tiles, long long ctas);

/// Whether stream-K is worth its splits for `tiles` tiles on `ctas` CTAs:
/// whole rounds would take >= 10% longer than the mean load (run 58).
bool fwd_stream_k_pays(long long tiles, long long ctas);

/// Hopper forward, causal: its tiles go longest first within groups of this
/// many (batch, head) pairs (FwdTmaParams::causal_group), given the K and V
/// bytes of all `pairs` pairs and the device's L2 size; `pairs` (one group)
/// unless K and V outgrow the L2.
int fwd_wgmma_causal_group(long long kv_bytes, int pairs, int l2_bytes);

/// Largest dynamic shared memory per block on the arch (bytes, after opt-in).
int max_smem_bytes(Arch arch);

}  // namespace flashjit
