#pragma once
// The schedule without overlap, between a unit's backward gather and its gradient reduction: the
// backward compute that hides behind the gather's stagger.
//
// On a shared link the ranks' transfers of one call end one after another, not together: the
// gapped profile's slowest rank (ProfileEntry::seconds) and its fastest (first_seconds) differ by
// the call's completion spread (BandwidthProfile::completion_spread; 4.1 ms of an 11 ms gather of
// 200 KB over 2x4 at 200 Mbit/s, 12 of 16 ms over 4x2). The engine's backward gathers unit u,
// computes its backward and reduce-scatters its gradient over the same P group. Under recursive
// doubling and halving (the algorithms the emulated cluster pins) the reduction opens with the
// very exchange the gather closed with, so a pair of ranks done with the gather early computes
// and starts the reduction while the others still receive: the link does not wait for that pair's
// compute. Up to the gather's spread, the unit's backward hides behind it:
//     hidden = M · Σ_u min(backward_u, spread_u)
// and the schedule without overlap lasts M·c + Σ terms + update − hidden (step_model.hpp).
// A ring's reduction instead opens with a neighbour that the gather may still be feeding, and a
// gather that follows compute opens inside the node (its peers there still compute): neither is
// counted. Traced rank by rank on the emulated cluster (docs/planner-check-accelerator.md, "The
// gather's stagger"): ZeRO-3 on 2x4 at 200 Mbit/s hides 3 ms behind each large unit's gather,
// MiCS likewise; the ZeRO-1/2 reductions, which end together, hide nothing.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"

namespace amsp::planner {

/// The units of one size whose backward can hide behind their gather's stagger.
struct StaggeredUnits {
  double share = 0;   ///< one unit's share of the parameters (of the backward's compute)
  double units = 0;   ///< how many units have this size
  double spread = 0;  ///< seconds between the fastest and the slowest rank's end of its gather
};
/// Every unit size of the step's backward gathers; empty: nothing hides.
using BackwardStagger = std::vector<StaggeredUnits>;

/// The seconds between the fastest and the slowest rank's end of `op` after compute
/// (Cluster::profile_after_compute's completion_spread), 0 where it did not measure one.
[[nodiscard]] inline double completion_spread_seconds(const Cluster& cluster, comm::op_kind op, double bytes,
                                                      Factor group) {
  if (group.size() <= 1 || !cluster.profile_after_compute) return 0.0;
  return cluster.profile_after_compute->completion_spread(op, group, bytes).value_or(0.0);
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
                   completion_spread_seconds(cluster, c.op, c.bytes, c.group)});
  return out;
}

/// Seconds of backward compute hidden per step: M · Σ min(backward × share, spread) over the
/// units, `backward` the seconds of one micro-batch's backward.
[[nodiscard]] inline double staggered_backward_seconds(const BackwardStagger& stagger, double backward,
                                                       int micro_batches) {
  double hidden = 0;
  for (const StaggeredUnits& u : stagger) hidden += u.units * std::min(backward * u.share, u.spread);
  return micro_batches * hidden;
}

}  // namespace amsp::planner
