#pragma once
// The engine: ShardedOptimizer (sharded stores of P, G and OS, the step schedule, overlap), its
// options and parameter groups, bucket geometry and the traffic a step is expected to cause.
// Host-only like every umbrella: it runs over any communicator (threads, MPI, NCCL).
#include "amsp/engine/bucket_geometry.hpp"
#include "amsp/engine/buffer_pool.hpp"
#include "amsp/engine/expected_traffic.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/engine/param_groups.hpp"
#include "amsp/engine/sharded_optimizer.hpp"
