#pragma once
// Host declarations of the CUDA space's engine tests; engine_cuda_driver.cu (nvcc) defines them,
// test_engine_cuda.cpp (g++, doctest) calls them: doctest's macros stay out of nvcc.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "amsp/engine/options.hpp"
#include "amsp/sharding/mesh.hpp"
#include "amsp/sharding/plan.hpp"
#include "engine_runner.hpp"
#include "in_backward_counts.hpp"

namespace amsp::test {

/// A usable CUDA device is present.
bool cuda_device_present();

/// Ends the program with 77 (ctest: skipped) where no device is present; every device test case
/// calls it first, whatever order doctest runs them in.
inline void require_gpu() {
  if (!cuda_device_present()) {
    std::puts("no CUDA device: skipped");
    std::exit(77);
  }
}

/// The parity job (engine_runner.hpp) with amsp::CudaAsync on threads ranks over device memory,
/// every rank on the current device; the final parameters every rank sees.
template <class Rule, class ParamT>
Params run_threads_cuda(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job);

/// The same job's final parameters with every rank's optimizer-state shards (copied to the host).
template <class Rule, class ParamT>
JobOutcome run_threads_cuda_outcome(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job);

/// Tag of the parity suite's cases on the CUDA space (parity_cases.hpp routes it to the driver).
struct CudaThreads {};

template <>
struct ParityRunner<CudaThreads> {
  template <class Rule, class ParamT>
  static Params run(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
    require_gpu();
    return run_threads_cuda<Rule, ParamT>(mesh, plan, rule, job);
  }
  template <class Rule, class ParamT>
  static JobOutcome outcome(const Mesh& mesh, const Plan& plan, const Rule& rule, const JobConfig& job) {
    require_gpu();
    return run_threads_cuda_outcome<Rule, ParamT>(mesh, plan, rule, job);
  }
};

/// in_backward_counts (in_backward_counts.hpp) with amsp::CudaAsync: an update_in_backward
/// engine's step counts, decided on the device, across set_steps.
InBackwardCounts cuda_in_backward_counts();

/// The parity job on one rank with the NCCL communicator (bootstrapped from a unique id, no MPI)
/// and amsp::CudaAsync; built where NCCL is (AMSP_HAS_NCCL).
Params run_nccl_one_rank_cuda(const JobConfig& job);

/// What CudaAsync::before_collective does with an NCCL communicator (one rank): a kernel holds the
/// space's communication stream (spinning on a host-mapped flag, at most `hold_seconds`) and
/// writes 42 into a device buffer when released; before_collective(nccl) and a one-rank
/// all_reduce_async of that buffer are issued while it holds; then the flag is released.
struct NcclOrderReport {
  double before_collective_seconds = 0;  ///< how long before_collective took on the host
  bool comm_stream_still_held = false;   ///< the hold kernel still ran after the collective was issued
  float received = 0;                    ///< the all_reduce's result: 42 when it ran after the kernel
  double hold_seconds = 0;
};
NcclOrderReport nccl_after_held_comm_stream(double hold_seconds);

/// Memory spaces on a one-rank CudaAsync engine: the rules of the errors for host tensors handed
/// to reduce_gradients(b, tensors) and gather_into(b, tensors), and whether device values set by
/// set_tensor come back bit for bit through gather_into into device tensors.
struct MemorySpaceReport {
  std::string reduce_host_rule;
  std::string gather_into_host_rule;
  bool device_tensors_round_trip = false;
};
MemorySpaceReport cuda_engine_memory_spaces();

/// The rule of the error for a CudaAsync engine whose user stream is the legacy default stream.
std::string rule_for_legacy_user_stream();

/// What the no-host-synchronisation check saw on each rank: a kernel on the user's stream holds
/// it (spinning on a host-mapped flag, for at most `hold_seconds`) while the rank issues a whole
/// micro-batch, step() and the next forward's gathers; then the flag is released. The backward's
/// launches run far ahead of the held device there: the staging ring must still hold the
/// gradient buffers to the bound.
struct NoHostSyncReport {
  double slowest_issue_seconds = 0;  ///< the longest any rank took to issue its calls
  bool user_stream_still_held = true;  ///< on every rank, the hold kernel still ran after the calls
  std::int64_t applied_steps = 0;      ///< last_step_result().step afterwards (rank 0): 2 expected
  double hold_seconds = 0;
  std::size_t gradient_staging_bytes = 0;  ///< the most any rank's memory().gradient_staging held afterwards
  std::size_t staging_bound_bytes = 0;     ///< gradient_buffers_in_flight x the largest bucket's buffer
};
NoHostSyncReport step_while_user_stream_held(const Mesh& mesh, const std::string& plan, double hold_seconds);

}  // namespace amsp::test
