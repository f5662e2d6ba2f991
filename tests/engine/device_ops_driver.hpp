#pragma once
// Plain host functions, defined in device_ops_driver.cu (nvcc), that run the engine's device
// operations (amsp/engine/device_ops.cuh) on device copies of host data and copy the results back.
// The doctest cases live in test_device_ops.cpp (g++): doctest's macros misbehave under nvcc.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "amsp/core/dtype.hpp"
#include "amsp/engine/options.hpp"
#include "amsp/optim/update_rule.hpp"

namespace amsp_test {

/// True when a CUDA device is present.
bool device_ops_gpu_present();

/// The fields of amsp::device_ops::StepControl, as host values (the driver converts field by field).
struct ControlValues {
  double sum_sq = 0.0;
  double grad_norm = 0.0;
  float clip_coefficient = 1.0f;
  float grad_scale = 1.0f;
  unsigned skipped = 0;
  std::int64_t step = 0;
};

/// device_ops::convert over a device copy of `in` placed `offset` elements into its allocation.
template <class From, class To>
std::vector<To> convert_on_device(std::span<const From> in, std::size_t offset);

/// device_ops::accumulate(g, z, first) on device copies, each `offset` elements into its
/// allocation; returns the new g.
template <class G>
std::vector<G> accumulate_on_device(std::span<const G> g, std::span<const float> z, bool first, std::size_t offset);

/// A control holding `before`, then device_ops::add_sum_of_squares of each part in turn (one
/// workspace sized for the largest part, as an engine sizes it); returns the control. With
/// `reset_first`, reset_sum_of_squares runs before the first part.
template <class G>
ControlValues add_sum_of_squares_on_device(const ControlValues& before, const std::vector<std::vector<G>>& parts,
                                           bool reset_first);

/// device_ops::decide_step on a control holding `before`; returns the control.
ControlValues decide_on_device(const ControlValues& before, double average, float loss_scale, float max_grad_norm,
                               bool skip_nonfinite);

/// On a control holding `before`: device_ops::set_step(steps), then `sum_sq` copied to
/// device_ops::sum_sq_word (as the engine's AllReduce writes it); returns the control.
ControlValues set_step_and_sum_on_device(const ControlValues& before, std::int64_t steps, double sum_sq);

/// device_ops::step_result of a control copied to the host.
amsp::StepResult step_result_of(const ControlValues& control);

/// device_ops::update with a control holding `control` (unchanged by the update): copies the shard,
/// gradients and parameters (each `offset` elements into its allocation; params may be empty)
/// to the device, updates, copies back.
template <class R, class P>
void update_on_device(const R& rule, const amsp::optim::ShardState<R>& shard, std::span<const float> grads,
                      std::span<P> params, const ControlValues& control, std::size_t offset);

/// One step as a CUDA space enqueues it, on one stream with no host wait in between:
/// reset_sum_of_squares, add_sum_of_squares of the gradients, decide_step, update; returns the
/// control after the step. The shard, gradients and parameters as in update_on_device (offset 0).
template <class R, class P>
ControlValues step_on_device(const R& rule, const amsp::optim::ShardState<R>& shard, std::span<const float> grads,
                             std::span<P> params, const ControlValues& before, double average, float loss_scale,
                             float max_grad_norm, bool skip_nonfinite);

}  // namespace amsp_test
