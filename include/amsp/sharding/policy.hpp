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

template <class Kind>
struct ShardPolicy {
  static_assert(sizeof(Kind) == 0, "amsp: no ShardPolicy for this kind (use Replica, Full or Partial)");
};

template <>
struct ShardPolicy<Replica> {
  using kind = Replica;
  static constexpr bool sharded = false;
  [[nodiscard]] static constexpr Factor factor() { return {1, 1}; }
};

template <>
struct ShardPolicy<Full> {
  using kind = Full;
  static constexpr bool sharded = true;
  Factor world{1, 1};  ///< the mesh shape
  [[nodiscard]] constexpr Factor factor() const { return world; }
};

/// The group size depends on the cluster, so Partial carries it at run time.
template <>
struct ShardPolicy<Partial> {
  using kind = Partial;
  static constexpr bool sharded = true;
  Factor group{1, 1};
  [[nodiscard]] constexpr Factor factor() const { return group; }
};

template <class T> struct is_shard_policy : std::false_type {};
template <class K> struct is_shard_policy<ShardPolicy<K>> : std::true_type {};
template <class T>
concept shard_policy = is_shard_policy<std::remove_cvref_t<T>>::value;

namespace detail {
template <class F>
decltype(auto) with_policy(const Factor& f, const Mesh& mesh, F&& k) {
  if (f.size() == 1) return k(ShardPolicy<Replica>{});
  if (f == mesh.shape()) return k(ShardPolicy<Full>{mesh.shape()});
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

/// The runtime plan of three policies.
template <shard_policy P, shard_policy G, shard_policy OS>
[[nodiscard]] constexpr Plan plan_of(const P& p, const G& g, const OS& os) {
  return Plan{p.factor(), g.factor(), os.factor()};
}

}  // namespace amsp
