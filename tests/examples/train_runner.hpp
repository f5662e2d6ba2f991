#pragma once
// Runs amsp-train's training loop for the example's tests: a small GPT on the real corpus, on a
// mesh of threads with a traffic counter, returning rank 0's outcome.

#include <memory>
#include <string>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/sharding.hpp"
#include "amsp_train/sharded_trainer.hpp"

namespace amsp_train::test {

/// `steps` steps (30: about a second on 8 threads) of a 2-block GPT of width 32 on 16-byte
/// windows, the learning-rate schedule ending with them.
inline TrainConfig small_run(int steps = 30) {
  TrainConfig cfg;
  cfg.model = GptConfig{.context = 16, .width = 32, .heads = 2, .layers = 2};
  cfg.steps = steps;
  cfg.global_batch = 16;
  cfg.schedule = LrSchedule{.peak = 1e-2f, .min_ratio = 0.1f, .warmup = 5, .total = steps};
  cfg.weight_decay = 0.1f;
  cfg.eval_every = 0;
  cfg.eval_windows = 16;
  cfg.print = false;
  return cfg;
}

template <class ParamT = float>
TrainOutcome train_on_threads(const TextCorpus& data, const amsp::Mesh& mesh, const std::string& plan_name,
                              const TrainConfig& cfg) {
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
  TrainOutcome outcome;
  amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& threads) {
    amsp::comm::CountingCommunicator<amsp::comm::ThreadsCommunicator> comm(std::move(threads), counter);
    TrainOutcome o = train_rank<ParamT>(comm, comm.inner(), mesh, plan, cfg, data, counter);
    if (comm.rank() == 0) outcome = std::move(o);
  });
  return outcome;
}

/// max over steps of |loss − reference loss| / reference loss.
inline double max_loss_deviation(const TrainOutcome& got, const TrainOutcome& reference) {
  double worst = 0.0;
  for (std::size_t s = 0; s < got.steps.size() && s < reference.steps.size(); ++s)
    worst = std::max(worst, std::abs(got.steps[s].loss - reference.steps[s].loss) / reference.steps[s].loss);
  return got.steps.size() == reference.steps.size() ? worst : 1e30;
}

}  // namespace amsp_train::test
