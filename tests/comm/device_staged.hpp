#pragma once
// Runs the backend-independent sweep of collective_checks.hpp, which works on host vectors, on
// device memory: DeviceStaged wraps any communicator and stages each call's buffers to device
// copies, keeping their in-place relation, calls the communicator on them and copies the result
// back. Used by the NCCL test and the threads backend's CUDA test.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <type_traits>

#include "amsp/comm/handle.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/cuda_buffer.hpp"

namespace amsp::test {

/// Device copy of a host range (at least one byte allocated, so that count 0 passes a valid
/// pointer); copied back to the host on request.
class DeviceCopy {
public:
  DeviceCopy(const void* host, std::size_t bytes) : bytes_(bytes) {
    amsp::detail::check_cuda(cudaMalloc(&device_, bytes == 0 ? 1 : bytes), "cuda.malloc", "cudaMalloc");
    if (bytes != 0)
      amsp::detail::check_cuda(cudaMemcpy(device_, host, bytes, cudaMemcpyHostToDevice), "cuda.memcpy", "cudaMemcpy");
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(device_); }
  template <class T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(device_);
  }
  void back_to(void* host) const {
    if (bytes_ != 0)
      amsp::detail::check_cuda(cudaMemcpy(host, device_, bytes_, cudaMemcpyDeviceToHost), "cuda.memcpy", "cudaMemcpy");
  }

private:
  void* device_ = nullptr;
  std::size_t bytes_;
};

/// The communicator interface of run_case on host buffers, forwarded to `Comm` on device copies.
/// An async form issues the backend's async call and waits for it before copying back, then
/// returns an empty (complete) handle.
template <class Comm>
class DeviceStaged {
public:
  explicit DeviceStaged(Comm& c) : c_(c) {}
  [[nodiscard]] int rank() const { return c_.rank(); }
  [[nodiscard]] int size() const { return c_.size(); }

  template <class T>
  void all_gather(const T* send, T* recv, std::size_t count) {
    stage(recv, count * n(), send, count, [&](T* outer, const T* inner) { c_.all_gather(inner, outer, count); }, true);
  }
  template <class T>
  void reduce_scatter(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(const_cast<T*>(send), count * n(), recv, count,
          [&](T* outer, T* inner) { c_.reduce_scatter(outer, inner, count, op); }, false);
  }
  template <class T>
  void all_reduce(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.all_reduce(inner, outer, count, op); }, true);
  }
  template <class T>
  void broadcast(const T* send, T* recv, std::size_t count, int root) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.broadcast(inner, outer, count, root); }, true);
  }
  template <class T>
  void reduce(const T* send, T* recv, std::size_t count, comm::reduce_op op, int root) {
    stage(recv, count, send, count, [&](T* outer, const T* inner) { c_.reduce(inner, outer, count, op, root); }, true);
  }

  template <class T>
  comm::Handle all_gather_async(const T* send, T* recv, std::size_t count) {
    stage(recv, count * n(), send, count,
          [&](T* outer, const T* inner) { c_.all_gather_async(inner, outer, count).wait(); }, true);
    return {};
  }
  template <class T>
  comm::Handle reduce_scatter_async(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(const_cast<T*>(send), count * n(), recv, count,
          [&](T* outer, T* inner) { c_.reduce_scatter_async(outer, inner, count, op).wait(); }, false);
    return {};
  }
  template <class T>
  comm::Handle all_reduce_async(const T* send, T* recv, std::size_t count, comm::reduce_op op) {
    stage(recv, count, send, count,
          [&](T* outer, const T* inner) { c_.all_reduce_async(inner, outer, count, op).wait(); }, true);
    return {};
  }
  template <class T>
  comm::Handle broadcast_async(const T* send, T* recv, std::size_t count, int root) {
    stage(recv, count, send, count,
          [&](T* outer, const T* inner) { c_.broadcast_async(inner, outer, count, root).wait(); }, true);
    return {};
  }
  template <class T>
  comm::Handle reduce_async(const T* send, T* recv, std::size_t count, comm::reduce_op op, int root) {
    stage(recv, count, send, count,
          [&](T* outer, const T* inner) { c_.reduce_async(inner, outer, count, op, root).wait(); }, true);
    return {};
  }

private:
  [[nodiscard]] std::size_t n() const { return static_cast<std::size_t>(c_.size()); }

  // `outer` is the host range that may contain the other (recv for all_gather, send for
  // reduce_scatter): the inner pointer maps to the same offset of the outer copy, so in-place
  // calls stay in place on the device. `outer_written`: which of the two the collective writes.
  template <class T, class U, class Call>
  void stage(T* outer, std::size_t outer_count, U* inner, std::size_t inner_count, Call call, bool outer_written) {
    DeviceCopy outer_dev(outer, outer_count * sizeof(T));
    const auto* inner_bytes = reinterpret_cast<const unsigned char*>(inner);
    const auto* outer_bytes = reinterpret_cast<const unsigned char*>(outer);
    const bool nested =
        inner_bytes >= outer_bytes && inner_bytes < outer_bytes + outer_count * sizeof(T) && outer_count != 0;
    if (nested) {
      call(outer_dev.as<T>(), reinterpret_cast<U*>(outer_dev.as<unsigned char>() + (inner_bytes - outer_bytes)));
      outer_dev.back_to(outer);
      return;
    }
    DeviceCopy inner_dev(inner, inner_count * sizeof(T));
    call(outer_dev.as<T>(), inner_dev.as<std::remove_const_t<U>>());
    if (outer_written) outer_dev.back_to(outer);
    else inner_dev.back_to(const_cast<std::remove_const_t<U>*>(inner));
  }

  Comm& c_;
};

}  // namespace amsp::test
