#pragma once
// The few dense loops the example's MLP needs, written so that g++ -O2 vectorises them without
// -ffast-math: every innermost loop is an axpy over contiguous memory (no float reductions, which
// the compiler may not reorder), and four output rows share each load of the streamed row.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace amsp_train::detail {

/// y_r[0..n) += c_r · v[0..n) for r = 0..3. Separate restrict pointers let the loop vectorise.
inline void axpy4(std::size_t n, float c0, float c1, float c2, float c3, const float* __restrict v,
                  float* __restrict y0, float* __restrict y1, float* __restrict y2, float* __restrict y3) {
  for (std::size_t o = 0; o < n; ++o) {
    const float x = v[o];
    y0[o] += c0 * x;
    y1[o] += c1 * x;
    y2[o] += c2 * x;
    y3[o] += c3 * x;
  }
}

inline void axpy(std::size_t n, float c, const float* __restrict v, float* __restrict y) {
  for (std::size_t o = 0; o < n; ++o) y[o] += c * v[o];
}

/// Y[rows×out] += X[rows×in] · W[in×out] (all row-major).
inline void gemm_accumulate(const float* x, std::size_t rows, std::size_t in, const float* w, std::size_t out,
                            float* y) {
  std::size_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float* x0 = x + i * in;
    float* y0 = y + i * out;
    for (std::size_t k = 0; k < in; ++k)
      axpy4(out, x0[k], x0[in + k], x0[2 * in + k], x0[3 * in + k], w + k * out, y0, y0 + out, y0 + 2 * out,
            y0 + 3 * out);
  }
  for (; i < rows; ++i)
    for (std::size_t k = 0; k < in; ++k) axpy(out, x[i * in + k], w + k * out, y + i * out);
}

/// G[in×out] += Xᵀ · D, with X[rows×in] and D[rows×out]: the weight gradient of y = x·W.
/// Four rows of G stay in L1 while every row of D streams past them once.
inline void gemm_at_b_accumulate(const float* x, std::size_t rows, std::size_t in, const float* d, std::size_t out,
                                 float* g) {
  std::size_t k = 0;
  for (; k + 4 <= in; k += 4) {
    float* g0 = g + k * out;
    for (std::size_t i = 0; i < rows; ++i) {
      const float* xi = x + i * in + k;
      axpy4(out, xi[0], xi[1], xi[2], xi[3], d + i * out, g0, g0 + out, g0 + 2 * out, g0 + 3 * out);
    }
  }
  for (; k < in; ++k)
    for (std::size_t i = 0; i < rows; ++i) axpy(out, x[i * in + k], d + i * out, g + k * out);
}

/// T[cols×rows] = Aᵀ for A[rows×cols].
inline void transpose(const float* a, std::size_t rows, std::size_t cols, float* t) {
  constexpr std::size_t tile = 32;  // keeps both the read and the write side within a few cache lines
  for (std::size_t r0 = 0; r0 < rows; r0 += tile)
    for (std::size_t c0 = 0; c0 < cols; c0 += tile)
      for (std::size_t r = r0; r < std::min(rows, r0 + tile); ++r)
        for (std::size_t c = c0; c < std::min(cols, c0 + tile); ++c) t[c * rows + r] = a[r * cols + c];
}

/// Each of the `rows` rows of Y[rows×n] set to b[0..n).
inline void broadcast_rows(const float* b, std::size_t rows, std::size_t n, float* y) {
  for (std::size_t i = 0; i < rows; ++i) std::copy(b, b + n, y + i * n);
}

/// s[0..n) += Σ_i D[i][0..n): the bias gradient.
inline void sum_rows_accumulate(const float* d, std::size_t rows, std::size_t n, float* s) {
  for (std::size_t i = 0; i < rows; ++i) axpy(n, 1.0f, d + i * n, s);
}

/// tanh(x) to within 2e-7 absolute, in a form that vectorises (libm's tanhf does not, and cost
/// more than all the matrix products of a forward pass together). It uses
/// tanh|x| = (1 − e) / (1 + e) with e = exp(−2|x|) = 2^k · exp(r), |r| ≤ ln2 / 2, where exp(r) is
/// its degree-7 Taylor polynomial (truncation error below 6e-9).
[[nodiscard]] inline float tanh_approx(float x) {
  // |x| clamped to 9, where tanh(9) = 1 − 3e-8 already rounds to 1. The clamp is an integer min on
  // the bit patterns (same order as the values for non-negative floats) because g++ keeps a float
  // compare as a branch, which stops the loop from vectorising.
  constexpr std::int32_t nine = std::bit_cast<std::int32_t>(9.0f);
  const std::int32_t bits = std::bit_cast<std::int32_t>(std::fabs(x));
  const float ax = std::bit_cast<float>(std::min(bits, nine));
  const float y = -2.0f * ax;
  // Round-to-nearest by the 1.5·2^23 shift (kept as written: no -ffast-math), then y − k·ln2 with
  // ln2 split in a part exact in float times k plus a correction.
  const float kf = (y * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (y - kf * 0.693145752f) - kf * 1.42860677e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_k = std::bit_cast<float>((static_cast<std::int32_t>(kf) + 127) << 23);  // k ∈ [−26, 0]
  const float e = p * two_k;
  return std::copysign((1.0f - e) / (1.0f + e), x);
}

/// a[e] = tanh(a[e]) for e in [0, n).
inline void tanh_inplace(float* a, std::size_t n) {
  for (std::size_t e = 0; e < n; ++e) a[e] = tanh_approx(a[e]);
}

}  // namespace amsp_train::detail
