// The public C++ API: validation, spec selection and launches.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <mutex>
#include <random>

#include "compiler/tile_config.h"
#include "runtime/bwd_plan.h"
#include "runtime/flashjit.h"
#include "runtime/jit.h"
#include "templates/params.cuh"

namespace flashjit {

const char* version() { return FLASHJIT_VERSION; }

TensorView bshd(const void* data, int batch, int seq, int heads, int head_dim) {
  (void)batch;
  const int64_t head = head_dim, row = int64_t(heads) * head_dim;
  return TensorView{const_cast<void*>(data), row * seq, row, head};
}

TensorView bhsd(const void* data, int batch, int seq, int heads, int head_dim) {
  (void)batch;
  const int64_t row = head_dim, head = int64_t(seq) * head_dim;
  return TensorView{const_cast<void*>(data), head * heads, row, head};
}

namespace {

// Kernels load 16 bytes per thread with cp.async: base pointers and every
// stride must keep rows 16-byte aligned.
constexpr int kVectorBytes = 16;
// Grid dimensions y and z are limited to 65535 by the hardware.
constexpr int kMaxGridYZ = 65535;

Result<void> validate_problem(const Problem& p) {
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16 && p.dtype != DType::kF32) {
    return make_error(Status::kUnsupportedDType,
                      fmt::format("dtype must be bf16, f16 or f32; got enum value {}", int(p.dtype)));
  }
  if (p.dtype != DType::kF32 && p.precision != Precision::kNative) {
    return make_error(Status::kUnsupportedDType,
                      fmt::format("precision {} applies to float32 inputs only; {} uses native",
                                  to_string(p.precision), to_string(p.dtype)));
  }
  bool hd_ok = false;
  for (int d : kSupportedHeadDims) hd_ok = hd_ok || d == p.head_dim;
  if (!hd_ok) {
    return make_error(Status::kUnsupportedHeadDim,
                      fmt::format("head_dim must be one of 32, 64, 96, 128, 256; got {}", p.head_dim));
  }
  auto positive = [](const char* name, int v, int max) -> Result<void> {
    if (v <= 0) return make_error(Status::kInvalidSize, fmt::format("{} must be positive; got {}", name, v));
    if (v > max) return make_error(Status::kInvalidSize, fmt::format("{} must be at most {}; got {}", name, max, v));
    return {};
  };
  if (auto r = positive("batch", p.batch, kMaxGridYZ); !r) return r;
  if (auto r = positive("heads", p.heads, kMaxGridYZ); !r) return r;
  if (auto r = positive("seqlen_q", p.seqlen_q, 1 << 30); !r) return r;
  if (auto r = positive("seqlen_k", p.seqlen_k, 1 << 30); !r) return r;
  if (!std::isfinite(p.scale) || p.scale < 0.f) {
    return make_error(Status::kInvalidArgument,
                      fmt::format("scale must be finite and >= 0 (0 means 1/sqrt(head_dim)); got {}", p.scale));
  }
  if (p.seqlens_k && reinterpret_cast<uintptr_t>(p.seqlens_k) % alignof(int) != 0) {
    return make_error(Status::kMisalignedPointer,
                      fmt::format("seqlens_k must be 4-byte aligned; got {}", static_cast<const void*>(p.seqlens_k)));
  }
  return {};
}

Result<void> validate_tensor(const char* name, const TensorView& t, const Problem& p, int seq) {
  if (!t.data) return make_error(Status::kNullPointer, fmt::format("{}.data is null", name));
  if (reinterpret_cast<uintptr_t>(t.data) % kVectorBytes != 0) {
    return make_error(Status::kMisalignedPointer,
                      fmt::format("{}.data must be {}-byte aligned; got {}", name, kVectorBytes, t.data));
  }
  const int64_t vec = kVectorBytes / dtype_size(p.dtype);  // elements per 16 bytes
  struct Stride { const char* axis; int64_t value; int extent; };
  const Stride strides[] = {{"batch_stride", t.batch_stride, p.batch},
                            {"seq_stride", t.seq_stride, seq},
                            {"head_stride", t.head_stride, p.heads}};
  for (const Stride& s : strides) {
    if (s.value < 0 || s.value % vec != 0) {
      return make_error(Status::kUnsupportedStride,
                        fmt::format("{}.{} must be a non-negative multiple of {} elements (16 bytes of "
                                    "{}); got {}",
                                    name, s.axis, vec, to_string(p.dtype), s.value));
    }
    if (s.value == 0 && s.extent > 1) {
      return make_error(Status::kUnsupportedStride,
                        fmt::format("{}.{} is 0 but that axis has {} entries (broadcast is not supported)",
                                    name, s.axis, s.extent));
    }
  }
  if (t.seq_stride != 0 && t.seq_stride < p.head_dim && seq > 1) {
    return make_error(Status::kUnsupportedStride,
                      fmt::format("{}.seq_stride {} is smaller than head_dim {}: rows would overlap",
                                  name, t.seq_stride, p.head_dim));
  }
  return {};
}

// Outputs must not alias themselves: sorted by stride, each axis must step
// past everything the smaller axes span (else two threads write one element).
Result<void> validate_output(const char* name, const TensorView& t, const Problem& p, int seq) {
  if (auto r = validate_tensor(name, t, p, seq); !r) return r;
  struct Axis { const char* axis; int64_t stride; int64_t extent; };
  Axis axes[] = {{"batch_stride", t.batch_stride, p.batch},
                 {"seq_stride", t.seq_stride, seq},
                 {"head_stride", t.head_stride, p.heads}};
  std::sort(std::begin(axes), std::end(axes), [](const Axis& a, const Axis& b) { return a.stride < b.stride; });
  int64_t span = p.head_dim;  // elements covered by the axes inside this one
  for (const Axis& a : axes) {
    if (a.extent <= 1) continue;
    if (a.stride < span) {
      return make_error(Status::kUnsupportedStride,
                        fmt::format("output {}.{} = {} overlaps the {} elements spanned by the inner "
                                    "axes: outputs may not alias",
                                    name, a.axis, a.stride, span));
    }
    span = a.stride * a.extent;
  }
  return {};
}

Result<void> validate_lse(const char* name, const void* lse) {
  if (lse && reinterpret_cast<uintptr_t>(lse) % alignof(float) != 0) {
    return make_error(Status::kMisalignedPointer,
                      fmt::format("{} must be 4-byte aligned; got {}", name, lse));
  }
  return {};
}

Problem normalized(Problem p) {
  if (p.dtype == DType::kF32 && p.precision == Precision::kNative) p.precision = Precision::kTF32;
  if (p.scale == 0.f) p.scale = 1.f / std::sqrt(float(p.head_dim));
  return p;
}

// log2(e): the kernels compute exp(x) as exp2(x * log2(e)).
constexpr float kLog2e = 1.4426950408889634f;

void set_strides(const TensorView& t, long long* batch, long long* row, long long* head) {
  *batch = t.batch_stride;
  *row = t.seq_stride;
  *head = t.head_stride;
}

// The fields FwdParams and BwdParams share: sizes, the lse layout, the scale.
template <class Params>
void set_problem(const Problem& n, Params* params) {
  params->seqlens_k = n.seqlens_k;
  // lse is [B, H, Sq], contiguous.
  params->lse_head_stride = n.seqlen_q;
  params->lse_batch_stride = int64_t(n.heads) * n.seqlen_q;
  params->batch = n.batch;
  params->heads = n.heads;
  params->seqlen_q = n.seqlen_q;
  params->seqlen_k = n.seqlen_k;
  params->scale = n.scale;
  params->scale_log2 = n.scale * kLog2e;
}

}  // namespace

struct Context::Impl {
  ContextOptions options;
  Arch arch = Arch::kSm90;
  bool have_device = false;
  int sm_count = 0;  ///< the persistent Hopper forward launches one CTA per SM
  int l2_bytes = 0;  ///< the causal Hopper forward groups its tiles to stay in L2
  Error device_error;
  std::unique_ptr<Jit> jit;
  // Stream-ordered pool for per-call scratch (V^T of the TF32 Hopper
  // forward), created on first use.
  std::mutex pool_mutex;
  driver::MemPool pool = nullptr;

  ~Impl() { driver::mem_pool_destroy(pool); }

  // Makes the device's context current on this thread.
  Result<void> device_ready() {
    if (!have_device) return device_error;
    return driver::init(options.device);
  }

  Result<driver::MemPool> scratch_pool() {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (pool == nullptr) {
      auto created = driver::mem_pool_create(options.device);
      if (!created) return created.error();
      pool = *created;
    }
    return pool;
  }
};

Context::Context(ContextOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

Context::~Context() = default;

Result<std::unique_ptr<Context>> Context::create(ContextOptions options) {
  if (options.device < 0) {
    return make_error(Status::kInvalidArgument,
                      fmt::format("device must be >= 0; got {}", options.device));
  }
  std::unique_ptr<Context> ctx(new Context(std::move(options)));
  Impl& impl = *ctx->impl_;
  // A GPU is optional: without one the context still compiles into the cache.
  if (auto r = driver::init(impl.options.device); r) {
    auto info = driver::device_info(impl.options.device);
    if (!info) return info.error();
    auto arch = arch_from_compute_capability(info->cc_major, info->cc_minor);
    if (!arch && !impl.options.arch) return arch.error();
    impl.arch = arch ? *arch : *impl.options.arch;
    impl.sm_count = info->sm_count;
    impl.l2_bytes = info->l2_bytes;
    impl.have_device = true;
  } else {
    impl.device_error = r.error();
  }
  if (impl.options.arch) impl.arch = *impl.options.arch;
  if (const char* env = std::getenv("FLASHJIT_FORCE_MMA"); env != nullptr && std::string(env) == "1") {
    impl.options.force_mma = true;
  }
  if (const char* env = std::getenv("FLASHJIT_FWD_TILE"); env != nullptr && *env != '\0') {
    auto tile = parse_tile_config(env);
    if (!tile) return make_error(Status::kInvalidArgument, "FLASHJIT_FWD_TILE: " + tile.error().message);
    impl.options.fwd_tile = *tile;
  }
  if (const char* env = std::getenv("FLASHJIT_FWD_SCHEDULE"); env != nullptr && *env != '\0') {
    auto sched = parse_fwd_schedule(env);
    if (!sched) return make_error(Status::kInvalidArgument, "FLASHJIT_FWD_SCHEDULE: " + sched.error().message);
    impl.options.fwd_schedule = *sched;
  }
  impl.jit = std::make_unique<Jit>(impl.options.cache, impl.options.on_warning, impl.options.on_compile);
  return ctx;
}

Arch Context::arch() const { return impl_->arch; }
DiskCache& Context::disk_cache() { return impl_->jit->disk(); }

namespace {

// The spec of an already validated problem. `allow_wgmma`: the Hopper
// forward may be chosen (see preferred_spec); `schedule` the one requested,
// which decides whether its tile may be one that splits tiles (stream-K).
Result<KernelSpec> make_spec(const Problem& problem, Direction direction, bool deterministic, Arch arch,
                             bool allow_wgmma, int sm_count = 0,
                             const std::optional<TileConfig>& fwd_tile = std::nullopt,
                             FwdSchedule schedule = FwdSchedule::kAuto) {
  const Problem p = normalized(problem);
  KernelSpec spec;
  spec.direction = direction;
  spec.dtype = p.dtype;
  spec.precision = p.precision;
  spec.head_dim = p.head_dim;
  spec.causal = p.causal;
  spec.arch = arch;
  spec.deterministic = direction == Direction::kBwd && deterministic;
  spec = preferred_spec(spec, allow_wgmma);
  if (direction == Direction::kFwd && spec.tile.wgmma) {
    const bool split_tiles =
        !p.seqlens_k && (schedule == FwdSchedule::kAuto || schedule == FwdSchedule::kStreamK);
    spec.tile = fwd_wgmma_tile_for_shape(
        spec, FwdShape{p.seqlen_q, p.seqlen_k, (long long)p.batch * p.heads, split_tiles}, sm_count);
  }
  if (direction == Direction::kFwd && fwd_tile) {
    // A tile applies only to its own kernel family: an mma.sync tile never
    // replaces the Hopper kernel's, nor a "_wg" tile the mma.sync kernel's.
    KernelSpec tuned = spec;
    tuned.tile = *fwd_tile;
    if (fwd_tile->wgmma == spec.tile.wgmma && validate_tile_config(tuned)) spec = tuned;
  }
  // Even only if both lengths are multiples of the tile (which does not
  // depend on the padding) and every batch entry has all seqlen_k keys.
  const bool even = !p.seqlens_k && p.seqlen_q % spec.tile.block_m == 0 &&
                    p.seqlen_k % spec.tile.block_n == 0;
  spec.padding = even ? SeqPadding::kEven : SeqPadding::kPadded;
  if (auto r = spec.validate(); !r) return r.error();  // the policy's tile fits the arch
  return spec;
}

// q, k and v of either direction.
Result<void> validate_inputs(const TensorView& q, const TensorView& k, const TensorView& v, const Problem& p) {
  if (auto r = validate_tensor("q", q, p, p.seqlen_q); !r) return r;
  if (auto r = validate_tensor("k", k, p, p.seqlen_k); !r) return r;
  return validate_tensor("v", v, p, p.seqlen_k);
}

driver::TmaElement tma_element(DType d) {
  return d == DType::kBF16 ? driver::TmaElement::kBF16
         : d == DType::kF16 ? driver::TmaElement::kF16
                            : driver::TmaElement::kF32;
}

// One TMA descriptor: the tensor as (D, S, H, B), innermost first, with the
// view's strides, and a box of 128 bytes of columns x `box_rows`.
Result<void> encode_map(const TensorView& t, const Problem& p, int seq, unsigned box_rows,
                        TmaDescriptor* out) {
  const uint64_t es = dtype_size(p.dtype);
  const uint64_t dims[4] = {uint64_t(p.head_dim), uint64_t(seq), uint64_t(p.heads), uint64_t(p.batch)};
  uint64_t strides[3] = {uint64_t(t.seq_stride) * es, uint64_t(t.head_stride) * es,
                         uint64_t(t.batch_stride) * es};
  // An axis of extent 1 may have stride 0 (never stepped); the TMA wants a
  // non-zero multiple of 16, and any such value addresses the same data.
  uint64_t span = uint64_t(p.head_dim) * es;
  for (int i = 0; i < 3; ++i) span = std::max(span, strides[i] * dims[i + 1]);
  for (int i = 0; i < 3; ++i) {
    if (dims[i + 1] == 1 && strides[i] == 0) strides[i] = (span + 15) / 16 * 16;
  }
  const unsigned box_cols = unsigned(128 / es);  // 128 bytes: the 128-byte swizzle's row
  const unsigned box[4] = {box_cols, box_rows, 1, 1};
  return driver::encode_tensor_map_4d(out, tma_element(p.dtype), t.data, dims, strides, box);
}

// V^T of the TF32 Hopper forward (templates/v_transpose.cuh): [B, H, D,
// padded_k] f32, keys padded to the 32-key boxes the kernel loads.
constexpr int kVtKeyBox = 32;
int vt_padded_keys(const Problem& n) { return (n.seqlen_k + kVtKeyBox - 1) / kVtKeyBox * kVtKeyBox; }
size_t vt_bytes(const Problem& n) {
  return size_t(n.batch) * n.heads * n.head_dim * vt_padded_keys(n) * sizeof(float);
}

Result<void> encode_vt_map(const void* vt, const Problem& n, TmaDescriptor* out) {
  const uint64_t keys = uint64_t(vt_padded_keys(n)), d = uint64_t(n.head_dim);
  const uint64_t dims[4] = {keys, d, uint64_t(n.heads), uint64_t(n.batch)};
  const uint64_t strides[3] = {keys * 4, keys * d * 4, keys * d * n.heads * 4};
  const unsigned box[4] = {unsigned(kVtKeyBox), unsigned(d), 1, 1};
  return driver::encode_tensor_map_4d(out, driver::TmaElement::kF32, vt, dims, strides, box);
}

// The tensor maps of the Hopper forward (templates/fwd_wgmma.cuh); `vt` is
// V^T where the spec reads it (needs_v_transpose: f32), else unused (v is
// read as it is).
Result<void> encode_forward_maps(const ForwardArgs& a, const Problem& n, const KernelSpec& spec, const void* vt,
                                 FwdTmaParams* out) {
  constexpr unsigned kConsumerRows = 64;  // the O box: one consumer warpgroup's rows
  if (auto r = encode_map(a.q, n, n.seqlen_q, spec.tile.block_m, &out->tma_q); !r) return r;
  if (auto r = encode_map(a.k, n, n.seqlen_k, spec.tile.block_n, &out->tma_k); !r) return r;
  if (needs_v_transpose(spec)) {
    if (auto r = encode_vt_map(vt, n, &out->tma_v); !r) return r;
  } else {
    if (auto r = encode_map(a.v, n, n.seqlen_k, spec.tile.block_n, &out->tma_v); !r) return r;
  }
  return encode_map(a.o, n, n.seqlen_q, kConsumerRows, &out->tma_o);
}

// The Hopper forward's grid: tiles, the schedule that runs, CTAs, and under
// stream-K the tiles split by K/V steps.
struct HopperGrid {
  long long tiles = 0;
  FwdSchedule schedule = FwdSchedule::kOneTilePerCta;
  long long ctas = 0;
  long long sk_tiles = 0;
  bool dynamic() const { return schedule == FwdSchedule::kPersistentDynamic; }
};

// Scratch of the Hopper forward, each part 256-byte aligned: the dynamic
// schedule's tile counter; stream-K's flags (8 bytes per CTA and consumer)
// and partial tiles (FwdTmaParams); (f32) V^T.
constexpr size_t kScratchAlign = 256;
size_t align_up(size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }
size_t counter_bytes(const HopperGrid& g) { return g.dynamic() ? kScratchAlign : 0; }
size_t consumers(const KernelSpec& spec) { return size_t(spec.tile.block_m) / 64; }  // warpgroups of 64 rows
size_t sk_flag_bytes(const KernelSpec& spec, const HopperGrid& g) {
  return g.sk_tiles > 0 ? align_up(size_t(g.ctas) * consumers(spec) * sizeof(unsigned long long)) : 0;
}
size_t sk_partial_bytes(const KernelSpec& spec, const HopperGrid& g) {
  constexpr size_t kConsumerThreads = 128;
  const size_t values = size_t(spec.head_dim) / 2 + 4;  // O registers, row max and sums (FwdWgmmaKernel)
  return g.sk_tiles > 0 ? align_up(size_t(g.ctas) * consumers(spec) * values * kConsumerThreads * sizeof(float))
                        : 0;
}
size_t sk_flags_offset(const HopperGrid& g) { return counter_bytes(g); }
size_t sk_partials_offset(const KernelSpec& spec, const HopperGrid& g) {
  return sk_flags_offset(g) + sk_flag_bytes(spec, g);
}
size_t vt_offset(const KernelSpec& spec, const HopperGrid& g) {
  return sk_partials_offset(spec, g) + sk_partial_bytes(spec, g);
}

HopperGrid hopper_grid(const KernelSpec& spec, const Problem& n, FwdSchedule requested, int sm_count) {
  HopperGrid g;
  g.tiles = (long long)((n.seqlen_q + spec.tile.block_m - 1) / spec.tile.block_m) * n.heads * n.batch;
  g.schedule = requested == FwdSchedule::kAuto ? fwd_wgmma_schedule(spec, g.tiles, sm_count) : requested;
  // Without an SM count (never on a device that launches) every tile gets a CTA.
  if (sm_count <= 0) g.schedule = FwdSchedule::kOneTilePerCta;
  g.ctas = g.schedule == FwdSchedule::kOneTilePerCta ? g.tiles : std::min<long long>(g.tiles, sm_count);
  if (g.schedule == FwdSchedule::kStreamK) {
    // Split tiles need every tile to have the same K/V steps: one key length.
    g.sk_tiles = fwd_wgmma_stream_k(spec) && !n.seqlens_k ? fwd_stream_k_tiles(g.tiles, g.ctas) : 0;
    // The kernel counts the run's K/V steps in an int.
    const long long steps = (n.seqlen_k + spec.tile.block_n - 1) / spec.tile.block_n;
    if (g.sk_tiles * steps >= std::numeric_limits<int>::max()) g.sk_tiles = 0;
    if (g.sk_tiles == 0) g.schedule = FwdSchedule::kPersistent;
  }
  return g;
}

size_t hopper_scratch_bytes(const KernelSpec& spec, const Problem& n, const HopperGrid& g) {
  return vt_offset(spec, g) + (needs_v_transpose(spec) ? vt_bytes(n) : 0);
}

// Stream-K's flags hold the launch's epoch when a part is written, so they
// need no zeroing: epochs are unique in the process, and start at a random
// 64-bit value so no stale word in reused memory matches one by chance.
unsigned long long next_stream_k_epoch() {
  static std::atomic<unsigned long long> epoch{[] {
    std::random_device rd;
    return (static_cast<unsigned long long>(rd()) << 32 | rd()) | (1ull << 63);
  }()};
  return epoch.fetch_add(1, std::memory_order_relaxed);
}

// Frees stream-ordered scratch when the launch path leaves, on every path.
struct ScratchGuard {
  driver::DevicePtr ptr = 0;
  driver::Stream stream = nullptr;
  ~ScratchGuard() {
    if (ptr != 0) (void)driver::mem_free_async(ptr, stream);
  }
};

}  // namespace

Result<KernelSpec> Context::spec_for(const Problem& problem, Direction direction, bool deterministic) {
  if (auto r = validate_problem(problem); !r) return r.error();
  return make_spec(problem, direction, deterministic, impl_->arch, !impl_->options.force_mma, impl_->sm_count,
                   impl_->options.fwd_tile, impl_->options.fwd_schedule);
}

Result<CompileRecord> Context::compile(const KernelSpec& spec) {
  if (auto r = spec.validate(); !r) return r.error();
  const KernelSpec full = with_default_tile(spec);
  CompileRecord record;
  auto cubin = impl_->jit->cubin(full, &record);
  if (!cubin) return cubin.error();
  if (record.outcome != CacheOutcome::kMemoryHit && impl_->options.on_compile) {
    impl_->options.on_compile(record);
  }
  return record;
}

Result<CompileRecord> Context::load(const KernelSpec& spec) {
  if (auto r = spec.validate(); !r) return r.error();
  if (auto r = impl_->device_ready(); !r) return r.error();
  CompileRecord record;
  auto mod = impl_->jit->load(with_default_tile(spec), impl_->options.device, &record);
  if (!mod) return mod.error();
  return record;
}

Result<LaunchInfo> Context::forward(const ForwardArgs& a) {
  if (auto r = validate_problem(a.problem); !r) return r.error();
  const Problem& p = a.problem;
  if (auto r = validate_inputs(a.q, a.k, a.v, p); !r) return r.error();
  if (auto r = validate_output("o", a.o, p, p.seqlen_q); !r) return r.error();
  if (auto r = validate_lse("lse", a.lse); !r) return r.error();
  auto spec = make_spec(p, Direction::kFwd, false, impl_->arch, !impl_->options.force_mma, impl_->sm_count,
                        impl_->options.fwd_tile, impl_->options.fwd_schedule);
  if (!spec) return spec.error();
  if (auto r = impl_->device_ready(); !r) return r.error();

  const Problem n = normalized(p);
  FwdTmaParams tma_params{};
  ScratchGuard scratch{0, a.stream};
  driver::DevicePtr vt = 0;
  HopperGrid hopper;
  if (spec->tile.wgmma) {
    // Stream-ordered scratch, written just before the launch: the dynamic
    // schedule's tile counter (zeroed) and, for f32 (TF32), V^T. Batch/head/
    // key counts keep the V^T kernel's grid within limits: validate_problem.
    Result<void> ready{};
    hopper = hopper_grid(*spec, n, impl_->options.fwd_schedule, impl_->sm_count);
    if (hopper.tiles + hopper.ctas >= std::numeric_limits<int>::max()) {
      ready = make_error(Status::kInvalidArgument,
                         fmt::format("{} tiles overflow the Hopper kernel's int tile index", hopper.tiles));
    } else if (const size_t bytes = hopper_scratch_bytes(*spec, n, hopper); bytes > 0) {
      auto pool = impl_->scratch_pool();
      if (!pool) ready = pool.error();
      else {
        auto ptr = driver::mem_alloc_async(bytes, *pool, a.stream);
        if (!ptr) return make_error(ptr.error().status, fmt::format("{}: forward scratch: {}", spec->to_string(),
                                                                    ptr.error().message));
        scratch.ptr = *ptr;
        vt = scratch.ptr + vt_offset(*spec, hopper);
      }
    }
    if (ready) ready = encode_forward_maps(a, n, *spec, reinterpret_cast<const void*>(vt), &tma_params);
    if (!ready) {
      // The TMA cannot describe these tensors (or the driver is too old):
      // the mma.sync kernel serves every layout the validation accepts.
      if (impl_->options.on_warning) {
        impl_->options.on_warning(fmt::format("{}: {}; using the mma.sync kernel", spec->to_string(),
                                              ready.error().message));
      }
      spec = make_spec(p, Direction::kFwd, false, impl_->arch, false);
      if (!spec) return spec.error();
    }
  }

  LaunchInfo info;
  info.spec = *spec;
  auto mod = impl_->jit->load(*spec, impl_->options.device, &info.compile);
  if (!mod) return mod.error();

  FwdParams params{};
  params.q = a.q.data;
  params.k = a.k.data;
  params.v = a.v.data;
  params.o = a.o.data;
  params.lse = a.lse;
  set_strides(a.q, &params.q_batch_stride, &params.q_row_stride, &params.q_head_stride);
  set_strides(a.k, &params.k_batch_stride, &params.k_row_stride, &params.k_head_stride);
  set_strides(a.v, &params.v_batch_stride, &params.v_row_stride, &params.v_head_stride);
  set_strides(a.o, &params.o_batch_stride, &params.o_row_stride, &params.o_head_stride);
  set_problem(n, &params);

  const TileConfig& t = spec->tile;
  driver::Dim3 grid{unsigned((n.seqlen_q + t.block_m - 1) / t.block_m), unsigned(n.heads),
                    unsigned(n.batch)};
  if (t.wgmma) {
    // Tiles are numbered in the kernel (fwd_wgmma.cuh): a 1-D grid of
    // hopper.ctas CTAs, persistent or one per tile.
    grid = {unsigned(hopper.ctas), 1, 1};
    info.schedule = hopper.schedule;
    tma_params.tiles = int(hopper.tiles);  // tiles + grid < 2^31: checked above
    const long long kv_bytes = 2LL * n.batch * n.heads * n.seqlen_k * n.head_dim * dtype_size(spec->dtype);
    tma_params.causal_group = fwd_wgmma_causal_group(kv_bytes, n.batch * n.heads, impl_->l2_bytes);
    if (hopper.sk_tiles > 0) {
      tma_params.sk_tiles = int(hopper.sk_tiles);
      tma_params.sk_epoch = next_stream_k_epoch();
      tma_params.sk_flags = reinterpret_cast<unsigned long long*>(scratch.ptr + sk_flags_offset(hopper));
      tma_params.sk_partials = reinterpret_cast<float*>(scratch.ptr + sk_partials_offset(*spec, hopper));
    }
    if (hopper.dynamic()) {
      tma_params.tile_counter = reinterpret_cast<int*>(scratch.ptr);
      if (auto r = driver::memset_d32_async(scratch.ptr, 0u, 1, a.stream); !r) {
        return make_error(r.error().status, fmt::format("{}: zeroing the tile counter: {}", spec->to_string(),
                                                        r.error().message));
      }
    }
  }
  driver::Dim3 block{unsigned(threads_per_block(*spec)), 1, 1};
  if (needs_v_transpose(*spec)) {
    const driver::Function* vt_kernel = (*mod)->function("flashjit_fwd_vt");
    if (vt_kernel == nullptr) return make_error(Status::kInternal, spec->to_string() + ": no flashjit_fwd_vt kernel");
    VtParams vp{};
    vp.v = static_cast<const float*>(a.v.data);
    vp.vt = reinterpret_cast<float*>(vt);
    vp.v_batch_stride = params.v_batch_stride;
    vp.v_row_stride = params.v_row_stride;
    vp.v_head_stride = params.v_head_stride;
    vp.heads = n.heads;
    vp.seqlen_k = n.seqlen_k;
    vp.padded_k = vt_padded_keys(n);
    void* vt_args[] = {&vp};
    const driver::Dim3 vt_grid{unsigned(vp.padded_k / kVtKeyBox * (n.head_dim / kVtKeyBox)), unsigned(n.heads),
                               unsigned(n.batch)};
    if (auto r = driver::launch(*vt_kernel, vt_grid, driver::Dim3{32, 8, 1}, 0, a.stream, vt_args);
        !r) {
      return make_error(r.error().status, fmt::format("launching the V^T kernel of {}: {}", spec->to_string(),
                                                      r.error().message));
    }
  }
  tma_params.p = params;
  info.grid_ctas = (long long)grid.x * grid.y * grid.z;
  void* args[] = {spec->tile.wgmma ? static_cast<void*>(&tma_params) : static_cast<void*>(&params)};
  if (auto r = driver::launch((*mod)->functions.front(), grid, block, (*mod)->smem_bytes, a.stream, args); !r) {
    return make_error(r.error().status, fmt::format("launching {}: {}", spec->to_string(), r.error().message));
  }
  return info;
}

Result<size_t> Context::forward_scratch_size(const Problem& problem) {
  auto spec = spec_for(problem, Direction::kFwd);
  if (!spec) return spec.error();
  if (!spec->tile.wgmma) return size_t(0);
  const Problem n = normalized(problem);
  return hopper_scratch_bytes(*spec, n, hopper_grid(*spec, n, impl_->options.fwd_schedule, impl_->sm_count));
}

Result<size_t> Context::backward_workspace_size(const Problem& problem, bool deterministic) {
  auto spec = spec_for(problem, Direction::kBwd, deterministic);
  if (!spec) return spec.error();
  return bwd_workspace_bytes(*spec, BwdShape{problem.batch, problem.heads, problem.seqlen_q,
                                             problem.seqlen_k});
}

namespace {

// Everything backward() checks before it touches the device; returns its spec.
Result<KernelSpec> check_backward_args(const BackwardArgs& a, Arch arch) {
  if (auto r = validate_problem(a.problem); !r) return r.error();
  const Problem& p = a.problem;
  if (auto r = validate_inputs(a.q, a.k, a.v, p); !r) return r.error();
  if (auto r = validate_tensor("o", a.o, p, p.seqlen_q); !r) return r.error();
  if (auto r = validate_tensor("dout", a.dout, p, p.seqlen_q); !r) return r.error();
  if (auto r = validate_output("dq", a.dq, p, p.seqlen_q); !r) return r.error();
  if (auto r = validate_output("dk", a.dk, p, p.seqlen_k); !r) return r.error();
  if (auto r = validate_output("dv", a.dv, p, p.seqlen_k); !r) return r.error();
  if (!a.lse) return make_error(Status::kNullPointer, "lse is null (backward needs the forward's lse)");
  if (auto r = validate_lse("lse", a.lse); !r) return r.error();
  auto spec = make_spec(p, Direction::kBwd, a.deterministic, arch, false);
  if (!spec) return spec.error();
  const size_t need = bwd_workspace_bytes(*spec, BwdShape{p.batch, p.heads, p.seqlen_q, p.seqlen_k});
  if (need > 0 && !a.workspace) {
    return make_error(Status::kNullPointer,
                      fmt::format("workspace is null; this problem needs {} bytes", need));
  }
  if (a.workspace_bytes < need) {
    return make_error(Status::kInvalidArgument,
                      fmt::format("workspace_bytes must be at least {} for this problem; got {}", need,
                                  a.workspace_bytes));
  }
  if (a.workspace && reinterpret_cast<uintptr_t>(a.workspace) % kVectorBytes != 0) {
    return make_error(Status::kMisalignedPointer,
                      fmt::format("workspace must be {}-byte aligned; got {}", kVectorBytes, a.workspace));
  }
  return spec;
}

}  // namespace

Result<LaunchInfo> Context::backward(const BackwardArgs& a) {
  auto spec = check_backward_args(a, impl_->arch);
  if (!spec) return spec.error();
  const Problem& p = a.problem;
  const BwdShape shape{p.batch, p.heads, p.seqlen_q, p.seqlen_k};
  if (auto r = impl_->device_ready(); !r) return r.error();

  LaunchInfo info;
  info.spec = *spec;
  auto mod = impl_->jit->load(*spec, impl_->options.device, &info.compile);
  if (!mod) return mod.error();

  const Problem n = normalized(p);
  BwdParams params{};
  params.q = a.q.data; params.k = a.k.data; params.v = a.v.data;
  params.o = a.o.data; params.dout = a.dout.data; params.lse = a.lse;
  params.dq = a.dq.data; params.dk = a.dk.data; params.dv = a.dv.data;
  set_strides(a.q, &params.q_batch_stride, &params.q_row_stride, &params.q_head_stride);
  set_strides(a.k, &params.k_batch_stride, &params.k_row_stride, &params.k_head_stride);
  set_strides(a.v, &params.v_batch_stride, &params.v_row_stride, &params.v_head_stride);
  set_strides(a.o, &params.o_batch_stride, &params.o_row_stride, &params.o_head_stride);
  set_strides(a.dout, &params.dout_batch_stride, &params.dout_row_stride, &params.dout_head_stride);
  set_strides(a.dq, &params.dq_batch_stride, &params.dq_row_stride, &params.dq_head_stride);
  set_strides(a.dk, &params.dk_batch_stride, &params.dk_row_stride, &params.dk_head_stride);
  set_strides(a.dv, &params.dv_batch_stride, &params.dv_row_stride, &params.dv_head_stride);
  set_problem(n, &params);
  bwd_assign_workspace(*spec, shape, a.workspace, &params);

  for (const BwdLaunch& step : bwd_launch_plan(*spec, shape)) {
    const driver::Function* fn = (*mod)->function(step.kernel);
    if (!fn) return make_error(Status::kInternal, fmt::format("{} has no kernel {}", spec->to_string(), step.kernel));
    void* args[] = {&params};
    auto r = driver::launch(*fn, driver::Dim3{step.grid.x, step.grid.y, step.grid.z},
                            driver::Dim3{step.block.x, step.block.y, step.block.z},
                            step.smem_bytes, a.stream, args);
    if (!r) {
      return make_error(r.error().status, fmt::format("launching {} of {}: {}", step.kernel,
                                                      spec->to_string(), r.error().message));
    }
  }
  return info;
}

Result<ForwardBackwardInfo> Context::forward_backward(const ForwardBackwardArgs& a) {
  ForwardArgs f;
  f.problem = a.problem;
  f.q = a.q; f.k = a.k; f.v = a.v; f.o = a.o;
  f.lse = a.lse;
  f.stream = a.stream;
  BackwardArgs b;
  b.problem = a.problem;
  b.q = a.q; b.k = a.k; b.v = a.v; b.o = a.o; b.dout = a.dout;
  b.lse = a.lse;
  b.dq = a.dq; b.dk = a.dk; b.dv = a.dv;
  b.workspace = a.workspace;
  b.workspace_bytes = a.workspace_bytes;
  b.deterministic = a.deterministic;
  b.stream = a.stream;
  // Every check, and both kernels loaded, before the first launch: an error
  // never leaves o and lse written with the gradients not.
  auto bwd_spec = check_backward_args(b, impl_->arch);
  if (!bwd_spec) return bwd_spec.error();
  if (auto r = validate_output("o", a.o, a.problem, a.problem.seqlen_q); !r) return r.error();
  for (const TensorView* g : {&a.dq, &a.dk, &a.dv}) {
    if (g->data == a.o.data) {
      return make_error(Status::kInvalidArgument, "o must not alias dq, dk or dv (forward_backward writes both)");
    }
  }
  if (auto r = impl_->device_ready(); !r) return r.error();
  auto fwd_spec = spec_for(a.problem, Direction::kFwd);
  if (!fwd_spec) return fwd_spec.error();
  // The records of these loads are what getting the kernels cost; the
  // launches below then hit the in-memory cache.
  CompileRecord fwd_record, bwd_record;
  if (auto m = impl_->jit->load(*fwd_spec, impl_->options.device, &fwd_record); !m) return m.error();
  if (auto m = impl_->jit->load(*bwd_spec, impl_->options.device, &bwd_record); !m) return m.error();
  ForwardBackwardInfo info;
  auto fr = forward(f);
  if (!fr) return fr.error();
  info.forward = std::move(*fr);
  // forward() may have fallen back to mma.sync (a layout the TMA cannot
  // describe): then its own record is the one of the kernel that ran.
  if (info.forward.spec == *fwd_spec) info.forward.compile = fwd_record;
  auto br = backward(b);
  if (!br) return br.error();
  info.backward = std::move(*br);
  info.backward.compile = bwd_record;
  return info;
}

}  // namespace flashjit
