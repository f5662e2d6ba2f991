#pragma once
// The element loops of the threads backend on host memory. A reduction combines its inputs in
// the order given (rank order), in the accumulation type, and rounds once to the element type;
// the order never depends on timing, so results are bitwise reproducible.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
#include <emmintrin.h>
#define AMSP_COMM_STREAMING_STORES 1
#endif

#include "amsp/comm/op.hpp"
#include "amsp/core/config.hpp"
#include "amsp/core/dtype.hpp"

namespace amsp::comm {

/// The type reductions of T accumulate in: fp32 for fp32, bf16 and fp16; fp64 for fp64.
template <class T>
using accumulator_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

namespace detail {

/// Elements per block: the accumulator block (8 KiB of fp32) stays in L1 while the inputs stream.
inline constexpr std::size_t reduce_block = 2048;

/// Exact widening of an element to its accumulation type (host and device: the CUDA reduction
/// of amsp/comm/threads_cuda.cuh uses the same conversions, so results agree bit for bit).
template <class T>
AMSP_HOST_DEVICE AMSP_FORCE_INLINE accumulator_t<T> widen(T value) {
  if constexpr (std::is_same_v<T, double>) return value;
  else return to_float(value);
}

/// The one rounding of a reduction: accumulation type to element type, to nearest even.
template <class T>
AMSP_HOST_DEVICE AMSP_FORCE_INLINE T round_to(accumulator_t<T> value) {
  if constexpr (std::is_same_v<T, accumulator_t<T>>) return value;
  else return from_float<T>(value);
}

/// Bytes a rank writes in one collective from which on it bypasses the caches: far beyond the
/// cache size, ordinary stores first read every destination line (read-for-ownership) and evict
/// the inputs still to be read, which costs about a third of the bandwidth of a large copy.
inline constexpr std::size_t streaming_threshold = std::size_t{4} << 20;

/// memcpy with non-temporal stores where the CPU has them (SSE2; not under ThreadSanitizer,
/// which does not see such stores). A trailing sfence orders them before the next barrier.
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(AMSP_COMM_STREAMING_STORES)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15u)) & 15u;
  if (bytes < head + 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const std::size_t body = bytes / 64 * 64;
  for (std::size_t i = 0; i < body; i += 64)
    for (std::size_t k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + k)));
  std::memcpy(d + body, s + body, bytes - body);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

/// Copies `bytes`, streaming when `streaming`; tolerates count 0 with null pointers and skips an
/// exact self-copy (in place).
inline void copy_bytes(void* dst, const void* src, std::size_t bytes, bool streaming = false) {
  if (bytes == 0 || dst == src) return;
  if (streaming) stream_copy(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

/// outputs[k][i] = op(inputs[0][i], ..., inputs[n_in-1][i]) for i < count, every k. Outputs may
/// alias inputs element for element (in place): each block reads all its inputs before writing.
template <class T>
void reduce_into(T* const* outputs, int n_out, const T* const* inputs, int n_in, std::size_t count, reduce_op op,
                 bool streaming = false) {
  using Acc = accumulator_t<T>;
  alignas(64) Acc acc[reduce_block];
  alignas(64) T narrow[std::is_same_v<T, Acc> ? 1 : reduce_block];
  for (std::size_t begin = 0; begin < count; begin += reduce_block) {
    const std::size_t m = std::min(reduce_block, count - begin);
    // One cache line at a time, each with a prefetch of the line `ahead` elements further: with
    // n inputs read in short runs, the hardware prefetcher alone leaves a fifth of the read
    // bandwidth unused (measured on this project's development machine).
    constexpr std::size_t line = 64 / sizeof(T);
    constexpr std::size_t ahead = 16384 / sizeof(T);
    for (int j = 0; j < n_in; ++j) {
      const T* in = inputs[j] + begin;
      for (std::size_t i0 = 0; i0 < m; i0 += line) {
        if (begin + i0 + ahead < count) __builtin_prefetch(in + i0 + ahead);
        const std::size_t end = std::min(m, i0 + line);
        if (j == 0)
          for (std::size_t i = i0; i < end; ++i) acc[i] = widen(in[i]);
        else
          for (std::size_t i = i0; i < end; ++i) acc[i] += widen(in[i]);
      }
    }
    if (op == reduce_op::avg) {
      const Acc n = static_cast<Acc>(n_in);
      for (std::size_t i = 0; i < m; ++i) acc[i] /= n;
    }
    const void* result = acc;
    if constexpr (!std::is_same_v<T, Acc>) {
      for (std::size_t i = 0; i < m; ++i) narrow[i] = round_to<T>(acc[i]);
      result = narrow;
    }
    for (int k = 0; k < n_out; ++k) copy_bytes(outputs[k] + begin, result, m * sizeof(T), streaming);
  }
}

}  // namespace detail
}  // namespace amsp::comm
