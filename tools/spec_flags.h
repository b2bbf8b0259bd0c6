// Spec selection shared by the command-line tools (flashjit, flashjit-warmup):
// a spec is either its canonical string (KernelSpec::parse; the tile suffix may
// be omitted) or a set of flags (--direction fwd --dtype bf16 --head-dim 128
// --causal --padded --arch sm90 ...). Header-only: each tool is one source file.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "compiler/spec.h"
#include "compiler/tile_config.h"

namespace flashjit::tools {

/// Looks a name up among the to_string() names of an enum's values.
template <class Enum, size_t N>
Result<Enum> parse_enum(const std::string& text, const char* what, const Enum (&values)[N]) {
  std::string names;
  for (Enum e : values) {
    if (text == to_string(e)) return e;
    names += names.empty() ? "" : ", ";
    names += to_string(e);
  }
  return make_error(Status::kInvalidSpec,
                    fmt::format("--{} must be one of {}; got '{}'", what, names, text));
}

inline constexpr Direction kDirections[] = {Direction::kFwd, Direction::kBwd};
inline constexpr Precision kPrecisions[] = {Precision::kNative, Precision::kTF32, Precision::kIEEE};
inline constexpr Arch kArchs[] = {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90, Arch::kSm90a};

inline Result<Arch> parse_arch(const std::string& text) { return parse_enum(text, "arch", kArchs); }

/// The spec flags of one (sub)command.
struct SpecFlags {
  std::string direction = "fwd";
  std::string dtype = "bf16";
  std::string precision;  ///< default: native for 16-bit dtypes, tf32 for f32
  int head_dim = 128;
  bool causal = false;
  bool even = false;
  bool padded = false;
  std::string arch = "sm90";
  bool deterministic = false;
  int block_m = 0, block_n = 0, num_warps = 0, num_stages = 0;
  std::vector<CLI::Option*> options;  ///< to tell whether any flag was given
  CLI::Option* arch_option = nullptr;

  /// Adds the flags to `app`, under the help heading `g`.
  void add_to(CLI::App* app, const char* g = "Spec (instead of a spec string)") {
    options = {
        app->add_option("--direction", direction, "fwd or bwd")->group(g),
        app->add_option("--dtype", dtype, "bf16, f16 or f32")->group(g),
        app->add_option("--precision", precision, "native (16-bit), tf32 or ieee (f32)")->group(g),
        app->add_option("--head-dim", head_dim, "32, 64, 96, 128 or 256")->group(g),
        app->add_flag("--causal", causal, "causal mask")->group(g),
        app->add_flag("--even", even, "lengths are multiples of the tile (no bounds checks)")->group(g),
        app->add_flag("--padded", padded, "any lengths (the default)")->group(g),
        app->add_flag("--deterministic", deterministic, "bwd: no atomics")->group(g),
        app->add_option("--block-m", block_m, "tile rows of Q (default: the tile policy)")->group(g),
        app->add_option("--block-n", block_n, "tile rows of K/V")->group(g),
        app->add_option("--warps", num_warps, "warps per CTA")->group(g),
        app->add_option("--stages", num_stages, "pipeline stages")->group(g),
    };
    options[5]->excludes(options[6]);
    arch_option = app->add_option("--arch", arch, "sm80, sm86, sm89, sm90 or sm90a")->group(g);
  }

  /// True if any spec flag other than --arch was given on the command line.
  bool given_besides_arch() const {
    for (const CLI::Option* o : options) {
      if (o->count() > 0) return true;
    }
    return false;
  }
  /// True if any spec flag was given on the command line.
  bool given() const { return given_besides_arch() || (arch_option && arch_option->count() > 0); }

  /// The spec the flags describe, tile from the policy unless all four tile flags are given.
  Result<KernelSpec> spec() const {
    KernelSpec s;
    auto dir = parse_enum(direction, "direction", kDirections);
    if (!dir) return dir.error();
    s.direction = *dir;
    auto dt = parse_dtype(dtype);
    if (!dt) {
      return make_error(Status::kInvalidSpec,
                        fmt::format("--dtype must be bf16, f16 or f32; got '{}'", dtype));
    }
    s.dtype = *dt;
    if (precision.empty()) {
      s.precision = s.dtype == DType::kF32 ? Precision::kTF32 : Precision::kNative;
    } else {
      auto p = parse_enum(precision, "precision", kPrecisions);
      if (!p) return p.error();
      s.precision = *p;
    }
    s.head_dim = head_dim;
    s.causal = causal;
    s.padding = even ? SeqPadding::kEven : SeqPadding::kPadded;
    auto a = parse_arch(arch);
    if (!a) return a.error();
    s.arch = *a;
    s.deterministic = deterministic;
    const int tile_given = (block_m > 0) + (block_n > 0) + (num_warps > 0) + (num_stages > 0);
    if (tile_given == 4) {
      s.tile = TileConfig{block_m, block_n, num_warps, num_stages};
    } else if (tile_given != 0) {
      return make_error(Status::kInvalidSpec,
                        "give all of --block-m, --block-n, --warps, --stages, or none");
    } else {
      s.tile = choose_tile_config(s);
    }
    if (auto v = s.validate(); !v) return v.error();
    return s;
  }
};

/// The spec named by a positional spec string or by the flags (not both).
inline Result<KernelSpec> resolve_spec(const std::string& text, const SpecFlags& flags) {
  if (!text.empty()) {
    if (flags.given()) {
      return make_error(Status::kInvalidArgument,
                        "give a spec string or spec flags, not both");
    }
    return KernelSpec::parse(text);
  }
  return flags.spec();
}

}  // namespace flashjit::tools
