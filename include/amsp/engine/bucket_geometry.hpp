#pragma once
// Where a rank's shards of one bucket sit: the one computation the optimizer, the expected-traffic
// model and the memory report share.
//
// A bucket is one flat buffer of n elements (padded so that every factor of the plan splits it
// evenly). Shards nest (amsp/sharding/groups.hpp): the OS shard lies inside the G shard, which
// lies inside the P shard, at offsets given by the nested shard indices.

#include <cstddef>
#include <vector>

#include "amsp/engine/options.hpp"
#include "amsp/sharding/groups.hpp"
#include "amsp/sharding/layout.hpp"

namespace amsp {

struct BucketGeometry {
  std::size_t n = 0;     ///< padded elements of the whole bucket
  ShardRange p, g, os;   ///< this rank's shards, in bucket coordinates
  std::size_t os_in_p = 0;  ///< offset of the OS shard inside the P shard
  std::size_t os_in_g = 0;  ///< offset of the OS shard inside the G shard
};

[[nodiscard]] inline BucketGeometry bucket_geometry(std::size_t padded_elements, const PlanGroups& groups, int rank) {
  const Plan& plan = groups.plan();
  BucketGeometry geo;
  geo.n = padded_elements;
  geo.p = even_shard(geo.n, plan.p.size(), groups.shard_index(Component::params, rank));
  geo.g = even_shard(geo.n, plan.g.size(), groups.shard_index(Component::grads, rank));
  geo.os = even_shard(geo.n, plan.os.size(), groups.shard_index(Component::optimizer_states, rank));
  geo.os_in_p = geo.os.begin - geo.p.begin;
  geo.os_in_g = geo.os.begin - geo.g.begin;
  return geo;
}

/// One tensor's part of a P shard, owned whole by one member of the spread group.
struct OwnedSegment {
  std::size_t offset_in_p = 0;      ///< where the segment starts inside the P shard
  std::size_t size = 0;             ///< elements
  int owner = 0;                    ///< position of the owner in the spread group
  std::size_t offset_in_owner = 0;  ///< where it starts in the owner's compact OS shard
};

/// The whole-tensor layout of one P shard: each tensor's part of the shard is a segment, given
/// whole to the least-loaded of `owners` ranks (largest first). Every rank sharing the P shard
/// computes the same list. Padding belongs to no segment: it stays zero and is never updated.
[[nodiscard]] inline std::vector<OwnedSegment> owned_segments(const FlatLayout& layout, const ShardRange& p_shard,
                                                              int owners) {
  std::vector<OwnedSegment> segments;
  for (const TensorSlot& slot : layout.slots()) {
    const ShardRange part = slot.range().intersect(p_shard);
    if (!part.empty()) segments.push_back({part.begin - p_shard.begin, part.size(), 0, 0});
  }
  std::vector<std::size_t> sizes;
  for (const OwnedSegment& s : segments) sizes.push_back(s.size);
  const Ownership ownership = greedy_ownership(sizes, owners);
  std::vector<std::size_t> filled(static_cast<std::size_t>(owners), 0);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    segments[i].owner = ownership.owner[i];
    segments[i].offset_in_owner = filled[static_cast<std::size_t>(segments[i].owner)];
    filled[static_cast<std::size_t>(segments[i].owner)] += segments[i].size;
  }
  return segments;
}

/// Elements of the compact OS shard of the spread-group member at `position`.
[[nodiscard]] inline std::size_t owned_elements(const std::vector<OwnedSegment>& segments, int position) {
  std::size_t total = 0;
  for (const OwnedSegment& s : segments)
    if (s.owner == position) total += s.size;
  return total;
}

/// The flat layout of one bucket: its tensors in declaration order, all in the parameter dtype,
/// padded so that the OS factor (and so every factor of the plan) splits it evenly.
[[nodiscard]] inline FlatLayout bucket_layout(const BucketSpec& spec, dtype param_type, const Plan& plan,
                                              std::size_t alignment_bytes) {
  std::vector<TensorSpec> tensors = spec.tensors;
  for (TensorSpec& t : tensors) t.type = param_type;
  return FlatLayout(std::move(tensors), alignment_bytes, plan.os.size());
}

}  // namespace amsp
