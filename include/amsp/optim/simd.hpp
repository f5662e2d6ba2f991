#pragma once
// The lane type of the host loops. Every update rule is a template over its arithmetic type V, so
// the same definition runs on one float (CUDA threads, loop tails, tests) and on a whole SIMD
// register (host loops). Host registers are GCC/Clang vector extensions whose width follows the
// instruction set the translation unit is compiled for: 16 floats with AVX-512F, 8 with AVX, 4
// with SSE2 (every x86-64) or elsewhere. The width is chosen at compile time: build with
// -march=native (or -mavx2 -mfma) to get the 8-wide path; no run-time dispatch is attempted
// because the shared rule functions cannot carry per-ISA target attributes.
//
// Under nvcc the vector extensions are not used at all (V is plain float everywhere), so a
// translation unit compiled by nvcc that includes the host loop still builds, one lane at a time.
//
// Everything whose code depends on that width lives in an inline namespace named after it
// (AMSP_OPTIM_ISA), so two translation units built with different -march flags link without
// one silently replacing the other's instantiations (an ODR violation otherwise).

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "amsp/core/config.hpp"
#include "amsp/core/dtype.hpp"

#if !defined(__CUDACC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#endif

#if defined(__CUDACC__)
#define AMSP_OPTIM_ISA isa_nvcc_host
#elif defined(__AVX512F__)
#define AMSP_OPTIM_ISA isa_avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define AMSP_OPTIM_ISA isa_avx2_fma
#elif defined(__AVX2__)
#define AMSP_OPTIM_ISA isa_avx2
#elif defined(__AVX__)
#define AMSP_OPTIM_ISA isa_avx
#elif defined(__SSE2__)
#define AMSP_OPTIM_ISA isa_sse2
#else
#define AMSP_OPTIM_ISA isa_generic
#endif

namespace amsp::optim::detail {

// ---- one lane: float, on the host and on the device -------------------------------------------

[[nodiscard]] AMSP_HOST_DEVICE AMSP_FORCE_INLINE float sqrt_of(float x) {
#if defined(__CUDA_ARCH__)
  return ::sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

/// magnitude * sign(x), with sign(0) = sign(-0) = 0 and sign(NaN) = 0 (Lion's convention), for
/// a magnitude >= 0: +magnitude, -magnitude or +0, the same bits as the product. Bit operations,
/// not a branch: with branches the compiler duplicates the caller's `p * decay - result` into
/// each arm and no longer fuses it into one multiply-add, so the loop tail would round twice
/// where the SIMD lanes round once.
[[nodiscard]] AMSP_HOST_DEVICE AMSP_FORCE_INLINE float signed_magnitude(float x, float magnitude) {
  const std::uint32_t nonzero = 0u - static_cast<std::uint32_t>((x < 0.0f) | (x > 0.0f));
  return amsp::detail::bits_float(((amsp::detail::float_bits(x) & 0x80000000u) | amsp::detail::float_bits(magnitude)) &
                                  nonzero);
}

inline namespace AMSP_OPTIM_ISA {

// ---- a SIMD register of floats on the host -----------------------------------------------------

#if defined(__CUDACC__)
inline constexpr std::size_t simd_width = 1;
using simd_float = float;
#else
#if defined(__AVX512F__)
inline constexpr std::size_t simd_bytes = 64;
#elif defined(__AVX__)
inline constexpr std::size_t simd_bytes = 32;
#else
inline constexpr std::size_t simd_bytes = 16;
#endif
inline constexpr std::size_t simd_width = simd_bytes / sizeof(float);
using simd_float = float __attribute__((vector_size(simd_bytes)));
using simd_u32 = std::uint32_t __attribute__((vector_size(simd_bytes)));
using simd_u16 = std::uint16_t __attribute__((vector_size(simd_bytes / 2)));
using simd_half_float = float __attribute__((vector_size(simd_bytes / 2)));
using simd_double = double __attribute__((vector_size(simd_bytes)));

[[nodiscard]] AMSP_FORCE_INLINE simd_float sqrt_of(simd_float x) {
#if defined(__AVX512F__)
  // The masked form: GCC 12's _mm512_sqrt_ps trips -Wmaybe-uninitialized on its undefined source.
  return _mm512_mask_sqrt_ps(x, static_cast<__mmask16>(0xffff), x);
#elif defined(__AVX__)
  return _mm256_sqrt_ps(x);
#elif defined(__SSE2__)
  return _mm_sqrt_ps(x);
#else
  for (std::size_t i = 0; i < simd_width; ++i) x[i] = std::sqrt(x[i]);
  return x;
#endif
}

/// Lane-wise signed_magnitude: x's sign bit on the magnitude, kept where x is neither zero nor
/// NaN (an ordered compare, true lanes all ones). Three bit operations and two compares, where
/// sign(x) * magnitude took two compares, two int-to-float conversions, a subtraction and a
/// multiply: Lion's loop is otherwise only a few multiply-adds per element.
[[nodiscard]] AMSP_FORCE_INLINE simd_float signed_magnitude(simd_float x, float magnitude) {
  const simd_u32 bits = std::bit_cast<simd_u32>(x);
  const simd_u32 nonzero = std::bit_cast<simd_u32>((x < 0.0f) | (x > 0.0f));
  return std::bit_cast<simd_float>(((bits & 0x80000000u) | std::bit_cast<std::uint32_t>(magnitude)) & nonzero);
}
#endif

// ---- loads and stores of one lane group, converting bf16 <-> float ------------------------------

/// Loads simd_width elements starting at `p` (no alignment needed) as floats.
template <class T>
[[nodiscard]] AMSP_FORCE_INLINE simd_float load_lanes(const T* p) {
#if defined(__CUDACC__)
  return to_float(*p);
#else
  if constexpr (std::is_same_v<T, float>) {
    simd_float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else {
    static_assert(std::is_same_v<T, bf16>, "amsp: host loops read float or bf16 lanes");
    simd_u16 h;
    std::memcpy(&h, p, sizeof h);
    return std::bit_cast<simd_float>(__builtin_convertvector(h, simd_u32) << 16);
  }
#endif
}

/// Stores simd_width floats at `p`; bf16 rounds to nearest even with NaN made canonical, bit for
/// bit as bf16::from_float does.
template <class T>
AMSP_FORCE_INLINE void store_lanes(T* p, simd_float v) {
#if defined(__CUDACC__)
  *p = from_float<T>(v);
#else
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(p, &v, sizeof v);
  } else {
    static_assert(std::is_same_v<T, bf16>, "amsp: host loops write float or bf16 lanes");
    const simd_u32 u = std::bit_cast<simd_u32>(v);
    simd_u32 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    rounded = v != v ? simd_u32{} + 0x7fffu : rounded;  // NaN: canonical quiet NaN
#if defined(__AVX2__) && !defined(__AVX512F__)
    // Every lane is <= 0xffff, so the saturating pack is an exact narrowing, without the lane
    // permute the generic conversion needs.
    const __m256i wide = std::bit_cast<__m256i>(rounded);
    const __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
#else
    const simd_u16 h = __builtin_convertvector(rounded, simd_u16);
#endif
    std::memcpy(p, &h, sizeof h);
  }
#endif
}

// ---- the loop skeleton of every streaming pass ---------------------------------------------------

/// How far ahead of the element being processed walk_lanes prefetches each stream. The hardware
/// prefetchers alone fall behind when a loop has much arithmetic per byte: the reorder buffer
/// fills with dependent multiply-adds, square roots and divisions waiting on their loads, and
/// new loads, which are what trains the prefetcher, are issued late. 1 KiB (16 lines) ahead per
/// fp32 stream; 256 B and 2 KiB measured about the same on the 2-core Zen 1 machine of
/// bench/README.md ("Optimizer update"), no prefetch about 10 % more CPU time for AdamW.
inline constexpr std::size_t prefetch_elements = 1024 / sizeof(float);

/// A buffer that walk_lanes prefetches: the address of element 0 and the size of one element.
struct PrefetchStream {
  const void* base;
  std::size_t element_bytes;
};

/// Walks [begin, end): lanes(i) for groups of simd_width elements, then single(i) for the tail.
/// Once per 64 bytes of fp32 elements, before their lane groups, it prefetches element
/// i + prefetch_elements of each stream (a prefetch never faults, so reaching past a buffer's end
/// is harmless). The update loops and the benchmarks' stream kernels (their bandwidth references)
/// share it. The streams are data, not a callback: GCC treats a function that only prefetches as
/// free of side effects and deletes calls to it that it did not inline.
template <std::size_t K, class Lanes, class Single>
AMSP_FORCE_INLINE void walk_lanes(std::size_t begin, std::size_t end, const std::array<PrefetchStream, K>& streams,
                                  Lanes&& lanes, Single&& single) {
  constexpr std::size_t line = 64 / sizeof(float);  // elements per trip
  constexpr std::size_t groups = line >= simd_width ? line / simd_width : 1;
  std::size_t i = begin;
  for (; i + groups * simd_width <= end; i += groups * simd_width) {
#if !defined(__CUDACC__)
    // Integer arithmetic: a pointer past the end of its buffer would be undefined behaviour.
    for (const PrefetchStream& stream : streams)
      __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(stream.base) +
                                                       (i + prefetch_elements) * stream.element_bytes),
                         0, 3);
#pragma GCC unroll 16
#endif  // nvcc's front end warns about the GCC pragma; nvcc-compiled host loops run one lane at a time
    for (std::size_t k = 0; k < groups; ++k) lanes(i + k * simd_width);
  }
  for (; i + simd_width <= end; i += simd_width) lanes(i);
  for (; i < end; ++i) single(i);
}

}  // namespace AMSP_OPTIM_ISA
}  // namespace amsp::optim::detail
