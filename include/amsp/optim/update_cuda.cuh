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
// Alignment: the body runs eight elements at a time from the first index at which every buffer is
// 16-byte aligned (shards of 64-byte aligned flat buffers at equal offsets always have one);
// elements before it, after the last full group, or all of them when no such index exists, take
// the one-lane path of the same kernel.

#if !defined(__CUDACC__)
#error "amsp/optim/update_cuda.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

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

template <class R, class G, class P>
__global__ void __launch_bounds__(cuda_block)
    update_kernel(typename R::Coefficients c, float* master, StatePointers<R::state_count> states, const G* grads,
                  P* params, float grad_scale, std::size_t n, std::size_t head, std::size_t vectors,
                  const unsigned* skipped_flag) {
  if (skipped_flag != nullptr && *skipped_flag != 0u) return;
  constexpr int count = R::state_count;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t v = first; v < vectors; v += stride) {
    const std::size_t i = head + v * cuda_lanes;
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
  }
  const std::size_t body_end = head + vectors * cuda_lanes;
  for (std::size_t j = first; j < head + (n - body_end); j += stride) {
    const std::size_t i = j < head ? j : body_end + (j - head);
    float p = master[i];
    float lane[count];
    for (int k = 0; k < count; ++k) lane[k] = states.p[k][i];
    R::apply(c, p, to_float(grads[i]) * grad_scale, lane);
    master[i] = p;
    for (int k = 0; k < count; ++k) states.p[k][i] = lane[k];
    if (params != nullptr) params[i] = from_float<P>(p);
  }
}

}  // namespace detail

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
  const std::size_t n = shard.master.size();
  if (n == 0) return;

  detail::StatePointers<R::state_count> states{};
  for (int k = 0; k < R::state_count; ++k) states.p[k] = shard.states[static_cast<std::size_t>(k)].data();
  P* const params = params_out.empty() ? nullptr : params_out.data();
  std::size_t head = n;
  for (std::size_t h = 0; h < detail::cuda_lanes && h <= n && head == n; ++h) {
    bool aligned = detail::vector_aligned(shard.master.data(), h) && detail::vector_aligned(grads.data(), h) &&
                   detail::vector_aligned(params, h);
    for (int k = 0; k < R::state_count; ++k) aligned = aligned && detail::vector_aligned(states.p[k], h);
    if (aligned) head = h;
  }
  const std::size_t vectors = (n - head) / detail::cuda_lanes;
  const std::size_t items = vectors > 0 ? vectors : n;
  detail::update_kernel<R, G, P><<<detail::grid_for(items), detail::cuda_block, 0, stream>>>(
      c, shard.master.data(), states, grads.data(), params, opt.grad_scale, n, head, vectors,
      opt.skip_nonfinite ? skipped_flag : nullptr);
  amsp::detail::check_cuda(cudaGetLastError(), "cuda.launch", "optimizer update kernel");
}

}  // namespace amsp::optim
