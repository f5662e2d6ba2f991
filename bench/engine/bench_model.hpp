#pragma once
// The synthetic model the engine benchmarks step: `count` buckets of one fp32 tensor of `params`
// elements each, named layer<b> / layer<b>.w.

#include <cstdint>
#include <string>
#include <vector>

#include "amsp/engine/options.hpp"

namespace amsp::bench {

inline std::vector<BucketSpec> equal_buckets(int count, std::int64_t params) {
  std::vector<BucketSpec> buckets;
  for (int b = 0; b < count; ++b)
    buckets.push_back({"layer" + std::to_string(b), {{"layer" + std::to_string(b) + ".w", {params}, dtype::fp32}}});
  return buckets;
}

}  // namespace amsp::bench
