#pragma once
// The synchronisation of the threads backend: a reusable barrier that every rank of one
// communicator meets at, and the abort switch of a whole threads world. When one rank fails,
// aborting the world wakes every rank blocked in any communicator of that world and makes it
// throw (rule comm.aborted) instead of waiting forever for the rank that is gone.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

class AbortableBarrier;

/// Shared by every communicator of one run_on_threads world.
class AbortSwitch {
public:
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }

  /// Marks the world aborted (the first reason wins) and wakes every barrier.
  void abort(const std::string& reason);

  [[noreturn]] void throw_aborted() const {
    std::lock_guard lock(mutex_);
    fail("comm.aborted", "collective aborted because another rank failed: ", reason_);
  }

private:
  friend class AbortableBarrier;
  void enroll(AbortableBarrier* b) {
    std::lock_guard lock(mutex_);
    barriers_.push_back(b);
  }
  void withdraw(AbortableBarrier* b) {
    std::lock_guard lock(mutex_);
    barriers_.erase(std::remove(barriers_.begin(), barriers_.end(), b), barriers_.end());
  }

  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;  // guards barriers_ and reason_; taken before any barrier's mutex
  std::vector<AbortableBarrier*> barriers_;
  std::string reason_;
};

/// A generation-counting barrier for `count` threads; a condition variable rather than spinning,
/// because the threads backend routinely runs more ranks than cores.
class AbortableBarrier {
public:
  AbortableBarrier(AbortSwitch& world, int count) : world_(world), count_(count) { world_.enroll(this); }
  AbortableBarrier(const AbortableBarrier&) = delete;
  AbortableBarrier& operator=(const AbortableBarrier&) = delete;
  ~AbortableBarrier() { world_.withdraw(this); }

  /// Returns once all `count` threads arrived; throws rule comm.aborted if the world is aborted
  /// before that (or was already). All-or-nothing: either every thread returns or every thread
  /// throws, because the generation only advances once all have arrived.
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (world_.aborted() || !arrive(lock, /*abortable=*/true)) {
      lock.unlock();
      world_.throw_aborted();
    }
  }

  /// Returns once all `count` threads arrived, aborted world or not. For the end of a data phase:
  /// every thread that passed the barrier before it is copying between the ranks' buffers and
  /// arrives here in finite time, and none may leave (and let its caller free its buffers) while
  /// a peer may still read or write them.
  void arrive_and_wait_uninterruptible() {
    std::unique_lock lock(mutex_);
    (void)arrive(lock, /*abortable=*/false);
  }

private:
  friend class AbortSwitch;

  // Counts this thread in and waits until the last one arrives (or, when abortable, until the
  // world aborts); true if the barrier completed.
  bool arrive(std::unique_lock<std::mutex>& lock, bool abortable) {
    const std::size_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return generation_ != generation || (abortable && world_.aborted()); });
    return generation_ != generation;
  }

  void wake() {
    std::lock_guard lock(mutex_);
    cv_.notify_all();
  }

  AbortSwitch& world_;
  const int count_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::size_t generation_ = 0;
};

inline void AbortSwitch::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!aborted_.load(std::memory_order_relaxed)) reason_ = reason;
  aborted_.store(true, std::memory_order_release);
  for (AbortableBarrier* b : barriers_) b->wake();
}

}  // namespace amsp::comm::detail
