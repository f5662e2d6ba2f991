// Cross-check of amsp's host conversions against CUDA's own host implementations
// (__float2bfloat16_rn, __float2half_rn, __bfloat162float, __half2float from <cuda_bf16.h> and
// <cuda_fp16.h>, compiled here by g++), over tens of millions of float bit patterns: a stride
// through all 2^32 patterns whose step is odd, so every low-bit remainder class is visited.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "amsp/core/dtype.hpp"
#include "dtype_reference.hpp"

namespace {
std::uint16_t cuda_bf16_bits(float f) { return __nv_bfloat16_raw(__float2bfloat16_rn(f)).x; }
std::uint16_t cuda_fp16_bits(float f) { return __half_raw(__float2half_rn(f)).x; }
float cuda_bf16_widen(std::uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
float cuda_fp16_widen(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}
}  // namespace

TEST_CASE("narrowing matches CUDA's host conversions bit for bit") {
  constexpr std::uint64_t step = 17;  // ~253 million patterns, about a second
  std::uint64_t checked = 0;
  std::uint64_t bf16_mismatches = 0;
  std::uint64_t fp16_mismatches = 0;
  std::uint32_t first_bf16 = 0;
  std::uint32_t first_fp16 = 0;
  for (std::uint64_t x = 0; x <= 0xffffffffull; x += step) {
    const float f = amsp_test::float_of(static_cast<std::uint32_t>(x));
    if (amsp::bf16::from_float(f).bits != cuda_bf16_bits(f) && bf16_mismatches++ == 0) first_bf16 = static_cast<std::uint32_t>(x);
    if (amsp::fp16::from_float(f).bits != cuda_fp16_bits(f) && fp16_mismatches++ == 0) first_fp16 = static_cast<std::uint32_t>(x);
    ++checked;
  }
  INFO("first bf16 mismatch at float bits ", amsp_test::hex(first_bf16), ", first fp16 mismatch at ",
       amsp_test::hex(first_fp16));
  CHECK(bf16_mismatches == 0);
  CHECK(fp16_mismatches == 0);
  CHECK(checked > 250'000'000);
}

TEST_CASE("every tie and near-tie matches CUDA") {
  // For each 16-bit upper half, the low halves around the bf16 rounding point; for fp16 the same
  // offsets land on ties for the normals (13 dropped bits) via the 0x1000 family.
  for (std::uint32_t hi = 0; hi <= 0xffffu; ++hi)
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x0fffu, 0x1000u, 0x1001u, 0x3000u}) {
      const float f = amsp_test::float_of((hi << 16) | lo);
      REQUIRE(amsp::bf16::from_float(f).bits == cuda_bf16_bits(f));
      REQUIRE(amsp::fp16::from_float(f).bits == cuda_fp16_bits(f));
    }
}

TEST_CASE("widening matches CUDA for every 16-bit pattern") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float ours_bf16 = amsp::bf16{bits}.to_float();
    const float ours_fp16 = amsp::fp16{bits}.to_float();
    // NaN payloads may differ in the quiet bit; both sides must still be NaN.
    if (ours_bf16 != ours_bf16) REQUIRE(cuda_bf16_widen(bits) != cuda_bf16_widen(bits));
    else REQUIRE(amsp_test::bits_of(ours_bf16) == amsp_test::bits_of(cuda_bf16_widen(bits)));
    if (ours_fp16 != ours_fp16) REQUIRE(cuda_fp16_widen(bits) != cuda_fp16_widen(bits));
    else REQUIRE(amsp_test::bits_of(ours_fp16) == amsp_test::bits_of(cuda_fp16_widen(bits)));
  }
}
