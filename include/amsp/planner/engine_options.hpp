#pragma once
// The engine settings that change what a plan costs: how updated parameters are spread, whether
// gathered parameters are kept between forward and backward, the bucket of the last-micro-batch
// gradient reduction, and the bytes per element on the wire. Shared by the memory and the
// communication models so that both price the same schedule.

#include "amsp/core/error.hpp"

namespace amsp::planner {

/// How the owner of an updated parameter slice sends it back to the ranks sharing its P shard.
enum class SpreadKind {
  all_gather,  ///< intra-tensor even split: one AllGather per module over the spread group
  broadcast,   ///< inter-tensor whole-tensor ownership (the paper): one Broadcast per module
};

struct EngineOptions {
  SpreadKind spread = SpreadKind::all_gather;
  /// Free gathered parameters after a layer's forward and gather again for its backward (two
  /// AllGathers per micro-batch, as the paper and ZeRO-3 do). false keeps them: one AllGather, but
  /// the whole unsharded model stays in memory.
  bool reshard_after_forward = true;
  /// The gradient reduction of the last micro-batch runs in buckets of this many bytes (PyTorch
  /// DDP's default, 25 MB); it also sets the paper formulas' U.
  double bucket_bytes = 25e6;
  double param_wire_bytes = 2;  ///< bf16 parameters
  double grad_wire_bytes = 2;   ///< bf16 gradients, as the paper reduces them
};

/// Fails with rule planner.engine_options unless the bucket and the wire sizes are positive.
inline void validate(const EngineOptions& o) {
  check(o.bucket_bytes > 0 && o.param_wire_bytes > 0 && o.grad_wire_bytes > 0, "planner.engine_options",
        "bucket and wire element sizes must be positive, got bucket ", o.bucket_bytes, " bytes, params ",
        o.param_wire_bytes, ", grads ", o.grad_wire_bytes, " bytes per element");
}

}  // namespace amsp::planner
