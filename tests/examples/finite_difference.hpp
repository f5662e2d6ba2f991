#pragma once
// Central finite differences in float64: the independent reference the example's backward passes
// are checked against.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace amsp_train::test {

inline std::vector<double> random_values(std::size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> x(n);
  for (double& v : x) v = u(gen);
  return x;
}

/// d loss / d values[i] for every i by (loss(v + h) − loss(v − h)) / 2h; `loss` reads `values`.
template <class Loss>
std::vector<double> numeric_gradient(std::span<double> values, Loss&& loss, double h = 1e-6) {
  std::vector<double> grad(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + h;
    const double up = loss();
    values[i] = saved - h;
    const double down = loss();
    values[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

/// max |analytic − numeric| ≤ tolerance × max(max |numeric|, 1e-3): the infinity-norm relative
/// error (an element-wise relative error is meaningless for entries that are nearly zero).
inline void check_gradient(std::span<const double> analytic, std::span<const double> numeric, double tolerance = 1e-6) {
  REQUIRE(analytic.size() == numeric.size());
  double scale = 1e-3, worst = 0.0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    scale = std::max(scale, std::abs(numeric[i]));
    worst = std::max(worst, std::abs(analytic[i] - numeric[i]));
  }
  CAPTURE(worst);
  CAPTURE(scale);
  CHECK(worst <= tolerance * scale);
}

/// Σ w·y: a scalar whose gradient with respect to y is w (how one layer is checked on its own).
inline double weighted_sum(std::span<const double> y, std::span<const double> w) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

}  // namespace amsp_train::test
