// The engine's device-space code path on the host (simulated_device_space.hpp; label tsan): the
// decision left to the stream, events retired without a host wait, tickets. It must give the host
// engine's bits on every plan of 2x2 and 4x2 (the same operations in the same order), and
// last_step_result() must report what the host engine's step() returned, skipped steps included.
// Its two streams: a gather runs after its own update only, and its ticket counts on its stream.
// With update_in_backward (the decision taken on the stream before the step's first update): the
// normal schedule's bits and the host engine's, and the host engine's step counts.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "amsp/engine/detail/cuda_wait_mode.hpp"
#include "parity_cases.hpp"
#include "simulated_device_space.hpp"
#include "update_in_backward_cases.hpp"

TYPE_TO_STRING(amsp::test::SimulatedDevice);

AMSP_UPDATE_IN_BACKWARD_CASES(amsp::test::SimulatedDevice)
AMSP_UPDATE_IN_BACKWARD_HOST_CASES(amsp::test::SimulatedDevice)

TEST_CASE("update_in_backward on a simulated device space: the host engine's step counts, across set_steps") {
  update_in_backward_test::check_counts_match_host(amsp::test::in_backward_counts<amsp::test::SimulatedDevice>());
}

TEST_CASE("a simulated device space gathers after its own update only; its tickets count per stream") {
  using amsp::StreamTicket;
  amsp::test::SimulatedDevice space;
  int written = 0;  // plain: written by the update, read by the gather (a missing order is a TSan report)
  amsp::comm::Handle update = space.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    written = 42;
  });
  const std::uint64_t update_ticket = space.last_ticket();
  std::atomic<bool> release_blocker{false};
  amsp::comm::Handle blocker = space.submit([&] {  // a later update on the communication stream
    while (!release_blocker.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  int seen = 0;
  amsp::comm::Handle gather = space.launch_after(update, [&] {
    seen = written;
    return std::vector<amsp::comm::Handle>{};
  });
  const std::uint64_t gather_ticket = space.last_ticket();
  CHECK(StreamTicket::stream(update_ticket) == amsp::stream_id::communication);
  CHECK(StreamTicket::stream(gather_ticket) == amsp::stream_id::gather);
  CHECK(StreamTicket::position(gather_ticket) == 1);
  space.user_after(gather_ticket);  // would hang if the gather queued (or its ticket counted) behind the blocker
  CHECK(seen == 42);
  release_blocker = true;
  blocker.wait();
  gather.wait();
  update.wait();
}

TEST_CASE("a simulated device space gives the host engine's bits on every plan") {
  using amsp::test::SimulatedDevice;
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for_each_space_case([&](const amsp::Mesh& mesh, const amsp::Plan& plan, JobConfig job) {
    job.max_grad_norm = 0.05f;
    CHECK(bitwise_equal(run_in<SimulatedDevice>(mesh, plan, rule, job), run_in<amsp::HostSerial>(mesh, plan, rule, job)));
    CHECK(bitwise_equal(run_in<SimulatedDevice, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job),
                        run_in<amsp::HostSerial, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job)));
  });
}

TEST_CASE("on a device space step() leaves the decision to the stream and last_step_result() reads it") {
  using Threads = amsp::comm::ThreadsCommunicator;
  amsp::comm::run_on_threads(1, [](Threads& comm) {
    const amsp::Mesh mesh(1, 1);
    const amsp::Plan plan = amsp::parse_plan("ddp", mesh);
    amsp::EngineOptions options;
    options.max_grad_norm = 0.5f;
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> host(comm, mesh, plan, amsp::optim::AdamW{}, amsp::test::odd_model(),
                                                             options);
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, float, float, amsp::test::SimulatedDevice> device(
        comm, mesh, plan, amsp::optim::AdamW{}, amsp::test::odd_model(), options);
    for (const float g : {0.25f, std::numeric_limits<float>::quiet_NaN(), 0.125f}) {
      CAPTURE(g);
      const amsp::StepResult want = amsp::test::step_with_gradient<amsp::HostSerial>(host, g);
      const amsp::StepResult issued = amsp::test::step_with_gradient<amsp::test::SimulatedDevice>(device, g);
      CHECK(issued.step == device.steps());  // the steps issued: the device has not decided yet
      const amsp::StepResult got = device.last_step_result();
      CHECK(got.skipped == want.skipped);
      CHECK(got.step == want.step);
      CHECK(got.clip_coefficient == want.clip_coefficient);
      CHECK((got.grad_norm == want.grad_norm || (std::isnan(got.grad_norm) && std::isnan(want.grad_norm))));
    }
    CHECK(device.last_step_result().step == 2);  // the NaN step was skipped on the "device"
    CHECK(device.steps() == 3);                  // ...and issued on the host
    device.set_steps(7);
    CHECK(device.last_step_result().step == 7);
  });
}

TEST_CASE("a CUDA engine's task wait comes from AMSP_CUDA_TASK_WAIT: host by default, device, or an error") {
  const auto wait_with = [](const char* value) {
    if (value == nullptr) ::unsetenv("AMSP_CUDA_TASK_WAIT");
    else ::setenv("AMSP_CUDA_TASK_WAIT", value, 1);
    return amsp::detail::cuda_task_wait_from_environment();
  };
  CHECK(wait_with(nullptr) == amsp::CudaTaskWait::on_host);
  CHECK(wait_with("") == amsp::CudaTaskWait::on_host);
  CHECK(wait_with("host") == amsp::CudaTaskWait::on_host);
  CHECK(wait_with("device") == amsp::CudaTaskWait::on_device);
  std::string rule;
  try {
    (void)wait_with("Host");
  } catch (const amsp::error& e) {
    rule = e.rule();
  }
  CHECK(rule == "engine.cuda_task_wait_env");
  ::unsetenv("AMSP_CUDA_TASK_WAIT");
}
