#pragma once
// Communication per training step of a plan, as a list of terms, each a set of collective calls
// on one kind of rank group, in two modes:
//
// CommMode::engine -- the schedule amsp's engine runs (ARCHITECTURE.md, "One training step"):
//   p_all_gather       s_p > 1: every module's parameters gathered in the P group, in forward and
//                      again in backward (once if gathered weights are kept), every micro-batch
//   p_reduce_scatter   s_p > 1: every module's gradient reduce-scattered in the P group, every
//                      micro-batch
//   g_reduce_scatter   s_g > s_p: the P-shard gradient of every module reduce-scattered over the
//                      s_g/s_p ranks sharing the P shard (PlanGroups::g_split), every micro-batch
//   os_reduce_scatter  s_os > s_g, last micro-batch: the G shard reduce-scattered to OS shards over
//                      the s_os/s_g ranks sharing it (os_split), in buckets
//   os_all_reduce      world > s_os, last micro-batch: the OS-shard gradient all-reduced across the
//                      world/s_os ranks holding the same OS shard (os_replica), in buckets
//   spread             s_os > s_p, after the update: every module's updated P-shard slice spread
//                      over the s_os/s_p ranks sharing the P shard (spread), by AllGather (even
//                      split) or Broadcast (whole-tensor ownership)
// CommMode::paper -- the paper's §4 formulas (PAPER.md §4), with profiled or analytic t():
//   T_p   = M·Σ_i [2·t(AG, 2Φ_i, s_p) + t(RS, 2Φ_i, s_p)]
//   T_g   = (M−1)·(2Φ/(U·s_p))·t(AR, U, s_g/s_p)
//   T_os0 = (2Φ/(U·s_p))·t(AR, U, s_dp/s_p)
//   T_os1 = (s_os/s_p)·t(BC, 2Φ/s_os, s_os/s_p)
//   The paper sums T_p over the L layers' modules; we sum over every module, the embedding and the
//   lm head included, since ZeRO-3-style engines gather those too.
//
// Each term also carries its overlap window (step_model.hpp) and the bytes one rank sends, split
// by whether the term's groups stay inside a node -- the classification amsp's traffic counter
// uses -- so the engine's measured traffic can be compared with expected_traffic() term by term.
// Every rank sends the same bytes: the groups of a set have equal sizes and the ring convention
// (collective_cost.hpp) charges every member alike.

#include <cmath>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "amsp/comm/op.hpp"
#include "amsp/planner/cluster.hpp"
#include "amsp/planner/collective_cost.hpp"
#include "amsp/planner/engine_options.hpp"
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

  [[nodiscard]] double seconds(const Cluster& cluster) const {
    double t = 0;
    for (const CollectiveCall& c : calls) t += c.count * cluster.collective_seconds(c.op, c.bytes, c.group);
    return t;
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

// Adds `per_module_count` calls of `op` per module, on buffers of `bytes_per_param` × Φ_i / `shard`,
// merging modules of equal size into one call.
inline void add_per_module(CommTerm& term, std::span<const Module> modules, comm::op_kind op, double bytes_per_param,
                           double shard, double per_module_count, Factor group) {
  std::map<std::int64_t, double> by_size;
  for (const Module& m : modules) by_size[m.params] += per_module_count;
  for (const auto& [params, count] : by_size)
    term.calls.push_back({op, bytes_per_param * static_cast<double>(params) / shard, count, group});
}

// `total` bytes in equal buckets of at most `bucket` bytes.
inline void add_bucketed(CommTerm& term, comm::op_kind op, double total, double bucket, Factor group) {
  const double buckets = std::max(1.0, std::ceil(total / bucket));
  term.calls.push_back({op, total / buckets, buckets, group});
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

inline std::vector<CommTerm> engine_terms(const PlanGroups& groups, std::span<const Module> modules, int micro_batches,
                                          const EngineOptions& o) {
  const Plan& plan = groups.plan();
  const Mesh& mesh = groups.mesh();
  const double M = micro_batches;
  const double phi = std::accumulate(modules.begin(), modules.end(), 0.0,
                                     [](double s, const Module& m) { return s + static_cast<double>(m.params); });
  const int s_p = plan.p.size(), s_g = plan.g.size(), s_os = plan.os.size();
  std::vector<CommTerm> terms;
  if (s_p > 1) {
    CommTerm gather{"p_all_gather", Window::every_micro_batch, {}};
    add_per_module(gather, modules, comm::op_kind::all_gather, o.param_wire_bytes, 1.0,
                   M * (o.reshard_after_forward ? 2.0 : 1.0), plan.p);
    terms.push_back(std::move(gather));
    CommTerm reduce{"p_reduce_scatter", Window::every_micro_batch, {}};
    add_per_module(reduce, modules, comm::op_kind::reduce_scatter, o.grad_wire_bytes, 1.0, M, plan.p);
    terms.push_back(std::move(reduce));
  }
  if (s_g > s_p) {
    CommTerm term{"g_reduce_scatter", Window::every_micro_batch, {}};
    add_per_module(term, modules, comm::op_kind::reduce_scatter, o.grad_wire_bytes, s_p, M,
                   group_shape(groups.g_split(), mesh));
    terms.push_back(std::move(term));
  }
  if (s_os > s_g) {
    CommTerm term{"os_reduce_scatter", Window::last_backward, {}};
    add_bucketed(term, comm::op_kind::reduce_scatter, o.grad_wire_bytes * phi / s_g, o.bucket_bytes,
                 group_shape(groups.os_split(), mesh));
    terms.push_back(std::move(term));
  }
  if (mesh.world_size() > s_os) {
    CommTerm term{"os_all_reduce", Window::last_backward, {}};
    add_bucketed(term, comm::op_kind::all_reduce, o.grad_wire_bytes * phi / s_os, o.bucket_bytes,
                 group_shape(groups.os_replica(), mesh));
    terms.push_back(std::move(term));
  }
  if (s_os > s_p) {
    CommTerm term{"spread", Window::first_forward, {}};
    const auto op = o.spread == SpreadKind::all_gather ? comm::op_kind::all_gather : comm::op_kind::broadcast;
    add_per_module(term, modules, op, o.param_wire_bytes, s_p, 1.0, group_shape(groups.spread(), mesh));
    terms.push_back(std::move(term));
  }
  return terms;
}

inline std::vector<CommTerm> paper_terms(const PlanGroups& groups, std::span<const Module> modules, int micro_batches,
                                         const EngineOptions& o) {
  const Plan& plan = groups.plan();
  const Mesh& mesh = groups.mesh();
  const double M = micro_batches;
  const double U = o.bucket_bytes;
  const double phi = std::accumulate(modules.begin(), modules.end(), 0.0,
                                     [](double s, const Module& m) { return s + static_cast<double>(m.params); });
  const int s_p = plan.p.size(), s_g = plan.g.size(), s_os = plan.os.size();
  std::vector<CommTerm> terms;
  if (s_p > 1) {
    CommTerm term{"T_p", Window::every_micro_batch, {}};
    add_per_module(term, modules, comm::op_kind::all_gather, 2.0, 1.0, 2.0 * M, plan.p);
    add_per_module(term, modules, comm::op_kind::reduce_scatter, 2.0, 1.0, M, plan.p);
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

/// The communication terms of one step of `groups.plan()` over `modules` with M micro-batches.
[[nodiscard]] inline std::vector<CommTerm> comm_terms(const PlanGroups& groups, std::span<const Module> modules,
                                                      int micro_batches, const EngineOptions& options = {},
                                                      CommMode mode = CommMode::engine) {
  check(micro_batches >= 1, "planner.workload", "micro-batch count must be at least 1, got ", micro_batches);
  validate(options);
  return mode == CommMode::engine ? detail::engine_terms(groups, modules, micro_batches, options)
                                  : detail::paper_terms(groups, modules, micro_batches, options);
}

/// Bytes one rank sends per step in one term, split by whether the term's groups cross nodes.
struct TermTraffic {
  std::string term;
  double intra_node_bytes = 0;
  double inter_node_bytes = 0;
};

/// Expected per-rank traffic of one step of the engine's schedule for `plan` on `mesh` over
/// `modules` (any list of tensor sizes: a ModelSpec's modules() or an engine test's own layout),
/// with M micro-batches. Only terms with traffic are listed.
[[nodiscard]] inline std::vector<TermTraffic> expected_traffic(const Plan& plan, const Mesh& mesh,
                                                               std::span<const Module> modules, int micro_batches,
                                                               const EngineOptions& options = {}) {
  const PlanGroups groups(mesh, plan);
  std::vector<TermTraffic> traffic;
  for (const CommTerm& term : comm_terms(groups, modules, micro_batches, options, CommMode::engine)) {
    const double bytes = term.bytes_per_rank();
    traffic.push_back({term.name, term.intra_node() ? bytes : 0.0, term.intra_node() ? 0.0 : bytes});
  }
  return traffic;
}

}  // namespace amsp::planner
