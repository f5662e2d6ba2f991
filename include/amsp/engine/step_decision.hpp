#pragma once
// The per-step decision of the engine, one definition for every space: from the global sum of
// squares of the OS-shard gradients to the gradient norm, the clipping coefficient, the gradient
// scale the fused update multiplies by, the overflow skip and the step counter. The host engine
// calls it on the host; the CUDA space calls it from a one-thread kernel on the sum left in device
// memory (amsp/engine/device_ops.cuh), so both decide with the same arithmetic and no host
// synchronisation is needed on the device. Plain C++: the host/device marking is empty for g++.
//
//   grad_norm        = sqrt(sum_sq) * average / loss_scale         (0 when no norm is needed)
//   skipped          = skip_nonfinite and grad_norm is not finite
//   clip_coefficient = max_grad_norm / (grad_norm + 1e-6) when 0 < max_grad_norm < grad_norm, else 1
//   grad_scale       = float(average / loss_scale) * clip_coefficient
//   step             = steps so far + (skipped ? 0 : 1)
//
// `average` is 1 / (world size x micro-batches) when the engine averages gradients, else 1; the
// loss scale's inverse and the clipping are folded into grad_scale so the update applies them in
// its one pass. Without clipping, a non-finite norm with skip_nonfinite off is not acted on (the
// update propagates it, as the caller asked), and grad_norm reports it.

#include <cmath>
#include <cstdint>

#include "amsp/core/config.hpp"
#include "amsp/core/error.hpp"

namespace amsp {

/// What a step does, decided from the global sum of squares (see the header comment).
struct StepDecision {
  double grad_norm = 0.0;         ///< global L2 norm of the averaged, unscaled gradient (0 if not needed)
  float clip_coefficient = 1.0f;  ///< 1 when not clipped
  float grad_scale = 1.0f;        ///< what the fused update multiplies every gradient by
  bool skipped = false;           ///< nothing is updated on any rank
  std::int64_t step = 0;          ///< applied steps after this one (skipped steps do not count)
};

/// True when the step needs the global sum of squares: for clipping, or to detect Inf/NaN.
[[nodiscard]] AMSP_HOST_DEVICE inline bool needs_grad_norm(float max_grad_norm, bool skip_nonfinite) {
  return max_grad_norm > 0.0f || skip_nonfinite;
}

/// The loss scale a step accepts: positive and finite (rule engine.loss_scale). Host only: the
/// CUDA space checks it before enqueuing the decision.
inline void check_loss_scale(float loss_scale) {
  check(loss_scale > 0.0f && loss_scale - loss_scale == 0.0f, "engine.loss_scale", "loss scale ", loss_scale,
        " must be positive and finite");
}

/// The decision of one step. `sum_sq` is ignored unless needs_grad_norm(max_grad_norm,
/// skip_nonfinite); `steps_so_far` is the count of applied steps before this one.
[[nodiscard]] AMSP_HOST_DEVICE inline StepDecision decide_step(double sum_sq, double average, float loss_scale,
                                                               float max_grad_norm, bool skip_nonfinite,
                                                               std::int64_t steps_so_far) {
  StepDecision d;
  const bool need_norm = needs_grad_norm(max_grad_norm, skip_nonfinite);
  if (need_norm) d.grad_norm = std::sqrt(sum_sq) * average / loss_scale;
  const bool nonfinite = need_norm && !(d.grad_norm - d.grad_norm == 0.0);  // Inf or NaN
  if (skip_nonfinite && nonfinite) {
    d.skipped = true;
    d.step = steps_so_far;
    return d;
  }
  if (max_grad_norm > 0.0f && d.grad_norm > max_grad_norm)
    d.clip_coefficient = static_cast<float>(max_grad_norm / (d.grad_norm + 1e-6));
  d.grad_scale = static_cast<float>(average / loss_scale) * d.clip_coefficient;
  d.step = steps_so_far + 1;
  return d;
}

}  // namespace amsp
