#pragma once
// Dynamic loss scaling, as PyTorch's torch.amp.GradScaler: the loss is multiplied by scale() before
// backward so that small fp16/bf16 gradients do not flush to zero; a step whose gradients overflow
// (Inf/NaN) is skipped and the scale halved; after growth_interval clean steps in a row the scale
// doubles. With the engine, whose step() already skips a non-finite step on every rank together
// (EngineOptions::skip_nonfinite) and divides the gradients by the loss scale inside the update:
//
//   amsp::optim::DynamicLossScaler scaler;               // same options on every rank
//   for (...) {
//     backward(loss * scaler.scale());                   // the user's backward, scaled
//     const amsp::StepResult r = opt.step(scaler.scale());
//     scaler.update(r.skipped);                           // r.skipped is the same on every rank
//   }
//
// Every rank feeds the same outcomes, so every rank holds the same scale. Scales are powers of two
// by default (initial 2^16, factors 2 and 1/2), so multiplying the loss and dividing the gradients
// is exact: the trained parameters do not depend on the scale unless a gradient overflows or
// underflows. state() / load() carry the scale and the clean-step count into a checkpoint.

#include <cmath>
#include <cstdint>
#include <limits>

#include "amsp/core/error.hpp"

namespace amsp::optim {

struct LossScalerOptions {
  float initial_scale = 65536.0f;  ///< 2^16, GradScaler's init_scale
  float growth_factor = 2.0f;      ///< applied after growth_interval clean steps
  float backoff_factor = 0.5f;     ///< applied on an overflow
  int growth_interval = 2000;      ///< clean steps in a row before the scale grows
  /// The scale never falls below this (GradScaler has no floor; the default, the smallest normal
  /// float, only keeps the scale a valid engine loss scale after a long run of overflows).
  float min_scale = std::numeric_limits<float>::min();
};

/// What a checkpoint keeps of a scaler (with its options, which the program supplies again).
struct LossScalerState {
  float scale = 65536.0f;
  std::int64_t clean_steps = 0;  ///< GradScaler's growth tracker: clean steps since the last change
  friend bool operator==(const LossScalerState&, const LossScalerState&) = default;
};

class DynamicLossScaler {
public:
  /// Fails with rule optim.loss_scaler on options that could not scale (non-positive or
  /// non-finite values, a growth factor not above 1, a backoff factor not inside (0, 1)).
  explicit DynamicLossScaler(LossScalerOptions options = {}) : options_(options) {
    const auto positive = [](float v) { return v > 0.0f && std::isfinite(v); };
    check(positive(options.initial_scale) && positive(options.min_scale) && options.initial_scale >= options.min_scale,
          "optim.loss_scaler", "initial scale ", options.initial_scale, " must be finite and at least min_scale ",
          options.min_scale, " > 0");
    check(positive(options.growth_factor) && options.growth_factor > 1.0f, "optim.loss_scaler", "growth factor ",
          options.growth_factor, " must be finite and above 1");
    check(options.backoff_factor > 0.0f && options.backoff_factor < 1.0f, "optim.loss_scaler", "backoff factor ",
          options.backoff_factor, " must lie strictly between 0 and 1");
    check(options.growth_interval >= 1, "optim.loss_scaler", "growth interval ", options.growth_interval,
          " must be at least 1 step");
    state_.scale = options.initial_scale;
  }

  /// The factor to multiply the loss by (and to pass to ShardedOptimizer::step).
  [[nodiscard]] float scale() const noexcept { return state_.scale; }
  [[nodiscard]] const LossScalerOptions& options() const noexcept { return options_; }

  /// Feeds the outcome of one step: `overflow` when its gradients were not finite (the step was
  /// skipped). Overflow: scale × backoff (not below min_scale), count reset. Otherwise one more
  /// clean step; at growth_interval the scale × growth (kept when that would be infinite) and the
  /// count resets.
  void update(bool overflow) {
    if (overflow) {
      state_.scale = std::fmax(state_.scale * options_.backoff_factor, options_.min_scale);
      state_.clean_steps = 0;
      return;
    }
    if (++state_.clean_steps < options_.growth_interval) return;
    const float grown = state_.scale * options_.growth_factor;
    if (std::isfinite(grown)) state_.scale = grown;
    state_.clean_steps = 0;
  }

  [[nodiscard]] LossScalerState state() const noexcept { return state_; }

  /// Restores a checkpointed state; fails with rule optim.loss_scaler on a state these options
  /// could not have produced (a scale not finite or below min_scale, a count outside
  /// [0, growth_interval)).
  void load(const LossScalerState& state) {
    check(std::isfinite(state.scale) && state.scale >= options_.min_scale, "optim.loss_scaler",
          "checkpointed loss scale ", state.scale, " must be finite and at least min_scale ", options_.min_scale);
    check(state.clean_steps >= 0 && state.clean_steps < options_.growth_interval, "optim.loss_scaler",
          "checkpointed clean-step count ", state.clean_steps, " must lie in [0, ", options_.growth_interval, ")");
    state_ = state;
  }

private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace amsp::optim
