#pragma once
// The one check of a CUDA runtime call: a failure becomes an amsp::error for the caller's rule
// (cuda.malloc, cuda.launch, comm.cuda, ...), naming the call and CUDA's own message; and, built
// on it, loading a kernel into the current context ahead of its first launch. Tier 2:
// host code calling the CUDA runtime (target amsp::cuda); nvcc and g++ both compile it.

#include <cuda_runtime_api.h>

#include <string_view>

#include "amsp/core/error.hpp"

namespace amsp::detail {

/// Throws amsp::error (rule `rule`) for a failed CUDA runtime call, e.g. "cudaMalloc of 4096 bytes
/// failed: out of memory (cudaErrorMemoryAllocation)".
template <class... Parts>
void check_cuda(cudaError_t status, std::string_view rule, const Parts&... what) {
  if (status != cudaSuccess) [[unlikely]] {
    (void)cudaGetLastError();  // reset a non-sticky error so the next call is not blamed for it
    fail(rule, what..., " failed: ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
  }
}

/// Loads `kernel` (a __global__ function's address) into the current context now rather than at
/// its first launch, which CUDA's lazy loading may make synchronise the whole context:
/// cudaFuncGetAttributes needs the loaded function.
inline void load_cuda_kernel(const void* kernel, std::string_view rule, std::string_view name) {
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, kernel), rule, "cudaFuncGetAttributes (loading ", name, ")");
}

}  // namespace amsp::detail
