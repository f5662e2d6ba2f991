#pragma once
// The fused host update: one pass over a shard that reads the master weights, the states and the
// gradients, applies the rule, and writes master, states and (optionally) the compute-dtype
// parameters, SIMD-wide and split over `StepOptions::threads` threads.
//
// Non-finite gradients (skip_nonfinite): an in-place update cannot be undone, and checking a block
// just before updating it would leave earlier blocks updated when a later block holds a NaN. So
// the threads first check the whole shard (a parallel pass that writes nothing), join, and only
// then does any thread write. The price is one extra read of the gradients (4 bytes per parameter for fp32
// gradients, 2 for bf16, against 28 bytes moved by AdamW); bench/README.md measures it. An engine
// that has already computed a finite global sum of squares passes skip_nonfinite = false.

#include <array>
#include <atomic>
#include <cstddef>
#include <span>
#include <string>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/optim/grad_norm.hpp"
#include "amsp/optim/parallel.hpp"
#include "amsp/optim/simd.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

namespace detail {
inline namespace AMSP_OPTIM_ISA {

/// The per-element body over [begin, end): SIMD registers first, then single lanes. The written
/// parameters are not prefetched: they are only written, and a read prefetch of them did not help.
template <update_rule R, bool WriteParams, class G, class P>
void update_range(const typename R::Coefficients& coefficients, float* master,
                  const std::array<float*, R::state_count>& state_pointers, const G* grads, P* params, float grad_scale,
                  std::size_t begin, std::size_t end) {
  constexpr int count = R::state_count;
  // Local copies: the stores through float* could otherwise alias the coefficients and the
  // pointer array, and the compiler would reload them on every trip.
  const typename R::Coefficients c = coefficients;
  float* states[count];
  for (int k = 0; k < count; ++k) states[k] = state_pointers[static_cast<std::size_t>(k)];
  std::array<PrefetchStream, count + 2> streams;
  streams[0] = {master, sizeof(float)};
  for (int k = 0; k < count; ++k) streams[static_cast<std::size_t>(k) + 1] = {states[k], sizeof(float)};
  streams[count + 1] = {grads, sizeof(G)};
  walk_lanes(
      begin, end, streams,
      [&](std::size_t i) {
        simd_float p = load_lanes(master + i);
        simd_float s[count];
        for (int k = 0; k < count; ++k) s[k] = load_lanes(states[k] + i);
        R::apply(c, p, load_lanes(grads + i) * grad_scale, s);
        store_lanes(master + i, p);
        for (int k = 0; k < count; ++k) store_lanes(states[k] + i, s[k]);
        if constexpr (WriteParams) store_lanes(params + i, p);
      },
      [&](std::size_t i) {
        float p = master[i];
        float s[count];
        for (int k = 0; k < count; ++k) s[k] = states[k][i];
        R::apply(c, p, to_float(grads[i]) * grad_scale, s);
        master[i] = p;
        for (int k = 0; k < count; ++k) states[k][i] = s[k];
        if constexpr (WriteParams) params[i] = from_float<P>(p);
      });
}

}  // namespace AMSP_OPTIM_ISA
}  // namespace detail

inline namespace AMSP_OPTIM_ISA {

/// One fused update of a host shard with rule R. grads: G = float or bf16; params_out: P = float
/// or bf16, written with the new master values rounded to nearest even, or empty to skip writing.
/// Throws amsp::error for mismatched sizes ("optim.size_mismatch"), a step < 1 ("optim.step"), a
/// non-finite grad_scale ("optim.grad_scale") or out-of-range hyperparameters
/// ("optim.hyperparameter"), before touching any buffer.
template <update_rule R, element_type G, element_type P>
  requires grad_element<G> && param_element<P>
StepResult update_host(const R& rule, const ShardState<R>& shard, std::span<const G> grads, std::span<P> params_out,
                       const StepOptions& opt) {
  detail::check_step_inputs(rule, shard, grads.size(), params_out.size(), opt);
  const typename R::Coefficients c = rule.coefficients(opt.step);
  const std::size_t n = shard.master.size();
  std::array<float*, R::state_count> states{};
  for (std::size_t k = 0; k < states.size(); ++k) states[k] = shard.states[k].data();

  const int workers = detail::worker_count(n, opt.threads);
  if (opt.skip_nonfinite) {
    std::atomic<bool> nonfinite{false};
    detail::for_each_block(n, workers, [&](std::size_t begin, std::size_t end) {
      // Once one block has failed the rest need not be read.
      if (!nonfinite.load(std::memory_order_relaxed) && !detail::all_finite_range(grads.data() + begin, end - begin))
        nonfinite.store(true, std::memory_order_relaxed);
    });
    if (nonfinite.load(std::memory_order_relaxed)) return StepResult{true};
  }
  detail::for_each_block(n, workers, [&](std::size_t begin, std::size_t end) {
    if (params_out.empty())
      detail::update_range<R, false>(c, shard.master.data(), states, grads.data(), static_cast<P*>(nullptr),
                                     opt.grad_scale, begin, end);
    else
      detail::update_range<R, true>(c, shard.master.data(), states, grads.data(), params_out.data(), opt.grad_scale,
                                    begin, end);
  });
  return StepResult{false};
}

}  // namespace AMSP_OPTIM_ISA

}  // namespace amsp::optim
