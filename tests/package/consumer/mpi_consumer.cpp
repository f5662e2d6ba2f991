// The mpi component: the MPI communicator's header and library (compiled and linked, not run).
#include <amsp/comm/mpi.hpp>

int main(int argc, char** argv) {
  amsp::comm::MpiSession session(argc, argv);
  return amsp::comm::MpiCommunicator::world().size() > 0 ? 0 : 1;
}
