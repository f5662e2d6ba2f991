// The mismatch table (mismatch_job.hpp) under MPI, 4 ranks on a 2 x 2 mesh: every fault is caught
// by the collective consistency check on every rank, which throws the same error and carries on
// with the next case; a correct run with the check gives the result of a run without it. Prints
// "N passed, N failed" on rank 0.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "amsp/comm/mpi.hpp"
#include "amsp/sharding.hpp"
#include "mismatch_job.hpp"
#include "../mpi_checks.hpp"

namespace {

using amsp::comm::MpiCommunicator;
using amsp::test::Fault;

using amsp::test::mpi_checks::expect;
using amsp::test::mpi_checks::failed;
using amsp::test::mpi_checks::passed;

}  // namespace

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);
  MpiCommunicator world = MpiCommunicator::world();
  if (world.size() != 4) {
    if (world.rank() == 0) std::fprintf(stderr, "test_consistency_mpi needs 4 ranks, got %d\n", world.size());
    return 1;
  }
  const amsp::Mesh mesh(2, 2);
  try {
    // Plans whose first mismatching collective spans the world, so that every rank throws and the
    // test can go on (amsp-7b's runs inside a node: the other node's ranks would wait for ranks
    // that moved on; a real program ends there, test_consistency covers it on threads).
    for (std::string_view plan_name : {"ddp", "zero3"}) {
      const amsp::Plan plan = amsp::preset(std::string(plan_name), mesh);
      const std::string where = " under " + std::string(plan_name);
      const double plain = amsp::test::mismatch_job(world, mesh, plan, Fault::none, 1, false);
      const double checked = amsp::test::mismatch_job(world, mesh, plan, Fault::none, 1, true);
      expect(world, plain == checked, "the check does not change a correct run" + where);
      for (const amsp::test::FaultCase& row : amsp::test::fault_table) {
        if (row.needs_sharded_params && plan.p.size() == 1) continue;
        std::string rule = "(no error)", message;
        try {
          (void)amsp::test::mismatch_job(world, mesh, plan, row.fault, 1, true);
        } catch (const amsp::error& e) {
          rule = e.rule();
          message = e.what();
        }
        bool named = rule == "comm.collective_mismatch";
        for (std::string_view part : row.message_parts) named = named && message.find(part) != std::string::npos;
        expect(world, named, std::string(row.name) + where + ": rank " + std::to_string(world.rank()) + " saw " + rule +
                                 " " + message);
        if (world.rank() == 0 && plan_name == "zero3") std::printf("%s: %s\n", std::string(row.name).c_str(), message.c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (world.rank() == 0) std::printf("consistency check under MPI: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
