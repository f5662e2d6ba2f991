#pragma once
// The schedule without overlap, between a unit's backward gather and its gradient reduction: the
// backward compute that hides behind the gather's stagger.
//
// On a shared link the ranks' transfers of one call end one after another, not together. The
// engine's backward gathers unit u, computes its backward and reduce-scatters its gradient over
// the same P group; under recursive doubling and halving (the algorithms the emulated cluster
// pins) the reduction opens with the very exchange the gather closed with, between partners half
// the group apart. A pair of partners that has both ended the gather early computes and starts
// the reduction while the others still receive: the link does not wait for that pair's compute.
// The gapped profile measures by how much the first such pair ends before the slowest rank (its
// head start, BandwidthProfile::pair_head_start; of several groups, the one whose first pair ends
// last, since the engine's next reductions couple the groups). Up to that head start the unit's
// backward hides:
//     hidden = M · Σ_u min(backward_u, head_start_u)
// and the schedule without overlap lasts M·c + Σ terms + update − hidden (step_model.hpp).
// A ring's reduction instead opens with a neighbour that the gather may still be feeding, and a
// gather that follows compute opens inside the node (its peers there still compute): neither is
// counted. Found in per-rank timelines of the emulated cluster (amsp-train --timeline;
// docs/planner-check-stagger.md): ZeRO-3 on 2x4 at 100 Mbit/s, whose pairs end the gather in the
// same order on every link, gains nearly the whole spread of its ranks; MiCS, whose two groups'
// pairs do not, about half of it.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"

namespace amsp::planner {

/// The units of one size whose backward can hide behind their gather's stagger.
struct StaggeredUnits {
  double share = 0;       ///< one unit's share of the parameters (of the backward's compute)
  double units = 0;       ///< how many units have this size
  double head_start = 0;  ///< seconds by which its gather's first pair ends before its slowest rank
};
/// Every unit size of the step's backward gathers; empty: nothing hides.
using BackwardStagger = std::vector<StaggeredUnits>;

/// The head start of the first pair of `op` after compute (Cluster::profile_after_compute's
/// pair_head_start), 0 where it did not measure one.
[[nodiscard]] inline double pair_head_start_seconds(const Cluster& cluster, comm::op_kind op, double bytes,
                                                     Factor group) {
  if (group.size() <= 1 || !cluster.profile_after_compute) return 0.0;
  return cluster.profile_after_compute->pair_head_start(op, group, bytes).value_or(0.0);
}

/// The stagger of the backward gathers of engine-mode `terms` (comm_model.hpp) with M
/// micro-batches on a cluster whose gathers and scatters run by recursive doubling and halving
/// (the caller's knowledge: Cluster::gather_scatter also sets the overhead's hand-over count, which
/// the emulated cluster's check counts as a ring's): non-empty when the backward gathers again
/// (`gather_in_backward`) and the gather (param_gather) and the reduction (grad_reduce_p) share
/// one group that crosses nodes.
[[nodiscard]] inline BackwardStagger backward_stagger(const std::vector<CommTerm>& terms, const Cluster& cluster,
                                                      int micro_batches, bool gather_in_backward) {
  if (!gather_in_backward) return {};
  const auto named = [&](TrafficTerm t) {
    const auto it = std::find_if(terms.begin(), terms.end(), [&](const CommTerm& c) { return c.name == name_of(t); });
    return it == terms.end() || it->calls.empty() ? nullptr : &*it;
  };
  const CommTerm* gather = named(TrafficTerm::param_gather);
  const CommTerm* reduce = named(TrafficTerm::grad_reduce_p);
  if (!gather || !reduce) return {};
  const Factor group = gather->calls.front().group;
  if (group.inter <= 1 || reduce->calls.front().group != group) return {};
  const double gathers_per_unit = 2.0 * micro_batches;  // forward and backward, every micro-batch
  double total_bytes = 0;
  for (const CollectiveCall& c : gather->calls) total_bytes += c.bytes * c.count / gathers_per_unit;
  BackwardStagger out;
  for (const CollectiveCall& c : gather->calls)
    out.push_back({c.bytes / total_bytes, c.count / gathers_per_unit,
                   pair_head_start_seconds(cluster, c.op, c.bytes, c.group)});
  return out;
}

/// Seconds of backward compute hidden per step: M · Σ min(backward × share, head start) over the
/// units, `backward` the seconds of one micro-batch's backward.
[[nodiscard]] inline double staggered_backward_seconds(const BackwardStagger& stagger, double backward,
                                                       int micro_batches) {
  double hidden = 0;
  for (const StaggeredUnits& u : stagger) hidden += u.units * std::min(backward * u.share, u.head_start);
  return micro_batches * hidden;
}

}  // namespace amsp::planner
