// The cost of EngineOptions::check_collectives on a whole step: 8 thread ranks (mesh 4x2), 8
// buckets, M = 1, for a few plans and two bucket sizes. Each repetition times one step with the
// check off and one with it on, alternating in the same world, so that both see the same machine
// load. Counters (medians, milliseconds): params_M, off_ms, on_ms
// and ratio = on_ms / off_ms. Run:
//   build/default/bench/reliability/bench_consistency_check --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "../engine/bench_model.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using Engine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;
using Clock = std::chrono::steady_clock;
constexpr int kBuckets = 8;
constexpr int kRepetitions = 7;

std::vector<amsp::BucketSpec> model(std::int64_t bucket_params) {
  return amsp::bench::equal_buckets(kBuckets, bucket_params);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One step of `opt` between two barriers; rank 0's wall time in seconds.
double timed_step(Threads& comm, Engine& opt) {
  comm.barrier();
  const auto start = Clock::now();
  opt.start_micro_batch(true);
  for (int b = 0; b < opt.bucket_count(); ++b) {
    (void)opt.gather(b);
    std::span<float> grads = opt.grad_buffer(b);
    grads[0] = 1.0f;
    opt.release(b);
    opt.reduce_gradients(b);
  }
  opt.step();
  opt.synchronize();
  comm.barrier();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void BM_CheckedStep(benchmark::State& state, const std::string& plan_name, std::int64_t bucket_params) {
  const amsp::Mesh mesh(4, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  std::vector<double> off_s, on_s;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    amsp::EngineOptions checked;
    checked.check_collectives = true;
    Engine off(comm, mesh, plan, amsp::optim::AdamW{}, model(bucket_params));
    Engine on(comm, mesh, plan, amsp::optim::AdamW{}, model(bucket_params), checked);
    (void)timed_step(comm, off);  // warm-up: first touch of the stores and scratch
    (void)timed_step(comm, on);
    for (int rep = 0; rep < kRepetitions; ++rep) {
      const double t_off = timed_step(comm, off);
      const double t_on = timed_step(comm, on);
      if (comm.rank() == 0) {
        off_s.push_back(t_off);
        on_s.push_back(t_on);
      }
    }
  });
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(on_s[i++ % on_s.size()]);
  state.counters["params_M"] = static_cast<double>(bucket_params * kBuckets) / 1e6;
  state.counters["off_ms"] = median(off_s) * 1e3;
  state.counters["on_ms"] = median(on_s) * 1e3;
  state.counters["ratio"] = median(on_s) / median(off_s);
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* plan : {"ddp", "zero3", "amsp-13b"})
    for (std::int64_t params : {std::int64_t{16'384}, std::int64_t{1'048'576}})
      benchmark::RegisterBenchmark(("BM_CheckedStep/" + std::string(plan) + "/" + std::to_string(params)).c_str(),
                                   BM_CheckedStep, std::string(plan), params)
          ->Iterations(kRepetitions)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
