// The benchmark's float64 CPU attention: the forward (O and lse) and the
// backward (dQ, dK, dV), computed in double from float inputs (the exact values
// the GPU saw: bf16 inputs are passed already rounded). Tensors are contiguous
// [batch, seq, heads, head_dim]; lse is [batch, heads, seqlen_q].
//
// Causal masks are bottom-right aligned (FlashAttention >= 2.1, cuDNN): query i
// sees key j iff j <= i + seqlen_k - seqlen_q. A row that sees no key has O = 0,
// lse = -inf and contributes no gradient.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace flashjit::bench {

/// Sizes and math of a reference problem.
struct RefShape {
  int batch = 0;
  int heads = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  bool causal = false;
  double scale = 0;  ///< softmax scale (the caller resolves 0 to 1/sqrt(head_dim))

  /// Elements of a [batch, seqlen, heads, head_dim] tensor.
  size_t q_elems() const { return size_t(batch) * seqlen_q * heads * head_dim; }
  size_t k_elems() const { return size_t(batch) * seqlen_k * heads * head_dim; }
  size_t lse_elems() const { return size_t(batch) * heads * seqlen_q; }
  /// Offset of element (b, s, h, 0) of a tensor with `seqlen` rows.
  size_t offset(int b, int s, int h, int seqlen) const {
    return ((size_t(b) * seqlen + s) * heads + h) * head_dim;
  }
  /// Last key a query row sees (exclusive bound), in [0, seqlen_k].
  int key_end(int row) const;
};

/// Which (batch, head) pairs and query rows to compute.
struct RefSelection {
  std::vector<std::pair<int, int>> heads;  ///< (batch, head) pairs; empty = all
  std::vector<int> rows;                   ///< query rows (forward only); empty = all
};

/// Forward: writes o [B, Sq, H, D] and, when non-null, lse [B, H, Sq] (natural
/// log) for the selected heads and rows; other entries are left untouched.
/// Work is spread over `threads` host threads, one (batch, head) pair at a time.
void reference_forward(const RefShape& shape, const float* q, const float* k, const float* v,
                       double* o, double* lse, const RefSelection& selection, int threads);

/// Forward and backward for the selected heads (all rows): o, lse as above, and
/// dq [B, Sq, H, D], dk and dv [B, Sk, H, D] for dO = dout. `selection.rows`
/// must be empty (every query row contributes to dK and dV).
void reference_backward(const RefShape& shape, const float* q, const float* k, const float* v,
                        const float* dout, double* o, double* lse, double* dq, double* dk,
                        double* dv, const RefSelection& selection, int threads);

}  // namespace flashjit::bench
