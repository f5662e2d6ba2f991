// The fused host update against the float64 references (harness.hpp): every rule, fp32 and bf16
// gradients and parameters, odd lengths at unaligned offsets, 20 steps of fresh random data, one
// and two threads, typed and run-time-selected rules.
#include <doctest/doctest.h>

#include <span>
#include <vector>

#include "amsp/optim.hpp"
#include "harness.hpp"

namespace optim = amsp::optim;
using amsp::bf16;

TEST_CASE("every rule matches its float64 reference for every layout") {
  amsp_test::for_each_rule_case([](const auto& rule, const auto& ref) {
    amsp_test::check_all_layouts(amsp_test::HostUpdate{}, rule, ref);
    amsp_test::check_against_reference<float, bf16>(amsp_test::HostAnyUpdate{}, rule, ref, 4099, 1);
    // Long enough for two threads (each needs 64 Ki elements) and an odd split.
    amsp_test::check_against_reference<float, bf16>(amsp_test::HostUpdate{}, rule, ref, 131101, 2);
  });
}

TEST_CASE("plain SGD (momentum 0) is p -= lr * (g + wd * p)") {
  // The reference keeps no buffer without momentum, so only the weights are compared.
  amsp_test::check_against_reference<float, float>(amsp_test::HostUpdate{}, optim::SgdMomentum{1e-2f, 0.0f, 0.5f, 0.01f, false},
                                                   amsp_test::RefSgd{1e-2f, 0.0f, 0.5f, 0.01f, false}, 4099, 1, false);
}

TEST_CASE("Lion: sign(0) = 0, so a zero direction only decays the weights") {
  // m = 0 and g = 0 at step 1 make the interpolated direction exactly zero.
  std::vector<float> master{1.5f, -0.75f, 3.0f}, m(3, 0.0f), grads(3, 0.0f);
  const optim::Lion rule{1e-2f, 0.9f, 0.99f, 0.5f};
  optim::ShardState<optim::Lion> shard{master, {std::span<float>(m)}};
  const auto result = optim::update_host(rule, shard, std::span<const float>(grads), std::span<float>(), {1});
  CHECK_FALSE(result.skipped);
  const float decay = static_cast<float>(1.0 - 1e-2 * 0.5);  // computed as the rule documents it
  CHECK(master[0] == 1.5f * decay);
  CHECK(master[1] == -0.75f * decay);
  CHECK(master[2] == 3.0f * decay);
  CHECK(m == std::vector<float>(3, 0.0f));
}
