#pragma once
// The element loops of the threads backend on host memory. A reduction combines its inputs in
// the order given (rank order), in the accumulation type, and rounds once to the element type;
// the order never depends on timing, so results are bitwise reproducible.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

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

/// Exact widening of an element to its accumulation type.
template <class T>
AMSP_FORCE_INLINE accumulator_t<T> widen(T value) {
  if constexpr (std::is_same_v<T, double>) return value;
  else return to_float(value);
}

/// outputs[k][i] = op(inputs[0][i], ..., inputs[n_in-1][i]) for i < count, every k. Outputs may
/// alias inputs element for element (in place): each block reads all its inputs before writing.
template <class T>
void reduce_into(T* const* outputs, int n_out, const T* const* inputs, int n_in, std::size_t count, reduce_op op) {
  using Acc = accumulator_t<T>;
  alignas(64) Acc acc[reduce_block];
  for (std::size_t begin = 0; begin < count; begin += reduce_block) {
    const std::size_t m = std::min(reduce_block, count - begin);
    const T* first = inputs[0] + begin;
    for (std::size_t i = 0; i < m; ++i) acc[i] = widen(first[i]);
    for (int j = 1; j < n_in; ++j) {
      const T* in = inputs[j] + begin;
      for (std::size_t i = 0; i < m; ++i) acc[i] += widen(in[i]);
    }
    if (op == reduce_op::avg) {
      const Acc n = static_cast<Acc>(n_in);
      for (std::size_t i = 0; i < m; ++i) acc[i] /= n;
    }
    for (int k = 0; k < n_out; ++k) {
      T* out = outputs[k] + begin;
      if constexpr (std::is_same_v<T, Acc>) std::memcpy(out, acc, m * sizeof(T));
      else for (std::size_t i = 0; i < m; ++i) out[i] = from_float<T>(acc[i]);
    }
  }
}

/// memcpy that tolerates count 0 with null pointers and skips an exact self-copy (in place).
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace detail
}  // namespace amsp::comm
