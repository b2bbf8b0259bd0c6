// What both forward kernels (fwd_mma.cuh, fwd_wgmma.cuh) share: the base-2
// constants, -inf, and which K/V tiles one CTA visits and masks.
#pragma once

#include "flashjit/params.cuh"
#include "flashjit/ptx.cuh"

namespace flashjit {

/// log2(e): exp(x) = exp2(x * log2(e)); the kernels fold it into the scale.
inline constexpr float kLog2e = 1.44269504088896340736f;
/// ln(2): log(x) = log2(x) * ln(2), for the natural-log LSE.
inline constexpr float kLn2 = 0.69314718055994530942f;

namespace fwd {

__device__ __forceinline__ float neg_inf() { return ptx::u32_as_f32(0xff800000u); }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

/// The row max in exp2 units; 0 for a row that has seen only masked keys, so
/// exp2(-inf - 0) = 0 instead of NaN.
__device__ __forceinline__ float scaled_max(float mx, float scale_log2) {
  return mx == neg_inf() ? 0.f : mx * scale_log2;
}

/// The (batch, head, query block) of this CTA and the K/V tiles it visits.
struct Block {
  int m_block, h, b;
  int seqlen_k;       ///< this batch entry's key length
  int causal_offset;  ///< bottom-right causal alignment: query i sees keys j <= i + causal_offset
  int n_tiles;        ///< K/V tiles [0, n_tiles) hold a visible key for this block
  int n_mask_begin;   ///< tiles from here on need the mask
};

/// The block of query rows [m_block * kBlockM, +kBlockM) of (batch b, head h).
template <int kBlockM, int kBlockN, bool kIsCausal, bool kIsEven>
__device__ __forceinline__ Block make_block(const FwdParams& params, int m_block, int h, int b) {
  Block blk;
  blk.m_block = m_block;
  blk.h = h;
  blk.b = b;
  // kIsEven promises no per-batch key lengths (the host only passes
  // seqlens_k to padded specializations).
  blk.seqlen_k = (!kIsEven && params.seqlens_k != nullptr) ? params.seqlens_k[blk.b] : params.seqlen_k;
  blk.causal_offset = blk.seqlen_k - params.seqlen_q;
  blk.n_tiles = (blk.seqlen_k + kBlockN - 1) / kBlockN;
  if constexpr (kIsCausal) {
    const int last_row = imin((blk.m_block + 1) * kBlockM, params.seqlen_q) - 1;
    const int keys_end = imax(0, imin(blk.seqlen_k, last_row + blk.causal_offset + 1));
    blk.n_tiles = imin(blk.n_tiles, (keys_end + kBlockN - 1) / kBlockN);
  }
  // The mask is needed from the last (partial) tile when padded, and from
  // every tile that reaches past the first row's diagonal (its first
  // invisible key is m_block * kBlockM + causal_offset + 1).
  blk.n_mask_begin = blk.n_tiles;
  if constexpr (!kIsEven) blk.n_mask_begin = blk.seqlen_k / kBlockN;
  if constexpr (kIsCausal) {
    const int first_hidden = blk.m_block * kBlockM + blk.causal_offset + 1;
    blk.n_mask_begin = imin(blk.n_mask_begin, imax(0, first_hidden) / kBlockN);
  }
  return blk;
}

/// grid = (ceil(Sq / kBlockM), heads, batch), one block per CTA.
template <int kBlockM, int kBlockN, bool kIsCausal, bool kIsEven>
__device__ __forceinline__ Block locate_block(const FwdParams& params) {
  // Causal: the last M blocks see the most keys; launch them first.
  const int m_block = kIsCausal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  return make_block<kBlockM, kBlockN, kIsCausal, kIsEven>(params, m_block, blockIdx.y, blockIdx.z);
}

}  // namespace fwd
}  // namespace flashjit
