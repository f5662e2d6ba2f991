// The example's dense loops against float64 references, at sizes that hit the remainder paths.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <utility>
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

/// Runs `kernel` on random C[rows×cols] and checks C += Σ_t A(r, t)·B[t][c] in float64, where
/// A(r, t) = a[r·a_row + t·a_red] (a_red = 1: A is row-major; a_row = 1: A is read transposed).
template <class Kernel>
void check_product(std::size_t rows, std::size_t depth, std::size_t cols, std::size_t a_row, std::size_t a_red,
                   Kernel kernel) {
  const std::vector<float> a = random_vector(rows * depth, 1);
  const std::vector<float> b = random_vector(depth * cols, 2);
  std::vector<float> c = random_vector(rows * cols, 3);
  const std::vector<float> c0 = c;
  kernel(a.data(), b.data(), c.data());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < cols; ++j) {
      double expected = c0[r * cols + j];
      for (std::size_t t = 0; t < depth; ++t) expected += static_cast<double>(a[r * a_row + t * a_red]) * b[t * cols + j];
      CHECK(c[r * cols + j] == doctest::Approx(expected).epsilon(1e-5));
    }
}

TEST_CASE("gemm_accumulate: Y += X·W, inside one tile and across several") {
  for (const auto& [in, out] : {std::pair<std::size_t, std::size_t>{6, 9}, {depth_tile + 6, 2 * width_tile + 3}})
    for (const std::size_t rows : {1u, 4u, 7u})
      check_product(rows, in, out, in, 1, [&](const float* x, const float* w, float* y) {
        gemm_accumulate(x, rows, in, w, out, y);
      });
}

TEST_CASE("gemm_at_b_accumulate: G += Xᵀ·D") {
  constexpr std::size_t rows = 5, out = 7;
  for (const std::size_t in : {3u, 4u, 9u})
    check_product(in, rows, out, 1, in, [&](const float* x, const float* d, float* g) {
      gemm_at_b_accumulate(x, rows, in, d, out, g);
    });
}

TEST_CASE("exp_nonpositive is within 3e-7 relative of exp on [-87, 0] and positive below") {
  double worst = 0.0;
  for (double x = -87.0; x <= 0.0; x += 1.0 / 1024.0) {
    const auto xf = static_cast<float>(x);
    const double exact = std::exp(static_cast<double>(xf));
    worst = std::max(worst, std::abs(static_cast<double>(exp_nonpositive(xf)) - exact) / exact);
  }
  CHECK(worst < 3e-7);
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  CHECK(exp_nonpositive(-1000.0f) > 0.0f);
}

TEST_CASE("transpose of a strided sub-matrix") {
  const std::vector<float> a = random_vector(5 * 12, 8);  // a 5x4 block at column 3 of a 5x12 matrix
  std::vector<float> t(4 * 5);
  transpose(a.data() + 3, 5, 4, t.data(), 12);
  for (std::size_t r = 0; r < 5; ++r)
    for (std::size_t c = 0; c < 4; ++c) CHECK(t[c * 5 + r] == a[r * 12 + 3 + c]);
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
