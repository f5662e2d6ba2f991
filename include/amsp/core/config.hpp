#pragma once
// Build-wide markers. One header serves g++ and nvcc: under a host compiler the host/device
// markers become plain inline functions.

#if defined(__CUDACC__)
#define AMSP_HOST_DEVICE __host__ __device__
#define AMSP_FORCE_INLINE __forceinline__
#else
#define AMSP_HOST_DEVICE
#define AMSP_FORCE_INLINE inline __attribute__((always_inline))
#endif

#define AMSP_VERSION_MAJOR 0
#define AMSP_VERSION_MINOR 1
#define AMSP_VERSION_PATCH 0
