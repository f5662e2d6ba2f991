#pragma once
// A measured compute rate, for workloads the FLOP model of workload.hpp does not describe: a CPU
// trainer (the example on the emulated cluster, docs/cluster.md) or any model that is not a
// LLaMA-style decoder. It replaces the GPU's peak × efficiency with seconds measured by a
// calibration run of the workload itself, on the machine and under the load it will train with:
//
//   compute of one micro-batch on one rank  c = seconds_per_sample × samples per micro-batch
//   its forward                                 forward_fraction × c
//   optimizer update of one OS shard            update_seconds_per_param × Φ / s_os
//
// A "sample" is the workload's unit of batch: one sequence for a transformer, one example for
// the char-level MLP. The fit: steps of a run without communication (one rank, or every rank
// alone) take t = seconds_per_sample × samples_per_rank + update of all Φ parameters; two or more
// runs with different batch sizes give both by least squares (fit_compute_model).

#include <cmath>
#include <cstddef>
#include <span>

#include "amsp/core/error.hpp"

namespace amsp::planner {

struct ComputeModel {
  double seconds_per_sample = 0;        ///< forward + backward of one sample on one rank
  double forward_fraction = 1.0 / 3.0;  ///< share of the forward (1/3: backward = 2 × forward)
  double update_seconds_per_param = 0;  ///< optimizer update per parameter of the rank's OS shard
};

/// Fails with rule planner.compute unless the rates are non-negative, finite, the sample rate
/// positive and the forward fraction in (0, 1).
inline void validate(const ComputeModel& m) {
  check(std::isfinite(m.seconds_per_sample) && m.seconds_per_sample > 0, "planner.compute",
        "seconds per sample must be positive, got ", m.seconds_per_sample);
  check(std::isfinite(m.update_seconds_per_param) && m.update_seconds_per_param >= 0, "planner.compute",
        "update seconds per parameter must be non-negative, got ", m.update_seconds_per_param);
  check(m.forward_fraction > 0 && m.forward_fraction < 1, "planner.compute", "forward fraction must lie in (0, 1), got ",
        m.forward_fraction);
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

}  // namespace amsp::planner
