// See nccl_spin_kernel.hpp.
#include "nccl_spin_kernel.hpp"

namespace amsp::test {
namespace {

__device__ unsigned long long global_time_ns() {
  unsigned long long t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_until_released(const volatile int* release, unsigned long long limit_ns) {
  const unsigned long long start = global_time_ns();
  while (*release == 0 && global_time_ns() - start < limit_ns) __nanosleep(1000);
}

}  // namespace

cudaError_t launch_spin_until_released(const volatile int* release, unsigned long long limit_ns, cudaStream_t stream) {
  spin_until_released<<<1, 1, 0, stream>>>(release, limit_ns);
  return cudaGetLastError();
}

}  // namespace amsp::test
