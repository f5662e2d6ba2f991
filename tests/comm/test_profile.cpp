// amsp-profile's measurement (group shapes of a mesh, the measured entries) and the JSON document
// the library writes for it and the planner reads (format amsp-bandwidth-profile/1).
#include <doctest/doctest.h>

#include <chrono>

#include "amsp/sharding/presets.hpp"
#include "measure_collectives.hpp"
#include "collective_checks.hpp"
#include "threads_harness.hpp"

using namespace amsp;

TEST_CASE("profile: the group shapes of a mesh are its aligned blocks") {
  const auto shapes = amsp_profile::group_shapes(Mesh(4, 2));
  REQUIRE(shapes.size() == 3);
  CHECK(shapes[0] == Factor{2, 1});
  CHECK(shapes[1] == Factor{4, 1});
  CHECK(shapes[2] == Factor{4, 2});
  CHECK(amsp_profile::group_shapes(Mesh(1, 1)).empty());
  CHECK(amsp_profile::iterations_for(std::uint64_t{1} << 30) == 2);
  CHECK(amsp_profile::iterations_for(4096) == 200);
}

TEST_CASE("profile: the group sets of plans, strided shapes included, one per shape") {
  const Mesh mesh(4, 2);
  // hsdp: P = G = OS inside a node (4x1); its OS replicas pair one rank of each node (1x2).
  auto sets = amsp_profile::plan_group_sets(mesh, {preset("hsdp", mesh)});
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].first == Factor{4, 1});
  CHECK(sets[1].first == Factor{1, 2});
  CHECK(sets[1].second.groups().front().ranks == std::vector<int>{0, 4});
  // amsp-30b (p = g = 4x1, os = 4x2) adds its split and spread over the nodes (1x2, already
  // there); zero3's world group (4x2) is new; ddp has only the world's replicas (4x2, known).
  sets = amsp_profile::plan_group_sets(mesh, {preset("hsdp", mesh), preset("amsp-30b", mesh), preset("zero3", mesh),
                                              preset("ddp", mesh)});
  REQUIRE(sets.size() == 3);
  CHECK(sets[2].first == Factor{4, 2});
  CHECK(amsp_profile::iterations_for(4096, 50) == 50);
  CHECK(amsp_profile::iterations_for(std::uint64_t{1} << 30, 50) == 2);
}

namespace {
// One 4 KiB AllGather of two threads, measured twice with a 50 ms gap timed as `timing`: its
// entry and the wall time of the whole measurement.
struct GappedGather {
  planner::ProfileEntry entry;
  std::chrono::steady_clock::duration elapsed;
};
constexpr auto profile_gap = std::chrono::milliseconds{50};
GappedGather gapped_gather(amsp_profile::GapTiming timing, int chain_calls = 2) {
  const Mesh mesh(2, 1);
  std::vector<planner::ProfileEntry> entries;
  const auto t0 = std::chrono::steady_clock::now();
  comm::run_on_threads(2, [&](comm::ThreadsCommunicator& world) {
    auto mine = amsp_profile::measure(world, mesh, {comm::op_kind::all_gather},
                                      amsp_profile::block_group_sets(mesh, {Factor{2, 1}}), {4096}, 2, profile_gap,
                                      amsp_profile::CallForms::engine, timing, chain_calls);
    if (world.rank() == 0) entries = std::move(mine);
  });
  REQUIRE(entries.size() == 1);
  return {entries[0], std::chrono::steady_clock::now() - t0};
}
}  // namespace

TEST_CASE("profile: with a gap, every call is timed alone and the idle gap is not counted") {
  const GappedGather g = gapped_gather(amsp_profile::GapTiming::slowest_call);
  CHECK(g.entry.seconds > 0);
  CHECK(g.entry.seconds < 0.05);  // two 4 KiB gathers of two threads: far below the gap
  CHECK(g.elapsed >= 2 * profile_gap);  // the gaps did happen, one before each timed call
  // When the first pair of partners had ended: measured; with two ranks the one pair is both,
  // so it ends with the slowest rank.
  CHECK(g.entry.first_pair_seconds > 0);
  CHECK(g.entry.first_pair_seconds == doctest::Approx(g.entry.seconds));
  // How far apart the two ranks ended: measured, no wider than the call.
  CHECK(g.entry.end_spread_seconds >= 0);
  CHECK(g.entry.end_spread_seconds <= g.entry.seconds);
}

TEST_CASE("profile: the widest spread of the ranks' ends within a group") {
  const Mesh mesh(4, 2);
  const std::vector<double> ends{5, 1, 7, 3, 2, 6, 4, 8};
  CHECK(amsp_profile::widest_end_spread(factor_groups(mesh, Factor{4, 2}), ends) == 7.0);  // 1 to 8
  // One group per node: 1 to 7 and 2 to 8, both 6.
  CHECK(amsp_profile::widest_end_spread(factor_groups(mesh, Factor{4, 1}), ends) == 6.0);
  // Pairs (0,1) (2,3) (4,5) (6,7): 4, 4, 4, 4; groups of one rank: no spread.
  CHECK(amsp_profile::widest_end_spread(factor_groups(mesh, Factor{2, 1}), ends) == 4.0);
  CHECK(amsp_profile::widest_end_spread(factor_groups(mesh, Factor{1, 1}), ends) == 0.0);
}

TEST_CASE("profile: the first pair of partners half a group apart, in the group where it ends last") {
  const Mesh mesh(4, 2);
  // Each world rank's end of one call.
  const std::vector<double> ends{5, 1, 7, 3, 2, 6, 4, 8};
  // One group of all eight: pairs (0,4) (1,5) (2,6) (3,7) end at 5, 6, 7, 8; the first at 5.
  CHECK(amsp_profile::last_groups_first_pair(factor_groups(mesh, Factor{4, 2}), ends) == 5.0);
  // Two groups of four (one per node): (0,2) (1,3) end at 7 and 3, (4,6) (5,7) at 4 and 8;
  // first pairs at 3 and 4, the later of the two groups 4.
  CHECK(amsp_profile::last_groups_first_pair(factor_groups(mesh, Factor{4, 1}), ends) == 4.0);
  // Groups of two: the one pair is both ranks.
  CHECK(amsp_profile::last_groups_first_pair(factor_groups(mesh, Factor{2, 1}), ends) == 8.0);
}

TEST_CASE("profile: paced, every rank loops gap then call and the gaps are not counted") {
  const GappedGather g = gapped_gather(amsp_profile::GapTiming::paced);
  CHECK(g.entry.seconds >= 0);
  CHECK(g.entry.seconds < 0.05);  // the loop's time per call less the 50 ms gap
  CHECK(g.elapsed >= 2 * profile_gap);
  CHECK(g.entry.first_pair_seconds == 0);  // a loop has no per-call end of each rank
  CHECK(g.entry.end_spread_seconds == 0);
}

TEST_CASE("profile: chained, the second of two calls after the gap, slowest rank against slowest rank") {
  // Ranks' (first end, second end): the first call's slowest rank ends at 5, the second's at 12.
  CHECK(amsp_profile::chained_second_seconds({1, 12, 5, 9, 3, 11}) == 7.0);
  CHECK(amsp_profile::chained_second_seconds({2, 3}) == 1.0);
  CHECK_THROWS_WITH_AS((void)amsp_profile::chained_second_seconds({1, 2, 3}),
                       doctest::Contains("two ends, got 3 values [rule profile.chain]"), amsp::error);
  // The median: one stalled chain in three does not move it; the mean of the middle two of four.
  std::vector<double> odd{16, 29, 16.2};
  CHECK(amsp_profile::median(odd) == 16.2);
  std::vector<double> even{4, 1, 3, 2};
  CHECK(amsp_profile::median(even) == 2.5);
  std::vector<double> none;
  CHECK_THROWS_WITH_AS((void)amsp_profile::median(none), doctest::Contains("rule profile.chain"), amsp::error);

  for (const int calls : {2, 4}) {
    const GappedGather g = gapped_gather(amsp_profile::GapTiming::chained, calls);
    CHECK(g.entry.seconds >= 0);
    CHECK(g.entry.seconds < 0.05);  // one 4 KiB gather of two threads, the gap and the chain's first calls not counted
    CHECK(g.elapsed >= 2 * profile_gap);
    CHECK(g.entry.first_pair_seconds == 0);
  }
  CHECK_THROWS_WITH_AS((void)gapped_gather(amsp_profile::GapTiming::chained, 1),
                       doctest::Contains("at least 2 calls, got 1 [rule profile.chain]"), amsp::error);
}

TEST_CASE("profile: measured entries and their JSON document") {
  const Mesh mesh(2, 2);
  const std::vector<comm::op_kind> ops{comm::op_kind::all_gather, comm::op_kind::reduce_scatter,
                                       comm::op_kind::all_reduce, comm::op_kind::broadcast};
  std::vector<planner::ProfileEntry> entries;
  comm::run_on_threads(4, [&](comm::ThreadsCommunicator& world) {
    auto mine = amsp_profile::measure(world, mesh, ops, amsp_profile::group_shapes(mesh), {4096, 1000});
    if (world.rank() == 0) entries = std::move(mine);
  });
  REQUIRE(entries.size() == 2 * 4 * 2);
  CHECK(entries[0].group == Factor{2, 1});
  CHECK(entries[0].op == comm::op_kind::all_gather);
  CHECK(entries[0].bytes == 4096);
  CHECK(entries[1].bytes == 1000 / 8 * 8);  // whole fp32 elements per rank of a 2-rank group
  CHECK(entries.back().group == Factor{2, 2});
  CHECK(entries.back().op == comm::op_kind::broadcast);
  CHECK(entries.back().bytes == 1000);  // the whole buffer on every rank: whole fp32 elements only
  CHECK(entries[entries.size() - 7].op == comm::op_kind::all_gather);
  CHECK(entries[entries.size() - 7].bytes == 1000 / 16 * 16);  // a whole element per rank of four
  for (const auto& e : entries) CHECK(e.seconds > 0);
  for (const auto& e : entries) CHECK(e.first_pair_seconds == 0);  // back to back: no rank's end measured

  const Json doc = parse_json(to_json_string(planner::bandwidth_profile_json(entries, "threads", mesh, "box")));
  CHECK(doc.at("format").as_string() == "amsp-bandwidth-profile/1");
  CHECK(doc.at("backend").as_string() == "threads");
  CHECK(doc.at("mesh").as_string() == "2x2");
  CHECK(doc.at("host").as_string() == "box");
  const auto& list = doc.at("entries").as_array();
  REQUIRE(list.size() == entries.size());
  const Json& rs = list[2];  // reduce_scatter, 2x1, 4096 bytes
  CHECK(rs.at("op").as_string() == "reduce_scatter");
  CHECK(rs.at("group").as_string() == "2x1");
  CHECK(rs.at("bytes").as_int() == 4096);
  const double seconds = rs.at("seconds").as_number();
  CHECK(rs.at("algbw_gbps").as_number() == doctest::Approx(4096 / seconds / 1e9));
  CHECK(rs.at("busbw_gbps").as_number() == doctest::Approx(4096 / seconds / 1e9 * 0.5));
  CHECK(list[4].at("op").as_string() == "all_reduce");
  CHECK(list[4].at("busbw_gbps").as_number() == doctest::Approx(list[4].at("algbw_gbps").as_number()));  // 2(n-1)/n = 1

  // 8 bytes (the gradient norm's AllReduce): two elements, less than one per rank of four, so
  // timed for the ops that hold the whole buffer only.
  std::vector<planner::ProfileEntry> small;
  comm::run_on_threads(4, [&](comm::ThreadsCommunicator& world) {
    auto mine = amsp_profile::measure(world, mesh, ops, {Factor{2, 2}}, {8});
    if (world.rank() == 0) small = std::move(mine);
  });
  REQUIRE(small.size() == 2);
  CHECK(small[0].op == comm::op_kind::all_reduce);
  CHECK(small[1].op == comm::op_kind::broadcast);
  for (const auto& e : small) CHECK(e.bytes == 8);

  std::string blocks_only, below_one_element;
  const std::vector<comm::op_kind> block_ops{comm::op_kind::all_gather, comm::op_kind::reduce_scatter};
  comm::run_on_threads(4, [&](comm::ThreadsCommunicator& world) {
    const std::string r = test::rule_thrown([&] { (void)amsp_profile::measure(world, mesh, block_ops, {Factor{2, 2}}, {8}); });
    const std::string e = test::rule_thrown([&] { (void)amsp_profile::measure(world, mesh, ops, {Factor{2, 2}}, {2}); });
    if (world.rank() == 0) blocks_only = r, below_one_element = e;
  });
  CHECK(blocks_only == "profile.size");
  CHECK(below_one_element == "profile.size");
}

TEST_CASE("profile: the planner reads back what the writer writes") {
  // Writer (bandwidth_profile_json) and reader (BandwidthProfile::from_json) share the format's
  // header but not their code: a field renamed on one side only fails here.
  const std::vector<planner::ProfileEntry> entries{
      {comm::op_kind::all_gather, Factor{2, 1}, 4096, 1e-5, 4e-6},
      {comm::op_kind::all_gather, Factor{2, 1}, std::uint64_t{1} << 20, 1e-3, 7.5e-4},
      {comm::op_kind::all_reduce, Factor{2, 2}, 8192, 4e-5}};
  const Json doc = parse_json(to_json_string(planner::bandwidth_profile_json(entries, "mpi", Mesh(2, 2), "h")));
  const planner::BandwidthProfile profile = planner::BandwidthProfile::from_json(doc);
  CHECK(profile.seconds(comm::op_kind::all_gather, Factor{2, 1}, 4096) == doctest::Approx(1e-5));
  CHECK(profile.seconds(comm::op_kind::all_gather, Factor{2, 1}, 1 << 20) == doctest::Approx(1e-3));
  CHECK(profile.seconds(comm::op_kind::all_reduce, Factor{2, 2}, 8192) == doctest::Approx(4e-5));
  CHECK(!profile.has(comm::op_kind::all_reduce, Factor{2, 1}));
  // The first pair's end comes back as the head start (the slowest rank's end less it).
  CHECK(*profile.pair_head_start(comm::op_kind::all_gather, Factor{2, 1}, 4096) == doctest::Approx(6e-6));
  CHECK(*profile.pair_head_start(comm::op_kind::all_gather, Factor{2, 1}, 1 << 20) == doctest::Approx(2.5e-4));
  CHECK(!profile.pair_head_start(comm::op_kind::all_reduce, Factor{2, 2}, 8192));  // written without one
  CHECK(!doc.at("entries").as_array()[2].contains("first_pair_seconds"));
}
