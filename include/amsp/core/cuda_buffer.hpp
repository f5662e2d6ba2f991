#pragma once
// An owning, move-only buffer of device memory: the CudaSpace counterpart of host_buffer.
// Tier 2: plain host code that calls the CUDA runtime, so g++ compiles it when the target links
// CUDA::cudart (amsp::cuda); nothing here needs nvcc.
//
// Allocation is synchronous (cudaMalloc) on purpose: model-state buffers are allocated once per
// run, and a stream-ordered allocation would tie the buffer's lifetime to a stream the caller must
// then manage. Every CUDA failure becomes an amsp::error naming the call and CUDA's own message.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "amsp/core/cuda_check.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/memory_space.hpp"

namespace amsp {

template <class T>
class cuda_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "amsp::cuda_buffer holds trivially copyable elements");

public:
  using space = CudaSpace;

  cuda_buffer() = default;

  /// Allocates `count` elements on the current device, zeroed (cudaMemset, synchronous with respect
  /// to the host), so that a fresh buffer never holds garbage, like host_buffer.
  explicit cuda_buffer(std::size_t count) : size_(count) {
    if (count == 0) return;
    check(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), "buffer.size", "device buffer of ", count,
          " elements of ", sizeof(T), " bytes overflows size_t");
    void* ptr = nullptr;
    detail::check_cuda(cudaMalloc(&ptr, count * sizeof(T)), "cuda.malloc", "cudaMalloc of ", count * sizeof(T),
                       " bytes");
    data_ = static_cast<T*>(ptr);
    const cudaError_t zeroed = cudaMemset(ptr, 0, count * sizeof(T));
    if (zeroed != cudaSuccess) {
      release();
      detail::check_cuda(zeroed, "cuda.memset", "cudaMemset of a new buffer");
    }
  }

  cuda_buffer(const cuda_buffer&) = delete;
  cuda_buffer& operator=(const cuda_buffer&) = delete;
  cuda_buffer(cuda_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  cuda_buffer& operator=(cuda_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  /// Frees the memory; a cudaFree failure cannot be thrown from a destructor and is dropped
  /// (it only happens when the context is already broken, and the next CUDA call reports that).
  ~cuda_buffer() { release(); }

  /// Device pointer: never dereference it on the host.
  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  /// Copies `count` elements from host memory into the buffer (synchronous).
  void copy_from_host(const T* src, std::size_t count) {
    check(count <= size_, "buffer.size", "copying ", count, " elements into a device buffer of ", size_);
    if (count == 0) return;
    detail::check_cuda(cudaMemcpy(data_, src, count * sizeof(T), cudaMemcpyHostToDevice), "cuda.memcpy",
                       "cudaMemcpy of ", count * sizeof(T), " bytes host to device");
  }
  /// Copies `count` elements of the buffer into host memory (synchronous).
  void copy_to_host(T* dst, std::size_t count) const {
    check(count <= size_, "buffer.size", "copying ", count, " elements out of a device buffer of ", size_);
    if (count == 0) return;
    detail::check_cuda(cudaMemcpy(dst, data_, count * sizeof(T), cudaMemcpyDeviceToHost), "cuda.memcpy",
                       "cudaMemcpy of ", count * sizeof(T), " bytes device to host");
  }

private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace amsp
