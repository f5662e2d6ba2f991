// Plan validity: enumerate_plans against an independent brute force over all factor triples,
// each invalid-plan class with its own rule id and message, and dispatch to policy types.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "amsp/sharding/plan_rules.hpp"
#include "amsp/sharding/policy.hpp"
#include "sharding_test_util.hpp"

using amsp::Factor;
using amsp::Mesh;
using amsp::Plan;

namespace {
// The AMSP paper's plan rules plus our nesting rule, restated here independently of plan_rules.hpp,
// in the order the library documents. Returns the rule id of the first violation, "" if valid
// (a string_view: this runs for millions of triples, and most ids are too long for SSO).
std::string_view first_broken_rule(const Plan& plan, const Mesh& mesh, bool paper) {
  const int R = mesh.ranks_per_node();
  const int N = mesh.nodes();
  const Factor f[3] = {plan.p, plan.g, plan.os};
  for (const Factor& x : f)
    if (x.intra <= 0 || x.inter <= 0) return "plan.positive";
  for (const Factor& x : f)
    if (R % x.intra != 0 || N % x.inter != 0) return "plan.divides_mesh";
  if (!(f[0].intra <= f[1].intra && f[1].intra <= f[2].intra)) return "plan.ordering";
  if (!(f[0].inter <= f[1].inter && f[1].inter <= f[2].inter)) return "plan.ordering";
  if (f[1].intra % f[0].intra != 0 || f[2].intra % f[1].intra != 0) return "plan.nesting";
  if (f[1].inter % f[0].inter != 0 || f[2].inter % f[1].inter != 0) return "plan.nesting";
  for (const Factor& x : f)
    if (x.inter > 1 && x.intra != R) return "plan.node_filling";
  if (paper && !(plan.g == plan.p || plan.g == plan.os)) return "plan.paper_gradient_factor";
  return "";
}

auto key(const Plan& p) { return std::tuple(p.p.intra, p.p.inter, p.g.intra, p.g.inter, p.os.intra, p.os.inter); }
bool less(const Plan& a, const Plan& b) { return key(a) < key(b); }

// Every triple of factors (a, b) with 1 <= a <= R, 1 <= b <= N.
template <class F>
void for_each_triple(const Mesh& mesh, F&& f) {
  std::vector<Factor> all;
  for (int a = 1; a <= mesh.ranks_per_node(); ++a)
    for (int b = 1; b <= mesh.nodes(); ++b) all.push_back({a, b});
  for (const Factor& p : all)
    for (const Factor& g : all)
      for (const Factor& os : all) f(Plan{p, g, os});
}

void check_enumeration(const Mesh& mesh) {
  for (bool paper : {false, true}) {
      INFO("mesh ", amsp::to_string(mesh), paper ? " (paper rules)" : "");
      std::vector<Plan> expected;
      for_each_triple(mesh, [&](const Plan& plan) {
        if (first_broken_rule(plan, mesh, paper).empty()) expected.push_back(plan);
      });
      std::vector<Plan> got = amsp::enumerate_plans(mesh, paper ? amsp::RuleSet::paper : amsp::RuleSet::amsp);
      for (const Plan& plan : got) REQUIRE(amsp::is_valid(plan, mesh, paper ? amsp::RuleSet::paper : amsp::RuleSet::amsp));
      std::sort(expected.begin(), expected.end(), less);
      std::sort(got.begin(), got.end(), less);
      CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());  // no plan twice
      CHECK(got == expected);
      CHECK(!expected.empty());  // ddp is always valid
  }
}
}  // namespace

TEST_CASE("enumerate_plans equals the brute force over all factor triples, on every mesh of the sweep") {
  amsp_test::for_each_mesh(check_enumeration);
  // 6 x 1 (one of the extra meshes): ordered triples that do not nest, e.g. p=2x1, g=3x1, are rejected.
  CHECK(amsp::find_violation(Plan{{2, 1}, {3, 1}, {6, 1}}, Mesh(6, 1))->rule() == "plan.nesting");
}

TEST_CASE("plan counts on meshes worked by hand") {
  // 8x1: factors 1,2,4,8 form a chain; valid plans are its non-decreasing triples: C(6,3) = 20.
  CHECK(amsp::enumerate_plans(Mesh(8, 1)).size() == 20);
  // 8x4: chain 1x1 < 2x1 < 4x1 < 8x1 < 8x2 < 8x4: C(8,3) = 56.
  CHECK(amsp::enumerate_plans(Mesh(8, 4)).size() == 56);
  // 1x3: factors 1x1, 1x3: C(4,3) = 4.
  CHECK(amsp::enumerate_plans(Mesh(1, 3)).size() == 4);
  // Paper rules on 8x1: triples with g = p or g = os: 20 minus those with p < g < os (C(4,3) = 4).
  CHECK(amsp::enumerate_plans(Mesh(8, 1), amsp::RuleSet::paper).size() == 16);
}

TEST_CASE("mesh_factors are the aligned blocks, ordered by size") {
  amsp_test::for_each_mesh([](const Mesh& mesh) {
    const std::vector<Factor> factors = amsp::mesh_factors(mesh);
    std::size_t expected = 0;
    for (int a = 1; a <= mesh.ranks_per_node(); ++a)
      for (int b = 1; b <= mesh.nodes(); ++b)
        if (mesh.ranks_per_node() % a == 0 && mesh.nodes() % b == 0 && (b == 1 || a == mesh.ranks_per_node())) {
          ++expected;
          CHECK(std::count(factors.begin(), factors.end(), Factor{a, b}) == 1);
        }
    CHECK(factors.size() == expected);
    CHECK(std::is_sorted(factors.begin(), factors.end(),
                         [](const Factor& x, const Factor& y) { return x.size() < y.size(); }));
  });
}

TEST_CASE("every invalid triple is rejected with the rule the restated rules expect") {
  // All triples on the meshes of up to 24 ranks (the largest sweep meshes have 2 million each,
  // and formatting each rejection's message is what costs here).
  amsp_test::for_each_mesh([](const Mesh& mesh) {
    if (mesh.world_size() > 24) return;
    for_each_triple(mesh, [&](const Plan& plan) {
      const std::string_view expected = first_broken_rule(plan, mesh, true);
      const auto violation = amsp::find_violation(plan, mesh, amsp::RuleSet::paper);
      REQUIRE(violation.has_value() == !expected.empty());
      if (violation) REQUIRE(violation->rule() == expected);
    });
  });
}

TEST_CASE("on power-of-two meshes the nesting rule follows from ordering and divisibility") {
  for (const Mesh& mesh : {Mesh(8, 16), Mesh(4, 8), Mesh(2, 4)}) {
    int nesting_rejections = 0;
    for_each_triple(mesh, [&](const Plan& plan) { nesting_rejections += first_broken_rule(plan, mesh, false) == "plan.nesting"; });
    CHECK(nesting_rejections == 0);
  }
  int on_six = 0;  // while on 6 ranks per node it does reject ordered plans (the check can fail)
  for_each_triple(Mesh(6, 1), [&](const Plan& plan) { on_six += first_broken_rule(plan, Mesh(6, 1), false) == "plan.nesting"; });
  CHECK(on_six > 0);
}

namespace {
void check_rejected(const Plan& plan, const Mesh& mesh, const std::string& rule, const std::string& text,
                    amsp::RuleSet rules = amsp::RuleSet::amsp) {
  INFO("plan ", amsp::to_string(plan), " on ", amsp::to_string(mesh));
  const auto violation = amsp::find_violation(plan, mesh, rules);
  REQUIRE(violation.has_value());
  CHECK(violation->rule() == rule);
  const std::string what = violation->what();
  CHECK_MESSAGE(what.find(text) != std::string::npos, what);
  CHECK(what.find(amsp::to_string(mesh)) != std::string::npos);  // the message names the mesh
  CHECK(!amsp::is_valid(plan, mesh, rules));
  const auto thrown = amsp_test::error_of([&] { amsp::validate(plan, mesh, rules); });
  REQUIRE(thrown.has_value());
  CHECK(thrown->rule() == rule);
  CHECK(std::string(thrown->what()) == what);
}
}  // namespace

TEST_CASE("each invalid-plan class has its own rule and message") {
  check_rejected(Plan{{0, 1}, {1, 1}, {1, 1}}, Mesh(8, 1), "plan.positive", "s_p = 0x1");
  check_rejected(Plan{{1, 1}, {1, -2}, {1, 1}}, Mesh(8, 1), "plan.positive", "s_g = 1x-2");
  check_rejected(Plan{{3, 1}, {3, 1}, {3, 1}}, Mesh(8, 1), "plan.divides_mesh",
                 "s0_p = 3 does not divide the 8 ranks per node");
  check_rejected(Plan{{1, 1}, {1, 1}, {8, 3}}, Mesh(8, 4), "plan.divides_mesh", "s1_os = 3 does not divide the 4 nodes");
  check_rejected(Plan{{4, 1}, {2, 1}, {8, 1}}, Mesh(8, 1), "plan.ordering", "s0_p <= s0_g <= s0_os, got 4, 2, 8");
  check_rejected(Plan{{8, 2}, {8, 1}, {8, 2}}, Mesh(8, 2), "plan.ordering", "s1_p <= s1_g <= s1_os, got 2, 1, 2");
  check_rejected(Plan{{2, 1}, {3, 1}, {6, 1}}, Mesh(6, 1), "plan.nesting", "(s0_p | s0_g | s0_os), got 2, 3, 6");
  check_rejected(Plan{{4, 2}, {4, 3}, {4, 12}}, Mesh(4, 12), "plan.nesting", "(s1_p | s1_g | s1_os), got 2, 3, 12");
  check_rejected(Plan{{4, 2}, {8, 2}, {8, 2}}, Mesh(8, 2), "plan.node_filling",
                 "s_p = 4x2 spans 2 nodes but uses only 4 of the 8 ranks per node");
  check_rejected(Plan{{1, 1}, {4, 1}, {8, 1}}, Mesh(8, 1), "plan.paper_gradient_factor", "s_g = s_p or s_g = s_os",
                 amsp::RuleSet::paper);
  CHECK(amsp::is_valid(Plan{{1, 1}, {4, 1}, {8, 1}}, Mesh(8, 1)));  // lifted by default
}

TEST_CASE("dispatch picks the policy types that match each factor") {
  const Mesh mesh(8, 4);
  const auto kinds = [&](const Plan& plan) {
    return amsp::dispatch(plan, mesh, [](auto p, auto g, auto os) {
      const auto kind = [](auto policy) -> std::string {
        using K = typename decltype(policy)::kind;
        return std::is_same_v<K, amsp::Replica> ? "replica" : std::is_same_v<K, amsp::Full> ? "full" : "partial";
      };
      return kind(p) + "/" + kind(g) + "/" + kind(os);
    });
  };
  CHECK(kinds(Plan{{1, 1}, {1, 1}, {1, 1}}) == "replica/replica/replica");
  CHECK(kinds(Plan{{1, 1}, {1, 1}, {8, 4}}) == "replica/replica/full");
  CHECK(kinds(Plan{{4, 1}, {8, 1}, {8, 4}}) == "partial/partial/full");
  CHECK(kinds(Plan{{8, 4}, {8, 4}, {8, 4}}) == "full/full/full");
  CHECK(amsp_test::error_of([&] { (void)kinds(Plan{{4, 1}, {2, 1}, {8, 1}}); })->rule() == "plan.ordering");
  static_assert(!amsp::ShardPolicy<amsp::Replica>::sharded && amsp::ShardPolicy<amsp::Partial>::sharded);
  static_assert(amsp::shard_policy<amsp::ShardPolicy<amsp::Full>> && !amsp::shard_policy<amsp::Full>);
}

TEST_CASE("dispatch then plan_of returns every enumerated plan unchanged") {
  amsp_test::for_each_mesh([](const Mesh& mesh) {
    for (const Plan& plan : amsp::enumerate_plans(mesh)) {
      const Plan back =
          amsp::dispatch(plan, mesh, [&](auto p, auto g, auto os) { return amsp::plan_of(p, g, os, mesh); });
      REQUIRE(back == plan);
    }
  });
}
