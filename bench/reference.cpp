// The float64 reference (see reference.h). Loops are written as axpy updates
// over contiguous rows so the compiler vectorizes them: scores come from a
// transposed K (s[j] += q[d] * Kt[d][j]) rather than per-key dot products.
#include "bench/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

namespace flashjit::bench {

int RefShape::key_end(int row) const {
  if (!causal) return seqlen_k;
  return std::clamp(row + seqlen_k - seqlen_q + 1, 0, seqlen_k);
}

namespace {

std::vector<std::pair<int, int>> selected_heads(const RefShape& shape, const RefSelection& sel) {
  if (!sel.heads.empty()) return sel.heads;
  std::vector<std::pair<int, int>> all;
  for (int b = 0; b < shape.batch; ++b)
    for (int h = 0; h < shape.heads; ++h) all.emplace_back(b, h);
  return all;
}

/// Runs task(i) for i in [0, n) on up to `threads` threads.
template <typename F>
void parallel_for(size_t n, int threads, F&& task) {
  const int count = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) task(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

/// One head's K and V gathered into contiguous double matrices.
struct HeadKV {
  int sk = 0, d = 0;
  std::vector<double> kt;  ///< [D, Sk]
  std::vector<double> kr;  ///< [Sk, D]
  std::vector<double> vr;  ///< [Sk, D]
  std::vector<double> vt;  ///< [D, Sk]

  HeadKV(const RefShape& s, const float* k, const float* v, int b, int h, bool transposed_v)
      : sk(s.seqlen_k), d(s.head_dim), kt(size_t(sk) * d), kr(size_t(sk) * d), vr(size_t(sk) * d) {
    if (transposed_v) vt.resize(size_t(sk) * d);
    for (int j = 0; j < sk; ++j) {
      const float* kj = k + s.offset(b, j, h, s.seqlen_k);
      const float* vj = v + s.offset(b, j, h, s.seqlen_k);
      for (int x = 0; x < d; ++x) {
        kt[size_t(x) * sk + j] = kj[x];
        kr[size_t(j) * d + x] = kj[x];
        vr[size_t(j) * d + x] = vj[x];
        if (transposed_v) vt[size_t(x) * sk + j] = vj[x];
      }
    }
  }
};

/// Query rows processed together: each K/V row read from memory serves
/// kRowBlock rows' multiply-adds (the loops are otherwise bound by streaming K).
constexpr int kRowBlock = 8;

/// Softmax rows of a block of queries. `n[r]` is row r's key count (> 0);
/// p[r] (length >= max n) gets the normalized probabilities, zero past n[r].
/// Returns each row's lse in `lse`.
void softmax_block(const HeadKV& kv, const std::vector<const float*>& q, const std::vector<int>& n,
                   double scale, std::vector<std::vector<double>>& p, std::vector<double>& lse) {
  const int rows = static_cast<int>(q.size());
  const int n_max = *std::max_element(n.begin(), n.end());
  for (int r = 0; r < rows; ++r) std::fill(p[r].begin(), p[r].begin() + n_max, 0.0);
  for (int x = 0; x < kv.d; ++x) {
    const double* kt = kv.kt.data() + size_t(x) * kv.sk;
    for (int r = 0; r < rows; ++r) {
      const double qx = q[r][x];
      double* pr = p[r].data();
      for (int j = 0; j < n_max; ++j) pr[j] += qx * kt[j];
    }
  }
  for (int r = 0; r < rows; ++r) {
    double* pr = p[r].data();
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < n[r]; ++j) {
      pr[j] *= scale;
      m = std::max(m, pr[j]);
    }
    double l = 0;
    for (int j = 0; j < n[r]; ++j) {
      pr[j] = std::exp(pr[j] - m);
      l += pr[j];
    }
    const double inv = 1.0 / l;
    for (int j = 0; j < n[r]; ++j) pr[j] *= inv;
    std::fill(pr + n[r], pr + n_max, 0.0);
    lse[r] = m + std::log(l);
  }
}

/// o[r] = sum_j p[r][j] * V[j] for a block of rows.
void pv_block(const HeadKV& kv, const std::vector<std::vector<double>>& p, int rows, int n_max,
              const std::vector<double*>& o) {
  for (int r = 0; r < rows; ++r) std::fill(o[r], o[r] + kv.d, 0.0);
  for (int j = 0; j < n_max; ++j) {
    const double* vj = kv.vr.data() + size_t(j) * kv.d;
    for (int r = 0; r < rows; ++r) {
      const double pj = p[r][j];
      double* orow = o[r];
      for (int x = 0; x < kv.d; ++x) orow[x] += pj * vj[x];
    }
  }
}

/// Rows that see no key: O = 0, lse = -inf. Returns true if `row` is one.
bool empty_row(const RefShape& s, int row, double* o_row, double* lse_i) {
  if (s.key_end(row) > 0) return false;
  std::fill(o_row, o_row + s.head_dim, 0.0);
  if (lse_i) *lse_i = -std::numeric_limits<double>::infinity();
  return true;
}

}  // namespace

void reference_forward(const RefShape& shape, const float* q, const float* k, const float* v,
                       double* o, double* lse, const RefSelection& selection, int threads) {
  const auto heads = selected_heads(shape, selection);
  std::vector<int> rows = selection.rows;
  if (rows.empty())
    for (int i = 0; i < shape.seqlen_q; ++i) rows.push_back(i);

  parallel_for(heads.size(), threads, [&](size_t t) {
    const auto [b, h] = heads[t];
    const HeadKV kv(shape, k, v, b, h, false);
    std::vector<std::vector<double>> p(kRowBlock, std::vector<double>(shape.seqlen_k));
    std::vector<double> block_lse(kRowBlock);
    std::vector<const float*> bq;
    std::vector<int> bn, bi;
    std::vector<double*> bo;
    auto flush = [&] {
      if (bq.empty()) return;
      softmax_block(kv, bq, bn, shape.scale, p, block_lse);
      pv_block(kv, p, int(bq.size()), *std::max_element(bn.begin(), bn.end()), bo);
      if (lse)
        for (size_t r = 0; r < bi.size(); ++r)
          lse[(size_t(b) * shape.heads + h) * shape.seqlen_q + bi[r]] = block_lse[r];
      bq.clear(), bn.clear(), bi.clear(), bo.clear();
    };
    for (int i : rows) {
      double* o_row = o + shape.offset(b, i, h, shape.seqlen_q);
      double* lse_i = lse ? lse + (size_t(b) * shape.heads + h) * shape.seqlen_q + i : nullptr;
      if (empty_row(shape, i, o_row, lse_i)) continue;
      bq.push_back(q + shape.offset(b, i, h, shape.seqlen_q));
      bn.push_back(shape.key_end(i));
      bi.push_back(i);
      bo.push_back(o_row);
      if (int(bq.size()) == kRowBlock) flush();
    }
    flush();
  });
}

void reference_backward(const RefShape& shape, const float* q, const float* k, const float* v,
                        const float* dout, double* o, double* lse, double* dq, double* dk,
                        double* dv, const RefSelection& selection, int threads) {
  const auto heads = selected_heads(shape, selection);
  const int D = shape.head_dim;

  parallel_for(heads.size(), threads, [&](size_t t) {
    const auto [b, h] = heads[t];
    const HeadKV kv(shape, k, v, b, h, true);
    const int sk = shape.seqlen_k;
    std::vector<std::vector<double>> p(kRowBlock, std::vector<double>(sk));
    std::vector<std::vector<double>> ds(kRowBlock, std::vector<double>(sk));
    std::vector<double> block_lse(kRowBlock), di(kRowBlock);
    std::vector<double> dk_acc(size_t(sk) * D, 0.0), dv_acc(size_t(sk) * D, 0.0);
    std::vector<const float*> bq, bdo;
    std::vector<int> bn, bi;
    std::vector<double*> bo, bdq;
    auto flush = [&] {
      if (bq.empty()) return;
      const int rows = int(bq.size());
      const int n_max = *std::max_element(bn.begin(), bn.end());
      softmax_block(kv, bq, bn, shape.scale, p, block_lse);
      pv_block(kv, p, rows, n_max, bo);
      for (int r = 0; r < rows; ++r) {
        if (lse) lse[(size_t(b) * shape.heads + h) * shape.seqlen_q + bi[r]] = block_lse[r];
        // Di = rowsum(dO * O).
        di[r] = 0;
        for (int x = 0; x < D; ++x) di[r] += double(bdo[r][x]) * bo[r][x];
        std::fill(ds[r].begin(), ds[r].begin() + n_max, 0.0);
      }
      // dP = dO V^T, then dS = P * (dP - Di) * scale (zero past each row's keys, as P is).
      for (int x = 0; x < D; ++x) {
        const double* vt = kv.vt.data() + size_t(x) * sk;
        for (int r = 0; r < rows; ++r) {
          const double g = bdo[r][x];
          double* dsr = ds[r].data();
          for (int j = 0; j < n_max; ++j) dsr[j] += g * vt[j];
        }
      }
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < n_max; ++j) ds[r][j] = p[r][j] * (ds[r][j] - di[r]) * shape.scale;
      // dQ += dS K; dK += dS^T Q; dV += P^T dO.
      for (int j = 0; j < n_max; ++j) {
        const double* kj = kv.kr.data() + size_t(j) * D;
        double* dkj = dk_acc.data() + size_t(j) * D;
        double* dvj = dv_acc.data() + size_t(j) * D;
        for (int r = 0; r < rows; ++r) {
          const double dsj = ds[r][j], pj = p[r][j];
          const float* qr = bq[r];
          const float* dor = bdo[r];
          double* dqr = bdq[r];
          for (int x = 0; x < D; ++x) {
            dqr[x] += dsj * kj[x];
            dkj[x] += dsj * double(qr[x]);
            dvj[x] += pj * double(dor[x]);
          }
        }
      }
      bq.clear(), bdo.clear(), bn.clear(), bi.clear(), bo.clear(), bdq.clear();
    };
    for (int i = 0; i < shape.seqlen_q; ++i) {
      const size_t qoff = shape.offset(b, i, h, shape.seqlen_q);
      double* lse_i = lse ? lse + (size_t(b) * shape.heads + h) * shape.seqlen_q + i : nullptr;
      std::fill(dq + qoff, dq + qoff + D, 0.0);
      if (empty_row(shape, i, o + qoff, lse_i)) continue;
      bq.push_back(q + qoff);
      bdo.push_back(dout + qoff);
      bn.push_back(shape.key_end(i));
      bi.push_back(i);
      bo.push_back(o + qoff);
      bdq.push_back(dq + qoff);
      if (int(bq.size()) == kRowBlock) flush();
    }
    flush();
    for (int j = 0; j < sk; ++j) {
      const size_t koff = shape.offset(b, j, h, sk);
      std::copy_n(dk_acc.data() + size_t(j) * D, D, dk + koff);
      std::copy_n(dv_acc.data() + size_t(j) * D, D, dv + koff);
    }
  });
}

}  // namespace flashjit::bench
