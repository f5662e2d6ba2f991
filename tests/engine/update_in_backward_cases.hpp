#pragma once
// EngineOptions::update_in_backward against the normal schedule, written once and instantiated
// per execution space (test_update_in_backward.cpp: HostSerial; ..._async.cpp: HostAsync, also
// under ThreadSanitizer, where each bucket's update runs on the worker during the backward;
// test_device_space_host.cpp: the simulated device space; test_engine_cuda.cpp: amsp::CudaAsync).
// The normal schedule is itself checked against the unsharded DDP run and float64
// (parity_cases.hpp), so bitwise equality to it on every plan is the proof that issuing the
// updates in the backward changes when they run and nothing else. AMSP_UPDATE_IN_BACKWARD_CASES(Space)
// registers the cases. A device space decides on the device, so it also gets
// AMSP_UPDATE_IN_BACKWARD_HOST_CASES(Space): its updates in the backward give the host engine's
// bits (fp32), and check_counts_match_host: its step counts are the host engine's.
#include <doctest/doctest.h>

#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "in_backward_counts.hpp"
#include "parity_metrics.hpp"
#include "../plan_sweep.hpp"

namespace update_in_backward_test {

/// The job in Space with AdamW on every rank of mesh: parameters and every rank's OS shards
/// (amsp::test::ParityRunner: the CUDA test routes its space to a driver compiled by nvcc).
template <class Space, class ParamT>
amsp::test::JobOutcome run(const amsp::Mesh& mesh, const amsp::Plan& plan, const amsp::test::JobConfig& job) {
  return amsp::test::ParityRunner<Space>::template outcome<amsp::optim::AdamW, ParamT>(
      mesh, plan, amsp::optim::AdamW{.lr = 1e-2f}, job);
}

/// Every valid plan of 2x2 in both layouts (whole-tensor where s_g = s_p), M micro-batches, a
/// learning rate changed before every step (it must reach the updates issued in the backward),
/// no clipping and no overflow skip: calls check(mesh, plan, job) with the normal schedule's job.
template <class F>
void for_each_case(int micro_batches, F&& check) {
  const amsp::Mesh mesh(2, 2);
  amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
    CAPTURE(amsp::to_string(plan));
    CAPTURE(amsp::name_of(layout));
    CAPTURE(micro_batches);
    amsp::test::JobConfig job;
    job.steps = 4;
    job.micro_batches = micro_batches;
    job.os_layout = layout;
    job.skip_nonfinite = false;
    job.lr_at = [](int step) { return 1e-2f / float(1 + step); };
    check(mesh, plan, job);
  });
}

/// The updates in the backward give bitwise the parameters and optimizer states of the normal
/// schedule in the same space.
template <class Space, class ParamT>
void check_every_plan(int micro_batches) {
  for_each_case(micro_batches, [](const amsp::Mesh& mesh, const amsp::Plan& plan, amsp::test::JobConfig job) {
    const amsp::test::JobOutcome normal = run<Space, ParamT>(mesh, plan, job);
    job.update_in_backward = true;
    const amsp::test::JobOutcome in_backward = run<Space, ParamT>(mesh, plan, job);
    CHECK(amsp::test::bitwise_equal(in_backward.params, normal.params));
    CHECK(amsp::test::bitwise_equal(in_backward.os_shards, normal.os_shards));
  });
}

/// The updates in the backward in Space give bitwise the parameters and optimizer states of the
/// updates in the backward in the host engine (HostSerial), fp32.
template <class Space>
void check_every_plan_against_host(int micro_batches) {
  for_each_case(micro_batches, [](const amsp::Mesh& mesh, const amsp::Plan& plan, amsp::test::JobConfig job) {
    job.update_in_backward = true;
    const amsp::test::JobOutcome got = run<Space, float>(mesh, plan, job);
    const amsp::test::JobOutcome want = run<amsp::HostSerial, float>(mesh, plan, job);
    CHECK(amsp::test::bitwise_equal(got.params, want.params));
    CHECK(amsp::test::bitwise_equal(got.os_shards, want.os_shards));
  });
}

/// A space's counts over in_backward_counts' sequence are the host engine's: what step()
/// returned and steps() (1, 2, then 8 after set_steps(7)), last_step_result() equal to the host's
/// step() (no norm: 0; clip coefficient 1; never skipped), and the final parameters bitwise.
inline void check_counts_match_host(const amsp::test::InBackwardCounts& got) {
  const amsp::test::InBackwardCounts want = amsp::test::in_backward_counts<amsp::HostSerial>();
  CHECK(want.steps == std::vector<std::int64_t>{1, 2, 8});
  REQUIRE(got.returned.size() == want.returned.size());
  REQUIRE(got.read.size() == want.returned.size());
  for (std::size_t i = 0; i < want.returned.size(); ++i) {
    CAPTURE(i);
    CHECK(got.returned[i].step == want.returned[i].step);
    CHECK(got.steps[i] == want.steps[i]);
    CHECK(got.read[i].step == want.returned[i].step);
    CHECK(got.read[i].skipped == want.returned[i].skipped);
    CHECK(got.read[i].grad_norm == want.returned[i].grad_norm);
    CHECK(got.read[i].clip_coefficient == want.returned[i].clip_coefficient);
  }
  CHECK(amsp::test::bitwise_equal(got.params, want.params));
}

}  // namespace update_in_backward_test

TEST_CASE_TEMPLATE_DEFINE("update_in_backward: the normal schedule's bits on every 2x2 plan", Space,
                          update_in_backward_parity) {
  for (int micro_batches : {1, 3}) {
    update_in_backward_test::check_every_plan<Space, float>(micro_batches);
    update_in_backward_test::check_every_plan<Space, amsp::bf16>(micro_batches);
  }
}

TEST_CASE_TEMPLATE_DEFINE("update_in_backward: the host engine's bits on every 2x2 plan", Space,
                          update_in_backward_host_bits) {
  for (int micro_batches : {1, 3}) update_in_backward_test::check_every_plan_against_host<Space>(micro_batches);
}

/// Registers the cases for execution space `Space` in the including source file.
#define AMSP_UPDATE_IN_BACKWARD_CASES(Space) TEST_CASE_TEMPLATE_INVOKE(update_in_backward_parity, Space);
/// Registers the comparison with the host engine (for a space that decides on the device).
#define AMSP_UPDATE_IN_BACKWARD_HOST_CASES(Space) TEST_CASE_TEMPLATE_INVOKE(update_in_backward_host_bits, Space);
