#pragma once
// A communicator for engine tests whose backward must outrun its reductions, as on a slow link.

#include <chrono>
#include <cstddef>
#include <thread>
#include <utility>

#include "amsp/comm/threads.hpp"

namespace amsp::test {

/// The threads backend with every blocking reduction (ReduceScatter, AllReduce, Reduce: the
/// engine's gradient reductions) held back by `delay` first, as a slow link would hold it;
/// everything else is forwarded as is.
class SlowReductions {
public:
  SlowReductions(amsp::comm::ThreadsCommunicator inner, std::chrono::milliseconds delay) : inner_(std::move(inner)), delay_(delay) {}
  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  void barrier() { inner_.barrier(); }
  [[nodiscard]] SlowReductions split(const amsp::GroupSet& groups) { return {inner_.split(groups), delay_}; }

  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op) {
    std::this_thread::sleep_for(delay_);
    inner_.reduce_scatter(send, recv, count, op);
  }
  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count) { inner_.all_gather(send, recv, count); }
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op) {
    std::this_thread::sleep_for(delay_);
    inner_.all_reduce(send, recv, count, op);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) { inner_.broadcast(send, recv, count, root); }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op, int root) {
    std::this_thread::sleep_for(delay_);
    inner_.reduce(send, recv, count, op, root);
  }
  template <class T>
  amsp::comm::Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    return inner_.all_gather_async(send, recv, count);
  }
  template <class T>
  amsp::comm::Handle reduce_scatter_async(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op) {
    return inner_.reduce_scatter_async(send, recv, count, op);
  }
  template <class T>
  amsp::comm::Handle all_reduce_async(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op) {
    return inner_.all_reduce_async(send, recv, count, op);
  }
  template <class T>
  amsp::comm::Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    return inner_.broadcast_async(send, recv, count, root);
  }
  template <class T>
  amsp::comm::Handle reduce_async(const T* send, T* recv, std::size_t count, amsp::comm::reduce_op op, int root) {
    return inner_.reduce_async(send, recv, count, op, root);
  }

private:
  amsp::comm::ThreadsCommunicator inner_;
  std::chrono::milliseconds delay_;
};
static_assert(amsp::comm::communicator<SlowReductions>);

}  // namespace amsp::test
