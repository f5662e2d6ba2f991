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
//   in_backward  overlap with EngineOptions::update_in_backward (and skip_nonfinite off, which it
//             needs): each bucket's update and spread follow its reduction in the backward
// Each figure is the median of kRepetitions, each the mean of kSteps back-to-back steps (the
// update and spread of step s overlap the forward of step s + 1), timed between barriers in the
// steady state: from right after a step() to right after the kSteps-th next one, so the window
// holds kSteps forwards that each start with the previous step's updates in flight, and none of
// the run's last drain (synchronize() after the last step, once per training run). c comes from
// a first block of comm repetitions; then every repetition times comm, serial and overlap one
// after the other, so that a change of the machine's load falls on all three alike.

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
void train_steps(Engine& opt, double per_bucket_compute, bool overlap, CallerTimes& t, int steps = kSteps) {
  const int n = opt.bucket_count();
  for (int s = 0; s < steps; ++s) {
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
Engine<Comm, Space> make_engine(Comm& comm, const Mesh& mesh, const Plan& plan, bool update_in_backward = false) {
  EngineOptions options;
  options.zero_grad_buffers = false;  // the user's backward overwrites the gradients
  options.update_in_backward = update_in_backward;
  options.skip_nonfinite = !update_in_backward;  // the default, which update_in_backward excludes
  return Engine<Comm, Space>(comm, mesh, plan, optim::AdamW{}, equal_buckets(kBuckets, kBucketParams), options);
}

/// The mean step time (this rank's view, between barriers) of kSteps steps in the steady state:
/// an overlapped run first takes one untimed step, so the timed window starts with that step's
/// updates in flight, as every later step does; the engine is synchronized afterwards.
template <class Comm, class Engine>
double timed_steps(Comm& comm, Engine& opt, double per_bucket_compute, bool overlap) {
  CallerTimes ignored;
  if (overlap) train_steps(opt, per_bucket_compute, true, ignored, 1);
  const double seconds = timed(comm, [&] { train_steps(opt, per_bucket_compute, overlap, ignored); }) / kSteps;
  opt.synchronize();
  return seconds;
}

struct Figures {
  double comm = 0, compute = 0, serial = 0, overlap = 0, in_backward = 0, per_bucket = 0;
  [[nodiscard]] double vs_max() const { return overlap / std::max(compute, comm); }
  [[nodiscard]] double speedup() const { return serial / overlap; }
  [[nodiscard]] double in_backward_vs_max() const { return in_backward / std::max(compute, comm); }
  [[nodiscard]] double in_backward_speedup() const { return serial / in_backward; }
};

/// The three step times of one plan, side by side; collective over `comm` (rank 0's figures:
/// every rank computes for the time rank 0 measured).
template <class Comm>
Figures measure(Comm& comm, const Mesh& mesh, const Plan& plan) {
  auto serial = make_engine<Comm, HostSerial>(comm, mesh, plan);
  auto async = make_engine<Comm, HostAsync>(comm, mesh, plan);
  auto in_backward = make_engine<Comm, HostAsync>(comm, mesh, plan, /*update_in_backward=*/true);
  CallerTimes ignored;
  train_steps(serial, 0.0, false, ignored, 1);  // warm-up: first touch of stores and scratch
  train_steps(async, 0.0, true, ignored, 1);
  async.synchronize();
  train_steps(in_backward, 0.0, true, ignored, 1);
  in_backward.synchronize();
  std::vector<double> first;
  for (int rep = 0; rep < kRepetitions; ++rep) first.push_back(timed_steps(comm, serial, 0.0, false));
  Figures f;
  f.per_bucket = median(first) / (2 * kBuckets);
  comm.broadcast(&f.per_bucket, &f.per_bucket, 1, 0);
  f.compute = 2 * kBuckets * f.per_bucket;
  std::vector<double> comm_times, serial_times, overlap_times, in_backward_times;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    comm_times.push_back(timed_steps(comm, serial, 0.0, false));
    serial_times.push_back(timed_steps(comm, serial, f.per_bucket, false));
    overlap_times.push_back(timed_steps(comm, async, f.per_bucket, true));
    in_backward_times.push_back(timed_steps(comm, in_backward, f.per_bucket, true));
  }
  f.comm = median(comm_times);
  f.serial = median(serial_times);
  f.overlap = median(overlap_times);
  f.in_backward = median(in_backward_times);
  return f;
}

}  // namespace amsp::bench::overlap
