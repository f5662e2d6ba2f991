#pragma once
// The host overlap benchmark's training step, shared by the threads and MPI benchmarks and the
// breakdown program (docs: bench/README.md, "Engine overlap"). 16 fp32 buckets of 1M parameters,
// AdamW, M = 1; each step runs a forward and a backward over the buckets with synthetic
// per-bucket compute: a sleep, i.e. an accelerator busy while the host's cores stay free for the
// collectives (on a 2-core VM, compute that spins would compete with the backends' copies for
// the same cores, which is not what a training step on GPUs or a many-core host looks like).
//   comm      a step without compute, everything serialized: the step's non-compute part
//   compute   2 x 16 x c, with c = comm / 32: compute as long as the communication
//   serial    the step with compute, serialized: HostSerial, no prefetch, synchronize() after
//             each reduce_gradients and after step() (every collective blocks the caller)
//   overlap   the same step in HostAsync with prefetch(b +- 1): reductions, the OS stage, the
//             spread and the AllGathers run on the engine's streams during the compute
// Each figure is the median of kRepetitions, each the mean of kSteps back-to-back steps (the
// update and spread of step s overlap the forward of step s + 1), timed between barriers in the
// steady state: from right after a step() to right after the kSteps-th next one, so the window
// holds kSteps forwards that each start with the previous step's updates in flight, and none of
// the run's last drain (synchronize() after the last step, once per training run).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "amsp/engine/sharded_optimizer.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "bench_model.hpp"
#include "step_timing.hpp"

namespace amsp::bench::overlap {

inline constexpr int kBuckets = 16;
inline constexpr std::int64_t kBucketParams = 1 << 20;
inline constexpr int kRepetitions = 5;
inline constexpr int kSteps = 3;
/// The plans the overlap target names: DDP, the ZeRO stages and the AMSP plans of a 2x2 mesh.
inline constexpr const char* kPlans[] = {"ddp", "zero1", "zero2", "zero3", "amsp-7b", "amsp-13b", "amsp-30b"};

/// Where the caller's time went (seconds, summed over the steps it was passed to).
struct CallerTimes {
  double compute = 0;         // the synthetic compute (sleeps)
  double forward_wait = 0;    // gather(b) and release(b) in the forward
  double backward_wait = 0;   // gather, grad_buffer, release, reduce_gradients in the backward
  double step_call = 0;       // step() (waits for every reduction chain and the norm)
  double synchronize = 0;     // synchronize() (serialized schedule)
};

/// The accelerator computing for `seconds` (see the file comment).
inline void compute(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

/// Adds the seconds `body` takes to `into`.
template <class F>
void add_time(double& into, F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  into += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// kSteps training steps; `overlap`: prefetch the next bucket and leave the update and spread
/// running into the next forward (also after the last step: the caller synchronizes), else wait
/// for everything where it is issued.
template <class Engine>
void train_steps(Engine& opt, double per_bucket_compute, bool overlap, CallerTimes& t) {
  const int n = opt.bucket_count();
  for (int s = 0; s < kSteps; ++s) {
    opt.start_micro_batch(true);
    for (int b = 0; b < n; ++b) {
      add_time(t.forward_wait, [&] {
        (void)opt.gather(b);
        if (overlap && b + 1 < n) opt.prefetch(b + 1);
      });
      add_time(t.compute, [&] { compute(per_bucket_compute); });
      add_time(t.forward_wait, [&] { opt.release(b); });
    }
    for (int b = n - 1; b >= 0; --b) {
      add_time(t.backward_wait, [&] {
        (void)opt.gather(b);  // ZeRO-3 and AMSP plans with sharded P gather again for the backward
        if (overlap && b > 0) opt.prefetch(b - 1);
      });
      add_time(t.compute, [&] { compute(per_bucket_compute); });
      add_time(t.backward_wait, [&] {
        std::span<float> grads = opt.grad_buffer(b);
        grads[0] = 1e-3f;  // the backward's gradients (the rest keeps its earlier values)
        opt.release(b);
        opt.reduce_gradients(b);
      });
      if (!overlap) add_time(t.synchronize, [&] { opt.synchronize(); });
    }
    add_time(t.step_call, [&] { (void)opt.step(); });
    if (!overlap) add_time(t.synchronize, [&] { opt.synchronize(); });
  }
}

template <class Comm, class Space>
using Engine = ShardedOptimizer<Comm, optim::AdamW, float, float, Space>;

template <class Comm, class Space>
Engine<Comm, Space> make_engine(Comm& comm, const Mesh& mesh, const Plan& plan) {
  EngineOptions options;
  options.zero_grad_buffers = false;  // the user's backward overwrites the gradients
  return Engine<Comm, Space>(comm, mesh, plan, optim::AdamW{}, equal_buckets(kBuckets, kBucketParams), options);
}

/// Median over repetitions of the mean step time (this rank's view, between barriers) of a fresh
/// engine in Space.
template <class Space, class Comm>
double step_seconds(Comm& comm, const Mesh& mesh, const Plan& plan, double per_bucket_compute, bool overlap) {
  auto opt = make_engine<Comm, Space>(comm, mesh, plan);
  CallerTimes ignored;
  train_steps(opt, 0.0, overlap, ignored);  // warm-up: first touch of stores and scratch
  std::vector<double> times;
  for (int rep = 0; rep < kRepetitions; ++rep)
    times.push_back(timed(comm, [&] { train_steps(opt, per_bucket_compute, overlap, ignored); }) / kSteps);
  opt.synchronize();
  return median(times);
}

struct Figures {
  double comm = 0, compute = 0, serial = 0, overlap = 0, per_bucket = 0;
  [[nodiscard]] double vs_max() const { return overlap / std::max(compute, comm); }
  [[nodiscard]] double speedup() const { return serial / overlap; }
};

/// The three step times of one plan, side by side; collective over `comm` (rank 0's figures:
/// every rank computes for the time rank 0 measured).
template <class Comm>
Figures measure(Comm& comm, const Mesh& mesh, const Plan& plan) {
  Figures f;
  f.comm = step_seconds<HostSerial>(comm, mesh, plan, 0.0, false);
  f.per_bucket = f.comm / (2 * kBuckets);
  comm.broadcast(&f.per_bucket, &f.per_bucket, 1, 0);
  f.compute = 2 * kBuckets * f.per_bucket;
  f.serial = step_seconds<HostSerial>(comm, mesh, plan, f.per_bucket, false);
  f.overlap = step_seconds<HostAsync>(comm, mesh, plan, f.per_bucket, true);
  return f;
}

}  // namespace amsp::bench::overlap
