// Whole-step benchmark of the ShardedOptimizer on the threads backend (8 ranks, a 50M-parameter
// model in 8 equal buckets): for each plan, the engine's step next to the same collectives run
// alone and the same fused update run alone, in the same process. Counters (milliseconds,
// medians over the repetitions): step_ms, collectives_ms, update_ms, and
// ratio = step_ms / (collectives_ms + update_ms), the engine's overhead over its parts
// (target <= 1.15); BM_Step runs the engine in the HostSerial space, BM_Step_async in HostAsync
// (no compute to overlap here: this measures what the worker thread costs). The update alone
// includes the gradient sum of squares (the overflow check), which the engine's step also runs.
// Run:
//   build/default/bench/engine/bench_engine_step --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "step_timing.hpp"
#include "bench_model.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using amsp::bench::median;
using amsp::bench::timed;
constexpr int kBuckets = 8;
constexpr std::int64_t kBucketParams = 6'291'456;  // 8 x 6.3M = 50.3M parameters
constexpr int kRepetitions = 5;

std::vector<amsp::BucketSpec> model() {
  return amsp::bench::equal_buckets(kBuckets, kBucketParams);
}

/// The collectives of one step of `opt`'s schedule (M = 1, one gather per bucket), issued alone
/// on communicators split the same way, with buffers of the same sizes.
struct CollectivesAlone {
  std::optional<Threads> p, g_split, os_split, spread, os_replica, os;
  std::vector<float> full, p_shard, g_shard;

  CollectivesAlone(Threads& world, const amsp::PlanGroups& groups, const amsp::BucketGeometry& geo) {
    const auto make = [&](const amsp::GroupSet& set, std::optional<Threads>& out) {
      if (set.group_size() > 1) out.emplace(world.split(set));
    };
    make(groups.p(), p);
    make(groups.g_split(), g_split);
    make(groups.os_split(), os_split);
    make(groups.spread(), spread);
    make(groups.os_replica(), os_replica);
    make(groups.os(), os);
    full.assign(geo.n, 1.0f);
    p_shard.assign(geo.p.size(), 1.0f);
    g_shard.assign(geo.g.size(), 1.0f);
  }

  void run(const amsp::BucketGeometry& geo) {
    const auto sum = amsp::comm::reduce_op::sum;
    for (int b = 0; b < kBuckets; ++b) {
      if (p) p->all_gather(p_shard.data(), full.data(), geo.p.size());
      if (p) p->reduce_scatter(full.data(), p_shard.data(), geo.p.size(), sum);
      if (g_split) g_split->reduce_scatter(p_shard.data(), g_shard.data(), geo.g.size(), sum);
      if (os_split) os_split->reduce_scatter(g_shard.data(), g_shard.data() + geo.os_in_g, geo.os.size(), sum);
      if (os_replica) os_replica->all_reduce(g_shard.data() + geo.os_in_g, g_shard.data() + geo.os_in_g, geo.os.size(), sum);
    }
    double norm = 1.0;
    if (os) os->all_reduce(&norm, &norm, 1, sum);
    for (int b = 0; b < kBuckets; ++b)
      if (spread) spread->all_gather(p_shard.data() + geo.os_in_p, p_shard.data(), geo.os.size());
  }
};

template <class Space>
void BM_Step(benchmark::State& state, const std::string& plan_name) {
  const amsp::Mesh mesh(4, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  std::vector<double> step_s, comm_s, update_s;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    amsp::EngineOptions options;
    options.zero_grad_buffers = false;  // the user's backward writes every element (see below)
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, float, float, Space> opt(comm, mesh, plan, amsp::optim::AdamW{},
                                                                                 model(), options);
    const amsp::BucketGeometry geo = opt.geometry(0);
    CollectivesAlone alone(comm, opt.groups(), geo);
    // The update alone: the same fused pass over buffers of the OS-shard size.
    std::vector<float> master(geo.os.size(), 1.0f), m(geo.os.size()), v(geo.os.size()), g(geo.os.size(), 1e-3f),
        out(geo.os.size());
    const auto one_step = [&] {
      opt.start_micro_batch(true);
      for (int b = 0; b < opt.bucket_count(); ++b) {
        (void)opt.gather(b);
        std::span<float> grads = opt.grad_buffer(b);
        grads[0] = 1.0f;  // the user's backward would write every element here
        opt.release(b);
        opt.reduce_gradients(b);
      }
      opt.step();
      opt.synchronize();
    };
    one_step();  // warm-up: first-touch of the stores and scratch
    for (int rep = 0; rep < kRepetitions; ++rep) {
      const double t_step = timed(comm, one_step);
      const double t_comm = timed(comm, [&] { alone.run(geo); });
      std::int64_t t = 1;
      const double t_update = timed(comm, [&] {
        double sum_sq = 0.0;  // the overflow check / clipping norm is the optimizer's work too
        for (int b = 0; b < kBuckets; ++b) sum_sq += amsp::optim::sum_of_squares_host(std::span<const float>(g));
        benchmark::DoNotOptimize(sum_sq);
        for (int b = 0; b < kBuckets; ++b) {
          amsp::optim::ShardState<amsp::optim::AdamW> shard{master, {m, v}};
          amsp::optim::update_host(amsp::optim::AdamW{}, shard, std::span<const float>(g), std::span<float>(out),
                                   amsp::optim::StepOptions{t, 1.0f, false});
        }
      });
      if (comm.rank() == 0) {
        step_s.push_back(t_step);
        comm_s.push_back(t_comm);
        update_s.push_back(t_update);
      }
    }
  });
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(step_s[i++ % step_s.size()]);
  const double step = median(step_s), coll = median(comm_s), upd = median(update_s);
  state.counters["step_ms"] = step * 1e3;
  state.counters["collectives_ms"] = coll * 1e3;
  state.counters["update_ms"] = upd * 1e3;
  state.counters["ratio"] = step / (coll + upd);
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "mics(4)", "amsp-7b", "amsp-13b", "amsp-30b"}) {
    benchmark::RegisterBenchmark(("BM_Step/" + std::string(plan)).c_str(), BM_Step<amsp::HostSerial>, std::string(plan))
        ->Iterations(kRepetitions)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Step_async/" + std::string(plan)).c_str(), BM_Step<amsp::HostAsync>,
                                 std::string(plan))
        ->Iterations(kRepetitions)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
