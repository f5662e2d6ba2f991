#pragma once
// The host-side public API of amsp in one include: core types, the sharding model, and the
// communicator, optimizer, planner and engine layers as they are built. Never pulls in MPI,
// CUDA or NCCL headers: those parts have opt-in headers of their own (amsp/core/cuda_buffer.hpp,
// the MPI and NCCL communicators under amsp/comm/).

#include "amsp/core.hpp"
#include "amsp/sharding.hpp"

// Layers above sharding, included when present so that this umbrella follows the tree as it grows.
#if __has_include("amsp/comm.hpp")
#include "amsp/comm.hpp"
#endif
#if __has_include("amsp/optim.hpp")
#include "amsp/optim.hpp"
#endif
#if __has_include("amsp/planner.hpp")
#include "amsp/planner.hpp"
#endif
#if __has_include("amsp/engine.hpp")
#include "amsp/engine.hpp"
#endif
