#pragma once
// The progress thread behind the threads backend's asynchronous collectives: one per
// communicator and rank, started on first use, running the submitted operations strictly in
// submission order. Every rank submits the same collectives in the same order, so the workers of
// one communicator meet at each collective exactly as blocking callers would.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "amsp/comm/handle.hpp"

namespace amsp::comm::detail {

/// Completion of one submitted operation, signalled by the worker.
class CompletionState final : public HandleState {
public:
  /// `on_abandon` makes the operation finish early (e.g. aborts the world it waits in).
  explicit CompletionState(std::function<void()> on_abandon) : on_abandon_(std::move(on_abandon)) {}

  bool test() override {
    std::unique_lock lock(mutex_);
    if (done_) deliver_error(lock);
    return done_;
  }
  void wait() override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    deliver_error(lock);
  }
  void abandon() noexcept override {
    try {
      if (on_abandon_) on_abandon_();
    } catch (...) {  // noexcept: the wait below is what protects the buffers
    }
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }
  /// Notifies after unlocking, so that a waiter it wakes does not block again on the mutex it
  /// still holds (an extra sleep and wake-up per operation, on a host with more threads than
  /// cores). The worker's reference keeps this state alive through the notify.
  void finish(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      error_ = std::move(error);
      done_ = true;
    }
    cv_.notify_all();
  }

private:
  // Hands the error over instead of sharing it: the waiting thread then holds every reference to
  // the exception object, so it is also destroyed there, never by the worker dropping this state
  // while the waiter still reads it (exception_ptr's reference count lives in the uninstrumented
  // runtime, where ThreadSanitizer cannot see that ordering). Delivered once.
  void deliver_error(std::unique_lock<std::mutex>& lock) {
    if (!error_) return;
    const std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(error);
  }

  std::function<void()> on_abandon_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class OrderedWorker {
public:
  OrderedWorker() = default;
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  /// Runs the queued operations to completion, then stops the thread.
  ~OrderedWorker() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

  /// Queues `task`; its exception, if any, is delivered through the returned handle.
  /// `on_abandon`: see CompletionState.
  [[nodiscard]] Handle submit(std::function<void()> task, std::function<void()> on_abandon = {}) {
    auto state = std::make_shared<CompletionState>(std::move(on_abandon));
    bool worker_sleeps = false;
    {
      std::lock_guard lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      queue_.emplace_back(std::move(task), state);
      ++unfinished_;
      worker_sleeps = worker_sleeps_;
    }
    // Wakes the worker only when it sleeps (a busy one takes the task from the queue before it
    // would sleep), and after unlocking, so that it does not wake into the mutex held here.
    if (worker_sleeps) cv_.notify_one();
    return Handle(std::move(state));
  }

  /// Blocks until every submitted operation has finished (successfully or not).
  void drain() {
    std::unique_lock lock(mutex_);
    idle_cv_.wait(lock, [&] { return unfinished_ == 0; });
  }

private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      worker_sleeps_ = true;
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      worker_sleeps_ = false;
      if (queue_.empty()) return;  // stopping and drained
      auto [task, state] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      state->finish(std::move(error));
      lock.lock();
      if (--unfinished_ == 0) idle_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;       // work arrived or stopping
  std::condition_variable idle_cv_;  // unfinished_ reached 0
  std::deque<std::pair<std::function<void()>, std::shared_ptr<CompletionState>>> queue_;
  std::size_t unfinished_ = 0;
  bool worker_sleeps_ = false;  // the worker waits on cv_ (guarded by mutex_)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace amsp::comm::detail
