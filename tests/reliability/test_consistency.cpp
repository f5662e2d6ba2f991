// The collective consistency check on the threads backend: the fingerprint exchange itself, and
// the engine's mismatch table (mismatch_job.hpp), each fault caught with the check on under
// several plans, named on every rank.
#include <doctest/doctest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "amsp/comm/consistency_check.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/sharding.hpp"
#include "mismatch_job.hpp"

namespace {

using amsp::comm::ThreadsCommunicator;
using amsp::test::Fault;

/// What each rank of a threads world saw: its error's rule and message ("" when none).
struct RankOutcomes {
  std::vector<std::string> rules, messages;
  std::vector<double> norms;
};

template <class Body>
RankOutcomes outcomes_on_threads(int n, Body body) {
  RankOutcomes out{std::vector<std::string>(n), std::vector<std::string>(n), std::vector<double>(n)};
  std::mutex mutex;
  try {
    amsp::comm::run_on_threads(n, [&](ThreadsCommunicator& comm) {
      try {
        const double norm = body(comm);
        std::lock_guard lock(mutex);
        out.norms[static_cast<std::size_t>(comm.rank())] = norm;
      } catch (const amsp::error& e) {
        std::lock_guard lock(mutex);
        out.rules[static_cast<std::size_t>(comm.rank())] = e.rule();
        out.messages[static_cast<std::size_t>(comm.rank())] = e.what();
        throw;
      }
    });
  } catch (const amsp::error&) {  // recorded per rank above
  }
  return out;
}

amsp::comm::CollectiveCall call(std::string_view label, std::size_t count = 16) {
  return {.kind = amsp::comm::op_kind::all_reduce, .type = amsp::dtype::fp32, .count = count, .label = label};
}

}  // namespace

TEST_CASE("check_collective: agreeing calls pass, each differing field is named on every rank") {
  const auto run = [](auto differ) {
    return outcomes_on_threads(3, [&](ThreadsCommunicator& comm) {
      amsp::comm::CollectiveCall mine = call("h.1");
      if (comm.rank() == 2) differ(mine);
      amsp::comm::check_collective(comm, mine, 7);
      return 0.0;
    });
  };
  const RankOutcomes same = run([](amsp::comm::CollectiveCall&) {});
  for (const std::string& rule : same.rules) CHECK(rule.empty());

  using Call = amsp::comm::CollectiveCall;
  const std::vector<std::pair<void (*)(Call&), std::string>> fields{
      {[](Call& c) { c.label = "h.2"; }, "of 'h.2'"},
      {[](Call& c) { c.count = 17; }, "count 17 fp32"},
      {[](Call& c) { c.type = amsp::dtype::bf16; }, "count 16 bf16"},
      {[](Call& c) { c.reduction = amsp::comm::reduce_op::avg; }, "fp32, avg"},
      {[](Call& c) { c.kind = amsp::comm::op_kind::reduce_scatter; }, "issued reduce_scatter"},
      {[](Call& c) { c.phase = "step"; }, ", step"},
      {[](Call& c) { c.micro_batch = 3; }, "micro-batch 3"},
      // Labels longer than what travels still compare in full (a hash), and the text is cut.
      {[](Call& c) { c.label = "a_label_that_is_much_longer_than_forty_seven_characters_X"; },
       "of 'a_label_that_is_much_longer_than_forty_seven_ch'"},
  };
  for (const auto& [change, expected] : fields) {
    CAPTURE(expected);
    const RankOutcomes out = run(change);
    for (std::size_t r = 0; r < out.rules.size(); ++r) {
      CHECK(out.rules[r] == "comm.collective_mismatch");
      CHECK(out.messages[r].find("rank 2 issued") != std::string::npos);
      CHECK(out.messages[r].find(expected) != std::string::npos);
      CHECK(out.messages[r].find("where rank 0 issued all_reduce of 'h.1' (count 16 fp32, sum") != std::string::npos);
    }
  }
  // Two labels differing only after the part that travels.
  const RankOutcomes tail = outcomes_on_threads(2, [](ThreadsCommunicator& comm) {
    const std::string label(60, 'x');
    amsp::comm::check_collective(comm, call(comm.rank() == 0 ? label + "1" : label + "2"));
    return 0.0;
  });
  CHECK(tail.rules[0] == "comm.collective_mismatch");
  // Root differences count for rooted collectives only; reductions for reducing ones only.
  const RankOutcomes roots = outcomes_on_threads(2, [](ThreadsCommunicator& comm) {
    amsp::comm::CollectiveCall c = call("b");
    c.kind = amsp::comm::op_kind::all_gather;
    c.root = comm.rank();
    c.reduction = comm.rank() == 0 ? amsp::comm::reduce_op::sum : amsp::comm::reduce_op::avg;
    amsp::comm::check_collective(comm, c);
    c.kind = amsp::comm::op_kind::broadcast;
    amsp::comm::check_collective(comm, c);
    return 0.0;
  });
  CHECK(roots.rules[0] == "comm.collective_mismatch");
  CHECK(roots.messages[0].find("issued broadcast") != std::string::npos);
  CHECK(roots.messages[0].find("root 1") != std::string::npos);
}

TEST_CASE("CollectiveChecker numbers calls per communicator; a rank one call behind is caught") {
  const RankOutcomes out = outcomes_on_threads(2, [](ThreadsCommunicator& comm) {
    amsp::comm::CollectiveChecker checker;
    ThreadsCommunicator other = comm.split(amsp::GroupSet(amsp::Mesh(2, 1), {amsp::RankGroup{{1, 0}, true}}));
    checker(comm, call("a"));
    checker(other, call("b"));  // its own numbering: call #1 there
    checker(comm, call("c"));
    const double checked = static_cast<double>(checker.checked());
    // Rank 1 has lost count on `other` (a fresh checker): call #1 against rank 0's call #2.
    amsp::comm::CollectiveChecker fresh;
    (comm.rank() == 1 ? fresh : checker)(other, call("d"));
    return checked;
  });
  CHECK(out.rules[0] == "comm.collective_mismatch");
  CHECK(out.messages[0].find("call #1") != std::string::npos);
  CHECK(out.messages[0].find("call #2") != std::string::npos);
}

TEST_CASE("AMSP_CHECK_COLLECTIVES: 1 on, 0 or unset off, anything else named") {
  ::unsetenv("AMSP_CHECK_COLLECTIVES");
  CHECK_FALSE(amsp::comm::collective_checks_requested());
  ::setenv("AMSP_CHECK_COLLECTIVES", "0", 1);
  CHECK_FALSE(amsp::comm::collective_checks_requested());
  ::setenv("AMSP_CHECK_COLLECTIVES", "1", 1);
  CHECK(amsp::comm::collective_checks_requested());
  // The engine takes it up without the option: the bucket-order fault is caught.
  const amsp::Mesh mesh(2, 2);
  const RankOutcomes out = outcomes_on_threads(4, [&](ThreadsCommunicator& comm) {
    return amsp::test::mismatch_job(comm, mesh, amsp::preset("ddp", mesh), Fault::bucket_order, 1, false);
  });
  CHECK(out.rules[0] == "comm.collective_mismatch");
  ::setenv("AMSP_CHECK_COLLECTIVES", "yes", 1);
  CHECK_THROWS_WITH_AS((void)amsp::comm::collective_checks_requested(), doctest::Contains("AMSP_CHECK_COLLECTIVES is 'yes'"),
                       amsp::error);
  ::unsetenv("AMSP_CHECK_COLLECTIVES");
}

TEST_CASE("AMSP_CHECK_COLLECTIVES: a value other than 0 or 1 is rule comm.check_collectives_env, also in the engine") {
  ::setenv("AMSP_CHECK_COLLECTIVES", "true", 1);
  std::string rule, message;
  try {
    (void)amsp::comm::collective_checks_requested();
  } catch (const amsp::error& e) {
    rule = e.rule();
    message = e.what();
  }
  CHECK(rule == "comm.check_collectives_env");
  CHECK(message.find("'true'") != std::string::npos);
  // The engine reads it when it is built (check_collectives off): every rank refuses to start.
  const amsp::Mesh mesh(2, 1);
  const RankOutcomes out = outcomes_on_threads(2, [&](ThreadsCommunicator& comm) {
    return amsp::test::mismatch_job(comm, mesh, amsp::preset("ddp", mesh), Fault::none, 1, false);
  });
  CHECK(out.rules[0] == "comm.check_collectives_env");
  CHECK(out.rules[1] == "comm.check_collectives_env");
  ::unsetenv("AMSP_CHECK_COLLECTIVES");
}

TEST_CASE("without the check, two same-size buckets in a different order give a wrong norm silently") {
  // The reported bug, reproduced: no error, and the ranks do not even agree on the norm.
  const amsp::Mesh mesh(2, 2);
  const auto norms = [&](Fault fault) {
    return outcomes_on_threads(4, [&](ThreadsCommunicator& comm) {
      return amsp::test::mismatch_job(comm, mesh, amsp::preset("ddp", mesh), fault, 1, false);
    });
  };
  const RankOutcomes good = norms(Fault::none);
  const RankOutcomes bad = norms(Fault::bucket_order);
  for (int r = 0; r < 4; ++r) {
    CHECK(bad.rules[static_cast<std::size_t>(r)].empty());
    CHECK(bad.norms[static_cast<std::size_t>(r)] != good.norms[static_cast<std::size_t>(r)]);
  }
}

TEST_CASE("the mismatch table: every fault caught with the check on, named on every rank") {
  const amsp::Mesh mesh(2, 2);
  for (std::string_view plan_name : amsp::test::fault_plans) {
    const amsp::Plan plan = amsp::preset(std::string(plan_name), mesh);
    CAPTURE(plan_name);
    // The check does not change a correct run.
    const auto run = [&](Fault fault, bool check) {
      return outcomes_on_threads(4, [&](ThreadsCommunicator& comm) {
        return amsp::test::mismatch_job(comm, mesh, plan, fault, 1, check);
      });
    };
    const RankOutcomes plain = run(Fault::none, false);
    const RankOutcomes checked = run(Fault::none, true);
    for (int r = 0; r < 4; ++r) {
      CHECK(checked.rules[static_cast<std::size_t>(r)].empty());
      CHECK(checked.norms[static_cast<std::size_t>(r)] == plain.norms[static_cast<std::size_t>(r)]);
    }
    for (const amsp::test::FaultCase& row : amsp::test::fault_table) {
      if (row.needs_sharded_params && plan.p.size() == 1) continue;
      CAPTURE(row.name);
      const RankOutcomes out = run(row.fault, true);
      for (int r = 0; r < 4; ++r) {
        // The faulty rank's group sees the mismatch; ranks of other groups (amsp-7b: the other
        // node) are stopped by the threads world's abort, whose message carries it.
        const std::string& rule = out.rules[static_cast<std::size_t>(r)];
        const std::string& message = out.messages[static_cast<std::size_t>(r)];
        CAPTURE(message);
        CHECK((rule == "comm.collective_mismatch" || (r >= 2 && rule == "comm.aborted")));
        CHECK(message.find("[rule comm.collective_mismatch]") != std::string::npos);
        for (std::string_view part : row.message_parts) CHECK(message.find(part) != std::string::npos);
      }
    }
  }
}
