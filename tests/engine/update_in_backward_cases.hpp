#pragma once
// EngineOptions::update_in_backward against the normal schedule, written once and instantiated
// per execution space (test_update_in_backward.cpp: HostSerial; ..._async.cpp: HostAsync, also
// under ThreadSanitizer, where each bucket's update runs on the worker during the backward). The
// normal schedule is itself checked against the unsharded DDP run and float64 (parity_cases.hpp),
// so bitwise equality to it on every plan is the proof that issuing the updates in the backward
// changes when they run and nothing else. AMSP_UPDATE_IN_BACKWARD_CASES(Space) registers the cases.
#include <doctest/doctest.h>

#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "parity_metrics.hpp"
#include "../plan_sweep.hpp"

namespace update_in_backward_test {

/// What a job ends with: rank 0's full parameters and every rank's optimizer-state shards.
struct Outcome {
  amsp::test::Params params;
  amsp::test::OsShards os_shards;  // rank by rank
};

template <class Space, class ParamT>
Outcome run(const amsp::Mesh& mesh, const amsp::Plan& plan, const amsp::test::JobConfig& job) {
  std::vector<amsp::test::Params> params(static_cast<std::size_t>(mesh.world_size()));
  std::vector<amsp::test::OsShards> shards(params.size());
  amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    params[r] = amsp::test::run_job<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW, ParamT, Space>(
        comm, mesh, plan, amsp::optim::AdamW{.lr = 1e-2f}, job, nullptr, &shards[r]);
  });
  Outcome out{params.front(), {}};
  for (amsp::test::OsShards& s : shards) out.os_shards.insert(out.os_shards.end(), s.begin(), s.end());
  return out;
}

/// Every valid plan of 2x2 in both layouts (whole-tensor where s_g = s_p), M micro-batches, a
/// learning rate changed before every step (it must reach the updates issued in the backward):
/// the updates in the backward give bitwise the parameters and optimizer states of the normal
/// schedule, both without clipping and overflow skip.
template <class Space, class ParamT>
void check_every_plan(int micro_batches) {
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
    const Outcome normal = run<Space, ParamT>(mesh, plan, job);
    job.update_in_backward = true;
    const Outcome in_backward = run<Space, ParamT>(mesh, plan, job);
    CHECK(amsp::test::bitwise_equal(in_backward.params, normal.params));
    CHECK(amsp::test::bitwise_equal(in_backward.os_shards, normal.os_shards));
  });
}

}  // namespace update_in_backward_test

TEST_CASE_TEMPLATE_DEFINE("update_in_backward: the normal schedule's bits on every 2x2 plan", Space,
                          update_in_backward_parity) {
  for (int micro_batches : {1, 3}) {
    update_in_backward_test::check_every_plan<Space, float>(micro_batches);
    update_in_backward_test::check_every_plan<Space, amsp::bf16>(micro_batches);
  }
}

/// Registers the cases for execution space `Space` in the including source file.
#define AMSP_UPDATE_IN_BACKWARD_CASES(Space) TEST_CASE_TEMPLATE_INVOKE(update_in_backward_parity, Space);
