// The machinery under the host update: the dynamic block split (for_each_block), the loop
// skeleton (walk_lanes) and Lion's lane-wise sign (signed_magnitude), each against what it must
// do by definition, plus Lion's zero-direction case through whole SIMD registers.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "amsp/optim.hpp"

namespace optim = amsp::optim;
namespace detail = amsp::optim::detail;
using amsp::detail::bits_float;
using amsp::detail::float_bits;

#if defined(AMSP_TEST_EXPECTED_SIMD_WIDTH)
TEST_CASE("the host loops use the register width of the instruction set this test was built for") {
  // Set per ISA variant by tests/optim/CMakeLists.txt: a variant whose -march flag did not take
  // effect would otherwise quietly test a narrower path twice.
  CHECK(detail::simd_width == AMSP_TEST_EXPECTED_SIMD_WIDTH);
}
#endif

TEST_CASE("for_each_block hands every aligned block to exactly one thread") {
  constexpr std::size_t block = detail::block_elements;
  static_assert(block % detail::chunk_alignment == 0);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, block - 1, block, block + 1, 3 * block + 17}) {
    for (const int workers : {1, 2, 3}) {
      CAPTURE(n);
      CAPTURE(workers);
      std::vector<std::atomic<int>> visits(n);
      std::atomic<int> bad_ranges{0};
      detail::for_each_block(n, workers, [&](std::size_t begin, std::size_t end) {
        if (begin % block != 0 || begin >= end || end > n || (end - begin != block && end != n)) ++bad_ranges;
        for (std::size_t i = begin; i < end && i < n; ++i) visits[i].fetch_add(1, std::memory_order_relaxed);
      });
      CHECK(bad_ranges.load() == 0);
      std::size_t wrong = 0;
      for (const auto& v : visits) wrong += v.load() != 1;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("walk_lanes covers [begin, end) once: register groups first, then single elements") {
  const std::size_t w = detail::simd_width;
  std::vector<float> buffer(256, 0.0f);
  const std::array<detail::PrefetchStream, 1> streams{{{buffer.data(), sizeof(float)}}};
  for (std::size_t begin = 0; begin < 5; ++begin) {
    for (std::size_t end = begin; end < 150; end += 7) {
      CAPTURE(begin);
      CAPTURE(end);
      std::vector<int> visits(buffer.size(), 0);
      std::size_t misplaced = 0, last = begin;
      bool singles_started = false;
      detail::walk_lanes(
          begin, end, streams,
          [&](std::size_t i) {
            // Register groups come in order, from begin, before any single element.
            if (singles_started || i != last || i + w > end) ++misplaced;
            for (std::size_t k = i; k < i + w && k < visits.size(); ++k) ++visits[k];
            last = i + w;
          },
          [&](std::size_t i) {
            // Single elements only for the tail that no longer fills a register.
            if (i != last || (!singles_started && end - i >= w)) ++misplaced;
            singles_started = true;
            ++visits[i];
            last = i + 1;
          });
      CHECK(misplaced == 0);
      CHECK(last == end);
      for (std::size_t k = 0; k < visits.size(); ++k) {
        CAPTURE(k);
        CHECK(visits[k] == (k >= begin && k < end ? 1 : 0));
      }
    }
  }
}

TEST_CASE("signed_magnitude is magnitude * sign(x) with sign(+-0) = sign(NaN) = +0") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Inputs and the expected bits for a magnitude of 0.125 (0x3e000000).
  const float inputs[] = {0.0f, -0.0f, nan, -nan, inf, -inf, 1e-45f, -1e-45f, 2.5f, -2.5f,
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  const std::uint32_t expected[] = {0u, 0u, 0u, 0u, 0x3e000000u, 0xbe000000u, 0x3e000000u, 0xbe000000u,
                                    0x3e000000u, 0xbe000000u, 0x3e000000u, 0xbe000000u};
  constexpr std::size_t count = std::size(inputs);
  for (std::size_t k = 0; k < count; ++k) {
    CAPTURE(k);
    CHECK(float_bits(detail::signed_magnitude(inputs[k], 0.125f)) == expected[k]);
  }
  // Every input in every lane of a register.
  for (std::size_t shift = 0; shift < count; ++shift) {
    detail::simd_float x;
    for (std::size_t lane = 0; lane < detail::simd_width; ++lane) x[lane] = inputs[(lane + shift) % count];
    const detail::simd_float got = detail::signed_magnitude(x, 0.125f);
    for (std::size_t lane = 0; lane < detail::simd_width; ++lane) {
      CAPTURE(shift);
      CAPTURE(lane);
      CHECK(float_bits(got[lane]) == expected[(lane + shift) % count]);
    }
  }
}

TEST_CASE("Lion: a zero or NaN direction only decays the weights, in SIMD lanes and the tail") {
  // m = 0 and g = 0 make the direction exactly zero; a NaN gradient makes it NaN, whose sign is 0
  // as well (the NaN still reaches m). 1003 elements: whole registers and a scalar tail.
  const std::size_t n = 1003;
  std::vector<float> master(n), m(n, 0.0f), grads(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    master[i] = 0.01f * static_cast<float>(i) - 4.0f;
    if (i % 5 == 3) grads[i] = std::numeric_limits<float>::quiet_NaN();
  }
  master[7] = -0.0f;  // -0 * decay - (+0) stays -0
  const std::vector<float> before = master;
  const optim::Lion rule{1e-2f, 0.9f, 0.99f, 0.5f};
  optim::ShardState<optim::Lion> shard{master, {std::span<float>(m)}};
  optim::update_host(rule, shard, std::span<const float>(grads), std::span<float>(), {1, 1.0f, false, 1});
  const float decay = static_cast<float>(1.0 - 1e-2 * 0.5);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float want = before[i] * decay;
    wrong += std::memcmp(&master[i], &want, sizeof want) != 0;
  }
  CHECK(wrong == 0);
  CHECK(std::signbit(master[7]));
}
