// EngineOptions::gradient_buffers_in_flight: in HostAsync a backward that outruns
// its reductions (here: every blocking reduction 20 ms late, the "backward" instant) holds at most that
// many bucket-sized gradient buffers, not one per bucket it runs ahead; the bound changes no bit
// of the result (against the serial space on an undelayed communicator), never waits for buffers
// the user still holds open, and a negative count is an error naming its rule. Label tsan: the
// bound's wait hands buffers between the stream and the host as the pool does. A device
// space (the simulated one here) bounds them with its staging ring: docs/engine.md, "Gradient
// buffers in flight".
#include <doctest/doctest.h>

#include <chrono>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "rule_of_error.hpp"
#include "simulated_device_space.hpp"
#include "slow_reductions.hpp"

namespace {
using Threads = amsp::comm::ThreadsCommunicator;
using amsp::test::SlowReductions;

constexpr int kBuckets = 6;
constexpr std::size_t kBucketElements = 1000;

std::vector<amsp::BucketSpec> buckets() {
  std::vector<amsp::BucketSpec> specs;
  for (int b = 0; b < kBuckets; ++b)
    specs.push_back({"b" + std::to_string(b), {{"b" + std::to_string(b) + ".w", {kBucketElements}, amsp::dtype::fp32}}});
  return specs;
}

struct Run {
  std::vector<std::vector<float>> params;  // rank 0's buckets after the steps
  std::size_t gradient_buffers = 0;        // rank 0's gradient buffers (scratch less the other pools), in buckets
};

/// Two steps of ZeRO-2 on 2 ranks over `Comm` (made from the world by make_comm). Each step
/// writes the buckets' gradients one after another with no compute between, a backward far faster
/// than the reductions; open_at_once takes every bucket's buffer before handing the first in.
template <class Space, class Comm, class MakeComm>
Run run(int in_flight, bool open_at_once, MakeComm make_comm) {
  const amsp::Mesh mesh(2, 1);
  const amsp::Plan plan = amsp::parse_plan("zero2", mesh);
  Run result;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& world) {
    Comm comm = make_comm(world);
    amsp::EngineOptions options;
    options.gradient_buffers_in_flight = in_flight;
    amsp::ShardedOptimizer<Comm, amsp::optim::AdamW, float, float, Space> opt(comm, mesh, plan,
                                                                              amsp::optim::AdamW{.lr = 0.1f}, buckets(), options);
    for (int step = 0; step < 2; ++step) {
      opt.start_micro_batch(true);
      std::vector<std::span<float>> grads;
      for (int b = 0; b < kBuckets; ++b) {
        grads.push_back(opt.grad_buffer(b));
        for (std::size_t i = 0; i < kBucketElements; ++i)
          grads.back()[i] = 0.01f * float((i * 7 + std::size_t(b) * 13 + std::size_t(step)) % 29) - 0.1f * float(comm.rank());
        if (!open_at_once) opt.reduce_gradients(b);
      }
      if (open_at_once)
        for (int b = 0; b < kBuckets; ++b) opt.reduce_gradients(b);
      (void)opt.step();
    }
    opt.synchronize();
    if (comm.rank() != 0) return;
    for (int b = 0; b < kBuckets; ++b) {
      const auto p = opt.gather(b);
      result.params.emplace_back(p.begin(), p.begin() + kBucketElements);
      opt.release(b);
    }
    const amsp::MemoryReport m = opt.memory();
    result.gradient_buffers = (m.scratch - m.reduction_scratch - m.gather_scratch) / opt.layout(0).buffer_size(amsp::dtype::fp32) / sizeof(float);
  });
  return result;
}

/// The world again, as a communicator of its own (the engine keeps a reference to it).
Threads whole(Threads& world) { return world.split(amsp::factor_groups(amsp::Mesh(2, 1), amsp::Factor{2, 1})); }
SlowReductions slow(Threads& world) { return {whole(world), std::chrono::milliseconds(20)}; }

}  // namespace

TEST_CASE("a backward that outruns its reductions holds at most gradient_buffers_in_flight buffers") {
  const Run reference = run<amsp::HostSerial, Threads>(2, false, whole);
  const Run unbounded = run<amsp::HostAsync, SlowReductions>(0, false, slow);
  CHECK(unbounded.gradient_buffers >= 4);  // runs ahead by most of the 6 buckets: what the bound is for
  CHECK(unbounded.params == reference.params);
  for (int in_flight : {1, 2, 3}) {
    CAPTURE(in_flight);
    const Run bounded = run<amsp::HostAsync, SlowReductions>(in_flight, false, slow);
    CHECK(bounded.gradient_buffers <= std::size_t(in_flight));
    CHECK(bounded.params == reference.params);
  }
}

// A device space bounds them with its staging ring: each slot is reused once the reduction that
// last read it is done, a wait of the user's stream (on the simulated device, the caller's thread),
// not of the host. Its step() does not wait for the reductions either, so without the ring the
// next step's backward takes new buffers too (12 for the 6 buckets over 2 steps, measured before
// the ring).
TEST_CASE("a device space holds at most gradient_buffers_in_flight buffers: its staging ring") {
  const Run reference = run<amsp::HostSerial, Threads>(2, false, whole);
  const Run unbounded = run<amsp::test::SimulatedDevice, SlowReductions>(0, false, slow);
  CHECK(unbounded.gradient_buffers >= 4);
  CHECK(unbounded.params == reference.params);
  for (int in_flight : {1, 2, 3}) {
    CAPTURE(in_flight);
    const Run bounded = run<amsp::test::SimulatedDevice, SlowReductions>(in_flight, false, slow);
    CHECK(bounded.gradient_buffers == std::size_t(in_flight));
    CHECK(bounded.params == reference.params);
  }
}

TEST_CASE("the bound never waits for gradient buffers the user holds open") {
  const Run reference = run<amsp::HostSerial, Threads>(1, true, whole);
  const Run bounded = run<amsp::HostAsync, SlowReductions>(1, true, slow);
  CHECK(bounded.gradient_buffers == std::size_t(kBuckets));  // all open at once: one each, no wait
  CHECK(bounded.params == reference.params);
  const Run device = run<amsp::test::SimulatedDevice, SlowReductions>(1, true, slow);
  CHECK(device.gradient_buffers >= std::size_t(kBuckets));  // the ring's slot is open: the pool serves
  CHECK(device.params == reference.params);
}

TEST_CASE("a negative gradient_buffers_in_flight is an error naming its rule") {
  CHECK(amsp::test::rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          amsp::EngineOptions options;
          options.gradient_buffers_in_flight = -1;
          amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, float, float, amsp::HostAsync> opt(
              comm, mesh, amsp::parse_plan("zero2", mesh), amsp::optim::AdamW{}, buckets(), options);
        }) == "engine.gradient_buffers");
}
