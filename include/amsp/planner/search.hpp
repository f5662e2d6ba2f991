#pragma once
// The planner: evaluate one plan (memory, communication by term, step time, MFU) and search every
// valid plan of the mesh for the best that fits in GPU memory.
//
// Ranking (RankBy): by communication seconds (what the paper's planner minimises), by step time
// with overlap (the default: hidden communication is free), or by step time without overlap.
// Ties (common with overlap: several plans hide all their traffic) go to the plan with less
// communication, then less memory, then to enumeration order, so the result is deterministic.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"
#include "amsp/planner/schedule_options.hpp"
#include "amsp/planner/memory_model.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/planner/step_model.hpp"
#include "amsp/planner/workload.hpp"
#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/plan_rules.hpp"

namespace amsp::planner {

/// Everything a plan is priced against.
struct PlannerInputs {
  ModelSpec model;
  Workload workload;
  Cluster cluster;
  ScheduleOptions schedule{};
  CommMode mode = CommMode::engine;
  RuleSet rules = RuleSet::amsp;
};

/// Fails with the rule of the first invalid part of `in`.
inline void validate(const PlannerInputs& in) {
  validate(in.model);
  validate(in.workload);
  validate(in.cluster);
  validate(in.schedule);
}

struct TermCost {
  std::string name;
  Window window = Window::every_micro_batch;
  double seconds = 0;
  double bytes_per_rank = 0;
  bool intra_node = true;
  bool measured = false;  ///< every call of the term timed from the bandwidth profile
};

struct Evaluation {
  Plan plan;
  MemoryBreakdown memory;
  bool fits = false;  ///< memory.total() <= GPU memory
  std::vector<TermCost> terms;
  double comm_seconds = 0;
  StepTime step;
};

enum class RankBy { comm, step, step_serial };

namespace detail {
inline Evaluation evaluate_on(const Plan& plan, const PlannerInputs& in, std::span<const Module> units) {
  validate(plan, in.cluster.mesh, in.rules);
  const PlanGroups groups(in.cluster.mesh, plan);
  const std::vector<CommTerm> terms = comm_terms(groups, units, in.workload.micro_batches, in.schedule, in.mode);
  Evaluation e;
  e.plan = plan;
  e.memory = memory_per_rank(plan, in.model, in.workload, in.schedule,
                             in.cluster.reserved_bytes);
  e.fits = e.memory.total() <= in.cluster.gpu_memory_bytes;
  const TermPrices prices = term_prices(terms, in.cluster);
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const CommTerm& t = terms[i];
    const bool measured = std::all_of(t.calls.begin(), t.calls.end(), [&](const CollectiveCall& c) {
      return in.cluster.measured(c.op, c.group);
    });
    e.terms.push_back({t.name, t.window, prices.seconds[i], t.bytes_per_rank(), t.intra_node(), measured});
    e.comm_seconds += prices.seconds[i];
  }
  e.step = step_time(plan, in.model, in.workload, in.cluster, terms, prices.seconds, units,
                     in.schedule.reshard_after_forward, &prices.chained, &prices.gapped);
  return e;
}
}  // namespace detail

/// Prices `plan` (validated on the cluster's mesh under `in.rules`).
[[nodiscard]] inline Evaluation evaluate(const Plan& plan, const PlannerInputs& in) {
  validate(in);
  return detail::evaluate_on(plan, in, in.model.units(in.schedule.granularity));
}

/// The figure `rank` orders plans by (smaller is better).
[[nodiscard]] inline double ranking_key(const Evaluation& e, RankBy rank) {
  switch (rank) {
    case RankBy::comm: return e.comm_seconds;
    case RankBy::step: return e.step.overlapped;
    case RankBy::step_serial: return e.step.serial;
  }
  return e.step.overlapped;
}

/// Every valid plan of the mesh, evaluated, best first; only plans that fit in GPU memory unless
/// `include_unfit`. With the whole-tensor layout, plans with s_g != s_p are skipped (the engine
/// cannot run them).
[[nodiscard]] inline std::vector<Evaluation> search(const PlannerInputs& in, RankBy rank = RankBy::step,
                                                    bool include_unfit = false) {
  validate(in);
  const std::vector<Module> units = in.model.units(in.schedule.granularity);
  std::vector<Evaluation> found;
  for (const Plan& plan : enumerate_plans(in.cluster.mesh, in.rules)) {
    if (!layout_supports(in.schedule.os_layout, plan)) continue;  // the engine cannot run it
    Evaluation e = detail::evaluate_on(plan, in, units);
    if (e.fits || include_unfit) found.push_back(std::move(e));
  }
  std::stable_sort(found.begin(), found.end(), [rank](const Evaluation& a, const Evaluation& b) {
    if (a.fits != b.fits) return a.fits;
    const double ka = ranking_key(a, rank), kb = ranking_key(b, rank);
    if (ka != kb) return ka < kb;
    if (a.comm_seconds != b.comm_seconds) return a.comm_seconds < b.comm_seconds;
    return a.memory.total() < b.memory.total();
  });
  return found;
}

}  // namespace amsp::planner
