#pragma once
// Causal multi-head self-attention on the fused q|k|v projection, forward and backward.
//
// qkv holds, per token row, [q (C) | k (C) | v (C)], head h using columns h·d .. (h+1)·d of each
// (d = C / heads). Per sequence and head: S = Q·Kᵀ/√d, P = causal softmax of S (row t sees
// tokens 0..t), Y = P·V, written to columns h·d .. of the output row. P is kept for the backward.
// Each head's Q, K, V are copied into contiguous scratch so that every product is one of the
// vectorised kernels of dense_kernels.hpp (the masked upper triangle is computed and multiplied by
// zero: at the example's context lengths that is cheaper than ragged loops).

#include <cmath>
#include <cstddef>
#include <vector>

#include "amsp_train/dense_kernels.hpp"

namespace amsp_train {

struct AttentionShape {
  std::size_t sequences = 1, context = 1, width = 1, heads = 1;
  [[nodiscard]] std::size_t head_width() const { return width / heads; }
  [[nodiscard]] std::size_t rows() const { return sequences * context; }
  [[nodiscard]] std::size_t probs_size() const { return sequences * heads * context * context; }
};

template <class T>
class Attention {
public:
  /// y[rows×C] = attention(qkv[rows×3C]); probs[sequences·heads·T·T] is written for the backward.
  void forward(const AttentionShape& s, const T* qkv, T* probs, T* y) {
    const std::size_t t_len = s.context, d = s.head_width(), c = s.width;
    resize(s);
    const T scale = T(1) / std::sqrt(T(d));
    for (std::size_t seq = 0; seq < s.sequences; ++seq)
      for (std::size_t h = 0; h < s.heads; ++h) {
        const T* base = qkv + seq * t_len * 3 * c + h * d;
        copy_head(base, t_len, 3 * c, d, q_.data());
        detail::transpose(base + c, t_len, d, k_t_.data(), 3 * c);
        copy_head(base + 2 * c, t_len, 3 * c, d, v_.data());
        T* p = probs + (seq * s.heads + h) * t_len * t_len;
        std::fill(p, p + t_len * t_len, T(0));
        detail::gemm_accumulate(q_.data(), t_len, d, k_t_.data(), t_len, p);
        for (std::size_t t = 0; t < t_len; ++t) causal_softmax_row(p + t * t_len, t + 1, t_len, scale);
        std::fill(out_.begin(), out_.end(), T(0));
        detail::gemm_accumulate(p, t_len, t_len, v_.data(), d, out_.data());
        for (std::size_t t = 0; t < t_len; ++t)
          std::copy(out_.data() + t * d, out_.data() + (t + 1) * d, y + (seq * t_len + t) * c + h * d);
      }
  }

  /// dqkv[rows×3C] = the gradient through attention of dy[rows×C] (written, not added).
  void backward(const AttentionShape& s, const T* qkv, const T* probs, const T* dy, T* dqkv) {
    const std::size_t t_len = s.context, d = s.head_width(), c = s.width;
    resize(s);
    const T scale = T(1) / std::sqrt(T(d));
    for (std::size_t seq = 0; seq < s.sequences; ++seq)
      for (std::size_t h = 0; h < s.heads; ++h) {
        const T* base = qkv + seq * t_len * 3 * c + h * d;
        const T* p = probs + (seq * s.heads + h) * t_len * t_len;
        copy_head(base, t_len, 3 * c, d, q_.data());
        copy_head(base + c, t_len, 3 * c, d, k_.data());
        detail::transpose(base + 2 * c, t_len, d, v_t_.data(), 3 * c);
        copy_head(dy + seq * t_len * c + h * d, t_len, c, d, out_.data());  // dY of this head
        // dP = dY·Vᵀ, dV = Pᵀ·dY.
        std::fill(dp_.begin(), dp_.end(), T(0));
        detail::gemm_accumulate(out_.data(), t_len, d, v_t_.data(), t_len, dp_.data());
        std::fill(dv_.begin(), dv_.end(), T(0));
        detail::gemm_at_b_accumulate(p, t_len, t_len, out_.data(), d, dv_.data());
        // Softmax backward, scaled: dS = P ⊙ (dP − rowsum(P ⊙ dP)) / √d (zero above the diagonal).
        for (std::size_t t = 0; t < t_len; ++t) {
          const T* pr = p + t * t_len;
          T* dr = dp_.data() + t * t_len;
          T dot = 0;
          for (std::size_t u = 0; u <= t; ++u) dot += pr[u] * dr[u];
          for (std::size_t u = 0; u < t_len; ++u) dr[u] = pr[u] * (dr[u] - dot) * scale;
        }
        // dQ = dS·K, dK = dSᵀ·Q.
        std::fill(dq_.begin(), dq_.end(), T(0));
        detail::gemm_accumulate(dp_.data(), t_len, t_len, k_.data(), d, dq_.data());
        std::fill(dk_.begin(), dk_.end(), T(0));
        detail::gemm_at_b_accumulate(dp_.data(), t_len, t_len, q_.data(), d, dk_.data());
        for (std::size_t t = 0; t < t_len; ++t) {
          T* row = dqkv + (seq * t_len + t) * 3 * c + h * d;
          std::copy(dq_.data() + t * d, dq_.data() + (t + 1) * d, row);
          std::copy(dk_.data() + t * d, dk_.data() + (t + 1) * d, row + c);
          std::copy(dv_.data() + t * d, dv_.data() + (t + 1) * d, row + 2 * c);
        }
      }
  }

private:
  static void copy_head(const T* src, std::size_t rows, std::size_t stride, std::size_t d, T* dst) {
    for (std::size_t t = 0; t < rows; ++t) std::copy(src + t * stride, src + t * stride + d, dst + t * d);
  }

  /// row[0..visible) = softmax(row·scale) over the visible entries, row[visible..n) = 0.
  static void causal_softmax_row(T* row, std::size_t visible, std::size_t n, T scale) {
    T max = row[0];
    for (std::size_t u = 1; u < visible; ++u) max = row[u] > max ? row[u] : max;
    T sum = 0;
    for (std::size_t u = 0; u < visible; ++u) {
      row[u] = detail::exp_nonpositive((row[u] - max) * scale);
      sum += row[u];
    }
    const T inv = T(1) / sum;
    for (std::size_t u = 0; u < visible; ++u) row[u] *= inv;
    std::fill(row + visible, row + n, T(0));
  }

  void resize(const AttentionShape& s) {
    const std::size_t td = s.context * s.head_width(), tt = s.context * s.context;
    for (std::vector<T>* v : {&q_, &k_, &k_t_, &v_, &v_t_, &out_, &dv_, &dq_, &dk_}) v->resize(td);
    dp_.resize(tt);
  }

  std::vector<T> q_, k_, k_t_, v_, v_t_, out_, dp_, dv_, dq_, dk_;
};

}  // namespace amsp_train
