// The MPI backend against the serial reference, on whatever world size mpiexec launched (ctest
// runs it on 2, 4 and 8 ranks): the sweep, sub-communicators from the sharding groups, async
// handles waited in reverse order, and the errors that must not hang.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/mpi.hpp"
#include "amsp/sharding/groups.hpp"
#include "collective_checks.hpp"
#include "report.hpp"

#include <climits>
#include <string>

namespace {
using namespace amsp;
using comm::MpiCommunicator;

using test::require_none;

using test::rule_thrown;

// The world as a mesh: two nodes when the size is even (4x2 for 8 ranks), one node otherwise.
Mesh world_mesh(int size) { return size % 2 == 0 ? Mesh(size / 2, 2) : Mesh(size, 1); }
}  // namespace

TEST_CASE("mpi: every collective, dtype and placement against the serial reference") {
  MpiCommunicator world = MpiCommunicator::world();
  require_none(test::run_sweep(world, {0, 1, 7, 4099}, test::all_dtypes));
  // 1<<20 elements on 2 and 4 ranks only: 8 oversubscribed processes on CI's 2 cores make it the
  // slowest part of the suite, and the threads backend's slow sweep covers 8 ranks.
  if (world.size() <= 4) require_none(test::run_sweep(world, {std::size_t{1} << 20}, {dtype::fp32, dtype::bf16}));
}

TEST_CASE("mpi: asynchronous forms, and several outstanding waited in reverse order") {
  MpiCommunicator world = MpiCommunicator::world();
  require_none(test::run_sweep(world, {0, 7, 4099}, test::all_dtypes, /*async=*/true));

  const int n = world.size();
  constexpr std::size_t count = 1000;
  std::vector<double> ag_send(count, world.rank()), ag_recv(count * static_cast<std::size_t>(n));
  std::vector<float> rs(count * static_cast<std::size_t>(n), 1.0f), ar(count, 2.0f);
  std::vector<bf16> bc(count, bf16::from_float(world.rank() == n - 1 ? 5.0f : 0.0f));
  std::vector<comm::Handle> handles;
  handles.push_back(world.all_gather_async(ag_send.data(), ag_recv.data(), count));
  handles.push_back(world.reduce_scatter_async(rs.data(), rs.data() + static_cast<std::size_t>(world.rank()) * count,
                                               count, comm::reduce_op::avg));
  handles.push_back(world.all_reduce_async(ar.data(), ar.data(), count, comm::reduce_op::sum));
  handles.push_back(world.broadcast_async(bc.data(), bc.data(), count, n - 1));
  for (auto it = handles.rbegin(); it != handles.rend(); ++it) it->wait();
  for (std::size_t i = 0; i < ag_recv.size(); ++i) REQUIRE(ag_recv[i] == static_cast<double>(i / count));
  for (std::size_t i = 0; i < count; ++i) {
    REQUIRE(rs[static_cast<std::size_t>(world.rank()) * count + i] == 1.0f);
    REQUIRE(ar[i] == static_cast<float>(2 * n));
    REQUIRE(bc[i].to_float() == 5.0f);
  }
  for (comm::Handle& h : handles) CHECK(h.test());
}

TEST_CASE("mpi: split on the sharding groups of several plans") {
  MpiCommunicator world = MpiCommunicator::world();
  const Mesh mesh = world_mesh(world.size());
  const int R = mesh.ranks_per_node();
  const int N = mesh.nodes();
  std::vector<Plan> plans{Plan{{1, 1}, {1, 1}, {R, N}}, Plan{{R, N}, {R, N}, {R, N}}, Plan{{1, 1}, {R, 1}, {R, N}}};
  if (R % 2 == 0) plans.push_back(Plan{{R / 2, 1}, {R, 1}, {R, N}});
  for (const Plan& plan : plans) {
    CAPTURE(to_string(plan));
    const PlanGroups pg(mesh, plan);
    for (const GroupSet* set : {&pg.p(), &pg.g_split(), &pg.os_split(), &pg.spread(), &pg.os_replica(), &pg.g_replica()}) {
      MpiCommunicator sub = world.split(*set);
      const RankGroup& group = set->group_of(world.rank());
      REQUIRE(sub.size() == group.size());
      REQUIRE(sub.rank() == group.position_of(world.rank()));
      std::vector<double> members(static_cast<std::size_t>(sub.size()));
      const double me = world.rank();
      sub.all_gather(&me, members.data(), 1);
      for (int i = 0; i < group.size(); ++i) CHECK(members[static_cast<std::size_t>(i)] == group.ranks[static_cast<std::size_t>(i)]);
      require_none(test::run_sweep(sub, {0, 7}, {dtype::fp16}));
    }
  }
}

TEST_CASE("mpi: the counting wrapper counts per rank and group") {
  const Mesh mesh = world_mesh(amsp::comm::MpiCommunicator::world().size());
  auto counter = std::make_shared<comm::TrafficCounter>(mesh);
  comm::CountingCommunicator<MpiCommunicator> world(MpiCommunicator::world(), counter);
  std::vector<float> f(4 * static_cast<std::size_t>(world.size()));
  world.all_gather(f.data() + 4 * static_cast<std::size_t>(world.rank()), f.data(), 4);  // S = 16 n, sends 16 (n-1)
  auto node = world.split(factor_groups(mesh, Factor{mesh.ranks_per_node(), 1}));
  node.all_reduce(f.data(), f.data(), 3);  // S = 12, sends 24 (R-1)/R
  const auto n = static_cast<std::uint64_t>(world.size());
  const auto R = static_cast<std::uint64_t>(mesh.ranks_per_node());
  CHECK(counter->sent({.world_rank = world.rank(), .kind = comm::op_kind::all_gather}) == comm::ByteVolume(16 * (n - 1)));
  CHECK(counter->sent({.world_rank = world.rank(), .kind = comm::op_kind::all_reduce}) ==
        comm::ByteVolume::fraction(24 * (R - 1), R));
  CHECK(counter->sent({.locality = comm::Locality::intra_node}) == comm::ByteVolume::fraction(24 * (R - 1), R));
}

TEST_CASE("mpi: mismatched calls and unfit group sets throw on every rank") {
  MpiCommunicator world = MpiCommunicator::world();
  std::vector<float> f(64);
  CHECK(rule_thrown([&] { world.all_reduce(f.data(), f.data(), world.rank() == 1 ? 5 : 4); }) ==
        "comm.count_mismatch");
  CHECK(rule_thrown([&] {
          if (world.rank() == 0) world.all_reduce(f.data(), f.data(), 4, comm::reduce_op::sum);
          else world.reduce(f.data(), f.data(), 4, comm::reduce_op::sum, 0);
        }) == "comm.op_mismatch");
  CHECK(rule_thrown([&] { world.broadcast(f.data(), f.data(), 4, world.rank() == 0 ? 0 : 1); }) ==
        "comm.root_mismatch");
  CHECK(rule_thrown([&] { world.broadcast(f.data(), f.data(), 4, world.size()); }) == "comm.root_range");
  // Still usable afterwards.
  float x = 1.0f;
  world.all_reduce(&x, &x, 1);
  CHECK(x == static_cast<float>(world.size()));
  // A set over fewer ranks than the world: the ranks beyond it are in no group.
  const GroupSet small = factor_groups(Mesh(1, 1), Factor{1, 1});
  CHECK(rule_thrown([&] { (void)world.split(small); }) == "comm.split_member");
  // Ranks that disagree on the set.
  const Mesh line(world.size(), 1);
  const GroupSet whole = factor_groups(line, Factor{world.size(), 1});
  const GroupSet singles = factor_groups(line, Factor{1, 1});
  CHECK(rule_thrown([&] { (void)world.split(world.rank() == 0 ? singles : whole); }) == "comm.split_mismatch");
}

TEST_CASE("mpi: counts beyond MPI's int counts throw on every rank before any data moves") {
  MpiCommunicator world = MpiCommunicator::world();
  // The check comes before any buffer is read or written: one float stands in for 2^31 of them.
  float x = 1.0f;
  const std::size_t too_many = static_cast<std::size_t>(INT_MAX) + 1;
  CHECK(rule_thrown([&] { world.all_reduce(&x, &x, too_many); }) == "comm.count_range");
  CHECK(test::message_thrown([&] { world.broadcast(&x, &x, too_many, 0); }).find("broadcast count of 2147483648") !=
        std::string::npos);
  // Each rank's share fits an int, the gathered buffer of size() shares does not.
  const std::size_t share = static_cast<std::size_t>(INT_MAX) / static_cast<std::size_t>(world.size()) + 1;
  const std::string gathered = test::message_thrown([&] { world.all_gather(&x, &x, share); });
  CHECK(gathered.find("[rule comm.count_range]") != std::string::npos);
  if (world.size() > 1) CHECK(gathered.find("all_gather receive buffer") != std::string::npos);
  // Still usable afterwards: every rank stopped at the same point.
  world.all_reduce(&x, &x, 1);
  CHECK(x == static_cast<float>(world.size()));
}

TEST_CASE("mpi: a session asking for more thread support than MPI gives is refused") {
  // main's session asked for MPI_THREAD_FUNNELED, and Open MPI provides the level asked for. An
  // MPI that always provides MPI_THREAD_MULTIPLE cannot refuse a second session: nothing to test.
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) {
    MESSAGE("this MPI provides MPI_THREAD_MULTIPLE to every session: comm.mpi_thread_level unreachable");
    return;
  }
  int argc = 0;
  char** argv = nullptr;
  const auto again = [&] { comm::MpiSession session(argc, argv, MPI_THREAD_MULTIPLE); };
  CHECK(rule_thrown(again) == "comm.mpi_thread_level");
  const std::string message = test::message_thrown(again);
  CHECK(message.find("thread level " + std::to_string(provided) + ", below the " +
                     std::to_string(MPI_THREAD_MULTIPLE) + " asked for") != std::string::npos);
  // MPI stays initialised: the refused session did not finalise it.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  CHECK(initialized == 1);
  CHECK(finalized == 0);
}

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);
  const int rank = session.world_rank();
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);  // one full report; other ranks print only failures
  int failed = context.run() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
