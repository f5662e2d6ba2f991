#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "amsp/planner/cluster.hpp"
#include "amsp/planner/comm_model.hpp"

using namespace amsp;
using namespace amsp::planner;

namespace {
// A toy model of two tensors, 400 parameters: every figure below is small enough to check by hand.
const std::vector<Module> toy{{"a", 0, 100}, {"b", 0, 300}};
const Mesh mesh(4, 2);

TermTraffic traffic_of(const std::vector<TermTraffic>& all, const std::string& term) {
  for (const TermTraffic& t : all)
    if (t.term == term) return t;
  FAIL("no term " << term);
  return {};
}

std::vector<std::string> names(const std::vector<TermTraffic>& all) {
  std::vector<std::string> n;
  for (const TermTraffic& t : all) n.push_back(t.term);
  return n;
}
}  // namespace

// Bytes per rank per step by hand, ring convention: AG/RS/BC/Reduce (n-1)/n·S, AR 2(n-1)/n·S; bf16
// on the wire, so a unit of Φ_i parameters is a buffer of 2Φ_i bytes; the whole model 800 bytes;
// the norm AllReduce moves one double.
TEST_CASE("comm model: engine traffic of DDP, ZeRO-1 and ZeRO-3 on 4 x 2") {
  const auto ddp = expected_traffic(Plan{}, mesh, toy, 3);
  CHECK(names(ddp) == std::vector<std::string>{"grad_replicas"});
  CHECK(traffic_of(ddp, "grad_replicas").inter_node_bytes == doctest::Approx(2.0 * 7 / 8 * 800));
  CHECK(traffic_of(ddp, "grad_replicas").intra_node_bytes == 0);

  const auto zero1 = expected_traffic(Plan{{1, 1}, {1, 1}, {4, 2}}, mesh, toy, 3);
  CHECK(names(zero1) == std::vector<std::string>{"grad_reduce_os", "grad_norm", "param_spread"});
  CHECK(traffic_of(zero1, "grad_reduce_os").inter_node_bytes == doctest::Approx(7.0 / 8 * 800));
  CHECK(traffic_of(zero1, "grad_norm").inter_node_bytes == doctest::Approx(2 * 7.0 / 8 * 8));
  CHECK(traffic_of(zero1, "param_spread").inter_node_bytes == doctest::Approx(7.0 / 8 * 800));

  const auto zero3 = expected_traffic(Plan{{4, 2}, {4, 2}, {4, 2}}, mesh, toy, 3);
  CHECK(names(zero3) == std::vector<std::string>{"param_gather", "grad_reduce_p", "grad_norm"});
  CHECK(traffic_of(zero3, "param_gather").inter_node_bytes == doctest::Approx(3 * 2 * 7.0 / 8 * 800));
  CHECK(traffic_of(zero3, "grad_reduce_p").inter_node_bytes == doctest::Approx(3 * 7.0 / 8 * 800));
}

TEST_CASE("comm model: engine traffic of a partial plan, intra and inter node") {
  // s_p = 2x1, s_g = 4x1, s_os = 4x2, M = 3
  const auto t = expected_traffic(Plan{{2, 1}, {4, 1}, {4, 2}}, mesh, toy, 3);
  CHECK(names(t) == std::vector<std::string>{"param_gather", "grad_reduce_p", "grad_reduce_g", "grad_reduce_os",
                                              "grad_norm", "param_spread"});
  CHECK(traffic_of(t, "param_gather").intra_node_bytes == doctest::Approx(3 * 2 * 0.5 * 800));
  CHECK(traffic_of(t, "grad_reduce_p").intra_node_bytes == doctest::Approx(3 * 0.5 * 800));
  // the 400-byte P-shard gradient over the 2 ranks sharing it inside the G group, every micro-batch
  CHECK(traffic_of(t, "grad_reduce_g").intra_node_bytes == doctest::Approx(3 * 0.5 * 400));
  // the 200-byte G shard over the 2 ranks (one per node) sharing it, once
  CHECK(traffic_of(t, "grad_reduce_os").inter_node_bytes == doctest::Approx(0.5 * 200));
  CHECK(traffic_of(t, "grad_reduce_os").intra_node_bytes == 0);
  // the 400-byte P shard back over the 4 ranks (2 per node) sharing it
  CHECK(traffic_of(t, "param_spread").inter_node_bytes == doctest::Approx(0.75 * 400));
}

TEST_CASE("comm model: keeping gathered weights halves the gathers; whole-tensor ownership reduces and broadcasts") {
  ScheduleOptions keep;
  keep.reshard_after_forward = false;
  const auto t = expected_traffic(Plan{{4, 2}, {4, 2}, {4, 2}}, mesh, toy, 2, keep);
  CHECK(traffic_of(t, "param_gather").inter_node_bytes == doctest::Approx(2 * 7.0 / 8 * 800));
  ScheduleOptions owned;
  owned.os_layout = OsLayout::whole_tensor;
  const auto b = expected_traffic(Plan{{1, 1}, {1, 1}, {4, 1}}, mesh, toy, 1, owned);
  CHECK(traffic_of(b, "grad_reduce_os").intra_node_bytes == doctest::Approx(0.75 * 800));  // Reduce to owners
  CHECK(traffic_of(b, "param_spread").intra_node_bytes == doctest::Approx(0.75 * 800));    // Broadcast back
  CHECK(traffic_of(b, "grad_replicas").inter_node_bytes == doctest::Approx(2 * 0.5 * 200));
  CHECK(traffic_of(b, "grad_norm").intra_node_bytes == doctest::Approx(2 * 0.75 * 8));
  CHECK_THROWS_WITH_AS((void)expected_traffic(Plan{{1, 1}, {2, 1}, {4, 1}}, mesh, toy, 1, owned),
                       doctest::Contains("planner.os_layout"), amsp::error);
}

TEST_CASE("comm model: a bucket or wire element size that is not positive is refused") {
  const PlanGroups groups(mesh, Plan{});
  ScheduleOptions no_bucket;
  no_bucket.bucket_bytes = 0;
  CHECK_THROWS_WITH_AS((void)comm_terms(groups, toy, 1, no_bucket), doctest::Contains("[rule planner.schedule]"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)comm_terms(groups, toy, 1, no_bucket), doctest::Contains("got bucket 0 bytes"),
                       amsp::error);
  ScheduleOptions negative_grads;
  negative_grads.grad_wire_bytes = -4;
  CHECK_THROWS_WITH_AS((void)expected_traffic(Plan{}, mesh, toy, 1, negative_grads),
                       doctest::Contains("[rule planner.schedule]"), amsp::error);
  CHECK_THROWS_WITH_AS((void)expected_traffic(Plan{}, mesh, toy, 1, negative_grads),
                       doctest::Contains("grads -4 bytes"), amsp::error);
  ScheduleOptions no_params;
  no_params.param_wire_bytes = 0;
  CHECK_THROWS_WITH_AS((void)comm_terms(groups, toy, 1, no_params), doctest::Contains("[rule planner.schedule]"),
                       amsp::error);
}

TEST_CASE("comm model: one reduction per unit in backward order, neighbours of equal size merged") {
  const std::vector<Module> units{{"x", 0, 100}, {"y", 1, 100}, {"z", 2, 300}};
  const PlanGroups groups(mesh, Plan{});
  const auto terms = comm_terms(groups, units, 1);
  REQUIRE(terms.size() == 1);
  CHECK(terms[0].window == Window::last_backward);
  REQUIRE(terms[0].calls.size() == 2);
  CHECK(terms[0].calls[0].bytes == 600);  // the last unit's backward comes first
  CHECK(terms[0].calls[0].count == 1);
  CHECK(terms[0].calls[1].bytes == 200);
  CHECK(terms[0].calls[1].count == 2);
  CHECK(terms[0].calls[0].group == Factor{4, 2});  // DDP: the whole world
  // Equal sizes apart in the order stay apart: the calls between them change how they are reached.
  const std::vector<Module> apart{{"x", 0, 100}, {"z", 1, 300}, {"y", 2, 100}};
  const auto split = comm_terms(groups, apart, 1);
  REQUIRE(split[0].calls.size() == 3);
  CHECK(split[0].calls[0].bytes == 200);
  CHECK(split[0].calls[1].bytes == 600);
  CHECK(split[0].calls[2].bytes == 200);
}

TEST_CASE("comm model: the paper's formulas with t = S / (1 GB/s)") {
  ScheduleOptions o;
  o.bucket_bytes = 100;  // U
  const Plan plan{{2, 1}, {4, 1}, {4, 2}};
  const PlanGroups groups(mesh, plan);
  const auto terms = comm_terms(groups, toy, 3, o, CommMode::paper);
  // A profile with exactly 1 GB/s for every op and shape the terms use: slope 1 in log-log.
  Cluster c;
  c.mesh = mesh;
  c.profile = BandwidthProfile{};
  for (const CommTerm& t : terms)
    for (const CollectiveCall& call : t.calls) {
      c.profile->add(call.op, call.group, 1.0, 1e-9);
      c.profile->add(call.op, call.group, 1e15, 1e6);
    }
  REQUIRE(terms.size() == 4);
  CHECK(terms[0].name == "T_p");  // M·Σ_i [2·2Φ_i + 2Φ_i] / 1e9
  CHECK(terms[0].seconds(c) == doctest::Approx(3 * 3 * 800 / 1e9));
  CHECK(terms[1].name == "T_g");  // (M-1)·(2Φ/(U·s_p))·U / 1e9
  CHECK(terms[1].seconds(c) == doctest::Approx(2 * 400 / 1e9));
  CHECK(terms[2].name == "T_os0");  // (2Φ/(U·s_p))·U / 1e9 over the s_dp/s_p = 4 ranks sharing a P shard
  CHECK(terms[2].seconds(c) == doctest::Approx(400 / 1e9));
  CHECK(terms[2].calls[0].group == Factor{2, 2});
  CHECK(terms[3].name == "T_os1");  // (s_os/s_p)·(2Φ/s_os) / 1e9
  CHECK(terms[3].seconds(c) == doctest::Approx(4 * 100 / 1e9));
  CHECK(terms[3].calls[0].op == comm::op_kind::broadcast);
  // The wait between compute segments: only the calls of the every-micro-batch window pay it, once
  // per call: T_p has 3 micro-batches x 2 tensors x (2 gathers + 1 reduce-scatter) = 18 calls, T_g
  // (M-1) x 800 / (100 x 2) = 8 AllReduces; the last-backward and first-forward terms none.
  c.sync_overhead_s = 1e-3;
  CHECK(terms[0].seconds(c) == doctest::Approx(3 * 3 * 800 / 1e9 + 18e-3));
  CHECK(terms[1].seconds(c) == doctest::Approx(2 * 400 / 1e9 + 8e-3));
  CHECK(terms[2].seconds(c) == doctest::Approx(400 / 1e9));
  CHECK(terms[3].seconds(c) == doctest::Approx(4 * 100 / 1e9));
}

TEST_CASE("comm model: group shapes come from the sharding layer's groups") {
  const PlanGroups groups(Mesh(8, 4), Plan{{8, 1}, {8, 1}, {8, 4}});
  CHECK(group_shape(groups.p(), groups.mesh()) == Factor{8, 1});
  CHECK(group_shape(groups.os_split(), groups.mesh()) == Factor{1, 4});
  CHECK(group_shape(groups.spread(), groups.mesh()) == Factor{1, 4});
  CHECK(group_shape(groups.os_replica(), groups.mesh()) == Factor{1, 1});
}

TEST_CASE("comm model: which engine calls follow compute in the schedule without overlap") {
  // Every gather and every-micro-batch reduction sits between compute segments; a unit's
  // last-micro-batch reductions follow its backward, the first of its chain to cross nodes on idle
  // links; the norm and the spread follow other calls.
  const auto flags = [](const Plan& plan, const Mesh& on = mesh) {
    std::vector<std::pair<std::string, bool>> f;
    for (const CommTerm& t : comm_terms(PlanGroups(on, plan), toy, 1)) f.emplace_back(t.name, t.after_compute);
    return f;
  };
  using F = std::vector<std::pair<std::string, bool>>;
  CHECK(flags(Plan{}) == F{{"grad_replicas", true}});                                             // DDP
  CHECK(flags(Plan{{1, 1}, {1, 1}, {4, 2}}) ==                                                      // ZeRO-1
        F{{"grad_reduce_os", true}, {"grad_norm", false}, {"param_spread", false}});
  CHECK(flags(Plan{{4, 2}, {4, 2}, {4, 2}}) ==                                                      // ZeRO-3
        F{{"param_gather", true}, {"grad_reduce_p", true}, {"grad_norm", false}});
  // hsdp: the P reduction stays inside the node, so the replica AllReduce still finds the links idle.
  CHECK(flags(Plan{{4, 1}, {4, 1}, {4, 1}}) ==
        F{{"param_gather", true}, {"grad_reduce_p", true}, {"grad_replicas", true}, {"grad_norm", false}});
  // MiCS over two nodes of 2 x 4: the P reduction crosses nodes first, the replicas queue behind it.
  const Mesh four_nodes(2, 4);
  CHECK(flags(Plan{{2, 2}, {2, 2}, {2, 2}}, four_nodes) ==
        F{{"param_gather", true}, {"grad_reduce_p", true}, {"grad_replicas", false}, {"grad_norm", false}});
  // The OS sharded over all four nodes behind that P reduction: the OS reduction is chained.
  CHECK(flags(Plan{{2, 2}, {2, 2}, {2, 4}}, four_nodes) ==
        F{{"param_gather", true}, {"grad_reduce_p", true}, {"grad_reduce_os", false}, {"grad_norm", false},
          {"param_spread", false}});
  // The paper's formulas keep the windows' reading.
  for (const CommTerm& t : comm_terms(PlanGroups(mesh, Plan{{4, 2}, {4, 2}, {4, 2}}), toy, 2, {}, CommMode::paper))
    CHECK(t.after_compute == (t.window == Window::every_micro_batch));
}

TEST_CASE("comm model: the norm costs its transfer alone, the reductions before it their waits too") {
  // ZeRO-1 on 4 x 2, 1 ms of waits per hand-over: the OS ReduceScatter of each unit waits 7 ms (a
  // ring over 8 ranks), the norm's AllReduce of one double none (its ranks have just left that
  // ReduceScatter together), where a ring's 14 waits would make it 14 ms.
  Cluster c = paper_cluster(2);
  c.mesh = mesh;
  c.step_overhead_s = 0.001;
  const auto terms = comm_terms(PlanGroups(mesh, Plan{{1, 1}, {1, 1}, {4, 2}}), toy, 1);
  const auto of = [&](std::string_view name) -> const CommTerm& {
    for (const CommTerm& t : terms)
      if (t.name == name) return t;
    FAIL("no term " << name);
    return terms.front();
  };
  const double norm_transfer = c.transfer_seconds(comm::op_kind::all_reduce, 8, {4, 2});
  CHECK(norm_transfer < 0.001);
  CHECK(of("grad_norm").seconds(c) == doctest::Approx(norm_transfer));
  CHECK(c.collective_seconds(comm::op_kind::all_reduce, 8, {4, 2}) == doctest::Approx(0.014));
  CHECK(of("grad_reduce_os").seconds(c) == doctest::Approx(2 * 0.007));  // two units, 7 waits each
}

TEST_CASE("comm model: how many of the spread's groups cross each node link at once") {
  // The spread's groups gather the OS shards of one P shard: one group per local rank where the
  // P shard stays inside a node, one group for the whole world under ZeRO-1.
  const auto spread_groups_per_link = [](const Plan& plan, const Mesh& on) {
    for (const CommTerm& t : comm_terms(PlanGroups(on, plan), toy, 1))
      if (t.name == "param_spread") return t.groups_per_link;
    FAIL("no spread in " << to_string(plan));
    return 0;
  };
  CHECK(spread_groups_per_link(Plan{{1, 1}, {1, 1}, {4, 2}}, mesh) == 1);  // ZeRO-1: one ring over the world
  CHECK(spread_groups_per_link(Plan{{4, 1}, {4, 1}, {4, 2}}, mesh) == 4);  // amsp-30b on 4 x 2: four pairs
  CHECK(spread_groups_per_link(Plan{{2, 1}, {2, 1}, {2, 4}}, Mesh(2, 4)) == 2);  // amsp-30b on 2 x 4
  CHECK(spread_groups_per_link(Plan{{2, 1}, {2, 1}, {4, 2}}, mesh) == 2);  // groups of 2 x 2: two per link
  CHECK(spread_groups_per_link(Plan{{2, 1}, {4, 1}, {4, 1}}, mesh) == 1);  // inside a node: no link
  for (const CommTerm& t : comm_terms(PlanGroups(mesh, Plan{{4, 2}, {4, 2}, {4, 2}}), toy, 1))
    CHECK(t.groups_per_link == 1);  // set for the spread alone
}

TEST_CASE("comm model: the head of a unit's last-micro-batch chain waits for compute as the window's calls do") {
  // Which term heads each unit's chain after its backward: the first reduction unless an
  // every-micro-batch reduction (grad_reduce_p, grad_reduce_g) comes before it.
  const auto heads = [](const Plan& plan) {
    std::vector<std::pair<std::string, bool>> f;
    for (const CommTerm& t : comm_terms(PlanGroups(mesh, plan), toy, 1))
      if (t.name != "param_gather" && t.name != "param_spread") f.emplace_back(t.name, t.heads_chain);
    return f;
  };
  using F = std::vector<std::pair<std::string, bool>>;
  CHECK(heads(Plan{}) == F{{"grad_replicas", true}});                                                    // DDP
  CHECK(heads(Plan{{1, 1}, {1, 1}, {4, 2}}) == F{{"grad_reduce_os", true}, {"grad_norm", false}});       // ZeRO-1
  CHECK(heads(Plan{{1, 1}, {4, 2}, {4, 2}}) == F{{"grad_reduce_g", false}, {"grad_norm", false}});       // ZeRO-2
  CHECK(heads(Plan{{1, 1}, {1, 1}, {4, 1}}) ==                                                           // amsp-7b
        F{{"grad_reduce_os", true}, {"grad_replicas", false}, {"grad_norm", false}});
  CHECK(heads(Plan{{4, 1}, {4, 1}, {4, 1}}) ==                                                           // hsdp
        F{{"grad_reduce_p", false}, {"grad_replicas", false}, {"grad_norm", false}});
  // ZeRO-1 and ZeRO-2 run the same calls (one ReduceScatter per unit over the world after its
  // backward, then the norm): with 1 ms of wait between compute segments both pay it once per
  // unit, two units; with chain_head_waits off only ZeRO-2's every-micro-batch ReduceScatters do.
  Cluster c = paper_cluster(2);
  c.mesh = mesh;
  c.sync_overhead_s = 1e-3;
  const auto waits = [&](const Plan& plan) {
    double with = 0, without = 0;
    for (const CommTerm& t : comm_terms(PlanGroups(mesh, plan), toy, 1)) {
      with += t.seconds(c);
      Cluster zero = c;
      zero.sync_overhead_s = 0;
      without += t.seconds(zero);
    }
    return with - without;
  };
  CHECK(waits(Plan{{1, 1}, {1, 1}, {4, 2}}) == doctest::Approx(2e-3));
  CHECK(waits(Plan{{1, 1}, {4, 2}, {4, 2}}) == doctest::Approx(2e-3));
  CHECK(waits(Plan{}) == doctest::Approx(2e-3));
  CHECK(waits(Plan{{4, 1}, {4, 1}, {4, 1}}) == doctest::Approx(2 * 3e-3));  // 2 gathers + 1 reduce-scatter per unit
  c.chain_head_waits = false;
  CHECK(waits(Plan{{1, 1}, {1, 1}, {4, 2}}) == doctest::Approx(0.0));
  CHECK(waits(Plan{{1, 1}, {4, 2}, {4, 2}}) == doctest::Approx(2e-3));
  CHECK(waits(Plan{}) == doctest::Approx(0.0));
}
