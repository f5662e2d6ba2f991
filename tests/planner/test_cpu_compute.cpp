// The measured compute model (compute_model.hpp) and the step time built on it (step_model.hpp):
// fits and step times checked against values worked out by hand below.
#include <doctest/doctest.h>

#include <cmath>
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

TEST_CASE("the update's turns: k ranks updating one after another on a core, by hand") {
  const Mesh mesh(4, 2);
  // 4 ranks a core: each update 1e-8 × 8e6 / s_os, four of them one after another.
  ComputeModel model{0.01, 1.0 / 3.0, 1e-8, 4};
  CHECK(measured_step_compute(preset("zero1", mesh), model, 64, 1, 8e6).update == doctest::Approx(0.04));
  CHECK(measured_step_compute(preset("ddp", mesh), model, 64, 1, 8e6).update == doctest::Approx(0.32));
  // The step pays it in both schedules: serial 0.64 + 0.32 (no communication), overlapped alike.
  const StepTime s = step_time(measured_step_compute(preset("ddp", mesh), model, 64, 1, 8e6), 0.0, {}, {});
  CHECK(s.serial == doctest::Approx(0.64 + 0.32));
  CHECK(s.overlapped == doctest::Approx(0.64 + 0.32));
  for (const double bad : {0.5, 0.0, std::nan("")}) {
    model.update_turns = bad;
    CHECK_THROWS_WITH_AS(validate(model), doctest::Contains("update's turns"), amsp::error);
  }
}

TEST_CASE("CpuContention: interpolation between measured points, nearest point outside, bad curves fail") {
  const CpuContention cpu{8, {{8, 0.06}, {1, 0.01}, {4, 0.02}}};  // unsorted on purpose
  CHECK(cpu.seconds_per_sample(1) == doctest::Approx(0.01));
  CHECK(cpu.seconds_per_sample(2) == doctest::Approx(0.01 + 0.01 / 3));  // a third of the way to 4
  CHECK(cpu.seconds_per_sample(6) == doctest::Approx(0.04));             // halfway from 4 to 8
  CHECK(cpu.seconds_per_sample(0.5) == doctest::Approx(0.01));
  CHECK(cpu.seconds_per_sample(9) == doctest::Approx(0.06));
  CHECK_NOTHROW(validate(cpu));
  CHECK_NOTHROW(validate(CpuContention{}));  // off
  CHECK_FALSE(CpuContention{}.enabled());
  CHECK(expected_computing_ranks(8, 0.0) == 8.0);
  CHECK(expected_computing_ranks(8, 1.0) == 1.0);
  CHECK(expected_computing_ranks(8, 0.25) == doctest::Approx(1 + 7 * 0.75));
  for (const CpuContention& bad : {CpuContention{8, {{4, 0.02}}}, CpuContention{8, {{4, 0.02}, {4, 0.03}}},
                                   CpuContention{8, {{1, 0.01}, {9, 0.05}}}, CpuContention{8, {{1, 0.01}, {8, 0.0}}},
                                   CpuContention{0, {{1, 0.01}, {2, 0.02}}}})
    CHECK_THROWS_WITH_AS(validate(bad), doctest::Contains("planner.contention"), amsp::error);
  CHECK_THROWS_WITH_AS((void)expected_computing_ranks(8, 1.5), doctest::Contains("planner.contention"), amsp::error);
  CHECK_THROWS_WITH_AS((void)CpuContention{}.seconds_per_sample(1), doctest::Contains("planner.contention"),
                       amsp::error);
}

TEST_CASE("contended_step_time: fixed points of the compute under CPU contention, solved by hand") {
  // 8 ranks, seconds per sample 0.01·k (points at k = 1 and 8), one sample per micro-batch, M = 1,
  // no update; one every-micro-batch term of W seconds.
  const CpuContention cpu{8, {{1, 0.01}, {8, 0.08}}};
  const StepCompute base{123.0, 1.0 / 3.0, 1, 0.0, 0.0};  // per_micro_batch is replaced
  const std::vector<CommTerm> terms{{"every", Window::every_micro_batch}};
  // Serial, W = 0.03: T = c + W, b = W / T, k = 1 + 7c / T, c = 0.01·k:
  //   c = 0.01 + 0.07c / (c + 0.03)  =>  c² − 0.05c − 0.0003 = 0  =>  c = (0.05 + √0.0037) / 2.
  ContendedStepTime s = contended_step_time(base, 1.0, cpu, 1.0, terms, {0.03});
  const double c30 = (0.05 + std::sqrt(0.0037)) / 2;
  CHECK(s.serial.compute == doctest::Approx(c30).epsilon(1e-9));
  CHECK(s.serial.serial == doctest::Approx(c30 + 0.03).epsilon(1e-9));
  CHECK(s.computing_serial == doctest::Approx(100 * c30).epsilon(1e-9));
  // κ = 1: the overlapped step hides nothing, the same fixed point.
  CHECK(s.overlapped.overlapped == doctest::Approx(c30 + 0.03).epsilon(1e-9));
  // No communication: nobody is blocked, every rank computes at once: c(8) = 0.08 (the neutral case).
  s = contended_step_time(base, 1.0, cpu, 1.0, terms, {0.0});
  CHECK(s.serial.serial == doctest::Approx(0.08));
  CHECK(s.computing_serial == doctest::Approx(8.0));
  // W = 0.1, κ = 0 (hidden for free): the overlapped step is max(c, W) = W while c <= W, so
  //   b = (0.1 − c) / 0.1, k = 1 + 70c, c = 0.01 + 0.7c  =>  c = 1/30, k = 10/3;
  // serial: c = 0.01 + 0.07c / (c + 0.1)  =>  c² + 0.02c − 0.001 = 0  =>  c = (−0.02 + √0.0044) / 2.
  s = contended_step_time(base, 1.0, cpu, 0.0, terms, {0.1});
  CHECK(s.overlapped.overlapped == doctest::Approx(0.1));
  CHECK(s.overlapped.compute == doctest::Approx(1.0 / 30).epsilon(1e-9));
  CHECK(s.computing_overlapped == doctest::Approx(10.0 / 3).epsilon(1e-9));
  const double c100 = (-0.02 + std::sqrt(0.0044)) / 2;
  CHECK(s.serial.serial == doctest::Approx(c100 + 0.1).epsilon(1e-9));
  // Four samples per micro-batch and W = 0.12: c = 0.04·k, k = 1 + 7c / (c + 0.12); with c = 4x this
  // is x = 0.01·(1 + 7x / (x + 0.03)), the first case: c = 4·c30.
  s = contended_step_time(base, 4.0, cpu, 1.0, terms, {0.12});
  CHECK(s.serial.compute == doctest::Approx(4 * c30).epsilon(1e-9));
  // A wait outside the terms (StepCompute::wait, the loss AllReduce) is blocked time like a term:
  // no term, wait 0.03 gives the first case's fixed point.
  StepCompute waiting = base;
  waiting.wait = 0.03;
  s = contended_step_time(waiting, 1.0, cpu, 1.0, terms, {0.0});
  CHECK(s.serial.serial == doctest::Approx(c30 + 0.03).epsilon(1e-9));
  CHECK(s.overlapped.overlapped == doctest::Approx(c30 + 0.03).epsilon(1e-9));
  // A falling curve (one rank beside seven waiters slower than eight together): c(k) = 0.05 −
  // 0.04 (k − 1) / 7; serial, W = 0.03: c = 0.05 − 0.04c / (c + 0.03)  =>  c² + 0.02c − 0.0015 = 0
  //   =>  c = 0.03, k = 1 + 7 · 0.03 / 0.06 = 4.5.
  s = contended_step_time(base, 1.0, CpuContention{8, {{1, 0.05}, {8, 0.01}}}, 1.0, terms, {0.03});
  CHECK(s.serial.compute == doctest::Approx(0.03).epsilon(1e-9));
  CHECK(s.computing_serial == doctest::Approx(4.5).epsilon(1e-9));
  // Off: the base compute, both schedules as step_time gives them.
  s = contended_step_time(base, 1.0, CpuContention{}, 1.0, terms, {0.03});
  CHECK(s.serial.serial == doctest::Approx(123.03));
  CHECK(s.computing_serial == 0.0);
  CHECK_THROWS_WITH_AS((void)contended_step_time(base, 0.0, cpu, 1.0, terms, {0.03}),
                       doctest::Contains("planner.contention"), amsp::error);
}

TEST_CASE("the overlapped step's seconds per collective call: the windows, the engine's schedule, by hand") {
  const Mesh mesh(4, 2);
  const Plan plan = preset("zero1", mesh);
  const ComputeModel model{0.01, 1.0 / 3.0, 1e-8};
  StepCompute c = measured_step_compute(plan, model, 64, 2, 8e6);  // 1.28 s compute, update 0.01 s
  // Three terms of 2, 1 and 3 calls: 6 calls a step.
  std::vector<CommTerm> terms{{"every", Window::every_micro_batch}, {"spread", Window::first_forward},
                              {"replicas", Window::last_backward}};
  terms[0].calls = {{comm::op_kind::reduce_scatter, 1e3, 2, {4, 2}}};
  terms[1].calls = {{comm::op_kind::all_gather, 1e3, 1, {4, 2}}};
  terms[2].calls = {{comm::op_kind::all_reduce, 1e3, 1, {1, 2}}, {comm::op_kind::all_reduce, 2e3, 2, {1, 2}}};
  CHECK(calls_per_step(terms) == 6.0);
  const std::vector<double> seconds{0.2, 0.05, 0.1};
  const StepTime without = step_time(c, 0.0, terms, seconds);
  c.overlap_calls = 6 * 0.002;  // 2 ms a call
  const StepTime with = step_time(c, 0.0, terms, seconds);
  CHECK(with.overlapped == doctest::Approx(without.overlapped + 0.012));
  CHECK(with.serial == doctest::Approx(without.serial));  // the step without overlap is priced by its calls
  // The same through the engine's schedule, unit by unit (two units of equal share).
  c.unit_shares = {0.5, 0.5};
  c.overlap_calls = 0;
  const StepTime units_without = step_time(c, 0.0, terms, seconds);
  c.overlap_calls = 0.012;
  CHECK(step_time(c, 0.0, terms, seconds).overlapped == doctest::Approx(units_without.overlapped + 0.012));
  // From the cluster (the FLOP model's step): Cluster::overlap_call_s × the terms' calls, the
  // step without overlap unchanged; a negative one is refused.
  const ModelSpec m = parse_model("7b");
  const Workload w;
  Cluster cluster = paper_cluster(2);
  const StepTime gpu_without = step_time(plan, m, w, cluster, terms, seconds);
  cluster.overlap_call_s = 0.002;
  validate(cluster);
  const StepTime gpu_with = step_time(plan, m, w, cluster, terms, seconds);
  CHECK(gpu_with.overlapped == doctest::Approx(gpu_without.overlapped + 0.012));
  CHECK(gpu_with.serial == doctest::Approx(gpu_without.serial));
  cluster.overlap_call_s = -1e-3;
  CHECK_THROWS_WITH_AS(validate(cluster), doctest::Contains("per collective call"), amsp::error);
}
