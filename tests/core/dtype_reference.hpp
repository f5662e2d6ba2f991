#pragma once
// An independent reference for the narrowing conversions, written from the formats' definitions
// rather than from bit tricks: decode every 16-bit pattern to its exact value in double, then
// round a float to the nearest representable value by search, ties to the even bit pattern.
// Shared by the known-pattern tests and the CUDA cross-check.

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <string>

namespace amsp_test {

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// "0x3f808000", for failure messages.
inline std::string hex(std::uint32_t u) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", u);
  return text;
}

/// A 16-bit float format: `exponent_bits` + `mantissa_bits` + sign = 16.
struct Format16 {
  int exponent_bits;
  int mantissa_bits;

  [[nodiscard]] int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  [[nodiscard]] std::uint16_t inf_bits() const {
    return static_cast<std::uint16_t>(((1u << exponent_bits) - 1u) << mantissa_bits);
  }
  /// Exact value of a non-negative finite pattern (sign bit clear, exponent not all ones).
  [[nodiscard]] double magnitude(std::uint16_t bits) const {
    const int e = bits >> mantissa_bits;
    const double m = bits & ((1u << mantissa_bits) - 1u);
    if (e == 0) return std::ldexp(m, 1 - bias() - mantissa_bits);  // subnormal: 0.m × 2^(1-bias)
    return std::ldexp(m + std::ldexp(1.0, mantissa_bits), e - bias() - mantissa_bits);
  }
  /// Exact value of any pattern, NaN for NaNs.
  [[nodiscard]] double value(std::uint16_t bits) const {
    const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
    const std::uint16_t mag = bits & 0x7fffu;
    if (mag > inf_bits()) return std::nan("");
    if (mag == inf_bits()) return sign * INFINITY;
    return sign * magnitude(mag);
  }
  /// Nearest pattern to `f`, ties to even, NaN -> 0x7FFF (CUDA's canonical NaN), overflow -> Inf.
  [[nodiscard]] std::uint16_t round(float f) const {
    if (std::isnan(f)) return 0x7fffu;
    const std::uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    const double x = std::fabs(static_cast<double>(f));
    const std::uint16_t max_finite = static_cast<std::uint16_t>(inf_bits() - 1u);
    // Beyond the largest finite value by half an ulp or more: the "next" value is 2^(emax+1),
    // whose pattern is Inf, and the largest finite pattern is odd, so ties go to Inf too.
    const double half_ulp_of_max = (magnitude(max_finite) - magnitude(static_cast<std::uint16_t>(max_finite - 1))) / 2;
    if (x >= magnitude(max_finite) + half_ulp_of_max) return sign | inf_bits();
    // Largest pattern whose value is <= x (values grow monotonically with the pattern).
    std::uint16_t lo = 0;
    std::uint16_t hi = max_finite;
    while (lo < hi) {
      const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
      if (magnitude(mid) <= x) lo = mid;
      else hi = static_cast<std::uint16_t>(mid - 1);
    }
    if (lo == max_finite) return sign | lo;
    const double below = x - magnitude(lo);
    const double above = magnitude(static_cast<std::uint16_t>(lo + 1)) - x;
    std::uint16_t pick = lo;
    if (above < below || (above == below && (lo & 1u) != 0)) pick = static_cast<std::uint16_t>(lo + 1);
    return sign | pick;
  }
};

inline constexpr Format16 bf16_format{8, 7};
inline constexpr Format16 fp16_format{5, 10};

}  // namespace amsp_test
