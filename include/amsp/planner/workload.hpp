#pragma once
// What one training step computes: sequence length, micro-batch size and count, recomputation,
// and from those the activation memory per rank and the FLOPs per rank.
//
// Activation memory follows Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (2022), eq. 1 without tensor parallelism: one layer stores
//     s·b·h·(34 + 5·a·s/h) bytes
// with 16-bit activations (34·sbh for the linear inputs, norms, GeLU and dropout masks; 5·a·s²·b
// for the attention scores, their softmax and its dropout). We keep their constant 34 for LLaMA:
// redoing their accounting for SwiGLU without dropout gives 16·sbh + 6·sbf, i.e. 32.1·sbh for
// LLaMA's f ≈ 2.69 h, within 6 % of it. FlashAttention (the paper trains with FlashAttention-2)
// never materialises the s × s scores, so with `flash_attention` the 5·a·s/h term is dropped.
// Beyond the layers we count the output side as Megatron does: the final norm's and the lm head's
// inputs (2·sbh each) and the fp32 logits of the loss (4·s·b·V).
// With full recomputation only each layer's input is kept (2·sbh per layer), and the backward of
// one layer rebuilds that layer's full activations, so one layer's worth is added back.
// Activations of one micro-batch at a time are alive (gradient accumulation runs them in turn).
//
// FLOPs follow PaLM's model-FLOPs convention (Chowdhery et al. 2022, appendix B): per token
// 6·Φ + 12·L·h·s for forward and backward (attention counted without the causal half), which is
// what MFU divides by. Recomputation executes the forward once more (2·Φ + 4·L·h·s per token);
// those FLOPs cost time but do not count towards MFU.

#include <cstdint>

#include "amsp/core/error.hpp"
#include "amsp/planner/model.hpp"

namespace amsp::planner {

struct Workload {
  std::int64_t seq = 4096;      ///< tokens per sequence
  std::int64_t micro_batch = 1; ///< sequences per micro-batch per rank
  int micro_batches = 1;        ///< M: micro-batches per rank per step (gradient accumulation)
  bool recompute = false;       ///< full activation recomputation (checkpoint every layer)
  bool flash_attention = true;  ///< no s × s attention scores stored

  [[nodiscard]] std::int64_t tokens_per_micro_batch() const { return seq * micro_batch; }
  [[nodiscard]] std::int64_t tokens_per_rank() const { return tokens_per_micro_batch() * micro_batches; }
};

/// Fails with rule planner.workload unless sequence length, micro-batch size and count are positive.
inline void validate(const Workload& w) {
  check(w.seq >= 1 && w.micro_batch >= 1 && w.micro_batches >= 1, "planner.workload",
        "sequence length, micro-batch size and micro-batch count must be at least 1, got seq=", w.seq,
        ", micro-batch=", w.micro_batch, ", micro-batches=", w.micro_batches);
}

/// M from a global batch in sequences: global / (micro_batch × world), which must divide exactly
/// (rule planner.batch).
[[nodiscard]] inline int micro_batches_for(std::int64_t global_batch, std::int64_t micro_batch, int world) {
  check(global_batch >= 1 && micro_batch >= 1, "planner.batch", "global batch ", global_batch,
        " and micro-batch ", micro_batch, " must be at least 1 sequence");
  const std::int64_t per_step = micro_batch * world;
  check(global_batch % per_step == 0, "planner.batch", "global batch of ", global_batch,
        " sequences is not a multiple of micro-batch ", micro_batch, " x ", world, " ranks = ", per_step);
  return static_cast<int>(global_batch / per_step);
}

/// Bytes of activations one layer keeps for its backward (Korthikanti et al. eq. 1, no recompute).
[[nodiscard]] inline double layer_activation_bytes(const ModelSpec& m, const Workload& w) {
  const double sbh = static_cast<double>(w.seq) * static_cast<double>(w.micro_batch) * static_cast<double>(m.hidden);
  const double scores = w.flash_attention ? 0.0
                                          : 5.0 * m.heads * static_cast<double>(w.seq) / static_cast<double>(m.hidden);
  return sbh * (34.0 + scores);
}

/// Peak activation bytes per rank for one micro-batch (see the file comment for the model).
[[nodiscard]] inline double activation_bytes(const ModelSpec& m, const Workload& w) {
  const double sb = static_cast<double>(w.seq) * static_cast<double>(w.micro_batch);
  const double output_side = sb * (4.0 * static_cast<double>(m.hidden) + 4.0 * static_cast<double>(m.vocab));
  const double full_layer = layer_activation_bytes(m, w);
  if (!w.recompute) return m.layers * full_layer + output_side;
  return m.layers * 2.0 * sb * static_cast<double>(m.hidden) + full_layer + output_side;
}

/// Model FLOPs per token (PaLM's convention; what MFU counts).
[[nodiscard]] inline double model_flops_per_token(const ModelSpec& m, const Workload& w) {
  return 6.0 * static_cast<double>(m.params()) +
         12.0 * m.layers * static_cast<double>(m.hidden) * static_cast<double>(w.seq);
}

/// FLOPs per token actually executed: the model FLOPs plus one more forward under recomputation.
[[nodiscard]] inline double executed_flops_per_token(const ModelSpec& m, const Workload& w) {
  const double model = model_flops_per_token(m, w);
  return w.recompute ? model * 4.0 / 3.0 : model;
}

}  // namespace amsp::planner
