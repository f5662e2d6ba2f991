#pragma once
// The engine's parity suite, written once and instantiated per execution space (test_parity.cpp:
// HostSerial; test_parity_async.cpp: HostAsync, also under ThreadSanitizer): every valid plan on
// every mesh of the threads backend ends a 10-step job with the same parameters as the DDP plan
// (fp32, 1e-6 relative), the DDP plan matches a float64 reference, and the same plan run twice is
// bitwise identical. AMSP_ENGINE_PARITY_CASES(Space) registers the cases in the including file.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "amsp/comm/threads.hpp"
#include "amsp/engine/space.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "parity_metrics.hpp"
#include "../plan_sweep.hpp"

TYPE_TO_STRING(amsp::HostSerial);
TYPE_TO_STRING(amsp::HostAsync);

namespace {

using amsp::test::JobConfig;
using amsp::test::Params;
using amsp::test::bitwise_equal;
using amsp::test::max_error_in_bf16_ulps;
using amsp::test::max_relative_error;

/// The threads job in execution space Space (amsp::test::ParityRunner: a test can route a space
/// it cannot compile here, e.g. the CUDA space, to a driver compiled elsewhere).
template <class Space, class Rule, class ParamT = float>
Params run_in(const amsp::Mesh& mesh, const amsp::Plan& plan, const Rule& rule, const JobConfig& job) {
  return amsp::test::ParityRunner<Space>::template run<Rule, ParamT>(mesh, plan, rule, job);
}

/// Every valid plan of the 2x2 and 4x2 meshes in both optimizer-state layouts (whole-tensor only
/// where s_g = s_p), each with the job the space-equivalence tests run (4 steps of 3 micro-batches,
/// the layout set): calls check(mesh, plan, job), with the case captured for doctest's messages.
template <class F>
void for_each_space_case(F&& check) {
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 2)})
    amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
      CAPTURE(amsp::to_string(mesh));
      CAPTURE(amsp::to_string(plan));
      CAPTURE(amsp::name_of(layout));
      JobConfig job;
      job.steps = 4;
      job.micro_batches = 3;
      job.os_layout = layout;
      check(mesh, plan, job);
    });
}

/// The (micro-batches, clip) jobs of the every-plan sweep: all four pairs. Under the sanitizers
/// (AMSP_TEST_SWEEP_EACH_VALUE_ONCE, tests/engine/CMakeLists.txt) two, which still give each plan
/// each value of each knob (one micro-batch, first and last at once, without clipping; three,
/// with the norm and the clip): the memory every plan touches and the events its schedule waits
/// for (the norm is taken with or without clipping: skip_nonfinite). The other two pairs' numbers
/// are checked in the Release build (docs/testing.md).
struct SweepJob {
  int micro;
  float clip;
};
#if defined(AMSP_TEST_SWEEP_EACH_VALUE_ONCE)
constexpr SweepJob sweep_jobs[] = {{1, 0.0f}, {3, 0.05f}};
#else
constexpr SweepJob sweep_jobs[] = {{1, 0.0f}, {1, 0.05f}, {3, 0.0f}, {3, 0.05f}};
#endif

template <class Space, class Rule>
void check_every_plan(const amsp::Mesh& mesh, const Rule& rule) {
  for (const SweepJob& sweep : sweep_jobs) {
    const int micro = sweep.micro;
    const float clip = sweep.clip;
    JobConfig job;
    job.micro_batches = micro;
    job.max_grad_norm = clip;
    const Params ddp = run_in<Space>(mesh, amsp::preset("ddp", mesh), rule, job);
    amsp::test::for_each_plan_and_layout(mesh, [&](const amsp::Plan& plan, amsp::OsLayout layout) {
      CAPTURE(amsp::to_string(mesh));
      CAPTURE(amsp::to_string(plan));
      CAPTURE(amsp::name_of(layout));
      CAPTURE(micro);
      CAPTURE(clip);
      job.os_layout = layout;
      const Params got = run_in<Space>(mesh, plan, rule, job);
      CHECK(max_relative_error(got, ddp) <= 1e-6);
    });
  }
}

const amsp::Mesh threads_meshes[] = {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {2, 2}, {4, 2}, {2, 4}};

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("every plan matches DDP: AdamW", Space, parity_adamw) {
  for (const amsp::Mesh& mesh : threads_meshes) check_every_plan<Space>(mesh, amsp::optim::AdamW{.lr = 1e-2f});
}

TEST_CASE_TEMPLATE_DEFINE("every plan matches DDP: SGD with momentum", Space, parity_sgd) {
  for (const amsp::Mesh& mesh : threads_meshes) check_every_plan<Space>(mesh, amsp::optim::SgdMomentum{.lr = 1e-2f});
}

TEST_CASE_TEMPLATE_DEFINE("the same plan run twice is bitwise identical", Space, parity_rerun_bitwise) {
  const amsp::Mesh mesh(4, 2);
  for (const char* name : {"ddp", "zero3", "amsp-13b", "amsp-30b", "mics(2)"}) {
    CAPTURE(name);
    JobConfig job;
    job.micro_batches = 3;
    job.max_grad_norm = 0.05f;
    const amsp::Plan plan = amsp::parse_plan(name, mesh);
    const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
    CHECK(bitwise_equal(run_in<Space>(mesh, plan, rule, job), run_in<Space>(mesh, plan, rule, job)));
  }
}

TEST_CASE_TEMPLATE_DEFINE("DDP matches a float64 statement of AdamW and SGD", Space, parity_float64) {
  const amsp::Mesh mesh(2, 2);
  for (int micro : {1, 3})
    for (float clip : {0.0f, 0.05f}) {
      CAPTURE(micro);
      CAPTURE(clip);
      JobConfig job;
      job.micro_batches = micro;
      job.max_grad_norm = clip;
      // AdamW, PyTorch's formulation, in double.
      const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
      std::vector<std::vector<double>> m(6), v(6);
      const auto adamw = [&](std::size_t k, int t, std::vector<double>& p, const std::vector<double>& g, double clip_coef) {
        m[k].resize(p.size());
        v[k].resize(p.size());
        for (std::size_t i = 0; i < p.size(); ++i) {
          const double gi = g[i] * clip_coef;
          p[i] *= 1 - lr * wd;
          m[k][i] = b1 * m[k][i] + (1 - b1) * gi;
          v[k][i] = b2 * v[k][i] + (1 - b2) * gi * gi;
          const double mh = m[k][i] / (1 - std::pow(b1, t)), vh = v[k][i] / (1 - std::pow(b2, t));
          p[i] -= lr * mh / (std::sqrt(vh) + eps);
        }
      };
      const auto want = amsp::test::reference_job(mesh.world_size(), job, adamw);
      const Params got = run_in<Space>(mesh, amsp::preset("ddp", mesh), amsp::optim::AdamW{.lr = 1e-2f}, job);
      CHECK(max_relative_error(got, want) <= 1e-6);

      // SGD with momentum 0.9, PyTorch's formulation (buffer = g at t = 1), in double.
      std::vector<std::vector<double>> buf(6);
      const auto sgd = [&](std::size_t k, int t, std::vector<double>& p, const std::vector<double>& g, double clip_coef) {
        buf[k].resize(p.size());
        for (std::size_t i = 0; i < p.size(); ++i) {
          const double gi = g[i] * clip_coef;
          buf[k][i] = t == 1 ? gi : 0.9 * buf[k][i] + gi;
          p[i] -= 1e-2 * buf[k][i];
        }
      };
      const auto want_sgd = amsp::test::reference_job(mesh.world_size(), job, sgd);
      const Params got_sgd = run_in<Space>(mesh, amsp::preset("ddp", mesh), amsp::optim::SgdMomentum{.lr = 1e-2f}, job);
      CHECK(max_relative_error(got_sgd, want_sgd) <= 1e-6);
    }
}

TEST_CASE_TEMPLATE_DEFINE("bf16 parameters and gradients: every plan within one bf16 ulp of DDP", Space, parity_bf16) {
  // One micro-batch: gradients are rounded to bf16 once, by the user, identically in every plan;
  // plans differ only in the fp32 summation order, and the bf16 parameters they write agree to
  // one bf16 ulp at the tensor's largest magnitude. With M > 1 the bf16 G store
  // rounds each partial sum, which is the plan's own precision choice, not a parity question.
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(4, 2), amsp::Mesh(8, 1)}) {
    JobConfig job;
    job.max_grad_norm = 0.05f;
    const Params ddp = run_in<Space, amsp::optim::AdamW, amsp::bf16>(mesh, amsp::preset("ddp", mesh), rule, job);
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
      CAPTURE(amsp::to_string(mesh));
      CAPTURE(amsp::to_string(plan));
      const Params got = run_in<Space, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job);
      CHECK(max_error_in_bf16_ulps(got, ddp) <= 1.0);
      CHECK(bitwise_equal(got, run_in<Space, amsp::optim::AdamW, amsp::bf16>(mesh, plan, rule, job)));
    }
  }
}

/// Registers every parity case for execution space `Space` in the including source file.
#define AMSP_ENGINE_PARITY_CASES(Space) \
  TEST_CASE_TEMPLATE_INVOKE(parity_adamw, Space); \
  TEST_CASE_TEMPLATE_INVOKE(parity_sgd, Space); \
  TEST_CASE_TEMPLATE_INVOKE(parity_rerun_bitwise, Space); \
  TEST_CASE_TEMPLATE_INVOKE(parity_float64, Space); \
  TEST_CASE_TEMPLATE_INVOKE(parity_bf16, Space);
