#pragma once
// The collectives layer, host part: the Communicator concept, the threads backend, the traffic
// counter. The MPI and NCCL backends are opt-in: amsp/comm/mpi.hpp, amsp/comm/nccl.hpp.
#include "amsp/comm/communicator.hpp"
#include "amsp/comm/handle.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/comm/threads.hpp"
