#pragma once
// Flat layouts: where each named tensor lives inside one flat buffer per dtype, which range of
// a flat buffer each rank owns under an even split, and the whole-tensor greedy ownership the
// paper uses for optimizer states.
//
// Every tensor starts on an `alignment_bytes` boundary, and each buffer's padded size is a
// multiple of `shard_multiple` × the alignment, so that an even split into any divisor of
// `shard_multiple` shards gives shards that start aligned and hold equal element counts.
// Padding elements are zero and stay zero: they are reduced, updated (a zero gradient with zero
// weights stays zero under every rule amsp ships) and gathered like the rest, never read as data.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"

namespace amsp {

struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  dtype type = dtype::fp32;

  /// Product of the shape (1 for a scalar); fails on a negative dimension.
  [[nodiscard]] std::size_t numel() const {
    std::size_t n = 1;
    for (std::int64_t d : shape) {
      check(d >= 0, "layout.shape", "tensor '", name, "' has negative dimension ", d);
      check(d == 0 || n <= std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(d), "layout.shape",
            "tensor '", name, "' has more elements than size_t can count");
      n *= static_cast<std::size_t>(d);
    }
    return n;
  }
};

/// A contiguous range [begin, end) of elements of a flat buffer.
struct ShardRange {
  std::size_t begin = 0;
  std::size_t end = 0;

  [[nodiscard]] std::size_t size() const { return end - begin; }
  [[nodiscard]] bool empty() const { return end <= begin; }
  [[nodiscard]] ShardRange intersect(const ShardRange& other) const {
    const std::size_t b = std::max(begin, other.begin);
    const std::size_t e = std::min(end, other.end);
    return b < e ? ShardRange{b, e} : ShardRange{b, b};
  }
  friend bool operator==(const ShardRange&, const ShardRange&) = default;
};

struct TensorSlot {
  std::string name;
  std::vector<std::int64_t> shape;
  dtype type = dtype::fp32;
  std::size_t offset = 0;  ///< in elements, inside the flat buffer of `type`
  std::size_t numel = 0;

  [[nodiscard]] ShardRange range() const { return {offset, offset + numel}; }
};

/// Rounds `n` up to a multiple of `multiple` (>= 1).
[[nodiscard]] constexpr std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

/// The range shard `index` of `shards` owns in a buffer of `padded_size` elements (an even split:
/// padded_size must be a multiple of shards).
[[nodiscard]] inline ShardRange even_shard(std::size_t padded_size, int shards, int index) {
  check(shards >= 1 && index >= 0 && index < shards, "layout.shard_index", "shard ", index, " of ", shards,
        " does not exist");
  check(padded_size % static_cast<std::size_t>(shards) == 0, "layout.even_split", "buffer of ", padded_size,
        " elements does not split evenly into ", shards, " shards");
  const std::size_t size = padded_size / static_cast<std::size_t>(shards);
  return {size * static_cast<std::size_t>(index), size * static_cast<std::size_t>(index + 1)};
}

class FlatLayout {
public:
  FlatLayout() = default;

  /// Places `tensors` in declaration order, one flat buffer per dtype. Names must be unique.
  explicit FlatLayout(std::vector<TensorSpec> tensors, std::size_t alignment_bytes = 64, int shard_multiple = 1)
      : alignment_bytes_(alignment_bytes), shard_multiple_(shard_multiple) {
    check(alignment_bytes >= 1 && (alignment_bytes & (alignment_bytes - 1)) == 0, "layout.alignment",
          "alignment of ", alignment_bytes, " bytes must be a power of two");
    check(shard_multiple >= 1, "layout.shard_multiple", "shard multiple ", shard_multiple, " must be at least 1");
    for (TensorSpec& spec : tensors) {
      for (const TensorSlot& s : slots_)
        check(s.name != spec.name, "layout.duplicate_name", "tensor name '", spec.name, "' appears twice");
      const std::size_t numel = spec.numel();
      std::size_t& end = sizes_[static_cast<int>(spec.type)];
      const std::size_t offset = round_up(end, alignment_elements(spec.type));
      slots_.push_back(TensorSlot{std::move(spec.name), std::move(spec.shape), spec.type, offset, numel});
      end = offset + numel;
    }
    for (int t = 0; t < 4; ++t)
      if (sizes_[t] > 0)
        sizes_[t] = round_up(sizes_[t], alignment_elements(static_cast<dtype>(t)) * static_cast<std::size_t>(shard_multiple));
  }

  [[nodiscard]] const std::vector<TensorSlot>& slots() const { return slots_; }
  [[nodiscard]] const TensorSlot& slot(std::string_view name) const {
    for (const TensorSlot& s : slots_)
      if (s.name == name) return s;
    fail("layout.unknown_tensor", "no tensor named '", name, "' in this layout");
  }
  /// Padded element count of the flat buffer of `type` (0 when no tensor has that dtype).
  [[nodiscard]] std::size_t buffer_size(dtype type) const { return sizes_[static_cast<int>(type)]; }
  /// Elements of real tensors (no padding) of `type`.
  [[nodiscard]] std::size_t tensor_elements(dtype type) const {
    std::size_t n = 0;
    for (const TensorSlot& s : slots_)
      if (s.type == type) n += s.numel;
    return n;
  }
  [[nodiscard]] std::vector<dtype> dtypes() const {
    std::vector<dtype> out;
    for (int t = 0; t < 4; ++t)
      if (sizes_[t] > 0) out.push_back(static_cast<dtype>(t));
    return out;
  }
  [[nodiscard]] std::size_t alignment_elements(dtype type) const {
    return std::max<std::size_t>(1, alignment_bytes_ / size_of(type));
  }
  [[nodiscard]] int shard_multiple() const { return shard_multiple_; }
  /// Shard `index` of `shards` of the buffer of `type` (shards must divide shard_multiple()).
  [[nodiscard]] ShardRange shard(dtype type, int shards, int index) const {
    check(shards >= 1 && shard_multiple_ % shards == 0, "layout.even_split", shards,
          " shards do not divide the layout's shard multiple ", shard_multiple_);
    return even_shard(buffer_size(type), shards, index);
  }

private:
  std::vector<TensorSlot> slots_;
  std::size_t sizes_[4] = {0, 0, 0, 0};
  std::size_t alignment_bytes_ = 64;
  int shard_multiple_ = 1;
};

/// Whole-item ownership: item i goes to owner[i]. load[r] is the total size owner r holds.
struct Ownership {
  std::vector<int> owner;
  std::vector<std::size_t> load;
};

/// The paper's inter-tensor layout: items (tensors, or tensor segments) assigned whole, largest
/// first, each to the least loaded owner (ties: lowest owner index, then lower item index first),
/// so that per-tensor state such as FP8 scales stays on one rank. Deterministic: every rank
/// computes the same assignment. The largest load is at most the ideal share plus the largest item.
[[nodiscard]] inline Ownership greedy_ownership(std::span<const std::size_t> sizes, int owners) {
  check(owners >= 1, "layout.owners", "ownership needs at least one owner, got ", owners);
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  Ownership result{std::vector<int>(sizes.size(), 0), std::vector<std::size_t>(static_cast<std::size_t>(owners), 0)};
  for (std::size_t item : order) {
    const auto least = std::min_element(result.load.begin(), result.load.end());
    result.owner[item] = static_cast<int>(least - result.load.begin());
    *least += sizes[item];
  }
  return result;
}

}  // namespace amsp
