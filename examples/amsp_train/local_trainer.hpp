#pragma once
// Single-process training of the example's model: one rank, M micro-batches per step, amsp's own
// fused Adam update applied to whole layers (no sharding, no communicator). It follows the same
// data and loss contract as the sharded trainer (BatchSampler's global batches, gradients summed
// over micro-batches and scaled by 1/M), so its loss curve is the reference the sharded runs
// should reproduce.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "batch_sampler.hpp"
#include "char_data.hpp"
#include "char_mlp.hpp"
#include "evaluate.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/update_host.hpp"
#include "layer_spec.hpp"

namespace amsp_train {

struct LocalTrainOptions {
  std::uint64_t steps = 500;
  std::size_t global_batch = 256;
  int micro_batches = 1;
  std::uint64_t seed = 1;              ///< initial weights and batches
  amsp::optim::Adam adam{.lr = 3e-3f};  ///< plain Adam (weight_decay 0)
  std::uint64_t eval_every = 100;      ///< validation loss every this many steps (and after the last)
  std::size_t eval_examples = 4096;    ///< validation examples evaluated (spread over the split)
};

struct StepReport {
  std::uint64_t step = 0;               ///< 1-based
  float train_loss = 0.0f;              ///< mean over this step's global batch, before the update
  std::optional<float> validation_loss;  ///< after the update, when evaluated at this step
};

struct LocalTrainResult {
  float initial_validation_loss = 0.0f;  ///< before the first step
  std::vector<StepReport> steps;
  [[nodiscard]] float final_validation_loss() const { return steps.empty() ? initial_validation_loss : *steps.back().validation_loss; }
};

[[nodiscard]] inline LocalTrainResult train_local(const CharDataset& data, const CharMlpConfig& config,
                                                  const LocalTrainOptions& options,
                                                  const std::function<void(const StepReport&)>& on_step = {}) {
  amsp::check_equal(data.context, config.context, "model.context", "context length of the data set");
  amsp::check(options.eval_every > 0, "train.eval_every", "eval_every must be positive");
  CharMlp model(config);
  LayerBuffers params(model.layers());
  LayerBuffers grads(model.layers());
  LayerBuffers accumulated(model.layers());
  LayerBuffers first_moment(model.layers());
  LayerBuffers second_moment(model.layers());
  model.init(options.seed, params.pointers());
  const BatchSampler sampler(data.train.size(), options.global_batch, options.seed);
  const BatchSplit split{1, options.micro_batches};
  (void)sampler.micro_batch_size(split);  // fail before training when M does not divide the batch
  const ExampleSet validation = spread_subset(data.validation.view(), options.eval_examples);

  LocalTrainResult result;
  result.initial_validation_loss = mean_loss(model, params.const_pointers(), validation.view());
  for (std::uint64_t step = 0; step < options.steps; ++step) {
    for (std::size_t l = 0; l < model.layer_count(); ++l) std::ranges::fill(accumulated.layer(l), 0.0f);
    double loss = 0.0;
    for (int micro = 0; micro < options.micro_batches; ++micro) {
      const ExampleSet batch = sampler.micro_batch(data.train.view(), step, split, 0, micro);
      loss += model.forward(params.const_pointers(), batch.view());
      model.backward(params.const_pointers(), grads.pointers());
      for (std::size_t l = 0; l < model.layer_count(); ++l) {
        std::span<float> sum = accumulated.layer(l);
        std::span<const float> g = std::as_const(grads).layer(l);
        for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += g[e];
      }
    }
    // The fp32 parameters are the master weights themselves; grad_scale turns the sum over
    // micro-batches into their mean.
    const amsp::optim::StepOptions step_options{.step = static_cast<std::int64_t>(step + 1),
                                                .grad_scale = 1.0f / static_cast<float>(options.micro_batches)};
    for (std::size_t l = 0; l < model.layer_count(); ++l) {
      const amsp::optim::ShardState<amsp::optim::Adam> state{params.layer(l),
                                                             {first_moment.layer(l), second_moment.layer(l)}};
      const auto outcome = amsp::optim::update_host(options.adam, state, std::as_const(accumulated).layer(l),
                                                    std::span<float>{}, step_options);
      amsp::check(!outcome.skipped, "train.nonfinite", "non-finite gradient in layer ", model.layers()[l].name,
                  " at step ", step + 1);
    }

    StepReport report{step + 1, static_cast<float>(loss / options.micro_batches), std::nullopt};
    if ((step + 1) % options.eval_every == 0 || step + 1 == options.steps)
      report.validation_loss = mean_loss(model, params.const_pointers(), validation.view());
    result.steps.push_back(report);
    if (on_step) on_step(report);
  }
  return result;
}

}  // namespace amsp_train
