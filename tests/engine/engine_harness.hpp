#pragma once
// A small synthetic training job the engine tests run under every plan: odd-sized tensors in
// three buckets, gradients that depend on (step, micro-batch, rank, element) and on the current
// parameters (so that any divergence between plans would feed back), and a float64 reference
// of the unsharded data-parallel run.

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "amsp/engine/options.hpp"

namespace amsp::test {

inline std::vector<BucketSpec> odd_model() {
  return {
      {"layer0", {{"l0.weight", {13, 7}, dtype::fp32}, {"l0.bias", {13}, dtype::fp32}}},
      {"layer1", {{"l1.weight", {5, 11}, dtype::fp32}}},
      {"layer2", {{"l2.weight", {17}, dtype::fp32}, {"l2.bias", {3}, dtype::fp32}, {"l2.scale", {1}, dtype::fp32}}},
  };
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// Uniform in [-1, 1), a pure function of its keys.
inline double noise(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  const std::uint64_t h = mix(mix(mix(mix(seed ^ mix(a)) ^ b) ^ c) ^ d);
  return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/// Initial value of element i of tensor t.
inline double initial_value(std::size_t t, std::size_t i) { return noise(7, 1000 + t, i, 0, 0); }

/// The gradient a rank computes for element i of tensor t, given the parameter value p.
inline double gradient(std::uint64_t seed, int step, int micro, int rank, std::size_t t, std::size_t i, double p) {
  return noise(seed, static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(micro),
               static_cast<std::uint64_t>(rank), t * 1000003u + i) +
         0.5 * p;
}

}  // namespace amsp::test
