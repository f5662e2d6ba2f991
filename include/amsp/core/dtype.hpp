#pragma once
// Element types of model states: fp32, fp64, bf16 and fp16, with host conversions that round to
// nearest even and treat NaN, Inf and subnormals exactly as CUDA's __float2bfloat16_rn and
// __float2half_rn do, so that a value converted on the host and on the GPU has the same bits.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "amsp/core/config.hpp"
#include "amsp/core/error.hpp"

namespace amsp {

enum class dtype : std::uint8_t { fp32, fp64, bf16, fp16 };

namespace detail {
AMSP_HOST_DEVICE AMSP_FORCE_INLINE std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
AMSP_HOST_DEVICE AMSP_FORCE_INLINE float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// Round-to-nearest-even on the 32-bit remainder that a narrowing conversion drops.
AMSP_HOST_DEVICE AMSP_FORCE_INLINE std::uint16_t round_nearest_even(std::uint32_t kept,
                                                                    std::uint32_t remainder) {
  if (remainder > 0x80000000u || (remainder == 0x80000000u && (kept & 1u) != 0u)) ++kept;
  return static_cast<std::uint16_t>(kept);
}
}  // namespace detail

/// bfloat16 storage type: 1 sign, 8 exponent, 7 mantissa bits; layout-compatible with
/// __nv_bfloat16, so device buffers of either type can be reinterpreted.
struct bf16 {
  std::uint16_t bits;

  /// float -> bf16, round to nearest even; every NaN becomes the canonical 0x7FFF.
  [[nodiscard]] AMSP_HOST_DEVICE static bf16 from_float(float f) {
    const std::uint32_t x = detail::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return bf16{0x7fffu};
    return bf16{detail::round_nearest_even(x >> 16, x << 16)};
  }
  /// Exact widening.
  [[nodiscard]] AMSP_HOST_DEVICE float to_float() const {
    return detail::bits_float(static_cast<std::uint32_t>(bits) << 16);
  }
  friend AMSP_HOST_DEVICE bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};

/// IEEE binary16 storage type; layout-compatible with __half.
struct fp16 {
  std::uint16_t bits;

  /// float -> fp16, round to nearest even; overflow rounds to Inf; NaN becomes 0x7FFF.
  [[nodiscard]] AMSP_HOST_DEVICE static fp16 from_float(float f) {
    const std::uint32_t x = detail::float_bits(f);
    const std::uint32_t magnitude = x & 0x7fffffffu;
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    if (magnitude >= 0x7f800000u)
      return fp16{static_cast<std::uint16_t>(magnitude == 0x7f800000u ? (sign | 0x7c00u) : 0x7fffu)};
    if (magnitude > 0x477fefffu)  // beyond the largest finite half after rounding: Inf
      return fp16{detail::round_nearest_even(sign | 0x7bffu, 0x80000000u)};
    if (magnitude >= 0x38800000u)  // normal half
      return fp16{detail::round_nearest_even(sign | ((magnitude - 0x38000000u) >> 13), magnitude << 19)};
    if (magnitude < 0x33000001u)  // rounds to a signed zero
      return fp16{detail::round_nearest_even(sign, magnitude)};
    const std::uint32_t shift = 0x7eu - (magnitude >> 23);  // subnormal half
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    return fp16{detail::round_nearest_even(sign | (mantissa >> shift), mantissa << (32u - shift))};
  }
  /// Exact widening, subnormals included.
  [[nodiscard]] AMSP_HOST_DEVICE float to_float() const {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    std::uint32_t exponent = (bits >> 10) & 0x1fu;
    std::uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1fu) return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
      if (mantissa == 0) return detail::bits_float(sign);
      exponent = 113;  // normalise the subnormal: 2^-14 * 0.m
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      return detail::bits_float(sign | (exponent << 23) | (mantissa << 13));
    }
    return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  friend AMSP_HOST_DEVICE bool operator==(fp16 a, fp16 b) { return a.bits == b.bits; }
};

/// Conversions between any supported element type and float, used by generic loops.
template <class T>
AMSP_HOST_DEVICE AMSP_FORCE_INLINE float to_float(T value) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, fp16>) return value.to_float();
  else return static_cast<float>(value);
}
template <class T>
AMSP_HOST_DEVICE AMSP_FORCE_INLINE T from_float(float value) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, fp16>) return T::from_float(value);
  else return static_cast<T>(value);
}

/// Maps a C++ element type to its dtype tag; unsupported types fail to compile.
template <class T> struct dtype_of_t {
  static_assert(sizeof(T) == 0, "amsp: no dtype for this element type (use float, double, bf16, fp16)");
};
template <> struct dtype_of_t<float> { static constexpr dtype value = dtype::fp32; };
template <> struct dtype_of_t<double> { static constexpr dtype value = dtype::fp64; };
template <> struct dtype_of_t<bf16> { static constexpr dtype value = dtype::bf16; };
template <> struct dtype_of_t<fp16> { static constexpr dtype value = dtype::fp16; };
template <class T> inline constexpr dtype dtype_of_v = dtype_of_t<std::remove_cv_t<T>>::value;

/// Element types amsp stores and moves.
template <class T>
concept element_type = std::is_same_v<std::remove_cv_t<T>, float> || std::is_same_v<std::remove_cv_t<T>, double> ||
                       std::is_same_v<std::remove_cv_t<T>, bf16> || std::is_same_v<std::remove_cv_t<T>, fp16>;

[[nodiscard]] constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::fp32: return 4;
    case dtype::fp64: return 8;
    case dtype::bf16: return 2;
    case dtype::fp16: return 2;
  }
  return 0;
}

[[nodiscard]] constexpr std::string_view name_of(dtype t) {
  switch (t) {
    case dtype::fp32: return "fp32";
    case dtype::fp64: return "fp64";
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
  }
  return "unknown";
}

/// Parses "fp32", "fp64", "bf16" or "fp16" (also "float32", "float64", "bfloat16", "float16").
[[nodiscard]] inline dtype parse_dtype(std::string_view text) {
  if (text == "fp32" || text == "float32") return dtype::fp32;
  if (text == "fp64" || text == "float64") return dtype::fp64;
  if (text == "bf16" || text == "bfloat16") return dtype::bf16;
  if (text == "fp16" || text == "float16") return dtype::fp16;
  fail("dtype.parse", "unknown dtype '", text, "' (expected fp32, fp64, bf16 or fp16)");
}

/// Calls `f(T{})` with the C++ element type of a runtime dtype.
template <class F>
decltype(auto) visit_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::fp32: return f(float{});
    case dtype::fp64: return f(double{});
    case dtype::bf16: return f(bf16{});
    case dtype::fp16: return f(fp16{});
  }
  fail("dtype.visit", "invalid dtype value ", static_cast<int>(t));
}

}  // namespace amsp
