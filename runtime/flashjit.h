// flashjit: FlashAttention kernels generated per specialization, compiled at
// run time with NVRTC, kept in a disk cache. The C++ API.
//
//   auto ctx = flashjit::Context::create().value();
//   flashjit::Problem p{.dtype = flashjit::DType::kBF16, .batch = 4, .heads = 8,
//                       .seqlen_q = 1500, .seqlen_k = 600, .head_dim = 128};
//   flashjit::ForwardArgs a{.problem = p,
//                           .q = flashjit::bshd(q, p.batch, p.seqlen_q, p.heads, p.head_dim), ...};
//   auto info = ctx->forward(a);   // Result<LaunchInfo>: compile_s, cache outcome
//
// Every call validates its inputs and returns a Result: nothing aborts, throws
// or prints. Device pointers are the caller's; streams are CUstream handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/spec.h"
#include "compiler/status.h"
#include "runtime/cache.h"

namespace flashjit {

/// flashjit's version string ("0.1.0").
const char* version();

/// A device tensor of shape [batch, seq, heads, head_dim] addressed through
/// strides in elements: element (b, s, h, d) is at data + b*batch_stride +
/// s*seq_stride + h*head_stride + d. The head_dim axis is contiguous.
struct TensorView {
  void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t seq_stride = 0;
  int64_t head_stride = 0;
};
/// A contiguous [B, S, H, D] tensor.
TensorView bshd(const void* data, int batch, int seq, int heads, int head_dim);
/// A contiguous [B, H, S, D] tensor.
TensorView bhsd(const void* data, int batch, int seq, int heads, int head_dim);

/// The attention problem: sizes and the kind of math.
struct Problem {
  DType dtype = DType::kBF16;
  /// kNative for bf16/f16; for f32: kTF32 (default when kNative is given) or kIEEE.
  Precision precision = Precision::kNative;
  int batch = 0;
  int heads = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  /// Bottom-right aligned when seqlen_q != seqlen_k: query i sees keys j <= i + Sk - Sq.
  bool causal = false;
  /// Softmax scale; 0 means 1/sqrt(head_dim).
  float scale = 0.f;
  /// Optional device array [batch] of int32 key lengths (each in [0, seqlen_k]).
  const int* seqlens_k = nullptr;
};

/// Compile timing of one kernel request (also given to the on_compile callback).
struct CompileRecord {
  std::string spec;         ///< canonical spec string
  std::string key;          ///< cache key hash (16 hex digits)
  CacheOutcome outcome = CacheOutcome::kMemoryHit;
  double codegen_s = 0;     ///< spec -> CUDA source
  double nvrtc_s = 0;       ///< NVRTC compile (0 on a cache hit)
  double disk_s = 0;        ///< disk cache lookup/store
  double load_s = 0;        ///< cuModuleLoadData + function lookup (0 when not loaded)
  double compile_s = 0;     ///< sum of the above: the cost of getting a launchable kernel
  int registers = -1;       ///< per thread, main kernel
  int spill_bytes = -1;     ///< local memory per thread (spills + stack), main kernel
  int smem_bytes = 0;       ///< dynamic shared memory of the main kernel
};

/// What a launch reports.
struct LaunchInfo {
  KernelSpec spec;
  CompileRecord compile;
  /// CTAs of the main kernel's grid, and for the Hopper forward the
  /// schedule that ran (ContextOptions::fwd_schedule; else kAuto).
  long long grid_ctas = 0;
  FwdSchedule schedule = FwdSchedule::kAuto;
};

struct ForwardArgs {
  Problem problem;
  TensorView q, k, v;  ///< inputs, dtype of problem.dtype
  TensorView o;        ///< output, same dtype
  /// Optional output [batch, heads, seqlen_q] fp32, natural-log log-sum-exp of
  /// each row's scaled scores (-inf for a row that sees no key). Needed by backward.
  float* lse = nullptr;
  void* stream = nullptr;  ///< CUstream; null = the legacy default stream
};

struct BackwardArgs {
  Problem problem;
  TensorView q, k, v, o, dout;  ///< inputs (o from the forward)
  const float* lse = nullptr;   ///< the forward's lse, required
  TensorView dq, dk, dv;        ///< outputs
  /// Device scratch of at least backward_workspace_size() bytes.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  /// No atomics: bitwise-identical results across runs (somewhat slower).
  bool deterministic = false;
  void* stream = nullptr;
};

/// Forward then backward in one call (a training step that already has dO, or a
/// benchmark): writes o and lse, then dq, dk, dv.
struct ForwardBackwardArgs {
  Problem problem;
  TensorView q, k, v;          ///< inputs
  TensorView o;                ///< forward output, then read by the backward
  float* lse = nullptr;        ///< required: [batch, heads, seqlen_q] fp32
  TensorView dout;             ///< gradient of o
  TensorView dq, dk, dv;       ///< outputs
  void* workspace = nullptr;   ///< at least backward_workspace_size() bytes
  size_t workspace_bytes = 0;
  bool deterministic = false;  ///< as in BackwardArgs
  void* stream = nullptr;
};

/// What forward_backward() reports: one LaunchInfo per direction.
struct ForwardBackwardInfo {
  LaunchInfo forward;
  LaunchInfo backward;
};

/// Options of a Context.
struct ContextOptions {
  int device = 0;
  CacheOptions cache = CacheOptions::from_env();
  /// Called once per kernel request that was not an in-memory hit.
  std::function<void(const CompileRecord&)> on_compile;
  /// Warnings (unwritable cache directory, corrupt entry). The library never prints.
  std::function<void(const std::string&)> on_warning;
  /// Use this arch instead of the device's (compile-only use without a GPU).
  std::optional<Arch> arch;
  /// Never use the Hopper forward kernel (wgmma, TMA): every spec takes the
  /// mma.sync kernels, as on pre-Hopper GPUs (to compare the two paths). The
  /// environment variable FLASHJIT_FORCE_MMA=1 sets it too.
  bool force_mma = false;
  /// Tile tuning: the forward uses this tile instead of the policy's wherever
  /// it is valid for the spec: an mma.sync tile only where the policy picks
  /// mma.sync, a "_wg" tile only where it picks the Hopper kernel, e.g.
  /// {128, 128, 12, 3, true}. The environment variable FLASHJIT_FWD_TILE
  /// (e.g. "bm128_bn128_w12_s3_wg"; "_wg_sk": a 16-bit non-causal kernel
  /// that can split tiles, stream-K) sets it too. Launch reports name the tile.
  std::optional<TileConfig> fwd_tile;
  /// How the Hopper forward hands its (query block, head, batch) tiles to
  /// CTAs (FwdSchedule); kAuto takes the tile policy's choice. The
  /// environment variable FLASHJIT_FWD_SCHEDULE=auto|persistent|dynamic|tiles|
  /// streamk sets it too (streamk runs as persistent where the launch cannot
  /// split tiles: causal, per-batch key lengths, 16-bit kernels without a
  /// "_sk" tile; under auto the policy picks such a tile only where the split
  /// pays, under persistent, dynamic or tiles never).
  FwdSchedule fwd_schedule = FwdSchedule::kAuto;
};

class Jit;

/// Owns the kernel caches (in memory and on disk) for one device. Thread-safe.
class Context {
 public:
  /// Never needs a GPU: a Context without one can still compile (warm the cache).
  static Result<std::unique_ptr<Context>> create(ContextOptions options = {});
  ~Context();

  /// O = softmax(scale QK^T + mask) V, and lse when asked.
  Result<LaunchInfo> forward(const ForwardArgs& args);
  /// dQ, dK, dV from dO, using the forward's O and lse.
  Result<LaunchInfo> backward(const BackwardArgs& args);
  /// forward() then backward(), every argument checked and both kernels
  /// loaded before the first launch.
  Result<ForwardBackwardInfo> forward_backward(const ForwardBackwardArgs& args);
  /// Bytes of workspace backward() needs for this problem.
  Result<size_t> backward_workspace_size(const Problem& problem, bool deterministic = false);
  /// Bytes forward() takes for this problem from the Context's own
  /// stream-ordered pool (cuMemAllocFromPoolAsync on the call's stream, freed
  /// in stream order after the launch; the pool keeps its memory for the
  /// next call): V^T for f32 inputs on the Hopper kernel, the tile counter
  /// of its dynamic schedule and the split tiles' parts and flags of its
  /// stream-K schedule (f32, about 70 KiB per SM at head_dim 128), else 0.
  Result<size_t> forward_scratch_size(const Problem& problem);

  /// The spec a problem maps to (padding from the lengths and tile, arch from the device;
  /// the Hopper forward's tile from the lengths, batch, heads and the device's SM count).
  Result<KernelSpec> spec_for(const Problem& problem, Direction direction, bool deterministic = false);
  /// Compiles `spec` into the caches without loading it (no GPU needed).
  Result<CompileRecord> compile(const KernelSpec& spec);
  /// Compiles (if needed) and loads `spec` on the device.
  Result<CompileRecord> load(const KernelSpec& spec);

  /// The architecture kernels are generated for.
  Arch arch() const;
  /// The disk cache (for tools).
  DiskCache& disk_cache();

 private:
  explicit Context(ContextOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashjit
