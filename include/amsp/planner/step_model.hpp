#pragma once
// Step time and MFU from compute, communication terms and the optimizer update.
//
// Compute per micro-batch c = executed FLOPs / (peak × efficiency) (workload.hpp); its forward is
// c/3 and its backward 2c/3, or c/4 and 3c/4 under recomputation (the backward re-runs the forward).
// The optimizer update reads and writes 28 bytes per OS-shard parameter (fp32 master, m, v read
// and written, bf16 gradient read, bf16 parameter written) at HBM bandwidth, and overlaps nothing.
//
// Without overlap every collective waits for compute and compute for every collective:
//     T = M·c + Σ terms + update,
// less the backward compute that hides behind a backward gather's stagger where the ranks end it
// one after another (gather_stagger.hpp; StepCompute::stagger, empty unless measured).
// With overlap (the AMSP paper's executor) communication runs beside compute, but only inside the
// window it belongs to (comm_model.hpp's Window): the spread of the previous update beside the first
// micro-batch's forward, the last-micro-batch gradient reduction beside its backward, and the
// per-micro-batch traffic spread evenly over all compute. The step is cut into three windows --
// first forward, the middle, last backward -- each lasting max(its compute, its communication),
// where compute running beside communication is slowed by the cluster's overlap_slowdown κ:
//     T = update + Σ_windows max(compute_w + κ·comm_w, comm_w)  (+ the cluster's seconds per
// collective call, Cluster::overlap_call_s, times the step's calls: StepCompute::overlap_calls).
// Per-micro-batch traffic is apportioned to the windows in proportion to their compute. This
// ignores what no window can hide (the first module's gather before any compute exists, the last
// bucket's reduction after the backward ends) and lets a call hide behind compute that runs
// before the call can start: an optimistic bound on the executor. Where the compute side names
// its units (StepCompute::unit_shares) and the terms are the engine's, the overlapped step is
// instead the engine's schedule run unit by unit (step_pipeline.hpp); the paper's terms keep the
// windows.
//
// MFU = model FLOPs per rank per step / (T × peak), model FLOPs as in workload.hpp.
//
// The compute side can instead come from a measured ComputeModel (compute_model.hpp): a CPU
// workload's seconds per sample and per updated parameter replace FLOPs / (peak × efficiency) and
// the HBM-bound update; the windows and κ are the same (StepCompute, measured_step_compute).
// Where the ranks share CPU cores, contended_step_time prices that compute at the contention the
// step itself implies (compute_model.hpp's CpuContention; docs/planner-check-terms.md, "CPU contention").

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"
#include "amsp/planner/compute_model.hpp"
#include "amsp/planner/gather_stagger.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/planner/step_pipeline.hpp"
#include "amsp/planner/workload.hpp"
#include "amsp/sharding/plan.hpp"

namespace amsp::planner {

struct StepTime {
  double compute = 0;          ///< M·c
  double update = 0;           ///< optimizer update
  double communication = 0;    ///< Σ terms
  double overlapped = 0;       ///< step seconds with overlap
  double serial = 0;           ///< step seconds without overlap
  double mfu = 0;              ///< with overlap
  double mfu_serial = 0;       ///< without overlap
  StepPhases phases;           ///< the overlapped schedule's phases (all 0 where the phase windows price the step)
};

/// Compute seconds of one micro-batch per rank.
[[nodiscard]] inline double micro_batch_compute_seconds(const ModelSpec& m, const Workload& w, const Cluster& c) {
  return executed_flops_per_token(m, w) * static_cast<double>(w.tokens_per_micro_batch()) /
         (c.peak_flops * c.compute_efficiency);
}

/// Seconds of the optimizer update on one OS shard.
[[nodiscard]] inline double update_seconds(const Plan& plan, const ModelSpec& m, const Cluster& c) {
  return 28.0 * static_cast<double>(m.params()) / plan.os.size() / c.hbm_bytes_per_second;
}

/// The compute side of one step, from a FLOP model (GPU) or a measured ComputeModel (CPU).
struct StepCompute {
  double per_micro_batch = 0;           ///< seconds of one micro-batch's forward + backward
  double forward_fraction = 1.0 / 3.0;  ///< its forward's share
  int micro_batches = 1;                ///< M
  double update = 0;                    ///< seconds of the optimizer update
  /// Seconds of waits outside the terms that nothing hides (the example's loss AllReduce): added
  /// to both steps like the update, but blocked time, not compute, for CPU contention.
  double wait = 0;
  /// Each unit's share of the parameters, forward order (parameter_shares): the overlapped step
  /// follows the engine's schedule unit by unit (step_pipeline.hpp). Empty: the phase windows.
  std::vector<double> unit_shares = {};
  bool gather_in_backward = true;  ///< ScheduleOptions::reshard_after_forward
  /// The backward gathers' stagger (backward_stagger): the schedule without overlap hides up to
  /// each unit's spread of its backward compute. Empty: nothing hides.
  BackwardStagger stagger = {};
  double gather_stall = 0;  ///< Cluster::gather_stall_s, for the overlapped step (UnitSchedule)
  double entry_skew = 0;    ///< Cluster::entry_skew_s, for the overlapped step (UnitSchedule)
  /// Seconds the step with overlap adds for its collective calls: Cluster::overlap_call_s × the
  /// calls of the step (calls_per_step, and any the program makes itself).
  double overlap_calls = 0;
};

/// The collective calls of one step: every call of every term, each counted `count` times.
[[nodiscard]] inline double calls_per_step(const std::vector<CommTerm>& terms) {
  double calls = 0;
  for (const CommTerm& t : terms)
    for (const CollectiveCall& c : t.calls) calls += c.count;
  return calls;
}

/// Each term's seconds three ways, in `terms` order: as the schedule without overlap prices it
/// (CommTerm::seconds), every call back to back (`chained`: the overlapped step's queued calls)
/// and every call after an idle gap (`gapped`: the spread's first call there).
struct TermPrices {
  std::vector<double> seconds, chained, gapped;
};

[[nodiscard]] inline TermPrices term_prices(const std::vector<CommTerm>& terms, const Cluster& cluster) {
  TermPrices p;
  for (const CommTerm& t : terms) {
    p.seconds.push_back(t.seconds(cluster));
    p.chained.push_back(t.seconds(cluster, false));
    p.gapped.push_back(t.seconds(cluster, true));
  }
  return p;
}

/// Step time from the compute side and the seconds of each term (in `terms` order, as
/// CommTerm::seconds prices them); κ is the overlap slowdown (cluster.hpp); `chained_seconds`
/// (optional, every call back to back) prices the overlapped step's calls that queue behind
/// another and `gapped_seconds` (optional, every call after an idle gap) the spread's first
/// (pipelined_step_seconds). MFU is left 0 (it needs a FLOP model).
[[nodiscard]] inline StepTime step_time(const StepCompute& compute, double overlap_slowdown,
                                        const std::vector<CommTerm>& terms, const std::vector<double>& term_seconds,
                                        const std::vector<double>* chained_seconds = nullptr,
                                        const std::vector<double>* gapped_seconds = nullptr) {
  const double per_mb = compute.per_micro_batch;
  const double M = compute.micro_batches;
  const double forward = per_mb * compute.forward_fraction;
  const double backward = per_mb - forward;
  double every = 0, first = 0, last = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    switch (terms[i].window) {
      case Window::every_micro_batch: every += term_seconds[i]; break;
      case Window::first_forward: first += term_seconds[i]; break;
      case Window::last_backward: last += term_seconds[i]; break;
    }
  }
  StepTime s;
  s.compute = M * per_mb;
  s.update = compute.update;
  s.communication = every + first + last;
  s.serial = s.compute + s.communication + s.update + compute.wait -
             staggered_backward_seconds(compute.stagger, backward, compute.micro_batches);
  const double share_first = forward / s.compute;
  const double share_last = backward / s.compute;
  const double middle = s.compute - forward - backward;
  if (!compute.unit_shares.empty()) {
    const UnitSchedule units{compute.unit_shares, forward, backward, compute.micro_batches, compute.update,
                             compute.gather_in_backward, compute.gather_stall, compute.entry_skew};
    if (const double t =
            pipelined_step_seconds(units, overlap_slowdown, terms, term_seconds, chained_seconds, gapped_seconds,
                                   &s.phases);
        t >= 0) {
      s.overlapped = t + compute.wait + compute.overlap_calls;
      return s;
    }
  }
  const auto window = [k = overlap_slowdown](double c, double comm) { return std::max(c + k * comm, comm); };
  s.overlapped = s.update + compute.wait + compute.overlap_calls + window(forward, first + every * share_first) +
                 window(middle, every * (1.0 - share_first - share_last)) + window(backward, last + every * share_last);
  return s;
}

/// Step time of `plan` given the seconds of each term (in `terms` order), compute from the FLOP
/// model on the cluster's GPUs; with `units` (the terms' units) the overlapped step follows the
/// engine's schedule unit by unit (step_pipeline.hpp), `gather_in_backward` as in ScheduleOptions,
/// and, where the gathers and scatters run by recursive doubling and halving, the step without
/// overlap hides what the backward gathers' stagger allows (gather_stagger.hpp).
[[nodiscard]] inline StepTime step_time(const Plan& plan, const ModelSpec& m, const Workload& w, const Cluster& c,
                                        const std::vector<CommTerm>& terms, const std::vector<double>& term_seconds,
                                        std::span<const Module> units = {}, bool gather_in_backward = true,
                                        const std::vector<double>* chained_seconds = nullptr,
                                        const std::vector<double>* gapped_seconds = nullptr) {
  const StepCompute compute{micro_batch_compute_seconds(m, w, c),
                            w.recompute ? 0.25 : 1.0 / 3.0,
                            w.micro_batches,
                            update_seconds(plan, m, c),
                            0.0,
                            units.empty() ? std::vector<double>{} : parameter_shares(units),
                            gather_in_backward,
                            units.empty() || c.gather_scatter != GatherScatterAlgorithm::recursive
                                ? BackwardStagger{}
                                : backward_stagger(terms, c, w.micro_batches, gather_in_backward),
                            c.gather_stall_s,
                            c.entry_skew_s,
                            c.overlap_call_s * calls_per_step(terms)};
  StepTime s = step_time(compute, c.overlap_slowdown, terms, term_seconds, chained_seconds, gapped_seconds);
  const double model_flops = model_flops_per_token(m, w) * static_cast<double>(w.tokens_per_rank());
  s.mfu = model_flops / (s.overlapped * c.peak_flops);
  s.mfu_serial = model_flops / (s.serial * c.peak_flops);
  return s;
}

/// The compute side of a step of `plan` from a measured ComputeModel (compute_model.hpp):
/// `samples_per_micro_batch` samples per rank, M micro-batches, `params` parameters in all.
[[nodiscard]] inline StepCompute measured_step_compute(const Plan& plan, const ComputeModel& model,
                                                       double samples_per_micro_batch, int micro_batches, double params) {
  validate(model);
  check(samples_per_micro_batch > 0 && micro_batches >= 1 && params > 0, "planner.compute",
        "need positive samples per micro-batch, micro-batches and parameters, got ", samples_per_micro_batch, ", ",
        micro_batches, ", ", params);
  return {model.seconds_per_sample * samples_per_micro_batch, model.forward_fraction, micro_batches,
          model.update_seconds_per_param * params / plan.os.size() * model.update_turns, 0.0};
}

/// A step whose compute shares CPU cores with the other ranks (CpuContention): each schedule at
/// its own fixed point, and the expected number of ranks computing at once k there.
struct ContendedStepTime {
  StepTime serial;      ///< the step without overlap: read .serial (and its .compute)
  StepTime overlapped;  ///< the step with overlap: read .overlapped (and its .compute)
  double computing_serial = 0, computing_overlapped = 0;
};

namespace detail {
/// The fixed point of one schedule (`total` selects StepTime::serial or ::overlapped): a rank is
/// blocked in communication for the step's exposed part, b = (T − M·c − update) / T (the terms'
/// exposed seconds and StepCompute::wait), so k' = expected_computing_ranks(R, b) ranks compute
/// beside it, where c = seconds_per_sample(k) × samples. The step is consistent where k' = k.
/// h(k) = k'(k) − k is ≥ 0 at k = 1 and ≤ 0 at k = R and continuous (the curve is piecewise
/// linear), so bisection finds a root whatever the curve's shape (a measured curve need not rise
/// everywhere: one rank beside seven spinning waiters may be slower than beside one other).
inline StepTime contended_schedule(StepCompute compute, double samples, const CpuContention& cpu, double kappa,
                                   const std::vector<CommTerm>& terms, const std::vector<double>& term_seconds,
                                   const std::vector<double>* chained_seconds,
                                   const std::vector<double>* gapped_seconds, double StepTime::*total,
                                   double& computing) {
  const auto step_at = [&](double k) {
    compute.per_micro_batch = cpu.seconds_per_sample(k) * samples;
    return step_time(compute, kappa, terms, term_seconds, chained_seconds, gapped_seconds);
  };
  const auto implied = [&](double k) {
    const StepTime s = step_at(k);
    const double t = s.*total;
    return expected_computing_ranks(cpu.ranks, t > 0 ? std::clamp((t - s.compute - s.update) / t, 0.0, 1.0) : 0.0);
  };
  double low = 1.0, high = cpu.ranks;
  if (implied(high) >= high) low = high;  // nobody waits: every rank computes
  while (high - low > 1e-13 * cpu.ranks) {
    const double mid = 0.5 * (low + high);
    (implied(mid) >= mid ? low : high) = mid;
  }
  computing = low;
  return step_at(low);
}
}  // namespace detail

/// Step time when the compute of `samples_per_micro_batch` samples shares CPU cores with the other
/// ranks: `compute` gives M, the forward fraction and the update (its per_micro_batch is replaced);
/// `cpu` the measured seconds per sample at each number of ranks computing at once. Without
/// contention points, step_time(compute, ...) for both schedules (k = 0: not modelled).
[[nodiscard]] inline ContendedStepTime contended_step_time(const StepCompute& compute, double samples_per_micro_batch,
                                                           const CpuContention& cpu, double overlap_slowdown,
                                                           const std::vector<CommTerm>& terms,
                                                           const std::vector<double>& term_seconds,
                                                           const std::vector<double>* chained_seconds = nullptr,
                                                           const std::vector<double>* gapped_seconds = nullptr) {
  if (!cpu.enabled()) {
    const StepTime s = step_time(compute, overlap_slowdown, terms, term_seconds, chained_seconds, gapped_seconds);
    return {s, s, 0.0, 0.0};
  }
  validate(cpu);
  check(samples_per_micro_batch > 0, "planner.contention", "samples per micro-batch must be positive, got ",
        samples_per_micro_batch);
  ContendedStepTime out;
  out.serial = detail::contended_schedule(compute, samples_per_micro_batch, cpu, overlap_slowdown, terms, term_seconds,
                                          chained_seconds, gapped_seconds, &StepTime::serial, out.computing_serial);
  out.overlapped = detail::contended_schedule(compute, samples_per_micro_batch, cpu, overlap_slowdown, terms,
                                              term_seconds, chained_seconds, gapped_seconds, &StepTime::overlapped,
                                              out.computing_overlapped);
  return out;
}

}  // namespace amsp::planner
