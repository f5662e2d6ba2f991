#pragma once
// Communication per training step of a plan, as a list of terms, each a set of collective calls
// on one kind of rank group, in two modes:
//
// CommMode::engine -- the schedule amsp's engine runs, term by term as the engine names them
// (amsp/engine/expected_traffic.hpp), over the model's units (the engine's buckets):
//   param_gather    s_p > 1: each unit's parameters gathered in the P group, in forward and again
//                   in backward (once if gathered weights are kept), every micro-batch
//   grad_reduce_p   s_p > 1: each unit's gradient reduce-scattered in the P group, every micro-batch
//   grad_reduce_g   s_g > s_p: each unit's P-shard gradient reduce-scattered over the s_g/s_p ranks
//                   sharing the P shard (PlanGroups::g_split), every micro-batch
//   grad_reduce_os  last micro-batch, G shard -> OS shard: even split, ReduceScatter of each unit's
//                   G shard over the s_os/s_g ranks sharing it (os_split); whole tensor, Reduce of
//                   each unit's P-shard slice to its owner over the s_os/s_p ranks sharing the P
//                   shard (spread)
//   grad_replicas   world > s_os, last micro-batch: AllReduce of each unit's OS-shard gradient
//                   across the world/s_os ranks holding the same OS shard (os_replica)
//   grad_norm       s_os > 1: AllReduce of one double (the squared norm) in the OS group
//   param_spread    s_os > s_p, after the update: each unit's P-shard slice back to the s_os/s_p
//                   ranks sharing the P shard (spread), by AllGather (even split) or Broadcast
//                   (whole tensor)
// CommMode::paper -- the AMSP paper's formulas (arXiv 2311.00257), with profiled or analytic t():
//   T_p   = M·Σ_i [2·t(AG, 2Φ_i, s_p) + t(RS, 2Φ_i, s_p)]
//   T_g   = (M−1)·(2Φ/(U·s_p))·t(AR, U, s_g/s_p)
//   T_os0 = (2Φ/(U·s_p))·t(AR, U, s_dp/s_p)
//   T_os1 = (s_os/s_p)·t(BC, 2Φ/s_os, s_os/s_p)
//   Φ_i are the units (the paper sums over the L layers' modules; we include the embedding and
//   the lm head, which ZeRO-3-style engines gather too).
//
// Each term also carries its overlap window (step_model.hpp) and the bytes one rank sends, split
// by whether the term's groups stay inside a node -- the classification of amsp's traffic counter
// -- so expected_traffic() can be compared with the engine's own expectation term by term.
// Shards are exact fractions (Φ_i / s, no padding) and with whole-tensor ownership the OS shards
// of a spread group differ in size, so a rank's figures are the average over the ranks.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/comm/op.hpp"
#include "amsp/engine/expected_traffic.hpp"
#include "amsp/planner/cluster.hpp"
#include "amsp/planner/collective_cost.hpp"
#include "amsp/planner/schedule_options.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/sharding/groups.hpp"

namespace amsp::planner {

enum class CommMode { engine, paper };

/// The compute a term can hide behind (step_model.hpp).
enum class Window {
  every_micro_batch,  ///< spread over all micro-batches' compute
  first_forward,      ///< the first micro-batch's forward (the spread of the previous update)
  last_backward,      ///< the last micro-batch's backward (gradient reduction)
};

[[nodiscard]] constexpr std::string_view name_of(Window w) {
  switch (w) {
    case Window::every_micro_batch: return "every micro-batch";
    case Window::first_forward: return "first forward";
    case Window::last_backward: return "last backward";
  }
  return "?";
}

/// `count` calls of `op` per step, each on a buffer of `bytes` (the full buffer S), on groups of
/// shape `group` (p0 ranks on each of p1 nodes).
struct CollectiveCall {
  comm::op_kind op{};
  double bytes = 0;
  double count = 0;
  Factor group{};
};

struct CommTerm {
  std::string name;
  Window window = Window::every_micro_batch;
  std::vector<CollectiveCall> calls;
  /// The schedule without overlap issues each of the term's calls right after a compute segment,
  /// on node links no call has used since: the calls of the every-micro-batch window (between
  /// two compute segments), and in the engine's schedule also a unit's last-micro-batch
  /// reductions, issued as soon as the unit's backward has computed (engine_terms). Such a call
  /// is priced as a call after compute (Cluster::profile_after_compute): its links drained, the
  /// ranks just out of compute; a call chained behind another is priced back to back.
  bool after_compute = true;
  /// False for a call that follows a collective over the same ranks: the gradient norm, issued
  /// once the stream drained, whose last call (the OS stage's reduction) had the whole OS group
  /// there. Such a call costs its transfer alone (Cluster::transfer_seconds), no waits for peers
  /// per hand-over: traced at 0.07-0.17 ms on the emulated cluster, where the waits of the 14
  /// steps of a ring over 8 ranks priced it at up to 0.9 ms (docs/planner-check-queued-and-norm.md).
  bool waits_for_peers = true;
  /// How many of the term's groups cross each node link at once (1 for a term inside a node): a
  /// set of one group per link (ZeRO's spread over the world) crosses as one ring, whose hand-overs
  /// wait for each other; a set whose groups hold fewer ranks per node than the node has (a
  /// partial spread, one group per local rank) keeps the link busy with several transfers at once,
  /// and the node's next use of the result waits for the slowest of them. Set for the spread
  /// (engine_terms), which the overlapped schedule prices by it (step_pipeline.hpp,
  /// docs/planner-check-spread-pairs.md).
  int groups_per_link = 1;
  /// True for the first of a unit's last-micro-batch reductions when no every-micro-batch
  /// reduction precedes it (engine_terms): issued right after the unit's backward, between two
  /// compute segments, so it waits for its group to come out of compute
  /// (Cluster::chain_head_waits).
  bool heads_chain = false;

  CommTerm() = default;
  CommTerm(std::string n, Window w, std::vector<CollectiveCall> c = {})
      : name(std::move(n)), window(w), calls(std::move(c)), after_compute(w == Window::every_micro_batch) {}

  /// Seconds of all calls per step in the schedule without overlap: each call priced as a call
  /// after compute when the term is `after_compute`, else back to back.
  [[nodiscard]] double seconds(const Cluster& cluster) const { return seconds(cluster, after_compute); }
  /// The same with the profile chosen by `priced_after_compute` (the overlapped schedule decides
  /// per call: step_pipeline.hpp). The calls of the every-micro-batch window also wait for their
  /// group to come out of compute (Cluster::between_compute_seconds) in both. Priced after compute,
  /// a paced AllReduce is reached as far apart as its ranks left the call before it in the term
  /// (the calls are in issue order, one per unit after its compute; the first reached together):
  /// Cluster::arrival_spread_seconds.
  [[nodiscard]] double seconds(const Cluster& cluster, bool priced_after_compute) const {
    double t = 0;
    double spread = 0;  // how far apart the ranks reach the next call
    for (const CollectiveCall& c : calls) {
      const double wait = waits_for_compute(cluster) ? cluster.between_compute_seconds(c.group) : 0.0;
      const auto departure = priced_after_compute && waits_for_peers
                                 ? cluster.departure_spread_seconds(c.op, c.bytes, c.group)
                                 : std::nullopt;
      if (departure) {
        // The first of the count reached as the call before was left, the others as it was.
        const auto one = [&](double arrival) {
          return cluster.with_waits(*cluster.arrival_spread_seconds(c.op, c.bytes, c.group, arrival), c.op, c.group) +
                 wait;
        };
        t += c.count >= 1 ? one(spread) + (c.count - 1) * one(*departure) : c.count * one(spread);
        spread = *departure;
        continue;
      }
      spread = 0;
      t += c.count * ((waits_for_peers ? cluster.collective_seconds(c.op, c.bytes, c.group, priced_after_compute)
                                       : cluster.transfer_seconds(c.op, c.bytes, c.group, priced_after_compute)) +
                      wait);
    }
    return t;
  }
  /// True when the term's calls sit between two compute segments (the every-micro-batch window);
  /// the others follow other calls of the step or a unit's last backward.
  [[nodiscard]] bool between_compute() const { return window == Window::every_micro_batch; }
  /// True when each call waits for its group to come out of compute (Cluster::sync_overhead_s):
  /// the every-micro-batch window's calls, and the head of a unit's last-micro-batch chain where
  /// the cluster says so (Cluster::chain_head_waits).
  [[nodiscard]] bool waits_for_compute(const Cluster& cluster) const {
    return between_compute() || (heads_chain && cluster.chain_head_waits);
  }
  /// Bytes one rank sends per step in this term (ring convention).
  [[nodiscard]] double bytes_per_rank() const {
    double b = 0;
    for (const CollectiveCall& c : calls) b += c.count * ring_bytes_per_rank(c.op, c.bytes, c.group.size());
    return b;
  }
  /// True when every group of the term stays inside one node.
  [[nodiscard]] bool intra_node() const {
    return std::all_of(calls.begin(), calls.end(), [](const CollectiveCall& c) { return c.group.inter == 1; });
  }
};

/// The shape p0 × p1 of the groups of a set (ranks per node × nodes of its first group; all groups
/// of a PlanGroups set have the same shape).
[[nodiscard]] inline Factor group_shape(const GroupSet& set, const Mesh& mesh) {
  const RankGroup& g = set.groups().front();
  std::vector<int> nodes;
  for (int r : g.ranks) nodes.push_back(mesh.node_of(r));
  std::sort(nodes.begin(), nodes.end());
  const int spanned = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  return {g.size() / spanned, spanned};
}

namespace detail {

// Adds `per_unit_count` calls of `op` per unit, on buffers of `bytes_per_param` × Φ_i / `shard`,
// merging units of equal size into one call.
inline void add_per_unit(CommTerm& term, std::span<const Module> units, comm::op_kind op, double bytes_per_param,
                           double shard, double per_unit_count, Factor group) {
  std::map<std::int64_t, double> by_size;
  for (const Module& m : units) by_size[m.params] += per_unit_count;
  for (const auto& [params, count] : by_size)
    term.calls.push_back({op, bytes_per_param * static_cast<double>(params) / shard, count, group});
}

// The same in the order the engine issues a unit's last-micro-batch reductions, one after each
// unit's backward (last unit first), merging only neighbours of equal size: the order a term's
// calls reach each other in (CommTerm::seconds).
inline void add_per_unit_backward(CommTerm& term, std::span<const Module> units, comm::op_kind op,
                                  double bytes_per_param, double shard, Factor group) {
  for (auto m = units.rbegin(); m != units.rend(); ++m) {
    const double bytes = bytes_per_param * static_cast<double>(m->params) / shard;
    if (!term.calls.empty() && term.calls.back().bytes == bytes) term.calls.back().count += 1.0;
    else term.calls.push_back({op, bytes, 1.0, group});
  }
}

// Shape of the ranks sharing rank 0's P shard across the world (the paper's s_dp/s_p group).
inline Factor p_replica_shape(const PlanGroups& groups) {
  const Mesh& mesh = groups.mesh();
  const int index = groups.shard_index(Component::params, 0);
  int members = 0;
  std::vector<int> nodes;
  for (int r = 0; r < mesh.world_size(); ++r)
    if (groups.shard_index(Component::params, r) == index) {
      ++members;
      if (nodes.empty() || nodes.back() != mesh.node_of(r)) nodes.push_back(mesh.node_of(r));
    }
  const int spanned = static_cast<int>(nodes.size());
  return {members / spanned, spanned};
}

inline std::string term_name(TrafficTerm t) { return std::string(name_of(t)); }

inline std::vector<CommTerm> engine_terms(const PlanGroups& groups, std::span<const Module> units, int micro_batches,
                                          const ScheduleOptions& o) {
  const Plan& plan = groups.plan();
  const Mesh& mesh = groups.mesh();
  const double M = micro_batches;
  const int s_p = plan.p.size(), s_g = plan.g.size(), s_os = plan.os.size();
  const bool even = o.os_layout == OsLayout::even_split;
  check(even || s_g == s_p, "planner.os_layout", "the whole-tensor optimizer-state layout needs s_g = s_p, plan ",
        to_string(plan), " has s_g = ", s_g, " and s_p = ", s_p);
  std::vector<CommTerm> terms;
  const auto term = [&](TrafficTerm t, Window w) -> CommTerm& { return terms.emplace_back(term_name(t), w); };
  if (s_p > 1) {
    add_per_unit(term(TrafficTerm::param_gather, Window::every_micro_batch), units, comm::op_kind::all_gather,
                   o.param_wire_bytes, 1.0, M * (o.reshard_after_forward ? 2.0 : 1.0), plan.p);
    add_per_unit(term(TrafficTerm::grad_reduce_p, Window::every_micro_batch), units, comm::op_kind::reduce_scatter,
                   o.grad_wire_bytes, 1.0, M, plan.p);
  }
  if (s_g > s_p)
    add_per_unit(term(TrafficTerm::grad_reduce_g, Window::every_micro_batch), units, comm::op_kind::reduce_scatter,
                   o.grad_wire_bytes, s_p, M, group_shape(groups.g_split(), mesh));
  // A unit's last-micro-batch reductions follow its backward at once (reduce_gradients hands the
  // whole chain to the communication stream), so the first of the unit's chain to cross nodes
  // finds the node links idle; a reduction behind one that crossed them is chained.
  const auto crossed = [&] {
    return std::any_of(terms.begin(), terms.end(), [](const CommTerm& t) {
      const bool reduces = t.name != term_name(TrafficTerm::param_gather);  // the terms so far: gathers, reductions
      return reduces && !t.intra_node();
    });
  };
  // The chain's head is the first reduction when no every-micro-batch reduction comes before it.
  const auto headed = [&] {
    return std::any_of(terms.begin(), terms.end(),
                       [](const CommTerm& t) { return t.name != term_name(TrafficTerm::param_gather); });
  };
  const auto reduction = [&](TrafficTerm t) -> CommTerm& {
    const bool links_idle = !crossed(), head = !headed();
    CommTerm& added = term(t, Window::last_backward);
    added.after_compute = links_idle;
    added.heads_chain = head;
    return added;
  };
  if (even && s_os > s_g)
    add_per_unit_backward(reduction(TrafficTerm::grad_reduce_os), units, comm::op_kind::reduce_scatter,
                          o.grad_wire_bytes, s_g, group_shape(groups.os_split(), mesh));
  if (!even && s_os > s_p)
    add_per_unit_backward(reduction(TrafficTerm::grad_reduce_os), units, comm::op_kind::reduce,
                          o.grad_wire_bytes, s_p, group_shape(groups.spread(), mesh));
  if (mesh.world_size() > s_os)
    add_per_unit_backward(reduction(TrafficTerm::grad_replicas), units, comm::op_kind::all_reduce,
                          o.grad_wire_bytes, s_os, group_shape(groups.os_replica(), mesh));
  if (s_os > 1) {
    CommTerm& norm = term(TrafficTerm::grad_norm, Window::last_backward);
    norm.calls.push_back({comm::op_kind::all_reduce, sizeof(double), 1.0, plan.os});
    norm.waits_for_peers = false;
  }
  if (s_os > s_p) {
    const Factor shape = group_shape(groups.spread(), mesh);
    CommTerm& spread = term(TrafficTerm::param_spread, Window::first_forward);
    add_per_unit(spread, units, even ? comm::op_kind::all_gather : comm::op_kind::broadcast, o.param_wire_bytes, s_p,
                 1.0, shape);
    spread.groups_per_link = shape.inter > 1 ? mesh.ranks_per_node() / shape.intra : 1;
  }
  return terms;
}

inline std::vector<CommTerm> paper_terms(const PlanGroups& groups, std::span<const Module> units, int micro_batches,
                                         const ScheduleOptions& o) {
  const Plan& plan = groups.plan();
  const Mesh& mesh = groups.mesh();
  const double M = micro_batches;
  const double U = o.bucket_bytes;
  const double phi = std::accumulate(units.begin(), units.end(), 0.0,
                                     [](double s, const Module& m) { return s + static_cast<double>(m.params); });
  const int s_p = plan.p.size(), s_g = plan.g.size(), s_os = plan.os.size();
  std::vector<CommTerm> terms;
  if (s_p > 1) {
    CommTerm term{"T_p", Window::every_micro_batch, {}};
    add_per_unit(term, units, comm::op_kind::all_gather, 2.0, 1.0, 2.0 * M, plan.p);
    add_per_unit(term, units, comm::op_kind::reduce_scatter, 2.0, 1.0, M, plan.p);
    terms.push_back(std::move(term));
  }
  if (s_g > s_p && micro_batches > 1)
    terms.push_back({"T_g",
                     Window::every_micro_batch,
                     {{comm::op_kind::all_reduce, U, (M - 1) * 2.0 * phi / (U * s_p), group_shape(groups.g_split(), mesh)}}});
  if (mesh.world_size() > s_p)
    terms.push_back({"T_os0",
                     Window::last_backward,
                     {{comm::op_kind::all_reduce, U, 2.0 * phi / (U * s_p), p_replica_shape(groups)}}});
  if (s_os > s_p)
    terms.push_back({"T_os1",
                     Window::first_forward,
                     {{comm::op_kind::broadcast, 2.0 * phi / s_os, static_cast<double>(s_os / s_p),
                       group_shape(groups.spread(), mesh)}}});
  return terms;
}

}  // namespace detail

/// The communication terms of one step of `groups.plan()` over `units` with M micro-batches.
[[nodiscard]] inline std::vector<CommTerm> comm_terms(const PlanGroups& groups, std::span<const Module> units,
                                                      int micro_batches, const ScheduleOptions& options = {},
                                                      CommMode mode = CommMode::engine) {
  check(micro_batches >= 1, "planner.workload", "micro-batch count must be at least 1, got ", micro_batches);
  validate(options);
  return mode == CommMode::engine ? detail::engine_terms(groups, units, micro_batches, options)
                                  : detail::paper_terms(groups, units, micro_batches, options);
}

/// Bytes one rank sends per step in one term, split by whether the term's groups cross nodes.
struct TermTraffic {
  std::string term;
  double intra_node_bytes = 0;
  double inter_node_bytes = 0;
};

/// Expected per-rank traffic of one step of the engine's schedule for `plan` on `mesh` over
/// `units` (any list of bucket sizes: a ModelSpec's units() or an engine test's own buckets),
/// with M micro-batches. Only terms with traffic are listed.
[[nodiscard]] inline std::vector<TermTraffic> expected_traffic(const Plan& plan, const Mesh& mesh,
                                                               std::span<const Module> units, int micro_batches,
                                                               const ScheduleOptions& options = {}) {
  const PlanGroups groups(mesh, plan);
  std::vector<TermTraffic> traffic;
  for (const CommTerm& term : comm_terms(groups, units, micro_batches, options, CommMode::engine)) {
    const double bytes = term.bytes_per_rank();
    traffic.push_back({term.name, term.intra_node() ? bytes : 0.0, term.intra_node() ? 0.0 : bytes});
  }
  return traffic;
}

}  // namespace amsp::planner
