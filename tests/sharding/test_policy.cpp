// Policy types mean what their names say: Full is the whole mesh on every mesh, Partial a proper
// subgroup (1x1 and the whole mesh are named errors), Replica 1x1. What must not compile is in
// policy_misuse.cpp (ctest policy_misuse_*).
#include <doctest/doctest.h>

#include "amsp/sharding/policy.hpp"
#include "sharding_test_util.hpp"

using amsp::Factor;
using amsp::Full;
using amsp::Mesh;
using amsp::Partial;
using amsp::Plan;
using amsp::Replica;
using amsp::ShardPolicy;

TEST_CASE("policy: ShardPolicy<Full>{} is the whole mesh, whatever its shape") {
  for (const Mesh& mesh : {Mesh(1, 1), Mesh(8, 4), Mesh(4, 1), Mesh(2, 16)}) {
    CHECK(ShardPolicy<Full>{}.factor(mesh) == mesh.shape());
    CHECK(ShardPolicy<Replica>{}.factor(mesh) == Factor{1, 1});
  }
  // ZeRO-1 written with policies is the preset, not DDP.
  const Mesh mesh(8, 4);
  CHECK(amsp::plan_of(ShardPolicy<Replica>{}, ShardPolicy<Replica>{}, ShardPolicy<Full>{}, mesh) ==
        Plan{{1, 1}, {1, 1}, {8, 4}});
  CHECK(amsp::plan_of(ShardPolicy<Partial>{Factor{4, 1}}, ShardPolicy<Partial>{Factor{8, 1}}, ShardPolicy<Full>{},
                      mesh) == Plan{{4, 1}, {8, 1}, {8, 4}});
}

TEST_CASE("policy: a Partial group must be a proper subgroup") {
  const Mesh mesh(8, 4);
  const ShardPolicy<Partial> whole{Factor{8, 4}};
  const auto full = amsp_test::error_of([&] { (void)whole.factor(mesh); });
  REQUIRE(full);
  CHECK(full->rule() == "policy.partial_is_full");
  CHECK(std::string(full->what()).find("8x4") != std::string::npos);
  CHECK(amsp_test::error_of([&] {
          (void)amsp::plan_of(ShardPolicy<Replica>{}, ShardPolicy<Replica>{}, whole, mesh);
        })->rule() == "policy.partial_is_full");
  // The same group is proper on a larger mesh.
  CHECK(whole.factor(Mesh(8, 8)) == Factor{8, 4});

  const Factor one{1, 1};
  CHECK(amsp_test::error_of([&] { (void)ShardPolicy<Partial>{one}; })->rule() == "policy.partial_is_replica");
}

TEST_CASE("policy: dispatch hands out the kind each factor is, and plan_of inverts it") {
  const Mesh mesh(4, 2);
  const Plan zero3{{4, 2}, {4, 2}, {4, 2}};
  amsp::dispatch(zero3, mesh, [&](auto p, auto g, auto os) {
    CHECK(std::is_same_v<typename decltype(p)::kind, Full>);
    CHECK(std::is_same_v<typename decltype(g)::kind, Full>);
    CHECK(std::is_same_v<typename decltype(os)::kind, Full>);
    CHECK(amsp::plan_of(p, g, os, mesh) == zero3);
  });
}
