#pragma once
// The element-wise and row-wise layers of the transformer, forward and backward, on row-major
// activations of `rows` tokens. Every backward *adds* into its parameter gradients (micro-batch
// accumulation is the engine's job, but a layer may contribute to one tensor from several places)
// and into the input gradient as documented per function. Template on the element type: float for
// training, double for the finite-difference tests (tests/examples/test_gpt_layers.cpp).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp_train/dense_kernels.hpp"

namespace amsp_train {

/// LayerNorm's variance epsilon (GPT-2's).
inline constexpr double layer_norm_eps = 1e-5;

// ---- linear: y = x·W + b, W stored in×out -----------------------------------------------------

/// y[rows×out] = x[rows×in]·W + b (b may be null).
template <class T>
void linear_forward(const T* x, std::size_t rows, std::size_t in, const T* w, const T* b, std::size_t out, T* y) {
  if (b) detail::broadcast_rows(b, rows, out, y);
  else std::fill(y, y + rows * out, T(0));
  detail::gemm_accumulate(x, rows, in, w, out, y);
}

/// dW += xᵀ·dy, db += Σ dy (db may be null), dx += dy·Wᵀ. `w_t` is scratch of in×out elements.
template <class T>
void linear_backward(const T* x, std::size_t rows, std::size_t in, const T* w, std::size_t out, const T* dy, T* dx,
                     T* dw, T* db, std::vector<T>& w_t) {
  detail::gemm_at_b_accumulate(x, rows, in, dy, out, dw);
  if (db) detail::sum_rows_accumulate(dy, rows, out, db);
  w_t.resize(in * out);
  detail::transpose(w, in, out, w_t.data());
  detail::gemm_accumulate(dy, rows, out, w_t.data(), in, dx);
}

// ---- LayerNorm over the last dimension ----------------------------------------------------------

/// y = (x − mean)·rstd·g + b per row of width n; keeps mean and rstd per row for the backward.
template <class T>
void layer_norm_forward(const T* x, std::size_t rows, std::size_t n, const T* g, const T* b, T* y, T* mean, T* rstd) {
  for (std::size_t i = 0; i < rows; ++i) {
    const T* xi = x + i * n;
    T sum = 0;
    for (std::size_t k = 0; k < n; ++k) sum += xi[k];
    const T m = sum / T(n);
    T sq = 0;
    for (std::size_t k = 0; k < n; ++k) sq += (xi[k] - m) * (xi[k] - m);
    const T r = T(1) / std::sqrt(sq / T(n) + T(layer_norm_eps));
    T* yi = y + i * n;
    for (std::size_t k = 0; k < n; ++k) yi[k] = (xi[k] - m) * r * g[k] + b[k];
    mean[i] = m;
    rstd[i] = r;
  }
}

/// dg += Σ dy·x̂, db += Σ dy, dx += rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) with dx̂ = dy·g.
template <class T>
void layer_norm_backward(const T* x, std::size_t rows, std::size_t n, const T* g, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dg, T* db) {
  for (std::size_t i = 0; i < rows; ++i) {
    const T* xi = x + i * n;
    const T* dyi = dy + i * n;
    T* dxi = dx + i * n;
    const T m = mean[i], r = rstd[i];
    T sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const T xhat = (xi[k] - m) * r;
      const T dxhat = dyi[k] * g[k];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      dg[k] += dyi[k] * xhat;
      db[k] += dyi[k];
    }
    const T mean_dxhat = sum_dxhat / T(n), mean_dxhat_xhat = sum_dxhat_xhat / T(n);
    for (std::size_t k = 0; k < n; ++k) {
      const T xhat = (xi[k] - m) * r;
      dxi[k] += r * (dyi[k] * g[k] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

// ---- GELU (GPT-2's tanh form) -------------------------------------------------------------------

inline constexpr double gelu_scale = 0.7978845608028654;  // sqrt(2 / pi)
inline constexpr double gelu_cubic = 0.044715;

/// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), element-wise over n values.
template <class T>
void gelu_forward(const T* x, std::size_t n, T* y) {
  for (std::size_t e = 0; e < n; ++e) {
    const T v = x[e];
    const T t = detail::tanh_approx(T(gelu_scale) * (v + T(gelu_cubic) * v * v * v));
    y[e] = T(0.5) * v * (T(1) + t);
  }
}

/// dx = dy · gelu'(x) (written, not added: the GELU input feeds nothing else).
template <class T>
void gelu_backward(const T* x, std::size_t n, const T* dy, T* dx) {
  for (std::size_t e = 0; e < n; ++e) {
    const T v = x[e];
    const T t = detail::tanh_approx(T(gelu_scale) * (v + T(gelu_cubic) * v * v * v));
    const T du = T(gelu_scale) * (T(1) + T(3 * gelu_cubic) * v * v);
    dx[e] = dy[e] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

// ---- token and position embeddings --------------------------------------------------------------

/// x[(s·T + t)·C ..] = wte[tokens[s·T + t]] + wpe[t] for `sequences` sequences of `context` tokens.
template <class T>
void embedding_forward(const std::int32_t* tokens, std::size_t sequences, std::size_t context, std::size_t width,
                       const T* wte, const T* wpe, T* x) {
  for (std::size_t s = 0; s < sequences; ++s)
    for (std::size_t t = 0; t < context; ++t) {
      const std::size_t row = s * context + t;
      const T* te = wte + static_cast<std::size_t>(tokens[row]) * width;
      const T* pe = wpe + t * width;
      T* out = x + row * width;
      for (std::size_t k = 0; k < width; ++k) out[k] = te[k] + pe[k];
    }
}

/// dwte[token] += dx, dwpe[position] += dx.
template <class T>
void embedding_backward(const std::int32_t* tokens, std::size_t sequences, std::size_t context, std::size_t width,
                        const T* dx, T* dwte, T* dwpe) {
  for (std::size_t s = 0; s < sequences; ++s)
    for (std::size_t t = 0; t < context; ++t) {
      const std::size_t row = s * context + t;
      detail::axpy(width, T(1), dx + row * width, dwte + static_cast<std::size_t>(tokens[row]) * width);
      detail::axpy(width, T(1), dx + row * width, dwpe + t * width);
    }
}

// ---- softmax cross-entropy ------------------------------------------------------------------------

/// Softmax of each row of logits[rows×vocab] in place (probabilities), and the mean over rows of
/// −log p[target] in double.
template <class T>
double softmax_cross_entropy(T* logits, std::size_t rows, std::size_t vocab, const std::int32_t* targets) {
  double loss = 0.0;
  for (std::size_t i = 0; i < rows; ++i) {
    T* li = logits + i * vocab;
    T max = li[0];
    for (std::size_t v = 1; v < vocab; ++v) max = li[v] > max ? li[v] : max;
    T sum = 0;
    for (std::size_t v = 0; v < vocab; ++v) {
      li[v] = detail::exp_nonpositive(li[v] - max);
      sum += li[v];
    }
    const T inv = T(1) / sum;
    for (std::size_t v = 0; v < vocab; ++v) li[v] *= inv;
    loss -= std::log(static_cast<double>(li[static_cast<std::size_t>(targets[i])]));
  }
  return loss / static_cast<double>(rows);
}

/// dlogits = (p − onehot(target)) / rows: the gradient of the mean loss (written in place of p).
template <class T>
void softmax_cross_entropy_backward(T* probs, std::size_t rows, std::size_t vocab, const std::int32_t* targets) {
  const T scale = T(1) / T(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    T* pi = probs + i * vocab;
    pi[static_cast<std::size_t>(targets[i])] -= T(1);
    for (std::size_t v = 0; v < vocab; ++v) pi[v] *= scale;
  }
}

}  // namespace amsp_train
