#pragma once
// The synchronisation of the threads backend: a reusable barrier that every rank of one
// communicator meets at, and the abort switch of a whole threads world. When one rank fails,
// aborting the world wakes every rank blocked in any communicator of that world and makes it
// throw (rule comm.aborted) instead of waiting forever for the rank that is gone. With a collective
// timeout (the watchdog), a rank that waits longer than that for its peers to arrive throws rule
// comm.timeout, naming the ranks that did not come, and aborts the world, so every rank still
// waiting (or entering a collective later) throws comm.aborted with that reason.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::comm::detail {

class AbortableBarrier;

/// Shared by every communicator of one run_on_threads world.
class AbortSwitch {
public:
  /// `timeout`: how long a rank may wait for its peers at the start of a collective; 0: forever.
  explicit AbortSwitch(std::chrono::nanoseconds timeout = {}) : timeout_(timeout) {}

  [[nodiscard]] std::chrono::nanoseconds timeout() const noexcept { return timeout_; }
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

  const std::chrono::nanoseconds timeout_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;  // guards barriers_ and reason_; taken before any barrier's mutex
  std::vector<AbortableBarrier*> barriers_;
  std::string reason_;
};

/// A generation-counting barrier for `count` threads; a condition variable rather than spinning,
/// because the threads backend routinely runs more ranks than cores.
class AbortableBarrier {
public:
  AbortableBarrier(AbortSwitch& world, int count)
      : world_(world), count_(count), present_(static_cast<std::size_t>(count)) {
    world_.enroll(this);
  }
  AbortableBarrier(const AbortableBarrier&) = delete;
  AbortableBarrier& operator=(const AbortableBarrier&) = delete;
  ~AbortableBarrier() { world_.withdraw(this); }

  /// Returns once all `count` threads arrived; throws rule comm.aborted if the world is aborted
  /// before that (or was already). All-or-nothing: either every thread returns or every thread
  /// throws, because the generation only advances once all have arrived. With the world's
  /// timeout, waiting longer throws rule comm.timeout (and aborts the world); `rank` (the
  /// caller's rank in the communicator, -1 if unknown) and `what` (the collective) name the wait.
  void arrive_and_wait(int rank = -1, std::string_view what = "a collective") {
    std::unique_lock lock(mutex_);
    const Arrival arrival = world_.aborted() ? Arrival::aborted : arrive(lock, /*abortable=*/true, rank);
    if (arrival == Arrival::completed) return;
    std::string missing = arrival == Arrival::timed_out ? absent_peers(rank) : std::string();
    lock.unlock();
    if (arrival == Arrival::aborted) world_.throw_aborted();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(world_.timeout()).count();
    std::string message = std::string(what) + ": rank " + (rank >= 0 ? std::to_string(rank) : "?") + " of a " +
                          std::to_string(count_) + "-rank communicator waited more than " + std::to_string(ms) +
                          " ms for " + missing +
                          " to enter it (a rank stopped, or issued different collectives)";
    world_.abort("watchdog: " + message);
    fail("comm.timeout", message);
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

  enum class Arrival { completed, aborted, timed_out };

  // Counts this thread in and waits until the last one arrives (or, when abortable, until the
  // world aborts or the world's timeout passes). A thread that times out withdraws its arrival
  // before it lets go of the lock, so that the barrier can no longer complete without it: no
  // peer passes into a data phase that this thread will not take part in.
  Arrival arrive(std::unique_lock<std::mutex>& lock, bool abortable, int rank = -1) {
    const std::size_t generation = generation_;
    if (rank >= 0) present_[static_cast<std::size_t>(rank)] = 1;
    if (++arrived_ == count_) {
      arrived_ = 0;
      std::fill(present_.begin(), present_.end(), 0);
      ++generation_;
      cv_.notify_all();
      return Arrival::completed;
    }
    const auto done = [&] { return generation_ != generation || (abortable && world_.aborted()); };
    if (abortable && world_.timeout().count() > 0) {
      if (!cv_.wait_for(lock, world_.timeout(), done)) {
        --arrived_;
        return Arrival::timed_out;
      }
    } else {
      cv_.wait(lock, done);
    }
    return generation_ != generation ? Arrival::completed : Arrival::aborted;
  }

  // The peers of `self` that never arrived in this generation ("ranks 3, 5"; a peer that arrived
  // and gave up is not named), or "2 of 4 ranks" when the caller's rank is unknown.
  [[nodiscard]] std::string absent_peers(int self) const {
    if (self < 0) return std::to_string(count_ - arrived_ - 1) + " of " + std::to_string(count_) + " ranks";
    std::string names;
    int absent = 0;
    for (std::size_t r = 0; r < present_.size(); ++r)
      if (!present_[r] && static_cast<int>(r) != self) {
        names += (names.empty() ? "" : ", ") + std::to_string(r);
        ++absent;
      }
    return (absent == 1 ? "rank " : "ranks ") + names;
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
  std::vector<char> present_;  // which ranks arrived in this generation (those that said which)
};

inline void AbortSwitch::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (!aborted_.load(std::memory_order_relaxed)) reason_ = reason;
  aborted_.store(true, std::memory_order_release);
  for (AbortableBarrier* b : barriers_) b->wake();
}

}  // namespace amsp::comm::detail
