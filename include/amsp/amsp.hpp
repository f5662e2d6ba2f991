#pragma once
// The host-side public API of amsp in one include: every layer's umbrella (docs/architecture.md),
// core, sharding, comm, optim, planner and engine. Never pulls in MPI, CUDA or NCCL headers: those
// parts have opt-in headers of their own (amsp/core/cuda_buffer.hpp, amsp/comm/mpi.hpp,
// amsp/comm/nccl.hpp, the optimizer's .cuh kernels), each with its CMake component.

#include "amsp/comm.hpp"
#include "amsp/core.hpp"
#include "amsp/engine.hpp"
#include "amsp/optim.hpp"
#include "amsp/planner.hpp"
#include "amsp/sharding.hpp"
