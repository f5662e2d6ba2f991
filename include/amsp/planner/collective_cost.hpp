#pragma once
// What one collective costs: the bytes each rank sends and the analytic α–β time used when no
// measured bandwidth profile covers a group.
//
// The byte convention is comm::bytes_sent_per_rank's (amsp/comm/traffic.hpp, nccl-tests' ring
// volumes: (n−1)/n · S per rank, 2(n−1)/n · S for all_reduce); the planner only extends it to
// fractional buffer sizes, since a shard of a module is Φ_i / s bytes on average.
//
// Analytic fallback, ring algorithm on a group of shape p0 × p1 (p0 ranks on each of p1 nodes):
//   - inside a node (p1 = 1) every rank streams its volume over its own NVLink/NVSwitch port:
//         t = V / B_intra + steps · α_intra
//   - across nodes, each ring leaves every node once, so a node sends V bytes per group; all
//     R / p0 groups of the same shape that the node takes part in run at once (the engine launches
//     a collective on every group of a set together), sharing the node's NICs:
//         t = max(V / B_intra, (R / p0) · V / B_node) + latency
//     B_node is the node's aggregate injection bandwidth (all NICs, one direction).
//   - latency: all_gather, reduce_scatter, broadcast and reduce run as rings in NCCL, n − 1 steps
//     each paced by the slowest hop (an inter-node one as soon as p1 > 1): (n − 1)·α. This is what
//     makes many small collectives over a whole 1024-rank world slow. all_reduce switches to
//     double binary trees on large groups: 2·((p0 − 1)·α_intra + ⌈log2 p1⌉·α_inter) (up and down),
//     with ring bandwidth, which trees also reach for large messages.
// The model knows no SHARP/CollNet, no congestion beyond NIC sharing, and no protocol switch
// (LL/LL128/Simple); a measured profile replaces it wherever it has the shape.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "amsp/comm/op.hpp"
#include "amsp/comm/traffic.hpp"
#include "amsp/sharding/mesh.hpp"

namespace amsp::planner {

/// Bytes one rank sends in `op` on a buffer of `bytes` (any non-negative size) over `n` ranks:
/// comm::bytes_sent_per_rank, which is linear in the buffer, scaled from a buffer of n bytes.
[[nodiscard]] inline double ring_bytes_per_rank(comm::op_kind op, double bytes, int n) {
  if (n <= 1) return 0.0;
  const auto per_byte = comm::bytes_sent_per_rank(op, static_cast<std::uint64_t>(n), n).to_double() / n;
  return bytes * per_byte;
}

/// Steps of `op`'s ring on `n` ranks: n − 1, twice that for all_reduce (reduce-scatter, then
/// all-gather); 0 for a group of one.
[[nodiscard]] inline int ring_steps(comm::op_kind op, int n) {
  if (n <= 1) return 0;
  return op == comm::op_kind::all_reduce ? 2 * (n - 1) : n - 1;
}

/// How all_gather and reduce_scatter hand data between ranks: a ring (NCCL; n − 1 hand-overs) or
/// recursive doubling / halving (Open MPI's tuned algorithms the emulated cluster pins,
/// docs/cluster.md: ⌈log2 n⌉ hand-overs, each exchanging with one partner). all_reduce stays a
/// ring in both (NCCL's and the pinned one).
enum class GatherScatterAlgorithm { ring, recursive };

/// Hand-overs of one call of `op` on `n` ranks under `algorithm`: ring_steps for a ring;
/// ⌈log2 n⌉ for recursive doubling / halving of all_gather and reduce_scatter (every other op a
/// ring); 0 for a group of one. Each hand-over may wait for a peer still computing
/// (Cluster::step_overhead_s).
[[nodiscard]] inline int algorithm_steps(comm::op_kind op, int n, GatherScatterAlgorithm algorithm) {
  const bool recursive = algorithm == GatherScatterAlgorithm::recursive &&
                         (op == comm::op_kind::all_gather || op == comm::op_kind::reduce_scatter);
  if (!recursive || n <= 1) return ring_steps(op, n);
  return static_cast<int>(std::ceil(std::log2(static_cast<double>(n))));
}

/// Effective link figures for the α–β model.
struct Links {
  double intra_bytes_per_second = 0;  ///< per GPU, one direction, inside a node (NVLink)
  double node_bytes_per_second = 0;   ///< per node, one direction, all NICs together
  double intra_latency_s = 0;         ///< per algorithm step inside a node
  double inter_latency_s = 0;         ///< per algorithm step across nodes
};

/// Analytic seconds of `op` on a buffer of `bytes` over a group of shape `group` (p0 × p1), on a
/// mesh with `ranks_per_node` ranks per node. Zero for a group of one rank.
[[nodiscard]] inline double analytic_seconds(comm::op_kind op, double bytes, Factor group, int ranks_per_node,
                                             const Links& links) {
  const int n = group.size();
  if (n <= 1 || bytes <= 0) return 0.0;
  const double volume = ring_bytes_per_rank(op, bytes, n);
  double transfer = group.intra > 1 ? volume / links.intra_bytes_per_second : 0.0;
  if (group.inter > 1) {
    const double groups_per_node = static_cast<double>(ranks_per_node) / group.intra;
    transfer = std::max(transfer, groups_per_node * volume / links.node_bytes_per_second);
  }
  const double step = group.inter > 1 ? links.inter_latency_s : links.intra_latency_s;
  const double latency =
      op == comm::op_kind::all_reduce
          ? 2.0 * ((group.intra - 1) * links.intra_latency_s +
                   std::ceil(std::log2(static_cast<double>(group.inter))) * links.inter_latency_s)
          : (n - 1) * step;
  return transfer + latency;
}

}  // namespace amsp::planner
