#pragma once
// The training recipe's hyperparameters on the engine as it is today: a learning-rate schedule
// and a weight-decay mask.
//
// The engine fixes its update rule's hyperparameters at construction (per-step hyperparameters
// and parameter groups are the engine issue's work). Until then:
// - the schedule lives in the rule: ScheduledAdamW is AdamW whose coefficients(step) take the
//   learning rate of that step from the schedule. The engine calls coefficients(step) with the
//   1-based count of applied steps, so the rate is exact and identical on every rank and plan;
// - the decay mask lives in the gradients: add_l2_on_matrices adds weight_decay·p to the
//   gradient of every matrix (not biases, not LayerNorm) before it is handed to the engine, so
//   decay reaches matrices only. That is L2 regularisation (it passes through Adam's
//   normalisation) rather than AdamW's decoupled decay, and it counts in the clipped norm.
// When the engine takes a learning rate per step and per-tensor decay, these two are the only
// code to change: plain AdamW with a decay group of the matrices, set_lr(schedule.at(step)).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "amsp/optim/adam.hpp"
#include "amsp_train/gpt_config.hpp"

namespace amsp_train {

/// Linear warm-up to `peak` over `warmup` steps, then cosine decay to `peak · min_ratio` at step
/// `total` (and flat after it). Steps are 1-based, as the engine counts them.
struct LrSchedule {
  float peak = 1e-2f;
  float min_ratio = 0.1f;
  std::int64_t warmup = 20;
  std::int64_t total = 300;

  [[nodiscard]] float at(std::int64_t step) const {
    if (step <= warmup) return peak * static_cast<float>(step) / static_cast<float>(std::max<std::int64_t>(warmup, 1));
    const double progress = std::min(1.0, double(step - warmup) / double(std::max<std::int64_t>(total - warmup, 1)));
    const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
    return static_cast<float>(peak * (min_ratio + (1.0 - min_ratio) * cosine));
  }
};

/// AdamW with the learning rate of each step taken from a schedule (an amsp::optim update rule).
struct ScheduledAdamW {
  amsp::optim::AdamW base{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
  LrSchedule schedule;

  static constexpr int state_count = amsp::optim::AdamW::state_count;
  static constexpr std::string_view name = "adamw";
  using Coefficients = amsp::optim::AdamW::Coefficients;

  void validate() const {
    amsp::optim::AdamW rule = base;
    rule.lr = schedule.peak;
    rule.validate();
  }
  [[nodiscard]] Coefficients coefficients(std::int64_t step) const {
    amsp::optim::AdamW rule = base;
    rule.lr = schedule.at(step);
    return rule.coefficients(step);
  }
  template <class V>
  AMSP_FORCE_INLINE static void apply(const Coefficients& c, V& p, V g, V (&s)[2]) {
    amsp::optim::AdamW::apply(c, p, g, s);
  }
};

/// grad += weight_decay · param for every matrix of `bucket` (both in the bucket's flat layout).
template <class T>
void add_l2_on_matrices(const ParamBucket& bucket, float weight_decay, const T* param, T* grad) {
  if (weight_decay == 0.0f) return;
  for (const ParamTensor& t : bucket.tensors)
    if (t.decays())
      for (std::size_t e = t.offset; e < t.offset + t.numel(); ++e) grad[e] += T(weight_decay) * param[e];
}

}  // namespace amsp_train
