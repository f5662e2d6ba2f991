#pragma once
// Memory per rank of a plan: the model states, the scratch amsp's engine allocates for them,
// activations (workload.hpp) and the cluster's reserve.
//
// Model states (the AMSP paper, arXiv 2311.00257: 2Φ/s_p + 2Φ/s_g + 12Φ/s_os with bf16
// parameters and gradients and Adam): the P store at the parameters' bytes, the G store at the
// gradients' bytes, fp32 master weights, m and v.
//
// Scratch (the paper gives none), as the engine allocates it for a user who gathers one unit and
// prefetches the next and writes one unit's gradients at a time, with n the largest unit's
// parameters (the engine's pools of bounded use allocate every buffer at that size:
// amsp/engine/buffer_pool.hpp):
//   - gathered parameters, when s_p > 1: the unit being computed and the prefetched one, 2n
//     parameters; when gathered parameters are kept from forward to backward, every unit, the
//     first two (in forward order) in buffers of n and the others at their own size.
//   - gradient staging, when s_g > 1 or after the first of several micro-batches (whose gradients
//     are added into the G store): the engine's gradient buffers in flight, of n gradients each
//     (ScheduleOptions::gradient_buffers_in_flight; the whole model's gradients without a bound).
//   - fp32 OS-shard gradients, when gradients are narrower than fp32 or the layout is
//     whole-tensor: 4Φ/s_os, kept from the reduction to the update (the engine reduces in fp32).
//   - fp32 reduction buffers, one chain at a time: the widened staged gradient (n, gradients
//     narrower than fp32), a reduction stage's G-shard result or the widened G store (n/s_g) and
//     the P-shard gradient between the P group and the G split (n/s_p).
// Shard sizes are taken as exact fractions: padding to equal shards adds at most a few elements
// per tensor, far below the precision of the rest of the model. tests/engine/
// test_memory_parity.cpp checks every part against the engine's own report.

#include <algorithm>
#include <span>
#include <vector>

#include "amsp/planner/schedule_options.hpp"
#include "amsp/planner/model.hpp"
#include "amsp/planner/workload.hpp"
#include "amsp/sharding/plan.hpp"

namespace amsp::planner {

struct MemoryBreakdown {
  double params = 0;            ///< the P store: Φ/s_p parameters
  double grads = 0;             ///< the G store: Φ/s_g gradients
  double optimizer_states = 0;  ///< 12Φ/s_os: fp32 master weights, Adam m and v
  double activations = 0;
  // The engine's scratch, as its MemoryReport names the parts:
  double fp32_os_gradients = 0;  ///< os_gradients: 4Φ/s_os (narrow gradients or whole-tensor layout)
  double gathered_params = 0;    ///< gather_scratch
  double gradient_staging = 0;   ///< gradient_staging
  double reduction_buffers = 0;  ///< reduction_scratch
  double reserved = 0;

  [[nodiscard]] double states() const { return params + grads + optimizer_states; }
  /// The engine's buffers: gathered parameters, gradient staging, fp32 reduction buffers.
  [[nodiscard]] double buffers() const { return gathered_params + gradient_staging + reduction_buffers; }
  /// What the engine allocates (its MemoryReport's model_states() + scratch).
  [[nodiscard]] double engine() const { return states() + fp32_os_gradients + buffers(); }
  [[nodiscard]] double total() const { return engine() + activations + reserved; }
};

/// The engine's memory per rank for `plan` with the model cut into `units` (the engine's buckets)
/// and `micro_batches` per step: states and scratch, no activations.
[[nodiscard]] inline MemoryBreakdown engine_memory_per_rank(const Plan& plan, std::span<const Module> units,
                                                            int micro_batches, const ScheduleOptions& o) {
  double phi = 0, n = 0;
  for (const Module& u : units) {
    phi += static_cast<double>(u.params);
    n = std::max(n, static_cast<double>(u.params));
  }
  const double s_p = plan.p.size(), s_g = plan.g.size(), s_os = plan.os.size();
  const bool narrow_grads = o.grad_wire_bytes < 4;
  MemoryBreakdown mem;
  mem.params = o.param_wire_bytes * phi / s_p;
  mem.grads = o.grad_wire_bytes * phi / s_g;
  mem.optimizer_states = 12.0 * phi / s_os;
  if (narrow_grads || o.os_layout == OsLayout::whole_tensor) mem.fp32_os_gradients = 4.0 * phi / s_os;
  const double unit_count = static_cast<double>(units.size());
  if (s_p > 1) {
    double gathered = std::min(2.0, unit_count) * n;
    if (!o.reshard_after_forward)
      for (std::size_t i = 2; i < units.size(); ++i) gathered += static_cast<double>(units[i].params);
    mem.gathered_params = gathered * o.param_wire_bytes;
  }
  const bool staged = s_g > 1 || micro_batches > 1;
  if (staged) {
    const int k = o.gradient_buffers_in_flight;
    const double in_flight = k > 0 ? std::min<double>(k, unit_count) * n : phi;
    mem.gradient_staging = in_flight * o.grad_wire_bytes;
  }
  double reduction = 0;
  if (staged && narrow_grads) reduction += n;                                                 // staged, widened
  if (narrow_grads || (s_g > 1 && micro_batches > 1)) reduction += n / s_g;                  // the G shard
  if (s_p > 1 && s_g > s_p) reduction += n / s_p;  // the P shard, between the P group and the G split
  mem.reduction_buffers = 4.0 * reduction;
  return mem;
}

/// Memory per rank of `plan` (see the file comment for the model).
[[nodiscard]] inline MemoryBreakdown memory_per_rank(const Plan& plan, const ModelSpec& m,
                                                     const Workload& w, const ScheduleOptions& o,
                                                     double reserved_bytes = 0) {
  const std::vector<Module> units = m.units(o.granularity);
  MemoryBreakdown mem = engine_memory_per_rank(plan, units, w.micro_batches, o);
  mem.activations = activation_bytes(m, w);
  mem.reserved = reserved_bytes;
  return mem;
}

}  // namespace amsp::planner
