// bf16 / fp16 conversions against known bit patterns and against an independent reference
// (dtype_reference.hpp), plus the dtype tag utilities.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "amsp/core/dtype.hpp"
#include "dtype_reference.hpp"

using amsp::bf16;
using amsp::fp16;
using amsp_test::bits_of;
using amsp_test::float_of;

namespace {
struct Case {
  std::uint32_t in;
  std::uint16_t out;
  const char* why;
};

// Float bit patterns and the bf16 pattern round-to-nearest-even gives (what __float2bfloat16_rn returns).
constexpr Case bf16_cases[] = {
    {0x3f800000u, 0x3f80u, "1.0 exact"},
    {0x3f808000u, 0x3f80u, "tie, kept part even: stays"},
    {0x3f818000u, 0x3f82u, "tie, kept part odd: rounds up to even"},
    {0xbf818000u, 0xbf82u, "negative tie rounds to even magnitude"},
    {0x3f808001u, 0x3f81u, "just above the tie"},
    {0x3f807fffu, 0x3f80u, "just below the tie"},
    {0x3f80ffffu, 0x3f81u, "rounds up into the next mantissa"},
    {0x3fffffffu, 0x4000u, "mantissa carry into the exponent"},
    {0x00000000u, 0x0000u, "+0"},
    {0x80000000u, 0x8000u, "-0 keeps its sign"},
    {0x7f800000u, 0x7f80u, "+Inf"},
    {0xff800000u, 0xff80u, "-Inf"},
    {0x7fc00000u, 0x7fffu, "quiet NaN -> canonical NaN"},
    {0xffc00001u, 0x7fffu, "negative NaN -> canonical NaN"},
    {0x7f800001u, 0x7fffu, "signalling NaN whose payload would truncate to Inf"},
    {0x7f7fffffu, 0x7f80u, "FLT_MAX overflows to Inf"},
    {0x7f7f8000u, 0x7f80u, "tie above the largest bf16: odd, so Inf"},
    {0x7f7f7fffu, 0x7f7fu, "just below that tie: largest finite bf16"},
    {0xff7fffffu, 0xff80u, "-FLT_MAX overflows to -Inf"},
    {0x00000001u, 0x0000u, "smallest float subnormal rounds to +0"},
    {0x80000001u, 0x8000u, "and its negative to -0"},
    {0x00008000u, 0x0000u, "subnormal tie, even: to zero"},
    {0x00018000u, 0x0002u, "subnormal tie, odd: up"},
    {0x00010000u, 0x0001u, "smallest bf16 subnormal, exact"},
    {0x007fffffu, 0x0080u, "largest float subnormal rounds to the smallest normal"},
    {0x80018000u, 0x8002u, "negative subnormal tie"},
};

// Float bit patterns and the fp16 pattern round-to-nearest-even gives (what __float2half_rn returns).
constexpr Case fp16_cases[] = {
    {0x3f800000u, 0x3c00u, "1.0"},
    {0xc0000000u, 0xc000u, "-2.0"},
    {0x3f801000u, 0x3c00u, "1 + 2^-11: tie, even stays"},
    {0x3f803000u, 0x3c02u, "1 + 3*2^-11: tie, odd rounds up"},
    {0x3f801001u, 0x3c01u, "just above a tie"},
    {0x477fe000u, 0x7bffu, "65504, the largest finite half"},
    {0x477fefffu, 0x7bffu, "just below 65520"},
    {0x477ff000u, 0x7c00u, "65520: tie with the odd 0x7bff, so Inf"},
    {0xc77ff000u, 0xfc00u, "-65520 -> -Inf"},
    {0x501502f9u, 0x7c00u, "1e10 overflows"},
    {0x7f7fffffu, 0x7c00u, "FLT_MAX overflows"},
    {0x7f800000u, 0x7c00u, "+Inf"},
    {0xff800000u, 0xfc00u, "-Inf"},
    {0x7fc00000u, 0x7fffu, "NaN -> canonical NaN"},
    {0xff800001u, 0x7fffu, "negative signalling NaN -> canonical NaN"},
    {0x38800000u, 0x0400u, "2^-14, the smallest normal half"},
    {0x33800000u, 0x0001u, "2^-24, the smallest subnormal half"},
    {0x33000000u, 0x0000u, "2^-25: tie between 0 and 2^-24, even: 0"},
    {0xb3000000u, 0x8000u, "-2^-25 -> -0"},
    {0x33000001u, 0x0001u, "just above 2^-25"},
    {0x33c00000u, 0x0002u, "1.5*2^-24: tie, odd rounds up"},
    {0x34200000u, 0x0002u, "2.5*2^-24: tie, even stays"},
    {0x387fc000u, 0x03ffu, "1023*2^-24, the largest subnormal"},
    {0x387fe000u, 0x0400u, "1023.5*2^-24: tie rounds up into the normals"},
    {0x2edbe6ffu, 0x0000u, "1e-10 underflows to +0"},
    {0xaedbe6ffu, 0x8000u, "-1e-10 underflows to -0"},
    {0x00000001u, 0x0000u, "float subnormal -> +0"},
    {0x807fffffu, 0x8000u, "negative float subnormal -> -0"},
    {0x80000000u, 0x8000u, "-0"},
};

bool same_float(float a, float b) { return bits_of(a) == bits_of(b); }
}  // namespace

TEST_CASE("bf16 from float: known bit patterns") {
  for (const Case& c : bf16_cases) {
    INFO(c.why, ", input ", amsp_test::hex(c.in));
    CHECK(bf16::from_float(float_of(c.in)).bits == c.out);
    CHECK(amsp::from_float<bf16>(float_of(c.in)).bits == c.out);
    CHECK(amsp_test::bf16_format.round(float_of(c.in)) == c.out);  // the reference agrees too
  }
}

TEST_CASE("fp16 from float: known bit patterns") {
  for (const Case& c : fp16_cases) {
    INFO(c.why, ", input ", amsp_test::hex(c.in));
    CHECK(fp16::from_float(float_of(c.in)).bits == c.out);
    CHECK(amsp::from_float<fp16>(float_of(c.in)).bits == c.out);
    CHECK(amsp_test::fp16_format.round(float_of(c.in)) == c.out);
  }
}

TEST_CASE("to_float widens every bf16 and fp16 pattern exactly") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    for (const auto& [format, widened] :
         {std::pair{amsp_test::bf16_format, bf16{bits}.to_float()}, std::pair{amsp_test::fp16_format, fp16{bits}.to_float()}}) {
      const double expected = format.value(bits);
      if (std::isnan(expected)) {
        REQUIRE(std::isnan(widened));
      } else {
        REQUIRE(static_cast<double>(widened) == expected);
        REQUIRE(std::signbit(widened) == ((bits & 0x8000u) != 0));  // -0 stays -0
      }
    }
  }
  CHECK(same_float(fp16{0x0001u}.to_float(), std::ldexp(1.0f, -24)));
  CHECK(same_float(fp16{0x7bffu}.to_float(), 65504.0f));
  CHECK(same_float(bf16{0x0001u}.to_float(), float_of(0x00010000u)));
  CHECK(amsp::to_float(2.5) == 2.5f);
}

TEST_CASE("round trip: widening then narrowing returns every non-NaN pattern") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if ((bits & 0x7f80u) != 0x7f80u || (bits & 0x7fu) == 0) REQUIRE(bf16::from_float(bf16{bits}.to_float()).bits == bits);
    if ((bits & 0x7c00u) != 0x7c00u || (bits & 0x3ffu) == 0) REQUIRE(fp16::from_float(fp16{bits}.to_float()).bits == bits);
  }
}

TEST_CASE("narrowing agrees with the reference on a stride through all float patterns") {
  // 2^32 / 65537 ≈ 65.5k patterns, plus each one's neighbours and the midpoints below: cheap
  // enough for the sanitizer build, while the CUDA cross-check covers millions.
  constexpr std::uint64_t step = 65537;
  std::uint64_t checked = 0;
  for (std::uint64_t x = 0; x <= 0xffffffffull; x += step)
    for (std::uint32_t delta : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xfffu, 0x1000u, 0x1001u}) {
      const auto in = static_cast<std::uint32_t>((x & ~0xffffull) | delta);
      const float f = float_of(in);
      REQUIRE(bf16::from_float(f).bits == amsp_test::bf16_format.round(f));
      REQUIRE(fp16::from_float(f).bits == amsp_test::fp16_format.round(f));
      ++checked;
    }
  CHECK(checked > 500'000);
}

TEST_CASE("fp16: every midpoint between neighbouring halves rounds to the even one") {
  for (std::uint16_t h = 0; h < 0x7bffu; ++h) {
    const double mid = (amsp_test::fp16_format.magnitude(h) + amsp_test::fp16_format.magnitude(static_cast<std::uint16_t>(h + 1))) / 2;
    const auto f = static_cast<float>(mid);
    REQUIRE(static_cast<double>(f) == mid);  // every fp16 midpoint is a float
    const std::uint16_t even = (h & 1u) == 0 ? h : static_cast<std::uint16_t>(h + 1);
    REQUIRE(fp16::from_float(f).bits == even);
    REQUIRE(fp16::from_float(-f).bits == (even | 0x8000u));
    REQUIRE(fp16::from_float(std::nextafter(f, 0.0f)).bits == h);
    REQUIRE(fp16::from_float(std::nextafter(f, INFINITY)).bits == h + 1);
  }
}

TEST_CASE("dtype tags: sizes, names, parsing, visiting") {
  using amsp::dtype;
  static_assert(amsp::dtype_of_v<float> == dtype::fp32 && amsp::dtype_of_v<const double> == dtype::fp64);
  static_assert(amsp::dtype_of_v<bf16> == dtype::bf16 && amsp::dtype_of_v<fp16> == dtype::fp16);
  static_assert(amsp::element_type<bf16> && !amsp::element_type<int>);
  static_assert(sizeof(bf16) == 2 && sizeof(fp16) == 2);
  for (dtype t : {dtype::fp32, dtype::fp64, dtype::bf16, dtype::fp16}) {
    CHECK(amsp::parse_dtype(amsp::name_of(t)) == t);
    const std::size_t visited = amsp::visit_dtype(t, [](auto v) { return sizeof(v); });
    CHECK(visited == amsp::size_of(t));
    CHECK(amsp::visit_dtype(t, [](auto v) { return amsp::dtype_of_v<decltype(v)>; }) == t);
  }
  CHECK(amsp::size_of(dtype::fp64) == 8);
  CHECK(amsp::parse_dtype("bfloat16") == dtype::bf16);
  CHECK(amsp::parse_dtype("float16") == dtype::fp16);
  CHECK(amsp::parse_dtype("float32") == dtype::fp32);
  CHECK(amsp::parse_dtype("float64") == dtype::fp64);
  try {
    (void)amsp::parse_dtype("int8");
    FAIL("parse_dtype accepted int8");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "dtype.parse");
    CHECK(std::string(e.what()).find("'int8'") != std::string::npos);
  }
  try {
    (void)amsp::visit_dtype(static_cast<dtype>(9), [](auto) { return 0; });
    FAIL("visit_dtype accepted an invalid tag");
  } catch (const amsp::error& e) {
    CHECK(e.rule() == "dtype.visit");
    CHECK(std::string(e.what()).find("9") != std::string::npos);
  }
}
