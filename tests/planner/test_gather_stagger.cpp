// The schedule without overlap hides a unit's backward behind its gather's stagger
// (gather_stagger.hpp): which plans qualify, and the hidden seconds worked by hand.
#include <doctest/doctest.h>

#include <vector>

#include "amsp/planner/gather_stagger.hpp"
#include "amsp/planner/step_model.hpp"
#include "amsp/sharding/presets.hpp"

using namespace amsp;
using namespace amsp::planner;
using comm::op_kind;

namespace {  // names unique across the planner's tests, which build as one unity file
// Two units of 100 and 300 parameters, bf16 on the wire: gathers of 200 and 600 bytes.
const std::vector<Module> two_units{{"a", 0, 100}, {"b", 0, 300}};
const Mesh mesh42(4, 2);

// A cluster whose gapped profile has the 4x2 gathers of 200 B end on their first pair 4 ms before
// their slowest rank (at 6 and 10 ms), those of 600 B 20 ms before (10, 30); the 4x1 ones (inside
// a node) 2 ms.
Cluster staggered_cluster() {
  Cluster c = paper_cluster(2);
  c.mesh = mesh42;
  BandwidthProfile gapped;
  gapped.add(op_kind::all_gather, {4, 2}, 200, 0.010, 0.006);
  gapped.add(op_kind::all_gather, {4, 2}, 600, 0.030, 0.010);
  gapped.add(op_kind::all_gather, {4, 1}, 200, 0.004, 0.002);
  gapped.add(op_kind::all_gather, {4, 1}, 600, 0.004, 0.002);
  c.profile_after_compute = gapped;
  return c;
}

std::vector<CommTerm> terms_of(const char* plan, int micro_batches) {
  return comm_terms(PlanGroups(mesh42, preset(plan, mesh42)), two_units, micro_batches);
}
}  // namespace

TEST_CASE("gather stagger: ZeRO-3's backward gathers, one entry per unit size") {
  const Cluster c = staggered_cluster();
  const BackwardStagger s = backward_stagger(terms_of("zero3", 2), c, 2, true);
  REQUIRE(s.size() == 2);
  // Unit a: a quarter of the parameters (200 of 800 gathered bytes), head start 10 − 6 = 4 ms.
  CHECK(s[0].share == doctest::Approx(0.25));
  CHECK(s[0].units == doctest::Approx(1.0));
  CHECK(s[0].head_start == doctest::Approx(0.004));
  CHECK(s[1].share == doctest::Approx(0.75));
  CHECK(s[1].head_start == doctest::Approx(0.020));
  // A backward of 40 ms per micro-batch: a computes 10 ms (4 hide), b 30 (20 hide); twice.
  CHECK(staggered_backward_seconds(s, 0.040, 2) == doctest::Approx(2 * (0.004 + 0.020)));
  // A backward of 16 ms: a's 4 ms and b's 12 ms hide whole.
  CHECK(staggered_backward_seconds(s, 0.016, 2) == doctest::Approx(2 * 0.016));
  CHECK(staggered_backward_seconds({}, 0.040, 2) == 0.0);
}

TEST_CASE("gather stagger: only a backward gather whose reduction crosses nodes over the same group") {
  const Cluster c = staggered_cluster();
  CHECK(backward_stagger(terms_of("zero3", 1), c, 1, false).empty());  // gathered weights kept: no backward gather
  CHECK(backward_stagger(terms_of("zero1", 1), c, 1, true).empty());   // parameters replicated: no gather
  CHECK(backward_stagger(terms_of("ddp", 1), c, 1, true).empty());
  CHECK(backward_stagger(terms_of("mics(4)", 1), c, 1, true).empty());  // P inside a node (4x1)
  CHECK(backward_stagger(terms_of("hsdp", 1), c, 1, true).empty());
  // A profile without the first pair (back to back, or measured before it was recorded): the
  // units are there, nothing hides.
  Cluster unmeasured = c;
  BandwidthProfile gapped;
  gapped.add(op_kind::all_gather, {4, 2}, 200, 0.010);
  gapped.add(op_kind::all_gather, {4, 2}, 600, 0.030);
  unmeasured.profile_after_compute = gapped;
  const BackwardStagger s = backward_stagger(terms_of("zero3", 1), unmeasured, 1, true);
  REQUIRE(s.size() == 2);
  CHECK(staggered_backward_seconds(s, 0.040, 1) == 0.0);
  unmeasured.profile_after_compute.reset();
  CHECK(staggered_backward_seconds(backward_stagger(terms_of("zero3", 1), unmeasured, 1, true), 0.040, 1) == 0.0);
}

TEST_CASE("gather stagger: the step without overlap is shorter by the hidden seconds, the overlapped one unchanged") {
  const Cluster c = staggered_cluster();
  const std::vector<CommTerm> terms = terms_of("zero3", 2);
  std::vector<double> seconds;
  for (const CommTerm& t : terms) seconds.push_back(t.seconds(c));
  // 60 ms per micro-batch (forward 20, backward 40), two micro-batches, 1 ms update.
  StepCompute compute{0.060, 1.0 / 3.0, 2, 0.001, 0.0, parameter_shares(two_units), true};
  const StepTime plain = step_time(compute, 0.0, terms, seconds);
  compute.stagger = backward_stagger(terms, c, 2, true);
  const StepTime hidden = step_time(compute, 0.0, terms, seconds);
  CHECK(plain.serial - hidden.serial == doctest::Approx(2 * (0.004 + 0.020)));
  CHECK(hidden.overlapped == doctest::Approx(plain.overlapped));
}

TEST_CASE("gather stagger: the GPU planner's step hides it only under recursive doubling and halving") {
  const ModelSpec m = parse_model("7b");
  const Workload w;
  Cluster c = paper_cluster(2);
  const Plan plan = preset("zero3", c.mesh);
  const std::vector<Module> units = m.units(Granularity::layer);
  const std::vector<CommTerm> terms = comm_terms(PlanGroups(c.mesh, plan), units, w.micro_batches);
  // Every gather over the world (8x2) ends on its first pair at once: a head start as long as the
  // call, longer than any unit's backward, so the whole backward hides.
  BandwidthProfile gapped;
  gapped.add(op_kind::all_gather, {8, 2}, 1e3, 10.0, 1e-9);
  gapped.add(op_kind::all_gather, {8, 2}, 1e12, 1e4, 1e-9);
  c.profile_after_compute = gapped;
  std::vector<double> seconds;
  for (const CommTerm& t : terms) seconds.push_back(t.seconds(c));
  const StepTime ring = step_time(plan, m, w, c, terms, seconds, units, true);
  c.gather_scatter = GatherScatterAlgorithm::recursive;
  const StepTime recursive = step_time(plan, m, w, c, terms, seconds, units, true);
  const double backward = micro_batch_compute_seconds(m, w, c) * 2.0 / 3.0;
  CHECK(ring.serial - recursive.serial == doctest::Approx(backward));
  CHECK(recursive.overlapped == doctest::Approx(ring.overlapped));
  // Without units (the paper's terms, or no unit schedule) nothing changes.
  CHECK(step_time(plan, m, w, c, terms, seconds).serial == doctest::Approx(ring.serial));
}
