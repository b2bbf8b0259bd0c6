// Kernel parameter blocks, shared verbatim by the host (runtime/) and the
// generated kernels (compiled by NVRTC). Plain C++ only: no CUDA keywords, no
// headers, fixed-width-by-convention types (long long = 64 bit, int = 32 bit
// on every platform NVRTC and the host compiler target), so the layout is the
// same on both sides. Strides are in elements; the last dimension (head_dim)
// is always contiguous.
#pragma once

namespace flashjit {

/// Forward pass. Tensors are addressed as ptr + b*batch_stride + s*row_stride + h*head_stride + d.
///   q: [B, Sq, H, D]-like, k, v: [B, Sk, H, D]-like, o like q.
///   lse: [B, H, Sq] fp32 (natural log), contiguous in Sq; may be null (not written).
///   seqlens_k: [B] int32 on the device, the valid key length of each batch
///   entry (<= seqlen_k); null means seqlen_k for every entry.
struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  const int* seqlens_k;

  long long q_batch_stride, q_row_stride, q_head_stride;
  long long k_batch_stride, k_row_stride, k_head_stride;
  long long v_batch_stride, v_row_stride, v_head_stride;
  long long o_batch_stride, o_row_stride, o_head_stride;
  long long lse_batch_stride, lse_head_stride;

  int batch;
  int heads;
  int seqlen_q;
  int seqlen_k;

  float scale;       ///< softmax scale (default 1/sqrt(D))
  float scale_log2;  ///< scale * log2(e): the kernel works in base 2 (exp2)
};

/// An opaque CUtensorMap (cuda.h: 16 x 64-bit, 64-byte aligned), encoded on
/// the host by cuTensorMapEncodeTiled and read by the TMA unit.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

/// Forward pass on the Hopper path (templates/fwd_wgmma.cuh): the FwdParams
/// plus one tensor map per tensor, each a 4-D view (D, S, H, B) of the same
/// strides with 128-byte swizzled boxes of 128-byte rows (64 16-bit or 32 f32
/// columns): q [cols x block_m], k and v [cols x block_n], o [cols x 64] (one
/// consumer warpgroup's rows). For f32, tma_v views V^T instead (VtParams):
/// (padded_k, D, H, B) in boxes of [32 keys x D].
/// tiles: ceil(Sq / block_m) x heads x batch, the tiles the CTAs share out
/// (read by the 16-bit kernels with split tiles, whose producer's 32
/// registers spilled when they held it; the others compute it).
/// tile_counter: null for a static schedule (CTA i takes tiles i, i + grid,
/// ...); else a device int that is 0 at launch, from which the CTAs take their
/// tiles after the first one (a dynamic schedule).
/// causal_group: causal tiles go longest first within groups of this many
/// (batch, head) pairs (fwd_wgmma_causal_group); >= 1, batch * heads for one
/// group of all pairs.
/// Stream-K (a static schedule; TF32 non-causal kernels and 16-bit "_sk"
/// ones, one key length for every batch entry): the last sk_tiles tiles
/// (grid < sk_tiles < 2 grid) are dealt as one run of K/V steps, split evenly
/// over the grid, so a tile may be split between CTA i (its first steps) and
/// CTA i + 1 (the rest). CTA i + 1 writes its part's O, row max and row sums
/// to sk_partials slot i + 1, then sk_flags[i + 1] = sk_epoch; CTA i waits
/// for that value and merges (so two CTAs of the grid must be resident at
/// once). sk_partials: grid x consumers x (D / 2 + 4) x 128 floats; sk_flags:
/// grid x consumers 8-byte words; sk_epoch: unique to the launch, so the
/// flags need no zeroing (CTA i clears each flag it has read, for CUDA
/// graphs, which replay one epoch). sk_tiles = 0: no stream-K.
struct FwdTmaParams {
  FwdParams p;
  TmaDescriptor tma_q;
  TmaDescriptor tma_k;
  TmaDescriptor tma_v;
  TmaDescriptor tma_o;
  int tiles;
  int* tile_counter;
  int causal_group;
  int sk_tiles;
  unsigned long long sk_epoch;
  unsigned long long* sk_flags;
  float* sk_partials;
};

/// V^T for the TF32 Hopper forward (templates/v_transpose.cuh): v as in
/// FwdParams (f32), vt a contiguous [B, H, D, padded_k] f32 buffer whose keys
/// are ordered 0, 2, 4, 6, 1, 3, 5, 7 within every group of 8; keys from
/// seqlen_k to padded_k (a multiple of 32) are written as zeros.
struct VtParams {
  const float* v;
  float* vt;
  long long v_batch_stride, v_row_stride, v_head_stride;
  int heads;
  int seqlen_k;
  int padded_k;
};

/// Backward pass (templates/bwd_mma.cuh). Same addressing as FwdParams:
///   q, dq: [B, Sq, H, D]-like; k, v, dk, dv: [B, Sk, H, D]-like; o, dout like q.
///   lse: [B, H, Sq] fp32 natural-log LSE written by the forward (-inf for rows
///   that see no key). Gradients are written in the input dtype; dK, dV rows of
///   keys >= seqlens_k[b] are written as zeros.
///   dq_accum, dsum: workspace laid out by runtime/bwd_plan (bwd_set_workspace):
///   dsum [B, H, Sq] fp32; dq_accum [B, H, Sq, D] fp32, only when dQ is
///   accumulated with atomics (not deterministic), else null.
struct BwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* dout;
  const float* lse;
  const int* seqlens_k;
  void* dq;
  void* dk;
  void* dv;
  float* dq_accum;
  float* dsum;

  long long q_batch_stride, q_row_stride, q_head_stride;
  long long k_batch_stride, k_row_stride, k_head_stride;
  long long v_batch_stride, v_row_stride, v_head_stride;
  long long o_batch_stride, o_row_stride, o_head_stride;
  long long dout_batch_stride, dout_row_stride, dout_head_stride;
  long long dq_batch_stride, dq_row_stride, dq_head_stride;
  long long dk_batch_stride, dk_row_stride, dk_head_stride;
  long long dv_batch_stride, dv_row_stride, dv_head_stride;
  long long lse_batch_stride, lse_head_stride;

  int batch;
  int heads;
  int seqlen_q;
  int seqlen_k;

  float scale;       ///< softmax scale (default 1/sqrt(D))
  float scale_log2;  ///< scale * log2(e)
};

}  // namespace flashjit
