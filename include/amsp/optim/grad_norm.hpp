#pragma once
// Global-gradient-norm support on the host: the sum of squares of one shard and a finite check.
// The engine adds the partial sums of the ranks that hold distinct gradient shards, takes the
// square root, and derives the clipping coefficient it folds into StepOptions::grad_scale.
//
// Accumulation is in double: every lane keeps its own double partial sum, lanes and threads are
// combined in a fixed order, so the result is deterministic for a given length and thread count
// and its rounding error (about n * 2^-53 relative) is far below fp32 resolution. Squares of
// finite floats cannot overflow a double, so the sum is +Inf exactly when a gradient is +-Inf and
// NaN when one is NaN: a non-finite sum is the overflow signal of loss scaling.
//
// The finite check compares exponent bits as integers, so it stays correct under -ffast-math.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/optim/parallel.hpp"
#include "amsp/optim/simd.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

namespace detail {
inline namespace AMSP_OPTIM_ISA {

template <class G>
[[nodiscard]] double sum_of_squares_range(const G* g, std::size_t n) {
  std::size_t i = 0;
  double total = 0.0;
#if !defined(__CUDACC__)
  constexpr std::size_t half = simd_width / 2;  // doubles per register
  using half_u16 = std::uint16_t __attribute__((vector_size(simd_bytes / 4)));
  using half_u32 = std::uint32_t __attribute__((vector_size(simd_bytes / 2)));
  auto load = [](const G* p) {
    if constexpr (std::is_same_v<G, float>) {
      simd_half_float h;
      std::memcpy(&h, p, sizeof h);
      return __builtin_convertvector(h, simd_double);
    } else {
      half_u16 h;
      std::memcpy(&h, p, sizeof h);
      return __builtin_convertvector(std::bit_cast<simd_half_float>(__builtin_convertvector(h, half_u32) << 16),
                                     simd_double);
    }
  };
  // Four independent accumulators hide the add latency.
  simd_double acc[4] = {};
  for (; i + 4 * half <= n; i += 4 * half) {
    for (std::size_t k = 0; k < 4; ++k) {
      const simd_double x = load(g + i + k * half);
      acc[k] += x * x;
    }
  }
  const simd_double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (std::size_t lane = 0; lane < half; ++lane) total += sum[lane];
#endif
  for (; i < n; ++i) {
    const double x = static_cast<double>(to_float(g[i]));
    total += x * x;
  }
  return total;
}

/// True when no element of g[0, n) is Inf or NaN.
template <class G>
[[nodiscard]] bool all_finite_range(const G* g, std::size_t n) {
  std::size_t i = 0;
#if !defined(__CUDACC__)
  // Blocks of 4096 elements: branch-free inside a block, early exit between blocks.
  constexpr std::size_t block = 4096;
  for (; i + block <= n; i += block) {
    simd_u32 worst{};
    for (std::size_t j = i; j < i + block; j += simd_width) {
      const simd_u32 magnitude = std::bit_cast<simd_u32>(load_lanes(g + j)) & 0x7fffffffu;
      worst = magnitude > worst ? magnitude : worst;
    }
    for (std::size_t lane = 0; lane < simd_width; ++lane)
      if (worst[lane] >= 0x7f800000u) return false;
  }
#endif
  for (; i < n; ++i)
    if ((amsp::detail::float_bits(to_float(g[i])) & 0x7fffffffu) >= 0x7f800000u) return false;
  return true;
}

}  // namespace AMSP_OPTIM_ISA
}  // namespace detail

inline namespace AMSP_OPTIM_ISA {

/// Sum of squares (in double) of a host gradient shard; NaN and Inf propagate. `threads` as in
/// StepOptions (1 = the calling thread only).
template <grad_element G>
[[nodiscard]] double sum_of_squares_host(std::span<const G> grads, int threads = 1) {
  const int workers = detail::worker_count(grads.size(), threads);
  std::vector<double> partial(static_cast<std::size_t>(workers));
  detail::run_workers(workers, [&](int w) {
    const auto [begin, end] = detail::chunk_of(grads.size(), workers, w);
    partial[static_cast<std::size_t>(w)] = detail::sum_of_squares_range(grads.data() + begin, end - begin);
  });
  double total = 0.0;
  for (const double p : partial) total += p;
  return total;
}

/// True when the host gradient shard holds no Inf and no NaN.
template <grad_element G>
[[nodiscard]] bool all_finite_host(std::span<const G> grads) {
  return detail::all_finite_range(grads.data(), grads.size());
}

}  // namespace AMSP_OPTIM_ISA

}  // namespace amsp::optim
