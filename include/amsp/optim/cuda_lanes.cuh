#pragma once
// Device-side helpers shared by the optimizer and engine kernels: 16-byte vector loads and stores of
// eight elements (two float4 for fp32, one 16-byte word for bf16), the alignment test that decides
// whether a buffer can be walked eight elements at a time, the grid-stride walk over groups of eight
// and the elements around them, and the launch geometry.

#if !defined(__CUDACC__)
#error "amsp/optim/cuda_lanes.cuh holds CUDA device code: include it from a .cu file compiled by nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "amsp/core/cuda_buffer.hpp"
#include "amsp/core/dtype.hpp"

namespace amsp::optim::detail {

/// Elements one thread handles per loop trip: 32 bytes of each fp32 stream, 16 of each bf16.
inline constexpr int cuda_lanes = 8;
inline constexpr int cuda_block = 256;
/// Resident blocks per SM the grid-stride kernels aim for: enough to hide memory latency.
inline constexpr int cuda_blocks_per_sm = 8;

template <class T>
__device__ __forceinline__ void load8(const T* p, float (&out)[cuda_lanes]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = __uint_as_float(words[k] << 16);
      out[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
    }
  }
}

template <class T>
__device__ __forceinline__ void store8(T* p, const float (&in)[cuda_lanes]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
  } else {
    std::uint32_t words[4];
    for (int k = 0; k < 4; ++k)
      words[k] = static_cast<std::uint32_t>(bf16::from_float(in[2 * k]).bits) |
                 (static_cast<std::uint32_t>(bf16::from_float(in[2 * k + 1]).bits) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

/// True when p + offset can be read with load8 (16-byte aligned).
template <class T>
[[nodiscard]] inline bool vector_aligned(const T* p, std::size_t offset) {
  return p == nullptr || reinterpret_cast<std::uintptr_t>(p + offset) % 16 == 0;
}

/// First element index h < cuda_lanes at which every pointer can be read eight at a time, or n
/// (every element then goes through the one-lane path). Null pointers do not constrain it.
template <class... T>
[[nodiscard]] std::size_t vector_head(std::size_t n, const T*... pointers) {
  for (std::size_t h = 0; h < cuda_lanes && h <= n; ++h)
    if ((vector_aligned(pointers, h) && ...)) return h;
  return n;
}

/// The grid-stride walk of an element-wise kernel over [0, n): `vectors` groups of eight elements
/// from `head` (vector_head), each by body8(first index of the group), then every other element
/// (before head, after the last group) by body1(index). Each element is visited exactly once.
template <class Body8, class Body1>
__device__ __forceinline__ void walk_lane_groups(std::size_t n, std::size_t head, std::size_t vectors, Body8&& body8,
                                                 Body1&& body1) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t v = first; v < vectors; v += stride) body8(head + v * cuda_lanes);
  const std::size_t body_end = head + vectors * cuda_lanes;
  for (std::size_t j = first; j < head + (n - body_end); j += stride) body1(j < head ? j : body_end + (j - head));
}

/// Groups of eight a kernel walks for n elements from `head`, and the threads to launch for them.
[[nodiscard]] inline std::size_t lane_groups(std::size_t n, std::size_t head) { return (n - head) / cuda_lanes; }
[[nodiscard]] inline std::size_t lane_items(std::size_t n, std::size_t vectors) { return vectors > 0 ? vectors : n; }

/// Blocks for a grid-stride kernel over `items` thread-iterations on the current device. Queries
/// the device attribute, which does not synchronise.
[[nodiscard]] inline unsigned grid_for(std::size_t items) {
  int device = 0, sms = 0;
  amsp::detail::check_cuda(cudaGetDevice(&device), "cuda.runtime", "cudaGetDevice");
  amsp::detail::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cuda.runtime",
             "cudaDeviceGetAttribute(multiProcessorCount)");
  const std::size_t wanted = (items + cuda_block - 1) / cuda_block;
  const std::size_t cap = static_cast<std::size_t>(sms) * cuda_blocks_per_sm;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

}  // namespace amsp::optim::detail
