#pragma once
// What the engine's schedule sends per step, term by term, in the byte convention of
// amsp/comm/traffic.hpp. The traffic-counting communicator measures exactly these volumes (the
// engine tests check it for every plan), and the planner's model of our schedule reuses them.

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "amsp/comm/traffic.hpp"
#include "amsp/engine/bucket_geometry.hpp"

namespace amsp {

/// The collectives of one training step, in schedule order.
enum class TrafficTerm : int {
  param_gather,    ///< AllGather of P shards in the P group (per gather, per micro-batch)
  grad_reduce_p,   ///< ReduceScatter of full gradients in the P group (per micro-batch)
  grad_reduce_g,   ///< ReduceScatter of P-shard gradients across the G split (per micro-batch)
  grad_reduce_os,  ///< G shard -> OS shard: ReduceScatter, or Reduce per owned segment (once)
  grad_replicas,   ///< AllReduce across OS replicas (once)
  grad_norm,       ///< AllReduce of the sum of squares in the OS group (once)
  param_spread,    ///< AllGather, or Broadcast per owned segment, of updated parameters (once)
};
inline constexpr int traffic_term_count = 7;

[[nodiscard]] constexpr std::string_view name_of(TrafficTerm t) {
  constexpr std::string_view names[] = {"param_gather", "grad_reduce_p", "grad_reduce_g", "grad_reduce_os",
                                        "grad_replicas", "grad_norm",     "param_spread"};
  return names[static_cast<int>(t)];
}

/// One rank's bytes sent per step, per term, split by locality of the group the term uses.
struct TrafficExpectation {
  comm::ByteVolume intra[traffic_term_count];
  comm::ByteVolume inter[traffic_term_count];

  [[nodiscard]] comm::ByteVolume intra_total() const {
    comm::ByteVolume total;
    for (const auto& v : intra) total += v;
    return total;
  }
  [[nodiscard]] comm::ByteVolume inter_total() const {
    comm::ByteVolume total;
    for (const auto& v : inter) total += v;
    return total;
  }
};

struct TrafficScenario {
  int micro_batches = 1;
  /// AllGathers of each bucket per micro-batch: 1 when the gathered parameters are kept for the
  /// backward, 2 when they are released after the forward and gathered again.
  int gathers_per_micro_batch = 1;
  std::size_t param_bytes = 4;  ///< bytes per parameter element (4 fp32, 2 bf16)
  OsLayout os_layout = OsLayout::even_split;
  bool grad_norm = true;  ///< clipping or the overflow check computes the global norm
};

/// Expected bytes `rank` sends per step for a model given as bucket layouts (bucket_layout()).
[[nodiscard]] inline TrafficExpectation expected_traffic(const PlanGroups& groups, std::span<const FlatLayout> buckets,
                                                         const TrafficScenario& s, int rank) {
  const Plan& plan = groups.plan();
  TrafficExpectation out;
  const auto add = [&](TrafficTerm term, const GroupSet& set, comm::op_kind kind, std::uint64_t full_bytes,
                       std::uint64_t calls) {
    const RankGroup& group = set.group_of(rank);
    if (group.size() <= 1 || calls == 0) return;
    const comm::ByteVolume v = comm::bytes_sent_per_rank(kind, full_bytes, group.size()) * calls;
    (group.intra_node ? out.intra : out.inter)[static_cast<int>(term)] += v;
  };
  const auto M = static_cast<std::uint64_t>(s.micro_batches);
  const int p_index = groups.shard_index(Component::params, rank);
  const int spread_position =
      groups.shard_index(Component::optimizer_states, rank) - p_index * (plan.os.size() / plan.p.size());
  for (const FlatLayout& layout : buckets) {
    const std::size_t n = layout.buffer_size(layout.dtypes().front());
    const BucketGeometry geo = bucket_geometry(n, groups, rank);
    add(TrafficTerm::param_gather, groups.p(), comm::op_kind::all_gather, n * s.param_bytes,
        M * static_cast<std::uint64_t>(s.gathers_per_micro_batch));
    add(TrafficTerm::grad_reduce_p, groups.p(), comm::op_kind::reduce_scatter, n * 4, M);
    add(TrafficTerm::grad_reduce_g, groups.g_split(), comm::op_kind::reduce_scatter, geo.p.size() * 4, M);
    std::size_t os_elements = geo.os.size();
    if (s.os_layout == OsLayout::even_split) {
      add(TrafficTerm::grad_reduce_os, groups.os_split(), comm::op_kind::reduce_scatter, geo.g.size() * 4, 1);
      add(TrafficTerm::param_spread, groups.spread(), comm::op_kind::all_gather, geo.p.size() * s.param_bytes, 1);
    } else {
      const auto segments = owned_segments(layout, geo.p, plan.os.size() / plan.p.size());
      for (const OwnedSegment& seg : segments) {
        add(TrafficTerm::grad_reduce_os, groups.spread(), comm::op_kind::reduce, seg.size * 4, 1);
        add(TrafficTerm::param_spread, groups.spread(), comm::op_kind::broadcast, seg.size * s.param_bytes, 1);
      }
      os_elements = owned_elements(segments, spread_position);
    }
    if (os_elements > 0) add(TrafficTerm::grad_replicas, groups.os_replica(), comm::op_kind::all_reduce, os_elements * 4, 1);
  }
  if (s.grad_norm) add(TrafficTerm::grad_norm, groups.os(), comm::op_kind::all_reduce, sizeof(double), 1);
  return out;
}

}  // namespace amsp
