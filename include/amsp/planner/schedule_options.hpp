#pragma once
// The settings of the engine's schedule that change what a plan costs: the optimizer-state layout
// (which decides how gradients reach their owners and how updated parameters come back), whether
// gathered parameters are kept between forward and backward, the bytes per element on the wire,
// the unit of gathering, and the paper's bucket U. Shared by the memory and the communication
// models so that both price the same schedule.

#include "amsp/core/error.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/planner/model.hpp"

namespace amsp::planner {

struct ScheduleOptions {
  /// even_split: ReduceScatter gradients to OS shards, AllGather updated parameters (amsp's
  /// default); whole_tensor: Reduce each tensor segment to its owner and Broadcast it back (the
  /// paper's inter-tensor layout; needs s_g = s_p, as in the engine).
  OsLayout os_layout = OsLayout::even_split;
  /// Free gathered parameters after a unit's forward and gather again for its backward (two
  /// AllGathers per micro-batch, as the paper and ZeRO-3 do). false keeps them: one AllGather, but
  /// the whole unsharded model stays in memory.
  bool reshard_after_forward = true;
  /// The unit gathered and reduced at once (the engine's bucket).
  Granularity granularity = Granularity::layer;
  double param_wire_bytes = 2;  ///< bf16 parameters
  /// bf16 gradients, as the paper reduces them. amsp's engine reduces in fp32 by default (4). The
  /// memory model also takes it as the gradients' dtype (the G store, the staging), and below 4 adds
  /// the fp32 OS-shard gradients the engine then keeps.
  double grad_wire_bytes = 2;
  /// The paper's U: bucket of the gradient AllReduces in T_g and T_os0 (PyTorch DDP's 25 MB).
  double bucket_bytes = 25e6;
  /// The engine's EngineOptions::gradient_buffers_in_flight: the gradient staging buffers a rank
  /// holds when G is sharded (0: no bound, priced as the whole model's gradients).
  int gradient_buffers_in_flight = default_gradient_buffers_in_flight;
};

/// Fails with rule planner.schedule unless the bucket and the wire sizes are positive, and with
/// the engine's rule (engine.gradient_buffers) unless the gradient buffers in flight are a count.
inline void validate(const ScheduleOptions& o) {
  check(o.bucket_bytes > 0 && o.param_wire_bytes > 0 && o.grad_wire_bytes > 0, "planner.schedule",
        "bucket and wire element sizes must be positive, got bucket ", o.bucket_bytes, " bytes, params ",
        o.param_wire_bytes, ", grads ", o.grad_wire_bytes, " bytes per element");
  check_gradient_buffers_in_flight(o.gradient_buffers_in_flight);
}

}  // namespace amsp::planner
