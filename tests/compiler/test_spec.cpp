#include <catch2/catch.hpp>

#include <set>

#include "compiler/spec.h"
#include "compiler/tile_config.h"

using namespace flashjit;

TEST_CASE("spec string names every field and round-trips", "[spec]") {
  for (Arch arch : {Arch::kSm80, Arch::kSm86, Arch::kSm89, Arch::kSm90, Arch::kSm90a}) {
    for (const KernelSpec& s : all_supported_specs(arch)) {
      const std::string text = s.to_string();
      auto parsed = KernelSpec::parse(text);
      INFO(text);
      REQUIRE(parsed.ok());
      CHECK(*parsed == s);
      CHECK(parsed->to_string() == text);
      CHECK(parsed->hash() == s.hash());
    }
  }
}

TEST_CASE("spec string format", "[spec]") {
  KernelSpec s;
  s.direction = Direction::kFwd;
  s.dtype = DType::kBF16;
  s.head_dim = 128;
  s.causal = true;
  s.padding = SeqPadding::kPadded;
  s.arch = Arch::kSm90;
  s.tile = {128, 64, 4, 2};
  CHECK(s.to_string() == "fwd_bf16_d128_causal_padded_sm90_bm128_bn64_w4_s2");
  s.dtype = DType::kF32;
  s.precision = Precision::kIEEE;
  s.causal = false;
  s.padding = SeqPadding::kEven;
  CHECK(s.to_string() == "fwd_f32ieee_d128_noncausal_even_sm90_bm128_bn64_w4_s2");
  s.direction = Direction::kBwd;
  s.deterministic = true;
  CHECK(s.to_string().rfind("bwd_f32ieee_d128_noncausal_even_sm90_det_", 0) == 0);
}

TEST_CASE("parse fills the tile from the policy when it is omitted", "[spec]") {
  auto s = KernelSpec::parse("fwd_bf16_d64_noncausal_even_sm90");
  REQUIRE(s.ok());
  CHECK_FALSE(s->tile.empty());
  CHECK(s->tile == choose_tile_config(*s));
}

TEST_CASE("parse rejects malformed strings with a message naming the field", "[spec]") {
  struct Bad { const char* text; const char* needle; Status status; };
  const Bad bad[] = {
      {"", "direction", Status::kInvalidSpec},
      {"fwdx_bf16_d128_noncausal_even_sm90", "direction", Status::kInvalidSpec},
      {"fwd_bf8_d128_noncausal_even_sm90", "dtype", Status::kInvalidSpec},
      {"fwd_f32_d128_noncausal_even_sm90", "dtype", Status::kInvalidSpec},
      {"fwd_bf16_128_noncausal_even_sm90", "head dim", Status::kInvalidSpec},
      {"fwd_bf16_d80_noncausal_even_sm90", "got 80", Status::kUnsupportedHeadDim},
      {"fwd_bf16_d128_maybe_even_sm90", "mask", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_odd_sm90", "padding", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm75", "arch", Status::kInvalidSpec},
      {"bwd_bf16_d128_causal_even_sm90", "bwd mode", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90_bm128", "tile suffix", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90_bm128_bn64_w4_s9", "num_stages", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90_bm100_bn64_w4_s2", "block_m", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90_bm128_bn64_w4_s2_xx", "tile suffix", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90_bm128_bn128_w12_s2_wg", "needs arch sm90a", Status::kInvalidSpec},
      {"fwd_f32ieee_d128_causal_even_sm90a_bm128_bn64_w12_s2_wg", "TF32 math (not ieee)", Status::kInvalidSpec},
      {"fwd_f32tf32_d128_causal_even_sm90a_bm128_bn128_w12_s2_wg", "shared memory", Status::kInvalidSpec},
      {"fwd_bf16_d96_causal_even_sm90a_bm128_bn128_w12_s2_wg", "head_dim 64, 128 or 256", Status::kInvalidSpec},
      {"fwd_f32tf32_d256_causal_even_sm90a_bm128_bn64_w12_s2_wg", "TF32 math (not ieee) at head_dim 64 or 128",
       Status::kInvalidSpec},
      {"bwd_bf16_d128_causal_even_sm90a_atomic_bm128_bn128_w12_s2_wg", "forward", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90a_bm64_bn128_w12_s2_wg", "block_m 128", Status::kInvalidSpec},
      {"fwd_bf16_d128_causal_even_sm90a_bm128_bn128_w8_s2_wg", "num_warps 12", Status::kInvalidSpec},
  };
  for (const Bad& b : bad) {
    INFO(b.text);
    auto s = KernelSpec::parse(b.text);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status() == b.status);
    CHECK_THAT(s.error().message, Catch::Contains(b.needle));
  }
  // The message's examples name a backward spec too, and that example parses.
  auto bwd = KernelSpec::parse("bwd_bf16_d128_noncausal_padded_sm90");
  REQUIRE_FALSE(bwd.ok());
  CHECK_THAT(bwd.error().message, Catch::Contains("bwd_bf16_d128_noncausal_padded_sm90_atomic"));
  CHECK(KernelSpec::parse("bwd_bf16_d128_noncausal_padded_sm90_atomic").ok());
  CHECK(KernelSpec::parse("bwd_bf16_d128_noncausal_padded_sm90_atomic_bm64_bn128_w8_s2").ok());
}

TEST_CASE("sm_90 prefers the Hopper forward for 16-bit and TF32 inputs at head_dim 64 and 128", "[spec]") {
  KernelSpec s;
  s.arch = Arch::kSm90;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int hd : {64, 128}) {
      s.dtype = dt;
      s.head_dim = hd;
      const KernelSpec hopper = preferred_spec(s);
      INFO(hopper.to_string());
      CHECK(hopper.arch == Arch::kSm90a);
      CHECK(hopper.tile.wgmma);
      CHECK(hopper.to_string().find(hd == 64 ? "_sm90a_bm128_bn192_w12_s3_wg" : "_sm90a_bm128_bn128_w12_s2_wg") != std::string::npos);
      const KernelSpec forced = preferred_spec(s, /*allow_wgmma=*/false);
      CHECK(forced.arch == Arch::kSm90);
      CHECK_FALSE(forced.tile.wgmma);
    }
  }
  // head_dim 256 (16-bit inputs): 80 keys per tile (run 52).
  s.head_dim = 256;
  CHECK(preferred_spec(s).to_string().find("_sm90a_bm128_bn80_w12_s2_wg") != std::string::npos);
  CHECK_FALSE(preferred_spec(s, /*allow_wgmma=*/false).tile.wgmma);
  // Everything else stays on the mma.sync kernels, compiled for sm_90.
  s.head_dim = 96;
  CHECK_FALSE(preferred_spec(s).tile.wgmma);
  CHECK(preferred_spec(s).arch == Arch::kSm90);
  // f32 with TF32 math: the Hopper kernel with smaller key tiles (twice the
  // bytes per element); exact f32 (3xTF32) stays on mma.sync.
  s.dtype = DType::kF32;
  s.precision = Precision::kTF32;
  for (int hd : {64, 128}) {
    s.head_dim = hd;
    const KernelSpec tf32 = preferred_spec(s);
    INFO(tf32.to_string());
    CHECK(tf32.arch == Arch::kSm90a);
    CHECK(tf32.to_string().find(hd == 64 ? "_sm90a_bm128_bn128_w12_s2_wg" : "_sm90a_bm128_bn64_w12_s2_wg") !=
          std::string::npos);
    CHECK(tf32.validate().ok());
  }
  s.precision = Precision::kIEEE;
  CHECK_FALSE(preferred_spec(s).tile.wgmma);
  CHECK(preferred_spec(s).arch == Arch::kSm90);
  s.dtype = DType::kBF16;
  s.precision = Precision::kNative;
  s.direction = Direction::kBwd;
  CHECK_FALSE(preferred_spec(s).tile.wgmma);
  // Other GPUs never get it.
  s.direction = Direction::kFwd;
  s.arch = Arch::kSm80;
  CHECK(preferred_spec(s).arch == Arch::kSm80);
  CHECK_FALSE(preferred_spec(s).tile.wgmma);
}

TEST_CASE("validate rejects unsupported combinations", "[spec]") {
  KernelSpec s;
  s.head_dim = 80;
  CHECK(s.validate().status() == Status::kUnsupportedHeadDim);
  CHECK_THAT(s.validate().error().message, Catch::Contains("got 80"));
  s.head_dim = 128;
  s.precision = Precision::kTF32;  // bf16 + tf32
  CHECK(s.validate().status() == Status::kUnsupportedDType);
  s.dtype = DType::kF32;
  s.precision = Precision::kNative;
  CHECK(s.validate().status() == Status::kUnsupportedDType);
  s.precision = Precision::kIEEE;
  CHECK(s.validate().ok());
  s.deterministic = true;  // fwd
  CHECK(s.validate().status() == Status::kInvalidSpec);
}

TEST_CASE("hash is stable and distinguishes specs", "[spec]") {
  std::set<uint64_t> hashes;
  const auto specs = all_supported_specs(Arch::kSm90);
  for (const KernelSpec& s : specs) hashes.insert(s.hash());
  CHECK(hashes.size() == specs.size());
  // Stability: the hash is xxh64 of the string, fixed across runs and builds.
  auto s = KernelSpec::parse("fwd_bf16_d128_noncausal_even_sm90_bm128_bn64_w4_s2");
  REQUIRE(s.ok());
  CHECK(s->hash() == s->hash());
  CHECK(s->hash() != KernelSpec::parse("fwd_bf16_d128_causal_even_sm90_bm128_bn64_w4_s2")->hash());
}

TEST_CASE("seed grid covers what the seed benchmark needs", "[spec]") {
  const auto specs = seed_grid_specs(Arch::kSm90);
  // 2 directions x 3 maths x 2 head dims x causal x padding, and the bf16
  // head_dim 64 forward's short-key and three-consumer tiles (x causal x
  // padding), the bf16 head_dim 128 causal forward's wide-key tile and the
  // non-causal tiles that split tiles, head_dim 64's three-consumer and 128's
  // two-consumer one (x padding).
  CHECK(specs.size() == 62);
  std::set<std::string> names;
  for (const KernelSpec& s : specs) {
    CHECK(s.validate().ok());
    names.insert(s.to_string());
  }
  CHECK(names.size() == specs.size());
}

TEST_CASE("launch_specs: what the runtime may launch for a spec named without its tile", "[spec]") {
  auto names = [](const char* text) {
    bool names_tile = true;
    auto s = KernelSpec::parse(text, &names_tile);
    REQUIRE(s.ok());
    CHECK_FALSE(names_tile);
    std::vector<std::string> out;
    for (const KernelSpec& k : launch_specs(*s)) out.push_back(k.to_string());
    return out;
  };
  CHECK(names("fwd_bf16_d64_causal_even_sm90") ==
        std::vector<std::string>{"fwd_bf16_d64_causal_even_sm90_bm128_bn64_w4_s2",
                                 "fwd_bf16_d64_causal_even_sm90a_bm128_bn192_w12_s3_wg",
                                 "fwd_bf16_d64_causal_even_sm90a_bm128_bn128_w12_s4_wg",
                                 "fwd_bf16_d64_causal_even_sm90a_bm192_bn128_w16_s4_wg"});
  // Named for sm90a already: the same kernels less the mma.sync one.
  CHECK(names("fwd_bf16_d128_noncausal_padded_sm90a") ==
        std::vector<std::string>{"fwd_bf16_d128_noncausal_padded_sm90a_bm128_bn128_w12_s2_wg",
                                 "fwd_bf16_d128_noncausal_padded_sm90a_bm128_bn128_w12_s2_wg_sk"});
  CHECK(names("fwd_bf16_d128_causal_padded_sm90a") ==
        std::vector<std::string>{"fwd_bf16_d128_causal_padded_sm90a_bm128_bn128_w12_s2_wg",
                                 "fwd_bf16_d128_causal_padded_sm90a_bm128_bn160_w12_s2_wg"});
  CHECK(names("fwd_f32tf32_d128_noncausal_padded_sm90a") ==
        std::vector<std::string>{"fwd_f32tf32_d128_noncausal_padded_sm90a_bm128_bn64_w12_s2_wg"});
  // The backward and other archs launch what they name.
  CHECK(names("bwd_bf16_d128_noncausal_padded_sm90_atomic").size() == 1);
  CHECK(names("fwd_bf16_d64_noncausal_padded_sm80") ==
        std::vector<std::string>{"fwd_bf16_d64_noncausal_padded_sm80_bm128_bn64_w4_s2"});
  bool names_tile = false;
  REQUIRE(KernelSpec::parse("fwd_bf16_d64_noncausal_padded_sm80_bm128_bn64_w4_s2", &names_tile).ok());
  CHECK(names_tile);
}

TEST_CASE("arch from compute capability", "[spec]") {
  CHECK(*arch_from_compute_capability(8, 0) == Arch::kSm80);
  CHECK(*arch_from_compute_capability(8, 6) == Arch::kSm86);
  CHECK(*arch_from_compute_capability(8, 9) == Arch::kSm89);
  CHECK(*arch_from_compute_capability(9, 0) == Arch::kSm90);
  CHECK(*arch_from_compute_capability(9, 0, true) == Arch::kSm90a);
  auto old = arch_from_compute_capability(7, 5);
  REQUIRE_FALSE(old.ok());
  CHECK(old.status() == Status::kUnsupportedArch);
  CHECK_THAT(old.error().message, Catch::Contains("7.5"));
}
