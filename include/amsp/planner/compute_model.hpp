#pragma once
// A measured compute rate, for workloads the FLOP model of workload.hpp does not describe: a CPU
// trainer (the example on the emulated cluster, docs/cluster.md) or any model that is not a
// LLaMA-style decoder. It replaces the GPU's peak × efficiency with seconds measured by a
// calibration run of the workload itself, on the machine and under the load it will train with:
//
//   compute of one micro-batch on one rank  c = seconds_per_sample × samples per micro-batch
//   its forward                                 forward_fraction × c
//   optimizer update of one OS shard            update_seconds_per_param × Φ / s_os × update_turns
//
// A "sample" is the workload's unit of batch: one sequence for a transformer, one example for
// the char-level MLP. The fit: steps of a run without communication (one rank, or every rank
// alone) take t = seconds_per_sample × samples_per_rank + update of all Φ parameters; two or more
// runs with different batch sizes give both by least squares (fit_compute_model).
//
// CPU contention (CpuContention): where R ranks share fewer cores than ranks (the emulated cluster:
// 8 ranks on 2 cores), a rank's compute is slower the more of the others compute beside it, and
// faster while they sit blocked in communication. The calibration measures seconds per sample with
// k of the R ranks computing at once and the others blocked in a barrier, for a few k; the step
// model (step_model.hpp, contended_step_time) prices a step's compute at the number of ranks
// expected to compute beside it (expected_computing_ranks). Off (no points) on GPUs, where compute
// does not share cores.
//
// The update takes turns (update_turns): it is the host's own arithmetic, and where k ranks share a
// core their updates, all ready at the step's last reduction, run one after another; the step
// waits for the last of them, k updates after the first starts (traced on the emulated cluster, 8
// ranks on 2 cores: DDP's ranks leave the loss AllReduce one update apart, 0.6-0.8 ms after the
// first, where the measured update is 0.16-0.20 ms; docs/planner-check-update-turns.md). 1 on
// GPUs, where each rank updates on its own device.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::planner {

struct ComputeModel {
  double seconds_per_sample = 0;        ///< forward + backward of one sample on one rank
  double forward_fraction = 1.0 / 3.0;  ///< share of the forward (1/3: backward = 2 × forward)
  double update_seconds_per_param = 0;  ///< optimizer update per parameter of the rank's OS shard
  double update_turns = 1;              ///< ranks whose updates run one after another on a core
};

/// Fails with rule planner.compute unless the rates are non-negative, finite, the sample rate
/// positive, the forward fraction in (0, 1) and the update's turns at least 1.
inline void validate(const ComputeModel& m) {
  check(std::isfinite(m.seconds_per_sample) && m.seconds_per_sample > 0, "planner.compute",
        "seconds per sample must be positive, got ", m.seconds_per_sample);
  check(std::isfinite(m.update_seconds_per_param) && m.update_seconds_per_param >= 0, "planner.compute",
        "update seconds per parameter must be non-negative, got ", m.update_seconds_per_param);
  check(m.forward_fraction > 0 && m.forward_fraction < 1, "planner.compute", "forward fraction must lie in (0, 1), got ",
        m.forward_fraction);
  check(std::isfinite(m.update_turns) && m.update_turns >= 1, "planner.compute",
        "the update's turns (ranks updating one after another on a core) must be at least 1, got ", m.update_turns);
}

/// One calibration measurement: a step of `samples` samples on one rank, without communication,
/// updating all `params` parameters, took `seconds`.
struct CalibrationStep {
  double samples = 0;
  double seconds = 0;
};

/// Least-squares line seconds = a × samples + b through the measurements; a is seconds_per_sample,
/// b / params the update rate (clamped at 0: a negative intercept is noise, not a faster update).
/// Needs at least two distinct sample counts (rule planner.compute).
[[nodiscard]] inline ComputeModel fit_compute_model(std::span<const CalibrationStep> steps, double params,
                                                    double forward_fraction = 1.0 / 3.0) {
  check(params > 0, "planner.compute", "parameter count must be positive, got ", params);
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CalibrationStep& s : steps) {
    check(s.samples > 0 && s.seconds > 0 && std::isfinite(s.seconds), "planner.compute",
          "calibration steps need positive samples and seconds, got ", s.samples, " samples in ", s.seconds, " s");
    n += 1;
    sx += s.samples;
    sy += s.seconds;
    sxx += s.samples * s.samples;
    sxy += s.samples * s.seconds;
  }
  const double spread = n * sxx - sx * sx;
  check(n >= 2 && spread > 1e-12 * sxx * n, "planner.compute",
        "calibration needs steps of at least two different sample counts, got ", n, " steps");
  const double slope = (n * sxy - sx * sy) / spread;
  const double intercept = (sy - slope * sx) / n;
  ComputeModel m;
  m.seconds_per_sample = slope;
  m.forward_fraction = forward_fraction;
  m.update_seconds_per_param = intercept > 0 ? intercept / params : 0.0;
  validate(m);
  return m;
}

/// Seconds per sample measured with `computing_ranks` of the machine's ranks computing at once.
struct ContentionPoint {
  double computing_ranks = 0;
  double seconds_per_sample = 0;
};

/// Compute under CPU contention: `ranks` ranks share the cores; `points` (at least two distinct
/// computing_ranks in [1, ranks]) measured by the calibration. Empty points = off (GPUs).
struct CpuContention {
  int ranks = 0;
  std::vector<ContentionPoint> points;

  [[nodiscard]] bool enabled() const { return !points.empty(); }

  /// Seconds per sample with k ranks computing at once: linear between the measured points,
  /// the nearest point's value outside them (no extrapolation beyond what was measured).
  [[nodiscard]] double seconds_per_sample(double k) const {
    check(enabled(), "planner.contention", "no contention points measured");
    std::vector<ContentionPoint> p = points;
    std::sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.computing_ranks < b.computing_ranks; });
    if (k <= p.front().computing_ranks) return p.front().seconds_per_sample;
    for (std::size_t i = 1; i < p.size(); ++i)
      if (k <= p[i].computing_ranks) {
        const double t = (k - p[i - 1].computing_ranks) / (p[i].computing_ranks - p[i - 1].computing_ranks);
        return p[i - 1].seconds_per_sample + t * (p[i].seconds_per_sample - p[i - 1].seconds_per_sample);
      }
    return p.back().seconds_per_sample;
  }
};

/// Fails with rule planner.contention unless enabled points are finite and positive, lie in
/// [1, ranks] and have at least two distinct computing_ranks.
inline void validate(const CpuContention& c) {
  if (!c.enabled()) return;
  check(c.ranks >= 1, "planner.contention", "ranks sharing the cores must be at least 1, got ", c.ranks);
  double low = c.ranks + 1.0, high = 0;
  for (const ContentionPoint& p : c.points) {
    check(p.computing_ranks >= 1 && p.computing_ranks <= c.ranks, "planner.contention", "computing ranks ",
          p.computing_ranks, " outside [1, ", c.ranks, "]");
    check(std::isfinite(p.seconds_per_sample) && p.seconds_per_sample > 0, "planner.contention",
          "seconds per sample must be positive, got ", p.seconds_per_sample);
    low = std::min(low, p.computing_ranks);
    high = std::max(high, p.computing_ranks);
  }
  check(high > low, "planner.contention", "contention needs points at two different numbers of computing ranks");
}

/// The number of ranks computing while one rank computes, when each of the other ranks - 1 is
/// blocked in communication for the fraction `blocked` of the step, independently of the others:
/// the rank itself plus (ranks - 1)(1 - blocked) on average.
[[nodiscard]] inline double expected_computing_ranks(int ranks, double blocked) {
  check(ranks >= 1 && blocked >= 0 && blocked <= 1, "planner.contention", "need ranks >= 1 and a blocked fraction in [0, 1], got ",
        ranks, " and ", blocked);
  return 1.0 + (ranks - 1) * (1.0 - blocked);
}

}  // namespace amsp::planner
