#pragma once
// The dense loops of the example's transformer, written so that g++ -O2 vectorises them without
// -ffast-math: every innermost loop is an axpy over contiguous memory (no float reductions, which
// the compiler may not reorder), four output rows share each load of the streamed row, and the
// products are tiled so that the streamed block of the right-hand matrix stays in L1/L2.
// Templates on the element type: float for training, double for the finite-difference tests.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace amsp_train::detail {

/// y_r[0..n) += c_r · v[0..n) for r = 0..3. Separate restrict pointers let the loop vectorise.
template <class T>
inline void axpy4(std::size_t n, T c0, T c1, T c2, T c3, const T* __restrict v, T* __restrict y0,
                  T* __restrict y1, T* __restrict y2, T* __restrict y3) {
  for (std::size_t o = 0; o < n; ++o) {
    const T x = v[o];
    y0[o] += c0 * x;
    y1[o] += c1 * x;
    y2[o] += c2 * x;
    y3[o] += c3 * x;
  }
}

template <class T>
inline void axpy(std::size_t n, T c, const T* __restrict v, T* __restrict y) {
  for (std::size_t o = 0; o < n; ++o) y[o] += c * v[o];
}

/// Tile sizes of the products: a (depth_tile × width_tile) block of the right-hand matrix is 32 KiB
/// in float, reused by every group of four rows before the next block is read.
inline constexpr std::size_t depth_tile = 64;
inline constexpr std::size_t width_tile = 128;

/// Y[rows×out] += X[rows×in] · W[in×out] (all row-major). Each element of Y is summed over k in
/// ascending order whatever the tiling, so results do not depend on the tile sizes.
template <class T>
inline void gemm_accumulate(const T* x, std::size_t rows, std::size_t in, const T* w, std::size_t out, T* y) {
  for (std::size_t k0 = 0; k0 < in; k0 += depth_tile) {
    const std::size_t k1 = std::min(in, k0 + depth_tile);
    for (std::size_t o0 = 0; o0 < out; o0 += width_tile) {
      const std::size_t n = std::min(out, o0 + width_tile) - o0;
      std::size_t i = 0;
      for (; i + 4 <= rows; i += 4) {
        const T* x0 = x + i * in;
        T* y0 = y + i * out + o0;
        for (std::size_t k = k0; k < k1; ++k)
          axpy4(n, x0[k], x0[in + k], x0[2 * in + k], x0[3 * in + k], w + k * out + o0, y0, y0 + out, y0 + 2 * out,
                y0 + 3 * out);
      }
      for (; i < rows; ++i)
        for (std::size_t k = k0; k < k1; ++k) axpy(n, x[i * in + k], w + k * out + o0, y + i * out + o0);
    }
  }
}

/// G[in×out] += Xᵀ · D, with X[rows×in] and D[rows×out]: the weight gradient of y = x·W.
/// Four rows of G stay in L1 while every row of D streams past them once.
template <class T>
inline void gemm_at_b_accumulate(const T* x, std::size_t rows, std::size_t in, const T* d, std::size_t out, T* g) {
  std::size_t k = 0;
  for (; k + 4 <= in; k += 4) {
    T* g0 = g + k * out;
    for (std::size_t i = 0; i < rows; ++i) {
      const T* xi = x + i * in + k;
      axpy4(out, xi[0], xi[1], xi[2], xi[3], d + i * out, g0, g0 + out, g0 + 2 * out, g0 + 3 * out);
    }
  }
  for (; k < in; ++k)
    for (std::size_t i = 0; i < rows; ++i) axpy(out, x[i * in + k], d + i * out, g + k * out);
}

/// T[cols×rows] = Aᵀ for A[rows×cols], reading A with row stride `lda` (≥ cols).
template <class T>
inline void transpose(const T* a, std::size_t rows, std::size_t cols, T* t, std::size_t lda = 0) {
  if (lda == 0) lda = cols;
  constexpr std::size_t tile = 32;  // keeps both the read and the write side within a few cache lines
  for (std::size_t r0 = 0; r0 < rows; r0 += tile)
    for (std::size_t c0 = 0; c0 < cols; c0 += tile)
      for (std::size_t r = r0; r < std::min(rows, r0 + tile); ++r)
        for (std::size_t c = c0; c < std::min(cols, c0 + tile); ++c) t[c * rows + r] = a[r * lda + c];
}

/// Each of the `rows` rows of Y[rows×n] set to b[0..n).
template <class T>
inline void broadcast_rows(const T* b, std::size_t rows, std::size_t n, T* y) {
  for (std::size_t i = 0; i < rows; ++i) std::copy(b, b + n, y + i * n);
}

/// s[0..n) += Σ_i D[i][0..n): the bias gradient.
template <class T>
inline void sum_rows_accumulate(const T* d, std::size_t rows, std::size_t n, T* s) {
  for (std::size_t i = 0; i < rows; ++i) axpy(n, T(1), d + i * n, s);
}

/// exp(x) for x ≤ 0 to within 3e-7 relative (x below −87 gives 2^−126), in a form that vectorises
/// (libm's expf does not): exp(x) = 2^k · exp(r), |r| ≤ ln2 / 2, exp(r) by its degree-7 Taylor
/// polynomial (truncation error below 6e-9).
[[nodiscard]] inline float exp_nonpositive(float x) {
  // −x clamped to 87 as an integer min on the bit patterns (same order as the values for
  // non-negative floats) because g++ keeps a float compare as a branch, which stops vectorising.
  constexpr std::int32_t limit = std::bit_cast<std::int32_t>(87.0f);
  const float y = -std::bit_cast<float>(std::min(std::bit_cast<std::int32_t>(std::fabs(x)), limit));
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
  const float two_k = std::bit_cast<float>((static_cast<std::int32_t>(kf) + 127) << 23);  // k ∈ [−126, 0]
  return p * two_k;
}
[[nodiscard]] inline double exp_nonpositive(double x) { return std::exp(x); }

/// tanh(x) to within 2e-7 absolute: tanh|x| = (1 − e) / (1 + e) with e = exp(−2|x|) (the clamp
/// inside exp_nonpositive makes e = 2^−126 for |x| > 43.5, where tanh rounds to 1 anyway).
[[nodiscard]] inline float tanh_approx(float x) {
  const float e = exp_nonpositive(-2.0f * std::fabs(x));
  return std::copysign((1.0f - e) / (1.0f + e), x);
}
[[nodiscard]] inline double tanh_approx(double x) { return std::tanh(x); }

}  // namespace amsp_train::detail
