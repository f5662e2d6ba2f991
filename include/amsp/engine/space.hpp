#pragma once
// Execution spaces of the engine's step schedule (the Kokkos model): where the work that touches
// a communicator runs and what an event is. The schedule (sharded_optimizer.hpp) is written once
// against four operations of a space S:
//
//   S::submit(task) -> comm::Handle      runs `task` on the space's communication stream, after
//                                        everything submitted before it; the handle is its event
//   S::launch(collectives) -> Handle     the same for a task that issues collectives returning
//                                        handles; the event completes when they have
//   S::launch_after(event, collectives)  the same on the space's gather stream, after `event` (of
//                                        the communication stream) and after everything launched
//                                        on the gather stream before it: the prefetch AllGathers,
//                                        so that gather(b) waits for bucket b's update only, not
//                                        for every bucket's update queued before it
//   S::order_after(event)                makes later stream work wait for `event` (an event of
//                                        another stream, or of a backend's own progress)
//
// and the host waits an event exactly where it reads or writes what the event's work touches.
// Each stream issues its collectives from one thread at a time and in program order, so every
// rank's collectives of one communicator meet in the same order. S::concurrent_streams says
// whether the two streams run at the same time: then they must not share a communicator (the
// engine splits one of its own for the gathers) and an MPI backend needs MPI_THREAD_MULTIPLE.
//
// Spaces: HostSerial (tasks run on the caller's thread when submitted; the behaviour before
// spaces existed) and HostAsync (each stream is one worker thread with a FIFO; an event is the
// completion flag of a task, set and read under a mutex, so a host access without the wait is a
// data race that ThreadSanitizer reports). amsp::CudaAsync (amsp/engine/cuda_space.cuh) maps
// the same operations to a communication stream and a gather stream of CUDA, each issued by a
// worker thread (docs/engine.md).

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "amsp/comm/detail/ordered_worker.hpp"
#include "amsp/comm/handle.hpp"
#include "amsp/core/error.hpp"

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

/// An event with two waiters: the host (through the comm::Handle that replaced the event) and,
/// through settled(), a task of another stream (launch_after) or the engine's bound on gradient
/// buffers in flight. Whoever comes first waits the original event; its error goes to the host's
/// wait only, the other waiter just learns that it failed.
class SharedEventState final : public comm::detail::HandleState {
public:
  explicit SharedEventState(comm::Handle event) : event_(std::move(event)) {}

  /// Waits for the event; true if it completed without error. Never throws.
  bool settled() noexcept {
    std::unique_lock lock(mutex_);
    if (phase_ == Phase::pending) {
      phase_ = Phase::waiting;
      lock.unlock();
      std::exception_ptr error;
      try {
        event_.wait();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      failed_ = static_cast<bool>(error);
      error_ = std::move(error);
      phase_ = Phase::done;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return phase_ == Phase::done; });
    }
    return !failed_;
  }
  bool test() override {
    std::unique_lock lock(mutex_);
    if (phase_ != Phase::done) return false;
    deliver_error(lock);
    return true;
  }
  void wait() override {
    (void)settled();
    std::unique_lock lock(mutex_);
    deliver_error(lock);
  }
  // The host unwinds: the original event is destroyed here, during the unwinding, so that it
  // stops its work early (the threads backend aborts its world) as an unshared event would.
  void abandon() noexcept override {
    std::unique_lock lock(mutex_);
    if (phase_ == Phase::pending) {
      phase_ = Phase::waiting;
      lock.unlock();
      { comm::Handle dropped = std::move(event_); }
      lock.lock();
      failed_ = true;
      phase_ = Phase::done;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return phase_ == Phase::done; });
    }
  }

private:
  enum class Phase { pending, waiting, done };
  // The error is handed over, not shared (see comm::detail::CompletionState): delivered once.
  void deliver_error(std::unique_lock<std::mutex>& lock) {
    if (!error_) return;
    const std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(error);
  }

  comm::Handle event_;
  std::mutex mutex_;
  std::condition_variable done_;
  Phase phase_ = Phase::pending;
  bool failed_ = false;
  std::exception_ptr error_;
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

namespace detail {
/// A task that issues collectives and waits, on the stream, for the handles they return.
template <class F>
std::function<void()> completed_collectives(F&& collectives) {
  return [c = std::forward<F>(collectives)]() mutable {
    std::vector<comm::Handle> handles = c();
    wait_all(handles);
  };
}

/// The same task run on another stream after `event` (launch_after): `event` is replaced by a
/// handle the host waits as before; the task waits the same event first (its error still reaches
/// the host's wait) and, if the event failed, fails with rule engine.stream_failed without
/// running `collectives`, which would read what the failed work did not finish.
template <class F>
std::function<void()> collectives_after(comm::Handle& event, F&& collectives) {
  std::function<void()> task = completed_collectives(std::forward<F>(collectives));
  if (!event.pending()) return task;
  auto shared = std::make_shared<SharedEventState>(std::move(event));
  event = comm::Handle(shared);
  return [shared, task = std::move(task)] {
    check(shared->settled(), "engine.stream_failed",
          "the work this gather was ordered after failed (its error is thrown where the host waits for it)");
    task();
  };
}
}  // namespace detail

/// The two streams of an asynchronous space: the communication stream (reductions, OS stage,
/// update, spread) and the gather stream (the prefetch AllGathers).
enum class stream_id : unsigned { communication = 0, gather = 1 };

/// A device space's ticket: the stream of a task and its position on that stream's FIFO (from 1)
/// in one word, 0 for no task. Each stream counts its own completions, so the user's compute
/// waits a ticket against its stream's counter (the streams complete in no common order).
struct StreamTicket {
  [[nodiscard]] static constexpr std::uint64_t make(stream_id stream, std::uint64_t position) {
    return position << 1 | static_cast<std::uint64_t>(stream);
  }
  [[nodiscard]] static constexpr stream_id stream(std::uint64_t ticket) {
    return static_cast<stream_id>(ticket & 1);
  }
  [[nodiscard]] static constexpr std::uint64_t position(std::uint64_t ticket) { return ticket >> 1; }
};

/// The space operations of a space with two FIFO streams, in terms of
/// Derived::enqueue(stream_id, std::function<void()>) -> comm::Handle (HostAsync, CudaAsync, the
/// tests' simulated device): submit and launch run on the communication stream, launch_after on
/// the gather stream after its event (detail::collectives_after), and order_after has nothing to
/// order (every event of the communication stream is on its one FIFO).
template <class Derived>
class TwoStreamOperations {
public:
  template <class F>
  comm::Handle submit(F&& task) {
    return self().enqueue(stream_id::communication, std::function<void()>(std::forward<F>(task)));
  }
  template <class F>
  comm::Handle launch(F&& collectives) {
    return self().enqueue(stream_id::communication, detail::completed_collectives(std::forward<F>(collectives)));
  }
  template <class F>
  comm::Handle launch_after(comm::Handle& event, F&& collectives) {
    return self().enqueue(stream_id::gather, detail::collectives_after(event, std::forward<F>(collectives)));
  }
  void order_after(comm::Handle&) {}

private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

/// Synchronous host space: a task runs on the caller's thread when submitted (its errors are
/// thrown by submit) and its event is complete; collectives that return handles progress on the
/// backend's own machinery (the threads backend's progress thread, MPI's nonblocking calls), so
/// the spread and prefetches still overlap the caller's compute, and order_after waits on the host.
struct HostSerial {
  static constexpr bool asynchronous = false;
  static constexpr bool concurrent_streams = false;

  template <class F>
  comm::Handle submit(F&& task) {
    task();
    return {};
  }
  template <class F>
  comm::Handle launch(F&& collectives) {
    return join_handles(collectives());
  }
  template <class F>
  comm::Handle launch_after(comm::Handle& event, F&& collectives) {
    event.wait();
    return launch(std::forward<F>(collectives));
  }
  void order_after(comm::Handle& event) { event.wait(); }
};

/// Asynchronous host space: two streams, each a worker thread running its tasks in submission
/// order; submit, launch and launch_after return at once. The communication stream runs the
/// reductions, the OS stage, the update and the spread; the gather stream runs the prefetch
/// AllGathers, each after the update of its own bucket (launch_after), so that the next forward's
/// first gather does not queue behind every bucket's update.
class HostAsync : public TwoStreamOperations<HostAsync> {
public:
  static constexpr bool asynchronous = true;
  static constexpr bool concurrent_streams = true;

private:
  friend class TwoStreamOperations<HostAsync>;
  comm::Handle enqueue(stream_id stream, std::function<void()> task) {
    return (stream == stream_id::gather ? gather_stream_ : stream_).submit(std::move(task));
  }

  comm::detail::OrderedWorker stream_;
  // Declared last, destroyed first: its tasks may wait for the communication stream's events.
  comm::detail::OrderedWorker gather_stream_;
};

}  // namespace amsp
