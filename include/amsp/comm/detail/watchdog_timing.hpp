#pragma once
// What the backends' watchdogs share (the MPI and NCCL backends poll; the threads backend waits on
// a condition variable): the one check of a collective_timeout option, and how a waiting rank
// polls.

#include <chrono>
#include <thread>

#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

/// ThreadsOptions / MpiOptions / NcclOptions::collective_timeout: zero (no timeout) or positive.
inline void check_collective_timeout(std::chrono::milliseconds timeout) {
  check(timeout.count() >= 0, "comm.timeout_range", "the collective timeout is ", timeout.count(),
        " ms; it must be positive, or 0 for none");
}

/// Paces a polling loop: yields for the first polls (a short operation completes at once), then
/// sleeps 100 µs between polls and gives the core away (ranks are often oversubscribed).
class PollBackoff {
public:
  void pause() {
    if (polls_ < 1000) {
      ++polls_;
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

private:
  int polls_ = 0;
};

}  // namespace amsp::comm::detail
