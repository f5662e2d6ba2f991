#pragma once
// A kernel that keeps a CUDA stream busy until the host releases it (the NCCL watchdog test puts
// a collective behind it). Compiled by nvcc (nccl_spin_kernel.cu); callable from g++ code.

#include <cuda_runtime_api.h>

namespace amsp::test {

/// Enqueues on `stream` a one-thread kernel that spins until `*release` (host-mapped memory,
/// device pointer) is non-zero or `limit_ns` of GPU wall time passed, whichever comes first: it
/// cannot hang the test on its own.
cudaError_t launch_spin_until_released(const volatile int* release, unsigned long long limit_ns, cudaStream_t stream);

}  // namespace amsp::test
