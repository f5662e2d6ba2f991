// The NCCL backend on a GPU machine (label gpu; exits 77, "skipped", without a GPU). Launched as
// one process it tests a one-rank communicator; under mpiexec on a multi-GPU node, one rank per
// GPU. The backend-independent sweep works on host vectors; test::DeviceStaged (device_staged.hpp)
// stages each call's buffers to device memory and copies the results back.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>

#include "amsp/comm/mpi.hpp"
#include "amsp/comm/nccl.hpp"
#include "collective_checks.hpp"
#include "device_staged.hpp"
#include "report.hpp"

namespace {
using namespace amsp;
using comm::NcclCommunicator;
}  // namespace

TEST_CASE("nccl: every collective, dtype and placement on device memory") {
  comm::MpiCommunicator mpi = comm::MpiCommunicator::world();
  NcclCommunicator nccl = NcclCommunicator::world(mpi);
  test::DeviceStaged staged(nccl);
  const auto failures = test::run_sweep(staged, {0, 1, 7, 4099, std::size_t{1} << 20}, test::all_dtypes);
  test::require_none(failures);
}

TEST_CASE("nccl: asynchronous collectives complete through CUDA events, waited in reverse order") {
  comm::MpiCommunicator mpi = comm::MpiCommunicator::world();
  NcclCommunicator nccl = NcclCommunicator::world(mpi);
  const std::size_t count = 1 << 16;
  std::vector<float> host(count * static_cast<std::size_t>(nccl.size()), 1.0f);
  test::DeviceCopy a(host.data(), host.size() * sizeof(float)), b(host.data(), host.size() * sizeof(float));
  comm::Handle h1 = nccl.all_reduce_async(a.as<float>(), a.as<float>(), host.size(), comm::reduce_op::sum);
  comm::Handle h2 = nccl.reduce_scatter_async(b.as<float>(), b.as<float>(), count, comm::reduce_op::avg);
  h2.wait();
  h1.wait();
  CHECK(h1.test());
  a.back_to(host.data());
  CHECK(host.front() == static_cast<float>(nccl.size()));
  nccl.barrier();
}

int main(int argc, char** argv) {
  if (amsp::comm::cuda_device_count() == 0) {
    std::puts("test_comm_nccl: no CUDA device, skipped");
    return 77;
  }
  amsp::comm::MpiSession session(argc, argv);
  const int rank = session.world_rank();
  amsp::comm::use_device_of_rank(rank);
  doctest::Context context(argc, argv);
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}
