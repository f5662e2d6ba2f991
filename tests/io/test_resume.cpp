// Resume is bitwise: 20 steps straight (tests/engine's run_job) equal 10 steps, save, load into a
// new engine, 10 more steps; for every valid plan on 2x2 and 4x2, both OS layouts (whole_tensor
// where s_g = s_p), fp32 and bf16 parameters. Also: the step count, the hyperparameters and the
// user section come back.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "amsp/optim/adam.hpp"
#include "amsp/optim/lion.hpp"
#include "amsp/optim/sgd_momentum.hpp"
#include "amsp/sharding.hpp"
#include "io_harness.hpp"
#include "parity_metrics.hpp"

namespace {

using amsp::test::JobConfig;
using amsp::test::Params;
using amsp::test::Threads;

template <class Rule, class ParamT>
Params straight_run(const amsp::Mesh& mesh, const amsp::Plan& plan, const Rule& rule, const JobConfig& job) {
  Params out;
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    Params p = amsp::test::run_job<Threads, Rule, ParamT>(comm, mesh, plan, rule, job);
    if (comm.rank() == 0) out = std::move(p);
  });
  return out;
}

template <class Rule, class ParamT>
Params resumed_run(const amsp::Mesh& mesh, const amsp::Plan& plan, const Rule& rule, JobConfig job, int cut) {
  const amsp::test::ScratchDir dir;
  amsp::EngineOptions options;
  options.os_layout = job.os_layout;
  options.max_grad_norm = job.max_grad_norm;
  options.param_groups = job.param_groups;
  Params out;
  std::vector<Params> per_rank(static_cast<std::size_t>(mesh.world_size()));
  amsp::comm::run_on_threads(mesh.world_size(), [&](Threads& comm) {
    {
      amsp::ShardedOptimizer<Threads, Rule, ParamT> first(comm, mesh, plan, rule, amsp::test::odd_model(), options);
      amsp::test::set_initial_values(first);
      amsp::test::train(first, comm.rank(), job, 0, cut);
      amsp::io::save(first, comm, dir / "ckpt");
    }
    // A new engine with other hyperparameters and no initial values: load must set everything.
    Rule other = rule;
    other.lr *= 0.5f;
    amsp::ShardedOptimizer<Threads, Rule, ParamT> second(comm, mesh, plan, other, amsp::test::odd_model(), options);
    const amsp::io::Restored restored = amsp::io::load(second, comm, dir / "ckpt");
    REQUIRE(restored.step == cut);
    REQUIRE(second.steps() == cut);
    REQUIRE(second.rule().lr == (job.lr_at ? job.lr_at(cut - 1) : rule.lr));
    amsp::test::train(second, comm.rank(), job, cut, job.steps);
    per_rank[static_cast<std::size_t>(comm.rank())] = amsp::test::full_params(second);
  });
  for (const Params& p : per_rank) REQUIRE(amsp::test::bitwise_equal(p, per_rank.front()));
  return per_rank.front();
}

template <class ParamT>
void every_plan(const amsp::Mesh& mesh) {
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f};
  JobConfig job;
  job.steps = 20;
  job.max_grad_norm = 0.05f;
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh))
    for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
      if (!amsp::layout_supports(layout, plan)) continue;  // needs s_g = s_p
      CAPTURE(amsp::to_string(mesh));
      CAPTURE(amsp::to_string(plan));
      CAPTURE(amsp::name_of(layout));
      job.os_layout = layout;
      const Params straight = straight_run<amsp::optim::AdamW, ParamT>(mesh, plan, rule, job);
      const Params resumed = resumed_run<amsp::optim::AdamW, ParamT>(mesh, plan, rule, job, 10);
      CHECK(amsp::test::bitwise_equal(resumed, straight));
    }
}

}  // namespace

TEST_CASE("resume is bitwise on every 2x2 plan, fp32 and bf16") {
  every_plan<float>(amsp::Mesh(2, 2));
  every_plan<amsp::bf16>(amsp::Mesh(2, 2));
}

TEST_CASE("resume is bitwise on every 4x2 plan, fp32 and bf16") {
  every_plan<float>(amsp::Mesh(4, 2));
  every_plan<amsp::bf16>(amsp::Mesh(4, 2));
}

TEST_CASE("resume is bitwise for every rule (SGD momentum, Lion, Adam) under amsp-13b on 4x2") {
  const amsp::Mesh mesh(4, 2);
  const amsp::Plan plan = amsp::parse_plan("amsp-13b", mesh);
  JobConfig job;
  job.steps = 12;
  job.micro_batches = 2;
  CHECK(amsp::test::bitwise_equal(
      resumed_run<amsp::optim::SgdMomentum, float>(mesh, plan, amsp::optim::SgdMomentum{.lr = 1e-2f, .nesterov = true}, job, 5),
      straight_run<amsp::optim::SgdMomentum, float>(mesh, plan, amsp::optim::SgdMomentum{.lr = 1e-2f, .nesterov = true}, job)));
  CHECK(amsp::test::bitwise_equal(resumed_run<amsp::optim::Lion, float>(mesh, plan, amsp::optim::Lion{.lr = 1e-3f}, job, 5),
                                  straight_run<amsp::optim::Lion, float>(mesh, plan, amsp::optim::Lion{.lr = 1e-3f}, job)));
  CHECK(amsp::test::bitwise_equal(resumed_run<amsp::optim::Adam, float>(mesh, plan, amsp::optim::Adam{.lr = 1e-2f}, job, 5),
                                  straight_run<amsp::optim::Adam, float>(mesh, plan, amsp::optim::Adam{.lr = 1e-2f}, job)));
}

TEST_CASE("resume is bitwise with a learning-rate schedule and parameter groups (decay mask, lr scale)") {
  const amsp::Mesh mesh(4, 2);
  JobConfig job;
  job.steps = 16;
  job.lr_at = [](int step) { return 1e-2f * (0.5f + 0.5f * std::cos(0.2f * static_cast<float>(step))); };
  job.param_groups = {{"l0.bias", {.lr_scale = 1.0f, .weight_decay = false}},
                      {"l2.scale", {.lr_scale = 0.25f, .weight_decay = false}},
                      {"l1.weight", {.lr_scale = 2.0f, .weight_decay = true}}};
  const auto rule = amsp::optim::AdamW{.lr = 1e-2f, .weight_decay = 0.1f};
  for (const char* name : {"zero3", "amsp-13b"})
    for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
      CAPTURE(name);
      job.os_layout = layout;
      const amsp::Plan plan = amsp::parse_plan(name, mesh);
      CHECK(amsp::test::bitwise_equal(resumed_run<amsp::optim::AdamW, float>(mesh, plan, rule, job, 7),
                                      straight_run<amsp::optim::AdamW, float>(mesh, plan, rule, job)));
    }
}

TEST_CASE("the user section comes back: rank 0's values, each rank's blob") {
  const amsp::test::ScratchDir dir;
  const amsp::Mesh mesh(2, 2);
  amsp::comm::run_on_threads(4, [&](Threads& comm) {
    const amsp::Plan plan = amsp::parse_plan("zero3", mesh);
    amsp::ShardedOptimizer<Threads, amsp::optim::AdamW> opt(comm, mesh, plan, amsp::optim::AdamW{}, amsp::test::odd_model());
    amsp::io::UserSection user;
    user.values = {{"epoch", "3"}, {"loader.position", std::to_string(1000 + comm.rank())}};
    for (int i = 0; i <= comm.rank(); ++i) user.blob.push_back(static_cast<std::byte>(comm.rank() * 16 + i));
    amsp::io::save(opt, comm, dir / "c", user);
    const amsp::io::Restored r = amsp::io::load(opt, comm, dir / "c");
    CHECK(r.values == std::vector<std::pair<std::string, std::string>>{{"epoch", "3"}, {"loader.position", "1000"}});
    CHECK(r.blob == user.blob);
    CHECK(r.saved_world_size == 4);
    // Every blob is readable by saved rank (what a run on another world size does).
    amsp::io::CheckpointReader reader(dir / "c");
    for (int saved = 0; saved < 4; ++saved) CHECK(reader.read_blob(saved).size() == static_cast<std::size_t>(saved + 1));
  });
}
