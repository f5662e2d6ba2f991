// The planner's memory model (amsp/planner/memory_model.hpp) against the engine's own report
// (ShardedOptimizer::memory()): for every valid plan on 2x2 and 4x1, both optimizer-state
// layouts, bf16 and fp32 parameters and gradients, one and two micro-batches, and gathered
// parameters released after each unit or kept from forward to backward, every part the engine
// holds per rank after two steps equals what the planner prices for the same units. The units
// differ in size, in a transformer's order (embedding, two layers, final norm, lm head), so the
// pools must hold (buffers in use at once) x (largest unit) whatever order sizes come in; every
// blocking reduction is 2 ms late, so the backward outruns its reductions and the gradient
// buffers in flight reach their bound, as the planner assumes. In HostAsync, and with bf16 in the
// simulated device space, whose staging ring holds the bound on the device's side.
#include <doctest/doctest.h>

#include <chrono>
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

namespace {
using Threads = amsp::comm::ThreadsCommunicator;

// Parameters of each unit: multiples of 128, so that no factor of a 4-rank mesh pads a bucket in
// bf16 (32 elements of 64-byte alignment per shard) or fp32 (16).
const std::vector<amsp::planner::Module> kUnits{
    {"embed", -1, 1536}, {"layers.0", 0, 1024}, {"layers.1", 1, 1024}, {"final_norm", -1, 128}, {"lm_head", -1, 1536}};

struct Case {
  amsp::Mesh mesh;
  amsp::Plan plan;
  amsp::OsLayout layout;
  int micro_batches;
  bool keep_gathered;
};

/// The engine's report averaged over the ranks (whole-tensor OS shards differ between ranks; the
/// planner gives their mean), in bytes.
struct Measured {
  double params = 0, grads = 0, optimizer_states = 0, os_gradients = 0, gather = 0, staging = 0, reduction = 0;
};

/// Two steps in `Space`, each unit gathered in the forward with the next one prefetched and
/// released before the one after is (or kept until its backward), and in the backward gathered
/// again, its gradients written and handed in one unit at a time.
template <class ParamT, class GradT, class Space>
Measured run(const Case& c) {
  std::vector<amsp::MemoryReport> reports(static_cast<std::size_t>(c.mesh.world_size()));  // each rank its own
  amsp::comm::run_on_threads(c.mesh.world_size(), [&](Threads& world) {
    amsp::test::SlowReductions comm(world.split(amsp::factor_groups(c.mesh, amsp::Factor{c.mesh.ranks_per_node(), c.mesh.nodes()})),
                                    std::chrono::milliseconds(2));
    std::vector<amsp::BucketSpec> buckets;
    for (const auto& u : kUnits)
      buckets.push_back({u.name, {{u.name + ".w", {u.params}, amsp::dtype_of_v<ParamT>}}});
    amsp::EngineOptions options;
    options.os_layout = c.layout;
    amsp::ShardedOptimizer<amsp::test::SlowReductions, amsp::optim::AdamW, ParamT, GradT, Space> opt(
        comm, c.mesh, c.plan, amsp::optim::AdamW{}, buckets, options);
    const int n = opt.bucket_count();
    for (int step = 0; step < 2; ++step) {
      for (int m = 0; m < c.micro_batches; ++m) {
        opt.start_micro_batch(m + 1 == c.micro_batches);
        for (int b = 0; b < n; ++b) {
          (void)opt.gather(b);
          if (!c.keep_gathered && b > 0) opt.release(b - 1);
          if (b + 1 < n) opt.prefetch(b + 1);
        }
        if (!c.keep_gathered) opt.release(n - 1);
        for (int b = n - 1; b >= 0; --b) {
          if (!c.keep_gathered) (void)opt.gather(b);
          if (!c.keep_gathered && b > 0) opt.prefetch(b - 1);
          std::span<GradT> grads = opt.grad_buffer(b);
          for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = amsp::from_float<GradT>(1e-3f * float(i % 7));
          opt.release(b);
          opt.reduce_gradients(b);
        }
      }
      (void)opt.step();
    }
    opt.synchronize();
    reports[static_cast<std::size_t>(comm.rank())] = opt.memory();
  });
  Measured mean;
  const double share = 1.0 / double(reports.size());
  for (const amsp::MemoryReport& r : reports) {
    CHECK(r.scratch == r.os_gradients + r.gather_scratch + r.gradient_staging + r.reduction_scratch);
    mean.params += share * double(r.params);
    mean.grads += share * double(r.grads);
    mean.optimizer_states += share * double(r.optimizer_states);
    mean.os_gradients += share * double(r.os_gradients);
    mean.gather += share * double(r.gather_scratch);
    mean.staging += share * double(r.gradient_staging);
    mean.reduction += share * double(r.reduction_scratch);
  }
  return mean;
}

template <class ParamT, class GradT, class Space>
void check_case(const Case& c) {
  CAPTURE(to_string(c.mesh));
  CAPTURE(to_string(c.plan));
  CAPTURE(amsp::name_of(c.layout));
  CAPTURE(c.micro_batches);
  CAPTURE(c.keep_gathered);
  CAPTURE(sizeof(GradT));
  amsp::planner::ScheduleOptions o;
  o.os_layout = c.layout;
  o.reshard_after_forward = !c.keep_gathered;
  o.param_wire_bytes = sizeof(ParamT);
  o.grad_wire_bytes = sizeof(GradT);
  const amsp::planner::MemoryBreakdown priced = amsp::planner::engine_memory_per_rank(c.plan, kUnits, c.micro_batches, o);
  const Measured held = run<ParamT, GradT, Space>(c);
  CHECK(held.params == doctest::Approx(priced.params).epsilon(1e-12));
  CHECK(held.grads == doctest::Approx(priced.grads).epsilon(1e-12));
  CHECK(held.optimizer_states == doctest::Approx(priced.optimizer_states).epsilon(1e-12));
  CHECK(held.os_gradients == doctest::Approx(priced.fp32_os_gradients).epsilon(1e-12));
  CHECK(held.gather == doctest::Approx(priced.gathered_params).epsilon(1e-12));
  CHECK(held.staging == doctest::Approx(priced.gradient_staging).epsilon(1e-12));
  CHECK(held.reduction == doctest::Approx(priced.reduction_buffers).epsilon(1e-12));
}

template <class ParamT, class GradT, class Space = amsp::HostAsync>
void check_every_plan(amsp::Mesh mesh) {
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh))
    for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
      if (!amsp::layout_supports(layout, plan)) continue;
      for (int micro_batches : {1, 2})
        for (bool keep : {false, true}) {
          if (keep && plan.p.size() == 1) continue;  // nothing gathered to keep
          check_case<ParamT, GradT, Space>({mesh, plan, layout, micro_batches, keep});
        }
    }
}
}  // namespace

TEST_CASE("planner vs engine: memory per rank of every plan, bf16 parameters and gradients") {
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 1)}) check_every_plan<amsp::bf16, amsp::bf16>(mesh);
}

TEST_CASE("planner vs engine: memory per rank of every plan, fp32 parameters and gradients") {
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 1)}) check_every_plan<float, float>(mesh);
}

// A device space's staging ring holds the same bound (the simulated device: its streams are
// worker threads, its user's stream the caller's thread).
TEST_CASE("planner vs engine: memory per rank of every plan in a device space, bf16") {
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 1)})
    check_every_plan<amsp::bf16, amsp::bf16, amsp::test::SimulatedDevice>(mesh);
}
