#pragma once
// The fused optimizer update on the GPU: one grid-stride kernel over the flat shard, eight
// elements per thread trip with 16-byte loads and stores, the same element-wise rule as the host
// loop (R::apply with V = float). Stream-ordered, no host synchronisation inside a step.
//
// Non-finite gradients: with skip_nonfinite, find_nonfinite_cuda first writes 0/1 into the
// caller's device word `skipped_flag`, and the update kernel reads it before touching anything, so
// an overflow step leaves master, states and parameters untouched without the host ever waiting.
// The engine reads the flag later (for the loss-scale update and the step counter) or reduces it
// across ranks on the device. An engine whose gradient norm already proved the gradients finite
// passes skip_nonfinite = false and saves the read of the gradients.
//
// Two sources of the step's control, one kernel: by value from the host (StepOptions: the
// coefficients computed on the host) or from device memory (DeviceStepControl: the skip word, the
// gradient scale and the step counter an earlier kernel wrote; the coefficients are then computed
// on the device by the same R::coefficients, once per block). The second is what a device engine
// uses, so that no step waits for the host.
//
// Rounding: the kernel runs R::apply in float like update_host's one-lane path. nvcc contracts
// a * b + c into one FMA by default (--fmad=true), g++ for baseline x86-64 does not, so results
// differ from update_host in the last bit; built with --fmad=false they are the same bits.
//
// Alignment: the body runs eight elements at a time from the first index at which every buffer is
// 16-byte aligned (shards of 64-byte aligned flat buffers at equal offsets always have one);
// elements before it, after the last full group, or all of them when no such index exists, take
// the one-lane path of the same kernel.

#if !defined(__CUDACC__)
#error "amsp/optim/update_cuda.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/optim/cuda_lanes.cuh"
#include "amsp/optim/grad_norm_cuda.cuh"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

namespace detail {

template <int Count>
struct StatePointers {
  float* p[Count];
};

/// The step's control as the host computed it: coefficients and grad_scale by value, and the
/// optional skip word that find_nonfinite_cuda fills.
template <class R>
struct ControlByValue {
  typename R::Coefficients c;
  float scale;
  const unsigned* skipped_flag;  // null: never skip
  __device__ bool skipped() const { return skipped_flag != nullptr && *skipped_flag != 0u; }
  __device__ typename R::Coefficients coefficients() const { return c; }
  __device__ float grad_scale() const { return scale; }
};

/// The step's control left in device memory by an earlier kernel on the stream (the engine's
/// device step decision, amsp/engine/device_ops.cuh): the skip word, the gradient scale and the
/// step counter, from which the rule's coefficients are computed on the device with the rule's own
/// (host and device) code. Pointers, so that this layer does not depend on the engine's struct.
template <class R>
struct ControlInDeviceMemory {
  R rule;
  const unsigned* skipped_flag;
  const float* scale;
  const std::int64_t* step;
  __device__ bool skipped() const { return *skipped_flag != 0u; }
  __device__ typename R::Coefficients coefficients() const { return rule.coefficients(*step); }
  __device__ float grad_scale() const { return *scale; }
};

/// The step's coefficients, computed by one thread per block and shared through shared memory
/// (a rule's coefficients may cost a few double-precision pow calls: once per block, not per thread).
template <class R, class Control>
__device__ __forceinline__ typename R::Coefficients block_coefficients(const Control& control) {
  using C = typename R::Coefficients;
  __shared__ alignas(C) unsigned char storage[sizeof(C)];
  if (threadIdx.x == 0) {
    const C c = control.coefficients();
    std::memcpy(storage, &c, sizeof(C));
  }
  __syncthreads();
  C c;
  std::memcpy(&c, storage, sizeof(C));
  return c;
}

template <class R, class G, class P, class Control>
__global__ void __launch_bounds__(cuda_block)
    update_kernel(Control control, float* master, StatePointers<R::state_count> states, const G* grads, P* params,
                  std::size_t n, std::size_t head, std::size_t vectors) {
  if (control.skipped()) return;  // the same word for every thread: the whole grid returns
  const typename R::Coefficients c = block_coefficients<R>(control);
  const float grad_scale = control.grad_scale();
  constexpr int count = R::state_count;
  walk_lane_groups(
      n, head, vectors,
      [&](std::size_t i) {
        float p[cuda_lanes], g[cuda_lanes], s[count][cuda_lanes];
        load8(master + i, p);
        load8(grads + i, g);
        for (int k = 0; k < count; ++k) load8(states.p[k] + i, s[k]);
        for (int l = 0; l < cuda_lanes; ++l) {
          float lane[count];
          for (int k = 0; k < count; ++k) lane[k] = s[k][l];
          R::apply(c, p[l], g[l] * grad_scale, lane);
          for (int k = 0; k < count; ++k) s[k][l] = lane[k];
        }
        store8(master + i, p);
        for (int k = 0; k < count; ++k) store8(states.p[k] + i, s[k]);
        if (params != nullptr) store8(params + i, p);
      },
      [&](std::size_t i) {
        float p = master[i];
        float lane[count];
        for (int k = 0; k < count; ++k) lane[k] = states.p[k][i];
        R::apply(c, p, to_float(grads[i]) * grad_scale, lane);
        master[i] = p;
        for (int k = 0; k < count; ++k) states.p[k][i] = lane[k];
        if (params != nullptr) params[i] = from_float<P>(p);
      });
}

/// Enqueues update_kernel over the shard (sizes already checked; params may be null): the
/// eight-lane body from the first index at which every buffer is 16-byte aligned.
template <class R, class G, class P, class Control>
void launch_update(const Control& control, const ShardState<R>& shard, const G* grads, P* params,
                   cudaStream_t stream) {
  const std::size_t n = shard.master.size();
  if (n == 0) return;
  StatePointers<R::state_count> states{};
  for (int k = 0; k < R::state_count; ++k) states.p[k] = shard.states[static_cast<std::size_t>(k)].data();
  const std::size_t head = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return vector_head(n, shard.master.data(), grads, params, static_cast<const float*>(states.p[K])...);
  }(std::make_index_sequence<R::state_count>{});
  const std::size_t vectors = lane_groups(n, head);
  update_kernel<R, G, P, Control><<<grid_for(lane_items(n, vectors)), cuda_block, 0, stream>>>(
      control, shard.master.data(), states, grads, params, n, head, vectors);
  amsp::detail::check_cuda(cudaGetLastError(), "cuda.launch", "optimizer update kernel");
}

}  // namespace detail

/// Where a device update finds the step's control in device memory, written by earlier work on
/// the same stream (the engine's device step decision): `skipped` (nonzero: touch nothing),
/// `grad_scale` (multiplied into every gradient) and `step` (the 1-based step the rule's
/// coefficients are computed for, on the device, by R::coefficients: the host's code).
struct DeviceStepControl {
  const unsigned* skipped = nullptr;
  const float* grad_scale = nullptr;
  const std::int64_t* step = nullptr;
};

/// One fused update of a device shard with rule R: the views in `shard`, `grads` (G = float or
/// bf16) and `params_out` (P = float or bf16, or empty) point to device memory. Enqueued on
/// `stream`; returns without waiting. With opt.skip_nonfinite, `skipped_flag` (a device word)
/// receives 1 if the step was skipped for Inf/NaN gradients and 0 otherwise; without it the flag
/// may be null and is not touched. opt.threads is ignored. Validation (sizes, step, grad_scale,
/// hyperparameters: the rules of update_host) throws amsp::error before anything is enqueued.
template <update_rule R, element_type G, element_type P>
  requires grad_element<G> && param_element<P>
void update_cuda(const R& rule, const ShardState<R>& shard, std::span<const G> grads, std::span<P> params_out,
                 const StepOptions& opt, unsigned* skipped_flag, cudaStream_t stream) {
  detail::check_step_inputs(rule, shard, grads.size(), params_out.size(), opt);
  check(!opt.skip_nonfinite || skipped_flag != nullptr, "optim.cuda_flag",
        "skip_nonfinite needs a device flag word to report the skip in");
  const typename R::Coefficients c = rule.coefficients(opt.step);
  if (opt.skip_nonfinite) find_nonfinite_cuda(grads, skipped_flag, stream);

  detail::launch_update<R>(detail::ControlByValue<R>{c, opt.grad_scale, opt.skip_nonfinite ? skipped_flag : nullptr},
                           shard, grads.data(), params_out.empty() ? nullptr : params_out.data(), stream);
}

/// The fused update with the step's control in device memory (see DeviceStepControl): nothing is
/// read on the host, so the engine enqueues its whole step without waiting for the decision. A
/// skipped step returns from the kernel before any load. The host checks what it can (sizes,
/// hyperparameters, non-null control words) and throws amsp::error before enqueuing; the step
/// counter itself is not checked (it lives on the device; the engine's starts applied steps at 1).
/// `rule` is taken by value into the kernel: it must be trivially copyable (the built-in rules are).
template <update_rule R, element_type G, element_type P>
  requires grad_element<G> && param_element<P>
void update_cuda(const R& rule, const ShardState<R>& shard, std::span<const G> grads, std::span<P> params_out,
                 const DeviceStepControl& control, cudaStream_t stream) {
  static_assert(std::is_trivially_copyable_v<R>, "a rule updated on the device is passed to the kernel by value");
  detail::check_step_inputs(rule, shard, grads.size(), params_out.size(), StepOptions{});
  check(control.skipped != nullptr && control.grad_scale != nullptr && control.step != nullptr, "optim.cuda_flag",
        "the device step control needs its skipped, grad_scale and step words");
  detail::launch_update<R>(detail::ControlInDeviceMemory<R>{rule, control.skipped, control.grad_scale, control.step},
                           shard, grads.data(), params_out.empty() ? nullptr : params_out.data(), stream);
}

}  // namespace amsp::optim
