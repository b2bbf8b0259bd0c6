#include "compiler/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "compiler/tile_config.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace flashjit {

const char* to_string(Direction d) { return d == Direction::kFwd ? "fwd" : "bwd"; }

const char* to_string(DType d) {
  switch (d) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
  }
  return "?";
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kNative: return "native";
    case Precision::kTF32: return "tf32";
    case Precision::kIEEE: return "ieee";
  }
  return "?";
}

const char* to_string(SeqPadding p) { return p == SeqPadding::kEven ? "even" : "padded"; }

const char* to_string(FwdSchedule s) {
  switch (s) {
    case FwdSchedule::kAuto: return "auto";
    case FwdSchedule::kPersistent: return "persistent";
    case FwdSchedule::kPersistentDynamic: return "dynamic";
    case FwdSchedule::kOneTilePerCta: return "tiles";
    case FwdSchedule::kStreamK: return "streamk";
  }
  return "?";
}

Result<FwdSchedule> parse_fwd_schedule(std::string_view text) {
  for (FwdSchedule s : {FwdSchedule::kAuto, FwdSchedule::kPersistent, FwdSchedule::kPersistentDynamic,
                        FwdSchedule::kOneTilePerCta, FwdSchedule::kStreamK}) {
    if (text == to_string(s)) return s;
  }
  return make_error(Status::kInvalidArgument,
                    fmt::format("forward schedule must be auto, persistent, dynamic, tiles or streamk; got '{}'", text));
}

const char* to_string(Arch a) {
  switch (a) {
    case Arch::kSm80: return "sm80";
    case Arch::kSm86: return "sm86";
    case Arch::kSm89: return "sm89";
    case Arch::kSm90: return "sm90";
    case Arch::kSm90a: return "sm90a";
  }
  return "?";
}

const char* nvrtc_arch_name(Arch a) {
  switch (a) {
    case Arch::kSm80: return "sm_80";
    case Arch::kSm86: return "sm_86";
    case Arch::kSm89: return "sm_89";
    case Arch::kSm90: return "sm_90";
    case Arch::kSm90a: return "sm_90a";
  }
  return "?";
}

int dtype_size(DType d) { return d == DType::kF32 ? 4 : 2; }

Result<Arch> arch_from_compute_capability(int major, int minor, bool hopper_features) {
  const int cc = major * 10 + minor;
  if (cc == 80) return Arch::kSm80;
  if (cc == 86 || cc == 87) return Arch::kSm86;
  if (cc == 89) return Arch::kSm89;
  if (cc == 90) return hopper_features ? Arch::kSm90a : Arch::kSm90;
  // Newer GPUs run sm_90 cubins? No: cubins are not forward compatible across
  // major versions, so refuse rather than fail at module load.
  return make_error(Status::kUnsupportedArch,
                    fmt::format("compute capability {}.{} is not supported; flashjit generates "
                                "kernels for sm_80, sm_86, sm_89 and sm_90",
                                major, minor));
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::kF16;
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::kF32;
  return std::nullopt;
}

std::optional<Arch> parse_arch(std::string_view s) {
  for (Arch a : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90, Arch::kSm90a}) {
    if (s == to_string(a)) return a;
  }
  return std::nullopt;
}

std::string KernelSpec::to_string() const {
  std::string dtype_field = flashjit::to_string(dtype);
  if (dtype == DType::kF32) dtype_field += flashjit::to_string(precision);
  std::string s = fmt::format("{}_{}_d{}_{}_{}_{}", flashjit::to_string(direction), dtype_field,
                              head_dim, causal ? "causal" : "noncausal",
                              flashjit::to_string(padding), flashjit::to_string(arch));
  if (direction == Direction::kBwd) s += deterministic ? "_det" : "_atomic";
  if (!tile.empty()) {
    s += fmt::format("_bm{}_bn{}_w{}_s{}", tile.block_m, tile.block_n, tile.num_warps,
                     tile.num_stages);
    if (tile.wgmma) s += "_wg";
    if (tile.stream_k) s += "_sk";
  }
  return s;
}

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// "d128" -> 128 given prefix "d"; false if the field is not prefix + digits.
bool parse_prefixed_int(std::string_view field, std::string_view prefix, int* value) {
  if (field.substr(0, prefix.size()) != prefix || field.size() == prefix.size()) return false;
  auto digits = field.substr(prefix.size());
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *value);
  return ec == std::errc() && ptr == digits.data() + digits.size();
}

Error spec_error(std::string_view text, std::string what) {
  return make_error(Status::kInvalidSpec,
                    fmt::format("cannot parse spec '{}': {} (expected e.g. "
                                "fwd_bf16_d128_noncausal_even_sm90[_bm128_bn64_w4_s2], "
                                "fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s2_wg or "
                                "bwd_bf16_d128_noncausal_padded_sm90_atomic[_bm64_bn128_w8_s2])",
                                text, what));
}

}  // namespace

Result<TileConfig> parse_tile_config(std::string_view text) {
  const auto f = split(text, '_');
  TileConfig tile;
  if (f.size() >= 5 && f[4] == "wg") tile.wgmma = true;
  if (f.size() == 6 && tile.wgmma && f[5] == "sk") tile.stream_k = true;
  if (f.size() != (tile.stream_k ? 6u : tile.wgmma ? 5u : 4u) || !parse_prefixed_int(f[0], "bm", &tile.block_m) ||
      !parse_prefixed_int(f[1], "bn", &tile.block_n) || !parse_prefixed_int(f[2], "w", &tile.num_warps) ||
      !parse_prefixed_int(f[3], "s", &tile.num_stages)) {
    return make_error(Status::kInvalidSpec,
                      fmt::format("the tile suffix must be bm<M>_bn<N>_w<warps>_s<stages>[_wg[_sk]]; got '{}'", text));
  }
  return tile;
}

Result<KernelSpec> KernelSpec::parse(std::string_view text, bool* names_tile) {
  const auto f = split(text, '_');
  KernelSpec spec;
  size_t i = 0;
  auto next = [&]() -> std::string_view { return i < f.size() ? f[i++] : std::string_view(); };

  auto dir = next();
  if (dir == "fwd") spec.direction = Direction::kFwd;
  else if (dir == "bwd") spec.direction = Direction::kBwd;
  else return spec_error(text, fmt::format("direction must be fwd or bwd; got '{}'", dir));

  auto dt = next();
  if (dt == "bf16") { spec.dtype = DType::kBF16; spec.precision = Precision::kNative; }
  else if (dt == "f16") { spec.dtype = DType::kF16; spec.precision = Precision::kNative; }
  else if (dt == "f32tf32") { spec.dtype = DType::kF32; spec.precision = Precision::kTF32; }
  else if (dt == "f32ieee") { spec.dtype = DType::kF32; spec.precision = Precision::kIEEE; }
  else return spec_error(text, fmt::format("dtype must be bf16, f16, f32tf32 or f32ieee; got '{}'", dt));

  if (!parse_prefixed_int(next(), "d", &spec.head_dim)) {
    return spec_error(text, "third field must be the head dim, e.g. d128");
  }

  auto causal = next();
  if (causal == "causal") spec.causal = true;
  else if (causal == "noncausal") spec.causal = false;
  else return spec_error(text, fmt::format("mask must be causal or noncausal; got '{}'", causal));

  auto pad = next();
  if (pad == "even") spec.padding = SeqPadding::kEven;
  else if (pad == "padded") spec.padding = SeqPadding::kPadded;
  else return spec_error(text, fmt::format("padding must be even or padded; got '{}'", pad));

  auto arch = next();
  if (auto a = parse_arch(arch)) spec.arch = *a;
  else return spec_error(text, fmt::format("arch must be sm80, sm86, sm89, sm90 or sm90a; got '{}'", arch));

  if (spec.direction == Direction::kBwd) {
    auto mode = next();
    if (mode == "det") spec.deterministic = true;
    else if (mode == "atomic") spec.deterministic = false;
    else return spec_error(text, fmt::format("bwd mode must be det or atomic; got '{}'", mode));
  }

  if (names_tile) *names_tile = i < f.size();
  if (i < f.size()) {
    const size_t tile_start = size_t(f[i].data() - text.data());
    auto tile = parse_tile_config(text.substr(tile_start));
    if (!tile) return spec_error(text, tile.error().message);
    spec.tile = *tile;
  } else {
    spec.tile = choose_tile_config(spec);
  }
  if (auto v = spec.validate(); !v) return v.error();
  return spec;
}

Result<void> KernelSpec::validate() const {
  bool hd_ok = false;
  for (int d : kSupportedHeadDims) hd_ok = hd_ok || d == head_dim;
  if (!hd_ok) {
    return make_error(Status::kUnsupportedHeadDim,
                      fmt::format("head_dim must be one of 32, 64, 96, 128, 256; got {}", head_dim));
  }
  if (dtype != DType::kF32 && precision != Precision::kNative) {
    return make_error(Status::kUnsupportedDType,
                      fmt::format("precision {} applies to float32 inputs only; {} inputs use native "
                                  "(fp32 accumulation)",
                                  flashjit::to_string(precision), flashjit::to_string(dtype)));
  }
  if (dtype == DType::kF32 && precision == Precision::kNative) {
    return make_error(Status::kUnsupportedDType,
                      "float32 inputs need precision tf32 or ieee; got native");
  }
  if (direction == Direction::kFwd && deterministic) {
    return make_error(Status::kInvalidSpec,
                      "deterministic applies to the backward pass only (the forward is always deterministic)");
  }
  if (!tile.empty()) {
    if (auto v = validate_tile_config(*this); !v) return v;
  }
  return {};
}

bool wgmma_supported(const KernelSpec& spec) {
  if (spec.direction != Direction::kFwd) return false;
  // f32 through TF32 wgmma; exact f32 (3xTF32) stays on mma.sync. A TF32
  // head_dim 256 Q tile alone would be 128 KiB of shared memory.
  if (spec.dtype == DType::kF32) {
    return spec.precision == Precision::kTF32 && (spec.head_dim == 64 || spec.head_dim == 128);
  }
  return spec.head_dim == 64 || spec.head_dim == 128 || spec.head_dim == 256;
}

bool needs_v_transpose(const KernelSpec& spec) { return spec.tile.wgmma && spec.dtype == DType::kF32; }

KernelSpec preferred_spec(KernelSpec spec, bool allow_wgmma) {
  if (is_sm90(spec.arch)) {
    // sm90a code runs only on sm_90 itself; the mma.sync kernels need none of
    // it, so they stay sm90 and their cache entries are shared.
    spec.arch = allow_wgmma && wgmma_supported(spec) ? Arch::kSm90a : Arch::kSm90;
  }
  spec.tile = choose_tile_config(spec);
  return spec;
}

std::vector<KernelSpec> launch_specs(const KernelSpec& spec) {
  std::vector<KernelSpec> out;
  auto add = [&](const KernelSpec& s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  add(spec);
  const KernelSpec preferred = preferred_spec(spec);
  add(preferred);
  if (preferred.tile.wgmma) {
    for (const TileConfig& t : fwd_wgmma_launch_tiles(preferred)) {
      KernelSpec alt = preferred;
      alt.tile = t;
      add(alt);
    }
  }
  return out;
}

uint64_t KernelSpec::hash() const {
  const std::string s = to_string();
  return XXH64(s.data(), s.size(), 0);
}

namespace {

// all_paths: also the mma.sync spec where the Hopper kernel is preferred.
std::vector<KernelSpec> grid(Arch arch, const std::vector<int>& head_dims, bool with_f16,
                             bool with_det, bool all_paths) {
  struct Math { DType dtype; Precision precision; };
  std::vector<Math> maths = {{DType::kBF16, Precision::kNative},
                             {DType::kF32, Precision::kTF32},
                             {DType::kF32, Precision::kIEEE}};
  if (with_f16) maths.insert(maths.begin() + 1, {DType::kF16, Precision::kNative});
  std::vector<KernelSpec> out;
  for (Direction dir : {Direction::kFwd, Direction::kBwd}) {
    for (const Math& m : maths) {
      for (int hd : head_dims) {
        for (bool causal : {false, true}) {
          for (SeqPadding pad : {SeqPadding::kEven, SeqPadding::kPadded}) {
            for (bool det : {false, true}) {
              if (det && (dir == Direction::kFwd || !with_det)) continue;
              KernelSpec s;
              s.direction = dir;
              s.dtype = m.dtype;
              s.precision = m.precision;
              s.head_dim = hd;
              s.causal = causal;
              s.padding = pad;
              s.arch = arch;
              s.deterministic = det;
              const KernelSpec preferred = preferred_spec(s);
              // preferred, then the tiles a key length may pick beside the policy's.
              for (const KernelSpec& k : launch_specs(preferred)) out.push_back(k);
              if (all_paths && preferred.tile.wgmma) out.push_back(preferred_spec(s, false));
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<KernelSpec> seed_grid_specs(Arch arch) {
  // The seed runs bf16 and float32 (flashjit: tf32; flashjit_ieee: exact),
  // head_dim 64 and 128, causal 0/1, seq 128..8192 (multiples of every tile:
  // even) and 600, 1500, 3000 (padded), fwd and fwd_bwd (default atomic dQ);
  // each as the runtime prefers it on `arch`.
  return grid(arch, {64, 128}, /*with_f16=*/false, /*with_det=*/false, /*all_paths=*/false);
}

std::vector<KernelSpec> all_supported_specs(Arch arch) {
  return grid(arch, {32, 64, 96, 128, 256}, /*with_f16=*/true, /*with_det=*/true, /*all_paths=*/true);
}

}  // namespace flashjit
