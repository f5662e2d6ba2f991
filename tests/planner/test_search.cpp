#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "amsp/planner/search.hpp"
#include "amsp/sharding/presets.hpp"

using namespace amsp;
using namespace amsp::planner;

namespace {
PlannerInputs inputs(const char* model, int nodes, bool recompute = false) {
  PlannerInputs in{parse_model(model), Workload{}, paper_cluster(nodes)};
  in.workload.recompute = recompute;
  in.workload.micro_batches = 2;
  return in;
}

const char* const presets_to_beat[] = {"ddp",     "zero1",   "zero2",    "zero3",   "mics(8)",
                                       "mics(16)", "hsdp(4)", "amsp-7b", "amsp-13b", "amsp-30b"};
}  // namespace

TEST_CASE("search: only valid plans that fit, every valid plan evaluated, best first") {
  for (CommMode mode : {CommMode::engine, CommMode::paper})
    for (RankBy rank : {RankBy::comm, RankBy::step, RankBy::step_serial}) {
      PlannerInputs in = inputs("13b", 4);
      in.mode = mode;
      const auto all = search(in, rank, true);
      CHECK(all.size() == enumerate_plans(in.cluster.mesh).size());
      std::vector<Evaluation> fitting;
      for (const Evaluation& e : all)
        if (e.fits) fitting.push_back(e);
      REQUIRE(!fitting.empty());
      CHECK(fitting.size() < all.size());  // 13B does not fit everywhere (DDP needs 16Φ)
      for (std::size_t i = 0; i < fitting.size(); ++i) {
        CHECK(is_valid(fitting[i].plan, in.cluster.mesh));
        CHECK(fitting[i].fits);
        CHECK(fitting[i].memory.total() <= 80e9);
        if (i > 0) CHECK(ranking_key(fitting[i - 1], rank) <= ranking_key(fitting[i], rank));
      }
    }
}

TEST_CASE("search: the best plan is never worse than any preset that fits") {
  for (const char* model : {"7b", "13b", "30b"})
    for (RankBy rank : {RankBy::comm, RankBy::step, RankBy::step_serial}) {
      const PlannerInputs in = inputs(model, 4, std::string(model) == "30b");
      const auto best = search(in, rank);
      REQUIRE(!best.empty());
      int compared = 0;
      for (const char* name : presets_to_beat) {
        const Evaluation e = evaluate(preset(name, in.cluster.mesh), in);
        if (!e.fits) continue;
        ++compared;
        CHECK_MESSAGE(ranking_key(best.front(), rank) <= ranking_key(e, rank), model, " vs ", name);
      }
      CHECK(compared >= 3);
    }
}

TEST_CASE("search: the paper's rule set keeps s_g at s_p or s_os") {
  PlannerInputs in = inputs("7b", 4);
  in.rules = RuleSet::paper;
  for (const Evaluation& e : search(in, RankBy::step, true)) CHECK((e.plan.g == e.plan.p || e.plan.g == e.plan.os));
  CHECK_THROWS_WITH_AS((void)evaluate(Plan{{1, 1}, {2, 1}, {8, 1}}, in), doctest::Contains("paper_gradient_factor"),
                       amsp::error);
}

TEST_CASE("step model: one GPU, no communication: compute plus update, by hand") {
  PlannerInputs in = inputs("7b", 1);
  in.cluster.mesh = Mesh(1, 1);
  in.workload.micro_batches = 1;
  const Evaluation e = evaluate(Plan{}, in);
  CHECK(e.terms.empty());
  const double flops = (6.0 * 6738415616.0 + 12.0 * 32 * 4096 * 4096) * 4096;  // model FLOPs of one sequence
  const double compute = flops / (312e12 * 0.65);
  const double update = 28.0 * 6738415616.0 / 2.039e12;
  CHECK(e.step.compute == doctest::Approx(compute));
  CHECK(e.step.update == doctest::Approx(update));
  CHECK(e.step.overlapped == doctest::Approx(compute + update));
  CHECK(e.step.serial == doctest::Approx(compute + update));
  CHECK(e.step.mfu == doctest::Approx(flops / ((compute + update) * 312e12)));
}

TEST_CASE("step model: overlap windows, worked by hand") {
  const ModelSpec m = parse_model("7b");
  Workload w;
  Cluster c = paper_cluster(1);
  c.compute_efficiency = 1.0;
  c.peak_flops = executed_flops_per_token(m, w) * 4096 / 3.0;  // compute = 3 s: forward 1 s, backward 2 s
  c.hbm_bytes_per_second = 1e30;                               // no update time
  c.overlap_slowdown = 0;
  const std::vector<CommTerm> terms{{"every", Window::every_micro_batch, {}},
                                    {"first", Window::first_forward, {}},
                                    {"last", Window::last_backward, {}}};
  const Plan plan{};
  StepTime s = step_time(plan, m, w, c, terms, {0.3, 0.1, 1.0});
  CHECK(s.compute == doctest::Approx(3.0));
  CHECK(s.overlapped == doctest::Approx(3.0));  // everything hides
  CHECK(s.serial == doctest::Approx(4.4));
  s = step_time(plan, m, w, c, terms, {0.3, 0.1, 2.5});
  CHECK(s.overlapped == doctest::Approx(1.0 + 2.5 + 0.2));  // the backward window is communication bound
  c.overlap_slowdown = 0.1;
  s = step_time(plan, m, w, c, terms, {0.3, 0.1, 2.5});
  CHECK(s.overlapped == doctest::Approx(1.0 + 0.1 * 0.2 + 2.7));
  CHECK(s.serial == doctest::Approx(5.9));
  w.micro_batches = 2;  // 6 s of compute: windows of 1, 3 and 2 s share 4 s of per-micro-batch traffic
  s = step_time(plan, m, w, c, terms, {4.0, 0.0, 0.0});
  CHECK(s.overlapped == doctest::Approx((1.0 + 0.1 * 4.0 / 6) + (3.0 + 0.1 * 2.0) + (2.0 + 0.1 * 4.0 * 2 / 6)));
}
