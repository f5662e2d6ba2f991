// EngineOptions::update_in_backward in the synchronous host space (update_in_backward_cases.hpp),
// what step() reports then, and the misuses that fail with rule engine.update_in_backward.
#include <doctest/doctest.h>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "rule_of_error.hpp"
#include "simulated_device_space.hpp"
#include "update_in_backward_cases.hpp"

AMSP_UPDATE_IN_BACKWARD_CASES(amsp::HostSerial)

namespace update_in_backward_test {

using InBackwardEngine = amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW>;

amsp::EngineOptions in_backward_options() {
  amsp::EngineOptions o;
  o.update_in_backward = true;
  o.skip_nonfinite = false;
  return o;
}

/// The last micro-batch up to the point where bucket 0's update was issued in the backward.
void hand_first_bucket(InBackwardEngine& opt) {
  opt.start_micro_batch(/*last=*/true);
  (void)opt.grad_buffer(0);  // zeros
  opt.reduce_gradients(0);
}

/// The rest of the last micro-batch.
void hand_other_buckets(InBackwardEngine& opt) {
  for (int b = 1; b < opt.bucket_count(); ++b) {
    (void)opt.grad_buffer(b);
    opt.reduce_gradients(b);
  }
}

}  // namespace update_in_backward_test

using update_in_backward_test::InBackwardEngine;
using update_in_backward_test::in_backward_options;

TEST_CASE("update_in_backward: step() decides nothing globally and counts the step") {
  amsp::comm::run_on_threads(2, [](amsp::comm::ThreadsCommunicator& comm) {
    const amsp::Mesh mesh(2, 1);
    InBackwardEngine opt(comm, mesh, amsp::preset("zero3", mesh), {}, amsp::test::odd_model(), in_backward_options());
    update_in_backward_test::hand_first_bucket(opt);
    update_in_backward_test::hand_other_buckets(opt);
    const amsp::StepResult r = opt.step();
    CHECK(r.step == 1);
    CHECK(opt.steps() == 1);
    CHECK(!r.skipped);
    CHECK(r.grad_norm == 0.0);  // not computed
    CHECK(r.clip_coefficient == 1.0f);
  });
}

TEST_CASE("update_in_backward: what needs the global norm or a whole-step decision is rejected") {
  using amsp::test::rule_of_error;
  const auto construct = [](amsp::EngineOptions o) {
    return rule_of_error([o](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
      InBackwardEngine opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model(), o);
    });
  };
  amsp::EngineOptions clip = in_backward_options();
  clip.max_grad_norm = 1.0f;
  CHECK(construct(clip) == "engine.update_in_backward");
  amsp::EngineOptions skip = in_backward_options();
  skip.skip_nonfinite = true;
  CHECK(construct(skip) == "engine.update_in_backward");
  CHECK(construct(in_backward_options()) == "(no error)");
  // A device space takes it too (the CUDA space's code path, simulated on the host:
  // test_device_space_host.cpp runs it); its clipping and skip are rejected the same way.
  CHECK(rule_of_error([](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
          amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW, float, float,
                                 amsp::test::SimulatedDevice>
              opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model(), in_backward_options());
        }) == "(no error)");
  CHECK(rule_of_error([skip](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
          amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW, float, float,
                                 amsp::test::SimulatedDevice>
              opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model(), skip);
        }) == "engine.update_in_backward");

  // A hyperparameter or the step count changed once the step's first update was issued.
  const auto after_first_update = [](auto change) {
    return rule_of_error([change](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
      InBackwardEngine opt(comm, mesh, amsp::preset("zero3", mesh), {}, amsp::test::odd_model(), in_backward_options());
      update_in_backward_test::hand_first_bucket(opt);
      change(opt);
    });
  };
  CHECK(after_first_update([](InBackwardEngine& opt) { opt.set_lr(1e-4f); }) == "engine.update_in_backward");
  CHECK(after_first_update([](InBackwardEngine& opt) { opt.set_rule(amsp::optim::AdamW{}); }) ==
        "engine.update_in_backward");
  CHECK(after_first_update([](InBackwardEngine& opt) { opt.set_steps(7); }) == "engine.update_in_backward");
  // A loss scale: the updates ran unscaled.
  CHECK(after_first_update([](InBackwardEngine& opt) {
          update_in_backward_test::hand_other_buckets(opt);
          (void)opt.step(128.0f);
        }) == "engine.update_in_backward");
  // Before the step's first update, the learning rate may change (between micro-batches too).
  CHECK(rule_of_error([](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
          InBackwardEngine opt(comm, mesh, amsp::preset("zero3", mesh), {}, amsp::test::odd_model(),
                               in_backward_options());
          opt.set_lr(1e-4f);
          update_in_backward_test::hand_first_bucket(opt);
          update_in_backward_test::hand_other_buckets(opt);
          (void)opt.step();
          opt.set_lr(1e-5f);  // the next step's
        }) == "(no error)");
  // The bucket's update rewrites the P store (P replicated: what gather(b) handed out).
  CHECK(rule_of_error([](amsp::comm::ThreadsCommunicator& comm, const amsp::Mesh& mesh) {
          InBackwardEngine opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model(),
                               in_backward_options());
          opt.start_micro_batch(/*last=*/true);
          (void)opt.gather(0);
          (void)opt.grad_buffer(0);
          opt.reduce_gradients(0);
        }) == "engine.gathered_during_step");
}
