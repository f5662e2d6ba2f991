#pragma once
// An outstanding MPI request of the MPI backend (amsp/comm/mpi.hpp) as a comm::Handle's state:
// waited through the watchdog (mpi_watchdog.hpp), then what must follow its completion.

#include <mpi.h>

#include <chrono>
#include <functional>
#include <utility>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/detail/mpi_ops.hpp"
#include "amsp/comm/detail/mpi_watchdog.hpp"

namespace amsp::comm::detail {

/// An outstanding MPI request and what must happen once it completes (avg division, the copy of
/// an in-place reduce_scatter); owns the temporaries the request writes into.
class MpiRequestState final : public HandleState {
public:
  MpiRequestState(MPI_Request request, std::function<void()> finish, std::chrono::nanoseconds timeout = {},
                  WatchedCall what = {}, WaitMode mode = WaitMode::block)
      : request_(request), finish_(std::move(finish)), timeout_(timeout), what_(what), mode_(mode) {}
  bool test() override {
    if (request_ != MPI_REQUEST_NULL) {
      int done = 0;
      check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return false;
    }
    complete();
    return true;
  }
  void wait() override {
    check_mpi(wait_watched(request_, timeout_, what_, mode_), "MPI_Wait");
    complete();
  }

private:
  void complete() {
    if (finish_) std::exchange(finish_, nullptr)();
  }
  MPI_Request request_;
  std::function<void()> finish_;
  std::chrono::nanoseconds timeout_;
  WatchedCall what_;
  WaitMode mode_;
};

}  // namespace amsp::comm::detail
