// Forward attention, FlashAttention-2 algorithm on mma.sync tensor cores.
//
//   O = softmax(scale * Q K^T + mask) V,  lse = log(sum(exp(scale * Q K^T + mask)))
//
// One CTA computes one (kBlockM x D) tile of O for one (batch, head); its warps
// split the rows (each warp owns kWarpRows = kBlockM / kNumWarps rows, i.e.
// kMTiles m16 tiles), so the online softmax needs only quad shuffles, never
// shared memory. K/V tiles of kBlockN rows stream through a kStages-deep
// cp.async ring; Q stays in shared memory for the whole CTA and is re-read per
// k-step with ldmatrix (keeping it in registers costs more registers than
// the re-read costs shared-memory bandwidth at kMTiles = 2). P never leaves
// registers: the S accumulator fragment is re-packed as the A operand of P V.
//
// Launch contract: grid = (ceil(Sq / kBlockM), heads, batch), block = kThreads,
// dynamic shared memory = kSmemBytes = sizeof(SharedStorage). The softmax scale
// must be positive (the row max is taken on unscaled scores).
#pragma once

#include "flashjit/fwd_common.cuh"
#include "flashjit/params.cuh"
#include "flashjit/ptx.cuh"

namespace flashjit {

/// Everything about the tiling that follows from the template parameters, in
/// one place (shapes, fragment counts, shared-memory row strides).
template <class Element, MathMode kMath, int kHeadDim, int kBlockM, int kBlockN, int kNumWarps,
          int kStages>
struct FwdTraits {
  static constexpr bool kIs16Bit = sizeof(Element) == 2;
  static constexpr int kThreads = kNumWarps * 32;

  // mma shapes: m16n8k16 for 16-bit inputs, m16n8k8 for TF32.
  static constexpr int kMmaM = 16;
  static constexpr int kMmaN = 8;
  static constexpr int kMmaK = kIs16Bit ? 16 : 8;

  static constexpr int kWarpRows = kBlockM / kNumWarps;     // Q rows owned by one warp
  static constexpr int kMTiles = kWarpRows / kMmaM;         // m16 tiles per warp
  // S register tile width. A warp owning two m16 tiles at D >= 96 holds O in
  // 96+ registers, and S over 64 keys would push it past 255 (spills), so S
  // covers 32 keys at a time even when a pipeline stage (kBlockN) is larger;
  // the larger stage still halves barriers and cp.async waits (measured on
  // H200, bf16 D=128: bn64 in two 32-key steps 335 TFLOP/s vs bn32 331).
  static constexpr int kSubN = (kMTiles >= 2 && kHeadDim >= 96 && kBlockN > 32) ? 32 : kBlockN;
  static constexpr int kSubTiles = kBlockN / kSubN;
  static constexpr int kNTilesS = kSubN / kMmaN;            // n8 tiles of S = Q K^T per warp
  static constexpr int kNTilesO = kHeadDim / kMmaN;         // n8 tiles of O per warp
  static constexpr int kKStepsQK = kHeadDim / kMmaK;        // k-steps of Q K^T (over D)
  static constexpr int kKStepsPV = kSubN / kMmaK;           // k-steps of P V (over keys)

  // Global -> shared copies move 16-byte chunks (cp.async's widest size).
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunkElems = kChunkBytes / int(sizeof(Element));
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;

  // Shared-memory rows are padded instead of swizzled (simpler indexing, ~3-6%
  // more shared memory). Why these pads, in 4-byte banks:
  //  - 16-bit: one 16-byte chunk of pad shifts consecutive rows by 4 banks
  //    (mod 32), so the 8 row addresses of each ldmatrix 8x8 matrix hit 8
  //    disjoint 4-bank groups: conflict-free ldmatrix and cp.async.
  //  - f32 Q and K are read with 8-byte loads at (row g, column 2t): a row
  //    stride of 8 banks (mod 32) spreads a half-warp (g < 4, t < 4) over all 32.
  //  - f32 V is read with 4-byte loads at (row 2t, column g): a row stride of
  //    4 banks (mod 32) spreads the warp (t < 4, g < 8) over all 32.
  static constexpr int kPadQK = kIs16Bit ? kChunkElems : 8;
  static constexpr int kPadV = kIs16Bit ? kChunkElems : 4;
  static constexpr int kStrideQK = kHeadDim + kPadQK;  // elements
  static constexpr int kStrideV = kHeadDim + kPadV;    // elements
  static constexpr int kStrideQKBytes = kStrideQK * int(sizeof(Element));
  static constexpr int kStrideVBytes = kStrideV * int(sizeof(Element));

  static_assert(kIs16Bit == (kMath == MathMode::kNative),
                "16-bit inputs use kNative; f32 inputs use kTF32 or k3xTF32");
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "head_dim must be 32, 64, 96, 128 or 256");
  static_assert(kBlockM % (kNumWarps * kMmaM) == 0, "each warp owns whole m16 tiles");
  static_assert(kBlockN % 16 == 0, "P V k-steps and paired ldmatrix need kBlockN % 16 == 0");
  static_assert(kStages >= 1, "at least one K/V stage");
  static_assert(kStrideQKBytes % kChunkBytes == 0 && kStrideVBytes % kChunkBytes == 0,
                "cp.async needs 16-byte aligned shared rows");
};

template <class Element, MathMode kMath, int kHeadDim, int kBlockM, int kBlockN, int kNumWarps,
          int kStages, bool kIsCausal, bool kIsEven, int kSmemBytes>
struct FwdKernel {
  using Traits = FwdTraits<Element, kMath, kHeadDim, kBlockM, kBlockN, kNumWarps, kStages>;
  static constexpr int kThreads = Traits::kThreads;
  /// One CTA per SM is all the launch bounds promise: the compiler may use up
  /// to 255 registers (spilling costs more than the occupancy it buys), and
  /// shared memory alone sets how many CTAs share an SM.
  static constexpr int kMinBlocksPerSM = 1;

  static constexpr bool kIs16Bit = Traits::kIs16Bit;
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr int kMTiles = Traits::kMTiles;
  static constexpr int kNTilesS = Traits::kNTilesS;
  static constexpr int kNTilesO = Traits::kNTilesO;
  static constexpr int kStrideQK = Traits::kStrideQK;
  static constexpr int kStrideV = Traits::kStrideV;

  /// Q tile [kBlockM][D] (reused for the O tile in the epilogue), and kStages
  /// K and V tiles [kBlockN][D]; all rows padded (see FwdTraits).
  struct SharedStorage {
    alignas(16) Element q[kBlockM][kStrideQK];
    alignas(16) Element k[kStages][kBlockN][kStrideQK];
    alignas(16) Element v[kStages][kBlockN][kStrideV];
  };
  static_assert(sizeof(SharedStorage) == kSmemBytes,
                "kSmemBytes (compiler/tile_config.cpp fwd_smem_bytes) disagrees with SharedStorage");

  // Register tiles of one warp. S: [kMTiles][kNTilesS] m16n8 accumulators;
  // O: [kMTiles][kNTilesO]. Row statistics: two rows (g, g + 8) per m-tile.
  using AccS = float[kMTiles][kNTilesS][4];
  using AccO = float[kMTiles][kNTilesO][4];
  using RowStat = float[kMTiles][2];


  // -------------------------------------------------------------------------
  // Global -> shared: a [kRows][D] tile, 16-byte cp.async chunks. Rows at or
  // past `valid_rows` are zero-filled (only checked when !kIsEven); zeros, not
  // garbage, matter for V, since 0 * NaN would poison P V.
  // -------------------------------------------------------------------------
  template <int kRows, int kStride>
  static __device__ __forceinline__ void load_tile(Element (*smem)[kStride], const Element* gmem,
                                                   long long row_stride, int valid_rows) {
    constexpr int kChunksPerRow = Traits::kChunksPerRow;
    if constexpr (kThreads % kChunksPerRow == 0) {
      // Each pass covers kRowsPerPass whole rows; a thread keeps its column
      // and walks down by a fixed row step. The source pointer advances by
      // addition so the compiler keeps one 64-bit pointer, not one per chunk.
      constexpr int kRowsPerPass = kThreads / kChunksPerRow;
      constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
      const int row = threadIdx.x / kChunksPerRow;
      const int col = (threadIdx.x % kChunksPerRow) * Traits::kChunkElems;
      const unsigned dst = ptx::smem_u32(&smem[row][col]);
      const Element* src = gmem + row * row_stride + col;
      const long long step = kRowsPerPass * row_stride;
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int r = row + i * kRowsPerPass;
        if (kRows % kRowsPerPass != 0 && r >= kRows) break;
        const bool valid = kIsEven || r < valid_rows;
        ptx::cp_async_16(dst + i * kRowsPerPass * kStride * int(sizeof(Element)), valid ? src : gmem,
                         valid);
        src += step;
      }
    } else {
      // D = 96: rows of 12 (16-bit) or 24 (f32) chunks do not tile the CTA;
      // index each chunk on its own.
      constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
      for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
        const int c = threadIdx.x + i * kThreads;
        if (kChunks % kThreads != 0 && c >= kChunks) break;
        const int r = c / kChunksPerRow;
        const int col = (c % kChunksPerRow) * Traits::kChunkElems;
        const bool valid = kIsEven || r < valid_rows;
        ptx::cp_async_16(ptx::smem_u32(&smem[r][col]), valid ? gmem + r * row_stride + col : gmem,
                         valid);
      }
    }
  }

  // -------------------------------------------------------------------------
  // TF32 operands: round (kTF32) or split into big + small (k3xTF32).
  // -------------------------------------------------------------------------
  template <int N>
  struct Tf32Frag {
    unsigned big[N];
    unsigned small[N];  // only used by k3xTF32; dead code otherwise
  };

  /// kTF32 rounds Q, K and V once per CTA in shared memory (round_tile_tf32),
  /// so operands read from there (kPreRounded) pass through unchanged; P is
  /// rounded in registers. k3xTF32 keeps f32 in shared memory and splits here.
  template <bool kPreRounded, int N>
  static __device__ __forceinline__ Tf32Frag<N> to_tf32(const float (&x)[N]) {
    Tf32Frag<N> f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if constexpr (kMath == MathMode::k3xTF32) {
        ptx::split_tf32_fast(x[i], f.big[i], f.small[i]);
      } else if constexpr (kPreRounded) {
        f.big[i] = ptx::f32_as_u32(x[i]);
      } else {
        f.big[i] = ptx::f32_to_tf32_finite(x[i]);  // P is finite, in [0, 1]
      }
    }
    return f;
  }

  /// kTF32 only: rounds (cvt.rna) the 16-byte chunks of a [kRows][D] tile that
  /// this thread copied with load_tile. Its own cp.async data is visible to
  /// it after wait_group; the caller's barrier then publishes the result. One
  /// conversion per element per CTA instead of one per element per warp.
  template <int kRows, int kStride>
  static __device__ __forceinline__ void round_tile_tf32(Element (*smem)[kStride]) {
    constexpr int kChunksPerRow = Traits::kChunksPerRow;
    constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
    for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
      const int c = threadIdx.x + i * kThreads;
      if (kChunks % kThreads != 0 && c >= kChunks) break;
      const unsigned addr = ptx::smem_u32(
          &smem[c / kChunksPerRow][(c % kChunksPerRow) * Traits::kChunkElems]);
      unsigned v[4];
      ptx::lds128(v, addr);
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = ptx::f32_to_tf32(ptx::u32_as_f32(v[e]));
      ptx::sts128(addr, v);
    }
  }

  /// d += a * b in TF32; for k3xTF32 the two cross terms go first, so the
  /// small corrections are added while the accumulator is still small.
  static __device__ __forceinline__ void mma_tf32(float (&d)[4], const Tf32Frag<4>& a,
                                                  const Tf32Frag<2>& b) {
    if constexpr (kMath == MathMode::k3xTF32) {
      ptx::mma_m16n8k8_tf32(d, a.small, b.big);
      ptx::mma_m16n8k8_tf32(d, a.big, b.small);
    }
    ptx::mma_m16n8k8_tf32(d, a.big, b.big);
  }

  // -------------------------------------------------------------------------
  // S = Q K^T for this warp's rows: [kWarpRows x kBlockN], f32.
  // -------------------------------------------------------------------------
  static __device__ __forceinline__ void gemm_qk(AccS& acc_s, const SharedStorage& smem, int stage,
                                                 int key0, int warp, int lane) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int j = 0; j < kNTilesS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[mt][j][e] = 0.f;

    const int warp_row = warp * Traits::kWarpRows;
    if constexpr (kIs16Bit) {
      // ldmatrix.x4 lane addresses. A (Q, row-major): lanes 0-15 give rows
      // 0-15 at column 0, lanes 16-31 rows 0-15 at column 8 -> a[0..3].
      // B (K rows = S columns): matrices (n-tile j, k 0-7), (j, k 8-15),
      // (j + 1, k 0-7), (j + 1, k 8-15) -> b0, b1 of two n-tiles.
      const unsigned q_base = ptx::smem_u32(&smem.q[warp_row + (lane % 16)][(lane / 16) * 8]);
      const unsigned k_base =
          ptx::smem_u32(&smem.k[stage][key0 + (lane / 16) * 8 + (lane % 8)][((lane / 8) % 2) * 8]);
#pragma unroll
      for (int kk = 0; kk < Traits::kKStepsQK; ++kk) {
        unsigned a[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ptx::ldmatrix_x4(a[mt], q_base + (mt * 16 * kStrideQK + kk * 16) * kElemBytes);
        }
#pragma unroll
        for (int j = 0; j < kNTilesS; j += 2) {
          unsigned b[4];
          ptx::ldmatrix_x4(b, k_base + (j * 8 * kStrideQK + kk * 16) * kElemBytes);
          const unsigned b0[2] = {b[0], b[1]};
          const unsigned b1[2] = {b[2], b[3]};
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            ptx::mma_m16n8k16<Element>(acc_s[mt][j], a[mt], b0);
            ptx::mma_m16n8k16<Element>(acc_s[mt][j + 1], a[mt], b1);
          }
        }
      }
    } else {
      // TF32 with the k index permuted inside each k-step (the sum over D does
      // not care): logical k = t <-> d = 2t, logical k = t + 4 <-> d = 2t + 1.
      // Then a lane's A pair (g, 2t), (g, 2t + 1) and B pair K(g, 2t), K(g, 2t + 1)
      // are each one 8-byte load.
      const int g = lane / 4;
      const int t = lane % 4;
      const unsigned q_base = ptx::smem_u32(&smem.q[warp_row + g][2 * t]);
      const unsigned k_base = ptx::smem_u32(&smem.k[stage][key0 + g][2 * t]);
      constexpr int kRowBytes = Traits::kStrideQKBytes;
      // D = 256 in f32: a fully unrolled k loop lets ptxas hoist loads of
      // later k-steps and spill; unrolling by 8 bounds the look-ahead.
#pragma unroll(Traits::kKStepsQK > 16 ? 8 : Traits::kKStepsQK)
      for (int kk = 0; kk < Traits::kKStepsQK; ++kk) {
        Tf32Frag<4> a[kMTiles];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          unsigned r[4];
          const unsigned addr = q_base + mt * 16 * kRowBytes + kk * 8 * kElemBytes;
          ptx::lds64(r[0], r[2], addr);                  // A(g, t), A(g, t + 4)
          ptx::lds64(r[1], r[3], addr + 8 * kRowBytes);  // A(g + 8, t), A(g + 8, t + 4)
          const float x[4] = {ptx::u32_as_f32(r[0]), ptx::u32_as_f32(r[1]), ptx::u32_as_f32(r[2]),
                              ptx::u32_as_f32(r[3])};
          a[mt] = to_tf32<true>(x);
        }
#pragma unroll
        for (int j = 0; j < kNTilesS; ++j) {
          unsigned r[2];
          ptx::lds64(r[0], r[1], k_base + j * 8 * kRowBytes + kk * 8 * kElemBytes);
          const float x[2] = {ptx::u32_as_f32(r[0]), ptx::u32_as_f32(r[1])};
          const Tf32Frag<2> b = to_tf32<true>(x);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) mma_tf32(acc_s[mt][j], a[mt], b);
        }
      }
    }
  }

  // -------------------------------------------------------------------------
  // O += P V, with P taken straight from the S accumulators.
  // -------------------------------------------------------------------------
  static __device__ __forceinline__ void gemm_pv(AccO& acc_o, const AccS& p, const SharedStorage& smem,
                                                 int stage, int key0, int lane) {
    if constexpr (kIs16Bit) {
      // The m16n8 accumulators of n-tiles 2kk and 2kk + 1 are exactly the
      // m16k16 A fragment of k-step kk once packed to 16 bits.
      // V B-fragments via ldmatrix.trans: matrices (keys 0-7, d-tile dj),
      // (keys 8-15, dj), (keys 0-7, dj + 1), (keys 8-15, dj + 1).
      const unsigned v_base =
          ptx::smem_u32(&smem.v[stage][key0 + ((lane / 8) % 2) * 8 + (lane % 8)][(lane / 16) * 8]);
#pragma unroll
      for (int kk = 0; kk < Traits::kKStepsPV; ++kk) {
        unsigned a[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          a[mt][0] = ptx::pack_16x2<Element>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
          a[mt][1] = ptx::pack_16x2<Element>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
          a[mt][2] = ptx::pack_16x2<Element>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
          a[mt][3] = ptx::pack_16x2<Element>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dj = 0; dj < kNTilesO; dj += 2) {
          unsigned b[4];
          ptx::ldmatrix_x4_trans(b, v_base + (kk * 16 * kStrideV + dj * 8) * kElemBytes);
          const unsigned b0[2] = {b[0], b[1]};
          const unsigned b1[2] = {b[2], b[3]};
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            ptx::mma_m16n8k16<Element>(acc_o[mt][dj], a[mt], b0);
            ptx::mma_m16n8k16<Element>(acc_o[mt][dj + 1], a[mt], b1);
          }
        }
      }
    } else {
      // TF32, keys permuted inside each k-step as in gemm_qk: logical k = t <->
      // key 2t, k = t + 4 <-> key 2t + 1. Then A = (c0, c2, c1, c3) of the S
      // accumulator (no shuffles), and B = V(2t, g), V(2t + 1, g), two 4-byte
      // loads (ldmatrix cannot transpose 32-bit elements).
      const int g = lane / 4;
      const int t = lane % 4;
      const unsigned v_base = ptx::smem_u32(&smem.v[stage][key0 + 2 * t][g]);
      constexpr int kRowBytes = Traits::kStrideVBytes;
      // k3xTF32: the tensor cores add into an f32 accumulator without round-
      // to-nearest, so a chain of Sk/8 * 3 products into O drifts (measured
      // 2e-5 relative at Sk = 3000). Each tile's P V goes into a zeroed
      // accumulator first (a chain of kSubN/8 * 3) and is added to O with a
      // correctly rounded FADD. Column groups of kPvGroup d-tiles bound the
      // extra registers; P is re-split once per group.
      constexpr bool kTileAcc = kMath == MathMode::k3xTF32;
      constexpr int kPvGroup = kTileAcc ? (kHeadDim >= 256 ? 1 : 4) : kNTilesO;
#pragma unroll
      for (int dg = 0; dg < kNTilesO; dg += kPvGroup) {
        float tile_acc[kMTiles][kPvGroup][4];
        if constexpr (kTileAcc) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int i = 0; i < kPvGroup; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) tile_acc[mt][i][e] = 0.f;
        }
#pragma unroll
        for (int kk = 0; kk < Traits::kKStepsPV; ++kk) {
          Tf32Frag<4> a[kMTiles];
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            const float x[4] = {p[mt][kk][0], p[mt][kk][2], p[mt][kk][1], p[mt][kk][3]};
            a[mt] = to_tf32<false>(x);
          }
#pragma unroll
          for (int i = 0; i < kPvGroup; ++i) {
            const int dj = dg + i;
            const unsigned addr = v_base + kk * 8 * kRowBytes + dj * 8 * kElemBytes;
            const float x[2] = {ptx::u32_as_f32(ptx::lds32(addr)),
                                ptx::u32_as_f32(ptx::lds32(addr + kRowBytes))};
            const Tf32Frag<2> b = to_tf32<true>(x);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              mma_tf32(kTileAcc ? tile_acc[mt][i] : acc_o[mt][dj], a[mt], b);
            }
          }
        }
        if constexpr (kTileAcc) {
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int i = 0; i < kPvGroup; ++i)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc_o[mt][dg + i][e] += tile_acc[mt][i][e];
        }
      }
    }
  }

  // -------------------------------------------------------------------------
  // Masking of one S tile: key j is visible to query i iff j < Sk_b and (causal)
  // j <= i + causal_offset. Only called on tiles that cross a boundary. The
  // bounds come relative to the lane's first element (row g, key 2t of the
  // tile), so each element compares a constant offset j*8 + e against them:
  //   diag_rel = (first invisible key of row g) - (key of element 0)
  //   end_rel  = Sk_b - (key of element 0)
  // -------------------------------------------------------------------------
  static __device__ __forceinline__ void apply_mask(AccS& acc_s, int diag_rel, int end_rel) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int limit = end_rel;
        if constexpr (kIsCausal) {
          const int diag = diag_rel + mt * 16 + half * 8;  // rows further down see more keys
          limit = kIsEven ? diag : fwd::imin(limit, diag);     // kIsEven: every key < Sk exists
        }
#pragma unroll
        for (int j = 0; j < kNTilesS; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (j * 8 + e >= limit) acc_s[mt][j][2 * half + e] = fwd::neg_inf();
          }
      }
  }

  // -------------------------------------------------------------------------
  // Online softmax: update the running max, rescale O and the running sum, and
  // turn S into P = exp2(S * scale_log2 - max * scale_log2) in place (one FMA
  // and one MUFU.EX2 per score). Rows that have seen only masked keys keep
  // max = -inf; they subtract 0 instead so that exp2 gives 0, not NaN.
  // -------------------------------------------------------------------------
  // Row statistics of one S tile. A row is (m-tile mt, half): rows g and g + 8.

  /// max(running, this tile's scores of the row), reduced over the quad.
  static __device__ __forceinline__ float tile_row_max(const AccS& acc_s, int mt, int half, float running) {
    float mx = running;
#pragma unroll
    for (int j = 0; j < kNTilesS; ++j) {
      mx = ptx::fmax(mx, ptx::fmax(acc_s[mt][j][2 * half], acc_s[mt][j][2 * half + 1]));
    }
    return ptx::quad_max(mx);
  }

  /// Moves the row to a new reference max: O and the running sum scale by
  /// exp2(old - new). Returns the new max in exp2 units.
  static __device__ __forceinline__ float move_row_max(AccO& acc_o, RowStat& row_max, RowStat& row_sum,
                                                      int mt, int half, float new_max, float scale_log2) {
    const float max_scaled = fwd::scaled_max(new_max, scale_log2);
    const float correction = ptx::exp2_approx(row_max[mt][half] * scale_log2 - max_scaled);
    row_max[mt][half] = new_max;
    row_sum[mt][half] *= correction;
#pragma unroll
    for (int dj = 0; dj < kNTilesO; ++dj) {
      acc_o[mt][dj][2 * half] *= correction;
      acc_o[mt][dj][2 * half + 1] *= correction;
    }
    return max_scaled;
  }

  /// S -> P = exp2(S * scale_log2 - max) in place, added to this lane's partial
  /// row sum (quad-reduced once at the end).
  static __device__ __forceinline__ void exponentiate_row(AccS& acc_s, RowStat& row_sum, int mt, int half,
                                                          float max_scaled, float scale_log2) {
    float sum = row_sum[mt][half];
#pragma unroll
    for (int j = 0; j < kNTilesS; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& s = acc_s[mt][j][2 * half + e];
        s = ptx::exp2_approx(s * scale_log2 - max_scaled);  // contracted to one FFMA
        sum += s;
      }
    row_sum[mt][half] = sum;
  }

  static __device__ __forceinline__ void softmax_rescale_eager(AccS& acc_s, AccO& acc_o, RowStat& row_max,
                                                               RowStat& row_sum, float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float mx = tile_row_max(acc_s, mt, half, row_max[mt][half]);
        const float max_scaled = move_row_max(acc_o, row_max, row_sum, mt, half, mx, scale_log2);
        exponentiate_row(acc_s, row_sum, mt, half, max_scaled, scale_log2);
      }
  }

  static __device__ __forceinline__ void softmax_rescale_lazy(AccS& acc_s, AccO& acc_o, RowStat& row_max,
                                                              RowStat& row_sum, float scale_log2) {
    // Lazy rescaling: the reference max of a row only moves when the new max
    // exceeds it by more than kRescaleLog2 (in log2 units), so P <= 2^8 and O
    // is rescaled rarely (one warp vote per tile instead of D/2 FMULs per row).
    constexpr float kRescaleLog2 = 8.f;
    float new_max[kMTiles][2];
    bool need = false;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        new_max[mt][half] = tile_row_max(acc_s, mt, half, row_max[mt][half]);
        need |= new_max[mt][half] * scale_log2 > row_max[mt][half] * scale_log2 + kRescaleLog2;
      }
    if (ptx::warp_any(need)) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          move_row_max(acc_o, row_max, row_sum, mt, half, new_max[mt][half], scale_log2);
        }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        exponentiate_row(acc_s, row_sum, mt, half, fwd::scaled_max(row_max[mt][half], scale_log2), scale_log2);
      }
  }

  /// Lazy rescaling pays off where the O rescale is large (D/2 FMULs per row
  /// per S step): H200, bf16, Sq=Sk=8192: D=128 338 vs 317 TFLOP/s (causal 318
  /// vs 296); D=64 318 vs 331 (the vote costs more than it saves).
  static __device__ __forceinline__ void softmax_rescale(AccS& acc_s, AccO& acc_o, RowStat& row_max,
                                                         RowStat& row_sum, float scale_log2) {
    if constexpr (kHeadDim >= 128) {
      softmax_rescale_lazy(acc_s, acc_o, row_max, row_sum, scale_log2);
    } else {
      softmax_rescale_eager(acc_s, acc_o, row_max, row_sum, scale_log2);
    }
  }

  // -------------------------------------------------------------------------
  // Epilogue: O / rowsum through this warp's own rows of the Q tile (no other
  // warp reads them), then 16-byte coalesced stores; lse from lane t == 0.
  // -------------------------------------------------------------------------
  static __device__ __forceinline__ void store_o(AccO& acc_o, const RowStat& row_max,
                                                 RowStat& row_sum, SharedStorage& smem,
                                                 const FwdParams& params, int b, int h, int m_block,
                                                 int warp, int lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    const int warp_row = warp * Traits::kWarpRows;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float sum = ptx::quad_sum(row_sum[mt][half]);
        // A row with no visible key has sum 0: O = 0 and lse = -inf, never NaN.
        const float inv = sum > 0.f ? ptx::rcp_approx(sum) : 0.f;
#pragma unroll
        for (int dj = 0; dj < kNTilesO; ++dj) {
          acc_o[mt][dj][2 * half] *= inv;
          acc_o[mt][dj][2 * half + 1] *= inv;
        }
        const int row = m_block * kBlockM + warp_row + mt * 16 + half * 8 + g;
        if (params.lse != nullptr && t == 0 && (kIsEven || row < params.seqlen_q)) {
          const float lse =
              sum > 0.f ? row_max[mt][half] * params.scale + ptx::log2_approx(sum) * kLn2 : fwd::neg_inf();
          params.lse[b * params.lse_batch_stride + h * params.lse_head_stride + row] = lse;
        }
      }

    // Registers -> this warp's rows of smem.q (bank-conflict-free: see FwdTraits pads).
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int dj = 0; dj < kNTilesO; ++dj) {
          Element* dst = &smem.q[warp_row + mt * 16 + half * 8 + g][dj * 8 + 2 * t];
          const float x0 = acc_o[mt][dj][2 * half];
          const float x1 = acc_o[mt][dj][2 * half + 1];
          if constexpr (kIs16Bit) {
            ptx::sts32(ptx::smem_u32(dst), ptx::pack_16x2<Element>(x0, x1));
          } else {
            ptx::sts64(ptx::smem_u32(dst), ptx::f32_as_u32(x0), ptx::f32_as_u32(x1));
          }
        }
    asm volatile("bar.warp.sync 0xffffffff;" ::: "memory");

    // This warp's rows -> global, one 16-byte chunk per lane per step.
    Element* o = static_cast<Element*>(params.o) + b * params.o_batch_stride +
                 h * params.o_head_stride;
    constexpr int kChunks = Traits::kWarpRows * Traits::kChunksPerRow;
#pragma unroll
    for (int c = lane; c < kChunks; c += 32) {
      const int r = c / Traits::kChunksPerRow;
      const int col = (c % Traits::kChunksPerRow) * Traits::kChunkElems;
      const int row = m_block * kBlockM + warp_row + r;
      if (kIsEven || row < params.seqlen_q) {
        unsigned v[4];
        ptx::lds128(v, ptx::smem_u32(&smem.q[warp_row + r][col]));
        ptx::stg128(o + row * params.o_row_stride + col, v);
      }
    }
  }

  // -------------------------------------------------------------------------
  // The kernel body.
  // -------------------------------------------------------------------------
  static __device__ void run(const FwdParams& params) {
    alignas(16) extern __shared__ unsigned char smem_raw[];
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const fwd::Block blk = fwd::locate_block<kBlockM, kBlockN, kIsCausal, kIsEven>(params);
    const int m_block = blk.m_block, h = blk.h, b = blk.b;
    const int seqlen_q = params.seqlen_q;
    const int seqlen_k = blk.seqlen_k;
    const int causal_offset = blk.causal_offset;
    const int n_tiles = blk.n_tiles;
    const int n_mask_begin = blk.n_mask_begin;

    const Element* q = static_cast<const Element*>(params.q) + b * params.q_batch_stride +
                       h * params.q_head_stride;
    const Element* k = static_cast<const Element*>(params.k) + b * params.k_batch_stride +
                       h * params.k_head_stride;
    const Element* v = static_cast<const Element*>(params.v) + b * params.v_batch_stride +
                       h * params.v_head_stride;

    // Prologue: Q and the first kStages - 1 K/V tiles, one cp.async group
    // per tile (Q rides in the first), so wait_group can count tiles.
    load_tile<kBlockM, kStrideQK>(smem.q, q + m_block * kBlockM * params.q_row_stride,
                                   params.q_row_stride, seqlen_q - m_block * kBlockM);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_tiles) load_kv(smem, s, s, k, v, params, seqlen_k);
      ptx::cp_async_commit();
    }

    AccO acc_o;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int dj = 0; dj < kNTilesO; ++dj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[mt][dj][e] = 0.f;
    RowStat row_max, row_sum;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        row_max[mt][half] = fwd::neg_inf();
        row_sum[mt][half] = 0.f;
      }

    const float scale_log2 = params.scale_log2;
    // Mask bounds relative to key 0 of the lane's fragment (see apply_mask).
    const int lane_key = 2 * (lane % 4);
    const int diag_rel0 =
        m_block * kBlockM + warp * Traits::kWarpRows + lane / 4 + causal_offset + 1 - lane_key;
    const int end_rel0 = seqlen_k - lane_key;

    for (int n = 0; n < n_tiles; ++n) {
      const int stage = n % kStages;
      if constexpr (kStages == 1) {
        load_kv(smem, 0, n, k, v, params, seqlen_k);
        ptx::cp_async_commit();
      }
      // Tile n has landed (at most kStages - 2 younger groups in flight) and
      // every warp is done with tile n - 1, whose stage the next load reuses.
      ptx::cp_async_wait<(kStages >= 2 ? kStages - 2 : 0)>();
      if constexpr (kMath == MathMode::kTF32) {
        if (n == 0) round_tile_tf32<kBlockM, kStrideQK>(smem.q);  // Q landed with tile 0
        round_tile_tf32<kBlockN, kStrideQK>(smem.k[stage]);
        round_tile_tf32<kBlockN, kStrideV>(smem.v[stage]);
      }
      __syncthreads();
      if constexpr (kStages >= 2) {
        const int next = n + kStages - 1;
        if (next < n_tiles) load_kv(smem, next % kStages, next, k, v, params, seqlen_k);
        ptx::cp_async_commit();
      }

#pragma unroll 1
      for (int sub = 0; sub < Traits::kSubTiles; ++sub) {
        const int key0 = sub * Traits::kSubN;
        AccS acc_s;
        gemm_qk(acc_s, smem, stage, key0, warp, lane);
        if (n >= n_mask_begin) {
          const int tile_key = n * kBlockN + key0;
          apply_mask(acc_s, diag_rel0 - tile_key, end_rel0 - tile_key);
        }
        softmax_rescale(acc_s, acc_o, row_max, row_sum, scale_log2);
        gemm_pv(acc_o, acc_s, smem, stage, key0, lane);
      }
      if constexpr (kStages == 1) __syncthreads();  // the single stage is reloaded next
    }

    // No cp.async may still target smem.q (e.g. n_tiles == 0 skipped every
    // wait; with kStages == 1 Q was never committed) when the epilogue reuses it.
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    __syncthreads();
    store_o(acc_o, row_max, row_sum, smem, params, b, h, m_block, warp, lane);
  }

  /// K and V tile `n_block` into ring stage `stage`.
  static __device__ __forceinline__ void load_kv(SharedStorage& smem, int stage, int n_block,
                                                 const Element* k, const Element* v,
                                                 const FwdParams& params, int seqlen_k) {
    const int row0 = n_block * kBlockN;
    load_tile<kBlockN, kStrideQK>(smem.k[stage], k + row0 * params.k_row_stride,
                                  params.k_row_stride, seqlen_k - row0);
    load_tile<kBlockN, kStrideV>(smem.v[stage], v + row0 * params.v_row_stride,
                                 params.v_row_stride, seqlen_k - row0);
  }
};

}  // namespace flashjit
