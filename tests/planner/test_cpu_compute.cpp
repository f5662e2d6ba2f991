// The measured compute model (compute_model.hpp) and the step time built on it (step_model.hpp):
// fits and step times checked against values worked out by hand below.
#include <doctest/doctest.h>

#include <vector>

#include "amsp/planner/step_model.hpp"
#include "amsp/sharding/presets.hpp"

using namespace amsp;
using namespace amsp::planner;

TEST_CASE("fit_compute_model: exact line and least squares against hand-computed fits") {
  // t = 0.002 s per sample + 0.05 s of update for 1e6 parameters, measured exactly.
  const std::vector<CalibrationStep> exact{{32, 0.114}, {64, 0.178}, {128, 0.306}};
  const ComputeModel m = fit_compute_model(exact, 1e6);
  CHECK(m.seconds_per_sample == doctest::Approx(0.002).epsilon(1e-12));
  CHECK(m.update_seconds_per_param == doctest::Approx(5e-8).epsilon(1e-9));
  CHECK(m.forward_fraction == doctest::Approx(1.0 / 3.0));
  // (1, 2), (2, 3), (3, 5): by hand, slope = Σ(x−2)(y−10/3) / Σ(x−2)² = 3/2, intercept = 10/3 − 3 = 1/3.
  const std::vector<CalibrationStep> noisy{{1, 2}, {2, 3}, {3, 5}};
  const ComputeModel n = fit_compute_model(noisy, 1.0, 0.25);
  CHECK(n.seconds_per_sample == doctest::Approx(1.5));
  CHECK(n.update_seconds_per_param == doctest::Approx(1.0 / 3.0));
  CHECK(n.forward_fraction == 0.25);
  // A negative intercept (noise around a zero update) is clamped to no update.
  const std::vector<CalibrationStep> negative{{10, 0.9}, {20, 2.0}};
  CHECK(fit_compute_model(negative, 100).update_seconds_per_param == 0.0);
}

TEST_CASE("fit_compute_model: bad calibrations fail with planner.compute") {
  const std::vector<CalibrationStep> one{{32, 0.1}};
  const std::vector<CalibrationStep> same{{32, 0.1}, {32, 0.2}};
  const std::vector<CalibrationStep> zero_time{{32, 0.1}, {64, 0.0}};
  const std::vector<CalibrationStep> slower_with_less{{32, 0.2}, {64, 0.1}};  // negative slope
  for (const auto* steps : {&one, &same, &zero_time, &slower_with_less})
    CHECK_THROWS_WITH_AS((void)fit_compute_model(*steps, 1e6), doctest::Contains("planner.compute"), amsp::error);
  const std::vector<CalibrationStep> good{{32, 0.1}, {64, 0.2}};
  CHECK_THROWS_WITH_AS((void)fit_compute_model(good, 0), doctest::Contains("planner.compute"), amsp::error);
  CHECK_THROWS_WITH_AS(validate(ComputeModel{0.01, 1.0, 0}), doctest::Contains("planner.compute"), amsp::error);
}

TEST_CASE("measured step time: compute, update by OS shard, serial and overlapped windows by hand") {
  const Mesh mesh(4, 2);
  const Plan plan = preset("zero1", mesh);  // s_os = 8
  const ComputeModel model{0.01, 1.0 / 3.0, 1e-8};
  // 64 samples per micro-batch: 0.64 s; M = 2; update 1e-8 × 8e6 / 8 = 0.01 s.
  const StepCompute c = measured_step_compute(plan, model, 64, 2, 8e6);
  CHECK(c.per_micro_batch == doctest::Approx(0.64));
  CHECK(c.update == doctest::Approx(0.01));
  const std::vector<CommTerm> terms{{"every", Window::every_micro_batch},
                                    {"spread", Window::first_forward},
                                    {"replicas", Window::last_backward}};
  // Compute-bound: forward 0.64/3, backward 2·0.64/3, middle 0.64; shares 1/6 and 1/3 of 1.28 s.
  StepTime s = step_time(c, 0.0, terms, {0.2, 0.05, 0.1});
  CHECK(s.compute == doctest::Approx(1.28));
  CHECK(s.communication == doctest::Approx(0.35));
  CHECK(s.serial == doctest::Approx(1.28 + 0.35 + 0.01));
  CHECK(s.overlapped == doctest::Approx(1.28 + 0.01));  // every window hides its traffic
  // Communication-bound: windows max(0.2133, 0.05 + 2/6), max(0.64, 1.0), max(0.4267, 0.1 + 2/3).
  s = step_time(c, 0.0, terms, {2.0, 0.05, 0.1});
  CHECK(s.overlapped == doctest::Approx(0.05 + 2.0 / 6 + 1.0 + 0.1 + 2.0 / 3 + 0.01));
  CHECK(s.serial == doctest::Approx(1.28 + 2.15 + 0.01));
  // κ = 0.5 slows the compute-bound windows by half the traffic beside them.
  s = step_time(c, 0.5, terms, {0.2, 0.05, 0.1});
  const double fw = 0.64 / 3, bw = 2 * 0.64 / 3;
  CHECK(s.overlapped == doctest::Approx(0.01 + (fw + 0.5 * (0.05 + 0.2 / 6)) + (0.64 + 0.5 * 0.1) +
                                        (bw + 0.5 * (0.1 + 0.2 / 3))));
  CHECK(s.mfu == 0.0);
  CHECK_THROWS_WITH_AS((void)measured_step_compute(plan, model, 0, 1, 8e6), doctest::Contains("planner.compute"),
                       amsp::error);
}
