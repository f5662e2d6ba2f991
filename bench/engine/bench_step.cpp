// Whole-step benchmark of the ShardedOptimizer on the threads backend (8 ranks, a 50M-parameter
// model in 8 equal buckets): for each plan, the engine's step next to its parts run alone in the
// same process and rank threads: the same collectives on communicators split the same way, and
// the same fused update (with the gradient sum of squares the step also runs). Counters
// (milliseconds, medians over the repetitions): step_ms, collectives_ms, update_ms, and
// ratio = step_ms / (collectives_ms + update_ms), the engine's overhead over its parts
// (target <= 1.15); cpu_ratio, the same ratio of process CPU time (all rank and worker threads),
// which load from other processes changes far less than the wall time; ratio_reused, the ratio
// over parts that reuse one bucket's buffers (how this benchmark measured before 2026-12-03:
// see below); scratch_MiB, rank 0's scratch after the steps (ShardedOptimizer::memory(): with
// the user's gradients written at once, HostAsync's gradient buffers are as many as
// EngineOptions::gradient_buffers_in_flight allows). BM_Step runs the engine in the HostSerial
// space, BM_Step_async in HostAsync (no compute to overlap here: this measures what the worker
// thread costs).
//
// The parts work on buffers laid out as the step's: a P shard, a G shard and optimizer states
// of their own per bucket (the step's stores), one full gradient and one gather buffer shared by
// the buckets (the step's pooled scratch, reused since buckets are handed one at a time). Parts
// that reuse one bucket's stores for all 8 buckets keep them in the host's last-level cache (260
// MiB here) while the step streams 8 buckets' stores from memory: that made the parts up to ~20 %
// cheaper than the work the step must do (bench/README.md, "Engine step", 2026-12-03 profile).
// They cycle through fewer than 8 sets of stores when fewer already pass more than twice the
// last-level cache between two uses of one set (ddp: 8 sets would add the whole model's states
// per rank again, ~8 GB, to the engine's own).
// Run:
//   build/default/bench/engine/bench_engine_step --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "step_timing.hpp"
#include "bench_model.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using amsp::bench::median;
using amsp::bench::timed_with_cpu;
constexpr int kBuckets = 8;
constexpr std::int64_t kBucketParams = 6'291'456;  // 8 x 6.3M = 50.3M parameters
constexpr int kRepetitions = 5;

std::vector<amsp::BucketSpec> model() {
  return amsp::bench::equal_buckets(kBuckets, kBucketParams);
}

/// One bucket's stores, as the engine holds them: the P shard, the G shard (fp32 gradients) and
/// the AdamW states of the OS shard.
struct BucketStores {
  std::vector<float> p, g, master, m, v;
  explicit BucketStores(const amsp::BucketGeometry& geo)
      : p(geo.p.size(), 1.0f), g(geo.g.size(), 1e-3f), master(geo.os.size(), 1.0f), m(geo.os.size(), 0.0f),
        v(geo.os.size(), 0.0f) {}
};

/// The parts of one step of `opt`'s schedule (M = 1, one gather per bucket), each issued alone:
/// the collectives on communicators split the same way, with buffers of the same sizes, in the
/// order the engine's reduction chain issues them; the update as the engine's host space runs it.
struct PartsAlone {
  std::optional<Threads> p, g_split, os_split, spread, os_replica, os;
  std::vector<float> grad_full, gather_full, p_scratch;  // shared by the buckets, as pooled scratch
  std::vector<BucketStores> stores;                      // `copies` sets, bucket b uses b % copies

  PartsAlone(Threads& world, const amsp::PlanGroups& groups, const amsp::BucketGeometry& geo, int copies)
      : stores(static_cast<std::size_t>(copies), BucketStores(geo)) {
    const auto make = [&](const amsp::GroupSet& set, std::optional<Threads>& out) {
      if (set.group_size() > 1) out.emplace(world.split(set));
    };
    make(groups.p(), p);
    make(groups.g_split(), g_split);
    make(groups.os_split(), os_split);
    make(groups.spread(), spread);
    make(groups.os_replica(), os_replica);
    make(groups.os(), os);
    if (p || g_split) grad_full.assign(geo.n, 1.0f);  // else the user writes the G store itself
    if (p) gather_full.assign(geo.n, 1.0f);
    if (p && g_split) p_scratch.assign(geo.p.size(), 1.0f);
  }

  BucketStores& of(int b) { return stores[static_cast<std::size_t>(b) % stores.size()]; }

  void collectives(const amsp::BucketGeometry& geo) {
    const auto sum = amsp::comm::reduce_op::sum;
    for (int b = 0; b < kBuckets; ++b) {
      BucketStores& s = of(b);
      if (p) p->all_gather(s.p.data(), gather_full.data(), geo.p.size());
      if (p && g_split) {
        p->reduce_scatter(grad_full.data(), p_scratch.data(), geo.p.size(), sum);
        g_split->reduce_scatter(p_scratch.data(), s.g.data(), geo.g.size(), sum);
      } else if (p) {
        p->reduce_scatter(grad_full.data(), s.g.data(), geo.g.size(), sum);
      } else if (g_split) {
        g_split->reduce_scatter(grad_full.data(), s.g.data(), geo.g.size(), sum);
      }
      float* os_grads = s.g.data() + geo.os_in_g;
      if (os_split) os_split->reduce_scatter(s.g.data(), os_grads, geo.os.size(), sum);
      if (os_replica) os_replica->all_reduce(os_grads, os_grads, geo.os.size(), sum);
    }
    double norm = 1.0;
    if (os) os->all_reduce(&norm, &norm, 1, sum);
    for (int b = 0; b < kBuckets; ++b)
      if (spread) spread->all_gather(of(b).p.data() + geo.os_in_p, of(b).p.data(), geo.os.size());
  }

  /// The fused update of every bucket's OS shard (gradients from the G shard, parameters into the
  /// P shard), after the gradient sum of squares (the overflow check / clipping norm).
  void update(const amsp::BucketGeometry& geo, std::int64_t t) {
    double sum_sq = 0.0;
    for (int b = 0; b < kBuckets; ++b)
      sum_sq += amsp::optim::sum_of_squares_host(std::span<const float>(of(b).g.data() + geo.os_in_g, geo.os.size()));
    benchmark::DoNotOptimize(sum_sq);
    for (int b = 0; b < kBuckets; ++b) {
      BucketStores& s = of(b);
      amsp::optim::ShardState<amsp::optim::AdamW> shard{s.master, {s.m, s.v}};
      amsp::optim::update_host(amsp::optim::AdamW{}, shard,
                               std::span<const float>(s.g.data() + geo.os_in_g, geo.os.size()),
                               std::span<float>(s.p.data() + geo.os_in_p, geo.os.size()),
                               amsp::optim::StepOptions{t, 1.0f, false});
    }
  }
};

/// Sets of bucket stores the parts cycle through: as many as the step has buckets, or the fewest
/// that put more than twice the last-level cache between two uses of one set.
int store_sets(const amsp::BucketGeometry& geo, int world_size) {
  long cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (cache <= 0) cache = 256L << 20;
  const double one_set = double(world_size) * double(geo.p.size() + geo.g.size() + 3 * geo.os.size()) * sizeof(float);
  int sets = 1;
  while (sets < kBuckets && (sets - 1) * one_set < 2.0 * double(cache)) ++sets;
  return sets;
}

template <class Space>
void BM_Step(benchmark::State& state, const std::string& plan_name) {
  const amsp::Mesh mesh(4, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  std::vector<double> step_s, comm_s, update_s, reused_s, step_cpu, parts_cpu;
  double scratch_mib = 0;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    amsp::EngineOptions options;
    options.zero_grad_buffers = false;  // the user's backward writes every element (see below)
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, float, float, Space> opt(comm, mesh, plan, amsp::optim::AdamW{},
                                                                                 model(), options);
    const amsp::BucketGeometry geo = opt.geometry(0);
    PartsAlone alone(comm, opt.groups(), geo, store_sets(geo, comm.size()));  // the step's footprint
    PartsAlone reused(comm, opt.groups(), geo, 1);        // one bucket's buffers for all 8
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
    one_step();  // warm-up: first-touch of the stores and scratch (the parts' are touched when filled)
    for (int rep = 0; rep < kRepetitions; ++rep) {
      const auto step = timed_with_cpu(comm, one_step);
      const auto coll = timed_with_cpu(comm, [&] { alone.collectives(geo); });
      const auto upd = timed_with_cpu(comm, [&] { alone.update(geo, rep + 1); });
      const auto coll_reused = timed_with_cpu(comm, [&] { reused.collectives(geo); });
      const auto upd_reused = timed_with_cpu(comm, [&] { reused.update(geo, rep + 1); });
      if (comm.rank() == 0) {
        step_s.push_back(step.wall);
        comm_s.push_back(coll.wall);
        update_s.push_back(upd.wall);
        reused_s.push_back(coll_reused.wall + upd_reused.wall);
        step_cpu.push_back(step.cpu);
        parts_cpu.push_back(coll.cpu + upd.cpu);
      }
    }
    if (comm.rank() == 0) scratch_mib = double(opt.memory().scratch) / double(1 << 20);
  });
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(step_s[i++ % step_s.size()]);
  const double step = median(step_s), coll = median(comm_s), upd = median(update_s);
  state.counters["step_ms"] = step * 1e3;
  state.counters["collectives_ms"] = coll * 1e3;
  state.counters["update_ms"] = upd * 1e3;
  state.counters["ratio"] = step / (coll + upd);
  state.counters["cpu_ratio"] = median(step_cpu) / median(parts_cpu);
  state.counters["ratio_reused"] = step / median(reused_s);
  state.counters["scratch_MiB"] = scratch_mib;
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
