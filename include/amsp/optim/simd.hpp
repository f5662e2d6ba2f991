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

/// sign(x) with sign(0) = sign(-0) = 0 and sign(NaN) = 0 (Lion's convention).
[[nodiscard]] AMSP_HOST_DEVICE AMSP_FORCE_INLINE float sign_of(float x) {
  return static_cast<float>(x > 0.0f) - static_cast<float>(x < 0.0f);
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

/// Lane-wise sign(x): a true comparison lane is -1, so (x < 0) - (x > 0) gives -1, 0, +1 and 0 for
/// zeros and NaN, exactly like the scalar overload.
[[nodiscard]] AMSP_FORCE_INLINE simd_float sign_of(simd_float x) {
  return __builtin_convertvector(x < 0.0f, simd_float) - __builtin_convertvector(x > 0.0f, simd_float);
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

}  // namespace AMSP_OPTIM_ISA
}  // namespace amsp::optim::detail
