#pragma once
// An owning, aligned, move-only host buffer of trivially copyable elements. Model states live in
// these: one flat allocation per state, aligned so that vector loads never split a cache line.

#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

#include "amsp/core/error.hpp"

namespace amsp {

/// Alignment of every buffer amsp allocates: one cache line on x86 and enough for AVX-512.
inline constexpr std::size_t buffer_alignment = 64;

template <class T>
class host_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "amsp::host_buffer holds trivially copyable elements");

public:
  host_buffer() = default;

  /// Allocates `count` elements, zero-initialised (a fresh buffer never holds garbage).
  explicit host_buffer(std::size_t count) : size_(count) {
    if (count == 0) return;
    check(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), "buffer.size",
          "buffer of ", count, " elements of ", sizeof(T), " bytes overflows size_t");
    const std::size_t bytes = (count * sizeof(T) + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
    data_ = static_cast<T*>(::operator new(bytes, std::align_val_t{buffer_alignment}));
    std::memset(static_cast<void*>(data_), 0, bytes);
  }

  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;
  host_buffer(host_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  host_buffer& operator=(host_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~host_buffer() { release(); }

  [[nodiscard]] T* data() noexcept { return data_; }
  [[nodiscard]] const T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::span<T> span() noexcept { return {data_, size_}; }
  [[nodiscard]] std::span<const T> span() const noexcept { return {data_, size_}; }
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return data_[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] T* begin() noexcept { return data_; }
  [[nodiscard]] T* end() noexcept { return data_ + size_; }
  [[nodiscard]] const T* begin() const noexcept { return data_; }
  [[nodiscard]] const T* end() const noexcept { return data_ + size_; }

private:
  void release() noexcept {
    if (data_ != nullptr) ::operator delete(static_cast<void*>(data_), std::align_val_t{buffer_alignment});
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace amsp
