// One attention problem on the GPU: random inputs, poisoned outputs, the
// flashjit launch, and the comparison with the float64 reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/reference.h"
#include "runtime/flashjit.h"
#include "tests/kernels/gpu_util.h"

namespace flashjit::testing {

struct AttentionCase {
  DType dtype = DType::kBF16;
  Precision precision = Precision::kNative;
  int head_dim = 64;
  bool causal = false;
  int batch = 2, heads = 3, seqlen_q = 128, seqlen_k = 128;
  bool bhsd = false;                 ///< [B, H, S, D] instead of [B, S, H, D]
  std::vector<int> seqlens_k;        ///< per-batch key lengths (empty: none)
  /// Scores that grow along the keys by about this many nats per 128 keys
  /// (negative: fall; 0: plain random inputs); see grow_scores.
  double score_growth = 0;
  uint64_t seed = 1;

  std::string name() const {
    std::ostringstream s;
    s << to_string(dtype) << (dtype == DType::kF32 ? to_string(precision) : "") << " d" << head_dim
      << (causal ? " causal" : "") << " B" << batch << " H" << heads << " Sq" << seqlen_q << " Sk"
      << seqlen_k << (bhsd ? " bhsd" : " bshd") << (seqlens_k.empty() ? "" : " seqlens_k")
      << (score_growth != 0 ? " growth " + std::to_string(score_growth) : "") << " seed" << seed;
    return s.str();
  }
  Problem problem() const {
    Problem p;
    p.dtype = dtype;
    p.precision = precision;
    p.batch = batch;
    p.heads = heads;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.head_dim = head_dim;
    p.causal = causal;
    return p;
  }
  int key_len(int b) const { return seqlens_k.empty() ? seqlen_k : seqlens_k[b]; }
};

/// A case of the default batch and heads.
inline AttentionCase make_case(DType dtype, Precision precision, int head_dim, int seqlen_q,
                               int seqlen_k, bool causal, uint64_t seed) {
  AttentionCase c;
  c.dtype = dtype;
  c.precision = precision;
  c.head_dim = head_dim;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.causal = causal;
  c.seed = seed;
  return c;
}

/// Makes the scores of every row grow along the keys by about
/// c.score_growth nats per 128 keys (fall, where negative): column 0 of Q becomes 2 + |q| (mean about
/// 2.8, one sign for every row) and column 0 of key j becomes g * j. The row
/// max then moves by more than a tile's worth again and again, unlike with
/// plain normal inputs, where it settles in the first tiles. TF32 cases take
/// inputs that TF32 represents exactly: else the rounding of scores of tens
/// of nats would dominate the error. Q, K and V are [B, S, H, D].
inline void grow_scores(const AttentionCase& c, std::vector<float>& q, std::vector<float>& k,
                        std::vector<float>& v) {
  const int D = c.head_dim;
  const double g = c.score_growth * std::sqrt(double(D)) / (2.8 * 128.0);
  for (size_t i = 0; i < q.size(); i += D) q[i] = round_to(c.dtype, 2.f + std::fabs(q[i]));
  for (size_t i = 0; i < k.size(); i += D) {
    const size_t key = (i / D / c.heads) % c.seqlen_k;
    k[i] = round_to(c.dtype, float(g * double(key)));
  }
  if (c.precision == Precision::kTF32) {
    for (auto* t : {&q, &k, &v})
      for (float& x : *t) x = round_to_tf32(x);
  }
}

/// [B, S, H, D] host data -> device bytes in the case's layout.
inline std::vector<char> to_layout(const std::vector<float>& bshd_data, const AttentionCase& c, int seq) {
  if (!c.bhsd) return encode(bshd_data, c.dtype);
  std::vector<float> t(bshd_data.size());
  const int H = c.heads, D = c.head_dim;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < seq; ++s)
      for (int h = 0; h < H; ++h)
        std::copy_n(&bshd_data[((size_t(b) * seq + s) * H + h) * D], D,
                    &t[((size_t(b) * H + h) * seq + s) * D]);
  return encode(t, c.dtype);
}

/// Device bytes in the case's layout -> [B, S, H, D] floats.
inline std::vector<float> from_layout(const std::vector<char>& bytes, const AttentionCase& c, int seq) {
  std::vector<float> v = decode(bytes, c.dtype);
  if (!c.bhsd) return v;
  std::vector<float> t(v.size());
  const int H = c.heads, D = c.head_dim;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < seq; ++s)
      for (int h = 0; h < H; ++h)
        std::copy_n(&v[((size_t(b) * H + h) * seq + s) * D], D, &t[((size_t(b) * seq + s) * H + h) * D]);
  return t;
}

inline TensorView view(const driver::DeviceBuffer& buf, const AttentionCase& c, int seq) {
  return c.bhsd ? bhsd(buf.ptr(), c.batch, seq, c.heads, c.head_dim)
                : bshd(buf.ptr(), c.batch, seq, c.heads, c.head_dim);
}

/// Reference results of one batch entry, computed on a problem of that entry's
/// key length (how per-batch key lengths are defined).
struct BatchReference {
  std::vector<double> o, lse, dq, dk, dv;
};

inline int host_threads() { return std::max(1u, std::min(16u, std::thread::hardware_concurrency())); }

/// Slices batch `b` (rows [0, rows) of a [B, S, H, D] tensor).
inline std::vector<float> batch_slice(const std::vector<float>& t, const AttentionCase& c, int b, int seq, int rows) {
  const size_t row = size_t(c.heads) * c.head_dim;
  auto first = t.begin() + size_t(b) * seq * row;
  return std::vector<float>(first, first + size_t(rows) * row);
}

/// One Context for all GPU tests of a binary (its caches make repeated specs free).
inline Context& shared_context() {
  static std::unique_ptr<Context> ctx = [] {
    auto c = Context::create();
    if (!c) throw std::runtime_error(c.error().message);
    return std::move(c.value());
  }();
  return *ctx;
}

/// The input types and matrix-product modes every kernel serves.
struct Math {
  DType dtype;
  Precision precision;
};
inline constexpr Math kMaths[] = {{DType::kBF16, Precision::kNative},
                                  {DType::kF16, Precision::kNative},
                                  {DType::kF32, Precision::kTF32},
                                  {DType::kF32, Precision::kIEEE}};

}  // namespace flashjit::testing
