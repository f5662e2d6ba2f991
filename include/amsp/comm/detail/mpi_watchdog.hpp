#pragma once
// The MPI backend's watchdog (MpiOptions::collective_timeout): instead of a blocking MPI call, the
// backend starts the nonblocking form and polls it with MPI_Test until a deadline. A collective
// still incomplete then cannot be cancelled (MPI has no way to withdraw from a started
// collective, and a rank that left one would mismatch every later call), so the watchdog prints
// what timed out, on which rank, and ends the whole job with MPI_Abort: every rank ends instead
// of waiting forever (docs/reliability.md).

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "amsp/comm/detail/watchdog_timing.hpp"

namespace amsp::comm::detail {

/// What a watched request is, for the message: the MPI call (and, for amsp's argument check, the
/// collective it precedes), its count and the communicator.
struct WatchedCall {
  const char* call = "";
  std::string_view checking;
  long long count = 0;
  int rank = 0;
  int size = 1;
};

[[noreturn]] inline void watchdog_abort(const WatchedCall& what, std::chrono::nanoseconds timeout) {
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  std::string call = what.call;
  call += " (";
  if (!what.checking.empty()) call += "amsp's argument check before " + std::string(what.checking) + ", ";
  call += "count " + std::to_string(what.count) + ")";
  std::fprintf(stderr,
               "amsp: watchdog: %s did not complete within %lld ms on rank %d of a %d-rank communicator (world "
               "rank %d): a rank stopped, died or issued different collectives; aborting the job [rule "
               "comm.timeout]\n",
               call.c_str(), static_cast<long long>(ms), what.rank, what.size, world_rank);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return; this is for the compiler
}

/// How a wait completes a request that is not done yet.
enum class WaitMode {
  block,  ///< MPI_Wait
  poll,   ///< MPI_Test in a loop (PollBackoff): under MPI_THREAD_MULTIPLE, see MpiCommunicator
};

/// Completes `request`: MPI_Wait (WaitMode::block without a timeout), else MPI_Test until done or,
/// with a `timeout`, until it passed (then watchdog_abort). Returns MPI's error code.
inline int wait_watched(MPI_Request& request, std::chrono::nanoseconds timeout, const WatchedCall& what,
                        WaitMode mode = WaitMode::block) {
  if (timeout.count() <= 0 && mode == WaitMode::block) return MPI_Wait(&request, MPI_STATUS_IGNORE);
  const auto start = std::chrono::steady_clock::now();
  for (PollBackoff backoff;; backoff.pause()) {
    int done = 0;
    if (const int code = MPI_Test(&request, &done, MPI_STATUS_IGNORE); code != MPI_SUCCESS || done) return code;
    if (timeout.count() <= 0) continue;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) watchdog_abort(what, timeout);
  }
}

}  // namespace amsp::comm::detail
