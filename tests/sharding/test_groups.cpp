// Rank groups of every valid plan on every mesh of the sweep: partitions of the world with the
// documented sizes, P ⊂ G ⊂ OS nesting, nested shard indices, collective member order, and
// intra-node flags, all checked against arithmetic on (node, local) done here.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "amsp/sharding/groups.hpp"
#include "sharding_test_util.hpp"

using amsp::Component;
using amsp::GroupSet;
using amsp::Mesh;
using amsp::Plan;
using amsp::PlanGroups;
using amsp::RankGroup;

namespace {
// A partition of all ranks into groups of `size`, consistent with group_of / position_of, and
// each group's intra_node flag equal to "all members on one node" computed from rank / R.
void check_partition(const GroupSet& set, const Mesh& mesh, int size, const char* what) {
  INFO("group set ", what);
  std::vector<int> seen(static_cast<std::size_t>(mesh.world_size()), 0);
  CHECK(set.group_size() == size);
  CHECK(static_cast<int>(set.groups().size()) * size == mesh.world_size());
  bool all_intra = true;
  for (const RankGroup& group : set.groups()) {
    REQUIRE(group.size() == size);
    std::set<int> nodes;
    for (int pos = 0; pos < group.size(); ++pos) {
      const int r = group.ranks[static_cast<std::size_t>(pos)];
      REQUIRE((r >= 0 && r < mesh.world_size()));
      ++seen[static_cast<std::size_t>(r)];
      nodes.insert(r / mesh.ranks_per_node());
      REQUIRE(set.group_of(r).ranks == group.ranks);
      REQUIRE(set.position_of(r) == pos);
    }
    REQUIRE(group.intra_node == (nodes.size() == 1));
    all_intra = all_intra && group.intra_node;
  }
  for (int count : seen) REQUIRE(count == 1);
  CHECK(set.intra_node() == all_intra);
}

// The groups of factor a × b: ranks whose (node / b, local / a) agree, in increasing rank order.
void check_factor_groups(const GroupSet& set, const Mesh& mesh, const amsp::Factor& f) {
  const int R = mesh.ranks_per_node();
  for (const RankGroup& group : set.groups()) {
    REQUIRE(std::is_sorted(group.ranks.begin(), group.ranks.end()));  // node-major order
    const int first = group.ranks.front();
    for (int r : group.ranks) {
      REQUIRE(r / R / f.inter == first / R / f.inter);
      REQUIRE(r % R / f.intra == first % R / f.intra);
    }
    REQUIRE(group.intra_node == (f.inter == 1));
  }
}

// Every group of `inner` lies inside a single group of `outer`.
void check_nested(const GroupSet& inner, const GroupSet& outer, const char* what) {
  INFO(what);
  for (const RankGroup& group : inner.groups()) {
    const int outer_index = outer.index_of_group(group.ranks.front());
    for (int r : group.ranks) REQUIRE(outer.index_of_group(r) == outer_index);
  }
}

// Each group of `set`: members share the shard index of `key`, lie in one group of `within`, and
// position i holds shard index first + i of component `order`, where first = key index × ratio.
void check_split(const GroupSet& set, const PlanGroups& groups, const GroupSet& within, Component key,
                 Component order, int ratio, const char* what) {
  INFO(what);
  check_nested(set, within, what);
  for (const RankGroup& group : set.groups()) {
    const int key_index = groups.shard_index(key, group.ranks.front());
    for (int pos = 0; pos < group.size(); ++pos) {
      const int r = group.ranks[static_cast<std::size_t>(pos)];
      REQUIRE(groups.shard_index(key, r) == key_index);
      REQUIRE(groups.shard_index(order, r) == key_index * ratio + pos);
    }
  }
}

// The replica groups of component c: all ranks with one shard index, one group per index.
void check_replicas(const GroupSet& set, const PlanGroups& groups, Component c) {
  std::set<int> indices;
  for (const RankGroup& group : set.groups()) {
    const int index = groups.shard_index(c, group.ranks.front());
    indices.insert(index);
    for (int r : group.ranks) REQUIRE(groups.shard_index(c, r) == index);
    REQUIRE(std::is_sorted(group.ranks.begin(), group.ranks.end()));
  }
  CHECK(static_cast<int>(indices.size()) == groups.plan().factor(c).size());
}

// Within every group of a factor, the shard indices of component c are a permutation of 0..s-1.
void check_indices_cover(const GroupSet& set, const PlanGroups& groups, Component c) {
  const int s = groups.plan().factor(c).size();
  for (const RankGroup& group : set.groups()) {
    std::vector<int> indices;
    for (int r : group.ranks) indices.push_back(groups.shard_index(c, r));
    std::sort(indices.begin(), indices.end());
    for (int i = 0; i < s; ++i) REQUIRE(indices[static_cast<std::size_t>(i)] == i);
  }
}
}  // namespace

TEST_CASE("every group set of every valid plan on every sweep mesh") {
  int plans_checked = 0;
  amsp_test::for_each_mesh([&](const Mesh& mesh) {
    for (const Plan& plan : amsp::enumerate_plans(mesh)) {
      INFO("plan ", amsp::to_string(plan), " on mesh ", amsp::to_string(mesh));
      const PlanGroups groups(mesh, plan);
      const int world = mesh.world_size();
      const int sp = plan.p.size();
      const int sg = plan.g.size();
      const int sos = plan.os.size();
      check_partition(groups.p(), mesh, sp, "p");
      check_partition(groups.g(), mesh, sg, "g");
      check_partition(groups.os(), mesh, sos, "os");
      check_partition(groups.g_split(), mesh, sg / sp, "g_split");
      check_partition(groups.os_split(), mesh, sos / sg, "os_split");
      check_partition(groups.spread(), mesh, sos / sp, "spread");
      check_partition(groups.os_replica(), mesh, world / sos, "os_replica");
      check_partition(groups.g_replica(), mesh, world / sg, "g_replica");

      check_factor_groups(groups.p(), mesh, plan.p);
      check_factor_groups(groups.g(), mesh, plan.g);
      check_factor_groups(groups.os(), mesh, plan.os);
      check_nested(groups.p(), groups.g(), "P groups inside G groups");
      check_nested(groups.g(), groups.os(), "G groups inside OS groups");

      for (int r = 0; r < world; ++r) {
        const int ip = groups.shard_index(Component::params, r);
        const int ig = groups.shard_index(Component::grads, r);
        const int ios = groups.shard_index(Component::optimizer_states, r);
        REQUIRE(ip == groups.p().position_of(r));
        REQUIRE((ip >= 0 && ip < sp && ig >= 0 && ig < sg && ios >= 0 && ios < sos));
        REQUIRE(ig / (sg / sp) == ip);    // a G shard is a slice of the rank's P shard
        REQUIRE(ios / (sos / sg) == ig);  // an OS shard is a slice of the rank's G shard
      }
      check_indices_cover(groups.p(), groups, Component::params);
      check_indices_cover(groups.g(), groups, Component::grads);
      check_indices_cover(groups.os(), groups, Component::optimizer_states);

      check_split(groups.g_split(), groups, groups.g(), Component::params, Component::grads, sg / sp, "g_split");
      check_split(groups.os_split(), groups, groups.os(), Component::grads, Component::optimizer_states, sos / sg,
                  "os_split");
      // spread: ordered by OS shard, covering exactly the OS shards inside the members' P shard.
      check_split(groups.spread(), groups, groups.os(), Component::params, Component::optimizer_states, sos / sp,
                  "spread");
      check_replicas(groups.os_replica(), groups, Component::optimizer_states);
      check_replicas(groups.g_replica(), groups, Component::grads);
      ++plans_checked;
    }
  });
  CHECK(plans_checked > 700);  // 784 valid plans on the sweep alone
}

TEST_CASE("a worked example: p=2x1, g=4x1, os=8x2 on 8x2") {
  const Mesh mesh(8, 2);
  const PlanGroups groups(mesh, Plan{{2, 1}, {4, 1}, {8, 2}});
  CHECK(groups.p().group_of(5).ranks == std::vector<int>{4, 5});
  CHECK(groups.g().group_of(5).ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(groups.os().group_of(5).ranks.size() == 16);
  CHECK(!groups.os().intra_node());
  CHECK(groups.p().intra_node());
  // Rank 5: P shard 1 of 2; its G group {4,5,6,7} holds P shards 0,1,0,1; rank 5 is the first
  // of {5, 7} (same P shard), so G shard 1 × 2 + 0 = 2.
  CHECK(groups.shard_index(Component::params, 5) == 1);
  CHECK(groups.g_split().group_of(5).ranks == std::vector<int>{5, 7});
  CHECK(groups.shard_index(Component::grads, 5) == 2);
  CHECK(groups.shard_index(Component::grads, 7) == 3);
  // OS: G shard 2 is held by the ranks with P shard 1 that come first among their G group's
  // holders of P shard 1: 1, 5 (node 0) and 9, 13 (node 1). Ordered by rank: 1, 5, 9, 13.
  CHECK(groups.os_split().group_of(5).ranks == std::vector<int>{1, 5, 9, 13});
  CHECK(groups.shard_index(Component::optimizer_states, 5) == 2 * 4 + 1);
  CHECK(groups.os_split().group_of(5).intra_node == false);
  // spread of rank 5: every rank with P shard 1, ordered by OS shard.
  const std::vector<int>& spread = groups.spread().group_of(5).ranks;
  CHECK(spread.size() == 8);
  for (std::size_t i = 0; i < spread.size(); ++i)
    CHECK(groups.shard_index(Component::optimizer_states, spread[i]) == 8 + static_cast<int>(i));
  CHECK(groups.os_replica().group_size() == 1);
}

TEST_CASE("group errors") {
  const Mesh mesh(4, 2);
  CHECK(amsp_test::error_of([&] { (void)amsp::factor_groups(mesh, {3, 1}); })->rule() == "group.factor");
  CHECK(amsp_test::error_of([&] { (void)amsp::factor_groups(mesh, {2, 2}); })->rule() == "group.factor");
  CHECK(amsp_test::error_of([&] { (void)PlanGroups(mesh, Plan{{4, 1}, {2, 1}, {4, 1}}); })->rule() == "plan.ordering");
  const GroupSet p = amsp::factor_groups(mesh, {2, 1});
  CHECK(amsp_test::error_of([&] { (void)p.group_of(8); })->rule() == "group.member");
  CHECK(amsp_test::error_of([&] { (void)p.groups().front().position_of(7); })->rule() == "group.member");
  CHECK(amsp_test::error_of([&] { GroupSet(mesh, {RankGroup{{0, 1, 2, 3}}, RankGroup{{3, 4, 5, 6, 7}}}); })->rule() ==
        "group.partition");
  CHECK(amsp_test::error_of([&] { GroupSet(mesh, {RankGroup{{0, 1, 2, 3}}}); })->rule() == "group.partition");
  CHECK(amsp_test::error_of([&] { GroupSet(mesh, {RankGroup{{0, 1, 2, 3, 4, 5, 6, 9}}}); })->rule() ==
        "group.partition");
  const auto unequal = amsp_test::error_of([&] { GroupSet(mesh, {RankGroup{{0, 1, 2}}, RankGroup{{3, 4, 5, 6, 7}}}); });
  REQUIRE(unequal.has_value());
  CHECK(unequal->rule() == "group.partition");
  CHECK(std::string(unequal->what()).find("has 5 ranks but group 0 has 3") != std::string::npos);
}
