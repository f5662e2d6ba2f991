#pragma once
// The reference-comparison harness shared by the host and CUDA update tests: buffers with
// unaligned views, 20 steps of fresh random data, and the comparison with the float64 references
// of reference.hpp under the tolerances below. The update itself is a callable, so the same
// harness drives update_host, the run-time-selected AnyRule path and update_cuda.
//
// Tolerances: fp32 master weights and fp32 parameters within 2e-6 relative of the reference. Each
// step stores p in fp32 (a rounding of up to 2^-24 relative) and the rule's own arithmetic adds
// a little, so 20 steps bound the drift at about 20 x 6e-8 = 1.2e-6 in the worst case; 2e-6 is that
// bound with margin (build with -DAMSP_TEST_PRINT_ERRORS to print the observed worst case).
// Parameters start in +-[0.5, 1.5] and the learning rates keep them away from zero, so relative
// means absolute too. States: within 1e-6 of the largest state magnitude. bf16 parameters: within
// one bf16 ulp of the reference rounded to bf16.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include "amsp/optim.hpp"
#include "reference.hpp"

namespace amsp_test {

using amsp::bf16;
namespace optim = amsp::optim;

inline constexpr int steps = 20;
inline constexpr float grad_scale = 0.3f;  // not a power of two: applying it twice or never shows

/// Storage for one shard, with every span starting one element past an allocation, so that no
/// view is aligned to a SIMD register.
template <class R, class G, class P>
struct Buffers {
  std::size_t n;
  std::vector<float> master, states[R::state_count];
  std::vector<G> grads;
  std::vector<P> params;
  explicit Buffers(std::size_t count) : n(count), master(count + 1), grads(count + 1), params(count + 1) {
    for (auto& s : states) s.assign(count + 1, 0.0f);
  }
  std::span<float> master_view() { return {master.data() + 1, n}; }
  std::span<float> state_view(int k) { return {states[k].data() + 1, n}; }
  std::span<const G> grad_view() const { return {grads.data() + 1, n}; }
  std::span<P> param_view() { return {params.data() + 1, n}; }
  optim::ShardState<R> shard() {
    optim::ShardState<R> s{master_view(), {}};
    for (int k = 0; k < R::state_count; ++k) s.states[static_cast<std::size_t>(k)] = state_view(k);
    return s;
  }
};

inline double uniform_magnitude(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> mag(lo, hi);
  return (rng() & 1u) ? mag(rng) : -mag(rng);
}

inline constexpr double relative_tolerance = 2e-6;

/// update_host with a typed rule.
struct HostUpdate {
  template <class R, class G, class P>
  optim::StepResult operator()(const R& rule, Buffers<R, G, P>& buf, const optim::StepOptions& opt) const {
    return optim::update_host(rule, buf.shard(), buf.grad_view(), buf.param_view(), opt);
  }
};

/// update_host through the run-time rule variant.
struct HostAnyUpdate {
  template <class R, class G, class P>
  optim::StepResult operator()(const R& rule, Buffers<R, G, P>& buf, const optim::StepOptions& opt) const {
    std::vector<std::span<float>> states;
    for (int k = 0; k < R::state_count; ++k) states.push_back(buf.state_view(k));
    return optim::update_host(optim::AnyRule{rule}, buf.master_view(), std::span<const std::span<float>>(states),
                              buf.grad_view(), buf.param_view(), opt);
  }
};

/// Runs 20 steps of `update` from fresh random data and compares with the float64 reference.
template <class G, class P, class R, class Ref, class Update>
void check_against_reference(const Update& update, const R& rule, const Ref& ref, std::size_t n, int threads,
                             bool check_states = true) {
  CAPTURE(R::name);
  CAPTURE(n);
  CAPTURE(threads);
  CAPTURE(amsp::name_of(amsp::dtype_of_v<G>));
  CAPTURE(amsp::name_of(amsp::dtype_of_v<P>));
  std::mt19937_64 rng(n * 7919 + static_cast<std::size_t>(threads));
  Buffers<R, G, P> buf(n);
  amsp_test::RefShard x{std::vector<double>(n), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0),
                        std::vector<double>(n, 0.0)};
  for (std::size_t i = 0; i < n; ++i) {
    buf.master_view()[i] = static_cast<float>(uniform_magnitude(rng, 0.5, 1.5));
    x.p[i] = buf.master_view()[i];
  }
  std::vector<double> g(n);
  for (std::int64_t t = 1; t <= steps; ++t) {
    for (std::size_t i = 0; i < n; ++i) {
      buf.grads[i + 1] = amsp::from_float<G>(static_cast<float>(uniform_magnitude(rng, 0.05, 2.0)));
      g[i] = static_cast<double>(amsp::to_float(buf.grads[i + 1])) * static_cast<double>(grad_scale);
    }
    const optim::StepOptions opt{t, grad_scale, true, threads};
    REQUIRE_FALSE(update(rule, buf, opt).skipped);
    ref.step(x, g, t);
  }

  double worst_master = 0, worst_param = 0;
  int worst_bf16_ulps = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double tol = relative_tolerance * std::abs(x.p[i]) + x.slack[i];
    worst_master = std::max(worst_master, std::abs(buf.master_view()[i] - x.p[i]) / tol);
    if constexpr (std::is_same_v<P, float>) {
      worst_param = std::max(worst_param, std::abs(buf.param_view()[i] - x.p[i]) / tol);
    } else if (x.slack[i] == 0) {
      const int expected = bf16::from_float(static_cast<float>(x.p[i])).bits;
      worst_bf16_ulps = std::max(worst_bf16_ulps, std::abs(static_cast<int>(buf.param_view()[i].bits) - expected));
    }
  }
#ifdef AMSP_TEST_PRINT_ERRORS
  std::printf("%s n=%zu: worst error / tolerance: master %.3f, fp32 params %.3f, bf16 ulps %d\n", R::name.data(), n,
              worst_master, worst_param, worst_bf16_ulps);
#endif
  CHECK(worst_master <= 1.0);
  CHECK(worst_param <= 1.0);
  CHECK(worst_bf16_ulps <= 1);

  const std::vector<double>* ref_states[2] = {&x.s0, &x.s1};
  for (int k = 0; check_states && k < R::state_count; ++k) {
    CAPTURE(k);
    double scale = 0, worst = 0;
    for (double v : *ref_states[k]) scale = std::max(scale, std::abs(v));
    // An element granted slack has a legitimately different p, and Adam's L2 term carries that
    // difference into its moments: its states are not comparable to the reference's.
    for (std::size_t i = 0; i < n; ++i) {
      if (x.slack[i] == 0) worst = std::max(worst, std::abs(buf.state_view(k)[i] - (*ref_states[k])[i]));
    }
    CHECK(worst <= 1e-6 * scale);
  }
}

/// Every length (0, 1, 15, 4099, unaligned) and gradient/parameter type combination.
template <class R, class Ref, class Update>
void check_all_layouts(const Update& update, const R& rule, const Ref& ref) {
  for (std::size_t n : {0u, 1u, 15u, 4099u}) {
    check_against_reference<float, float>(update, rule, ref, n, 1);
    check_against_reference<float, bf16>(update, rule, ref, n, 1);
    check_against_reference<bf16, float>(update, rule, ref, n, 1);
    check_against_reference<bf16, bf16>(update, rule, ref, n, 1);
  }
}

/// The hyperparameters every backend is tested with (deliberately not the defaults), each with
/// its reference; f(rule, reference) is called once per case.
template <class F>
void for_each_rule_case(F&& f) {
  f(optim::AdamW{1e-2f, 0.8f, 0.95f, 1e-6f, 0.1f}, RefAdam{1e-2f, 0.8f, 0.95f, 1e-6f, 0.1f, true});
  f(optim::Adam{1e-2f, 0.85f, 0.99f, 1e-7f, 0.05f}, RefAdam{1e-2f, 0.85f, 0.99f, 1e-7f, 0.05f, false});
  f(optim::SgdMomentum{2e-3f, 0.9f, 0.1f, 0.01f, false}, RefSgd{2e-3f, 0.9f, 0.1f, 0.01f, false});
  f(optim::SgdMomentum{2e-3f, 0.8f, 0.0f, 0.02f, true}, RefSgd{2e-3f, 0.8f, 0.0f, 0.02f, true});
  f(optim::Lion{1e-3f, 0.9f, 0.99f, 0.1f}, RefLion{1e-3f, 0.9f, 0.99f, 0.1f});
}

}  // namespace amsp_test
