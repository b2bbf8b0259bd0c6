// Backward kernels (flashjit forward for O and lse, then backward) against
// float64 gradients, and the deterministic mode bitwise over repeated runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tests/kernels/attention_case.h"

using namespace flashjit;
using namespace flashjit::testing;

namespace {

struct BackwardResult {
  ErrorNorm dq, dk, dv;
  std::string spec;
  std::vector<char> raw_dq, raw_dk, raw_dv;  // for the bitwise check
};

struct BackwardCase : AttentionCase {
  bool deterministic = false;
  /// One Context::forward_backward() call instead of forward() then backward().
  bool one_call = false;
};

BackwardResult run_backward(const BackwardCase& c, bool check_against_reference = true) {
  const size_t q_elems = size_t(c.batch) * c.seqlen_q * c.heads * c.head_dim;
  const size_t k_elems = size_t(c.batch) * c.seqlen_k * c.heads * c.head_dim;
  const auto q = random_inputs(q_elems, c.dtype, c.seed * 5 + 0);
  const auto k = random_inputs(k_elems, c.dtype, c.seed * 5 + 1);
  const auto v = random_inputs(k_elems, c.dtype, c.seed * 5 + 2);
  const auto dout = random_inputs(q_elems, c.dtype, c.seed * 5 + 3);
  auto bq = upload(to_layout(q, c, c.seqlen_q));
  auto bk = upload(to_layout(k, c, c.seqlen_k));
  auto bv = upload(to_layout(v, c, c.seqlen_k));
  auto bdo = upload(to_layout(dout, c, c.seqlen_q));
  auto bo = poisoned(q_elems * dtype_size(c.dtype));
  auto blse = poisoned(size_t(c.batch) * c.heads * c.seqlen_q * sizeof(float));
  auto bdq = poisoned(q_elems * dtype_size(c.dtype));
  auto bdk = poisoned(k_elems * dtype_size(c.dtype));
  auto bdv = poisoned(k_elems * dtype_size(c.dtype));
  Problem p = c.problem();
  driver::DeviceBuffer blens;
  if (!c.seqlens_k.empty()) {
    std::vector<char> bytes(c.seqlens_k.size() * sizeof(int));
    std::memcpy(bytes.data(), c.seqlens_k.data(), bytes.size());
    blens = upload(bytes);
    p.seqlens_k = static_cast<const int*>(blens.ptr());
  }

  ForwardArgs f;
  f.problem = p;
  f.q = view(bq, c, c.seqlen_q);
  f.k = view(bk, c, c.seqlen_k);
  f.v = view(bv, c, c.seqlen_k);
  f.o = view(bo, c, c.seqlen_q);
  f.lse = static_cast<float*>(blse.ptr());
  if (!c.one_call) {
    if (auto r = shared_context().forward(f); !r) throw std::runtime_error(r.error().message);
  }

  auto ws_bytes = shared_context().backward_workspace_size(p, c.deterministic);
  if (!ws_bytes) throw std::runtime_error(ws_bytes.error().message);
  auto ws = poisoned(std::max<size_t>(*ws_bytes, 16));
  BackwardArgs b;
  b.problem = p;
  b.q = f.q; b.k = f.k; b.v = f.v; b.o = f.o;
  b.dout = view(bdo, c, c.seqlen_q);
  b.lse = f.lse;
  b.dq = view(bdq, c, c.seqlen_q);
  b.dk = view(bdk, c, c.seqlen_k);
  b.dv = view(bdv, c, c.seqlen_k);
  b.workspace = ws.ptr();
  b.workspace_bytes = *ws_bytes;
  b.deterministic = c.deterministic;
  Result<LaunchInfo> info = make_error(Status::kInternal, "not run");
  if (c.one_call) {
    ForwardBackwardArgs fb;
    fb.problem = p;
    fb.q = f.q; fb.k = f.k; fb.v = f.v; fb.o = f.o;
    fb.lse = f.lse;
    fb.dout = b.dout;
    fb.dq = b.dq; fb.dk = b.dk; fb.dv = b.dv;
    fb.workspace = b.workspace;
    fb.workspace_bytes = b.workspace_bytes;
    fb.deterministic = b.deterministic;
    auto both = shared_context().forward_backward(fb);
    if (!both) throw std::runtime_error(both.error().message);
    info = both->backward;
  } else {
    info = shared_context().backward(b);
  }
  if (!info) throw std::runtime_error(info.error().message);
  if (auto r = driver::context_synchronize(); !r) throw std::runtime_error(r.error().message);

  BackwardResult res;
  res.spec = info->spec.to_string();
  res.raw_dq = download(bdq);
  res.raw_dk = download(bdk);
  res.raw_dv = download(bdv);
  if (!check_against_reference) return res;
  const auto gq = from_layout(res.raw_dq, c, c.seqlen_q);
  const auto gk = from_layout(res.raw_dk, c, c.seqlen_k);
  const auto gv = from_layout(res.raw_dv, c, c.seqlen_k);

  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  const size_t row = size_t(c.heads) * c.head_dim;
  for (int bi = 0; bi < c.batch; ++bi) {
    const int sk = c.key_len(bi);
    std::vector<double> rdq(size_t(c.seqlen_q) * row, 0.0), rdk(size_t(c.seqlen_k) * row, 0.0),
        rdv(size_t(c.seqlen_k) * row, 0.0);
    if (sk > 0) {
      bench::RefShape shape{1, c.heads, c.seqlen_q, sk, c.head_dim, c.causal, scale};
      std::vector<double> ro(size_t(c.seqlen_q) * row), rl(size_t(c.heads) * c.seqlen_q);
      const auto qb = batch_slice(q, c, bi, c.seqlen_q, c.seqlen_q);
      const auto kb = batch_slice(k, c, bi, c.seqlen_k, sk);
      const auto vb = batch_slice(v, c, bi, c.seqlen_k, sk);
      const auto dob = batch_slice(dout, c, bi, c.seqlen_q, c.seqlen_q);
      bench::reference_backward(shape, qb.data(), kb.data(), vb.data(), dob.data(), ro.data(),
                                rl.data(), rdq.data(), rdk.data(), rdv.data(), {}, host_threads());
    }
    if (sk == 1) {
      // One key: the softmax is constant, so dS = P (dP - D) = dO.v0 - dO.o is
      // exactly zero and so are dQ and dK; what the kernel returns is the
      // rounding of that cancellation. Its scale, per element:
      //   dQ[i][d] ~ scale * 2|dO_i . v0| |k0[d]|,  dK[0][d] ~ scale * sum_i 2|dO_i . v0| |q_i[d]|.
      const auto qb = batch_slice(q, c, bi, c.seqlen_q, c.seqlen_q);
      const auto kb = batch_slice(k, c, bi, c.seqlen_k, 1);
      const auto vb = batch_slice(v, c, bi, c.seqlen_k, 1);
      const auto dob = batch_slice(dout, c, bi, c.seqlen_q, c.seqlen_q);
      for (int h = 0; h < c.heads; ++h) {
        std::vector<double> dk_mag(c.head_dim, 0.0);
        for (int i = 0; i < c.seqlen_q; ++i) {
          const size_t at = size_t(i) * row + size_t(h) * c.head_dim;
          double dp = 0;
          for (int d = 0; d < c.head_dim; ++d) dp += double(dob[at + d]) * vb[size_t(h) * c.head_dim + d];
          for (int d = 0; d < c.head_dim; ++d) {
            res.dq.add_magnitude(scale * 2 * std::abs(dp) * std::abs(kb[size_t(h) * c.head_dim + d]));
            dk_mag[d] += scale * 2 * std::abs(dp) * std::abs(qb[at + d]);
          }
        }
        for (double m : dk_mag) res.dk.add_magnitude(m);
      }
    }
    // Keys past the entry's length get zero gradients (rdk/rdv stay 0 there).
    for (size_t i = 0; i < size_t(c.seqlen_q) * row; ++i) res.dq.add(gq[bi * c.seqlen_q * row + i], rdq[i]);
    for (size_t i = 0; i < size_t(c.seqlen_k) * row; ++i) {
      res.dk.add(gk[bi * c.seqlen_k * row + i], rdk[i]);
      res.dv.add(gv[bi * c.seqlen_k * row + i], rdv[i]);
    }
  }
  return res;
}

void check_case(const BackwardCase& c) {
  INFO(c.name() << (c.deterministic ? " det" : " atomic"));
  BackwardResult r;
  REQUIRE_NOTHROW(r = run_backward(c));
  INFO(r.spec << ": rel_err dQ " << r.dq.rel() << ", dK " << r.dk.rel() << ", dV " << r.dv.rel());
  const double tol = backward_tolerance(c.dtype, c.precision);
  CHECK(r.dq.nan + r.dk.nan + r.dv.nan == 0);
  CHECK(r.dq.rel() <= tol);
  CHECK(r.dk.rel() <= tol);
  CHECK(r.dv.rel() <= tol);
}


}  // namespace

TEST_CASE("backward: every dtype and head_dim, even and ragged, causal with Sq != Sk", "[gpu][bwd]") {
  for (const Math& m : kMaths) {
    for (int hd : kSupportedHeadDims) {
      struct Len { int sq, sk; bool causal; };
      const Len lens[] = {{128, 128, false}, {1, 1, false}, {17, 17, true}, {600, 1500, true},
                          {1500, 600, true}, {600, 600, false}};
      for (const Len& l : lens) {
        BackwardCase c{make_case(m.dtype, m.precision, hd, l.sq, l.sk, l.causal, 11 + hd + l.sk)};
        check_case(c);
      }
    }
  }
}

TEST_CASE("backward: long sequences of the seed grid", "[gpu][bwd]") {
  for (const Math& m : {kMaths[0], kMaths[2], kMaths[3]}) {
    for (int hd : {64, 128}) {
      for (int s : {3000, 4096}) {
        for (bool causal : {false, true}) {
          BackwardCase c;
          c.dtype = m.dtype;
          c.precision = m.precision;
          c.head_dim = hd;
          c.batch = 1;
          c.heads = 1;
          c.seqlen_q = c.seqlen_k = s;
          c.causal = causal;
          c.seed = 300 + s;
          check_case(c);
        }
      }
    }
  }
}

TEST_CASE("backward: per-batch key lengths and [B, H, S, D] layout", "[gpu][bwd]") {
  for (bool causal : {false, true}) {
    BackwardCase c;
    c.head_dim = 64;
    c.batch = 3;
    c.seqlen_q = 200;
    c.seqlen_k = 500;
    c.causal = causal;
    c.seqlens_k = {500, 0, 123};
    check_case(c);
    c.seqlens_k.clear();
    c.bhsd = true;
    check_case(c);
  }
}

TEST_CASE("backward: deterministic mode is bitwise reproducible and correct", "[gpu][bwd]") {
  for (const Math& m : {kMaths[0], kMaths[2]}) {
    BackwardCase c;
    c.dtype = m.dtype;
    c.precision = m.precision;
    c.head_dim = 128;
    c.seqlen_q = 1500;
    c.seqlen_k = 600;
    c.causal = true;
    c.deterministic = true;
    check_case(c);
    const BackwardResult first = run_backward(c, false);
    for (int run = 0; run < 2; ++run) {
      const BackwardResult again = run_backward(c, false);
      CHECK(again.raw_dq == first.raw_dq);
      CHECK(again.raw_dk == first.raw_dk);
      CHECK(again.raw_dv == first.raw_dv);
    }
  }
}

TEST_CASE("backward: forward_backward in one call equals forward then backward, bitwise", "[gpu][bwd]") {
  BackwardCase c{make_case(DType::kBF16, Precision::kNative, 64, 600, 1500, true, 5)};
  c.deterministic = true;
  c.one_call = true;
  check_case(c);
  const BackwardResult fused = run_backward(c, false);
  c.one_call = false;
  const BackwardResult separate = run_backward(c, false);
  CHECK(fused.raw_dq == separate.raw_dq);
  CHECK(fused.raw_dk == separate.raw_dk);
  CHECK(fused.raw_dv == separate.raw_dv);
}

// Small cases for compute-sanitizer (memcheck, racecheck; scripts/gpu_check.sh
// with SANITIZE=1): padded lengths and causal Sq != Sk both ways, through the
// forward (run first by every backward case) and both backward modes.
TEST_CASE("sanitizer cases: padded lengths and causal Sq != Sk", "[gpu][sanitize]") {
  struct San { DType dtype; Precision precision; int hd, sq, sk; bool causal, det; };
  const San cases[] = {{DType::kBF16, Precision::kNative, 64, 300, 300, false, false},
                       {DType::kBF16, Precision::kNative, 128, 200, 333, true, false},
                       {DType::kBF16, Precision::kNative, 128, 333, 200, true, true},
                       {DType::kF32, Precision::kTF32, 64, 333, 200, true, false},
                       {DType::kF32, Precision::kTF32, 128, 300, 300, false, false},
                       {DType::kF32, Precision::kIEEE, 128, 200, 333, true, true}};
  for (const San& s : cases) {
    BackwardCase c{make_case(s.dtype, s.precision, s.hd, s.sq, s.sk, s.causal, 77)};
    c.batch = 1;
    c.heads = 2;
    c.deterministic = s.det;
    check_case(c);
  }
}
