#pragma once
// Which tensor elements a rank writes and reads, from the engine's shard-access API.
//
// A rank's OS shard of a bucket is a list of runs of the bucket's flat layout (os_shard_runs);
// cut by the tensor slots, each run becomes tensor pieces (padding belongs to no tensor and is
// neither written nor read).
//
// Writing (deduplication): the R = world / s_os OS replicas hold identical copies of each OS
// shard, so each shard's tensor elements are split into R even slices by position and replica j
// (its OS group index) writes slice j. Every byte is written once, and every rank writes about
// 1/world of the states whatever the bucket count (DCP's dedup gives each replicated item to one
// rank instead, which leaves ranks idle when there are fewer items than replicas).
//
// Reading: a rank reads exactly the pieces of its own runs (resharding), whatever plan wrote them.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "amsp/sharding/layout.hpp"

namespace amsp::io {

/// Elements [tensor_begin, tensor_begin + count) of a tensor, held at shard_offset of the rank's
/// master and state shards of a bucket.
struct ShardPiece {
  int bucket = 0;
  const TensorSlot* slot = nullptr;  ///< the tensor (valid while the engine lives)
  std::size_t tensor_begin = 0;
  std::size_t shard_offset = 0;
  std::size_t count = 0;
};

/// This rank's OS shard of bucket b as tensor pieces, in run order.
template <class Engine>
[[nodiscard]] std::vector<ShardPiece> owned_pieces(const Engine& engine, int b) {
  std::vector<ShardPiece> pieces;
  const FlatLayout& layout = engine.layout(b);
  for (const auto& run : engine.os_shard_runs(b)) {
    const ShardRange range{run.bucket_offset, run.bucket_offset + run.count};
    for (const TensorSlot& slot : layout.slots()) {
      const ShardRange part = slot.range().intersect(range);
      if (part.empty()) continue;
      pieces.push_back({b, &slot, part.begin - slot.offset, run.shard_offset + (part.begin - run.bucket_offset),
                        part.size()});
    }
  }
  return pieces;
}

/// The pieces this rank writes: for each bucket, slice `replica` of `replicas` of its owned
/// pieces (by element position), cut into pieces of at most `max_piece` elements.
template <class Engine>
[[nodiscard]] std::vector<ShardPiece> pieces_to_write(const Engine& engine, int replica, int replicas,
                                                      std::size_t max_piece) {
  std::vector<ShardPiece> out;
  for (int b = 0; b < engine.bucket_count(); ++b) {
    const std::vector<ShardPiece> owned = owned_pieces(engine, b);
    std::size_t total = 0;
    for (const ShardPiece& p : owned) total += p.count;
    const std::size_t lo = total * static_cast<std::size_t>(replica) / static_cast<std::size_t>(replicas);
    const std::size_t hi = total * static_cast<std::size_t>(replica + 1) / static_cast<std::size_t>(replicas);
    std::size_t position = 0;
    for (const ShardPiece& p : owned) {
      const std::size_t begin = std::max(lo, position);
      const std::size_t end = std::min(hi, position + p.count);
      for (std::size_t at = begin; at < end; at += max_piece) {
        const std::size_t skip = at - position;
        out.push_back({b, p.slot, p.tensor_begin + skip, p.shard_offset + skip, std::min(max_piece, end - at)});
      }
      position += p.count;
    }
  }
  return out;
}

}  // namespace amsp::io
