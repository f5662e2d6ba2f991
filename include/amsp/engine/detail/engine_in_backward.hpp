#pragma once
// Part of ShardedOptimizer (amsp/engine/sharded_optimizer.hpp, which includes it at its end):
// EngineOptions::update_in_backward. On the last micro-batch, bucket b's fused update and spread
// are issued right after its reduction chain, on the same stream (update_and_spread, the update
// step() issues otherwise: one definition of the update), so they overlap the rest of the
// backward instead of all waiting for the global norm. Nothing global may then be decided: no
// clipping, no overflow skip, loss scale 1; the hyperparameters are taken when the step's first
// bucket is issued, and changing them after that is an error rather than a step that mixes two
// learning rates. docs/engine.md, "Update in backward", says why.

#include "amsp/engine/sharded_optimizer.hpp"

namespace amsp {

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::check_update_in_backward() const -> void {
  if (!options_.update_in_backward) return;
  check(options_.max_grad_norm == 0.0f, "engine.update_in_backward", "update_in_backward with max_grad_norm = ",
        options_.max_grad_norm, ": clipping needs the global norm, i.e. every bucket's gradients, before any update");
  check(!options_.skip_nonfinite, "engine.update_in_backward",
        "update_in_backward with skip_nonfinite = true: skipping a non-finite step needs every bucket's gradients "
        "before any update (set skip_nonfinite = false)");
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::issue_update_in_backward(Bucket& b) -> void {
  if (!in_backward_rules_) {  // the step's first bucket: its hyperparameters, as step() would take them
    in_backward_rules_ = step_rules();
    const double average = gradient_average();
    const std::int64_t steps_so_far = step_;
    // No norm is needed (checked at construction): the decision is the scale and the count only,
    // computed by the function step() uses, so the update's arithmetic is bitwise step()'s.
    const StepDecision d = decide_step(0.0, average, 1.0f, options_.max_grad_norm, options_.skip_nonfinite,
                                       steps_so_far);
    in_backward_args_ = UpdateArgs{d.step, d.grad_scale};
    if constexpr (detail::device_space<Space>) {
      // A device space's update reads its decision from the device (UpdateArgs are not passed
      // there): the same decision is taken on the stream, ahead of this step's first update and
      // after the last step's. It reads no sum of squares (none is needed) and advances the
      // device's step count from the same count as step_ (never skipped: steps issued = applied).
      comm::Handle decided = space_.submit([this, average, steps_so_far] {
        (void)mem_.decide(average, 1.0f, options_, steps_so_far);
      });
      retire(decided);
    }
  }
  update_and_spread(b, in_backward_rules_, in_backward_args_);
}

template <comm::communicator Comm, optim::update_rule Rule, element_type ParamT, element_type GradT, class Space>
auto ShardedOptimizer<Comm, Rule, ParamT, GradT, Space>::require_no_update_issued(const char* caller) const -> void {
  check(!in_backward_rules_, "engine.update_in_backward", caller,
        "() after this step's updates began in the backward (update_in_backward): set the hyperparameters and "
        "the step count before the last micro-batch's first reduce_gradients");
}

}  // namespace amsp
