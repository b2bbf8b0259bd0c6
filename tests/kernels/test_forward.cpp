// Forward kernels against the float64 reference, over the spec grid: every
// dtype/precision, head_dim, causal with Sq != Sk both ways, ragged lengths,
// both layouts, per-batch key lengths, a large batch, several seeds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <tuple>

#include "compiler/tile_config.h"
#include "tests/kernels/attention_case.h"

using namespace flashjit;
using namespace flashjit::testing;

namespace {

struct ForwardCheck {
  ErrorNorm o, lse;
  std::string spec;
  long long grid_ctas = 0;
  FwdSchedule schedule = FwdSchedule::kAuto;
};

// The query rows whose reference is computed: all of them for small problems,
// else a random sample plus both ends (where the masks and tails are).
std::vector<int> rows_to_check(const AttentionCase& c) {
  if (size_t(c.seqlen_q) * c.seqlen_k <= 1500u * 1500u) return {};
  std::vector<int> rows;
  for (int i = 0; i < 16 && i < c.seqlen_q; ++i) rows.push_back(i);
  for (int i = std::max(0, c.seqlen_q - 16); i < c.seqlen_q; ++i) rows.push_back(i);
  std::mt19937 rng(uint32_t(c.seed));
  for (int i = 0; i < 96; ++i) rows.push_back(int(rng() % c.seqlen_q));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

ForwardCheck run_forward(const AttentionCase& c, Context& ctx) {
  const Problem p0 = c.problem();
  const size_t q_elems = size_t(c.batch) * c.seqlen_q * c.heads * c.head_dim;
  const size_t k_elems = size_t(c.batch) * c.seqlen_k * c.heads * c.head_dim;
  auto q = random_inputs(q_elems, c.dtype, c.seed * 3 + 0);
  auto k = random_inputs(k_elems, c.dtype, c.seed * 3 + 1);
  auto v = random_inputs(k_elems, c.dtype, c.seed * 3 + 2);
  if (c.score_growth != 0) grow_scores(c, q, k, v);

  auto dq = upload(to_layout(q, c, c.seqlen_q));
  auto dk = upload(to_layout(k, c, c.seqlen_k));
  auto dv = upload(to_layout(v, c, c.seqlen_k));
  auto dout = poisoned(q_elems * dtype_size(c.dtype));
  auto dlse = poisoned(size_t(c.batch) * c.heads * c.seqlen_q * sizeof(float));
  driver::DeviceBuffer dlens;
  Problem p = p0;
  if (!c.seqlens_k.empty()) {
    std::vector<char> bytes(c.seqlens_k.size() * sizeof(int));
    std::memcpy(bytes.data(), c.seqlens_k.data(), bytes.size());
    dlens = upload(bytes);
    p.seqlens_k = static_cast<const int*>(dlens.ptr());
  }

  ForwardArgs a;
  a.problem = p;
  a.q = view(dq, c, c.seqlen_q);
  a.k = view(dk, c, c.seqlen_k);
  a.v = view(dv, c, c.seqlen_k);
  a.o = view(dout, c, c.seqlen_q);
  a.lse = static_cast<float*>(dlse.ptr());
  auto info = ctx.forward(a);
  if (!info) throw std::runtime_error(info.error().message);
  if (auto r = driver::context_synchronize(); !r) throw std::runtime_error(r.error().message);

  const auto out = from_layout(download(dout), c, c.seqlen_q);
  std::vector<float> lse(size_t(c.batch) * c.heads * c.seqlen_q);
  {
    auto bytes = download(dlse);
    std::memcpy(lse.data(), bytes.data(), bytes.size());
  }

  ForwardCheck check;
  check.spec = info->spec.to_string();
  check.grid_ctas = info->grid_ctas;
  check.schedule = info->schedule;
  const std::vector<int> rows = rows_to_check(c);
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  for (int b = 0; b < c.batch; ++b) {
    const int sk = c.key_len(b);
    bench::RefShape shape{1, c.heads, c.seqlen_q, std::max(sk, 1), c.head_dim, c.causal, scale};
    std::vector<double> ro(size_t(c.seqlen_q) * c.heads * c.head_dim, 0.0);
    std::vector<double> rl(size_t(c.heads) * c.seqlen_q, -std::numeric_limits<double>::infinity());
    if (sk > 0) {
      const auto qb = batch_slice(q, c, b, c.seqlen_q, c.seqlen_q);
      const auto kb = batch_slice(k, c, b, c.seqlen_k, sk);
      const auto vb = batch_slice(v, c, b, c.seqlen_k, sk);
      bench::RefSelection sel;
      sel.rows = rows;
      bench::reference_forward(shape, qb.data(), kb.data(), vb.data(), ro.data(), rl.data(), sel,
                               host_threads());
    }
    const std::vector<int> all_rows = [&] {
      if (!rows.empty()) return rows;
      std::vector<int> r(c.seqlen_q);
      for (int i = 0; i < c.seqlen_q; ++i) r[i] = i;
      return r;
    }();
    for (int h = 0; h < c.heads; ++h) {
      for (int i : all_rows) {
        // With per-batch key lengths, causal alignment uses the entry's own length.
        const bool sees_none = sk == 0 || (c.causal && i + sk - c.seqlen_q < 0);
        for (int d = 0; d < c.head_dim; ++d) {
          const double ref = sees_none ? 0.0 : ro[(size_t(i) * c.heads + h) * c.head_dim + d];
          check.o.add(out[((size_t(b) * c.seqlen_q + i) * c.heads + h) * c.head_dim + d], ref);
        }
        const double ref_lse = sees_none ? -std::numeric_limits<double>::infinity()
                                         : rl[size_t(h) * c.seqlen_q + i];
        check.lse.add(lse[(size_t(b) * c.heads + h) * c.seqlen_q + i], ref_lse);
      }
    }
  }
  return check;
}

/// Whether forward launches here take the Hopper kernel: an sm_90 GPU and
/// FLASHJIT_FORCE_MMA unset; else warns (the test reports itself skipped).
bool hopper_forward_applies() {
  const char* forced = std::getenv("FLASHJIT_FORCE_MMA");
  if (shared_context().arch() != Arch::kSm90 || (forced != nullptr && std::string(forced) == "1")) {
    WARN("the Hopper kernel does not apply here");
    return false;
  }
  return true;
}

/// Elements of two device buffers of `dtype` whose bits differ.
size_t bitwise_differences(const driver::DeviceBuffer& a, const driver::DeviceBuffer& b, DType dtype) {
  const auto x = decode(download(a), dtype);
  const auto y = decode(download(b), dtype);
  REQUIRE(x.size() == y.size());
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return differ;
}

/// Random Q, K and V of `c` on the device (seeds seed, seed + 1, seed + 2)
/// and forward arguments over them, O in `o`, on `stream`.
struct DeviceQkv {
  driver::DeviceBuffer q, k, v;
};
DeviceQkv upload_qkv(const AttentionCase& c, uint64_t seed) {
  const size_t q_elems = size_t(c.batch) * c.seqlen_q * c.heads * c.head_dim;
  const size_t k_elems = size_t(c.batch) * c.seqlen_k * c.heads * c.head_dim;
  return DeviceQkv{upload(encode(random_inputs(q_elems, c.dtype, seed), c.dtype)),
                   upload(encode(random_inputs(k_elems, c.dtype, seed + 1), c.dtype)),
                   upload(encode(random_inputs(k_elems, c.dtype, seed + 2), c.dtype))};
}
ForwardArgs forward_args(const AttentionCase& c, const DeviceQkv& in, const driver::DeviceBuffer& o,
                         void* stream) {
  ForwardArgs a;
  a.problem = c.problem();
  a.q = view(in.q, c, c.seqlen_q);
  a.k = view(in.k, c, c.seqlen_k);
  a.v = view(in.v, c, c.seqlen_k);
  a.o = view(o, c, c.seqlen_q);
  a.stream = stream;
  return a;
}

ForwardCheck check_case(const AttentionCase& c, Context& ctx = shared_context()) {
  INFO(c.name());
  ForwardCheck r;
  REQUIRE_NOTHROW(r = run_forward(c, ctx));
  INFO(r.spec << ": rel_err O " << r.o.rel() << ", lse " << r.lse.rel() << ", max_abs " << r.o.max_abs);
  const double tol = forward_tolerance(c.dtype, c.precision);
  CHECK(r.o.nan == 0);
  CHECK(r.lse.nan == 0);
  CHECK(r.lse.inf_mismatch == 0);
  CHECK(r.o.rel() <= tol);
  CHECK(r.lse.rel() <= tol);
  return r;
}


}  // namespace

TEST_CASE("forward: every dtype and head_dim, even and ragged, causal with Sq != Sk", "[gpu][fwd]") {
  for (const Math& m : kMaths) {
    for (int hd : kSupportedHeadDims) {
      struct Len { int sq, sk; bool causal; };
      const Len lens[] = {{128, 128, false}, {1, 1, false},    {17, 17, true},  {600, 1500, true},
                          {1500, 600, true}, {600, 600, false}, {256, 128, false}};
      for (const Len& l : lens) {
        check_case(make_case(m.dtype, m.precision, hd, l.sq, l.sk, l.causal, 7 + hd + l.sq));
      }
    }
  }
}

TEST_CASE("forward: long and ragged sequences of the seed grid", "[gpu][fwd]") {
  for (const Math& m : {kMaths[0], kMaths[2], kMaths[3]}) {
    for (int hd : {64, 128}) {
      for (int s : {1500, 3000, 4096, 8192}) {
        for (bool causal : {false, true}) {
          AttentionCase c;
          c.dtype = m.dtype;
          c.precision = m.precision;
          c.head_dim = hd;
          c.batch = 1;
          c.heads = 2;
          c.seqlen_q = c.seqlen_k = s;
          c.causal = causal;
          c.seed = 100 + s;
          check_case(c);
        }
      }
    }
  }
}

// Plain normal inputs settle each row's max within the first K/V tiles; here
// it keeps moving, so that the online softmax's rescale of O (and any
// skipping of it) runs at every step, for some rows of a warp and not others.
TEST_CASE("forward: scores that grow along the keys keep moving the row max", "[gpu][fwd]") {
  // Not f32-IEEE: scores of up to ~170 nats carry fp32 rounding of ~1e-5 relative, its tolerance.
  for (const Math& m : {kMaths[0], kMaths[1], kMaths[2]}) {
    for (int hd : kSupportedHeadDims) {
      // Growth 3 nats per 128 keys: a row's max moves by 2^8 about every
      // other tile, and in most steps some rows of a warp do and others do
      // not (a numpy model of the tiles: 24-51% of rows, 82-99% of warps per
      // step); growth 6: most rows at every step.
      for (auto [sq, sk, causal, growth] :
           {std::tuple{1000, 1000, false, 3.0}, std::tuple{1500, 600, true, 6.0}, std::tuple{300, 2000, false, 3.0}}) {
        AttentionCase c = make_case(m.dtype, m.precision, hd, sq, sk, causal, 11 + hd + sq);
        c.score_growth = growth;
        check_case(c);
      }
    }
  }
}

TEST_CASE("forward: cross attention both ways, causal and not, several seeds", "[gpu][fwd]") {
  for (uint64_t seed : {1, 2, 3}) {
    for (bool causal : {false, true}) {
      for (auto [sq, sk] : {std::pair{3000, 600}, std::pair{600, 3000}, std::pair{17, 4096},
                            std::pair{4096, 17}}) {
        AttentionCase c;
        c.head_dim = 128;
        c.seqlen_q = sq;
        c.seqlen_k = sk;
        c.causal = causal;
        c.seed = seed;
        check_case(c);
      }
    }
  }
}

TEST_CASE("forward: [B, H, S, D] layout through strides", "[gpu][fwd]") {
  for (const Math& m : kMaths) {
    AttentionCase c;
    c.dtype = m.dtype;
    c.precision = m.precision;
    c.head_dim = 64;
    c.seqlen_q = 600;
    c.seqlen_k = 1500;
    c.causal = true;
    c.bhsd = true;
    check_case(c);
  }
}

TEST_CASE("forward: per-batch key lengths", "[gpu][fwd]") {
  for (bool causal : {false, true}) {
    for (const Math& m : {kMaths[0], kMaths[3]}) {
      AttentionCase c;
      c.dtype = m.dtype;
      c.precision = m.precision;
      c.head_dim = 128;
      c.batch = 4;
      c.seqlen_q = 300;
      c.seqlen_k = 700;
      c.causal = causal;
      c.seqlens_k = {700, 1, 0, 333};
      check_case(c);
    }
  }
}

// The 16-bit non-causal padded kernels with 128-key tiles and two consumers
// take a tile's partial K/V tile first and run its S and softmax 96 keys wide
// when it holds that few keys (kPartialFirst in templates/fwd_wgmma.cuh):
// key counts on both sides of the width, one key, tiles of one step (narrow
// and full), per-batch lengths that pick both widths in one launch, and row
// maxima that move after the narrow step (scores falling along the keys: the
// partial tile, taken first, has the smallest) or settle in it (rising).
// (No comma in the name: Catch2 reads a comma on the command line as two names.)
TEST_CASE("forward: the padded Hopper kernels take the partial K/V tile first at each width", "[gpu][fwd]") {
  if (!hopper_forward_applies()) return;
  int partial_first = 0;
  for (const Math& m : {kMaths[0], kMaths[1]}) {
    for (int hd : {64, 128}) {
      for (int sk : {1, 60, 96, 97, 129, 150, 192, 193, 224, 225, 255, 257, 1500, 3000}) {
        const ForwardCheck r = check_case(make_case(m.dtype, m.precision, hd, 300, sk, false, 31 + hd + sk));
        partial_first += r.spec.find("_noncausal_padded_sm90a_bm128_bn128_w12") != std::string::npos &&
                         r.spec.find("_sk") == std::string::npos;
      }
      AttentionCase ragged = make_case(m.dtype, m.precision, hd, 200, 700, false, 5 + hd);
      ragged.batch = 5;
      ragged.seqlens_k = {700, 129, 225, 97, 192};
      check_case(ragged);
      for (double growth : {6.0, -6.0}) {
        AttentionCase moving = make_case(m.dtype, m.precision, hd, 256, 200, false, 9 + hd);
        moving.score_growth = growth;
        check_case(moving);
      }
    }
  }
  CHECK(partial_first > 0);  // some case took a kernel that takes the partial tile first
}

TEST_CASE("forward: large batch", "[gpu][fwd]") {
  AttentionCase c;
  c.head_dim = 64;
  c.batch = 64;
  c.heads = 2;
  c.seqlen_q = c.seqlen_k = 384;
  check_case(c);
  c.causal = true;
  c.seqlen_k = 200;
  check_case(c);
}

TEST_CASE("forward: sm_90 runs bf16, f16 and f32-tf32 at head_dim 64 and 128 on the Hopper kernel", "[gpu][fwd]") {
  const char* forced = std::getenv("FLASHJIT_FORCE_MMA");
  const bool force_mma = forced != nullptr && std::string(forced) == "1";
  if (shared_context().arch() != Arch::kSm90) {
    WARN("not an sm_90 GPU: the Hopper kernel does not apply");
    return;
  }
  struct Math { DType dtype; Precision precision; };
  for (Math m : {Math{DType::kBF16, Precision::kNative}, Math{DType::kF16, Precision::kNative},
                 Math{DType::kF32, Precision::kTF32}}) {
    for (int hd : {64, 128}) {
      for (bool causal : {false, true}) {
        // 300 keys: not a multiple of 8, so V^T's last key group is partial.
        const AttentionCase c = make_case(m.dtype, m.precision, hd, 700, 300, causal, 11 + hd);
        auto spec = shared_context().spec_for(c.problem(), Direction::kFwd);
        REQUIRE(spec.ok());
        INFO(spec->to_string());
        CHECK(spec->tile.wgmma == !force_mma);
        CHECK(spec->arch == (force_mma ? Arch::kSm90 : Arch::kSm90a));
        check_case(c);
      }
    }
  }
}

TEST_CASE("forward: the persistent Hopper schedules: several tiles per CTA, tiles no key is visible to between them",
          "[gpu][fwd]") {
  // 8 x 4 x 8 query blocks = 256 tiles, about two per SM, in both tile
  // orders (causal: longest first; else head by head), handed out statically
  // and from the global counter. Causal with Sq > Sk leaves the first 5 query
  // blocks without a visible key, and zero key lengths empty whole batch
  // entries: those tiles write zeros without Q while the same CTA's other
  // tiles run the TMA pipeline. bf16 d64/d128 stage O apart from Q; f32-tf32
  // d128 and bf16 d256 stage it in Q's rows.
  if (shared_context().arch() != Arch::kSm90) {
    WARN("the Hopper kernel does not apply here");
    return;
  }
  // FLASHJIT_FWD_SCHEDULE overrides ContextOptions::fwd_schedule.
  const char* env = std::getenv("FLASHJIT_FWD_SCHEDULE");
  const bool schedule_env = env != nullptr && *env != '\0';
  struct Math { DType dtype; Precision precision; int head_dim; };
  for (FwdSchedule schedule : {FwdSchedule::kPersistent, FwdSchedule::kPersistentDynamic}) {
    ContextOptions options;
    options.fwd_schedule = schedule;
    auto ctx = Context::create(options);
    REQUIRE(ctx.ok());
    for (Math m : {Math{DType::kBF16, Precision::kNative, 128}, Math{DType::kBF16, Precision::kNative, 64},
                   Math{DType::kF32, Precision::kTF32, 128}, Math{DType::kBF16, Precision::kNative, 256}}) {
      for (bool causal : {true, false}) {
        AttentionCase c = make_case(m.dtype, m.precision, m.head_dim, 1000, 300, causal, 5 + m.head_dim);
        c.batch = 8;
        c.heads = 4;
        if (!causal) c.seqlens_k = {300, 0, 1, 299, 0, 150, 128, 0};
        INFO(to_string(schedule) << " " << shared_context().spec_for(c.problem(), Direction::kFwd).value().to_string());
        const ForwardCheck r = check_case(c, **ctx);
        if (r.spec.find("_wg") != std::string::npos) {
          CHECK(r.grid_ctas < 256);  // fewer CTAs than tiles
          if (!schedule_env) CHECK(r.schedule == schedule);
        }
      }
    }
  }
}

// For compute-sanitizer (scripts/gpu_check.sh with SANITIZE=1): the same
// hand-over of several tiles per CTA as above, small enough to run under
// racecheck. 32 x 4 x 2 query blocks = 256 tiles on at most 132 CTAs.
TEST_CASE("sanitizer cases: the persistent Hopper schedules, several tiles per CTA", "[gpu][sanitize]") {
  if (shared_context().arch() != Arch::kSm90) {
    WARN("the Hopper kernel does not apply here");
    return;
  }
  // The policy's tiles, and the three-consumer tile forced (192 rows: also
  // two query blocks of 200 queries), whose turns go round three warpgroups;
  // head_dim 256 stages O in Q's rows, TF32 head_dim 128 writes it from
  // registers.
  struct Math { DType dtype; Precision precision; int head_dim; std::optional<TileConfig> tile; };
  for (FwdSchedule schedule : {FwdSchedule::kPersistent, FwdSchedule::kPersistentDynamic, FwdSchedule::kStreamK}) {
    for (const Math& m : {Math{DType::kBF16, Precision::kNative, 128, std::nullopt},
                          Math{DType::kF32, Precision::kTF32, 64, std::nullopt},
                          Math{DType::kBF16, Precision::kNative, 64, TileConfig{192, 128, 16, 4, true}},
                          Math{DType::kBF16, Precision::kNative, 256, std::nullopt},
                          Math{DType::kF32, Precision::kTF32, 128, std::nullopt}}) {
      ContextOptions options;
      options.fwd_schedule = schedule;
      options.fwd_tile = m.tile;
      auto ctx = Context::create(options);
      REQUIRE(ctx.ok());
      for (bool causal : {true, false}) {
        AttentionCase c = make_case(m.dtype, m.precision, m.head_dim, 200, 150, causal, 9 + m.head_dim);
        c.batch = 32;
        c.heads = 4;
        // Stream-K splits tiles only where every batch entry has one key length.
        if (!causal && schedule != FwdSchedule::kStreamK) {
          c.seqlens_k.assign(32, 150);
          for (int b = 0; b < 32; b += 3) c.seqlens_k[b] = b % 2 == 0 ? 0 : 1 + b;
        }
        INFO(to_string(schedule));
        const ForwardCheck r = check_case(c, **ctx);
        if (m.tile) CHECK(r.spec.find("_bm192_") != std::string::npos);
        // FLASHJIT_FWD_SCHEDULE overrides the option (auto or tiles: a CTA per tile).
        if (r.spec.find("_wg") != std::string::npos && r.schedule != FwdSchedule::kOneTilePerCta) {
          CHECK(r.grid_ctas < 256);
        }
      }
    }
  }
}

TEST_CASE("forward: stream-K splits tiles between CTAs, and where it cannot the launch runs persistent",
          "[gpu][fwd]") {
  // More tiles than SMs, not a multiple of them: the last round and a half
  // are dealt by K/V steps, so TF32 tiles are split between two CTAs at
  // every step count here (one step: never split; 3, 6 and 12 steps, twice
  // that at head_dim 64). The kernels without stream-K (causal, and 16-bit
  // where the policy keeps the plain tile) and launches with per-batch key
  // lengths run persistent.
  if (!hopper_forward_applies()) return;
  ContextOptions options;
  options.fwd_schedule = FwdSchedule::kStreamK;
  auto ctx = Context::create(options);
  REQUIRE(ctx.ok());
  struct Shape { int sq, sk, batch, heads; bool causal; bool ragged_keys; bool splits; };
  const Shape shapes[] = {{3000, 300, 2, 4, false, false, true},   {1100, 700, 2, 8, false, false, true},
                          {2048, 128, 1, 9, false, false, true},   {1500, 1500, 1, 12, false, false, true},
                          {1100, 700, 2, 8, true, false, false},   {1100, 700, 2, 8, false, true, false}};
  for (const Math& m : {kMaths[0], kMaths[1], kMaths[2]}) {
    for (int hd : {64, 128, 256}) {
      if (hd == 256 && m.dtype == DType::kF32) continue;
      for (const Shape& sh : shapes) {
        AttentionCase c = make_case(m.dtype, m.precision, hd, sh.sq, sh.sk, sh.causal, 5 + sh.sq + sh.sk + hd);
        c.batch = sh.batch;
        c.heads = sh.heads;
        if (sh.ragged_keys) {
          c.seqlens_k.assign(size_t(sh.batch), sh.sk);
          c.seqlens_k[0] = sh.sk / 3;
        }
        auto spec = (*ctx)->spec_for(c.problem(), Direction::kFwd);
        REQUIRE(spec.ok());
        const long long tiles =
            (long long)((sh.sq + spec->tile.block_m - 1) / spec->tile.block_m) * sh.batch * sh.heads;
        const ForwardCheck r = check_case(c, **ctx);
        INFO(r.spec << " ran " << to_string(r.schedule) << " on " << r.grid_ctas << " CTAs, " << tiles << " tiles");
        REQUIRE(r.spec.find("_wg") != std::string::npos);
        const bool can_split = sh.splits && fwd_wgmma_stream_k(*spec) && fwd_stream_k_tiles(tiles, r.grid_ctas) > 0;
        CHECK(r.schedule == (can_split ? FwdSchedule::kStreamK : FwdSchedule::kPersistent));
      }
    }
  }
}

TEST_CASE("forward: the 16-bit kernels with split tiles (_sk) match the reference split or not", "[gpu][fwd]") {
  // The policy's tiles with stream-K's code (TileConfig::stream_k), forced:
  // head_dim 64's three-consumer and head_dim 128's two-consumer tile. Under
  // the auto and stream-K schedules they split wherever the tiles leave a
  // partial round (1, 3, 6, 9 and 8 steps of 128 keys per tile; one even
  // spec); persistent and unsplit with per-batch key lengths or under the
  // persistent schedule; causal launches cannot take them and keep the
  // policy's.
  if (!hopper_forward_applies()) return;
  struct Shape { int sq, sk, batch, heads; bool causal; bool ragged_keys; };
  const Shape shapes[] = {{3000, 100, 2, 5, false, false}, {1100, 300, 2, 12, false, false},
                          {2048, 700, 1, 13, false, false}, {1500, 1100, 3, 9, false, false},
                          {1536, 1024, 2, 12, false, false}, {1100, 700, 2, 12, true, false},
                          {1100, 700, 2, 12, false, true}};
  struct SplitTile { int head_dim; TileConfig tile; const char* suffix; };
  const SplitTile split_tiles[] = {{64, TileConfig{192, 128, 16, 4, true, true}, "_bm192_bn128_w16_s4_wg_sk"},
                                   {128, TileConfig{128, 128, 12, 2, true, true}, "_bm128_bn128_w12_s2_wg_sk"}};
  for (const SplitTile& st : split_tiles) {
    for (FwdSchedule schedule : {FwdSchedule::kAuto, FwdSchedule::kPersistent, FwdSchedule::kStreamK}) {
      ContextOptions options;
      options.fwd_tile = st.tile;
      options.fwd_schedule = schedule;
      auto ctx = Context::create(options);
      REQUIRE(ctx.ok());
      for (const Math& m : {kMaths[0], kMaths[1]}) {  // bf16, f16
        if (st.head_dim == 128 && m.dtype != DType::kBF16 && schedule != FwdSchedule::kAuto) continue;
        for (const Shape& sh : shapes) {
          AttentionCase c =
              make_case(m.dtype, m.precision, st.head_dim, sh.sq, sh.sk, sh.causal, 11 + sh.sq + sh.sk + st.head_dim);
          c.batch = sh.batch;
          c.heads = sh.heads;
          if (sh.ragged_keys) {
            c.seqlens_k.assign(size_t(sh.batch), sh.sk);
            c.seqlens_k[0] = sh.sk / 3;
          }
          const ForwardCheck r = check_case(c, **ctx);
          const long long tiles =
              (long long)((sh.sq + st.tile.block_m - 1) / st.tile.block_m) * sh.batch * sh.heads;
          INFO(r.spec << " ran " << to_string(r.schedule) << " on " << r.grid_ctas << " CTAs, " << tiles
                      << " tiles");
          if (sh.causal) {
            CHECK(r.spec.find("_sk") == std::string::npos);
            continue;
          }
          REQUIRE(r.spec.find(st.suffix) != std::string::npos);
          const long long ctas = std::min<long long>(tiles, r.grid_ctas);
          const bool splits =
              !sh.ragged_keys && schedule != FwdSchedule::kPersistent && fwd_stream_k_tiles(tiles, ctas) > 0;
          CHECK(r.schedule == (splits ? FwdSchedule::kStreamK : FwdSchedule::kPersistent));
        }
      }
    }
  }
}

TEST_CASE("forward: stream-K replayed from a CUDA graph with new inputs each time matches the eager call",
          "[gpu][fwd]") {
  // A graph replays the launch with the same epoch and the same scratch, so
  // the split tiles' flags must be cleared once read (fwd_wgmma.cuh,
  // merge_partial). New inputs before every replay: a part read from the
  // previous replay would differ from the eager result.
  if (!hopper_forward_applies()) return;
  AttentionCase c = make_case(DType::kF32, Precision::kTF32, 128, 600, 600, false, 71);
  c.batch = 4;
  c.heads = 8;  // 160 tiles: 1.21 rounds of the H200's 132 SMs
  const size_t elems = size_t(c.batch) * c.seqlen_q * c.heads * c.head_dim;
  DeviceQkv in = upload_qkv(c, 71);
  auto o_eager = poisoned(elems * 4);
  auto o_graph = poisoned(elems * 4);
  auto stream = driver::stream_create();
  REQUIRE(stream.ok());
  ForwardArgs a = forward_args(c, in, o_graph, *stream);
  auto first = shared_context().forward(a);  // compiles and loads outside the capture
  REQUIRE(first.ok());
  INFO(first->spec.to_string() << " ran " << to_string(first->schedule));
  if (first->schedule != FwdSchedule::kStreamK) WARN("stream-K does not pay on this GPU's SM count");

  REQUIRE(driver::begin_capture(*stream).ok());
  auto captured = shared_context().forward(a);
  auto graph = driver::end_capture_and_instantiate(*stream);
  REQUIRE(captured.ok());
  REQUIRE(graph.ok());
  for (int replay = 0; replay < 3; ++replay) {
    INFO("replay " << replay);
    for (auto* buf : {&in.q, &in.k, &in.v}) {
      const auto bytes =
          encode(random_inputs(elems, c.dtype, 100 + 10 * replay + (buf == &in.k) + 2 * (buf == &in.v)), c.dtype);
      REQUIRE(driver::memcpy_htod(buf->get(), bytes.data(), bytes.size()).ok());
    }
    REQUIRE(driver::memset_d8_async(o_graph.get(), 0xff, elems * 4, *stream).ok());
    REQUIRE(driver::graph_launch(*graph, *stream).ok());
    REQUIRE(driver::stream_synchronize(*stream).ok());
    a.o = view(o_eager, c, c.seqlen_q);
    REQUIRE(shared_context().forward(a).ok());
    a.o = view(o_graph, c, c.seqlen_q);
    REQUIRE(driver::stream_synchronize(*stream).ok());
    CHECK(bitwise_differences(o_eager, o_graph, c.dtype) == 0);
  }
  driver::graph_destroy(*graph);
  driver::stream_destroy(*stream);
}

TEST_CASE("forward: a layout the TMA cannot describe falls back to mma.sync with a warning", "[gpu][fwd]") {
  if (!hopper_forward_applies()) return;
  // One query row whose seq stride is 2^40 elements: valid (a stride of an
  // axis of extent 1 is never stepped) but past the TMA's 2^40-byte limit.
  std::vector<std::string> warnings;
  ContextOptions options;
  options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  auto ctx = Context::create(options);
  REQUIRE(ctx.ok());
  const AttentionCase c = make_case(DType::kBF16, Precision::kNative, 128, 1, 300, false, 5);
  const size_t q_elems = size_t(c.batch) * c.heads * c.head_dim;
  const size_t k_elems = q_elems * c.seqlen_k;
  auto dq = upload(encode(random_inputs(q_elems, c.dtype, 51), c.dtype));
  auto dk = upload(encode(random_inputs(k_elems, c.dtype, 52), c.dtype));
  auto dv = upload(encode(random_inputs(k_elems, c.dtype, 53), c.dtype));
  auto o_tma = poisoned(q_elems * 2);
  auto o_fallback = poisoned(q_elems * 2);

  ForwardArgs a;
  a.problem = c.problem();
  a.q = view(dq, c, 1);
  a.k = view(dk, c, c.seqlen_k);
  a.v = view(dv, c, c.seqlen_k);
  a.o = view(o_tma, c, 1);
  auto tma = shared_context().forward(a);
  REQUIRE(tma.ok());
  CHECK(tma->spec.tile.wgmma);

  constexpr int64_t kHugeStride = int64_t(1) << 40;
  a.q.seq_stride = kHugeStride;
  a.o = view(o_fallback, c, 1);
  a.o.seq_stride = kHugeStride;
  auto fallback = (*ctx)->forward(a);
  REQUIRE(fallback.ok());
  INFO(fallback->spec.to_string());
  CHECK_FALSE(fallback->spec.tile.wgmma);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("cuTensorMapEncodeTiled"));
  CHECK_THAT(warnings[0], Catch::Contains("mma.sync"));
  REQUIRE(driver::context_synchronize().ok());

  // Both kernels computed the same attention.
  const auto x = decode(download(o_tma), c.dtype);
  const auto y = decode(download(o_fallback), c.dtype);
  ErrorNorm diff;
  for (size_t i = 0; i < x.size(); ++i) diff.add(y[i], x[i]);
  CHECK(diff.nan == 0);
  CHECK(diff.rel() <= forward_tolerance(c.dtype, c.precision));
}

TEST_CASE("forward: f32 on the Hopper kernel captured in a CUDA graph matches the eager call", "[gpu][fwd]") {
  // The TF32 Hopper forward allocates V^T from a stream-ordered pool: inside a
  // capture that becomes graph memory nodes, which must replay correctly.
  const AttentionCase c = make_case(DType::kF32, Precision::kTF32, 128, 300, 333, false, 21);
  const size_t q_elems = size_t(c.batch) * c.seqlen_q * c.heads * c.head_dim;
  const DeviceQkv in = upload_qkv(c, 61);
  auto o_eager = poisoned(q_elems * 4);
  auto o_graph = poisoned(q_elems * 4);
  auto stream = driver::stream_create();
  REQUIRE(stream.ok());

  ForwardArgs a = forward_args(c, in, o_eager, *stream);
  auto eager = shared_context().forward(a);  // compiles and loads outside the capture
  REQUIRE(eager.ok());
  const bool hopper = eager->spec.tile.wgmma;
  INFO(eager->spec.to_string());
  const char* forced = std::getenv("FLASHJIT_FORCE_MMA");
  const bool force_mma = forced != nullptr && std::string(forced) == "1";
  if (shared_context().arch() == Arch::kSm90) CHECK(hopper == !force_mma);
  // V^T: [B, H, D, keys rounded up to 32] floats, after the 256 bytes of
  // the tile counter where the schedule is dynamic.
  const size_t vt_bytes = size_t(c.batch) * c.heads * c.head_dim * 352 * sizeof(float) +
                          (eager->schedule == FwdSchedule::kPersistentDynamic ? 256 : 0);
  CHECK(shared_context().forward_scratch_size(a.problem).value() == (hopper ? vt_bytes : 0));

  a.o = view(o_graph, c, c.seqlen_q);
  REQUIRE(driver::begin_capture(*stream).ok());
  auto captured = shared_context().forward(a);
  auto graph = driver::end_capture_and_instantiate(*stream);
  REQUIRE(captured.ok());
  REQUIRE(graph.ok());
  for (int replay = 0; replay < 2; ++replay) REQUIRE(driver::graph_launch(*graph, *stream).ok());
  REQUIRE(driver::stream_synchronize(*stream).ok());
  driver::graph_destroy(*graph);
  driver::stream_destroy(*stream);

  CHECK(bitwise_differences(o_eager, o_graph, c.dtype) == 0);  // same kernels, same inputs: bitwise equal
  check_case(c);  // and the eager path is right against the float64 reference
}

TEST_CASE("forward: head_dim 256 on the Hopper kernel", "[gpu][fwd]") {
  if (!hopper_forward_applies()) return;
  Context& ctx = shared_context();
  for (DType dt : {DType::kBF16, DType::kF16}) {
    struct Len { int sq, sk; bool causal; };
    for (const Len& l : {Len{128, 128, false}, Len{17, 17, true}, Len{600, 1500, true}, Len{1500, 600, true},
                         Len{300, 333, false}, Len{1024, 1024, false}}) {
      const AttentionCase c = make_case(dt, Precision::kNative, 256, l.sq, l.sk, l.causal, 31 + l.sq);
      auto spec = ctx.spec_for(c.problem(), Direction::kFwd);
      REQUIRE(spec.ok());
      INFO(spec->to_string());
      CHECK(spec->tile.wgmma);
      check_case(c, ctx);
    }
  }
}

TEST_CASE("forward: the length-picked Hopper tiles and head_dim 256's, forced, at every schedule and length",
          "[gpu][fwd]") {
  // The policy takes the first three tiles only for some lengths and batch
  // sizes (fwd_wgmma_tile_for_shape): three consumer warpgroups at head_dim
  // 64, 160 and 176 keys at head_dim 128 (176: O staged in Q's rows); the
  // fourth is head_dim 256's (80 keys, O staged in Q's rows). Forced here,
  // each runs every length the other tiles run: single rows, a partial last
  // query block, causal with Sq != Sk both ways (query blocks no key is
  // visible to), per-batch key lengths with empty entries, several tiles per
  // CTA, and each schedule.
  if (!hopper_forward_applies()) return;
  struct Forced { TileConfig tile; int head_dim; const char* suffix; };
  for (const Forced& f : {Forced{TileConfig{192, 128, 16, 4, true}, 64, "_bm192_bn128_w16_s4_wg"},
                          Forced{TileConfig{128, 160, 12, 2, true}, 128, "_bm128_bn160_w12_s2_wg"},
                          Forced{TileConfig{128, 176, 12, 2, true}, 128, "_bm128_bn176_w12_s2_wg"},
                          Forced{TileConfig{128, 80, 12, 2, true}, 256, "_bm128_bn80_w12_s2_wg"}}) {
    for (FwdSchedule schedule :
         {FwdSchedule::kPersistent, FwdSchedule::kPersistentDynamic, FwdSchedule::kOneTilePerCta}) {
      ContextOptions options;
      options.fwd_tile = f.tile;
      options.fwd_schedule = schedule;
      auto ctx = Context::create(options);
      REQUIRE(ctx.ok());
      for (DType dt : {DType::kBF16, DType::kF16}) {
        struct Len { int sq, sk; bool causal; int batch, heads; bool ragged_keys; };
        for (const Len& l : {Len{1, 1, false, 1, 1, false}, Len{17, 17, true, 1, 2, false},
                             Len{192, 352, false, 2, 2, false}, Len{384, 256, true, 2, 2, false},
                             Len{600, 1500, true, 1, 2, false}, Len{1500, 600, true, 1, 2, false},
                             Len{1000, 300, false, 8, 4, true}, Len{1000, 300, true, 8, 4, false},
                             Len{3000, 3000, false, 2, 2, false}, Len{4096, 4096, true, 1, 2, false}}) {
          AttentionCase c = make_case(dt, Precision::kNative, f.head_dim, l.sq, l.sk, l.causal, 41 + l.sq + l.sk);
          c.batch = l.batch;
          c.heads = l.heads;
          if (l.ragged_keys) c.seqlens_k = {300, 0, 1, 299, 0, 150, 128, 0};
          INFO(to_string(schedule));
          const ForwardCheck r = check_case(c, **ctx);
          CHECK(r.spec.find(f.suffix) != std::string::npos);
        }
      }
    }
  }
}
