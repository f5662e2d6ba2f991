// The engine's device operations (amsp/engine/device_ops.cuh, label gpu) against independent host
// references: conversions and accumulation element by element against the host conversions (same
// bits), the sum of squares against a float64 host sum, the step decision against hand-computed
// cases and the host decide_step, and the update with its control in device memory against
// update_host (same bits: the driver is compiled with --fmad=false, see device_ops_driver.cu).
// Without a GPU every case exits 77 (ctest: skipped).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/engine/step_decision.hpp"
#include "amsp/optim.hpp"
#include "device_ops_driver.hpp"
#include "step_decision_cases.hpp"

namespace {

namespace optim = amsp::optim;
using amsp::bf16;
using amsp::fp16;
using amsp_test::ControlValues;

void require_gpu() {
  if (!amsp_test::device_ops_gpu_present()) {
    std::puts("no CUDA device: skipped");
    std::exit(77);
  }
}

template <class T>
std::uint64_t bits_of(T value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  return bits;
}

/// Same bits at every index; a NaN matches any NaN when `nan_payload_free` (a double NaN narrowed
/// to float keeps part of its payload on x86 and becomes the canonical NaN on the GPU: the value
/// is NaN on both, which is what the contract promises).
template <class T>
void check_same_bits(std::span<const T> got, std::span<const T> want, const char* what, bool nan_payload_free = false) {
  REQUIRE(got.size() == want.size());
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    bool same = bits_of(got[i]) == bits_of(want[i]);
    if constexpr (std::is_floating_point_v<T>)
      if (nan_payload_free) same = same || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && mismatches++ == 0) first = i;
  }
  CAPTURE(what);
  CAPTURE(first);
  CHECK(mismatches == 0);
}

/// Interesting floats: zeros, subnormals, the largest finite, infinities, NaNs, ties of the bf16
/// and fp16 roundings, then random bit patterns.
std::vector<float> probe_floats(std::size_t random_count) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, -1e-45f, 1e-40f, 1.17549435e-38f,
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 65504.0f, 65520.0f, 6.1e-5f, 5.96e-8f};
  for (std::uint32_t b : {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7f7f8000u, 0x3f801000u, 0x3f803000u, 0x7fa00001u})
    v.push_back(amsp::detail::bits_float(b));  // bf16 / fp16 ties, the largest-bf16 overflow, a signalling NaN
  std::mt19937 rng(5);
  for (std::size_t i = 0; i < random_count; ++i)
    v.push_back(amsp::detail::bits_float(static_cast<std::uint32_t>(rng())));
  return v;
}

template <class T>
std::vector<T> every_16_bit_pattern() {
  std::vector<T> v(65536);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = T{static_cast<std::uint16_t>(i)};
  return v;
}

template <class From, class To>
void check_convert(const std::vector<From>& in, bool nan_payload_free = false) {
  std::vector<To> want(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) want[i] = amsp::from_float<To>(amsp::to_float(in[i]));
  for (std::size_t offset : {0, 1}) {
    CAPTURE(offset);
    const std::vector<To> got = amsp_test::convert_on_device<From, To>(std::span<const From>(in), offset);
    check_same_bits<To>(got, want, "convert", nan_payload_free);
  }
}

std::vector<float> random_floats(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

/// The sum of squares accumulated in long double (64-bit mantissa on x86: its own rounding is
/// far below the 1e-12 the device's double sum is held to).
double sum_of_squares_reference(const std::vector<std::vector<float>>& parts) {
  long double sum = 0.0L;
  for (const auto& p : parts)
    for (float x : p) sum += static_cast<long double>(x) * static_cast<long double>(x);
  return static_cast<double>(sum);
}

template <class R, class P>
struct HostShard {
  std::vector<float> master, grads, states[R::state_count];
  std::vector<P> params;
  HostShard(std::size_t n, unsigned seed) : master(random_floats(n, 0.5f, 1.5f, seed)), params(n) {
    for (int k = 0; k < R::state_count; ++k) states[k].assign(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) params[i] = amsp::from_float<P>(master[i]);
  }
  optim::ShardState<R> view() {
    optim::ShardState<R> s{master, {}};
    for (int k = 0; k < R::state_count; ++k) s.states[static_cast<std::size_t>(k)] = states[k];
    return s;
  }
  void check_same_as(const HostShard& want) const {
    check_same_bits<float>(master, want.master, "master");
    for (int k = 0; k < R::state_count; ++k) check_same_bits<float>(states[k], want.states[k], "state");
    check_same_bits<P>(params, want.params, "params");
  }
};

/// Several steps of update_host and of device_ops::update with the same grad_scale and step (the
/// device reads both from its control), fresh gradients each step; every buffer the same bits.
template <class R, class P>
void check_update_matches_host(const R& rule, std::size_t n, std::size_t offset) {
  HostShard<R, P> host(n, 1), device = host;
  for (std::int64_t step = 1; step <= 4; ++step) {
    CAPTURE(step);
    host.grads = device.grads = random_floats(n, -1.0f, 1.0f, static_cast<unsigned>(10 + step));
    const float grad_scale = 0.3f;
    optim::update_host(rule, host.view(), std::span<const float>(host.grads), std::span<P>(host.params),
                       optim::StepOptions{step, grad_scale, false});
    ControlValues control;
    control.grad_scale = grad_scale;
    control.step = step;
    amsp_test::update_on_device(rule, device.view(), std::span<const float>(device.grads), std::span<P>(device.params),
                                control, offset);
    device.check_same_as(host);
  }
}

}  // namespace

TEST_CASE("device convert: the host's conversion, bit for bit") {
  require_gpu();
  const std::vector<float> floats = probe_floats(1 << 20);
  check_convert<float, float>(floats);
  check_convert<float, bf16>(floats);
  check_convert<float, fp16>(floats);
  check_convert<bf16, float>(every_16_bit_pattern<bf16>());
  check_convert<fp16, float>(every_16_bit_pattern<fp16>());
  check_convert<fp16, bf16>(every_16_bit_pattern<fp16>());
  std::vector<double> doubles = {0.0, -0.0, 1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-40, 1e-46, 1e300, -1e300,
                                 std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  for (int i = 0; i < 100000; ++i) doubles.push_back(u(rng));
  check_convert<double, float>(doubles, true);
  check_convert<double, bf16>(doubles);
}

TEST_CASE("device accumulate: the first micro-batch writes, later ones add, rounded as on the host") {
  require_gpu();
  const std::size_t n = 300007;
  const std::vector<float> z = random_floats(n, -2.0f, 2.0f, 7);
  const std::vector<float> g32 = random_floats(n, -2.0f, 2.0f, 8);
  std::vector<bf16> g16(n);
  for (std::size_t i = 0; i < n; ++i) g16[i] = bf16::from_float(g32[i]);
  for (bool first : {true, false}) {
    CAPTURE(first);
    std::vector<float> want32(n);
    std::vector<bf16> want16(n);
    for (std::size_t i = 0; i < n; ++i) {
      want32[i] = first ? z[i] : g32[i] + z[i];
      want16[i] = bf16::from_float(first ? z[i] : g16[i].to_float() + z[i]);
    }
    // Offset 0: eight at a time from the start; 1: from index 3 (fp32) or 7 (bf16), the head one by one.
    for (std::size_t offset : {0, 1}) {
      CAPTURE(offset);
      check_same_bits<float>(amsp_test::accumulate_on_device<float>(g32, z, first, offset), want32, "fp32 G");
      check_same_bits<bf16>(amsp_test::accumulate_on_device<bf16>(g16, z, first, offset), want16, "bf16 G");
    }
  }
}

TEST_CASE("device sum of squares: added to the control's sum, against a float64 host sum") {
  require_gpu();
  const std::vector<std::vector<float>> parts = {random_floats(1000003, -3.0f, 3.0f, 1), {},
                                                 random_floats(7, -3.0f, 3.0f, 2), random_floats(4099, -1e3f, 1e3f, 3)};
  const double want = sum_of_squares_reference(parts);
  ControlValues before;
  before.sum_sq = 1234.5;
  before.step = 9;
  const ControlValues added = amsp_test::add_sum_of_squares_on_device<float>(before, parts, false);
  CHECK(added.sum_sq == doctest::Approx(1234.5 + want).epsilon(1e-12));
  CHECK(added.step == 9);  // nothing else touched
  const ControlValues reset = amsp_test::add_sum_of_squares_on_device<float>(before, parts, true);
  CHECK(reset.sum_sq == doctest::Approx(want).epsilon(1e-12));

  // bf16 gradients: squared after exact widening.
  std::vector<std::vector<bf16>> parts16(1);
  std::vector<std::vector<float>> widened(1);
  for (float x : parts[3]) {
    parts16[0].push_back(bf16::from_float(x));
    widened[0].push_back(parts16[0].back().to_float());
  }
  const double want16 = sum_of_squares_reference(widened);
  CHECK(amsp_test::add_sum_of_squares_on_device<bf16>(ControlValues{}, parts16, true).sum_sq ==
        doctest::Approx(want16).epsilon(1e-12));

  // A NaN or Inf gradient makes the sum non-finite (what the overflow skip looks at).
  std::vector<std::vector<float>> poisoned = {parts[2]};
  poisoned[0][3] = std::numeric_limits<float>::infinity();
  CHECK(std::isinf(amsp_test::add_sum_of_squares_on_device<float>(ControlValues{}, poisoned, true).sum_sq));
  poisoned[0][5] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(amsp_test::add_sum_of_squares_on_device<float>(ControlValues{}, poisoned, true).sum_sq));
}

TEST_CASE("device step decision: hand-computed cases") {
  require_gpu();
  for (const amsp_test::DecisionCase& c : amsp_test::decision_cases()) {
    CAPTURE(c.name);
    ControlValues before;
    before.sum_sq = c.sum_sq;
    before.step = c.steps_before;
    const ControlValues d = amsp_test::decide_on_device(before, c.average, c.loss_scale, c.max_grad_norm,
                                                        c.skip_nonfinite);
    CHECK(amsp_test::same_value(d.grad_norm, c.expected.grad_norm));
    CHECK(amsp_test::same_value(d.clip_coefficient, c.expected.clip_coefficient));
    CHECK(amsp_test::same_value(d.grad_scale, c.expected.grad_scale));
    CHECK(d.skipped == (c.expected.skipped ? 1u : 0u));
    CHECK(d.step == c.expected.step);
    CHECK(amsp_test::same_value(d.sum_sq, c.sum_sq));  // the sum is read, not changed
  }
}

TEST_CASE("device step decision: the host's decide_step, bit for bit, over random inputs") {
  require_gpu();
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> log_sum(-20.0, 20.0);
  for (int i = 0; i < 200; ++i) {
    const double sum_sq = std::exp(log_sum(rng));
    const double average = 1.0 / static_cast<double>(1 + rng() % 24);
    const float loss_scale = static_cast<float>(std::ldexp(1.0, static_cast<int>(rng() % 24)) * 0.75);
    const float max_grad_norm = (i % 3 == 0) ? 0.0f : static_cast<float>(std::exp(log_sum(rng) / 4));
    const bool skip = (i % 2) == 0;
    ControlValues before;
    before.sum_sq = sum_sq;
    before.step = i;
    const ControlValues d = amsp_test::decide_on_device(before, average, loss_scale, max_grad_norm, skip);
    const amsp::StepDecision h = amsp::decide_step(sum_sq, average, loss_scale, max_grad_norm, skip, i);
    CAPTURE(i);
    CHECK(bits_of(d.grad_norm) == bits_of(h.grad_norm));
    CHECK(bits_of(d.clip_coefficient) == bits_of(h.clip_coefficient));
    CHECK(bits_of(d.grad_scale) == bits_of(h.grad_scale));
    CHECK(d.step == h.step);
  }
}

TEST_CASE("device step counter, sum word and the StepResult of a control") {
  require_gpu();
  ControlValues before;
  before.sum_sq = 3.0;
  before.grad_scale = 0.75f;
  before.step = 11;
  const ControlValues after = amsp_test::set_step_and_sum_on_device(before, 42, 2.5);
  CHECK(after.step == 42);
  CHECK(after.sum_sq == 2.5);
  CHECK(after.grad_scale == 0.75f);  // nothing else touched
  std::string rule;
  try {
    amsp_test::set_step_and_sum_on_device(before, -1, 0.0);
  } catch (const amsp::error& e) {
    rule = e.rule();
  }
  CHECK(rule == "engine.step_count");

  ControlValues skipped;
  skipped.grad_norm = 7.5;
  skipped.clip_coefficient = 0.25f;
  skipped.skipped = 1;
  skipped.step = 3;
  const amsp::StepResult r = amsp_test::step_result_of(skipped);
  CHECK(r.skipped);
  CHECK(r.grad_norm == 7.5);
  CHECK(r.clip_coefficient == 0.25f);
  CHECK(r.step == 3);
}

TEST_CASE("device update with its control in device memory: update_host's bits") {
  require_gpu();
  for (std::size_t offset : {0, 1}) {  // 1: eight at a time from index 3 (fp32 P) or 7 (bf16 P), the head one by one
    CAPTURE(offset);
    check_update_matches_host<optim::AdamW, float>(optim::AdamW{.lr = 1e-2f, .weight_decay = 0.1f}, 100003, offset);
    check_update_matches_host<optim::AdamW, bf16>(optim::AdamW{.lr = 1e-2f}, 100003, offset);
    check_update_matches_host<optim::Adam, float>(optim::Adam{.lr = 1e-2f, .weight_decay = 0.01f}, 4099, offset);
    check_update_matches_host<optim::SgdMomentum, bf16>(optim::SgdMomentum{.lr = 0.1f, .nesterov = true}, 4099,
                                                        offset);
    check_update_matches_host<optim::Lion, float>(optim::Lion{.lr = 1e-3f, .weight_decay = 0.1f}, 4099, offset);
  }
}

TEST_CASE("device update: a skipped step leaves master, states and parameters untouched") {
  require_gpu();
  HostShard<optim::AdamW, bf16> shard(10007, 4);
  for (float& s : shard.states[1]) s = 0.5f;
  shard.grads = random_floats(shard.master.size(), -1.0f, 1.0f, 9);
  const HostShard<optim::AdamW, bf16> before = shard;
  ControlValues control;
  control.skipped = 1;
  control.grad_scale = 1.0f;
  control.step = 5;
  amsp_test::update_on_device(optim::AdamW{}, shard.view(), std::span<const float>(shard.grads),
                              std::span<bf16>(shard.params), control, 0);
  shard.check_same_as(before);
}

TEST_CASE("one device step (sum of squares, decision, update) equals the host engine's step") {
  require_gpu();
  const optim::AdamW rule{.lr = 1e-2f, .weight_decay = 0.1f};
  const double average = 0.125;
  const float loss_scale = 1024.0f, max_grad_norm = 0.5f;  // gradients of norm ~ 2: clipped
  HostShard<optim::AdamW, bf16> host(65543, 6), device = host;
  ControlValues control;
  control.step = 2;  // as after two applied steps
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    host.grads = device.grads = random_floats(host.master.size(), -40.0f, 40.0f, static_cast<unsigned>(20 + round));
    if (round == 1) host.grads[777] = device.grads[777] = std::numeric_limits<float>::quiet_NaN();  // overflow: skipped
    const ControlValues after = amsp_test::step_on_device(rule, device.view(), std::span<const float>(device.grads),
                                                          std::span<bf16>(device.params), control, average,
                                                          loss_scale, max_grad_norm, true);
    // The host engine's step on the device's sum (summation order is CUB's, checked above).
    if (round == 1) CHECK(std::isnan(after.sum_sq));
    else CHECK(after.sum_sq == doctest::Approx(sum_of_squares_reference({host.grads})).epsilon(1e-12));
    const amsp::StepDecision d =
        amsp::decide_step(after.sum_sq, average, loss_scale, max_grad_norm, true, control.step);
    CHECK(after.skipped == (d.skipped ? 1u : 0u));
    CHECK(after.skipped == (round == 1 ? 1u : 0u));
    CHECK(after.step == d.step);
    CHECK(bits_of(after.grad_scale) == bits_of(d.grad_scale));
    if (round != 1) CHECK(d.clip_coefficient < 1.0f);
    if (!d.skipped)
      optim::update_host(rule, host.view(), std::span<const float>(host.grads), std::span<bf16>(host.params),
                         optim::StepOptions{d.step, d.grad_scale, false});
    device.check_same_as(host);
    control = after;
  }
}
