// Overflow skip: an Inf or NaN anywhere in the gradients leaves master, states and parameters
// bit-identical, on one thread and when the poisoned element lies in another thread's chunk.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "amsp/optim.hpp"

namespace {

using amsp::bf16;
namespace optim = amsp::optim;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class R, class G>
void check_skip(const R& rule, std::size_t n, std::size_t poisoned, float poison, int threads) {
  CAPTURE(R::name);
  CAPTURE(n);
  CAPTURE(poisoned);
  CAPTURE(poison);
  CAPTURE(threads);
  std::mt19937 rng(static_cast<unsigned>(n + poisoned));
  std::uniform_real_distribution<float> value(0.25f, 2.0f);
  std::vector<float> master(n), states[R::state_count];
  std::vector<G> grads(n);
  std::vector<bf16> params(n);
  for (auto& v : master) v = value(rng);
  for (auto& s : states) {
    s.resize(n);
    for (auto& v : s) v = value(rng);
  }
  for (auto& v : grads) v = amsp::from_float<G>(value(rng));
  for (auto& v : params) v = bf16::from_float(value(rng));
  grads[poisoned] = amsp::from_float<G>(poison);

  const auto master_before = master;
  const auto params_before = params;
  std::vector<float> states_before[R::state_count];
  optim::ShardState<R> shard{master, {}};
  for (int k = 0; k < R::state_count; ++k) {
    states_before[k] = states[k];
    shard.states[static_cast<std::size_t>(k)] = states[k];
  }
  const auto result =
      optim::update_host(rule, shard, std::span<const G>(grads), std::span<bf16>(params), {3, 0.5f, true, threads});
  CHECK(result.skipped);
  CHECK(same_bits(master, master_before));
  CHECK(same_bits(params, params_before));
  for (int k = 0; k < R::state_count; ++k) CHECK(same_bits(states[k], states_before[k]));
}

template <class R>
void check_skip_everywhere(const R& rule) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float poison : {inf, -inf, nan}) {
    for (std::size_t at : {0u, 7u, 14u}) check_skip<R, float>(rule, 15, at, poison, 1);
    check_skip<R, bf16>(rule, 4099, 4098, poison, 1);
    // Two threads: the bad element in the first chunk, and in the second thread's last lanes.
    check_skip<R, float>(rule, 131101, 3, poison, 2);
    check_skip<R, bf16>(rule, 131101, 131100, poison, 2);
  }
}

}  // namespace

TEST_CASE("non-finite gradients leave every buffer untouched") {
  check_skip_everywhere(optim::AdamW{});
  check_skip_everywhere(optim::Adam{});
  check_skip_everywhere(optim::SgdMomentum{});
  check_skip_everywhere(optim::Lion{});
}

TEST_CASE("finite gradients are not skipped, with or without the check") {
  std::vector<float> master(40, 1.0f), m(40, 0.0f), v(40, 0.0f), grads(40, 0.5f);
  grads[39] = std::numeric_limits<float>::max();  // huge but finite
  optim::ShardState<optim::AdamW> shard{master, {std::span<float>(m), std::span<float>(v)}};
  CHECK_FALSE(optim::update_host(optim::AdamW{}, shard, std::span<const float>(grads), std::span<float>(), {1}).skipped);
  CHECK(master[0] < 1.0f);
  CHECK_FALSE(
      optim::update_host(optim::AdamW{}, shard, std::span<const float>(grads), std::span<float>(), {2, 1.0f, false})
          .skipped);
}

TEST_CASE("without the check, a NaN gradient is not reported and propagates") {
  std::vector<float> master(20, 1.0f), buf(20, 0.0f), grads(20, 0.5f);
  grads[5] = std::numeric_limits<float>::quiet_NaN();
  optim::ShardState<optim::SgdMomentum> shard{master, {std::span<float>(buf)}};
  const auto result = optim::update_host(optim::SgdMomentum{}, shard, std::span<const float>(grads), std::span<float>(),
                                         {1, 1.0f, false});
  CHECK_FALSE(result.skipped);
  CHECK(std::isnan(master[5]));
  CHECK(master[4] == master[4]);  // the neighbours stay finite
}
