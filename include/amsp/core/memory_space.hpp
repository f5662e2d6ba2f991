#pragma once
// Memory spaces as types (the Kokkos idiom): code is specialised on where its buffers live.
// host_space is always available; cuda_space is declared everywhere so that host code can name it,
// but allocating in it needs amsp/core/cuda_buffer.hpp and the CUDA runtime.

#include <cstdint>
#include <string_view>

namespace amsp {

enum class memory_kind : std::uint8_t { host, cuda };

struct host_space {
  static constexpr memory_kind kind = memory_kind::host;
  static constexpr std::string_view name = "host";
};

struct cuda_space {
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
