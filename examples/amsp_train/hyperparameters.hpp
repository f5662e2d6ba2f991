#pragma once
// The training recipe's hyperparameters as the engine takes them: a learning rate set before each
// step (ShardedOptimizer::set_lr) from a warm-up + cosine schedule, and AdamW's decoupled weight
// decay for the matrices only, through parameter groups (EngineOptions::param_groups: biases and
// LayerNorm parameters get weight_decay = false, as GPT-2 / nanoGPT / llm.c train).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "amsp/engine/options.hpp"
#include "amsp_train/gpt_config.hpp"

namespace amsp_train {

/// Linear warm-up to `peak` over `warmup` steps, then cosine decay to `peak · min_ratio` at step
/// `total` (and flat after it). Steps are 1-based, as the engine counts them.
struct LrSchedule {
  float peak = 6e-3f;
  float min_ratio = 0.1f;
  std::int64_t warmup = 30;
  std::int64_t total = 300;

  [[nodiscard]] float at(std::int64_t step) const {
    if (step <= warmup) return peak * static_cast<float>(step) / static_cast<float>(std::max<std::int64_t>(warmup, 1));
    const double progress = std::min(1.0, double(step - warmup) / double(std::max<std::int64_t>(total - warmup, 1)));
    const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
    return static_cast<float>(peak * (min_ratio + (1.0 - min_ratio) * cosine));
  }
};

/// The parameter groups of the model: every tensor that is not a matrix (biases, LayerNorm gains
/// and shifts) without weight decay; matrices (embeddings and projections) keep the default group.
[[nodiscard]] inline std::map<std::string, amsp::ParamGroup, std::less<>> decay_groups(
    const std::vector<ParamBucket>& buckets) {
  std::map<std::string, amsp::ParamGroup, std::less<>> groups;
  for (const ParamBucket& b : buckets)
    for (const ParamTensor& t : b.tensors)
      if (!t.decays()) groups[t.name] = amsp::ParamGroup{.lr_scale = 1.0f, .weight_decay = false};
  return groups;
}

}  // namespace amsp_train
