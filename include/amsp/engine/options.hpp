#pragma once
// What a ShardedOptimizer is told besides its plan: how the optimizer-state shards are carved,
// clipping, overflow handling and gradient averaging.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "amsp/core/error.hpp"
#include "amsp/sharding/layout.hpp"
#include "amsp/sharding/plan.hpp"

namespace amsp {

/// How the optimizer-state shard of a rank is carved out of its parameter shard.
enum class OsLayout {
  /// Intra-tensor: every bucket split evenly; gradients reduced by ReduceScatter, parameters
  /// spread back by AllGather (the least traffic; amsp's default).
  even_split,
  /// Inter-tensor (the paper's choice): each tensor segment of a P shard owned whole by one rank,
  /// greedy by size; gradients reduced to the owner, parameters spread by Broadcast. Keeps
  /// per-tensor state (e.g. FP8 scales) on one rank. Needs s_g = s_p.
  whole_tensor,
};

/// Whether the engine can carve `layout` out of `plan`'s shards: the whole-tensor layout reduces a
/// P shard's gradients whole to each tensor's owner, which needs s_g = s_p. The one definition of
/// the rule: the engine's check (engine.whole_tensor_layout), the planner's search and the
/// tests' plan sweeps ask it.
[[nodiscard]] inline bool layout_supports(OsLayout layout, const Plan& plan) {
  return layout == OsLayout::even_split || plan.g == plan.p;
}

[[nodiscard]] inline std::string_view name_of(OsLayout layout) {
  return layout == OsLayout::even_split ? "even_split" : "whole_tensor";
}
[[nodiscard]] inline OsLayout parse_os_layout(std::string_view text) {
  if (text == "even_split" || text == "even") return OsLayout::even_split;
  if (text == "whole_tensor" || text == "ownership") return OsLayout::whole_tensor;
  fail("engine.os_layout", "unknown optimizer-state layout '", text, "' (expected even_split or whole_tensor)");
}

/// Per-tensor optimizer options, as torch's param_groups or llm.c's weight-decay mask. The fused
/// update of a tensor uses a copy of the engine's rule with lr *= lr_scale and, when
/// weight_decay is false, weight_decay = 0 (rules without such a field accept only the default).
struct ParamGroup {
  float lr_scale = 1.0f;      ///< multiplies the rule's learning rate for the tensor
  bool weight_decay = true;   ///< false: no weight decay for the tensor (biases, norms)

  bool operator==(const ParamGroup&) const = default;
};

/// EngineOptions::gradient_buffers_in_flight's default, which the planner's memory model prices
/// (planner::ScheduleOptions).
inline constexpr int default_gradient_buffers_in_flight = 2;

/// The rule of that count, for the engine and the planner alike: at least 1, or 0 for no bound.
inline void check_gradient_buffers_in_flight(int count) {
  check(count >= 0, "engine.gradient_buffers", "gradient_buffers_in_flight = ", count,
        ": the gradient buffers in flight are a count, at least 1, or 0 for no bound");
}

struct EngineOptions {
  OsLayout os_layout = OsLayout::even_split;
  /// Global-norm clipping threshold over the averaged gradient; 0 disables clipping.
  float max_grad_norm = 0.0f;
  /// Skip the whole step on every rank when any gradient is Inf or NaN (loss-scale overflow).
  bool skip_nonfinite = true;
  /// Divide the summed gradients by world size × micro-batches (DDP's average). Folded into the
  /// gradient scale of the fused update, so it costs no extra pass.
  bool average_gradients = true;
  /// Alignment of every tensor and shard boundary inside a bucket's flat buffer.
  std::size_t alignment_bytes = 64;
  /// Parameter groups by tensor name; tensors not named use ParamGroup{} (docs/engine.md says why a
  /// name map and not a field of TensorSpec). A name that is no tensor of any bucket is an error.
  std::map<std::string, ParamGroup, std::less<>> param_groups;
  /// Whether grad_buffer(b) hands out a zeroed buffer (true: a backward may accumulate into it
  /// with +=, as llm.c's does) or one with unspecified contents that the user overwrites
  /// entirely (false: saves one write pass over the bucket per micro-batch).
  bool zero_grad_buffers = true;
  /// With HostAsync or a device space: how many bucket-sized gradient buffers may wait for or be
  /// in their reduction at once. grad_buffer(b) and reduce_gradients(b, grads) take such a buffer
  /// from a pool wherever the gradients are reduced inside the G group or accumulated over
  /// micro-batches; when this many are in flight they wait on the host for the oldest to be read
  /// (HostAsync), or a device space reuses the oldest of this many once its reduction is done
  /// (user_after its ticket: the staging ring). The pool then holds this many buffers when the
  /// user fills one bucket at a time, however far the backward outruns the reductions (a slow
  /// link); without the bound it grows by a bucket for every bucket it runs ahead, up to the whole
  /// model's gradients, the memory a sharded G saves. 2 (the planner's memory model: the stream
  /// reduces one bucket while the backward writes the next); 0 removes the bound. Negative: rule
  /// engine.gradient_buffers. docs/engine.md, "Gradient buffers in flight".
  int gradient_buffers_in_flight = default_gradient_buffers_in_flight;
  /// Before each collective, every rank agrees on what it issues (operation, bucket, count, dtype,
  /// root, step, micro-batch): a difference is rule comm.collective_mismatch on every rank instead
  /// of a hang or a wrong result. Costs one small all_gather per collective, on its communicator
  /// (docs/reliability.md). The environment variable AMSP_CHECK_COLLECTIVES=1 also turns it on.
  bool check_collectives = false;
  /// Optimizer in backward (PyTorch's optimizer-in-backward): on the last micro-batch, each
  /// bucket's fused update and parameter spread run right after its gradient reduction, in the
  /// backward, instead of all waiting in step() for the global norm. Needs a step that decides
  /// nothing globally: max_grad_norm = 0 and skip_nonfinite = false (rule engine.update_in_backward);
  /// the learning rate and the rest of the rule must be set before the last micro-batch's first
  /// reduce_gradients, and step() takes loss scale 1. Every execution space, CudaAsync included (docs/engine.md).
  bool update_in_backward = false;
};

/// One bucket: the tensors whose collectives are issued together (typically one layer).
struct BucketSpec {
  std::string name;
  std::vector<TensorSpec> tensors;
};

/// What step() did.
struct StepResult {
  bool skipped = false;         ///< a gradient was Inf/NaN: nothing was updated on any rank
  double grad_norm = 0.0;       ///< global L2 norm of the averaged, unscaled gradient (0: not computed)
  float clip_coefficient = 1;   ///< factor the clipping applied (1 when not clipped)
  std::int64_t step = 0;        ///< optimizer steps taken so far (skipped steps do not count)
};

}  // namespace amsp
