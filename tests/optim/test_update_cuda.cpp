// CUDA optimizer kernels (label gpu) against the same float64 references and tolerances as the
// host loop (harness.hpp), plus the device overflow skip, sum of squares and finite check. The
// device work happens in cuda_driver.cu; without a GPU every case exits 77 (ctest: skipped).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "amsp/optim.hpp"
#include "cuda_driver.hpp"
#include "harness.hpp"

namespace {

namespace optim = amsp::optim;
using amsp::bf16;

void require_gpu() {
  if (!amsp_test::cuda_device_present()) {
    std::puts("no CUDA device: skipped");
    std::exit(77);
  }
}

struct CudaUpdate {
  bool misalign_grads = false;
  template <class R, class G, class P>
  optim::StepResult operator()(const R& rule, amsp_test::Buffers<R, G, P>& buf, const optim::StepOptions& opt) const {
    return amsp_test::update_on_device(rule, buf.shard(), buf.grad_view(), buf.param_view(), opt, misalign_grads);
  }
};

}  // namespace

TEST_CASE("CUDA: every rule matches its float64 reference for every layout") {
  require_gpu();
  amsp_test::for_each_rule_case([](const auto& rule, const auto& ref) {
    amsp_test::check_all_layouts(CudaUpdate{}, rule, ref);
    // No index at which every buffer is 16-byte aligned: the one-lane path throughout.
    amsp_test::check_against_reference<float, bf16>(CudaUpdate{true}, rule, ref, 4099, 1);
    // Many grid-stride trips per thread.
    amsp_test::check_against_reference<bf16, bf16>(CudaUpdate{}, rule, ref, 3000017, 1);
  });
}

TEST_CASE("CUDA: non-finite gradients leave every buffer untouched") {
  require_gpu();
  const std::size_t n = 100003;
  for (std::size_t at : {std::size_t{0}, std::size_t{4}, n / 2, n - 1}) {
    for (float poison : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      CAPTURE(at);
      amsp_test::Buffers<optim::AdamW, bf16, bf16> buf(n);
      for (std::size_t i = 0; i < buf.master.size(); ++i) {
        buf.master[i] = 1.0f + 1e-3f * static_cast<float>(i % 97);
        buf.states[0][i] = 0.01f;
        buf.states[1][i] = 0.02f;
        buf.grads[i] = bf16::from_float(0.5f);
        buf.params[i] = bf16::from_float(buf.master[i]);
      }
      buf.grads[at + 1] = bf16::from_float(poison);
      const auto before = buf;
      CHECK(CudaUpdate{}(optim::AdamW{}, buf, {2, 0.5f, true}).skipped);
      CHECK(std::memcmp(buf.master.data(), before.master.data(), buf.master.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(buf.states[0].data(), before.states[0].data(), buf.master.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(buf.states[1].data(), before.states[1].data(), buf.master.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(buf.params.data(), before.params.data(), buf.params.size() * sizeof(bf16)) == 0);
    }
  }
}

TEST_CASE("CUDA: sum of squares and finite check against double references") {
  require_gpu();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(0.1f, 3.0f);
  for (std::size_t n : {0u, 1u, 15u, 4099u, 1000003u}) {
    CAPTURE(n);
    std::vector<float> g(n);
    std::vector<bf16> h(n);
    double expected_f = 0, expected_h = 0;
    for (std::size_t i = 0; i < n; ++i) {
      g[i] = value(rng);
      h[i] = bf16::from_float(g[i]);
      expected_f += static_cast<double>(g[i]) * g[i];
      expected_h += static_cast<double>(h[i].to_float()) * h[i].to_float();
    }
    CHECK(std::abs(amsp_test::sum_of_squares_on_device(std::span<const float>(g)) - expected_f) <= 1e-12 * expected_f);
    CHECK(std::abs(amsp_test::sum_of_squares_on_device(std::span<const bf16>(h)) - expected_h) <= 1e-12 * expected_h);
    CHECK_FALSE(amsp_test::nonfinite_on_device(std::span<const float>(g)));
    CHECK_FALSE(amsp_test::nonfinite_on_device(std::span<const bf16>(h)));
    if (n == 0) continue;
    g[n - 1] = -std::numeric_limits<float>::infinity();
    h[n / 2] = bf16{0x7fc0};
    CHECK(amsp_test::nonfinite_on_device(std::span<const float>(g)));
    CHECK(amsp_test::nonfinite_on_device(std::span<const bf16>(h)));
    CHECK(std::isinf(amsp_test::sum_of_squares_on_device(std::span<const float>(g))));
    CHECK(std::isnan(amsp_test::sum_of_squares_on_device(std::span<const bf16>(h))));
  }
}
