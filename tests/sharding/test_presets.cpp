// Presets, the plan-string parser and printer, and the mesh itself.
#include <doctest/doctest.h>

#include <string>

#include "amsp/sharding/presets.hpp"
#include "sharding_test_util.hpp"

using amsp::Factor;
using amsp::Mesh;
using amsp::Plan;

namespace {
void check_error(const std::string& text, const Mesh& mesh, const std::string& rule, const std::string& message) {
  INFO("parsing '", text, "' on ", amsp::to_string(mesh));
  const auto e = amsp_test::error_of([&] { (void)amsp::parse_plan(text, mesh); });
  REQUIRE(e.has_value());
  CHECK(e->rule() == rule);
  CHECK_MESSAGE(std::string(e->what()).find(message) != std::string::npos, e->what());
}
}  // namespace

TEST_CASE("the paper's plans on its 8 x 128 cluster are Table IV's") {
  const Mesh cluster(8, 128);
  CHECK(amsp::preset("amsp-7b", cluster) == Plan{{1, 1}, {1, 1}, {8, 1}});
  CHECK(amsp::preset("amsp-13b", cluster) == Plan{{4, 1}, {4, 1}, {8, 1}});
  CHECK(amsp::preset("amsp-30b", cluster) == Plan{{8, 1}, {8, 1}, {8, 4}});
  CHECK(amsp::to_string(amsp::preset("amsp-30b", cluster)) == "p=8x1,g=8x1,os=8x4");
}

TEST_CASE("the familiar systems as presets") {
  const Mesh mesh(8, 4);
  const Factor one{1, 1};
  const Factor world{8, 4};
  CHECK(amsp::preset("ddp", mesh) == Plan{one, one, one});
  CHECK(amsp::preset("zero1", mesh) == Plan{one, one, world});
  CHECK(amsp::preset("zero2", mesh) == Plan{one, world, world});
  CHECK(amsp::preset("zero3", mesh) == Plan{world, world, world});
  CHECK(amsp::preset("fsdp", mesh) == Plan{world, world, world});
  CHECK(amsp::preset("hsdp", mesh) == Plan{{8, 1}, {8, 1}, {8, 1}});
  CHECK(amsp::preset("hsdp(16)", mesh) == Plan{{8, 2}, {8, 2}, {8, 2}});
  CHECK(amsp::preset("mics(4)", mesh) == Plan{{4, 1}, {4, 1}, {4, 1}});
  CHECK(amsp::preset("mics(32)", mesh) == Plan{world, world, world});
  CHECK(amsp::preset("mics(1)", mesh) == Plan{one, one, one});
  // parse_plan resolves names too.
  CHECK(amsp::parse_plan("zero2", mesh) == amsp::preset("zero2", mesh));
  // The paper's plans keep their shape relative to the node on smaller meshes.
  const Mesh small(4, 2);
  CHECK(amsp::preset("amsp-7b", small) == Plan{{1, 1}, {1, 1}, {4, 1}});
  CHECK(amsp::preset("amsp-13b", small) == Plan{{2, 1}, {2, 1}, {4, 1}});
  CHECK(amsp::preset("amsp-30b", small) == Plan{{4, 1}, {4, 1}, {4, 2}});
  CHECK(amsp::preset("amsp-30b", Mesh(8, 3)) == Plan{{8, 1}, {8, 1}, {8, 1}});  // gcd(4, 3) = 1
}

TEST_CASE("every preset is valid on every sweep mesh where it exists") {
  amsp_test::for_each_mesh([](const Mesh& mesh) {
    for (const char* name : {"ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp", "amsp-7b", "amsp-13b", "amsp-30b"}) {
      INFO(name, " on ", amsp::to_string(mesh));
      const Plan plan = amsp::preset(name, mesh);
      CHECK(amsp::is_valid(plan, mesh));
    }
    for (int k = 1; k <= mesh.world_size(); ++k) {
      const bool fits = k <= mesh.ranks_per_node() ? mesh.ranks_per_node() % k == 0
                                                   : k % mesh.ranks_per_node() == 0 && mesh.nodes() % (k / mesh.ranks_per_node()) == 0;
      const std::string name = "mics(" + std::to_string(k) + ")";
      const auto e = amsp_test::error_of([&] { (void)amsp::preset(name, mesh); });
      REQUIRE(e.has_value() == !fits);
      if (e) CHECK(e->rule() == "plan.group_size");
      else CHECK(amsp::preset(name, mesh).p.size() == k);
    }
  });
}

TEST_CASE("preset errors") {
  const Mesh mesh(8, 4);
  check_error("mics(3)", mesh, "plan.group_size", "group of 3 ranks must divide the 8 ranks per node");
  check_error("mics(12)", mesh, "plan.group_size", "multiple of 8");
  check_error("hsdp(64)", mesh, "plan.group_size", "does not fit mesh 8x4 of 32 ranks");
  check_error("mics(0)", mesh, "plan.parse", "must be at least 1");
  check_error("mics(x)", mesh, "plan.parse", "cannot read mics group size 'x'");
  check_error("zero4", mesh, "plan.parse", "unknown plan 'zero4'");
  check_error("zero4", mesh, "plan.parse", "amsp-30b");  // the message lists the known names
  check_error("mics", mesh, "plan.parse", "unknown plan 'mics'");
}

TEST_CASE("parse_plan(to_string(plan)) returns every enumerated plan") {
  amsp_test::for_each_mesh([](const Mesh& mesh) {
    for (const Plan& plan : amsp::enumerate_plans(mesh)) REQUIRE(amsp::parse_plan(amsp::to_string(plan), mesh) == plan);
  });
  CHECK(amsp::parse_plan("os=8x1,p=1x1,g=4x1", Mesh(8, 1)) == Plan{{1, 1}, {4, 1}, {8, 1}});  // any key order
}

TEST_CASE("plan string errors name the text and the problem") {
  const Mesh mesh(8, 4);
  check_error("q=1x1,g=1x1,os=8x1", mesh, "plan.parse", "unknown key 'q'");
  check_error("p=1x1,p=1x1,os=8x1", mesh, "plan.parse", "key 'p' appears twice");
  check_error("p=1x1,os=8x1", mesh, "plan.parse", "lacks the factor for g");
  check_error("p=1x1,g=1x1", mesh, "plan.parse", "lacks the factor for os");
  check_error("p=1x1,,os=8x1", mesh, "plan.parse", "item '' must read key=AxB");
  check_error("p=1x1,g=1x1,os=8x1,", mesh, "plan.parse", "must read key=AxB");
  check_error("p=ax1,g=1x1,os=8x1", mesh, "factor.parse", "cannot read intra-node size 'a'");
  check_error("p=1x,g=1x1,os=8x1", mesh, "factor.parse", "cannot read node count ''");
  check_error("p=1x1x1,g=1x1,os=8x1", mesh, "factor.parse", "node count '1x1'");
  check_error("p=1*1,g=1x1,os=8x1", mesh, "factor.parse", "must read AxB");
  check_error("p=-1x1,g=1x1,os=8x1", mesh, "factor.parse", "must be at least 1, got -1");
  check_error("p=1x1,g=1x1,os=99999999999x1", mesh, "factor.parse", "'99999999999'");
  // Well-formed but invalid on the mesh: the plan rule, not a parse error.
  check_error("p=4x1,g=2x1,os=8x1", mesh, "plan.ordering", "got 4, 2, 8");
}

TEST_CASE("mesh: node-major ranks, parsing, errors") {
  const Mesh mesh = amsp::parse_mesh("4x3");
  CHECK((mesh.ranks_per_node() == 4 && mesh.nodes() == 3 && mesh.world_size() == 12));
  CHECK(mesh.shape() == Factor{4, 3});
  CHECK(amsp::to_string(mesh) == "4x3");
  for (int r = 0; r < 12; ++r) {
    CHECK(mesh.node_of(r) == r / 4);
    CHECK(mesh.local_of(r) == r % 4);
    CHECK(mesh.rank_of(mesh.node_of(r), mesh.local_of(r)) == r);
  }
  CHECK(amsp_test::error_of([] { Mesh(0, 2); })->rule() == "mesh.positive");
  CHECK(amsp_test::error_of([&] { (void)mesh.node_of(12); })->rule() == "mesh.rank_range");
  CHECK(amsp_test::error_of([&] { (void)mesh.rank_of(3, 0); })->rule() == "mesh.rank_range");
  CHECK(amsp_test::error_of([&] { (void)mesh.local_of(-1); })->rule() == "mesh.rank_range");
  CHECK_NOTHROW(mesh.check_world_size(12));
  const auto e = amsp_test::error_of([&] { mesh.check_world_size(8); });
  REQUIRE(e.has_value());
  CHECK(e->rule() == "mesh.world_size");
  CHECK(std::string(e->what()).find("needs 12 ranks but the communicator has 8") != std::string::npos);
  CHECK(amsp_test::error_of([] { (void)amsp::parse_mesh("4-3"); })->rule() == "factor.parse");
  CHECK(amsp_test::error_of([] { (void)amsp::parse_mesh("0x3"); })->rule() == "factor.parse");
}
