// The planner's model of the engine's schedule against the engine's own expected traffic
// (amsp/engine/expected_traffic.hpp, which the engine tests check against counted traffic): for
// every valid plan on small meshes, both optimizer-state layouts, 1 and 3 micro-batches and both
// gather policies, every term's bytes per rank, intra- and inter-node, must agree.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "amsp/engine/expected_traffic.hpp"
#include "amsp/planner/comm_model.hpp"

using namespace amsp;

namespace {
// Units whose element counts every factor of the meshes below splits without padding (multiples
// of 8 ranks x 16 fp32 elements of alignment), in three sizes so that whole-tensor ownership
// balances exactly or not at all.
const std::vector<planner::Module> units{{"u0", 0, 128 * 3}, {"u1", 1, 128 * 5}, {"u2", 2, 128 * 5}, {"u3", 3, 128 * 7}};

std::vector<FlatLayout> engine_buckets(const Plan& plan) {
  std::vector<FlatLayout> layouts;
  for (const planner::Module& u : units)
    layouts.emplace_back(std::vector<TensorSpec>{{u.name, {u.params}, dtype::fp32}}, 64, plan.os.size());
  return layouts;
}

void check_parity(const Mesh& mesh, const Plan& plan, OsLayout layout, int micro_batches, int gathers) {
  const PlanGroups groups(mesh, plan);
  TrafficScenario scenario;
  scenario.micro_batches = micro_batches;
  scenario.gathers_per_micro_batch = gathers;
  scenario.param_bytes = 4;
  scenario.os_layout = layout;
  const auto buckets = engine_buckets(plan);
  // The engine's figures per rank; whole-tensor OS shards differ between ranks, the planner gives
  // the average, so compare averages over the world.
  double engine_intra[traffic_term_count] = {}, engine_inter[traffic_term_count] = {};
  for (int r = 0; r < mesh.world_size(); ++r) {
    const TrafficExpectation e = expected_traffic(groups, buckets, scenario, r);
    for (int t = 0; t < traffic_term_count; ++t) {
      engine_intra[t] += e.intra[t].to_double() / mesh.world_size();
      engine_inter[t] += e.inter[t].to_double() / mesh.world_size();
    }
  }
  planner::ScheduleOptions options;
  options.os_layout = layout;
  options.reshard_after_forward = gathers == 2;
  options.param_wire_bytes = 4;
  options.grad_wire_bytes = 4;  // the engine reduces fp32 gradients
  const auto planned = planner::expected_traffic(plan, mesh, units, micro_batches, options);
  for (int t = 0; t < traffic_term_count; ++t) {
    const std::string name(name_of(static_cast<TrafficTerm>(t)));
    CAPTURE(name);
    double intra = 0, inter = 0;
    for (const planner::TermTraffic& p : planned)
      if (p.term == name) {
        intra = p.intra_node_bytes;
        inter = p.inter_node_bytes;
      }
    CHECK(intra == doctest::Approx(engine_intra[t]).epsilon(1e-12));
    CHECK(inter == doctest::Approx(engine_inter[t]).epsilon(1e-12));
  }
  for (const planner::TermTraffic& p : planned) {
    bool known = false;
    for (int t = 0; t < traffic_term_count; ++t) known = known || p.term == name_of(static_cast<TrafficTerm>(t));
    CHECK_MESSAGE(known, p.term);
  }
}
}  // namespace

TEST_CASE("planner vs engine: expected traffic per term for every plan on small meshes") {
  for (const Mesh& mesh : {Mesh(4, 1), Mesh(2, 2), Mesh(4, 2), Mesh(2, 4)})
    for (const Plan& plan : enumerate_plans(mesh))
      for (OsLayout layout : {OsLayout::even_split, OsLayout::whole_tensor}) {
        if (!layout_supports(layout, plan)) continue;
        for (int micro : {1, 3})
          for (int gathers : {1, 2}) {
            CAPTURE(to_string(mesh));
            CAPTURE(to_string(plan));
            CAPTURE(name_of(layout));
            CAPTURE(micro);
            CAPTURE(gathers);
            check_parity(mesh, plan, layout, micro, gathers);
          }
      }
}
