#include <doctest/doctest.h>

#include "amsp/sharding.hpp"

TEST_CASE("nested shard indices: G inside P, OS inside G") {
  const amsp::Mesh mesh(8, 1);
  const amsp::PlanGroups groups(mesh, amsp::Plan{{2, 1}, {4, 1}, {8, 1}});
  for (int r = 0; r < 8; ++r) {
    const int p = groups.shard_index(amsp::Component::params, r);
    const int g = groups.shard_index(amsp::Component::grads, r);
    const int os = groups.shard_index(amsp::Component::optimizer_states, r);
    CHECK(g / 2 == p);
    CHECK(os / 2 == g);
  }
}
