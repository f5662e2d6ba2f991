// Sum of squares and the finite check against double-precision serial references.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "amsp/optim/grad_norm.hpp"

namespace {

using amsp::bf16;
namespace optim = amsp::optim;

template <class G>
void check_sum_of_squares(std::size_t n, int threads) {
  CAPTURE(n);
  CAPTURE(threads);
  CAPTURE(amsp::name_of(amsp::dtype_of_v<G>));
  std::mt19937_64 rng(n);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  std::vector<G> storage(n + 1);  // the view starts one element in: unaligned
  double expected = 0;
  for (std::size_t i = 1; i <= n; ++i) {
    float v = value(rng);
    if (v == 0.0f) v = 1.0f;
    storage[i] = amsp::from_float<G>(v);
    const double d = static_cast<double>(amsp::to_float(storage[i]));
    expected += d * d;
  }
  const std::span<const G> view(storage.data() + 1, n);
  const double got = optim::sum_of_squares_host(view, threads);
  CHECK(std::abs(got - expected) <= 1e-12 * expected);
  CHECK(optim::all_finite_host(view));
}

}  // namespace

TEST_CASE("sum of squares matches a double reference") {
  for (std::size_t n : {0u, 1u, 15u, 4099u, 300007u}) {
    check_sum_of_squares<float>(n, 1);
    check_sum_of_squares<bf16>(n, 1);
  }
  check_sum_of_squares<float>(300007, 2);
  check_sum_of_squares<bf16>(300007, 0);
}

TEST_CASE("Inf and NaN propagate into the sum and fail the finite check") {
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t n : {1u, 15u, 5000u, 300007u}) {
    CAPTURE(n);
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      std::vector<float> g(n, 0.5f);
      g[at] = -inf;
      CHECK(optim::sum_of_squares_host(std::span<const float>(g), 2) == inf);
      CHECK_FALSE(optim::all_finite_host(std::span<const float>(g)));
      g[at] = std::numeric_limits<float>::quiet_NaN();
      CHECK(std::isnan(optim::sum_of_squares_host(std::span<const float>(g), 2)));
      CHECK_FALSE(optim::all_finite_host(std::span<const float>(g)));
      std::vector<bf16> h(n, bf16::from_float(0.5f));
      h[at] = bf16{0x7f80};  // +Inf
      CHECK(optim::sum_of_squares_host(std::span<const bf16>(h)) == inf);
      CHECK_FALSE(optim::all_finite_host(std::span<const bf16>(h)));
      h[at] = bf16{0xffc1};  // a negative NaN
      CHECK(std::isnan(optim::sum_of_squares_host(std::span<const bf16>(h))));
      CHECK_FALSE(optim::all_finite_host(std::span<const bf16>(h)));
    }
  }
}

TEST_CASE("the largest finite values are finite and do not overflow the double sum") {
  std::vector<float> g(33, std::numeric_limits<float>::max());
  g[3] = -std::numeric_limits<float>::max();
  CHECK(optim::all_finite_host(std::span<const float>(g)));
  const double m = static_cast<double>(std::numeric_limits<float>::max());
  CHECK(optim::sum_of_squares_host(std::span<const float>(g)) == doctest::Approx(33 * m * m).epsilon(1e-12));
  CHECK(optim::all_finite_host(std::span<const float>()));
  CHECK(optim::sum_of_squares_host(std::span<const float>()) == 0.0);
}
