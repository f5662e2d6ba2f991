#pragma once
// Memory per rank of a plan (the AMSP paper, arXiv 2311.00257): model states 2Φ/s_p + 2Φ/s_g +
// 12Φ/s_os (bf16 parameters and gradients, fp32 master weights + Adam m and v), activations
// (workload.hpp), the engine's communication buffers, and the cluster's reserve.
//
// Buffer model (the paper gives none; this is what the engine's schedule needs at its peak):
//   - gathered parameters, when s_p > 1: the layer being computed and the prefetched next one,
//     2 units of unsharded bf16 weights, where a unit is the larger of a transformer layer and the
//     embedding (which is gathered whole). Without resharding after forward, the whole gathered
//     model (2Φ) stays instead.
//   - gradient staging, when s_g > 1: the user writes a unit's full gradient into a staging buffer
//     that is reduce-scattered while the next unit's backward writes another: the engine's bound
//     on such buffers in flight (ScheduleOptions::gradient_buffers_in_flight, 2 by default) units,
//     the whole model without a bound. With s_g = 1 gradients accumulate in place into the
//     unsharded G.
//   - reduction buckets, when the last micro-batch reduces gradients further (s_os > s_g or OS
//     replicated across groups): two buckets in flight.
// Shard sizes are taken as exact fractions: padding to equal shards adds at most a few elements
// per tensor, far below the precision of the rest of the model.

#include <algorithm>

#include "amsp/planner/schedule_options.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/planner/workload.hpp"
#include "amsp/sharding/plan.hpp"

namespace amsp::planner {

struct MemoryBreakdown {
  double params = 0;            ///< 2Φ/s_p
  double grads = 0;             ///< 2Φ/s_g
  double optimizer_states = 0;  ///< 12Φ/s_os
  double activations = 0;
  double buffers = 0;
  double reserved = 0;

  [[nodiscard]] double states() const { return params + grads + optimizer_states; }
  [[nodiscard]] double total() const { return states() + activations + buffers + reserved; }
};

/// Parameters in the largest unit the engine gathers or stages at once (a layer or the embedding).
[[nodiscard]] inline double largest_unit_params(const ModelSpec& m) {
  return static_cast<double>(std::max(m.params_per_layer(), m.embedding_params()));
}

/// Memory per rank of `plan` on a world of `world` ranks (see the file comment for the model).
[[nodiscard]] inline MemoryBreakdown memory_per_rank(const Plan& plan, int world, const ModelSpec& m,
                                                     const Workload& w, const ScheduleOptions& o,
                                                     double reserved_bytes = 0) {
  const double phi = static_cast<double>(m.params());
  MemoryBreakdown mem;
  mem.params = 2.0 * phi / plan.p.size();
  mem.grads = 2.0 * phi / plan.g.size();
  mem.optimizer_states = 12.0 * phi / plan.os.size();
  mem.activations = activation_bytes(m, w);
  const double unit = largest_unit_params(m);
  if (plan.p.size() > 1) mem.buffers += o.reshard_after_forward ? 2.0 * unit * o.param_wire_bytes : 2.0 * phi;
  if (plan.g.size() > 1)
    mem.buffers += (o.gradient_buffers_in_flight > 0 ? o.gradient_buffers_in_flight * unit : phi) * o.grad_wire_bytes;
  if (plan.os.size() > plan.g.size() || plan.os.size() < world) mem.buffers += 2.0 * o.bucket_bytes;
  mem.reserved = reserved_bytes;
  return mem;
}

}  // namespace amsp::planner
