// Sub-communicators from the sharding groups of several plans on a 4x2 mesh, and the errors of
// the threads backend: mismatched calls, group sets that do not fit, and a rank that throws.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>

#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "report.hpp"
#include "threads_harness.hpp"

namespace {
using namespace amsp;
using amsp::comm::ThreadsCommunicator;

using test::require_none;

// The group sets the engine splits on, for one plan.
std::vector<std::pair<std::string, GroupSet>> group_sets(const PlanGroups& pg) {
  return {{"p", pg.p()},           {"g", pg.g()},           {"os", pg.os()},
          {"g_split", pg.g_split()}, {"os_split", pg.os_split()}, {"spread", pg.spread()},
          {"os_replica", pg.os_replica()}, {"g_replica", pg.g_replica()}};
}

// On `sub` (split from the world with `set`): size and rank are the group's size and the
// caller's position; an all_gather of world ranks lists the group's members in order; a
// reduce_scatter hands chunk i to position i; and the sub-communicator passes the sweep.
std::vector<std::string> check_sub(ThreadsCommunicator& sub, const RankGroup& group, int world_rank,
                                   const std::string& name) {
  std::vector<std::string> bad;
  if (sub.size() != group.size()) bad.push_back(name + ": wrong size");
  if (sub.rank() != group.position_of(world_rank)) bad.push_back(name + ": rank is not the position in the group");
  std::vector<double> members(static_cast<std::size_t>(sub.size()));
  const double me = world_rank;
  sub.all_gather(&me, members.data(), 1);
  for (int i = 0; i < group.size(); ++i)
    if (members[static_cast<std::size_t>(i)] != group.ranks[static_cast<std::size_t>(i)])
      bad.push_back(name + ": member order differs from RankGroup::ranks");
  std::vector<float> chunks(static_cast<std::size_t>(sub.size()));
  for (int i = 0; i < sub.size(); ++i) chunks[static_cast<std::size_t>(i)] = static_cast<float>(i);
  float mine = -1;
  sub.reduce_scatter(chunks.data(), &mine, 1, comm::reduce_op::avg);
  if (mine != static_cast<float>(sub.rank())) bad.push_back(name + ": chunk i did not reach position i");
  for (std::string& s : test::run_sweep(sub, {0, 5, 33}, {dtype::fp32, dtype::bf16})) bad.push_back(name + ": " + s);
  return bad;
}
}  // namespace

TEST_CASE("threads: split on the groups of several plans on a 4x2 mesh") {
  const Mesh mesh(4, 2);
  const std::vector<Plan> plans{
      Plan{{1, 1}, {1, 1}, {1, 1}},
      Plan{{1, 1}, {1, 1}, {4, 2}},
      Plan{{2, 1}, {4, 1}, {4, 2}},
      Plan{{1, 1}, {2, 1}, {4, 1}},
      Plan{{4, 2}, {4, 2}, {4, 2}},
      Plan{{2, 1}, {2, 1}, {4, 1}},
  };
  for (const Plan& plan : plans) {
    CAPTURE(to_string(plan));
    const PlanGroups pg(mesh, plan);
    require_none(test::failures_on_threads(8, [&](ThreadsCommunicator& world) {
      std::vector<std::string> bad;
      for (const auto& [name, set] : group_sets(pg)) {
        ThreadsCommunicator sub = world.split(set);
        for (std::string& s : check_sub(sub, set.group_of(world.rank()), world.rank(), name)) bad.push_back(s);
      }
      return bad;
    }));
  }
}

TEST_CASE("threads: splitting a sub-communicator again, with positions as ranks") {
  // Split the world into the two nodes, then each node into pairs in reversed order.
  const Mesh mesh(4, 2);
  const GroupSet nodes = factor_groups(mesh, Factor{4, 1});
  const Mesh node_mesh(4, 1);
  const GroupSet reversed_pairs(node_mesh, {RankGroup{{1, 0}, true}, RankGroup{{3, 2}, true}});
  require_none(test::failures_on_threads(8, [&](ThreadsCommunicator& world) {
    ThreadsCommunicator node = world.split(nodes);
    ThreadsCommunicator pair = node.split(reversed_pairs);
    std::vector<std::string> bad;
    const int expected_rank = 1 - node.rank() % 2;  // member order {1, 0}: node rank 1 is position 0
    if (pair.size() != 2 || pair.rank() != expected_rank) bad.push_back("nested split: wrong size or rank");
    float node_ranks[2] = {-1, -1};
    const auto mine = static_cast<float>(node.rank());
    pair.all_gather(&mine, node_ranks, 1);
    const int base = node.rank() / 2 * 2;
    if (node_ranks[0] != static_cast<float>(base + 1) || node_ranks[1] != static_cast<float>(base)) bad.push_back("nested split: wrong member order");
    return bad;
  }));
}

namespace {
// Runs `body` on every rank of a world of `n`; returns the rule each rank's body threw ("" none).
template <class Body>
std::vector<std::string> rules_on_threads(int n, Body body) {
  std::vector<std::string> rules(static_cast<std::size_t>(n));
  comm::run_on_threads(n, [&](ThreadsCommunicator& c) {
    rules[static_cast<std::size_t>(c.rank())] = test::rule_thrown([&] { body(c); });
  });
  return rules;
}

void require_all(const std::vector<std::string>& rules, const std::string& rule) {
  for (std::size_t r = 0; r < rules.size(); ++r) {
    CAPTURE(r);
    CHECK(rules[r] == rule);
  }
}
}  // namespace

TEST_CASE("threads: mismatched calls fail on every rank, and the communicator stays usable") {
  std::vector<std::string> after(4);
  require_all(rules_on_threads(4, [&](ThreadsCommunicator& c) {
                std::vector<float> send(8), recv(64);
                try {
                  c.all_gather(send.data(), recv.data(), c.rank() == 2 ? 8 : 7);
                } catch (const error&) {
                  // The next collective must still work on every rank.
                  float x = 1.0f;
                  c.all_reduce(&x, &x, 1, comm::reduce_op::sum);
                  after[static_cast<std::size_t>(c.rank())] = x == 4.0f ? "ok" : "wrong sum";
                  throw;
                }
              }),
              "comm.count_mismatch");
  for (const std::string& s : after) CHECK(s == "ok");

  require_all(rules_on_threads(3, [](ThreadsCommunicator& c) {
                std::vector<double> d(4);
                std::vector<float> f(4);
                if (c.rank() == 1) c.all_reduce(f.data(), f.data(), 4, comm::reduce_op::sum);
                else c.all_reduce(d.data(), d.data(), 4, comm::reduce_op::sum);
              }),
              "comm.dtype_mismatch");
  require_all(rules_on_threads(2, [](ThreadsCommunicator& c) {
                std::vector<float> f(4);
                if (c.rank() == 0) c.all_reduce(f.data(), f.data(), 2, comm::reduce_op::sum);
                else c.broadcast(f.data(), f.data(), 2, 0);
              }),
              "comm.op_mismatch");
  require_all(rules_on_threads(2, [](ThreadsCommunicator& c) {
                std::vector<float> f(4);
                c.all_reduce(f.data(), f.data(), 4, c.rank() == 0 ? comm::reduce_op::sum : comm::reduce_op::avg);
              }),
              "comm.reduce_op_mismatch");
  require_all(rules_on_threads(3, [](ThreadsCommunicator& c) {
                std::vector<float> f(4);
                c.broadcast(f.data(), f.data(), 4, c.rank() == 0 ? 1 : 2);
              }),
              "comm.root_mismatch");
  require_all(rules_on_threads(3, [](ThreadsCommunicator& c) {
                std::vector<float> f(4);
                c.reduce(f.data(), f.data(), 4, comm::reduce_op::sum, 3);
              }),
              "comm.root_range");
  require_all(rules_on_threads(2, [](ThreadsCommunicator& c) {
                std::vector<float> f(4);
                comm::Handle h = c.all_gather_async(f.data(), f.data(), c.rank() == 0 ? 1 : 2);
                h.wait();
              }),
              "comm.count_mismatch");
  // Overlapping buffers that are not the in-place layout: rank 1's all_gather send block sits at
  // block 0 of its receive buffer, which rank 0's copy would race with.
  require_all(rules_on_threads(2, [](ThreadsCommunicator& c) {
                std::vector<float> f(8);
                c.all_gather(f.data(), f.data(), 4);
              }),
              "comm.buffer_alias");
  require_all(rules_on_threads(3, [](ThreadsCommunicator& c) {
                std::vector<double> d(8);
                c.all_reduce(d.data(), d.data() + 1, 4, comm::reduce_op::sum);
              }),
              "comm.buffer_alias");
}

TEST_CASE("threads: group sets that do not fit the communicator") {
  // A set over 4 ranks split on an 8-rank world: ranks 4..7 are in no group.
  const GroupSet small = factor_groups(Mesh(4, 1), Factor{2, 1});
  require_all(rules_on_threads(8, [&](ThreadsCommunicator& c) { (void)c.split(small); }), "comm.split_member");
  // A set over 8 ranks split on a 4-rank world.
  const GroupSet big = factor_groups(Mesh(4, 2), Factor{4, 1});
  require_all(rules_on_threads(4, [&](ThreadsCommunicator& c) { (void)c.split(big); }), "comm.split_size");
  // Ranks that disagree on the group set.
  const GroupSet pairs = factor_groups(Mesh(4, 1), Factor{2, 1});
  const GroupSet whole = factor_groups(Mesh(4, 1), Factor{4, 1});
  require_all(rules_on_threads(4, [&](ThreadsCommunicator& c) { (void)c.split(c.rank() == 3 ? whole : pairs); }),
              "comm.split_mismatch");
}

TEST_CASE("threads: a rank that throws aborts the world instead of hanging it") {
  std::vector<std::string> rules(4);
  std::string rethrown;
  try {
    comm::run_on_threads(4, [&](ThreadsCommunicator& c) {
      if (c.rank() == 1) throw std::runtime_error("rank 1 gives up");
      std::vector<float> f(100);
      rules[static_cast<std::size_t>(c.rank())] = test::rule_thrown([&] {
        // Blocked forever without the abort: rank 1 never joins.
        c.all_reduce(f.data(), f.data(), f.size(), comm::reduce_op::sum);
        c.all_reduce(f.data(), f.data(), f.size(), comm::reduce_op::sum);
      });
    });
  } catch (const std::runtime_error& e) {
    rethrown = e.what();
  }
  CHECK(rethrown == "rank 1 gives up");
  for (int r : {0, 2, 3}) CHECK(rules[static_cast<std::size_t>(r)] == "comm.aborted");

  // The same with asynchronous collectives in flight on a sub-communicator.
  CHECK_THROWS_WITH_AS(comm::run_on_threads(4,
                                            [&](ThreadsCommunicator& c) {
                                              ThreadsCommunicator sub = c.split(factor_groups(Mesh(4, 1), Factor{2, 1}));
                                              std::vector<float> f(100);
                                              comm::Handle h = sub.all_reduce_async(f.data(), f.data(), 100);
                                              if (c.rank() == 0) throw std::logic_error("rank 0 leaves mid-flight");
                                              h.wait();
                                              c.barrier();
                                            }),
                       "rank 0 leaves mid-flight", std::logic_error);
  CHECK(test::rule_thrown([] { comm::run_on_threads(0, [](ThreadsCommunicator&) {}); }) == "comm.world_size");
}
