#pragma once
// CountingCommunicator<C>: any Communicator, plus a record of the traffic it causes (see
// amsp/comm/traffic_counter.hpp). It forwards every call unchanged and records, on the calling
// rank, the collective's full buffer S and the ring-convention bytes this rank sends: blocking
// calls once they returned, asynchronous ones when issued. Optional members of the wrapped
// communicator (concurrent_calls_allowed, order_after_stream, split_on_own_stream) are forwarded
// where it has them.
//
//   auto counter = std::make_shared<amsp::comm::TrafficCounter>(mesh);
//   amsp::comm::CountingCommunicator world(std::move(inner), counter);
//   auto sub = world.split(groups);             // shares `counter`, knows its members' world ranks
//   counter->sent({.kind = amsp::comm::op_kind::all_gather, .locality = amsp::comm::Locality::inter_node});

#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/traffic_counter.hpp"

namespace amsp::comm {

template <communicator C>
class CountingCommunicator {
public:
  /// Wraps a world communicator: its rank i is world rank i; the counter's mesh must hold exactly
  /// its ranks (rule mesh.world_size).
  CountingCommunicator(C inner, std::shared_ptr<TrafficCounter> counter)
      : inner_(std::move(inner)), counter_(std::move(counter)) {
    check(counter_ != nullptr, "comm.counter", "CountingCommunicator needs a TrafficCounter");
    counter_->mesh().check_world_size(inner_.size());
    members_.resize(static_cast<std::size_t>(inner_.size()));
    std::iota(members_.begin(), members_.end(), 0);
  }

  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  /// World ranks of this communicator's members, in rank order.
  [[nodiscard]] const std::vector<int>& members() const noexcept { return members_; }
  [[nodiscard]] int world_rank() const { return members_[static_cast<std::size_t>(rank())]; }
  [[nodiscard]] const std::shared_ptr<TrafficCounter>& counter() const noexcept { return counter_; }
  [[nodiscard]] C& inner() noexcept { return inner_; }

  template <element_type T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    inner_.all_gather(send, recv, count);
    count_op(op_kind::all_gather, gathered<T>(count));
  }
  template <element_type T>
  void reduce_scatter(const T* send, T* recv, std::size_t recv_count, reduce_op op = reduce_op::sum) {
    inner_.reduce_scatter(send, recv, recv_count, op);
    count_op(op_kind::reduce_scatter, gathered<T>(recv_count));
  }
  template <element_type T>
  void all_reduce(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    inner_.all_reduce(send, recv, count, op);
    count_op(op_kind::all_reduce, count * sizeof(T));
  }
  template <element_type T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    inner_.broadcast(send, recv, count, root);
    count_op(op_kind::broadcast, count * sizeof(T));
  }
  template <element_type T>
  void reduce(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    inner_.reduce(send, recv, count, op, root);
    count_op(op_kind::reduce, count * sizeof(T));
  }

  template <element_type T>
  [[nodiscard]] Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    count_op(op_kind::all_gather, gathered<T>(count));
    return inner_.all_gather_async(send, recv, count);
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_scatter_async(const T* send, T* recv, std::size_t recv_count,
                                            reduce_op op = reduce_op::sum) {
    count_op(op_kind::reduce_scatter, gathered<T>(recv_count));
    return inner_.reduce_scatter_async(send, recv, recv_count, op);
  }
  template <element_type T>
  [[nodiscard]] Handle all_reduce_async(const T* send, T* recv, std::size_t count, reduce_op op = reduce_op::sum) {
    count_op(op_kind::all_reduce, count * sizeof(T));
    return inner_.all_reduce_async(send, recv, count, op);
  }
  template <element_type T>
  [[nodiscard]] Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    count_op(op_kind::broadcast, count * sizeof(T));
    return inner_.broadcast_async(send, recv, count, root);
  }
  template <element_type T>
  [[nodiscard]] Handle reduce_async(const T* send, T* recv, std::size_t count, reduce_op op, int root) {
    count_op(op_kind::reduce, count * sizeof(T));
    return inner_.reduce_async(send, recv, count, op, root);
  }

  void barrier() { inner_.barrier(); }
  [[nodiscard]] bool concurrent_calls_allowed() const { return comm::concurrent_calls_allowed(inner_); }
  /// Forwarded where the wrapped communicator has it (NCCL: its stream waits for an event on
  /// `producer`), so that an engine's CUDA space orders a counted collective by an event as it
  /// does the bare one instead of synchronising its stream. Moves no data: nothing to count.
  template <class Stream>
    requires orders_after_stream<C, Stream>
  void order_after_stream(Stream producer) {
    inner_.order_after_stream(producer);
  }

  /// Splits the wrapped communicator; the result shares the counter and maps its members (ranks
  /// of this communicator in `groups`) to world ranks.
  [[nodiscard]] CountingCommunicator split(const GroupSet& groups) { return counted(inner_.split(groups), groups); }
  /// Forwarded where the wrapped communicator has it (NCCL), so that an engine's gather stream
  /// gets its own stream under the counter too (comm::split_for_concurrent_calls).
  [[nodiscard]] CountingCommunicator split_on_own_stream(const GroupSet& groups)
    requires requires(C& c, const GroupSet& g) { c.split_on_own_stream(g); }
  {
    return counted(inner_.split_on_own_stream(groups), groups);
  }

private:
  [[nodiscard]] CountingCommunicator counted(C sub, const GroupSet& groups) {
    const RankGroup& group = groups.groups()[static_cast<std::size_t>(detail::group_index_of(groups, rank()))];
    std::vector<int> world;
    world.reserve(group.ranks.size());
    for (int r : group.ranks) world.push_back(members_[static_cast<std::size_t>(r)]);
    return CountingCommunicator(std::move(sub), counter_, std::move(world));
  }
  CountingCommunicator(C inner, std::shared_ptr<TrafficCounter> counter, std::vector<int> members)
      : inner_(std::move(inner)), counter_(std::move(counter)), members_(std::move(members)) {}

  template <class T>
  [[nodiscard]] std::uint64_t gathered(std::size_t count) const {
    return static_cast<std::uint64_t>(size()) * count * sizeof(T);
  }
  void count_op(op_kind kind, std::uint64_t full_bytes) { counter_->record(world_rank(), kind, members_, full_bytes); }

  C inner_;
  std::shared_ptr<TrafficCounter> counter_;
  std::vector<int> members_;
};

}  // namespace amsp::comm
