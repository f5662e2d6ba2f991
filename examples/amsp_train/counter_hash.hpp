#pragma once
// Counter-based hashing for the example: every random choice it makes (the train/validation split,
// the examples of a batch, the initial weights) is a pure function of a seed and integer
// coordinates. Any rank can therefore compute exactly its own part, in any order, without sharing
// a generator's state or replaying it, and the result cannot depend on the plan or the mesh.

#include <cstdint>
#include <string_view>

namespace amsp_train::detail {

/// The splitmix64 finaliser: a bijection on 64-bit words with full avalanche.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Hash of a seed and any number of integer coordinates. Each coordinate is mixed on its own
/// before it is folded in, so (a, b) and (b, a) give unrelated values.
template <class... Coords>
[[nodiscard]] constexpr std::uint64_t counter_hash(std::uint64_t seed, Coords... coords) noexcept {
  std::uint64_t h = mix64(seed);
  ((h = mix64(h ^ mix64(static_cast<std::uint64_t>(coords)))), ...);
  return h;
}

/// FNV-1a over the bytes of `text`, finalised by mix64 (FNV alone has weak low bits).
[[nodiscard]] constexpr std::uint64_t string_hash(std::string_view text) noexcept {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return mix64(h);
}

/// A double in [0, 1) from the top 53 bits of a hash.
[[nodiscard]] constexpr double unit_interval(std::uint64_t h) noexcept {
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

}  // namespace amsp_train::detail
