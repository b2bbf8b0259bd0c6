// FlashAttention-2 backward on mma.sync tensor cores (sm_80 and later).
//
// Four kernels per specialization, launched in this order by runtime/bwd_plan:
//   preprocess   Dsum[b,h,i] = sum_d dO[i,d] * O[i,d] (fp32); zeroes the fp32
//                dQ accumulator when dQ is accumulated with atomics.
//   main         one CTA per (K/V tile of kBlockN rows, head, batch). K_j, V_j
//                stay in shared memory, dK_j, dV_j in registers; the CTA walks
//                the Q tiles i (kBlockM rows) that see K_j and for each one
//                recomputes P = exp2(S * scale_log2 - LSE * log2(e)) and
//                  dV += P^T dO,  dP = dO V^T,  dS = P o (dP - Dsum),
//                  dK += dS^T Q,  dQaccum += dS K   (skipped when
//                kDeterministic). dQaccum is fp32 in the workspace; the CTAs of
//                all K/V tiles add into it: on sm_90 one bulk reduce-add
//                (cp.reduce.async.bulk) per Q tile from a shared staging tile,
//                before sm_90 per-thread RED.ADD.F32.
//   dq           kDeterministic only: one CTA per Q tile recomputes S, P, dP
//                over the K/V tiles and accumulates dQ in registers, so no
//                atomics are needed and results are bitwise reproducible. It
//                writes dQ (scaled, converted) directly.
//   postprocess  atomic mode only: dQ = scale * dQaccum, converted to Element.
//
// Layout trick (FA2 / FA3 "swapAB" for the backward): every warp of the main
// kernel owns 16 rows of K/V and computes the *transposed* scores
// S^T = K Q^T (rows = keys). The f32 accumulator of S^T then has exactly the
// register layout of an mma A operand, so dV += P^T dO and dK += dS^T Q take
// P^T and dS^T straight from registers, and dK, dV need no cross-warp
// reduction. Only dQ, which reduces over the keys of all warps, goes through
// shared memory (dS^T is stored once per Q tile).
//
// fp32 inputs use m16n8k8 TF32 products. A k-step of 8 fp32 values is 32
// bytes, like a k-step of 16 bf16 values, so the non-transposed ldmatrix
// addressing is shared by both widths. Transposed operands cannot use
// ldmatrix.trans for 32-bit data; they are read with scalar loads and use a
// permuted k order (logical k = t <-> column 2t, k = t + 4 <-> column 2t + 1).
// That permutation is the one the f32 accumulator layout already has, so an
// accumulator can be an A operand without shuffles; the sum over k does not
// depend on the order as long as A and B agree.
#pragma once

#include "flashjit/params.cuh"
#include "flashjit/ptx.cuh"

namespace flashjit {
namespace bwd {

/// log2(e): the kernels work in base 2 (MUFU.EX2), the forward's LSE is natural.
inline constexpr float kLog2e = 1.44269504088896340736f;
/// Lanes in a warp.
inline constexpr int kWarpSize = 32;
/// Rows of an mma tile (m16n8k*) and of the key block one warp owns.
inline constexpr int kMmaM = 16;
/// Columns of an mma tile (m16n8k*).
inline constexpr int kMmaN = 8;
/// Bytes one cp.async / vector access moves.
inline constexpr int kChunkBytes = 16;
/// Bytes of one mma k-step of either operand row: 16 x 16-bit or 8 x fp32.
inline constexpr int kKStepBytes = 32;
/// Padding at the end of every shared-memory row. A row stride of 16 (mod 128)
/// bytes puts the 8 row addresses of an ldmatrix on distinct bank groups, and a
/// stride of 4 (mod 32) words makes the transposed scalar fp32 loads (rows 2t,
/// 2t + 1, column g) hit 32 distinct banks.
inline constexpr int kRowPadBytes = 16;
/// dQaccum layout: row r keeps its 8-float (32-byte) chunks in the order
/// chunk ^ (r % 4). A half-warp's 64-bit stores (rows g = 0..3, columns 2t)
/// then hit distinct banks in the unpadded shared staging tile, which has
/// exactly this global layout so one bulk copy moves it. Postprocess undoes it.
inline constexpr int kDqChunkFloats = 8;
inline constexpr int kDqSwizzleRows = 4;
__device__ __forceinline__ int dq_swizzled_col(int row, int col) {
  return ((col / kDqChunkFloats) ^ (row % kDqSwizzleRows)) * kDqChunkFloats + col % kDqChunkFloats;
}

/// Whether the target has the bulk-copy engine (sm_90): dQ partial sums then
/// leave the CTA as one bulk f32 reduce-add per Q tile instead of per-thread
/// REDs (measured on H200, bf16 hd128: main kernel 12.0 -> 10.2 ms).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
inline constexpr bool kHasBulkCopy = true;
#else
inline constexpr bool kHasBulkCopy = false;
#endif

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int min_int(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int max_int(int a, int b) { return a > b ? a : b; }

// ---------------------------------------------------------------------------
// Shared-memory tiles
// ---------------------------------------------------------------------------

/// Row-major [kRows][kCols] tile of E in shared memory, each row padded by
/// kRowPadBytes (see there).
template <class E, int kRows, int kCols>
struct SmemTile {
  static constexpr int kRowBytes = kCols * int(sizeof(E)) + kRowPadBytes;
  static_assert(kCols * int(sizeof(E)) % kChunkBytes == 0, "rows must be whole 16-byte chunks");
  alignas(kChunkBytes) unsigned char bytes[kRows * kRowBytes];

  __device__ __forceinline__ unsigned addr() const { return ptx::smem_u32(bytes); }
};

/// 16-byte aligned bundle for vectorized global loads and stores.
struct alignas(16) Vec16 {
  unsigned w[4];
};

/// Copies rows [0, kRows) of a global [rows][kCols] matrix (row stride in
/// elements, last dim contiguous) into `tile` with cp.async. Rows >= rows_valid
/// are zero-filled (read nothing) when kGuard is set.
template <int kThreads, bool kGuard, class E, int kRows, int kCols>
__device__ __forceinline__ void load_tile_async(const SmemTile<E, kRows, kCols>& tile, const E* gmem,
                                                long long row_stride, int rows_valid) {
  constexpr int kChunksPerRow = kCols * int(sizeof(E)) / kChunkBytes;
  constexpr int kElemsPerChunk = kChunkBytes / int(sizeof(E));
  constexpr int kChunks = kRows * kChunksPerRow;
  using Tile = SmemTile<E, kRows, kCols>;
  if constexpr (kThreads % kChunksPerRow == 0) {
    // Each thread keeps one column and steps down by kRowStep rows: one
    // running pointer instead of a 64-bit offset per copy (registers are
    // the backward's scarcest resource).
    constexpr int kRowStep = kThreads / kChunksPerRow;
    const int col = int(threadIdx.x) % kChunksPerRow;
    const int row0 = int(threadIdx.x) / kChunksPerRow;
    const E* src = gmem + row0 * row_stride + col * kElemsPerChunk;
    unsigned dst = tile.addr() + row0 * Tile::kRowBytes + col * kChunkBytes;
#pragma unroll
    for (int i = 0; i < ceil_div(kRows, kRowStep); ++i) {
      const int row = row0 + i * kRowStep;
      if (kRows % kRowStep == 0 || row < kRows) {
        const bool valid = !kGuard || row < rows_valid;
        ptx::cp_async_16(dst, valid ? src : gmem, valid);
      }
      src += kRowStep * row_stride;
      dst += kRowStep * Tile::kRowBytes;
    }
  } else {
    const unsigned base = tile.addr();
#pragma unroll
    for (int i = 0; i < ceil_div(kChunks, kThreads); ++i) {
      const int c = i * kThreads + int(threadIdx.x);
      if (kChunks % kThreads == 0 || c < kChunks) {
        const int row = c / kChunksPerRow;
        const int col = c % kChunksPerRow;
        const bool valid = !kGuard || row < rows_valid;
        const E* src = valid ? gmem + row * row_stride + col * kElemsPerChunk : gmem;
        ptx::cp_async_16(base + row * Tile::kRowBytes + col * kChunkBytes, src, valid);
      }
    }
  }
}

/// Copies kRows floats (one per row, contiguous) into shared memory; rows >=
/// rows_valid read as 0.
template <int kThreads, int kRows>
__device__ __forceinline__ void load_vec_async(float (&dst)[kRows], const float* gmem, int rows_valid) {
  for (int r = int(threadIdx.x); r < kRows; r += kThreads) {
    const bool valid = r < rows_valid;
    ptx::cp_async_4(ptx::smem_u32(&dst[r]), valid ? gmem + r : gmem, valid);
  }
}

// ---------------------------------------------------------------------------
// Fragment loads from shared memory. `base` is the tile's shared address,
// `row_bytes` its row stride; rows/columns are element indices, k offsets
// are bytes (a k-step is kKStepBytes for every element width).
// ---------------------------------------------------------------------------

/// A operand, rows [r0, r0 + 16) x k-bytes [kb, kb + 32) of a row-major tile.
__device__ __forceinline__ void load_a(unsigned (&raw)[4], unsigned base, int row_bytes, int r0,
                                       int kb, int lane) {
  const int row = r0 + (lane % 8) + ((lane / 8) % 2) * 8;
  const int col = kb + (lane / 16) * kChunkBytes;
  ptx::ldmatrix_x4(raw, base + row * row_bytes + col);
}

/// Two B operands (n-tiles [n0, n0 + 8) -> raw[0..1], [n0 + 8, n0 + 16) ->
/// raw[2..3]) of a tile stored [n][k] (k contiguous), k-bytes [kb, kb + 32).
__device__ __forceinline__ void load_b_pair(unsigned (&raw)[4], unsigned base, int row_bytes, int n0,
                                            int kb, int lane) {
  const int row = n0 + (lane % 8) + (lane / 16) * 8;
  const int col = kb + ((lane / 8) % 2) * kChunkBytes;
  ptx::ldmatrix_x4(raw, base + row * row_bytes + col);
}

/// Two B operands (n-tiles [n0, n0 + 8), [n0 + 8, n0 + 16)) of a tile stored
/// [k][n] (n contiguous), k-rows [k0, k0 + kK). fp32 uses the permuted k order.
template <class E>
__device__ __forceinline__ void load_b_pair_trans(unsigned (&raw)[4], unsigned base, int row_bytes,
                                                  int k0, int n0, int lane) {
  if constexpr (sizeof(E) == 2) {
    const int m = lane / 8;
    const int row = k0 + (lane % 8) + (m % 2) * 8;
    const int col = n0 + (m / 2) * 8;
    ptx::ldmatrix_x4_trans(raw, base + row * row_bytes + col * 2);
  } else {
    const int g = lane / 4, t = lane % 4;
    const unsigned a = base + (k0 + 2 * t) * row_bytes + (n0 + g) * 4;
    raw[0] = ptx::lds32(a);
    raw[1] = ptx::lds32(a + row_bytes);
    raw[2] = ptx::lds32(a + 8 * 4);
    raw[3] = ptx::lds32(a + row_bytes + 8 * 4);
  }
}

/// A operand, rows [m0, m0 + 16) x k [k0, k0 + kK), of a tile stored
/// transposed as [k][m] (m contiguous). fp32 uses the permuted k order.
template <class E>
__device__ __forceinline__ void load_a_trans(unsigned (&raw)[4], unsigned base, int row_bytes, int k0,
                                             int m0, int lane) {
  if constexpr (sizeof(E) == 2) {
    const int m = lane / 8;
    const int row = k0 + (lane % 8) + (m / 2) * 8;
    const int col = m0 + (m % 2) * 8;
    ptx::ldmatrix_x4_trans(raw, base + row * row_bytes + col * 2);
  } else {
    const int g = lane / 4, t = lane % 4;
    const unsigned a = base + (k0 + 2 * t) * row_bytes + (m0 + g) * 4;
    raw[0] = ptx::lds32(a);
    raw[1] = ptx::lds32(a + 8 * 4);
    raw[2] = ptx::lds32(a + row_bytes);
    raw[3] = ptx::lds32(a + row_bytes + 8 * 4);
  }
}

// ---------------------------------------------------------------------------
// Math traits: one tensor-core step per (element type, math mode)
// ---------------------------------------------------------------------------

/// 16-bit inputs: m16n8k16 with f32 accumulation.
template <class E, MathMode kMath>
struct MmaTraits {
  static_assert(kMath == MathMode::kNative, "16-bit inputs use MathMode::kNative");
  static constexpr int kK = 16;
  static constexpr bool kShortChains = false;
  struct FragA { unsigned r[4]; };
  struct FragB { unsigned r[2]; };

  static __device__ __forceinline__ FragA make_a(const unsigned (&raw)[4]) {
    return {{raw[0], raw[1], raw[2], raw[3]}};
  }
  static __device__ __forceinline__ FragB make_b(unsigned r0, unsigned r1) { return {{r0, r1}}; }
  /// A operand for k-step kk from an f32 accumulator [.][4] whose columns are the k index.
  template <int kTiles>
  static __device__ __forceinline__ FragA a_from_acc(const float (&c)[kTiles][4], int kk) {
    const float(&lo)[4] = c[2 * kk];
    const float(&hi)[4] = c[2 * kk + 1];
    return {{ptx::pack_16x2<E>(lo[0], lo[1]), ptx::pack_16x2<E>(lo[2], lo[3]),
             ptx::pack_16x2<E>(hi[0], hi[1]), ptx::pack_16x2<E>(hi[2], hi[3])}};
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const FragA& a, const FragB& b) {
    ptx::mma_m16n8k16<E>(c, a.r, b.r);
  }

  /// P^T between the dV product and dS, packed to 16 bits: half the registers
  /// of f32 at the register peak (dK, dV, P and dP live); dS = P (dP - Dsum)
  /// then sees P rounded to E, the precision the dV product uses anyway.
  template <int kTiles>
  struct Kept { unsigned r[kTiles][2]; };
  template <int kTiles>
  static __device__ __forceinline__ void keep(Kept<kTiles>& k, int j, int half, float x0, float x1) {
    k.r[j][half] = ptx::pack_16x2<E>(x0, x1);
  }
  template <int kTiles>
  static __device__ __forceinline__ float kept(const Kept<kTiles>& k, int j, int i) {
    const unsigned w = k.r[j][i / 2];
    E e;
    e.bits = static_cast<unsigned short>(i % 2 ? w >> 16 : w & 0xffffu);
    return ptx::to_f32(e);
  }
  template <int kTiles>
  static __device__ __forceinline__ FragA a_from_kept(const Kept<kTiles>& k, int kk) {
    return {{k.r[2 * kk][0], k.r[2 * kk][1], k.r[2 * kk + 1][0], k.r[2 * kk + 1][1]}};
  }
  /// Stores the kept pair (row half of tile j) to shared memory.
  template <int kTiles>
  static __device__ __forceinline__ void store_kept(unsigned addr, const Kept<kTiles>& k, int j, int half) {
    ptx::sts32(addr, k.r[j][half]);
  }
};

/// fp32 paths keep P^T in f32 (3xTF32 needs every bit; TF32 rounds at the product).
template <class Mma>
struct KeepF32 {
  template <int kTiles>
  struct Kept { float r[kTiles][4]; };
  template <int kTiles>
  static __device__ __forceinline__ void keep(Kept<kTiles>& k, int j, int half, float x0, float x1) {
    k.r[j][2 * half] = x0;
    k.r[j][2 * half + 1] = x1;
  }
  template <int kTiles>
  static __device__ __forceinline__ float kept(const Kept<kTiles>& k, int j, int i) {
    return k.r[j][i];
  }
  template <int kTiles>
  static __device__ __forceinline__ auto a_from_kept(const Kept<kTiles>& k, int kk) {
    return Mma::a_from_acc(k.r, kk);
  }
  template <int kTiles>
  static __device__ __forceinline__ void store_kept(unsigned addr, const Kept<kTiles>& k, int j, int half) {
    ptx::sts64(addr, ptx::f32_as_u32(k.r[j][2 * half]), ptx::f32_as_u32(k.r[j][2 * half + 1]));
  }
};

/// fp32 inputs rounded to TF32: m16n8k8.
template <>
struct MmaTraits<float, MathMode::kTF32> : KeepF32<MmaTraits<float, MathMode::kTF32>> {
  static constexpr int kK = 8;
  static constexpr bool kShortChains = false;
  struct FragA { unsigned r[4]; };
  struct FragB { unsigned r[2]; };

  static __device__ __forceinline__ unsigned tf32(unsigned bits) {
    return ptx::f32_to_tf32(ptx::u32_as_f32(bits));
  }
  static __device__ __forceinline__ FragA make_a(const unsigned (&raw)[4]) {
    return {{tf32(raw[0]), tf32(raw[1]), tf32(raw[2]), tf32(raw[3])}};
  }
  static __device__ __forceinline__ FragB make_b(unsigned r0, unsigned r1) {
    return {{tf32(r0), tf32(r1)}};
  }
  /// Permuted k order: column 2t is logical k = t, column 2t + 1 is k = t + 4.
  template <int kTiles>
  static __device__ __forceinline__ FragA a_from_acc(const float (&c)[kTiles][4], int kk) {
    const float(&x)[4] = c[kk];
    return {{ptx::f32_to_tf32(x[0]), ptx::f32_to_tf32(x[2]), ptx::f32_to_tf32(x[1]),
             ptx::f32_to_tf32(x[3])}};
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const FragA& a, const FragB& b) {
    ptx::mma_m16n8k8_tf32(c, a.r, b.r);
  }
};

/// fp32 inputs, error-compensated 3xTF32: x = big + small, and
/// a*b ~= big_a*big_b + big_a*small_b + small_a*big_b (small*small dropped,
/// below f32 rounding). The small products go first so they are not absorbed.
template <>
struct MmaTraits<float, MathMode::k3xTF32> : KeepF32<MmaTraits<float, MathMode::k3xTF32>> {
  static constexpr int kK = 8;
  /// The tensor cores do not round their f32 accumulation to nearest: a
  /// chain of ~200 mma into one accumulator (dK, dV over 1500 queries) drifts
  /// by ~1e-5 relative. Register-resident sums over a whole loop therefore
  /// take each step's product in a fresh accumulator and add it with FADD.
  static constexpr bool kShortChains = true;
  struct FragA { unsigned big[4], small[4]; };
  struct FragB { unsigned big[2], small[2]; };

  static __device__ __forceinline__ FragA make_a(const unsigned (&raw)[4]) {
    FragA a;
#pragma unroll
    for (int i = 0; i < 4; ++i) ptx::split_tf32(ptx::u32_as_f32(raw[i]), a.big[i], a.small[i]);
    return a;
  }
  static __device__ __forceinline__ FragB make_b(unsigned r0, unsigned r1) {
    FragB b;
    ptx::split_tf32(ptx::u32_as_f32(r0), b.big[0], b.small[0]);
    ptx::split_tf32(ptx::u32_as_f32(r1), b.big[1], b.small[1]);
    return b;
  }
  template <int kTiles>
  static __device__ __forceinline__ FragA a_from_acc(const float (&c)[kTiles][4], int kk) {
    const float(&x)[4] = c[kk];
    const unsigned raw[4] = {ptx::f32_as_u32(x[0]), ptx::f32_as_u32(x[2]), ptx::f32_as_u32(x[1]),
                             ptx::f32_as_u32(x[3])};
    return make_a(raw);
  }
  static __device__ __forceinline__ void mma(float (&c)[4], const FragA& a, const FragB& b) {
    ptx::mma_m16n8k8_tf32(c, a.big, b.small);
    ptx::mma_m16n8k8_tf32(c, a.small, b.big);
    ptx::mma_m16n8k8_tf32(c, a.big, b.big);
  }
};

// ---------------------------------------------------------------------------
// Warp-level products. Every warp computes a 16-row slab; acc[j] is the mma
// tile of output columns [8j, 8j + 8).
// ---------------------------------------------------------------------------

template <int kTiles>
__device__ __forceinline__ void zero(float (&acc)[kTiles][4]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.f;
  }
}

/// acc[16 x 8*kTilesN] += A[16 x K] * B[8*kTilesN x K]^T; A and B are row-major
/// smem tiles with K contiguous (A rows from a_r0, B rows from b_r0).
template <class Mma, int kTilesN, int kKBytes>
__device__ __forceinline__ void gemm_nt(float (&acc)[kTilesN][4], unsigned a_base, int a_row_bytes,
                                        int a_r0, unsigned b_base, int b_row_bytes, int b_r0,
                                        int lane) {
  static_assert(kTilesN % 2 == 0, "B tiles are loaded in pairs");
#pragma unroll
  for (int kb = 0; kb < kKBytes; kb += kKStepBytes) {
    unsigned raw_a[4];
    load_a(raw_a, a_base, a_row_bytes, a_r0, kb, lane);
    const typename Mma::FragA a = Mma::make_a(raw_a);
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      unsigned raw_b[4];
      load_b_pair(raw_b, b_base, b_row_bytes, b_r0 + j * kMmaN, kb, lane);
      Mma::mma(acc[j], a, Mma::make_b(raw_b[0], raw_b[1]));
      Mma::mma(acc[j + 1], a, Mma::make_b(raw_b[2], raw_b[3]));
    }
  }
}

/// acc[16 x 8*kTilesN] += A[16 x 8*kTilesK] * B[8*kTilesK x 8*kTilesN], A in
/// registers (a_frag(kk) gives the A operand of k-step kk), B a smem tile
/// stored [k][n] (n contiguous) whose columns start at b_c0.
template <class E, class Mma, int kTilesN, int kTilesK, class AFrag>
__device__ __forceinline__ void gemm_rt(float (&acc)[kTilesN][4], const AFrag& a_frag,
                                        unsigned b_base, int b_row_bytes, int b_c0, int lane) {
  constexpr int kKSteps = kTilesK * kMmaN / Mma::kK;
  if constexpr (Mma::kShortChains) {
    // Column pairs outer: the A operand is rebuilt per pair, the product of
    // this call lands in `part` and is added to acc with round-to-nearest.
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      float part[2][4];
      zero(part);
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        unsigned raw_b[4];
        load_b_pair_trans<E>(raw_b, b_base, b_row_bytes, kk * Mma::kK, b_c0 + j * kMmaN, lane);
        const typename Mma::FragA fa = a_frag(kk);
        Mma::mma(part[0], fa, Mma::make_b(raw_b[0], raw_b[1]));
        Mma::mma(part[1], fa, Mma::make_b(raw_b[2], raw_b[3]));
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[j][i] += part[0][i];
        acc[j + 1][i] += part[1][i];
      }
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const typename Mma::FragA fa = a_frag(kk);
#pragma unroll
      for (int j = 0; j < kTilesN; j += 2) {
        unsigned raw_b[4];
        load_b_pair_trans<E>(raw_b, b_base, b_row_bytes, kk * Mma::kK, b_c0 + j * kMmaN, lane);
        Mma::mma(acc[j], fa, Mma::make_b(raw_b[0], raw_b[1]));
        Mma::mma(acc[j + 1], fa, Mma::make_b(raw_b[2], raw_b[3]));
      }
    }
  }
}

/// acc[16 x 8*kTilesN] += A[16 x kK] * B[kK x 8*kTilesN] with A stored
/// transposed [k][m] (rows of A from a_m0) and B stored [k][n] (from b_c0).
template <class E, class Mma, int kTilesN, int kKRows>
__device__ __forceinline__ void gemm_tt(float (&acc)[kTilesN][4], unsigned a_base, int a_row_bytes,
                                        int a_m0, unsigned b_base, int b_row_bytes, int b_c0,
                                        int lane) {
#pragma unroll
  for (int k0 = 0; k0 < kKRows; k0 += Mma::kK) {
    unsigned raw_a[4];
    load_a_trans<E>(raw_a, a_base, a_row_bytes, k0, a_m0, lane);
    const typename Mma::FragA fa = Mma::make_a(raw_a);
#pragma unroll
    for (int j = 0; j < kTilesN; j += 2) {
      unsigned raw_b[4];
      load_b_pair_trans<E>(raw_b, b_base, b_row_bytes, k0, b_c0 + j * kMmaN, lane);
      Mma::mma(acc[j], fa, Mma::make_b(raw_b[0], raw_b[1]));
      Mma::mma(acc[j + 1], fa, Mma::make_b(raw_b[2], raw_b[3]));
    }
  }
}

// ---------------------------------------------------------------------------
// Element conversion and global stores
// ---------------------------------------------------------------------------

/// Stores the pair (x0, x1) at gmem[0..1] as E (4 or 8 bytes, aligned).
template <class E>
__device__ __forceinline__ void store_pair(E* gmem, float x0, float x1) {
  if constexpr (sizeof(E) == 2) {
    *reinterpret_cast<unsigned*>(gmem) = ptx::pack_16x2<E>(x0, x1);
  } else {
    struct alignas(8) F2 { float x, y; };
    *reinterpret_cast<F2*>(gmem) = F2{x0, x1};
  }
}

/// The 16 bytes v as kChunkBytes / sizeof(E) floats.
template <class E>
__device__ __forceinline__ float chunk_elem(const Vec16& v, int i) {
  if constexpr (sizeof(E) == 2) {
    const unsigned w = v.w[i / 2];
    E e;
    e.bits = static_cast<unsigned short>(i % 2 ? w >> 16 : w & 0xffffu);
    return ptx::to_f32(e);
  } else {
    return ptx::u32_as_f32(v.w[i]);
  }
}

}  // namespace bwd

/// The backward kernels of one specialization (see the file comment). Tile
/// meaning: kBlockN = K/V rows per main CTA (16 per warp row), kBlockM = Q rows
/// per step of the main loop and Q rows per CTA of the dq kernel.
template <class E, MathMode kMath, int kHeadDim, int kBlockM, int kBlockN, int kNumWarps,
          int kStages, bool kIsCausal, bool kIsEven, bool kDeterministic, int kSmemBytes,
          int kDqSmemBytes>
struct BwdKernel {
  using Mma = bwd::MmaTraits<E, kMath>;

  static constexpr int kThreads = kNumWarps * bwd::kWarpSize;
  /// dK, dV live in registers (up to ~200 per thread): one CTA per SM.
  static constexpr int kMinBlocksPerSM = 1;
  static constexpr int kPreprocessThreads = 256;
  static constexpr int kPostprocessThreads = 256;
  /// Pre/postprocess: 8 threads share a row (16-byte accesses along D).
  static constexpr int kRowThreads = 8;
  static constexpr int kRowsPerPrepBlock = kPreprocessThreads / kRowThreads;

  // Main kernel warp layout: kWarpsN warps along the keys (16 rows each) times
  // kWarpsD warps splitting the columns of dK and dV (hd256 would otherwise
  // need 256 accumulator registers per thread); S and dP are recomputed by
  // each of the kWarpsD warps of a key slab.
  static constexpr int kWarpsN = kBlockN / bwd::kMmaM;
  static constexpr int kWarpsD = kNumWarps / kWarpsN;
  static constexpr int kColsPerWarp = kHeadDim / kWarpsD;
  // dQ product of the main kernel: [kBlockM x kHeadDim] over all warps.
  static constexpr int kDqWarpsM = bwd::min_int(kNumWarps, kBlockM / bwd::kMmaM);
  static constexpr int kDqWarpsD = kNumWarps / kDqWarpsM;
  static constexpr int kDqRowGroups = kBlockM / bwd::kMmaM / kDqWarpsM;
  static constexpr int kDqColsPerWarp = kHeadDim / kDqWarpsD;
  /// Queries per register step of the main loop (see slab_step): 32 keeps
  /// dK, dV (2 x D/2 registers), P^T and dP^T under 255 registers for D >= 96
  /// and for 3xTF32; small head dims take the whole Q tile at once.
  static constexpr int kSubM =
      bwd::min_int(kBlockM, kHeadDim <= 64 && kMath != MathMode::k3xTF32 ? 64 : 32);
  // Columns per pass of a warp's dQ product: at most 64 (32 accumulator
  // registers on top of dK and dV; 96 columns go as 2 x 48); dS is re-read
  // per pass.
  static constexpr int kDqColsPerPass =
      kDqColsPerWarp <= 64 ? kDqColsPerWarp : (kDqColsPerWarp % 64 == 0 ? 64 : kDqColsPerWarp / 2);
  // Deterministic dq kernel: one warp per 16 Q rows, K/V streamed in steps of
  // kDqBlockN rows so S, dP and dQ stay in registers: 64 for 16-bit inputs up
  // to hd128, 32 for fp32 (wider fragments) or hd256.
  // For hd256 two warps share a Q slab and split dQ's columns (16 x 256 f32
  // would be 128 registers), each recomputing the slab's S and dP.
  static constexpr int kDqSplitD = kHeadDim > 128 ? 2 : 1;
  static constexpr int kDqThreads = kBlockM / bwd::kMmaM * kDqSplitD * bwd::kWarpSize;
  static constexpr int kDqBlockN =
      bwd::min_int(kBlockN, sizeof(E) == 2 && kHeadDim <= 128 ? 64 : 32);

  static_assert(kBlockN % bwd::kMmaM == 0 && kNumWarps % kWarpsN == 0,
                "kNumWarps must be a multiple of kBlockN / 16");
  static_assert(kColsPerWarp % 16 == 0 && kDqColsPerPass % 16 == 0 &&
                    kDqColsPerWarp % kDqColsPerPass == 0,
                "each warp's dK/dV/dQ columns must be whole pairs of mma tiles");
  static_assert(kBlockM % bwd::kMmaM == 0 && kBlockM % Mma::kK == 0, "kBlockM: whole mma tiles");
  static_assert(kStages == 1 || kStages == 2, "one or two Q/dO stages");
  static_assert(kMath == MathMode::kNative || kIsSame<E, float>, "TF32 math needs fp32 inputs");

  using KvTile = bwd::SmemTile<E, kBlockN, kHeadDim>;
  using QTile = bwd::SmemTile<E, kBlockM, kHeadDim>;
  /// dS^T of one Q tile, [keys][queries], read back by the dQ product.
  using DsTile = bwd::SmemTile<E, kBlockN, kBlockM>;
  using DqKvTile = bwd::SmemTile<E, kDqBlockN, kHeadDim>;

  struct MainStorage {
    KvTile k, v;
    QTile q[kStages], dout[kStages];
    // Natural-log LSE and Dsum of the Q tile's rows. Rows past Sq read as 0;
    // their Q and dO rows are zero-filled too, so their P = exp2(0) = 1 meets
    // dO = 0 and dP - Dsum = 0 and contributes nothing.
    float lse[kStages][kBlockM];
    float dsum[kStages][kBlockM];
  };
  /// dQ partial sums of one Q tile, f32 [kBlockM][kHeadDim] in the dQaccum
  /// layout (bwd::dq_swizzled_col), staged for the bulk reduce-add.
  struct DqAccTile {
    static constexpr int kRowBytes = kHeadDim * int(sizeof(float));
    alignas(bwd::kChunkBytes) unsigned char bytes[kBlockM * kRowBytes];
    __device__ __forceinline__ unsigned addr() const { return ptx::smem_u32(bytes); }
  };
  static constexpr bool kBulkDq = !kDeterministic && bwd::kHasBulkCopy;
  /// MainStorage, then the dS^T tile when dQ is accumulated here, then (sm_90)
  /// the dQ staging tile.
  static constexpr int kMainSmemBytes = int(sizeof(MainStorage)) +
                                        (kDeterministic ? 0 : int(sizeof(DsTile))) +
                                        (kBulkDq ? int(sizeof(DqAccTile)) : 0);
  static_assert(kMainSmemBytes == kSmemBytes,
                "host bwd_smem_bytes() disagrees with the main kernel's shared storage");

  struct DqStorage {
    QTile q, dout;
    DqKvTile k[kStages], v[kStages];
  };
  static_assert(int(sizeof(DqStorage)) == kDqSmemBytes,
                "host bwd_dq_smem_bytes() disagrees with the dq kernel's shared storage");

  /// Per-(batch, head) view of the problem.
  struct Problem {
    int b, h;
    int seqlen_q;
    int seqlen_k;    // rows in memory
    int keys;        // valid keys of this batch entry (seqlens_k[b] or seqlen_k)
    int diag;        // causal: query i sees key j iff j <= i + diag
    long long bh;    // (b * heads + h): row block of the workspace

    __device__ __forceinline__ Problem(const BwdParams& p, int b_, int h_) : b(b_), h(h_) {
      seqlen_q = p.seqlen_q;
      seqlen_k = p.seqlen_k;
      keys = p.seqlens_k ? p.seqlens_k[b] : p.seqlen_k;
      diag = keys - seqlen_q;
      bh = static_cast<long long>(b) * p.heads + h;
    }
    /// Whether (query, key) contributes.
    __device__ __forceinline__ bool visible(int query, int key) const {
      return key < keys && (!kIsCausal || key <= query + diag);
    }
    /// Whether any pair in the block [q0, q0 + nq) x [k0, k0 + nk) is masked.
    __device__ __forceinline__ bool needs_mask(int q0, int k0, int nk) const {
      return k0 + nk > keys || (kIsCausal && k0 + nk - 1 > q0 + diag);
    }
  };

  template <class T>
  static __device__ __forceinline__ const T* at(const void* base, long long bs, long long hs,
                                                 const Problem& pr) {
    return static_cast<const T*>(base) + pr.b * bs + pr.h * hs;
  }
  template <class T>
  static __device__ __forceinline__ T* at(void* base, long long bs, long long hs, const Problem& pr) {
    return static_cast<T*>(base) + pr.b * bs + pr.h * hs;
  }

  // -------------------------------------------------------------------------
  // preprocess: Dsum = rowsum(dO o O); zero dQaccum (atomic mode)
  // -------------------------------------------------------------------------
  static __device__ void preprocess(const BwdParams& p) {
    constexpr int kElemsPerChunk = bwd::kChunkBytes / int(sizeof(E));
    constexpr int kChunks = kHeadDim / kElemsPerChunk;
    const Problem pr(p, blockIdx.z, blockIdx.y);
    const int row = blockIdx.x * kRowsPerPrepBlock + int(threadIdx.x) / kRowThreads;
    const int sub = int(threadIdx.x) % kRowThreads;
    // Rows past Sq stay in the loop (no early return) so the shuffles below
    // see every lane of the warp.
    const bool in = row < pr.seqlen_q;

    const E* o = at<E>(p.o, p.o_batch_stride, p.o_head_stride, pr) + row * p.o_row_stride;
    const E* dout = at<E>(p.dout, p.dout_batch_stride, p.dout_head_stride, pr) + row * p.dout_row_stride;
    float sum = 0.f;
    for (int c = sub; in && c < kChunks; c += kRowThreads) {
      const bwd::Vec16 vo = *reinterpret_cast<const bwd::Vec16*>(o + c * kElemsPerChunk);
      const bwd::Vec16 vd = *reinterpret_cast<const bwd::Vec16*>(dout + c * kElemsPerChunk);
#pragma unroll
      for (int i = 0; i < kElemsPerChunk; ++i) {
        sum += bwd::chunk_elem<E>(vo, i) * bwd::chunk_elem<E>(vd, i);
      }
    }
#pragma unroll
    for (int mask = kRowThreads / 2; mask > 0; mask /= 2) sum += ptx::shfl_xor(sum, mask);
    if (!in) return;
    if (sub == 0) p.dsum[pr.bh * pr.seqlen_q + row] = sum;

    if constexpr (!kDeterministic) {
      bwd::Vec16* acc = reinterpret_cast<bwd::Vec16*>(p.dq_accum + (pr.bh * pr.seqlen_q + row) * kHeadDim);
      constexpr int kAccChunks = kHeadDim * int(sizeof(float)) / bwd::kChunkBytes;
      for (int c = sub; c < kAccChunks; c += kRowThreads) acc[c] = bwd::Vec16{{0u, 0u, 0u, 0u}};
    }
  }

  // -------------------------------------------------------------------------
  // main: dK, dV for one K/V tile (and dQ partial sums in atomic mode)
  // -------------------------------------------------------------------------
  static __device__ void main(const BwdParams& p) {
    // Dynamic shared memory, typed by its 16-byte chunks for alignment.
    extern __shared__ bwd::Vec16 smem_chunks[];
    unsigned char* smem = reinterpret_cast<unsigned char*>(smem_chunks);
    MainStorage& s = *reinterpret_cast<MainStorage*>(smem);
    const DsTile& ds = *reinterpret_cast<const DsTile*>(smem + sizeof(MainStorage));
    const DqAccTile& dq_stage =
        *reinterpret_cast<const DqAccTile*>(smem + sizeof(MainStorage) + sizeof(DsTile));

    const Problem pr(p, blockIdx.z, blockIdx.y);
    const int n_block = blockIdx.x;
    const int n0 = n_block * kBlockN;
    const int tid = threadIdx.x, lane = tid % bwd::kWarpSize, warp = tid / bwd::kWarpSize;

    const int m_begin = kIsCausal ? bwd::max_int(0, n0 - pr.diag) / kBlockM : 0;
    const int m_end = bwd::ceil_div(pr.seqlen_q, kBlockM);
    auto dk_rows = [&]() { return at<E>(p.dk, p.dk_batch_stride, p.dk_head_stride, pr) + n0 * p.dk_row_stride; };
    auto dv_rows = [&]() { return at<E>(p.dv, p.dv_batch_stride, p.dv_head_stride, pr) + n0 * p.dv_row_stride; };
    if (n0 >= pr.keys || m_begin >= m_end) {
      // No query sees these keys: their gradients are zero.
      write_zero_rows(dk_rows(), p.dk_row_stride, pr.seqlen_k - n0);
      write_zero_rows(dv_rows(), p.dv_row_stride, pr.seqlen_k - n0);
      return;
    }

    const E* k = at<E>(p.k, p.k_batch_stride, p.k_head_stride, pr) + n0 * p.k_row_stride;
    const E* v = at<E>(p.v, p.v_batch_stride, p.v_head_stride, pr) + n0 * p.v_row_stride;
    const E* q = at<E>(p.q, p.q_batch_stride, p.q_head_stride, pr);
    const E* dout = at<E>(p.dout, p.dout_batch_stride, p.dout_head_stride, pr);
    const float* lse = p.lse + pr.b * p.lse_batch_stride + pr.h * p.lse_head_stride;
    const float* dsum = p.dsum + pr.bh * pr.seqlen_q;
    float* dq_accum = p.dq_accum + pr.bh * pr.seqlen_q * kHeadDim;  // [Sq, D] of this (b, h)

    // K/V rows past this batch entry's keys read as zero (always guarded: it is
    // once per CTA), so masked keys contribute exact zeros everywhere.
    bwd::load_tile_async<kThreads, true>(s.k, k, p.k_row_stride, pr.keys - n0);
    bwd::load_tile_async<kThreads, true>(s.v, v, p.v_row_stride, pr.keys - n0);
    auto load_q_tile = [&](int m_block, int stage) {
      const int m0 = m_block * kBlockM;
      const int rows = pr.seqlen_q - m0;
      bwd::load_tile_async<kThreads, !kIsEven>(s.q[stage], q + m0 * p.q_row_stride, p.q_row_stride, rows);
      bwd::load_tile_async<kThreads, !kIsEven>(s.dout[stage], dout + m0 * p.dout_row_stride,
                                               p.dout_row_stride, rows);
      bwd::load_vec_async<kThreads>(s.lse[stage], lse + m0, rows);
      bwd::load_vec_async<kThreads>(s.dsum[stage], dsum + m0, rows);
      ptx::cp_async_commit();
    };
    load_q_tile(m_begin, 0);

    const int warp_n = warp % kWarpsN, warp_d = warp / kWarpsN;
    const int row0 = warp_n * bwd::kMmaM;       // this warp's keys within the tile
    const int col0 = warp_d * kColsPerWarp;     // this warp's dK/dV columns
    constexpr int kTilesD = kColsPerWarp / bwd::kMmaN;
    float acc_dk[kTilesD][4], acc_dv[kTilesD][4];
    bwd::zero(acc_dk);
    bwd::zero(acc_dv);

    for (int m_block = m_begin; m_block < m_end; ++m_block) {
      const int stage = (m_block - m_begin) % kStages;
      const int m0 = m_block * kBlockM;
      if constexpr (kStages == 2) {
        // Prefetch the next Q tile into the other stage, whose last reader
        // (the previous iteration) finished before its second barrier.
        if (m_block + 1 < m_end) {
          load_q_tile(m_block + 1, stage ^ 1);
          ptx::cp_async_wait<1>();
        } else {
          ptx::cp_async_wait<0>();
        }
      } else {
        ptx::cp_async_wait<0>();
      }
      __syncthreads();
      if constexpr (kBulkDq) {
        // The previous tile's dQ partials are staged (and fenced) by now.
        if (m_block > m_begin) issue_dq_reduce(dq_accum, dq_stage, pr, m0 - kBlockM);
      }

      // The Q tile is processed in column slabs of kSubM queries: the register
      // peak (dK, dV, P^T, dP^T) is that of a kSubM-query step, while the
      // barriers and the dQ product are paid once per kBlockM queries.
#pragma unroll 1
      for (int sub0 = 0; sub0 < kBlockM; sub0 += kSubM) {
        slab_step(p, pr, s, ds, stage, m0, sub0, n0, row0, col0, warp_d, lane, acc_dk, acc_dv);
      }

      // The bulk reduce issued above has read the staging tile before it is
      // rewritten below (long done by now: the slabs take much longer).
      if constexpr (kBulkDq) ptx::bulk_wait_read<0>();
      __syncthreads();  // dS^T visible; Q/dO of this stage free; dQ staging free

      if constexpr (kStages == 1) {
        if (m_block + 1 < m_end) load_q_tile(m_block + 1, 0);  // overlaps the dQ product
      }
      if constexpr (!kDeterministic) accumulate_dq(dq_accum, dq_stage, pr, s, ds, m0, warp, lane);
    }
    if constexpr (kBulkDq) {
      __syncthreads();
      issue_dq_reduce(dq_accum, dq_stage, pr, (m_end - 1) * kBlockM);
      ptx::bulk_wait<0>();  // staging tile read and global sums done before exit
    }

    // dK carries the softmax scale (S = scale * Q K^T); dV does not.
#pragma unroll
    for (int j = 0; j < kTilesD; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc_dk[j][i] *= p.scale;
    }
    const int rows_valid = pr.seqlen_k - n0;
    store_acc(dk_rows(), p.dk_row_stride, acc_dk, row0, col0, rows_valid, lane);
    store_acc(dv_rows(), p.dv_row_stride, acc_dv, row0, col0, rows_valid, lane);
  }

  /// One kSubM-query slab of the main loop: P^T, dS^T for this warp's 16
  /// keys, dV and dK updates, and dS^T into shared memory for the dQ product.
  static __device__ __forceinline__ void slab_step(const BwdParams& p, const Problem& pr,
                                                   const MainStorage& s, const DsTile& ds, int stage,
                                                   int m0, int sub0, int n0, int row0, int col0,
                                                   int warp_d, int lane,
                                                   float (&acc_dk)[kColsPerWarp / bwd::kMmaN][4],
                                                   float (&acc_dv)[kColsPerWarp / bwd::kMmaN][4]) {
    constexpr int kTilesM = kSubM / bwd::kMmaN;
    constexpr int kTilesD = kColsPerWarp / bwd::kMmaN;
    constexpr int kQRowBytes = QTile::kRowBytes;
    constexpr int kKvRowBytes = KvTile::kRowBytes;
    constexpr int kDBytes = kHeadDim * int(sizeof(E));
    const int g = lane / 4, t = lane % 4;
    // This slab's queries: rows [sub0, sub0 + kSubM) of the stage's Q/dO tiles.
    const unsigned q_base = s.q[stage].addr() + sub0 * kQRowBytes;
    const unsigned do_base = s.dout[stage].addr() + sub0 * kQRowBytes;
    const float* lse = s.lse[stage] + sub0;
    const float* dsum = s.dsum[stage] + sub0;

    // S^T = K Q^T: [16 keys x kSubM queries] per warp.
    float acc_s[kTilesM][4];
    bwd::zero(acc_s);
    bwd::gemm_nt<Mma, kTilesM, kDBytes>(acc_s, s.k.addr(), kKvRowBytes, row0, q_base, kQRowBytes, 0, lane);

    // P^T = exp2(S^T * scale_log2 - LSE * log2(e)). Masked pairs get P = 0
    // by selection (their exponent may be +inf: rows that see no key have
    // LSE = -inf).
    const bool mask = pr.needs_mask(m0 + sub0, n0, kBlockN);
    typename Mma::template Kept<kTilesM> pt;
#pragma unroll
    for (int j = 0; j < kTilesM; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float pv[2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int m = j * bwd::kMmaN + 2 * t + c;
          const int n = row0 + g + half * 8;
          pv[c] = ptx::exp2_approx(acc_s[j][2 * half + c] * p.scale_log2 - lse[m] * bwd::kLog2e);
          if (mask && !pr.visible(m0 + sub0 + m, n0 + n)) pv[c] = 0.f;
        }
        Mma::keep(pt, j, half, pv[0], pv[1]);
      }
    }

    // dV += P^T dO over this warp's columns.
    bwd::gemm_rt<E, Mma, kTilesD, kTilesM>(
        acc_dv, [&](int kk) { return Mma::a_from_kept(pt, kk); }, do_base, kQRowBytes, col0, lane);

    // dP^T = V dO^T; dS^T = P^T o (dP^T - Dsum), kept like P^T.
    typename Mma::template Kept<kTilesM> dst;
    {
      float acc_dp[kTilesM][4];
      bwd::zero(acc_dp);
      bwd::gemm_nt<Mma, kTilesM, kDBytes>(acc_dp, s.v.addr(), kKvRowBytes, row0, do_base, kQRowBytes, 0, lane);
#pragma unroll
      for (int j = 0; j < kTilesM; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float dsv[2];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int i = 2 * half + c;
            const int m = j * bwd::kMmaN + 2 * t + c;
            dsv[c] = Mma::kept(pt, j, i) * (acc_dp[j][i] - dsum[m]);
          }
          Mma::keep(dst, j, half, dsv[0], dsv[1]);
        }
      }
    }

    if constexpr (!kDeterministic) {
      // dS^T -> shared memory for the dQ product (one copy per key slab).
      if (warp_d == 0) {
#pragma unroll
        for (int j = 0; j < kTilesM; ++j) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int n = row0 + g + half * 8;
            const int m = j * bwd::kMmaN + 2 * t;
            Mma::store_kept(ds.addr() + n * DsTile::kRowBytes + (sub0 + m) * int(sizeof(E)), dst, j, half);
          }
        }
      }
    }

    // dK += dS^T Q over this warp's columns.
    bwd::gemm_rt<E, Mma, kTilesD, kTilesM>(
        acc_dk, [&](int kk) { return Mma::a_from_kept(dst, kk); }, q_base, kQRowBytes, col0, lane);
  }

  /// dQaccum[m0 + i, :] += dS K for the current Q tile; warps split [kBlockM x D].
  static __device__ __forceinline__ void accumulate_dq(float* dq_accum, const DqAccTile& dq_stage,
                                                       const Problem& pr, const MainStorage& s,
                                                       const DsTile& ds, int m0, int warp, int lane) {
    constexpr int kTiles = kDqColsPerPass / bwd::kMmaN;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int rg = 0; rg < kDqRowGroups; ++rg) {
#pragma unroll
      for (int pass = 0; pass < kDqColsPerWarp / kDqColsPerPass; ++pass) {
        const int r0 = (warp % kDqWarpsM + rg * kDqWarpsM) * bwd::kMmaM;
        const int d0 = (warp / kDqWarpsM) * kDqColsPerWarp + pass * kDqColsPerPass;
        float acc[kTiles][4];
        bwd::zero(acc);
        bwd::gemm_tt<E, Mma, kTiles, kBlockN>(acc, ds.addr(), DsTile::kRowBytes, r0, s.k.addr(),
                                             KvTile::kRowBytes, d0, lane);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = r0 + g + half * 8;  // m0 is a multiple of 4: same swizzle row
          if constexpr (kBulkDq) {
            // Stage in shared memory; issue_dq_reduce sends the whole tile.
            const unsigned dst = dq_stage.addr() + r * DqAccTile::kRowBytes;
#pragma unroll
            for (int j = 0; j < kTiles; ++j) {
              const int c = bwd::dq_swizzled_col(r, d0 + j * bwd::kMmaN + 2 * t);
              ptx::sts64(dst + c * 4, ptx::f32_as_u32(acc[j][2 * half]),
                         ptx::f32_as_u32(acc[j][2 * half + 1]));
            }
          } else if (kIsEven || m0 + r < pr.seqlen_q) {
            float* dst = dq_accum + (m0 + r) * kHeadDim;
#pragma unroll
            for (int j = 0; j < kTiles; ++j) {
              const int c = bwd::dq_swizzled_col(r, d0 + j * bwd::kMmaN + 2 * t);
              ptx::red_add_v2_f32(dst + c, acc[j][2 * half], acc[j][2 * half + 1]);
            }
          }
        }
      }
    }
    if constexpr (kBulkDq) ptx::fence_proxy_async_shared();  // before the next barrier
  }

  /// dQaccum[m0 .. m0 + rows) += the staged tile: the valid rows are one
  /// contiguous range in both, so thread 0 issues a single bulk reduce-add.
  static __device__ __forceinline__ void issue_dq_reduce(float* dq_accum, const DqAccTile& dq_stage,
                                                         const Problem& pr, int m0) {
    if (threadIdx.x == 0) {
      const int rows = kIsEven ? kBlockM : bwd::min_int(kBlockM, pr.seqlen_q - m0);
      ptx::bulk_reduce_add_f32(dq_accum + m0 * kHeadDim, dq_stage.addr(),
                               rows * kHeadDim * int(sizeof(float)));
      ptx::bulk_commit();
    }
  }

  // -------------------------------------------------------------------------
  // dq (deterministic mode): dQ for one Q tile, no atomics
  // -------------------------------------------------------------------------
  static __device__ void dq(const BwdParams& p) {
    if constexpr (!kDeterministic) {
      (void)p;  // never launched: dQ is accumulated by the main kernel
    } else {
      extern __shared__ bwd::Vec16 smem_chunks[];
      DqStorage& s = *reinterpret_cast<DqStorage*>(smem_chunks);
      constexpr int kTilesN = kDqBlockN / bwd::kMmaN;
      constexpr int kCols = kHeadDim / kDqSplitD;  // dQ columns of one warp
      constexpr int kTilesD = kCols / bwd::kMmaN;
      constexpr int kDBytes = kHeadDim * int(sizeof(E));
      constexpr int kSlabs = kBlockM / bwd::kMmaM;

      const Problem pr(p, blockIdx.z, blockIdx.y);
      const int m0 = blockIdx.x * kBlockM;
      const int tid = threadIdx.x, lane = tid % bwd::kWarpSize, warp = tid / bwd::kWarpSize;
      const int g = lane / 4, t = lane % 4;
      const int row0 = (warp % kSlabs) * bwd::kMmaM;
      const int col0 = (warp / kSlabs) * kCols;

      // Keys seen by the last valid query of the tile.
      const int last_q = bwd::min_int(m0 + kBlockM, pr.seqlen_q) - 1;
      const int n_end = kIsCausal ? bwd::min_int(pr.keys, last_q + pr.diag + 1) : pr.keys;
      const int num_n = n_end > 0 ? bwd::ceil_div(n_end, kDqBlockN) : 0;

      const E* q = at<E>(p.q, p.q_batch_stride, p.q_head_stride, pr) + m0 * p.q_row_stride;
      const E* dout = at<E>(p.dout, p.dout_batch_stride, p.dout_head_stride, pr) + m0 * p.dout_row_stride;
      const E* k = at<E>(p.k, p.k_batch_stride, p.k_head_stride, pr);
      const E* v = at<E>(p.v, p.v_batch_stride, p.v_head_stride, pr);
      const int q_rows = pr.seqlen_q - m0;
      if (num_n > 0) {  // else no key is seen: dQ = 0, nothing to load
        bwd::load_tile_async<kDqThreads, !kIsEven>(s.q, q, p.q_row_stride, q_rows);
        bwd::load_tile_async<kDqThreads, !kIsEven>(s.dout, dout, p.dout_row_stride, q_rows);
      }
      auto load_kv_tile = [&](int n_blk, int stage) {
        const int n0 = n_blk * kDqBlockN;
        bwd::load_tile_async<kDqThreads, true>(s.k[stage], k + n0 * p.k_row_stride, p.k_row_stride, pr.keys - n0);
        bwd::load_tile_async<kDqThreads, true>(s.v[stage], v + n0 * p.v_row_stride, p.v_row_stride, pr.keys - n0);
        ptx::cp_async_commit();
      };
      if (num_n > 0) load_kv_tile(0, 0);

      // LSE (base 2) and Dsum of this thread's two rows; rows past Sq are
      // never stored, any finite value will do.
      float lse2[2], dsum[2];
      const float* lse = p.lse + pr.b * p.lse_batch_stride + pr.h * p.lse_head_stride;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m = m0 + row0 + g + half * 8;
        const bool in = m < pr.seqlen_q;
        lse2[half] = in ? lse[m] * bwd::kLog2e : 0.f;
        dsum[half] = in ? p.dsum[pr.bh * pr.seqlen_q + m] : 0.f;
      }

      float acc_dq[kTilesD][4];
      bwd::zero(acc_dq);
      for (int n_blk = 0; n_blk < num_n; ++n_blk) {
        const int stage = n_blk % kStages;
        const int n0 = n_blk * kDqBlockN;
        if constexpr (kStages == 2) {
          if (n_blk + 1 < num_n) {
            load_kv_tile(n_blk + 1, stage ^ 1);
            ptx::cp_async_wait<1>();
          } else {
            ptx::cp_async_wait<0>();
          }
        } else {
          ptx::cp_async_wait<0>();
        }
        __syncthreads();

        const unsigned k_base = s.k[stage].addr();
        float acc_s[kTilesN][4], acc_dp[kTilesN][4];
        bwd::zero(acc_s);
        bwd::zero(acc_dp);
        bwd::gemm_nt<Mma, kTilesN, kDBytes>(acc_s, s.q.addr(), QTile::kRowBytes, row0, k_base,
                                            DqKvTile::kRowBytes, 0, lane);
        bwd::gemm_nt<Mma, kTilesN, kDBytes>(acc_dp, s.dout.addr(), QTile::kRowBytes, row0,
                                            s.v[stage].addr(), DqKvTile::kRowBytes, 0, lane);
        const bool mask = pr.needs_mask(m0, n0, kDqBlockN);
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int half = i / 2;
            const int m = m0 + row0 + g + half * 8;
            const int n = n0 + j * bwd::kMmaN + 2 * t + (i % 2);
            float pv = ptx::exp2_approx(acc_s[j][i] * p.scale_log2 - lse2[half]);
            if (mask && !pr.visible(m, n)) pv = 0.f;
            acc_dp[j][i] = pv * (acc_dp[j][i] - dsum[half]);
          }
        }
        // dQ += dS K
        bwd::gemm_rt<E, Mma, kTilesD, kTilesN>(
            acc_dq, [&](int kk) { return Mma::a_from_acc(acc_dp, kk); }, k_base, DqKvTile::kRowBytes, col0, lane);
        __syncthreads();  // this stage's K/V may be overwritten next
        if constexpr (kStages == 1) {
          if (n_blk + 1 < num_n) load_kv_tile(n_blk + 1, 0);
        }
      }

#pragma unroll
      for (int j = 0; j < kTilesD; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc_dq[j][i] *= p.scale;
      }
      E* dq_out = at<E>(p.dq, p.dq_batch_stride, p.dq_head_stride, pr) + m0 * p.dq_row_stride;
      store_acc(dq_out, p.dq_row_stride, acc_dq, row0, col0, pr.seqlen_q - m0, lane);
    }
  }

  // -------------------------------------------------------------------------
  // postprocess (atomic mode): dQ = scale * dQaccum as Element
  // -------------------------------------------------------------------------
  static __device__ void postprocess(const BwdParams& p) {
    if constexpr (kDeterministic) {
      (void)p;  // never launched: the dq kernel writes dQ
    } else {
      constexpr int kElemsPerChunk = bwd::kChunkBytes / int(sizeof(E));
      constexpr int kChunks = kHeadDim / kElemsPerChunk;
      const Problem pr(p, blockIdx.z, blockIdx.y);
      const int row = blockIdx.x * kRowsPerPrepBlock + int(threadIdx.x) / kRowThreads;
      const int sub = int(threadIdx.x) % kRowThreads;
      if (row >= pr.seqlen_q) return;
      const float* acc = p.dq_accum + (pr.bh * pr.seqlen_q + row) * kHeadDim;
      E* dq_out = at<E>(p.dq, p.dq_batch_stride, p.dq_head_stride, pr) + row * p.dq_row_stride;
      for (int c = sub; c < kChunks; c += kRowThreads) {
        E* dst = dq_out + c * kElemsPerChunk;
#pragma unroll
        for (int i = 0; i < kElemsPerChunk; i += 4) {
          // 4 floats never straddle an 8-float swizzle chunk.
          const float* src = acc + bwd::dq_swizzled_col(row, c * kElemsPerChunk + i);
          const bwd::Vec16 x = *reinterpret_cast<const bwd::Vec16*>(src);
          bwd::store_pair<E>(dst + i, ptx::u32_as_f32(x.w[0]) * p.scale, ptx::u32_as_f32(x.w[1]) * p.scale);
          bwd::store_pair<E>(dst + i + 2, ptx::u32_as_f32(x.w[2]) * p.scale, ptx::u32_as_f32(x.w[3]) * p.scale);
        }
      }
    }
  }

 private:
  /// Writes a warp's [16 x 8*kTiles] accumulator (rows from row0, columns
  /// from col0) to a global [rows][D] matrix; rows >= rows_valid are skipped.
  template <int kTiles>
  static __device__ __forceinline__ void store_acc(E* gmem, long long row_stride,
                                                   const float (&acc)[kTiles][4], int row0, int col0,
                                                   int rows_valid, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row0 + g + half * 8;
      if (kIsEven || r < rows_valid) {
        E* dst = gmem + r * row_stride + col0 + 2 * t;
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          bwd::store_pair<E>(dst + j * bwd::kMmaN, acc[j][2 * half], acc[j][2 * half + 1]);
        }
      }
    }
  }

  /// Zeroes rows [0, min(kBlockN, rows_valid)) of a global [rows][D] matrix.
  static __device__ __forceinline__ void write_zero_rows(E* gmem, long long row_stride, int rows_valid) {
    constexpr int kChunksPerRow = kHeadDim * int(sizeof(E)) / bwd::kChunkBytes;
    constexpr int kElemsPerChunk = bwd::kChunkBytes / int(sizeof(E));
    const int rows = bwd::min_int(kBlockN, rows_valid);
    for (int c = threadIdx.x; c < rows * kChunksPerRow; c += kThreads) {
      bwd::Vec16* dst = reinterpret_cast<bwd::Vec16*>(gmem + (c / kChunksPerRow) * row_stride +
                                                      (c % kChunksPerRow) * kElemsPerChunk);
      *dst = bwd::Vec16{{0u, 0u, 0u, 0u}};
    }
  }
};

}  // namespace flashjit
