// Small PTX wrappers shared by the kernel templates: 16-bit storage types and
// conversions, tensor-core mma.sync, ldmatrix, cp.async, fast exp2/log2 and
// warp shuffles. Everything is inline PTX so the templates compile under NVRTC
// with no toolkit headers (no cuda_bf16.h, cuda_fp16.h) and no std headers.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k*"): a lane is
// g = lane / 4 (its "group", a row of the 8-row blocks) and t = lane % 4 (its
// position in the quad). The f32 accumulator of every m16n8 shape holds
//   c[0], c[1] = C(g,     2t), C(g,     2t + 1)
//   c[2], c[3] = C(g + 8, 2t), C(g + 8, 2t + 1).
#pragma once

namespace flashjit {

/// How a kernel computes its matrix products. kNative: 16-bit inputs on the
/// bf16/f16 tensor cores with f32 accumulation. kTF32: f32 inputs rounded to
/// TF32 (10-bit mantissa). k3xTF32: f32 inputs split into big + small TF32
/// parts, three products per product, which matches float32 math.
enum class MathMode { kNative, kTF32, k3xTF32 };

/// bfloat16 storage (bit pattern only; arithmetic goes through f32).
struct bf16_t {
  unsigned short bits;
};
/// IEEE half storage (bit pattern only; arithmetic goes through f32).
struct f16_t {
  unsigned short bits;
};

/// Type equality at compile time (no <type_traits> under NVRTC).
template <class A, class B>
inline constexpr bool kIsSame = false;
template <class A>
inline constexpr bool kIsSame<A, A> = true;

/// Conditional<c, A, B> is A if c else B (no <type_traits> under NVRTC).
template <bool kCond, class A, class B>
struct ConditionalT {
  using type = A;
};
template <class A, class B>
struct ConditionalT<false, A, B> {
  using type = B;
};
template <bool kCond, class A, class B>
using Conditional = typename ConditionalT<kCond, A, B>::type;

namespace ptx {

// ---------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------

/// 32-bit shared-state-space address of a generic pointer into shared memory
/// (what ldmatrix, cp.async and ld.shared take).
__device__ __forceinline__ unsigned smem_u32(const void* ptr) {
  unsigned addr;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(ptr));
  return addr;
}

// ---------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------

/// Bit casts between f32 and u32 (no toolkit intrinsics under NVRTC).
__device__ __forceinline__ float u32_as_f32(unsigned u) {
  float r;
  asm("mov.b32 %0, %1;" : "=f"(r) : "r"(u));
  return r;
}

__device__ __forceinline__ unsigned f32_as_u32(float x) {
  unsigned r;
  asm("mov.b32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// Two floats to packed bf16x2, round to nearest even; `lo` goes to the low half.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// Two floats to packed f16x2, round to nearest even; `lo` goes to the low half.
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// Packs two floats into the 16-bit pair type T (bf16_t or f16_t).
template <class T>
__device__ __forceinline__ unsigned pack_16x2(float lo, float hi) {
  if constexpr (kIsSame<T, bf16_t>) {
    return pack_bf16x2(lo, hi);
  } else {
    return pack_f16x2(lo, hi);
  }
}

/// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
__device__ __forceinline__ float bf16_to_f32(bf16_t x) {
  return u32_as_f32(static_cast<unsigned>(x.bits) << 16);
}

__device__ __forceinline__ float f16_to_f32(f16_t x) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x.bits));
  return r;
}

__device__ __forceinline__ bf16_t f32_to_bf16(float x) {
  bf16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}

__device__ __forceinline__ f16_t f32_to_f16(float x) {
  f16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}

/// Any element type (bf16_t, f16_t, float) to f32.
__device__ __forceinline__ float to_f32(bf16_t x) { return bf16_to_f32(x); }
__device__ __forceinline__ float to_f32(f16_t x) { return f16_to_f32(x); }
__device__ __forceinline__ float to_f32(float x) { return x; }

/// f32 rounded to TF32 (round to nearest, ties away: what cuBLAS and CUTLASS
/// use); the result is an f32 bit pattern whose low 13 mantissa bits are zero.
__device__ __forceinline__ unsigned f32_to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// 3xTF32 split: x = big + small exactly up to f32 rounding, both TF32.
__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
  big = f32_to_tf32(x);
  small = f32_to_tf32(x - u32_as_f32(big));
}

/// TF32 keeps the top 19 bits of an f32 (sign, 8 exponent, 10 mantissa bits).
inline constexpr unsigned kTf32DroppedBits = 13;
inline constexpr unsigned kTf32Mask = ~((1u << kTf32DroppedBits) - 1u);
inline constexpr unsigned kTf32HalfUlp = 1u << (kTf32DroppedBits - 1);

/// TF32 by truncation toward zero: one LOP3.
__device__ __forceinline__ unsigned tf32_truncate(float x) { return f32_as_u32(x) & kTf32Mask; }

/// The same value as cvt.rna.tf32.f32 for finite x (adding half a TF32 ulp to
/// the magnitude bits rounds half away from zero), in two integer ops instead
/// of cvt's four SASS instructions on sm_90. Inf inputs come out NaN.
__device__ __forceinline__ unsigned f32_to_tf32_finite(float x) {
  return (f32_as_u32(x) + kTf32HalfUlp) & kTf32Mask;
}

/// 3xTF32 split in four ALU ops (split_tf32 takes nine SASS instructions):
/// big = round(x) makes x - big exact with |x - big| <= 2^-11 |x|, and
/// truncating that to TF32 loses at most 2^-21 |x|. Finite x only.
__device__ __forceinline__ void split_tf32_fast(float x, unsigned& big, unsigned& small) {
  big = f32_to_tf32_finite(x);
  small = tf32_truncate(x - u32_as_f32(big));
}

// ---------------------------------------------------------------------------
// Tensor-core products (mma.sync; sm_80 and later)
// ---------------------------------------------------------------------------

/// D += A * B for m16n8k16, A row-major (4 regs of 16-bit pairs), B column-major
/// (2 regs), f32 accumulators. T picks bf16 or f16 operands.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                             const unsigned (&b)[2]) {
  if constexpr (kIsSame<T, bf16_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

/// D += A * B for m16n8k8 TF32. Operand layouts (PTX ISA):
///   a[0] = A(g, t), a[1] = A(g + 8, t), a[2] = A(g, t + 4), a[3] = A(g + 8, t + 4)
///   b[0] = B(t, g), b[1] = B(t + 4, g)
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4],
                                                 const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---------------------------------------------------------------------------
// ldmatrix: 8x8 matrices of 16-bit elements from shared memory. Lanes 8i..8i+7
// give the row addresses of matrix i (16 contiguous bytes each); register i
// receives matrix i with lane (g, t) holding row g, columns 2t and 2t + 1 (or,
// with .trans, column g, rows 2t and 2t + 1).
// ---------------------------------------------------------------------------

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

// ---------------------------------------------------------------------------
// Plain shared-memory loads and stores (for 32-bit data that ldmatrix cannot
// transpose, and for epilogues).
// ---------------------------------------------------------------------------

__device__ __forceinline__ unsigned lds32(unsigned smem_addr) {
  unsigned r;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r) : "r"(smem_addr));
  return r;
}

__device__ __forceinline__ void lds64(unsigned& r0, unsigned& r1, unsigned smem_addr) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(smem_addr));
}

__device__ __forceinline__ void lds128(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ __forceinline__ void sts32(unsigned smem_addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(smem_addr), "r"(v));
}

__device__ __forceinline__ void sts128(unsigned smem_addr, const unsigned (&v)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3]));
}

__device__ __forceinline__ void sts64(unsigned smem_addr, unsigned v0, unsigned v1) {
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(smem_addr), "r"(v0), "r"(v1));
}

/// 8-byte global store (the address must be 8-byte aligned).
__device__ __forceinline__ void stg64(void* gptr, unsigned v0, unsigned v1) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(gptr), "r"(v0), "r"(v1) : "memory");
}

/// 16-byte global store (the address must be 16-byte aligned).
__device__ __forceinline__ void stg128(void* gptr, const unsigned (&v)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(gptr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// ---------------------------------------------------------------------------
// cp.async (sm_80 and later): global -> shared without registers.
// ---------------------------------------------------------------------------

/// Copies 16 bytes, or writes 16 zero bytes when `valid` is false (src-size 0:
/// nothing is read, so `gptr` may point anywhere mapped, e.g. the tensor base).
/// .cg bypasses L1: each K/V tile is read once per CTA.
__device__ __forceinline__ void cp_async_16(unsigned smem_addr, const void* gptr, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr), "l"(gptr),
               "r"(src_size)
               : "memory");
}

/// Closes the group of cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ---------------------------------------------------------------------------
// Special functions and warp shuffles
// ---------------------------------------------------------------------------

/// 2^x (MUFU.EX2; flushes denormals, exp2(-inf) = +0, rel. error ~2^-22).
__device__ __forceinline__ float exp2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// log2(x) (MUFU.LG2; log2(0) = -inf).
__device__ __forceinline__ float log2_approx(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// 1 / x (full-range reciprocal).
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ float fmax(float a, float b) {
  float r;
  asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

/// Butterfly shuffle over the whole warp: the value of lane (lane ^ lane_mask).
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
               : "=f"(r)
               : "f"(v), "r"(lane_mask));
  return r;
}

/// True on every lane if `pred` is true on any lane of the warp.
__device__ __forceinline__ bool warp_any(bool pred) {
  unsigned r;
  asm volatile(
      "{ .reg .pred p, q; setp.ne.u32 p, %1, 0; vote.sync.any.pred q, p, 0xffffffff; selp.u32 %0, 1, 0, q; }"
      : "=r"(r)
      : "r"(unsigned(pred)));
  return r != 0;
}

/// Max / sum over the 4 lanes of a quad (lanes that share g): the lanes that
/// hold one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmax(v, shfl_xor(v, 1));
  return fmax(v, shfl_xor(v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

// ---------------------------------------------------------------------------
// Added for the backward kernels (templates/bwd_mma.cuh)
// ---------------------------------------------------------------------------

/// Copies 4 bytes, or writes 4 zero bytes when `valid` is false (src-size 0).
/// .ca: 4-byte copies may not bypass L1.
__device__ __forceinline__ void cp_async_4(unsigned smem_addr, const void* gptr, bool valid) {
  const int src_size = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr), "l"(gptr),
               "r"(src_size)
               : "memory");
}

/// Atomic (relaxed, no return) fp32 add of two adjacent floats: one
/// RED.E.ADD.F32x2 on sm_90, half the atomic instructions of two scalar adds.
/// `gptr` must be 8-byte aligned.
__device__ __forceinline__ void red_add_v2_f32(float* gptr, float x0, float x1) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(gptr), "f"(x0), "f"(x1) : "memory");
#else
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(gptr), "f"(x0) : "memory");
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(gptr + 1), "f"(x1) : "memory");
#endif
}

/// Makes this thread's ordinary shared-memory stores visible to the async
/// proxy (bulk copies): needed before the barrier after which a bulk copy
/// reads them.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// gmem[0, bytes) += smem[0, bytes) as f32, element-wise, done by the bulk-copy
/// engine (sm_90): one instruction instead of bytes / 8 RED.F32x2, and the adds
/// are performed at L2. Both addresses 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gptr, unsigned smem_addr, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(gptr),
               "r"(smem_addr), "r"(bytes)
               : "memory");
#endif
}

/// Closes this thread's group of bulk copies issued since the last commit.
__device__ __forceinline__ void bulk_commit() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

/// Waits until at most kPending of this thread's bulk groups still read
/// shared memory (their sources may then be overwritten).
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
#endif
}

/// Waits until at most kPending of this thread's bulk groups are incomplete
/// (their global writes done).
template <int kPending>
__device__ __forceinline__ void bulk_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}

}  // namespace ptx
}  // namespace flashjit
