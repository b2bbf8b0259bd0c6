// V^T for the TF32 Hopper forward (templates/fwd_wgmma.cuh): TF32 wgmma reads
// B from shared memory K-major only, so P V needs V with the keys contiguous.
// One 32 x 32 tile per CTA through shared memory: coalesced reads along D,
// coalesced writes along the keys. Within every group of 8 keys the output
// order is 0, 2, 4, 6, 1, 3, 5, 7 (see FwdWgmmaKernel::pack_p).
//
// Launch contract: grid = (padded_k / 32 * D / 32, H, B), block = (32, 8), one VtParams.
#pragma once

#include "flashjit/params.cuh"

namespace flashjit {

template <int kHeadDim>
struct VTransposeKernel {
  static constexpr int kTile = 32;
  static constexpr int kRowsPerPass = 8;  // blockDim.y
  static_assert(kHeadDim % kTile == 0, "head_dim must be a multiple of 32");

  /// The key stored at position `pos` of its group of 8.
  static __device__ __forceinline__ int key_at(int pos) { return pos < 4 ? 2 * pos : 2 * (pos - 4) + 1; }

  static __device__ void run(const VtParams& p) {
    __shared__ float tile[kTile][kTile + 1];  // +1: the column reads hit 32 banks
    constexpr int kDTiles = kHeadDim / kTile;
    const int h = blockIdx.y;
    const int b = blockIdx.z;
    const long long bh = static_cast<long long>(b) * p.heads + h;
    const int key0 = (blockIdx.x / kDTiles) * kTile;
    const int d0 = (blockIdx.x % kDTiles) * kTile;
    const float* v = p.v + b * p.v_batch_stride + h * p.v_head_stride + d0 + threadIdx.x;
#pragma unroll
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const int key = key0 + i;
      tile[i][threadIdx.x] = key < p.seqlen_k ? v[key * p.v_row_stride] : 0.f;
    }
    __syncthreads();
    const int pos = threadIdx.x;
    const int key_local = (pos & ~7) + key_at(pos & 7);
    float* vt = p.vt + (bh * kHeadDim + d0) * p.padded_k + key0 + pos;
#pragma unroll
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      vt[static_cast<long long>(i) * p.padded_k] = tile[key_local][i];
    }
  }
};

}  // namespace flashjit
