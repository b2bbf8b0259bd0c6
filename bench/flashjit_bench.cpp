// flashjit-bench: times flashjit's forward and forward+backward on the seed
// benchmark's grid (../shared/seed/attention_h100.json) and writes rows in the
// seed's JSON schema, plus flashjit's own fields (compile breakdown, spec, tile,
// registers, graph replay time).
//
// For each row: compile the row's specs with an empty disk cache (a temp dir
// made at start), time a fresh Context's disk-hit load, run once on poisoned
// outputs and check against the float64 CPU reference (bench/reference.h), then
// time `inner` back-to-back calls with events (rotating among input sets larger
// than the L2 together) and the same calls replayed from a CUDA graph.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/reference.h"
#include "runtime/driver.h"
#include "runtime/flashjit.h"
#include "runtime/nvrtc.h"

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace flashjit::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
/// Bytes every sub-buffer of an input set is aligned to (the kernels need 16;
/// 256 matches cudaMalloc's alignment).
constexpr size_t kBufferAlign = 256;
/// Forward FLOPs: QK^T and PV, 2 FLOPs per multiply-add each.
constexpr double kFwdFlopsPerElem = 4.0;
/// The seed's convention: forward+backward costs 3.5 forwards (2.5 for the
/// backward's five matrix products over the forward's two).
constexpr double kFwdBwdFlopFactor = 3.5;

// ---------------------------------------------------------------------------
// Options and the grid
// ---------------------------------------------------------------------------

struct Options {
  int batch = 4;
  int heads = 8;
  std::vector<int> head_dims = {64, 128};
  std::vector<int> seqs = {128, 512, 1024, 2048, 4096, 8192, 600, 1500, 3000};
  std::vector<int> seq_k;  ///< empty: seq_k = seq
  std::vector<std::string> dtypes = {"bfloat16", "float32"};
  std::vector<std::string> modes = {"fwd", "fwd_bwd"};
  std::vector<int> causal = {0, 1};
  std::vector<std::string> impls = {"flashjit", "flashjit_ieee"};
  std::string tag;
  std::string out;
  std::string config_file;
  std::string cache_dir;  ///< empty: a fresh temp dir
  bool keep_cache = false;
  bool list = false;
  bool quick = false;
  bool deterministic = false;
  bool no_graph = false;
  bool no_check = false;
  std::string arch = "sm90";  ///< for --list without a GPU (what the library picked on the H200)
  int device = 0;
  double target_ms = 50;
  int reps = 7;
  int warmup = 3;
  // Load before timing: the H200 holds its boost clock for the first ~50 ms
  // under full load, then its power cap (700 W) brings the clock to about
  // 1.75 GHz (run 21 of bench/results/2026-12-04-h200-run21). Timing from a
  // cold start mixes both states; every impl is timed in the sustained one.
  double sustain_ms = 200;
  int graph_reps = 5;
  int graph_max_calls = 1000;
  int max_inner = 10000;
  double rotate_l2_factor = 3.0;
  int max_sets = 128;
  int ref_rows = 256;
  int ref_full_seq = 1024;
  int threads = 0;  ///< 0: hardware threads, at most 16
  uint64_t seed = 0;
  double max_seconds = 0;  ///< 0: no limit
};

struct RowSpec {
  std::string impl;
  std::string dtype_name;
  DType dtype = DType::kBF16;
  Precision precision = Precision::kNative;
  int head_dim = 0;
  int seq = 0;
  int seq_k = 0;
  bool causal = false;
  std::string mode;
  int batch = 0;
  int heads = 0;

  bool backward() const { return mode == "fwd_bwd"; }
  std::string label() const {
    std::string s = fmt::format("{} {} d{} s{}", impl, dtype_name, head_dim, seq);
    if (seq_k != seq) s += fmt::format("x{}", seq_k);
    return s + fmt::format(" {} {}", causal ? "causal" : "noncausal", mode);
  }
};

std::string canonical_dtype(const std::string& name) {
  const auto d = parse_dtype(name);
  if (!d) throw std::runtime_error(fmt::format("unknown dtype '{}' (bfloat16, float16, float32)", name));
  switch (*d) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    case DType::kF32: return "float32";
  }
  return name;
}

std::vector<RowSpec> build_grid(const Options& o) {
  std::vector<RowSpec> rows;
  for (const auto& dname : o.dtypes) {
    const std::string dtype_name = canonical_dtype(dname);
    const DType dtype = *parse_dtype(dtype_name);
    for (int d : o.head_dims)
      for (int c : o.causal)
        for (int s : o.seqs) {
          std::vector<int> sks = o.seq_k.empty() ? std::vector<int>{s} : o.seq_k;
          for (int sk : sks)
            for (const auto& mode : o.modes)
              for (const auto& impl : o.impls) {
                RowSpec r;
                r.impl = impl;
                r.dtype_name = dtype_name;
                r.dtype = dtype;
                if (dtype != DType::kF32) {
                  // 16-bit inputs have one precision; the ieee variant is fp32-only.
                  if (impl != "flashjit") continue;
                  r.precision = Precision::kNative;
                } else {
                  r.precision = impl == "flashjit_ieee" ? Precision::kIEEE : Precision::kTF32;
                }
                r.head_dim = d;
                r.seq = s;
                r.seq_k = sk;
                r.causal = c != 0;
                r.mode = mode;
                r.batch = o.batch;
                r.heads = o.heads;
                rows.push_back(r);
              }
        }
  }
  return rows;
}

/// Reads the seed's config keys (a whole seed result file works too: its
/// "config" object is used). Impls that are not flashjit's are ignored.
void apply_config_file(const std::string& path, Options& o) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot open --config file '{}'", path));
  json j = json::parse(in);
  if (j.contains("config") && j["config"].is_object()) j = j["config"];
  auto ints = [&](const json& v) {
    std::vector<int> r;
    if (v.is_array()) {
      for (const auto& x : v) r.push_back(x.is_boolean() ? int(x.get<bool>()) : x.get<int>());
    } else {
      r.push_back(v.is_boolean() ? int(v.get<bool>()) : v.get<int>());
    }
    return r;
  };
  auto strs = [&](const json& v) {
    std::vector<std::string> r;
    if (v.is_array()) {
      for (const auto& x : v) r.push_back(x.get<std::string>());
    } else {
      r.push_back(v.get<std::string>());
    }
    return r;
  };
  if (j.contains("batch")) o.batch = j["batch"].get<int>();
  if (j.contains("heads")) o.heads = j["heads"].get<int>();
  if (j.contains("head_dims")) o.head_dims = ints(j["head_dims"]);
  if (j.contains("seqs")) {
    o.seqs = ints(j["seqs"]);
  } else if (j.contains("seq_lens") || j.contains("ragged_seq_lens")) {
    o.seqs.clear();
    if (j.contains("seq_lens")) o.seqs = ints(j["seq_lens"]);
    if (j.contains("ragged_seq_lens"))
      for (int s : ints(j["ragged_seq_lens"])) o.seqs.push_back(s);
  }
  if (j.contains("seq_k")) o.seq_k = ints(j["seq_k"]);
  if (j.contains("dtypes")) o.dtypes = strs(j["dtypes"]);
  if (j.contains("modes")) o.modes = strs(j["modes"]);
  if (j.contains("causal")) o.causal = ints(j["causal"]);
  if (j.contains("impls")) {
    std::vector<std::string> mine;
    for (const auto& s : strs(j["impls"]))
      if (s == "flashjit" || s == "flashjit_ieee") mine.push_back(s);
    if (!mine.empty()) o.impls = mine;
  }
  if (j.contains("tag") && j["tag"].is_string()) o.tag = j["tag"].get<std::string>();
  if (j.contains("target_ms")) o.target_ms = j["target_ms"].get<double>();
  if (j.contains("reps")) o.reps = j["reps"].get<int>();
}

void validate_options(const Options& o) {
  auto fail = [](const std::string& m) { throw std::runtime_error(m); };
  if (o.batch < 1) fail(fmt::format("--batch must be >= 1; got {}", o.batch));
  if (o.heads < 1) fail(fmt::format("--heads must be >= 1; got {}", o.heads));
  for (int s : o.seqs)
    if (s < 1) fail(fmt::format("--seqs values must be >= 1; got {}", s));
  for (int s : o.seq_k)
    if (s < 1) fail(fmt::format("--seq-k values must be >= 1; got {}", s));
  for (const auto& m : o.modes)
    if (m != "fwd" && m != "fwd_bwd") fail(fmt::format("--modes takes fwd, fwd_bwd; got '{}'", m));
  for (const auto& i : o.impls)
    if (i != "flashjit" && i != "flashjit_ieee")
      fail(fmt::format("--impls takes flashjit, flashjit_ieee; got '{}'", i));
  for (int c : o.causal)
    if (c != 0 && c != 1) fail(fmt::format("--causal takes 0, 1; got {}", c));
  for (const auto& d : o.dtypes) canonical_dtype(d);
  if (o.reps < 1) fail(fmt::format("--reps must be >= 1; got {}", o.reps));
  if (o.target_ms <= 0) fail(fmt::format("--target-ms must be > 0; got {}", o.target_ms));
  if (!(o.sustain_ms >= 0)) fail(fmt::format("--sustain-ms must be >= 0; got {}", o.sustain_ms));
}

// ---------------------------------------------------------------------------
// Errors inside a row: thrown, caught by the row loop, recorded in the row.
// ---------------------------------------------------------------------------

struct RowError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string describe(const Error& e, const char* what) {
  return fmt::format("{}: {}: {}", what, status_name(e.status), e.message);
}

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) throw RowError(describe(r.error(), what));
  return std::move(r).value();
}
void must(Result<void> r, const char* what) {
  if (!r) throw RowError(describe(r.error(), what));
}

// ---------------------------------------------------------------------------
// Host data: random normal inputs, 16-bit conversions
// ---------------------------------------------------------------------------

uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return uint16_t(u >> 16);
}
float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                                   // below 2^-14: half subnormal
    const float v = std::bit_cast<float>(ax);
    return uint16_t(sign | uint32_t(std::nearbyint(v * 16777216.0f)));  // units of 2^-24
  }
  uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}
float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(float(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// FNV-1a: a stable hash of a row's label (its input seed).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

int host_threads(const Options& o) {
  if (o.threads > 0) return o.threads;
  return std::clamp(int(std::thread::hardware_concurrency()), 1, 16);
}

template <typename F>
void parallel_chunks(size_t n, size_t chunk, int threads, F&& f) {
  const size_t chunks = (n + chunk - 1) / chunk;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t c = next++; c < chunks; c = next++) f(c * chunk, std::min(n, (c + 1) * chunk));
  };
  std::vector<std::thread> pool;
  const int count = std::max(1, std::min<int>(threads, int(chunks)));
  for (int t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

/// Standard normal values (Box-Muller over a counter-based generator, so the
/// values depend only on the seed), rounded to what `dtype` can hold.
std::vector<float> random_normal(size_t n, uint64_t seed, DType dtype, int threads) {
  std::vector<float> out(n);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv2Pow32 = 1.0 / 4294967296.0;
  parallel_chunks(n, size_t(1) << 16, threads, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const uint64_t r = splitmix64(seed * 0x100000001b3ull + i / 2);
      const double u1 = (double(uint32_t(r)) + 1.0) * kInv2Pow32;  // (0, 1]
      const double u2 = double(uint32_t(r >> 32)) * kInv2Pow32;
      const double rad = std::sqrt(-2.0 * std::log(u1));
      const double z = (i % 2 == 0) ? rad * std::cos(kTwoPi * u2) : rad * std::sin(kTwoPi * u2);
      float f = float(z);
      if (dtype == DType::kBF16) f = bf16_to_f32(f32_to_bf16(f));
      if (dtype == DType::kF16) f = f16_to_f32(f32_to_f16(f));
      out[i] = f;
    }
  });
  return out;
}

/// The device bytes of `values` in `dtype`.
std::vector<char> encode(const std::vector<float>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtype_size(dtype));
  if (dtype == DType::kF32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < values.size(); ++i)
      h[i] = dtype == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
  }
  return bytes;
}

std::vector<float> decode(const std::vector<char>& bytes, DType dtype) {
  const size_t n = bytes.size() / dtype_size(dtype);
  std::vector<float> out(n);
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(bytes.data());
    for (size_t i = 0; i < n; ++i) out[i] = dtype == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------

struct EventPair {
  driver::Event start = nullptr, stop = nullptr;
  EventPair() {
    start = must(driver::event_create(), "event_create");
    stop = must(driver::event_create(), "event_create");
  }
  ~EventPair() {
    driver::event_destroy(start);
    driver::event_destroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

struct GraphHandle {
  driver::Graph g = nullptr;
  ~GraphHandle() {
    if (g) driver::graph_destroy(g);
  }
};

size_t align_up(size_t x) { return (x + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

/// Sizes of one input/output set of a row.
struct SetLayout {
  size_t q = 0, kv = 0, lse = 0;  ///< bytes of a q-shaped, k-shaped tensor and of lse
  bool backward = false;
  size_t bytes() const {
    size_t b = 2 * align_up(q) + 2 * align_up(kv);  // q, o; k, v
    if (backward) b += align_up(lse) + 2 * align_up(q) + 2 * align_up(kv);  // lse, dout, dq; dk, dv
    return b;
  }
};

/// One set: q, k, v, o (+ lse, dout, dq, dk, dv) carved from one allocation.
struct DeviceSet {
  driver::DeviceBuffer buf;
  driver::DevicePtr q = 0, k = 0, v = 0, o = 0, lse = 0, dout = 0, dq = 0, dk = 0, dv = 0;

  static DeviceSet create(const SetLayout& l) {
    DeviceSet s;
    s.buf = must(driver::DeviceBuffer::create(l.bytes()), "allocating an input set");
    driver::DevicePtr p = s.buf.get();
    auto take = [&](size_t bytes) {
      const driver::DevicePtr r = p;
      p += align_up(bytes);
      return r;
    };
    s.q = take(l.q);
    s.k = take(l.kv);
    s.v = take(l.kv);
    s.o = take(l.q);
    if (l.backward) {
      s.lse = take(l.lse);
      s.dout = take(l.q);
      s.dq = take(l.q);
      s.dk = take(l.kv);
      s.dv = take(l.kv);
    }
    return s;
  }
};

void* as_ptr(driver::DevicePtr p) { return reinterpret_cast<void*>(p); }

std::vector<char> download(driver::DevicePtr p, size_t bytes) {
  std::vector<char> out(bytes);
  must(driver::memcpy_dtoh(out.data(), p, bytes), "copying results to the host");
  return out;
}

// ---------------------------------------------------------------------------
// Statistics and the FLOP formula (the one the seed uses)
// ---------------------------------------------------------------------------

/// Linear-interpolated percentile (numpy's default), p in [0, 100].
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

double row_flops(const RowSpec& r) {
  double f = kFwdFlopsPerElem * r.batch * r.heads * double(r.seq) * double(r.seq_k) * r.head_dim;
  if (r.causal) f *= 0.5;
  if (r.backward()) f *= kFwdBwdFlopFactor;
  return f;
}

std::string tile_string(const TileConfig& t) {
  return fmt::format("bm{}_bn{}_w{}_s{}", t.block_m, t.block_n, t.num_warps, t.num_stages);
}

// ---------------------------------------------------------------------------
// Errors against the reference
// ---------------------------------------------------------------------------

struct ErrAcc {
  double diff2 = 0, ref2 = 0, max_abs = 0;
  size_t count = 0;
  bool nan = false;
  void add(double got, double ref) {
    if (!std::isfinite(got)) {
      nan = true;
      return;
    }
    const double d = got - ref;
    diff2 += d * d;
    ref2 += ref * ref;
    max_abs = std::max(max_abs, std::abs(d));
    ++count;
  }
  double rel() const {
    if (nan) return std::numeric_limits<double>::quiet_NaN();
    return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  }
};

/// Compares rows [row] of heads `heads` of a [B, S, H, D] tensor.
void compare_rows(ErrAcc& acc, const std::vector<float>& got, const std::vector<double>& ref,
                  const RefShape& s, int seqlen, const std::vector<std::pair<int, int>>& heads,
                  const std::vector<int>& rows) {
  for (const auto& [b, h] : heads)
    for (int i : rows) {
      const size_t off = s.offset(b, i, h, seqlen);
      for (int x = 0; x < s.head_dim; ++x) acc.add(got[off + x], ref[off + x]);
    }
}

std::vector<int> all_rows(int n) {
  std::vector<int> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

std::vector<std::pair<int, int>> all_heads(const RefShape& s) {
  std::vector<std::pair<int, int>> r;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) r.emplace_back(b, h);
  return r;
}

/// The query rows checked on a large problem: the first and last 16 (edge
/// tiles, causal corners) and random ones up to `count`.
std::vector<int> sample_rows(int seqlen, int count, uint64_t seed) {
  if (seqlen <= count) return all_rows(seqlen);
  std::vector<char> taken(seqlen, 0);
  std::vector<int> rows;
  auto take = [&](int i) {
    if (i >= 0 && i < seqlen && !taken[i]) {
      taken[i] = 1;
      rows.push_back(i);
    }
  };
  constexpr int kEdgeRows = 16;
  for (int i = 0; i < kEdgeRows; ++i) {
    take(i);
    take(seqlen - 1 - i);
  }
  for (uint64_t n = 0; int(rows.size()) < count; ++n) take(int(splitmix64(seed + n) % uint64_t(seqlen)));
  std::sort(rows.begin(), rows.end());
  return rows;
}

/// What the correctness check found; filled by a host thread while the GPU times.
struct CheckResult {
  std::string scope;
  std::map<std::string, ErrAcc> tensors;  ///< "o", "dq", "dk", "dv"
  std::vector<std::string> nan_in;        ///< tensors with a NaN anywhere (full check)
  std::string error;
};

/// Host copies of one problem's inputs and the GPU's outputs.
struct HostProblem {
  RefShape shape;
  std::vector<float> q, k, v, dout;
  std::vector<float> o, dq, dk, dv;
};

bool any_nan(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return true;
  return false;
}

// ---------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------

class Bench {
 public:
  Bench(Options opts, std::unique_ptr<Context> ctx, ContextOptions ctx_opts, driver::DeviceInfo dev)
      : o_(std::move(opts)), ctx_(std::move(ctx)), ctx_opts_(std::move(ctx_opts)), dev_(std::move(dev)) {
    stream_ = must(driver::stream_create(), "stream_create");
  }
  ~Bench() { driver::stream_destroy(stream_); }

  json run_row(const RowSpec& r, int index);
  bool context_dead() const { return !dead_reason_.empty(); }
  const std::string& dead_reason() const { return dead_reason_; }
  void check_context_health();
  std::atomic<int>& compiles_seen() { return compiles_seen_; }

 private:
  Problem problem_for(const RowSpec& r, int seq, int seq_k, int batch) const;
  void launch(const Problem& p, const DeviceSet& s, bool backward, driver::DevicePtr ws, size_t ws_bytes,
              bool with_lse, LaunchInfo* info = nullptr);
  void upload_inputs(const RowSpec& r, const Problem& p, const SetLayout& l, const DeviceSet& s,
                     uint64_t seed, HostProblem* keep);
  void correctness_launch(const RowSpec& r, const Problem& p, const SetLayout& l, const DeviceSet& s,
                          driver::DevicePtr ws, size_t ws_bytes, HostProblem& hp, json& row);
  void compile_specs(const std::vector<KernelSpec>& specs, json& row);

  Options o_;
  std::unique_ptr<Context> ctx_;
  ContextOptions ctx_opts_;
  driver::DeviceInfo dev_;
  driver::Stream stream_ = nullptr;
  std::map<std::string, CompileRecord> cold_;  ///< first request of each spec in this run
  std::map<std::string, CompileRecord> warm_;  ///< a fresh Context's request, disk cache filled
  std::string dead_reason_;
  std::atomic<int> compiles_seen_{0};
};

Problem Bench::problem_for(const RowSpec& r, int seq, int seq_k, int batch) const {
  Problem p;
  p.dtype = r.dtype;
  p.precision = r.precision;
  p.batch = batch;
  p.heads = r.heads;
  p.seqlen_q = seq;
  p.seqlen_k = seq_k;
  p.head_dim = r.head_dim;
  p.causal = r.causal;
  return p;
}

void Bench::launch(const Problem& p, const DeviceSet& s, bool backward, driver::DevicePtr ws,
                   size_t ws_bytes, bool with_lse, LaunchInfo* info) {
  const int B = p.batch, H = p.heads, D = p.head_dim;
  ForwardArgs fa{.problem = p,
                 .q = bshd(as_ptr(s.q), B, p.seqlen_q, H, D),
                 .k = bshd(as_ptr(s.k), B, p.seqlen_k, H, D),
                 .v = bshd(as_ptr(s.v), B, p.seqlen_k, H, D),
                 .o = bshd(as_ptr(s.o), B, p.seqlen_q, H, D),
                 .lse = with_lse ? static_cast<float*>(as_ptr(s.lse)) : nullptr,
                 .stream = stream_};
  auto f = ctx_->forward(fa);
  if (!f) throw RowError(describe(f.error(), "forward"));
  if (info) *info = f.value();
  if (!backward) return;
  BackwardArgs ba{.problem = p,
                  .q = fa.q,
                  .k = fa.k,
                  .v = fa.v,
                  .o = fa.o,
                  .dout = bshd(as_ptr(s.dout), B, p.seqlen_q, H, D),
                  .lse = static_cast<const float*>(as_ptr(s.lse)),
                  .dq = bshd(as_ptr(s.dq), B, p.seqlen_q, H, D),
                  .dk = bshd(as_ptr(s.dk), B, p.seqlen_k, H, D),
                  .dv = bshd(as_ptr(s.dv), B, p.seqlen_k, H, D),
                  .workspace = as_ptr(ws),
                  .workspace_bytes = ws_bytes,
                  .deterministic = o_.deterministic,
                  .stream = stream_};
  auto b = ctx_->backward(ba);
  if (!b) throw RowError(describe(b.error(), "backward"));
}

void Bench::upload_inputs(const RowSpec& r, const Problem& p, const SetLayout& l, const DeviceSet& s,
                          uint64_t seed, HostProblem* keep) {
  const int threads = host_threads(o_);
  const size_t nq = l.q / dtype_size(r.dtype), nk = l.kv / dtype_size(r.dtype);
  auto put = [&](driver::DevicePtr dst, size_t n, uint64_t tensor_seed, std::vector<float>* host) {
    std::vector<float> vals = random_normal(n, tensor_seed, r.dtype, threads);
    const std::vector<char> bytes = encode(vals, r.dtype);
    must(driver::memcpy_htod(dst, bytes.data(), bytes.size()), "uploading inputs");
    if (host) *host = std::move(vals);
  };
  put(s.q, nq, seed * 8 + 1, keep ? &keep->q : nullptr);
  put(s.k, nk, seed * 8 + 2, keep ? &keep->k : nullptr);
  put(s.v, nk, seed * 8 + 3, keep ? &keep->v : nullptr);
  if (l.backward) put(s.dout, nq, seed * 8 + 4, keep ? &keep->dout : nullptr);
  (void)p;
}

/// Poisons the outputs (0xFF bytes: NaN in every dtype), runs the row once and
/// copies the outputs back.
void Bench::correctness_launch(const RowSpec& r, const Problem& p, const SetLayout& l, const DeviceSet& s,
                               driver::DevicePtr ws, size_t ws_bytes, HostProblem& hp, json& row) {
  constexpr unsigned char kPoison = 0xFF;
  must(driver::memset_d8_async(s.o, kPoison, l.q, stream_), "poisoning o");
  if (l.backward) {
    must(driver::memset_d8_async(s.lse, kPoison, l.lse, stream_), "poisoning lse");
    must(driver::memset_d8_async(s.dq, kPoison, l.q, stream_), "poisoning dq");
    must(driver::memset_d8_async(s.dk, kPoison, l.kv, stream_), "poisoning dk");
    must(driver::memset_d8_async(s.dv, kPoison, l.kv, stream_), "poisoning dv");
  }
  LaunchInfo info;
  launch(p, s, l.backward, ws, ws_bytes, l.backward, &info);
  row["grid_ctas"] = info.grid_ctas;
  must(driver::stream_synchronize(stream_), "running the correctness launch");
  if (info.compile.outcome != CacheOutcome::kMemoryHit)
    row["launch_cache"] = to_string(info.compile.outcome);  // spec_for/load did not match forward()
  hp.o = decode(download(s.o, l.q), r.dtype);
  if (l.backward) {
    hp.dq = decode(download(s.dq, l.q), r.dtype);
    hp.dk = decode(download(s.dk, l.kv), r.dtype);
    hp.dv = decode(download(s.dv, l.kv), r.dtype);
  }
}

void Bench::compile_specs(const std::vector<KernelSpec>& specs, json& row) {
  double compile_s = 0, codegen_s = 0, nvrtc_s = 0, disk_s = 0, load_s = 0, warm_s = 0;
  bool reused = false;
  std::string outcome, warm_outcome;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string name = specs[i].to_string();
    auto it = cold_.find(name);
    if (it == cold_.end()) {
      it = cold_.emplace(name, must(ctx_->load(specs[i]), "compiling")).first;
    } else {
      reused = true;
    }
    const CompileRecord& c = it->second;
    compile_s += c.compile_s;
    codegen_s += c.codegen_s;
    nvrtc_s += c.nvrtc_s;
    disk_s += c.disk_s;
    load_s += c.load_s;
    outcome = outcome.empty() ? to_string(c.outcome) : outcome + "+" + to_string(c.outcome);
    const char* suffix = i == 0 ? "" : "_bwd";
    row[std::string("registers") + suffix] = c.registers;
    row[std::string("spill_bytes") + suffix] = c.spill_bytes;
    row[std::string("smem_bytes") + suffix] = c.smem_bytes;

    auto w = warm_.find(name);
    if (w == warm_.end()) {
      // A fresh Context on the same cache directory: its first request is
      // served from disk, as in a new process after a warm-up.
      auto fresh = must(Context::create(ctx_opts_), "creating a second Context");
      w = warm_.emplace(name, must(fresh->load(specs[i]), "loading from the disk cache")).first;
    }
    warm_s += w->second.compile_s;
    warm_outcome =
        warm_outcome.empty() ? to_string(w->second.outcome) : warm_outcome + "+" + to_string(w->second.outcome);
  }
  row["compile_s"] = compile_s;
  row["codegen_s"] = codegen_s;
  row["nvrtc_s"] = nvrtc_s;
  row["disk_s"] = disk_s;
  row["load_s"] = load_s;
  row["cache"] = outcome;
  row["compile_reused"] = reused;
  row["warm_compile_s"] = warm_s;
  row["warm_cache"] = warm_outcome;
}

/// A reduced problem for the gradient check: lengths scaled down to about
/// `target`, keeping each length's remainder modulo the tiles (so even stays
/// even and padded stays padded) and the sign of Sq - Sk; `extra` more tile
/// multiples each, for when the smallest maps to other specs (a tile chosen
/// from the key length).
std::pair<int, int> reduced_lengths(int sq, int sk, int target, int lcm_tiles, int extra = 0) {
  const double f = double(target) / double(std::max(sq, sk));
  auto shrink = [&](int s) {
    const int rem = s % lcm_tiles;
    int whole = (int(std::floor(double(s) * f / lcm_tiles)) + extra) * lcm_tiles;
    int r = whole + rem;
    if (r < 1) r = rem > 0 ? rem : lcm_tiles;
    return std::min(r, s);
  };
  return {shrink(sq), shrink(sk)};
}

json Bench::run_row(const RowSpec& r, int index) {
  json row;
  row["impl"] = r.impl;
  row["dtype"] = r.dtype_name;
  row["head_dim"] = r.head_dim;
  row["seq"] = r.seq;
  row["causal"] = r.causal;
  row["mode"] = r.mode;
  row["batch"] = r.batch;
  row["heads"] = r.heads;
  row["tag"] = o_.tag;
  row["seq_k"] = r.seq_k;
  row["precision"] = to_string(r.precision);
  if (r.backward()) row["deterministic"] = o_.deterministic;

  const Problem p = problem_for(r, r.seq, r.seq_k, r.batch);
  const int threads = host_threads(o_);
  const uint64_t row_seed = splitmix64(o_.seed ^ fnv1a(r.label()));

  // --- specs and compile times ---
  std::vector<KernelSpec> specs{must(ctx_->spec_for(p, Direction::kFwd), "spec_for(fwd)")};
  if (r.backward()) specs.push_back(must(ctx_->spec_for(p, Direction::kBwd, o_.deterministic), "spec_for(bwd)"));
  row["spec"] = specs[0].to_string();
  row["tile"] = tile_string(specs[0].tile);
  if (r.backward()) {
    row["spec_bwd"] = specs[1].to_string();
    row["tile_bwd"] = tile_string(specs[1].tile);
  }
  compile_specs(specs, row);

  // --- buffers: one set per rotation slot, plus the backward's workspace ---
  SetLayout layout;
  const size_t es = dtype_size(r.dtype);
  layout.q = size_t(r.batch) * r.seq * r.heads * r.head_dim * es;
  layout.kv = size_t(r.batch) * r.seq_k * r.heads * r.head_dim * es;
  layout.lse = size_t(r.batch) * r.heads * r.seq * sizeof(float);
  layout.backward = r.backward();
  size_t ws_bytes = 0;
  if (r.backward()) ws_bytes = must(ctx_->backward_workspace_size(p, o_.deterministic), "backward_workspace_size");
  // What the forward takes from the Context's stream-ordered pool per call (V^T on the TF32 Hopper path).
  const size_t scratch_bytes = must(ctx_->forward_scratch_size(p), "forward_scratch_size");
  const size_t set_bytes = layout.bytes();
  const double footprint_target = o_.rotate_l2_factor * double(dev_.l2_bytes);
  int nsets = std::clamp(int(std::ceil(footprint_target / double(set_bytes))), 1, std::max(1, o_.max_sets));
  const auto [free_b, total_b] = must(driver::mem_info(), "mem_info");
  (void)total_b;
  const double usable = 0.9 * double(free_b);
  const size_t extra_bytes = ws_bytes + scratch_bytes;
  if (double(set_bytes + extra_bytes) > usable)
    throw RowError(fmt::format("out of memory: one set needs {:.0f} MiB, {:.0f} MiB free",
                               double(set_bytes + extra_bytes) / kMiB, double(free_b) / kMiB));
  nsets = std::min<int>(nsets, int((usable - double(extra_bytes)) / double(set_bytes)));
  row["peak_mb"] = double(set_bytes + extra_bytes) / kMiB;
  row["workspace_mb"] = double(ws_bytes) / kMiB;
  row["scratch_mb"] = double(scratch_bytes) / kMiB;
  row["rotate_sets"] = nsets;
  row["alloc_mb"] = double(set_bytes * nsets + extra_bytes) / kMiB;

  driver::DeviceBuffer ws;
  if (ws_bytes) ws = must(driver::DeviceBuffer::create(ws_bytes), "allocating the workspace");
  std::vector<DeviceSet> sets;
  auto hp = std::make_shared<HostProblem>();
  hp->shape = RefShape{r.batch, r.heads, r.seq, r.seq_k, r.head_dim, r.causal, 1.0 / std::sqrt(double(r.head_dim))};
  for (int i = 0; i < nsets; ++i) {
    sets.push_back(DeviceSet::create(layout));
    upload_inputs(r, p, layout, sets.back(), row_seed + uint64_t(i), i == 0 ? hp.get() : nullptr);
  }

  // --- correctness: poisoned outputs, one launch, reference on host threads ---
  std::future<CheckResult> check;
  if (!o_.no_check) {
    correctness_launch(r, p, layout, sets[0], ws.get(), ws_bytes, *hp, row);
    const bool full = int64_t(r.seq) * r.seq_k <= int64_t(o_.ref_full_seq) * o_.ref_full_seq;

    // Gradients of a large problem are checked on a reduced one of the same specs.
    std::shared_ptr<HostProblem> reduced;
    std::string reduced_note;
    if (r.backward() && !full) {
      int lcm = 1;
      for (const auto& s : specs) lcm = std::lcm(lcm, std::lcm(s.tile.block_m, s.tile.block_n));
      int rb = std::min(r.batch, 2);
      int rq = 0, rk = 0;
      Problem rp;
      bool same = false;
      // One tile multiple more each try, up to the row's own lengths: causal
      // head_dim 64 takes its 192-key tile only above 4096 keys.
      for (int extra = 0; !same; ++extra) {
        const std::pair<int, int> next = reduced_lengths(r.seq, r.seq_k, o_.ref_full_seq, lcm, extra);
        if (extra > 0 && next == std::make_pair(rq, rk)) break;
        std::tie(rq, rk) = next;
        // Past four times the reference's budget, one batch keeps its cost down.
        rb = int64_t(rq) * rk > 4 * int64_t(o_.ref_full_seq) * o_.ref_full_seq ? 1 : std::min(r.batch, 2);
        rp = problem_for(r, rq, rk, rb);
        same = must(ctx_->spec_for(rp, Direction::kFwd), "spec_for(reduced fwd)") == specs[0] &&
               must(ctx_->spec_for(rp, Direction::kBwd, o_.deterministic), "spec_for(reduced bwd)") == specs[1];
      }
      if (same) {
        SetLayout rl = layout;
        rl.q = size_t(rb) * rq * r.heads * r.head_dim * es;
        rl.kv = size_t(rb) * rk * r.heads * r.head_dim * es;
        rl.lse = size_t(rb) * r.heads * rq * sizeof(float);
        const size_t rws_bytes = must(ctx_->backward_workspace_size(rp, o_.deterministic), "workspace (reduced)");
        driver::DeviceBuffer rws;
        if (rws_bytes) rws = must(driver::DeviceBuffer::create(rws_bytes), "allocating the reduced workspace");
        DeviceSet rs = DeviceSet::create(rl);
        reduced = std::make_shared<HostProblem>();
        reduced->shape = RefShape{rb, r.heads, rq, rk, r.head_dim, r.causal, hp->shape.scale};
        upload_inputs(r, rp, rl, rs, row_seed ^ 0x5eedull, reduced.get());
        correctness_launch(r, rp, rl, rs, rws.get(), rws_bytes, *reduced, row);
        reduced_note = fmt::format("grads:reduced_b{}_s{}x{}", rb, rq, rk);
      } else {
        reduced_note = "grads:unchecked(no reduced size maps to the same specs)";
      }
    }

    const int ref_rows = o_.ref_rows;
    check = std::async(std::launch::async, [hp, reduced, full, reduced_note, threads, ref_rows, row_seed,
                                            backward = r.backward()]() {
      CheckResult res;
      try {
        const RefShape& s = hp->shape;
        const std::vector<std::pair<std::string, const std::vector<float>*>> outs = {
            {"o", &hp->o}, {"dq", &hp->dq}, {"dk", &hp->dk}, {"dv", &hp->dv}};
        for (const auto& [name, v] : outs)
          if (!v->empty() && any_nan(*v)) res.nan_in.push_back(name);
        if (reduced)
          for (const auto& [name, v] : std::vector<std::pair<std::string, const std::vector<float>*>>{
                   {"o", &reduced->o}, {"dq", &reduced->dq}, {"dk", &reduced->dk}, {"dv", &reduced->dv}})
            if (any_nan(*v)) res.nan_in.push_back(name + "(reduced)");

        std::vector<double> ref_o(s.q_elems());
        if (backward && full) {
          std::vector<double> ref_dq(s.q_elems()), ref_dk(s.k_elems()), ref_dv(s.k_elems());
          reference_backward(s, hp->q.data(), hp->k.data(), hp->v.data(), hp->dout.data(), ref_o.data(),
                             nullptr, ref_dq.data(), ref_dk.data(), ref_dv.data(), {}, threads);
          const auto heads = all_heads(s);
          compare_rows(res.tensors["o"], hp->o, ref_o, s, s.seqlen_q, heads, all_rows(s.seqlen_q));
          compare_rows(res.tensors["dq"], hp->dq, ref_dq, s, s.seqlen_q, heads, all_rows(s.seqlen_q));
          compare_rows(res.tensors["dk"], hp->dk, ref_dk, s, s.seqlen_k, heads, all_rows(s.seqlen_k));
          compare_rows(res.tensors["dv"], hp->dv, ref_dv, s, s.seqlen_k, heads, all_rows(s.seqlen_k));
          res.scope = "full";
          return res;
        }
        // Forward output: everything when small, else sampled rows of the
        // first and last batch, all heads.
        RefSelection sel;
        if (full) {
          res.scope = "full";
        } else {
          for (int b : {0, s.batch - 1}) {
            for (int h = 0; h < s.heads; ++h) sel.heads.emplace_back(b, h);
            if (s.batch == 1) break;
          }
          sel.rows = sample_rows(s.seqlen_q, ref_rows, row_seed);
          res.scope = fmt::format("o:rows{}_b{}", sel.rows.size(), s.batch == 1 ? "0" : fmt::format("0,{}", s.batch - 1));
        }
        reference_forward(s, hp->q.data(), hp->k.data(), hp->v.data(), ref_o.data(), nullptr, sel, threads);
        compare_rows(res.tensors["o"], hp->o, ref_o, s, s.seqlen_q, sel.heads.empty() ? all_heads(s) : sel.heads,
                     sel.rows.empty() ? all_rows(s.seqlen_q) : sel.rows);
        if (reduced) {
          const RefShape& rs = reduced->shape;
          std::vector<double> r_o(rs.q_elems()), r_dq(rs.q_elems()), r_dk(rs.k_elems()), r_dv(rs.k_elems());
          reference_backward(rs, reduced->q.data(), reduced->k.data(), reduced->v.data(), reduced->dout.data(),
                             r_o.data(), nullptr, r_dq.data(), r_dk.data(), r_dv.data(), {}, threads);
          const auto heads = all_heads(rs);
          compare_rows(res.tensors["o_reduced"], reduced->o, r_o, rs, rs.seqlen_q, heads, all_rows(rs.seqlen_q));
          compare_rows(res.tensors["dq"], reduced->dq, r_dq, rs, rs.seqlen_q, heads, all_rows(rs.seqlen_q));
          compare_rows(res.tensors["dk"], reduced->dk, r_dk, rs, rs.seqlen_k, heads, all_rows(rs.seqlen_k));
          compare_rows(res.tensors["dv"], reduced->dv, r_dv, rs, rs.seqlen_k, heads, all_rows(rs.seqlen_k));
        }
        if (!reduced_note.empty()) res.scope += ";" + reduced_note;
      } catch (const std::exception& e) {
        res.error = e.what();
      }
      return res;
    });
  }

  // --- timing: events around `inner` back-to-back calls, rotating sets ---
  auto call = [&](int it) { launch(p, sets[size_t(it) % sets.size()], r.backward(), ws.get(), ws_bytes, r.backward()); };
  const int compiles_before = compiles_seen_.load();
  for (int i = 0; i < std::max(1, o_.warmup); ++i) call(i);
  must(driver::stream_synchronize(stream_), "warm-up");
  EventPair ev;
  constexpr int kProbeCalls = 3;
  must(driver::event_record(ev.start, stream_), "event_record");
  for (int i = 0; i < kProbeCalls; ++i) call(i);
  must(driver::event_record(ev.stop, stream_), "event_record");
  const double one_ms = double(must(driver::event_elapsed_ms(ev.start, ev.stop), "event_elapsed_ms")) / kProbeCalls;
  const int inner = std::clamp(int(std::ceil(o_.target_ms / std::max(one_ms, 1e-4))), 1, o_.max_inner);
  const int sustain_calls = int(std::min(std::ceil(o_.sustain_ms / std::max(one_ms, 1e-4)), 100000.0));
  for (int i = 0; i < sustain_calls; ++i) call(i);
  std::vector<double> per_call;
  for (int rep = 0; rep < o_.reps; ++rep) {
    must(driver::event_record(ev.start, stream_), "event_record");
    for (int i = 0; i < inner; ++i) call(rep * inner + i);
    must(driver::event_record(ev.stop, stream_), "event_record");
    per_call.push_back(double(must(driver::event_elapsed_ms(ev.start, ev.stop), "event_elapsed_ms")) / inner);
  }
  row["inner"] = inner;
  row["median_ms"] = percentile(per_call, 50);
  row["q1_ms"] = percentile(per_call, 25);
  row["q3_ms"] = percentile(per_call, 75);
  row["rep_ms"] = per_call;  // per call, one per rep, in order: the GPU's clock states show here
  row["tflops"] = row_flops(r) / (percentile(per_call, 50) * 1e9);

  // --- graph replay: the same calls without host dispatch ---
  if (!o_.no_graph) {
    const int ginner = std::clamp(inner, 1, std::max(1, o_.graph_max_calls));
    GraphHandle graph;
    std::string gerr;
    auto begun = driver::begin_capture(stream_);
    if (!begun) {
      gerr = describe(begun.error(), "begin_capture");
    } else {
      try {
        for (int i = 0; i < ginner; ++i) call(i);
      } catch (const std::exception& e) {
        gerr = e.what();
      }
      auto g = driver::end_capture_and_instantiate(stream_);
      if (g) {
        graph.g = g.value();
      } else if (gerr.empty()) {
        gerr = describe(g.error(), "end_capture_and_instantiate");
      }
    }
    if (gerr.empty() && graph.g) {
      must(driver::graph_launch(graph.g, stream_), "graph_launch");
      must(driver::stream_synchronize(stream_), "graph warm-up");
      std::vector<double> g_ms;
      for (int rep = 0; rep < std::max(1, o_.graph_reps); ++rep) {
        must(driver::event_record(ev.start, stream_), "event_record");
        must(driver::graph_launch(graph.g, stream_), "graph_launch");
        must(driver::event_record(ev.stop, stream_), "event_record");
        g_ms.push_back(double(must(driver::event_elapsed_ms(ev.start, ev.stop), "event_elapsed_ms")) / ginner);
      }
      row["graph_ms"] = percentile(g_ms, 50);
      row["graph_inner"] = ginner;
      row["graph_tflops"] = row_flops(r) / (percentile(g_ms, 50) * 1e9);
    } else {
      row["graph_ms"] = nullptr;
      row["graph_error"] = gerr;
    }
  }
  if (compiles_seen_.load() != compiles_before)
    row["warning"] = "a kernel was compiled or loaded during timing (spec_for/load did not cover it)";

  // --- errors ---
  if (check.valid()) {
    CheckResult c = check.get();
    if (!c.error.empty()) throw RowError("reference check: " + c.error);
    double rel = 0, max_abs = 0;
    bool nan = !c.nan_in.empty();
    for (const auto& [name, acc] : c.tensors) {
      row["err_" + name] = acc.rel();
      if (acc.nan) nan = true;
      rel = std::max(rel, acc.rel());
      max_abs = std::max(max_abs, acc.max_abs);
    }
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    row["max_abs_err"] = nan ? kNaN : max_abs;  // NaN is written as null
    row["rel_err"] = nan ? kNaN : rel;
    row["err_scope"] = c.scope;
    // Tolerances: the error bands of METHOD.md with headroom (bf16/f16
    // operands 1e-3..1e-2, tf32 ~3e-4, fp32 far under 1e-3).
    const double tol = r.precision == Precision::kIEEE ? 1e-4 : r.precision == Precision::kTF32 ? 5e-3 : 3e-2;
    row["err_tol"] = tol;
    if (nan) {
      row["check"] = "nan";
      row["nan_in"] = c.nan_in;
    } else {
      row["check"] = rel <= tol ? "ok" : "fail";
    }
  }
  (void)index;
  return row;
}

/// After a failed row: a sticky CUDA error (an illegal address) leaves the
/// context unusable, and every later row would fail the same way.
void Bench::check_context_health() {
  auto s = driver::context_synchronize();
  if (!s) {
    dead_reason_ = describe(s.error(), "CUDA context unusable");
    return;
  }
  auto b = driver::DeviceBuffer::create(kBufferAlign);
  if (!b) dead_reason_ = describe(b.error(), "CUDA context unusable");
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

void write_json_atomic(const std::string& path, const json& doc) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << doc.dump(1) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

std::string fmt_num(const json& v, const char* spec) {
  if (!v.is_number()) return "-";
  return fmt::format(fmt::runtime(spec), v.get<double>());
}

void print_table(const json& rows) {
  fmt::print("{:<14} {:<8} {:>3} {:>6} {:>6} {:>3} {:<7} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:<5}\n", "impl",
             "dtype", "d", "seq", "seq_k", "c", "mode", "median_ms", "TFLOP/s", "graph_ms", "rel_err", "compile_s",
             "warm_s", "check");
  for (const auto& r : rows) {
    const std::string dt = r["dtype"].get<std::string>() == "bfloat16"  ? "bf16"
                           : r["dtype"].get<std::string>() == "float16" ? "f16"
                                                                        : "f32";
    fmt::print("{:<14} {:<8} {:>3} {:>6} {:>6} {:>3} {:<7} ", r["impl"].get<std::string>(), dt,
               r["head_dim"].get<int>(), r["seq"].get<int>(), r.value("seq_k", r["seq"].get<int>()),
               r["causal"].get<bool>() ? 1 : 0, r["mode"].get<std::string>());
    if (r.contains("error")) {
      fmt::print("ERROR {}\n", r["error"].get<std::string>().substr(0, 100));
      continue;
    }
    fmt::print("{:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:<5}\n", fmt_num(r.value("median_ms", json()), "{:.4f}"),
               fmt_num(r.value("tflops", json()), "{:.1f}"), fmt_num(r.value("graph_ms", json()), "{:.4f}"),
               r.contains("rel_err") ? (r["rel_err"].is_null() ? "NaN" : fmt_num(r["rel_err"], "{:.2e}")) : "-",
               fmt_num(r.value("compile_s", json()), "{:.3f}"), fmt_num(r.value("warm_compile_s", json()), "{:.4f}"),
               r.value("check", std::string("-")));
  }
}

std::string now_iso() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string make_tag(const std::string& gpu) {
  std::string t;
  for (char c : gpu) t += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '_';
  return t;
}

json config_json(const Options& o, const std::vector<RowSpec>& rows, const std::string& cache_dir,
                 const std::string& cmdline) {
  json c;
  c["output"] = o.out;
  c["batch"] = o.batch;
  c["heads"] = o.heads;
  c["head_dims"] = o.head_dims;
  std::vector<int> regular, ragged;
  for (int s : o.seqs) (s % 128 == 0 ? regular : ragged).push_back(s);
  c["seq_lens"] = regular;
  c["ragged_seq_lens"] = ragged;
  c["seq_k"] = o.seq_k;
  std::vector<std::string> dts;
  for (const auto& d : o.dtypes) dts.push_back(canonical_dtype(d));
  c["dtypes"] = dts;
  c["modes"] = o.modes;
  c["causal"] = o.causal;
  c["impls"] = o.impls;
  c["tag"] = o.tag;
  c["rows_planned"] = rows.size();
  c["command"] = cmdline;
  c["started"] = now_iso();
  c["cache_dir"] = cache_dir;
  c["target_ms"] = o.target_ms;
  c["reps"] = o.reps;
  c["warmup"] = o.warmup;
  c["sustain_ms"] = o.sustain_ms;
  c["graph_reps"] = o.graph_reps;
  c["graph_max_calls"] = o.graph_max_calls;
  c["deterministic"] = o.deterministic;
  c["seed"] = o.seed;
  c["notes"] = {
      {"impls", "flashjit: bf16 native (fp32 accumulation), float32 as tf32 (TF32 tensor cores, JAX's GPU "
                "default); flashjit_ieee: float32 exact (error-compensated 3xTF32)"},
      {"timing", "CUDA events around `inner` back-to-back calls (inner sized so one repetition takes about "
                 "target_ms), `reps` repetitions; median_ms/q1_ms/q3_ms are per call, dispatch included; rep_ms lists "
                 "every repetition's per-call time in order. Before them, sustain_ms of untimed calls bring the GPU "
                 "to the clock its power cap holds under sustained load. "
                 "Calls rotate among rotate_sets input/output sets whose total exceeds rotate_l2_factor x L2. "
                 "fwd_bwd = forward (with lse) + backward per call."},
      {"graph_ms", "the same calls (at most graph_max_calls) captured into one CUDA graph, replayed "
                   "graph_reps times, median per call: GPU time without host dispatch"},
      {"tflops", "fwd 4*B*H*Sq*Sk*D FLOPs, halved when causal; fwd_bwd 3.5x that (the seed's convention)"},
      {"compile_s", "cost of getting the row's kernels launchable with an EMPTY disk cache (cache_dir is "
                    "fresh): codegen + NVRTC + disk store + module load, summed over the row's specs "
                    "(fwd, and bwd for fwd_bwd). Measured at the first request of each spec in this run; "
                    "rows that reuse a spec report that cost with compile_reused=true. codegen_s/nvrtc_s/"
                    "disk_s/load_s split it."},
      {"warm_compile_s", "a fresh Context on the same (now filled) cache_dir requesting the same specs: disk "
                         "hit + module load, as in a new process after flashjit-warmup"},
      {"peak_mb", "MiB of device memory one call needs, allocated by the benchmark: q, k, v, o (+ lse, dout, "
                  "dq, dk, dv and the backward workspace for fwd_bwd), plus scratch_mb, what the forward "
                  "takes from flashjit's stream-ordered pool per call (V^T for f32 on the Hopper kernel). "
                  "The rotation copies are not in it: alloc_mb has the row's total."},
      {"errors", fmt::format(
                     "against a float64 CPU reference on the same (rounded) inputs; rel_err = "
                     "||out-ref||/||ref||, max over o, dq, dk, dv; max_abs_err over all. err_scope: 'full' = "
                     "every element (Sq*Sk <= {0}^2); 'o:rowsN_b0,B-1' = N query rows (first/last 16 + "
                     "random) of all heads of the first and last batch; 'grads:reduced_bB_sQxK' = gradients "
                     "(and o_reduced) from a reduced problem with the same specs (remainders mod the tiles "
                     "kept). Outputs are poisoned with 0xFF before the checked launch: a NaN anywhere sets "
                     "rel_err/max_abs_err to null and check='nan'. check='fail' when rel_err > err_tol.",
                     o.ref_full_seq)}};
  c["rotate_l2_factor"] = o.rotate_l2_factor;
  c["ref_rows"] = o.ref_rows;
  c["ref_full_seq"] = o.ref_full_seq;
  return c;
}

std::string join_cmdline(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

int list_rows(const Options& o, const std::vector<RowSpec>& rows) {
  ContextOptions co;
  co.cache.disk_enabled = false;
  co.cache.readonly_dirs.clear();
  std::string arch_note;
  if (driver::available() && driver::init(o.device)) {
    arch_note = "the device's arch";
  } else {
    const auto a = flashjit::parse_arch(o.arch);
    if (!a) {
      fmt::print(stderr, "flashjit-bench: --arch must be one of sm80, sm86, sm89, sm90, sm90a; got '{}'\n", o.arch);
      return 1;
    }
    co.arch = *a;
    arch_note = "--arch " + o.arch + " (no GPU)";
  }
  auto ctx = Context::create(co);
  fmt::print("# {} rows; specs for {}\n", rows.size(), arch_note);
  for (const auto& r : rows) {
    std::string specs;
    if (ctx) {
      Problem p;
      p.dtype = r.dtype;
      p.precision = r.precision;
      p.batch = r.batch;
      p.heads = r.heads;
      p.seqlen_q = r.seq;
      p.seqlen_k = r.seq_k;
      p.head_dim = r.head_dim;
      p.causal = r.causal;
      auto f = ctx.value()->spec_for(p, Direction::kFwd);
      specs = f ? f->to_string() : "(spec error: " + f.error().message + ")";
      if (r.backward()) {
        auto b = ctx.value()->spec_for(p, Direction::kBwd, o.deterministic);
        specs += " " + (b ? b->to_string() : "(spec error: " + b.error().message + ")");
      }
    } else {
      specs = "(no Context: " + ctx.error().message + ")";
    }
    fmt::print("{:<14} {:<8} d{:<3} seq {:>5} seq_k {:>5} causal {} {:<7} {}\n", r.impl, r.dtype_name, r.head_dim,
               r.seq, r.seq_k, r.causal ? 1 : 0, r.mode, specs);
  }
  return 0;
}

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/flashjit-bench-cache-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("cannot create a temp cache dir from " + tmpl);
  return buf.data();
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"flashjit-bench: times flashjit on the seed benchmark's grid and writes the seed's JSON schema"};
  auto* o_dtypes = app.add_option("--dtypes", o.dtypes, "bfloat16,float32 (float16 also accepted)")->delimiter(',');
  auto* o_hd = app.add_option("--head-dims", o.head_dims, "head dims, e.g. 64,128")->delimiter(',');
  auto* o_seqs = app.add_option("--seqs", o.seqs, "query lengths (and key lengths unless --seq-k)")->delimiter(',');
  auto* o_seqk = app.add_option("--seq-k", o.seq_k, "key lengths (Sq != Sk); each crossed with --seqs")->delimiter(',');
  auto* o_modes = app.add_option("--modes", o.modes, "fwd,fwd_bwd")->delimiter(',');
  auto* o_causal = app.add_option("--causal", o.causal, "0,1")->delimiter(',');
  auto* o_batch = app.add_option("--batch", o.batch, "batch size (default 4)");
  auto* o_heads = app.add_option("--heads", o.heads, "heads (default 8)");
  auto* o_impls = app.add_option("--impls", o.impls, "flashjit,flashjit_ieee (ieee: float32 rows only)")->delimiter(',');
  app.add_option("--config", o.config_file, "JSON with the seed's config keys (a seed result file works too)");
  auto* o_tag = app.add_option("--tag", o.tag, "row tag (default: the GPU name)");
  app.add_option("--out", o.out, "write the JSON here (rewritten after every row)");
  app.add_flag("--quick", o.quick, "a tiny grid for smoke tests (flags given still apply)");
  app.add_flag("--list", o.list, "print the rows (and their specs) without running; needs no GPU");
  app.add_option("--arch", o.arch, "arch for --list without a GPU (sm80, sm86, sm89, sm90, sm90a)");
  app.add_option("--device", o.device, "CUDA device ordinal");
  app.add_option("--cache-dir", o.cache_dir, "kernel cache dir (default: a fresh temp dir, so compile_s is cold)");
  app.add_flag("--keep-cache", o.keep_cache, "keep the temp cache dir at exit");
  auto* o_target = app.add_option("--target-ms", o.target_ms, "time of one repetition (default 50)");
  auto* o_reps = app.add_option("--reps", o.reps, "repetitions (default 7)");
  app.add_option("--warmup", o.warmup, "warm-up calls (default 3)");
  app.add_option("--sustain-ms", o.sustain_ms,
                 "GPU time of untimed calls right before the timed ones, so that every impl is timed at the "
                 "clock the power cap holds under sustained load (default 200; 0: none)");
  app.add_option("--graph-reps", o.graph_reps, "graph replays timed (default 5)");
  app.add_option("--graph-max-calls", o.graph_max_calls, "calls captured in the graph at most (default 1000)");
  app.add_option("--max-inner", o.max_inner, "calls per repetition at most (default 10000)");
  app.add_option("--rotate-l2-factor", o.rotate_l2_factor, "rotation footprint in units of the L2 (default 3)");
  app.add_option("--max-sets", o.max_sets, "rotation sets at most (default 128)");
  app.add_option("--ref-rows", o.ref_rows, "query rows checked on large problems (default 256)");
  app.add_option("--ref-full-seq", o.ref_full_seq, "full check when Sq*Sk <= this^2 (default 1024)");
  app.add_option("--threads", o.threads, "host threads for the reference (default: cores, at most 16)");
  app.add_option("--seed", o.seed, "random seed (default 0)");
  app.add_flag("--deterministic", o.deterministic, "deterministic backward (no atomics)");
  app.add_flag("--no-graph", o.no_graph, "skip the graph-replay timing");
  app.add_flag("--no-check", o.no_check, "skip the correctness check");
  app.add_option("--max-seconds", o.max_seconds, "start no new row after this many seconds (0: no limit)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    // Precedence: defaults < --quick < --config < flags given.
    Options flags = o;
    if (o.quick) {
      o.batch = 2;
      o.heads = 4;
      o.head_dims = {64};
      o.seqs = {256, 300};
      o.target_ms = 10;
      o.reps = 3;
    }
    if (!o.config_file.empty()) apply_config_file(o.config_file, o);
    if (o_dtypes->count()) o.dtypes = flags.dtypes;
    if (o_hd->count()) o.head_dims = flags.head_dims;
    if (o_seqs->count()) o.seqs = flags.seqs;
    if (o_seqk->count()) o.seq_k = flags.seq_k;
    if (o_modes->count()) o.modes = flags.modes;
    if (o_causal->count()) o.causal = flags.causal;
    if (o_batch->count()) o.batch = flags.batch;
    if (o_heads->count()) o.heads = flags.heads;
    if (o_impls->count()) o.impls = flags.impls;
    if (o_tag->count()) o.tag = flags.tag;
    if (o_target->count()) o.target_ms = flags.target_ms;
    if (o_reps->count()) o.reps = flags.reps;
    validate_options(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashjit-bench: {}\n", e.what());
    return 1;
  }
  const std::vector<RowSpec> rows = build_grid(o);
  if (o.list) return list_rows(o, rows);

  // --- the GPU ---
  auto init = driver::init(o.device);
  if (!init) {
    fmt::print(stderr, "flashjit-bench: no usable GPU ({}): {}\n", status_name(init.status()), init.error().message);
    return 2;
  }
  auto dev = driver::device_info(o.device);
  if (!dev) {
    fmt::print(stderr, "flashjit-bench: device_info: {}\n", dev.error().message);
    return 2;
  }
  if (o.tag.empty()) o.tag = make_tag(dev->name);

  std::string cache_dir = o.cache_dir;
  const bool temp_cache = cache_dir.empty();
  try {
    if (temp_cache) cache_dir = make_temp_dir();
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashjit-bench: {}\n", e.what());
    return 1;
  }

  std::atomic<int>* compiles = nullptr;
  ContextOptions co;
  co.device = o.device;
  co.cache = CacheOptions::from_env();
  co.cache.dir = cache_dir;
  co.cache.readonly_dirs.clear();  // a shipped pack must not serve "cold" requests
  co.cache.disk_enabled = true;
  co.on_warning = [](const std::string& w) { fmt::print(stderr, "\nflashjit warning: {}\n", w); };
  // The second Contexts (warm_compile_s) share these options but not the counter.
  ContextOptions warm_opts = co;
  co.on_compile = [&compiles](const CompileRecord&) {
    if (compiles) ++*compiles;
  };
  auto ctx = Context::create(co);
  if (!ctx) {
    fmt::print(stderr, "flashjit-bench: Context::create: {}\n", ctx.error().message);
    return 2;
  }

  json doc;
  doc["device"] = {{"device_kind", dev->name},
                   {"gpu", dev->name},
                   {"cc", fmt::format("{}.{}", dev->cc_major, dev->cc_minor)},
                   {"sm_count", dev->sm_count},
                   {"l2_mb", double(dev->l2_bytes) / kMiB},
                   {"total_mem_mb", double(dev->total_mem) / kMiB},
                   {"driver_version", dev->driver_version},
                   {"arch", to_string(ctx.value()->arch())},
                   {"flashjit", version()},
                   {"backend", "gpu"}};
  {
    auto nv = nvrtc::version();
    doc["device"]["nvrtc"] = nv ? nv.value() : std::string("unavailable: ") + nv.error().message;
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) == 0) doc["device"]["host"] = host;
  }
  doc["config"] = config_json(o, rows, cache_dir, join_cmdline(argc, argv));
  doc["results"] = json::array();

  std::unique_ptr<Bench> bench;
  try {
    bench = std::make_unique<Bench>(o, std::move(ctx).value(), warm_opts, dev.value());
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashjit-bench: {}\n", e.what());
    return 2;
  }
  compiles = &bench->compiles_seen();

  const bool tty = isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  int failed = 0, skipped = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.max_seconds > 0 && elapsed > o.max_seconds) {
      skipped = int(rows.size() - i);
      break;
    }
    const RowSpec& r = rows[i];
    fmt::print(stderr, "{}[{}/{}] {:<55}{}", tty ? "\r" : "", i + 1, rows.size(), r.label(), tty ? "" : "\n");
    std::fflush(stderr);
    json row;
    if (bench->context_dead()) {
      row = {{"impl", r.impl}, {"dtype", r.dtype_name}, {"head_dim", r.head_dim}, {"seq", r.seq},
             {"causal", r.causal}, {"mode", r.mode}, {"batch", r.batch}, {"heads", r.heads}, {"tag", o.tag},
             {"seq_k", r.seq_k}, {"error", "skipped: " + bench->dead_reason()}};
    } else {
      try {
        row = bench->run_row(r, int(i));
      } catch (const std::exception& e) {
        row = {{"impl", r.impl}, {"dtype", r.dtype_name}, {"head_dim", r.head_dim}, {"seq", r.seq},
               {"causal", r.causal}, {"mode", r.mode}, {"batch", r.batch}, {"heads", r.heads}, {"tag", o.tag},
               {"seq_k", r.seq_k}, {"error", e.what()}};
        bench->check_context_health();
      }
    }
    if (row.contains("error") || row.value("check", std::string("ok")) != "ok") ++failed;
    std::string status;
    if (row.contains("error")) {
      status = "ERROR " + row["error"].get<std::string>().substr(0, 120);
    } else {
      status = fmt::format("{:.1f} TFLOP/s ({:.4f} ms){}", row["tflops"].get<double>(), row["median_ms"].get<double>(),
                           row.value("check", std::string("ok")) == "ok" ? "" : " CHECK " + row["check"].get<std::string>());
    }
    fmt::print(stderr, "{}[{}/{}] {:<55} {}  {}{}", tty ? "\r" : "", i + 1, rows.size(), r.label(),
               row.value("spec", std::string()), status, tty ? "\x1b[K" : "\n");
    std::fflush(stderr);
    doc["results"].push_back(row);
    doc["config"]["finished"] = now_iso();
    doc["config"]["rows_done"] = doc["results"].size();
    try {
      write_json_atomic(o.out, doc);
    } catch (const std::exception& e) {
      fmt::print(stderr, "\nflashjit-bench: {}\n", e.what());
    }
  }
  if (tty) fmt::print(stderr, "\n");
  doc["config"]["rows_skipped_max_seconds"] = skipped;
  try {
    write_json_atomic(o.out, doc);
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashjit-bench: {}\n", e.what());
  }
  bench.reset();
  print_table(doc["results"]);
  if (skipped) fmt::print("{} rows not started (--max-seconds {})\n", skipped, o.max_seconds);
  if (!o.out.empty()) fmt::print("wrote {}\n", o.out);
  if (temp_cache && !o.keep_cache) {
    std::error_code ec;
    fs::remove_all(cache_dir, ec);
  }
  return failed ? 3 : 0;
}

}  // namespace
}  // namespace flashjit::bench

int main(int argc, char** argv) { return flashjit::bench::run(argc, argv); }
