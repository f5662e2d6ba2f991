#pragma once
// Splitting one flat shard across a few host threads. Threads are started per call (a pool would
// be shared by the rank threads of the threads backend, which call concurrently); the minimum
// chunk keeps the start-up cost, tens of microseconds, small next to the work.
//
// Two ways to split. chunk_of gives worker w one fixed contiguous chunk: a reduction needs that,
// so that its result does not depend on timing. Element-wise passes use for_each_block instead:
// the threads take fixed-size blocks from a shared counter, so a thread that starts late or loses
// its core to another process for a while leaves its blocks to the others. With a static split
// the pass always waited for the slowest thread: on this project's 2-core machine, with one other
// busy process, the two halves of a memory-bound pass finished tens of milliseconds apart
// (bench/README.md, "Optimizer update").

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "amsp/core/error.hpp"

namespace amsp::optim::detail {

/// Elements a thread gets at least before a second thread is worth starting.
inline constexpr std::size_t min_elements_per_thread = std::size_t{1} << 16;
/// Chunk boundaries are multiples of this many elements, so two threads never write the same
/// 64-byte line of an aligned fp32 buffer.
inline constexpr std::size_t chunk_alignment = 16;

/// Elements per block of for_each_block: a multiple of chunk_alignment (so blocks of fp32 and
/// bf16 buffers never share a 64-byte line), large enough that the shared counter is touched once
/// per ~0.5 MiB moved and the hardware prefetchers ramp up rarely, small enough that the last
/// blocks finish close together.
inline constexpr std::size_t block_elements = std::size_t{1} << 15;

/// Threads to use for n elements when the caller allows `threads` (0 = all hardware threads).
[[nodiscard]] inline int worker_count(std::size_t n, int threads) {
  check(threads >= 0, "optim.threads", "threads is ", threads, " but must be >= 0 (0 = all cores)");
  std::size_t allowed = threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : static_cast<std::size_t>(threads);
  allowed = std::min(allowed, std::max<std::size_t>(1, n / min_elements_per_thread));
  return static_cast<int>(allowed);
}

/// The [begin, end) range of worker w out of `workers` over n elements.
[[nodiscard]] inline std::pair<std::size_t, std::size_t> chunk_of(std::size_t n, int workers, int w) {
  auto boundary = [&](int k) {
    if (k >= workers) return n;
    const std::size_t raw = n / static_cast<std::size_t>(workers) * static_cast<std::size_t>(k);
    return std::min(n, raw / chunk_alignment * chunk_alignment);
  };
  return {boundary(w), boundary(w + 1)};
}

/// Calls body(w) for every w in [0, workers): w = 0 on the calling thread, the others on threads
/// started here and joined before returning. If the system refuses a thread, the calling thread
/// runs the bodies that thread would have run, so every body runs exactly once either way. The
/// bodies must not wait for each other (that fallback would deadlock) and must not throw.
template <class Body>
void run_workers(int workers, Body&& body) {
  std::vector<std::jthread> helpers;
  int started = 1;
  if (workers > 1) {
    helpers.reserve(static_cast<std::size_t>(workers - 1));
    try {
      for (; started < workers; ++started) helpers.emplace_back([&body, w = started] { body(w); });
    } catch (const std::system_error&) {
      // Out of threads: fall through with the ones that did start.
    }
  }
  body(0);
  for (int w = started; w < workers; ++w) body(w);
}

/// Calls body(begin, end) once for each block [k * block_elements, min(n, (k + 1) *
/// block_elements)) of [0, n), on `workers` threads (the calling thread among them) that take the
/// next untaken block as they become free. Which thread runs a block depends on timing, so the
/// body must give the same result for a block whichever thread runs it (element-wise passes);
/// otherwise as run_workers.
template <class Body>
void for_each_block(std::size_t n, int workers, Body&& body) {
  std::atomic<std::size_t> next{0};
  run_workers(workers, [&](int) {
    for (std::size_t begin = next.fetch_add(block_elements, std::memory_order_relaxed); begin < n;
         begin = next.fetch_add(block_elements, std::memory_order_relaxed))
      body(begin, std::min(n, begin + block_elements));
  });
}

}  // namespace amsp::optim::detail
