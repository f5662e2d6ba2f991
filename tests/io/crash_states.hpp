#pragma once
// The states of checkpoint k of the crash test: a pure function of (k, tensor, element), so the
// test can check a loaded checkpoint without having kept it.
#include <cstdint>
#include <span>

#include "amsp/io/shard_pieces.hpp"
#include "engine_harness.hpp"

namespace amsp::test {

/// Row r (0 = master, then the states) of element i of tensor t in checkpoint k.
inline float crash_value(std::int64_t k, int row, std::size_t t, std::size_t i) {
  return static_cast<float>(initial_value(t, i)) + static_cast<float>(k) * static_cast<float>(row + 1);
}

/// Index of a tensor in the odd model by name.
inline std::size_t odd_tensor_index(const std::string& name) {
  std::size_t t = 0;
  for (const BucketSpec& b : odd_model())
    for (const TensorSpec& s : b.tensors) {
      if (s.name == name) return t;
      ++t;
    }
  return t;
}

/// Writes (or, with `check`, compares; returns mismatches) the states of checkpoint k into the
/// engine's shards.
template <class Engine>
std::size_t crash_states(Engine& opt, std::int64_t k, bool check) {
  std::size_t mismatches = 0;
  const int rows = 1 + std::remove_cvref_t<decltype(opt.rule())>::state_count;
  for (int b = 0; b < opt.bucket_count(); ++b)
    for (const io::ShardPiece& p : io::owned_pieces(opt, b)) {
      const std::size_t t = odd_tensor_index(p.slot->name);
      for (int r = 0; r < rows; ++r) {
        const std::span<float> shard = r == 0 ? opt.master_shard(b) : opt.state_shard(b, r - 1);
        for (std::size_t i = 0; i < p.count; ++i) {
          float& x = shard[p.shard_offset + i];
          const float want = crash_value(k, r, t, p.tensor_begin + i);
          if (!check) x = want;
          else if (x != want) ++mismatches;
        }
      }
    }
  return mismatches;
}

}  // namespace amsp::test
