// The nccl component: the NCCL backend without MPI (compiled and linked, not run: the CI machine
// has no GPU). mpi.h is not on this program's include path, so this also proves that
// amsp/comm/nccl.hpp does not need it.
#include <amsp/comm/nccl.hpp>

#include <cstdlib>

int main() {
  const char* hex = std::getenv("AMSP_NCCL_ID");
  if (hex == nullptr) return 0;
  amsp::comm::NcclCommunicator nccl =
      amsp::comm::NcclCommunicator::from_unique_id(amsp::comm::unique_id_from_hex(hex), 0, 1);
  nccl.barrier();
  return 0;
}
