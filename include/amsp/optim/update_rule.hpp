#pragma once
// What an optimizer is to amsp: an element-wise update rule plus the per-step constants it needs,
// and the views of one rank's optimizer-state shard that a fused pass walks.
//
// Conventions shared by every rule (docs/optimizers.md has the derivations):
// - Step counting: `step` is 1-based. The caller (the engine) increments it once per *applied*
//   step; a step skipped for non-finite gradients does not advance it.
// - Gradient scale: the gradient each rule sees is g = grad * grad_scale, where grad_scale folds
//   the loss-scale unscaling (1/S) and the clipping coefficient. It is applied exactly once, before
//   any weight decay.
// - States start at zero (fresh m, v, momentum buffers), as in PyTorch.
// - Non-finite gradients: the finite test looks at the stored gradients (before scaling).

#include <array>
#include <cstddef>
#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "amsp/core/config.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp::optim {

/// An update rule R: hyperparameters as public fields, plus
/// - `static constexpr int state_count`: fp32 states per parameter (m, v, momentum, ...);
/// - `static constexpr std::string_view name`;
/// - `validate()`: throws amsp::error ("optim.hyperparameter") for out-of-range fields;
/// - `coefficients(step)`: the per-step constants (bias corrections, ...) computed once per step
///   in double and rounded to float, a trivially copyable struct a CUDA kernel takes by value;
///   AMSP_HOST_DEVICE, so that a kernel can compute them from a step counter in device memory
///   with the same code as the host (amsp/engine/device_ops.cuh);
/// - `apply<V>(coefficients, p, g, s)`: the element-wise rule on the master weight p, the scaled
///   gradient g and the states s[state_count], all of arithmetic type V (float, or a host SIMD
///   register). This is the single definition of the rule's arithmetic.
template <class R>
concept update_rule =
    requires(const R& rule, std::int64_t step, const typename R::Coefficients& c, float& p, float g,
             float (&s)[R::state_count]) {
      { R::state_count } -> std::convertible_to<int>;
      { R::name } -> std::convertible_to<std::string_view>;
      rule.validate();
      { rule.coefficients(step) } -> std::same_as<typename R::Coefficients>;
      R::apply(c, p, g, s);
    } && (R::state_count >= 1) && std::is_trivially_copyable_v<typename R::Coefficients>;

/// Views of one rank's shard: fp32 master weights and the rule's fp32 states, all the same length.
/// The views do not own memory; host or device memory depending on the update function used.
template <update_rule R>
struct ShardState {
  std::span<float> master;
  std::array<std::span<float>, R::state_count> states;
};

/// Per-call options of a fused update.
struct StepOptions {
  /// 1-based step count t used by bias correction (see the conventions above).
  std::int64_t step = 1;
  /// Multiplied into every gradient element exactly once (1/loss_scale x clip coefficient).
  float grad_scale = 1.0f;
  /// Check all gradients for Inf/NaN before writing anything; if any is found, nothing is
  /// written and the result says `skipped`. Costs one extra read of the gradients; an engine
  /// that already knows the gradients are finite (its global sum of squares is finite) passes
  /// false. With false, non-finite gradients propagate into master and states.
  bool skip_nonfinite = true;
  /// Host only: threads that split the shard (the caller's thread is one of them). 1 = run on
  /// the calling thread only (the default, since several rank threads may call at once);
  /// 0 = std::thread::hardware_concurrency(). Results do not depend on it.
  int threads = 1;
};

/// Outcome of a fused update. `skipped` is true when non-finite gradients were found and
/// skip_nonfinite was set: master, states and parameters were left untouched.
struct StepResult {
  bool skipped = false;
};

/// Gradient element types a fused pass reads and parameter types it writes.
template <class T>
concept grad_element = std::is_same_v<T, float> || std::is_same_v<T, bf16>;
template <class T>
concept param_element = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

namespace detail {
/// Checks one hyperparameter against its range, naming the rule and the field on failure.
inline void check_range(bool ok, std::string_view rule, std::string_view field, float value,
                        std::string_view range) {
  check(ok, "optim.hyperparameter", rule, ".", field, " = ", value, " is outside ", range);
}
inline bool finite(float x) { return x - x == 0.0f; }
/// Throws for a step < 1 on the host. In device code (a rule's coefficients computed from a device
/// step counter) nothing can be thrown: the counter is the engine's, which starts the first applied
/// step at 1, and the device update never computes coefficients for a skipped step.
AMSP_HOST_DEVICE inline void check_step([[maybe_unused]] std::int64_t step) {
#if !defined(__CUDA_ARCH__)
  check(step >= 1, "optim.step", "step is ", step, " but steps are counted from 1");
#endif
}

/// Checks the sizes and options shared by the host and CUDA entry points.
template <update_rule R>
void check_step_inputs(const R& rule, const ShardState<R>& shard, std::size_t grads, std::size_t params,
                       const StepOptions& opt) {
  rule.validate();
  const std::size_t n = shard.master.size();
  for (std::size_t k = 0; k < shard.states.size(); ++k)
    check(shard.states[k].size() == n, "optim.size_mismatch", R::name, " state ", k, " holds ",
          shard.states[k].size(), " elements but the master shard holds ", n);
  check(grads == n, "optim.size_mismatch", "gradient shard holds ", grads, " elements but the master shard holds ",
        n);
  check(params == 0 || params == n, "optim.size_mismatch", "parameter output holds ", params,
        " elements but must be empty or hold ", n);
  check(finite(opt.grad_scale), "optim.grad_scale", "grad_scale is ", opt.grad_scale, " but must be finite");
}

}  // namespace detail

}  // namespace amsp::optim
