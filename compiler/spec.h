// KernelSpec: the one plain struct that names a specialization. It validates,
// prints a canonical string that names every field, parses that string back and
// hashes it. The string is the cache file name, the log tag and the bench label:
//   fwd_bf16_d128_noncausal_even_sm90_bm128_bn64_w4_s2
//   fwd_f32tf32_d64_causal_padded_sm90_bm64_bn64_w4_s2
//   bwd_bf16_d128_causal_padded_sm90_atomic_bm64_bn128_w8_s2
//   fwd_bf16_d128_noncausal_padded_sm90a_bm128_bn128_w12_s2_wg
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/status.h"

namespace flashjit {

enum class Direction { kFwd, kBwd };
enum class DType { kBF16, kF16, kF32 };
/// How the matrix products are computed. 16-bit inputs always use kNative
/// (fp32 accumulation); fp32 inputs choose kTF32 (TF32 tensor cores, what JAX
/// uses by default) or kIEEE (error-compensated 3xTF32, matches float32 math).
enum class Precision { kNative, kTF32, kIEEE };
/// kEven: Sq and Sk are multiples of the tile, so the kernel has no bounds
/// checks. kPadded: any length; only the last Q and K tiles are masked.
enum class SeqPadding { kEven, kPadded };
/// Target architecture. kSm90a enables Hopper-only instructions (wgmma, setmaxnreg).
enum class Arch { kSm80, kSm86, kSm89, kSm90, kSm90a };

/// Tile configuration. Chosen by choose_tile_config() (tile_config.h) unless a
/// spec string names it explicitly. Meaning per direction:
///   fwd: block_m = Q rows per CTA, block_n = K/V rows per pipeline step.
///   bwd: block_n = K/V rows per CTA (dK, dV resident), block_m = Q rows per step.
struct TileConfig {
  int block_m = 0;
  int block_n = 0;
  int num_warps = 0;
  int num_stages = 0;
  /// fwd on sm90a only: the Hopper kernel (templates/fwd_wgmma.cuh: TMA,
  /// wgmma, a producer and two consumer warpgroups). Spec suffix "_wg".
  bool wgmma = false;
  /// fwd on sm90a, 16-bit non-causal only (with O's staging tile apart from
  /// Q): the kernel carries stream-K's split tiles (FwdSchedule::kStreamK),
  /// which cost the unsplit tiles 2.6-2.9% (run 65), so the policy picks it
  /// only where splitting pays (three consumers at head_dim 64). TF32
  /// non-causal kernels always carry it. Spec suffix "_wg_sk".
  bool stream_k = false;
  bool operator==(const TileConfig&) const = default;
  bool empty() const { return block_m == 0; }
};

/// How the Hopper forward (templates/fwd_wgmma.cuh) hands its (query block,
/// head, batch) tiles to CTAs. A launch choice, not part of the spec: one
/// kernel serves every schedule.
enum class FwdSchedule {
  kAuto,               ///< the tile policy's choice (fwd_wgmma_schedule)
  kPersistent,         ///< one CTA per SM; CTA i takes tiles i, i + SMs, ...
  kPersistentDynamic,  ///< one CTA per SM; each takes the next tile from a global counter
  kOneTilePerCta,      ///< one CTA per tile, scheduled by the hardware
  kStreamK,            ///< persistent, with the last round and a half of tiles split by K/V steps
};
const char* to_string(FwdSchedule s);
/// "auto", "persistent", "dynamic", "tiles" or "streamk".
Result<FwdSchedule> parse_fwd_schedule(std::string_view text);

/// One kernel specialization. Runtime values (lengths, batch, strides, scale,
/// per-batch key lengths) are kernel arguments, not spec fields.
struct KernelSpec {
  Direction direction = Direction::kFwd;
  DType dtype = DType::kBF16;
  Precision precision = Precision::kNative;
  int head_dim = 128;
  /// Causal mask. When Sq != Sk it is aligned to the bottom-right corner
  /// (FlashAttention >= 2.1, cuDNN): query i sees keys j <= i + Sk - Sq.
  bool causal = false;
  SeqPadding padding = SeqPadding::kPadded;
  Arch arch = Arch::kSm90;
  /// bwd only: no atomics, bitwise-identical results across runs.
  bool deterministic = false;
  TileConfig tile;

  bool operator==(const KernelSpec&) const = default;

  /// Canonical string naming every field (see the file comment).
  std::string to_string() const;
  /// Parses to_string()'s output. The tile suffix may be omitted, in which case
  /// the tile policy fills it in (`*names_tile`, when given, says which).
  /// Rejects unknown or missing fields with a message.
  static Result<KernelSpec> parse(std::string_view text, bool* names_tile = nullptr);
  /// Checks every field; the message names the field and the bad value.
  Result<void> validate() const;
  /// Stable 64-bit hash of to_string() (xxHash64, seed 0).
  uint64_t hash() const;
};

/// Parses a tile suffix without its leading '_': "bm128_bn64_w4_s2" or
/// "bm128_bn128_w12_s2_wg". Checks the syntax only (validate_tile_config
/// checks it against a spec).
Result<TileConfig> parse_tile_config(std::string_view text);

/// The head dims every kernel supports.
inline constexpr int kSupportedHeadDims[] = {32, 64, 96, 128, 256};

const char* to_string(Direction d);
const char* to_string(DType d);           ///< "bf16", "f16", "f32"
const char* to_string(Precision p);       ///< "native", "tf32", "ieee"
const char* to_string(SeqPadding p);      ///< "even", "padded"
const char* to_string(Arch a);            ///< "sm80", ..., "sm90a"
/// Bytes per element of a dtype.
int dtype_size(DType d);
/// The "-arch" value NVRTC takes: "sm_80", "sm_90a", ...
const char* nvrtc_arch_name(Arch a);
/// Arch from a device's compute capability; sm_90 devices get kSm90a when
/// `hopper_features` is true (the sm_90a instructions are then allowed).
Result<Arch> arch_from_compute_capability(int major, int minor, bool hopper_features = false);
/// Parses "bf16"/"bfloat16", "f16"/"fp16"/"float16", "f32"/"fp32"/"float32".
std::optional<DType> parse_dtype(std::string_view s);
/// Parses "sm80", "sm86", "sm89", "sm90", "sm90a".
std::optional<Arch> parse_arch(std::string_view s);

/// One list of what is supported: the spec grid of the seed benchmark
/// (../shared/seed/attention_h100.json): fwd and bwd, bf16 and fp32 (tf32 and
/// ieee), head_dim 64 and 128, causal and not, even and padded lengths, with
/// the tile policy's choice for `arch`. Used by flashjit-warmup --grid seed,
/// the benchmark driver and the parametrized tests.
std::vector<KernelSpec> seed_grid_specs(Arch arch);
/// True if the Hopper kernel (templates/fwd_wgmma.cuh) serves this spec's
/// direction, dtype and head_dim: the forward of bf16/f16 at head_dim 64, 128,
/// 256 and of f32 with TF32 math at head_dim 64, 128.
bool wgmma_supported(const KernelSpec& spec);
/// True for the Hopper kernel's float32 (TF32) specs: their module has a
/// second kernel, flashjit_fwd_vt, that writes V^T into scratch first.
bool needs_v_transpose(const KernelSpec& spec);
/// sm90 or sm90a: the H100/H200 family.
inline bool is_sm90(Arch a) { return a == Arch::kSm90 || a == Arch::kSm90a; }
/// The spec the runtime launches for `spec` on its GPU, tile from the policy.
/// On sm90/sm90a: the Hopper kernel (arch sm90a) where wgmma_supported and
/// `allow_wgmma`, else the mma.sync kernels (arch sm90). Other archs unchanged.
KernelSpec preferred_spec(KernelSpec spec, bool allow_wgmma = true);
/// Every kernel the runtime may launch for `spec` named without its tile, so
/// that a warm-up of that name leaves no launch to NVRTC: the spec itself
/// (what forcing the mma.sync path launches on sm90), preferred_spec's, and
/// each tile the Hopper forward may pick from the lengths
/// (fwd_wgmma_launch_tiles); in that order, without duplicates.
std::vector<KernelSpec> launch_specs(const KernelSpec& spec);
/// Every supported (direction, dtype, precision, head_dim, causal, padding)
/// combination for `arch`, tile config from the policy. For sm90 that is the
/// preferred spec of each (preferred_spec) and also, where the Hopper kernel
/// is preferred, the mma.sync spec that forcing the mma path selects.
std::vector<KernelSpec> all_supported_specs(Arch arch);

}  // namespace flashjit
