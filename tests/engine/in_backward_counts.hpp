#pragma once
// The step counts of an EngineOptions::update_in_backward engine in any execution space over one
// fixed sequence (host code without doctest: the CUDA test's driver runs it in amsp::CudaAsync;
// update_in_backward_cases.hpp compares a space's counts with the host engine's). A device space
// decides on the device: steps() counts the steps issued and last_step_result() reads the device's
// decision, and with update_in_backward nothing is ever skipped, so both must be the host
// engine's counts, across set_steps too: the step after set_steps(7) applies bias correction 8,
// which the final parameters show.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding/presets.hpp"
#include "engine_runner.hpp"

namespace amsp::test {

/// What rank 0 of the sequence saw.
struct InBackwardCounts {
  std::vector<StepResult> returned;  ///< what each step() returned
  std::vector<StepResult> read;      ///< last_step_result() after each step
  std::vector<std::int64_t> steps;   ///< steps() after each step
  Params params;                     ///< the final parameters
};

/// One step of one micro-batch with every gradient element `g` (written as the job writes them).
template <class Space, class Engine>
StepResult step_with_gradient(Engine& opt, float g) {
  opt.start_micro_batch(/*last=*/true);
  for (int b = 0; b < opt.bucket_count(); ++b) {
    std::vector<float> copy;
    const std::span<float> buffer = opt.grad_buffer(b);
    const std::span<float> grads = JobMemory<Space>::host_view(buffer, copy);
    std::fill(grads.begin(), grads.end(), g);
    JobMemory<Space>::write_back(buffer, std::span<const float>(grads));
    opt.reduce_gradients(b);
  }
  return opt.step();
}

/// zero3 on 2x1 with update_in_backward (AdamW, fp32): two steps, set_steps(7), a third step.
template <class Space>
InBackwardCounts in_backward_counts() {
  InBackwardCounts out;
  comm::run_on_threads(2, [&](comm::ThreadsCommunicator& comm) {
    const Mesh mesh(2, 1);
    EngineOptions options;
    options.update_in_backward = true;
    options.skip_nonfinite = false;
    ShardedOptimizer<comm::ThreadsCommunicator, optim::AdamW, float, float, Space> opt(
        comm, mesh, preset("zero3", mesh), optim::AdamW{.lr = 1e-2f}, odd_model(), options);
    set_initial_values(opt);
    InBackwardCounts seen;
    const auto record = [&](const StepResult& returned) {
      seen.returned.push_back(returned);
      seen.read.push_back(opt.last_step_result());
      seen.steps.push_back(opt.steps());
    };
    record(step_with_gradient<Space>(opt, 0.25f));
    record(step_with_gradient<Space>(opt, 0.125f));
    opt.set_steps(7);
    record(step_with_gradient<Space>(opt, -0.5f));
    seen.params = final_params<Space>(opt);
    if (comm.rank() == 0) out = std::move(seen);
  });
  return out;
}

}  // namespace amsp::test
