#pragma once
// Scratch buffers handed out for the lifetime of one use (a gathered bucket, a micro-batch's
// gradients) and reused afterwards, so that scratch stays at the size of the buckets in flight
// rather than the size of the model. Buffer is the memory space's buffer (host_buffer,
// cuda_buffer): a pool grows only when every buffer is in use, i.e. during the first
// micro-batches of a job, up to the schedule's high-water mark. The first buffers can be given a
// size of at least the largest request (set_slot_elements: the engine's largest bucket), so that
// while no more of them are in use a free one serves any request, and the pool never grows
// because a smaller bucket's buffer was the one free. trim() gives the free buffers back (after an
// evaluation that gathered the whole model, say); the pool grows again as it did. Thread-safe:
// with an asynchronous space the caller's thread hands a buffer to the communication stream, which
// gives it back.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <mutex>
#include <vector>

#include "amsp/core/buffer.hpp"
#include "amsp/core/error.hpp"

namespace amsp::detail {

template <class T, template <class> class Buffer = host_buffer>
class BufferPool {
public:
  /// Index of a free buffer of at least `count` elements (allocated when none is free).
  [[nodiscard]] int acquire(std::size_t count) {
    std::lock_guard lock(mutex_);
    int best = -1;
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (!in_use_[i] && buffers_[i].size() >= count && (best < 0 || buffers_[i].size() < buffers_[static_cast<std::size_t>(best)].size()))
        best = static_cast<int>(i);
    if (best < 0) {
      // A slot emptied by trim() is filled again before the pool grows: slot indices stay what the
      // engine's buckets hold, and the first slots keep their size rule.
      std::size_t slot = 0;
      while (slot < buffers_.size() && (in_use_[slot] || !buffers_[slot].empty())) ++slot;
      if (slot == buffers_.size()) {
        buffers_.emplace_back();
        in_use_.push_back(false);
      }
      buffers_[slot] = Buffer<T>(slot < sized_buffers_ ? std::max(count, slot_elements_) : count);
      best = static_cast<int>(slot);
    }
    in_use_[static_cast<std::size_t>(best)] = true;
    return best;
  }
  /// The first `buffers` buffers of the pool are allocated with at least `elements` elements;
  /// later ones with the size asked for.
  void set_slot_elements(std::size_t elements, std::size_t buffers = std::numeric_limits<std::size_t>::max()) {
    std::lock_guard lock(mutex_);
    slot_elements_ = elements;
    sized_buffers_ = buffers;
  }
  void release(int index) {
    std::lock_guard lock(mutex_);
    check(index >= 0 && static_cast<std::size_t>(index) < buffers_.size() && in_use_[static_cast<std::size_t>(index)],
          "engine.scratch", "scratch buffer ", index, " is not in use");
    in_use_[static_cast<std::size_t>(index)] = false;
  }
  [[nodiscard]] T* data(int index) {
    std::lock_guard lock(mutex_);
    return buffers_.at(static_cast<std::size_t>(index)).data();
  }
  /// Frees every buffer not in use and returns the bytes freed. The caller makes sure that no
  /// work still reads or writes them (the engine's trim_scratch waits for its streams and the
  /// user's first). Buffers in use stay where they are, with their contents.
  std::size_t trim() {
    std::lock_guard lock(mutex_);
    std::size_t freed = 0;
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (!in_use_[i]) {
        freed += buffers_[i].size_bytes();
        buffers_[i] = Buffer<T>();
      }
    return freed;
  }
  /// Bytes allocated by the pool (its high-water mark: buffers are kept for reuse).
  [[nodiscard]] std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    std::size_t total = 0;
    for (const auto& b : buffers_) total += b.size_bytes();
    return total;
  }

private:
  std::vector<Buffer<T>> buffers_;
  std::vector<bool> in_use_;
  std::size_t slot_elements_ = 0;
  std::size_t sized_buffers_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace amsp::detail
