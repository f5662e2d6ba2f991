// Per-step hyperparameters and parameter groups: a decay-masked AdamW (and SGD with L2 decay)
// with a warmup + cosine learning-rate schedule and a per-tensor lr multiplier, 20 steps on every
// plan of a 2x2 mesh, against the test's own float64 statement of the rules. Also the
// grad_buffer(b) contract (zeroed on hand-out, so an accumulating backward is right) and the
// mutable gather view.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <type_traits>

#include "amsp/comm/threads.hpp"
#include "amsp/core/error.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "parity_metrics.hpp"
#include "../plan_sweep.hpp"

namespace {

using amsp::test::JobConfig;
using amsp::test::Params;

constexpr int kSteps = 20;

/// Linear warmup over 3 steps, then cosine decay to 10 % of the peak: the engine gets these
/// floats through set_lr, the reference the same values widened.
float cosine_lr(int step) {
  const double peak = 1e-2, floor = 1e-3;
  if (step < 3) return static_cast<float>(peak * (step + 1) / 3.0);
  const double progress = static_cast<double>(step - 3) / (kSteps - 3);
  return static_cast<float>(floor + 0.5 * (peak - floor) * (1.0 + std::cos(std::numbers::pi * progress)));
}

// odd_model() tensors in order: l0.weight, l0.bias, l1.weight, l2.weight, l2.bias, l2.scale.
constexpr bool kDecays[] = {true, false, true, true, false, false};
constexpr double kLrScale[] = {1.0, 1.0, 0.5, 1.0, 1.0, 2.0};

JobConfig masked_job(int micro_batches, amsp::OsLayout layout) {
  JobConfig job;
  job.steps = kSteps;
  job.micro_batches = micro_batches;
  job.max_grad_norm = 0.05f;
  job.os_layout = layout;
  job.lr_at = cosine_lr;
  job.param_groups = {{"l0.bias", {.weight_decay = false}},
                      {"l1.weight", {.lr_scale = 0.5f}},
                      {"l2.bias", {.weight_decay = false}},
                      {"l2.scale", {.lr_scale = 2.0f, .weight_decay = false}}};
  return job;
}

/// AdamW in float64 (PyTorch's formulation) with the mask, the multipliers and the schedule.
std::vector<std::vector<double>> adamw_reference(int world, const JobConfig& job, double wd) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<std::vector<double>> m(6), v(6);
  return amsp::test::reference_job(world, job, [&](std::size_t k, int t, std::vector<double>& p,
                                                   const std::vector<double>& g, double clip) {
    const double lr = static_cast<double>(cosine_lr(t - 1)) * kLrScale[k];
    const double decay = kDecays[k] ? wd : 0.0;
    m[k].resize(p.size());
    v[k].resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i] * clip;
      p[i] *= 1 - lr * decay;
      m[k][i] = b1 * m[k][i] + (1 - b1) * gi;
      v[k][i] = b2 * v[k][i] + (1 - b2) * gi * gi;
      const double mh = m[k][i] / (1 - std::pow(b1, t)), vh = v[k][i] / (1 - std::pow(b2, t));
      p[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  });
}

/// SGD with momentum 0.9 and L2 weight decay in float64 (PyTorch's formulation), same groups.
std::vector<std::vector<double>> sgd_reference(int world, const JobConfig& job, double wd) {
  std::vector<std::vector<double>> buf(6);
  return amsp::test::reference_job(world, job, [&](std::size_t k, int t, std::vector<double>& p,
                                                   const std::vector<double>& g, double clip) {
    const double lr = static_cast<double>(cosine_lr(t - 1)) * kLrScale[k];
    const double decay = kDecays[k] ? wd : 0.0;
    buf[k].resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] * clip + decay * p[i];
      buf[k][i] = t == 1 ? d : 0.9 * buf[k][i] + d;
      p[i] -= lr * buf[k][i];
    }
  });
}

}  // namespace

TEST_CASE("decay-masked AdamW and SGD with a cosine schedule match float64 on every 2x2 plan") {
  const amsp::Mesh mesh(2, 2);
  const auto adamw = amsp::optim::AdamW{.lr = 1.0f, .weight_decay = 0.1f};  // lr comes from set_lr
  const auto sgd = amsp::optim::SgdMomentum{.lr = 1.0f, .weight_decay = 0.05f};
  for (int micro : {1, 3}) {
    const auto want_adamw = adamw_reference(mesh.world_size(), masked_job(micro, amsp::OsLayout::even_split), 0.1);
    const auto want_sgd = sgd_reference(mesh.world_size(), masked_job(micro, amsp::OsLayout::even_split), 0.05);
    amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
      CAPTURE(amsp::to_string(plan));
      CAPTURE(amsp::name_of(layout));
      CAPTURE(micro);
      const JobConfig job = masked_job(micro, layout);
      CHECK(amsp::test::max_relative_error(amsp::test::run_threads(mesh, plan, adamw, job), want_adamw) <= 1e-6);
      CHECK(amsp::test::max_relative_error(amsp::test::run_threads(mesh, plan, sgd, job), want_sgd) <= 1e-6);
    });
  }
}

TEST_CASE("the comparison sees a missing mask or a missing schedule") {
  const amsp::Mesh mesh(2, 1);
  const auto adamw = amsp::optim::AdamW{.lr = 1.0f, .weight_decay = 0.1f};
  const auto want = adamw_reference(mesh.world_size(), masked_job(1, amsp::OsLayout::even_split), 0.1);
  JobConfig unmasked = masked_job(1, amsp::OsLayout::even_split);
  unmasked.param_groups.clear();
  CHECK(amsp::test::max_relative_error(amsp::test::run_threads(mesh, amsp::preset("zero3", mesh), adamw, unmasked),
                                       want) > 1e-4);
  JobConfig constant = masked_job(1, amsp::OsLayout::even_split);
  constant.lr_at = [](int) { return 1e-2f; };
  CHECK(amsp::test::max_relative_error(amsp::test::run_threads(mesh, amsp::preset("zero3", mesh), adamw, constant),
                                       want) > 1e-4);
}

TEST_CASE("grad_buffer(b) starts at zero: a backward that accumulates (+=) gives the same bits") {
  const amsp::Mesh mesh(2, 2);
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
    CAPTURE(amsp::to_string(plan));
    JobConfig assign;
    assign.micro_batches = 3;
    assign.steps = 4;
    JobConfig accumulate = assign;
    accumulate.accumulate_grads = true;
    CHECK(amsp::test::bitwise_equal(amsp::test::run_threads(mesh, plan, rule, accumulate),
                                    amsp::test::run_threads(mesh, plan, rule, assign)));
    // Without zeroing, the accumulating backward reads what the buffer held before: wrong.
    accumulate.zero_grad_buffers = false;
    CHECK(amsp::test::max_relative_error(amsp::test::run_threads(mesh, plan, rule, accumulate),
                                         amsp::test::run_threads(mesh, plan, rule, assign)) > 1e-6);
  }
}

TEST_CASE("gather(b) is a mutable view; param_group and set_lr report and validate") {
  using Engine = amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW>;
  static_assert(std::is_same_v<decltype(std::declval<Engine&>().gather(0)), std::span<float>>);
  amsp::comm::run_on_threads(1, [&](amsp::comm::ThreadsCommunicator& comm) {
    const amsp::Mesh mesh(1, 1);
    amsp::EngineOptions options;
    options.param_groups = {{"l0.bias", {.lr_scale = 0.5f, .weight_decay = false}}};
    Engine opt(comm, mesh, amsp::preset("ddp", mesh), amsp::optim::AdamW{}, amsp::test::odd_model(), options);
    CHECK(opt.param_group("l0.bias") == amsp::ParamGroup{.lr_scale = 0.5f, .weight_decay = false});
    CHECK(opt.param_group("l0.weight") == amsp::ParamGroup{});
    opt.set_lr(0.25f);
    CHECK(opt.rule().lr == 0.25f);
    CHECK_THROWS_AS(opt.set_lr(-1.0f), amsp::error);
    CHECK(opt.rule().lr == 0.25f);
    CHECK_THROWS_WITH_AS(static_cast<void>(opt.param_group("nope")), doctest::Contains("engine.unknown_tensor"),
                         amsp::error);
  });
}

TEST_CASE("parameter groups: an unknown tensor name or a bad lr_scale is an error") {
  const auto rule_of = [](amsp::EngineOptions options) {
    std::string rule = "(no error)";
    amsp::comm::run_on_threads(1, [&](amsp::comm::ThreadsCommunicator& comm) {
      const amsp::Mesh mesh(1, 1);
      try {
        amsp::ShardedOptimizer<amsp::comm::ThreadsCommunicator, amsp::optim::AdamW> opt(
            comm, mesh, amsp::preset("ddp", mesh), amsp::optim::AdamW{}, amsp::test::odd_model(), options);
      } catch (const amsp::error& e) {
        rule = e.rule();
      }
    });
    return rule;
  };
  amsp::EngineOptions unknown;
  unknown.param_groups = {{"l9.weight", {}}};
  CHECK(rule_of(unknown) == "engine.unknown_tensor");
  amsp::EngineOptions negative;
  negative.param_groups = {{"l0.bias", {.lr_scale = -1.0f}}};
  CHECK(rule_of(negative) == "engine.param_group");
}
