// Overlap of the engine's communication with the user's compute, threads backend (4 ranks on a
// 2x2 mesh, 16 fp32 buckets of 1M parameters, AdamW, M = 1). Each step runs a forward and a
// backward over the buckets with synthetic per-bucket compute: a sleep, i.e. an accelerator busy
// while the host's cores stay free for the collectives (on this 2-core VM, compute that spins
// would compete with the threads backend's copies for the same cores, which is not what a
// training step on GPUs or a many-core host looks like). Per plan:
//   comm_ms     a step without compute, everything serialized: the step's non-compute part
//   compute_ms  2 x 16 x c, with c = comm_ms / 32: compute as long as the communication
//   serial_ms   the step with compute, serialized: HostSerial, no prefetch, synchronize() after
//               step() (every collective blocks the caller)
//   overlap_ms  the same step in HostAsync with prefetch(b +- 1): reductions, the OS stage, the
//               spread and the AllGathers run on the engine's worker thread during the compute
//   vs_max      overlap_ms / max(compute_ms, comm_ms)   target <= 1.15
//   speedup     serial_ms / overlap_ms                   target >= 1.25
// Medians of kRepetitions, each the mean of kSteps back-to-back steps (the spread of step s
// overlaps the forward of step s + 1). Run:
//   build/default/bench/engine/bench_engine_overlap --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "step_timing.hpp"
#include "bench_model.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
constexpr int kBuckets = 16;
constexpr std::int64_t kBucketParams = 1 << 20;
constexpr int kRepetitions = 5;
constexpr int kSteps = 3;

std::vector<amsp::BucketSpec> model() {
  return amsp::bench::equal_buckets(kBuckets, kBucketParams);
}

/// The accelerator computing for `seconds` (see the file comment).
void compute(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

/// kSteps training steps of the 16-bucket model; `overlap`: prefetch the next bucket and leave
/// the spread running into the next forward, else wait for everything where it is issued.
template <class Engine>
void train_steps(Engine& opt, double per_bucket_compute, bool overlap) {
  const int n = opt.bucket_count();
  for (int s = 0; s < kSteps; ++s) {
    opt.start_micro_batch(true);
    for (int b = 0; b < n; ++b) {
      (void)opt.gather(b);
      if (overlap && b + 1 < n) opt.prefetch(b + 1);
      compute(per_bucket_compute);
      opt.release(b);
    }
    for (int b = n - 1; b >= 0; --b) {
      (void)opt.gather(b);  // ZeRO-3 and AMSP plans with sharded P gather again for the backward
      if (overlap && b > 0) opt.prefetch(b - 1);
      compute(per_bucket_compute);
      std::span<float> grads = opt.grad_buffer(b);
      grads[0] = 1e-3f;  // the backward's gradients (the rest keeps its earlier values)
      opt.release(b);
      opt.reduce_gradients(b);
      if (!overlap) opt.synchronize();
    }
    opt.step();
    if (!overlap) opt.synchronize();
  }
  opt.synchronize();
}

/// Median over repetitions of the mean step time (rank 0's view) of a fresh engine in Space.
template <class Space>
double step_seconds(Threads& comm, const amsp::Mesh& mesh, const amsp::Plan& plan, double per_bucket_compute,
                    bool overlap) {
  amsp::EngineOptions options;
  options.zero_grad_buffers = false;  // the user's backward overwrites the gradients
  amsp::ShardedOptimizer<Threads, amsp::optim::AdamW, float, float, Space> opt(comm, mesh, plan, amsp::optim::AdamW{},
                                                                               model(), options);
  train_steps(opt, 0.0, overlap);  // warm-up: first touch of stores and scratch
  std::vector<double> times;
  for (int rep = 0; rep < kRepetitions; ++rep)
    times.push_back(amsp::bench::timed(comm, [&] { train_steps(opt, per_bucket_compute, overlap); }) / kSteps);
  return amsp::bench::median(times);
}

void BM_Overlap(benchmark::State& state, const std::string& plan_name) {
  const amsp::Mesh mesh(2, 2);
  const amsp::Plan plan = amsp::parse_plan(plan_name, mesh);
  double comm_s = 0, serial_s = 0, overlap_s = 0, per_bucket = 0;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    const double t_comm = step_seconds<amsp::HostSerial>(comm, mesh, plan, 0.0, false);
    // Every rank computes for the same time: rank 0's measurement decides.
    double c = t_comm / (2 * kBuckets);
    comm.broadcast(&c, &c, 1, 0);
    const double t_serial = step_seconds<amsp::HostSerial>(comm, mesh, plan, c, false);
    const double t_overlap = step_seconds<amsp::HostAsync>(comm, mesh, plan, c, true);
    if (comm.rank() == 0) {
      comm_s = t_comm;
      per_bucket = c;
      serial_s = t_serial;
      overlap_s = t_overlap;
    }
  });
  for (auto _ : state) state.SetIterationTime(overlap_s);
  const double compute_s = 2 * kBuckets * per_bucket;
  state.counters["comm_ms"] = comm_s * 1e3;
  state.counters["compute_ms"] = compute_s * 1e3;
  state.counters["serial_ms"] = serial_s * 1e3;
  state.counters["overlap_ms"] = overlap_s * 1e3;
  state.counters["vs_max"] = overlap_s / std::max(compute_s, comm_s);
  state.counters["speedup"] = serial_s / overlap_s;
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "amsp-7b", "amsp-13b", "amsp-30b"})
    benchmark::RegisterBenchmark(("BM_Overlap/" + std::string(plan)).c_str(), BM_Overlap, std::string(plan))
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
