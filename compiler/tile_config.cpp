// The tiling policy. Each branch says why. The forward and backward parts
// mirror the SharedStorage layouts of templates/fwd_mma.cuh and
// templates/bwd_mma.cuh; the templates static_assert that the sizes agree.
#include "compiler/tile_config.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace flashjit {
namespace {

// ---------------------------------------------------------------------------
// Forward (templates/fwd_mma.cuh)
// ---------------------------------------------------------------------------

// Shared-memory row pads of templates/fwd_mma.cuh (FwdTraits::kPadQK, kPadV),
// in elements. 16-bit: 8 elements = one 16-byte chunk per row, so ldmatrix's 8
// row addresses fall in 8 disjoint bank groups. f32: Q and K rows shift by 8
// banks (8-byte loads at (g, 2t) are conflict-free per half-warp), V rows by 4
// banks (4-byte loads at (2t, g) are conflict-free per warp).
int fwd_pad_qk(const KernelSpec&) { return 8; }
int fwd_pad_v(const KernelSpec& spec) { return spec.dtype == DType::kF32 ? 4 : 8; }

// ---------------------------------------------------------------------------
// Forward on Hopper (templates/fwd_wgmma.cuh)
// ---------------------------------------------------------------------------

TileConfig fwd_wgmma_tile_config(const KernelSpec& spec) {
  // Two consumer warpgroups of 64 rows (the wgmma M) and a producer: 12
  // warps, block_m 128; one CTA per SM is all the registers allow.
  // Measured on the H200 (B4 H8, bf16, run 2 of bench/results/2026-12-03-h200):
  //  - D = 128: 128 keys per tile, two stages (160 KiB). S is 64 registers per
  //    consumer thread beside O (64) and P (32), under the 240 setmaxnreg
  //    gives them; 192 keys spill. Three stages measured within noise of two
  //    (s8192: 658 vs 645-653 TFLOP/s), 64 keys 13% slower (564).
  //  - D = 64: 192 keys per tile, three stages (160 KiB): fewer, longer steps
  //    hide the softmax better (s8192 465 vs 447-452 TFLOP/s, s3000 421 vs
  //    392-397, causal s8192 436 vs 412-418).
  // f32 (TF32): every tile takes twice the bytes and the wgmma runs at half
  // the 16-bit rate, so the softmax hides more easily behind fewer keys:
  //  - D = 128: 64 keys, two stages (194 KiB; 128 keys would need 258 KiB).
  //  - D = 64: 128 keys, two stages (162 KiB).
  //  - bf16/f16 D = 256: O is 128 registers per consumer thread, so 80 keys
  //    (S 40, P 20) and two stages, O staged in Q's rows (226 KiB). Run 52
  //    (bench/results/2026-12-04-h200-run52, B4 H8) against 64 keys:
  //    non-causal s1500 553 vs 517 TFLOP/s, s3000 599 vs 563, s4096 equal,
  //    s8192 +0.5%; causal +4.5-5.8% (s8192 612 vs 578; cuDNN 609).
  // Re-measured on the current kernel (run 33, bench/results/2026-12-04-h200-
  // run33): still the best or within 1% everywhere, except bf16 causal D = 64
  // below s3000, where 128 keys are 1-3% faster (and 1.5% slower at s8192):
  // fwd_wgmma_tile_for_keys picks that tile from the key length (run 38).
  // At D = 128 three stages leave no room for O apart from Q: 3-6% slower.
  // 16-bit D = 64 also has a tile of three consumer warpgroups, which
  // fwd_wgmma_tile_for_shape picks per launch (run 43).
  TileConfig t;
  if (spec.head_dim > 128) {
    t = TileConfig{128, 80, 12, 2};
  } else if (spec.dtype == DType::kF32) {
    t = spec.head_dim <= 64 ? TileConfig{128, 128, 12, 2} : TileConfig{128, 64, 12, 2};
  } else {
    t = spec.head_dim <= 64 ? TileConfig{128, 192, 12, 3} : TileConfig{128, 128, 12, 2};
  }
  t.wgmma = true;
  return t;
}

// Q [block_m][D] and kStages x (K and V [block_n][D]), in bytes.
int fwd_wgmma_tile_bytes(const KernelSpec& spec) {
  const TileConfig& t = spec.tile;
  const int d = spec.head_dim;
  return (t.block_m * d + 2 * t.num_stages * t.block_n * d) * dtype_size(spec.dtype);
}

// O's staging tile [block_m][D], in bytes.
int fwd_wgmma_o_bytes(const KernelSpec& spec) { return spec.tile.block_m * spec.head_dim * dtype_size(spec.dtype); }

// The mbarriers, which the struct's 1024-byte alignment rounds up to 1024,
// and 1024 bytes of slack to align the dynamic shared-memory base by hand.
constexpr int kWgmmaBarrierBlock = 1024;
constexpr int kWgmmaAlignSlack = 1024;

// The short-key alternative of the 16-bit head_dim 64 tile: 128 keys, four
// stages (run 33: within 1% of two and three; four held causal s8192 best).
//  - Non-causal: its products ran at 0.93-0.99 of the 192-key tile's rate at
//    s1500-8192 (run 33: 368 vs 385, 399 vs 429, 458 vs 463 TFLOP/s), so it
//    wins only where it pads the keys to less than 93% of 192's padding: 600
//    keys pad to 640 instead of 768 (run 36: 3000x600 316 vs 288, 1000 keys
//    +5%, 1500-4096 keys equal).
//  - Causal: it runs faster than the 192-key tile up to 4096 keys (run 38,
//    Sq = Sk: 600 +16%, 1000 +7%, 1500 +3%, 2048 +5%, 3000 and 4096 +1%; the
//    diagonal tiles waste less of a narrower tile) and 1% slower at 8192.
constexpr TileConfig kShortKeysD64{128, 128, 12, 4, true};
constexpr int kShortKeysRatePct = 93;
constexpr int kShortKeysCausalMaxKeys = 4096;

// The 16-bit Hopper forward at `head_dim`: the specs with tiles picked per
// launch (head_dim 64: short keys and three consumers; 128: wide keys).
bool is_16bit_wgmma_fwd(const KernelSpec& spec, int head_dim) {
  return spec.direction == Direction::kFwd && spec.tile.wgmma && spec.dtype != DType::kF32 &&
         spec.head_dim == head_dim;
}
bool has_short_keys_tile(const KernelSpec& spec) { return is_16bit_wgmma_fwd(spec, 64); }

long long padded_keys(int seqlen_k, int block_n) {
  return (static_cast<long long>(seqlen_k) + block_n - 1) / block_n * block_n;
}

// A wider key tile for 16-bit head_dim 128, causal only (two consumers; S
// and P of 160 keys still fit 232 registers beside O). Run 46 (bench/
// results/2026-12-04-h200-run46, bf16 B4 H8, Sq = Sk, against 128 keys):
// within +-2% up to 4096 keys, where they pad more and waste more of the
// causal diagonal; at 8192 keys 176 keys +1.8% non-causal and 160 keys +2.4%
// causal (575 vs 562; O apart, 231424 bytes). That was with the P V wait
// hoisted above the softmax; with it below (run 67, on the lazily rescaling
// kernel) 128 keys win non-causal: s8192 645-649 TFLOP/s against 627 (160
// keys) and 624 (176), s4096 631-636 against 611-612 and 591-600; causal
// s8192 stays within noise (128 keys 583 / 594, 160 keys 587.5 / 586).
constexpr TileConfig kWideKeysD128Causal{128, 160, 12, 2, true};
constexpr int kWideKeysD128MinKeys = 8192;

bool has_wide_keys_tile(const KernelSpec& spec) { return is_16bit_wgmma_fwd(spec, 128) && spec.causal; }

// 16-bit head_dim 128 non-causal with stream-K's split tiles (TileConfig::
// stream_k): the last round and a half of tiles dealt by K/V steps where
// whole rounds would leave SMs idle and a CTA's steps are many enough to pay
// for its extra pieces. Run 70 (bench/results/2026-12-05-h200-run70, bf16 B4
// H8, forced against the plain tile in the same call): s8192 (2048 tiles,
// 15.52 rounds of 132 SMs run as 16) 654-657 vs 635 TFLOP/s (+2.9-3.4%),
// s4096 (7.76 for 8) +0.2-0.6%, s3000 (5.82 for 6) -2.2%, s1500 (2.91 for 3)
// -9%. The split kernel's K/V step costs what the plain one's does (both
// take the ring's addresses from 32-bit bases), and the extra pieces cost a
// CTA about 6 steps (kStreamKD128, which fits all four within ~1.5%). Run
// 71's per-piece trace (bench/results/2026-12-05-h200-run71) puts ~7 there
// at s4096: the tail piece's start +1.3 steps (its Q and K/V cold, every CTA
// at once), its save and the head piece's start and merge ~0.7 each, and
// ~0.1 a whole tile and 0.8% a step of plumbing.
constexpr TileConfig kSplitD128{128, 128, 12, 2, true, true};

bool has_split_d128_tile(const KernelSpec& spec) { return is_16bit_wgmma_fwd(spec, 128) && !spec.causal; }

// The 16-bit head_dim 64 tile of three consumer warpgroups: 192 query rows,
// 128 keys (S, P and O fit the 160 registers setmaxnreg leaves each of
// three consumers; 192 keys would not), four stages (run 43: three equal).
// Each K/V tile feeds 192 rows and each consumer's softmax hides behind the
// products of two others. Run 43 (bench/results/2026-12-04-h200-run43, bf16
// B4 H8) against the two-consumer tiles: non-causal s1500 412 vs 390 TFLOP/s,
// s3000 448 vs 430, s8192 478 vs 468, s600 206 vs 155 (128 tiles: one wave
// of the 132 SMs instead of two), but s4096 441 vs 444 (the queries pad to
// 4224); causal s1500 285 vs 272, s3000 385 vs 371, s8192 467 vs 430, but
// s600 100 vs 116 and s4096 398 vs 411. fwd_wgmma_tile_for_shape weighs the
// padding and the waves with the model below.
constexpr TileConfig kThreeConsumersD64{192, 128, 16, 4, true};
// The same with stream-K's split tiles (TileConfig::stream_k), where whole
// rounds of its tiles would leave SMs idle. Run 65 (bench/results/2026-12-
// 04-h200-run65, bf16 B4 H8): s4096 (704 tiles, 5.33 rounds for 6) 465 vs
// 440 TFLOP/s unsplit and 431 for the two-consumer tile (torch cuDNN 442);
// 4000 x 600 keys 355.6 vs 331.9 (128-key two-consumer tile), 4096 x 600
// 346.9 vs 339.8.
constexpr TileConfig kThreeConsumersD64StreamK{192, 128, 16, 4, true, true};

// Per-tile rates of the model, relative to the 128 x 192 tile: run 33 for
// the 128-key tile (0.93-0.99), run 43 for three consumers (1.046 fits the
// non-causal s8192 ratio once padding and waves are counted).
constexpr double kRate192Keys = 1.0;
constexpr double kRate128Keys = 0.95;
constexpr double kRateThreeConsumers = 1.046;
// Three consumers only where the model says they win by more than this:
// the model is within ~3% of run 43 (causal s4096: 1.009 modelled, 0.968
// measured).
constexpr double kThreeConsumersMargin = 1.015;
// Stream-K's run of split tiles ends near the mean load per SM, plus the
// pieces' plumbing, which every step pays (run 65: the _sk kernel unsplit
// ran 2.6-2.9% slower at s1500-8192), and about this many K/V steps per CTA
// for its extra piece (pipeline fill and drain, Q loaded again, the
// partial's trip through L2). Fitted to run 65's three splits (above): the
// model then gives 1.042, 1.070 and 1.024 where they measured 1.079, 1.071
// and 1.021.
// A split kernel's fit. Head_dim 64's (kStreamKD64): split tiles only where
// the model says they finish sooner by 3% (its error over run 65's splits
// reached 3.5%, and shapes it has not seen, e.g. s2048 modelled +2%, keep the
// tiles measured before) and whole rounds waste >= 10% (fwd_stream_k_pays).
struct StreamKFit {
  double plumbing;     // extra cost of every step of the split kernel
  double piece_steps;  // K/V steps a CTA pays for its extra pieces
  double margin;       // the modelled gain it must beat
  bool waste_rule;     // also only where fwd_stream_k_pays
};
constexpr StreamKFit kStreamKD64{0.027, 1.3, 1.03, true};
// Head_dim 128's split kernel (kSplitD128, run 70): no plumbing, ~6 steps of
// pieces; a 1.5% margin keeps s4096 (+0.6% modelled, +0.2-0.6% measured) unsplit.
constexpr StreamKFit kStreamKD128{0.0, 6.0, 1.015, false};
constexpr int kDefaultSmCount = 132;  // the H200's

double tile_rate(const TileConfig& t) {
  if (t.block_m == kThreeConsumersD64.block_m) return kRateThreeConsumers;
  return t.block_n == kShortKeysD64.block_n ? kRate128Keys : kRate192Keys;
}

// Query blocks of tile `t` per (batch, head) pair, and pairs.
long long query_blocks(const TileConfig& t, const FwdShape& shape) {
  return (static_cast<long long>(shape.seqlen_q) + t.block_m - 1) / t.block_m;
}
long long pairs_of(const FwdShape& shape) { return std::max<long long>(shape.pairs, 1); }

// Modelled run time of the forward with tile `t`: every (query block, pair)
// tile costs rows x padded visible keys / rate; non-causal tiles are equal,
// so the persistent deal takes ceil(tiles / SMs) of them per SM; causal ones
// are dealt longest first, which ends near the mean load per SM unless one
// tile is longer.
double modelled_cost(const KernelSpec& spec, const TileConfig& t, const FwdShape& shape, int sm_count) {
  const long long m_blocks = query_blocks(t, shape);
  const long long pairs = pairs_of(shape);
  const double rate = tile_rate(t);
  if (!spec.causal) {
    const long long rounds = (m_blocks * pairs + sm_count - 1) / sm_count;
    return double(rounds) * t.block_m * double(padded_keys(shape.seqlen_k, t.block_n)) / rate;
  }
  const long long offset = static_cast<long long>(shape.seqlen_k) - shape.seqlen_q;  // bottom-right
  double total = 0, longest = 0;
  for (long long m = 0; m < m_blocks; ++m) {
    const long long visible = std::clamp<long long>((m + 1) * t.block_m + offset, 0, shape.seqlen_k);
    const double work = double(t.block_m) * double(padded_keys(int(visible), t.block_n));
    total += work;
    longest = std::max(longest, work);
  }
  return std::max(total * double(pairs) / sm_count, longest) / rate;
}

// Modelled run time of the non-causal forward with tile `t` under stream-K:
// the tiles' mean load per SM plus the splits' cost (`fit`); none where it
// would not split.
std::optional<double> modelled_stream_k_cost(const TileConfig& t, const FwdShape& shape, int sm_count,
                                             const StreamKFit& fit) {
  const long long tiles = query_blocks(t, shape) * pairs_of(shape);
  const long long ctas = std::min<long long>(tiles, sm_count);
  if (fwd_stream_k_tiles(tiles, ctas) == 0 || (fit.waste_rule && !fwd_stream_k_pays(tiles, ctas))) {
    return std::nullopt;
  }
  const long long keys = padded_keys(shape.seqlen_k, t.block_n);
  const double rounds =
      double(tiles) / double(ctas) * (1 + fit.plumbing) + fit.piece_steps * t.block_n / double(keys);
  return rounds * t.block_m * double(keys) / tile_rate(t);
}

// Whether the split tile `split` finishes a non-causal launch of `shape`
// sooner than the unsplit tiles' modelled `plain_cost` by fit.margin.
bool split_pays(const KernelSpec& spec, const TileConfig& split, const FwdShape& shape, int sm_count,
                const StreamKFit& fit, double plain_cost) {
  if (spec.causal || !shape.split_tiles) return false;
  const auto cost = modelled_stream_k_cost(split, shape, sm_count, fit);
  return cost && *cost * fit.margin < plain_cost;
}

}  // namespace

TileConfig fwd_wgmma_tile_for_keys(const KernelSpec& spec, int seqlen_k) {
  KernelSpec policy = spec;
  policy.tile = choose_tile_config(spec);
  if (has_wide_keys_tile(policy) && seqlen_k >= kWideKeysD128MinKeys) return kWideKeysD128Causal;
  if (!has_short_keys_tile(policy) || seqlen_k <= 0) return policy.tile;
  if (spec.causal) return seqlen_k <= kShortKeysCausalMaxKeys ? kShortKeysD64 : policy.tile;
  const long long wide = padded_keys(seqlen_k, policy.tile.block_n);
  const long long narrow = padded_keys(seqlen_k, kShortKeysD64.block_n);
  return narrow * 100 < wide * kShortKeysRatePct ? kShortKeysD64 : policy.tile;
}

TileConfig fwd_wgmma_tile_for_shape(const KernelSpec& spec, const FwdShape& shape, int sm_count) {
  const TileConfig two = fwd_wgmma_tile_for_keys(spec, shape.seqlen_k);
  KernelSpec policy = spec;
  policy.tile = two;
  if (shape.seqlen_q <= 0 || shape.seqlen_k <= 0) return two;
  const int sms = sm_count > 0 ? sm_count : kDefaultSmCount;
  if (has_split_d128_tile(policy)) {
    const bool split = split_pays(spec, kSplitD128, shape, sms, kStreamKD128, modelled_cost(spec, two, shape, sms));
    return split ? kSplitD128 : two;
  }
  if (!has_short_keys_tile(policy)) return two;
  const double cost_two = modelled_cost(spec, two, shape, sms);
  const double cost_three = modelled_cost(spec, kThreeConsumersD64, shape, sms);
  const bool three = cost_three * kThreeConsumersMargin < cost_two;
  if (split_pays(spec, kThreeConsumersD64StreamK, shape, sms, kStreamKD64, three ? cost_three : cost_two)) {
    return kThreeConsumersD64StreamK;
  }
  return three ? kThreeConsumersD64 : two;
}

std::vector<TileConfig> fwd_wgmma_launch_tiles(const KernelSpec& spec) {
  KernelSpec policy = spec;
  policy.tile = choose_tile_config(spec);
  if (has_wide_keys_tile(policy)) return {policy.tile, kWideKeysD128Causal};
  if (has_split_d128_tile(policy)) return {policy.tile, kSplitD128};
  if (!has_short_keys_tile(policy)) return {policy.tile};
  if (spec.causal) return {policy.tile, kShortKeysD64, kThreeConsumersD64};
  return {policy.tile, kShortKeysD64, kThreeConsumersD64, kThreeConsumersD64StreamK};
}

bool fwd_wgmma_o_apart(const KernelSpec& spec) {
  return fwd_wgmma_tile_bytes(spec) + fwd_wgmma_o_bytes(spec) + kWgmmaBarrierBlock + kWgmmaAlignSlack <=
         max_smem_bytes(Arch::kSm90a);
}

// Runs 76-77 (bench/results/2026-12-05-h200-run76, -run77; H100, against
// main in the same call), with K a step ahead of V: bf16 d128 non-causal
// s4096 +1.1-1.8% (run 76: +0.2-0.9%), s1024 / 2048 +0.8-1.8%, s1500-3000
// within +-0.5%; d64's two-consumer tiles -1.5% (bn192, s2048) to +0.7%
// (bn128, s1024), so head_dim 128 only. The second Q tile is as large as O's
// staging tile, so where both fit, O is apart (fwd_wgmma_o_apart).
int fwd_wgmma_q_buffers(const KernelSpec& spec) {
  const bool q_ahead = spec.direction == Direction::kFwd && spec.tile.wgmma && spec.dtype != DType::kF32 &&
                       spec.head_dim == 128 && !spec.causal && !spec.tile.stream_k && spec.tile.block_m == 128 &&
                       fwd_wgmma_tile_bytes(spec) + 2 * fwd_wgmma_o_bytes(spec) + kWgmmaBarrierBlock +
                               kWgmmaAlignSlack <=
                           max_smem_bytes(Arch::kSm90a);
  return q_ahead ? 2 : 1;
}

FwdSchedule fwd_wgmma_schedule(const KernelSpec& spec, long long tiles, int sm_count) {
  // Measured on the H200 (132 SMs), B4 H8, one binary per run with each
  // schedule (bench/results/2026-12-04-h200-run13, -run14, -run15):
  //  - Non-causal 16-bit with O apart: every tile costs the same, so the
  //    static persistent schedule is balanced, and the next tile's Q and K
  //    land while this one stores O: d64 s1500 388 vs 352 TFLOP/s (one CTA
  //    per tile), d128 s1500 559-571 vs 512-521, s4096 665-675 vs 634-651;
  //    the counter adds nothing here (d128 s1500 544).
  //  - Causal: tiles differ in length. Statically dealt they leave CTAs
  //    unbalanced (d128 s4096 491 vs 504); taken from the counter, each CTA
  //    takes the next-longest tile when it is free and overlaps its loads with
  //    the last tile's epilogue: d64 s1500 265 vs 247, s3000 374 vs 344,
  //    d128 s1500 426 vs 397, s4096 549 vs 504. With at most two tiles per SM
  //    the counter's memset costs more than it saves (d128 s600 176 vs 191),
  //    and at 15 tiles per SM one CTA per tile is faster (d128 s8192 587 vs
  //    544, d256 598 vs 535): the counter between 2 and 12 tiles per SM.
  //  - Non-causal 16-bit d256 and d128 x 176 keys (O staged in Q's rows, so
  //    the next Q waits for the O store): one CTA per tile (d256 s4096 661 vs
  //    643 static, 621 dynamic). Run 54 wrote their O from registers to run
  //    them persistent: 2-4% slower at d128 x 176 keys and d256 causal, +1.4-
  //    2.8% at d256 s4096-8192, -2% at s1500; not landed.
  //  - Non-causal f32 (TF32): with O apart (d64) one CTA per tile (within
  //    noise); d128 writes O from registers, Q is free at the last S, and the
  //    static schedule measured ahead (run 55: s600 121 vs 118.5, s1500 240
  //    vs 239, s3000 273.5 vs 275, s8192 319 vs 315.5 TFLOP/s).
  //  - Stream-K (TF32 where it pays, fwd_stream_k_pays, and the 16-bit
  //    "_sk" tiles): run 60, TF32 s600 (160 tiles) d128 137.8 vs 120.8
  //    TFLOP/s, d64 103 vs 90 (one CTA per tile); d64 s4096 (7.76 rounds)
  //    +2.6%, below the rule's bar. Run 66: bf16 d64 s4096 with the _sk tile
  //    460.5 vs 434 (two consumers, no split).
  //    Run 70: bf16 d128 s8192 with its _sk tile +2.9-3.4%. A 16-bit "_sk"
  //    tile is the policy's choice for its launch (fwd_wgmma_tile_for_shape
  //    weighs the split there): it splits wherever the tiles leave a partial
  //    round; TF32 kernels where whole rounds waste >= 10%.
  if (spec.causal) {
    return tiles > 2LL * sm_count && tiles <= 12LL * sm_count ? FwdSchedule::kPersistentDynamic
                                                               : FwdSchedule::kOneTilePerCta;
  }
  const bool o_apart = fwd_wgmma_o_apart(spec);
  if (fwd_wgmma_stream_k(spec)) {
    const long long ctas = std::min<long long>(tiles, sm_count);
    const bool split = spec.dtype == DType::kF32 ? fwd_stream_k_pays(tiles, ctas) : fwd_stream_k_tiles(tiles, ctas) > 0;
    if (split) return FwdSchedule::kStreamK;
  }
  const bool persistent = spec.dtype == DType::kF32 ? !o_apart : o_apart;
  return persistent ? FwdSchedule::kPersistent : FwdSchedule::kOneTilePerCta;
}

bool fwd_wgmma_stream_k(const KernelSpec& spec) {
  // FwdWgmmaKernel::kStreamK: TF32 inputs, non-causal (O is never staged in
  // Q's rows there), and the 16-bit "_sk" tiles.
  return spec.direction == Direction::kFwd && spec.tile.wgmma && !spec.causal &&
         (spec.dtype == DType::kF32 || spec.tile.stream_k);
}

long long fwd_stream_k_tiles(long long tiles, long long ctas) {
  if (ctas <= 0 || tiles <= ctas || tiles % ctas == 0) return 0;
  return ctas + tiles % ctas;
}

// Stream-K where whole rounds of tiles would take at least this much longer
// than the tiles' mean load per SM. Run 58 (bench/results/2026-12-04-h200-
// run58, B4 H8, against the persistent deal): TF32 d128 s600 +16% (1.21
// rounds instead of 2), bf16 d64 s4096 +6.5% (three consumers, 5.33 instead
// of 6); but 2.91 rounds instead of 3 (s1500) lost 4-8%, 5.8 instead of 6
// (s3000) 0.5%: each split costs a piece's pipeline fill and drain and the
// partial's trip through L2, more than 3% of a round saves.
constexpr double kStreamKMinWaste = 1.10;

bool fwd_stream_k_pays(long long tiles, long long ctas) {
  if (fwd_stream_k_tiles(tiles, ctas) == 0) return false;
  const long long rounds = (tiles + ctas - 1) / ctas;
  return double(rounds) * ctas >= kStreamKMinWaste * double(tiles);
}

int fwd_wgmma_causal_group(long long kv_bytes, int pairs, int l2_bytes) {
  // Longest first over all pairs at once balances the end of the schedule
  // best, but where K and V of all pairs outgrow the L2 the CTAs running at
  // once stream every head's K and V from HBM side by side, and under the
  // power cap that costs clock (d128 causal s8192: 1530 MHz vs cuDNN's 1718,
  // bench/results/2026-12-04-h200-run23). Groups of 8 pairs let those CTAs
  // share a few heads' K and V. Run 24 (H200, L2 60 MiB, bf16 B4 H8,
  // sustained clocks), groups of 8 vs all pairs: d128 s4096 (64 MiB of K and
  // V) 540 vs 517 TFLOP/s, s8192 560 vs 534, s3000 (47 MiB) 490 vs 483, d64
  // s8192 430 vs 414, d64 s4096 (32 MiB) 401 vs 399; all pairs ahead at 23
  // MiB and less: d128 s1500 402 vs 390, d64 263 vs 254, d64 s3000 362 vs
  // 358. Half the L2 (30 MiB there) lies between.
  constexpr int kGroup = 8;
  if (l2_bytes <= 0 || kv_bytes <= l2_bytes / 2) return std::max(pairs, 1);
  return std::max(std::min(pairs, kGroup), 1);
}

namespace {

int fwd_wgmma_smem_bytes(const KernelSpec& spec) {
  // FwdWgmmaKernel::SharedStorage: the tiles, O's staging tile where it fits
  // beside them (fwd_wgmma_o_apart), the barrier block, the slack.
  // A second Q buffer (fwd_wgmma_q_buffers) is as large as O's staging tile.
  const int o_bytes = fwd_wgmma_o_apart(spec) ? fwd_wgmma_o_bytes(spec) : 0;
  const int extra_q_bytes = (fwd_wgmma_q_buffers(spec) - 1) * fwd_wgmma_o_bytes(spec);
  return fwd_wgmma_tile_bytes(spec) + o_bytes + extra_q_bytes + kWgmmaBarrierBlock + kWgmmaAlignSlack;
}

Result<void> validate_wgmma_tile(const KernelSpec& spec) {
  const TileConfig& t = spec.tile;
  auto bad = [&](std::string what) {
    return make_error(Status::kInvalidSpec, fmt::format("tile config of {}: {}", spec.to_string(), what));
  };
  if (spec.arch != Arch::kSm90a) {
    return bad(fmt::format("the wgmma kernel (_wg) needs arch sm90a; got {}", to_string(spec.arch)));
  }
  if (!wgmma_supported(spec)) {
    return bad("the wgmma kernel (_wg) serves the forward of bf16/f16 at head_dim 64, 128 or 256 and of f32 "
               "with TF32 math (not ieee) at head_dim 64 or 128 only");
  }
  const bool three_consumers = has_short_keys_tile(spec);  // registers: S, P and O of 128 keys fit 160
  if (t.block_m != 128 && !(t.block_m == 192 && three_consumers)) {
    return bad(fmt::format("_wg needs block_m 128 (two 64-row consumers){}; got {}",
                           three_consumers ? " or 192 (three)" : "", t.block_m));
  }
  // The S product's N (wgmma_ops.cuh has these); TF32 V^T boxes are 32 keys.
  const bool is_16bit = spec.dtype != DType::kF32;
  const bool wide_16bit = is_16bit && (t.block_n == 144 || t.block_n == 160 || t.block_n == 176);
  const bool d256_16bit = is_16bit && spec.head_dim == 256 && t.block_n == 80;
  if (t.block_n != 64 && t.block_n != 128 && t.block_n != 192 && !wide_16bit && !d256_16bit) {
    return bad(fmt::format("_wg needs block_n 64, 128 or 192{}; got {}",
                           is_16bit ? " (or 144, 160, 176 for 16-bit inputs, 80 at head_dim 256)" : "",
                           t.block_n));
  }
  if (t.num_warps != 4 + t.block_m / 16) {
    return bad(fmt::format("_wg needs num_warps {} (a producer warpgroup and one per 64 rows); got {}",
                           4 + t.block_m / 16, t.num_warps));
  }
  if (t.stream_k && (spec.dtype == DType::kF32 || spec.causal || !fwd_wgmma_o_apart(spec))) {
    return bad("_sk (stream-K's split tiles) applies to 16-bit non-causal kernels with O's staging tile "
               "apart from Q (TF32 non-causal kernels always split)");
  }
  return {};  // num_stages and shared memory: the checks every tile takes
}

TileConfig fwd_tile_config(const KernelSpec& spec) {
  if (spec.arch == Arch::kSm90a && wgmma_supported(spec)) return fwd_wgmma_tile_config(spec);
  // Register budget per thread (255 max) drives everything: a warp owns
  // block_m / num_warps rows and holds O (rows x D) and S (rows x min(block_n,
  // 32 or 64)) in f32 registers. 32 rows per warp (4 warps, block_m 128) halves
  // the shared-memory reads of K and V per FLOP against 16 rows per warp, which
  // is what bounds mma.sync on sm_90 (H200, bf16 D=128, Sq=Sk=8192: 4 warps
  // 335 TFLOP/s, 8 warps 275). Shared memory then decides block_n per arch:
  // Q tile + stages x (K + V) tiles must fit in max_smem_bytes(arch).
  const bool sm90 = is_sm90(spec.arch);
  const bool small_smem = spec.arch == Arch::kSm86 || spec.arch == Arch::kSm89;  // 99 KiB
  const int d = spec.head_dim;
  if (spec.dtype != DType::kF32) {
    // D <= 64: O is at most 64 registers, S over 64 keys fits beside it
    // (<= 252 registers). bn 32 measured slower (295 vs 331 TFLOP/s at D=64).
    if (d <= 64) return TileConfig{128, 64, 4, 2};
    // D = 96, 128: the kernel walks a 64-key stage in two 32-key S steps
    // (FwdTraits::kSubN) to stay under 255 registers. Causal takes 32-key
    // stages: less work wasted on the diagonal tiles (295 vs 282 TFLOP/s).
    // 104 KiB at block_n = 64 fits sm80/sm90; the 99 KiB parts take 32.
    if (d <= 128) {
      if (spec.causal || small_smem) return TileConfig{128, 32, 4, 2};
      return TileConfig{128, 64, 4, 2};
    }
    // D = 256: O alone is 128 registers at 16 rows per warp, so 4 warps of
    // block_m = 64. sm90: block_n = 64 (165 KiB); elsewhere 32 is exactly
    // 99 KiB. 8 warps sharing 128 x 64 timed faster on the H200 (290 vs 233
    // TFLOP/s) but has not passed the correctness checks yet: not the default.
    return sm90 ? TileConfig{64, 64, 4, 2} : TileConfig{64, 32, 4, 2};
  }
  // f32 (TF32 / 3xTF32): 16 rows per warp (32 spill: the TF32 fragments and
  // 3xTF32 splits need more registers), and tiles take twice the bytes.
  if (d <= 32) return TileConfig{128, 64, 8, 2};  // 58 KiB everywhere
  if (d <= 64) return small_smem ? TileConfig{128, 32, 8, 2} : TileConfig{128, 64, 8, 2};  // 71 / 106 KiB
  if (d <= 96) {
    if (small_smem) return TileConfig{64, 32, 4, 2};  // 77 KiB
    // 3xTF32 at block_n = 64 spills 4-12 bytes on sm_80 (255 registers).
    if (spec.precision == Precision::kIEEE) return TileConfig{128, 32, 8, 2};  // 103 KiB
    return TileConfig{128, 64, 8, 2};  // 154 KiB
  }
  if (d <= 128) {
    if (sm90) return TileConfig{128, 64, 8, 2};  // 202 KiB: one CTA of 8 warps per SM
    if (!small_smem) return TileConfig{128, 32, 8, 2};  // 135 KiB on sm80
    // 99 KiB: one K/V stage (67.5 KiB); two would need 101 KiB.
    return TileConfig{64, 32, 4, 1};
  }
  // D = 256: O is 128 registers, so 16 rows per warp, and S over 16 keys
  // (block_n = 32 spills 12-64 bytes in the TF32 / 3xTF32 fragments).
  // 3xTF32 also needs the single-stage loop: with two stages ptxas spills
  // 8 bytes of loop state (causal, even). 98.75 KiB: fits every arch.
  if (spec.precision == Precision::kIEEE) return TileConfig{64, 16, 4, 1};
  if (!small_smem) return TileConfig{64, 16, 4, 2};  // 131.5 KiB
  return TileConfig{32, 16, 2, 2};                   // 98.5 KiB
}

int fwd_smem_bytes(const KernelSpec& spec) {
  const TileConfig& t = spec.tile;
  // FwdKernel::SharedStorage: Q [block_m][D + pad_qk], then num_stages x
  // (K [block_n][D + pad_qk] and V [block_n][D + pad_v]); every row is a
  // multiple of 16 bytes, so the struct has no other padding.
  const int d = spec.head_dim;
  const int elems = t.block_m * (d + fwd_pad_qk(spec)) +
                    t.num_stages * t.block_n * ((d + fwd_pad_qk(spec)) + (d + fwd_pad_v(spec)));
  return elems * dtype_size(spec.dtype);
}

// ---------------------------------------------------------------------------
// Backward (templates/bwd_mma.cuh)
// ---------------------------------------------------------------------------

// Shared-memory row of `cols` elements: templates/bwd_mma.cuh pads every row by
// 16 bytes (bwd::kRowPadBytes) so ldmatrix and the transposed fp32 loads are
// free of bank conflicts.
int bwd_row_bytes(int cols, const KernelSpec& spec) { return cols * dtype_size(spec.dtype) + 16; }

// K/V rows per step of the deterministic dq kernel (BwdKernel::kDqBlockN).
int bwd_dq_block_n(const KernelSpec& spec) {
  const bool narrow = spec.dtype != DType::kF32 && spec.head_dim <= 128;
  return std::min(spec.tile.block_n, narrow ? 64 : 32);
}

// The tile for a machine with the full Hopper/A100 shared memory. Every warp
// owns 16 K/V rows, and dK, dV (16 x head_dim each, f32) live in its registers;
// with S^T and dP^T (16 x block_m each) that is the register budget:
// 2*D/2 + 2*block_m/2 f32 per thread at the peak must stay well under 255.
TileConfig bwd_tile_large_smem(const KernelSpec& spec) {
  const bool fp32 = spec.dtype == DType::kF32;
  switch (spec.head_dim) {
    case 32:
    case 64:
      // 128 keys x 8 warps, Q/dO double-buffered. bf16: 128 queries per step
      // (half the barriers and dQ reductions per key; H200 B4 H8 S8192 hd64:
      // 263 vs 233 TFLOP/s non-causal, 240 vs 216 causal; hd32: 195 vs 182),
      // 176 KB at hd64. fp32: 64 queries, 189 KB at hd64.
      return fp32 ? TileConfig{64, 128, 8, 2} : TileConfig{128, 128, 8, 2};
    case 96:
      // fp32 rows are 400 B: 64 keys x 4 warps, 32-query steps (the dQ
      // product splits 96 columns over 2 warps), two stages. 3xTF32 (twice
      // the fragment registers) splits each key slab's 96 columns over 2 warps.
      if (spec.precision == Precision::kIEEE) return TileConfig{32, 32, 4, 2};
      return fp32 ? TileConfig{32, 64, 4, 2} : TileConfig{64, 128, 8, 2};
    case 128:
      // bf16: 128 keys x 64 queries per step (processed in 32-query register
      // slabs), one stage: 153 KB with the dQ staging tile. Measured (H200,
      // B4 H8 S8192): 270 TFLOP/s vs 265 with two stages, 241 with 32-query
      // steps (more barriers and dQ reductions per key).
      // fp32: 528-byte rows; 32 queries, one stage. 3xTF32 splits each key
      // slab's dK/dV columns over 2 warps (64 keys per CTA): with 128 columns
      // its big/small fragments spill.
      if (spec.precision == Precision::kIEEE) return TileConfig{32, 64, 8, 1};
      return fp32 ? TileConfig{32, 128, 8, 1} : TileConfig{64, 128, 8, 1};
    default:
      // hd256: 64 keys over 8 warps (2 warps split each slab's dK/dV columns,
      // else 256 accumulator registers per thread), one stage. fp32 splits 4
      // ways (32 keys): 1 KB rows, and 3xTF32's big/small fragments spill
      // with 128 columns per warp.
      return fp32 ? TileConfig{32, 32, 8, 1} : TileConfig{64, 64, 8, 1};
  }
}

// The tile for sm_86/89 (99 KB of shared memory per block): half the keys
// per CTA and 4 warps, one stage where two do not fit.
TileConfig bwd_tile_small_smem(const KernelSpec& spec) {
  const bool fp32 = spec.dtype == DType::kF32;
  switch (spec.head_dim) {
    case 32:
    case 64:
      return fp32 ? TileConfig{32, 64, 4, 1} : TileConfig{64, 64, 4, 2};
    case 96:
    case 128:
      // bf16 hd128: 78 KB. fp32: 32 keys, 4 warps (2 per key slab): 71 KB.
      return fp32 ? TileConfig{32, 32, 4, 1} : TileConfig{64, 64, 4, 1};
    default:
      // hd256: 32 keys (bf16; 69 KB) or 16 keys (fp32, 4 warps split the
      // 256 columns; 67 KB) per CTA.
      return fp32 ? TileConfig{16, 16, 4, 1} : TileConfig{32, 32, 4, 1};
  }
}

int bwd_smem_bytes(const KernelSpec& spec) {
  // BwdKernel::MainStorage: K and V tiles, kStages Q and dO tiles, LSE and
  // Dsum vectors per stage; then the dS^T tile [block_n][block_m] when dQ is
  // accumulated in the main kernel.
  const TileConfig& t = spec.tile;
  const int core = (2 * t.block_n + 2 * t.num_stages * t.block_m) * bwd_row_bytes(spec.head_dim, spec) +
                   2 * t.num_stages * t.block_m * static_cast<int>(sizeof(float));
  const int ds = spec.deterministic ? 0 : t.block_n * bwd_row_bytes(t.block_m, spec);
  // sm_90 stages dQ partial sums (f32 [block_m][head_dim]) for the bulk
  // reduce-add (BwdKernel::DqAccTile).
  const bool bulk_dq = !spec.deterministic && is_sm90(spec.arch);
  const int dq_stage = bulk_dq ? t.block_m * spec.head_dim * static_cast<int>(sizeof(float)) : 0;
  return core + ds + dq_stage;
}

TileConfig bwd_tile_config(const KernelSpec& spec) {
  // The large-memory tile wherever both the main and the dq kernel fit (sm_90:
  // 227 KB; sm_80: 163 KB takes it for 16-bit inputs), the small one otherwise.
  KernelSpec s = spec;
  s.tile = bwd_tile_large_smem(spec);
  if (bwd_smem_bytes(s) > max_smem_bytes(spec.arch) ||
      bwd_dq_smem_bytes(s) > max_smem_bytes(spec.arch)) {
    s.tile = bwd_tile_small_smem(spec);
  }
  // Before sm_90 the atomic mode adds dQ with per-thread atomics straight from
  // registers (no bulk reduce-add), and ptxas spills 8-32 bytes for 16-bit
  // inputs at the query steps above (sm_80 hd128 bm64: 32 B; f16 hd256 bm32:
  // 8 B; sm_86 f16 hd128 bm32: 8 B). These steps spill nothing (ptxas -v):
  const bool hopper = is_sm90(spec.arch);
  if (!hopper && !spec.deterministic && spec.dtype != DType::kF32) {
    const bool eight_warps = s.tile.num_warps == 8;
    switch (spec.head_dim) {
      case 64: if (!eight_warps) s.tile.block_m = 32; break;  // sm_86 even: 8-12 B at bm64
      case 96: if (!eight_warps) s.tile.block_m = 32; break;  // 8 warps: dQ columns need bm64
      case 128: s.tile.block_m = eight_warps ? 32 : 16; break;
      case 256: s.tile.block_m = 16; break;
      default: break;
    }
  }
  // sm_86/89, fp32 hd256, deterministic: the 16-query step spills 4-8 B in
  // the causal main kernel; 32 queries over the same 16 keys spill nothing
  // and still fit (98 KB).
  if (!hopper && spec.deterministic && spec.dtype == DType::kF32 && spec.head_dim == 256 &&
      s.tile.num_warps == 4) {
    s.tile.block_m = 32;
  }
  return s.tile;
}

}  // namespace

int bwd_dq_smem_bytes(const KernelSpec& spec) {
  // BwdKernel::DqStorage: Q and dO tiles of block_m rows, kStages K and V
  // tiles of bwd_dq_block_n rows.
  const TileConfig& t = spec.tile;
  return (2 * t.block_m + 2 * t.num_stages * bwd_dq_block_n(spec)) *
         bwd_row_bytes(spec.head_dim, spec);
}

TileConfig choose_tile_config(const KernelSpec& spec) {
  return spec.direction == Direction::kFwd ? fwd_tile_config(spec) : bwd_tile_config(spec);
}

KernelSpec with_default_tile(KernelSpec spec) {
  if (spec.tile.empty()) spec.tile = choose_tile_config(spec);
  return spec;
}

int threads_per_block(const KernelSpec& spec) { return spec.tile.num_warps * 32; }

int smem_bytes(const KernelSpec& spec) {
  if (spec.tile.wgmma) return fwd_wgmma_smem_bytes(spec);
  return spec.direction == Direction::kFwd ? fwd_smem_bytes(spec) : bwd_smem_bytes(spec);
}

int max_smem_bytes(Arch arch) {
  switch (arch) {
    case Arch::kSm80: return 163 * 1024;  // A100: 164 KiB per SM, 1 KiB reserved per block
    case Arch::kSm86:
    case Arch::kSm89: return 99 * 1024;   // consumer Ampere / Ada: 100 KiB per SM
    case Arch::kSm90:
    case Arch::kSm90a: return 227 * 1024;  // Hopper: 228 KiB per SM
  }
  return 48 * 1024;
}

Result<void> validate_tile_config(const KernelSpec& spec) {
  const TileConfig& t = spec.tile;
  auto bad = [&](const char* field, int value, const char* rule) {
    return make_error(Status::kInvalidSpec,
                      fmt::format("tile config of {}: {} must be {}; got {}", spec.to_string(),
                                  field, rule, value));
  };
  if (t.wgmma) {
    if (auto r = validate_wgmma_tile(spec); !r) return r;
  }
  auto pow2_in = [](int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; };
  if (!t.wgmma && !pow2_in(t.block_m, 16, 256)) return bad("block_m", t.block_m, "a power of two in [16, 256]");
  if (!t.wgmma && !pow2_in(t.block_n, 16, 256)) return bad("block_n", t.block_n, "a power of two in [16, 256]");
  if (!t.wgmma && !pow2_in(t.num_warps, 1, 16)) return bad("num_warps", t.num_warps, "a power of two in [1, 16]");
  if (t.num_stages < 1 || t.num_stages > 4) return bad("num_stages", t.num_stages, "in [1, 4]");
  const int smem = smem_bytes(spec);
  if (smem > max_smem_bytes(spec.arch)) {
    return make_error(Status::kInvalidSpec,
                      fmt::format("tile config of {} needs {} bytes of shared memory; {} allows {}",
                                  spec.to_string(), smem, to_string(spec.arch),
                                  max_smem_bytes(spec.arch)));
  }
  return {};
}

}  // namespace flashjit
