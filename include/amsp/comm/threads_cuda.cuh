#pragma once
// CUDA device memory for the threads backend: several thread ranks on one GPU run collectives on
// device buffers (one rank per GPU is the NCCL backend's job). Include this header in one .cu file
// of the program (compiled by nvcc, linked with amsp::cuda); its static initialiser installs the
// device data mover, and from then on every threads collective looks up where its buffers live
// (cudaPointerGetAttributes) and moves device buffers on the GPU. Host-only programs never see any
// of this: amsp/comm/threads.hpp only holds a null hook (detail/threads_device_hook.hpp).
//
// A rank's data phase on device buffers is its own part of the same partition as on the host
// (detail/threads_data.hpp): cudaMemcpyAsync between the ranks' buffers and one reduction kernel,
// enqueued on the calling thread's per-thread default stream (cudaStreamPerThread) of the buffers'
// device, then that stream is synchronised before the rank arrives at the end-of-data barrier, so
// no rank returns while a peer's copy or kernel may still touch its buffers. The kernel reduces
// every element exactly as the host loop does (rank order, in the accumulation type, one rounding:
// the same widen / round_to conversions), so both paths give the same bits.
//
// Contract: the caller's writes to its buffers are complete when it calls (synchronous copies,
// a synchronised stream, or work on the legacy default stream, which the per-thread stream waits
// for); the results are complete in device memory when the call returns (async: when the handle
// completes).

#if !defined(__CUDACC__)
#error "amsp/comm/threads_cuda.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <exception>

#include "amsp/comm/detail/host_reduce.hpp"
#include "amsp/comm/detail/threads_data.hpp"
#include "amsp/comm/detail/threads_device_hook.hpp"
#include "amsp/comm/detail/threads_group.hpp"
#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/cuda_check.hpp"
#include "amsp/core/dtype.hpp"

namespace amsp::comm::detail {

inline constexpr int threads_cuda_block = 256;
/// Grid cap of the grid-stride reduction: enough resident blocks to saturate an H200's memory.
inline constexpr std::size_t threads_cuda_max_blocks = 4096;

/// Every input and output pointer of one reduction, passed by value as the kernel's parameters
/// (2 KiB for 128 ranks, within the 4 KiB parameter limit).
template <class T>
struct ThreadsReducePointers {
  const T* in[threads_device_max_ranks];
  T* out[threads_device_max_ranks];
};

/// out[k][i] = op(in[0][i], ..., in[n_in-1][i]) for every k: accumulate in rank order, divide for
/// avg, round once. Each thread reads all inputs of element i before writing element i, so an
/// output may alias an input element for element (in place).
template <class T>
__global__ void __launch_bounds__(threads_cuda_block)
    threads_reduce_kernel(ThreadsReducePointers<T> p, int n_in, int n_out, std::size_t count, bool avg) {
  using Acc = accumulator_t<T>;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    Acc acc = widen(p.in[0][i]);
    for (int j = 1; j < n_in; ++j) acc += widen(p.in[j][i]);
    if (avg) acc /= static_cast<Acc>(n_in);
    const T result = round_to<T>(acc);
    for (int k = 0; k < n_out; ++k) p.out[k][i] = result;
  }
}

/// The device Mover of run_collective: stream-ordered copies and reductions on `stream`.
template <class T>
class CudaMover {
public:
  explicit CudaMover(cudaStream_t stream) : stream_(stream) {}

  void copy(T* dst, const T* src, std::size_t count) const {
    if (count == 0 || dst == src) return;
    amsp::detail::check_cuda(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDefault, stream_), "comm.cuda",
                             "cudaMemcpyAsync of ", count * sizeof(T), " bytes between the ranks' buffers");
  }

  // n_in and n_out are at most the world size, which validate_slots bounds by
  // threads_device_max_ranks before any data moves.
  void reduce(T* const* outputs, int n_out, const T* const* inputs, int n_in, std::size_t count, reduce_op op) const {
    if (count == 0) return;
    ThreadsReducePointers<T> p{};
    std::copy(inputs, inputs + n_in, p.in);
    std::copy(outputs, outputs + n_out, p.out);
    const std::size_t blocks = std::min((count + threads_cuda_block - 1) / threads_cuda_block, threads_cuda_max_blocks);
    threads_reduce_kernel<T><<<static_cast<unsigned>(blocks), threads_cuda_block, 0, stream_>>>(p, n_in, n_out, count,
                                                                                               op == reduce_op::avg);
    amsp::detail::check_cuda(cudaGetLastError(), "comm.cuda", "the launch of the threads backend's reduction kernel");
  }

private:
  cudaStream_t stream_;
};

/// DeviceMover::locate: device and managed memory are on the device; anything else (including
/// any failure, e.g. no CUDA device at all) is host memory.
inline BufferPlace locate_cuda_buffer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: do not let the next CUDA call report it
    return {};
  }
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) return {memory_kind::cuda, a.device};
  return {};
}

/// DeviceMover::move: this rank's part on the buffers' device, then a stream synchronisation
/// that happens even when enqueueing failed half way.
inline void move_cuda_buffers(const ThreadsGroup& g, int rank) {
  const ThreadsSlot& mine = g.slots[static_cast<std::size_t>(rank)];
  const int device = mine.send_place.device;
  int previous = 0;
  amsp::detail::check_cuda(cudaGetDevice(&previous), "comm.cuda", "cudaGetDevice");
  if (previous != device) amsp::detail::check_cuda(cudaSetDevice(device), "comm.cuda", "cudaSetDevice(", device, ")");
  std::exception_ptr failure;
  try {
    visit_dtype(mine.type, [&](auto element) {
      using T = decltype(element);
      const CudaMover<T> mover(cudaStreamPerThread);
      run_collective<T>(g, rank, mover);
    });
  } catch (...) {
    failure = std::current_exception();
  }
  const cudaError_t synced = cudaStreamSynchronize(cudaStreamPerThread);
  if (previous != device) (void)cudaSetDevice(previous);  // the caller's choice, restored best-effort
  if (failure) std::rethrow_exception(failure);
  amsp::detail::check_cuda(synced, "comm.cuda", "cudaStreamSynchronize at the end of a threads collective");
}

/// DeviceMover::preload: the reduction kernel of every dtype, loaded on the current device.
template <class... T>
void load_threads_reduce_kernels() {
  (amsp::detail::load_cuda_kernel(reinterpret_cast<const void*>(&threads_reduce_kernel<T>), "comm.cuda",
                                  "the threads backend's reduction kernel"),
   ...);
}
inline void preload_cuda_mover_kernels() { load_threads_reduce_kernels<float, double, bf16, fp16>(); }

inline constexpr DeviceMover cuda_device_mover{&locate_cuda_buffer, &move_cuda_buffers, &preload_cuda_mover_kernels};

inline bool install_cuda_device_mover() noexcept {
  threads_device_mover.store(&cuda_device_mover, std::memory_order_release);
  return true;
}

/// Installs the mover before main (an inline variable: one initialisation per program however
/// many files include this header).
inline const bool cuda_device_mover_installed = install_cuda_device_mover();

}  // namespace amsp::comm::detail
