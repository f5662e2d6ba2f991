#pragma once
// Parameter groups inside the engine: which group each tensor of a bucket belongs to, the rule a
// group's tensors are updated with, and the optimizer-state shard cut into runs of one group each,
// so that the fused update walks whole runs with per-group coefficients and never branches per
// element.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/optim/update_rule.hpp"
#include "amsp/sharding/layout.hpp"

namespace amsp::detail {

/// The distinct groups of an engine (index 0 is the default group) and each tensor's index.
class GroupTable {
public:
  GroupTable() : values_{ParamGroup{}} {}

  /// Index of `group`, added when new.
  int intern(const ParamGroup& group) {
    check(group.lr_scale >= 0.0f && std::isfinite(group.lr_scale), "engine.param_group", "lr_scale ",
          group.lr_scale, " must be finite and >= 0");
    for (std::size_t i = 0; i < values_.size(); ++i)
      if (values_[i] == group) return static_cast<int>(i);
    values_.push_back(group);
    return static_cast<int>(values_.size() - 1);
  }
  [[nodiscard]] const std::vector<ParamGroup>& values() const { return values_; }

private:
  std::vector<ParamGroup> values_;
};

/// The rule the tensors of `group` are updated with: lr scaled, weight decay dropped when off.
template <optim::update_rule Rule>
[[nodiscard]] Rule rule_for_group(Rule rule, const ParamGroup& group) {
  if constexpr (requires { rule.lr; }) {
    rule.lr *= group.lr_scale;
  } else {
    check(group.lr_scale == 1.0f, "engine.param_group", "rule ", Rule::name,
          " has no learning rate to scale (lr_scale = ", group.lr_scale, ")");
  }
  if constexpr (requires { rule.weight_decay; }) {
    if (!group.weight_decay) rule.weight_decay = 0.0f;
  }
  return rule;
}

/// `count` elements of an optimizer-state shard at `shard_offset`, lying at `bucket_offset` of the
/// bucket, all updated with group `group`.
struct GroupRun {
  std::size_t bucket_offset = 0;
  std::size_t shard_offset = 0;
  std::size_t count = 0;
  int group = 0;
};

/// Appends the run [bucket_offset, bucket_offset + count) cut at the tensor boundaries of
/// `layout`, where tensor k owns [its offset, the next tensor's offset) (the alignment padding
/// after a tensor goes with it: it stays zero under every rule), and merges neighbours of the same
/// group. `slot_group[k]` is tensor k's group.
inline void append_group_runs(const FlatLayout& layout, std::span<const int> slot_group, std::size_t bucket_offset,
                              std::size_t shard_offset, std::size_t count, std::vector<GroupRun>& out) {
  const std::vector<TensorSlot>& slots = layout.slots();
  const std::size_t end = bucket_offset + count;
  for (std::size_t k = 0; k < slots.size(); ++k) {
    const std::size_t owned_begin = k == 0 ? 0 : slots[k].offset;
    const std::size_t owned_end = k + 1 < slots.size() ? slots[k + 1].offset : static_cast<std::size_t>(-1);
    const std::size_t begin = std::max(bucket_offset, owned_begin), stop = std::min(end, owned_end);
    if (begin >= stop) continue;
    const int group = slot_group[k];
    if (!out.empty() && out.back().group == group && out.back().bucket_offset + out.back().count == begin &&
        out.back().shard_offset + out.back().count == shard_offset + (begin - bucket_offset)) {
      out.back().count += stop - begin;
    } else {
      out.push_back({begin, shard_offset + (begin - bucket_offset), stop - begin, group});
    }
  }
}

}  // namespace amsp::detail
