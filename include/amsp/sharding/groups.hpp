#pragma once
// Rank groups: the one construction of every group of ranks that the engine, the collectives
// tests, the traffic model and the planner use.
//
// A factor a × b groups aligned blocks: a consecutive local ranks on each of b consecutive nodes,
// members in node-major order. A rank's position in its group is its shard index for that factor.
//
// Shards nest: a rank's G shard is a slice of its P shard and its OS shard a slice of its G shard.
// So the shard index of G (and OS) is not the rank's position in its G group but
//   index_g  = index_p × (s_g / s_p)  + position among the ranks of its G group sharing its P shard
//   index_os = index_g × (s_os / s_g) + position among the ranks of its OS group sharing its G shard
// and every group below lists its members in the order of the shard they own, so that an
// AllGather or ReduceScatter over it places each chunk where the nested layout expects it.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/sharding/plan_rules.hpp"

namespace amsp {

struct RankGroup {
  std::vector<int> ranks;   ///< members in collective order: position i holds chunk i
  bool intra_node = true;   ///< all members on one node

  [[nodiscard]] int size() const { return static_cast<int>(ranks.size()); }
  [[nodiscard]] bool contains(int rank) const { return std::find(ranks.begin(), ranks.end(), rank) != ranks.end(); }
  /// Position of `rank` in the group; fails with rule group.member if it is not a member.
  [[nodiscard]] int position_of(int rank) const {
    const auto it = std::find(ranks.begin(), ranks.end(), rank);
    check(it != ranks.end(), "group.member", "rank ", rank, " is not a member of this group");
    return static_cast<int>(it - ranks.begin());
  }
};

/// A partition of the world into equally sized groups.
class GroupSet {
public:
  GroupSet() = default;
  GroupSet(const Mesh& mesh, std::vector<RankGroup> groups) : groups_(std::move(groups)) {
    group_of_rank_.assign(static_cast<std::size_t>(mesh.world_size()), -1);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      RankGroup& group = groups_[g];
      // Collectives over a group set assume one group size (the traffic model counts per group).
      check(group.size() == groups_.front().size() && group.size() > 0, "group.partition", "group ", g, " has ",
            group.size(), " ranks but group 0 has ", groups_.front().size());
      for (int r : group.ranks) {
        check(r >= 0 && r < mesh.world_size(), "group.partition", "rank ", r, " is outside mesh ", to_string(mesh));
        check(group_of_rank_[static_cast<std::size_t>(r)] < 0, "group.partition", "rank ", r,
              " appears in two groups");
        group_of_rank_[static_cast<std::size_t>(r)] = static_cast<int>(g);
      }
      group.intra_node = std::all_of(group.ranks.begin(), group.ranks.end(), [&](int r) {
        return mesh.node_of(r) == mesh.node_of(group.ranks.front());
      });
    }
    for (std::size_t r = 0; r < group_of_rank_.size(); ++r)
      check(group_of_rank_[r] >= 0, "group.partition", "rank ", r, " belongs to no group");
  }

  [[nodiscard]] const std::vector<RankGroup>& groups() const { return groups_; }
  [[nodiscard]] int group_size() const { return groups_.empty() ? 0 : groups_.front().size(); }
  [[nodiscard]] const RankGroup& group_of(int rank) const {
    check(rank >= 0 && static_cast<std::size_t>(rank) < group_of_rank_.size(), "group.member", "rank ", rank,
          " is outside the world of ", group_of_rank_.size(), " ranks");
    return groups_[static_cast<std::size_t>(group_of_rank_[static_cast<std::size_t>(rank)])];
  }
  [[nodiscard]] int index_of_group(int rank) const { return group_of_rank_.at(static_cast<std::size_t>(rank)); }
  [[nodiscard]] int position_of(int rank) const { return group_of(rank).position_of(rank); }
  /// True when every group stays inside one node (the traffic never crosses nodes).
  [[nodiscard]] bool intra_node() const {
    return std::all_of(groups_.begin(), groups_.end(), [](const RankGroup& g) { return g.intra_node; });
  }

private:
  std::vector<RankGroup> groups_;
  std::vector<int> group_of_rank_;
};

/// The aligned-block groups of factor `f` (a | R, b | N, b > 1 only if a = R); members node-major.
[[nodiscard]] inline GroupSet factor_groups(const Mesh& mesh, const Factor& f) {
  const int R = mesh.ranks_per_node();
  const int N = mesh.nodes();
  check(f.intra >= 1 && f.inter >= 1 && R % f.intra == 0 && N % f.inter == 0 && (f.inter == 1 || f.intra == R),
        "group.factor", "factor ", to_string(f), " is not an aligned block of mesh ", to_string(mesh));
  std::vector<RankGroup> groups;
  for (int node_block = 0; node_block < N / f.inter; ++node_block)
    for (int local_block = 0; local_block < R / f.intra; ++local_block) {
      RankGroup group;
      for (int dn = 0; dn < f.inter; ++dn)
        for (int dl = 0; dl < f.intra; ++dl)
          group.ranks.push_back(mesh.rank_of(node_block * f.inter + dn, local_block * f.intra + dl));
      groups.push_back(std::move(group));
    }
  return GroupSet(mesh, std::move(groups));
}

/// Every group and shard index a validated plan needs. Sizes: p = s_p, g_split = s_g/s_p,
/// os_split = s_os/s_g, spread = s_os/s_p, os_replica = world/s_os, g_replica = world/s_g.
class PlanGroups {
public:
  PlanGroups(const Mesh& mesh, const Plan& plan) : mesh_(mesh), plan_(plan) {
    validate(plan, mesh);
    p_ = factor_groups(mesh, plan.p);
    g_ = factor_groups(mesh, plan.g);
    os_ = factor_groups(mesh, plan.os);
    const int world = mesh.world_size();
    index_[0].resize(static_cast<std::size_t>(world));
    index_[1].resize(static_cast<std::size_t>(world));
    index_[2].resize(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) index_[0][static_cast<std::size_t>(r)] = p_.position_of(r);
    g_split_ = split_by_shard(g_, 0, 1);
    os_split_ = split_by_shard(os_, 1, 2);
    spread_ = members_sharing(os_, 0, 2);
    os_replica_ = replicas(2);
    g_replica_ = replicas(1);
  }

  [[nodiscard]] const Mesh& mesh() const { return mesh_; }
  [[nodiscard]] const Plan& plan() const { return plan_; }

  /// Groups of the P factor: AllGather parameters, ReduceScatter gradients, every micro-batch.
  [[nodiscard]] const GroupSet& p() const { return p_; }
  /// Groups of the G and OS factors themselves (whole sharding groups, node-major).
  [[nodiscard]] const GroupSet& g() const { return g_; }
  [[nodiscard]] const GroupSet& os() const { return os_; }
  /// Inside a G group, the ranks holding the same P shard, ordered by G shard: reduce a P-shard
  /// gradient into G shards.
  [[nodiscard]] const GroupSet& g_split() const { return g_split_; }
  /// Inside an OS group, the ranks holding the same G shard, ordered by OS shard: reduce G-shard
  /// gradients into OS shards.
  [[nodiscard]] const GroupSet& os_split() const { return os_split_; }
  /// Inside an OS group, the ranks holding the same P shard, ordered by OS shard: spread updated
  /// parameters from OS shards back to the P shard.
  [[nodiscard]] const GroupSet& spread() const { return spread_; }
  /// Across OS groups, the ranks holding the same OS shard: the last-micro-batch AllReduce.
  [[nodiscard]] const GroupSet& os_replica() const { return os_replica_; }
  /// Across G groups, the ranks holding the same G shard.
  [[nodiscard]] const GroupSet& g_replica() const { return g_replica_; }

  /// The nested shard index of `rank` for component `c`, in [0, s_c).
  [[nodiscard]] int shard_index(Component c, int rank) const {
    return index_[static_cast<int>(c)].at(static_cast<std::size_t>(rank));
  }

private:
  // Inside each `outer` group, ranks sharing the shard of component `inner` form one group,
  // ordered by rank; their order defines the shard index of component `outer_component`.
  GroupSet split_by_shard(const GroupSet& outer, int inner, int outer_component) {
    const int ratio = plan_.factor(static_cast<Component>(outer_component)).size() /
                      plan_.factor(static_cast<Component>(inner)).size();
    GroupSet set = members_sharing(outer, inner, inner);
    for (const RankGroup& group : set.groups())
      for (int pos = 0; pos < group.size(); ++pos) {
        const int r = group.ranks[static_cast<std::size_t>(pos)];
        index_[outer_component][static_cast<std::size_t>(r)] = index_[inner][static_cast<std::size_t>(r)] * ratio + pos;
      }
    return set;
  }

  // Inside each `outer` group, the ranks with equal shard index of component `key`, ordered by
  // their shard index of component `order` (then by rank).
  GroupSet members_sharing(const GroupSet& outer, int key, int order) const {
    std::vector<RankGroup> groups;
    for (const RankGroup& o : outer.groups()) {
      std::vector<std::vector<int>> by_key;
      for (int r : o.ranks) {
        const auto k = static_cast<std::size_t>(index_[key][static_cast<std::size_t>(r)]);
        if (by_key.size() <= k) by_key.resize(k + 1);
        by_key[k].push_back(r);
      }
      for (auto& members : by_key) {
        std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
          return index_[order][static_cast<std::size_t>(a)] < index_[order][static_cast<std::size_t>(b)];
        });
        groups.push_back(RankGroup{std::move(members), true});
      }
    }
    return GroupSet(mesh_, std::move(groups));
  }

  // Across the world, the ranks with equal shard index of component `c`, ordered by rank.
  GroupSet replicas(int c) const {
    std::vector<RankGroup> groups(static_cast<std::size_t>(plan_.factor(static_cast<Component>(c)).size()));
    for (int r = 0; r < mesh_.world_size(); ++r)
      groups[static_cast<std::size_t>(index_[c][static_cast<std::size_t>(r)])].ranks.push_back(r);
    return GroupSet(mesh_, std::move(groups));
  }

  Mesh mesh_;
  Plan plan_;
  GroupSet p_, g_, os_, g_split_, os_split_, spread_, os_replica_, g_replica_;
  std::vector<int> index_[3];
};

}  // namespace amsp
