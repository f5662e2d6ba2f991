#pragma once
// Compile-time sharding choices, one per model state: ShardPolicy<Replica>, ShardPolicy<Full>,
// ShardPolicy<Partial>. Storage and schedules specialise on them (a Replica component allocates
// no gather scratch and issues no collective) while the planner still chooses at run time:
// dispatch() turns a validated runtime Plan into the matching three policy types.

#include <type_traits>
#include <utility>

#include "amsp/sharding/plan_rules.hpp"

namespace amsp {

struct Replica {};  ///< s = 1: every rank holds the whole state
struct Full {};     ///< s = world: one copy split over every rank (ZeRO-3)
struct Partial {};  ///< 1 < s < world: split inside groups of s ranks, replicated across them

// Each policy means what its name says. Replica and Full carry no factor: theirs follows from the
// mesh (factor(mesh)), so `ShardPolicy<Full>{}` is the whole world on every mesh, and giving Full a
// factor does not compile. Partial must be given its group (no default constructor); a 1x1 group
// is rule policy.partial_is_replica (a compile-time error in a constant expression), and a group
// that covers the whole mesh is rule policy.partial_is_full when the mesh is known (factor(mesh)).

template <class Kind>
struct ShardPolicy {
  static_assert(sizeof(Kind) == 0, "amsp: no ShardPolicy for this kind (use Replica, Full or Partial)");
};

template <>
struct ShardPolicy<Replica> {
  using kind = Replica;
  static constexpr bool sharded = false;
  [[nodiscard]] static constexpr Factor factor(const Mesh& /*mesh*/) { return {1, 1}; }
};

template <>
struct ShardPolicy<Full> {
  using kind = Full;
  static constexpr bool sharded = true;
  [[nodiscard]] static Factor factor(const Mesh& mesh) { return mesh.shape(); }
};

/// The group size depends on the cluster, so Partial carries it at run time.
template <>
class ShardPolicy<Partial> {
public:
  using kind = Partial;
  static constexpr bool sharded = true;

  constexpr explicit ShardPolicy(Factor group) : group_(group) {
    if (group.size() <= 1)
      fail("policy.partial_is_replica", "a Partial policy needs a group of at least 2 ranks, got ",
           to_string(group), " (use ShardPolicy<Replica>)");
  }

  [[nodiscard]] constexpr Factor group() const { return group_; }
  /// The group, checked against `mesh`: it must be a proper subgroup, not the whole mesh.
  [[nodiscard]] Factor factor(const Mesh& mesh) const {
    check(group_ != mesh.shape(), "policy.partial_is_full", "a Partial group of ", to_string(group_),
          " covers the whole ", to_string(mesh), " mesh (use ShardPolicy<Full>)");
    return group_;
  }

private:
  Factor group_;
};

template <class T> struct is_shard_policy : std::false_type {};
template <class K> struct is_shard_policy<ShardPolicy<K>> : std::true_type {};
template <class T>
concept shard_policy = is_shard_policy<std::remove_cvref_t<T>>::value;

namespace detail {
template <class F>
decltype(auto) with_policy(const Factor& f, const Mesh& mesh, F&& k) {
  if (f.size() == 1) return k(ShardPolicy<Replica>{});
  if (f == mesh.shape()) return k(ShardPolicy<Full>{});
  return k(ShardPolicy<Partial>{f});
}
}  // namespace detail

/// Validates `plan` on `mesh` and calls f(ShardPolicy<P>, ShardPolicy<G>, ShardPolicy<OS>) with the
/// policy types that match it. The plan rules make only ordered kind triples reachable.
template <class F>
decltype(auto) dispatch(const Plan& plan, const Mesh& mesh, F&& f) {
  validate(plan, mesh);
  return detail::with_policy(plan.p, mesh, [&](auto p) -> decltype(auto) {
    return detail::with_policy(plan.g, mesh, [&](auto g) -> decltype(auto) {
      return detail::with_policy(plan.os, mesh, [&](auto os) -> decltype(auto) { return f(p, g, os); });
    });
  });
}

/// The runtime plan of three policies on `mesh` (Full: the mesh's shape; Partial: its group, which
/// must not be the whole mesh). The plan rules are checked where the plan is used (validate).
template <shard_policy P, shard_policy G, shard_policy OS>
[[nodiscard]] Plan plan_of(const P& p, const G& g, const OS& os, const Mesh& mesh) {
  return Plan{p.factor(mesh), g.factor(mesh), os.factor(mesh)};
}

/// Without a mesh only plans without Full and Partial policies could be resolved: rejected at
/// compile time rather than guessing a world size.
template <shard_policy P, shard_policy G, shard_policy OS>
Plan plan_of(const P&, const G&, const OS&) {
  static_assert(sizeof(P) == 0, "amsp: plan_of needs the mesh: plan_of(p, g, os, mesh)");
  return {};
}

}  // namespace amsp
