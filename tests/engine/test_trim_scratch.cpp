// ShardedOptimizer::trim_scratch: after an evaluation that gathers every bucket at once (which
// grows the gather pool to the whole model), it frees every pooled buffer no bucket holds, the
// next steps grow the pools back to the training step's bound (the planner's
// engine_memory_per_rank, an independent model of what the engine holds), and training goes on
// bit for bit as in an engine that never evaluated nor trimmed. A bucket held gathered and a
// gradient buffer being written keep their memory and contents through a trim; a trim while
// reductions are still running waits for them. In HostSerial, HostAsync and the simulated device
// space (the device-space code path, whose trim also waits for the user's stream).
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/planner/memory_model.hpp"
#include "amsp/sharding.hpp"
#include "simulated_device_space.hpp"
#include "slow_reductions.hpp"

// A named namespace: test_engine is a unity build, and the other sources have a kUnits of their own.
namespace trim_scratch_test {
using Threads = amsp::comm::ThreadsCommunicator;
using amsp::bf16;

// Unequal units in a transformer's order; multiples of 128 so that no shard on 2x2 is padded.
const std::vector<amsp::planner::Module> kUnits{
    {"embed", -1, 1536}, {"layers.0", 0, 1024}, {"layers.1", 1, 1024}, {"final_norm", -1, 128}, {"lm_head", -1, 1536}};

std::vector<amsp::BucketSpec> buckets() {
  std::vector<amsp::BucketSpec> out;
  for (const auto& u : kUnits) out.push_back({u.name, {{u.name + ".w", {u.params}, amsp::dtype_of_v<bf16>}}});
  return out;
}

template <class Space>
using Engine = amsp::ShardedOptimizer<amsp::test::SlowReductions, amsp::optim::AdamW, bf16, bf16, Space>;

// Element i of a rank's gradients in step `step`: the interrupted step below writes what
// train_step writes, so that both engines stay bitwise equal.
bf16 gradient(std::size_t i, int step, int rank) {
  return amsp::from_float<bf16>(1e-3f * float((i + std::size_t(step) + std::size_t(rank)) % 7));
}

// One training step as the memory-parity test runs it: the forward gathers each unit with the
// next one prefetched, the backward gathers again and hands in one unit's gradients at a time.
template <class Space>
void train_step(Engine<Space>& opt, int step) {
  const int n = opt.bucket_count();
  opt.start_micro_batch(true);
  for (int b = 0; b < n; ++b) {
    (void)opt.gather(b);
    if (b > 0) opt.release(b - 1);
    if (b + 1 < n) opt.prefetch(b + 1);
  }
  opt.release(n - 1);
  for (int b = n - 1; b >= 0; --b) {
    (void)opt.gather(b);
    if (b > 0) opt.prefetch(b - 1);
    std::span<bf16> grads = opt.grad_buffer(b);
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = gradient(i, step, opt.rank());
    opt.release(b);
    opt.reduce_gradients(b);
  }
  (void)opt.step();
}

// The whole model, read through gather(b) once the engine is quiet.
template <class Space>
std::vector<bf16> parameters(Engine<Space>& opt) {
  opt.synchronize();
  std::vector<bf16> out;
  for (int b = 0; b < opt.bucket_count(); ++b) {
    const std::span<const bf16> p = opt.gather(b);
    out.insert(out.end(), p.begin(), p.begin() + opt.layout(b).slots()[0].numel);
    opt.release(b);
  }
  return out;
}

bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

std::size_t pooled(const amsp::MemoryReport& m) { return m.gather_scratch + m.gradient_staging + m.reduction_scratch; }

// What one rank saw; checked after the ranks end (no assertions on the rank threads).
struct RankResult {
  amsp::MemoryReport training, evaluated, trimmed, back;
  std::size_t freed = 0, freed_again = 0;
  bool held_kept = false, open_buffer_kept = false, same_parameters = false;
};

template <class Space>
void check_plan(const std::string& plan_name) {
  const amsp::Mesh mesh(2, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  CAPTURE(plan_name);
  std::vector<RankResult> results(static_cast<std::size_t>(mesh.world_size()));
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& world) {
    RankResult& r = results[static_cast<std::size_t>(world.rank())];
    const auto node_major = amsp::factor_groups(mesh, amsp::Factor{mesh.ranks_per_node(), mesh.nodes()});
    amsp::test::SlowReductions comm_a(world.split(node_major), std::chrono::milliseconds(2));
    amsp::test::SlowReductions comm_b(world.split(node_major), std::chrono::milliseconds(2));
    Engine<Space> trimmed(comm_a, mesh, plan, amsp::optim::AdamW{}, buckets());
    Engine<Space> untouched(comm_b, mesh, plan, amsp::optim::AdamW{}, buckets());
    const int n = trimmed.bucket_count();
    for (int step = 0; step < 2; ++step) {
      train_step(trimmed, step);
      train_step(untouched, step);
    }
    trimmed.synchronize();
    r.training = trimmed.memory();

    // An evaluation: every bucket gathered at once, then released.
    for (int b = 0; b < n; ++b) (void)trimmed.gather(b);
    for (int b = 0; b < n; ++b) trimmed.release(b);
    r.evaluated = trimmed.memory();
    r.freed = trimmed.trim_scratch();
    r.trimmed = trimmed.memory();
    r.freed_again = trimmed.trim_scratch();

    // A held gather and a half-written gradient buffer survive a trim, reductions in flight included.
    trimmed.start_micro_batch(true);
    const std::span<bf16> held = trimmed.gather(0);
    const std::vector<bf16> held_before(held.begin(), held.end());
    for (int b = n - 1; b >= 1; --b) {
      std::span<bf16> grads = trimmed.grad_buffer(b);
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = gradient(i, 2, world.rank());
      trimmed.reduce_gradients(b);  // 2 ms late: still running when the trim below starts
    }
    const std::span<bf16> open = trimmed.grad_buffer(0);
    for (std::size_t i = 0; i < open.size() / 2; ++i) open[i] = gradient(i, 2, world.rank());
    (void)trimmed.trim_scratch();
    r.held_kept = same_bits(std::vector<bf16>(held.begin(), held.end()), held_before);
    const std::span<bf16> reopened = trimmed.grad_buffer(0);
    r.open_buffer_kept = reopened.data() == open.data();
    for (std::size_t i = open.size() / 2; i < open.size(); ++i) reopened[i] = gradient(i, 2, world.rank());
    trimmed.release(0);
    trimmed.reduce_gradients(0);
    (void)trimmed.step();
    train_step(untouched, 2);  // the same gradients, written the usual way

    // Training goes on as if nothing happened, and the pools are back at the training bound.
    train_step(trimmed, 3);
    train_step(untouched, 3);
    r.same_parameters = same_bits(parameters(trimmed), parameters(untouched));
    r.back = trimmed.memory();
  });

  std::size_t model_bytes = 0;
  for (const auto& u : kUnits) model_bytes += std::size_t(u.params) * sizeof(bf16);
  amsp::planner::ScheduleOptions o;
  o.param_wire_bytes = o.grad_wire_bytes = sizeof(bf16);
  const amsp::planner::MemoryBreakdown priced = amsp::planner::engine_memory_per_rank(plan, kUnits, 1, o);
  for (const RankResult& r : results) {
    if (plan.p.size() > 1) CHECK(r.evaluated.gather_scratch >= model_bytes);  // the whole model gathered
    CHECK(r.freed == pooled(r.evaluated));
    CHECK(pooled(r.trimmed) == 0);
    CHECK(r.trimmed.os_gradients == r.evaluated.os_gradients);  // not scratch: the update reads it
    CHECK(r.trimmed.model_states() == r.evaluated.model_states());
    CHECK(r.freed_again == 0);
    CHECK(r.held_kept);
    CHECK(r.open_buffer_kept);
    CHECK(r.same_parameters);
    CHECK(r.back.gather_scratch == r.training.gather_scratch);
    CHECK(r.back.reduction_scratch == r.training.reduction_scratch);
    CHECK(r.back.gradient_staging == r.training.gradient_staging);  // a device space: its staging ring refilled
    if constexpr (Space::asynchronous) {  // the schedules the planner prices (HostSerial stages one buffer)
      CHECK(double(r.back.gather_scratch) == doctest::Approx(priced.gathered_params).epsilon(1e-12));
      CHECK(double(r.back.gradient_staging) == doctest::Approx(priced.gradient_staging).epsilon(1e-12));
      CHECK(double(r.back.reduction_scratch) == doctest::Approx(priced.reduction_buffers).epsilon(1e-12));
    }
  }
}

template <class Space>
void check_plans() {
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "p=2x1,g=2x1,os=2x2", "p=1x1,g=2x2,os=2x2"})
    check_plan<Space>(plan);
}
}  // namespace trim_scratch_test

TEST_CASE("trim_scratch gives the pools back and training goes on bit for bit: HostSerial") {
  trim_scratch_test::check_plans<amsp::HostSerial>();
}

TEST_CASE("trim_scratch gives the pools back and training goes on bit for bit: HostAsync") {
  trim_scratch_test::check_plans<amsp::HostAsync>();
}

TEST_CASE("trim_scratch gives the pools back and training goes on bit for bit: a device space") {
  trim_scratch_test::check_plans<amsp::test::SimulatedDevice>();
}
