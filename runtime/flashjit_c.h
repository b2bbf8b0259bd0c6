/* flashjit's C API: FlashAttention kernels generated per specialization,
 * compiled at run time with NVRTC and kept in a disk cache.
 *
 * The shape is ggml's: an opaque handle, flashjit_noun_verb names, every call
 * returns a flashjit_status, flashjit_status_string() names a status and
 * flashjit_last_error() gives the calling thread's message for its last call.
 * Nothing here aborts, exits, throws or prints. Plain C99.
 *
 *   flashjit_context* ctx;
 *   if (flashjit_context_create(0, &ctx) != FLASHJIT_SUCCESS) {
 *     fprintf(stderr, "%s\n", flashjit_last_error());
 *   }
 *   flashjit_problem p = {FLASHJIT_DTYPE_BF16, FLASHJIT_PRECISION_NATIVE,
 *                         4, 8, 1500, 600, 128, 1, 0.0f, NULL};
 *   flashjit_status s = flashjit_forward(ctx, &p, &q, &k, &v, &o, lse, stream, NULL);
 *   flashjit_context_destroy(ctx);
 */
#ifndef FLASHJIT_C_H
#define FLASHJIT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A kernel cache (in memory and on disk) for one device. Thread-safe. */
typedef struct flashjit_context flashjit_context;

/** Status of every call. The values equal flashjit::Status and never change. */
typedef enum flashjit_status {
  FLASHJIT_SUCCESS = 0,
  FLASHJIT_ERROR_NULL_POINTER = 1,         /**< a required pointer argument is null */
  FLASHJIT_ERROR_UNSUPPORTED_DTYPE = 2,    /**< dtype / precision combination not supported */
  FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM = 3, /**< head_dim not in the supported list */
  FLASHJIT_ERROR_INVALID_SIZE = 4,         /**< batch, heads or a sequence length is not positive */
  FLASHJIT_ERROR_UNSUPPORTED_STRIDE = 5,   /**< head_dim not contiguous, or a stride not a multiple of the vector width */
  FLASHJIT_ERROR_MISALIGNED_POINTER = 6,   /**< a tensor pointer is not 16-byte aligned */
  FLASHJIT_ERROR_INVALID_SPEC = 7,         /**< a spec string does not parse, or a field is out of range */
  FLASHJIT_ERROR_UNSUPPORTED_ARCH = 8,     /**< the GPU architecture is not supported */
  FLASHJIT_ERROR_INVALID_ARGUMENT = 9,     /**< any other bad argument (scale, workspace size, flags) */
  FLASHJIT_ERROR_DRIVER_UNAVAILABLE = 10,  /**< libcuda.so.1 could not be loaded */
  FLASHJIT_ERROR_NO_DEVICE = 11,           /**< the driver loaded but there is no usable GPU */
  FLASHJIT_ERROR_NVRTC_UNAVAILABLE = 12,   /**< libnvrtc could not be loaded (needed on a cache miss) */
  FLASHJIT_ERROR_COMPILE_FAILED = 13,      /**< NVRTC rejected the generated source; the message has the log */
  FLASHJIT_ERROR_CUDA = 14,                /**< a CUDA driver call failed */
  FLASHJIT_ERROR_CACHE = 15,               /**< the disk cache could not be used */
  FLASHJIT_ERROR_OUT_OF_MEMORY = 16,       /**< an allocation failed */
  FLASHJIT_ERROR_INTERNAL = 17             /**< a bug in flashjit */
} flashjit_status;

/** Element type of q, k, v, o (and of the gradients). */
typedef enum flashjit_dtype {
  FLASHJIT_DTYPE_BF16 = 0,
  FLASHJIT_DTYPE_F16 = 1,
  FLASHJIT_DTYPE_F32 = 2
} flashjit_dtype;

/** How the matrix products are computed. bf16/f16 take NATIVE (fp32
 *  accumulation); f32 takes TF32 (TF32 tensor cores; NATIVE means TF32 too)
 *  or IEEE (error-compensated 3xTF32, matches float32 math). */
typedef enum flashjit_precision {
  FLASHJIT_PRECISION_NATIVE = 0,
  FLASHJIT_PRECISION_TF32 = 1,
  FLASHJIT_PRECISION_IEEE = 2
} flashjit_precision;

/** Where a kernel came from (flashjit_compile_info.cache_outcome). */
typedef enum flashjit_cache_outcome {
  FLASHJIT_CACHE_MEMORY_HIT = 0, /**< already in this context's memory */
  FLASHJIT_CACHE_DISK_HIT = 1,   /**< read from the disk cache */
  FLASHJIT_CACHE_COMPILED = 2    /**< generated and compiled with NVRTC */
} flashjit_cache_outcome;

/** A device tensor of shape [batch, seq, heads, head_dim] through strides in
 *  elements: element (b, s, h, d) is at data + b*batch_stride + s*seq_stride +
 *  h*head_stride + d. The head_dim axis is contiguous. */
typedef struct flashjit_tensor {
  void* data;
  int64_t batch_stride;
  int64_t seq_stride;
  int64_t head_stride;
} flashjit_tensor;

/** The attention problem: sizes and the kind of math. */
typedef struct flashjit_problem {
  flashjit_dtype dtype;
  flashjit_precision precision;
  int batch;
  int heads;
  int seqlen_q;
  int seqlen_k;
  int head_dim;
  /** Non-zero: causal mask, bottom-right aligned when seqlen_q != seqlen_k
   *  (query i sees keys j <= i + seqlen_k - seqlen_q). */
  int causal;
  /** Softmax scale; 0 means 1/sqrt(head_dim). */
  float scale;
  /** Optional device array [batch] of key lengths (each in [0, seqlen_k]); NULL: seqlen_k. */
  const int* seqlens_k;
} flashjit_problem;

/** What getting a launchable kernel cost (seconds), and its resources. */
typedef struct flashjit_compile_info {
  double codegen_s;  /**< spec -> CUDA source */
  double nvrtc_s;    /**< NVRTC compile (0 on a cache hit) */
  double disk_s;     /**< disk cache lookup and store */
  double load_s;     /**< module load and function lookup (0 when not loaded) */
  double compile_s;  /**< the sum of the above */
  int cache_outcome; /**< a flashjit_cache_outcome; -1 when the call failed */
  int registers;     /**< per thread, main kernel; -1 when unknown */
  int spill_bytes;   /**< local memory per thread (spills + stack), main kernel; -1 when unknown */
  char spec[160];    /**< canonical spec string, NUL-terminated */
} flashjit_compile_info;

/** Creates a context for CUDA device `device` (>= 0). Needs no GPU: without
 *  one, flashjit_compile still works and launches return
 *  FLASHJIT_ERROR_DRIVER_UNAVAILABLE or FLASHJIT_ERROR_NO_DEVICE. The disk
 *  cache is configured by the FLASHJIT_CACHE_* environment variables. */
flashjit_status flashjit_context_create(int device, flashjit_context** out);

/** Options of flashjit_context_create_ex. Zero-initialize, then set what you need. */
typedef struct flashjit_context_options {
  int device;              /**< CUDA device ordinal (>= 0) */
  const char* cache_dir;   /**< kernel cache directory; NULL: from FLASHJIT_CACHE_DIR etc. */
  int disable_disk_cache;  /**< nonzero: memory cache only */
  const char* arch;        /**< "sm80" .. "sm90a" to generate for; NULL: the device's */
  /** Called with each warning (unwritable cache, corrupt entry); the library never prints. */
  void (*on_warning)(const char* message, void* user_data);
  /** Called once per kernel request that was not an in-memory hit. */
  void (*on_compile)(const flashjit_compile_info* info, void* user_data);
  void* user_data;         /**< passed to both callbacks */
  /** Nonzero: never use the Hopper forward kernel (mma.sync everywhere), as
   *  FLASHJIT_FORCE_MMA=1 does. */
  int force_mma;
  /** Tile tuning: forward launches use this tile where it is valid for the
   *  spec, e.g. "bm128_bn128_w12_s3_wg" (as FLASHJIT_FWD_TILE); NULL: the policy's. */
  const char* fwd_tile;
  /** The Hopper forward's schedule: "persistent", "dynamic", "tiles" or "streamk" (as
   *  FLASHJIT_FWD_SCHEDULE); NULL or "auto": the tile policy's choice. */
  const char* fwd_schedule;
} flashjit_context_options;

/** Creates a context with options (see flashjit_context_options). */
flashjit_status flashjit_context_create_ex(const flashjit_context_options* options,
                                           flashjit_context** out);

/** Destroys a context and its loaded kernels. NULL is a no-op (like free()). */
flashjit_status flashjit_context_destroy(flashjit_context* ctx);

/** O = softmax(scale Q K^T + mask) V. q, k, v, o: device tensors of
 *  problem->dtype; `lse` (optional, may be NULL): device fp32 [batch, heads,
 *  seqlen_q], the natural-log log-sum-exp of each row, needed by the backward.
 *  `stream` is a CUstream (NULL: the legacy default stream). `info` may be NULL. */
flashjit_status flashjit_forward(flashjit_context* ctx, const flashjit_problem* problem,
                                 const flashjit_tensor* q, const flashjit_tensor* k,
                                 const flashjit_tensor* v, flashjit_tensor* o, float* lse,
                                 void* stream, flashjit_compile_info* info);

/** dQ, dK, dV from dO, using the forward's o and lse (required). `workspace`
 *  is device scratch of at least flashjit_backward_workspace_size() bytes.
 *  `deterministic` non-zero: no atomics, bitwise-identical results across runs. */
flashjit_status flashjit_backward(flashjit_context* ctx, const flashjit_problem* problem,
                                  const flashjit_tensor* q, const flashjit_tensor* k,
                                  const flashjit_tensor* v, const flashjit_tensor* o,
                                  const flashjit_tensor* dout, const float* lse,
                                  flashjit_tensor* dq, flashjit_tensor* dk, flashjit_tensor* dv,
                                  void* workspace, size_t workspace_bytes, int deterministic,
                                  void* stream, flashjit_compile_info* info);

/** flashjit_forward() then flashjit_backward() in one call: writes o and lse
 *  (both required), then dq, dk, dv. Every argument is checked and both kernels
 *  are loaded before the first launch. `fwd_info` and `bwd_info` may be NULL. */
flashjit_status flashjit_forward_backward(flashjit_context* ctx, const flashjit_problem* problem,
                                          const flashjit_tensor* q, const flashjit_tensor* k,
                                          const flashjit_tensor* v, flashjit_tensor* o, float* lse,
                                          const flashjit_tensor* dout, flashjit_tensor* dq,
                                          flashjit_tensor* dk, flashjit_tensor* dv, void* workspace,
                                          size_t workspace_bytes, int deterministic, void* stream,
                                          flashjit_compile_info* fwd_info,
                                          flashjit_compile_info* bwd_info);

/** Bytes of workspace flashjit_backward() needs for `problem`, in *out. */
flashjit_status flashjit_backward_workspace_size(flashjit_context* ctx,
                                                 const flashjit_problem* problem,
                                                 int deterministic, size_t* out);

/** Bytes flashjit_forward() takes per call from the context's own
 *  stream-ordered pool for `problem` (on the Hopper kernel: V^T of float32
 *  inputs, the dynamic schedule's tile counter, stream-K's split tiles; 0
 *  otherwise), in *out. For memory accounting only: the library
 *  allocates and frees it in stream order. */
flashjit_status flashjit_forward_scratch_size(flashjit_context* ctx, const flashjit_problem* problem,
                                              size_t* out);

/** The canonical spec string a forward (`backward` = 0) or backward (nonzero)
 *  of `problem` launches on this context (e.g. the Hopper kernel's
 *  "fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s2_wg"), into `spec`
 *  of `spec_len` bytes, NUL-terminated; FLASHJIT_ERROR_INVALID_ARGUMENT when
 *  it does not fit. Needs no GPU. */
flashjit_status flashjit_spec_for(flashjit_context* ctx, const flashjit_problem* problem, int backward,
                                  int deterministic, char* spec, size_t spec_len);

/** Compiles one spec (its canonical string, e.g. "fwd_bf16_d128_causal_padded_sm90";
 *  the tile suffix may be omitted, and the tile policy fills it in) into the
 *  caches without loading it: warms the disk cache, no GPU needed. `info` may
 *  be NULL. It compiles exactly that spec: on an sm_90 GPU most forwards launch
 *  the Hopper kernel (an "sm90a_..._wg" spec, its tile following the
 *  lengths at head_dim 64 and 128), so warm the strings flashjit_spec_for() returns for
 *  the problems you will run, or use flashjit-warmup, which expands a spec
 *  named without its tile to every kernel a call may launch for it. */
flashjit_status flashjit_compile(flashjit_context* ctx, const char* spec,
                                 flashjit_compile_info* info);

/** A short, stable name of a status ("null_pointer"); never NULL ("unknown
 *  status" for a value that is not a flashjit_status). */
const char* flashjit_status_string(flashjit_status status);

/** The message of the calling thread's most recent status-returning call:
 *  what went wrong, naming the argument and the value; "" after a success.
 *  Valid until that thread's next flashjit call. Never NULL. */
const char* flashjit_last_error(void);

/** flashjit's version ("0.1.0"). Never NULL. */
const char* flashjit_version(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FLASHJIT_C_H */
