#pragma once
// Execution spaces of the engine's step schedule (the Kokkos model): where the work that touches
// a communicator runs and what an event is. The schedule (sharded_optimizer.hpp) is written once
// against three operations of a space S:
//
//   S::submit(task) -> comm::Handle      runs `task` on the space's communication stream, after
//                                        everything submitted before it; the handle is its event
//   S::launch(collectives) -> Handle     the same for a task that issues collectives returning
//                                        handles; the event completes when they have
//   S::order_after(event)                makes later stream work wait for `event` (an event of
//                                        another stream, or of a backend's own progress)
//
// and the host waits an event (Handle::wait) exactly where it reads or writes what the event's
// work touches. Every collective of an engine is issued through its space, from one thread at a
// time and in program order, so every rank's collectives meet in the same order.
//
// Spaces: HostSerial (tasks run on the caller's thread when submitted; the behaviour before
// spaces existed) and HostAsync (the stream is one worker thread with a FIFO; an event is the
// completion flag of a task, set and read under a mutex, so a host access without the wait is a
// data race that ThreadSanitizer reports). A CUDA space would map the same three operations to a
// communication stream, cudaEventRecord and cudaStreamWaitEvent (docs/engine.md).

#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/comm/handle.hpp"

namespace amsp {

namespace detail {
/// One event for several handles: complete when all are; wait() waits every one and rethrows
/// the first error only after all have completed (none of their buffers is in use any more).
class HandleGroupState final : public comm::detail::HandleState {
public:
  explicit HandleGroupState(std::vector<comm::Handle> handles) : handles_(std::move(handles)) {}
  bool test() override {
    for (comm::Handle& h : handles_)
      if (!h.test()) return false;
    return true;
  }
  void wait() override { wait_all(handles_); }
  // Destroying pending handles while unwinding makes each wait for (or abort) its operation.
  void abandon() noexcept override { handles_.clear(); }

  static void wait_all(std::vector<comm::Handle>& handles) {
    std::exception_ptr first;
    for (comm::Handle& h : handles) {
      try {
        h.wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    handles.clear();
    if (first) std::rethrow_exception(first);
  }

private:
  std::vector<comm::Handle> handles_;
};
}  // namespace detail

/// Waits every handle; the first error is rethrown once all have completed.
inline void wait_all(std::vector<comm::Handle>& handles) { detail::HandleGroupState::wait_all(handles); }

/// One handle for several (a default, complete handle when there are none).
[[nodiscard]] inline comm::Handle join_handles(std::vector<comm::Handle> handles) {
  if (handles.empty()) return {};
  if (handles.size() == 1) return std::move(handles.front());
  return comm::Handle(std::make_shared<detail::HandleGroupState>(std::move(handles)));
}

/// Synchronous host space: a task runs on the caller's thread when submitted (its errors are
/// thrown by submit) and its event is complete; collectives that return handles progress on the
/// backend's own machinery (the threads backend's progress thread, MPI's nonblocking calls), so
/// the spread and prefetches still overlap the caller's compute, and order_after waits on the host.
struct HostSerial {
  static constexpr bool asynchronous = false;

  template <class F>
  comm::Handle submit(F&& task) {
    task();
    return {};
  }
  template <class F>
  comm::Handle launch(F&& collectives) {
    return join_handles(collectives());
  }
  void order_after(comm::Handle& event) { event.wait(); }
};

/// Asynchronous host space: the communication stream is a worker thread running tasks in
/// submission order; submit returns at once. Whatever the worker runs (reductions, the OS stage,
/// the spread, prefetches) overlaps the caller's compute. Events of this stream need no ordering
/// among themselves (FIFO), so order_after is a no-op for them.
class HostAsync {
public:
  static constexpr bool asynchronous = true;

  template <class F>
  comm::Handle submit(F&& task) {
    return worker_.submit(std::function<void()>(std::forward<F>(task)));
  }
  template <class F>
  comm::Handle launch(F&& collectives) {
    return worker_.submit([c = std::forward<F>(collectives)]() mutable {
      std::vector<comm::Handle> handles = c();
      wait_all(handles);
    });
  }
  void order_after(comm::Handle&) {}  // every event of this space is on its one FIFO stream

private:
  comm::detail::OrderedWorker worker_;
};

}  // namespace amsp
