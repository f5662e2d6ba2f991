#pragma once
// Global-gradient-norm support on the GPU: the sum of squares of a device gradient shard (CUB's
// DeviceReduce::TransformReduce, accumulated in double, deterministic run to run) and a finite
// check that leaves its answer in device memory. Both are stream-ordered and never synchronise
// with the host; the engine reduces the partial sums across ranks itself.

#if !defined(__CUDACC__)
#error "amsp/optim/grad_norm_cuda.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <span>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/optim/cuda_lanes.cuh"
#include "amsp/optim/update_rule.hpp"

namespace amsp::optim {

namespace detail {

template <class G>
struct SquareAsDouble {
  __device__ double operator()(G x) const {
    const double d = static_cast<double>(to_float(x));
    return d * d;
  }
};

template <class G>
__global__ void __launch_bounds__(cuda_block)
    find_nonfinite_kernel(const G* grads, std::size_t n, std::size_t head, std::size_t vectors, unsigned* flag) {
  std::uint32_t worst = 0;
  walk_lane_groups(
      n, head, vectors,
      [&](std::size_t i) {
        float g[cuda_lanes];
        load8(grads + i, g);
        for (float x : g) worst = max(worst, __float_as_uint(x) & 0x7fffffffu);
      },
      [&](std::size_t i) { worst = max(worst, __float_as_uint(to_float(grads[i])) & 0x7fffffffu); });
  if (worst >= 0x7f800000u) *flag = 1u;  // every writer stores the same value
}

}  // namespace detail

/// Bytes of device workspace sum_of_squares_cuda needs for n gradients of type G.
template <grad_element G>
[[nodiscard]] std::size_t sum_of_squares_cuda_workspace(std::size_t n) {
  std::size_t bytes = 0;
  amsp::detail::check_cuda(cub::DeviceReduce::TransformReduce(nullptr, bytes, static_cast<const G*>(nullptr),
                                                              static_cast<double*>(nullptr), n,
                                                              cuda::std::plus<double>{},
                                                              detail::SquareAsDouble<G>{}, 0.0, cudaStream_t{}),
                           "cuda.runtime", "cub::DeviceReduce::TransformReduce (workspace query)");
  return bytes;
}

/// Writes the sum of squares (double; NaN and Inf propagate) of a device gradient shard to the
/// device double `*result`, stream-ordered. `workspace` holds at least
/// sum_of_squares_cuda_workspace<G>(grads.size()) bytes of device memory.
template <grad_element G>
void sum_of_squares_cuda(std::span<const G> grads, double* result, void* workspace, std::size_t workspace_bytes,
                         cudaStream_t stream) {
  const std::size_t needed = sum_of_squares_cuda_workspace<G>(grads.size());
  check(workspace_bytes >= needed, "optim.cuda_workspace", "sum_of_squares_cuda needs ", needed,
        " bytes of workspace but got ", workspace_bytes);
  amsp::detail::check_cuda(cub::DeviceReduce::TransformReduce(workspace, workspace_bytes, grads.data(), result,
                                                              grads.size(), cuda::std::plus<double>{},
                                                              detail::SquareAsDouble<G>{}, 0.0, stream),
                           "cuda.launch", "cub::DeviceReduce::TransformReduce");
}

/// Sets the device word `*flag` to 1 if the device gradient shard holds an Inf or NaN and to 0
/// otherwise, stream-ordered (a memset and one kernel; nothing waits on the host).
template <grad_element G>
void find_nonfinite_cuda(std::span<const G> grads, unsigned* flag, cudaStream_t stream) {
  check(flag != nullptr, "optim.cuda_flag", "find_nonfinite_cuda needs a device flag word");
  amsp::detail::check_cuda(cudaMemsetAsync(flag, 0, sizeof(unsigned), stream), "cuda.runtime", "cudaMemsetAsync");
  const std::size_t n = grads.size();
  if (n == 0) return;
  const std::size_t head = detail::vector_head(n, grads.data());
  const std::size_t vectors = detail::lane_groups(n, head);
  detail::find_nonfinite_kernel<G><<<detail::grid_for(detail::lane_items(n, vectors)), detail::cuda_block, 0, stream>>>(
      grads.data(), n, head, vectors, flag);
  amsp::detail::check_cuda(cudaGetLastError(), "cuda.launch", "find_nonfinite_kernel");
}

}  // namespace amsp::optim
