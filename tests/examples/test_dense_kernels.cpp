// The example's dense loops against float64 references, at sizes that hit the remainder paths.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "amsp_train/dense_kernels.hpp"

using namespace amsp_train::detail;

namespace {
std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = u(gen);
  return x;
}
}  // namespace

TEST_CASE("tanh_approx is within 2e-7 of tanh everywhere") {
  double worst = 0.0;
  for (double x = -20.0; x <= 20.0; x += 1.0 / 4096.0) {
    const auto xf = static_cast<float>(x);
    worst = std::max(worst, std::abs(static_cast<double>(tanh_approx(xf)) - std::tanh(static_cast<double>(xf))));
  }
  CHECK(worst < 2e-7);
  CHECK(tanh_approx(0.0f) == 0.0f);
  CHECK(tanh_approx(1e6f) == 1.0f);
  CHECK(tanh_approx(-1e6f) == -1.0f);
  CHECK(tanh_approx(-0.5f) == -tanh_approx(0.5f));
}

TEST_CASE("gemm_accumulate: Y += X·W") {
  for (const std::size_t rows : {1u, 4u, 7u}) {
    constexpr std::size_t in = 6, out = 9;
    const std::vector<float> x = random_vector(rows * in, 1);
    const std::vector<float> w = random_vector(in * out, 2);
    std::vector<float> y = random_vector(rows * out, 3);
    const std::vector<float> y0 = y;
    gemm_accumulate(x.data(), rows, in, w.data(), out, y.data());
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t o = 0; o < out; ++o) {
        double expected = y0[i * out + o];
        for (std::size_t k = 0; k < in; ++k) expected += static_cast<double>(x[i * in + k]) * w[k * out + o];
        CHECK(y[i * out + o] == doctest::Approx(expected).epsilon(1e-5));
      }
  }
}

TEST_CASE("gemm_at_b_accumulate: G += Xᵀ·D") {
  for (const std::size_t in : {3u, 4u, 9u}) {
    constexpr std::size_t rows = 5, out = 7;
    const std::vector<float> x = random_vector(rows * in, 4);
    const std::vector<float> d = random_vector(rows * out, 5);
    std::vector<float> g = random_vector(in * out, 6);
    const std::vector<float> g0 = g;
    gemm_at_b_accumulate(x.data(), rows, in, d.data(), out, g.data());
    for (std::size_t k = 0; k < in; ++k)
      for (std::size_t o = 0; o < out; ++o) {
        double expected = g0[k * out + o];
        for (std::size_t i = 0; i < rows; ++i) expected += static_cast<double>(x[i * in + k]) * d[i * out + o];
        CHECK(g[k * out + o] == doctest::Approx(expected).epsilon(1e-5));
      }
  }
}

TEST_CASE("transpose, broadcast_rows, sum_rows_accumulate") {
  constexpr std::size_t rows = 37, cols = 41;  // more than one 32-wide tile each way
  const std::vector<float> a = random_vector(rows * cols, 7);
  std::vector<float> t(rows * cols);
  transpose(a.data(), rows, cols, t.data());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) CHECK(t[c * rows + r] == a[r * cols + c]);

  const std::vector<float> b{1.0f, -2.0f, 3.5f};
  std::vector<float> y(4 * 3);
  broadcast_rows(b.data(), 4, 3, y.data());
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t o = 0; o < 3; ++o) CHECK(y[i * 3 + o] == b[o]);

  std::vector<float> s{0.5f, 0.5f, 0.5f};
  sum_rows_accumulate(y.data(), 4, 3, s.data());
  CHECK(s == std::vector<float>{4.5f, -7.5f, 14.5f});
}
