// Input validation, run-time rule selection, and the bf16 rounding of written parameters.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "amsp/optim.hpp"

namespace {

using amsp::bf16;
namespace optim = amsp::optim;

template <class F>
std::string rule_of_error(F&& f) {
  try {
    f();
  } catch (const amsp::error& e) {
    return e.rule();
  }
  return "no error";
}

}  // namespace

static_assert(optim::update_rule<optim::AdamW> && optim::update_rule<optim::Adam> &&
              optim::update_rule<optim::SgdMomentum> && optim::update_rule<optim::Lion>);
static_assert(!optim::update_rule<int>);
static_assert(optim::AdamW::state_count == 2 && optim::Adam::state_count == 2 &&
              optim::SgdMomentum::state_count == 1 && optim::Lion::state_count == 1);

TEST_CASE("rules are parsed by name and report their state count") {
  CHECK(optim::rule_name(optim::parse_rule("adamw")) == "adamw");
  CHECK(optim::rule_name(optim::parse_rule("adam")) == "adam");
  CHECK(optim::rule_name(optim::parse_rule("sgd")) == "sgd");
  CHECK(optim::rule_name(optim::parse_rule("sgd_momentum")) == "sgd");
  CHECK(optim::rule_name(optim::parse_rule("lion")) == "lion");
  CHECK(optim::state_count(optim::parse_rule("adamw")) == 2);
  CHECK(optim::state_count(optim::parse_rule("adam")) == 2);
  CHECK(optim::state_count(optim::parse_rule("sgd")) == 1);
  CHECK(optim::state_count(optim::parse_rule("lion")) == 1);
  CHECK(rule_of_error([] { (void)optim::parse_rule("adagrad"); }) == "optim.parse");
  optim::AnyRule rule = optim::parse_rule("lion");
  optim::learning_rate(rule) = 0.125f;
  CHECK(std::get<optim::Lion>(rule).lr == 0.125f);
}

TEST_CASE("bad inputs fail with the rule they break, before any write") {
  std::vector<float> master(8, 1.0f), m(8, 0.0f), v(8, 0.0f), short_state(7, 0.0f), grads(8, 0.5f);
  std::vector<bf16> params(8);
  const auto untouched = master;
  optim::ShardState<optim::AdamW> ok{master, {std::span<float>(m), std::span<float>(v)}};
  optim::ShardState<optim::AdamW> bad_state{master, {std::span<float>(m), std::span<float>(short_state)}};
  const std::span<const float> g(grads);
  CHECK(rule_of_error([&] { optim::update_host(optim::AdamW{}, bad_state, g, std::span<bf16>(), {1}); }) ==
        "optim.size_mismatch");
  CHECK(rule_of_error([&] { optim::update_host(optim::AdamW{}, ok, g.first(7), std::span<bf16>(), {1}); }) ==
        "optim.size_mismatch");
  CHECK(rule_of_error([&] {
          optim::update_host(optim::AdamW{}, ok, g, std::span<bf16>(params).first(3), {1});
        }) == "optim.size_mismatch");
  CHECK(rule_of_error([&] { optim::update_host(optim::AdamW{}, ok, g, std::span<bf16>(), {0}); }) == "optim.step");
  CHECK(rule_of_error([&] {
          optim::update_host(optim::AdamW{}, ok, g, std::span<bf16>(),
                             {1, std::numeric_limits<float>::quiet_NaN()});
        }) == "optim.grad_scale");
  CHECK(rule_of_error([&] { optim::update_host(optim::AdamW{}, ok, g, std::span<bf16>(), {1, 1.0f, true, -1}); }) ==
        "optim.threads");
  optim::AdamW bad_beta;
  bad_beta.beta2 = 1.0f;
  CHECK(rule_of_error([&] { optim::update_host(bad_beta, ok, g, std::span<bf16>(), {1}); }) ==
        "optim.hyperparameter");
  optim::SgdMomentum nesterov_damped{0.1f, 0.9f, 0.5f, 0.0f, true};
  std::vector<float> buf(8, 0.0f);
  optim::ShardState<optim::SgdMomentum> sgd{master, {std::span<float>(buf)}};
  CHECK(rule_of_error([&] { optim::update_host(nesterov_damped, sgd, g, std::span<bf16>(), {1}); }) ==
        "optim.hyperparameter");
  const std::vector<std::span<float>> one_state{std::span<float>(m)};
  CHECK(rule_of_error([&] {
          optim::update_host(optim::AnyRule{optim::AdamW{}}, std::span<float>(master),
                             std::span<const std::span<float>>(one_state), g, std::span<bf16>(), {1});
        }) == "optim.state_count");
  CHECK(master == untouched);
}

TEST_CASE("bf16 parameters are the master values rounded to nearest even, NaN canonical") {
  // Lion with lr = 0 and no decay leaves the master weights exactly as they are (p * 1 - 0 * sign),
  // Inf and NaN included, so the written parameters must be bf16::from_float (core's scalar
  // conversion) of each pattern, whatever lane handles it.
  const std::uint32_t patterns[] = {
      0x3f808000u,  // halfway, even kept: rounds down
      0x3f818000u,  // halfway, odd kept: rounds up
      0x3f808001u,  // just above halfway
      0xbf807fffu,  // negative, just below halfway
      0x7f7fffffu,  // largest float: rounds to +Inf
      0xff7fffffu,  // rounds to -Inf
      0x00000001u,  // smallest subnormal
      0x807fffffu,  // largest negative subnormal
      0x7fc00001u,  // NaN with payload: canonical 0x7FFF
      0x7f800000u,  // +Inf
      0x00000000u,  // +0
      0x80000000u,  // -0
  };
  constexpr std::size_t per_pattern = 5;  // spread the patterns across SIMD lanes and the tail
  const std::size_t count = std::size(patterns);
  const std::size_t n = count * per_pattern;
  std::vector<float> master(n), m(n, 0.0f), grads(n, 0.25f);
  for (std::size_t i = 0; i < n; ++i) master[i] = amsp::detail::bits_float(patterns[(i * 7) % count]);
  std::vector<bf16> params(n);
  optim::ShardState<optim::Lion> shard{master, {std::span<float>(m)}};
  const optim::Lion frozen{0.0f, 0.9f, 0.99f, 0.0f};
  optim::update_host(frozen, shard, std::span<const float>(grads), std::span<bf16>(params), {1});
  for (std::size_t i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(params[i].bits == bf16::from_float(amsp::detail::bits_float(patterns[(i * 7) % count])).bits);
  }
}

TEST_CASE("the thread count does not change the result") {
  const std::size_t n = 200009;  // three threads of at least 64 Ki elements
  std::vector<float> grads(n);
  for (std::size_t i = 0; i < n; ++i) grads[i] = 0.001f * static_cast<float>((i * 2654435761u) % 2001) - 1.0f;
  std::vector<float> master[2], m[2], v[2];
  std::vector<bf16> params[2];
  for (int run = 0; run < 2; ++run) {
    master[run].assign(n, 0.75f);
    m[run].assign(n, 0.0f);
    v[run].assign(n, 0.0f);
    params[run].resize(n);
    optim::ShardState<optim::AdamW> shard{master[run], {std::span<float>(m[run]), std::span<float>(v[run])}};
    for (std::int64_t t = 1; t <= 3; ++t)
      optim::update_host(optim::AdamW{}, shard, std::span<const float>(grads), std::span<bf16>(params[run]),
                         {t, 0.5f, true, run == 0 ? 1 : 3});
  }
  CHECK(master[0] == master[1]);
  CHECK(m[0] == m[1]);
  CHECK(v[0] == v[1]);
  CHECK(std::memcmp(params[0].data(), params[1].data(), n * sizeof(bf16)) == 0);
}
