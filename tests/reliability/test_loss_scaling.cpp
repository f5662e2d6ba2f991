// Numerical faults: the dynamic loss scaler (amsp/optim/loss_scaler.hpp) against GradScaler's rules
// written out by hand, and with the engine on a 2 x 2 threads mesh: Inf/NaN injected on one rank
// at chosen steps makes every rank skip those steps together, and the final parameters are
// bitwise those of a run that never had them (while the scale halves and grows in between).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/loss_scaler.hpp"
#include "amsp/sharding.hpp"
#include "mismatch_job.hpp"

namespace {

using amsp::optim::DynamicLossScaler;
using amsp::optim::LossScalerOptions;
using amsp::optim::LossScalerState;

constexpr bool clean = false, overflow = true;

/// What a rank saw: whether each loop step was skipped, the final parameters, the optimizer steps.
struct RunRecord {
  std::vector<bool> skipped;
  std::vector<std::vector<float>> params;
  std::int64_t steps = 0;
  std::vector<float> scales;
};

/// Trains `loop_steps` steps of two micro-batches with a loss scaler on rank `comm`. At the loop
/// steps in `faults` rank 1 hands a non-finite gradient (Inf, or NaN at odd steps, in alternating
/// micro-batches). Clean gradients are keyed by the count of steps taken, so a run without the
/// faulty steps sees the same gradients at the same parameters.
RunRecord train(amsp::comm::ThreadsCommunicator& comm, const amsp::Plan& plan, int loop_steps, const std::set<int>& faults) {
  const amsp::Mesh mesh(2, 2);
  amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW> opt(
      comm, mesh, plan, amsp::optim::AdamW{.lr = 1e-2f}, amsp::test::twin_buckets(false));
  for (int b = 0; b < opt.bucket_count(); ++b)
    for (const amsp::TensorSlot& slot : opt.layout(b).slots()) {
      std::vector<float> init(slot.numel);
      for (std::size_t i = 0; i < init.size(); ++i) init[i] = amsp::test::job_value(1, static_cast<std::uint64_t>(b), i, 0);
      opt.set_tensor(slot.name, std::span<const float>(init));
    }
  DynamicLossScaler scaler({.initial_scale = 1024.0f, .growth_interval = 2});
  RunRecord record;
  for (int step = 0; step < loop_steps; ++step) {
    const bool faulty = faults.contains(step);
    const auto key = static_cast<std::uint64_t>(opt.steps());
    for (int m = 0; m < 2; ++m) {
      opt.start_micro_batch(m == 1);
      for (int b = 0; b < opt.bucket_count(); ++b) {
        const std::span<const float> params = opt.gather(b);
        const std::span<float> grads = opt.grad_buffer(b);
        for (const amsp::TensorSlot& slot : opt.layout(b).slots())
          for (std::size_t i = 0; i < slot.numel; ++i) {
            const std::size_t at = slot.offset + i;
            const float g = amsp::test::job_value(10 + key, static_cast<std::uint64_t>(m * 16 + comm.rank()),
                                                  static_cast<std::uint64_t>(b), i) +
                            0.5f * params[at];
            grads[at] = g * scaler.scale();
          }
        if (faulty && comm.rank() == 1 && b == 0 && m == step % 2)
          grads[3] = step % 2 == 1 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        opt.release(b);
        opt.reduce_gradients(b);
      }
    }
    const amsp::StepResult result = opt.step(scaler.scale());
    record.skipped.push_back(result.skipped);
    scaler.update(result.skipped);
    record.scales.push_back(scaler.scale());
  }
  for (int b = 0; b < opt.bucket_count(); ++b) {
    const std::span<const float> full = opt.gather(b);
    record.params.emplace_back(full.begin(), full.end());
    opt.release(b);
  }
  record.steps = opt.steps();
  return record;
}

std::vector<RunRecord> train_on_threads(const amsp::Plan& plan, int loop_steps, const std::set<int>& faults) {
  std::vector<RunRecord> records(4);
  amsp::comm::run_on_threads(4, [&](amsp::comm::ThreadsCommunicator& comm) {
    records[static_cast<std::size_t>(comm.rank())] = train(comm, plan, loop_steps, faults);
  });
  return records;
}

}  // namespace

TEST_CASE("loss scaler: GradScaler's rule, step by step") {
  DynamicLossScaler scaler({.initial_scale = 8.0f, .growth_interval = 3});
  CHECK(scaler.scale() == 8.0f);
  const std::vector<bool> outcomes{clean, clean, clean, overflow, clean, overflow, clean, clean, clean, clean, clean, clean};
  // Written out by hand: x2 after three clean steps in a row, x1/2 on an overflow (count reset).
  const std::vector<float> expected{8, 8, 16, 8, 8, 4, 4, 4, 8, 8, 8, 16};
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    scaler.update(outcomes[i]);
    CAPTURE(i);
    CHECK(scaler.scale() == expected[i]);
  }
  CHECK(DynamicLossScaler().scale() == 65536.0f);
  CHECK(DynamicLossScaler().options().growth_interval == 2000);
}

TEST_CASE("loss scaler: the scale stays finite and above its floor") {
  DynamicLossScaler top({.initial_scale = 0x1p127f, .growth_interval = 1});
  top.update(clean);
  CHECK(top.scale() == 0x1p127f);  // 2^128 would be infinite
  CHECK(top.state().clean_steps == 0);
  DynamicLossScaler bottom({.initial_scale = 4.0f, .min_scale = 1.0f});
  for (int i = 0; i < 5; ++i) bottom.update(overflow);
  CHECK(bottom.scale() == 1.0f);
}

TEST_CASE("loss scaler: state round trip for checkpoints; bad states and options are named") {
  DynamicLossScaler a({.growth_interval = 5});
  a.update(overflow);
  a.update(clean);
  a.update(clean);
  const LossScalerState saved = a.state();
  CHECK(saved == LossScalerState{32768.0f, 2});
  DynamicLossScaler b({.growth_interval = 5});
  b.load(saved);
  for (int i = 0; i < 3; ++i) {
    a.update(clean);
    b.update(clean);
  }
  CHECK(a.state() == b.state());
  CHECK(b.scale() == 65536.0f);  // grew at the fifth clean step, counting the two before the checkpoint

  const auto rule_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const amsp::error& e) {
      return e.rule() + ": " + e.what();
    }
    return "(no error)";
  };
  for (const LossScalerState& bad : {LossScalerState{0.0f, 0}, LossScalerState{INFINITY, 0}, LossScalerState{NAN, 0},
                                     LossScalerState{8.0f, -1}, LossScalerState{8.0f, 5}})
    CHECK(rule_of([&] { b.load(bad); }).starts_with("optim.loss_scaler"));
  CHECK(b.state() == a.state());  // a rejected state leaves the scaler as it was
  for (const LossScalerOptions& bad :
       {LossScalerOptions{.initial_scale = 0.0f}, LossScalerOptions{.initial_scale = -1.0f},
        LossScalerOptions{.initial_scale = INFINITY}, LossScalerOptions{.growth_factor = 1.0f},
        LossScalerOptions{.backoff_factor = 1.0f}, LossScalerOptions{.backoff_factor = 0.0f},
        LossScalerOptions{.growth_interval = 0}, LossScalerOptions{.initial_scale = 0.5f, .min_scale = 1.0f}})
    CHECK(rule_of([&] { DynamicLossScaler s(bad); }).starts_with("optim.loss_scaler"));
}

TEST_CASE("Inf/NaN on one rank: every rank skips those steps, and the result is the run without them") {
  const amsp::Mesh mesh(2, 2);
  const std::set<int> faults{1, 4, 5, 9};
  constexpr int loop_steps = 12;
  for (const std::string plan_name : {"ddp", "zero3", "amsp-7b"}) {
    CAPTURE(plan_name);
    const amsp::Plan plan = amsp::preset(plan_name, mesh);
    const std::vector<RunRecord> faulty = train_on_threads(plan, loop_steps, faults);
    const std::vector<RunRecord> reference = train_on_threads(plan, loop_steps - static_cast<int>(faults.size()), {});
    for (int r = 0; r < 4; ++r) {
      CAPTURE(r);
      const RunRecord& got = faulty[static_cast<std::size_t>(r)];
      const RunRecord& want = reference[static_cast<std::size_t>(r)];
      for (int step = 0; step < loop_steps; ++step) CHECK(got.skipped[static_cast<std::size_t>(step)] == faults.contains(step));
      for (bool s : want.skipped) CHECK_FALSE(s);
      CHECK(got.steps == want.steps);
      CHECK(got.params == want.params);  // bitwise: float ==, no tolerance
      CHECK(got.scales == faulty[0].scales);  // every rank holds the same scale
    }
    // The scale did move: halved at each overflow, grown after two clean steps.
    const std::vector<float> expected{1024, 512, 512, 1024, 512, 256, 256, 512, 512, 256, 256, 512};
    CHECK(faulty[0].scales == expected);
  }
}
