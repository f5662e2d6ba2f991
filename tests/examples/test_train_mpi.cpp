// amsp-train's training loop under MPI, run by ctest under mpiexec with 4 ranks (mesh 2x2): every
// valid plan follows the DDP loss curve for 30 steps within the parity tolerance, and the
// traffic-counting wrapper around the MPI backend measures exactly the engine's expected traffic
// (two gathers per micro-batch). Prints "N passed, N failed" on rank 0; exits 1 on any failure.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "amsp/comm/counting.hpp"
#include "amsp/comm/mpi.hpp"
#include "amsp/sharding.hpp"
#include "train_runner.hpp"
#include "../mpi_checks.hpp"

namespace {

using amsp::comm::MpiCommunicator;
using namespace amsp_train;

using amsp::test::mpi_checks::expect;
using amsp::test::mpi_checks::failed;
using amsp::test::mpi_checks::passed;

TrainOutcome train(MpiCommunicator& world, const amsp::Mesh& mesh, const amsp::Plan& plan, const TrainConfig& cfg,
                   const TextCorpus& data) {
  auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
  amsp::comm::CountingCommunicator<MpiCommunicator> comm(MpiCommunicator::world(), counter);
  return train_rank<float>(comm, world, mesh, plan, cfg, data, counter);
}

}  // namespace

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv, MPI_THREAD_MULTIPLE);  // the HostAsync engine's two streams call MPI
  MpiCommunicator world = MpiCommunicator::world();
  try {
    const amsp::Mesh mesh(2, world.size() / 2);
    const TextCorpus data = load_fortunes();
    const TrainConfig cfg = amsp_train::test::small_run();
    const TrainOutcome ddp = train(world, mesh, amsp::preset("ddp", mesh), cfg, data);
    expect(world, ddp.final_validation_loss < 3.6, "the DDP run learns");
    for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
      const TrainOutcome got = train(world, mesh, plan, cfg, data);
      const std::string what = amsp::to_string(plan);
      expect(world, amsp_train::test::max_loss_deviation(got, ddp) <= 1e-5, "loss curve of " + what);
      expect(world, got.bytes_intra == got.expected_intra && got.bytes_inter == got.expected_inter,
             "counted traffic of " + what);
    }
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", world.rank(), e.what());
    ++failed;
  }
  if (world.rank() == 0) std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
