#pragma once
// The CUDA resources of amsp::CudaAsync that need no kernel (host code, compiled by g++ or nvcc):
// the runtime-error check, a pool of events passed between threads, and the device buffers of the
// stores and scratch, allocated and zeroed on a stream of their own (stream_ordered_buffer).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "amsp/core/cuda_check.hpp"
#include "amsp/core/error.hpp"

namespace amsp::detail {

inline void cuda_call(cudaError_t result, const char* what) { check_cuda(result, "cuda.runtime", what); }

/// Events recorded by one thread and waited by another; reused once waited (a wait captures the
/// event's state when it is enqueued), so a steady-state step creates none.
class CudaEventPool {
public:
  CudaEventPool() = default;
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;
  ~CudaEventPool() {
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  [[nodiscard]] cudaEvent_t take() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        const cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e{};
    cuda_call(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void give(cudaEvent_t e) {
    std::lock_guard lock(mutex_);
    free_.push_back(e);
  }

private:
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

/// The stream device memory of the current device is allocated and zeroed on: one of its own per
/// device (never destroyed), so that an allocation neither waits for nor is waited by the engine's
/// or the user's streams.
inline cudaStream_t allocation_stream() {
  int device = 0;
  cuda_call(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;  // by device
  std::lock_guard lock(mutex);
  if (streams.size() <= static_cast<std::size_t>(device)) streams.resize(static_cast<std::size_t>(device) + 1);
  cudaStream_t& stream = streams[static_cast<std::size_t>(device)];
  if (stream == nullptr)
    cuda_call(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (allocations)");
  return stream;
}

/// The stores and scratch of CudaAsync: zeroed device memory from cudaMallocAsync and
/// cudaMemsetAsync on allocation_stream(), synchronised with that stream alone. Not cuda_buffer's
/// cudaMalloc + cudaMemset on purpose: cudaMemset runs on the legacy default stream, which waits
/// for every blocking stream, and the user's stream (e.g. the per-thread default stream) may hold
/// a ticket wait for the very task that grows a scratch pool in the first step: a deadlock.
template <class T>
class stream_ordered_buffer {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  stream_ordered_buffer() = default;
  explicit stream_ordered_buffer(std::size_t count) : size_(count) {
    if (count == 0) return;
    check(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), "buffer.size", "device buffer of ", count,
          " elements of ", sizeof(T), " bytes overflows size_t");
    const cudaStream_t stream = allocation_stream();
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, count * sizeof(T), stream), "cuda.malloc", "cudaMallocAsync of ",
               count * sizeof(T), " bytes");
    data_ = static_cast<T*>(p);
    const cudaError_t zeroed = cudaMemsetAsync(p, 0, count * sizeof(T), stream);
    const cudaError_t synced = zeroed == cudaSuccess ? cudaStreamSynchronize(stream) : zeroed;
    if (synced != cudaSuccess) {
      release();
      check_cuda(synced, "cuda.memset", "zeroing a new device buffer");
    }
  }
  stream_ordered_buffer(const stream_ordered_buffer&) = delete;
  stream_ordered_buffer& operator=(const stream_ordered_buffer&) = delete;
  stream_ordered_buffer(stream_ordered_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  stream_ordered_buffer& operator=(stream_ordered_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  /// The engine destroys its buffers after its space synchronised every stream that used them.
  ~stream_ordered_buffer() { release(); }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFreeAsync(data_, allocation_stream());
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace amsp::detail
