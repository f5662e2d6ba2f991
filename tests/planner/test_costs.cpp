#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/planner/cluster.hpp"
#include "amsp/planner/collective_cost.hpp"
#include "amsp/planner/comm_model.hpp"

using namespace amsp;
using namespace amsp::planner;
using comm::op_kind;

TEST_CASE("cost: ring byte convention of nccl-tests") {
  CHECK(ring_bytes_per_rank(op_kind::all_gather, 800, 8) == 700);
  CHECK(ring_bytes_per_rank(op_kind::reduce_scatter, 800, 8) == 700);
  CHECK(ring_bytes_per_rank(op_kind::broadcast, 800, 4) == 600);
  CHECK(ring_bytes_per_rank(op_kind::all_reduce, 800, 8) == 1400);
  CHECK(ring_bytes_per_rank(op_kind::all_reduce, 800, 1) == 0);
}

TEST_CASE("cost: analytic alpha-beta times on the paper's links, worked by hand") {
  const Links links = paper_cluster().links;  // 160 GB/s NVLink, 80 GB/s per node, 3 / 6 µs
  // inside a node: 7/8 of 8 GB over NVLink plus 7 ring steps
  CHECK(analytic_seconds(op_kind::all_gather, 8e9, {8, 1}, 8, links) == doctest::Approx(0.04375 + 7 * 3e-6));
  // one rank per node on 128 nodes: 8 such groups share each node's NICs; tree latency 2·7 steps
  CHECK(analytic_seconds(op_kind::all_reduce, 1e9, {1, 128}, 8, links) ==
        doctest::Approx(8 * (2.0 * 127 / 128 * 1e9) / 80e9 + 2 * 7 * 6e-6));
  // whole nodes: the NICs are the bottleneck (3.1 GB at 80 GB/s vs 160 GB/s NVLink), 31 ring steps
  CHECK(analytic_seconds(op_kind::reduce_scatter, 3.2e9, {8, 4}, 8, links) ==
        doctest::Approx(3.1e9 / 80e9 + 31 * 6e-6));
  CHECK(analytic_seconds(op_kind::broadcast, 1e6, {2, 1}, 8, links) == doctest::Approx(5e5 / 160e9 + 3e-6));
  CHECK(analytic_seconds(op_kind::all_gather, 1e9, {1, 1}, 8, links) == 0);
}

TEST_CASE("profile: log-log interpolation between measured sizes, clamped outside") {
  BandwidthProfile p;
  p.add(op_kind::all_gather, {4, 1}, 1e8, 2e-3);
  p.add(op_kind::all_gather, {4, 1}, 1e6, 1e-4);
  // halfway in log size: geometric mean of the times
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 1e7) == doctest::Approx(std::sqrt(1e-4 * 2e-3)));
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 1e6) == doctest::Approx(1e-4));
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 1e8) == doctest::Approx(2e-3));
  // below the smallest: latency bound, the smallest time
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 10) == doctest::Approx(1e-4));
  // above the largest: the largest size's bandwidth (1e8 B in 2 ms = 50 GB/s)
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 1e9) == doctest::Approx(2e-2));
  CHECK(!p.seconds(op_kind::all_gather, {2, 1}, 1e7).has_value());
  CHECK(!p.seconds(op_kind::reduce_scatter, {4, 1}, 1e7).has_value());
  // repeated sizes are averaged
  p.add(op_kind::all_gather, {4, 1}, 1e6, 3e-4);
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 1e6) == doctest::Approx(2e-4));
}

TEST_CASE("profile: reads amsp-profile's JSON and falls back to the analytic model for missing shapes") {
  const auto doc = parse_json(R"({"format": "amsp-bandwidth-profile/1", "backend": "threads", "mesh": "4x2",
    "host": "h", "entries": [
      {"op": "all_gather", "group": "4x1", "bytes": 4194304, "seconds": 0.001, "algbw_gbps": 99, "busbw_gbps": 1},
      {"op": "all_reduce", "group": "4x2", "bytes": 1000000, "algbw_gbps": 2.0, "busbw_gbps": 3.5}]})");
  const BandwidthProfile p = BandwidthProfile::from_json(doc);
  CHECK(*p.seconds(op_kind::all_gather, {4, 1}, 4194304) == doctest::Approx(0.001));  // seconds wins over algbw
  CHECK(*p.seconds(op_kind::all_reduce, {4, 2}, 1e6) == doctest::Approx(1e6 / 2e9));  // from algbw
  Cluster c = paper_cluster(2);
  c.mesh = Mesh(4, 2);
  c.profile = p;
  CHECK(c.measured(op_kind::all_gather, {4, 1}));
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.001));
  CHECK(!c.measured(op_kind::all_gather, {2, 1}));
  CHECK(c.collective_seconds(op_kind::all_gather, 4e6, {2, 1}) ==
        doctest::Approx(analytic_seconds(op_kind::all_gather, 4e6, {2, 1}, 4, c.links)));
  // The waits for peers (per call) and the transfer overlap: the longer of the two, profiled or
  // analytic, never a group of one.
  c.call_overhead_s = 0.002;
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.002));  // max(0.001, 0.002)
  CHECK(c.transfer_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.001));
  const double analytic = analytic_seconds(op_kind::all_gather, 4e6, {2, 1}, 4, c.links);
  CHECK(c.collective_seconds(op_kind::all_gather, 4e6, {2, 1}) == doctest::Approx(std::max(analytic, 0.002)));
  CHECK(c.collective_seconds(op_kind::all_gather, 4e6, {1, 1}) == 0.0);
  c.call_overhead_s = 0.0004;  // shorter than the 1 ms transfer: hidden
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.001));
  c.waits_overlap_transfer = false;  // the model before: the sum
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.0014));
  c.waits_overlap_transfer = true;
  // Per ring step instead: 3 steps of a 4-rank AllGather (3 ms > 1 ms), 2·7 of an 8-rank AllReduce.
  c.call_overhead_s = 0;
  c.step_overhead_s = 0.001;
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.003));
  CHECK(c.collective_seconds(op_kind::all_reduce, 1e6, {4, 2}) == doctest::Approx(0.014));
  CHECK(c.collective_seconds(op_kind::all_reduce, 1e8, {4, 2}) == doctest::Approx(1e8 / 2e9));  // 50 ms hides 14
  // Recursive doubling / halving (what the emulated cluster pins): log2 n hand-overs of AllGather
  // and ReduceScatter (4 ranks: 2, not 3; 8 ranks: 3, not 7), the AllReduce still a ring.
  c.gather_scatter = GatherScatterAlgorithm::recursive;
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.002));
  CHECK(c.overhead_seconds(op_kind::reduce_scatter, {4, 2}) == doctest::Approx(0.003));
  CHECK(c.overhead_seconds(op_kind::all_gather, {2, 1}) == doctest::Approx(0.001));
  CHECK(c.collective_seconds(op_kind::all_reduce, 1e6, {4, 2}) == doctest::Approx(0.014));
  c.gather_scatter = GatherScatterAlgorithm::ring;
  // The wait between compute segments is a separate figure (comm_model.hpp applies it per call of
  // the every-micro-batch window); nothing to wait for in a group of one.
  c.step_overhead_s = 0;
  c.sync_overhead_s = 0.003;
  CHECK(c.between_compute_seconds({4, 2}) == 0.003);
  CHECK(c.between_compute_seconds({1, 1}) == 0.0);
  CHECK(c.collective_seconds(op_kind::all_gather, 4194304, {4, 1}) == doctest::Approx(0.001));
  c.sync_overhead_s = -1e-3;
  CHECK_THROWS_WITH(validate(c), doctest::Contains("between compute segments"));
  c.sync_overhead_s = 0;
  c.call_overhead_s = -1e-3;
  CHECK_THROWS_WITH(validate(c), doctest::Contains("overhead per collective call"));
  c.call_overhead_s = 0;
  c.entry_skew_s = -1e-3;
  CHECK_THROWS_WITH(validate(c), doctest::Contains("entry skew must be non-negative, got 0, 0, 0, 0 and -0.001 s"));
}

TEST_CASE("profile: calls between compute segments are priced from the after-compute profile") {
  Cluster c = paper_cluster(2);
  c.mesh = Mesh(4, 2);
  BandwidthProfile chained, after_compute;
  chained.add(op_kind::all_gather, {4, 2}, 1e6, 0.010);
  chained.add(op_kind::reduce_scatter, {4, 2}, 1e6, 0.012);
  after_compute.add(op_kind::all_gather, {4, 2}, 1e6, 0.004);
  c.profile = chained;
  // Without an after-compute profile the back-to-back one prices every call.
  CHECK(c.collective_seconds(op_kind::all_gather, 1e6, {4, 2}, true) == doctest::Approx(0.010));
  c.profile_after_compute = after_compute;
  CHECK(c.collective_seconds(op_kind::all_gather, 1e6, {4, 2}) == doctest::Approx(0.010));
  CHECK(c.collective_seconds(op_kind::all_gather, 1e6, {4, 2}, true) == doctest::Approx(0.004));
  // An op the after-compute profile lacks: the back-to-back measurement, not the analytic model.
  CHECK(c.collective_seconds(op_kind::reduce_scatter, 1e6, {4, 2}, true) == doctest::Approx(0.012));
  // Neither has the shape: the analytic model for both places.
  const double analytic = analytic_seconds(op_kind::all_gather, 1e6, {2, 2}, 4, c.links);
  CHECK(c.collective_seconds(op_kind::all_gather, 1e6, {2, 2}, true) == doctest::Approx(analytic));
  // The every-micro-batch window's calls sit between compute segments; the others are chained.
  const std::vector<CollectiveCall> two_gathers{{op_kind::all_gather, 1e6, 2, {4, 2}}};
  CHECK(CommTerm("gathers", Window::every_micro_batch, two_gathers).seconds(c) == doctest::Approx(0.008));
  CHECK(CommTerm("spread", Window::first_forward, two_gathers).seconds(c) == doctest::Approx(0.020));
  CHECK(CommTerm("reduce", Window::last_backward, two_gathers).seconds(c) == doctest::Approx(0.020));
  // The flag, not the window, picks the profile (the engine's last-backward reductions follow
  // compute); seconds(c, chained) forces either, as the overlapped step asks per call.
  CommTerm reduce("reduce", Window::last_backward, two_gathers);
  reduce.after_compute = true;
  CHECK(reduce.seconds(c) == doctest::Approx(0.008));
  CHECK(reduce.seconds(c, false) == doctest::Approx(0.020));
  CHECK(CommTerm("gathers", Window::every_micro_batch, two_gathers).seconds(c, false) == doctest::Approx(0.020));
  // The wait for the group to come out of compute stays with the window's calls, priced either way.
  c.sync_overhead_s = 0.001;
  CHECK(CommTerm("gathers", Window::every_micro_batch, two_gathers).seconds(c, false) == doctest::Approx(0.022));
  CHECK(reduce.seconds(c) == doctest::Approx(0.008));
}

TEST_CASE("profile: the AllReduce after compute of a whole-node group is priced from the paced profile") {
  Cluster c = paper_cluster(4);
  c.mesh = Mesh(2, 4);
  BandwidthProfile chained, gapped, paced;
  for (const Factor g : {Factor{2, 4}, Factor{2, 2}, Factor{1, 4}}) {
    chained.add(op_kind::all_reduce, g, 2e5, 0.014);
    gapped.add(op_kind::all_reduce, g, 2e5, 0.0128);
    gapped.add(op_kind::reduce_scatter, g, 2e5, 0.0112);
    paced.add(op_kind::all_reduce, g, 2e5, 0.0120);
    paced.add(op_kind::reduce_scatter, g, 2e5, 0.0114);
  }
  c.profile = chained;
  c.profile_after_compute = gapped;
  // Without a paced profile the gapped one prices every call after compute.
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {2, 4}, true) == doctest::Approx(0.0128));
  c.profile_paced = paced;
  // Every rank of four nodes, and of two: the paced figure.
  CHECK(c.paced_allreduce(op_kind::all_reduce, {2, 4}, true));
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {2, 4}, true) == doctest::Approx(0.0120));
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {2, 2}, true) == doctest::Approx(0.0120));
  // A strided group (one rank of each node) shares the node links with its sibling: gapped.
  CHECK(!c.paced_allreduce(op_kind::all_reduce, {1, 4}, true));
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {1, 4}, true) == doctest::Approx(0.0128));
  // ReduceScatter of the same group: gapped, although the paced profile has it.
  CHECK(c.collective_seconds(op_kind::reduce_scatter, 2e5, {2, 4}, true) == doctest::Approx(0.0112));
  // Chained behind another call: back to back.
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {2, 4}, false) == doctest::Approx(0.014));
  // A group inside one node has no node link to pace.
  CHECK(!c.paced_allreduce(op_kind::all_reduce, {2, 1}, true));
  // The paced profile lacks the size's shape: the gapped one, not the analytic model.
  BandwidthProfile paced_world_only;
  paced_world_only.add(op_kind::all_reduce, {2, 4}, 2e5, 0.0120);
  c.profile_paced = paced_world_only;
  CHECK(c.collective_seconds(op_kind::all_reduce, 2e5, {2, 2}, true) == doctest::Approx(0.0128));
}

TEST_CASE("profile: the first pair's end gives a call's head start") {
  // 1 MB: slowest 10 ms, first pair 4 ms (head start 6 ms, fraction 0.4); 100 MB: 500, 400 ms (0.8).
  const BandwidthProfile p = BandwidthProfile::from_json(parse_json(R"({"format": "amsp-bandwidth-profile/1",
    "entries": [
      {"op": "all_gather", "group": "4x2", "bytes": 1000000, "seconds": 0.010, "first_pair_seconds": 0.004},
      {"op": "all_gather", "group": "4x2", "bytes": 100000000, "seconds": 0.5, "first_pair_seconds": 0.4},
      {"op": "reduce_scatter", "group": "4x2", "bytes": 1000000, "seconds": 0.010},
      {"op": "all_reduce", "group": "4x2", "bytes": 1000000, "seconds": 0.010, "first_pair_seconds": 0.01},
      {"op": "all_reduce", "group": "4x2", "bytes": 2000000, "seconds": 0.020}]})"));
  CHECK(*p.pair_head_start(op_kind::all_gather, {4, 2}, 1e6) == doctest::Approx(0.006));
  CHECK(*p.pair_head_start(op_kind::all_gather, {4, 2}, 1e8) == doctest::Approx(0.1));
  // Halfway in log size: the fraction halfway (0.6), times the interpolated slowest time.
  const double middle = std::sqrt(0.010 * 0.5);
  CHECK(*p.pair_head_start(op_kind::all_gather, {4, 2}, 1e7) == doctest::Approx(middle * 0.4));
  // Outside the measured sizes the fraction is held.
  CHECK(*p.pair_head_start(op_kind::all_gather, {4, 2}, 1e9) == doctest::Approx(5.0 * 0.2));
  CHECK(*p.pair_head_start(op_kind::all_gather, {4, 2}, 10) == doctest::Approx(0.006));
  // Not measured (a back-to-back profile, or one entry of the curve without it): none.
  CHECK(!p.pair_head_start(op_kind::reduce_scatter, {4, 2}, 1e6));
  CHECK(!p.pair_head_start(op_kind::all_reduce, {4, 2}, 1e6));
  CHECK(!p.pair_head_start(op_kind::all_gather, {2, 1}, 1e6));
  // Repeated sizes: the fractions are averaged over the runs that measured one.
  BandwidthProfile q;
  q.add(op_kind::all_gather, {4, 2}, 1e6, 0.010, 0.002);
  q.add(op_kind::all_gather, {4, 2}, 1e6, 0.010, 0.006);
  CHECK(*q.pair_head_start(op_kind::all_gather, {4, 2}, 1e6) == doctest::Approx(0.006));
  // A first pair later than the slowest rank, or not positive, is an error naming the field.
  const auto bad = [](const char* first) {
    return BandwidthProfile::from_json(parse_json(std::string(R"({"format": "amsp-bandwidth-profile/1", "entries": [
      {"op": "all_gather", "group": "4x2", "bytes": 1000, "seconds": 0.01, "first_pair_seconds": )") + first + "}]}"));
  };
  CHECK_THROWS_WITH_AS(bad("0.02"), doctest::Contains("first_pair_seconds"), amsp::error);
  CHECK_THROWS_WITH_AS(bad("0"), doctest::Contains("first_pair_seconds must be positive"), amsp::error);
  CHECK_THROWS_WITH_AS(bad("-1"), doctest::Contains("entry 0"), amsp::error);
  CHECK_NOTHROW(bad("0.01"));
}

TEST_CASE("profile: malformed profiles are errors naming the entry") {
  const auto bad = [](const char* text) { return BandwidthProfile::from_json(parse_json(text)); };
  CHECK_THROWS_WITH_AS(bad(R"({"format": "other", "entries": []})"), doctest::Contains("planner.profile"), amsp::error);
  CHECK_THROWS_WITH_AS(bad(R"({"format": "amsp-bandwidth-profile/1"})"), doctest::Contains("no \"entries\""),
                       amsp::error);
  CHECK_THROWS_WITH_AS(
      bad(R"({"format": "amsp-bandwidth-profile/1", "entries": [
        {"op": "all_gather", "group": "4x1", "bytes": 1, "seconds": 1},
        {"op": "all_to_all", "group": "4x1", "bytes": 1, "seconds": 1}]})"),
      doctest::Contains("entry 1"), amsp::error);
  CHECK_THROWS_WITH_AS(bad(R"({"format": "amsp-bandwidth-profile/1", "entries": [
        {"op": "broadcast", "group": "4x1", "bytes": -5, "seconds": 1}]})"),
                       doctest::Contains("positive bytes"), amsp::error);
  CHECK_THROWS_WITH_AS(bad(R"({"format": "amsp-bandwidth-profile/1", "entries": [
        {"op": "broadcast", "group": "4y1", "bytes": 5, "seconds": 1}]})"),
                       doctest::Contains("4y1"), amsp::error);
  CHECK_THROWS_WITH_AS((void)BandwidthProfile::load("/nonexistent/profile.json"), doctest::Contains("cannot open"),
                       amsp::error);
}

TEST_CASE("profile: load reads a file") {
  const std::string path = "test_costs_profile.json";
  {
    std::ofstream out(path);
    out << R"({"format": "amsp-bandwidth-profile/1", "entries": [{"op": "reduce_scatter", "group": "2x1",
              "bytes": 1000, "seconds": 0.5}]})";
  }
  const BandwidthProfile p = BandwidthProfile::load(path);
  std::remove(path.c_str());
  CHECK(*p.seconds(op_kind::reduce_scatter, {2, 1}, 2000) == doctest::Approx(1.0));
}

TEST_CASE("cluster: the paper's testbed and its validation") {
  const Cluster c = paper_cluster();
  CHECK(c.mesh.world_size() == 1024);
  CHECK(c.gpu_memory_bytes == 80e9);
  CHECK(c.peak_flops == 312e12);
  CHECK_NOTHROW(validate(c));
  Cluster bad = c;
  bad.compute_efficiency = 1.5;
  CHECK_THROWS_WITH_AS(validate(bad), doctest::Contains("planner.cluster"), amsp::error);
  bad = c;
  bad.links.node_bytes_per_second = 0;
  CHECK_THROWS_WITH_AS(validate(bad), doctest::Contains("link bandwidths"), amsp::error);
}

TEST_CASE("algorithm_steps: hand-overs of rings and of recursive doubling / halving") {
  constexpr auto ring = GatherScatterAlgorithm::ring;
  constexpr auto recursive = GatherScatterAlgorithm::recursive;
  CHECK(algorithm_steps(op_kind::all_gather, 8, ring) == 7);
  CHECK(algorithm_steps(op_kind::all_gather, 8, recursive) == 3);
  CHECK(algorithm_steps(op_kind::reduce_scatter, 8, recursive) == 3);
  CHECK(algorithm_steps(op_kind::reduce_scatter, 2, recursive) == 1);
  CHECK(algorithm_steps(op_kind::all_gather, 6, recursive) == 3);  // ⌈log2 6⌉
  CHECK(algorithm_steps(op_kind::all_reduce, 8, recursive) == 14);  // the pinned AllReduce is a ring
  CHECK(algorithm_steps(op_kind::all_gather, 1, recursive) == 0);
}
