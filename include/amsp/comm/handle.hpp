#pragma once
// The completion handle of every asynchronous collective, whatever the backend: one type, so that
// the engine can keep handles of different collectives in one queue and wait in any order.

#include <exception>
#include <memory>
#include <utility>

namespace amsp::comm {

namespace detail {
/// What a backend implements to complete one asynchronous operation.
class HandleState {
public:
  virtual ~HandleState() = default;
  /// True once the operation has completed; throws the operation's error if it failed.
  virtual bool test() = 0;
  /// Blocks until the operation has completed; throws the operation's error if it failed.
  virtual void wait() = 0;
  /// Called when a pending handle is destroyed by stack unwinding: the caller is about to free
  /// the operation's buffers. A backend that can stop the operation early (the threads backend
  /// aborts its world) does so and returns once the buffers are no longer touched; the default
  /// does nothing.
  virtual void abandon() noexcept {}
};
}  // namespace detail

/// Completion of one asynchronous collective. The buffers passed to the `*_async` call must stay
/// alive and untouched until wait() returns (or test() returned true). A default-constructed
/// handle is already complete. Destroying a handle that was never waited does not cancel the
/// operation: it still runs, in order, on its communicator. The exception is a pending handle
/// destroyed while an exception unwinds the stack (declared after its buffers, it goes first):
/// the threads backend then aborts its world and returns only once no rank touches the buffers
/// any more, so that unwinding cannot free memory a peer is still copying; the NCCL backend aborts
/// its world too (ncclCommAbort stops its kernels, so that freeing the buffers cannot wait on them).
class Handle {
public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}
  Handle(Handle&&) noexcept = default;
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      release_on_unwind();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { release_on_unwind(); }

  /// Non-blocking completion check; errors of the operation are thrown here or by wait().
  [[nodiscard]] bool test() {
    if (!state_) return true;
    bool done = false;
    try {
      done = state_->test();
    } catch (...) {
      state_.reset();  // the error is the operation's completion: delivered once
      throw;
    }
    if (done) state_.reset();
    return done;
  }
  /// Blocks until completion; rethrows the operation's error (e.g. rule comm.aborted). Calling it
  /// again after it returned is a no-op.
  void wait() {
    if (!state_) return;
    auto state = std::move(state_);
    state->wait();
  }
  /// True while the handle still refers to an operation that test()/wait() has not completed.
  [[nodiscard]] bool pending() const noexcept { return static_cast<bool>(state_); }

private:
  void release_on_unwind() noexcept {
    if (state_ && std::uncaught_exceptions() > 0) state_->abandon();
  }

  std::shared_ptr<detail::HandleState> state_;
};

}  // namespace amsp::comm
