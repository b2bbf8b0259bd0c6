// Hopper (sm_90a) PTX wrappers for templates/fwd_wgmma.cuh: mbarriers, TMA
// (cp.async.bulk.tensor) loads and stores, warpgroup matrix products (wgmma)
// and their shared-memory descriptors, register reallocation (setmaxnreg) and
// named barriers. Inline PTX only, like ptx.cuh, so NVRTC needs no headers.
//
// wgmma m64nNk16 accumulator layout (f32): warp w of the warpgroup owns rows
// 16w..16w+15; in n8 column tile j a lane (g = lane / 4, t = lane % 4) holds
//   d[4j + 0], d[4j + 1] = D(16w + g,     8j + 2t), D(16w + g,     8j + 2t + 1)
//   d[4j + 2], d[4j + 3] = D(16w + g + 8, 8j + 2t), D(16w + g + 8, 8j + 2t + 1)
// which is the mma.sync m16n8 layout per n8 tile; the register A operand of a
// k16 step is the mma.sync m16n8k16 A fragment of the warp's 16 rows.
#pragma once

#include "flashjit/ptx.cuh"
#include "flashjit/wgmma_ops.cuh"

namespace flashjit {
namespace ptx {

// ---------------------------------------------------------------------------
// mbarrier: a 64-bit shared-memory barrier with an arrival count and a
// transaction (byte) count; TMA completes bytes on it, threads arrive on it.
// ---------------------------------------------------------------------------

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}

/// Makes mbarrier initialisation visible to the async proxy (TMA) before use.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/// One arrival that also announces `bytes` of TMA traffic for this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/// Waits until the phase with the given parity has completed. A fresh barrier
/// is in phase 0, so waiting on parity 1 returns at once (a free slot).
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---------------------------------------------------------------------------
// TMA: 4-D tiled copies through a tensor map (CUtensorMap, 128 bytes) that
// lives in kernel parameter space (__grid_constant__). Coordinates are
// innermost first: (column, row, head, batch). Out-of-range rows of a load
// arrive as zeros and still count their bytes; a store clips them.
// ---------------------------------------------------------------------------

__device__ __forceinline__ void tma_load_4d(unsigned dst, const void* tensor_map, unsigned bar, int c0,
                                            int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
      "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_store_4d(const void* tensor_map, unsigned src, int c0, int c1, int c2,
                                             int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          tensor_map),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

/// Hints the TMA unit to fetch a tensor map into its cache before first use.
__device__ __forceinline__ void prefetch_tensor_map(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map) : "memory");
}

// ---------------------------------------------------------------------------
// Warp specialisation: register reallocation and named barriers.
// ---------------------------------------------------------------------------

/// The executing warpgroup gives registers back (producers need few).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

/// The executing warpgroup takes registers (consumers hold the accumulators).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

/// Waits at named barrier `id` until `threads` threads have arrived or synced.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// Arrives at named barrier `id` without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---------------------------------------------------------------------------
// Flags between CTAs of one launch (the stream-K partial tiles): a writer's
// stores, then a release of the flag at GPU scope; a reader acquires the flag
// and only then reads what the writer stored.
// ---------------------------------------------------------------------------

/// Stores `value` to the flag with release semantics at GPU scope.
__device__ __forceinline__ void st_release_gpu(unsigned long long* flag, unsigned long long value) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(value) : "memory");
}

/// Loads the flag with acquire semantics at GPU scope.
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long* flag) {
  unsigned long long value;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(flag) : "memory");
  return value;
}

/// 4-byte global load that bypasses L1 (data another SM wrote this launch).
__device__ __forceinline__ float ldg_cg_f32(const float* gptr) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(gptr) : "memory");
  return v;
}

/// 4-byte global store.
__device__ __forceinline__ void stg_f32(float* gptr, float v) {
  asm volatile("st.global.f32 [%0], %1;" ::"l"(gptr), "f"(v) : "memory");
}

// ---------------------------------------------------------------------------
// wgmma: issue is asynchronous. fence before the first issue that reads
// registers written since; commit closes a group; wait<N> blocks until at most
// N groups are pending. fence_operand pins a register at a point in the
// program, so the compiler neither reads an accumulator before the wait nor
// reuses an A-operand register while the product may still read it.
// ---------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_operand(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_operand(unsigned (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

/// Shared-memory matrix descriptor for a 128-byte-swizzled operand (the layout
/// a TMA load with CU_TENSOR_MAP_SWIZZLE_128B writes: rows of 128 bytes, the
/// 16-byte chunks of row r XOR-permuted by r % 8, atoms of 8 rows = 1024 bytes
/// aligned to 1024). Byte offsets are encoded >> 4.
///   K-major operand (Q, K): `stride_bytes` = 1024, the step between 8-row
///   groups; `leading_bytes` is unused by the hardware.
///   MN-major operand (V, read transposed): `leading_bytes` = the step between
///   64-column blocks, `stride_bytes` = 1024, the step between 8-key groups.
__device__ __forceinline__ unsigned long long smem_desc_sw128(unsigned smem_addr, unsigned leading_bytes,
                                                              unsigned stride_bytes) {
  constexpr unsigned long long kSwizzle128B = 1;
  return (static_cast<unsigned long long>((smem_addr & 0x3FFFF) >> 4)) |
         (static_cast<unsigned long long>((leading_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<unsigned long long>((stride_bytes >> 4) & 0x3FFF) << 32) | (kSwizzle128B << 62);
}

/// `desc` moved `bytes` further into shared memory: only the start address
/// field (bits 0-13, the address >> 4) changes, by one 32-bit add, and no
/// carry leaves it because shared addresses stay below 256 KiB. A k step's
/// descriptor is then one add on the base's, not a new descriptor per step.
__device__ __forceinline__ unsigned long long smem_desc_advance(unsigned long long desc, unsigned bytes) {
  const unsigned lo = static_cast<unsigned>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

// The products themselves (wgmma_ss, wgmma_rs_tb, wgmma_rs) are generated:
// templates/wgmma_ops.cuh.

}  // namespace ptx
}  // namespace flashjit
