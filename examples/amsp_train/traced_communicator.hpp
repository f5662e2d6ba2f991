#pragma once
// amsp-train --timeline's collectives: TracedCommunicator<C> forwards every call of a communicator
// unchanged and, when given a CallTrace, records on which thread each collective ran and when:
// a blocking call from its start to its return, a nonblocking one at the moment it was issued
// (its completion happens inside another call's wait, which the trace cannot see). The engine
// issues its reductions as blocking calls on its communication thread, so the trace shows that
// thread's calls beside the waits and device time of the host thread (timeline.hpp): a reduction
// that queued behind another, or stalled, shows as such (docs/planner-check-chains.md).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/op.hpp"

namespace amsp_train {

/// The collectives one rank issued, from any of its threads (thread-safe).
class CallTrace {
public:
  using Clock = std::chrono::steady_clock;
  struct Call {
    amsp::comm::op_kind op;
    std::uint64_t bytes;  ///< this rank's buffer: what it sends (gathers, broadcasts) or reduces
    int group_size;
    /// 0: the thread that made the trace (the rank's host thread); 1, 2, ...: others, in order of first call
    int thread;
    bool blocking;
    Clock::time_point start, end;  ///< end == start for a nonblocking call (its issue)
  };

  CallTrace() : host_(std::this_thread::get_id()) {}

  void add(amsp::comm::op_kind op, std::uint64_t bytes, int group_size, bool blocking, Clock::time_point start,
           Clock::time_point end) {
    const std::lock_guard lock(mutex_);
    calls_.push_back({op, bytes, group_size, thread_index(std::this_thread::get_id()), blocking, start, end});
  }
  /// Every call so far, in the order recorded.
  [[nodiscard]] std::vector<Call> calls() const {
    const std::lock_guard lock(mutex_);
    return calls_;
  }

private:
  int thread_index(std::thread::id id) {
    if (id == host_) return 0;
    return threads_.try_emplace(id, static_cast<int>(threads_.size()) + 1).first->second;
  }

  std::thread::id host_;
  mutable std::mutex mutex_;
  std::map<std::thread::id, int> threads_;
  std::vector<Call> calls_;
};

template <amsp::comm::communicator C>
class TracedCommunicator {
public:
  /// Wraps `inner`; a null `trace` records nothing.
  TracedCommunicator(C inner, std::shared_ptr<CallTrace> trace) : inner_(std::move(inner)), trace_(std::move(trace)) {}

  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  [[nodiscard]] const std::shared_ptr<CallTrace>& call_trace() const noexcept { return trace_; }

  template <amsp::element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    blocking(amsp::comm::op_kind::all_gather, count * sizeof(T), [&] { inner_.all_gather(send, recv, count); });
  }
  template <amsp::element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count,
                      amsp::comm::reduce_op op = amsp::comm::reduce_op::sum) {
    blocking(amsp::comm::op_kind::reduce_scatter, recv_count * std::size_t(size()) * sizeof(T),
             [&] { inner_.reduce_scatter(send, recv, recv_count, op); });
  }
  template <amsp::element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op = amsp::comm::reduce_op::sum) {
    blocking(amsp::comm::op_kind::all_reduce, count * sizeof(T), [&] { inner_.all_reduce(send, recv, count, op); });
  }
  template <amsp::element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    blocking(amsp::comm::op_kind::broadcast, count * sizeof(T), [&] { inner_.broadcast(send, recv, count, root); });
  }
  template <amsp::element_type T>
  void reduce(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op, int root) {
    blocking(amsp::comm::op_kind::reduce, count * sizeof(T), [&] { inner_.reduce(send, recv, count, op, root); });
  }

  template <amsp::element_type T>
  [[nodiscard]] amsp::comm::Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    issued(amsp::comm::op_kind::all_gather, count * sizeof(T));
    return inner_.all_gather_async(send, recv, count);
  }
  template <amsp::element_type T>
  [[nodiscard]] amsp::comm::Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                                        amsp::comm::reduce_op op = amsp::comm::reduce_op::sum) {
    issued(amsp::comm::op_kind::reduce_scatter, recv_count * std::size_t(size()) * sizeof(T));
    return inner_.reduce_scatter_async(send, recv, recv_count, op);
  }
  template <amsp::element_type T>
  [[nodiscard]] amsp::comm::Handle all_reduce_async(const T* send, T* recv, std::size_t count,
                                                    amsp::comm::reduce_op op = amsp::comm::reduce_op::sum) {
    issued(amsp::comm::op_kind::all_reduce, count * sizeof(T));
    return inner_.all_reduce_async(send, recv, count, op);
  }
  template <amsp::element_type T>
  [[nodiscard]] amsp::comm::Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    issued(amsp::comm::op_kind::broadcast, count * sizeof(T));
    return inner_.broadcast_async(send, recv, count, root);
  }
  template <amsp::element_type T>
  [[nodiscard]] amsp::comm::Handle reduce_async(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op,
                                                int root) {
    issued(amsp::comm::op_kind::reduce, count * sizeof(T));
    return inner_.reduce_async(send, recv, count, op, root);
  }

  void barrier() { inner_.barrier(); }
  [[nodiscard]] bool concurrent_calls_allowed() const { return amsp::comm::concurrent_calls_allowed(inner_); }
  /// Splits the wrapped communicator; the result records into the same trace.
  [[nodiscard]] TracedCommunicator split(const amsp::GroupSet& groups) {
    return TracedCommunicator(inner_.split(groups), trace_);
  }

private:
  template <class F>
  void blocking(amsp::comm::op_kind op, std::size_t bytes, F&& call) {
    if (!trace_) return call();
    const auto start = CallTrace::Clock::now();
    call();
    trace_->add(op, bytes, size(), true, start, CallTrace::Clock::now());
  }
  void issued(amsp::comm::op_kind op, std::size_t bytes) {
    if (!trace_) return;
    const auto now = CallTrace::Clock::now();
    trace_->add(op, bytes, size(), false, now, now);
  }

  C inner_;
  std::shared_ptr<CallTrace> trace_;
};

}  // namespace amsp_train
