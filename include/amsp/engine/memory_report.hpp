#pragma once
// What ShardedOptimizer::memory() reports: the bytes of model states and scratch one rank holds.

#include <cstddef>

namespace amsp {

/// Bytes of model states one rank holds (MemoryReport::model_states() is the paper's
/// 2Φ/s_p + 2Φ/s_g + 12Φ/s_os for bf16 + AdamW, over the padded bucket sizes), plus scratch.
struct MemoryReport {
  std::size_t params = 0;            ///< P store: the parameter shard in the compute dtype
  std::size_t grads = 0;             ///< G store: the gradient-accumulation shard
  std::size_t optimizer_states = 0;  ///< OS store: fp32 master weights and the rule's states
  /// Everything else, the sum of the four parts below: the pools' high-water marks (buffers are
  /// kept for reuse) and the fp32 OS-shard gradients.
  std::size_t scratch = 0;
  /// Of scratch: the P stage's gather buffers, which only a sharded P has.
  std::size_t gather_scratch = 0;
  /// Of scratch: the fp32 buffers between reduction stages and for dtype conversion; with fp32
  /// gradients only a P group or G split of several ranks needs them.
  std::size_t reduction_scratch = 0;
  /// Of scratch: the buffers grad_buffer(b) hands out where the G store cannot take the gradients
  /// (G sharded, or a micro-batch after the first).
  std::size_t gradient_staging = 0;
  /// Of scratch: the fp32 OS-shard gradients, kept from the reduction to the update when
  /// gradients are narrower than fp32 or the optimizer-state layout is whole-tensor.
  std::size_t os_gradients = 0;

  [[nodiscard]] std::size_t model_states() const { return params + grads + optimizer_states; }
};
}  // namespace amsp
