// How far apart the ranks leave a collective (the gapped profile's end spread) and how the model
// prices a paced AllReduce that its ranks reach that far apart (Cluster::arrival_spread_seconds,
// CommTerm::seconds): docs/planner-check-arrival-spread.md.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/core/json.hpp"
#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"

using namespace amsp;
using namespace amsp::planner;
using comm::op_kind;

TEST_CASE("profile: the ranks' end spread is read, interpolated in log size and held outside") {
  // 1 MB: slowest 10 ms, ends 2 ms apart (a fifth); 100 MB: 500 ms, 300 apart (three fifths).
  const BandwidthProfile p = BandwidthProfile::from_json(parse_json(R"({"format": "amsp-bandwidth-profile/1",
    "entries": [
      {"op": "all_reduce", "group": "2x4", "bytes": 1000000, "seconds": 0.010, "end_spread_seconds": 0.002},
      {"op": "all_reduce", "group": "2x4", "bytes": 100000000, "seconds": 0.5, "end_spread_seconds": 0.3},
      {"op": "all_reduce", "group": "2x2", "bytes": 1000000, "seconds": 0.010, "end_spread_seconds": 0.002},
      {"op": "all_reduce", "group": "2x2", "bytes": 2000000, "seconds": 0.020}]})"));
  CHECK(*p.end_spread(op_kind::all_reduce, {2, 4}, 1e6) == doctest::Approx(0.002));
  CHECK(*p.end_spread(op_kind::all_reduce, {2, 4}, 1e8) == doctest::Approx(0.3));
  // Halfway in log size: the fraction halfway (0.4) of the interpolated time.
  CHECK(*p.end_spread(op_kind::all_reduce, {2, 4}, 1e7) == doctest::Approx(std::sqrt(0.010 * 0.5) * 0.4));
  CHECK(*p.end_spread(op_kind::all_reduce, {2, 4}, 1e9) == doctest::Approx(5.0 * 0.6));
  CHECK(*p.end_spread(op_kind::all_reduce, {2, 4}, 10) == doctest::Approx(0.010 * 0.2));
  // One entry of the curve without it, or no curve: not measured.
  CHECK(!p.end_spread(op_kind::all_reduce, {2, 2}, 1e6));
  CHECK(!p.end_spread(op_kind::reduce_scatter, {2, 4}, 1e6));
  // Written back only where measured.
  std::vector<ProfileEntry> entries{{op_kind::all_reduce, {2, 4}, 1000, 0.01, 0, 0.004},
                                    {op_kind::all_reduce, {2, 4}, 2000, 0.02, 0, 0}};
  const Json doc = bandwidth_profile_json(entries, "mpi", Mesh(2, 4), "host");
  CHECK(doc.at("entries").as_array()[0].at("end_spread_seconds").as_number() == 0.004);
  CHECK(!doc.at("entries").as_array()[1].contains("end_spread_seconds"));
}

TEST_CASE("profile: an end spread that is negative or wider than the call is refused, naming the entry") {
  const auto read = [](const char* spread) {
    return BandwidthProfile::from_json(parse_json(std::string(R"({"format": "amsp-bandwidth-profile/1", "entries": [
      {"op": "all_reduce", "group": "2x4", "bytes": 1000, "seconds": 0.010, "end_spread_seconds": )") +
                                                  spread + "}]}"));
  };
  CHECK_THROWS_WITH_AS((void)read("-0.001"), doctest::Contains("entry 0"), amsp::error);
  CHECK_THROWS_WITH_AS((void)read("0"), doctest::Contains("end_spread_seconds must be positive"), amsp::error);
  CHECK_THROWS_WITH_AS((void)read("0.02"), doctest::Contains("[rule planner.profile]"), amsp::error);
  CHECK_NOTHROW((void)read("0.01"));
}

namespace {
// DDP's gradient AllReduces on 2 ranks × 4 nodes as the transformer example issues them (last
// unit first: the head's 66 KB, two blocks' 200 KB, the embeddings' 74 KB), priced from profiles
// set by hand: gapped (released together) time and end spread, paced time, in ms.
constexpr double head = 66048, block = 199936, embed = 73728;
Cluster ddp_cluster() {
  Cluster c = paper_cluster(4);
  c.mesh = Mesh(2, 4);
  BandwidthProfile chained, gapped, paced;
  const Factor world{2, 4};
  struct Measured {
    double bytes, gapped_ms, end_spread_ms, paced_ms;
  };
  for (const Measured m : {Measured{head, 8.0, 2.0, 6.8}, Measured{block, 27.0, 6.5, 21.7},
                           Measured{embed, 9.2, 2.7, 7.8}}) {
    chained.add(op_kind::all_reduce, world, m.bytes, 30e-3);
    gapped.add(op_kind::all_reduce, world, m.bytes, m.gapped_ms * 1e-3, 0, m.end_spread_ms * 1e-3);
    paced.add(op_kind::all_reduce, world, m.bytes, m.paced_ms * 1e-3);
  }
  c.profile = chained;
  c.profile_after_compute = gapped;
  c.profile_paced = paced;
  return c;
}
CommTerm ddp_reductions() {
  const Factor world{2, 4};
  CommTerm t("grad_replicas", Window::last_backward,
             {{op_kind::all_reduce, head, 1, world}, {op_kind::all_reduce, block, 2, world},
              {op_kind::all_reduce, embed, 1, world}});
  t.after_compute = true;
  return t;
}
}  // namespace

TEST_CASE("arrival spread: a paced AllReduce costs the later of gapped less the spread and paced") {
  Cluster c = ddp_cluster();
  const Factor world{2, 4};
  CHECK(*c.departure_spread_seconds(op_kind::all_reduce, block, world) == doctest::Approx(6.5e-3));
  CHECK(*c.arrival_spread_seconds(op_kind::all_reduce, block, world, 0) == doctest::Approx(27.0e-3));
  CHECK(*c.arrival_spread_seconds(op_kind::all_reduce, block, world, 2e-3) == doctest::Approx(25.0e-3));
  CHECK(*c.arrival_spread_seconds(op_kind::all_reduce, block, world, 6.5e-3) == doctest::Approx(21.7e-3));
  // Only where paced_allreduce holds: not a strided group nor a ReduceScatter.
  CHECK(!c.departure_spread_seconds(op_kind::all_reduce, block, {1, 4}));
  CHECK(!c.departure_spread_seconds(op_kind::reduce_scatter, block, world));
  // Switched off, or without a paced profile: none.
  c.arrival_spread = false;
  CHECK(!c.arrival_spread_seconds(op_kind::all_reduce, block, world, 0));
  c.arrival_spread = true;
  c.profile_paced.reset();
  CHECK(!c.departure_spread_seconds(op_kind::all_reduce, block, world));
}

TEST_CASE("arrival spread: each call of the term is reached as far apart as the one before was left") {
  Cluster c = ddp_cluster();
  const CommTerm t = ddp_reductions();
  // head: out of compute together, 8.0 (gapped); first block after the head's 2.0 ms spread:
  // 27.0 - 2.0 = 25.0; second block after a block's 6.5: max(20.5, 21.7) = 21.7; embeddings
  // after 6.5: max(2.7, 7.8) = 7.8. In all 62.5 ms, where every call paced is 58.0.
  CHECK(t.seconds(c) == doctest::Approx(62.5e-3));
  c.arrival_spread = false;
  CHECK(t.seconds(c) == doctest::Approx(58.0e-3));
  c.arrival_spread = true;
  // Chained behind other calls (priced back to back): unchanged.
  CHECK(t.seconds(c, false) == doctest::Approx(4 * 30e-3));
  // The waits for peers as for every call: hidden under a longer transfer, or added to it.
  c.call_overhead_s = 1e-3;
  CHECK(t.seconds(c) == doctest::Approx(62.5e-3));
  c.waits_overlap_transfer = false;
  CHECK(t.seconds(c) == doctest::Approx(66.5e-3));
  c.waits_overlap_transfer = true;
  c.call_overhead_s = 0;
  // A call the rule does not price (a strided AllReduce, here from the back-to-back profile, the
  // others lacking its shape) hands on no spread: the block after it is reached together, 27.0.
  CommTerm mixed = t;
  mixed.calls.insert(mixed.calls.begin() + 1, {op_kind::all_reduce, block, 1, Factor{1, 4}});
  c.profile->add(op_kind::all_reduce, {1, 4}, block, 40e-3);
  CHECK(mixed.seconds(c) == doctest::Approx((8.0 + 40.0 + 27.0 + 21.7 + 7.8) * 1e-3));
}

TEST_CASE("arrival spread: the engine's DDP term lists its reductions in the order it issues them") {
  Cluster c = ddp_cluster();
  // Forward order: embeddings, two blocks, head (fp32 gradients: 4 bytes a parameter).
  const std::vector<Module> units{{"embed", 0, 18432}, {"block0", 1, 49984}, {"block1", 2, 49984}, {"head", 3, 16512}};
  const PlanGroups groups(c.mesh, Plan{});
  ScheduleOptions fp32;
  fp32.grad_wire_bytes = 4;
  const auto terms = comm_terms(groups, units, 1, fp32);
  REQUIRE(terms.size() == 1);
  CHECK(terms[0].seconds(c) == doctest::Approx(62.5e-3));
}
