#pragma once
// Memory spaces as types (the Kokkos idiom): code is specialised on where its buffers live.
// HostSpace is always available; CudaSpace is declared everywhere so that host code can name it,
// but allocating in it needs amsp/core/cuda_buffer.hpp and the CUDA runtime.

#include <cstdint>
#include <string_view>

namespace amsp {

enum class memory_kind : std::uint8_t { host, cuda };

struct HostSpace {
  static constexpr memory_kind kind = memory_kind::host;
  static constexpr std::string_view name = "host";
};

struct CudaSpace {
  static constexpr memory_kind kind = memory_kind::cuda;
  static constexpr std::string_view name = "cuda";
};

template <class S>
concept memory_space = requires {
  { S::kind } -> std::convertible_to<memory_kind>;
};

[[nodiscard]] constexpr std::string_view name_of(memory_kind kind) {
  return kind == memory_kind::host ? "host" : "cuda";
}

}  // namespace amsp
