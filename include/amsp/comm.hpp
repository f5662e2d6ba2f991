#pragma once
// The collectives layer, host part: the Communicator concept, the threads backend, the byte
// conventions and the traffic-counting wrapper. The MPI and NCCL backends are opt-in:
// amsp/comm/mpi.hpp (target amsp::mpi) and amsp/comm/nccl.hpp (target amsp::nccl).
#include "amsp/comm/communicator.hpp"
#include "amsp/comm/counting.hpp"
#include "amsp/comm/handle.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/comm/threads.hpp"
#include "amsp/comm/traffic.hpp"
#include "amsp/comm/traffic_counter.hpp"
