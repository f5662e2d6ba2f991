#pragma once
// The sharded training loop of amsp-train, one function per rank, usable with any communicator:
// the CLI (main.cpp) runs it on threads or MPI ranks, and tests/examples checks that every plan
// follows DDP's loss curve with it.
//
// Integration form shown here: the model reads its parameters straight from amsp's gather
// buffers and writes its gradients into the buffers amsp hands out (a C codebase with flat
// per-layer arrays). EngineOptions::alignment_bytes = 4 keeps the tensors of a layer back to back,
// exactly the model's own flat layout.

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amsp/comm/traffic_counter.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp_train/batch_sampler.hpp"
#include "amsp_train/char_data.hpp"
#include "amsp_train/char_mlp.hpp"
#include "amsp_train/evaluate.hpp"

namespace amsp_train {

struct ShardedTrainConfig {
  int steps = 200;
  int micro_batches = 1;
  std::size_t global_batch = 256;
  float max_grad_norm = 1.0f;
  amsp::OsLayout os_layout = amsp::OsLayout::even_split;
  int hidden = 256;
  int layers = 2;
  std::uint64_t seed = 1;
  int eval_every = 50;  ///< validation loss every N steps and after the last (0: only the last)
  bool print = true;    ///< rank 0 prints a progress line per step
};

struct TrainOutcome {
  float initial_validation_loss = 0.0f;
  float final_loss = 0.0f;             ///< mean training loss of the last step's global batch
  float final_validation_loss = 0.0f;
  std::vector<float> losses;           ///< the training loss of every step
  double seconds = 0.0;
  double bytes_intra = 0.0, bytes_inter = 0.0;        ///< per step, counted on this rank
  double expected_intra = 0.0, expected_inter = 0.0;  ///< per step, the engine's traffic model
  std::size_t model_state_bytes = 0;                  ///< this rank's P + G + OS stores
};

/// The model's layers as engine buckets (one bucket per layer, fp32 tensors).
inline std::vector<amsp::BucketSpec> buckets_of(const CharMlp& model) {
  std::vector<amsp::BucketSpec> buckets;
  for (const LayerSpec& layer : model.layers()) {
    amsp::BucketSpec bucket{layer.name, {}};
    for (const TensorSpec& t : layer.tensors) {
      std::vector<std::int64_t> shape(t.shape.begin(), t.shape.end());
      bucket.tensors.push_back({t.name, shape, amsp::dtype::fp32});
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

/// One rank's training run. `comm` counts traffic; `world` is the same world, uncounted, for the
/// loss reduction that is not the engine's traffic.
template <class Comm, class Raw, class Rule>
TrainOutcome train_rank(Comm& comm, Raw& world, const amsp::Mesh& mesh, const amsp::Plan& plan, const Rule& rule,
                   const ShardedTrainConfig& cfg, const CharDataset& data,
                   const std::shared_ptr<amsp::comm::TrafficCounter>& counter) {
  CharMlp model(CharMlpConfig{.context = data.context, .hidden = cfg.hidden, .hidden_layers = cfg.layers});
  amsp::EngineOptions options;
  options.os_layout = cfg.os_layout;
  options.max_grad_norm = cfg.max_grad_norm;
  options.alignment_bytes = sizeof(float);  // the model's own layout: tensors back to back
  amsp::ShardedOptimizer<Comm, Rule> opt(comm, mesh, plan, rule, buckets_of(model), options);
  const std::size_t layers = model.layer_count();

  // Every rank computes the same initial values and keeps its shards.
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<float> init(model.layers()[l].numel());
    model.init_layer(cfg.seed, l, init);
    std::size_t offset = 0;
    for (const TensorSpec& t : model.layers()[l].tensors) {
      opt.set_tensor(t.name, std::span<const float>(init.data() + offset, t.numel()));
      offset += t.numel();
    }
  }

  const BatchSampler sampler(data.train.size(), cfg.global_batch, cfg.seed);
  const BatchSplit split{mesh.world_size(), cfg.micro_batches};
  (void)sampler.micro_batch_size(split);  // fails before training when W x M does not divide the batch
  const ExampleSet validation = spread_subset(data.validation.view(), 4096);
  std::vector<const float*> params(layers, nullptr);
  std::vector<float*> grads(layers, nullptr);

  const auto validation_loss = [&] {  // collective: every rank gathers every layer
    for (std::size_t l = 0; l < layers; ++l) params[l] = opt.gather(static_cast<int>(l)).data();
    const float loss = comm.rank() == 0 ? mean_loss(model, params, validation.view()) : 0.0f;
    for (std::size_t l = 0; l < layers; ++l) opt.release(static_cast<int>(l));
    return loss;
  };

  // Bytes this rank has sent so far (training steps only: validation gathers are left out).
  const auto sent = [&](amsp::comm::Locality where) {
    return counter ? counter->sent({.world_rank = comm.rank(), .locality = where}).to_double() : 0.0;
  };
  TrainOutcome out;
  out.initial_validation_loss = validation_loss();
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < cfg.steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    const double intra_before = sent(amsp::comm::Locality::intra_node);
    const double inter_before = sent(amsp::comm::Locality::inter_node);
    double loss_sum = 0.0;
    for (int m = 0; m < cfg.micro_batches; ++m) {
      opt.start_micro_batch(m == cfg.micro_batches - 1);
      const ExampleSet batch =
          sampler.micro_batch(data.train.view(), static_cast<std::uint64_t>(step), split, comm.rank(), m);
      // Forward: gather layer l just before it runs and prefetch layer l + 1 behind it.
      loss_sum += model.forward(params, batch.view(), [&](std::size_t l) {
        params[l] = opt.gather(static_cast<int>(l)).data();
        if (l + 1 < layers) opt.prefetch(static_cast<int>(l + 1));
      });
      // Backward: hand each layer's gradient to the engine as soon as it is complete; the
      // gathered parameters were kept for the backward, so each layer is gathered once.
      for (std::size_t l = 0; l < layers; ++l) grads[l] = opt.grad_buffer(static_cast<int>(l)).data();
      model.backward(params, grads, [&](std::size_t l) {
        opt.release(static_cast<int>(l));
        opt.reduce_gradients(static_cast<int>(l));
      });
    }
    opt.step();
    opt.synchronize();  // the spread completes inside the step's accounting
    const double step_intra = sent(amsp::comm::Locality::intra_node) - intra_before;
    const double step_inter = sent(amsp::comm::Locality::inter_node) - inter_before;
    out.bytes_intra += step_intra;  // summed here, divided by the step count at the end
    out.bytes_inter += step_inter;
    world.all_reduce(&loss_sum, &loss_sum, 1, amsp::comm::reduce_op::sum);
    const float loss = static_cast<float>(loss_sum / (mesh.world_size() * cfg.micro_batches));
    out.final_loss = loss;
    out.losses.push_back(loss);
    const bool evaluate = step + 1 == cfg.steps || (cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0);
    const std::optional<float> val = evaluate ? std::optional<float>(validation_loss()) : std::nullopt;
    if (val) out.final_validation_loss = *val;
    if (comm.rank() == 0 && cfg.print) {
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      char val_text[32] = "";
      if (val) std::snprintf(val_text, sizeof val_text, "  val %.4f", *val);
      std::printf("step %4d/%d  loss %.4f%s  tokens/s %8.0f  sent intra %9.0f B  inter %9.0f B\n", step + 1,
                  cfg.steps, loss, val_text, double(cfg.global_batch) / dt, step_intra, step_inter);
      std::fflush(stdout);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.bytes_intra /= cfg.steps;
  out.bytes_inter /= cfg.steps;
  const amsp::TrafficExpectation expected = opt.expected_traffic(cfg.micro_batches, 1);
  out.expected_intra = expected.intra_total().to_double();
  out.expected_inter = expected.inter_total().to_double();
  out.model_state_bytes = opt.memory().model_states();
  return out;
}

}  // namespace amsp_train
